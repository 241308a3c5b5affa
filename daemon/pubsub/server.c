/* server.c - the subscriber server: options, listeners, accepting connections, the server's
 * life (see pubsub.h and docs/protocol.md), and the module's design note.
 *
 * Structure. A *subscriber* (sub) is one connection. Its *subscriptions* (subn) each refer to a
 * *feed*: the set of subscriptions, of any subscribers, with the same spec (interval, options,
 * columns, target and area filters). On each tick a feed takes from the view the rows
 * changed since its previous tick, per matching target, and merges them into that target's
 * *mirror*: every row the spec selects, each kept as its encoded bytes (a Snapshot.rows field,
 * or columnar cells). A row is encoded once when it changes. Every snapshot message is then
 * assembled from the mirror by copying bytes: the tick's delta (shared by all subscriptions of
 * the feed), the catch-up delta of a subscriber that fell behind (rows changed after the seq it
 * was last sent, up to the last tick: shared by every subscriber at that seq, and the next
 * shared delta chains on it), and the full snapshot of one that joins (shared too). So the
 * per-interval work is one engine snapshot per target and options and one encoding per changed
 * row, whatever the number of subscribers, and a slow subscriber costs a copy, never an engine
 * snapshot.
 *
 * Ticks. Feeds tick on a grid of their interval from one epoch, so feeds of the same interval
 * tick in the same pass; within a pass, feeds that ask the engine for the same thing (target,
 * base seq, windows, neutral, quantiles) share one engine snapshot. A pass takes its targets
 * cheapest first (rows at the last tick) and hands each delta to the writer at once: an event
 * that arrives during a pass waits for its target's next tick, so the targets whose snapshots
 * take microseconds go before those that take milliseconds, and their subscribers are not
 * kept waiting for the large ones to be encoded. One timer
 * fires at the earliest due time (measured on uv_hrtime, so lateness does not accumulate; a
 * feed that fell behind skips to its next grid point). tlc_pubsub_poll lets the daemon run a
 * due pass between two ingest batches, so a long loop turn does not delay it.
 *
 * Slots and sequence. A slot remembers the engine seq of the last snapshot committed to the
 * socket (sent_seq). A delta (base -> seq) fits a slot only when base == sent_seq and the slot
 * is empty; otherwise the slot drops what it held (coalescing: the subscriber was slow) and is
 * marked catch-up: when the subscriber's socket is ready again it gets the mirror's catch-up
 * delta from sent_seq (or the full snapshot, the first time). Memory per slow subscriber is
 * bounded by one message per slot, and what it finally receives is always complete. Clients
 * check that a delta's base_seq equals the previous seq of the same stream.
 *
 * Writing. The serving thread (writer.c: writer_main) does the socket writes: the loop thread hands
 * it a subscriber's in-flight messages as one job (at most one per subscriber, up to WRITE_MAX_BUFS
 * messages) and gets the job back through an async handle; the thread only reads message bytes
 * and writes to sockets (reference counts, queues and subscribers stay on the loop thread), so
 * the copies into 100 sockets are not taken from ingest. A subscriber closes its socket only
 * once its job is back (cancellation makes that prompt). Without the thread (write_on_loop, or
 * it could not start) uv_write does the same on the loop thread.
 *
 * TLS. A TLS subscriber's session (tls.h: OpenSSL over memory BIOs) is shared by the loop
 * thread, which feeds it what the socket received and reads the plaintext out (handshake,
 * requests), and the serving thread, which encrypts a job's messages into the subscriber's
 * ciphertext buffer (sized by the loop beforehand) and writes that: the session's mutex
 * serialises the two, and the encryption, like the socket copies, stays off the ingest thread.
 * Ciphertext the loop's reads produce (handshake, alerts) is taken by the next job ahead of
 * its messages, so records leave in the order they were made. Without the serving thread the
 * loop encrypts. An encrypted message is per subscriber (the shared encoding is not).
 *
 * Queues and limits. Per subscriber: control messages (replies, target events, errors: never
 * dropped) in a list, event batches in a ring of opts.max_batches (full: dropped and counted,
 * then told in a Dropped message), snapshot slots as above. queued counts the bytes of every
 * message the subscriber references, in flight included. Above obuf_hard, or above obuf_soft
 * for longer than obuf_soft_ms, it gets an ERR_OUTPUT_LIMIT error and is closed.
 *
 * Event fan-out. Batches go to the subscribers in evsubs (authenticated, with an events
 * subscription, not stalled), rebuilt when that set changes. A subscriber whose batch ring is
 * full stalls: it leaves evsubs, so a never-reading subscriber costs ingest nothing per batch (no
 * pattern match; no encoding at all when nobody takes the batch), and its drops are settled from
 * the per-target batch/event counters (batch_seq, batch_ev) when its ring drains
 * (tlc__ps_ev_settle).
 *
 * GetStats in parts (GetStats.max_rows): the subscriber remembers the request (gs); each part is
 * an engine snapshot of a handle range (view split / snapshot_part), built by
 * tlc__ps_sub_kick_once when the control queue is empty and no write is in flight, i.e. when the
 * socket has taken the previous part: one part's memory and a few milliseconds of the loop at a
 * time.
 *
 * Closing. Nothing that fills a subscriber's queue frees it: tlc__ps_sub_fail() marks it closing,
 * drops its queued messages, queues the error and lets the write completion (or the grace timer)
 * close it; memory is freed in the close callbacks only. A feed goes with its last
 * subscription (at the end of the tick pass if one is running).
 *
 * Cost. Per tick and target: one engine snapshot of the changed rows, an encoding per changed
 * row, a copy of the unchanged rows' bytes into the next mirror (O(mirror bytes)), one message
 * assembled per distinct (base, rows) and one job per subscriber. Memory: per feed and target,
 * the mirror (about twice its encoded size, double-buffered) and up to three cached messages.
 *
 * Not done here: statistics (the engine's, through the view), target lifecycle (the
 * daemon's), log formatting beyond one line per incident (the daemon's log hook rate-limits).
 * A row that a mapping loaded later makes match an area pattern appears in a feed's mirror when
 * it next changes.
 *
 * Files, by owner, each calling only the ones below it (pubsub-int.h draws the layers): server.c
 * (this note, options, listeners, accepting, close); request.c (the requests: Hello and the
 * token, Subscribe, GetStats whole and in parts, ...); range.c (range statistics:
 * GetStats.range, Subscribe.history, computed off the loop by the view's history hook);
 * feed.c (feeds, mirrors, ticks, GetStats snapshots); sub.c (a connection: its life, TLS,
 * queues, writes and the event fan-out); writer.c (the serving thread); spec.c (subscription
 * specs); msg.c (shared messages, errors, the log line). A lower file reaches an upper one only
 * through tlc_pubsub.up.
 */
