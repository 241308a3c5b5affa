/* daemon.c - the daemon object's lifecycle (daemon.h): set up, start, reload on SIGHUP, close
 * on SIGTERM/SIGINT or a failed start-up; the status tick.
 *
 * Order at start: the signals (before anything listens), storage (crash recovery before
 * anything is accepted), the other modules (wiring.c), then the sources (inherited sockets
 * adopted - a wrong one is a loud start-up failure - listeners bound, dial, serial and efl
 * sources started), the tick, the HTTP port last, the watchdog, READY=1. Order at close: the
 * sources first (what they received is flushed into the modules), the stats dump, the
 * modules, the watchdog, the tick and the signals. Each module closes its own handles and
 * joins its own threads: nothing here closes a handle it did not open.
 *
 * Signals are uv_signal_t, so handled on the loop thread:
 *   SIGHUP   RELOADING=1, re-read file + re-apply command line; invalid, or moving a running
 *            listener or the subscriber server ("restart required") -> one error line, the
 *            running configuration stays; valid -> sources reconciled by name (sources.h),
 *            READY=1
 *   SIGTERM/SIGINT  STOPPING=1, stop accepting, read what the kernel holds for every
 *            connection and tty, close everything, write --dump-stats-on-exit, exit 0
 *   SIGUSR1  write the stats dump now (when --dump-stats-on-exit is set), for tests and ops.
 * A periodic tick sweeps connection deadlines, flushes the log buffer and sends STATUS= with
 * live counters.
 */
#include "daemon/budgetd.h"
#include "daemon/rolld.h"
#include "daemon/daemon.h"

#include "daemon/access.h"
#include "daemon/status.h"
#include "daemon/wiring.h"

#include "base/alloc.h"
#include "base/err.h"
#include "base/log.h"
#include "base/sdnotify.h"
#include "ingest/target.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#define TICK_MS          250
#define FD_RESERVE       32 /* fds kept for files, subscribers, the resolver, logging */
#define STORE_FD_RESERVE 8  /* storage: a sealer's export and manifest, recovery, directories */

/* The memory budget the config asks for: its value, or a quarter of physical memory. */
static uint64_t memory_limit(const tlc_config_t *c) {
  return c->memory_limit == TLC_CFG_MEMORY_AUTO ? tlc_budget_default_limit() : c->memory_limit;
}

/* ---- status ---- */

static void send_status(tlc_daemon_t *dm) {
  char msg[600];
  tlc_status_text(dm, dm->last_status_text, sizeof(dm->last_status_text));
  snprintf(msg, sizeof(msg), "STATUS=%s", dm->last_status_text);
  tlc_sd_notify(msg);
}

static void tick_cb(uv_timer_t *t) {
  tlc_daemon_t *dm = t->data;
  uint64_t now = uv_now(t->loop);
  tlc__conn_sweep(&dm->in, now);
  tlc_log_flush(0);
  if (now - dm->last_status >= dm->in.cfg.status_interval_ms) {
    dm->last_status = now;
    send_status(dm);
  }
}

/* ---- limits ---- */

