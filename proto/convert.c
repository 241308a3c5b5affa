/* convert.c - tlc_table_t <-> Tlcap__Snapshot, the protobuf-c allocator, frame packing.
 *
 * Building: every struct of a snapshot (rows, distributions, windows, quantile arrays) comes
 * from one arena, so building costs O(rows) small bump allocations and freeing is one call per
 * chunk. The arena has a cap, so a huge table fails with TLC_ENOMEM instead of exhausting
 * memory. Applying: a received snapshot is validated field by field (array lengths, context
 * indices) before it touches the table: the client trusts the daemon's framing, not its
 * content.
 * Not done here: deciding which rows change (the engine's seq) or I/O.
 */
#include "proto/convert.h"

#include "base/alloc.h"
#include "base/err.h"
#include "proto/frame.h"

#include <string.h>

/* ---- allocator --------------------------------------------------------------------------- */

static void *pb_alloc(void *ud, size_t size) {
  (void)ud;
  return tlc_malloc(size != 0 ? size : 1);
}

static void pb_free(void *ud, void *p) {
  (void)ud;
  tlc_free(p);
}

ProtobufCAllocator tlc_pb_allocator = { pb_alloc, pb_free, NULL };

/* ---- arena ------------------------------------------------------------------------------- */

struct tlc_pb_chunk {
  SLIST_ENTRY(tlc_pb_chunk) link;
  size_t cap, off;
  /* data follows, 16-byte aligned */
};

#define CHUNK_HDR ((sizeof(struct tlc_pb_chunk) + 15) & ~(size_t)15)
#define CHUNK_MIN (64u * 1024u)

void tlc_pb_arena_init(tlc_pb_arena_t *a, size_t max) {
  SLIST_INIT(&a->head);
  SLIST_INIT(&a->spare);
  a->used = 0;
  a->max = max != 0 ? max : (size_t)1 << 30;
}

void tlc_pb_arena_fini(tlc_pb_arena_t *a) {
  tlc_pb_arena_rewind(a);
  while (!SLIST_EMPTY(&a->spare)) {
    struct tlc_pb_chunk *c = SLIST_FIRST(&a->spare);
    SLIST_REMOVE_HEAD(&a->spare, link);
    tlc_free(c);
  }
}

void tlc_pb_arena_rewind(tlc_pb_arena_t *a) {
  while (!SLIST_EMPTY(&a->head)) {
    struct tlc_pb_chunk *c = SLIST_FIRST(&a->head);
    SLIST_REMOVE_HEAD(&a->head, link);
    SLIST_INSERT_HEAD(&a->spare, c, link);
  }
  a->used = 0;
}

void *tlc_pb_arena_alloc(tlc_pb_arena_t *a, size_t size) {
  struct tlc_pb_chunk *c = SLIST_FIRST(&a->head);
  void *p;
  size = (size + 15) & ~(size_t)15;
  if (size == 0)
    size = 16;
  if (size > a->max || a->used > a->max - size)
    return NULL;
  if (c == NULL || c->cap - c->off < size) {
    size_t cap = size > CHUNK_MIN ? size : CHUNK_MIN;
    c = SLIST_FIRST(&a->spare);
    if (c != NULL && c->cap >= size) { /* a kept chunk (tlc_pb_arena_rewind) */
      SLIST_REMOVE_HEAD(&a->spare, link);
    } else {
      if ((c = tlc_malloc(CHUNK_HDR + cap)) == NULL)
        return NULL;
      c->cap = cap;
    }
    c->off = 0;
    SLIST_INSERT_HEAD(&a->head, c, link);
  }
  p = (char *)c + CHUNK_HDR + c->off;
  c->off += size;
  a->used += size;
  memset(p, 0, size);
  return p;
}

void tlc_pb_arena_reset(tlc_pb_arena_t *a) {
  struct tlc_pb_chunk *c = SLIST_FIRST(&a->head);
  if (c == NULL)
    return;
  SLIST_REMOVE_HEAD(&a->head, link); /* the current chunk stays, the others are freed */
  while (!SLIST_EMPTY(&a->head)) {
    struct tlc_pb_chunk *n = SLIST_FIRST(&a->head);
    SLIST_REMOVE_HEAD(&a->head, link);
    tlc_free(n);
  }
  SLIST_INSERT_HEAD(&a->head, c, link);
  c->off = 0;
  a->used = 0;
}

char *tlc_pb_arena_strdup(tlc_pb_arena_t *a, const char *s) {
  size_t n = strlen(s);
  char *d = tlc_pb_arena_alloc(a, n + 1);
  if (d != NULL)
    memcpy(d, s, n + 1);
  return d;
}

/* ---- table -> snapshot ------------------------------------------------------------------- */

void tlc_pb_counters_set(Tlcap__Counters *c, const tlc_counters_t *k) {
  tlcap__counters__init(c);
  c->events = k->events;
  c->anomalies = k->anomalies;
  c->dropped_area_limit = k->dropped_area_limit;
  c->gaps = k->gaps;
  c->bytes = k->bytes;
  c->records = k->records;
  c->bytes_skipped = k->bytes_skipped;
  c->resyncs = k->resyncs;
  c->records_invalid = k->records_invalid;
  c->truncated = k->truncated;
  c->overflow_items = k->overflow_items;
  c->clock_resets = k->clock_resets;
}

void tlc_pb_counters_get(tlc_counters_t *k, const Tlcap__Counters *c) {
  memset(k, 0, sizeof(*k));
  if (c == NULL)
    return;
  k->events = c->events;
  k->anomalies = c->anomalies;
  k->dropped_area_limit = c->dropped_area_limit;
  k->gaps = c->gaps;
  k->bytes = c->bytes;
  k->records = c->records;
  k->bytes_skipped = c->bytes_skipped;
  k->resyncs = c->resyncs;
  k->records_invalid = c->records_invalid;
  k->truncated = c->truncated;
  k->clock_resets = c->clock_resets;
  k->overflow_items = c->overflow_items;
}

