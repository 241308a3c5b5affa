/* checkpoint.c - an engine's whole state to bytes and back (tlc_engine_save, tlc_engine_load).
 *
 * What is kept: the options that shape the state (format, context_area and its packing, windows,
 * caps, histograms: a load into an engine made with other ones is refused), the counters (with
 * clock_resets, the clock epoch), the change sequence, first/last time and whether the next
 * event may restart the clock, the per-core current contexts, every context with its stack of
 * open activations, the table-index map, the state areas, every row (its dists, totals,
 * counts, open-part times, histograms and the window buckets still inside their windows) and
 * the hash table's entries. What is not: window buckets whose step has left the window (they
 * count for nothing and are only reused), the queued histogram samples (counted first:
 * tlc_engine_sync), the row cache, the window-step cache and the snapshot scratch (rebuilt on use),
 * the mapping links (resolved again with the mapping the engine has after the load).
 *
 * Versions: ENG3 (written) follows each row with its extremes' times (engine-int.h: xrow_t),
 * each with its wall clock and stored location. ENG2, written before those two existed, is
 * still read (its extremes' wall clock and location unknown: 0), and so is ENG1, older still:
 * its rows' times are unknown (known = 0) until a sample makes a new extreme.
 *
 * Layout: fixed-size records (rows, activations, state areas, window buckets) are copied as
 * they are in memory, so a save costs about one memcpy per row plus its histograms and windows
 * (bench/bench_checkpoint). Their sizes and the byte order are in the section header: a
 * checkpoint from a build with another layout is refused as incompatible (the daemon then
 * rebuilds the target from its segments), never misread.
 *
 * The reader trusts nothing: every count is checked against the bytes left before anything is
 * allocated for it, every index against what it indexes (rows, contexts, table indexes, state
 * areas, hash entries by kind), enum-like fields against their ranges, histogram spans and
 * window buckets against their bounds; what the engine keeps as derived counts (a row's open
 * activations) is recomputed. An engine loaded from any bytes is safe to push to, snapshot and
 * free (tests/fuzz/fuzz_checkpoint.c).
 *
 * Does not: write files, checksum (the caller's file format does), or keep the mapping.
 */
#include "engine/engine-int.h"

#include "base/alloc.h"
#include "base/err.h"
#include "formats/ckbuf.h"

#include <assert.h>
#include <string.h>

#define SEC_MAGIC1 0x31474E45u /* "ENG1": version 1, no extremes' times */
#define SEC_MAGIC2 0x32474E45u /* "ENG2": each row followed by its extremes' times (xat2_t) */
#define SEC_MAGIC  0x33474E45u /* "ENG3": the times with wall clock and location (xrow_t) */

/* An extreme's time as version 2 kept it: tlc_at_t without wall_ms and the location. */
typedef struct xat2 {
  int64_t start, end;
  uint64_t seq_start, seq_end;
  uint32_t epoch;
  uint32_t known;
} xat2_t;
#define END_MAGIC 0x21474E45u /* "ENG!" */

static void save_layout(tlc_ckw_t *w) {
  tlc_ckw_u32(w, (uint32_t)sizeof(erow_t));
  tlc_ckw_u32(w, (uint32_t)sizeof(act_t));
  tlc_ckw_u32(w, (uint32_t)sizeof(sarea_t));
  tlc_ckw_u32(w, (uint32_t)sizeof(wbucket_t));
  tlc_ckw_u32(w, (uint32_t)sizeof(edist_t));
  tlc_ckw_u32(w, (uint32_t)sizeof(tlc_counters_t));
  tlc_ckw_u32(w, (uint32_t)sizeof(tlc_ctxpack_t)); /* the options carry the packing */
  tlc_ckw_u32(w, 0x01020304u);                     /* byte order */
}

