/* test_engine_rules.c - hand-checked tests, one per rule of SPEC section 2.
 *
 * Each test is a short event sequence; the expected numbers are worked out by hand in the
 * comment above it (times in ns; "T" is the latest event time, up to which open parts count).
 * Notation: E/S/R/X/W h@t = event type on handle h at time t.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "base/alloc.h"
#include "base/err.h"
#include "engine/engine.h"
#include "formats/mapping.h"
#include "formats/stats.h"
#include "testalloc.h"

#include <string.h>

#define F  0x00000000u /* function f */
#define G  0x00000001u /* function g */
#define H  0x00000002u /* function h */
#define L  0x10000004u /* a line area */
#define V  0x20000000u /* variable */
#define V1 0x20000001u /* variable with a state mapping */
#define S  0x30000000u /* state area */
#define S5 0x30000005u /* the state area of V1 */

static tlc_engine_t *mk(tlc_format_t fmt, const tlc_engine_opts_t *o) {
  tlc_engine_t *e = NULL;
  tlc_engine_opts_t d;
  if (o == NULL) {
    tlc_engine_opts_default(&d);
    o = &d;
  }
  assert_int_equal(tlc_engine_new(&e, fmt, o), 0);
  return e;
}

static void evc(tlc_engine_t *e, uint32_t h, unsigned type, int64_t t, uint64_t data,
                unsigned core) {
  tlc_event_t x;
  memset(&x, 0, sizeof(x));
  x.handle = h;
  x.type = (uint8_t)type;
  x.time_ns = t;
  x.data = data;
  x.core = (uint8_t)core;
  tlc_engine_push(e, &x, 1);
}

static void ev(tlc_engine_t *e, uint32_t h, unsigned type, int64_t t) {
  evc(e, h, type, t, 0, 0);
}

#define E_ TLC_EV_ENTRY
#define S_ TLC_EV_SUSPEND
#define R_ TLC_EV_RESUME
#define X_ TLC_EV_EXIT
#define W_ TLC_EV_WRITE

static void snap(tlc_engine_t *e, tlc_table_t *t) {
  tlc_snap_opts_t so = { 0, 1, 1, 1, 0, 0 };
  assert_int_equal(tlc_engine_snapshot(e, t, &so), 0);
}

static const tlc_stat_t *row(const tlc_table_t *t, uint32_t h, uint32_t ctx, uint64_t state) {
  const tlc_stat_t *r = tlc_table_find(t, h, ctx, state);
  assert_non_null(r);
  return r;
}

static void dist_is(const tlc_dist_t *d, uint64_t n, int64_t sum, int64_t min, int64_t max) {
  assert_int_equal(d->n, n);
  assert_int_equal(d->sum, sum);
  if (n > 0) {
    assert_int_equal(d->min, min);
    assert_int_equal(d->max, max);
  }
}

/* A board reset (SPEC 2 "Clock restarts"): f called at 100 s, an activation open at 101 s, a
 * disconnect, and the board back with its clock at 1 ms. The restart is a gap and a new epoch:
 * the 1 s window holds the new call at once (T is 2 ms, not still 101 s), counts and totals keep
 * adding, one clock reset. In a stream, TLC_EVF_RESTART past the threshold restarts too (with
 * a gap of its own); an unflagged step back, or a flagged one short of the threshold, does not. */
static void test_clock_restart(void **state) {
  tlc_engine_t *e = mk(TLC_FMT_BIN11, NULL);
  tlc_table_t t;
  tlc_event_t x;
  const tlc_stat_t *r;
  (void)state;
  tlc_table_init(&t);
  ev(e, F, E_, 100000000000);
  ev(e, F, X_, 100500000000);
  ev(e, F, E_, 101000000000);
  tlc_engine_gap(e);
  ev(e, F, E_, 1000000);
  ev(e, F, X_, 2000000);
  snap(e, &t);
  assert_int_equal(t.counters.clock_resets, 1);
  assert_int_equal(t.counters.gaps, 1);
  assert_int_equal(t.last_time, 2000000);
  r = row(&t, F, 0, 0);
  assert_int_equal(r->count, 3);
  assert_int_equal(r->total[TLC_NET], 500000000 + 1000000);
  dist_is(&r->dist[TLC_NET], 2, 501000000, 1000000, 500000000);
  assert_int_equal(r->win[0].count, 1);
  assert_int_equal(r->win[0].k[TLC_NET].n, 1);
  assert_int_equal(r->win[0].k[TLC_NET].sum, 1000000);
  /* in a stream: flagged but within the threshold, then unflagged far back: no restart */
  memset(&x, 0, sizeof(x));
  x.handle = F;
  x.type = E_;
  x.time_ns = 1500000;
  x.flags = TLC_EVF_RESTART;
  tlc_engine_push(e, &x, 1);
  ev(e, F, X_, -20000000000);
  snap(e, &t);
  assert_int_equal(t.counters.clock_resets, 1);
  assert_int_equal(t.counters.gaps, 1);
  /* flagged and past it: a gap and epoch 2 */
  x.time_ns = -5000000000;
  tlc_engine_push(e, &x, 1);
  ev(e, F, X_, -4999000000);
  snap(e, &t);
  assert_int_equal(t.counters.clock_resets, 2);
  assert_int_equal(t.counters.gaps, 2);
  assert_int_equal(t.last_time, -4999000000);
  r = row(&t, F, 0, 0);
  assert_int_equal(r->count, 5);
  assert_int_equal(r->win[0].count, 1);
  tlc_table_fini(&t);
  tlc_engine_free(e);
}

/* The seed's TIMELINE example (Text1 seed, "Timeline Section"):
 *   20000000,W,00000001,4336 / 00000000,R,,4469 / 10000004,E,,4469 / 10000004,S,,4602 /
 *   00000000,S,,4602
 * V: COUNT 1, VALUE 1, no PERIOD sample.
 * f (00000000): R with nothing open = partial activation, running from 4469; S at 4602 -> NET
 *   133; still open (suspended) at T = 4602: CALL = GROSS = 4602 - 4469 = 133; COUNT 0 (no E);
 *   no samples (never closed).
 * line 10000004: E at 4469, S at 4602: COUNT 1, NET 133, CALL 133 - the seed's STATISTICS
 *   example shows exactly "10000004,59,1,133" (COUNT 1, T.NET 133). */
static void test_seed_timeline(void **state) {
  tlc_engine_t *e = mk(TLC_FMT_BIN11, NULL);
  tlc_table_t t;
  const tlc_stat_t *r;
  (void)state;
  tlc_table_init(&t);
  evc(e, V, W_, 4336, 1, 0);
  ev(e, F, R_, 4469);
  ev(e, L, E_, 4469);
  ev(e, L, S_, 4602);
  ev(e, F, S_, 4602);
  snap(e, &t);
  assert_int_equal(t.ncontexts, 1);
  assert_int_equal(t.first_time, 4336);
  assert_int_equal(t.last_time, 4602);
  r = row(&t, V, TLC_CTX_NONE, 0);
  assert_int_equal(r->kind, TLC_ROW_DATA);
  assert_int_equal(r->count, 1);
  assert_int_equal(r->value, 1);
  assert_int_equal(r->dist[TLC_PERIOD].n, 0);
  r = row(&t, F, 0, 0);
  assert_int_equal(r->count, 0);
  assert_int_equal(r->total[TLC_NET], 133);
  assert_int_equal(r->total[TLC_CALL], 133);
  assert_int_equal(r->total[TLC_GROSS], 133);
  assert_int_equal(r->dist[TLC_NET].n, 0);
  r = row(&t, L, 0, 0);
  assert_int_equal(r->count, 1);
  assert_int_equal(r->total[TLC_NET], 133);
  assert_int_equal(r->total[TLC_CALL], 133);
  assert_int_equal(r->total[TLC_OUTSIDE], 0);
  assert_int_equal(t.counters.events, 5);
  assert_int_equal(t.counters.anomalies, 0);
  tlc_table_fini(&t);
  tlc_engine_free(e);
}

