/* test_violations_fmt.c - `tlcap violations`'s output (client/vfmt.c): the table's rows, values
 * with their units, times, limits and references, and the JSON document, from replies built by
 * hand here (the values are this file's, not the formatter's).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "client/vfmt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void dur(int64_t ns, const char *want) {
  char b[32];
  assert_string_equal(tlc_cli_vfmt_dur(ns, b, sizeof(b)), want);
}

static void test_durations(void **state) {
  (void)state;
  dur(0, "0ns");
  dur(250, "250ns");
  dur(1000, "1us");
  dur(1500, "1.5us");
  dur(1050000, "1.05ms");
  dur(999999, "999.999us");
  dur(2000000000, "2s");
  dur(61234000000, "61.234s");
  dur(-1500, "-1.5us");
}

static char *text_of(tlc_out_t *o) {
  char *s = calloc(1, o->len + 1);
  assert_non_null(s);
  memcpy(s, o->buf, o->len);
  return s;
}

/* A reply: budget isr_tick (period <= 1.05ms) with 3 violations of SysTick_Handler on core0
 * (the kept ones: #2 1.2ms at wall 2026-12-03T07:00:00.250Z, #3 1.1ms, the worst #2) and one on
 * core1 (#1, 2ms, not kept any more, the worst being core0's); budget task_net (min 950us) with
 * none; budget burst (rate, at most 5 per 1s). */
typedef struct fixture {
  Tlcap__ViolationsReply r;
  Tlcap__BudgetViolations b[3], *bp[3];
  Tlcap__Violation v[3], *vp[3];
  Tlcap__ViolationCount c[2], *cp[2];
} fixture_t;

static void fixture(fixture_t *f) {
  size_t i;
  memset(f, 0, sizeof(*f));
  tlcap__violations_reply__init(&f->r);
  for (i = 0; i < 3; i++) {
    tlcap__budget_violations__init(&f->b[i]);
    tlcap__violation__init(&f->v[i]);
    f->bp[i] = &f->b[i];
    f->vp[i] = &f->v[i];
  }
  for (i = 0; i < 2; i++) {
    tlcap__violation_count__init(&f->c[i]);
    f->cp[i] = &f->c[i];
  }
  f->r.target = (char *)"lab1";
  f->r.total = 4;
  f->r.budgets = f->bp;
  f->r.n_budgets = 3;
  f->b[0].name = (char *)"isr_tick";
  f->b[0].area = (char *)"SysTick_Handler";
  f->b[0].context = (char *)"";
  f->b[0].stat = (char *)"period";
  f->b[0].has_max = 1;
  f->b[0].max = 1050000;
  f->b[0].total = 4;
  f->b[0].origin = (char *)"b.ini:1";
  /* kept: #2 (core0, 1.2ms) and #3 (core0, 1.1ms) */
  f->v[0].budget = f->v[1].budget = (char *)"isr_tick";
  f->v[0].stat = f->v[1].stat = (char *)"period";
  f->v[0].handle = f->v[1].handle = 3;
  f->v[0].area = f->v[1].area = (char *)"SysTick_Handler";
  f->v[0].context = f->v[1].context = (char *)"core0";
  f->v[0].over = f->v[1].over = 1;
  f->v[0].limit = f->v[1].limit = 1050000;
  f->v[0].value = 1200000;
  f->v[0].start_ns = 5000000;
  f->v[0].end_ns = 6200000;
  f->v[0].wall_ms = 1764745200250; /* 2025-12-03T07:00:00.250Z */
  f->v[0].number = 2;
  f->v[0].seg_first = 4;
  f->v[0].off_first = 4096;
  f->v[1].value = 1100000;
  f->v[1].start_ns = 9000000;
  f->v[1].end_ns = 10100000;
  f->v[1].wall_ms = 0; /* a replay: no wall clock */
  f->v[1].number = 3;
  f->b[0].worst = &f->v[0];
  f->b[0].recent = f->vp;
  f->b[0].n_recent = 2;
  f->c[0].handle = 3;
  f->c[0].area = (char *)"SysTick_Handler";
  f->c[0].context = (char *)"core0";
  f->c[0].count = 3;
  f->c[1].handle = 3;
  f->c[1].area = (char *)"SysTick_Handler";
  f->c[1].context = (char *)"core1";
  f->c[1].count = 1;
  f->b[0].counts = f->cp;
  f->b[0].n_counts = 2;
  f->b[1].name = (char *)"task_net";
  f->b[1].area = (char *)"Task*";
  f->b[1].context = (char *)"";
  f->b[1].stat = (char *)"net";
  f->b[1].has_min = 1;
  f->b[1].min = 950000;
  f->b[1].origin = (char *)"b.ini:7";
  f->b[2].name = (char *)"burst";
  f->b[2].area = (char *)"00000009";
  f->b[2].context = (char *)"core1";
  f->b[2].stat = (char *)"rate";
  f->b[2].has_max = 1;
  f->b[2].max = 5;
  f->b[2].window_ns = 1000000000;
  f->b[2].origin = (char *)"b.ini:13";
}

