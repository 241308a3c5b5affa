/* sealer.c - the storage module's sealer thread: seals segments in order, and exports or manifests
 * left for later (see the design note in store.c).
 */
#include "store/store.h"

#include "base/alloc.h"
#include "base/err.h"
#include "base/log_level.h"
#include "formats/bin1x.h"
#include "formats/dec.h"
#include "formats/evlog.h"
#include "store/seg/iofault.h"
#include "store/seg/segread.h"
#include "store/store-int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

tlc_catent_t *tlc__store_cat_find(tlc_catalog_t *c, const char *target, uint64_t seq) {
  for (size_t i = 0; i < c->n; i++)
    if (c->v[i].seq == seq && strcmp(c->v[i].target, target) == 0)
      return &c->v[i];
  return NULL;
}

/* Pins (on = 1) a catalogued segment against retention while its files are written late, or
 * unpins it and refreshes its size on disk; then *oldest (may be NULL) says whether it is its
 * target's lowest sequence, which held retention back (retention.c). Returns 1 when it is in
 * the catalog. */
static int cat_pin(tlc_store_t *s, const char *target, uint64_t seq, int on, int *oldest) {
  char dir[1200];
  uv_mutex_lock(&s->cat.mu);
  tlc_catent_t *e = tlc__store_cat_find(&s->cat, target, seq);
  if (e) {
    e->pinned = on;
    if (!on) {
      snprintf(dir, sizeof dir, "%s/%s", s->state_dir, e->target);
      e->bytes = tlc__segment_disk_bytes(dir, e->base, e->data);
    }
  }
  if (oldest)
    *oldest = e != NULL && tlc__catalog_is_oldest(&s->cat, e);
  uv_mutex_unlock(&s->cat.mu);
  return e != NULL;
}

/* Writes what p still needs: the main export (then named in the manifest), the manifest.
 * Sealer or exporter thread (or the recovering thread before they start). Returns 1 when nothing
 * is left to do (written; failed for another reason than space, logged and left to the next
 * start; or the segment is gone), 0 while the file system is full. */
int tlc__store_pend_try(tlc_store_t *s, pend_t *p) {
  char dir[1200], dpath[1400], zpath[1500], mpath[1400];
  struct stat st;
  int rc;
  snprintf(dir, sizeof dir, "%s/%s", s->state_dir, p->target);
  snprintf(dpath, sizeof dpath, "%s/%s", dir, p->data);
  snprintf(zpath, sizeof zpath, "%s.zst", dpath);
  snprintf(mpath, sizeof mpath, "%s/%s.manifest", dir, p->base);
  int pinned = cat_pin(s, p->target, p->seq, 1, NULL);
  int plain = lstat(dpath, &st) == 0;
  if (!plain && lstat(zpath, &st) != 0) {
    if (pinned) /* deleted by retention meanwhile: nothing to write */
      cat_pin(s, p->target, p->seq, 0, NULL);
    return 1;
  }
  int late_ex = 0; /* the manifest is rewritten to name an export written now */
  if (p->need_ex) {
    tlc_exset_t ex = { p->map ? &p->map->m : NULL, p->tc.has_context_area, p->tc.context_area,
                       p->tc.pack };
    rc = tlc__segment_write_export(dir, p->base, p->target, p->format, p->xml, p->seq,
                                   plain ? dpath : zpath, p->recovered, &ex, s->o.export_cb,
                                   s->o.export_ud);
    if (rc == -ENOENT && plain) /* compressed meanwhile: the .zst is complete before the unlink */
      rc = tlc__segment_write_export(dir, p->base, p->target, p->format, p->xml, p->seq, zpath,
                                     p->recovered, &ex, s->o.export_cb, s->o.export_ud);
    if (!tlc__store_is_nospace(rc)) {
      p->need_ex = 0;
      LOCKED(s, s->c.exports_pending--; s->c.exports_late += rc == 0 && !p->deferred);
      if (rc == 0) {
        /* named in the manifest: the kept one, or the one on disk (without a valid one, the
         * next start rebuilds it from the data, naming the export) */
        late_ex = !p->need_mf;
        if (p->need_mf || tlc__manifest_load(mpath, &p->m, NULL, 0) == 0) {
          p->need_mf = 1;
          snprintf(p->m.exportf, sizeof p->m.exportf, "%s%s", p->base, p->xml ? ".xml" : ".txt");
        }
        if (!p->deferred) /* a deferred one is the usual path: not worth a line */
          tlc__store_wlog(s, TLC_LOG_INFO, "%s: main export of %s/%s written%s", p->target, dir,
                          p->data,
                          p->map || p->tc.has_context_area ? " with the target's settings" : "");
      } else {
        tlc__store_wlog(s, TLC_LOG_WARN, "%s: main export of %s/%s: %s (written at the next start)",
                        p->target, dir, p->data, tlc_strerror(rc));
      }
    }
  }
  if (p->need_mf) {
    rc = tlc__manifest_store(mpath, &p->m);
    if (!tlc__store_is_nospace(rc)) {
      p->need_mf = 0;
      if (rc == 0 && !late_ex)
        tlc__store_wlog(s, TLC_LOG_NOTICE, "%s: manifest %s written now that space is back",
                        p->target, mpath);
      else if (rc < 0)
        tlc__store_wlog(s, TLC_LOG_WARN,
                        "%s: manifest %s: %s (rebuilt from the data at the next start)", p->target,
                        mpath, tlc_strerror(rc));
    }
  }
  if (pinned) {
    int oldest;
    cat_pin(s, p->target, p->seq, 0, &oldest);
    /* during recovery the catalog is not complete yet: its own pass comes after */
    if (oldest && s->retain_live)
      tlc__store_retention_pass(s);
    else
      tlc__store_update_stored(s);
  }
  return !p->need_ex && !p->need_mf;
}

