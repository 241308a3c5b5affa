/* sources.h - the ingest context and the ingest sources: TCP listen, TCP dial, serial, efl.
 *
 * tlc_ingest_t ties the loop, the current configuration, the target registry and the running
 * sources together; the daemon object (daemon/daemon.h) embeds it and hands it to the sources. Each
 * source kind keeps a list of running objects that tlc_*_sync() reconciles with d->cfg by name
 * (start at launch, SIGHUP add/remove/change, shutdown with an empty configuration):
 *   - same name and same address/format/device settings: kept untouched (its connections and
 *     targets carry on; per-target settings apply to targets created from then on);
 *   - a listener with the same name keeps its socket: a new address is refused before the sync
 *     (tlc_listen_check_reload, "restart required"); a new format applies to connections
 *     accepted from then on;
 *   - a dial or serial source with a changed address, format or line settings: stopped and
 *     started again (re-dialled, re-opened) - targets and their statistics are kept, since they
 *     live in the registry;
 *   - removed: stopped. A removed listener's accepted connections stay open until their peers
 *     close them (they belong to targets, not to the listener).
 *
 * TCP connections (tlc_conn_t) are shared by listen and dial. Reading never buffers beyond one
 * shared read buffer: received bytes are decoded synchronously in the read callback, so a slow,
 * silent or broken target costs only its own socket buffer and decoder carry.
 *
 * Everything runs on the loop thread.
 */
#ifndef TLC_SOURCES_H
#define TLC_SOURCES_H

#include "config/config.h"
#include "formats/preamble.h" /* TLC_PREAMBLE_MAX */
#include "ingest/target.h"

#include <uv.h>

#include <stddef.h>
#include <stdint.h>

#define TLC_CONN_SUFFIX_MAX 64 /* "#2".."#64": simultaneous connections per name */

typedef struct tlc_ingest tlc_ingest_t;
typedef struct tlc_listener tlc_listener_t;
typedef struct tlc_dialer tlc_dialer_t;
typedef struct tlc_serial tlc_serial_t;
typedef struct tlc_conn tlc_conn_t;
typedef struct tlc_efl tlc_efl_t;
struct tlc_out;
struct tlc_json_w;

/* Daemon-wide ingest counters (shown in STATUS and the stats dump). */
typedef struct tlc_ingest_stats {
  uint64_t accepted;        /* TCP connections accepted */
  uint64_t refused_limit;   /* closed at once: max_connections reached */
  uint64_t refused_target;  /* closed: no target (cap, bad name, format clash, too many #N) */
  uint64_t accept_errors;   /* accept failures (EMFILE, ENFILE, ...) */
  uint64_t accept_pauses;   /* times accepting was paused after fd exhaustion */
  uint64_t preamble_errors; /* malformed TLCAP/1 lines */
  uint64_t closed_decode;   /* closed after a strict decode error */
  uint64_t closed_deadline; /* closed by the partial-record (or preamble) deadline */
  uint64_t closed_idle;     /* closed by the idle timeout */
  uint64_t closed_eof;      /* peer half-closed: closed after processing */
  uint64_t closed_reset;    /* ECONNRESET/EPIPE/other read errors */
  uint64_t dial_attempts, dial_failures;
  uint64_t serial_opens, serial_failures, serial_unplugs;
  uint64_t refused_allow; /* reset at once: the peer's address is not in the listener's allow */
} tlc_ingest_stats_t;