static void save_opts(const tlc_engine_t *e, tlc_ckw_t *w) {
  unsigned i;
  tlc_ckw_u32(w, (uint32_t)e->fmt);
  tlc_ckw_u8(w, e->o.has_context_area);
  tlc_ckw_u32(w, e->o.context_area);
  tlc_ckw_u32(w, e->o.nwindows);
  for (i = 0; i < e->o.nwindows; i++)
    tlc_ckw_i64(w, e->o.window_ns[i]);
  tlc_ckw_u64(w, e->o.max_areas);
  tlc_ckw_u64(w, e->o.max_contexts);
  tlc_ckw_u64(w, e->o.max_depth);
  tlc_ckw_u8(w, e->o.histograms);
  /* the packed task variable: what a context_area value means (its contexts are keyed by it) */
  tlc_ckw_u64(w, e->o.pack.id_mask);
  tlc_ckw_u64(w, e->o.pack.state_mask);
  tlc_ckw_u8(w, e->o.pack.stop_all);
  tlc_ckw_u8(w, e->o.pack.nrun);
  for (i = 0; i < e->o.pack.nrun; i++)
    tlc_ckw_u64(w, e->o.pack.run[i]);
  tlc_ckw_u8(w, e->o.pack.nstop);
  for (i = 0; i < e->o.pack.nstop; i++)
    tlc_ckw_u64(w, e->o.pack.stop[i]);
}

/* floor(a / b), b > 0 (engine.c's floordiv). */
static int64_t fdiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0)))
    q--;
  return q;
}

/* A window bucket whose step has left its window (engine.c's wlim: step <= floor(T / step) -
 * NSTEPS) holds nothing a snapshot reads, now or later (T only grows), and is only reused for a
 * new step: it is not saved. In a capture that runs for long most buckets are such. */
static int bucket_live(const wbucket_t *b, const int64_t *lim) {
  return b->step > lim[WB_WIN(b)];
}

/* The first part of a save: everything before the rows (options, counters, contexts with
 * their stacks, the table-index map, the state areas) and the row count. */
static void save_head(tlc_engine_t *e, tlc_ckw_t *w) {
  size_t i;
  tlc_ckw_u32(w, e->ckpt_v1 == 1 ? SEC_MAGIC1 : e->ckpt_v1 == 2 ? SEC_MAGIC2 : SEC_MAGIC);
  save_layout(w);
  save_opts(e, w);
  tlc_ckw_bytes(w, &e->c, sizeof(e->c));
  tlc_ckw_u64(w, e->seq);
  tlc_ckw_u64(w, e->tseq);
  tlc_ckw_u8(w, (uint8_t)e->have_time); /* TIME_*: the next event may restart the clock */
  tlc_ckw_i64(w, e->first);
  tlc_ckw_i64(w, e->last);
  tlc_ckw_bytes(w, e->cur, sizeof(e->cur));
  tlc_ckw_bytes(w, e->corectx, sizeof(e->corectx));
  tlc_ckw_u64(w, e->nctx);
  for (i = 0; i < e->nctx; i++) {
    const ectx_t *c = &e->ctx[i];
    tlc_ckw_u8(w, c->kind);
    tlc_ckw_u8(w, c->core);
    tlc_ckw_u64(w, c->key);
    tlc_ckw_u32(w, c->tindex);
    tlc_ckw_u32(w, c->in_count);
    tlc_ckw_i64(w, c->in_since);
    tlc_ckw_i64(w, c->in_acc);
    tlc_ckw_u32(w, c->depth);
    tlc_ckw_bytes(w, c->stack, (size_t)c->depth * sizeof(act_t));
  }
  tlc_ckw_u64(w, e->ntctx);
  tlc_ckw_bytes(w, e->tctx, e->ntctx * sizeof(uint32_t));
  tlc_ckw_u64(w, e->nsa);
  tlc_ckw_bytes(w, e->sa, e->nsa * sizeof(sarea_t));
  tlc_ckw_u64(w, e->nrows);
}

