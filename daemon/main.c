/* main.c - tlcapd: arguments and configuration in, the event loop run, a clean exit out.
 *
 *   tlcapd [--config FILE] [--state-dir DIR] [--listen NAME=FORMAT@HOST:PORT]...
 *          [--dial NAME=FORMAT@HOST:PORT]... [--serial NAME=FORMAT@DEVICE[:BAUD]]...
 *          [--serve HOST:PORT] [--no-store] [--OPTION VALUE]...
 *   tlcapd replay ...            (daemon/replay.c)
 *
 * Embedded default (no --config, no source options): bin11 targets on 127.0.0.1:7411, evlog
 * targets on 127.0.0.1:7412, subscribers on 127.0.0.1:7400, state under ./tlcap-state.
 *
 * Lifecycle: allocator into libuv, SIGPIPE ignored, configuration (exit 2 on a usage or config
 * error, naming file:line and option), inherited sockets adopted (a wrong one is a loud start-up
 * failure, exit 1), listeners bound (failure: exit 1), dial and serial sources started, then
 * READY=1. A start-up failure closes what was opened as a shutdown does (close_all: every
 * service closes its own handles and joins its threads), then exits 1. Signals (uv_signal_t, so
 * handled on the loop thread): SIGHUP   RELOADING=1, re-read file + re-apply command line; invalid,
 * or moving a running listener or the subscriber server ("restart required") -> one error line, the
 *            running configuration stays; valid -> sources reconciled by name (sources.h), READY=1
 *   SIGTERM/SIGINT  STOPPING=1, stop accepting, read what the kernel holds for every
 *            connection and tty, close everything, write --dump-stats-on-exit, exit 0
 *   SIGUSR1  write the stats dump now (when --dump-stats-on-exit is set), for tests and ops.
 * A periodic tick flushes the log buffer and sends STATUS= with live counters.
 *
 * Stats dump (--dump-stats-on-exit FILE): one JSON document, written to FILE.tmp and renamed:
 * {"daemon": {...ingest counters...}, "targets": [{name, format, connected, peer, counters,
 * connections, reconnects, gaps, decode_errors, ..., "stats": <the JSON export>}]}. Written off
 * the loop by a pool thread, the statistics taken in parts (dump.c), at exit and on SIGUSR1.
 *
 * Services (wiring.c): storage (crash recovery of the state directory before READY=1) and the
 * subscriber server, each fed through the target observer interface; pubsub reads targets
 * through the provider (provider.h).
 */
#include "base/alloc.h"
#include "base/err.h"
#include "base/log.h"
#include "base/sdnotify.h"
#include "config/config.h"
#include "daemon/dump.h"
#include "daemon/replay.h"
#include "daemon/wiring.h"
#include "fleet/fleet.h"
#include "formats/json.h"
#include "ingest/provider.h"
#include "ingest/sources.h"
#include "ingest/target.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#define TICK_MS          250
#define FD_RESERVE       32 /* fds kept for files, subscribers, the resolver, logging */
#define STORE_FD_RESERVE 8  /* storage: a sealer's export and manifest, recovery, directories */

typedef struct app {
  tlc_daemon_t d;
  tlc_provider_t provider;
  uv_signal_t sig_hup, sig_term, sig_int, sig_usr1;
#ifdef TLCAP_TESTING
  uv_signal_t sig_usr2;
#endif
  uv_timer_t tick;
  int nsignals;         /* signal handles initialised, in start order (sig_hup first) */
  int tick_on;          /* the tick timer was initialised */
  tlc_dump_t dump;      /* --dump-stats-on-exit, SIGUSR1: written off the loop */
  tlc_wiring_t *wiring; /* pubsub + storage */
  uint64_t last_status;
  char last_status_text[512];
  int exit_code;
} app_t;

