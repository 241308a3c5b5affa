/* efl.c - EFL applications as live evlog targets, through the EFL debug daemon (efl_debugd).
 *
 * One tlc_efl_t per [efl NAME] / --efl NAME=PATTERN. It is a debugger ("master") client of
 * efl_debugd on its TCP port (127.0.0.1:6666: efl_debugd treats TCP clients as debuggers and
 * Unix-socket clients as applications, and relays only between the two kinds), and does what
 * `efl_debug evlogon PID SECONDS` does, for every application whose name or pid matches the
 * pattern, for as long as it runs (docs/efl.md has the protocol and the choices):
 *
 *   connect -> hello, register our opcode names -> ids -> register_observer
 *   with efl_debugd's Unix socket present: a probe says hello through it under a random name;
 *       the port is trusted once it announces that probe (applications wait until then), else
 *       dropped after VERIFY_TIMEOUT_MS (another program may hold the port)
 *   "added" (cid, pid, name), for each application, now and whenever one starts:
 *       match -> target NAME/<app>-<pid> attached; "CPU/Freq/on" to it; at the source's
 *       max_targets, the detached target of an exited application of that name, or refused
 *   every poll_ms: "EvLog/get" to each application (one outstanding per application)
 *   reply: u32 overflow + items -> one efl_debug-style block (magic, size, overflow, items)
 *       fed to the target, streamed straight from the socket (no 4 MiB buffer)
 *   "deleted" (cid) -> the target detaches (a gap: "application exited")
 *   efl_debugd gone -> every target detaches; reconnect with backoff
 *   stop (SIGHUP without it, shutdown) -> "CPU/Freq/off" (or "EvLog/off") to each, targets
 *       detach, the socket is shut down once those are written and closed when efl_debugd closes
 *       its side (bounded by a 1 s timer: a close with its replies unread would reset)
 *
 * The EFL 1.26.3 bug: eina registers its "CPU/Freq/on" handler before the debug session exists,
 * so an application answers it only if it registers a handler itself. Without one its evlog
 * stays off and every reply is empty (no overflow word; efl_debug then writes a block size
 * 0xfffffffc). Replies are matched to requests by order (efl_debugd relays in order, the
 * application's monitor thread answers in order), so an empty reply to a get sent after our
 * "on" proves that the "on" had no effect: it is sent again while the application may still be
 * registering its handlers (GRACE), then the application is reported (a warning naming pid and
 * reason, state "no-cpufreq" in the stats dump and STATUS, and a disconnect/connect of its
 * target with that reason and a peer text ending in "no-cpufreq") and its evlog is started with
 * "EvLog/on", which eina registers correctly; the capture then goes on without CPU frequency
 * events. If even that stays off, the state is "evlog-off" and "EvLog/on" is retried.
 *
 * Bounds: targets per source (max_targets), matched applications per source (MAX_APPS),
 * control packets held whole (CTL_MAX),
 * efl_debugd's own packet cap for streamed replies (decoder-checked), bytes queued to
 * efl_debugd (WQ_MAX: polls are skipped and counted beyond it), one outstanding get per
 * application (re-sent after GET_TIMEOUT). An evlog reply larger than max_block is skipped
 * with a gap. Everything runs on the loop thread.
 *
 * Not done: debugging through the Unix socket (efl_debugd takes its clients for applications:
 * it only vouches for the port, through the probe), host names for `debugd` (an IP address;
 * efl_debugd binds 127.0.0.1), and a last EvLog/get before the off at shutdown (storage closes
 * right after the sources stop).
 *
 * Files: this one is the connection to efl_debugd (connect, the conversation, the probe, start
 * and stop, the source kind); efl_app.c the applications it reports (targets, evlog on and off,
 * replies) and the packets written; efl-int.h what they share. efl_app.c never calls this file.
 */
#include "ingest/efl-int.h"

#include "base/alloc.h"
#include "base/err.h"
#include "base/log.h"
#include "formats/efldbg.h"
#include "formats/json.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *const op_names[OP_N] = { "Daemon/Client/register_observer",
                                            "Daemon/Client/added",
                                            "Daemon/Client/deleted",
                                            "CPU/Freq/on",
                                            "CPU/Freq/off",
                                            "EvLog/get",
                                            "EvLog/on",
                                            "EvLog/off" };