static void save_row(const tlc_engine_t *e, const erow_t *r, const int64_t *lim, tlc_ckw_t *w) {
  erow_t c = *r; /* as load_rows takes it: its interval's end in whi (engine-int.h: tap_mask) */
  unsigned k;
  c.whi = tlc__engine_whi(r);
  c.tap_mask = 0;
  c.slog = 0; /* the sample log's, set again at the load (tap_regen) */
  c.tap_whi = 0;
  tlc_ckw_bytes(w, &c, sizeof(c));
  if (e->ckpt_v1 == 0)
    tlc_ckw_bytes(w, &e->xt[r - e->rows], sizeof(xrow_t));
  else if (e->ckpt_v1 == 2)
    for (k = 0; k < 2 * NK; k++) {
      const xrow_t *x = &e->xt[r - e->rows];
      const tlc_at_t *a = k < NK ? &x->mn[k] : &x->mx[k - NK];
      xat2_t o;
      memset(&o, 0, sizeof(o));
      o.start = a->start;
      o.end = a->end;
      o.seq_start = a->seq_start;
      o.seq_end = a->seq_end;
      o.epoch = a->epoch;
      o.known = a->known;
      tlc_ckw_bytes(w, &o, sizeof(o));
    }
  if (e->o.histograms)
    for (k = 0; k < NK; k++)
      tlc__hist_save(&r->k[k].h, w);
  tlc_ckw_u8(w, r->w != NULL);
  if (r->w != NULL) {
    uint32_t j, live = 0;
    for (j = 0; j < r->w->nb; j++)
      live += (uint32_t)bucket_live(&r->w->b[j], lim);
    tlc_ckw_u64(w, r->w->fcount);
    tlc_ckw_bytes(w, r->w->f, sizeof(r->w->f));
    tlc_ckw_u32(w, live);
    for (j = 0; j < r->w->nb; j++)
      if (bucket_live(&r->w->b[j], lim))
        tlc_ckw_bytes(w, &r->w->b[j], sizeof(wbucket_t));
  }
}

enum { SV_ROWS = 1, SV_HASH = 2, SV_DONE = 3 };

int tlc_engine_save_begin(tlc_engine_t *e, tlc_engine_saver_t *sv, tlc_ckw_t *w) {
  unsigned k;
  memset(sv, 0, sizeof(*sv));
  tlc_engine_sync(e); /* the queued histogram samples are counted: none is left in the log */
  for (k = 0; k < e->o.nwindows; k++) {
    int64_t st = fdiv(e->last, e->step[k]);
    sv->lim[k] = st < INT64_MIN + NSTEPS ? INT64_MIN : st - NSTEPS;
  }
  sv->seq = e->seq;
  sv->phase = SV_ROWS;
  save_head(e, w);
  return w->err;
}

int tlc_engine_save_step(tlc_engine_t *e, tlc_engine_saver_t *sv, tlc_ckw_t *w, size_t units) {
  /* the state must not have moved since save_begin: the caller holds the target's input */
  assert(e->seq == sv->seq && e->hcur == e->hlog);
  while (units > 0 && w->err == 0 && sv->phase != SV_DONE) {
    if (sv->phase == SV_ROWS) {
      size_t end = units < e->nrows - sv->i ? sv->i + units : e->nrows;
      units -= end - sv->i;
      for (; sv->i < end && w->err == 0; sv->i++)
        save_row(e, &e->rows[sv->i], sv->lim, w);
      if (sv->i == e->nrows) {
        tlc_ckw_u64(w, e->hn);
        sv->phase = SV_HASH;
        sv->i = 0;
      }
    } else {
      /* a hash slot costs far less than a row: 16 of them per unit */
      size_t left = e->hcap - sv->i;
      size_t n = units >= (left + 15) / 16 ? left : units * 16;
      size_t end = sv->i + n;
      units -= (n + 15) / 16;
      for (; sv->i < end; sv->i++)
        if (e->ht[sv->i].a != 0) {
          tlc_ckw_u64(w, e->ht[sv->i].a);
          tlc_ckw_u64(w, e->ht[sv->i].b);
          tlc_ckw_u32(w, e->ht[sv->i].v);
        }
      if (sv->i == e->hcap) {
        tlc_ckw_u32(w, END_MAGIC);
        sv->phase = SV_DONE;
      }
    }
  }
  if (w->err != 0)
    return w->err;
  return sv->phase == SV_DONE;
}

int tlc_engine_save(tlc_engine_t *e, tlc_ckw_t *w) {
  tlc_engine_saver_t sv;
  int rc = tlc_engine_save_begin(e, &sv, w);
  while (rc == 0)
    rc = tlc_engine_save_step(e, &sv, w, SIZE_MAX);
  return rc < 0 ? rc : 0;
}

