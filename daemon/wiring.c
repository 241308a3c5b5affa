/* wiring.c - target registry <-> pubsub and storage (see wiring.h).
 *
 * Design: storage is started and its policy observes the targets by itself
 * (store/policy/policy.h: options from the configuration, crash recovery, segment boundaries,
 * gaps, idle seal, the writer's health check); this file's own observer, registered after it,
 * fans target events out to pubsub and fleet. Nothing here allocates per event; each callback
 * is O(1) plus the services' own work. Half-closed TCP targets are answered through
 * tlc_store_barrier (d->barrier).
 *
 * Does not: change a running serve address (a reload that would is refused:
 * tlc_config_reload_merge) or state directory (restart required, logged), nor compress /
 * index_interval / store_queue / max_block of a running store (logged).
 */
#include "daemon/wiring.h"

#include "daemon/stored.h"

#include "auth/auth.h"
#include "auth/peers.h"
#include "auth/tls.h"
#include "base/alloc.h"
#include "base/err.h"
#include "base/log.h"
#include "base/sdnotify.h"
#include "fleet/fleet.h"
#ifdef TLCAP_TESTING
#include "store/seg/iofault.h"
#endif

#include "http/http.h"
#include "pubsub/pubsub.h"
#include "store/policy/policy.h"
#include "store/seg/segread.h"
#include "store/store.h"
#include "tlc_version.h"

#include "continuity/continuity.h"
#include "formats/json.h"
#include "history/histq.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/statvfs.h>
#include <time.h>

struct tlc_wiring {
  tlc_ingest_t *d;
  tlc_view_reg_t *pv;
  char serve[sizeof(((tlc_config_t *)0)->serve)];
  char state_dir[TLC_CFG_PATH];
  int store_on;
  int closing;
  int pending;        /* services still closing */
  tlc_fleet_t *fleet; /* NATS publisher (--nats), or NULL */
  tlc_cont_t *cont;   /* statistics checkpoints and restore (continuity.h) */
  tlc_histq_t *hq;    /* range queries off the loop (histq.h), with storage */
  /* Remote access (SPEC 8): the token file and the TLS context, shared by the servers that
   * borrow them (pubsub; the HTTP port), freed only after those have closed. */
  tlc_auth_t *auth;
  tlc_tls_t *tls;
  tlc_pubsub_t *ps;
  tlc_stpol_t *sp;     /* storage and its policy (store/policy/policy.h), or NULL */
  tlc_store_t *st;     /* its store (tlc_stpol_store), or NULL */
  tlc_stored_t stored; /* what the view and continuity ask of storage (stored.h) */
  tlc_http_t *http;
  char http_addr[sizeof(((tlc_config_t *)0)->http)];
};

/* ---- NATS (daemon/fleet) ---- */
static void fleet_log(void *ud, int level, const char *msg) {
  (void)ud;
  tlc_log(level, TLC_LOGC_MAIN, "%s", msg);
}

static int fleet_status(void *ud, tlc_view_nats_t *out) {
  tlc_wiring_t *w = ud;
  tlc_fleet_counters_t c;
  if (w->fleet == NULL)
    return TLC_EINVAL;
  tlc_fleet_counters(w->fleet, &c);
  out->url = w->d->cfg.nats_url;
  out->connected = c.connected;
  out->stream_ready = c.stream_ready;
  out->published = c.published;
  out->dropped = c.dropped;
  out->reconnects = c.reconnects;
  out->publish_cpu_ns = c.publish_cpu_ns;
  out->awaiting_ack = c.awaiting_ack;
  out->nreasons = 0;
  for (int r = 0; r < TLC_FLEET_DROP_N && r < TLC_VIEW_NATS_REASONS; r++) {
    out->drop_reason[r] = tlc_fleet_drop_name(r);
    out->drops[r] = c.drops[r];
    out->nreasons++;
  }
  return 0;
}

static void maybe_free(tlc_wiring_t *w);
static void fleet_closed(void *ud) {
  tlc_wiring_t *w = ud;
  w->pending--;
  maybe_free(w);
}

