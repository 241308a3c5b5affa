/* slog.c - the engine's sample log (engine.h: tlc_engine_set_slog, tlc_engine_slog_flush): setting
 * the log's function, handing its block of entries over, the marks (TLC_SLOG_ROWS,
 * TLC_SLOG_EPOCH) that tell its consumer when row indexes and sample epochs change, a row's key
 * (a DEF mark, tlc_engine_row_desc's), the samples a tap tagged (TLC_SLOG_TAG) and the
 * consumer's own notes (tlc_engine_slog_note).
 *
 * Invariants (engine-int.h: erow_t.slog, tlc_engine_t.slog): the log is on iff e->slog != NULL,
 * and then holds slog[0, scur - slog) with send = slog + TLC_SLOG_BLOCK; it is empty between
 * pushes; a row's slog is 2 (described) only if its DEF mark was given since the last ROWS
 * mark, so a block not taken (its DEFs lost with it) sets every such row back to 1.
 *
 * Cost: a hand-off is one call of the log's function per TLC_SLOG_BLOCK entries or push; a
 * ROWS mark is O(rows) (every row not described); setting the log is O(rows); a tag is one entry
 * (inline in taps.c, only for a sample a tap answered for: engine-int.h's tlc__engine_slog_tag).
 *
 * Does not: append samples (engine.c does, inline in the push loop: slog_add, with engine-int.h's
 * slog_room), or keep a block the function took.
 */
#include "engine/engine-int.h"
#include "engine/engine.h"

#include "base/alloc.h"
#include "base/err.h"

#include <stddef.h>
#include <stdint.h>

/* Every row of the log not described (its next sample gives its key again). */
static void slog_undescribe(tlc_engine_t *e) {
  for (size_t i = 0; i < e->nrows; i++)
    if (e->rows[i].slog)
      e->rows[i].slog = 1;
}

/* A mark at the log's end (room for it: the caller's). */
static void slog_put_mark(tlc_engine_t *e, uint32_t mark, int64_t value) {
  tlc_engine_slent_t *l = e->scur++;
  l->rk = mark;
  l->aux = 0;
  l->value = value;
  l->end = e->last;
}

void tlc__engine_slog_flush(tlc_engine_t *e) {
  size_t n = (size_t)(e->scur - e->slog);
  tlc_engine_slent_t *nb;
  e->scur = e->slog;
  if (n == 0)
    return;
  nb = e->slog_fn(e->slog_ud, e, e->slog, n);
  if (nb != NULL && nb != e->slog) { /* taken: x is the function's now */
    e->slog = e->scur = nb;
    e->send = nb + TLC_SLOG_BLOCK;
    return;
  }
  /* not taken: the keys it gave are lost with it */
  slog_undescribe(e);
  slog_put_mark(e, TLC_SLOG_ROWS, (int64_t)e->epoch);
  slog_put_mark(e, TLC_SLOG_EPOCH, (int64_t)e->c.clock_resets);
}

void tlc__engine_slog_mark(tlc_engine_t *e, uint32_t mark, int64_t value) {
  if (e->slog == NULL)
    return;
  slog_room(e);
  if (mark == TLC_SLOG_ROWS)
    slog_undescribe(e);
  slog_put_mark(e, mark, value);
}

int tlc_engine_row_desc(const tlc_engine_t *e, uint32_t row, uint32_t *handle, uint32_t *context,
                        uint8_t *row_kind, uint64_t *state) {
  const erow_t *r;
  if (row >= e->nrows)
    return TLC_EINVAL;
  r = &e->rows[row];
  *handle = r->handle;
  *context = r->kind == TLC_ROW_CODE && r->ctx != NONE32 ? e->ctx[r->ctx].tindex : TLC_CTX_NONE;
  *row_kind = r->kind;
  *state = r->kind == TLC_ROW_STATE ? r->state : 0;
  return 0;
}

