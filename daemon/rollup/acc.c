/* acc.c - the open minute of a target: the loop side hands the engine's sample log blocks to
 * the worker as they are (no copy), with the budget violations tagged (TLC_SLOG_TAG) or noted
 * (tlc_rollup_slog_violation) in them, and appends the tap's samples and other violations to a
 * chunk (one sequential 48-byte store, no lookup); the worker side resolves the blocks' rows,
 * tags and notes, splits samples by minute and epoch and counts them in the open minute (see
 * rollup.h).
 *
 * Loop: a full chunk (TLC_ROLLUP_CHUNK samples) goes to the worker as a job; past
 * TLC_ROLLUP_MAX_QUEUED samples waiting, a full chunk is dropped instead and counted
 * (samples_dropped), so that a worker that falls behind never costs unbounded memory.
 * Worker: slots live in one array indexed by an open-addressing table of their keys (linear
 * probing, at most half full); the last slot used is tried first. Sealing hands the slot array
 * to the minute writer and starts an empty one.
 */
#include "rollup/rollup-int.h"

#include "engine/engine.h"

#include "base/alloc.h"
#include "base/err.h"
#include "base/log.h"
#include "formats/when.h"

#include <string.h>

#if defined(__GNUC__)
#define TLC_ROLLUP_LIKELY(x) __builtin_expect(!!(x), 1)
#else
#define TLC_ROLLUP_LIKELY(x) (x)
#endif

static uint64_t key_hash(uint32_t handle, uint32_t context, uint64_t state, uint8_t kind) {
  uint64_t h = ((uint64_t)handle << 32 | context) * 0x9E3779B97F4A7C15ull;
  h ^= (state + kind) * 0xC2B2AE3D27D4EB4Full;
  return h ^ (h >> 29);
}

static tlc_rollup_acc_t *acc_new(tlc_rollup_t *r, const char *name, uint8_t lane) {
  tlc_rollup_acc_t *a = tlc_calloc(1, sizeof(*a));
  if (a == NULL)
    return NULL;
  a->r = r;
  a->lane = lane;
  a->name = tlc_strndup(name, strlen(name));
  if (a->name == NULL) {
    tlc_free(a);
    return NULL;
  }
  return a;
}

tlc_rollup_acc_t *tlc_rollup_acc_new(tlc_rollup_t *r, const char *name) {
  tlc_rollup_acc_t *a = acc_new(r, name, 0);
  tlc_rollup_job_t *j;
  if (a == NULL)
    return NULL;
  /* before any chunk of it: a saved open minute a crash left is written first */
  j = tlc_calloc(1, sizeof(*j));
  if (j == NULL || (j->target = tlc_strndup(name, strlen(name))) == NULL) {
    tlc_free(j);
    tlc_free(a->name);
    tlc_free(a);
    return NULL;
  }
  j->kind = TLC_RJOB_RESTORE;
  tlc__rollup_push(r, j);
  return a;
}

tlc_rollup_acc_t *tlc_rollup_acc_new_past(tlc_rollup_t *r, const char *name) {
  return acc_new(r, name, 1);
}

/* The chunk being filled did not reach the worker (it is reused). */
static void chunk_lost(tlc_rollup_acc_t *a) {
  a->n = 0;
}