static void maybe_free(tlc_wiring_t *w) {
  if (!w->closing || w->pending != 0)
    return;
  tlc_auth_free(w->auth);
  tlc_tls_free(w->tls);
  tlc_free(w);
}

static void ps_log(void *ud, int level, const char *msg) {
  (void)ud;
  tlc_log(level, TLC_LOGC_PUBSUB, "%s", msg);
}

static void ps_closed(void *ud) {
  tlc_wiring_t *w = ud;
  w->pending--;
  maybe_free(w);
}

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

static void st_event(void *ud, const tlc_store_event_t *ev) {
  tlc_wiring_t *w = ud;
  /* w->ps is still NULL while recovery (possibly on another thread) reports quarantines. */
  if (w->ps != NULL && ev->kind == TLC_SEV_SEALED && ev->target != NULL)
    tlc_pubsub_target_event(w->ps, ev->target, TLC_PS_EV_SEGMENT_ROTATED, ev->path);
  if (w->fleet != NULL && ev->kind == TLC_SEV_SEALED && ev->target != NULL && ev->path != NULL)
    tlc_fleet_segment_sealed(w->fleet, ev->target, ev->path, ev->seq, ev->reason);
}

static void st_closed(void *ud) {
  tlc_wiring_t *w = ud;
  w->pending--;
  maybe_free(w);
}

static int st_barrier(void *ud, void (*cb)(void *), void *cb_ud) {
  tlc_wiring_t *w = ud;
  if (w->st == NULL)
    return TLC_EINVAL;
  return tlc_store_barrier_written(w->st, cb, cb_ud);
}

/* Range queries running at once, daemon-wide (GetStats.range, Subscribe.history, HTTP
 * ?since=): each holds an engine for its range and a threadpool thread while it runs. */
#define WIRING_HIST_JOBS 2

static void cont_closed(void *ud) {
  tlc_wiring_t *w = ud;
  w->pending--;
  maybe_free(w);
}

static void obs_event(void *ud, const tlc_target_t *ct, int kind, const char *detail) {
  tlc_wiring_t *w = ud;
  if (w->fleet != NULL)
    tlc_fleet_target_event(w->fleet, ct->name, kind, detail);
  if (w->ps != NULL && ps_kind(kind) != 0)
    tlc_pubsub_target_event(w->ps, ct->name, ps_kind(kind), detail);
}

static void obs_batch(void *ud, const tlc_target_t *t, const tlc_event_t *ev, size_t n) {
  tlc_wiring_t *w = ud;
  if (w->ps != NULL) {
    tlc_pubsub_events(w->ps, t->name, ev, n);
    /* Between two batches the engines are consistent: a subscription tick that fell due
     * while this read is being processed runs now, not after the loop turn's other reads. */
    tlc_pubsub_poll(w->ps);
  }
}

/* ---- the read side (view.h): the hooks of the modules the wiring runs ---- */

static void http_log(void *ud, int level, const char *msg) {
  (void)ud;
  tlc_log(level, TLC_LOGC_MAIN, "%s", msg);
}

static void http_closed(void *ud) {
  tlc_wiring_t *w = ud;
  w->pending--;
  maybe_free(w);
}

static void view_daemon_info(void *ud, tlc_view_daemon_t *out) {
  tlc_wiring_t *w = ud;
  struct statvfs sv;
  memset(out, 0, sizeof(*out));
  if (w->ps != NULL) {
    tlc_pubsub_stats_t s;
    tlc_pubsub_get_stats(w->ps, &s);
    out->subscribers = s.subscribers;
  }
  if (w->st != NULL) {
    tlc_store_counters_t c;
    tlc_store_counters(w->st, &c);
    out->has_store = 1;
    out->store_queue_bytes = c.queue_bytes;
    out->store_bytes_written = c.bytes_written;
    out->store_dropped =
        c.dropped_buffer_full_records + c.dropped_disk_full_records + c.dropped_io_error_records;
    out->stored_bytes = c.stored_bytes;
    out->stored_segments = c.stored_segments;
    out->disk_full = c.disk_full;
  }
  /* one statvfs(2) per scrape or live message: microseconds, on the loop */
  if (w->store_on && statvfs(w->state_dir, &sv) == 0) {
    out->has_disk_free = 1;
    out->disk_free_bytes = (uint64_t)sv.f_bavail * (uint64_t)sv.f_frsize;
  }
}

