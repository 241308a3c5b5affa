/* test_engine_slog.c - the engine's sample log (engine.h: tlc_engine_set_slog).
 *
 *  - an engine with a tap that wants every sample and the log gets, from the log, exactly the
 *    tap's samples (kind < TLC_NKINDS): the same multiset of (handle, context, state, row kind,
 *    kind, value, end, epoch), each entry's row described by tlc_engine_row_desc once and kept
 *    until a TLC_SLOG_ROWS mark, the epoch taken from TLC_SLOG_EPOCH marks; over code areas on
 *    4 cores, data writes, a gap, a clock restart (epoch 1) and a clear (rows reused by other
 *    areas: a stale description would name the wrong area);
 *  - the log is empty after every push (everything the tap saw is delivered), and no call
 *    hands more than TLC_SLOG_BLOCK entries (a long push hands several full ones);
 *  - the log set mid-stream gets the samples from then on (rows created before included); set
 *    to NULL, no more calls.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "base/alloc.h"
#include "engine/engine.h"
#include "formats/stats.h"

#include <stdlib.h>
#include <string.h>

typedef struct smp {
  uint32_t handle, context;
  uint64_t state;
  uint8_t row_kind, kind;
  int64_t value, end;
  uint64_t epoch;
} smp_t;

typedef struct rec {
  smp_t *s;
  size_t n, cap;
} rec_t;

static void rec_add(rec_t *r, const smp_t *s) {
  if (r->n == r->cap) {
    r->cap = r->cap ? r->cap * 2 : 1024;
    r->s = realloc(r->s, r->cap * sizeof(*r->s));
    assert_non_null(r->s);
  }
  r->s[r->n++] = *s;
}

static void tap_fn(void *ud, const tlc_engine_sample_t *s) {
  smp_t x;
  if (s->kind >= TLC_NKINDS)
    return;
  memset(&x, 0, sizeof x);
  x.handle = s->handle;
  x.context = s->context;
  x.state = s->state;
  x.row_kind = s->row_kind;
  x.kind = s->kind;
  x.value = s->value;
  x.end = s->end;
  x.epoch = s->epoch;
  rec_add(ud, &x);
}

/* the log's consumer: descriptions cached by row index, as a real one keeps them */
typedef struct lg {
  rec_t got;
  smp_t *desc; /* kind 0xFF: not described */
  size_t ndesc;
  uint64_t epoch;
  size_t calls, full, marks_rows, marks_epoch;
} lg_t;

static void slog_fn(void *ud, const tlc_engine_t *e, const tlc_engine_slent_t *x, size_t n) {
  lg_t *l = ud;
  size_t i;
  assert_true(n > 0 && n <= TLC_SLOG_BLOCK);
  l->calls++;
  l->full += n == TLC_SLOG_BLOCK;
  for (i = 0; i < n; i++) {
    uint32_t row = x[i].rk / TLC_NKINDS;
    smp_t s;
    if (x[i].rk == TLC_SLOG_ROWS) {
      l->marks_rows++;
      for (size_t j = 0; j < l->ndesc; j++)
        l->desc[j].kind = 0xFF;
      continue;
    }
    if (x[i].rk == TLC_SLOG_EPOCH) {
      l->marks_epoch++;
      l->epoch = (uint64_t)x[i].value;
      continue;
    }
    assert_true(x[i].rk < TLC_SLOG_MARKS);
    if (row >= l->ndesc) {
      size_t nd = (row + 1) * 2;
      l->desc = realloc(l->desc, nd * sizeof(*l->desc));
      assert_non_null(l->desc);
      for (size_t j = l->ndesc; j < nd; j++)
        l->desc[j].kind = 0xFF;
      l->ndesc = nd;
    }
    if (l->desc[row].kind == 0xFF) {
      smp_t *d = &l->desc[row];
      assert_int_equal(
          tlc_engine_row_desc(e, row, &d->handle, &d->context, &d->row_kind, &d->state), 0);
      d->kind = 0;
    }
    s = l->desc[row];
    s.kind = (uint8_t)(x[i].rk % TLC_NKINDS);
    s.value = x[i].value;
    s.end = x[i].end;
    s.epoch = l->epoch;
    rec_add(&l->got, &s);
  }
}

static int smp_cmp(const void *pa, const void *pb) {
  const smp_t *a = pa, *b = pb;
#define C(f)                                                                                       \
  do {                                                                                             \
    if (a->f != b->f)                                                                              \
      return a->f < b->f ? -1 : 1;                                                                 \
  } while (0)
  C(epoch);
  C(end);
  C(handle);
  C(context);
  C(state);
  C(row_kind);
  C(kind);
  C(value);
#undef C
  return 0;
}