#define _GNU_SOURCE /* struct ucred (SO_PEERCRED) */
#include "pubsub/pubsub.h"

#include "pubsub/pubsub-int.h"

#include "auth/peers.h"
#include "base/alloc.h"
#include "base/err.h"
#include "base/sdnotify.h"
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

/* ---- helpers ----------------------------------------------------------------------------- */

/* ---- closing ----------------------------------------------------------------------------- */

/* ---- connections ------------------------------------------------------------------------- */

static void discard_closed_cb(uv_handle_t *h) {
  tlc_pubsub_t *ps = h->data;
  tlc_free(h);
  tlc__ps_handle_closed(ps);
}

static void peer_name(tlc__ps_sub_t *s) {
  if (s->is_unix) {
#ifdef SO_PEERCRED
    struct ucred uc;
    socklen_t l = sizeof(uc);
    uv_os_fd_t fd;
    if (uv_fileno(&s->h.handle, &fd) == 0 &&
        getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &uc, &l) == 0) {
      snprintf(s->peer, sizeof(s->peer), "unix pid=%d uid=%u gid=%u", (int)uc.pid, (unsigned)uc.uid,
               (unsigned)uc.gid);
      snprintf(s->peer_ip, sizeof(s->peer_ip), "unix");
      return;
    }
#endif
    snprintf(s->peer, sizeof(s->peer), "unix");
    snprintf(s->peer_ip, sizeof(s->peer_ip), "unix");
  } else {
    struct sockaddr_storage ss;
    int l = sizeof(ss);
    char ip[64] = "?";
    int port = 0;
    if (uv_tcp_getpeername(&s->h.tcp, (struct sockaddr *)&ss, &l) == 0) {
      if (ss.ss_family == AF_INET) {
        uv_ip4_name((struct sockaddr_in *)&ss, ip, sizeof(ip));
        port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
      } else if (ss.ss_family == AF_INET6) {
        uv_ip6_name((struct sockaddr_in6 *)&ss, ip, sizeof(ip));
        port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
      }
    }
    snprintf(s->peer, sizeof(s->peer), "%s:%d", ip, port);
    snprintf(s->peer_ip, sizeof(s->peer_ip), "%s", ip);
  }
}

