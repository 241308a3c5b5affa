/* bench_rollup.c - the rollups' cost (SPEC 14, docs/rollups.md), three figures in one run:
 *
 *  1. ingest: the engine alone against the engine with the rollup tap feeding a real rollup
 *     module (its worker writing under a scratch directory), the same events, rounds
 *     alternated (A B A B ...), the pushing thread's CPU time (the worker's writes are off the
 *     loop: its CPU is reported apart, as the process's minus the thread's). Events: E/X pairs
 *     of 1,000 function areas on one core, target time advancing so that the run spans
 *     `minutes` minutes of target time (every minute seals once per area).
 *  2. disk: bytes written per area-minute block (the blocks the worker appended / their count).
 *  3. query: a week of minutes for 1,000 areas (one cell with a spread histogram per area and
 *     minute, written with the codec the worker uses, one file per area and day) and the
 *     trend of one area over the week read back (tlc_rollup_read), at steps of 1 minute and of
 *     1 hour: wall and thread CPU time, best of 5 (the files in the page cache, as on a daemon
 *     that wrote them). A query reads only its area's files: the other areas change nothing.
 *
 * Usage: bench_rollup [events [rounds [areas_week [only]]]]  (defaults 4,000,000 5 1000;
 * areas_week 0 skips the week: it writes 6 GB; only "bench_plain" or "bench_tap": that round
 * alone, each on a fresh heap: bench/icount_rollup.sh, since a round run after the other's engine
 * was freed pays for that heap's holes in its own allocations, ~10 instructions an event)
 */
#define _POSIX_C_SOURCE 200809L
#include "base/alloc.h"
#include "engine/engine.h"
#include "engine/hist.h"
#include "rollup/rollup.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define AREAS 1000

