/* taps.c - the engine's taps (engine.h: tlc_engine_set_tap, tlc_engine_add_tap): the list of
 * taps, asking them which sample kinds of a row they want and, for the one tap, its bands
 * (engine.h: tlc_engine_tap_band_fn), and calling them with each sample and mark.
 *
 * Invariants (engine-int.h: erow_t.tap_mask, struct etap): o.tap, o.tap_want, o.tap_band and
 * o.tap_ud mirror taps[0] (o.tap is NULL without a tap: the push loop's one test); a row's tap_mask
 * is TAP_ASK until the taps are asked, then the union of what they want; while it is not 0 the
 * row's whi is INT64_MIN (its interval's end kept in tap_whi), so every event on the row leaves
 * the push loop for engine.c's out-of-line paths, which call in here.
 *
 * Cost: nothing per event without a tap (the test is engine.c's tapm); asking is once per row
 * and change of the tap list (tlc__engine_tap_regen: O(rows)); a sample a tap wants is one
 * call per tap that wants it, or, inside the one tap's band of its row and kind, a compare
 * (engine-int.h: tlc__engine_tap_sample) and no call.
 *
 * Does not: test per event whether a tap wants something (engine.c's tapm, tap_count and the
 * rows' interval check do, inline in the push loop), or keep any sample.
 */
#include "engine/engine-int.h"
#include "engine/engine.h"

#include "base/err.h"

#include <string.h>

/* A mark of kind k (engine.h: TLC_TAP_GAP, TLC_TAP_WALL) at target time t to every tap, whatever
 * it wants. */
void tlc__engine_tap_mark(tlc_engine_t *e, unsigned k, int64_t t, int64_t value) {
  tlc_engine_sample_t x;
  memset(&x, 0, sizeof(x));
  x.context = TLC_CTX_NONE;
  x.kind = (uint8_t)k;
  x.row_kind = 0xFF;
  x.value = value;
  x.start = x.end = t;
  x.epoch = e->c.clock_resets;
  x.seq_start = x.seq_end = e->seq;
  if (e->ntaps <= 1) {
    (void)e->o.tap(e->o.tap_ud, &x);
  } else {
    unsigned j;
    for (j = 0; j < e->ntaps; j++)
      (void)e->taps[j].fn(e->taps[j].ud, &x);
  }
}

/* The tap's call for a sample of kind k of row r (engine.h: tlc_engine_sample_t) and, when a tap
 * answers n > 0, the sample's tag in the log: out of line, so that an engine without a tap pays
 * one predicted branch per sample. */
void tlc__engine_tap_emit(tlc_engine_t *e, erow_t *r, unsigned k, int64_t v, int64_t start,
                          uint64_t seq_start, int64_t end) {
  tlc_engine_sample_t x;
  int n;
  x.handle = r->handle;
  x.context = r->kind == TLC_ROW_CODE && r->ctx != NONE32 ? e->ctx[r->ctx].tindex : TLC_CTX_NONE;
  x.kind = (uint8_t)k;
  x.row_kind = r->kind;
  x.state = r->kind == TLC_ROW_STATE ? r->state : 0;
  x.value = v;
  x.start = start;
  x.end = end;
  x.epoch = e->c.clock_resets;
  x.seq_start = seq_start;
  x.seq_end = e->seq;
  if (TLC_LIKELY(e->ntaps <= 1)) {
    x.cookie = r->tap_cookie;
    n = e->o.tap(e->o.tap_ud, &x);
  } else {
    /* several taps: each one that wants kind k of this row, with its own cookie (tap_ask
     * filled tapx[row] before the row's mask had any bit) */
    const struct etapx *tx = &e->tapx[r - e->rows];
    unsigned i;
    n = 0;
    for (i = 0; i < e->ntaps; i++)
      if (tx->mask[i] & (1u << k)) {
        int a;
        x.cookie = tx->cookie[i];
        a = e->taps[i].fn(e->taps[i].ud, &x);
        n += a > 0 ? a : 0;
      }
  }
  /* what a tap found in the sample, to the log's consumer in order with the samples */
  if (TLC_UNLIKELY(n > 0) && e->slog != NULL)
    tlc__engine_slog_tag(e, r, k, (unsigned)n, end);
}

/* b: no band for any kind. */
static void band_none(struct etband *b) {
  unsigned k;
  for (k = 0; k < NK; k++) {
    b->k[k].lo = INT64_MIN; /* empty: samples are >= 0 */
    b->k[k].w = 0;
  }
}

/* Writes r's bands (engine-int.h: e->tband) after its tap_mask was asked: the one tap's band
 * function's answer for each kind < NK it wants, empty for the others and for every
 * kind with several taps or without a band function. Grows tband when r needs a band; without
 * memory r keeps none (every wanted sample is handed over, as without a band). */
static void tap_bands(tlc_engine_t *e, const erow_t *r) {
  size_t ri = (size_t)(r - e->rows), j;
  tlc_engine_tap_band_fn band = e->ntaps == 1 ? e->o.tap_band : NULL;
  struct etband b;
  int any = 0;
  unsigned k;
  band_none(&b);
  for (k = 0; band != NULL && k < NK; k++) {
    int64_t lo, hi;
    if ((r->tap_mask & (1u << k)) && band(e->o.tap_ud, r->tap_cookie, k, &lo, &hi) && lo <= hi) {
      b.k[k].lo = lo;
      b.k[k].w = (uint64_t)hi - (uint64_t)lo;
      any = 1;
    }
  }
  if (ri >= e->captband) {
    size_t cap = e->captband;
    struct etband *n;
    if (!any)
      return; /* none beyond captband: none */
    n = tlc__engine_grow(e, e->tband, &cap, ri + 1, sizeof(*n), 64, TLC_ACCT_GROW);
    if (n == NULL)
      return; /* no memory: no band */
    for (j = e->captband; j < cap; j++)
      band_none(&n[j]);
    e->tband = n;
    e->captband = cap;
  }
  e->tband[ri] = b;
}

