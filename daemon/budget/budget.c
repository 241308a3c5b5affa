/* budget.c - timing budgets checked on every sample (see budget.h).
 *
 * State: per budget (bstate_t) its definition, total, ring of kept violations and worst; per
 * watched row (rowent_t: area, context, row kind, state value) the budgets that watch it
 * (match_t, a slice of one array), with each one's rate window; per (budget, row) that had a
 * violation its counter (cnt_t). Rows and counters are found through base/htab.h tables keyed
 * by a hash of their key (entries compared on the hit). The engine asks tlc_bwatch_want once
 * per row; rows no budget watches get no entry and are not tapped at all. A row with one
 * budget, not a rate (the common one), also holds that match's budget and counter, so that its
 * violation reads the row's half line and its budget's first line (both arrays 64-byte
 * aligned, lines_alloc) and writes its counter and a ring slot: lines a storm's engine work
 * between two violations has evicted, each a miss. The layout is in
 * budget-int.h; each budget's ring of kept violations is ring.c's, but for the storm's compact
 * slot, written here inline (violate, through budget-int.h's slot_stream).
 */
#include "budget/budget-int.h"
#include "budget/budget.h"

#include "base/alloc.h"
#include "base/clock.h"
#include "base/err.h"
#include "base/hash.h"
#include "base/htab.h"

#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define NONE32 0xFFFFFFFFu

/* The out-of-line helpers of violate (once per counter or ring, or without a chunk's wall
 * clock): kept out of its common path. */
#if defined(__GNUC__)
#define COLD __attribute__((noinline, cold))
#else
#define COLD
#endif

/* The first fields of a violation (tlc_violation_t, up to its value), the same for every
 * violation of a budget on a row: kept ready in its match and copied whole. */
typedef struct vhead {
  uint32_t budget, handle, context;
  uint8_t row_kind, stat, over, pad;
  uint64_t state;
} vhead_t;
_Static_assert(offsetof(vhead_t, budget) == offsetof(tlc_violation_t, budget) &&
                   offsetof(vhead_t, handle) == offsetof(tlc_violation_t, handle) &&
                   offsetof(vhead_t, context) == offsetof(tlc_violation_t, context) &&
                   offsetof(vhead_t, row_kind) == offsetof(tlc_violation_t, row_kind) &&
                   offsetof(vhead_t, stat) == offsetof(tlc_violation_t, stat) &&
                   offsetof(vhead_t, over) == offsetof(tlc_violation_t, over) &&
                   offsetof(vhead_t, state) == offsetof(tlc_violation_t, state) &&
                   sizeof(vhead_t) == offsetof(tlc_violation_t, value),
               "vhead_t is the head of tlc_violation_t");

struct match {
  vhead_t head; /* its violations' first fields (over 0) */
  uint32_t bi;  /* budget */
  uint32_t ci;  /* its counter (cnt_t), NONE32 before the first violation */
  uint8_t kind; /* the samples it tests: its budget's stat, TLC_TAP_COUNT for a rate */
  uint8_t rate; /* 1: a rate budget */
  /* rate: the open window */
  uint8_t has_win;
  uint64_t epoch, wcount, wseq0, wseq1;
  int64_t win;
};

struct rowent {
  uint32_t handle, context;
  uint64_t state;
  uint32_t m0; /* matches[m0 .. m0 + nm) */
  uint16_t nm; /* at most TLC_BUDGET_MAX */
  uint8_t row_kind;
  uint8_t mask;
  uint32_t bi, ci; /* with one match (nm 1): its budget and counter (m[m0].bi, .ci) */
};
_Static_assert(sizeof(rowent_t) == 32, "a row is half a line");
_Static_assert(TLC_BUDGET_MAX <= UINT16_MAX, "a row's matches fit rowent_t.nm");

static uint64_t rowkey(uint32_t handle, uint32_t context, uint8_t rk, uint64_t state) {
  return tlc_mix64(((uint64_t)handle << 32 | context) ^ tlc_mix64(state * 4 + rk));
}

static uint64_t cntkey(uint32_t bi, uint32_t handle, uint32_t context, uint8_t rk, uint64_t state) {
  return tlc_mix64(rowkey(handle, context, rk, state) ^ ((uint64_t)bi << 40 | 0x5bd1e995u));
}

/* The wall clock in ms when no engine chunk gave it (TLC_TAP_WALL): opts.wall_ms, else the
 * kernel's coarse clock (a few ms of resolution, about a tenth of the cost of
 * CLOCK_REALTIME). */
COLD static int64_t wall_now(const tlc_bwatch_t *w) {
  if (w->o.wall_ms != NULL)
    return w->o.wall_ms(w->o.ud);
#if defined(CLOCK_REALTIME_COARSE)
  {
    struct timespec ts;
    if (clock_gettime(CLOCK_REALTIME_COARSE, &ts) == 0)
      return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
  }
#endif
  return tlc_now_unix_ms();
}

/* a - b, wrapping (a saved violation taken back may hold any values) */
static int64_t wsub(int64_t a, int64_t b) {
  return (int64_t)((uint64_t)a - (uint64_t)b);
}

/* The distance of violation v from its limit (what makes the worst). */
static int64_t vdist(const tlc_violation_t *v) {
  return v->over ? wsub(v->value, v->limit) : wsub(v->limit, v->value);
}

/* `size` zeroed bytes on a 64-byte boundary (the budgets' and rows' arrays: their hot lines,
 * budget-int.h), the allocation's start kept in the pointer before them; NULL without memory.
 * Freed by lines_free. */
static void *lines_alloc(size_t size) {
  uint8_t *p = tlc_calloc(1, size + 64 + sizeof(void *)), *a;
  if (p == NULL)
    return NULL;
  a = (uint8_t *)(((uintptr_t)p + sizeof(void *) + 63) & ~(uintptr_t)63);
  memcpy(a - sizeof(void *), &p, sizeof(p));
  return a;
}

static void lines_free(void *a) {
  void *p;
  if (a == NULL)
    return;
  memcpy(&p, (uint8_t *)a - sizeof(void *), sizeof(p));
  tlc_free(p);
}

/* Fills bs[0..) with the budgets of set that apply to w->target. 0 or TLC_ENOMEM. */
static int build_states(tlc_bwatch_t *w, const tlc_tbudget_set_t *set, bstate_t **out,
                        size_t *nout) {
  size_t i, n = 0;
  bstate_t *bs = lines_alloc((set->n ? set->n : 1) * sizeof(*bs));
  if (bs == NULL)
    return TLC_ENOMEM;
  for (i = 0; i < set->n; i++) {
    if (!tlc_tbudget_target_match(&set->b[i], w->target))
      continue;
    bs[n].def = set->b[i];
    bs[n].hi = set->b[i].has_max ? set->b[i].max : INT64_MAX;
    bs[n].lo = set->b[i].has_min ? set->b[i].min : INT64_MIN;
    n++;
  }
  *out = bs;
  *nout = n;
  return 0;
}

