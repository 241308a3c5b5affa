/* test_aprof.c - the aprof report reader: every public report in ../shared/samples/aprof
 * (real aprof output, versions 0 and 2, read where it lies: TLC_APROF_SAMPLES_DIR), hand-written
 * reports of versions 2 to 6 in each layout their writer had, every error with its line, caps,
 * allocation failures, and the JSON view. Expected values are read off the files by hand (the
 * sample counts with grep and a few lines of Python over the files).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "base/alloc.h"
#include "base/err.h"
#include "formats/aprof.h"
#include "testalloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The public aprof reports (CMake: TLC_SHARED_DIR/samples/aprof); "" when the checkout has no
 * ../shared, and then the tests that read them are skipped, saying so. */
#ifndef TLC_APROF_SAMPLES_DIR
#error "TLC_APROF_SAMPLES_DIR must name ../shared/samples/aprof (or be empty)"
#endif

static int have_samples(void) {
  if (TLC_APROF_SAMPLES_DIR[0] != 0)
    return 1;
  print_message("../shared/samples/aprof not found at configure time: sample reports skipped\n");
  return 0;
}

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

static int parse(tlc_aprof_t *a, const char *s, tlc_parse_err_t *e) {
  return tlc_aprof_parse(a, s, strlen(s), e);
}

static void point4(const tlc_aprof_point_t *p, uint64_t rms, uint64_t avg, uint64_t occ) {
  assert_int_equal(p->rms, rms);
  assert_int_equal(p->avg, avg);
  assert_int_equal(p->occ, occ);
}

static void test_real_v0_report(void **state) {
  size_t len;
  char *buf;
  tlc_aprof_t a;
  tlc_parse_err_t e;
  const tlc_aprof_routine_t *r;
  (void)state;
  if (!have_samples())
    skip();
  buf = slurp(TLC_APROF_SAMPLES_DIR "/bubble_1.v0.aprof", &len);
  tlc_aprof_init(&a);
  assert_int_equal(tlc_aprof_parse(&a, buf, len, &e), 0);
  assert_int_equal(a.version, 0);
  assert_int_equal(a.has_version, 0);
  assert_string_equal(a.metric, "bb-count"); /* the format's default */
  assert_int_equal(a.has_metric, 0);
  assert_string_equal(a.command, "./bubble");
  assert_string_equal(a.app, "./bubble");
  assert_null(a.date);
  assert_int_equal(a.layout, 4);
  assert_int_equal(a.fields, TLC_APF_AVG | TLC_APF_OCC);
  assert_int_equal(a.nroutines, 4);
  assert_int_equal(a.npoints, 110);
  assert_int_equal(a.ncontexts, 0);
  r = &a.routines[0];
  assert_int_equal(r->id, 2);
  assert_string_equal(r->name, "ArraySort");
  assert_string_equal(r->image, "NONE");
  assert_int_equal(r->has_address, 1);
  assert_int_equal(r->address, 0x8048474);
  assert_int_equal(r->npoints, 103);
  point4(&a.points[r->first_point], 3, 4, 1);
  point4(&a.points[r->first_point + 1], 776, 3696490, 1);
  point4(&a.points[r->first_point + 102], 766, 3602953, 1);
  r = &a.routines[1];
  assert_int_equal(r->id, 1);
  assert_string_equal(r->name, "fill_array");
  assert_int_equal(r->address, 0x8048542);
  assert_int_equal(r->npoints, 5);
  point4(&a.points[r->first_point], 4, 5, 1);
  point4(&a.points[r->first_point + 1], 34, 446, 1);
  point4(&a.points[r->first_point + 2], 42, 11649, 94);
  point4(&a.points[r->first_point + 3], 43, 10360, 6);
  point4(&a.points[r->first_point + 4], 117, 383, 1);
  r = &a.routines[2];
  assert_int_equal(r->id, 3);
  assert_string_equal(r->name, "cmpfun");
  assert_int_equal(r->address, 0x804859C);
  assert_int_equal(r->npoints, 1);
  point4(&a.points[r->first_point], 5, 5, 17867443);
  r = &a.routines[3];
  assert_int_equal(r->id, 0);
  assert_string_equal(r->name, "main");
  assert_int_equal(r->address, 0x80485F4);
  point4(&a.points[r->first_point], 134, 224667469, 1);
  assert_int_equal(a.points[r->first_point].line, 116);
  {
    tlc_out_t o;
    size_t n;
    char *js;
    tlc_out_init(&o, 0, NULL, NULL);
    assert_int_equal(tlc_aprof_to_json(&a, &o), 0);
    js = tlc_out_take(&o, &n);
    assert_non_null(strstr(js, "{\"id\": 2, \"name\": \"ArraySort\", \"image\": \"NONE\", "
                               "\"address\": \"0x8048474\", \"mangled\": null"));
    assert_non_null(strstr(js, "{\"rms\": 42, \"occ\": 94, \"avg\": 11649}"));
    assert_non_null(strstr(js, "\"layout\": 4,"));
    assert_non_null(strstr(js, "\"metric_given\": false,"));
    tlc_free(js);
    tlc_out_fini(&o);
  }
  tlc_aprof_fini(&a);
  free(buf);
}