static void view_target_store(void *ud, size_t index, tlc_view_store_t *out) {
  tlc_wiring_t *w = ud;
  memset(out, 0, sizeof(*out));
  if (index < w->d->targets.n && tlc_stpol_target(w->d->targets.v[index]) != NULL) {
    tlc_store_target_counters_t c;
    tlc_store_target_counters(tlc_stpol_target(w->d->targets.v[index]), &c);
    out->has = 1;
    out->bytes_written = c.bytes_written;
    out->records_written = c.records_written;
    out->dropped_records = c.dropped_records;
    out->segment_seq = c.segment_seq;
    out->segment_bytes = c.segment_bytes;
  }
}

static size_t view_target_subscribers(void *ud, size_t index) {
  tlc_wiring_t *w = ud;
  if (w->ps == NULL || index >= w->d->targets.n)
    return 0;
  return tlc_pubsub_target_subscribers(w->ps, w->d->targets.v[index]->name);
}

/* Starts the HTTP port on d->cfg.http ("" = off). SPEC 8: beyond loopback only with a token
 * file (a warning without TLS); the token and the TLS files are the subscriber port's. The
 * default address
 * already in use (another tlcapd on this host) is a warning, not a failure; an address the
 * configuration names is a start-up failure, as the subscriber port's is. */
static int http_start(tlc_wiring_t *w) {
  const tlc_config_t *c = &w->d->cfg;
  tlc_http_opts_t ho;
  char host[TLC_CFG_HOST];
  uint16_t port;
  int r;
  snprintf(w->http_addr, sizeof(w->http_addr), "%s", c->http);
  if (c->http[0] == '\0')
    return 0;
  if (tlc_config_parse_hostport(c->http, host, sizeof(host), &port) != 0) {
    tlc_log(TLC_LOG_ERR, TLC_LOGC_CONFIG, "http: bad address \"%s\"", c->http);
    return TLC_EINVAL;
  }
  if (!tlc_peers_host_is_loopback(host)) {
    if (w->auth == NULL) {
      tlc_log(TLC_LOG_ERR, TLC_LOGC_CONFIG,
              "http: refusing to serve %s: beyond loopback the HTTP port needs token_file "
              "(--token-file FILE; SPEC 8), and should have tls_cert/tls_key; or bind "
              "127.0.0.1 and reach it through an SSH tunnel, or set http = \"\"",
              c->http);
      return TLC_EINVAL;
    }
    if (w->tls == NULL)
      tlc_log(TLC_LOG_WARN, TLC_LOGC_CONFIG,
              "http: %s is beyond loopback without TLS: the token crosses the network in "
              "clear (set tls_cert/tls_key)",
              c->http);
  }
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
  ho.auth = w->auth; /* SPEC 8: the same token as the subscriber port */
  ho.tls_cert = w->tls != NULL ? c->tls_cert : NULL;
  ho.tls_key = w->tls != NULL ? c->tls_key : NULL;
  ho.log = http_log;
  ho.log_ud = w;
#ifdef TLCAP_TESTING
  /* Test hook: TLCAP_TEST_HTTP_NO_PROBE=1 leaves finding a port in use to libwebsockets. */
  ho.no_probe = getenv("TLCAP_TEST_HTTP_NO_PROBE") != NULL;
#endif
  r = tlc_http_new(w->d->loop, &ho, &w->pv->view, &w->http);
  if (r != 0) {
    if (strcmp(c->http, TLC_DEFAULT_HTTP_ADDR) == 0 && r == UV_EADDRINUSE) {
      tlc_log(TLC_LOG_WARN, TLC_LOGC_MAIN,
              "http: the default address %s is in use (another tlcapd?): dashboard and "
              "/metrics off; set http = HOST:PORT or \"\"",
              c->http);
      return 0;
    }
    tlc_log(TLC_LOG_ERR, TLC_LOGC_MAIN, "http: cannot serve on %s: %s", c->http,
            r < 0 && r > -4096 ? uv_strerror(r) : tlc_strerror(r));
    return r;
  }
  w->pending++;
  tlc_log(TLC_LOG_INFO, TLC_LOGC_MAIN, "http: dashboard, /metrics and /api/v1 on %s (port %d)",
          c->http, tlc_http_port(w->http));
  return 0;
}

