/* test_mapping.c - the mapping readers (Text1 and XML) against exports written out by hand.
 *
 * The Text1 sections are the seed's own examples (seeds/000: CONTEXTS, HANDLE(Functions),
 * HANDLE(Data)); every expected field below was read off the seed by hand. Further cases:
 * reordered macros and literals, the quoting rules of mapping.h (round trip through a writer
 * that follows tlc_mapping_field_needs_quotes, and through tlc_text1_write itself), errors with
 * their line numbers, the XML schema of docs/xml-format.md, caps and allocation failures.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "base/alloc.h"
#include "base/err.h"
#include "formats/mapping.h"
#include "formats/stats.h"
#include "formats/text1.h"
#include "testalloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char seed_text1[] =
    "* INFO %TOTAL_TIME%\n"
    "\n"
    "7962907051\n"
    "\n"
    "* CONTEXTS %NAME%,%HANDLE%\n"
    "\n"
    "ID_TASK_1MS,0x0\n"
    "\n"
    "ID_TASK_3MS_PHigh,0x1\n"
    "\n"
    "ID_TASK_10MS,0x2\n"
    "\n"
    "ID_TASK_100MS,0x3\n"
    "\n"
    "ID_TASK_3MS_PLow,0x4\n"
    "\n"
    "* HANDLE(Functions) %HANDLE%,%NAME%,%VALUE%\n"
    "\n"
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
    "\xC2\xA0\n" /* the seed's pages have no-break spaces on their blank lines */
    "20000000,TestStatic1##s_cStatic,\n"
    "30000000,,0\n"
    "30000000,,1\n"
    "20000001,iCounter,\n"
    "20000002,TestStatic2##s_cStatic,\n"
    "30000002,,0\n"
    "30000002,,2\n"
    "\n"
    "* STATISTICS(Functions) CONTEXT(TSK: extendedTaskFirst) %HANDLE%,%VALUE%,%COUNT%,%T.NET%\n"
    "\n"
    "00000000,,1,37266\n"
    "\n"
    "* TIMELINE %HANDLE%,%EVENT%,%VALUE%,%TIME%\n"
    "\n"
    "20000000,W,00000001,4336\n"
    " 30000000,E,00000005,4336\n"
    "this line, \"unbalanced, is never looked at\n";

static int parse_t1(tlc_mapping_t *m, const char *s, tlc_parse_err_t *e) {
  return tlc_mapping_parse_text1(m, s, strlen(s), e);
}

static void check_area(const tlc_map_area_t *a, uint32_t h, const char *name, int has_value,
                       uint64_t value, uint32_t parent, uint32_t state) {
  assert_non_null(a);
  assert_int_equal(a->handle, h);
  assert_string_equal(a->name, name);
  assert_int_equal(a->has_value, has_value);
  if (has_value)
    assert_int_equal(a->value, value);
  assert_int_equal(a->parent, parent);
  assert_int_equal(a->state_handle, state);
  assert_string_equal(a->file, "");
  assert_string_equal(a->value_type, "");
  assert_string_equal(a->unit, "");
  assert_string_equal(a->path, "");
}

