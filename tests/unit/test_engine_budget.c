/* test_engine_budget.c - the engine's memory accounting hook and its statistics in parts.
 *
 *  - accounting: on a random workload (code areas on 4 cores with nesting, data and state
 *    areas, windows and histograms), what the hook was charged minus what it was given back
 *    equals tlc_engine_mem().bytes after every batch and every snapshot, and everything comes
 *    back at tlc_engine_free;
 *  - refusal: once the hook refuses new areas, events of new areas are dropped and counted in
 *    dropped_area_limit, and the areas that existed keep their statistics exactly as an engine
 *    without a limit fed only their events has them;
 *  - parts: the union of tlc_engine_snapshot_part over the bounds of tlc_engine_handle_split
 *    is the whole snapshot, row for row (Neutral rows included), and no part has more rows
 *    than asked (before Neutral rows) unless it is a single area;
 *  - order index: snapshots without Neutral rows, filled in table order from the engine's row
 *    order index and their parts found by binary search in it, are byte for byte those taken
 *    without it (rows sorted after the copy, parts and splits by scanning every row;
 *    tlc__engine_set_ord_off), whole, as deltas and in parts, while rows and contexts are
 *    added, with state rows (a mapping), windows and quantiles on and off.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "base/alloc.h"
#include "base/err.h"
#include "engine/engine-int.h"
#include "engine/engine.h"
#include "formats/mapping.h"
#include "formats/stats.h"
#include "testalloc.h"

#include <stdlib.h>
#include <string.h>

typedef struct acct {
  size_t charged, released;
  int refuse_areas; /* refuse TLC_ACCT_AREA charges */
  size_t refused;
} acct_t;

static int charge_cb(void *ud, size_t bytes, int kind) {
  acct_t *a = ud;
  if (a->refuse_areas && kind == TLC_ACCT_AREA && bytes > 0) {
    a->refused++;
    return TLC_ELIMIT;
  }
  a->charged += bytes;
  return 0;
}

static void release_cb(void *ud, size_t bytes) {
  ((acct_t *)ud)->released += bytes;
}

static tlc_engine_t *mk(acct_t *a) {
  tlc_engine_opts_t o;
  tlc_engine_t *e;
  tlc_engine_opts_default(&o);
  if (a != NULL) {
    o.acct.charge_cb = charge_cb;
    o.acct.release_cb = release_cb;
    o.acct.ud = a;
  }
  assert_int_equal(tlc_engine_new(&e, TLC_FMT_BIN11, &o), 0);
  return e;
}

static uint64_t rng = 88172645463325252ull;
static uint32_t rnd(uint32_t n) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return (uint32_t)(rng % n);
}

/* A batch of random events on `nareas` code areas (4 cores, nested E/X), data and state
 * areas, times rising from *t. */
static size_t workload(tlc_event_t *ev, size_t n, int64_t *t, uint32_t nareas) {
  size_t i;
  for (i = 0; i < n; i++) {
    tlc_event_t *x = &ev[i];
    uint32_t k = rnd(10);
    memset(x, 0, sizeof(*x));
    *t += 1 + rnd(50000);
    x->time_ns = *t;
    x->core = (uint8_t)rnd(4);
    if (k < 7) {
      x->handle = (rnd(2) ? 0x10000000u : 0) + rnd(nareas);
      x->type = (uint8_t)(rnd(2) ? TLC_EV_ENTRY : TLC_EV_EXIT);
    } else if (k < 9) {
      x->handle = 0x20000000u + rnd(nareas / 4 + 1);
      x->type = TLC_EV_WRITE;
      x->data = rnd(1000);
    } else {
      x->handle = 0x30000000u + rnd(16);
      x->type = TLC_EV_WRITE;
      x->data = rnd(8);
    }
  }
  return n;
}

