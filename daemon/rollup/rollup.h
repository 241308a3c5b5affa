/* rollup.h - the rollups of SPEC section 14 on disk: per target, clock epoch, area and minute
 * (and hour) of target time, the statistics of the samples that closed in it (formats/rollup.h
 * cells), written off the event loop, kept under their own budget, and read back by queries.
 *
 * The loop side is an accumulator per target (tlc_rollup_acc_t): the engine's sample log hands
 * its blocks of samples to the module's worker thread as they are (tlc_rollup_slog; the tap's
 * samples and budget violations go in chunks), and the worker resolves their rows, counts each
 * sample in the open minute's slot of its (area, context, state, kind) and, once target time
 * (or the clock epoch) leaves the minute, turns its slots into cells, appends one block per area
 * to that area's minute file, and merges it into the open hour of its target; an hour is
 * written when the next one starts (or at close). Only minutes in which an area had a sample
 * cost anything.
 *
 * Files, under STATE_DIR/.rollup/TARGET/ (a hidden directory: the store never looks into it,
 * and raw-segment retention never deletes it):
 *   e<EPOCH>/m<DAY>/<HANDLE>.r    the minutes of one target-time day (DAY = minute / 1440)
 *   e<EPOCH>/h<DAY32>/<HANDLE>.r  the hours of 32 target-time days (DAY32 = DAY / 32)
 * each a sequence of blocks (formats/rollup.h); a torn or damaged block is skipped (the reader
 * looks for the next block's magic), logged and counted. Retention, by the worker once a
 * minute: minute directories not written for `keep_minutes_ms`, hour directories for
 * `keep_hours_ms`; then, while all of them together exceed `max_bytes`, the least recently
 * written directory (minutes before hours).
 *
 * Queries run on the same worker, after every minute handed to it before they were submitted
 * (tlc_rollup_submit seals the target's open minute first: a minute sealed early is two blocks
 * that reads merge), and the answer comes back on the loop.
 *
 * Threads: tlc_rollup_new/close, the accumulator functions and tlc_rollup_submit on the loop
 * thread; tlc_rollup_read on any thread that may log (it only reads files, and warns of a
 * block it skips; the module's own worker sends its log lines to the loop).
 */
#ifndef TLC_ROLLUP_MOD_H
#define TLC_ROLLUP_MOD_H

#include "engine/engine.h"
#include "formats/rollup.h"

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

typedef struct tlc_rollup tlc_rollup_t;
typedef struct tlc_rollup_acc tlc_rollup_acc_t;

typedef struct tlc_rollup_opts {
  const char *state_dir;    /* required (copied) */
  uint64_t keep_minutes_ms; /* 0: 14 days */
  uint64_t keep_hours_ms;   /* 0: 400 days */
  uint64_t max_bytes;       /* 0: 1 GiB */
} tlc_rollup_opts_t;

/* One closed sample, as the engine's tap reports it; or (kind with TLC_ROLLUP_VIOL set) one
 * budget violation that ended at `end`, counted in the cell of the other fields (value unused). */
#define TLC_ROLLUP_VIOL 0x80
typedef struct tlc_rollup_sample {
  uint32_t handle, context;
  uint64_t state;
  uint8_t kind, row_kind;
  int64_t value;
  int64_t end; /* target time it closed */
  uint64_t epoch;
} tlc_rollup_sample_t;

typedef struct tlc_rollup_stats {
  uint64_t samples;         /* in minutes written (counted after the write) */
  uint64_t violations;      /* budget violations counted */
  uint64_t minutes_sealed;  /* open minutes handed to the worker */
  uint64_t blocks_written;  /* area-minute and area-hour blocks appended */
  uint64_t bytes_written;   /* ... their bytes */
  uint64_t write_errors;    /* appends that failed (logged) */
  uint64_t blocks_refused;  /* damaged blocks skipped by readers */
  uint64_t dirs_deleted;    /* by retention */
  uint64_t bytes_on_disk;   /* all rollup files, at the last retention pass */
  uint64_t queries;         /* answered */
  uint64_t saved_samples;   /* samples of open minutes saved on disk (the checkpoint's copy) */
  uint64_t restored;        /* saved open minutes written at start (after a crash) */
  uint64_t rebuilds;        /* rollups rebuilt from stored segments: started, */
  uint64_t rebuilds_done;   /* ... finished (whole, or as far as the segments read) */
  uint64_t rebuilding;      /* ... running now */
  uint64_t samples_dropped; /* no memory for a slot */
  uint64_t replayed;        /* samples of records replayed after a checkpoint (restart) counted */
  uint64_t replay_dropped;  /* ... not counted: their minute was on disk already */
} tlc_rollup_stats_t;

/* A statistics checkpoint's storage position (continuity's): what a saved copy belongs to. */
typedef struct tlc_rollup_pos {
  uint64_t seq, bytes, disconnects;
} tlc_rollup_pos_t;

