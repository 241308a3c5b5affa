/* engine.c - the statistics engine (see engine.h for the contract and SPEC section 2).
 *
 * Data structures. One open-addressing hash table maps keys to indexes: (code, handle, context)
 * -> row, (data, handle) -> row, (state, handle, value) -> row, (state area, handle) -> the
 * state area's current state, (context kind, key) -> context. Rows, state areas and contexts
 * live in arrays grown by doubling and are referred to by index (never by pointer across an
 * allocation). Each context owns its stack of open activations (array of act_t, innermost
 * last). Histograms (hist.h) and window buckets hang off a row, allocated at its first sample.
 *
 * Time. T = the latest event time seen. Every duration is a difference of event times; a
 * negative one counts 0 and one anomaly on the row it belongs to. With context_area, each
 * context has a clock IN(t) = in_acc + (switched in ? t - in_since : 0) of its switched-in time
 * (in_acc adds t_out - in_since at each switch-out, unclamped). A running period [a, b] of an
 * activation adds IN(b) - IN(a) to NET (clamped at 0, one anomaly if negative); GROSS =
 * IN(close) - IN(first event). Without context_area IN(t) = t and GROSS = CALL.
 *
 * Invariants: rows[i].open == number of stack entries (over all contexts) whose row is i; a
 * row is "outside" (out_active) only when open == 0; a state area's current row has the state
 * value `cur`; every allocation happens only when a new key, stack level or histogram span
 * first appears.
 *
 * Cost per event: O(1) expected (one lookup of its row - none for S/R/X naming the innermost
 * activation, found on the stack top; for code rows a direct-mapped row cache first, the hash
 * table on a miss -, a few sample updates: 128-bit square, a queued histogram count, a fold into
 * the window buckets when the row's current step has passed), plus O(k) for an X truncating k
 * activations and O(depth) for S/R/X looking for a non-innermost activation. Without
 * context_area GROSS == CALL, so GROSS's total and samples are not kept separately (the snapshot
 * copies CALL's), and the push loop is a copy of its own with that mode a constant (about 190
 * instructions per event on bench_engine's workload (a): bench/icount_engine.sh). A gap
 * is O(rows + contexts * depth). A snapshot is O(rows log rows + contexts * depth) and does not
 * change the engine.
 *
 * Does not: map evlog names (formats/evmap.c does), decode, lock, or keep any event. The engine's
 * other concerns have files of their own: taps.c (the taps this file's slow paths call),
 * slog.c (the sample log's hand-off and marks; its entries are appended here, inline),
 * acct.c (memory accounting), extremes.c (the extremes' wall clock and locations), snapshot.c
 * and histread.c (the reads), checkpoint.c (save and load).
 */
#include "engine/engine-int.h"
#include "engine/engine.h"

#include "base/alloc.h"
#include "base/err.h"
#include "engine/hist.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* ---- distributions ---- */

/* n, sum and the sum of squares of a sample v >= 0 into d (its MIN and MAX: ext_note). */
static void dist_add(edist_t *d, int64_t v) {
  /* samples are clamped >= 0 */
  uint64_t m = (uint64_t)v, hi, lo;
#if defined(__SIZEOF_INT128__)
  unsigned __int128 p = (unsigned __int128)m * m;
  hi = (uint64_t)(p >> 64);
  lo = (uint64_t)p;
#else
  uint64_t a0 = m & 0xFFFFFFFFu, a1 = m >> 32;
  uint64_t p00 = a0 * a0, p01 = a0 * a1, p11 = a1 * a1;
  uint64_t mid = (p00 >> 32) + (p01 & 0xFFFFFFFFu) * 2;
  lo = (mid << 32) | (p00 & 0xFFFFFFFFu);
  hi = p11 + (p01 >> 32) * 2 + (mid >> 32);
#endif
  /* MIN and MAX: sample() (ext_note), when v is outside them */
  d->n++;
  d->sum = tadd(d->sum, v);
  d->sqlo += lo;
  d->sqhi += hi + (d->sqlo < lo);
}

static void dists_clear(ekind_t *x) {
  unsigned k;
  for (k = 0; k < NK; k++) {
    memset(&x[k].d, 0, sizeof(x[k].d));
    x[k].d.min = INT64_MAX;
    x[k].d.max = INT64_MIN;
  }
}

/* ---- hash table ---- */

static inline uint64_t hmix(uint64_t a, uint64_t b) {
  return tlc__engine_hmix(a, b);
}

static uint64_t hkey(unsigned kind, uint32_t handle) {
  return ((uint64_t)1 << 40) | ((uint64_t)kind << 32) | handle;
}

static uint32_t hfind(const tlc_engine_t *e, uint64_t a, uint64_t b) {
  size_t mask = e->hcap - 1, i = (size_t)hmix(a, b) & mask;
  for (;;) {
    const hent_t *h = &e->ht[i];
    if (h->a == a && h->b == b)
      return h->v;
    if (h->a == 0)
      return NONE32;
    i = (i + 1) & mask;
  }
}

uint32_t tlc__engine_code_row(const tlc_engine_t *e, uint32_t handle, uint32_t ci) {
  return hfind(e, hkey(HK_CODE, handle), ci);
}

static void hput_raw(hent_t *ht, size_t cap, uint64_t a, uint64_t b, uint32_t v) {
  size_t mask = cap - 1, i = (size_t)hmix(a, b) & mask;
  while (ht[i].a != 0)
    i = (i + 1) & mask;
  ht[i].a = a;
  ht[i].b = b;
  ht[i].v = v;
}

/* Inserts a new key (caller checked absence). 0 or TLC_ENOMEM. */
static int hput(tlc_engine_t *e, uint64_t a, uint64_t b, uint32_t v) {
  if ((e->hn + 1) * 2 > e->hcap) {
    size_t ncap = e->hcap * 2, i;
    hent_t *nt;
    if (tlc__engine_acct_take(e, e->hcap * sizeof(*nt), TLC_ACCT_AREA) < 0)
      return TLC_ELIMIT;
    nt = tlc_calloc(ncap, sizeof(*nt));
    if (nt == NULL) {
      tlc__engine_acct_give(e, e->hcap * sizeof(*nt));
      return TLC_ENOMEM;
    }
    for (i = 0; i < e->hcap; i++)
      if (e->ht[i].a != 0)
        hput_raw(nt, ncap, e->ht[i].a, e->ht[i].b, e->ht[i].v);
    tlc_free(e->ht);
    e->ht = nt;
    e->hcap = ncap;
  }
  hput_raw(e->ht, e->hcap, a, b, v);
  e->hn++;
  return 0;
}

/* ---- anomalies and samples ---- */

static void anomaly(tlc_engine_t *e, erow_t *r) {
  if (r != NULL) {
    r->anomalies++;
    r->seq = e->seq;
  }
  e->c.anomalies++;
}

static int64_t dur(tlc_engine_t *e, erow_t *r, int64_t d) {
  if (d < 0) {
    anomaly(e, r);
    return 0;
  }
  return d;
}

static int64_t wstep(tlc_engine_t *e, unsigned i, int64_t t) {
  int64_t s;
  if (t >= e->wcache_lo[i] && tsub(t, e->wcache_lo[i]) < e->step[i])
    return e->wcache_s[i];
  s = floordiv(t, e->step[i]);
  if (s < INT64_MIN / e->step[i])
    return s; /* the step starts before INT64_MIN: not cached (its start does not fit) */
  e->wcache_s[i] = s;
  e->wcache_lo[i] = s * e->step[i];
  return s;
}

static size_t wrow_size(size_t capb) {
  return sizeof(wrow_t) + capb * sizeof(wbucket_t);
}

/* The bucket of window i for time t in r's windows (found, an expired one reused, or a new
 * one: r->w may move); NULL when t's step has already left the window (lim[i]: wlim) or when
 * memory is short (those samples are then missing from that window only). */
