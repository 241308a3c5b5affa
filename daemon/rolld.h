/* rolld.h - the rollups in the daemon (SPEC 14; daemon/rollup, docs/rollups.md): the module
 * started with storage, an accumulator per target fed by its engine's tap, and the read side's
 * rollup hook (trend and diff documents from an HTTP query string). Loop thread. */
#ifndef TLC_DAEMON_ROLLD_H
#define TLC_DAEMON_ROLLD_H

#include "daemon/daemon.h"
#include "base/json.h"
#include "continuity/continuity.h"
#include "rollup/rollup.h"

/* Starts the module under cfg.state_dir with the configured budget and sets the view's hook.
 * 0 or an error (logged). */
int tlc_rolld_start(tlc_daemon_t *d);
/* A target event (wiring.c's observer): created or reset, its engine gets the tap; forgotten or
 * freed, its open minute is sealed and its accumulator freed. */
void tlc_rolld_target_event(tlc_daemon_t *d, const tlc_target_t *t, int kind);
struct tlc_violation;
/* A budget violation of target t (budget/budget.h) is counted in the rollup minute of its end
 * time for its row (area, context, state) and the statistic it broke; trend shows the area's
 * violations per step. Nothing when rollups are off or t has no accumulator. Loop thread (the
 * daemon's violation fan-out calls it for a rate's: the others come in t's engine's sample log
 * as the tags of their samples, engine.h: TLC_SLOG_TAG). */
void tlc_rolld_violation(tlc_daemon_t *d, tlc_target_t *t, const struct tlc_violation *v);
/* Target t's statistics are being checkpointed at this point of its stream: a copy of its open
 * minute as of this point is taken (tlc_rollup_acc_save), and mark(d, t, ...) asks the storage
 * position; when the position comes (before done(done_ud, pos) is called), the copy is kept on
 * disk under it, so that a restart from that checkpoint writes that minute and knows which
 * replayed samples the crashed run wrote already. Returns mark's result. Loop thread. */
int tlc_rolld_checkpoint(tlc_daemon_t *d, tlc_target_t *t, tlc_cont_mark_fn mark,
                         tlc_cont_done_fn done, void *done_ud);
/* Continuity replays t's stored records after its checkpoint at pos (begin 1: before, 0: after;
 * continuity.h on_replay; d is ud): when t has rollups on disk, its engine gets the rollup tap
 * before the replay, and the replayed samples are counted in its rollups but those the crashed
 * run wrote (tlc_rollup_acc_replay). Loop thread. */
void tlc_rolld_replay(void *ud, tlc_target_t *t, const tlc_ckpt_pos_t *pos, int begin);
/* The configuration was reloaded: the budget applies from now on. */
void tlc_rolld_reload(tlc_daemon_t *d);
/* Seals every open minute, detaches the taps, writes the open hours and frees the module. */
void tlc_rolld_close(tlc_daemon_t *d);

/* The stats dump's "rollup" object (rollup.h's counters), when rollups run. */
void tlc_rolld_dump(const tlc_daemon_t *d, tlc_json_w_t *w);

/* Parses a query string the way the HTTP hook does, for `what` 1 (trend) or 2 (diff), into
 * q[] (nq set) and *kind. 0, or TLC_EINVAL with err filled. Exposed for the tests' sake. */
int tlc_rolld_parse(int what, const char *name, const char *query, int64_t now_ns,
                    tlc_rollup_q_t *q, size_t *nq, uint8_t *kind, char *err, size_t errlen);

#endif