#define ANEW(a, type, n) ((type *)tlc_pb_arena_alloc((a), sizeof(type) * (size_t)(n)))

int tlc_pb_row_build(tlc_pb_arena_t *a, Tlcap__Row *pr, const tlc_stat_t *r, uint32_t nwin,
                     const tlc_pb_snap_sel_t *sel) {
  unsigned k, w;
  Tlcap__Dist *d = ANEW(a, Tlcap__Dist, TLC_NKINDS);
  tlcap__row__init(pr);
  pr->handle = r->handle;
  pr->context = r->context;
  pr->state = r->state;
  pr->kind = (Tlcap__RowKind)r->kind;
  pr->has_value = r->has_value;
  pr->count = r->count;
  pr->anomalies = r->anomalies;
  pr->value = r->value;
  pr->value_min = r->value_min;
  pr->value_max = r->value_max;
  pr->seq = r->seq;
  pr->totals = ANEW(a, int64_t, TLC_NKINDS);
  pr->dists = ANEW(a, Tlcap__Dist *, TLC_NKINDS);
  if (d == NULL || pr->totals == NULL || pr->dists == NULL)
    return TLC_ENOMEM;
  pr->n_totals = TLC_NKINDS;
  pr->n_dists = TLC_NKINDS;
  for (k = 0; k < TLC_NKINDS; k++) {
    const tlc_dist_t *s = &r->dist[k];
    tlcap__dist__init(&d[k]);
    pr->totals[k] = r->total[k];
    pr->dists[k] = &d[k];
    d[k].n = s->n;
    d[k].sum = s->sum;
    d[k].min = s->n > 0 ? s->min : 0;
    d[k].max = s->n > 0 ? s->max : 0;
    d[k].sumsq_hi = s->sumsq_hi;
    d[k].sumsq_lo = s->sumsq_lo;
    if (s->n > 0 && s->min_at.known) {
      d[k].min_known = 1;
      d[k].min_start = s->min_at.start;
      d[k].min_end = s->min_at.end;
      d[k].min_epoch = s->min_at.epoch;
      d[k].min_seq_start = s->min_at.seq_start;
      d[k].min_seq_end = s->min_at.seq_end;
      d[k].min_wall_ms = s->min_at.wall_ms;
      d[k].min_seg_first = s->min_at.seg_first;
      d[k].min_off_first = s->min_at.off_first;
      d[k].min_seg_last = s->min_at.seg_last;
      d[k].min_off_last = s->min_at.off_last;
    }
    if (s->n > 0 && s->max_at.known) {
      d[k].max_known = 1;
      d[k].max_start = s->max_at.start;
      d[k].max_end = s->max_at.end;
      d[k].max_epoch = s->max_at.epoch;
      d[k].max_seq_start = s->max_at.seq_start;
      d[k].max_seq_end = s->max_at.seq_end;
      d[k].max_wall_ms = s->max_at.wall_ms;
      d[k].max_seg_first = s->max_at.seg_first;
      d[k].max_off_first = s->max_at.off_first;
      d[k].max_seg_last = s->max_at.seg_last;
      d[k].max_off_last = s->max_at.off_last;
    }
    if (sel->quantiles && s->has_q && s->n > 0) {
      d[k].quantiles = ANEW(a, int64_t, TLC_NQUANT);
      if (d[k].quantiles == NULL)
        return TLC_ENOMEM;
      memcpy(d[k].quantiles, s->q, sizeof(s->q));
      d[k].n_quantiles = TLC_NQUANT;
    }
  }
  if (sel->windows && nwin > 0) {
    uint32_t nw = r->nwin < nwin ? r->nwin : nwin;
    Tlcap__WindowStat *ws = ANEW(a, Tlcap__WindowStat, nw);
    pr->windows = ANEW(a, Tlcap__WindowStat *, nw);
    if (nw > 0 && (ws == NULL || pr->windows == NULL))
      return TLC_ENOMEM;
    pr->n_windows = nw;
    for (w = 0; w < nw; w++) {
      Tlcap__WindowDist *wd = ANEW(a, Tlcap__WindowDist, TLC_NKINDS);
      tlcap__window_stat__init(&ws[w]);
      pr->windows[w] = &ws[w];
      ws[w].count = r->win[w].count;
      ws[w].kinds = ANEW(a, Tlcap__WindowDist *, TLC_NKINDS);
      if (wd == NULL || ws[w].kinds == NULL)
        return TLC_ENOMEM;
      ws[w].n_kinds = TLC_NKINDS;
      for (k = 0; k < TLC_NKINDS; k++) {
        const tlc_wdist_t *s = &r->win[w].k[k];
        tlcap__window_dist__init(&wd[k]);
        wd[k].n = s->n;
        wd[k].sum = s->sum;
        wd[k].min = s->n > 0 ? s->min : 0;
        wd[k].max = s->n > 0 ? s->max : 0;
        ws[w].kinds[k] = &wd[k];
      }
    }
  }
  return 0;
}

