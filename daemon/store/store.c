/* store.c - the storage module's front (loop thread) and its writer thread.
 *
 * Design:
 *  - Loop side (tlc_store_write_chunk & co.): takes the records as the decoder found them and
 *    never re-derives what it knows. bin1x: each record's 24 bytes are copied as received from
 *    the chunk they were decoded from (encoded from the event's fields only when a record began
 *    in an earlier chunk: the same bytes), with its time, into a per-target gather buffer that
 *    is queued as one command at the end of the loop turn (a uv_prepare), before any other
 *    command (order kept), or when full; its queue room is taken as the records come, so
 *    drops are decided per call as before. evlog: a block is re-assembled from its items' raw
 *    bytes and the header fields the decoder kept (the evlog encoder), with a descriptor per
 *    block (length, item count, smallest and largest index time) from the items it was built
 *    of. The queue is capped in bytes (queue_bytes); over the cap the records are dropped and
 *    counted (dropped_buffer_full) and a `buffer_full` gap is queued (control commands are
 *    never dropped: they are small and bounded by the number of calls that make them). The
 *    loop never does file I/O after tlc_store_recover.
 *  - Writer thread: pops commands in order (so per-target order is kept), appends to the
 *    target's open segment (segment.c) in one write per command and builds its manifest from the
 *    commands' descriptors (no scan of the bytes but the checksum), rotates on size (at a record
 *    boundary) and age, syncs
 *    per policy, runs retention, handles ENOSPC (pause + count + probe) and I/O errors
 *    (R5/R6). It wakes at least every 250 ms for ticks (age, sync, probe, retention). To close
 *    a segment it only moves it (open fd, manifest, names) into a seal job: the next record
 *    opens the next segment at once.
 *  - Sealer thread: takes seal jobs in order (so a target's segments are sealed in sequence
 *    order) and seals each exactly as before (segment.c: fdatasync, main export, manifest,
 *    rename, fsync(dir), crash points), then catalogues it, reports it and runs a retention
 *    pass. A main export or manifest a seal could not write for lack of space is kept (pend_t)
 *    and written when space returns; the main exports of segments found at start without one
 *    (crash recovery) wait with the writer until their target is configured, so that they get
 *    its mapping and context area, and are then written by the sealer too (never the loop). A
 * segment being sealed is not in the catalog yet, so retention cannot touch it; a crash leaves it a
 * .part like the open one, and recovery seals both. At most max_sealing jobs are in flight: the
 * writer waits for room before handing over another (a bounded number of unsealed segments, fds and
 * manifests in memory). Barriers pass through the sealer's queue, so a barrier also covers the
 * seals of the segments closed before it.
 *  - Results (sealed, deleted, disk full, log lines, target closed, stopped) go back to the
 *    loop through a list and a uv_async_t; the loop logs, reports events and starts zstd
 *    compressions in the threadpool (uv_queue_work).
 *
 * Counters live in the store under its mutex; tlc_store_counters copies them.
 * What it does not do: stats (the engine's), preamble handling (the ingest's).
 */
#include "store.h"

#include "bin1x.h"
#include "dec.h"
#include "evlog.h"
#include "iofault.h"
#include "segread.h"
#include "store-int.h"
#include "tlc_log_level.h"
#include "tlc_alloc.h"
#include "tlc_err.h"

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

#define TICK_NS         (250 * 1000000ll)
#define PGAP_MAX        16
#define DISKFULL_LOG_NS (10ll * 1000000000ll)
#define GATHER_RECS     8192 /* bin1x records gathered per command (192 KiB) */

enum {
  C_OPEN = 1,
  C_DATA,
  C_GAP,
  C_ROTATE,
  C_CLOSE,
  C_RETENTION,
  C_RECONF,
  C_BARRIER,
  C_STOP,
  C_SETMAP,
  C_SETCONF,
  C_SKIP,
  C_RECEXPORT,
  C_MARK
};
enum { J_SEAL = 1, J_BARRIER, J_RETRY, J_EXPORT };
enum { R_LOG = 1, R_EVENT, R_CLOSED, R_BARRIER, R_COMPRESS, R_STOPPED, R_MARK };

/* A target's names for its segments' exports: an immutable copy of its mapping, shared by the
 * writer (the target's current names) and the seal jobs closed under it. refs under the store's
 * mutex; the last reference frees it (whichever thread that is). */
typedef struct tmap {
  uint32_t refs;
  tlc_mapping_t m;
} tmap_t;

/* A sealed bin1x segment whose main export and/or manifest is still to be written. Two kinds:
 *  - left out by its seal for lack of space (bytes or inodes): the sealer keeps it (s->pend, at
 *    most PEND_MAX) and writes it when space returns: before its next job, when writing resumes
 *    (J_RETRY), at its last try at shutdown;
 *  - recovered at start, or found sealed without its export: the writer keeps it (s->rx, at
 *    most max_deferred_exports) until a target of that name is configured, then hands it to
 *    the sealer (J_EXPORT) with that target's settings; at shutdown, without settings.
 * What is still missing after the last try is done at the next start (a manifest rebuilt from
 * the data, a missing export written). Owned by one thread at a time; need_ex entries are
 * counted in exports_pending. */
typedef struct pend {
  struct pend *next;
  char target[TLC_TARGET_NAME_MAX_ + 1];
  char base[TLC_SEG_BASE_MAX];
  char data[TLC_SEG_NAME_MAX]; /* data file name (without .zst) */
  tlc_format_t format;
  int xml, recovered;
  uint64_t seq;
  int need_ex;          /* the main export is to write, with map and tc */
  int need_mf;          /* m is to write as the manifest */
  tlc_manifest_t m;     /* need_mf: the manifest (its gaps say what was dropped) */
  tmap_t *map;          /* need_ex: a reference to the target's names (NULL: none) */
  tlc_store_tconf_t tc; /* need_ex: its context area */
} pend_t;
#define PEND_MAX 256 /* segments waiting for space */

typedef struct cmd {
  struct cmd *next;
  int type;
  tlc_store_target_t *t;
  uint8_t *buf;
  size_t len;
  uint64_t nrec;
  int64_t *times;  /* C_DATA, bin1x: each record's time as the decoder read it (nrec entries) */
  tlc_rec_t *recs; /* C_DATA, evlog: each block's length, times and items (nrec entries) */
  char reason[TLC_GAP_REASON_MAX];
  uint64_t count;
  int rot;
  tlc_store_opts_t *conf;
  tmap_t *map;          /* C_SETMAP: a reference, handed to the writer (NULL: no names) */
  tlc_store_tconf_t tc; /* C_SETCONF */
  void (*cb)(void *);
  void *ud;
  tlc_store_mark_fn mcb; /* C_MARK */
} cmd_t;

typedef struct res {
  struct res *next;
  int type;
  int level;
  int kind, reason;
  uint64_t seq;
  tlc_store_target_t *t;
  void (*cb)(void *);
  void *ud;
  tlc_store_mark_fn mcb; /* R_MARK, with pos */
  tlc_store_pos_t pos;
  char target[TLC_TARGET_NAME_MAX_ + 1];
  char path[1200];
  char msg[512];
} res_t;

/* A job for the sealer: a segment to seal (moved out of its target), or a barrier result to
 * deliver once every seal before it is done. Owns everything it holds. */
typedef struct sjob {
  struct sjob *next;
  int kind;
  tlc_seg_t seg;        /* J_SEAL: the closed segment, its fd still open */
  int reason;           /* J_SEAL: enum tlc_store_reason */
  int64_t wall_ns;      /* J_SEAL: when it was closed (manifest closed_wall_ns) */
  tmap_t *map;          /* J_SEAL: a reference to the target's names then (may be NULL) */
  tlc_store_tconf_t tc; /* J_SEAL: the target's export settings then */
  res_t *res;           /* J_BARRIER: the R_BARRIER result to push */
  pend_t *p;            /* J_EXPORT: a recovered segment's export, with its settings */
} sjob_t;

typedef struct pgap {
  char reason[TLC_GAP_REASON_MAX];
  uint64_t count;
} pgap_t;

struct tlc_store_target {
  tlc_store_t *s;
  char name[TLC_TARGET_NAME_MAX_ + 1];
  tlc_format_t format;
  struct tlc_store_target *next; /* loop: list of open targets */
  /* loop side: evlog block re-assembly (the evlog encoder, byte-identical blocks) */
  tlc_evlog_enc_t enc;
  tlc_rec_t ea;           /* the open block's items and times */
  tlc_rec_t *ed;          /* blocks written and not queued yet: their descriptors */
  size_t ned, ced;        /* used, allocated */
  int ed_err;             /* a descriptor could not be kept: those blocks are dropped */
  uint64_t pend_drop_rec; /* buffer_full drops not yet queued as a gap */
  /* loop side, bin1x: records gathered (as received) and their times, queued as one command at
   * the end of the loop turn (prepare callback), when GATHER_RECS are held, or before any
   * other command of this target or of the store (so the order of commands is kept) */
  uint8_t *gb;
  int64_t *gt;
  size_t gn;
  int gq; /* on the store's list of targets with gathered records */
  struct tlc_store_target *gnext;
  /* loop side, keep_skipped: the stream bytes past the last record/block (sk_*, see sk_cover) */
  uint64_t sk_base;  /* stream offset: every byte before it is in a record or was handled */
  uint64_t sk_end;   /* stream offset after the last byte seen */
  uint64_t sk_kbase; /* stream offset of sk_buf[0]; valid bytes sk_buf[sk_head..sk_len) */
  uint8_t *sk_buf;   /* grows up to keep_skipped */
  size_t sk_head, sk_len, sk_cap;
  uint64_t sk_blk; /* evlog: 1 + offset of the last block covered (0: none) */
  int sk_started;
  uint8_t *sk_out; /* skipped bytes kept, to queue (C_SKIP) */
  size_t sk_olen, sk_ocap;
  uint64_t sk_unkept; /* skipped bytes that could not be kept, to queue */
  int rx_state;       /* loop: 1 configured, C_RECEXPORT to queue (rx_mark); 2 queued */
  /* writer side */
  tlc_seg_t seg;
  char dir[1024];
  uint64_t next_seq;
  int seq_known;
  uint64_t pause_rec;  /* records dropped during the current disk-full pause */
  pgap_t pg[PGAP_MAX]; /* gaps waiting for the next segment */
  size_t npg;
  tmap_t *wmap;         /* names for the exports (a reference; NULL: none) */
  tlc_store_tconf_t tc; /* export settings */
  uint8_t *skpend;      /* keep_skipped: bytes waiting for the next segment (<= keep_skipped) */
  size_t skpend_len;
  struct tlc_store_target *wnext;
  /* loop side: backpressure (tlc_store_target_set_flow) */
  void (*flow_cb)(void *ud, int paused);
  void *flow_ud;
  int closed; /* tlc_store_target_close was called: no more flow calls */
  /* under s->mu */
  tlc_store_target_counters_t c;
  size_t qb;      /* bytes of this target queued or gathered for the writer */
  int paused;     /* flow: the target was asked to pause */
  int resume_due; /* flow: the writer drained it below the low-water mark */
};

struct tlc_store {
  uv_loop_t *loop;
  tlc_store_opts_t o;
  char *state_dir;
  uv_mutex_t mu;
  uv_cond_t cv;
  cmd_t *qh, *qt;
  size_t qbytes, qcap;
  size_t ntargets; /* open targets (under mu): each one's share of the queue is qcap / ntargets */
  res_t *rh, *rt;
  uv_async_t async;
  uv_thread_t thr;
  int thr_started, thr_exited, joined;
  tlc_store_counters_t c; /* under mu */
  tlc_catalog_t cat;
  /* sealer (queue, count and stop flag under mu); it signals cv when a job is done */
  uv_thread_t sthr;
  uv_cond_t scv; /* the sealer waits here for jobs */
  sjob_t *sh, *st;
  uint32_t sealing; /* J_SEAL jobs queued or running */
  int sstop, sthr_started;
  pend_t *pend; /* sealer only: segments whose export or manifest waits for space */
  size_t npend;
  /* writer only (filled by recovery before the writer starts): exports waiting for their
   * target's settings */
  pend_t *rx, **rx_tail;
  size_t nrx;
  /* writer only */
  tlc_store_target_t *wlist;
  int disk_full;
  int64_t next_probe, next_retention, next_tick, df_log_last;
  uint64_t df_suppressed;
  /* loop only */
  tlc_store_target_t *targets;
  tlc_store_target_t *gather; /* targets with gathered records (gq) */
  uv_prepare_t prep;          /* queues the gathered records at the end of each loop turn */
  int nhandles;               /* handles not closed yet (async, prep) */
  size_t gather_max; /* records gathered per command: GATHER_RECS, at most a quarter of the queue */
  int rx_any;        /* recovery deferred some exports (set before the writer starts) */
  int rx_kick;       /* a target was marked by rx_mark: rx_flush has work */
  unsigned inflight; /* compressions */
  int closing;
  void (*close_cb)(void *);
  void *close_ud;
};

/* ---- clocks, logging ---- */

static int64_t wall(tlc_store_t *s) {
  return s->o.now_wall_ns ? s->o.now_wall_ns(s->o.clock_ud) : tlc__wall_ns();
}
static int64_t mono(tlc_store_t *s) {
  return s->o.now_mono_ns ? s->o.now_mono_ns(s->o.clock_ud) : tlc__mono_ns();
}