static int same_def(const tlc_tbudget_t *a, const tlc_tbudget_t *b) {
  return strcmp(a->name, b->name) == 0 && strcmp(a->target, b->target) == 0 &&
         strcmp(a->area, b->area) == 0 && strcmp(a->context, b->context) == 0 &&
         a->stat == b->stat && a->has_max == b->has_max && a->has_min == b->has_min &&
         (!a->has_max || a->max == b->max) && (!a->has_min || a->min == b->min) &&
         a->window_ns == b->window_ns;
}

static void free_states(bstate_t *bs, size_t n) {
  size_t i;
  for (i = 0; i < n; i++)
    tlc__budget_ring_free(&bs[i]);
  lines_free(bs);
}

/* tlc_bwatch_key's numbers of one serial (budgets beyond it have none). */
static const uint64_t nkeys_per_serial = (uint64_t)1 << 20;

/* A number no other watch, nor this one before its budgets changed, had (tlc_bwatch_key). */
static uint64_t next_serial(void) {
  static _Atomic uint64_t serials;
  return atomic_fetch_add_explicit(&serials, 1, memory_order_relaxed) + 1;
}

int tlc_bwatch_new(tlc_bwatch_t **wp, const char *target, const tlc_tbudget_set_t *set,
                   const tlc_bwatch_opts_t *o) {
  tlc_bwatch_t *w = tlc_calloc(1, sizeof(*w));
  *wp = NULL;
  if (w == NULL)
    return TLC_ENOMEM;
  snprintf(w->target, sizeof(w->target), "%s", target);
  if (o != NULL)
    w->o = *o;
  if (w->o.keep == 0)
    w->o.keep = 100;
  if (w->o.max_keys == 0)
    w->o.max_keys = 100000;
  tlc_htab_init(&w->rowh, 0);
  tlc_htab_init(&w->cnth, w->o.max_keys);
  if (build_states(w, set, &w->bs, &w->nb) != 0) {
    tlc_free(w);
    return TLC_ENOMEM;
  }
  w->serial = next_serial();
  *wp = w;
  return 0;
}

void tlc_bwatch_free(tlc_bwatch_t *w) {
  if (w == NULL)
    return;
  free_states(w->bs, w->nb);
  lines_free(w->rows);
  tlc_free(w->m);
  tlc_free(w->c);
  tlc_htab_fini(&w->rowh);
  tlc_htab_fini(&w->cnth);
  tlc_free(w);
}

static void clear_rows(tlc_bwatch_t *w) {
  w->nrows = 0;
  w->nm = 0;
  tlc_htab_clear(&w->rowh);
}

void tlc_bwatch_attach(tlc_bwatch_t *w, tlc_engine_t *e) {
  clear_rows(w);
  w->wall = 0; /* until e's next chunk stamp */
  tlc_engine_set_tap(e, tlc_bwatch_tap, tlc_bwatch_want, tlc_bwatch_band, w);
}

int tlc_bwatch_add_tap(tlc_bwatch_t *w, tlc_engine_t *e) {
  tlc_engine_remove_tap(e, w);
  return tlc_engine_add_tap(e, tlc_bwatch_tap, tlc_bwatch_want, tlc_bwatch_band, w);
}

void tlc_bwatch_engine_opts(tlc_bwatch_t *w, tlc_engine_opts_t *o) {
  o->tap = tlc_bwatch_tap;
  o->tap_want = tlc_bwatch_want;
  o->tap_band = tlc_bwatch_band;
  o->tap_ud = w;
}

int tlc_bwatch_set_budgets(tlc_bwatch_t *w, const tlc_tbudget_set_t *set) {
  bstate_t *bs;
  size_t nb, i, j, k;
  uint32_t *remap;
  if (build_states(w, set, &bs, &nb) != 0)
    return TLC_ENOMEM;
  remap = tlc_malloc((w->nb ? w->nb : 1) * sizeof(*remap));
  if (remap == NULL) {
    free_states(bs, nb);
    return TLC_ENOMEM;
  }
  /* the kept violations of the budgets that remain, whole: their counters are renumbered
   * below, and they keep the budget index they had when seen (as a whole record always did) */
  for (i = 0; i < w->nb; i++)
    for (j = 0; j < nb; j++)
      if (same_def(&w->bs[i].def, &bs[j].def)) {
        if (tlc__budget_ring_widen(w, &w->bs[i]) != 0) {
          tlc_free(remap);
          free_states(bs, nb);
          return TLC_ENOMEM;
        }
        break;
      }
  for (i = 0; i < w->nb; i++) {
    remap[i] = NONE32;
    for (j = 0; j < nb; j++)
      if (same_def(&w->bs[i].def, &bs[j].def)) {
        tlc_tbudget_t def = bs[j].def; /* the new origin */
        bs[j] = w->bs[i];
        bs[j].def = def;
        w->bs[i].ring = NULL;
        w->bs[i].ring_mem = NULL;
        w->bs[i].wide = NULL;
        w->bs[i].loc = NULL;
        remap[i] = (uint32_t)j;
        break;
      }
  }
  /* the counters of budgets that remain, renumbered */
  tlc_htab_clear(&w->cnth);
  for (i = k = 0; i < w->nc; i++) {
    cnt_t c = w->c[i];
    if (remap[c.bi] == NONE32)
      continue;
    c.bi = remap[c.bi];
    w->c[k] = c;
    (void)tlc_htab_add(&w->cnth, cntkey(c.bi, c.handle, c.context, c.row_kind, c.state), k);
    k++;
  }
  w->nc = k;
  tlc_free(remap);
  free_states(w->bs, w->nb);
  w->bs = bs;
  w->nb = nb;
  w->serial = next_serial();
  clear_rows(w);
  return 0;
}

static rowent_t *row_find(const tlc_bwatch_t *w, uint32_t handle, uint32_t context, uint8_t rk,
                          uint64_t state) {
  uint64_t key = rowkey(handle, context, rk, state);
  const uint64_t *v;
  for (v = tlc_htab_get(&w->rowh, key); v != NULL; v = tlc_htab_get_next(&w->rowh, key, v)) {
    rowent_t *r = &w->rows[*v];
    if (r->handle == handle && r->context == context && r->row_kind == rk && r->state == state)
      return r;
  }
  return NULL;
}

