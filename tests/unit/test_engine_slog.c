/* test_engine_slog.c - the engine's sample log (engine.h: tlc_engine_set_slog).
 *
 *  - an engine with a tap that wants every sample and the log gets, from the log, exactly the
 *    tap's samples (kind < TLC_NKINDS): the same multiset of (handle, context, state, row kind,
 *    kind, value, end, epoch), each entry's row described by a DEF mark before its first
 *    sample (the key tlc_engine_row_desc gives), once until a TLC_SLOG_ROWS mark, the epoch
 *    taken from TLC_SLOG_EPOCH marks; each block taken (freed by the consumer), a fresh one
 *    returned; over code areas on
 *    4 cores, data writes, a gap, a clock restart (epoch 1) and a clear (rows reused by other
 *    areas: a stale description would name the wrong area);
 *  - an X's NET, GROSS and CALL as one pair of entries (NET's form), counted as three samples
 *    by tlc_engine_slog_samples;
 *  - the log is empty after every push (everything the tap saw is delivered), and no call
 *    hands more than TLC_SLOG_BLOCK entries (a long push hands several full ones);
 *  - the log set mid-stream gets the samples from then on (rows created before included); set
 *    to NULL, no more calls;
 *  - blocks not taken: their samples lost, the next block starts with ROWS and EPOCH and every
 *    row is described again, so every sample after is resolved right;
 *  - a tap's answer n > 0 tags its sample (TLC_SLOG_TAG) next to the sample's entries (before a
 *    code row's, after others'), its row described, counted as n samples; two taps' answers
 *    add up; the log off, nowhere.
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

/* The taps' tags (test_tags; tags_on 0: none): a sample whose value is a multiple of 7 is
 * tagged 1, 2 or 3, a count whose time is a multiple of 5 is tagged 1; tags_want keeps what
 * the engine should log (the row's key, kind, the tag as value, end, epoch), tags_sum their n.
 * With tags_two a second tap (tap2) answers the same: the engine's tag is the sum. */
static int tags_on, tags_two;
static rec_t tags_want;
static uint64_t tags_sum;

static int tag_of(const tlc_engine_sample_t *s) {
  if (s->kind < TLC_NKINDS)
    return s->value % 7 == 0 ? 1 + (int)(s->value / 7 % 3) : 0;
  return s->kind == TLC_TAP_COUNT && s->end % 5 == 0;
}

static int tap2(void *ud, const tlc_engine_sample_t *s) {
  (void)ud;
  return s->kind <= TLC_TAP_COUNT ? tag_of(s) : 0;
}

static int tap_fn(void *ud, const tlc_engine_sample_t *s) {
  smp_t x;
  int n = tags_on && s->kind <= TLC_TAP_COUNT ? tag_of(s) : 0;
  memset(&x, 0, sizeof x);
  if (n > 0) {
    x.handle = s->handle;
    x.context = s->context;
    x.state = s->state;
    x.row_kind = s->row_kind;
    x.kind = s->kind;
    x.value = tags_two ? 2 * n : n;
    x.end = s->end;
    x.epoch = s->epoch;
    rec_add(&tags_want, &x);
    tags_sum += (uint64_t)x.value;
  }
  if (s->kind >= TLC_NKINDS)
    return n;
  x.handle = s->handle;
  x.context = s->context;
  x.state = s->state;
  x.row_kind = s->row_kind;
  x.kind = s->kind;
  x.value = s->value;
  x.end = s->end;
  x.epoch = s->epoch;
  rec_add(ud, &x);
  return n;
}

/* the log's consumer: descriptions kept by row index from the log's DEF marks, as the rollup
 * worker keeps them (it never asks the engine); every `refuse`-th block is not taken */