/* sealer: writes what the kept entries need, oldest first, until the file system is still
 * full */
static void pend_retry(tlc_store_t *s) {
  while (s->sl.pend) {
    pend_t *p = s->sl.pend;
    if (!tlc__store_pend_try(s, p))
      return; /* still full: later */
    s->sl.pend = p->next;
    s->sl.npend--;
    tlc__store_pend_free(s, p);
  }
}

/* sealer: keeps p to write when space returns (at most PEND_MAX; the rest waits for the next
 * start) */
void tlc__store_pend_keep(tlc_store_t *s, pend_t *p) {
  if (s->sl.npend >= PEND_MAX) {
    tlc__store_wlog(
        s, TLC_LOG_WARN,
        "%s: %s%s%s of %s not written (no space, %d segments waiting already): done at the "
        "next start",
        p->target, p->need_ex ? "main export" : "", p->need_ex && p->need_mf ? " and " : "",
        p->need_mf ? "manifest" : "", p->data, PEND_MAX);
    tlc__store_pend_free(s, p);
    return;
  }
  /* appended: retried in the order they were kept */
  pend_t **pp = &s->sl.pend;
  while (*pp)
    pp = &(*pp)->next;
  p->next = NULL;
  *pp = p;
  s->sl.npend++;
}

/* ---- the exporter ----
 *
 * A bin1x segment's main export is a whole engine pass over the segment, which it reads back:
 * about a third of what storage costs in CPU, and memory traffic that slows the loop's engine
 * even from another core. Written at the seal, before the manifest, it competed with ingest at
 * the moment a burst needed the machine most. So the sealer seals without it (fdatasync,
 * manifest, rename, as before) and hands it to the exporter thread, which waits for a burst
 * being ingested to pass (x_burst) and writes it with the manifest rewritten to name it
 * (tlc__store_pend_try, the path of an export written late for lack of space), then asks for
 * the segment's compression (held back until then: the export reads the plain file).
 *
 * Bounds: one export at a time, on this one thread, as before on the sealer (an export's engine
 * and table are the largest transient memory storage has); at most EXPORT_QUEUE_MAX wait: with
 * that many the exporter no longer waits for a burst, and the sealer waits for room before it
 * hands over another (so under a burst that lasts, exports keep pace with seals as before; the
 * exporter keeps the normal priority, so nothing waits on a starved thread). A barrier waits for
 * every export queued before it (xhurry: no waiting for a burst); at shutdown the exporter writes
 * what is left before it exits. */

/* A job queue (the sealer's sh/st, the exporter's xh/xt), with mu held: appends j, or pops the
 * first job (NULL when empty). */
static void jq_append(sjob_t **h, sjob_t **t, sjob_t *j) {
  j->next = NULL;
  if (*t)
    (*t)->next = j;
  else
    *h = j;
  *t = j;
}
static sjob_t *jq_pop(sjob_t **h, sjob_t **t) {
  sjob_t *j = *h;
  if (j) {
    *h = j->next;
    if (!*h)
      *t = NULL;
  }
  return j;
}

/* with mu held: exports handed to the exporter and not written yet */
static void x_count(tlc_store_t *s) {
  s->c.export_queue = s->nx + (uint64_t)s->xbusy;
}