static void on_connection(uv_stream_t *server, int status) {
  listener_t *l = server->data;
  tlc_pubsub_t *ps = l->ps;
  tlc__ps_sub_t *s;
  int reject, r;
  if (status < 0) {
    tlc__ps_logf_(ps, TLC_PS_LOG_WARN, "accept: %s", uv_strerror(status));
    return;
  }
  if (ps->closing)
    return;
  tlc__ps_writer_start(ps);
  reject = ps->sb.nsubs - ps->sb.nrejecting >= ps->o.max_subscribers;
  s = (reject && ps->sb.nrejecting >= MAX_REJECTING) ? NULL : tlc__ps_sub_alloc(ps);
  if (s != NULL && l->tls && ps->o.tls != NULL) {
    if ((s->tls = tlc_tls_conn_new(ps->o.tls)) != NULL && uv_mutex_init(&s->tls_mu) != 0) {
      tlc_tls_conn_free(s->tls);
      s->tls = NULL;
    }
    if (s->tls == NULL) {
      tlc__ps_sub_free(s);
      s = NULL;
    }
  }
  if (s == NULL) {
    /* No room even to say why: accept and close at once, so the listener does not spin. */
    uv_handle_t *h = tlc_malloc(l->is_unix ? sizeof(uv_pipe_t) : sizeof(uv_tcp_t));
    if (h == NULL)
      return;
    if (l->is_unix)
      uv_pipe_init(ps->loop, (uv_pipe_t *)h, 0);
    else
      uv_tcp_init(ps->loop, (uv_tcp_t *)h);
    h->data = ps;
    ps->open_handles++;
    (void)uv_accept(server, (uv_stream_t *)h);
    ps->st.rejected_limit++;
    uv_close(h, discard_closed_cb);
    return;
  }
  s->is_unix = l->is_unix;
  if (l->is_unix)
    uv_pipe_init(ps->loop, &s->h.pipe, 0);
  else
    uv_tcp_init(ps->loop, &s->h.tcp);
  uv_timer_init(ps->loop, &s->timer);
  s->h.handle.data = s;
  s->timer.data = s;
  s->nhandles = 2;
  ps->open_handles += 2;
  tlc__ps_sub_link(ps, s);
  r = uv_accept(server, &s->h.stream);
  if (r < 0) {
    tlc__ps_sub_close_now(s);
    return;
  }
  ps->st.accepted++;
  if (!l->is_unix)
    uv_tcp_nodelay(&s->h.tcp, 1);
  if (ps->o.sndbuf > 0) {
    int v = ps->o.sndbuf;
    (void)uv_send_buffer_size(&s->h.handle, &v);
  }
  peer_name(s);
  if (!reject && !l->is_unix) {
    /* under the global cap, one peer address holds at most max_per_address */
    struct sockaddr_storage ss;
    int sl = sizeof(ss);
    if (uv_tcp_getpeername(&s->h.tcp, (struct sockaddr *)&ss, &sl) == 0 &&
        tlc_peers_take(&ps->sb.peers, (struct sockaddr *)&ss, (size_t)sl, &s->peer_slot) != 0) {
      reject = 2;
      ps->st.rejected_address++;
      if (ps->sb.nrejecting >= MAX_REJECTING) { /* no room to say why: closed at once */
        ps->st.rejected_limit++;
        tlc__ps_sub_close_now(s);
        return;
      }
    }
  }
  if (reject) {
    s->rejecting = 1;
    ps->sb.nrejecting++;
    if (reject == 2)
      tlc__ps_logf_(ps, TLC_PS_LOG_WARN,
                    "sub#%llu %s: refused: too many connections from this address (max %zu)",
                    (unsigned long long)s->id, s->peer, ps->o.max_per_address);
    else
      tlc__ps_logf_(ps, TLC_PS_LOG_WARN, "sub#%llu %s: refused: too many subscribers (max %zu)",
                    (unsigned long long)s->id, s->peer, ps->o.max_subscribers);
    tlc__ps_sub_fail(s, TLCAP__ERROR_CODE__ERR_TOO_MANY_SUBSCRIBERS,
                     reject == 2 ? "too many connections from this address"
                                 : "too many subscribers",
                     &ps->st.rejected_limit);
    /* TLS: the error can only be told once the handshake is done (within the grace time); the
     * handshake's input is read, nothing else (tlc__ps_sub_input ignores a closing subscriber). */
    if (s->tls != NULL && tlc__ps_sub_read_start(s) < 0)
      tlc__ps_sub_close_soon(s);
    return;
  }
  tlc__ps_logf_(ps, TLC_PS_LOG_INFO, "sub#%llu %s: connected%s", (unsigned long long)s->id, s->peer,
                s->tls != NULL ? " (TLS)" : "");
  tlc__ps_sub_deadline_start(s);
  r = tlc__ps_sub_read_start(s);
  if (r < 0)
    tlc__ps_sub_close_soon(s);
}

