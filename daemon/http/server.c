/* server.c - the HTTP port on libwebsockets, attached to tlcapd's libuv loop (see http.h).
 *
 * libwebsockets 4.1 (Debian 12) runs on the daemon's loop as a foreign loop
 * (LWS_SERVER_OPTION_LIBUV + foreign_loops; its libuv event library is the plugin
 * libwebsockets-evlib_uv.so of Debian's libwebsockets-evlib-uv, loaded by lws_create_context).
 * No thread of its own: every callback below runs on the loop thread, between ingest reads.
 *
 * Access: every request's Host must name this daemon (else 421) and a live WebSocket's Origin
 * be its own or a configured one (route.c's tlc__http_host_ok / tlc__http_origin_ok); with a
 * token, everything but the embedded files needs it, judged on the path the router reads
 * (tlc__http_public and tlc__http_route both take it from tlc__http_path).
 *
 * Requests: one protocol handles both HTTP and the live WebSocket, so a page that names no
 * subprotocol and one that names "tlcap-live" land in the same place. LWS_CALLBACK_HTTP
 * answers through route.c into a bounded memory body (or an embedded file, without a copy),
 * sent in 256 KiB chunks as the socket takes them; lws_http_transaction_completed keeps the
 * connection for the next request. No path takes a request body: one of up to BODY_MAX bytes
 * (by Content-Length) is read and dropped before the answer (HTTP_BODY_COMPLETION), so the
 * connection goes on; a larger one, or one of unknown length, is answered at once and the
 * connection closed after the answer.
 *
 * TLS: lws loads the certificate files at start; SIGHUP's reload reaches new handshakes
 * through OpenSSL's certificate callback on lws's SSL_CTX (tlc_http_reload_tls, below).
 *
 * Limits: connections are counted from accept to close (WSI_CREATE / WSI_DESTROY, less lws's
 * own listener and event pipe) and refused at accept (LWS_CALLBACK_FILTER_NETWORK_CONNECTION)
 * past max_connections, or past max_per_address from one peer address (peers.h: the slot taken
 * at accept is tied to the wsi lws creates next, WSI_CREATE, and given back at its
 * WSI_DESTROY); lws's own fd table has some room beyond it (fd_limit_per_thread), so
 * that a flood is accepted and closed at once rather than left in the kernel's backlog. Request
 * headers are capped by max_http_header_data (an oversized request is refused by lws), the time to
 * send them by lws's header timeouts (slowloris). A response over max_response, or one that would
 * take the bytes being sent past max_inflight, is a 503. A live socket has at most one message
 * outstanding: the tick marks it due and the message is built when lws says the socket is writable
 * (a due mark that finds the previous one still pending is counted as coalesced).
 *
 * Shutdown: lws_context_destroy on a foreign loop closes lws's handles asynchronously; an idle
 * handle of ours watches them close, calls lws_context_destroy again to finish the context
 * (lws 4.1 needs that second call on a foreign loop) and, once lws reports it gone
 * (info.pcontext set to NULL), closes itself and runs the close callback. The loop keeps
 * running meanwhile; nothing of lws is left on it.
 */
#include "http/http-int.h"

#include "auth/peers.h"
#include "base/alloc.h"
#include "base/err.h"

#include <libwebsockets.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>
#include <sys/socket.h>
#include <netinet/in.h>

/* Body bytes per write: large, so that a big scrape takes few loop turns (lws keeps what the
 * kernel does not take, and calls back only once that is sent): each turn is a wake-up of the
 * loop once the reader made room, and at 256 KiB those were 0.4 ms of a 5 MB scrape's loop
 * time (bench/RESULTS.md, "/metrics scrape, session 9"). Bytes sent in place (a body past its
 * first LWS_PRE bytes) go up to CHUNK at a time; those copied first (an embedded file, a body's
 * first bytes, a scrape's bytes) up to COPY_CHUNK. */
#define CHUNK      (1024 * 1024)
#define COPY_CHUNK (256 * 1024)
static unsigned char chunk_buf[LWS_PRE + COPY_CHUNK]; /* loop thread only */

/* /metrics is made a slice per loop turn (the connection's writable callback, before its
 * headers): targets are read until a slice has taken SLICE_NS or rendered SLICE_BYTES of area
 * series (at least one target), so that ingest and other requests run between slices. */
#define SLICE_NS    1000000u
#define SLICE_BYTES (1024u * 1024u)
static char uri_buf[65536]; /* a request's path (loop thread only) */

/* A request body (no path takes one: it gets its error) is read and dropped before the answer
 * up to this size, so that the connection can go on (or close with nothing unread: a close
 * with unread bytes is a reset, which can cut the answer on the client's side). */
#define BODY_MAX     (1024 * 1024)
#define ROUND_TRIP_S 10 /* lws's timeout of a network round trip (and of a body's next bytes) */

/* Security headers of every response: nothing but our own files and the live WebSocket;
 * inline styles only (dygraphs positions its legend and labels with them); never framed. */
static const struct {
  const char *name, *value;
} sec_headers[] = {
  { "content-security-policy:",
    "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; "
    "form-action 'none'" },
  { "x-content-type-options:", "nosniff" },
  { "x-frame-options:", "deny" },
  { "referrer-policy:", "no-referrer" },
};

typedef struct pss pss_t;

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
  pss_t *ws;                   /* live WebSockets */
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
  pss_t *prev, *next;
  struct lws *wsi;
  int due;
  tlc__http_live_t live;
};

/* lws logs are process-wide: one server's log hook at a time (the daemon has one). */
static tlc_http_t *log_owner;