static int budget_matches(tlc_bwatch_t *w, const tlc_tbudget_t *b, uint32_t handle,
                          uint32_t context, uint8_t rk, const char **name, int *named) {
  if (b->stat == TLC_BSTAT_RATE ? 0
                                : (rk != TLC_ROW_CODE && b->stat != TLC_PERIOD &&
                                   !(rk == TLC_ROW_STATE && b->stat == TLC_NET)))
    return 0; /* data rows have PERIOD only, state rows NET and PERIOD */
  if (b->area_kind != TLC_BAREA_HANDLE && !*named) {
    *name = w->o.area_name != NULL ? w->o.area_name(w->o.ud, handle) : NULL;
    *named = 1;
  }
  if (!tlc_tbudget_area_match(b, handle, *name))
    return 0;
  if (b->context[0] != '\0') {
    char buf[128];
    const char *cn;
    if (context == TLC_CTX_NONE || w->o.ctx_name == NULL)
      return 0;
    cn = w->o.ctx_name(w->o.ud, context, buf, sizeof(buf));
    if (cn == NULL || strcmp(cn, b->context) != 0)
      return 0;
  }
  return 1;
}

unsigned tlc_bwatch_want(void *ud, uint32_t handle, uint32_t context, uint8_t row_kind,
                         uint64_t state, uint32_t *cookie) {
  tlc_bwatch_t *w = ud;
  const rowent_t *old = row_find(w, handle, context, row_kind, state);
  const char *name = NULL;
  int named = 0;
  size_t i, m0 = w->nm;
  unsigned mask = 0;
  rowent_t *r;
  if (old != NULL) {
    *cookie = (uint32_t)(old - w->rows);
    return old->mask;
  }
  for (i = 0; i < w->nb; i++) {
    const tlc_tbudget_t *b = &w->bs[i].def;
    if (b->area_kind == TLC_BAREA_HANDLE && b->handle != handle)
      continue; /* the common case, without a call (budget_matches would say the same) */
    if (!budget_matches(w, b, handle, context, row_kind, &name, &named))
      continue;
    if (w->nm == w->capm) {
      size_t nc = w->capm ? w->capm * 2 : 64;
      match_t *nm = tlc_realloc(w->m, nc * sizeof(*nm));
      if (nm == NULL)
        break; /* no memory: the row is watched by the budgets found so far */
      w->m = nm;
      w->capm = nc;
    }
    memset(&w->m[w->nm], 0, sizeof(w->m[0]));
    w->m[w->nm].bi = (uint32_t)i;
    w->m[w->nm].head.budget = (uint32_t)i;
    w->m[w->nm].head.handle = handle;
    w->m[w->nm].head.context = context;
    w->m[w->nm].head.row_kind = row_kind;
    w->m[w->nm].head.stat = b->stat;
    w->m[w->nm].head.state = state;
    w->m[w->nm].ci = NONE32;
    w->m[w->nm].kind = (uint8_t)(b->stat == TLC_BSTAT_RATE ? TLC_TAP_COUNT : b->stat);
    w->m[w->nm].rate = b->stat == TLC_BSTAT_RATE;
    w->nm++;
    mask |= 1u << (b->stat == TLC_BSTAT_RATE ? TLC_TAP_COUNT : b->stat);
  }
  if (w->nm == m0)
    return 0;
  if (w->nrows == w->caprows) {
    size_t nc = w->caprows ? w->caprows * 2 : 64;
    rowent_t *nr = lines_alloc(nc * sizeof(*nr));
    if (nr == NULL) {
      w->nm = m0;
      return 0;
    }
    if (w->nrows > 0)
      memcpy(nr, w->rows, w->nrows * sizeof(*nr));
    lines_free(w->rows);
    w->rows = nr;
    w->caprows = nc;
  }
  if (tlc_htab_add(&w->rowh, rowkey(handle, context, row_kind, state), w->nrows) != 0) {
    w->nm = m0;
    return 0;
  }
  *cookie = (uint32_t)w->nrows;
  r = &w->rows[w->nrows++];
  r->handle = handle;
  r->context = context;
  r->row_kind = row_kind;
  r->state = state;
  r->mask = (uint8_t)mask;
  r->m0 = (uint32_t)m0;
  r->nm = (uint16_t)(w->nm - m0);
  r->bi = w->m[m0].bi;
  r->ci = NONE32;
  return mask;
}

/* The counter of (m's budget, r), created at its first violation; NONE32 past max_keys. */
COLD static uint32_t counter(tlc_bwatch_t *w, match_t *m, const rowent_t *r) {
  uint64_t key;
  const uint64_t *v;
  if (m->ci != NONE32)
    return m->ci;
  key = cntkey(m->bi, r->handle, r->context, r->row_kind, r->state);
  for (v = tlc_htab_get(&w->cnth, key); v != NULL; v = tlc_htab_get_next(&w->cnth, key, v)) {
    const cnt_t *c = &w->c[*v];
    if (c->bi == m->bi && c->handle == r->handle && c->context == r->context &&
        c->row_kind == r->row_kind && c->state == r->state)
      return m->ci = (uint32_t)*v;
  }
  if (w->nc >= w->o.max_keys)
    return NONE32;
  if (w->nc == w->capc) {
    size_t nc = w->capc ? w->capc * 2 : 64;
    cnt_t *np = tlc_realloc(w->c, nc * sizeof(*np));
    if (np == NULL)
      return NONE32;
    w->c = np;
    w->capc = nc;
  }
  if (tlc_htab_add(&w->cnth, key, w->nc) != 0)
    return NONE32;
  memset(&w->c[w->nc], 0, sizeof(w->c[0]));
  w->c[w->nc].bi = m->bi;
  w->c[w->nc].handle = r->handle;
  w->c[w->nc].context = r->context;
  w->c[w->nc].row_kind = r->row_kind;
  w->c[w->nc].state = r->state;
  return m->ci = (uint32_t)w->nc++;
}

/* Fills v, the whole record of a violation of m's budget b on its row: s's value (over: 1
 * above the max, 0 below the min, `limit`), start, end, epoch and sequences, the wall clock
 * `wall`, its number `count`, no location. */
static inline void fill(tlc_violation_t *v, const vhead_t *h, const tlc_engine_sample_t *s,
                        int over, int64_t limit, int64_t wall, uint64_t count) {
  memcpy(v, h, sizeof(*h)); /* budget, handle, context, row_kind, stat, state */
  v->over = (uint8_t)over;
  v->value = s->value;
  v->limit = limit;
  v->start = s->start;
  v->end = s->end;
  v->epoch = s->epoch;
  v->wall_ms = wall;
  v->seq_start = s->seq_start;
  v->seq_end = s->seq_end;
  v->seg_first = v->off_first = v->seg_last = v->off_last = 0;
  v->count = count;
}

/* The head of a violation on row r, of its one budget (r->bi: rowent_t), not a rate: the same
 * as its match's (tlc_bwatch_want), read from the row, whose line the violation has read. */
static inline void row_head(vhead_t *h, const rowent_t *r, unsigned kind) {
  h->budget = r->bi;
  h->handle = r->handle;
  h->context = r->context;
  h->row_kind = r->row_kind;
  h->stat = (uint8_t)kind; /* not a rate: the stat is the kind */
  h->over = h->pad = 0;
  h->state = r->state;
}