/* The memory budget the config asks for: its value, or a quarter of physical memory. */
static uint64_t memory_limit(const tlc_config_t *c) {
  return c->memory_limit == TLC_CFG_MEMORY_AUTO ? tlc_budget_default_limit() : c->memory_limit;
}

static app_t A;

/* ---- stats dump ---- */

/* The stats dump's "daemon" object (written with the dump's JSON writer on the loop; the rest of
 * the document is written off it, dump.c). */
static void dump_head(void *ud, tlc_json_w_t *w) {
  tlc_daemon_t *d = ud;
  const tlc_ingest_stats_t *st = &d->st;
  tlc_json_w_open(w, "daemon", '{');
  tlc_json_w_u64(w, "accepted", st->accepted);
  tlc_json_w_u64(w, "refused_limit", st->refused_limit);
  tlc_json_w_u64(w, "refused_target", st->refused_target);
  tlc_json_w_u64(w, "accept_errors", st->accept_errors);
  tlc_json_w_u64(w, "accept_pauses", st->accept_pauses);
  tlc_json_w_u64(w, "preamble_errors", st->preamble_errors);
  tlc_json_w_u64(w, "closed_decode", st->closed_decode);
  tlc_json_w_u64(w, "closed_deadline", st->closed_deadline);
  tlc_json_w_u64(w, "closed_idle", st->closed_idle);
  tlc_json_w_u64(w, "closed_eof", st->closed_eof);
  tlc_json_w_u64(w, "closed_reset", st->closed_reset);
  tlc_json_w_u64(w, "dial_attempts", st->dial_attempts);
  tlc_json_w_u64(w, "dial_failures", st->dial_failures);
  tlc_json_w_u64(w, "serial_opens", st->serial_opens);
  tlc_json_w_u64(w, "serial_failures", st->serial_failures);
  tlc_json_w_u64(w, "serial_unplugs", st->serial_unplugs);
  tlc_json_w_u64(w, "connections", d->nconns);
  tlc_json_w_u64(w, "max_connections", d->max_conns);
  tlc_json_w_u64(w, "listeners", tlc_listen_count(d));
  tlc_json_w_u64(w, "targets_refused_limit", d->targets.refused_limit);
  tlc_json_w_u64(w, "targets_refused_name", d->targets.refused_name);
  tlc_json_w_u64(w, "log_dropped", tlc_log_dropped());
  tlc_json_w_u64(w, "log_suppressed", tlc_log_suppressed());
  tlc_json_w_u64(w, "watchdog_sent", tlc_sd_watchdog_sent());
  tlc_json_w_u64(w, "watchdog_withheld", tlc_sd_watchdog_withheld());
  tlc_json_w_u64(w, "notify_dropped", tlc_sd_dropped());
  tlc_json_w_u64(w, "memory_limit", d->targets.budget.limit);
  tlc_json_w_u64(w, "memory_used", d->targets.budget.used);
  tlc_json_w_u64(w, "memory_peak", d->targets.budget.peak);
  tlc_json_w_u64(w, "memory_refused", d->targets.budget.refused);
  tlc_json_w_u64(w, "refused_allow", st->refused_allow);
  tlc_json_w_u64(w, "targets_evicted", d->targets.evicted);
  tlc_json_w_close(w, '}');
  tlc_sources_dump(d, w);
  tlc_wiring_dump(A.wiring, w);
}

/* ---- status ---- */

static void status_text(const tlc_daemon_t *d, char *buf, size_t len) {
  size_t connected = 0;
  uint64_t skipped = 0, events = 0;
  for (size_t i = 0; i < d->targets.n; i++) {
    const tlc_target_t *t = d->targets.v[i];
    connected += t->connected ? 1 : 0;
    skipped += t->pipe.dec.c.bytes_skipped;
    events += tlc_engine_counters(t->pipe.engine)->events;
  }
  snprintf(buf, len,
           "targets=%zu connected=%zu conns=%zu listeners=%zu events=%" PRIu64 " bytes=%" PRIu64
           " decode_errors=%" PRIu64 " skipped=%" PRIu64 " refused=%" PRIu64 " deadline=%" PRIu64
           " log_dropped=%" PRIu64,
           d->targets.n, connected, d->nconns, tlc_listen_count(d), events, d->targets.bytes,
           d->targets.decode_errors, skipped, d->st.refused_limit + d->st.refused_target,
           d->st.closed_deadline, tlc_log_dropped());
}

