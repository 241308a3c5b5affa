/* test_hist.c - the log-bucket histogram: bucket layout, the 1% bound on random data against
 * exact nearest-rank quantiles from sorted samples, merging several histograms (Neutral),
 * bounded memory, and allocation failure.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "base/alloc.h"
#include "base/err.h"
#include "engine/hist.h"
#include "formats/stats.h"
#include "rng.h"
#include "testalloc.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? -1 : x > y;
}

/* Exact nearest rank: k = ceil(q * n) with q = permille / 1000, the k-th smallest. */
static int64_t exact_q(const int64_t *sorted, size_t n, unsigned permille) {
  size_t k = (size_t)(((unsigned long long)n * permille + 999) / 1000);
  return sorted[(k ? k : 1) - 1];
}

static void test_buckets(void **state) {
  uint32_t i;
  uint64_t lo, hi, prev_hi = 0;
  (void)state;
  /* every value below 256 is its own bucket */
  assert_int_equal(tlc__hist_idx(0), 0);
  assert_int_equal(tlc__hist_idx(255), 255);
  assert_int_equal(tlc__hist_idx(-5), 0);
  /* 256..511: steps of 1; the first bucket holds steps 0..4 (256..260), 261 starts the next;
   * 511 (step 255) is in the octave's last bucket (steps 247..255), number 37 of 38; 512
   * starts the next octave */
  assert_int_equal(tlc__hist_idx(256), 256);
  assert_int_equal(tlc__hist_idx(260), 256);
  assert_int_equal(tlc__hist_idx(261), 257);
  assert_int_equal(tlc__hist_idx(511), 256 + 37);
  assert_int_equal(tlc__hist_idx(512), 256 + 38);
  /* 2^20 + 2^12 * 5 = 1069056 is the first value of the octave's second bucket (steps 5..9) */
  assert_int_equal(tlc__hist_idx(1069055), 256 + (20 - 8) * 38);
  assert_int_equal(tlc__hist_idx(1069056), 256 + (20 - 8) * 38 + 1);
  assert_int_equal(tlc__hist_idx(INT64_MAX), TLC_HIST_NB - 1);
  /* buckets tile [0, 2^63) without gaps, and the midpoint of each is within 1% of every value
   * in it (checked at both ends, where the error is largest) */
  for (i = 0; i < TLC_HIST_NB; i++) {
    uint64_t rep;
    tlc__hist_bounds(i, &lo, &hi);
    if (i > 0)
      assert_int_equal(lo, prev_hi + 1);
    assert_true(lo <= hi);
    assert_int_equal(tlc__hist_idx((int64_t)lo), i);
    assert_int_equal(tlc__hist_idx((int64_t)hi), i);
    rep = lo + (hi - lo) / 2;
    assert_true((rep - lo) * 100 <= lo);
    assert_true((hi - rep) * 100 <= hi);
    prev_hi = hi;
  }
  assert_int_equal(prev_hi, (uint64_t)INT64_MAX);
}

static void test_rank(void **state) {
  (void)state;
  /* n = 10: p50 -> 5th, p90 -> 9th, p99 -> ceil(9.9) = 10th, p99.9 -> 10th */
  assert_int_equal(tlc__hist_rank(10, 500, 1000), 5);
  assert_int_equal(tlc__hist_rank(10, 900, 1000), 9);
  assert_int_equal(tlc__hist_rank(10, 990, 1000), 10);
  assert_int_equal(tlc__hist_rank(10, 999, 1000), 10);
  /* n = 1: always the only sample */
  assert_int_equal(tlc__hist_rank(1, 500, 1000), 1);
  /* n = 2001, p50 = ceil(1000.5) = 1001 */
  assert_int_equal(tlc__hist_rank(2001, 500, 1000), 1001);
  /* no overflow near 2^64 */
  assert_int_equal(tlc__hist_rank(UINT64_MAX, 500, 1000), UINT64_MAX / 2 + 1);
}

