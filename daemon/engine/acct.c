/* acct.c - the engine's memory accounting (engine.h: tlc_engine_acct_t, tlc_engine_mem): growth
 * charged to the accounting hook before it is made, the engine's memory as the hook should see
 * it, and the two brought back in line after a load or a clear.
 *
 * Invariant: e->charged == tlc_engine_mem().bytes after every engine call; growth that the hook
 * refuses (its budget) is not made, except TLC_ACCT_FORCE (the fixed part, a histogram's slow
 * count, a snapshot's scratch), which is charged anyway.
 *
 * Cost: a growth is one hook call more than tlc_grow; tlc_engine_mem is O(contexts).
 *
 * Does not: decide a budget (the hook does: daemon/ingest/target.c, budget.c), or charge per event:
 * take and give, which the growth paths of the push loop use, are inline in engine-int.h.
 */
#include "engine/engine-int.h"
#include "engine/engine.h"

#include "base/alloc.h"

#include <stdint.h>
#include <string.h>

/* tlc_grow (same contract) with the growth charged first as `kind`: the doubled capacity, or,
 * when that is refused, need plus an eighth (so that an engine near the budget grows by what it
 * needs, not by half of what it has). */
void *tlc__engine_grow(tlc_engine_t *e, void *p, size_t *cap, size_t need, size_t elem,
                       size_t first, int kind) {
  size_t c = *cap, nc = c ? c : first;
  void *np;
  if (need <= c)
    return p;
  while (nc < need) {
    if (nc > SIZE_MAX / 2)
      return NULL;
    nc *= 2;
  }
  if (nc > SIZE_MAX / elem)
    return NULL;
  if (tlc__engine_acct_take(e, (nc - c) * elem, kind) < 0) {
    size_t small = need + need / 8;
    if (small >= nc || tlc__engine_acct_take(e, (small - c) * elem, kind) < 0)
      return NULL;
    nc = small;
  }
  np = tlc_realloc(p, nc * elem);
  if (np == NULL) {
    tlc__engine_acct_give(e, (nc - c) * elem);
    return NULL;
  }
  *cap = nc;
  return np;
}

void tlc__engine_acct_sync(tlc_engine_t *e) {
  tlc_engine_mem_t m;
  tlc_engine_mem(e, &m);
  if (m.bytes > e->charged)
    (void)tlc__engine_acct_take(e, m.bytes - e->charged, TLC_ACCT_FORCE);
  else if (m.bytes < e->charged)
    tlc__engine_acct_give(e, e->charged - m.bytes);
}

void tlc_engine_mem(const tlc_engine_t *e, tlc_engine_mem_t *m) {
  size_t i, stacks = 0;
  for (i = 0; i < e->nctx; i++)
    stacks += (size_t)e->ctx[i].cap * sizeof(act_t);
  memset(m, 0, sizeof(*m));
  m->hist_bytes = e->hist_bytes;
  m->window_bytes = e->win_bytes;
  m->bytes = sizeof(*e) + e->hcap * sizeof(hent_t) +
             (e->rows_raw != NULL ? (e->caprows + 1) * sizeof(erow_t) : 0) +
             e->capxt * sizeof(xrow_t) + e->capsa * sizeof(sarea_t) + e->capctx * sizeof(ectx_t) +
             e->captctx * sizeof(uint32_t) + stacks + e->hist_bytes + e->win_bytes +
             (e->hlog != NULL ? (HLOG + HLOG_AHEAD) * sizeof(hlent_t) : 0) +
             (e->slog != NULL ? TLC_SLOG_BLOCK * sizeof(tlc_engine_slent_t) : 0) +
             e->capgrp * sizeof(grp_t) + e->capsmap * sizeof(uint32_t) + e->capschg +
             e->capord * sizeof(uint32_t) + /* the last four: snapshot scratch */
             e->captapx * sizeof(struct etapx) + e->captband * sizeof(struct etband);
  m->areas = e->nrows;
  m->contexts = e->nctx;
}
