/* test_store_util.h - helpers shared by the storage tests (temporary state directories, loop
 * waiting with deadlines, stream generators, reading back segments, a fault-injecting I/O
 * table). Header-only (static functions) so each test binary stays one source file. */
#ifndef TLC_TEST_STORE_UTIL_H
#define TLC_TEST_STORE_UTIL_H

/* test paths are short; truncation would only fail a test */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wformat-truncation"
#endif

#include "base/alloc.h"
#include "base/err.h"
#include "evlog_gen.h"
#include "formats/bin1x.h"
#include "formats/dec.h"
#include "rng.h"
#include "store/seg/iofault.h"
#include "store/seg/segread.h"
#include "store/store-int.h"
#include "store/store.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <uv.h>

typedef struct buf {
  uint8_t *p;
  size_t len, cap;
} buf_t;

static inline void buf_add(buf_t *b, const void *p, size_t n) {
  if (b->len + n > b->cap) {
    size_t nc = b->cap ? b->cap : 4096;
    while (nc < b->len + n)
      nc *= 2;
    b->p = realloc(b->p, nc);
    assert_non_null(b->p);
    b->cap = nc;
  }
  memcpy(b->p + b->len, p, n);
  b->len += n;
}
static inline void buf_free(buf_t *b) {
  free(b->p);
  memset(b, 0, sizeof *b);
}

/* removes a tree (never follows symlinks); bounded depth */
static inline void rm_rf_depth(const char *path, int depth) {
  struct stat st;
  if (lstat(path, &st) < 0)
    return;
  if (S_ISDIR(st.st_mode) && depth < 16) {
    DIR *d = opendir(path);
    if (d) {
      struct dirent *e;
      while ((e = readdir(d)) != NULL) {
        char p[2048];
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
          continue;
        snprintf(p, sizeof p, "%s/%s", path, e->d_name);
        rm_rf_depth(p, depth + 1);
      }
      closedir(d);
    }
    rmdir(path);
  } else {
    unlink(path);
  }
}
static inline void rm_rf(const char *dir) {
  rm_rf_depth(dir, 0);
}
static char *mk_tmpdir(void) {
  char *d = strdup("/tmp/tlcstore.XXXXXX");
  assert_non_null(mkdtemp(d));
  return d;
}

/* ---- waiting on the loop, with a deadline ---- */

static inline void set_flag(void *ud) {
  *(int *)ud = 1;
}
static inline void on_deadline(uv_timer_t *t) {
  *(int *)t->data = 1;
}
/* runs the loop until *flag (deadline 20 s: fails the test) */
static inline void run_until(uv_loop_t *loop, int *flag) {
  uv_timer_t tm;
  int expired = 0;
  uv_timer_init(loop, &tm);
  tm.data = &expired;
  uv_timer_start(&tm, on_deadline, 20000, 0);
  for (int guard = 0; !*flag && !expired && guard < 10000000; guard++)
    uv_run(loop, UV_RUN_ONCE);
  uv_close((uv_handle_t *)&tm, NULL);
  uv_run(loop, UV_RUN_NOWAIT);
  assert_false(expired);
}
static inline void barrier(tlc_store_t *s, uv_loop_t *loop) {
  int f = 0;
  assert_int_equal(tlc_store_barrier(s, set_flag, &f), 0);
  run_until(loop, &f);
}
static inline void close_store(tlc_store_t *s, uv_loop_t *loop) {
  int f = 0;
  tlc_store_close(s, set_flag, &f);
  run_until(loop, &f);
  uv_run(loop, UV_RUN_DEFAULT);
}

static inline void quiet_log(void *ud, int level, const char *msg) {
  (void)ud;
  if (getenv("TLC_TEST_VERBOSE"))
    fprintf(stderr, "[%d] %s\n", level, msg);
}

static tlc_store_t *open_store(uv_loop_t *loop, tlc_store_opts_t *o, tlc_store_recovery_t *sum) {
  tlc_store_t *s;
  o->log_cb = quiet_log;
  assert_int_equal(tlc_store_new(loop, o, &s), 0);
  assert_int_equal(tlc_store_recover(s, sum), 0);
  return s;
}

/* ---- streams ---- */

/* n bin11/bin10 events with increasing times; their encoding appended to *want */
static tlc_event_t *gen_bin(tlc_format_t f, size_t n, uint64_t seed, buf_t *want) {
  rng_t r;
  rng_seed(&r, seed);
  tlc_event_t *ev = calloc(n, sizeof *ev);
  int64_t t = 1000;
  for (size_t i = 0; i < n; i++) {
    ev[i].handle = (uint32_t)rng_below(&r, 6) << 28 | (uint32_t)rng_below(&r, 8);
    ev[i].type = (uint8_t)rng_below(&r, 5);
    ev[i].core = f == TLC_FMT_BIN11 ? (uint8_t)rng_below(&r, 4) : TLC_CORE_UNKNOWN;
    ev[i].raw =
        f == TLC_FMT_BIN11 ? (uint32_t)ev[i].core << 4 | ev[i].type : (uint32_t)ev[i].type << 24;
    ev[i].data = rng_next(&r);
    t += (int64_t)rng_below(&r, 5000);
    ev[i].time_ns = t;
    uint8_t rec[24];
    tlc_bin1x_encode(f, &ev[i], rec);
    if (want)
      buf_add(want, rec, 24);
  }
  return ev;
}