static void test_seed_sections(void **state) {
  tlc_mapping_t m;
  tlc_parse_err_t e;
  const uint32_t N = TLC_NO_HANDLE;
  (void)state;
  tlc_mapping_init(&m);
  assert_int_equal(parse_t1(&m, seed_text1, &e), 0);
  tlc_mapping_finish(&m);
  assert_int_equal(m.ncontexts, 5);
  assert_string_equal(tlc_mapping_ctx_name(&m, 0), "ID_TASK_1MS");
  assert_string_equal(tlc_mapping_ctx_name(&m, 1), "ID_TASK_3MS_PHigh");
  assert_string_equal(tlc_mapping_ctx_name(&m, 2), "ID_TASK_10MS");
  assert_string_equal(tlc_mapping_ctx_name(&m, 3), "ID_TASK_100MS");
  assert_string_equal(tlc_mapping_ctx_name(&m, 4), "ID_TASK_3MS_PLow");
  assert_null(tlc_mapping_ctx_name(&m, 5));
  assert_int_equal(m.nareas, 19);
  check_area(tlc_mapping_find(&m, 0x00000000), 0x00000000, "main", 0, 0, N, N);
  check_area(tlc_mapping_find(&m, 0x10000000), 0x10000000, "{", 1, 0x51, N, N);
  check_area(tlc_mapping_find(&m, 0x10000001), 0x10000001, "{", 1, 0x51, N, N);
  check_area(tlc_mapping_find(&m, 0x10000002), 0x10000002, "otm(fn_main);", 1, 0x52, N, N);
  check_area(tlc_mapping_find(&m, 0x10000003), 0x10000003, "CPU_Init();", 1, 0x54, N, N);
  check_area(tlc_mapping_find(&m, 0x10000004), 0x10000004, "TestStatic1();", 1, 0x59, N, N);
  check_area(tlc_mapping_find(&m, 0x10000005), 0x10000005, "TestStatic2();", 1, 0x60, N, N);
  check_area(tlc_mapping_find(&m, 0x10000006), 0x10000006, "}", 1, 0x97, N, N);
  check_area(tlc_mapping_find(&m, 0x00000001), 0x00000001, "\"TestStatic1.c\"#StaticFunc", 0, 0, N,
             N);
  check_area(tlc_mapping_find(&m, 0x10000007), 0x10000007, "{", 1, 6, N, N);
  check_area(tlc_mapping_find(&m, 0x10000008), 0x10000008, "g_cStaticSignal = STATIC;", 1, 7, N, N);
  check_area(tlc_mapping_find(&m, 0x10000009), 0x10000009, "}", 1, 8, N, N);
  /* the states listed right after their variables are linked to them */
  check_area(tlc_mapping_find(&m, 0x20000000), 0x20000000, "TestStatic1##s_cStatic", 0, 0, N,
             0x30000000);
  check_area(tlc_mapping_find_value(&m, 0x30000000, 0), 0x30000000, "", 1, 0, 0x20000000, N);
  check_area(tlc_mapping_find_value(&m, 0x30000000, 1), 0x30000000, "", 1, 1, 0x20000000, N);
  check_area(tlc_mapping_find(&m, 0x20000001), 0x20000001, "iCounter", 0, 0, N, N);
  check_area(tlc_mapping_find(&m, 0x20000002), 0x20000002, "TestStatic2##s_cStatic", 0, 0, N,
             0x30000002);
  check_area(tlc_mapping_find_value(&m, 0x30000002, 0), 0x30000002, "", 1, 0, 0x20000002, N);
  check_area(tlc_mapping_find_value(&m, 0x30000002, 2), 0x30000002, "", 1, 2, 0x20000002, N);
  assert_null(tlc_mapping_find_value(&m, 0x30000002, 1));
  /* the first entry of a state area by value */
  assert_int_equal(tlc_mapping_find(&m, 0x30000002)->value, 0);
  assert_null(tlc_mapping_find(&m, 0x20000003));
  tlc_mapping_fini(&m);
}

/* A state after an unrelated variable (other low bits), as a handle-sorted writer lists them,
 * is not linked; states with HANDLE.PARENT are, in both directions. */
static void test_state_links(void **state) {
  tlc_mapping_t m;
  tlc_parse_err_t e;
  (void)state;
  tlc_mapping_init(&m);
  assert_int_equal(parse_t1(&m,
                            "* HANDLE(Data) %HANDLE%,%NAME%,%VALUE%\n"
                            "20000000,a,\n"
                            "20000002,b,\n"
                            "30000000,,0\n"
                            "30000002,,1\n"
                            "* HANDLE(AUX) %HANDLE%;%HANDLE.PARENT%;%VALUE%;%NAME%\n"
                            "40000001;;;VBAT\n"
                            "50000007;40000001;3;low\n",
                            &e),
                   0);
  tlc_mapping_finish(&m);
  assert_int_equal(tlc_mapping_find(&m, 0x20000000)->state_handle, TLC_NO_HANDLE);
  assert_int_equal(tlc_mapping_find(&m, 0x20000002)->state_handle, TLC_NO_HANDLE);
  assert_int_equal(tlc_mapping_find(&m, 0x30000000)->parent, TLC_NO_HANDLE);
  /* 30000002 follows 30000000, not its variable: no adjacency link either */
  assert_int_equal(tlc_mapping_find(&m, 0x30000002)->parent, TLC_NO_HANDLE);
  assert_int_equal(tlc_mapping_find(&m, 0x40000001)->state_handle, 0x50000007);
  assert_int_equal(tlc_mapping_find_value(&m, 0x50000007, 3)->parent, 0x40000001);
  assert_string_equal(tlc_mapping_find_value(&m, 0x50000007, 3)->name, "low");
  tlc_mapping_fini(&m);
  /* HANDLE.STATE on the variable gives the states their parent */
  tlc_mapping_init(&m);
  assert_int_equal(parse_t1(&m,
                            "* HANDLE(Data) %HANDLE%,%HANDLE.STATE%,%VALUE%\n"
                            "30000009,,4\n"
                            "20000001,30000009,\n",
                            &e),
                   0);
  tlc_mapping_finish(&m);
  assert_int_equal(tlc_mapping_find(&m, 0x30000009)->parent, 0x20000001);
  tlc_mapping_fini(&m);
  /* links completed by finish are sort keys too: the order is that of the completed entries
   * (found by fuzz_mapping_text1's round trip) */
  tlc_mapping_init(&m);
  assert_int_equal(parse_t1(&m,
                            "* HANDLE(Data) %HANDLE%;%HANDLE.PARENT%;%HANDLE.STATE%;%PATH%\n"
                            "20000000;;30000000;\n"
                            "30000000;20000000;;b\n"
                            "30000000;;;a\n",
                            &e),
                   0);
  tlc_mapping_finish(&m);
  assert_int_equal(m.nareas, 3);
  assert_int_equal(m.areas[1].parent, 0x20000000);
  assert_string_equal(m.areas[1].path, "a");
  assert_string_equal(m.areas[2].path, "b");
  tlc_mapping_fini(&m);
  /* a parent completed from one entry of a variable gives its other entries the state too */
  tlc_mapping_init(&m);
  assert_int_equal(parse_t1(&m,
                            "* HANDLE(AUX) %HANDLE%;%HANDLE.STATE%;%PATH%\n"
                            "40000000;50000000;x\n"
                            "40000000;;y\n"
                            "50000000;;\n",
                            &e),
                   0);
  tlc_mapping_finish(&m);
  assert_int_equal(m.areas[0].state_handle, 0x50000000);
  assert_int_equal(m.areas[1].state_handle, 0x50000000);
  assert_int_equal(m.areas[2].parent, 0x40000000);
  tlc_mapping_fini(&m);
}

