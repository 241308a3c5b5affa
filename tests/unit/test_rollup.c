/* test_rollup.c - rollup cells (formats/rollup.c): the merge of any range of minutes equals the
 * statistics of all the samples that closed in it, computed here from the samples themselves
 * (count, sum, MIN/MAX and their times, the exact sum of squares in 128 bits), and its quantiles
 * are the engine histogram's of the same samples and within 1% of the exact nearest rank; every
 * block survives encode/decode (merged after the round trip), and a decoder refuses every
 * truncation and every flipped byte without crashing; violations counts survive and merge, and
 * version-1 blocks still read.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "base/alloc.h"
#include "base/err.h"
#include "engine/hist.h"
#include "formats/rollup.h"
#include "formats/stats.h"
#include "rng.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define NMIN  12
#define NKEYS 5
#define NS    6000

typedef struct sample {
  int key;
  uint8_t kind;
  int64_t v, t;
} sample_t;

static const tlc_rollup_key_t keys[NKEYS] = { { 1, 0, 0, TLC_NET, TLC_ROW_CODE },
                                              { 1, 0, 0, TLC_GROSS, TLC_ROW_CODE },
                                              { 1, 1, 0, TLC_NET, TLC_ROW_CODE },
                                              { 7, TLC_CTX_NONE, 3, TLC_NET, TLC_ROW_STATE },
                                              { 9, 2, 0, TLC_PERIOD, TLC_ROW_CODE } };

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? -1 : x > y;
}

/* The representative the engine reports for a bucket, clamped to [min, max] (hist.h). */
static int64_t rep(int32_t bucket, int64_t min, int64_t max) {
  uint64_t lo, hi;
  int64_t r;
  tlc__hist_bounds((uint32_t)bucket, &lo, &hi);
  r = (int64_t)(lo + (hi - lo) / 2);
  return r < min ? min : r > max ? max : r;
}

static sample_t *make_samples(rng_t *r, int64_t t0) {
  sample_t *s = calloc(NS, sizeof(*s));
  assert_non_null(s);
  for (int i = 0; i < NS; i++) {
    s[i].key = (int)rng_below(r, NKEYS);
    s[i].kind = keys[s[i].key].kind;
    /* values from 0 to ~10^9 on a log scale, with repeats (ties of MIN/MAX) */
    s[i].v = rng_chance(r, 1, 20) ? 1000 : (int64_t)rng_below(r, 1ull << rng_below(r, 31));
    s[i].t = t0 + (int64_t)rng_below(r, (uint64_t)NMIN * TLC_ROLLUP_MINUTE_NS);
  }
  return s;
}

/* One block per minute, built sample by sample as the daemon does, then encoded and decoded. */
static void build_minutes(const sample_t *s, int64_t m0, tlc_rollup_blk_t *blk) {
  for (int m = 0; m < NMIN; m++) {
    tlc_rollup_blk_init(&blk[m]);
    blk[m].minute = m0 + m;
    blk[m].epoch = 2;
  }
  for (int i = 0; i < NS; i++) {
    int m = (int)(tlc_rollup_minute(s[i].t) - m0);
    tlc_rollup_cell_t *c = tlc_rollup_cell_get(&blk[m], &keys[s[i].key]);
    assert_non_null(c);
    assert_int_equal(tlc_rollup_cell_add(c, s[i].v, s[i].t, tlc__hist_idx(s[i].v)), 0);
    if (blk[m].wall_first == 0 || i < blk[m].wall_first)
      blk[m].wall_first = 1000 + i;
    blk[m].wall_last = 1000 + i;
  }
  for (int m = 0; m < NMIN; m++) {
    tlc_ckw_t w;
    tlc_rollup_blk_t back;
    size_t used;
    char err[160];
    tlc_ckw_init(&w, 1u << 26);
    tlc_rollup_encode(&blk[m], &w);
    assert_int_equal(w.err, 0);
    tlc_rollup_blk_init(&back);
    assert_int_equal(tlc_rollup_decode(&back, w.p, w.len, &used, err, sizeof err), 0);
    assert_int_equal(used, w.len);
    assert_int_equal(back.n, blk[m].n);
    assert_int_equal(back.minute, blk[m].minute);
    tlc_ckw_fini(&w);
    tlc_rollup_blk_fini(&blk[m]);
    blk[m] = back;
  }
}

