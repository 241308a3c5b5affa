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
#include "convert.h"

#include "frame.h"
#include "tlc_alloc.h"
#include "tlc_err.h"

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
  struct tlc_pb_chunk *next;
  size_t cap, off;
  /* data follows, 16-byte aligned */
};

#define CHUNK_HDR ((sizeof(struct tlc_pb_chunk) + 15) & ~(size_t)15)
#define CHUNK_MIN (64u * 1024u)

void tlc_pb_arena_init(tlc_pb_arena_t *a, size_t max) {
  a->head = NULL;
  a->used = 0;
  a->max = max != 0 ? max : (size_t)1 << 30;
}

void tlc_pb_arena_fini(tlc_pb_arena_t *a) {
  struct tlc_pb_chunk *c = a->head;
  while (c != NULL) {
    struct tlc_pb_chunk *n = c->next;
    tlc_free(c);
    c = n;
  }
  a->head = NULL;
  a->used = 0;
}

void *tlc_pb_arena_alloc(tlc_pb_arena_t *a, size_t size) {
  struct tlc_pb_chunk *c = a->head;
  void *p;
  size = (size + 15) & ~(size_t)15;
  if (size == 0)
    size = 16;
  if (size > a->max || a->used > a->max - size)
    return NULL;
  if (c == NULL || c->cap - c->off < size) {
    size_t cap = size > CHUNK_MIN ? size : CHUNK_MIN;
    c = tlc_malloc(CHUNK_HDR + cap);
    if (c == NULL)
      return NULL;
    c->cap = cap;
    c->off = 0;
    c->next = a->head;
    a->head = c;
  }
  p = (char *)c + CHUNK_HDR + c->off;
  c->off += size;
  a->used += size;
  memset(p, 0, size);
  return p;
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
  k->overflow_items = c->overflow_items;
}

#define ANEW(a, type, n) ((type *)tlc_pb_arena_alloc((a), sizeof(type) * (size_t)(n)))

static int build_row(tlc_pb_arena_t *a, Tlcap__Row *pr, const tlc_stat_t *r, uint32_t nwin,
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

int tlc_pb_snapshot_build(tlc_pb_arena_t *a, Tlcap__Snapshot *s, const tlc_table_t *t,
                          const char *target, const tlc_pb_snap_sel_t *sel,
                          const tlc_mapping_t *m) {
  size_t i, n = 0;
  uint32_t nwin = t->nwindows <= TLC_MAX_WINDOWS ? t->nwindows : TLC_MAX_WINDOWS;
  Tlcap__Row *rows;
  Tlcap__Context *cx;
  tlcap__snapshot__init(s);
  s->target = tlc_pb_arena_strdup(a, target != NULL ? target : "");
  s->counters = ANEW(a, Tlcap__Counters, 1);
  rows = ANEW(a, Tlcap__Row, t->nrows);
  s->rows = ANEW(a, Tlcap__Row *, t->nrows);
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
  for (i = 0; i < t->nrows; i++) {
    int r;
    if (sel->keep != NULL && !sel->keep(sel->keep_ud, &t->rows[i]))
      continue;
    r = build_row(a, &rows[n], &t->rows[i], sel->windows ? nwin : 0, sel);
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

int tlc_pb_snapshot_apply(tlc_table_t *t, const Tlcap__Snapshot *s) {
  size_t i;
  int r, unsorted = 0;
  size_t old_rows;
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
  for (i = 0; i < s->n_rows; i++) {
    const Tlcap__Row *p = s->rows[i];
    tlc_stat_t tmp, *dst;
    if (p == NULL)
      return TLC_EFRAME;
    if ((r = row_from_pb(&tmp, p, t->ncontexts, t->nwindows)) < 0)
      return r;
    dst = NULL;
    if (!s->full && old_rows > 0)
      dst = (tlc_stat_t *)tlc_table_find(t, tmp.handle, tmp.context, tmp.state);
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
  return k >= 0 && k <= 8 ? n[k] : "unknown";
}

const char *tlc_pb_error_name(int code) {
  const ProtobufCEnumValue *v =
      protobuf_c_enum_descriptor_get_value(&tlcap__error_code__descriptor, code);
  return v != NULL ? v->name : "ERR_UNKNOWN";
}