static void log_direct(tlc_store_t *s, int level, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
static void log_direct(tlc_store_t *s, int level, const char *fmt, ...) {
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

static void push_res(tlc_store_t *s, res_t *r) {
  uv_mutex_lock(&s->mu);
  r->next = NULL;
  if (s->rt)
    s->rt->next = r;
  else
    s->rh = r;
  s->rt = r;
  uv_mutex_unlock(&s->mu);
  uv_async_send(&s->async);
}

/* writer thread: a log line for the loop. Allocation failure drops the line. */
static void wlog(tlc_store_t *s, int level, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
static void wlog(tlc_store_t *s, int level, const char *fmt, ...) {
  res_t *r = tlc_calloc(1, sizeof *r);
  if (!r)
    return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(r->msg, sizeof r->msg, fmt, ap);
  va_end(ap);
  r->type = R_LOG;
  r->level = level;
  push_res(s, r);
}

static void wevent(tlc_store_t *s, int kind, const char *target, const char *path, int reason,
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
  push_res(s, r);
}

#define LOCKED(s, stmt)                                                                            \
  do {                                                                                             \
    uv_mutex_lock(&(s)->mu);                                                                       \
    stmt;                                                                                          \
    uv_mutex_unlock(&(s)->mu);                                                                     \
  } while (0)

/* ---- backpressure ---- */

/* Backpressure: the high- and low-water marks of a target's share of the queue (under mu). */
static size_t flow_share(const tlc_store_t *s) {
  return s->qcap / (s->ntargets > 0 ? s->ntargets : 1);
}
static int flow_high(const tlc_store_t *s, const tlc_store_target_t *t) {
  size_t sh = flow_share(s);
  return t->qb >= sh - sh / 4;
}
static int flow_low(const tlc_store_t *s, const tlc_store_target_t *t) {
  return t->qb <= flow_share(s) / 4;
}

/* loop: after queueing or gathering data of t: past the high-water mark, asks t to pause */
static void flow_check(tlc_store_target_t *t) {
  tlc_store_t *s = t->s;
  int pause = 0;
  if (!t->flow_cb || t->closed)
    return;
  uv_mutex_lock(&s->mu);
  if (!t->paused && flow_high(s, t)) {
    t->paused = 1;
    t->resume_due = 0;
    s->c.flow_pauses++;
    t->c.flow_pauses++;
    pause = 1;
  }
  uv_mutex_unlock(&s->mu);
  if (pause)
    t->flow_cb(t->flow_ud, 1);
}

/* loop (async): resumes the paused targets the writer drained below the low-water mark */
static void flow_resume(tlc_store_t *s) {
  for (tlc_store_target_t *t = s->targets; t; t = t->next) {
    int resume = 0;
    uv_mutex_lock(&s->mu);
    if (t->paused && t->resume_due) {
      t->paused = 0;
      t->resume_due = 0;
      resume = 1;
    }
    uv_mutex_unlock(&s->mu);
    if (resume && t->flow_cb && !t->closed)
      t->flow_cb(t->flow_ud, 0);
  }
}

void tlc_store_target_set_flow(tlc_store_target_t *t, void (*cb)(void *ud, int paused), void *ud) {
  t->flow_cb = cb;
  t->flow_ud = ud;
}

/* ---- shared names (tmap) ---- */

static void tmap_unref(tlc_store_t *s, tmap_t *m) {
  uint32_t left;
  if (!m)
    return;
  LOCKED(s, left = --m->refs);
  if (left == 0) {
    tlc_mapping_fini(&m->m);
    tlc_free(m);
  }
}

static tmap_t *tmap_ref(tlc_store_t *s, tmap_t *m) {
  if (m)
    LOCKED(s, m->refs++);
  return m;
}

/* a deep copy of a finished mapping (loop thread), one reference */
static tmap_t *tmap_copy(const tlc_mapping_t *src) {
  tmap_t *m = tlc_calloc(1, sizeof *m);
  if (!m)
    return NULL;
  m->refs = 1;
  tlc_mapping_init(&m->m);
  m->m.max_areas = src->max_areas;
  for (size_t i = 0; i < src->nareas; i++)
    if (tlc_mapping_add(&m->m, &src->areas[i]) < 0)
      goto fail;
  for (size_t i = 0; i < src->ncontexts; i++)
    if (tlc_mapping_add_ctx(&m->m, src->contexts[i].handle, src->contexts[i].name) < 0)
      goto fail;
  tlc_mapping_finish(&m->m);
  return m;
fail:
  tlc_mapping_fini(&m->m);
  tlc_free(m);
  return NULL;
}

/* ---- writer: segments ---- */

static int is_nospace(int rc) {
  return rc == -ENOSPC || rc == -EDQUOT;
}

static void w_retention(tlc_store_t *s);

static void w_deleted(void *ud, const tlc_catent_t *e) {
  tlc_store_t *s = ud;
  char p[1200];
  LOCKED(s, s->c.deletions++; s->c.deleted_bytes += e->bytes);
  snprintf(p, sizeof p, "%s/%s/%s", s->state_dir, e->target, e->data);
  wlog(s, TLC_LOG_INFO, "retention: deleted %s/%s (seq %" PRIu64 ", %" PRIu64 " bytes)", e->target,
       e->data, e->seq, e->bytes);
  wevent(s, TLC_SEV_DELETED, e->target, p, 0, e->seq);
}

/* Budgets are read under mu: the writer changes them (C_RECONF) while the sealer may run a
 * pass. */
static void fill_retention(tlc_store_t *s, tlc_retention_t *r) {
  memset(r, 0, sizeof *r);
  r->state_dir = s->state_dir;
  uv_mutex_lock(&s->mu);
  r->max_total_bytes = s->o.max_total_bytes;
  r->max_target_bytes = s->o.max_target_bytes;
  r->min_free_bytes = s->o.min_free_bytes;
  r->max_segments = s->o.max_segments;
  r->max_age_ms = s->o.max_age_ms;
  uv_mutex_unlock(&s->mu);
  r->now_wall_ns = wall(s);
  r->deleted = w_deleted;
  r->ud = s;
}

static void update_stored(tlc_store_t *s) {
  uint64_t b = 0, n;
  uv_mutex_lock(&s->cat.mu);
  for (size_t i = 0; i < s->cat.n; i++)
    b += s->cat.v[i].bytes;
  n = s->cat.n;
  uv_mutex_unlock(&s->cat.mu);
  LOCKED(s, s->c.stored_bytes = b; s->c.stored_segments = n);
}

/* One retention pass (writer or sealer thread: passes serialise on the catalog's mutex). */
static void retention_pass(tlc_store_t *s) {
  tlc_retention_t r;
  fill_retention(s, &r);
  tlc__retention_run(&s->cat, &r);
  update_stored(s);
}

static void w_retention(tlc_store_t *s) {
  retention_pass(s);
  s->next_retention = mono(s) + s->o.retention_interval_ms * 1000000;
}

static int ensure_dir(const char *path) {
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

/* ensure_dir for path and, first, each of its directories after path[0..from) (a target
 * "SOURCE/APP" of an efl source lives in a directory per source: docs/efl.md) */
static int ensure_dirs(const char *path, size_t from) {
  char p[1200];
  size_t n = strlen(path);
  if (n >= sizeof p)
    return -ENAMETOOLONG;
  memcpy(p, path, n + 1);
  for (size_t i = from + 1; i < n; i++)
    if (p[i] == '/') {
      p[i] = '\0';
      int rc = ensure_dir(p);
      p[i] = '/';
      if (rc < 0)
        return rc;
    }
  return ensure_dir(p);
}

/* A target name as a directory: one name, or "SOURCE/APP" (efl sources) - two names. */
static int target_name_ok(const char *name) {
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

/* highest sequence used in a target directory (names of ours only) */
static uint64_t dir_max_seq(const char *dir) {
  uint64_t mx = 0;
  DIR *d = opendir(dir);
  if (!d)
    return 0;
  struct dirent *e;
  unsigned long guard = 0;
  while ((e = readdir(d)) != NULL && guard++ < 10000000ul) {
    tlc_segname_t sn;
    if (tlc__segname_parse(e->d_name, &sn) != TLC_SK_NONE && sn.seq > mx)
      mx = sn.seq;
  }
  closedir(d);
  return mx;
}

static void w_count_drop(tlc_store_t *s, tlc_store_target_t *t, int why, uint64_t rec,
                         uint64_t bytes) {
  uv_mutex_lock(&s->mu);
  if (why == 1) {
    s->c.dropped_disk_full_records += rec;
    s->c.dropped_disk_full_bytes += bytes;
  } else {
    s->c.dropped_io_error_records += rec;
    s->c.dropped_io_error_bytes += bytes;
  }
  t->c.dropped_records += rec;
  t->c.dropped_bytes += bytes;
  uv_mutex_unlock(&s->mu);
}

static void w_add_gap(tlc_store_target_t *t, const char *reason, uint64_t count) {
  if (t->seg.fd >= 0) {
    tlc__manifest_add_gap(&t->seg.m, reason, count);
    return;
  }
  if (t->npg > 0 && strcmp(t->pg[t->npg - 1].reason, reason) == 0) {
    t->pg[t->npg - 1].count += count;
    return;
  }
  if (t->npg == PGAP_MAX) {
    /* full: one entry per reason (at its first place), so every reason's count stays right */
    size_t n = 0;
    for (size_t i = 0; i < t->npg; i++) {
      size_t j = 0;
      while (j < n && strcmp(t->pg[j].reason, t->pg[i].reason) != 0)
        j++;
      if (j < n)
        t->pg[j].count += t->pg[i].count;
      else
        t->pg[n++] = t->pg[i];
    }
    t->npg = n;
    for (size_t j = 0; j < n; j++)
      if (strcmp(t->pg[j].reason, reason) == 0) {
        t->pg[j].count += count;
        return;
      }
    if (n == PGAP_MAX) {
      t->pg[PGAP_MAX - 1].count += count; /* more distinct reasons than tlcapd has */
      return;
    }
  }
  snprintf(t->pg[t->npg].reason, sizeof t->pg[0].reason, "%s", reason);
  t->pg[t->npg].count = count;
  t->npg++;
}

static void w_disk_full(tlc_store_t *s, tlc_store_target_t *t, int rc) {
  int64_t now = mono(s);
  if (!s->disk_full) {
    s->disk_full = 1;
    LOCKED(s, s->c.disk_full = 1; s->c.disk_full_events++);
    wevent(s, TLC_SEV_DISK_FULL, t->name, t->dir, 0, 0);
    s->next_probe = now + s->o.probe_interval_ms * 1000000;
    w_retention(s); /* may free space at once; the probe decides when to resume */
  }
  if (s->df_log_last == 0 || now - s->df_log_last >= DISKFULL_LOG_NS) {
    wlog(s, TLC_LOG_ERR,
         "DISK FULL (%s) writing %s: capture paused, records are dropped and counted until "
         "space returns (%" PRIu64 " similar messages suppressed)",
         tlc_strerror(rc), t->name, s->df_suppressed);
    s->df_log_last = now;
    s->df_suppressed = 0;
  } else {
    s->df_suppressed++;
  }
}

static tlc_catent_t *cat_find(tlc_catalog_t *c, const char *target, uint64_t seq) {
  for (size_t i = 0; i < c->n; i++)
    if (c->v[i].seq == seq && strcmp(c->v[i].target, target) == 0)
      return &c->v[i];
  return NULL;
}

/* Pins (on = 1) a catalogued segment against retention while its files are written late, or
 * unpins it and refreshes its size on disk. Returns 1 when it is in the catalog. */
static int cat_pin(tlc_store_t *s, const char *target, uint64_t seq, int on) {
  char dir[1200];
  uv_mutex_lock(&s->cat.mu);
  tlc_catent_t *e = cat_find(&s->cat, target, seq);
  if (e) {
    e->pinned = on;
    if (!on) {
      snprintf(dir, sizeof dir, "%s/%s", s->state_dir, e->target);
      e->bytes = tlc__segment_disk_bytes(dir, e->base, e->data);
    }
  }
  uv_mutex_unlock(&s->cat.mu);
  return e != NULL;
}

static pend_t *pend_new(const char *target, const char *base, const char *data, tlc_format_t f,
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
static void pend_want_export(tlc_store_t *s, pend_t *p) {
  if (!p->need_ex)
    LOCKED(s, s->c.exports_pending++);
  p->need_ex = 1;
}

static void pend_free(tlc_store_t *s, pend_t *p) {
  if (p->need_ex)
    LOCKED(s, s->c.exports_pending--);
  tmap_unref(s, p->map);
  tlc__manifest_fini(&p->m);
  tlc_free(p);
}

/* Writes what p still needs: the main export (then named in the manifest), the manifest.
 * Sealer thread (or the recovering thread before it starts). Returns 1 when nothing is left to
 * do (written; failed for another reason than space, logged and left to the next start; or the
 * segment is gone), 0 while the file system is full. */
static int pend_try(tlc_store_t *s, pend_t *p) {
  char dir[1200], dpath[1400], zpath[1500], mpath[1400];
  struct stat st;
  int rc;
  snprintf(dir, sizeof dir, "%s/%s", s->state_dir, p->target);
  snprintf(dpath, sizeof dpath, "%s/%s", dir, p->data);
  snprintf(zpath, sizeof zpath, "%s.zst", dpath);
  snprintf(mpath, sizeof mpath, "%s/%s.manifest", dir, p->base);
  int pinned = cat_pin(s, p->target, p->seq, 1);
  int plain = lstat(dpath, &st) == 0;
  if (!plain && lstat(zpath, &st) != 0) {
    if (pinned) /* deleted by retention meanwhile: nothing to write */
      cat_pin(s, p->target, p->seq, 0);
    return 1;
  }
  int late_ex = 0; /* the manifest is rewritten to name an export written now */
  if (p->need_ex) {
    tlc_exset_t ex = { p->map ? &p->map->m : NULL, p->tc.has_context_area, p->tc.context_area };
    rc = tlc__segment_write_export(dir, p->base, p->target, p->format, p->xml, p->seq,
                                   plain ? dpath : zpath, p->recovered, &ex, s->o.export_cb,
                                   s->o.export_ud);
    if (rc == -ENOENT && plain) /* compressed meanwhile: the .zst is complete before the unlink */
      rc = tlc__segment_write_export(dir, p->base, p->target, p->format, p->xml, p->seq, zpath,
                                     p->recovered, &ex, s->o.export_cb, s->o.export_ud);
    if (!is_nospace(rc)) {
      p->need_ex = 0;
      LOCKED(s, s->c.exports_pending--; s->c.exports_late += rc == 0);
      if (rc == 0) {
        /* named in the manifest: the kept one, or the one on disk (without a valid one, the
         * next start rebuilds it from the data, naming the export) */
        late_ex = !p->need_mf;
        if (p->need_mf || tlc__manifest_load(mpath, &p->m, NULL, 0) == 0) {
          p->need_mf = 1;
          snprintf(p->m.exportf, sizeof p->m.exportf, "%s%s", p->base, p->xml ? ".xml" : ".txt");
        }
        wlog(s, TLC_LOG_INFO, "%s: main export of %s/%s written%s", p->target, dir, p->data,
             p->map || p->tc.has_context_area ? " with the target's settings" : "");
      } else {
        wlog(s, TLC_LOG_WARN, "%s: main export of %s/%s: %s (written at the next start)", p->target,
             dir, p->data, tlc_strerror(rc));
      }
    }
  }
  if (p->need_mf) {
    rc = tlc__manifest_store(mpath, &p->m);
    if (!is_nospace(rc)) {
      p->need_mf = 0;
      if (rc == 0 && !late_ex)
        wlog(s, TLC_LOG_NOTICE, "%s: manifest %s written now that space is back", p->target, mpath);
      else if (rc < 0)
        wlog(s, TLC_LOG_WARN, "%s: manifest %s: %s (rebuilt from the data at the next start)",
             p->target, mpath, tlc_strerror(rc));
    }
  }
  if (pinned) {
    cat_pin(s, p->target, p->seq, 0);
    update_stored(s);
  }
  return !p->need_ex && !p->need_mf;
}

/* sealer: writes what the kept entries need, oldest first, until the file system is still
 * full */
static void pend_retry(tlc_store_t *s) {
  while (s->pend) {
    pend_t *p = s->pend;
    if (!pend_try(s, p))
      return; /* still full: later */
    s->pend = p->next;
    s->npend--;
    pend_free(s, p);
  }
}

/* sealer: keeps p to write when space returns (at most PEND_MAX; the rest waits for the next
 * start) */
static void pend_keep(tlc_store_t *s, pend_t *p) {
  if (s->npend >= PEND_MAX) {
    wlog(s, TLC_LOG_WARN,
         "%s: %s%s%s of %s not written (no space, %d segments waiting already): done at the "
         "next start",
         p->target, p->need_ex ? "main export" : "", p->need_ex && p->need_mf ? " and " : "",
         p->need_mf ? "manifest" : "", p->data, PEND_MAX);
    pend_free(s, p);
    return;
  }
  /* appended: retried in the order they were kept */
  pend_t **pp = &s->pend;
  while (*pp)
    pp = &(*pp)->next;
  p->next = NULL;
  *pp = p;
  s->npend++;
}

/* Seals one closed segment: segment.c's seal (fdatasync, main export, manifest, rename), then
 * the catalog, counters, events and a retention pass. Runs on the sealer thread (on the writer
 * only when a seal job cannot be allocated). Touches no target: `seg` carries its names. */
static void seal_now(tlc_store_t *s, tlc_seg_t *seg, int reason, int64_t wall_ns, tmap_t *map,
                     const tlc_store_tconf_t *tc) {
  tlc_catent_t ent;
  char path[1200];
  tlc_exset_t ex = { map ? &map->m : NULL, tc->has_context_area, tc->context_area };
  pend_t *seal_keep = NULL;
  int rc = tlc__seg_seal(seg, reason, wall_ns, &ex, s->o.export_cb, s->o.export_ud, &ent);
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
    wlog(s, TLC_LOG_ERR, "%s: cannot seal %s.part: %s (left for recovery at next start)",
         seg->target, path, tlc_strerror(rc));
    wevent(s, TLC_SEV_IO_ERROR, seg->target, path, 0, seg->seq);
    return;
  }
  int ex_full = is_nospace(seg->ex_err), mf_full = is_nospace(seg->mf_err);
  if (seg->ex_err < 0 && !ex_full)
    wlog(s, TLC_LOG_WARN, "%s: main export of %s: %s (written at the next start)", seg->target,
         path, tlc_strerror(seg->ex_err));
  if (ex_full || mf_full) {
    wlog(s, TLC_LOG_WARN, "%s: sealed %s without its %s (%s): written once space returns",
         seg->target, path,
         ex_full && mf_full ? "main export and manifest"
         : ex_full          ? "main export"
                            : "manifest",
         tlc_strerror(ex_full ? seg->ex_err : seg->mf_err));
    pend_t *p = pend_new(seg->target, seg->base, seg->data, seg->format, seg->xml, seg->seq, 0);
    if (p) {
      if (mf_full) { /* its gaps count what was lost: keep it */
        p->need_mf = 1;
        p->m = seg->m; /* moved: seg gets a fresh one */
        tlc__manifest_init(&seg->m);
      }
      if (ex_full) {
        pend_want_export(s, p);
        p->map = tmap_ref(s, map);
        p->tc = *tc;
      }
    }
    seal_keep = p;
  }
  if (seg->seal_err < 0 && !is_nospace(seg->seal_err)) {
    LOCKED(s, s->c.io_errors++);
    wlog(s, TLC_LOG_ERR,
         "%s: sealed %s with an error (%s): marked suspect or manifest left to rebuild",
         seg->target, path, tlc_strerror(seg->seal_err));
  }
  tlc__catalog_add(&s->cat, &ent);
  LOCKED(s, s->c.segments_sealed++);
  wevent(s, TLC_SEV_SEALED, seg->target, path, reason, seg->seq);
  if (seal_keep)
    pend_keep(s, seal_keep);
  retention_pass(s);
}

static void push_job(tlc_store_t *s, sjob_t *j) {
  uv_mutex_lock(&s->mu);
  j->next = NULL;
  if (s->st)
    s->st->next = j;
  else
    s->sh = j;
  s->st = j;
  if (j->kind == J_SEAL) {
    s->sealing++;
    s->c.seal_queue = s->sealing;
  }
  uv_cond_signal(&s->scv);
  uv_mutex_unlock(&s->mu);
}

/* writer: waits until at most `n` seal jobs are in flight (the sealer signals cv per job) */
static void w_wait_sealer(tlc_store_t *s, uint32_t n) {
  uv_mutex_lock(&s->mu);
  if (s->sealing > n)
    s->c.seal_waits++;
  while (s->sealing > n)
    uv_cond_wait(&s->cv, &s->mu);
  uv_mutex_unlock(&s->mu);
}

/* Closes the target's open segment: hands it to the sealer (waiting for room when max_sealing
 * segments are in flight); the next record opens a new segment. */
static void w_seal(tlc_store_t *s, tlc_store_target_t *t, int reason) {
  if (t->seg.fd < 0)
    return;
  int64_t now = wall(s);
  LOCKED(s, t->c.segment_seq = 0; t->c.segment_bytes = 0; t->c.durable_bytes = 0);
  sjob_t *j = tlc_calloc(1, sizeof *j);
  if (!j) {
    /* out of memory: seal here, after the sealer's jobs (a target's seals stay in order) */
    w_wait_sealer(s, 0);
    seal_now(s, &t->seg, reason, now, t->wmap, &t->tc);
    return;
  }
  w_wait_sealer(s, s->o.max_sealing - 1);
  j->kind = J_SEAL;
  tlc__seg_move(&j->seg, &t->seg);
  j->reason = reason;
  j->wall_ns = now;
  j->map = tmap_ref(s, t->wmap);
  j->tc = t->tc;
  push_job(s, j);
}

/* writer: hands the exports recovery deferred to the sealer: those of target t's name, with t's
 * settings (C_RECEXPORT, after its first configuration), or every one left, without settings
 * (t NULL: shutdown) */
static void w_release_rx(tlc_store_t *s, tlc_store_target_t *t) {
  size_t n = 0;
  for (pend_t **pp = &s->rx; *pp;) {
    pend_t *p = *pp;
    sjob_t *j = !t || strcmp(p->target, t->name) == 0 ? tlc_calloc(1, sizeof *j) : NULL;
    if (!j) { /* another target's (or no memory: at shutdown, or the next start) */
      pp = &p->next;
      continue;
    }
    *pp = p->next;
    s->nrx--;
    if (t) {
      p->map = tmap_ref(s, t->wmap);
      p->tc = t->tc;
    }
    j->kind = J_EXPORT;
    j->p = p;
    push_job(s, j);
    n++;
  }
  s->rx_tail = &s->rx;
  while (*s->rx_tail)
    s->rx_tail = &(*s->rx_tail)->next;
  if (n > 0 && t)
    wlog(s, TLC_LOG_INFO,
         "%s: exporting %zu segment(s) recovered at start with the target's settings", t->name, n);
  else if (n > 0)
    wlog(s, TLC_LOG_NOTICE,
         "exporting %zu segment(s) recovered at start without target settings (no target of "
         "that name was configured)",
         n);
}

static void sealer_main(void *arg) {
  tlc_store_t *s = arg;
  uv_mutex_lock(&s->mu);
  for (;;) {
    while (!s->sh && !s->sstop)
      uv_cond_wait(&s->scv, &s->mu);
    sjob_t *j = s->sh;
    if (!j) {
      uv_mutex_unlock(&s->mu);
      if (s->pend)
        pend_retry(s); /* a last try */
      while (s->pend) {
        pend_t *p = s->pend;
        s->pend = p->next;
        wlog(s, TLC_LOG_WARN, "%s: %s%s%s of %s not written (no space): done at the next start",
             p->target, p->need_ex ? "main export" : "", p->need_ex && p->need_mf ? " and " : "",
             p->need_mf ? "manifest" : "", p->data);
        pend_free(s, p);
      }
      s->npend = 0;
      uv_mutex_lock(&s->mu);
      break; /* stopped and drained */
    }
    s->sh = j->next;
    if (!s->sh)
      s->st = NULL;
    uv_mutex_unlock(&s->mu);
    if (s->pend)
      pend_retry(s);
    if (j->kind == J_SEAL) {
      seal_now(s, &j->seg, j->reason, j->wall_ns, j->map, &j->tc);
      tlc__seg_fini(&j->seg);
      tmap_unref(s, j->map);
    } else if (j->kind == J_BARRIER) {
      push_res(s, j->res);
    } else if (j->kind == J_EXPORT) {
      if (pend_try(s, j->p))
        pend_free(s, j->p);
      else
        pend_keep(s, j->p); /* the file system is full: when space returns */
    }
    uv_mutex_lock(&s->mu);
    if (j->kind == J_SEAL) {
      s->sealing--;
      s->c.seal_queue = s->sealing;
    }
    uv_cond_signal(&s->cv); /* room for the writer */
    tlc_free(j);
  }
  uv_mutex_unlock(&s->mu);
}

static void stop_sealer(tlc_store_t *s) {
  if (!s->sthr_started)
    return;
  LOCKED(s, s->sstop = 1; uv_cond_signal(&s->scv));
  uv_thread_join(&s->sthr);
  s->sthr_started = 0;
}

/* keep_skipped, writer: bytes the segment does not hold, into <data>.skipped of the open segment
 * (or kept in memory for the next one), at most keep_skipped per segment; what does not fit or
 * cannot be written is counted and recorded as a `skipped_unkept` gap. */
static void w_skip(tlc_store_t *s, tlc_store_target_t *t, const uint8_t *buf, size_t len,
                   uint64_t unkept) {
  uint64_t keep = s->o.keep_skipped, kept = 0;
  if (len > 0 && t->seg.fd >= 0 && !s->disk_full) {
    int64_t w =
        tlc__seg_skipped(&t->seg, buf, len, t->seg.sk_bytes < keep ? keep - t->seg.sk_bytes : 0);
    kept = w > 0 ? (uint64_t)w : 0;
  } else if (len > 0 && t->seg.fd < 0) {
    size_t room = keep > t->skpend_len ? (size_t)(keep - t->skpend_len) : 0;
    size_t k = len < room ? len : room;
    uint8_t *nb = k > 0 ? tlc_realloc(t->skpend, t->skpend_len + k) : NULL;
    if (nb) {
      t->skpend = nb;
      memcpy(nb + t->skpend_len, buf, k);
      t->skpend_len += k;
      kept = k;
    }
  }
  unkept += len - kept;
  if (unkept > 0)
    w_add_gap(t, "skipped_unkept", unkept);
  LOCKED(s, s->c.skipped_kept_bytes += (t->seg.fd >= 0 ? kept : 0);
         s->c.skipped_unkept_bytes += unkept);
}

/* The target's next segment sequence, learnt once: one past the highest of its directory and
 * of the catalogue (writer thread). */
static void learn_next_seq(tlc_store_t *s, tlc_store_target_t *t) {
  if (t->seq_known)
    return;
  {
    uint64_t mx = dir_max_seq(t->dir);
    uv_mutex_lock(&s->cat.mu);
    for (size_t i = 0; i < s->cat.n; i++)
      if (strcmp(s->cat.v[i].target, t->name) == 0 && s->cat.v[i].seq > mx)
        mx = s->cat.v[i].seq;
    uv_mutex_unlock(&s->cat.mu);
    t->next_seq = mx + 1;
    t->seq_known = 1;
  }
}

static int w_open_seg(tlc_store_t *s, tlc_store_target_t *t) {
  int rc = ensure_dirs(t->dir, strlen(s->state_dir));
  if (rc < 0)
    return rc;
  learn_next_seq(s, t);
  for (int tries = 0; tries < 100; tries++) {
    rc = tlc__seg_open(&t->seg, t->dir, t->name, t->format, t->tc.main_export == TLC_MAIN_XML,
                       t->next_seq++, wall(s), mono(s), s->o.index_interval);
    if (rc != -EEXIST)
      break;
  }
  if (rc < 0)
    return rc;
  t->seg.max_block = s->o.max_block;
  for (size_t i = 0; i < t->npg; i++)
    tlc__manifest_add_gap(&t->seg.m, t->pg[i].reason, t->pg[i].count);
  t->npg = 0;
  if (t->skpend_len > 0) {
    /* skipped bytes that came while no segment was open belong to this one */
    int64_t w = tlc__seg_skipped(&t->seg, t->skpend, t->skpend_len, s->o.keep_skipped);
    uint64_t kept = w > 0 ? (uint64_t)w : 0;
    if (kept < t->skpend_len)
      tlc__manifest_add_gap(&t->seg.m, "skipped_unkept", t->skpend_len - kept);
    LOCKED(s, s->c.skipped_kept_bytes += kept; s->c.skipped_unkept_bytes += t->skpend_len - kept);
    t->skpend_len = 0;
  }
  LOCKED(s, s->c.segments_opened++; t->c.segment_seq = t->seg.seq; t->c.segment_bytes = 0;
         t->c.durable_bytes = 0);
  return 0;
}

static void w_sync_policy(tlc_store_t *s, tlc_store_target_t *t, int64_t now) {
  if (t->seg.fd < 0 || s->o.sync_mode != TLC_SYNC_PERIODIC || t->seg.since_sync == 0)
    return;
  int due =
      (s->o.sync_bytes > 0 && t->seg.since_sync >= s->o.sync_bytes) ||
      (s->o.sync_interval_ms > 0 && now - t->seg.last_sync_mono >= s->o.sync_interval_ms * 1000000);
  if (!due)
    return;
  int rc = tlc__seg_sync(&t->seg, now);
  if (rc < 0) {
    /* R5: never retried; the file is suspect: seal it and start a new one */
    LOCKED(s, s->c.io_errors++; s->c.fsync_errors++);
    wlog(s, TLC_LOG_ERR,
         "%s: fdatasync of %s/%s.part failed (%s): sealing it as suspect and rotating", t->name,
         t->dir, t->seg.data, tlc_strerror(rc));
    w_seal(s, t, TLC_ROT_IO_ERROR);
    return;
  }
  LOCKED(s, t->c.durable_bytes = t->seg.durable);
}

/* appends the n whole blocks buf[0..len) described by recs to the open segment; returns 0, or
 * the error after counting drops */
static int w_append(tlc_store_t *s, tlc_store_target_t *t, const uint8_t *buf, size_t len,
                    const tlc_rec_t *recs, size_t n) {
  uint64_t wrec, wbytes;
  int rc = tlc__seg_append_recs(&t->seg, buf, len, recs, n, &wrec, &wbytes);
  LOCKED(s, s->c.records_written += wrec; s->c.bytes_written += wbytes;
         t->c.records_written += wrec; t->c.bytes_written += wbytes;
         t->c.segment_bytes = t->seg.m.bytes);
  if (rc == 0)
    return 0;
  uint64_t lost = n - wrec;
  if (is_nospace(rc)) {
    w_count_drop(s, t, 1, lost, len - wbytes);
    t->pause_rec += lost;
    w_disk_full(s, t, rc);
  } else {
    w_count_drop(s, t, 2, lost, len - wbytes);
    tlc__manifest_add_gap(&t->seg.m, "io_error", lost);
    LOCKED(s, s->c.io_errors++);
    t->seg.suspect = 1;
    wlog(s, TLC_LOG_ERR,
         "%s: write to %s/%s.part failed (%s): %" PRIu64 " records dropped; rotating", t->name,
         t->dir, t->seg.data, tlc_strerror(rc), lost);
    w_seal(s, t, TLC_ROT_IO_ERROR);
  }
  return rc;
}

/* evlog blocks with the lengths, times and item counts the loop found (recs[0..nrec)): no
 * scan; a size rotation cuts between blocks */
static void w_data(tlc_store_t *s, tlc_store_target_t *t, const uint8_t *buf, size_t len,
                   uint64_t nrec, const tlc_rec_t *recs) {
  if (s->disk_full) {
    w_count_drop(s, t, 1, nrec, len);
    t->pause_rec += nrec;
    return;
  }
  uint64_t maxseg = s->o.max_segment_bytes;
  size_t pos = 0, run = 0, i = 0, i0 = 0;
  while (i < nrec) {
    const tlc_rec_t *r = &recs[i];
    if (t->seg.fd < 0) {
      int rc = w_open_seg(s, t);
      if (rc < 0) {
        uint64_t lost = nrec - i;
        if (is_nospace(rc)) {
          w_count_drop(s, t, 1, lost, len - pos);
          t->pause_rec += lost;
          w_disk_full(s, t, rc);
        } else {
          w_count_drop(s, t, 2, lost, len - pos);
          w_add_gap(t, "io_error", lost);
          LOCKED(s, s->c.io_errors++);
          wlog(s, TLC_LOG_ERR, "%s: cannot open a segment in %s: %s; %" PRIu64 " records dropped",
               t->name, t->dir, tlc_strerror(rc), lost);
        }
        return;
      }
    }
    uint64_t cur = t->seg.m.bytes + (pos - run);
    if (cur > 0 && cur + r->len > maxseg) {
      int arc = pos > run ? w_append(s, t, buf + run, pos - run, recs + i0, i - i0) : 0;
      if (arc < 0) {
        /* w_append counted what it could not write; the rest of the chunk is lost too */
        uint64_t lost = nrec - i;
        w_count_drop(s, t, is_nospace(arc) ? 1 : 2, lost, len - pos);
        if (is_nospace(arc))
          t->pause_rec += lost;
        else
          w_add_gap(t, "io_error", lost);
        return;
      }
      run = pos;
      i0 = i;
      w_seal(s, t, TLC_ROT_SIZE);
      continue; /* reopens at the top */
    }
    pos += r->len;
    i++;
  }
  if (pos > run && t->seg.fd >= 0 && w_append(s, t, buf + run, pos - run, recs + i0, i - i0) < 0)
    return;
  w_sync_policy(s, t, mono(s));
}

/* bin1x records with their times (tlc_store_write_chunk): no scan; a size rotation cuts at a
 * multiple of 24 bytes */
static void w_data_fixed(tlc_store_t *s, tlc_store_target_t *t, const uint8_t *buf, size_t nrec,
                         const int64_t *times) {
  const size_t R = TLC_BIN1X_RECORD;
  if (s->disk_full) {
    w_count_drop(s, t, 1, nrec, nrec * R);
    t->pause_rec += nrec;
    return;
  }
  uint64_t maxseg = s->o.max_segment_bytes;
  size_t pos = 0;
  while (pos < nrec) {
    if (t->seg.fd < 0) {
      int rc = w_open_seg(s, t);
      if (rc < 0) {
        uint64_t lost = nrec - pos;
        if (is_nospace(rc)) {
          w_count_drop(s, t, 1, lost, lost * R);
          t->pause_rec += lost;
          w_disk_full(s, t, rc);
        } else {
          w_count_drop(s, t, 2, lost, lost * R);
          w_add_gap(t, "io_error", lost);
          LOCKED(s, s->c.io_errors++);
          wlog(s, TLC_LOG_ERR, "%s: cannot open a segment in %s: %s; %" PRIu64 " records dropped",
               t->name, t->dir, tlc_strerror(rc), lost);
        }
        return;
      }
    }
    uint64_t cur = t->seg.m.bytes;
    size_t k = nrec - pos;
    if (cur + k * R > maxseg) {
      uint64_t room = maxseg > cur ? (maxseg - cur) / R : 0;
      k = room > 0 ? (size_t)room : cur == 0 ? 1 : 0;
    }
    if (k > 0) {
      uint64_t wrec, wbytes;
      int rc = tlc__seg_append_fixed(&t->seg, buf + pos * R, k, times + pos, &wrec, &wbytes);
      LOCKED(s, s->c.records_written += wrec; s->c.bytes_written += wbytes;
             t->c.records_written += wrec; t->c.bytes_written += wbytes;
             t->c.segment_bytes = t->seg.m.bytes);
      if (rc < 0) {
        uint64_t lost = nrec - pos - wrec; /* this write's rest and the chunk's */
        if (is_nospace(rc)) {
          w_count_drop(s, t, 1, lost, lost * R);
          t->pause_rec += lost;
          w_disk_full(s, t, rc);
        } else {
          w_count_drop(s, t, 2, lost, lost * R);
          tlc__manifest_add_gap(&t->seg.m, "io_error", lost);
          LOCKED(s, s->c.io_errors++);
          t->seg.suspect = 1;
          wlog(s, TLC_LOG_ERR,
               "%s: write to %s/%s.part failed (%s): %" PRIu64 " records dropped; rotating",
               t->name, t->dir, t->seg.data, tlc_strerror(rc), lost);
          w_seal(s, t, TLC_ROT_IO_ERROR);
        }
        return;
      }
      pos += k;
    }
    if (pos < nrec)
      w_seal(s, t, TLC_ROT_SIZE); /* reopens at the top */
  }
  w_sync_policy(s, t, mono(s));
}

static void w_probe(tlc_store_t *s, int64_t now) {
  if (!s->disk_full || now < s->next_probe)
    return;
  s->next_probe = now + s->o.probe_interval_ms * 1000000;
  w_retention(s);
  tlc_io_space_t sp;
  int rc = tlc_io->statvfs(s->state_dir, &sp);
  if (rc == 0 && (sp.avail_bytes < s->o.resume_free_bytes || sp.avail_inodes < 4))
    return;
  s->disk_full = 0;
  uint64_t lost = 0;
  for (tlc_store_target_t *t = s->wlist; t; t = t->wnext) {
    if (t->pause_rec > 0)
      w_add_gap(t, "disk_full", t->pause_rec);
    lost += t->pause_rec;
    t->pause_rec = 0;
  }
  LOCKED(s, s->c.disk_full = 0);
  sjob_t *j = tlc_calloc(1, sizeof *j);
  if (j) { /* the sealer writes the manifests it could not write */
    j->kind = J_RETRY;
    push_job(s, j);
  }
  wlog(s, TLC_LOG_NOTICE, "disk space is back: capture resumed (%" PRIu64 " records were dropped)",
       lost);
  wevent(s, TLC_SEV_RESUMED, NULL, s->state_dir, 0, 0);
  s->df_log_last = 0;
}

static void w_tick(tlc_store_t *s) {
  int64_t now = mono(s);
  if (now < s->next_tick)
    return;
  s->next_tick = now + TICK_NS / 2;
  for (tlc_store_target_t *t = s->wlist; t; t = t->wnext) {
    if (t->seg.fd >= 0 && s->o.max_segment_age_ms > 0 &&
        now - t->seg.opened_mono >= s->o.max_segment_age_ms * 1000000)
      w_seal(s, t, TLC_ROT_AGE);
    w_sync_policy(s, t, now);
  }
  w_probe(s, now);
  if (now >= s->next_retention)
    w_retention(s);
}

static void apply_defaults(tlc_store_opts_t *o) {
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

/* The storage position of everything queued before a mark: in the open segment, or (none open)
 * at the start of the next one, whose sequence is fixed now. Disconnect gaps recorded there so
 * far are counted, so that a replay from the position skips exactly them. */
static uint64_t disc_count(const tlc_gap_t *g, size_t n) {
  uint64_t k = 0;
  for (size_t i = 0; i < n; i++)
    if (strcmp(g[i].reason, "disconnect") == 0)
      k += g[i].count;
  return k;
}

static void w_mark(tlc_store_t *s, tlc_store_target_t *t, cmd_t *c) {
  res_t *r = tlc_calloc(1, sizeof *r);
  if (!r)
    return; /* the caller's mark is lost: it counts a checkpoint without a position */
  r->type = R_MARK;
  r->mcb = c->mcb;
  r->ud = c->ud;
  if (t->seg.fd >= 0) {
    r->pos.seq = t->seg.seq;
    r->pos.bytes = t->seg.m.bytes;
    r->pos.disconnects = disc_count(t->seg.m.gaps, t->seg.m.ngaps);
  } else {
    learn_next_seq(s, t);
    r->pos.seq = t->next_seq;
    r->pos.bytes = 0;
    for (size_t i = 0; i < t->npg; i++)
      if (strcmp(t->pg[i].reason, "disconnect") == 0)
        r->pos.disconnects += t->pg[i].count;
  }
  r->pos.valid = 1;
  push_res(s, r);
}

static void w_cmd(tlc_store_t *s, cmd_t *c) {
  tlc_store_target_t *t = c->t;
  switch (c->type) {
  case C_OPEN:
    t->wnext = s->wlist;
    s->wlist = t;
    break;
  case C_DATA:
    if (c->times)
      w_data_fixed(s, t, c->buf, (size_t)c->nrec, c->times);
    else
      w_data(s, t, c->buf, c->len, c->nrec, c->recs);
    break;
  case C_GAP:
    w_add_gap(t, c->reason, c->count);
    break;
  case C_ROTATE:
    w_seal(s, t, c->rot);
    break;
  case C_CLOSE: {
    w_seal(s, t, TLC_ROT_SHUTDOWN);
    for (tlc_store_target_t **pp = &s->wlist; *pp; pp = &(*pp)->wnext)
      if (*pp == t) {
        *pp = t->wnext;
        break;
      }
    res_t *r = tlc_calloc(1, sizeof *r);
    if (r) { /* without it the target leaks until tlc_store_close frees the rest */
      r->type = R_CLOSED;
      r->t = t;
      push_res(s, r);
    }
    break;
  }
  case C_RETENTION:
    w_retention(s);
    break;
  case C_SETMAP:
    tmap_unref(s, t->wmap);
    t->wmap = c->map; /* the command's reference */
    c->map = NULL;
    break;
  case C_SETCONF:
    t->tc = c->tc;
    break;
  case C_SKIP:
    w_skip(s, t, c->buf, c->len, c->count);
    break;
  case C_RECEXPORT:
    if (s->rx)
      w_release_rx(s, t);
    break;
  case C_MARK:
    w_mark(s, t, c);
    break;
  case C_BARRIER: {
    res_t *r = tlc_calloc(1, sizeof *r);
    if (r) {
      r->type = R_BARRIER;
      r->cb = c->cb;
      r->ud = c->ud;
      /* through the sealer's queue: answered once the seals before it are done too */
      sjob_t *j = tlc_calloc(1, sizeof *j);
      if (j) {
        j->kind = J_BARRIER;
        j->res = r;
        push_job(s, j);
      } else {
        w_wait_sealer(s, 0);
        push_res(s, r);
      }
    }
    break;
  }
  case C_RECONF: {
    tlc_store_opts_t *n = c->conf;
    uv_mutex_lock(&s->mu); /* the sealer reads the retention budgets */
    s->o.max_segment_bytes = n->max_segment_bytes;
    s->o.max_segment_age_ms = n->max_segment_age_ms;
    s->o.max_total_bytes = n->max_total_bytes;
    s->o.max_target_bytes = n->max_target_bytes;
    s->o.max_segments = n->max_segments;
    s->o.max_age_ms = n->max_age_ms;
    s->o.min_free_bytes = n->min_free_bytes;
    s->o.sync_mode = n->sync_mode;
    s->o.sync_interval_ms = n->sync_interval_ms;
    s->o.sync_bytes = n->sync_bytes;
    s->o.retention_interval_ms = n->retention_interval_ms;
    apply_defaults(&s->o);
    uv_mutex_unlock(&s->mu);
    w_retention(s);
    break;
  }
  default:
    break;
  }
}

static void writer_main(void *arg) {
  tlc_store_t *s = arg;
  s->next_tick = 0;
  s->next_retention = mono(s) + s->o.retention_interval_ms * 1000000;
  for (;;) {
    int flow_wake = 0;
    uv_mutex_lock(&s->mu);
    if (!s->qh)
      uv_cond_timedwait(&s->cv, &s->mu, (uint64_t)TICK_NS);
    cmd_t *c = s->qh;
    if (c) {
      s->qh = c->next;
      if (!s->qh)
        s->qt = NULL;
      s->qbytes -= c->len;
      if (c->t) {
        c->t->qb -= c->len;
        if (c->t->paused && !c->t->resume_due && flow_low(s, c->t)) {
          c->t->resume_due = 1;
          flow_wake = 1;
        }
      }
      s->c.queue_bytes = s->qbytes;
    }
    uv_mutex_unlock(&s->mu);
    if (flow_wake)
      uv_async_send(&s->async); /* the loop resumes the target (flow_resume) */
    if (c) {
      int stop = c->type == C_STOP;
      if (!stop) {
        w_cmd(s, c);
      } else {
        w_release_rx(s, NULL); /* no target of theirs was configured: without settings */
        stop_sealer(s);        /* seals and exports what it holds first */
      }
      tlc_free(c->buf);
      tlc_free(c->times);
      tlc_free(c->recs);
      tlc_free(c->conf);
      tmap_unref(s, c->map);
      tlc_free(c);
      if (stop)
        break;
    }
    w_tick(s);
    int64_t hb = mono(s);
    LOCKED(s, s->c.writer_heartbeat_ns = hb);
  }
  res_t *r = tlc_calloc(1, sizeof *r);
  uv_mutex_lock(&s->mu);
  s->thr_exited = 1;
  uv_mutex_unlock(&s->mu);
  if (r) {
    r->type = R_STOPPED;
    push_res(s, r);
  } else {
    uv_async_send(&s->async);
  }
}

/* ---- loop side: queue ---- */

static void gather_flush(tlc_store_target_t *t);

static void gather_flush_all(tlc_store_t *s) {
  while (s->gather)
    gather_flush(s->gather);
}

static int enqueue_raw(tlc_store_t *s, cmd_t *c, int droppable);

/* Queues a command after the records gathered before it: those of its target, or of every
 * target for a store-wide command, so that the writer sees everything in call order. */
static int enqueue(tlc_store_t *s, cmd_t *c, int droppable) {
  if (c->t) {
    if (c->t->gq)
      gather_flush(c->t);
  } else {
    gather_flush_all(s);
  }
  return enqueue_raw(s, c, droppable);
}

/* droppable: 0 never dropped, 1 dropped when over the cap, Q_RESERVED its bytes are counted in
 * qbytes already (gathered records, see tlc_store_write_chunk) */
#define Q_RESERVED 2
static int enqueue_raw(tlc_store_t *s, cmd_t *c, int droppable) {
  uv_mutex_lock(&s->mu);
  if (droppable == 1 && s->qbytes + c->len > s->qcap) {
    uv_mutex_unlock(&s->mu);
    return TLC_ELIMIT;
  }
  c->next = NULL;
  if (s->qt)
    s->qt->next = c;
  else
    s->qh = c;
  s->qt = c;
  if (droppable != Q_RESERVED) {
    s->qbytes += c->len;
    if (c->t)
      c->t->qb += c->len;
  }
  s->c.queue_bytes = s->qbytes;
  if (s->qbytes > s->c.queue_peak_bytes)
    s->c.queue_peak_bytes = s->qbytes;
  uv_cond_signal(&s->cv);
  uv_mutex_unlock(&s->mu);
  return 0;
}

static int ctl(tlc_store_t *s, int type, tlc_store_target_t *t, const char *reason, uint64_t count,
               int rot) {
  cmd_t *c = tlc_calloc(1, sizeof *c);
  if (!c)
    return TLC_ENOMEM;
  c->type = type;
  c->t = t;
  c->count = count;
  c->rot = rot;
  if (reason)
    snprintf(c->reason, sizeof c->reason, "%s", reason);
  return enqueue(s, c, 0);
}

static void count_buffer_full(tlc_store_target_t *t, uint64_t nrec, size_t len) {
  tlc_store_t *s = t->s;
  uv_mutex_lock(&s->mu);
  s->c.dropped_buffer_full_records += nrec;
  s->c.dropped_buffer_full_bytes += len;
  t->c.dropped_records += nrec;
  t->c.dropped_bytes += len;
  uv_mutex_unlock(&s->mu);
  t->pend_drop_rec += nrec;
}

/* takes ownership of buf and times (bin1x: each record's time; NULL for evlog); `counted`: the
 * records are in records_in already */
static int submit(tlc_store_target_t *t, uint8_t *buf, size_t len, uint64_t nrec, tlc_rec_t *recs) {
  tlc_store_t *s = t->s;
  if (nrec == 0) {
    tlc_free(buf);
    tlc_free(recs);
    return 0;
  }
  LOCKED(s, s->c.records_in += nrec; s->c.bytes_in += len; t->c.records_in += nrec;
         t->c.bytes_in += len);
  cmd_t *c = tlc_calloc(1, sizeof *c);
  if (!c) {
    tlc_free(buf);
    tlc_free(recs);
    count_buffer_full(t, nrec, len);
    return TLC_ENOMEM;
  }
  c->type = C_DATA;
  c->t = t;
  c->buf = buf;
  c->len = len;
  c->nrec = nrec;
  c->recs = recs;
  if (t->pend_drop_rec > 0) {
    /* the gap goes before these records; if the data is dropped too, it grows instead */
    uv_mutex_lock(&s->mu);
    int fits = s->qbytes + len <= s->qcap;
    uv_mutex_unlock(&s->mu);
    if (fits && ctl(s, C_GAP, t, "buffer_full", t->pend_drop_rec, 0) == 0)
      t->pend_drop_rec = 0;
  }
  if (enqueue(s, c, 1) < 0) {
    tlc_free(buf);
    tlc_free(recs);
    tlc_free(c);
    count_buffer_full(t, nrec, len);
  }
  flow_check(t);
  return 0;
}

/* gives back queue room reserved for gathered records that will not be queued */
static void unreserve(tlc_store_target_t *t, size_t len) {
  LOCKED(t->s, t->s->qbytes -= len; t->qb -= len; t->s->c.queue_bytes = t->s->qbytes);
}

/* queues the target's gathered bin1x records (in records_in, their queue room reserved when
 * they were gathered) as one command */
static void gather_flush(tlc_store_target_t *t) {
  tlc_store_t *s = t->s;
  for (tlc_store_target_t **pp = &s->gather; *pp; pp = &(*pp)->gnext)
    if (*pp == t) {
      *pp = t->gnext;
      break;
    }
  t->gq = 0;
  size_t n = t->gn, len = n * TLC_BIN1X_RECORD;
  cmd_t *c = n > 0 ? tlc_calloc(1, sizeof *c) : NULL;
  if (!c) {
    if (n > 0) {
      unreserve(t, len);
      count_buffer_full(t, n, len);
    }
    t->gn = 0; /* the buffers are kept for the next records */
    return;
  }
  c->type = C_DATA;
  c->t = t;
  c->buf = t->gb;
  c->len = len;
  c->nrec = n;
  c->times = t->gt;
  t->gb = NULL;
  t->gt = NULL;
  t->gn = 0;
  enqueue_raw(s, c, Q_RESERVED);
}

static void on_prepare(uv_prepare_t *h) {
  gather_flush_all(h->data);
}

/* takes the bytes the encoder wrote into `o` (whole blocks) and queues them */
static int submit_out(tlc_store_target_t *t, tlc_out_t *o, uint64_t blocks_before) {
  size_t len = 0;
  int rc = o->err;
  uint64_t nrec = t->enc.blocks - blocks_before;
  uint8_t *buf = (uint8_t *)tlc_out_take(o, &len);
  tlc_rec_t *recs = t->ed;
  int whole = t->ned == nrec && !t->ed_err; /* a descriptor for every block written */
  t->ed = NULL;
  t->ned = t->ced = 0;
  t->ed_err = 0;
  tlc_out_fini(o);
  if (buf && !whole) { /* no memory for the descriptors: the blocks are dropped and counted */
    LOCKED(t->s, t->s->c.records_in += nrec; t->s->c.bytes_in += len; t->c.records_in += nrec;
           t->c.bytes_in += len);
    count_buffer_full(t, nrec, len);
    tlc_free(buf);
    tlc_free(recs);
    return TLC_ENOMEM;
  }
  if (!buf) {
    tlc_free(recs);
    if (nrec > 0) {
      LOCKED(t->s, t->s->c.records_in += nrec; t->c.records_in += nrec);
      count_buffer_full(t, nrec, 0);
    }
    return rc < 0 ? rc : TLC_ENOMEM;
  }
  if (len == 0) {
    tlc_free(buf);
    tlc_free(recs);
    return 0;
  }
  return submit(t, buf, len, nrec, recs);
}

/* evlog: a block the encoder wrote (`len` bytes): the items and times collected for it become
 * its descriptor for the writer (what the manifest needs), so that the writer never re-reads
 * the block */
static void ea_done(tlc_store_target_t *t, uint64_t len) {
  if (t->ned == t->ced) {
    tlc_rec_t *nr = tlc_grow(t->ed, &t->ced, t->ned + 1, sizeof *nr, 16);
    if (!nr) {
      t->ed_err = 1;
      t->ea = (tlc_rec_t){ 0, INT64_MAX, INT64_MIN, 0 };
      return;
    }
    t->ed = nr;
  }
  t->ea.len = (size_t)len;
  t->ed[t->ned++] = t->ea;
  t->ea = (tlc_rec_t){ 0, INT64_MAX, INT64_MIN, 0 };
}

static void ea_item(tlc_store_target_t *t, const tlc_evlog_ext_t *x) {
  int64_t ns;
  t->ea.items++;
  if (tlc_evlog_index_time(x->tim, &ns)) {
    if (ns < t->ea.tmin)
      t->ea.tmin = ns;
    if (ns > t->ea.tmax)
      t->ea.tmax = ns;
  }
}

/* ---- loop side: keep_skipped ----
 *
 * The stream bytes after the last record/block that tlc_store_write saw are held (from
 * tlc_store_bytes, at most keep_skipped of them, plus for bin1x the resync decoder's look-ahead,
 * the ones right after that record: a skipped run starts there) until the next record shows
 * where they end: the bytes between are not in
 * any segment, so they are queued for the .skipped file (C_SKIP); what was not held is counted.
 * Cost per record: a comparison; per received byte: one copy while it is past the last record.
 */

static void sk_emit(tlc_store_target_t *t, uint64_t a, uint64_t b) {
  uint64_t lo = a > t->sk_kbase + t->sk_head ? a : t->sk_kbase + t->sk_head;
  uint64_t hi = b < t->sk_kbase + t->sk_len ? b : t->sk_kbase + t->sk_len;
  size_t k = hi > lo ? (size_t)(hi - lo) : 0;
  if (k > 0 && t->sk_olen + k > t->sk_ocap) {
    uint8_t *nb = tlc_grow(t->sk_out, &t->sk_ocap, t->sk_olen + k, 1, 4096);
    if (!nb)
      k = 0;
    else
      t->sk_out = nb;
  }
  if (k > 0) {
    memcpy(t->sk_out + t->sk_olen, t->sk_buf + (lo - t->sk_kbase), k);
    t->sk_olen += k;
  }
  t->sk_unkept += (b - a) - k;
}

/* a record/block occupies stream bytes [rs, re): what lies between the last one and it was
 * skipped */
static void sk_cover(tlc_store_target_t *t, uint64_t rs, uint64_t re) {
  if (rs > t->sk_base)
    sk_emit(t, t->sk_base, rs);
  if (re > t->sk_base)
    t->sk_base = re;
  if (t->sk_kbase + t->sk_head < t->sk_base) {
    uint64_t d = t->sk_base - t->sk_kbase;
    t->sk_head = d < t->sk_len ? (size_t)d : t->sk_len;
    if (t->sk_head == t->sk_len)
      t->sk_head = t->sk_len = 0; /* nothing held; sk_kbase is set by the next bytes */
  }
}

static void sk_flush(tlc_store_target_t *t) {
  tlc_store_t *s = t->s;
  if (t->sk_olen == 0 && t->sk_unkept == 0)
    return;
  cmd_t *c = tlc_calloc(1, sizeof *c);
  if (c) {
    c->type = C_SKIP;
    c->t = t;
    c->count = t->sk_unkept;
    if (t->sk_olen > 0) {
      c->buf = tlc_malloc(t->sk_olen);
      if (c->buf) {
        memcpy(c->buf, t->sk_out, t->sk_olen);
        c->len = t->sk_olen;
      }
    }
    if (c->len > 0 && enqueue(s, c, 1) == 0) {
      t->sk_olen = 0;
      t->sk_unkept = 0;
      return;
    }
    /* no memory or the queue is full: only the count goes (a control command) */
    tlc_free(c->buf);
    c->buf = NULL;
    c->len = 0;
    c->count = t->sk_unkept + t->sk_olen;
    if (enqueue(s, c, 0) == 0) {
      t->sk_olen = 0;
      t->sk_unkept = 0;
    }
  }
}

void tlc_store_bytes(tlc_store_target_t *t, const uint8_t *buf, size_t len, uint64_t off) {
  if (!t || len == 0 || t->s->o.keep_skipped == 0)
    return;
  if (!t->sk_started) {
    t->sk_started = 1;
    t->sk_base = off;
  }
  if (off + len <= t->sk_base) {
    t->sk_end = off + len; /* inside a block already covered (evlog delivers items early) */
    return;
  }
  if (off < t->sk_base) {
    buf += t->sk_base - off;
    len -= (size_t)(t->sk_base - off);
    off = t->sk_base;
  }
  if (t->sk_len == 0)
    t->sk_kbase = off;
  if (t->sk_kbase + t->sk_len == off) { /* contiguous with what is held: hold more */
    /* bin1x: the records the resync decoder holds back for confirmation (at most
     * TLC_BIN1X_HOLD bytes) come before a skipped run; an evlog run starts right after the
     * last block delivered */
    uint64_t keep =
        t->s->o.keep_skipped + (t->format == TLC_FMT_EVLOG ? 0 : (uint64_t)TLC_BIN1X_HOLD);
    if (t->sk_len + len > t->sk_cap && t->sk_head > 0) {
      memmove(t->sk_buf, t->sk_buf + t->sk_head, t->sk_len - t->sk_head);
      t->sk_kbase += t->sk_head;
      t->sk_len -= t->sk_head;
      t->sk_head = 0;
    }
    if (t->sk_len + len > t->sk_cap && t->sk_cap < keep) {
      size_t nc = t->sk_cap ? t->sk_cap : 4096;
      while (nc < t->sk_len + len && nc < keep)
        nc *= 2;
      if (nc > keep)
        nc = (size_t)keep;
      uint8_t *nb = tlc_realloc(t->sk_buf, nc);
      if (nb) {
        t->sk_buf = nb;
        t->sk_cap = nc;
      }
    }
    size_t k = t->sk_cap - t->sk_len < len ? t->sk_cap - t->sk_len : len;
    if (k > 0)
      memcpy(t->sk_buf + t->sk_len, buf, k);
    t->sk_len += k;
  }
  t->sk_end = off + len;
}

void tlc_store_stream_end(tlc_store_target_t *t) {
  if (!t || t->s->o.keep_skipped == 0 || !t->sk_started)
    return;
  sk_cover(t, t->sk_end, t->sk_end);
  sk_flush(t);
}

/* the record/block spans of decoded events (bin1x: 24 bytes at the event's offset; evlog: the
 * item's whole block, once) */
static void sk_events(tlc_store_target_t *t, const tlc_event_t *ev, size_t n) {
  if (!t->sk_started)
    return;
  for (size_t i = 0; i < n; i++) {
    if (ev[i].flags & TLC_EVF_SYNTH)
      continue;
    if (t->format != TLC_FMT_EVLOG) {
      sk_cover(t, ev[i].offset, ev[i].offset + TLC_BIN1X_RECORD);
    } else if (ev[i].evlog && ev[i].evlog->block_offset + 1 != t->sk_blk) {
      const tlc_evlog_ext_t *x = ev[i].evlog;
      t->sk_blk = x->block_offset + 1;
      sk_cover(t, x->block_offset, x->block_offset + 12 + (uint64_t)x->block_size);
    }
  }
  sk_flush(t);
}

static int write_evlog(tlc_store_target_t *t, const tlc_event_t *ev, size_t n) {
  tlc_out_t o;
  uint64_t before = t->enc.blocks;
  int rc = 0;
  tlc_out_init(&o, 0, NULL, NULL);
  for (size_t i = 0; i < n; i++) {
    if (!ev[i].evlog || (ev[i].flags & TLC_EVF_SYNTH))
      continue;
    uint64_t b0 = t->enc.blocks, l0 = o.total;
    int r = tlc_evlog_enc_add(&t->enc, &ev[i], &o);
    if (t->enc.blocks != b0)
      ea_done(t, o.total - l0); /* the open block was written: this item starts the next */
    if (r == 0)
      ea_item(t, ev[i].evlog);
    if (r < 0) {
      LOCKED(t->s, t->s->c.records_in++; t->c.records_in++);
      count_buffer_full(t, 1, 0); /* an item the encoder refused: counted, never silent */
      rc = r;
      continue;
    }
    if (ev[i].flags & TLC_EVF_BLOCK_END) {
      b0 = t->enc.blocks;
      l0 = o.total;
      tlc_evlog_enc_flush(&t->enc, &o);
      if (t->enc.blocks != b0)
        ea_done(t, o.total - l0);
    }
  }
  int src = submit_out(t, &o, before);
  return rc < 0 ? rc : src;
}

int tlc_store_write(tlc_store_target_t *t, const tlc_event_t *ev, size_t n) {
  return tlc_store_write_chunk(t, ev, n, NULL, 0, 0);
}

int tlc_store_write_chunk(tlc_store_target_t *t, const tlc_event_t *ev, size_t n,
                          const uint8_t *chunk, size_t clen, uint64_t coff) {
  if (!t || n == 0)
    return 0;
  tlc_store_t *s = t->s;
  if (s->o.keep_skipped)
    sk_events(t, ev, n); /* the skipped bytes go before these records */
  if (t->format == TLC_FMT_EVLOG)
    return write_evlog(t, ev, n);
  size_t k = 0;
  for (size_t i = 0; i < n; i++)
    k += !(ev[i].flags & TLC_EVF_SYNTH);
  if (k == 0)
    return 0;
  /* The queue room is taken now, so that the records are dropped (or not) as they come, as
   * if each call were queued at once. */
  size_t klen = k * TLC_BIN1X_RECORD;
  int fits;
  uv_mutex_lock(&s->mu);
  s->c.records_in += k;
  s->c.bytes_in += klen;
  t->c.records_in += k;
  t->c.bytes_in += klen;
  fits = s->qbytes + klen <= s->qcap;
  if (fits) {
    s->qbytes += klen;
    t->qb += klen;
    s->c.queue_bytes = s->qbytes;
    if (s->qbytes > s->c.queue_peak_bytes)
      s->c.queue_peak_bytes = s->qbytes;
  }
  uv_mutex_unlock(&s->mu);
  if (!fits) {
    count_buffer_full(t, k, klen);
    return 0;
  }
  if (t->pend_drop_rec > 0 && ctl(s, C_GAP, t, "buffer_full", t->pend_drop_rec, 0) == 0)
    t->pend_drop_rec = 0; /* after the records gathered before the drop, before these */
  const size_t R = TLC_BIN1X_RECORD;
  for (size_t i = 0; i < n;) {
    if (ev[i].flags & TLC_EVF_SYNTH) {
      i++;
      continue;
    }
    if (t->gn == s->gather_max)
      gather_flush(t);
    if (!t->gb) {
      t->gb = tlc_malloc(s->gather_max * R);
      t->gt = tlc_malloc(s->gather_max * sizeof *t->gt);
      if (!t->gb || !t->gt) {
        tlc_free(t->gb);
        tlc_free(t->gt);
        t->gb = NULL;
        t->gt = NULL;
        uint64_t left = 0;
        for (; i < n; i++)
          left += !(ev[i].flags & TLC_EVF_SYNTH);
        unreserve(t, left * R);
        count_buffer_full(t, left, left * R);
        if (t->gn > 0 && !t->gq) {
          t->gq = 1;
          t->gnext = s->gather;
          s->gather = t;
        }
        return TLC_ENOMEM;
      }
    }
    /* The records' bytes as received: a run of records lying one after the other in the chunk
     * is copied at once. A record that began in an earlier chunk (or with no chunk given) is
     * encoded from its fields, which gives the same bytes (tlc_bin1x_encode keeps the
     * received flags word). */
    uint8_t *dst = t->gb + t->gn * R;
    uint64_t o = ev[i].offset - coff;
    if (chunk && ev[i].offset >= coff && o < clen && clen - o >= R) {
      size_t room = s->gather_max - t->gn, j = i + 1;
      size_t fit = (size_t)((clen - o) / R); /* whole records the chunk holds from o */
      size_t lim = n - i < room ? n - i : room;
      if (lim > fit)
        lim = fit;
      while (j - i < lim && !(ev[j].flags & TLC_EVF_SYNTH) &&
             ev[j].offset == ev[i].offset + (j - i) * R)
        j++;
      memcpy(dst, chunk + o, (j - i) * R);
      for (size_t q = i; q < j; q++)
        t->gt[t->gn++] = ev[q].time_ns;
      i = j;
    } else {
      tlc_bin1x_encode(t->format, &ev[i], dst);
      t->gt[t->gn++] = ev[i].time_ns;
      i++;
    }
  }
  if (t->gn > 0 && !t->gq) {
    t->gq = 1;
    t->gnext = s->gather;
    s->gather = t;
  }
  flow_check(t);
  return 0;
}

/* ---- loop side: exports of segments found at start ----
 *
 * Recovery leaves the exports of the segments it sealed (or found without one) with the writer
 * (s->rx) until a target of their name is configured. The first tlc_store_target_configure or
 * tlc_store_target_set_mapping of a target marks it; the C_RECEXPORT that releases them is
 * queued once the caller's callback has returned (the store's async callback), or before a
 * barrier or the target's close, so that it comes after every setting given together (tlcapd
 * gives the context area and the mapping in one callback). */

static void rx_mark(tlc_store_target_t *t) {
  tlc_store_t *s = t->s;
  if (!s->rx_any || t->rx_state != 0)
    return;
  t->rx_state = 1;
  s->rx_kick = 1;
  uv_async_send(&s->async);
}

static void rx_queue(tlc_store_target_t *t) {
  if (t->rx_state == 1 && ctl(t->s, C_RECEXPORT, t, NULL, 0, 0) == 0)
    t->rx_state = 2; /* without memory: the exports are written at shutdown, without settings */
}

static void rx_flush(tlc_store_t *s) {
  if (!s->rx_kick)
    return;
  s->rx_kick = 0;
  for (tlc_store_target_t *t = s->targets; t; t = t->next)
    rx_queue(t);
}

int tlc_store_target_configure(tlc_store_target_t *t, const tlc_store_tconf_t *conf) {
  if (!t || !conf)
    return TLC_EINVAL;
  cmd_t *c = tlc_calloc(1, sizeof *c);
  if (!c)
    return TLC_ENOMEM;
  c->type = C_SETCONF;
  c->t = t;
  c->tc = *conf;
  int rc = enqueue(t->s, c, 0);
  if (rc == 0)
    rx_mark(t);
  return rc;
}

int tlc_store_target_set_mapping(tlc_store_target_t *t, const tlc_mapping_t *mapping) {
  if (!t)
    return TLC_EINVAL;
  cmd_t *c = tlc_calloc(1, sizeof *c);
  if (!c)
    return TLC_ENOMEM;
  if (mapping && !(c->map = tmap_copy(mapping))) {
    tlc_free(c);
    return TLC_ENOMEM;
  }
  c->type = C_SETMAP;
  c->t = t;
  int rc = enqueue(t->s, c, 0);
  if (rc == 0)
    rx_mark(t);
  return rc;
}

int tlc_store_gap(tlc_store_target_t *t, const char *reason, uint64_t count) {
  if (!t)
    return TLC_EINVAL;
  return ctl(t->s, C_GAP, t, reason ? reason : "unknown", count, 0);
}

static int flush_block(tlc_store_target_t *t) {
  if (t->format != TLC_FMT_EVLOG)
    return 0;
  tlc_out_t o;
  uint64_t before = t->enc.blocks;
  tlc_out_init(&o, 0, NULL, NULL);
  tlc_evlog_enc_flush(&t->enc, &o);
  if (t->enc.blocks != before)
    ea_done(t, o.total);
  return submit_out(t, &o, before);
}

int tlc_store_rotate(tlc_store_target_t *t, int reason) {
  if (!t)
    return TLC_EINVAL;
  flush_block(t);
  return ctl(t->s, C_ROTATE, t, NULL, 0, reason);
}

int tlc_store_rotate_all(tlc_store_t *s, int reason) {
  int rc = 0;
  for (tlc_store_target_t *t = s->targets; t; t = t->next) {
    int r = tlc_store_rotate(t, reason);
    if (r < 0)
      rc = r;
  }
  return rc;
}

int tlc_store_barrier(tlc_store_t *s, void (*cb)(void *), void *ud) {
  rx_flush(s); /* a barrier covers the exports released before it */
  cmd_t *c = tlc_calloc(1, sizeof *c);
  if (!c)
    return TLC_ENOMEM;
  c->type = C_BARRIER;
  c->cb = cb;
  c->ud = ud;
  return enqueue(s, c, 0);
}

int tlc_store_target_mid_block(const tlc_store_target_t *t) {
  return t != NULL && t->format == TLC_FMT_EVLOG && t->enc.open;
}

int tlc_store_mark(tlc_store_target_t *t, tlc_store_mark_fn cb, void *ud) {
  cmd_t *c;
  /* evlog: the items of a block still open are counted by the engine already; the block is
   * cut here (as a rotation cuts it) so that they are before the mark */
  if (flush_block(t) < 0)
    return TLC_ENOMEM;
  c = tlc_calloc(1, sizeof *c);
  if (!c)
    return TLC_ENOMEM;
  c->type = C_MARK;
  c->t = t;
  c->mcb = cb;
  c->ud = ud;
  return enqueue(t->s, c, 0);
}

void tlc_store_retention_now(tlc_store_t *s) {
  ctl(s, C_RETENTION, NULL, NULL, 0, 0);
}

void tlc_store_reconfigure(tlc_store_t *s, const tlc_store_opts_t *opts) {
  cmd_t *c = tlc_calloc(1, sizeof *c);
  tlc_store_opts_t *o = tlc_malloc(sizeof *o);
  if (!c || !o) {
    tlc_free(c);
    tlc_free(o);
    log_direct(s, TLC_LOG_ERR, "reconfigure: out of memory; old limits kept");
    return;
  }
  *o = *opts;
  c->type = C_RECONF;
  c->conf = o;
  enqueue(s, c, 0);
}

int tlc_store_target_open(tlc_store_t *s, const char *name, tlc_format_t format,
                          tlc_store_target_t **out) {
  size_t n = name ? strlen(name) : 0;
  *out = NULL;
  if (s->closing)
    return TLC_ELIMIT;
  if (n == 0 || !target_name_ok(name) ||
      (format != TLC_FMT_BIN10 && format != TLC_FMT_BIN11 && format != TLC_FMT_EVLOG))
    return TLC_EINVAL;
  if (!s->thr_started)
    return TLC_EINVAL; /* tlc_store_recover first */
  for (tlc_store_target_t *o = s->targets; o; o = o->next)
    if (strcmp(o->name, name) == 0)
      return TLC_EINVAL; /* one writer per directory */
  tlc_store_target_t *t = tlc_calloc(1, sizeof *t);
  if (!t)
    return TLC_ENOMEM;
  t->s = s;
  memcpy(t->name, name, n + 1);
  t->format = format;
  tlc__seg_init(&t->seg);
  t->ea = (tlc_rec_t){ 0, INT64_MAX, INT64_MIN, 0 };
  tlc_evlog_enc_opts_t eo = { s->o.max_block, 0, 0 };
  if (format == TLC_FMT_EVLOG && tlc_evlog_enc_init(&t->enc, &eo) < 0) {
    tlc_free(t);
    return TLC_EINVAL;
  }
  if (tlc__path(t->dir, sizeof t->dir, "%s/%s", s->state_dir, name) < 0) {
    tlc_free(t);
    return TLC_ERANGE;
  }
  int rc = ctl(s, C_OPEN, t, NULL, 0, 0);
  if (rc < 0) {
    tlc_free(t);
    return rc;
  }
  t->next = s->targets;
  s->targets = t;
  LOCKED(s, s->ntargets++);
  *out = t;
  return 0;
}

void tlc_store_target_close(tlc_store_target_t *t) {
  if (!t)
    return;
  tlc_store_t *s = t->s;
  flush_block(t);
  rx_queue(t); /* configured in this callback: its recovered segments' exports first */
  if (t->pend_drop_rec > 0 && ctl(s, C_GAP, t, "buffer_full", t->pend_drop_rec, 0) == 0)
    t->pend_drop_rec = 0;
  for (tlc_store_target_t **pp = &s->targets; *pp; pp = &(*pp)->next)
    if (*pp == t) {
      *pp = t->next;
      break;
    }
  t->closed = 1;
  LOCKED(s, s->ntargets--);
  if (ctl(s, C_CLOSE, t, NULL, 0, 0) < 0)
    log_direct(s, TLC_LOG_ERR,
               "%s: out of memory closing the target; its segment is sealed at exit", t->name);
}

void tlc_store_counters(tlc_store_t *s, tlc_store_counters_t *out) {
  LOCKED(s, *out = s->c);
}

void tlc_store_target_counters(tlc_store_target_t *t, tlc_store_target_counters_t *out) {
  LOCKED(t->s, *out = t->c);
}

void tlc_store_opts_default(tlc_store_opts_t *o) {
  memset(o, 0, sizeof *o);
}

/* ---- compression (threadpool) ---- */

typedef struct zjob {
  uv_work_t req;
  tlc_store_t *s;
  char target[TLC_TARGET_NAME_MAX_ + 1];
  uint64_t seq;
  char path[1200]; /* data file */
  int rc;
  int skipped;
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
  tlc_catent_t *e = cat_find(&s->cat, j->target, j->seq);
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
  e = cat_find(&s->cat, j->target, j->seq);
  if (e) {
    e->busy = 0;
    if (j->rc == 0) {
      e->compressed = 1;
      e->bytes = tlc__segment_disk_bytes(dir, e->base, e->data);
    }
  }
  uv_mutex_unlock(&s->cat.mu);
}

static void maybe_finish_close(tlc_store_t *s);

static void z_after(uv_work_t *req, int status) {
  zjob_t *j = req->data;
  tlc_store_t *s = j->s;
  s->inflight--;
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
      log_direct(s, TLC_LOG_WARN, "%s: cannot compress %s: %s (kept uncompressed)", j->target,
                 j->path, tlc_strerror(j->rc));
    }
  }
  tlc_free(j);
  if (s->closing)
    maybe_finish_close(s);
}

static void start_compress(tlc_store_t *s, const res_t *r) {
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
  s->inflight++;
}

/* ---- results on the loop ---- */

static void free_target(tlc_store_target_t *t) {
  tmap_unref(t->s, t->wmap); /* the writer is done with the target */
  tlc_free(t->skpend);
  tlc_free(t->sk_buf);
  tlc_free(t->sk_out);
  tlc_free(t->gb);
  tlc_free(t->gt);
  tlc_free(t->ed);
  tlc__seg_fini(&t->seg);
  tlc_evlog_enc_fini(&t->enc);
  tlc_free(t);
}

static void on_async(uv_async_t *a) {
  tlc_store_t *s = a->data;
  rx_flush(s);
  flow_resume(s);
  uv_mutex_lock(&s->mu);
  res_t *r = s->rh;
  s->rh = s->rt = NULL;
  uv_mutex_unlock(&s->mu);
  while (r) {
    res_t *nx = r->next;
    switch (r->type) {
    case R_LOG:
      log_direct(s, r->level, "%s", r->msg);
      break;
    case R_EVENT:
      if (s->o.event_cb) {
        tlc_store_event_t ev = { r->kind, r->target[0] ? r->target : NULL,
                                 r->path[0] ? r->path : NULL, r->reason, r->seq };
        s->o.event_cb(s->o.event_ud, &ev);
      }
      if (r->kind == TLC_SEV_SEALED && s->o.compress)
        start_compress(s, r);
      break;
    case R_CLOSED:
      free_target(r->t);
      break;
    case R_COMPRESS:
      start_compress(s, r);
      break;
    case R_BARRIER:
      r->cb(r->ud);
      break;
    case R_MARK:
      r->mcb(r->ud, &r->pos);
      break;
    case R_STOPPED:
      break;
    default:
      break;
    }
    tlc_free(r);
    r = nx;
  }
  if (s->closing)
    maybe_finish_close(s);
}

static void on_async_closed(uv_handle_t *h) {
  tlc_store_t *s = h->data;
  if (--s->nhandles > 0)
    return; /* the last of the store's handles frees it */
  void (*cb)(void *) = s->close_cb;
  void *ud = s->close_ud;
  /* drop whatever is still queued (nothing after a clean stop) */
  while (s->qh) {
    cmd_t *c = s->qh;
    s->qh = c->next;
    tlc_free(c->buf);
    tlc_free(c->times);
    tlc_free(c->recs);
    tlc_free(c->conf);
    tmap_unref(s, c->map);
    tlc_free(c);
  }
  while (s->rh) {
    res_t *r = s->rh;
    s->rh = r->next;
    if (r->type == R_CLOSED)
      free_target(r->t);
    tlc_free(r);
  }
  /* left when the threads never ran (tlc_store_recover failed or was not called) */
  while (s->rx) {
    pend_t *p = s->rx;
    s->rx = p->next;
    pend_free(s, p);
  }
  while (s->pend) {
    pend_t *p = s->pend;
    s->pend = p->next;
    pend_free(s, p);
  }
  tlc__catalog_fini(&s->cat);
  uv_cond_destroy(&s->scv);
  uv_cond_destroy(&s->cv);
  uv_mutex_destroy(&s->mu);
  tlc_free(s->state_dir);
  tlc_free(s);
  if (cb)
    cb(ud);
}

static void maybe_finish_close(tlc_store_t *s) {
  int exited;
  LOCKED(s, exited = s->thr_exited);
  if (s->thr_started && !exited)
    return;
  if (s->thr_started && !s->joined) {
    uv_thread_join(&s->thr);
    s->joined = 1;
    /* results pushed just before exit */
    on_async(&s->async);
    return; /* on_async calls us again */
  }
  if (s->inflight > 0 || uv_is_closing((uv_handle_t *)&s->async))
    return;
  s->nhandles = 2;
  uv_close((uv_handle_t *)&s->prep, on_async_closed);
  uv_close((uv_handle_t *)&s->async, on_async_closed);
}

void tlc_store_close(tlc_store_t *s, void (*cb)(void *), void *ud) {
  s->close_cb = cb;
  s->close_ud = ud;
  while (s->targets)
    tlc_store_target_close(s->targets);
  s->closing = 1;
  if (s->thr_started) {
    cmd_t *c = tlc_calloc(1, sizeof *c);
    if (c) {
      c->type = C_STOP;
      enqueue(s, c, 0);
    } else {
      /* last resort: a static stop command is not possible to free; signal by flag */
      log_direct(s, TLC_LOG_ERR, "close: out of memory; waiting for the writer to drain");
    }
  }
  maybe_finish_close(s);
}

int tlc_store_new(uv_loop_t *loop, const tlc_store_opts_t *opts, tlc_store_t **out) {
  *out = NULL;
  if (!opts || !opts->state_dir || !opts->state_dir[0])
    return TLC_EINVAL;
  tlc_store_t *s = tlc_calloc(1, sizeof *s);
  if (!s)
    return TLC_ENOMEM;
  s->loop = loop;
  s->o = *opts;
  s->rx_tail = &s->rx;
  apply_defaults(&s->o);
  s->qcap = s->o.queue_bytes;
  s->gather_max = s->qcap / (4 * TLC_BIN1X_RECORD);
  if (s->gather_max > GATHER_RECS)
    s->gather_max = GATHER_RECS;
  if (s->gather_max == 0)
    s->gather_max = 1;
  size_t n = strlen(opts->state_dir);
  while (n > 1 && opts->state_dir[n - 1] == '/')
    n--;
  s->state_dir = tlc_strndup(opts->state_dir, n);
  s->o.state_dir = s->state_dir;
  int rc = TLC_ENOMEM;
  if (!s->state_dir)
    goto fail_dir;
  rc = ensure_dir(s->state_dir);
  if (rc < 0)
    goto fail_mkdir;
  if ((rc = uv_mutex_init(&s->mu)) < 0)
    goto fail_mkdir;
  if ((rc = uv_cond_init(&s->cv)) < 0)
    goto fail_cond;
  if ((rc = uv_cond_init(&s->scv)) < 0)
    goto fail_scv;
  if ((rc = tlc__catalog_init(&s->cat)) < 0)
    goto fail_cat;
  if ((rc = uv_async_init(loop, &s->async, on_async)) < 0)
    goto fail_async;
  s->async.data = s;
  uv_prepare_init(loop, &s->prep); /* cannot fail on Unix; after the last step that can */
  s->prep.data = s;
  uv_prepare_start(&s->prep, on_prepare);
  uv_unref((uv_handle_t *)&s->prep); /* it never keeps the loop alive */
  *out = s;
  return 0;
fail_async:
  tlc__catalog_fini(&s->cat);
fail_cat:
  uv_cond_destroy(&s->scv);
fail_scv:
  uv_cond_destroy(&s->cv);
fail_cond:
  uv_mutex_destroy(&s->mu);
fail_mkdir:
  tlc_free(s->state_dir);
fail_dir:
  tlc_free(s);
  return rc;
}

/* ---- recovery (calling thread, before the writer starts) ---- */

typedef struct rent {
  char name[TLC_SEG_NAME_MAX];
  tlc_segname_t sn;
  int gone;
} rent_t;

static void quarantine(tlc_store_t *s, const char *target, const char *dir, const char *name,
                       const char *why, tlc_store_recovery_t *sum) {
  char qdir[1200], from[1200], to[1400];
  snprintf(qdir, sizeof qdir, "%s/%s", s->state_dir, TLC_QUARANTINE_DIR);
  ensure_dir(qdir);
  snprintf(qdir, sizeof qdir, "%s/%s/%s", s->state_dir, TLC_QUARANTINE_DIR, target);
  ensure_dirs(qdir, strlen(s->state_dir) + 1 + strlen(TLC_QUARANTINE_DIR));
  snprintf(from, sizeof from, "%s/%s", dir, name);
  snprintf(to, sizeof to, "%s/%s", qdir, name);
  struct stat st;
  for (int i = 1; i < 1000 && lstat(to, &st) == 0; i++)
    snprintf(to, sizeof to, "%s/%s.%d", qdir, name, i);
  int rc = tlc_io->rename(from, to);
  if (rc < 0) {
    log_direct(s, TLC_LOG_ERR, "%s: cannot quarantine %s (%s): %s; left in place", target, from,
               why, tlc_strerror(rc));
    return;
  }
  sum->quarantined++;
  LOCKED(s, s->c.quarantined++);
  log_direct(s, TLC_LOG_WARN, "%s: quarantined %s -> %s: %s", target, from, to, why);
  if (s->o.event_cb) {
    tlc_store_event_t ev = { TLC_SEV_QUARANTINED, target, to, 0, 0 };
    s->o.event_cb(s->o.event_ud, &ev);
  }
}

static rent_t *find_ent(rent_t *v, size_t n, const char *base, int kind) {
  for (size_t i = 0; i < n; i++)
    if (!v[i].gone && v[i].sn.kind == kind && strcmp(v[i].sn.base, base) == 0)
      return &v[i];
  return NULL;
}

static void catalog_sealed(tlc_store_t *s, const char *target, const char *dir,
                           const tlc_segname_t *sn, const tlc_manifest_t *m, int compressed) {
  tlc_catent_t e;
  memset(&e, 0, sizeof e);
  snprintf(e.target, sizeof e.target, "%s", target);
  snprintf(e.base, sizeof e.base, "%s", sn->base);
  tlc__segname_data(e.data, sizeof e.data, sn->base, sn->evlog ? TLC_FMT_EVLOG : TLC_FMT_BIN11,
                    sn->xml);
  e.seq = sn->seq;
  e.opened_wall_ns = m->opened_wall_ns;
  e.closed_wall_ns = m->closed_wall_ns;
  e.compressed = compressed;
  e.bytes = tlc__segment_disk_bytes(dir, e.base, e.data);
  tlc__catalog_add(&s->cat, &e);
}

/* recovery: a sealed bin1x segment without its main export. Kept for the writer until a target
 * of its name is configured (at most max_deferred_exports), or written now without settings. */
static void rx_add(tlc_store_t *s, const char *target, const tlc_segname_t *sn, tlc_format_t f,
                   int recovered, tlc_store_recovery_t *sum) {
  char data[TLC_SEG_NAME_MAX];
  tlc__segname_data(data, sizeof data, sn->base, f, sn->xml);
  pend_t *p = pend_new(target, sn->base, data, f, sn->xml, sn->seq, recovered);
  if (!p)
    return; /* the next start tries again */
  pend_want_export(s, p);
  if (s->nrx < s->o.max_deferred_exports) {
    *s->rx_tail = p;
    s->rx_tail = &p->next;
    s->nrx++;
    sum->exports_deferred++;
    return;
  }
  sum->exports_unset++;
  if (pend_try(s, p))
    pend_free(s, p);
  else
    pend_keep(s, p); /* the file system is full: the sealer writes it when space returns */
}

/* recovery: the main export a sealed bin1x segment with records needs (export_cb set): when it
 * is missing, rx_add; when it is there but the manifest `m` (the segment's, valid) does not name
 * it (a crash after the export was written late, before the manifest), the manifest names it */
static void export_check(tlc_store_t *s, const char *target, const char *dir,
                         const tlc_segname_t *sn, tlc_format_t f, tlc_manifest_t *m,
                         tlc_store_recovery_t *sum) {
  char xname[TLC_SEG_NAME_MAX], p[1300];
  struct stat st;
  if (!s->o.export_cb || f == TLC_FMT_EVLOG || m->records == 0)
    return;
  snprintf(xname, sizeof xname, "%s%s", sn->base, sn->xml ? ".xml" : ".txt");
  snprintf(p, sizeof p, "%s/%s", dir, xname);
  if (lstat(p, &st) != 0) {
    rx_add(s, target, sn, f, m->recovered, sum);
    return;
  }
  if (strcmp(m->exportf, xname) != 0) {
    snprintf(m->exportf, sizeof m->exportf, "%s", xname);
    snprintf(p, sizeof p, "%s/%s.manifest", dir, sn->base);
    tlc__manifest_store(p, m);
  }
}

static void recover_dir(tlc_store_t *s, const char *target, tlc_store_recovery_t *sum) {
  char dir[1100], p[1300], why[300];
  snprintf(dir, sizeof dir, "%s/%s", s->state_dir, target);
  DIR *d = opendir(dir);
  if (!d) {
    log_direct(s, TLC_LOG_ERR, "%s: cannot read %s: %s", target, dir, strerror(errno));
    return;
  }
  rent_t *v = NULL;
  size_t n = 0, cap = 0;
  struct dirent *de;
  while ((de = readdir(d)) != NULL && n < 1000000) {
    tlc_segname_t sn;
    if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
      continue;
    if (tlc__segname_parse(de->d_name, &sn) == TLC_SK_NONE) {
      sum->foreign++;
      continue; /* not ours: never touched */
    }
    if (n == cap) {
      rent_t *nv = tlc_grow(v, &cap, n + 1, sizeof *nv, 64);
      if (!nv)
        break;
      v = nv;
    }
    tlc__path(v[n].name, sizeof v[n].name, "%s", de->d_name);
    v[n].sn = sn;
    v[n].gone = 0;
    n++;
  }
  closedir(d);
  uid_t me = geteuid();
  /* A: not a regular file of ours -> quarantine; leftovers of interrupted writes -> remove */
  for (size_t i = 0; i < n; i++) {
    struct stat st;
    snprintf(p, sizeof p, "%s/%s", dir, v[i].name);
    if (lstat(p, &st) < 0) {
      v[i].gone = 1;
      continue;
    }
    if (!S_ISREG(st.st_mode) || st.st_uid != me) {
      quarantine(s, target, dir, v[i].name,
                 S_ISLNK(st.st_mode)    ? "a symlink with a capture name"
                 : S_ISDIR(st.st_mode)  ? "a directory with a capture name"
                 : !S_ISREG(st.st_mode) ? "not a regular file"
                                        : "owned by another user",
                 sum);
      v[i].gone = 1;
    } else if (v[i].sn.kind == TLC_SK_TMP || v[i].sn.kind == TLC_SK_ZSTPART) {
      tlc_io->unlink(p);
      v[i].gone = 1;
    }
  }
  tlc_manifest_t m;
  tlc__manifest_init(&m);
  /* The target's bin1x flavour (bin10 or bin11 cannot be told apart from the bytes with
   * certainty): taken from its newest valid manifest, for files that have none. */
  tlc_format_t dir_fmt = TLC_FMT_NONE;
  {
    uint64_t best = 0;
    for (size_t i = 0; i < n; i++) {
      if (v[i].gone || v[i].sn.kind != TLC_SK_MANIFEST || (dir_fmt && v[i].sn.seq < best))
        continue;
      snprintf(p, sizeof p, "%s/%s", dir, v[i].name);
      if (tlc__manifest_load(p, &m, NULL, 0) == 0 && m.format != TLC_FMT_EVLOG) {
        dir_fmt = m.format;
        best = v[i].sn.seq;
      }
    }
  }
  /* B: .part files */
  for (size_t i = 0; i < n; i++) {
    if (v[i].gone || v[i].sn.kind != TLC_SK_PART)
      continue;
    tlc_segname_t *sn = &v[i].sn;
    if (find_ent(v, n, sn->base, TLC_SK_DATA) || find_ent(v, n, sn->base, TLC_SK_ZST)) {
      quarantine(s, target, dir, v[i].name, "a .part beside a sealed file of the same name", sum);
      v[i].gone = 1;
      continue;
    }
    tlc_format_t f = TLC_FMT_EVLOG;
    if (!sn->evlog) {
      tlc_manifest_t mm;
      tlc__manifest_init(&mm);
      snprintf(p, sizeof p, "%s/%s.manifest", dir, sn->base);
      if (tlc__manifest_load(p, &mm, NULL, 0) == 0 && mm.format != TLC_FMT_EVLOG)
        f = mm.format;
      else if (dir_fmt != TLC_FMT_NONE)
        f = dir_fmt;
      else {
        tlc_segread_t *r;
        snprintf(p, sizeof p, "%s/%s", dir, v[i].name);
        f = TLC_FMT_BIN11;
        if (tlc_segread_open(p, TLC_FMT_NONE, 0, &r, why, sizeof why) == 0) {
          tlc_seginfo_t inf;
          tlc_segread_info(r, &inf);
          f = inf.format;
          tlc_segread_close(r);
        }
      }
      tlc__manifest_fini(&mm);
    }
    uint64_t torn = 0;
    int rc = tlc__segment_recover_part(dir, target, sn, f, s->o.index_interval, s->o.max_block, &m,
                                       &torn);
    if (rc < 0) {
      snprintf(why, sizeof why, "recovery failed: %s", tlc_strerror(rc));
      quarantine(s, target, dir, v[i].name, why, sum);
      v[i].gone = 1;
      continue;
    }
    v[i].gone = 1;
    if (rc == 1) {
      /* no whole record: removed with its manifest, export and torn tail */
      log_direct(s, 5, "%s: %s/%s held no whole record (%" PRIu64 " bytes): removed", target, dir,
                 v[i].name, torn);
      rent_t *x;
      if ((x = find_ent(v, n, sn->base, TLC_SK_MANIFEST)))
        x->gone = 1;
      if ((x = find_ent(v, n, sn->base, TLC_SK_EXPORT)))
        x->gone = 1;
      if ((x = find_ent(v, n, sn->base, TLC_SK_TORN)))
        x->gone = 1;
      continue;
    }
    sum->recovered++;
    sum->torn_bytes += torn;
    LOCKED(s, s->c.segments_recovered++; s->c.torn_bytes += torn);
    log_direct(s, TLC_LOG_NOTICE,
               "%s: recovered %s/%s: %" PRIu64 " records kept, %" PRIu64 " torn bytes moved aside",
               target, dir, v[i].name, m.records, torn);
    catalog_sealed(s, target, dir, sn, &m, 0);
    export_check(s, target, dir, sn, f, &m, sum);
    sum->segments++;
    /* its manifest/export entries are accounted for */
    rent_t *x;
    if ((x = find_ent(v, n, sn->base, TLC_SK_MANIFEST)))
      x->gone = 1;
    if ((x = find_ent(v, n, sn->base, TLC_SK_EXPORT)))
      x->gone = 1;
    if ((x = find_ent(v, n, sn->base, TLC_SK_TORN)))
      x->gone = 1;
    if ((x = find_ent(v, n, sn->base, TLC_SK_SKIPPED)))
      x->gone = 1;
  }
  /* C: sealed data */
  for (size_t i = 0; i < n; i++) {
    if (v[i].gone || (v[i].sn.kind != TLC_SK_DATA && v[i].sn.kind != TLC_SK_ZST))
      continue;
    tlc_segname_t *sn = &v[i].sn;
    int zst = sn->kind == TLC_SK_ZST;
    if (zst && find_ent(v, n, sn->base, TLC_SK_DATA)) {
      snprintf(p, sizeof p, "%s/%s", dir, v[i].name);
      tlc_io->unlink(p); /* compression interrupted after its rename: plain is authoritative */
      v[i].gone = 1;
      continue;
    }
    rent_t *mf = find_ent(v, n, sn->base, TLC_SK_MANIFEST);
    rent_t *ex = find_ent(v, n, sn->base, TLC_SK_EXPORT);
    snprintf(p, sizeof p, "%s/%s", dir, v[i].name);
    tlc_segread_t *r;
    why[0] = 0;
    int rc = tlc_segread_open(p, sn->evlog ? TLC_FMT_EVLOG : dir_fmt,
                              s->o.quick_start ? 0 : TLC_SEGREAD_VERIFY, &r, why, sizeof why);
    if (rc == 0) {
      tlc_seginfo_t inf;
      tlc_segread_info(r, &inf);
      tlc_segread_close(r);
      if (inf.records == 0 && inf.rebuilt) {
        rc = TLC_EFRAME;
        tlc__path(why, sizeof why, "%s: empty data file without a manifest", p);
      } else if (inf.rebuilt) {
        /* rebuild the manifest from the data; keep the bad one aside */
        char wbuf[200];
        tlc__path(wbuf, sizeof wbuf, "manifest unusable (%s): rebuilt from the data", inf.why);
        if (mf) {
          quarantine(s, target, dir, mf->name, wbuf, sum);
          mf->gone = 1;
        }
        uint64_t whole, flen;
        tlc_format_t f = inf.format;
        rc = tlc__manifest_build_file(p, zst, f, s->o.index_interval, s->o.max_block, &m, &whole,
                                      &flen);
        if (rc == 0) {
          m.rebuilt = 1;
          m.seq = sn->seq;
          m.reason = TLC_ROT_RECOVERED;
          m.closed_wall_ns = wall(s);
          snprintf(m.target, sizeof m.target, "%s", target);
          tlc__segname_data(m.data, sizeof m.data, sn->base, f, sn->xml);
          if (ex)
            snprintf(m.exportf, sizeof m.exportf, "%s", ex->name);
          char mp[1300];
          snprintf(mp, sizeof mp, "%s/%s.manifest", dir, sn->base);
          tlc__manifest_store(mp, &m);
          sum->rebuilt_manifests++;
          log_direct(s, TLC_LOG_WARN, "%s: %s: %s", target, p, wbuf);
          catalog_sealed(s, target, dir, sn, &m, zst);
          export_check(s, target, dir, sn, f, &m, sum);
          sum->segments++;
        }
      } else {
        tlc_manifest_t mm;
        tlc__manifest_init(&mm);
        char mp[1300];
        snprintf(mp, sizeof mp, "%s/%s.manifest", dir, sn->base);
        tlc__manifest_load(mp, &mm, NULL, 0);
        catalog_sealed(s, target, dir, sn, &mm, zst);
        export_check(s, target, dir, sn, mm.format, &mm, sum);
        tlc__manifest_fini(&mm);
        sum->segments++;
      }
    }
    if (rc < 0) {
      quarantine(s, target, dir, v[i].name, why[0] ? why : tlc_strerror(rc), sum);
      if (mf && !mf->gone) {
        quarantine(s, target, dir, mf->name, "manifest of a quarantined segment", sum);
        mf->gone = 1;
      }
      if (ex) {
        quarantine(s, target, dir, ex->name, "export of a quarantined segment", sum);
        ex->gone = 1;
      }
      rent_t *sk = find_ent(v, n, sn->base, TLC_SK_SKIPPED);
      if (sk) {
        quarantine(s, target, dir, sk->name, "skipped bytes of a quarantined segment", sum);
        sk->gone = 1;
      }
    }
    v[i].gone = 1;
    if (mf)
      mf->gone = 1;
    if (ex)
      ex->gone = 1;
    rent_t *x = find_ent(v, n, sn->base, TLC_SK_TORN);
    if (x)
      x->gone = 1;
    if ((x = find_ent(v, n, sn->base, TLC_SK_SKIPPED)))
      x->gone = 1;
  }
  /* D: manifests, exports and skipped bytes without data: an interrupted deletion, completed */
  for (size_t i = 0; i < n; i++) {
    if (v[i].gone || (v[i].sn.kind != TLC_SK_MANIFEST && v[i].sn.kind != TLC_SK_EXPORT &&
                      v[i].sn.kind != TLC_SK_SKIPPED))
      continue;
    snprintf(p, sizeof p, "%s/%s", dir, v[i].name);
    if (v[i].sn.kind == TLC_SK_MANIFEST && tlc__manifest_load(p, &m, why, sizeof why) < 0) {
      quarantine(s, target, dir, v[i].name, "manifest without data, and not valid", sum);
      v[i].gone = 1;
      continue;
    }
    tlc_io->unlink(p);
    v[i].gone = 1;
    sum->completed_deletions++;
    log_direct(s, TLC_LOG_NOTICE, "%s: completed an interrupted deletion: removed %s", target, p);
  }
  tlc__manifest_fini(&m);
  tlc_free(v);
  tlc_io_fsync_dir(dir);
}

int tlc_store_recover(tlc_store_t *s, tlc_store_recovery_t *sum) {
  tlc_store_recovery_t local;
  if (!sum)
    sum = &local;
  memset(sum, 0, sizeof *sum);
  if (s->thr_started)
    return TLC_EINVAL;
  DIR *d = opendir(s->state_dir);
  if (!d)
    return -errno;
  char **names = NULL;
  size_t n = 0, cap = 0;
  struct dirent *de;
  while ((de = readdir(d)) != NULL && n < 100000) {
    const char *nm = de->d_name;
    if (nm[0] == '.')
      continue; /* ., .., .quarantine and hidden files */
    char p[1200];
    struct stat st;
    snprintf(p, sizeof p, "%s/%s", s->state_dir, nm);
    if (lstat(p, &st) < 0 || !S_ISDIR(st.st_mode)) {
      sum->foreign++;
      continue; /* files and symlinks at the top are not ours */
    }
    if (n == cap) {
      char **nn = tlc_grow(names, &cap, n + 1, sizeof *nn, 16);
      if (!nn)
        break;
      names = nn;
    }
    names[n] = tlc_strndup(nm, strlen(nm));
    if (names[n])
      n++;
  }
  closedir(d);
  /* An efl source's targets "SOURCE/APP" are directories inside the directory SOURCE (which
   * holds nothing else of ours, or the segments of a target named SOURCE): recovered as
   * targets "SOURCE/APP". Only one level: target names have at most one '/'. */
  for (size_t i = 0, top = n; i < top && n < 100000; i++) {
    char p[1200];
    snprintf(p, sizeof p, "%s/%s", s->state_dir, names[i]);
    DIR *sd = opendir(p);
    if (!sd)
      continue;
    while ((de = readdir(sd)) != NULL && n < 100000) {
      char sub[1200], full[2400];
      struct stat st;
      if (de->d_name[0] == '.')
        continue;
      snprintf(sub, sizeof sub, "%s/%s", names[i], de->d_name);
      snprintf(full, sizeof full, "%s/%s", s->state_dir, sub);
      if (!target_name_ok(sub) || lstat(full, &st) < 0 || !S_ISDIR(st.st_mode))
        continue;
      if (n == cap) {
        size_t nc = cap * 2;
        char **nn = tlc_realloc(names, nc * sizeof *nn);
        if (!nn)
          break;
        names = nn;
        cap = nc;
      }
      names[n] = tlc_strndup(sub, strlen(sub));
      if (names[n])
        n++;
    }
    closedir(sd);
  }
  for (size_t i = 0; i < n; i++) {
    if (strlen(names[i]) <= TLC_TARGET_NAME_MAX_) {
      sum->targets++;
      recover_dir(s, names[i], sum);
    }
    tlc_free(names[i]);
  }
  tlc_free(names);
  /* first retention pass, here, before anything is written */
  tlc_retention_t r;
  fill_retention(s, &r);
  r.deleted = NULL;
  uint64_t before_del = 0;
  (void)before_del;
  uv_mutex_lock(&s->cat.mu);
  size_t before = s->cat.n;
  uv_mutex_unlock(&s->cat.mu);
  r.deleted = w_deleted; /* logs go through the result queue; delivered once the loop runs */
  tlc__retention_run(&s->cat, &r);
  uv_mutex_lock(&s->cat.mu);
  sum->deleted = before - s->cat.n;
  uv_mutex_unlock(&s->cat.mu);
  update_stored(s);
  s->rx_any = s->nrx > 0;
  if (sum->exports_deferred > 0)
    log_direct(s, TLC_LOG_INFO,
               "%" PRIu64 " segment(s) found without their main export: written once a target of "
               "their name is configured (at shutdown without its settings)",
               sum->exports_deferred);
  if (sum->exports_unset > 0)
    log_direct(s, TLC_LOG_WARN,
               "%" PRIu64 " segment(s) found without their main export beyond the %" PRIu32
               " that wait for their target: exported now, without the target's settings",
               sum->exports_unset, s->o.max_deferred_exports);
  /* segments sealed but not compressed before a restart: compress them now (threadpool) */
  if (s->o.compress) {
    uv_mutex_lock(&s->cat.mu);
    for (size_t i = 0; i < s->cat.n; i++) {
      const tlc_catent_t *e = &s->cat.v[i];
      res_t *rr = e->compressed ? NULL : tlc_calloc(1, sizeof *rr);
      if (!rr)
        continue;
      rr->type = R_COMPRESS;
      rr->seq = e->seq;
      snprintf(rr->target, sizeof rr->target, "%s", e->target);
      tlc__path(rr->path, sizeof rr->path, "%s/%s/%s", s->state_dir, e->target, e->data);
      push_res(s, rr);
    }
    uv_mutex_unlock(&s->cat.mu);
  }
  int rc = uv_thread_create(&s->sthr, sealer_main, s);
  if (rc < 0)
    return rc;
  s->sthr_started = 1;
  rc = uv_thread_create(&s->thr, writer_main, s);
  if (rc < 0) {
    stop_sealer(s);
    return rc;
  }
  s->thr_started = 1;
  return 0;
}
