/* json.h - JSON export of a target's statistics (schema: docs/json-schema.md).
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

/* Writes `t` (sorted) as one JSON document followed by a newline. `m` gives names (may be
 * NULL). `target` names the target (may be NULL). With `compact`, no indentation (one line,
 * for `tlcap watch`). Returns 0 or the output's error. */
int tlc_json_write(tlc_out_t *o, const tlc_table_t *t, const tlc_mapping_t *m, const char *target,
                   int compact);

/* The same document in parts, for statistics taken in parts (the daemon's stats dump, written
 * off its loop): tlc_json_begin writes everything before the rows from t's header (counters,
 * contexts; its rows are not written), tlc_json_rows the rows of each part in turn (tables with
 * the same header, sorted, each part's keys after the previous part's), tlc_json_end the rest.
 * `st` carries the writer's state from call to call. Each returns 0 or the output's error. */
typedef struct tlc_json_part {
  int compact, depth, first;
} tlc_json_part_t;
int tlc_json_begin(tlc_json_part_t *st, tlc_out_t *o, const tlc_table_t *t, const tlc_mapping_t *m,
                   const char *target, int compact);
int tlc_json_rows(tlc_json_part_t *st, tlc_out_t *o, const tlc_table_t *t, const tlc_mapping_t *m);
int tlc_json_end(tlc_json_part_t *st, tlc_out_t *o);

/* Writes s as a JSON string literal: quotes, backslash and control characters escaped; valid
 * UTF-8 passed through; invalid bytes written as \ufffd. */
void tlc_json_string(tlc_out_t *o, const char *s);

/* Writes an unsigned 128-bit integer hi * 2^64 + lo in decimal. */
void tlc_out_u128(tlc_out_t *o, uint64_t hi, uint64_t lo);

#endif
