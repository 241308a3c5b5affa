/* test_stats.c - the dist helpers of formats/stats.h: adding and merging samples. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

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

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_add_merge),
    cmocka_unit_test(test_saturated_sums),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
