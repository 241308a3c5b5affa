/* test_budgets.c - timing budgets (SPEC 13): the budget file (formats/budget.h) and the watch
 * that tests every sample through the engine's tap (daemon/budget/budget.h).
 *
 *  - parse: units, every key, areas by handle / name / glob, and every refusal naming
 *    file:line, section and key;
 *  - watch: a hand-made stream whose NET, CALL, PERIOD and OUTSIDE samples are known, budgets
 *    with max and min, by handle, by name and glob, per context; the violations' values,
 *    limits, times, epochs and sequences, their counts per (budget, area, context), the kept
 *    ring and the worst;
 *  - rate: E events per window, windows closed by the next event, empty windows below min,
 *    and a gap that ends a window untested;
 *  - reload: an unchanged budget keeps its counts, a changed one starts again;
 *  - wall clock: the engine's chunk stamp (TLC_TAP_WALL), the clock without one, opts.wall_ms;
 *  - kept forms: a violation kept compact or whole reads back the same, located, saved and
 *    taken back, across a reload.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "budget/budget.h"
#include "engine/engine.h"
#include "formats/budget.h"

#include <stdio.h>
#include <string.h>

static void test_duration(void **state) {
  int64_t v;
  (void)state;
  assert_int_equal(tlc_tbudget_duration("250us", 0, &v), 0);
  assert_int_equal(v, 250000);
  assert_int_equal(tlc_tbudget_duration("1.5ms", 0, &v), 0);
  assert_int_equal(v, 1500000);
  assert_int_equal(tlc_tbudget_duration("2s", 0, &v), 0);
  assert_int_equal(v, 2000000000);
  assert_int_equal(tlc_tbudget_duration("0.000000001s", 0, &v), 0);
  assert_int_equal(v, 1);
  assert_int_equal(tlc_tbudget_duration("17ns", 0, &v), 0);
  assert_int_equal(v, 17);
  assert_int_equal(tlc_tbudget_duration("12", 1, &v), 0);
  assert_int_equal(v, 12);
  assert_int_equal(tlc_tbudget_duration("12", 0, &v), -1); /* a duration needs its unit */
  assert_int_equal(tlc_tbudget_duration("1ms", 1, &v), -1);
  assert_int_equal(tlc_tbudget_duration("-1ms", 0, &v), -1);
  assert_int_equal(tlc_tbudget_duration("ms", 0, &v), -1);
  assert_int_equal(tlc_tbudget_duration("1.ms", 0, &v), 0);
  assert_int_equal(v, 1000000);
  assert_int_equal(tlc_tbudget_duration("99999999999999999999s", 0, &v), -1);
  assert_int_equal(tlc_tbudget_duration("10000000000s", 0, &v), -1); /* past INT64_MAX ns */
  assert_int_equal(tlc_tbudget_duration("1h", 0, &v), -1);
}

static const char good[] = "# budgets\n"
                           "[budget isr]\n"
                           "area = 0x00000010\n"
                           "stat = period\n"
                           "max = 1.05ms\n"
                           "min = 950us\n"
                           "\n"
                           "[budget task]\n"
                           "target = board-*\n"
                           "area = Task*\n"
                           "context = task1A\n"
                           "stat = net\n"
                           "max = 2s\n"
                           "; rate\n"
                           "[budget rx]\n"
                           "area = rx_irq\n"
                           "stat = rate\n"
                           "window = 10ms\n"
                           "max = 20\n";

static void test_parse(void **state) {
  tlc_tbudget_set_t s;
  char err[512];
  (void)state;
  tlc_tbudget_set_init(&s);
  assert_int_equal(tlc_tbudget_parse(&s, good, strlen(good), "b.ini", err, sizeof(err)), 0);
  assert_int_equal(s.n, 3);
  assert_string_equal(s.b[0].name, "isr");
  assert_int_equal(s.b[0].area_kind, TLC_BAREA_HANDLE);
  assert_int_equal(s.b[0].handle, 0x10);
  assert_int_equal(s.b[0].stat, 3); /* TLC_PERIOD */
  assert_int_equal(s.b[0].max, 1050000);
  assert_int_equal(s.b[0].min, 950000);
  assert_string_equal(s.b[0].target, "*");
  assert_string_equal(s.b[0].context, "");
  assert_string_equal(s.b[0].origin, "b.ini:2");
  assert_int_equal(s.b[1].area_kind, TLC_BAREA_GLOB);
  assert_string_equal(s.b[1].context, "task1A");
  assert_int_equal(s.b[1].has_min, 0);
  assert_int_equal(s.b[2].area_kind, TLC_BAREA_NAME);
  assert_int_equal(s.b[2].stat, TLC_BSTAT_RATE);
  assert_int_equal(s.b[2].window_ns, 10000000);
  assert_int_equal(s.b[2].max, 20);
  assert_true(tlc_tbudget_target_match(&s.b[1], "board-3"));
  assert_false(tlc_tbudget_target_match(&s.b[1], "bench"));
  assert_true(tlc_tbudget_area_match(&s.b[1], 5, "TaskIdle"));
  assert_false(tlc_tbudget_area_match(&s.b[1], 5, NULL));
  assert_true(tlc_tbudget_area_match(&s.b[0], 0x10, NULL));
  assert_true(tlc_tbudget_area_match(&s.b[2], 1, "rx_irq"));
  assert_false(tlc_tbudget_area_match(&s.b[2], 1, "rx_irq2"));
  tlc_tbudget_set_fini(&s);
}

static void refused(const char *text, const char *want) {
  tlc_tbudget_set_t s;
  char err[512] = "";
  tlc_tbudget_set_init(&s);
  assert_int_equal(tlc_tbudget_parse(&s, text, strlen(text), "f.ini", err, sizeof(err)), -1);
  if (strstr(err, want) == NULL) {
    fprintf(stderr, "got '%s', want '%s'\n", err, want);
    fail();
  }
  assert_int_equal(s.n, 0);
  tlc_tbudget_set_fini(&s);
}

static void test_refusals(void **state) {
  (void)state;
  refused("[budget a]\narea = x\nstat = nett\nmax = 1ms\n", "f.ini:3: [budget a] stat:");
  refused("[budget a]\narea = x\nmax = 1\n", "f.ini:1: [budget a] max/min: a duration");
  refused("[budget a]\narea = x\nstat = rate\nwindow = 1s\nmax = 1ms\n",
          "f.ini:1: [budget a] max/min: a count");
  refused("[budget a]\narea = x\nstat = rate\nmax = 5\n", "f.ini:1: [budget a] window: missing");
  refused("[budget a]\narea = x\nmax = 1ms\nwindow = 1s\n", "window: only for stat = rate");
  refused("[budget a]\nstat = net\nmax = 1ms\n", "f.ini:1: [budget a] area: missing");
  refused("[budget a]\narea = x\n", "max or min: missing");
  refused("[budget a]\narea = x\nmax = 1ms\nmin = 2ms\n", "min: more than max");
  refused("[budget a]\narea = x\nmax = 1 ms\n", "f.ini:3: [budget a] max:");
  refused("[budget a]\narea = x\ncolour = red\n", "f.ini:3: [budget a] colour: unknown key");
  refused("[daemon]\nx = 1\n", "f.ini:1: only [budget NAME] sections");
  refused("area = x\n", "f.ini:1: a key outside");
  refused("[budget a]\narea x\n", "f.ini:2: 'key = value' expected");
  refused("[budget a b]\narea = x\n", "f.ini:1: [budget a b]: a budget name has only");
  refused("[budget a]\narea = x\nmax = 1ms\n[budget a]\narea = y\nmax = 1ms\n",
          "f.ini:4: [budget a] a second budget named a");
}