static int build_mapping(tlc_pb_arena_t *a, Tlcap__Mapping *pm, const tlc_mapping_t *m) {
  size_t i;
  Tlcap__MapArea *ar = ANEW(a, Tlcap__MapArea, m->nareas);
  Tlcap__MapContext *cx = ANEW(a, Tlcap__MapContext, m->ncontexts);
  tlcap__mapping__init(pm);
  pm->areas = ANEW(a, Tlcap__MapArea *, m->nareas);
  pm->contexts = ANEW(a, Tlcap__MapContext *, m->ncontexts);
  if (ar == NULL || cx == NULL || pm->areas == NULL || pm->contexts == NULL)
    return TLC_ENOMEM;
  for (i = 0; i < m->nareas; i++) {
    const tlc_map_area_t *s = &m->areas[i];
    tlcap__map_area__init(&ar[i]);
    ar[i].handle = s->handle;
    ar[i].parent = s->parent;
    ar[i].state_handle = s->state_handle;
    ar[i].has_value = s->has_value;
    ar[i].value = s->value;
    /* The mapping outlives the packing (the provider owns it for the call): no copies. */
    ar[i].name = s->name != NULL ? s->name : (char *)"";
    ar[i].file = s->file != NULL ? s->file : (char *)"";
    ar[i].value_type = s->value_type != NULL ? s->value_type : (char *)"";
    ar[i].unit = s->unit != NULL ? s->unit : (char *)"";
    ar[i].path = s->path != NULL ? s->path : (char *)"";
    pm->areas[i] = &ar[i];
  }
  pm->n_areas = m->nareas;
  for (i = 0; i < m->ncontexts; i++) {
    tlcap__map_context__init(&cx[i]);
    cx[i].handle = m->contexts[i].handle;
    cx[i].name = m->contexts[i].name != NULL ? m->contexts[i].name : (char *)"";
    pm->contexts[i] = &cx[i];
  }
  pm->n_contexts = m->ncontexts;
  return 0;
}

/* ---- columnar rows ----------------------------------------------------------------------- */

int tlc_col_known(uint32_t col) {
  if (col >= 1 && col <= TLC_COL_SEQ)
    return col != 5;
  if (col >= TLC_COL_DIST(0, 0) && col < TLC_COL_DIST(TLC_NKINDS, 0))
    return (col - TLC_COL_DIST(0, 0)) % 16 < TLC_COLF_END;
  if (col >= TLC_COL_WCOUNT(0) && col < TLC_COL_WCOUNT(TLC_MAX_WINDOWS))
    return (col - TLC_COL_WCOUNT(0)) % 32 < 1 + 4 * TLC_NKINDS;
  return 0;
}

static int col_is_quantile(uint32_t col, unsigned *kind) {
  unsigned f;
  if (col < TLC_COL_DIST(0, 0) || col >= TLC_COL_DIST(TLC_NKINDS, 0))
    return 0;
  f = (col - TLC_COL_DIST(0, 0)) % 16;
  *kind = (col - TLC_COL_DIST(0, 0)) / 16;
  return f >= TLC_COLF_Q && f < TLC_COLF_Q + TLC_NQUANT;
}

int64_t tlc_col_get(const tlc_stat_t *r, uint32_t col) {
  if (col < TLC_COL_DIST(0, 0)) {
    switch (col) {
    case TLC_COL_HANDLE:
      return r->handle;
    case TLC_COL_CONTEXT:
      return r->context;
    case TLC_COL_STATE:
      return (int64_t)r->state;
    case TLC_COL_KIND: {
      int64_t v = (int64_t)(r->kind & 3u) | (int64_t)(r->has_value ? 4 : 0);
      unsigned k;
      for (k = 0; k < TLC_NKINDS; k++)
        if (r->dist[k].has_q && r->dist[k].n > 0)
          v |= (int64_t)1 << (3 + k);
      return v;
    }
    case TLC_COL_COUNT:
      return (int64_t)r->count;
    case TLC_COL_ANOMALIES:
      return (int64_t)r->anomalies;
    case TLC_COL_VALUE:
      return (int64_t)r->value;
    case TLC_COL_VALUE_MIN:
      return (int64_t)r->value_min;
    case TLC_COL_VALUE_MAX:
      return (int64_t)r->value_max;
    case TLC_COL_SEQ:
      return (int64_t)r->seq;
    default:
      return 0;
    }
  }
  if (col < TLC_COL_DIST(TLC_NKINDS, 0)) {
    unsigned k = (col - TLC_COL_DIST(0, 0)) / 16, f = (col - TLC_COL_DIST(0, 0)) % 16;
    const tlc_dist_t *d = &r->dist[k];
    switch (f) {
    case TLC_COLF_TOTAL:
      return r->total[k];
    case TLC_COLF_N:
      return (int64_t)d->n;
    case TLC_COLF_SUM:
      return d->sum;
    case TLC_COLF_MIN:
      return d->n > 0 ? d->min : 0;
    case TLC_COLF_MAX:
      return d->n > 0 ? d->max : 0;
    case TLC_COLF_SUMSQ_HI:
      return (int64_t)d->sumsq_hi;
    case TLC_COLF_SUMSQ_LO:
      return (int64_t)d->sumsq_lo;
    case TLC_COLF_MAX_START:
      return d->n > 0 && d->max_at.known ? d->max_at.start : 0;
    case TLC_COLF_MAX_END:
      return d->n > 0 && d->max_at.known ? d->max_at.end : 0;
    case TLC_COLF_MAX_EPOCH:
      return d->n > 0 && d->max_at.known ? (int64_t)d->max_at.epoch + 1 : 0;
    default:
      if (f >= TLC_COLF_Q && f < TLC_COLF_Q + TLC_NQUANT && d->n > 0 && d->has_q)
        return d->q[f - TLC_COLF_Q];
      return 0;
    }
  }
  if (col >= TLC_COL_WCOUNT(0) && col < TLC_COL_WCOUNT(TLC_MAX_WINDOWS)) {
    unsigned w = (col - TLC_COL_WCOUNT(0)) / 32, f = (col - TLC_COL_WCOUNT(0)) % 32;
    const tlc_wdist_t *d;
    if (w >= r->nwin || f > 4 * TLC_NKINDS)
      return 0;
    if (f == 0)
      return (int64_t)r->win[w].count;
    d = &r->win[w].k[(f - 1) / 4];
    switch ((f - 1) % 4) {
    case TLC_COLW_N:
      return (int64_t)d->n;
    case TLC_COLW_SUM:
      return d->sum;
    case TLC_COLW_MIN:
      return d->n > 0 ? d->min : 0;
    default:
      return d->n > 0 ? d->max : 0;
    }
  }
  return 0;
}

