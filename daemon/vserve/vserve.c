/* vserve.c - budget violations as messages (vserve.h): the Violation with its names, the
 * ViolationsReply, and the per-(target, budget) rate limit.
 *
 * Names are looked up through the view each time (a mapping loaded meanwhile names the next
 * message); nothing is cached. A reply's every block is listed in its owner (struct reply), so
 * freeing it is one walk whatever failed half-way. The limiter keys on a 64-bit hash of
 * (target, budget) in a capped htab, entries kept in one array; equal hashes of different keys
 * are told apart by comparing the names. Cost of a violation: one hash of two short strings,
 * one lookup.
 * Does not: send anything (pubsub and fleet do), keep violations (the watch does).
 */
#include "vserve/vserve.h"

#include "base/alloc.h"
#include "base/err.h"
#include "formats/budget.h"
#include "formats/mapping.h"
#include "formats/stats.h"

#include <stdio.h>
#include <string.h>

#define RECENT_MAX 10000 /* kept violations read per budget for a reply */

/* ---- names -------------------------------------------------------------------------------- */

static void names_of(const tlc_view_t *p, const char *target, uint32_t handle, uint8_t row_kind,
                     uint64_t state, uint32_t context, tlc_vserve_names_t *nm) {
  const tlc_mapping_t *m = NULL;
  size_t idx = 0;
  int found = p != NULL && p->find != NULL && target != NULL && p->find(p->ud, target, &idx) == 0;
  if (found && p->mapping != NULL)
    m = p->mapping(p->ud, idx);
  if (row_kind == TLC_ROW_STATE) {
    const char *s = tlc_mapping_state_display(m, handle, state, nm->area, sizeof(nm->area));
    if (s != nm->area)
      snprintf(nm->area, sizeof(nm->area), "%s", s);
  } else {
    const tlc_map_area_t *a = m != NULL ? tlc_mapping_find(m, handle) : NULL;
    if (a != NULL && a->name[0] != 0)
      snprintf(nm->area, sizeof(nm->area), "%s", a->name);
    else
      snprintf(nm->area, sizeof(nm->area), "%08X", (unsigned)handle);
  }
  nm->context[0] = 0;
  if (context == TLC_CTX_NONE)
    return;
  {
    tlc_ctx_t c;
    tlc_table_t t;
    const char *s;
    memset(&t, 0, sizeof(t));
    memset(&c, 0, sizeof(c));
    if (context == TLC_CTX_NEUTRAL) {
      snprintf(nm->context, sizeof(nm->context), "Neutral");
      return;
    }
    if (!found || p->context == NULL || p->context(p->ud, idx, context, &c) != 0) {
      snprintf(nm->context, sizeof(nm->context), "#%u", (unsigned)context);
      return;
    }
    /* a one-context table: the display rule needs only that context */
    t.contexts = &c;
    t.ncontexts = 1;
    s = tlc_mapping_ctx_display(m, &t, 0, nm->context, sizeof(nm->context));
    if (s != nm->context)
      snprintf(nm->context, sizeof(nm->context), "%s", s);
  }
}

void tlc_vserve_fill(Tlcap__Violation *out, const tlc_view_t *p, const char *target,
                     const tlc_bwatch_t *w, const tlc_violation_t *v, tlc_vserve_names_t *nm) {
  const tlc_tbudget_t *b = tlc_bwatch_budget(w, v->budget);
  tlcap__violation__init(out);
  names_of(p, target, v->handle, v->row_kind, v->state, v->context, nm);
  out->budget = (char *)(b != NULL ? b->name : "");
  out->stat = (char *)tlc_tbudget_stat_name(v->stat);
  out->handle = v->handle;
  out->area = nm->area;
  out->context = nm->context;
  out->over = v->over != 0;
  out->value = v->value;
  out->limit = v->limit;
  out->start_ns = v->start;
  out->end_ns = v->end;
  out->epoch = v->epoch;
  out->wall_ms = v->wall_ms;
  out->seq_start = v->seq_start;
  out->seq_end = v->seq_end;
  out->number = v->count;
  out->seg_first = v->seg_first;
  out->off_first = v->off_first;
  out->seg_last = v->seg_last;
  out->off_last = v->off_last;
  out->state = v->state;
  out->row_kind = (Tlcap__RowKind)v->row_kind;
}