static void test_accounting(void **state) {
  acct_t a;
  tlc_engine_t *e;
  tlc_engine_mem_t m;
  tlc_table_t t;
  tlc_event_t *ev = tlc_calloc(4096, sizeof(*ev));
  int64_t tm = 0;
  int round;
  (void)state;
  memset(&a, 0, sizeof(a));
  assert_non_null(ev);
  e = mk(&a);
  tlc_table_init(&t);
  for (round = 0; round < 200; round++) {
    tlc_engine_push(e, ev, workload(ev, 4096, &tm, 3000));
    tlc_engine_mem(e, &m);
    assert_int_equal(a.charged - a.released, m.bytes);
    if (round % 20 == 0) {
      assert_int_equal(tlc_engine_snapshot(e, &t, NULL), 0);
      tlc_engine_mem(e, &m);
      assert_int_equal(a.charged - a.released, m.bytes);
    }
  }
  assert_true(m.areas > 3000);
  tlc_engine_free(e);
  assert_int_equal(a.charged, a.released); /* everything given back */
  tlc_table_fini(&t);
  tlc_free(ev);
}

static void same_row(const tlc_stat_t *x, const tlc_stat_t *y) {
  unsigned k;
  assert_int_equal(x->handle, y->handle);
  assert_int_equal(x->context, y->context);
  assert_int_equal(x->state, y->state);
  assert_int_equal(x->count, y->count);
  assert_int_equal(x->anomalies, y->anomalies);
  assert_int_equal(x->value, y->value);
  for (k = 0; k < TLC_NKINDS; k++) {
    assert_int_equal(x->total[k], y->total[k]);
    assert_int_equal(x->dist[k].n, y->dist[k].n);
    assert_int_equal(x->dist[k].sum, y->dist[k].sum);
    assert_int_equal(x->dist[k].min, y->dist[k].min);
    assert_int_equal(x->dist[k].max, y->dist[k].max);
    assert_int_equal(x->dist[k].sumsq_lo, y->dist[k].sumsq_lo);
    assert_int_equal(x->dist[k].q[0], y->dist[k].q[0]);
    assert_int_equal(x->dist[k].q[3], y->dist[k].q[3]);
  }
}

/* Past the limit: new areas dropped and counted; existing ones exactly as without a limit. */
static void test_refusal_keeps_existing(void **state) {
  acct_t a;
  tlc_engine_t *e, *ref;
  tlc_table_t t, tr;
  tlc_event_t *ev = tlc_calloc(2 * 20000 + 1, sizeof(*ev)), *kept;
  int64_t tm = 1000;
  size_t i, n = 0, nk = 0, dropped = 0;
  (void)state;
  memset(&a, 0, sizeof(a));
  assert_non_null(ev);
  kept = tlc_calloc(2 * 20000 + 1, sizeof(*kept));
  assert_non_null(kept);
  e = mk(&a);
  ref = mk(NULL);
  /* 200 areas while charges are granted, then 20,000 new ones refused, interleaved with more
   * calls of the first 200 */
  for (i = 0; i < 200; i++) {
    tlc_event_t x;
    memset(&x, 0, sizeof(x));
    x.handle = (uint32_t)i;
    x.type = TLC_EV_ENTRY;
    x.time_ns = tm;
    tlc_engine_push(e, &x, 1);
    tlc_engine_push(ref, &x, 1);
    x.type = TLC_EV_EXIT;
    x.time_ns = tm + 7 + (int64_t)i;
    tlc_engine_push(e, &x, 1);
    tlc_engine_push(ref, &x, 1);
    tm += 1000;
  }
  a.refuse_areas = 1;
  for (i = 0; i < 20000; i++) {
    uint32_t h = (i % 3 == 0) ? (uint32_t)(i % 200) : 0x00100000u + (uint32_t)i;
    tlc_event_t *x = &ev[n++], *y = &ev[n++];
    memset(x, 0, sizeof(*x));
    x->handle = h;
    x->type = TLC_EV_ENTRY;
    x->time_ns = tm;
    *y = *x;
    y->type = TLC_EV_EXIT;
    y->time_ns = tm + 3 + (int64_t)(i % 97);
    tm += 1000;
    if (h < 200) {
      kept[nk++] = *x;
      kept[nk++] = *y;
    } else {
      dropped += 2;
    }
  }
  /* the last event on a kept area: both engines end at the same time T (totals of open parts
   * and OUTSIDE stretches run up to T) */
  memset(&ev[n], 0, sizeof(ev[n]));
  ev[n].handle = 5;
  ev[n].type = TLC_EV_ENTRY;
  ev[n].time_ns = tm;
  kept[nk++] = ev[n++];
  tlc_engine_push(e, ev, n);
  tlc_engine_push(ref, kept, nk);
  assert_true(a.refused > 0);
  assert_int_equal(tlc_engine_counters(ref)->dropped_area_limit, 0);
  tlc_table_init(&t);
  tlc_table_init(&tr);
  assert_int_equal(tlc_engine_snapshot(e, &t, NULL), 0);
  assert_int_equal(tlc_engine_snapshot(ref, &tr, NULL), 0);
  assert_int_equal(tr.nrows, 200);
  /* new areas are taken while the capacity already charged lasts (rows and hash slots the
   * arrays were doubled to), then refused: each refused area's E and X counted */
  assert_true(t.nrows >= 200 && t.nrows - 200 < dropped / 2);
  assert_int_equal(tlc_engine_counters(e)->dropped_area_limit, dropped - 2 * (t.nrows - 200));
  for (i = 0; i < 200; i++) /* the areas that existed: their handles sort first */
    same_row(&t.rows[i], &tr.rows[i]);
  tlc_table_fini(&t);
  tlc_table_fini(&tr);
  tlc_engine_free(e);
  tlc_engine_free(ref);
  assert_int_equal(a.charged, a.released);
  tlc_free(ev);
  tlc_free(kept);
}

