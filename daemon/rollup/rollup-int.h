/* rollup-int.h - the rollup module's internals (acc.c: the loop side; rollup.c: the worker, the
 * files, retention and queries). */
#ifndef TLC_ROLLUP_INT_H
#define TLC_ROLLUP_INT_H

#include "engine/engine.h"
#include "engine/hist.h"
#include "rollup/rollup.h"

#include <uv.h>

/* One (area, context, state, kind) of an open minute. */
typedef struct tlc_rollup_slot {
  uint32_t handle, context;
  uint64_t state;
  uint8_t kind, row_kind, nohist;
  tlc_dist_t d;
  int64_t tmin, tmax;
  uint64_t violations;
  tlc_hist_t h;
} tlc_rollup_slot_t;

/* The loop side: samples appended to a chunk, handed to the worker when full or sealed. */
#define TLC_ROLLUP_CHUNK 2048 /* samples (96 KiB: below malloc's mmap threshold) */
#define TLC_ROLLUP_POOL  16   /* chunk buffers kept for reuse (fresh pages fault) */
#define TLC_ROLLUP_BPOOL 64   /* sample log blocks kept for reuse (24 KiB each) */
/* samples queued to the worker past which a full chunk is dropped (counted): 4 M, ~200 MB; a
 * sample log block counts as TLC_SLOG_BLOCK whatever it holds (its memory: 96 MiB at most) */
#define TLC_ROLLUP_MAX_QUEUED (4u << 20)
struct tlc_rollup_acc {
  tlc_rollup_t *r;
  char *name;
  tlc_rollup_sample_t *chunk;
  size_t n;
  /* the chunk holds samples of one minute of one epoch: [lo, hi) target ns, and the wall
   * clock when its first sample came */
  int64_t lo, hi, wall0;
  uint64_t epoch;
  uint8_t lane;   /* 0: live; 1: the past (a rebuild), kept apart on the worker */
  uint8_t replay; /* its samples are the records replayed after a checkpoint (a restart) */
  uint64_t gen;   /* copies of the open minute taken (tlc_rollup_acc_save) */
};

/* The worker side of a target: its open minute. */
typedef struct tlc_rollup_open {
  tlc_rollup_t *r;
  char *name;
  uint8_t lane; /* of the accumulator feeding it */
  uint64_t epoch;
  int64_t minute;
  int64_t wall_first;
  tlc_rollup_slot_t *slots;
  size_t n, cap;
  uint32_t *idx; /* nidx entries, UINT32_MAX = free */
  size_t nidx;
  uint32_t last; /* slot of the previous sample, UINT32_MAX: none */
  /* the keys of the engine's rows by row index, from its sample log's DEF marks, and the epoch
   * of its samples (tlc__rollup_open_block) */
  struct tlc_rollup_rdesc {
    uint32_t handle, context;
    uint64_t state;
    uint8_t row_kind, known;
  } * rows;
  size_t caprows;
  uint64_t slog_epoch;
  /* lane 0's samples of the minute (and epoch) the loop's chunk held before blocks of the
   * sample log came whole (tlc__rollup_hold): counted in the open minute when a sample leaves
   * [held_lo, held_hi) or held_epoch, at TLC_ROLLUP_CHUNK of them, or before a seal, a save and
   * a replay's start and end, so that minutes are sealed, written and saved when they were */
  tlc_rollup_sample_t *held;
  size_t nheld;
  int64_t held_lo, held_hi, held_wall0;
  uint64_t held_epoch;
  uint64_t nsamples;
  int64_t wall_last;               /* of the chunks counted so far */
  int64_t chunk_wall0, chunk_wall; /* the chunk being counted: its wall clock span */
  uint64_t saved_n; /* samples in its saved copy on disk (TARGET/open-minute), 0: none */
  /* lane 0: the marks (TARGET/written, replaced after every write): the last minute written
   * (epoch, minute) and how many samples of it are on disk, and the last hour written (epoch,
   * the latest minute merged into it) */
  int has_w, has_h;
  int mark_loaded; /* the file was there at start: hours of earlier runs may miss minutes */
  uint64_t w_epoch, w_n, h_epoch;
  int64_t w_min, h_min;
  /* the copy taken at the last checkpoint (marks + open minute), until its position comes */
  uint8_t *pend;
  size_t npend;
  uint64_t pend_gen, pend_n;
  char kept[96]; /* the previous copy's file name kept beside the newest ("": none) */
  /* the records replayed after the checkpoint at a restart: RP_ACCEPT every sample, RP_FILTER
   * those after (rp_epoch, rp_min) and the ones past the first rp_skip of it, RP_DROP none */
  int rp;
  uint64_t rp_epoch, rp_skip, rp_in, rp_out;
  int64_t rp_min;
} tlc_rollup_open_t;
enum { TLC_RP_ACCEPT = 0, TLC_RP_FILTER = 1, TLC_RP_DROP = 2 };