struct tlc_conn {
  tlc_ingest_t *d;
  uv_tcp_t h;
  uv_connect_t creq;       /* dial only */
  tlc_conn_t *prev, *next; /* d->conns */
  tlc_dialer_t *dialer;    /* dial: owner (NULL once the dialer let go); listen: NULL */
  char src_name[TLC_TARGET_NAME_MAX + 1]; /* listener or dialer name */
  tlc_format_t src_format;
  char peer[TLC_PEER_MAX]; /* "ip:port" */
  char peer_ip[64];
  tlc_target_t *target; /* NULL until the preamble (or its absence) is settled */
  int preamble_done;
  char pre[TLC_PREAMBLE_MAX];
  size_t prelen;
  uint64_t last_rx;   /* uv_now of the last byte received */
  uint64_t since;     /* uv_now at accept/connect */
  uint64_t rec_since; /* uv_now when the record/block the decoder is inside began (0: none) */
  uint64_t rec_units; /* tlc_target_units then */
  int counted;        /* counted in d->nconns */
  int closing;
  int barrier_wait;       /* half-closed: waiting for storage to write every byte (d->barrier) */
  int handle_closed;      /* the handle's close callback ran while barrier_wait was set */
  uint64_t turn_ms;       /* loop time of the loop turn turn_bytes counts in */
  size_t turn_bytes;      /* bytes read in that turn */
  tlc_conn_t *yield_next; /* d->yielded: reading stopped until the turn's check phase */
  int yielded;
  int held;     /* storage backpressure: not reading until its target is released */
  int accepted; /* came in through a listener (the refusal reply goes only to those) */
};

struct tlc_ingest {
  uv_loop_t *loop;
  tlc_config_t cfg;
  tlc_targets_t targets;
  tlc_listener_t *listeners;
  tlc_dialer_t *dialers;
  tlc_serial_t *serials;
  tlc_efl_t *efls; /* [efl NAME] sources (efl.c) */
  tlc_conn_t *conns;
  size_t nconns;
  size_t max_conns; /* effective cap (config or RLIMIT_NOFILE - reserve) */
  uint8_t *rbuf;    /* shared read buffer (loop thread only) */
  size_t rbuf_len;
  uv_timer_t sweep;    /* deadlines */
  uv_check_t resume;   /* restarts reading of connections that yielded (tcp.c) */
  int resume_init;     /* resume is initialised (closed with every handle at exit) */
  tlc_conn_t *yielded; /* connections that used their read share of this loop turn */
  int stopping;
  tlc_ingest_stats_t st;
  /* Storage barrier (set by wiring.c while storage runs, else NULL): calls cb(cb_ud) on the
   * loop once everything queued to storage before the call is written (tlc_store_barrier).
   * Returns 0, or a negative error and cb is never called. SPEC 1: a target that half-closes
   * is answered by closing the connection only once every byte it sent is written. */
  int (*barrier)(void *ud, void (*cb)(void *cb_ud), void *cb_ud);
  void *barrier_ud;
};

/* ---- TCP listen (tcp.c) ---- */

/* Adopts inherited sockets (socket activation) as listeners, in this order: an fd named like a
 * configured [listen NAME] becomes that listener; else an fd bound to the address of a
 * configured listener becomes it; else an fd whose name is a format ("bin11") or ends in
 * "-FORMAT" ("ingest-bin11") becomes a listener of that name and format. Returns 0, or a negative
 * error after logging which fd is wrong (a non-stream or non-listening socket, or one that matches
 * nothing) - the caller must then fail start-up. fds named "serve"/"subscribe" are left for pubsub.
 */
int tlc_listen_adopt(tlc_ingest_t *d);

/* SIGHUP, before `nc` replaces d->cfg: 0 if every running listener that `nc` keeps (same
 * name) keeps its address, else TLC_EINVAL with `why` naming each one that would move
 * ("listener b: address 127.0.0.1:7411 -> 127.0.0.1:7511"): the caller refuses the whole
 * reload (restart required), since moving a listener means a window without it and a bind
 * that may fail. Inherited listeners are not checked (their address is the socket unit's). */
int tlc_listen_check_reload(const tlc_ingest_t *d, const tlc_config_t *nc, char *why,
                            size_t whylen);

/* Reconciles running listeners with d->cfg (see above). Returns 0, or the first bind error
 * (the other listeners are still applied; the error is logged naming listener and address). */
int tlc_listen_sync(tlc_ingest_t *d);

/* Number of running listeners. */
size_t tlc_listen_count(const tlc_ingest_t *d);

