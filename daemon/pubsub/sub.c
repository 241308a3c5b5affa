/* sub.c - a subscriber: the connection's life (closing, reading, TLS), its queues, the writes
 * handed to the socket or the serving thread, and the event fan-out (sub.h; see the design note
 * in server.c).
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

/* ---- a connection: its life, reading and TLS --------------------------------------------- */

static void hello_timeout_cb(uv_timer_t *t);

void tlc__ps_sub_free(tlc__ps_sub_t *s) {
  tlc_pubsub_t *ps = s->ps;
  tlc__ps_sub_drop_queued(s);
  s->ps->up.release(s);
  tlc_free(s->subs);
  tlc_free(s->ring);
  tlc_free(s->stall_b);
  tlc_free(s->stall_e);
  tlc_free(s->gs.target);
  tlc_frame_dec_fini(&s->dec);
  if (s->tls != NULL) {
    tlc_tls_conn_free(s->tls);
    uv_mutex_destroy(&s->tls_mu);
  }
  tlc_free(s->tout);
  tlc_free(s->tjob);
  tlc_free(s);
  (void)ps;
}

void tlc__ps_sub_unlink(tlc__ps_sub_t *s) {
  tlc_pubsub_t *ps = s->ps;
  if (s->link.le_prev != NULL) {
    LIST_REMOVE(s, link);
    s->link.le_prev = NULL;
  }
  ps->sb.nsubs--;
  tlc_peers_release(&ps->sb.peers, s->peer_slot);
  s->peer_slot = TLC_PEERS_NONE;
  ps->sb.evsubs_dirty = 1; /* evsubs never holds an unlinked subscriber */
  if (s->rejecting)
    ps->sb.nrejecting--;
  ps->st.subscribers = ps->sb.nsubs;
}

void tlc__ps_sub_closed_cb(uv_handle_t *h) {
  tlc__ps_sub_t *s = h->data;
  tlc_pubsub_t *ps = s->ps;
  if (--s->nhandles == 0)
    tlc__ps_sub_free(s);
  ps->up.handle_closed(ps);
}

/* Closes the handles now (pending writes get UV_ECANCELED; memory goes in the close cb). */
void tlc__ps_sub_close_now(tlc__ps_sub_t *s) {
  if (s->closed)
    return;
  s->closed = 1;
  s->closing = 1;
  tlc__ps_sub_unlink(s);
  /* Subscriptions go now, so feeds and event fan-out never see a closed subscriber. */
  tlc__ps_sub_drop_queued(s);
  s->ps->up.release(s);
  if (s->detached)
    return;
  if (s->in_writer) {
    /* The serving thread may be inside a write on this socket: the stream (and its fd) is
     * closed when the job comes back (tlc__ps_write_done), which cancellation makes prompt. */
    s->close_deferred = 1;
    tlc__ps_writer_cancel(s->ps, &s->job);
  } else {
    uv_close(&s->h.handle, tlc__ps_sub_closed_cb);
  }
  uv_close((uv_handle_t *)&s->timer, tlc__ps_sub_closed_cb);
}

static void close_timer_cb(uv_timer_t *t) {
  tlc__ps_sub_close_now(t->data);
}

/* Closes from the next loop turn: safe from any callback of this subscriber. */
void tlc__ps_sub_close_soon(tlc__ps_sub_t *s) {
  s->closing = 1;
  if (s->closed)
    return;
  if (s->detached) {
    if (!s->ps->fd.ticking) /* else at the end of the tick pass, which walks the subscriptions */
      tlc__ps_sub_close_now(s);
    return;
  }
  uv_timer_stop(&s->timer);
  uv_timer_start(&s->timer, close_timer_cb, 0, 0);
}

/* Fatal error: drop what is queued, queue the error, close once it is written (or after the
 * grace time if the peer does not take it). Never frees anything synchronously. */
void tlc__ps_sub_fail(tlc__ps_sub_t *s, int code, const char *text, uint64_t *counter) {
  tlc_pubsub_t *ps = s->ps;
  if (s->closing)
    return;
  if (counter != NULL)
    (*counter)++;
  tlc__ps_logf_(ps, TLC_PS_LOG_NOTICE, "sub#%llu %s: closing: %s", (unsigned long long)s->id,
                s->peer, text);
  s->closing = 1;
  tlc__ps_sub_drop_queued(s);
  s->close_when_flushed = 1;
  if (!s->detached) {
    uv_read_stop(&s->h.stream);
    uv_timer_stop(&s->timer);
    uv_timer_start(&s->timer, close_timer_cb, ps->o.close_grace_ms, 0);
  }
  {
    /* bypass tlc__ps_sub_ctl's limit check: the error goes whatever the queue holds */
    msg_t *m = tlc__ps_error_encode(ps, 0, code, text, 1, 0);
    if (m != NULL) {
      ctl_node_t *n = tlc_malloc(sizeof(*n));
      if (n != NULL) {
        n->m = m;
        STAILQ_INSERT_TAIL(&s->ctl, n, link); /* the queue was just emptied: the only one */
        tlc__ps_queued_add(s, m->len);
      } else {
        tlc__ps_msg_unref(m);
      }
    }
  }
  tlc__ps_sub_kick(s);
}

static void alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  tlc__ps_sub_t *s = h->data;
  (void)suggested;
  if (s->ps->sb.rbuf_busy) {
    buf->base = NULL;
    buf->len = 0;
    return;
  }
  s->ps->sb.rbuf_busy = 1;
  buf->base = s->ps->sb.rbuf;
  buf->len = READ_BUF;
}

/* TLS: a handshake that failed (not TLS, no common version, garbage) or stalled. The peer is
 * told nothing (not even the alert OpenSSL prepared: a plain-text client must not get bytes
 * that look like an answer); the connection is closed. */