/* Every public report reads, its routines and points counted exactly; occ and the total cost
 * (version 0: avg x occ, version 2: sum) summed over every point, as a check that each column
 * landed where it belongs. */
static void test_every_public_sample(void **state) {
  static const struct {
    const char *file;
    uint64_t version;
    unsigned layout;
    size_t routines, points;
    uint64_t occ, cost;
    const char *first;
  } want[] = {
    { "bubble_1.v0.aprof", 0, 4, 4, 110, 17867650, 538667810, "ArraySort" },
    { "crypto_1.v2.aprof", 2, 8, 2343, 14408, 253712, 48810365,
      "v8::preparser::PreParser::ParseIdentifierNameOrGetOrSet(bool*, bool*, bool*)" },
    { "heap_1.v0.aprof", 0, 4, 4, 625, 6962625, 689147653, "heap_sort" },
    { "heap_1.v0.first-run-730d2eb.aprof", 0, 4, 4, 67, 1769635, 217219709, "heap_sort" },
    { "integer_1.v0.aprof", 0, 4, 2, 1025, 1025, 1992262599, "integer_sort" },
    { "merge_1.v0.aprof", 0, 4, 4, 79, 307200, 170434607, "merge_sort_ric" },
    { "quick_1.v0.aprof", 0, 4, 4, 1605, 207816, 139875986, "quick_sort_ric" },
    { "selection_1.v0.aprof", 0, 4, 2, 104, 104, 73267913, "selection_sort" },
  };
  size_t i, k;
  (void)state;
  if (!have_samples())
    skip();
  for (i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
    char path[512];
    size_t len;
    char *buf;
    tlc_aprof_t a;
    tlc_parse_err_t e;
    uint64_t occ = 0, cost = 0;
    snprintf(path, sizeof(path), "%s/%s", TLC_APROF_SAMPLES_DIR, want[i].file);
    buf = slurp(path, &len);
    tlc_aprof_init(&a);
    if (tlc_aprof_parse(&a, buf, len, &e) != 0)
      fail_msg("%s: line %llu: %s", want[i].file, (unsigned long long)e.line, e.reason);
    assert_int_equal(a.version, want[i].version);
    assert_int_equal(a.layout, want[i].layout);
    assert_int_equal(a.nroutines, want[i].routines);
    assert_int_equal(a.npoints, want[i].points);
    assert_int_equal(a.ncontexts, 0);
    assert_string_equal(a.routines[0].name, want[i].first);
    for (k = 0; k < a.npoints; k++) {
      occ += a.points[k].occ;
      cost += a.layout == 4 ? a.points[k].avg * a.points[k].occ : a.points[k].sum;
    }
    assert_int_equal(occ, want[i].occ);
    assert_int_equal(cost, want[i].cost);
    tlc_aprof_fini(&a);
    free(buf);
  }
}

