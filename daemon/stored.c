/* stored.c - what the read side, continuity, the status line and the stats dump ask of storage
 * (see stored.h): a target's rotation, continuity's marks in a store queue, range queries over
 * stored segments, the list of a target's segments, and the store's figures. Loop thread.
 */
#include "daemon/stored.h"

#include "daemon/daemon.h"

#include "base/alloc.h"
#include "base/err.h"
#include "base/json.h"
#include "continuity/ckfile.h"
#include "history/histq.h"
#include "store/policy/policy.h"
#include "store/seg/epochs.h"
#include "store/seg/segread.h"
#include "store/store.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

/* A name a target may have: a peer's, or an efl source's "SOURCE/APP-PID" (one '/'). */
static int name_ok(const char *name) {
  return tlc_target_name_check(name, TLC_TARGET_NAME_MAX) == 0 ||
         tlc_target_name_check_efl(name, TLC_TARGET_NAME_MAX) == 0;
}

int tlc_stored_rotate(void *ud, tlc_target_t *t) {
  tlc_store_target_t *h = tlc_stpol_target(t);
  (void)ud;
  if (h == NULL)
    return TLC_EINVAL;
  return tlc_store_rotate(h, TLC_ROT_COMMAND);
}

/* Continuity's storage position: a mark in the target's store queue. */
typedef struct st_mark_req {
  tlc_cont_done_fn done;
  void *ud;
} st_mark_req_t;

static void st_mark_done(void *ud, const tlc_store_pos_t *p) {
  st_mark_req_t *m = ud;
  tlc_ckpt_pos_t cp = { p->valid, p->seq, p->bytes, p->disconnects };
  m->done(m->ud, &cp);
  tlc_free(m);
}

int tlc_stored_mid_block(void *ud, tlc_target_t *t) {
  (void)ud;
  return tlc_stpol_target(t) != NULL && tlc_store_target_mid_block(tlc_stpol_target(t));
}

int tlc_stored_mark(void *ud, tlc_target_t *t, tlc_cont_done_fn done, void *done_ud) {
  st_mark_req_t *m;
  int r;
  (void)ud;
  if (tlc_stpol_target(t) == NULL)
    return TLC_EINVAL;
  m = tlc_malloc(sizeof(*m));
  if (m == NULL)
    return TLC_ENOMEM;
  m->done = done;
  m->ud = done_ud;
  r = tlc_store_mark(tlc_stpol_target(t), st_mark_done, m);
  if (r != 0)
    tlc_free(m);
  return r;
}

/* view.history: the target's stored records in a range, on the threadpool (histq.h),
 * with the settings a live target has (a target that is not live: the engine's defaults). */
static int64_t live_epoch(const tlc_daemon_t *d, const char *name);

/* A query of target `name`'s stored records in `range` (q->so and the moment's fields are the
 * caller's): the settings a live target has; `kept` holds the path of its kept mapping. */
static void query_of(tlc_daemon_t *d, const char *name, const tlc_when_range_t *range,
                     tlc_hist_query_t *q, char *kept, size_t keptlen) {
  const tlc_target_t *t;
  snprintf(kept, keptlen, "%s/%s/%s", d->in.cfg.state_dir, name, TLC_MAP_NAME);
  q->state_dir = d->in.cfg.state_dir;
  q->target = name;
  q->range = *range;
  q->live_epoch = live_epoch(d, name);
  q->now_ns = tlc_when_now();
  if ((t = tlc_targets_find(&d->in.targets, name)) != NULL) {
    tlc_pipeline_conf_t pc;
    tlc_target_pipeline_conf(&t->conf, &pc);
    q->eo = pc.engine;
    q->evopts = pc.evmap;
    q->mapping_path = t->conf.mapping_path;
    if (t->map_origin == TLC_MAP_RUNTIME || t->map_origin == TLC_MAP_RESTORED)
      q->mapping_path = kept; /* the names the live target shows */
  } else {
    tlc_engine_opts_default(&q->eo);
    if (access(kept, F_OK) == 0)
      q->mapping_path = kept;
  }
}

