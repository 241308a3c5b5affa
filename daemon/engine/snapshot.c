/* snapshot.c - the engine's read side: snapshots (whole, in parts, deltas), their splits and
 * row order index, and the per-area accessors /metrics uses (code_net, contexts; the
 * histograms' reads are histread.c's). The engine's state is engine-int.h's; the write side
 * (events, lifecycle) is engine.c.
 */
#include "engine/engine-int.h"
#include "engine/engine.h"

#include "base/alloc.h"
#include "base/err.h"
#include "engine/hist.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* ---- snapshot ---- */

static int snapshot(tlc_engine_t *e, tlc_table_t *t, const tlc_snap_opts_t *so, int part,
                    uint64_t lo, uint64_t hi);

int tlc_engine_snapshot(tlc_engine_t *e, tlc_table_t *t, const tlc_snap_opts_t *so) {
  return snapshot(e, t, so, 0, 0, 0);
}

int tlc_engine_snapshot_part(tlc_engine_t *e, tlc_table_t *t, const tlc_snap_opts_t *so,
                             uint64_t lo, uint64_t hi) {
  return snapshot(e, t, so, 1, lo, hi);
}

/* max-heap of handles (tlc_engine_handle_split) */
static void hheap_down(uint32_t *h, size_t n, size_t i) {
  for (;;) {
    size_t l = 2 * i + 1, m = i;
    uint32_t x;
    if (l < n && h[l] > h[m])
      m = l;
    if (l + 1 < n && h[l + 1] > h[m])
      m = l + 1;
    if (m == i)
      return;
    x = h[i];
    h[i] = h[m];
    h[m] = x;
    i = m;
  }
}

int tlc_engine_handle_split(const tlc_engine_t *e, uint64_t lo, size_t n, uint64_t *hi) {
  return tlc_engine_handle_split_since(e, lo, n, 0, hi);
}

void tlc__engine_set_ord_off(tlc_engine_t *e, int on) {
  e->ord_off = on;
}

static int ord_valid(const tlc_engine_t *e) {
  return e->ord != NULL && e->ord_nrows == e->nrows && e->ord_gen == e->ctxgen &&
         e->ord_epoch == e->epoch && !e->ord_off;
}

/* The first position of e->ord whose row's handle is >= h. */
static size_t ord_lower(const tlc_engine_t *e, uint64_t h) {
  size_t a = 0, b = e->nrows;
  while (a < b) {
    size_t m = a + (b - a) / 2;
    if (e->rows[e->ord[m]].handle < h)
      a = m + 1;
    else
      b = m;
  }
  return a;
}

int tlc_engine_handle_split_since(const tlc_engine_t *e, uint64_t lo, size_t n, uint64_t since,
                                  uint64_t *hi) {
  uint32_t *h;
  size_t i, k = 0;
  int tgrew = since != 0 && e->tseq > since;
  *hi = (uint64_t)1 << 32;
  if (n == 0 || lo >= ((uint64_t)1 << 32))
    return 0;
  if (ord_valid(e)) { /* the rows in handle order: the n-th counted row from lo on */
    for (i = ord_lower(e, lo); i < e->nrows; i++) {
      const erow_t *r = &e->rows[e->ord[i]];
      if (since != 0 && r->seq <= since && !((r->open > 0 || r->out_active) && tgrew) &&
          r->kind != TLC_ROW_STATE)
        continue;
      if (++k == n) {
        *hi = r->handle > lo ? r->handle : lo + 1;
        return 0;
      }
    }
    return 0;
  }
  if ((h = tlc_malloc(n * sizeof(*h))) == NULL)
    return TLC_ENOMEM;
  /* the n smallest row handles >= lo (a row per area and context or state value) */
  for (i = 0; i < e->nrows; i++) {
    const erow_t *r = &e->rows[i];
    uint32_t x = r->handle;
    if (x < lo || (since != 0 && r->seq <= since && !((r->open > 0 || r->out_active) && tgrew) &&
                   r->kind != TLC_ROW_STATE))
      continue; /* not in a delta from `since` (state rows: counted, an open stay may grow) */
    if (k < n) {
      size_t j = k++;
      h[j] = x;
      while (j > 0 && h[(j - 1) / 2] < h[j]) { /* up */
        uint32_t y = h[j];
        h[j] = h[(j - 1) / 2];
        h[(j - 1) / 2] = y;
        j = (j - 1) / 2;
      }
    } else if (x < h[0]) {
      h[0] = x;
      hheap_down(h, k, 0);
    }
  }
  /* full: the part ends before the largest of them (its area may have rows beyond the n), or
   * after it when that is lo itself (one area with more than n rows: it is a part of its own) */
  if (k == n)
    *hi = h[0] > lo ? h[0] : lo + 1;
  tlc_free(h);
  return 0;
}

