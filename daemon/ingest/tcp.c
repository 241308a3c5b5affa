/* tcp.c - TCP listeners and the TCP connection pipeline shared with dial.
 *
 * Accept path: a connection beyond max_connections (or during shutdown) is accepted and closed
 * at once (counted: refused promptly, never left in the backlog). fd exhaustion: libuv's
 * reserve-fd trick accepts and closes what it cannot serve; if accept still fails with
 * EMFILE/ENFILE, the listener is paused for a second - its uv handle is closed while a
 * duplicate of the listening socket (made at start, so it exists when fds are short) keeps the
 * port bound and the backlog queueing - and then resumed from that duplicate. No busy loop.
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
 * decode error closes only that connection; the target keeps its statistics.
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
#include "base/sdnotify.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define PAUSE_MS        1000
#define DRAIN_CAP       (64u << 20)  /* bytes read per connection at shutdown */
#define READ_TURN_BYTES (256u << 10) /* read share of one connection in one loop turn */

struct tlc_listener {
  tlc_ingest_t *d;
  tlc_listener_t *next;
  tlc_cfg_source_t cfg; /* name, format, address as started */
  uv_tcp_t *h;          /* NULL while paused */
  uv_timer_t *resume;   /* while paused */
  int spare_fd;         /* dup of the listening socket, -1 if none */
  int inherited;
  char bound[TLC_PEER_MAX];
};

static void free_cb(uv_handle_t *h) {
  tlc_free(h);
}

/* ---- helpers ---- */

uint64_t tlc__backoff_next(const tlc_ingest_t *d, uint64_t *cur) {
  uint64_t b = *cur == 0 ? d->cfg.backoff_min_ms : *cur * 2;
  uint64_t j;
  if (b > d->cfg.backoff_max_ms)
    b = d->cfg.backoff_max_ms;
  *cur = b;
  /* +-25% jitter, so that many targets do not reconnect in lockstep. */
  j = b / 2 > 0 ? (uint64_t)rand() % (b / 2 + 1) : 0;
  return b - b / 4 + j;
}

void tlc_target_conf_from_config(const tlc_config_t *c, const tlc_cfg_source_t *src,
                                 const char *name, tlc_format_t format, int resync,
                                 tlc_target_conf_t *out) {
  const tlc_cfg_tset_t *ts = tlc_config_tset(c, src, name);
  memset(out, 0, sizeof(*out));
  out->format = format;
  out->resync = resync;
  out->has_context_area = ts->has_context_area;
  out->context_area = ts->context_area;
  out->mapping_path = ts->mapping[0] != '\0' ? ts->mapping : NULL;
  out->nwindows = c->nwindows;
  memcpy(out->window_ns, c->window_ns, sizeof(out->window_ns));
  out->max_areas = c->max_areas;
  out->max_contexts = c->max_contexts;
  out->max_depth = c->max_depth;
  out->max_names = c->max_names;
  out->max_block = c->max_block;
  out->histograms = (uint8_t)c->histograms;
}

void tlc__target_conf(const tlc_ingest_t *d, int kind, const char *src_name, const char *name,
                      tlc_format_t format, tlc_target_conf_t *out) {
  const tlc_cfg_source_t *src = tlc_config_find_source(&d->cfg, kind, src_name);
  tlc_target_conf_from_config(&d->cfg, src, name, format, kind == TLC_SRC_SERIAL, out);
}

static void addr_text(const struct sockaddr *sa, char *ip, size_t iplen, char *full,
                      size_t fulllen) {
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
  c->prev = NULL;
  c->next = d->conns;
  if (d->conns != NULL)
    d->conns->prev = c;
  d->conns = c;
  d->nconns++;
  c->counted = 1;
}

static void conn_unlink(tlc_ingest_t *d, tlc_conn_t *c) {
  if (!c->counted)
    return;
  if (c->prev != NULL)
    c->prev->next = c->next;
  else
    d->conns = c->next;
  if (c->next != NULL)
    c->next->prev = c->prev;
  c->prev = c->next = NULL;
  d->nconns--;
  c->counted = 0;
}

