/* budget.c - the daemon-wide memory budget (see budget.h).
 *
 * Invariant: used == sum of the charges granted minus the releases, whatever the kind. Cost:
 * O(1) per call; called only when an engine or a mapping grows (amortised: arrays double), never
 * per event in the steady state.
 */
#include "ingest/budget.h"

#include "base/err.h"
#include "engine/engine.h"

#include <unistd.h>

void tlc_budget_init(tlc_budget_t *b, uint64_t limit) {
  b->limit = limit;
  b->used = 0;
  b->peak = 0;
  b->refused = 0;
}

void tlc_budget_set_limit(tlc_budget_t *b, uint64_t limit) {
  b->limit = limit;
}

int tlc_budget_charge(tlc_budget_t *b, size_t bytes, int kind) {
  if (b->limit != 0 && kind != TLC_ACCT_FORCE) {
    uint64_t cap = kind == TLC_ACCT_GROW ? b->limit + b->limit / 8 : b->limit;
    if (b->used > cap || bytes > cap - b->used) {
      if (bytes > 0)
        b->refused++;
      return TLC_ELIMIT;
    }
  }
  b->used += bytes;
  if (b->used > b->peak)
    b->peak = b->used;
  return 0;
}

void tlc_budget_release(tlc_budget_t *b, size_t bytes) {
  b->used = bytes > b->used ? 0 : b->used - bytes;
}

uint64_t tlc_budget_default_limit(void) {
  long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
  return pages > 0 && psz > 0 ? (uint64_t)pages * (uint64_t)psz / 4 : 1ull << 30;
}