void tlc_col_set(tlc_stat_t *r, uint32_t col, int64_t v) {
  if (col < TLC_COL_DIST(0, 0)) {
    unsigned k;
    switch (col) {
    case TLC_COL_HANDLE:
      r->handle = (uint32_t)v;
      break;
    case TLC_COL_CONTEXT:
      r->context = (uint32_t)v;
      break;
    case TLC_COL_STATE:
      r->state = (uint64_t)v;
      break;
    case TLC_COL_KIND:
      r->kind = (uint8_t)(v & 3);
      r->has_value = (uint8_t)((v >> 2) & 1);
      for (k = 0; k < TLC_NKINDS; k++)
        r->dist[k].has_q = (uint8_t)((v >> (3 + k)) & 1);
      break;
    case TLC_COL_COUNT:
      r->count = (uint64_t)v;
      break;
    case TLC_COL_ANOMALIES:
      r->anomalies = (uint64_t)v;
      break;
    case TLC_COL_VALUE:
      r->value = (uint64_t)v;
      break;
    case TLC_COL_VALUE_MIN:
      r->value_min = (uint64_t)v;
      break;
    case TLC_COL_VALUE_MAX:
      r->value_max = (uint64_t)v;
      break;
    case TLC_COL_SEQ:
      r->seq = (uint64_t)v;
      break;
    default:
      break;
    }
    return;
  }
  if (col < TLC_COL_DIST(TLC_NKINDS, 0)) {
    unsigned k = (col - TLC_COL_DIST(0, 0)) / 16, f = (col - TLC_COL_DIST(0, 0)) % 16;
    tlc_dist_t *d = &r->dist[k];
    switch (f) {
    case TLC_COLF_TOTAL:
      r->total[k] = v;
      break;
    case TLC_COLF_N:
      d->n = (uint64_t)v;
      break;
    case TLC_COLF_SUM:
      d->sum = v;
      break;
    case TLC_COLF_MIN:
      d->min = v;
      break;
    case TLC_COLF_MAX:
      d->max = v;
      break;
    case TLC_COLF_SUMSQ_HI:
      d->sumsq_hi = (uint64_t)v;
      break;
    case TLC_COLF_SUMSQ_LO:
      d->sumsq_lo = (uint64_t)v;
      break;
    case TLC_COLF_MAX_START:
      d->max_at.start = v;
      break;
    case TLC_COLF_MAX_END:
      d->max_at.end = v;
      break;
    case TLC_COLF_MAX_EPOCH: /* EPOCH + 1; 0 and out of range: not known */
      d->max_at.known = v > 0 && v <= (int64_t)UINT32_MAX + 1;
      d->max_at.epoch = d->max_at.known ? (uint32_t)(v - 1) : 0;
      break;
    default:
      if (f >= TLC_COLF_Q && f < TLC_COLF_Q + TLC_NQUANT)
        d->q[f - TLC_COLF_Q] = v;
      break;
    }
    return;
  }
  if (col >= TLC_COL_WCOUNT(0) && col < TLC_COL_WCOUNT(TLC_MAX_WINDOWS)) {
    unsigned w = (col - TLC_COL_WCOUNT(0)) / 32, f = (col - TLC_COL_WCOUNT(0)) % 32;
    tlc_wdist_t *d;
    if (f > 4 * TLC_NKINDS)
      return;
    if (r->nwin < w + 1)
      r->nwin = w + 1;
    if (f == 0) {
      r->win[w].count = (uint64_t)v;
      return;
    }
    d = &r->win[w].k[(f - 1) / 4];
    switch ((f - 1) % 4) {
    case TLC_COLW_N:
      d->n = (uint64_t)v;
      break;
    case TLC_COLW_SUM:
      d->sum = v;
      break;
    case TLC_COLW_MIN:
      d->min = v;
      break;
    default:
      d->max = v;
      break;
    }
  }
}

size_t tlc_cols_normalise(const uint32_t *req, size_t n, uint32_t *out, int *windows,
                          int *quantiles) {
  static const uint32_t keys[TLC_COL_NKEYS] = { TLC_COL_HANDLE, TLC_COL_CONTEXT, TLC_COL_STATE,
                                                TLC_COL_KIND };
  uint8_t seen[TLC_COL_WCOUNT(TLC_MAX_WINDOWS)];
  size_t i, k = 0;
  unsigned kind;
  memset(seen, 0, sizeof(seen));
  *windows = *quantiles = 0;
  for (i = 0; i < TLC_COL_NKEYS; i++) {
    out[k++] = keys[i];
    seen[keys[i]] = 1;
  }
  for (i = 0; i < n; i++) {
    uint32_t c = req[i];
    if (!tlc_col_known(c) || seen[c])
      continue;
    seen[c] = 1;
    out[k++] = c; /* at most every known column once: k < TLC_COL_MAX_COLUMNS */
    if (c >= TLC_COL_WCOUNT(0))
      *windows = 1;
    if (col_is_quantile(c, &kind))
      *quantiles = 1;
  }
  return k;
}

int64_t tlc_pb_cells_qmask(const uint32_t *cols, size_t ncols) {
  int64_t qmask = 0;
  unsigned kind;
  size_t c;
  for (c = 0; c < ncols; c++)
    if (col_is_quantile(cols[c], &kind))
      qmask |= (int64_t)1 << (3 + kind);
  return qmask;
}

