/* stored.h - what the read side (view.h) and continuity ask of storage, answered over the
 * store, its policy, the range-query queue and the target registry: the composition root's
 * adapters, kept out of wiring.c, which only creates the modules and connects them.
 *
 * Each function takes a tlc_stored_t as its `ud` (wiring.c owns it and fills it once storage
 * runs). Loop thread only.
 */
#ifndef TLC_DAEMON_STORED_H
#define TLC_DAEMON_STORED_H

#include "continuity/continuity.h"
#include "history/histq.h"
#include "ingest/sources.h"
#include "view/view.h"

typedef struct tlc_stored {
  tlc_ingest_t *d;       /* the target registry (d->targets) */
  const char *state_dir; /* where the segments are */
  tlc_histq_t *hq;       /* range queries off the loop, or NULL */
} tlc_stored_t;

/* view rotate: seals target t's open segment (`tlcap rotate`). 0 or TLC_EINVAL (no storage). */
int tlc_stored_rotate(void *ud, tlc_target_t *t);

/* continuity: whether t's store queue ends inside an evlog block (no mark possible now), and a
 * mark in that queue whose position `done` gets once everything before it is written. */
int tlc_stored_mid_block(void *ud, tlc_target_t *t);
int tlc_stored_mark(void *ud, tlc_target_t *t, tlc_cont_done_fn done, void *done_ud);

/* view history / history_cancel: a range query of target `name`'s stored records, computed
 * on the threadpool (histq.h) with the settings the live target has. */
int tlc_stored_history(void *ud, const char *name, const tlc_when_range_t *range,
                       const tlc_snap_opts_t *so, const tlc_hist_answer_t *ans,
                       void (*done)(void *, tlc_hist_result_t *), void *done_ud, void **job);
void tlc_stored_history_cancel(void *ud, void *job);

/* view segments: target `name`'s segments on disk, at most `max` (the newest; *truncated says
 * older ones were left out), each with its manifest's figures. */
int tlc_stored_segments(void *ud, const char *name, size_t max, tlc_view_segment_t **out, size_t *n,
                        int *truncated);

#endif