static wbucket_t *wbucket(tlc_engine_t *e, erow_t *r, unsigned i, int64_t t, const int64_t *lim) {
  int64_t s = wstep(e, i, t);
  wrow_t *w = r->w;
  wbucket_t *b = NULL;
  uint32_t j;
  if (s <= lim[i])
    return NULL;
  for (j = 0; j < w->nb; j++) {
    wbucket_t *x = &w->b[j];
    if (WB_WIN(x) == i && x->step == s)
      return x;
    if (b == NULL && x->step <= lim[WB_WIN(x)])
      b = x;
  }
  if (b == NULL) {
    if (w->nb == w->capb) {
      size_t cap = (size_t)w->capb + e->o.nwindows, max = (size_t)e->o.nwindows * NSTEPS;
      wrow_t *nw;
      if (cap > max)
        cap = max;
      if (cap <= w->capb ||
          tlc__engine_acct_take(e, wrow_size(cap) - wrow_size(w->capb), TLC_ACCT_GROW) < 0)
        return NULL;
      if ((nw = tlc_realloc(w, wrow_size(cap))) == NULL) {
        tlc__engine_acct_give(e, wrow_size(cap) - wrow_size(w->capb));
        return NULL;
      }
      e->win_bytes += wrow_size(cap) - wrow_size(nw->capb);
      nw->capb = (uint32_t)cap;
      r->w = w = nw;
    }
    b = &w->b[w->nb++];
  }
  memset(b, 0, sizeof(*b));
  b->step = s;
  b->cw = i;
  return b;
}

static void win_interval(tlc_engine_t *e, int64_t t, int64_t *lo, int64_t *hi);

/* Sets the end of r's interval: whi, or tap_whi while a tap watches r (engine-int.h). */
static void row_whi(erow_t *r, int64_t hi) {
  if (r->tap_mask)
    r->tap_whi = hi;
  else
    r->whi = hi;
}

static void wkd_merge(wkd_t *a, const edist_t *b) {
  nsmm_merge(&a->n, &a->sum, &a->min, &a->max, b->n, b->sum, b->min, b->max);
}

/* Called (hot_at) before an event at time t changes row r's count or dists, windows on, when t
 * is outside the row's current interval: folds the interval into the cumulative statistics and
 * the window buckets and starts the interval holding t. */
static void hot_fold(tlc_engine_t *e, erow_t *r, int64_t t) {
  wrow_t *w = r->w;
  int64_t lo = INT64_MIN, hi = INT64_MAX, lim[TLC_MAX_WINDOWS];
  unsigned i, k;
  if (w == NULL) {
    size_t sz = wrow_size(e->o.nwindows);
    if (tlc__engine_acct_take(e, sz, TLC_ACCT_GROW) < 0)
      return; /* d[] goes on accumulating; no windows for this row until memory returns */
    w = tlc_malloc(sz);
    if (w == NULL) {
      tlc__engine_acct_give(e, sz);
      return;
    }
    memset(w, 0, sizeof(*w));
    w->capb = e->o.nwindows;
    e->win_bytes += sz;
    r->w = w;
  } else {
    uint64_t cnt = r->count - w->fcount;
    for (i = 0; i < e->o.nwindows; i++)
      lim[i] = wlim(e, i);
    for (i = 0; i < e->o.nwindows; i++) {
      wbucket_t *b = wbucket(e, r, i, r->wlo, lim);
      if (b == NULL)
        continue;
      b->cw += cnt << 8;
      for (k = 0; k < NK; k++)
        wkd_merge(&b->k[k], &r->k[k].d);
    }
    w = r->w;
  }
  /* what the row holds so far (all of it for a new w) becomes cumulative */
  for (k = 0; k < NK; k++)
    edist_merge(&w->f[k], &r->k[k].d);
  dists_clear(r->k);
  w->fcount = r->count;
  win_interval(e, t, &lo, &hi);
  r->wlo = lo;
  row_whi(r, hi);
}

/* hot_fold when t is outside r's current interval (empty, wlo > whi, while the row has no
 * windows yet); without windows, the whole time line becomes the interval, so that the code
 * rows' check (code_hot) fails only for the rows a tap watches. */
static void fold_at(tlc_engine_t *e, erow_t *r, int64_t t) {
  if (!e->o.nwindows) {
    r->wlo = INT64_MIN;
    row_whi(r, INT64_MAX);
  } else if (!(t >= r->wlo && t < tlc__engine_whi(r))) {
    hot_fold(e, r, t);
  }
}

/* The out-of-line part of hot_at: a row a tap watches (or not asked yet) fails hot_at's check
 * whatever t; its TAP_ASK is resolved here, so that without a tap a row comes here once. */
#if defined(__GNUC__)
__attribute__((noinline))
#endif
static void
hot_slow(tlc_engine_t *e, erow_t *r, int64_t t) {
  (void)tlc__engine_tap_resolve(e, r);
  fold_at(e, r, t);
}

/* hot_fold when windows are on and t is outside the row's current interval: the per-event check
 * of data and state rows, kept inline (code rows: code_hot). */
static inline void hot_at(tlc_engine_t *e, erow_t *r, int64_t t) {
  if (e->o.nwindows && !(t >= r->wlo && t < r->whi))
    hot_slow(e, r, t);
}

/* Counts the queued histogram samples, in two passes. First every entry that sample() could
 * point at its 16-bit count (the bucket lay inside its histogram's span) is counted through
 * that pointer, with the count of the entry HLOG_AHEAD places ahead prefetched: one cache miss
 * per sample, overlapped. Spans change only in the second pass (and in no other place), so
 * every pointer of the first pass is still the count it was taken from. A count found at 65535
 * joins the others in the second pass: the entries whose bucket was outside the span or whose
 * histogram had no span yet are counted there through tlc__hist_inc_slow, which may grow the
 * span or add a carry (hist.h; order does not matter: a histogram holds counts). Counts stay 16
 * bits for good, so a capture that has run for weeks takes this path as its first minutes did. */
void tlc__engine_hlog_flush(tlc_engine_t *e) {
  size_t i, n = (size_t)(e->hcur - e->hlog), ns = 0;
  hlent_t *lg = e->hlog;
  for (i = 0; i < n; i++) {
    uint16_t *c = lg[i].count;
    /* a prefetch does not fault, whatever the address: entries past n (the log holds HLOG +
     * HLOG_AHEAD, so this read stays inside it) are NULL or stale, and cost a useless prefetch */
    __builtin_prefetch(lg[i + HLOG_AHEAD].count, 1);
    if (c != NULL && *c != UINT16_MAX) {
      (*c)++;
      continue;
    }
    lg[ns++] = lg[i]; /* ns <= i: the slow ones gather at the front */
  }
  /* the slow ones may allocate (a span, a carry): while the accounting hook refuses growth
   * they are not counted (as without memory, hist.h); what they allocate is charged after */
  if (ns > 0 && tlc__engine_acct_take(e, 0, TLC_ACCT_GROW) < 0)
    ns = 0;
  for (i = 0; i < ns; i++) {
    tlc_hist_t *h = &e->rows[lg[i].hist / NK].k[lg[i].hist % NK].h;
    size_t before = tlc__hist_bytes(h), after;
    (void)tlc__hist_inc_slow(h, lg[i].bucket); /* no memory: the sample is not counted (hist.h) */
    after = tlc__hist_bytes(h);
    e->hist_bytes += after - before;
    if (after > before)
      (void)tlc__engine_acct_take(e, after - before, TLC_ACCT_FORCE);
    else if (after < before)
      tlc__engine_acct_give(e, before - after);
  }
  e->hcur = e->hlog;
}

/* The kinds the tap wants of r for the current event (0 without a tap): one test per event
 * without a tap, one load more with one. */
static inline unsigned tapm(tlc_engine_t *e, erow_t *r) {
  if (TLC_LIKELY(e->o.tap == NULL))
    return 0;
  return TLC_UNLIKELY(r->tap_mask & TAP_ASK) ? tlc__engine_tap_ask(e, r) : r->tap_mask;
}

