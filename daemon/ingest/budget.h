/* budget.h - the daemon-wide memory budget of the targets' statistics (SPEC 7).
 *
 * One budget (`--memory-limit BYTES`, default a quarter of physical memory) covers every
 * target's engine (areas, histograms, windows, stacks, hash tables: charged through the
 * engine's accounting hook, engine.h tlc_engine_acct_t) and mapping. A charge is granted while
 * the bytes in use stay within the limit; past it:
 *  - memory for a new area (TLC_ACCT_AREA) is refused: the engine drops the event and counts it
 *    in the target's dropped_area_limit;
 *  - growth of an existing area (TLC_ACCT_GROW: window buckets, histogram spans, stacks) is
 *    granted up to limit + limit / 8 (the headroom that keeps the statistics of what is already
 *    counted whole), refused beyond;
 *  - TLC_ACCT_FORCE charges (an engine's fixed part, snapshot scratch) are always granted.
 * So `used` never passes limit + limit / 8 by more than the forced charges. Refusals are counted
 * (`refused`). Nothing is ever taken back from what was granted: existing statistics are kept.
 *
 * Loop thread only (the engines are); not thread-safe. Plain data: no allocation.
 */
#ifndef TLC_BUDGET_H
#define TLC_BUDGET_H

#include <stddef.h>
#include <stdint.h>

typedef struct tlc_budget {
  uint64_t limit;   /* bytes (0: no limit) */
  uint64_t used;    /* bytes granted and not yet released */
  uint64_t peak;    /* largest `used` seen */
  uint64_t refused; /* charges refused */
} tlc_budget_t;

/* Initialises an empty budget of `limit` bytes (0: unlimited). */
void tlc_budget_init(tlc_budget_t *b, uint64_t limit);

/* Changes the limit (SIGHUP); what is in use stays granted. */
void tlc_budget_set_limit(tlc_budget_t *b, uint64_t limit);

/* Asks for `bytes` of kind `kind` (engine.h TLC_ACCT_*). Returns 0 (granted and counted) or
 * TLC_ELIMIT (refused; counted in `refused` when bytes > 0). */
int tlc_budget_charge(tlc_budget_t *b, size_t bytes, int kind);

/* Gives back `bytes` granted before. */
void tlc_budget_release(tlc_budget_t *b, size_t bytes);

/* A quarter of physical memory (1 GiB when it cannot be read): the default limit. */
uint64_t tlc_budget_default_limit(void);

#endif
