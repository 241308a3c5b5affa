/* conn.c - the TCP connection pipeline that listen (tcp.c) and dial (dial.c) share.
 *
 * Read path: libuv reads into the daemon's one shared buffer; the bytes are decoded before the
 * callback returns (tlc_target_feed), so nothing is buffered per connection beyond the
 * preamble (<= 256 bytes) and the decoder's carry (one record/block, capped by max_block).
 * Fairness: libuv reads a busy socket up to 32 times per loop turn (2 MiB with the default
 * read_buffer, about 10 ms of statistics), which would delay everything else the loop does -
 * other targets' bytes, subscription ticks. A connection that has read READ_TURN_BYTES in one
 * turn stops reading until the turn's check phase (uv_check), so a turn stays near 1 ms.
 *
 * Preamble: while the first 8 bytes match "TLCAP/1 ", bytes are held until '\n' (at most
 * TLC_PREAMBLE_MAX); the line names the target and format. Anything else means no preamble,
 * and the held bytes are fed as data. Naming: "<listener>@<peer IP>"; if that target already
 * has a connection, "#2", "#3", ... up to "#64" (then the connection is refused).
 *
 * Deadlines (sweep timer): a connection holding a partial record or an unfinished preamble for
 * partial_timeout is closed (slowloris); with idle_timeout, any connection silent that long.
 *
 * Closing: EOF (half-close) -> everything received is already processed -> close (a truncated
 * tail is counted by tlc_target_detach). ECONNRESET/EPIPE are ordinary disconnects. A strict
 * decode error closes only that connection; the target keeps its statistics. The owner (a
 * dialer) hears of the close through c->closed_cb, so this file calls no source kind.
 *
 * Refusal reply: a connection that came in through a listener and is refused (no target for it:
 * bad preamble, reserved or unmatched name, format clash, caps; a strict decode error;
 * max_connections) is sent one text line, `tlcapd: refused: REASON\n`, right before the close
 * (conn_refuse), so that a sender such as `tlcap send` can say why. It is one non-blocking
 * send into an empty send buffer (MSG_DONTWAIT|MSG_NOSIGNAL; not retried, not queued), so a
 * target that never reads is not held up; dialled connections (a probe's port) and peers
 * outside `allow` get nothing.
 */
#include "ingest/sources.h"

#include "base/alloc.h"
#include "base/err.h"
#include "base/log.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define DRAIN_CAP       (64u << 20)  /* bytes read per connection at shutdown */
#define READ_TURN_BYTES (256u << 10) /* read share of one connection in one loop turn */

void tlc__addr_text(const struct sockaddr *sa, char *ip, size_t iplen, char *full, size_t fulllen) {
  int port = 0;
  ip[0] = '\0';
  if (sa->sa_family == AF_INET) {
    const struct sockaddr_in *a = (const struct sockaddr_in *)(const void *)sa;
    uv_ip4_name(a, ip, iplen);
    port = ntohs(a->sin_port);
    snprintf(full, fulllen, "%s:%d", ip, port);
  } else if (sa->sa_family == AF_INET6) {
    const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)(const void *)sa;
    uv_ip6_name(a, ip, iplen);
    port = ntohs(a->sin6_port);
    snprintf(full, fulllen, "[%s]:%d", ip, port);
  } else if (sa->sa_family == AF_UNIX) {
    /* A local stream socket (tlc_listen_take_fd: a socketpair end): no address to show, and
     * "<listener>@local" is a valid target name. */
    snprintf(ip, iplen, "local");
    snprintf(full, fulllen, "local");
  } else {
    snprintf(ip, iplen, "?");
    snprintf(full, fulllen, "?");
  }
}

/* ---- connections ---- */

static void conn_link(tlc_ingest_t *d, tlc_conn_t *c) {
  LIST_INSERT_HEAD(&d->conns, c, link);
  d->nconns++;
  c->counted = 1;
}

