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

/* Writes s as a JSON string literal: quotes, backslash and control characters escaped; valid
 * UTF-8 passed through; invalid bytes written as \ufffd. */
void tlc_json_string(tlc_out_t *o, const char *s);

/* Writes an unsigned 128-bit integer hi * 2^64 + lo in decimal. */
void tlc_out_u128(tlc_out_t *o, uint64_t hi, uint64_t lo);

#endif
