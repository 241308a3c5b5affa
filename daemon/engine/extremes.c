/* extremes.c - when and where the rows' cumulative extremes were taken, for the store
 * (engine.h: tlc_engine_set_wall_ms, tlc_engine_xnew, tlc_engine_xlocate; stats.h: tlc_at_t):
 * the wall clock new extremes are stamped with, the list of extremes made new since the store
 * last asked, and their location in storage once the store has written their events.
 *
 * Invariant: an extreme is located only while it is still the one its tlc_engine_xnew entry
 * names (same engine epoch, same change sequences): a later extreme of the row replaced it.
 *
 * Cost: O(1) per call; xnew is O(XNEW).
 *
 * Does not: find new extremes (engine.c's sample() and ext_note do, as samples close, and queue
 * them in e->xq), or know the store's files (a location is four numbers the store gives).
 */
#include "engine/engine-int.h"
#include "engine/engine.h"

#include <stdint.h>

void tlc_engine_set_wall_ms(tlc_engine_t *e, int64_t ms) {
  e->wall_ms = ms;
  if (e->o.tap != NULL) /* the taps' wall clock for what this chunk makes (engine.h) */
    tlc__engine_tap_mark(e, TLC_TAP_WALL, e->last, ms);
}

size_t tlc_engine_xnew(tlc_engine_t *e, tlc_engine_xnew_t *x, size_t max) {
  size_t n = 0;
  for (uint32_t i = 0; i < e->nxq && n < max; i++) {
    const xnew_t *q = &e->xq[i];
    const tlc_at_t *a;
    if (q->row >= e->nrows)
      continue; /* rows cleared meanwhile */
    a = q->max ? &e->xt[q->row].mx[q->k] : &e->xt[q->row].mn[q->k];
    if (!a->known)
      continue;
    x[n].epoch = e->epoch;
    x[n].row = q->row;
    x[n].kind = q->k;
    x[n].max = q->max;
    x[n].seq_start = a->seq_start;
    x[n].seq_end = a->seq_end;
    n++;
  }
  e->nxq = 0;
  return n;
}

int tlc_engine_xlocate(tlc_engine_t *e, const tlc_engine_xnew_t *x, const uint64_t loc[4]) {
  tlc_at_t *a;
  if (x->epoch != e->epoch || x->row >= e->nrows || x->kind >= NK)
    return 0;
  a = x->max ? &e->xt[x->row].mx[x->kind] : &e->xt[x->row].mn[x->kind];
  if (!a->known || a->seq_end != x->seq_end || a->seq_start != x->seq_start)
    return 0; /* a later extreme took its place */
  a->seg_first = loc[0];
  a->off_first = loc[1];
  a->seg_last = loc[2];
  a->off_last = loc[3];
  return 1;
}