static void conn_unlink(tlc_ingest_t *d, tlc_conn_t *c) {
  if (!c->counted)
    return;
  LIST_REMOVE(c, link);
  d->nconns--;
  c->counted = 0;
}

static void conn_close_cb(uv_handle_t *h) {
  tlc_conn_t *c = h->data;
  void *owner = c->owner;
  c->owner = NULL;
  if (owner != NULL && c->closed_cb != NULL)
    c->closed_cb(owner, c->last_rx != 0);
  if (c->barrier_wait) {
    c->handle_closed = 1; /* closed early (shutdown, idle timeout): barrier_done frees */
    return;
  }
  tlc_free(c);
}

/* Storage wrote every byte the half-closed peer sent: answer it by closing. */
static void barrier_done(void *ud) {
  tlc_conn_t *c = ud;
  c->barrier_wait = 0;
  if (c->handle_closed)
    tlc_free(c);
  else
    tlc__conn_close(c, "end of stream");
}

void tlc__conn_close(tlc_conn_t *c, const char *reason) {
  if (c->closing)
    return;
  c->closing = 1;
  if (c->target != NULL && c->target->source == c)
    tlc_target_detach(c->target, reason);
  c->target = NULL;
  conn_unlink(c->d, c);
  uv_close((uv_handle_t *)&c->h, conn_close_cb);
}

tlc_conn_t *tlc__conn_new(tlc_ingest_t *d, const char *src_name, tlc_format_t format) {
  tlc_conn_t *c = tlc_calloc(1, sizeof(*c));
  if (c == NULL)
    return NULL;
  c->d = d;
  c->h.data = c;
  c->creq.data = c;
  snprintf(c->src_name, sizeof(c->src_name), "%s", src_name);
  c->src_format = format;
  if (uv_tcp_init(d->loop, &c->h) != 0) {
    tlc_free(c);
    return NULL;
  }
  return c;
}

/* One best-effort write of the refusal line: non-blocking, never SIGPIPE (a peer that is gone
 * is EPIPE, ignored), never queued. */
static void conn_send_line(tlc_conn_t *c, const char *line, size_t n) {
  uv_os_fd_t fd;
  if (uv_fileno((uv_handle_t *)&c->h, &fd) == 0)
    (void)send(fd, line, n, MSG_NOSIGNAL | MSG_DONTWAIT);
}

void tlc__conn_discard(tlc_conn_t *c, const char *line, int reset) {
  struct linger lg = { 1, 0 };
  uv_os_fd_t fd;
  if (line != NULL)
    conn_send_line(c, line, strlen(line));
  if (reset && uv_fileno((uv_handle_t *)&c->h, &fd) == 0)
    (void)setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)); /* RST: refused, promptly */
  c->closing = 1;
  uv_close((uv_handle_t *)&c->h, conn_close_cb);
}

static void conn_refuse(tlc_conn_t *c, const char *close_reason, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* Closes a refused connection, telling a listener's peer why first (see the top comment):
 * `tlcapd: refused: REASON\n`, REASON on one line of printable ASCII (anything else becomes
 * '?'), at most 240 bytes; listener connections only. */
static void conn_refuse(tlc_conn_t *c, const char *close_reason, const char *fmt, ...) {
  char line[sizeof(TLC_CONN_REFUSE_PREFIX) + 241]; /* the prefix, 240 bytes of reason, a newline */
  size_t n = sizeof(TLC_CONN_REFUSE_PREFIX) - 1, i;
  va_list ap;
  int k;
  if (c->accepted && !c->closing) {
    memcpy(line, TLC_CONN_REFUSE_PREFIX, n);
    va_start(ap, fmt);
    k = vsnprintf(line + n, sizeof(line) - n - 1, fmt, ap);
    va_end(ap);
    if (k >= 0) {
      n += (size_t)k < sizeof(line) - n - 1 ? (size_t)k : sizeof(line) - n - 2;
      for (i = sizeof(TLC_CONN_REFUSE_PREFIX) - 1; i < n; i++)
        if ((unsigned char)line[i] < 0x20 || (unsigned char)line[i] > 0x7e)
          line[i] = '?';
      line[n++] = '\n';
      conn_send_line(c, line, n);
    }
  }
  tlc__conn_close(c, close_reason);
}

static void alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  tlc_conn_t *c = h->data;
  uint8_t *b;
  size_t n;
  (void)suggested;
  /* Where storage keeps the records (bin1x), when it lends the place: they are then not
   * copied again. Else one buffer for every connection. Either way the bytes are consumed
   * before the read callback returns. */
  if (c->target != NULL && !c->closing &&
      tlc_target_read_buffer(c->target, c->d->rbuf_len, &b, &n)) {
    buf->base = (char *)b;
    buf->len = n;
    return;
  }
  buf->base = (char *)c->d->rbuf;
  buf->len = c->d->rbuf_len;
}

