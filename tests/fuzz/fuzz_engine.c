/* fuzz_engine.c - libFuzzer harness for the statistics engine on its own (daemon/engine.c):
 * arbitrary events, not only the ones a decoder lets through, in every mode the engine has.
 *
 * Input: byte 0 = mode, byte 1 = caps, byte 2 = window lengths, then 16-byte event records:
 *   mode bits 0-1  format: 0 bin10, 1 bin11, 2 evlog, 3 bin11
 *             2    context_area = 0x30000000 (bin1x only; the engine ignores it for evlog)
 *             3    histograms off
 *             4-5  number of rolling windows (0..3)
 *             6    a mapping linking variable 0x20000000 to state area 0x30000001
 *             7    two taps (tlc_engine_add_tap): A wants every sample of every row, B only
 *                  NET, PERIOD and COUNT of even handles, with a cookie of its own; B is
 *                  removed after the first snapshot
 *   caps     bits 0-2 max_areas = 1 << (bits + 1) (bits == 7: the default), bits 3-4
 *            max_contexts = 1 << bits (3: default), bits 5-7 max_depth = 1 << bits
 *   windows  window i is 10 << ((byte >> (2 * i)) & 3) * 4 ns long, so steps are short and
 *            samples fold and slide out of windows within a few events
 *   record   byte 0: bits 0-2 type (0..4 X S R E W, 5 and 6 invalid, 7 TLC_EV_NONE), bit 3 the
 *            gap flag, bit 4 a snapshot after this event, bits 5-7 its options; byte 1: core;
 *            byte 2: the handle's area type nibble (0..15: 6..15 are invalid); byte 3: the
 *            handle's index (0..31, so areas repeat); bytes 4-7: a signed time step (INT32_MIN
 *            and INT32_MAX jump to INT64_MIN and INT64_MAX); bytes 8-15: data (also the evlog
 *            thread).
 * A snapshot is a delta since the previous one (or full, the first time), then a full one with
 * the same options at the same engine state.
 *
 * Checked (abort on violation):
 *  - no crash, UB, leak or hang (ASan/UBSan/LSan);
 *  - counters: events == records that are not TLC_EV_NONE, gaps == gap flags;
 *  - every row of a delta equals the same row of the full snapshot taken right after it
 *    (count, totals, distributions with quantiles, windows, values);
 *  - the delta contract: every per-context, data or state row that a delta leaves out is as it
 *    was at the previous snapshot (count, totals, distributions, values; windows may slide),
 *    and a row that is new since then is in the delta (not checked across a neutral_only
 *    snapshot, which leaves per-context rows out);
 *  - taps: B got exactly the samples of A that it wants (per kind, in number and value sum,
 *    while both were attached), each with its own cookie (the handle + 1); none after its
 *    removal;
 *  - every row of a full snapshot: totals >= 0; a distribution with samples has
 *    0 <= min <= max and its quantiles, when known, ascend within [min, max]; a window's
 *    count and samples are at most the cumulative ones; no more per-context rows than
 *    max_areas; each row's context exists.
 */
#include "engine/engine.h"
#include "formats/mapping.h"
#include "formats/stats.h"
#include "formats/tlc_event.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define REC 16

/* the taps' tallies per kind (samples and marks, TLC_TAP_GAP included) */
typedef struct tally {
  uint64_t n[TLC_TAP_GAP + 1];
  uint64_t sum[TLC_TAP_GAP + 1];
  int on;       /* B: attached */
  int filtered; /* A: tally only what B wants (while B is attached) */
} tally_t;

#define B_WANTS ((1u << TLC_NET) | (1u << TLC_PERIOD) | (1u << TLC_TAP_COUNT))

static int tap_fn(void *ud, const tlc_engine_sample_t *s) {
  tally_t *t = ud;
  if (s->kind > TLC_TAP_GAP)
    abort();
  if (t->filtered) {
    if (s->kind != TLC_TAP_GAP && ((s->handle & 1) || !(B_WANTS & (1u << s->kind))))
      return 0;
  } else if (s->kind != TLC_TAP_GAP && s->cookie != s->handle + 1) {
    abort(); /* B's own cookie */
  }
  if (!t->filtered && !t->on)
    abort(); /* B after its removal */
  t->n[s->kind]++;
  t->sum[s->kind] += (uint64_t)s->value;
  return 0;
}

static unsigned want_b(void *ud, uint32_t handle, uint32_t context, uint8_t row_kind,
                       uint64_t state, uint32_t *cookie) {
  (void)ud, (void)context, (void)row_kind, (void)state;
  *cookie = handle + 1;
  return (handle & 1) ? 0 : B_WANTS;
}

static uint64_t ld(const uint8_t *p, unsigned n) {
  uint64_t v = 0;
  unsigned i;
  for (i = 0; i < n; i++)
    v |= (uint64_t)p[i] << (8 * i);
  return v;
}

