/* policy.c - the storage policy, the store's observer on the targets (see policy.h).
 *
 * Design: one tlc_target_observer_t. A target's handle in t->store is an st_handle_t: the
 * store target plus the decoder counters already reported (the target's counters are
 * cumulative, a manifest gap wants the increase); opened at TLC_TEV_CREATED (one allocation per
 * target), closed at shutdown (or at TLC_TEV_FREED). Nothing here allocates per event; each
 * callback is O(1) plus the store's own work.
 */
#include "store/policy/policy.h"

#include "base/alloc.h"
#include "base/err.h"
#include "base/log.h"
#include "base/sdnotify.h"
#include "store/policy/export.h"
#include "store/seg/iofault.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

/* The writer's heartbeat (tlc_store_counters.writer_heartbeat_ns) moves at least every 250 ms
 * while it turns; queued data and a heartbeat older than this = the writer is stuck (R15). */
#define STORE_STALL_NS (5ll * 1000000000ll)
/* While crash recovery runs (before READY=1): EXTEND_TIMEOUT_USEC every second (T34), each
 * asking for this much more time. */
#define RECOVERY_EXTEND_USEC 5000000

/* t->store: the store's target handle plus the gap counters already reported for it. */
typedef struct st_handle {
  tlc_store_target_t *t;
  uint64_t gaps, skipped, truncated; /* t->gaps, dec.c.bytes_skipped, dec.c.truncated seen */
  int held;                          /* disconnected, its segment left open (counted in p->held) */
  int idle_sealed;                   /* idle_seal done since the last disconnect */
} st_handle_t;

struct tlc_stpol {
  tlc_targets_t *targets;
  tlc_store_t *st;
  void (*event_cb)(void *ud, const tlc_store_event_t *ev);
  void *event_ud;
  int main_export;       /* the main export segments opened from now on get (1: xml) */
  uv_timer_t idle;       /* idle_seal: seals the open segment of a target disconnected so long */
  int idle_on;           /* the timer was initialised (closed with the policy) */
  uint64_t idle_seal_ms; /* 0: off */
  size_t held;           /* disconnected targets with a segment left open (st_handle.held) */
  uv_mutex_t rec_mu;     /* serialises log lines of the recovery thread with the waiting loop */
  uv_cond_t rec_cv;
  int rec_done, rec_rc, rec_mu_ok;
  tlc_store_recovery_t rec_sum;
  int64_t writer_start_ns; /* CLOCK_MONOTONIC when the writer started (before its heartbeat) */
  int pending;             /* handles still closing (the store, the idle timer) */
  void (*close_cb)(void *ud);
  void *close_ud;
};

static st_handle_t *hd(const tlc_target_t *t) {
  return t->store;
}

tlc_store_target_t *tlc_stpol_target(const tlc_target_t *t) {
  return hd(t) != NULL ? hd(t)->t : NULL;
}

tlc_store_t *tlc_stpol_store(const tlc_stpol_t *p) {
  return p->st;
}

static void st_log(void *ud, int level, const char *msg) {
  tlc_stpol_t *p = ud;
  /* Also called from the recovery thread at start-up (log.c is loop-thread only). */
  if (p->rec_mu_ok)
    uv_mutex_lock(&p->rec_mu);
  tlc_log(level, TLC_LOGC_STORE, "%s", msg);
  if (p->rec_mu_ok)
    uv_mutex_unlock(&p->rec_mu);
}

static void st_event(void *ud, const tlc_store_event_t *ev) {
  tlc_stpol_t *p = ud;
  if (p->event_cb != NULL)
    p->event_cb(p->event_ud, ev);
}

/* SPEC 10: a target that stays disconnected seals its open segment after idle_seal, so that
 * its last segment does not stay a .part until it comes back. */
static void idle_tick(uv_timer_t *h) {
  tlc_stpol_t *p = h->data;
  int64_t now = tlc_now_unix_ms();
  if (p->st == NULL)
    return;
  for (size_t i = 0; i < p->targets->n; i++) {
    tlc_target_t *t = p->targets->v[i];
    st_handle_t *sh = t->store;
    if (sh == NULL || t->connected || sh->idle_sealed || t->last_disconnect_unix_ms == 0 ||
        now - t->last_disconnect_unix_ms < (int64_t)p->idle_seal_ms)
      continue;
    sh->idle_sealed = 1; /* a no-op when nothing was written since (no segment open) */
    tlc_store_rotate(sh->t, TLC_ROT_IDLE);
  }
}