/* A TLC_TAP_COUNT mark for row r at time t (the current event), tm = tapm(e, r). */
static inline void tap_count(tlc_engine_t *e, erow_t *r, unsigned tm, int64_t t) {
  if (TLC_UNLIKELY(tm & (1u << TLC_TAP_COUNT)))
    tlc__engine_tap_emit(e, r, TLC_TAP_COUNT, 1, t, e->seq, t);
}

/* The per-event check of a code row's E and X: t inside the row's interval. It fails for every
 * event on a row a tap watches (whi INT64_MIN: engine-int.h), which then takes the out-of-line
 * path (code_close_slow, code_entry_slow) where the tap is served, so that the push loop holds
 * no test of the tap's. */
static inline int code_hot(const erow_t *r, int64_t t) {
  return t >= r->wlo && t < r->whi;
}

/* An X closing activation a of code row r at t when code_hot failed: the tap's samples (NET,
 * GROSS, CALL: no context_area, GROSS == CALL), then the window fold before the row takes them. */
#if defined(__GNUC__)
__attribute__((noinline))
#endif
static void
code_close_slow(tlc_engine_t *e, erow_t *r, const act_t *a, int64_t net, int64_t gross,
                int64_t call, int64_t t) {
  unsigned tm = tlc__engine_tap_resolve(e, r);
  if (tm & (1u << TLC_NET))
    tlc__engine_tap_sample(e, r, TLC_NET, net, a->start, a->seq, t);
  if (tm & (1u << TLC_GROSS))
    tlc__engine_tap_sample(e, r, TLC_GROSS, gross, a->start, a->seq, t);
  if (tm & (1u << TLC_CALL))
    tlc__engine_tap_sample(e, r, TLC_CALL, call, a->start, a->seq, t);
  fold_at(e, r, t);
}

/* An E on code row r at t when code_hot failed, before the row takes it: the tap's count,
 * PERIOD and OUTSIDE (the same values: a negative duration is 0, as dur() makes it), then the
 * window fold. */
#if defined(__GNUC__)
__attribute__((noinline))
#endif
static void
code_entry_slow(tlc_engine_t *e, erow_t *r, int64_t t) {
  unsigned tm = tlc__engine_tap_resolve(e, r);
  if (tm & (1u << TLC_TAP_COUNT))
    tlc__engine_tap_emit(e, r, TLC_TAP_COUNT, 1, t, e->seq, t);
  if (r->has_last && (tm & (1u << TLC_PERIOD)))
    tlc__engine_tap_sample(e, r, TLC_PERIOD, nonneg(tsub(t, r->last)), r->last, r->last_seq, t);
  if (r->out_active && (tm & (1u << TLC_OUTSIDE)))
    tlc__engine_tap_sample(e, r, TLC_OUTSIDE, nonneg(tsub(t, r->out_start)), r->out_start,
                           r->out_seq, t);
  fold_at(e, r, t);
}

/* Appends sample (k, v, end) of row r to the sample log (r->slog == 2: the log is on, the row
 * described; room made by slog_room), inline: three stores and a pointer bump. */
static inline void slog_add(tlc_engine_t *e, const erow_t *r, unsigned k, int64_t v, int64_t end) {
  tlc_engine_slent_t *l = e->scur++;
  l->rk = (uint32_t)(r - e->rows) * NK + k;
  l->value = v;
  l->end = end;
}

/* The sample log's entries of an X closing an activation of code row r at t (r->slog), before
 * its samples: NET, GROSS, CALL (GROSS == CALL without context_area, as the tap gives it) as one
 * pair of entries (engine.h: NET's form; nothing else logs NET or GROSS).
 * Inlined behind the caller's test of r->slog (an engine without the log pays that test per
 * event); the entries written through a local cursor, e->scur stored once. */
#if defined(__GNUC__)
__attribute__((always_inline))
#endif
static inline void
code_close_log(tlc_engine_t *e, erow_t *r, int64_t net, int64_t gross, int64_t call, int64_t t) {
  tlc_engine_slent_t *l;
  uint32_t rk;
  slog_room(e);
  if (TLC_UNLIKELY(r->slog == 1))
    tlc__engine_slog_def(e, r);
  l = e->scur;
  rk = (uint32_t)(r - e->rows) * NK;
  l[0].rk = rk + TLC_NET; /* a pair of entries (engine.h: NET's form) */
  l[0].value = net;
  l[0].end = t;
  l[1].value = gross;
  l[1].end = call;
  e->scur = l + 2;
}

/* The same for an E on code row r at t, before its samples: PERIOD per when hl, OUTSIDE out when
 * oa (the values the caller gives sample(), computed once for both). */
#if defined(__GNUC__)
__attribute__((always_inline))
#endif
static inline void
code_entry_log(tlc_engine_t *e, erow_t *r, int64_t t, int hl, int oa, int64_t per, int64_t out) {
  tlc_engine_slent_t *l;
  uint32_t rk;
  if (!(hl | oa))
    return;
  slog_room(e);
  if (TLC_UNLIKELY(r->slog == 1))
    tlc__engine_slog_def(e, r);
  l = e->scur;
  rk = (uint32_t)(r - e->rows) * NK;
  if (hl) {
    l->rk = rk + TLC_PERIOD;
    l->value = per;
    l->end = t;
    l++;
  }
  if (oa) {
    l->rk = rk + TLC_OUTSIDE;
    l->value = out;
    l->end = t;
    l++;
  }
  e->scur = l;
}

/* Lists a new cumulative extreme for tlc_engine_xnew (once while it is the last listed). */
static void xnew_note(tlc_engine_t *e, const erow_t *r, unsigned k, unsigned max) {
  uint32_t row = (uint32_t)(r - e->rows);
  xnew_t *q = e->nxq > 0 ? &e->xq[e->nxq - 1] : NULL;
  if (q != NULL && q->row == row && q->k == k && q->max == max)
    return;
  if (e->nxq < XNEW) {
    q = &e->xq[e->nxq++];
    q->row = row;
    q->k = (uint8_t)k;
    q->max = (uint8_t)max;
  }
}

/* Called by sample() before a sample v of kind k of r, closing now, goes into d = r->k[k].d, when v
 * is below d's MIN or above its MAX (an empty dist has MIN INT64_MAX and MAX INT64_MIN:
 * dists_clear): makes v d's new MIN and/or MAX, and records when it was taken if it is also a
 * new cumulative extreme - below (above) the MIN (MAX) of the earlier intervals w->f[k] when the
 * row has windows. Strict comparisons: of equal extremes the first one taken stays. Out of line:
 * a sample inside d's range costs sample() two compares and one predicted branch. */
#if defined(__GNUC__)
__attribute__((noinline))
#endif
static void
ext_note(tlc_engine_t *e, erow_t *r, unsigned k, int64_t v, int64_t start, uint64_t seq_start,
         int64_t end) {
  edist_t *d = &r->k[k].d;
  const edist_t *f = r->w != NULL && r->w->f[k].n > 0 ? &r->w->f[k] : NULL;
  xrow_t *x = &e->xt[r - e->rows];
  int mn = (d->n == 0 || v < d->min) && (f == NULL || v < f->min);
  int mx = (d->n == 0 || v > d->max) && (f == NULL || v > f->max);
  if (mn | mx) { /* a new cumulative extreme (not only the current interval's) */
    tlc_at_t at;
    memset(&at, 0, sizeof(at)); /* no location yet (tlc_engine_xlocate) */
    at.start = start;
    at.end = end;
    at.seq_start = seq_start;
    at.seq_end = e->seq;
    at.epoch = (uint32_t)e->c.clock_resets;
    at.known = 1;
    at.wall_ms = e->wall_ms;
    if (mn) {
      x->mn[k] = at;
      xnew_note(e, r, k, 0);
    }
    if (mx) {
      x->mx[k] = at;
      xnew_note(e, r, k, 1);
    }
  }
  if (v < d->min)
    d->min = v;
  if (v > d->max)
    d->max = v;
}

/* One sample of kind k that started at `start` (the event of change sequence seq_start) and
 * closed at `end` (the current event): the row's dist (its current interval's, with windows:
 * hot_at first), the histogram (queued, with a pointer to its 16-bit count when the bucket is
 * in the span), the sample log when lg (a constant: code rows log once per event, their
 * callers test r->slog themselves), and the tap. */
