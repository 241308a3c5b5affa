/* engine-int.h - the statistics engine's internal layout, shared by its files: engine.c (the
 * engine: events, lifecycle), acct.c (memory accounting), taps.c (the taps), slog.c (the sample
 * log), extremes.c (the extremes' times and places for the store), snapshot.c (the read side),
 * histread.c (the histograms' reads) and checkpoint.c (serialisation). Not a contract: only these
 * files and the engine's unit tests include it; every field's meaning and invariant is described
 * here and in engine.c's design note.
 */
#ifndef TLC_ENGINE_INT_H
#define TLC_ENGINE_INT_H

#include "engine/engine.h"
#include "engine/hist.h"

#include <stdint.h>

#define NK     TLC_NKINDS
#define NSTEPS 10
#define NONE32 0xFFFFFFFFu
#define DROP32 0xFFFFFFFEu /* a core whose current context could not be created (cap) */

/* Histogram samples are queued in a per-engine log and counted HLOG at a time (hlog_flush), with
 * the count of the entry HLOG_AHEAD places ahead prefetched: consecutive samples hit random
 * rows, and their counts are cache misses that the prefetches overlap. */
#define HLOG       4096
#define HLOG_AHEAD 32

/* tlc_engine_t.have_time: no event yet; T valid; T valid and the next event is the first after
 * a gap; T valid and the next event carries TLC_EVF_RESTART (the last two: it may restart the
 * clock, see engine.h). */
enum { TIME_NONE = 0, TIME_OK = 1, TIME_GAP = 2, TIME_FLAG = 3 };

enum { HK_CODE = 0, HK_DATA = 1, HK_STATE = 2, HK_SAREA = 3, HK_CTX = 4 };

/* A stream's mode, fixed per engine: M_CORE bin1x without context_area (contexts are cores,
 * always switched in), M_TASK bin1x with context_area, M_THREAD evlog (contexts are threads). The
 * push loop is inlined once with M_CORE as a constant (tlc_engine_push). */
enum { M_CORE = 0, M_TASK = 1, M_THREAD = 2 };
#if defined(__GNUC__)
#define TLC_HOT         inline __attribute__((always_inline))
#define TLC_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define TLC_LIKELY(x)   __builtin_expect(!!(x), 1)
#else
#define TLC_LIKELY(x)   (x)
#define TLC_HOT         inline
#define TLC_UNLIKELY(x) (x)
#endif

/* Code rows are found through a direct-mapped cache of row indexes (RCACHE slots, hashed from
 * handle and context) before the hash table: a hit costs one load in a 32 KB array and the check
 * of the row's handle and context, which the event reads next anyway. */
#define RCACHE_BITS 13
#define RCACHE      (1u << RCACHE_BITS)

/* A queued histogram sample: the histogram of kind hist % NK of row hist / NK, bucket; count:
 * its 16-bit count in the span when sample() found the bucket inside it, else NULL. */
typedef struct hlent {
  uint16_t *count;
  uint32_t hist;
  uint32_t bucket;
} hlent_t;

typedef struct edist {
  uint64_t n;
  int64_t sum, min, max;
  uint64_t sqhi, sqlo;
} edist_t;

typedef struct wkd {
  uint64_t n;
  int64_t sum, min, max;
} wkd_t;

typedef struct wbucket {
  int64_t step; /* floor(t / step of its window) of what it holds */
  uint64_t cw;  /* E/entry/write count in the step << 8 | its window (count < 2^56: a step
                   holds fewer events than that) */
  wkd_t k[NK];
} wbucket_t;

#define WB_WIN(b)   ((unsigned)((b)->cw & 0xFFu))
#define WB_COUNT(b) ((b)->cw >> 8)

