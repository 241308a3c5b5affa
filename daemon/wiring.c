/* wiring.c - creates the modules and connects them (see wiring.h).
 *
 * Each module gets its collaborators when it is created; the daemon object (daemon.h) holds it.
 * This file's observer, registered after storage's, fans target events and event batches out
 * to pubsub and fleet. What the read side, continuity and ingest ask of storage is answered by
 * stored.c, the daemon-wide figures by status.c, the token and the TLS context by access.c.
 * Nothing here allocates per event; each callback is O(1) plus the modules' own work.
 */
#include "daemon/wiring.h"

#include "daemon/access.h"
#include "daemon/budgetd.h"
#include "daemon/locd.h"
#include "daemon/xlocd.h"
#include "daemon/rolld.h"
#include "daemon/status.h"
#include "daemon/stored.h"

#include "base/clock.h"
#include "base/err.h"
#include "base/log.h"
#include "base/sdnotify.h"
#ifdef TLCAP_TESTING
#include "store/seg/iofault.h"
#endif
#include "tlc_version.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Range queries running at once, daemon-wide (GetStats.range, Subscribe.history, HTTP
 * ?since=): each holds an engine for its range and a threadpool thread while it runs. */
#define WIRING_HIST_JOBS 2

/* ---- the modules' log sinks and close callbacks ---- */

static void log_main(void *ud, int level, const char *msg) {
  (void)ud;
  tlc_log(level, TLC_LOGC_MAIN, "%s", msg);
}

static void log_pubsub(void *ud, int level, const char *msg) {
  (void)ud;
  tlc_log(level, TLC_LOGC_PUBSUB, "%s", msg);
}

/* Once closing and every module has closed: the token and the TLS context they borrowed go. */
static void modules_done(tlc_daemon_t *d) {
  if (d->closing && d->modules == 0)
    tlc_access_free(d);
}

static void module_closed(void *ud) {
  tlc_daemon_t *d = ud;
  d->modules--;
  modules_done(d);
}

/* ---- the observer: target events, batches and sealed segments to pubsub and fleet ---- */

/* A target event (target.h) as pubsub's kind; 0: pubsub has none for it. */
static int ps_kind(int kind) {
  switch (kind) {
  case TLC_TEV_CREATED:
    return TLC_PS_EV_ADDED;
  case TLC_TEV_CONNECTED:
    return TLC_PS_EV_CONNECTED;
  case TLC_TEV_DISCONNECTED:
    return TLC_PS_EV_DISCONNECTED;
  case TLC_TEV_RESYNC:
    return TLC_PS_EV_RESYNC;
  case TLC_TEV_DROPS:
    return TLC_PS_EV_DROPS;
  case TLC_TEV_DECODE_ERROR:
    return TLC_PS_EV_DECODE_ERROR;
  case TLC_TEV_CLOCK_RESET:
    return TLC_PS_EV_CLOCK_RESET;
  default:
    return 0;
  }
}

static void on_target_event(void *ud, const tlc_target_t *t, int kind, const char *detail) {
  tlc_daemon_t *d = ud;
  tlc_rolld_target_event(d, t, kind);
  tlc_budgetd_target_event(d, t, kind);
  tlc_locd_target_event(d, t, kind);
  if (d->fleet != NULL)
    tlc_fleet_target_event(d->fleet, t->name, kind, detail);
  if (d->pubsub != NULL && ps_kind(kind) != 0)
    tlc_pubsub_target_event(d->pubsub, t->name, ps_kind(kind), detail);
}

