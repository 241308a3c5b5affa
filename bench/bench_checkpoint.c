/* bench_checkpoint.c - what a checkpoint costs: the loop thread's stall (encoding a target's
 * whole state) and the file write (threadpool), and a restore, at N areas.
 *
 *   bench_checkpoint [AREAS] [CALLS_PER_AREA] [DIR]     (defaults 100000, 8, /tmp)
 *
 * A bin11 target (default windows 1 s, 10 s, 60 s; histograms on) gets CALLS_PER_AREA E/X
 * pairs on each of AREAS function areas, spread over 4 cores and a minute of target time (so
 * rows have histogram spans and window buckets). Then, 5 rounds each, medians printed:
 *   encode   tlc_ckpt_encode (the loop's stall in tlcapd) - baseline: memcpy of as many bytes
 *   write    tlc_ckpt_finish (checksum) + tmp file, write, fsync, rename, fsync(dir), as the
 *            threadpool job does - baseline: the same bytes written and fsynced plainly
 *   restore  read back and tlc_ckpt_restore into a fresh target
 *   sliced   what tlcapd does: the buffer allocated and its pages touched (tlcapd: in the
 *            threadpool, timed apart), then tlc_ckpt_encode_begin and tlc_ckpt_encode_step 16 rows
 * at a time until SLICE_US (default 1000) have passed, as one loop turn does; the longest slice
 * (wall clock and the thread's CPU time) is the loop's longest stall, the sum the encoding's loop
 * time, the count the turns it spans fork     the path tlcapd took before (removed): the parent's
 * fork() (the loop's whole stall), and the child's encode + write until it exits Wall-clock times
 * (the host is shared: compare the figures of one run).
 *
 *   bench_checkpoint [AREAS] [CALLS_PER_AREA] [DIR] [SLICE_US]
 */
#define _GNU_SOURCE /* RUSAGE_THREAD */
#include "base/alloc.h"
#include "continuity/ckfile.h"
#include "engine/engine.h"
#include "ingest/target.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* involuntary context switches of this thread so far (the host took the CPU away) */
static long preempted(void) {
  struct rusage ru;
  getrusage(RUSAGE_THREAD, &ru);
  return ru.ru_nivcsw;
}

static double cpu(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmpd(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmpd);
  return v[n / 2];
}

static void put(uint8_t *p, uint32_t handle, unsigned type, unsigned core, int64_t t) {
  uint32_t flags = (core << 4) | type;
  uint64_t data = 0;
  memcpy(p, &handle, 4);
  memcpy(p + 4, &flags, 4);
  memcpy(p + 8, &data, 8);
  memcpy(p + 16, &t, 8);
}

static double write_file(const char *dir, const uint8_t *buf, size_t len, int full) {
  char tmp[512], fin[512];
  double t0 = now();
  int fd;
  snprintf(tmp, sizeof tmp, "%s/bench.checkpoint.tmp", dir);
  snprintf(fin, sizeof fin, "%s/bench.checkpoint", dir);
  fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd < 0 || write(fd, buf, len) != (ssize_t)len || fsync(fd) != 0) {
    perror("write");
    exit(1);
  }
  close(fd);
  if (full) {
    if (rename(tmp, fin) != 0)
      exit(1);
    fd = open(dir, O_RDONLY);
    if (fd >= 0) {
      fsync(fd);
      close(fd);
    }
  }
  return now() - t0;
}