static void test_reordered_macros(void **state) {
  tlc_mapping_t m;
  tlc_parse_err_t e;
  const tlc_map_area_t *a;
  (void)state;
  tlc_mapping_init(&m);
  assert_int_equal(
      parse_t1(&m,
               "* CONTEXTS [%HANDLE%] %NAME%\r\n"
               "[0x7F] task A, high\r\n"
               "[10] \r\n"
               "* HANDLE(Functions) <%NAME%> @%FILE%:%VALUE% %HANDLE% %HANDLE.PARENT% %PATH%;\r\n"
               "<main> @src/main.c:1A 00000000  Root/main;\r\n"
               "<{> @src/main.c:1B 10000000 00000000 Root/main/{;;\r\n"
               "* HANDLE(AUX) %HANDLE%%NAME%|%VALUE.TYPE%|%VALUE.UNIT%|%CLASS%\n"
               "40000003VBAT|F64|V|AUX\n"
               "* HANDLE(Functions) %NAME.PARENT%,%HANDLE%,%NAME%,%VALUE%\n"
               ",00000005,f,\n"
               "f,10000010,x = 1;,3\n",
               &e),
      0);
  tlc_mapping_finish(&m);
  assert_string_equal(tlc_mapping_ctx_name(&m, 0x7F), "task A, high");
  assert_string_equal(tlc_mapping_ctx_name(&m, 0x10), "");
  a = tlc_mapping_find(&m, 0);
  assert_non_null(a);
  assert_string_equal(a->name, "main");
  assert_string_equal(a->file, "src/main.c");
  assert_int_equal(a->value, 0x1A);
  assert_int_equal(a->parent, TLC_NO_HANDLE);
  assert_string_equal(a->path, "Root/main");
  a = tlc_mapping_find(&m, 0x10000000);
  assert_string_equal(a->name, "{");
  assert_int_equal(a->parent, 0);
  assert_int_equal(a->value, 0x1B);
  assert_string_equal(a->path, "Root/main/{;"); /* the trailing literal is the line's suffix */
  a = tlc_mapping_find(&m, 0x40000003);
  assert_string_equal(a->name, "VBAT");
  assert_string_equal(a->value_type, "F64");
  assert_string_equal(a->unit, "V");
  /* NAME.PARENT links to the nearest earlier entry of that name */
  a = tlc_mapping_find(&m, 0x10000010);
  assert_int_equal(a->parent, 0x00000005);
  assert_string_equal(a->name, "x = 1;");
  tlc_mapping_fini(&m);
  /* a macro given twice: the last occurrence wins, quoted or not (found by fuzzing) */
  tlc_mapping_init(&m);
  assert_int_equal(parse_t1(&m,
                            "* HANDLE(Data) %HANDLE%,%NAME%,%NAME%\n"
                            "00000001,\"a,x\"\"y\",raw\n"
                            "00000002,raw,\"q,\"\"\"\n",
                            &e),
                   0);
  tlc_mapping_finish(&m);
  assert_string_equal(tlc_mapping_find(&m, 1)->name, "raw");
  assert_string_equal(tlc_mapping_find(&m, 2)->name, "q,\"");
  tlc_mapping_fini(&m);
}