/* Binds a connection to its target: preamble name or "<src>@<ip>", "#N" when taken. */
static void read_cb(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf);

/* Storage backpressure (target.h hold_cb): stops reading, so that the kernel's receive buffer
 * fills and TCP's window holds the sender back; reading again once the writer drained. The
 * deadlines do not run while held (tlc__conn_sweep): the silence is ours, not the peer's. */
static void conn_hold(void *src, int on) {
  tlc_conn_t *c = src;
  tlc_ingest_t *d = c->d;
  if (c->closing || c->held == on)
    return;
  c->held = on;
  if (on) {
    uv_read_stop((uv_stream_t *)&c->h);
    return;
  }
  c->last_rx = uv_now(d->loop); /* the deadlines count from now */
  if (c->rec_since != 0)
    c->rec_since = c->last_rx; /* the time held inside a record was ours, not the peer's */
  if (!c->yielded && !d->stopping && uv_read_start((uv_stream_t *)&c->h, alloc_cb, read_cb) != 0)
    tlc__conn_close(c, "read restart failed");
}

/* After an attach: the connection takes part in backpressure, and starts held when its target
 * is held already (a reconnect while storage is behind). */
static void conn_hold_init(tlc_conn_t *c) {
  c->target->hold_cb = conn_hold;
  if (tlc_target_holding(c->target)) {
    c->held = 1;
    uv_read_stop((uv_stream_t *)&c->h);
  }
}

/* Binds the connection to its target; on failure returns a negative error with the reason
 * (for the refusal reply) in why[0..whylen). */