int main(int argc, char **argv) {
  size_t areas = argc > 1 ? strtoul(argv[1], NULL, 10) : 100000;
  unsigned calls = argc > 2 ? (unsigned)strtoul(argv[2], NULL, 10) : 8;
  const char *dir = argc > 3 ? argv[3] : "/tmp";
  double slice_s = (argc > 4 ? strtod(argv[4], NULL) : 1000.0) * 1e-6;
  double sl_max[5], sl_cpu[5], sl_sum[5], sl_n[5], sl_pre[5], sl_over[5], prep[5];
  tlc_targets_t reg;
  tlc_target_conf_t conf;
  tlc_target_t *t, *t2;
  double enc[5], cpy[5], wr[5], pw[5], rs[5], fk[5], fkall[5];
  size_t len = 0;
  uint8_t *chunk;
  const size_t per = 4096;
  memset(&conf, 0, sizeof conf);
  conf.format = TLC_FMT_BIN11;
  conf.histograms = 1;
  tlc_targets_init(&reg, 4);
  if (tlc_targets_get(&reg, "bench", TLC_SRC_LISTEN, &conf, &t) != 0)
    return 1;
  /* E/X pairs: area a's k-th call at time (k * areas + a) * step, 4 cores */
  chunk = malloc(per * 24);
  {
    int64_t step = 60000000000ll / ((int64_t)areas * calls);
    size_t n = 0;
    if (step < 4)
      step = 4;
    for (unsigned k = 0; k < calls; k++)
      for (size_t a = 0; a < areas; a++) {
        int64_t tm = ((int64_t)k * (int64_t)areas + (int64_t)a) * step;
        unsigned core = (unsigned)(a & 3);
        put(chunk + 24 * n++, (uint32_t)a, 3, core, tm);
        put(chunk + 24 * n++, (uint32_t)a, 0, core, tm + step / 2 + (int64_t)(a % 97));
        if (n + 2 > per) {
          tlc_target_feed(t, chunk, n * 24);
          n = 0;
        }
      }
    if (n > 0)
      tlc_target_feed(t, chunk, n * 24);
  }
  free(chunk);
  {
    tlc_engine_mem_t m;
    tlc_engine_mem(t->pipe.engine, &m);
    printf("target: %zu areas, %zu contexts, %.1f MB engine (%.1f MB histograms, %.1f MB "
           "windows), %llu events\n",
           m.areas, m.contexts, m.bytes / 1e6, m.hist_bytes / 1e6, m.window_bytes / 1e6,
           (unsigned long long)tlc_engine_counters(t->pipe.engine)->events);
  }
  for (int r = 0; r < 5; r++) {
    tlc_ckw_t w;
    tlc_ckpt_pos_t pos = { 1, 7, 1000, 0 };
    uint8_t *copy;
    double t0;
    /* sliced, as tlcapd's loop does it (buffer reserved at the engine's size, as tlcapd) */
    {
      tlc_engine_saver_t sv;
      tlc_engine_mem_t m;
      int rc;
      size_t slen;
      uint64_t shash;
      tlc_engine_mem(t->pipe.engine, &m);
      tlc_ckw_init(&w, (size_t)4 << 30);
      sl_max[r] = sl_cpu[r] = sl_sum[r] = sl_n[r] = sl_pre[r] = sl_over[r] = 0;
      /* tlcapd's threadpool job first: the buffer allocated, its pages touched */
      t0 = now();
      tlc_ckw_reserve(&w, m.bytes + m.bytes / 8 + 65536);
      for (size_t o = 0; o < w.cap; o += 4096)
        ((volatile uint8_t *)w.p)[o] = 0;
      prep[r] = now() - t0;
      t0 = now();
      double c0 = cpu();
      rc = tlc_ckpt_encode_begin(t, &sv, &w);
      for (;;) {
        double s0 = now(), sc0 = cpu(), dt, dc;
        long p0 = preempted();
        if (rc == 0 && sl_n[r] > 0)
          do
            rc = tlc_ckpt_encode_step(t, &sv, &w, 16);
          while (rc == 0 && now() - s0 < slice_s);
        else if (rc == 0) /* the first slice follows begin, as in tlcapd */
          do
            rc = tlc_ckpt_encode_step(t, &sv, &w, 16);
          while (rc == 0 && now() - t0 < slice_s);
        dt = now() - (sl_n[r] > 0 ? s0 : t0);
        dc = cpu() - (sl_n[r] > 0 ? sc0 : c0);
        sl_n[r]++;
        sl_sum[r] += dt;
        if (dt > sl_max[r]) {
          sl_max[r] = dt;
          sl_pre[r] = (double)(preempted() - p0);
        }
        if (dt > 2 * slice_s && preempted() == p0)
          sl_over[r]++; /* over twice the budget without the host taking the CPU away */
        if (dc > sl_cpu[r])
          sl_cpu[r] = dc;
        if (rc != 0)
          break;
      }
      if (rc < 0)
        return 1;
      slen = w.len;
      shash =
          tlc_ck_fnv(w.p + TLC_CKPT_HEADER, w.len - TLC_CKPT_HEADER); /* the header is finish()'s */
      tlc_ckw_fini(&w);
      tlc_ckw_init(&w, (size_t)4 << 30);
      t0 = now();
      if (tlc_ckpt_encode(t, &w) != 0)
        return 1;
      enc[r] = now() - t0;
      if (w.len != slen || slen == 0 ||
          tlc_ck_fnv(w.p + TLC_CKPT_HEADER, w.len - TLC_CKPT_HEADER) != shash) {
        fprintf(stderr, "sliced encoding: %zu bytes, whole: %zu\n", slen, w.len);
        return 1;
      }
    }
    len = w.len;
    copy = malloc(w.len);
    t0 = now();
    memcpy(copy, w.p, w.len);
    cpy[r] = now() - t0;
    t0 = now();
    tlc_ckpt_finish(&w, &pos, 0);
    wr[r] = (now() - t0) + write_file(dir, w.p, w.len, 1);
    pw[r] = write_file(dir, copy, len, 0); /* the bytes copied (before the checksum) */
    /* restore: read the file back, restore into a fresh target */
    {
      char path[512];
      FILE *f;
      uint8_t *buf = malloc(w.len);
      tlc_targets_t reg2;
      char why[200];
      snprintf(path, sizeof path, "%s/bench.checkpoint", dir);
      t0 = now();
      f = fopen(path, "rb");
      if (f == NULL || fread(buf, 1, w.len, f) != w.len)
        return 1;
      fclose(f);
      tlc_targets_init(&reg2, 4);
      if (tlc_targets_get(&reg2, "bench", TLC_SRC_LISTEN, &conf, &t2) != 0 ||
          tlc_ckpt_restore(t2, buf, w.len, why, sizeof why) != 0) {
        fprintf(stderr, "restore: %s\n", why);
        return 1;
      }
      rs[r] = now() - t0;
      if (tlc_engine_counters(t2->pipe.engine)->events !=
          tlc_engine_counters(t->pipe.engine)->events)
        return 1;
      tlc_targets_fini(&reg2);
      free(buf);
    }
    free(copy);
    tlc_ckw_fini(&w);
  }
  /* the path tlcapd takes for a large target: fork, the child encodes and writes */
  for (int r = 0; r < 5; r++) {
    double t0 = now();
    int ws;
    pid_t pid = fork();
    if (pid == 0) {
      tlc_ckw_t w;
      tlc_ckpt_pos_t pos = { 1, 7, 1000, 0 };
      tlc_ckw_init(&w, (size_t)4 << 30);
      if (tlc_ckpt_encode(t, &w) != 0 || tlc_ckpt_finish(&w, &pos, 0) != 0)
        _exit(1);
      write_file(dir, w.p, w.len, 1);
      _exit(0);
    }
    fk[r] = now() - t0;
    waitpid(pid, &ws, 0);
    fkall[r] = now() - t0;
  }
  printf("checkpoint: %.1f MB (%.0f bytes per area)\n", len / 1e6, (double)len / (double)areas);
  printf("fork (the loop's stall for a large target): %.2f ms; the child's encode + write: "
         "%.2f ms\n",
         median(fk, 5) * 1e3, median(fkall, 5) * 1e3);
  printf("sliced (%.0f us): longest slice %.3f ms (preempted %.0f times in it; the longest "
         "in thread CPU %.3f ms), %.0f slices, %.2f ms in all; slices over twice the budget "
         "without preemption: %.0f\n",
         slice_s * 1e6, median(sl_max, 5) * 1e3, median(sl_pre, 5), median(sl_cpu, 5) * 1e3,
         median(sl_n, 5), median(sl_sum, 5) * 1e3, median(sl_over, 5));
  printf("  its buffer prepared first (threadpool: allocated, pages touched): %.2f ms\n",
         median(prep, 5) * 1e3);
  printf("encode in one go: %.2f ms   [memcpy of the same bytes: %.2f ms]\n", median(enc, 5) * 1e3,
         median(cpy, 5) * 1e3);
  printf("write (threadpool):  %.2f ms   [plain write + fsync: %.2f ms]\n", median(wr, 5) * 1e3,
         median(pw, 5) * 1e3);
  printf("restore (read + load): %.2f ms\n", median(rs, 5) * 1e3);
  {
    char path[512];
    snprintf(path, sizeof path, "%s/bench.checkpoint", dir);
    unlink(path);
    snprintf(path, sizeof path, "%s/bench.checkpoint.tmp", dir);
    unlink(path);
  }
  tlc_targets_fini(&reg);
  return 0;
}
