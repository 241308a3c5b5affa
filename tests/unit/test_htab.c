/* test_htab.c - the open-addressing hash table (base/htab.h): inserts, replacement, deletion by
 * backward shift (checked against a plain array over random operations on a small key space,
 * so that runs collide, wrap and shift), keys stored by hash (tlc_htab_add, get_next), the
 * entry cap, reserve, and allocation failures (the table unchanged, nothing leaked). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "base/err.h"
#include "base/htab.h"
#include "rng.h"
#include "testalloc.h"

#include <string.h>

static void test_put_get_replace_del(void **state) {
  tlc_htab_t h;
  (void)state;
  tlc_htab_init(&h, 0);
  assert_null(tlc_htab_get(&h, 0));
  assert_int_equal(tlc_htab_del(&h, 0), 0);
  assert_int_equal(tlc_htab_put(&h, 0, 7), 0); /* 0 is a key like any other */
  assert_int_equal(tlc_htab_put(&h, UINT64_MAX, 8), 0);
  assert_int_equal(tlc_htab_put(&h, 42, 0), 0);
  assert_int_equal(h.n, 3);
  assert_int_equal(*tlc_htab_get(&h, 0), 7);
  assert_int_equal(*tlc_htab_get(&h, UINT64_MAX), 8);
  assert_int_equal(*tlc_htab_get(&h, 42), 0);
  assert_int_equal(tlc_htab_put(&h, 42, 9), 0); /* replaced, not added */
  assert_int_equal(h.n, 3);
  assert_int_equal(*tlc_htab_get(&h, 42), 9);
  *tlc_htab_get(&h, 42) = 10; /* written through the pointer */
  assert_int_equal(*tlc_htab_get(&h, 42), 10);
  assert_int_equal(tlc_htab_del(&h, 0), 1);
  assert_null(tlc_htab_get(&h, 0));
  assert_int_equal(h.n, 2);
  assert_int_equal(tlc_htab_bytes(&h), h.cap * 16);
  tlc_htab_clear(&h);
  assert_int_equal(h.n, 0);
  assert_null(tlc_htab_get(&h, 42));
  tlc_htab_fini(&h);
  assert_int_equal(h.cap, 0);
}

/* Every operation mirrored in an array indexed by key; after each one, every key of the space
 * is looked up, and the load stays at most 1/2. */
static void test_random_against_array(void **state) {
  enum { KEYS = 700, OPS = 60000 };
  static uint64_t model[KEYS]; /* value + 1, 0 absent */
  tlc_htab_t h;
  rng_t r;
  size_t live = 0;
  (void)state;
  memset(model, 0, sizeof(model));
  rng_seed(&r, 0x5eed);
  tlc_htab_init(&h, 0);
  for (unsigned op = 0; op < OPS; op++) {
    uint64_t k = rng_below(&r, KEYS), v = rng_next(&r) >> 1;
    /* keys far apart in value: the mixer has to spread them */
    uint64_t key = k * 0x100000000ull + (k & 3);
    if (rng_chance(&r, live > KEYS / 2 ? 3 : 1, 4)) {
      assert_int_equal(tlc_htab_del(&h, key), model[k] != 0);
      live -= model[k] != 0;
      model[k] = 0;
    } else {
      assert_int_equal(tlc_htab_put(&h, key, v), 0);
      live += model[k] == 0;
      model[k] = v + 1;
    }
    assert_int_equal(h.n, live);
    assert_true(h.n * 2 <= h.cap);
    if (op % 97 == 0 || op > OPS - 50)
      for (k = 0; k < KEYS; k++) {
        uint64_t *p = tlc_htab_get(&h, k * 0x100000000ull + (k & 3));
        if (model[k] == 0)
          assert_null(p);
        else
          assert_int_equal(*p, model[k] - 1);
      }
  }
  {
    size_t pos = 0, seen = 0;
    const tlc_htab_slot_t *s;
    while ((s = tlc_htab_next(&h, &pos)) != NULL) {
      uint64_t k = s->key >> 32;
      assert_true(k < KEYS);
      assert_int_equal(s->val, model[k] - 1);
      seen++;
    }
    assert_int_equal(seen, live);
  }
  tlc_htab_fini(&h);
}

/* Keys whose home is the table's last slot: their run wraps to slot 0, and deleting its first
 * entries shifts the wrapped ones back across the end. */