/* Hands the chunk to the worker (seal: and then its open minute is written). */
static void hand_off(tlc_rollup_acc_t *a, int seal) {
  tlc_rollup_t *r = a->r;
  tlc_rollup_job_t *j;
  int drop = 0;
  if (a->n == 0 && !seal)
    return;
  if (!seal) {
    uv_mutex_lock(&r->mu);
    drop = r->queued + a->n > TLC_ROLLUP_MAX_QUEUED;
    if (drop)
      r->st.samples_dropped += a->n;
    uv_mutex_unlock(&r->mu);
    if (drop) {
      chunk_lost(a); /* the chunk is reused */
      return;
    }
  }
  j = tlc_calloc(1, sizeof(*j));
  if (j == NULL || (j->target = tlc_strndup(a->name, strlen(a->name))) == NULL) {
    tlc_free(j);
    tlc__rollup_count(r, &r->st.samples_dropped, a->n);
    chunk_lost(a);
    return;
  }
  j->kind = TLC_RJOB_CHUNK;
  j->lane = a->lane;
  j->chunk_wall0 = a->wall0;
  j->chunk_wall = tlc_when_now();
  j->samples = a->chunk;
  j->nsamples = a->n;
  j->seal = seal;
  j->replay = a->replay;
  j->gen = a->gen;
  a->chunk = NULL;
  a->n = 0;
  uv_mutex_lock(&r->mu);
  r->queued += j->nsamples;
  uv_mutex_unlock(&r->mu);
  tlc__rollup_push(r, j);
}

void tlc_rollup_acc_seal(tlc_rollup_acc_t *a) {
  hand_off(a, TLC_RSEAL_WRITE);
}

uint64_t tlc_rollup_acc_save(tlc_rollup_acc_t *a) {
  a->gen++;
  hand_off(a, TLC_RSEAL_SAVE);
  return a->gen;
}

/* A job of kind for a's target (pos may be NULL). */
static void push_job(tlc_rollup_acc_t *a, int kind, uint64_t gen, const tlc_rollup_pos_t *pos) {
  tlc_rollup_job_t *j = tlc_calloc(1, sizeof(*j));
  if (j == NULL || (j->target = tlc_strndup(a->name, strlen(a->name))) == NULL) {
    tlc_free(j);
    tlc__rollup_count(a->r, &a->r->st.write_errors, 1);
    return;
  }
  j->kind = kind;
  j->gen = gen;
  if (pos != NULL)
    j->pos = *pos;
  tlc__rollup_push(a->r, j);
}

void tlc_rollup_acc_saved_at(tlc_rollup_acc_t *a, uint64_t gen, const tlc_rollup_pos_t *pos) {
  push_job(a, TLC_RJOB_POS, gen, pos);
}

void tlc_rollup_acc_replay(tlc_rollup_acc_t *a, const tlc_rollup_pos_t *pos) {
  hand_off(a, TLC_RSEAL_NO); /* a chunk is all replayed or all live */
  push_job(a, TLC_RJOB_REPLAY, 0, pos);
  a->replay = 1;
}

void tlc_rollup_acc_replay_end(tlc_rollup_acc_t *a) {
  if (!a->replay)
    return;
  hand_off(a, TLC_RSEAL_NO);
  a->replay = 0;
  push_job(a, TLC_RJOB_REPLAYED, 0, NULL);
}

void tlc_rollup_acc_free(tlc_rollup_acc_t *a) {
  if (a == NULL)
    return;
  hand_off(a, TLC_RSEAL_WRITE);
  tlc__rollup_chunk_put(a->r, a->chunk);
  tlc_free(a->name);
  tlc_free(a);
}

/* The slow path of next(): the chunk is empty, full, or of another minute or epoch. */
#if defined(__GNUC__)
__attribute__((noinline))
#endif
static tlc_rollup_sample_t *
next_slow(tlc_rollup_acc_t *a, int64_t end, uint64_t epoch) {
  int64_t m = tlc_rollup_minute(end);
  /* a chunk holds one minute of one epoch: another one hands it off first, so that a minute
   * reaches the worker as soon as target time leaves it; a full one goes at the next sample */
  if (a->n > 0)
    hand_off(a, 0);
  if (a->chunk == NULL && (a->chunk = tlc_malloc(TLC_ROLLUP_CHUNK * sizeof(*a->chunk))) == NULL) {
    tlc__rollup_count(a->r, &a->r->st.samples_dropped, 1);
    return NULL;
  }
  a->lo = m * TLC_ROLLUP_MINUTE_NS;
  a->hi = m < INT64_MAX / TLC_ROLLUP_MINUTE_NS - 1 ? a->lo + TLC_ROLLUP_MINUTE_NS : INT64_MAX;
  a->epoch = epoch;
  a->wall0 = tlc_when_now();
  return &a->chunk[a->n++];
}