static const char *const state_names[] = { "waiting", "capturing", "no-cpufreq", "evlog-off" };

static void lost(tlc_efl_t *e, const char *why);
static void probe_seen(tlc_efl_t *e, const tlc_efldbg_client_t *c, uint64_t now);
static void timer_cb(uv_timer_t *t);
static void schedule(tlc_efl_t *e);
static void close_tcp(tlc_efl_t *e);
static void stop_done(tlc_efl_t *e);

static uint64_t get_timeout_ms(const tlc_efl_t *e) {
  uint64_t t = 4ull * e->src.cfg.poll_ms;
  return t < 2000 ? 2000 : t;
}

static void maybe_free(tlc_efl_t *e) {
  if (e->stopping && e->handles == 0) {
    tlc_efldbg_rd_fini(&e->rd);
    tlc_free(e);
  }
}

static void handle_free_cb(uv_handle_t *h) {
  tlc_efl_t *e = h->data;
  tlc_free(h);
  e->handles--;
  maybe_free(e);
}

/* ---- the probe: is the debugger port the efl_debugd of the Unix socket? ---- */

/* efl_debugd's Unix socket as eina finds it ((:usr.run:)/.edebug/efl_debug/0: $XDG_RUNTIME_DIR,
 * else $HOME, else $TMPDIR or /tmp), or the section's debugd_socket; "" for "none". */
static void socket_path(const tlc_cfg_source_t *c, char *out, size_t cap) {
  const char *dir;
  out[0] = '\0';
  if (strcmp(c->debugd_socket, "none") == 0)
    return;
  if (c->debugd_socket[0] != '\0') {
    snprintf(out, cap, "%s", c->debugd_socket);
    return;
  }
  dir = getenv("XDG_RUNTIME_DIR");
  if (dir == NULL || dir[0] == '\0')
    dir = getenv("HOME");
  if (dir == NULL || dir[0] == '\0')
    dir = getenv("TMPDIR");
  if (dir == NULL || dir[0] == '\0')
    dir = "/tmp";
  if ((size_t)snprintf(out, cap, "%s/.edebug/efl_debug/0", dir) >= cap)
    out[0] = '\0';
}

static void close_probe(tlc_efl_t *e) {
  if (e->probe == NULL)
    return;
  uv_close((uv_handle_t *)e->probe, handle_free_cb);
  e->probe = NULL;
}

/* The debugger port did not prove to be the socket's efl_debugd: nothing of it is trusted
 * (no application was captured from it); the connection is dropped and made again later. */
static void untrusted(tlc_efl_t *e, const char *why) {
  char msg[TLC_CFG_PATH + 200];
  e->untrusted++;
  tlc_log(TLC_LOG_WARN, TLC_LOGC_EFL,
          "efl %s: efl_debugd %s is not trusted: %s; no application captured from it, "
          "retrying with backoff (docs/efl.md)",
          e->src.cfg.name, e->addr, why);
  snprintf(msg, sizeof(msg), "not the efl_debugd of %s", e->sock);
  lost(e, msg);
}

static void probe_connect_cb(uv_connect_t *req, int status) {
  tlc_efl_t *e = req->data;
  uint8_t pkt[128];
  int n;
  if (status == UV_ECANCELED || e->stopping || e->probe == NULL ||
      (uv_pipe_t *)req->handle != e->probe)
    return;
  if (status == UV_EAGAIN) {
    /* Its backlog is full (efl_debugd listens with a backlog of 0: two clients connecting at
     * once are enough): tried again at the next poll, within VERIFY_TIMEOUT_MS. */
    e->probe_busy++;
    close_probe(e);
    return;
  }
  if (status < 0) {
    char why[TLC_CFG_PATH + 96];
    snprintf(why, sizeof(why), "efl_debugd's socket %s refuses our probe (%s)", e->sock,
             uv_strerror(status));
    untrusted(e, why);
    return;
  }
  n = tlc_efldbg_build_hello(pkt, sizeof(pkt), 1, (int32_t)getpid(), e->probe_name);
  if (n < 0 || tlc__efl_send_raw_to((uv_stream_t *)e->probe, pkt, (size_t)n) != 0)
    untrusted(e, "cannot write our probe to its socket");
}

