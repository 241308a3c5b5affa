/* bench_budget.c - what timing budgets (SPEC 13, daemon/budget) cost the engine: A/B in one run.
 *
 * Workload (a) of bench_engine ("nested": 1,000 function areas, a random call tree up to depth 12
 * on one core, caller S/R around each call), engine defaults (histograms, 3 windows), pushed in
 * batches of 256 events, each stamped with the wall clock as the daemon stamps a chunk
 * (tlc_engine_set_wall_ms). Three configurations, in alternating rounds (the host is shared: a
 * drift hits all three alike), thread CPU time, median of the rounds:
 *   none    no tap (tlc_engine_opts_t.tap NULL);
 *   quiet   100 budgets on 100 of the areas (one each: NET, GROSS, CALL, PERIOD or OUTSIDE in
 *           turn; max 1 s: none breaks);
 *   storm   the same 100 budgets with max 1 ns: every sample of a watched area is a violation
 *           (counted, kept in the ring, the worst updated; no callback), on a new watch each
 *           round: its rings are touched for the first time;
 *   warm    the storm on the watch of an earlier storm (run once, not measured), attached to a
 *           new engine: its rings and counters exist, as in a daemon that has seen violations
 *           before (what a long-running daemon pays in a storm).
 * Prints events/s of each, the minor page faults of its last round (getrusage) and the ratios
 * to none; the issue allows 5 %. The watch's memory stays bounded whatever the number of
 * violations: its rings (budget_keep each) and counters.
 * Usage: bench_budget [events [rounds [config]]]   (defaults 5,000,000 and 7; config 0, 1, 2
 * or 3 runs that one once, for callgrind; 3 includes its unmeasured first storm). BENCH_KEEP=N
 * in the environment sets budget_keep (default 100).
 */
#define _POSIX_C_SOURCE 200809L
#include "budget/budget.h"
#include "engine/engine.h"
#include "formats/budget.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#define BATCH 256

