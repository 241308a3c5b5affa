/* acc.c - the open minute of a target: the loop side appends every sample to a chunk (one
 * sequential 48-byte store, no lookup); the worker side counts the chunks' samples in the open
 * minute (see rollup.h).
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

/* The chunk being filled did not reach the worker: with it, maybe some of the row keys (DEF)
 * and a ROWS slot, so every row is described again after a ROWS slot. */
static void chunk_lost(tlc_rollup_acc_t *a) {
  a->n = a->nmeta = 0;
  if (a->seen != NULL)
    memset(a->seen, 0, a->nseen * sizeof(*a->seen));
  a->need_rows = 1;
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
      r->st.samples_dropped += a->n - a->nmeta;
    uv_mutex_unlock(&r->mu);
    if (drop) {
      chunk_lost(a); /* the chunk is reused */
      return;
    }
  }
  j = tlc_calloc(1, sizeof(*j));
  if (j == NULL || (j->target = tlc_strndup(a->name, strlen(a->name))) == NULL) {
    tlc_free(j);
    tlc__rollup_count(r, &r->st.samples_dropped, a->n - a->nmeta);
    chunk_lost(a);
    return;
  }
  j->kind = TLC_RJOB_CHUNK;
  j->lane = a->lane;
  j->chunk_wall0 = a->wall0;
  j->chunk_wall = tlc_when_now();
  j->samples = a->chunk;
  j->nsamples = a->n;
  j->nmeta = a->nmeta;
  j->seal = seal;
  j->replay = a->replay;
  j->gen = a->gen;
  a->chunk = NULL;
  a->n = a->nmeta = 0;
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
  tlc_free(a->seen);
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

void tlc_rollup_tap(void *acc, const tlc_engine_sample_t *s) {
  tlc_rollup_sample_t *x;
  if (s->kind >= TLC_NKINDS) /* a mark (counts, gaps): no sample */
    return;
  if ((x = next(acc, s->end, s->epoch)) == NULL)
    return;
  x->handle = s->handle; /* in place: one store per field, no copy */
  x->context = s->context;
  x->state = s->state;
  x->kind = s->kind;
  x->row_kind = s->row_kind;
  x->value = s->value;
  x->end = s->end;
  x->epoch = s->epoch;
}

/* A slot that is not a sample (ROWS, DEF) in the chunk of (end, epoch), or NULL (no memory). */
static tlc_rollup_sample_t *meta(tlc_rollup_acc_t *a, int64_t end, uint64_t epoch, uint8_t kind) {
  tlc_rollup_sample_t *s = next(a, end, epoch);
  if (s == NULL)
    return NULL;
  memset(s, 0, sizeof(*s));
  s->kind = kind;
  s->end = end;
  s->epoch = epoch;
  a->nmeta++;
  return s;
}

/* The slow path of tlc_rollup_slog's entry x: its row not described to the worker yet (or a
 * chunk lost since): a ROWS slot when one is owed, the row's key (DEF, read from the engine),
 * then the entry, all in one chunk (a chunk lost on the way starts it over). */
#if defined(__GNUC__)
__attribute__((noinline))
#endif
static void
slog_slow(tlc_rollup_acc_t *a, const tlc_engine_t *e, const tlc_engine_slent_t *x) {
  uint32_t rk = x->rk, row = rk / TLC_NKINDS;
  size_t w = rk >> 6;
  tlc_rollup_sample_t d, *s;
  memset(&d, 0, sizeof d);
  d.kind = TLC_ROLLUP_DEF;
  d.value = row;
  /* first: a row the engine has (the bitmap stays below its rows, which max_areas bounds) */
  if (tlc_engine_row_desc(e, row, &d.handle, &d.context, &d.row_kind, &d.state) != 0) {
    tlc__rollup_count(a->r, &a->r->st.samples_dropped, 1);
    return;
  }
  if (w >= a->nseen) {
    size_t cap = a->nseen ? a->nseen : 16;
    uint64_t *nb;
    while (cap <= w)
      cap *= 2;
    if ((nb = tlc_realloc(a->seen, cap * sizeof(*nb))) == NULL) {
      tlc__rollup_count(a->r, &a->r->st.samples_dropped, 1);
      return;
    }
    memset(nb + a->nseen, 0, (cap - a->nseen) * sizeof(*nb));
    a->seen = nb;
    a->nseen = cap;
  }
  for (int tries = 0; tries < 3; tries++) {
    if (a->need_rows) {
      a->need_rows = 0;
      if (meta(a, x->end, a->slog_epoch, TLC_ROLLUP_ROWS) == NULL)
        break;
    }
    if ((s = meta(a, x->end, a->slog_epoch, TLC_ROLLUP_DEF)) == NULL)
      break;
    d.end = s->end;
    d.epoch = s->epoch;
    *s = d;
    if ((s = next(a, x->end, a->slog_epoch)) == NULL)
      break;
    if (a->need_rows) { /* the chunk with the key was lost: the slot is the new chunk's first */
      a->n--;
      continue;
    }
    a->seen[w] |= 1ull << (rk & 63);
    s->handle = rk;
    s->kind = TLC_ROLLUP_RAW;
    s->value = x->value;
    s->end = x->end;
    s->epoch = a->slog_epoch;
    return;
  }
  tlc__rollup_count(a->r, &a->r->st.samples_dropped, 1);
}