static const char v2_report[] =
    "c -------------------------------------\n"
    "c report generated by aprof (valgrind) \n"
    "c -------------------------------------\n"
    "v 2\n"
    "k 1000\n"
    "e 0\n"
    "m time-usec\r\n"
    "i rms\n"
    "g 4\n"
    "a ./prog\n"
    "f ./prog 10 \"x y\"\n"
    "r \"mmap\" \"/lib/i386-linux-gnu/ld-2.13.so\" 30\n"
    "u 30 \"_Z4mmapv\"\n"
    "r \"ogdf::X::doCall(ogdf::PlanRep&, bool)\" \"/usr/lib/libogdf.so\" 31 2\n"
    "d 31 \"ogdf::X::doCall(ogdf::PlanRep&, bool) const\"\n"
    "p 30 23 15 37 270 10 199 200\n"
    "\n"
    "p 31 8 1 2 3 2 3 3\n"
    "p 30 24 1 1 1 1 1 1\n";

static void test_v2_report(void **state) {
  tlc_aprof_t a;
  tlc_parse_err_t e;
  const tlc_aprof_routine_t *r;
  const tlc_aprof_point_t *p;
  (void)state;
  tlc_aprof_init(&a);
  assert_int_equal(parse(&a, v2_report, &e), 0);
  assert_int_equal(a.version, 2);
  assert_string_equal(a.metric, "time-usec");
  assert_int_equal(a.total_cost, 1000);
  assert_string_equal(a.mtime, "0");
  assert_string_equal(a.input_metric, "rms");
  assert_int_equal(a.granularity, 4);
  assert_string_equal(a.command, "./prog 10 \"x y\"");
  assert_int_equal(a.ncomments, 3);
  assert_string_equal(a.comments[1], "report generated by aprof (valgrind)");
  assert_int_equal(a.layout, 8);
  assert_int_equal(a.fields, TLC_APF_MIN | TLC_APF_MAX | TLC_APF_SUM | TLC_APF_OCC |
                                 TLC_APF_REAL_SUM | TLC_APF_SELF_SUM);
  assert_int_equal(a.nroutines, 2);
  r = &a.routines[0];
  assert_string_equal(r->name, "mmap");
  assert_string_equal(r->image, "/lib/i386-linux-gnu/ld-2.13.so");
  assert_string_equal(r->mangled, "_Z4mmapv");
  assert_null(r->demangled);
  assert_int_equal(r->has_address, 0);
  assert_int_equal(r->npoints, 2);
  p = &a.points[r->first_point];
  assert_int_equal(p->rms, 23);
  assert_int_equal(p->min, 15);
  assert_int_equal(p->max, 37);
  assert_int_equal(p->sum, 270);
  assert_int_equal(p->occ, 10);
  assert_int_equal(p->real_sum, 199);
  assert_int_equal(p->self_sum, 200);
  assert_int_equal(p->sqr_sum, 0);
  assert_int_equal(p[1].rms, 24);
  r = &a.routines[1];
  assert_string_equal(r->name, "ogdf::X::doCall(ogdf::PlanRep&, bool)");
  assert_string_equal(r->demangled, "ogdf::X::doCall(ogdf::PlanRep&, bool) const");
  assert_int_equal(r->has_distinct_rms, 1);
  assert_int_equal(r->distinct_rms, 2);
  assert_int_equal(r->npoints, 1);
  assert_int_equal(a.points[r->first_point].rms, 8);
  tlc_aprof_fini(&a);
}

/* The seed's 12-number layout with a calling context tree; q lines come before the x lines that
 * define their contexts, as aprof writes them. */
