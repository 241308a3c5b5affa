/* cursor.c - a reader's place in an engine's statistics (cursor.h). */
#include "engine/cursor.h"

#include <string.h>

void tlc_cursor_init(tlc_cursor_t *c) {
  memset(c, 0, sizeof(*c));
}

void tlc_cursor_want_full(tlc_cursor_t *c) {
  c->have = 0;
}

int tlc_cursor_renew(tlc_cursor_t *c, uint64_t gen) {
  if (c->gen == gen)
    return 0;
  tlc_cursor_init(c);
  c->gen = gen;
  return 1;
}

int tlc_cursor_begin(tlc_cursor_t *c, uint64_t now, uint64_t full_every) {
  c->full = !c->have || (full_every != TLC_CURSOR_NEVER && now - c->full_at >= full_every);
  c->base = c->full ? 0 : c->seq;
  c->more = 1;
  c->no = 0;
  c->lo = 0;
  c->prev = c->base;
  return c->full;
}

int tlc_cursor_next(tlc_cursor_t *c, tlc_cursor_split_fn split, void *ud, size_t rows,
                    tlc_cursor_part_t *p) {
  uint64_t hi = TLC_CURSOR_END;
  int r;
  if (!c->more)
    return 0;
  if (split != NULL && (r = split(ud, c->lo, rows, c->base, &hi)) < 0)
    return r;
  memset(p, 0, sizeof(*p));
  p->lo = c->lo;
  p->hi = hi;
  p->since = c->base;
  p->base = c->no == 0 ? c->base : c->prev;
  p->no = c->no;
  p->more = hi < TLC_CURSOR_END;
  p->full = c->full;
  p->whole = split == NULL;
  c->more = p->more;
  c->lo = hi;
  c->no++;
  return 1;
}

void tlc_cursor_took(tlc_cursor_t *c, uint64_t seq) {
  c->prev = seq;
}

void tlc_cursor_end(tlc_cursor_t *c, int ok, uint64_t now) {
  c->more = 0;
  if (!ok) {
    c->have = 0;
    return;
  }
  c->seq = c->prev;
  c->have = 1;
  if (c->full)
    c->full_at = now;
}

int tlc_cursor_engine_split(void *ud, uint64_t lo, size_t n, uint64_t since, uint64_t *hi) {
  return tlc_engine_handle_split_since(ud, lo, n, since, hi);
}

int tlc_cursor_engine_take(tlc_engine_t *e, const tlc_cursor_part_t *p, tlc_table_t *t,
                           tlc_snap_opts_t *so) {
  so->since_seq = p->since;
  if (p->whole)
    return tlc_engine_snapshot(e, t, so);
  return tlc_engine_snapshot_part(e, t, so, p->lo, p->hi);
}