static inline void sample(tlc_engine_t *e, erow_t *r, unsigned tm, int lg, unsigned k, int64_t v,
                          int64_t start, uint64_t seq_start, int64_t end) {
  const edist_t *d = &r->k[k].d;
  if (TLC_UNLIKELY(v < d->min || v > d->max)) /* a new extreme of d (rare after the first) */
    ext_note(e, r, k, v, start, seq_start, end);
  dist_add(&r->k[k].d, v);
  if (e->hlog != NULL) {
    size_t hi = (size_t)(r - e->rows) * NK + k;
    const tlc_hist_t *h = &r->k[k].h;
    uint32_t b = tlc__hist_idx(v), off = b - h->lo; /* off wraps above nb when b < lo */
    hlent_t *l = e->hcur++;
    l->count = h->b != NULL && off < h->nb ? (uint16_t *)h->b + off : NULL;
    l->hist = (uint32_t)hi;
    l->bucket = b;
    if (e->hcur == e->hend)
      tlc__engine_hlog_flush(e);
  }
  if (lg && TLC_UNLIKELY(r->slog)) {
    slog_room(e);
    if (TLC_UNLIKELY(r->slog == 1))
      tlc__engine_slog_def(e, r);
    slog_add(e, r, k, v, end);
  }
  if (TLC_UNLIKELY(tm & (1u << k)))
    tlc__engine_tap_sample(e, r, k, v, start, seq_start, end);
}

/* An E on code row r at t with the sample log on (r->slog): what the E case does without it
 * (PERIOD, the row's last, OUTSIDE), its two durations taken first (dur: an anomaly touches
 * only counters) so that the log's entries and the samples share them. Apart from the case
 * without the log, which keeps its own code (taking them first there cost the engine alone
 * 0.5 %). */
#if defined(__GNUC__)
__attribute__((always_inline))
#endif
static inline void
code_entry_logged(tlc_engine_t *e, erow_t *r, int64_t t) {
  int hl = r->has_last, oa = r->out_active;
  int64_t per = hl ? dur(e, r, tsub(t, r->last)) : 0;
  int64_t len = oa ? dur(e, r, tsub(t, r->out_start)) : 0;
  code_entry_log(e, r, t, hl, oa, per, len);
  if (hl)
    sample(e, r, 0, 0, TLC_PERIOD, per, r->last, r->last_seq, t);
  r->last = t;
  r->last_seq = e->seq;
  r->has_last = 1;
  if (oa) {
    r->total[TLC_OUTSIDE] = tadd(r->total[TLC_OUTSIDE], len);
    sample(e, r, 0, 0, TLC_OUTSIDE, len, r->out_start, r->out_seq, t);
    r->out_active = 0;
  }
}

/* ---- rows, contexts ---- */

/* Grows the rows to hold `need`, keeping them 64-byte aligned: the allocation (rows_raw,
 * tlc_grow'n) holds one row more than caprows, room for the up to 63 bytes that alignment
 * skips; when the new block's offset to alignment differs from the old one's (tlc_realloc
 * guarantees less than 64), the rows are moved within it. Then their extremes' times (e->xt)
 * likewise, unaligned. 0 or TLC_ENOMEM (the rows' contents untouched; either array may have
 * grown). */
static int rows_grow(tlc_engine_t *e, size_t need) {
  size_t cap = e->rows_raw != NULL ? e->caprows + 1 : 0, off_old, off_new;
  unsigned char *raw;
  if (need <= e->caprows && need <= e->capxt)
    return 0;
  if (need <= e->caprows)
    goto xt;
  off_old =
      e->rows_raw != NULL ? (size_t)((unsigned char *)e->rows - (unsigned char *)e->rows_raw) : 0;
  raw = tlc__engine_grow(e, e->rows_raw, &cap, need + 1, sizeof(erow_t), 64, TLC_ACCT_AREA);
  if (raw == NULL)
    return TLC_ENOMEM;
  off_new = (size_t)(-(uintptr_t)raw & 63u);
  if (off_new != off_old)
    memmove(raw + off_new, raw + off_old, e->nrows * sizeof(erow_t));
  e->rows_raw = raw;
  e->rows = (erow_t *)(void *)(raw + off_new);
  e->caprows = cap - 1;
xt:
  if (need > e->capxt) {
    xrow_t *x = tlc__engine_grow(e, e->xt, &e->capxt, need, sizeof(xrow_t), 64, TLC_ACCT_AREA);
    if (x == NULL)
      return TLC_ENOMEM;
    e->xt = x;
  }
  return 0;
}

static uint32_t row_new(tlc_engine_t *e, unsigned hk, uint32_t handle, uint64_t b, unsigned kind) {
  erow_t *r;
  uint32_t idx;
  if (e->nrows >= e->o.max_areas || e->nrows >= NONE32 - 2)
    return NONE32;
  /* queued histogram samples name their row by index and their count by span pointer, so the
   * rows may move */
  if (rows_grow(e, e->nrows + 1) < 0)
    return NONE32;
  idx = (uint32_t)e->nrows;
  if (hput(e, hkey(hk, handle), b, idx) < 0)
    return NONE32;
  e->nrows++;
  r = &e->rows[idx];
  memset(r, 0, sizeof(*r));
  memset(&e->xt[idx], 0, sizeof(e->xt[idx]));
  r->handle = handle;
  r->ctx = NONE32;
  r->kind = (uint8_t)kind;
  r->link = NONE32;
  r->link_gen = NONE32;
  r->tap_mask = TAP_ASK; /* and so whi INT64_MIN: the first event asks the tap */
  r->slog = (uint8_t)(e->slog_fn != NULL && idx < TLC_SLOG_MARKS / NK);
  r->wlo = INT64_MAX;
  r->whi = r->tap_whi = INT64_MIN;
  dists_clear(r->k);
  if (kind == TLC_ROW_STATE)
    r->state = b;
  return idx;
}

static uint32_t row_get(tlc_engine_t *e, unsigned hk, uint32_t handle, uint64_t b, unsigned kind) {
  uint32_t idx = hfind(e, hkey(hk, handle), b);
  if (idx != NONE32)
    return idx;
  return row_new(e, hk, handle, b, kind);
}

/* Handles are mostly small numbers given out in order per area type (winIDEA's handle indexes
 * below the type nibble: functions 0x00000000.., lines 0x10000000..; the evlog mapping's handles
 * by first appearance), so the slot is the handle's low bits, its higher bits folded in:
 * neighbouring areas share cache lines of the table (1,000 areas use 4 KB of it, not a line
 * each). Each (context, function or line) starts at its own offset: Fibonacci hashing of
 * 2 * context + type spreads the offsets of consecutive contexts evenly over the table. */
static size_t rcache_slot(uint32_t handle, uint32_t ci) {
  uint32_t low = handle & 0x0FFFFFFFu, key = ci * 2u + ((handle >> 28) & 1u);
  uint32_t x = low ^ (low >> RCACHE_BITS) ^ (low >> (2 * RCACHE_BITS)) ^
               ((key * 0x9E3779B1u) >> (32 - RCACHE_BITS));
  return (size_t)(x & (RCACHE - 1));
}

static uint32_t ctx_get(tlc_engine_t *e, unsigned kind, uint8_t core, uint64_t key) {
  uint64_t a = hkey(HK_CTX, kind), b = kind == TLC_CTXK_CORE ? core : key;
  uint32_t idx = hfind(e, a, b);
  ectx_t *c;
  if (idx != NONE32)
    return idx;
  if (e->nctx >= e->o.max_contexts)
    return NONE32;
  {
    ectx_t *nc =
        tlc__engine_grow(e, e->ctx, &e->capctx, e->nctx + 1, sizeof(*e->ctx), 16, TLC_ACCT_AREA);
    if (nc == NULL)
      return NONE32;
    e->ctx = nc;
  }
  idx = (uint32_t)e->nctx;
  if (hput(e, a, b, idx) < 0)
    return NONE32;
  e->nctx++;
  c = &e->ctx[idx];
  memset(c, 0, sizeof(*c));
  c->kind = (uint8_t)kind;
  c->core = kind == TLC_CTXK_CORE ? core : TLC_CORE_UNKNOWN;
  c->key = kind == TLC_CTXK_CORE ? 0 : key;
  c->tindex = NONE32;
  return idx;
}