/* the segment's compression, held back at its seal for the export (zstd.c) */
static void x_compress(tlc_store_t *s, const pend_t *p) {
  res_t *r = s->o.compress ? tlc_calloc(1, sizeof *r) : NULL;
  if (!r)
    return; /* not compressed now: the next start compresses it */
  r->type = R_COMPRESS;
  r->seq = p->seq;
  snprintf(r->target, sizeof r->target, "%s", p->target);
  tlc__path(r->path, sizeof r->path, "%s/%s/%s", s->state_dir, p->target, p->data);
  tlc__store_push_res(s, r);
}

/* Writes one deferred export (p). When the file system is full it goes to the list kept for
 * when space returns: through the sealer's queue from the exporter thread (on_exporter), kept
 * here on the sealer, which owns that list. */
static void x_write(tlc_store_t *s, pend_t *p, int on_exporter) {
  if (tlc__store_pend_try(s, p)) {
    x_compress(s, p);
    tlc__store_pend_free(s, p);
    return;
  }
  p->deferred = 0; /* from now on late for lack of space, like one the seal left out */
  sjob_t *j = on_exporter ? tlc_calloc(1, sizeof *j) : NULL;
  if (j) {
    j->kind = J_EXPORT;
    j->p = p;
    tlc__store_push_job(s, j);
  } else if (on_exporter) {
    tlc__store_wlog(s, TLC_LOG_WARN,
                    "%s: main export of %s not written (no space, no memory): "
                    "done at the next start",
                    p->target, p->data);
    tlc__store_pend_free(s, p);
  } else {
    tlc__store_pend_keep(s, p);
  }
}

/* sealer: hands p (a sealed segment's export, want_export'ed) to the exporter, once it has room */
static void x_push(tlc_store_t *s, pend_t *p) {
  sjob_t *j = tlc_calloc(1, sizeof *j);
  if (!j) { /* no memory for a job: written here */
    x_write(s, p, 0);
    return;
  }
  j->kind = J_EXPORT;
  j->p = p;
  uv_mutex_lock(&s->mu);
  while (s->nx >= EXPORT_QUEUE_MAX)
    uv_cond_wait(&s->xcv, &s->mu); /* the exporter, full, writes without waiting */
  jq_append(&s->xh, &s->xt, j);
  s->nx++;
  s->c.exports_background++;
  x_count(s);
  uv_cond_broadcast(&s->xcv);
  uv_mutex_unlock(&s->mu);
}

void tlc__store_wait_exports(tlc_store_t *s) {
  uv_mutex_lock(&s->mu);
  s->xhurry++;
  uv_cond_broadcast(&s->xcv);
  while (s->xthr_started && (s->nx > 0 || s->xbusy))
    uv_cond_wait(&s->xcv, &s->mu);
  s->xhurry--;
  uv_mutex_unlock(&s->mu);
}

/* with mu held: waits EXPORT_WAIT_MS (less when signalled) and tells whether the store took
 * records in at EXPORT_BUSY_BPS or more meanwhile: a burst being ingested */
static int x_burst(tlc_store_t *s) {
  uint64_t in0 = s->c.bytes_in, t0 = uv_hrtime();
  (void)uv_cond_timedwait(&s->xcv, &s->mu, (uint64_t)EXPORT_WAIT_MS * 1000000u);
  uint64_t dt = uv_hrtime() - t0, d = s->c.bytes_in - in0;
  return dt > 0 && (double)d * 1e9 / (double)dt >= EXPORT_BUSY_BPS;
}

void tlc__store_exporter_main(void *arg) {
  tlc_store_t *s = arg;
  uv_mutex_lock(&s->mu);
  for (;;) {
    while (!s->xh && !s->xstop)
      uv_cond_wait(&s->xcv, &s->mu);
    if (!s->xh)
      break; /* stopped, nothing left */
    /* not during a burst, unless full, hurried by a barrier, or stopping */
    if (s->nx < EXPORT_QUEUE_MAX && !s->xhurry && !s->xstop && x_burst(s))
      continue;
    sjob_t *j = jq_pop(&s->xh, &s->xt);
    s->nx--;
    s->xbusy = 1;
    uv_cond_broadcast(&s->xcv); /* room for the sealer */
    uv_mutex_unlock(&s->mu);
    x_write(s, j->p, 1);
    tlc_free(j);
    uv_mutex_lock(&s->mu);
    s->xbusy = 0;
    x_count(s);
    uv_cond_broadcast(&s->xcv); /* a barrier waiting */
  }
  uv_mutex_unlock(&s->mu);
}