static void say(tlc_http_t *h, int level, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
static void say(tlc_http_t *h, int level, const char *fmt, ...) {
  char msg[400];
  va_list ap;
  if (h->o.log == NULL)
    return;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  h->o.log(h->o.log_ud, level, msg);
}

static void lws_log_cb(int level, const char *line) {
  char buf[300];
  size_t n;
  if (log_owner == NULL)
    return;
  snprintf(buf, sizeof(buf), "libwebsockets: %s", line);
  n = strlen(buf);
  while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
    buf[--n] = '\0';
  say(log_owner, level == LLL_ERR ? 4 /* warning: a peer's doing, not ours */ : 6, "%s", buf);
}

static int64_t now_unix_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void tlc_http_opts_default(tlc_http_opts_t *o) {
  memset(o, 0, sizeof(*o));
  o->max_connections = 64;
  o->max_header = 4096;
  o->max_response = 64u << 20;
  o->max_inflight = 256u << 20;
  o->max_ws_message = 4u << 20;
  o->metrics_areas = 20;
  o->live_ms = 1000;
  o->max_per_address = 0;
}

/* ---- HTTP ---- */

static void body_free(pss_t *p) {
  tlc_http_t *h = p->h;
  tlc_free(p->body);
  p->body = NULL;
  p->sbody = NULL;
  tlc__http_scrape_free(p->scrape);
  p->scrape = NULL;
  p->scrape_made = 0;
  p->len = p->off = p->blen = 0;
  if (h != NULL) {
    h->st.inflight_bytes -= p->inflight;
    h->view.max_response = h->o.max_response;
  }
  p->inflight = 0;
}

static const char *method_of(struct lws *wsi) {
  if (lws_hdr_total_length(wsi, WSI_TOKEN_GET_URI) > 0)
    return "GET";
  if (lws_hdr_total_length(wsi, WSI_TOKEN_HEAD_URI) > 0)
    return "HEAD";
  if (lws_hdr_total_length(wsi, WSI_TOKEN_POST_URI) > 0)
    return "POST";
  if (lws_hdr_total_length(wsi, WSI_TOKEN_PUT_URI) > 0)
    return "PUT";
  if (lws_hdr_total_length(wsi, WSI_TOKEN_DELETE_URI) > 0)
    return "DELETE";
  if (lws_hdr_total_length(wsi, WSI_TOKEN_PATCH_URI) > 0)
    return "PATCH";
  if (lws_hdr_total_length(wsi, WSI_TOKEN_OPTIONS_URI) > 0)
    return "OPTIONS";
  return "OTHER";
}

/* The request's path (its method's URI header) into buf, or NULL. */
static const char *uri_of(struct lws *wsi, char *buf, size_t len) {
  static const enum lws_token_indexes tok[] = {
    WSI_TOKEN_GET_URI,    WSI_TOKEN_HEAD_URI,  WSI_TOKEN_POST_URI,    WSI_TOKEN_PUT_URI,
    WSI_TOKEN_DELETE_URI, WSI_TOKEN_PATCH_URI, WSI_TOKEN_OPTIONS_URI,
  };
  for (size_t i = 0; i < sizeof(tok) / sizeof(tok[0]); i++)
    if (lws_hdr_total_length(wsi, tok[i]) > 0)
      return lws_hdr_copy(wsi, buf, (int)len, tok[i]) >= 0 ? buf : NULL;
  return NULL;
}

/* The request's Content-Length: its value, -1 without one, -2 when it is not a number. */
static long long content_length(struct lws *wsi) {
  char b[32], *end;
  long long v;
  if (lws_hdr_total_length(wsi, WSI_TOKEN_HTTP_CONTENT_LENGTH) <= 0)
    return -1;
  if (lws_hdr_copy(wsi, b, sizeof(b), WSI_TOKEN_HTTP_CONTENT_LENGTH) <= 0)
    return -2;
  errno = 0;
  v = strtoll(b, &end, 10);
  if (end == b || *end != '\0' || v < 0 || errno != 0)
    return -2;
  return v;
}

/* 1 when the client waits for "100 Continue" before it sends its body (Expect: 100-continue;
 * lws does not send one): it is answered at once instead, and then sends no body. */
static int expects_continue(struct lws *wsi) {
  char b[32];
  return lws_hdr_total_length(wsi, WSI_TOKEN_HTTP_EXPECT) > 0 &&
         lws_hdr_copy(wsi, b, sizeof(b), WSI_TOKEN_HTTP_EXPECT) > 0 &&
         strcasecmp(b, "100-continue") == 0;
}

/* 1 when bytes of a request body may be left unread after the answer, so that the connection
 * must close: a Content-Length over BODY_MAX or not a number, or a POST, PUT or PATCH without
 * one (lws then expects a body of unknown length; a chunked body is not decoded), or a body
 * the client holds back for a "100 Continue" (the answer tells it not to send it). */
static int body_unread(struct lws *wsi, const char *method) {
  long long cl = content_length(wsi);
  if (expects_continue(wsi))
    return 1;
  if (cl == -1)
    return strcmp(method, "POST") == 0 || strcmp(method, "PUT") == 0 ||
           strcmp(method, "PATCH") == 0;
  return cl == -2 || cl > BODY_MAX;
}

static int sec(struct lws *wsi, unsigned char **hp, unsigned char *end) {
  for (size_t i = 0; i < sizeof(sec_headers) / sizeof(sec_headers[0]); i++)
    if (lws_add_http_header_by_name(wsi, (const unsigned char *)sec_headers[i].name,
                                    (const unsigned char *)sec_headers[i].value,
                                    (int)strlen(sec_headers[i].value), hp, end))
      return 1;
  return 0;
}

/* The token rule for a request (path as lws gives it): the page's files need none, everything
 * else does (tlc__http_public: the path the router reads). Returns 1 when the request may be
 * answered, else 0 with *delay_ms the time to wait before the 401. */
static int token_ok(struct lws *wsi, tlc_http_t *h, const char *path, uint64_t *delay_ms) {
  char hdr[TLC_AUTH_MAX_TOKEN + 32], ip[64];
  int n;
  const char *tok = "";
  size_t tl = 0;
  *delay_ms = 0;
  if (h->o.auth == NULL || tlc__http_public(path))
    return 1; /* the page's own files: the same path the router answers from */
  n = lws_hdr_total_length(wsi, WSI_TOKEN_HTTP_AUTHORIZATION) > 0
          ? lws_hdr_copy(wsi, hdr, sizeof(hdr), WSI_TOKEN_HTTP_AUTHORIZATION)
          : -1;
  if (n > 7 && strncasecmp(hdr, "Bearer ", 7) == 0) {
    tok = hdr + 7;
    tl = (size_t)n - 7;
  }
  if (tlc_auth_check(h->o.auth, lws_get_peer_simple(wsi, ip, sizeof(ip)), tok, tl, uv_now(h->loop),
                     delay_ms))
    return 1;
  h->st.auth_failed++;
  return 0;
}

/* Header `tok` of the request into buf (NUL-terminated); NULL when absent, or too long (then
 * buf is "" : a value that matches nothing). */
static const char *header(struct lws *wsi, enum lws_token_indexes tok, char *buf, size_t len) {
  if (lws_hdr_total_length(wsi, tok) <= 0)
    return NULL;
  if (lws_hdr_copy(wsi, buf, (int)len, tok) < 0)
    buf[0] = '\0';
  return buf;
}

/* DNS rebinding: 1 when the request's Host names this daemon (tlc__http_host_ok). */
static int host_ok(struct lws *wsi, tlc_http_t *h) {
  char host[300], local[INET6_ADDRSTRLEN + 1] = "";
  struct sockaddr_storage ss;
  socklen_t sl = sizeof(ss);
  const char *v = header(wsi, WSI_TOKEN_HOST, host, sizeof(host));
  lws_sockfd_type fd = lws_get_socket_fd(wsi);
  if (v == NULL)
    return 1;
  if (fd >= 0 && getsockname(fd, (struct sockaddr *)&ss, &sl) == 0)
    (void)tlc_peers_name((struct sockaddr *)&ss, sl, local, sizeof(local));
  if (tlc__http_host_ok(v, h->host, local[0] != '?' ? local : NULL, h->hosts))
    return 1;
  h->st.misdirected++;
  return 0;
}

/* A live WebSocket's handshake: its Host names this daemon and its Origin, when a browser sent
 * one, is the daemon's own or a configured one (tlc__http_origin_ok). */
static int ws_origin_ok(struct lws *wsi, tlc_http_t *h) {
  char host[300], origin[300];
  const char *hv, *ov;
  if (!host_ok(wsi, h))
    return 0;
  hv = header(wsi, WSI_TOKEN_HOST, host, sizeof(host));
  ov = header(wsi, WSI_TOKEN_ORIGIN, origin, sizeof(origin));
  if (tlc__http_origin_ok(ov, h->tls_on, hv, h->origins))
    return 1;
  h->st.misdirected++;
  return 0;
}

static void pending_wake(void *ud) {
  lws_callback_on_writable((struct lws *)ud);
}

/* Sends the headers and arranges the body. Returns 0, or -1 to close. */
static int respond(struct lws *wsi, pss_t *p, const char *path) {
  tlc_http_t *h = p->h;
  tlc__http_req_t rq;
  tlc__http_resp_t rs;
  char query[1024] = "", accept[512] = "";
  unsigned char hdr[LWS_PRE + 2048], *start = hdr + LWS_PRE, *hp = start,
                                     *end = hdr + sizeof(hdr) - 1;
  int head;
  size_t len;
  tlc__http_scrape_t *made = p->scrape_made ? p->scrape : NULL; /* a scrape made: answered now */
  if (made != NULL)
    p->scrape = NULL;
  body_free(p);
  rq.method = method_of(wsi);
  head = strcmp(rq.method, "HEAD") == 0;
  rq.path = path;
  /* lws gives the query in '&'-separated fragments; over 1 KiB it is refused as a whole */
  if (lws_hdr_total_length(wsi, WSI_TOKEN_HTTP_URI_ARGS) > 0 &&
      lws_hdr_copy(wsi, query, sizeof(query), WSI_TOKEN_HTTP_URI_ARGS) < 0)
    snprintf(query, sizeof(query), "(too long)");
  if (lws_hdr_total_length(wsi, WSI_TOKEN_HTTP_ACCEPT) > 0 &&
      lws_hdr_copy(wsi, accept, sizeof(accept), WSI_TOKEN_HTTP_ACCEPT) < 0)
    accept[0] = '\0';
  rq.query = query;
  rq.accept = accept;
  /* what this response may hold: the per-response cap, within what is left of the budget */
  h->view.max_response = h->o.max_response;
  if (h->o.max_inflight - h->st.inflight_bytes < h->view.max_response)
    h->view.max_response = h->o.max_inflight - h->st.inflight_bytes;
  tlc__http_resp_init(&rs, h->view.max_response > 0 ? h->view.max_response : 1);
  {
    uint64_t delay = 0;
    if (!p->deny && p->pending == NULL && !host_ok(wsi, h)) {
      /* DNS rebinding: a name that is not this daemon's gets nothing but the error */
      tlc__http_error(&rs, 421,
                      "misdirected request: the Host is not this daemon's (a loopback "
                      "address, the address the port is bound to, or http_hosts)");
    } else if (!token_ok(wsi, h, path, &delay)) {
      /* SPEC 8: an error and nothing else (no target names, no counters) */
      tlc__http_error(&rs, 401, "a token is needed: Authorization: Bearer TOKEN");
      tlc__http_scrape_free(made);
      made = NULL;
      if (delay > 0 && !p->deny) {
        /* the token module's delay for a peer that keeps failing: answered later */
        tlc__http_resp_fini(&rs);
        p->deny = 1;
        lws_set_timer_usecs(wsi, (lws_usec_t)delay * 1000);
        return 0;
      }
    } else if (made != NULL) {
      tlc__http_scrape_answer(made, &rs);
      made = NULL;
    } else if (p->pending != NULL) { /* range statistics computed: answered now */
      tlc__http_pending_answer(&h->view, p->pending, &rs);
      tlc__http_pending_free(p->pending);
      p->pending = NULL;
    } else {
      tlc__http_route(&h->view, &rq, &rs);
      if (rs.pending != NULL) { /* computed off the loop: answered when done (pending_wake) */
        p->pending = rs.pending;
        tlc__http_resp_fini(&rs);
        lws_set_timeout(wsi, NO_PENDING_TIMEOUT, 0);
        tlc__http_pending_wait(p->pending, pending_wake, wsi);
        return 0;
      }
      if (rs.scrape != NULL) { /* /metrics: made a slice per loop turn, answered once made */
        p->scrape = rs.scrape;
        rs.scrape = NULL;
        tlc__http_resp_fini(&rs);
        p->slices = p->writes = 0;
        p->slice_max_ns = p->write_max_ns = p->slice_max_cpu = p->write_max_cpu = 0;
        p->scrape_t0 = uv_hrtime();
        lws_set_timeout(wsi, NO_PENDING_TIMEOUT, 0);
        lws_callback_on_writable(wsi);
        return 0;
      }
    }
  }
  p->deny = 0;
  if (rs.status == 503)
    h->st.busy++;
  h->st.requests++;
  if (rs.status >= 400)
    h->st.errors++;
  if (rs.static_body != NULL) {
    p->sbody = rs.static_body;
    len = rs.static_len;
  } else {
    p->body = tlc_out_take(&rs.body, &len);
    if (p->body == NULL) /* nothing written (a scrape's answer is all in the scrape) */
      len = 0;
    if (rs.scrape != NULL) { /* /metrics: its bytes read out of it as they are sent */
      p->scrape = rs.scrape;
      p->scrape_made = 1;
      rs.scrape = NULL;
    }
  }
  tlc__http_resp_fini(&rs);
  p->blen = len;
  if (p->scrape != NULL)
    len += tlc__http_scrape_len(p->scrape);
  p->len = len;
  p->inflight = p->body != NULL || p->scrape != NULL ? len : 0;
  h->st.inflight_bytes += p->inflight;
  /* A body over BODY_MAX or of unknown length is not read: the connection closes after the
   * answer (the close can then be a reset; a body read and dropped leaves nothing behind). */
  p->close_after = body_unread(wsi, rq.method);
  if (lws_add_http_common_headers(wsi, (unsigned)rs.status, rs.ctype, (lws_filepos_t)len, &hp,
                                  end) ||
      (rs.status == 401 && lws_add_http_header_by_name(
                               wsi, (const unsigned char *)"www-authenticate:",
                               (const unsigned char *)"Bearer realm=\"tlcapd\"", 21, &hp, end)) ||
      (rs.allow != NULL && lws_add_http_header_by_name(wsi, (const unsigned char *)"allow:",
                                                       (const unsigned char *)rs.allow,
                                                       (int)strlen(rs.allow), &hp, end)) ||
      lws_add_http_header_by_name(wsi, (const unsigned char *)"cache-control:",
                                  (const unsigned char *)(rs.cache ? "max-age=300" : "no-store"),
                                  rs.cache ? 11 : 8, &hp, end) ||
      sec(wsi, &hp, end) || lws_finalize_write_http_header(wsi, start, &hp, end))
    return -1;
  if (head || len == 0) {
    body_free(p);
    if (p->close_after)
      return -1;
    return lws_http_transaction_completed(wsi) ? -1 : 0;
  }
  lws_callback_on_writable(wsi);
  return 0;
}

/* CPU time of the calling thread (the loop's): what the live messages and scrapes cost it. */
static uint64_t thread_cpu_ns(void) {
  struct timespec ts;
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0)
    return 0;
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The log line of a scrape sent: what it cost the loop. */
static void scrape_done(pss_t *p) {
  size_t nt, nr, rb;
  tlc__http_scrape_figures(p->scrape, &nt, &nr, &rb);
  say(p->h, 7,
      "http: /metrics: %zu bytes in %.1f ms, %zu targets (%zu rendered, %zu bytes); %u "
      "slices, longest %.3f ms (CPU %.3f ms); %u writes, longest %.3f ms (CPU %.3f ms)",
      p->len, (double)(uv_hrtime() - p->scrape_t0) / 1e6, nt, nr, rb, p->slices,
      (double)p->slice_max_ns / 1e6, (double)p->slice_max_cpu / 1e6, p->writes,
      (double)p->write_max_ns / 1e6, (double)p->write_max_cpu / 1e6);
}

static int send_chunk(struct lws *wsi, pss_t *p) {
  unsigned char *buf = chunk_buf, save[LWS_PRE];
  const unsigned char *src = p->sbody != NULL ? p->sbody : (const unsigned char *)p->body;
  size_t n;
  int last, w;
  uint64_t t0 = uv_hrtime(), c0 = p->scrape != NULL ? thread_cpu_ns() : 0;
  if (p->len == 0)
    return lws_http_transaction_completed(wsi) ? -1 : 0;
  if (p->off >= p->blen) {
    /* the scrape's bytes, read out of it into the chunk buffer (its pieces are shared), at
     * most COPY_CHUNK a turn: a write of 1 MiB could hold the loop for over 2 ms */
    n = tlc__http_scrape_read(p->scrape, chunk_buf + LWS_PRE, COPY_CHUNK);
  } else if (p->body != NULL && p->off >= LWS_PRE) {
    /* in place: lws may write its framing into the LWS_PRE bytes before (sent already) */
    n = p->blen - p->off < CHUNK ? p->blen - p->off : CHUNK;
    buf = (unsigned char *)p->body + p->off - LWS_PRE;
    memcpy(save, buf, LWS_PRE);
  } else {
    n = p->blen - p->off < COPY_CHUNK ? p->blen - p->off : COPY_CHUNK;
    memcpy(buf + LWS_PRE, src + p->off, n);
  }
  last = p->off + n >= p->len;
  if (n == 0)
    return -1; /* cannot happen: a scrape as long as it said */
  w = lws_write(wsi, buf + LWS_PRE, n, last ? LWS_WRITE_HTTP_FINAL : LWS_WRITE_HTTP);
  if (buf != chunk_buf)
    memcpy(buf, save, LWS_PRE);
  if (w != (int)n)
    return -1;
  p->off += n;
  if (p->scrape != NULL) {
    uint64_t d = uv_hrtime() - t0, c = thread_cpu_ns() - c0;
    p->writes++;
    if (d > p->write_max_ns)
      p->write_max_ns = d;
    if (c > p->write_max_cpu)
      p->write_max_cpu = c;
  }
  if (!last) {
    lws_callback_on_writable(wsi);
    return 0;
  }
  if (p->scrape != NULL)
    scrape_done(p);
  body_free(p);
  if (p->close_after)
    return -1;
  return lws_http_transaction_completed(wsi) ? -1 : 0;
}

/* One slice of the scrape being made; once made, its answer. 0, or -1 to close. */
static int scrape_slice(struct lws *wsi, pss_t *p) {
  uint64_t t0 = uv_hrtime(), c0 = thread_cpu_ns(), d, c;
  int made = tlc__http_scrape_step(&p->h->view, p->scrape, SLICE_NS, SLICE_BYTES);
  const char *uri;
  d = uv_hrtime() - t0;
  c = thread_cpu_ns() - c0;
  p->slices++;
  if (d > p->slice_max_ns)
    p->slice_max_ns = d;
  if (c > p->slice_max_cpu)
    p->slice_max_cpu = c;
  if (!made) {
    lws_callback_on_writable(wsi);
    return 0;
  }
  p->scrape_made = 1;
  uri = uri_of(wsi, uri_buf, sizeof(uri_buf));
  return respond(wsi, p, uri != NULL ? uri : "/metrics");
}

/* ---- live WebSocket ---- */

static void ws_unlink(pss_t *p) {
  tlc_http_t *h = p->h;
  if (!p->is_ws)
    return;
  if (p->prev != NULL)
    p->prev->next = p->next;
  else if (h->ws == p)
    h->ws = p->next;
  if (p->next != NULL)
    p->next->prev = p->prev;
  p->prev = p->next = NULL;
  p->is_ws = 0;
  h->st.websockets--;
  h->view.websockets = h->st.websockets;
}

static int ws_send(struct lws *wsi, pss_t *p) {
  tlc_http_t *h = p->h;
  uint64_t cpu0;
  char *buf;
  size_t len;
  int n;
  if (!p->due || p->deny)
    return 0;
  p->due = 0;
  if (!p->authed) {
    /* a token is needed: say so, once; nothing else until it comes */
    static const char need[] = "{\"type\": \"auth\", \"message\": \"send: token TOKEN\"}";
    unsigned char m[LWS_PRE + sizeof(need)];
    memcpy(m + LWS_PRE, need, sizeof(need) - 1);
    return lws_write(wsi, m + LWS_PRE, sizeof(need) - 1, LWS_WRITE_TEXT) < 0 ? -1 : 0;
  }
  cpu0 = thread_cpu_ns();
  if (h->live.tick == 0)
    tlc__http_live_cache_tick(&h->live, now_unix_ms());
  if (tlc__http_live_shared(&h->view, &h->live, &p->live, h->o.max_ws_message, &buf, &len) != 0) {
    say(h, 4, "http: live message not built (over %zu bytes or out of memory)",
        h->o.max_ws_message + (1u << 20));
    h->st.ws_cpu_ns += thread_cpu_ns() - cpu0;
    return 0; /* the next tick tries again */
  }
  /* the same bytes for every socket of this tick; lws writes the frame header into the
   * LWS_PRE bytes before them and keeps what the kernel does not take (a copy) */
  n = lws_write(wsi, (unsigned char *)buf + LWS_PRE, len, LWS_WRITE_TEXT);
  h->st.ws_cpu_ns += thread_cpu_ns() - cpu0;
  if (n < 0)
    return -1;
  h->st.ws_messages++;
  return 0;
}

static int ws_receive(struct lws *wsi, pss_t *p, const void *in, size_t len) {
  tlc_http_t *h = p->h;
  tlc__http_live_t *l = &p->live;
  if (lws_frame_is_binary(wsi)) {
    h->st.ws_bad++;
    lws_close_reason(wsi, LWS_CLOSE_STATUS_UNACCEPTABLE_OPCODE, (unsigned char *)"text only", 9);
    return -1;
  }
  /* what is announced counts: a frame of 2^63 bytes is refused at its first bytes */
  if (len > sizeof(l->rx) - l->rxlen ||
      lws_remaining_packet_payload(wsi) > sizeof(l->rx) - l->rxlen - len) {
    h->st.ws_bad++;
    lws_close_reason(wsi, LWS_CLOSE_STATUS_MESSAGE_TOO_LARGE, (unsigned char *)"too large", 9);
    return -1;
  }
  memcpy(l->rx + l->rxlen, in, len);
  l->rxlen += len;
  if (!lws_is_final_fragment(wsi) || lws_remaining_packet_payload(wsi) > 0)
    return 0;
  if (!p->authed && !(l->rxlen > 6 && memcmp(l->rx, "token ", 6) == 0)) {
    l->rxlen = 0; /* before its token a socket is sent nothing, and its commands are dropped */
    return 0;
  }
  if (!p->authed) {
    /* SPEC 8: a live socket's "token TOKEN"; nothing was sent to it before but the request */
    char ip[64];
    uint64_t delay = 0;
    int ok = tlc_auth_check(h->o.auth, lws_get_peer_simple(wsi, ip, sizeof(ip)), l->rx + 6,
                            l->rxlen - 6, uv_now(h->loop), &delay);
    l->rxlen = 0;
    if (!ok) {
      h->st.auth_failed++;
      lws_close_reason(wsi, LWS_CLOSE_STATUS_POLICY_VIOLATION, (unsigned char *)"bad token", 9);
      if (delay > 0) {
        p->deny = 1;
        lws_set_timer_usecs(wsi, (lws_usec_t)delay * 1000);
        lws_rx_flow_control(wsi, 0); /* nothing more from it meanwhile */
        return 0;
      }
      return -1;
    }
    p->authed = 1;
    p->due = 1;
    lws_callback_on_writable(wsi);
    return 0;
  }
  if (tlc__http_live_command(l, l->rx, l->rxlen) != 0) {
    h->st.ws_bad++;
    lws_close_reason(wsi, LWS_CLOSE_STATUS_POLICY_VIOLATION,
                     (unsigned char *)"expected \"overview\" or \"target NAME\"", 36);
    return -1;
  }
  l->rxlen = 0;
  p->due = 1;
  lws_callback_on_writable(wsi);
  return 0;
}

static void tick_cb(uv_timer_t *t) {
  tlc_http_t *h = t->data;
  if (h->ws != NULL)
    tlc__http_live_cache_tick(&h->live, now_unix_ms());
  for (pss_t *p = h->ws; p != NULL; p = p->next) {
    if (!p->authed)
      continue;
    if (p->due)
      h->st.ws_coalesced++; /* the previous update is still waiting for the socket */
    p->due = 1;
    lws_callback_on_writable(p->wsi);
  }
}

/* ---- TLS certificate reload ----
 *
 * lws loads the certificate into its vhost's SSL_CTX once, at start. A reload does not change
 * that SSL_CTX (an OpenSSL context keeps a certificate per key type: loading an EC certificate
 * over an RSA one would leave the RSA one served to some clients); instead OpenSSL's
 * certificate callback, set on lws's SSL_CTX when lws creates it
 * (LWS_CALLBACK_OPENSSL_LOAD_EXTRA_SERVER_VERIFY_CERTS), runs before every new handshake picks
 * its certificate, clears what the session copied from lws's context and gives it the current
 * chain and key (tls_cur, a context the caller loaded and checked: tlc_tls_reload). A session
 * keeps its certificate once made; connections already open are not touched. */

static int cert_cb(SSL *ssl, void *arg) {
  tlc_http_t *h = arg;
  SSL_CTX *c = h->tls_cur;
  STACK_OF(X509) *chain = NULL;
  if (c == NULL)
    return 1; /* no reload yet: lws's own */
  if (SSL_CTX_get0_chain_certs(c, &chain) != 1)
    chain = NULL;
  SSL_certs_clear(ssl);
  if (SSL_use_cert_and_key(ssl, SSL_CTX_get0_certificate(c), SSL_CTX_get0_privatekey(c), chain,
                           1) != 1) {
    ERR_clear_error();
    return 0; /* this handshake fails (cannot happen: the pair was checked at load) */
  }
  return 1;
}

int tlc_http_reload_tls(tlc_http_t *h, tlc_tls_t *tls, char *err, size_t errlen) {
  SSL_CTX *n;
  if (!h->tls_on) {
    snprintf(err, errlen, "the HTTP port does not speak TLS");
    return TLC_EINVAL;
  }
  if (!h->tls_hooked) {
    snprintf(err, errlen,
             "libwebsockets gave no TLS context to hook: restart for the new "
             "certificate");
    return TLC_EINVAL;
  }
  n = tlc_tls_ctx(tls);
  if (n == NULL || SSL_CTX_get0_certificate(n) == NULL || SSL_CTX_get0_privatekey(n) == NULL) {
    SSL_CTX_free(n);
    snprintf(err, errlen, "no certificate and key loaded");
    return TLC_EINVAL;
  }
  SSL_CTX_free(h->tls_cur);
  h->tls_cur = n;
  return 0;
}

/* ---- the protocol callback ---- */

static int callback(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in,
                    size_t len) {
  struct lws_context *cx = lws_get_context(wsi);
  tlc_http_t *h = cx != NULL ? lws_context_user(cx) : NULL;
  pss_t *p = user;
  if (h == NULL)
    return lws_callback_http_dummy(wsi, reason, user, in, len);
  switch (reason) {
  case LWS_CALLBACK_WSI_CREATE: /* every connection from its accept, headers or not */
    if (h->accepted_slot != TLC_PEERS_NONE) {
      /* the connection FILTER_NETWORK_CONNECTION just let in (lws creates its wsi at once):
       * its peer address's slot, given back at WSI_DESTROY */
      if (h->ncslots == h->capcslots) {
        size_t nc = h->capcslots ? h->capcslots * 2 : 64;
        struct conn_slot *n = tlc_realloc(h->cslots, nc * sizeof(*n));
        if (n != NULL) {
          h->cslots = n;
          h->capcslots = nc;
        }
      }
      if (h->ncslots < h->capcslots) {
        h->cslots[h->ncslots].wsi = wsi;
        h->cslots[h->ncslots++].slot = h->accepted_slot;
      } else { /* out of memory: the connection goes on, not counted for its address */
        tlc_peers_release(&h->peers, h->accepted_slot);
      }
      h->accepted_slot = TLC_PEERS_NONE;
    }
    h->nwsi++;
    h->st.connections = h->nwsi > h->nwsi_base ? (size_t)(h->nwsi - h->nwsi_base) : 0;
    h->view.connections = h->st.connections;
    return 0;
  case LWS_CALLBACK_WSI_DESTROY:
    for (size_t i = h->ncslots; i-- > 0;)
      if (h->cslots[i].wsi == wsi) {
        tlc_peers_release(&h->peers, h->cslots[i].slot);
        h->cslots[i] = h->cslots[--h->ncslots];
        break;
      }
    h->nwsi--;
    h->st.connections = h->nwsi > h->nwsi_base ? (size_t)(h->nwsi - h->nwsi_base) : 0;
    h->view.connections = h->st.connections;
    return 0;
  case LWS_CALLBACK_OPENSSL_LOAD_EXTRA_SERVER_VERIFY_CERTS:
    /* lws's vhost SSL_CTX, just made: our certificate callback (TLS reload, above) */
    if (user != NULL) {
      SSL_CTX_set_cert_cb((SSL_CTX *)user, cert_cb, h);
      h->tls_hooked = 1;
    }
    return 0;
  case LWS_CALLBACK_FILTER_NETWORK_CONNECTION: {
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    size_t slot = TLC_PEERS_NONE;
    int r = 0;
    if (h->accepted_slot != TLC_PEERS_NONE) { /* a connection lws did not go on with */
      tlc_peers_release(&h->peers, h->accepted_slot);
      h->accepted_slot = TLC_PEERS_NONE;
    }
    if (h->closing || h->st.connections >= h->o.max_connections) {
      h->st.refused++;
      return 1; /* lws closes the socket */
    }
    /* under the global cap, one peer address holds at most max_per_address */
    if (getpeername((int)(intptr_t)in, (struct sockaddr *)&ss, &sl) == 0)
      r = tlc_peers_take(&h->peers, (struct sockaddr *)&ss, sl, &slot);
    if (r != 0) {
      h->st.refused++;
      if (r == TLC_ELIMIT)
        h->st.refused_address++;
      return 1;
    }
    h->accepted_slot = slot;
    return 0;
  }
  case LWS_CALLBACK_HTTP_BIND_PROTOCOL:
    if (p != NULL && !p->bound) {
      memset(p, 0, sizeof(*p));
      p->h = h;
      p->bound = 1;
    }
    return 0;
  case LWS_CALLBACK_HTTP_DROP_PROTOCOL:
  case LWS_CALLBACK_CLOSED_HTTP:
    if (p != NULL && p->pending != NULL) { /* the peer left: its range query is cancelled */
      tlc__http_pending_free(p->pending);
      p->pending = NULL;
    }
    if (p != NULL && p->bound) {
      body_free(p);
      ws_unlink(p);
      p->bound = 0;
    }
    return 0;
  case LWS_CALLBACK_HTTP:
    if (p == NULL)
      return -1;
    if (!p->bound) { /* bind is always first; be safe if a version differs */
      memset(p, 0, sizeof(*p));
      p->h = h;
    }
    {
      long long cl = content_length(wsi);
      if (cl > 0 && cl <= BODY_MAX && !expects_continue(wsi)) {
        /* answered once the body is in (HTTP_BODY_COMPLETION), within lws's round-trip time */
        p->await_body = 1;
        lws_set_timeout(wsi, PENDING_TIMEOUT_HTTP_CONTENT, ROUND_TRIP_S);
        return 0;
      }
    }
    return respond(wsi, p, in != NULL ? (const char *)in : "/");
  case LWS_CALLBACK_HTTP_BODY: /* no path takes a body: dropped */
    return 0;
  case LWS_CALLBACK_HTTP_BODY_COMPLETION: {
    const char *uri;
    if (p == NULL || !p->await_body)
      return 0; /* answered already (a POST with Content-Length: 0) */
    p->await_body = 0;
    uri = uri_of(wsi, uri_buf, sizeof(uri_buf));
    return respond(wsi, p, uri != NULL ? uri : "/");
  }
  case LWS_CALLBACK_HTTP_WRITEABLE:
    if (p == NULL || p->h == NULL)
      return -1;
    if (p->pending != NULL) { /* range statistics: answered once computed */
      const char *uri;
      if (!tlc__http_pending_ready(p->pending))
        return 0;
      uri = uri_of(wsi, uri_buf, sizeof(uri_buf));
      return respond(wsi, p, uri != NULL ? uri : "/api/");
    }
    if (p->scrape != NULL && !p->scrape_made) /* /metrics: the next slice */
      return scrape_slice(wsi, p);
    if (p->deny) { /* the delayed 401 (respond sees deny set and answers at once) */
      const char *uri = uri_of(wsi, uri_buf, sizeof(uri_buf));
      return respond(wsi, p, uri != NULL ? uri : "/api/");
    }
    return send_chunk(wsi, p);
  case LWS_CALLBACK_TIMER:
    if (p != NULL && p->deny) {
      if (p->is_ws)
        return -1; /* a live socket with a wrong token: closed after the delay */
      lws_callback_on_writable(wsi);
    }
    return 0;
  case LWS_CALLBACK_HTTP_CONFIRM_UPGRADE: {
    char uri[TLC_HTTP_PATH_MAX + 1], path[TLC_HTTP_PATH_MAX + 1];
    if (in == NULL || strcmp((const char *)in, "websocket") != 0)
      return 1;
    if (lws_hdr_copy(wsi, uri, sizeof(uri), WSI_TOKEN_GET_URI) < 0 ||
        tlc__http_path(uri, path, sizeof(path)) < 0 || strcmp(path, "/api/v1/live") != 0) {
      h->st.ws_bad++;
      return 1; /* only /api/v1/live is a WebSocket */
    }
    if (!ws_origin_ok(wsi, h))
      return 1; /* another origin's page, or another name (DNS rebinding): refused */
    return 0;
  }
  case LWS_CALLBACK_ESTABLISHED:
    if (p == NULL)
      return -1;
    if (!p->bound) {
      memset(p, 0, sizeof(*p));
      p->h = h;
    }
    if (!p->is_ws) {
      p->is_ws = 1;
      p->wsi = wsi;
      p->next = h->ws;
      if (h->ws != NULL)
        h->ws->prev = p;
      h->ws = p;
      h->st.websockets++;
      h->view.websockets = h->st.websockets;
    }
    p->authed = h->o.auth == NULL;
    p->due = 1; /* the first message at once (or "a token is needed") */
    lws_callback_on_writable(wsi);
    return 0;
  case LWS_CALLBACK_RECEIVE:
    if (p == NULL || !p->is_ws)
      return -1;
    return ws_receive(wsi, p, in, len);
  case LWS_CALLBACK_SERVER_WRITEABLE:
    if (p == NULL || !p->is_ws)
      return 0;
    return ws_send(wsi, p);
  case LWS_CALLBACK_CLOSED:
    if (p != NULL && p->h != NULL)
      ws_unlink(p);
    return 0;
  default:
    return lws_callback_http_dummy(wsi, reason, user, in, len);
  }
}

/* rx: a page's command at most (larger messages arrive in fragments, refused past the cap);
 * tx: lws cuts every send to tx_packet_size (0 would mean rx_buffer_size: 1 KiB sends, 7,000
 * system calls for a 7 MB scrape) */
static const struct lws_protocols protocols[] = {
  { "tlcap-live", callback, sizeof(pss_t), TLC_HTTP_LIVE_MSG_MAX, 0, NULL, CHUNK },
  { NULL, NULL, 0, 0, 0, NULL, 0 },
};

/* ---- life cycle ---- */

/* Binds a socket of our own to host:port and closes it: 0, or the bind's error as UV_E*. */
static int probe_bind(const char *host, uint16_t port) {
  struct sockaddr_storage ss;
  int fd, one = 1, r = 0;
  socklen_t sl;
  memset(&ss, 0, sizeof(ss));
  if (port == 0)
    return 0; /* any free port: nothing to collide with */
  if (inet_pton(AF_INET, host, &((struct sockaddr_in *)&ss)->sin_addr) == 1) {
    ((struct sockaddr_in *)&ss)->sin_family = AF_INET;
    ((struct sockaddr_in *)&ss)->sin_port = htons(port);
    sl = sizeof(struct sockaddr_in);
  } else if (inet_pton(AF_INET6, host, &((struct sockaddr_in6 *)&ss)->sin6_addr) == 1) {
    ((struct sockaddr_in6 *)&ss)->sin6_family = AF_INET6;
    ((struct sockaddr_in6 *)&ss)->sin6_port = htons(port);
    sl = sizeof(struct sockaddr_in6);
  } else {
    return UV_EINVAL; /* a numeric address is needed (or localhost) */
  }
  fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return -errno;
  (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(fd, (struct sockaddr *)&ss, sl) != 0)
    r = -errno;
  close(fd);
  return r;
}

/* Servers whose teardown has begun and not ended (tlc_http_closing). Loop thread only. */
static int closing_servers;

static void free_http(tlc_http_t *h) {
  void (*cb)(void *) = h->close_cb;
  void *ud = h->close_ud;
  if (h->closing)
    closing_servers--;
  if (log_owner == h) {
    lws_set_log_level(0, NULL);
    log_owner = NULL;
  }
  tlc__http_live_cache_fini(&h->live);
  tlc__http_metrics_cache_free(&h->view);
  tlc_peers_fini(&h->peers);
  tlc_free(h->cslots);
  SSL_CTX_free(h->tls_cur);
  tlc_free(h);
  if (cb != NULL)
    cb(ud);
}

static void handle_closed(uv_handle_t *hd) {
  tlc_http_t *h = hd->data;
  if (hd == (uv_handle_t *)&h->tick)
    h->tick_init = 0;
  else
    h->wait_init = 0;
  if (!h->tick_init && !h->wait_init && h->ctx == NULL)
    free_http(h);
}

typedef struct ctx_find {
  const void *ctx;
  int found;
} ctx_find_t;

static void find_cb(uv_handle_t *hd, void *arg) {
  ctx_find_t *f = arg;
  if (hd->data == f->ctx)
    f->found = 1;
}

/* Runs each loop turn while lws destroys its context. With a foreign loop, lws 4.1 closes
 * every connection's handle, then its own static handles (a timer and an idle handle whose
 * data is the context), and stops there: the context itself is finished by a second
 * lws_context_destroy once those are closed, which then sets h->ctx (pcontext) to NULL. */
static void wait_cb(uv_idle_t *w) {
  tlc_http_t *h = w->data;
  if (h->ctx != NULL) {
    ctx_find_t f = { h->ctx, 0 };
    uv_walk(h->loop, find_cb, &f);
    if (f.found)
      return; /* lws's handles are still closing */
    lws_context_destroy(h->ctx);
    if (h->ctx != NULL)
      return;
  }
  uv_idle_stop(w);
  uv_close((uv_handle_t *)w, handle_closed);
}

/* Starts the asynchronous teardown; the struct is freed (and close_cb called) at its end.
 * `begun`: lws has already made the first lws_context_destroy call itself (see tlc_http_new). */
static void teardown(tlc_http_t *h, int begun) {
  h->closing = 1;
  closing_servers++;
  if (h->tick_init && !uv_is_closing((uv_handle_t *)&h->tick))
    uv_close((uv_handle_t *)&h->tick, handle_closed);
  if (h->ctx != NULL && !begun)
    lws_context_destroy(h->ctx);
  if (h->ctx == NULL && !h->tick_init && !h->wait_init) {
    free_http(h);
    return;
  }
  if (!h->wait_init) {
    uv_idle_init(h->loop, &h->wait);
    h->wait.data = h;
    h->wait_init = 1;
    uv_idle_start(&h->wait, wait_cb);
  }
}

int tlc_http_new(uv_loop_t *loop, const tlc_http_opts_t *o, const tlc_http_src_t *src,
                 tlc_http_t **out) {
  struct lws_context_creation_info info;
  void *foreign[1];
  tlc_http_t *h;
  int err;
  *out = NULL;
  if (o->host == NULL || src == NULL || src->pv == NULL || o->max_connections == 0 ||
      o->max_connections > 10000 || o->live_ms < 100 || o->live_ms > 10000 ||
      strlen(o->host) >= sizeof(h->host) || o->max_header < 512 || o->max_header > 65535 ||
      (o->hosts != NULL && strlen(o->hosts) >= sizeof(h->hosts)) ||
      (o->origins != NULL && strlen(o->origins) >= sizeof(h->origins)))
    return TLC_EINVAL;
  h = tlc_calloc(1, sizeof(*h));
  if (h == NULL)
    return TLC_ENOMEM;
  h->loop = loop;
  h->o = *o;
  snprintf(h->host, sizeof(h->host), "%s",
           strcmp(o->host, "localhost") == 0 ? "127.0.0.1" : o->host);
  h->o.host = h->host;
  snprintf(h->hosts, sizeof(h->hosts), "%s", o->hosts != NULL ? o->hosts : "");
  snprintf(h->origins, sizeof(h->origins), "%s", o->origins != NULL ? o->origins : "");
  h->o.hosts = h->hosts;
  h->o.origins = h->origins;
  tlc_peers_init(&h->peers, o->max_per_address);
  h->accepted_slot = TLC_PEERS_NONE;
  h->view.src = *src;
  h->view.metrics_areas = o->metrics_areas;
  h->view.start_unix_ms = o->start_unix_ms;
  h->view.version = o->version;
  h->view.max_response = o->max_response;
  h->view.max_document = o->max_response;
  h->view.st = &h->st;
  h->live.pre = LWS_PRE;      /* the live messages leave room for the frame header */
  h->view.metrics_stream = 1; /* /metrics made a slice per loop turn (scrape_slice) */
  if (log_owner == NULL) {
    log_owner = h;
    lws_set_log_level(LLL_ERR | LLL_WARN, lws_log_cb);
  }

  memset(&info, 0, sizeof(info));
  foreign[0] = loop;
  info.foreign_loops = foreign;
  info.pcontext = &h->ctx;
  /* (lws's HTTP_HEADERS_SECURITY_BEST_PRACTICES_ENFORCE is not used: its policy forbids the
   * inline styles dygraphs sets; respond() sends our own, SEC_HEADERS) */
  info.options = LWS_SERVER_OPTION_LIBUV | LWS_SERVER_OPTION_UV_NO_SIGSEGV_SIGFPE_SPIN;
  if (strchr(h->host, ':') == NULL)
    info.options |= LWS_SERVER_OPTION_DISABLE_IPV6;
  if (o->tls_cert != NULL && o->tls_cert[0] != '\0') {
    /* TLS through lws's OpenSSL, from the same PEM files as the subscriber port */
    info.options |= LWS_SERVER_OPTION_DO_SSL_GLOBAL_INIT;
    h->tls_on = 1;
    info.ssl_cert_filepath = o->tls_cert;
    info.ssl_private_key_filepath = o->tls_key;
  }
  info.iface = h->host;
  info.port = o->port;
  info.protocols = protocols;
  info.user = h;
  info.server_string = "tlcapd";
  info.max_http_header_data = (unsigned short)o->max_header;
  info.max_http_header_pool =
      (unsigned short)(o->max_connections < 65535 ? o->max_connections : 65535);
  /* room past max_connections, so that a flood is accepted and refused at once
   * (FILTER_NETWORK_CONNECTION) instead of waiting in the kernel's backlog */
  info.fd_limit_per_thread = (unsigned)o->max_connections + 40;
  info.timeout_secs = ROUND_TRIP_S; /* network round trips (lws default 5..20) */
  info.timeout_secs_ah_idle = 5;    /* a connection holding a header buffer without using it */
  info.keepalive_timeout = 5;
  info.count_threads = 1;

  /* The address is tried with a socket of ours first, so that a port in use or an address
   * not on this host is a clear error before libwebsockets starts. */
  if (!o->no_probe && (err = probe_bind(h->host, o->port)) != 0) {
    free_http(h);
    return err;
  }
  h->ctx = lws_create_context(&info);
  if (h->ctx == NULL) {
    /* lws logged why. It may still be destroying the half-made context on the loop and
     * writes h->ctx (pcontext) when done, so h is left allocated (a start-up failure: the
     * daemon exits). */
    return TLC_EINVAL;
  }
  h->nwsi_base = h->nwsi; /* lws's own: the listener, its event pipe */
  h->st.connections = 0;
  h->vh = lws_get_vhost_by_name(h->ctx, "default");
  h->port = h->vh != NULL ? lws_get_vhost_listen_port(h->vh) : -1;
  if (h->port <= 0) {
    /* No vhost: lws could not listen (the port was taken between probe_bind and its bind).
     * With a foreign loop, lws_create_context has then begun destroying the context itself
     * and returns it anyway. A second destroy now would finish it, and unload lws's libuv
     * event library, while its handles are still closing: their close callbacks would then
     * run in unmapped code. So only wait for them, as any teardown does. */
    teardown(h, h->vh == NULL);
    return UV_EADDRINUSE;
  }
  uv_timer_init(loop, &h->tick);
  h->tick.data = h;
  h->tick_init = 1;
  uv_timer_start(&h->tick, tick_cb, o->live_ms, o->live_ms);
  *out = h;
  return 0;
}

int tlc_http_closing(void) {
  return closing_servers;
}

void tlc_http_set_metrics_areas(tlc_http_t *h, uint32_t n) {
  h->o.metrics_areas = n;
  h->view.metrics_areas = n;
}

int tlc_http_port(const tlc_http_t *h) {
  return h->port;
}

void tlc_http_get_stats(const tlc_http_t *h, tlc_http_stats_t *out) {
  *out = h->st;
}

void tlc_http_close(tlc_http_t *h, void (*cb)(void *ud), void *ud) {
  if (h == NULL || h->closing)
    return;
  h->close_cb = cb;
  h->close_ud = ud;
  teardown(h, 0);
}
