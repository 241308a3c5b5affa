/* test_engine_cursor.c - the snapshot cursor (engine/cursor.h) against a real engine:
 *
 *  - since-seq: after a completed pass, the next is a delta holding exactly the rows changed
 *    since it, its base the last pass's seq;
 *  - parts: a pass in parts of n rows covers every row once, no part above n rows, numbered
 *    0, 1, ... with `more` on all but the last, part 0 based on the pass's base and each later
 *    one on the previous part's seq;
 *  - full cadence: full at the start, after a failed pass and once full_every has passed since
 *    the last full pass completed; a pass left without tlc_cursor_end changes nothing;
 *  - generation: a new generation starts the cursor over (full), the same one does not.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "engine/cursor.h"
#include "engine/engine.h"
#include "formats/stats.h"

#include <stdlib.h>
#include <string.h>

#define DATA 0x20000000u

static tlc_engine_t *mk(void) {
  tlc_engine_opts_t o;
  tlc_engine_t *e;
  tlc_engine_opts_default(&o);
  assert_int_equal(tlc_engine_new(&e, TLC_FMT_BIN11, &o), 0);
  return e;
}

/* One write to each data area in handles[0..n). */
static void write_areas(tlc_engine_t *e, const uint32_t *handles, size_t n, int64_t *t) {
  tlc_event_t ev;
  size_t i;
  for (i = 0; i < n; i++) {
    memset(&ev, 0, sizeof(ev));
    ev.time_ns = ++*t;
    ev.handle = DATA + handles[i];
    ev.type = TLC_EV_WRITE;
    ev.data = (uint64_t)*t;
    tlc_engine_push(e, &ev, 1);
  }
}

/* A whole pass in parts of `rows`: counts the rows seen per handle into seen[handle - DATA],
 * checks the parts' numbering and bases. Returns the number of parts. */
static uint32_t pass(tlc_cursor_t *c, tlc_engine_t *e, size_t rows, int split, uint64_t now,
                     uint64_t full_every, int *seen, size_t nseen, int *full) {
  tlc_cursor_part_t p;
  tlc_snap_opts_t so;
  tlc_table_t t;
  uint64_t prev = 0, pass_base;
  uint32_t parts = 0;
  size_t k;
  int r;
  tlc_table_init(&t);
  *full = tlc_cursor_begin(c, now, full_every);
  pass_base = *full ? 0 : c->seq;
  while ((r = tlc_cursor_next(c, split ? tlc_cursor_engine_split : NULL, e, rows, &p)) == 1) {
    memset(&so, 0, sizeof(so));
    tlc_table_clear(&t);
    assert_int_equal(tlc_cursor_engine_take(e, &p, &t, &so), 0);
    assert_int_equal(p.no, parts);
    assert_int_equal(p.since, pass_base);
    assert_int_equal(p.full, *full);
    assert_int_equal(p.base, parts == 0 ? pass_base : prev);
    assert_int_equal(p.whole, !split);
    if (!split)
      assert_int_equal(p.hi, TLC_CURSOR_END);
    if (split)
      assert_true(t.nrows <= rows);
    for (k = 0; k < t.nrows; k++) {
      uint32_t h = t.rows[k].handle - DATA;
      assert_true(h < nseen);
      assert_true(t.rows[k].handle >= p.lo && t.rows[k].handle < p.hi);
      assert_true(t.rows[k].seq > p.since);
      seen[h]++;
    }
    tlc_cursor_took(c, t.seq);
    prev = t.seq;
    parts++;
    if (!p.more)
      assert_int_equal(p.hi, TLC_CURSOR_END);
  }
  assert_int_equal(r, 0);
  assert_int_equal(prev, tlc_engine_seq(e));
  tlc_table_fini(&t);
  return parts;
}

static void test_since_and_parts(void **state) {
  tlc_engine_t *e = mk();
  tlc_cursor_t c;
  uint32_t all[35], some[3] = { 4, 17, 30 };
  int seen[35], full;
  int64_t t = 0;
  size_t i;
  (void)state;
  for (i = 0; i < 35; i++)
    all[i] = (uint32_t)i;
  write_areas(e, all, 35, &t);
  tlc_cursor_init(&c);
  /* the first pass: full, in parts of 10 rows, every row once */
  memset(seen, 0, sizeof(seen));
  assert_int_equal(pass(&c, e, 10, 1, 0, TLC_CURSOR_NEVER, seen, 35, &full), 4);
  assert_true(full);
  for (i = 0; i < 35; i++)
    assert_int_equal(seen[i], 1);
  tlc_cursor_end(&c, 1, 0);
  assert_int_equal(c.seq, tlc_engine_seq(e));
  /* nothing changed: one empty delta part */
  memset(seen, 0, sizeof(seen));
  assert_int_equal(pass(&c, e, 10, 1, 1, TLC_CURSOR_NEVER, seen, 35, &full), 1);
  assert_false(full);
  for (i = 0; i < 35; i++)
    assert_int_equal(seen[i], 0);
  tlc_cursor_end(&c, 1, 1);
  /* three areas changed: the delta holds exactly them, in one part */
  write_areas(e, some, 3, &t);
  memset(seen, 0, sizeof(seen));
  assert_int_equal(pass(&c, e, 10, 1, 2, TLC_CURSOR_NEVER, seen, 35, &full), 1);
  assert_false(full);
  for (i = 0; i < 35; i++)
    assert_int_equal(seen[i], i == 4 || i == 17 || i == 30);
  tlc_cursor_end(&c, 1, 2);
  /* a delta larger than a part goes in parts too */
  write_areas(e, all, 35, &t);
  memset(seen, 0, sizeof(seen));
  assert_int_equal(pass(&c, e, 16, 1, 3, TLC_CURSOR_NEVER, seen, 35, &full), 3);
  assert_false(full);
  for (i = 0; i < 35; i++)
    assert_int_equal(seen[i], 1);
  tlc_cursor_end(&c, 1, 3);
  /* without a split: one whole part */
  write_areas(e, some, 1, &t);
  memset(seen, 0, sizeof(seen));
  assert_int_equal(pass(&c, e, 10, 0, 4, TLC_CURSOR_NEVER, seen, 35, &full), 1);
  assert_false(full);
  assert_int_equal(seen[4], 1);
  assert_int_equal(seen[17], 0);
  tlc_cursor_end(&c, 1, 4);
  tlc_engine_free(e);
}

