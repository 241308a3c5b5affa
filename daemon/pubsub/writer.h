/* writer.h - the serving thread (writer.c), a part of the subscriber layer: it writes
 * subscribers' encoded messages to their sockets. The loop thread posts a job (a subscriber's
 * in-flight messages) and gets it back through done_async (then pubsub's written hook, sub.c);
 * between the two the job belongs to the thread, except `cancel`, which the loop sets under the
 * writer's lock. The writer's queues and flags are under its lock; pfd and pjob are the
 * thread's alone. The thread never touches a subscriber, a reference count or a queue.
 */
#ifndef TLC_PUBSUB_WRITER_H
#define TLC_PUBSUB_WRITER_H

#include "auth/tls.h"
#include "base/list.h"
#include "pubsub/msg.h"

#include <poll.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>
#include <uv.h>

/* A write handed to the serving thread: a subscriber's in-flight messages. Owned by the
 * writer from writer_post until it comes back through done_async; the loop thread touches
 * only `cancel` meanwhile (under the writer's lock). */
typedef struct wjob {
  /* on one queue at a time: the writer's in or done (under its lock), the thread's active
   * list, or the finished jobs done_async took */
  TAILQ_ENTRY(wjob) link;
  struct tlc__ps_sub *sub;
  int fd;
  int cancel;
  int status;  /* 0, or the UV_E* code the write failed with (UV_ECANCELED) */
  int partial; /* iov[cur] is partly written (the stream is inside a message) */
  size_t nbufs, cur;
  struct iovec iov[WRITE_MAX_BUFS];
  /* TLS: the writer encrypts iov[] (plaintext messages) into cbuf after the clen bytes already
   * there, under the session's lock, once (encrypted), then writes cbuf. cbuf is sized by the
   * loop thread beforehand (the writer never allocates). */
  tlc_tls_conn_t *tls;
  uv_mutex_t *tls_mu;
  uint8_t *cbuf;
  size_t clen, ccap;
  int encrypted;
} wjob_t;

/* The serving thread: writes encoded messages to subscriber sockets, so that the socket
 * copies (the cost that grows with the subscriber count) are not taken from ingest on the
 * loop thread. */
typedef struct writer {
  uv_thread_t thread;
  uv_mutex_t lock;
  int pipe_r, pipe_w;          /* wakes the writer */
  uv_async_t done_async;       /* wakes the loop */
  TAILQ_HEAD(wjob_q, wjob) in; /* posted, not yet taken by the thread */
  struct wjob_q done;          /* finished, not yet taken by done_async */
  int sleeping, woken, stop, cancels;
  size_t max_active;
  struct pollfd *pfd; /* writer thread only */
  wjob_t **pjob;
} writer_t;

int tlc__ps_job_encrypt(wjob_t *j);
void tlc__ps_writer_post(tlc_pubsub_t *ps, wjob_t *j);
void tlc__ps_writer_cancel(tlc_pubsub_t *ps, wjob_t *j);
void tlc__ps_writer_done_cb(uv_async_t *a);
void tlc__ps_writer_stop(tlc_pubsub_t *ps);
void tlc__ps_writer_start(tlc_pubsub_t *ps);

#endif