/* Writes s as a Text1 field the way mapping.h asks writers to. */
static void put_field(char *out, const char *s, char sep) {
  size_t n = strlen(out);
  if (!tlc_mapping_field_needs_quotes(s, sep)) {
    strcpy(out + n, s);
    return;
  }
  out[n++] = '"';
  for (; *s; s++) {
    if (*s == '"')
      out[n++] = '"';
    out[n++] = *s;
  }
  out[n++] = '"';
  out[n] = '\0';
}

static const char *const tricky[] = {
  "plain",      "a,b",
  "\"x",        "say \"hi\"",
  "\"quoted\"", "multi\nline",
  "cr\r\nlf",   "\"TestStatic1.c\"#StaticFunc",
  "\"a\"\"b",   "\"",
  "\"\"",       ",",
  "",           " lead and trail ",
  "y\"",        "\"a\",b\"c",
};
#define NTRICKY (sizeof(tricky) / sizeof(tricky[0]))

static void test_quoting_round_trip(void **state) {
  char *doc = calloc(1, 16384);
  tlc_mapping_t m;
  tlc_parse_err_t e;
  size_t i, j;
  (void)state;
  assert_non_null(doc);
  /* every pair of tricky strings as NAME (middle field) and FILE (last field), so that each
   * quoting decision is checked against whatever follows it on the line */
  strcpy(doc, "* HANDLE(Functions) %HANDLE%,%NAME%,%FILE%\n");
  for (i = 0; i < NTRICKY; i++) {
    for (j = 0; j < NTRICKY; j++) {
      sprintf(doc + strlen(doc), "%08X,", (unsigned)(i * 100 + j));
      put_field(doc, tricky[i], ',');
      strcat(doc, ",");
      put_field(doc, tricky[j], '\0');
      strcat(doc, "\n");
    }
  }
  strcat(doc, "* TIMELINE %HANDLE%\n");
  tlc_mapping_init(&m);
  assert_int_equal(parse_t1(&m, doc, &e), 0);
  tlc_mapping_finish(&m);
  assert_int_equal(m.nareas, NTRICKY * NTRICKY);
  for (i = 0; i < NTRICKY; i++) {
    for (j = 0; j < NTRICKY; j++) {
      const tlc_map_area_t *a = tlc_mapping_find(&m, (uint32_t)(i * 100 + j));
      assert_non_null(a);
      assert_string_equal(a->name, tricky[i]);
      assert_string_equal(a->file, tricky[j]);
    }
  }
  tlc_mapping_fini(&m);
  free(doc);
  /* the rule itself, by hand */
  assert_int_equal(tlc_mapping_field_needs_quotes("a,b", ','), 1);
  assert_int_equal(tlc_mapping_field_needs_quotes("a,b", '\0'), 0);
  assert_int_equal(tlc_mapping_field_needs_quotes("\"TestStatic1.c\"#StaticFunc", ','), 0);
  assert_int_equal(tlc_mapping_field_needs_quotes("\"x", ','), 1);
  assert_int_equal(tlc_mapping_field_needs_quotes("\"x\"", ','), 1);
  assert_int_equal(tlc_mapping_field_needs_quotes("\"a\"\"b", ','), 1);
  assert_int_equal(tlc_mapping_field_needs_quotes("x\"", ','), 0);
  assert_int_equal(tlc_mapping_field_needs_quotes("l\nf", '\0'), 1);
}

