/* crashpoint.c - the storage's fault injection for the test binaries (tlcapd-test,
 * store_driver), never compiled into tlcapd: crash points (RELIABILITY T01, T02), installed as
 * tlc_crashpoint_hook, and tlcapd-test's I/O hooks (tlc_io_test_hooks: a stalled or slow disk,
 * slow seals, a slow recovery, a failing checkpoint write).
 *
 * Crash points: reads TLCAP_CRASHPOINT ("name" or "name:N") once (first call) and counts hits of
 * the named point with an atomic counter, so it works from the writer thread and libuv's workers
 * alike; the N-th hit raises SIGKILL.
 */
#include "store/seg/iofault.h"

#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static atomic_int cp_loaded;
static char cp_name[64];
static long cp_nth;
static atomic_long cp_hits;

void tlc_crashpoint_env(const char *name) {
  if (atomic_load(&cp_loaded) == 0) {
    const char *e = getenv("TLCAP_CRASHPOINT");
    cp_name[0] = 0;
    cp_nth = 1;
    if (e && *e) {
      const char *colon = strchr(e, ':');
      size_t n = colon ? (size_t)(colon - e) : strlen(e);
      if (n < sizeof cp_name) {
        memcpy(cp_name, e, n);
        cp_name[n] = 0;
      }
      if (colon)
        cp_nth = strtol(colon + 1, NULL, 10);
      if (cp_nth < 1)
        cp_nth = 1;
    }
    atomic_store(&cp_loaded, 1);
  }
  if (cp_name[0] == 0 || strcmp(cp_name, name) != 0)
    return;
  if (atomic_fetch_add(&cp_hits, 1) + 1 == cp_nth)
    raise(SIGKILL);
}

/* RELIABILITY T35, writer-only stall: TLCAP_TEST_WRITER_STALL_MS=N makes the storage writer's
 * first write(2) sleep N ms, as a hung disk would; the loop keeps running. */
static long test_stall_ms;
static int test_stalled;
static tlc_io_t test_io;

/* Backpressure: TLCAP_TEST_DISK_BPS=N makes every write(2) of the storage threads take len / N
 * seconds, a disk that writes N bytes per second. */
static long long test_disk_bps;

/* Slow seals: TLCAP_TEST_SEAL_DELAY_MS=N makes every fdatasync (a seal's first step; periodic
 * syncs too) take N ms longer, so that segments wait for their seal. */
static long test_seal_delay_ms;

/* RELIABILITY T34: TLCAP_TEST_RECOVERY_DELAY_MS=N makes crash recovery at start take N ms
 * longer, to see EXTEND_TIMEOUT_USEC. */
static long test_recovery_delay_ms;

/* Checkpoint write faults: TLCAP_TEST_CKPT_FAIL=K:N makes the N-th write(2) into a checkpoint
 * file (<target>/target.checkpoint.tmp) fail with ENOSPC (K:N:EIO: with EIO) in the K-th
 * checkpoint file that gets that many writes (counted from the start; one target's
 * checkpoints: the count follows the file opened last). Any thread writes: atomics. */
static long test_ck_open, test_ck_write;
static int test_ck_errno = ENOSPC;
static long test_ck_hits, test_ck_writes;
static int test_ck_fd = -1; /* the checkpoint file opened last, while it is open */

static int test_ck_open_fn(const char *path, int flags, int mode) {
  static const char sfx[] = ".checkpoint.tmp";
  int fd = tlc_io_default.open(path, flags, mode);
  size_t n = strlen(path);
  if (fd >= 0 && n >= sizeof sfx - 1 && strcmp(path + n - (sizeof sfx - 1), sfx) == 0) {
    __atomic_store_n(&test_ck_writes, 0, __ATOMIC_SEQ_CST);
    __atomic_store_n(&test_ck_fd, fd, __ATOMIC_SEQ_CST);
  }
  return fd;
}

static int test_ck_close_fn(int fd) {
  int k = fd;
  (void)__atomic_compare_exchange_n(&test_ck_fd, &k, -1, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
  return tlc_io_default.close(fd);
}

static void sleep_ms(long ms) {
  struct timespec ts = { ms / 1000, (ms % 1000) * 1000000 };
  while (ms > 0 && nanosleep(&ts, &ts) != 0)
    ;
}

static ssize_t test_stall_write(int fd, const void *buf, size_t len) {
  if (test_ck_write > 0 && fd == __atomic_load_n(&test_ck_fd, __ATOMIC_SEQ_CST) &&
      __atomic_add_fetch(&test_ck_writes, 1, __ATOMIC_SEQ_CST) == test_ck_write &&
      __atomic_add_fetch(&test_ck_hits, 1, __ATOMIC_SEQ_CST) == test_ck_open)
    return -test_ck_errno;
  if (test_disk_bps > 0) {
    long long ns = (long long)len * 1000000000ll / test_disk_bps;
    struct timespec ts = { (time_t)(ns / 1000000000ll), (long)(ns % 1000000000ll) };
    while (nanosleep(&ts, &ts) != 0)
      ;
  }
  if (!test_stalled && test_stall_ms > 0) {
    test_stalled = 1;
    sleep_ms(test_stall_ms);
  }
  return tlc_io_default.write(fd, buf, len);
}

static int test_slow_fdatasync(int fd) {
  sleep_ms(test_seal_delay_ms);
  return tlc_io_default.fdatasync(fd);
}

static void test_slow_recovery(void) {
  sleep_ms(test_recovery_delay_ms);
}

static long env_long(const char *name) {
  const char *v = getenv(name);
  return v != NULL ? strtol(v, NULL, 10) : 0;
}

void tlc_io_test_hooks(void) {
  const char *b = getenv("TLCAP_TEST_DISK_BPS");
  tlc_crashpoint_hook = tlc_crashpoint_env; /* TLCAP_CRASHPOINT */
  test_stall_ms = env_long("TLCAP_TEST_WRITER_STALL_MS");
  test_disk_bps = b != NULL ? strtoll(b, NULL, 10) : 0;
  test_seal_delay_ms = env_long("TLCAP_TEST_SEAL_DELAY_MS");
  if (getenv("TLCAP_TEST_RECOVERY_DELAY_MS") != NULL) {
    test_recovery_delay_ms = env_long("TLCAP_TEST_RECOVERY_DELAY_MS");
    tlc_recovery_hook = test_slow_recovery;
  }
  {
    const char *ck = getenv("TLCAP_TEST_CKPT_FAIL");
    char *e = NULL;
    if (ck != NULL && (test_ck_open = strtol(ck, &e, 10)) > 0 && *e == ':') {
      test_ck_write = strtol(e + 1, &e, 10);
      if (*e == ':' && strcmp(e + 1, "EIO") == 0)
        test_ck_errno = EIO;
    }
  }
  if (test_stall_ms <= 0 && test_disk_bps <= 0 && test_seal_delay_ms <= 0 && test_ck_write <= 0)
    return;
  test_io = tlc_io_default;
  if (test_stall_ms > 0 || test_disk_bps > 0 || test_ck_write > 0)
    test_io.write = test_stall_write;
  if (test_ck_write > 0) {
    test_io.open = test_ck_open_fn;
    test_io.close = test_ck_close_fn;
  }
  if (test_seal_delay_ms > 0)
    test_io.fdatasync = test_slow_fdatasync;
  tlc_io_set(&test_io);
}
