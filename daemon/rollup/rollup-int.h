/* rollup-int.h - the rollup module's internals (acc.c: the loop side; rollup.c: the worker, the
 * files, retention and queries). */
#ifndef TLC_ROLLUP_INT_H
#define TLC_ROLLUP_INT_H

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
  tlc_hist_t h;
} tlc_rollup_slot_t;

struct tlc_rollup_acc {
  tlc_rollup_t *r;
  char *name;
  uint64_t epoch;
  int64_t minute;
  int64_t wall_first;
  tlc_rollup_slot_t *slots;
  size_t n, cap;
  uint32_t *idx; /* nidx entries, UINT32_MAX = free */
  size_t nidx;
  uint32_t last; /* slot of the previous sample, UINT32_MAX: none */
  uint64_t nsamples;
};

enum { TLC_RJOB_MINUTE = 1, TLC_RJOB_QUERY = 2, TLC_RJOB_STOP = 3 };

struct tlc_rollup_job {
  struct tlc_rollup_job *next;
  int kind;
  char *target;
  /* MINUTE */
  uint64_t epoch;
  int64_t minute, wall_first, wall_last;
  tlc_rollup_slot_t *slots;
  size_t nslots;
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
  uint64_t epoch;
  int64_t hour_minute;
  tlc_rollup_blk_t blk;
} tlc_rollup_hour_t;

struct tlc_rollup {
  uv_loop_t *loop;
  char *root; /* STATE_DIR/.rollup */
  char *state_dir;
  uv_mutex_t mu;
  uv_cond_t cv;
  tlc_rollup_job_t *head, *tail;           /* to the worker */
  tlc_rollup_job_t *done_head, *done_tail; /* answered queries, back to the loop */
  uv_async_t done_async;
  uv_thread_t thread;
  int started, stopping;
  uint64_t keep_minutes_ms, keep_hours_ms, max_bytes;
  tlc_rollup_stats_t st;
  /* worker only */
  tlc_rollup_hour_t *hours;
  size_t nhours, caphours;
  int64_t last_retention_ms;
};

void tlc__rollup_slots_free(tlc_rollup_slot_t *v, size_t n);
void tlc__rollup_push(tlc_rollup_t *r, tlc_rollup_job_t *j);
void tlc__rollup_count(tlc_rollup_t *r, uint64_t *ctr, uint64_t n);

#endif