static void check_dist(const tlc_dist_t *d) {
  unsigned i;
  if (d->n == 0)
    return;
  if (d->min < 0 || d->min > d->max)
    abort();
  if (d->has_q)
    for (i = 0; i < TLC_NQUANT; i++)
      if (d->q[i] < d->min || d->q[i] > d->max || (i > 0 && d->q[i] < d->q[i - 1]))
        abort();
}

static void check_full(const tlc_table_t *t, const tlc_engine_opts_t *o) {
  size_t i, percontext = 0;
  unsigned k, w;
  for (i = 0; i < t->nrows; i++) {
    const tlc_stat_t *s = &t->rows[i];
    if (s->context != TLC_CTX_NONE && s->context != TLC_CTX_NEUTRAL) {
      if (s->context >= t->ncontexts)
        abort();
      percontext++;
    }
    for (k = 0; k < TLC_NKINDS; k++) {
      if (s->total[k] < 0)
        abort();
      check_dist(&s->dist[k]);
      for (w = 0; w < s->nwin; w++) {
        const tlc_wdist_t *x = &s->win[w].k[k];
        if (x->n > s->dist[k].n ||
            (x->n > 0 && (x->min < s->dist[k].min || x->max > s->dist[k].max)))
          abort();
      }
    }
    for (w = 0; w < s->nwin; w++)
      if (s->win[w].count > s->count)
        abort();
  }
  if (percontext > o->max_areas)
    abort();
}

/* Equal distributions; quantiles compared when `q` (one engine state and the same options:
 * has_q must agree too). */
static int same_dist(const tlc_dist_t *a, const tlc_dist_t *b, int q) {
  if (a->n != b->n || a->sum != b->sum || (a->n > 0 && (a->min != b->min || a->max != b->max)) ||
      a->sumsq_hi != b->sumsq_hi || a->sumsq_lo != b->sumsq_lo)
    return 0;
  return !q || (a->has_q == b->has_q && (!a->has_q || memcmp(a->q, b->q, sizeof(a->q)) == 0));
}

/* The row of t (sorted, as snapshots are) with k's key. */
static const tlc_stat_t *find_row(const tlc_table_t *t, const tlc_stat_t *k) {
  return tlc_table_find(t, k->handle, k->context, k->state);
}

/* Count, totals, distributions and values (not windows, which slide with time). */
static int same_stats(const tlc_stat_t *a, const tlc_stat_t *b, int q) {
  unsigned k;
  if (a->count != b->count || a->anomalies != b->anomalies || a->value != b->value ||
      a->value_min != b->value_min || a->value_max != b->value_max || a->has_value != b->has_value)
    return 0;
  for (k = 0; k < TLC_NKINDS; k++)
    if (a->total[k] != b->total[k] || !same_dist(&a->dist[k], &b->dist[k], q))
      return 0;
  return 1;
}

/* Every row of the delta d equals its row in f, the full snapshot of the same engine state. */
static void check_delta(const tlc_table_t *d, const tlc_table_t *f) {
  size_t i;
  unsigned k, w;
  for (i = 0; i < d->nrows; i++) {
    const tlc_stat_t *a = &d->rows[i], *b = find_row(f, a);
    if (b == NULL || !same_stats(a, b, 1) || a->nwin != b->nwin)
      abort();
    for (w = 0; w < a->nwin; w++) {
      if (a->win[w].count != b->win[w].count)
        abort();
      for (k = 0; k < TLC_NKINDS; k++) {
        const tlc_wdist_t *x = &a->win[w].k[k], *y = &b->win[w].k[k];
        if (x->n != y->n || x->sum != y->sum ||
            (x->n > 0 && (x->min != y->min || x->max != y->max)))
          abort();
      }
    }
  }
}

/* The contract: the rows of f (a full snapshot) that the delta d leaves out are as they were in
 * prev, the full snapshot at the delta's base (Neutral rows aside: they may be left out of prev
 * by its options). q: prev was taken with the same quantiles option. */