unsigned tlc_cols_kinds(const uint32_t *cols, size_t ncols) {
  unsigned kinds = 0;
  size_t c;
  for (c = 0; c < ncols; c++) {
    uint32_t col = cols[c];
    if (col >= TLC_COL_DIST(0, 0) && col < TLC_COL_DIST(TLC_NKINDS, 0))
      kinds |= 1u << ((col - TLC_COL_DIST(0, 0)) / 16u);
    else if (col > TLC_COL_WCOUNT(0) && col < TLC_COL_WCOUNT(TLC_MAX_WINDOWS) &&
             (col - TLC_COL_WCOUNT(0)) % 32u != 0)
      kinds |= 1u << (((col - TLC_COL_WCOUNT(0)) % 32u - 1u) / 4u);
  }
  return kinds;
}

static uint8_t *put_varint(uint8_t *p, uint64_t v) {
  while (v >= 0x80) {
    *p++ = (uint8_t)(v | 0x80);
    v >>= 7;
  }
  *p++ = (uint8_t)v;
  return p;
}

static size_t varint_size(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    n++;
  }
  return n;
}

size_t tlc_pb_cells_encode(const tlc_stat_t *r, const uint32_t *cols, size_t ncols, int64_t qmask,
                           uint8_t *out) {
  uint8_t *p = out;
  size_t c;
  for (c = 0; c < ncols; c++) {
    int64_t v = tlc_col_get(r, cols[c]);
    if (cols[c] == TLC_COL_KIND)
      v &= 7 | qmask;
    /* sint64: zigzag */
    p = put_varint(p, ((uint64_t)v << 1) ^ (uint64_t)(v < 0 ? -1 : 0));
  }
  return (size_t)(p - out);
}

/* ServerMessage.snapshot (12), Snapshot.rows (15), Snapshot.cells (20): length-delimited. */
#define TAG_SM_SNAPSHOT ((12u << 3) | 2u)
#define TAG_SNAP_ROWS   ((15u << 3) | 2u)
#define TAG_SNAP_CELLS  ((20u << 3) | 2u)

static size_t rows_part(const Tlcap__Snapshot *hdr, size_t row_bytes) {
  if (hdr->n_columns > 0) /* one packed field, left out when empty */
    return row_bytes > 0 ? varint_size(TAG_SNAP_CELLS) + varint_size(row_bytes) + row_bytes : 0;
  return row_bytes; /* Row fields, tags and lengths included */
}

size_t tlc_pb_row_field_size(const Tlcap__Row *pr, size_t *packed) {
  *packed = protobuf_c_message_get_packed_size(&pr->base);
  return varint_size(TAG_SNAP_ROWS) + varint_size(*packed) + *packed;
}

size_t tlc_pb_row_field_pack(const Tlcap__Row *pr, size_t packed, uint8_t *out) {
  uint8_t *p = put_varint(out, TAG_SNAP_ROWS);
  p = put_varint(p, packed);
  p += protobuf_c_message_pack(&pr->base, p);
  return (size_t)(p - out);
}

/* ---- packed size bounds (tlc_pb_row_field_max) ---- */

/* The longest packed value of a scalar field of type t (its key not included), as protobuf-c
 * writes it: negative int32 and enum values take 10 bytes (sign-extended), lengths are uint32
 * varints. 0: no bound (strings, bytes). */
static size_t type_max(ProtobufCType t) {
  switch (t) {
  case PROTOBUF_C_TYPE_INT32:
  case PROTOBUF_C_TYPE_ENUM:
  case PROTOBUF_C_TYPE_INT64:
  case PROTOBUF_C_TYPE_SINT64:
  case PROTOBUF_C_TYPE_UINT64:
    return 10;
  case PROTOBUF_C_TYPE_SINT32:
  case PROTOBUF_C_TYPE_UINT32:
    return 5;
  case PROTOBUF_C_TYPE_SFIXED32:
  case PROTOBUF_C_TYPE_FIXED32:
  case PROTOBUF_C_TYPE_FLOAT:
    return 4;
  case PROTOBUF_C_TYPE_SFIXED64:
  case PROTOBUF_C_TYPE_FIXED64:
  case PROTOBUF_C_TYPE_DOUBLE:
    return 8;
  case PROTOBUF_C_TYPE_BOOL:
    return 1;
  default:
    return 0;
  }
}

/* The most elements tlc_pb_row_build puts in repeated field `f` of message `d`; SIZE_MAX for a
 * field it does not know (tlcap.proto grew: no bound until this function learns it). */
static size_t row_rep_max(const ProtobufCMessageDescriptor *d, const ProtobufCFieldDescriptor *f,
                          unsigned nq, unsigned nw) {
  if (d == &tlcap__row__descriptor && strcmp(f->name, "totals") == 0)
    return TLC_NKINDS;
  if (d == &tlcap__row__descriptor && strcmp(f->name, "dists") == 0)
    return TLC_NKINDS;
  if (d == &tlcap__row__descriptor && strcmp(f->name, "windows") == 0)
    return nw;
  if (d == &tlcap__dist__descriptor && strcmp(f->name, "quantiles") == 0)
    return nq;
  if (d == &tlcap__window_stat__descriptor && strcmp(f->name, "kinds") == 0)
    return TLC_NKINDS;
  return SIZE_MAX;
}

/* The longest packing of a message of descriptor `d` as tlc_pb_row_build fills it, from the
 * descriptors alone: every field at its longest value, every repeated field at its most
 * elements (with a key and a length whether protobuf-c packs it or not). SIZE_MAX: none. */