static int conn_bind(tlc_conn_t *c, const char *name, tlc_format_t fmt, char *why, size_t whylen) {
  tlc_ingest_t *d = c->d;
  char base[TLC_TARGET_NAME_MAX + 1], nm[TLC_TARGET_NAME_MAX + 8];
  const tlc_cfg_source_t *src;
  int n;
  if (name != NULL && (tlc_config_find_source(&d->cfg, TLC_SRC_DIAL, name) != NULL ||
                       tlc_config_find_source(&d->cfg, TLC_SRC_SERIAL, name) != NULL)) {
    /* A configured dial or serial target's name belongs to its source: a preamble must not
     * feed (or, while it is down, take over) its statistics and storage. */
    d->targets.refused_name++;
    d->st.refused_target++;
    tlc_log(TLC_LOG_WARN, TLC_LOGC_TCP,
            "connection %s on %s: preamble names target \"%s\", which belongs to a configured "
            "source; closing",
            c->peer, c->src_name, name);
    snprintf(why, whylen, "target name \"%s\" belongs to a configured source", name);
    return TLC_EINVAL;
  }
  if (name != NULL)
    n = snprintf(base, sizeof(base), "%s", name);
  else
    n = snprintf(base, sizeof(base), "%s@%s", c->src_name, c->peer_ip);
  src = tlc_config_find_source(&d->cfg, TLC_SRC_LISTEN, c->src_name);
  if (n >= 0 && src != NULL && !tlc_config_targets_match(src->targets, base)) {
    /* the listener's `targets` patterns: names this listener may feed */
    d->targets.refused_name++;
    d->st.refused_target++;
    tlc_log(TLC_LOG_WARN, TLC_LOGC_TCP,
            "connection %s on %s: target \"%s\" not in the listener's targets (%s); closing",
            c->peer, c->src_name, base, src->targets);
    snprintf(why, whylen, "target \"%s\" is not among the listener's targets", base);
    return TLC_EINVAL;
  }
  if (n < 0 || (size_t)n > d->cfg.max_name) {
    d->targets.refused_name++;
    d->st.refused_target++;
    tlc_log(TLC_LOG_WARN, TLC_LOGC_TCP,
            "connection %s on %s: target name \"%.64s...\" longer than max_name %zu; closing",
            c->peer, c->src_name, base, d->cfg.max_name);
    snprintf(why, whylen, "target name longer than max_name %zu", d->cfg.max_name);
    return TLC_ELIMIT;
  }
  for (int k = 1; k <= TLC_CONN_SUFFIX_MAX; k++) {
    tlc_target_t *t;
    tlc_target_conf_t conf;
    int r;
    if (k == 1)
      snprintf(nm, sizeof(nm), "%s", base);
    else
      snprintf(nm, sizeof(nm), "%s#%d", base, k);
    if (strlen(nm) > d->cfg.max_name) {
      d->targets.refused_name++;
      break;
    }
    t = tlc_targets_find(&d->targets, nm);
    if (t != NULL && t->connected)
      continue;
    tlc__target_conf(d, TLC_SRC_LISTEN, c->src_name, nm, fmt, &conf);
    r = tlc_targets_get(&d->targets, nm, TLC_SRC_LISTEN, &conf, &t);
    if (r == TLC_EINVAL && t != NULL) {
      d->st.refused_target++;
      tlc_log(TLC_LOG_WARN, TLC_LOGC_TCP,
              "connection %s on %s: target %s exists with format %s, stream says %s; closing",
              c->peer, c->src_name, nm, tlc_format_name(t->format), tlc_format_name(fmt));
      snprintf(why, whylen, "target %s exists with format %s, the stream says %s", nm,
               tlc_format_name(t->format), tlc_format_name(fmt));
      return r;
    }
    if (r != 0) {
      d->st.refused_target++;
      tlc_log(TLC_LOG_WARN, TLC_LOGC_TCP, "connection %s on %s: cannot create target %s: %s",
              c->peer, c->src_name, nm, r == TLC_ELIMIT ? "max_targets reached" : tlc_strerror(r));
      snprintf(why, whylen, "cannot create target %s: %s", nm,
               r == TLC_ELIMIT   ? "max_targets reached"
               : r == TLC_EINVAL ? "bad target name"
                                 : tlc_strerror(r));
      return r;
    }
    c->target = t;
    r = tlc_target_attach(t, c, c->peer);
    if (r == 0)
      conn_hold_init(c);
    else
      snprintf(why, whylen, "target %s is busy", nm);
    return r;
  }
  d->st.refused_target++;
  tlc_log(TLC_LOG_WARN, TLC_LOGC_TCP,
          "connection %s on %s: too many simultaneous connections for target %s; closing", c->peer,
          c->src_name, base);
  snprintf(why, whylen, "too many simultaneous connections for target %s", base);
  return TLC_ELIMIT;
}

/* Feeds bytes to the bound target; closes the connection on a decode error. Returns 0 while
 * the connection lives. */
static int conn_feed(tlc_conn_t *c, const uint8_t *p, size_t n) {
  int r;
  if (n == 0)
    return 0;
  r = tlc_target_feed(c->target, p, n);
  if (r != 0) {
    const tlc_target_t *t = c->target;
    c->d->st.closed_decode++;
    conn_refuse(c, "decode error", "decode error at byte offset %" PRIu64 " of the stream: %s",
                t->pipe.dec.err_offset - t->attach_pos, t->pipe.dec.err_reason);
    return -1;
  }
  return 0;
}

