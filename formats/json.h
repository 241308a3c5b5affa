/* json.h - JSON export of a target's statistics (schema: docs/json-schema.md), and the JSON
 * writer every JSON document of tlcap is written with (the CLI's, the stats dump's).
 *
 * Everything the table holds: counters, contexts with names, and per row COUNT, totals, every
 * sample distribution (n, sum, min, max, avg, exact sum of squares, sigma, quantiles) and the
 * rolling windows. Pure: writes into a tlc_out_t.
 */
#ifndef TLC_JSON_H
#define TLC_JSON_H

#include "base/json.h"
#include "base/out.h"
#include "formats/mapping.h"
#include "formats/stats.h"

#include <stdint.h>

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

#endif
