/* store_driver.c - a tiny program around the storage module for crash tests (RELIABILITY T02).
 *
 *   store_driver DIR write TARGET N ROTATE_BYTES MAX_SEGMENTS [START]   recover, write N bin11
 *        records (data field = START + index, time = index * 1000) in batches of 10, rotating by
 * size, retention by count, then close. With TLCAP_CRASHPOINT set it may die on the way.
 *   store_driver DIR tear TARGET N CUT    writes a .part of N records cut to CUT bytes, as a
 *        crash would leave it (no store involved)
 *   store_driver DIR diskfull FILLER [export]   real ENOSPC (T07 on a small tmpfs): writes until
 *        the store reports disk full, prints what statvfs says then ("full avail_bytes N
 *        avail_inodes N"), deletes FILLER (a file, or every file in a directory: inodes),
 *        awaits the automatic resume, writes more, closes; checks records_in == written +
 *        dropped and prints the counters. `export`: write main exports (as tlcapd does), and
 *        seal the open segment while the file system is full (prints "full ... exports_left_out
 *        N": exports left out then; the end line's exports_late counts those written later)
 *   store_driver DIR recover              recover and close; prints the summary
 *   store_driver DIR verify TARGET        verifies every sealed segment (content checksum) and
 *        prints one line per segment: "seg SEQ RECORDS FIRST_DATA LAST_DATA CONTIGUOUS", plus
 *        "parts N" and "torn N"; exit 1 if anything does not verify.
 * Exit: 0 ok, 1 failure, 2 usage.
 */
#include "base/err.h"
#include "store/policy/export.h"
#include "store/seg/iofault.h"
#include "store/seg/segread.h"
#include "store/store-int.h"
#include "store/store.h"

#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <uv.h>

static void done_cb(void *ud) {
  *(int *)ud = 1;
}

static void log_cb(void *ud, int level, const char *msg) {
  (void)ud;
  fprintf(stderr, "store[%d]: %s\n", level, msg);
}

static void enc(uint8_t *p, uint64_t i) {
  uint32_t handle = 0x10, flags = (i % 2) ? 0 : 3; /* E, X alternating, core 0 */
  int64_t t = (int64_t)i * 1000;
  for (int k = 0; k < 4; k++) {
    p[k] = (uint8_t)(handle >> (8 * k));
    p[4 + k] = (uint8_t)(flags >> (8 * k));
  }
  for (int k = 0; k < 8; k++) {
    p[8 + k] = (uint8_t)(i >> (8 * k));
    p[16 + k] = (uint8_t)((uint64_t)t >> (8 * k));
  }
}

static int run_store(const char *dir, const char *target, uint64_t start, uint64_t n, uint64_t rot,
                     uint32_t maxseg) {
  uv_loop_t loop;
  uv_loop_init(&loop);
  tlc_store_opts_t o;
  tlc_store_opts_default(&o);
  o.state_dir = dir;
  o.max_segment_bytes = rot;
  o.max_segments = maxseg;
  o.index_interval = 4;
  o.log_cb = log_cb;
  tlc_store_t *s;
  tlc_store_recovery_t sum;
  int rc = tlc_store_new(&loop, &o, &s);
  if (rc == 0)
    rc = tlc_store_recover(s, &sum);
  if (rc < 0) {
    fprintf(stderr, "store: %s\n", tlc_strerror(rc));
    return 1;
  }
  printf("recovered %" PRIu64 " torn %" PRIu64 " quarantined %" PRIu64 " completed %" PRIu64
         " segments %" PRIu64 "\n",
         sum.recovered, sum.torn_bytes, sum.quarantined, sum.completed_deletions, sum.segments);
  if (target) {
    tlc_store_target_t *t;
    if (tlc_store_target_open(s, target, TLC_FMT_BIN11, &t) < 0)
      return 1;
    tlc_event_t ev[10];
    for (uint64_t i = 0; i < n; i += 10) {
      size_t k = 0;
      for (; k < 10 && i + k < n; k++) {
        memset(&ev[k], 0, sizeof ev[k]);
        ev[k].handle = 0x10;
        ev[k].type = (uint8_t)(((i + k) % 2) ? 0 : 3);
        ev[k].raw = ev[k].type;
        ev[k].core = 0;
        ev[k].data = start + i + k;
        ev[k].time_ns = (int64_t)(i + k) * 1000;
      }
      tlc_store_write(t, ev, k);
    }
  }
  int closed = 0;
  tlc_store_close(s, done_cb, &closed);
  for (int g = 0; !closed && g < 1000000; g++)
    uv_run(&loop, UV_RUN_ONCE);
  uv_run(&loop, UV_RUN_DEFAULT);
  uv_loop_close(&loop);
  return closed ? 0 : 1;
}