void tlc__engine_set_ckpt_v1(tlc_engine_t *e, int on) {
  e->ckpt_v1 = on ? 1 : 0;
}

void tlc__engine_set_ckpt_version(tlc_engine_t *e, int version) {
  e->ckpt_v1 = version == 1 || version == 2 ? version : 0;
}

/* ---- load ---- */

static int load_layout(tlc_ckr_t *r) {
  uint32_t v[8];
  unsigned i;
  for (i = 0; i < 8; i++)
    v[i] = tlc_ckr_u32(r);
  if (r->err != 0)
    return TLC_EFRAME;
  if (v[0] != sizeof(erow_t) || v[1] != sizeof(act_t) || v[2] != sizeof(sarea_t) ||
      v[3] != sizeof(wbucket_t) || v[4] != sizeof(edist_t) || v[5] != sizeof(tlc_counters_t) ||
      v[6] != sizeof(tlc_ctxpack_t) || v[7] != 0x01020304u)
    return TLC_EVERSION; /* another build's layout or byte order */
  return 0;
}

/* The saved packing against `p` (the engine's): *same cleared when they differ. TLC_EFRAME on a
 * count past TLC_CTXPACK_MAX. */
static int load_pack(const tlc_ctxpack_t *p, tlc_ckr_t *r, int *same) {
  uint64_t idm = tlc_ckr_u64(r), stm = tlc_ckr_u64(r);
  uint8_t all = tlc_ckr_u8(r), n;
  int eq = idm == p->id_mask && stm == p->state_mask && (idm == 0 || all == p->stop_all);
  n = tlc_ckr_u8(r);
  if (n > TLC_CTXPACK_MAX)
    return TLC_EFRAME;
  eq = eq && (idm == 0 || n == p->nrun);
  for (unsigned i = 0; i < n; i++) {
    uint64_t v = tlc_ckr_u64(r);
    eq = eq && (idm == 0 || v == p->run[i]);
  }
  n = tlc_ckr_u8(r);
  if (n > TLC_CTXPACK_MAX)
    return TLC_EFRAME;
  eq = eq && (idm == 0 || n == p->nstop);
  for (unsigned i = 0; i < n; i++) {
    uint64_t v = tlc_ckr_u64(r);
    eq = eq && (idm == 0 || v == p->stop[i]);
  }
  *same = *same && eq;
  return 0;
}

static int load_opts(const tlc_engine_t *e, tlc_ckr_t *r) {
  uint32_t fmt = tlc_ckr_u32(r), ca, nw;
  uint8_t hca = tlc_ckr_u8(r);
  int64_t wn[TLC_MAX_WINDOWS];
  unsigned i;
  int same;
  ca = tlc_ckr_u32(r);
  nw = tlc_ckr_u32(r);
  if (r->err != 0 || nw > TLC_MAX_WINDOWS)
    return TLC_EFRAME;
  for (i = 0; i < nw; i++)
    wn[i] = tlc_ckr_i64(r);
  same = fmt == (uint32_t)e->fmt && hca == e->o.has_context_area &&
         (!hca || ca == e->o.context_area) && nw == e->o.nwindows;
  for (i = 0; same && i < nw; i++)
    same = wn[i] == e->o.window_ns[i];
  same = (tlc_ckr_u64(r) == e->o.max_areas) & same;
  same = (tlc_ckr_u64(r) == e->o.max_contexts) & same;
  same = (tlc_ckr_u64(r) == e->o.max_depth) & same;
  same = (tlc_ckr_u8(r) == e->o.histograms) & same;
  if (load_pack(&e->o.pack, r, &same) != 0 || r->err != 0)
    return TLC_EFRAME;
  return same ? 0 : TLC_EINVAL;
}

static int ht_insert(tlc_engine_t *e, uint64_t a, uint64_t b, uint32_t v) {
  size_t mask = e->hcap - 1, i = (size_t)tlc__engine_hmix(a, b) & mask;
  while (e->ht[i].a != 0) {
    if (e->ht[i].a == a && e->ht[i].b == b)
      return TLC_EFRAME; /* a key twice */
    i = (i + 1) & mask;
  }
  e->ht[i].a = a;
  e->ht[i].b = b;
  e->ht[i].v = v;
  e->hn++;
  return 0;
}

