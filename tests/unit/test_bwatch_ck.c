/* test_bwatch_ck.c - a violation's REF and the watch across restarts (SPEC 13,
 * docs/budgets.md "The moment of a violation" and "Restarts"):
 *  - the spelling v:BUDGET:N (formats/moment.h) and the moment of a stretch;
 *  - tlc_bwatch_find: a kept one, the worst, one no longer kept, one past the last, an
 *    unknown budget, each refusal saying what there is;
 *  - tlc_bwatch_save / tlc_bwatch_load: a watch saved and loaded into a fresh one holds the
 *    same counts, kept and worst (and saves to the same bytes); a changed budget starts
 *    afresh; a damaged, cut or foreign file is refused and the watch stays fresh.
 * The stream is made by hand: main (handle 1) called five times with NET 150, 400, 200, 300,
 * 250 ns against max 100 ns, so its violations are 1..5, the worst the second; g (handle 2)
 * once with 50 ns against 10 ns.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "base/alloc.h"
#include "base/err.h"
#include "budget/budget.h"
#include "engine/engine.h"
#include "formats/budget.h"
#include "formats/moment.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static const char budgets[] = "[budget f]\narea = 00000001\nstat = net\nmax = 100ns\n"
                              "[budget g]\narea = 00000002\nstat = net\nmax = 10ns\n";

static int64_t wall(void *ud) {
  (void)ud;
  return 1764748800123;
}

static tlc_bwatch_t *fresh(const char *text) {
  tlc_tbudget_set_t s;
  tlc_bwatch_opts_t o;
  tlc_bwatch_t *w = NULL;
  char err[300];
  tlc_tbudget_set_init(&s);
  assert_int_equal(tlc_tbudget_parse(&s, text, strlen(text), "b.ini", err, sizeof(err)), 0);
  memset(&o, 0, sizeof(o));
  o.keep = 2;
  o.wall_ms = wall;
  assert_int_equal(tlc_bwatch_new(&w, "lab1", &s, &o), 0);
  tlc_tbudget_set_fini(&s);
  return w;
}

static tlc_bwatch_t *watched(void) {
  static const int64_t net[] = { 150, 400, 200, 300, 250 };
  tlc_bwatch_t *w = fresh(budgets);
  tlc_engine_t *e;
  tlc_event_t ev[12];
  size_t i, n = 0;
  memset(ev, 0, sizeof(ev));
  for (i = 0; i < 5; i++) {
    ev[n].time_ns = 1000 * (int64_t)(i + 1);
    ev[n].handle = 1;
    ev[n++].type = TLC_EV_ENTRY;
    ev[n].time_ns = 1000 * (int64_t)(i + 1) + net[i];
    ev[n].handle = 1;
    ev[n++].type = TLC_EV_EXIT;
  }
  ev[n].time_ns = 9000;
  ev[n].handle = 2;
  ev[n++].type = TLC_EV_ENTRY;
  ev[n].time_ns = 9050;
  ev[n].handle = 2;
  ev[n++].type = TLC_EV_EXIT;
  assert_int_equal(tlc_engine_new(&e, TLC_FMT_BIN11, NULL), 0);
  tlc_bwatch_attach(w, e);
  tlc_engine_push(e, ev, n);
  tlc_engine_free(e);
  assert_int_equal(tlc_bwatch_all(w), 6);
  return w;
}

static void test_vref(void **state) {
  char name[64], err[300];
  uint64_t n = 0;
  tlc_moment_t m;
  (void)state;
  assert_int_equal(
      tlc_moment_parse_vref("v:tick_period:12", name, sizeof(name), &n, err, sizeof(err)), 1);
  assert_string_equal(name, "tick_period");
  assert_int_equal(n, 12);
  assert_int_equal(tlc_moment_parse_vref("v:a.b-c:18446744073709551615", name, sizeof(name), &n,
                                         err, sizeof(err)),
                   1);
  assert_true(n == UINT64_MAX);
  assert_int_equal(tlc_moment_parse_vref("ns:5", name, sizeof(name), &n, err, sizeof(err)), 0);
  assert_int_equal(tlc_moment_parse_vref("epoch:1:5", name, sizeof(name), &n, err, sizeof(err)), 0);
  static const char *const bad[] = {
    "v:",    "v:f",    "v:f:",    "v::1",   "v:f:0",
    "v:f:x", "v:f:1x", "v:a b:1", "v:f:-1", "v:f:18446744073709551616"
  };
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    err[0] = '\0';
    assert_int_equal(tlc_moment_parse_vref(bad[i], name, sizeof(name), &n, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "is not a violation's REF"));
  }
  /* a name longer than the buffer is refused, not cut */
  assert_int_equal(tlc_moment_parse_vref("v:abcdefgh:1", name, 8, &n, err, sizeof(err)), -1);
  /* the stretch: start - span .. end + span (until is exclusive), in its epoch */
  assert_int_equal(tlc_moment_of_stretch(1000, 1400, 3, "100ns", &m, err, sizeof(err)), 0);
  assert_int_equal(m.range.kind, TLC_WHEN_TARGET);
  assert_int_equal(m.range.epoch, 3);
  assert_int_equal(m.range.since, 900);
  assert_int_equal(m.range.until, 1501);
  assert_int_equal(m.ref, 1000);
  assert_int_equal(m.span, 100);
  assert_int_equal(tlc_moment_of_stretch(1000, 1400, 0, NULL, &m, err, sizeof(err)), 0);
  assert_int_equal(m.span, TLC_MOMENT_SPAN_DEFAULT_NS);
  assert_int_equal(tlc_moment_of_stretch(1000, 1400, 0, "forever", &m, err, sizeof(err)), -1);
  assert_non_null(strstr(err, "not a duration"));
}