enum {
  TLC_RJOB_MINUTE = 1,
  TLC_RJOB_QUERY = 2,
  TLC_RJOB_STOP = 3,
  TLC_RJOB_CHUNK = 4,
  TLC_RJOB_RESTORE = 5,  /* a target's saved open minute (if any) written as a minute block */
  TLC_RJOB_POS = 6,      /* the position of the copy taken at gen: kept on disk under it */
  TLC_RJOB_REPLAY = 7,   /* a restart replays the records after the checkpoint at pos */
  TLC_RJOB_REPLAYED = 8, /* ... the replay is over */
  TLC_RJOB_BLOCK = 9     /* a block of the engine's sample log (tlc_rollup_slog) */
};
/* CHUNK's seal: */
enum { TLC_RSEAL_NO = 0, TLC_RSEAL_WRITE = 1, TLC_RSEAL_SAVE = 2 };

struct tlc_rollup_job {
  struct tlc_rollup_job *next;
  int kind;
  char *target;
  uint8_t lane; /* CHUNK and MINUTE: the accumulator's */
  /* MINUTE */
  uint64_t epoch;
  int64_t minute, wall_first, wall_last;
  tlc_rollup_slot_t *slots;
  size_t nslots;
  /* CHUNK: samples of target, then (seal) its open minute is written */
  tlc_rollup_sample_t *samples;
  size_t nsamples;
  int seal; /* TLC_RSEAL_*: then the open minute is written, or saved (a copy, kept open) */
  int64_t chunk_wall0, chunk_wall; /* wall clock of its first sample and of its hand-off */
  uint8_t replay;                  /* CHUNK, BLOCK: replayed samples (filtered) */
  /* BLOCK: the engine's block (TLC_SLOG_BLOCK entries, back to the pool after) */
  tlc_engine_slent_t *block;
  size_t nblock;
  uint64_t gen;         /* CHUNK with SAVE, and POS: the copy's generation */
  tlc_rollup_pos_t pos; /* POS, REPLAY */
  /* QUERY */
  tlc_rollup_q_t q[2];
  tlc_rollup_res_t res[2];
  size_t nq;
  tlc_rollup_ans_t ans;
  tlc_rollup_cb cb;
  void *ud;
  int cancelled;
};

/* A target's open hour on the worker. */
typedef struct tlc_rollup_hour {
  char *target;
  uint8_t lane;
  uint64_t epoch;
  int64_t hour_minute;
  int64_t last_min; /* the latest minute merged into it */
  int began;        /* lane 0: its first hour of this run was started (and seeded from disk) */
  tlc_rollup_blk_t blk;
} tlc_rollup_hour_t;

#define TLC_ROLLUP_WLOG 32

struct tlc_rollup {
  uv_loop_t *loop;
  char *root; /* STATE_DIR/.rollup */
  char *state_dir;
  uv_mutex_t mu;
  uv_cond_t cv;
  tlc_rollup_job_t *head, *tail;           /* to the worker */
  tlc_rollup_job_t *done_head, *done_tail; /* answered queries, back to the loop */
  uv_async_t done_async;
  /* the worker's log lines, written by the loop in on_done (base/log.h is the loop thread's
   * alone); under mu, at most TLC_ROLLUP_WLOG waiting, the rest counted */
  char wlog_line[TLC_ROLLUP_WLOG][240];
  int wlog_level[TLC_ROLLUP_WLOG];
  size_t wlog_n;
  uint64_t wlog_dropped;
  uv_thread_t thread;
  int started, stopping;
  uint64_t keep_minutes_ms, keep_hours_ms, max_bytes;
  tlc_rollup_stats_t st;
  /* worker only */
  tlc_rollup_hour_t *hours;
  size_t nhours, caphours;
  tlc_rollup_open_t **opens;
  size_t nopens, capopens;
  uint64_t queued; /* samples in chunks not yet taken by the worker (under mu) */
  tlc_rollup_sample_t *pool[TLC_ROLLUP_POOL]; /* chunk buffers for reuse (under mu) */
  size_t npool;
  tlc_engine_slent_t *bpool[TLC_ROLLUP_BPOOL]; /* sample log blocks for reuse (under mu) */
  size_t nbpool;
  tlc_rollup_job_t *jpool[TLC_ROLLUP_BPOOL]; /* BLOCK jobs for reuse, their target kept (under
                                               mu): no allocation on the loop per block */
  size_t njpool;
  int64_t last_retention_ms;
};

