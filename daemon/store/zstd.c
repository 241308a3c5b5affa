/* zstd.c - compression of sealed segments in the threadpool (zstd) (see the design note in
 * store.c).
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

/* ---- compression (threadpool) ---- */

typedef struct zjob {
  uv_work_t req;
  tlc_store_t *s;
  char target[TLC_TARGET_NAME_MAX_ + 1];
  uint64_t seq;
  char path[1200]; /* data file */
  int rc;
  int skipped;
  int oldest; /* its target's lowest sequence when done: retention may go on (retention.c) */
} zjob_t;

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

static void z_work(uv_work_t *req) {
  zjob_t *j = req->data;
  tlc_store_t *s = j->s;
  char zpart[1300], zst[1300], dir[1200];
  uv_mutex_lock(&s->cat.mu);
  tlc_catent_t *e = tlc__store_cat_find(&s->cat, j->target, j->seq);
  if (e && !e->compressed && !e->busy)
    e->busy = 1;
  else
    j->skipped = 1;
  uv_mutex_unlock(&s->cat.mu);
  if (j->skipped)
    return;
  snprintf(zpart, sizeof zpart, "%s.zst.part", j->path);
  snprintf(zst, sizeof zst, "%s.zst", j->path);
  snprintf(dir, sizeof dir, "%s", j->path);
  char *sl = strrchr(dir, '/');
  if (sl)
    *sl = 0;
  j->rc = compress_file(j->path, zpart, s->o.compress_level);
  if (j->rc == 0)
    j->rc = tlc_io->rename(zpart, zst);
  if (j->rc == 0) {
    tlc_io_fsync_dir(dir);
    tlc_io->unlink(j->path);
    tlc_io_fsync_dir(dir);
  } else {
    tlc_io->unlink(zpart);
  }
  uv_mutex_lock(&s->cat.mu);
  e = tlc__store_cat_find(&s->cat, j->target, j->seq);
  if (e) {
    e->busy = 0;
    j->oldest = tlc__catalog_is_oldest(&s->cat, e);
    if (j->rc == 0) {
      e->compressed = 1;
      e->bytes = tlc__segment_disk_bytes(dir, e->base, e->data);
    }
  }
  uv_mutex_unlock(&s->cat.mu);
}

static void z_after(uv_work_t *req, int status) {
  zjob_t *j = req->data;
  tlc_store_t *s = j->s;
  s->lp.inflight--;
  if (!j->skipped && status == 0) {
    if (j->rc == 0) {
      char zst[1300];
      snprintf(zst, sizeof zst, "%s.zst", j->path);
      LOCKED(s, s->c.compressed++);
      if (s->o.event_cb) {
        tlc_store_event_t ev = { TLC_SEV_COMPRESSED, j->target, zst, 0, j->seq };
        s->o.event_cb(s->o.event_ud, &ev);
      }
    } else {
      LOCKED(s, s->c.compress_errors++);
      tlc__store_log_direct(s, TLC_LOG_WARN, "%s: cannot compress %s: %s (kept uncompressed)",
                            j->target, j->path, tlc_strerror(j->rc));
    }
  }
  sjob_t *rj = j->oldest && !s->lp.closing ? tlc_calloc(1, sizeof *rj) : NULL;
  if (rj) { /* it held its target's retention back while busy (retention.c) */
    rj->kind = J_RETAIN;
    tlc__store_push_job(s, rj);
  }
  tlc_free(j);
  if (s->lp.closing) /* the async callback finishes the close once nothing is in flight */
    uv_async_send(&s->async);
}

void tlc__store_start_compress(tlc_store_t *s, const res_t *r) {
  zjob_t *j = tlc_calloc(1, sizeof *j);
  if (!j)
    return;
  j->s = s;
  j->req.data = j;
  j->seq = r->seq;
  snprintf(j->target, sizeof j->target, "%s", r->target);
  snprintf(j->path, sizeof j->path, "%s", r->path);
  if (uv_queue_work(s->loop, &j->req, z_work, z_after) < 0) {
    tlc_free(j);
    return;
  }
  s->lp.inflight++;
}
