/* test_when.c - SPEC 10's time spellings (formats/when.c): ns:N, RFC 3339 UTC, relative to
 * now; ranges: kinds must agree, since after until is refused, open ends. Expected values are
 * worked out by hand (date -u -d ... +%s), not taken from the code. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "formats/when.h"

#include <stdint.h>
#include <string.h>

#define NOW 1795000000000000000ll /* 2026-11-18T11:06:40Z */

static void test_target_time(void **state) {
  int k;
  int64_t v;
  (void)state;
  assert_int_equal(tlc_when_parse("ns:5000", NOW, &k, &v), 0);
  assert_int_equal(k, TLC_WHEN_TARGET);
  assert_int_equal(v, 5000);
  assert_int_equal(tlc_when_parse("ns:-12", NOW, &k, &v), 0);
  assert_int_equal(v, -12);
  assert_int_equal(tlc_when_parse("ns:9223372036854775807", NOW, &k, &v), 0);
  assert_int_equal(v, INT64_MAX);
  assert_int_equal(tlc_when_parse("ns:", NOW, &k, &v), -1);
  assert_int_equal(tlc_when_parse("ns:12x", NOW, &k, &v), -1);
  assert_int_equal(tlc_when_parse("ns:010", NOW, &k, &v), 0); /* decimal, not octal */
  assert_int_equal(v, 10);
  assert_int_equal(tlc_when_parse("ns:99999999999999999999", NOW, &k, &v), -1);
}

/* epoch:K:N: target time N in clock epoch K (a board reset starts a new one). */
static void test_epoch(void **state) {
  tlc_when_range_t r;
  char err[300];
  int k;
  int64_t v, e;
  (void)state;
  assert_int_equal(tlc_when_parse_epoch("epoch:3:5000", NOW, &k, &v, &e), 0);
  assert_int_equal(k, TLC_WHEN_TARGET);
  assert_int_equal(v, 5000);
  assert_int_equal(e, 3);
  assert_int_equal(tlc_when_parse_epoch("ns:7", NOW, &k, &v, &e), 0);
  assert_int_equal(e, -1); /* the latest */
  assert_int_equal(tlc_when_parse_epoch("epoch:0:-12", NOW, &k, &v, &e), 0);
  assert_int_equal(v, -12);
  assert_int_equal(e, 0);
  assert_int_equal(tlc_when_parse_epoch("epoch::5", NOW, &k, &v, &e), -1);
  assert_int_equal(tlc_when_parse_epoch("epoch:-1:5", NOW, &k, &v, &e), -1);
  assert_int_equal(tlc_when_parse_epoch("epoch:1", NOW, &k, &v, &e), -1);
  assert_int_equal(tlc_when_parse_epoch("epoch:1:", NOW, &k, &v, &e), -1);
  assert_int_equal(tlc_when_parse_epoch("epoch:x:5", NOW, &k, &v, &e), -1);
  assert_int_equal(tlc_when_range("epoch:2:10", "epoch:2:20", NOW, &r, err, sizeof(err)), 0);
  assert_int_equal(r.epoch, 2);
  assert_int_equal(tlc_when_range("ns:10", NULL, NOW, &r, err, sizeof(err)), 0);
  assert_int_equal(r.epoch, -1);
  assert_int_equal(tlc_when_range(NULL, "epoch:1:9", NOW, &r, err, sizeof(err)), 0);
  assert_int_equal(r.epoch, 1);
  assert_int_equal(tlc_when_range("epoch:1:10", "epoch:2:20", NOW, &r, err, sizeof(err)), -1);
  assert_non_null(strstr(err, "same clock epoch"));
  assert_int_equal(tlc_when_range("epoch:1:10", "ns:20", NOW, &r, err, sizeof(err)), -1);
  assert_int_equal(tlc_when_range("epoch:1:10", "-1h", NOW, &r, err, sizeof(err)), -1);
}