static void test_find(void **state) {
  tlc_bwatch_t *w = watched();
  tlc_violation_t v;
  char err[400];
  (void)state;
  assert_int_equal(tlc_bwatch_find(w, "f", 5, &v, err, sizeof(err)), 0);
  assert_int_equal(v.value, 250);
  assert_int_equal(v.start, 5000);
  assert_int_equal(v.end, 5250);
  assert_int_equal(tlc_bwatch_find(w, "f", 4, &v, err, sizeof(err)), 0);
  assert_int_equal(v.value, 300);
  assert_int_equal(tlc_bwatch_find(w, "f", 2, &v, err, sizeof(err)), 0); /* the worst */
  assert_int_equal(v.value, 400);
  assert_int_equal(v.start, 2000);
  assert_int_equal(tlc_bwatch_find(w, "g", 1, &v, err, sizeof(err)), 0);
  assert_int_equal(v.value, 50);
  assert_int_equal(tlc_bwatch_find(w, "f", 1, &v, err, sizeof(err)), TLC_ERANGE);
  assert_string_equal(err, "v:f:1 is not among the last 2 kept violations of f; kept: 4..5 and "
                           "the worst, 2");
  assert_int_equal(tlc_bwatch_find(w, "f", 6, &v, err, sizeof(err)), TLC_ERANGE);
  assert_string_equal(err, "v:f:6: f has had 5 violations");
  assert_int_equal(tlc_bwatch_find(w, "h", 1, &v, err, sizeof(err)), -ENOENT);
  assert_string_equal(err, "v:h:1: no budget named h on this target (its budgets: f, g)");
  tlc_bwatch_free(w);
}

typedef struct counts {
  uint64_t n[2];
  size_t rows;
} counts_t;

static void count_cb(void *ud, const tlc_bcount_t *c) {
  counts_t *k = ud;
  if (c->budget < 2)
    k->n[c->budget] += c->count;
  k->rows++;
}