/* E f@100 X f@250 E f@400 X f@600.
 * COUNT 2; NET = CALL = GROSS samples {150, 200}: total 350, min 150, max 200, AVG 175,
 * sum of squares 150^2 + 200^2 = 62500. PERIOD: one sample 400 - 100 = 300.
 * OUTSIDE: 250..400 ended by E = sample 150; from 600 to T = 600 adds 0: total 150. */
static void test_simple_calls(void **state) {
  tlc_engine_t *e = mk(TLC_FMT_BIN11, NULL);
  tlc_table_t t;
  const tlc_stat_t *r;
  unsigned k;
  (void)state;
  tlc_table_init(&t);
  ev(e, F, E_, 100);
  ev(e, F, X_, 250);
  ev(e, F, E_, 400);
  ev(e, F, X_, 600);
  snap(e, &t);
  r = row(&t, F, 0, 0);
  assert_int_equal(r->count, 2);
  for (k = TLC_NET; k <= TLC_CALL; k++) {
    assert_int_equal(r->total[k], 350);
    dist_is(&r->dist[k], 2, 350, 150, 200);
    assert_int_equal(tlc_dist_avg(&r->dist[k]), 175);
    assert_int_equal(r->dist[k].sumsq_hi, 0);
    assert_int_equal(r->dist[k].sumsq_lo, 62500);
  }
  dist_is(&r->dist[TLC_PERIOD], 1, 300, 300, 300);
  assert_int_equal(r->total[TLC_PERIOD], 0);
  assert_int_equal(r->total[TLC_OUTSIDE], 150);
  dist_is(&r->dist[TLC_OUTSIDE], 1, 150, 150, 150);
  /* nearest-rank quantiles of {150, 200}: p50 = 1st = 150, p90 = 2nd = 200 (bucket of 150 is
   * [150, 151]; the representative 150 is clamped into [min, max]) */
  assert_true(r->dist[TLC_NET].has_q);
  assert_int_equal(r->dist[TLC_NET].q[0], 150);
  assert_int_equal(r->dist[TLC_NET].q[1], 200);
  tlc_table_fini(&t);
  tlc_engine_free(e);
}

/* winIDEA nesting: E f@0 S f@10 E g@10 X g@30 R f@30 X f@50.
 * f: running 0..10 and 30..50: NET 30; CALL = GROSS = 50. g: NET = CALL = 20.
 * f has no OUTSIDE before its first activation; it is outside from 50 (T = 50): 0. */
static void test_nested_suspend_resume(void **state) {
  tlc_engine_t *e = mk(TLC_FMT_BIN11, NULL);
  tlc_table_t t;
  const tlc_stat_t *r;
  (void)state;
  tlc_table_init(&t);
  ev(e, F, E_, 0);
  ev(e, F, S_, 10);
  ev(e, G, E_, 10);
  ev(e, G, X_, 30);
  ev(e, F, R_, 30);
  ev(e, F, X_, 50);
  snap(e, &t);
  r = row(&t, F, 0, 0);
  dist_is(&r->dist[TLC_NET], 1, 30, 30, 30);
  dist_is(&r->dist[TLC_CALL], 1, 50, 50, 50);
  dist_is(&r->dist[TLC_GROSS], 1, 50, 50, 50);
  r = row(&t, G, 0, 0);
  dist_is(&r->dist[TLC_NET], 1, 20, 20, 20);
  dist_is(&r->dist[TLC_CALL], 1, 20, 20, 20);
  /* g: outside from 30 to T = 50 (not ended by an E: total only) */
  assert_int_equal(r->total[TLC_OUTSIDE], 20);
  assert_int_equal(r->dist[TLC_OUTSIDE].n, 0);
  tlc_table_fini(&t);
  tlc_engine_free(e);
}

/* Recursion: E f@0 E f@10 X f@30 X f@100.
 * Inner activation: NET = CALL = 30 - 10 = 20. Outer: never suspended: NET = CALL = 100.
 * COUNT 2; PERIOD sample 10. After the inner X, f still has an open activation: not outside.
 * Totals NET 120; samples {20, 100}. */
static void test_recursion(void **state) {
  tlc_engine_t *e = mk(TLC_FMT_BIN11, NULL);
  tlc_table_t t;
  const tlc_stat_t *r;
  (void)state;
  tlc_table_init(&t);
  ev(e, F, E_, 0);
  ev(e, F, E_, 10);
  ev(e, F, X_, 30);
  ev(e, F, X_, 100);
  snap(e, &t);
  r = row(&t, F, 0, 0);
  assert_int_equal(r->count, 2);
  assert_int_equal(r->total[TLC_NET], 120);
  dist_is(&r->dist[TLC_NET], 2, 120, 20, 100);
  dist_is(&r->dist[TLC_PERIOD], 1, 10, 10, 10);
  assert_int_equal(r->total[TLC_OUTSIDE], 0);
  assert_int_equal(r->dist[TLC_OUTSIDE].n, 0);
  tlc_table_fini(&t);
  tlc_engine_free(e);
}

/* S/R on a non-innermost activation: E f@0 E g@10 S f@20 R f@50 X g@60 X f@100.
 * S and R move f although g is innermost. f: running 0..20 and 50..100: NET 70, CALL 100.
 * g: never suspended: NET = CALL = 50. No anomaly. */
static void test_suspend_not_innermost(void **state) {
  tlc_engine_t *e = mk(TLC_FMT_BIN11, NULL);
  tlc_table_t t;
  (void)state;
  tlc_table_init(&t);
  ev(e, F, E_, 0);
  ev(e, G, E_, 10);
  ev(e, F, S_, 20);
  ev(e, F, R_, 50);
  ev(e, G, X_, 60);
  ev(e, F, X_, 100);
  snap(e, &t);
  dist_is(&row(&t, F, 0, 0)->dist[TLC_NET], 1, 70, 70, 70);
  dist_is(&row(&t, F, 0, 0)->dist[TLC_CALL], 1, 100, 100, 100);
  dist_is(&row(&t, G, 0, 0)->dist[TLC_NET], 1, 50, 50, 50);
  assert_int_equal(t.counters.anomalies, 0);
  tlc_table_fini(&t);
  tlc_engine_free(e);
}

/* Truncation: E f@0 E g@10 E h@20 X f@50 E g@80 X g@90.
 * X f finds f below g and h: h then g are closed as truncated at 50 (totals only, one anomaly
 * each): h NET = CALL = 30, g NET = CALL = 40 (first activation), no samples. f: NET = CALL =
 * 50, a sample. All three are outside from 50. E g@80: OUTSIDE sample 30; g's second activation
 * NET = CALL = 10 (a sample). T = 90: f outside total 40, h 40 (no E: no samples), g 30.
 * g: COUNT 2, NET total 40 + 10 = 50, NET samples {10}; PERIOD 80 - 10 = 70.
 * Anomalies: 2 (g 1, h 1). */