/* Connects the probe to efl_debugd's socket (again after a full backlog: poll_cb). */
static void probe_open(tlc_efl_t *e) {
  if (e->probe != NULL || e->verify != VERIFY_PENDING)
    return;
  e->probe = tlc_malloc(sizeof(*e->probe));
  if (e->probe == NULL)
    return; /* tried again at the next poll */
  uv_pipe_init(e->src.d->loop, e->probe, 0);
  e->probe->data = e;
  e->handles++;
  e->preq.data = e;
  uv_pipe_connect(&e->preq, e->probe, e->sock, probe_connect_cb);
}

/* Once registered: with efl_debugd's socket present (required when debugd_socket names it), a probe
 * - a client of the socket that only says hello, under a name nobody else knows - goes in through
 * it, and the applications the port lists wait (targets, evlog) until the port announces the probe.
 * efl_debugd relays between its socket's applications and its port's debuggers, so only the
 * efl_debugd that serves the socket can; a program that took the port first cannot. Without the
 * socket the port is taken as it is (logged once). */
static void verify_start(tlc_efl_t *e) {
  struct stat st;
  uint64_t nonce = 0;
  e->verify = VERIFY_NONE;
  e->probe_busy = 0;
  if (e->sock[0] == '\0')
    return;
  if (stat(e->sock, &st) != 0 || !S_ISSOCK(st.st_mode)) {
    if (e->src.cfg.debugd_socket[0] != '\0') {
      char why[TLC_CFG_PATH + 64];
      snprintf(why, sizeof(why), "no efl_debugd socket at %s (debugd_socket)", e->sock);
      untrusted(e, why);
      return;
    }
    if (!e->sock_missing)
      tlc_log(TLC_LOG_NOTICE, TLC_LOGC_EFL,
              "efl %s: no efl_debugd socket at %s: efl_debugd %s is taken unverified "
              "(docs/efl.md)",
              e->src.cfg.name, e->sock, e->addr);
    e->sock_missing = 1;
    return;
  }
  e->sock_missing = 0;
  if (uv_random(NULL, NULL, &nonce, sizeof(nonce), 0, NULL) != 0)
    nonce = ((uint64_t)rand() << 32) ^ (uint64_t)rand() ^ uv_hrtime();
  snprintf(e->probe_name, sizeof(e->probe_name), PROBE_PREFIX "%016" PRIx64, nonce);
  e->verify = VERIFY_PENDING;
  uv_timer_start(e->timer, timer_cb, VERIFY_TIMEOUT_MS, 0);
  probe_open(e);
}

/* An "added" carrying PROBE_PREFIX: ours proves the port (the waiting applications are
 * captured now); another tlcapd's (or an earlier connection's) is ignored. */
static void probe_seen(tlc_efl_t *e, const tlc_efldbg_client_t *c, uint64_t now) {
  efl_app_t *a, *next;
  if (e->verify != VERIFY_PENDING || strcmp(c->name, e->probe_name) != 0) {
    e->ignored++;
    return;
  }
  e->verify = VERIFY_OK;
  e->verified++;
  uv_timer_stop(e->timer);
  close_probe(e); /* efl_debugd announces its end as "deleted" (cid unknown here: ignored) */
  tlc_log(TLC_LOG_INFO, TLC_LOGC_EFL, "efl %s: efl_debugd %s verified through its socket %s",
          e->src.cfg.name, e->addr, e->sock);
  LIST_FOREACH_SAFE(a, &e->apps, link, next) {
    if (a->target == NULL && tlc__efl_app_capture(e, a, now) != 0)
      tlc__efl_app_drop(e, a);
  }
}

/* ---- the conversation ---- */

