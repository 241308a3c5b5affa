/* test_engine_taps.c - several taps on one engine (engine.h: tlc_engine_add_tap).
 *
 *  - two taps with different wants (A: NET and COUNT of the code areas of even handles, with a
 *    cookie of its own; B: PERIOD of every row, another cookie) each receive exactly their
 *    samples: the samples of a reference engine whose single tap wants everything, filtered by
 *    the want, in the same order and with the same values, times, sequences, and their own
 *    cookies; per row and kind, their number is the snapshot's n (brute-force count);
 *  - gaps reach both;
 *  - removing A: from the next event on only B is called, still exactly its samples;
 *  - at most TLC_ENGINE_TAPS: the next tlc_engine_add_tap is TLC_ELIMIT; set_tap replaces all;
 *  - bands (a tap's tlc_engine_tap_band_fn): the one tap gets exactly the reference's samples
 *    it wants but those inside its band of their row and kind (counts and gaps whole), bands
 *    asked again when the tap is set again; without a band function or with a second tap,
 *    every wanted sample.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "base/alloc.h"
#include "base/err.h"
#include "engine/engine.h"
#include "formats/stats.h"

#include <stdlib.h>
#include <string.h>

typedef struct rec {
  tlc_engine_sample_t *s;
  size_t n, cap;
} rec_t;

static void rec_add(rec_t *r, const tlc_engine_sample_t *s) {
  if (r->n == r->cap) {
    r->cap = r->cap ? r->cap * 2 : 1024;
    r->s = realloc(r->s, r->cap * sizeof(*r->s));
    assert_non_null(r->s);
  }
  r->s[r->n++] = *s;
}

static int tap_fn(void *ud, const tlc_engine_sample_t *s) {
  rec_add(ud, s);
  return 0;
}

/* A: NET and COUNT of code rows of even handles, cookie handle * 3 + 1 */
static unsigned want_a(void *ud, uint32_t handle, uint32_t context, uint8_t row_kind,
                       uint64_t state, uint32_t *cookie) {
  (void)ud, (void)context, (void)state;
  if (row_kind != TLC_ROW_CODE || handle % 2 != 0)
    return 0;
  *cookie = handle * 3 + 1;
  return (1u << TLC_NET) | (1u << TLC_TAP_COUNT);
}
static int is_a(const tlc_engine_sample_t *s) {
  return s->kind == TLC_TAP_GAP || (s->row_kind == TLC_ROW_CODE && s->handle % 2 == 0 &&
                                    (s->kind == TLC_NET || s->kind == TLC_TAP_COUNT));
}

/* B: PERIOD of every row, cookie 7 */
static unsigned want_b(void *ud, uint32_t handle, uint32_t context, uint8_t row_kind,
                       uint64_t state, uint32_t *cookie) {
  (void)ud, (void)handle, (void)context, (void)row_kind, (void)state;
  *cookie = 7;
  return 1u << TLC_PERIOD;
}
static int is_b(const tlc_engine_sample_t *s) {
  return s->kind == TLC_TAP_GAP || s->kind == TLC_PERIOD;
}

static uint64_t rng = 88172645463325252ull;
static uint32_t rnd(uint32_t n) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return (uint32_t)(rng % n);
}

/* random code areas on 4 cores (E/X), data writes, times rising from *t */
static void workload(tlc_event_t *ev, size_t n, int64_t *t) {
  size_t i;
  for (i = 0; i < n; i++) {
    tlc_event_t *x = &ev[i];
    memset(x, 0, sizeof(*x));
    *t += 1 + rnd(50000);
    x->time_ns = *t;
    x->core = (uint8_t)rnd(4);
    if (rnd(10) < 8) {
      x->handle = 0x10000000u + rnd(40);
      x->type = (uint8_t)(rnd(2) ? TLC_EV_ENTRY : TLC_EV_EXIT);
    } else {
      x->handle = 0x20000000u + rnd(10);
      x->type = TLC_EV_WRITE;
      x->data = rnd(1000);
    }
  }
}

/* The samples of `all` from index `from` that `is` selects, with cookie `ck` (NULL: A's), are
 * exactly got[gfrom, got->n). */