/* ---- server ------------------------------------------------------------------------------ */

void tlc_pubsub_opts_default(tlc_pubsub_opts_t *o) {
  memset(o, 0, sizeof(*o));
  o->max_subscribers = 256;
  o->max_subscriptions = 64;
  o->max_request = 4u << 20;
  o->max_preauth = 1024;
  o->hello_timeout_ms = 10000;
  o->obuf_hard = 32u << 20;
  o->obuf_soft = 8u << 20;
  o->obuf_soft_ms = 30000;
  o->max_batches = 64;
  o->max_batch_events = 4096;
  o->max_message = 64u << 20;
  o->min_interval_ms = 50;
  o->max_interval_ms = 3600000;
  o->close_grace_ms = 2000;
  o->request_timeout_ms = 30000;
  o->auth_fail_delay_ms = 250;
  o->tls_handshake_ms = 5000;
  o->unix_mode = 0660;
  o->daemon_version = "tlcapd " TLC_VERSION;
}

int tlc_pubsub_new(uv_loop_t *loop, const tlc_pubsub_opts_t *o, const tlc_view_t *p,
                   tlc_pubsub_t **out) {
  tlc_pubsub_t *ps;
  tlc_pubsub_opts_t d;
  size_t i;
  *out = NULL;
  if (p == NULL || p->count == NULL || p->info == NULL || p->find == NULL || p->snapshot == NULL)
    return TLC_EINVAL;
  tlc_pubsub_opts_default(&d);
  if (o == NULL)
    o = &d;
  ps = tlc_calloc(1, sizeof(*ps));
  if (ps == NULL)
    return TLC_ENOMEM;
  ps->loop = loop;
  tlc_vrate_init(&ps->vrate, TLC_VSERVE_RATE);
  ps->up.input = tlc__ps_sub_input;
  ps->up.writable = tlc__ps_gs_next;
  ps->up.release = tlc__ps_request_release;
  ps->up.catchup = tlc__ps_slot_catchup;
  ps->up.written = tlc__ps_write_done;
  ps->up.handle_closed = tlc__ps_handle_closed;
  ps->o = *o;
  ps->p = *p;
#define DEF(f)                                                                                     \
  if (ps->o.f == 0)                                                                                \
  ps->o.f = d.f
  DEF(max_subscribers);
  DEF(max_subscriptions);
  DEF(max_request);
  DEF(max_preauth);
  DEF(hello_timeout_ms);
  DEF(obuf_hard);
  DEF(obuf_soft);
  DEF(obuf_soft_ms);
  DEF(max_batches);
  DEF(max_batch_events);
  DEF(max_message);
  DEF(min_interval_ms);
  DEF(max_interval_ms);
  DEF(close_grace_ms);
  DEF(request_timeout_ms);
  DEF(auth_fail_delay_ms);
  DEF(tls_handshake_ms);
  DEF(unix_mode);
#undef DEF
  if (ps->o.daemon_version == NULL)
    ps->o.daemon_version = d.daemon_version;
  if (o->token != NULL && o->token[0] != 0) {
    ps->token_len = strlen(o->token);
    ps->token = (uint8_t *)tlc_strndup(o->token, ps->token_len);
    if (ps->token == NULL) {
      tlc_free(ps);
      return TLC_ENOMEM;
    }
  }
  ps->o.token = NULL; /* only the private copy is kept */
  ps->instance_id = o->instance_id;
  tlc_peers_init(&ps->sb.peers, ps->o.max_per_address);
  while (ps->instance_id == 0) {
    if (uv_random(NULL, NULL, &ps->instance_id, sizeof(ps->instance_id), 0, NULL) < 0)
      ps->instance_id = ((uint64_t)time(NULL) << 20) ^ (uint64_t)getpid() ^ uv_hrtime();
  }
  tlc_table_init(&ps->fd.scratch);
  tlc_pb_arena_init(&ps->fd.enc, 0);
  for (i = 0; i < SNAP_CACHE; i++)
    tlc_table_init(&ps->fd.cache[i].t);
  uv_timer_init(loop, &ps->srv.house);
  ps->srv.house.data = ps;
  uv_timer_init(loop, &ps->fd.tick_timer);
  ps->fd.tick_timer.data = ps;
  ps->open_handles = 2;
  ps->fd.epoch_ns = uv_hrtime();
  ps->fd.next_due_ns = UINT64_MAX;
  uv_timer_start(&ps->srv.house, tlc__ps_house_cb, 1000, 1000);
  *out = ps;
  return 0;
}

