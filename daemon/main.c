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
 * error, naming file:line and option), the daemon object set up and started (daemon.h: a
 * start-up failure is closed as a shutdown is, then exit 1), the loop run until every handle is
 * closed, a clean exit (tlcapd-test: exit 3 when a handle was left open). Signals, reload,
 * shutdown and the status tick: daemon.c; the modules: wiring.c.
 *
 * Stats dump (--dump-stats-on-exit FILE): one JSON document, written to FILE.tmp and renamed:
 * {"daemon": {...ingest counters...}, "targets": [{name, format, connected, peer, counters,
 * connections, reconnects, gaps, decode_errors, ..., "stats": <the JSON export>}]}. Written off
 * the loop by a pool thread, the statistics taken in parts (dump.c), at exit and on SIGUSR1.
 */
#include "base/alloc.h"
#include "base/log.h"
#include "config/config.h"
#include "daemon/daemon.h"
#include "daemon/replay.h"
#include "fleet/fleet.h"
#include "http/http.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static void close_walk_cb(uv_handle_t *h, void *arg) {
  (void)arg;
  if (!uv_is_closing(h))
    uv_close(h, NULL);
}

/* After a start-up failure, once the modules have closed (the loop ran out of active handles),
 * before the loop is closed: runs the loop (without waiting) until the HTTP server that failed
 * to start has closed the handles libwebsockets closes itself, or 1000 turns have passed;
 * nothing else may close them (a double close aborts). */
static void settle_http(uv_loop_t *loop) {
  for (int turns = 0; tlc_http_closing() > 0 && turns < 1000; turns++)
    (void)uv_run(loop, UV_RUN_NOWAIT);
}

/* The daemon object (daemon.h): static, so that nothing of it lives on main's stack. */
static tlc_daemon_t D;

/* ---- main ---- */

int main(int argc, char **argv) {
  tlc_daemon_t *d = &D;
  uv_loop_t loop;
  char err[600] = "";
  int r;

  if (argc >= 2 && strcmp(argv[1], "replay") == 0) {
    return tlc_replay_main(argc - 1, argv + 1);
  }

  /* Before libuv allocates anything: every allocation goes through tlc_malloc. */
  uv_replace_allocator(tlc_malloc, tlc_realloc, tlc_calloc, tlc_free);
  signal(SIGPIPE, SIG_IGN); /* EPIPE is an error code, never a signal (R12) */

  memset(d, 0, sizeof(*d));
  r = tlc_cli_parse(&d->cli, argc, argv, err, sizeof(err));
  if (r == 1)
    return 0;
  if (r != 0) {
    fprintf(stderr, "tlcapd: %s\n(try tlcapd --help)\n", err);
    return 2;
  }
  r = tlc_config_build(&d->in.cfg, &d->cli, err, sizeof(err));
  if (r != 0) {
    fprintf(stderr, "tlcapd: %s\n", err);
    return 2;
  }
  if (d->cli.check_only) {
    printf("configuration OK: %zu sources\n", d->in.cfg.nsrc);
    tlc_config_fini(&d->in.cfg);
    return 0;
  }
  tlc_log_init();
  tlc_log_set_level(d->in.cfg.log_level);
  tlc_log_set_debug(d->in.cfg.debug);
  srand((unsigned)getpid() ^ (unsigned)time(NULL));

  r = uv_loop_init(&loop);
  if (r != 0) {
    tlc_log(TLC_LOG_ERR, TLC_LOGC_MAIN, "event loop: %s", uv_strerror(r));
    tlc_log_flush(1);
    tlc_config_fini(&d->in.cfg);
    return 1;
  }
  if (tlc_daemon_init(d, &loop) != 0) {
    tlc_log(TLC_LOG_ERR, TLC_LOGC_MAIN, "out of memory");
    (void)uv_loop_close(&loop);
    tlc_log_flush(1);
    tlc_config_fini(&d->in.cfg);
    return 1;
  }

  if (tlc_daemon_start(d) == 0) {
    uv_run(&loop, UV_RUN_DEFAULT);
  } else {
    /* Start-up failed: close what was started, as a shutdown does, and run the loop until
     * every module has closed its handles and joined its threads; then exit 1. */
    tlc_daemon_close(d, 0);
    uv_run(&loop, UV_RUN_DEFAULT);
    settle_http(&loop); /* an HTTP server that failed to start: its handles closed */
  }

  tlc_daemon_fini(d);
  r = uv_loop_close(&loop);
  if (r != 0) {
    /* Every handle should be closed by now; say which were not, then close them. */
    tlc_log(TLC_LOG_WARN, TLC_LOGC_MAIN, "handles left open at exit: %s", uv_strerror(r));
#ifdef TLCAP_TESTING
    if (d->exit_code == 0)
      d->exit_code = 3; /* test builds: a handle left open fails the test */
#endif
    uv_walk(&loop, close_walk_cb, NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
    (void)uv_loop_close(&loop);
  }
  tlc_fleet_shutdown(); /* libnats's threads end before the process does */
  tlc_log(TLC_LOG_INFO, TLC_LOGC_MAIN, "exit %d", d->exit_code);
  tlc_log_flush(1);
  return d->exit_code;
}