static void tls_drop(tlc__ps_sub_t *s, const char *why) {
  tlc_pubsub_t *ps = s->ps;
  if (s->closing)
    return;
  ps->st.closed_tls++;
  tlc__ps_logf_(ps, TLC_PS_LOG_NOTICE, "sub#%llu %s: closing: TLS handshake: %s",
                (unsigned long long)s->id, s->peer, why);
  uv_read_stop(&s->h.stream);
  tlc__ps_sub_close_soon(s);
}

static void tls_timeout_cb(uv_timer_t *t) {
  tlc__ps_sub_t *s = t->data;
  char why[64];
  snprintf(why, sizeof(why), "not complete after %llu ms",
           (unsigned long long)s->ps->o.tls_handshake_ms);
  tls_drop(s, why);
}

/* TLS: received ciphertext -> handshake, then decrypted bytes into tlc__ps_sub_input; whatever the
 * session has to send (handshake, alerts) goes out through tlc__ps_sub_kick. */
static void tls_input(tlc__ps_sub_t *s, const uint8_t *p, size_t n) {
  tlc_pubsub_t *ps = s->ps;
  char why[160];
  int r;
  uv_mutex_lock(&s->tls_mu); /* the serving thread may be encrypting for this session */
  r = tlc_tls_conn_feed(s->tls, p, n);
  uv_mutex_unlock(&s->tls_mu);
  if (r < 0) {
    tls_drop(s, "out of memory");
    return;
  }
  if (!s->tls_ready) {
    uv_mutex_lock(&s->tls_mu);
    r = tlc_tls_conn_handshake(s->tls, why, sizeof(why));
    uv_mutex_unlock(&s->tls_mu);
    if (r < 0) {
      tls_drop(s, why);
      return;
    }
    if (r == 0) {
      tlc__ps_sub_kick(s);
      return;
    }
    s->tls_ready = 1;
    tlc__ps_logf_(ps, TLC_PS_LOG_INFO, "sub#%llu %s: %s", (unsigned long long)s->id, s->peer,
                  tlc_tls_conn_version(s->tls));
    if (!s->closing) {
      /* the handshake deadline is over; Hello's starts */
      uv_timer_stop(&s->timer);
      uv_timer_start(&s->timer, hello_timeout_cb, ps->o.hello_timeout_ms, 0);
    }
  }
  while (!s->closing) {
    int k;
    uv_mutex_lock(&s->tls_mu);
    k = tlc_tls_conn_read(s->tls, ps->sb.tbuf, sizeof(ps->sb.tbuf));
    uv_mutex_unlock(&s->tls_mu); /* not held in tlc__ps_sub_input: its replies take it again */
    if (k == 0)
      break;
    if (k < 0) {
      ps->st.closed_peer++;
      tlc__ps_logf_(ps, TLC_PS_LOG_INFO, "sub#%llu %s: disconnected (TLS session ended)",
                    (unsigned long long)s->id, s->peer);
      uv_read_stop(&s->h.stream);
      tlc__ps_sub_close_soon(s);
      return;
    }
    ps->up.input(s, ps->sb.tbuf, (size_t)k);
  }
  tlc__ps_sub_kick(s);
}

static void read_cb(uv_stream_t *st, ssize_t n, const uv_buf_t *buf) {
  tlc__ps_sub_t *s = st->data;
  tlc_pubsub_t *ps = s->ps;
  if (buf->base == ps->sb.rbuf)
    ps->sb.rbuf_busy = 0;
  if (n > 0) {
    if (s->tls != NULL)
      tls_input(s, (const uint8_t *)buf->base, (size_t)n);
    else
      ps->up.input(s, (const uint8_t *)buf->base, (size_t)n);
    return;
  }
  if (n < 0) {
    if (!s->closing) {
      ps->st.closed_peer++;
      tlc__ps_logf_(ps, TLC_PS_LOG_INFO, "sub#%llu %s: disconnected (%s)",
                    (unsigned long long)s->id, s->peer, uv_strerror((int)n));
    }
    uv_read_stop(st);
    tlc__ps_sub_close_soon(s);
  }
}

static void hello_timeout_cb(uv_timer_t *t) {
  tlc__ps_sub_t *s = t->data;
  tlc__ps_sub_fail(s, TLCAP__ERROR_CODE__ERR_TIMEOUT, "no Hello before the deadline",
                   &s->ps->st.closed_auth);
}

/* Starts reading an accepted connection (server.c). 0 or a libuv error. */
int tlc__ps_sub_read_start(tlc__ps_sub_t *s) {
  return uv_read_start(&s->h.stream, alloc_cb, read_cb);
}

/* Starts an accepted connection's first deadline: its TLS handshake's (at most Hello's), or
 * Hello's. */
void tlc__ps_sub_deadline_start(tlc__ps_sub_t *s) {
  tlc_pubsub_t *ps = s->ps;
  if (s->tls != NULL)
    uv_timer_start(&s->timer, tls_timeout_cb,
                   ps->o.tls_handshake_ms < ps->o.hello_timeout_ms ? ps->o.tls_handshake_ms
                                                                   : ps->o.hello_timeout_ms,
                   0);
  else
    uv_timer_start(&s->timer, hello_timeout_cb, ps->o.hello_timeout_ms, 0);
}