/* A rows-grow for the load (engine.c's rows_grow is private): the rows 64-byte aligned in a
 * block holding one row more. */
static int rows_alloc(tlc_engine_t *e, size_t n) {
  size_t cap = n + 1;
  unsigned char *raw = tlc_malloc(cap * sizeof(erow_t));
  if (raw == NULL)
    return TLC_ENOMEM;
  e->xt = tlc_calloc(n, sizeof(xrow_t));
  if (e->xt == NULL) {
    tlc_free(raw);
    return TLC_ENOMEM;
  }
  e->capxt = n;
  e->rows_raw = raw;
  e->rows = (erow_t *)(void *)(raw + (size_t)(-(uintptr_t)raw & 63u));
  e->caprows = n;
  return 0;
}

static int ctx_ok(const tlc_engine_t *e, uint32_t ci) {
  return ci == NONE32 || ci == DROP32 || ci < e->nctx;
}

/* The engine's counters, clock and per-core context indexes (checked with the contexts). */
static void load_head(tlc_engine_t *e, tlc_ckr_t *r) {
  tlc_ckr_bytes(r, &e->c, sizeof(e->c));
  e->seq = tlc_ckr_u64(r);
  e->tseq = tlc_ckr_u64(r);
  e->have_time = tlc_ckr_u8(r);
  if (e->have_time > TIME_FLAG)
    r->err = TLC_EFRAME;
  e->first = tlc_ckr_i64(r);
  e->last = tlc_ckr_i64(r);
  tlc_ckr_bytes(r, e->cur, sizeof(e->cur));
  tlc_ckr_bytes(r, e->corectx, sizeof(e->corectx));
}

/* The contexts (their stacks are checked against the rows in check_stacks, once those are
 * known); the per-core indexes must name one of them. */
static int load_contexts(tlc_engine_t *e, tlc_ckr_t *r) {
  size_t i;
  uint64_t n = tlc_ckr_u64(r);
  if (n > e->o.max_contexts || n >= DROP32 || !tlc_ckr_room(r, n, 34))
    return TLC_EFRAME;
  if (n > 0) {
    e->ctx = tlc_calloc((size_t)n, sizeof(*e->ctx));
    if (e->ctx == NULL)
      return TLC_ENOMEM;
    e->capctx = (size_t)n;
  }
  for (i = 0; i < n; i++) {
    ectx_t *c = &e->ctx[i];
    uint32_t depth;
    c->kind = tlc_ckr_u8(r);
    c->core = tlc_ckr_u8(r);
    c->key = tlc_ckr_u64(r);
    c->tindex = tlc_ckr_u32(r);
    c->in_count = tlc_ckr_u32(r);
    c->in_since = tlc_ckr_i64(r);
    c->in_acc = tlc_ckr_i64(r);
    depth = tlc_ckr_u32(r);
    e->nctx = i + 1; /* freed with the engine from here on */
    if (r->err != 0 || c->kind > TLC_CTXK_THREAD || depth > e->o.max_depth || c->in_count > 256 ||
        !tlc_ckr_room(r, depth, sizeof(act_t)))
      return TLC_EFRAME;
    if (depth > 0) {
      c->stack = tlc_malloc((size_t)depth * sizeof(act_t));
      if (c->stack == NULL)
        return TLC_ENOMEM;
      tlc_ckr_bytes(r, c->stack, (size_t)depth * sizeof(act_t));
      c->depth = c->cap = depth;
    }
  }
  for (i = 0; i < 256; i++)
    if (!ctx_ok(e, e->cur[i]) || (e->corectx[i] != NONE32 && e->corectx[i] >= e->nctx))
      return TLC_EFRAME;
  return 0;
}

