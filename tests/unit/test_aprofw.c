/* test_aprofw.c - the aprof writer on short timelines with every number worked out by hand. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "base/alloc.h"
#include "base/err.h"
#include "formats/aprofw.h"
#include "testalloc.h"

#include <string.h>

typedef struct fixed_tl {
  const tlc_event_t *ev;
  int n;
  int done;
} fixed_tl_t;

static int ftl_next(void *ud, const tlc_event_t **evs) {
  fixed_tl_t *f = ud;
  if (f->done)
    return 0;
  f->done = 1;
  *evs = f->ev;
  return f->n;
}

static int ftl_rewind(void *ud) {
  ((fixed_tl_t *)ud)->done = 0;
  return 0;
}

#define EV(h, ty, t)                                                                               \
  { .handle = (h), .type = (ty), .time_ns = (t), .core = 0 }

static char *write_report(const tlc_event_t *ev, int n, int64_t first, int64_t last, int ns) {
  fixed_tl_t f = { ev, n, 0 };
  tlc_timeline_t tl = { ftl_next, ftl_rewind, &f };
  tlc_table_t t;
  tlc_aprofw_opts_t o;
  tlc_out_t out;
  char *s;
  tlc_table_init(&t);
  t.format = TLC_FMT_BIN11;
  t.first_time = first;
  t.last_time = last;
  t.counters.events = (uint64_t)n;
  memset(&o, 0, sizeof(o));
  o.ns = ns;
  tlc_out_init(&out, 0, NULL, NULL);
  assert_int_equal(tlc_aprof_write(&out, &o, &t, NULL, &tl), 0);
  s = tlc_out_take(&out, NULL);
  tlc_out_fini(&out);
  return s;
}

static void test_recursion_and_cct(void **state) {
  /* main E@0, S@10; f E@10; f E@20 (recursive); f X@30; f X@50; main R@50, X@100.
   * main: cum 100, self (0..10) + (50..100) = 60, real (no enclosing main).
   * f inner: cum 10, self 10, not real (the outer f is open); f outer: cum 40, self 40, real.
   * f point: occ 2, min 10, max 40, sum 50, sqr 100 + 1600 = 1700, real 40, self-sum 50,
   * self-min 10, self-max 40, self-sqr 1700.
   * CCT: 1 = main (root), 2 = f under 1, 3 = f under 2. */
  static const tlc_event_t ev[] = {
    EV(0x0, TLC_EV_ENTRY, 0),   EV(0x0, TLC_EV_SUSPEND, 10), EV(0x1, TLC_EV_ENTRY, 10),
    EV(0x1, TLC_EV_ENTRY, 20),  EV(0x1, TLC_EV_EXIT, 30),    EV(0x1, TLC_EV_EXIT, 50),
    EV(0x0, TLC_EV_RESUME, 50), EV(0x0, TLC_EV_EXIT, 100),
  };
  char *s;
  (void)state;
  s = write_report(ev, 8, 0, 100, 1);
  assert_string_equal(s, "v 4\n"
                         "c tlcap aprof export: routines are function areas; rms 0 (no "
                         "input-size signal); cost = nanoseconds\n"
                         "a tlcap\n"
                         "m time-nsec\n"
                         "k 100\n"
                         "r \"fn_00000000\" \"\" 1\n"
                         "r \"fn_00000001\" \"\" 2\n"
                         "p 1 0 100 100 100 10000 1 100 60 60 60 3600\n"
                         "p 2 0 10 40 50 1700 2 40 50 10 40 1700\n"
                         "x 1 1 -1\n"
                         "x 2 2 1\n"
                         "x 2 3 2\n"
                         "q 1 0 100 100 100 10000 1 100 60 60 60 3600\n"
                         "q 2 0 40 40 40 1600 1 40 40 40 40 1600\n"
                         "q 3 0 10 10 10 100 1 0 10 10 10 100\n");
  tlc_free(s);
}

static void test_partial_and_truncated_make_no_points(void **state) {
  /* g R@0 (open before the recording: partial), h E@5, g X@9 closes g and truncates h:
   * neither was seen from E to X, so no p/q lines; the routines and the tree still appear.
   * Microseconds: k = round(9000 ns / 1000) = 9. */
  static const tlc_event_t ev[] = {
    EV(0x2, TLC_EV_RESUME, 0),
    EV(0x3, TLC_EV_ENTRY, 5000),
    EV(0x2, TLC_EV_EXIT, 9000),
  };
  char *s;
  (void)state;
  s = write_report(ev, 3, 0, 9000, 0);
  assert_string_equal(s, "v 4\n"
                         "c tlcap aprof export: routines are function areas; rms 0 (no "
                         "input-size signal); cost = microseconds\n"
                         "a tlcap\n"
                         "m time-usec\n"
                         "k 9\n"
                         "r \"fn_00000002\" \"\" 1\n"
                         "r \"fn_00000003\" \"\" 2\n"
                         "x 1 1 -1\n"
                         "x 2 2 1\n");
  tlc_free(s);
}