/* A switch at t < T changes IN(T) of the context, and so what a snapshot reports for its open
 * activations (their NET and GROSS up to T) without an event on their rows and without T
 * growing: those rows are marked changed, for delta snapshots. */
static void switch_mark(tlc_engine_t *e, const ectx_t *c, int64_t t) {
  uint32_t j;
  if (t < e->last)
    for (j = 0; j < c->depth; j++)
      e->rows[c->stack[j].row].seq = e->seq;
}

static void switch_in(tlc_engine_t *e, uint32_t ci, int64_t t) {
  ectx_t *c;
  if (ci >= DROP32)
    return;
  c = &e->ctx[ci];
  if (c->in_count++ == 0) {
    c->in_since = t;
    switch_mark(e, c, t);
  }
}

static void switch_out(tlc_engine_t *e, uint32_t ci, int64_t t) {
  ectx_t *c;
  if (ci >= DROP32)
    return;
  c = &e->ctx[ci];
  if (--c->in_count == 0) {
    c->in_acc = tadd(c->in_acc, tsub(t, c->in_since));
    switch_mark(e, c, t);
  }
}

/* Makes ci (NONE32: a context that could not be created) the current context of core. */
static void ctx_switch(tlc_engine_t *e, uint8_t core, uint32_t ci, int64_t t) {
  uint32_t old = e->cur[core];
  if (ci == NONE32)
    ci = DROP32;
  if (ci != old) {
    switch_out(e, old, t);
    e->cur[core] = ci;
    switch_in(e, ci, t);
  }
}

/* A packed write with a stopped state of `task`: when it is the core's current task, the core
 * goes back to its own "no task" context. */
static void ctx_stop(tlc_engine_t *e, uint8_t core, uint64_t task, int64_t t) {
  uint32_t ci = hfind(e, hkey(HK_CTX, TLC_CTXK_TASK), task);
  if (ci == NONE32 || ci != e->cur[core])
    return;
  ctx_switch(e, core, ctx_get(e, TLC_CTXK_CORE, core, 0), t);
}

/* ---- code areas ---- */

enum { CL_X = 0, CL_TRUNC = 1, CL_GAP = 2 };

static TLC_HOT void act_close(tlc_engine_t *e, int ctxmode, ectx_t *c, act_t *a, int64_t t,
                              int how) {
  erow_t *r = &e->rows[a->row];
  int64_t call, net = a->net, gross, in_t = ctx_in(ctxmode, c, t);
  call = dur(e, r, tsub(t, a->start));
  if (a->running)
    net = tadd(net, dur(e, r, tsub(in_t, a->run_start)));
  gross = ctxmode ? dur(e, r, tsub(in_t, a->in_start)) : call;
  /* without context_area GROSS == CALL: its total and samples are kept once, as CALL's (the
   * snapshot copies them) */
  r->total[TLC_NET] = tadd(r->total[TLC_NET], net);
  if (ctxmode)
    r->total[TLC_GROSS] = tadd(r->total[TLC_GROSS], gross);
  r->total[TLC_CALL] = tadd(r->total[TLC_CALL], call);
  if (how == CL_X && a->full) {
    if (TLC_UNLIKELY(!code_hot(r, t))) /* a fold, or a row a tap watches */
      code_close_slow(e, r, a, net, gross, call, t);
    if (TLC_UNLIKELY(r->slog)) /* one test per event */
      code_close_log(e, r, net, gross, call, t);
    sample(e, r, 0, 0, TLC_NET, net, a->start, a->seq, t);
    if (ctxmode)
      sample(e, r, 0, 0, TLC_GROSS, gross, a->start, a->seq, t);
    sample(e, r, 0, 0, TLC_CALL, call, a->start, a->seq, t);
  }
  if (how == CL_TRUNC)
    anomaly(e, r);
  r->seq = e->seq;
  if (--r->open == 0 && how != CL_GAP) {
    r->out_active = 1;
    r->out_start = t;
    r->out_seq = e->seq;
  }
}

/* Opens an activation of row ri (handle) on c at time t, IN(t) = in_t: the new innermost entry
 * of c's stack, which the caller made room for (ctx_room). */
static void ctx_open(ectx_t *c, uint32_t ri, uint32_t handle, int full, int running, int64_t t,
                     int64_t in_t, uint64_t seq) {
  act_t *a = &c->stack[c->depth++];
  a->row = ri;
  a->handle = handle;
  a->full = (uint8_t)full;
  a->running = (uint8_t)running;
  a->start = t;
  a->in_start = a->run_start = in_t;
  a->net = 0;
  a->seq = seq;
}

/* Makes room for one more activation on c's stack (ctx_room: the check inline, the growth
 * here, out of line: rare, and it would crowd the push loop's registers). 0, TLC_ELIMIT
 * (max_depth) or TLC_ENOMEM. */
#if defined(__GNUC__)
__attribute__((noinline))
#endif
static int
ctx_grow(tlc_engine_t *e, ectx_t *c) {
  size_t cap = c->cap;
  act_t *ns;
  if (c->depth >= e->o.max_depth)
    return TLC_ELIMIT;
  /* c->stack itself when it has room (ctx_room gets here also for max_depth) */
  ns = tlc__engine_grow(e, c->stack, &cap, c->depth + 1, sizeof(*c->stack), 8, TLC_ACCT_GROW);
  if (ns == NULL)
    return TLC_ENOMEM;
  c->stack = ns;
  c->cap = (uint32_t)cap;
  return 0;
}

static inline int ctx_room(tlc_engine_t *e, ectx_t *c) {
  return c->depth < c->cap && c->depth < e->o.max_depth ? 0 : ctx_grow(e, c);
}

static int32_t ctx_find(const ectx_t *c, const erow_t *r, uint32_t ri) {
  uint32_t j;
  if (r->open == 0)
    return -1;
  for (j = c->depth; j-- > 0;)
    if (c->stack[j].row == ri)
      return (int32_t)j;
  return -1;
}

