/* engine.h - the statistics engine: SPEC section 2, incrementally, one instance per target.
 *
 * A target's mapped events go in, in arrival order (tlc_engine_push); a tlc_table_t comes out
 * (tlc_engine_snapshot) holding every statistic of SPEC section 2 as of the last event, with
 * open activations, stays and outside stretches counted up to the latest event time seen.
 *
 * Rows (see formats/stats.h):
 *  - code areas (handle types 0 and 1): one TLC_ROW_CODE row per (area, context) from the area's
 *    first event in that context; with more than one context, one more row per code area with
 *    context TLC_CTX_NEUTRAL: COUNT, anomalies and totals (OUTSIDE included) summed over its
 *    contexts; every dist (NET, GROSS, CALL, PERIOD, OUTSIDE) the union of its contexts' own
 *    samples (quantiles from the merged histograms; PERIOD and OUTSIDE never recomputed from a
 *    merged timeline: SPEC 2); windows likewise (counts summed, every kind merged); seq the
 *    largest of its contexts' rows;
 *  - data areas (types 2 and 4): one TLC_ROW_DATA row per area, context TLC_CTX_NONE;
 *  - state areas (types 3 and 5): one TLC_ROW_STATE row per (area, state value), TLC_CTX_NONE.
 *    A state area's value-less events (X with no current state) leave no row.
 * Contexts: bin10/bin11 without context_area: the core (TLC_CTXK_CORE, 0xFF = unknown); with
 * context_area: the value last written (W or E) to that handle on the event's core
 * (TLC_CTXK_TASK), or before any such write the core's own TLC_CTXK_CORE context; evlog: the
 * event's `thread` (TLC_CTXK_THREAD). Context indexes in a snapshot are in order of first use.
 *
 * Event handling: TLC_EV_NONE events are ignored (not counted in `events`); TLC_EVF_GAP on an
 * event means tlc_engine_gap() before it; types > 4 and handle nibbles > 5 count one anomaly and
 * nothing else (events that reach the engine have normally been validated by the decoder). With
 * context_area, events on that handle are also ordinary state-area events (its row(s) exist).
 *
 * Rules where SPEC section 2 leaves a choice (tests/oracle/oracle.c implements the same ones):
 *  - A context exists in the table from the first code-area event in it (data and state events
 *    are global and create none); Neutral rows exist when the table has more than one context.
 *  - Durations are differences of event times; each one that comes out negative counts 0 and
 *    one anomaly on its row: CALL, GROSS (with context_area), each NET running period (ended by
 *    S, X, truncation or a gap), PERIOD, an OUTSIDE stretch, a state stay. Open parts counted
 *    up to T in a snapshot are clamped at 0 without an anomaly (a snapshot changes nothing).
 *  - Other anomalies: X with no open activation (on the row), each activation truncated by an
 *    X (on its row), a non-W event on a data area (on the row), a W on a code area (on the
 *    row); with no row: X on a state area that is in no state, S/R on a state area, an event
 *    type > 4 or a handle nibble > 5. counters.anomalies is their total; a Neutral row's
 *    anomalies are the sum over its contexts.
 *  - S on a suspended or R on a running activation changes nothing. An OUTSIDE stretch ended
 *    by a partial R/S adds to the total only; ended by an E it is also a sample.
 *  - A gap closes with no anomaly; areas closed by it are not "outside" afterwards (their next
 *    stretch starts at their next closing); state areas are in no state after it; PERIOD starts
 *    are forgotten (data, state and code rows).
 *  - context_area: switched-in time is a per-context clock IN(t) = accumulated in-time +
 *    (t - since) while current on some core; a running period [a, b] adds IN(b) - IN(a) to NET,
 *    GROSS = IN(close) - IN(first event). A core's "no task yet" context is switched in from the
 *    core's first event (any event). The switch made by a W/E on context_area applies after
 *    that event itself is processed (the event is an ordinary state-area event too); a W on a
 *    variable whose mapping links it to context_area does not switch. context_area is ignored
 *    for evlog (its context is the thread).
 *  - context_area with a packed task variable (opts.pack, both masks set): a W/E value v is task
 *    v & id_mask in a state (formats/rtos.h). A running state switches the core to that task's
 *    context (TLC_CTXK_TASK, key = the task id); a stopped state of the core's current task
 *    switches the core back to its own "no task" context (TLC_CTXK_CORE), switched in until the
 *    next running write; a stopped state of another task, or a state in neither list, changes
 *    no context.
 *  - Without context_area GROSS == CALL: its samples are kept once (CALL's) and copied.
 *  - Clock restarts (SPEC 2): an event that is the first after a gap (a new connection, a
 *    resync), or that carries TLC_EVF_RESTART (the decoder saw the records after it confirm a
 *    step back), with a time more than clock_reset_ns below T starts a new clock epoch: a gap
 *    first (unless one just happened), then T becomes the event's time, every row's windows
 *    are emptied (what they held stays in the cumulative statistics), the switched-in clocks
 *    of the current contexts restart at that time, and counters.clock_resets (the epoch's
 *    number, 0 for the first) counts one. Counts and totals keep adding; no duration or
 *    sample spans two epochs (the gap). Any other step back is the ordinary out-of-order case.
 *
 * Quantiles: a log-bucket histogram per sample kind per row (when opts.histograms), relative
 * error <= 1% (see hist.h for the rank rule: nearest rank, the smallest sample s with at least
 * ceil(q * n) samples <= s, reported as the bucket's representative clamped to [min, max]).
 *
 * Windows: per row, opts.nwindows windows of window_ns[i] each, sliding in 10 steps of
 * window_ns[i] / 10 (integer division; window_ns[i] >= 10). At last event time T a window holds the
 * E events (code COUNT), entries (state COUNT), writes (data COUNT) and closed samples whose time t
 * (event time; closing time for a sample) has floor(t/step) > floor(T/step) - 10.
 *
 * Limits: at most max_areas rows-owning areas ((area, context) pairs for code areas, areas for
 * data, (area, value) pairs for state) and max_contexts contexts (with context_area, every task
 * value switched to and every core's "no task yet" context count); an event that would need one
 * more is counted in dropped_area_limit and otherwise ignored (a core switched to a task that
 * could not be created drops its code events until it switches to a known one). An activation stack
 * deeper than max_depth drops the new E or partial R/S (one dropped_area_limit, nothing else).
 *
 * Memory: allocation only when a new area, context, stack level, histogram value range or
 * window step first appears (amortised doubling; a row's window buckets grow by nwindows at a
 * time up to nwindows * 10); no per-event allocation in the steady state. Per row 512 bytes
 * (64-byte aligned, one cache line per sample kind with its histogram header), 400 for when
 * its extremes were taken (beside the rows: written only at a new MIN or MAX), about 64 for
 * its hash slot, plus with histograms 2 bytes (4 once a count passes 65535) per bucket spanned
 * (hist.h), plus with windows 256 bytes and 176 per window step that
 * holds samples of the row (steps that left their window are reused): from 256 + nwindows * 176
 * for a row hit in one step to 256 + nwindows * 10 * 176 for one hit in every step; and a 66 KiB
 * log of queued histogram samples per engine (counted in batches; a snapshot with quantiles and
 * tlc_engine_sync count it). Cost per event: O(1) expected (a hash lookup, a stack operation)
 * except X truncating k activations above it (O(k)) and S/R/X on a non-innermost activation
 * (O(depth) scan of the context's stack).
 *
 * Threads: an engine is owned by one thread (the daemon's loop thread); none of these functions
 * is thread-safe on the same engine; different engines are independent.
 */
