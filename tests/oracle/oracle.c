/* oracle.c - brute-force model of SPEC section 2 (see oracle.h).
 *
 * Purpose: an independent second computation of every statistic, as plain as possible, that
 * the engine's property tests compare against field by field.
 *
 * How: tlc_oracle_table() replays the stored event list from the start. Rows, contexts, state
 * areas and the per-context activation stacks are plain arrays searched linearly. Every sample
 * is kept with its time; every E (entry, write) time is kept; every context_area switch is kept
 * as an interval of event positions. Durations that depend on the switched-in time of a context
 * are evaluated by summing that context's interval list over the positions before the moment
 * asked for. At the end the lists are turned into the table: n/sum/min/max by a loop, sums of
 * squares in unsigned __int128, quantiles by sorting, windows by filtering on time.
 *
 * Positions: event j's context_area core start is at 4j+1, its own processing at 4j+2, the
 * context switch it makes at 4j+3; a gap before event j is at 4j. A switched-in interval counts
 * at position p when it started before p; it is closed at p when it ended before p.
 *
 * Rules (the same definitions as engine.h states; written from SPEC, not from engine.c):
 * negative durations count 0 and one anomaly on their row; truncation by X one anomaly per
 * truncated activation; X without open activation one anomaly on the row; non-W on a data area
 * one on the row; W on a code area one on the row; X on a state area with no state, S/R on a
 * state area, type > 4 or nibble > 5: one anomaly on no row. A gap closes activations and stays
 * at T (totals only, no anomaly), ends outside stretches (total only) and forgets PERIOD starts.
 * Clock restarts (SPEC 2): an event right after a gap, or flagged TLC_EVF_RESTART, whose time is
 * more than clock_reset_ns below T: a gap (unless one came right before), then a new epoch: T is
 * the event's time, every switched-in interval is cut at the old T and goes on from the new
 * time, and windows keep only samples of the new epoch.
 *
 * Does not: model caps, seq, or memory; it aborts on out-of-memory (tests only).
 */
#include "oracle.h"

#include "base/alloc.h"
#include "base/err.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NOIDX ((size_t)-1)

static void *xgrow(void *p, size_t *cap, size_t n, size_t elem) {
  if (n < *cap)
    return p;
  *cap = *cap ? *cap * 2 : 8;
  p = tlc_realloc(p, *cap * elem);
  if (p == NULL) {
    fprintf(stderr, "oracle: out of memory\n");
    abort();
  }
  return p;
}

typedef struct smp {
  int64_t v, t;
  int64_t t0;          /* when it started (the time of its first event) */
  uint64_t epoch;      /* the clock epoch it was taken in */
  uint64_t seq0, seq1; /* change sequences of its first and closing events */
} smp_t;

/* The clock epoch of the replay under way (tlc_oracle_table; the oracle is single-threaded):
 * every sample and E time is tagged with it, and windows hold only the current epoch's. */
static uint64_t cur_epoch;

/* The engine's change sequence (engine.h) as of the event being replayed: one per stored event
 * (NONE events excepted) and one per gap, whether stored, flagged on an event (before it) or
 * opened by a flagged clock restart (after it). */
static uint64_t cur_seq;

typedef struct vec {
  smp_t *p;
  size_t n, cap;
} vec_t;

static void vpush(vec_t *v, int64_t val, int64_t t0, uint64_t seq0, int64_t t) {
  v->p = xgrow(v->p, &v->cap, v->n, sizeof(*v->p));
  v->p[v->n].v = val;
  v->p[v->n].t = t;
  v->p[v->n].t0 = t0;
  v->p[v->n].epoch = cur_epoch;
  v->p[v->n].seq0 = seq0;
  v->p[v->n].seq1 = cur_seq;
  v->n++;
}

typedef struct item {
  int gap;
  tlc_event_t ev;
} item_t;

struct tlc_oracle {
  tlc_format_t fmt;
  tlc_oracle_opts_t o;
  item_t *it;
  size_t nit, capit;
};

/* ---- replay state ---- */

typedef struct ivl {
  uint64_t p0, p1; /* positions; p1 == UINT64_MAX while open */
  int64_t t0, t1;
} ivl_t;

typedef struct per {
  uint64_t p0;
  int64_t t0;
} per_t;

typedef struct oact {
  size_t row;
  int full, running;
  int64_t start;
  uint64_t seq0; /* change sequence of its first event */
  uint64_t startpos;
  per_t run; /* current running period start (valid when running) */
  int64_t net_done;
} oact_t;

typedef struct octx {
  int kind;
  unsigned core;
  uint64_t key;
  long tindex; /* -1 until a code row */
  ivl_t *iv;
  size_t niv, capiv;
  unsigned incores; /* number of cores it is current on */
  oact_t *st;
  size_t nst, capst;
} octx_t;

