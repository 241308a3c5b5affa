/* iofault.h - the storage module's I/O shim and named crash points.
 *
 * Every system call the storage module makes on the state directory goes through the
 * function table `tlc_io` (open, read, write, fsync, fdatasync, ftruncate, close, rename,
 * unlink, mkdir, statvfs). Production code uses the defaults (thin wrappers over the C
 * library returning -errno on failure); tests install a table that injects short writes,
 * EINTR, EAGAIN, ENOSPC or EIO (RELIABILITY T07, T09, T10). The table is process-wide: set it
 * before the store starts and restore it after the store is closed (the writer thread and
 * libuv's worker threads read it without locks).
 *
 * Crash points (RELIABILITY T02): tlc_crashpoint("seal.before_trailer") raises SIGKILL when
 * the environment variable TLCAP_CRASHPOINT names that point (`name` or `name:n`, n = which
 * hit, 1-based, default 1), in the test binaries that install the hook (below); in tlcapd a
 * crash point is a test of a NULL pointer.
 *
 * Thread-safe as far as the installed functions are.
 */
#ifndef TLC_IOFAULT_H
#define TLC_IOFAULT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Free space of a file system, as the shim reports it. */
typedef struct tlc_io_space {
  uint64_t avail_bytes;  /* f_bavail * f_frsize */
  uint64_t avail_inodes; /* f_favail (UINT64_MAX when the file system has no inode limit) */
  uint64_t total_bytes;  /* f_blocks * f_frsize */
} tlc_io_space_t;

/* The I/O functions. Each returns >= 0 on success (a count or an fd) or -errno. None retries
 * on EINTR or a short count: callers do (see tlc_io_write_all). */
typedef struct tlc_io {
  int (*open)(const char *path, int flags, int mode);
  ssize_t (*read)(int fd, void *buf, size_t len);
  ssize_t (*pread)(int fd, void *buf, size_t len, int64_t off);
  ssize_t (*write)(int fd, const void *buf, size_t len);
  int (*fsync)(int fd);
  int (*fdatasync)(int fd);
  int (*ftruncate)(int fd, int64_t len);
  int (*close)(int fd);
  int (*rename)(const char *from, const char *to);
  int (*unlink)(const char *path);
  int (*mkdir)(const char *path, int mode);
  int (*statvfs)(const char *path, tlc_io_space_t *out);
} tlc_io_t;

/* The table in force. Never NULL. */
extern const tlc_io_t *tlc_io;

/* The C library's functions. */
extern const tlc_io_t tlc_io_default;

/* Installs `io` (NULL: the defaults). The table must outlive its use. Not thread-safe: call
 * while no store is running. */
void tlc_io_set(const tlc_io_t *io);

/* Writes all of buf[0..len) at the file position: retries EINTR, continues after short
 * counts, retries EAGAIN a bounded number of times (regular files: it should not happen).
 * Returns 0, or -errno with *written set to the bytes that did reach the file. */
int tlc_io_write_all(int fd, const void *buf, size_t len, size_t *written);

/* Reads up to len bytes at `off`, retrying EINTR and short counts until len or end of file.
 * Returns the bytes read (< len only at end of file) or -errno. */
int64_t tlc_io_pread_all(int fd, void *buf, size_t len, int64_t off);

/* Opens the directory `path` and fsyncs it (makes renames and creations durable). 0 or -errno. */
int tlc_io_fsync_dir(const char *path);

/* Crash points (test builds only). The store calls tlc_crashpoint(name) at each point; it does
 * nothing unless a test binary installed tlc_crashpoint_hook, which only test binaries can:
 * tlc_crashpoint_env (crashpoint.c: raises SIGKILL if TLCAP_CRASHPOINT names `name` and this is
 * the hit it asks for) is compiled into tlcapd-test and store_driver, never into tlcapd. */
extern void (*tlc_crashpoint_hook)(const char *name);
static inline void tlc_crashpoint(const char *name) {
  if (tlc_crashpoint_hook != NULL)
    tlc_crashpoint_hook(name);
}
void tlc_crashpoint_env(const char *name);

/* Called by the storage policy's recovery thread before crash recovery when set (test binaries
 * only, as tlc_crashpoint_hook). */
extern void (*tlc_recovery_hook)(void);

/* Test binaries only (crashpoint.c): installs tlc_crashpoint_env and the I/O hooks the
 * environment asks for (TLCAP_TEST_WRITER_STALL_MS, TLCAP_TEST_DISK_BPS,
 * TLCAP_TEST_SEAL_DELAY_MS, TLCAP_TEST_RECOVERY_DELAY_MS). Call before the store starts. */
void tlc_io_test_hooks(void);

#endif