/* The fast path, inlined into the tap: a chunk being filled whose minute and epoch hold the
 * sample (n in (0, CHUNK): one unsigned compare; end in [lo, hi); the epoch) takes it. */
static inline tlc_rollup_sample_t *next(tlc_rollup_acc_t *a, int64_t end, uint64_t epoch) {
  if (TLC_ROLLUP_LIKELY(a->n - 1 < TLC_ROLLUP_CHUNK - 1 && end >= a->lo && end < a->hi &&
                        epoch == a->epoch))
    return &a->chunk[a->n++];
  return next_slow(a, end, epoch);
}

tlc_rollup_sample_t *tlc_rollup_next(tlc_rollup_acc_t *a, int64_t end, uint64_t epoch) {
  return next(a, end, epoch);
}

int tlc_rollup_tap(void *acc, const tlc_engine_sample_t *s) {
  tlc_rollup_sample_t *x;
  if (s->kind >= TLC_NKINDS) /* a mark (counts, gaps): no sample */
    return 0;
  if ((x = next(acc, s->end, s->epoch)) == NULL)
    return 0;
  x->handle = s->handle; /* in place: one store per field, no copy */
  x->context = s->context;
  x->state = s->state;
  x->kind = s->kind;
  x->row_kind = s->row_kind;
  x->value = s->value;
  x->end = s->end;
  x->epoch = s->epoch;
  return 0;
}

/* The engine's block x (n entries) goes to the worker as it is: the one copy of the entries is
 * the engine's. A block from the pool (or new) takes its place; past TLC_ROLLUP_MAX_QUEUED
 * entries' room waiting for the worker, or without memory, x is not taken: its samples are
 * counted as dropped and the engine starts it over (every row described again). */
tlc_engine_slent_t *tlc_rollup_slog(void *acc, const tlc_engine_t *e, tlc_engine_slent_t *x,
                                    size_t n) {
  tlc_rollup_acc_t *a = acc;
  tlc_rollup_t *r = a->r;
  tlc_engine_slent_t *nb = NULL;
  tlc_rollup_job_t *j = NULL;
  int drop;
  (void)e;
  if (a->n > 0) /* violations added before these samples go first (in order on the worker) */
    hand_off(a, 0);
  uv_mutex_lock(&r->mu);
  drop = r->queued + TLC_SLOG_BLOCK > TLC_ROLLUP_MAX_QUEUED;
  if (!drop) {
    r->queued += TLC_SLOG_BLOCK;
    if (r->nbpool > 0)
      nb = r->bpool[--r->nbpool];
    if (r->njpool > 0)
      j = r->jpool[--r->njpool];
  }
  uv_mutex_unlock(&r->mu);
  if (!drop && nb == NULL)
    nb = tlc_malloc(TLC_SLOG_BLOCK * sizeof(*nb));
  if (nb != NULL && j == NULL)
    j = tlc_calloc(1, sizeof(*j));
  if (j != NULL && (j->target == NULL || strcmp(j->target, a->name) != 0)) {
    tlc_free(j->target); /* a pooled job of another target */
    j->target = tlc_strndup(a->name, strlen(a->name));
  }
  if (nb == NULL || j == NULL || j->target == NULL) {
    uint64_t lost = tlc_engine_slog_samples(x, n);
    if (j != NULL) {
      j->block = nb;
      tlc__rollup_bjob_put(r, j);
      nb = NULL;
    }
    uv_mutex_lock(&r->mu);
    if (!drop)
      r->queued -= TLC_SLOG_BLOCK;
    r->st.samples_dropped += lost;
    uv_mutex_unlock(&r->mu);
    tlc__rollup_block_put(r, nb);
    return x;
  }
  j->next = NULL; /* a pooled job: only BLOCK's fields were set */
  j->kind = TLC_RJOB_BLOCK;
  j->lane = a->lane;
  j->chunk_wall0 = j->chunk_wall = tlc_when_now();
  j->block = x;
  j->nblock = n;
  j->replay = a->replay;
  tlc__rollup_push(r, j);
  return nb;
}