static int tear(const char *dir, const char *target, uint64_t n, uint64_t cut) {
  char p[2048];
  snprintf(p, sizeof p, "%s/%s", dir, target);
  mkdir(dir, 0755);
  mkdir(p, 0755);
  snprintf(p, sizeof p, "%s/%s/20260101T000000Z-00000001.txt.BIN.part", dir, target);
  int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0)
    return 1;
  uint8_t rec[24];
  uint64_t w = 0;
  for (uint64_t i = 0; i < n && w < cut; i++) {
    enc(rec, i);
    size_t k = cut - w < 24 ? (size_t)(cut - w) : 24;
    if (write(fd, rec, k) != (ssize_t)k)
      return 1;
    w += k;
  }
  close(fd);
  return 0;
}

static int verify(const char *dir, const char *target) {
  char d[2048];
  snprintf(d, sizeof d, "%s/%s", dir, target);
  DIR *dd = opendir(d);
  if (!dd) {
    printf("parts 0\ntorn 0\n");
    return 0;
  }
  struct dirent *e;
  int bad = 0, parts = 0, torn = 0;
  while ((e = readdir(dd)) != NULL) {
    tlc_segname_t sn;
    int k = tlc__segname_parse(e->d_name, &sn);
    if (k == TLC_SK_PART)
      parts++;
    if (k == TLC_SK_TORN)
      torn++;
    if (k != TLC_SK_DATA && k != TLC_SK_ZST)
      continue;
    char p[4096], err[512] = "";
    snprintf(p, sizeof p, "%s/%s", d, e->d_name);
    tlc_segread_t *r;
    int rc = tlc_segread_open(p, TLC_FMT_NONE, TLC_SEGREAD_VERIFY, &r, err, sizeof err);
    if (rc < 0) {
      printf("bad %s %s\n", e->d_name, err);
      bad = 1;
      continue;
    }
    tlc_seginfo_t inf;
    tlc_segread_info(r, &inf);
    if (inf.rebuilt) {
      printf("bad %s manifest: %s\n", e->d_name, inf.why);
      bad = 1;
    }
    const uint8_t *rec;
    size_t len;
    uint64_t first = 0, last = 0, cnt = 0;
    int contiguous = 1;
    while (tlc_segread_next(r, &rec, &len, NULL) == 1) {
      uint64_t v = 0;
      for (int i = 7; i >= 0; i--)
        v = v << 8 | rec[8 + i];
      if (cnt == 0)
        first = v;
      else if (v != last + 1)
        contiguous = 0;
      last = v;
      cnt++;
    }
    printf("seg %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %d\n", sn.seq, cnt, first, last,
           contiguous);
    tlc_segread_close(r);
  }
  closedir(dd);
  printf("parts %d\ntorn %d\n", parts, torn);
  return bad;
}

typedef struct df {
  int resumed, full;
} df_t;

static void df_event(void *ud, const tlc_store_event_t *ev) {
  df_t *d = ud;
  if (ev->kind == TLC_SEV_RESUMED)
    d->resumed = 1;
  if (ev->kind == TLC_SEV_DISK_FULL)
    d->full = 1;
}

static void run_until(uv_loop_t *loop, int *flag, int limit) {
  for (int g = 0; !*flag && g < limit; g++)
    uv_run(loop, UV_RUN_ONCE);
}

static void on_tick(uv_timer_t *t) {
  (void)t; /* wakes the loop so that run_until's bound counts time */
}

/* removes a filler file, or every file in a filler directory; 0 or -1 */
static int remove_filler(const char *filler) {
  struct stat st;
  if (lstat(filler, &st) < 0)
    return -1;
  if (!S_ISDIR(st.st_mode))
    return unlink(filler);
  DIR *d = opendir(filler);
  if (!d)
    return -1;
  struct dirent *e;
  int rc = 0;
  while ((e = readdir(d)) != NULL) {
    char p[4096];
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
      continue;
    snprintf(p, sizeof p, "%s/%s", filler, e->d_name);
    if (unlink(p) < 0)
      rc = -1;
  }
  closedir(d);
  return rc;
}