static void same_watch(const tlc_bwatch_t *a, const tlc_bwatch_t *b) {
  counts_t ka, kb;
  assert_int_equal(tlc_bwatch_all(a), tlc_bwatch_all(b));
  assert_int_equal(tlc_bwatch_nbudgets(a), tlc_bwatch_nbudgets(b));
  for (size_t i = 0; i < tlc_bwatch_nbudgets(a); i++) {
    tlc_violation_t ra[4], rb[4];
    size_t na = tlc_bwatch_recent(a, i, ra, 4), nb = tlc_bwatch_recent(b, i, rb, 4);
    const tlc_violation_t *wa = tlc_bwatch_worst(a, i), *wb = tlc_bwatch_worst(b, i);
    assert_int_equal(tlc_bwatch_total(a, i), tlc_bwatch_total(b, i));
    assert_int_equal(na, nb);
    assert_memory_equal(ra, rb, na * sizeof(ra[0]));
    assert_true((wa == NULL) == (wb == NULL));
    if (wa != NULL)
      assert_memory_equal(wa, wb, sizeof(*wa));
  }
  memset(&ka, 0, sizeof(ka));
  memset(&kb, 0, sizeof(kb));
  tlc_bwatch_counts(a, count_cb, &ka);
  tlc_bwatch_counts(b, count_cb, &kb);
  assert_memory_equal(&ka, &kb, sizeof(ka));
}

static void test_save_load(void **state) {
  tlc_bwatch_t *w = watched(), *back = fresh(budgets);
  uint8_t *blob, *again;
  size_t len, alen;
  counts_t k;
  tlc_violation_t v;
  char err[300];
  (void)state;
  assert_int_equal(tlc_bwatch_save(w, &blob, &len), 0);
  assert_int_equal(tlc_bwatch_load(back, blob, len, err, sizeof(err)), 0);
  same_watch(w, back);
  memset(&k, 0, sizeof(k));
  tlc_bwatch_counts(back, count_cb, &k);
  assert_int_equal(k.n[0], 5);
  assert_int_equal(k.n[1], 1);
  assert_int_equal(k.rows, 2);
  /* its REFs go on: the kept and the worst are found again */
  assert_int_equal(tlc_bwatch_find(back, "f", 2, &v, err, sizeof(err)), 0);
  assert_int_equal(v.value, 400);
  assert_int_equal(v.wall_ms, 1764748800123);
  assert_int_equal(tlc_bwatch_save(back, &again, &alen), 0);
  assert_int_equal(alen, len);
  assert_memory_equal(again, blob, len);
  tlc_free(again);
  tlc_bwatch_free(back);

  /* f changed (max 200ns): f afresh, g kept */
  back = fresh("[budget f]\narea = 00000001\nstat = net\nmax = 200ns\n"
               "[budget g]\narea = 00000002\nstat = net\nmax = 10ns\n");
  assert_int_equal(tlc_bwatch_load(back, blob, len, err, sizeof(err)), 0);
  assert_int_equal(tlc_bwatch_total(back, 0), 0);
  assert_null(tlc_bwatch_worst(back, 0));
  assert_int_equal(tlc_bwatch_total(back, 1), 1);
  assert_int_equal(tlc_bwatch_all(back), 1);
  memset(&k, 0, sizeof(k));
  tlc_bwatch_counts(back, count_cb, &k);
  assert_int_equal(k.rows, 1);
  assert_int_equal(k.n[1], 1);
  tlc_bwatch_free(back);

  /* damaged anywhere, cut anywhere, another version: refused, the watch fresh */
  for (size_t i = 0; i < len; i += 7) {
    back = fresh(budgets);
    blob[i] ^= 0x21;
    err[0] = '\0';
    assert_int_equal(tlc_bwatch_load(back, blob, len, err, sizeof(err)), TLC_EFRAME);
    assert_non_null(strstr(err, "checksum"));
    assert_int_equal(tlc_bwatch_all(back), 0);
    assert_int_equal(tlc_bwatch_total(back, 0), 0);
    blob[i] ^= 0x21;
    assert_int_equal(tlc_bwatch_load(back, blob, i, err, sizeof(err)), TLC_EFRAME);
    assert_int_equal(tlc_bwatch_all(back), 0);
    tlc_bwatch_free(back);
  }
  tlc_free(blob);
  tlc_bwatch_free(w);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_vref),
    cmocka_unit_test(test_find),
    cmocka_unit_test(test_save_load),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
