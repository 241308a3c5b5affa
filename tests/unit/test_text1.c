/* test_text1.c - the Text1 writer against exports written out by hand.
 *
 * The table below is built by hand; every expected line was derived from the SPEC's number
 * rules (HANDLE 8 hex digits, VALUE unpadded hex outside TIMELINE and 8 digits inside, totals 0
 * when empty, MIN/MAX/AVG empty without samples, inapplicable macros empty), not from the
 * writer's output. The TIMELINE case reproduces the seed's own example lines.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "base/alloc.h"
#include "base/err.h"
#include "formats/stats.h"
#include "formats/text1.h"
#include "testalloc.h"

#include <stdio.h>
#include <string.h>

static tlc_stat_t *row(tlc_table_t *t, uint32_t h, uint32_t ctx, int kind, uint64_t count) {
  tlc_stat_t *r = tlc_table_add(t);
  assert_non_null(r);
  r->handle = h;
  r->context = ctx;
  r->kind = (uint8_t)kind;
  r->count = count;
  return r;
}

static void dist(tlc_stat_t *r, unsigned k, uint64_t n, int64_t sum, int64_t min, int64_t max) {
  r->dist[k].n = n;
  r->dist[k].sum = sum;
  r->dist[k].min = min;
  r->dist[k].max = max;
}

static void build(tlc_table_t *t) {
  tlc_stat_t *r;
  tlc_ctx_t c = { TLC_CTXK_CORE, 0, 0, 0, 0 };
  tlc_table_init(t);
  t->format = TLC_FMT_BIN11;
  t->first_time = 100;
  t->last_time = 1100;
  t->counters.events = 5;
  assert_int_equal(tlc_table_add_ctx(t, &c), 0);
  c.core = 1;
  assert_int_equal(tlc_table_add_ctx(t, &c), 1);
  /* main on core0: 2 calls of 100 and 200 ns, one period of 400, 50 ns outside (no sample) */
  r = row(t, 0x00000000, 0, TLC_ROW_CODE, 2);
  r->total[TLC_NET] = r->total[TLC_GROSS] = r->total[TLC_CALL] = 300;
  r->total[TLC_OUTSIDE] = 50;
  dist(r, TLC_NET, 2, 300, 100, 200);
  dist(r, TLC_PERIOD, 1, 400, 400, 400);
  /* main on core1: one open activation, 70 ns so far, no samples */
  r = row(t, 0x00000000, 1, TLC_ROW_CODE, 1);
  r->total[TLC_NET] = r->total[TLC_GROSS] = r->total[TLC_CALL] = 70;
  /* Neutral: sums of totals, union of samples */
  r = row(t, 0x00000000, TLC_CTX_NEUTRAL, TLC_ROW_CODE, 3);
  r->total[TLC_NET] = r->total[TLC_GROSS] = r->total[TLC_CALL] = 370;
  r->total[TLC_OUTSIDE] = 50;
  dist(r, TLC_NET, 2, 300, 100, 200);
  dist(r, TLC_PERIOD, 1, 400, 400, 400);
  /* a line area seen on core0 without an E */
  row(t, 0x10000003, 0, TLC_ROW_CODE, 0);
  /* variable: 3 writes, last 0xAB, periods 20 and 30 */
  r = row(t, 0x20000001, TLC_CTX_NONE, TLC_ROW_DATA, 3);
  r->has_value = 1;
  r->value = 0xAB;
  r->value_min = 1;
  r->value_max = 0xAB;
  dist(r, TLC_PERIOD, 2, 50, 20, 30);
  /* state 0: one closed stay of 7521; state 1: open stay of 3491 so far */
  r = row(t, 0x30000000, TLC_CTX_NONE, TLC_ROW_STATE, 1);
  r->state = 0;
  r->total[TLC_NET] = 7521;
  dist(r, TLC_NET, 1, 7521, 7521, 7521);
  r = row(t, 0x30000000, TLC_CTX_NONE, TLC_ROW_STATE, 1);
  r->state = 1;
  r->total[TLC_NET] = 3491;
  /* AUX: one write of 5 */
  r = row(t, 0x40000000, TLC_CTX_NONE, TLC_ROW_DATA, 1);
  r->has_value = 1;
  r->value = r->value_min = r->value_max = 5;
  tlc_table_sort(t);
}

static char *export(const tlc_text1_opts_t *o, const tlc_table_t *t, tlc_timeline_t *tl) {
  tlc_out_t out;
  char *s;
  tlc_out_init(&out, 0, NULL, NULL);
  assert_int_equal(tlc_text1_write(&out, o, t, NULL, tl), 0);
  s = tlc_out_take(&out, NULL);
  assert_non_null(s);
  tlc_out_fini(&out);
  return s;
}