static uint64_t rs = 0x9E3779B97F4A7C15ull;
static uint64_t rnd(void) {
  uint64_t z = (rs += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int64_t wall_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void put(tlc_event_t *ev, size_t *i, uint32_t h, unsigned type, int64_t t) {
  memset(&ev[*i], 0, sizeof(ev[0]));
  ev[*i].handle = h;
  ev[*i].type = (uint8_t)type;
  ev[*i].time_ns = t;
  (*i)++;
}

/* bench_engine's gen_nested with one core: the same stream */
static size_t gen(tlc_event_t *ev, size_t n) {
  uint32_t st[16];
  unsigned d = 0;
  size_t i = 0;
  int64_t t = 1000;
  while (i + 2 < n) {
    t += 20 + (int64_t)(rnd() % 200);
    if (d == 0 || (d < 12 && rnd() % 2 == 0)) {
      uint32_t h = (uint32_t)(rnd() % 1000);
      if (d > 0)
        put(ev, &i, st[d - 1], TLC_EV_SUSPEND, t);
      put(ev, &i, h, TLC_EV_ENTRY, t);
      st[d++] = h;
    } else {
      put(ev, &i, st[--d], TLC_EV_EXIT, t);
      if (d > 0)
        put(ev, &i, st[d - 1], TLC_EV_RESUME, t);
    }
  }
  return i;
}

static void budgets(tlc_tbudget_set_t *s, const char *max) {
  char err[256], name[32], area[16];
  unsigned i;
  tlc_tbudget_set_init(s);
  for (i = 0; i < 100; i++) {
    tlc_tbudget_t b;
    snprintf(name, sizeof(name), "b%u", i);
    snprintf(area, sizeof(area), "%08X", i * 10);
    if (tlc_tbudget_init(&b, name, "bench", err, sizeof(err)) != 0 ||
        tlc_tbudget_set_key(&b, "area", area, err, sizeof(err)) != 0 ||
        tlc_tbudget_set_key(&b, "stat", tlc_tbudget_stat_name(i % 5), err, sizeof(err)) != 0 ||
        tlc_tbudget_set_key(&b, "max", max, err, sizeof(err)) != 0 ||
        tlc_tbudget_set_add(s, &b, err, sizeof(err)) != 0) {
      fprintf(stderr, "bench_budget: %s\n", err);
      exit(1);
    }
  }
}

static size_t keep;    /* BENCH_KEEP */
static long faults[4]; /* minor faults of the last run of each configuration */

static long minflt(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_minflt;
}

static tlc_bwatch_t *watch(int c) {
  tlc_tbudget_set_t s;
  tlc_bwatch_opts_t o;
  tlc_bwatch_t *w;
  memset(&o, 0, sizeof(o));
  o.keep = keep;
  budgets(&s, c == 1 ? "1s" : "1ns");
  if (tlc_bwatch_new(&w, "bench", &s, &o) != 0)
    exit(1);
  tlc_tbudget_set_fini(&s);
  return w;
}

/* One run of configuration c (0 none, 1 quiet, 2 storm, 3 warm storm: the watch of an
 * earlier storm, attached to a fresh engine): CPU seconds. */
static double run(const tlc_event_t *ev, size_t n, int c, uint64_t *viol) {
  static tlc_bwatch_t *warm;
  tlc_engine_t *e;
  tlc_bwatch_t *w = NULL;
  size_t i;
  uint64_t before = 0;
  double t0;
  long f0;
  if (c == 3 && warm == NULL) { /* its first storm, not measured */
    tlc_engine_t *e0;
    warm = watch(3);
    if (tlc_engine_new(&e0, TLC_FMT_BIN11, NULL) != 0)
      exit(1);
    tlc_bwatch_attach(warm, e0);
    for (i = 0; i < n; i += BATCH) {
      tlc_engine_set_wall_ms(e0, wall_ms());
      tlc_engine_push(e0, ev + i, n - i < BATCH ? n - i : BATCH);
    }
    tlc_engine_free(e0);
  }
  if (tlc_engine_new(&e, TLC_FMT_BIN11, NULL) != 0)
    exit(1);
  if (c > 0) {
    w = c == 3 ? warm : watch(c);
    before = tlc_bwatch_all(w);
    tlc_bwatch_attach(w, e);
  }
  f0 = minflt();
  t0 = now();
  for (i = 0; i < n; i += BATCH) {
    /* as the daemon stamps each chunk it reads (daemon/ingest/target.c), in every
     * configuration: the violations take this wall clock, read no clock of their own */
    tlc_engine_set_wall_ms(e, wall_ms());
    tlc_engine_push(e, ev + i, n - i < BATCH ? n - i : BATCH);
  }
  t0 = now() - t0;
  faults[c] = minflt() - f0;
  *viol = w != NULL ? tlc_bwatch_all(w) - before : 0;
  if (c != 3)
    tlc_bwatch_free(w);
  tlc_engine_free(e);
  return t0;
}

static int cmpd(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
  size_t n = argc > 1 ? strtoull(argv[1], NULL, 10) : 5000000;
  int rounds = argc > 2 ? atoi(argv[2]) : 7, r, c;
  tlc_event_t *ev = malloc(n * sizeof(*ev));
  double t[4][64], med[4];
  uint64_t viol[4] = { 0, 0, 0, 0 };
  static const char *const names[4] = { "none", "quiet", "storm", "warm" };
  const char *k = getenv("BENCH_KEEP");
  int nc = 4;
  keep = k != NULL ? strtoull(k, NULL, 10) : 0;
  if (ev == NULL || rounds < 1 || rounds > 64)
    return 1;
  n = gen(ev, n);
  if (argc > 3) { /* one configuration once (for callgrind: bench/icount_budget.sh) */
    c = atoi(argv[3]);
    if (c < 0 || c > 3)
      return 1;
    run(ev, n, c, &viol[0]);
    printf("%s: %zu events, %" PRIu64 " violations\n", names[c % 4], n, viol[0]);
    free(ev);
    return 0;
  }
  for (r = 0; r < rounds; r++)
    for (c = 0; c < nc; c++) {
      int j = (c + r) % nc; /* the order turns round by round */
      t[j][r] = run(ev, n, j, &viol[j]);
    }
  for (c = 0; c < nc; c++) {
    qsort(t[c], (size_t)rounds, sizeof(double), cmpd);
    med[c] = t[c][rounds / 2];
    printf("%-6s %7.2f M events/s (median of %d, CPU)  violations %" PRIu64 "  page faults %ld\n",
           names[c], (double)n / med[c] / 1e6, rounds, viol[c], faults[c]);
  }
  printf("quiet/none time %.3f   storm/none time %.3f   warm/none time %.3f\n", med[1] / med[0],
         med[2] / med[0], med[3] / med[0]);
  /* the fastest round of each (sorted above): what the host's other load added least to */
  printf("best: quiet/none %.3f   storm/none %.3f   warm/none %.3f\n", t[1][0] / t[0][0],
         t[2][0] / t[0][0], t[3][0] / t[0][0]);
  free(ev);
  return 0;
}
