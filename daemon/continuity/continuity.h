/* continuity.h - statistics that survive restarts (SPEC section 10): checkpoints and restore.
 *
 * Every checkpoint_interval, and at shutdown, each target whose state changed since its last
 * checkpoint is encoded (ckfile.h) through two buffers of about 1 MiB (each written to the .tmp
 * file by the threadpool when it fills, the encoding waiting while both are full, so a
 * checkpoint's memory does not grow with the state), the storage
 * position its statistics cover is asked of the store (opts.mark: a command in the store's
 * queue, so the position is exactly "every record before this point"), and the file is
 * written: <state>/<target>/
 * target.checkpoint.tmp, fsync, rename to target.checkpoint, fsync of the directory. The
 * state is encoded on the loop thread in slices of at most opts.slice_ns: one that takes
 * longer is frozen (tlc_target_freeze: its input held, so it stays at the position asked)
 * and encoded a slice per loop turn (uv_idle), the other targets going on in between; the file
 * is written on libuv's threadpool (uv_queue_work). At most one checkpoint per target is in
 * flight.
 *
 * When a target is created (at start for every checkpoint found, tlc_cont_restore_all, or
 * later by its source) its checkpoint is read and restored, and its stored records after the
 * position are replayed through the target's own pipeline (decoder, evlog mapping, engine)
 * with its observers silent (opts.on_replay is called around it: the rollups count the
 * replayed samples), disconnect gaps where the manifests record them; then one gap
 * (the restart) when the stream was open. A damaged, truncated or foreign checkpoint, or one
 * of other statistics settings, is moved to <state>/.quarantine/<target>/ with one log line
 * and the target is rebuilt from all its segments; a target with segments and no checkpoint
 * likewise. Nothing here can fail a start.
 *
 * Loop thread only (the writes run in the threadpool on buffers they own).
 */
#ifndef TLC_CONTINUITY_H
#define TLC_CONTINUITY_H

#include "continuity/ckfile.h"
#include "ingest/target.h"

#include <stdint.h>
#include <uv.h>

typedef struct tlc_cont tlc_cont_t;

/* The storage position of everything the target queued to storage so far: calls
 * done(done_ud, pos) on the loop later (pos->valid 0: unknown). Returns 0, or an error (done
 * is then never called: the checkpoint is written without a position). */
typedef void (*tlc_cont_done_fn)(void *done_ud, const tlc_ckpt_pos_t *pos);
typedef int (*tlc_cont_mark_fn)(void *ud, tlc_target_t *t, tlc_cont_done_fn done, void *done_ud);

typedef struct tlc_cont_opts {
  const char *state_dir; /* copied */
  uint64_t interval_ms;  /* periodic checkpoints (0: only at shutdown) */
  int replay;            /* 1: the state directory holds the targets' segments (storage on) */
  tlc_cont_mark_fn mark; /* NULL: no storage (checkpoints carry no position) */
  void *mark_ud;
  /* 1 while storage is collecting an evlog block of t (a mark would cut it in two): the
   * checkpoint waits for the block's end (up to 2 s, then cuts it). Called with mark_ud. */
  int (*mid_block)(void *ud, tlc_target_t *t);
  size_t max_file_bytes; /* largest checkpoint read or written (0: 4 GiB) */
  uint64_t slice_ns;     /* the longest the loop spends encoding a checkpoint at a time
                            (0: 1 ms); a state not encoded within it is frozen and encoded
                            a slice per loop turn. At shutdown in one go. */
  /* called on the loop as a target's checkpoint is taken (its statistics are encoded as they
   * are now), so that what keeps state of its own beside them saves it too, in a file of its
   * own (the budgets' watch: budgetd.c). NULL: none. Called with hook_ud. */
  void (*on_checkpoint)(void *ud, tlc_target_t *t);
  /* called on the loop around the replay of a restored target's stored records after its
   * checkpoint's position pos (begin 1 before the first record is fed, 0 after the last), so
   * that what counts the engine's samples apart from the statistics (the rollups: rolld.c)
   * counts the replayed ones too. NULL: none. Called with hook_ud. */
  void (*on_replay)(void *ud, tlc_target_t *t, const tlc_ckpt_pos_t *pos, int begin);
  void *hook_ud;
} tlc_cont_opts_t;

/* Creates the module and registers its target observer on `targets` (register it before the
 * storage observer, so a restored target's counters are in place when storage opens it).
 * Starts the periodic timer. Returns 0 or a negative error. */
int tlc_cont_new(uv_loop_t *loop, tlc_targets_t *targets, const tlc_cont_opts_t *o,
                 tlc_cont_t **out);

/* Sets the storage position hook once storage is up (NULL: none). */
void tlc_cont_set_mark(tlc_cont_t *c, tlc_cont_mark_fn mark, void *ud, int replay);

/* Creates every target that has a checkpoint under the state directory (with the settings
 * its checkpoint names), which restores it. At start, after storage recovery. */
void tlc_cont_restore_all(tlc_cont_t *c);

/* Checkpoints every changed target now (shutdown: after the sources detached, before storage
 * closes its targets). */
void tlc_cont_checkpoint_all(tlc_cont_t *c);

/* Stops the timer, unregisters the observer, waits for the writes in flight, frees the module
 * and calls cb(ud) (may be NULL) on the loop. */
void tlc_cont_close(tlc_cont_t *c, void (*cb)(void *), void *ud);

/* Counters for tests and STATUS. */
typedef struct tlc_cont_stats {
  uint64_t written, write_errors, skipped_busy;
  uint64_t restored, rebuilt, quarantined, replayed_bytes;
  uint64_t last_encode_ns, max_encode_ns;  /* loop time spent encoding one checkpoint, in all */
  uint64_t last_write_ns;                  /* threadpool time of the last file write */
  uint64_t slices;                         /* encoding slices run on the loop */
  uint64_t max_slice_ns, max_slice_cpu_ns; /* the longest one: wall clock, thread CPU time */
  uint64_t max_frozen_ns; /* the longest a target's input was held for its checkpoint */
  uint64_t aborted;       /* checkpoints given up (stream ended, held input at its cap) */
} tlc_cont_stats_t;
void tlc_cont_get_stats(const tlc_cont_t *c, tlc_cont_stats_t *s);

/* The stats dump's "checkpoints" object (the counters above: checkpoints written, the loop's
 * longest encoding slice, the longest a target's input was held), written with the dump's
 * writer. Loop thread. */
struct tlc_json_w;
void tlc_cont_dump(const tlc_cont_t *c, struct tlc_json_w *j);

#endif