#ifndef TLC_ENGINE_H
#define TLC_ENGINE_H

#include "formats/mapping.h"
#include "formats/rtos.h"
#include "formats/stats.h"
#include "formats/tlc_event.h"

#include <stddef.h>
#include <stdint.h>

typedef struct tlc_engine tlc_engine_t;

/* Memory accounting (for the daemon-wide budget). The engine asks charge_cb before every
 * allocation that grows what it holds and tells release_cb what it gives back (at the latest in
 * tlc_engine_free), so that charged minus released is always tlc_engine_mem().bytes. `kind`:
 *  TLC_ACCT_AREA  memory for a new area or context (a row, the arrays and hash table that index
 *                 them): refused, the event is dropped and counted in dropped_area_limit;
 *  TLC_ACCT_GROW  growth of an existing area (window buckets, histogram spans, an activation
 *                 stack): refused, that sample is missing from that window or histogram, or
 *                 (a stack) the activation is dropped and counted in dropped_area_limit;
 *  TLC_ACCT_FORCE the engine's own fixed part and snapshot scratch: must be granted (counted).
 * charge_cb returns 0 (granted and counted) or a negative error (refused, not counted). `bytes`
 * may be 0 (the engine asks whether GROW charges are granted at all right now). Called on the
 * engine's thread, from any engine function that may allocate. */
enum { TLC_ACCT_AREA = 0, TLC_ACCT_GROW = 1, TLC_ACCT_FORCE = 2 };
typedef struct tlc_engine_acct {
  int (*charge_cb)(void *ud, size_t bytes, int kind);
  void (*release_cb)(void *ud, size_t bytes);
  void *ud;
} tlc_engine_acct_t;

/* The tap: every sample as it closes (SPEC 2 and 13), for consumers that test or aggregate
 * samples one by one (daemon/budget's budgets, rollups) without a second pass over events.
 * One call per sample kind: an E..X activation gives NET, GROSS and CALL (GROSS also without
 * context_area, equal to CALL, as the snapshot reports it), an E gives PERIOD (and OUTSIDE
 * when its area was outside), a W on a data area PERIOD, a state stay NET, a state entry
 * PERIOD. Exactly the samples a snapshot's dists count: per row and kind, the tap's number,
 * minimum and maximum of values are the snapshot's n, min and max (but those inside the tap's
 * band, when it set one: tlc_engine_tap_band_fn). Durations that came out negative are 0, as
 * in the dists. */