static void conn_close_cb(uv_handle_t *h) {
  tlc_conn_t *c = h->data;
  if (c->dialer != NULL)
    tlc__dial_conn_closed(c->dialer, c->last_rx != 0);
  c->dialer = NULL;
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

#define REFUSE_PREFIX "tlcapd: refused: "

/* One best-effort write of the refusal line: non-blocking, never SIGPIPE (a peer that is gone
 * is EPIPE, ignored), never queued. */
static void conn_send_line(tlc_conn_t *c, const char *line, size_t n) {
  uv_os_fd_t fd;
  if (uv_fileno((uv_handle_t *)&c->h, &fd) == 0)
    (void)send(fd, line, n, MSG_NOSIGNAL | MSG_DONTWAIT);
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
  char line[sizeof(REFUSE_PREFIX) + 241]; /* the prefix, 240 bytes of reason, a newline */
  size_t n = sizeof(REFUSE_PREFIX) - 1, i;
  va_list ap;
  int k;
  if (c->accepted && !c->closing) {
    memcpy(line, REFUSE_PREFIX, n);
    va_start(ap, fmt);
    k = vsnprintf(line + n, sizeof(line) - n - 1, fmt, ap);
    va_end(ap);
    if (k >= 0) {
      n += (size_t)k < sizeof(line) - n - 1 ? (size_t)k : sizeof(line) - n - 2;
      for (i = sizeof(REFUSE_PREFIX) - 1; i < n; i++)
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
  tlc_conn_t *c = d->yielded;
  d->yielded = NULL;
  uv_check_stop(h);
  while (c != NULL) {
    tlc_conn_t *next = c->yield_next;
    c->yield_next = NULL;
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
  c->yield_next = d->yielded;
  d->yielded = c;
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
    addr_text((struct sockaddr *)&ss, c->peer_ip, sizeof(c->peer_ip), c->peer, sizeof(c->peer));
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
  for (c = d->conns; c != NULL; c = next) {
    uint64_t last = c->last_rx != 0 ? c->last_rx : c->since;
    next = c->next;
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
  for (c = d->conns; c != NULL; c = next) {
    uv_os_fd_t fd;
    size_t total = 0;
    next = c->next;
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
  d->yielded = NULL;
  if (d->resume_init) {
    d->resume_init = 0;
    uv_close((uv_handle_t *)&d->resume, NULL);
  }
}

int tlc_listen_take_fd(tlc_ingest_t *d, const char *src_name, tlc_format_t format, int fd) {
  tlc_conn_t *c = tlc_calloc(1, sizeof(*c));
  int r;
  if (c == NULL)
    return TLC_ENOMEM;
  c->d = d;
  c->h.data = c;
  snprintf(c->src_name, sizeof(c->src_name), "%s", src_name);
  c->src_format = format;
  r = uv_tcp_init(d->loop, &c->h);
  if (r != 0) {
    tlc_free(c);
    return r;
  }
  r = uv_tcp_open(&c->h, fd);
  if (r != 0) {
    /* The handle holds no fd: closing it leaves `fd` to the caller. */
    c->closing = 1;
    uv_close((uv_handle_t *)&c->h, conn_close_cb);
    return r;
  }
  d->st.accepted++;
  c->accepted = 1;
  tlc__conn_begin(c, NULL);
  return 0;
}

/* ---- listeners ---- */

static void on_connection(uv_stream_t *s, int status);

static void listener_pause(tlc_listener_t *l);

static void resume_cb(uv_timer_t *t) {
  tlc_listener_t *l = t->data;
  tlc_ingest_t *d = l->d;
  uv_tcp_t *h;
  int fd, r;
  if (l->h != NULL || l->spare_fd < 0)
    return;
  fd = dup(l->spare_fd); /* keep a spare for the next pause */
  if (fd < 0) {
    uv_timer_start(t, resume_cb, PAUSE_MS, 0);
    return;
  }
  h = tlc_malloc(sizeof(*h));
  if (h == NULL || uv_tcp_init(d->loop, h) != 0) {
    tlc_free(h);
    close(fd);
    uv_timer_start(t, resume_cb, PAUSE_MS, 0);
    return;
  }
  h->data = l;
  r = uv_tcp_open(h, fd);
  if (r == 0)
    r = uv_listen((uv_stream_t *)h, 511, on_connection);
  if (r != 0) {
    tlc_log(TLC_LOG_ERR, TLC_LOGC_TCP, "listener %s (%s): resume failed: %s", l->cfg.name, l->bound,
            uv_strerror(r));
    uv_close((uv_handle_t *)h, free_cb);
    uv_timer_start(t, resume_cb, PAUSE_MS, 0);
    return;
  }
  l->h = h;
  tlc_log(TLC_LOG_NOTICE, TLC_LOGC_TCP, "listener %s (%s): accepting again", l->cfg.name, l->bound);
}

static void listener_pause(tlc_listener_t *l) {
  if (l->h == NULL || l->spare_fd < 0 || l->resume == NULL)
    return; /* without a spare, libuv's reserve-fd trick is all there is */
  l->d->st.accept_pauses++;
  tlc_log(TLC_LOG_WARN, TLC_LOGC_TCP,
          "listener %s (%s): out of file descriptors; not accepting for %d ms", l->cfg.name,
          l->bound, PAUSE_MS);
  uv_close((uv_handle_t *)l->h, free_cb);
  l->h = NULL;
  uv_timer_start(l->resume, resume_cb, PAUSE_MS, 0);
}

static void on_connection(uv_stream_t *s, int status) {
  tlc_listener_t *l = s->data;
  tlc_ingest_t *d = l->d;
  tlc_conn_t *c;
  int r;
  if (status < 0) {
    d->st.accept_errors++;
    tlc_log(TLC_LOG_WARN, TLC_LOGC_TCP, "listener %s (%s): accept: %s", l->cfg.name, l->bound,
            uv_strerror(status));
    if (status == UV_EMFILE || status == UV_ENFILE || status == UV_ENOBUFS || status == UV_ENOMEM)
      listener_pause(l);
    return;
  }
  c = tlc_calloc(1, sizeof(*c));
  if (c == NULL) {
    /* Not accepting leaves the connection queued and libuv stops polling this listener; pause
     * so that it is retried instead of stuck. */
    listener_pause(l);
    return;
  }
  c->d = d;
  c->h.data = c;
  snprintf(c->src_name, sizeof(c->src_name), "%s", l->cfg.name);
  c->src_format = l->cfg.format;
  uv_tcp_init(d->loop, &c->h);
  r = uv_accept(s, (uv_stream_t *)&c->h);
  if (r != 0) {
    d->st.accept_errors++;
    c->closing = 1;
    uv_close((uv_handle_t *)&c->h, conn_close_cb);
    return;
  }
  d->st.accepted++;
  c->accepted = 1;
  if (l->cfg.allow[0] != '\0') {
    /* the listener's `allow` list: another peer is reset at once, before a byte of
     * it is read or a target named after it */
    struct sockaddr_storage ss;
    int len = sizeof(ss);
    memset(&ss, 0, sizeof(ss));
    if (uv_tcp_getpeername(&c->h, (struct sockaddr *)&ss, &len) != 0 ||
        !tlc_config_allow_match(l->cfg.allow, &ss)) {
      struct linger lg = { 1, 0 };
      uv_os_fd_t fd;
      char ip[64] = "?", full[TLC_PEER_MAX] = "?";
      addr_text((struct sockaddr *)&ss, ip, sizeof(ip), full, sizeof(full));
      d->st.refused_allow++;
      tlc_log(TLC_LOG_WARN, TLC_LOGC_TCP, "listener %s (%s): %s not in allow; refused", l->cfg.name,
              l->bound, full);
      if (uv_fileno((uv_handle_t *)&c->h, &fd) == 0)
        (void)setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
      c->closing = 1;
      uv_close((uv_handle_t *)&c->h, conn_close_cb);
      return;
    }
  }
  if (d->stopping || d->nconns >= d->max_conns) {
    struct linger lg = { 1, 0 };
    uv_os_fd_t fd;
    d->st.refused_limit++;
    tlc_log(TLC_LOG_WARN, TLC_LOGC_TCP,
            "listener %s (%s): max_connections (%zu) reached; refusing new connections",
            l->cfg.name, l->bound, d->max_conns);
    if (!d->stopping) {
      static const char line[] = REFUSE_PREFIX "max_connections reached\n";
      conn_send_line(c, line, sizeof(line) - 1);
    }
    if (uv_fileno((uv_handle_t *)&c->h, &fd) == 0)
      (void)setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)); /* RST: refused, promptly */
    c->closing = 1;
    uv_close((uv_handle_t *)&c->h, conn_close_cb);
    return;
  }
  tlc__conn_begin(c, NULL);
  if (!c->closing)
    TLC_LOGD(TLC_LOGC_TCP, "listener %s: connection from %s", l->cfg.name, c->peer);
}

static void listener_free_cb(uv_handle_t *h) {
  tlc_listener_t *l = h->data;
  tlc_free(h);
  if (l->spare_fd >= 0)
    close(l->spare_fd);
  tlc_free(l);
}

/* Closes a listener; memory goes in the resume timer's close callback. */
static void listener_close(tlc_listener_t *l) {
  if (l->h != NULL) {
    uv_close((uv_handle_t *)l->h, free_cb);
    l->h = NULL;
  }
  /* The spare shares the listening socket: close it now, so that the port is free at once
   * (a reload may bind the same address under another name). */
  if (l->spare_fd >= 0) {
    close(l->spare_fd);
    l->spare_fd = -1;
  }
  uv_close((uv_handle_t *)l->resume, listener_free_cb);
}

static int resolve_bind(const char *host, uint16_t port, struct sockaddr_storage *ss) {
  const char *h = strcmp(host, "localhost") == 0 ? "127.0.0.1" : host;
  if (uv_ip4_addr(h, port, (struct sockaddr_in *)ss) == 0)
    return 0;
  if (uv_ip6_addr(h, port, (struct sockaddr_in6 *)ss) == 0)
    return 0;
  return UV_EINVAL;
}

/* Creates a listener over `fd` (inherited, >= 0) or binding cfg's address (fd < 0). */
static int listener_start(tlc_ingest_t *d, const tlc_cfg_source_t *cfg, int fd,
                          tlc_listener_t **out) {
  tlc_listener_t *l = tlc_calloc(1, sizeof(*l));
  struct sockaddr_storage ss;
  int len = sizeof(ss);
  char ip[64];
  uv_os_fd_t lfd;
  int r;
  if (l == NULL)
    return TLC_ENOMEM;
  l->d = d;
  l->cfg = *cfg;
  l->spare_fd = -1;
  l->inherited = fd >= 0;
  l->h = tlc_malloc(sizeof(*l->h));
  l->resume = tlc_malloc(sizeof(*l->resume));
  if (l->h == NULL || l->resume == NULL) {
    tlc_free(l->h);
    tlc_free(l->resume);
    tlc_free(l);
    return TLC_ENOMEM;
  }
  uv_timer_init(d->loop, l->resume);
  l->resume->data = l;
  uv_tcp_init(d->loop, l->h);
  l->h->data = l;
  if (fd >= 0) {
    r = uv_tcp_open(l->h, fd);
  } else {
    r = resolve_bind(cfg->host, cfg->port, &ss);
    if (r != 0) {
      tlc_log(TLC_LOG_ERR, TLC_LOGC_TCP,
              "listener %s: address \"%s\" is not an IP address (names are not resolved for "
              "listening)",
              cfg->name, cfg->host);
      goto fail;
    }
    r = uv_tcp_bind(l->h, (const struct sockaddr *)&ss, 0);
  }
  if (r == 0)
    r = uv_listen((uv_stream_t *)l->h, 511, on_connection);
  if (r != 0) {
    tlc_log(TLC_LOG_ERR, TLC_LOGC_TCP, "listener %s: cannot listen on %s:%u: %s", cfg->name,
            cfg->host, cfg->port, uv_strerror(r));
    goto fail;
  }
  if (uv_tcp_getsockname(l->h, (struct sockaddr *)&ss, &len) == 0)
    addr_text((struct sockaddr *)&ss, ip, sizeof(ip), l->bound, sizeof(l->bound));
  if (uv_fileno((uv_handle_t *)l->h, &lfd) == 0) {
    l->spare_fd = fcntl(lfd, F_DUPFD_CLOEXEC, 0);
  }
  tlc_log(TLC_LOG_INFO, TLC_LOGC_TCP, "listener %s: %s on %s%s", cfg->name,
          tlc_format_name(cfg->format), l->bound, l->inherited ? " (socket activation)" : "");
  *out = l;
  return 0;
fail:
  listener_close(l);
  return r;
}

static int same_address(const tlc_cfg_source_t *a, const tlc_cfg_source_t *b) {
  return a->port == b->port && strcmp(a->host, b->host) == 0;
}

static void cfg_address(const tlc_cfg_source_t *s, char *buf, size_t len) {
  snprintf(buf, len, strchr(s->host, ':') != NULL ? "[%s]:%u" : "%s:%u", s->host, s->port);
}

int tlc_listen_check_reload(const tlc_ingest_t *d, const tlc_config_t *nc, char *why,
                            size_t whylen) {
  size_t n = 0;
  int r = 0;
  if (whylen > 0)
    why[0] = '\0';
  for (const tlc_listener_t *l = d->listeners; l != NULL; l = l->next) {
    const tlc_cfg_source_t *s = tlc_config_find_source(nc, TLC_SRC_LISTEN, l->cfg.name);
    char from[TLC_CFG_HOST + 8], to[TLC_CFG_HOST + 8];
    int w;
    /* An inherited socket's address is the socket unit's: the file's does not apply. */
    if (s == NULL || l->inherited || same_address(s, &l->cfg))
      continue;
    cfg_address(&l->cfg, from, sizeof(from));
    cfg_address(s, to, sizeof(to));
    w = snprintf(why + n, whylen > n ? whylen - n : 0, "%slistener %s: address %s -> %s",
                 r != 0 ? "; " : "", l->cfg.name, from, to);
    if (w > 0)
      n = n + (size_t)w < whylen ? n + (size_t)w : whylen;
    r = TLC_EINVAL;
  }
  return r;
}

size_t tlc_listen_count(const tlc_ingest_t *d) {
  size_t n = 0;
  for (const tlc_listener_t *l = d->listeners; l != NULL; l = l->next)
    n++;
  return n;
}

static const char *fd_name_format(const char *name, tlc_format_t *f) {
  const char *dash = strrchr(name, '-');
  *f = tlc_format_parse(name);
  if (*f == TLC_FMT_NONE && dash != NULL)
    *f = tlc_format_parse(dash + 1);
  return name;
}

int tlc_listen_adopt(tlc_ingest_t *d) {
  tlc_sd_fd_t *fds;
  int n = tlc_sd_listen_fds(&fds);
  if (n < 0)
    return n;
  for (int i = 0; i < n; i++) {
    tlc_sd_fd_t *f = &fds[i];
    char why[160];
    const tlc_cfg_source_t *src = NULL;
    tlc_cfg_source_t tmp;
    tlc_listener_t *l;
    tlc_format_t fmt;
    int r;
    if (strcmp(f->name, "serve") == 0 || strcmp(f->name, "subscribe") == 0)
      continue; /* pubsub's */
    r = tlc_sd_check_stream_listener(f->fd, 0, why, sizeof(why));
    if (r != 0) {
      tlc_log(TLC_LOG_ERR, TLC_LOGC_TCP, "socket activation: fd %d (\"%s\"): %s", f->fd, f->name,
              why);
      return r;
    }
    src = tlc_config_find_source(&d->cfg, TLC_SRC_LISTEN, f->name);
    if (src == NULL) {
      /* Not a listener's name (or unnamed: "unknown", or the socket unit's name): match a
       * configured listener by its bound address. */
      struct sockaddr_storage ss;
      socklen_t sl = sizeof(ss);
      char ip[64], full[TLC_PEER_MAX];
      if (getsockname(f->fd, (struct sockaddr *)&ss, &sl) == 0) {
        addr_text((struct sockaddr *)&ss, ip, sizeof(ip), full, sizeof(full));
        for (size_t j = 0; j < d->cfg.nsrc && src == NULL; j++) {
          const tlc_cfg_source_t *s = &d->cfg.src[j];
          char want[TLC_PEER_MAX];
          snprintf(want, sizeof(want), strchr(s->host, ':') ? "[%s]:%u" : "%s:%u", s->host,
                   s->port);
          if (s->kind == TLC_SRC_LISTEN && strcmp(want, full) == 0)
            src = s;
        }
      }
    }
    if (src == NULL) {
      fd_name_format(f->name, &fmt);
      if (fmt == TLC_FMT_NONE || tlc_target_name_check(f->name, d->cfg.max_name) != 0) {
        tlc_log(TLC_LOG_ERR, TLC_LOGC_TCP,
                "socket activation: fd %d named \"%s\" matches no [listen NAME] and names no "
                "format (use FileDescriptorName=NAME of a configured listener, or bin10, "
                "bin11, evlog, or NAME-FORMAT)",
                f->fd, f->name);
        return UV_EINVAL;
      }
      memset(&tmp, 0, sizeof(tmp));
      tmp.kind = TLC_SRC_LISTEN;
      snprintf(tmp.name, sizeof(tmp.name), "%s", f->name);
      tmp.format = fmt;
      snprintf(tmp.origin, sizeof(tmp.origin), "socket activation");
      src = &tmp;
    }
    for (l = d->listeners; l != NULL; l = l->next)
      if (strcmp(l->cfg.name, src->name) == 0)
        break;
    if (l != NULL) {
      tlc_log(TLC_LOG_ERR, TLC_LOGC_TCP, "socket activation: two fds for listener %s", src->name);
      return UV_EINVAL;
    }
    r = listener_start(d, src, f->fd, &l);
    if (r != 0)
      return r;
    f->taken = 1;
    l->next = d->listeners;
    d->listeners = l;
  }
  return 0;
}

int tlc_listen_sync(tlc_ingest_t *d) {
  tlc_listener_t **pp = &d->listeners;
  int first_err = 0;
  /* Stop what is gone or changed. */
  while (*pp != NULL) {
    tlc_listener_t *l = *pp;
    const tlc_cfg_source_t *s =
        d->stopping ? NULL : tlc_config_find_source(&d->cfg, TLC_SRC_LISTEN, l->cfg.name);
    /* A listener that keeps its name keeps its socket: a reload that would move it was
     * refused before (tlc_listen_check_reload: restart required), so only its format and
     * per-target settings change, for connections accepted from now on. An inherited socket
     * belongs to the socket unit: it stays for the daemon's life (a reload cannot re-create
     * it); its settings follow a [listen NAME] of the same name. */
    int keep = !d->stopping && (l->inherited || s != NULL);
    if (keep) {
      if (s != NULL) {
        tlc_cfg_source_t c = *s;
        snprintf(c.host, sizeof(c.host), "%s", l->cfg.host);
        c.port = l->cfg.port;
        if (c.format != l->cfg.format)
          tlc_log(TLC_LOG_INFO, TLC_LOGC_TCP,
                  "listener %s (%s): format %s for connections accepted from now on", c.name,
                  l->bound, tlc_format_name(c.format));
        l->cfg = c;
      }
      pp = &l->next;
      continue;
    }
    tlc_log(TLC_LOG_INFO, TLC_LOGC_TCP, "listener %s (%s): stopped", l->cfg.name, l->bound);
    *pp = l->next;
    listener_close(l);
  }
  if (d->stopping)
    return 0;
  /* Start what is new. */
  for (size_t i = 0; i < d->cfg.nsrc; i++) {
    const tlc_cfg_source_t *s = &d->cfg.src[i];
    tlc_listener_t *l;
    int r;
    if (s->kind != TLC_SRC_LISTEN)
      continue;
    for (l = d->listeners; l != NULL; l = l->next)
      if (strcmp(l->cfg.name, s->name) == 0)
        break;
    if (l != NULL)
      continue;
    r = listener_start(d, s, -1, &l);
    if (r != 0) {
      if (first_err == 0)
        first_err = r;
      continue;
    }
    l->next = d->listeners;
    d->listeners = l;
  }
  return first_err;
}