static void test_wrapping_run(void **state) {
  tlc_htab_t h;
  uint64_t keys[6];
  size_t nk = 0;
  (void)state;
  tlc_htab_init(&h, 0);
  assert_int_equal(tlc_htab_reserve(&h, 8), 0);
  assert_int_equal(h.cap, 16);
  for (uint64_t k = 0; nk < 6; k++)
    if ((tlc_mix64(k) & 15) == 15 || (nk >= 4 && (tlc_mix64(k) & 15) == 0))
      keys[nk++] = k;
  for (size_t i = 0; i < 6; i++)
    assert_int_equal(tlc_htab_put(&h, keys[i], i), 0);
  assert_int_equal(h.cap, 16); /* 6 entries: no growth, the run covers slots 15, 0..4 */
  assert_int_equal(tlc_htab_del(&h, keys[0]), 1);
  assert_int_equal(tlc_htab_del(&h, keys[1]), 1);
  for (size_t i = 2; i < 6; i++)
    assert_int_equal(*tlc_htab_get(&h, keys[i]), i);
  assert_int_equal(h.s[15].val, 2); /* keys[2] moved back into its home */
  for (size_t i = 2; i < 6; i++)
    assert_int_equal(tlc_htab_del(&h, keys[i]), 1);
  for (size_t i = 0; i < h.cap; i++)
    assert_int_equal(h.s[i].val, TLC_HTAB_EMPTY);
  tlc_htab_fini(&h);
}

/* Keys that are hashes: equal keys live side by side, found one after the other. */
static void test_equal_keys(void **state) {
  tlc_htab_t h;
  unsigned seen = 0;
  uint64_t *v;
  (void)state;
  tlc_htab_init(&h, 0);
  for (uint64_t i = 0; i < 3; i++)
    assert_int_equal(tlc_htab_add(&h, 77, i), 0);
  assert_int_equal(tlc_htab_add(&h, 78, 9), 0);
  for (v = tlc_htab_get(&h, 77); v != NULL; v = tlc_htab_get_next(&h, 77, v))
    seen |= 1u << *v;
  assert_int_equal(seen, 7);
  v = tlc_htab_get(&h, 77);
  while (v != NULL && *v != 1)
    v = tlc_htab_get_next(&h, 77, v);
  assert_non_null(v);
  tlc_htab_del_at(&h, v);
  seen = 0;
  for (v = tlc_htab_get(&h, 77); v != NULL; v = tlc_htab_get_next(&h, 77, v))
    seen |= 1u << *v;
  assert_int_equal(seen, 5);
  assert_int_equal(*tlc_htab_get(&h, 78), 9);
  assert_int_equal(h.n, 3);
  tlc_htab_fini(&h);
}

static void test_max_and_reserve(void **state) {
  tlc_htab_t h;
  uint64_t before;
  (void)state;
  testalloc_install();
  tlc_htab_init(&h, 100);
  assert_int_equal(tlc_htab_reserve(&h, 101), TLC_ELIMIT);
  assert_int_equal(h.cap, 0);
  assert_int_equal(tlc_htab_reserve(&h, 100), 0);
  assert_int_equal(h.cap, 256);
  before = testalloc_count();
  for (uint64_t k = 0; k < 100; k++)
    assert_int_equal(tlc_htab_put(&h, k, k), 0);
  assert_int_equal(testalloc_count(), before); /* reserved: no allocation */
  assert_int_equal(tlc_htab_put(&h, 100, 1), TLC_ELIMIT);
  assert_int_equal(tlc_htab_add(&h, 5, 1), TLC_ELIMIT);
  assert_int_equal(tlc_htab_put(&h, 5, 1), 0); /* a key there already is replaced */
  assert_int_equal(h.n, 100);
  assert_int_equal(tlc_htab_del(&h, 7), 1);
  assert_int_equal(tlc_htab_put(&h, 100, 1), 0);
  tlc_htab_fini(&h);
  assert_int_equal(testalloc_live_bytes(), 0);
  testalloc_uninstall();
}

/* Each allocation of a growing table failed in turn: the insert reports TLC_ENOMEM and the table
 * holds what it held, still usable; nothing leaks. */
static void test_alloc_failure(void **state) {
  (void)state;
  testalloc_install();
  for (uint64_t nth = 1; nth <= 6; nth++) {
    tlc_htab_t h;
    uint64_t k;
    int failed = 0;
    tlc_htab_init(&h, 0);
    testalloc_fail_at(nth);
    for (k = 0; k < 200; k++) {
      int rc = tlc_htab_put(&h, k, k * 3);
      if (rc != 0) {
        size_t cap = h.cap;
        assert_int_equal(rc, TLC_ENOMEM);
        assert_int_equal(h.n, k);
        assert_null(tlc_htab_get(&h, k));
        for (uint64_t j = 0; j < k; j++)
          assert_int_equal(*tlc_htab_get(&h, j), j * 3);
        assert_int_equal(h.cap, cap);
        failed = 1;
        assert_int_equal(tlc_htab_put(&h, k, k * 3), 0); /* the next try succeeds */
      }
    }
    assert_true(failed);
    for (k = 0; k < 200; k++)
      assert_int_equal(*tlc_htab_get(&h, k), k * 3);
    tlc_htab_fini(&h);
    assert_int_equal(testalloc_live_bytes(), 0);
  }
  testalloc_uninstall();
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_put_get_replace_del), cmocka_unit_test(test_random_against_array),
    cmocka_unit_test(test_wrapping_run),        cmocka_unit_test(test_equal_keys),
    cmocka_unit_test(test_max_and_reserve),     cmocka_unit_test(test_alloc_failure),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