static void maybe_closed(tlc_stpol_t *p) {
  if (p->pending > 0)
    return;
  if (p->rec_mu_ok) {
    uv_cond_destroy(&p->rec_cv);
    uv_mutex_destroy(&p->rec_mu);
  }
  void (*cb)(void *) = p->close_cb;
  void *ud = p->close_ud;
  tlc_free(p);
  if (cb != NULL)
    cb(ud);
}

static void st_closed(void *ud) {
  tlc_stpol_t *p = ud;
  p->pending--;
  maybe_closed(p);
}

static void idle_closed(uv_handle_t *h) {
  st_closed(h->data);
}

/* The target's names and context area for its segments' main exports (SPEC 3: the export
 * beside a bin1x segment holds the mapping and that segment's statistics, as the live target
 * computes them), and the export's format ([daemon] main_export). The store copies the
 * mapping. */
static void st_settings(const tlc_stpol_t *p, tlc_target_t *t, int mapping_too) {
  st_handle_t *h = t->store;
  tlc_store_tconf_t tc;
  int r;
  memset(&tc, 0, sizeof(tc));
  tc.has_context_area = t->has_context_area;
  tc.context_area = t->context_area;
  tc.pack = t->conf.pack;
  tc.main_export = p->main_export ? TLC_MAIN_XML : TLC_MAIN_TEXT1;
  r = tlc_store_target_configure(h->t, &tc);
  if (r == 0 && mapping_too)
    r = tlc_store_target_set_mapping(h->t, t->has_mapping ? &t->mapping : NULL);
  if (r != 0)
    tlc_log(TLC_LOG_ERR, TLC_LOGC_STORE,
            "target %s: segment export settings not updated: %s (segments keep the previous ones)",
            t->name, tlc_strerror(r));
}

/* Watchdog health gate (sdnotify.h, R15): the writer is stalled when data waits in its queue
 * and its heartbeat (CLOCK_MONOTONIC, as the store's default clock) is older than
 * STORE_STALL_NS. While the disk is full the writer still turns (it drops and counts), so its
 * heartbeat stays fresh: a full disk is not a stall. */
static int st_health(void *ud, const char **why) {
  tlc_stpol_t *p = ud;
  tlc_store_counters_t c;
  struct timespec ts;
  int64_t now;
  if (p->st == NULL)
    return 0;
  tlc_store_counters(p->st, &c);
  if (c.queue_bytes == 0)
    return 0; /* nothing waits */
  clock_gettime(CLOCK_MONOTONIC, &ts);
  now = (int64_t)ts.tv_sec * 1000000000ll + ts.tv_nsec;
  /* Before its first turn the writer has no heartbeat yet: count from its start. */
  if (now - (c.writer_heartbeat_ns != 0 ? c.writer_heartbeat_ns : p->writer_start_ns) <
      STORE_STALL_NS)
    return 0;
  *why = "storage writer stalled: data queued and no heartbeat for 5 s";
  return 1;
}

/* The storage options from the configuration (hooks included). */
static void st_opts(tlc_stpol_t *p, const tlc_config_t *c, tlc_store_opts_t *so) {
  tlc_store_opts_default(so);
  so->state_dir = c->state_dir;
  so->max_block = c->max_block;
  so->max_segment_bytes = c->rotate_bytes;
  so->max_segment_age_ms = (int64_t)c->rotate_age_ms;
  so->max_total_bytes = c->retain_bytes;
  so->max_target_bytes = c->retain_target_bytes;
  so->max_segments = c->retain_segments;
  so->max_age_ms = (int64_t)c->retain_age_ms;
  so->min_free_bytes = c->min_free;
  so->sync_mode = c->sync_mode;
  so->sync_interval_ms = (int64_t)c->sync_interval_ms;
  so->sync_bytes = c->sync_bytes;
  so->compress = c->compress;
  so->index_interval = c->index_interval;
  so->queue_bytes = (size_t)c->store_queue;
  so->quick_start = c->quick_start;
  so->keep_skipped = c->keep_skipped;
  for (size_t i = 0; i < c->nsrc && !so->gather_at_start; i++)
    so->gather_at_start = c->src[i].format != TLC_FMT_EVLOG; /* bin1x targets will come */
  so->export_cb = tlc_stpol_main_export; /* the main .txt export of every bin1x segment */
  so->export_ud = NULL;
  so->log_cb = st_log;
  so->log_ud = p;
  so->event_cb = st_event;
  so->event_ud = p;
}