static void test_full_cadence(void **state) {
  tlc_engine_t *e = mk();
  tlc_cursor_t c;
  uint32_t one[1] = { 2 };
  int seen[8], full;
  int64_t t = 0;
  (void)state;
  write_areas(e, one, 1, &t);
  tlc_cursor_init(&c);
  assert_int_equal(tlc_cursor_begin(&c, 1000, 100), 1); /* nothing completed: full */
  tlc_cursor_end(&c, 1, 1000);
  assert_int_equal(tlc_cursor_begin(&c, 1050, 100), 0);
  tlc_cursor_end(&c, 1, 1050);
  assert_int_equal(tlc_cursor_begin(&c, 1099, 100), 0);
  tlc_cursor_end(&c, 1, 1099);
  assert_int_equal(tlc_cursor_begin(&c, 1100, 100), 1); /* full_every since the last full */
  /* a full pass left without tlc_cursor_end changes nothing: the next is full again */
  assert_int_equal(tlc_cursor_begin(&c, 1101, 100), 1);
  tlc_cursor_end(&c, 1, 1101);
  assert_int_equal(tlc_cursor_begin(&c, 1150, 100), 0);
  /* asked for: the next is full */
  tlc_cursor_want_full(&c);
  assert_int_equal(tlc_cursor_begin(&c, 1150, 100), 1);
  tlc_cursor_end(&c, 1, 1100);
  assert_int_equal(tlc_cursor_begin(&c, 1150, 100), 0);
  /* a failed pass: the next is full whatever the time */
  tlc_cursor_end(&c, 0, 1150);
  assert_int_equal(tlc_cursor_begin(&c, 1151, 100), 1);
  tlc_cursor_end(&c, 1, 1151);
  /* TLC_CURSOR_NEVER: never full again once a pass completed; 0: always full */
  assert_int_equal(tlc_cursor_begin(&c, 1000000, TLC_CURSOR_NEVER), 0);
  tlc_cursor_end(&c, 1, 1000000);
  assert_int_equal(tlc_cursor_begin(&c, 1000000, 0), 1);
  tlc_cursor_end(&c, 1, 1000000);
  /* a clock that went back: full */
  assert_int_equal(tlc_cursor_begin(&c, 999999, 100), 1);
  tlc_cursor_end(&c, 1, 999999);
  /* the delta of a pass after a failure is from 0: every row */
  tlc_cursor_end(&c, 0, 0);
  memset(seen, 0, sizeof(seen));
  assert_int_equal(pass(&c, e, 4, 1, 5, TLC_CURSOR_NEVER, seen, 8, &full), 1);
  assert_true(full);
  assert_int_equal(seen[2], 1);
  tlc_engine_free(e);
}

static void test_generation(void **state) {
  tlc_engine_t *a = mk(), *b = mk();
  tlc_cursor_t c;
  uint32_t ha[2] = { 1, 2 }, hb[5] = { 0, 1, 2, 3, 4 };
  int seen[8], full;
  int64_t t = 0;
  (void)state;
  write_areas(a, ha, 2, &t);
  write_areas(a, ha, 2, &t);
  write_areas(a, ha, 2, &t);
  tlc_cursor_init(&c);
  assert_int_equal(tlc_cursor_renew(&c, 7), 1);
  memset(seen, 0, sizeof(seen));
  pass(&c, a, 4, 1, 0, TLC_CURSOR_NEVER, seen, 8, &full);
  assert_true(full);
  tlc_cursor_end(&c, 1, 0);
  assert_int_equal(tlc_cursor_renew(&c, 7), 0); /* the same source: a delta next */
  assert_int_equal(tlc_cursor_begin(&c, 1, TLC_CURSOR_NEVER), 0);
  /* another engine took the place (seq lower than the last one sent): full, every row */
  write_areas(b, hb, 5, &t);
  assert_int_equal(tlc_cursor_renew(&c, 8), 1);
  memset(seen, 0, sizeof(seen));
  assert_true(pass(&c, b, 2, 1, 2, TLC_CURSOR_NEVER, seen, 8, &full) >= 3);
  assert_true(full);
  for (int i = 0; i < 5; i++)
    assert_int_equal(seen[i], 1);
  tlc_cursor_end(&c, 1, 2);
  assert_int_equal(c.gen, 8);
  tlc_engine_free(a);
  tlc_engine_free(b);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_since_and_parts),
    cmocka_unit_test(test_full_cadence),
    cmocka_unit_test(test_generation),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