typedef struct lg {
  rec_t got, lost;
  rec_t tgot, tlost;           /* the tags (TLC_SLOG_TAG) of blocks taken and not */
  uint32_t last_row, pend_row; /* the row and end of the last sample entry read, and of a */
  int64_t last_end, pend_end;  /* tag read before its sample's entries (pend) */
  int pend;
  smp_t *desc; /* kind 0xFF: not described */
  size_t ndesc;
  uint64_t epoch;
  size_t calls, full, marks_rows, marks_epoch, defs, refuse, refused;
  size_t pairs, counted; /* NET pairs read; samples as tlc_engine_slog_samples counts them */
  int after_refusal;
} lg_t;

static tlc_engine_slent_t *slog_fn(void *ud, const tlc_engine_t *e, tlc_engine_slent_t *x,
                                   size_t n) {
  lg_t *l = ud;
  size_t i;
  int refuse;
  tlc_engine_slent_t *nb;
  assert_true(n > 0 && n <= TLC_SLOG_BLOCK);
  l->calls++;
  l->full += n > TLC_SLOG_BLOCK - 4; /* handed before a group of entries that would not fit */
  refuse = l->refuse > 0 && l->calls % l->refuse == 0;
  if (l->after_refusal) { /* a block not taken: the engine starts over, every row described */
    assert_true(n >= 2);
    assert_int_equal(x[0].rk, TLC_SLOG_ROWS);
    assert_int_equal(x[1].rk, TLC_SLOG_EPOCH);
    l->after_refusal = 0;
  }
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
    if (x[i].rk >= TLC_SLOG_DEF && x[i].rk < TLC_SLOG_DEF + 8) {
      smp_t *d, w;
      row = x[i].aux;
      if (row >= l->ndesc) {
        size_t nd = (row + 1) * 2;
        l->desc = realloc(l->desc, nd * sizeof(*l->desc));
        assert_non_null(l->desc);
        for (size_t j = l->ndesc; j < nd; j++)
          l->desc[j].kind = 0xFF;
        l->ndesc = nd;
      }
      d = &l->desc[row];
      assert_int_equal(d->kind, 0xFF); /* once per row between ROWS marks */
      d->handle = (uint32_t)((uint64_t)x[i].value >> 32);
      d->context = (uint32_t)x[i].value;
      d->state = (uint64_t)x[i].end;
      d->row_kind = (uint8_t)(x[i].rk - TLC_SLOG_DEF);
      d->kind = 0;
      /* the engine's own key of the row */
      assert_int_equal(tlc_engine_row_desc(e, row, &w.handle, &w.context, &w.row_kind, &w.state),
                       0);
      assert_int_equal(w.handle, d->handle);
      assert_int_equal(w.context, d->context);
      assert_int_equal(w.state, d->state);
      assert_int_equal(w.row_kind, d->row_kind);
      l->defs++;
      continue;
    }
    if (x[i].rk == TLC_SLOG_TAG) {
      row = x[i].aux;
      assert_true(row < l->ndesc && l->desc[row].kind != 0xFF); /* described before */
      s = l->desc[row];
      s.kind = (uint8_t)(x[i].value & 0xFF);
      s.value = x[i].value >> 8;
      s.end = x[i].end;
      s.epoch = l->epoch;
      assert_true(s.kind <= TLC_TAP_COUNT && s.value > 0);
      /* with its sample's entries: right after them, or (a code row's) right before */
      if (s.kind < TLC_NKINDS && (row != l->last_row || s.end != l->last_end)) {
        assert_true(!l->pend || (row == l->pend_row && s.end == l->pend_end));
        l->pend = 1;
        l->pend_row = row;
        l->pend_end = s.end;
      }
      rec_add(refuse ? &l->tlost : &l->tgot, &s);
      continue;
    }
    assert_true(x[i].rk < TLC_SLOG_MARKS);
    assert_true(row < l->ndesc && l->desc[row].kind != 0xFF); /* described before */
    s = l->desc[row];
    s.kind = (uint8_t)(x[i].rk % TLC_NKINDS);
    s.value = x[i].value;
    s.end = x[i].end;
    s.epoch = l->epoch;
    if (l->pend) { /* the entries of the sample tagged just before */
      assert_int_equal(row, l->pend_row);
      assert_int_equal(s.end, l->pend_end);
      l->pend = 0;
    }
    l->last_row = row;
    l->last_end = s.end;
    rec_add(refuse ? &l->lost : &l->got, &s);
    if (s.kind == TLC_NET) { /* a pair: GROSS and CALL in the next entry, the same end */
      assert_true(i + 1 < n);
      i++;
      s.kind = TLC_GROSS;
      s.value = x[i].value;
      rec_add(refuse ? &l->lost : &l->got, &s);
      s.kind = TLC_CALL;
      s.value = x[i].end;
      rec_add(refuse ? &l->lost : &l->got, &s);
      l->pairs++;
    }
  }
  l->counted += tlc_engine_slog_samples(x, n);
  if (refuse) {
    l->refused++;
    l->after_refusal = 1;
    return x;
  }
  /* taken: x is ours now; the engine goes on in a fresh block */
  nb = tlc_malloc(TLC_SLOG_BLOCK * sizeof(*nb));
  assert_non_null(nb);
  memset(nb, 0xA5, TLC_SLOG_BLOCK * sizeof(*nb));
  tlc_free(x);
  return nb;
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