static void test_small_exact(void **state) {
  tlc_hist_t h = { 0 };
  const tlc_hist_t *hp = &h;
  int64_t q[TLC_NQUANT];
  int i;
  (void)state;
  /* 1..100: p50 = 50, p90 = 90, p99 = 99, p99.9 = 100, all exact (below 256) */
  for (i = 1; i <= 100; i++)
    assert_int_equal(tlc__hist_add(&h, i), 0);
  assert_int_equal(tlc__hist_quantiles(&hp, 1, 100, 1, 100, q), 1);
  assert_int_equal(q[0], 50);
  assert_int_equal(q[1], 90);
  assert_int_equal(q[2], 99);
  assert_int_equal(q[3], 100);
  tlc__hist_fini(&h);
  /* a single large sample is reported exactly (clamped to [min, max]) */
  assert_int_equal(tlc__hist_add(&h, 123456789), 0);
  assert_int_equal(tlc__hist_quantiles(&hp, 1, 1, 123456789, 123456789, q), 1);
  assert_int_equal(q[0], 123456789);
  assert_int_equal(q[3], 123456789);
  tlc__hist_fini(&h);
  /* nothing: not filled */
  assert_int_equal(tlc__hist_quantiles(&hp, 1, 0, 0, 0, q), 0);
}

static void test_random_within_1pct(void **state) {
  rng_t r;
  unsigned round;
  static const unsigned permille[TLC_NQUANT] = { 500, 900, 990, 999 };
  (void)state;
  rng_seed(&r, 42);
  for (round = 0; round < 300; round++) {
    size_t n = 1 + (size_t)rng_below(&r, 3000), i;
    int64_t *v = malloc(n * sizeof(*v)), q[TLC_NQUANT], mn = INT64_MAX, mx = INT64_MIN;
    tlc_hist_t h = { 0 };
    const tlc_hist_t *hp = &h;
    unsigned dist = round % 4, j;
    assert_non_null(v);
    for (i = 0; i < n; i++) {
      switch (dist) {
      case 0: /* uniform over a wide range */
        v[i] = (int64_t)rng_below(&r, 1000000000);
        break;
      case 1: /* log-uniform over 1 ns .. 2^50 ns */
        v[i] = (int64_t)(rng_next(&r) >> (14 + rng_below(&r, 50)));
        break;
      case 2: /* clustered around one value with small jitter */
        v[i] = 5000000 + (int64_t)rng_below(&r, 300);
        break;
      default: /* small values, mostly exact buckets */
        v[i] = (int64_t)rng_below(&r, 400);
        break;
      }
      if (v[i] < mn)
        mn = v[i];
      if (v[i] > mx)
        mx = v[i];
      assert_int_equal(tlc__hist_add(&h, v[i]), 0);
    }
    qsort(v, n, sizeof(*v), cmp_i64);
    assert_int_equal(tlc__hist_quantiles(&hp, 1, n, mn, mx, q), 1);
    for (j = 0; j < TLC_NQUANT; j++) {
      int64_t ex = exact_q(v, n, permille[j]), d = q[j] > ex ? q[j] - ex : ex - q[j];
      if (ex < 256)
        assert_int_equal(q[j], ex);
      else if ((double)d > 0.01 * (double)ex)
        fail_msg("round %u q%u: %" PRId64 " vs exact %" PRId64, round, j, q[j], ex);
    }
    /* bounded: never more than the whole layout */
    assert_true(tlc__hist_bytes(&h) <= TLC_HIST_NB * sizeof(uint32_t));
    tlc__hist_fini(&h);
    free(v);
  }
}

