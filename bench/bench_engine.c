/* bench_engine.c - statistics engine throughput against decode-only, and memory per area.
 *
 * Workloads, generated in memory first (bin11 records, then decoded once into an event array):
 *  (a) "nested": 1,000 function areas, a random call tree up to depth 12 on one core, winIDEA
 *      style (caller S before the callee's E, caller R after its X), about 1/3 E, 1/3 X, 1/3 S/R;
 *  (b) "wide": 1,000,000 function areas, E/X pairs of random areas (every area is touched);
 *  (c) "nested-4c": (a) on 4 cores whose records are interleaved at random, one call tree per
 *      core: the stream of bench_ingest and bench_subscribers (benchd_io), so 4,000 code rows,
 *      what the daemon's engine sees in those benchmarks.
 * For each workload and engine configuration it reports, best of `reps` runs:
 *  - decode-only: tlc_dec_push over the bytes (events/s);
 *  - engine-only: tlc_engine_push over the decoded events (events/s);
 *  - decode+engine: both, as the daemon runs them; ratio = engine time / decode time;
 *  - memory: tlc_engine_mem bytes per area-context (rows-owning areas), split into histograms
 *    and windows;
 *  - a full snapshot into a table already sized by a first one (CPU time; the table itself
 *    holds sizeof(tlc_stat_t) bytes per row).
 * Times are the thread's CPU time (the host may be shared).
 * Usage: bench_engine [events_a [events_b [reps [config [events_c]]]]]   (defaults 20,000,000
 * 10,000,000  3  all  20,000,000; config 0..3 runs only that line of the table, for profiling;
 * 0 events skip a workload)
 * Build Release (-O2) for meaningful figures. Single thread; does not measure snapshots.
 */
#define _POSIX_C_SOURCE 200809L
#include "base/alloc.h"
#include "engine/engine.h"
#include "formats/dec.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BATCH 4096
/* decode + engine decodes this many events per call and pushes them, as tlcapd does
 * (TLC_TARGET_BATCH in daemon/target.h): the batch stays in L1 */
#define DEC_BATCH 256