static void compute_max_conns(tlc_ingest_t *d) {
  struct rlimit rl;
  size_t lim = 1024, cap;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
    lim = (size_t)rl.rlim_cur;
  else if (getrlimit(RLIMIT_NOFILE, &rl) == 0)
    lim = 1u << 20;
  /* Every fd a connection will need, counted before it is accepted (capped by sockets alone,
   * each connected target's segment could fail with EMFILE): its
   * socket, and with storage its target's segment and .skipped file. The reserve: FD_RESERVE,
   * with storage the writer's and sealer's files and the segments of the disconnected targets
   * that keep theirs (TLC_STPOL_HELD_SEGMENTS); each listener two fds (socket + spare), each
   * dial or serial source one connection. */
  size_t per = 1 + (d->cfg.store ? 1 + (d->cfg.keep_skipped > 0) : 0);
  size_t fixed = FD_RESERVE + (d->cfg.store ? STORE_FD_RESERVE : 0) +
                 (d->cfg.store ? TLC_STPOL_HELD_SEGMENTS * (per - 1) : 0);
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

/* Closes whatever start-up opened: the sources first (what they received is flushed into the
 * services), the stats dump requested if `dump`, the wiring (HTTP, NATS, subscribers,
 * checkpoints, storage: each closes its own handles and joins its own threads, asynchronously),
 * the watchdog, then main's own handles (the tick, the signals initialised so far). The caller
 * runs the loop until all of it has closed (uv_run returns): a service's handles are never
 * closed behind its back (storage's writer would post to a closed async handle: libuv aborts).
 * Shutdown and a failed start-up both end here. */
static void daemon_close(tlc_daemon_t *dm, int dump) {
  tlc_ingest_t *d = &dm->in;
  uv_signal_t *sigs[] = {
    &dm->sig_hup,  &dm->sig_term, &dm->sig_int, &dm->sig_usr1,
#ifdef TLCAP_TESTING
    &dm->sig_usr2,
#endif
  };
  d->stopping = 1;
  tlc_sources_sync(d); /* finish what was received, close; evlog off in the applications */
  if (dump)
    tlc_dump_request(&dm->dump); /* written off the loop; the loop runs until it is complete */
  tlc_wiring_close(dm);          /* seals segments, says goodbye to subscribers */
  tlc_sd_watchdog_stop();
  if (dm->tick_on) {
    dm->tick_on = 0;
    uv_close((uv_handle_t *)&dm->tick, NULL);
  }
  while (dm->nsignals > 0) {
    dm->nsignals--;
    uv_close((uv_handle_t *)sigs[dm->nsignals], NULL);
  }
}

static void shutdown_begin(tlc_daemon_t *dm, const char *why) {
  if (dm->in.stopping)
    return;
  tlc_sd_notify("STOPPING=1");
  tlc_log(TLC_LOG_INFO, TLC_LOGC_MAIN, "%s: shutting down", why);
  daemon_close(dm, 1);
}

/* The new configuration applied to the modules that run: the HTTP port's metrics areas, the
 * token and the certificate re-read (access.h), storage's rotation/retention/sync limits
 * (tlc_stpol_reload: every open segment sealed; what needs a restart logged). */
static void reload_modules(tlc_daemon_t *dm) {
  if (dm->closing)
    return;
  if (dm->http != NULL)
    tlc_http_set_metrics_areas(dm->http, dm->in.cfg.metrics_areas);
  tlc_access_reload(dm);
  if (dm->stpol != NULL)
    tlc_stpol_reload(dm->stpol, &dm->in.cfg);
  tlc_rolld_reload(dm);
  tlc_budgetd_reload(dm);
}

static void reload(tlc_daemon_t *dm) {
  tlc_ingest_t *d = &dm->in;
  tlc_config_t nc;
  char err[600] = "", msg[700], restart[600];
  int r;
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  snprintf(msg, sizeof(msg), "RELOADING=1\nMONOTONIC_USEC=%llu\nSTATUS=reloading",
           (unsigned long long)ts.tv_sec * 1000000ull + (unsigned long long)ts.tv_nsec / 1000);
  tlc_sd_notify(msg);
  r = tlc_config_build(&nc, &dm->cli, err, sizeof(err));
  if (r != 0) {
    tlc_log(TLC_LOG_ERR, TLC_LOGC_CONFIG, "reload rejected, keeping the running configuration: %s",
            err);
    send_status(dm);
    tlc_sd_notify("READY=1");
    return;
  }
  /* RELIABILITY T15(c): a listener or the subscriber server that would move is not re-bound
   * (a window without it, a bind that may fail, subscribers dropped): the reload is refused
   * as a whole and the running configuration stays. */
  if (tlc_sources_check_reload(d, &nc, err, sizeof(err)) != 0 ||
      tlc_config_reload_merge(&d->cfg, &nc, err, sizeof(err), restart, sizeof(restart)) != 0) {
    tlc_log(TLC_LOG_ERR, TLC_LOGC_CONFIG,
            "reload rejected, keeping the running configuration: %s: restart required", err);
    tlc_config_fini(&nc);
    send_status(dm);
    tlc_sd_notify("READY=1");
    return;
  }
  /* The settings table says which keys need a restart: they kept their running values in nc. */
  if (restart[0] != '\0')
    tlc_log(TLC_LOG_WARN, TLC_LOGC_CONFIG, "reload: %s: take effect only after a restart", restart);
  tlc_config_fini(&d->cfg);
  d->cfg = nc;
  apply_log_settings(&d->cfg);
  compute_max_conns(d);
  tlc_budget_set_limit(&d->targets.budget, memory_limit(&d->cfg)); /* granted memory stays */
  tlc_dump_set_path(&dm->dump, d->cfg.dump_stats);
  d->targets.mapping_limit = d->cfg.mapping_limit;
  tlc_sources_sync(d); /* bind errors are logged; the other sources are applied */
  reload_modules(dm);
  tlc_log(TLC_LOG_INFO, TLC_LOGC_CONFIG, "configuration reloaded: %zu listeners, %zu targets",
          tlc_listen_count(d), d->targets.n);
  send_status(dm);
  tlc_sd_notify("READY=1");
}

static void signal_cb(uv_signal_t *s, int signum) {
  tlc_daemon_t *dm = s->data;
  switch (signum) {
  case SIGHUP:
    if (!dm->in.stopping)
      reload(dm);
    break;
  case SIGUSR1:
    tlc_dump_request(&dm->dump);
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
    shutdown_begin(dm, signum == SIGTERM ? "SIGTERM" : "SIGINT");
    break;
  }
}

/* Signal handles are started in the order daemon_close lists them. */
static int start_signal(tlc_daemon_t *dm, uv_signal_t *s, int signum) {
  int r = uv_signal_init(dm->in.loop, s);
  if (r != 0)
    return r;
  dm->nsignals++; /* closed by daemon_close from here on, started or not */
  s->data = dm;
  return uv_signal_start(s, signal_cb, signum);
}

static void fail_status(const char *what, int err) {
  char msg[400];
  snprintf(msg, sizeof(msg), "STATUS=start-up failed: %s\nERRNO=%d", what, err < 0 ? -err : err);
  tlc_sd_notify(msg);
}

/* ---- lifecycle ---- */

int tlc_daemon_init(tlc_daemon_t *dm, uv_loop_t *loop) {
  tlc_ingest_t *d = &dm->in;
  d->loop = loop;
  dm->exit_code = 0;
  d->rbuf_len = d->cfg.read_buffer;
  d->rbuf = tlc_malloc(d->rbuf_len);
  if (d->rbuf == NULL)
    return TLC_ENOMEM;
  tlc_targets_init(&d->targets, d->cfg.max_targets);
  tlc_budget_init(&d->targets.budget, memory_limit(&d->cfg));
  d->targets.mapping_limit = d->cfg.mapping_limit;
  tlc_dump_init(&dm->dump, loop, &d->targets, d->cfg.dump_stats, tlc_dump_daemon_head, dm);
  tlc_view_reg_init(&dm->view, &d->targets, NULL, NULL);
  compute_max_conns(d);
  return 0;
}

/* A start-up step failed: systemd is told why, tlcapd will exit 1. */
static int start_failed(tlc_daemon_t *dm, const char *what, int r) {
  fail_status(what, r);
  dm->exit_code = 1;
  return r != 0 ? r : TLC_EINVAL;
}

static int start_signals(tlc_daemon_t *dm) {
  int r;
  if ((r = start_signal(dm, &dm->sig_hup, SIGHUP)) != 0 ||
      (r = start_signal(dm, &dm->sig_term, SIGTERM)) != 0 ||
      (r = start_signal(dm, &dm->sig_int, SIGINT)) != 0 ||
      (r = start_signal(dm, &dm->sig_usr1, SIGUSR1)) != 0
#ifdef TLCAP_TESTING
      || (r = start_signal(dm, &dm->sig_usr2, SIGUSR2)) != 0
#endif
  )
    tlc_log(TLC_LOG_ERR, TLC_LOGC_MAIN, "signals: %s", uv_strerror(r));
  return r;
}

int tlc_daemon_start(tlc_daemon_t *dm) {
  tlc_ingest_t *d = &dm->in;
  int r;
  /* Signals before anything listens: a SIGTERM that follows a peer's first connection is a
   * clean shutdown, never the default action (exit by the signal, segments left as .part). One
   * received during start-up is handled when the loop first runs (nothing runs it before). */
  if ((r = start_signals(dm)) != 0) {
    dm->exit_code = 1;
    return r;
  }
  /* Storage first (crash recovery before anything is accepted), then subscribers. */
  r = tlc_wiring_start(dm);
  if (r != 0)
    return start_failed(dm, "storage or subscriber server failed (see log)", r);
  r = tlc_listen_adopt(d);
  if (r != 0)
    return start_failed(dm, "socket activation: an inherited socket is unusable (see log)", r);
  r = tlc_sources_sync(d);
  if (r != 0)
    return start_failed(dm, "cannot listen (see log)", r);
  uv_timer_init(d->loop, &dm->tick);
  dm->tick_on = 1;
  dm->tick.data = dm;
  uv_timer_start(&dm->tick, tick_cb, TICK_MS, TICK_MS);
  r = tlc_wiring_start_http(dm); /* last: see wiring.h */
  if (r != 0)
    return start_failed(dm, "HTTP port failed (see log)", r);
  r = tlc_sd_watchdog_start(d->loop);
  if (r < 0)
    tlc_log(TLC_LOG_WARN, TLC_LOGC_MAIN, "watchdog: %s", uv_strerror(r));

  tlc_log(TLC_LOG_INFO, TLC_LOGC_MAIN,
          "tlcapd ready: %zu listeners, %zu targets, max %zu connections, state dir %s%s",
          tlc_listen_count(d), d->targets.n, d->max_conns, d->cfg.state_dir,
          d->cfg.store ? "" : " (storage off)");
  dm->last_status = uv_now(d->loop);
  send_status(dm);
  tlc_sd_notify("READY=1"); /* listeners accept from here on */
  return 0;
}

void tlc_daemon_reload(tlc_daemon_t *dm) {
  if (!dm->in.stopping)
    reload(dm);
}

void tlc_daemon_close(tlc_daemon_t *dm, int dump) {
  daemon_close(dm, dump);
}

void tlc_daemon_fini(tlc_daemon_t *dm) {
  tlc_dump_fini(&dm->dump);
  tlc_targets_fini(&dm->in.targets);
  tlc_free(dm->in.rbuf);
  dm->in.rbuf = NULL;
  tlc_config_fini(&dm->in.cfg);
}