/* Remote access (SPEC 8): the token file and the TLS context the servers borrow. */
static int start_auth(tlc_wiring_t *w) {
  tlc_ingest_t *d = w->d;
  int r = 0;
  char why[600];
  /* tlc_config_validate checked both files already; a failure now is a race (logged). */
  if (d->cfg.token_file[0] != '\0' &&
      (r = tlc_auth_new(d->cfg.token_file, NULL, &w->auth, why, sizeof(why))) != 0) {
    tlc_log(TLC_LOG_ERR, TLC_LOGC_CONFIG, "%s", why);
    return r;
  }
  if (d->cfg.tls_cert[0] != '\0' &&
      (r = tlc_tls_new(d->cfg.tls_cert, d->cfg.tls_key, &w->tls, why, sizeof(why))) != 0) {
    tlc_log(TLC_LOG_ERR, TLC_LOGC_CONFIG, "%s", why);
    return r;
  }
  if (w->tls != NULL && tlc_tls_check_dates(w->tls, why, sizeof(why)) == 1)
    tlc_log(TLC_LOG_WARN, TLC_LOGC_CONFIG, "%s: clients will refuse it", why);
  return 0;
}

/* Storage (store = yes): the store and its policy (crash recovery of the state directory,
 * the watchdog health check, idle_seal: store/policy/policy.h), and the hooks that need it
 * (rotate, segments, history, half-close barriers). */
static int start_store(tlc_wiring_t *w) {
  tlc_ingest_t *d = w->d;
  tlc_view_reg_t *pv = w->pv;
  int r;
#ifdef TLCAP_TESTING
  tlc_io_test_hooks(); /* store/crashpoint.c */
#endif
  r = tlc_stpol_start(d->loop, &d->targets, &d->cfg, st_event, w, &w->sp);
  if (r != 0)
    return r;
  w->st = tlc_stpol_store(w->sp);
  w->stored.d = d;
  w->stored.state_dir = w->state_dir;
  pv->rotate = tlc_stored_rotate;
  pv->rotate_ud = &w->stored;
  pv->view.segments = tlc_stored_segments;
  pv->view.segments_ud = &w->stored;
  if (tlc_histq_new(d->loop, WIRING_HIST_JOBS, &w->hq) == 0) {
    w->stored.hq = w->hq;
    pv->view.history = tlc_stored_history;
    pv->view.history_cancel = tlc_stored_history_cancel;
    pv->view.history_ud = &w->stored;
  }
  d->barrier = st_barrier;
  d->barrier_ud = w;
  return 0;
}

/* The subscriber server: on d->cfg.serve and on inherited fds named "serve" or "subscribe". */
static int start_pubsub(tlc_wiring_t *w) {
  tlc_ingest_t *d = w->d;
  tlc_view_reg_t *pv = w->pv;
  int r;
  tlc_pubsub_opts_t po;
  tlc_sd_fd_t *fds;
  int nfds = tlc_sd_listen_fds(&fds);
  tlc_pubsub_opts_default(&po);
  po.log = ps_log;
  po.log_ud = w;
  po.auth = w->auth;
  po.tls = w->tls;
  po.max_per_address = d->cfg.max_per_address;
  r = tlc_pubsub_new(d->loop, &po, &pv->view, &w->ps);
  if (r != 0) {
    tlc_log(TLC_LOG_ERR, TLC_LOGC_PUBSUB, "subscriber server: %s", tlc_strerror(r));
    return r;
  }
  w->pending++;
  r = tlc_pubsub_adopt(w->ps, fds, nfds); /* the inherited sockets it serves */
  if (r != 0)
    return r;
  if (strncmp(d->cfg.serve, "unix:", 5) == 0) {
    r = tlc_pubsub_listen_unix(w->ps, d->cfg.serve + 5);
    if (r != 0) {
      tlc_log(TLC_LOG_ERR, TLC_LOGC_PUBSUB, "subscribers: cannot listen on %s: %s", d->cfg.serve,
              tlc_strerror(r));
      return r;
    }
    tlc_log(TLC_LOG_INFO, TLC_LOGC_PUBSUB, "subscribers on %s", d->cfg.serve);
  } else if (d->cfg.serve[0] != '\0') {
    char host[TLC_CFG_HOST];
    uint16_t port;
    int bound = 0;
    r = tlc_config_parse_hostport(d->cfg.serve, host, sizeof(host), &port);
    if (r == 0)
      r = tlc_pubsub_listen_tcp(w->ps, host, port, &bound);
    if (r != 0) {
      tlc_log(TLC_LOG_ERR, TLC_LOGC_PUBSUB, "subscribers: cannot listen on %s: %s", d->cfg.serve,
              tlc_strerror(r));
      return r;
    }
  }
  return 0;
}