/* Crash recovery on its own thread, so that the loop thread can keep systemd's start timeout
 * extended while it runs (it may read the whole state directory). */
static void rec_thread(void *arg) {
  tlc_stpol_t *p = arg;
  int r;
  if (tlc_recovery_hook != NULL)
    tlc_recovery_hook(); /* test binaries: a slow recovery (iofault.h) */
  r = tlc_store_recover(p->st, &p->rec_sum);
  uv_mutex_lock(&p->rec_mu);
  p->rec_rc = r;
  p->rec_done = 1;
  uv_cond_signal(&p->rec_cv);
  uv_mutex_unlock(&p->rec_mu);
}

/* Runs recovery, sending EXTEND_TIMEOUT_USEC and STATUS every second while it takes. */
static int st_recover(tlc_stpol_t *p) {
  uv_thread_t thr;
  uint64_t t0 = uv_hrtime();
  int r = uv_thread_create(&thr, rec_thread, p);
  if (r != 0)
    return r;
  uv_mutex_lock(&p->rec_mu);
  while (!p->rec_done) {
    if (uv_cond_timedwait(&p->rec_cv, &p->rec_mu, 1000000000ull) != 0 && !p->rec_done) {
      char msg[160];
      snprintf(msg, sizeof(msg),
               "EXTEND_TIMEOUT_USEC=%d\nSTATUS=recovering the state directory (%" PRIu64 " s)",
               RECOVERY_EXTEND_USEC, (uint64_t)((uv_hrtime() - t0) / 1000000000ull));
      tlc_sd_notify(msg);
    }
  }
  uv_mutex_unlock(&p->rec_mu);
  uv_thread_join(&thr);
  return p->rec_rc;
}

/* Recovery runs before READY=1 and re-reads every sealed segment (quick_start = no, the
 * default: R9) or checks sizes and indexes only (quick_start = yes). It runs on a helper
 * thread while this one extends systemd's start timeout every second (st_recover). */
static void recover(tlc_stpol_t *p, const char *state_dir) {
  struct timespec ts;
  tlc_sd_notify("STATUS=recovering the state directory");
  int r = st_recover(p);
  tlc_store_recovery_t sum = p->rec_sum;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  p->writer_start_ns = (int64_t)ts.tv_sec * 1000000000ll + ts.tv_nsec;
  if (r != 0)
    tlc_log(TLC_LOG_ERR, TLC_LOGC_STORE, "recovery of %s: %s (continuing)", state_dir,
            tlc_strerror(r));
  else if (sum.recovered + sum.quarantined + sum.torn_bytes > 0)
    tlc_log(TLC_LOG_NOTICE, TLC_LOGC_STORE,
            "recovered %llu open segments (%llu torn bytes set aside, %llu quarantined)",
            (unsigned long long)sum.recovered, (unsigned long long)sum.torn_bytes,
            (unsigned long long)sum.quarantined);
}

/* The store's backpressure for a target (tlc_store_target_set_flow): its source is held. */
static void st_flow(void *ud, int paused) {
  tlc_target_hold(ud, paused);
}

static void on_created(tlc_stpol_t *p, tlc_target_t *t) {
  tlc_store_target_t *s = NULL;
  st_handle_t *h = tlc_calloc(1, sizeof(*h));
  int r = h == NULL ? TLC_ENOMEM : tlc_store_target_open(p->st, t->name, t->format, &s);
  if (r != 0) {
    tlc_free(h);
    tlc_log(TLC_LOG_ERR, TLC_LOGC_STORE, "target %s: storage not opened: %s", t->name,
            tlc_strerror(r));
    return;
  }
  h->t = s;
  tlc_store_target_set_flow(s, st_flow, t); /* backpressure: a TCP source stops reading */
  h->gaps = t->gaps;
  h->skipped = t->pipe.dec.c.bytes_skipped;
  h->truncated = t->pipe.dec.c.truncated;
  t->store = h;
  st_settings(p, t, t->has_mapping);
}

static void on_connected(tlc_stpol_t *p, tlc_target_t *t) {
  st_handle_t *h = hd(t);
  h->idle_sealed = 0;
  /* SPEC 3: a reconnect closes the segment; the next record opens a new one. */
  if (t->connections > 1)
    tlc_store_rotate(h->t, TLC_ROT_RECONNECT);
  if (h->held) {
    h->held = 0;
    p->held--;
  }
}