static void test_merge(void **state) {
  /* three histograms (three contexts of one area) answer for the union of their samples */
  rng_t r;
  tlc_hist_t h[3];
  const tlc_hist_t *hp[4];
  int64_t all[3000], q[TLC_NQUANT], mn = INT64_MAX, mx = 0;
  size_t n = 0, i;
  unsigned j;
  static const unsigned permille[TLC_NQUANT] = { 500, 900, 990, 999 };
  (void)state;
  memset(h, 0, sizeof(h));
  rng_seed(&r, 7);
  for (i = 0; i < 3000; i++) {
    unsigned c = (unsigned)(i % 3);
    int64_t v = (int64_t)(1000 * (c + 1) + rng_below(&r, 100000 * (c + 1)));
    all[n++] = v;
    if (v < mn)
      mn = v;
    if (v > mx)
      mx = v;
    assert_int_equal(tlc__hist_add(&h[c], v), 0);
  }
  hp[0] = &h[0];
  hp[1] = NULL; /* skipped */
  hp[2] = &h[1];
  hp[3] = &h[2];
  qsort(all, n, sizeof(all[0]), cmp_i64);
  assert_int_equal(tlc__hist_quantiles(hp, 4, n, mn, mx, q), 1);
  for (j = 0; j < TLC_NQUANT; j++) {
    int64_t ex = exact_q(all, n, permille[j]), d = q[j] > ex ? q[j] - ex : ex - q[j];
    assert_true((double)d <= 0.01 * (double)ex);
  }
  for (j = 0; j < 3; j++)
    tlc__hist_fini(&h[j]);
}

/* Histograms with few samples keep them inline (no span): quantiles over any mix of inline and
 * spanned histograms equal those of one histogram that got every sample, and the counts of a
 * histogram that spills its inline samples into a span are those of the samples. */
static void test_inline_mix(void **state) {
  rng_t r;
  unsigned round;
  (void)state;
  rng_seed(&r, 99);
  for (round = 0; round < 2000; round++) {
    tlc_hist_t hs[3], all;
    const tlc_hist_t *hp[3] = { &hs[0], &hs[1], &hs[2] }, *ap = &all;
    int64_t qa[TLC_NQUANT], qb[TLC_NQUANT], mn = INT64_MAX, mx = INT64_MIN;
    uint64_t n = 0;
    unsigned j, k;
    memset(hs, 0, sizeof(hs));
    memset(&all, 0, sizeof(all));
    for (j = 0; j < 3; j++) {
      unsigned m = (unsigned)rng_below(&r, 2 * TLC_HIST_INLINE + 1);
      for (k = 0; k < m; k++) {
        int64_t v = (int64_t)rng_below(&r, 1u << (1 + rng_below(&r, 30)));
        assert_int_equal(tlc__hist_add(&hs[j], v), 0);
        assert_int_equal(tlc__hist_add(&all, v), 0);
        mn = v < mn ? v : mn;
        mx = v > mx ? v : mx;
        n++;
      }
      assert_true(m > TLC_HIST_INLINE ? hs[j].b != NULL : hs[j].b == NULL);
    }
    assert_int_equal(tlc__hist_quantiles(hp, 3, n, mn, mx, qa), n > 0);
    assert_int_equal(tlc__hist_quantiles(&ap, 1, n, mn, mx, qb), n > 0);
    if (n > 0)
      assert_memory_equal(qa, qb, sizeof(qa));
    for (j = 0; j < 3; j++)
      tlc__hist_fini(&hs[j]);
    tlc__hist_fini(&all);
  }
}

