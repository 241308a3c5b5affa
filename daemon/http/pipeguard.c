/* pipeguard.c - libwebsockets 4.1's event pipe, closed twice, made harmless.
 *
 * On a foreign libuv loop, lws 4.1's lws_context_destroy closes its event pipe (an eventfd) at
 * once (lws_destroy_event_pipe: lws_plat_pipe_close) and closes the same number again when the
 * pipe's libuv handle has finished closing (__lws_close_free_wsi_final), later in that loop turn.
 * Upstream rewrote this in 4.2; Debian 12 ships 4.1.6. In between, the number is free: a file that
 * another thread opened meanwhile got it and was closed behind its back. At shutdown the pool
 * threads write the stats dump and the last checkpoints, and storage seals its segments: CI saw a
 * stats dump renamed into place empty (its bytes written into a descriptor already closed) and a
 * checkpoint's directory closed before its fsync.
 *
 * The guard:
 *   - arm (before lws_create_context): TLC__HTTP_PIPE_HOLES descriptors of /dev/null are opened,
 *     taking the lowest free numbers, and the eventfds open now are listed (/proc/self/fd);
 *   - found (after it): the one eventfd that was not there before is lws's pipe; when there is
 *     not exactly one, nothing is guarded (the debug log says so) and the holes are closed;
 *   - release (just before lws_context_destroy): the holes are closed, so that a thread opening
 *     a file while lws closes its connections gets one of those numbers, lower than the pipe's
 *     (the kernel gives the lowest free number);
 *   - retake (just after it): the pipe's number is taken again with /dev/null (F_DUPFD at that
 *     number, which gives exactly that number only when it is free); lws's second close closes
 *     that descriptor and nothing of anyone else's.
 * A version of lws that closes the pipe once, at either point, is unaffected: retake finds the
 * number still open (and takes nothing), or its /dev/null stays open until exit.
 *
 * Loop thread only (lws_create_context and lws_context_destroy run there).
 */
#include "http/server-int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char eventfd_link[] = "anon_inode:[eventfd]";

/* 1 when `name` (relative to directory `dir`, or AT_FDCWD) links to an eventfd. */
static int is_eventfd(int dir, const char *name) {
  char link[sizeof(eventfd_link) + 1];
  ssize_t n = readlinkat(dir, name, link, sizeof(link));
  return n == (ssize_t)sizeof(eventfd_link) - 1 && memcmp(link, eventfd_link, (size_t)n) == 0;
}

/* Calls fn(ud, fd) for each eventfd open in this process (/proc/self/fd). 0 or -errno. */
static int each_eventfd(void (*fn)(void *ud, int fd), void *ud) {
  DIR *dir = opendir("/proc/self/fd");
  struct dirent *e;
  if (dir == NULL)
    return -errno;
  while ((e = readdir(dir)) != NULL) {
    char *end;
    long fd = strtol(e->d_name, &end, 10);
    if (*end != '\0' || end == e->d_name || fd == dirfd(dir))
      continue;
    if (is_eventfd(dirfd(dir), e->d_name))
      fn(ud, (int)fd);
  }
  closedir(dir);
  return 0;
}

static void note_before(void *ud, int fd) {
  tlc__http_pipeguard_t *g = ud;
  if (g->nbefore < TLC__HTTP_PIPE_SEEN)
    g->before[g->nbefore] = fd;
  g->nbefore++; /* past the array: counted, and nothing is guarded (found) */
}

static void note_after(void *ud, int fd) {
  tlc__http_pipeguard_t *g = ud;
  size_t i;
  for (i = 0; i < g->nbefore && i < TLC__HTTP_PIPE_SEEN; i++)
    if (g->before[i] == fd)
      return;
  g->nnew++;
  g->fd = fd;
}

static void close_holes(tlc__http_pipeguard_t *g) {
  while (g->nholes > 0)
    (void)close(g->holes[--g->nholes]);
}

void tlc__http_pipeguard_arm(tlc__http_pipeguard_t *g) {
  memset(g, 0, sizeof(*g));
  g->fd = -1;
  for (int i = 0; i < TLC__HTTP_PIPE_HOLES; i++) {
    int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
      break; /* out of descriptors: fewer holes */
    g->holes[g->nholes++] = fd;
  }
  if (each_eventfd(note_before, g) != 0)
    g->nbefore = TLC__HTTP_PIPE_SEEN + 1; /* no listing: nothing to compare with */
}

const char *tlc__http_pipeguard_found(tlc__http_pipeguard_t *g, int created) {
  const char *why = NULL;
  g->fd = -1;
  g->nnew = 0;
  if (!created)
    why = "no context";
  else if (g->nbefore > TLC__HTTP_PIPE_SEEN)
    why = "the eventfds open before it could not all be listed";
  else if (each_eventfd(note_after, g) != 0)
    why = "/proc/self/fd could not be read";
  else if (g->nnew != 1)
    why = g->nnew == 0 ? "no new eventfd" : "several new eventfds";
  if (why != NULL) {
    g->fd = -1; /* note_after may have seen several */
    close_holes(g);
  }
  return why;
}

void tlc__http_pipeguard_release(tlc__http_pipeguard_t *g) {
  close_holes(g);
}

int tlc__http_pipeguard_retake(tlc__http_pipeguard_t *g) {
  char path[32];
  int fd = g->fd, nul, got;
  g->fd = -1;
  if (fd < 0)
    return 0;
  if ((nul = open("/dev/null", O_RDONLY | O_CLOEXEC)) < 0)
    return -1;
  if (nul == fd)
    return 1; /* it was the lowest free number: taken; lws's second close closes it */
  got = fcntl(nul, F_DUPFD_CLOEXEC, fd);
  (void)close(nul);
  if (got == fd)
    return 1;
  if (got >= 0)
    (void)close(got);
  /* The number is in use: still lws's pipe (it closes it itself), or someone else's. */
  snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
  return is_eventfd(AT_FDCWD, path) ? 0 : -1;
}
