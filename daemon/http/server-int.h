/* server-int.h - what the libwebsockets files of daemon/http share (private to them; the
 * request side, http-int.h, knows nothing of libwebsockets).
 *
 *   server.c     the server: options, logging, the protocol callback, start and close
 *   answer.c     a request read and answered: method, path, body, Host/Origin/token checks,
 *                the response's headers and body
 *   send.c       a response's body sent as the socket takes it, and /metrics made a slice per
 *                loop turn
 *   ws.c         the live WebSocket: its messages both ways and the tick that marks them due
 *   tlsreload.c  a new certificate for new handshakes (SIGHUP)
 *   pipeguard.c  lws 4.1 closes its event pipe twice at destroy: the number kept from others
 *   say.c        the log line they all write (a leaf)
 *
 * server.c's callback calls into the others and none of them calls back into server.c;
 * send.c calls answer.c (respond, body_free) and ws.c calls send.c (thread CPU time), never
 * the other way. Loop thread only.
 */
#ifndef TLC_HTTP_SERVER_INT_H
#define TLC_HTTP_SERVER_INT_H

#include "auth/peers.h"
#include "base/clock.h"
#include "base/list.h"
#include "http/http-int.h"

#include <libwebsockets.h>
#include <openssl/ssl.h>
#include <uv.h>

#include <stddef.h>
#include <stdint.h>

/* Body bytes per write: at most WRITE_CHUNK a loop turn, whether sent in place (a body past its
 * first LWS_PRE bytes: a stats or range answer) or copied first into chunk_buf (an embedded
 * file, a body's first bytes, a scrape's bytes). The kernel's copy of a write over loopback is
 * loop time: 1 MiB held the loop for 4-17 ms on a loaded 2-vCPU machine, 256 KiB a quarter of
 * that, at the price of a wake-up per turn (bench/RESULTS.md, "/metrics in slices", "History
 * queries and the loop"). CHUNK is lws's tx_packet_size (the most a write may hand it). */
#define CHUNK       (1024 * 1024)
#define WRITE_CHUNK (256 * 1024)
#define COPY_CHUNK  WRITE_CHUNK

/* /metrics is made a slice per loop turn (the connection's writable callback, before its
 * headers): targets are read until a slice has taken SLICE_NS or rendered SLICE_BYTES of area
 * series (at least one target), so that ingest and other requests run between slices. */
#define SLICE_NS    1000000u
#define SLICE_BYTES (1024u * 1024u)

/* A request body (no path takes one: it gets its error) is read and dropped before the answer
 * up to this size, so that the connection can go on (or close with nothing unread: a close
 * with unread bytes is a reset, which can cut the answer on the client's side). */
#define BODY_MAX     (1024 * 1024)
#define ROUND_TRIP_S 10 /* lws's timeout of a network round trip (and of a body's next bytes) */

typedef struct pss pss_t;

/* pipeguard.c: lws 4.1's event pipe, closed twice by lws_context_destroy (pipeguard.c says how
 * it is made harmless). */
#define TLC__HTTP_PIPE_HOLES 8  /* free numbers below the pipe's while lws closes it */
#define TLC__HTTP_PIPE_SEEN  64 /* eventfds listed before lws_create_context */
typedef struct tlc__http_pipeguard {
  int fd; /* lws's event pipe, -1 when unknown */
  int holes[TLC__HTTP_PIPE_HOLES];
  int nholes;
  int before[TLC__HTTP_PIPE_SEEN];
  size_t nbefore, nnew;
} tlc__http_pipeguard_t;
/* Before lws_create_context: holes opened, eventfds listed. */
void tlc__http_pipeguard_arm(tlc__http_pipeguard_t *g);
/* After it (`created`: a context that lws did not begin destroying itself): finds the pipe. NULL,
 * or why nothing is guarded. */
const char *tlc__http_pipeguard_found(tlc__http_pipeguard_t *g, int created);
/* Just before the first lws_context_destroy, and when the server is freed: the holes closed. */
void tlc__http_pipeguard_release(tlc__http_pipeguard_t *g);
/* Just after it: the pipe's number taken again. 1 taken, 0 nothing to do, -1 the number was
 * already another file's (the guard failed: lws's second close will close it). */
int tlc__http_pipeguard_retake(tlc__http_pipeguard_t *g);