static void test_alloc_failure(void **state) {
  tlc_hist_t h = { 0 };
  const tlc_hist_t *hp = &h;
  int64_t q[TLC_NQUANT];
  int i;
  (void)state;
  testalloc_install();
  /* the first TLC_HIST_INLINE samples are held inline and need no memory; the next one needs
   * the bucket span: without memory it is not counted, the inline ones stay */
  testalloc_fail_at(1);
  for (i = 0; i < TLC_HIST_INLINE; i++)
    assert_int_equal(tlc__hist_add(&h, 10 + i), 0);
  assert_null(h.b);
  assert_int_equal(tlc__hist_bytes(&h), 0);
  /* 10, 11, 12: p50 is rank 2 -> 11, p90 rank 3 -> 12 */
  assert_int_equal(tlc__hist_quantiles(&hp, 1, TLC_HIST_INLINE, 10, 12, q), 1);
  assert_int_equal(q[0], 11);
  assert_int_equal(q[1], 12);
  assert_int_equal(tlc__hist_add(&h, 10), TLC_ENOMEM);
  assert_null(h.b);
  assert_int_equal(h.nin, TLC_HIST_INLINE);
  testalloc_fail_at(0);
  for (i = 0; i < 9; i++)
    assert_int_equal(tlc__hist_add(&h, 10), 0);
  assert_non_null(h.b);
  assert_int_equal(tlc__hist_count(&h, 10 - h.lo), 10);
  assert_int_equal(tlc__hist_count(&h, 11 - h.lo), 1);
  assert_int_equal(tlc__hist_count(&h, 12 - h.lo), 1);
  assert_int_equal(tlc__hist_quantiles(&hp, 1, 12, 10, 12, q), 1);
  assert_int_equal(q[0], 10);
  /* a far value needs a larger span: without memory it is lost, the old span stays intact */
  testalloc_fail_at(1);
  assert_int_equal(tlc__hist_add(&h, 1000000000), TLC_ENOMEM);
  assert_non_null(h.b);
  assert_int_equal(tlc__hist_count(&h, 10 - h.lo), 10);
  testalloc_fail_at(0);
  assert_int_equal(tlc__hist_add(&h, 1000000000), 0);
  assert_int_equal(tlc__hist_count(&h, tlc__hist_idx(1000000000) - h.lo), 1);
  assert_int_equal(tlc__hist_count(&h, 10 - h.lo), 10);
  testalloc_fail_at(0);
  tlc__hist_fini(&h);
  assert_int_equal(testalloc_live_bytes(), 0);
  testalloc_uninstall();
}

/* A count that would pass 65535 wraps and adds a carry (hist.h): the span stays 16 bits per
 * bucket, the count stays exact; without memory for the carry the sample is lost (the count
 * saturates) and the next one tries again. */
static void test_carry(void **state) {
  tlc_hist_t h = { 0 };
  const tlc_hist_t *hp = &h;
  int64_t q[TLC_NQUANT];
  uint32_t i;
  size_t narrow;
  (void)state;
  for (i = 0; i < 65532; i++)
    assert_int_equal(tlc__hist_add(&h, 5), 0);
  assert_int_equal(h.in2, 0);
  narrow = tlc__hist_bytes(&h);
  assert_int_equal(narrow, (h.nb * sizeof(uint16_t) + 7) / 8 * 8);
  for (i = 0; i < 4468; i++) /* 70000 samples of 5 in all */
    assert_int_equal(tlc__hist_add(&h, 5), 0);
  assert_int_equal(tlc__hist_add(&h, 1000), 0);
  assert_int_equal(h.in2, 1);
  /* 2 bytes per bucket of the span (grown for 1000), plus a table of 4 carries (8 + 2 bytes
   * each) */
  assert_true(h.nb * sizeof(uint16_t) > narrow);
  assert_int_equal(tlc__hist_bytes(&h), (h.nb * sizeof(uint16_t) + 7) / 8 * 8 + 4 * 10);
  assert_int_equal(tlc__hist_count(&h, 5 - h.lo), 70000);
  assert_int_equal(tlc__hist_count(&h, 6 - h.lo), 0);
  assert_int_equal(tlc__hist_count(&h, tlc__hist_idx(1000) - h.lo), 1);
  /* n = 70001: p99.9 is rank ceil(69930.999) = 69931 -> 5; the 70001st is 1000 */
  assert_int_equal(tlc__hist_quantiles(&hp, 1, 70001, 5, 1000, q), 1);
  assert_int_equal(q[0], 5);
  assert_int_equal(q[3], 5);
  tlc__hist_fini(&h);

  testalloc_install();
  for (i = 0; i < 65535; i++)
    assert_int_equal(tlc__hist_add(&h, 7), 0);
  /* the first carry finds no memory: that sample is lost (saturated); the next one carries */
  testalloc_fail_at(1);
  assert_int_equal(tlc__hist_add(&h, 7), TLC_ENOMEM);
  assert_int_equal(h.in2, 0);
  assert_int_equal(tlc__hist_count(&h, 7 - h.lo), 65535);
  for (i = 0; i < 9; i++)
    assert_int_equal(tlc__hist_add(&h, 7), 0);
  assert_int_equal(h.in2, 1);
  assert_int_equal(tlc__hist_count(&h, 7 - h.lo), 65535 + 9);
  testalloc_fail_at(0);
  tlc__hist_fini(&h);
  assert_int_equal(testalloc_live_bytes(), 0);
  testalloc_uninstall();
}