/* A row's windows. The row's own dists d[] hold only the samples of its current interval
 * [lo, hi), which lies inside one step of every window (and, with count - fcount, its E/entry/
 * write count there): one accumulator per sample serves both the cumulative statistics and the
 * windows (the row keeps the interval's bounds, wlo and whi, so that the per-event check touches
 * only the row). When an event falls outside the interval, d[] is folded into f[] (the cumulative
 * statistics of every earlier interval) and into each window's bucket of that step.
 * The buckets are sparse: one per (window, step) in which the row had events, b[0, nb), grown
 * by one per window at a time (a fold is rare: at most once per row and step of the shortest
 * window, so the realloc is cheap and no bucket is wasted); a bucket whose step has left its window
 * (step <= floor(T / step) - NSTEPS) is reused. A window has at most NSTEPS steps inside it, so nb
 * stays
 * <= nwindows * NSTEPS; a row hit in every step costs what a ring would, and a row hit once a
 * minute (a million areas called now and then) costs one bucket per window instead of
 * nwindows * NSTEPS. */
typedef struct wrow {
  uint64_t fcount; /* the row's count at the last fold */
  edist_t f[NK];
  uint32_t nb, capb;
  wbucket_t b[]; /* capb of them, nb in use */
} wrow_t;

typedef struct act {
  uint32_t row;
  uint32_t handle;   /* the row's handle: S, R and X naming the innermost activation are matched
                        without touching the row */
  uint8_t full;      /* opened by E (samples at X), else partial */
  uint8_t running;   /* running (R/E seen after the last S) */
  int64_t start;     /* time of its first event */
  int64_t in_start;  /* IN(start) */
  int64_t run_start; /* IN(t) at the start of the current running period */
  int64_t net;       /* NET of closed running periods */
  uint64_t seq;      /* change sequence of its first event (the tap's seq_start) */
} act_t;

typedef struct ectx {
  uint8_t kind; /* enum tlc_ctx_kind */
  uint8_t core;
  uint64_t key;
  uint32_t tindex;   /* table index, NONE32 until its first code row */
  uint32_t in_count; /* cores on which it is current (context_area mode) */
  int64_t in_since, in_acc;
  act_t *stack;
  uint32_t depth, cap;
  uint64_t pad_; /* to 64 bytes (LP64): every event indexes the contexts with a shift */
} ectx_t;
_Static_assert(sizeof(void *) != 8 || sizeof(ectx_t) == 64, "a context is 64 bytes");

/* A sample kind of a row: its dist and its histogram's header, one 64-byte cache line (rows are
 * 64-byte aligned), so that a sample touches one line for both. */
typedef struct ekind {
  edist_t d;
  tlc_hist_t h; /* empty (and never used) when histograms are off */
} ekind_t;
_Static_assert(sizeof(ekind_t) == 64, "a sample kind of a row is one cache line");

/* Field order: what every code event touches first (the first cache line: handle .. whi), then
 * one line per sample kind, then the totals and what only data/state rows, snapshots and folds
 * use. Rows are 64-byte aligned (rows_grow) and their size is a multiple of 64 bytes. */
typedef struct erow {
  uint32_t handle;
  uint32_t ctx; /* internal context index (code rows), NONE32 otherwise */
  uint8_t kind; /* enum tlc_row_kind */
  uint8_t has_value;
  uint8_t has_last;   /* `last` valid for the next PERIOD sample */
  uint8_t out_active; /* outside since out_start */
  uint32_t open;      /* open activations */
  uint64_t count, seq;
  int64_t last, out_start;
  int64_t wlo, whi; /* w's current interval [wlo, whi) (kept here: the check is per event);
                       whi is INT64_MIN while tap_mask != 0 (tap_whi) */
  _Alignas(64) ekind_t k[NK];
  int64_t total[NK];
  uint64_t last_seq, out_seq; /* change sequence of the events at `last` and `out_start` (the
                                 tap's seq_start of PERIOD and OUTSIDE) */
  /* in the cache line of total[] and the sequences, which a sample's event touches anyway */
  uint8_t tap_mask;    /* kinds the tap wants of this row (engine.h: tlc_engine_tap_want_fn),
                          or TAP_ASK: not asked yet (a new row, a new tap); not 0: whi is
                          INT64_MIN, so that every event on the row fails the interval's check
                          and takes the out-of-line path, where the tap is served */
  uint8_t slog;        /* its samples go to the sample log (engine.h: tlc_engine_set_slog): 0
                          no, 1 yes, its key not yet given (a DEF mark first), 2 described */
  uint32_t tap_cookie; /* tap_want's cookie for this row */
  uint64_t state, anomalies, value, vmin, vmax;
  uint32_t link;     /* data rows: the mapping's state handle, NONE32 if none */
  uint32_t link_gen; /* mapping generation `link` was resolved in */
  wrow_t *w;         /* windows, or NULL before the row's first window sample */
  int64_t tap_whi;   /* the interval's end while tap_mask != 0 (whi then INT64_MIN) */
} erow_t;
_Static_assert(sizeof(erow_t) % 64 == 0, "rows stay 64-byte aligned in their array");
_Static_assert(sizeof(void *) != 8 || sizeof(erow_t) == 512, "a row is 512 bytes (engine.h)");

