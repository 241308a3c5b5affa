/* oracle.h - brute-force reference model of SPEC section 2, for the engine's property tests.
 *
 * Written independently of daemon/engine.c: it stores every event and, when asked for a table,
 * replays them all from scratch with explicit stacks and linear lists, keeps every sample
 * (value and time) and computes each statistic from those lists (sums, 128-bit squares, exact
 * nearest-rank quantiles from sorted samples, window membership by filtering sample times).
 * No caps (max_areas, max_contexts, max_depth are not modelled). Slow by design: O(events *
 * areas) per table. Tests only; single thread.
 */
#ifndef TLC_ORACLE_H
#define TLC_ORACLE_H

#include "formats/mapping.h"
#include "formats/stats.h"
#include "formats/tlc_event.h"

#include <stddef.h>
#include <stdint.h>

typedef struct tlc_oracle tlc_oracle_t;

typedef struct tlc_oracle_opts {
  uint8_t has_context_area;
  uint32_t context_area;
  /* packed task variable (SPEC 2): with both masks nonzero a context_area value v is task
   * v & id_mask in state (v & state_mask) >> (lowest set bit of state_mask); running[] states
   * switch the core to the task, stopped[] states (every other state when stopped_all) of the
   * core's current task switch it back to the core's "no task" context */
  uint64_t id_mask, state_mask;
  const uint64_t *running; /* borrowed */
  size_t nrunning;
  const uint64_t *stopped; /* borrowed */
  size_t nstopped;
  int stopped_all;
  uint32_t nwindows;
  int64_t window_ns[TLC_MAX_WINDOWS];
  const tlc_mapping_t *mapping; /* borrowed */
  int64_t clock_reset_ns;       /* clock restart threshold (SPEC 2); <= 0: no restarts */
} tlc_oracle_opts_t;

/* Creates an oracle. Returns 0 or TLC_ENOMEM / TLC_EINVAL. */
int tlc_oracle_new(tlc_oracle_t **o, tlc_format_t fmt, const tlc_oracle_opts_t *opts);
void tlc_oracle_free(tlc_oracle_t *o);
/* Stores the events (copied, evlog extension dropped). */
int tlc_oracle_push(tlc_oracle_t *o, const tlc_event_t *ev, size_t n);
/* Stores a gap. */
int tlc_oracle_gap(tlc_oracle_t *o);
/* Replays everything stored and fills t (cleared first): contexts, rows (sorted), counters
 * (events, anomalies, gaps), first/last time, windows (when `windows`), Neutral rows (when
 * `neutral` and more than one context), exact quantiles (has_q = 1 when n > 0). Row seq is 0.
 * Returns 0 or TLC_ENOMEM. */
int tlc_oracle_table(const tlc_oracle_t *o, tlc_table_t *t, int windows, int neutral);

/* Every sample of every row (not Neutral), replayed from scratch: for budgets (SPEC 13), whose
 * violations are the samples above a max or below a min. GROSS is reported also without
 * context_area (equal to CALL). */
typedef struct tlc_oracle_sample {
  uint32_t handle, context; /* context: table index, TLC_CTX_NONE for data/state rows */
  uint64_t state;
  uint8_t row_kind, kind;
  int64_t value, start, end; /* start: the time of its first event; end: its closing event's */
  uint64_t epoch;            /* clock epoch */
} tlc_oracle_sample_t;
void tlc_oracle_samples(const tlc_oracle_t *o, void (*fn)(void *ud, const tlc_oracle_sample_t *x),
                        void *ud);

#endif