/* ---- the worker side: a block of the sample log counted ---- */

/* Row x->aux's key from a DEF mark. 0, or TLC_ENOMEM (its samples are counted as dropped). */
static int rows_def(tlc_rollup_open_t *o, const tlc_engine_slent_t *x) {
  uint32_t row = x->aux;
  struct tlc_rollup_rdesc *d;
  if (row >= o->caprows) {
    size_t cap = o->caprows ? o->caprows : 64;
    struct tlc_rollup_rdesc *nr;
    while (cap <= row)
      cap *= 2;
    if ((nr = tlc_realloc(o->rows, cap * sizeof(*nr))) == NULL)
      return TLC_ENOMEM;
    memset(nr + o->caprows, 0, (cap - o->caprows) * sizeof(*nr));
    o->rows = nr;
    o->caprows = cap;
  }
  d = &o->rows[row];
  d->handle = (uint32_t)((uint64_t)x->value >> 32);
  d->context = (uint32_t)x->value;
  d->state = (uint64_t)x->end;
  d->row_kind = (uint8_t)(x->rk - TLC_SLOG_DEF);
  d->known = 1;
  return 0;
}

/* The violation of note x[0..1] (tlc_rollup_slog_violation's) into *s. 1, or 0 when x is not
 * one (a note of another kind). */
static int note_violation(const tlc_engine_slent_t *x, tlc_rollup_sample_t *s) {
  uint32_t kind = x[0].aux & 0xFF;
  if ((x[0].aux >> 16) != TLC_ROLLUP_NOTE_VIOLATION || kind >= TLC_NKINDS)
    return 0;
  memset(s, 0, sizeof *s);
  s->handle = (uint32_t)((uint64_t)x[0].value >> 32);
  s->context = (uint32_t)x[0].value;
  s->state = (uint64_t)x[0].end;
  s->kind = (uint8_t)(kind | TLC_ROLLUP_VIOL);
  s->row_kind = (uint8_t)(x[0].aux >> 8);
  s->end = x[1].value;
  s->epoch = (uint64_t)x[1].end;
  return 1;
}

/* *s with the key of the log's row `row` (from its DEF mark), end and the log's epoch, the
 * rest 0. 1, or 0 when the row is not known (its key lost: no memory for it). */
static int row_sample(const tlc_rollup_open_t *o, uint32_t row, int64_t end,
                      tlc_rollup_sample_t *s) {
  const struct tlc_rollup_rdesc *d = row < o->caprows ? &o->rows[row] : NULL;
  if (d == NULL || !d->known)
    return 0;
  memset(s, 0, sizeof *s);
  s->handle = d->handle;
  s->context = d->context;
  s->state = d->state;
  s->row_kind = d->row_kind;
  s->end = end;
  s->epoch = o->slog_epoch;
  return 1;
}

/* The n violations a tap tagged sample x with (engine.h: TLC_SLOG_TAG; the budget watch's): each
 * one in the minute and cell of its sample, as tlc_rollup_add_violation counts one, or dropped
 * when the sample's row is not known (its key lost). */
static void tag_violations(tlc_rollup_t *r, tlc_rollup_open_t *o, const tlc_engine_slent_t *x,
                           int replay) {
  uint32_t kind = (uint32_t)((uint64_t)x->value & 0xFF);
  uint64_t n = (uint64_t)x->value >> 8;
  tlc_rollup_sample_t s;
  if (!row_sample(o, x->aux, x->end, &s)) {
    tlc__rollup_count(r, &r->st.samples_dropped, n);
    return;
  }
  s.kind = (uint8_t)((kind < TLC_NKINDS ? kind : TLC_NET) | TLC_ROLLUP_VIOL);
  for (uint64_t k = 0; k < n; k++)
    if (!replay || tlc__rollup_replay_keep(r, o, &s))
      tlc__rollup_hold(r, o, &s);
}