/* Creates the module and starts its worker. 0, TLC_EINVAL (no state_dir) or TLC_ENOMEM. */
int tlc_rollup_new(uv_loop_t *loop, const tlc_rollup_opts_t *o, tlc_rollup_t **out);
/* Seals every open minute, lets the worker write them and the open hours, joins it and frees
 * the module (the accumulators must be freed before). Loop thread; blocks until written. */
void tlc_rollup_close(tlc_rollup_t *r);
/* Live settings (config reload). */
void tlc_rollup_set_budget(tlc_rollup_t *r, uint64_t keep_minutes_ms, uint64_t keep_hours_ms,
                           uint64_t max_bytes);
void tlc_rollup_get_stats(tlc_rollup_t *r, tlc_rollup_stats_t *out);
/* A rebuild from segments (the daemon's) started (1) or ended (0): the counters above. Any
 * thread. */
void tlc_rollup_note_rebuild(tlc_rollup_t *r, int started);
/* Whether target `name` has rollups on disk (its directory exists). Any thread. */
int tlc_rollup_exists(tlc_rollup_t *r, const char *name);

/* An accumulator for target `name` (copied); the open minute a crash left saved on disk
 * (tlc_rollup_acc_save) is written as a minute block first. NULL on TLC_ENOMEM. */
tlc_rollup_acc_t *tlc_rollup_acc_new(tlc_rollup_t *r, const char *name);
/* An accumulator of target `name`'s past samples (a rebuild from its segments, any one thread):
 * its open minute and hour on the worker are its own, so that it and the live accumulator never
 * cut each other's minutes into parts. NULL on TLC_ENOMEM. */
tlc_rollup_acc_t *tlc_rollup_acc_new_past(tlc_rollup_t *r, const char *name);
/* Seals the open minute and frees the accumulator. */
void tlc_rollup_acc_free(tlc_rollup_acc_t *a);
/* Counts one sample in the open minute (sealing it first when s is of another minute). */
void tlc_rollup_add(tlc_rollup_acc_t *a, const tlc_rollup_sample_t *s);
/* The same without a copy: the place of the next sample, which closed at `end` in `epoch`, for
 * the caller to fill at once (every field, end and epoch as given), before any other call on a;
 * NULL when there is no memory (the sample is counted as dropped). */
tlc_rollup_sample_t *tlc_rollup_next(tlc_rollup_acc_t *a, int64_t end, uint64_t epoch);
/* The engine's tap (engine.h: tlc_engine_tap_fn) feeding accumulator `acc`: every sample kind
 * appended as tlc_rollup_next's caller would, the marks (kind >= TLC_NKINDS) ignored. The
 * append is inlined here, so that a sample costs the tap one call and eight stores. Its answer is
 * 0 (no tag). Thread of the accumulator. */
struct tlc_engine_sample;
int tlc_rollup_tap(void *acc, const struct tlc_engine_sample *s);
/* The engine's sample log (engine.h: tlc_engine_slog_fn) feeding accumulator `acc`: the same
 * samples as tlc_rollup_tap gets, a block at a time, the engine's block itself handed to the
 * worker (no copy; rows resolved there by the log's DEF marks) and a fresh one returned from a
 * pool the worker gives blocks (and their jobs: no allocation per block) back to; the block is
 * not taken (its samples counted as dropped) past the memory bound of the queue. Thread of the
 * accumulator (the engine's). */
struct tlc_engine;
struct tlc_engine_slent;
struct tlc_engine_slent *tlc_rollup_slog(void *acc, const struct tlc_engine *e,
                                         struct tlc_engine_slent *x, size_t n);
/* Counts one budget violation in the minute of its end time: handle, context, state and row_kind
 * of its row, kind the statistic it broke (a rate: TLC_NET's cell). */
void tlc_rollup_add_violation(tlc_rollup_acc_t *a, uint32_t handle, uint32_t context,
                              uint64_t state, uint8_t kind, uint8_t row_kind, int64_t end,
                              uint64_t epoch);
/* A note's kind (aux >> 16) in the engine's sample log (engine.h: TLC_SLOG_NOTE) that the
 * accumulator's worker reads: a budget violation (tlc_rollup_slog_violation: aux's low bytes its
 * kind and row_kind, the first entry's value handle << 32 | context and end its state, the
 * second's value its end and end its epoch). */
#define TLC_ROLLUP_NOTE_VIOLATION 1u
/* The same through engine e's sample log when it feeds a (tlc_rollup_slog): appended to the log
 * in order with the samples (engine.h: tlc_engine_slog_note), with no hand-off of its own, so
 * that a storm of violations costs the loop one entry pair each (inline: the note's pair
 * written in one call). 0, or TLC_EINVAL when e's log is not a's (then tlc_engine_slog_flush and
 * tlc_rollup_add_violation keep the order). */