/* Seals one closed segment: segment.c's seal (fdatasync, main export unless the exporter writes
 * it after, manifest, rename), then the catalog, counters, events and a retention pass. Runs on the
 * sealer thread (on the writer only when a seal job cannot be allocated). Touches no target:
 * `seg` carries its names. */
void tlc__store_seal_now(tlc_store_t *s, tlc_seg_t *seg, int reason, int64_t wall_ns, tmap_t *map,
                         const tlc_store_tconf_t *tc) {
  tlc_catent_t ent;
  char path[1200];
  tlc_exset_t ex = { map ? &map->m : NULL, tc->has_context_area, tc->context_area, tc->pack };
  pend_t *seal_keep = NULL, *xp = NULL;
  int xon;
  LOCKED(s, xon = s->xthr_started && !s->xstop);
  int defer = seg->format != TLC_FMT_EVLOG && s->o.export_cb && seg->m.records > 0 && xon;
  int rc =
      tlc__seg_seal(seg, reason, wall_ns, &ex, defer ? NULL : s->o.export_cb, s->o.export_ud, &ent);
  snprintf(path, sizeof path, "%s/%s", seg->dir, seg->data);
  if (rc == 1)
    return; /* no record in it: removed */
  if (rc < 0) {
    /* could not rename: the .part stays and is recovered on the next start */
    if (seg->fd >= 0) {
      tlc_io->close(seg->fd);
      seg->fd = -1;
    }
    LOCKED(s, s->c.io_errors++);
    tlc__store_wlog(s, TLC_LOG_ERR, "%s: cannot seal %s.part: %s (left for recovery at next start)",
                    seg->target, path, tlc_strerror(rc));
    tlc__store_wevent(s, TLC_SEV_IO_ERROR, seg->target, path, 0, seg->seq);
    return;
  }
  int ex_full = tlc__store_is_nospace(seg->ex_err), mf_full = tlc__store_is_nospace(seg->mf_err);
  if (seg->ex_err < 0 && !ex_full)
    tlc__store_wlog(s, TLC_LOG_WARN, "%s: main export of %s: %s (written at the next start)",
                    seg->target, path, tlc_strerror(seg->ex_err));
  if (ex_full || mf_full) {
    tlc__store_wlog(s, TLC_LOG_WARN,
                    "%s: sealed %s without its %s (%s): written once space returns", seg->target,
                    path,
                    ex_full && mf_full ? "main export and manifest"
                    : ex_full          ? "main export"
                                       : "manifest",
                    tlc_strerror(ex_full ? seg->ex_err : seg->mf_err));
    pend_t *p =
        tlc__store_pend_new(seg->target, seg->base, seg->data, seg->format, seg->xml, seg->seq, 0);
    if (p) {
      if (mf_full) { /* its gaps count what was lost: keep it */
        p->need_mf = 1;
        p->m = seg->m; /* moved: seg gets a fresh one */
        tlc__manifest_init(&seg->m);
      }
      if (ex_full) {
        tlc__store_pend_want_export(s, p);
        p->map = tlc__store_tmap_ref(s, map);
        p->tc = *tc;
      }
    }
    seal_keep = p;
  }
  if (defer && seal_keep) { /* its manifest waits for space: the export waits with it */
    tlc__store_pend_want_export(s, seal_keep);
    seal_keep->map = tlc__store_tmap_ref(s, map);
    seal_keep->tc = *tc;
  } else if (defer) {
    xp = tlc__store_pend_new(seg->target, seg->base, seg->data, seg->format, seg->xml, seg->seq, 0);
    if (xp) {
      tlc__store_pend_want_export(s, xp);
      xp->deferred = 1;
      xp->map = tlc__store_tmap_ref(s, map);
      xp->tc = *tc;
    } else {
      tlc__store_wlog(s, TLC_LOG_WARN, "%s: main export of %s: %s (written at the next start)",
                      seg->target, path, tlc_strerror(TLC_ENOMEM));
    }
  }
  if (seg->seal_err < 0 && !tlc__store_is_nospace(seg->seal_err)) {
    LOCKED(s, s->c.io_errors++);
    tlc__store_wlog(s, TLC_LOG_ERR,
                    "%s: sealed %s with an error (%s): marked suspect or manifest left to rebuild",
                    seg->target, path, tlc_strerror(seg->seal_err));
  }
  tlc__catalog_add(&s->cat, &ent);
  LOCKED(s, s->c.segments_sealed++);
  if (xp) { /* compressed once its export is written (x_write): the export reads the plain file */
    tlc__store_wevent_plain(s, TLC_SEV_SEALED, seg->target, path, reason, seg->seq, 1);
    x_push(s, xp); /* catalogued first: the exporter pins it against retention */
  } else {
    tlc__store_wevent(s, TLC_SEV_SEALED, seg->target, path, reason, seg->seq);
  }
  if (seal_keep)
    tlc__store_pend_keep(s, seal_keep);
  tlc__store_retention_pass(s);
}