static void test_truncation(void **state) {
  tlc_engine_t *e = mk(TLC_FMT_BIN11, NULL);
  tlc_table_t t;
  const tlc_stat_t *r;
  (void)state;
  tlc_table_init(&t);
  ev(e, F, E_, 0);
  ev(e, G, E_, 10);
  ev(e, H, E_, 20);
  ev(e, F, X_, 50);
  ev(e, G, E_, 80);
  ev(e, G, X_, 90);
  snap(e, &t);
  assert_int_equal(t.counters.anomalies, 2);
  r = row(&t, H, 0, 0);
  assert_int_equal(r->anomalies, 1);
  assert_int_equal(r->total[TLC_NET], 30);
  assert_int_equal(r->total[TLC_CALL], 30);
  assert_int_equal(r->dist[TLC_NET].n, 0);
  assert_int_equal(r->total[TLC_OUTSIDE], 40);
  r = row(&t, G, 0, 0);
  assert_int_equal(r->anomalies, 1);
  assert_int_equal(r->count, 2);
  assert_int_equal(r->total[TLC_NET], 50);
  dist_is(&r->dist[TLC_NET], 1, 10, 10, 10);
  dist_is(&r->dist[TLC_OUTSIDE], 1, 30, 30, 30);
  dist_is(&r->dist[TLC_PERIOD], 1, 70, 70, 70);
  assert_int_equal(r->total[TLC_OUTSIDE], 30);
  r = row(&t, F, 0, 0);
  assert_int_equal(r->anomalies, 0);
  dist_is(&r->dist[TLC_NET], 1, 50, 50, 50);
  assert_int_equal(r->total[TLC_OUTSIDE], 40);
  tlc_table_fini(&t);
  tlc_engine_free(e);
}

/* Partial activations and X without E:
 * R f@100 (nothing open: partial, running) X f@150: totals NET = CALL = 50, no samples, COUNT 0.
 * f is outside from 150. S g@200 (partial, suspended) R g@210 X g@260: NET 50, CALL 60.
 * X h@300 with nothing open: one anomaly on h, nothing else (h has a row, COUNT 0).
 * E f@400: ends f's stretch 150..400 - a sample of 250. T = 400; f's new activation is open:
 * NET = CALL = 0 so far. */
static void test_partial_and_stray_exit(void **state) {
  tlc_engine_t *e = mk(TLC_FMT_BIN11, NULL);
  tlc_table_t t;
  const tlc_stat_t *r;
  (void)state;
  tlc_table_init(&t);
  ev(e, F, R_, 100);
  ev(e, F, X_, 150);
  ev(e, G, S_, 200);
  ev(e, G, R_, 210);
  ev(e, G, X_, 260);
  ev(e, H, X_, 300);
  ev(e, F, E_, 400);
  snap(e, &t);
  r = row(&t, F, 0, 0);
  assert_int_equal(r->count, 1);
  assert_int_equal(r->total[TLC_NET], 50);
  assert_int_equal(r->total[TLC_CALL], 50);
  assert_int_equal(r->dist[TLC_NET].n, 0);
  dist_is(&r->dist[TLC_OUTSIDE], 1, 250, 250, 250);
  r = row(&t, G, 0, 0);
  assert_int_equal(r->total[TLC_NET], 50);
  assert_int_equal(r->total[TLC_CALL], 60);
  assert_int_equal(r->dist[TLC_CALL].n, 0);
  /* g outside from 260 to T = 400 */
  assert_int_equal(r->total[TLC_OUTSIDE], 140);
  r = row(&t, H, 0, 0);
  assert_int_equal(r->count, 0);
  assert_int_equal(r->anomalies, 1);
  assert_int_equal(r->total[TLC_OUTSIDE], 0);
  assert_int_equal(t.counters.anomalies, 1);
  tlc_table_fini(&t);
  tlc_engine_free(e);
}

/* Negative durations: E f@100 X f@50 (time went backwards).
 * CALL = 50 - 100 < 0 -> 0 and one anomaly; NET's running period 100..50 < 0 -> 0 and one
 * anomaly (GROSS is CALL without context_area: no third). Samples NET = CALL = 0.
 * T stays 100 (the latest time seen), so f is outside from 50: open part 100 - 50 = 50. */
static void test_negative_duration(void **state) {
  tlc_engine_t *e = mk(TLC_FMT_BIN11, NULL);
  tlc_table_t t;
  const tlc_stat_t *r;
  (void)state;
  tlc_table_init(&t);
  ev(e, F, E_, 100);
  ev(e, F, X_, 50);
  snap(e, &t);
  assert_int_equal(t.last_time, 100);
  r = row(&t, F, 0, 0);
  assert_int_equal(r->anomalies, 2);
  dist_is(&r->dist[TLC_NET], 1, 0, 0, 0);
  dist_is(&r->dist[TLC_CALL], 1, 0, 0, 0);
  dist_is(&r->dist[TLC_GROSS], 1, 0, 0, 0);
  assert_int_equal(r->total[TLC_OUTSIDE], 50);
  tlc_table_fini(&t);
  tlc_engine_free(e);
}

/* A 64-bit timer that wraps (RELIABILITY T22): differences saturate instead of overflowing.
 * E @MAX-10, X @MIN+10: CALL and NET come out negative -> 0 and one anomaly each (2).
 * The latest time stays MAX-10; the open outside stretch from MIN+10 to MAX-10 does not fit:
 * its total saturates at INT64_MAX.
 * E @MIN+20: the PERIOD from MAX-10 is negative -> 0 and an anomaly (3); the outside stretch
 * MIN+10..MIN+20 closes: sample 10. X @MIN+30: CALL = NET = 10.
 * End: CALL {0, 10}, PERIOD {0}, OUTSIDE samples {10}, OUTSIDE total = 10 + the open stretch
 * MIN+30..MAX-10 (saturated) = INT64_MAX. */
static void test_timer_wrap(void **state) {
  tlc_engine_t *e = mk(TLC_FMT_BIN11, NULL);
  tlc_table_t t;
  const tlc_stat_t *r;
  (void)state;
  tlc_table_init(&t);
  ev(e, F, E_, INT64_MAX - 10);
  ev(e, F, X_, INT64_MIN + 10);
  snap(e, &t);
  r = row(&t, F, 0, 0);
  assert_int_equal(r->anomalies, 2);
  dist_is(&r->dist[TLC_CALL], 1, 0, 0, 0);
  dist_is(&r->dist[TLC_NET], 1, 0, 0, 0);
  assert_int_equal(r->total[TLC_OUTSIDE], INT64_MAX);
  ev(e, F, E_, INT64_MIN + 20);
  ev(e, F, X_, INT64_MIN + 30);
  snap(e, &t);
  assert_int_equal(t.last_time, INT64_MAX - 10);
  r = row(&t, F, 0, 0);
  assert_int_equal(r->anomalies, 3);
  dist_is(&r->dist[TLC_CALL], 2, 10, 0, 10);
  dist_is(&r->dist[TLC_NET], 2, 10, 0, 10);
  dist_is(&r->dist[TLC_PERIOD], 1, 0, 0, 0);
  dist_is(&r->dist[TLC_OUTSIDE], 1, 10, 10, 10);
  assert_int_equal(r->total[TLC_OUTSIDE], INT64_MAX);
  tlc_table_fini(&t);
  tlc_engine_free(e);
}