struct tlc_http {
  uv_loop_t *loop;
  struct lws_context *ctx; /* NULL once lws has finished destroying it (pcontext) */
  struct lws_vhost *vh;
  tlc_http_opts_t o;
  char host[64];
  tlc__http_view_t view;
  tlc_http_stats_t st;
  int port;
  uv_timer_t tick;
  uv_idle_t wait;
  int tick_init, wait_init;
  LIST_HEAD(, pss) ws;         /* live WebSockets (is_ws), newest first */
  tlc__http_live_cache_t live; /* their messages' shared pieces */
  int64_t nwsi;                /* lws connections alive (WSI_CREATE - WSI_DESTROY) */
  int64_t nwsi_base;           /* ... of them lws's own (listener, event pipe) */
  tlc_peers_t peers;           /* connections per peer address (max_per_address) */
  size_t accepted_slot;        /* peers slot of the connection just accepted, for its WSI_CREATE */
  struct conn_slot {
    struct lws *wsi;
    size_t slot;
  } * cslots; /* the counted connections' slots, given back at WSI_DESTROY */
  size_t ncslots, capcslots;
  char hosts[1024], origins[1024]; /* http_hosts, http_origins (copied) */
  int closing;
  void (*close_cb)(void *);
  void *close_ud;
  /* TLS reload (tlc_http_reload_tls): lws's vhost SSL_CTX gets our certificate callback at its
   * creation (tls_hooked); tls_cur, once set, holds the certificate, chain and key that every
   * new handshake is given instead of those lws loaded at start (a reference we own). */
  int tls_on, tls_hooked;
  SSL_CTX *tls_cur;
  tlc__http_pipeguard_t pipe;
};

struct pss {
  tlc_http_t *h;
  int bound; /* counted in st.connections */
  int is_ws;
  /* HTTP response being sent */
  char *body; /* owned (memory body) */
  const unsigned char *sbody;
  size_t len, off; /* all of it, and sent so far */
  size_t blen;     /* body's or sbody's part of len */
  size_t inflight; /* counted in st.inflight_bytes */
  /* /metrics: the scrape being made (a slice per loop turn), then sent after body; what it
   * cost the loop: slices, the longest, the longest write */
  tlc__http_scrape_t *scrape;
  int scrape_made;
  unsigned slices, writes;
  uint64_t slice_max_ns, write_max_ns, scrape_t0; /* wall clock */
  uint64_t slice_max_cpu, write_max_cpu;          /* the loop thread's CPU time */
  int close_after;
  int await_body;               /* the answer waits for the request body (read and dropped) */
  int deny;                     /* a 401 waits for the token module's delay (LWS_CALLBACK_TIMER) */
  int authed;                   /* live: its token was accepted (or none is needed) */
  tlc__http_pending_t *pending; /* range statistics being computed off the loop (route.c) */
  /* live */
  LIST_ENTRY(pss) link; /* in h->ws while is_ws */
  struct lws *wsi;
  int due;
  tlc__http_live_t live;
};

/* A request's path (loop thread only; server.c). */
extern char tlc__http_uri_buf[65536];

/* say.c: a log line through the options' log hook (syslog levels). */
void tlc__http_say(tlc_http_t *h, int level, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* answer.c: the response's memory body freed (and its in-flight bytes given back). */
void tlc__http_body_free(pss_t *p);
/* answer.c: the request's path into buf (NULL: none). */
const char *tlc__http_uri_of(struct lws *wsi, char *buf, size_t len);
/* answer.c: the request's Content-Length (-1: none or unreadable). */
long long tlc__http_content_length(struct lws *wsi);
/* answer.c: 1 when the request asked for "Expect: 100-continue". */
int tlc__http_expects_continue(struct lws *wsi);
/* answer.c: 1 when a live WebSocket handshake's Host and Origin are this daemon's. */
int tlc__http_ws_origin_ok(struct lws *wsi, tlc_http_t *h);
/* answer.c: answers the request for `path` (headers, then the body through send.c). 0 or -1
 * (close the connection). */
int tlc__http_respond(struct lws *wsi, pss_t *p, const char *path);

/* send.c: CPU time of the calling thread (the loop's). */
uint64_t tlc__http_thread_cpu_ns(void);
/* send.c: the response's next bytes, as many as the socket takes. 0 or -1 (close). */
int tlc__http_send_chunk(struct lws *wsi, pss_t *p);
/* send.c: one slice of a /metrics scrape being made; once made, answered. 0 or -1. */
int tlc__http_scrape_slice(struct lws *wsi, pss_t *p);

/* ws.c: a live WebSocket taken off the list; its message sent; one received; the tick. */
void tlc__http_ws_unlink(pss_t *p);
int tlc__http_ws_send(struct lws *wsi, pss_t *p);
int tlc__http_ws_receive(struct lws *wsi, pss_t *p, const void *in, size_t len);
void tlc__http_ws_tick_cb(uv_timer_t *t);

/* tlsreload.c: OpenSSL's certificate callback on lws's SSL_CTX (arg: the tlc_http_t). */
int tlc__http_tls_cert_cb(SSL *ssl, void *arg);

#endif