/* Settles the preamble (or its absence) with the bytes held, then feeds the rest of the held
 * bytes. Returns 0 while the connection lives. */
static int conn_settle(tlc_conn_t *c, int at_eof) {
  tlc_preamble_t p;
  char why[200];
  const char *name;
  switch (tlc_preamble_parse(c->pre, c->prelen, at_eof, c->d->cfg.max_name, &p, why, sizeof(why))) {
  case TLC_PRE_MORE:
    return 0;
  case TLC_PRE_NONE:
    c->preamble_done = 1;
    if (c->target == NULL && conn_bind(c, NULL, c->src_format, why, sizeof(why)) != 0) {
      conn_refuse(c, "refused", "%s", why);
      return -1;
    }
    return conn_feed(c, (const uint8_t *)c->pre, c->prelen);
  case TLC_PRE_BAD:
    c->d->st.preamble_errors++;
    tlc_log(TLC_LOG_WARN, TLC_LOGC_TCP, "connection %s on %s: bad preamble: %s; closing", c->peer,
            c->src_name, why);
    conn_refuse(c, "bad preamble", "bad preamble: %s", why);
    return -1;
  default:
    break;
  }
  c->preamble_done = 1;
  name = p.has_name ? p.name : NULL;
  if (c->target == NULL) {
    if (conn_bind(c, name, p.format != TLC_FMT_NONE ? p.format : c->src_format, why, sizeof(why)) !=
        0) {
      conn_refuse(c, "refused", "%s", why);
      return -1;
    }
  } else if (name != NULL && strcmp(name, c->target->name) != 0) {
    tlc_log(TLC_LOG_NOTICE, TLC_LOGC_DIAL,
            "target %s (%s): preamble names \"%s\"; keeping the configured name", c->target->name,
            c->peer, name);
  }
  return conn_feed(c, (const uint8_t *)c->pre + p.length, c->prelen - p.length);
}

/* All received bytes go through here (read callback and shutdown drain). */
static int conn_process(tlc_conn_t *c, const uint8_t *p, size_t n) {
  if (!c->preamble_done) {
    size_t take = sizeof(c->pre) - c->prelen;
    if (take > n)
      take = n;
    memcpy(c->pre + c->prelen, p, take);
    c->prelen += take;
    p += take;
    n -= take;
    if (conn_settle(c, 0) != 0)
      return -1;
    if (!c->preamble_done)
      return 0; /* n == 0 here: a full buffer always settles */
  }
  return conn_feed(c, p, n);
}

static void read_cb(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf);

/* Check phase: connections that yielded read again from the next turn on. The list only
 * lives within one turn (check runs after every poll phase), so a connection closed in this
 * turn is still allocated (its close callback runs later, in the closing phase). */
static void yield_resume_cb(uv_check_t *h) {
  tlc_ingest_t *d = h->data;
  tlc_conn_t *c = SLIST_FIRST(&d->yielded);
  SLIST_INIT(&d->yielded);
  uv_check_stop(h);
  while (c != NULL) {
    tlc_conn_t *next = SLIST_NEXT(c, yield_link);
    c->yielded = 0;
    if (!c->closing && !d->stopping && !c->held &&
        uv_read_start((uv_stream_t *)&c->h, alloc_cb, read_cb) != 0)
      tlc__conn_close(c, "read restart failed");
    c = next;
  }
}

/* Counts bytes read in this loop turn; past READ_TURN_BYTES, stops reading until the check
 * phase. uv_now() is the loop time of the turn (updated once per poll). */
