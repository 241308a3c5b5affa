/* store-int.h - shared internals of the storage module (store.c, shared.c, writer.c, worker.c,
 * recovery.c, retention.c). Not a contract: nothing outside daemon/store includes it (tests
 * do, to reach the scanners and the manifest codec through store/seg/seg-int.h).
 */
#ifndef TLC_STORE_INT_H
#define TLC_STORE_INT_H

#include "base/list.h"
#include "formats/evlog.h"
#include "formats/scan.h"
#include "formats/tlc_event.h"
#include "store/seg/seg-int.h"
#include "store/store.h"

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

/* ---- catalog of sealed segments (retention) ---- */

typedef struct tlc_catalog {
  uv_mutex_t mu;
  tlc_catent_t *v;
  size_t n, cap;
} tlc_catalog_t;

int tlc__catalog_init(tlc_catalog_t *c);
void tlc__catalog_fini(tlc_catalog_t *c);
/* Adds (copies) an entry; caller holds nothing (locks inside). 0 or TLC_ENOMEM. */
int tlc__catalog_add(tlc_catalog_t *c, const tlc_catent_t *e);
/* Whether e is the lowest sequence of its target in the catalog (the only one retention may
 * delete: while it is busy or pinned, its target waits). The caller holds c->mu. */
int tlc__catalog_is_oldest(const tlc_catalog_t *c, const tlc_catent_t *e);
/* One retention pass over the catalog (writer or worker thread, or the recovering thread
 * at start). Deletes oldest first, a target's lowest sequence only; calls `deleted` for each
 * deletion. Returns segments deleted. */
typedef struct tlc_retention {
  const char *state_dir;
  uint64_t max_total_bytes, max_target_bytes, min_free_bytes;
  uint32_t max_segments;
  int64_t max_age_ms;
  int64_t now_wall_ns;
  void (*deleted)(void *ud, const tlc_catent_t *e);
  void *ud;
} tlc_retention_t;
uint64_t tlc__retention_run(tlc_catalog_t *c, const tlc_retention_t *r);

/* ---- the store's own state: its queues, targets and threads (see the design note in store.c) ----
 */

#define TICK_NS         (250 * 1000000ll)
#define PGAP_MAX        16
#define DISKFULL_LOG_NS (10ll * 1000000000ll)
#define GATHER_RECS     8192       /* bin1x records gathered per command (192 KiB) */
#define GPOOL_MIN       8          /* gather buffer pairs kept for reuse, at least */
#define GPOOL_MAX       64         /* and at most (16 MiB with GATHER_RECS: records and times) */
#define WAKE_BYTES      (1u << 20) /* data queued that wakes the writer at once (or 1/8 cap) */
#define WPOLL_NS        (5 * 1000000ll) /* a busy writer looks for unannounced data this often */
#define READ_LEND_MIN   (16u * 1024u)   /* least room a source is lent to read into */

enum {
  C_OPEN = 1,
  C_DATA,
  C_GAP,
  C_ROTATE,
  C_CLOSE,
  C_RETENTION,
  C_RECONF,
  C_BARRIER,
  C_BARRIER_WRITTEN,
  C_STOP,
  C_SETMAP,
  C_SETCONF,
  C_SKIP,
  C_RECEXPORT,
  C_MARK
};
/* what a post-seal job is (worker.c) */
enum { J_SEAL = 1, J_BARRIER, J_RETRY, J_EXPORT, J_COMPRESS };
/* which of the worker's lanes takes a job next, or none (running) */
enum { ST_SEAL = 0, ST_EXPORT, ST_COMPRESS, ST_BUSY };
enum { R_LOG = 1, R_EVENT, R_CLOSED, R_BARRIER, R_STOPPED, R_MARK };

/* A target's names for its segments' exports: an immutable copy of its mapping, shared by the
 * writer (the target's current names) and the seal jobs closed under it. refs under the store's
 * mutex; the last reference frees it (whichever thread that is). */
typedef struct tmap {
  uint32_t refs;
  tlc_mapping_t m;
} tmap_t;

/* A sealed bin1x segment whose main export and/or manifest is still to be written. Three kinds:
 *  - deferred at its seal: written by the worker's export lane after the seal (worker.c);
 *  - left out by its seal for lack of space (bytes or inodes): the seal lane keeps it
 *    (s->wk.pend, at most PEND_MAX) and writes it when space returns: before its next job, when
 *    writing resumes (J_RETRY), at its last try at shutdown;
 *  - recovered at start, or found sealed without its export: the writer keeps it (s->w.rx, at
 *    most max_deferred_exports) until a target of that name is configured, then hands it to
 *    the worker (J_EXPORT) with that target's settings; at shutdown, without settings.
 * What is still missing after the last try is done at the next start (a manifest rebuilt from
 * the data, a missing export written). Owned by one thread at a time; need_ex entries are
 * counted in exports_pending. */
