/* history.h - statistics of a past range of a target, from its stored segments (SPEC 10).
 *
 * Two layers, both without an event loop:
 *
 * - tlc_hist_stream_t: capture files in, mapped events out, in stream order, through one
 *   tlc_pipeline_t (daemon/engine/pipeline.h: the object a live target runs too): the files of
 *   `tlcapd replay` (FILE... operands and --state-dir) and of the daemon's range queries, each
 *   decoded afresh, segments read through their index (tlc_segread) when a time range is asked
 *   for, evlog items through one evlog mapping for the whole capture, the disconnects the
 *   manifests record turned into gaps between events of the range, the engine (when asked for)
 *   fed as the events come out. It is also a tlc_timeline_t (next/rewind) for exporters that
 *   make a second pass.
 * - tlc_hist_select + tlc_hist_compute: a target's segments under a state directory chosen for
 *   a range (tlc_when_range_t: target time or wall clock), and their statistics in a table.
 *
 * The daemon runs tlc_hist_compute on libuv's threadpool (histq.h); `tlcapd replay` on its
 * only thread. Everything here is blocking file I/O and CPU; nothing is shared between
 * streams, so any thread may use its own.
 */
#ifndef TLC_HISTORY_H
#define TLC_HISTORY_H

#include "engine/engine.h"
#include "engine/pipeline.h"
#include "formats/dec.h"
#include "formats/evmap.h"
#include "formats/mapping.h"
#include "formats/stats.h"
#include "formats/timeline.h"
#include "formats/tlc_event.h"
#include "formats/when.h"
#include "history/moment.h"
#include "history/result.h"

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define TLC_HIST_BATCH 256

struct tlc_segread;

/* A message about a file (decode error, read error): the whole line without a prefix. */
typedef void (*tlc_hist_msg_cb)(void *ud, const char *msg);

typedef struct tlc_hist_stream {
  /* --- set by the caller before tlc_hist_stream_init (borrowed, outlive the stream) --- */
  char *const *files;
  size_t nfiles;
  const uint8_t *gap_before; /* per file: a disconnect lies between it and the one before (or
                                NULL) */
  tlc_pipeline_conf_t conf;  /* the pipeline (pipeline.h): format, evlog mapping caps, engine
                                (with_engine: fed as events come out, until taken), the range
                                [from, to] */
  tlc_hist_msg_cb msg;       /* NULL: silent */
  void *msg_ud;
  int report;               /* tell decode errors (the first pass) */
  const atomic_int *cancel; /* may be NULL; when it becomes non-zero next() ends (-ECANCELED) */
  int has_wall;             /* an arrival range: each segment cut to the records that arrived */
  int64_t wall_since, wall_until; /* in [wall_since, wall_until) (Unix ns; open: INT64_MIN/MAX) */
  /* --- state --- */
  size_t fi;
  FILE *f;
  struct tlc_segread *seg; /* the file read through its segment index (or a .zst) */
  int eof;
  int stopped; /* a strict-mode error ended the capture */
  uint8_t *buf;
  size_t blen, bpos;
  tlc_pipeline_t pipe; /* decoder (a fresh one per file) -> evlog mapping -> range -> engine */
  int pipe_live;
  tlc_event_t raw[TLC_HIST_BATCH];
  tlc_event_t out[2 * TLC_HIST_BATCH];
  int io_err;    /* a file could not be read (told through msg) */
  int bad_input; /* a decode error was told (the capture ended there) */
} tlc_hist_stream_t;

/* Makes the pipeline and the read buffer. 0, TLC_ENOMEM or the pipeline's error. */
int tlc_hist_stream_init(tlc_hist_stream_t *s);
/* Frees what init and next allocated; safe on a zeroed stream. */
void tlc_hist_stream_fini(tlc_hist_stream_t *s);
/* Next batch of mapped events into *evs (valid until the next call): its length, 0 at the end
 * (also after a decode error, told through msg), or a negative error (TLC_EIO: a read error,
 * -ECANCELED). tlc_timeline_t.next. */
int tlc_hist_stream_next(void *s, const tlc_event_t **evs);
/* Starts again from the first file with a fresh evlog mapping (the engine, if still there, is
 * kept). tlc_timeline_t.rewind. */