typedef struct orow {
  uint32_t handle;
  size_t ctx; /* NOIDX for data/state */
  uint64_t state;
  int kind;
  uint64_t anomalies;
  vec_t counts; /* times of E / entries / writes */
  vec_t s[TLC_NKINDS];
  int64_t closed[TLC_NKINDS];
  int has_value;
  uint64_t value, vmin, vmax;
  int has_last;
  int64_t last;
  uint64_t last_seq;
  int outside;
  int64_t out_start;
  uint64_t out_seq;
} orow_t;

typedef struct osarea {
  uint32_t handle;
  int in_state;
  uint64_t value;
  int64_t since;
  uint64_t since_seq;
} osarea_t;

typedef struct rs {
  const tlc_oracle_t *o;
  int ctxmode;
  orow_t *rows;
  size_t nrows, caprows;
  octx_t *cx;
  size_t ncx, capcx;
  long ntable;
  osarea_t *sa;
  size_t nsa, capsa;
  size_t cur[256];
  int core_seen[256];
  int64_t T, first;
  int have_T;
  int after_gap; /* the next event is the first after a gap */
  uint64_t events, anomalies, gaps, epoch;
} rs_t;

static void anom(rs_t *s, size_t row) {
  s->anomalies++;
  if (row != NOIDX)
    s->rows[row].anomalies++;
}

static int64_t clampd(rs_t *s, size_t row, int64_t d) {
  if (d < 0) {
    anom(s, row);
    return 0;
  }
  return d;
}

static size_t find_ctx(rs_t *s, int kind, unsigned core, uint64_t key) {
  size_t i;
  for (i = 0; i < s->ncx; i++) {
    octx_t *c = &s->cx[i];
    if (c->kind != kind)
      continue;
    if (kind == TLC_CTXK_CORE ? c->core == core : c->key == key)
      return i;
  }
  s->cx = xgrow(s->cx, &s->capcx, s->ncx, sizeof(*s->cx));
  memset(&s->cx[s->ncx], 0, sizeof(s->cx[0]));
  s->cx[s->ncx].kind = kind;
  s->cx[s->ncx].core = kind == TLC_CTXK_CORE ? core : TLC_CORE_UNKNOWN;
  s->cx[s->ncx].key = kind == TLC_CTXK_CORE ? 0 : key;
  s->cx[s->ncx].tindex = -1;
  return s->ncx++;
}

static size_t find_row(rs_t *s, int kind, uint32_t handle, size_t ctx, uint64_t state) {
  size_t i;
  orow_t *r;
  for (i = 0; i < s->nrows; i++) {
    r = &s->rows[i];
    if (r->kind == kind && r->handle == handle && r->ctx == ctx && r->state == state)
      return i;
  }
  s->rows = xgrow(s->rows, &s->caprows, s->nrows, sizeof(*s->rows));
  r = &s->rows[s->nrows];
  memset(r, 0, sizeof(*r));
  r->kind = kind;
  r->handle = handle;
  r->ctx = ctx;
  r->state = state;
  if (ctx != NOIDX && s->cx[ctx].tindex < 0)
    s->cx[ctx].tindex = s->ntable++;
  return s->nrows++;
}

/* Switched-in time of context c up to time t, counting what happened before position p. */
static int64_t in_time(const rs_t *s, size_t c, uint64_t p, int64_t t) {
  const octx_t *x = &s->cx[c];
  int64_t sum = 0;
  size_t i;
  if (!s->ctxmode)
    return t;
  for (i = 0; i < x->niv; i++) {
    const ivl_t *v = &x->iv[i];
    if (v->p0 >= p)
      continue;
    if (v->p1 < p)
      sum += v->t1 - v->t0;
    else
      sum += t - v->t0;
  }
  return sum;
}

static void set_in(rs_t *s, size_t c, uint64_t p, int64_t t) {
  octx_t *x = &s->cx[c];
  x->incores++;
  if (x->incores == 1) {
    x->iv = xgrow(x->iv, &x->capiv, x->niv, sizeof(*x->iv));
    x->iv[x->niv].p0 = p;
    x->iv[x->niv].t0 = t;
    x->iv[x->niv].p1 = UINT64_MAX;
    x->iv[x->niv].t1 = 0;
    x->niv++;
  }
}

static void set_out(rs_t *s, size_t c, uint64_t p, int64_t t) {
  octx_t *x = &s->cx[c];
  x->incores--;
  if (x->incores == 0) {
    x->iv[x->niv - 1].p1 = p;
    x->iv[x->niv - 1].t1 = t;
  }
}