/* A mapping written by the Text1 writer reads back field for field. */
static void test_text1_writer_round_trip(void **state) {
  static const char *const formats[] = {
    "MappingEntry=%HANDLE%,%NAME%,%VALUE%",
    "MappingEntry=%HANDLE%;%HANDLE.PARENT%;%HANDLE.STATE%;%NAME%;%VALUE%;%VALUE.TYPE%;"
    "%VALUE.UNIT%;%FILE%;%PATH%",
  };
  static const char *const names[] = { "main",     "a,b;c",     "\"TestStatic1.c\"#StaticFunc",
                                       "\"both\"", "new\nline", "" };
  tlc_mapping_t m, back;
  tlc_table_t t;
  tlc_parse_err_t e;
  size_t f, i;
  (void)state;
  tlc_mapping_init(&m);
  for (i = 0; i < 6; i++) {
    tlc_map_area_t a;
    memset(&a, 0, sizeof(a));
    a.handle = (uint32_t)i;
    a.parent = a.state_handle = TLC_NO_HANDLE;
    a.name = (char *)names[i];
    a.file = (char *)names[5 - i];
    a.path = "p";
    assert_int_equal(tlc_mapping_add(&m, &a), 0);
    a.handle = 0x10000000u + (uint32_t)i;
    a.parent = (uint32_t)i;
    a.has_value = 1;
    a.value = 0x51 + i;
    assert_int_equal(tlc_mapping_add(&m, &a), 0);
  }
  {
    tlc_map_area_t a;
    memset(&a, 0, sizeof(a));
    a.handle = 0x40000000;
    a.parent = TLC_NO_HANDLE;
    a.state_handle = 0x50000000;
    a.name = "VBAT";
    a.value_type = "F64";
    a.unit = "V";
    assert_int_equal(tlc_mapping_add(&m, &a), 0);
    a.handle = 0x50000000;
    a.parent = 0x40000000;
    a.state_handle = TLC_NO_HANDLE;
    a.has_value = 1;
    a.value = 7;
    a.name = "";
    assert_int_equal(tlc_mapping_add(&m, &a), 0);
  }
  tlc_mapping_finish(&m);
  tlc_table_init(&t);
  for (f = 0; f < 2; f++) {
    tlc_text1_opts_t opts;
    tlc_out_t o;
    char errbuf[128], *doc;
    size_t len;
    tlc_text1_opts_default(&opts);
    assert_int_equal(tlc_text1_set_format(&opts, formats[f], errbuf, sizeof(errbuf)), 0);
    opts.sections = TLC_T1_SEC_HANDLE;
    tlc_out_init(&o, 0, NULL, NULL);
    assert_int_equal(tlc_text1_write(&o, &opts, &t, &m, NULL), 0);
    doc = tlc_out_take(&o, &len);
    assert_non_null(doc);
    tlc_mapping_init(&back);
    assert_int_equal(tlc_mapping_parse_text1(&back, doc, len, &e), 0);
    tlc_mapping_finish(&back);
    assert_int_equal(back.nareas, m.nareas);
    for (i = 0; i < m.nareas; i++) {
      const tlc_map_area_t *a = &m.areas[i], *b = &back.areas[i];
      assert_int_equal(a->handle, b->handle);
      assert_string_equal(a->name, b->name);
      assert_int_equal(a->has_value, b->has_value);
      assert_int_equal(a->value, b->value);
      if (f == 1) {
        assert_string_equal(a->file, b->file);
        assert_string_equal(a->path, b->path);
        assert_string_equal(a->value_type, b->value_type);
        assert_string_equal(a->unit, b->unit);
        assert_int_equal(a->parent, b->parent);
        assert_int_equal(a->state_handle, b->state_handle);
      }
    }
    tlc_mapping_fini(&back);
    tlc_free(doc);
    tlc_out_fini(&o);
  }
  tlc_table_fini(&t);
  tlc_mapping_fini(&m);
}

static void expect_err(const char *doc, int code, uint64_t line, const char *reason_part) {
  tlc_mapping_t m;
  tlc_parse_err_t e;
  tlc_mapping_init(&m);
  assert_int_equal(tlc_mapping_parse(&m, doc, strlen(doc), &e), code);
  assert_int_equal(e.line, line);
  if (strstr(e.reason, reason_part) == NULL)
    fail_msg("reason \"%s\" does not contain \"%s\"", e.reason, reason_part);
  tlc_mapping_fini(&m);
}