static void poll_cb(uv_timer_t *t) {
  tlc_efl_t *e = t->data;
  uint64_t now = uv_now(t->loop);
  if (!e->registered || e->tcp == NULL || e->stopping)
    return;
  if (e->verify == VERIFY_PENDING && e->probe == NULL)
    probe_open(e); /* the socket's backlog was full */
  if (uv_stream_get_write_queue_size((uv_stream_t *)e->tcp) > WQ_MAX) {
    e->polls_skipped++; /* efl_debugd does not read: no more requests pile up */
    return;
  }
  efl_app_t *a;
  LIST_FOREACH(a, &e->apps, link) {
    if (a->target == NULL)
      continue; /* waiting for the verification */
    if (a->pending && now - a->pending_since < get_timeout_ms(e))
      continue;
    if (a->pending)
      a->timeouts++; /* dropped (the application had no handler yet) or very late */
    if (tlc__efl_send_pkt(e, a->cid, e->op[OP_EV_GET], NULL, 0) != 0)
      continue;
    a->pending = 1;
    a->pending_after_on = a->on_kind != ON_NONE;
    a->pending_since = now;
  }
}

static void on_ctl(tlc_efl_t *e, const tlc_efldbg_msg_t *m, uint64_t now) {
  size_t off = 0;
  int r;
  if (m->hdr.opcode == TLC_EFLDBG_OP_REGISTER && !e->registered) {
    uint64_t cookie;
    int32_t ids[OP_N];
    size_t n;
    if (tlc_efldbg_register_reply(m->data, m->len, &cookie, ids, OP_N, &n) != 0 ||
        cookie != e->cookie || n != OP_N) {
      e->protocol_errors++;
      lost(e, "malformed answer to the opcode registration");
      return;
    }
    memcpy(e->op, ids, sizeof(ids));
    e->rd.stream_op = e->op[OP_EV_GET];
    e->registered = 1;
    if (tlc__efl_send_pkt(e, 0, e->op[OP_OBSERVE], NULL, 0) != 0) {
      lost(e, "cannot send to efl_debugd");
      return;
    }
    if (e->poll != NULL)
      uv_timer_start(e->poll, poll_cb, e->src.cfg.poll_ms, e->src.cfg.poll_ms);
    verify_start(e);
    return;
  }
  if (!e->registered) {
    e->ignored++;
    return;
  }
  if (m->hdr.opcode == e->op[OP_ADDED]) {
    tlc_efldbg_client_t c;
    while ((r = tlc_efldbg_added_next(m->data, m->len, &off, &c)) > 0) {
      if (c.cid != 0 && strncmp(c.name, PROBE_PREFIX, strlen(PROBE_PREFIX)) == 0)
        probe_seen(e, &c, now); /* a tlcapd's probe (docs/efl.md), never an application */
      else
        tlc__efl_app_added(e, &c, now);
    }
    if (r < 0) {
      e->protocol_errors++;
      tlc_log(TLC_LOG_WARN, TLC_LOGC_EFL,
              "efl %s: efl_debugd %s: malformed \"added\" message (%zu bytes), rest ignored",
              e->src.cfg.name, e->addr, m->len);
    }
    return;
  }
  if (m->hdr.opcode == e->op[OP_DELETED]) {
    int32_t cid;
    while ((r = tlc_efldbg_deleted_next(m->data, m->len, &off, &cid)) > 0)
      tlc__efl_app_deleted(e, cid);
    if (r < 0)
      e->protocol_errors++;
    return;
  }
  e->ignored++;
}

static void process(tlc_efl_t *e, const uint8_t *buf, size_t len) {
  uint64_t now = uv_now(e->src.d->loop);
  while (len > 0 || e->rd.phase == 4) {
    tlc_efldbg_msg_t m;
    size_t used;
    int k = tlc_efldbg_rd_push(&e->rd, buf, len, &used, &m);
    buf += used;
    len -= used;
    if (k < 0) {
      char why[220];
      e->protocol_errors++;
      snprintf(why, sizeof(why), "protocol error at byte %" PRIu64 ": %s", e->rd.err_offset,
               e->rd.err_reason);
      lost(e, why);
      return;
    }
    switch (k) {
    case TLC_EFLDBG_CTL:
      on_ctl(e, &m, now);
      break;
    case TLC_EFLDBG_BEGIN:
      if (m.hdr.opcode == e->rd.stream_op && e->registered)
        tlc__efl_reply_begin(e, &m, now);
      else
        e->cur = NULL, e->ignored++;
      break;
    case TLC_EFLDBG_DATA:
      tlc__efl_reply_data(e, &m);
      break;
    case TLC_EFLDBG_END:
      e->cur = NULL;
      break;
    default:
      return; /* NEED */
    }
    if (e->tcp == NULL)
      return; /* lost() ran */
  }
}

