/* test_xref.c - an extreme's REF (formats/xref.c): its spelling, the area by name or handle,
 * the context by name, id or state, and each way of not finding the sample, over a table built
 * here by hand (the values and times below are this file's, not the code's). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "base/err.h"
#include "formats/xref.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>

static void test_parse(void **state) {
  tlc_xref_t x;
  char err[400];
  (void)state;
  assert_int_equal(tlc_xref_parse("max:net:worker", &x, err, sizeof(err)), 1);
  assert_int_equal(x.max, 1);
  assert_int_equal(x.kind, TLC_NET);
  assert_string_equal(x.area, "worker");
  assert_int_equal(x.has_context, 0);
  assert_int_equal(tlc_xref_parse("min:Outside:ns::f@a@task1A", &x, err, sizeof(err)), 1);
  assert_int_equal(x.max, 0);
  assert_int_equal(x.kind, TLC_OUTSIDE);
  assert_string_equal(x.area, "ns::f@a"); /* the last @ starts the context */
  assert_string_equal(x.context, "task1A");
  assert_int_equal(tlc_xref_parse("max:period:0x20000000", &x, err, sizeof(err)), 1);
  assert_int_equal(x.kind, TLC_PERIOD);
  /* other spellings are not extremes */
  assert_int_equal(tlc_xref_parse("v:b:1", &x, err, sizeof(err)), 0);
  assert_int_equal(tlc_xref_parse("ns:5", &x, err, sizeof(err)), 0);
  assert_int_equal(tlc_xref_parse("maximum", &x, err, sizeof(err)), 0);
  static const char *const bad[] = { "max:",       "max:net",    "max:net:",     "max:rate:w",
                                     "min:net:@c", "max:net:w@", "max:net:a\tb", "max:gros:w" };
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    assert_int_equal(tlc_xref_parse(bad[i], &x, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "not an extreme's REF"));
  }
  char big[400];
  memset(big, 'a', sizeof(big));
  memcpy(big, "max:net:", 8);
  big[8 + 256] = '\0'; /* an area of 256 bytes: one over */
  assert_int_equal(tlc_xref_parse(big, &x, err, sizeof(err)), -1);
  big[8 + 255] = '\0';
  assert_int_equal(tlc_xref_parse(big, &x, err, sizeof(err)), 1);
}

static void add_area(tlc_mapping_t *m, uint32_t h, const char *name) {
  tlc_map_area_t a;
  memset(&a, 0, sizeof(a));
  a.handle = h;
  a.parent = a.state_handle = 0xFFFFFFFFu;
  a.name = (char *)name;
  assert_int_equal(tlc_mapping_add(m, &a), 0);
}

static void test_handle(void **state) {
  tlc_mapping_t m;
  tlc_xref_t x;
  uint32_t h;
  char err[400];
  (void)state;
  tlc_mapping_init(&m);
  add_area(&m, 0x2, "worker");
  add_area(&m, 0x10, "helper");
  add_area(&m, 0x11, "helper"); /* two static functions of one name */
  tlc_mapping_finish(&m);
  assert_int_equal(tlc_xref_parse("max:net:worker", &x, err, sizeof(err)), 1);
  assert_int_equal(tlc_xref_handle(&x, &m, &h, err, sizeof(err)), 0);
  assert_int_equal(h, 2);
  /* handles: 0x and hex, 8 hex digits, decimal */
  static const struct {
    const char *ref;
    uint32_t h;
  } nums[] = { { "max:net:0x1F", 0x1F },
               { "max:net:0000001F", 0x1F },
               { "max:net:31", 31 },
               { "max:net:10000000", 0x10000000 },
               { "max:net:4294967295", 0xFFFFFFFFu } };
  for (size_t i = 0; i < sizeof(nums) / sizeof(nums[0]); i++) {
    assert_int_equal(tlc_xref_parse(nums[i].ref, &x, err, sizeof(err)), 1);
    assert_int_equal(tlc_xref_handle(&x, &m, &h, err, sizeof(err)), 0);
    assert_int_equal(h, nums[i].h);
  }
  assert_int_equal(tlc_xref_parse("max:net:4294967296", &x, err, sizeof(err)), 1);
  assert_int_equal(tlc_xref_handle(&x, &m, &h, err, sizeof(err)), -ENOENT);
  assert_int_equal(tlc_xref_parse("max:net:nosuch", &x, err, sizeof(err)), 1);
  assert_int_equal(tlc_xref_handle(&x, &m, &h, err, sizeof(err)), -ENOENT);
  assert_non_null(strstr(err, "max:net:nosuch: no area named nosuch"));
  assert_int_equal(tlc_xref_handle(&x, NULL, &h, err, sizeof(err)), -ENOENT);
  assert_int_equal(tlc_xref_parse("max:net:helper", &x, err, sizeof(err)), 1);
  assert_int_equal(tlc_xref_handle(&x, &m, &h, err, sizeof(err)), TLC_EINVAL);
  assert_non_null(strstr(err, "helper names 2 areas: name one by its handle: 0x00000010, "
                              "0x00000011"));
  tlc_mapping_fini(&m);
}