static void send_status(app_t *a) {
  char msg[600];
  status_text(&a->d, a->last_status_text, sizeof(a->last_status_text));
  tlc_wiring_status(a->wiring, a->last_status_text, sizeof(a->last_status_text));
  tlc_sources_status(&a->d, a->last_status_text, sizeof(a->last_status_text));
  snprintf(msg, sizeof(msg), "STATUS=%s", a->last_status_text);
  tlc_sd_notify(msg);
}

static void tick_cb(uv_timer_t *t) {
  app_t *a = t->data;
  uint64_t now = uv_now(t->loop);
  tlc__conn_sweep(&a->d, now);
  tlc_log_flush(0);
  if (now - a->last_status >= a->d.cfg.status_interval_ms) {
    a->last_status = now;
    send_status(a);
  }
}

/* ---- limits ---- */

static void compute_max_conns(tlc_daemon_t *d) {
  struct rlimit rl;
  size_t lim = 1024, cap;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
    lim = (size_t)rl.rlim_cur;
  else if (getrlimit(RLIMIT_NOFILE, &rl) == 0)
    lim = 1u << 20;
  /* Every fd a connection will need, counted before it is accepted (issue 16: connections were
   * capped by sockets alone, and each connected target's segment then failed with EMFILE): its
   * socket, and with storage its target's segment and .skipped file. The reserve: FD_RESERVE,
   * with storage the writer's and sealer's files and the segments of the disconnected targets
   * that keep theirs (TLC_WIRING_HELD_SEGMENTS); each listener two fds (socket + spare), each
   * dial or serial source one connection. */
  size_t per = 1 + (d->cfg.store ? 1 + (d->cfg.keep_skipped > 0) : 0);
  size_t fixed = FD_RESERVE + (d->cfg.store ? STORE_FD_RESERVE : 0) +
                 (d->cfg.store ? TLC_WIRING_HELD_SEGMENTS * (per - 1) : 0);
  for (size_t i = 0; i < d->cfg.nsrc; i++)
    fixed += d->cfg.src[i].kind == TLC_SRC_LISTEN ? 2 : per;
  if (lim > 4 * FD_RESERVE && lim / 8 > fixed)
    fixed = lim / 8; /* large limits: keep 1/8 in reserve */
  cap = lim > fixed + 8 * per ? (lim - fixed) / per : 8;
  if (d->cfg.max_connections == 0) {
    d->max_conns = cap;
  } else if (d->cfg.max_connections > cap) {
    d->max_conns = cap;
    tlc_log(TLC_LOG_WARN, TLC_LOGC_MAIN,
            "max_connections %zu lowered to %zu (RLIMIT_NOFILE %zu less a reserve, %zu fds a "
            "connection)",
            d->cfg.max_connections, cap, lim, per);
  } else {
    d->max_conns = d->cfg.max_connections;
  }
}

static void apply_log_settings(const tlc_config_t *c) {
  tlc_log_set_level(c->log_level);
  tlc_log_set_debug(c->debug);
}

/* ---- signals ---- */

static void close_walk_cb(uv_handle_t *h, void *arg) {
  (void)arg;
  if (!uv_is_closing(h))
    uv_close(h, NULL);
}

/* Closes whatever start-up opened: the sources first (what they received is flushed into the
 * services), the stats dump requested if `dump`, the wiring (HTTP, NATS, subscribers,
 * checkpoints, storage: each closes its own handles and joins its own threads, asynchronously),
 * the watchdog, then main's own handles (the tick, the signals initialised so far). The caller
 * runs the loop until all of it has closed (uv_run returns): a service's handles are never
 * closed behind its back (storage's writer would post to a closed async handle: libuv aborts).
 * Shutdown and a failed start-up both end here. */