/* how: 0 = X, 1 = truncated by X, 2 = gap */
static void close_act(rs_t *s, size_t c, oact_t *a, int64_t t, uint64_t p, int how) {
  orow_t *r = &s->rows[a->row];
  int64_t call = clampd(s, a->row, t - a->start);
  int64_t net = a->net_done;
  int64_t gross;
  if (a->running)
    net += clampd(s, a->row, in_time(s, c, p, t) - in_time(s, c, a->run.p0, a->run.t0));
  if (s->ctxmode)
    gross = clampd(s, a->row, in_time(s, c, p, t) - in_time(s, c, a->startpos, a->start));
  else
    gross = call;
  r->closed[TLC_NET] += net;
  r->closed[TLC_GROSS] += gross;
  r->closed[TLC_CALL] += call;
  if (how == 0 && a->full) {
    vpush(&r->s[TLC_NET], net, a->start, a->seq0, t);
    vpush(&r->s[TLC_GROSS], gross, a->start, a->seq0, t);
    vpush(&r->s[TLC_CALL], call, a->start, a->seq0, t);
  }
  if (how == 1)
    anom(s, a->row);
}

/* Open activations of a row (a code row belongs to one context). */
static size_t open_count(const rs_t *s, size_t row) {
  size_t i, j, n = 0;
  for (i = 0; i < s->ncx; i++)
    for (j = 0; j < s->cx[i].nst; j++)
      if (s->cx[i].st[j].row == row)
        n++;
  return n;
}

static void code_ev(rs_t *s, const tlc_event_t *ev, uint64_t p) {
  size_t c, row;
  long j, found = -1;
  octx_t *x;
  int64_t t = ev->time_ns;
  orow_t *r;
  if (s->o->fmt == TLC_FMT_EVLOG)
    c = find_ctx(s, TLC_CTXK_THREAD, 0, ev->thread);
  else if (s->ctxmode)
    c = s->cur[ev->core];
  else
    c = find_ctx(s, TLC_CTXK_CORE, ev->core, 0);
  row = find_row(s, TLC_ROW_CODE, ev->handle, c, 0);
  x = &s->cx[c];
  r = &s->rows[row];
  for (j = (long)x->nst - 1; j >= 0; j--)
    if (x->st[j].row == row) {
      found = j;
      break;
    }
  switch (ev->type) {
  case TLC_EV_ENTRY: {
    oact_t a;
    vpush(&r->counts, 0, t, 0, t);
    if (r->has_last)
      vpush(&r->s[TLC_PERIOD], clampd(s, row, t - r->last), r->last, r->last_seq, t);
    r = &s->rows[row];
    r->has_last = 1;
    r->last = t;
    r->last_seq = cur_seq;
    if (r->outside) {
      int64_t d = clampd(s, row, t - r->out_start);
      r->closed[TLC_OUTSIDE] += d;
      vpush(&r->s[TLC_OUTSIDE], d, r->out_start, r->out_seq, t);
      r->outside = 0;
    }
    memset(&a, 0, sizeof(a));
    a.row = row;
    a.full = 1;
    a.running = 1;
    a.start = t;
    a.seq0 = cur_seq;
    a.startpos = p;
    a.run.p0 = p;
    a.run.t0 = t;
    x->st = xgrow(x->st, &x->capst, x->nst, sizeof(*x->st));
    x->st[x->nst++] = a;
    break;
  }
  case TLC_EV_RESUME:
  case TLC_EV_SUSPEND:
    if (found >= 0) {
      oact_t *a = &x->st[found];
      if (ev->type == TLC_EV_RESUME && !a->running) {
        a->running = 1;
        a->run.p0 = p;
        a->run.t0 = t;
      } else if (ev->type == TLC_EV_SUSPEND && a->running) {
        a->net_done += clampd(s, row, in_time(s, c, p, t) - in_time(s, c, a->run.p0, a->run.t0));
        a->running = 0;
      }
    } else {
      oact_t a;
      if (r->outside) {
        r->closed[TLC_OUTSIDE] += clampd(s, row, t - r->out_start);
        r->outside = 0;
      }
      memset(&a, 0, sizeof(a));
      a.row = row;
      a.full = 0;
      a.running = ev->type == TLC_EV_RESUME;
      a.start = t;
      a.seq0 = cur_seq;
      a.startpos = p;
      a.run.p0 = p;
      a.run.t0 = t;
      x->st = xgrow(x->st, &x->capst, x->nst, sizeof(*x->st));
      x->st[x->nst++] = a;
    }
    break;
  case TLC_EV_EXIT:
    if (found < 0) {
      anom(s, row);
      break;
    }
    while ((long)x->nst > found) {
      oact_t a = x->st[x->nst - 1];
      int trunc = (long)x->nst - 1 != found;
      x->nst--;
      close_act(s, c, &a, t, p, trunc);
      if (open_count(s, a.row) == 0) {
        s->rows[a.row].outside = 1;
        s->rows[a.row].out_start = t;
        s->rows[a.row].out_seq = cur_seq;
      }
    }
    break;
  default:
    anom(s, row);
    break;
  }
}

static osarea_t *sarea(rs_t *s, uint32_t handle, int create) {
  size_t i;
  for (i = 0; i < s->nsa; i++)
    if (s->sa[i].handle == handle)
      return &s->sa[i];
  if (!create)
    return NULL;
  s->sa = xgrow(s->sa, &s->capsa, s->nsa, sizeof(*s->sa));
  memset(&s->sa[s->nsa], 0, sizeof(s->sa[0]));
  s->sa[s->nsa].handle = handle;
  return &s->sa[s->nsa++];
}