void tlc__rollup_open_block(tlc_rollup_t *r, tlc_rollup_open_t *o, const tlc_engine_slent_t *x,
                            size_t n, int replay) {
  for (size_t i = 0; i < n; i++) {
    uint32_t rk = x[i].rk, row, kind, ns;
    tlc_rollup_sample_t s;
    if (rk >= TLC_SLOG_MARKS) {
      if (rk == TLC_SLOG_NOTE) { /* a violation (tlc_rollup_slog_violation), a pair */
        if (i + 1 < n && note_violation(&x[i], &s) &&
            (!replay || tlc__rollup_replay_keep(r, o, &s)))
          tlc__rollup_hold(r, o, &s);
        i++;
      } else if (rk == TLC_SLOG_TAG) { /* a sample's violations (the budget watch's) */
        tag_violations(r, o, &x[i], replay);
      } else if (rk == TLC_SLOG_EPOCH) {
        o->slog_epoch = (uint64_t)x[i].value;
      } else if (rk == TLC_SLOG_ROWS) {
        if (o->rows != NULL)
          memset(o->rows, 0, o->caprows * sizeof(*o->rows));
      } else if (rk < TLC_SLOG_DEF + 8) {
        (void)rows_def(o, &x[i]);
      }
      continue;
    }
    row = rk / TLC_NKINDS;
    kind = rk - row * TLC_NKINDS;
    /* NET's form: a pair, NET here, GROSS and CALL the next entry's value and end */
    ns = kind == TLC_NET && i + 1 < n ? 3 : 1;
    if (!row_sample(o, row, x[i].end, &s)) { /* its key lost (no memory for it) */
      tlc__rollup_count(r, &r->st.samples_dropped, ns);
      i += ns > 1;
      continue;
    }
    for (unsigned k = 0; k < ns; k++) {
      s.kind = (uint8_t)(kind + k);
      s.value = k == 0 ? x[i].value : k == 1 ? x[i + 1].value : x[i + 1].end;
      if (replay && !tlc__rollup_replay_keep(r, o, &s))
        continue;
      tlc__rollup_hold(r, o, &s);
    }
    i += ns > 1;
  }
}

void tlc__rollup_held_flush(tlc_rollup_t *r, tlc_rollup_open_t *o) {
  int64_t w0 = o->chunk_wall0;
  o->chunk_wall0 = o->held_wall0; /* when the first of them came */
  for (size_t i = 0; i < o->nheld; i++) {
    tlc_rollup_job_t *m = tlc__rollup_open_add(o, &o->held[i]);
    if (m != NULL)
      tlc__rollup_minute(r, m);
  }
  o->nheld = 0;
  o->chunk_wall0 = w0;
}

/* The rules of the loop's chunk before (next() above): one minute of one epoch, at most
 * TLC_ROLLUP_CHUNK samples. */
void tlc__rollup_hold(tlc_rollup_t *r, tlc_rollup_open_t *o, const tlc_rollup_sample_t *s) {
  if (!(o->nheld - 1 < TLC_ROLLUP_CHUNK - 1 && s->end >= o->held_lo && s->end < o->held_hi &&
        s->epoch == o->held_epoch)) {
    int64_t m = tlc_rollup_minute(s->end);
    if (o->nheld > 0)
      tlc__rollup_held_flush(r, o);
    if (o->held == NULL && (o->held = tlc_malloc(TLC_ROLLUP_CHUNK * sizeof(*o->held))) == NULL) {
      tlc__rollup_count(r, &r->st.samples_dropped, 1);
      return;
    }
    o->held_lo = m * TLC_ROLLUP_MINUTE_NS;
    o->held_hi =
        m < INT64_MAX / TLC_ROLLUP_MINUTE_NS - 1 ? o->held_lo + TLC_ROLLUP_MINUTE_NS : INT64_MAX;
    o->held_epoch = s->epoch;
    o->held_wall0 = o->chunk_wall0;
  }
  o->held[o->nheld++] = *s;
}

