/* http.h - tlcapd's HTTP port: the live dashboard (/), Prometheus metrics (/metrics) and the
 * JSON API (/api/v1/...), SPEC section 9; docs/http.md describes every path.
 *
 * The server is libwebsockets on the daemon's own libuv loop (a foreign loop: no thread of its
 * own). It reads the daemon through the read side pubsub uses (view/view.h), given at
 * creation: the targets, daemon-wide and per-target storage figures, and the NET histograms of
 * the targets' engines. It never writes to them, except a mapping load or a rotation asked for
 * through the API.
 *
 * Limits (tlc_http_opts_t): connections at once, request header bytes, response bytes (one
 * response and all in flight together), WebSocket message bytes received; every live
 * WebSocket has one pending message at most, built when the socket can take it, so a slow
 * reader coalesces to the latest state instead of queueing (as a subscriber's snapshot slot).
 *
 * Threads: every function runs on the loop thread.
 */
#ifndef TLC_HTTP_H
#define TLC_HTTP_H

#include "auth/auth.h"
#include "auth/tls.h"
#include "view/view.h"

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

typedef struct tlc_http tlc_http_t;

typedef struct tlc_http_opts {
  const char *host;       /* address to bind (copied) */
  uint16_t port;          /* 0: any free port (tlc_http_port tells which) */
  size_t max_connections; /* HTTP and WebSocket connections at once (default 64) */
  size_t max_per_address; /* ... of them from one peer address (0, the default: no cap; the
                             daemon's max_per_address: 16). Past it a connection is closed at
                             accept, as past max_connections */
  size_t max_header;      /* bytes of a request's headers (default 4096) */
  size_t max_response;    /* bytes of one response (default 64 MiB; more: 503) */
  size_t max_inflight;    /* bytes of all responses being sent (default 256 MiB; more: 503) */
  size_t max_ws_message;  /* bytes of one live WebSocket message (default 4 MiB: rows cut) */
  uint32_t metrics_areas; /* area series per target on /metrics (SPEC 9; default 20; 0: none) */
  uint32_t live_ms;       /* live WebSocket update period (default 1000; 100..10000) */
  int64_t start_unix_ms;  /* daemon start, for tlcap_uptime_seconds */
  const char *version;    /* for tlcap_build_info */
  /* SPEC 8: with a token (borrowed, outlives the server), /metrics and /api/ answer only a
   * request with "Authorization: Bearer TOKEN" (else 401, after the token module's delay for
   * a peer that keeps failing), and a live WebSocket is sent nothing before its first message
   * "token TOKEN" (a wrong one closes it, 1008). The page's files need no token. */
  tlc_auth_t *auth;
  /* DNS rebinding and other origins' pages: a request whose Host is not a loopback name or
   * address, the bound address, the address the connection reached, or one of `hosts` (names
   * separated by commas or blanks; NULL: none) is answered 421; a live WebSocket handshake
   * whose Origin is present and neither scheme://Host nor one of `origins` is refused. Both
   * copied (at most 1023 bytes each). */
  const char *hosts, *origins;
  const char *tls_cert, *tls_key; /* PEM files: the port speaks TLS (read at creation; a new
                                     pair by tlc_http_reload_tls; NULL or "": plain HTTP) */
  void (*log)(void *ud, int level, const char *msg); /* syslog levels as log.h; may be NULL */
  void *log_ud;
  /* 1: no bind of our own before libwebsockets' (by default a port in use is found by one, so
   * that the error is clear). Tests set it to reach libwebsockets' own failure to listen. */
  int no_probe;
} tlc_http_opts_t;

/* Counters of the server (tlc_http_get_stats). */
typedef struct tlc_http_stats {
  uint64_t requests;        /* HTTP requests answered */
  uint64_t errors;          /* answered with a 4xx/5xx status */
  uint64_t refused;         /* connections refused: max_connections or max_per_address reached */
  uint64_t refused_address; /* ... of them: the peer address had max_per_address */
  uint64_t misdirected;     /* 421 (Host not this daemon's) and live handshakes of another origin */
  uint64_t busy;            /* 503: response over max_response or max_inflight */
  uint64_t ws_messages;     /* live messages sent */
  uint64_t ws_cpu_ns;       /* loop thread CPU time building and writing live messages */
  uint64_t ws_coalesced;    /* live updates merged into a later one (slow reader) */
  uint64_t ws_bad;          /* live connections closed for a bad message */
  uint64_t auth_failed;     /* requests and live sockets refused for a missing or wrong token */
  size_t connections;       /* open now */
  size_t websockets;        /* live WebSockets open now */
  size_t inflight_bytes;    /* response bytes not yet sent */
} tlc_http_stats_t;

/* Fills the defaults (no address). */
void tlc_http_opts_default(tlc_http_opts_t *o);

/* Creates the server on `loop` and starts listening on o->host:o->port. `view` is borrowed
 * and must outlive the server. Returns 0 and *out, TLC_EINVAL (bad options), TLC_ENOMEM, or
 * a negative error from binding (UV_EADDRINUSE, ...); nothing is left behind on failure
 * except handles closing on the loop (the loop must run on). */
int tlc_http_new(uv_loop_t *loop, const tlc_http_opts_t *o, const tlc_view_t *view,
                 tlc_http_t **out);

/* SIGHUP: area series per target on /metrics from the next scrape. */
void tlc_http_set_metrics_areas(tlc_http_t *h, uint32_t n);

/* SIGHUP: new TLS connections get the certificate chain and key of tls's current context (one
 * tlc_tls_reload loaded and checked: a bad pair never gets here); connections already open keep
 * theirs. Returns 0, or TLC_EINVAL with err saying why (the port does not speak TLS; the previous
 * certificate stays). */
int tlc_http_reload_tls(tlc_http_t *h, tlc_tls_t *tls, char *err, size_t errlen);

/* The bound port. */
int tlc_http_port(const tlc_http_t *h);

/* Counters (a copy). */
void tlc_http_get_stats(const tlc_http_t *h, tlc_http_stats_t *out);

/* Closes every connection and the listener, then frees the server and calls cb(ud) (may be
 * NULL) from the loop, once libwebsockets has closed its handles. The loop must run until
 * then. NULL h: nothing. */
void tlc_http_close(tlc_http_t *h, void (*cb)(void *ud), void *ud);

/* Servers still closing: closed ones and those whose start failed after libwebsockets had
 * created handles on the loop (tlc_http_new then tears them down itself). libwebsockets
 * closes those handles itself, so a caller that closes every handle left on the loop (a
 * start-up failure) runs the loop until this is 0 first. */
int tlc_http_closing(void);

#endif