typedef struct tlc_engine_sample {
  uint32_t handle;  /* the area */
  uint32_t context; /* table context index as snapshots report it for this row (code rows);
                       TLC_CTX_NONE for data and state rows */
  uint8_t kind;     /* enum tlc_kind: TLC_NET, TLC_GROSS, TLC_CALL, TLC_PERIOD, TLC_OUTSIDE */
  uint8_t row_kind; /* enum tlc_row_kind */
  uint64_t state;   /* state rows: the state value; 0 otherwise */
  int64_t value;    /* the sample (ns, >= 0) */
  int64_t start;    /* target time (ns) of the event that started it: the E (NET, GROSS, CALL),
                       the previous E / entry / write (PERIOD), the X that made the area
                       outside (OUTSIDE), the state's entry (a state's NET) */
  int64_t end;      /* target time of the event that closed it */
  uint64_t epoch;   /* the clock epoch of start and end: counters.clock_resets (a sample never
                       spans two) */
  uint32_t cookie;  /* what tap_want set for this row (0 without tap_want) */
  uint64_t seq_start, seq_end; /* change sequence (tlc_engine_seq) of the starting and of the
                                  closing event: where the sample's records are, for a caller
                                  that maps sequences to stored events (0: unknown, e.g. an
                                  activation opened before a checkpoint of an older build) */
} tlc_engine_sample_t;
/* A tap's answer for a sample (kind < TLC_TAP_GAP): 0, or n > 0 to have the sample tagged in the
 * engine's sample log, when it is on (tlc_engine_set_slog: a TLC_SLOG_TAG entry next to the
 * sample's own entries, in order with the samples): how a consumer of the log learns of what a tap
 * found in a sample (the budget watch: its n violations) with no call of its own. With several taps
 * their answers add up. A mark's answer is ignored. */
typedef int (*tlc_engine_tap_fn)(void *ud, const tlc_engine_sample_t *s);
/* Besides samples, the tap gets three kinds of marks (kind >= TLC_NKINDS):
 *  TLC_TAP_COUNT an event that counts in its row's COUNT (an E of a code area, a state entry, a
 *                data write): value 1, start = end = its time, seq_start = seq_end = its
 *                sequence (what a rate budget counts);
 *  TLC_TAP_GAP   tlc_engine_gap (also the one a clock restart makes): handle 0, context
 *                TLC_CTX_NONE, row_kind 0xFF, value 0, start = end = the last event time; no
 *                sample spans it;
 *  TLC_TAP_WALL  tlc_engine_set_wall_ms: value the wall clock (Unix ms; 0: not known) the
 *                samples up to the next one arrived at (a chunk's), so that a tap that stamps
 *                what it sees reads no clock of its own; handle 0, context TLC_CTX_NONE,
 *                row_kind 0xFF, start = end = the last event time.
 * Marks go to every tap, whatever it wants. */
#define TLC_TAP_COUNT TLC_NKINDS
#define TLC_TAP_GAP   (TLC_NKINDS + 1)
#define TLC_TAP_WALL  (TLC_NKINDS + 2)
/* Which of a row's samples a tap wants: a mask, bit k for kind k (TLC_NET..TLC_OUTSIDE and
 * TLC_TAP_COUNT), and *cookie, a number the engine keeps with the row and hands back in each of
 * its samples (tlc_engine_sample_t.cookie: the consumer's own index of the row, no lookup).
 * Asked once per row, at its first sample or count after the tap was set
 * (tlc_engine_opts_t.tap or tlc_engine_set_tap), so that code rows no consumer watches cost
 * nothing (the rows a tap watches take the engine's out-of-line path) and data and state rows
 * one test per event. Gaps are always delivered. */
typedef unsigned (*tlc_engine_tap_want_fn)(void *ud, uint32_t handle, uint32_t context,
                                           uint8_t row_kind, uint64_t state, uint32_t *cookie);
/* A tap's band (opts.tap_band, tlc_engine_set_tap, tlc_engine_add_tap): for the row whose cookie
 * tap_want set, and a kind k it wants (TLC_NET..TLC_OUTSIDE), the values the tap would do nothing
 * with: 1 and [*lo, *hi] (samples of that kind with lo <= value <= hi are then not handed to the
 * tap at all), or 0: every sample. Asked right after tap_want, for each kind it wanted; with one
 * tap only (with several, every wanted sample goes to each). A budget watch's band is the
 * intersection of its budgets' [min, max] on the row: a sample inside passes every one, and costs
 * the engine a compare instead of a call. Counts (TLC_TAP_COUNT) and marks have no band. */
typedef int (*tlc_engine_tap_band_fn)(void *ud, uint32_t cookie, unsigned kind, int64_t *lo,
                                      int64_t *hi);

