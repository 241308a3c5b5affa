/* xlocd.h - where the extremes of the live targets are stored (SPEC 13, docs/budgets.md
 * "Time of extremes").
 *
 * Every MIN and MAX the engine of a stored bin10/bin11 target makes new (tlc_engine_xnew) gets
 * the segment and byte offsets of its sample's first and closing records, as budget violations
 * do (budgetd.c): both are located by the batch's one store mark (locd.h). Their wall clock is
 * the received chunk's, which ingest gives the engine (ingest/target.c). Loop thread.
 */
#ifndef TLC_DAEMON_XLOCD_H
#define TLC_DAEMON_XLOCD_H

#include "daemon/daemon.h"

/* After the engine of target t took a batch (the observer's batch_cb), between
 * tlc_locd_batch and tlc_locd_flush: the extremes it made new get their location once storage
 * has written the batch. */
void tlc_xlocd_batch(tlc_daemon_t *d, const tlc_target_t *t);

#endif
