/* test_br.c - the BR profiler file reader, its JSON view and the record emitters.
 *
 * The byte vectors are written out by hand from the seed's record layouts (network byte order);
 * the emitters must reproduce them byte for byte, and every error the reader can report is
 * provoked once with its expected offset.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "base/alloc.h"
#include "base/err.h"
#include "formats/br.h"
#include "testalloc.h"

#include <stdlib.h>
#include <string.h>

static const uint8_t profile[] = {
  /* 0: CREATE MODULE MAPPING module 1, "main.br" */
  1,
  0x00,
  0x01,
  0x00,
  0x07,
  'm',
  'a',
  'i',
  'n',
  '.',
  'b',
  'r',
  /* 12: CURRENT LINE module 1, line 10, clause 2 */
  3,
  0x00,
  0x01,
  0x00,
  0x00,
  0x00,
  0x0A,
  0x02,
  /* 20: FUNCTION NAME "foo", 25: GOSUB */
  7,
  3,
  'f',
  'o',
  'o',
  8,
  /* 26: TIME SPENT 256 ns */
  4,
  0,
  0,
  0,
  0,
  0,
  0,
  0x01,
  0x00,
  /* 35: BACKTRACE module 2, line 65536, clause 0; 43: FUNCTION NAME "bar"; 48: MAIN ROUTINE */
  5,
  0x00,
  0x02,
  0x00,
  0x01,
  0x00,
  0x00,
  0x00,
  7,
  3,
  'b',
  'a',
  'r',
  9,
  /* 49: END CURRENT LINE */
  6,
  /* 50: the same position again, named "foo" again, 0x0102030405060708 ns */
  3,
  0x00,
  0x01,
  0x00,
  0x00,
  0x00,
  0x0A,
  0x02,
  7,
  3,
  'f',
  'o',
  'o',
  4,
  1,
  2,
  3,
  4,
  5,
  6,
  7,
  8,
  6,
  /* 73: a sampled-style entry: no time, module 0xFFFF line 0xFFFFFFFF clause 255 */
  3,
  0xFF,
  0xFF,
  0xFF,
  0xFF,
  0xFF,
  0xFF,
  0xFF,
  6,
  /* 82: module 1 mapped again to the same file: allowed */
  1,
  0x00,
  0x01,
  0x00,
  0x07,
  'm',
  'a',
  'i',
  'n',
  '.',
  'b',
  'r',
};

static void test_parse_profile(void **state) {
  tlc_br_t b;
  tlc_parse_err_t e;
  const tlc_br_line_t *l;
  const tlc_br_frame_t *f;
  (void)state;
  tlc_br_init(&b);
  assert_int_equal(tlc_br_parse(&b, profile, sizeof(profile), &e), 0);
  assert_int_equal(b.records, 16);
  assert_int_equal(b.by_type[TLC_BR_MODULE], 2);
  assert_int_equal(b.by_type[TLC_BR_CURRENT_LINE], 3);
  assert_int_equal(b.by_type[TLC_BR_TIME], 2);
  assert_int_equal(b.by_type[TLC_BR_BACKTRACE], 1);
  assert_int_equal(b.by_type[TLC_BR_FUNCTION], 3);
  assert_int_equal(b.by_type[TLC_BR_GOSUB], 1);
  assert_int_equal(b.by_type[TLC_BR_MAIN], 1);
  assert_int_equal(b.by_type[TLC_BR_END], 3);
  assert_int_equal(b.nmodules, 1);
  assert_string_equal(tlc_br_module_file(&b, 1), "main.br");
  assert_null(tlc_br_module_file(&b, 2));
  assert_int_equal(b.nnames, 2); /* "foo" interned once */
  assert_int_equal(b.nlines, 3);
  l = &b.lines[0];
  assert_int_equal(l->offset, 12);
  assert_int_equal(l->at.module, 1);
  assert_int_equal(l->at.line, 10);
  assert_int_equal(l->at.clause, 2);
  assert_string_equal(b.names[l->at.function], "foo");
  assert_int_equal(l->at.flags, TLC_BR_F_GOSUB);
  assert_int_equal(l->has_time, 1);
  assert_int_equal(l->time_ns, 256);
  assert_int_equal(l->nbt, 1);
  f = &b.frames[l->first_bt];
  assert_int_equal(f->module, 2);
  assert_int_equal(f->line, 65536);
  assert_int_equal(f->clause, 0);
  assert_string_equal(b.names[f->function], "bar");
  assert_int_equal(f->flags, TLC_BR_F_MAIN);
  l = &b.lines[1];
  assert_int_equal(l->offset, 50);
  assert_int_equal(l->at.function, b.lines[0].at.function);
  assert_int_equal(l->time_ns, 0x0102030405060708ull);
  assert_int_equal(l->nbt, 0);
  l = &b.lines[2];
  assert_int_equal(l->offset, 73);
  assert_int_equal(l->at.module, 0xFFFF);
  assert_int_equal(l->at.line, 0xFFFFFFFFu);
  assert_int_equal(l->at.clause, 255);
  assert_int_equal(l->has_time, 0);
  assert_int_equal(l->at.function, TLC_BR_NONAME);
  tlc_br_fini(&b);
}