static void read_share(tlc_conn_t *c, size_t n) {
  tlc_ingest_t *d = c->d;
  uint64_t now = uv_now(d->loop);
  if (c->turn_ms != now) {
    c->turn_ms = now;
    c->turn_bytes = 0;
  }
  c->turn_bytes += n;
  if (c->turn_bytes < READ_TURN_BYTES || c->closing || c->yielded || d->stopping)
    return;
  if (!d->resume_init) {
    if (uv_check_init(d->loop, &d->resume) != 0)
      return;
    d->resume.data = d;
    d->resume_init = 1;
  }
  c->turn_bytes = 0;
  uv_read_stop((uv_stream_t *)&c->h);
  c->yielded = 1;
  SLIST_INSERT_HEAD(&d->yielded, c, yield_link);
  uv_check_start(&d->resume, yield_resume_cb);
}

/* After bytes were processed: when did the record (or block) the decoder is inside begin?
 * A new one began in this read when none was pending before or one completed since; else the
 * same record goes on and keeps its start. partial_timeout is measured from there, so a peer
 * trickling one byte a second cannot hold a record open by never being silent. */
static void rec_track(tlc_conn_t *c) {
  uint64_t units;
  if (c->target == NULL || c->closing)
    return;
  if (tlc_target_pending(c->target) == 0) {
    c->rec_since = 0;
    return;
  }
  units = tlc_target_units(c->target);
  if (c->rec_since == 0 || units != c->rec_units) {
    c->rec_since = c->last_rx;
    c->rec_units = units;
  }
}

static void read_cb(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf) {
  tlc_conn_t *c = s->data;
  tlc_ingest_t *d = c->d;
  if (c->closing)
    return;
  if (nread > 0) {
    c->last_rx = uv_now(d->loop);
    if (conn_process(c, (const uint8_t *)buf->base, (size_t)nread) == 0) {
      rec_track(c);
      read_share(c, (size_t)nread);
    }
    return;
  }
  if (nread == 0)
    return;
  if (nread == UV_EOF) {
    if (!c->preamble_done && c->prelen > 0 && conn_settle(c, 1) != 0)
      return;
    d->st.closed_eof++;
    TLC_LOGD(TLC_LOGC_TCP, "connection %s on %s: end of stream", c->peer, c->src_name);
    if (d->barrier != NULL && !c->barrier_wait) {
      /* Everything received is processed; with storage on, close only once it is written
       * (SPEC 1). The target is released now (a reconnect may come before the answer). */
      if (c->target != NULL && c->target->source == c)
        tlc_target_detach(c->target, "end of stream");
      c->target = NULL;
      c->barrier_wait = 1;
      if (d->barrier(d->barrier_ud, barrier_done, c) == 0)
        return;
      c->barrier_wait = 0; /* no barrier (out of memory): close now */
    }
    tlc__conn_close(c, "end of stream");
    return;
  }
  d->st.closed_reset++;
  tlc_log(TLC_LOG_INFO, TLC_LOGC_TCP, "connection %s on %s (target %s): %s", c->peer, c->src_name,
          c->target != NULL ? c->target->name : "-", uv_strerror((int)nread));
  tlc__conn_close(c, uv_strerror((int)nread));
}

void tlc__conn_begin(tlc_conn_t *c, tlc_target_t *fixed) {
  struct sockaddr_storage ss;
  int len = sizeof(ss);
  int r;
  c->h.data = c;
  c->since = uv_now(c->d->loop);
  if (uv_tcp_getpeername(&c->h, (struct sockaddr *)&ss, &len) == 0)
    tlc__addr_text((struct sockaddr *)&ss, c->peer_ip, sizeof(c->peer_ip), c->peer,
                   sizeof(c->peer));
  else {
    snprintf(c->peer_ip, sizeof(c->peer_ip), "unknown");
    snprintf(c->peer, sizeof(c->peer), "unknown");
    if (fixed == NULL) {
      /* A peer that reset before the accept: its name would be "<listener>@unknown", one
       * target for every such peer. Nothing came from it: a reset, counted. */
      c->d->st.closed_reset++;
      TLC_LOGD(TLC_LOGC_TCP, "connection on %s: peer gone before accept", c->src_name);
      c->closing = 1;
      uv_close((uv_handle_t *)&c->h, conn_close_cb);
      return;
    }
  }
  if (!c->counted)
    conn_link(c->d, c);
  (void)uv_tcp_keepalive(&c->h, 1, 60);
  if (fixed != NULL) {
    c->target = fixed;
    if (tlc_target_attach(fixed, c, c->peer) != 0) {
      tlc__conn_close(c, "target busy");
      return;
    }
    conn_hold_init(c);
    if (c->held)
      return; /* reading starts when storage releases the target */
  }
  r = uv_read_start((uv_stream_t *)&c->h, alloc_cb, read_cb);
  if (r != 0) {
    tlc_log(TLC_LOG_WARN, TLC_LOGC_TCP, "connection %s on %s: read: %s", c->peer, c->src_name,
            uv_strerror(r));
    tlc__conn_close(c, uv_strerror(r));
  }
}