static void test_sections(void **state) {
  tlc_table_t t;
  tlc_text1_opts_t o;
  char err[200], *s;
  const char *fmt = "StatisticsEntry=%HANDLE%,%VALUE%,%COUNT%,%T.NET%,%T.NET.MIN%,%T.NET.AVG%,"
                    "%T.GROSS%,%T.PERIOD.MAX%,%T.OUTSIDE%,%CONTEXT%";
  const char *f = "%HANDLE%,%VALUE%,%COUNT%,%T.NET%,%T.NET.MIN%,%T.NET.AVG%,%T.GROSS%,"
                  "%T.PERIOD.MAX%,%T.OUTSIDE%,%CONTEXT%";
  char expect[4096];
  (void)state;
  build(&t);
  tlc_text1_opts_default(&o);
  assert_int_equal(tlc_text1_set_format(&o, fmt, err, sizeof(err)), 0);
  snprintf(expect, sizeof(expect),
           "* INFO %%TOTAL_TIME%%\n"
           "1000\n"
           "\n"
           "* CONTEXTS %%NAME%%,%%HANDLE%%\n"
           "core0,0x0\n"
           "core1,0x1\n"
           "\n"
           "* HANDLE(Functions) %%HANDLE%%,%%NAME%%,%%VALUE%%\n"
           "00000000,,\n"
           "10000003,,\n"
           "\n"
           "* HANDLE(Data) %%HANDLE%%,%%NAME%%,%%VALUE%%\n"
           /* states list under their variable (20000000, not observed) */
           "30000000,,0\n"
           "30000000,,1\n"
           "20000001,,\n"
           "\n"
           "* HANDLE(AUX) %%HANDLE%%,%%NAME%%,%%VALUE%%\n"
           "40000000,,\n"
           "\n"
           "* STATISTICS(Functions) CONTEXT(core0) %s\n"
           "00000000,,2,300,100,150,300,400,50,core0\n"
           "10000003,,0,0,,,0,,0,core0\n"
           "\n"
           "* STATISTICS(Functions) CONTEXT(core1) %s\n"
           "00000000,,1,70,,,70,,0,core1\n"
           "\n"
           "* STATISTICS(Functions) CONTEXT(Neutral) %s\n"
           "00000000,,3,370,100,150,370,400,50,Neutral\n"
           "\n"
           "* STATISTICS(Data) %s\n"
           "20000001,AB,3,,,,,30,,\n"
           "30000000,0,1,7521,7521,7521,,,,\n"
           "30000000,1,1,3491,,,,,,\n"
           "\n"
           "* STATISTICS(AUX) %s\n"
           "40000000,5,1,,,,,,,\n"
           "\n",
           f, f, f, f, f);
  s = export(&o, &t, NULL);
  assert_string_equal(s, expect);
  tlc_free(s);
  tlc_table_fini(&t);
}

/* A fixed list of events served as a timeline. */
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

static void test_timeline_seed_example(void **state) {
  /* The seed's TIMELINE example:
   *   * TIMELINE %HANDLE%,%EVENT%,%VALUE%,%TIME%
   *   20000000,W,00000001,4336
   *   00000000,R,,4469
   *   10000004,E,,4469
   *   10000004,S,,4602
   *   00000000,S,,4602 */
  static const tlc_event_t ev[5] = {
    { .handle = 0x20000000, .type = TLC_EV_WRITE, .data = 1, .time_ns = 4336, .core = 0 },
    { .handle = 0x00000000, .type = TLC_EV_RESUME, .time_ns = 4469, .core = 0 },
    { .handle = 0x10000004, .type = TLC_EV_ENTRY, .time_ns = 4469, .core = 0 },
    { .handle = 0x10000004, .type = TLC_EV_SUSPEND, .time_ns = 4602, .core = 0 },
    { .handle = 0x00000000, .type = TLC_EV_SUSPEND, .time_ns = 4602, .core = 0 },
  };
  fixed_tl_t f = { ev, 5, 0 };
  tlc_timeline_t tl = { ftl_next, ftl_rewind, &f };
  tlc_table_t t;
  tlc_text1_opts_t o;
  char *s;
  (void)state;
  tlc_table_init(&t);
  tlc_text1_opts_default(&o);
  o.sections = TLC_T1_SEC_TIMELINE;
  s = export(&o, &t, &tl);
  assert_string_equal(s, "* TIMELINE %HANDLE%,%EVENT%,%VALUE%,%TIME%\n"
                         "20000000,W,00000001,4336\n"
                         "00000000,R,,4469\n"
                         "10000004,E,,4469\n"
                         "10000004,S,,4602\n"
                         "00000000,S,,4602\n"
                         "\n");
  tlc_free(s);
}