static const char seed_report[] = "v 4\n"
                                  "m time-usec\n"
                                  "r \"f\" \"app\" 7\n"
                                  "r \"g\" \"app\" 24\n"
                                  "p 7 23 15 37 270 3000 10 199 200 10 10 3000\n"
                                  "q 352 23 15 37 270 3000 10 199 200 10 10 3000\n"
                                  "x 7 350 -1\n"
                                  "x 24 352 350\n";

static void test_seed_layout_and_cct(void **state) {
  tlc_aprof_t a;
  tlc_parse_err_t e;
  const tlc_aprof_point_t *p;
  (void)state;
  tlc_aprof_init(&a);
  assert_int_equal(parse(&a, seed_report, &e), 0);
  assert_int_equal(a.layout, 12);
  p = &a.points[a.routines[0].first_point];
  assert_int_equal(a.routines[0].npoints, 1);
  assert_int_equal(a.routines[1].npoints, 0);
  assert_int_equal(p->rms, 23);
  assert_int_equal(p->min, 15);
  assert_int_equal(p->max, 37);
  assert_int_equal(p->sum, 270);
  assert_int_equal(p->sqr_sum, 3000);
  assert_int_equal(p->occ, 10);
  assert_int_equal(p->real_sum, 199);
  assert_int_equal(p->self_sum, 200);
  assert_int_equal(p->self_min, 10);
  assert_int_equal(p->self_max, 10);
  assert_int_equal(p->self_sqr_sum, 3000);
  assert_int_equal(a.ncontexts, 2);
  assert_int_equal(a.contexts[0].id, 350);
  assert_int_equal(a.contexts[0].parent_id, -1);
  assert_int_equal(a.contexts[0].parent, SIZE_MAX);
  assert_int_equal(a.contexts[0].routine, 0);
  assert_int_equal(a.contexts[1].id, 352);
  assert_int_equal(a.contexts[1].parent, 0);
  assert_int_equal(a.contexts[1].routine, 1);
  assert_int_equal(a.contexts[0].npoints, 0);
  assert_int_equal(a.contexts[1].npoints, 1);
  assert_int_equal(a.cpoints[a.contexts[1].first_point].self_sqr_sum, 3000);
  assert_int_equal(a.cpoints[a.contexts[1].first_point].owner, 352);
  tlc_aprof_fini(&a);
  /* aprof's rvms variant: 14 numbers */
  tlc_aprof_init(&a);
  assert_int_equal(parse(&a, "r \"f\" \"app\" 1\np 1 2 3 4 5 6 7 8 9 10 11 12 13 14\n", &e), 0);
  assert_int_equal(a.layout, 14);
  assert_true(a.fields & TLC_APF_RATIO_SQR);
  assert_int_equal(a.points[0].ratio_sum, 13);
  assert_int_equal(a.points[0].ratio_sqr_sum, 14);
  tlc_aprof_fini(&a);
}

/* One point of `n` values 1..n (id 1) under `v VERSION`; returns the parsed report. */
static void parse_version(tlc_aprof_t *a, unsigned version, unsigned n) {
  char doc[256];
  int at;
  unsigned k;
  tlc_parse_err_t e;
  at = snprintf(doc, sizeof(doc), "c x\nv %u\ni drms\nr \"f\" \"app\" 1\np 1", version);
  for (k = 2; k <= n; k++)
    at += snprintf(doc + at, sizeof(doc) - (size_t)at, " %u", k);
  snprintf(doc + at, sizeof(doc) - (size_t)at, "\nfav f\n");
  tlc_aprof_init(a);
  if (parse(a, doc, &e) != 0)
    fail_msg("v %u with %u values: line %llu: %s", version, n, (unsigned long long)e.line,
             e.reason);
  assert_int_equal(a->version, version);
  assert_int_equal(a->layout, n);
  assert_int_equal(a->npoints, 1);
}

/* Versions 3 to 6 as aprof wrote them (valgrind/aprof/report.c over its history) and as
 * aprof-plot reads them (AprofReport.java): the same columns land in the same fields. */
