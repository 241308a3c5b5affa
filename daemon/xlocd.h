/* xlocd.h - where the extremes of the live targets are stored (SPEC 13, docs/budgets.md
 * "Time of extremes").
 *
 * Every MIN and MAX the engine of a stored bin10/bin11 target makes new (tlc_engine_xnew) gets
 * the segment and byte offsets of its sample's first and closing records, as budget violations
 * do (budgetd.c): one store mark after a batch that made new extremes, the records counted
 * back from its answer, one change sequence per 24-byte record, and a location given only while
 * that count can be trusted (no gap, no ignored event, no record dropped by storage since
 * counting started). Each engine is also given the wall clock of every received chunk, which
 * its new extremes are stamped with. Loop thread.
 */
#ifndef TLC_DAEMON_XLOCD_H
#define TLC_DAEMON_XLOCD_H

#include "daemon/daemon.h"

/* A target event (wiring.c's observer): reset, connected or a new mapping: counting starts
 * again; freed or forgotten: its state detached (freed once its marks are back). */
void tlc_xlocd_target_event(tlc_daemon_t *d, const tlc_target_t *t, int kind);
/* After the engine of target t took a batch of n events (the observer's batch_cb): the
 * extremes it made new get their location once storage has written the batch. O(1) per
 * batch, one mark per batch with new extremes (at most 8 in flight per target). */
void tlc_xlocd_batch(tlc_daemon_t *d, const tlc_target_t *t, size_t n);
/* Detaches every target's state (those with marks in flight are freed as they come back). */
void tlc_xlocd_close(tlc_daemon_t *d);

#endif
