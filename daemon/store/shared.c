/* shared.c - what every thread of the store uses, owned by none: clocks, log lines and results
 * for the loop (pushed under the store's mutex, the loop woken by its async), the shared names
 * of the exports (tmap, reference-counted under the mutex), retention passes (serialised on the
 * catalog's mutex), directories and target names, the options' defaults and the records of
 * exports still to write (pend_t). The front (store.c), the writer and the post-seal worker
 * all call it; it calls none of them.
 */
#include "base/alloc.h"
#include "base/err.h"
#include "base/log_level.h"
#include "store/seg/iofault.h"
#include "store/store-int.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

int64_t tlc__store_wall(tlc_store_t *s) {
  return s->o.now_wall_ns ? s->o.now_wall_ns(s->o.clock_ud) : tlc__wall_ns();
}

int64_t tlc__store_mono(tlc_store_t *s) {
  return s->o.now_mono_ns ? s->o.now_mono_ns(s->o.clock_ud) : tlc__mono_ns();
}

void tlc__store_log_direct(tlc_store_t *s, int level, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (s->o.log_cb)
    s->o.log_cb(s->o.log_ud, level, msg);
  else
    fprintf(stderr, "store: %s\n", msg);
}

void tlc__store_push_res(tlc_store_t *s, res_t *r) {
  uv_mutex_lock(&s->mu);
  STAILQ_INSERT_TAIL(&s->res, r, link);
  uv_mutex_unlock(&s->mu);
  uv_async_send(&s->async);
}

/* writer thread: a log line for the loop. Allocation failure drops the line. */
void tlc__store_wlog(tlc_store_t *s, int level, const char *fmt, ...) {
  res_t *r = tlc_calloc(1, sizeof *r);
  if (!r)
    return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(r->msg, sizeof r->msg, fmt, ap);
  va_end(ap);
  r->type = R_LOG;
  r->level = level;
  tlc__store_push_res(s, r);
}

void tlc__store_wevent(tlc_store_t *s, int kind, const char *target, const char *path, int reason,
                       uint64_t seq) {
  res_t *r = tlc_calloc(1, sizeof *r);
  if (!r)
    return;
  r->type = R_EVENT;
  r->kind = kind;
  r->reason = reason;
  r->seq = seq;
  snprintf(r->target, sizeof r->target, "%s", target ? target : "");
  snprintf(r->path, sizeof r->path, "%s", path ? path : "");
  tlc__store_push_res(s, r);
}

void tlc__store_tmap_unref(tlc_store_t *s, tmap_t *m) {
  uint32_t left;
  if (!m)
    return;
  LOCKED(s, left = --m->refs);
  if (left == 0) {
    tlc_mapping_fini(&m->m);
    tlc_free(m);
  }
}

tmap_t *tlc__store_tmap_ref(tlc_store_t *s, tmap_t *m) {
  if (m)
    LOCKED(s, m->refs++);
  return m;
}

int tlc__store_is_nospace(int rc) {
  return rc == -ENOSPC || rc == -EDQUOT;
}

void tlc__store_w_deleted(void *ud, const tlc_catent_t *e) {
  tlc_store_t *s = ud;
  char p[1200];
  LOCKED(s, s->c.deletions++; s->c.deleted_bytes += e->bytes);
  snprintf(p, sizeof p, "%s/%s/%s", s->state_dir, e->target, e->data);
  tlc__store_wlog(s, TLC_LOG_INFO, "retention: deleted %s/%s (seq %" PRIu64 ", %" PRIu64 " bytes)",
                  e->target, e->data, e->seq, e->bytes);
  tlc__store_wevent(s, TLC_SEV_DELETED, e->target, p, 0, e->seq);
}

/* Budgets are read under mu: the writer changes them (C_RECONF) while the worker may run a
 * pass. */
void tlc__store_fill_retention(tlc_store_t *s, tlc_retention_t *r) {
  memset(r, 0, sizeof *r);
  r->state_dir = s->state_dir;
  uv_mutex_lock(&s->mu);
  r->max_total_bytes = s->o.max_total_bytes;
  r->max_target_bytes = s->o.max_target_bytes;
  r->min_free_bytes = s->o.min_free_bytes;
  r->max_segments = s->o.max_segments;
  r->max_age_ms = s->o.max_age_ms;
  uv_mutex_unlock(&s->mu);
  r->now_wall_ns = tlc__store_wall(s);
  r->deleted = tlc__store_w_deleted;
  r->ud = s;
}

void tlc__store_update_stored(tlc_store_t *s) {
  uint64_t b = 0, n;
  uv_mutex_lock(&s->cat.mu);
  for (size_t i = 0; i < s->cat.n; i++)
    b += s->cat.v[i].bytes;
  n = s->cat.n;
  uv_mutex_unlock(&s->cat.mu);
  LOCKED(s, s->c.stored_bytes = b; s->c.stored_segments = n);
}

