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
 * through OpenSSL's certificate callback on lws's SSL_CTX (tlc_http_reload_tls, tlsreload.c).
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
 * running meanwhile; nothing of lws is left on it. lws 4.1 closes its event pipe twice on the
 * way (pipeguard.c keeps that number from other threads' files in between).
 */
#include "http/server-int.h"

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

char tlc__http_uri_buf[65536]; /* a request's path (loop thread only) */

/* lws logs are process-wide: one server's log hook at a time (the daemon has one). */
static tlc_http_t *log_owner;

static void lws_log_cb(int level, const char *line) {
  char buf[300];
  size_t n;
  if (log_owner == NULL)
    return;
  snprintf(buf, sizeof(buf), "libwebsockets: %s", line);
  n = strlen(buf);
  while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
    buf[--n] = '\0';
  tlc__http_say(log_owner, level == LLL_ERR ? 4 /* warning: a peer's doing, not ours */ : 6, "%s",
                buf);
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
      SSL_CTX_set_cert_cb((SSL_CTX *)user, tlc__http_tls_cert_cb, h);
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
      tlc__http_body_free(p);
      tlc__http_ws_unlink(p);
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
      long long cl = tlc__http_content_length(wsi);
      if (cl > 0 && cl <= BODY_MAX && !tlc__http_expects_continue(wsi)) {
        /* answered once the body is in (HTTP_BODY_COMPLETION), within lws's round-trip time */
        p->await_body = 1;
        lws_set_timeout(wsi, PENDING_TIMEOUT_HTTP_CONTENT, ROUND_TRIP_S);
        return 0;
      }
    }
    return tlc__http_respond(wsi, p, in != NULL ? (const char *)in : "/");
  case LWS_CALLBACK_HTTP_BODY: /* no path takes a body: dropped */
    return 0;
  case LWS_CALLBACK_HTTP_BODY_COMPLETION: {
    const char *uri;
    if (p == NULL || !p->await_body)
      return 0; /* answered already (a POST with Content-Length: 0) */
    p->await_body = 0;
    uri = tlc__http_uri_of(wsi, tlc__http_uri_buf, sizeof(tlc__http_uri_buf));
    return tlc__http_respond(wsi, p, uri != NULL ? uri : "/");
  }
  case LWS_CALLBACK_HTTP_WRITEABLE:
    if (p == NULL || p->h == NULL)
      return -1;
    if (p->pending != NULL) { /* range statistics: answered once computed */
      const char *uri;
      if (!tlc__http_pending_ready(p->pending))
        return 0;
      uri = tlc__http_uri_of(wsi, tlc__http_uri_buf, sizeof(tlc__http_uri_buf));
      return tlc__http_respond(wsi, p, uri != NULL ? uri : "/api/");
    }
    if (p->scrape != NULL && !p->scrape_made) /* /metrics: the next slice */
      return tlc__http_scrape_slice(wsi, p);
    if (p->deny) { /* the delayed 401 (respond sees deny set and answers at once) */
      const char *uri = tlc__http_uri_of(wsi, tlc__http_uri_buf, sizeof(tlc__http_uri_buf));
      return tlc__http_respond(wsi, p, uri != NULL ? uri : "/api/");
    }
    return tlc__http_send_chunk(wsi, p);
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
    if (!tlc__http_ws_origin_ok(wsi, h))
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
      LIST_INSERT_HEAD(&h->ws, p, link);
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
    return tlc__http_ws_receive(wsi, p, in, len);
  case LWS_CALLBACK_SERVER_WRITEABLE:
    if (p == NULL || !p->is_ws)
      return 0;
    return tlc__http_ws_send(wsi, p);
  case LWS_CALLBACK_CLOSED:
    if (p != NULL && p->h != NULL)
      tlc__http_ws_unlink(p);
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
  tlc__http_pipeguard_release(&h->pipe); /* its holes, when no teardown closed them */
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
  if (h->ctx != NULL && !begun) {
    tlc__http_pipeguard_release(&h->pipe);
    lws_context_destroy(h->ctx); /* closes lws's event pipe, and will once more (pipeguard.c) */
    if (tlc__http_pipeguard_retake(&h->pipe) < 0)
      tlc__http_say(h, 4,
                    "http: libwebsockets' event pipe's number was taken by another file "
                    "while lws closed it; lws closes it once more (pipeguard.c)");
  }
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

int tlc_http_new(uv_loop_t *loop, const tlc_http_opts_t *o, const tlc_view_t *view,
                 tlc_http_t **out) {
  struct lws_context_creation_info info;
  void *foreign[1];
  tlc_http_t *h;
  int err;
  *out = NULL;
  if (o->host == NULL || view == NULL || o->max_connections == 0 || o->max_connections > 10000 ||
      o->live_ms < 100 || o->live_ms > 10000 || strlen(o->host) >= sizeof(h->host) ||
      o->max_header < 512 || o->max_header > 65535 ||
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
  h->view.src = view;
  h->view.metrics_areas = o->metrics_areas;
  h->view.start_unix_ms = o->start_unix_ms;
  h->view.version = o->version;
  h->view.max_response = o->max_response;
  h->view.max_document = o->max_response;
  h->view.st = &h->st;
  h->live.pre = LWS_PRE;      /* the live messages leave room for the frame header */
  h->view.metrics_stream = 1; /* /metrics made a slice per loop turn (tlc__http_scrape_slice) */
  if (log_owner == NULL) {
    log_owner = h;
    lws_set_log_level(LLL_ERR | LLL_WARN, lws_log_cb);
  }

  memset(&info, 0, sizeof(info));
  foreign[0] = loop;
  info.foreign_loops = foreign;
  info.pcontext = &h->ctx;
  /* (lws's HTTP_HEADERS_SECURITY_BEST_PRACTICES_ENFORCE is not used: its policy forbids the
   * inline styles dygraphs sets; tlc__http_respond() sends our own, SEC_HEADERS) */
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
  tlc__http_pipeguard_arm(&h->pipe);
  h->ctx = lws_create_context(&info);
  if (h->ctx == NULL) {
    (void)tlc__http_pipeguard_found(&h->pipe, 0);
    /* lws logged why. It may still be destroying the half-made context on the loop and
     * writes h->ctx (pcontext) when done, so h is left allocated (a start-up failure: the
     * daemon exits). */
    return TLC_EINVAL;
  }
  h->nwsi_base = h->nwsi; /* lws's own: the listener, its event pipe */
  h->st.connections = 0;
  h->vh = lws_get_vhost_by_name(h->ctx, "default");
  h->port = h->vh != NULL ? lws_get_vhost_listen_port(h->vh) : -1;
  {
    const char *why = tlc__http_pipeguard_found(&h->pipe, h->port > 0);
    if (why != NULL && h->port > 0)
      tlc__http_say(h, 7, "http: libwebsockets' event pipe not guarded at shutdown: %s", why);
  }
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
  uv_timer_start(&h->tick, tlc__http_ws_tick_cb, o->live_ms, o->live_ms);
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