static TLC_HOT void code_event(tlc_engine_t *e, const tlc_event_t *ev, int64_t t, int mode) {
  const int ctxmode = mode == M_TASK;
  uint32_t ci, ri;
  ectx_t *c;
  erow_t *r;
  int32_t p = -1;
  int64_t in_t;
  if (mode == M_THREAD)
    ci = ctx_get(e, TLC_CTXK_THREAD, TLC_CORE_UNKNOWN, ev->thread);
  else if (ctxmode)
    ci = e->cur[ev->core];
  else {
    ci = e->corectx[ev->core];
    if (TLC_UNLIKELY(ci == NONE32))
      ci = e->corectx[ev->core] = ctx_get(e, TLC_CTXK_CORE, ev->core, 0);
  }
  if (TLC_UNLIKELY(ci >= DROP32)) {
    e->c.dropped_area_limit++;
    return;
  }
  c = &e->ctx[ci];
  /* S, R and X mostly name the innermost activation: its row needs no hash lookup (and its
   * row has its context) */
  if (ev->type != TLC_EV_ENTRY && c->depth > 0 && c->stack[c->depth - 1].handle == ev->handle) {
    p = (int32_t)c->depth - 1;
    ri = c->stack[p].row;
    r = &e->rows[ri];
  } else {
    size_t slot = rcache_slot(ev->handle, ci);
    ri = e->rcache[slot];
    /* a cached row is checked: its handle and context are its key (a row without a context,
     * ctx NONE32, never matches) */
    if (ri >= e->nrows || e->rows[ri].handle != ev->handle || e->rows[ri].ctx != ci) {
      ri = row_get(e, HK_CODE, ev->handle, ci, TLC_ROW_CODE);
      if (ri == NONE32) {
        e->c.dropped_area_limit++;
        return;
      }
      e->rcache[slot] = ri;
      if (e->rows[ri].ctx == NONE32) { /* a row without its context yet gets it */
        if (c->tindex == NONE32) {
          uint32_t *nt = tlc__engine_grow(e, e->tctx, &e->captctx, e->ntctx + 1, sizeof(*e->tctx),
                                          16, TLC_ACCT_AREA);
          if (nt == NULL) {
            e->c.dropped_area_limit++; /* the row stays context-less and is not reported */
            return;
          }
          e->tctx = nt;
          c->tindex = (uint32_t)e->ntctx;
          e->tctx[e->ntctx++] = ci;
        }
        e->rows[ri].ctx = ci;
        e->ctxgen++;
      }
    }
    r = &e->rows[ri];
    if (ev->type != TLC_EV_ENTRY)
      p = ctx_find(c, r, ri);
  }
  /* the sample lines this event will touch: their misses overlap the header's */
  if (ev->type == TLC_EV_ENTRY || ev->type == TLC_EV_EXIT) {
    int entry = ev->type == TLC_EV_ENTRY;
    __builtin_prefetch(&r->k[entry ? TLC_PERIOD : TLC_NET], 1);
    __builtin_prefetch(&r->k[entry ? TLC_OUTSIDE : TLC_CALL], 1);
    __builtin_prefetch(&r->total[0], 1);
  }
  in_t = ctx_in(ctxmode, c, t);
  switch (ev->type) {
  case TLC_EV_ENTRY:
    r->seq = e->seq;
    if (ctx_room(e, c) < 0) {
      e->c.dropped_area_limit++;
      return;
    }
    if (TLC_UNLIKELY(!code_hot(r, t))) /* a fold, or a row a tap watches */
      code_entry_slow(e, r, t);
    r->count++;
    if (TLC_UNLIKELY(r->slog)) { /* one test per event */
      code_entry_logged(e, r, t);
    } else {
      if (r->has_last)
        sample(e, r, 0, 0, TLC_PERIOD, dur(e, r, tsub(t, r->last)), r->last, r->last_seq, t);
      r->last = t;
      r->last_seq = e->seq;
      r->has_last = 1;
      if (r->out_active) {
        int64_t len = dur(e, r, tsub(t, r->out_start));
        r->total[TLC_OUTSIDE] = tadd(r->total[TLC_OUTSIDE], len);
        sample(e, r, 0, 0, TLC_OUTSIDE, len, r->out_start, r->out_seq, t);
        r->out_active = 0;
      }
    }
    ctx_open(c, ri, ev->handle, 1, 1, t, in_t, e->seq);
    r->open++;
    break;
  case TLC_EV_RESUME:
  case TLC_EV_SUSPEND:
    if (p >= 0) {
      act_t *o = &c->stack[p];
      /* What a snapshot reports for the row at T (its open activation's NET up to T) changes
       * here only when t < T; at t == T a delta includes the row anyway when T grew (an open
       * row: since_seq in engine.h), and an anomaly marks it. So an S or R on an open
       * activation at the head of the stream leaves the row's cache lines alone. */
      if (t < e->last)
        r->seq = e->seq;
      if (ev->type == TLC_EV_RESUME && !o->running) {
        o->running = 1;
        o->run_start = in_t;
      } else if (ev->type == TLC_EV_SUSPEND && o->running) {
        o->net = tadd(o->net, dur(e, r, tsub(in_t, o->run_start)));
        o->running = 0;
      }
      break;
    }
    /* partial activation: the area was open before the recording */
    r->seq = e->seq;
    if (ctx_room(e, c) < 0) {
      e->c.dropped_area_limit++;
      return;
    }
    if (r->out_active) {
      r->total[TLC_OUTSIDE] = tadd(r->total[TLC_OUTSIDE], dur(e, r, tsub(t, r->out_start)));
      r->out_active = 0;
    }
    ctx_open(c, ri, ev->handle, 0, ev->type == TLC_EV_RESUME, t, in_t, e->seq);
    r->open++;
    break;
  case TLC_EV_EXIT:
    r->seq = e->seq;
    if (p < 0) {
      anomaly(e, r);
      break;
    }
    while (c->depth > (uint32_t)p + 1) {
      c->depth--;
      act_close(e, ctxmode, c, &c->stack[c->depth], t, CL_TRUNC);
    }
    c->depth--;
    act_close(e, ctxmode, c, &c->stack[c->depth], t, CL_X);
    break;
  default: /* W on a code area */
    anomaly(e, r);
    break;
  }
}

/* ---- data and state areas ---- */

static void state_leave(tlc_engine_t *e, sarea_t *s, int64_t t) {
  erow_t *r = &e->rows[s->row];
  int64_t stay = dur(e, r, tsub(t, s->since));
  r->total[TLC_NET] = tadd(r->total[TLC_NET], stay);
  hot_at(e, r, t);
  sample(e, r, tapm(e, r), 1, TLC_NET, stay, s->since, s->since_seq, t);
  r->seq = e->seq;
  s->valid = 0;
}

static void state_enter(tlc_engine_t *e, uint32_t handle, uint64_t v, int64_t t) {
  unsigned tm;
  uint32_t si = hfind(e, hkey(HK_SAREA, handle), 0), ri;
  sarea_t *s;
  erow_t *r;
  if (si != NONE32 && e->sa[si].valid && e->sa[si].cur == v)
    return;
  ri = row_get(e, HK_STATE, handle, v, TLC_ROW_STATE);
  if (ri == NONE32) {
    e->c.dropped_area_limit++;
    return;
  }
  if (si == NONE32) {
    sarea_t *ns =
        tlc__engine_grow(e, e->sa, &e->capsa, e->nsa + 1, sizeof(*e->sa), 16, TLC_ACCT_AREA);
    if (ns == NULL) {
      e->c.dropped_area_limit++;
      return;
    }
    e->sa = ns;
    if (hput(e, hkey(HK_SAREA, handle), 0, (uint32_t)e->nsa) < 0) {
      e->c.dropped_area_limit++;
      return;
    }
    si = (uint32_t)e->nsa++;
    memset(&e->sa[si], 0, sizeof(e->sa[si]));
    e->sa[si].handle = handle;
  }
  s = &e->sa[si];
  if (s->valid)
    state_leave(e, s, t);
  r = &e->rows[ri];
  r->seq = e->seq;
  hot_at(e, r, t);
  r->count++;
  tm = tapm(e, r);
  tap_count(e, r, tm, t);
  if (r->has_last)
    sample(e, r, tm, 1, TLC_PERIOD, dur(e, r, tsub(t, r->last)), r->last, r->last_seq, t);
  r->last = t;
  r->last_seq = e->seq;
  r->has_last = 1;
  s->valid = 1;
  s->cur = v;
  s->since = t;
  s->since_seq = e->seq;
  s->row = ri;
}

static void state_event(tlc_engine_t *e, const tlc_event_t *ev, int64_t t) {
  uint32_t si;
  switch (ev->type) {
  case TLC_EV_ENTRY:
  case TLC_EV_WRITE:
    state_enter(e, ev->handle, ev->data, t);
    break;
  case TLC_EV_EXIT:
    si = hfind(e, hkey(HK_SAREA, ev->handle), 0);
    if (si == NONE32 || !e->sa[si].valid)
      anomaly(e, NULL);
    else
      state_leave(e, &e->sa[si], t);
    break;
  default:
    anomaly(e, NULL);
    break;
  }
}