/* A new worst of budget b (h: its record's head): s's record (v: it whole, or NULL: filled with the
 * chunk's wall clock), `dist` beyond the limit. */
COLD static void new_worst(tlc_bwatch_t *w, const vhead_t *h, bstate_t *b,
                           const tlc_engine_sample_t *s, int over, int64_t dist,
                           const tlc_violation_t *v) {
  if (v != NULL)
    b->worst = *v;
  else
    fill(&b->worst, h, s, over, over ? b->hi : b->lo, w->wall, b->total);
  b->worst_dist = dist;
  b->has_worst = 1;
}

/* The end of a violation's record: the worst when it is, and on_violation. v: its whole
 * record, or NULL when only its slot has it (violate's: then its wall clock is the chunk's).
 * Inline: violate's storm fills the record for on_violation on its own stack, with no call
 * but that. */
static inline void worst_and_tell(tlc_bwatch_t *w, const vhead_t *h, const rowent_t *r, bstate_t *b,
                                  const tlc_engine_sample_t *s, int over, int64_t dist,
                                  const tlc_violation_t *v) {
  vhead_t rh;
  if (h == NULL && (!b->has_worst || dist > b->worst_dist || w->o.on_violation != NULL)) {
    row_head(&rh, r, s->kind);
    h = &rh;
  }
  if (!b->has_worst || dist > b->worst_dist)
    new_worst(w, h, b, s, over, dist, v);
  if (w->o.on_violation != NULL) {
    tlc_violation_t tmp;
    if (v == NULL) {
      fill(&tmp, h, s, over, over ? b->hi : b->lo, w->wall, b->total);
      v = &tmp;
    }
    w->o.on_violation(w->o.ud, v);
  }
}

/* Records a violation of m's budget b on its row whole (violate's uncommon ones): counts it
 * `n` times (n > 1: a stretch of empty rate windows, one record) in its budget and in
 * counter ci (NONE32: a dropped key), keeps it in the ring's next slot (compact when it fits,
 * else whole; not kept when the ring has no memory: then only the counts and the worst), the
 * worst when it is, and hands it to on_violation. s as for fill, `wall` its wall clock. */
static void record(tlc_bwatch_t *w, const match_t *m, bstate_t *b, const tlc_engine_sample_t *s,
                   int over, uint64_t n, uint32_t ci, int64_t wall) {
  size_t k = b->rhead;
  b->total += n;
  w->all += n;
  if (ci != NONE32)
    w->c[ci].count += n;
  else
    w->dropped_keys += n;
  fill(&w->scratch, &m->head, s, over, over ? b->hi : b->lo, wall, b->total);
  if (b->ring != NULL && ci != NONE32 && s->epoch < VS_EPOCHS) {
    vslot_t *x = &b->ring[k];
    x->value = s->value;
    x->start = s->start;
    x->end = s->end;
    x->seq_start = s->seq_start;
    x->seq_end = s->seq_end;
    x->count = b->total;
    x->wall_ms = wall;
    x->ci = ci;
    x->bits = (uint32_t)s->epoch | (over ? VS_OVER : 0);
  } else if (b->ring == NULL || tlc__budget_slot_put_wide(b, w->o.keep, k, &w->scratch) != 0) {
    k = SIZE_MAX; /* not kept */
  }
  if (k != SIZE_MAX) {
    if (++b->rhead == w->o.keep)
      b->rhead = 0;
    if (b->rn < w->o.keep)
      b->rn++;
  }
  worst_and_tell(w, &m->head, NULL, b, s, over,
                 over ? wsub(s->value, b->hi) : wsub(b->lo, s->value), &w->scratch);
}

/* violate's first violation of m (its counter to create), of its budget (its ring to allocate,
 * not zeroed: a slot's every field is written), any without a chunk's wall clock and any
 * whose epoch does not fit a slot. */
COLD static void violate_slow(tlc_bwatch_t *w, match_t *m, rowent_t *r,
                              const tlc_engine_sample_t *s, int over, uint64_t n) {
  bstate_t *b = &w->bs[m->bi];
  uint32_t ci = m->ci != NONE32 ? m->ci : counter(w, m, r);
  if (r->nm == 1)
    r->ci = ci; /* the row's copy (rowent_t) */
  if (b->ring == NULL)
    (void)tlc__budget_ring_alloc(b, w->o.keep);
  record(w, m, b, s, over, n, ci, w->wall != 0 ? w->wall : wall_now(w));
}

/* Records a violation of m's budget on row r: the counts and one ring slot's writes (one
 * cache line, no call but on_violation and a new worst's). bi, ci and h are m's budget, counter
 * and head, given by the caller (for a row of one budget, from the row, h NULL: row_head, only
 * when a record is made; m itself is then read only on the first violation's path,
 * violate_slow). Inline in the tap: with the engine's
 * bands (tlc_bwatch_band) a sample inside every budget never reaches it, so that in a storm
 * nearly each of its calls is a violation, and a call less is what a violation saves. */
#if defined(__GNUC__)
__attribute__((always_inline))
#endif
static inline void
violate(tlc_bwatch_t *w, match_t *m, rowent_t *r, uint32_t bi, uint32_t ci, const vhead_t *h,
        const tlc_engine_sample_t *s, int over, uint64_t n) {
  bstate_t *b = &w->bs[bi];
  int64_t dist;
  vslot_t *x;
  if (ci == NONE32 || b->ring == NULL || w->wall == 0 || s->epoch >= VS_EPOCHS) {
    violate_slow(w, m, r, s, over, n);
    return;
  }
  dist = over ? wsub(s->value, b->hi) : wsub(b->lo, s->value);
  b->total += n;
  w->all += n;
  w->c[ci].count += n;
  x = &b->ring[b->rhead];
  slot_stream(x, s, b->total, w->wall, ci, (uint32_t)s->epoch | (over ? VS_OVER : 0));
  if (++b->rhead == w->o.keep)
    b->rhead = 0;
  if (b->rn < w->o.keep)
    b->rn++;
  worst_and_tell(w, h, r, b, s, over, dist, NULL);
}

static int64_t floordiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0)))
    q--;
  return q;
}

/* The window's bounds [win * len, (win + 1) * len), saturated. */
static int64_t wbound(int64_t win, int64_t len) {
  if (win > INT64_MAX / len)
    return INT64_MAX;
  if (win < INT64_MIN / len)
    return INT64_MIN;
  return win * len;
}