static void leave_state(rs_t *s, osarea_t *a, int64_t t) {
  size_t row = find_row(s, TLC_ROW_STATE, a->handle, NOIDX, a->value);
  int64_t d = clampd(s, row, t - a->since);
  s->rows[row].closed[TLC_NET] += d;
  vpush(&s->rows[row].s[TLC_NET], d, a->since, a->since_seq, t);
  a->in_state = 0;
}

static void enter_state(rs_t *s, uint32_t handle, uint64_t v, int64_t t) {
  osarea_t *a = sarea(s, handle, 1);
  size_t row;
  orow_t *r;
  if (a->in_state && a->value == v)
    return;
  if (a->in_state)
    leave_state(s, a, t);
  row = find_row(s, TLC_ROW_STATE, handle, NOIDX, v);
  r = &s->rows[row];
  vpush(&r->counts, 0, t, 0, t);
  if (r->has_last)
    vpush(&r->s[TLC_PERIOD], clampd(s, row, t - r->last), r->last, r->last_seq, t);
  r = &s->rows[row];
  r->has_last = 1;
  r->last = t;
  r->last_seq = cur_seq;
  a = sarea(s, handle, 0);
  a->in_state = 1;
  a->value = v;
  a->since = t;
  a->since_seq = cur_seq;
}

static void state_ev(rs_t *s, const tlc_event_t *ev) {
  osarea_t *a;
  if (ev->type == TLC_EV_WRITE || ev->type == TLC_EV_ENTRY) {
    enter_state(s, ev->handle, ev->data, ev->time_ns);
  } else if (ev->type == TLC_EV_EXIT) {
    a = sarea(s, ev->handle, 0);
    if (a != NULL && a->in_state)
      leave_state(s, a, ev->time_ns);
    else
      anom(s, NOIDX);
  } else {
    anom(s, NOIDX);
  }
}

static void data_ev(rs_t *s, const tlc_event_t *ev) {
  size_t row = find_row(s, TLC_ROW_DATA, ev->handle, NOIDX, 0);
  orow_t *r = &s->rows[row];
  const tlc_map_area_t *m;
  if (ev->type != TLC_EV_WRITE) {
    anom(s, row);
    return;
  }
  vpush(&r->counts, 0, ev->time_ns, 0, ev->time_ns);
  if (r->has_last)
    vpush(&r->s[TLC_PERIOD], clampd(s, row, ev->time_ns - r->last), r->last, r->last_seq,
          ev->time_ns);
  r->has_last = 1;
  r->last = ev->time_ns;
  r->last_seq = cur_seq;
  if (!r->has_value) {
    r->vmin = r->vmax = ev->data;
  } else {
    if (ev->data < r->vmin)
      r->vmin = ev->data;
    if (ev->data > r->vmax)
      r->vmax = ev->data;
  }
  r->has_value = 1;
  r->value = ev->data;
  if (s->o->o.mapping != NULL) {
    m = tlc_mapping_find(s->o->o.mapping, ev->handle);
    if (m != NULL && m->state_handle != TLC_NO_HANDLE)
      enter_state(s, m->state_handle, ev->data, ev->time_ns);
  }
}

static void do_gap(rs_t *s, uint64_t p) {
  size_t i;
  int64_t t = s->T;
  s->gaps++;
  s->after_gap = 1;
  for (i = 0; i < s->ncx; i++) {
    octx_t *x = &s->cx[i];
    while (x->nst > 0) {
      oact_t a = x->st[--x->nst];
      close_act(s, i, &a, t, p, 2);
    }
  }
  for (i = 0; i < s->nsa; i++)
    if (s->sa[i].in_state) {
      size_t row = find_row(s, TLC_ROW_STATE, s->sa[i].handle, NOIDX, s->sa[i].value);
      int64_t d = t - s->sa[i].since;
      s->rows[row].closed[TLC_NET] += d > 0 ? d : 0;
      s->sa[i].in_state = 0;
    }
  for (i = 0; i < s->nrows; i++) {
    orow_t *r = &s->rows[i];
    if (r->outside) {
      int64_t d = t - r->out_start;
      r->closed[TLC_OUTSIDE] += d > 0 ? d : 0;
      r->outside = 0;
    }
    r->has_last = 0;
  }
}

/* What a context_area value means: 1 running (the task in *task), 2 stopped, 0 neither.
 * Unpacked: always running, the whole value the task. */