static tlc_at_t at_of(int64_t start, int64_t end, uint32_t epoch) {
  tlc_at_t a;
  memset(&a, 0, sizeof(a));
  a.start = start;
  a.end = end;
  a.epoch = epoch;
  a.known = 1;
  return a;
}

/* A table: worker (2) on core0 and task 0x1A (named idle_task), a data area, a state area
 * with two states, and an area whose extremes' times are not known. */
static void make_table(tlc_table_t *t, tlc_mapping_t *m) {
  tlc_ctx_t c;
  tlc_stat_t *r;
  tlc_table_init(t);
  tlc_mapping_init(m);
  memset(&c, 0, sizeof(c));
  c.kind = TLC_CTXK_CORE;
  c.core = 0;
  assert_int_equal(tlc_table_add_ctx(t, &c), 0);
  c.kind = TLC_CTXK_TASK;
  c.key = 0x1A;
  assert_int_equal(tlc_table_add_ctx(t, &c), 1);
  add_area(m, 0x2, "worker");
  add_area(m, 0x7, "old");
  assert_int_equal(tlc_mapping_add_ctx(m, 0x1A, "idle_task"), 0);
  tlc_mapping_finish(m);
  /* worker core0: NET max 250 (2000..2450 e1), min 200 (1000..1200 e1) */
  r = tlc_table_add(t);
  r->handle = 2;
  r->context = 0;
  r->dist[TLC_NET].n = 3;
  r->dist[TLC_NET].max = 250;
  r->dist[TLC_NET].max_at = at_of(2000, 2450, 1);
  r->dist[TLC_NET].min = 200;
  r->dist[TLC_NET].min_at = at_of(1000, 1200, 1);
  /* worker task 0x1A: NET max 300 (1500..1800 e0) */
  r = tlc_table_add(t);
  r->handle = 2;
  r->context = 1;
  r->dist[TLC_NET].n = 1;
  r->dist[TLC_NET].max = r->dist[TLC_NET].min = 300;
  r->dist[TLC_NET].max_at = r->dist[TLC_NET].min_at = at_of(1500, 1800, 0);
  /* Neutral row: ignored */
  r = tlc_table_add(t);
  r->handle = 2;
  r->context = TLC_CTX_NEUTRAL;
  r->dist[TLC_NET].n = 4;
  r->dist[TLC_NET].max = 300;
  r->dist[TLC_NET].max_at = at_of(1500, 1800, 0);
  /* old (7) core0: a MAX CALL without its time */
  r = tlc_table_add(t);
  r->handle = 7;
  r->context = 0;
  r->dist[TLC_CALL].n = 5;
  r->dist[TLC_CALL].max = 900;
  /* a data area: PERIOD max 100 (200..300) */
  r = tlc_table_add(t);
  r->handle = 0x20000000;
  r->context = TLC_CTX_NONE;
  r->kind = TLC_ROW_DATA;
  r->dist[TLC_PERIOD].n = 1;
  r->dist[TLC_PERIOD].max = 100;
  r->dist[TLC_PERIOD].max_at = at_of(200, 300, 0);
  /* a state area (0x30000001), states 1 and 2 */
  for (uint64_t s = 1; s <= 2; s++) {
    r = tlc_table_add(t);
    r->handle = 0x30000001;
    r->context = TLC_CTX_NONE;
    r->kind = TLC_ROW_STATE;
    r->state = s;
    r->dist[TLC_NET].n = 1;
    r->dist[TLC_NET].max = (int64_t)(10 * s);
    r->dist[TLC_NET].max_at = at_of((int64_t)(5000 * s), (int64_t)(5000 * s + 10 * s), 0);
  }
  tlc_table_sort(t);
}

/* 0 with the sample's start/end/epoch/value, or the error, for REF. */
static int find(const tlc_table_t *t, const tlc_mapping_t *m, const char *ref, tlc_at_t *at,
                int64_t *v, char *err, size_t errlen) {
  tlc_xref_t x;
  uint32_t h;
  int e;
  assert_int_equal(tlc_xref_parse(ref, &x, err, errlen), 1);
  if ((e = tlc_xref_handle(&x, m, &h, err, errlen)) < 0)
    return e;
  return tlc_xref_find(&x, t, m, h, at, v, err, errlen);
}