/* Data area: W v=5 @10, W v=3 @40, W v=9 @100.
 * COUNT 3, VALUE 9, value min 3, max 9; PERIOD samples {30, 60}: AVG 45. No totals. */
static void test_data_area(void **state) {
  tlc_engine_t *e = mk(TLC_FMT_BIN11, NULL);
  tlc_table_t t;
  const tlc_stat_t *r;
  (void)state;
  tlc_table_init(&t);
  evc(e, V, W_, 10, 5, 0);
  evc(e, V, W_, 40, 3, 0);
  evc(e, V, W_, 100, 9, 1); /* data areas are global: the core does not matter */
  snap(e, &t);
  assert_int_equal(t.nrows, 1);
  assert_int_equal(t.ncontexts, 0);
  r = row(&t, V, TLC_CTX_NONE, 0);
  assert_int_equal(r->count, 3);
  assert_true(r->has_value);
  assert_int_equal(r->value, 9);
  assert_int_equal(r->value_min, 3);
  assert_int_equal(r->value_max, 9);
  dist_is(&r->dist[TLC_PERIOD], 2, 90, 30, 60);
  assert_int_equal(tlc_dist_avg(&r->dist[TLC_PERIOD]), 45);
  assert_int_equal(r->total[TLC_NET], 0);
  tlc_table_fini(&t);
  tlc_engine_free(e);
}

/* State area: W S=1 @0, W S=2 @10, W S=2 @15 (current value again: nothing), E S=1 @40
 * (E enters like W), X S @70 (leaves), W S=2 @100, W V @130 (advances T).
 * State 1: entries @0, @40: COUNT 2, PERIOD 40; stays 0..10 (10) and 40..70 (30) closed:
 *   NET total 40, min 10, max 30.
 * State 2: entries @10, @100: COUNT 2, PERIOD 90; stay 10..40 (30) closed; 100..T=130 open
 *   (30): NET total 60, NET samples {30}.
 * X S @140 then X S @150: the second has no state to leave: one anomaly (on no row). */
static void test_state_area(void **state) {
  tlc_engine_t *e = mk(TLC_FMT_BIN11, NULL);
  tlc_table_t t;
  const tlc_stat_t *r;
  (void)state;
  tlc_table_init(&t);
  evc(e, S, W_, 0, 1, 0);
  evc(e, S, W_, 10, 2, 0);
  evc(e, S, W_, 15, 2, 0);
  evc(e, S, E_, 40, 1, 0);
  evc(e, S, X_, 70, 0, 0);
  evc(e, S, W_, 100, 2, 0);
  evc(e, V, W_, 130, 0, 0);
  snap(e, &t);
  r = row(&t, S, TLC_CTX_NONE, 1);
  assert_int_equal(r->kind, TLC_ROW_STATE);
  assert_int_equal(r->count, 2);
  assert_int_equal(r->total[TLC_NET], 40);
  dist_is(&r->dist[TLC_NET], 2, 40, 10, 30);
  dist_is(&r->dist[TLC_PERIOD], 1, 40, 40, 40);
  r = row(&t, S, TLC_CTX_NONE, 2);
  assert_int_equal(r->count, 2);
  assert_int_equal(r->total[TLC_NET], 60);
  dist_is(&r->dist[TLC_NET], 1, 30, 30, 30);
  dist_is(&r->dist[TLC_PERIOD], 1, 90, 90, 90);
  evc(e, S, X_, 140, 0, 0);
  evc(e, S, X_, 150, 0, 0);
  snap(e, &t);
  assert_int_equal(t.counters.anomalies, 1);
  /* state 2's stay 100..140 closed: NET 30 + 40 = 70 */
  assert_int_equal(row(&t, S, TLC_CTX_NONE, 2)->total[TLC_NET], 70);
  tlc_table_fini(&t);
  tlc_engine_free(e);
}

/* Mapping: V1's HANDLE.STATE is S5. W V1=7 @0, W V1=8 @20, W V1=8 @50.
 * V1: COUNT 3, PERIOD {20, 30}. S5: state 7 entered @0, left @20 (NET 20, a sample);
 * state 8 entered @20, written again @50 (no change), open to T = 50: NET 30, no sample. */
static void test_mapping_links_state(void **state) {
  tlc_mapping_t m;
  tlc_map_area_t a;
  tlc_engine_opts_t o;
  tlc_engine_t *e;
  tlc_table_t t;
  const tlc_stat_t *r;
  (void)state;
  tlc_mapping_init(&m);
  memset(&a, 0, sizeof(a));
  a.handle = V1;
  a.parent = TLC_NO_HANDLE;
  a.state_handle = S5;
  assert_int_equal(tlc_mapping_add(&m, &a), 0);
  tlc_mapping_finish(&m);
  tlc_engine_opts_default(&o);
  o.mapping = &m;
  e = mk(TLC_FMT_BIN11, &o);
  tlc_table_init(&t);
  evc(e, V1, W_, 0, 7, 0);
  evc(e, V1, W_, 20, 8, 0);
  evc(e, V1, W_, 50, 8, 0);
  snap(e, &t);
  r = row(&t, V1, TLC_CTX_NONE, 0);
  assert_int_equal(r->count, 3);
  dist_is(&r->dist[TLC_PERIOD], 2, 50, 20, 30);
  r = row(&t, S5, TLC_CTX_NONE, 7);
  assert_int_equal(r->count, 1);
  dist_is(&r->dist[TLC_NET], 1, 20, 20, 20);
  r = row(&t, S5, TLC_CTX_NONE, 8);
  assert_int_equal(r->count, 1);
  assert_int_equal(r->total[TLC_NET], 30);
  assert_int_equal(r->dist[TLC_NET].n, 0);
  tlc_table_fini(&t);
  tlc_engine_free(e);
  tlc_mapping_fini(&m);
}

/* Several cores and Neutral:
 * core 0: E f@0 X f@10 E f@30 X f@35;  core 1: E f@5 X f@25.  T = 35.
 * Contexts in order of first use: core0 = 0, core1 = 1.
 * core0 f: COUNT 2, NET {10, 5}, PERIOD {30}, OUTSIDE 10..30 = sample 20, then 35..35: total 20.
 * core1 f: COUNT 1, NET {20}, OUTSIDE 25..T=35: total 10, no sample.
 * Neutral f: COUNT 3, NET total 35, NET samples union {10, 5, 20}: min 5 max 20 AVG 11;
 * OUTSIDE total = 20 + 10 = 30; PERIOD and OUTSIDE samples: the union of each context's own
 * (SPEC 2): PERIOD {30}, OUTSIDE {20}, never a period
 * or stretch of a merged timeline (which would give PERIOD {5, 25} and no OUTSIDE stretch). */