/* ---- the reply ---------------------------------------------------------------------------- */

typedef struct reply {
  Tlcap__ViolationsReply r; /* first: the reply handed out is the owner */
  void **blocks;
  size_t nblocks, capblocks;
} reply_t;

/* A zeroed block of n * size bytes owned by the reply, or NULL. */
static void *own(reply_t *o, size_t n, size_t size) {
  void *p, **b;
  if (n == 0)
    n = 1;
  b = tlc_grow(o->blocks, &o->capblocks, o->nblocks + 1, sizeof(*b), 16);
  if (b == NULL)
    return NULL;
  o->blocks = b;
  if ((p = tlc_calloc(n, size)) == NULL)
    return NULL;
  o->blocks[o->nblocks++] = p;
  return p;
}

void tlc_vserve_reply_free(Tlcap__ViolationsReply *r) {
  reply_t *o = (reply_t *)r;
  size_t i;
  if (o == NULL)
    return;
  for (i = 0; i < o->nblocks; i++)
    tlc_free(o->blocks[i]);
  tlc_free(o->blocks);
  tlc_free(o);
}

typedef struct counts {
  tlc_bcount_t *c;
  size_t n, cap;
  int failed;
} counts_t;

static void count_cb(void *ud, const tlc_bcount_t *c) {
  counts_t *a = ud;
  tlc_bcount_t *p;
  if (a->failed)
    return;
  if ((p = tlc_grow(a->c, &a->cap, a->n + 1, sizeof(*p), 64)) == NULL) {
    a->failed = 1;
    return;
  }
  a->c = p;
  a->c[a->n++] = *c;
}

static int fill_budget(reply_t *o, Tlcap__BudgetViolations *bv, const tlc_view_t *p,
                       const char *target, const tlc_bwatch_t *w, size_t i, size_t max_recent,
                       const counts_t *cs) {
  const tlc_tbudget_t *b = tlc_bwatch_budget(w, i);
  const tlc_violation_t *worst = tlc_bwatch_worst(w, i);
  uint64_t total = tlc_bwatch_total(w, i);
  size_t want = total < RECENT_MAX ? (size_t)total : RECENT_MAX, got = 0, first, k, nc = 0;
  tlc_violation_t *rv = NULL;
  tlcap__budget_violations__init(bv);
  bv->name = (char *)b->name;
  bv->area = (char *)b->area;
  bv->context = (char *)b->context;
  bv->stat = (char *)tlc_tbudget_stat_name(b->stat);
  bv->has_max = b->has_max != 0;
  bv->max = b->max;
  bv->has_min = b->has_min != 0;
  bv->min = b->min;
  bv->window_ns = b->window_ns;
  bv->total = total;
  bv->origin = (char *)b->origin;
  if (worst != NULL) {
    Tlcap__Violation *pv = own(o, 1, sizeof(*pv));
    tlc_vserve_names_t *nm = own(o, 1, sizeof(*nm));
    if (pv == NULL || nm == NULL)
      return TLC_ENOMEM;
    tlc_vserve_fill(pv, p, target, w, worst, nm);
    bv->worst = pv;
  }
  if (want > 0) {
    if ((rv = own(o, want, sizeof(*rv))) == NULL)
      return TLC_ENOMEM;
    got = tlc_bwatch_recent(w, i, rv, want);
  }
  first = max_recent > 0 && got > max_recent ? got - max_recent : 0;
  if (got > first) {
    size_t n = got - first;
    Tlcap__Violation *pv = own(o, n, sizeof(*pv));
    Tlcap__Violation **pp = own(o, n, sizeof(*pp));
    tlc_vserve_names_t *nm = own(o, n, sizeof(*nm));
    if (pv == NULL || pp == NULL || nm == NULL)
      return TLC_ENOMEM;
    for (k = 0; k < n; k++) {
      tlc_vserve_fill(&pv[k], p, target, w, &rv[first + k], &nm[k]);
      pp[k] = &pv[k];
    }
    bv->recent = pp;
    bv->n_recent = n;
  }
  for (k = 0; k < cs->n; k++)
    nc += cs->c[k].budget == i;
  if (nc > 0) {
    Tlcap__ViolationCount *pc = own(o, nc, sizeof(*pc));
    Tlcap__ViolationCount **pp = own(o, nc, sizeof(*pp));
    tlc_vserve_names_t *nm = own(o, nc, sizeof(*nm));
    size_t j = 0;
    if (pc == NULL || pp == NULL || nm == NULL)
      return TLC_ENOMEM;
    for (k = 0; k < cs->n; k++) {
      const tlc_bcount_t *c = &cs->c[k];
      if (c->budget != i)
        continue;
      tlcap__violation_count__init(&pc[j]);
      names_of(p, target, c->handle, c->row_kind, c->state, c->context, &nm[j]);
      pc[j].handle = c->handle;
      pc[j].area = nm[j].area;
      pc[j].context = nm[j].context;
      pc[j].state = c->state;
      pc[j].row_kind = (Tlcap__RowKind)c->row_kind;
      pc[j].count = c->count;
      pp[j] = &pc[j];
      j++;
    }
    bv->counts = pp;
    bv->n_counts = nc;
  }
  return 0;
}