/* ---- the watch ---- */

#define MAXV 64
typedef struct seen {
  tlc_violation_t v[MAXV];
  size_t n;
} seen_t;

static const char *area_name(void *ud, uint32_t handle) {
  (void)ud;
  return handle == 1 ? "TaskA" : handle == 2 ? "TaskB" : handle == 3 ? "isr_tick" : NULL;
}

static const char *ctx_name(void *ud, uint32_t context, char *buf, size_t len) {
  (void)ud;
  snprintf(buf, len, "ctx%u", context);
  return buf;
}

static void on_violation(void *ud, const tlc_violation_t *v) {
  seen_t *s = ud;
  if (s->n < MAXV)
    s->v[s->n++] = *v;
}

static int64_t wall(void *ud) {
  (void)ud;
  return 1234;
}

static void ev(tlc_event_t *e, int64_t t, uint32_t h, unsigned type, unsigned core) {
  memset(e, 0, sizeof(*e));
  e->time_ns = t;
  e->handle = h;
  e->type = (uint8_t)type;
  e->core = (uint8_t)core;
}

/* The violations the watch's answers tagged in the engine's sample log (engine.h: TLC_SLOG_TAG,
 * what the rollups count: budgetd.c), by kind: a consumer that reads each block and leaves it
 * to the engine. */
static uint64_t g_tags[TLC_TAP_COUNT + 1];
static tlc_engine_slent_t *count_tags(void *ud, const tlc_engine_t *e, tlc_engine_slent_t *x,
                                      size_t n) {
  (void)ud;
  (void)e;
  for (size_t i = 0; i < n; i++) {
    if (x[i].rk == TLC_SLOG_TAG) {
      unsigned k = (unsigned)((uint64_t)x[i].value & 0xFF);
      assert_true(k <= TLC_TAP_COUNT);
      g_tags[k] += (uint64_t)x[i].value >> 8;
    } else if (x[i].rk == TLC_SLOG_NOTE ||
               (x[i].rk < TLC_SLOG_MARKS && x[i].rk % TLC_NKINDS == TLC_NET)) {
      i++; /* a pair: the next entry's rk is not set (engine.h) */
    }
  }
  return x;
}

static tlc_bwatch_t *watch(const char *text, seen_t *seen, size_t keep, tlc_engine_t **e) {
  tlc_tbudget_set_t s;
  tlc_bwatch_t *w;
  tlc_bwatch_opts_t o;
  char err[512];
  tlc_tbudget_set_init(&s);
  if (tlc_tbudget_parse(&s, text, strlen(text), "t.ini", err, sizeof(err)) != 0) {
    fprintf(stderr, "%s\n", err);
    fail();
  }
  memset(&o, 0, sizeof(o));
  o.keep = keep;
  o.area_name = area_name;
  o.ctx_name = ctx_name;
  o.on_violation = on_violation;
  o.wall_ms = wall;
  o.ud = seen;
  assert_int_equal(tlc_bwatch_new(&w, "board-1", &s, &o), 0);
  tlc_tbudget_set_fini(&s);
  assert_int_equal(tlc_engine_new(e, TLC_FMT_BIN11, NULL), 0);
  tlc_bwatch_attach(w, *e);
  memset(g_tags, 0, sizeof g_tags);
  assert_int_equal(tlc_engine_set_slog(*e, count_tags, NULL), 0);
  return w;
}

typedef struct cnts {
  tlc_bcount_t c[16];
  size_t n;
} cnts_t;

static void count_cb(void *ud, const tlc_bcount_t *c) {
  cnts_t *x = ud;
  if (x->n < 16)
    x->c[x->n++] = *c;
}

static uint64_t count_of(const tlc_bwatch_t *w, uint32_t budget, uint32_t handle, uint32_t ctx) {
  cnts_t x;
  size_t i;
  x.n = 0;
  tlc_bwatch_counts(w, count_cb, &x);
  for (i = 0; i < x.n; i++)
    if (x.c[i].budget == budget && x.c[i].handle == handle && x.c[i].context == ctx)
      return x.c[i].count;
  return 0;
}

/* TaskA (handle 1) on core 0 (context 0) runs E..X three times: at 100..400 (suspended
 * 200..300: NET 200, CALL 300), 1000..1050 (NET 50), 2000..2900 (NET 900). TaskB (handle 2)
 * on core 1 (context 1) once, 500..2500 (NET 2000). Then isr_tick (3) E/X at 3000, 3100,
 * 3250: PERIODs 100 and 150. */
static void push_stream(tlc_engine_t *e) {
  tlc_event_t v[32];
  size_t n = 0;
  ev(&v[n++], 100, 1, TLC_EV_ENTRY, 0);
  ev(&v[n++], 200, 1, TLC_EV_SUSPEND, 0);
  ev(&v[n++], 300, 1, TLC_EV_RESUME, 0);
  ev(&v[n++], 400, 1, TLC_EV_EXIT, 0);
  ev(&v[n++], 500, 2, TLC_EV_ENTRY, 1);
  ev(&v[n++], 1000, 1, TLC_EV_ENTRY, 0);
  ev(&v[n++], 1050, 1, TLC_EV_EXIT, 0);
  ev(&v[n++], 2000, 1, TLC_EV_ENTRY, 0);
  ev(&v[n++], 2500, 2, TLC_EV_EXIT, 1);
  ev(&v[n++], 2900, 1, TLC_EV_EXIT, 0);
  ev(&v[n++], 3000, 3, TLC_EV_ENTRY, 0);
  ev(&v[n++], 3001, 3, TLC_EV_EXIT, 0);
  ev(&v[n++], 3100, 3, TLC_EV_ENTRY, 0);
  ev(&v[n++], 3101, 3, TLC_EV_EXIT, 0);
  ev(&v[n++], 3250, 3, TLC_EV_ENTRY, 0);
  ev(&v[n++], 3251, 3, TLC_EV_EXIT, 0);
  tlc_engine_push(e, v, n);
}