/* One retention pass (writer or worker thread: passes serialise on the catalog's mutex). */
void tlc__store_retention_pass(tlc_store_t *s) {
  tlc_retention_t r;
  tlc__store_fill_retention(s, &r);
  tlc__retention_run(&s->cat, &r);
  tlc__store_update_stored(s);
}

int tlc__store_ensure_dir(const char *path) {
  struct stat st;
  int rc = tlc_io->mkdir(path, 0755);
  if (rc < 0 && rc != -EEXIST)
    return rc;
  if (lstat(path, &st) < 0)
    return -errno;
  if (!S_ISDIR(st.st_mode))
    return -ENOTDIR;
  return 0;
}

/* tlc__store_ensure_dir for path and, first, each of its directories after path[0..from) (a target
 * "SOURCE/APP" of an efl source lives in a directory per source: docs/efl.md) */
int tlc__store_ensure_dirs(const char *path, size_t from) {
  char p[1200];
  size_t n = strlen(path);
  if (n >= sizeof p)
    return -ENAMETOOLONG;
  memcpy(p, path, n + 1);
  for (size_t i = from + 1; i < n; i++)
    if (p[i] == '/') {
      p[i] = '\0';
      int rc = tlc__store_ensure_dir(p);
      p[i] = '/';
      if (rc < 0)
        return rc;
    }
  return tlc__store_ensure_dir(p);
}

/* A target name as a directory: one name, or "SOURCE/APP" (efl sources) - two names. */
int tlc__store_target_name_ok(const char *name) {
  static const char ok[] =
      "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._@:#+=[]-";
  size_t n = strlen(name), slash = 0;
  if (n == 0 || n > TLC_TARGET_NAME_MAX_ || name[0] == '.')
    return 0;
  for (size_t i = 0; i < n; i++) {
    if (name[i] == '/') {
      if (++slash > 1 || i + 1 == n || name[i + 1] == '.')
        return 0;
    } else if (!strchr(ok, name[i])) {
      return 0;
    }
  }
  return 1;
}

void tlc__store_apply_defaults(tlc_store_opts_t *o) {
  if (o->max_segment_bytes == 0)
    o->max_segment_bytes = 64ull << 20;
  if (o->retention_interval_ms <= 0)
    o->retention_interval_ms = 10000;
  if (o->compress_level == 0)
    o->compress_level = 3;
  if (o->index_interval == 0)
    o->index_interval = 1024;
  if (o->queue_bytes == 0)
    o->queue_bytes = 64u << 20;
  if (o->probe_interval_ms <= 0)
    o->probe_interval_ms = 1000;
  if (o->resume_free_bytes == 0)
    o->resume_free_bytes = 1u << 20;
  if (o->max_block == 0)
    o->max_block = TLC_MAX_BLOCK_DEFAULT;
  if (o->max_sealing == 0)
    o->max_sealing = 2;
  if (o->max_deferred_exports == 0)
    o->max_deferred_exports = 1024;
}

pend_t *tlc__store_pend_new(const char *target, const char *base, const char *data, tlc_format_t f,
                            int xml, uint64_t seq, int recovered) {
  pend_t *p = tlc_calloc(1, sizeof *p);
  if (!p)
    return NULL;
  snprintf(p->target, sizeof p->target, "%s", target);
  snprintf(p->base, sizeof p->base, "%s", base);
  snprintf(p->data, sizeof p->data, "%s", data);
  p->format = f;
  p->xml = xml;
  p->seq = seq;
  p->recovered = recovered;
  tlc__manifest_init(&p->m);
  return p;
}

/* marks that p's export is to write (counted in exports_pending until done or dropped) */
void tlc__store_pend_want_export(tlc_store_t *s, pend_t *p) {
  if (!p->need_ex)
    LOCKED(s, s->c.exports_pending++);
  p->need_ex = 1;
}

void tlc__store_pend_free(tlc_store_t *s, pend_t *p) {
  if (p->need_ex)
    LOCKED(s, s->c.exports_pending--);
  tlc__store_tmap_unref(s, p->map);
  tlc__manifest_fini(&p->m);
  tlc_free(p);
}

/* Backpressure: a target's share of the queue (under mu); the low-water mark the writer checks
 * before it resumes a target, the high-water mark at which the loop pauses it. */
size_t tlc__store_flow_share(const tlc_store_t *s) {
  return s->qcap / (s->ntargets > 0 ? s->ntargets : 1);
}

int tlc__store_flow_low(const tlc_store_t *s, const tlc_store_target_t *t) {
  return t->qb <= tlc__store_flow_share(s) / 4;
}