/* A test's engine (bin11; context_area: none when 0), its tap recording every sample in all,
 * its log's consumer l (on from the start when `log`) and room for n events in ev. */
typedef struct fx {
  tlc_event_t *ev;
  rec_t all;
  lg_t l;
  tlc_engine_t *e;
} fx_t;

static void fx_start(fx_t *f, size_t n, uint32_t context_area, int log) {
  tlc_engine_opts_t o;
  memset(f, 0, sizeof(*f));
  f->ev = tlc_calloc(n, sizeof(*f->ev));
  assert_non_null(f->ev);
  tlc_engine_opts_default(&o);
  o.has_context_area = context_area != 0;
  o.context_area = context_area;
  o.tap = tap_fn;
  o.tap_ud = &f->all;
  assert_int_equal(tlc_engine_new(&f->e, TLC_FMT_BIN11, &o), 0);
  if (log)
    assert_int_equal(tlc_engine_set_slog(f->e, slog_fn, &f->l), 0);
}

/* Frees the engine, the events and what the tap and the log recorded. */
static void fx_stop(fx_t *f) {
  tlc_engine_free(f->e);
  tlc_free(f->ev);
  free(f->all.s);
  free(f->l.got.s);
  free(f->l.lost.s);
  free(f->l.tgot.s);
  free(f->l.tlost.s);
  free(f->l.desc);
}

/* pushes ev and checks that the log delivered all the tap saw */
static void push(fx_t *f, const tlc_event_t *ev, size_t n) {
  tlc_engine_push(f->e, ev, n);
  assert_int_equal(f->l.got.n + f->l.lost.n, f->all.n);
  /* a block's samples, pairs counted as 3, a tag as its n */
  assert_int_equal(f->l.counted, f->all.n + tags_sum);
}

static void test_same_as_tap(void **state) {
  enum { N = 20000 };
  fx_t f;
  tlc_engine_mem_t m0, m1;
  int64_t t = 1000000000000ll;
  (void)state;
  fx_start(&f, N, 0, 1);
  workload(f.ev, N, &t, 0);
  push(&f, f.ev, N / 2);
  tlc_engine_gap(f.e);
  push(&f, f.ev + N / 2, N - N / 2);
  assert_true(f.l.full > 0 && f.l.calls > f.l.full);
  assert_true(f.l.pairs > 0);
  /* a clock restart: a gap, then times far below T */
  tlc_engine_gap(f.e);
  t = 1000;
  workload(f.ev, N, &t, 0);
  push(&f, f.ev, N);
  assert_int_equal(tlc_engine_counters(f.e)->clock_resets, 1);
  assert_true(f.all.s[f.all.n - 1].epoch == 1);
  /* a clear: the rows' indexes are reused by other areas */
  tlc_engine_mem(f.e, &m0);
  tlc_engine_clear(f.e);
  workload(f.ev, N, &t, 1000);
  push(&f, f.ev, N);
  assert_true(f.l.marks_rows >= 2 && f.l.marks_epoch >= 3);
  assert_true(f.all.n > 3 * N);
  same(&f.all, 0, &f.l.got, 0);
  /* rows described once per ROWS mark: every row before the clear, every row after it */
  tlc_engine_mem(f.e, &m1);
  assert_int_equal(f.l.defs, m0.areas + m1.areas);
  fx_stop(&f);
}