static size_t msg_max(const ProtobufCMessageDescriptor *d, unsigned nq, unsigned nw, int depth) {
  size_t sum = 0, i;
  if (depth > 4)
    return SIZE_MAX;
  for (i = 0; i < d->n_fields; i++) {
    const ProtobufCFieldDescriptor *f = &d->fields[i];
    size_t key = varint_size((uint64_t)f->id << 3), v, n;
    if (f->type == PROTOBUF_C_TYPE_MESSAGE) {
      v = msg_max(f->descriptor, nq, nw, depth + 1);
      if (v == SIZE_MAX)
        return SIZE_MAX;
      v += 5; /* its length */
    } else if ((v = type_max(f->type)) == 0) {
      return SIZE_MAX;
    }
    if (f->label == PROTOBUF_C_LABEL_REPEATED) {
      if ((n = row_rep_max(d, f, nq, nw)) == SIZE_MAX)
        return SIZE_MAX;
      sum += key + 5 + n * (key + v);
    } else {
      sum += key + v;
    }
  }
  return sum;
}

size_t tlc_pb_row_field_max(uint32_t nwin, const tlc_pb_snap_sel_t *sel) {
  unsigned nq = sel->quantiles ? TLC_NQUANT : 0;
  unsigned nw = sel->windows ? (nwin < TLC_MAX_WINDOWS ? nwin : TLC_MAX_WINDOWS) : 0;
  size_t m = msg_max(&tlcap__row__descriptor, nq, nw, 0);
  return m == SIZE_MAX ? 0 : varint_size(TAG_SNAP_ROWS) + 5 + m;
}

size_t tlc_pb_snapshot_frame_size(const Tlcap__Snapshot *hdr, size_t row_bytes, size_t *hdr_len) {
  size_t snap, payload;
  *hdr_len = protobuf_c_message_get_packed_size(&hdr->base);
  snap = *hdr_len + rows_part(hdr, row_bytes);
  payload = varint_size(TAG_SM_SNAPSHOT) + varint_size(snap) + snap;
  return varint_size(payload) + payload;
}

uint8_t *tlc_pb_snapshot_frame_begin(const Tlcap__Snapshot *hdr, size_t hdr_len, size_t row_bytes,
                                     uint8_t *out) {
  size_t snap = hdr_len + rows_part(hdr, row_bytes);
  size_t payload = varint_size(TAG_SM_SNAPSHOT) + varint_size(snap) + snap;
  uint8_t *p = put_varint(out, payload);
  p = put_varint(p, TAG_SM_SNAPSHOT);
  p = put_varint(p, snap);
  p += protobuf_c_message_pack(&hdr->base, p);
  if (hdr->n_columns > 0 && row_bytes > 0) {
    p = put_varint(p, TAG_SNAP_CELLS);
    p = put_varint(p, row_bytes);
  }
  return p;
}

/* Columnar rows: Snapshot.columns and .cells from the rows that pass the filters. */
static int build_cells(tlc_pb_arena_t *a, Tlcap__Snapshot *s, const tlc_table_t *t,
                       const tlc_pb_snap_sel_t *sel) {
  size_t i, c, n = 0, nc = sel->ncolumns;
  int64_t qmask = 0, *cell;
  unsigned kind;
  for (c = 0; c < nc; c++)
    if (col_is_quantile(sel->columns[c], &kind))
      qmask |= (int64_t)1 << (3 + kind);
  s->columns = ANEW(a, uint32_t, nc);
  s->cells = cell = ANEW(a, int64_t, t->nrows > 0 ? t->nrows * nc : 1);
  if (s->columns == NULL || cell == NULL)
    return TLC_ENOMEM;
  memcpy(s->columns, sel->columns, nc * sizeof(uint32_t));
  s->n_columns = nc;
  for (i = 0; i < t->nrows; i++) {
    const tlc_stat_t *r = &t->rows[i];
    if (sel->neutral_only && t->ncontexts > 1 && r->kind == TLC_ROW_CODE &&
        r->context != TLC_CTX_NEUTRAL)
      continue;
    if (sel->keep != NULL && !sel->keep(sel->keep_ud, r))
      continue;
    for (c = 0; c < nc; c++) {
      uint32_t col = sel->columns[c];
      int64_t v = tlc_col_get(r, col);
      if (col == TLC_COL_KIND)
        v &= 7 | qmask; /* "quantiles known" only where quantile columns are sent */
      *cell++ = v;
    }
    n++;
  }
  s->n_cells = n * nc;
  return 0;
}

int tlc_pb_snapshot_build(tlc_pb_arena_t *a, Tlcap__Snapshot *s, const tlc_table_t *t,
                          const char *target, const tlc_pb_snap_sel_t *sel,
                          const tlc_mapping_t *m) {
  size_t i, n = 0, nr = sel->ncolumns > 0 ? 0 : t->nrows;
  uint32_t nwin = t->nwindows <= TLC_MAX_WINDOWS ? t->nwindows : TLC_MAX_WINDOWS;
  Tlcap__Row *rows;
  Tlcap__Context *cx;
  tlcap__snapshot__init(s);
  s->target = tlc_pb_arena_strdup(a, target != NULL ? target : "");
  s->counters = ANEW(a, Tlcap__Counters, 1);
  rows = ANEW(a, Tlcap__Row, nr);
  s->rows = ANEW(a, Tlcap__Row *, nr);
  cx = ANEW(a, Tlcap__Context, t->ncontexts);
  s->contexts = ANEW(a, Tlcap__Context *, t->ncontexts);
  s->window_ns = ANEW(a, int64_t, TLC_MAX_WINDOWS);
  if (s->target == NULL || s->counters == NULL || rows == NULL || s->rows == NULL || cx == NULL ||
      s->contexts == NULL || s->window_ns == NULL)
    return TLC_ENOMEM;
  s->format = (Tlcap__Format)t->format;
  s->first_time = t->first_time;
  s->last_time = t->last_time;
  s->has_context_area = t->has_context_area;
  s->context_area = t->context_area;
  s->seq = t->seq;
  if (sel->windows) {
    for (i = 0; i < nwin; i++)
      s->window_ns[i] = t->window_ns[i];
    s->n_window_ns = nwin;
  }
  tlc_pb_counters_set(s->counters, &t->counters);
  for (i = 0; i < t->ncontexts; i++) {
    tlcap__context__init(&cx[i]);
    cx[i].kind = (Tlcap__ContextKind)t->contexts[i].kind;
    cx[i].core = t->contexts[i].core;
    cx[i].key = t->contexts[i].key;
    s->contexts[i] = &cx[i];
  }
  s->n_contexts = t->ncontexts;
  if (sel->ncolumns > 0) {
    if (build_cells(a, s, t, sel) < 0)
      return TLC_ENOMEM;
  }
  for (i = 0; i < nr; i++) {
    int r;
    const tlc_stat_t *row = &t->rows[i];
    if (sel->neutral_only && t->ncontexts > 1 && row->kind == TLC_ROW_CODE &&
        row->context != TLC_CTX_NEUTRAL)
      continue;
    if (sel->keep != NULL && !sel->keep(sel->keep_ud, row))
      continue;
    r = tlc_pb_row_build(a, &rows[n], &t->rows[i], sel->windows ? nwin : 0, sel);
    if (r < 0)
      return r;
    s->rows[n] = &rows[n];
    n++;
  }
  s->n_rows = n;
  if (m != NULL) {
    s->mapping = ANEW(a, Tlcap__Mapping, 1);
    if (s->mapping == NULL || build_mapping(a, s->mapping, m) < 0)
      return TLC_ENOMEM;
  }
  return 0;
}