static void on_batch(void *ud, const tlc_target_t *t, const tlc_event_t *ev, size_t n) {
  tlc_daemon_t *d = ud;
  tlc_locd_batch(d, t, n); /* its records counted, to be located */
  tlc_budgetd_batch(d, t); /* the violations of the batch: where they are stored */
  tlc_xlocd_batch(d, t);   /* and the extremes it made new */
  tlc_locd_flush(d, t);    /* one store mark for both */
  if (d->pubsub != NULL) {
    tlc_pubsub_events(d->pubsub, t->name, ev, n);
    /* Between two batches the engines are consistent: a subscription tick that fell due
     * while this read is being processed runs now, not after the loop turn's other reads. */
    tlc_pubsub_poll(d->pubsub);
  }
}

static void on_store_event(void *ud, const tlc_store_event_t *ev) {
  tlc_daemon_t *d = ud;
  /* pubsub is still NULL while recovery (possibly on another thread) reports quarantines. */
  if (d->pubsub != NULL && ev->kind == TLC_SEV_SEALED && ev->target != NULL)
    tlc_pubsub_target_event(d->pubsub, ev->target, TLC_PS_EV_SEGMENT_ROTATED, ev->path);
  if (d->fleet != NULL && ev->kind == TLC_SEV_SEALED && ev->target != NULL && ev->path != NULL)
    tlc_fleet_segment_sealed(d->fleet, ev->target, ev->path, ev->seq, ev->reason);
}

/* ---- the modules, in start order ---- */

/* Storage (store = yes): the store and its policy (crash recovery of the state directory,
 * the watchdog health check, idle_seal: store/policy/policy.h), and the hooks that need it
 * (rotate, segments, history, half-close barriers). */
static int start_store(tlc_daemon_t *d) {
  tlc_view_reg_t *pv = &d->view;
  int r = tlc_stpol_start(d->in.loop, &d->in.targets, &d->in.cfg, on_store_event, d, &d->stpol);
  if (r != 0)
    return r;
  d->modules++;
  d->store = tlc_stpol_store(d->stpol);
  pv->rotate = tlc_stored_rotate;
  pv->rotate_ud = d;
  pv->view.segments = tlc_stored_segments;
  pv->view.segments_ud = d;
  pv->view.target_store = tlc_stored_target;
  if (tlc_histq_new(d->in.loop, WIRING_HIST_JOBS, &d->histq) == 0) {
    pv->view.history = tlc_stored_history;
    pv->view.history_cancel = tlc_stored_history_cancel;
    pv->view.around = tlc_stored_around;
    pv->view.history_ud = d;
  }
  (void)tlc_rolld_start(d); /* logged; the daemon runs without rollups */
  d->in.barrier = tlc_stored_barrier;
  d->in.barrier_ud = d;
  return 0;
}

/* The subscriber server: on cfg.serve and on inherited fds named "serve" or "subscribe". */
static int start_pubsub(tlc_daemon_t *d) {
  const tlc_config_t *c = &d->in.cfg;
  int r;
  tlc_pubsub_opts_t po;
  tlc_sd_fd_t *fds;
  int nfds = tlc_sd_listen_fds(&fds);
  tlc_pubsub_opts_default(&po);
  po.log = log_pubsub;
  po.log_ud = d;
  po.auth = d->auth;
  po.tls = d->tls;
  po.max_per_address = c->max_per_address;
  r = tlc_pubsub_new(d->in.loop, &po, &d->view.view, &d->pubsub);
  if (r != 0) {
    tlc_log(TLC_LOG_ERR, TLC_LOGC_PUBSUB, "subscriber server: %s", tlc_strerror(r));
    return r;
  }
  d->modules++;
  r = tlc_pubsub_adopt(d->pubsub, fds, nfds); /* the inherited sockets it serves */
  if (r != 0)
    return r;
  if (strncmp(c->serve, "unix:", 5) == 0) {
    if ((r = tlc_pubsub_listen_unix(d->pubsub, c->serve + 5)) == 0)
      tlc_log(TLC_LOG_INFO, TLC_LOGC_PUBSUB, "subscribers on %s", c->serve);
  } else if (c->serve[0] != '\0') {
    char host[TLC_CFG_HOST];
    uint16_t port;
    int bound = 0;
    if ((r = tlc_config_parse_hostport(c->serve, host, sizeof(host), &port)) == 0)
      r = tlc_pubsub_listen_tcp(d->pubsub, host, port, &bound);
  }
  if (r != 0)
    tlc_log(TLC_LOG_ERR, TLC_LOGC_PUBSUB, "subscribers: cannot listen on %s: %s", c->serve,
            tlc_strerror(r));
  return r;
}

