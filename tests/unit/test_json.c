/* test_json.c - the JSON exporter: exact 128-bit integers, string escaping, and the fields of a
 * hand-built table (expected values worked out by hand in the comments). Whole documents are
 * also parsed by python's json module in the replay integration test. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "base/alloc.h"
#include "formats/json.h"
#include "formats/stats.h"

#include <string.h>

static char *render_u128(uint64_t hi, uint64_t lo) {
  tlc_out_t o;
  char *s;
  tlc_out_init(&o, 0, NULL, NULL);
  tlc_out_u128(&o, hi, lo);
  s = tlc_out_take(&o, NULL);
  tlc_out_fini(&o);
  return s;
}

static void test_u128(void **state) {
  char *s;
  (void)state;
  s = render_u128(0, 0);
  assert_string_equal(s, "0");
  tlc_free(s);
  s = render_u128(1, 0); /* 2^64 */
  assert_string_equal(s, "18446744073709551616");
  tlc_free(s);
  s = render_u128(UINT64_MAX, UINT64_MAX); /* 2^128 - 1 */
  assert_string_equal(s, "340282366920938463463374607431768211455");
  tlc_free(s);
  s = render_u128(0x3, 0x8D7EA4C68000ull); /* 3 * 2^64 + 0x8D7EA4C68000, by python's bigints */
  assert_string_equal(s, "55340387796198522880");
  tlc_free(s);
}

static void test_strings(void **state) {
  tlc_out_t o;
  char *s;
  (void)state;
  tlc_out_init(&o, 0, NULL, NULL);
  tlc_json_string(&o, "a\"b\\c\n\x01"
                      "\xc3\xa9"     /* é, valid UTF-8 */
                      "\xff"         /* invalid byte */
                      "\xed\xa0\x80" /* a UTF-16 surrogate encoded in UTF-8: invalid */
                      "<&>");
  s = tlc_out_take(&o, NULL);
  assert_string_equal(s, "\"a\\\"b\\\\c\\n\\u0001\xc3\xa9\\ufffd\\ufffd\\ufffd\\ufffd<&>\"");
  tlc_free(s);
  tlc_out_fini(&o);
}