static void test_cores_and_neutral(void **state) {
  tlc_engine_t *e = mk(TLC_FMT_BIN11, NULL);
  tlc_table_t t;
  const tlc_stat_t *r;
  (void)state;
  tlc_table_init(&t);
  evc(e, F, E_, 0, 0, 0);
  evc(e, F, E_, 5, 0, 1);
  evc(e, F, X_, 10, 0, 0);
  evc(e, F, X_, 25, 0, 1);
  evc(e, F, E_, 30, 0, 0);
  evc(e, F, X_, 35, 0, 0);
  snap(e, &t);
  assert_int_equal(t.ncontexts, 2);
  assert_int_equal(t.contexts[0].kind, TLC_CTXK_CORE);
  assert_int_equal(t.contexts[0].core, 0);
  assert_int_equal(t.contexts[1].core, 1);
  r = row(&t, F, 0, 0);
  assert_int_equal(r->count, 2);
  dist_is(&r->dist[TLC_NET], 2, 15, 5, 10);
  dist_is(&r->dist[TLC_PERIOD], 1, 30, 30, 30);
  assert_int_equal(r->total[TLC_OUTSIDE], 20);
  r = row(&t, F, 1, 0);
  assert_int_equal(r->total[TLC_OUTSIDE], 10);
  r = row(&t, F, TLC_CTX_NEUTRAL, 0);
  assert_int_equal(r->count, 3);
  assert_int_equal(r->total[TLC_NET], 35);
  dist_is(&r->dist[TLC_NET], 3, 35, 5, 20);
  assert_int_equal(tlc_dist_avg(&r->dist[TLC_NET]), 11);
  assert_int_equal(r->total[TLC_OUTSIDE], 30);
  dist_is(&r->dist[TLC_PERIOD], 1, 30, 30, 30);
  dist_is(&r->dist[TLC_OUTSIDE], 1, 20, 20, 20);
  assert_true(r->dist[TLC_PERIOD].has_q && r->dist[TLC_OUTSIDE].has_q);
  assert_int_equal(r->dist[TLC_PERIOD].q[0], 30);
  assert_int_equal(r->dist[TLC_OUTSIDE].q[3], 20);
  /* median of {5, 10, 20} = 2nd = 10 */
  assert_int_equal(r->dist[TLC_NET].q[0], 10);
  tlc_table_fini(&t);
  tlc_engine_free(e);
}

/* A histogram bucket whose count passes 65535 (the engine counts queued samples through
 * pointers to 16-bit counts, and a count at 65535 takes the widening path): 70,000 calls with
 * NET 10 ns, then 69,999 with NET 200 ns (both values below 256, so their buckets are exact).
 * n = 139,999; nearest rank p50 = ceil(0.5 * 139,999) = 70,000th smallest = 10: it is 200 if
 * the bucket of 10 lost a single sample. p90 = ceil(0.9 * 139,999) = 126,000th = 200. A
 * snapshot is taken every 10,007 calls, so counting happens at many points of the run. */
static void test_hist_count_past_65535(void **state) {
  tlc_engine_t *e = mk(TLC_FMT_BIN11, NULL);
  tlc_table_t t;
  const tlc_stat_t *r;
  int64_t tm = 0;
  long i;
  (void)state;
  tlc_table_init(&t);
  for (i = 0; i < 139999; i++) {
    ev(e, F, E_, tm);
    tm += i < 70000 ? 10 : 200;
    ev(e, F, X_, tm);
    tm += 100;
    if (i % 10007 == 0)
      snap(e, &t);
  }
  snap(e, &t);
  r = row(&t, F, 0, 0);
  dist_is(&r->dist[TLC_NET], 139999, 70000 * 10 + 69999 * 200, 10, 200);
  assert_true(r->dist[TLC_NET].has_q);
  assert_int_equal(r->dist[TLC_NET].q[0], 10);
  assert_int_equal(r->dist[TLC_NET].q[1], 200);
  assert_int_equal(r->dist[TLC_CALL].q[0], 10);
  assert_int_equal(r->dist[TLC_CALL].q[1], 200);
  tlc_table_fini(&t);
  tlc_engine_free(e);
}

/* Sums of squares past 2^64 (128-bit: hi * 2^64 + lo), through a carry and through one square,
 * with the default windows (every event here lies in a step of its own, so every sample is
 * folded into the windows' cumulative part before the snapshot merges it back).
 * f: E@0 X@3e9, E@4e9 X@7e9, E@8e9 X@11e9: NET = CALL samples 3e9 x 3, squares 9e18 each (each
 *   below 2^64 = 18446744073709551616), sum 2.7e19: hi 1, lo 2.7e19 - 2^64 =
 *   8553255926290448384. PERIOD samples 4e9, 4e9: squares 1.6e19, sum 3.2e19: hi 1, lo
 *   13553255926290448384.
 * g: E@12e9 X@17e9: one sample 5e9, square 2.5e19: hi 1, lo 6553255926290448384. */
static void test_sumsq_past_2_64(void **state) {
  tlc_engine_t *e = mk(TLC_FMT_BIN11, NULL);
  tlc_table_t t;
  const tlc_stat_t *r;
  unsigned k;
  (void)state;
  tlc_table_init(&t);
  ev(e, F, E_, 0);
  ev(e, F, X_, 3000000000);
  ev(e, F, E_, 4000000000);
  ev(e, F, X_, 7000000000);
  ev(e, F, E_, 8000000000);
  ev(e, F, X_, 11000000000);
  ev(e, G, E_, 12000000000);
  ev(e, G, X_, 17000000000);
  snap(e, &t);
  r = row(&t, F, 0, 0);
  for (k = TLC_NET; k <= TLC_CALL; k++) {
    dist_is(&r->dist[k], 3, 9000000000, 3000000000, 3000000000);
    assert_int_equal(r->dist[k].sumsq_hi, 1);
    assert_int_equal(r->dist[k].sumsq_lo, 8553255926290448384u);
  }
  dist_is(&r->dist[TLC_PERIOD], 2, 8000000000, 4000000000, 4000000000);
  assert_int_equal(r->dist[TLC_PERIOD].sumsq_hi, 1);
  assert_int_equal(r->dist[TLC_PERIOD].sumsq_lo, 13553255926290448384u);
  r = row(&t, G, 0, 0);
  dist_is(&r->dist[TLC_NET], 1, 5000000000, 5000000000, 5000000000);
  assert_int_equal(r->dist[TLC_NET].sumsq_hi, 1);
  assert_int_equal(r->dist[TLC_NET].sumsq_lo, 6553255926290448384u);
  tlc_table_fini(&t);
  tlc_engine_free(e);
}

/* bin10: the core is unknown (0xFF): one context "core?"; no Neutral with one context. */
static void test_bin10_unknown_core(void **state) {
  tlc_engine_t *e = mk(TLC_FMT_BIN10, NULL);
  tlc_table_t t;
  char name[32];
  (void)state;
  tlc_table_init(&t);
  evc(e, F, E_, 0, 0, TLC_CORE_UNKNOWN);
  evc(e, F, X_, 10, 0, TLC_CORE_UNKNOWN);
  snap(e, &t);
  assert_int_equal(t.ncontexts, 1);
  assert_int_equal(t.contexts[0].core, TLC_CORE_UNKNOWN);
  assert_string_equal(tlc_ctx_name(&t, 0, name, sizeof(name)), "core?");
  assert_int_equal(t.nrows, 1);
  tlc_table_fini(&t);
  tlc_engine_free(e);
}