static void to_dist(tlc_dist_t *o, const edist_t *d) {
  memset(o, 0, sizeof(*o));
  o->n = d->n;
  o->sum = d->sum;
  o->min = d->n ? d->min : 0;
  o->max = d->n ? d->max : 0;
  o->sumsq_hi = d->sqhi;
  o->sumsq_lo = d->sqlo;
}

static void wmerge(tlc_wdist_t *a, const wkd_t *b) {
  nsmm_merge(&a->n, &a->sum, &a->min, &a->max, b->n, b->sum, b->min, b->max);
}

/* The rolling windows of row r into s: the sample kinds of mask `km` (bit k: kind k). */
static void fill_windows(const tlc_engine_t *e, const erow_t *r, tlc_stat_t *s, unsigned km) {
  const wrow_t *w = r->w;
  int64_t lim[TLC_MAX_WINDOWS];
  unsigned i, j, k;
  s->nwin = e->o.nwindows;
  if (w == NULL)
    return;
  for (i = 0; i < e->o.nwindows; i++)
    lim[i] = wlim(e, i);
  for (j = 0; j < w->nb; j++) {
    const wbucket_t *b = &w->b[j];
    i = WB_WIN(b);
    if (b->step <= lim[i])
      continue;
    s->win[i].count += WB_COUNT(b);
    for (k = 0; k < NK; k++)
      if (km & (1u << k))
        wmerge(&s->win[i].k[k], &b->k[k]);
  }
  for (i = 0; i < e->o.nwindows; i++) {
    /* the row's current interval lies in one step of this window */
    if (floordiv(r->wlo, e->step[i]) > lim[i]) {
      s->win[i].count += r->count - w->fcount;
      for (k = 0; k < NK; k++) {
        const edist_t *c = &r->k[k].d;
        const wkd_t h = { c->n, c->sum, c->min, c->max };
        if (km & (1u << k))
          wmerge(&s->win[i].k[k], &h);
      }
    }
  }
}

/* The sample kinds a snapshot fills (bit k: kind k): so->kinds (0: all), with CALL when GROSS
 * is asked and GROSS is CALL (no context_area). */
static unsigned snap_kinds(const tlc_engine_t *e, const tlc_snap_opts_t *so) {
  unsigned km = so->kinds != 0 ? so->kinds & ((1u << NK) - 1) : (1u << NK) - 1;
  if (!e->ctxmode && (km & (1u << TLC_GROSS)))
    km |= 1u << TLC_CALL;
  return km;
}

/* The kinds whose windows are asked for (tlc_snap_opts_t.windows: 1, or a mask of kinds). */
static inline unsigned win_kinds(const tlc_snap_opts_t *so) {
  return (so->windows & TLC_SNAP_WKINDS) ? so->windows & ((1u << NK) - 1) : (1u << NK) - 1;
}

/* Quantiles of kind k asked for (tlc_snap_opts_t.quantiles: 1, or a mask of kinds). */
static inline int want_q(const tlc_snap_opts_t *so, unsigned k) {
  if (so->quantiles & TLC_SNAP_QKINDS)
    return (so->quantiles & (1u << k)) != 0;
  return so->quantiles != 0;
}