typedef struct pend {
  TAILQ_ENTRY(pend) link; /* on s->wk.pend or s->w.rx */
  char target[TLC_TARGET_NAME_MAX_ + 1];
  char base[TLC_SEG_BASE_MAX];
  char data[TLC_SEG_NAME_MAX]; /* data file name (without .zst) */
  tlc_format_t format;
  int xml, recovered;
  uint64_t seq;
  int need_ex;          /* the main export is to write, with map and tc */
  int deferred;         /* need_ex: left to the export lane at the seal (not late for space) */
  int need_mf;          /* m is to write as the manifest */
  tlc_manifest_t m;     /* need_mf: the manifest (its gaps say what was dropped) */
  tmap_t *map;          /* need_ex: a reference to the target's names (NULL: none) */
  tlc_store_tconf_t tc; /* need_ex: its context area */
} pend_t;
typedef TAILQ_HEAD(pendq, pend) pendq_t;
#define PEND_MAX 256 /* segments waiting for space */
/* Main exports waiting for the export lane at most: with that many it exports without waiting
 * for a burst to pass, and the seal lane waits for room before it passes another on
 * (worker.c). */
#define EXPORT_QUEUE_MAX 4
/* The export lane starts an export only when the store took records in at less than
 * EXPORT_BUSY_BPS over the last EXPORT_WAIT_MS: not during a burst (worker.c) */
#define EXPORT_BUSY_BPS 32e6
#define EXPORT_WAIT_MS  100

