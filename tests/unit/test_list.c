/* test_list.c - the *_FOREACH_SAFE loops of base/list.h: every element visited once, in list
 * order, while the body removes and frees the element it is on (the loop must not read it again),
 * for each of the four list kinds. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "base/list.h"

#include <stdlib.h>
#include <string.h>

#define N 5

typedef struct item {
  int v;
  SLIST_ENTRY(item) s;
  LIST_ENTRY(item) l;
  STAILQ_ENTRY(item) q;
  TAILQ_ENTRY(item) t;
} item_t;

static item_t *item(int v) {
  item_t *it = calloc(1, sizeof *it);
  assert_non_null(it);
  it->v = v;
  return it;
}

/* Frees a removed element with every byte overwritten, so a loop that reads its link again
 * (under ASan, reads freed memory) follows garbage instead of the next element. */
static void drop(item_t *it) {
  memset(it, 0xA5, sizeof *it);
  free(it);
}

static void test_slist(void **state) {
  SLIST_HEAD(, item) h = SLIST_HEAD_INITIALIZER(h);
  item_t *it, *tmp;
  int seen = 0;
  (void)state;
  for (int i = N - 1; i >= 0; i--) {
    it = item(i);
    SLIST_INSERT_HEAD(&h, it, s);
  }
  SLIST_FOREACH_SAFE(it, &h, s, tmp) {
    assert_int_equal(it->v, seen++);
    SLIST_REMOVE_HEAD(&h, s);
    drop(it);
  }
  assert_int_equal(seen, N);
  assert_true(SLIST_EMPTY(&h));
}

static void test_list(void **state) {
  LIST_HEAD(, item) h = LIST_HEAD_INITIALIZER(h);
  item_t *it, *tmp;
  int seen = 0;
  (void)state;
  for (int i = N - 1; i >= 0; i--) {
    it = item(i);
    LIST_INSERT_HEAD(&h, it, l);
  }
  LIST_FOREACH_SAFE(it, &h, l, tmp) {
    assert_int_equal(it->v, seen++);
    if (it->v % 2 == 0) { /* removal from the middle, the ends and the head */
      LIST_REMOVE(it, l);
      drop(it);
    }
  }
  assert_int_equal(seen, N);
  seen = 0;
  LIST_FOREACH(it, &h, l) assert_int_equal(it->v, 2 * seen++ + 1);
  assert_int_equal(seen, N / 2);
  LIST_FOREACH_SAFE(it, &h, l, tmp) {
    LIST_REMOVE(it, l);
    drop(it);
  }
  assert_true(LIST_EMPTY(&h));
}

static void test_stailq(void **state) {
  STAILQ_HEAD(, item) h = STAILQ_HEAD_INITIALIZER(h);
  item_t *it, *tmp;
  int seen = 0;
  (void)state;
  for (int i = 0; i < N; i++) {
    it = item(i);
    STAILQ_INSERT_TAIL(&h, it, q);
  }
  STAILQ_FOREACH_SAFE(it, &h, q, tmp) {
    assert_int_equal(it->v, seen++);
    STAILQ_REMOVE_HEAD(&h, q);
    drop(it);
  }
  assert_int_equal(seen, N);
  assert_true(STAILQ_EMPTY(&h));
}

static void test_tailq(void **state) {
  TAILQ_HEAD(, item) h = TAILQ_HEAD_INITIALIZER(h);
  item_t *it, *tmp;
  int seen = 0;
  (void)state;
  for (int i = 0; i < N; i++) {
    it = item(i);
    TAILQ_INSERT_TAIL(&h, it, t);
  }
  TAILQ_FOREACH_SAFE(it, &h, t, tmp) {
    assert_int_equal(it->v, seen++);
    TAILQ_REMOVE(&h, it, t);
    drop(it);
  }
  assert_int_equal(seen, N);
  assert_true(TAILQ_EMPTY(&h));
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_slist),
    cmocka_unit_test(test_list),
    cmocka_unit_test(test_stailq),
    cmocka_unit_test(test_tailq),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
