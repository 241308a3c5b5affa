/* daemon.h - the daemon object: one tlc_daemon_t owns everything tlcapd runs.
 *
 *   in       the loop, the configuration in force, the target registry and the sources
 *            (ingest/sources.h: the context the sources are given)
 *   view     the read side over the registry (view/view.h) that the servers read
 *   modules  remote access (the token and the TLS context), storage and its policy, range
 *            queries, checkpoints, the subscriber server, the NATS publisher, the HTTP port:
 *            wiring.c creates and connects them; each is NULL while it does not run
 *   dump     the stats dump (dump.h), signals, the status tick
 *
 * Lifecycle (main.c): tlc_daemon_init once the configuration is built, tlc_daemon_start, the
 * loop run until it returns, tlc_daemon_fini. Signals are handled on the loop: SIGHUP
 * tlc_daemon_reload, SIGTERM/SIGINT tlc_daemon_close (shutdown), SIGUSR1 the stats dump. A
 * failed start-up is closed as a shutdown is (tlc_daemon_close), then the loop is run until
 * every module has closed its handles and joined its threads.
 *
 * Everything runs on the loop thread.
 */
#ifndef TLC_DAEMON_H
#define TLC_DAEMON_H

#include "alert/alert.h"
#include "auth/auth.h"
#include "auth/tls.h"
#include "config/config.h"
#include "continuity/continuity.h"
#include "daemon/dump.h"
#include "fleet/fleet.h"
#include "history/histq.h"
#include "http/http.h"
#include "ingest/sources.h"
#include "pubsub/pubsub.h"
#include "store/policy/policy.h"
#include "store/store.h"
#include "view/view.h"

#include <uv.h>

#include <stdint.h>

typedef struct tlc_daemon {
  tlc_ingest_t in;     /* loop, cfg, targets, sources */
  tlc_cli_t cli;       /* the command line, applied over the file again on SIGHUP */
  tlc_view_reg_t view; /* the read side over in.targets */
  /* The modules (wiring.c). Each is NULL before it starts and when the configuration leaves it
   * off; tlc_wiring_close sets each to NULL as it closes it (auth and tls once every module
   * that borrows them has closed). */
  tlc_auth_t *auth;            /* the token file (SPEC 8), borrowed by pubsub and HTTP */
  tlc_tls_t *tls;              /* the TLS context, likewise; both freed once those have closed */
  tlc_stpol_t *stpol;          /* storage and its policy (store = yes) */
  tlc_store_t *store;          /* its store (tlc_stpol_store) */
  tlc_histq_t *histq;          /* range queries off the loop, with storage */
  struct tlc_rollup *rollup;   /* rollups (rolld.c), with storage */
  struct tlc_rolld_acc *raccs; /* a rollup accumulator per target (rolld.c) */
  size_t nraccs, capraccs;
  size_t nrebuilt; /* rolld.c: accumulators with a rebuild from segments running or ended */
  struct tlc_budgetd_w **bws; /* a timing budgets watch per watched target (budgetd.c) */
  size_t nbws, capbws;
  struct bwck_job *bwck_busy;       /* budgetd.c: the watch files being written (one per target) */
  tlc_cont_t *cont;                 /* statistics checkpoints and restore */
  tlc_pubsub_t *pubsub;             /* the subscriber server */
  tlc_fleet_t *fleet;               /* the NATS publisher (nats_url set) */
  tlc_alert_t *alert;               /* the Alertmanager client (alertmanager_url set) */
  tlc_http_t *http;                 /* the HTTP port (http set) */
  char http_url[TLC_CFG_HOST + 32]; /* the dashboard's URL while the HTTP port serves */
  char http_off[TLC_CFG_HOST + 96]; /* why the configured HTTP port does not serve, or "" */
  int modules;     /* modules created and not yet closed (their close is asynchronous) */
  int closing;     /* tlc_wiring_close has run */
  tlc_dump_t dump; /* --dump-stats-on-exit, SIGUSR1: written off the loop */
  uv_signal_t sig_hup, sig_term, sig_int, sig_usr1;
#ifdef TLCAP_TESTING
  uv_signal_t sig_usr2;
#endif
  uv_timer_t tick;
  int nsignals; /* signal handles initialised, in start order (sig_hup first) */
  int tick_on;  /* the tick timer was initialised */
  int dump_on;  /* dump initialised (tlc_dump_init) */
  uint64_t last_status;
  char last_status_text[512];
  int exit_code; /* what tlcapd exits with */
} tlc_daemon_t;

/* Sets up `d` (zeroed, d->cli parsed and d->in.cfg built by the caller, which d owns from here
 * on) on `loop`: the shared read buffer, the target registry and its memory budget, the stats
 * dump, the read side, the connection cap. Returns 0, or TLC_ENOMEM (nothing to undo but
 * tlc_daemon_fini). */
int tlc_daemon_init(tlc_daemon_t *d, uv_loop_t *loop);

/* Starts the modules (storage first: crash recovery before anything is accepted; then
 * checkpoints, subscribers, NATS), the sources (inherited sockets, listeners, dial, serial,
 * efl), the signals, the status tick, the HTTP port and the watchdog, then sends READY=1.
 * Returns 0, or a negative error after logging and telling systemd why (STATUS=, ERRNO=):
 * d->exit_code is then 1 and the caller closes (tlc_daemon_close(d, 0)) and runs the loop. */
int tlc_daemon_start(tlc_daemon_t *d);

/* SIGHUP: RELOADING=1, the configuration built again from the file and the command line; an
 * invalid one, or one that moves a running listener or server (restart required), is refused
 * with one error line and the running configuration stays; else it replaces d->in.cfg and the
 * sources and modules apply it. READY=1 either way. */
void tlc_daemon_reload(tlc_daemon_t *d);

/* Shutdown or a failed start-up: stops accepting, reads what the kernel holds for every
 * connection and tty, closes the sources, requests the stats dump if `dump`, closes the modules
 * (each closes its own handles and joins its own threads, asynchronously), the watchdog, the
 * tick and the signals. The caller runs the loop until it returns. Once only. */
void tlc_daemon_close(tlc_daemon_t *d, int dump);

/* After the loop has run out of handles: frees what init set up (the registry, the buffers).
 * The configuration is freed too. */
void tlc_daemon_fini(tlc_daemon_t *d);

#endif
