/* stored.h - the composition root's answers for storage, over the daemon object's store, its
 * policy and range-query queue and the target registry: what the read side (view.h),
 * continuity and ingest's half-close (barriers) ask of it, and its figures for the status line
 * and the stats dump. Kept out of wiring.c, which only creates the modules and connects them.
 *
 * The hooks take the daemon object (daemon.h) as their `ud`; wiring.c installs them once
 * storage runs. Loop thread only.
 */
#ifndef TLC_DAEMON_STORED_H
#define TLC_DAEMON_STORED_H

#include "continuity/continuity.h"
#include "history/histq.h"
#include "ingest/sources.h"
#include "view/view.h"

struct tlc_daemon;
struct tlc_json_w;

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
/* view around: the moment of `mo` (history/moment.h) in `export_`, computed like history. */
int tlc_stored_around(void *ud, const char *name, const tlc_moment_t *mo, int export_, size_t max,
                      const tlc_hist_answer_t *ans, void (*done)(void *, tlc_hist_result_t *),
                      void *done_ud, void **job);

/* view segments: target `name`'s segments on disk, at most `max` (the newest; *truncated says
 * older ones were left out), each with its manifest's figures. */
int tlc_stored_segments(void *ud, const char *name, size_t max, tlc_view_segment_t **out, size_t *n,
                        int *truncated);

/* ingest's barrier (sources.h d->barrier): cb(cb_ud) once everything queued to storage before
 * the call is written (tlc_store_barrier_written); TLC_EINVAL without a store. */
int tlc_stored_barrier(void *ud, void (*cb)(void *), void *cb_ud);

/* view target_store: target `index`'s storage figures (has 0: not stored). */
void tlc_stored_target(void *ud, size_t index, tlc_view_store_t *out);

/* The daemon-wide storage figures of view daemon_info: has_store and the store's counters while
 * it runs, the state directory's free space (one statvfs(2)) while storage is on. */
void tlc_stored_daemon_info(const struct tlc_daemon *d, tlc_view_daemon_t *out);

/* Appends " stored=N store_dropped=N" (and " DEGRADED(disk full)") to a STATUS line in
 * buf[0, len) while the store runs. */
void tlc_stored_status(const struct tlc_daemon *d, char *buf, size_t len);

/* The stats dump's "store" object while the store runs: what is written, and what is still
 * being sealed or exported (docs/storage.md), written with the dump's writer. */
void tlc_stored_dump(const struct tlc_daemon *d, struct tlc_json_w *j);

#endif