/* The NATS publisher (nats_url set; docs/fleet.md). */
static int start_fleet(tlc_wiring_t *w) {
  tlc_ingest_t *d = w->d;
  tlc_view_reg_t *pv = w->pv;
  int r;
  tlc_fleet_opts_t fo;
  memset(&fo, 0, sizeof(fo));
  fo.url = d->cfg.nats_url;
  fo.creds = d->cfg.nats_creds;
  fo.subject = d->cfg.nats_subject;
  fo.interval_ms = d->cfg.nats_interval_ms;
  fo.full_interval_ms = d->cfg.nats_full_interval_ms;
  fo.buffer_bytes = d->cfg.nats_buffer;
  fo.stream_max_age_ms = d->cfg.nats_max_age_ms;
  fo.stream_max_bytes = d->cfg.nats_max_bytes;
  fo.log = fleet_log;
  fo.log_ud = w;
  if (w->ps != NULL)
    fo.instance_id = tlc_pubsub_instance_id(w->ps);
  r = tlc_fleet_new(&w->fleet, d->loop, &pv->view, &fo);
  if (r != 0)
    return r;
  w->pending++;
  return 0;
}

/* Statistics checkpoints (continuity.h); with storage, restored targets catch up from it. */
static int start_cont(tlc_wiring_t *w) {
  tlc_ingest_t *d = w->d;
  int r;
  /* Continuity's observer goes first: a target is restored before storage opens it. */
  tlc_cont_opts_t co;
  memset(&co, 0, sizeof(co));
#ifdef TLCAP_TESTING
  if (w->st == NULL)
    tlc_io_test_hooks(); /* checkpoint files go through tlc_io too (storage installed them else) */
#endif
  co.state_dir = d->cfg.state_dir;
  co.interval_ms = d->cfg.checkpoint_interval_ms;
  co.slice_ns = d->cfg.checkpoint_slice_us * 1000;
  if (w->st != NULL) {
    co.mark = tlc_stored_mark;
    co.mid_block = tlc_stored_mid_block;
    co.mark_ud = &w->stored;
    co.replay = 1;
  }
  r = tlc_cont_new(d->loop, &d->targets, &co, &w->cont);
  if (r != 0) {
    tlc_log(TLC_LOG_ERR, TLC_LOGC_MAIN, "checkpoints: %s", tlc_strerror(r));
    return r;
  }
  w->pending++;
  return 0;
}

/* The wiring's observer on the registry: target events, records, skipped bytes, read
 * buffers and event batches, fanned out to the modules that run. */
static int observe(tlc_wiring_t *w) {
  tlc_target_observer_t o;
  int r;
  /* storage's observer after continuity's, before this one (pubsub and fleet see a target's
   * events after storage has acted on them) */
  if (w->sp != NULL && (r = tlc_stpol_observe(w->sp)) != 0)
    return r;
  memset(&o, 0, sizeof(o));
  o.cb = obs_event;
  o.batch_cb = obs_batch;
  o.ud = w;
  return tlc_targets_observe(&w->d->targets, &o);
}