/* want[from, want->n) and got[gfrom, got->n) hold the same samples */
static void same(rec_t *want, size_t from, rec_t *got, size_t gfrom) {
  size_t n = want->n - from, i;
  assert_int_equal(got->n - gfrom, n);
  qsort(want->s + from, n, sizeof(smp_t), smp_cmp);
  qsort(got->s + gfrom, n, sizeof(smp_t), smp_cmp);
  for (i = 0; i < n; i++)
    assert_int_equal(smp_cmp(&want->s[from + i], &got->s[gfrom + i]), 0);
}

static uint64_t rng = 88172645463325252ull;
static uint32_t rnd(uint32_t n) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return (uint32_t)(rng % n);
}

/* code areas base.. on 4 cores (E/X), data writes, times rising from *t */
static void workload(tlc_event_t *ev, size_t n, int64_t *t, uint32_t base) {
  size_t i;
  for (i = 0; i < n; i++) {
    tlc_event_t *x = &ev[i];
    memset(x, 0, sizeof(*x));
    *t += 1 + rnd(50000);
    x->time_ns = *t;
    x->core = (uint8_t)rnd(4);
    if (rnd(10) < 8) {
      x->handle = 0x10000000u + base + rnd(40);
      x->type = (uint8_t)(rnd(2) ? TLC_EV_ENTRY : TLC_EV_EXIT);
    } else {
      x->handle = 0x20000000u + base + rnd(10);
      x->type = TLC_EV_WRITE;
      x->data = rnd(1000);
    }
  }
}

static tlc_engine_t *mk(rec_t *all) {
  tlc_engine_opts_t o;
  tlc_engine_t *e;
  tlc_engine_opts_default(&o);
  o.tap = tap_fn;
  o.tap_ud = all;
  assert_int_equal(tlc_engine_new(&e, TLC_FMT_BIN11, &o), 0);
  return e;
}

/* pushes ev and checks that the log delivered all the tap saw */
static void push(tlc_engine_t *e, const tlc_event_t *ev, size_t n, rec_t *all, lg_t *l) {
  tlc_engine_push(e, ev, n);
  assert_int_equal(l->got.n, all->n);
}

static void test_same_as_tap(void **state) {
  enum { N = 20000 };
  tlc_event_t *ev = tlc_calloc(N, sizeof(*ev));
  rec_t all = { 0 };
  lg_t l;
  tlc_engine_t *e = mk(&all);
  int64_t t = 1000000000000ll;
  (void)state;
  memset(&l, 0, sizeof l);
  assert_non_null(ev);
  assert_int_equal(tlc_engine_set_slog(e, slog_fn, &l), 0);
  workload(ev, N, &t, 0);
  push(e, ev, N / 2, &all, &l);
  tlc_engine_gap(e);
  push(e, ev + N / 2, N - N / 2, &all, &l);
  assert_true(l.full > 0 && l.calls > l.full);
  /* a clock restart: a gap, then times far below T */
  tlc_engine_gap(e);
  t = 1000;
  workload(ev, N, &t, 0);
  push(e, ev, N, &all, &l);
  assert_int_equal(tlc_engine_counters(e)->clock_resets, 1);
  assert_true(all.s[all.n - 1].epoch == 1);
  /* a clear: the rows' indexes are reused by other areas */
  tlc_engine_clear(e);
  workload(ev, N, &t, 1000);
  push(e, ev, N, &all, &l);
  assert_true(l.marks_rows >= 2 && l.marks_epoch >= 3);
  assert_true(all.n > 3 * N);
  same(&all, 0, &l.got, 0);

  tlc_engine_free(e);
  tlc_free(ev);
  free(all.s);
  free(l.got.s);
  free(l.desc);
}

static void test_on_off(void **state) {
  enum { N = 5000 };
  tlc_event_t *ev = tlc_calloc(N, sizeof(*ev));
  rec_t all = { 0 };
  lg_t l;
  tlc_engine_t *e = mk(&all);
  int64_t t = 1000;
  size_t from, calls;
  (void)state;
  memset(&l, 0, sizeof l);
  assert_non_null(ev);
  workload(ev, N, &t, 0);
  tlc_engine_push(e, ev, N);
  assert_int_equal(l.calls, 0);
  /* on mid-stream: rows made before are logged too */
  from = all.n;
  assert_int_equal(tlc_engine_set_slog(e, slog_fn, &l), 0);
  workload(ev, N, &t, 0);
  tlc_engine_push(e, ev, N);
  assert_true(l.got.n > N / 2);
  same(&all, from, &l.got, 0);
  /* off: no more calls */
  assert_int_equal(tlc_engine_set_slog(e, NULL, NULL), 0);
  calls = l.calls;
  workload(ev, N, &t, 0);
  tlc_engine_push(e, ev, N);
  assert_int_equal(l.calls, calls);

  tlc_engine_free(e);
  tlc_free(ev);
  free(all.s);
  free(l.got.s);
  free(l.desc);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_same_as_tap),
    cmocka_unit_test(test_on_off),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
