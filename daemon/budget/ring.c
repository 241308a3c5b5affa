/* ring.c - each budget's ring of kept violations (budget.h: opts.keep): the last keep
 * violations of the budget, oldest first, as tlc_bwatch_recent, tlc_bwatch_find, the
 * locations and the checkpoint read them.
 *
 * A slot is compact (vslot_t, 64 bytes, one cache line: its head through its counter, its
 * location in loc[] once set) or whole (VS_WIDE: the record in wide[], with its count and
 * seq_end in the slot for the searches). The ring and its side arrays are allocated at their
 * first use, each of keep entries: at most keep x (64 + 128 + 32) bytes per budget.
 *
 * Invariants (budget-int.h: bstate_t): ring is NULL or keep slots, rn <= keep of them used, the
 * oldest at (rhead + keep - rn) % keep; a slot with VS_WIDE has its record in wide[k], one
 * with VS_LOC its location in loc[k].
 *
 * Cost: O(1) per slot; widening a ring is O(keep).
 *
 * Does not: write the storm's compact slots (budget.c's violate does, inline through
 * budget-int.h's slot_stream), count violations or pick the worst.
 */
#include "budget/budget-int.h"
#include "budget/budget.h"

#include "base/alloc.h"

#include <stdint.h>
#include <string.h>

/* Frees b's ring and its side arrays. */
void tlc__budget_ring_free(bstate_t *b) {
  tlc_free(b->ring_mem);
  tlc_free(b->wide);
  tlc_free(b->loc);
  b->ring = NULL;
  b->ring_mem = NULL;
  b->wide = NULL;
  b->loc = NULL;
}

/* b's ring of keep slots (not zeroed), aligned to 64 bytes; NULL without memory. */
vslot_t *tlc__budget_ring_alloc(bstate_t *b, size_t keep) {
  uint8_t *p = tlc_malloc(keep * sizeof(vslot_t) + 63);
  if (p == NULL)
    return NULL;
  b->ring_mem = p;
  b->ring = (vslot_t *)(void *)(p + (64 - (uintptr_t)p % 64) % 64);
  return b->ring;
}

/* Keeps v whole in slot k of b's ring. 0, or -1 without memory (the slot unchanged). */
int tlc__budget_slot_put_wide(bstate_t *b, size_t keep, size_t k, const tlc_violation_t *v) {
  if (b->wide == NULL && (b->wide = tlc_malloc(keep * sizeof(*b->wide))) == NULL)
    return -1;
  b->wide[k] = *v;
  b->ring[k].count = v->count;
  b->ring[k].seq_end = v->seq_end;
  b->ring[k].bits = VS_WIDE;
  return 0;
}

/* The violation in slot k of b's ring, whole, into *v. */
void tlc__budget_slot_get(const tlc_bwatch_t *w, const bstate_t *b, size_t k, tlc_violation_t *v) {
  const vslot_t *x = &b->ring[k];
  const cnt_t *c;
  if (x->bits & VS_WIDE) {
    *v = b->wide[k];
    return;
  }
  c = &w->c[x->ci];
  memset(v, 0, sizeof(*v));
  v->budget = c->bi;
  v->handle = c->handle;
  v->context = c->context;
  v->row_kind = c->row_kind;
  v->stat = b->def.stat;
  v->over = (x->bits & VS_OVER) != 0;
  v->state = c->state;
  v->value = x->value;
  v->limit = v->over ? b->hi : b->lo;
  v->start = x->start;
  v->end = x->end;
  v->epoch = x->bits & (VS_EPOCHS - 1);
  v->wall_ms = x->wall_ms;
  v->seq_start = x->seq_start;
  v->seq_end = x->seq_end;
  v->count = x->count;
  if (x->bits & VS_LOC) {
    v->seg_first = b->loc[k][0];
    v->off_first = b->loc[k][1];
    v->seg_last = b->loc[k][2];
    v->off_last = b->loc[k][3];
  }
}

/* The stored location of slot k into loc[0..3] (zeros when none). */
void tlc__budget_slot_loc(const bstate_t *b, size_t k, uint64_t loc[4]) {
  const vslot_t *x = &b->ring[k];
  if (x->bits & VS_WIDE) {
    loc[0] = b->wide[k].seg_first;
    loc[1] = b->wide[k].off_first;
    loc[2] = b->wide[k].seg_last;
    loc[3] = b->wide[k].off_last;
  } else if (x->bits & VS_LOC) {
    memcpy(loc, b->loc[k], sizeof(b->loc[k]));
  } else {
    loc[0] = loc[1] = loc[2] = loc[3] = 0;
  }
}

/* Sets the stored location of slot k. 1, or 0 without memory. */
int tlc__budget_slot_set_loc(bstate_t *b, size_t keep, size_t k, const uint64_t loc[4]) {
  vslot_t *x = &b->ring[k];
  if (x->bits & VS_WIDE) {
    b->wide[k].seg_first = loc[0];
    b->wide[k].off_first = loc[1];
    b->wide[k].seg_last = loc[2];
    b->wide[k].off_last = loc[3];
    return 1;
  }
  if (b->loc == NULL && (b->loc = tlc_malloc(keep * sizeof(*b->loc))) == NULL)
    return 0;
  memcpy(b->loc[k], loc, sizeof(b->loc[k]));
  x->bits |= VS_LOC;
  return 1;
}

/* Makes every slot of b's ring whole (before its counters are renumbered, or its budget
 * moved, by a reload). 0, or -1 without memory (what was done stays valid). */
int tlc__budget_ring_widen(const tlc_bwatch_t *w, bstate_t *b) {
  tlc_violation_t v;
  for (size_t j = 0; b->ring != NULL && j < b->rn; j++) {
    size_t k = (b->rhead + w->o.keep - b->rn + j) % w->o.keep;
    if (b->ring[k].bits & VS_WIDE)
      continue;
    tlc__budget_slot_get(w, b, k, &v);
    if (tlc__budget_slot_put_wide(b, w->o.keep, k, &v) != 0)
      return -1;
  }
  return 0;
}
