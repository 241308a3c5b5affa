/* test_query.c - base/query: a query string's parameters as the HTTP port hands them over. */
#include "base/query.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

static void test_param(void **state) {
  char v[16];
  (void)state;
  assert_int_equal(tlc_query_param("area=10&since=-2h", "since", v, sizeof v), 1);
  assert_string_equal(v, "-2h");
  /* fragments joined by ',' end a parameter as '&' does */
  assert_int_equal(tlc_query_param("area=10,step=1h", "step", v, sizeof v), 1);
  assert_string_equal(v, "1h");
  /* a key is matched whole: "since" is not "sinc", nor a prefix of "sincex" */
  assert_int_equal(tlc_query_param("sincex=1", "since", v, sizeof v), 0);
  assert_int_equal(tlc_query_param("since=1", "sinc", v, sizeof v), 0);
  assert_int_equal(tlc_query_param("", "since", v, sizeof v), 0);
  /* empty value */
  assert_int_equal(tlc_query_param("a=&b=2", "a", v, sizeof v), 1);
  assert_string_equal(v, "");
  /* the first of two */
  assert_int_equal(tlc_query_param("a=1&a=2", "a", v, sizeof v), 1);
  assert_string_equal(v, "1");
}

static void test_param_bad(void **state) {
  char v[4];
  (void)state;
  /* too long for out: refused, not cut */
  assert_int_equal(tlc_query_param("a=1234", "a", v, sizeof v), -1);
  assert_int_equal(tlc_query_param("a=123", "a", v, sizeof v), 1);
  assert_string_equal(v, "123");
  /* a '%' left after libwebsockets' decoding was encoded twice */
  assert_int_equal(tlc_query_param("a=%41", "a", v, sizeof v), -1);
}

static void test_unknown(void **state) {
  static const char *const known[] = { "since", "until", NULL };
  char bad[80];
  (void)state;
  assert_int_equal(tlc_query_unknown("since=1&until=2", known, bad, sizeof bad), 0);
  assert_int_equal(tlc_query_unknown("", known, bad, sizeof bad), 0);
  assert_int_equal(tlc_query_unknown("since=1&sinc=2", known, bad, sizeof bad), 1);
  assert_string_equal(bad, "sinc");
  /* a name without a value is still a parameter */
  assert_int_equal(tlc_query_unknown("until,verbose", known, bad, sizeof bad), 1);
  assert_string_equal(bad, "verbose");
  /* empty parameters (a trailing '&') are no parameter */
  assert_int_equal(tlc_query_unknown("since=1&&", known, bad, sizeof bad), 0);
  /* a long name is cut to 64 bytes in the message */
  {
    char q[200];
    memset(q, 'x', 150);
    q[150] = '\0';
    assert_int_equal(tlc_query_unknown(q, known, bad, sizeof bad), 1);
    assert_int_equal(strlen(bad), 64);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_param),
    cmocka_unit_test(test_param_bad),
    cmocka_unit_test(test_unknown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