static void close_all(app_t *a, int dump) {
  tlc_daemon_t *d = &a->d;
  uv_signal_t *sigs[] = {
    &a->sig_hup,  &a->sig_term, &a->sig_int, &a->sig_usr1,
#ifdef TLCAP_TESTING
    &a->sig_usr2,
#endif
  };
  d->stopping = 1;
  tlc_sources_sync(d); /* finish what was received, close; evlog off in the applications */
  if (dump)
    tlc_dump_request(&a->dump); /* written off the loop; the loop runs until it is complete */
  tlc_wiring_close(a->wiring);  /* seals segments, says goodbye to subscribers */
  a->wiring = NULL;
  tlc_sd_watchdog_stop();
  if (a->tick_on) {
    a->tick_on = 0;
    uv_close((uv_handle_t *)&a->tick, NULL);
  }
  while (a->nsignals > 0) {
    a->nsignals--;
    uv_close((uv_handle_t *)sigs[a->nsignals], NULL);
  }
}

static void shutdown_begin(app_t *a, const char *why) {
  if (a->d.stopping)
    return;
  tlc_sd_notify("STOPPING=1");
  tlc_log(TLC_LOG_INFO, TLC_LOGC_MAIN, "%s: shutting down", why);
  close_all(a, 1);
}

static void reload(app_t *a) {
  tlc_daemon_t *d = &a->d;
  tlc_config_t nc;
  char err[600] = "", msg[700];
  int r;
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  snprintf(msg, sizeof(msg), "RELOADING=1\nMONOTONIC_USEC=%llu\nSTATUS=reloading",
           (unsigned long long)ts.tv_sec * 1000000ull + (unsigned long long)ts.tv_nsec / 1000);
  tlc_sd_notify(msg);
  r = tlc_config_build(&nc, &d->cli, err, sizeof(err));
  if (r != 0) {
    tlc_log(TLC_LOG_ERR, TLC_LOGC_CONFIG, "reload rejected, keeping the running configuration: %s",
            err);
    send_status(a);
    tlc_sd_notify("READY=1");
    return;
  }
  /* RELIABILITY T15(c): a listener or the subscriber server that would move is not re-bound
   * (a window without it, a bind that may fail, subscribers dropped): the reload is refused
   * as a whole and the running configuration stays. */
  if (tlc_sources_check_reload(d, &nc, err, sizeof(err)) != 0 ||
      tlc_wiring_check_reload(a->wiring, &nc, err, sizeof(err)) != 0) {
    tlc_log(TLC_LOG_ERR, TLC_LOGC_CONFIG,
            "reload rejected, keeping the running configuration: %s: restart required", err);
    tlc_config_fini(&nc);
    send_status(a);
    tlc_sd_notify("READY=1");
    return;
  }
  tlc_config_fini(&d->cfg);
  d->cfg = nc;
  apply_log_settings(&d->cfg);
  compute_max_conns(d);
  tlc_budget_set_limit(&d->targets.budget, memory_limit(&d->cfg)); /* granted memory stays */
  tlc_dump_set_path(&a->dump, d->cfg.dump_stats);
  d->targets.mapping_limit = d->cfg.mapping_limit;
  tlc_sources_sync(d); /* bind errors are logged; the other sources are applied */
  tlc_wiring_reload(a->wiring);
  tlc_log(TLC_LOG_INFO, TLC_LOGC_CONFIG, "configuration reloaded: %zu listeners, %zu targets",
          tlc_listen_count(d), d->targets.n);
  send_status(a);
  tlc_sd_notify("READY=1");
}