/* Many carried buckets: the table stays sorted whatever order buckets wrap in, grows past its
 * first 4 entries (a new block), and survives the span growing on both sides; every count is
 * checked against its number of samples and the quantiles against a brute-force rank walk
 * over those counts. Without memory to grow the table the wrapping sample is lost and the next
 * one tries again. */
static void test_carry_many(void **state) {
  static const uint32_t order[6] = { 30, 10, 50, 20, 60, 40 };
  tlc_hist_t h = { 0 };
  const tlc_hist_t *hp = &h;
  int64_t q[TLC_NQUANT];
  uint64_t want[6], n = 0;
  uint32_t i, k;
  (void)state;
  testalloc_install();
  for (k = 0; k < 6; k++) {
    /* bucket order[k] (a value below 256 is its own bucket) gets 2 * 65536 + k + 1 samples */
    want[k] = 2u * 65536u + k + 1;
    for (i = 0; i < want[k]; i++) {
      if (k == 4 && i == 65535)
        testalloc_fail_at(1); /* the 5th carry needs a larger table: no memory */
      if (k == 4 && i == 65535) {
        assert_int_equal(tlc__hist_add(&h, order[k]), TLC_ENOMEM);
        testalloc_fail_at(0);
      }
      assert_int_equal(tlc__hist_add(&h, order[k]), 0);
    }
    n += want[k];
  }
  assert_int_equal(h.in2, 6);
  /* the span grows to both sides after the carries */
  assert_int_equal(tlc__hist_add(&h, 1000000000), 0);
  assert_int_equal(tlc__hist_add(&h, 0), 0);
  n += 2;
  for (k = 0; k < 6; k++)
    assert_int_equal(tlc__hist_count(&h, order[k] - h.lo), want[k]);
  assert_int_equal(tlc__hist_count(&h, 0 - h.lo), 1);
  assert_int_equal(tlc__hist_count(&h, tlc__hist_idx(1000000000) - h.lo), 1);
  assert_int_equal(tlc__hist_count(&h, 25 - h.lo), 0);
  /* brute force: the value whose cumulative count first reaches each rank */
  assert_int_equal(tlc__hist_quantiles(&hp, 1, n, 0, 1000000000, q), 1);
  {
    static const uint32_t vals[6] = { 10, 20, 30, 40, 50, 60 };
    static const uint64_t num[TLC_NQUANT] = { 500, 900, 990, 999 };
    unsigned qi;
    for (qi = 0; qi < TLC_NQUANT; qi++) {
      uint64_t rank = tlc__hist_rank(n, num[qi], 1000), cum = 1; /* the sample of 0 */
      int64_t v = -1;
      for (i = 0; i < 6 && v < 0; i++) {
        for (k = 0; k < 6; k++)
          if (order[k] == vals[i])
            cum += want[k];
        if (cum >= rank)
          v = vals[i];
      }
      assert_int_equal(q[qi], v);
    }
  }
  tlc__hist_fini(&h);
  assert_int_equal(testalloc_live_bytes(), 0);
  testalloc_uninstall();
}