/* context_area = S (RTOS task state). Core 0:
 * W S=1 @0 (task 1 in), E f@10 (task 1), W S=2 @20 (task 1 out, task 2 in), E g@25 (task 2),
 * X g@35, W S=1 @40 (task 1 back in), X f@60.
 * f in task 1: CALL = 60 - 10 = 50; GROSS = CALL less switched-out 20..40 = 30; NET = running
 *   and switched in: 10..20 and 40..60 = 30.
 * g in task 2: CALL = GROSS = NET = 10.
 * Table contexts (in order of their first code row): task1 = 0, task2 = 1 (the core's "no task
 * yet" context ran no code, so it is not listed). State rows of S: value 1 COUNT 2, value 2
 * COUNT 1. */
static void test_rtos_context_area(void **state) {
  tlc_engine_opts_t o;
  tlc_engine_t *e;
  tlc_table_t t;
  const tlc_stat_t *r;
  char name[32];
  (void)state;
  tlc_engine_opts_default(&o);
  o.has_context_area = 1;
  o.context_area = S;
  e = mk(TLC_FMT_BIN11, &o);
  tlc_table_init(&t);
  evc(e, S, W_, 0, 1, 0);
  evc(e, F, E_, 10, 0, 0);
  evc(e, S, W_, 20, 2, 0);
  evc(e, G, E_, 25, 0, 0);
  evc(e, G, X_, 35, 0, 0);
  evc(e, S, W_, 40, 1, 0);
  evc(e, F, X_, 60, 0, 0);
  snap(e, &t);
  assert_int_equal(t.ncontexts, 2);
  assert_int_equal(t.contexts[0].kind, TLC_CTXK_TASK);
  assert_int_equal(t.contexts[0].key, 1);
  assert_int_equal(t.contexts[1].key, 2);
  assert_string_equal(tlc_ctx_name(&t, 1, name, sizeof(name)), "task2");
  r = row(&t, F, 0, 0);
  dist_is(&r->dist[TLC_CALL], 1, 50, 50, 50);
  dist_is(&r->dist[TLC_GROSS], 1, 30, 30, 30);
  dist_is(&r->dist[TLC_NET], 1, 30, 30, 30);
  r = row(&t, G, 1, 0);
  dist_is(&r->dist[TLC_CALL], 1, 10, 10, 10);
  dist_is(&r->dist[TLC_GROSS], 1, 10, 10, 10);
  dist_is(&r->dist[TLC_NET], 1, 10, 10, 10);
  assert_int_equal(row(&t, S, TLC_CTX_NONE, 1)->count, 2);
  assert_int_equal(row(&t, S, TLC_CTX_NONE, 2)->count, 1);
  /* Neutral exists (two contexts) */
  assert_int_equal(row(&t, F, TLC_CTX_NEUTRAL, 0)->count, 1);
  tlc_table_fini(&t);
  tlc_engine_free(e);
}

/* context_area: an open activation while switched out. Core 0: W S=1 @0, E f@10, W S=2 @30,
 * W V @100 (T = 100). f (task 1, open, switched out since 30): CALL so far 90; GROSS and NET
 * so far 30 - 10 = 20. X on the context area changes no context: X S @110 then E g@120 runs in
 * task 2. */
static void test_rtos_open_switched_out(void **state) {
  tlc_engine_opts_t o;
  tlc_engine_t *e;
  tlc_table_t t;
  const tlc_stat_t *r;
  (void)state;
  tlc_engine_opts_default(&o);
  o.has_context_area = 1;
  o.context_area = S;
  e = mk(TLC_FMT_BIN11, &o);
  tlc_table_init(&t);
  evc(e, S, W_, 0, 1, 0);
  evc(e, F, E_, 10, 0, 0);
  evc(e, S, W_, 30, 2, 0);
  evc(e, V, W_, 100, 0, 0);
  snap(e, &t);
  r = row(&t, F, 0, 0);
  assert_int_equal(r->total[TLC_CALL], 90);
  assert_int_equal(r->total[TLC_GROSS], 20);
  assert_int_equal(r->total[TLC_NET], 20);
  evc(e, S, X_, 110, 0, 0);
  evc(e, G, E_, 120, 0, 0);
  snap(e, &t);
  assert_int_equal(t.ncontexts, 2);
  assert_int_equal(t.contexts[1].key, 2);
  assert_non_null(tlc_table_find(&t, G, 1, 0));
  tlc_table_fini(&t);
  tlc_engine_free(e);
}

/* Gap: E f@0 E g@10 W V@20, gap, E f@100 (GAP flag, same as tlc_engine_gap) X f@150.
 * At the gap (T = 20) g and f are closed as truncated without anomaly: g NET = CALL = 10,
 * f NET = CALL = 20, totals only. After it, E f@100 gives no PERIOD sample (it would span the
 * gap) and no OUTSIDE sample (no stretch is open across a gap). X f@150: NET sample 50.
 * f: COUNT 2, NET total 70, NET samples {50}, PERIOD none, OUTSIDE 150..T=150: 0.
 * g: closed by the gap, so not outside afterwards: OUTSIDE total 0. gaps = 1, anomalies 0. */
static void test_gap(void **state) {
  tlc_engine_t *e = mk(TLC_FMT_BIN11, NULL);
  tlc_table_t t;
  const tlc_stat_t *r;
  tlc_event_t x;
  (void)state;
  tlc_table_init(&t);
  ev(e, F, E_, 0);
  ev(e, G, E_, 10);
  evc(e, V, W_, 20, 1, 0);
  memset(&x, 0, sizeof(x));
  x.handle = F;
  x.type = E_;
  x.time_ns = 100;
  x.flags = TLC_EVF_GAP;
  tlc_engine_push(e, &x, 1);
  ev(e, F, X_, 150);
  snap(e, &t);
  assert_int_equal(t.counters.gaps, 1);
  assert_int_equal(t.counters.anomalies, 0);
  r = row(&t, F, 0, 0);
  assert_int_equal(r->count, 2);
  assert_int_equal(r->total[TLC_NET], 70);
  dist_is(&r->dist[TLC_NET], 1, 50, 50, 50);
  assert_int_equal(r->dist[TLC_PERIOD].n, 0);
  assert_int_equal(r->dist[TLC_OUTSIDE].n, 0);
  assert_int_equal(r->total[TLC_OUTSIDE], 0);
  r = row(&t, G, 0, 0);
  assert_int_equal(r->total[TLC_NET], 10);
  assert_int_equal(r->total[TLC_OUTSIDE], 0);
  assert_int_equal(r->anomalies, 0);
  /* the data area's PERIOD does not span the gap either */
  evc(e, V, W_, 200, 2, 0);
  snap(e, &t);
  assert_int_equal(row(&t, V, TLC_CTX_NONE, 0)->dist[TLC_PERIOD].n, 0);
  tlc_table_fini(&t);
  tlc_engine_free(e);
}

/* Windows: one window of 100 ns (10 steps of 10 ns).
 * E f@5 X f@15 E f@50 X f@58, then W V@145: T = 145, floor(145/10) = 14, so the window holds
 * times t with floor(t/10) > 4, i.e. t >= 50: E@50 (count 1), the NET/CALL sample closed at 58
 * (8), the PERIOD sample at 50 (45) and the OUTSIDE sample at 50 (15..50 = 35); not E@5 nor the
 * sample closed at 15. Cumulative: COUNT 2. At T = 160 (floor 16: t >= 70) nothing is left. */