/* Merges minutes [a, b] and checks every key against the samples that closed in them. */
static void check_range(const sample_t *s, const tlc_rollup_blk_t *blk, int64_t m0, int a, int b) {
  tlc_rollup_blk_t sum;
  int64_t *vals = malloc(NS * sizeof(*vals));
  assert_non_null(vals);
  tlc_rollup_blk_init(&sum);
  for (int m = a; m <= b; m++)
    assert_int_equal(tlc_rollup_blk_merge(&sum, &blk[m]), 0);
  for (int k = 0; k < NKEYS; k++) {
    size_t n = 0;
    int64_t tot = 0, mn = 0, mx = 0, tmn = 0, tmx = 0;
    unsigned __int128 sq = 0;
    tlc_hist_t h;
    const tlc_hist_t *hp = &h;
    int64_t q[TLC_NQUANT];
    const tlc_rollup_cell_t *c = tlc_rollup_cell_find(&sum, &keys[k]);
    memset(&h, 0, sizeof h);
    for (int i = 0; i < NS; i++) {
      int64_t m = tlc_rollup_minute(s[i].t) - m0;
      if (s[i].key != k || m < a || m > b)
        continue;
      /* MIN/MAX times: the earliest closing time among equal values */
      if (n == 0 || s[i].v < mn || (s[i].v == mn && s[i].t < tmn)) {
        mn = s[i].v;
        tmn = s[i].t;
      }
      if (n == 0 || s[i].v > mx || (s[i].v == mx && s[i].t < tmx)) {
        mx = s[i].v;
        tmx = s[i].t;
      }
      tot += s[i].v;
      sq += (unsigned __int128)((__int128)s[i].v * s[i].v);
      vals[n++] = s[i].v;
      assert_int_equal(tlc__hist_add(&h, s[i].v), 0);
    }
    if (n == 0) {
      assert_null(c);
      tlc__hist_fini(&h);
      continue;
    }
    assert_non_null(c);
    assert_int_equal(c->d.n, n);
    assert_int_equal(c->d.sum, tot);
    assert_int_equal(c->d.min, mn);
    assert_int_equal(c->d.max, mx);
    assert_int_equal(c->tmin, tmn);
    assert_int_equal(c->tmax, tmx);
    assert_int_equal(c->d.sumsq_hi, (uint64_t)(sq >> 64));
    assert_int_equal(c->d.sumsq_lo, (uint64_t)sq);
    assert_int_equal(c->key.row_kind, keys[k].row_kind);
    /* quantiles: the engine's over the same samples, and within 1% of the exact rank */
    qsort(vals, n, sizeof(*vals), cmp_i64);
    assert_int_equal(tlc__hist_quantiles(&hp, 1, n, mn, mx, q), 1);
    for (int j = 0; j < TLC_NQUANT; j++) {
      static const uint64_t num[TLC_NQUANT] = { 500, 900, 990, 999 };
      int64_t got = rep(tlc_rollup_rank(c, num[j], 1000), mn, mx);
      size_t rank = (size_t)((n * num[j] + 999) / 1000);
      int64_t exact = vals[(rank ? rank : 1) - 1];
      assert_int_equal(got, q[j]);
      assert_true(fabs((double)got - (double)exact) <= 0.01 * (double)exact);
    }
    tlc__hist_fini(&h);
  }
  tlc_rollup_blk_fini(&sum);
  free(vals);
}

static void test_merge_any_range(void **state) {
  rng_t r;
  tlc_rollup_blk_t blk[NMIN];
  /* target time around -3 minutes: minutes on both sides of 0 (floor division) */
  int64_t t0 = -3 * TLC_ROLLUP_MINUTE_NS;
  sample_t *s;
  (void)state;
  rng_seed(&r, 37);
  s = make_samples(&r, t0);
  build_minutes(s, -3, blk);
  for (int a = 0; a < NMIN; a++)
    for (int b = a; b < NMIN; b++)
      check_range(s, blk, -3, a, b);
  for (int m = 0; m < NMIN; m++)
    tlc_rollup_blk_fini(&blk[m]);
  free(s);
}

