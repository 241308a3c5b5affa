/* answer.c - an HTTP request read and answered (server-int.h): its method, path and body
 * (a body no path takes is read and dropped, up to BODY_MAX, so the connection goes on), the
 * access checks (Host and a live WebSocket's Origin must be this daemon's; the token, judged on
 * the path the router reads), and the response: route.c's answer with its headers, the
 * security headers, and its body handed to send.c. Loop thread only.
 */
#include "http/server-int.h"

#include "base/alloc.h"
#include "base/err.h"

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

/* ---- HTTP ---- */

void tlc__http_body_free(pss_t *p) {
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
const char *tlc__http_uri_of(struct lws *wsi, char *buf, size_t len) {
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
long long tlc__http_content_length(struct lws *wsi) {
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
int tlc__http_expects_continue(struct lws *wsi) {
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
  long long cl = tlc__http_content_length(wsi);
  if (tlc__http_expects_continue(wsi))
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
int tlc__http_ws_origin_ok(struct lws *wsi, tlc_http_t *h) {
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
int tlc__http_respond(struct lws *wsi, pss_t *p, const char *path) {
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
  tlc__http_body_free(p);
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
    tlc__http_body_free(p);
    if (p->close_after)
      return -1;
    return lws_http_transaction_completed(wsi) ? -1 : 0;
  }
  lws_callback_on_writable(wsi);
  return 0;
}