tlc__ps_sub_t *tlc__ps_sub_alloc(tlc_pubsub_t *ps) {
  tlc__ps_sub_t *s = tlc_calloc(1, sizeof(*s));
  if (s == NULL)
    return NULL;
  s->ps = ps;
  STAILQ_INIT(&s->ctl);
  s->id = ++ps->sb.next_sub_id;
  s->peer_slot = TLC_PEERS_NONE;
  s->ring = tlc_calloc(ps->o.max_batches, sizeof(msg_t *));
  s->subs = tlc_calloc(ps->o.max_subscriptions, sizeof(subn_t *));
  if (s->ring == NULL || s->subs == NULL) {
    tlc_free(s->ring);
    tlc_free(s->subs);
    tlc_free(s);
    return NULL;
  }
  tlc_frame_dec_init(&s->dec, ps->o.max_preauth);
  return s;
}

void tlc__ps_sub_link(tlc_pubsub_t *ps, tlc__ps_sub_t *s) {
  LIST_INSERT_HEAD(&ps->sb.subs, s, link);
  ps->sb.nsubs++;
  ps->st.subscribers = ps->sb.nsubs;
}

/* Tries once to write "the daemon is stopping" to a subscriber (never waits). */
void tlc__ps_shutdown_note(tlc__ps_sub_t *s) {
  msg_t *m;
  if (s->tls != NULL) {
    /* TLS: encrypted after whatever the session already produced, sent in one try. */
    if (s->tls_ready && s->h.stream.write_queue_size == 0 &&
        (m = tlc__ps_error_encode(s->ps, 0, TLCAP__ERROR_CODE__ERR_SHUTDOWN,
                                  "the daemon is stopping", 1, 0)) != NULL) {
      int w;
      uv_mutex_lock(&s->tls_mu);
      w = tlc_tls_conn_write(s->tls, m->data, m->len);
      uv_mutex_unlock(&s->tls_mu);
      if (w == 0 && tlc__ps_tls_collect(s) == 0 && s->tout_len > 0) {
        /* Records carry sequence numbers: those a cancelled job made and did not send go
         * first (all of them or none: the job is not partly written here). */
        uv_buf_t b[2];
        unsigned nb = 0;
        if (s->job.tls != NULL && s->job.encrypted && s->job.cur < s->job.nbufs)
          b[nb++] = uv_buf_init((char *)s->job.cbuf, (unsigned)s->job.clen);
        b[nb++] = uv_buf_init((char *)s->tout, (unsigned)s->tout_len);
        (void)uv_try_write(&s->h.stream, b, nb);
      }
      s->tout_len = 0;
      tlc__ps_msg_unref(m);
    }
    return;
  }
  /* Safe to append only when libuv holds no unwritten bytes of an earlier message (a write
   * whose bytes all went out may still await its callback). */
  if (s->h.stream.write_queue_size == 0 &&
      (m = tlc__ps_error_encode(s->ps, 0, TLCAP__ERROR_CODE__ERR_SHUTDOWN, "the daemon is stopping",
                                1, 0)) != NULL) {
    uv_buf_t b = uv_buf_init((char *)m->data, (unsigned)m->len);
    (void)uv_try_write(&s->h.stream, &b, 1);
    tlc__ps_msg_unref(m);
  }
}

/* ---- subscriber queues ------------------------------------------------------------------- */

static void ev_unstall(tlc__ps_sub_t *s);

void tlc__ps_queued_add(tlc__ps_sub_t *s, size_t n) {
  s->queued += n;
  s->ps->st.queued_bytes += n;
}

void tlc__ps_queued_sub(tlc__ps_sub_t *s, size_t n) {
  s->queued -= n;
  s->ps->st.queued_bytes -= n;
}

/* Applies the output limits after queued grew. Returns 1 if the subscriber is now closing. */
int tlc__ps_limits_check(tlc__ps_sub_t *s) {
  tlc_pubsub_t *ps = s->ps;
  char why[128];
  if (s->closing)
    return 1;
  if (s->queued > ps->o.obuf_hard) {
    snprintf(why, sizeof(why), "output buffer above the hard limit (%zu bytes)", ps->o.obuf_hard);
    tlc__ps_sub_fail(s, TLCAP__ERROR_CODE__ERR_OUTPUT_LIMIT, why, &ps->st.closed_hard);
    return 1;
  }
  if (s->queued > ps->o.obuf_soft) {
    uint64_t now;
    if (s->soft_since == 0) /* the loop's cached time may be an iteration old: the soft limit's
                               clock starts now, not then, so it never closes early */
      uv_update_time(ps->loop);
    now = tlc__ps_now_ms(ps) + 1; /* + 1: 0 means "below" */
    if (s->soft_since == 0)
      s->soft_since = now;
    else if (now - s->soft_since > ps->o.obuf_soft_ms) {
      snprintf(why, sizeof(why), "output buffer above the soft limit (%zu bytes) for %llu ms",
               ps->o.obuf_soft, (unsigned long long)ps->o.obuf_soft_ms);
      tlc__ps_sub_fail(s, TLCAP__ERROR_CODE__ERR_OUTPUT_LIMIT, why, &ps->st.closed_soft);
      return 1;
    }
  } else {
    s->soft_since = 0;
  }
  return 0;
}

/* Queues a control message (takes a reference). Never dropped. */
void tlc__ps_sub_ctl(tlc__ps_sub_t *s, msg_t *m) {
  ctl_node_t *n;
  if (s->closed)
    return;
  n = tlc_malloc(sizeof(*n));
  if (n == NULL) {
    /* Cannot keep the promise "never dropped": close the connection rather than lie. */
    tlc__ps_sub_close_soon(s);
    return;
  }
  n->m = tlc__ps_msg_ref(m);
  STAILQ_INSERT_TAIL(&s->ctl, n, link);
  tlc__ps_queued_add(s, m->len);
  if (!tlc__ps_limits_check(s))
    tlc__ps_sub_kick(s);
}