/* list data files (sealed, plain or .zst, or .part when parts) of a target dir, by seq */
typedef struct seglist {
  char name[512][128];
  uint64_t seq[512];
  size_t n;
} seglist_t;

static inline void list_segments(const char *dir, seglist_t *l, int parts) {
  memset(l, 0, sizeof *l);
  DIR *d = opendir(dir);
  if (!d)
    return;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    tlc_segname_t sn;
    int k = tlc__segname_parse(e->d_name, &sn);
    if (!(k == TLC_SK_DATA || k == TLC_SK_ZST || (parts && k == TLC_SK_PART)))
      continue;
    assert_true(l->n < 512);
    size_t i = l->n++;
    while (i > 0 && l->seq[i - 1] > sn.seq) {
      memcpy(l->name[i], l->name[i - 1], sizeof l->name[0]);
      l->seq[i] = l->seq[i - 1];
      i--;
    }
    snprintf(l->name[i], sizeof l->name[0], "%s", e->d_name);
    l->seq[i] = sn.seq;
  }
  closedir(d);
}

static inline size_t count_kind(const char *dir, int kind) {
  size_t n = 0;
  DIR *d = opendir(dir);
  if (!d)
    return 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    tlc_segname_t sn;
    if (tlc__segname_parse(e->d_name, &sn) == kind)
      n++;
  }
  closedir(d);
  return n;
}

/* reads one segment through segread (verifying), range [from, to], appending to out */
static inline void read_segment(const char *path, int64_t from, int64_t to, buf_t *out,
                                tlc_seginfo_t *info) {
  tlc_segread_t *r;
  char err[300] = "";
  int rc = tlc_segread_open(path, TLC_FMT_NONE, TLC_SEGREAD_VERIFY, &r, err, sizeof err);
  if (rc != 0)
    fprintf(stderr, "segread_open %s: %d %s\n", path, rc, err);
  assert_int_equal(rc, 0);
  if (info)
    tlc_segread_info(r, info);
  assert_int_equal(tlc_segread_range(r, from, to), 0);
  uint8_t tmp[700]; /* smaller than some evlog blocks: exercises the TLC_ERANGE path */
  for (int guard = 0; guard < 10000000; guard++) {
    int64_t n = tlc_segread_read(r, tmp, sizeof tmp);
    if (n == TLC_ERANGE) {
      const uint8_t *p;
      size_t len;
      assert_int_equal(tlc_segread_next(r, &p, &len, NULL), 1);
      buf_add(out, p, len);
      continue;
    }
    assert_true(n >= 0);
    if (n == 0)
      break;
    buf_add(out, tmp, (size_t)n);
  }
  tlc_segread_close(r);
}

/* concatenation of every sealed segment of dir in sequence order */
static inline void read_all(const char *dir, buf_t *out, size_t *nseg) {
  seglist_t l;
  list_segments(dir, &l, 0);
  for (size_t i = 0; i < l.n; i++) {
    char p[1200];
    tlc_seginfo_t inf;
    snprintf(p, sizeof p, "%s/%s", dir, l.name[i]);
    read_segment(p, INT64_MIN, INT64_MAX, out, &inf);
    assert_false(inf.rebuilt);
  }
  if (nseg)
    *nseg = l.n;
}

/* the data of every sealed segment of dir, in sequence order, is want[0..len), byte for byte */
static inline void stored_equals(const char *dir, const uint8_t *want, size_t len) {
  buf_t got = { 0 };
  read_all(dir, &got, NULL);
  assert_int_equal(got.len, len);
  assert_memory_equal(got.p, want, len);
  buf_free(&got);
}

/* decodes a stream (strict) and hands every batch to the store */
static inline void feed_stream(tlc_store_target_t *t, tlc_format_t f, const uint8_t *p, size_t len,
                               size_t chunk) {
  tlc_dec_t d;
  tlc_event_t ev[256];
  assert_int_equal(tlc_dec_init(&d, f, NULL), 0);
  size_t off = 0;
  while (off < len) {
    size_t k = len - off < chunk ? len - off : chunk;
    const uint8_t *in = p + off;
    size_t rem = k;
    while (rem > 0) {
      size_t used = 0;
      int n = tlc_dec_push(&d, in, rem, &used, ev, 256);
      if (n < 0)
        fprintf(stderr, "decode: %d at %llu: %s\n", n, (unsigned long long)d.err_offset,
                d.err_reason);
      assert_true(n >= 0);
      if (n > 0)
        assert_int_equal(tlc_store_write(t, ev, (size_t)n), 0);
      in += used;
      rem -= used;
    }
    off += k;
  }
  int n;
  while ((n = tlc_dec_finish(&d, ev, 256)) > 0)
    assert_int_equal(tlc_store_write(t, ev, (size_t)n), 0);
  assert_int_equal(n, 0);
  tlc_dec_fini(&d);
}