static void data_event(tlc_engine_t *e, const tlc_event_t *ev, int64_t t) {
  unsigned tm;
  uint32_t ri = row_get(e, HK_DATA, ev->handle, 0, TLC_ROW_DATA);
  erow_t *r;
  if (ri == NONE32) {
    e->c.dropped_area_limit++;
    return;
  }
  r = &e->rows[ri];
  r->seq = e->seq;
  if (ev->type != TLC_EV_WRITE) {
    anomaly(e, r);
    return;
  }
  hot_at(e, r, t);
  r->count++;
  tm = tapm(e, r);
  tap_count(e, r, tm, t);
  if (r->has_last)
    sample(e, r, tm, 1, TLC_PERIOD, dur(e, r, tsub(t, r->last)), r->last, r->last_seq, t);
  r->last = t;
  r->last_seq = e->seq;
  r->has_last = 1;
  r->value = ev->data;
  if (!r->has_value || ev->data < r->vmin)
    r->vmin = ev->data;
  if (!r->has_value || ev->data > r->vmax)
    r->vmax = ev->data;
  r->has_value = 1;
  if (e->o.mapping != NULL) {
    if (r->link_gen != e->map_gen) {
      const tlc_map_area_t *m = tlc_mapping_find(e->o.mapping, ev->handle);
      r->link = m != NULL ? m->state_handle : NONE32;
      r->link_gen = e->map_gen;
    }
    if (r->link != NONE32)
      state_enter(e, r->link, ev->data, t);
  }
}

/* ---- clock epochs ---- */

/* The interval [*lo, *hi) of time t: the intersection of t's steps of every window (wstep). */
static void win_interval(tlc_engine_t *e, int64_t t, int64_t *lo, int64_t *hi) {
  unsigned i;
  *lo = INT64_MIN;
  *hi = INT64_MAX;
  for (i = 0; i < e->o.nwindows; i++) {
    int64_t l, h;
    (void)wstep(e, i, t); /* leaves t's step start in wcache_lo */
    l = e->wcache_lo[i];
    h = l > INT64_MAX - e->step[i] ? INT64_MAX : l + e->step[i];
    if (l > *lo)
      *lo = l;
    if (h < *hi)
      *hi = h;
  }
}

/* A new clock epoch at time t (engine.h: clock restarts), after the gap. */
static void clock_restart(tlc_engine_t *e, int64_t t) {
  int64_t lo = 0, hi = 0;
  size_t i;
  unsigned k;
  if (e->o.nwindows)
    win_interval(e, t, &lo, &hi);
  for (i = 0; i < e->nrows; i++) {
    erow_t *r = &e->rows[i];
    wrow_t *w = r->w;
    if (w == NULL)
      continue; /* no windows yet: d[] holds everything and is cumulative at the first fold */
    for (k = 0; k < NK; k++)
      edist_merge(&w->f[k], &r->k[k].d);
    dists_clear(r->k);
    w->fcount = r->count;
    w->nb = 0;
    r->wlo = lo;
    row_whi(r, hi);
    r->seq = e->seq;
  }
  for (i = 0; i < e->nctx; i++) {
    ectx_t *c = &e->ctx[i];
    if (c->in_count) {
      c->in_acc = tadd(c->in_acc, tsub(e->last, c->in_since));
      c->in_since = t;
    }
  }
  e->last = t;
  e->tseq = e->seq;
  e->c.clock_resets++;
  tlc__engine_slog_mark(e, TLC_SLOG_EPOCH, (int64_t)e->c.clock_resets);
}

/* An event flagged TLC_EVF_GAP (a gap before it) or TLC_EVF_RESTART (time_first decides). */
static void flagged(tlc_engine_t *e, uint16_t flags) {
  if (flags & TLC_EVF_GAP)
    tlc_engine_gap(e);
  else if (e->have_time == TIME_OK)
    e->have_time = TIME_FLAG;
}

/* The clock of an event that is the first, the first after a gap, or flagged a restart. */
static void time_first(tlc_engine_t *e, int64_t t) {
  if (e->have_time == TIME_NONE) {
    e->first = e->last = t;
    e->tseq = e->seq;
  } else if (e->o.clock_reset_ns > 0 && t < e->last && tsub(e->last, t) > e->o.clock_reset_ns) {
    if (e->have_time == TIME_FLAG)
      tlc_engine_gap(e);
    clock_restart(e, t);
  } else if (t > e->last) {
    e->last = t;
    e->tseq = e->seq;
  }
  e->have_time = TIME_OK;
}

void tlc_engine_clock_init(const tlc_engine_t *e, tlc_engine_clock_t *c) {
  c->state = e->have_time;
  c->last = e->last;
  c->threshold = e->o.clock_reset_ns;
}

size_t tlc_engine_clock_scan(tlc_engine_clock_t *c, const tlc_event_t *ev, size_t n) {
  int ht = c->state;
  int64_t last = c->last;
  size_t i;
  for (i = 0; i < n; i++) {
    int64_t t = ev[i].time_ns;
    if (ev[i].type == TLC_EV_NONE)
      continue;
    if (ev[i].flags & TLC_EVF_GAP)
      ht = ht == TIME_NONE ? TIME_NONE : TIME_GAP;
    else if ((ev[i].flags & TLC_EVF_RESTART) && ht == TIME_OK)
      ht = TIME_FLAG;
    if (ht == TIME_NONE) {
      last = t;
    } else if (ht != TIME_OK && c->threshold > 0 && t < last && tsub(last, t) > c->threshold) {
      c->state = TIME_OK;
      c->last = t;
      return i;
    } else if (t > last) {
      last = t;
    }
    ht = TIME_OK;
  }
  c->state = ht;
  c->last = last;
  return n;
}

/* ---- events ---- */

/* One event; mode (M_*) is e's, a constant in each copy tlc_engine_push inlines this into. */
static TLC_HOT void push1(tlc_engine_t *e, const tlc_event_t *ev, int mode) {
  const int ctxmode = mode == M_TASK;
  int64_t t = ev->time_ns;
  unsigned area = tlc_handle_area(ev->handle);
  if (TLC_UNLIKELY(ev->type == TLC_EV_NONE))
    return;
  if (TLC_UNLIKELY(ev->flags & (TLC_EVF_GAP | TLC_EVF_RESTART)))
    flagged(e, ev->flags);
  e->c.events++;
  e->seq++;
  if (TLC_UNLIKELY(e->have_time != TIME_OK)) {
    time_first(e, t);
  } else if (t > e->last) {
    e->last = t;
    e->tseq = e->seq;
  }
  if (ctxmode && e->cur[ev->core] == NONE32) {
    /* the core's first event: its "no task yet" context is switched in */
    uint32_t ci = ctx_get(e, TLC_CTXK_CORE, ev->core, 0);
    e->cur[ev->core] = ci == NONE32 ? DROP32 : ci;
    switch_in(e, e->cur[ev->core], t);
  }
  if (area <= TLC_AREA_LINE && ev->type <= TLC_EV_WRITE) { /* the common case first */
    code_event(e, ev, t, mode);
  } else if (TLC_UNLIKELY(ev->type > TLC_EV_WRITE || area > TLC_AREA_AUXSTATE)) {
    anomaly(e, NULL);
    return;
  } else if (area == TLC_AREA_VARIABLE || area == TLC_AREA_AUX) {
    data_event(e, ev, t);
  } else {
    state_event(e, ev, t);
  }
  if (ctxmode && ev->handle == e->o.context_area &&
      (ev->type == TLC_EV_WRITE || ev->type == TLC_EV_ENTRY)) {
    uint64_t task = ev->data;
    int what = e->packed ? tlc_ctxpack_classify(&e->o.pack, ev->data, &task) : TLC_CTXPACK_RUN;
    if (what == TLC_CTXPACK_RUN)
      ctx_switch(e, ev->core, ctx_get(e, TLC_CTXK_TASK, TLC_CORE_UNKNOWN, task), t);
    else if (what == TLC_CTXPACK_STOP)
      ctx_stop(e, ev->core, task, t);
  }
}

/* The loop is specialised for the common mode (bin1x without context_area: a core is a
 * context, always switched in), so that its per-event checks of the mode compile away. It holds
 * no test of the tap's: the code rows a tap watches fail code_hot's check. */