static void signal_cb(uv_signal_t *s, int signum) {
  app_t *a = s->data;
  switch (signum) {
  case SIGHUP:
    if (!a->d.stopping)
      reload(a);
    break;
  case SIGUSR1:
    tlc_dump_request(&a->dump);
    break;
#ifdef TLCAP_TESTING
  case SIGUSR2: {
    /* Test hook (RELIABILITY T35): block the loop thread for 3 s, as a stall would. */
    struct timespec ts = { 3, 0 };
    tlc_log(TLC_LOG_WARN, TLC_LOGC_MAIN, "test hook: stalling the loop for 3 s");
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
      ;
    break;
  }
#endif
  default:
    shutdown_begin(a, signum == SIGTERM ? "SIGTERM" : "SIGINT");
    break;
  }
}

/* Signal handles are started in the order close_all lists them. */
static int start_signal(app_t *a, uv_signal_t *s, int signum) {
  int r = uv_signal_init(a->d.loop, s);
  if (r != 0)
    return r;
  a->nsignals++; /* closed by close_all from here on, started or not */
  s->data = a;
  return uv_signal_start(s, signal_cb, signum);
}

static void fail_status(const char *what, int err) {
  char msg[400];
  snprintf(msg, sizeof(msg), "STATUS=start-up failed: %s\nERRNO=%d", what, err < 0 ? -err : err);
  tlc_sd_notify(msg);
}

/* ---- main ---- */