static void test_watch(void **state) {
  static const char text[] = "[budget net_a]\narea = TaskA\nstat = net\nmax = 100ns\n"
                             "[budget task_net]\narea = Task*\nstat = net\nmin = 60ns\n"
                             "[budget call_b]\narea = 00000002\ncontext = ctx1\nstat = call\n"
                             "max = 1us\n"
                             "[budget call_b0]\narea = 00000002\ncontext = ctx0\nstat = call\n"
                             "max = 1ns\n"
                             "[budget tick]\narea = isr_tick\nstat = period\nmax = 120ns\n"
                             "min = 101ns\n"
                             "[budget other]\ntarget = bench\narea = TaskA\nstat = net\n"
                             "max = 1ns\n";
  static seen_t seen;
  tlc_engine_t *e;
  tlc_bwatch_t *w;
  tlc_violation_t r[4];
  const tlc_violation_t *worst;
  (void)state;
  memset(&seen, 0, sizeof(seen));
  w = watch(text, &seen, 2, &e);
  assert_int_equal(tlc_bwatch_nbudgets(w), 5); /* "other" is another target's */
  push_stream(e);
  /* net_a: NET 200 (100..400) and 900 (2000..2900) above 100; 50 is not */
  assert_int_equal(tlc_bwatch_total(w, 0), 2);
  /* task_net: NET 50 of TaskA below 60 */
  assert_int_equal(tlc_bwatch_total(w, 1), 1);
  /* call_b: TaskB's CALL 2000 > 1000 in ctx1; call_b0 never (TaskB is not in ctx0) */
  assert_int_equal(tlc_bwatch_total(w, 2), 1);
  assert_int_equal(tlc_bwatch_total(w, 3), 0);
  /* tick: PERIOD 100 below 101, 150 above 120 */
  assert_int_equal(tlc_bwatch_total(w, 4), 2);
  assert_int_equal(tlc_bwatch_all(w), 6);
  assert_int_equal(seen.n, 6);
  /* each tagged in the sample log with its sample's kind */
  assert_int_equal(g_tags[TLC_NET], 3);
  assert_int_equal(g_tags[TLC_CALL], 1);
  assert_int_equal(g_tags[TLC_PERIOD], 2);
  /* in the order they closed: net_a at 400, task_net at 1050, call_b at 2500, net_a at 2900,
   * tick at 3100 and 3250 */
  assert_int_equal(seen.v[0].budget, 0);
  assert_int_equal(seen.v[0].value, 200);
  assert_int_equal(seen.v[0].limit, 100);
  assert_int_equal(seen.v[0].over, 1);
  assert_int_equal(seen.v[0].start, 100);
  assert_int_equal(seen.v[0].end, 400);
  assert_int_equal(seen.v[0].seq_start, 1);
  assert_int_equal(seen.v[0].seq_end, 4);
  assert_int_equal(seen.v[0].epoch, 0);
  assert_int_equal(seen.v[0].wall_ms, 1234);
  assert_int_equal(seen.v[0].handle, 1);
  assert_int_equal(seen.v[0].context, 0);
  assert_int_equal(seen.v[1].budget, 1);
  assert_int_equal(seen.v[1].value, 50);
  assert_int_equal(seen.v[1].limit, 60);
  assert_int_equal(seen.v[1].over, 0);
  assert_int_equal(seen.v[2].budget, 2);
  assert_int_equal(seen.v[2].value, 2000);
  assert_int_equal(seen.v[2].start, 500);
  assert_int_equal(seen.v[2].end, 2500);
  assert_int_equal(seen.v[2].context, 1);
  assert_int_equal(seen.v[2].seq_start, 5);
  assert_int_equal(seen.v[2].seq_end, 9);
  assert_int_equal(seen.v[3].value, 900);
  assert_int_equal(seen.v[4].budget, 4);
  assert_int_equal(seen.v[4].value, 100);
  assert_int_equal(seen.v[4].over, 0);
  assert_int_equal(seen.v[4].start, 3000);
  assert_int_equal(seen.v[4].end, 3100);
  assert_int_equal(seen.v[5].value, 150);
  assert_int_equal(seen.v[5].limit, 120);
  assert_int_equal(seen.v[5].count, 2);
  /* counts per (budget, area, context) */
  assert_int_equal(count_of(w, 0, 1, 0), 2);
  assert_int_equal(count_of(w, 1, 1, 0), 1);
  assert_int_equal(count_of(w, 1, 2, 1), 0);
  assert_int_equal(count_of(w, 2, 2, 1), 1);
  /* the kept ring (keep 2) and the worst: 900 is 800 over, 200 only 100 */
  assert_int_equal(tlc_bwatch_recent(w, 0, r, 4), 2);
  assert_int_equal(r[0].value, 200);
  assert_int_equal(r[1].value, 900);
  worst = tlc_bwatch_worst(w, 0);
  assert_non_null(worst);
  assert_int_equal(worst->value, 900);
  /* tick's worst: 150 is 30 over 120, 100 only 1 under 101 */
  assert_int_equal(tlc_bwatch_worst(w, 4)->value, 150);
  assert_null(tlc_bwatch_worst(w, 3));
  /* three more net_a violations: the ring keeps the last two */
  {
    tlc_event_t v[6];
    ev(&v[0], 4000, 1, TLC_EV_ENTRY, 0);
    ev(&v[1], 4300, 1, TLC_EV_EXIT, 0);
    ev(&v[2], 5000, 1, TLC_EV_ENTRY, 0);
    ev(&v[3], 5400, 1, TLC_EV_EXIT, 0);
    ev(&v[4], 6000, 1, TLC_EV_ENTRY, 0);
    ev(&v[5], 6500, 1, TLC_EV_EXIT, 0);
    tlc_engine_push(e, v, 6);
  }
  assert_int_equal(tlc_bwatch_total(w, 0), 5);
  assert_int_equal(tlc_bwatch_recent(w, 0, r, 4), 2);
  assert_int_equal(r[0].value, 400);
  assert_int_equal(r[1].value, 500);
  assert_int_equal(tlc_bwatch_worst(w, 0)->value, 900);
  tlc_bwatch_free(w);
  tlc_engine_free(e);
}