static void test_windows(void **state) {
  tlc_engine_opts_t o;
  tlc_engine_t *e;
  tlc_table_t t;
  const tlc_stat_t *r;
  (void)state;
  tlc_engine_opts_default(&o);
  o.nwindows = 1;
  o.window_ns[0] = 100;
  e = mk(TLC_FMT_BIN11, &o);
  tlc_table_init(&t);
  ev(e, F, E_, 5);
  ev(e, F, X_, 15);
  ev(e, F, E_, 50);
  ev(e, F, X_, 58);
  evc(e, V, W_, 145, 0, 0);
  snap(e, &t);
  assert_int_equal(t.nwindows, 1);
  assert_int_equal(t.window_ns[0], 100);
  r = row(&t, F, 0, 0);
  assert_int_equal(r->count, 2);
  assert_int_equal(r->nwin, 1);
  assert_int_equal(r->win[0].count, 1);
  assert_int_equal(r->win[0].k[TLC_NET].n, 1);
  assert_int_equal(r->win[0].k[TLC_NET].sum, 8);
  assert_int_equal(r->win[0].k[TLC_CALL].max, 8);
  assert_int_equal(r->win[0].k[TLC_PERIOD].sum, 45);
  assert_int_equal(r->win[0].k[TLC_OUTSIDE].sum, 35);
  evc(e, V, W_, 160, 0, 0);
  snap(e, &t);
  r = row(&t, F, 0, 0);
  assert_int_equal(r->win[0].count, 0);
  assert_int_equal(r->win[0].k[TLC_NET].n, 0);
  assert_int_equal(r->count, 2);
  tlc_table_fini(&t);
  tlc_engine_free(e);
}

/* Window memory (tlc_engine_mem) follows use, not the number of steps. Default windows (1 s,
 * 10 s, 60 s: 10 steps each). One variable written every 10 ms for 200 s of event time: every
 * window has slid past its 10 steps many times by 100 s, so its window memory stops growing
 * there (steps that left their window are reused). Then 1,000 other variables are written once
 * each: a row with samples in one step of each window costs well under a fifth of the row that
 * fills every step (one bucket per window against ten). The windows still hold the right data
 * (SPEC: floor(t / step) > floor(T / step) - 10, T = 200 s + 999 ns): 1 s window, steps of
 * 100 ms, floor(T / step) = 2000, t in [199.1 s, 200.1 s): writes 199.10 s .. 200.00 s = 91;
 * 10 s window, floor = 200, t in [191 s, 201 s): 191.00 .. 200.00 = 901; 60 s window, steps of
 * 6 s, floor = 33, t in [144 s, 204 s): 144.00 .. 200.00 = 5601. */
static void test_window_memory(void **state) {
  tlc_engine_opts_t o;
  tlc_engine_mem_t m100, m200, m;
  tlc_engine_t *e;
  tlc_table_t t;
  int64_t ms;
  uint32_t i;
  (void)state;
  tlc_engine_opts_default(&o);
  o.histograms = 0;
  e = mk(TLC_FMT_BIN11, &o);
  for (ms = 10; ms <= 200000; ms += 10) {
    evc(e, V, W_, ms * 1000000, (uint64_t)ms, 0);
    if (ms == 100000)
      tlc_engine_mem(e, &m100);
  }
  tlc_engine_mem(e, &m200);
  assert_true(m100.window_bytes > 0);
  assert_int_equal(m200.window_bytes, m100.window_bytes);
  for (i = 0; i < 1000; i++)
    evc(e, V + 0x100 + i, W_, 200000000000 + i, 1, 0);
  tlc_engine_mem(e, &m);
  assert_true((m.window_bytes - m200.window_bytes) / 1000 * 5 < m200.window_bytes);
  tlc_table_init(&t);
  snap(e, &t);
  assert_int_equal(row(&t, V, TLC_CTX_NONE, 0)->win[0].count, 91);
  assert_int_equal(row(&t, V, TLC_CTX_NONE, 0)->win[1].count, 901);
  assert_int_equal(row(&t, V, TLC_CTX_NONE, 0)->win[2].count, 5601);
  assert_int_equal(row(&t, V + 0x100, TLC_CTX_NONE, 0)->win[2].count, 1);
  tlc_table_fini(&t);
  tlc_engine_free(e);
}

/* evlog: the context is the thread. Thread 7: +f @0 -f @10; thread 9: +f @5 -f @30.
 * Two THREAD contexts (keys 7, 9), named thread7 / thread9; Neutral f COUNT 2, NET 10 + 25 = 35. */
static void test_evlog_threads(void **state) {
  tlc_engine_t *e = mk(TLC_FMT_EVLOG, NULL);
  tlc_table_t t;
  tlc_event_t x[4];
  char name[32];
  unsigned i;
  static const struct {
    unsigned type;
    int64_t t;
    uint64_t thr;
  } in[4] = { { E_, 0, 7 }, { E_, 5, 9 }, { X_, 10, 7 }, { X_, 30, 9 } };
  (void)state;
  tlc_table_init(&t);
  memset(x, 0, sizeof(x));
  for (i = 0; i < 4; i++) {
    x[i].handle = F;
    x[i].type = (uint8_t)in[i].type;
    x[i].time_ns = in[i].t;
    x[i].thread = in[i].thr;
    x[i].core = TLC_CORE_UNKNOWN;
  }
  tlc_engine_push(e, x, 4);
  snap(e, &t);
  assert_int_equal(t.ncontexts, 2);
  assert_int_equal(t.contexts[0].kind, TLC_CTXK_THREAD);
  assert_string_equal(tlc_ctx_name(&t, 1, name, sizeof(name)), "thread9");
  assert_int_equal(row(&t, F, TLC_CTX_NEUTRAL, 0)->count, 2);
  assert_int_equal(row(&t, F, TLC_CTX_NEUTRAL, 0)->total[TLC_NET], 35);
  tlc_table_fini(&t);
  tlc_engine_free(e);
}

/* Metadata and invalid events: TLC_EV_NONE is ignored (not counted); type 7 and handle nibble 6
 * count one anomaly each and nothing else. */
static void test_ignored_and_invalid(void **state) {
  tlc_engine_t *e = mk(TLC_FMT_BIN11, NULL);
  tlc_table_t t;
  (void)state;
  tlc_table_init(&t);
  ev(e, F, TLC_EV_NONE, 10);
  ev(e, F, 7, 20);
  ev(e, 0x60000000u, E_, 30);
  snap(e, &t);
  assert_int_equal(t.counters.events, 2);
  assert_int_equal(t.counters.anomalies, 2);
  assert_int_equal(t.nrows, 0);
  tlc_table_fini(&t);
  tlc_engine_free(e);
}

/* Caps: max_areas 2 -> the third area's events are dropped (dropped_area_limit), the first two
 * keep their statistics. max_depth 2 -> a third nested E is dropped. max_contexts 1 -> the
 * second evlog thread's events are dropped. */