static void same_samples(const rec_t *all, size_t from, int (*is)(const tlc_engine_sample_t *),
                         const rec_t *got, size_t gfrom, int cookie_b) {
  size_t i, j = gfrom;
  for (i = from; i < all->n; i++) {
    const tlc_engine_sample_t *w = &all->s[i];
    tlc_engine_sample_t g;
    if (!is(w))
      continue;
    assert_true(j < got->n);
    g = got->s[j++];
    assert_int_equal(g.kind, w->kind);
    assert_int_equal(g.handle, w->handle);
    assert_int_equal(g.context, w->context);
    assert_int_equal(g.row_kind, w->row_kind);
    assert_int_equal(g.value, w->value);
    assert_int_equal(g.start, w->start);
    assert_int_equal(g.end, w->end);
    assert_int_equal(g.epoch, w->epoch);
    assert_int_equal(g.seq_start, w->seq_start);
    assert_int_equal(g.seq_end, w->seq_end);
    if (w->kind != TLC_TAP_GAP)
      assert_int_equal(g.cookie, cookie_b ? 7u : w->handle * 3 + 1);
  }
  assert_int_equal(j, got->n);
}

static tlc_engine_t *mk(tlc_engine_tap_fn tap, void *ud) {
  tlc_engine_opts_t o;
  tlc_engine_t *e;
  tlc_engine_opts_default(&o);
  o.tap = tap;
  o.tap_ud = ud;
  assert_int_equal(tlc_engine_new(&e, TLC_FMT_BIN11, &o), 0);
  return e;
}

/* per (handle, context, kind) of code rows: A's NET samples against the snapshot's n */
static void count_vs_snapshot(tlc_engine_t *e, const rec_t *a) {
  tlc_table_t tab;
  tlc_snap_opts_t so;
  size_t i, j, checked = 0;
  memset(&so, 0, sizeof(so));
  tlc_table_init(&tab);
  assert_int_equal(tlc_engine_snapshot(e, &tab, &so), 0);
  for (i = 0; i < tab.nrows; i++) {
    const tlc_stat_t *r = &tab.rows[i];
    uint64_t n = 0;
    if (r->kind != TLC_ROW_CODE || r->handle % 2 != 0 || r->context == TLC_CTX_NONE)
      continue;
    for (j = 0; j < a->n; j++)
      n += a->s[j].kind == TLC_NET && a->s[j].handle == r->handle && a->s[j].context == r->context;
    assert_int_equal(n, r->dist[TLC_NET].n);
    checked++;
  }
  assert_true(checked > 10);
  tlc_table_fini(&tab);
}

/* A new workload of n events into both the reference and e, with a gap halfway when `gap`. */
static void feed(tlc_engine_t *ref, tlc_engine_t *e, tlc_event_t *ev, size_t n, int64_t *t,
                 int gap) {
  size_t h = gap ? n / 2 : n;
  workload(ev, n, t);
  tlc_engine_push(ref, ev, h);
  tlc_engine_push(e, ev, h);
  if (!gap)
    return;
  tlc_engine_gap(ref);
  tlc_engine_gap(e);
  tlc_engine_push(ref, ev + h, n - h);
  tlc_engine_push(e, ev + h, n - h);
}

static void test_two_taps(void **state) {
  enum { N = 20000 };
  tlc_event_t *ev = tlc_calloc(N, sizeof(*ev));
  rec_t all = { 0 }, a = { 0 }, b = { 0 };
  tlc_engine_t *ref = mk(tap_fn, &all), *e = mk(NULL, NULL);
  int64_t t = 1000;
  size_t all0, b0, a_after;
  (void)state;
  assert_non_null(ev);
  assert_int_equal(tlc_engine_add_tap(e, tap_fn, want_a, NULL, &a), 0);
  assert_int_equal(tlc_engine_add_tap(e, tap_fn, want_b, NULL, &b), 0);
  feed(ref, e, ev, N, &t, 1);
  assert_true(a.n > 1000 && b.n > 1000);
  same_samples(&all, 0, is_a, &a, 0, 0);
  same_samples(&all, 0, is_b, &b, 0, 1);
  count_vs_snapshot(e, &a);

  /* A leaves: from the next event on, only B */
  tlc_engine_remove_tap(e, &a);
  tlc_engine_remove_tap(e, &all); /* not attached: nothing */
  all0 = all.n;
  b0 = b.n;
  a_after = a.n;
  feed(ref, e, ev, N, &t, 0);
  assert_int_equal(a.n, a_after);
  assert_true(b.n > b0);
  same_samples(&all, all0, is_b, &b, b0, 1);

  tlc_engine_free(ref);
  tlc_engine_free(e);
  tlc_free(ev);
  free(all.s);
  free(a.s);
  free(b.s);
}