uint64_t tlc_pubsub_instance_id(const tlc_pubsub_t *ps) {
  return ps->instance_id;
}

void tlc_pubsub_get_stats(const tlc_pubsub_t *ps, tlc_pubsub_stats_t *out) {
  *out = ps->st;
  /* the violations' rate limiter counts what it let go and what it held back */
  out->violations_sent = ps->vrate.sent;
  out->violations_suppressed = ps->vrate.suppressed;
}

void tlc_pubsub_status(const tlc_pubsub_t *ps, char *buf, size_t len) {
  size_t n = strlen(buf);
  if (n >= len)
    return;
  snprintf(buf + n, len - n, " subscribers=%zu", ps->st.subscribers);
  n = strlen(buf);
  if (ps->o.auth != NULL && n < len) {
    tlc_auth_stats_t as;
    tlc_auth_get_stats(ps->o.auth, &as);
    snprintf(buf + n, len - n, " auth_failed=%llu", (unsigned long long)as.failed);
    n = strlen(buf);
  }
  if (ps->o.tls != NULL && n < len)
    snprintf(buf + n, len - n, " tls_failed=%llu", (unsigned long long)ps->st.closed_tls);
}

size_t tlc_pubsub_target_subscribers(const tlc_pubsub_t *ps, const char *target) {
  size_t n = 0, i;
  for (const tlc__ps_sub_t *s = LIST_FIRST(&ps->sb.subs); s != NULL; s = LIST_NEXT(s, link)) {
    if (s->closing || !s->authed)
      continue;
    for (i = 0; i < s->nsubs && !tlc__ps_spec_target(s->subs[i]->spec, target); i++)
      ;
    n += i < s->nsubs;
  }
  return n;
}