/* When each of a row's cumulative extremes was taken (stats.h: tlc_at_t), per sample kind: in an
 * array beside the rows (e->xt, same index), out of the rows' cache lines, since it is written
 * only when a sample makes a new MIN or MAX (sample(): a branch the dist's update takes anyway)
 * and read by snapshots and checkpoints. A row's MIN is its cumulative one: with windows, the
 * minimum of w->f[] (earlier intervals) and d[] (the current one). */
typedef struct xrow {
  tlc_at_t mn[NK], mx[NK];
} xrow_t;

/* A new cumulative extreme not yet handed to tlc_engine_xnew: row index, kind, 1 MAX 0 MIN. */
#define XNEW 16
typedef struct xnew {
  uint32_t row;
  uint8_t k, max;
} xnew_t;

typedef struct sarea {
  uint32_t handle;
  uint8_t valid; /* in a state */
  uint32_t row;  /* row of the current state */
  uint64_t cur;
  int64_t since;
  uint64_t since_seq; /* change sequence of the entry at `since` (the tap's seq_start) */
} sarea_t;

typedef struct hent {
  uint64_t a, b; /* a == 0: empty */
  uint32_t v;
  uint32_t pad_;
} hent_t;

/* A code row in the snapshot's grouping by area (then context index). */
typedef struct grp {
  uint32_t handle, tindex, row;
} grp_t;

