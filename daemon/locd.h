/* locd.h - where the records of a live target's batches are stored (SPEC 13, docs/budgets.md
 * "What a violation holds" and "Time of extremes").
 *
 * Budget violations (budgetd.c) and new extremes (xlocd.c) carry the segment and byte offsets
 * of the records that made them. Per stored bin10/bin11 target one count: after each batch the
 * engine's change sequence must have moved by exactly the batch's events and its gap count not
 * at all (one change sequence per 24-byte record), else counting starts again after the batch
 * (nothing before it is located). A module that wants a batch's records located asks while the
 * batch's observers run (tlc_locd_want); after them one store mark is placed for all who asked
 * (tlc_locd_flush). Its answer (the open segment and its length, which ends with the batch's
 * last record) is what they count back from, provided storage's dropped count has not moved
 * since counting started. Marks are answered in order. Loop thread.
 */
#ifndef TLC_DAEMON_LOCD_H
#define TLC_DAEMON_LOCD_H

#include "daemon/daemon.h"
#include "store/store.h"

/* What a mark brought: the records of change sequences [first, last] are the last ones
 * before pos, and the target and its engine are still there. pos NULL: they cannot be located
 * (storage dropped records, the target or its engine went). */
typedef struct tlc_locd_at {
  const tlc_store_pos_t *pos;
  uint64_t first, last;
} tlc_locd_at_t;

/* Where the records of change sequences seq_start and seq_end start: loc[0], loc[1] the first's
 * segment and byte offset, loc[2], loc[3] the closing one's, 0 each where not known (pos NULL,
 * outside [first, last], or two segments back). 1 when either is known, else 0. */
int tlc_locd_span(const tlc_locd_at_t *at, uint64_t seq_start, uint64_t seq_end, uint64_t loc[4]);

typedef void (*tlc_locd_fn)(void *ud, const tlc_locd_at_t *at);

/* A target event (wiring.c's observer): reset, connected or a new mapping: counting starts
 * again; freed or forgotten: its count detached (freed once its marks are back). */
void tlc_locd_target_event(tlc_daemon_t *d, const tlc_target_t *t, int kind);
/* Before the other observers of a batch of n events of t: counts its records. O(1). */
void tlc_locd_batch(tlc_daemon_t *d, const tlc_target_t *t, size_t n);
/* 1 when this batch's records can be located (stored, counted since before it, a mark free:
 * at most 8 in flight per target), else 0. */
int tlc_locd_ready(const tlc_target_t *t);
/* While the batch's observers run: fn(ud, at) is called once, on the loop, when storage has
 * written the batch (at->pos NULL: the records cannot be located). 0; -1 when not ready or
 * without memory (fn is then never called). */
int tlc_locd_want(const tlc_target_t *t, tlc_locd_fn fn, void *ud);
/* After the batch's observers: one mark for all that asked (none asked: nothing). */
void tlc_locd_flush(tlc_daemon_t *d, const tlc_target_t *t);
/* Detaches every target's count (those with marks in flight are freed as they come back). */
void tlc_locd_close(tlc_daemon_t *d);

#endif