/* ---- bands (tlc_engine_tap_band_fn) ---- */

/* C: every kind and the count of code rows of even handles and of data rows, cookie the
 * handle; its band of kind k on a handle is band_of's, none for handles divisible by 7 */
static unsigned want_c(void *ud, uint32_t handle, uint32_t context, uint8_t row_kind,
                       uint64_t state, uint32_t *cookie) {
  (void)ud, (void)context, (void)state;
  if (row_kind == TLC_ROW_CODE && handle % 2 != 0)
    return 0;
  *cookie = handle;
  return 0x3Fu; /* TLC_NET .. TLC_OUTSIDE and TLC_TAP_COUNT */
}
static int band_shift; /* moves every band: a new band function's answers */
static int band_of(uint32_t handle, unsigned k, int64_t *lo, int64_t *hi) {
  if (handle % 7 == 0)
    return 0;
  *lo = 1000 * (int64_t)((handle + k + (unsigned)band_shift) % 5);
  *hi = *lo + 1000000 * (int64_t)(1 + (handle + k) % 3);
  return 1;
}
static int band_c(void *ud, uint32_t cookie, unsigned k, int64_t *lo, int64_t *hi) {
  (void)ud;
  return band_of(cookie, k, lo, hi);
}
static int is_c(const tlc_engine_sample_t *s) {
  return s->kind == TLC_TAP_GAP || s->row_kind != TLC_ROW_CODE || s->handle % 2 == 0;
}
/* C's, without those inside their band */
static int is_c_out(const tlc_engine_sample_t *s) {
  int64_t lo, hi;
  if (!is_c(s))
    return 0;
  if (s->kind >= TLC_TAP_COUNT || !band_of(s->handle, s->kind, &lo, &hi))
    return 1;
  return s->value < lo || s->value > hi;
}

/* The samples of `all` from `from` that `is` selects are got[gfrom, got->n), values and
 * cookies (the handle) alike; returns how many `all` had that `is_c` selects but `is` did
 * not (those the bands held back). */
static size_t same_c(const rec_t *all, size_t from, int (*is)(const tlc_engine_sample_t *),
                     const rec_t *got, size_t gfrom) {
  size_t i, j = gfrom, held = 0;
  for (i = from; i < all->n; i++) {
    const tlc_engine_sample_t *w = &all->s[i];
    if (!is(w)) {
      held += is_c(w);
      continue;
    }
    assert_true(j < got->n);
    assert_int_equal(got->s[j].kind, w->kind);
    assert_int_equal(got->s[j].handle, w->handle);
    assert_int_equal(got->s[j].context, w->context);
    assert_int_equal(got->s[j].value, w->value);
    assert_int_equal(got->s[j].start, w->start);
    assert_int_equal(got->s[j].end, w->end);
    assert_int_equal(got->s[j].seq_start, w->seq_start);
    assert_int_equal(got->s[j].seq_end, w->seq_end);
    if (w->kind != TLC_TAP_GAP)
      assert_int_equal(got->s[j].cookie, w->handle);
    j++;
  }
  assert_int_equal(j, got->n);
  return held;
}

/* A band holds back exactly the samples inside it: the tap gets the reference's samples it
 * wants minus those, with counts and gaps whole; a tap set again is asked again from the
 * next event on; none (NULL) or a second tap: every wanted sample again. */
