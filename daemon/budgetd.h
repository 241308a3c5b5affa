/* budgetd.h - timing budgets on the live targets (SPEC 13, docs/budgets.md).
 *
 * Every target some budget of cfg.bset applies to (its target glob) gets a watch
 * (budget/budget.h) in t->conf.watch, attached to its engine as one of the engine's taps
 * (tlc_engine_add_tap): every sample is tested as the engine closes it. A target that appears
 * later gets its watch at its creation event; a restore, a reset or a new mapping attaches it
 * again (its rows are asked again). SIGHUP: the new set replaces each watch's budgets (the
 * unchanged ones keep their counts, kept and worst); a bad budget file never gets here (the
 * configuration refuses it with FILE:LINE and the running one, with its budgets, stays).
 * Each violation fans out to the modules that run (the Alertmanager client). The view's
 * `budgets` hook reads a target's watch by name.
 * Loop thread.
 */
#ifndef TLC_DAEMON_BUDGETD_H
#define TLC_DAEMON_BUDGETD_H

#include "daemon/daemon.h"

/* Sets the view's hook and makes the watches of the targets there already. 0 or TLC_ENOMEM
 * (logged; the daemon runs without budgets on those targets). */
int tlc_budgetd_start(tlc_daemon_t *d);
/* A target event (wiring.c's observer): created, connected, reset or a new mapping: its watch
 * made (when a budget applies) and attached to its engine; forgotten or freed: detached and
 * freed. */
void tlc_budgetd_target_event(tlc_daemon_t *d, const tlc_target_t *t, int kind);
/* The configuration was reloaded: every watch takes the new budgets. */
void tlc_budgetd_reload(tlc_daemon_t *d);
/* After the engine of target t took a batch (its observer's batch_cb), between
 * tlc_locd_batch and tlc_locd_flush: the violations of the batch get their stored location
 * (segment and byte offsets of their first and closing records) once storage has written it,
 * from the batch's store mark (locd.h). O(1) per batch. Loop thread. */
void tlc_budgetd_batch(tlc_daemon_t *d, const tlc_target_t *t);
/* Continuity's checkpoint hook (continuity.h: on_checkpoint, ud = d): t's watch, as it is
 * now, saved to <state>/<target>/budgets.checkpoint (tlc_bwatch_save; temporary file, fsync,
 * rename, in the threadpool). A target made later takes it back (docs/budgets.md "Restarts"). */
void tlc_budgetd_checkpoint(void *d, tlc_target_t *t);
/* Shutdown, after continuity's last round (tlc_cont_checkpoint_all) and with the sources
 * closed (no event comes any more): every watch, as it ends, saved as tlc_budgetd_checkpoint
 * does, in place of a checkpoint held for its marks (the watch holds all it held). A shutdown
 * checkpoint that continuity defers behind one in flight is taken after the watches are gone,
 * so the hook would not see it; the state it takes is this one (nothing changes meanwhile). */
void tlc_budgetd_final(tlc_daemon_t *d);
/* Detaches and frees every watch; the view's hook is cleared. */
void tlc_budgetd_close(tlc_daemon_t *d);

/* The displayed names of an area (a state row: "VARIABLE = VALUE") and of a context of target
 * t, as exports show them (budget/report.h: tlc_breport_names_fn with ud = t). */
void tlc_budgetd_names(void *t, uint32_t handle, uint8_t row_kind, uint64_t state, uint32_t context,
                       char *area, size_t alen, char *ctx, size_t clen);

#endif