static void test_find(void **state) {
  tlc_table_t t;
  tlc_mapping_t m;
  tlc_at_t at;
  int64_t v;
  char err[600];
  (void)state;
  make_table(&t, &m);
  static const struct {
    const char *ref;
    int64_t start, end, value;
    uint32_t epoch;
  } ok[] = {
    { "max:net:worker@core0", 2000, 2450, 250, 1 },
    { "min:net:worker@core0", 1000, 1200, 200, 1 },
    { "max:net:worker@CORE0", 2000, 2450, 250, 1 },
    { "max:net:worker@0", 2000, 2450, 250, 1 },         /* the core's id */
    { "max:net:worker@idle_task", 1500, 1800, 300, 0 }, /* the task's CONTEXTS name */
    { "max:net:worker@task1A", 1500, 1800, 300, 0 },
    { "max:net:worker@0x1A", 1500, 1800, 300, 0 }, /* the task's value */
    { "max:net:worker@26", 1500, 1800, 300, 0 },
    { "max:period:0x20000000", 200, 300, 100, 0 },
    { "max:net:0x30000001@state=2", 10000, 10020, 20, 0 },
    { "max:net:0x30000001@state=0x1", 5000, 5010, 10, 0 },
  };
  for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
    assert_int_equal(find(&t, &m, ok[i].ref, &at, &v, err, sizeof(err)), 0);
    assert_int_equal(at.start, ok[i].start);
    assert_int_equal(at.end, ok[i].end);
    assert_int_equal(at.epoch, ok[i].epoch);
    assert_int_equal(v, ok[i].value);
  }
  static const struct {
    const char *ref;
    int e;
    const char *says;
  } bad[] = {
    { "max:net:worker", TLC_EINVAL,
      "max:net:worker: worker has samples in 2 contexts: name one (max:net:worker@NAME): "
      "core0, idle_task" },
    { "max:net:worker@core3", -ENOENT,
      "max:net:worker@core3: no context core3 in worker; its contexts: core0, idle_task" },
    { "max:gross:worker@core0", TLC_ERANGE, "no gross sample of worker in core0 yet" },
    { "max:call:old", TLC_ERANGE,
      "max:call:old: the time of old's MAX call in core0 (900 ns) is not known" },
    { "max:net:0x20000000", TLC_EINVAL, "0x20000000 is a data area: it has no net samples" },
    { "max:period:0x20000000@core0", -ENOENT, "is a data area: it has no contexts" },
    { "max:net:0x30000001", TLC_EINVAL, "has samples in 2 states: name one" },
    { "max:net:0x30000001@state=3", -ENOENT,
      "no context state=3 in 0x30000001; its states: state=1, state=2" },
    { "max:gross:0x30000001@state=1", TLC_EINVAL, "is a state area: it has no gross samples" },
    { "max:net:0x99", TLC_ERANGE, "no sample of 0x99 (0x00000099) yet" },
  };
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    err[0] = '\0';
    assert_int_equal(find(&t, &m, bad[i].ref, &at, &v, err, sizeof(err)), bad[i].e);
    if (strstr(err, bad[i].says) == NULL)
      fail_msg("%s: '%s' lacks '%s'", bad[i].ref, err, bad[i].says);
  }
  tlc_mapping_fini(&m);
  tlc_table_fini(&t);
}

/* An id two contexts answer to (core 26 and task 0x1A) is refused, naming them; a name picks
 * one. */
static void test_ambiguous_id(void **state) {
  tlc_table_t t;
  tlc_ctx_t c;
  tlc_at_t at;
  int64_t v;
  char err[600];
  (void)state;
  tlc_table_init(&t);
  memset(&c, 0, sizeof(c));
  c.kind = TLC_CTXK_CORE;
  c.core = 26;
  assert_int_equal(tlc_table_add_ctx(&t, &c), 0);
  c.kind = TLC_CTXK_TASK;
  c.key = 26;
  assert_int_equal(tlc_table_add_ctx(&t, &c), 1);
  for (uint32_t k = 0; k < 2; k++) {
    tlc_stat_t *r = tlc_table_add(&t);
    r->handle = 2;
    r->context = k;
    r->dist[TLC_NET].n = 1;
    r->dist[TLC_NET].max = r->dist[TLC_NET].min = 10 + k;
    r->dist[TLC_NET].max_at = r->dist[TLC_NET].min_at = at_of(100 * k, 100 * k + 10, 0);
  }
  tlc_table_sort(&t);
  assert_int_equal(find(&t, NULL, "max:net:2@26", &at, &v, err, sizeof(err)), TLC_EINVAL);
  assert_non_null(strstr(err, "several contexts answer to 26 in 2; its contexts: core26, task1A"));
  assert_int_equal(find(&t, NULL, "max:net:2@task1a", &at, &v, err, sizeof(err)), 0);
  assert_int_equal(v, 11);
  tlc_table_fini(&t);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_parse),
    cmocka_unit_test(test_handle),
    cmocka_unit_test(test_find),
    cmocka_unit_test(test_ambiguous_id),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