/* The table-index map (tctx); it and the contexts' tindex must name each other. */
static int load_table_index(tlc_engine_t *e, tlc_ckr_t *r) {
  size_t i;
  uint64_t n = tlc_ckr_u64(r);
  if (n > e->nctx || !tlc_ckr_room(r, n, sizeof(uint32_t)))
    return TLC_EFRAME;
  if (n > 0) {
    e->tctx = tlc_malloc((size_t)n * sizeof(uint32_t));
    if (e->tctx == NULL)
      return TLC_ENOMEM;
    e->captctx = e->ntctx = (size_t)n;
    tlc_ckr_bytes(r, e->tctx, (size_t)n * sizeof(uint32_t));
  }
  for (i = 0; i < e->ntctx; i++)
    if (e->tctx[i] >= e->nctx || e->ctx[e->tctx[i]].tindex != i)
      return TLC_EFRAME;
  for (i = 0; i < e->nctx; i++)
    if (e->ctx[i].tindex != NONE32 &&
        (e->ctx[i].tindex >= e->ntctx || e->tctx[e->ctx[i].tindex] != i))
      return TLC_EFRAME;
  return 0;
}

/* The state areas (checked against the rows in check_stacks). */
static int load_state_areas(tlc_engine_t *e, tlc_ckr_t *r) {
  uint64_t n = tlc_ckr_u64(r);
  if (n >= NONE32 || !tlc_ckr_room(r, n, sizeof(sarea_t)))
    return TLC_EFRAME;
  if (n > 0) {
    e->sa = tlc_malloc((size_t)n * sizeof(sarea_t));
    if (e->sa == NULL)
      return TLC_ENOMEM;
    e->capsa = e->nsa = (size_t)n;
    tlc_ckr_bytes(r, e->sa, (size_t)n * sizeof(sarea_t));
  }
  return 0;
}

/* A row's window buckets, when the checkpoint has them (a flag byte, then the buckets). */
static int load_row_windows(tlc_engine_t *e, tlc_ckr_t *r, erow_t *row) {
  const size_t maxwb = (size_t)e->o.nwindows * NSTEPS;
  uint8_t hasw = tlc_ckr_u8(r);
  uint64_t fcount;
  edist_t f[NK];
  uint32_t nb, j;
  size_t cap;
  if (r->err != 0 || hasw > 1 || (hasw && e->o.nwindows == 0))
    return TLC_EFRAME;
  if (!hasw)
    return 0;
  fcount = tlc_ckr_u64(r);
  tlc_ckr_bytes(r, f, sizeof(f));
  nb = tlc_ckr_u32(r);
  if (r->err != 0 || nb > maxwb || !tlc_ckr_room(r, nb, sizeof(wbucket_t)))
    return TLC_EFRAME;
  cap = nb > e->o.nwindows ? nb : e->o.nwindows;
  row->w = tlc_malloc(sizeof(wrow_t) + cap * sizeof(wbucket_t));
  if (row->w == NULL)
    return TLC_ENOMEM;
  row->w->fcount = fcount;
  memcpy(row->w->f, f, sizeof(f));
  row->w->nb = nb;
  row->w->capb = (uint32_t)cap;
  tlc_ckr_bytes(r, row->w->b, (size_t)nb * sizeof(wbucket_t));
  for (j = 0; j < nb; j++)
    if (WB_WIN(&row->w->b[j]) >= e->o.nwindows)
      return TLC_EFRAME;
  e->win_bytes += sizeof(wrow_t) + cap * sizeof(wbucket_t);
  return 0;
}

