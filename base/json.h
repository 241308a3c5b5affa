/* json.h - the JSON writer every JSON document of tlcap is written with (the statistics export
 * in formats/json.c, the CLI's output, the stats dump, the HTTP API). Pure: writes into a
 * tlc_out_t, no allocation.
 */
#ifndef TLC_BASE_JSON_H
#define TLC_BASE_JSON_H

#include "base/out.h"

#include <stdint.h>

/* The JSON writer: members of objects and elements of arrays, with the commas between them and,
 * unless `compact`, one per line indented by depth. A writer's state (compact, depth, first) may
 * be carried from one output to another (the stats dump writes its document in parts). */
typedef struct tlc_json_w {
  tlc_out_t *o;
  int compact, depth;
  int first; /* no comma needed before the next member */
} tlc_json_w_t;

/* A writer at the top level of a document (depth 0, nothing written yet). */
void tlc_json_w_init(tlc_json_w_t *w, tlc_out_t *o, int compact);
/* Starts the next member (`k`: its key) or array element (k NULL): comma, newline, indent. */
void tlc_json_w_key(tlc_json_w_t *w, const char *k);
/* Opens an object (c '{') or an array (c '[') as member k / next element, and closes it. */
void tlc_json_w_open(tlc_json_w_t *w, const char *k, char c);
void tlc_json_w_close(tlc_json_w_t *w, char c);
/* Members / elements: integers, a string (NULL: null; escaped as tlc_json_string). */
void tlc_json_w_u64(tlc_json_w_t *w, const char *k, uint64_t v);
void tlc_json_w_i64(tlc_json_w_t *w, const char *k, int64_t v);
void tlc_json_w_str(tlc_json_w_t *w, const char *k, const char *v);
void tlc_json_w_bool(tlc_json_w_t *w, const char *k, int v);
/* A 32-bit value as an 8-digit upper-case hex string ("0000ABCD"): handles, areas. */
void tlc_json_w_hex8(tlc_json_w_t *w, const char *k, uint32_t v);
/* A value already written as JSON text by the caller (a number in a chosen precision). */
void tlc_json_w_raw(tlc_json_w_t *w, const char *k, const char *json);

/* Writes s as a JSON string literal: quotes, backslash and control characters escaped; valid
 * UTF-8 passed through; invalid bytes written as \ufffd. */
void tlc_json_string(tlc_out_t *o, const char *s);

/* Writes an unsigned 128-bit integer hi * 2^64 + lo in decimal. */
void tlc_out_u128(tlc_out_t *o, uint64_t hi, uint64_t lo);

#endif