int tlc_wiring_start(tlc_wiring_t **out, tlc_ingest_t *d, tlc_view_reg_t *pv) {
  tlc_wiring_t *w = tlc_calloc(1, sizeof(*w));
  int r;
  *out = NULL;
  if (w == NULL)
    return TLC_ENOMEM;
  w->d = d;
  w->pv = pv;
  snprintf(w->serve, sizeof(w->serve), "%s", d->cfg.serve);
  snprintf(w->state_dir, sizeof(w->state_dir), "%s", d->cfg.state_dir);
  w->store_on = d->cfg.store;
  pv->view.daemon_info = view_daemon_info;
  pv->view.target_store = view_target_store;
  pv->view.target_subscribers = view_target_subscribers;
  pv->view.daemon_ud = w;
  if ((r = start_auth(w)) != 0 || (d->cfg.store && (r = start_store(w)) != 0))
    goto fail;
  if (d->cfg.nats_url[0] != '\0') { /* before pubsub copies the view */
    pv->view.nats = fleet_status;
    pv->view.nats_ud = w;
  }
  if ((r = start_pubsub(w)) != 0 || (d->cfg.nats_url[0] != '\0' && (r = start_fleet(w)) != 0) ||
      (r = start_cont(w)) != 0 || (r = observe(w)) != 0)
    goto fail;
  tlc_cont_restore_all(w->cont); /* every checkpointed target, before anything connects */
  *out = w;
  return 0;
fail:
  tlc_wiring_close(w);
  return r != 0 ? r : TLC_EINVAL;
}

int tlc_wiring_start_http(tlc_wiring_t *w) {
  return w != NULL ? http_start(w) : 0;
}

void tlc_wiring_reload(tlc_wiring_t *w) {
  const tlc_config_t *c;
  if (w == NULL)
    return;
  c = &w->d->cfg;
  if (w->http != NULL)
    tlc_http_set_metrics_areas(w->http, c->metrics_areas);
  {
    /* SPEC 8: the token file and the certificate are re-read (new connections get them); a
     * file that became unusable keeps the running one (logged). Turning either on or off, or
     * another path, needs a restart (the settings table; tlc_config_reload_merge kept the
     * running paths in c). */
    char why[600];
    if (w->auth != NULL && strcmp(c->token_file, tlc_auth_path(w->auth)) == 0) {
      if (tlc_auth_reload(w->auth, why, sizeof(why)) != 0)
        tlc_log(TLC_LOG_ERR, TLC_LOGC_CONFIG, "reload: keeping the previous token: %s", why);
      else
        tlc_log(TLC_LOG_INFO, TLC_LOGC_CONFIG, "reload: token file %s re-read", c->token_file);
    }
    if (w->tls != NULL && strcmp(c->tls_cert, tlc_tls_cert_path(w->tls)) == 0 &&
        strcmp(c->tls_key, tlc_tls_key_path(w->tls)) == 0) {
      int both = 0;
      if (tlc_tls_reload(w->tls, why, sizeof(why)) != 0) {
        tlc_log(TLC_LOG_ERR, TLC_LOGC_CONFIG, "reload: keeping the previous certificate: %s", why);
      } else {
        /* the HTTP port takes the pair just loaded and checked (a bad one never reaches it) */
        if (w->http != NULL && tlc_http_reload_tls(w->http, w->tls, why, sizeof(why)) != 0)
          tlc_log(TLC_LOG_ERR, TLC_LOGC_CONFIG,
                  "reload: the HTTP port keeps the previous certificate: %s", why);
        else
          both = w->http != NULL;
        tlc_log(TLC_LOG_INFO, TLC_LOGC_CONFIG, "reload: certificate %s and key reloaded%s",
                c->tls_cert, both ? " (the HTTP port's too)" : "");
        if (tlc_tls_check_dates(w->tls, why, sizeof(why)) == 1)
          tlc_log(TLC_LOG_WARN, TLC_LOGC_CONFIG, "reload: %s: clients will refuse it", why);
      }
    }
  }
  if (w->sp != NULL)
    tlc_stpol_reload(w->sp, c);
}