static void test_rate(void **state) {
  /* at most 2 and at least 1 E of isr_tick per 1000 ns window */
  static const char text[] =
      "[budget r]\narea = isr_tick\nstat = rate\nwindow = 1us\nmax = 2\nmin = 1\n";
  static seen_t seen;
  tlc_engine_t *e;
  tlc_bwatch_t *w;
  tlc_event_t v[16];
  size_t n = 0;
  (void)state;
  memset(&seen, 0, sizeof(seen));
  w = watch(text, &seen, 10, &e);
  /* window 0: 3 E (100, 200, 300); window 1: 1 (1500); windows 2, 3: none; window 4: 1
   * (4100), closed by the E at 5000 (window 5), which is then cut by a gap */
  ev(&v[n++], 100, 3, TLC_EV_ENTRY, 0);
  ev(&v[n++], 150, 3, TLC_EV_EXIT, 0);
  ev(&v[n++], 200, 3, TLC_EV_ENTRY, 0);
  ev(&v[n++], 250, 3, TLC_EV_EXIT, 0);
  ev(&v[n++], 300, 3, TLC_EV_ENTRY, 0);
  ev(&v[n++], 350, 3, TLC_EV_EXIT, 0);
  ev(&v[n++], 1500, 3, TLC_EV_ENTRY, 0);
  ev(&v[n++], 1550, 3, TLC_EV_EXIT, 0);
  ev(&v[n++], 4100, 3, TLC_EV_ENTRY, 0);
  ev(&v[n++], 4150, 3, TLC_EV_EXIT, 0);
  ev(&v[n++], 5000, 3, TLC_EV_ENTRY, 0);
  ev(&v[n++], 5050, 3, TLC_EV_EXIT, 0);
  tlc_engine_push(e, v, n);
  /* window 0 over (3 > 2) at the E of 1500; windows 2..3 empty (2 violations, one record) at
   * the E of 4100; window 4 (1) is fine */
  assert_int_equal(tlc_bwatch_total(w, 0), 3);
  assert_int_equal(seen.n, 2);
  assert_int_equal(seen.v[0].value, 3);
  assert_int_equal(seen.v[0].limit, 2);
  assert_int_equal(seen.v[0].start, 0);
  assert_int_equal(seen.v[0].end, 1000);
  assert_int_equal(seen.v[0].seq_start, 1);
  assert_int_equal(seen.v[0].seq_end, 5);
  assert_int_equal(seen.v[1].value, 0);
  assert_int_equal(seen.v[1].limit, 1);
  assert_int_equal(seen.v[1].start, 2000);
  assert_int_equal(seen.v[1].end, 4000);
  /* a rate's violation is not its closing E's: none tagged (budgetd.c hands them on) */
  for (unsigned k = 0; k <= TLC_TAP_COUNT; k++)
    assert_int_equal(g_tags[k], 0);
  /* a gap: window 5 ends untested; after it windows start afresh (no empty stretch) */
  tlc_engine_gap(e);
  n = 0;
  ev(&v[n++], 9100, 3, TLC_EV_ENTRY, 0);
  ev(&v[n++], 9150, 3, TLC_EV_EXIT, 0);
  ev(&v[n++], 10100, 3, TLC_EV_ENTRY, 0);
  tlc_engine_push(e, v, n);
  assert_int_equal(tlc_bwatch_total(w, 0), 3);
  tlc_bwatch_free(w);
  tlc_engine_free(e);
}

static void test_reload(void **state) {
  static const char a[] = "[budget keep]\narea = TaskA\nstat = net\nmax = 100ns\n"
                          "[budget change]\narea = TaskA\nstat = call\nmax = 100ns\n";
  static const char b[] = "[budget change]\narea = TaskA\nstat = call\nmax = 1us\n"
                          "[budget keep]\narea = TaskA\nstat = net\nmax = 100ns\n";
  static seen_t seen;
  tlc_engine_t *e;
  tlc_bwatch_t *w;
  tlc_tbudget_set_t s;
  char err[256];
  (void)state;
  memset(&seen, 0, sizeof(seen));
  uint64_t k0, k1;
  w = watch(a, &seen, 4, &e);
  push_stream(e); /* TaskA: NET 200, 50, 900; CALL 300, 50, 900 */
  assert_int_equal(tlc_bwatch_total(w, 0), 2);
  assert_int_equal(tlc_bwatch_total(w, 1), 2);
  k0 = tlc_bwatch_key(w, 0);
  k1 = tlc_bwatch_key(w, 1);
  assert_true(k0 != 0 && k1 != 0 && k0 != k1);
  tlc_tbudget_set_init(&s);
  assert_int_equal(tlc_tbudget_parse(&s, b, strlen(b), "b.ini", err, sizeof(err)), 0);
  assert_int_equal(tlc_bwatch_set_budgets(w, &s), 0);
  tlc_bwatch_attach(w, e);
  tlc_tbudget_set_fini(&s);
  /* the names moved: a key of before never names one of now (vserve's limiter trusts it) */
  assert_true(tlc_bwatch_key(w, 0) != k0 && tlc_bwatch_key(w, 0) != k1);
  assert_true(tlc_bwatch_key(w, 1) != k0 && tlc_bwatch_key(w, 1) != k1);
  assert_true(tlc_bwatch_key(w, 0) != tlc_bwatch_key(w, 1));
  {
    static seen_t other_seen;
    tlc_engine_t *e2;
    tlc_bwatch_t *w2 = watch(a, &other_seen, 4, &e2); /* another watch, the same budgets */
    assert_true(tlc_bwatch_key(w2, 0) != k0 && tlc_bwatch_key(w2, 0) != tlc_bwatch_key(w, 0) &&
                tlc_bwatch_key(w2, 0) != tlc_bwatch_key(w, 1));
    tlc_bwatch_free(w2);
    tlc_engine_free(e2);
  }
  assert_string_equal(tlc_bwatch_budget(w, 1)->name, "keep");
  assert_int_equal(tlc_bwatch_total(w, 1), 2); /* unchanged: kept, now at index 1 */
  assert_int_equal(count_of(w, 1, 1, 0), 2);
  assert_int_equal(tlc_bwatch_total(w, 0), 0); /* changed: starts again */
  {
    tlc_event_t v[2];
    ev(&v[0], 7000, 1, TLC_EV_ENTRY, 0);
    ev(&v[1], 8500, 1, TLC_EV_EXIT, 0); /* NET and CALL 1500 */
    tlc_engine_push(e, v, 2);
  }
  assert_int_equal(tlc_bwatch_total(w, 1), 3);
  assert_int_equal(count_of(w, 1, 1, 0), 3);
  assert_int_equal(tlc_bwatch_total(w, 0), 1);
  /* "change" tightens to 60 ns: a CALL of 70, inside the engine's bands of both before (not
   * handed over to the watch), must now be tested and refused */
  {
    static const char c[] = "[budget change]\narea = TaskA\nstat = call\nmax = 60ns\n"
                            "[budget keep]\narea = TaskA\nstat = net\nmax = 100ns\n";
    tlc_event_t v[4];
    tlc_tbudget_set_init(&s);
    assert_int_equal(tlc_tbudget_parse(&s, c, strlen(c), "c.ini", err, sizeof(err)), 0);
    assert_int_equal(tlc_bwatch_set_budgets(w, &s), 0);
    tlc_bwatch_attach(w, e);
    tlc_tbudget_set_fini(&s);
    ev(&v[0], 9000, 1, TLC_EV_ENTRY, 0);
    ev(&v[1], 9070, 1, TLC_EV_EXIT, 0); /* NET and CALL 70 */
    ev(&v[2], 9100, 1, TLC_EV_ENTRY, 0);
    ev(&v[3], 9150, 1, TLC_EV_EXIT, 0); /* NET and CALL 50: inside both */
    tlc_engine_push(e, v, 4);
  }
  assert_int_equal(tlc_bwatch_total(w, 1), 3); /* keep: 70 <= 100 */
  assert_int_equal(tlc_bwatch_total(w, 0), 1); /* change, started again: 70 > 60 */
  assert_int_equal(seen.v[seen.n - 1].value, 70);
  assert_int_equal(seen.v[seen.n - 1].limit, 60);
  tlc_bwatch_free(w);
  tlc_engine_free(e);
}