static void test_versions_3_to_6(void **state) {
  tlc_aprof_t a;
  const tlc_aprof_point_t *p;
  (void)state;
  /* version 3: id rms min max sum occ real self self-min self-max */
  parse_version(&a, 3, 10);
  p = &a.points[0];
  assert_int_equal(p->min, 3);
  assert_int_equal(p->max, 4);
  assert_int_equal(p->sum, 5);
  assert_int_equal(p->occ, 6);
  assert_int_equal(p->real_sum, 7);
  assert_int_equal(p->self_sum, 8);
  assert_int_equal(p->self_min, 9);
  assert_int_equal(p->self_max, 10);
  assert_int_equal(p->sqr_sum, 0);
  assert_int_equal(a.fields, TLC_APF_MIN | TLC_APF_MAX | TLC_APF_SUM | TLC_APF_OCC |
                                 TLC_APF_REAL_SUM | TLC_APF_SELF_SUM | TLC_APF_SELF_MIN |
                                 TLC_APF_SELF_MAX);
  tlc_aprof_fini(&a);
  /* version 3 over 12 numbers: tlcap's own exports before `v 4`, read as version 4 */
  parse_version(&a, 3, 12);
  assert_int_equal(a.points[0].sqr_sum, 6);
  assert_int_equal(a.points[0].occ, 7);
  assert_int_equal(a.points[0].self_sqr_sum, 12);
  tlc_aprof_fini(&a);
  /* version 4: the seed's 12 */
  parse_version(&a, 4, 12);
  p = &a.points[0];
  assert_int_equal(p->sqr_sum, 6);
  assert_int_equal(p->occ, 7);
  assert_int_equal(p->real_sum, 8);
  assert_int_equal(p->self_sum, 9);
  assert_int_equal(p->self_min, 10);
  assert_int_equal(p->self_max, 11);
  assert_int_equal(p->self_sqr_sum, 12);
  tlc_aprof_fini(&a);
  /* version 5: 12 (rms) or 14 (rvms ratio sums) */
  parse_version(&a, 5, 12);
  tlc_aprof_fini(&a);
  parse_version(&a, 5, 14);
  assert_int_equal(a.points[0].ratio_sum, 13);
  assert_int_equal(a.points[0].ratio_sqr_sum, 14);
  tlc_aprof_fini(&a);
  /* version 6: 12, or drms: 2 deprecated, + cumulative syscall/thread, + self syscall/thread */
  parse_version(&a, 6, 12);
  tlc_aprof_fini(&a);
  parse_version(&a, 6, 14);
  tlc_aprof_fini(&a);
  parse_version(&a, 6, 16);
  assert_int_equal(a.points[0].cumul_syscall, 15);
  assert_int_equal(a.points[0].cumul_thread, 16);
  assert_int_equal(a.points[0].self_syscall, 0);
  assert_false(a.fields & TLC_APF_SELF_SYSCALL);
  tlc_aprof_fini(&a);
  parse_version(&a, 6, 18);
  p = &a.points[0];
  assert_int_equal(p->self_sqr_sum, 12);
  assert_int_equal(p->ratio_sum, 13);
  assert_int_equal(p->cumul_thread, 16);
  assert_int_equal(p->self_syscall, 17);
  assert_int_equal(p->self_thread, 18);
  assert_true(a.fields & TLC_APF_SELF_THREAD);
  {
    tlc_out_t o;
    char *js;
    tlc_out_init(&o, 0, NULL, NULL);
    assert_int_equal(tlc_aprof_to_json(&a, &o), 0);
    js = tlc_out_take(&o, NULL);
    assert_non_null(strstr(js, "\"self_sqr_sum\": 12, \"ratio_sum\": 13, \"ratio_sqr_sum\": 14, "
                               "\"cumul_syscall\": 15, \"cumul_thread\": 16, \"self_syscall\": "
                               "17, \"self_thread\": 18}"));
    tlc_free(js);
    tlc_out_fini(&o);
  }
  tlc_aprof_fini(&a);
}