/* The rows, each with its histograms and window buckets. */
static int load_rows(tlc_engine_t *e, tlc_ckr_t *r, int version) {
  size_t i;
  unsigned k;
  int rc;
  uint64_t n = tlc_ckr_u64(r);
  size_t per = sizeof(erow_t) + 1 +
               (version >= 3   ? sizeof(xrow_t)
                : version == 2 ? 2 * NK * sizeof(xat2_t)
                               : 0);
  if (n > e->o.max_areas || n >= NONE32 - 2 || !tlc_ckr_room(r, n, per))
    return TLC_EFRAME;
  if (n > 0 && (rc = rows_alloc(e, (size_t)n)) != 0)
    return rc;
  for (i = 0; i < n; i++) {
    erow_t *row = &e->rows[i];
    tlc_ckr_bytes(r, row, sizeof(*row));
    /* version 1 has no extremes' times: they stay unknown (known = 0, rows_alloc zeroes them) */
    if (version == 2) {
      xrow_t *x = &e->xt[i];
      for (k = 0; k < 2 * NK; k++) { /* no wall clock, no location: 0 (rows_alloc zeroes) */
        tlc_at_t *a = k < NK ? &x->mn[k] : &x->mx[k - NK];
        xat2_t o;
        tlc_ckr_bytes(r, &o, sizeof(o));
        a->start = o.start;
        a->end = o.end;
        a->seq_start = o.seq_start;
        a->seq_end = o.seq_end;
        a->epoch = o.epoch;
        a->known = o.known != 0;
      }
    } else if (version >= 3) {
      xrow_t *x = &e->xt[i];
      tlc_ckr_bytes(r, x, sizeof(*x));
      for (k = 0; k < NK; k++) {
        x->mn[k].known = x->mn[k].known != 0;
        x->mx[k].known = x->mx[k].known != 0;
      }
    }
    /* pointers from another process mean nothing: cleared before anything can use them */
    row->w = NULL;
    for (k = 0; k < NK; k++)
      memset(&row->k[k].h, 0, sizeof(row->k[k].h));
    e->nrows = i + 1;
    row->open = 0; /* recomputed from the stacks */
    row->link = NONE32;
    row->link_gen = NONE32;
    row->tap_mask = 0; /* whi is the interval's end (save_row); tap_regen asks the taps */
    row->slog = 0;     /* tap_regen sets it while the sample log is on */
    if (r->err != 0 || row->kind > TLC_ROW_STATE ||
        (row->ctx != NONE32 &&
         (row->kind != TLC_ROW_CODE || row->ctx >= e->nctx || e->ctx[row->ctx].tindex == NONE32)))
      return TLC_EFRAME;
    if (e->o.histograms)
      for (k = 0; k < NK; k++) {
        if ((rc = tlc__hist_load(&row->k[k].h, r)) != 0)
          return rc;
        e->hist_bytes += tlc__hist_bytes(&row->k[k].h);
      }
    if ((rc = load_row_windows(e, r, row)) != 0)
      return rc;
  }
  if (r->err != 0)
    return TLC_EFRAME;
  return 0;
}

/* The stacks: every activation names a code row of its context; rows count them. Every valid
 * state area names a state row. */
static int check_stacks(tlc_engine_t *e) {
  size_t i, j;
  for (i = 0; i < e->nctx; i++) {
    ectx_t *c = &e->ctx[i];
    for (j = 0; j < c->depth; j++) {
      act_t *a = &c->stack[j];
      if (a->row >= e->nrows || e->rows[a->row].kind != TLC_ROW_CODE || a->full > 1 ||
          a->running > 1)
        return TLC_EFRAME;
      a->handle = e->rows[a->row].handle;
      e->rows[a->row].open++;
    }
  }
  for (i = 0; i < e->nrows; i++)
    if (e->rows[i].open > 0)
      e->rows[i].out_active = 0; /* a row is outside only with nothing open */
  for (i = 0; i < e->nsa; i++) {
    sarea_t *s = &e->sa[i];
    if (s->valid > 1 || (s->valid && (s->row >= e->nrows || e->rows[s->row].kind != TLC_ROW_STATE)))
      return TLC_EFRAME;
  }
  return 0;
}

/* The hash table, sized as engine.c keeps it (load <= 1/2), every value checked by kind. */
static int load_hash(tlc_engine_t *e, tlc_ckr_t *r) {
  size_t i, cap = 64;
  uint64_t n = tlc_ckr_u64(r);
  if (!tlc_ckr_room(r, n, 20) || n > e->nrows + e->nsa + e->nctx)
    return TLC_EFRAME;
  while ((n + 1) * 2 > cap)
    cap *= 2;
  if (cap != e->hcap) {
    hent_t *nt = tlc_calloc(cap, sizeof(*nt));
    if (nt == NULL)
      return TLC_ENOMEM;
    tlc_free(e->ht);
    e->ht = nt;
    e->hcap = cap;
  }
  for (i = 0; i < n; i++) {
    uint64_t a = tlc_ckr_u64(r), b = tlc_ckr_u64(r);
    uint32_t v = tlc_ckr_u32(r);
    unsigned hk = (unsigned)(a >> 32) & 0xFFu;
    size_t lim;
    if (r->err != 0 || (a >> 40) != 1 || hk > HK_CTX)
      return TLC_EFRAME;
    lim = hk == HK_SAREA ? e->nsa : hk == HK_CTX ? e->nctx : e->nrows;
    if (v >= lim || ht_insert(e, a, b, v) != 0)
      return TLC_EFRAME;
  }
  return 0;
}

