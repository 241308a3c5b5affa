/* aprofw.h - aprof report writer (the seed's 12-number `p`/`q` layout, headed `v 4`: the
 * version the aprof tools give that layout).
 *
 * Routines are the function areas (handle type 0) of a capture; each routine gets one
 * performance point (rms 0: a timeline has no input-size signal) over its activations recorded
 * from E to X; the calling context tree (CCT) comes from the activation stacks per context
 * (core, task or thread) as `x` lines with `q` points. Costs are times: microseconds
 * (`m time-usec`, each activation rounded to the nearest microsecond, except that a nonzero
 * cost below 0.5 us is written as 1 and counted in a `c` line, since aprof-plot drops points
 * whose min, max or sum is 0) or, with `ns`, the
 * documented variant `m time-nsec`. cumulative cost = E..X time (CALL), self cost = running time
 * (NET), real-sum counts an activation only when no enclosing activation of the same routine is
 * open (aprof's recursion rule). Squares saturate at 2^64-1 (the format's fields are 64-bit).
 *
 * Pure: reads a timeline and an optional mapping, writes into a tlc_out_t.
 */
#ifndef TLC_APROFW_H
#define TLC_APROFW_H

#include "base/out.h"
#include "formats/mapping.h"
#include "formats/stats.h"
#include "formats/timeline.h"

typedef struct tlc_aprofw_opts {
  int ns;              /* 1: costs in ns (`m time-nsec`), 0: microseconds (`m time-usec`) */
  const char *app;     /* `a` line (default "tlcap") */
  const char *command; /* `f` line, omitted when NULL */
  size_t max_routines; /* cap (default 1,000,000); further routines are counted, not written */
  size_t max_nodes;    /* CCT cap (default 4,000,000) */
  size_t max_depth;    /* activation stack cap per context (default 4096) */
} tlc_aprofw_opts_t;

/* Writes the report for the events of `tl`. `t` (may be NULL) supplies the format (evlog:
 * contexts are threads), context_area and the total time for the `k` line; `m` supplies
 * routine names and files (`r "name" "file" id`). Returns 0 or a negative error. */
int tlc_aprof_write(tlc_out_t *o, const tlc_aprofw_opts_t *opts, const tlc_table_t *t,
                    const tlc_mapping_t *m, tlc_timeline_t *tl);

#endif