void tlc__store_push_job(tlc_store_t *s, sjob_t *j) {
  uv_mutex_lock(&s->mu);
  jq_append(&s->sh, &s->st, j);
  if (j->kind == J_SEAL) {
    s->sealing++;
    s->c.seal_queue = s->sealing;
  }
  uv_cond_signal(&s->scv);
  uv_mutex_unlock(&s->mu);
}

/* One job: a seal, a barrier's answer, or an export written late. */
static void run_job(tlc_store_t *s, sjob_t *j) {
  if (s->sl.pend)
    pend_retry(s);
  if (j->kind == J_SEAL) {
    tlc__store_seal_now(s, &j->seg, j->reason, j->wall_ns, j->map, &j->tc);
    tlc__seg_fini(&j->seg);
    tlc__store_tmap_unref(s, j->map);
  } else if (j->kind == J_BARRIER) {
    tlc__store_wait_exports(s); /* of the segments sealed before it */
    tlc__store_push_res(s, j->res);
  } else if (j->kind == J_RETAIN) {
    tlc__store_retention_pass(s);
  } else if (j->kind == J_EXPORT) {
    if (tlc__store_pend_try(s, j->p))
      tlc__store_pend_free(s, j->p);
    else
      tlc__store_pend_keep(s, j->p); /* the file system is full: when space returns */
  }
  uv_mutex_lock(&s->mu);
  if (j->kind == J_SEAL) {
    s->sealing--;
    s->c.seal_queue = s->sealing;
  }
  uv_cond_signal(&s->cv); /* room for the writer */
  uv_mutex_unlock(&s->mu);
  tlc_free(j);
}

void tlc__store_sealer_main(void *arg) {
  tlc_store_t *s = arg;
  uv_mutex_lock(&s->mu);
  for (;;) {
    while (!s->sh && !s->sstop)
      uv_cond_wait(&s->scv, &s->mu);
    if (s->sstop)
      break; /* what is left is finished by tlc__store_stop_sealer's caller */
    sjob_t *j = jq_pop(&s->sh, &s->st);
    uv_mutex_unlock(&s->mu);
    run_job(s, j);
    uv_mutex_lock(&s->mu);
  }
  uv_mutex_unlock(&s->mu);
}

/* runs the jobs left in the sealer's queue on the calling thread */
static void run_left(tlc_store_t *s) {
  uv_mutex_lock(&s->mu);
  sjob_t *j;
  while ((j = jq_pop(&s->sh, &s->st)) != NULL) {
    uv_mutex_unlock(&s->mu);
    run_job(s, j);
    uv_mutex_lock(&s->mu);
  }
  uv_mutex_unlock(&s->mu);
}

void tlc__store_stop_exporter(tlc_store_t *s) {
  if (!s->xthr_started)
    return;
  LOCKED(s, s->xstop = 1; uv_cond_broadcast(&s->xcv));
  uv_thread_join(&s->xthr);
  s->xthr_started = 0;
}

/* Stops the sealer thread after its current job, and the caller (the writer at shutdown, which
 * waits for this anyway) seals what is left, in order; then the exporter, once it has written
 * every export queued; then a last attempt at what waits for space. */
void tlc__store_stop_sealer(tlc_store_t *s) {
  if (!s->sthr_started)
    return;
  LOCKED(s, s->sstop = 1; uv_cond_signal(&s->scv));
  uv_thread_join(&s->sthr);
  s->sthr_started = 0;
  run_left(s);
  tlc__store_stop_exporter(s);
  run_left(s); /* what it handed back for space */
  if (s->sl.pend)
    pend_retry(s); /* a last try */
  while (s->sl.pend) {
    pend_t *p = s->sl.pend;
    s->sl.pend = p->next;
    tlc__store_wlog(s, TLC_LOG_WARN,
                    "%s: %s%s%s of %s not written (no space): done at the next start", p->target,
                    p->need_ex ? "main export" : "", p->need_ex && p->need_mf ? " and " : "",
                    p->need_mf ? "manifest" : "", p->data);
    tlc__store_pend_free(s, p);
  }
  s->sl.npend = 0;
}