static void test_text1_errors(void **state) {
  (void)state;
  expect_err("* HANDLE(Data) %HANDLE%,%NAME%,%VALUE%\n20000000\n", TLC_ESYNTAX, 2, "missing \",\"");
  expect_err("* HANDLE(Data) %HANDLE%,%NAME%,%VALUE%\n\n2000000G,x,\n", TLC_ESYNTAX, 3,
             "not a hex number");
  expect_err("* HANDLE(Data) %HANDLE%,%NAME%,%VALUE%\n123456789,x,\n", TLC_ERANGE, 2,
             "out of range");
  expect_err("* HANDLE(Data) %HANDLE%,%NAME%,%VALUE%\n,x,\n", TLC_ESYNTAX, 2, "empty %HANDLE%");
  expect_err("* INFO x\n1\n* HANDLE(Data) %HANDLE,%NAME%\n", TLC_ESYNTAX, 3, "unterminated macro");
  expect_err("* HANDLE(Data) %NAME%,%VALUE%\n", TLC_ESYNTAX, 1, "no %HANDLE%");
  expect_err("* HANDLE(Data)\n", TLC_ESYNTAX, 1, "no entry format");
  expect_err("* HANDLE Data %HANDLE%\n", TLC_ESYNTAX, 1, "(class)");
  expect_err("* HANDLE(Data) %NAME%%HANDLE%\n", TLC_ESYNTAX, 1, "followed by a separator");
  /* a missing section is reported at the last line, not line 0 */
  expect_err("* INFO %TOTAL_TIME%\n5\n", TLC_ESYNTAX, 2, "no HANDLE");
  expect_err("* INFO %TOTAL_TIME%\n5\n7", TLC_ESYNTAX, 3, "no HANDLE");
  expect_err("", TLC_ESYNTAX, 1, "no HANDLE");
  expect_err("* CONTEXTS %NAME%,%HANDLE%\nx,0x1,junk\n", TLC_ESYNTAX, 2, "not a hex number");
  expect_err("* CONTEXTS %NAME%,%HANDLE%\nx,\n", TLC_ESYNTAX, 2, "empty %HANDLE%");
  expect_err("* HANDLE(Data) [%HANDLE%]\n00000001]\n", TLC_ESYNTAX, 2, "expected \"[\"");
  expect_err("* HANDLE(Data) %HANDLE%;\n00000001\n", TLC_ESYNTAX, 2, "does not end with");
  expect_err("* HANDLE(Data) %HANDLE%,%NAME%;\n00000001,\"a\";x;\n", TLC_ESYNTAX, 2,
             "unexpected text");
  /* a quoted scan that fails falls back to raw: line 3 then starts with `b"` */
  expect_err("* HANDLE(Data) %HANDLE%,%NAME%\n00000001,\"a\nb\",x\n", TLC_ESYNTAX, 3,
             "not a hex number");
  /* the line count goes on across a quoted field that spans lines */
  expect_err("* HANDLE(Data) %HANDLE%,%NAME%\n00000001,\"a\nb\nc\"\nQ,x\n", TLC_ESYNTAX, 5,
             "not a hex number");
}

static const char seed_xml[] =
    "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
    "<ProfilerExport version=\"1\" generator=\"hand\">\n"
    "  <Info totalTime=\"7962907051\"/>\n"
    "  <Mapping>\n"
    "    <Contexts>\n"
    "      <Context handle=\"0x0\" name=\"ID_TASK_1MS\"/>\n"
    "      <Context handle=\"0x1F\" name=\"a &amp; b &lt;c&gt; &#233;\"/>\n"
    "    </Contexts>\n"
    "    <Area handle=\"00000000\" class=\"Functions\" name=\"main\"/>\n"
    "    <Area handle=\"10000000\" class=\"Functions\" parent=\"00000000\" name=\"{\" value=\"51\" "
    "file=\"main.c\" path=\"main/{\"/>\n"
    "    <Area handle=\"00000001\" name=\"&quot;TestStatic1.c&quot;#StaticFunc\"><Future/></Area>\n"
    "    <Area handle=\"20000000\" class=\"Data\" name=\"TestStatic1##s_cStatic\" "
    "state=\"30000000\"/>\n"
    "    <Area handle=\"30000000\" class=\"Data\" value=\"0\"/>\n"
    "    <Area handle=\"30000000\" class=\"Data\" value=\"1\"/>\n"
    "    <Area handle=\"40000000\" class=\"AUX\" name=\"VBAT\" valueType=\"F64\" unit=\"V\"/>\n"
    "    <Unknown><Area handle=\"77777777\"/></Unknown>\n"
    "  </Mapping>\n"
    "  <Statistics><Context name=\"core0\"><Area handle=\"66666666\"/></Context></Statistics>\n"
    "  <Timeline>\n"
    "    <Event handle=\"20000000\" type=\"W\" core=\"-1\" value=\"00000001\" time=\"4336\"/>\n"
    "  </Timeline>\n"
    "</ProfilerExport>\n";