static void test_timeline_context_and_core(void **state) {
  /* context_area 30000000: a task write on core 1 makes later events there run in task7 */
  static const tlc_event_t ev[4] = {
    { .handle = 0x00000001, .type = TLC_EV_ENTRY, .time_ns = -5, .core = 1 },
    { .handle = 0x30000000, .type = TLC_EV_WRITE, .data = 7, .time_ns = 10, .core = 1 },
    { .handle = 0x00000001, .type = TLC_EV_EXIT, .time_ns = 20, .core = 1 },
    { .handle = 0x00000002, .type = TLC_EV_ENTRY, .time_ns = 30, .core = TLC_CORE_UNKNOWN },
  };
  fixed_tl_t f = { ev, 4, 0 };
  tlc_timeline_t tl = { ftl_next, ftl_rewind, &f };
  tlc_table_t t;
  tlc_text1_opts_t o;
  char err[200], *s;
  (void)state;
  tlc_table_init(&t);
  t.has_context_area = 1;
  t.context_area = 0x30000000;
  tlc_text1_opts_default(&o);
  o.sections = TLC_T1_SEC_TIMELINE;
  assert_int_equal(tlc_text1_set_format(&o,
                                        "TimelineEntry=%CONTEXT%;%CORE%;%EVENT%;%VALUE%;%TIME%%%",
                                        err, sizeof(err)),
                   0);
  s = export(&o, &t, &tl);
  assert_string_equal(s, "* TIMELINE %CONTEXT%;%CORE%;%EVENT%;%VALUE%;%TIME%%%\n"
                         "core1;1;E;;-5%\n"
                         "core1;1;W;00000007;10%\n"
                         "task7;1;X;;20%\n"
                         "core?;-1;E;;30%\n"
                         "\n");
  tlc_free(s);
}

static void test_format_errors(void **state) {
  tlc_text1_opts_t o;
  char err[200];
  (void)state;
  tlc_text1_opts_default(&o);
  assert_int_equal(tlc_text1_set_format(&o, "TimelineEntry=%HANDLE%,%BOGUS%", err, sizeof(err)),
                   TLC_EINVAL);
  assert_non_null(strstr(err, "unknown macro %BOGUS%"));
  assert_int_equal(tlc_text1_set_format(&o, "TimelineEntry=%COUNT%", err, sizeof(err)), TLC_EINVAL);
  assert_non_null(strstr(err, "does not apply"));
  assert_int_equal(tlc_text1_set_format(&o, "NoSuchEntry=%HANDLE%", err, sizeof(err)), TLC_EINVAL);
  assert_int_equal(tlc_text1_set_format(&o, "StatisticsEntry", err, sizeof(err)), TLC_EINVAL);
  assert_int_equal(tlc_text1_set_format(&o, "StatisticsEntry=%HANDLE", err, sizeof(err)),
                   TLC_EINVAL);
  assert_non_null(strstr(err, "unterminated"));
  /* the seed spells one macro "T. OUTSIDE.MIN"; it is accepted */
  assert_int_equal(tlc_text1_set_format(&o, "StatisticsEntry=%T. OUTSIDE.MIN%", err, sizeof(err)),
                   0);
  /* PERIOD has no total in the seed */
  assert_int_equal(tlc_text1_set_format(&o, "StatisticsEntry=%T.PERIOD%", err, sizeof(err)),
                   TLC_EINVAL);
}

static void test_field_quoting(void **state) {
  tlc_out_t out;
  char *s;
  (void)state;
  tlc_out_init(&out, 0, NULL, NULL);
  tlc_text1_field(&out, "plain", ',');
  tlc_out_putc(&out, '|');
  tlc_text1_field(&out, "a,b", ',');
  tlc_out_putc(&out, '|');
  tlc_text1_field(&out, "\"TestStatic1.c\"#StaticFunc", ','); /* the seed writes it raw */
  tlc_out_putc(&out, '|');
  tlc_text1_field(&out, "\"q\"", ',');
  tlc_out_putc(&out, '|');
  tlc_text1_field(&out, "a;b", ','); /* not the separator: raw */
  tlc_out_putc(&out, '|');
  tlc_text1_field(&out, "", ',');
  s = tlc_out_take(&out, NULL);
  assert_string_equal(s, "plain|\"a,b\"|\"TestStatic1.c\"#StaticFunc|\"\"\"q\"\"\"|a;b|");
  tlc_free(s);
  tlc_out_fini(&out);
}

/* The seed's mapping sections, read by the mapping reader and written back: the Data section
 * comes out exactly as the seed lists it (each variable followed by its states), and the names
 * (including the seed's "TestStatic1.c"#StaticFunc) survive. */