/* The body after the layout and options, section by section, each checked against the ones
 * before it; on an error the caller wipes what was read. */
static int load_body(tlc_engine_t *e, tlc_ckr_t *r, int version) {
  int rc;
  load_head(e, r);
  if ((rc = load_contexts(e, r)) != 0 || (rc = load_table_index(e, r)) != 0 ||
      (rc = load_state_areas(e, r)) != 0 || (rc = load_rows(e, r, version)) != 0 ||
      (rc = check_stacks(e)) != 0 || (rc = load_hash(e, r)) != 0)
    return rc;
  if (tlc_ckr_u32(r) != END_MAGIC || r->err != 0)
    return TLC_EFRAME;
  e->grp_nrows = (size_t)-1; /* the snapshot's grouping is rebuilt */
  return 0;
}

/* Back to a fresh engine after a failed load: whatever was read is freed, every index that
 * could name it is reset (a half-read state is never used). */
static void wipe(tlc_engine_t *e) {
  size_t i;
  unsigned k;
  for (i = 0; i < e->nrows; i++) {
    tlc_free(e->rows[i].w);
    for (k = 0; k < NK; k++)
      tlc__hist_fini(&e->rows[i].k[k].h);
  }
  for (i = 0; i < e->nctx; i++)
    tlc_free(e->ctx[i].stack);
  tlc_free(e->rows_raw);
  tlc_free(e->xt);
  tlc_free(e->ctx);
  tlc_free(e->tctx);
  tlc_free(e->sa);
  e->xt = NULL;
  e->capxt = 0;
  e->rows_raw = NULL;
  e->rows = NULL;
  e->ctx = NULL;
  e->tctx = NULL;
  e->sa = NULL;
  e->nrows = e->caprows = e->nctx = e->capctx = e->ntctx = e->captctx = e->nsa = e->capsa = 0;
  memset(e->ht, 0, e->hcap * sizeof(*e->ht));
  e->hn = 0;
  for (i = 0; i < 256; i++)
    e->cur[i] = e->corectx[i] = NONE32;
  memset(&e->c, 0, sizeof(e->c));
  e->seq = e->tseq = 0;
  e->have_time = 0;
  e->first = e->last = 0;
  e->hist_bytes = e->win_bytes = 0;
  e->hcur = e->hlog; /* queued samples name rows that are gone */
  tlc__engine_new_epoch(e);
}

void tlc_engine_clear(tlc_engine_t *e) {
  wipe(e);
  tlc__engine_acct_sync(e);
}

int tlc_engine_load(tlc_engine_t *e, tlc_ckr_t *r) {
  uint32_t magic;
  int rc;
  if (e->nrows != 0 || e->nctx != 0 || e->nsa != 0 || e->have_time || e->c.events != 0)
    return TLC_EINVAL; /* a fresh engine only */
  magic = tlc_ckr_u32(r);
  if (magic != SEC_MAGIC && magic != SEC_MAGIC2 && magic != SEC_MAGIC1)
    return TLC_EFRAME;
  if ((rc = load_layout(r)) != 0)
    return rc;
  if ((rc = load_opts(e, r)) != 0)
    return rc;
  rc = load_body(e, r, magic == SEC_MAGIC ? 3 : magic == SEC_MAGIC2 ? 2 : 1);
  if (rc != 0)
    wipe(e);
  tlc__engine_new_epoch(e);
  tlc__engine_tap_regen(e); /* restored rows carry another engine's tap generation */
  tlc__engine_acct_sync(e); /* the restored rows count in the memory budget like grown ones */
  return rc;
}