static int diskfull(const char *dir, const char *filler, int with_export) {
  uv_loop_t loop;
  uv_loop_init(&loop);
  df_t d = { 0, 0 };
  tlc_store_opts_t o;
  tlc_store_opts_default(&o);
  o.state_dir = dir;
  o.max_segment_bytes = 24 * 4000;
  o.probe_interval_ms = 20;
  o.resume_free_bytes = 256 * 1024;
  o.log_cb = log_cb;
  o.event_cb = df_event;
  o.event_ud = &d;
  if (with_export)
    o.export_cb = tlc_stpol_main_export;
  tlc_store_t *s;
  if (tlc_store_new(&loop, &o, &s) < 0 || tlc_store_recover(s, NULL) < 0)
    return 1;
  tlc_store_target_t *t;
  if (tlc_store_target_open(s, "df", TLC_FMT_BIN11, &t) < 0)
    return 1;
  uv_timer_t tick;
  uv_timer_init(&loop, &tick);
  uv_timer_start(&tick, on_tick, 10, 10);
  static tlc_event_t ev[1000];
  uint64_t i = 0;
  for (int batch = 0; batch < 400 && !d.full; batch++) {
    for (int k = 0; k < 1000; k++, i++) {
      memset(&ev[k], 0, sizeof ev[k]);
      ev[k].handle = 0x10;
      ev[k].type = 3;
      ev[k].raw = 3;
      ev[k].data = i;
      ev[k].time_ns = (int64_t)i * 1000;
    }
    tlc_store_write(t, ev, 1000);
    int b = 0;
    tlc_store_barrier(s, done_cb, &b);
    run_until(&loop, &b, 100000);
  }
  if (!d.full) {
    fprintf(stderr, "never reached disk full\n");
    return 1;
  }
  tlc_store_counters_t c;
  if (with_export) {
    /* a segment sealed while the file system is full: its export waits for space */
    int b = 0;
    tlc_store_rotate(t, TLC_ROT_COMMAND);
    tlc_store_barrier(s, done_cb, &b);
    run_until(&loop, &b, 100000);
  }
  tlc_store_counters(s, &c);
  tlc_io_space_t sp;
  if (tlc_io_default.statvfs(dir, &sp) == 0)
    printf("full avail_bytes %" PRIu64 " avail_inodes %" PRIu64 " exports_left_out %" PRIu64 "\n",
           sp.avail_bytes, sp.avail_inodes, c.exports_pending);
  if (remove_filler(filler) < 0) {
    perror("remove filler");
    return 1;
  }
  run_until(&loop, &d.resumed, 1000); /* 1000 ticks of 10 ms: resume within 10 s */
  if (!d.resumed) {
    fprintf(stderr, "did not resume within 10 s of space returning\n");
    return 1;
  }
  for (int k = 0; k < 1000; k++, i++) {
    memset(&ev[k], 0, sizeof ev[k]);
    ev[k].handle = 0x10;
    ev[k].type = 3;
    ev[k].raw = 3;
    ev[k].data = i;
    ev[k].time_ns = (int64_t)i * 1000;
  }
  tlc_store_write(t, ev, 1000);
  int b = 0;
  tlc_store_barrier(s, done_cb, &b);
  run_until(&loop, &b, 100000);
  tlc_store_counters(s, &c);
  printf("in %" PRIu64 " written %" PRIu64 " dropped_disk_full %" PRIu64 " events %" PRIu64
         " exports_pending %" PRIu64 " exports_late %" PRIu64 "\n",
         c.records_in, c.records_written, c.dropped_disk_full_records, c.disk_full_events,
         c.exports_pending, c.exports_late);
  uv_close((uv_handle_t *)&tick, NULL);
  int closed = 0;
  tlc_store_close(s, done_cb, &closed);
  run_until(&loop, &closed, 1000000);
  uv_run(&loop, UV_RUN_DEFAULT);
  uv_loop_close(&loop);
  if (c.records_in != c.records_written + c.dropped_disk_full_records ||
      c.dropped_disk_full_records == 0) {
    fprintf(stderr, "conservation broken\n");
    return 1;
  }
  return 0;
}

int main(int argc, char **argv) {
  tlc_crashpoint_hook = tlc_crashpoint_env; /* TLCAP_CRASHPOINT */
  if (argc < 3)
    return 2;
  const char *dir = argv[1], *mode = argv[2];
  if (strcmp(mode, "write") == 0 && (argc == 7 || argc == 8))
    return run_store(dir, argv[3], argc == 8 ? strtoull(argv[7], NULL, 10) : 0,
                     strtoull(argv[4], NULL, 10), strtoull(argv[5], NULL, 10),
                     (uint32_t)strtoul(argv[6], NULL, 10));
  if (strcmp(mode, "tear") == 0 && argc == 6)
    return tear(dir, argv[3], strtoull(argv[4], NULL, 10), strtoull(argv[5], NULL, 10));
  if (strcmp(mode, "diskfull") == 0 && (argc == 4 || argc == 5))
    return diskfull(dir, argv[3], argc == 5 && strcmp(argv[4], "export") == 0);
  if (strcmp(mode, "recover") == 0)
    return run_store(dir, NULL, 0, 0, 1u << 20, 0);
  if (strcmp(mode, "verify") == 0 && argc == 4)
    return verify(dir, argv[3]);
  return 2;
}
