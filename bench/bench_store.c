/* bench_store.c - sustained bin11 capture through the storage module vs a plain writer.
 *
 *   bench_store [RECORDS] [DIR]     (default 1,000,000 records = 24 MB, DIR = a temp dir)
 *
 * Same run, same bytes: (a) tlc_store_write in batches of 256 decoded events (encoding, the
 * writer queue and thread, manifests and index, rotation at 64 MiB, seal with fdatasync),
 * timed from the first write until tlc_store_close's callback; (b) write(2) of the encoded
 * bytes in 64 KiB chunks plus one fdatasync. Prints MB/s and records/s of both. The queue is
 * sized so that nothing is dropped (the drop count is printed and must be 0).
 */
#include "formats/bin1x.h"
#include "store/store.h"

#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void closed_cb(void *ud) {
  *(int *)ud = 1;
}

int main(int argc, char **argv) {
  size_t n = argc > 1 ? (size_t)strtoull(argv[1], NULL, 10) : 1000000;
  char tmpl[] = "/tmp/tlcbench.XXXXXX";
  const char *dir = argc > 2 ? argv[2] : mkdtemp(tmpl);
  if (!dir || n == 0)
    return 2;
  tlc_event_t *ev = calloc(n, sizeof *ev);
  uint8_t *bytes = malloc(n * 24);
  if (!ev || !bytes)
    return 1;
  for (size_t i = 0; i < n; i++) {
    ev[i].handle = (uint32_t)(i % 64);
    ev[i].type = (uint8_t)(i % 2 ? 0 : 3);
    ev[i].core = (uint8_t)(i % 4);
    ev[i].raw = (uint32_t)ev[i].core << 4 | ev[i].type;
    ev[i].data = i;
    ev[i].time_ns = (int64_t)i * 100;
    tlc_bin1x_encode(TLC_FMT_BIN11, &ev[i], bytes + i * 24);
  }

  /* (a) the store */
  uv_loop_t loop;
  uv_loop_init(&loop);
  tlc_store_opts_t o;
  tlc_store_opts_default(&o);
  o.state_dir = dir;
  o.queue_bytes = n * 24 + (1u << 20);
  tlc_store_t *s;
  tlc_store_target_t *t;
  if (tlc_store_new(&loop, &o, &s) < 0 || tlc_store_recover(s, NULL) < 0 ||
      tlc_store_target_open(s, "bench", TLC_FMT_BIN11, &t) < 0)
    return 1;
  double t0 = now_s();
  for (size_t i = 0; i < n; i += 256)
    tlc_store_write(t, ev + i, n - i < 256 ? n - i : 256);
  double t_ingest = now_s() - t0;
  tlc_store_counters_t c;
  tlc_store_counters(s, &c);
  int closed = 0;
  tlc_store_close(s, closed_cb, &closed);
  while (!closed)
    uv_run(&loop, UV_RUN_ONCE);
  double t_store = now_s() - t0;
  uv_loop_close(&loop);

  /* (b) plain writer */
  char path[4096];
  snprintf(path, sizeof path, "%s/plain.bin", dir);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0)
    return 1;
  t0 = now_s();
  for (size_t off = 0; off < n * 24;) {
    size_t k = n * 24 - off < 65536 ? n * 24 - off : 65536;
    ssize_t w = write(fd, bytes + off, k);
    if (w <= 0)
      return 1;
    off += (size_t)w;
  }
  fdatasync(fd);
  close(fd);
  double t_plain = now_s() - t0;
  double mb = (double)n * 24 / 1e6;
  printf("records %zu (%.1f MB), dropped %" PRIu64 "\n", n, mb, c.dropped_buffer_full_records);
  printf("store: %.1f MB/s (%.2f Mrec/s), loop time in tlc_store_write %.3f s\n", mb / t_store,
         (double)n / t_store / 1e6, t_ingest);
  printf("plain: %.1f MB/s (%.2f Mrec/s)\n", mb / t_plain, (double)n / t_plain / 1e6);
  free(ev);
  free(bytes);
  if (argc <= 2) {
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
      return 1;
  }
  return 0;
}
