/* queue.c - a subscriber's queues, the writes handed to the socket, and the event fan-out (see the
 * design note in pubsub.c).
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
    uint64_t now = tlc__ps_now_ms(ps) + 1; /* + 1: 0 means "below" */
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
  n->next = NULL;
  if (s->ctl_tail != NULL)
    s->ctl_tail->next = n;
  else
    s->ctl_head = n;
  s->ctl_tail = n;
  tlc__ps_queued_add(s, m->len);
  if (!tlc__ps_limits_check(s))
    tlc__ps_sub_kick(s);
}

/* An Error message (request id `req`), encoded; NULL when memory is short. */
msg_t *tlc__ps_error_encode(tlc_pubsub_t *ps, uint32_t req, int code, const char *text, int fatal,
                            int detail) {
  Tlcap__ServerMessage sm;
  Tlcap__Error e;
  tlcap__server_message__init(&sm);
  tlcap__error__init(&e);
  sm.request_id = req;
  sm.msg_case = TLCAP__SERVER_MESSAGE__MSG_ERROR;
  sm.error = &e;
  e.code = (Tlcap__ErrorCode)code;
  e.message = (char *)text;
  e.fatal = fatal ? 1 : 0;
  e.detail_code = detail;
  return tlc__ps_msg_encode(ps, &sm, PSM_CONTROL, NULL);
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
  while (s->ctl_head != NULL) {
    ctl_node_t *n = s->ctl_head;
    s->ctl_head = n->next;
    tlc__ps_queued_sub(s, n->m->len);
    tlc__ps_msg_unref(n->m);
    tlc_free(n);
  }
  s->ctl_tail = NULL;
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

/* The catch-up snapshot of a slot, from the feed's mirror: the full snapshot for a slot that
 * was never sent one, else the delta from what it was last sent to the last tick. Shared with
 * every other slot in the same position until the next tick. Returns a message (refs 1), or
 * NULL (nothing to send yet: the next tick delivers). */
static msg_t *slot_catchup(tlc__ps_sub_t *s, subn_t *sn, size_t idx) {
  slot_t *sl = &sn->slots[idx];
  feed_t *f = sn->feed;
  feed_target_t *ft;
  msg_t **cache;
  int r = 0;
  sl->catchup = 0;
  if (f == NULL || idx >= f->nt || !f->t[idx].cur.have)
    return NULL;
  {
    tlc_ps_target_info_t info;
    memset(&info, 0, sizeof(info));
    if (f->ps->p.info(f->ps->p.ud, idx, &info) < 0 || info.gen != f->t[idx].cur.gen) {
      /* another target took this index since the last tick: the next tick sends its full */
      tlc__ps_feed_target_renew(f, idx, info.gen);
      return NULL;
    }
  }
  ft = &f->t[idx];
  if (!sl->sent_any) {
    cache = &ft->full;
    if (*cache == NULL)
      r = tlc__ps_mirror_msg(f, idx, MM_FULL, 0, cache);
  } else {
    cache = &ft->catchup;
    if (*cache == NULL || ft->catchup_base != sl->sent_seq) {
      tlc__ps_msg_unref(*cache);
      *cache = NULL;
      ft->catchup_base = sl->sent_seq;
      r = tlc__ps_mirror_msg(f, idx, MM_SINCE, sl->sent_seq, cache);
    }
  }
  if (r < 0) {
    if (r == TLC_ELIMIT)
      tlc__ps_send_error(s, 0, TLCAP__ERROR_CODE__ERR_FAILED,
                         "snapshot larger than the daemon's message cap: narrow the subscription",
                         0, r);
    return NULL;
  }
  return tlc__ps_msg_ref(*cache);
}

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
  } while (!s->writing && !s->closed && s->ctl_head != NULL && (s->tls == NULL || s->tls_ready) &&
           ++rounds < 64);
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
  if (s->gs.active && s->ctl_head == NULL && !s->closing)
    tlc__ps_gs_next(
        s); /* the previous part is written: the next one (queued as a control message) */
  s->ninflight = 0;
  while (gather && room && s->ctl_head != NULL) {
    ctl_node_t *n = s->ctl_head;
    s->ctl_head = n->next;
    if (s->ctl_head == NULL)
      s->ctl_tail = NULL;
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
          m = slot_catchup(s, sn, j);
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
  to_writer = ps->wr != NULL && !s->detached && uv_fileno(&s->h.handle, &fd) == 0;
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
    if (s->ctl_head != NULL || s->ring_n > 0 || (s->gs.active && !s->closing))
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

void tlc_pubsub_target_event(tlc_pubsub_t *ps, const char *target, int kind, const char *detail) {
  Tlcap__ServerMessage sm;
  Tlcap__TargetEvent te;
  tlc__ps_sub_t *s;
  msg_t *m = NULL;
  if (ps->closing || target == NULL)
    return;
  ps->st.target_events++;
  tlcap__server_message__init(&sm);
  tlcap__target_event__init(&te);
  sm.msg_case = TLCAP__SERVER_MESSAGE__MSG_TARGET_EVENT;
  sm.target_event = &te;
  te.target = (char *)target;
  te.kind = (Tlcap__TargetEventKind)kind;
  te.detail = (char *)(detail != NULL ? detail : "");
  te.unix_ms = tlc__ps_unix_ms();
  te.instance_id = ps->instance_id;
  te.seq = ++ps->next_tev_seq;
  for (s = ps->subs; s != NULL; s = s->next) {
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
  if (s->nstall < ps->nbatch_seq) {
    uint64_t *b = tlc_realloc(s->stall_b, ps->nbatch_seq * sizeof(*b));
    uint64_t *e = b != NULL ? tlc_realloc(s->stall_e, ps->nbatch_seq * sizeof(*e)) : NULL;
    if (b != NULL)
      s->stall_b = b;
    if (e != NULL) {
      s->stall_e = e;
      s->nstall = ps->nbatch_seq;
    }
  }
  for (i = 0; i < s->nstall && i < ps->nbatch_seq; i++) {
    s->stall_b[i] = ps->batch_seq[i];
    s->stall_e[i] = ps->batch_ev[i];
  }
}

/* Counts, for a stalled subscriber, the batches and events produced since it stalled (or since
 * its last settlement) for the targets it wants as dropped, and restarts the count from now.
 * O(targets); runs when it drains and when its subscriptions change, never per batch. */
void tlc__ps_ev_settle(tlc__ps_sub_t *s) {
  tlc_pubsub_t *ps = s->ps;
  size_t i;
  for (i = 0; i < ps->nbatch_seq; i++) {
    uint64_t b0 = i < s->nstall ? s->stall_b[i] : 0, e0 = i < s->nstall ? s->stall_e[i] : 0;
    uint64_t db = ps->batch_seq[i] - b0, de = ps->batch_ev[i] - e0;
    tlc_ps_target_info_t info;
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
  s->ps->evsubs_dirty = 1;
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
    ps->evsubs_dirty = 1;
    return;
  }
  s->ring[(s->ring_head + s->ring_n) % ps->o.max_batches] = tlc__ps_msg_ref(m);
  s->ring_n++;
  tlc__ps_queued_add(s, m->len);
  if (!tlc__ps_limits_check(s))
    tlc__ps_sub_kick(s);
}

/* Index of `target` in the provider, growing the per-target batch counters to hold it. 0 or
 * negative (unknown target, no memory). */
static int batch_index(tlc_pubsub_t *ps, const char *target, size_t *idx) {
  if (ps->p.find(ps->p.ud, target, idx) < 0 || *idx > (1u << 24))
    return TLC_ERANGE;
  if (*idx >= ps->nbatch_seq) {
    size_t n = *idx + 1;
    uint64_t *v = tlc_realloc(ps->batch_seq, n * sizeof(*v));
    uint64_t *w;
    if (v == NULL)
      return TLC_ENOMEM;
    ps->batch_seq = v;
    if ((w = tlc_realloc(ps->batch_ev, n * sizeof(*w))) == NULL)
      return TLC_ENOMEM; /* batch_seq grown, nbatch_seq not yet: consistent */
    ps->batch_ev = w;
    memset(v + ps->nbatch_seq, 0, (n - ps->nbatch_seq) * sizeof(*v));
    memset(w + ps->nbatch_seq, 0, (n - ps->nbatch_seq) * sizeof(*w));
    ps->nbatch_seq = n;
  }
  return 0;
}

/* Rebuilds the fan-out list: subscribers that take event batches now. */
static void evsubs_rebuild(tlc_pubsub_t *ps) {
  tlc__ps_sub_t *s;
  size_t n = 0;
  for (s = ps->subs; s != NULL; s = s->next) {
    size_t j;
    if (s->closing || !s->authed || s->ev_stalled)
      continue;
    for (j = 0; j < s->nsubs && !s->subs[j]->events; j++)
      ;
    if (j == s->nsubs)
      continue;
    if (n == ps->capevsubs) {
      tlc__ps_sub_t **v = tlc_grow(ps->evsubs, &ps->capevsubs, n + 1, sizeof(*v), 16);
      if (v == NULL)
        return; /* stays dirty: tried again on the next batch */
      ps->evsubs = v;
    }
    ps->evsubs[n++] = s;
  }
  ps->nevsubs = n;
  ps->evsubs_dirty = 0;
}

void tlc_pubsub_events(tlc_pubsub_t *ps, const char *target, const tlc_event_t *ev, size_t n) {
  size_t off, idx;
  if (ps->closing || ps->n_event_subns == 0 || n == 0 || target == NULL)
    return;
  if (batch_index(ps, target, &idx) < 0)
    return;
  if (ps->evsubs_dirty)
    evsubs_rebuild(ps);
  for (off = 0; off < n; off += ps->o.max_batch_events) {
    size_t k = n - off < ps->o.max_batch_events ? n - off : ps->o.max_batch_events, i, si;
    msg_t *m = NULL;
    uint64_t seq = ++ps->batch_seq[idx];
    ps->batch_ev[idx] += k;
    /* stalled subscribers are not in evsubs: they cost nothing here (tlc__ps_ev_settle counts their
     * drops from batch_seq / batch_ev when they drain) */
    for (si = 0; si < ps->nevsubs; si++) {
      tlc__ps_sub_t *s = ps->evsubs[si];
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