static inline int tlc_rollup_slog_violation(tlc_rollup_acc_t *a, struct tlc_engine *e,
                                            uint32_t handle, uint32_t context, uint64_t state,
                                            uint8_t kind, uint8_t row_kind, int64_t end,
                                            uint64_t epoch) {
  uint32_t aux = (uint32_t)TLC_ROLLUP_NOTE_VIOLATION << 16 | (uint32_t)row_kind << 8 |
                 (kind < TLC_NKINDS ? kind : TLC_NET);
  return tlc_engine_slog_note(e, tlc_rollup_slog, a, aux,
                              (int64_t)((uint64_t)handle << 32 | context), (int64_t)state, end,
                              (int64_t)epoch);
}
/* Takes a copy of the open minute as of now (a statistics checkpoint asks its storage position
 * now), the minute staying open, with the target's marks (the last minute written and how many
 * of its samples): returns its generation, for tlc_rollup_acc_saved_at. */
uint64_t tlc_rollup_acc_save(tlc_rollup_acc_t *a);
/* The checkpoint's position came: the copy taken at gen is written on disk under it
 * (STATE_DIR/.rollup/TARGET/ckpt-SEQ-BYTES-DISCONNECTS; the newest two kept), so that a restart
 * from that checkpoint knows what of its replayed records is on disk already. */
void tlc_rollup_acc_saved_at(tlc_rollup_acc_t *a, uint64_t gen, const tlc_rollup_pos_t *pos);
/* A restart replays the target's stored records after the checkpoint at pos: the samples the
 * accumulator gets from now until tlc_rollup_acc_replay_end are those, and the worker counts
 * only the ones whose minute the crashed run had not written (the copy saved under pos is
 * written first when nothing was written after it). */
void tlc_rollup_acc_replay(tlc_rollup_acc_t *a, const tlc_rollup_pos_t *pos);
void tlc_rollup_acc_replay_end(tlc_rollup_acc_t *a);
/* Hands the open minute (if any) to the worker now. */
void tlc_rollup_acc_seal(tlc_rollup_acc_t *a);

/* A query: the rollups of one target over a range, merged per step. */
enum { TLC_RQ_TARGET = 1, TLC_RQ_WALL = 2 };
typedef struct tlc_rollup_q {
  char target[256];
  uint32_t handle; /* with all_handles 0 */
  uint8_t all_handles;
  uint8_t has_context;
  uint32_t context;
  int when;      /* TLC_RQ_TARGET: target ns in `epoch` (-1: the latest stored); WALL: Unix ns */
  int64_t epoch; /* TARGET */
  uint8_t has_since, has_until;
  int64_t since, until;
  int64_t step_min; /* minutes per step (1, 60, 1440, ...); 0: the whole range is one step */
} tlc_rollup_q_t;

typedef struct tlc_rollup_res {
  int status; /* 0 or a TLC_E* code, err says why */
  char err[256];
  uint64_t epoch; /* TARGET queries: the epoch read */
  /* steps with samples, ascending: minute = the step's first minute (target time, or wall
   * clock minutes since 1970 for WALL queries), span = step_min; the cells merged */
  tlc_rollup_blk_t *steps;
  size_t nsteps;
  uint64_t blocks_read, blocks_refused;
} tlc_rollup_res_t;

void tlc_rollup_res_fini(tlc_rollup_res_t *res);

/* Reads the rollups under state_dir for q into res (initialised here). Any thread. */
void tlc_rollup_read(const char *state_dir, const tlc_rollup_q_t *q, tlc_rollup_res_t *res);

/* What a query's answer is turned into on the worker (e.g. a JSON document in ctx): encode runs
 * there after the reads, with every result; free(ctx) when the query was cancelled. */
typedef struct tlc_rollup_ans {
  void (*encode)(void *ctx, const tlc_rollup_q_t *q, tlc_rollup_res_t *res, size_t nq);
  void (*free)(void *ctx);
  void *ctx;
} tlc_rollup_ans_t;

typedef struct tlc_rollup_job tlc_rollup_job_t;

/* Runs nq (1 or 2) queries q[] on the worker after sealing the open minutes of accs[] (entries
 * may be NULL); ans (may be NULL) encodes there; cb runs on the loop with the results res[nq]
 * (owned by the module; the callee may take steps by zeroing them; with ans, their steps are
 * freed on the worker once encoded: status, err, epoch and the counters remain). *job (may be NULL)
 * is for tlc_rollup_cancel. 0, TLC_ENOMEM or TLC_EINVAL (closing, nq out of range). */
typedef void (*tlc_rollup_cb)(void *ud, tlc_rollup_res_t *res, size_t nq);
int tlc_rollup_submit(tlc_rollup_t *r, tlc_rollup_acc_t *const *accs, const tlc_rollup_q_t *q,
                      size_t nq, const tlc_rollup_ans_t *ans, tlc_rollup_cb cb, void *ud,
                      tlc_rollup_job_t **job);
/* The requester is gone: cb will not run; ans.free(ctx) will. Loop thread, before cb ran. */
void tlc_rollup_cancel(tlc_rollup_job_t *job);

/* The engine's quantile of a cell: the representative of the bucket holding the nearest-rank
 * sample of permille / 1000, clamped to [min, max] (within 1%); min when the cell has no bins. */
int64_t tlc_rollup_quantile(const tlc_rollup_cell_t *c, unsigned permille);

#endif