int tlc_stored_around(void *ud, const char *name, const tlc_moment_t *mo, int export_, size_t max,
                      const tlc_hist_answer_t *ans, void (*done)(void *, tlc_hist_result_t *),
                      void *done_ud, void **job) {
  tlc_daemon_t *d = ud;
  tlc_hist_query_t q;
  tlc_histq_job_t *j = NULL;
  char kept[1200];
  int r;
  *job = NULL;
  if (d->histq == NULL || !name_ok(name) || export_ < TLC_MOMENT_TEXT1 ||
      export_ > TLC_MOMENT_EVLOG)
    return TLC_EINVAL;
  memset(&q, 0, sizeof(q));
  query_of(d, name, &mo->range, &q, kept, sizeof(kept));
  q.so.neutral = 1;
  q.so.quantiles = 1;
  q.moment_export = export_;
  q.moment = *mo;
  q.moment_max = max;
  r = tlc_histq_submit(d->histq, &q, ans, done, done_ud, &j);
  if (r == 0)
    *job = j;
  return r;
}

int tlc_stored_history(void *ud, const char *name, const tlc_when_range_t *range,
                       const tlc_snap_opts_t *so, const tlc_hist_answer_t *ans,
                       void (*done)(void *, tlc_hist_result_t *), void *done_ud, void **job) {
  tlc_daemon_t *d = ud;
  tlc_hist_query_t q;
  tlc_histq_job_t *j = NULL;
  char kept[1200]; /* the mapping `tlcap mapping` loaded, kept in the state directory */
  int r;
  *job = NULL;
  if (d->histq == NULL || !name_ok(name))
    return TLC_EINVAL;
  memset(&q, 0, sizeof(q));
  query_of(d, name, range, &q, kept, sizeof(kept));
  q.so = *so;
  r = tlc_histq_submit(d->histq, &q, ans, done, done_ud, &j);
  if (r == 0)
    *job = j;
  return r;
}

void tlc_stored_history_cancel(void *ud, void *job) {
  (void)ud;
  tlc_histq_cancel(job);
}

/* The clock epoch of each listed segment (o[0..k), oldest first; store/seg/epochs.h), numbered
 * so that the newest is the live target's current epoch (its clock_resets), or from 0 when it
 * is not in the table (segments that retention removed may have held earlier epochs). */
/* The clock restart threshold of target `name` (1 s when it is not in the table). */
static int64_t reset_ns(const tlc_daemon_t *d, const char *name) {
  const tlc_target_t *tg = tlc_targets_find(&d->in.targets, name);
  return tg != NULL && tg->conf.clock_reset_ns != 0 ? tg->conf.clock_reset_ns : 1000000000;
}

/* The live target's current epoch (its clock_resets), -1 when it is not in the table. */
static int64_t live_epoch(const tlc_daemon_t *d, const char *name) {
  const tlc_target_t *tg = tlc_targets_find(&d->in.targets, name);
  if (tg == NULL || tg->pipe.engine == NULL)
    return -1;
  return (int64_t)tlc_engine_counters(tg->pipe.engine)->clock_resets;
}

static void seg_epochs(tlc_daemon_t *d, const char *name, tlc_view_segment_t *o, size_t k) {
  tlc_seg_epoch_in_t *in = k > 0 ? tlc_calloc(k, sizeof(*in)) : NULL;
  uint64_t *ep = k > 0 ? tlc_calloc(k, sizeof(*ep)) : NULL;
  uint64_t newest, shift;
  if (in == NULL || ep == NULL)
    goto done; /* out of memory: every epoch 0 */
  for (size_t i = 0; i < k; i++) {
    in[i].reason = o[i].reason;
    in[i].state = o[i].state;
    in[i].records = o[i].records;
    in[i].first_time = o[i].first_time;
    in[i].max_time = o[i].max_time;
  }
  newest = tlc_seg_epochs(in, k, reset_ns(d, name), ep);
  shift = tlc_seg_epoch_shift(newest, live_epoch(d, name));
  for (size_t i = 0; i < k; i++)
    o[i].epoch = ep[i] + shift;
done:
  tlc_free(in);
  tlc_free(ep);
}

/* ListSegments: the target's segments on disk with their manifests' spans, each opened for
 * its figures. A segment the sealer renames (`.part` -> sealed -> `.zst`) between the
 * directory read and the open is found by listing once more (`tlcap rotate` waits for that
 * very rename); only one gone for good (retention) or unreadable is left out. */