/* With context_area (the workload's first data area: its writes switch tasks), an X's GROSS
 * (time in its task) and CALL (wall time) differ: the pair's two values each go to their own
 * kind, as the tap gives them. */
static void test_pair_gross_call(void **state) {
  enum { N = 4000 };
  fx_t f;
  tlc_event_t *ev;
  int64_t t = 1000;
  size_t differ = 0;
  (void)state;
  fx_start(&f, N, 0x20000000u, 1);
  ev = f.ev;
  /* on one core: E of a function in task 1, task 2 switched in, task 1 again, X */
  for (size_t i = 0; i + 4 <= N; i += 4) {
    uint32_t fn = 0x10000000u + (uint32_t)(i / 4 % 40);
    ev[i] = (tlc_event_t){ .time_ns = t += 1 + rnd(1000), .handle = fn, .type = TLC_EV_ENTRY };
    ev[i + 1] = (tlc_event_t){
      .time_ns = t += 1 + rnd(1000), .handle = 0x20000000u, .type = TLC_EV_WRITE, .data = 2
    };
    ev[i + 2] = (tlc_event_t){
      .time_ns = t += 1 + rnd(1000), .handle = 0x20000000u, .type = TLC_EV_WRITE, .data = 1
    };
    ev[i + 3] = (tlc_event_t){ .time_ns = t += 1 + rnd(1000), .handle = fn, .type = TLC_EV_EXIT };
  }
  push(&f, ev, N);
  assert_true(f.l.pairs > 0);
  /* GROSS != CALL (else a swap would pass), in the tap's order */
  for (size_t i = 0; i + 1 < f.all.n; i++)
    differ += f.all.s[i].kind == TLC_GROSS && f.all.s[i + 1].kind == TLC_CALL &&
              f.all.s[i].value != f.all.s[i + 1].value;
  assert_true(differ > N / 8);
  same(&f.all, 0, &f.l.got, 0);
  fx_stop(&f);
}

/* Blocks not taken (a consumer short of memory): their samples are lost, the engine starts the
 * block over with ROWS and EPOCH marks and describes every row again before its next sample, so
 * that the samples of the blocks taken are all resolved right (the consumer asserts a row is
 * described before its samples, and that a DEF comes once per row between ROWS marks). */
static void test_refused(void **state) {
  enum { N = 20000 };
  fx_t f;
  int64_t t = 1000;
  (void)state;
  fx_start(&f, N, 0, 1);
  f.l.refuse = 3;
  for (int round = 0; round < 4; round++) {
    workload(f.ev, N, &t, 0);
    push(&f, f.ev, N);
    if (round == 1) {
      tlc_engine_clear(f.e);
      workload(f.ev, N, &t, 1000);
      push(&f, f.ev, N);
    }
  }
  assert_true(f.l.refused >= 3 && f.l.lost.n > 0 && f.l.got.n > 0);
  /* the rows described again after every refusal, so more than once each */
  assert_true(f.l.defs > f.l.refused);
  {
    rec_t both = { 0 };
    for (size_t i = 0; i < f.l.got.n; i++)
      rec_add(&both, &f.l.got.s[i]);
    for (size_t i = 0; i < f.l.lost.n; i++)
      rec_add(&both, &f.l.lost.s[i]);
    same(&f.all, 0, &both, 0);
    free(both.s);
  }
  fx_stop(&f);
}

