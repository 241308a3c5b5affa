/* budget/report.h - a watch's violations as a document (SPEC section 13, docs/budgets.md):
 * what `tlcapd replay --budgets` prints and what HTTP GET /api/v1/targets/NAME/violations
 * serves, written by the same code.
 *
 * JSON: {"target", ["budgets_file",] "violations": all, "budgets": [{name, origin, stat, area,
 * context, [min], [max], [window_ns], violations, [worst]}], "counts": [{budget, handle, area,
 * context, violations}], "violations_kept": [...], "worst": [...]}. A violation: {budget, stat,
 * handle, area, context, limit_kind, value, limit, start_ns, end_ns, epoch, seq_start,
 * seq_end, number, [wall_ms] (when nonzero), ref ("v:BUDGET:N", N = its number: what `tlcap
 * around` takes)}. Text (Text1-like tables): BUDGETS, COUNTS, VIOLATIONS, WORST.
 * A NULL watch is the document with zero budgets.
 */
#ifndef TLC_DAEMON_BUDGET_REPORT_H
#define TLC_DAEMON_BUDGET_REPORT_H

#include "base/out.h"
#include "budget/budget.h"

#include <stddef.h>
#include <stdint.h>

/* The displayed names of a violation's or counter's area (a state row: "VARIABLE = VALUE")
 * and context ("-" when not per context) into area[alen] and ctx[clen]. */
typedef void (*tlc_breport_names_fn)(void *ud, uint32_t handle, uint8_t row_kind, uint64_t state,
                                     uint32_t context, char *area, size_t alen, char *ctx,
                                     size_t clen);

typedef struct tlc_breport_opts {
  int json;                 /* 1: JSON, 0: text */
  const char *target;       /* the target's name (NULL: JSON null, text "-") */
  const char *budgets_file; /* written when not NULL */
  const char *budget;       /* only this budget (NULL: every one) */
  size_t keep;              /* kept violations listed per budget at most (0: all the watch keeps) */
  tlc_breport_names_fn names;
  void *ud;
} tlc_breport_opts_t;

/* Writes the report of w (NULL: no budgets) to o. 0 or TLC_ENOMEM (nothing written). */
int tlc_breport_write(const tlc_bwatch_t *w, tlc_out_t *o, const tlc_breport_opts_t *ro);

/* The reference of violation v of budget `name`: "v:NAME:N". Into buf. */
const char *tlc_breport_ref(const char *name, const tlc_violation_t *v, char *buf, size_t len);

#endif