static void test_bands(void **state) {
  enum { N = 20000 };
  tlc_event_t *ev = tlc_calloc(N, sizeof(*ev));
  rec_t all = { 0 }, c = { 0 }, d = { 0 };
  tlc_engine_t *ref = mk(tap_fn, &all), *e = mk(NULL, NULL);
  int64_t t = 1000;
  size_t all0, c0;
  (void)state;
  assert_non_null(ev);
  tlc_engine_set_tap(e, tap_fn, want_c, band_c, &c);
  band_shift = 0;
  feed(ref, e, ev, N, &t, 1);
  assert_true(c.n > 1000);
  assert_true(same_c(&all, 0, is_c_out, &c, 0) > 1000); /* the bands held back many */

  /* other bands: asked again, used from the next event on */
  band_shift = 2;
  tlc_engine_set_tap(e, tap_fn, want_c, band_c, &c);
  all0 = all.n;
  c0 = c.n;
  feed(ref, e, ev, N, &t, 0);
  assert_true(same_c(&all, all0, is_c_out, &c, c0) > 1000);

  /* no band: every sample C wants */
  tlc_engine_set_tap(e, tap_fn, want_c, NULL, &c);
  all0 = all.n;
  c0 = c.n;
  feed(ref, e, ev, N, &t, 0);
  assert_int_equal(same_c(&all, all0, is_c, &c, c0), 0);

  /* a band again, then a second tap: bands are for one tap alone, so C gets all it wants */
  tlc_engine_set_tap(e, tap_fn, want_c, band_c, &c);
  assert_int_equal(tlc_engine_add_tap(e, tap_fn, want_c, band_c, &d), 0);
  all0 = all.n;
  c0 = c.n;
  feed(ref, e, ev, N, &t, 0);
  assert_int_equal(same_c(&all, all0, is_c, &c, c0), 0);
  assert_int_equal(same_c(&all, all0, is_c, &d, 0), 0);

  tlc_engine_free(ref);
  tlc_engine_free(e);
  tlc_free(ev);
  free(all.s);
  free(c.s);
  free(d.s);
}

static void test_limit(void **state) {
  rec_t r[TLC_ENGINE_TAPS + 1];
  tlc_event_t ev[2];
  tlc_engine_t *e = mk(NULL, NULL);
  unsigned i;
  (void)state;
  memset(r, 0, sizeof(r));
  for (i = 0; i < TLC_ENGINE_TAPS; i++)
    assert_int_equal(tlc_engine_add_tap(e, tap_fn, NULL, NULL, &r[i]), 0);
  assert_int_equal(tlc_engine_add_tap(e, tap_fn, NULL, NULL, &r[TLC_ENGINE_TAPS]), TLC_ELIMIT);
  memset(ev, 0, sizeof(ev));
  ev[0].type = TLC_EV_ENTRY;
  ev[0].handle = 0x10000001u;
  ev[0].time_ns = 100;
  ev[1] = ev[0];
  ev[1].type = TLC_EV_EXIT;
  ev[1].time_ns = 250;
  tlc_engine_push(e, ev, 2);
  /* every tap with no want gets every sample: COUNT at the E; NET, GROSS, CALL at the X */
  for (i = 0; i < TLC_ENGINE_TAPS; i++)
    assert_int_equal(r[i].n, 4);
  assert_int_equal(r[TLC_ENGINE_TAPS].n, 0);
  assert_int_equal(r[0].s[1].value, 150);
  /* one removed: room for another */
  tlc_engine_remove_tap(e, &r[1]);
  assert_int_equal(tlc_engine_add_tap(e, tap_fn, NULL, NULL, &r[TLC_ENGINE_TAPS]), 0);
  /* set_tap replaces them all with one */
  tlc_engine_set_tap(e, tap_fn, NULL, NULL, &r[0]);
  ev[0].time_ns = 300;
  ev[1].time_ns = 400;
  tlc_engine_push(e, ev, 2);
  /* the second activation: COUNT, PERIOD and OUTSIDE at the E, NET, GROSS, CALL at the X */
  assert_int_equal(r[0].n, 10);
  assert_int_equal(r[2].n, 4);
  assert_int_equal(r[TLC_ENGINE_TAPS].n, 0);
  tlc_engine_set_tap(e, NULL, NULL, NULL, NULL);
  ev[0].time_ns = 500;
  ev[1].time_ns = 600;
  tlc_engine_push(e, ev, 2);
  assert_int_equal(r[0].n, 10);
  tlc_engine_free(e);
  for (i = 0; i <= TLC_ENGINE_TAPS; i++)
    free(r[i].s);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_two_taps),
    cmocka_unit_test(test_limit),
    cmocka_unit_test(test_bands),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