/* Encodes and queues a reply or notice for this subscriber alone. */
void tlc__ps_sub_send(tlc__ps_sub_t *s, Tlcap__ServerMessage *sm) {
  int too_big;
  msg_t *m = tlc__ps_msg_encode(s->ps, sm, PSM_CONTROL, &too_big);
  if (m == NULL) {
    if (too_big) {
      m = tlc__ps_error_encode(s->ps, sm->request_id, TLCAP__ERROR_CODE__ERR_FAILED,
                               "reply larger than the daemon's message cap (max_message)", 0, 0);
      if (m == NULL) {
        tlc__ps_sub_close_soon(s);
        return;
      }
    } else {
      tlc__ps_sub_close_soon(s);
      return;
    }
  }
  tlc__ps_sub_ctl(s, m);
  tlc__ps_msg_unref(m);
}

void tlc__ps_send_error(tlc__ps_sub_t *s, uint32_t req, int code, const char *text, int fatal,
                        int detail) {
  msg_t *m = tlc__ps_error_encode(s->ps, req, code, text, fatal, detail);
  if (m == NULL) {
    tlc__ps_sub_close_soon(s);
    return;
  }
  tlc__ps_sub_ctl(s, m);
  tlc__ps_msg_unref(m);
}

/* Drops everything queued and not yet in flight. */
void tlc__ps_sub_drop_queued(tlc__ps_sub_t *s) {
  size_t i, j;
  while (!STAILQ_EMPTY(&s->ctl)) {
    ctl_node_t *n = STAILQ_FIRST(&s->ctl);
    STAILQ_REMOVE_HEAD(&s->ctl, link);
    tlc__ps_queued_sub(s, n->m->len);
    tlc__ps_msg_unref(n->m);
    tlc_free(n);
  }
  while (s->ring_n > 0) {
    msg_t *m = s->ring[s->ring_head];
    s->ring_head = (s->ring_head + 1) % s->ps->o.max_batches;
    s->ring_n--;
    tlc__ps_queued_sub(s, m->len);
    tlc__ps_msg_unref(m);
  }
  for (i = 0; i < s->nsubs; i++)
    for (j = 0; j < s->subs[i]->nslots; j++) {
      slot_t *sl = &s->subs[i]->slots[j];
      if (sl->pending != NULL) {
        tlc__ps_queued_sub(s, sl->pending->len);
        tlc__ps_msg_unref(sl->pending);
        sl->pending = NULL;
      }
      sl->catchup = 0;
    }
}

/* ---- writing ----------------------------------------------------------------------------- */

static void write_cb(uv_write_t *req, int status);

int tlc__ps_take(tlc__ps_sub_t *s, msg_t *m, size_t *bytes) {
  /* m's bytes are already counted in queued (moved from a queue), or are added by the caller */
  s->inflight[s->ninflight++] = m;
  *bytes += m->len;
  return s->ninflight < WRITE_MAX_BUFS && *bytes < WRITE_MAX_BYTES;
}

/* Starts a write of whatever is queued, if none is in flight. Re-entry (a catch-up snapshot
 * that queues an error while the write is being assembled) only queues: the outer call picks
 * it up. */
void tlc__ps_sub_kick(tlc__ps_sub_t *s) {
  int rounds = 0;
  if (s->kicking)
    return;
  do {
    s->kicking = 1;
    tlc__ps_sub_kick_once(s);
    s->kicking = 0;
  } while (!s->writing && !s->closed && !STAILQ_EMPTY(&s->ctl) &&
           (s->tls == NULL || s->tls_ready) && ++rounds < 64);
}

/* TLS: moves the session's waiting ciphertext to s->tout. Its size is bounded by what one
 * write encrypts (WRITE_MAX_BYTES plus one message of at most max_message) and the handshake:
 * above that something is wrong and the subscriber is closed (TLC_ELIMIT). */
int tlc__ps_tls_collect(tlc__ps_sub_t *s) {
  size_t n, cap;
  uv_mutex_lock(&s->tls_mu);
  n = tlc_tls_conn_pending(s->tls);
  uv_mutex_unlock(&s->tls_mu);
  if (n == 0)
    return 0;
  if (s->tout_len + n > s->tout_cap) {
    uint8_t *nb;
    cap = s->tout_cap > 0 ? s->tout_cap * 2 : 16384;
    while (cap < s->tout_len + n)
      cap *= 2;
    if (cap > s->ps->o.max_message + 2 * WRITE_MAX_BYTES + TLS_OUT_SLACK) {
      cap = s->tout_len + n;
      if (cap > s->ps->o.max_message + 2 * WRITE_MAX_BYTES + TLS_OUT_SLACK)
        return TLC_ELIMIT;
    }
    nb = tlc_realloc(s->tout, cap);
    if (nb == NULL)
      return TLC_ENOMEM;
    s->tout = nb;
    s->tout_cap = cap;
  }
  uv_mutex_lock(&s->tls_mu);
  s->tout_len += tlc_tls_conn_take(s->tls, s->tout + s->tout_len, n);
  uv_mutex_unlock(&s->tls_mu);
  return 0;
}

/* TLS: encrypts the in-flight messages and makes the ciphertext waiting so far the next
 * write's (tjob). Returns 0 or a negative error (the subscriber must then be closed). */
