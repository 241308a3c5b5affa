/* test_stats.c - the dist helpers of formats/stats.h: adding and merging samples. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "base/alloc.h"
#include "base/out.h"
#include "formats/stats.h"

#include <stdint.h>
#include <string.h>

static void test_add_merge(void **state) {
  tlc_dist_t a, b;
  (void)state;
  memset(&a, 0, sizeof(a));
  memset(&b, 0, sizeof(b));
  tlc_dist_add(&a, 10);
  tlc_dist_add(&a, 30);
  tlc_dist_add(&b, 5);
  tlc_dist_merge(&a, &b);
  assert_int_equal(a.n, 3);
  assert_int_equal(a.sum, 45);
  assert_int_equal(a.min, 5);
  assert_int_equal(a.max, 30);
  assert_int_equal(a.sumsq_lo, 100 + 900 + 25);
  assert_int_equal(tlc_dist_avg(&a), 15);
}

/* Regression (found by fuzz_ingest through a Neutral row): the engine saturates a row's sum at
 * INT64_MAX; merging it with another context's row overflowed (undefined behaviour). */
static void test_saturated_sums(void **state) {
  tlc_dist_t a, b;
  (void)state;
  memset(&a, 0, sizeof(a));
  memset(&b, 0, sizeof(b));
  a.n = 2;
  a.sum = INT64_MAX;
  a.min = 1;
  a.max = INT64_MAX;
  tlc_dist_add(&b, 32);
  tlc_dist_merge(&a, &b);
  assert_int_equal(a.n, 3);
  assert_true(a.sum == INT64_MAX);
  assert_int_equal(a.min, 1);
  tlc_dist_add(&a, 7);
  assert_true(a.sum == INT64_MAX);
  memset(&b, 0, sizeof(b));
  tlc_dist_add(&b, INT64_MIN);
  tlc_dist_add(&b, -1);
  assert_true(b.sum == INT64_MIN);
  assert_true(b.min == INT64_MIN);
}

static tlc_at_t at(int64_t start, int64_t end, uint32_t epoch, uint64_t seq) {
  tlc_at_t a = { start, end, seq, seq + 1, epoch, 1, 0, 0, 0, 0, 0 };
  return a;
}

/* An extreme's time comes with its value through adds and merges; of equal extremes the earlier
 * sample (epoch, then end, then sequence) stays; an unknown time loses to a known one. */
static void test_extreme_times(void **state) {
  tlc_dist_t a, b, c;
  tlc_at_t t;
  (void)state;
  memset(&a, 0, sizeof(a));
  memset(&b, 0, sizeof(b));
  memset(&c, 0, sizeof(c));
  t = at(0, 10, 0, 1);
  tlc_dist_add_at(&a, 10, &t);
  t = at(20, 50, 0, 5);
  tlc_dist_add_at(&a, 30, &t);
  t = at(60, 70, 0, 9);
  tlc_dist_add_at(&a, 10, &t); /* equals MIN: the first stays */
  assert_int_equal(a.min_at.end, 10);
  assert_int_equal(a.max_at.end, 50);
  assert_int_equal(a.max_at.seq_start, 5);
  /* b: the same MIN taken earlier in an earlier epoch's end, and a larger MAX */
  t = at(-5, 5, 0, 0);
  tlc_dist_add_at(&b, 10, &t);
  t = at(100, 200, 1, 20);
  tlc_dist_add_at(&b, 40, &t);
  tlc_dist_merge(&a, &b);
  assert_int_equal(a.min, 10);
  assert_int_equal(a.min_at.end, 5); /* tie: the one that closed first */
  assert_int_equal(a.max, 40);
  assert_int_equal(a.max_at.end, 200);
  assert_int_equal(a.max_at.epoch, 1);
  /* a tie with a later epoch does not win, whatever its times */
  t = at(-100, -50, 2, 0);
  tlc_dist_add_at(&c, 40, &t);
  tlc_dist_merge(&a, &c);
  assert_int_equal(a.max_at.epoch, 1);
  /* an unknown time (a version 1 checkpoint's) loses a tie to a known one, either way round */
  memset(&c, 0, sizeof(c));
  tlc_dist_add(&c, 10);
  tlc_dist_merge(&a, &c);
  assert_int_equal(a.min_at.known, 1);
  tlc_dist_merge(&c, &a);
  assert_int_equal(c.min_at.known, 1);
  assert_int_equal(c.min_at.end, 5);
  /* a new extreme from a dist without times has no time */
  memset(&c, 0, sizeof(c));
  tlc_dist_add(&c, 1);
  tlc_dist_merge(&a, &c);
  assert_int_equal(a.min, 1);
  assert_int_equal(a.min_at.known, 0);
}