static listener_t *listener_new(tlc_pubsub_t *ps, int is_unix) {
  listener_t *l;
  if (ps->srv.nlisteners >= MAX_LISTENERS)
    return NULL;
  l = tlc_calloc(1, sizeof(*l));
  if (l == NULL)
    return NULL;
  l->ps = ps;
  l->is_unix = (uint8_t)is_unix;
  if (is_unix)
    uv_pipe_init(ps->loop, &l->h.pipe, 0);
  else
    uv_tcp_init(ps->loop, &l->h.tcp);
  l->h.handle.data = l;
  ps->open_handles++;
  ps->srv.listeners[ps->srv.nlisteners++] = l;
  return l;
}

static void listener_closed_cb(uv_handle_t *h) {
  listener_t *l = h->data;
  tlc_pubsub_t *ps = l->ps;
  tlc_free(l->path);
  tlc_free(l);
  tlc__ps_handle_closed(ps);
}

/* Undoes listener_new for a listener that never listened. */
static void listener_drop(tlc_pubsub_t *ps, listener_t *l) {
  ps->srv.nlisteners--;
  uv_close(&l->h.handle, listener_closed_cb);
}

int tlc_pubsub_listen_tcp(tlc_pubsub_t *ps, const char *host, int port, int *bound_port) {
  struct sockaddr_storage ss;
  listener_t *l;
  int r;
  if (strcmp(host, "localhost") == 0)
    host = "127.0.0.1";
  if (uv_ip4_addr(host, port, (struct sockaddr_in *)&ss) != 0 &&
      uv_ip6_addr(host, port, (struct sockaddr_in6 *)&ss) != 0) {
    tlc__ps_logf_(ps, TLC_PS_LOG_ERR, "%s is not a numeric address", host);
    return TLC_EINVAL;
  }
  if (!tlc_peers_is_loopback((struct sockaddr *)&ss) && ps->token_len == 0 && ps->o.auth == NULL) {
    tlc__ps_logf_(ps, TLC_PS_LOG_ERR,
                  "refusing to serve subscribers on non-loopback %s:%d without a token "
                  "(set token_file, or use 127.0.0.1 or a Unix socket)",
                  host, port);
    return TLC_EINVAL;
  }
  if (!tlc_peers_is_loopback((struct sockaddr *)&ss) && ps->o.tls == NULL)
    tlc__ps_logf_(
        ps, TLC_PS_LOG_WARN,
        "subscribers on non-loopback %s:%d without TLS: the token and the statistics cross "
        "the network in clear (set tls_cert and tls_key)",
        host, port);
  if ((l = listener_new(ps, 0)) == NULL)
    return TLC_ENOMEM;
  l->tls = ps->o.tls != NULL;
  if ((r = uv_tcp_bind(&l->h.tcp, (struct sockaddr *)&ss, 0)) < 0 ||
      (r = uv_listen(&l->h.stream, 128, on_connection)) < 0) {
    tlc__ps_logf_(ps, TLC_PS_LOG_ERR, "listen on %s:%d: %s", host, port, uv_strerror(r));
    listener_drop(ps, l);
    return r;
  }
  {
    int len = sizeof(ss), bound = port;
    if (uv_tcp_getsockname(&l->h.tcp, (struct sockaddr *)&ss, &len) == 0)
      bound = ntohs(ss.ss_family == AF_INET ? ((struct sockaddr_in *)&ss)->sin_port
                                            : ((struct sockaddr_in6 *)&ss)->sin6_port);
    if (bound_port != NULL)
      *bound_port = bound;
    /* the one line saying so (the daemon's wiring does not repeat it), with the bound port */
    tlc__ps_logf_(ps, TLC_PS_LOG_INFO, "serving subscribers on %s:%d%s", host, bound,
                  l->tls ? " (TLS)" : "");
  }
  return 0;
}

/* A socket file at path: 0 if absent or stale (removed), UV_EADDRINUSE if someone accepts on
 * it, UV_EEXIST if it is not a socket. */