/* Stored locations (budgetd.c resolves them): set on the kept and the worst copy of a
 * violation only when its number and closing sequence match, and carried into a saved watch
 * taken back before they came (a checkpoint written while marks were in flight). */
static void test_locate(void **state) {
  static const char a[] = "[budget net_a]\narea = TaskA\nstat = net\nmax = 100ns\n";
  static seen_t seen, seen2;
  static const uint64_t l1[4] = { 3, 24, 3, 72 }, l2[4] = { 3, 168, 4, 0 };
  tlc_engine_t *e, *e2;
  tlc_bwatch_t *w, *w2;
  tlc_violation_t v[4];
  const tlc_violation_t *worst;
  uint8_t *blob;
  size_t len;
  char err[256];
  (void)state;
  memset(&seen, 0, sizeof(seen));
  memset(&seen2, 0, sizeof(seen2));
  w = watch(a, &seen, 4, &e);
  push_stream(e); /* TaskA NET 200 (events 1..4) and 900 (events 8..10): two violations */
  assert_int_equal(tlc_bwatch_recent(w, 0, v, 4), 2);
  assert_int_equal(v[0].seq_end, 4);
  assert_int_equal(v[1].seq_end, 10);
  assert_int_equal(tlc_bwatch_save(w, &blob, &len), 0);
  assert_int_equal(tlc_bwatch_locate(w, 0, 1, 5, l1), 0);  /* not that violation's sequence */
  assert_int_equal(tlc_bwatch_locate(w, 1, 1, 4, l1), 0);  /* no such budget */
  assert_int_equal(tlc_bwatch_locate(w, 0, 1, 4, l1), 1);  /* kept only */
  assert_int_equal(tlc_bwatch_locate(w, 0, 2, 10, l2), 2); /* kept and the worst */
  assert_int_equal(tlc_bwatch_recent(w, 0, v, 4), 2);
  assert_int_equal(v[0].seg_first, 3);
  assert_int_equal(v[0].off_first, 24);
  assert_int_equal(v[0].seg_last, 3);
  assert_int_equal(v[0].off_last, 72);
  worst = tlc_bwatch_worst(w, 0);
  assert_int_equal(worst->count, 2);
  assert_int_equal(worst->off_first, 168);
  assert_int_equal(worst->seg_last, 4);

  w2 = watch(a, &seen2, 4, &e2);
  assert_int_equal(tlc_bwatch_load(w2, blob, len, err, sizeof(err)), 0);
  assert_int_equal(tlc_bwatch_recent(w2, 0, v, 4), 2);
  assert_int_equal(v[0].seg_first, 0); /* saved before they came */
  assert_int_equal(tlc_bwatch_copy_locations(w2, w), 3);
  assert_int_equal(tlc_bwatch_copy_locations(w2, w), 0); /* located already */
  assert_int_equal(tlc_bwatch_recent(w2, 0, v, 4), 2);
  assert_int_equal(v[0].off_last, 72);
  assert_int_equal(v[1].off_first, 168);
  assert_int_equal(tlc_bwatch_worst(w2, 0)->seg_last, 4);
  tlc_free(blob);
  tlc_bwatch_free(w2);
  tlc_engine_free(e2);
  tlc_bwatch_free(w);
  tlc_engine_free(e);
}

/* The wall clock a violation is stamped with (docs/budgets.md "What a violation holds"): the
 * chunk's the engine was handed (tlc_engine_set_wall_ms, a TLC_TAP_WALL mark to every tap,
 * whatever it wants), the kernel's coarse clock while none is known (0: stored bytes replayed),
 * and opts.wall_ms, when given, whatever the engine says. */
typedef struct marks {
  int64_t last;
  unsigned n;
} marks_t;

static int mark_tap(void *ud, const tlc_engine_sample_t *s) {
  marks_t *m = ud;
  if (s->kind == TLC_TAP_WALL) {
    m->last = s->value;
    m->n++;
  }
  return 0;
}

static unsigned want_none(void *ud, uint32_t handle, uint32_t context, uint8_t row_kind,
                          uint64_t state, uint32_t *cookie) {
  (void)ud, (void)handle, (void)context, (void)row_kind, (void)state, (void)cookie;
  return 0;
}

/* TaskA (handle 1, core 0) E at t, X at t + 1500: NET 1500 */
static void push_net(tlc_engine_t *e, int64_t t) {
  tlc_event_t v[2];
  ev(&v[0], t, 1, TLC_EV_ENTRY, 0);
  ev(&v[1], t + 1500, 1, TLC_EV_EXIT, 0);
  tlc_engine_push(e, v, 2);
}

/* Locating a kept violation in a ring that has wrapped, when every violation since was counted
 * once (where the watch looks first) and when a stretch of empty rate windows counted several
 * at once since (where it then searches): each kept one gets its own location, one no longer
 * kept gets none (only the worst's copy, while it is the worst). */
static void test_locate_ring(void **state) {
  /* exactly one E of isr_tick per 1000 ns window; keep 4 */
  static const char text[] =
      "[budget r]\narea = isr_tick\nstat = rate\nwindow = 1us\nmax = 1\nmin = 1\n";
  /* E per window: 2 is over (counted once), a run of k empty windows under (counted k times);
   * 19 violations: the ring's oldest in slot 3, the one searched for last in slot 0 */
  static const unsigned per[] = { 2, 1, 2, 2, 0, 0, 0, 2, 2, 1, 0, 2, 2, 2,
                                  2, 2, 0, 0, 2, 1, 1, 2, 2, 2, 0, 0, 2, 1 };
  enum { NW = sizeof(per) / sizeof(per[0]), KEEP = 4 };
  static seen_t seen;
  tlc_engine_t *e;
  tlc_bwatch_t *w;
  tlc_event_t v[80];
  tlc_violation_t kept[KEEP];
  size_t n = 0, nk;
  int several = 0;
  (void)state;
  memset(&seen, 0, sizeof(seen));
  w = watch(text, &seen, KEEP, &e);
  for (unsigned i = 0; i < NW; i++)
    for (unsigned k = 0; k < per[i]; k++) {
      ev(&v[n++], (int64_t)i * 1000 + 100 + k * 300, 3, TLC_EV_ENTRY, 0);
      ev(&v[n++], (int64_t)i * 1000 + 200 + k * 300, 3, TLC_EV_EXIT, 0);
    }
  ev(&v[n++], (int64_t)NW * 1000 + 100, 3, TLC_EV_ENTRY, 0); /* closes the last window */
  tlc_engine_push(e, v, n);
  assert_int_equal(seen.n, 19);
  /* the first (the worst: distance 1, the first of equals) is not kept; its worst copy is */
  for (size_t j = 0; j < seen.n; j++) {
    const tlc_violation_t *x = &seen.v[j];
    uint64_t loc[4] = { 10 + j, 100 * j, 10 + j, 100 * j + 24 };
    int want = (j + KEEP >= seen.n) + (j == 0);
    if (j > 0 && x->count - seen.v[j - 1].count > 1)
      several = 1;
    assert_int_equal(tlc_bwatch_locate(w, 0, x->count, x->seq_end + 1, loc), 0);
    assert_int_equal(tlc_bwatch_locate(w, 0, x->count, x->seq_end, loc), want);
  }
  assert_true(several);
  nk = tlc_bwatch_recent(w, 0, kept, KEEP);
  assert_int_equal(nk, KEEP);
  for (size_t i = 0; i < nk; i++) {
    size_t j = seen.n - KEEP + i;
    assert_int_equal(kept[i].count, seen.v[j].count);
    assert_int_equal(kept[i].seg_first, 10 + j);
    assert_int_equal(kept[i].off_first, 100 * j);
    assert_int_equal(kept[i].off_last, 100 * j + 24);
  }
  assert_int_equal(tlc_bwatch_worst(w, 0)->seg_first, 10);
  tlc_bwatch_free(w);
  tlc_engine_free(e);
}