/* The words of line `n` (0: the header) of text s, into w (at most 16). */
static size_t words(const char *s, int n, char w[16][64]) {
  const char *p = s, *e;
  size_t k = 0;
  while (n-- > 0) {
    p = strchr(p, '\n');
    assert_non_null(p);
    p++;
  }
  e = strchr(p, '\n');
  assert_non_null(e);
  while (p < e && k < 16) {
    size_t l;
    while (p < e && *p == ' ')
      p++;
    if (p == e)
      break;
    l = strcspn(p, " \n");
    snprintf(w[k++], 64, "%.*s", (int)l, p);
    p += l;
  }
  return k;
}

static void test_table(void **state) {
  fixture_t f;
  tlc_out_t o;
  char *s, w[16][64];
  (void)state;
  fixture(&f);
  tlc_out_init(&o, 0, NULL, NULL);
  tlc_cli_vfmt_table(&o, &f.r);
  s = text_of(&o);
  assert_int_equal(words(s, 0, w), 11);
  assert_string_equal(w[0], "BUDGET");
  assert_string_equal(w[10], "REF");
  /* core0: 3 violations, worst #2 1.2ms at its wall clock, last #3 1.1ms at its target time */
  assert_int_equal(words(s, 1, w), 11);
  assert_string_equal(w[0], "isr_tick");
  assert_string_equal(w[1], "SysTick_Handler");
  assert_string_equal(w[2], "core0");
  assert_string_equal(w[3], "period");
  assert_string_equal(w[4], "<=1.05ms");
  assert_string_equal(w[5], "3");
  assert_string_equal(w[6], "1.2ms");
  assert_string_equal(w[7], "2025-12-03T07:00:00.250Z");
  assert_string_equal(w[8], "1.1ms");
  assert_string_equal(w[9], "ns:9000000");
  assert_string_equal(w[10], "v:isr_tick:2");
  /* core1: counted, none kept */
  assert_int_equal(words(s, 2, w), 11);
  assert_string_equal(w[2], "core1");
  assert_string_equal(w[5], "1");
  assert_string_equal(w[6], "-");
  assert_string_equal(w[8], "-");
  assert_string_equal(w[10], "-");
  /* a budget without violations: its own line, "any" context */
  assert_int_equal(words(s, 3, w), 11);
  assert_string_equal(w[0], "task_net");
  assert_string_equal(w[1], "Task*");
  assert_string_equal(w[2], "any");
  assert_string_equal(w[4], ">=950us");
  assert_string_equal(w[5], "0");
  /* rate: a count per window */
  assert_int_equal(words(s, 4, w), 11);
  assert_string_equal(w[0], "burst");
  assert_string_equal(w[2], "core1");
  assert_string_equal(w[4], "<=5/1s");
  assert_null(strstr(s, "not counted"));
  free(s);
  tlc_out_fini(&o);
  /* dropped keys are said */
  f.r.dropped_keys = 12;
  tlc_out_init(&o, 0, NULL, NULL);
  tlc_cli_vfmt_table(&o, &f.r);
  s = text_of(&o);
  assert_non_null(strstr(s, "\n12 violations not counted per area and context"));
  free(s);
  tlc_out_fini(&o);
}

static void test_json(void **state) {
  fixture_t f;
  tlc_out_t o;
  tlc_json_w_t w;
  char *s;
  (void)state;
  fixture(&f);
  tlc_out_init(&o, 0, NULL, NULL);
  tlc_json_w_init(&w, &o, 1);
  tlc_cli_vfmt_json(&w, &f.r);
  s = text_of(&o);
  {
    static const char head[] = "{\"target\":\"lab1\",\"total\":4,\"dropped_keys\":0,\"budgets\":[";
    assert_memory_equal(s, head, sizeof(head) - 1);
  }
  assert_non_null(strstr(s, "{\"name\":\"isr_tick\",\"area\":\"SysTick_Handler\",\"context\":\"\","
                            "\"stat\":\"period\",\"max\":1050000,\"origin\":\"b.ini:1\","
                            "\"total\":4,\"worst\":{\"budget\":\"isr_tick\""));
  assert_non_null(strstr(s, "\"value\":1200000,\"limit\":1050000,\"start_ns\":5000000,"
                            "\"end_ns\":6200000,\"epoch\":0,\"wall_ms\":1764745200250"));
  assert_non_null(strstr(s, "\"number\":2,\"ref\":\"v:isr_tick:2\",\"seg_first\":4,"
                            "\"off_first\":4096"));
  assert_non_null(strstr(s, "\"counts\":[{\"handle\":3,\"area\":\"SysTick_Handler\","
                            "\"context\":\"core0\",\"state\":0,\"count\":3},"));
  assert_non_null(strstr(s, "{\"name\":\"task_net\",\"area\":\"Task*\",\"context\":\"\","
                            "\"stat\":\"net\",\"min\":950000,\"origin\":\"b.ini:7\",\"total\":0,"
                            "\"worst\":null,\"recent\":[],\"counts\":[]}"));
  assert_non_null(strstr(s, "\"stat\":\"rate\",\"max\":5,\"window_ns\":1000000000"));
  assert_true(s[strlen(s) - 1] == '}');
  free(s);
  tlc_out_fini(&o);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_durations),
    cmocka_unit_test(test_table),
    cmocka_unit_test(test_json),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