void tlc__rollup_slots_free(tlc_rollup_slot_t *v, size_t n);
/* A chunk buffer from the pool (or new), and one given back (pooled or freed). Any thread. */
tlc_rollup_sample_t *tlc__rollup_chunk_get(tlc_rollup_t *r);
void tlc__rollup_chunk_put(tlc_rollup_t *r, tlc_rollup_sample_t *c);
/* Worker (acc.c): a target's open minute (created on first use), a sample into it, and sealing
 * it: both return the sealed minute for the caller to write (tlc__rollup_minute), or NULL.
 * open_free drops what is open (seal first to keep it). */
tlc_rollup_open_t *tlc__rollup_open_of(tlc_rollup_t *r, const char *name, uint8_t lane);
tlc_rollup_job_t *tlc__rollup_open_add(tlc_rollup_open_t *o, const tlc_rollup_sample_t *s);
tlc_rollup_job_t *tlc__rollup_open_seal(tlc_rollup_open_t *o);
void tlc__rollup_open_free(tlc_rollup_open_t *o);
/* Worker (acc.c): sample s of o (lane 0) held as the loop's chunk held it before, and what is
 * held counted in the open minute (minutes sealed on the way written). */
void tlc__rollup_hold(tlc_rollup_t *r, tlc_rollup_open_t *o, const tlc_rollup_sample_t *s);
void tlc__rollup_held_flush(tlc_rollup_t *r, tlc_rollup_open_t *o);
/* A sample log block given back (pooled or freed; NULL: nothing). Any thread. */
void tlc__rollup_block_put(tlc_rollup_t *r, tlc_engine_slent_t *b);
/* A BLOCK job done (its block pooled or freed, then the job, its target kept, pooled or freed).
 * Any thread. */
void tlc__rollup_bjob_put(tlc_rollup_t *r, tlc_rollup_job_t *j);
/* Worker (acc.c): the n entries of a sample log block into o (replay: filtered as replayed
 * samples). */
void tlc__rollup_open_block(tlc_rollup_t *r, tlc_rollup_open_t *o, const tlc_engine_slent_t *x,
                            size_t n, int replay);
/* Worker: the open minute's copy on disk (TARGET/open-minute, replaced), and that copy, if any,
 * written as a minute block and removed (at start, before the target's first samples). */
void tlc__rollup_open_save(tlc_rollup_t *r, tlc_rollup_open_t *o, uint64_t gen);
void tlc__rollup_open_restore(tlc_rollup_t *r, tlc_rollup_open_t *o);
/* Worker: the copy taken at gen (if still pending) written under its checkpoint position; a
 * restart's replay after pos begins (the copy of pos and the marks say which replayed samples
 * are on disk already), and ends (logged). */
void tlc__rollup_open_pos(tlc_rollup_t *r, tlc_rollup_open_t *o, uint64_t gen,
                          const tlc_rollup_pos_t *pos);
void tlc__rollup_replay_begin(tlc_rollup_t *r, tlc_rollup_open_t *o, const tlc_rollup_pos_t *pos);
void tlc__rollup_replay_end(tlc_rollup_t *r, tlc_rollup_open_t *o);
/* Worker: whether a replayed sample is to be counted (not on disk already). */
int tlc__rollup_replay_keep(tlc_rollup_t *r, tlc_rollup_open_t *o, const tlc_rollup_sample_t *s);
/* Worker: writes a sealed minute (j->slots) and frees j. */
void tlc__rollup_minute(tlc_rollup_t *r, tlc_rollup_job_t *j);
void tlc__rollup_push(tlc_rollup_t *r, tlc_rollup_job_t *j);
void tlc__rollup_count(tlc_rollup_t *r, uint64_t *ctr, uint64_t n);

#endif