static void test_emitters_round_trip(void **state) {
  tlc_out_t o;
  size_t len;
  char *bytes;
  (void)state;
  tlc_out_init(&o, 0, NULL, NULL);
  assert_int_equal(tlc_br_write_module(&o, 1, "main.br"), 0);
  tlc_br_write_current_line(&o, 1, 10, 2);
  assert_int_equal(tlc_br_write_function(&o, "foo"), 0);
  tlc_br_write_gosub(&o);
  tlc_br_write_time(&o, 256);
  tlc_br_write_backtrace(&o, 2, 65536, 0);
  tlc_br_write_function(&o, "bar");
  tlc_br_write_main(&o);
  tlc_br_write_end(&o);
  tlc_br_write_current_line(&o, 1, 10, 2);
  tlc_br_write_function(&o, "foo");
  tlc_br_write_time(&o, 0x0102030405060708ull);
  tlc_br_write_end(&o);
  tlc_br_write_current_line(&o, 0xFFFF, 0xFFFFFFFFu, 255);
  tlc_br_write_end(&o);
  tlc_br_write_module(&o, 1, "main.br");
  bytes = tlc_out_take(&o, &len);
  assert_non_null(bytes);
  assert_int_equal(len, sizeof(profile));
  assert_memory_equal(bytes, profile, sizeof(profile));
  tlc_free(bytes);
  tlc_out_fini(&o);
}

static void test_long_names_cut(void **state) {
  char name[300], *file = malloc(70000), *bytes;
  tlc_out_t o;
  tlc_br_t b;
  tlc_parse_err_t e;
  size_t len;
  (void)state;
  memset(name, 'n', sizeof(name) - 1);
  name[sizeof(name) - 1] = '\0';
  memset(file, 'f', 69999);
  file[69999] = '\0';
  tlc_out_init(&o, 0, NULL, NULL);
  assert_int_equal(tlc_br_write_module(&o, 9, file), 1);
  tlc_br_write_current_line(&o, 9, 1, 0);
  assert_int_equal(tlc_br_write_function(&o, name), 1);
  tlc_br_write_end(&o);
  bytes = tlc_out_take(&o, &len);
  assert_int_equal(len, 5 + 65535 + 8 + 2 + 255 + 1);
  tlc_br_init(&b);
  assert_int_equal(tlc_br_parse(&b, (const uint8_t *)bytes, len, &e), 0);
  assert_int_equal(strlen(tlc_br_module_file(&b, 9)), 65535);
  assert_int_equal(strlen(b.names[b.lines[0].at.function]), 255);
  tlc_br_fini(&b);
  tlc_free(bytes);
  tlc_out_fini(&o);
  free(file);
}

static void test_json(void **state) {
  static const uint8_t small[] = { 1, 0, 1, 0, 1, 'm', 3, 0,  1, 0, 0, 0, 5, 0, 7, 1, 'f', 4,
                                   0, 0, 0, 0, 0, 0,   0, 10, 5, 0, 2, 0, 0, 0, 9, 1, 8,   6,
                                   3, 0, 1, 0, 0, 0,   5, 0,  4, 0, 0, 0, 0, 0, 0, 0, 7,   6 };
  static const char expect[] =
      "{\n"
      "  \"schema\": \"tlcap-br/1\",\n"
      "  \"records\": 10,\n"
      "  \"timed\": true,\n"
      "  \"modules\": [\n"
      "    {\"number\": 1, \"file\": \"m\"}\n"
      "  ],\n"
      "  \"lines\": [\n"
      "    {\"offset\": 6, \"module\": 1, \"file\": \"m\", \"line\": 5, \"clause\": 0, "
      "\"function\": \"f\", \"gosub\": false, \"main\": false, \"time_ns\": 10, \"backtrace\": "
      "[{\"module\": 2, \"file\": null, \"line\": 9, \"clause\": 1, \"function\": null, \"gosub\": "
      "true, \"main\": false}]},\n"
      "    {\"offset\": 36, \"module\": 1, \"file\": \"m\", \"line\": 5, \"clause\": 0, "
      "\"function\": null, \"gosub\": false, \"main\": false, \"time_ns\": 7, \"backtrace\": []}\n"
      "  ],\n"
      "  \"summary\": [\n"
      "    {\"module\": 1, \"file\": \"m\", \"line\": 5, \"clause\": 0, \"entries\": 2, "
      "\"time_ns\": 17}\n"
      "  ]\n"
      "}\n";
  tlc_br_t b;
  tlc_parse_err_t e;
  tlc_out_t o;
  size_t n;
  char *js;
  (void)state;
  tlc_br_init(&b);
  assert_int_equal(tlc_br_parse(&b, small, sizeof(small), &e), 0);
  tlc_out_init(&o, 0, NULL, NULL);
  assert_int_equal(tlc_br_to_json(&b, &o), 0);
  js = tlc_out_take(&o, &n);
  assert_string_equal(js, expect);
  tlc_free(js);
  tlc_out_fini(&o);
  tlc_br_fini(&b);
  /* an empty file is an empty profile */
  tlc_br_init(&b);
  assert_int_equal(tlc_br_parse(&b, small, 0, &e), 0);
  tlc_out_init(&o, 0, NULL, NULL);
  assert_int_equal(tlc_br_to_json(&b, &o), 0);
  js = tlc_out_take(&o, &n);
  assert_string_equal(js,
                      "{\n  \"schema\": \"tlcap-br/1\",\n  \"records\": 0,\n  \"timed\": false,\n"
                      "  \"modules\": [],\n  \"lines\": [],\n  \"summary\": []\n}\n");
  tlc_free(js);
  tlc_out_fini(&o);
  tlc_br_fini(&b);
}