static int packed_state(const tlc_oracle_opts_t *o, uint64_t v, uint64_t *task) {
  uint64_t state, mask = o->state_mask;
  size_t i;
  if (o->id_mask == 0 || o->state_mask == 0)
    return 1;
  *task = v & o->id_mask;
  state = v & mask;
  while ((mask & 1u) == 0) {
    mask >>= 1;
    state >>= 1;
  }
  for (i = 0; i < o->nrunning; i++)
    if (o->running[i] == state)
      return 1;
  if (o->stopped_all)
    return 2;
  for (i = 0; i < o->nstopped; i++)
    if (o->stopped[i] == state)
      return 2;
  return 0;
}

/* A clock restart at time t, position p (the gap's, before the event). */
static void restart(rs_t *s, int64_t t, uint64_t p) {
  size_t i;
  if (!s->after_gap) {
    cur_seq++; /* the engine's gap for a flagged restart comes after the event's own sequence */
    do_gap(s, p);
  }
  for (i = 0; i < s->ncx; i++) {
    octx_t *x = &s->cx[i];
    if (x->incores > 0) {
      unsigned n = x->incores;
      x->incores = 1;
      set_out(s, i, p, s->T);
      set_in(s, i, p, t);
      x->incores = n;
    }
  }
  s->T = t;
  s->epoch++;
  cur_epoch = s->epoch;
}

static void do_event(rs_t *s, const tlc_event_t *ev, size_t j) {
  unsigned area = ev->handle >> 28;
  if (ev->type == TLC_EV_NONE)
    return;
  if (ev->flags & TLC_EVF_GAP) {
    cur_seq++;
    do_gap(s, 4 * (uint64_t)j);
  }
  cur_seq++;
  if (s->have_T && (s->after_gap || (ev->flags & TLC_EVF_RESTART)) && s->o->o.clock_reset_ns > 0 &&
      ev->time_ns < s->T &&
      (uint64_t)s->T - (uint64_t)ev->time_ns > (uint64_t)s->o->o.clock_reset_ns)
    restart(s, ev->time_ns, 4 * (uint64_t)j);
  s->after_gap = 0;
  s->events++;
  if (!s->have_T) {
    s->have_T = 1;
    s->T = s->first = ev->time_ns;
  } else if (ev->time_ns > s->T) {
    s->T = ev->time_ns;
  }
  if (s->ctxmode && !s->core_seen[ev->core]) {
    s->core_seen[ev->core] = 1;
    s->cur[ev->core] = find_ctx(s, TLC_CTXK_CORE, ev->core, 0);
    set_in(s, s->cur[ev->core], 4 * (uint64_t)j + 1, ev->time_ns);
  }
  if (ev->type > 4 || area > 5) {
    anom(s, NOIDX);
    return;
  }
  if (area == 0 || area == 1)
    code_ev(s, ev, 4 * (uint64_t)j + 2);
  else if (area == 2 || area == 4)
    data_ev(s, ev);
  else
    state_ev(s, ev);
  if (s->ctxmode && ev->handle == s->o->o.context_area &&
      (ev->type == TLC_EV_WRITE || ev->type == TLC_EV_ENTRY)) {
    uint64_t task = ev->data;
    size_t nc;
    int st = packed_state(&s->o->o, ev->data, &task);
    if (st == 0)
      return;      /* a state in neither list */
    if (st == 2) { /* stopped: only the core's current task is switched out */
      const octx_t *c = &s->cx[s->cur[ev->core]];
      if (c->kind != TLC_CTXK_TASK || c->key != task)
        return;
      nc = find_ctx(s, TLC_CTXK_CORE, ev->core, 0);
    } else {
      nc = find_ctx(s, TLC_CTXK_TASK, 0, task);
    }
    if (nc != s->cur[ev->core]) {
      set_out(s, s->cur[ev->core], 4 * (uint64_t)j + 3, ev->time_ns);
      s->cur[ev->core] = nc;
      set_in(s, nc, 4 * (uint64_t)j + 3, ev->time_ns);
    }
  }
}

/* ---- from lists to a table ---- */

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? -1 : x > y;
}

/* Fills d from samples p[0..n) (their values). */
static void make_dist(tlc_dist_t *d, const int64_t *v, size_t n) {
  unsigned __int128 sq = 0;
  int64_t *sorted;
  size_t i;
  memset(d, 0, sizeof(*d));
  if (n == 0)
    return;
  d->min = d->max = v[0];
  for (i = 0; i < n; i++) {
    d->sum += v[i];
    if (v[i] < d->min)
      d->min = v[i];
    if (v[i] > d->max)
      d->max = v[i];
    sq += (unsigned __int128)(uint64_t)v[i] * (uint64_t)v[i];
  }
  d->n = n;
  d->sumsq_hi = (uint64_t)(sq >> 64);
  d->sumsq_lo = (uint64_t)sq;
  sorted = tlc_malloc(n * sizeof(*sorted));
  if (sorted == NULL)
    abort();
  memcpy(sorted, v, n * sizeof(*sorted));
  qsort(sorted, n, sizeof(*sorted), cmp_i64);
  for (i = 0; i < TLC_NQUANT; i++) {
    /* nearest rank: smallest k with k >= q * n, i.e. k = ceil(q n), at least 1; q in 1/1000 */
    static const unsigned permille[TLC_NQUANT] = { 500, 900, 990, 999 };
    unsigned __int128 num = (unsigned __int128)n * permille[i];
    size_t k = (size_t)((num + 999) / 1000);
    if (k < 1)
      k = 1;
    d->q[i] = sorted[k - 1];
  }
  d->has_q = 1;
  tlc_free(sorted);
}