/* Asks the tap which kinds of r it wants (engine.h: tap_want) and returns them. */
unsigned tlc__engine_tap_ask(tlc_engine_t *e, erow_t *r) {
  uint32_t ctx = r->kind == TLC_ROW_CODE && r->ctx != NONE32 ? e->ctx[r->ctx].tindex : TLC_CTX_NONE;
  uint64_t st = r->kind == TLC_ROW_STATE ? r->state : 0;
  uint32_t cookie = 0;
  unsigned m = 0, i;
  if (e->ntaps > 1) {
    size_t ri = (size_t)(r - e->rows);
    struct etapx *tx;
    if (ri >= e->captapx) {
      /* one entry per row the engine has room for: bounded by max_areas like the rows */
      size_t cap = e->captapx;
      struct etapx *n =
          tlc__engine_grow(e, e->tapx, &cap, e->caprows, sizeof(*n), 64, TLC_ACCT_GROW);
      if (n == NULL)
        return 0; /* no memory: asked again at the row's next sample */
      e->tapx = n;
      e->captapx = cap;
    }
    tx = &e->tapx[ri];
    for (i = 0; i < e->ntaps; i++) {
      unsigned mi;
      cookie = 0;
      mi = e->taps[i].want != NULL
               ? e->taps[i].want(e->taps[i].ud, r->handle, ctx, r->kind, st, &cookie)
               : 0xFFu;
      mi &= ~TAP_ASK;
      tx->mask[i] = (uint8_t)mi;
      tx->cookie[i] = cookie;
      m |= mi;
    }
    r->tap_mask = (uint8_t)m;
    r->tap_cookie = 0;
  } else {
    m = e->o.tap_want != NULL ? e->o.tap_want(e->o.tap_ud, r->handle, ctx, r->kind, st, &cookie)
                              : 0xFFu;
    r->tap_mask = (uint8_t)(m & ~TAP_ASK);
    r->tap_cookie = cookie;
  }
  tap_bands(e, r);
  if (r->tap_mask == 0) /* watched by none: the fast path again (engine-int.h) */
    r->whi = r->tap_whi;
  return r->tap_mask;
}

/* r's tap_mask, TAP_ASK set, answered by the taps or, without any, 0 (engine-int.h). */
unsigned tlc__engine_tap_resolve_ask(tlc_engine_t *e, erow_t *r) {
  if (e->ntaps == 0) {
    r->tap_mask = 0;
    r->whi = r->tap_whi;
    return 0;
  }
  return tlc__engine_tap_ask(e, r);
}

/* Mirrors the tap list into o.tap, o.tap_want, o.tap_band and o.tap_ud (engine-int.h: struct
 * etap) and makes every row ask again. */
static void taps_changed(tlc_engine_t *e) {
  static const struct etap none;
  const struct etap *t = e->ntaps > 0 ? &e->taps[0] : &none;
  e->o.tap = t->fn;
  e->o.tap_want = t->want;
  e->o.tap_band = t->band;
  e->o.tap_ud = t->ud;
  tlc__engine_tap_regen(e);
}

void tlc_engine_set_tap(tlc_engine_t *e, tlc_engine_tap_fn tap, tlc_engine_tap_want_fn want,
                        tlc_engine_tap_band_fn band, void *ud) {
  e->ntaps = 0;
  if (tap != NULL) {
    e->taps[0] = (struct etap){ tap, want, band, ud };
    e->ntaps = 1;
  }
  taps_changed(e);
}

int tlc_engine_add_tap(tlc_engine_t *e, tlc_engine_tap_fn tap, tlc_engine_tap_want_fn want,
                       tlc_engine_tap_band_fn band, void *ud) {
  if (tap == NULL)
    return TLC_EINVAL;
  if (e->ntaps >= TLC_ENGINE_TAPS)
    return TLC_ELIMIT;
  e->taps[e->ntaps++] = (struct etap){ tap, want, band, ud };
  taps_changed(e);
  return 0;
}

void tlc_engine_remove_tap(tlc_engine_t *e, void *ud) {
  unsigned i;
  for (i = 0; i < e->ntaps; i++)
    if (e->taps[i].ud == ud) {
      memmove(&e->taps[i], &e->taps[i + 1], (e->ntaps - i - 1) * sizeof(e->taps[0]));
      e->ntaps--;
      taps_changed(e);
      return;
    }
}

void tlc__engine_tap_regen(tlc_engine_t *e) {
  size_t i;
  for (i = 0; i < e->nrows; i++) {
    erow_t *r = &e->rows[i];
    if (r->tap_mask == 0) { /* its next event takes the out-of-line path, which asks */
      r->tap_whi = r->whi;
      r->whi = INT64_MIN;
    }
    r->tap_mask = TAP_ASK;
    if (r->slog == 0) /* a row loaded (checkpoint.c); one the log described stays so */
      r->slog = (uint8_t)(e->slog_fn != NULL && i < TLC_SLOG_MARKS / NK);
  }
}