/* The parts of tlc_engine_handle_split put together are the whole snapshot. */
static void test_parts(void **state) {
  tlc_engine_t *e = mk(NULL);
  tlc_table_t whole, part;
  tlc_event_t *ev = tlc_calloc(4096, sizeof(*ev));
  int64_t tm = 0;
  size_t i, at = 0, nparts = 0;
  uint64_t lo = 0, hi;
  tlc_snap_opts_t so = { 0, 1, 1, 1, 0, 0 };
  (void)state;
  assert_non_null(ev);
  for (i = 0; i < 50; i++)
    tlc_engine_push(e, ev, workload(ev, 4096, &tm, 2000));
  tlc_table_init(&whole);
  tlc_table_init(&part);
  assert_int_equal(tlc_engine_snapshot(e, &whole, &so), 0);
  assert_true(whole.nrows > 5000);
  do {
    size_t j, plain = 0;
    assert_int_equal(tlc_engine_handle_split(e, lo, 700, &hi), 0);
    assert_true(hi > lo);
    assert_int_equal(tlc_engine_snapshot_part(e, &part, &so, lo, hi), 0);
    assert_int_equal(part.ncontexts, whole.ncontexts);
    assert_int_equal(part.seq, whole.seq);
    for (j = 0; j < part.nrows; j++) {
      assert_true(at < whole.nrows);
      assert_true(part.rows[j].handle >= lo && part.rows[j].handle < hi);
      same_row(&part.rows[j], &whole.rows[at++]);
      plain += part.rows[j].context != TLC_CTX_NEUTRAL;
    }
    assert_true(plain <= 700 || hi == lo + 1);
    lo = hi;
    nparts++;
  } while (hi < ((uint64_t)1 << 32));
  assert_int_equal(at, whole.nrows);
  assert_true(nparts >= whole.nrows / 1000);
  tlc_table_fini(&whole);
  tlc_table_fini(&part);
  tlc_engine_free(e);
  tlc_free(ev);
}

static void same_table(const tlc_table_t *a, const tlc_table_t *b) {
  size_t i;
  assert_int_equal(a->nrows, b->nrows);
  assert_int_equal(a->ncontexts, b->ncontexts);
  assert_int_equal(a->seq, b->seq);
  for (i = 0; i < a->nrows; i++) {
    same_row(&a->rows[i], &b->rows[i]);
    assert_memory_equal(&a->rows[i], &b->rows[i], sizeof(tlc_stat_t));
  }
}