typedef struct tlc_engine_opts {
  uint8_t has_context_area; /* 1: RTOS mode, the context is the value of context_area */
  uint32_t context_area;    /* RTOS task-state area handle (valid when has_context_area) */
  tlc_ctxpack_t pack;       /* packed task variable (formats/rtos.h; masks 0: not packed) */
  uint32_t nwindows;        /* 0..TLC_MAX_WINDOWS rolling windows (default 3) */
  int64_t window_ns[TLC_MAX_WINDOWS]; /* window lengths, each >= 10 ns (default 1 s, 10 s, 60 s) */
  size_t max_areas;             /* cap on rows-owning areas (default 1,000,000; 0 = default) */
  size_t max_contexts;          /* cap on contexts (default 65,536; 0 = default) */
  size_t max_depth;             /* activation stack cap per context (default 4,096; 0 = default) */
  uint8_t histograms;           /* 1: quantile histograms kept (default 1) */
  const tlc_mapping_t *mapping; /* optional variable -> state handle links; borrowed, must
                                   outlive the engine or be replaced by tlc_engine_set_mapping */
  tlc_engine_acct_t acct;       /* memory accounting hook (charge_cb NULL: none; copied) */
  int64_t clock_reset_ns;       /* clock restart threshold (default 1 s; <= 0: never a restart) */
  tlc_engine_tap_fn tap;        /* called on the engine's thread for every sample as it closes
                                   (NULL: none, and no cost); must not call into the engine */
  void *tap_ud;                 /* tap's first argument (and tap_want's) */
  tlc_engine_tap_want_fn tap_want; /* NULL: every sample and count of every row */
  tlc_engine_tap_band_fn tap_band; /* NULL: no band (every wanted sample) */
} tlc_engine_opts_t;

/* Fills *o with the defaults: no context_area, no packing, 3 windows (1 s, 10 s, 60 s), 1,000,000
 * areas, 65,536 contexts, depth 4,096, histograms on, no mapping, clock restarts past 1 s. */
void tlc_engine_opts_default(tlc_engine_opts_t *o);

/* Creates an engine for a stream of format `fmt` (TLC_FMT_BIN10, TLC_FMT_BIN11 or
 * TLC_FMT_EVLOG) with options `o` (NULL: defaults; copied, except the borrowed mapping).
 * Returns 0 and sets *e (owned by the caller, release with tlc_engine_free), TLC_EINVAL for a
 * bad format or option (nwindows > TLC_MAX_WINDOWS, a window shorter than 10 ns), or
 * TLC_ENOMEM. */
int tlc_engine_new(tlc_engine_t **e, tlc_format_t fmt, const tlc_engine_opts_t *o);

/* Frees the engine and everything it owns. NULL is accepted. */
void tlc_engine_free(tlc_engine_t *e);

/* Processes ev[0..n), mapped events in arrival order (evlog: after tlc_evmap_map, the `thread`
 * field is the context). Never fails: what cannot be stored is counted (dropped_area_limit,
 * anomalies). Borrowed; nothing is kept past the call. */
void tlc_engine_push(tlc_engine_t *e, const tlc_event_t *ev, size_t n);

/* A gap (disconnect, resync, evlog overflow): every open activation and state stay is closed as
 * truncated at the last event time (totals only, no samples), every outside stretch ends there
 * (total only), and no PERIOD or OUTSIDE sample spans the gap (the next E starts afresh).
 * Counts one `gaps`. With context_area, the current task per core is kept (the next event's
 * context is unchanged). A gap before any event, or right after another gap, still counts.
 * The next event may start a new clock epoch (a restart: see the rules above). */
void tlc_engine_gap(tlc_engine_t *e);

/* Replaces the borrowed mapping (NULL: none) used for variable -> state links from the next
 * event on. */
/* Replaces the tap (opts.tap, opts.tap_want, opts.tap_band, opts.tap_ud; tap NULL: none) from
 * the next event on; every row's wanted kinds and bands are asked again. */
void tlc_engine_set_tap(tlc_engine_t *e, tlc_engine_tap_fn tap, tlc_engine_tap_want_fn want,
                        tlc_engine_tap_band_fn band, void *ud);
/* Several consumers (budgets, rollups) each attach a tap of their own: at most
 * TLC_ENGINE_TAPS at once, every one asked for its wanted kinds and cookie per row and called
 * only for the samples it wants. tlc_engine_add_tap returns 0 or TLC_ELIMIT (all taken);
 * tlc_engine_remove_tap detaches the tap whose ud is `ud` (none: nothing). Both from the next
 * event on. tlc_engine_set_tap replaces them all with one (NULL: none). */
#define TLC_ENGINE_TAPS 4
int tlc_engine_add_tap(tlc_engine_t *e, tlc_engine_tap_fn tap, tlc_engine_tap_want_fn want,
                       tlc_engine_tap_band_fn band, void *ud);
void tlc_engine_remove_tap(tlc_engine_t *e, void *ud);