static void alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  tlc_efl_t *e = h->data;
  (void)suggested;
  buf->base = (char *)e->src.d->rbuf; /* consumed before read_cb returns */
  buf->len = e->src.d->rbuf_len;
}

static void read_cb(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf) {
  tlc_efl_t *e = s->data;
  if ((uv_tcp_t *)s != e->tcp)
    return;
  if (e->stopping) {
    if (nread < 0)
      stop_done(e); /* efl_debugd closed its side (a pending shutdown is cancelled) */
    return;         /* the applications are gone from this source: nothing to read */
  }
  if (nread > 0) {
    process(e, (const uint8_t *)buf->base, (size_t)nread);
    return;
  }
  if (nread < 0) {
    char why[96];
    snprintf(why, sizeof(why), "%s",
             nread == UV_EOF ? "connection closed" : uv_strerror((int)nread));
    lost(e, why);
  }
}

static void close_tcp(tlc_efl_t *e) {
  if (e->tcp == NULL)
    return;
  uv_close((uv_handle_t *)e->tcp, handle_free_cb);
  e->tcp = NULL;
}

/* The connection to efl_debugd ended (or could not be made): every application detaches. */
static void lost(tlc_efl_t *e, const char *why) {
  int was = e->registered;
  close_probe(e);
  e->verify = VERIFY_NONE;
  while (!LIST_EMPTY(&e->apps)) {
    efl_app_t *a = LIST_FIRST(&e->apps);
    LIST_REMOVE(a, link);
    tlc__efl_app_free(e, a, "efl_debugd went away");
  }
  e->cur = NULL;
  e->registered = 0;
  e->connecting = 0;
  if (e->poll != NULL)
    uv_timer_stop(e->poll);
  close_tcp(e);
  if (was) {
    e->disconnects++;
    tlc_log(TLC_LOG_NOTICE, TLC_LOGC_EFL, "efl %s: efl_debugd %s: %s; reconnecting",
            e->src.cfg.name, e->addr, why);
  }
  schedule(e);
}

static void connect_cb(uv_connect_t *req, int status) {
  tlc_efl_t *e = req->data;
  uint8_t pkt[512];
  int n;
  if (status == UV_ECANCELED || e->stopping || (uv_tcp_t *)req->handle != e->tcp)
    return;
  e->connecting = 0;
  uv_timer_stop(e->timer);
  if (status < 0) {
    if (status != e->last_err)
      tlc_log(TLC_LOG_WARN, TLC_LOGC_EFL, "efl %s: efl_debugd %s: %s; retrying with backoff",
              e->src.cfg.name, e->addr, uv_strerror(status));
    else
      TLC_LOGD(TLC_LOGC_EFL, "efl %s: efl_debugd %s: %s", e->src.cfg.name, e->addr,
               uv_strerror(status));
    e->last_err = status;
    lost(e, uv_strerror(status));
    return;
  }
  e->last_err = 0;
  e->backoff = 0;
  e->connects++;
  tlc_efldbg_rd_reset(&e->rd);
  e->rd.stream_op = -1;
  e->cookie = ((uint64_t)(uintptr_t)e << 16) ^ (uint64_t)rand() ^ e->connects;
  n = tlc_efldbg_build_hello(pkt, sizeof(pkt), 1, (int32_t)getpid(), "tlcapd");
  if (n < 0 || tlc__efl_send_raw(e, pkt, (size_t)n) != 0) {
    lost(e, "cannot send to efl_debugd");
    return;
  }
  n = tlc_efldbg_build_register(pkt, sizeof(pkt), e->cookie, op_names, OP_N);
  if (n < 0 || tlc__efl_send_raw(e, pkt, (size_t)n) != 0 ||
      uv_read_start((uv_stream_t *)e->tcp, alloc_cb, read_cb) != 0) {
    lost(e, "cannot talk to efl_debugd");
    return;
  }
  tlc_log(TLC_LOG_INFO, TLC_LOGC_EFL, "efl %s: connected to efl_debugd %s (pattern \"%s\")",
          e->src.cfg.name, e->addr, e->src.cfg.pattern);
}

