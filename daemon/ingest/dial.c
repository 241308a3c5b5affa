/* dial.c - TCP dial sources: tlcapd connects out to a probe and keeps reconnecting.
 *
 * One dialer per [dial NAME]; its target (named NAME) is created when the dialer starts, so it
 * is listed (disconnected) before the probe is first reached, and it is the same target across
 * every reconnect: statistics carry on, each disconnect is an engine gap, and the target's
 * counters and gap log record disconnect and reconnect times.
 *
 * States: resolving (uv_getaddrinfo, threadpool) -> connecting (uv_tcp_connect, bounded by
 * CONNECT_TIMEOUT_MS) -> connected (a tlc_conn_t, tcp.c) -> closed -> waiting (backoff
 * timer) -> resolving ... Backoff doubles from backoff_min to backoff_max with +-25% jitter and
 * starts again from backoff_min once a connection has delivered data.
 *
 * Stopping (reload removed or changed it, or shutdown): the dialer is unlinked at once and freed
 * when its timer is closed, its resolver request has returned and its connection is closed.
 */
#include "ingest/sources.h"

#include "base/alloc.h"
#include "base/err.h"
#include "base/log.h"

#include <stdio.h>
#include <string.h>

#define CONNECT_TIMEOUT_MS 10000

typedef struct tlc_dialer {
  tlc_source_t s; /* first: d, cfg */
  tlc_target_t *target;
  uv_timer_t *timer;
  uv_getaddrinfo_t gai;
  int gai_pending;
  tlc_conn_t *conn; /* connecting or connected */
  int connecting;
  uint64_t backoff;
  uint64_t failures; /* consecutive */
  int stopping;
  int timer_closed;
} tlc_dialer_t;

static void attempt(tlc_dialer_t *dl);

static void maybe_free(tlc_dialer_t *dl) {
  if (dl->stopping && dl->timer_closed && !dl->gai_pending && dl->conn == NULL)
    tlc_free(dl);
}

static void timer_cb(uv_timer_t *t) {
  tlc_dialer_t *dl = t->data;
  if (dl->conn != NULL && dl->connecting) {
    /* Connect took too long: closing cancels it; the close path reschedules. */
    dl->failures++;
    dl->s.d->st.dial_failures++;
    tlc__conn_close(dl->conn, "connect timeout");
    return;
  }
  if (dl->conn == NULL && !dl->gai_pending)
    attempt(dl);
}

static void schedule(tlc_dialer_t *dl, const char *why) {
  uint64_t delay;
  if (dl->stopping || dl->s.d->stopping)
    return;
  delay = tlc__backoff_next(dl->s.d, &dl->backoff);
  /* The first failure in a row is worth a line; the rest only at debug (and rate-limited). */
  if (dl->failures <= 1)
    tlc_log(TLC_LOG_INFO, TLC_LOGC_DIAL, "dial %s (%s:%u): %s; retrying in %llu ms", dl->s.cfg.name,
            dl->s.cfg.host, dl->s.cfg.port, why, (unsigned long long)delay);
  else
    TLC_LOGD(TLC_LOGC_DIAL, "dial %s (%s:%u): %s; retrying in %llu ms", dl->s.cfg.name,
             dl->s.cfg.host, dl->s.cfg.port, why, (unsigned long long)delay);
  uv_timer_start(dl->timer, timer_cb, delay, 0);
}

static void conn_closed(void *owner, int had_data);

static void conn_cancelled_close_cb(uv_handle_t *h) {
  tlc_conn_t *c = h->data;
  tlc_dialer_t *dl = c->owner;
  tlc_free(c);
  if (dl != NULL)
    conn_closed(dl, 0);
}

static void connect_cb(uv_connect_t *req, int status) {
  tlc_conn_t *c = req->data;
  tlc_dialer_t *dl = c->owner;
  if (status == UV_ECANCELED || c->closing)
    return; /* closed while connecting: the close callback follows */
  if (dl != NULL)
    dl->connecting = 0;
  if (status < 0) {
    char why[96];
    c->d->st.dial_failures++;
    if (dl != NULL)
      dl->failures++;
    snprintf(why, sizeof(why), "connect: %s", uv_strerror(status));
    c->closing = 1;
    if (dl != NULL) {
      schedule(dl, why);
      dl->conn = NULL;
      c->owner = NULL;
      dl->gai_pending = 0;
    }
    uv_close((uv_handle_t *)&c->h, conn_cancelled_close_cb);
    return;
  }
  if (dl != NULL) {
    uv_timer_stop(dl->timer);
    dl->failures = 0;
  }
  tlc__conn_begin(c, dl != NULL ? dl->target : NULL);
}

static void gai_cb(uv_getaddrinfo_t *req, int status, struct addrinfo *res) {
  tlc_dialer_t *dl = req->data;
  tlc_ingest_t *d = dl->s.d;
  tlc_conn_t *c;
  int r;
  dl->gai_pending = 0;
  if (dl->stopping || d->stopping) {
    if (res != NULL)
      uv_freeaddrinfo(res);
    maybe_free(dl);
    return;
  }
  if (status < 0 || res == NULL) {
    char why[96];
    dl->failures++;
    d->st.dial_failures++;
    snprintf(why, sizeof(why), "resolve: %s", uv_strerror(status));
    schedule(dl, why);
    return;
  }
  c = tlc__conn_new(d, dl->s.cfg.name, dl->s.cfg.format);
  if (c == NULL) {
    uv_freeaddrinfo(res);
    dl->failures++;
    schedule(dl, "out of memory");
    return;
  }
  c->owner = dl;
  c->closed_cb = conn_closed;
  r = uv_tcp_connect(&c->creq, &c->h, res->ai_addr, connect_cb);
  uv_freeaddrinfo(res);
  dl->conn = c;
  if (r != 0) {
    char why[96];
    dl->failures++;
    d->st.dial_failures++;
    snprintf(why, sizeof(why), "connect: %s", uv_strerror(r));
    c->closing = 1;
    c->owner = NULL;
    dl->conn = NULL;
    uv_close((uv_handle_t *)&c->h, conn_cancelled_close_cb);
    schedule(dl, why);
    return;
  }
  dl->connecting = 1;
  uv_timer_start(dl->timer, timer_cb, CONNECT_TIMEOUT_MS, 0);
}