void tlc_rollup_add(tlc_rollup_acc_t *a, const tlc_rollup_sample_t *s) {
  tlc_rollup_sample_t *x = tlc_rollup_next(a, s->end, s->epoch);
  if (x != NULL)
    *x = *s;
}

void tlc_rollup_add_violation(tlc_rollup_acc_t *a, uint32_t handle, uint32_t context,
                              uint64_t state, uint8_t kind, uint8_t row_kind, int64_t end,
                              uint64_t epoch) {
  tlc_rollup_sample_t s;
  memset(&s, 0, sizeof s);
  s.handle = handle;
  s.context = context;
  s.state = state;
  s.kind = (uint8_t)((kind < TLC_NKINDS ? kind : TLC_NET) | TLC_ROLLUP_VIOL);
  s.row_kind = row_kind;
  s.end = end;
  s.epoch = epoch;
  tlc_rollup_add(a, &s); /* in order with the samples: the same minute's chunk */
}

/* ---- the worker side ---- */

tlc_rollup_open_t *tlc__rollup_open_of(tlc_rollup_t *r, const char *name, uint8_t lane) {
  tlc_rollup_open_t *o;
  for (size_t i = 0; i < r->nopens; i++)
    if (r->opens[i]->lane == lane && strcmp(r->opens[i]->name, name) == 0)
      return r->opens[i];
  if (r->nopens == r->capopens) {
    size_t nc = r->capopens ? r->capopens * 2 : 8;
    tlc_rollup_open_t **nv = tlc_realloc(r->opens, nc * sizeof(*nv));
    if (nv == NULL)
      return NULL;
    r->opens = nv;
    r->capopens = nc;
  }
  if ((o = tlc_calloc(1, sizeof(*o))) == NULL)
    return NULL;
  o->r = r;
  o->lane = lane;
  o->last = UINT32_MAX;
  if ((o->name = tlc_strndup(name, strlen(name))) == NULL) {
    tlc_free(o);
    return NULL;
  }
  r->opens[r->nopens++] = o;
  return o;
}

void tlc__rollup_open_free(tlc_rollup_open_t *o) {
  if (o == NULL)
    return;
  tlc__rollup_slots_free(o->slots, o->n);
  tlc_free(o->held);
  tlc_free(o->idx);
  tlc_free(o->rows);
  tlc_free(o->pend);
  tlc_free(o->name);
  tlc_free(o);
}

tlc_rollup_job_t *tlc__rollup_open_seal(tlc_rollup_open_t *a) {
  tlc_rollup_job_t *j, *out = NULL;
  if (a->n == 0)
    return NULL;
  j = tlc_calloc(1, sizeof(*j));
  if (j == NULL || (j->target = tlc_strndup(a->name, strlen(a->name))) == NULL) {
    tlc_free(j);
    /* no memory for the hand-off: this minute is lost, counted */
    tlc__rollup_count(a->r, &a->r->st.samples_dropped, a->nsamples);
    tlc__rollup_slots_free(a->slots, a->n);
  } else {
    j->kind = TLC_RJOB_MINUTE;
    j->lane = a->lane;
    j->epoch = a->epoch;
    j->minute = a->minute;
    j->wall_first = a->wall_first;
    j->wall_last = a->wall_last;
    j->slots = a->slots;
    j->nslots = a->n;
    tlc__rollup_count(a->r, &a->r->st.minutes_sealed, 1);
    out = j;
  }
  a->slots = NULL;
  a->n = a->cap = 0;
  a->nsamples = 0;
  a->last = UINT32_MAX;
  if (a->idx != NULL)
    memset(a->idx, 0xff, a->nidx * sizeof(*a->idx));
  return out;
}