/* One snapshot (part when lo < hi) taken both ways: by the order index, and without it. */
static void both_ways(tlc_engine_t *e, const tlc_snap_opts_t *so, uint64_t lo, uint64_t hi,
                      tlc_table_t *x, tlc_table_t *y) {
  tlc__engine_set_ord_off(e, 1);
  assert_int_equal(
      lo < hi ? tlc_engine_snapshot_part(e, x, so, lo, hi) : tlc_engine_snapshot(e, x, so), 0);
  tlc__engine_set_ord_off(e, 0);
  assert_int_equal(
      lo < hi ? tlc_engine_snapshot_part(e, y, so, lo, hi) : tlc_engine_snapshot(e, y, so), 0);
  same_table(x, y);
}

static void test_order_index(void **state) {
  tlc_engine_t *e = mk(NULL);
  tlc_table_t x, y;
  tlc_mapping_t map;
  tlc_map_area_t ma;
  tlc_event_t *ev = tlc_calloc(2048, sizeof(*ev));
  int64_t tm = 0;
  uint64_t prev = 0;
  uint32_t v;
  int round;
  size_t rows = 0, parts = 0;
  (void)state;
  assert_non_null(ev);
  tlc_mapping_init(&map);
  memset(&ma, 0, sizeof(ma));
  ma.parent = TLC_NO_HANDLE;
  for (v = 0; v < 4; v++) { /* writes of 4 of the workload's variables make state rows */
    ma.handle = 0x30000000u + v;
    ma.state_handle = 0x40000000u + v;
    assert_int_equal(tlc_mapping_add(&map, &ma), 0);
  }
  tlc_mapping_finish(&map);
  tlc_engine_set_mapping(e, &map);
  tlc_table_init(&x);
  tlc_table_init(&y);
  for (round = 0; round < 40; round++) {
    unsigned opt;
    /* rows and contexts keep being added: 300 areas at first, then up to 3,000 */
    tlc_engine_push(e, ev, workload(ev, round % 3 == 0 ? 2048 : 300, &tm, round < 10 ? 300 : 3000));
    for (opt = 0; opt < 4; opt++) {
      tlc_snap_opts_t so = { 0, 0, 0, 0, 0, 0 };
      uint64_t lo = 0, hi, hi2;
      so.windows = opt & 1;
      so.quantiles = (opt >> 1) & 1;
      so.since_seq = round % 2 ? prev : 0;
      both_ways(e, &so, 0, 0, &x, &y);
      rows += y.nrows;
      do { /* in parts, as the NATS publisher and subscribers take them */
        tlc__engine_set_ord_off(e, 1);
        assert_int_equal(tlc_engine_handle_split_since(e, lo, 250, so.since_seq, &hi), 0);
        tlc__engine_set_ord_off(e, 0);
        assert_int_equal(tlc_engine_handle_split_since(e, lo, 250, so.since_seq, &hi2), 0);
        assert_int_equal(hi, hi2);
        assert_true(hi > lo);
        both_ways(e, &so, lo, hi, &x, &y);
        parts++;
        lo = hi;
      } while (hi < ((uint64_t)1 << 32));
    }
    if (round % 2)
      prev = tlc_engine_seq(e);
  }
  assert_true(rows > 10000 && parts > 200);
  /* the state rows were there */
  tlc__engine_set_ord_off(e, 0);
  assert_int_equal(tlc_engine_snapshot(e, &y, NULL), 0);
  for (rows = 0, v = 0; v < y.nrows; v++)
    rows += y.rows[v].kind == TLC_ROW_STATE;
  assert_true(rows >= 8);
  tlc_table_fini(&x);
  tlc_table_fini(&y);
  tlc_engine_free(e);
  tlc_mapping_fini(&map);
  tlc_free(ev);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_accounting),
    cmocka_unit_test(test_refusal_keeps_existing),
    cmocka_unit_test(test_parts),
    cmocka_unit_test(test_order_index),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