static int tls_prepare(tlc__ps_sub_t *s, int encrypt) {
  uint8_t *t;
  size_t i, c;
  int r;
  r = 0;
  uv_mutex_lock(&s->tls_mu); /* uncontended here (no job in flight); kept for the invariant */
  for (i = 0; encrypt && i < s->ninflight && r == 0; i++)
    r = tlc_tls_conn_write(s->tls, s->inflight[i]->data, s->inflight[i]->len);
  uv_mutex_unlock(&s->tls_mu);
  if (r < 0)
    return TLC_EIO;
  if ((r = tlc__ps_tls_collect(s)) != 0)
    return r;
  t = s->tjob; /* empty: no write is in flight */
  c = s->tjob_cap;
  s->tjob = s->tout;
  s->tjob_cap = s->tout_cap;
  s->tjob_len = s->tout_len;
  s->tout = t;
  s->tout_cap = c;
  s->tout_len = 0;
  if (s->tout_cap > TLS_BUF_KEEP) { /* one large snapshot must not pin its size per subscriber */
    tlc_free(s->tout);
    s->tout = NULL;
    s->tout_cap = 0;
  }
  return 0;
}

void tlc__ps_sub_kick_once(tlc__ps_sub_t *s) {
  tlc_pubsub_t *ps = s->ps;
  size_t bytes = 0, i, j, first_snap;
  uv_buf_t bufs[WRITE_MAX_BUFS];
  uv_os_fd_t fd = -1;
  int r, room = 1, to_writer;
  /* TLS before its handshake completes: only handshake bytes go out. */
  int gather = s->tls == NULL || s->tls_ready;
  if (s->writing || s->closed)
    return;
  if (s->gs.active && STAILQ_EMPTY(&s->ctl) && !s->closing)
    s->ps->up.writable(s); /* the previous part is written: the next one (a control message) */
  s->ninflight = 0;
  while (gather && room && !STAILQ_EMPTY(&s->ctl)) {
    ctl_node_t *n = STAILQ_FIRST(&s->ctl);
    STAILQ_REMOVE_HEAD(&s->ctl, link);
    room = tlc__ps_take(s, n->m, &bytes);
    tlc_free(n);
  }
  if (gather && !s->closing) {
    if (room && (s->drop_batches > 0)) {
      Tlcap__ServerMessage sm;
      Tlcap__Dropped d;
      msg_t *m;
      tlcap__server_message__init(&sm);
      tlcap__dropped__init(&d);
      sm.msg_case = TLCAP__SERVER_MESSAGE__MSG_DROPPED;
      sm.dropped = &d;
      d.batches = s->drop_batches;
      d.events = s->drop_events;
      d.total_batches = s->drop_total_batches;
      d.total_events = s->drop_total_events;
      if ((m = tlc__ps_msg_encode(ps, &sm, PSM_CONTROL, NULL)) != NULL) {
        s->drop_batches = s->drop_events = 0;
        tlc__ps_queued_add(s, m->len);
        room = tlc__ps_take(s, m, &bytes);
      }
    }
    first_snap = s->ninflight;
    for (i = 0; room && i < s->nsubs; i++) {
      subn_t *sn = s->subs[i];
      for (j = 0; room && j < sn->nslots; j++) {
        slot_t *sl = &sn->slots[j];
        msg_t *m = sl->pending;
        if (m != NULL) {
          sl->pending = NULL;
        } else if (sl->catchup) {
          m = s->ps->up.catchup(s, sn, j);
          if (m == NULL)
            continue;
          tlc__ps_queued_add(s, m->len);
        } else {
          continue;
        }
        sl->sent_seq = m->seq;
        sl->sent_any = 1;
        ps->st.snapshots_sent++;
        room = tlc__ps_take(s, m, &bytes);
      }
    }
    /* Snapshots of different targets are independent streams: the smaller first, so a
     * target with few changes is not delivered behind a large one. (Insertion sort: at most
     * WRITE_MAX_BUFS entries.) */
    for (i = first_snap + 1; i < s->ninflight; i++) {
      msg_t *m = s->inflight[i];
      for (j = i; j > first_snap && s->inflight[j - 1]->len > m->len; j--)
        s->inflight[j] = s->inflight[j - 1];
      s->inflight[j] = m;
    }
    while (room && s->ring_n > 0) {
      msg_t *m = s->ring[s->ring_head];
      s->ring_head = (s->ring_head + 1) % ps->o.max_batches;
      s->ring_n--;
      room = tlc__ps_take(s, m, &bytes);
    }
    if (s->ev_stalled && s->ring_n < ps->o.max_batches)
      ev_unstall(s);
  }
  to_writer = ps->sb.wr != NULL && !s->detached && uv_fileno(&s->h.handle, &fd) == 0;
  /* TLS: with the serving thread, it encrypts (tlc__ps_job_encrypt) after the ciphertext waiting
   * now; without it, the loop thread does. */
  if (s->tls != NULL && (r = tls_prepare(s, !to_writer)) < 0) {
    for (i = 0; i < s->ninflight; i++) {
      tlc__ps_queued_sub(s, s->inflight[i]->len);
      tlc__ps_msg_unref(s->inflight[i]);
    }
    s->ninflight = 0;
    tlc__ps_logf_(ps, TLC_PS_LOG_WARN, "sub#%llu %s: TLS: cannot encrypt: %s",
                  (unsigned long long)s->id, s->peer, tlc_strerror(r));
    ps->st.closed_peer++;
    tlc__ps_sub_close_soon(s);
    return;
  }
  if (s->ninflight == 0 && (s->tls == NULL || s->tjob_len == 0)) {
    if (s->close_when_flushed)
      tlc__ps_sub_close_soon(s);
    return;
  }
  if (s->detached) {
    for (i = 0; i < s->ninflight; i++) {
      s->detached_bytes += s->inflight[i]->len;
      tlc__ps_queued_sub(s, s->inflight[i]->len);
      tlc__ps_msg_unref(s->inflight[i]);
    }
    s->ninflight = 0;
    if (!STAILQ_EMPTY(&s->ctl) || s->ring_n > 0 || (s->gs.active && !s->closing))
      tlc__ps_sub_kick_once(s);
    return;
  }
  if (to_writer) {
    wjob_t *job = &s->job;
    {
      size_t plain = 0;
      for (i = 0; i < s->ninflight; i++) {
        job->iov[i].iov_base = s->inflight[i]->data;
        job->iov[i].iov_len = s->inflight[i]->len;
        plain += s->inflight[i]->len;
      }
      job->nbufs = s->ninflight;
      job->tls = NULL;
      if (s->tls != NULL) {
        /* room for the ciphertext: records of 16 KiB with at most 64 bytes of framing, tag
         * and padding each, and what the loop's reads may add meanwhile (alerts) */
        size_t need = s->tjob_len + plain + (plain / 16384 + 1) * 64 + 4096;
        if (need > s->tjob_cap) {
          uint8_t *nb = tlc_realloc(s->tjob, need);
          if (nb == NULL) {
            for (i = 0; i < s->ninflight; i++) {
              tlc__ps_queued_sub(s, s->inflight[i]->len);
              tlc__ps_msg_unref(s->inflight[i]);
            }
            s->ninflight = 0;
            s->tjob_len = 0;
            ps->st.closed_peer++;
            tlc__ps_sub_close_soon(s);
            return;
          }
          s->tjob = nb;
          s->tjob_cap = need;
        }
        job->tls = s->tls;
        job->tls_mu = &s->tls_mu;
        job->cbuf = s->tjob;
        job->clen = s->tjob_len;
        job->ccap = s->tjob_cap;
        job->encrypted = 0;
      }
      job->cur = 0;
      job->partial = 0;
      job->fd = fd;
      job->sub = s;
      s->writing = 1;
      s->in_writer = 1;
      tlc__ps_writer_post(ps, job);
      return;
    }
  }
  for (i = 0; i < s->ninflight; i++)
    bufs[i] = uv_buf_init((char *)s->inflight[i]->data, (unsigned)s->inflight[i]->len);
  s->wreq.data = s;
  if (s->tls != NULL) {
    bufs[0] = uv_buf_init((char *)s->tjob, (unsigned)s->tjob_len);
    r = uv_write(&s->wreq, &s->h.stream, bufs, 1, write_cb);
  } else {
    r = uv_write(&s->wreq, &s->h.stream, bufs, (unsigned)s->ninflight, write_cb);
  }
  if (r < 0) {
    for (i = 0; i < s->ninflight; i++) {
      tlc__ps_queued_sub(s, s->inflight[i]->len);
      tlc__ps_msg_unref(s->inflight[i]);
    }
    s->ninflight = 0;
    s->tjob_len = 0;
    ps->st.closed_peer++;
    tlc__ps_sub_close_soon(s);
    return;
  }
  s->writing = 1;
}

