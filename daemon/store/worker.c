/* worker.c - the storage module's post-seal worker: one job queue of segments to finish (seal,
 * main export, compression, in that order per segment), taken by two threads, the seal lane and
 * the export lane; and the exports or manifests left for when space returns (see the design
 * note in store.c).
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
 * Either lane (or the recovering thread before they start). Returns 1 when nothing
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

/* seal lane: writes what the kept entries need, oldest first, until the file system is still
 * full */
static void pend_retry(tlc_store_t *s) {
  pend_t *p;
  while ((p = TAILQ_FIRST(&s->wk.pend)) != NULL) {
    if (!tlc__store_pend_try(s, p))
      return; /* still full: later */
    TAILQ_REMOVE(&s->wk.pend, p, link);
    s->wk.npend--;
    tlc__store_pend_free(s, p);
  }
}

/* seal lane: keeps p to write when space returns (at most PEND_MAX; the rest waits for the next
 * start) */
void tlc__store_pend_keep(tlc_store_t *s, pend_t *p) {
  if (s->wk.npend >= PEND_MAX) {
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
  TAILQ_INSERT_TAIL(&s->wk.pend, p, link);
  s->wk.npend++;
}

/* ---- the job queue and its three lanes ----
 *
 * A bin1x segment's main export is a whole engine pass over the segment, which it reads back:
 * about a third of what storage costs in CPU, and memory traffic that slows the loop's engine
 * even from another core. Written at the seal, before the manifest, it would compete with
 * ingest at the moment a burst needs the machine most. So a segment's job goes through the one
 * queue in stages, each taken by its lane (a thread) in queue order: the seal lane seals it
 * without its export (fdatasync, manifest, rename) and passes it on; the export lane waits for
 * a burst being ingested to pass (x_burst), writes the export with the manifest rewritten to
 * name it (tlc__store_pend_try, the path of an export written late for lack of space) and passes
 * it on; the compress lane compresses it (held back until then: the export reads the plain
 * file). A segment without an export to write goes from the seal straight to its compression.
 * The stages of a segment keep their order because its job is one; a compression never waits
 * behind another segment's export held back by a burst.
 *
 * Bounds: the seal lane takes at most max_sealing seal jobs from the writer (the writer waits
 * for room); one export at a time, on the export lane (an export's engine and table are the
 * largest transient memory storage has); at most EXPORT_QUEUE_MAX wait for it: with that many
 * it no longer waits for a burst, and the seal lane waits for room before it passes another on
 * (so under a burst that lasts, exports keep pace with seals; the lanes keep the normal
 * priority, so nothing waits on a starved thread); one compression at a time. A barrier waits
 * for every export passed on before it (xhurry: no waiting for a burst), not for compressions;
 * at shutdown each lane finishes every job it holds before it exits, in stage order. */

/* with mu held: the first job at `stage` */
static sjob_t *jq_first(tlc_store_t *s, int stage) {
  sjob_t *j;
  TAILQ_FOREACH(j, &s->jq, link) {
    if (j->stage == stage)
      return j;
  }
  return NULL;
}

/* with mu held: exports passed to the export lane and not written yet */
static void x_count(tlc_store_t *s) {
  s->c.export_queue = s->nx + (uint64_t)s->xbusy;
}

/* with mu held: j, done with its seal (and export), goes on to its compression, or leaves the
 * queue (1: the caller frees it) */
static int j_next_compress(tlc_store_t *s, sjob_t *j) {
  if (j->zpath[0] && s->zthr_started) {
    j->stage = ST_COMPRESS;
    s->nz++;
    uv_cond_signal(&s->zcv);
    return 0;
  }
  TAILQ_REMOVE(&s->jq, j, link);
  return 1;
}

static void job_free(tlc_store_t *s, sjob_t *j) {
  if (j->kind == J_SEAL && j->stage == ST_SEAL) /* never sealed (the lanes never ran) */
    tlc__seg_fini(&j->seg);
  tlc__store_tmap_unref(s, j->map);
  if (j->p)
    tlc__store_pend_free(s, j->p);
  tlc_free(j->res);
  tlc_free(j);
}

/* export lane: writes j's deferred export (j->p). Then its compression; or, the file system
 * full, back to the seal lane, which keeps what waits for space. */
static void x_write(tlc_store_t *s, sjob_t *j) {
  pend_t *p = j->p;
  if (tlc__store_pend_try(s, p)) {
    tlc__store_pend_free(s, p);
    j->p = NULL;
    uv_mutex_lock(&s->mu);
    int done = j_next_compress(s, j);
    uv_mutex_unlock(&s->mu);
    if (done)
      job_free(s, j);
    return;
  }
  p->deferred = 0; /* from now on late for lack of space, like one the seal left out */
  j->zpath[0] = 0; /* not compressed now: the next start compresses it */
  uv_mutex_lock(&s->mu);
  TAILQ_REMOVE(&s->jq, j, link);
  j->kind = J_EXPORT;
  j->stage = ST_SEAL;
  TAILQ_INSERT_TAIL(&s->jq, j, link);
  s->nseal++;
  uv_cond_signal(&s->scv);
  uv_mutex_unlock(&s->mu);
}

static int compress_file(const char *src, const char *dst, int level) {
  int in = tlc_io->open(src, O_RDONLY | O_NOFOLLOW | O_CLOEXEC, 0);
  if (in < 0)
    return in;
  struct stat st;
  if (fstat(in, &st) < 0) {
    tlc_io->close(in);
    return -errno;
  }
  int out = tlc_io->open(dst, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (out < 0) {
    tlc_io->close(in);
    return out;
  }
  ZSTD_CCtx *cc = ZSTD_createCCtx();
  size_t ibs = ZSTD_CStreamInSize(), obs = ZSTD_CStreamOutSize();
  uint8_t *ib = tlc_malloc(ibs), *ob = tlc_malloc(obs);
  int rc = 0;
  if (!cc || !ib || !ob) {
    rc = TLC_ENOMEM;
    goto done;
  }
  ZSTD_CCtx_setParameter(cc, ZSTD_c_compressionLevel, level);
  ZSTD_CCtx_setParameter(cc, ZSTD_c_checksumFlag, 1);
  ZSTD_CCtx_setPledgedSrcSize(cc, (unsigned long long)st.st_size);
  int64_t off = 0;
  for (;;) {
    int64_t n = tlc_io_pread_all(in, ib, ibs, off);
    if (n < 0) {
      rc = (int)n;
      break;
    }
    off += n;
    int last = (size_t)n < ibs;
    ZSTD_inBuffer zin = { ib, (size_t)n, 0 };
    int finished = 0;
    while (!finished) {
      ZSTD_outBuffer zout = { ob, obs, 0 };
      size_t rem = ZSTD_compressStream2(cc, &zout, &zin, last ? ZSTD_e_end : ZSTD_e_continue);
      if (ZSTD_isError(rem)) {
        rc = TLC_EIO;
        break;
      }
      size_t w;
      rc = tlc_io_write_all(out, ob, zout.pos, &w);
      if (rc < 0)
        break;
      finished = last ? rem == 0 : zin.pos == zin.size;
    }
    if (rc < 0 || last)
      break;
  }
  if (rc == 0 && off != (int64_t)st.st_size)
    rc = TLC_EIO; /* the file changed under us: not ours to compress */
  if (rc == 0)
    rc = tlc_io->fsync(out);
done:
  ZSTD_freeCCtx(cc);
  tlc_free(ib);
  tlc_free(ob);
  tlc_io->close(out);
  tlc_io->close(in);
  return rc;
}

/* compress lane: compresses j's segment (j->zpath) into <data>.zst, then reports it; a segment
 * being deleted or written late meanwhile (busy) is left alone */
static void z_run(tlc_store_t *s, sjob_t *j) {
  char zpart[1300], zst[1300], dir[1200];
  int rc, oldest = 0, skipped = 0;
  uv_mutex_lock(&s->cat.mu);
  tlc_catent_t *e = tlc__store_cat_find(&s->cat, j->ztarget, j->zseq);
  if (e && !e->compressed && !e->busy)
    e->busy = 1;
  else
    skipped = 1;
  uv_mutex_unlock(&s->cat.mu);
  if (skipped)
    return;
  snprintf(zpart, sizeof zpart, "%s.zst.part", j->zpath);
  snprintf(zst, sizeof zst, "%s.zst", j->zpath);
  snprintf(dir, sizeof dir, "%s", j->zpath);
  char *sl = strrchr(dir, '/');
  if (sl)
    *sl = 0;
  rc = compress_file(j->zpath, zpart, s->o.compress_level);
  if (rc == 0)
    rc = tlc_io->rename(zpart, zst);
  if (rc == 0) {
    tlc_io_fsync_dir(dir);
    tlc_io->unlink(j->zpath);
    tlc_io_fsync_dir(dir);
  } else {
    tlc_io->unlink(zpart);
  }
  uv_mutex_lock(&s->cat.mu);
  e = tlc__store_cat_find(&s->cat, j->ztarget, j->zseq);
  if (e) {
    e->busy = 0;
    oldest = tlc__catalog_is_oldest(&s->cat, e);
    if (rc == 0) {
      e->compressed = 1;
      e->bytes = tlc__segment_disk_bytes(dir, e->base, e->data);
    }
  }
  uv_mutex_unlock(&s->cat.mu);
  if (rc == 0) {
    LOCKED(s, s->c.compressed++);
    tlc__store_wevent(s, TLC_SEV_COMPRESSED, j->ztarget, zst, 0, j->zseq);
  } else {
    LOCKED(s, s->c.compress_errors++);
    tlc__store_wlog(s, TLC_LOG_WARN, "%s: cannot compress %s: %s (kept uncompressed)", j->ztarget,
                    j->zpath, tlc_strerror(rc));
  }
  int stopping;
  LOCKED(s, stopping = s->zstop);
  if (oldest && !stopping) /* it held its target's retention back while busy (retention.c) */
    tlc__store_retention_pass(s);
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

static void export_lane_main(void *arg) {
  tlc_store_t *s = arg;
  uv_mutex_lock(&s->mu);
  for (;;) {
    while (s->nx == 0 && !s->xstop)
      uv_cond_wait(&s->xcv, &s->mu);
    if (s->nx == 0)
      break; /* stopped, nothing left */
    /* not during a burst, unless full, hurried by a barrier, or stopping */
    if (s->nx < EXPORT_QUEUE_MAX && !s->xhurry && !s->xstop && x_burst(s))
      continue;
    sjob_t *j = jq_first(s, ST_EXPORT);
    j->stage = ST_BUSY;
    s->nx--;
    s->xbusy = 1;
    uv_cond_broadcast(&s->xcv); /* room for the seal lane */
    uv_mutex_unlock(&s->mu);
    x_write(s, j);
    uv_mutex_lock(&s->mu);
    s->xbusy = 0;
    x_count(s);
    uv_cond_broadcast(&s->xcv); /* a barrier waiting */
  }
  uv_mutex_unlock(&s->mu);
}

static void compress_lane_main(void *arg) {
  tlc_store_t *s = arg;
  uv_mutex_lock(&s->mu);
  for (;;) {
    while (s->nz == 0 && !s->zstop)
      uv_cond_wait(&s->zcv, &s->mu);
    if (s->nz == 0)
      break; /* stopped, nothing left */
    sjob_t *j = jq_first(s, ST_COMPRESS);
    j->stage = ST_BUSY;
    s->nz--;
    uv_mutex_unlock(&s->mu);
    z_run(s, j);
    uv_mutex_lock(&s->mu);
    TAILQ_REMOVE(&s->jq, j, link);
    uv_mutex_unlock(&s->mu);
    job_free(s, j);
    uv_mutex_lock(&s->mu);
  }
  uv_mutex_unlock(&s->mu);
}

/* Seals one closed segment: segment.c's seal (fdatasync, main export unless the export lane
 * writes it after, manifest, rename), then the catalog, counters, events and a retention pass.
 * Touches no target: `seg` carries its names. */
void tlc__store_seal_now(tlc_store_t *s, tlc_seg_t *seg, int reason, int64_t wall_ns, tmap_t *map,
                         const tlc_store_tconf_t *tc, sjob_t *j) {
  tlc_catent_t ent;
  char path[1200];
  tlc_exset_t ex = { map ? &map->m : NULL, tc->has_context_area, tc->context_area, tc->pack };
  pend_t *seal_keep = NULL, *xp = NULL;
  int xon;
  LOCKED(s, xon = s->xthr_started && !s->xstop);
  xon = xon && j != NULL;
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
  tlc__store_wevent(s, TLC_SEV_SEALED, seg->target, path, reason, seg->seq);
  if (j && s->o.compress) { /* after its export, if any: the export reads the plain file */
    snprintf(j->ztarget, sizeof j->ztarget, "%s", seg->target);
    j->zseq = seg->seq;
    snprintf(j->zpath, sizeof j->zpath, "%s", path);
  }
  if (j)
    j->p = xp; /* its export, for the export lane (catalogued first: it pins it) */
  if (seal_keep)
    tlc__store_pend_keep(s, seal_keep);
  tlc__store_retention_pass(s);
}

void tlc__store_push_job(tlc_store_t *s, sjob_t *j) {
  uv_mutex_lock(&s->mu);
  j->stage = ST_SEAL;
  TAILQ_INSERT_TAIL(&s->jq, j, link);
  s->nseal++;
  if (j->kind == J_SEAL) {
    s->sealing++;
    s->c.seal_queue = s->sealing;
  }
  uv_cond_signal(&s->scv);
  uv_mutex_unlock(&s->mu);
}

int tlc__store_queue_compress(tlc_store_t *s, const char *target, uint64_t seq, const char *path) {
  sjob_t *j = tlc_calloc(1, sizeof *j);
  if (!j)
    return TLC_ENOMEM;
  j->kind = J_COMPRESS;
  j->stage = ST_COMPRESS;
  snprintf(j->ztarget, sizeof j->ztarget, "%s", target);
  j->zseq = seq;
  snprintf(j->zpath, sizeof j->zpath, "%s", path);
  LOCKED(s, TAILQ_INSERT_TAIL(&s->jq, j, link); s->nz++);
  return 0;
}

/* seal lane, with mu held: a sealed segment's job goes on to the export lane (its deferred
 * export, once there is room; or its compression), or leaves the queue (1: the caller frees
 * it) */
static int j_sealed(tlc_store_t *s, sjob_t *j) {
  if (!j->p)
    return j_next_compress(s, j);
  while (s->nx >= EXPORT_QUEUE_MAX)
    uv_cond_wait(&s->xcv, &s->mu); /* the export lane, full, writes without waiting */
  j->stage = ST_EXPORT;
  s->nx++;
  s->c.exports_background++;
  x_count(s);
  uv_cond_broadcast(&s->xcv);
  return 0;
}

/* One job on the seal lane: a seal, a barrier's answer, an export written late, or a retry of
 * what waits for space. */
static void run_job(tlc_store_t *s, sjob_t *j) {
  if (!TAILQ_EMPTY(&s->wk.pend))
    pend_retry(s);
  if (j->kind == J_SEAL) {
    tlc__store_seal_now(s, &j->seg, j->reason, j->wall_ns, j->map, &j->tc, j);
    tlc__seg_fini(&j->seg);
    tlc__store_tmap_unref(s, j->map);
    j->map = NULL;
  } else if (j->kind == J_BARRIER) {
    tlc__store_wait_exports(s); /* of the segments sealed before it */
    tlc__store_push_res(s, j->res);
    j->res = NULL;
  } else if (j->kind == J_EXPORT) {
    if (tlc__store_pend_try(s, j->p))
      tlc__store_pend_free(s, j->p);
    else
      tlc__store_pend_keep(s, j->p); /* the file system is full: when space returns */
    j->p = NULL;
  }
  uv_mutex_lock(&s->mu);
  int done = 1;
  if (j->kind == J_SEAL) {
    done = j_sealed(s, j);
    s->sealing--;
    s->c.seal_queue = s->sealing;
  } else {
    TAILQ_REMOVE(&s->jq, j, link);
  }
  uv_cond_signal(&s->cv); /* room for the writer */
  uv_mutex_unlock(&s->mu);
  if (done)
    tlc_free(j); /* J_SEAL's segment and names are released above */
}

/* with mu held: takes the seal lane's next job (NULL: none) */
static sjob_t *seal_take(tlc_store_t *s) {
  if (s->nseal == 0)
    return NULL;
  sjob_t *j = jq_first(s, ST_SEAL);
  j->stage = ST_BUSY;
  s->nseal--;
  return j;
}

static void seal_lane_main(void *arg) {
  tlc_store_t *s = arg;
  uv_mutex_lock(&s->mu);
  for (;;) {
    while (s->nseal == 0 && !s->sstop)
      uv_cond_wait(&s->scv, &s->mu);
    if (s->sstop)
      break; /* what is left is finished by tlc__store_stop_worker's caller */
    sjob_t *j = seal_take(s);
    uv_mutex_unlock(&s->mu);
    run_job(s, j);
    uv_mutex_lock(&s->mu);
  }
  uv_mutex_unlock(&s->mu);
}

/* runs the seal lane's jobs left in the queue on the calling thread */
static void run_left(tlc_store_t *s) {
  uv_mutex_lock(&s->mu);
  sjob_t *j;
  while ((j = seal_take(s)) != NULL) {
    uv_mutex_unlock(&s->mu);
    run_job(s, j);
    uv_mutex_lock(&s->mu);
  }
  uv_mutex_unlock(&s->mu);
}

int tlc__store_start_worker(tlc_store_t *s) {
  /* without the compress lane nothing is compressed (until a start where it runs); without the
   * export lane the seal lane writes every export at the seal */
  if (s->o.compress && uv_thread_create(&s->zthr, compress_lane_main, s) == 0)
    s->zthr_started = 1;
  if (s->o.export_cb && uv_thread_create(&s->xthr, export_lane_main, s) == 0)
    s->xthr_started = 1;
  int rc = uv_thread_create(&s->sthr, seal_lane_main, s);
  if (rc < 0) {
    tlc__store_stop_worker(s);
    return rc;
  }
  s->sthr_started = 1;
  return 0;
}

static void stop_export_lane(tlc_store_t *s) {
  if (!s->xthr_started)
    return;
  LOCKED(s, s->xstop = 1; uv_cond_broadcast(&s->xcv));
  uv_thread_join(&s->xthr);
  s->xthr_started = 0;
}

void tlc__store_stop_worker(tlc_store_t *s) {
  if (s->sthr_started) {
    LOCKED(s, s->sstop = 1; uv_cond_signal(&s->scv));
    uv_thread_join(&s->sthr);
    s->sthr_started = 0;
    run_left(s);
  }
  stop_export_lane(s);
  run_left(s);           /* what it handed back for space */
  if (s->zthr_started) { /* every compression asked for above is done first */
    LOCKED(s, s->zstop = 1; uv_cond_signal(&s->zcv));
    uv_thread_join(&s->zthr);
    s->zthr_started = 0;
  }
  if (!TAILQ_EMPTY(&s->wk.pend))
    pend_retry(s); /* a last try */
  pend_t *p;
  while ((p = TAILQ_FIRST(&s->wk.pend)) != NULL) {
    TAILQ_REMOVE(&s->wk.pend, p, link);
    tlc__store_wlog(s, TLC_LOG_WARN,
                    "%s: %s%s%s of %s not written (no space): done at the next start", p->target,
                    p->need_ex ? "main export" : "", p->need_ex && p->need_mf ? " and " : "",
                    p->need_mf ? "manifest" : "", p->data);
    tlc__store_pend_free(s, p);
  }
  s->wk.npend = 0;
}

void tlc__store_free_jobs(tlc_store_t *s) {
  sjob_t *j;
  while ((j = TAILQ_FIRST(&s->jq)) != NULL) {
    TAILQ_REMOVE(&s->jq, j, link);
    job_free(s, j);
  }
  pend_t *p;
  while ((p = TAILQ_FIRST(&s->wk.pend)) != NULL) {
    TAILQ_REMOVE(&s->wk.pend, p, link);
    tlc__store_pend_free(s, p);
  }
}