struct tlc_engine {
  tlc_format_t fmt;
  tlc_engine_opts_t o;
  uint8_t ctxmode;
  uint8_t packed; /* o.pack's masks are set: context_area values are packed (formats/rtos.h) */
  uint32_t map_gen;
  uint64_t epoch; /* tlc_engine_epoch: new at creation, clear, load, set_mapping */
  int64_t step[TLC_MAX_WINDOWS];
  int64_t wcache_lo[TLC_MAX_WINDOWS], wcache_s[TLC_MAX_WINDOWS]; /* step cache for push */
  hent_t *ht;
  size_t hcap, hn;
  erow_t *rows; /* 64-byte aligned inside rows_raw (rows_grow) */
  void *rows_raw;
  size_t nrows, caprows;
  xrow_t *xt; /* the rows' extremes' times: xt[i] is rows[i]'s, capxt >= caprows */
  size_t capxt;
  int64_t wall_ms; /* tlc_engine_set_wall_ms: stamped on new extremes (0: not known) */
  xnew_t xq[XNEW]; /* new extremes since the last tlc_engine_xnew (beyond XNEW: not listed) */
  uint32_t nxq;
  sarea_t *sa;
  size_t nsa, capsa;
  ectx_t *ctx;
  size_t nctx, capctx;
  uint32_t *tctx; /* table index -> internal context */
  size_t ntctx, captctx;
  uint32_t cur[256];       /* context_area mode: current context per core (NONE32: core unseen) */
  uint32_t corectx[256];   /* no context_area: context of each core, NONE32 until created */
  uint32_t rcache[RCACHE]; /* code row of (handle, context) at rcache_slot, or any value */
  tlc_counters_t c;
  uint64_t seq, tseq; /* tseq: seq when T last grew */
  int have_time;      /* TIME_* */
  int64_t first, last;
  size_t hist_bytes, win_bytes;
  size_t charged;       /* bytes charged to the accounting hook (== tlc_engine_mem().bytes) */
  hlent_t *hlog;        /* queued histogram samples (hlog_flush): hlog[0, hcur - hlog) */
  hlent_t *hcur, *hend; /* the next entry; hlog + HLOG (full) */
  /* the sample log (engine.h: tlc_engine_set_slog): slog[0, scur - slog) queued; send: full */
  tlc_engine_slog_fn slog_fn;
  void *slog_ud;
  tlc_engine_slent_t *slog, *scur, *send;
  int pushing; /* inside tlc_engine_push: its end hands the log over (tlc_engine_slog_note) */
  /* snapshot scratch kept between snapshots: the code rows grouped by area for the Neutral
   * merge (rebuilt when rows were added or a row got its context: grp_nrows, grp_gen), which
   * rows changed, and the engine row -> table row map */
  grp_t *grp;
  size_t ngrp, capgrp, grp_nrows;
  uint64_t ctxgen, grp_gen; /* ctxgen: incremented whenever a row gets its context */
  uint32_t *smap;
  uint8_t *schg;
  size_t capsmap, capschg;
  /* every row in table order (handle, context index, state; tlc_table_sort), for snapshots
   * without Neutral rows: filled in that order (no row sort) and a part's rows found by binary
   * search (no scan of the others). Valid while ord_nrows == nrows, ord_gen == ctxgen and
   * ord_epoch == epoch (rows are only appended; a row's key changes only when it gets its
   * context; clear and load take a new epoch). */
  uint32_t *ord;
  size_t capord, ord_nrows;
  uint64_t ord_gen, ord_epoch;
  int ord_off; /* tests (tlc__engine_set_ord_off): the row order index is not used */
  /* the taps (tlc_engine_add_tap): taps[0, ntaps). o.tap, o.tap_want and o.tap_ud mirror
   * taps[0] when ntaps == 1 (one tap costs what it always did); with several, o.tap is only
   * "some tap" for the hot path's test, a row's tap_mask is the union of the taps' masks and
   * tapx[row] keeps each tap's own mask and cookie (grown in tap_ask, capped by the rows) */
  struct etap {
    tlc_engine_tap_fn fn;
    tlc_engine_tap_want_fn want;
    tlc_engine_tap_band_fn band; /* NULL: none */
    void *ud;
  } taps[TLC_ENGINE_TAPS];
  unsigned ntaps;
  struct etapx {
    uint8_t mask[TLC_ENGINE_TAPS];
    uint32_t cookie[TLC_ENGINE_TAPS];
  } * tapx;
  size_t captapx;
  /* the bands of the one tap (engine.h: tlc_engine_tap_band_fn): tband[row].k[kind], the values the
   * tap would ignore; a row's samples of kind k inside [lo, hi] are not handed to it (tap_sample).
   * Written at every ask of a row below captband (an empty band when there is none, lo
   * INT64_MIN and w 0, which no sample matches since samples are >= 0:
   * several taps, no band function, a kind without one); grown in tap_ask, to the highest row
   * asked with a band (not beyond the rows), new entries empty; a row beyond captband has no
   * band. */
  struct etband {
    struct {
      int64_t lo;
      uint64_t w; /* hi - lo: v is inside when (uint64_t)v - lo <= w, one compare */
    } k[NK];
  } * tband;
  size_t captband;
  int ckpt_v1; /* tests (tlc__engine_set_ckpt_version): saves write version 1 (no extremes'
                 times) or 2 (no wall clock nor location); 0: the current one */
};

/* Tests only: on = 1 makes e's snapshots and splits do without the row order index (e->ord),
 * as they do when it cannot be built (out of memory), with Neutral rows (snapshots) and while it
 * is stale (splits): rows sorted after the copy, splits by a heap over every row. The test
 * compares both ways (test_engine_budget). */
void tlc__engine_set_ord_off(tlc_engine_t *e, int on);

/* Tests only: on = 1 makes e's checkpoints version 1 (ENG1: the rows without their extremes'
 * times), as a build before version 2 wrote them, so that a test can check how they load
 * (test_engine_checkpoint). */
void tlc__engine_set_ckpt_v1(tlc_engine_t *e, int on);
/* Tests only: the same for version 1 or 2 (ENG2: extremes' times without wall clock and
 * location); any other value: the current version. */
void tlc__engine_set_ckpt_version(tlc_engine_t *e, int version);