/* The NATS publisher (nats_url set; docs/fleet.md). */
static int start_fleet(tlc_daemon_t *d) {
  const tlc_config_t *c = &d->in.cfg;
  tlc_fleet_opts_t fo;
  int r;
  memset(&fo, 0, sizeof(fo));
  fo.url = c->nats_url;
  fo.creds = c->nats_creds;
  fo.subject = c->nats_subject;
  fo.interval_ms = c->nats_interval_ms;
  fo.full_interval_ms = c->nats_full_interval_ms;
  fo.buffer_bytes = c->nats_buffer;
  fo.stream_max_age_ms = c->nats_max_age_ms;
  fo.stream_max_bytes = c->nats_max_bytes;
  fo.log = log_main;
  fo.log_ud = d;
  if (d->pubsub != NULL)
    fo.instance_id = tlc_pubsub_instance_id(d->pubsub);
  r = tlc_fleet_new(&d->fleet, d->in.loop, &d->view.view, &fo);
  if (r == 0)
    d->modules++;
  return r;
}

/* The Alertmanager client (alertmanager_url set; docs/alerts.md). */
static int start_alert(tlc_daemon_t *d) {
  const tlc_config_t *c = &d->in.cfg;
  tlc_alert_opts_t ao;
  int r;
  memset(&ao, 0, sizeof(ao));
  ao.url = c->alertmanager_url;
  ao.ca_file = c->alertmanager_ca;
  ao.state_dir = c->store ? c->state_dir : "";
  ao.resolve_ms = c->alert_resolve_ms;
  ao.repost_ms = c->alert_repost_ms;
  ao.log = log_main;
  ao.log_ud = d;
  r = tlc_alert_new(&d->alert, d->in.loop, &ao);
  if (r == 0)
    d->modules++;
  return r;
}

/* A checkpoint's storage position: the target's open rollup minute is written at the same
 * point of its stream, so that a crash after the checkpoint keeps it. */
static int cont_mark(void *ud, tlc_target_t *t, tlc_cont_done_fn done, void *done_ud) {
  return tlc_rolld_checkpoint(ud, t, tlc_stored_mark, done, done_ud);
}

/* Statistics checkpoints (continuity.h); with storage, restored targets catch up from it. */
static int start_cont(tlc_daemon_t *d) {
  const tlc_config_t *c = &d->in.cfg;
  tlc_cont_opts_t co;
  int r;
  memset(&co, 0, sizeof(co));
  co.state_dir = c->state_dir;
  co.interval_ms = c->checkpoint_interval_ms;
  co.slice_ns = c->checkpoint_slice_us * 1000;
  co.on_checkpoint = tlc_budgetd_checkpoint; /* the budgets' watch beside the statistics */
  co.on_replay = tlc_rolld_replay; /* the replayed records' samples into the rollups too */
  co.hook_ud = d;
  if (d->store != NULL) {
    co.mark = cont_mark;
    co.mid_block = tlc_stored_mid_block;
    co.mark_ud = d;
    co.replay = 1;
  }
  r = tlc_cont_new(d->in.loop, &d->in.targets, &co, &d->cont);
  if (r != 0) {
    tlc_log(TLC_LOG_ERR, TLC_LOGC_MAIN, "checkpoints: %s", tlc_strerror(r));
    return r;
  }
  d->modules++;
  return 0;
}

/* The observers on the registry, in order: continuity's (tlc_cont_new: a target is restored
 * before storage opens it), storage's, then this file's (pubsub and fleet see a target's events
 * after storage has acted on them). */
