/* json.h - JSON export of a target's statistics (schema: docs/json-schema.md), and the JSON
 * writer every JSON document of tlcap is written with (the CLI's, the stats dump's).
 *
 * Everything the table holds: counters, contexts with names, and per row COUNT, totals, every
 * sample distribution (n, sum, min, max, avg, exact sum of squares, sigma, quantiles) and the
 * rolling windows. Pure: writes into a tlc_out_t.
 */
#ifndef TLC_JSON_H
#define TLC_JSON_H

#include "mapping.h"
#include "out.h"
#include "stats.h"

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

/* Writes `t` (sorted) as one JSON document followed by a newline. `m` gives names (may be
 * NULL). `target` names the target (may be NULL). With `compact`, no indentation (one line,
 * for `tlcap watch`). Returns 0 or the output's error. */
int tlc_json_write(tlc_out_t *o, const tlc_table_t *t, const tlc_mapping_t *m, const char *target,
                   int compact);

/* The same document in parts, for statistics taken in parts (the daemon's stats dump, written
 * off its loop): tlc_json_begin writes everything before the rows from t's header (counters,
 * contexts; its rows are not written), tlc_json_rows the rows of each part in turn (tables with
 * the same header, sorted, each part's keys after the previous part's), tlc_json_end the rest.
 * `st` carries the writer's state from call to call (each call writes to its `o`). Each returns
 * 0 or the output's error. */
typedef tlc_json_w_t tlc_json_part_t;
int tlc_json_begin(tlc_json_part_t *st, tlc_out_t *o, const tlc_table_t *t, const tlc_mapping_t *m,
                   const char *target, int compact);
int tlc_json_rows(tlc_json_part_t *st, tlc_out_t *o, const tlc_table_t *t, const tlc_mapping_t *m);
int tlc_json_end(tlc_json_part_t *st, tlc_out_t *o);
/* The same document as member `key` of the object the writer `w` is in (the stats dump's
 * "stats" of a target): tlc_json_begin_member opens it (w writes to o), tlc_json_rows goes on,
 * tlc_json_end_member closes it (no newline after it). */
int tlc_json_begin_member(tlc_json_w_t *w, tlc_out_t *o, const char *key, const tlc_table_t *t,
                          const tlc_mapping_t *m, const char *target);
int tlc_json_end_member(tlc_json_w_t *w, tlc_out_t *o);

/* Writes s as a JSON string literal: quotes, backslash and control characters escaped; valid
 * UTF-8 passed through; invalid bytes written as \ufffd. */
void tlc_json_string(tlc_out_t *o, const char *s);

/* Writes an unsigned 128-bit integer hi * 2^64 + lo in decimal. */
void tlc_out_u128(tlc_out_t *o, uint64_t hi, uint64_t lo);

#endif