/* The sample log: a cheaper feed than a tap for a consumer that wants every sample of every row
 * (rollups). Each sample, as it closes, is appended inline to the engine's block of entries (no
 * call, no row lookup); the block goes to the log's function when full and at the end of every
 * tlc_engine_push (and at tlc_engine_slog_flush), so the log is empty between pushes. The block
 * itself is handed over: the function returns the block the engine goes on in, a fresh one when
 * it took x (x is then the function's: the one copy of the entries), or x (or NULL) when it did
 * not (the entries are lost: the engine starts x over with TLC_SLOG_ROWS and describes every row
 * again). Blocks are TLC_SLOG_BLOCK entries from tlc_malloc (the engine frees its last with
 * tlc_free). An entry names its row by index; marks among the entries (rk >= TLC_SLOG_MARKS)
 * tell the consumer what follows:
 *   TLC_SLOG_DEF + row_kind  the key of row `aux` (as tlc_engine_row_desc gives it): value
 *                   handle << 32 | context, end its state; right before the row's first sample
 *                   since the last TLC_SLOG_ROWS (the engine marks a row described), so that a
 *                   consumer never asks the engine;
 *   TLC_SLOG_ROWS   the row indexes of what follows may name other rows than those before (the
 *                   log set, maybe on another engine than before; a clear, a load, a new
 *                   mapping; a block not taken): keys given earlier are stale, every row is
 *                   described again. value: tlc_engine_epoch;
 *   TLC_SLOG_EPOCH  value: the sample epoch (tlc_engine_sample_t.epoch, the engine's clock
 *                   restarts) of the samples that follow: after every TLC_SLOG_ROWS and at every
 *                   clock restart;
 *   TLC_SLOG_NOTE   a note the log's consumer put in itself (tlc_engine_slog_note), in order
 *                   with the samples: a pair of entries like NET's, this one's aux, value and end
 *                   and the next one's value and end (its rk and aux not set); it counts as one
 *                   sample in tlc_engine_slog_samples;
 *   TLC_SLOG_TAG    a sample a tap tagged (its answer n, tlc_engine_tap_fn): aux the row (described
 *                   before, like a sample's), value its kind (TLC_NET..TLC_OUTSIDE, TLC_TAP_COUNT)
 *                   | n << 8, end its end (its epoch the log's); with the entries of its event,
 *                   right after the sample's own (before them on a code row, whose taps are served
 *                   first); it counts as n samples in tlc_engine_slog_samples.
 * Samples are exactly the tap's (tlc_engine_sample_t with kind < TLC_NKINDS): value, end and
 * epoch; every kind of every row (GROSS == CALL without context_area, as the tap gives it).
 * The three samples of a code activation closing (NET, GROSS, CALL of one row, one end) come
 * as a pair of entries, the only form NET has: an entry of kind TLC_NET (rk row * TLC_NKINDS +
 * TLC_NET, value NET's, end) is followed by one whose value is GROSS's and end CALL's (its rk
 * and aux not set: tlc_engine_slog_samples counts a block's samples). A sample entry's aux is
 * not set either. */
typedef struct tlc_engine_slent {
  uint32_t rk;   /* row * TLC_NKINDS + kind, or a mark */
  uint32_t aux;  /* a DEF mark's: the row (not set in a sample's) */
  int64_t value; /* the sample's value; a mark's argument */
  int64_t end;   /* target time the sample closed; a mark's: the engine's last event time */
} tlc_engine_slent_t;
#define TLC_SLOG_MARKS 0xFFFFFFF0u
#define TLC_SLOG_DEF   0xFFFFFFF0u /* + row_kind (enum tlc_row_kind, < 8) */
#define TLC_SLOG_EPOCH 0xFFFFFFFFu
#define TLC_SLOG_ROWS  0xFFFFFFFEu
#define TLC_SLOG_NOTE  0xFFFFFFF8u
#define TLC_SLOG_TAG   0xFFFFFFF9u
#define TLC_SLOG_BLOCK 1024 /* entries of a block */
/* The samples of entries x[0, n) (a NET pair counts 3, a note's pair 1, a tag its n, another mark
 * 0). */
static inline uint64_t tlc_engine_slog_samples(const tlc_engine_slent_t *x, size_t n) {
  uint64_t k = 0;
  for (size_t i = 0; i < n; i++) {
    if (x[i].rk >= TLC_SLOG_MARKS) {
      if (x[i].rk == TLC_SLOG_NOTE) {
        k++;
        i++;
      } else if (x[i].rk == TLC_SLOG_TAG) {
        k += (uint64_t)x[i].value >> 8;
      }
      continue;
    }
    if (x[i].rk % TLC_NKINDS == TLC_NET) {
      k += 2;
      i++;
    }
    k++;
  }
  return k;
}
typedef tlc_engine_slent_t *(*tlc_engine_slog_fn)(void *ud, const tlc_engine_t *e,
                                                  tlc_engine_slent_t *x, size_t n);
/* Sets the log's function (NULL: the log off, the default: the engine then costs one predicted
 * branch per sample for it). What was queued for the previous function goes to it first. 0, or
 * TLC_ENOMEM (the log stays as it was). One log per engine; the taps are independent of it. */
int tlc_engine_set_slog(tlc_engine_t *e, tlc_engine_slog_fn fn, void *ud);
/* Hands what the log holds to its function now (nothing queued, no log: nothing). */
void tlc_engine_slog_flush(tlc_engine_t *e);
/* Appends a note (TLC_SLOG_NOTE: aux, v0 and e0 in the first entry, v1 and e1 in the second) to
 * the log when the log is fn's with ud, in order with the samples: from a tap during
 * tlc_engine_push it goes with the push's block (no call: what a rate budget's violation costs
 * its rollup; a violation of one sample is the sample's tag, TLC_SLOG_TAG), elsewhere it is handed
 * over at once. 0, or TLC_EINVAL when the log is off or another's (nothing appended). */