static void expect_err(const uint8_t *p, size_t n, int code, uint64_t off, const char *part) {
  tlc_br_t b;
  tlc_parse_err_t e;
  tlc_br_init(&b);
  assert_int_equal(tlc_br_parse(&b, p, n, &e), code);
  assert_int_equal(e.offset, off);
  assert_int_equal(e.line, 0);
  if (strstr(e.reason, part) == NULL)
    fail_msg("reason \"%s\" does not contain \"%s\"", e.reason, part);
  tlc_br_fini(&b);
}

#define E(code, off, part, ...)                                                                    \
  do {                                                                                             \
    static const uint8_t v_[] = { __VA_ARGS__ };                                                   \
    expect_err(v_, sizeof(v_), code, off, part);                                                   \
  } while (0)

static void test_errors(void **state) {
  (void)state;
  E(TLC_EFRAME, 0, "unknown record type 2", 2);
  E(TLC_EFRAME, 0, "unknown record type 0", 0);
  E(TLC_EFRAME, 6, "unknown record type 10", 1, 0, 1, 0, 1, 'm', 10);
  E(TLC_ETRUNC, 0, "CURRENT LINE record runs past", 3, 0, 1, 0, 0);
  E(TLC_ETRUNC, 0, "CREATE MODULE MAPPING record runs past", 1, 0, 1);
  E(TLC_ETRUNC, 0, "(6 of 7 bytes)", 1, 0, 1, 0, 2, 'm');
  E(TLC_ETRUNC, 9, "FUNCTION NAME record runs past", 3, 0, 1, 0, 0, 0, 1, 0, 6, 7, 4, 'a');
  E(TLC_ETRUNC, 8, "TIME SPENT IN LINE record runs past", 3, 0, 1, 0, 0, 0, 1, 0, 4, 0, 0);
  E(TLC_ETRUNC, 8, "BACKTRACE INFORMATION record runs past", 3, 0, 1, 0, 0, 0, 1, 0, 5);
  E(TLC_EFRAME, 0, "TIME SPENT IN LINE outside", 4, 0, 0, 0, 0, 0, 0, 0, 1);
  E(TLC_EFRAME, 17, "second TIME SPENT", 3, 0, 1, 0, 0, 0, 1, 0, 4, 0, 0, 0, 0, 0, 0, 0, 1, 4, 0, 0,
    0, 0, 0, 0, 0, 1, 6);
  E(TLC_EFRAME, 0, "BACKTRACE INFORMATION outside", 5, 0, 1, 0, 0, 0, 1, 0);
  E(TLC_EFRAME, 0, "FUNCTION NAME record not right after", 7, 1, 'f');
  E(TLC_EFRAME, 17, "FUNCTION NAME record not right after", 3, 0, 1, 0, 0, 0, 1, 0, 4, 0, 0, 0, 0,
    0, 0, 0, 1, 7, 1, 'f', 6);
  E(TLC_EFRAME, 11, "second FUNCTION NAME", 3, 0, 1, 0, 0, 0, 1, 0, 7, 1, 'f', 7, 1, 'g', 6);
  E(TLC_EFRAME, 9, "MAIN ROUTINE after GOSUB", 3, 0, 1, 0, 0, 0, 1, 0, 8, 9, 6);
  E(TLC_EFRAME, 9, "GOSUB after GOSUB", 3, 0, 1, 0, 0, 0, 1, 0, 8, 8, 6);
  E(TLC_EFRAME, 13, "GOSUB record not right after", 3, 0, 1, 0, 0, 0, 1, 0, 1, 0, 1, 0, 0, 8, 6);
  E(TLC_EFRAME, 9, "GOSUB record not right after", 3, 0, 1, 0, 0, 0, 1, 0, 6, 8);
  E(TLC_EFRAME, 0, "END CURRENT LINE outside", 6);
  E(TLC_EFRAME, 8, "CURRENT LINE inside the entry opened at offset 0", 3, 0, 1, 0, 0, 0, 1, 0, 3, 0,
    1, 0, 0, 0, 2, 0, 6);
  E(TLC_ETRUNC, 9, "file ends inside the line entry opened at offset 0", 3, 0, 1, 0, 0, 0, 1, 0, 9);
  E(TLC_EFRAME, 6, "mapped again to a different file (first at offset 0)", 1, 0, 1, 0, 1, 'a', 1, 0,
    1, 0, 1, 'b');
}