/* The hash table's mixing and keys (engine.c's hfind/hput use the same). */
static inline uint64_t tlc__engine_hmix(uint64_t a, uint64_t b) {
  uint64_t z = a * 0x9E3779B97F4A7C15ull ^ (b + 0x632BE59BD9B4E019ull);
  z = (z ^ (z >> 29)) * 0xBF58476D1CE4E5B9ull;
  return z ^ (z >> 32);
}

#define TAP_ASK 0x80u
/* The end of r's interval [wlo, whi) (whi is INT64_MIN while a tap watches r: tap_whi). */
static inline int64_t tlc__engine_whi(const erow_t *r) {
  return r->tap_mask ? r->tap_whi : r->whi;
}
/* ---- the taps (taps.c), called from engine.c's push loop and checkpoint.c's load ---- */

/* Makes every row ask the tap again which kinds it wants (a new tap, a load; rows loaded with
 * tap_mask 0 and their interval's end in whi): O(rows). */
void tlc__engine_tap_regen(tlc_engine_t *e);
/* Calls every tap, whatever it wants, with a mark of kind k (engine.h: TLC_TAP_GAP,
 * TLC_TAP_WALL) at target time t carrying value. Only with a tap (e->o.tap != NULL). */
void tlc__engine_tap_mark(tlc_engine_t *e, unsigned k, int64_t t, int64_t value);
/* Calls each tap that wants kind k of row r (r->tap_mask has bit k) with a sample of value v
 * that started at `start` (the event of change sequence seq_start) and closed at `end` (the
 * current event), with its cookie (engine.h: tlc_engine_sample_t), and tags the sample in the
 * log when the taps answer n > 0 (tlc__engine_slog_tag). Out of line: an engine without a tap
 * pays one predicted branch per sample. */
void tlc__engine_tap_emit(tlc_engine_t *e, erow_t *r, unsigned k, int64_t v, int64_t start,
                          uint64_t seq_start, int64_t end);
/* Asks the taps which kinds of r they want (engine.h: tap_want), sets r->tap_mask (and r->whi
 * back to its interval's end when none wants any) and returns it. With several taps it keeps
 * each one's mask and cookie in e->tapx (grown to the rows' capacity, charged as
 * TLC_ACCT_GROW; without memory it returns 0 and leaves TAP_ASK, asked again at the row's next
 * sample). Only with a tap. */
unsigned tlc__engine_tap_ask(tlc_engine_t *e, erow_t *r);
/* r's tap_mask with TAP_ASK set, answered: by the taps (tlc__engine_tap_ask) or, without any, 0. */
unsigned tlc__engine_tap_resolve_ask(tlc_engine_t *e, erow_t *r);
/* r's tap_mask with TAP_ASK answered. Inline: a watched row's every event asks. */
static inline unsigned tlc__engine_tap_resolve(tlc_engine_t *e, erow_t *r) {
  if (TLC_LIKELY(!(r->tap_mask & TAP_ASK)))
    return r->tap_mask;
  return tlc__engine_tap_resolve_ask(e, r);
}
/* The tap's call for sample (k < NK, v) of row r, unless v is inside r's band of kind k
 * (e->tband): a sample every budget would pass costs a compare, not a call. Only where r's
 * tap_mask has bit k. */
static inline void tlc__engine_tap_sample(tlc_engine_t *e, erow_t *r, unsigned k, int64_t v,
                                          int64_t start, uint64_t seq_start, int64_t end) {
  size_t ri = (size_t)(r - e->rows);
  if (ri < e->captband && (uint64_t)v - (uint64_t)e->tband[ri].k[k].lo <= e->tband[ri].k[k].w)
    return;
  tlc__engine_tap_emit(e, r, k, v, start, seq_start, end);
}
/* Takes a new tlc_engine_epoch for e (its state is not one an exporter has seen). */
void tlc__engine_new_epoch(tlc_engine_t *e);

/* ---- shared by engine.c (the write side) and snapshot.c (the read side) ---- */

static inline int64_t floordiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0)))
    q--;
  return q;
}

