/* locd.c - where the records of a live target's batches are stored (see locd.h).
 *
 * Per target one `struct tlc_locd` (t->locd), made at its first stored batch or target event.
 * A batch's wants gather in one job (l->cur), placed as one store mark by tlc_locd_flush. The
 * count is trusted for the records of [ok_seq, the engine's sequence] while storage's dropped
 * count is still ok_drops; a mark's answer finding it moved starts the count again (once: the
 * later marks of the same count see it restarted already).
 */
#include "daemon/locd.h"

#include "base/alloc.h"
#include "engine/engine.h"
#include "store/policy/policy.h"

#define LOCD_MARKS  8  /* marks in flight per target (beyond: that batch's records unlocated) */
#define LOCD_WANTS  4  /* modules asking about one batch */
#define LOCD_RECORD 24 /* a bin1x record's bytes */

typedef struct locd_job {
  struct tlc_locd *l;
  uint64_t after;            /* the engine's change sequence after the batch */
  uint64_t ok_seq, ok_drops; /* l's when the mark was placed */
  size_t n;
  struct {
    tlc_locd_fn fn;
    void *ud;
  } w[LOCD_WANTS];
} locd_job_t;

struct tlc_locd {
  tlc_target_t *t;            /* NULL once detached (a mark still in flight holds this) */
  const tlc_engine_t *engine; /* the engine counted (a restore replaces it) */
  uint64_t seq_prev;          /* the engine's change sequence after the previous batch */
  uint64_t gaps_prev;         /* and its gap count */
  uint64_t ok_seq, ok_drops;
  size_t inflight;
  int ready;       /* this batch's records can be located */
  locd_job_t *cur; /* this batch's wants */
};

static uint64_t store_drops(const tlc_target_t *t) {
  tlc_store_target_counters_t c;
  tlc_store_target_counters(tlc_stpol_target(t), &c);
  return c.dropped_records;
}

/* Counting starts afresh after the engine's sequence `seq`. */
static void restart(struct tlc_locd *l, uint64_t seq) {
  l->engine = l->t->pipe.engine;
  l->seq_prev = seq;
  l->gaps_prev = tlc_engine_counters(l->t->pipe.engine)->gaps;
  l->ok_seq = seq + 1;
  l->ok_drops = store_drops(l->t);
}

int tlc_locd_span(const tlc_locd_at_t *at, uint64_t seq_start, uint64_t seq_end, uint64_t loc[4]) {
  const tlc_store_pos_t *p = at->pos;
  int first, last;
  loc[0] = loc[1] = loc[2] = loc[3] = 0;
  if (p == NULL)
    return 0;
  first = tlc_store_pos_record(p, at->first, at->last, seq_start, LOCD_RECORD, &loc[0], &loc[1]);
  last = tlc_store_pos_record(p, at->first, at->last, seq_end, LOCD_RECORD, &loc[2], &loc[3]);
  return first || last;
}

static const tlc_locd_at_t none = { NULL, 0, 0 }; /* an answer without a location */

static void answer(locd_job_t *j, const tlc_locd_at_t *at) {
  for (size_t i = 0; i < j->n; i++)
    j->w[i].fn(j->w[i].ud, at);
  tlc_free(j);
}

static void mark_done(void *ud, const tlc_store_pos_t *pos) {
  locd_job_t *j = ud;
  struct tlc_locd *l = j->l;
  tlc_locd_at_t at = { NULL, j->ok_seq, j->after };
  l->inflight--;
  if (l->t == NULL) { /* detached meanwhile */
    if (l->inflight == 0)
      tlc_free(l);
  } else if (pos->valid && l->t->pipe.engine != NULL) {
    if (store_drops(l->t) == j->ok_drops)
      at.pos = pos;
    else if (l->ok_drops == j->ok_drops)
      /* a drop before the mark (or after it): nothing counted so far is located */
      restart(l, tlc_engine_seq(l->t->pipe.engine));
  }
  answer(j, &at);
}