int tlc_vserve_reply(Tlcap__ViolationsReply **out, const tlc_view_t *p, const char *target,
                     const tlc_bwatch_t *w, const char *budget, size_t max_recent) {
  reply_t *o = tlc_calloc(1, sizeof(*o));
  counts_t cs;
  size_t nb, i, j = 0;
  int e = 0;
  *out = NULL;
  if (o == NULL)
    return TLC_ENOMEM;
  memset(&cs, 0, sizeof(cs));
  tlcap__violations_reply__init(&o->r);
  o->r.target = (char *)(target != NULL ? target : "");
  nb = w != NULL ? tlc_bwatch_nbudgets(w) : 0;
  if (nb > 0) {
    Tlcap__BudgetViolations *bv = own(o, nb, sizeof(*bv));
    Tlcap__BudgetViolations **bp = own(o, nb, sizeof(*bp));
    if (bv == NULL || bp == NULL)
      goto nomem;
    tlc_bwatch_counts(w, count_cb, &cs);
    if (cs.failed)
      goto nomem;
    for (i = 0; i < nb; i++) {
      if (budget != NULL && budget[0] != 0 && strcmp(tlc_bwatch_budget(w, i)->name, budget) != 0)
        continue;
      if ((e = fill_budget(o, &bv[j], p, target, w, i, max_recent, &cs)) < 0)
        goto nomem;
      bp[j] = &bv[j];
      j++;
    }
    o->r.budgets = bp;
    o->r.n_budgets = j;
    o->r.dropped_keys = tlc_bwatch_dropped_keys(w);
    o->r.total = tlc_bwatch_all(w);
  }
  tlc_free(cs.c);
  *out = &o->r;
  return 0;
nomem:
  tlc_free(cs.c);
  tlc_vserve_reply_free(&o->r);
  return TLC_ENOMEM;
}

/* ---- the rate limit ----------------------------------------------------------------------- */

static uint64_t key_hash(const char *target, const char *budget) {
  uint64_t h = 1469598103934665603ull; /* FNV-1a over target, a 0 byte, budget */
  const unsigned char *s;
  for (s = (const unsigned char *)target; *s != 0; s++)
    h = (h ^ *s) * 1099511628211ull;
  h = (h ^ 0) * 1099511628211ull;
  for (s = (const unsigned char *)budget; *s != 0; s++)
    h = (h ^ *s) * 1099511628211ull;
  return h;
}

void tlc_vrate_init(tlc_vrate_t *r, uint32_t rate) {
  memset(r, 0, sizeof(*r));
  r->rate = rate != 0 ? rate : TLC_VSERVE_RATE;
  tlc_htab_init(&r->idx, TLC_VRATE_KEYS);
  r->overflow.tokens = (int64_t)r->rate * 1000;
}

void tlc_vrate_fini(tlc_vrate_t *r) {
  size_t i;
  for (i = 0; i < r->n; i++)
    tlc_free(r->e[i].target);
  tlc_free(r->e);
  tlc_htab_fini(&r->idx);
  memset(r, 0, sizeof(*r));
}