static void test_xml(void **state) {
  tlc_mapping_t m;
  tlc_parse_err_t e;
  const tlc_map_area_t *a;
  (void)state;
  tlc_mapping_init(&m);
  assert_int_equal(tlc_mapping_parse(&m, seed_xml, strlen(seed_xml), &e), 0);
  tlc_mapping_finish(&m);
  assert_int_equal(m.nareas, 7);
  assert_int_equal(m.ncontexts, 2);
  assert_string_equal(tlc_mapping_ctx_name(&m, 0), "ID_TASK_1MS");
  assert_string_equal(tlc_mapping_ctx_name(&m, 0x1F), "a & b <c> \xC3\xA9");
  a = tlc_mapping_find(&m, 0x10000000);
  assert_non_null(a);
  assert_string_equal(a->name, "{");
  assert_int_equal(a->parent, 0);
  assert_int_equal(a->has_value, 1);
  assert_int_equal(a->value, 0x51);
  assert_string_equal(a->file, "main.c");
  assert_string_equal(a->path, "main/{");
  assert_string_equal(tlc_mapping_find(&m, 1)->name, "\"TestStatic1.c\"#StaticFunc");
  assert_int_equal(tlc_mapping_find(&m, 0x20000000)->state_handle, 0x30000000);
  /* finish links the states back to their variable */
  assert_int_equal(tlc_mapping_find_value(&m, 0x30000000, 1)->parent, 0x20000000);
  a = tlc_mapping_find(&m, 0x40000000);
  assert_string_equal(a->value_type, "F64");
  assert_string_equal(a->unit, "V");
  assert_null(tlc_mapping_find(&m, 0x77777777));
  assert_null(tlc_mapping_find(&m, 0x66666666));
  tlc_mapping_fini(&m);
}

#ifndef TLC_TEST_DATA_DIR
#error "TLC_TEST_DATA_DIR must name tests/data"
#endif

/* The schema's example document (tests/data/xml/example.xml, validated against
 * formats/ProfilerExport.xsd by the xsd_example test) reads as the mapping it shows. */
static void test_xml_schema_example(void **state) {
  FILE *f = fopen(TLC_TEST_DATA_DIR "/xml/example.xml", "rb");
  static char buf[16384];
  size_t n;
  tlc_mapping_t m;
  tlc_parse_err_t e;
  (void)state;
  assert_non_null(f);
  n = fread(buf, 1, sizeof(buf), f);
  fclose(f);
  assert_true(n > 0 && n < sizeof(buf));
  tlc_mapping_init(&m);
  assert_int_equal(tlc_mapping_parse(&m, buf, n, &e), 0);
  tlc_mapping_finish(&m);
  assert_int_equal(m.nareas, 6);
  assert_int_equal(m.ncontexts, 2);
  assert_string_equal(tlc_mapping_ctx_name(&m, 1), "core1");
  assert_int_equal(tlc_mapping_find(&m, 0x10000000)->parent, 0);
  assert_string_equal(tlc_mapping_find(&m, 0x10000000)->file, "main.c");
  assert_int_equal(tlc_mapping_find(&m, 0x20000000)->state_handle, 0x30000000);
  assert_int_equal(tlc_mapping_find_value(&m, 0x30000000, 1)->parent, 0x20000000);
  assert_string_equal(tlc_mapping_find(&m, 0x40000000)->unit, "V");
  tlc_mapping_fini(&m);
}

static void test_xml_errors(void **state) {
  (void)state;
  expect_err("<ProfilerExport><Mapping>\n<Area handle=\"1\">\n</Mapping></ProfilerExport>",
             TLC_ESYNTAX, 3, "mismatched tag");
  expect_err("<Other/>", TLC_ESYNTAX, 1, "expected <ProfilerExport>");
  expect_err("<ProfilerExport>\n<Mapping>\n<Area name=\"x\"/></Mapping></ProfilerExport>",
             TLC_ESYNTAX, 3, "without a handle");
  expect_err("<ProfilerExport><Mapping>\n\n<Area handle=\"xyz\"/></Mapping></ProfilerExport>",
             TLC_ESYNTAX, 3, "not a hex number");
  expect_err("<ProfilerExport><Mapping><Area handle=\"100000000\"/></Mapping></ProfilerExport>",
             TLC_ERANGE, 1, "out of range");
  expect_err("<ProfilerExport><Mapping><Contexts><Context name=\"x\"/></Contexts></Mapping>"
             "</ProfilerExport>",
             TLC_ESYNTAX, 1, "without a handle");
  expect_err("<ProfilerExport><Timeline/></ProfilerExport>", TLC_ESYNTAX, 1, "no <Mapping>");
  expect_err("<ProfilerExport>\n<Timeline/>\n</ProfilerExport>\n", TLC_ESYNTAX, 3, "no <Mapping>");
  /* billion laughs: refused before any entity is declared */
  expect_err("<?xml version=\"1.0\"?>\n"
             "<!DOCTYPE lolz [\n"
             " <!ENTITY lol \"lol\">\n"
             " <!ENTITY lol2 \"&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;\">\n"
             "]>\n"
             "<ProfilerExport><Mapping><Area handle=\"1\" name=\"&lol2;\"/></Mapping>"
             "</ProfilerExport>",
             TLC_ESYNTAX, 2, "DOCTYPE");
  expect_err("<ProfilerExport><Mapping><Area handle=\"1\" name=\"&undefined;\"/></Mapping>"
             "</ProfilerExport>",
             TLC_ESYNTAX, 1, "undefined entity");
  expect_err("  \n<ProfilerExport>", TLC_ESYNTAX, 2, "no element found");
}

