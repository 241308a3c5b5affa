/* wiring.c - target registry <-> pubsub and storage (see wiring.h).
 *
 * Design: one tlc_target_observer_t registered on the registry; it fans out to whichever of the
 * two services runs. Storage's per-target handle lives in t->store (the seam target.h
 * documents): opened at TLC_TEV_CREATED, closed at shutdown (or at TLC_TEV_FREED). Nothing here
 * allocates per event; each callback is O(1) plus the services' own work.
 *
 * Does not: change a running serve address or state directory (restart required, logged).
 */
#include "wiring.h"

#include "log.h"
#include "sdnotify.h"
#include "tlc_alloc.h"
#include "tlc_err.h"

#ifdef TLC_HAVE_PUBSUB
#include "pubsub.h"
#endif
#ifdef TLC_HAVE_STORE
#include "store.h"
#endif

#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

struct tlc_wiring {
  tlc_daemon_t *d;
  tlc_provider_t *pv;
  char serve[sizeof(((tlc_config_t *)0)->serve)];
  char state_dir[TLC_CFG_PATH];
  int store_on;
  int closing;
  int pending; /* services still closing */
#ifdef TLC_HAVE_PUBSUB
  tlc_pubsub_t *ps;
#endif
#ifdef TLC_HAVE_STORE
  tlc_store_t *st;
  uint64_t hc_written;  /* health check: bytes_written at the last progress */
  uint64_t hc_since_ms; /* uv_now when it last moved (or the queue was empty) */
#endif
};

#define STORE_STALL_MS 20000 /* queued data and no write progress this long = stalled */

static void maybe_free(tlc_wiring_t *w) {
  if (w->closing && w->pending == 0)
    tlc_free(w);
}

#ifdef TLC_HAVE_PUBSUB
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
  default:
    return 0;
  }
}
#endif

#ifdef TLC_HAVE_STORE
static void st_log(void *ud, int level, const char *msg) {
  (void)ud;
  tlc_log(level, TLC_LOGC_STORE, "%s", msg);
}

static void st_event(void *ud, const tlc_store_event_t *ev) {
  tlc_wiring_t *w = ud;
#ifdef TLC_HAVE_PUBSUB
  if (w->ps != NULL && ev->kind == TLC_SEV_SEALED && ev->target != NULL)
    tlc_pubsub_target_event(w->ps, ev->target, TLC_PS_EV_SEGMENT_ROTATED, ev->path);
#else
  (void)w;
  (void)ev;
#endif
}

static void st_closed(void *ud) {
  tlc_wiring_t *w = ud;
  w->pending--;
  maybe_free(w);
}

/* Watchdog health gate (sdnotify.h): the writer is stalled when data waits in its queue and
 * nothing has reached the disk for STORE_STALL_MS. A full disk is not a stall (the store drops
 * and counts while paused). */
static int st_health(void *ud, const char **why) {
  tlc_wiring_t *w = ud;
  tlc_store_counters_t c;
  uint64_t now = uv_now(w->d->loop);
  if (w->st == NULL)
    return 0;
  tlc_store_counters(w->st, &c);
  if (c.queue_bytes == 0 || c.disk_full || c.bytes_written != w->hc_written) {
    w->hc_written = c.bytes_written;
    w->hc_since_ms = now;
    return 0;
  }
  if (now - w->hc_since_ms < STORE_STALL_MS)
    return 0;
  *why = "storage writer made no progress for 20 s with data queued";
  return 1;
}

static int st_rotate(void *ud, void *target) {
  tlc_target_t *t = target;
  (void)ud;
  if (t->store == NULL)
    return TLC_EINVAL;
  return tlc_store_rotate(t->store, TLC_ROT_COMMAND);
}
#endif

static void obs_event(void *ud, const tlc_target_t *ct, int kind, const char *detail) {
  tlc_wiring_t *w = ud;
  /* The storage seam: the observer owns t->store (target.h), hence the cast. */
  tlc_target_t *t = (tlc_target_t *)(uintptr_t)ct;
  (void)t;
#ifdef TLC_HAVE_STORE
  if (w->st != NULL) {
    switch (kind) {
    case TLC_TEV_CREATED: {
      tlc_store_target_t *s = NULL;
      int r = tlc_store_target_open(w->st, t->name, t->format, &s);
      if (r != 0)
        tlc_log(TLC_LOG_ERR, TLC_LOGC_STORE, "target %s: storage not opened: %s", t->name,
                tlc_strerror(r));
      else
        t->store = s;
      break;
    }
    case TLC_TEV_CONNECTED:
      if (t->store != NULL && t->connections > 1)
        tlc_store_rotate(t->store, TLC_ROT_RECONNECT);
      break;
    case TLC_TEV_DISCONNECTED:
      if (t->store != NULL)
        tlc_store_gap(t->store, "disconnect", t->gaps);
      break;
    case TLC_TEV_RESYNC:
      if (t->store != NULL)
        tlc_store_gap(t->store, "resync", t->dec.c.bytes_skipped);
      break;
    case TLC_TEV_TRUNCATED:
      if (t->store != NULL)
        tlc_store_gap(t->store, "truncated", t->dec.c.truncated);
      break;
    case TLC_TEV_FREED:
      if (t->store != NULL) {
        tlc_store_target_close(t->store);
        t->store = NULL;
      }
      break;
    default:
      break;
    }
  }
#endif
#ifdef TLC_HAVE_PUBSUB
  if (w->ps != NULL && ps_kind(kind) != 0)
    tlc_pubsub_target_event(w->ps, ct->name, ps_kind(kind), detail);
#else
  (void)w;
  (void)kind;
  (void)detail;
#endif
}