static void test_json_exact(void **state) {
  static const char expect[] =
      "{\n"
      "  \"schema\": \"tlcap-aprof/1\",\n"
      "  \"version\": 2,\n"
      "  \"metric\": \"time-usec\",\n"
      "  \"metric_given\": true,\n"
      "  \"layout\": 8,\n"
      "  \"mtime\": null,\n"
      "  \"date\": null,\n"
      "  \"command\": null,\n"
      "  \"app\": null,\n"
      "  \"input_metric\": null,\n"
      "  \"total_cost\": null,\n"
      "  \"memory_resolution\": null,\n"
      "  \"comments\": [\"a \\\"b\\\"\"],\n"
      "  \"routines\": [\n"
      "    {\"id\": 5, \"name\": \"f\", \"image\": \"img\", \"address\": null, \"mangled\": null, "
      "\"demangled\": null,\n"
      "      \"points\": [\n"
      "        {\"rms\": 1, \"min\": 2, \"max\": 3, \"sum\": 4, \"occ\": 5, \"real_sum\": 6, "
      "\"self_sum\": 7}\n"
      "      ]}\n"
      "  ],\n"
      "  \"contexts\": [\n"
      "    {\"id\": 9, \"routine\": 5, \"parent\": null,\n"
      "      \"points\": []}\n"
      "  ]\n"
      "}\n";
  tlc_aprof_t a;
  tlc_parse_err_t e;
  tlc_out_t o;
  size_t n;
  char *js;
  (void)state;
  tlc_aprof_init(&a);
  assert_int_equal(
      parse(&a, "v 2\nc a \"b\"\nm time-usec\nr \"f\" \"img\" 5\np 5 1 2 3 4 5 6 7\nx 5 9 -1\n",
            &e),
      0);
  tlc_out_init(&o, 0, NULL, NULL);
  assert_int_equal(tlc_aprof_to_json(&a, &o), 0);
  js = tlc_out_take(&o, &n);
  assert_string_equal(js, expect);
  tlc_free(js);
  tlc_out_fini(&o);
  tlc_aprof_fini(&a);
}

static void expect_err(const char *doc, int code, uint64_t line, const char *part) {
  tlc_aprof_t a;
  tlc_parse_err_t e;
  tlc_aprof_init(&a);
  assert_int_equal(parse(&a, doc, &e), code);
  assert_int_equal(e.line, line);
  if (strstr(e.reason, part) == NULL)
    fail_msg("reason \"%s\" does not contain \"%s\"", e.reason, part);
  tlc_aprof_fini(&a);
}