#define ST_SEGMENTS_TRIES 4

/* Fills *x with segment e's figures (its manifest's, opened now); `open_seq` is the target's
 * open segment (any other .part is closed and waits for its seal). 0, or not 0: the file moved
 * (renamed by the sealer, deleted by retention) or is unreadable. */
static int segment_entry(const tlc_segent_t *e, uint64_t open_seq, tlc_view_segment_t *x) {
  tlc_segread_t *sr;
  tlc_seginfo_t info;
  char err[200];
  int sealed;
  if (tlc_segread_open(e->path, TLC_FMT_NONE, 0, &sr, err, sizeof(err)) != 0)
    return 1;
  tlc_segread_info(sr, &info);
  tlc_segread_close(sr);
  x->seq = e->seq;
  x->state = e->state == TLC_SEGST_OPEN && e->seq != open_seq ? TLC_SEGST_SEALING : e->state;
  snprintf(x->path, sizeof(x->path), "%s", e->path);
  x->bytes = info.bytes;
  x->records = info.records;
  x->items = info.items;
  x->gaps = info.ngaps;
  x->first_time = info.first_time;
  x->last_time = info.last_time;
  x->min_time = info.min_time;
  x->max_time = info.max_time;
  x->opened_wall_ns = info.opened_wall_ns;
  if (x->opened_wall_ns == 0) /* an open segment: its name's <UTC start> (seconds) */
    x->opened_wall_ns = tlc_hist_name_time(e->path);
  sealed = x->state == TLC_SEGST_SEALED || x->state == TLC_SEGST_COMPRESSED;
  x->closed_wall_ns = sealed ? info.closed_wall_ns : 0; /* else no manifest yet */
  x->reason = sealed ? info.reason : 0;
  x->recovered = info.recovered;
  return 0;
}

/* The sequence of target `name`'s open segment (the sealer runs in the background,
 * docs/storage.md), 0 when none is open. */
static uint64_t open_segment(const tlc_daemon_t *d, const char *name) {
  tlc_target_t *tg = tlc_targets_find(&d->in.targets, name);
  tlc_store_target_counters_t tc;
  if (tg == NULL || tlc_stpol_target(tg) == NULL)
    return 0;
  tlc_store_target_counters(tlc_stpol_target(tg), &tc);
  return tc.segment_seq;
}

int tlc_stored_segments(void *ud, const char *name, size_t max, tlc_view_segment_t **out, size_t *n,
                        int *truncated) {
  tlc_daemon_t *d = ud;
  tlc_segent_t *v = NULL;
  tlc_view_segment_t *o = NULL;
  size_t nv = 0, k = 0;
  int r;
  *out = NULL;
  *n = 0;
  *truncated = 0;
  if (!name_ok(name))
    return TLC_EINVAL;
  for (int attempt = 1;; attempt++) {
    int moved = 0;
    uint64_t open_seq = open_segment(d, name);
    r = tlc_segread_list(d->in.cfg.state_dir, name, max + 1, &v, &nv);
    if (r == -ENOENT)
      return tlc_targets_find(&d->in.targets, name) != NULL ? 0 : TLC_EINVAL;
    if (r != 0)
      return r;
    *truncated = 0;
    if (nv > max) { /* the oldest left out */
      memmove(v, v + 1, (nv - 1) * sizeof(*v));
      nv--;
      *truncated = 1;
    }
    o = nv > 0 ? tlc_calloc(nv, sizeof(*o)) : NULL;
    if (nv > 0 && o == NULL) {
      tlc_free(v);
      return TLC_ENOMEM;
    }
    k = 0;
    for (size_t i = 0; i < nv; i++) {
      if (segment_entry(&v[i], open_seq, &o[k]) != 0)
        moved = 1;
      else
        k++;
    }
    tlc_free(v);
    v = NULL;
    if (!moved || attempt == ST_SEGMENTS_TRIES)
      break;
    tlc_free(o);
    o = NULL;
  }
  if (k == 0) {
    tlc_free(o);
    o = NULL;
  }
  seg_epochs(d, name, o, k);
  *out = o;
  *n = k;
  return 0;
}