static void test_microsecond_rounding_and_lines_ignored(void **state) {
  /* a E@0 X@1499 -> 1 us; a E@2000 X@3500 -> 1.5 us rounds to 2; line area 10000000 events are
   * not routines. point: occ 2, min 1, max 2, sum 3, sqr 5, real 3, self 3, 1, 2, 5 */
  static const tlc_event_t ev[] = {
    EV(0x0, TLC_EV_ENTRY, 0),    EV(0x10000000, TLC_EV_ENTRY, 100), EV(0x0, TLC_EV_EXIT, 1499),
    EV(0x0, TLC_EV_ENTRY, 2000), EV(0x0, TLC_EV_EXIT, 3500),
  };
  char *s;
  (void)state;
  s = write_report(ev, 5, 0, 3500, 0);
  assert_non_null(strstr(s, "p 1 0 1 2 3 5 2 3 3 1 2 5\n"));
  assert_null(strstr(s, "r \"fn_10000000\""));
  tlc_free(s);
}

static void test_sub_microsecond_costs_are_never_zero(void **state) {
  /* b E@0 X@300 and E@1000 X@1200: 300 and 200 ns would round to 0 us, and aprof-plot drops a
   * point whose min, max or sum is 0: each is written as 1 us and the report says how many
   * costs were raised so (cumulative and self: 4). A zero-length activation stays 0.
   * point: occ 2, min 1, max 1, sum 2, sqr 2, real 2, self 2, 1, 1, 2. k: 1200 ns -> 1 us. */
  static const tlc_event_t ev[] = {
    EV(0x5, TLC_EV_ENTRY, 0),
    EV(0x5, TLC_EV_EXIT, 300),
    EV(0x5, TLC_EV_ENTRY, 1000),
    EV(0x5, TLC_EV_EXIT, 1200),
  };
  static const tlc_event_t zero[] = {
    EV(0x6, TLC_EV_ENTRY, 50),
    EV(0x6, TLC_EV_EXIT, 50),
  };
  char *s;
  (void)state;
  s = write_report(ev, 4, 0, 1200, 0);
  assert_non_null(strstr(s, "\nk 1\n"));
  assert_non_null(strstr(s, "\np 1 0 1 1 2 2 2 2 2 1 1 2\n"));
  assert_non_null(strstr(s, "\nc 4 costs between 1 and 499 ns written as 1 us (not 0, which "
                            "aprof-plot drops)\n"));
  tlc_free(s);
  s = write_report(zero, 2, 50, 50, 0);
  assert_non_null(strstr(s, "\np 1 0 0 0 0 0 1 0 0 0 0 0\n"));
  assert_null(strstr(s, "written as 1 us"));
  tlc_free(s);
}

static void test_alloc_failures(void **state) {
  static const tlc_event_t ev[] = {
    EV(0x0, TLC_EV_ENTRY, 0),
    EV(0x1, TLC_EV_ENTRY, 10),
    EV(0x1, TLC_EV_EXIT, 30),
    EV(0x0, TLC_EV_EXIT, 100),
  };
  uint64_t n, k;
  (void)state;
  testalloc_install();
  tlc_free(write_report(ev, 4, 0, 100, 1));
  n = testalloc_count();
  for (k = 1; k <= n; k++) {
    fixed_tl_t f = { ev, 4, 0 };
    tlc_timeline_t tl = { ftl_next, ftl_rewind, &f };
    tlc_out_t out;
    testalloc_fail_at(k);
    tlc_out_init(&out, 0, NULL, NULL);
    assert_int_equal(tlc_aprof_write(&out, NULL, NULL, NULL, &tl), TLC_ENOMEM);
    tlc_out_fini(&out);
    assert_int_equal(testalloc_live_bytes(), 0);
  }
  testalloc_uninstall();
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_recursion_and_cct),
    cmocka_unit_test(test_partial_and_truncated_make_no_points),
    cmocka_unit_test(test_sub_microsecond_costs_are_never_zero),
    cmocka_unit_test(test_microsecond_rounding_and_lines_ignored),
    cmocka_unit_test(test_alloc_failures),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