static void test_wall(void **state) {
  static const char text[] = "[budget net_a]\narea = TaskA\nstat = net\nmax = 100ns\n";
  static seen_t seen, seen2;
  tlc_tbudget_set_t s;
  tlc_bwatch_opts_t o;
  tlc_bwatch_t *w, *w2;
  tlc_engine_t *e, *e2;
  tlc_violation_t v[8];
  marks_t mk = { 0, 0 };
  int64_t before, after;
  char err[256];
  size_t i;
  (void)state;
  memset(&seen, 0, sizeof(seen));
  memset(&seen2, 0, sizeof(seen2));
  tlc_tbudget_set_init(&s);
  assert_int_equal(tlc_tbudget_parse(&s, text, strlen(text), "t.ini", err, sizeof(err)), 0);
  memset(&o, 0, sizeof(o));
  o.area_name = area_name;
  o.on_violation = on_violation;
  o.ud = &seen; /* no wall_ms: the engine's chunk, or the clock */
  assert_int_equal(tlc_bwatch_new(&w, "board-1", &s, &o), 0);
  tlc_tbudget_set_fini(&s);
  assert_int_equal(tlc_engine_new(&e, TLC_FMT_BIN11, NULL), 0);
  tlc_bwatch_attach(w, e);
  assert_int_equal(tlc_engine_add_tap(e, mark_tap, want_none, NULL, &mk), 0);

  /* no chunk stamp yet: the clock, read at each violation */
  before = tlc_now_unix_ms();
  push_stream(e); /* TaskA NET 200 and 900: two violations */
  after = tlc_now_unix_ms();
  assert_int_equal(seen.n, 2);
  for (i = 0; i < seen.n; i++) {
    assert_true(seen.v[i].wall_ms >= before - 100); /* the coarse clock lags a tick at most */
    assert_true(seen.v[i].wall_ms <= after + 100);
  }
  assert_int_equal(mk.n, 0);

  /* a chunk stamped: its wall clock, for every violation until the next stamp */
  tlc_engine_set_wall_ms(e, 1700000000123);
  assert_int_equal(mk.n, 1); /* a tap that wants no sample still gets the mark */
  assert_int_equal(mk.last, 1700000000123);
  push_net(e, 7000);
  push_net(e, 9000);
  assert_int_equal(seen.n, 4);
  assert_int_equal(seen.v[2].wall_ms, 1700000000123);
  assert_int_equal(seen.v[3].wall_ms, 1700000000123);
  tlc_engine_set_wall_ms(e, 1700000000456);
  push_net(e, 11000);
  assert_int_equal(seen.n, 5);
  assert_int_equal(seen.v[4].wall_ms, 1700000000456);
  assert_int_equal(tlc_bwatch_recent(w, 0, v, 8), 5); /* the kept records say the same */
  assert_int_equal(v[1].wall_ms, seen.v[1].wall_ms);
  assert_int_equal(v[3].wall_ms, 1700000000123);
  assert_int_equal(v[4].wall_ms, 1700000000456);
  assert_int_equal(v[4].count, 5);
  assert_int_equal(v[4].value, 1500);
  assert_int_equal(v[4].limit, 100);
  assert_int_equal(tlc_bwatch_worst(w, 0)->value, 1500); /* the first of the largest */
  assert_int_equal(tlc_bwatch_worst(w, 0)->count, 3);
  assert_int_equal(tlc_bwatch_worst(w, 0)->wall_ms, 1700000000123);

  /* not known (stored bytes replayed at a restart): the clock again, not the last stamp */
  tlc_engine_set_wall_ms(e, 0);
  assert_int_equal(mk.n, 3);
  before = tlc_now_unix_ms();
  push_net(e, 13000);
  after = tlc_now_unix_ms();
  assert_int_equal(seen.n, 6);
  assert_true(seen.v[5].wall_ms >= before - 100);
  assert_true(seen.v[5].wall_ms <= after + 100);

  /* opts.wall_ms given: it, whatever the engine's chunk says */
  w2 = watch(text, &seen2, 4, &e2); /* wall(): 1234 */
  tlc_engine_set_wall_ms(e2, 1700000000789);
  push_net(e2, 7000);
  assert_int_equal(seen2.n, 1);
  assert_int_equal(seen2.v[0].wall_ms, 1234);

  tlc_bwatch_free(w2);
  tlc_engine_free(e2);
  tlc_bwatch_free(w);
  tlc_engine_free(e);
}

/* ---- the forms a kept violation takes ---- */

static void same_v(const tlc_violation_t *a, const tlc_violation_t *b) {
  assert_int_equal(a->budget, b->budget);
  assert_int_equal(a->handle, b->handle);
  assert_int_equal(a->context, b->context);
  assert_int_equal(a->row_kind, b->row_kind);
  assert_int_equal(a->stat, b->stat);
  assert_int_equal(a->over, b->over);
  assert_int_equal(a->state, b->state);
  assert_int_equal(a->value, b->value);
  assert_int_equal(a->limit, b->limit);
  assert_int_equal(a->start, b->start);
  assert_int_equal(a->end, b->end);
  assert_int_equal(a->epoch, b->epoch);
  assert_int_equal(a->wall_ms, b->wall_ms);
  assert_int_equal(a->seq_start, b->seq_start);
  assert_int_equal(a->seq_end, b->seq_end);
  assert_int_equal(a->count, b->count);
  assert_int_equal(a->seg_first, b->seg_first);
  assert_int_equal(a->off_first, b->off_first);
  assert_int_equal(a->seg_last, b->seg_last);
  assert_int_equal(a->off_last, b->off_last);
}