/* A merge in another order (hours of minutes, then the hours) gives the same cells. */
static void test_merge_order(void **state) {
  rng_t r;
  tlc_rollup_blk_t blk[NMIN], fwd, back, h1, h2;
  sample_t *s;
  (void)state;
  rng_seed(&r, 99);
  s = make_samples(&r, 0);
  build_minutes(s, 0, blk);
  tlc_rollup_blk_init(&fwd);
  tlc_rollup_blk_init(&back);
  tlc_rollup_blk_init(&h1);
  tlc_rollup_blk_init(&h2);
  for (int m = 0; m < NMIN; m++) {
    assert_int_equal(tlc_rollup_blk_merge(&fwd, &blk[m]), 0);
    assert_int_equal(tlc_rollup_blk_merge(&back, &blk[NMIN - 1 - m]), 0);
    assert_int_equal(tlc_rollup_blk_merge(m < NMIN / 2 ? &h1 : &h2, &blk[m]), 0);
  }
  assert_int_equal(tlc_rollup_blk_merge(&h2, &h1), 0);
  assert_int_equal(fwd.n, back.n);
  assert_int_equal(fwd.n, h2.n);
  for (size_t i = 0; i < fwd.n; i++) {
    const tlc_rollup_cell_t *a = &fwd.cells[i], *b = &back.cells[i], *c = &h2.cells[i];
    assert_int_equal(a->d.n, b->d.n);
    assert_int_equal(a->d.n, c->d.n);
    assert_int_equal(a->tmin, b->tmin);
    assert_int_equal(a->tmax, c->tmax);
    assert_int_equal(a->nbins, b->nbins);
    assert_int_equal(a->nbins, c->nbins);
    assert_memory_equal(a->bins, b->bins, a->nbins * sizeof(a->bins[0]));
    assert_memory_equal(a->bins, c->bins, a->nbins * sizeof(a->bins[0]));
  }
  assert_true(fwd.wall_first >= 1000 && fwd.wall_last < 1000 + NS);
  tlc_rollup_blk_fini(&fwd);
  tlc_rollup_blk_fini(&back);
  tlc_rollup_blk_fini(&h1);
  tlc_rollup_blk_fini(&h2);
  for (int m = 0; m < NMIN; m++)
    tlc_rollup_blk_fini(&blk[m]);
  free(s);
}

static void test_hostile_bytes(void **state) {
  tlc_rollup_blk_t b, back;
  tlc_ckw_t w;
  char err[160];
  tlc_rollup_key_t k = { 3, 0, 0, TLC_NET, TLC_ROW_CODE };
  tlc_rollup_cell_t *c;
  (void)state;
  assert_int_equal(TLC_ROLLUP_NB, TLC_HIST_NB);
  tlc_rollup_blk_init(&b);
  tlc_rollup_blk_init(&back);
  c = tlc_rollup_cell_get(&b, &k);
  assert_non_null(c);
  for (int64_t v = 0; v < 3000; v += 7)
    assert_int_equal(tlc_rollup_cell_add(c, v, v, tlc__hist_idx(v)), 0);
  k.kind = TLC_GROSS;
  c = tlc_rollup_cell_get(&b, &k);
  assert_int_equal(tlc_rollup_cell_add(c, INT64_MAX, 5, tlc__hist_idx(INT64_MAX)), 0);
  tlc_ckw_init(&w, 1u << 20);
  tlc_rollup_encode(&b, &w);
  assert_int_equal(w.err, 0);
  /* every truncation is refused with a message */
  for (size_t n = 0; n < w.len; n++) {
    err[0] = '\0';
    assert_int_equal(tlc_rollup_decode(&back, w.p, n, NULL, err, sizeof err), TLC_EFRAME);
    assert_true(strstr(err, "rollup block") != NULL);
    assert_int_equal(back.n, 0);
  }
  /* every flipped byte is refused (the checksum, or a check before it) */
  for (size_t i = 0; i < w.len; i++) {
    w.p[i] ^= 0x41;
    assert_int_equal(tlc_rollup_decode(&back, w.p, w.len, NULL, err, sizeof err), TLC_EFRAME);
    w.p[i] ^= 0x41;
  }
  assert_int_equal(tlc_rollup_decode(&back, w.p, w.len, NULL, err, sizeof err), 0);
  assert_int_equal(back.n, 2);
  assert_int_equal(back.cells[1].d.max, INT64_MAX);
  tlc_ckw_fini(&w);
  tlc_rollup_blk_fini(&b);
  tlc_rollup_blk_fini(&back);
}

/* Version 2 cells count violations, a cell may hold violations only, merges add them; a
 * version-1 block (no violations field) still reads, with none. */