static int in_window(const smp_t *x, int64_t T, int64_t step) {
  /* floor(t/step) > floor(T/step) - 10, with floor division written out, in this epoch */
  int64_t t = x->t;
  if (x->epoch != cur_epoch)
    return 0;
  int64_t ft = t / step - ((t % step != 0 && t < 0) ? 1 : 0);
  int64_t fT = T / step - ((T % step != 0 && T < 0) ? 1 : 0);
  return ft > fT - 10;
}

/* Values of the samples of kind k of the listed rows, and optionally only those in window. */
static size_t gather(const rs_t *s, const size_t *rows, size_t nr, unsigned k, int64_t **out,
                     int win, int64_t step) {
  size_t i, j, n = 0, tot = 0;
  int64_t *v;
  for (i = 0; i < nr; i++)
    tot += s->rows[rows[i]].s[k].n;
  v = tlc_malloc((tot ? tot : 1) * sizeof(*v));
  if (v == NULL)
    abort();
  for (i = 0; i < nr; i++) {
    const vec_t *x = &s->rows[rows[i]].s[k];
    for (j = 0; j < x->n; j++)
      if (!win || in_window(&x->p[j], s->T, step))
        v[n++] = x->p[j].v;
  }
  *out = v;
  return n;
}

static tlc_at_t smp_at(const smp_t *x) {
  tlc_at_t a;
  memset(&a, 0, sizeof(a));
  a.start = x->t0;
  a.end = x->t;
  a.seq_start = x->seq0;
  a.seq_end = x->seq1;
  a.epoch = (uint32_t)x->epoch;
  a.known = 1;
  return a;
}

/* When d's MIN and MAX were taken (SPEC 13): in each row, the first of its samples (in the
 * order they closed) with that value; over several rows (Neutral), of those the earliest by
 * tlc_at_earlier's order, written out here: (epoch, end, seq_end). */
static void extremes_at(const rs_t *s, const size_t *rows, size_t nr, unsigned k, tlc_dist_t *d) {
  size_t i, j;
  int have_mn = 0, have_mx = 0;
  for (i = 0; i < nr; i++) {
    const vec_t *x = &s->rows[rows[i]].s[k];
    const smp_t *mn = NULL, *mx = NULL;
    for (j = 0; j < x->n; j++) {
      if (mn == NULL && x->p[j].v == d->min)
        mn = &x->p[j];
      if (mx == NULL && x->p[j].v == d->max)
        mx = &x->p[j];
    }
    if (mn != NULL &&
        (!have_mn || mn->epoch < d->min_at.epoch ||
         (mn->epoch == d->min_at.epoch &&
          (mn->t < d->min_at.end || (mn->t == d->min_at.end && mn->seq1 < d->min_at.seq_end))))) {
      d->min_at = smp_at(mn);
      have_mn = 1;
    }
    if (mx != NULL &&
        (!have_mx || mx->epoch < d->max_at.epoch ||
         (mx->epoch == d->max_at.epoch &&
          (mx->t < d->max_at.end || (mx->t == d->max_at.end && mx->seq1 < d->max_at.seq_end))))) {
      d->max_at = smp_at(mx);
      have_mx = 1;
    }
  }
}

/* The distributions (and windows) of a row over the samples of rows[0..nr): one context's row,
 * or for Neutral the union of every context's own samples, for every kind, PERIOD and OUTSIDE
 * included (SPEC 2). */
static void fill_stat(const rs_t *s, tlc_stat_t *st, const size_t *rows, size_t nr, int windows) {
  unsigned k, w;
  size_t i, j;
  for (k = 0; k < TLC_NKINDS; k++) {
    int64_t *v;
    size_t n;
    n = gather(s, rows, nr, k, &v, 0, 1);
    make_dist(&st->dist[k], v, n);
    tlc_free(v);
    if (n > 0)
      extremes_at(s, rows, nr, k, &st->dist[k]);
  }
  if (!windows)
    return;
  st->nwin = s->o->o.nwindows;
  for (w = 0; w < s->o->o.nwindows; w++) {
    int64_t step = s->o->o.window_ns[w] / 10;
    for (i = 0; i < nr; i++) {
      const vec_t *c = &s->rows[rows[i]].counts;
      for (j = 0; j < c->n; j++)
        if (in_window(&c->p[j], s->T, step))
          st->win[w].count++;
    }
    for (k = 0; k < TLC_NKINDS; k++) {
      int64_t *v;
      size_t n;
      tlc_wdist_t *wd = &st->win[w].k[k];
      n = gather(s, rows, nr, k, &v, 1, step);
      for (i = 0; i < n; i++) {
        if (wd->n == 0 || v[i] < wd->min)
          wd->min = v[i];
        if (wd->n == 0 || v[i] > wd->max)
          wd->max = v[i];
        wd->n++;
        wd->sum += v[i];
      }
      tlc_free(v);
    }
  }
}