/* The kept violations of budget i are the last ones on_violation was handed for it (as
 * seen, with the locations loc gives by count, 0 for none), oldest first. */
static void kept_are_seen(const tlc_bwatch_t *w, size_t i, uint32_t seen_budget, const seen_t *seen,
                          size_t want, const uint64_t (*loc)[5], size_t nloc) {
  tlc_violation_t r[8], x;
  size_t n = tlc_bwatch_recent(w, i, r, 8), j, k, m = 0;
  assert_int_equal(n, want);
  for (j = seen->n; j-- > 0 && m < n;) {
    if (seen->v[j].budget != seen_budget)
      continue;
    x = seen->v[j];
    for (k = 0; k < nloc; k++)
      if (loc[k][0] == x.count) {
        x.seg_first = loc[k][1];
        x.off_first = loc[k][2];
        x.seg_last = loc[k][3];
        x.off_last = loc[k][4];
      }
    same_v(&r[n - 1 - m], &x);
    m++;
  }
  assert_int_equal(m, n);
}

/* TaskB (handle 2) on core 1 (context 1): E at t, X at t + 2000 (NET 2000). */
static void push_b(tlc_engine_t *e, int64_t t) {
  tlc_event_t v[2];
  ev(&v[0], t, 2, TLC_EV_ENTRY, 1);
  ev(&v[1], t + 2000, 2, TLC_EV_EXIT, 1);
  tlc_engine_push(e, v, 2);
}

/* A row one budget watches, not a rate (budget.c: the row holds its budget and counter), once
 * its counter and ring exist: what on_violation is handed is the whole record the stream
 * makes, field by field, and the kept records and the worst say the same. */
static void test_kept_solo(void **state) {
  static const char a[] = "[budget net_a]\narea = TaskA\nstat = net\nmax = 100ns\n"
                          "[budget net_b]\narea = TaskB\nstat = net\nmax = 1us\n";
  static seen_t seen;
  tlc_tbudget_set_t s;
  tlc_bwatch_opts_t o;
  tlc_bwatch_t *w;
  tlc_engine_t *e;
  const tlc_violation_t *worst;
  size_t i, na = 0, nb = 0;
  char err[256];
  (void)state;
  memset(&seen, 0, sizeof(seen));
  tlc_tbudget_set_init(&s);
  assert_int_equal(tlc_tbudget_parse(&s, a, strlen(a), "t.ini", err, sizeof(err)), 0);
  memset(&o, 0, sizeof(o));
  o.keep = 8;
  o.area_name = area_name;
  o.on_violation = on_violation;
  o.ud = &seen; /* no wall_ms: the engine's chunk stamp (without one, every violation is a
                   first one: budget.c's violate_slow) */
  assert_int_equal(tlc_bwatch_new(&w, "board-1", &s, &o), 0);
  tlc_tbudget_set_fini(&s);
  assert_int_equal(tlc_engine_new(&e, TLC_FMT_BIN11, NULL), 0);
  tlc_bwatch_attach(w, e);
  tlc_engine_set_wall_ms(e, 1700000000123);
  push_stream(e); /* TaskA NET 200, 50, 900; TaskB NET 2000 */
  push_net(e, 200000);
  push_b(e, 300000);
  push_net(e, 210000);
  push_b(e, 310000);
  push_net(e, 220000);
  assert_int_equal(seen.n, 8);
  for (i = 0; i < seen.n; i++) {
    const tlc_violation_t *v = &seen.v[i];
    int isa = v->handle == 1;
    assert_true(v->handle == 1 || v->handle == 2);
    assert_string_equal(tlc_bwatch_budget(w, v->budget)->name, isa ? "net_a" : "net_b");
    assert_int_equal(v->context, isa ? 0 : 1);
    assert_int_equal(v->row_kind, TLC_ROW_CODE);
    assert_int_equal(v->stat, TLC_NET); /* a stat other than rate is its kind (formats/budget.h) */
    assert_int_equal(v->over, 1);
    assert_int_equal(v->state, 0);
    assert_int_equal(v->limit, isa ? 100 : 1000);
    assert_int_equal(v->value, isa ? (na < 2 ? (na == 0 ? 200 : 900) : 1500) : 2000);
    assert_int_equal(v->end - v->start, isa && na < 2 ? (na == 0 ? 300 : 900) : isa ? 1500 : 2000);
    assert_int_equal(v->wall_ms, 1700000000123);
    assert_int_equal(v->count, isa ? ++na : ++nb);
  }
  assert_int_equal(na, 5);
  assert_int_equal(nb, 3);
  kept_are_seen(w, seen.v[0].budget, seen.v[0].budget, &seen, 5, NULL, 0);
  kept_are_seen(w, 1 - seen.v[0].budget, 1 - seen.v[0].budget, &seen, 3, NULL, 0);
  assert_int_equal(count_of(w, seen.v[0].budget, 1, 0), 5);
  assert_int_equal(count_of(w, 1 - seen.v[0].budget, 2, 1), 3);
  /* the worst of TaskA's: the first NET 1500 (1400 over) */
  worst = tlc_bwatch_worst(w, seen.v[0].budget);
  assert_non_null(worst);
  for (i = 0; i < seen.n && !(seen.v[i].handle == 1 && seen.v[i].value == 1500); i++)
    ;
  assert_true(i < seen.n);
  same_v(worst, &seen.v[i]);
  tlc_bwatch_free(w);
  tlc_engine_free(e);
}

/* budget.c keeps a violation compact in its budget's ring, or whole when it does not fit (a
 * dropped key, an epoch of 2^29 or more, one taken back from a checkpoint or kept across a
 * reload): whichever, the kept records say what on_violation was handed, field by field,
 * through the ring's wrap, their locations, a save and load, and a reload that moves the
 * budget. */