void tlc_engine_push(tlc_engine_t *e, const tlc_event_t *ev, size_t n) {
  size_t i;
  e->pushing = 1;
  if (e->fmt != TLC_FMT_EVLOG && !e->ctxmode) {
    for (i = 0; i < n; i++)
      push1(e, &ev[i], M_CORE);
  } else {
    int mode = e->fmt == TLC_FMT_EVLOG ? M_THREAD : M_TASK;
    for (i = 0; i < n; i++)
      push1(e, &ev[i], mode);
  }
  e->pushing = 0;
  if (e->scur != e->slog) /* the log is empty between pushes (engine.h) */
    tlc__engine_slog_flush(e);
}

void tlc_engine_gap(tlc_engine_t *e) {
  size_t i;
  int64_t t = e->last;
  e->c.gaps++;
  e->seq++;
  if (e->have_time != TIME_NONE)
    e->have_time = TIME_GAP;
  for (i = 0; i < e->nctx; i++) {
    ectx_t *c = &e->ctx[i];
    while (c->depth > 0) {
      c->depth--;
      act_close(e, e->ctxmode, c, &c->stack[c->depth], t, CL_GAP);
    }
  }
  for (i = 0; i < e->nsa; i++) {
    sarea_t *s = &e->sa[i];
    if (s->valid) {
      erow_t *r = &e->rows[s->row];
      r->total[TLC_NET] = tadd(r->total[TLC_NET], nonneg(tsub(t, s->since)));
      r->seq = e->seq;
      s->valid = 0;
    }
  }
  for (i = 0; i < e->nrows; i++) {
    erow_t *r = &e->rows[i];
    if (r->out_active) {
      r->total[TLC_OUTSIDE] = tadd(r->total[TLC_OUTSIDE], nonneg(tsub(t, r->out_start)));
      r->out_active = 0;
      r->seq = e->seq;
    }
    r->has_last = 0;
  }
  if (e->o.tap != NULL)
    tlc__engine_tap_mark(e, TLC_TAP_GAP, t, 0);
}

/* ---- lifecycle ---- */

void tlc_engine_opts_default(tlc_engine_opts_t *o) {
  memset(o, 0, sizeof(*o));
  tlc_ctxpack_default(&o->pack);
  o->nwindows = 3;
  o->window_ns[0] = 1000000000;
  o->window_ns[1] = 10000000000;
  o->window_ns[2] = 60000000000;
  o->max_areas = 1000000;
  o->max_contexts = 65536;
  o->max_depth = 4096;
  o->histograms = 1;
  o->clock_reset_ns = 1000000000;
}

int tlc_engine_new(tlc_engine_t **ep, tlc_format_t fmt, const tlc_engine_opts_t *o) {
  tlc_engine_t *e;
  tlc_engine_opts_t d;
  unsigned i;
  *ep = NULL;
  if (fmt != TLC_FMT_BIN10 && fmt != TLC_FMT_BIN11 && fmt != TLC_FMT_EVLOG)
    return TLC_EINVAL;
  if (o == NULL) {
    tlc_engine_opts_default(&d);
    o = &d;
  }
  if (o->nwindows > TLC_MAX_WINDOWS)
    return TLC_EINVAL;
  for (i = 0; i < o->nwindows; i++)
    if (o->window_ns[i] < NSTEPS)
      return TLC_EINVAL;
  e = tlc_calloc(1, sizeof(*e));
  if (e == NULL)
    return TLC_ENOMEM;
  e->fmt = fmt;
  e->o = *o;
  if (e->o.tap != NULL) { /* the options' tap is the first of the list */
    e->taps[0] = (struct etap){ e->o.tap, e->o.tap_want, e->o.tap_band, e->o.tap_ud };
    e->ntaps = 1;
  }
  if (e->o.max_areas == 0)
    e->o.max_areas = 1000000;
  if (e->o.max_contexts == 0)
    e->o.max_contexts = 65536;
  if (e->o.max_depth == 0)
    e->o.max_depth = 4096;
  if (e->o.max_depth > 0x7FFFFFFF)
    e->o.max_depth = 0x7FFFFFFF;
  e->ctxmode = e->o.has_context_area && fmt != TLC_FMT_EVLOG;
  tlc_ctxpack_finish(&e->o.pack);
  e->packed = (uint8_t)tlc_ctxpack_on(&e->o.pack);
  for (i = 0; i < e->o.nwindows; i++) {
    e->step[i] = e->o.window_ns[i] / NSTEPS;
    e->wcache_lo[i] = INT64_MAX; /* empty cache */
    e->wcache_s[i] = 0;
  }
  for (i = 0; i < 256; i++)
    e->cur[i] = e->corectx[i] = NONE32;
  memset(e->rcache, 0xFF, sizeof(e->rcache));
  e->hcap = 64;
  e->ht = tlc_calloc(e->hcap, sizeof(*e->ht));
  if (e->o.histograms) {
    e->hlog = tlc_calloc(HLOG + HLOG_AHEAD, sizeof(*e->hlog)); /* the tail: hlog_flush */
    e->hcur = e->hlog;
    e->hend = e->hlog != NULL ? e->hlog + HLOG : NULL;
  }
  if (e->ht == NULL || (e->o.histograms && e->hlog == NULL)) {
    tlc_free(e->ht);
    tlc_free(e->hlog);
    tlc_free(e);
    return TLC_ENOMEM;
  }
  /* the fixed part: charged whatever the budget (an engine without it cannot work) */
  (void)tlc__engine_acct_take(e,
                              sizeof(*e) + e->hcap * sizeof(*e->ht) +
                                  (e->hlog != NULL ? (HLOG + HLOG_AHEAD) * sizeof(hlent_t) : 0),
                              TLC_ACCT_FORCE);
  tlc__engine_new_epoch(e);
  *ep = e;
  return 0;
}

void tlc_engine_free(tlc_engine_t *e) {
  size_t i;
  if (e == NULL)
    return;
  for (i = 0; i < e->nrows; i++) {
    erow_t *r = &e->rows[i];
    unsigned k;
    tlc_free(r->w);
    for (k = 0; k < NK; k++)
      tlc__hist_fini(&r->k[k].h);
  }
  tlc_free(e->hlog);
  tlc_free(e->slog);
  for (i = 0; i < e->nctx; i++)
    tlc_free(e->ctx[i].stack);
  tlc_free(e->rows_raw);
  tlc_free(e->xt);
  tlc_free(e->sa);
  tlc_free(e->ctx);
  tlc_free(e->tctx);
  tlc_free(e->ht);
  tlc_free(e->grp);
  tlc_free(e->smap);
  tlc_free(e->schg);
  tlc_free(e->ord);
  tlc_free(e->tapx);
  tlc_free(e->tband);
  tlc__engine_acct_give(e, e->charged);
  tlc_free(e);
}

void tlc_engine_set_mapping(tlc_engine_t *e, const tlc_mapping_t *m) {
  e->o.mapping = m;
  e->map_gen++;
  tlc__engine_new_epoch(e);
  if (e->map_gen == NONE32)
    e->map_gen = 0;
}

/* ---- reads of the engine's state, its epoch ---- */

void tlc_engine_sync(tlc_engine_t *e) {
  if (e->hcur != e->hlog)
    tlc__engine_hlog_flush(e);
}

uint64_t tlc_engine_seq(const tlc_engine_t *e) {
  return e->seq;
}

static _Atomic uint64_t epochs; /* engines live on several threads (replay, sealer) */

void tlc__engine_new_epoch(tlc_engine_t *e) {
  e->epoch = atomic_fetch_add_explicit(&epochs, 1, memory_order_relaxed) + 1;
  /* clear, load, a new mapping: rows may be others, and a clear or a failed load restarts the
   * clock restarts' count */
  tlc__engine_slog_mark(e, TLC_SLOG_ROWS, (int64_t)e->epoch);
  tlc__engine_slog_mark(e, TLC_SLOG_EPOCH, (int64_t)e->c.clock_resets);
}

uint64_t tlc_engine_epoch(const tlc_engine_t *e) {
  return e->epoch;
}

const tlc_counters_t *tlc_engine_counters(const tlc_engine_t *e) {
  return &e->c;
}

int64_t tlc_engine_last_time(const tlc_engine_t *e) {
  return e->last;
}