static void test_caps(void **state) {
  tlc_engine_opts_t o;
  tlc_engine_t *e;
  tlc_table_t t;
  tlc_event_t x;
  (void)state;
  tlc_table_init(&t);
  tlc_engine_opts_default(&o);
  o.max_areas = 2;
  e = mk(TLC_FMT_BIN11, &o);
  ev(e, F, E_, 0);
  ev(e, G, E_, 1);
  ev(e, H, E_, 2);
  ev(e, H, X_, 3);
  snap(e, &t);
  assert_int_equal(t.counters.dropped_area_limit, 2);
  assert_int_equal(t.nrows, 2);
  tlc_engine_free(e);

  tlc_engine_opts_default(&o);
  o.max_depth = 2;
  e = mk(TLC_FMT_BIN11, &o);
  ev(e, F, E_, 0);
  ev(e, F, E_, 1);
  ev(e, F, E_, 2);
  snap(e, &t);
  assert_int_equal(t.counters.dropped_area_limit, 1);
  assert_int_equal(row(&t, F, 0, 0)->count, 2);
  tlc_engine_free(e);

  tlc_engine_opts_default(&o);
  o.max_contexts = 1;
  e = mk(TLC_FMT_EVLOG, &o);
  memset(&x, 0, sizeof(x));
  x.handle = F;
  x.type = E_;
  x.thread = 1;
  tlc_engine_push(e, &x, 1);
  x.thread = 2;
  tlc_engine_push(e, &x, 1);
  snap(e, &t);
  assert_int_equal(t.counters.dropped_area_limit, 1);
  assert_int_equal(t.ncontexts, 1);
  tlc_engine_free(e);
  tlc_table_fini(&t);
}

/* Delta snapshots: rows changed after since_seq only (and rows whose open parts grew). */
static void test_delta_snapshot(void **state) {
  tlc_engine_t *e = mk(TLC_FMT_BIN11, NULL);
  tlc_table_t t;
  tlc_snap_opts_t so = { 0, 0, 1, 0, 0, 0 };
  uint64_t seq;
  (void)state;
  tlc_table_init(&t);
  ev(e, F, E_, 0);
  ev(e, F, X_, 10);
  evc(e, V, W_, 10, 1, 0);
  seq = tlc_engine_seq(e);
  evc(e, V, W_, 10, 2, 0); /* T does not grow: f (outside, open part) is unchanged */
  so.since_seq = seq;
  assert_int_equal(tlc_engine_snapshot(e, &t, &so), 0);
  assert_int_equal(t.nrows, 1);
  assert_int_equal(t.rows[0].handle, V);
  assert_true(t.seq > seq);
  ev(e, G, E_, 20); /* T grows: f's outside total changes too */
  so.since_seq = t.seq;
  assert_int_equal(tlc_engine_snapshot(e, &t, &so), 0);
  assert_int_equal(t.nrows, 2);
  tlc_table_fini(&t);
  tlc_engine_free(e);
}

/* Options are checked; allocation failures never crash and leak nothing. */
static void test_opts_and_alloc_failures(void **state) {
  tlc_engine_opts_t o;
  tlc_engine_t *e = NULL;
  uint64_t n;
  (void)state;
  tlc_engine_opts_default(&o);
  assert_int_equal(o.nwindows, 3);
  assert_int_equal(o.window_ns[2], 60000000000);
  assert_int_equal(o.max_areas, 1000000);
  assert_int_equal(tlc_engine_new(&e, TLC_FMT_NONE, &o), TLC_EINVAL);
  o.window_ns[0] = 5;
  assert_int_equal(tlc_engine_new(&e, TLC_FMT_BIN11, &o), TLC_EINVAL);
  o.window_ns[0] = 1000;
  o.nwindows = TLC_MAX_WINDOWS + 1;
  assert_int_equal(tlc_engine_new(&e, TLC_FMT_BIN11, &o), TLC_EINVAL);
  testalloc_install();
  for (n = 1; n < 200; n++) {
    tlc_table_t t;
    int i;
    testalloc_fail_at(n);
    if (tlc_engine_new(&e, TLC_FMT_BIN11, NULL) < 0)
      continue;
    for (i = 0; i < 40; i++) {
      evc(e, (uint32_t)(i % 7), (unsigned)(i % 2 == 0 ? E_ : X_), i * 10, 0, (unsigned)(i % 3));
      evc(e, S, W_, i * 10, (uint64_t)(i % 4), 0);
    }
    tlc_table_init(&t);
    (void)tlc_engine_snapshot(e, &t, NULL);
    tlc_table_fini(&t);
    tlc_engine_free(e);
    assert_int_equal(testalloc_live_bytes(), 0);
  }
  testalloc_fail_at(0);
  testalloc_uninstall();
}

/* Steady state: once every area, stack level, histogram range and window buffer exists, pushing
 * more of the same workload allocates nothing (the same call pattern repeated later in time). */
static void test_no_alloc_in_steady_state(void **state) {
  tlc_engine_t *e;
  uint64_t before = 0;
  int round, i;
  (void)state;
  testalloc_install();
  e = mk(TLC_FMT_BIN11, NULL);
  for (round = 0; round < 90; round++) {
    int64_t t0 = (int64_t)round * 100000;
    /* histogram samples are queued and counted in batches: count the queue, so that every
     * histogram has met its value range by round 30 */
    if (round == 30) {
      tlc_engine_sync(e);
      before = testalloc_count();
    }
    for (i = 0; i < 20; i++) {
      uint32_t h = (uint32_t)i;
      int64_t t = t0 + i * 1000;
      ev(e, F, S_, t);
      ev(e, h + 1, E_, t + 10);
      ev(e, L, E_, t + 20);
      ev(e, L, X_, t + 30 + i);
      ev(e, h + 1, X_, t + 100 + i);
      ev(e, F, R_, t + 110);
      evc(e, S, W_, t + 120, (uint64_t)(i % 3), 0);
      evc(e, V, W_, t + 130, (uint64_t)i, 0);
    }
  }
  tlc_engine_sync(e);
  assert_int_equal(testalloc_count(), before);
  tlc_engine_free(e);
  assert_int_equal(testalloc_live_bytes(), 0);
  testalloc_uninstall();
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_seed_timeline),
    cmocka_unit_test(test_simple_calls),
    cmocka_unit_test(test_nested_suspend_resume),
    cmocka_unit_test(test_recursion),
    cmocka_unit_test(test_suspend_not_innermost),
    cmocka_unit_test(test_truncation),
    cmocka_unit_test(test_partial_and_stray_exit),
    cmocka_unit_test(test_negative_duration),
    cmocka_unit_test(test_timer_wrap),
    cmocka_unit_test(test_data_area),
    cmocka_unit_test(test_state_area),
    cmocka_unit_test(test_mapping_links_state),
    cmocka_unit_test(test_cores_and_neutral),
    cmocka_unit_test(test_bin10_unknown_core),
    cmocka_unit_test(test_rtos_context_area),
    cmocka_unit_test(test_rtos_open_switched_out),
    cmocka_unit_test(test_gap),
    cmocka_unit_test(test_windows),
    cmocka_unit_test(test_window_memory),
    cmocka_unit_test(test_evlog_threads),
    cmocka_unit_test(test_ignored_and_invalid),
    cmocka_unit_test(test_caps),
    cmocka_unit_test(test_hist_count_past_65535),
    cmocka_unit_test(test_sumsq_past_2_64),
    cmocka_unit_test(test_delta_snapshot),
    cmocka_unit_test(test_opts_and_alloc_failures),
    cmocka_unit_test(test_no_alloc_in_steady_state),
    cmocka_unit_test(test_clock_restart),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