/* A write finished (written, failed, or cancelled because the subscriber is closing). */
void tlc__ps_write_done(tlc__ps_sub_t *s, int status) {
  size_t i;
  for (i = 0; i < s->ninflight; i++) {
    tlc__ps_queued_sub(s, s->inflight[i]->len);
    tlc__ps_msg_unref(s->inflight[i]);
  }
  s->ninflight = 0;
  s->writing = 0;
  s->in_writer = 0;
  if (s->close_deferred) {
    /* tlc__ps_sub_close_now waited for the writer to give the socket back; the note goes between
     * two messages (TLS: after the records the job made and did not send, tlc__ps_shutdown_note).
     */
    s->close_deferred = 0;
    if (s->shutdown_note && !s->job.partial)
      tlc__ps_shutdown_note(s);
    s->job.tls = NULL;
    s->tjob_len = 0;
    uv_close(&s->h.handle, tlc__ps_sub_closed_cb);
    return;
  }
  s->job.tls = NULL;
  s->tjob_len = 0;
  if (s->tjob_cap > TLS_BUF_KEEP) {
    tlc_free(s->tjob);
    s->tjob = NULL;
    s->tjob_cap = 0;
  }
  if (s->queued <= s->ps->o.obuf_soft)
    s->soft_since = 0;
  if (status < 0) {
    if (!s->closing)
      s->ps->st.closed_peer++;
    tlc__ps_sub_close_soon(s);
    return;
  }
  if (!s->closed)
    tlc__ps_sub_kick(s);
}

static void write_cb(uv_write_t *req, int status) {
  tlc__ps_write_done(req->data, status);
}

/* ---- fan-out from the daemon ------------------------------------------------------------- */

static int subn_wants_target(const subn_t *sn, const char *target) {
  return tlc__ps_spec_target(sn->spec, target);
}

/* Sends target event `te` (its seq and instance set here) to the subscribers with a
 * subscription of `target`: encoded once, when the first one wants it. */
static void target_event_send(tlc_pubsub_t *ps, const char *target, Tlcap__TargetEvent *te) {
  Tlcap__ServerMessage sm;
  tlc__ps_sub_t *s;
  msg_t *m = NULL;
  ps->st.target_events++;
  tlcap__server_message__init(&sm);
  sm.msg_case = TLCAP__SERVER_MESSAGE__MSG_TARGET_EVENT;
  sm.target_event = te;
  te->instance_id = ps->instance_id;
  te->seq = ++ps->sb.next_tev_seq;
  LIST_FOREACH(s, &ps->sb.subs, link) {
    size_t i;
    if (s->closing || !s->authed)
      continue;
    for (i = 0; i < s->nsubs; i++)
      if (subn_wants_target(s->subs[i], target))
        break;
    if (i == s->nsubs)
      continue;
    if (m == NULL && (m = tlc__ps_msg_encode(ps, &sm, PSM_CONTROL, NULL)) == NULL)
      return;
    tlc__ps_sub_ctl(s, m);
  }
  tlc__ps_msg_unref(m);
}