/* The entry of (target, budget) found by the names, or made (the overflow bucket without room);
 * remembered under key. Out of line: a storm's violations find theirs in the cache. */
#if defined(__GNUC__)
__attribute__((noinline))
#endif
static tlc_vrate_entry_t *
entry_of(tlc_vrate_t *r, uint64_t key, const char *target, const char *budget, uint64_t now_ms) {
  size_t c = tlc__vrate_slot(key);
  uint64_t h, *v;
  tlc_vrate_entry_t *e, *ne;
  h = key_hash(target, budget);
  for (v = tlc_htab_get(&r->idx, h); v != NULL; v = tlc_htab_get_next(&r->idx, h, v)) {
    e = &r->e[*v];
    if (strcmp(e->target, target) == 0 && strcmp(e->budget, budget) == 0) {
      if (key != 0) {
        r->cache[c].key = key;
        r->cache[c].idx = (size_t)*v;
      }
      return e;
    }
  }
  if (r->n >= TLC_VRATE_KEYS)
    return &r->overflow;
  if ((ne = tlc_grow(r->e, &r->cap, r->n + 1, sizeof(*ne), 16)) == NULL)
    return &r->overflow;
  r->e = ne;
  e = &r->e[r->n];
  memset(e, 0, sizeof(*e));
  if ((e->target = tlc_strndup(target, strlen(target))) == NULL)
    return &r->overflow;
  if (tlc_htab_add(&r->idx, h, r->n) < 0) {
    tlc_free(e->target);
    e->target = NULL;
    return &r->overflow;
  }
  snprintf(e->budget, sizeof(e->budget), "%s", budget);
  e->hash = h;
  e->tokens = (int64_t)r->rate * 1000; /* a full bucket: the first burst goes */
  e->last_ms = now_ms;
  if (key != 0) {
    r->cache[c].key = key;
    r->cache[c].idx = r->n;
  }
  r->n++;
  return e;
}

/* The entry of key, from the cache, else by the names. */
static tlc_vrate_entry_t *entry(tlc_vrate_t *r, uint64_t key, const char *target,
                                const char *budget, uint64_t now_ms) {
  size_t c = tlc__vrate_slot(key);
  return key != 0 && r->cache[c].key == key
             ? &r->e[r->cache[c].idx]
             : entry_of(r, key, target != NULL ? target : "", budget != NULL ? budget : "", now_ms);
}

int tlc_vrate_take(tlc_vrate_t *r, uint64_t key, const char *target, const char *budget,
                   uint64_t now_ms, uint64_t *suppressed) {
  uint64_t next;
  return tlc__vrate_bucket(r, entry(r, key, target, budget, now_ms), now_ms, 0, suppressed, &next);
}

int tlc_vrate_take_named(tlc_vrate_t *r, const tlc_bwatch_t *w, size_t i, const char *target,
                         uint64_t now_ms, uint64_t held, uint64_t *suppressed, uint64_t *next_ms) {
  const tlc_tbudget_t *b = tlc_bwatch_budget(w, i);
  *suppressed = 0;
  *next_ms = 0;
  if (b == NULL)
    return -1;
  return tlc__vrate_bucket(r, entry(r, tlc_bwatch_key(w, i), target, b->name, now_ms), now_ms, held,
                           suppressed, next_ms);
}

void tlc_vrate_hold(tlc_vrate_t *r, const tlc_bwatch_t *w, size_t i, const char *target,
                    uint64_t key, uint64_t now_ms, uint64_t held) {
  const tlc_tbudget_t *b = tlc_bwatch_budget(w, i);
  tlc_vrate_entry_t *e;
  if (b == NULL || held == 0)
    return;
  e = entry(r, key, target, b->name, now_ms);
  e->suppressed += held;
  r->suppressed += held;
}

size_t tlc_vrate_bytes(const tlc_vrate_t *r) {
  size_t b = r->cap * sizeof(*r->e) + tlc_htab_bytes(&r->idx), i;
  for (i = 0; i < r->n; i++)
    b += strlen(r->e[i].target) + 1;
  return b;
}