static void rate_event(tlc_bwatch_t *w, match_t *m, rowent_t *r, const tlc_engine_sample_t *s) {
  const bstate_t *b = &w->bs[m->bi];
  int64_t len = b->def.window_ns, win = floordiv(s->end, len);
  if (m->has_win && m->epoch == s->epoch && win <= m->win) {
    m->wcount++; /* in the window (an out-of-order time counts in the open one) */
    m->wseq1 = s->seq_end;
    return;
  }
  if (m->has_win && m->epoch == s->epoch) { /* the open window closes */
    int64_t empty = win - m->win - 1, count = (int64_t)m->wcount;
    tlc_engine_sample_t x;
    if (count > b->hi || count < b->lo) {
      x.value = count;
      x.start = wbound(m->win, len);
      x.end = wbound(m->win + 1, len);
      x.epoch = m->epoch;
      x.seq_start = m->wseq0;
      x.seq_end = m->wseq1;
      violate(w, m, r, m->bi, m->ci, &m->head, &x, count > b->hi, 1);
    }
    if (empty > 0 && b->def.has_min && b->def.min > 0) {
      x.value = 0;
      x.start = wbound(m->win + 1, len);
      x.end = wbound(win, len);
      x.epoch = s->epoch;
      x.seq_start = m->wseq1;
      x.seq_end = s->seq_end;
      violate(w, m, r, m->bi, m->ci, &m->head, &x, 0, (uint64_t)empty);
    }
  }
  m->has_win = 1;
  m->epoch = s->epoch;
  m->win = win;
  m->wcount = 1;
  m->wseq0 = m->wseq1 = s->seq_end;
}

/* The engine's marks (engine.h): a gap ends every rate window; a chunk's wall clock stamps
 * the violations its samples make. */
static void mark(tlc_bwatch_t *w, const tlc_engine_sample_t *s) {
  if (s->kind == TLC_TAP_GAP) { /* no rate window spans a gap */
    size_t j;
    for (j = 0; j < w->nm; j++)
      w->m[j].has_win = 0;
  } else if (s->kind == TLC_TAP_WALL && w->o.wall_ms == NULL) {
    w->wall = s->value;
  }
}

int tlc_bwatch_band(void *ud, uint32_t cookie, unsigned kind, int64_t *lo, int64_t *hi) {
  const tlc_bwatch_t *w = ud;
  const rowent_t *r;
  int64_t l = INT64_MIN, h = INT64_MAX;
  int any = 0;
  uint32_t i;
  if (cookie >= w->nrows)
    return 0;
  r = &w->rows[cookie];
  for (i = 0; i < r->nm; i++) {
    const match_t *m = &w->m[r->m0 + i];
    const bstate_t *b = &w->bs[m->bi];
    if (m->rate || m->kind != kind)
      continue;
    l = b->lo > l ? b->lo : l;
    h = b->hi < h ? b->hi : h;
    any = 1;
  }
  *lo = l;
  *hi = h;
  return any;
}

int tlc_bwatch_tap(void *ud, const tlc_engine_sample_t *s) {
  tlc_bwatch_t *w = ud;
  rowent_t *r;
  uint32_t i;
  int n = 0;
  if (s->kind > TLC_TAP_COUNT) {
    mark(w, s);
    return 0;
  }
  /* the cookie is the row's index (tlc_bwatch_want), checked against the sample's row */
  r = s->cookie < w->nrows ? &w->rows[s->cookie] : NULL;
  if (r == NULL || r->handle != s->handle || r->context != s->context ||
      r->row_kind != s->row_kind || r->state != s->state)
    r = row_find(w, s->handle, s->context, s->row_kind, s->state);
  if (r == NULL)
    return 0;
  if (r->nm == 1 && !(r->mask & (1u << TLC_TAP_COUNT))) {
    /* one budget, not a rate (the common row): its budget and counter are the row's, and its
     * match is read only for a violation's record, so that a violation reads two lines of the
     * watch's (the row and the budget's first) and writes the counter's and a slot */
    const bstate_t *b = &w->bs[r->bi];
    if (!(r->mask >> s->kind & 1) || (s->value <= b->hi && s->value >= b->lo))
      return 0;
    violate(w, &w->m[r->m0], r, r->bi, r->ci, NULL, s, s->value > b->hi, 1);
    return 1;
  }
  for (i = 0; i < r->nm; i++) {
    match_t *m = &w->m[r->m0 + i];
    const bstate_t *b;
    if (m->kind != s->kind)
      continue;
    if (m->rate) {
      rate_event(w, m, r, s);
      continue;
    }
    b = &w->bs[m->bi];
    if (s->value > b->hi || s->value < b->lo) {
      violate(w, m, r, m->bi, m->ci, &m->head, s, s->value > b->hi, 1);
      n++;
    }
  }
  return n;
}

size_t tlc_bwatch_nbudgets(const tlc_bwatch_t *w) {
  return w->nb;
}

uint64_t tlc_bwatch_key(const tlc_bwatch_t *w, size_t i) {
  return i < nkeys_per_serial ? w->serial * nkeys_per_serial + i : 0;
}

const tlc_tbudget_t *tlc_bwatch_budget(const tlc_bwatch_t *w, size_t i) {
  return i < w->nb ? &w->bs[i].def : NULL;
}

uint64_t tlc_bwatch_total(const tlc_bwatch_t *w, size_t i) {
  return i < w->nb ? w->bs[i].total : 0;
}

const tlc_violation_t *tlc_bwatch_worst(const tlc_bwatch_t *w, size_t i) {
  return i < w->nb && w->bs[i].has_worst ? &w->bs[i].worst : NULL;
}

size_t tlc_bwatch_keep(const tlc_bwatch_t *w) {
  return w->o.keep;
}

size_t tlc_bwatch_recent(const tlc_bwatch_t *w, size_t i, tlc_violation_t *out, size_t max) {
  const bstate_t *b;
  size_t n, j, first;
  if (i >= w->nb)
    return 0;
  b = &w->bs[i];
  n = b->rn < max ? b->rn : max;
  /* the oldest of the last n */
  first = (b->rhead + w->o.keep - n) % w->o.keep;
  for (j = 0; j < n; j++)
    tlc__budget_slot_get(w, b, (first + j) % w->o.keep, &out[j]);
  return n;
}

static int set_loc(tlc_violation_t *v, uint64_t n, uint64_t seq_end, const uint64_t loc[4]) {
  if (v->count != n || v->seq_end != seq_end)
    return 0;
  v->seg_first = loc[0];
  v->off_first = loc[1];
  v->seg_last = loc[2];
  v->off_last = loc[3];
  return 1;
}

/* The slot of b's ring that keeps violation (count, seq_end), or SIZE_MAX. A violation's count
 * is its budget's total once it was counted, so slots' counts grow from the oldest to the
 * newest and none is kept twice: the slot tried first is where it is when every violation since
 * was counted once and kept (a storm's: O(1)), then every kept one, oldest first. */
static size_t ring_find(const tlc_bwatch_t *w, const bstate_t *b, uint64_t count,
                        uint64_t seq_end) {
  size_t x, j;
  if (b->ring == NULL)
    return SIZE_MAX;
  if (count <= b->total && b->total - count < b->rn) {
    x = kept_slot(w, b, b->rn - 1 - (size_t)(b->total - count));
    if (b->ring[x].count == count && b->ring[x].seq_end == seq_end)
      return x;
  }
  for (j = 0; j < b->rn; j++) {
    x = kept_slot(w, b, j);
    if (b->ring[x].count == count && b->ring[x].seq_end == seq_end)
      return x;
  }
  return SIZE_MAX;
}

