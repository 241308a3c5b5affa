/* xlocd.c - where the extremes of the live targets are stored (see xlocd.h).
 *
 * Per target one `struct tlc_xloc` (t->xloc), made at its first batch. The count is the one
 * budgetd.c keeps for violations: after a batch the engine's change sequence must have moved by
 * exactly the batch's events and its gap count not at all, else counting starts again after the
 * batch (nothing before is located); a mark's answer (the open segment and its length, which
 * ends with the batch's last record) locates the records of [ok_seq, the batch's end] provided
 * storage's dropped count has not moved since ok_seq was set. An extreme that a later one
 * replaced before the answer came is left alone (tlc_engine_xlocate checks its sequences).
 * A checkpoint taken by a later mark comes back after this one (marks are answered in order), so
 * the locations found are in it.
 */
#include "daemon/xlocd.h"

#include "base/alloc.h"
#include "engine/engine.h"
#include "store/policy/policy.h"
#include "store/store.h"

#include <string.h>

#define XL_BATCH  16 /* extremes of one batch a mark locates (the engine lists 16) */
#define XL_MARKS  8  /* marks in flight per target (beyond: that batch's go unlocated) */
#define XL_RECORD 24 /* a bin1x record's bytes */

struct tlc_xloc {
  tlc_target_t *t;    /* NULL once detached (a mark still in flight holds this) */
  uint64_t seq_prev;  /* the engine's change sequence after the previous batch */
  uint64_t gaps_prev; /* and its gap count */
  uint64_t ok_seq, ok_drops;
  const tlc_engine_t *engine; /* the engine counted (a restore replaces it) */
  size_t inflight;
};

typedef struct xl_job {
  struct tlc_xloc *x;
  uint64_t after;            /* the engine's change sequence after the batch */
  uint64_t ok_seq, ok_drops; /* x's when the mark was placed */
  size_t n;
  tlc_engine_xnew_t v[XL_BATCH];
} xl_job_t;

static uint64_t store_drops(const tlc_target_t *t) {
  tlc_store_target_counters_t c;
  tlc_store_target_counters(tlc_stpol_target(t), &c);
  return c.dropped_records;
}

static void restart(struct tlc_xloc *x, uint64_t seq) {
  x->engine = x->t->pipe.engine;
  x->seq_prev = seq;
  x->gaps_prev = tlc_engine_counters(x->t->pipe.engine)->gaps;
  x->ok_seq = seq + 1;
  x->ok_drops = store_drops(x->t);
}

/* Where the record of change sequence seq is. 1: *seg, *off; 0: not. */
static int loc_of(const xl_job_t *j, const tlc_store_pos_t *pos, uint64_t seq, uint64_t *seg,
                  uint64_t *off) {
  return tlc_store_pos_record(pos, j->ok_seq, j->after, seq, XL_RECORD, seg, off);
}

static void mark_done(void *ud, const tlc_store_pos_t *pos) {
  xl_job_t *j = ud;
  struct tlc_xloc *x = j->x;
  x->inflight--;
  if (x->t == NULL) {
    if (x->inflight == 0)
      tlc_free(x);
    tlc_free(j);
    return;
  }
  if (pos->valid && x->t->pipe.engine != NULL) {
    if (store_drops(x->t) != j->ok_drops) {
      if (x->ok_drops == j->ok_drops)
        restart(x, tlc_engine_seq(x->t->pipe.engine));
    } else {
      for (size_t i = 0; i < j->n; i++) {
        uint64_t loc[4] = { 0, 0, 0, 0 };
        /* a first record two segments back stays 0 (unknown), as a violation's */
        int first = loc_of(j, pos, j->v[i].seq_start, &loc[0], &loc[1]);
        int last = loc_of(j, pos, j->v[i].seq_end, &loc[2], &loc[3]);
        if (first || last)
          (void)tlc_engine_xlocate(x->t->pipe.engine, &j->v[i], loc);
      }
    }
  }
  tlc_free(j);
}

static void detach(tlc_target_t *t) {
  struct tlc_xloc *x = t->xloc;
  if (x == NULL)
    return;
  t->xloc = NULL;
  x->t = NULL;
  if (x->inflight == 0)
    tlc_free(x);
}

void tlc_xlocd_target_event(tlc_daemon_t *d, const tlc_target_t *ct, int kind) {
  /* the daemon owns its targets (as budgetd.c's conf.watch): this module keeps t->xloc */
  tlc_target_t *t = (tlc_target_t *)ct;
  if (kind == TLC_TEV_FREED || kind == TLC_TEV_FORGOTTEN) {
    detach(t);
    return;
  }
  if (d->closing || t->pipe.engine == NULL || tlc_stpol_target(t) == NULL ||
      (kind != TLC_TEV_CREATED && kind != TLC_TEV_RESET && kind != TLC_TEV_CONNECTED &&
       kind != TLC_TEV_MAPPING))
    return;
  if (t->xloc == NULL) {
    if ((t->xloc = tlc_calloc(1, sizeof(*t->xloc))) == NULL)
      return;
    t->xloc->t = t;
  }
  /* counting starts here: the next batch's records are the next ones stored */
  restart(t->xloc, tlc_engine_seq(t->pipe.engine));
}

void tlc_xlocd_batch(tlc_daemon_t *d, const tlc_target_t *ct, size_t n) {
  tlc_target_t *t = (tlc_target_t *)ct;
  struct tlc_xloc *x = t->xloc;
  tlc_engine_xnew_t v[XL_BATCH];
  size_t nv;
  uint64_t seq;
  xl_job_t *j;
  if (d->closing || t->pipe.engine == NULL)
    return;
  nv = tlc_engine_xnew(t->pipe.engine, v, XL_BATCH); /* always taken: the list starts anew */
  if (t->format == TLC_FMT_EVLOG || tlc_stpol_target(t) == NULL)
    return;
  seq = tlc_engine_seq(t->pipe.engine);
  if (x == NULL) {
    if ((x = tlc_calloc(1, sizeof(*x))) == NULL)
      return;
    x->t = t;
    t->xloc = x;
    restart(x, seq); /* this batch's extremes are not counted: nothing before it was */
    return;
  }
  if (x->engine != t->pipe.engine || seq - x->seq_prev != n ||
      tlc_engine_counters(t->pipe.engine)->gaps != x->gaps_prev)
    restart(x, seq);
  x->seq_prev = seq;
  if (nv == 0 || x->inflight >= XL_MARKS || seq < x->ok_seq)
    return;
  if ((j = tlc_malloc(sizeof(*j))) == NULL)
    return;
  j->x = x;
  j->after = seq;
  j->ok_seq = x->ok_seq;
  j->ok_drops = x->ok_drops;
  j->n = nv;
  memcpy(j->v, v, nv * sizeof(v[0]));
  if (tlc_store_mark(tlc_stpol_target(t), mark_done, j) == 0)
    x->inflight++;
  else
    tlc_free(j);
}

void tlc_xlocd_close(tlc_daemon_t *d) {
  for (size_t i = 0; i < d->in.targets.n; i++)
    detach(d->in.targets.v[i]);
}
