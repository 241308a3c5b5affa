/* budget-int.h - the budget watch's internal layout, shared by its files: budget.c (the watch:
 * budgets, rows, counters, the tap and its violations, save and load) and ring.c (each budget's
 * ring of kept violations). Not a contract: only these files include it.
 */
#ifndef TLC_BUDGET_INT_H
#define TLC_BUDGET_INT_H

#include "budget/budget.h"

#include "base/htab.h"

#include <stddef.h>
#include <stdint.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

/* A kept violation in its budget's ring: 64 bytes, one cache line (the ring is aligned to
 * them), where the whole record (tlc_violation_t) takes two: a storm writes one line per
 * violation and cycles through half the memory. Its head (budget, area, context, row kind,
 * state) is its counter's (ci), its stat its budget's, its limit its budget's max (VS_OVER)
 * or min, its stored location, once set, in the budget's loc[] (VS_LOC). A violation that
 * does not fit (no counter: a dropped key; an epoch of VS_EPOCHS or more; one taken back from
 * a checkpoint or kept across a reload) is kept whole in the budget's wide[] (VS_WIDE; its
 * count and seq_end in the slot too, for the searches). */
typedef struct vslot {
  int64_t value, start, end;
  uint64_t seq_start, seq_end, count;
  int64_t wall_ms;
  uint32_t ci;   /* its counter (cnt_t) */
  uint32_t bits; /* VS_WIDE, VS_OVER, VS_LOC | its epoch */
} vslot_t;
_Static_assert(sizeof(vslot_t) == 64, "a ring slot is one cache line");

#define VS_WIDE   0x80000000u
#define VS_OVER   0x40000000u
#define VS_LOC    0x20000000u
#define VS_EPOCHS 0x20000000u /* epochs below it fit in bits */

/* A budget of the watch: its definition, limits, total, ring of kept violations and worst. */
typedef struct bstate {
  /* the one line a violation reads and writes (bs is 64-byte aligned: budget.c's lines_alloc,
   * and the struct a multiple of 64): what a sample is tested against (a value above hi or
   * below lo breaks it: INT64_MAX without a max, INT64_MIN without a min), the count, the ring
   * and the worst's distance from its limit (when has_worst) */
  _Alignas(64) int64_t hi;
  int64_t lo;
  uint64_t total;
  vslot_t *ring;    /* keep of them, allocated at the first violation, not zeroed */
  size_t rn, rhead; /* used, next slot */
  int64_t worst_dist;
  int has_worst;
  void *ring_mem;        /* ring's allocation (ring: its first 64-byte boundary) */
  tlc_violation_t *wide; /* keep, at the first VS_WIDE slot: their whole records */
  uint64_t (*loc)[4];    /* keep, at the first VS_LOC slot: seg_first, off_first, seg_last,
                            off_last */
  tlc_violation_t worst;
  tlc_tbudget_t def;
} bstate_t;

/* A watched row and a budget's match on it (budget.c's). */
typedef struct rowent rowent_t;
typedef struct match match_t;

/* A (budget, row) that had a violation: its count. A compact slot names its violation's
 * budget and row through its counter (vslot_t.ci). */
typedef struct cnt {
  uint32_t bi, handle, context;
  uint8_t row_kind;
  uint64_t state;
  uint64_t count;
} cnt_t;

/* The watch (budget.h: tlc_bwatch_t). */
struct tlc_bwatch {
  char target[256];
  tlc_bwatch_opts_t o;
  bstate_t *bs;
  size_t nb;
  uint64_t serial; /* this watch's budgets' in the process (tlc_bwatch_key) */
  rowent_t *rows;
  size_t nrows, caprows;
  match_t *m;
  size_t nm, capm;
  tlc_htab_t rowh; /* hash(row key) -> rows index */
  cnt_t *c;
  size_t nc, capc;
  tlc_htab_t cnth; /* hash(budget, row key) -> c index */
  uint64_t dropped_keys, all;
  tlc_violation_t scratch; /* a violation's whole record when it does not fit a ring slot */
  /* the wall clock of the samples now coming (TLC_TAP_WALL: the engine's chunk), 0 when not
   * known (then read per violation); unused with opts.wall_ms */
  int64_t wall;
};

/* ---- the rings of kept violations (ring.c) ----
 * A budget's ring holds the last opts.keep violations, oldest first from
 * (rhead + keep - rn) % keep; slots are compact (vslot_t) or whole (VS_WIDE: wide[]). The
 * storm's path writes a compact slot inline (slot_stream); everything else is out of line. */

/* Frees b's ring and its side arrays (ring NULL after). */
void tlc__budget_ring_free(bstate_t *b);
/* Allocates b's ring of keep slots (not zeroed: a slot's every field is written), aligned to
 * 64 bytes: b->ring, or NULL without memory. */
vslot_t *tlc__budget_ring_alloc(bstate_t *b, size_t keep);
/* Keeps v whole in slot k of b's ring (wide[] allocated at the first). 0, or -1 without memory
 * (the slot unchanged). */
int tlc__budget_slot_put_wide(bstate_t *b, size_t keep, size_t k, const tlc_violation_t *v);
/* The violation in slot k of b's ring, whole, into *v (a compact slot's head from its counter
 * in w). */
void tlc__budget_slot_get(const tlc_bwatch_t *w, const bstate_t *b, size_t k, tlc_violation_t *v);
/* The stored location of slot k into loc[0..3] (zeros when none). */
void tlc__budget_slot_loc(const bstate_t *b, size_t k, uint64_t loc[4]);
/* Sets the stored location of slot k (loc[] allocated at the first). 1, or 0 without memory. */
int tlc__budget_slot_set_loc(bstate_t *b, size_t keep, size_t k, const uint64_t loc[4]);
/* Makes every slot of b's ring whole (before its counters are renumbered, or its budget
 * moved, by a reload). 0, or -1 without memory (what was done stays valid). */
int tlc__budget_ring_widen(const tlc_bwatch_t *w, bstate_t *b);

/* Writes slot x, one aligned cache line, whole: on x86-64 with non-temporal stores, which
 * write the line without reading it first and leave the caches to the engine (a storm
 * writes a line per violation, round every budget's ring). The watch's own thread reads
 * it back (its stores are ordered for it), nothing else does. */
static inline void slot_stream(vslot_t *x, const tlc_engine_sample_t *s, uint64_t count,
                               int64_t wall, uint32_t ci, uint32_t bits) {
#if defined(__SSE2__)
  __m128i *p = (__m128i *)(void *)x;
  _mm_stream_si128(p, _mm_set_epi64x(s->start, s->value));
  _mm_stream_si128(p + 1, _mm_set_epi64x((int64_t)s->seq_start, s->end));
  _mm_stream_si128(p + 2, _mm_set_epi64x((int64_t)count, (int64_t)s->seq_end));
  _mm_stream_si128(p + 3, _mm_set_epi64x((int64_t)((uint64_t)bits << 32 | ci), wall));
#else
  x->value = s->value;
  x->start = s->start;
  x->end = s->end;
  x->seq_start = s->seq_start;
  x->seq_end = s->seq_end;
  x->count = count;
  x->wall_ms = wall;
  x->ci = ci;
  x->bits = bits;
#endif
}

/* The slot of j-th kept violation of b (0: the oldest). */
static inline size_t kept_slot(const tlc_bwatch_t *w, const bstate_t *b, size_t j) {
  return (b->rhead + w->o.keep - b->rn + j) % w->o.keep;
}

#endif