static void test_table(void **state) {
  tlc_table_t t;
  tlc_stat_t *r;
  tlc_ctx_t c = { TLC_CTXK_THREAD, TLC_CORE_UNKNOWN, 0, 0, 0xABCDEF };
  tlc_out_t o;
  char *s;
  (void)state;
  tlc_table_init(&t);
  t.format = TLC_FMT_EVLOG;
  t.first_time = 100;
  t.last_time = 1100;
  t.counters.events = 4;
  t.nwindows = 1;
  t.window_ns[0] = 1000000000;
  assert_int_equal(tlc_table_add_ctx(&t, &c), 0);
  r = tlc_table_add(&t);
  r->handle = 0;
  r->context = 0;
  r->kind = TLC_ROW_CODE;
  r->count = 2;
  r->total[TLC_NET] = 300;
  /* samples 100 and 200: sum 300, avg 150, sumsq 10000 + 40000 = 50000,
   * sigma = sqrt(50000/2 - 150^2) = sqrt(2500) = 50 */
  {
    const tlc_at_t a1 = { 10, 110, 1, 2, 0, 1, 0, 0, 0, 0, 0 },
                   a2 = { 300, 500, 3, 5, 1, 1, 1700000000123, 7, 48, 8, 24 };
    tlc_dist_add_at(&r->dist[TLC_NET], 100, &a1);
    tlc_dist_add_at(&r->dist[TLC_NET], 200, &a2);
  }
  r->nwin = 1;
  r->win[0].count = 1;
  r->win[0].k[TLC_NET].n = 1;
  r->win[0].k[TLC_NET].sum = 200;
  r->win[0].k[TLC_NET].min = 200;
  r->win[0].k[TLC_NET].max = 200;
  r = tlc_table_add(&t);
  r->handle = 0x20000000;
  r->context = TLC_CTX_NONE;
  r->kind = TLC_ROW_DATA;
  r->count = 1;
  r->has_value = 1;
  r->value = r->value_min = r->value_max = UINT64_MAX;
  tlc_table_sort(&t);
  tlc_out_init(&o, 0, NULL, NULL);
  assert_int_equal(tlc_json_write(&o, &t, NULL, "lab\"1", 1), 0);
  s = tlc_out_take(&o, NULL);
  tlc_out_fini(&o);
  assert_non_null(strstr(s, "\"schema\":\"tlcap-stats/1\",\"target\":\"lab\\\"1\","
                            "\"format\":\"evlog\",\"first_time\":100,\"last_time\":1100,"
                            "\"total_time\":1000,\"context_area\":null,"
                            "\"windows_ns\":[1000000000]"));
  assert_non_null(strstr(s, "{\"index\":0,\"name\":\"threadABCDEF\",\"kind\":\"thread\","
                            "\"key\":11259375}"));
  assert_non_null(strstr(s, "\"handle\":\"00000000\",\"area\":\"function\",\"name\":null,"
                            "\"context\":\"threadABCDEF\",\"count\":2,\"anomalies\":0,"
                            "\"net\":{\"total\":300,\"n\":2,\"sum\":300,\"min\":100,\"max\":200,"
                            "\"min_at\":{\"start_ns\":10,\"end_ns\":110,\"epoch\":0,"
                            "\"seq_start\":1,\"seq_end\":2},"
                            "\"max_at\":{\"start_ns\":300,\"end_ns\":500,\"epoch\":1,"
                            "\"seq_start\":3,\"seq_end\":5,\"wall_ms\":1700000000123,"
                            "\"seg_first\":7,\"off_first\":48,\"seg_last\":8,\"off_last\":24},"
                            "\"avg\":150,\"sumsq\":\"50000\",\"stddev\":50.000,\"p50\":null"));
  assert_non_null(strstr(s, "\"windows\":[{\"window_ns\":1000000000,\"count\":1,\"net\":{\"n\":1,"
                            "\"sum\":200,\"min\":200,\"max\":200,\"avg\":200}"));
  /* period has no total; an empty dist prints null extremes */
  assert_non_null(strstr(s, "\"period\":{\"n\":0,\"sum\":0,\"min\":null,\"max\":null,"
                            "\"min_at\":null,\"max_at\":null,\"avg\":null,\"sumsq\":\"0\""));
  /* data values are unsigned 64-bit */
  assert_non_null(strstr(s, "\"handle\":\"20000000\",\"area\":\"variable\",\"name\":null,"
                            "\"count\":1,\"anomalies\":0,\"value\":18446744073709551615,"
                            "\"value_min\":18446744073709551615"));
  assert_true(strchr(s, '\n') == s + strlen(s) - 1); /* compact: one line */
  tlc_free(s);
  tlc_table_fini(&t);
}

/* Times INT64_MIN .. INT64_MAX must not overflow `last - first` (UB; -1 in Release): the
 * total time saturates as the engine's durations do: INT64_MAX, and INT64_MIN backwards. */
static void test_total_time_extremes(void **state) {
  tlc_table_t t;
  tlc_out_t o;
  char *s;
  (void)state;
  tlc_table_init(&t);
  t.format = TLC_FMT_BIN11;
  t.counters.events = 2;
  t.first_time = INT64_MIN;
  t.last_time = INT64_MAX;
  assert_int_equal(tlc_table_total_time(&t), INT64_MAX);
  tlc_out_init(&o, 0, NULL, NULL);
  assert_int_equal(tlc_json_write(&o, &t, NULL, "x", 1), 0);
  s = tlc_out_take(&o, NULL);
  assert_non_null(strstr(s, "\"total_time\":9223372036854775807,"));
  tlc_free(s);
  tlc_out_fini(&o);
  t.first_time = INT64_MAX;
  t.last_time = INT64_MIN;
  assert_int_equal(tlc_table_total_time(&t), INT64_MIN);
  t.first_time = -5;
  t.last_time = 7;
  assert_int_equal(tlc_table_total_time(&t), 12);
  t.counters.events = 0;
  assert_int_equal(tlc_table_total_time(&t), 0);
  tlc_table_fini(&t);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_u128),
    cmocka_unit_test(test_strings),
    cmocka_unit_test(test_table),
    cmocka_unit_test(test_total_time_extremes),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
