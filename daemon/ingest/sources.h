/* sources.h - the ingest context (tlc_ingest_t: what the sources share; the daemon object,
 * daemon/daemon.h, embeds it) and TCP connections.
 *
 * tlc_ingest_t ties the loop, the current configuration, the target registry and the running
 * sources together. The sources themselves - TCP listen (tcp.c), TCP dial (dial.c), serial
 * (serial.c), EFL applications (efl.c) - are kinds of source.h's interface, reconciled with
 * d->cfg by the one tlc_sources_sync() (sources.c), which says what a reload keeps and restarts.
 * A listener that keeps its name keeps its socket: a new address is refused before the sync
 * (its check_reload, "restart required"); a new format applies to connections accepted from
 * then on.
 *
 * TCP connections (tlc_conn_t, conn.c) are shared by listen and dial. Reading never buffers
 * beyond one shared read buffer: received bytes are decoded synchronously in the read callback,
 * so a slow, silent or broken target costs only its own socket buffer and decoder carry.
 *
 * Everything runs on the loop thread.
 */
#ifndef TLC_SOURCES_H
#define TLC_SOURCES_H

#include "base/list.h"
#include "config/config.h"
#include "formats/preamble.h" /* TLC_PREAMBLE_MAX */
#include "ingest/source.h"
#include "ingest/target.h"

#include <uv.h>

#include <stddef.h>
#include <stdint.h>

#define TLC_CONN_SUFFIX_MAX 64 /* "#2".."#64": simultaneous connections per name */

typedef struct tlc_ingest tlc_ingest_t;
typedef struct tlc_conn tlc_conn_t;

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
  uv_connect_t creq;         /* dial only */
  LIST_ENTRY(tlc_conn) link; /* d->conns, while counted */
  void *owner;               /* dial: the dialer (NULL once it let go); listen: NULL */
  void (*closed_cb)(void *owner, int had_data); /* the owner's: the handle closed */
  char src_name[TLC_TARGET_NAME_MAX + 1];       /* listener or dialer name */
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
  int barrier_wait;  /* half-closed: waiting for storage to write every byte (d->barrier) */
  int handle_closed; /* the handle's close callback ran while barrier_wait was set */
  uint64_t turn_ms;  /* loop time of the loop turn turn_bytes counts in */
  size_t turn_bytes; /* bytes read in that turn */
  SLIST_ENTRY(tlc_conn) yield_link; /* d->yielded: reading stopped until the turn's check */
  int yielded;
  int held;     /* storage backpressure: not reading until its target is released */
  int accepted; /* came in through a listener (the refusal reply goes only to those) */
};

struct tlc_ingest {
  uv_loop_t *loop;
  tlc_config_t cfg;
  tlc_targets_t targets;
  tlc_source_kind_t kinds[TLC_SOURCE_KINDS]; /* registered kinds, their running sources */
  size_t nkinds;
  int sources_synced;          /* tlc_sources_sync has run once (start-up is over) */
  LIST_HEAD(, tlc_conn) conns; /* counted connections, newest first */
  size_t nconns;
  size_t max_conns; /* effective cap (config or RLIMIT_NOFILE - reserve) */
  uint8_t *rbuf;    /* shared read buffer (loop thread only) */
  size_t rbuf_len;
  uv_timer_t sweep;               /* deadlines */
  uv_check_t resume;              /* restarts reading of connections that yielded (conn.c) */
  int resume_init;                /* resume is initialised (closed with every handle at exit) */
  SLIST_HEAD(, tlc_conn) yielded; /* connections that used their read share of this turn */
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
 * nothing) - the caller must then fail start-up. fds another server took already (`taken`: pubsub
 * takes "serve" and "subscribe") are skipped.
 */
int tlc_listen_adopt(tlc_ingest_t *d);

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

/* ---- TCP connections (conn.c), for listen and dial ---- */

/* A connection of source `src_name` with `format` on a new (uninitialised-socket) TCP handle,
 * not yet counted. Returns NULL when out of memory. */
tlc_conn_t *tlc__conn_new(tlc_ingest_t *d, const char *src_name, tlc_format_t format);

/* Starts reading on a connected TCP handle (accepted or dialled). For dial, `fixed` is the
 * target to attach (a preamble, if sent, is consumed and its name ignored). */
void tlc__conn_begin(tlc_conn_t *c, tlc_target_t *fixed);

/* Closes a connection: detaches its target with `reason`, removes it from d->conns, closes the
 * handle; memory is freed in the close callback, which also calls c->closed_cb. */
void tlc__conn_close(tlc_conn_t *c, const char *reason);

/* Closes a connection that never began (no target, not counted): with `line` (may be NULL)
 * sent first, best effort, and, if `reset`, an RST instead of a FIN (SO_LINGER 0). */
void tlc__conn_discard(tlc_conn_t *c, const char *line, int reset);

/* The refusal line's prefix, "tlcapd: refused: " (conn.c's top comment). */
#define TLC_CONN_REFUSE_PREFIX "tlcapd: refused: "

/* "ip" and "ip:port" ("[ip]:port" for IPv6; "local" for AF_UNIX) of a socket address. */
void tlc__addr_text(const struct sockaddr *sa, char *ip, size_t iplen, char *full, size_t fulllen);

/* Called by the sweep timer: closes connections past their deadlines. */
void tlc__conn_sweep(tlc_ingest_t *d, uint64_t now);

/* Shutdown: reads what the kernel already holds on every connection (non-blocking), feeds it,
 * then closes all connections. Idempotent. */
void tlc__conns_drain_close(tlc_ingest_t *d);

#endif