void tlc__engine_slog_def(tlc_engine_t *e, erow_t *r) {
  uint32_t row = (uint32_t)(r - e->rows), handle = 0, context = 0;
  uint8_t rkind = 0;
  uint64_t st = 0;
  tlc_engine_slent_t *l;
  (void)tlc_engine_row_desc(e, row, &handle, &context, &rkind, &st);
  l = e->scur++;
  l->rk = TLC_SLOG_DEF + rkind;
  l->aux = row;
  l->value = (int64_t)((uint64_t)handle << 32 | context);
  l->end = (int64_t)st;
  r->slog = 2;
}

void tlc__engine_slog_tag_slow(tlc_engine_t *e, erow_t *r, unsigned k, unsigned n, int64_t end) {
  if (r->slog == 0) /* a row the log does not name */
    return;
  /* its own room, as a note's (taps are served between groups of entries) */
  if (e->send - e->scur < 2)
    tlc__engine_slog_flush(e);
  if (r->slog == 1) /* not described since the last ROWS mark (a block not taken) */
    tlc__engine_slog_def(e, r);
  tlc__engine_slog_put_tag(e, r, k, n, end);
  if (!e->pushing) /* the log is empty between pushes (engine.h) */
    tlc__engine_slog_flush(e);
}

int tlc_engine_set_slog(tlc_engine_t *e, tlc_engine_slog_fn fn, void *ud) {
  size_t i, sz = TLC_SLOG_BLOCK * sizeof(tlc_engine_slent_t);
  if (e->slog != NULL && e->scur != e->slog)
    tlc__engine_slog_flush(e); /* to the previous function */
  if (fn == NULL) {
    if (e->slog != NULL) {
      tlc_free(e->slog);
      tlc__engine_acct_give(e, sz);
    }
    e->slog = e->scur = e->send = NULL;
  } else if (e->slog == NULL) {
    tlc_engine_slent_t *l = tlc_malloc(sz);
    if (l == NULL)
      return TLC_ENOMEM;
    (void)tlc__engine_acct_take(e, sz, TLC_ACCT_FORCE); /* fixed, like the histogram log */
    e->slog = e->scur = l;
    e->send = l + TLC_SLOG_BLOCK;
  }
  e->slog_fn = fn;
  e->slog_ud = ud;
  for (i = 0; i < e->nrows; i++)
    e->rows[i].slog = (uint8_t)(fn != NULL && i < TLC_SLOG_MARKS / NK);
  /* the function may have been given rows of another engine (a restore) */
  tlc__engine_slog_mark(e, TLC_SLOG_ROWS, (int64_t)e->epoch);
  tlc__engine_slog_mark(e, TLC_SLOG_EPOCH, (int64_t)e->c.clock_resets);
  return 0;
}

void tlc_engine_slog_flush(tlc_engine_t *e) {
  if (e->slog != NULL && e->scur != e->slog)
    tlc__engine_slog_flush(e);
}

int tlc_engine_slog_note(tlc_engine_t *e, tlc_engine_slog_fn fn, const void *ud, uint32_t aux,
                         int64_t v0, int64_t e0, int64_t v1, int64_t e1) {
  tlc_engine_slent_t *l;
  if (e->slog == NULL || e->slog_fn != fn || e->slog_ud != ud)
    return TLC_EINVAL;
  /* its own room (a tap is served before or after a group of engine.c's entries, never between
   * the group's slog_room and its entries) */
  if (e->send - e->scur < 2)
    tlc__engine_slog_flush(e);
  l = e->scur;
  l[0].rk = TLC_SLOG_NOTE;
  l[0].aux = aux;
  l[0].value = v0;
  l[0].end = e0;
  l[1].rk = 0;
  l[1].aux = 0;
  l[1].value = v1;
  l[1].end = e1;
  e->scur = l + 2;
  if (!e->pushing) /* the log is empty between pushes (engine.h) */
    tlc__engine_slog_flush(e);
  return 0;
}
