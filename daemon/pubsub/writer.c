/* writer.c - the serving thread: writes encoded messages to subscriber sockets (writer.h; see the
 * design note in server.c).
 */
#define _GNU_SOURCE /* struct ucred (SO_PEERCRED) */
#include "pubsub/pubsub-int.h"

#include "base/alloc.h"
#include "base/err.h"
#include "proto/convert.h"
#include "proto/frame.h"
#include "tlc_version.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

/* ---- the serving thread ------------------------------------------------------------------ */

/* Writes what the socket takes of job j. Returns 0 when all of it is written, UV_EAGAIN when
 * the socket is full, or the failure (UV_EPIPE, UV_ECONNRESET, ...). Writer thread. */
/* TLS: encrypts the job's messages into its ciphertext buffer (once). Writer thread. */
int tlc__ps_job_encrypt(wjob_t *j) {
  size_t i;
  int r = 0;
  uv_mutex_lock(j->tls_mu);
  for (i = 0; i < j->nbufs && r == 0; i++)
    r = tlc_tls_conn_write(j->tls, j->iov[i].iov_base, j->iov[i].iov_len);
  if (r == 0) /* with what the loop's reads produced meanwhile (alerts), in order */
    j->clen += tlc_tls_conn_take(j->tls, j->cbuf + j->clen, j->ccap - j->clen);
  uv_mutex_unlock(j->tls_mu);
  j->encrypted = 1;
  if (r < 0)
    return UV_EPROTO;
  j->iov[0].iov_base = j->cbuf;
  j->iov[0].iov_len = j->clen;
  j->nbufs = j->clen > 0 ? 1 : 0;
  j->cur = 0;
  return 0;
}

static int job_write(wjob_t *j) {
  if (j->tls != NULL && !j->encrypted) {
    int r = tlc__ps_job_encrypt(j);
    if (r < 0)
      return r;
  }
  while (j->cur < j->nbufs) {
    struct msghdr mh;
    ssize_t n;
    memset(&mh, 0, sizeof(mh));
    mh.msg_iov = &j->iov[j->cur];
    mh.msg_iovlen = j->nbufs - j->cur;
    n = sendmsg(j->fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK)
        return UV_EAGAIN;
      return uv_translate_sys_error(errno);
    }
    while (n > 0 && j->cur < j->nbufs) {
      if ((size_t)n >= j->iov[j->cur].iov_len) {
        n -= (ssize_t)j->iov[j->cur].iov_len;
        j->cur++;
        j->partial = 0;
      } else {
        j->iov[j->cur].iov_base = (char *)j->iov[j->cur].iov_base + n;
        j->iov[j->cur].iov_len -= (size_t)n;
        j->partial = 1;
        n = 0;
      }
    }
  }
  return 0;
}

/* The writer thread: takes jobs, writes them as far as their sockets take them, waits in
 * poll() for sockets to drain (and for new jobs or cancellations on its pipe), and hands
 * finished jobs back to the loop through done_async. Touches only the jobs and the writer's
 * queues; never a msg_t's reference count, a subscriber, or libuv (except uv_async_send). */
static void writer_main(void *arg) {
  writer_t *w = arg;
  struct wjob_q active = TAILQ_HEAD_INITIALIZER(active);
  for (;;) {
    struct wjob_q done = TAILQ_HEAD_INITIALIZER(done);
    wjob_t *j, *tmp;
    size_t np = 0;
    int stop;
    uv_mutex_lock(&w->lock);
    /* new jobs after the waiting ones; cancellations are read under the lock */
    TAILQ_CONCAT(&active, &w->in, link);
    stop = w->stop;
    w->cancels = 0;
    TAILQ_FOREACH_SAFE(j, &active, link, tmp) {
      if (j->cancel) {
        TAILQ_REMOVE(&active, j, link);
        j->status = UV_ECANCELED;
        TAILQ_INSERT_TAIL(&done, j, link);
      }
    }
    uv_mutex_unlock(&w->lock);
    TAILQ_FOREACH_SAFE(j, &active, link, tmp) {
      int r = job_write(j);
      if (r == UV_EAGAIN)
        continue;
      TAILQ_REMOVE(&active, j, link);
      j->status = r;
      TAILQ_INSERT_TAIL(&done, j, link);
    }
    if (!TAILQ_EMPTY(&done)) {
      uv_mutex_lock(&w->lock);
      TAILQ_CONCAT(&w->done, &done, link);
      uv_mutex_unlock(&w->lock);
      uv_async_send(&w->done_async);
    }
    if (stop && TAILQ_EMPTY(&active))
      break;
    /* sleep until a socket drains, a job comes or one is cancelled */
    w->pfd[np].fd = w->pipe_r;
    w->pfd[np].events = POLLIN;
    w->pfd[np].revents = 0;
    np++;
    TAILQ_FOREACH(j, &active, link) {
      if (np >= w->max_active)
        break;
      w->pfd[np].fd = j->fd;
      w->pfd[np].events = POLLOUT;
      w->pfd[np].revents = 0;
      np++;
    }
    uv_mutex_lock(&w->lock);
    if (TAILQ_EMPTY(&w->in) && w->cancels == 0 && !w->stop) {
      w->sleeping = 1;
      uv_mutex_unlock(&w->lock);
      (void)poll(w->pfd, (nfds_t)np, -1);
      uv_mutex_lock(&w->lock);
      w->sleeping = 0;
      if (w->woken) {
        char b[64];
        w->woken = 0;
        while (read(w->pipe_r, b, sizeof(b)) > 0)
          ;
      }
    }
    uv_mutex_unlock(&w->lock);
  }
}