static const char *name_of(void *ud, const tlc_stat_t *r) {
  (void)ud;
  return r->handle == 0 ? "main" : NULL;
}

/* `tlcap stats --extremes`: a line per row and kind with samples, MAX and MIN with when their
 * samples were taken, "-" for a time not known; kinds that do not apply are left out. */
static void test_extremes_write(void **state) {
  tlc_table_t t;
  tlc_ctx_t c;
  tlc_stat_t *r;
  tlc_out_t o;
  tlc_at_t a1 = at(100, 350, 2, 7), a2 = at(400, 420, 2, 9);
  char *s;
  (void)state;
  a2.wall_ms = 1764756000123; /* 2025-12-03T10:00:00.123Z */
  a2.seg_first = 0;           /* its first record in a segment before the count */
  a2.seg_last = 4;
  a2.off_last = 96;
  tlc_table_init(&t);
  memset(&c, 0, sizeof(c));
  c.kind = TLC_CTXK_CORE;
  c.core = 1;
  assert_int_equal(tlc_table_add_ctx(&t, &c), 0);
  r = tlc_table_add(&t);
  r->handle = 0;
  r->context = 0;
  r->kind = TLC_ROW_CODE;
  tlc_dist_add_at(&r->dist[TLC_NET], 250, &a1);
  tlc_dist_add_at(&r->dist[TLC_NET], 20, &a2);
  tlc_dist_add(&r->dist[TLC_CALL], 5); /* no time */
  r = tlc_table_add(&t);
  r->handle = 0x30000001;
  r->context = TLC_CTX_NONE;
  r->kind = TLC_ROW_STATE;
  r->state = 3;
  tlc_dist_add_at(&r->dist[TLC_NET], 9, &a1);
  tlc_dist_add_at(&r->dist[TLC_CALL], 9, &a1); /* CALL does not apply to a state row */
  tlc_out_init(&o, 0, NULL, NULL);
  assert_int_equal(tlc_extremes_write(&o, &t, name_of, NULL), 0);
  s = tlc_out_take(&o, NULL);
  tlc_out_fini(&o);
  assert_non_null(strstr(s, "MAX AT"));
  assert_non_null(strstr(s, "00000000 main"));
  assert_non_null(strstr(s, "core1"));
  assert_non_null(strstr(s, " 250 100..350 e2"));
  assert_non_null(strstr(s, " 20 400..420 e2 "));
  assert_non_null(strstr(s, "MAX WALL"));
  assert_non_null(strstr(s, "MIN STORED"));
  assert_non_null(strstr(s, " 2025-12-03T10:00:00.123Z "));
  assert_non_null(strstr(s, " ?..4:96\n"));
  assert_non_null(strstr(s, " call "));
  assert_non_null(strstr(s, " 5 -"));
  assert_non_null(strstr(s, "30000001 -"));
  assert_non_null(strstr(s, "state=3"));
  {
    size_t lines = 0;
    for (const char *p = s; *p; p++)
      lines += *p == '\n';
    assert_int_equal(lines, 4); /* header, net and call of main, net of the state */
  }
  tlc_free(s);
  tlc_table_fini(&t);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_add_merge),
    cmocka_unit_test(test_saturated_sums),
    cmocka_unit_test(test_extreme_times),
    cmocka_unit_test(test_extremes_write),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