/* The totals of row i: closed parts plus open parts up to T. */
static void row_totals(const rs_t *s, size_t i, int64_t *tot) {
  const orow_t *r = &s->rows[i];
  size_t c, j;
  unsigned k;
  uint64_t pend = UINT64_MAX;
  for (k = 0; k < TLC_NKINDS; k++)
    tot[k] = r->closed[k];
  if (r->outside)
    tot[TLC_OUTSIDE] += s->T - r->out_start > 0 ? s->T - r->out_start : 0;
  for (c = 0; c < s->ncx; c++)
    for (j = 0; j < s->cx[c].nst; j++) {
      const oact_t *a = &s->cx[c].st[j];
      int64_t d;
      if (a->row != i)
        continue;
      d = a->net_done;
      if (a->running) {
        int64_t x = in_time(s, c, pend, s->T) - in_time(s, c, a->run.p0, a->run.t0);
        d += x > 0 ? x : 0;
      }
      tot[TLC_NET] += d;
      d = s->T - a->start;
      tot[TLC_CALL] += d > 0 ? d : 0;
      if (s->ctxmode) {
        d = in_time(s, c, pend, s->T) - in_time(s, c, a->startpos, a->start);
        tot[TLC_GROSS] += d > 0 ? d : 0;
      } else {
        d = s->T - a->start;
        tot[TLC_GROSS] += d > 0 ? d : 0;
      }
    }
  for (j = 0; j < s->nsa; j++)
    if (r->kind == TLC_ROW_STATE && s->sa[j].in_state && s->sa[j].handle == r->handle &&
        s->sa[j].value == r->state)
      tot[TLC_NET] += s->T - s->sa[j].since > 0 ? s->T - s->sa[j].since : 0;
}

int tlc_oracle_new(tlc_oracle_t **op, tlc_format_t fmt, const tlc_oracle_opts_t *opts) {
  tlc_oracle_t *o = tlc_calloc(1, sizeof(*o));
  if (o == NULL)
    return TLC_ENOMEM;
  o->fmt = fmt;
  if (opts != NULL)
    o->o = *opts;
  *op = o;
  return 0;
}

void tlc_oracle_free(tlc_oracle_t *o) {
  if (o == NULL)
    return;
  tlc_free(o->it);
  tlc_free(o);
}

int tlc_oracle_push(tlc_oracle_t *o, const tlc_event_t *ev, size_t n) {
  size_t i;
  for (i = 0; i < n; i++) {
    o->it = xgrow(o->it, &o->capit, o->nit, sizeof(*o->it));
    o->it[o->nit].gap = 0;
    o->it[o->nit].ev = ev[i];
    o->it[o->nit].ev.evlog = NULL;
    o->nit++;
  }
  return 0;
}

int tlc_oracle_gap(tlc_oracle_t *o) {
  o->it = xgrow(o->it, &o->capit, o->nit, sizeof(*o->it));
  memset(&o->it[o->nit], 0, sizeof(o->it[0]));
  o->it[o->nit].gap = 1;
  o->nit++;
  return 0;
}

/* Replays everything stored into s (freed with rs_free). */
static void replay_all(const tlc_oracle_t *o, rs_t *s) {
  size_t i;
  memset(s, 0, sizeof(*s));
  s->o = o;
  s->ctxmode = o->o.has_context_area && o->fmt != TLC_FMT_EVLOG;
  cur_epoch = 0;
  cur_seq = 0;
  for (i = 0; i < o->nit; i++) {
    if (o->it[i].gap) {
      cur_seq++;
      do_gap(s, 4 * (uint64_t)i);
    } else
      do_event(s, &o->it[i].ev, i);
  }
}

static void rs_free(rs_t *s) {
  size_t i;
  for (i = 0; i < s->nrows; i++) {
    unsigned k;
    tlc_free(s->rows[i].counts.p);
    for (k = 0; k < TLC_NKINDS; k++)
      tlc_free(s->rows[i].s[k].p);
  }
  for (i = 0; i < s->ncx; i++) {
    tlc_free(s->cx[i].iv);
    tlc_free(s->cx[i].st);
  }
  tlc_free(s->rows);
  tlc_free(s->cx);
  tlc_free(s->sa);
}