static void timer_cb(uv_timer_t *t);

static void try_connect(tlc_efl_t *e) {
  int rc;
  if (e->stopping || e->tcp != NULL)
    return;
  e->tcp = tlc_malloc(sizeof(*e->tcp));
  if (e->tcp == NULL) {
    schedule(e);
    return;
  }
  uv_tcp_init(e->src.d->loop, e->tcp);
  e->tcp->data = e;
  e->handles++;
  e->creq.data = e;
  rc = uv_tcp_connect(&e->creq, e->tcp, (const struct sockaddr *)&e->sa, connect_cb);
  if (rc != 0) {
    e->last_err = rc;
    lost(e, uv_strerror(rc));
    return;
  }
  e->connecting = 1;
  uv_timer_start(e->timer, timer_cb, CONNECT_TIMEOUT_MS, 0);
}

static void timer_cb(uv_timer_t *t) {
  tlc_efl_t *e = t->data;
  if (e->stopping) {
    stop_done(e); /* the off requests had their chance */
    return;
  }
  if (e->verify == VERIFY_PENDING) {
    char why[TLC_CFG_PATH + 160];
    if (e->probe == NULL && e->probe_busy > 0)
      snprintf(why, sizeof(why),
               "efl_debugd's socket %s stayed busy for 5 s (%" PRIu64 " tries): no probe got in",
               e->sock, e->probe_busy);
    else
      snprintf(why, sizeof(why),
               "it did not announce the probe sent through efl_debugd's socket %s within 5 s "
               "(another program holds the port?)",
               e->sock);
    untrusted(e, why);
    return;
  }
  if (e->connecting) {
    lost(e, "connect timeout");
    return;
  }
  try_connect(e);
}

static void schedule(tlc_efl_t *e) {
  if (e->stopping || e->src.d->stopping)
    return;
  uv_timer_start(e->timer, timer_cb, tlc__backoff_next(e->src.d, &e->backoff), 0);
}

/* ---- start, stop, reconcile ---- */

/* The end of a stopped source: the connection and the close timer go. */
static void stop_done(tlc_efl_t *e) {
  close_tcp(e);
  if (e->timer != NULL) {
    uv_close((uv_handle_t *)e->timer, handle_free_cb);
    e->timer = NULL;
  }
}

/* The off requests and our FIN are written. The connection stays open until efl_debugd closes
 * its side (read_cb) or CLOSE_TIMEOUT_MS passes (timer_cb): closing now, with a reply of
 * efl_debugd's still unread, would send a reset that can overtake the off requests. */
static void shutdown_cb(uv_shutdown_t *req, int status) {
  tlc_efl_t *e = req->data;
  tlc_free(req);
  if (status < 0)
    stop_done(e); /* cancelled (efl_debugd closed first) or failed */
}

static void efl_stop(tlc_efl_t *e, const char *reason) {
  uv_shutdown_t *sd = NULL;
  e->stopping = 1;
  uv_timer_stop(e->poll);
  uv_close((uv_handle_t *)e->poll, handle_free_cb);
  e->poll = NULL;
  close_probe(e);
  e->verify = VERIFY_NONE;
  while (!LIST_EMPTY(&e->apps)) {
    efl_app_t *a = LIST_FIRST(&e->apps);
    LIST_REMOVE(a, link);
    if (e->registered && e->tcp != NULL)
      tlc__efl_send_off(e, a); /* queued before the shutdown below: written first */
    tlc__efl_app_free(e, a, reason);
  }
  if (e->tcp != NULL && e->registered)
    sd = tlc_malloc(sizeof(*sd));
  if (sd != NULL) {
    sd->data = e;
    if (uv_shutdown(sd, (uv_stream_t *)e->tcp, shutdown_cb) == 0) {
      uv_timer_start(e->timer, timer_cb, CLOSE_TIMEOUT_MS, 0); /* a daemon that never reads */
      return;
    }
    tlc_free(sd);
  }
  close_tcp(e);
  uv_close((uv_handle_t *)e->timer, handle_free_cb);
  e->timer = NULL;
}