int main(int argc, char **argv) {
  app_t *a = &A;
  tlc_daemon_t *d = &a->d;
  uv_loop_t loop;
  char err[600] = "";
  int r;

  if (argc >= 2 && strcmp(argv[1], "replay") == 0) {
    return tlc_replay_main(argc - 1, argv + 1);
  }

  /* Before libuv allocates anything: every allocation goes through tlc_malloc. */
  uv_replace_allocator(tlc_malloc, tlc_realloc, tlc_calloc, tlc_free);
  signal(SIGPIPE, SIG_IGN); /* EPIPE is an error code, never a signal (R12) */

  memset(a, 0, sizeof(*a));
  r = tlc_cli_parse(&d->cli, argc, argv, err, sizeof(err));
  if (r == 1)
    return 0;
  if (r != 0) {
    fprintf(stderr, "tlcapd: %s\n(try tlcapd --help)\n", err);
    return 2;
  }
  r = tlc_config_build(&d->cfg, &d->cli, err, sizeof(err));
  if (r != 0) {
    fprintf(stderr, "tlcapd: %s\n", err);
    return 2;
  }
  if (d->cli.check_only) {
    printf("configuration OK: %zu sources\n", d->cfg.nsrc);
    tlc_config_fini(&d->cfg);
    return 0;
  }
  tlc_log_init();
  apply_log_settings(&d->cfg);
  srand((unsigned)getpid() ^ (unsigned)time(NULL));

  r = uv_loop_init(&loop);
  if (r != 0) {
    tlc_log(TLC_LOG_ERR, TLC_LOGC_MAIN, "event loop: %s", uv_strerror(r));
    tlc_log_flush(1);
    tlc_config_fini(&d->cfg);
    return 1;
  }
  d->loop = &loop;
  a->exit_code = 0;
  d->rbuf_len = d->cfg.read_buffer;
  d->rbuf = tlc_malloc(d->rbuf_len);
  if (d->rbuf == NULL) {
    tlc_log(TLC_LOG_ERR, TLC_LOGC_MAIN, "out of memory");
    (void)uv_loop_close(&loop);
    tlc_log_flush(1);
    tlc_config_fini(&d->cfg);
    return 1;
  }
  tlc_targets_init(&d->targets, d->cfg.max_targets);
  tlc_budget_init(&d->targets.budget, memory_limit(&d->cfg));
  d->targets.mapping_limit = d->cfg.mapping_limit;
  tlc_dump_init(&a->dump, &loop, &d->targets, d->cfg.dump_stats, dump_head, d);
  tlc_provider_init(&a->provider, &d->targets, NULL, NULL);
  compute_max_conns(d);

  /* Storage first (crash recovery before anything is accepted), then subscribers. */
  r = tlc_wiring_start(&a->wiring, d, &a->provider);
  if (r != 0) {
    fail_status("storage or subscriber server failed (see log)", r);
    a->exit_code = 1;
    goto stop;
  }
  r = tlc_listen_adopt(d);
  if (r != 0) {
    fail_status("socket activation: an inherited socket is unusable (see log)", r);
    a->exit_code = 1;
    goto stop;
  }
  r = tlc_sources_sync(d);
  if (r != 0) {
    fail_status("cannot listen (see log)", r);
    a->exit_code = 1;
    goto stop;
  }

  if ((r = start_signal(a, &a->sig_hup, SIGHUP)) != 0 ||
      (r = start_signal(a, &a->sig_term, SIGTERM)) != 0 ||
      (r = start_signal(a, &a->sig_int, SIGINT)) != 0 ||
      (r = start_signal(a, &a->sig_usr1, SIGUSR1)) != 0
#ifdef TLCAP_TESTING
      || (r = start_signal(a, &a->sig_usr2, SIGUSR2)) != 0
#endif
  ) {
    tlc_log(TLC_LOG_ERR, TLC_LOGC_MAIN, "signals: %s", uv_strerror(r));
    a->exit_code = 1;
    goto stop;
  }
  uv_timer_init(&loop, &a->tick);
  a->tick_on = 1;
  a->tick.data = a;
  uv_timer_start(&a->tick, tick_cb, TICK_MS, TICK_MS);
  r = tlc_wiring_start_http(a->wiring); /* last: see wiring.h */
  if (r != 0) {
    fail_status("HTTP port failed (see log)", r);
    a->exit_code = 1;
    goto stop;
  }
  r = tlc_sd_watchdog_start(&loop);
  if (r < 0)
    tlc_log(TLC_LOG_WARN, TLC_LOGC_MAIN, "watchdog: %s", uv_strerror(r));

  tlc_log(TLC_LOG_INFO, TLC_LOGC_MAIN,
          "tlcapd ready: %zu listeners, %zu targets, max %zu connections, state dir %s%s",
          tlc_listen_count(d), d->targets.n, d->max_conns, d->cfg.state_dir,
          d->cfg.store ? "" : " (storage off)");
  a->last_status = uv_now(&loop);
  send_status(a);
  tlc_sd_notify("READY=1"); /* listeners accept from here on */

  uv_run(&loop, UV_RUN_DEFAULT);
  goto done;

stop:
  /* Start-up failed: close what was started, as a shutdown does, and run the loop until every
   * service has closed its handles and joined its threads; then exit 1. */
  close_all(a, 0);
  uv_run(&loop, UV_RUN_DEFAULT);
  tlc_wiring_settle(&loop); /* an HTTP server that failed to start: its handles closed */

done:
  tlc_dump_fini(&a->dump);
  tlc_targets_fini(&d->targets);
  tlc_free(d->rbuf);
  r = uv_loop_close(&loop);
  if (r != 0) {
    /* Every handle should be closed by now; say which were not, then close them. */
    tlc_log(TLC_LOG_WARN, TLC_LOGC_MAIN, "handles left open at exit: %s", uv_strerror(r));
#ifdef TLCAP_TESTING
    if (a->exit_code == 0)
      a->exit_code = 3; /* test builds: a handle left open fails the test */
#endif
    uv_walk(&loop, close_walk_cb, NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
    (void)uv_loop_close(&loop);
  }
  tlc_fleet_shutdown(); /* libnats's threads end before the process does */
  tlc_log(TLC_LOG_INFO, TLC_LOGC_MAIN, "exit %d", a->exit_code);
  tlc_log_flush(1);
  tlc_config_fini(&d->cfg);
  return a->exit_code;
}