static double tcpu(clockid_t c) {
  struct timespec ts;
  clock_gettime(c, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double wall(void) {
  return tcpu(CLOCK_MONOTONIC);
}

static uint64_t rs = 0x9E3779B97F4A7C15ull;
static uint64_t rnd(void) {
  uint64_t z = (rs += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/* One round: a fresh engine over the events, with the tap (acc) or without. CPU seconds. The
 * two wrappers below are what bench/icount_rollup.sh counts instructions in (callgrind's
 * --toggle-collect): the loop's instructions per event, load-independent. */
static double round_once(const tlc_event_t *ev, size_t n, tlc_rollup_acc_t *acc) {
  tlc_engine_t *e;
  tlc_engine_opts_t o;
  double t0;
  tlc_engine_opts_default(&o);
  if (tlc_engine_new(&e, TLC_FMT_BIN11, &o) != 0)
    exit(1);
  if (acc != NULL && tlc_engine_set_slog(e, tlc_rollup_slog, acc) != 0) /* as daemon/rolld.c */
    exit(1);
  t0 = tcpu(CLOCK_THREAD_CPUTIME_ID);
  for (size_t i = 0; i < n; i += 4096)
    tlc_engine_push(e, ev + i, n - i < 4096 ? n - i : 4096);
  t0 = tcpu(CLOCK_THREAD_CPUTIME_ID) - t0;
  tlc_engine_free(e);
  return t0;
}

__attribute__((noinline)) double bench_plain(const tlc_event_t *ev, size_t n);
__attribute__((noinline)) double bench_plain(const tlc_event_t *ev, size_t n) {
  return round_once(ev, n, NULL);
}
__attribute__((noinline)) double bench_tap(const tlc_event_t *ev, size_t n, tlc_rollup_acc_t *a);
__attribute__((noinline)) double bench_tap(const tlc_event_t *ev, size_t n, tlc_rollup_acc_t *a) {
  return round_once(ev, n, a);
}

static void rm_rf(const char *p) {
  char cmd[512];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", p);
  if (system(cmd) != 0)
    fprintf(stderr, "could not remove %s\n", p);
}

/* The week: areas x 7 x 1440 minutes of epoch 0, one NET cell each, ~12 bins. */
static uint64_t write_week(const char *dir, unsigned areas) {
  uint64_t bytes = 0;
  tlc_rollup_blk_t b;
  tlc_ckw_t w;
  char p[600];
  tlc_rollup_blk_init(&b);
  for (int day = 0; day < 7; day++) {
    snprintf(p, sizeof p, "%s/.rollup/t/e0/m%d", dir, day);
    char cmd[700];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", p);
    if (system(cmd) != 0)
      exit(1);
    for (unsigned a = 0; a < areas; a++) {
      FILE *f;
      tlc_ckw_init(&w, 1u << 26);
      for (int m = 0; m < 1440; m++) {
        tlc_rollup_key_t k = { 0x1000 + a, 0, 0, TLC_NET, TLC_ROW_CODE };
        tlc_rollup_cell_t *c;
        tlc_rollup_blk_clear(&b);
        b.epoch = 0;
        b.minute = (int64_t)day * 1440 + m;
        b.span = 1;
        b.wall_first = 1;
        b.wall_last = 2;
        c = tlc_rollup_cell_get(&b, &k);
        for (int s = 0; s < 60; s++) {
          int64_t v = 1000 + (int64_t)(rnd() % 20000);
          tlc_rollup_cell_add(c, v, b.minute * TLC_ROLLUP_MINUTE_NS + s, tlc__hist_idx(v));
        }
        tlc_rollup_encode(&b, &w);
      }
      snprintf(p, sizeof p, "%s/.rollup/t/e0/m%d/%u.r", dir, day, 0x1000 + a);
      f = fopen(p, "wb");
      if (f == NULL || fwrite(w.p, 1, w.len, f) != w.len)
        exit(1);
      fclose(f);
      bytes += w.len;
      tlc_ckw_fini(&w);
    }
  }
  tlc_rollup_blk_fini(&b);
  return bytes;
}

int main(int argc, char **argv) {
  size_t nev = argc > 1 ? strtoull(argv[1], NULL, 10) : 4000000;
  int rounds = argc > 2 ? atoi(argv[2]) : 5;
  unsigned wareas = argc > 3 ? (unsigned)atoi(argv[3]) : 1000;
  const char *only = argc > 4 ? argv[4] : "";
  int run_plain = strcmp(only, "bench_tap") != 0, run_tap = strcmp(only, "bench_plain") != 0;
  int minutes = 30;
  char dir[256];
  tlc_event_t *ev = calloc(nev ? nev : 1, sizeof(*ev));
  double ta = 1e99, tb = 1e99, sa = 0, sb = 0, wcpu = 0;
  uv_loop_t loop;
  tlc_rollup_t *r;
  tlc_rollup_opts_t ro;
  tlc_rollup_stats_t st;
  int64_t t = 1000, step = (int64_t)minutes * TLC_ROLLUP_MINUTE_NS / (int64_t)(nev / 2 + 1);
  if (ev == NULL)
    return 1;
  snprintf(dir, sizeof dir, "/tmp/bench_rollup.%d", (int)getpid());
  mkdir(dir, 0755);
  /* E/X pairs of random areas, durations 0.1-10 us of target time */
  for (size_t i = 0; i + 1 < nev; i += 2) {
    uint32_t h = (uint32_t)(rnd() % AREAS);
    int64_t d = 100 + (int64_t)(rnd() % 10000);
    ev[i].handle = h;
    ev[i].type = TLC_EV_ENTRY;
    ev[i].core = 0;
    ev[i].time_ns = t;
    ev[i + 1].handle = h;
    ev[i + 1].type = TLC_EV_EXIT;
    ev[i + 1].core = 0;
    ev[i + 1].time_ns = t + (d < step ? d : step - 1);
    t += step;
  }
  uv_loop_init(&loop);
  memset(&ro, 0, sizeof ro);
  ro.state_dir = dir;
  if (tlc_rollup_new(&loop, &ro, &r) != 0)
    return 1;
  for (int k = 0; k < rounds && nev > 0; k++) {
    tlc_rollup_acc_t *acc = tlc_rollup_acc_new(r, "bench");
    double p0 = tcpu(CLOCK_PROCESS_CPUTIME_ID), x, y;
    x = run_plain ? bench_plain(ev, nev) : 0;
    y = run_tap ? bench_tap(ev, nev, acc) : 0;
    tlc_rollup_acc_free(acc);
    wcpu += tcpu(CLOCK_PROCESS_CPUTIME_ID) - p0 - x - y;
    sa += x;
    sb += y;
    ta = x < ta ? x : ta;
    tb = y < tb ? y : tb;
  }
  tlc_rollup_get_stats(r, &st);
  tlc_rollup_close(r);
  uv_run(&loop, UV_RUN_DEFAULT);
  uv_loop_close(&loop);
  if (nev > 0 && rounds > 0 && run_plain && run_tap) {
    printf("ingest (%zu events, %d areas, %d minutes of target time, %d rounds A/B):\n", nev, AREAS,
           minutes, rounds);
    printf("  engine alone      best %.3f s  mean %.3f s  %.1f M events/s\n", ta, sa / rounds,
           nev / ta / 1e6);
    printf("  engine + rollups  best %.3f s  mean %.3f s  %.1f M events/s\n", tb, sb / rounds,
           nev / tb / 1e6);
    printf("  cost: best %+.1f%%  mean %+.1f%%; the worker's CPU (off the loop) %.3f s per round\n",
           (tb / ta - 1) * 100, (sb / sa - 1) * 100, wcpu / rounds);
  }
  rm_rf(dir);
  mkdir(dir, 0755);
  if (nev > 0) {
    /* disk: one more pass, counted */
    tlc_rollup_acc_t *acc;
    uv_loop_init(&loop);
    tlc_rollup_new(&loop, &ro, &r);
    acc = tlc_rollup_acc_new(r, "bench");
    round_once(ev, nev, acc);
    tlc_rollup_acc_free(acc);
    tlc_rollup_close(r); /* writes the hours too */
    {
      char p[300], cmd[1000];
      FILE *f;
      unsigned long long mb = 0, hb = 0;
      snprintf(p, sizeof p, "%s/.rollup/bench/e0", dir);
      snprintf(cmd, sizeof cmd, "cat '%s'/m*/*.r | wc -c; cat '%s'/h*/*.r | wc -c", p, p);
      f = popen(cmd, "r");
      if (f != NULL && fscanf(f, "%llu %llu", &mb, &hb) == 2)
        printf("disk: %llu bytes of minutes for %d x %d area-minutes: %.0f bytes per active "
               "area-minute (NET, GROSS, CALL, PERIOD cells); hours %llu bytes\n",
               mb, AREAS, minutes + 1, (double)mb / (AREAS * (minutes + 1.0)), hb);
      if (f != NULL)
        pclose(f);
    }
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
  }
  rm_rf(dir);
  mkdir(dir, 0755);
  if (wareas > 0) {
    double w0 = wall();
    uint64_t bytes = write_week(dir, wareas);
    printf("week: %u areas x 10080 minutes written in %.1f s, %.1f MB (%.0f bytes per area-minute "
           "with one cell)\n",
           wareas, wall() - w0, bytes / 1e6, (double)bytes / wareas / 10080);
    for (int sm = 1; sm <= 60; sm += 59) {
      double best = 1e99, bestc = 1e99;
      size_t nsteps = 0;
      for (int k = 0; k < 5; k++) {
        tlc_rollup_q_t q;
        tlc_rollup_res_t res;
        double q0, c0;
        memset(&q, 0, sizeof q);
        snprintf(q.target, sizeof q.target, "t");
        q.handle = 0x1000 + wareas / 2;
        q.when = TLC_RQ_TARGET;
        q.epoch = 0;
        q.has_since = q.has_until = 1;
        q.since = 0;
        q.until = 7ll * 1440 * TLC_ROLLUP_MINUTE_NS;
        q.step_min = sm;
        q0 = wall();
        c0 = tcpu(CLOCK_THREAD_CPUTIME_ID);
        tlc_rollup_read(dir, &q, &res);
        q0 = wall() - q0;
        c0 = tcpu(CLOCK_THREAD_CPUTIME_ID) - c0;
        best = q0 < best ? q0 : best;
        bestc = c0 < bestc ? c0 : bestc;
        nsteps = res.nsteps;
        tlc_rollup_res_fini(&res);
      }
      printf("trend of one area over the week, step %d min: %zu steps in %.1f ms wall, %.1f ms "
             "CPU (best of 5)\n",
             sm, nsteps, best * 1e3, bestc * 1e3);
    }
  }
  rm_rf(dir);
  free(ev);
  return 0;
}