static int observe(tlc_daemon_t *d) {
  tlc_target_observer_t o;
  int r;
  if (d->stpol != NULL && (r = tlc_stpol_observe(d->stpol)) != 0)
    return r;
  memset(&o, 0, sizeof(o));
  o.cb = on_target_event;
  o.batch_cb = on_batch;
  o.ud = d;
  return tlc_targets_observe(&d->in.targets, &o);
}

int tlc_wiring_start(tlc_daemon_t *d) {
  tlc_view_t *v = &d->view.view;
  const tlc_config_t *c = &d->in.cfg;
  int r;
#ifdef TLCAP_TESTING
  tlc_io_test_hooks(); /* store/crashpoint.c: segment and checkpoint files go through tlc_io */
#endif
  v->daemon_info = tlc_status_daemon_info;
  v->target_subscribers = tlc_status_target_subscribers;
  v->daemon_ud = d;
  if ((r = tlc_access_open(d)) != 0 || (c->store && (r = start_store(d)) != 0))
    goto fail;
  if (c->nats_url[0] != '\0') { /* before pubsub copies the view */
    v->nats = tlc_status_nats;
    v->nats_ud = d;
  }
  if (c->alertmanager_url[0] != '\0') {
    v->alerts = tlc_status_alerts;
    v->alerts_ud = d;
  }
  /* the view's budgets hook, before pubsub and fleet copy the view; the watches follow the
   * targets (logged: a target without memory for its watch runs without) */
  (void)tlc_budgetd_start(d);
  if ((r = start_pubsub(d)) != 0 || (c->nats_url[0] != '\0' && (r = start_fleet(d)) != 0) ||
      (c->alertmanager_url[0] != '\0' && (r = start_alert(d)) != 0) || (r = start_cont(d)) != 0 ||
      (r = observe(d)) != 0)
    goto fail;
  tlc_cont_restore_all(d->cont); /* every checkpointed target, before anything connects */
  return 0;
fail:
  tlc_wiring_close(d);
  return r != 0 ? r : TLC_EINVAL;
}

/* The HTTP port on cfg.http ("" = off). SPEC 8: beyond loopback only with a token file
 * (access.h); the token and the TLS files are the subscriber port's. The default address
 * already in use (another tlcapd on this host) is a warning, not a failure; an address the
 * configuration names is a start-up failure, as the subscriber port's is. */
