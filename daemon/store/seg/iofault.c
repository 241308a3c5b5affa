/* iofault.c - the default I/O table, the retrying write/read helpers and the crash points.
 *
 * Design: one process-wide pointer to a table of functions (tlc_io). The defaults are thin
 * wrappers returning -errno, so every caller handles one error convention. Loops are bounded:
 * EAGAIN on a regular file is retried at most TLC_IO_EAGAIN_MAX times (it does not happen on
 * Linux for regular files; the shim injects it), EINTR is retried as long as it comes (each
 * EINTR is a signal delivered, which is finite), a zero-byte write counts as EAGAIN.
 *
 * Crash points: only a hook pointer here (NULL in tlcapd); the test binaries install
 * crashpoint.c's tlc_crashpoint_env.
 */
#include "store/seg/iofault.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#define TLC_IO_EAGAIN_MAX 1000

static int d_open(const char *path, int flags, int mode) {
  int fd = open(path, flags, mode);
  return fd < 0 ? -errno : fd;
}
static ssize_t d_read(int fd, void *buf, size_t len) {
  ssize_t n = read(fd, buf, len);
  return n < 0 ? -errno : n;
}
static ssize_t d_pread(int fd, void *buf, size_t len, int64_t off) {
  ssize_t n = pread(fd, buf, len, (off_t)off);
  return n < 0 ? -errno : n;
}
static ssize_t d_write(int fd, const void *buf, size_t len) {
  ssize_t n = write(fd, buf, len);
  return n < 0 ? -errno : n;
}
static int d_fsync(int fd) {
  return fsync(fd) < 0 ? -errno : 0;
}
static int d_fdatasync(int fd) {
  return fdatasync(fd) < 0 ? -errno : 0;
}
static int d_ftruncate(int fd, int64_t len) {
  return ftruncate(fd, (off_t)len) < 0 ? -errno : 0;
}
static int d_close(int fd) {
  return close(fd) < 0 ? -errno : 0;
}
static int d_rename(const char *a, const char *b) {
  return rename(a, b) < 0 ? -errno : 0;
}
static int d_unlink(const char *p) {
  return unlink(p) < 0 ? -errno : 0;
}
static int d_mkdir(const char *p, int mode) {
  return mkdir(p, (mode_t)mode) < 0 ? -errno : 0;
}
static int d_statvfs(const char *p, tlc_io_space_t *out) {
  struct statvfs s;
  if (statvfs(p, &s) < 0)
    return -errno;
  out->avail_bytes = (uint64_t)s.f_bavail * s.f_frsize;
  out->total_bytes = (uint64_t)s.f_blocks * s.f_frsize;
  out->avail_inodes = s.f_files == 0 ? UINT64_MAX : (uint64_t)s.f_favail;
  return 0;
}

const tlc_io_t tlc_io_default = { d_open,      d_read,  d_pread,  d_write,  d_fsync, d_fdatasync,
                                  d_ftruncate, d_close, d_rename, d_unlink, d_mkdir, d_statvfs };

const tlc_io_t *tlc_io = &tlc_io_default;

void tlc_io_set(const tlc_io_t *io) {
  tlc_io = io ? io : &tlc_io_default;
}

int tlc_io_write_all(int fd, const void *buf, size_t len, size_t *written) {
  const uint8_t *p = buf;
  size_t done = 0;
  unsigned again = 0;
  while (done < len) {
    ssize_t n = tlc_io->write(fd, p + done, len - done);
    if (n == -EINTR)
      continue;
    if (n == -EAGAIN || n == 0) {
      if (++again > TLC_IO_EAGAIN_MAX) {
        *written = done;
        return -EAGAIN;
      }
      continue;
    }
    if (n < 0) {
      *written = done;
      return (int)n;
    }
    again = 0;
    done += (size_t)n;
  }
  *written = done;
  return 0;
}

int64_t tlc_io_pread_all(int fd, void *buf, size_t len, int64_t off) {
  uint8_t *p = buf;
  size_t done = 0;
  unsigned again = 0;
  while (done < len) {
    ssize_t n = tlc_io->pread(fd, p + done, len - done, off + (int64_t)done);
    if (n == -EINTR)
      continue;
    if (n == -EAGAIN) {
      if (++again > TLC_IO_EAGAIN_MAX)
        return -EAGAIN;
      continue;
    }
    if (n < 0)
      return n;
    if (n == 0)
      break;
    done += (size_t)n;
  }
  return (int64_t)done;
}

int tlc_io_fsync_dir(const char *path) {
  int fd = tlc_io->open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0);
  int rc;
  if (fd < 0)
    return fd;
  rc = tlc_io->fsync(fd);
  tlc_io->close(fd);
  return rc;
}

void (*tlc_crashpoint_hook)(const char *name); /* NULL: crash points do nothing */
void (*tlc_recovery_hook)(void);               /* NULL: none */