void tlc_pubsub_target_event(tlc_pubsub_t *ps, const char *target, int kind, const char *detail) {
  Tlcap__TargetEvent te;
  if (ps->closing || target == NULL)
    return;
  tlcap__target_event__init(&te);
  te.target = (char *)target;
  te.kind = (Tlcap__TargetEventKind)kind;
  te.detail = (char *)(detail != NULL ? detail : "");
  te.unix_ms = tlc_now_unix_ms();
  target_event_send(ps, target, &te);
}

/* The target event of a violation the rate limit let through. Out of line: in a storm most are
 * not, and they should not pay for this frame. */
#if defined(__GNUC__)
__attribute__((noinline))
#endif
static void
violation_send(tlc_pubsub_t *ps, const char *target, const struct tlc_bwatch *w,
               const struct tlc_violation *v, uint64_t suppressed) {
  Tlcap__TargetEvent te;
  Tlcap__Violation pv;
  tlc_vserve_names_t nm;
  tlcap__target_event__init(&te);
  tlc_vserve_fill(&pv, &ps->p, target, w, v, &nm);
  te.target = (char *)target;
  te.kind = TLCAP__TARGET_EVENT_KIND__TE_VIOLATION;
  te.detail = (char *)"";
  te.unix_ms = v->wall_ms != 0 ? v->wall_ms : tlc_now_unix_ms();
  te.violation = &pv;
  te.suppressed = suppressed;
  target_event_send(ps, target, &te);
}

uint64_t tlc_pubsub_violation(tlc_pubsub_t *ps, const char *target, const struct tlc_bwatch *w,
                              const struct tlc_violation *v, uint64_t key, uint64_t now_ms,
                              uint64_t held) {
  uint64_t suppressed, next;
  if (ps->closing || target == NULL || w == NULL || v == NULL)
    return 0;
  /* counted by the limiter (tlc_pubsub_get_stats reads its totals) */
  if (tlc_vrate_take_watch(&ps->vrate, w, v->budget, target, key, now_ms, held, &suppressed,
                           &next) > 0)
    violation_send(ps, target, w, v, suppressed);
  return next;
}

void tlc_pubsub_violations_held(tlc_pubsub_t *ps, const char *target, const struct tlc_bwatch *w,
                                size_t budget, uint64_t key, uint64_t now_ms, uint64_t held) {
  if (!ps->closing && target != NULL && w != NULL)
    tlc_vrate_hold(&ps->vrate, w, budget, target, key, now_ms, held);
}

/* Whether any of s's event subscriptions wants `target`'s batches. */
static int sub_wants_events(const tlc__ps_sub_t *s, const char *target) {
  size_t j;
  for (j = 0; j < s->nsubs; j++)
    if (s->subs[j]->events && subn_wants_target(s->subs[j], target))
      return 1;
  return 0;
}

/* Remembers the per-target batch counters as they are now (the start of s's stall). Without
 * memory for new targets' entries those count from 0 at settlement (over-counting drops of
 * targets created meanwhile, never under-counting). */
static void ev_mark(tlc__ps_sub_t *s) {
  tlc_pubsub_t *ps = s->ps;
  size_t i;
  if (s->nstall < ps->sb.nbatch_seq) {
    uint64_t *b = tlc_realloc(s->stall_b, ps->sb.nbatch_seq * sizeof(*b));
    uint64_t *e = b != NULL ? tlc_realloc(s->stall_e, ps->sb.nbatch_seq * sizeof(*e)) : NULL;
    if (b != NULL)
      s->stall_b = b;
    if (e != NULL) {
      s->stall_e = e;
      s->nstall = ps->sb.nbatch_seq;
    }
  }
  for (i = 0; i < s->nstall && i < ps->sb.nbatch_seq; i++) {
    s->stall_b[i] = ps->sb.batch_seq[i];
    s->stall_e[i] = ps->sb.batch_ev[i];
  }
}

/* Counts, for a stalled subscriber, the batches and events produced since it stalled (or since
 * its last settlement) for the targets it wants as dropped, and restarts the count from now.
 * O(targets); runs when it drains and when its subscriptions change, never per batch. */
void tlc__ps_ev_settle(tlc__ps_sub_t *s) {
  tlc_pubsub_t *ps = s->ps;
  size_t i;
  for (i = 0; i < ps->sb.nbatch_seq; i++) {
    uint64_t b0 = i < s->nstall ? s->stall_b[i] : 0, e0 = i < s->nstall ? s->stall_e[i] : 0;
    uint64_t db = ps->sb.batch_seq[i] - b0, de = ps->sb.batch_ev[i] - e0;
    tlc_view_target_t info;
    if (db == 0)
      continue;
    memset(&info, 0, sizeof(info));
    if (ps->p.info(ps->p.ud, i, &info) != 0 || info.name == NULL || !sub_wants_events(s, info.name))
      continue;
    s->drop_batches += db;
    s->drop_events += de;
    s->drop_total_batches += db;
    s->drop_total_events += de;
    ps->st.batches_dropped += db;
    ps->st.events_dropped += de;
  }
  ev_mark(s);
}

/* The subscriber's ring has room again (its writer took batches): back into the fan-out. */
static void ev_unstall(tlc__ps_sub_t *s) {
  if (!s->ev_stalled)
    return;
  tlc__ps_ev_settle(s);
  s->ev_stalled = 0;
  s->ps->sb.evsubs_dirty = 1;
}

/* Queues a shared batch for one subscriber. When its ring is full the batch is dropped and
 * counted, and the subscriber stalls: it leaves the fan-out list, so until it drains it costs
 * the ingest path nothing (its later drops are settled from the per-target counters). */