static void fill_row(const tlc_engine_t *e, const erow_t *r, tlc_stat_t *s,
                     const tlc_snap_opts_t *so, unsigned km) {
  unsigned k;
  s->handle = r->handle;
  s->context = r->kind == TLC_ROW_CODE ? e->ctx[r->ctx].tindex : TLC_CTX_NONE;
  s->state = r->state;
  s->kind = r->kind;
  s->has_value = r->has_value;
  s->count = r->count;
  s->anomalies = r->anomalies;
  s->value = r->value;
  s->value_min = r->vmin;
  s->value_max = r->vmax;
  s->seq = r->seq;
  for (k = 0; k < NK; k++) {
    edist_t d = r->k[k].d;
    s->total[k] = r->total[k];
    if (!(km & (1u << k)))
      continue;
    if (r->w != NULL) { /* cumulative = earlier intervals + the current one */
      d = r->w->f[k];
      edist_merge(&d, &r->k[k].d);
    }
    to_dist(&s->dist[k], &d);
    if (d.n > 0) {
      s->dist[k].min_at = e->xt[r - e->rows].mn[k];
      s->dist[k].max_at = e->xt[r - e->rows].mx[k];
    }
    if (want_q(so, k) && e->hlog != NULL) {
      const tlc_hist_t *hp = &r->k[k].h;
      s->dist[k].has_q = (uint8_t)tlc__hist_quantiles(&hp, 1, d.n, d.min, d.max, s->dist[k].q);
    }
  }
  if (r->out_active)
    s->total[TLC_OUTSIDE] = tadd(s->total[TLC_OUTSIDE], nonneg(tsub(e->last, r->out_start)));
  if (so->windows)
    fill_windows(e, r, s, km & win_kinds(so));
  if (!e->ctxmode && r->kind == TLC_ROW_CODE) {
    /* GROSS == CALL without context_area: only CALL's total and samples are kept */
    s->total[TLC_GROSS] = s->total[TLC_CALL];
    if (km & (1u << TLC_GROSS)) {
      unsigned w;
      s->dist[TLC_GROSS] = s->dist[TLC_CALL];
      for (w = 0; w < s->nwin; w++)
        s->win[w].k[TLC_GROSS] = s->win[w].k[TLC_CALL];
    }
  }
}

static int cmp_grp(const void *a, const void *b) {
  const grp_t *x = a, *y = b;
  if (x->handle != y->handle)
    return x->handle < y->handle ? -1 : 1;
  if (x->tindex != y->tindex)
    return x->tindex < y->tindex ? -1 : 1;
  return 0;
}

/* The code rows that have a context, ordered by area then context index (e->grp[0, ngrp)),
 * rebuilt only when rows were added or a row got its context since the last build. */
static int groups(tlc_engine_t *e) {
  size_t i, n = e->nrows;
  grp_t *g;
  if (e->grp != NULL && e->grp_nrows == n && e->grp_gen == e->ctxgen)
    return 0;
  if ((g = tlc__engine_grow(e, e->grp, &e->capgrp, n ? n : 1, sizeof(grp_t), 64, TLC_ACCT_FORCE)) ==
      NULL)
    return TLC_ENOMEM;
  e->grp = g;
  e->ngrp = 0;
  for (i = 0; i < n; i++)
    if (e->rows[i].kind == TLC_ROW_CODE && e->rows[i].ctx != NONE32)
      e->grp[e->ngrp++] = (grp_t){ e->rows[i].handle, e->ctx[e->rows[i].ctx].tindex, (uint32_t)i };
  qsort(e->grp, e->ngrp, sizeof(grp_t), cmp_grp);
  e->grp_nrows = n;
  e->grp_gen = e->ctxgen;
  return 0;
}

/* Adds a Neutral row for every area of which a context's row changed (e->schg), merged from
 * the table rows of its contexts (e->smap: engine row -> table row, all of them filled). Every
 * sample kind is the union of the contexts' own samples: NET, GROSS, CALL and also PERIOD and
 * OUTSIDE (each context's periods and stretches put together, never recomputed from a merged
 * timeline: SPEC 2, docs/decisions.md). */