void tlc__conn_sweep(tlc_ingest_t *d, uint64_t now) {
  tlc_conn_t *c, *next;
  LIST_FOREACH_SAFE(c, &d->conns, link, next) {
    uint64_t last = c->last_rx != 0 ? c->last_rx : c->since;
    if (c->closing || c->held)
      continue;
    /* inside an unfinished preamble since the connection began, or inside one record since it
     * began (rec_track): time inside, not silence */
    uint64_t inside = !c->preamble_done && c->prelen > 0 ? c->since
                      : c->target != NULL && c->rec_since != 0 && tlc_target_pending(c->target) > 0
                          ? c->rec_since
                          : 0;
    if (d->cfg.partial_timeout_ms > 0 && inside != 0 && now - inside >= d->cfg.partial_timeout_ms) {
      d->st.closed_deadline++;
      if (c->target != NULL)
        c->target->deadline_closes++;
      tlc_log(TLC_LOG_NOTICE, TLC_LOGC_TCP,
              "connection %s on %s (target %s): %" PRIu64 " ms inside a record; closing", c->peer,
              c->src_name, c->target != NULL ? c->target->name : "-", now - inside);
      tlc__conn_close(c, "partial-record deadline");
      continue;
    }
    if (d->cfg.idle_timeout_ms > 0 && now - last >= d->cfg.idle_timeout_ms) {
      d->st.closed_idle++;
      tlc_log(TLC_LOG_NOTICE, TLC_LOGC_TCP,
              "connection %s on %s (target %s): idle %" PRIu64 " ms; closing", c->peer, c->src_name,
              c->target != NULL ? c->target->name : "-", now - last);
      tlc__conn_close(c, "idle timeout");
    }
  }
}

void tlc__conns_drain_close(tlc_ingest_t *d) {
  tlc_conn_t *c, *next;
  LIST_FOREACH_SAFE(c, &d->conns, link, next) {
    uv_os_fd_t fd;
    size_t total = 0;
    if (c->closing)
      continue;
    uv_read_stop((uv_stream_t *)&c->h);
    if (uv_fileno((uv_handle_t *)&c->h, &fd) == 0) {
      while (total < DRAIN_CAP && !c->closing) {
        ssize_t r = recv(fd, d->rbuf, d->rbuf_len, MSG_DONTWAIT);
        if (r < 0 && errno == EINTR)
          continue;
        if (r <= 0)
          break;
        total += (size_t)r;
        if (conn_process(c, d->rbuf, (size_t)r) != 0)
          break;
      }
      if (!c->closing && !c->preamble_done && c->prelen > 0)
        (void)conn_settle(c, 1);
    }
    /* `next` was taken before: processing may have closed (and unlinked) c. */
    if (!c->closing)
      tlc__conn_close(c, "daemon shutting down");
  }
  /* every connection is closing: nothing will resume reading */
  SLIST_INIT(&d->yielded);
  if (d->resume_init) {
    d->resume_init = 0;
    uv_close((uv_handle_t *)&d->resume, NULL);
  }
}