/* Wakes the writer if it sleeps (at most one pipe write per sleep). Under the lock. */
static void writer_wake_locked(writer_t *w) {
  if (w->sleeping && !w->woken) {
    char c = 1;
    w->woken = 1;
    if (write(w->pipe_w, &c, 1) < 0) {
      /* the pipe is non-blocking and holds one byte per sleep: it cannot be full */
    }
  }
}

/* Hands job j to the writer and wakes it if it sleeps (one pipe write per sleep, however
 * many jobs follow while it works). Loop thread. */
void tlc__ps_writer_post(tlc_pubsub_t *ps, wjob_t *j) {
  writer_t *w = ps->sb.wr;
  j->cancel = 0;
  j->status = 0;
  ps->sb.jobs_inflight++;
  uv_mutex_lock(&w->lock);
  TAILQ_INSERT_TAIL(&w->in, j, link);
  writer_wake_locked(w);
  uv_mutex_unlock(&w->lock);
}

void tlc__ps_writer_cancel(tlc_pubsub_t *ps, wjob_t *j) {
  writer_t *w = ps->sb.wr;
  uv_mutex_lock(&w->lock);
  j->cancel = 1;
  w->cancels++;
  writer_wake_locked(w);
  uv_mutex_unlock(&w->lock);
}

void tlc__ps_writer_done_cb(uv_async_t *a) {
  tlc_pubsub_t *ps = a->data;
  struct wjob_q done = TAILQ_HEAD_INITIALIZER(done);
  wjob_t *j, *next;
  uv_mutex_lock(&ps->sb.wr->lock);
  TAILQ_CONCAT(&done, &ps->sb.wr->done, link);
  uv_mutex_unlock(&ps->sb.wr->lock);
  /* written() may post the job again (onto the writer's in queue): its successor is read first */
  TAILQ_FOREACH_SAFE(j, &done, link, next) {
    ps->sb.jobs_inflight--;
    ps->up.written(j->sub, j->status);
  }
  if (ps->closing && ps->sb.jobs_inflight == 0)
    tlc__ps_writer_stop(ps);
}

static void writer_closed_cb(uv_handle_t *h) {
  tlc_pubsub_t *ps = h->data;
  writer_t *w = (writer_t *)(void *)((char *)h - offsetof(writer_t, done_async));
  if (ps->sb.wr == w)
    ps->sb.wr = NULL;
  uv_mutex_destroy(&w->lock);
  tlc_free(w->pfd);
  tlc_free(w);
  ps->up.handle_closed(ps);
}

/* Stops and joins the thread (every job has come back: it exits at once) and closes the
 * async handle; the writer is freed in its close callback. */
void tlc__ps_writer_stop(tlc_pubsub_t *ps) {
  writer_t *w = ps->sb.wr;
  if (w == NULL || w->stop)
    return;
  uv_mutex_lock(&w->lock);
  w->stop = 1; /* seen before it sleeps again; the byte wakes it if it sleeps now */
  if (write(w->pipe_w, "", 1) < 0) {
    /* non-blocking pipe already holding a byte: it will wake anyway */
  }
  uv_mutex_unlock(&w->lock);
  uv_thread_join(&w->thread);
  close(w->pipe_r);
  close(w->pipe_w);
  uv_close((uv_handle_t *)&w->done_async, writer_closed_cb);
}

/* Starts the serving thread (first real subscriber). On failure subscribers are written from
 * the loop thread with uv_write: slower under load, otherwise the same. */
void tlc__ps_writer_start(tlc_pubsub_t *ps) {
  writer_t *w;
  int fds[2];
  if (ps->sb.wr != NULL || ps->sb.writer_failed || ps->o.write_on_loop || ps->closing)
    return;
  ps->sb.writer_failed = 1; /* until it succeeds: one attempt */
  w = tlc_calloc(1, sizeof(*w));
  if (w == NULL)
    return;
  TAILQ_INIT(&w->in);
  TAILQ_INIT(&w->done);
  w->max_active = ps->o.max_subscribers + MAX_REJECTING + 1;
  w->pfd = tlc_calloc(w->max_active, sizeof(*w->pfd));
  if (w->pfd == NULL)
    goto fail_pfd;
  if (pipe(fds) != 0)
    goto fail_pfd;
  w->pipe_r = fds[0];
  w->pipe_w = fds[1];
  if (fcntl(fds[0], F_SETFL, O_NONBLOCK) != 0 || fcntl(fds[1], F_SETFL, O_NONBLOCK) != 0 ||
      fcntl(fds[0], F_SETFD, FD_CLOEXEC) != 0 || fcntl(fds[1], F_SETFD, FD_CLOEXEC) != 0)
    goto fail_pipe;
  if (uv_mutex_init(&w->lock) != 0)
    goto fail_pipe;
  if (uv_async_init(ps->loop, &w->done_async, tlc__ps_writer_done_cb) != 0)
    goto fail_mutex;
  w->done_async.data = ps;
  ps->open_handles++;
  if (uv_thread_create(&w->thread, writer_main, w) != 0) {
    uv_close((uv_handle_t *)&w->done_async, writer_closed_cb);
    close(w->pipe_r);
    close(w->pipe_w);
    tlc__ps_logf_(ps, TLC_PS_LOG_WARN,
                  "serving thread: cannot start; writing from the loop thread");
    return;
  }
  ps->sb.wr = w;
  ps->sb.writer_failed = 0;
  return;
fail_mutex:
  uv_mutex_destroy(&w->lock);
fail_pipe:
  close(fds[0]);
  close(fds[1]);
fail_pfd:
  tlc_free(w->pfd);
  tlc_free(w);
  tlc__ps_logf_(ps, TLC_PS_LOG_WARN, "serving thread: cannot start; writing from the loop thread");
}
