/* test_preamble.c - the stream preamble line: every outcome, byte by byte arrival, limits. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "formats/preamble.h"

#include <string.h>

static int parse(const char *s, int eof, tlc_preamble_t *p, char *why) {
  return tlc_preamble_parse(s, strlen(s), eof, 64, p, why, 128);
}

static void test_valid(void **state) {
  tlc_preamble_t p;
  char why[128];
  const char *line = "TLCAP/1 target=lab1 format=evlog\n";
  (void)state;
  assert_int_equal(parse("TLCAP/1 target=lab1 format=evlog\nREST", 0, &p, why), TLC_PRE_OK);
  assert_int_equal(p.length, strlen(line));
  assert_true(p.has_name);
  assert_string_equal(p.name, "lab1");
  assert_int_equal(p.format, TLC_FMT_EVLOG);
  /* CRLF, extra spaces, unknown keys, order, format only */
  assert_int_equal(parse("TLCAP/1  format=bin10   x=y target=a.b:1#2[0]\r\n", 0, &p, why),
                   TLC_PRE_OK);
  assert_string_equal(p.name, "a.b:1#2[0]");
  assert_int_equal(p.format, TLC_FMT_BIN10);
  assert_int_equal(parse("TLCAP/1 format=bin11\n", 0, &p, why), TLC_PRE_OK);
  assert_false(p.has_name);
  assert_int_equal(parse("TLCAP/1 \n", 0, &p, why), TLC_PRE_OK);
  assert_int_equal(p.format, TLC_FMT_NONE);
}

static void test_none_and_more(void **state) {
  tlc_preamble_t p;
  char why[128];
  const char *line = "TLCAP/1 target=x\n";
  size_t i;
  (void)state;
  /* a bin11 record, or anything not starting with the magic */
  assert_int_equal(tlc_preamble_parse("\x00\x00\x00\x00", 4, 0, 64, &p, why, 128), TLC_PRE_NONE);
  assert_int_equal(parse("TLCAP/2 target=x\n", 0, &p, why), TLC_PRE_NONE);
  assert_int_equal(parse("", 0, &p, why), TLC_PRE_MORE);
  /* every prefix of a valid line needs more bytes; the whole line is OK */
  for (i = 0; i < strlen(line); i++)
    assert_int_equal(tlc_preamble_parse(line, i, 0, 64, &p, why, 128), TLC_PRE_MORE);
  assert_int_equal(tlc_preamble_parse(line, strlen(line), 0, 64, &p, why, 128), TLC_PRE_OK);
  /* a stream that ends inside the magic has no preamble; inside the line, a bad one */
  assert_int_equal(tlc_preamble_parse(line, 5, 1, 64, &p, why, 128), TLC_PRE_NONE);
  assert_int_equal(tlc_preamble_parse(line, 10, 1, 64, &p, why, 128), TLC_PRE_BAD);
  assert_non_null(strstr(why, "cut short"));
}

static void test_bad(void **state) {
  tlc_preamble_t p;
  char why[128], longline[400];
  (void)state;
  assert_int_equal(parse("TLCAP/1 format=bin12\n", 0, &p, why), TLC_PRE_BAD);
  assert_non_null(strstr(why, "unknown format \"bin12\""));
  assert_int_equal(parse("TLCAP/1 format=\n", 0, &p, why), TLC_PRE_BAD);
  assert_int_equal(parse("TLCAP/1 target=\n", 0, &p, why), TLC_PRE_BAD);
  assert_int_equal(parse("TLCAP/1 target=../etc\n", 0, &p, why), TLC_PRE_BAD);
  assert_int_equal(parse("TLCAP/1 target=a/b\n", 0, &p, why), TLC_PRE_BAD);
  assert_non_null(strstr(why, "invalid target name"));
  assert_int_equal(parse("TLCAP/1 target=.hidden\n", 0, &p, why), TLC_PRE_BAD);
  /* refused: another address's automatic name, a name cut at a NUL, control characters */
  assert_int_equal(parse("TLCAP/1 target=lab@10.9.9.9\n", 0, &p, why), TLC_PRE_BAD);
  assert_non_null(strstr(why, "'@'"));
  {
    static const char nul[] = "TLCAP/1 target=abc\0../../x format=bin11\n";
    assert_int_equal(tlc_preamble_parse(nul, sizeof(nul) - 1, 0, 64, &p, why, 128), TLC_PRE_BAD);
    assert_non_null(strstr(why, "NUL"));
  }
  assert_int_equal(parse("TLCAP/1 target=a\x01b\n", 0, &p, why), TLC_PRE_BAD);
  assert_int_equal(parse("TLCAP/1 target=a\x7f\n", 0, &p, why), TLC_PRE_BAD);
  /* 65 bytes with a cap of 64 */
  assert_int_equal(
      parse("TLCAP/1 target=aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\n", 0,
            &p, why),
      TLC_PRE_BAD);
  /* no newline within 256 bytes: bad, whatever follows */
  memset(longline, 'x', sizeof(longline));
  memcpy(longline, "TLCAP/1 ", 8);
  assert_int_equal(tlc_preamble_parse(longline, sizeof(longline), 0, 64, &p, why, 128),
                   TLC_PRE_BAD);
  assert_non_null(strstr(why, "longer than 256"));
  assert_int_equal(tlc_preamble_parse(longline, 255, 0, 64, &p, why, 128), TLC_PRE_MORE);
  longline[255] = '\n'; /* a 256-byte line is still fine */
  assert_int_equal(tlc_preamble_parse(longline, sizeof(longline), 0, 64, &p, why, 128), TLC_PRE_OK);
  assert_int_equal(p.length, 256);
}

static void test_names(void **state) {
  (void)state;
  assert_int_equal(tlc_target_name_valid("lab1@127.0.0.1#2", 64), 0);
  assert_int_not_equal(tlc_target_name_valid("", 64), 0);
  assert_int_not_equal(tlc_target_name_valid("a b", 64), 0);
  assert_int_not_equal(tlc_target_name_valid("caf\xc3\xa9", 64), 0);
  assert_int_not_equal(tlc_target_name_valid("abc", 2), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_valid),
    cmocka_unit_test(test_none_and_more),
    cmocka_unit_test(test_bad),
    cmocka_unit_test(test_names),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