/* ---- time arithmetic ----
 * Event times are whatever a target sends: a reboot to 0, a jump by hours, a 64-bit timer that
 * wraps. A difference or a running sum may not fit in int64_t, and signed overflow is undefined,
 * so every time difference and every accumulated total goes through these: a saturated
 * difference keeps its sign (a wrap backwards is a negative duration: 0 and an anomaly, SPEC
 * section 2), a saturated sum stops at INT64_MAX (or INT64_MIN). */
static inline int64_t tsub(int64_t a, int64_t b) {
#if defined(__GNUC__)
  int64_t d;
  if (TLC_UNLIKELY(__builtin_sub_overflow(a, b, &d))) /* one sub and a flag test */
    return b < 0 ? INT64_MAX : INT64_MIN;
  return d;
#else
  if (b < 0 ? a > INT64_MAX + b : a < INT64_MIN + b)
    return b < 0 ? INT64_MAX : INT64_MIN;
  return a - b;
#endif
}

static inline int64_t tadd(int64_t a, int64_t b) {
#if defined(__GNUC__)
  int64_t s;
  if (TLC_UNLIKELY(__builtin_add_overflow(a, b, &s)))
    return b > 0 ? INT64_MAX : INT64_MIN;
  return s;
#else
  if (b > 0 ? a > INT64_MAX - b : a < INT64_MIN - b)
    return b > 0 ? INT64_MAX : INT64_MIN;
  return a + b;
#endif
}

static inline int64_t nonneg(int64_t v) {
  return v < 0 ? 0 : v;
}

/* Merges count, sum, min and max of (bn, bsum, bmin, bmax) into *n, *sum, *min, *max: the part
 * that every distribution kind here (edist_t, wkd_t, tlc_wdist_t) shares. */
static inline void nsmm_merge(uint64_t *n, int64_t *sum, int64_t *min, int64_t *max, uint64_t bn,
                              int64_t bsum, int64_t bmin, int64_t bmax) {
  if (bn == 0)
    return;
  if (*n == 0 || bmin < *min)
    *min = bmin;
  if (*n == 0 || bmax > *max)
    *max = bmax;
  *n += bn;
  *sum = tadd(*sum, bsum);
}

static inline void edist_merge(edist_t *a, const edist_t *b) {
  if (b->n == 0)
    return;
  nsmm_merge(&a->n, &a->sum, &a->min, &a->max, b->n, b->sum, b->min, b->max);
  a->sqlo += b->sqlo;
  a->sqhi += b->sqhi + (a->sqlo < b->sqlo);
}

/* The last step of window i that is no longer in it at time T: floor(T / step) - NSTEPS. */
static inline int64_t wlim(const tlc_engine_t *e, unsigned i) {
  int64_t s = floordiv(e->last, e->step[i]);
  return s < INT64_MIN + NSTEPS ? INT64_MIN : s - NSTEPS;
}

/* IN(t) of context c (ctxmode: e->ctxmode, a constant in the specialised push loop) */
static inline int64_t ctx_in(int ctxmode, const ectx_t *c, int64_t t) {
  if (!ctxmode)
    return t;
  return tadd(c->in_acc, c->in_count ? tsub(t, c->in_since) : 0);
}

/* ---- memory accounting (engine.h: tlc_engine_acct_t; acct.c) ----
 * e->charged is what the hook holds for e: every growth is charged before it is made and every
 * release given back after, so that it equals tlc_engine_mem().bytes. take and give are inline:
 * the push loop's growth paths and the histogram log's flush use them. */

/* Charges n bytes of kind (engine.h: TLC_ACCT_*) to the hook: 0, or the hook's refusal (< 0,
 * nothing charged); TLC_ACCT_FORCE is charged whatever the hook answers. */
static inline int tlc__engine_acct_take(tlc_engine_t *e, size_t n, int kind) {
  if (e->o.acct.charge_cb != NULL) {
    int r = e->o.acct.charge_cb(e->o.acct.ud, n, kind);
    if (r < 0 && kind != TLC_ACCT_FORCE)
      return r;
  }
  e->charged += n;
  return 0;
}

/* Gives n charged bytes back to the hook. */
static inline void tlc__engine_acct_give(tlc_engine_t *e, size_t n) {
  e->charged -= n;
  if (e->o.acct.release_cb != NULL && n > 0)
    e->o.acct.release_cb(e->o.acct.ud, n);
}

