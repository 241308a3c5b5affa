/* err.c - messages for tlcap's error codes.
 *
 * tlc_strerror() covers tlcap's own range from the X-macro table and a fixed table of the
 * negative errno values the daemon meets (libuv's UV_E* codes are -errno on Unix), so that a
 * caller can print any code a tlcap function returns. A fixed table instead of strerror()
 * keeps this file pure (no locale, no static buffer); other codes say "unknown error".
 */
#include "base/err.h"

#include <errno.h>
#include <stddef.h>

static const struct {
  int code;
  const char *name;
  const char *msg;
} errs[] = {
#define TLC_ERR_ROW_(n, m) { TLC_##n, "TLC_" #n, m },
  TLC_ERR_MAP(TLC_ERR_ROW_)
#undef TLC_ERR_ROW_
};

static const struct {
  int code;
  const char *name;
  const char *msg;
} sys[] = {
  { -ENOENT, "ENOENT", "no such file or directory" },
  { -EACCES, "EACCES", "permission denied" },
  { -EPERM, "EPERM", "operation not permitted" },
  { -EEXIST, "EEXIST", "file already exists" },
  { -ENOSPC, "ENOSPC", "no space left on device" },
  { -EIO, "EIO", "i/o error" },
  { -ENOMEM, "ENOMEM", "out of memory" },
  { -EINVAL, "EINVAL", "invalid argument" },
  { -EMFILE, "EMFILE", "too many open files" },
  { -ENFILE, "ENFILE", "file table overflow" },
  { -EADDRINUSE, "EADDRINUSE", "address already in use" },
  { -ECONNREFUSED, "ECONNREFUSED", "connection refused" },
  { -ECONNRESET, "ECONNRESET", "connection reset by peer" },
  { -EPIPE, "EPIPE", "broken pipe" },
  { -ETIMEDOUT, "ETIMEDOUT", "connection timed out" },
  { -EAGAIN, "EAGAIN", "resource temporarily unavailable" },
  { -EBADF, "EBADF", "bad file descriptor" },
  { -ENOTDIR, "ENOTDIR", "not a directory" },
  { -EISDIR, "EISDIR", "is a directory" },
  { -ELOOP, "ELOOP", "too many symbolic links" },
  { -EROFS, "EROFS", "read-only file system" },
  { -ENODEV, "ENODEV", "no such device" },
  { -ENXIO, "ENXIO", "no such device or address" },
  { -EBUSY, "EBUSY", "resource busy" },
  { -EDQUOT, "EDQUOT", "disk quota exceeded" },
  { -ENOTSOCK, "ENOTSOCK", "socket operation on non-socket" },
  { -EHOSTUNREACH, "EHOSTUNREACH", "host is unreachable" },
  { -ENETUNREACH, "ENETUNREACH", "network is unreachable" },
  { -EADDRNOTAVAIL, "EADDRNOTAVAIL", "address not available" },
  { -EFBIG, "EFBIG", "file too large" },
  { -ENAMETOOLONG, "ENAMETOOLONG", "name too long" },
  { -4095, "EOF", "end of file" }, /* UV_EOF */
};

const char *tlc_strerror(int err) {
  size_t i;
  for (i = 0; i < sizeof(errs) / sizeof(errs[0]); i++)
    if (errs[i].code == err)
      return errs[i].msg;
  for (i = 0; i < sizeof(sys) / sizeof(sys[0]); i++)
    if (sys[i].code == err)
      return sys[i].msg;
  return "unknown error";
}

const char *tlc_err_name(int err) {
  size_t i;
  for (i = 0; i < sizeof(errs) / sizeof(errs[0]); i++)
    if (errs[i].code == err)
      return errs[i].name;
  for (i = 0; i < sizeof(sys) / sizeof(sys[0]); i++)
    if (sys[i].code == err)
      return sys[i].name;
  return "EUNKNOWN";
}
