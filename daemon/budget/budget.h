/* budget/budget.h - timing budgets checked on every sample (SPEC section 13).
 *
 * A watch (tlc_bwatch_t) holds one target's budgets (formats/budget.h: those whose target glob
 * matches its name) and their violations. Attached to the target's engine (tlc_bwatch_attach),
 * it is the engine's tap: every sample of a watched row is tested as it closes, in the
 * engine's own pass (no second pass over events, no sampling, no window average):
 *  - net, gross, call, period, outside: a sample above `max` or below `min` is a violation
 *    (value, limit, start and end in target time with their clock epoch, the change sequences
 *    of its first and closing event);
 *  - rate: E events (entries, writes) of the row in tumbling windows of `window` target time
 *    aligned to multiples of it, each window tested when it closes (the first counted event at
 *    or after its end): a count above max or below min is a violation (start and end: the
 *    window's bounds). Windows with no event at all between two that had some are one violation
 *    each when min > 0 (counted exactly, kept as one record: value 0, start and end the
 *    stretch's). A gap or a clock restart ends the current window untested (it is incomplete),
 *    as is the last one at the end of the stream.
 * A row is an area in a context (a state value for a state area). Areas match by handle, by
 * mapped name or glob (through opts.area_name); contexts by name (opts.ctx_name) or any.
 *
 * Violations are counted exactly per (budget, area, context), never lost, up to
 * opts.max_keys distinct triples (then counted per budget only, and in `dropped_keys`); per
 * budget the last opts.keep (budget_keep, default 100) and the worst ever (the largest distance
 * from its limit) are kept. Each new violation goes to opts.on_violation (events, alerts).
 * Reloading budgets (tlc_bwatch_set_budgets) keeps the counts, the kept and the worst of every
 * budget whose name and definition are unchanged.
 *
 * The location of a violation is (seq_start, seq_end), the engine's change sequences; the
 * daemon resolves them to stored segment and byte offsets (daemon/budgetd.c) and sets them
 * with tlc_bwatch_locate.
 *
 * Memory: O(watched rows x their budgets + distinct triples + budgets x keep); nothing per
 * sample. A budget's kept violations take 64 bytes each in its ring (allocated at its first
 * violation), plus 32 once located, and 128 for those kept whole (a dropped key, an epoch of
 * 2^29 or more, one taken back from a checkpoint or kept across a reload): at most
 * budgets x keep x 224 bytes. Cost per sample of a watched row: a hash lookup and one compare
 * per budget of its kind; rows no budget watches cost the engine one compare (tap_want).
 * Threads: a watch is owned by the thread of its engine (its ring slots are written with
 * non-temporal stores on x86-64: only that thread reads them without a fence).
 */
#ifndef TLC_DAEMON_BUDGET_H
#define TLC_DAEMON_BUDGET_H

#include "engine/engine.h"
#include "formats/budget.h"

#include <stddef.h>
#include <stdint.h>

typedef struct tlc_violation {
  uint32_t budget;             /* index in the watch's budgets (tlc_bwatch_budget) */
  uint32_t handle;             /* the area */
  uint32_t context;            /* table context index, TLC_CTX_NONE for data and state rows */
  uint8_t row_kind;            /* enum tlc_row_kind */
  uint8_t stat;                /* enum tlc_kind or TLC_BSTAT_RATE */
  uint8_t over;                /* 1: above max, 0: below min */
  uint64_t state;              /* state rows: the state value */
  int64_t value;               /* ns (a count for rate) */
  int64_t limit;               /* the max or min it broke */
  int64_t start, end;          /* target time, ns */
  uint64_t epoch;              /* clock epoch of start and end */
  int64_t wall_ms;             /* wall clock when it was seen (Unix ms; 0 in a replay) */
  uint64_t seq_start, seq_end; /* engine change sequences of its first and closing event */
  uint64_t count;              /* its number among its budget's violations (1 = the first) */
  /* where its records are stored (resolved from seq_start and seq_end when the target is
   * stored): segment sequence and byte offset of its first and of its closing record; seg 0:
   * not stored (yet) */
  uint64_t seg_first, off_first, seg_last, off_last;
} tlc_violation_t;