int tlc_bwatch_locate(tlc_bwatch_t *w, size_t i, uint64_t n, uint64_t seq_end,
                      const uint64_t loc[4]) {
  bstate_t *b;
  size_t x;
  int k = 0;
  if (i >= w->nb)
    return 0;
  b = &w->bs[i];
  if ((x = ring_find(w, b, n, seq_end)) != SIZE_MAX)
    k += tlc__budget_slot_set_loc(b, w->o.keep, x, loc);
  if (b->has_worst)
    k += set_loc(&b->worst, n, seq_end, loc);
  return k;
}

/* src's stored location of violation (count, seq_end) of budget state b (kept or worst)
 * into loc: 1, or 0 when src has it nowhere located. */
static int located_in(const tlc_bwatch_t *src, const bstate_t *b, uint64_t count, uint64_t seq_end,
                      uint64_t loc[4]) {
  size_t x = ring_find(src, b, count, seq_end);
  if (x != SIZE_MAX) {
    tlc__budget_slot_loc(b, x, loc);
    if ((loc[0] | loc[2]) != 0)
      return 1;
  }
  if (b->has_worst && b->worst.count == count && b->worst.seq_end == seq_end &&
      (b->worst.seg_first | b->worst.seg_last) != 0) {
    loc[0] = b->worst.seg_first;
    loc[1] = b->worst.off_first;
    loc[2] = b->worst.seg_last;
    loc[3] = b->worst.off_last;
    return 1;
  }
  return 0;
}

size_t tlc_bwatch_copy_locations(tlc_bwatch_t *dst, const tlc_bwatch_t *src) {
  size_t k = 0;
  for (size_t i = 0; i < dst->nb; i++) {
    bstate_t *b = &dst->bs[i];
    const bstate_t *sb = NULL;
    for (size_t m = 0; m < src->nb && sb == NULL; m++)
      if (strcmp(src->bs[m].def.name, b->def.name) == 0)
        sb = &src->bs[m];
    if (sb == NULL)
      continue;
    uint64_t loc[4];
    for (size_t j = 0; b->ring != NULL && j < b->rn; j++) {
      size_t x = kept_slot(dst, b, j);
      tlc__budget_slot_loc(b, x, loc);
      if ((loc[0] | loc[2]) == 0 &&
          located_in(src, sb, b->ring[x].count, b->ring[x].seq_end, loc) != 0)
        k += (size_t)tlc__budget_slot_set_loc(b, dst->o.keep, x, loc);
    }
    if (b->has_worst && (b->worst.seg_first | b->worst.seg_last) == 0 &&
        located_in(src, sb, b->worst.count, b->worst.seq_end, loc) != 0)
      k += (size_t)set_loc(&b->worst, b->worst.count, b->worst.seq_end, loc);
  }
  return k;
}

void *tlc_bwatch_ud(const tlc_bwatch_t *w) {
  return w->o.ud;
}

int tlc_bwatch_find(const tlc_bwatch_t *w, const char *name, uint64_t n, tlc_violation_t *v,
                    char *err, size_t errlen) {
  const bstate_t *b = NULL;
  size_t i, j, first, len;
  for (i = 0; w != NULL && i < w->nb && b == NULL; i++)
    if (strcmp(w->bs[i].def.name, name) == 0)
      b = &w->bs[i];
  if (b == NULL) {
    len = (size_t)snprintf(err, errlen, "v:%s:%" PRIu64 ": no budget named %s on this target", name,
                           n, name);
    for (i = 0; w != NULL && i < w->nb && len < errlen; i++)
      len += (size_t)snprintf(err + len, errlen - len, "%s%s", i == 0 ? " (its budgets: " : ", ",
                              w->bs[i].def.name);
    if (w != NULL && w->nb > 0 && len < errlen)
      snprintf(err + len, errlen - len, ")");
    return -ENOENT;
  }
  first = (b->rhead + w->o.keep - b->rn) % w->o.keep;
  for (j = 0; b->ring != NULL && j < b->rn; j++)
    if (b->ring[(first + j) % w->o.keep].count == n) {
      tlc__budget_slot_get(w, b, (first + j) % w->o.keep, v);
      return 0;
    }
  if (b->has_worst && b->worst.count == n) {
    *v = b->worst;
    return 0;
  }
  if (n > b->total)
    snprintf(err, errlen, "v:%s:%" PRIu64 ": %s has had %" PRIu64 " violation%s", name, n, name,
             b->total, b->total == 1 ? "" : "s");
  else if (b->ring == NULL || b->rn == 0)
    snprintf(err, errlen, "v:%s:%" PRIu64 " is not among the kept violations of %s: none is kept",
             name, n, name);
  else {
    len = (size_t)snprintf(err, errlen,
                           "v:%s:%" PRIu64 " is not among the last %zu kept violations of %s; "
                           "kept: %" PRIu64 "..%" PRIu64,
                           name, n, w->o.keep, name, b->ring[first].count,
                           b->ring[(first + b->rn - 1) % w->o.keep].count);
    if (b->has_worst && len < errlen)
      snprintf(err + len, errlen - len, " and the worst, %" PRIu64, b->worst.count);
  }
  return TLC_ERANGE;
}

void tlc_bwatch_counts(const tlc_bwatch_t *w, void (*fn)(void *ud, const tlc_bcount_t *c),
                       void *ud) {
  size_t i;
  for (i = 0; i < w->nc; i++) {
    tlc_bcount_t c;
    c.budget = w->c[i].bi;
    c.handle = w->c[i].handle;
    c.context = w->c[i].context;
    c.row_kind = w->c[i].row_kind;
    c.state = w->c[i].state;
    c.count = w->c[i].count;
    fn(ud, &c);
  }
}

uint64_t tlc_bwatch_dropped_keys(const tlc_bwatch_t *w) {
  return w->dropped_keys;
}

uint64_t tlc_bwatch_all(const tlc_bwatch_t *w) {
  return w->all;
}

/* ---- the watch across restarts (tlc_bwatch_save / tlc_bwatch_load) ----
 *
 * Little-endian, fixed width:
 *   "TLCBWCK\0"  u32 version (1)  u32 nb  u64 all  u64 dropped_keys
 *   nb x budget: the definition (name, target, area, context: u8 length + bytes; u8 stat,
 *                has_max, has_min; i64 max, min, window_ns), u64 total, u8 has_worst,
 *                [violation worst], u32 nkept, nkept x violation (oldest first)
 *   u32 nc, nc x counter: u32 budget (index above), handle, context; u8 row_kind; u64 state,
 *                count
 *   u64 FNV-1a of every byte before it
 * A violation: u32 handle, context; u8 row_kind, stat, over; u64 state; i64 value, limit,
 * start, end; u64 epoch; i64 wall_ms; u64 seq_start, seq_end, count, seg_first, off_first,
 * seg_last, off_last (its budget is the one it is stored under).
 */