static void sub_batch(tlc__ps_sub_t *s, msg_t *m) {
  tlc_pubsub_t *ps = s->ps;
  if (s->ring_n >= ps->o.max_batches) {
    s->drop_batches++;
    s->drop_events += m->nevents;
    s->drop_total_batches++;
    s->drop_total_events += m->nevents;
    ps->st.batches_dropped++;
    ps->st.events_dropped += m->nevents;
    s->ev_stalled = 1;
    ev_mark(s); /* from the counters at this batch (counted above) */
    ps->sb.evsubs_dirty = 1;
    return;
  }
  s->ring[(s->ring_head + s->ring_n) % ps->o.max_batches] = tlc__ps_msg_ref(m);
  s->ring_n++;
  tlc__ps_queued_add(s, m->len);
  if (!tlc__ps_limits_check(s))
    tlc__ps_sub_kick(s);
}

/* Index of `target` in the view, growing the per-target batch counters to hold it. 0 or
 * negative (unknown target, no memory). */
static int batch_index(tlc_pubsub_t *ps, const char *target, size_t *idx) {
  if (ps->p.find(ps->p.ud, target, idx) < 0 || *idx > (1u << 24))
    return TLC_ERANGE;
  if (*idx >= ps->sb.nbatch_seq) {
    size_t n = *idx + 1;
    uint64_t *v = tlc_realloc(ps->sb.batch_seq, n * sizeof(*v));
    uint64_t *w;
    if (v == NULL)
      return TLC_ENOMEM;
    ps->sb.batch_seq = v;
    if ((w = tlc_realloc(ps->sb.batch_ev, n * sizeof(*w))) == NULL)
      return TLC_ENOMEM; /* batch_seq grown, nbatch_seq not yet: consistent */
    ps->sb.batch_ev = w;
    memset(v + ps->sb.nbatch_seq, 0, (n - ps->sb.nbatch_seq) * sizeof(*v));
    memset(w + ps->sb.nbatch_seq, 0, (n - ps->sb.nbatch_seq) * sizeof(*w));
    ps->sb.nbatch_seq = n;
  }
  return 0;
}

/* Rebuilds the fan-out list: subscribers that take event batches now. */
static void evsubs_rebuild(tlc_pubsub_t *ps) {
  tlc__ps_sub_t *s;
  size_t n = 0;
  LIST_FOREACH(s, &ps->sb.subs, link) {
    size_t j;
    if (s->closing || !s->authed || s->ev_stalled)
      continue;
    for (j = 0; j < s->nsubs && !s->subs[j]->events; j++)
      ;
    if (j == s->nsubs)
      continue;
    if (n == ps->sb.capevsubs) {
      tlc__ps_sub_t **v = tlc_grow(ps->sb.evsubs, &ps->sb.capevsubs, n + 1, sizeof(*v), 16);
      if (v == NULL)
        return; /* stays dirty: tried again on the next batch */
      ps->sb.evsubs = v;
    }
    ps->sb.evsubs[n++] = s;
  }
  ps->sb.nevsubs = n;
  ps->sb.evsubs_dirty = 0;
}

void tlc_pubsub_events(tlc_pubsub_t *ps, const char *target, const tlc_event_t *ev, size_t n) {
  size_t off, idx;
  if (ps->closing || ps->sb.n_event_subns == 0 || n == 0 || target == NULL)
    return;
  if (batch_index(ps, target, &idx) < 0)
    return;
  if (ps->sb.evsubs_dirty)
    evsubs_rebuild(ps);
  for (off = 0; off < n; off += ps->o.max_batch_events) {
    size_t k = n - off < ps->o.max_batch_events ? n - off : ps->o.max_batch_events, i, si;
    msg_t *m = NULL;
    uint64_t seq = ++ps->sb.batch_seq[idx];
    ps->sb.batch_ev[idx] += k;
    /* stalled subscribers are not in evsubs: they cost nothing here (tlc__ps_ev_settle counts their
     * drops from batch_seq / batch_ev when they drain) */
    for (si = 0; si < ps->sb.nevsubs; si++) {
      tlc__ps_sub_t *s = ps->sb.evsubs[si];
      if (s->closing || s->ev_stalled || !sub_wants_events(s, target))
        continue;
      if (m == NULL) {
        /* Encoded once for every subscriber that wants it. */
        Tlcap__ServerMessage sm;
        Tlcap__EventBatch b;
        Tlcap__Event *e = tlc_malloc(k * sizeof(*e));
        Tlcap__Event **ep = tlc_malloc(k * sizeof(*ep));
        if (e == NULL || ep == NULL) {
          tlc_free(e);
          tlc_free(ep);
          return;
        }
        tlcap__server_message__init(&sm);
        tlcap__event_batch__init(&b);
        sm.msg_case = TLCAP__SERVER_MESSAGE__MSG_EVENTS;
        sm.events = &b;
        b.target = (char *)target;
        b.seq = seq;
        for (i = 0; i < k; i++) {
          const tlc_event_t *x = &ev[off + i];
          tlcap__event__init(&e[i]);
          e[i].time_ns = x->time_ns;
          e[i].handle = x->handle;
          e[i].type = x->type;
          e[i].core = x->core;
          e[i].data = x->data;
          e[i].thread = x->thread;
          e[i].flags = x->flags;
          ep[i] = &e[i];
        }
        b.n_events = k;
        b.events = ep;
        m = tlc__ps_msg_encode(ps, &sm, PSM_BATCH, NULL);
        tlc_free(e);
        tlc_free(ep);
        if (m == NULL)
          return;
        m->nevents = k;
        ps->st.batches_built++;
      }
      sub_batch(s, m);
    }
    tlc__ps_msg_unref(m);
  }
}