typedef struct tlc_bwatch_opts {
  size_t keep;     /* violations kept per budget (0: 100) */
  size_t max_keys; /* distinct (budget, area, context) counters (0: 100,000) */
  /* the mapped name of an area, or NULL (areas then match by handle only) */
  const char *(*area_name)(void *ud, uint32_t handle);
  /* the name of table context `context` into buf (core0, task1A, a task's RTOS name...) */
  const char *(*ctx_name)(void *ud, uint32_t context, char *buf, size_t len);
  /* called for every new violation, on the engine's thread, before tlc_engine_push returns */
  void (*on_violation)(void *ud, const tlc_violation_t *v);
  /* a violation's wall_ms; NULL: the stamp of the engine's chunk it came in
   * (tlc_engine_set_wall_ms, a TLC_TAP_WALL mark), else the kernel's coarse clock */
  int64_t (*wall_ms)(void *ud);
  void *ud;
} tlc_bwatch_opts_t;

typedef struct tlc_bwatch tlc_bwatch_t;

/* A watch for target `target` over the budgets of `set` that apply to it (copied). 0,
 * TLC_ENOMEM. */
int tlc_bwatch_new(tlc_bwatch_t **w, const char *target, const tlc_tbudget_set_t *set,
                   const tlc_bwatch_opts_t *o);
void tlc_bwatch_free(tlc_bwatch_t *w);
/* Makes w the tap of e (tlc_engine_set_tap with tlc_bwatch_tap, tlc_bwatch_want and
 * tlc_bwatch_band). */
void tlc_bwatch_attach(tlc_bwatch_t *w, tlc_engine_t *e);
/* Makes w one tap of e beside the others (tlc_engine_add_tap, after removing w if it was one):
 * 0 or TLC_ELIMIT. */
int tlc_bwatch_add_tap(tlc_bwatch_t *w, tlc_engine_t *e);
/* Sets o's tap, tap_want, tap_band and tap_ud to w's, for an engine made with w as its tap. */
void tlc_bwatch_engine_opts(tlc_bwatch_t *w, tlc_engine_opts_t *o);
/* Replaces the budgets (a reload): unchanged ones keep their counts, kept and worst. The
 * engine must be attached again (tlc_bwatch_attach) so that its rows are asked again. 0 or
 * TLC_ENOMEM (w unchanged). */
int tlc_bwatch_set_budgets(tlc_bwatch_t *w, const tlc_tbudget_set_t *set);

/* The engine's tap, want and band callbacks (ud = the watch). The band of a watched row's kind
 * is the intersection of its budgets' [min, max] of that stat (rate budgets have none): the
 * engine hands over only the samples outside it, which are the ones some budget can break.
 * The tap's answer is the number of violations of the sample itself (not a rate's, whose
 * window ends elsewhere): the engine tags the sample with it in its sample log (engine.h:
 * TLC_SLOG_TAG), where the rollups count them (daemon/budgetd.c). */
int tlc_bwatch_tap(void *ud, const tlc_engine_sample_t *s);
unsigned tlc_bwatch_want(void *ud, uint32_t handle, uint32_t context, uint8_t row_kind,
                         uint64_t state, uint32_t *cookie);
int tlc_bwatch_band(void *ud, uint32_t cookie, unsigned kind, int64_t *lo, int64_t *hi);

/* Reading. */
size_t tlc_bwatch_nbudgets(const tlc_bwatch_t *w);
const tlc_tbudget_t *tlc_bwatch_budget(const tlc_bwatch_t *w, size_t i);
/* A number for (this watch's target, budget i's name) that no other pair gets in this process
 * (a watch's budgets changed by tlc_bwatch_set_budgets take new ones): a key for tables that
 * would otherwise compare the names (vserve's rate limit). Never 0 (0: i has none). */