int tlc_engine_slog_note(tlc_engine_t *e, tlc_engine_slog_fn fn, const void *ud, uint32_t aux,
                         int64_t v0, int64_t e0, int64_t v1, int64_t e1);
/* Row `row`'s key as the tap gives it (tlc_engine_sample_t: handle, context, row_kind, state).
 * 0, or TLC_EINVAL when there is no such row. */
int tlc_engine_row_desc(const tlc_engine_t *e, uint32_t row, uint32_t *handle, uint32_t *context,
                        uint8_t *row_kind, uint64_t *state);
void tlc_engine_set_mapping(tlc_engine_t *e, const tlc_mapping_t *m);

typedef struct tlc_snap_opts {
  uint64_t since_seq;   /* 0: all rows; else only rows changed after that sequence: an event
                           changed them, or T grew while they had an open part (activation, stay,
                           outside stretch); Neutral rows when any of their contexts' rows is.
                           Rows whose windows only slid with T are not included. */
  uint8_t windows;      /* 1: fill row.win[] (row.nwin = nwindows); TLC_SNAP_WKINDS | bit k:
                           the windows' k[k] of those kinds only (counts always) */
  uint8_t neutral;      /* 1: add Neutral rows when there is more than one context */
  uint8_t quantiles;    /* 1: fill dist.q[] and has_q from the histograms (when kept);
                           TLC_SNAP_QKINDS | bit k (enum tlc_kind): of those kinds only (the
                           dashboard's p99 of NET beside GROSS and CALL averages, in one
                           snapshot) */
  uint8_t neutral_only; /* 1: with more than one context, code areas come as Neutral rows only
                           (no per-context rows; implies neutral) */
  uint8_t kinds;        /* bit k (enum tlc_kind): fill dist[k], its quantiles and the windows'
                           k[k]; the other kinds' are left empty. 0: every kind;
                           TLC_SNAP_KINDS_SET alone: none. Totals, counts and values are
                           always filled. */
} tlc_snap_opts_t;
#define TLC_SNAP_KINDS_SET 0x80u /* marks a kinds mask that may be empty */
#define TLC_SNAP_QKINDS    0x80u /* marks a quantiles value that is a mask of kinds */
#define TLC_SNAP_WKINDS    0x80u /* marks a windows value that is a mask of kinds */

/* Clears `t` (tlc_table_init'ed by the caller; its allocations are reused) and fills it: every
 * context in order of first use, the rows sorted with tlc_table_sort, format, first/last time,
 * context_area, windows configuration, engine counters (decoder counters are left 0 for the
 * caller), seq. Open parts are counted up to last_time without changing any statistic (the engine
 * is not const only because the histogram samples it queues are counted first, when quantiles are
 * asked). `so` NULL: all rows, windows, neutral and quantiles on. Returns 0 or TLC_ENOMEM (t is
 * then partly filled; still safe to fini). Cost O(rows + contexts * depth). */
int tlc_engine_snapshot(tlc_engine_t *e, tlc_table_t *t, const tlc_snap_opts_t *so);

/* tlc_engine_snapshot of a part of the table: only the areas with lo <= handle < hi (their
 * Neutral rows included; the header - contexts, counters, times, seq - whole). For statistics
 * sent in parts (tlc_engine_handle_split gives the parts' bounds). Same returns and cost, except
 * without Neutral rows (so->neutral off, or one context): then the rows are taken in table
 * order from an index the engine keeps (re-sorted only after rows were added or got their
 * context), so only the part's rows are looked at and none is moved after its copy:
 * O(rows in the part + log rows + contexts * depth), plus O(rows) 4-byte stores. */
int tlc_engine_snapshot_part(tlc_engine_t *e, tlc_table_t *t, const tlc_snap_opts_t *so,
                             uint64_t lo, uint64_t hi);

/* Where the part of the table that starts at handle `lo` ends, for snapshots taken in parts
 * (tlc_engine_snapshot_part): *hi such that the rows with lo <= handle < *hi are at most n
 * (a single area with more rows than n makes a part of its own: *hi = lo + 1), 2^32 when
 * every row from lo on fits. O(rows log n) time, n * 4 bytes for the call. 0 or TLC_ENOMEM. */
int tlc_engine_handle_split(const tlc_engine_t *e, uint64_t lo, size_t n, uint64_t *hi);
/* The same for a delta snapshot (tlc_snap_opts_t.since_seq = since): only rows that may be in
 * it are counted (changed after `since`, or with an open part while T grew; state rows always),
 * so a delta with few changes is one part whatever the size of the table. After a snapshot
 * without Neutral rows (the engine's row order index valid), O(rows from lo to *hi) time and
 * no allocation. */
int tlc_engine_handle_split_since(const tlc_engine_t *e, uint64_t lo, size_t n, uint64_t since,
                                  uint64_t *hi);