static void test_on_off(void **state) {
  enum { N = 5000 };
  fx_t f;
  int64_t t = 1000;
  size_t from, calls;
  (void)state;
  fx_start(&f, N, 0, 0);
  workload(f.ev, N, &t, 0);
  tlc_engine_push(f.e, f.ev, N);
  assert_int_equal(f.l.calls, 0);
  /* on mid-stream: rows made before are logged too */
  from = f.all.n;
  assert_int_equal(tlc_engine_set_slog(f.e, slog_fn, &f.l), 0);
  workload(f.ev, N, &t, 0);
  tlc_engine_push(f.e, f.ev, N);
  assert_true(f.l.got.n > N / 2);
  same(&f.all, from, &f.l.got, 0);
  /* off: no more calls */
  assert_int_equal(tlc_engine_set_slog(f.e, NULL, NULL), 0);
  calls = f.l.calls;
  workload(f.ev, N, &t, 0);
  tlc_engine_push(f.e, f.ev, N);
  assert_int_equal(f.l.calls, calls);
  fx_stop(&f);
}

/* rec a's entries and b's in one */
static void rec_join(rec_t *to, const rec_t *a, const rec_t *b) {
  for (size_t i = 0; i < a->n; i++)
    rec_add(to, &a->s[i]);
  for (size_t i = 0; i < b->n; i++)
    rec_add(to, &b->s[i]);
}

/* A tap's answer n > 0 tags its sample in the log (TLC_SLOG_TAG): exactly the samples and counts
 * the tap answered for, each with its row (described before it, again after a block not taken),
 * kind, n, end and epoch, next to the sample's own entries; counted as n samples; with two
 * taps, their answers added up; with the log off, nowhere. Across a gap, a clock restart, a
 * clear and blocks not taken. */
static void test_tags(void **state) {
  enum { N = 20000 };
  fx_t f;
  int64_t t = 1000000000000ll;
  size_t kinds[TLC_TAP_COUNT + 1] = { 0 }, big = 0, calls;
  rec_t tags = { 0 };
  (void)state;
  fx_start(&f, N, 0, 1);
  tags_on = 1;
  f.l.refuse = 4;
  workload(f.ev, N, &t, 0);
  push(&f, f.ev, N);
  tlc_engine_gap(f.e);
  workload(f.ev, N, &t, 0);
  push(&f, f.ev, N);
  tlc_engine_gap(f.e); /* a clock restart */
  t = 1000;
  workload(f.ev, N, &t, 0);
  push(&f, f.ev, N);
  assert_int_equal(tlc_engine_counters(f.e)->clock_resets, 1);
  /* two taps: each answers, the tag is the sum */
  assert_int_equal(tlc_engine_add_tap(f.e, tap2, NULL, NULL, &tags), 0);
  tags_two = 1;
  workload(f.ev, N, &t, 0);
  push(&f, f.ev, N);
  tlc_engine_clear(f.e);
  workload(f.ev, N, &t, 1000);
  push(&f, f.ev, N);
  assert_true(f.l.refused >= 2 && f.l.tlost.n > 0 && f.l.tgot.n > N / 10);
  rec_join(&tags, &f.l.tgot, &f.l.tlost);
  same(&tags_want, 0, &tags, 0);
  for (size_t i = 0; i < tags.n; i++) {
    kinds[tags.s[i].kind]++;
    big += tags.s[i].value >= 4; /* two taps' */
  }
  for (unsigned k = 0; k <= TLC_TAP_COUNT; k++)
    if (k != TLC_OUTSIDE) /* the workload's areas are never outside */
      assert_true(kinds[k] > 0);
  assert_true(big > 0);
  /* the log off: the taps' answers go nowhere */
  assert_int_equal(tlc_engine_set_slog(f.e, NULL, NULL), 0);
  calls = f.l.calls;
  workload(f.ev, N, &t, 0);
  tlc_engine_push(f.e, f.ev, N);
  assert_int_equal(f.l.calls, calls);
  tags_on = tags_two = 0;
  tags_sum = 0;
  free(tags_want.s);
  memset(&tags_want, 0, sizeof tags_want);
  free(tags.s);
  fx_stop(&f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_same_as_tap), cmocka_unit_test(test_on_off),
    cmocka_unit_test(test_refused),     cmocka_unit_test(test_pair_gross_call),
    cmocka_unit_test(test_tags),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