static void detach(tlc_target_t *t) {
  struct tlc_locd *l = t->locd;
  if (l == NULL)
    return;
  t->locd = NULL;
  l->t = NULL;
  if (l->cur != NULL) { /* not placed: answered now */
    answer(l->cur, &none);
    l->cur = NULL;
  }
  if (l->inflight == 0)
    tlc_free(l);
}

/* t's count, made when it has none (NULL: no memory). */
static struct tlc_locd *get(tlc_target_t *t) {
  if (t->locd == NULL && (t->locd = tlc_calloc(1, sizeof(*t->locd))) != NULL)
    t->locd->t = t;
  return t->locd;
}

void tlc_locd_target_event(tlc_daemon_t *d, const tlc_target_t *ct, int kind) {
  /* the daemon owns its targets (as budgetd.c's conf.watch): this module keeps t->locd */
  tlc_target_t *t = (tlc_target_t *)ct;
  if (kind == TLC_TEV_FREED || kind == TLC_TEV_FORGOTTEN) {
    detach(t);
    return;
  }
  if (d->closing || t->pipe.engine == NULL || tlc_stpol_target(t) == NULL ||
      (kind != TLC_TEV_CREATED && kind != TLC_TEV_RESET && kind != TLC_TEV_CONNECTED &&
       kind != TLC_TEV_MAPPING))
    return;
  /* counting starts here: the next batch's records are the next ones stored */
  if (get(t) != NULL)
    restart(t->locd, tlc_engine_seq(t->pipe.engine));
}

void tlc_locd_batch(tlc_daemon_t *d, const tlc_target_t *ct, size_t n) {
  tlc_target_t *t = (tlc_target_t *)ct;
  struct tlc_locd *l = t->locd;
  uint64_t seq;
  if (l != NULL)
    l->ready = 0;
  if (d->closing || t->pipe.engine == NULL || t->format == TLC_FMT_EVLOG ||
      tlc_stpol_target(t) == NULL)
    return;
  seq = tlc_engine_seq(t->pipe.engine);
  if (l == NULL) {
    if (get(t) != NULL)
      restart(t->locd, seq); /* this batch is not located: nothing before it was counted */
    return;
  }
  if (l->engine != t->pipe.engine || seq - l->seq_prev != n ||
      tlc_engine_counters(t->pipe.engine)->gaps != l->gaps_prev)
    restart(l, seq);
  l->seq_prev = seq;
  l->ready = seq >= l->ok_seq && l->inflight < LOCD_MARKS;
}

int tlc_locd_ready(const tlc_target_t *t) {
  const struct tlc_locd *l = t->locd;
  return l != NULL && l->ready && (l->cur == NULL || l->cur->n < LOCD_WANTS);
}

int tlc_locd_want(const tlc_target_t *t, tlc_locd_fn fn, void *ud) {
  struct tlc_locd *l = t->locd;
  locd_job_t *j;
  if (!tlc_locd_ready(t))
    return -1;
  if ((j = l->cur) == NULL) {
    if ((j = tlc_malloc(sizeof(*j))) == NULL)
      return -1;
    j->l = l;
    j->after = l->seq_prev;
    j->ok_seq = l->ok_seq;
    j->ok_drops = l->ok_drops;
    j->n = 0;
    l->cur = j;
  }
  j->w[j->n].fn = fn;
  j->w[j->n].ud = ud;
  j->n++;
  return 0;
}

void tlc_locd_flush(tlc_daemon_t *d, const tlc_target_t *t) {
  struct tlc_locd *l = t->locd;
  locd_job_t *j;
  (void)d;
  if (l == NULL || (j = l->cur) == NULL)
    return;
  l->cur = NULL;
  l->ready = 0;
  if (tlc_store_mark(tlc_stpol_target(t), mark_done, j) == 0)
    l->inflight++;
  else
    answer(j, &none);
}

void tlc_locd_close(tlc_daemon_t *d) {
  for (size_t i = 0; i < d->in.targets.n; i++)
    detach(d->in.targets.v[i]);
}