static int unix_stale(tlc_pubsub_t *ps, const char *path) {
  struct stat st;
  struct sockaddr_un sa;
  int fd, r;
  if (lstat(path, &st) != 0)
    return 0;
  if (!S_ISSOCK(st.st_mode)) {
    tlc__ps_logf_(ps, TLC_PS_LOG_ERR, "%s exists and is not a socket: leaving it alone", path);
    return UV_EEXIST;
  }
  if (strlen(path) >= sizeof(sa.sun_path))
    return UV_ENAMETOOLONG;
  memset(&sa, 0, sizeof(sa));
  sa.sun_family = AF_UNIX;
  memcpy(sa.sun_path, path, strlen(path) + 1);
  fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return uv_translate_sys_error(errno);
  r = connect(fd, (struct sockaddr *)&sa, sizeof(sa));
  close(fd);
  if (r == 0) {
    tlc__ps_logf_(ps, TLC_PS_LOG_ERR, "%s is in use by another process", path);
    return UV_EADDRINUSE;
  }
  tlc__ps_logf_(ps, TLC_PS_LOG_NOTICE, "removing stale socket %s", path);
  if (unlink(path) != 0 && errno != ENOENT)
    return uv_translate_sys_error(errno);
  return 0;
}

int tlc_pubsub_listen_unix(tlc_pubsub_t *ps, const char *path) {
  listener_t *l;
  int r;
  if ((r = unix_stale(ps, path)) < 0)
    return r;
  if ((l = listener_new(ps, 1)) == NULL)
    return TLC_ENOMEM;
  if ((r = uv_pipe_bind(&l->h.pipe, path)) < 0) {
    tlc__ps_logf_(ps, TLC_PS_LOG_ERR, "bind %s: %s", path, uv_strerror(r));
    listener_drop(ps, l);
    return r;
  }
  l->path = tlc_strndup(path, strlen(path));
  if (l->path == NULL || chmod(path, ps->o.unix_mode) != 0 ||
      (r = uv_listen(&l->h.stream, 128, on_connection)) < 0) {
    if (l->path == NULL)
      r = TLC_ENOMEM;
    else if (r >= 0)
      r = uv_translate_sys_error(errno);
    tlc__ps_logf_(ps, TLC_PS_LOG_ERR, "listen on %s: %s", path, tlc_strerror(r));
    unlink(path);
    listener_drop(ps, l);
    return r;
  }
  tlc__ps_logf_(ps, TLC_PS_LOG_INFO, "serving subscribers on unix:%s (mode %03o)", path,
                ps->o.unix_mode);
  return 0;
}

int tlc_pubsub_listen_fd(tlc_pubsub_t *ps, int fd, int is_unix) {
  listener_t *l;
  int r;
  if (!is_unix) {
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);
    if (getsockname(fd, (struct sockaddr *)&ss, &len) != 0)
      return uv_translate_sys_error(errno);
    if (!tlc_peers_is_loopback((struct sockaddr *)&ss) && ps->token_len == 0 &&
        ps->o.auth == NULL) {
      tlc__ps_logf_(ps, TLC_PS_LOG_ERR,
                    "refusing a non-loopback subscriber socket without a token");
      return TLC_EINVAL;
    }
    if (!tlc_peers_is_loopback((struct sockaddr *)&ss) && ps->o.tls == NULL)
      tlc__ps_logf_(ps, TLC_PS_LOG_WARN, "a non-loopback subscriber socket without TLS");
  }
  if ((l = listener_new(ps, is_unix)) == NULL)
    return TLC_ENOMEM;
  l->tls = !is_unix && ps->o.tls != NULL;
  r = is_unix ? uv_pipe_open(&l->h.pipe, fd) : uv_tcp_open(&l->h.tcp, fd);
  if (r < 0 || (r = uv_listen(&l->h.stream, 128, on_connection)) < 0) {
    listener_drop(ps, l);
    return r;
  }
  return 0;
}

