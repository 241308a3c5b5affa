/* test_rtos.c - packed task variables (formats/rtos.h): the public winIDEA RTOS description
 * (../shared/samples/winidea/FreeRTOSProfiler.xml, read where it lies: TLC_WINIDEA_SAMPLES_DIR)
 * gives FreeRTOS's masks, states and task names; the value lists of context_running and
 * context_stopped; and every refusal of a bad description, with its reason.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "base/err.h"
#include "formats/rtos.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef TLC_WINIDEA_SAMPLES_DIR
#error "TLC_WINIDEA_SAMPLES_DIR must name ../shared/samples/winidea (or be empty)"
#endif

static char *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  char *buf;
  long n;
  assert_non_null(f);
  assert_int_equal(fseek(f, 0, SEEK_END), 0);
  n = ftell(f);
  assert_true(n > 0);
  rewind(f);
  buf = malloc((size_t)n);
  assert_non_null(buf);
  assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
  fclose(f);
  *len = (size_t)n;
  return buf;
}

static void test_freertos_sample(void **state) {
  size_t len;
  char *buf;
  tlc_ctxpack_t p;
  tlc_mapping_t m;
  tlc_parse_err_t e;
  uint64_t task = 0;
  (void)state;
  if (TLC_WINIDEA_SAMPLES_DIR[0] == 0) {
    print_message("../shared/samples/winidea not found at configure time: skipped\n");
    skip();
  }
  buf = slurp(TLC_WINIDEA_SAMPLES_DIR "/FreeRTOSProfiler.xml", &len);
  tlc_mapping_init(&m);
  assert_int_equal(tlc_rtos_parse(buf, len, &p, &m, &e), 0);
  assert_int_equal(p.id_mask, 0xFFFF);
  assert_int_equal(p.state_mask, 0xFF0000);
  assert_int_equal(p.shift, 16);
  assert_int_equal(p.nrun, 1);
  assert_int_equal(p.run[0], 1); /* RUNNING */
  assert_int_equal(p.nstop, 4);  /* READY, DELETED, BLOCKED, SUSPENDED */
  assert_int_equal(p.stop[0], 2);
  assert_int_equal(p.stop[1], 4);
  assert_int_equal(p.stop[2], 5);
  assert_int_equal(p.stop[3], 6);
  assert_int_equal(p.stop_all, 0);
  tlc_mapping_finish(&m);
  assert_int_equal(m.ncontexts, 5);
  assert_string_equal(tlc_mapping_ctx_name(&m, 0), "IDLE");
  assert_string_equal(tlc_mapping_ctx_name(&m, 1), "Tmr Svc");
  assert_string_equal(tlc_mapping_ctx_name(&m, 4), "MessageQueueCon");
  /* the firmware's writes: (state << 16) + task tag, a blocking reason in bits 24-31 */
  assert_int_equal(tlc_ctxpack_classify(&p, (1u << 16) + 2, &task), TLC_CTXPACK_RUN);
  assert_int_equal(task, 2);
  assert_int_equal(tlc_ctxpack_classify(&p, (7u << 24) + (5u << 16) + 3, &task), TLC_CTXPACK_STOP);
  assert_int_equal(task, 3);
  assert_int_equal(tlc_ctxpack_classify(&p, (9u << 24) + (1u << 16) + 4, &task), TLC_CTXPACK_RUN);
  assert_int_equal(task, 4);
  /* CREATED (3) is in neither list */
  assert_int_equal(tlc_ctxpack_classify(&p, (3u << 16) + 1, &task), TLC_CTXPACK_NONE);
  tlc_mapping_fini(&m);
  free(buf);
}

static void test_lists(void **state) {
  tlc_ctxpack_t p;
  uint64_t task, v;
  (void)state;
  tlc_ctxpack_default(&p);
  assert_false(tlc_ctxpack_on(&p));
  assert_int_equal(tlc_ctxpack_parse_mask("0x0000FFFF", &p.id_mask), 0);
  assert_int_equal(tlc_ctxpack_parse_mask(" ff0000 ", &p.state_mask), 0);
  tlc_ctxpack_finish(&p);
  assert_true(tlc_ctxpack_on(&p));
  /* defaults: 1 runs, every other state stops */
  assert_int_equal(tlc_ctxpack_classify(&p, 0x10007, &task), TLC_CTXPACK_RUN);
  assert_int_equal(tlc_ctxpack_classify(&p, 0x30007, &task), TLC_CTXPACK_STOP);
  assert_int_equal(tlc_ctxpack_parse_list("1, 0x3", p.run, &p.nrun), 0);
  assert_int_equal(p.nrun, 2);
  assert_int_equal(p.run[1], 3);
  assert_int_equal(tlc_ctxpack_parse_list("2 5", p.stop, &p.nstop), 0);
  p.stop_all = 0;
  assert_int_equal(tlc_ctxpack_classify(&p, 0x30007, &task), TLC_CTXPACK_RUN);
  assert_int_equal(tlc_ctxpack_classify(&p, 0x50007, &task), TLC_CTXPACK_STOP);
  assert_int_equal(tlc_ctxpack_classify(&p, 0x60007, &task), TLC_CTXPACK_NONE);
  assert_int_equal(tlc_ctxpack_parse_list("", p.run, &p.nrun), TLC_EINVAL);
  assert_int_equal(tlc_ctxpack_parse_list("1,x", p.run, &p.nrun), TLC_EINVAL);
  assert_int_equal(tlc_ctxpack_parse_list("1 2 3 4 5 6 7 8 9 a b c d e f 10 11 12 13 14 15 16 "
                                          "17 18 19 1a 1b 1c 1d 1e 1f 20 21",
                                          p.run, &p.nrun),
                   TLC_EINVAL);
  assert_int_equal(tlc_ctxpack_parse_mask("0", &v), TLC_EINVAL);
  assert_int_equal(tlc_ctxpack_parse_mask("0x", &v), TLC_EINVAL);
  assert_int_equal(tlc_ctxpack_parse_mask("12345678123456781", &v), TLC_EINVAL);
}