static void test_sniff(void **state) {
  static const uint8_t bin11[] = { 0x00, 0x00, 0x00, 0x00, 0x03, 0x00, 0x00, 0x00 };
  static const uint8_t cut[] = { 3, 0, 1, 0, 0, 0 };
  static const uint8_t nested[] = { 3, 0, 1, 0, 0, 0, 1, 0, 3, 0, 1, 0, 0, 0, 1, 0 };
  (void)state;
  assert_int_equal(tlc_br_sniff(profile, sizeof(profile)), 1);
  assert_int_equal(tlc_br_sniff(profile + 12, 14), 1); /* CURRENT LINE, FUNCTION NAME, GOSUB */
  assert_int_equal(tlc_br_sniff(profile, 0), 0);
  assert_int_equal(tlc_br_sniff(bin11, sizeof(bin11)), 0);
  assert_int_equal(tlc_br_sniff(cut, sizeof(cut)), 0);
  assert_int_equal(tlc_br_sniff(nested, sizeof(nested)), 0);
  assert_int_equal(tlc_br_sniff((const uint8_t *)"r f", 3), 0);
}

static void test_caps(void **state) {
  static const uint8_t two[] = { 3, 0, 1, 0, 0, 0, 1, 0, 5, 0, 1, 0, 0, 0, 2, 0, 6,
                                 3, 0, 1, 0, 0, 0, 1, 0, 5, 0, 1, 0, 0, 0, 2, 0, 6 };
  tlc_br_t b;
  tlc_parse_err_t e;
  (void)state;
  tlc_br_init(&b);
  b.max_lines = 1;
  assert_int_equal(tlc_br_parse(&b, two, sizeof(two), &e), TLC_ELIMIT);
  assert_int_equal(e.offset, 17);
  tlc_br_fini(&b);
  tlc_br_init(&b);
  b.max_frames = 1;
  assert_int_equal(tlc_br_parse(&b, two, sizeof(two), &e), TLC_ELIMIT);
  assert_int_equal(e.offset, 25);
  tlc_br_fini(&b);
  tlc_br_init(&b);
  b.max_lines = 2; /* exactly at the caps */
  b.max_frames = 2;
  assert_int_equal(tlc_br_parse(&b, two, sizeof(two), &e), 0);
  tlc_br_fini(&b);
}

static void test_alloc_failures(void **state) {
  uint64_t nth;
  (void)state;
  for (nth = 1;; nth++) {
    tlc_br_t b;
    tlc_parse_err_t e;
    tlc_out_t o;
    int r;
    testalloc_install();
    testalloc_fail_at(nth);
    tlc_br_init(&b);
    r = tlc_br_parse(&b, profile, sizeof(profile), &e);
    if (r == 0) {
      tlc_out_init(&o, 0, NULL, NULL);
      r = tlc_br_to_json(&b, &o);
      tlc_out_fini(&o);
    }
    tlc_br_fini(&b);
    assert_int_equal(testalloc_live_bytes(), 0);
    if (testalloc_failed() == 0) {
      assert_int_equal(r, 0);
      testalloc_uninstall();
      break;
    }
    assert_int_equal(r, TLC_ENOMEM);
    testalloc_uninstall();
  }
  assert_true(nth > 5);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_parse_profile),  cmocka_unit_test(test_emitters_round_trip),
    cmocka_unit_test(test_long_names_cut), cmocka_unit_test(test_json),
    cmocka_unit_test(test_errors),         cmocka_unit_test(test_sniff),
    cmocka_unit_test(test_caps),           cmocka_unit_test(test_alloc_failures),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