/* Rebuilds the index at nidx entries (a power of two). 0 or TLC_ENOMEM. */
static int reindex(tlc_rollup_open_t *a, size_t nidx) {
  uint32_t *ni = tlc_malloc(nidx * sizeof(*ni));
  if (ni == NULL)
    return TLC_ENOMEM;
  memset(ni, 0xff, nidx * sizeof(*ni));
  for (size_t i = 0; i < a->n; i++) {
    const tlc_rollup_slot_t *s = &a->slots[i];
    size_t p = key_hash(s->handle, s->context, s->state, s->kind) & (nidx - 1);
    while (ni[p] != UINT32_MAX)
      p = (p + 1) & (nidx - 1);
    ni[p] = (uint32_t)i;
  }
  tlc_free(a->idx);
  a->idx = ni;
  a->nidx = nidx;
  return 0;
}

static tlc_rollup_slot_t *slot_get(tlc_rollup_open_t *a, const tlc_rollup_sample_t *s) {
  size_t p;
  tlc_rollup_slot_t *x;
  if (a->last != UINT32_MAX) {
    x = &a->slots[a->last];
    if (x->handle == s->handle && x->context == s->context && x->kind == s->kind &&
        x->state == s->state)
      return x;
  }
  if ((a->n + 1) * 2 > a->nidx && reindex(a, a->nidx ? a->nidx * 2 : 64) != 0)
    return NULL;
  p = key_hash(s->handle, s->context, s->state, s->kind) & (a->nidx - 1);
  for (; a->idx[p] != UINT32_MAX; p = (p + 1) & (a->nidx - 1)) {
    x = &a->slots[a->idx[p]];
    if (x->handle == s->handle && x->context == s->context && x->kind == s->kind &&
        x->state == s->state) {
      a->last = a->idx[p];
      return x;
    }
  }
  if (a->n == a->cap) {
    size_t nc = a->cap ? a->cap * 2 : 32;
    tlc_rollup_slot_t *nv = tlc_realloc(a->slots, nc * sizeof(*nv));
    if (nv == NULL)
      return NULL;
    a->slots = nv;
    a->cap = nc;
  }
  x = &a->slots[a->n];
  memset(x, 0, sizeof(*x));
  x->handle = s->handle;
  x->context = s->context;
  x->state = s->state;
  x->kind = s->kind;
  x->row_kind = s->row_kind;
  a->idx[p] = (uint32_t)a->n;
  a->last = (uint32_t)a->n;
  a->n++;
  return x;
}

tlc_rollup_job_t *tlc__rollup_open_add(tlc_rollup_open_t *a, const tlc_rollup_sample_t *s) {
  tlc_rollup_job_t *sealed = NULL;
  tlc_rollup_slot_t *x;
  int64_t m = tlc_rollup_minute(s->end);
  if (a->n > 0 && (m != a->minute || s->epoch != a->epoch))
    sealed = tlc__rollup_open_seal(a);
  if (a->n == 0) {
    a->minute = m;
    a->epoch = s->epoch;
    a->wall_first = a->chunk_wall0;
  }
  a->wall_last = a->chunk_wall;
  if (s->kind & TLC_ROLLUP_VIOL) {
    tlc_rollup_sample_t k = *s;
    k.kind = (uint8_t)(s->kind & ~TLC_ROLLUP_VIOL);
    if ((x = slot_get(a, &k)) != NULL)
      x->violations++;
    tlc__rollup_count(a->r, x != NULL ? &a->r->st.violations : &a->r->st.samples_dropped, 1);
    return sealed;
  }
  x = slot_get(a, s);
  if (x == NULL) {
    tlc__rollup_count(a->r, &a->r->st.samples_dropped, 1);
    return sealed;
  }
  if (x->d.n == 0 || s->value < x->d.min || (s->value == x->d.min && s->end < x->tmin))
    x->tmin = s->end;
  if (x->d.n == 0 || s->value > x->d.max || (s->value == x->d.max && s->end < x->tmax))
    x->tmax = s->end;
  tlc_dist_add(&x->d, s->value);
  if (tlc__hist_add(&x->h, s->value) != 0)
    x->nohist = 1; /* the cell is written without a histogram rather than a wrong one */
  a->nsamples++;
  return sealed;
}