/* The walk to the ranks (blocks of buckets summed, then bucket by bucket where a rank falls;
 * a union summed into one array first) against a brute force over exact per-bucket counts: 300
 * random sets of 1 to 5 histograms (NULL entries among them) mixing inline-only histograms,
 * spans of any width and offset, and buckets carried past 65535 (one histogram with a carry
 * alone, in unions, at block edges). Each quantile must be the clamped representative of the
 * first bucket whose cumulative count reaches its rank. */
static void test_walk_brute(void **state) {
  static const uint64_t num[TLC_NQUANT] = { 500, 900, 990, 999 };
  static uint64_t cnt[TLC_HIST_NB];
  rng_t r;
  unsigned round;
  (void)state;
  rng_seed(&r, 2026);
  for (round = 0; round < 300; round++) {
    tlc_hist_t hs[5];
    const tlc_hist_t *hp[5];
    unsigned nh = 1 + (unsigned)rng_below(&r, 5), j, qi;
    uint64_t n = 0;
    uint32_t lo = TLC_HIST_NB, hi = 0, i;
    int64_t mn = INT64_MAX, mx = INT64_MIN, q[TLC_NQUANT];
    memset(hs, 0, sizeof(hs));
    memset(cnt, 0, sizeof(cnt));
    for (j = 0; j < nh; j++) {
      unsigned kind = (unsigned)rng_below(&r, 4), m, k;
      /* a value range: an octave somewhere between 1 and 2^40, up to 6 octaves wide */
      unsigned e0 = (unsigned)rng_below(&r, 40), w = 1 + (unsigned)rng_below(&r, 6);
      hp[j] = rng_below(&r, 8) == 0 ? NULL : &hs[j];
      if (hp[j] == NULL)
        continue;
      m = kind == 0 ? (unsigned)rng_below(&r, TLC_HIST_INLINE + 1)
                    : 1 + (unsigned)rng_below(&r, 3000);
      for (k = 0; k < m + (kind == 3 ? 1u : 0u); k++) {
        int64_t v = (int64_t)(((uint64_t)1 << e0) + rng_below(&r, ((uint64_t)1 << (e0 + w))));
        /* kind 3: one value gets 65536 + some more samples, so its bucket carries */
        uint64_t times = kind == 3 && k == m ? 65536 + rng_below(&r, 100) : 1, t;
        uint32_t b = tlc__hist_idx(v);
        for (t = 0; t < times; t++)
          assert_int_equal(tlc__hist_add(&hs[j], v), 0);
        cnt[b] += times;
        n += times;
        mn = v < mn ? v : mn;
        mx = v > mx ? v : mx;
        lo = b < lo ? b : lo;
        hi = b + 1 > hi ? b + 1 : hi;
      }
      if (kind == 3)
        assert_true(hs[j].b != NULL && hs[j].in2 > 0);
    }
    assert_int_equal(tlc__hist_quantiles(hp, nh, n, mn, mx, q), n > 0);
    for (qi = 0; n > 0 && qi < TLC_NQUANT; qi++) {
      uint64_t rank = tlc__hist_rank(n, num[qi], 1000), cum = 0, blo, bhi;
      int64_t rep;
      for (i = lo; i < hi && cum < rank; i++)
        cum += cnt[i];
      tlc__hist_bounds(i - 1, &blo, &bhi);
      rep = (int64_t)(blo + (bhi - blo) / 2);
      rep = rep < mn ? mn : rep > mx ? mx : rep;
      assert_int_equal(q[qi], rep);
    }
    for (j = 0; j < nh; j++)
      tlc__hist_fini(&hs[j]);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_buckets),     cmocka_unit_test(test_rank),
    cmocka_unit_test(test_small_exact), cmocka_unit_test(test_random_within_1pct),
    cmocka_unit_test(test_merge),       cmocka_unit_test(test_alloc_failure),
    cmocka_unit_test(test_inline_mix),  cmocka_unit_test(test_carry),
    cmocka_unit_test(test_carry_many),  cmocka_unit_test(test_walk_brute),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