/* ---- snapshot -> table ------------------------------------------------------------------- */

static int row_from_pb(tlc_stat_t *r, const Tlcap__Row *p, size_t nctx, uint32_t nwin) {
  size_t k, w;
  if (p->context != TLC_CTX_NONE && p->context != TLC_CTX_NEUTRAL && p->context >= nctx)
    return TLC_EFRAME;
  if ((unsigned)p->kind > TLC_ROW_STATE || p->n_totals > TLC_NKINDS || p->n_dists > TLC_NKINDS ||
      p->n_windows > TLC_MAX_WINDOWS)
    return TLC_EFRAME;
  memset(r, 0, sizeof(*r));
  r->handle = p->handle;
  r->context = p->context;
  r->state = p->state;
  r->kind = (uint8_t)p->kind;
  r->has_value = p->has_value ? 1 : 0;
  r->count = p->count;
  r->anomalies = p->anomalies;
  r->value = p->value;
  r->value_min = p->value_min;
  r->value_max = p->value_max;
  r->seq = p->seq;
  for (k = 0; k < p->n_totals; k++)
    r->total[k] = p->totals[k];
  for (k = 0; k < p->n_dists; k++) {
    const Tlcap__Dist *d = p->dists[k];
    tlc_dist_t *o = &r->dist[k];
    if (d == NULL)
      return TLC_EFRAME;
    o->n = d->n;
    o->sum = d->sum;
    o->min = d->min;
    o->max = d->max;
    o->sumsq_hi = d->sumsq_hi;
    o->sumsq_lo = d->sumsq_lo;
    if (d->min_known && d->n > 0) {
      o->min_at.known = 1;
      o->min_at.start = d->min_start;
      o->min_at.end = d->min_end;
      o->min_at.epoch = d->min_epoch;
      o->min_at.seq_start = d->min_seq_start;
      o->min_at.seq_end = d->min_seq_end;
      o->min_at.wall_ms = d->min_wall_ms;
      o->min_at.seg_first = d->min_seg_first;
      o->min_at.off_first = d->min_off_first;
      o->min_at.seg_last = d->min_seg_last;
      o->min_at.off_last = d->min_off_last;
    }
    if (d->max_known && d->n > 0) {
      o->max_at.known = 1;
      o->max_at.start = d->max_start;
      o->max_at.end = d->max_end;
      o->max_at.epoch = d->max_epoch;
      o->max_at.seq_start = d->max_seq_start;
      o->max_at.seq_end = d->max_seq_end;
      o->max_at.wall_ms = d->max_wall_ms;
      o->max_at.seg_first = d->max_seg_first;
      o->max_at.off_first = d->max_off_first;
      o->max_at.seg_last = d->max_seg_last;
      o->max_at.off_last = d->max_off_last;
    }
    if (d->n_quantiles == TLC_NQUANT) {
      memcpy(o->q, d->quantiles, sizeof(o->q));
      o->has_q = 1;
    }
  }
  r->nwin = (uint32_t)(p->n_windows < nwin ? p->n_windows : nwin);
  for (w = 0; w < r->nwin; w++) {
    const Tlcap__WindowStat *ws = p->windows[w];
    if (ws == NULL || ws->n_kinds > TLC_NKINDS)
      return TLC_EFRAME;
    r->win[w].count = ws->count;
    for (k = 0; k < ws->n_kinds; k++) {
      if (ws->kinds[k] == NULL)
        return TLC_EFRAME;
      r->win[w].k[k].n = ws->kinds[k]->n;
      r->win[w].k[k].sum = ws->kinds[k]->sum;
      r->win[w].k[k].min = ws->kinds[k]->min;
      r->win[w].k[k].max = ws->kinds[k]->max;
    }
  }
  return 0;
}

/* A columnar snapshot makes sense: whole rows, at most TLC_COL_MAX_COLUMNS columns, each once,
 * the key columns among them. */
static int cols_check(const Tlcap__Snapshot *s) {
  uint8_t seen[256];
  size_t i, keys = 0;
  if (s->n_columns > TLC_COL_MAX_COLUMNS || s->n_cells % s->n_columns != 0)
    return TLC_EFRAME;
  memset(seen, 0, sizeof(seen));
  for (i = 0; i < s->n_columns; i++) {
    uint32_t c = s->columns[i];
    if (c < sizeof(seen)) {
      if (seen[c])
        return TLC_EFRAME;
      seen[c] = 1;
    }
    keys += c >= TLC_COL_HANDLE && c <= TLC_COL_KIND;
  }
  return keys == TLC_COL_NKEYS ? 0 : TLC_EFRAME;
}