static int efl_start(tlc_ingest_t *d, const tlc_cfg_source_t *c, tlc_efl_t **out) {
  tlc_efl_t *e = tlc_calloc(1, sizeof(*e));
  int rc;
  if (e == NULL)
    return TLC_ENOMEM;
  e->src.ops = &tlc_efl_source_ops;
  e->src.d = d;
  e->src.cfg = *c;
  if (uv_ip4_addr(c->host, c->port, (struct sockaddr_in *)&e->sa) != 0 &&
      uv_ip6_addr(c->host, c->port, (struct sockaddr_in6 *)&e->sa) != 0) {
    tlc_free(e);
    return TLC_EINVAL; /* config.c checked it */
  }
  snprintf(e->addr, sizeof(e->addr), strchr(c->host, ':') ? "[%s]:%u" : "%s:%u", c->host,
           (unsigned)c->port);
  socket_path(c, e->sock, sizeof(e->sock));
  rc = tlc_efldbg_rd_init(&e->rd, 0, CTL_MAX, 4);
  if (rc != 0) {
    tlc_free(e);
    return rc;
  }
  e->timer = tlc_malloc(sizeof(*e->timer));
  e->poll = tlc_malloc(sizeof(*e->poll));
  if (e->timer == NULL || e->poll == NULL) {
    tlc_free(e->timer);
    tlc_free(e->poll);
    tlc_efldbg_rd_fini(&e->rd);
    tlc_free(e);
    return TLC_ENOMEM;
  }
  uv_timer_init(d->loop, e->timer);
  uv_timer_init(d->loop, e->poll);
  e->timer->data = e->poll->data = e;
  e->handles = 2;
  try_connect(e);
  *out = e;
  return 0;
}

static int efl_start_op(tlc_ingest_t *d, const tlc_cfg_source_t *c, tlc_source_t **out) {
  tlc_efl_t *e;
  int rc = efl_start(d, c, &e);
  if (rc != 0) {
    tlc_log(TLC_LOG_ERR, TLC_LOGC_EFL, "efl %s: cannot start: %s", c->name, tlc_strerror(rc));
    return rc;
  }
  *out = &e->src;
  return 0;
}

/* Turns the evlog off in its applications, detaches their targets and closes. */
static void efl_stop_op(tlc_source_t *src, tlc_source_why_t why) {
  tlc_log(TLC_LOG_INFO, TLC_LOGC_EFL, "efl %s: %s; evlog off in its applications", src->cfg.name,
          why == TLC_SOURCE_SHUTDOWN  ? "daemon shutting down"
          : why == TLC_SOURCE_REMOVED ? "removed"
                                      : "settings changed; starting again");
  efl_stop((tlc_efl_t *)src,
           why == TLC_SOURCE_SHUTDOWN ? "daemon shutting down" : "efl source reconfigured");
}

/* A new pattern, address, poll interval or socket starts it again; the rest applies in place. */
static int efl_same_config(const tlc_source_t *src, const tlc_cfg_source_t *b) {
  const tlc_cfg_source_t *a = &src->cfg;
  return b != NULL && strcmp(a->pattern, b->pattern) == 0 && strcmp(a->host, b->host) == 0 &&
         a->port == b->port && a->poll_ms == b->poll_ms &&
         strcmp(a->debugd_socket, b->debugd_socket) == 0;
}

/* Appends " efl_apps=N efl_capturing=N efl_no_cpufreq=N" to the STATUS text (nothing without
 * efl sources). */
static void efl_status(const tlc_ingest_t *d, char *buf, size_t len) {
  struct tlc_source_list *list = tlc_sources_running(d, &tlc_efl_source_ops);
  const tlc_source_t *src;
  size_t apps = 0, capturing = 0, bug = 0, off = 0, used = strlen(buf);
  if (list == NULL || LIST_EMPTY(list) || used >= len)
    return;
  LIST_FOREACH(src, list, link) {
    const tlc_efl_t *e = (const tlc_efl_t *)src;
    const efl_app_t *a;
    LIST_FOREACH(a, &e->apps, link) {
      apps++;
      capturing += a->state == APP_CAPTURING || a->state == APP_NO_CPUFREQ;
      bug += a->nocpufreq;
      off += a->state == APP_EVLOG_OFF;
    }
  }
  snprintf(buf + used, len - used, " efl_apps=%zu efl_capturing=%zu efl_no_cpufreq=%zu%s", apps,
           capturing, bug, off ? " efl_evlog_off=1" : "");
}