int tlc_stored_barrier(void *ud, void (*cb)(void *), void *cb_ud) {
  tlc_daemon_t *d = ud;
  if (d->store == NULL)
    return TLC_EINVAL;
  return tlc_store_barrier_written(d->store, cb, cb_ud);
}

/* ---- the store's figures ---- */

void tlc_stored_target(void *ud, size_t index, tlc_view_store_t *out) {
  tlc_daemon_t *d = ud;
  tlc_store_target_t *h;
  tlc_store_target_counters_t c;
  memset(out, 0, sizeof(*out));
  if (d->store == NULL || index >= d->in.targets.n)
    return;
  /* on disk: its sealed segments (the catalog: found at start, so a restart keeps them) and
   * its open one; the same figures the daemon's on_disk_* add up */
  tlc_store_target_stored(d->store, d->in.targets.v[index]->name, &out->disk_bytes,
                          &out->disk_segments);
  if ((h = tlc_stpol_target(d->in.targets.v[index])) == NULL) {
    out->has = out->disk_segments > 0; /* not stored now, but segments of it are */
    return;
  }
  tlc_store_target_counters(h, &c);
  out->has = 1;
  out->bytes_written = c.bytes_written;
  out->records_written = c.records_written;
  out->dropped_records = c.dropped_records;
  out->segment_seq = c.segment_seq;
  out->segment_bytes = c.segment_bytes;
  if (c.segment_seq != 0) {
    out->disk_bytes += c.segment_bytes;
    out->disk_segments++;
  }
}

/* Records storage dropped: its queue full, the disk full, an I/O error. */
static uint64_t dropped(const tlc_store_counters_t *c) {
  return c->dropped_buffer_full_records + c->dropped_disk_full_records +
         c->dropped_io_error_records;
}

void tlc_stored_daemon_info(const tlc_daemon_t *d, tlc_view_daemon_t *out) {
  struct statvfs sv;
  if (d->store != NULL) {
    tlc_store_counters_t c;
    tlc_store_counters(d->store, &c);
    out->has_store = 1;
    out->store_queue_bytes = c.queue_bytes;
    out->store_bytes_written = c.bytes_written;
    out->store_dropped = dropped(&c);
    out->stored_bytes = c.stored_bytes;
    out->stored_segments = c.stored_segments;
    out->disk_full = c.disk_full;
    /* what is on disk: the sealed segments and the open one of each target (the sum of the
     * targets' disk_bytes, plus the segments of targets not in the table) */
    out->on_disk_bytes = c.stored_bytes;
    out->on_disk_segments = c.stored_segments;
    for (size_t i = 0; i < d->in.targets.n; i++) {
      tlc_store_target_t *h = tlc_stpol_target(d->in.targets.v[i]);
      tlc_store_target_counters_t tc;
      if (h == NULL)
        continue;
      tlc_store_target_counters(h, &tc);
      if (tc.segment_seq != 0) {
        out->on_disk_bytes += tc.segment_bytes;
        out->on_disk_segments++;
      }
    }
  }
  /* one statvfs(2) per scrape or live message: microseconds, on the loop */
  if (d->in.cfg.store && statvfs(d->in.cfg.state_dir, &sv) == 0) {
    out->has_disk_free = 1;
    out->disk_free_bytes = (uint64_t)sv.f_bavail * (uint64_t)sv.f_frsize;
  }
}

void tlc_stored_status(const tlc_daemon_t *d, char *buf, size_t len) {
  size_t n = strlen(buf);
  tlc_store_counters_t s;
  if (d->store == NULL || n >= len)
    return;
  tlc_store_counters(d->store, &s);
  snprintf(buf + n, len - n, " stored=%llu store_dropped=%llu%s",
           (unsigned long long)s.records_written, (unsigned long long)dropped(&s),
           s.disk_full ? " DEGRADED(disk full)" : "");
}

void tlc_stored_dump(const tlc_daemon_t *d, tlc_json_w_t *j) {
  tlc_store_counters_t c;
  if (d->store == NULL)
    return;
  /* a half-closed target is answered once its bytes are written, before the seals */
  tlc_store_counters(d->store, &c);
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