/* tlc_grow (same contract) with the growth charged first to the engine's accounting as `kind`:
 * the doubled capacity, or, when the hook refuses it, need plus an eighth. */
void *tlc__engine_grow(tlc_engine_t *e, void *p, size_t *cap, size_t need, size_t elem,
                       size_t first, int kind);
/* Charges or releases the difference between the engine's memory (tlc_engine_mem) and what the
 * accounting hook holds for it, as TLC_ACCT_FORCE: after a checkpoint load or a clear, which
 * allocate and free outside the engine's own growth paths. */
void tlc__engine_acct_sync(tlc_engine_t *e);
/* Counts the histogram samples queued in the engine's log (engine.c). */
void tlc__engine_hlog_flush(tlc_engine_t *e);
/* The code row of (handle, internal context ci) through the hash table, or NONE32 (engine.c;
 * histread.c's lookup by handle). */
uint32_t tlc__engine_code_row(const tlc_engine_t *e, uint32_t handle, uint32_t ci);

/* ---- the sample log (engine.h: tlc_engine_set_slog; slog.c) ----
 * The push loop appends samples inline (engine.c: slog_add); the hand-off to the log's
 * function, the marks, the rows' keys, the taps' tags and setting the log are slog.c's. */

/* Hands the sample log's entries to its function (slog.c). */
void tlc__engine_slog_flush(tlc_engine_t *e);
/* Appends a mark (engine.h: TLC_SLOG_EPOCH, TLC_SLOG_ROWS: then every row is described again)
 * to the sample log when it is on (slog.c). */
void tlc__engine_slog_mark(tlc_engine_t *e, uint32_t mark, int64_t value);
/* Row r's key (a DEF mark) before its first entry since the last ROWS mark (r->slog == 1; room
 * made by the caller): out of line, once per row and ROWS mark (slog.c). */
void tlc__engine_slog_def(tlc_engine_t *e, erow_t *r);
/* tlc__engine_slog_tag's other cases: r not described, the block full, outside a push, r not
 * named by the log (slog.c). */
void tlc__engine_slog_tag_slow(tlc_engine_t *e, erow_t *r, unsigned k, unsigned n, int64_t end);

/* The sample log's entries of one event on a row come in a group of at most SLOG_GROUP (a DEF
 * mark and two entries, of up to three samples); the block is handed over before a group when it
 * has less room than that, so that no hand-off (which may start the log over, every row not
 * described) comes inside a group, between a row's DEF and its samples. */
#define SLOG_GROUP 4
/* Makes room for a group (engine.c's samples, slog.c's marks): inline, one predicted branch. */
static inline void slog_room(tlc_engine_t *e) {
  if (TLC_UNLIKELY(e->send - e->scur < SLOG_GROUP))
    tlc__engine_slog_flush(e);
}

/* The tag's entry at the log's end (room, r described: the caller's). */
static inline void tlc__engine_slog_put_tag(tlc_engine_t *e, const erow_t *r, unsigned k,
                                            unsigned n, int64_t end) {
  tlc_engine_slent_t *l = e->scur++;
  l->rk = TLC_SLOG_TAG;
  l->aux = (uint32_t)(r - e->rows);
  l->value = (int64_t)((uint64_t)n << 8 | k);
  l->end = end;
}
/* A tag (engine.h: TLC_SLOG_TAG) of row r's sample of kind k closed at `end`, the taps' answer n
 * (> 0), when the log is on (e->slog != NULL: the caller's test) and names r. Inline for the
 * usual case (taps.c, per sample a tap answered for: a budget violation): r described, room in
 * the block, during a push: one entry's stores. */
static inline void tlc__engine_slog_tag(tlc_engine_t *e, erow_t *r, unsigned k, unsigned n,
                                        int64_t end) {
  if (TLC_UNLIKELY(r->slog != 2 || e->scur == e->send || !e->pushing)) {
    tlc__engine_slog_tag_slow(e, r, k, n, end);
    return;
  }
  tlc__engine_slog_put_tag(e, r, k, n, end);
}

#endif