uint64_t tlc_bwatch_key(const tlc_bwatch_t *w, size_t i);
/* Violations kept per budget (opts.keep, or its default). */
size_t tlc_bwatch_keep(const tlc_bwatch_t *w);
/* Violations of budget i, ever. */
uint64_t tlc_bwatch_total(const tlc_bwatch_t *w, size_t i);
/* The worst violation of budget i, or NULL. */
const tlc_violation_t *tlc_bwatch_worst(const tlc_bwatch_t *w, size_t i);
/* The kept violations of budget i, oldest first, into out[0..max); returns how many. */
size_t tlc_bwatch_recent(const tlc_bwatch_t *w, size_t i, tlc_violation_t *out, size_t max);
/* A violation's REF `v:NAME:N` resolved (SPEC 13, docs/budgets.md "The moment"): the violation
 * of the budget named `name` whose count is n, among those still kept (the last `keep`, and
 * the worst), into *v. 0; -ENOENT: no budget of that name on this watch; TLC_ERANGE: that
 * violation is no longer kept (or never was). Either failure: a message in err saying which
 * budgets there are, or which violations are kept. */
int tlc_bwatch_find(const tlc_bwatch_t *w, const char *name, uint64_t n, tlc_violation_t *v,
                    char *err, size_t errlen);
/* Sets the stored location (seg_first, off_first, seg_last, off_last = loc[0..3]) of
 * violation number `n` of budget i, in the kept ones and the worst, when it is still kept and
 * its closing change sequence is seq_end (so a reload that numbered a new violation the same
 * is not touched). Returns how many copies were set (0: none kept). O(1) when every violation
 * since n was counted once and kept (a storm's), else O(opts.keep). */
int tlc_bwatch_locate(tlc_bwatch_t *w, size_t i, uint64_t n, uint64_t seq_end,
                      const uint64_t loc[4]);
/* Copies into dst's kept and worst violations the stored locations src's have for the same
 * violations (same budget name, number and closing sequence), where dst's has none. For a
 * saved watch taken back (tlc_bwatch_load) whose locations came later. Returns how many. */
size_t tlc_bwatch_copy_locations(tlc_bwatch_t *dst, const tlc_bwatch_t *src);
/* opts.ud of w. */
void *tlc_bwatch_ud(const tlc_bwatch_t *w);
/* The counters per (budget, area, context): calls fn for each, in no order. */
typedef struct tlc_bcount {
  uint32_t budget, handle, context;
  uint8_t row_kind;
  uint64_t state;
  uint64_t count;
} tlc_bcount_t;
void tlc_bwatch_counts(const tlc_bwatch_t *w, void (*fn)(void *ud, const tlc_bcount_t *c),
                       void *ud);
/* The watch across restarts (docs/budgets.md "Restarts"): its state as a versioned,
 * checksummed blob (the counts per budget and per (budget, area, context), the kept and the
 * worst, each budget with its definition) into *out (owned by the caller: tlc_free) and *len.
 * 0 or TLC_ENOMEM. Engine's thread. */
int tlc_bwatch_save(const tlc_bwatch_t *w, uint8_t **out, size_t *len);
/* Takes a saved state back into w, a watch that has seen nothing yet: each budget whose name
 * and definition are unchanged gets its counts, kept and worst (a changed or new one starts
 * afresh, as on a reload); counters past opts.max_keys count as dropped keys. Any length of
 * any bytes: 0; TLC_EFRAME (too short, checksum, malformed) or TLC_EVERSION with a message in
 * err, or TLC_ENOMEM: w is then left as it was, having seen nothing. */
int tlc_bwatch_load(tlc_bwatch_t *w, const uint8_t *p, size_t len, char *err, size_t errlen);
/* Violations not counted per triple (max_keys reached; still in the budget's total). */
uint64_t tlc_bwatch_dropped_keys(const tlc_bwatch_t *w);
/* Every violation of every budget. */
uint64_t tlc_bwatch_all(const tlc_bwatch_t *w);

#endif
