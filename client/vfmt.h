/* vfmt.h - private to `tlcap violations` (violations.c) and its unit test: a ViolationsReply as
 * the table people read and as the JSON document scripts read. Pure (no I/O but the output).
 */
#ifndef TLC_CLI_VFMT_H
#define TLC_CLI_VFMT_H

#include "base/json.h"
#include "base/out.h"

#include <tlcap.pb-c.h>

/* The table: a header line, then a row per (budget, area, context) with violations, and a row
 * for a budget with none (its area and context as the budget file writes them, total 0):
 *   BUDGET  AREA  CONTEXT  STAT  LIMIT  TOTAL  WORST  WORST_AT  LAST  LAST_AT  REF
 * WORST and LAST are values (durations with their unit, a count for rate), *_AT the wall clock
 * (RFC 3339 UTC, ms) when known, else the target time (ns:N); REF `v:BUDGET:N` names the row's
 * worst kept violation for `tlcap around`. Values the reply does not hold (a row none of whose
 * violations is kept) are "-". Ends with a line for dropped_keys when not 0. Appends to o. */
void tlc_cli_vfmt_table(tlc_out_t *o, const Tlcap__ViolationsReply *r);

/* The JSON document: {"target", "total", "dropped_keys", "budgets": [{"name", "area",
 * "context", "stat", "max"/"min" (ns, or a count for rate; only those set), "window_ns" (rate),
 * "origin", "total", "worst": VIOLATION or null, "recent": [VIOLATION...], "counts": [{"handle",
 * "area", "context", "state", "count"}]}]}, VIOLATION = {"budget", "stat", "handle", "area",
 * "context", "over", "value", "limit", "start_ns", "end_ns", "epoch", "wall_ms", "seq_start",
 * "seq_end", "number", "ref", "seg_first", "off_first", "seg_last", "off_last"}. */
void tlc_cli_vfmt_json(tlc_json_w_t *w, const Tlcap__ViolationsReply *r);

/* A duration in ns as people write it (250ns, 1.5us, 1.05ms, 2s): at most 3 decimals, no
 * trailing zeros. Into buf; returns buf. */
char *tlc_cli_vfmt_dur(int64_t ns, char *buf, size_t len);

#endif