void tlc_oracle_samples(const tlc_oracle_t *o, void (*fn)(void *ud, const tlc_oracle_sample_t *x),
                        void *ud) {
  rs_t s;
  size_t i, j;
  unsigned k;
  replay_all(o, &s);
  for (i = 0; i < s.nrows; i++) {
    const orow_t *r = &s.rows[i];
    for (k = 0; k < TLC_NKINDS; k++)
      for (j = 0; j < r->s[k].n; j++) {
        tlc_oracle_sample_t x;
        x.handle = r->handle;
        x.context = r->ctx == NOIDX ? TLC_CTX_NONE : (uint32_t)s.cx[r->ctx].tindex;
        x.state = r->kind == TLC_ROW_STATE ? r->state : 0;
        x.row_kind = (uint8_t)r->kind;
        x.kind = (uint8_t)k;
        x.value = r->s[k].p[j].v;
        x.start = r->s[k].p[j].t0;
        x.end = r->s[k].p[j].t;
        x.epoch = r->s[k].p[j].epoch;
        fn(ud, &x);
      }
  }
  rs_free(&s);
}

int tlc_oracle_table(const tlc_oracle_t *o, tlc_table_t *t, int windows, int neutral) {
  rs_t s;
  size_t i, j, c;
  long ti;
  int rc = 0;
  replay_all(o, &s);
  tlc_table_clear(t);
  t->format = o->fmt;
  t->first_time = s.first;
  t->last_time = s.T;
  t->has_context_area = (uint8_t)s.ctxmode;
  t->context_area = s.ctxmode ? o->o.context_area : 0;
  t->nwindows = o->o.nwindows;
  memset(t->window_ns, 0, sizeof(t->window_ns));
  for (i = 0; i < o->o.nwindows; i++)
    t->window_ns[i] = o->o.window_ns[i];
  memset(&t->counters, 0, sizeof(t->counters));
  t->counters.events = s.events;
  t->counters.anomalies = s.anomalies;
  t->counters.gaps = s.gaps;
  t->counters.clock_resets = s.epoch;
  t->seq = 0;
  for (ti = 0; ti < s.ntable; ti++)
    for (c = 0; c < s.ncx; c++)
      if (s.cx[c].tindex == ti) {
        tlc_ctx_t x;
        memset(&x, 0, sizeof(x));
        x.kind = (uint8_t)s.cx[c].kind;
        x.core = (uint8_t)s.cx[c].core;
        x.key = s.cx[c].key;
        if (tlc_table_add_ctx(t, &x) < 0) {
          rc = TLC_ENOMEM;
          goto out;
        }
      }
  for (i = 0; i < s.nrows; i++) {
    const orow_t *r = &s.rows[i];
    tlc_stat_t *st = tlc_table_add(t);
    if (st == NULL) {
      rc = TLC_ENOMEM;
      goto out;
    }
    st->handle = r->handle;
    st->context = r->ctx == NOIDX ? TLC_CTX_NONE : (uint32_t)s.cx[r->ctx].tindex;
    st->state = r->state;
    st->kind = (uint8_t)r->kind;
    st->has_value = (uint8_t)r->has_value;
    st->count = r->counts.n;
    st->anomalies = r->anomalies;
    st->value = r->value;
    st->value_min = r->vmin;
    st->value_max = r->vmax;
    row_totals(&s, i, st->total);
    fill_stat(&s, st, &i, 1, windows);
  }
  if (neutral && s.ntable > 1) {
    /* one Neutral row per code handle: every context's row of that handle */
    size_t *grp = tlc_malloc((s.nrows ? s.nrows : 1) * sizeof(*grp));
    if (grp == NULL)
      abort();
    for (i = 0; i < s.nrows; i++) {
      size_t ng = 0;
      tlc_stat_t *st;
      unsigned k;
      int seen = 0;
      if (s.rows[i].kind != TLC_ROW_CODE)
        continue;
      for (j = 0; j < i; j++)
        if (s.rows[j].kind == TLC_ROW_CODE && s.rows[j].handle == s.rows[i].handle)
          seen = 1;
      if (seen)
        continue;
      for (j = i; j < s.nrows; j++)
        if (s.rows[j].kind == TLC_ROW_CODE && s.rows[j].handle == s.rows[i].handle)
          grp[ng++] = j;
      st = tlc_table_add(t);
      if (st == NULL) {
        rc = TLC_ENOMEM;
        tlc_free(grp);
        goto out;
      }
      st->handle = s.rows[i].handle;
      st->context = TLC_CTX_NEUTRAL;
      st->kind = TLC_ROW_CODE;
      for (j = 0; j < ng; j++) {
        int64_t tot[TLC_NKINDS];
        row_totals(&s, grp[j], tot);
        st->count += s.rows[grp[j]].counts.n;
        st->anomalies += s.rows[grp[j]].anomalies;
        for (k = 0; k < TLC_NKINDS; k++)
          if (k != TLC_PERIOD)
            st->total[k] += tot[k];
      }
      fill_stat(&s, st, grp, ng, windows);
    }
    tlc_free(grp);
  }
  tlc_table_sort(t);
out:
  rs_free(&s);
  return rc;
}