/* Adopts `fd`, a connected stream socket (TCP, or an AF_UNIX socketpair end, whose target
 * is then "<src_name>@local"), as if listener `src_name` with `format` had just accepted it:
 * the same connection, preamble, target, decoder, engine and counters path (counted in
 * `accepted`; max_connections is the listener's check and is not applied here). The seam
 * through which tests/fuzz/fuzz_ingest.c drives a real ingest session from a socketpair.
 * Returns 0 (the fd now belongs to the connection and is closed with it), or a negative
 * error (the fd stays the caller's). Loop thread. */
int tlc_listen_take_fd(tlc_ingest_t *d, const char *src_name, tlc_format_t format, int fd);

/* Starts reading on a connected TCP handle (accepted or dialled). For dial, `fixed` is the
 * target to attach (a preamble, if sent, is consumed and its name ignored). Called by dial.c. */
void tlc__conn_begin(tlc_conn_t *c, tlc_target_t *fixed);

/* Closes a connection: detaches its target with `reason`, removes it from d->conns, closes the
 * handle; memory is freed in the close callback, which also tells a dialer. */
void tlc__conn_close(tlc_conn_t *c, const char *reason);

/* Called by the sweep timer: closes connections past their deadlines. */
void tlc__conn_sweep(tlc_ingest_t *d, uint64_t now);

/* Shutdown: reads what the kernel already holds on every connection (non-blocking), feeds it,
 * then closes all connections. */
void tlc__conns_drain_close(tlc_ingest_t *d);

/* ---- TCP dial (dial.c) ---- */

/* Reconciles running dialers with d->cfg. Returns 0 (failures to reach a probe are retried
 * with backoff, never an error). */
int tlc_dial_sync(tlc_ingest_t *d);
/* The dialer's connection closed (called from the conn close path). */
void tlc__dial_conn_closed(tlc_dialer_t *dl, int had_data);

/* ---- serial (serial.c) ---- */

/* Reconciles running serial ports with d->cfg. Returns 0 (an absent device is retried). */
int tlc_serial_sync(tlc_ingest_t *d);
/* Shutdown: reads what the tty holds (non-blocking) and closes every port. */
void tlc__serial_drain_close(tlc_ingest_t *d);

/* ---- EFL applications through efl_debugd (efl.c, docs/efl.md) ---- */

/* Reconciles running efl sources with d->cfg: new ones connect to efl_debugd (retried with
 * backoff, never an error); removed or changed ones, and all of them when d->stopping, turn
 * the evlog off in their applications, detach their targets and close. Returns 0. */
int tlc_efl_sync(tlc_ingest_t *d);

/* Appends " efl_apps=N efl_capturing=N efl_no_cpufreq=N" to the NUL-terminated STATUS text in
 * buf (nothing without efl sources). */
void tlc_efl_status(const tlc_ingest_t *d, char *buf, size_t len);

/* Writes the member "efl": [ {source, pattern, debugd, connected, counters, apps: [{target, name,
 * pid, cid, state, replies, ...}]} ] with the stats dump's JSON writer (main.c). */
void tlc_efl_dump(const tlc_ingest_t *d, struct tlc_json_w *w);

/* ---- helpers shared by the sources (tcp.c) ---- */

/* Next reconnect delay: doubles `*cur` (starting at backoff_min, capped at backoff_max) and
 * returns it with +-25% jitter. */
uint64_t tlc__backoff_next(const tlc_ingest_t *d, uint64_t *cur);

/* Target creation settings for `name` coming from source (kind, src_name). */
void tlc__target_conf(const tlc_ingest_t *d, int kind, const char *src_name, const char *name,
                      tlc_format_t format, tlc_target_conf_t *out);

/* Fills a target's creation settings from the config, its source and the settings found by
 * tlc_config_tset. `mapping_path` in the result points into `c`. */
void tlc_target_conf_from_config(const tlc_config_t *c, const tlc_cfg_source_t *src,
                                 const char *name, tlc_format_t format, int resync,
                                 tlc_target_conf_t *out);

#endif