static void test_errors(void **state) {
  (void)state;
  expect_err("r f NONE 1\np 1 2 3\n", TLC_ESYNTAX, 2, "has 3 values");
  expect_err("r f NONE 1\np 1 2 3 4\np 1 2 3 4 5 6 7 8\n", TLC_ESYNTAX, 3, "earlier points have 4");
  expect_err("r f NONE 1\n\np 1 2 3 4\np 2 2 3 4\n", TLC_ESYNTAX, 4, "routine id 2");
  expect_err("r f NONE 1\nr g NONE 1\n", TLC_ESYNTAX, 2, "defined twice (first at line 1)");
  expect_err("u 1 \"x\"\n", TLC_ESYNTAX, 1, "no earlier r line");
  expect_err("c ok\nz foo\n", TLC_ESYNTAX, 2, "unknown line tag 'z'");
  expect_err("pp 1\n", TLC_ESYNTAX, 1, "unknown line tag \"pp");
  expect_err("k 18446744073709551616\n", TLC_ERANGE, 1, "out of range");
  expect_err("k 18446744073709551615\nk 1\n", TLC_ESYNTAX, 2, "second 'k' line");
  expect_err("k abc\n", TLC_ESYNTAX, 1, "not a number");
  expect_err("k 1 2\n", TLC_ESYNTAX, 1, "unexpected text");
  expect_err("r f NONE 1\nv 2\n", TLC_ESYNTAX, 2, "'v' line after");
  expect_err("m\n", TLC_ESYNTAX, 1, "empty metric");
  expect_err("r \"f NONE 1\n", TLC_ESYNTAX, 1, "unterminated");
  expect_err("r \"f\"x \"i\" 1\n", TLC_ESYNTAX, 1, "right after the closing quote");
  expect_err("r \"f\" \"i\" 1 2 3\n", TLC_ESYNTAX, 1, "unexpected text");
  expect_err("r onlyname\n", TLC_ESYNTAX, 1, "needs a name");
  expect_err("r f NONE x1\n", TLC_ESYNTAX, 1, "bad routine id");
  expect_err("r f 0xZZ NONE 1\n", TLC_ESYNTAX, 1, "bad routine address");
  expect_err("r f NONE 1\nx 1 10 11\n", TLC_ESYNTAX, 2, "parent context 11");
  expect_err("r f NONE 1\nx 2 10 -1\n", TLC_ESYNTAX, 2, "routine id 2");
  expect_err("r f NONE 1\nx 1 10 11\nx 1 11 10\n", TLC_ESYNTAX, 2, "cycle");
  expect_err("r f NONE 1\nx 1 10 10\n", TLC_ESYNTAX, 2, "cycle");
  expect_err("r f NONE 1\nx 1 10 -1\nx 1 10 -1\n", TLC_ESYNTAX, 3, "defined twice");
  expect_err("r f NONE 1\nx 1 10 -2\n", TLC_ESYNTAX, 2, "not a number");
  expect_err("r f NONE 1\nq 4 1 2 3\n", TLC_ESYNTAX, 2, "context id 4");
  expect_err("p 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19\n", TLC_ESYNTAX, 1, "more than 18");
  /* the version decides the layout */
  expect_err("v 2\nr \"f\" \"i\" 1\np 1 2 3 4 5 6 7 8 9 10 11 12\n", TLC_ESYNTAX, 3,
             "12 values; a version 2 report has 8");
  expect_err("v 3\nr \"f\" \"i\" 1\np 1 2 3 4 5 6 7 8\n", TLC_ESYNTAX, 3,
             "8 values; a version 3 report has 10");
  expect_err("v 4\nr \"f\" \"i\" 1\np 1 2 3 4 5 6 7 8 9 10\n", TLC_ESYNTAX, 3,
             "a version 4 report has 12");
  expect_err("v 5\nr \"f\" \"i\" 1\nq 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16\n", TLC_ESYNTAX, 3,
             "a version 5 report has 12 or 14");
  expect_err("v 6\nr \"f\" \"i\" 1\np 1 2 3 4 5 6 7 8 9 10\n", TLC_ESYNTAX, 3,
             "a version 6 report has 12, 14, 16 or 18");
  expect_err("v 0\nr f NONE 1\np 1 2 3 4 5 6 7 8\n", TLC_ESYNTAX, 3, "a version 0 report has 4");
  expect_err("r f NONE 1\np 1 2 3 4 5 6\n", TLC_ESYNTAX, 2, "has 6 values (4, 8, 10, 12 or 14");
  expect_err("c x\nv 1\n", TLC_ESYNTAX, 2, "version 1 is not one tlcap reads (0 and 2 to 6)");
  expect_err("v 7\n", TLC_ESYNTAX, 1, "version 7 is not one tlcap reads");
  expect_err("favourite x\n", TLC_ESYNTAX, 1, "unknown line tag");
}