static uint64_t rs = 0x9E3779B97F4A7C15ull;
static uint64_t rnd(void) {
  uint64_t z = (rs += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts); /* CPU time: the host is shared */
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef struct wl {
  const char *name;
  uint8_t *bytes;
  size_t len;
  tlc_event_t *ev;
  size_t n;
} wl_t;

static void put(wl_t *w, size_t *i, uint32_t h, unsigned type, unsigned core, int64_t t) {
  tlc_event_t e;
  memset(&e, 0, sizeof(e));
  e.handle = h;
  e.type = (uint8_t)type;
  e.time_ns = t;
  e.core = (uint8_t)core;
  tlc_bin1x_encode(TLC_FMT_BIN11, &e, w->bytes + *i * TLC_BIN1X_RECORD);
  (*i)++;
}

/* (a) with ncores 1, (c) with 4: every step picks a core (at random when there are several;
 * with one, no random number is drawn for it, so (a)'s stream is what it always was) and
 * opens a call there, or closes its innermost one. */
static void gen_nested(wl_t *w, size_t n, unsigned ncores, const char *name) {
  uint32_t st[4][16];
  unsigned d[4] = { 0, 0, 0, 0 };
  size_t i = 0;
  int64_t t = 1000;
  w->name = name;
  w->bytes = malloc(n * TLC_BIN1X_RECORD);
  while (i + 2 < n) {
    unsigned c = ncores > 1 ? (unsigned)(rnd() % ncores) : 0;
    t += 20 + (int64_t)(rnd() % 200);
    if (d[c] == 0 || (d[c] < 12 && rnd() % 2 == 0)) {
      uint32_t h = (uint32_t)(rnd() % 1000);
      if (d[c] > 0)
        put(w, &i, st[c][d[c] - 1], TLC_EV_SUSPEND, c, t);
      put(w, &i, h, TLC_EV_ENTRY, c, t);
      st[c][d[c]++] = h;
    } else {
      put(w, &i, st[c][--d[c]], TLC_EV_EXIT, c, t);
      if (d[c] > 0)
        put(w, &i, st[c][d[c] - 1], TLC_EV_RESUME, c, t);
    }
  }
  w->len = i * TLC_BIN1X_RECORD;
}

static void gen_wide(wl_t *w, size_t n) {
  size_t i = 0, k = 0;
  int64_t t = 1000;
  w->name = "wide-1M";
  w->bytes = malloc(n * TLC_BIN1X_RECORD);
  while (i + 1 < n) {
    /* the first million pairs visit every area once, then random areas */
    uint32_t h = k < 1000000 ? (uint32_t)k : (uint32_t)(rnd() % 1000000);
    k++;
    t += 50;
    put(w, &i, h, TLC_EV_ENTRY, 0, t);
    t += 100 + (int64_t)(rnd() % 100);
    put(w, &i, h, TLC_EV_EXIT, 0, t);
  }
  w->len = i * TLC_BIN1X_RECORD;
}

/* Decodes the workload; with e != NULL pushes every batch to it. Returns seconds. */
static double run_dec(wl_t *w, tlc_engine_t *e, size_t *nev) {
  static tlc_event_t evs[DEC_BATCH];
  tlc_dec_t d;
  size_t off = 0, total = 0;
  double t0;
  if (tlc_dec_init(&d, TLC_FMT_BIN11, NULL) < 0)
    exit(1);
  t0 = now();
  while (off < w->len) {
    size_t used = 0;
    int n = tlc_dec_push(&d, w->bytes + off, w->len - off > (1u << 20) ? (1u << 20) : w->len - off,
                         &used, evs, DEC_BATCH);
    if (n < 0)
      exit(1);
    if (e != NULL)
      tlc_engine_push(e, evs, (size_t)n);
    total += (size_t)n;
    off += used;
  }
  t0 = now() - t0;
  tlc_dec_fini(&d);
  *nev = total;
  return t0;
}

static void decode_all(wl_t *w) {
  tlc_dec_t d;
  size_t off = 0;
  w->ev = malloc((w->len / TLC_BIN1X_RECORD + BATCH) * sizeof(*w->ev));
  w->n = 0;
  if (tlc_dec_init(&d, TLC_FMT_BIN11, NULL) < 0)
    exit(1);
  while (off < w->len) {
    size_t used = 0;
    int n = tlc_dec_push(&d, w->bytes + off, w->len - off, &used, w->ev + w->n, BATCH);
    if (n < 0)
      exit(1);
    w->n += (size_t)n;
    off += used;
  }
  tlc_dec_fini(&d);
}

typedef struct cfg {
  const char *name;
  uint8_t hist;
  uint32_t nwin;
} cfg_t;

static void bench(wl_t *w, const cfg_t *c, int reps, double dec_s) {
  double best_eng = 1e30, best_both = 1e30, snap_s = 0;
  size_t nev = 0, snap_rows = 0;
  tlc_engine_mem_t m;
  int r;
  memset(&m, 0, sizeof(m));
  for (r = 0; r < reps; r++) {
    tlc_engine_opts_t o;
    tlc_engine_t *e;
    double t0;
    size_t i;
    tlc_engine_opts_default(&o);
    o.histograms = c->hist;
    o.nwindows = c->nwin;
    if (tlc_engine_new(&e, TLC_FMT_BIN11, &o) < 0)
      exit(1);
    t0 = now();
    for (i = 0; i < w->n; i += BATCH)
      tlc_engine_push(e, w->ev + i, w->n - i < BATCH ? w->n - i : BATCH);
    t0 = now() - t0;
    if (t0 < best_eng)
      best_eng = t0;
    tlc_engine_mem(e, &m);
    if (r == 0) {
      /* one full snapshot (all rows, windows, Neutral, quantiles), as a subscriber asks */
      tlc_table_t t;
      double s0;
      tlc_table_init(&t);
      if (tlc_engine_snapshot(e, &t, NULL) < 0) /* first: the table's memory is new */
        exit(1);
      s0 = now();
      if (tlc_engine_snapshot(e, &t, NULL) < 0) /* timed: into the same table */
        exit(1);
      snap_s = now() - s0;
      snap_rows = t.nrows;
      tlc_table_fini(&t);
    }
    if (tlc_engine_counters(e)->dropped_area_limit != 0 || tlc_engine_counters(e)->anomalies != 0)
      fprintf(stderr, "warning: dropped %" PRIu64 " anomalies %" PRIu64 "\n",
              tlc_engine_counters(e)->dropped_area_limit, tlc_engine_counters(e)->anomalies);
    tlc_engine_free(e);
    if (tlc_engine_new(&e, TLC_FMT_BIN11, &o) < 0)
      exit(1);
    t0 = run_dec(w, e, &nev);
    if (t0 < best_both)
      best_both = t0;
    tlc_engine_free(e);
  }
  printf("%-10s %-24s engine-only %5.1f M ev/s | decode+engine %5.1f M ev/s | engine/decode "
         "%.2fx | %zu areas, %.0f B/area (hist %.0f, windows %.0f) | snapshot %zu rows %.1f ms\n",
         w->name, c->name, (double)w->n / best_eng / 1e6, (double)nev / best_both / 1e6,
         (best_both - dec_s) / dec_s, m.areas, (double)m.bytes / (double)(m.areas ? m.areas : 1),
         (double)m.hist_bytes / (double)(m.areas ? m.areas : 1),
         (double)m.window_bytes / (double)(m.areas ? m.areas : 1), snap_rows, snap_s * 1e3);
  fflush(stdout);
}

static void run_workload(wl_t *w, int reps, int only) {
  static const cfg_t cfgs[] = {
    { "no-hist no-windows", 0, 0 },
    { "hist no-windows", 1, 0 },
    { "no-hist 3-windows", 0, 3 },
    { "hist 3-windows (default)", 1, 3 },
  };
  double dec = 1e30;
  size_t nev = 0, i;
  int r;
  for (r = 0; r < reps; r++) {
    double t = run_dec(w, NULL, &nev);
    if (t < dec)
      dec = t;
  }
  printf("%-10s decode-only %.1f M ev/s (%zu events, %.3f s)\n", w->name, (double)nev / dec / 1e6,
         nev, dec);
  decode_all(w);
  for (i = 0; i < sizeof(cfgs) / sizeof(cfgs[0]); i++)
    if (only < 0 || (size_t)only == i)
      bench(w, &cfgs[i], reps, dec);
  free(w->ev);
  free(w->bytes);
}

int main(int argc, char **argv) {
  size_t na = argc > 1 ? strtoull(argv[1], NULL, 10) : 20000000;
  size_t nb = argc > 2 ? strtoull(argv[2], NULL, 10) : 10000000;
  int reps = argc > 3 ? atoi(argv[3]) : 3;
  int only = argc > 4 ? atoi(argv[4]) : -1; /* one configuration (0..3) only, for profiling */
  size_t nc = argc > 5 ? strtoull(argv[5], NULL, 10) : 20000000;
  wl_t a, b, c;
  memset(&a, 0, sizeof(a));
  memset(&b, 0, sizeof(b));
  memset(&c, 0, sizeof(c));
  if (na > 0) {
    gen_nested(&a, na, 1, "nested-1k");
    run_workload(&a, reps, only);
  }
  if (nb > 0) {
    gen_wide(&b, nb);
    run_workload(&b, reps, only);
  }
  if (nc > 0) {
    gen_nested(&c, nc, 4, "nested-4c");
    run_workload(&c, reps, only);
  }
  return 0;
}
