/* slog.c - the engine's sample log (engine.h: tlc_engine_set_slog, tlc_engine_slog_flush): setting
 * the log's function, handing its block of entries over, the marks (TLC_SLOG_ROWS,
 * TLC_SLOG_EPOCH) that tell its consumer when row indexes and sample epochs change, and the
 * consumer's own notes (tlc_engine_slog_note).
 *
 * Invariants (engine-int.h: erow_t.slog, tlc_engine_t.slog): the log is on iff e->slog != NULL,
 * and then holds slog[0, scur - slog) with send = slog + TLC_SLOG_BLOCK; it is empty between
 * pushes; a row's slog is 2 (described) only if its DEF mark was given since the last ROWS
 * mark, so a block not taken (its DEFs lost with it) sets every such row back to 1.
 *
 * Cost: a hand-off is one call of the log's function per TLC_SLOG_BLOCK entries or push; a
 * ROWS mark is O(rows) (every row not described); setting the log is O(rows).
 *
 * Does not: append samples or DEF marks (engine.c does, inline in the push loop: slog_add,
 * slog_def, with engine-int.h's slog_room), or keep a block the function took.
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