/* Counts the histogram samples the engine has queued (they are counted in batches; a snapshot
 * with quantiles does this itself). Changes no statistic; allocates only when a queued sample
 * falls outside its histogram's span so far. */
void tlc_engine_sync(tlc_engine_t *e);
/* The change sequence: incremented by every event that changes a row and by every gap. A row's
 * `seq` is the sequence value of its last change. */
uint64_t tlc_engine_seq(const tlc_engine_t *e);
/* The wall clock (Unix ms) new extremes are stamped with (tlc_at_t.wall_ms) until the next
 * call: the daemon sets it per received chunk (a coarse arrival time); 0, the default: not
 * known (offline replay). The taps get it too, as a TLC_TAP_WALL mark. */
void tlc_engine_set_wall_ms(tlc_engine_t *e, int64_t ms);

/* A new cumulative extreme (a MIN or MAX of a row: stats.h tlc_at_t), to be located in storage
 * (daemon/xlocd.c): engine state `epoch`, an engine row, its kind, 1 MAX / 0 MIN, and the
 * change sequences of its first and closing events. */
typedef struct tlc_engine_xnew {
  uint64_t epoch;
  uint32_t row;
  uint8_t kind, max;
  uint64_t seq_start, seq_end;
} tlc_engine_xnew_t;
/* Copies the extremes made new since the last call (up to 16 per call: beyond, not listed)
 * into x[0..max), each as it is now, and forgets them. Returns how many. O(16). */
size_t tlc_engine_xnew(tlc_engine_t *e, tlc_engine_xnew_t *x, size_t max);
/* Sets the stored location (seg_first, off_first, seg_last, off_last = loc[0..3]) of extreme
 * x when it is still the extreme x names (same engine state and sequences). 1: set, 0: not. */
int tlc_engine_xlocate(tlc_engine_t *e, const tlc_engine_xnew_t *x, const uint64_t loc[4]);

/* A number no other engine state of this process has had: taken anew at tlc_engine_new,
 * tlc_engine_clear, tlc_engine_load and tlc_engine_set_mapping. (epoch, seq) names one state
 * of the statistics and of the names they are exported under, so an exporter may keep what it
 * rendered from that state until either changes (daemon/http's /metrics). Any thread. */
uint64_t tlc_engine_epoch(const tlc_engine_t *e);

/* The engine's counters (events, anomalies, dropped_area_limit, gaps; decoder fields 0).
 * Valid until the next call that changes the engine. */
const tlc_counters_t *tlc_engine_counters(const tlc_engine_t *e);

/* Where events not yet pushed will start a new clock epoch (a restart, see the rules above),
 * so that storage can cut its segment right there: tlc_engine_clock_init takes the engine's
 * clock as it is; tlc_engine_clock_scan returns the index of the first of ev[0..n) that
 * restarts it, or n, with *c advanced past that event (or past all n), so that a scan of the
 * rest goes on from there. Change nothing in the engine. O(n). */
typedef struct tlc_engine_clock {
  int state;
  int64_t last;
  int64_t threshold;
} tlc_engine_clock_t;
void tlc_engine_clock_init(const tlc_engine_t *e, tlc_engine_clock_t *c);
size_t tlc_engine_clock_scan(tlc_engine_clock_t *c, const tlc_event_t *ev, size_t n);

/* Latest event time seen (0 before any event); in the current clock epoch
 * (counters.clock_resets). */
int64_t tlc_engine_last_time(const tlc_engine_t *e);

/* The figures /metrics exports of every code area, without a snapshot (no table rows to fill,
 * so a scrape of many targets stays cheap): COUNT, the NET total (open activations' running
 * time up to the last event included, as in a snapshot) and the NET samples' number and sum.
 * One entry per (area, context) when the engine has one context, else one per area with
 * context TLC_CTX_NEUTRAL (summed over its contexts, as the Neutral row). Entries in no
 * particular order, into *out (grown as needed, capacity *cap; the caller frees it with
 * tlc_free); *n of them. Returns 0 or TLC_ENOMEM. Cost O(rows + contexts * depth). */
typedef struct tlc_engine_code_net {
  uint32_t handle;
  uint32_t context; /* table context index, or TLC_CTX_NEUTRAL */
  uint64_t count;   /* E events */
  int64_t net_total;
  uint64_t n;   /* NET samples (closed activations, E to X) */
  int64_t sum;  /* their sum */
  uint32_t ref; /* where the engine finds its rows (tlc_engine_code_hist) */
} tlc_engine_code_net_t;
int tlc_engine_code_net(tlc_engine_t *e, tlc_engine_code_net_t **out, size_t *n, size_t *cap);
/* Context `index` (a table context index, as in a snapshot) into *c. 0 or TLC_ERANGE. */
int tlc_engine_context(const tlc_engine_t *e, uint32_t index, tlc_ctx_t *c);

/* Exact bucket counts for exporters (the Prometheus histogram of daemon/http): the largest value
 * (ns) of the engine's histogram bucket whose bounds are nearest to x: x itself below 256, else
 * within 1 % of x. Such values are the edges a tlc_engine_hist_cum caller may ask for. Pure. */