static void check_contract(const tlc_table_t *d, const tlc_table_t *f, const tlc_table_t *prev,
                           int q) {
  size_t i;
  for (i = 0; i < f->nrows; i++) {
    const tlc_stat_t *b = &f->rows[i], *p;
    if (b->context == TLC_CTX_NEUTRAL || find_row(d, b) != NULL)
      continue;
    p = find_row(prev, b);
    if (p == NULL || !same_stats(p, b, q))
      abort();
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const tlc_format_t fmts[4] = { TLC_FMT_BIN10, TLC_FMT_BIN11, TLC_FMT_EVLOG,
                                        TLC_FMT_BIN11 };
  tlc_engine_opts_t o;
  tlc_engine_t *e;
  tlc_mapping_t map;
  tlc_table_t delta, full, prev, tmp;
  tlc_snap_opts_t so, prev_so;
  tally_t ta, tb;
  int have_prev = 0;
  uint64_t events = 0, gaps = 0, last_seq = 0;
  int64_t t = 0;
  unsigned mode, caps, i;
  size_t pos;
  if (size < 3)
    return 0;
  mode = data[0];
  caps = data[1];
  tlc_engine_opts_default(&o);
  o.has_context_area = (mode & 4) != 0;
  o.context_area = 0x30000000u;
  o.histograms = (mode & 8) == 0;
  o.nwindows = (mode >> 4) & 3;
  for (i = 0; i < o.nwindows; i++)
    o.window_ns[i] = (int64_t)10 << (((data[2] >> (2 * i)) & 3) * 4);
  if ((caps & 7) != 7)
    o.max_areas = (size_t)1 << ((caps & 7) + 1);
  if (((caps >> 3) & 3) != 3)
    o.max_contexts = (size_t)1 << ((caps >> 3) & 3);
  o.max_depth = (size_t)1 << (caps >> 5);
  tlc_mapping_init(&map);
  if (mode & 64) {
    tlc_map_area_t a;
    memset(&a, 0, sizeof(a));
    a.handle = 0x20000000u;
    a.parent = TLC_NO_HANDLE;
    a.state_handle = 0x30000001u;
    if (tlc_mapping_add(&map, &a) != 0)
      abort();
    tlc_mapping_finish(&map);
    o.mapping = &map;
  }
  if (tlc_engine_new(&e, fmts[mode & 3], &o) != 0)
    abort();
  memset(&ta, 0, sizeof(ta));
  memset(&tb, 0, sizeof(tb));
  if (mode & 128) {
    ta.filtered = 1;
    tb.on = 1;
    if (tlc_engine_add_tap(e, tap_fn, NULL, NULL, &ta) != 0 ||
        tlc_engine_add_tap(e, tap_fn, want_b, NULL, &tb) != 0)
      abort();
  }
  tlc_table_init(&delta);
  tlc_table_init(&full);
  tlc_table_init(&prev);
  memset(&prev_so, 0, sizeof(prev_so));
  for (pos = 3; pos + REC <= size; pos += REC) {
    const uint8_t *r = data + pos;
    tlc_event_t ev;
    int32_t step = (int32_t)(uint32_t)ld(r + 4, 4);
    memset(&ev, 0, sizeof(ev));
    ev.type = (r[0] & 7) == 7 ? TLC_EV_NONE : (uint8_t)(r[0] & 7);
    ev.flags = (r[0] & 8) ? TLC_EVF_GAP : 0;
    ev.core = r[1];
    ev.handle = (uint32_t)(r[2] & 15) << 28 | (r[3] & 31u);
    if (step == INT32_MIN)
      t = INT64_MIN;
    else if (step == INT32_MAX)
      t = INT64_MAX;
    else if (!((step > 0 && t > INT64_MAX - step) || (step < 0 && t < INT64_MIN - step)))
      t += step;
    ev.time_ns = t;
    ev.data = ld(r + 8, 8);
    ev.thread = ev.data & 7;
    ev.offset = pos;
    if (ev.type != TLC_EV_NONE) {
      events++;
      if (ev.flags & TLC_EVF_GAP)
        gaps++;
    }
    tlc_engine_push(e, &ev, 1);
    if (r[0] & 16) {
      memset(&so, 0, sizeof(so));
      so.windows = (r[0] >> 5) & 1;
      so.quantiles = (r[0] >> 6) & 1;
      so.neutral = (r[0] >> 7) & 1;
      so.neutral_only = ((r[0] >> 5) & 7) == 7;
      so.since_seq = last_seq;
      if (tlc_engine_snapshot(e, &delta, &so) != 0)
        abort();
      so.since_seq = 0;
      if (tlc_engine_snapshot(e, &full, &so) != 0)
        abort();
      if (delta.seq != full.seq || full.counters.events != events || full.counters.gaps != gaps)
        abort();
      check_delta(&delta, &full);
      check_full(&full, &o);
      if (have_prev && !so.neutral_only && !prev_so.neutral_only)
        check_contract(&delta, &full, &prev, so.quantiles == prev_so.quantiles);
      tmp = prev; /* full becomes the base of the next delta */
      prev = full;
      full = tmp;
      prev_so = so;
      have_prev = 1;
      last_seq = prev.seq;
      if (tb.on) { /* B leaves: what both saw must agree */
        if (memcmp(ta.n, tb.n, sizeof(ta.n)) != 0 || memcmp(ta.sum, tb.sum, sizeof(ta.sum)) != 0)
          abort();
        tlc_engine_remove_tap(e, &tb);
        tb.on = 0;
      }
    }
  }
  if (tb.on &&
      (memcmp(ta.n, tb.n, sizeof(ta.n)) != 0 || memcmp(ta.sum, tb.sum, sizeof(ta.sum)) != 0))
    abort();
  if (tlc_engine_counters(e)->events != events || tlc_engine_counters(e)->gaps != gaps)
    abort();
  if (tlc_engine_snapshot(e, &full, NULL) != 0)
    abort();
  check_full(&full, &o);
  tlc_table_fini(&delta);
  tlc_table_fini(&full);
  tlc_table_fini(&prev);
  tlc_engine_free(e);
  tlc_mapping_fini(&map);
  return 0;
}