static int row_from_cells(tlc_stat_t *r, const uint32_t *cols, size_t nc, const int64_t *cell,
                          size_t nctx, uint32_t nwin) {
  size_t c;
  memset(r, 0, sizeof(*r));
  for (c = 0; c < nc; c++)
    tlc_col_set(r, cols[c], cell[c]);
  if (r->context != TLC_CTX_NONE && r->context != TLC_CTX_NEUTRAL && r->context >= nctx)
    return TLC_EFRAME;
  if (r->kind > TLC_ROW_STATE)
    return TLC_EFRAME;
  if (r->nwin > nwin)
    r->nwin = nwin;
  return 0;
}

int tlc_pb_snapshot_apply(tlc_table_t *t, const Tlcap__Snapshot *s) {
  size_t i, nrows;
  int r, unsorted = 0;
  size_t old_rows;
  tlc_table_t view;
  if (s->n_window_ns > TLC_MAX_WINDOWS || (unsigned)s->format > TLC_FMT_EVLOG)
    return TLC_EFRAME;
  for (i = 0; i < s->n_contexts; i++)
    if (s->contexts[i] == NULL || (unsigned)s->contexts[i]->kind > TLC_CTXK_THREAD)
      return TLC_EFRAME;
  if (s->full)
    t->nrows = 0;
  /* Contexts are append-only in the engine; every snapshot carries all of them. */
  t->ncontexts = 0;
  for (i = 0; i < s->n_contexts; i++) {
    tlc_ctx_t c;
    memset(&c, 0, sizeof(c));
    c.kind = (uint8_t)s->contexts[i]->kind;
    c.core = (uint8_t)s->contexts[i]->core;
    c.key = s->contexts[i]->key;
    if ((r = tlc_table_add_ctx(t, &c)) < 0)
      return r;
  }
  t->format = (tlc_format_t)s->format;
  t->first_time = s->first_time;
  t->last_time = s->last_time;
  t->has_context_area = s->has_context_area ? 1 : 0;
  t->context_area = s->context_area;
  if (s->full || s->n_window_ns > 0) {
    t->nwindows = (uint32_t)s->n_window_ns;
    for (i = 0; i < s->n_window_ns; i++)
      t->window_ns[i] = s->window_ns[i];
  }
  tlc_pb_counters_get(&t->counters, s->counters);
  t->seq = s->seq;
  old_rows = t->nrows;
  if (s->n_columns > 0 && s->n_rows > 0)
    return TLC_EFRAME; /* one encoding per snapshot */
  tlc_table_init(&view);
  if (s->n_columns > 0 && (r = cols_check(s)) < 0)
    return r;
  nrows = s->n_columns > 0 ? s->n_cells / s->n_columns : s->n_rows;
  for (i = 0; i < nrows; i++) {
    tlc_stat_t tmp, *dst;
    if (s->n_columns > 0) {
      if ((r = row_from_cells(&tmp, s->columns, s->n_columns, s->cells + i * s->n_columns,
                              t->ncontexts, t->nwindows)) < 0)
        return r;
    } else {
      const Tlcap__Row *p = s->rows[i];
      if (p == NULL)
        return TLC_EFRAME;
      if ((r = row_from_pb(&tmp, p, t->ncontexts, t->nwindows)) < 0)
        return r;
    }
    dst = NULL;
    if (!s->full && old_rows > 0) {
      /* Only the sorted prefix: rows this delta appended are not in order yet. */
      view.rows = t->rows;
      view.nrows = old_rows;
      dst = (tlc_stat_t *)tlc_table_find(&view, tmp.handle, tmp.context, tmp.state);
    }
    if (dst == NULL) {
      dst = tlc_table_add(t);
      if (dst == NULL)
        return t->maxrows != 0 && t->nrows >= t->maxrows ? TLC_ELIMIT : TLC_ENOMEM;
      unsorted = 1;
    }
    *dst = tmp;
  }
  if (unsorted || s->full) {
    /* Rows added by a delta are appended after the sorted prefix: binary search over the
     * whole table only works once it is sorted again. */
    tlc_table_sort(t);
  }
  return 0;
}

/* ---- framing ----------------------------------------------------------------------------- */

size_t tlc_pb_frame_size(const ProtobufCMessage *m, size_t *payload) {
  uint8_t hdr[TLC_FRAME_MAX_HEADER];
  size_t n = protobuf_c_message_get_packed_size(m);
  *payload = n;
  return tlc_frame_header(hdr, n) + n;
}

size_t tlc_pb_frame_pack(const ProtobufCMessage *m, size_t payload, uint8_t *out) {
  size_t h = tlc_frame_header(out, payload);
  return h + protobuf_c_message_pack(m, out + h);
}

/* ---- names ------------------------------------------------------------------------------- */

const char *tlc_pb_format_name(int f) {
  static const char *const n[] = { "none", "bin10", "bin11", "evlog" };
  return f >= 0 && f <= 3 ? n[f] : "unknown";
}

const char *tlc_pb_event_kind_name(int k) {
  static const char *const n[] = { "unknown",         "connected",    "disconnected",
                                   "segment_rotated", "resync",       "drops",
                                   "mapping_loaded",  "decode_error", "added" };
  if (k == 20)
    return "reset";
  if (k == 21)
    return "forgotten";
  return k >= 0 && k <= 8 ? n[k] : "unknown";
}

const char *tlc_pb_error_name(int code) {
  const ProtobufCEnumValue *v =
      protobuf_c_enum_descriptor_get_value(&tlcap__error_code__descriptor, code);
  return v != NULL ? v->name : "ERR_UNKNOWN";
}