/* Version 0 as aprof wrote it: no `v` line, `r NAME ADDRESS IMAGE ID`, 4-number points. */
static const char v0_report[] = "f ./sort\n"
                                "a ./sort\n"
                                "r sort_it 0x8048474 NONE 2\n"
                                "p 2 3 4 1\n"
                                "p 2 776 3696490 1\n"
                                "r main 0x80485F4 NONE 0\n"
                                "p 0 134 224667469 1\n";

static void test_sniff(void **state) {
  (void)state;
  assert_int_equal(tlc_aprof_sniff(v0_report, strlen(v0_report)), 1);
  assert_int_equal(tlc_aprof_sniff(v2_report, strlen(v2_report)), 1);
  assert_int_equal(tlc_aprof_sniff(seed_report, strlen(seed_report)), 1);
  assert_int_equal(tlc_aprof_sniff("", 0), 0);
  assert_int_equal(tlc_aprof_sniff("\n\n", 2), 0);
  assert_int_equal(tlc_aprof_sniff("* INFO %TOTAL_TIME%\n", 20), 0);
  assert_int_equal(tlc_aprof_sniff("<ProfilerExport/>", 17), 0);
  assert_int_equal(tlc_aprof_sniff("v 2\nk 1\0", 8), 0);
  assert_int_equal(tlc_aprof_sniff("v 2\nzz\n", 7), 0);
}

static void test_caps(void **state) {
  tlc_aprof_t a;
  tlc_parse_err_t e;
  (void)state;
  tlc_aprof_init(&a);
  a.max_routines = 2;
  assert_int_equal(parse(&a, "r a NONE 1\nr b NONE 2\nr c NONE 3\n", &e), TLC_ELIMIT);
  assert_int_equal(e.line, 3);
  tlc_aprof_fini(&a);
  tlc_aprof_init(&a);
  a.max_routines = 2; /* exactly at the cap */
  assert_int_equal(parse(&a, "r a NONE 1\nr b NONE 2\n", &e), 0);
  tlc_aprof_fini(&a);
  tlc_aprof_init(&a);
  a.max_points = 3;
  assert_int_equal(parse(&a, "r a NONE 1\nc x\np 1 1 1 1\np 1 2 1 1\np 1 3 1 1\n", &e), TLC_ELIMIT);
  assert_int_equal(e.line, 5);
  tlc_aprof_fini(&a);
  tlc_aprof_init(&a);
  a.max_contexts = 1;
  assert_int_equal(parse(&a, "r a NONE 1\nx 1 1 -1\nx 1 2 1\n", &e), TLC_ELIMIT);
  assert_int_equal(e.line, 3);
  tlc_aprof_fini(&a);
}

static void sweep(const char *doc, size_t len) {
  uint64_t nth;
  for (nth = 1;; nth++) {
    tlc_aprof_t a;
    tlc_parse_err_t e;
    int r;
    testalloc_install();
    testalloc_fail_at(nth);
    tlc_aprof_init(&a);
    r = tlc_aprof_parse(&a, doc, len, &e);
    tlc_aprof_fini(&a);
    assert_int_equal(testalloc_live_bytes(), 0);
    if (testalloc_failed() == 0) {
      assert_int_equal(r, 0);
      testalloc_uninstall();
      break;
    }
    assert_int_equal(r, TLC_ENOMEM);
    testalloc_uninstall();
  }
  assert_true(nth > 3);
}

static void test_alloc_failures(void **state) {
  (void)state;
  sweep(v0_report, strlen(v0_report));
  sweep(v2_report, strlen(v2_report));
  sweep(seed_report, strlen(seed_report));
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_real_v0_report),
    cmocka_unit_test(test_every_public_sample),
    cmocka_unit_test(test_versions_3_to_6),
    cmocka_unit_test(test_v2_report),
    cmocka_unit_test(test_seed_layout_and_cct),
    cmocka_unit_test(test_json_exact),
    cmocka_unit_test(test_errors),
    cmocka_unit_test(test_sniff),
    cmocka_unit_test(test_caps),
    cmocka_unit_test(test_alloc_failures),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