#define BWCK_MAGIC   "TLCBWCK"
#define BWCK_VERSION 1u
#define BWCK_VSIZE   (4 + 4 + 3 + 8 * 14) /* a violation's bytes */

static uint64_t fnv1a(const uint8_t *p, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; i++)
    h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

typedef struct wbuf {
  uint8_t *p;
  size_t n, cap;
  int err;
} wbuf_t;

static void put(wbuf_t *b, const void *src, size_t n) {
  if (b->err)
    return;
  if (b->n + n > b->cap) {
    size_t nc = b->cap ? b->cap * 2 : 4096;
    uint8_t *np;
    while (nc < b->n + n)
      nc *= 2;
    if ((np = tlc_realloc(b->p, nc)) == NULL) {
      b->err = 1;
      return;
    }
    b->p = np;
    b->cap = nc;
  }
  memcpy(b->p + b->n, src, n);
  b->n += n;
}

static void put_u(wbuf_t *b, uint64_t v, size_t width) {
  uint8_t x[8];
  for (size_t i = 0; i < width; i++)
    x[i] = (uint8_t)(v >> (8 * i));
  put(b, x, width);
}

static void put_str(wbuf_t *b, const char *s) {
  size_t n = strlen(s);
  put_u(b, n > 255 ? 255 : n, 1);
  put(b, s, n > 255 ? 255 : n);
}

static void put_viol(wbuf_t *b, const tlc_violation_t *v) {
  put_u(b, v->handle, 4);
  put_u(b, v->context, 4);
  put_u(b, v->row_kind, 1);
  put_u(b, v->stat, 1);
  put_u(b, v->over, 1);
  put_u(b, v->state, 8);
  put_u(b, (uint64_t)v->value, 8);
  put_u(b, (uint64_t)v->limit, 8);
  put_u(b, (uint64_t)v->start, 8);
  put_u(b, (uint64_t)v->end, 8);
  put_u(b, v->epoch, 8);
  put_u(b, (uint64_t)v->wall_ms, 8);
  put_u(b, v->seq_start, 8);
  put_u(b, v->seq_end, 8);
  put_u(b, v->count, 8);
  put_u(b, v->seg_first, 8);
  put_u(b, v->off_first, 8);
  put_u(b, v->seg_last, 8);
  put_u(b, v->off_last, 8);
}

int tlc_bwatch_save(const tlc_bwatch_t *w, uint8_t **out, size_t *len) {
  wbuf_t b;
  size_t i, j;
  memset(&b, 0, sizeof(b));
  *out = NULL;
  *len = 0;
  put(&b, BWCK_MAGIC, 8);
  put_u(&b, BWCK_VERSION, 4);
  put_u(&b, w->nb, 4);
  put_u(&b, w->all, 8);
  put_u(&b, w->dropped_keys, 8);
  for (i = 0; i < w->nb; i++) {
    const bstate_t *s = &w->bs[i];
    size_t first = (s->rhead + w->o.keep - s->rn) % w->o.keep;
    put_str(&b, s->def.name);
    put_str(&b, s->def.target);
    put_str(&b, s->def.area);
    put_str(&b, s->def.context);
    put_u(&b, s->def.stat, 1);
    put_u(&b, s->def.has_max ? 1 : 0, 1);
    put_u(&b, s->def.has_min ? 1 : 0, 1);
    put_u(&b, (uint64_t)s->def.max, 8);
    put_u(&b, (uint64_t)s->def.min, 8);
    put_u(&b, (uint64_t)s->def.window_ns, 8);
    put_u(&b, s->total, 8);
    put_u(&b, s->has_worst ? 1 : 0, 1);
    if (s->has_worst)
      put_viol(&b, &s->worst);
    put_u(&b, s->ring != NULL ? s->rn : 0, 4);
    for (j = 0; s->ring != NULL && j < s->rn; j++) {
      tlc_violation_t v;
      tlc__budget_slot_get(w, s, (first + j) % w->o.keep, &v);
      put_viol(&b, &v);
    }
  }
  put_u(&b, w->nc, 4);
  for (i = 0; i < w->nc; i++) {
    put_u(&b, w->c[i].bi, 4);
    put_u(&b, w->c[i].handle, 4);
    put_u(&b, w->c[i].context, 4);
    put_u(&b, w->c[i].row_kind, 1);
    put_u(&b, w->c[i].state, 8);
    put_u(&b, w->c[i].count, 8);
  }
  if (!b.err)
    put_u(&b, fnv1a(b.p, b.n), 8);
  if (b.err) {
    tlc_free(b.p);
    return TLC_ENOMEM;
  }
  *out = b.p;
  *len = b.n;
  return 0;
}

typedef struct rbuf {
  const uint8_t *p;
  size_t n, off;
  int bad;
} rbuf_t;

static uint64_t get_u(rbuf_t *b, size_t width) {
  uint64_t v = 0;
  if (b->bad || b->n - b->off < width) {
    b->bad = 1;
    return 0;
  }
  for (size_t i = 0; i < width; i++)
    v |= (uint64_t)b->p[b->off + i] << (8 * i);
  b->off += width;
  return v;
}

static void get_str(rbuf_t *b, char *dst, size_t cap) {
  size_t n = (size_t)get_u(b, 1);
  if (b->bad || n >= cap || b->n - b->off < n) {
    b->bad = 1;
    dst[0] = '\0';
    return;
  }
  memcpy(dst, b->p + b->off, n);
  dst[n] = '\0';
  b->off += n;
}

static void get_viol(rbuf_t *b, uint32_t bi, tlc_violation_t *v) {
  memset(v, 0, sizeof(*v));
  v->budget = bi;
  v->handle = (uint32_t)get_u(b, 4);
  v->context = (uint32_t)get_u(b, 4);
  v->row_kind = (uint8_t)get_u(b, 1);
  v->stat = (uint8_t)get_u(b, 1);
  v->over = (uint8_t)get_u(b, 1) != 0;
  v->state = get_u(b, 8);
  v->value = (int64_t)get_u(b, 8);
  v->limit = (int64_t)get_u(b, 8);
  v->start = (int64_t)get_u(b, 8);
  v->end = (int64_t)get_u(b, 8);
  v->epoch = get_u(b, 8);
  v->wall_ms = (int64_t)get_u(b, 8);
  v->seq_start = get_u(b, 8);
  v->seq_end = get_u(b, 8);
  v->count = get_u(b, 8);
  v->seg_first = get_u(b, 8);
  v->off_first = get_u(b, 8);
  v->seg_last = get_u(b, 8);
  v->off_last = get_u(b, 8);
  if (v->row_kind > TLC_ROW_STATE || v->stat > TLC_BSTAT_RATE || v->over > 1)
    b->bad = 1; /* what the report and the served forms index by */
}

