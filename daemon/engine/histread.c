/* histread.c - the reads of the rows' histograms for exporters (engine.h: tlc_engine_hist_edge,
 * tlc_engine_hist_cum, tlc_engine_code_hist, tlc_engine_code_hists): cumulative sample counts
 * at bucket edges, as /metrics' Prometheus histograms give them.
 *
 * Exact: an edge must be a bucket's last value (tlc_engine_hist_edge), so that every count is a
 * sum of whole buckets and none is guessed. The queued samples are counted first
 * (tlc__engine_hlog_flush), so a read sees every sample pushed before it.
 *
 * Cost: O(the row's histogram spans + edges) per row; code_hist and code_hists find a row
 * through the ref of the last tlc_engine_code_net (snapshot.c) while it is still the row's,
 * without a lookup by handle, and code_hists prefetches the rows' headers and spans by blocks
 * of entries, so that a scrape of thousands of areas overlaps their cache misses.
 *
 * Does not: change a histogram (only the queue's flush counts), or read the windows.
 */
#include "engine/engine-int.h"
#include "engine/engine.h"

#include "base/err.h"
#include "engine/hist.h"

#include <string.h>

int64_t tlc_engine_hist_edge(int64_t x) {
  uint64_t lo, hi;
  uint32_t b;
  if (x < 256)
    return x < 0 ? 0 : x;
  b = tlc__hist_idx(x);
  tlc__hist_bounds(b, &lo, &hi);
  /* the bucket's last value, or the one before its first (the previous bucket's last) */
  return (int64_t)(hi - (uint64_t)x <= (uint64_t)x - (lo - 1) ? hi : lo - 1);
}

#define HIST_MAX_EDGES 64

/* The bucket of each edge into eb; 0, or TLC_EINVAL when le is not ascending edges. */
static int edge_buckets(const int64_t *le, size_t nle, uint32_t *eb) {
  size_t i;
  if (nle > HIST_MAX_EDGES)
    return TLC_EINVAL;
  for (i = 0; i < nle; i++) {
    if (le[i] < 0 || (i > 0 && le[i] <= le[i - 1]))
      return TLC_EINVAL;
    eb[i] = tlc__hist_idx(le[i]);
    /* a bucket's last value: the next value is in the next bucket (no guessed count) */
    if (le[i] == INT64_MAX || tlc__hist_idx(le[i] + 1) == eb[i])
      return TLC_EINVAL;
  }
  return 0;
}

int tlc_engine_hist_cum(tlc_engine_t *e, uint32_t handle, uint32_t context, unsigned k,
                        const int64_t *le, size_t nle, uint64_t *cum) {
  uint32_t eb[HIST_MAX_EDGES];
  uint64_t slot[HIST_MAX_EDGES + 1];
  size_t i, found = 0;
  if (e->hlog == NULL || k >= NK || edge_buckets(le, nle, eb) != 0)
    return TLC_EINVAL;
  if (!e->ctxmode && k == TLC_GROSS)
    k = TLC_CALL; /* GROSS == CALL: only CALL's samples are kept */
  if (e->hcur != e->hlog)
    tlc__engine_hlog_flush(e);
  memset(slot, 0, sizeof(slot));
  for (i = 0; i < e->ntctx; i++) {
    uint32_t ri;
    if (context != TLC_CTX_NEUTRAL && context != i)
      continue;
    ri = tlc__engine_code_row(e, handle, e->tctx[i]);
    if (ri == NONE32)
      continue;
    found++;
    tlc__hist_cum(&e->rows[ri].k[k].h, eb, nle, slot);
  }
  if (found == 0)
    return TLC_ERANGE;
  for (i = 0; i < nle; i++)
    cum[i] = (i > 0 ? cum[i - 1] : 0) + slot[i];
  return 0;
}

/* 1 while x->ref names rows of the last tlc_engine_code_net that are still x's. */
static int code_ref_ok(const tlc_engine_t *e, const tlc_engine_code_net_t *x) {
  size_t j = x->ref;
  if (x->context == TLC_CTX_NEUTRAL)
    return !(e->ntctx < 2 || e->grp == NULL || e->grp_nrows != e->nrows ||
             e->grp_gen != e->ctxgen || j >= e->ngrp || e->grp[j].handle != x->handle ||
             (j > 0 && e->grp[j - 1].handle == x->handle));
  return !(j >= e->nrows || e->rows[j].kind != TLC_ROW_CODE || e->rows[j].handle != x->handle ||
           e->rows[j].ctx == NONE32 || e->ctx[e->rows[j].ctx].tindex != x->context);
}

/* The cumulative counts of x's rows (code_ref_ok), kind k (GROSS already CALL where it is), at
 * the edge buckets eb[0..nle); queued samples counted already. */