int tlc_hist_stream_rewind(void *s);
/* The stream as a timeline. */
tlc_timeline_t tlc_hist_stream_timeline(tlc_hist_stream_t *s);
/* The decoders' counters of every file so far. */
void tlc_hist_stream_counters(const tlc_hist_stream_t *s, tlc_dec_counters_t *out);

/* The segments of a target chosen for a range. */
typedef struct tlc_hist_files {
  char **files;        /* owned paths, in sequence order */
  uint8_t *gap_before; /* per file */
  size_t n;
  size_t listed;    /* segments found before the range was applied */
  tlc_format_t fmt; /* the first chosen segment's format (manifest), or NONE */
  int64_t from, to; /* the stream's event filter [from, to] (target-time ranges) */
  int has_from, has_to;
  int has_wall; /* a wall-clock range: [wall_since, wall_until) of arrival (open ends: MIN/MAX) */
  int64_t wall_since, wall_until;
} tlc_hist_files_t;

/* How a target-time range finds its clock epoch (store/seg/epochs.h): the target's clock
 * restart threshold, and the live target's epoch that numbers the newest segment's (-1: not
 * live; epochs then count from 0 at the oldest segment kept). */
typedef struct tlc_hist_epoch_ctx {
  int64_t threshold_ns;
  int64_t live_epoch;
} tlc_hist_epoch_ctx_t;

/* Lists `target`'s segments under `state_dir` and keeps those a range can touch: for a
 * target-time range the segments of its clock epoch (range->epoch; -1: the newest segment's),
 * every one (the index skips the rest while reading; from/to are set), the ones
 * whose arrival span (opened .. sealed; an open one until now_ns) meets a wall-clock range.
 * Disconnect gaps at segment boundaries become gap_before. Returns 0 (f->n may be 0: no
 * segment in the range), -ENOENT (no segments of that target), TLC_ENOMEM or -errno; err says
 * why. `skipped` (may be NULL) gets a message per unreadable segment (left out). */
int tlc_hist_select(const char *state_dir, const char *target, const tlc_when_range_t *range,
                    const tlc_hist_epoch_ctx_t *ec, int64_t now_ns, tlc_hist_files_t *f,
                    tlc_hist_msg_cb skipped, void *ud, char *err, size_t errlen);
void tlc_hist_files_fini(tlc_hist_files_t *f);

/* The wall clock (Unix ns, whole seconds) a segment's file name gives (<UTC start>-<seq>...):
 * an open segment's arrival time, whose manifest is written when it is sealed. 0 when the
 * name has none. */
int64_t tlc_hist_name_time(const char *path);

/* A range query: the target's settings as the live target has them. */
typedef struct tlc_hist_query {
  const char *state_dir, *target;
  tlc_when_range_t range;
  int64_t now_ns;           /* for an open segment's arrival span */
  tlc_engine_opts_t eo;     /* context_area, windows, caps (eo.mapping ignored: see below) */
  const char *mapping_path; /* the target's mapping file (NULL: none); read by the query */
  tlc_evmap_opts_t evopts;  /* the evlog mapping's caps, as the target's */
  tlc_snap_opts_t so;       /* what the table holds (windows, quantiles, Neutral) */
  const atomic_int *cancel; /* may be NULL */
  int64_t live_epoch;       /* the live target's clock epoch (its clock_resets); -1: not live */
  /* the moment (moment.h): with moment_export (tlc_moment_export) the range's events are also
   * written in that export into r->moment, at most moment_max bytes (TLC_ELIMIT beyond) */
  int moment_export;
  tlc_moment_t moment;
  size_t moment_max;
} tlc_hist_query_t;

/* The result (tlc_hist_result_t) and the answer hook (tlc_hist_answer_t): result.h. */

/* Computes the statistics of q's range into r (tlc_hist_result_init'ed). Returns 0, or
 * -ENOENT (no segments of that target), TLC_ERANGE (a wall-clock range no segment meets),
 * TLC_EIO (a segment could not be read: r->err names it), -ECANCELED, TLC_ENOMEM; r->status
 * holds the same. A decode error in a segment ends the capture there, as in `tlcapd replay`:
 * the events before it are counted and r->err tells it (status 0). Blocking; any thread. */
int tlc_hist_compute(const tlc_hist_query_t *q, tlc_hist_result_t *r);

#endif