static void test_caps(void **state) {
  tlc_mapping_t m;
  tlc_parse_err_t e;
  (void)state;
  tlc_mapping_init(&m);
  m.max_areas = 3;
  assert_int_equal(parse_t1(&m,
                            "* HANDLE(Data) %HANDLE%,%NAME%,%VALUE%\n"
                            "20000000,a,\n20000001,b,\n20000002,c,\n20000003,d,\n",
                            &e),
                   TLC_ELIMIT);
  assert_int_equal(e.line, 5);
  assert_int_equal(m.nareas, 3);
  tlc_mapping_fini(&m);
  /* hard cap hit exactly: not an error */
  tlc_mapping_init(&m);
  m.max_areas = 3;
  assert_int_equal(
      parse_t1(&m, "* HANDLE(Data) %HANDLE%,%NAME%\n20000000,a\n20000001,b\n20000002,c\n", &e), 0);
  tlc_mapping_fini(&m);
  tlc_mapping_init(&m);
  m.max_areas = 1;
  {
    static const char doc[] = "<ProfilerExport><Mapping><Contexts>\n"
                              "<Context handle=\"0x1\"/>\n<Context handle=\"0x2\"/>\n"
                              "</Contexts></Mapping></ProfilerExport>";
    assert_int_equal(tlc_mapping_parse(&m, doc, strlen(doc), &e), TLC_ELIMIT);
  }
  assert_int_equal(e.line, 3);
  tlc_mapping_fini(&m);
}

/* Unbalanced quotes on every line must not make the reader quadratic: 200,000 lines would take
 * minutes if each quoted scan ran to the end of the input. */
static void test_hostile_quotes_linear(void **state) {
  size_t n = 200000, i, len = 0;
  char *doc = malloc(n * 16 + 64);
  tlc_mapping_t m;
  tlc_parse_err_t e;
  (void)state;
  assert_non_null(doc);
  len += (size_t)sprintf(doc, "* HANDLE(Functions) %%HANDLE%%,%%NAME%%,%%VALUE%%\n");
  for (i = 0; i < n; i++)
    len += (size_t)sprintf(doc + len, "%08X,\"a,\n", (unsigned)i);
  tlc_mapping_init(&m);
  assert_int_equal(tlc_mapping_parse_text1(&m, doc, len, &e), 0);
  tlc_mapping_finish(&m);
  assert_int_equal(m.nareas, n);
  assert_string_equal(tlc_mapping_find(&m, 12345)->name, "\"a");
  tlc_mapping_fini(&m);
  free(doc);
}

static void sweep(const char *doc, int xml) {
  uint64_t nth;
  for (nth = 1;; nth++) {
    tlc_mapping_t m;
    tlc_parse_err_t e;
    int r;
    testalloc_install();
    testalloc_fail_at(nth);
    tlc_mapping_init(&m);
    r = xml ? tlc_mapping_parse_xml(&m, doc, strlen(doc), &e)
            : tlc_mapping_parse_text1(&m, doc, strlen(doc), &e);
    tlc_mapping_finish(&m);
    tlc_mapping_fini(&m);
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

static void test_alloc_failures(void **state) {
  (void)state;
  sweep(seed_text1, 0);
  sweep(seed_xml, 1);
  sweep("* HANDLE(Functions) %NAME.PARENT%,%HANDLE%,%NAME%\n,00000001,\"q\"\"x\"\nq\"x,10000001,"
        "l\n",
        0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_seed_sections),
    cmocka_unit_test(test_state_links),
    cmocka_unit_test(test_reordered_macros),
    cmocka_unit_test(test_quoting_round_trip),
    cmocka_unit_test(test_text1_writer_round_trip),
    cmocka_unit_test(test_text1_errors),
    cmocka_unit_test(test_xml),
    cmocka_unit_test(test_xml_schema_example),
    cmocka_unit_test(test_xml_errors),
    cmocka_unit_test(test_caps),
    cmocka_unit_test(test_hostile_quotes_linear),
    cmocka_unit_test(test_alloc_failures),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