/* Gaps: target.h's counters are cumulative; the manifest gets the increase. */
static void on_disconnected(tlc_stpol_t *p, tlc_target_t *t) {
  st_handle_t *h = hd(t);
  tlc_store_stream_end(h->t); /* keep_skipped: the stream's unrecorded tail */
  if (!h->held) {
    /* fds: at most TLC_STPOL_HELD_SEGMENTS disconnected targets keep a segment open */
    if (p->held >= TLC_STPOL_HELD_SEGMENTS) {
      tlc_store_rotate(h->t, TLC_ROT_RECONNECT);
    } else {
      h->held = 1;
      p->held++;
    }
  }
  if (t->gaps > h->gaps) {
    tlc_store_gap(h->t, "disconnect", t->gaps - h->gaps); /* 1 per disconnect */
    h->gaps = t->gaps;
  }
}

static void on_freed(tlc_stpol_t *p, tlc_target_t *t) {
  if (hd(t)->held)
    p->held--;
  tlc_store_target_close(hd(t)->t);
  tlc_free(t->store);
  t->store = NULL;
}

static void obs_event(void *ud, const tlc_target_t *ct, int kind, const char *detail) {
  tlc_stpol_t *p = ud;
  /* The storage seam: the observer owns t->store (target.h), hence the cast. */
  tlc_target_t *t = (tlc_target_t *)(uintptr_t)ct;
  (void)detail;
  if (p->st == NULL)
    return;
  if (kind == TLC_TEV_CREATED) {
    on_created(p, t);
    return;
  }
  if (hd(t) == NULL)
    return;
  switch (kind) {
  case TLC_TEV_MAPPING:
    st_settings(p, t, 1);
    break;
  case TLC_TEV_CONNECTED:
    on_connected(p, t);
    break;
  case TLC_TEV_DISCONNECTED:
    on_disconnected(p, t);
    break;
  case TLC_TEV_RESYNC:
    if (t->pipe.dec.c.bytes_skipped > hd(t)->skipped) {
      tlc_store_gap(hd(t)->t, "resync", t->pipe.dec.c.bytes_skipped - hd(t)->skipped);
      hd(t)->skipped = t->pipe.dec.c.bytes_skipped;
    }
    break;
  case TLC_TEV_CLOCK_RESET:
    /* in a stream: the segment ends before the restarted record, with a gap history replays
     * (after a gap the reconnect made the boundary already) */
    if (strcmp(detail != NULL ? detail : "", "in stream") == 0) {
      tlc_store_gap(hd(t)->t, "clock-reset", 1);
      tlc_store_rotate(hd(t)->t, TLC_ROT_CLOCK_RESET);
    }
    break;
  case TLC_TEV_RESET:
    /* `tlcap reset`: a gap the live statistics made, at a segment boundary history replays */
    tlc_store_gap(hd(t)->t, "reset", 1);
    hd(t)->gaps = t->gaps;
    tlc_store_rotate(hd(t)->t, TLC_ROT_RESET);
    break;
  case TLC_TEV_TRUNCATED:
    if (t->pipe.dec.c.truncated > hd(t)->truncated) {
      tlc_store_gap(hd(t)->t, "truncated", t->pipe.dec.c.truncated - hd(t)->truncated);
      hd(t)->truncated = t->pipe.dec.c.truncated;
    }
    break;
  case TLC_TEV_FREED:
    on_freed(p, t);
    break;
  default:
    break;
  }
}

static void obs_records(void *ud, const tlc_target_t *t, const tlc_event_t *ev, size_t n,
                        const uint8_t *chunk, size_t clen, uint64_t coff) {
  tlc_stpol_t *p = ud;
  if (p->st != NULL && t->store != NULL) /* never blocks; drops are counted by the store */
    (void)tlc_store_write_chunk(hd(t)->t, ev, n, chunk, clen, coff);
}

static void obs_skipped(void *ud, const tlc_target_t *t, uint64_t offset, const uint8_t *buf,
                        size_t len) {
  tlc_stpol_t *p = ud;
  if (p->st != NULL && t->store != NULL)
    tlc_store_skipped(hd(t)->t, offset, buf, len); /* no-op unless keep_skipped */
}

static int obs_read_buffer(void *ud, const tlc_target_t *t, size_t held, size_t want, uint8_t **buf,
                           size_t *len) {
  tlc_stpol_t *p = ud;
  if (p->st == NULL || t->store == NULL)
    return 0;
  return tlc_store_read_buffer(hd(t)->t, held, want, buf, len);
}