tlc_auth_t *tlc_wiring_auth(const tlc_wiring_t *w) {
  return w != NULL ? w->auth : NULL;
}

tlc_tls_t *tlc_wiring_tls(const tlc_wiring_t *w) {
  return w != NULL ? w->tls : NULL;
}

void tlc_wiring_settle(uv_loop_t *loop) {
  for (int turns = 0; tlc_http_closing() > 0 && turns < 1000; turns++)
    (void)uv_run(loop, UV_RUN_NOWAIT);
}

void tlc_wiring_close(tlc_wiring_t *w) {
  if (w == NULL || w->closing)
    return;
  w->closing = 1;
  /* the last checkpoints, while storage still takes marks (they precede the targets' close) */
  if (w->cont != NULL) {
    tlc_cont_t *c = w->cont;
    w->cont = NULL;
    tlc_cont_checkpoint_all(c);
    tlc_cont_close(c, cont_closed, w);
  }
  tlc_targets_unobserve(&w->d->targets, w);
  tlc_sd_health_remove(w);
  w->pv->view.daemon_info = NULL; /* the read side outlives the wiring */
  w->pv->view.target_store = NULL;
  w->pv->view.target_subscribers = NULL;
  w->pv->view.nats = NULL;
  if (w->http != NULL) { /* first: it reads pubsub and storage */
    tlc_http_t *h = w->http;
    w->http = NULL;
    tlc_http_close(h, http_closed, w);
  }
  if (w->fleet != NULL) {
    tlc_fleet_t *f = w->fleet;
    w->fleet = NULL;
    tlc_fleet_close(f, fleet_closed, w);
  }
  if (w->ps != NULL) {
    tlc_pubsub_t *ps = w->ps;
    w->ps = NULL;
    tlc_pubsub_close(ps, ps_closed, w);
  }
  if (w->sp != NULL) {
    tlc_stpol_t *sp = w->sp;
    w->pv->rotate = NULL;
    w->pv->view.segments = NULL;
    w->pv->view.history = NULL;
    tlc_histq_close(w->hq); /* freed when its running queries (cancelled) have returned */
    w->hq = NULL;
    w->stored.hq = NULL;
    w->d->barrier = NULL; /* barriers queued already are still answered by the store */
    w->sp = NULL;
    w->st = NULL;
    w->pending++;
    tlc_stpol_close(sp, st_closed, w);
  }
  maybe_free(w);
}

void tlc_wiring_status(const tlc_wiring_t *w, char *buf, size_t len) {
  size_t n = strlen(buf);
  if (w == NULL || n >= len)
    return;
  if (w->ps != NULL) {
    tlc_pubsub_stats_t s;
    tlc_pubsub_get_stats(w->ps, &s);
    snprintf(buf + n, len - n, " subscribers=%zu", s.subscribers);
    n = strlen(buf);
    if (w->auth != NULL && n < len) {
      tlc_auth_stats_t as;
      tlc_auth_get_stats(w->auth, &as);
      snprintf(buf + n, len - n, " auth_failed=%llu", (unsigned long long)as.failed);
      n = strlen(buf);
    }
    if (w->tls != NULL && n < len) {
      snprintf(buf + n, len - n, " tls_failed=%llu", (unsigned long long)s.closed_tls);
      n = strlen(buf);
    }
  }
  if (w->st != NULL && n < len) {
    tlc_store_counters_t s;
    tlc_store_counters(w->st, &s);
    snprintf(buf + n, len - n, " stored=%llu store_dropped=%llu%s",
             (unsigned long long)s.records_written,
             (unsigned long long)(s.dropped_buffer_full_records + s.dropped_disk_full_records +
                                  s.dropped_io_error_records),
             s.disk_full ? " DEGRADED(disk full)" : "");
  }
}