void tlc_rollup_slog(void *acc, const tlc_engine_t *e, const tlc_engine_slent_t *x, size_t n) {
  tlc_rollup_acc_t *a = acc;
  size_t i = 0;
  while (i < n) {
    uint32_t rk;
    size_t w;
    tlc_rollup_sample_t *s;
    /* the run of entries the chunk being filled takes as they are (rows described to the worker,
     * the chunk's minute and epoch, room): its state in locals, since the stores into the chunk
     * could alias the accumulator's fields; no hand-off inside */
    if (a->n > 0 && a->slog_epoch == a->epoch) {
      tlc_rollup_sample_t *c = a->chunk;
      const uint64_t *seen = a->seen;
      size_t cn = a->n, nseen = a->nseen;
      size_t lim = n - i < TLC_ROLLUP_CHUNK - cn ? n : i + (TLC_ROLLUP_CHUNK - cn);
      int64_t lo = a->lo, hi = a->hi;
      uint64_t ep = a->epoch;
      for (; i < lim; i++) {
        int64_t end = x[i].end;
        rk = x[i].rk; /* a mark: its bit is never set (only rows' rk < TLC_SLOG_MARKS are) */
        w = rk >> 6;
        if (!(w < nseen && (seen[w] >> (rk & 63) & 1) && end >= lo && end < hi))
          break;
        s = &c[cn++];
        s->handle = rk;
        s->kind = TLC_ROLLUP_RAW;
        s->value = x[i].value;
        s->end = end;
        s->epoch = ep;
      }
      a->n = cn;
      if (i == n)
        break;
    }
    rk = x[i].rk;
    w = rk >> 6;
    if (rk >= TLC_SLOG_MARKS) {
      if (rk == TLC_SLOG_EPOCH) {
        a->slog_epoch = (uint64_t)x[i].value;
      } else if (rk == TLC_SLOG_ROWS) {
        if (a->seen != NULL)
          memset(a->seen, 0, a->nseen * sizeof(*a->seen));
        a->need_rows = 1; /* the worker's keys are stale: a ROWS slot before the next DEF */
      }
      i++;
      continue;
    }
    /* the row described to the worker, and no chunk lost since: the entry as it is (5 stores) */
    if (w < a->nseen && (a->seen[w] >> (rk & 63) & 1)) {
      if ((s = next(a, x[i].end, a->slog_epoch)) == NULL) {
        i++;
        continue;
      }
      if (!a->need_rows) {
        s->handle = rk;
        s->kind = TLC_ROLLUP_RAW;
        s->value = x[i].value;
        s->end = x[i].end;
        s->epoch = a->slog_epoch;
        i++;
        continue;
      }
      a->n--; /* a chunk was lost on the way (the bitmap is clear now): described again */
    }
    slog_slow(a, e, &x[i]);
    i++;
  }
}

/* ---- the worker side: the log's slots resolved ---- */

int tlc__rollup_open_rec(tlc_rollup_open_t *o, tlc_rollup_sample_t *s) {
  if (s->kind == TLC_ROLLUP_RAW) {
    uint32_t row = s->handle / TLC_NKINDS;
    const struct tlc_rollup_rdesc *d = row < o->caprows ? &o->rows[row] : NULL;
    if (d == NULL || !d->known) { /* its key was lost with a dropped chunk */
      tlc__rollup_count(o->r, &o->r->st.samples_dropped, 1);
      return 0;
    }
    s->kind = (uint8_t)(s->handle - row * TLC_NKINDS);
    s->handle = d->handle;
    s->context = d->context;
    s->state = d->state;
    s->row_kind = d->row_kind;
    return 1;
  }
  if (s->kind == TLC_ROLLUP_ROWS) {
    if (o->rows != NULL)
      memset(o->rows, 0, o->caprows * sizeof(*o->rows));
  } else if (s->kind == TLC_ROLLUP_DEF) {
    uint64_t row = (uint64_t)s->value; /* below the engine's rows (the loop checked) */
    struct tlc_rollup_rdesc *d;
    if (row >= o->caprows) {
      size_t cap = o->caprows ? o->caprows : 64;
      struct tlc_rollup_rdesc *nr;
      while (cap <= row)
        cap *= 2;
      if ((nr = tlc_realloc(o->rows, cap * sizeof(*nr))) == NULL)
        return 0; /* its samples are counted as dropped */
      memset(nr + o->caprows, 0, (cap - o->caprows) * sizeof(*nr));
      o->rows = nr;
      o->caprows = cap;
    }
    d = &o->rows[row];
    d->handle = s->handle;
    d->context = s->context;
    d->state = s->state;
    d->row_kind = s->row_kind;
    d->known = 1;
  }
  return 0;
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