static int add_neutral(const tlc_engine_t *e, tlc_table_t *t, const tlc_snap_opts_t *so,
                       unsigned km, uint8_t **keep, size_t *capkeep) {
  const grp_t *g = e->grp;
  const tlc_hist_t **hs = NULL;
  size_t ng = e->ngrp, i, j;
  int rc = 0;
  for (i = 0; i < ng; i = j) {
    tlc_stat_t *s;
    size_t m, w, nh;
    unsigned k;
    uint8_t kp = 0;
    for (j = i; j < ng && g[j].handle == g[i].handle; j++)
      kp |= e->schg[g[j].row];
    if (!kp)
      continue;
    uint8_t *nk = tlc_grow(*keep, capkeep, t->nrows + 1, 1, 64);
    if (nk == NULL || (hs == NULL && (hs = tlc_malloc((ng ? ng : 1) * sizeof(*hs))) == NULL)) {
      rc = TLC_ENOMEM;
      goto out;
    }
    *keep = nk;
    s = tlc_table_add(t);
    if (s == NULL) {
      rc = TLC_ENOMEM;
      goto out;
    }
    s->handle = g[i].handle;
    s->context = TLC_CTX_NEUTRAL;
    s->kind = TLC_ROW_CODE;
    s->nwin = so->windows ? e->o.nwindows : 0;
    for (m = i; m < j; m++) {
      const tlc_stat_t *x = &t->rows[e->smap[g[m].row]];
      s->count += x->count;
      s->anomalies += x->anomalies;
      if (x->seq > s->seq)
        s->seq = x->seq;
      for (k = 0; k < NK; k++)
        s->total[k] = tadd(s->total[k], x->total[k]);
      for (k = 0; k < NK; k++)
        if (km & (1u << k))
          tlc_dist_merge(&s->dist[k], &x->dist[k]);
      for (w = 0; w < s->nwin; w++) {
        s->win[w].count += x->win[w].count;
        for (k = 0; k < NK; k++) {
          if (!(km & win_kinds(so) & (1u << k)))
            continue;
          const wkd_t b = { x->win[w].k[k].n, x->win[w].k[k].sum, x->win[w].k[k].min,
                            x->win[w].k[k].max };
          wmerge(&s->win[w].k[k], &b);
        }
      }
    }
    s->total[TLC_PERIOD] = 0;
    if (so->quantiles && e->hlog != NULL) {
      for (k = 0; k < NK; k++) {
        if (!(km & (1u << k)) || !want_q(so, k))
          continue;
        unsigned hk = !e->ctxmode && k == TLC_GROSS ? TLC_CALL : k;
        for (nh = 0, m = i; m < j; m++)
          hs[nh++] = &e->rows[g[m].row].k[hk].h;
        s->dist[k].has_q = (uint8_t)tlc__hist_quantiles(hs, nh, s->dist[k].n, s->dist[k].min,
                                                        s->dist[k].max, s->dist[k].q);
      }
    }
    (*keep)[t->nrows - 1] = 1;
  }
out:
  tlc_free(hs);
  return rc;
}

/* Sort keys of table rows, in tlc_table_sort's order: handle, then per-context rows by index,
 * then Neutral, then context-less rows, then state. */
typedef struct skey {
  uint32_t handle;
  uint32_t rank; /* context index; Neutral and "none" after every index */
  uint64_t state;
  size_t idx;
} skey_t;

static int cmp_skey(const void *a, const void *b) {
  const skey_t *x = a, *y = b;
  if (x->handle != y->handle)
    return x->handle < y->handle ? -1 : 1;
  if (x->rank != y->rank)
    return x->rank < y->rank ? -1 : 1;
  if (x->state != y->state)
    return x->state < y->state ? -1 : 1;
  return 0;
}

/* The same order, ties (none in a snapshot) by engine row: what a stable sort of rows taken in
 * engine order gives. */