static void idle_start(tlc_stpol_t *p, uv_loop_t *loop, uint64_t idle_seal_ms) {
  p->idle_seal_ms = idle_seal_ms;
  if (p->idle_seal_ms > 0 && uv_timer_init(loop, &p->idle) == 0) {
    uint64_t tick = p->idle_seal_ms / 4;
    tick = tick < 50 ? 50 : tick > 1000 ? 1000 : tick;
    p->idle.data = p;
    p->idle_on = 1;
    p->pending++;
    uv_timer_start(&p->idle, idle_tick, tick, tick);
  }
}

int tlc_stpol_start(uv_loop_t *loop, tlc_targets_t *targets, const tlc_config_t *cfg,
                    void (*event_cb)(void *ud, const tlc_store_event_t *ev), void *event_ud,
                    tlc_stpol_t **out) {
  tlc_stpol_t *p = tlc_calloc(1, sizeof(*p));
  tlc_store_opts_t so;
  int r;
  *out = NULL;
  if (p == NULL)
    return TLC_ENOMEM;
  p->targets = targets;
  p->event_cb = event_cb;
  p->event_ud = event_ud;
  p->main_export = cfg->main_export;
  st_opts(p, cfg, &so);
  if ((r = uv_mutex_init(&p->rec_mu)) != 0) {
    tlc_free(p);
    return r;
  }
  if ((r = uv_cond_init(&p->rec_cv)) != 0) {
    uv_mutex_destroy(&p->rec_mu);
    tlc_free(p);
    return r;
  }
  p->rec_mu_ok = 1;
  r = tlc_store_new(loop, &so, &p->st);
  if (r != 0) {
    tlc_log(TLC_LOG_ERR, TLC_LOGC_STORE, "storage in %s: %s", cfg->state_dir, tlc_strerror(r));
    maybe_closed(p);
    return r;
  }
  p->pending++;
  recover(p, cfg->state_dir);
  tlc_sd_health_add(st_health, p);
  idle_start(p, loop, cfg->idle_seal_ms);
  *out = p;
  return 0;
}

int tlc_stpol_observe(tlc_stpol_t *p) {
  tlc_target_observer_t o;
  memset(&o, 0, sizeof(o));
  o.cb = obs_event;
  o.records_cb = obs_records;
  o.skipped_cb = obs_skipped;
  o.read_buffer_cb = obs_read_buffer;
  o.ud = p;
  return tlc_targets_observe(p->targets, &o);
}

void tlc_stpol_reload(tlc_stpol_t *p, const tlc_config_t *c) {
  tlc_store_opts_t so;
  /* Rotation, retention and sync limits apply now (tlc_store_reconfigure runs a retention
   * pass with the new budgets). The keys that need a restart (compress, index_interval,
   * store_queue, max_block, keep_skipped) hold their running values in c: the settings
   * table's reload rule (tlc_config_reload_merge) put them back and logged them. */
  st_opts(p, c, &so);
  tlc_store_reconfigure(p->st, &so);
  if (c->main_export != p->main_export) {
    /* segments opened from now on get the new main export (names .txt/.xml decided at open) */
    p->main_export = c->main_export;
    for (size_t i = 0; i < p->targets->n; i++)
      if (p->targets->v[i]->store != NULL)
        st_settings(p, p->targets->v[i], 0);
  }
  /* SPEC 3: SIGHUP closes every open segment. */
  tlc_store_rotate_all(p->st, TLC_ROT_SIGHUP);
}

void tlc_stpol_close(tlc_stpol_t *p, void (*cb)(void *ud), void *ud) {
  tlc_store_t *st = p->st;
  p->close_cb = cb;
  p->close_ud = ud;
  tlc_targets_unobserve(p->targets, p);
  tlc_sd_health_remove(p);
  for (size_t i = 0; i < p->targets->n; i++) {
    tlc_target_t *t = p->targets->v[i];
    if (t->store != NULL) {
      tlc_store_target_close(hd(t)->t);
      tlc_free(t->store);
      t->store = NULL;
    }
  }
  if (p->idle_on) {
    p->idle_on = 0;
    uv_close((uv_handle_t *)&p->idle, idle_closed);
  }
  p->st = NULL;
  if (st != NULL)
    tlc_store_close(st, st_closed, p);
  else
    maybe_closed(p);
}