static void code_cum(const tlc_engine_t *e, const tlc_engine_code_net_t *x, unsigned k,
                     const uint32_t *eb, size_t nle, uint64_t *cum) {
  uint64_t slot[HIST_MAX_EDGES + 1];
  size_t i, j = x->ref;
  memset(slot, 0, (nle + 1) * sizeof(slot[0]));
  if (x->context != TLC_CTX_NEUTRAL)
    tlc__hist_cum(&e->rows[j].k[k].h, eb, nle, slot);
  else
    for (; j < e->ngrp && e->grp[j].handle == x->handle; j++)
      tlc__hist_cum(&e->rows[e->grp[j].row].k[k].h, eb, nle, slot);
  for (i = 0; i < nle; i++)
    cum[i] = (i > 0 ? cum[i - 1] : 0) + slot[i];
}

int tlc_engine_code_hist(tlc_engine_t *e, const tlc_engine_code_net_t *x, unsigned k,
                         const int64_t *le, size_t nle, uint64_t *cum) {
  uint32_t eb[HIST_MAX_EDGES];
  /* ref names rows of the last tlc_engine_code_net: used only while they are still x's */
  if (!code_ref_ok(e, x))
    return tlc_engine_hist_cum(e, x->handle, x->context, k, le, nle, cum);
  if (e->hlog == NULL || k >= NK || edge_buckets(le, nle, eb) != 0)
    return TLC_EINVAL;
  if (!e->ctxmode && k == TLC_GROSS)
    k = TLC_CALL;
  if (e->hcur != e->hlog)
    tlc__engine_hlog_flush(e);
  code_cum(e, x, k, eb, nle, cum);
  return 0;
}

/* The hist_cum prefetch of x's rows: their histogram headers (span 0) or the first lines of
 * their spans (span 1, once the headers are there). */
static void code_hists_prefetch(const tlc_engine_t *e, const tlc_engine_code_net_t *x, unsigned k,
                                int span) {
  size_t j = x->ref, end;
  if (x->context != TLC_CTX_NEUTRAL) {
    if (j >= e->nrows)
      return;
    end = j + 1;
  } else {
    if (e->grp == NULL || j >= e->ngrp)
      return;
    end = j;
    while (end < e->ngrp && e->grp[end].handle == e->grp[j].handle && end - j < 8)
      end++;
  }
  for (; j < end; j++) {
    size_t ri = x->context != TLC_CTX_NEUTRAL ? j : e->grp[j].row;
    const tlc_hist_t *h;
    if (ri >= e->nrows)
      return;
    h = &e->rows[ri].k[k].h;
    if (!span) {
      __builtin_prefetch(h);
    } else if (h->b != NULL) {
      size_t bytes = (size_t)h->nb * sizeof(uint16_t), o;
      for (o = 0; o < bytes && o < 1024; o += 64)
        __builtin_prefetch((const char *)h->b + o);
    }
  }
}

#define HISTS_BLOCK 16 /* entries whose spans are asked for at once */

int tlc_engine_code_hists(tlc_engine_t *e, const tlc_engine_code_net_t *xs, size_t nx, unsigned k,
                          const int64_t *le, size_t nle, uint64_t *cum, int *ok) {
  uint32_t eb[HIST_MAX_EDGES];
  size_t i;
  if (e->hlog == NULL || k >= NK || edge_buckets(le, nle, eb) != 0) {
    for (i = 0; i < nx; i++)
      ok[i] = 0;
    return TLC_EINVAL;
  }
  if (!e->ctxmode && k == TLC_GROSS)
    k = TLC_CALL;
  if (e->hcur != e->hlog)
    tlc__engine_hlog_flush(e);
  /* by blocks: the next block's headers and this block's spans asked for before this block
   * is walked, so that their cache misses overlap (one entry ahead was too little: the walk
   * still waited on every span) */
  for (i = 0; i < nx && i < HISTS_BLOCK; i++)
    code_hists_prefetch(e, &xs[i], k, 0);
  for (i = 0; i < nx; i++) {
    if (i % HISTS_BLOCK == 0) {
      size_t j;
      for (j = i + HISTS_BLOCK; j < nx && j < i + 2 * HISTS_BLOCK; j++)
        code_hists_prefetch(e, &xs[j], k, 0);
      for (j = i; j < nx && j < i + HISTS_BLOCK; j++)
        code_hists_prefetch(e, &xs[j], k, 1);
    }
    if (code_ref_ok(e, &xs[i])) {
      code_cum(e, &xs[i], k, eb, nle, &cum[i * nle]);
      ok[i] = 1;
    } else {
      ok[i] = tlc_engine_hist_cum(e, xs[i].handle, xs[i].context, k, le, nle, &cum[i * nle]) == 0;
    }
  }
  return 0;
}