static void test_violations_and_version1(void **state) {
  tlc_rollup_blk_t b, back, sum;
  tlc_ckw_t w;
  char err[160];
  tlc_rollup_key_t k = { 3, 0, 0, TLC_NET, TLC_ROW_CODE };
  tlc_rollup_cell_t *c;
  unsigned char v1[256];
  size_t hdr = 4 + 2 + 2 + 8 + 8 + 4 + 4 + 8 + 8, cell = 4 + 4 + 8 + 1 + 1 + 2 + 4 + 8 * 8;
  uint64_t ck;
  (void)state;
  tlc_rollup_blk_init(&b);
  tlc_rollup_blk_init(&back);
  tlc_rollup_blk_init(&sum);
  c = tlc_rollup_cell_get(&b, &k);
  assert_int_equal(tlc_rollup_cell_add(c, 100, 5, tlc__hist_idx(100)), 0);
  c->violations = 2;
  k.kind = TLC_PERIOD; /* a violation in a minute without a PERIOD sample */
  c = tlc_rollup_cell_get(&b, &k);
  c->violations = 1;
  tlc_ckw_init(&w, 1u << 16);
  tlc_rollup_encode(&b, &w);
  assert_int_equal(w.err, 0);
  assert_int_equal(tlc_rollup_decode(&back, w.p, w.len, NULL, err, sizeof err), 0);
  assert_int_equal(back.n, 2);
  assert_int_equal(back.cells[0].violations, 2);
  assert_int_equal(back.cells[0].d.n, 1);
  assert_int_equal(back.cells[1].violations, 1);
  assert_int_equal(back.cells[1].d.n, 0);
  assert_int_equal(tlc_rollup_blk_merge(&sum, &back), 0);
  assert_int_equal(tlc_rollup_blk_merge(&sum, &back), 0);
  assert_int_equal(sum.cells[0].violations, 4);
  assert_int_equal(sum.cells[0].d.n, 2);
  assert_int_equal(sum.cells[1].violations, 2);
  /* a cell with neither samples nor violations is refused */
  back.cells[1].violations = 0;
  w.len = 0;
  tlc_rollup_encode(&back, &w);
  assert_int_equal(tlc_rollup_decode(&sum, w.p, w.len, NULL, err, sizeof err), TLC_EFRAME);
  /* version 1: the first cell alone, without its violations field */
  back.n = 1;
  w.len = 0;
  tlc_rollup_encode(&back, &w);
  assert_int_equal(w.err, 0);
  assert_true(w.len <= sizeof v1);
  memcpy(v1, w.p, hdr + cell); /* header and the cell up to sumsq_lo */
  memcpy(v1 + hdr + cell, w.p + hdr + cell + 8, w.len - hdr - cell - 8 - 8); /* its bins */
  v1[4] = 1;
  v1[5] = 0;
  ck = tlc_ck_fnv(v1, w.len - 16);
  memcpy(v1 + w.len - 16, &ck, 8);
  assert_int_equal(tlc_rollup_decode(&sum, v1, w.len - 8, NULL, err, sizeof err), 0);
  assert_int_equal(sum.n, 1);
  assert_int_equal(sum.cells[0].d.n, 1);
  assert_int_equal(sum.cells[0].d.max, 100);
  assert_int_equal(sum.cells[0].violations, 0);
  back.n = 2;
  tlc_ckw_fini(&w);
  tlc_rollup_blk_fini(&b);
  tlc_rollup_blk_fini(&back);
  tlc_rollup_blk_fini(&sum);
}

static void test_welch(void **state) {
  tlc_dist_t a, b;
  (void)state;
  memset(&a, 0, sizeof a);
  memset(&b, 0, sizeof b);
  /* a: 1..10 (mean 5.5, sample variance 9.1667), b: 11..20: t = 10 / sqrt(2 * 9.1667 / 10) */
  for (int i = 1; i <= 10; i++) {
    tlc_dist_add(&a, i);
    tlc_dist_add(&b, i + 10);
  }
  assert_true(fabs(tlc_rollup_welch(&a, &b) - 10.0 / sqrt(2 * (82.5 / 9) / 10)) < 1e-9);
  assert_true(fabs(tlc_rollup_welch(&b, &a) + 10.0 / sqrt(2 * (82.5 / 9) / 10)) < 1e-9);
  assert_true(tlc_rollup_welch(&a, &a) == 0.0);
  memset(&b, 0, sizeof b);
  tlc_dist_add(&b, 4);
  assert_true(tlc_rollup_welch(&a, &b) == 0.0); /* one sample: no variance */
  tlc_dist_add(&b, 4);
  memset(&a, 0, sizeof a);
  tlc_dist_add(&a, 2);
  tlc_dist_add(&a, 2);
  assert_true(isinf(tlc_rollup_welch(&a, &b)) && tlc_rollup_welch(&a, &b) > 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_merge_any_range),         cmocka_unit_test(test_merge_order),
    cmocka_unit_test(test_hostile_bytes),           cmocka_unit_test(test_welch),
    cmocka_unit_test(test_violations_and_version1),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