void tlc_wiring_dump(const tlc_wiring_t *w, tlc_json_w_t *j) {
  tlc_cont_stats_t s;
  if (w != NULL && w->fleet != NULL) { /* the NATS publisher (docs/fleet.md) */
    tlc_fleet_counters_t c;
    tlc_fleet_counters(w->fleet, &c);
    tlc_json_w_open(j, "nats", '{');
    tlc_json_w_u64(j, "connected", (uint64_t)c.connected);
    tlc_json_w_u64(j, "stream_ready", (uint64_t)c.stream_ready);
    tlc_json_w_u64(j, "published", c.published);
    tlc_json_w_u64(j, "awaiting_ack", c.awaiting_ack);
    tlc_json_w_u64(j, "dropped_total", c.dropped);
    tlc_json_w_u64(j, "dropped_bytes", c.dropped_bytes);
    tlc_json_w_open(j, "dropped", '{');
    for (int r = 0; r < TLC_FLEET_DROP_N; r++)
      tlc_json_w_u64(j, tlc_fleet_drop_name(r), c.drops[r]);
    tlc_json_w_close(j, '}');
    tlc_json_w_u64(j, "reconnects", c.reconnects);
    tlc_json_w_close(j, '}');
  }
  if (w != NULL && w->st != NULL) {
    /* the storage's progress: what is written, and what is still being sealed (a half-closed
     * target is answered once its bytes are written, before the seals: docs/storage.md) */
    tlc_store_counters_t c;
    tlc_store_counters(w->st, &c);
    tlc_json_w_open(j, "store", '{');
    tlc_json_w_u64(j, "records_written", c.records_written);
    tlc_json_w_u64(j, "queue_bytes", c.queue_bytes);
    tlc_json_w_u64(j, "queue_peak_bytes", c.queue_peak_bytes);
    tlc_json_w_u64(j, "segments_opened", c.segments_opened);
    tlc_json_w_u64(j, "segments_sealed", c.segments_sealed);
    tlc_json_w_u64(j, "seal_queue", c.seal_queue);
    tlc_json_w_u64(j, "seal_waits", c.seal_waits);
    tlc_json_w_u64(j, "exports_pending", c.exports_pending);
    tlc_json_w_u64(j, "exports_background", c.exports_background);
    tlc_json_w_u64(j, "export_queue", c.export_queue);
    tlc_json_w_close(j, '}');
  }
  if (w != NULL && w->hq != NULL) {
    /* range queries (histq.h): encoded* counts the answers built on the pool, not the loop */
    tlc_histq_stats_t h;
    tlc_histq_get_stats(w->hq, &h);
    tlc_json_w_open(j, "history", '{');
    tlc_json_w_u64(j, "started", h.started);
    tlc_json_w_u64(j, "done", h.done);
    tlc_json_w_u64(j, "refused_busy", h.refused_busy);
    tlc_json_w_u64(j, "cancelled", h.cancelled);
    tlc_json_w_u64(j, "running", h.running);
    tlc_json_w_u64(j, "encoded", h.encoded);
    tlc_json_w_u64(j, "encoded_bytes", h.encoded_bytes);
    tlc_json_w_close(j, '}');
  }
  if (w == NULL || w->cont == NULL)
    return;
  tlc_cont_get_stats(w->cont, &s);
  tlc_json_w_open(j, "checkpoints", '{');
  tlc_json_w_u64(j, "written", s.written);
  tlc_json_w_u64(j, "write_errors", s.write_errors);
  tlc_json_w_u64(j, "aborted", s.aborted);
  tlc_json_w_u64(j, "restored", s.restored);
  tlc_json_w_u64(j, "rebuilt", s.rebuilt);
  tlc_json_w_u64(j, "quarantined", s.quarantined);
  tlc_json_w_u64(j, "slices", s.slices);
  tlc_json_w_u64(j, "max_slice_us", s.max_slice_ns / 1000);
  tlc_json_w_u64(j, "max_slice_cpu_us", s.max_slice_cpu_ns / 1000);
  tlc_json_w_u64(j, "max_encode_ms", s.max_encode_ns / 1000000);
  tlc_json_w_u64(j, "max_frozen_ms", s.max_frozen_ns / 1000000);
  tlc_json_w_u64(j, "last_write_ms", s.last_write_ns / 1000000);
  tlc_json_w_close(j, '}');
}