/* The stats dump's member "efl": [ {source, pattern, debugd, connected, counters, apps: [{target,
 * name, pid, cid, state, replies, ...}]} ]. */
static void efl_dump(const tlc_ingest_t *d, tlc_json_w_t *w) {
  struct tlc_source_list *list = tlc_sources_running(d, &tlc_efl_source_ops);
  const tlc_source_t *src;
  tlc_json_w_open(w, "efl", '[');
  for (src = list != NULL ? LIST_FIRST(list) : NULL; src != NULL; src = LIST_NEXT(src, link)) {
    const tlc_efl_t *e = (const tlc_efl_t *)src;
    tlc_json_w_open(w, NULL, '{');
    tlc_json_w_str(w, "source", e->src.cfg.name);
    tlc_json_w_str(w, "pattern", e->src.cfg.pattern);
    tlc_json_w_str(w, "debugd", e->addr);
    tlc_json_w_i64(w, "connected", e->registered);
    tlc_json_w_str(w, "debugd_socket", e->sock);
    tlc_json_w_str(w, "verification",
                   e->verify == VERIFY_OK        ? "verified"
                   : e->verify == VERIFY_PENDING ? "pending"
                                                 : "none");
    tlc_json_w_u64(w, "verified", e->verified);
    tlc_json_w_u64(w, "untrusted", e->untrusted);
    tlc_json_w_u64(w, "connects", e->connects);
    tlc_json_w_u64(w, "disconnects", e->disconnects);
    tlc_json_w_u64(w, "apps_seen", e->apps_seen);
    tlc_json_w_u64(w, "apps_matched", e->apps_matched);
    tlc_json_w_u64(w, "apps_refused", e->apps_refused);
    tlc_json_w_u64(w, "apps_refused_cap", e->apps_refused_cap);
    tlc_json_w_u64(w, "apps_refused_full", e->apps_refused_full);
    tlc_json_w_u64(w, "targets", tlc__efl_source_targets(e));
    tlc_json_w_u64(w, "max_targets", tlc__efl_max_targets(e));
    tlc_json_w_u64(w, "targets_reused", e->targets_reused);
    tlc_json_w_u64(w, "no_cpufreq", e->no_cpufreq);
    tlc_json_w_u64(w, "protocol_errors", e->protocol_errors);
    tlc_json_w_u64(w, "polls_skipped", e->polls_skipped);
    tlc_json_w_u64(w, "ignored", e->ignored);
    tlc_json_w_open(w, "apps", '[');
    const efl_app_t *a;
    LIST_FOREACH(a, &e->apps, link) {
      tlc_json_w_open(w, NULL, '{');
      tlc_json_w_str(w, "target", a->target != NULL ? a->target->name : "");
      tlc_json_w_str(w, "name", a->name);
      tlc_json_w_i64(w, "pid", a->pid);
      tlc_json_w_i64(w, "cid", a->cid);
      tlc_json_w_str(w, "state", state_names[a->state]);
      tlc_json_w_u64(w, "replies", a->replies);
      tlc_json_w_u64(w, "empty_replies", a->empty);
      tlc_json_w_u64(w, "blocks", a->blocks);
      tlc_json_w_u64(w, "bytes", a->bytes);
      tlc_json_w_u64(w, "get_timeouts", a->timeouts);
      tlc_json_w_u64(w, "on_retries", a->on_retries);
      tlc_json_w_close(w, '}');
    }
    tlc_json_w_close(w, ']');
    tlc_json_w_close(w, '}');
  }
  tlc_json_w_close(w, ']');
}

/* Connecting to efl_debugd is retried with backoff, never a start error. */
const tlc_source_ops_t tlc_efl_source_ops = {
  .kind = TLC_SRC_EFL,
  .name = "efl",
  .start = efl_start_op,
  .stop = efl_stop_op,
  .same_config = efl_same_config,
  .status = efl_status,
  .dump = efl_dump,
};