static void attempt(tlc_dialer_t *dl) {
  struct addrinfo hints;
  char port[8];
  int r;
  if (dl->stopping || dl->s.d->stopping)
    return;
  memset(&hints, 0, sizeof(hints));
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  snprintf(port, sizeof(port), "%u", dl->s.cfg.port);
  dl->s.d->st.dial_attempts++;
  dl->gai.data = dl;
  r = uv_getaddrinfo(dl->s.d->loop, &dl->gai, gai_cb, dl->s.cfg.host, port, &hints);
  if (r != 0) {
    char why[96];
    dl->failures++;
    snprintf(why, sizeof(why), "resolve: %s", uv_strerror(r));
    schedule(dl, why);
    return;
  }
  dl->gai_pending = 1;
}

/* The dialer's connection closed (its close callback, conn.c). */
static void conn_closed(void *owner, int had_data) {
  tlc_dialer_t *dl = owner;
  dl->conn = NULL;
  dl->connecting = 0;
  if (dl->stopping || dl->s.d->stopping) {
    maybe_free(dl);
    return;
  }
  if (had_data) {
    dl->backoff = 0;
    dl->failures = 0;
  }
  dl->failures++;
  schedule(dl, had_data ? "connection closed" : "connection closed before any data");
}

static void timer_close_cb(uv_handle_t *h) {
  tlc_dialer_t *dl = h->data;
  tlc_free(h);
  dl->timer_closed = 1;
  maybe_free(dl);
}

static void dialer_stop(tlc_dialer_t *dl) {
  dl->stopping = 1;
  uv_close((uv_handle_t *)dl->timer, timer_close_cb);
  if (dl->gai_pending)
    uv_cancel((uv_req_t *)&dl->gai); /* gai_cb runs either way and frees via maybe_free */
  if (dl->conn != NULL)
    tlc__conn_close(dl->conn, "dial source stopped");
}

static int dialer_start(tlc_ingest_t *d, const tlc_cfg_source_t *s, tlc_dialer_t **out) {
  tlc_dialer_t *dl;
  tlc_target_conf_t conf;
  int r;
  dl = tlc_calloc(1, sizeof(*dl));
  if (dl == NULL)
    return TLC_ENOMEM;
  dl->s.ops = &tlc_dial_source_ops;
  dl->s.d = d;
  dl->s.cfg = *s;
  tlc__target_conf(d, TLC_SRC_DIAL, s->name, s->name, s->format, &conf);
  r = tlc_targets_get(&d->targets, s->name, TLC_SRC_DIAL, &conf, &dl->target);
  if (r != 0) {
    tlc_log(TLC_LOG_ERR, TLC_LOGC_DIAL, "dial %s: cannot create target: %s", s->name,
            r == TLC_EINVAL && dl->target != NULL ? "a target of this name has another format"
                                                  : tlc_strerror(r));
    tlc_free(dl);
    return r;
  }
  dl->timer = tlc_malloc(sizeof(*dl->timer));
  if (dl->timer == NULL) {
    tlc_free(dl);
    return TLC_ENOMEM;
  }
  uv_timer_init(d->loop, dl->timer);
  dl->timer->data = dl;
  tlc_log(TLC_LOG_INFO, TLC_LOGC_DIAL, "dial %s: %s from %s:%u", s->name,
          tlc_format_name(s->format), s->host, s->port);
  attempt(dl);
  *out = dl;
  return 0;
}

static int dial_start(tlc_ingest_t *d, const tlc_cfg_source_t *cfg, tlc_source_t **out) {
  tlc_dialer_t *dl;
  int r = dialer_start(d, cfg, &dl);
  if (r == 0)
    *out = &dl->s;
  return r;
}

static void dial_stop(tlc_source_t *s, tlc_source_why_t why) {
  tlc_log(TLC_LOG_INFO, TLC_LOGC_DIAL, "dial %s: %s", s->cfg.name,
          why == TLC_SOURCE_CHANGED ? "address or format changed; re-dialling" : "stopped");
  dialer_stop((tlc_dialer_t *)s);
}

/* A new address or format is dialled again; other settings apply in place. */
static int dial_same_config(const tlc_source_t *s, const tlc_cfg_source_t *b) {
  const tlc_cfg_source_t *a = &s->cfg;
  return b != NULL && a->format == b->format && a->port == b->port && strcmp(a->host, b->host) == 0;
}

/* Failures to reach a probe are retried with backoff, never a start error. */
const tlc_source_ops_t tlc_dial_source_ops = {
  .kind = TLC_SRC_DIAL,
  .name = "dial",
  .start = dial_start,
  .stop = dial_stop,
  .same_config = dial_same_config,
  .drain = tlc__conns_drain_close, /* its connection, with every other (idempotent) */
};