static void test_seed_mapping_round_trip(void **state) {
  static const char seed[] = "* HANDLE(Functions) %HANDLE%,%NAME%,%VALUE%\n"
                             "00000000,main,\n"
                             "10000000,{,51\n"
                             "10000001,{,51\n"
                             "10000002,otm(fn_main);,52\n"
                             "10000003,CPU_Init();,54\n"
                             "10000004,TestStatic1();,59\n"
                             "10000005,TestStatic2();,60\n"
                             "10000006,},97\n"
                             "00000001,\"TestStatic1.c\"#StaticFunc,\n"
                             "10000007,{,6\n"
                             "10000008,g_cStaticSignal = STATIC;,7\n"
                             "10000009,},8\n"
                             "\n"
                             "* HANDLE(Data) %HANDLE%,%NAME%,%VALUE%\n"
                             "20000000,TestStatic1##s_cStatic,\n"
                             "30000000,,0\n"
                             "30000000,,1\n"
                             "20000001,iCounter,\n"
                             "20000002,TestStatic2##s_cStatic,\n"
                             "30000002,,0\n"
                             "30000002,,2\n";
  static const char data[] = "* HANDLE(Data) %HANDLE%,%NAME%,%VALUE%\n"
                             "20000000,TestStatic1##s_cStatic,\n"
                             "30000000,,0\n"
                             "30000000,,1\n"
                             "20000001,iCounter,\n"
                             "20000002,TestStatic2##s_cStatic,\n"
                             "30000002,,0\n"
                             "30000002,,2\n"
                             "\n";
  tlc_mapping_t m;
  tlc_parse_err_t pe;
  tlc_table_t t;
  tlc_text1_opts_t o;
  tlc_out_t out;
  char *s;
  (void)state;
  tlc_mapping_init(&m);
  assert_int_equal(tlc_mapping_parse_text1(&m, seed, sizeof(seed) - 1, &pe), 0);
  tlc_mapping_finish(&m);
  tlc_table_init(&t);
  tlc_text1_opts_default(&o);
  o.sections = TLC_T1_SEC_HANDLE;
  tlc_out_init(&out, 0, NULL, NULL);
  assert_int_equal(tlc_text1_write(&out, &o, &t, &m, NULL), 0);
  s = tlc_out_take(&out, NULL);
  tlc_out_fini(&out);
  assert_non_null(strstr(s, data));
  assert_non_null(strstr(s, "00000001,\"TestStatic1.c\"#StaticFunc,\n"));
  assert_non_null(strstr(s, "10000008,g_cStaticSignal = STATIC;,7\n"));
  assert_non_null(strstr(s, "10000006,},97\n"));
  /* and what we wrote reads back to the same mapping */
  {
    tlc_mapping_t m2;
    size_t i;
    tlc_mapping_init(&m2);
    assert_int_equal(tlc_mapping_parse_text1(&m2, s, strlen(s), &pe), 0);
    tlc_mapping_finish(&m2);
    assert_int_equal(m2.nareas, m.nareas);
    for (i = 0; i < m.nareas; i++) {
      assert_int_equal(m2.areas[i].handle, m.areas[i].handle);
      assert_string_equal(m2.areas[i].name, m.areas[i].name);
      assert_int_equal(m2.areas[i].has_value, m.areas[i].has_value);
      assert_int_equal(m2.areas[i].value, m.areas[i].value);
      assert_int_equal(m2.areas[i].parent, m.areas[i].parent);
      assert_int_equal(m2.areas[i].state_handle, m.areas[i].state_handle);
    }
    tlc_mapping_fini(&m2);
  }
  tlc_free(s);
  tlc_mapping_fini(&m);
}

static void test_alloc_failures(void **state) {
  tlc_table_t t;
  tlc_text1_opts_t o;
  uint64_t n, k;
  (void)state;
  build(&t);
  tlc_text1_opts_default(&o);
  testalloc_install();
  {
    tlc_out_t out;
    tlc_out_init(&out, 0, NULL, NULL);
    assert_int_equal(tlc_text1_write(&out, &o, &t, NULL, NULL), 0);
    tlc_out_fini(&out);
  }
  n = testalloc_count();
  for (k = 1; k <= n; k++) {
    tlc_out_t out;
    testalloc_fail_at(k);
    tlc_out_init(&out, 0, NULL, NULL);
    assert_int_equal(tlc_text1_write(&out, &o, &t, NULL, NULL), TLC_ENOMEM);
    tlc_out_fini(&out);
    assert_int_equal(testalloc_live_bytes(), 0);
  }
  testalloc_uninstall();
  tlc_table_fini(&t);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_sections),
    cmocka_unit_test(test_timeline_seed_example),
    cmocka_unit_test(test_timeline_context_and_core),
    cmocka_unit_test(test_format_errors),
    cmocka_unit_test(test_field_quoting),
    cmocka_unit_test(test_seed_mapping_round_trip),
    cmocka_unit_test(test_alloc_failures),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