static void test_kept_forms(void **state) {
  static const char a[] = "[budget net_a]\narea = TaskA\nstat = net\nmax = 100ns\n"
                          "[budget call_a]\narea = TaskA\nstat = call\nmax = 100ns\n";
  static const char b[] = "[budget other]\narea = TaskB\nstat = net\nmax = 1s\n"
                          "[budget call_a]\narea = TaskA\nstat = call\nmax = 100ns\n"
                          "[budget net_a]\narea = TaskA\nstat = net\nmax = 100ns\n";
  static seen_t seen, seen2;
  static const uint64_t l_net[4] = { 7, 16, 7, 48 }, l_epoch[4] = { 8, 0, 8, 32 },
                        l_call[4] = { 9, 64, 10, 8 };
  uint64_t loc[3][5];
  tlc_tbudget_set_t s;
  tlc_bwatch_opts_t o;
  tlc_bwatch_t *w, *w2;
  tlc_engine_t *e;
  tlc_engine_sample_t x;
  tlc_violation_t r[8];
  uint32_t cookie = 0;
  uint8_t *blob;
  size_t len, i, net_i, call_i;
  char err[256];
  (void)state;
  memset(&seen, 0, sizeof(seen));
  memset(&seen2, 0, sizeof(seen2));
  tlc_tbudget_set_init(&s);
  assert_int_equal(tlc_tbudget_parse(&s, a, strlen(a), "t.ini", err, sizeof(err)), 0);
  memset(&o, 0, sizeof(o));
  o.keep = 3;
  o.max_keys = 1; /* one counter: the other budget's violations are dropped keys */
  o.area_name = area_name;
  o.on_violation = on_violation;
  o.ud = &seen; /* no wall_ms: the engine's chunk stamp */
  assert_int_equal(tlc_bwatch_new(&w, "board-1", &s, &o), 0);
  assert_int_equal(tlc_engine_new(&e, TLC_FMT_BIN11, NULL), 0);
  tlc_bwatch_attach(w, e);
  tlc_engine_set_wall_ms(e, 1700000000123);
  push_stream(e); /* TaskA NET 200, 50, 900; CALL 300, 50, 900 */
  assert_int_equal(seen.n, 4);
  assert_int_equal(tlc_bwatch_dropped_keys(w), 2);
  /* the first violation's budget has the counter: its kept are compact, the other's whole */
  net_i = seen.v[0].budget;
  call_i = 1 - net_i;
  assert_string_equal(tlc_bwatch_budget(w, net_i)->name, seen.v[0].stat == 0 ? "net_a" : "call_a");
  /* a sample of an epoch past what a compact slot holds (2^40 + 3 clock restarts), straight
   * to the tap: TaskA's NET 5000 */
  assert_int_equal(tlc_bwatch_want(w, 1, 0, TLC_ROW_CODE, 0, &cookie) != 0, 1);
  memset(&x, 0, sizeof(x));
  x.handle = 1;
  x.context = 0;
  x.kind = TLC_NET;
  x.row_kind = TLC_ROW_CODE;
  x.value = 5000;
  x.start = 100000;
  x.end = 105000;
  x.epoch = (1ull << 40) + 3;
  x.cookie = cookie;
  x.seq_start = 100;
  x.seq_end = 101;
  assert_int_equal(tlc_bwatch_tap(w, &x), 1); /* its answer: net_a's violation */
  /* more of both, through the engine: NET and CALL 1500 three times (the rings of 3 wrap) */
  push_net(e, 200000);
  push_net(e, 210000);
  tlc_engine_set_wall_ms(e, 1700000000456);
  push_net(e, 220000);
  assert_int_equal(seen.n, 11);
  assert_int_equal(seen.v[4].epoch, (1ull << 40) + 3);
  assert_int_equal(seen.v[10].wall_ms, 1700000000456);
  kept_are_seen(w, 0, 0, &seen, 3, NULL, 0);
  kept_are_seen(w, 1, 1, &seen, 3, NULL, 0);

  /* located: a violation kept whole (the other budget's, a dropped key) and compact ones */
  assert_int_equal(tlc_bwatch_recent(w, net_i, r, 8), 3);
  loc[0][0] = r[2].count;
  memcpy(&loc[0][1], l_net, sizeof(l_net));
  assert_int_equal(tlc_bwatch_locate(w, net_i, r[2].count, r[2].seq_end, l_net), 1);
  loc[1][0] = r[0].count;
  memcpy(&loc[1][1], l_epoch, sizeof(l_epoch));
  assert_int_equal(tlc_bwatch_locate(w, net_i, r[0].count, r[0].seq_end, l_epoch), 1);
  assert_int_equal(tlc_bwatch_recent(w, call_i, r, 8), 3);
  loc[2][0] = r[1].count;
  memcpy(&loc[2][1], l_call, sizeof(l_call));
  assert_int_equal(tlc_bwatch_locate(w, call_i, r[1].count, r[1].seq_end, l_call), 1);
  kept_are_seen(w, net_i, (uint32_t)net_i, &seen, 3, (const uint64_t(*)[5])loc, 2);
  kept_are_seen(w, call_i, (uint32_t)call_i, &seen, 3, (const uint64_t(*)[5]) & loc[2], 1);
  assert_int_equal(
      tlc_bwatch_find(w, tlc_bwatch_budget(w, call_i)->name, loc[2][0], &r[0], err, sizeof(err)),
      0);
  assert_int_equal(r[0].seg_last, 10);

  /* saved and taken back: the same records */
  assert_int_equal(tlc_bwatch_save(w, &blob, &len), 0);
  o.ud = &seen2;
  assert_int_equal(tlc_bwatch_new(&w2, "board-1", &s, &o), 0);
  assert_int_equal(tlc_bwatch_load(w2, blob, len, err, sizeof(err)), 0);
  kept_are_seen(w2, net_i, (uint32_t)net_i, &seen, 3, (const uint64_t(*)[5])loc, 2);
  kept_are_seen(w2, call_i, (uint32_t)call_i, &seen, 3, (const uint64_t(*)[5]) & loc[2], 1);
  tlc_free(blob);
  tlc_bwatch_free(w2);
  tlc_tbudget_set_fini(&s);

  /* a reload that moves both budgets: their kept records unchanged (the budget index they
   * were seen with included), and the next violation kept after them */
  tlc_tbudget_set_init(&s);
  assert_int_equal(tlc_tbudget_parse(&s, b, strlen(b), "b.ini", err, sizeof(err)), 0);
  assert_int_equal(tlc_bwatch_set_budgets(w, &s), 0);
  tlc_tbudget_set_fini(&s);
  tlc_bwatch_attach(w, e);
  assert_string_equal(tlc_bwatch_budget(w, 1)->name, "call_a");
  assert_string_equal(tlc_bwatch_budget(w, 2)->name, "net_a");
  i = net_i == 0 ? 2 : 1; /* where the counted budget went */
  kept_are_seen(w, i, (uint32_t)net_i, &seen, 3, (const uint64_t(*)[5])loc, 2);
  kept_are_seen(w, 3 - i, (uint32_t)call_i, &seen, 3, (const uint64_t(*)[5]) & loc[2], 1);
  push_net(e, 230000);
  assert_int_equal(seen.n, 13);
  assert_int_equal(tlc_bwatch_recent(w, 2, r, 8), 3);
  same_v(&r[2], seen.v[12].budget == 2 ? &seen.v[12] : &seen.v[11]);
  assert_int_equal(tlc_bwatch_recent(w, 1, r, 8), 3);
  same_v(&r[2], seen.v[12].budget == 1 ? &seen.v[12] : &seen.v[11]);
  tlc_bwatch_free(w);
  tlc_engine_free(e);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_duration),  cmocka_unit_test(test_parse),
    cmocka_unit_test(test_refusals),  cmocka_unit_test(test_watch),
    cmocka_unit_test(test_rate),      cmocka_unit_test(test_reload),
    cmocka_unit_test(test_locate),    cmocka_unit_test(test_locate_ring),
    cmocka_unit_test(test_wall),      cmocka_unit_test(test_kept_forms),
    cmocka_unit_test(test_kept_solo),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