static void obs_decoded(void *ud, const tlc_target_t *t, const tlc_event_t *ev, size_t n) {
  tlc_wiring_t *w = ud;
  (void)w;
#ifdef TLC_HAVE_STORE
  if (w->st != NULL && t->store != NULL)
    (void)tlc_store_write(t->store, ev, n); /* never blocks; drops are counted by the store */
#else
  (void)t;
  (void)ev;
  (void)n;
#endif
}

static void obs_batch(void *ud, const tlc_target_t *t, const tlc_event_t *ev, size_t n) {
  tlc_wiring_t *w = ud;
  (void)w;
#ifdef TLC_HAVE_PUBSUB
  if (w->ps != NULL)
    tlc_pubsub_events(w->ps, t->name, ev, n);
#else
  (void)t;
  (void)ev;
  (void)n;
#endif
}

int tlc_wiring_start(tlc_wiring_t **out, tlc_daemon_t *d, tlc_provider_t *pv) {
  tlc_wiring_t *w = tlc_calloc(1, sizeof(*w));
  tlc_target_observer_t o;
  int r = 0;
  *out = NULL;
  if (w == NULL)
    return TLC_ENOMEM;
  w->d = d;
  w->pv = pv;
  snprintf(w->serve, sizeof(w->serve), "%s", d->cfg.serve);
  snprintf(w->state_dir, sizeof(w->state_dir), "%s", d->cfg.state_dir);
  w->store_on = d->cfg.store;
#ifdef TLC_HAVE_STORE
  if (d->cfg.store) {
    tlc_store_opts_t so;
    tlc_store_recovery_t sum;
    tlc_store_opts_default(&so);
    so.state_dir = d->cfg.state_dir;
    so.max_block = d->cfg.max_block;
    so.log_cb = st_log;
    so.log_ud = w;
    so.event_cb = st_event;
    so.event_ud = w;
    r = tlc_store_new(d->loop, &so, &w->st);
    if (r != 0) {
      tlc_log(TLC_LOG_ERR, TLC_LOGC_STORE, "storage in %s: %s", d->cfg.state_dir, tlc_strerror(r));
      goto fail;
    }
    w->pending++;
    memset(&sum, 0, sizeof(sum));
    /* Recovery runs before READY=1 and may take a while on a big state directory: ask for
     * more start-up time first (recovery is synchronous, so it cannot be asked during it). */
    tlc_sd_notify("EXTEND_TIMEOUT_USEC=300000000\nSTATUS=recovering the state directory");
    r = tlc_store_recover(w->st, &sum);
    if (r != 0)
      tlc_log(TLC_LOG_ERR, TLC_LOGC_STORE, "recovery of %s: %s (continuing)", d->cfg.state_dir,
              tlc_strerror(r));
    else if (sum.recovered + sum.quarantined + sum.torn_bytes > 0)
      tlc_log(TLC_LOG_NOTICE, TLC_LOGC_STORE,
              "recovered %llu open segments (%llu torn bytes set aside, %llu quarantined)",
              (unsigned long long)sum.recovered, (unsigned long long)sum.torn_bytes,
              (unsigned long long)sum.quarantined);
    pv->rotate = st_rotate;
    pv->rotate_ud = w;
    w->hc_since_ms = uv_now(d->loop);
    tlc_sd_health_add(st_health, w);
  }
#else
  if (d->cfg.store)
    tlc_log(TLC_LOG_WARN, TLC_LOGC_STORE, "this build has no storage; nothing is written");
#endif
#ifdef TLC_HAVE_PUBSUB
  {
    tlc_pubsub_opts_t po;
    tlc_sd_fd_t *fds;
    int nfds = tlc_sd_listen_fds(&fds);
    tlc_pubsub_opts_default(&po);
    po.log = ps_log;
    po.log_ud = w;
    r = tlc_pubsub_new(d->loop, &po, &pv->ps, &w->ps);
    if (r != 0) {
      tlc_log(TLC_LOG_ERR, TLC_LOGC_PUBSUB, "subscriber server: %s", tlc_strerror(r));
      goto fail;
    }
    w->pending++;
    for (int i = 0; i < nfds; i++) {
      char why[160];
      int is_unix;
      if (fds[i].taken ||
          (strcmp(fds[i].name, "serve") != 0 && strcmp(fds[i].name, "subscribe") != 0))
        continue;
      is_unix = tlc_sd_check_stream_listener(fds[i].fd, 1, why, sizeof(why)) == 0;
      if (!is_unix && (r = tlc_sd_check_stream_listener(fds[i].fd, 0, why, sizeof(why))) != 0) {
        tlc_log(TLC_LOG_ERR, TLC_LOGC_PUBSUB, "socket activation: fd %d (\"%s\"): %s", fds[i].fd,
                fds[i].name, why);
        goto fail;
      }
      r = tlc_pubsub_listen_fd(w->ps, fds[i].fd, is_unix);
      if (r != 0) {
        tlc_log(TLC_LOG_ERR, TLC_LOGC_PUBSUB, "socket activation: fd %d: %s", fds[i].fd,
                tlc_strerror(r));
        goto fail;
      }
      fds[i].taken = 1;
    }
    if (d->cfg.serve[0] != '\0') {
      char host[TLC_CFG_HOST];
      uint16_t port;
      int bound = 0;
      r = tlc_config_parse_hostport(d->cfg.serve, host, sizeof(host), &port);
      if (r == 0)
        r = tlc_pubsub_listen_tcp(w->ps, host, port, &bound);
      if (r != 0) {
        tlc_log(TLC_LOG_ERR, TLC_LOGC_PUBSUB, "subscribers: cannot listen on %s: %s", d->cfg.serve,
                tlc_strerror(r));
        goto fail;
      }
      tlc_log(TLC_LOG_INFO, TLC_LOGC_PUBSUB, "subscribers on %s (port %d)", d->cfg.serve, bound);
    }
  }
#endif
  memset(&o, 0, sizeof(o));
  o.cb = obs_event;
  o.decoded_cb = obs_decoded;
  o.batch_cb = obs_batch;
  o.ud = w;
  r = tlc_targets_observe(&d->targets, &o);
  if (r != 0)
    goto fail;
  *out = w;
  return 0;
fail:
  tlc_wiring_close(w);
  return r != 0 ? r : TLC_EINVAL;
}