typedef struct cmd {
  STAILQ_ENTRY(cmd) link;
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
  STAILQ_ENTRY(res) link;
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

/* A job of the post-seal worker (worker.c), on its one queue (s->jq) in the order given: a
 * segment to finish (J_SEAL: seal, then its main export, then its compression, each stage when
 * it applies), an export to write late (J_EXPORT), a recovered segment to compress
 * (J_COMPRESS), a barrier result to deliver once every seal and export before it is done, or a
 * retry of what waits for space. Owns everything it holds. */
typedef struct sjob {
  TAILQ_ENTRY(sjob) link;
  int kind;
  int stage;            /* ST_*: the lane that takes it next (under mu) */
  tlc_seg_t seg;        /* J_SEAL: the closed segment, its fd still open */
  int reason;           /* J_SEAL: enum tlc_store_reason */
  int64_t wall_ns;      /* J_SEAL: when it was closed (manifest closed_wall_ns) */
  tmap_t *map;          /* J_SEAL: a reference to the target's names then (may be NULL) */
  tlc_store_tconf_t tc; /* J_SEAL: the target's export settings then */
  res_t *res;           /* J_BARRIER: the R_BARRIER result to push */
  pend_t *p; /* J_EXPORT, or J_SEAL at ST_EXPORT: the export to write, with its settings */
  /* ST_COMPRESS: the sealed segment to compress */
  char ztarget[TLC_TARGET_NAME_MAX_ + 1];
  uint64_t zseq;
  char zpath[1200]; /* its data file */
} sjob_t;
typedef TAILQ_HEAD(jobq, sjob) jobq_t;

typedef struct pgap {
  char reason[TLC_GAP_REASON_MAX];
  uint64_t count;
} pgap_t;

struct tlc_store_target {
  tlc_store_t *s;
  char name[TLC_TARGET_NAME_MAX_ + 1];
  tlc_format_t format;
  TAILQ_ENTRY(tlc_store_target) link; /* loop: on the list of open targets */
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
  TAILQ_ENTRY(tlc_store_target) glink;
  /* zero-copy reads (tlc_store_read_buffer): gb was lent to the source for a read in loop turn
   * lend_turn (0: not lent); while that turn lasts, bytes of the stream may still be read from
   * it, so it is not handed to the writer (gather_flush queues a copy instead) */
  uint64_t lend_turn;
  /* loop side, keep_skipped: the bytes the decoder told in no record (tlc_store_skipped) */
  uint8_t *sk_out; /* skipped bytes kept, to queue (C_SKIP); at most keep_skipped */
  size_t sk_olen, sk_ocap;
  uint64_t sk_unkept; /* skipped bytes that could not be kept, to queue */
  int rx_state;       /* loop: 1 configured, C_RECEXPORT to queue (rx_mark); 2 queued */
  /* writer side */
  tlc_seg_t seg;
  char dir[1024];
  uint64_t next_seq;
  int seq_known;
  int last_valid; /* the segment sealed last in this run: last_seq, last_bytes long (w_mark) */
  uint64_t last_seq, last_bytes;
  uint64_t pause_rec;  /* records dropped during the current disk-full pause */
  pgap_t pg[PGAP_MAX]; /* gaps waiting for the next segment */
  size_t npg;
  tmap_t *wmap;         /* names for the exports (a reference; NULL: none) */
  tlc_store_tconf_t tc; /* export settings */
  uint8_t *skpend;      /* keep_skipped: bytes waiting for the next segment (<= keep_skipped) */
  size_t skpend_len;
  TAILQ_ENTRY(tlc_store_target) wlink; /* writer: on its list of targets */
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

/* The loop thread's own state (store.c): nothing else reads it. */
typedef struct store_loop {
  TAILQ_HEAD(, tlc_store_target) targets; /* open targets */
  TAILQ_HEAD(, tlc_store_target) gather;  /* targets with gathered records (gq) */
  uv_prepare_t prep; /* queues the gathered records at the end of each loop turn */
  uint64_t turn;     /* loop turns seen by prep, from 1 (gather buffers lent for a read) */
  int nhandles;      /* handles not closed yet (async, prep) */
  size_t gather_max; /* records gathered per command: GATHER_RECS, at most a quarter of the queue */
  int gpool_filled;  /* gpool_fill ran (the first bin1x target opened) */
  int rx_kick;       /* a target was marked by rx_mark: rx_flush has work */
  int closing;
  void (*close_cb)(void *);
  void *close_ud;
} store_loop_t;

/* The writer thread's own state (writer.c). Recovery fills rx before the writer starts; what is
 * left after the threads are joined is freed by the loop. */
typedef struct store_writer {
  TAILQ_HEAD(, tlc_store_target) wlist; /* targets the writer knows (C_OPEN .. C_CLOSE) */
  int disk_full;
  int64_t next_probe, next_retention, next_tick, df_log_last;
  uint64_t df_suppressed;
  /* exports waiting for their target's settings (recovered segments without one) */
  pendq_t rx;
  size_t nrx;
} store_writer_t;

/* The worker's seal lane's own state (worker.c; the export lane hands what waits for space back
 * through the job queue). Recovery fills it before the threads start; after the seal lane is
 * joined, the thread that stopped it (the writer) drains it. */
typedef struct store_worker {
  pendq_t pend; /* segments whose export or manifest waits for space */
  size_t npend;
} store_worker_t;

/* The store: what each thread owns is its own struct (lp: the loop, w: the writer, wk: the
 * worker's seal lane); every other field below crosses threads and is guarded as its comment says:
 * `mu` guards the queues, counters, flags and the gather-buffer pool; the catalog has its own
 * mutex; o, state_dir, loop and qcap are set before any thread starts and only read after
 * (tlc_store_reconfigure's options go to the writer through a command). */
struct tlc_store {
  uv_loop_t *loop;
  tlc_store_opts_t o;
  char *state_dir;
  store_loop_t lp;   /* loop thread only */
  store_writer_t w;  /* writer thread only */
  store_worker_t wk; /* the worker's seal lane only */
  /* ---- crossing threads: under mu ---- */
  uv_mutex_t mu;
  uv_cond_t cv;
  STAILQ_HEAD(, cmd) q; /* loop -> writer: commands */
  size_t qbytes, qcap;
  size_t ntargets;        /* open targets: each one's share of the queue is qcap / ntargets */
  STAILQ_HEAD(, res) res; /* writer, worker -> loop: results (async wakes the loop) */
  uv_async_t async;
  tlc_store_counters_t c;
  /* gather buffers (records and times, gather_max each) ready for the loop to fill: taken at
   * start and given back by the writer, at most gpool_keep of them */
  uint8_t *gpool_b[GPOOL_MAX];
  int64_t *gpool_t[GPOOL_MAX];
  size_t ngpool, gpool_keep;
  /* the writer's wake-ups: the loop signals cv for every command but data, and for data only
   * while the writer is idle (w_poll 0) or once wake_bytes are queued; a busy writer (w_poll 1)
   * looks for data every WPOLL_NS by itself */
  size_t wake_bytes;
  int w_poll;
  /* writer -> post-seal worker: its one job queue, in order (worker.c). Three threads (lanes)
   * take from it, each the first job at its stage: the seal lane the jobs at ST_SEAL, then it
   * passes each sealed segment on to the export lane (ST_EXPORT), which writes its main export,
   * one at a time and not during a burst, and passes it on to the compress lane (ST_COMPRESS).
   * The seal lane signals cv when a job is done. */
  jobq_t jq;
  uv_cond_t scv;    /* the seal lane waits here for jobs */
  uint32_t nseal;   /* jobs at ST_SEAL */
  uint32_t sealing; /* J_SEAL jobs not yet through the seal lane */
  int sstop;
  uv_cond_t xcv; /* the export lane waits here for jobs, the seal lane for room or for all done */
  uint32_t nx;   /* jobs at ST_EXPORT */
  int xbusy;     /* the export lane is writing an export */
  int xhurry;    /* a barrier (or the stop) waits for every export: no waiting for a burst */
  int xstop;
  uv_cond_t zcv; /* the compress lane waits here for jobs */
  uint32_t nz;   /* jobs at ST_COMPRESS */
  int zstop;
  /* ---- the catalog of sealed segments: its own mutex (cat.mu) ---- */
  tlc_catalog_t cat;
  /* ---- set before the threads start, read-only after ---- */
  int rx_any;      /* recovery deferred some exports */
  int retain_live; /* recovery's catalog is complete: an unpin runs a retention pass */
  /* ---- the threads, started and joined by the loop ---- */
  uv_thread_t thr, sthr, xthr, zthr;
  int thr_started, sthr_started, xthr_started, zthr_started, joined;
  int thr_exited; /* under mu: the writer has returned */
};

#define LOCKED(s, stmt)                                                                            \
  do {                                                                                             \
    uv_mutex_lock(&(s)->mu);                                                                       \
    stmt;                                                                                          \
    uv_mutex_unlock(&(s)->mu);                                                                     \
  } while (0)

/* shared.c: any thread (see there) */
int64_t tlc__store_wall(tlc_store_t *s);
int64_t tlc__store_mono(tlc_store_t *s);
void tlc__store_log_direct(tlc_store_t *s, int level, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
void tlc__store_push_res(tlc_store_t *s, res_t *r);
void tlc__store_wlog(tlc_store_t *s, int level, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
void tlc__store_wevent(tlc_store_t *s, int kind, const char *target, const char *path, int reason,
                       uint64_t seq);
size_t tlc__store_flow_share(const tlc_store_t *s);
int tlc__store_flow_low(const tlc_store_t *s, const tlc_store_target_t *t);
void tlc__store_tmap_unref(tlc_store_t *s, tmap_t *m);
tmap_t *tlc__store_tmap_ref(tlc_store_t *s, tmap_t *m);
int tlc__store_is_nospace(int rc);
void tlc__store_w_deleted(void *ud, const tlc_catent_t *e);
void tlc__store_fill_retention(tlc_store_t *s, tlc_retention_t *r);
void tlc__store_update_stored(tlc_store_t *s);
void tlc__store_retention_pass(tlc_store_t *s);
int tlc__store_ensure_dir(const char *path);
int tlc__store_ensure_dirs(const char *path, size_t from);
int tlc__store_target_name_ok(const char *name);
void tlc__store_apply_defaults(tlc_store_opts_t *o);
pend_t *tlc__store_pend_new(const char *target, const char *base, const char *data, tlc_format_t f,
                            int xml, uint64_t seq, int recovered);
void tlc__store_pend_want_export(tlc_store_t *s, pend_t *p);
void tlc__store_pend_free(tlc_store_t *s, pend_t *p);

/* store.c: the loop-side front */
void tlc__store_flow_resume(tlc_store_t *s);
void tlc__store_maybe_finish_close(tlc_store_t *s);

/* writer.c: the writer thread */
void tlc__store_writer_main(void *arg);

/* worker.c: the post-seal worker, its seal lane and export lane */
tlc_catent_t *tlc__store_cat_find(tlc_catalog_t *c, const char *target, uint64_t seq);
int tlc__store_pend_try(tlc_store_t *s, pend_t *p);
void tlc__store_pend_keep(tlc_store_t *s, pend_t *p);
/* Seals one closed segment (seal lane; the writer when a job cannot be allocated, j NULL):
 * with j, what the segment needs next is set in it (j->p: a deferred export; j->zpath: its
 * compression) for the export lane. */
void tlc__store_seal_now(tlc_store_t *s, tlc_seg_t *seg, int reason, int64_t wall_ns, tmap_t *map,
                         const tlc_store_tconf_t *tc, sjob_t *j);
void tlc__store_push_job(tlc_store_t *s, sjob_t *j);
/* recovery: a sealed segment to compress, queued before the lanes start (0 or TLC_ENOMEM) */
int tlc__store_queue_compress(tlc_store_t *s, const char *target, uint64_t seq, const char *path);
/* Starts the lanes (recovery, last): the export lane when there is an export hook or
 * compression, then the seal lane. 0 or a negative error (nothing left running). */
int tlc__store_start_worker(tlc_store_t *s);
/* Waits until every export passed to the export lane is written (a barrier; any thread but the
 * export lane). */
void tlc__store_wait_exports(tlc_store_t *s);
/* Stops the seal lane after its current job, seals what is left on the calling thread (the
 * writer at shutdown), then stops the export lane once it has finished every job it holds,
 * and makes a last attempt at what waits for space. */
void tlc__store_stop_worker(tlc_store_t *s);
/* Frees the jobs left when the lanes never ran (loop, at the store's end). */
void tlc__store_free_jobs(tlc_store_t *s);

#endif
