/* replay_gate.c - `tlcapd replay --budgets FILE`: the budget gate (SPEC 13, docs/budgets.md):
 * the watch as the engine's tap over the capture, then its report (budget/report.h).
 */
#include "daemon/replay-int.h"

#include "base/alloc.h"
#include "base/err.h"
#include "base/out.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include "base/fileread.h"
#include "budget/report.h"
#include "formats/evmap.h"

/* An area's name: the mapping's, else the evlog mapping's (names as the stream brings them). */
static const char *gate_area_name(void *ud, uint32_t handle) {
  rp_t *rp = ud;
  const tlc_map_area_t *a = rp->has_mapping ? tlc_mapping_find(&rp->mapping, handle) : NULL;
  if (a != NULL && a->name[0] != '\0')
    return a->name;
  if (rp->stream != NULL && rp->stream->pipe.evmap != NULL)
    return tlc_evmap_name(rp->stream->pipe.evmap, handle);
  return NULL;
}

/* A context's name as the exports show it: a task's CONTEXTS name, else core<N>, task<HEX>,
 * thread<HEX> (tlc_ctx_name). */
static const char *gate_ctx_name(void *ud, uint32_t context, char *buf, size_t len) {
  rp_t *rp = ud;
  tlc_ctx_t c;
  const char *n;
  if (rp->stream == NULL || rp->stream->pipe.engine == NULL ||
      tlc_engine_context(rp->stream->pipe.engine, context, &c) != 0)
    return NULL;
  if (c.kind == TLC_CTXK_TASK && rp->has_mapping &&
      (n = tlc_mapping_ctx_name(&rp->mapping, c.key)) != NULL)
    return n;
  if (c.kind == TLC_CTXK_CORE && c.core == TLC_CORE_UNKNOWN)
    snprintf(buf, len, "core?");
  else if (c.kind == TLC_CTXK_CORE)
    snprintf(buf, len, "core%u", (unsigned)c.core);
  else
    snprintf(buf, len, "%s%llX", c.kind == TLC_CTXK_TASK ? "task" : "thread",
             (unsigned long long)c.key);
  return buf;
}

static int64_t gate_wall(void *ud) {
  (void)ud;
  return 0; /* a replay has no arrival time */
}

/* --around v:BUDGET:N: every violation as the gate counts it; the one named is kept, however
 * many came after it (the watch keeps only the last budget_keep). */
static void vref_seen(void *ud, const tlc_violation_t *v) {
  rp_t *rp = ud;
  const tlc_tbudget_t *b = tlc_bwatch_budget(rp->watch, v->budget);
  if (!rp->vfound && v->count == rp->vn && b != NULL && strcmp(b->name, rp->vname) == 0) {
    rp->vfirst = *v;
    rp->vfound = 1;
  }
}

/* Reads --budgets and makes the watch for the target the inputs name. 0 or the exit status. */
int tlc__rp_gate_load(rp_t *rp) {
  char *text = NULL, err[600];
  size_t len = 0;
  tlc_bwatch_opts_t o;
  int r = tlc_file_read(rp->budgets_path, 16u << 20, &text, &len);
  if (r < 0) {
    fprintf(stderr, "tlcapd replay: %s: %s\n", rp->budgets_path, tlc_strerror(r));
    return 2;
  }
  r = tlc_tbudget_parse(&rp->budgets, text, len, rp->budgets_path, err, sizeof(err));
  tlc_free(text);
  if (r != 0) {
    fprintf(stderr, "tlcapd replay: %s\n", r == -1 ? err : tlc_strerror(r));
    return 2;
  }
  memset(&o, 0, sizeof(o));
  o.area_name = gate_area_name;
  o.ctx_name = gate_ctx_name;
  o.wall_ms = gate_wall;
  o.on_violation = rp->has_vref ? vref_seen : NULL;
  o.ud = rp;
  if (tlc_bwatch_new(&rp->watch, rp->json_target != NULL ? rp->json_target : "", &rp->budgets,
                     &o) != 0) {
    fprintf(stderr, "tlcapd replay: %s\n", tlc_strerror(TLC_ENOMEM));
    return 1;
  }
  return 0;
}

/* The displayed names of a violation's or counter's area and context. */
static void gate_names(void *ud, uint32_t handle, uint8_t row_kind, uint64_t state,
                       uint32_t context, char *area, size_t alen, char *ctx, size_t clen) {
  rp_t *rp = ud;
  const char *n;
  if (row_kind == TLC_ROW_STATE) {
    (void)tlc_mapping_state_display(rp->has_mapping ? &rp->mapping : NULL, handle, state, area,
                                    alen);
  } else if ((n = gate_area_name(rp, handle)) != NULL && n[0] != '\0') {
    snprintf(area, alen, "%s", n);
  } else {
    snprintf(area, alen, "%08X", handle);
  }
  if (context == TLC_CTX_NONE || (n = gate_ctx_name(rp, context, ctx, clen)) == NULL)
    snprintf(ctx, clen, "-");
  else if (n != ctx)
    snprintf(ctx, clen, "%s", n);
}

/* The gate's report (budget/report.h): the budgets with their totals, the counts per
 * (budget, area, context), the kept violations of each budget (oldest first) and each
 * budget's worst. */
static void gate_report(rp_t *rp, tlc_out_t *o) {
  tlc_breport_opts_t ro;
  memset(&ro, 0, sizeof(ro));
  ro.json = rp->export_ == EX_JSON;
  ro.target = rp->json_target;
  ro.budgets_file = rp->budgets_path;
  ro.names = gate_names;
  ro.ud = rp;
  if (tlc_breport_write(rp->watch, o, &ro) != 0)
    fprintf(stderr, "tlcapd replay: %s\n", tlc_strerror(TLC_ENOMEM));
}

/* Pass 1 with the watch as the engine's tap, then the report. 0 (none), 3 (violations) or 1. */
int tlc__rp_budget_gate(rp_t *rp, tlc_hist_stream_t *s, tlc_out_t *o) {
  const tlc_event_t *evs;
  if (rp->export_ != EX_TEXT1 && rp->export_ != EX_JSON) {
    fprintf(stderr, "tlcapd replay: --budgets prints its report as text1 or json\n");
    return 2;
  }
  rp->stream = s;
  while (tlc_hist_stream_next(s, &evs) > 0)
    ;
  gate_report(rp, o);
  rp->stream = NULL;
  return tlc_bwatch_all(rp->watch) > 0 ? 3 : 0;
}
