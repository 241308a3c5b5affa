/* bench_decode.c - decoder throughput against memcpy of the same bytes, in the same run.
 *
 * Generates a realistic stream (~256 MiB by default) for each format, then times, for at least
 * five runs each, (a) memcpy of the whole buffer into another buffer and (b) decoding it with
 * tlc_dec_push in 1 MiB pushes and batches of 256 events (the decoder lives in another
 * translation unit; a checksum of two fields per batch keeps the result observable without
 * timing a consumer). Prints the median of each, records/s,
 * GB/s (10^9 bytes of input per second) and the decode/memcpy bandwidth ratio, both by wall
 * clock and by thread CPU time (the latter is not inflated by other processes on a shared
 * machine). One core.
 *
 * Usage: bench_decode [MiB] [runs] [format...]   (defaults: 256 MiB, 5 runs, bin11 bin10
 *        bin11-resync bin10-resync). Build Release (-O2).
 *
 * To add a format: write a gen_fn and add a row to `cases[]` (see the hook there).
 */
#include "base/alloc.h"
#include "base/err.h"
#include "evlog_gen.h"
#include "formats/dec.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BATCH 256
#define PUSH  (1u << 20)

static double clock_s(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double now(void) {
  return clock_s(CLOCK_MONOTONIC);
}

/* CPU time of this thread: not inflated by other processes on a shared machine. */
static double cpu(void) {
  return clock_s(CLOCK_THREAD_CPUTIME_ID);
}

static uint64_t rnd_state = 0x1234567887654321ull;

static uint64_t rnd(void) { /* splitmix64 */
  uint64_t z = (rnd_state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/* Mixed types, handles of every area, cores 0..3 or unknown, data on writes, time rising by
 * 0..16 us per record. */
static uint8_t *gen_bin1x(tlc_format_t f, size_t bytes, size_t *len) {
  static const uint8_t cores[] = { 0, 1, 2, 3, TLC_CORE_UNKNOWN, 0, 1, 2 };
  size_t n = bytes / TLC_BIN1X_RECORD, i;
  uint8_t *buf = tlc_malloc(n * TLC_BIN1X_RECORD);
  int64_t t = 1000000000;
  if (buf == NULL)
    return NULL;
  for (i = 0; i < n; i++) {
    tlc_event_t e;
    uint64_t r = rnd();
    memset(&e, 0, sizeof(e));
    e.handle = (uint32_t)(r % 6) << 28 | (uint32_t)((r >> 8) & 0xFFFF);
    e.type = (uint8_t)((r >> 24) % 5);
    e.core = f == TLC_FMT_BIN11 ? cores[(r >> 32) & 7] : TLC_CORE_UNKNOWN;
    e.data = e.type == TLC_EV_WRITE ? (r >> 35) & 0xFFFFFFFF : 0;
    t += (int64_t)((r >> 48) & 0x3FFF);
    e.time_ns = t;
    e.raw = f == TLC_FMT_BIN11 ? (uint32_t)e.core << 4 | e.type : (uint32_t)e.type << 24;
    tlc_bin1x_encode(f, &e, buf + i * TLC_BIN1X_RECORD);
  }
  *len = n * TLC_BIN1X_RECORD;
  return buf;
}

/* A generator returns a tlc_malloc'd stream of about `bytes` bytes (its length in *len) and the
 * number of events it should decode to in *events. */
typedef uint8_t *(*gen_fn)(tlc_format_t f, size_t bytes, size_t *len, uint64_t *events);

static uint8_t *gen_bin1x_case(tlc_format_t f, size_t bytes, size_t *len, uint64_t *events) {
  uint8_t *buf = gen_bin1x(f, bytes, len);
  *events = *len / TLC_BIN1X_RECORD;
  return buf;
}

typedef struct bench_case {
  const char *name;
  tlc_format_t format;
  int resync;
  gen_fn gen;
} bench_case_t;

/* evlog: blocks of 1,000 items from the test-support generator (nested +f/-f on 4 threads,
 * states, writes, CPUFREQ with details; about 49 bytes per item), copied into a tlc buffer. */
static uint8_t *gen_evlog(tlc_format_t f, size_t bytes, size_t *len, uint64_t *events) {
  evgen_t g;
  uint8_t *buf;
  (void)f;
  evgen_init(&g, 0);
  evgen_random(&g, 42, bytes / 49, 1000);
  buf = tlc_malloc(g.len ? g.len : 1);
  if (buf != NULL)
    memcpy(buf, g.buf, g.len);
  *len = g.len;
  *events = g.items;
  evgen_free(&g);
  return buf;
}

static const bench_case_t cases[] = {
  { "evlog", TLC_FMT_EVLOG, 0, gen_evlog },
  { "bin11", TLC_FMT_BIN11, 0, gen_bin1x_case },
  { "bin10", TLC_FMT_BIN10, 0, gen_bin1x_case },
  { "bin11-resync", TLC_FMT_BIN11, 1, gen_bin1x_case },
  { "bin10-resync", TLC_FMT_BIN10, 1, gen_bin1x_case },
};

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof(*v), cmp_double);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Decodes buf once; returns the number of events and folds them into *sum. */
static uint64_t decode_once(const bench_case_t *bc, const uint8_t *buf, size_t len, uint64_t *sum) {
  static tlc_event_t ev[BATCH];
  tlc_dec_opts_t o;
  tlc_dec_t d;
  size_t off = 0, used;
  uint64_t events = 0, s = 0;
  int n;
  memset(&o, 0, sizeof(o));
  o.resync = bc->resync;
  if (tlc_dec_init(&d, bc->format, &o) != 0)
    return 0;
  while (off < len) {
    size_t chunk = len - off < PUSH ? len - off : PUSH;
    n = tlc_dec_push(&d, buf + off, chunk, &used, ev, BATCH);
    if (n < 0) {
      fprintf(stderr, "%s: %s\n", bc->name, d.err_reason);
      exit(1);
    }
    if (n > 0)
      s += (uint64_t)ev[n - 1].time_ns ^ ev[0].handle;
    events += (uint64_t)n;
    off += used;
  }
  while ((n = tlc_dec_finish(&d, ev, BATCH)) > 0) {
    s += (uint64_t)ev[n - 1].time_ns ^ ev[0].handle;
    events += (uint64_t)n;
  }
  tlc_dec_fini(&d);
  *sum += s;
  return events;
}

static int run_case(const bench_case_t *bc, size_t bytes, int runs) {
  size_t len;
  uint64_t expect = 0;
  uint8_t *buf = bc->gen(bc->format, bytes, &len, &expect), *dst = buf ? tlc_malloc(len) : NULL;
  double *tc = tlc_calloc((size_t)runs, sizeof(double)),
         *td = tlc_calloc((size_t)runs, sizeof(double));
  double *cc = tlc_calloc((size_t)runs, sizeof(double)),
         *cd = tlc_calloc((size_t)runs, sizeof(double));
  double mc, md, mcc, mcd;
  uint64_t events = 0, sum = 0;
  int r;
  if (buf == NULL || dst == NULL || tc == NULL || td == NULL || cc == NULL || cd == NULL) {
    fprintf(stderr, "out of memory\n");
    return 1;
  }
  memset(dst, 1, len); /* fault the pages in before timing */
  for (r = 0; r < runs; r++) {
    double t0 = now(), c0 = cpu();
    memcpy(dst, buf, len);
    tc[r] = now() - t0;
    cc[r] = cpu() - c0;
    sum += dst[(size_t)r * 4099 % len];
    t0 = now();
    c0 = cpu();
    events = decode_once(bc, buf, len, &sum);
    td[r] = now() - t0;
    cd[r] = cpu() - c0;
  }
  mc = median(tc, runs);
  md = median(td, runs);
  mcc = median(cc, runs);
  mcd = median(cd, runs);
  printf("%-13s wall: memcpy %6.2f GB/s  decode %6.2f GB/s %7.1f Mrec/s  ratio %.2f\n", bc->name,
         (double)len / mc / 1e9, (double)len / md / 1e9, (double)events / md / 1e6, mc / md);
  printf("%-13s  cpu: memcpy %6.2f GB/s  decode %6.2f GB/s %7.1f Mrec/s  ratio %.2f"
         "  (%.1f MiB, %" PRIu64 " records, check %016" PRIx64 ")\n",
         "", (double)len / mcc / 1e9, (double)len / mcd / 1e9, (double)events / mcd / 1e6,
         mcc / mcd, (double)len / (1 << 20), events, sum);
  tlc_free(buf);
  tlc_free(dst);
  tlc_free(tc);
  tlc_free(td);
  tlc_free(cc);
  tlc_free(cd);
  return events == expect ? 0 : 1;
}

int main(int argc, char **argv) {
  size_t mib = argc > 1 ? (size_t)strtoul(argv[1], NULL, 10) : 256;
  int runs = argc > 2 ? atoi(argv[2]) : 5, rc = 0, i;
  size_t c;
  if (mib == 0 || runs < 1) {
    fprintf(stderr, "usage: bench_decode [MiB] [runs] [format...]\n");
    return 2;
  }
  printf("batch %d events, push %u KiB, median of %d runs, one core\n", BATCH, PUSH >> 10, runs);
  for (c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
    int want = argc <= 3;
    for (i = 3; i < argc; i++)
      want |= strcmp(argv[i], cases[c].name) == 0;
    if (want)
      rc |= run_case(&cases[c], mib << 20, runs);
  }
  return rc;
}