static int cmp_skey_idx(const void *a, const void *b) {
  const skey_t *x = a, *y = b;
  int c = cmp_skey(a, b);
  if (c != 0)
    return c;
  return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/* Makes e->ord valid (engine.h: rows in table order), sorting the keys of every row when rows
 * were added or got their context since it was made. 0 or TLC_ENOMEM. */
static int build_ord(tlc_engine_t *e) {
  size_t n = e->nrows, i;
  skey_t *k;
  void *p;
  if (ord_valid(e))
    return 0;
  if ((p = tlc__engine_grow(e, e->ord, &e->capord, n ? n : 1, sizeof(uint32_t), 64,
                            TLC_ACCT_FORCE)) == NULL)
    return TLC_ENOMEM;
  e->ord = p;
  if ((k = tlc_malloc((n ? n : 1) * sizeof(*k))) == NULL)
    return TLC_ENOMEM;
  for (i = 0; i < n; i++) {
    const erow_t *r = &e->rows[i];
    k[i].handle = r->handle;
    /* as fill_row's context; a code row without its context yet is never in a snapshot */
    k[i].rank = r->kind == TLC_ROW_CODE && r->ctx != NONE32 ? e->ctx[r->ctx].tindex : 0xFFFFFFFFu;
    k[i].state = r->state;
    k[i].idx = i;
  }
  qsort(k, n, sizeof(*k), cmp_skey_idx);
  for (i = 0; i < n; i++)
    e->ord[i] = (uint32_t)k[i].idx;
  tlc_free(k);
  e->ord_nrows = n;
  e->ord_gen = e->ctxgen;
  e->ord_epoch = e->epoch;
  return 0;
}

/* Sorts t's rows as tlc_table_sort does, moving each (large) row at most once: the keys are
 * sorted, then the permutation is applied in place cycle by cycle. 0 or TLC_ENOMEM. */
static int sort_rows(tlc_table_t *t) {
  size_t n = t->nrows, i;
  skey_t *k;
  uint8_t *done;
  tlc_stat_t tmp;
  if (n < 2)
    return 0;
  k = tlc_malloc(n * sizeof(*k));
  done = tlc_calloc(n, 1);
  if (k == NULL || done == NULL) {
    tlc_free(k);
    tlc_free(done);
    return TLC_ENOMEM;
  }
  for (i = 0; i < n; i++) {
    uint32_t c = t->rows[i].context;
    k[i].handle = t->rows[i].handle;
    k[i].rank = c == TLC_CTX_NEUTRAL ? 0xFFFFFFFEu : c == TLC_CTX_NONE ? 0xFFFFFFFFu : c;
    k[i].state = t->rows[i].state;
    k[i].idx = i;
  }
  qsort(k, n, sizeof(*k), cmp_skey);
  /* position i receives old row k[i].idx */
  for (i = 0; i < n; i++) {
    size_t j = i;
    if (done[i] || k[i].idx == i) {
      done[i] = 1;
      continue;
    }
    tmp = t->rows[i];
    for (;;) {
      size_t from = k[j].idx;
      done[j] = 1;
      if (from == i) {
        t->rows[j] = tmp;
        break;
      }
      t->rows[j] = t->rows[from];
      j = from;
    }
  }
  tlc_free(k);
  tlc_free(done);
  return 0;
}

int tlc_engine_context(const tlc_engine_t *e, uint32_t index, tlc_ctx_t *c) {
  const ectx_t *x;
  if (index >= e->ntctx)
    return TLC_ERANGE;
  x = &e->ctx[e->tctx[index]];
  memset(c, 0, sizeof(*c));
  c->kind = x->kind;
  c->core = x->core;
  c->key = x->key;
  return 0;
}

int tlc_engine_code_net(tlc_engine_t *e, tlc_engine_code_net_t **out, size_t *n, size_t *cap) {
  size_t i, j, m = 0, nr = e->nrows;
  int neut = e->ntctx > 1;
  tlc_engine_code_net_t *o;
  void *p;
  *n = 0;
  if ((p = tlc__engine_grow(e, e->smap, &e->capsmap, nr ? nr : 1, sizeof(uint32_t), 64,
                            TLC_ACCT_FORCE)) == NULL)
    return TLC_ENOMEM;
  e->smap = p;
  if (neut && groups(e) < 0)
    return TLC_ENOMEM;
  if ((o = tlc_grow(*out, cap, nr ? nr : 1, sizeof(*o), 64)) == NULL)
    return TLC_ENOMEM;
  *out = o;
  /* engine row -> entry: per row with one context, per area (its Neutral) with several */
  for (i = 0; i < nr; i++)
    e->smap[i] = NONE32;
  if (neut) {
    for (i = 0; i < e->ngrp; i = j) {
      memset(&o[m], 0, sizeof(o[m]));
      o[m].handle = e->grp[i].handle;
      o[m].context = TLC_CTX_NEUTRAL;
      o[m].ref = (uint32_t)i;
      for (j = i; j < e->ngrp && e->grp[j].handle == e->grp[i].handle; j++)
        e->smap[e->grp[j].row] = (uint32_t)m;
      m++;
    }
  } else {
    for (i = 0; i < nr; i++) {
      const erow_t *r = &e->rows[i];
      if (r->kind != TLC_ROW_CODE || r->ctx == NONE32)
        continue;
      memset(&o[m], 0, sizeof(o[m]));
      o[m].handle = r->handle;
      o[m].context = e->ctx[r->ctx].tindex;
      o[m].ref = (uint32_t)i;
      e->smap[i] = (uint32_t)m++;
    }
  }
  for (i = 0; i < nr; i++) {
    const erow_t *r = &e->rows[i];
    tlc_engine_code_net_t *x;
    edist_t d;
    if (e->smap[i] == NONE32)
      continue;
    x = &o[e->smap[i]];
    d = r->k[TLC_NET].d;
    if (r->w != NULL) { /* cumulative = earlier intervals + the current one (as fill_row) */
      d = r->w->f[TLC_NET];
      edist_merge(&d, &r->k[TLC_NET].d);
    }
    x->count += r->count;
    x->net_total = tadd(x->net_total, r->total[TLC_NET]);
    x->n += d.n;
    if (d.n > 0)
      x->sum = tadd(x->sum, d.sum);
  }
  /* open activations' running time up to T (as the snapshot counts them) */
  for (i = 0; i < e->nctx; i++) {
    const ectx_t *c = &e->ctx[i];
    int64_t in_t = ctx_in(e->ctxmode, c, e->last);
    for (j = 0; j < c->depth; j++) {
      const act_t *a = &c->stack[j];
      int64_t net = a->net;
      if (e->smap[a->row] == NONE32)
        continue;
      if (a->running)
        net = tadd(net, nonneg(tsub(in_t, a->run_start)));
      o[e->smap[a->row]].net_total = tadd(o[e->smap[a->row]].net_total, net);
    }
  }
  *n = m;
  return 0;
}

static int snapshot(tlc_engine_t *e, tlc_table_t *t, const tlc_snap_opts_t *so, int part,
                    uint64_t lo, uint64_t hi) {
  tlc_snap_opts_t dso = { 0, 1, 1, 1, 0, 0 };
  uint8_t *keep = NULL;
  size_t capkeep = 0, i, j, n = e->nrows;
  int rc = 0, neut, only, tgrew, ordered = 0;
  unsigned km;
  void *p;
  if (so == NULL)
    so = &dso;
  km = snap_kinds(e, so);
  if (e->hcur != e->hlog && so->quantiles)
    tlc__engine_hlog_flush(e); /* counts the queued histogram samples; no statistic changes */
  tlc_table_clear(t);
  t->format = e->fmt;
  t->first_time = e->first;
  t->last_time = e->last;
  t->has_context_area = e->ctxmode;
  t->context_area = e->ctxmode ? e->o.context_area : 0;
  t->nwindows = e->o.nwindows;
  memset(t->window_ns, 0, sizeof(t->window_ns));
  for (i = 0; i < e->o.nwindows; i++)
    t->window_ns[i] = e->o.window_ns[i];
  t->counters = e->c;
  t->seq = e->seq;
  for (i = 0; i < e->ntctx; i++) {
    const ectx_t *c = &e->ctx[e->tctx[i]];
    tlc_ctx_t x;
    memset(&x, 0, sizeof(x));
    x.kind = c->kind;
    x.core = c->core;
    x.key = c->key;
    rc = tlc_table_add_ctx(t, &x);
    if (rc < 0)
      return rc;
    rc = 0;
  }
  neut = (so->neutral || so->neutral_only) && e->ntctx > 1;
  only = neut && so->neutral_only;
  tgrew = so->since_seq != 0 && e->tseq > so->since_seq;
  if ((p = tlc__engine_grow(e, e->smap, &e->capsmap, n ? n : 1, sizeof(uint32_t), 64,
                            TLC_ACCT_FORCE)) == NULL)
    return TLC_ENOMEM;
  e->smap = p;
  if ((p = tlc__engine_grow(e, e->schg, &e->capschg, n ? n : 1, 1, 64, TLC_ACCT_FORCE)) == NULL)
    return TLC_ENOMEM;
  e->schg = p;
  if ((keep = tlc_grow(NULL, &capkeep, n + 64, 1, 64)) == NULL || (neut && groups(e) < 0)) {
    rc = TLC_ENOMEM;
    goto out;
  }
  if (!neut && !e->ord_off && build_ord(e) == 0) {
    /* no Neutral rows: the changed rows of [lo, hi) copied in table order (e->ord), the
     * others not looked at */
    size_t a = part ? ord_lower(e, lo) : 0, b = part ? ord_lower(e, hi) : n, x;
    ordered = 1;
    memset(e->smap, 0xFF, n * sizeof(*e->smap)); /* NONE32 */
    for (x = a; x < b; x++) {
      const erow_t *r = &e->rows[e->ord[x]];
      e->schg[e->ord[x]] = !(r->kind == TLC_ROW_CODE && r->ctx == NONE32) &&
                           (so->since_seq == 0 || r->seq > so->since_seq ||
                            ((r->open > 0 || r->out_active) && tgrew));
    }
    for (i = 0; i < e->nsa && tgrew; i++)
      if (e->sa[i].valid &&
          (!part || (e->rows[e->sa[i].row].handle >= lo && e->rows[e->sa[i].row].handle < hi)))
        e->schg[e->sa[i].row] = 1;
    for (x = a; x < b; x++) {
      tlc_stat_t *s;
      i = e->ord[x];
      if (!e->schg[i])
        continue;
      e->smap[i] = (uint32_t)t->nrows;
      if ((s = tlc_table_add(t)) == NULL) {
        rc = TLC_ENOMEM;
        goto out;
      }
      fill_row(e, &e->rows[i], s, so, km);
    }
  } else {
    /* which rows changed (schg), and which are copied into the table (smap != NONE32): the
     * changed ones, and every context's row of an area whose Neutral row is wanted */
    for (i = 0; i < n; i++) {
      const erow_t *r = &e->rows[i];
      e->schg[i] = !(r->kind == TLC_ROW_CODE && r->ctx == NONE32) &&
                   (so->since_seq == 0 || r->seq > so->since_seq ||
                    ((r->open > 0 || r->out_active) && tgrew));
    }
    for (i = 0; i < e->nsa; i++)
      if (e->sa[i].valid && tgrew)
        e->schg[e->sa[i].row] = 1;
    if (part) /* a part of the table: the areas with a handle in [lo, hi) */
      for (i = 0; i < n; i++)
        if (e->rows[i].handle < lo || e->rows[i].handle >= hi)
          e->schg[i] = 0;
    for (i = 0; i < n; i++)
      e->smap[i] = e->schg[i] ? 0 : NONE32;
    if (neut) {
      for (i = 0; i < e->ngrp; i = j) {
        uint8_t any = 0;
        for (j = i; j < e->ngrp && e->grp[j].handle == e->grp[i].handle; j++)
          any |= e->schg[e->grp[j].row];
        for (; any && i < j; i++)
          e->smap[e->grp[i].row] = 0;
      }
    }
    for (i = 0; i < n; i++) {
      const erow_t *r = &e->rows[i];
      tlc_stat_t *s;
      if (e->smap[i] == NONE32)
        continue;
      e->smap[i] = (uint32_t)t->nrows;
      if ((s = tlc_table_add(t)) == NULL) {
        rc = TLC_ENOMEM;
        goto out;
      }
      fill_row(e, r, s, so, km);
      /* with neutral_only an area's per-context rows are only material for its Neutral row */
      keep[t->nrows - 1] = e->schg[i] && !(only && r->kind == TLC_ROW_CODE);
    }
  }
  /* open activations up to T */
  for (i = 0; i < e->nctx; i++) {
    const ectx_t *c = &e->ctx[i];
    int64_t in_t = ctx_in(e->ctxmode, c, e->last);
    for (j = 0; j < c->depth; j++) {
      const act_t *a = &c->stack[j];
      tlc_stat_t *s;
      int64_t net = a->net;
      if (e->smap[a->row] == NONE32)
        continue;
      s = &t->rows[e->smap[a->row]];
      if (a->running)
        net = tadd(net, nonneg(tsub(in_t, a->run_start)));
      s->total[TLC_NET] = tadd(s->total[TLC_NET], net);
      s->total[TLC_CALL] = tadd(s->total[TLC_CALL], nonneg(tsub(e->last, a->start)));
      s->total[TLC_GROSS] = tadd(s->total[TLC_GROSS], e->ctxmode ? nonneg(tsub(in_t, a->in_start))
                                                                 : nonneg(tsub(e->last, a->start)));
    }
  }
  /* open state stays up to T */
  for (i = 0; i < e->nsa; i++) {
    const sarea_t *sa = &e->sa[i];
    if (sa->valid && e->smap[sa->row] != NONE32) {
      tlc_stat_t *s = &t->rows[e->smap[sa->row]];
      s->total[TLC_NET] = tadd(s->total[TLC_NET], nonneg(tsub(e->last, sa->since)));
    }
  }
  if (ordered)
    goto out; /* in table order already, every row kept */
  if (neut && (rc = add_neutral(e, t, so, km, &keep, &capkeep)) < 0)
    goto out;
  /* drop the rows copied only for a Neutral merge */
  for (i = j = 0; i < t->nrows; i++)
    if (keep[i]) {
      if (i != j)
        t->rows[j] = t->rows[i];
      j++;
    }
  t->nrows = j;
  rc = sort_rows(t);
out:
  tlc_free(keep);
  return rc;
}