static void test_rfc3339(void **state) {
  int k;
  int64_t v;
  (void)state;
  assert_int_equal(tlc_when_parse("2026-11-26T10:00:00Z", NOW, &k, &v), 0);
  assert_int_equal(k, TLC_WHEN_WALL);
  assert_int_equal(v, 1795687200ll * 1000000000ll);
  assert_int_equal(tlc_when_parse("1970-01-01T00:00:01.5Z", NOW, &k, &v), 0);
  assert_int_equal(v, 1500000000ll);
  assert_int_equal(tlc_when_parse("1970-01-01T00:00:00.000000001Z", NOW, &k, &v), 0);
  assert_int_equal(v, 1);
  assert_int_equal(tlc_when_parse("1970-01-01T00:00:00.1234567891Z", NOW, &k, &v), 0);
  assert_int_equal(v, 123456789);                                           /* beyond ns: cut */
  assert_int_equal(tlc_when_parse("2026-11-26T10:00:00", NOW, &k, &v), -1); /* no Z */
  assert_int_equal(tlc_when_parse("2026-11-26T10:00:00+01:00", NOW, &k, &v), -1); /* UTC only */
  assert_int_equal(tlc_when_parse("2026-13-26T10:00:00Z", NOW, &k, &v), -1);
  assert_int_equal(tlc_when_parse("2026-11-26T24:00:00Z", NOW, &k, &v), -1);
  assert_int_equal(tlc_when_parse("2026-11-26T10:00:00.Z", NOW, &k, &v), -1);
  assert_int_equal(tlc_when_parse("2026-11-26 10:00:00Z", NOW, &k, &v), -1);
  assert_int_equal(tlc_when_parse("9999-11-26T10:00:00Z", NOW, &k, &v), -1); /* past int64 ns */
  assert_int_equal(tlc_when_parse("yesterday", NOW, &k, &v), -1);
  assert_int_equal(tlc_when_parse("", NOW, &k, &v), -1);
}

static void test_relative(void **state) {
  int k;
  int64_t v;
  (void)state;
  assert_int_equal(tlc_when_parse("-2h", NOW, &k, &v), 0);
  assert_int_equal(k, TLC_WHEN_WALL);
  assert_int_equal(v, NOW - 7200ll * 1000000000ll);
  assert_int_equal(tlc_when_parse("-90", NOW, &k, &v), 0); /* seconds */
  assert_int_equal(v, NOW - 90ll * 1000000000ll);
  assert_int_equal(tlc_when_parse("-1.5m", NOW, &k, &v), 0);
  assert_int_equal(v, NOW - 90ll * 1000000000ll);
  assert_int_equal(tlc_when_parse("-1d", NOW, &k, &v), 0);
  assert_int_equal(v, NOW - 86400ll * 1000000000ll);
  assert_int_equal(tlc_when_parse("-250ms", NOW, &k, &v), 0);
  assert_int_equal(v, NOW - 250000000ll);
  assert_int_equal(tlc_when_parse("-0s", NOW, &k, &v), 0);
  assert_int_equal(v, NOW);
  assert_int_equal(tlc_when_parse("-2w", NOW, &k, &v), -1);
  assert_int_equal(tlc_when_parse("--2h", NOW, &k, &v), -1);
  assert_int_equal(tlc_when_parse("-h", NOW, &k, &v), -1);
  assert_int_equal(tlc_when_parse("-nanh", NOW, &k, &v), -1);
  assert_int_equal(tlc_when_parse("-1e30s", NOW, &k, &v), -1);
  /* within the number's bound but not in int64 ns once in seconds (fuzz_manifest found it) */
  assert_int_equal(tlc_when_parse("-442375509h", NOW, &k, &v), -1);
  assert_int_equal(tlc_when_parse("-1000000000d", NOW, &k, &v), -1);
  assert_int_equal(tlc_when_parse("-100000d", NOW, &k, &v), 0);
  assert_int_equal(v, NOW - 100000ll * 86400 * 1000000000);
}

static void test_range(void **state) {
  tlc_when_range_t r;
  char err[300];
  (void)state;
  assert_int_equal(tlc_when_range("ns:10", "ns:20", NOW, &r, err, sizeof(err)), 0);
  assert_int_equal(r.kind, TLC_WHEN_TARGET);
  assert_true(r.has_since && r.has_until);
  assert_int_equal(r.since, 10);
  assert_int_equal(r.until, 20);
  assert_int_equal(tlc_when_range("ns:10", "ns:10", NOW, &r, err, sizeof(err)), 0); /* empty */
  assert_int_equal(tlc_when_range("ns:20", "ns:10", NOW, &r, err, sizeof(err)), -1);
  assert_non_null(strstr(err, "since is after until"));
  assert_int_equal(tlc_when_range("ns:20", "-1h", NOW, &r, err, sizeof(err)), -1);
  assert_non_null(strstr(err, "both"));
  assert_int_equal(tlc_when_range(NULL, "-1h", NOW, &r, err, sizeof(err)), 0);
  assert_int_equal(r.kind, TLC_WHEN_WALL);
  assert_false(r.has_since);
  assert_true(r.has_until);
  assert_int_equal(tlc_when_range("-1h", "-2h", NOW, &r, err, sizeof(err)), -1);
  assert_int_equal(tlc_when_range("soon", NULL, NOW, &r, err, sizeof(err)), -1);
  assert_non_null(strstr(err, "since expects"));
  assert_int_equal(tlc_when_range(NULL, NULL, NOW, &r, err, sizeof(err)), 0);
  assert_int_equal(r.kind, TLC_WHEN_NONE);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_target_time), cmocka_unit_test(test_epoch),
    cmocka_unit_test(test_rfc3339),     cmocka_unit_test(test_relative),
    cmocka_unit_test(test_range),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