int64_t tlc_engine_hist_edge(int64_t x);

/* Cumulative sample counts of sample kind `k` (enum tlc_kind) of the code row (handle,
 * context): context is a table context index (as in a snapshot) or TLC_CTX_NEUTRAL (the union
 * of the area's contexts, as the Neutral row's quantiles). cum[i] = the number of the row's
 * histogram samples <= le[i]; le[0..nle) strictly ascending values of tlc_engine_hist_edge, so
 * that every count is exact. Counts queued samples first (as tlc_engine_sync). Returns 0,
 * TLC_EINVAL (histograms off, k out of range, le not ascending edges) or TLC_ERANGE (no such
 * row). Cost O(the row's histogram spans + nle). */
int tlc_engine_hist_cum(tlc_engine_t *e, uint32_t handle, uint32_t context, unsigned k,
                        const int64_t *le, size_t nle, uint64_t *cum);

/* tlc_engine_hist_cum of the row(s) of x, an entry of tlc_engine_code_net, found through x->ref
 * without a lookup by handle (a /metrics scrape asks for thousands: the lookups' cache misses
 * were a tenth of its time). When rows were added since that call, x->ref is not used: the
 * same as tlc_engine_hist_cum(e, x->handle, x->context, ...). Same returns. */
int tlc_engine_code_hist(tlc_engine_t *e, const tlc_engine_code_net_t *x, unsigned k,
                         const int64_t *le, size_t nle, uint64_t *cum);

/* tlc_engine_code_hist of each of xs[0..nx) (entries of the last tlc_engine_code_net), into
 * cum[i * nle .. (i + 1) * nle), ok[i] 1 when entry i's counts are there (0: as code_hist
 * failed for it), the rows and spans of 16 entries prefetched before they are walked
 * (a /metrics scrape walks thousands: their cache misses were most of its histogram time).
 * Returns 0, or TLC_EINVAL (histograms off, k out of range, le not ascending edges: every
 * ok[i] 0). */
int tlc_engine_code_hists(tlc_engine_t *e, const tlc_engine_code_net_t *xs, size_t nx, unsigned k,
                          const int64_t *le, size_t nle, uint64_t *cum, int *ok);

/* Memory accounting for benches and limits: bytes the engine holds right now (its own
 * allocations, capacity included), and the number of rows-owning areas and contexts. */
typedef struct tlc_engine_mem {
  size_t bytes;
  size_t areas; /* rows-owning areas: (area, context) code pairs, data areas, state values */
  size_t contexts;
  size_t hist_bytes;   /* of which histograms */
  size_t window_bytes; /* of which window buckets */
} tlc_engine_mem_t;
void tlc_engine_mem(const tlc_engine_t *e, tlc_engine_mem_t *m);

/* Checkpoints (engine/checkpoint.c; formats/ckbuf.h buffers). */
struct tlc_ckw;
struct tlc_ckr;
/* Appends the engine's whole state to w (the queued histogram samples are counted first, which
 * changes no statistic). O(rows + histogram spans + window buckets), about one memcpy per row;
 * no allocation but w's. Returns 0 or w's error (TLC_ENOMEM, TLC_ELIMIT). */
int tlc_engine_save(tlc_engine_t *e, struct tlc_ckw *w);
/* The same in parts, for a caller that must not stall (continuity: the loop thread): begin
 * writes the state's head (options, counters, contexts, stacks, state areas) and counts the
 * queued histogram samples; each step appends up to `units` rows (a row is about a memcpy of
 * its 512 + 400 bytes plus its histograms and live window buckets; 16 hash-table slots count as one
 * unit). The engine must not change between begin and the last step (no push, gap, clear:
 * asserted on its change sequence); reading it (snapshots) is fine. The bytes are exactly
 * those of tlc_engine_save. begin returns 0 or w's error; step 0 (more to do), 1 (done) or
 * w's error. The saver is plain data (no cleanup); loop thread of the engine. */
typedef struct tlc_engine_saver {
  int phase;
  size_t i;
  uint64_t seq;
  int64_t lim[TLC_MAX_WINDOWS];
} tlc_engine_saver_t;
int tlc_engine_save_begin(tlc_engine_t *e, tlc_engine_saver_t *sv, struct tlc_ckw *w);
int tlc_engine_save_step(tlc_engine_t *e, tlc_engine_saver_t *sv, struct tlc_ckw *w, size_t units);
/* Reads a state written by tlc_engine_save into `e`, a fresh engine (no event pushed) made
 * with the same format and options (the mapping aside: links are resolved again with e's).
 * Every count and index is checked. Returns 0; TLC_EINVAL (e not fresh, or the checkpoint's
 * format/options differ from e's: incompatible), TLC_EVERSION (another build's layout or byte
 * order), TLC_EFRAME (damaged), TLC_ENOMEM. After an error e is as fresh as before. */
int tlc_engine_load(tlc_engine_t *e, struct tlc_ckr *r);
/* Back to the state of a new engine with the same options (every row, context and counter
 * gone; memory released). */
void tlc_engine_clear(tlc_engine_t *e);

#endif