/* Appends counter c (its bi already the watch's); 0, or -1 when max_keys or memory stop it
 * (then counted as dropped keys, as a live one would be). */
static int counter_add(tlc_bwatch_t *w, const cnt_t *c) {
  if (w->nc >= w->o.max_keys)
    return -1;
  if (w->nc == w->capc) {
    size_t nc = w->capc ? w->capc * 2 : 64;
    cnt_t *np = tlc_realloc(w->c, nc * sizeof(*np));
    if (np == NULL)
      return -1;
    w->c = np;
    w->capc = nc;
  }
  if (tlc_htab_add(&w->cnth, cntkey(c->bi, c->handle, c->context, c->row_kind, c->state), w->nc) !=
      0)
    return -1;
  w->c[w->nc++] = *c;
  return 0;
}

int tlc_bwatch_load(tlc_bwatch_t *w, const uint8_t *p, size_t len, char *err, size_t errlen) {
  rbuf_t b;
  uint32_t nb, i, j, nk, nc, *remap = NULL;
  uint8_t *taken = NULL; /* the watch's budgets already given a saved one */
  uint64_t all, dropped, restored = 0;
  tlc_violation_t v;
  char magic[8];
  int r = TLC_EFRAME;
  if (len < 8 + 4 + 4 + 16 + 4 + 8) {
    snprintf(err, errlen, "not a watch checkpoint: %zu bytes", len);
    return TLC_EFRAME;
  }
  b.p = p;
  b.n = len;
  b.off = len - 8;
  b.bad = 0;
  if (fnv1a(p, len - 8) != get_u(&b, 8)) {
    snprintf(err, errlen, "damaged: its checksum does not match");
    return TLC_EFRAME;
  }
  b.n = len - 8;
  b.off = 0;
  memcpy(magic, p, 8);
  b.off = 8;
  if (memcmp(magic, BWCK_MAGIC, 8) != 0 || get_u(&b, 4) != BWCK_VERSION) {
    snprintf(err, errlen, "not a watch checkpoint of version %u", BWCK_VERSION);
    return TLC_EVERSION;
  }
  nb = (uint32_t)get_u(&b, 4);
  all = get_u(&b, 8);
  dropped = get_u(&b, 8);
  (void)all;
  if (nb > (b.n - b.off) / 30) { /* a budget takes at least 30 bytes */
    snprintf(err, errlen, "%u budgets in %zu bytes", nb, len);
    return TLC_EFRAME;
  }
  if ((remap = tlc_malloc((nb ? nb : 1) * sizeof(*remap))) == NULL ||
      (taken = tlc_calloc(w->nb ? w->nb : 1, 1)) == NULL) {
    tlc_free(remap);
    return TLC_ENOMEM;
  }
  for (i = 0; i < nb && !b.bad; i++) {
    tlc_tbudget_t def;
    uint64_t total;
    bstate_t *s = NULL;
    memset(&def, 0, sizeof(def));
    get_str(&b, def.name, sizeof(def.name));
    get_str(&b, def.target, sizeof(def.target));
    get_str(&b, def.area, sizeof(def.area));
    get_str(&b, def.context, sizeof(def.context));
    def.stat = (uint8_t)get_u(&b, 1);
    def.has_max = (uint8_t)get_u(&b, 1);
    def.has_min = (uint8_t)get_u(&b, 1);
    def.max = (int64_t)get_u(&b, 8);
    def.min = (int64_t)get_u(&b, 8);
    def.window_ns = (int64_t)get_u(&b, 8);
    total = get_u(&b, 8);
    remap[i] = NONE32;
    /* only a budget whose definition is unchanged takes its state back (as a reload) */
    for (j = 0; j < w->nb && !b.bad; j++)
      if (!taken[j] && same_def(&w->bs[j].def, &def)) {
        taken[j] = 1;
        s = &w->bs[j];
        remap[i] = j;
        break;
      }
    if (s != NULL) {
      s->total = total;
      restored += total;
    }
    if (get_u(&b, 1) != 0) {
      get_viol(&b, remap[i], &v);
      if (s != NULL && !b.bad) {
        s->worst = v;
        s->worst_dist = vdist(&v);
        s->has_worst = 1;
      }
    }
    nk = (uint32_t)get_u(&b, 4);
    if (nk > (b.n - b.off) / BWCK_VSIZE)
      b.bad = 1;
    for (j = 0; j < nk && !b.bad; j++) {
      get_viol(&b, remap[i], &v);
      if (s == NULL || b.bad || nk - j > w->o.keep) /* only the last keep */
        continue;
      /* kept whole: it may hold values a slot cannot (its budget index is remap's too) */
      if ((s->ring == NULL && tlc__budget_ring_alloc(s, w->o.keep) == NULL) ||
          tlc__budget_slot_put_wide(s, w->o.keep, s->rhead, &v) != 0)
        continue;
      s->rhead = (s->rhead + 1) % w->o.keep;
      if (s->rn < w->o.keep)
        s->rn++;
    }
  }
  nc = (uint32_t)get_u(&b, 4);
  if (nc > (b.n - b.off) / 29)
    b.bad = 1;
  for (i = 0; i < nc && !b.bad; i++) {
    cnt_t c;
    uint32_t bi = (uint32_t)get_u(&b, 4);
    memset(&c, 0, sizeof(c));
    c.handle = (uint32_t)get_u(&b, 4);
    c.context = (uint32_t)get_u(&b, 4);
    c.row_kind = (uint8_t)get_u(&b, 1);
    c.state = get_u(&b, 8);
    c.count = get_u(&b, 8);
    if (b.bad || bi >= nb || remap[bi] == NONE32)
      continue;
    c.bi = remap[bi];
    if (counter_add(w, &c) < 0)
      w->dropped_keys += c.count;
  }
  if (!b.bad && b.off != b.n)
    b.bad = 1;
  if (b.bad) {
    snprintf(err, errlen, "truncated or malformed at byte %zu", b.off);
    goto fail;
  }
  w->dropped_keys += dropped;
  w->all += restored;
  tlc_free(remap);
  tlc_free(taken);
  return 0;
fail:
  /* whatever was taken back is dropped: the watch starts afresh */
  for (i = 0; i < w->nb; i++) {
    tlc__budget_ring_free(&w->bs[i]);
    w->bs[i].rn = w->bs[i].rhead = 0;
    w->bs[i].total = 0;
    w->bs[i].has_worst = 0;
  }
  tlc_htab_clear(&w->cnth);
  w->nc = 0;
  w->all = 0;
  w->dropped_keys = 0;
  tlc_free(remap);
  tlc_free(taken);
  return r;
}