int tlc_pubsub_adopt(tlc_pubsub_t *ps, tlc_sd_fd_t *fds, int n) {
  for (int i = 0; i < n; i++) {
    char why[160];
    int is_unix, r;
    if (fds[i].taken ||
        (strcmp(fds[i].name, "serve") != 0 && strcmp(fds[i].name, "subscribe") != 0))
      continue;
    is_unix = tlc_sd_check_stream_listener(fds[i].fd, 1, why, sizeof(why)) == 0;
    if (!is_unix && (r = tlc_sd_check_stream_listener(fds[i].fd, 0, why, sizeof(why))) != 0) {
      tlc__ps_logf_(ps, TLC_PS_LOG_ERR, "socket activation: fd %d (\"%s\"): %s", fds[i].fd,
                    fds[i].name, why);
      return r;
    }
    r = tlc_pubsub_listen_fd(ps, fds[i].fd, is_unix);
    if (r != 0) {
      tlc__ps_logf_(ps, TLC_PS_LOG_ERR, "socket activation: fd %d: %s", fds[i].fd, tlc_strerror(r));
      return r;
    }
    fds[i].taken = 1;
  }
  return 0;
}

/* Called once per closed handle of ours; frees the server after the last one while closing. */
void tlc__ps_handle_closed(tlc_pubsub_t *ps) {
  void (*cb)(void *);
  void *ud;
  size_t i;
  if (--ps->open_handles > 0 || !ps->closing)
    return;
  cb = ps->close_cb;
  ud = ps->close_ud;
  tlc_table_fini(&ps->fd.scratch);
  tlc_pb_arena_fini(&ps->fd.enc);
  for (i = 0; i < SNAP_CACHE; i++)
    tlc_table_fini(&ps->fd.cache[i].t);
  while (!LIST_EMPTY(&ps->fd.feeds)) { /* every subscription is gone: released ones, if any */
    feed_t *f = LIST_FIRST(&ps->fd.feeds);
    tlc__ps_feed_unlink(f);
    tlc__ps_feed_free(f);
  }
  tlc_free(ps->token);
  tlc_free(ps->sb.batch_seq);
  tlc_free(ps->sb.batch_ev);
  tlc_free(ps->sb.evsubs);
  tlc_peers_fini(&ps->sb.peers);
  tlc_vrate_fini(&ps->vrate);
  tlc_free(ps);
  if (cb != NULL)
    cb(ud);
}

static void house_closed_cb(uv_handle_t *h) {
  tlc__ps_handle_closed(h->data);
}

/* Every second: the soft limit also applies to subscribers that receive nothing new. */
void tlc__ps_house_cb(uv_timer_t *t) {
  tlc_pubsub_t *ps = t->data;
  tlc__ps_sub_t *s, *next;
  LIST_FOREACH_SAFE(s, &ps->sb.subs, link, next) {
    if (!s->closing && s->queued > ps->o.obuf_soft)
      tlc__ps_limits_check(s);
  }
}

void tlc_pubsub_close(tlc_pubsub_t *ps, void (*cb)(void *ud), void *ud) {
  size_t i;
  ps->closing = 1;
  ps->close_cb = cb;
  ps->close_ud = ud;
  for (i = 0; i < ps->srv.nlisteners; i++) {
    listener_t *l = ps->srv.listeners[i];
    if (l->path != NULL)
      unlink(l->path);
    uv_close(&l->h.handle, listener_closed_cb);
  }
  ps->srv.nlisteners = 0;
  while (!LIST_EMPTY(&ps->sb.subs)) {
    tlc__ps_sub_t *s = LIST_FIRST(&ps->sb.subs);
    if (!s->detached && !s->closed) {
      /* One best-effort attempt to say why; never wait for a subscriber on the way out. With
       * a job at the serving thread, when the job comes back (between two messages). */
      if (s->in_writer)
        s->shutdown_note = 1;
      else
        tlc__ps_shutdown_note(s);
    }
    tlc__ps_sub_close_now(
        s); /* unlinks s (detached ones are only unlinked: their owner frees them) */
  }
  uv_timer_stop(&ps->srv.house);
  uv_close((uv_handle_t *)&ps->srv.house, house_closed_cb);
  uv_timer_stop(&ps->fd.tick_timer);
  uv_close((uv_handle_t *)&ps->fd.tick_timer, house_closed_cb);
  if (ps->sb.jobs_inflight == 0)
    tlc__ps_writer_stop(ps); /* else when the cancelled jobs come back (tlc__ps_writer_done_cb) */
}