void tlc_wiring_reload(tlc_wiring_t *w) {
  const tlc_config_t *c;
  if (w == NULL)
    return;
  c = &w->d->cfg;
  if (strcmp(c->serve, w->serve) != 0 || strcmp(c->state_dir, w->state_dir) != 0 ||
      c->store != w->store_on)
    tlc_log(TLC_LOG_WARN, TLC_LOGC_CONFIG,
            "reload: serve, state_dir and store take effect only after a restart");
#ifdef TLC_HAVE_STORE
  if (w->st != NULL)
    tlc_store_rotate_all(w->st, TLC_ROT_SIGHUP);
#endif
}

void tlc_wiring_close(tlc_wiring_t *w) {
  if (w == NULL || w->closing)
    return;
  w->closing = 1;
  tlc_targets_unobserve(&w->d->targets, w);
  tlc_sd_health_remove(w);
#ifdef TLC_HAVE_PUBSUB
  if (w->ps != NULL) {
    tlc_pubsub_t *ps = w->ps;
    w->ps = NULL;
    tlc_pubsub_close(ps, ps_closed, w);
  }
#endif
#ifdef TLC_HAVE_STORE
  if (w->st != NULL) {
    tlc_store_t *st = w->st;
    for (size_t i = 0; i < w->d->targets.n; i++) {
      tlc_target_t *t = w->d->targets.v[i];
      if (t->store != NULL) {
        tlc_store_target_close(t->store);
        t->store = NULL;
      }
    }
    w->pv->rotate = NULL;
    w->st = NULL;
    tlc_store_close(st, st_closed, w);
  }
#endif
  maybe_free(w);
}

void tlc_wiring_status(const tlc_wiring_t *w, char *buf, size_t len) {
  size_t n = strlen(buf);
  if (w == NULL || n >= len)
    return;
#ifdef TLC_HAVE_PUBSUB
  if (w->ps != NULL) {
    tlc_pubsub_stats_t s;
    tlc_pubsub_get_stats(w->ps, &s);
    snprintf(buf + n, len - n, " subscribers=%zu", s.subscribers);
    n = strlen(buf);
  }
#endif
#ifdef TLC_HAVE_STORE
  if (w->st != NULL && n < len) {
    tlc_store_counters_t s;
    tlc_store_counters(w->st, &s);
    snprintf(buf + n, len - n, " stored=%llu store_dropped=%llu%s",
             (unsigned long long)s.records_written,
             (unsigned long long)(s.dropped_buffer_full_records + s.dropped_disk_full_records +
                                  s.dropped_io_error_records),
             s.disk_full ? " DEGRADED(disk full)" : "");
  }
#endif
}
