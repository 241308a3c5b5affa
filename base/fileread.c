/* fileread.c - the daemon's one whole-file reader (fileread.h).
 *
 * stdio in chunks that double up to the cap: no stat-then-read race, pipes and /proc files work,
 * and a file longer than the cap is refused without reading it all.
 */
#include "base/fileread.h"

#include "base/alloc.h"
#include "base/err.h"

#include <errno.h>
#include <stdio.h>

int tlc_file_read(const char *path, size_t max, char **data, size_t *len) {
  FILE *f = fopen(path, "rb");
  char *b = NULL;
  size_t n = 0, cap = 0;
  int rc = 0;
  if (f == NULL)
    return -errno;
  for (;;) {
    if (n == cap) {
      if (cap > max) {
        rc = TLC_ELIMIT;
        break;
      }
      char *nb = tlc_grow(b, &cap, n + 1, 1, 65536);
      if (nb == NULL) {
        rc = TLC_ENOMEM;
        break;
      }
      b = nb;
    }
    size_t got = fread(b + n, 1, cap - n, f);
    n += got;
    if (got == 0)
      break;
  }
  if (rc == 0 && ferror(f))
    rc = TLC_EIO;
  if (rc == 0 && n > max)
    rc = TLC_ELIMIT;
  fclose(f);
  if (rc == 0 && n == cap) {
    char *nb = tlc_grow(b, &cap, n + 1, 1, 65536);
    if (nb == NULL)
      rc = TLC_ENOMEM;
    else
      b = nb;
  }
  if (rc != 0) {
    tlc_free(b);
    return rc;
  }
  b[n] = '\0';
  *data = b;
  *len = n;
  return 0;
}