int tlc_wiring_start_http(tlc_daemon_t *d) {
  const tlc_config_t *c = &d->in.cfg;
  tlc_http_opts_t ho;
  char host[TLC_CFG_HOST];
  uint16_t port;
  int r;
  if (d->closing || c->http[0] == '\0')
    return 0;
  if (tlc_config_parse_hostport(c->http, host, sizeof(host), &port) != 0) {
    tlc_log(TLC_LOG_ERR, TLC_LOGC_CONFIG, "http: bad address \"%s\"", c->http);
    return TLC_EINVAL;
  }
  if (!tlc_access_http_allowed(d, host))
    return TLC_EINVAL;
  tlc_http_opts_default(&ho);
  ho.host = host;
  ho.port = port;
  ho.max_connections = c->http_max_connections;
  ho.max_per_address = c->max_per_address;
  ho.hosts = c->http_hosts;
  ho.origins = c->http_origins;
  ho.metrics_areas = c->metrics_areas;
  ho.start_unix_ms = tlc_now_unix_ms();
  ho.version = TLC_VERSION;
  ho.auth = d->auth; /* SPEC 8: the same token as the subscriber port */
  ho.tls_cert = d->tls != NULL ? c->tls_cert : NULL;
  ho.tls_key = d->tls != NULL ? c->tls_key : NULL;
  ho.log = log_main;
  ho.log_ud = d;
#ifdef TLCAP_TESTING
  /* Test hook: TLCAP_TEST_HTTP_NO_PROBE=1 leaves finding a port in use to libwebsockets. */
  ho.no_probe = getenv("TLCAP_TEST_HTTP_NO_PROBE") != NULL;
#endif
  r = tlc_http_new(d->in.loop, &ho, &d->view.view, &d->http);
  if (r != 0 && strcmp(c->http, TLC_DEFAULT_HTTP_ADDR) == 0 && r == UV_EADDRINUSE) {
    snprintf(d->http_off, sizeof(d->http_off),
             "the default address %s is in use (another tlcapd?); set http = HOST:PORT", c->http);
    tlc_log(TLC_LOG_ERR, TLC_LOGC_MAIN,
            "http: DASHBOARD AND /metrics OFF: %s, or \"\" to turn the port off", d->http_off);
    return 0;
  }
  if (r != 0) {
    tlc_log(TLC_LOG_ERR, TLC_LOGC_MAIN, "http: cannot serve on %s: %s", c->http,
            r < 0 && r > -4096 ? uv_strerror(r) : tlc_strerror(r));
    return r;
  }
  d->modules++;
  d->http_off[0] = '\0';
  snprintf(d->http_url, sizeof(d->http_url), "%s://%s%s%s:%d/", d->tls != NULL ? "https" : "http",
           strchr(host, ':') != NULL ? "[" : "", host, strchr(host, ':') != NULL ? "]" : "",
           tlc_http_port(d->http));
  tlc_log(TLC_LOG_NOTICE, TLC_LOGC_MAIN, "dashboard: %s  (metrics: %smetrics)", d->http_url,
          d->http_url);
  return 0;
}

void tlc_wiring_close(tlc_daemon_t *d) {
  tlc_view_t *v = &d->view.view;
  if (d->closing)
    return;
  d->closing = 1;
  /* the last checkpoints, while storage still takes marks (they precede the targets' close) */
  if (d->cont != NULL) {
    tlc_cont_t *c = d->cont;
    d->cont = NULL;
    tlc_cont_checkpoint_all(c);
    tlc_budgetd_final(d); /* one deferred behind a checkpoint in flight comes too late */
    tlc_cont_close(c, module_closed, d);
  }
  tlc_rolld_close(d); /* the open minutes and hours written, while the targets are there */
  tlc_budgetd_close(d);
  tlc_locd_close(d);
  tlc_targets_unobserve(&d->in.targets, d);
  v->daemon_info = NULL; /* the read side outlives the modules */
  v->target_store = NULL;
  v->target_subscribers = NULL;
  v->nats = NULL;
  v->alerts = NULL;
  if (d->http != NULL) { /* first: it reads pubsub and storage */
    tlc_http_t *h = d->http;
    d->http = NULL;
    tlc_http_close(h, module_closed, d);
  }
  if (d->fleet != NULL) {
    tlc_fleet_t *f = d->fleet;
    d->fleet = NULL;
    tlc_fleet_close(f, module_closed, d);
  }
  if (d->alert != NULL) {
    tlc_alert_t *al = d->alert;
    d->alert = NULL;
    tlc_alert_close(al, module_closed, d);
  }
  if (d->pubsub != NULL) {
    tlc_pubsub_t *ps = d->pubsub;
    d->pubsub = NULL;
    tlc_pubsub_close(ps, module_closed, d);
  }
  if (d->stpol != NULL) {
    tlc_stpol_t *sp = d->stpol;
    d->view.rotate = NULL;
    v->segments = NULL;
    v->history = NULL;
    v->around = NULL;
    tlc_histq_close(d->histq); /* freed when its running queries (cancelled) have returned */
    d->histq = NULL;
    d->in.barrier = NULL; /* barriers queued already are still answered by the store */
    d->stpol = NULL;
    d->store = NULL;
    tlc_stpol_close(sp, module_closed, d);
  }
  modules_done(d);
}