#define HEAD                                                                                       \
  "<OperatingSystem><Types><TypeEnum><Name>S</Name><Enum><Name>RUN</Name><Value>0x1</Value>"       \
  "</Enum><Enum><Name>WAIT</Name><Value>2</Value></Enum></TypeEnum></Types>"

static int parse_str(const char *s, tlc_parse_err_t *e) {
  tlc_ctxpack_t p;
  tlc_mapping_t m;
  int r;
  tlc_mapping_init(&m);
  r = tlc_rtos_parse(s, strlen(s), &p, &m, e);
  tlc_mapping_fini(&m);
  return r;
}

static void test_refused(void **state) {
  tlc_parse_err_t e;
  char big[700];
  (void)state;
  assert_int_equal(parse_str("<Other/>", &e), TLC_ESYNTAX);
  assert_non_null(strstr(e.reason, "OperatingSystem"));
  assert_int_equal(parse_str("<OperatingSystem", &e), TLC_ESYNTAX);
  assert_non_null(strstr(e.reason, "XML"));
  assert_int_equal(parse_str("<!DOCTYPE a [<!ENTITY x \"y\">]><OperatingSystem/>", &e),
                   TLC_ESYNTAX);
  assert_int_equal(parse_str(HEAD "</OperatingSystem>", &e), TLC_ESYNTAX);
  assert_non_null(strstr(e.reason, "TaskState"));
  assert_int_equal(parse_str(HEAD "<Profiler><Object><TaskState><MaskID>zz</MaskID></TaskState>"
                                  "</Object></Profiler></OperatingSystem>",
                             &e),
                   TLC_ESYNTAX);
  assert_non_null(strstr(e.reason, "MaskID"));
  assert_int_equal(parse_str(HEAD "<Profiler><Object><TaskState><MaskID>ff</MaskID>"
                                  "<Type>S</Type><StateInfo><Name>RUN</Name><Property>Run"
                                  "</Property></StateInfo></TaskState></Object></Profiler>"
                                  "</OperatingSystem>",
                             &e),
                   TLC_ESYNTAX);
  assert_non_null(strstr(e.reason, "MaskState"));
  assert_int_equal(parse_str(HEAD "<Profiler><Object><TaskState><MaskID>ff</MaskID><MaskState>"
                                  "f00</MaskState><Type>S</Type><StateInfo><Name>GONE</Name>"
                                  "<Property>Run</Property></StateInfo></TaskState></Object>"
                                  "</Profiler></OperatingSystem>",
                             &e),
                   TLC_ESYNTAX);
  assert_non_null(strstr(e.reason, "GONE"));
  assert_int_equal(parse_str(HEAD "<Profiler><Object><TaskState><MaskID>ff</MaskID><MaskState>"
                                  "f00</MaskState><Type>S</Type><StateInfo><Name>WAIT</Name>"
                                  "<Property>Terminate</Property></StateInfo></TaskState>"
                                  "</Object></Profiler></OperatingSystem>",
                             &e),
                   TLC_ESYNTAX);
  assert_non_null(strstr(e.reason, "Run"));
  memset(big, 'a', sizeof(big));
  memcpy(big, "<OperatingSystem><Types><TypeEnum><Name>", 40);
  strcpy(big + 560, "</Name></TypeEnum></Types></OperatingSystem>");
  assert_int_equal(parse_str(big, &e), TLC_ELIMIT);
  assert_non_null(strstr(e.reason, "longer"));
}

static void test_small_description(void **state) {
  static const char doc[] =
      HEAD "<Profiler><Object><Type>T</Type><TaskState><MaskID>0xFF</MaskID><MaskState>0xF00"
           "</MaskState><Type>S</Type><StateInfo><Name>RUN</Name><Property>Run</Property>"
           "</StateInfo><StateInfo><Name>WAIT</Name><Property>Terminate</Property></StateInfo>"
           "</TaskState></Object></Profiler><Types><TypeEnum><Name>T</Name><Enum><Name>a</Name>"
           "<Value>7</Value></Enum></TypeEnum></Types></OperatingSystem>";
  tlc_ctxpack_t p;
  tlc_mapping_t m;
  tlc_parse_err_t e;
  uint64_t task;
  (void)state;
  tlc_mapping_init(&m);
  /* Types after the Profiler: names are resolved at the end */
  assert_int_equal(tlc_rtos_parse(doc, strlen(doc), &p, &m, &e), 0);
  tlc_mapping_finish(&m);
  assert_int_equal(p.shift, 8);
  assert_string_equal(tlc_mapping_ctx_name(&m, 7), "a");
  assert_int_equal(tlc_ctxpack_classify(&p, 0x207, &task), TLC_CTXPACK_STOP);
  assert_int_equal(tlc_ctxpack_classify(&p, 0x307, &task), TLC_CTXPACK_NONE);
  tlc_mapping_fini(&m);
  /* names NULL: only the pack */
  assert_int_equal(tlc_rtos_parse(doc, strlen(doc), &p, NULL, &e), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_freertos_sample),
    cmocka_unit_test(test_lists),
    cmocka_unit_test(test_refused),
    cmocka_unit_test(test_small_description),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