/* ---- fault-injecting I/O table ---- */

static atomic_int f_short;     /* writes return random short counts */
static atomic_int f_eintr;     /* every 3rd write/pread: EINTR */
static atomic_int f_eagain;    /* bursts of EAGAIN */
static atomic_int f_full;      /* writes fail with ENOSPC (after a partial write) */
static atomic_int f_fsync_eio; /* fdatasync fails with EIO */
static atomic_int f_gate;      /* writes block while set */
static atomic_int f_eio;       /* writes: a partial write, then EIO */
static atomic_uint f_calls;
/* fdatasync blocks while f_hold is set (a disk that takes its time), until f_hold_sync(0) */
static uv_mutex_t f_hold_mu;
static uv_cond_t f_hold_cv;
static int f_hold;         /* under f_hold_mu */
static atomic_uint f_held; /* fdatasync calls that waited */
static atomic_uint_fast64_t f_rng = 88172645463325252ull;

static inline unsigned f_rand(unsigned n) {
  uint64_t x = atomic_load(&f_rng);
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  atomic_store(&f_rng, x);
  return (unsigned)(x % n);
}

static inline ssize_t f_write(int fd, const void *buf, size_t len) {
  unsigned c = atomic_fetch_add(&f_calls, 1) + 1;
  for (int g = 0; atomic_load(&f_gate) && g < 20000; g++)
    usleep(500); /* the test holds the writer here to fill the queue; bounded */
  if (atomic_load(&f_eintr) && c % 3 == 0)
    return -EINTR;
  if (atomic_load(&f_eagain) && c % 7 < 3)
    return -EAGAIN;
  if (atomic_load(&f_eio)) {
    if (len > 30 && f_rand(2) == 0)
      return tlc_io_default.write(fd, buf, 30); /* a record and a bit */
    return -EIO;
  }
  if (atomic_load(&f_full)) {
    if (len > 1 && f_rand(2) == 0)
      return tlc_io_default.write(fd, buf, 1 + f_rand((unsigned)len - 1)); /* partial */
    return -ENOSPC;
  }
  if (atomic_load(&f_short) && len > 1)
    len = 1 + f_rand((unsigned)len);
  return tlc_io_default.write(fd, buf, len);
}
static inline int f_fdatasync(int fd) {
  if (atomic_load(&f_fsync_eio))
    return -EIO;
  uv_mutex_lock(&f_hold_mu);
  if (f_hold) {
    atomic_fetch_add(&f_held, 1);
    uv_cond_broadcast(&f_hold_cv); /* for f_await_held */
  }
  while (f_hold)
    uv_cond_wait(&f_hold_cv, &f_hold_mu);
  uv_mutex_unlock(&f_hold_mu);
  return tlc_io_default.fdatasync(fd);
}
/* Waits (at most 10 s) until n fdatasync calls are held; 1 when they are. The sealer thread
 * may get there after the writer already waits for it. */
static inline int f_await_held(unsigned n) {
  uint64_t waited = 0;
  uv_mutex_lock(&f_hold_mu);
  while (atomic_load(&f_held) < n && waited < 10000000000ull) {
    uint64_t t0 = uv_hrtime();
    (void)uv_cond_timedwait(&f_hold_cv, &f_hold_mu, 100000000ull);
    waited += uv_hrtime() - t0;
  }
  uv_mutex_unlock(&f_hold_mu);
  return atomic_load(&f_held) >= n;
}
static inline void f_hold_sync(int on) {
  uv_mutex_lock(&f_hold_mu);
  f_hold = on;
  uv_cond_broadcast(&f_hold_cv);
  uv_mutex_unlock(&f_hold_mu);
}
static inline int f_statvfs(const char *p, tlc_io_space_t *o) {
  int rc = tlc_io_default.statvfs(p, o);
  if (rc == 0 && atomic_load(&f_full)) {
    o->avail_bytes = 0;
  }
  return rc;
}
static inline int f_open(const char *path, int flags, int mode) {
  if (atomic_load(&f_full) && (flags & O_CREAT))
    return -ENOSPC;
  return tlc_io_default.open(path, flags, mode);
}

static tlc_io_t f_io;
static inline void faults_install(void) {
  f_io = tlc_io_default;
  f_io.write = f_write;
  f_io.fdatasync = f_fdatasync;
  f_io.statvfs = f_statvfs;
  f_io.open = f_open;
  atomic_store(&f_short, 0);
  atomic_store(&f_eintr, 0);
  atomic_store(&f_eagain, 0);
  atomic_store(&f_full, 0);
  atomic_store(&f_fsync_eio, 0);
  atomic_store(&f_gate, 0);
  atomic_store(&f_eio, 0);
  atomic_store(&f_held, 0);
  f_hold = 0;
  assert_int_equal(uv_mutex_init(&f_hold_mu), 0);
  assert_int_equal(uv_cond_init(&f_hold_cv), 0);
  tlc_io_set(&f_io);
}
static inline void faults_remove(void) {
  tlc_io_set(NULL);
  uv_cond_destroy(&f_hold_cv);
  uv_mutex_destroy(&f_hold_mu);
}

#endif
