/* vserve.h - budget violations served (SPEC 13, docs/budgets.md "Served"): what the subscriber
 * server (pubsub) and the NATS publisher (fleet) both send.
 *
 *  - tlc_vserve_fill: one tlc_violation_t (budget/budget.h) as a protobuf Violation, with its
 *    budget's name and stat and the area's and context's names read through the view;
 *  - tlc_vserve_reply: a watch's budgets as a ViolationsReply (the ViolationsRequest's answer);
 *  - tlc_vrate_t: at most TLC_VSERVE_RATE violations a second per (target, budget) leave the
 *    daemon as messages (a token bucket with a burst of as many), the others counted and
 *    carried, as `suppressed`, by the next one that goes. A storm of violations (every
 *    activation over budget) thus costs subscribers and the broker at most that many messages a
 *    second per budget, while the watch still counts every one. Each answer says until when the
 *    bucket stays empty (tlc_vrate_take_watch's *next_ms), so that a caller may hold the
 *    violations before then back and hand their number over later (held, tlc_vrate_hold).
 *
 * Memory: a limiter holds at most TLC_VRATE_KEYS (target, budget) entries (about 100 bytes
 * each plus the target's name); past that, the keys it has not seen share one overflow bucket
 * (their suppressed counts add up there, and go with the next of them sent). A reply is built
 * in memory it owns (tlc_vserve_reply_free).
 * Threads: the loop thread (the view's and the watch's owner).
 */
#ifndef TLC_VSERVE_H
#define TLC_VSERVE_H

#include "base/htab.h"
#include "budget/budget.h"
#include "view/view.h"

#include <stddef.h>
#include <stdint.h>
#include <tlcap.pb-c.h>

#define TLC_VSERVE_RATE 10   /* violations sent a second per (target, budget), and the burst */
#define TLC_VRATE_KEYS  4096 /* (target, budget) entries a limiter keeps */

/* Names of a violation for its message: the area's mapped name (a state row's "VARIABLE =
 * VALUE"), else its 8-digit handle; the context's display name (core0, task1A, a CONTEXTS or
 * RTOS name), "" for none. */
typedef struct tlc_vserve_names {
  char area[256];
  char context[128];
} tlc_vserve_names_t;

/* Fills *out (initialised here) with violation v of watch w on target `target`, names read
 * through view p (its find, mapping and context hooks; each may be NULL: handles and context
 * numbers then). Strings point into w, v's budget and *nm, which must outlive *out. */
void tlc_vserve_fill(Tlcap__Violation *out, const tlc_view_t *p, const char *target,
                     const tlc_bwatch_t *w, const tlc_violation_t *v, tlc_vserve_names_t *nm);

/* The ViolationsReply for target `target` (w may be NULL: no budgets): every budget of w (only
 * the one called `budget` when that is not NULL or ""), at most max_recent kept violations each
 * (the newest; 0: all kept). Returns 0 with *out set (free with tlc_vserve_reply_free), or
 * TLC_ENOMEM (nothing to free). */
int tlc_vserve_reply(Tlcap__ViolationsReply **out, const tlc_view_t *p, const char *target,
                     const tlc_bwatch_t *w, const char *budget, size_t max_recent);
void tlc_vserve_reply_free(Tlcap__ViolationsReply *r);

/* ---- the rate limit ---- */

typedef struct tlc_vrate_entry {
  uint64_t hash;
  char budget[TLC_BUDGET_NAME_MAX + 1];
  char *target;
  int64_t tokens; /* thousandths of a message */
  uint64_t last_ms;
  uint64_t suppressed; /* not sent since the last one sent */
} tlc_vrate_entry_t;

/* Entries found by their caller's key (tlc_vrate_take), direct-mapped: a storm asks the same
 * few keys again and again, and a hit costs neither a hash of the names nor their compare. */
#define TLC_VRATE_CACHE 256

typedef struct tlc_vrate {
  uint32_t rate;  /* messages a second and burst */
  tlc_htab_t idx; /* hash of (target, budget) -> index in e */
  struct {
    uint64_t key; /* 0: empty */
    size_t idx;   /* in e: entries stay where they are (none is ever removed) */
  } cache[TLC_VRATE_CACHE];
  tlc_vrate_entry_t *e;
  size_t n, cap;
  tlc_vrate_entry_t overflow; /* the keys past TLC_VRATE_KEYS (or past memory) */
  uint64_t sent, suppressed;  /* totals */
} tlc_vrate_t;

/* An empty limiter for `rate` messages a second per key (0: TLC_VSERVE_RATE). Allocates
 * nothing. */
void tlc_vrate_init(tlc_vrate_t *r, uint32_t rate);
void tlc_vrate_fini(tlc_vrate_t *r);
/* One violation of (target, budget) at monotonic time now_ms: 1 when it is to be sent, with
 * *suppressed = the ones of that key not sent since the previous one sent (then 0 again); 0
 * when it is not (counted). Never fails: no memory for a new key puts it in the overflow
 * bucket. key: the caller's number for this (target, budget) pair, which it never gives to
 * another pair (tlc_bwatch_key), so that a storm finds its entry without reading the names; 0
 * for none. */
int tlc_vrate_take(tlc_vrate_t *r, uint64_t key, const char *target, const char *budget,
                   uint64_t now_ms, uint64_t *suppressed);

/* The earliest monotonic ms at which entry e (r's) has a token again, 0 when it has one now:
 * until then each violation of its key is counted, not sent, whatever it asks. */
static inline uint64_t tlc__vrate_next(const tlc_vrate_t *r, const tlc_vrate_entry_t *e) {
  if (e->tokens >= 1000)
    return 0;
  /* `rate` thousandths a millisecond from last_ms on */
  return e->last_ms + (uint64_t)((1000 - e->tokens + (int64_t)r->rate - 1) / (int64_t)r->rate);
}

/* The token bucket of entry e (r's) at now_ms, after `held` violations of its key that its
 * caller held back since its previous call (counted as not sent): tlc_vrate_take's answer,
 * counted, with *next_ms = tlc__vrate_next after it. */
static inline int tlc__vrate_bucket(tlc_vrate_t *r, tlc_vrate_entry_t *e, uint64_t now_ms,
                                    uint64_t held, uint64_t *suppressed, uint64_t *next_ms) {
  int64_t cap = (int64_t)r->rate * 1000;
  int ok = 1;
  *suppressed = 0;
  e->suppressed += held;
  r->suppressed += held;
  if (now_ms > e->last_ms) {
    uint64_t dt = now_ms - e->last_ms;
    /* rate per second = rate per 1000 ms: `rate` thousandths a millisecond */
    e->tokens = dt >= 1000 ? cap : e->tokens + (int64_t)dt * r->rate;
    if (e->tokens > cap)
      e->tokens = cap;
    e->last_ms = now_ms;
  }
  if (e->tokens < 1000) {
    e->suppressed++;
    r->suppressed++;
    ok = 0;
  } else {
    e->tokens -= 1000;
    *suppressed = e->suppressed;
    e->suppressed = 0;
    r->sent++;
  }
  *next_ms = tlc__vrate_next(r, e);
  return ok;
}

/* key's slot in r->cache (Fibonacci hashing: a watch's keys are consecutive numbers). */
static inline size_t tlc__vrate_slot(uint64_t key) {
  return (size_t)((key * 0x9E3779B97F4A7C15ull) >> 56) % TLC_VRATE_CACHE;
}

/* tlc_vrate_take when key (not 0) is one the limiter has seen lately, inline, with `held`
 * and *next_ms as tlc_vrate_take_watch's. Returns as tlc_vrate_take does, or -1, having done
 * nothing, when key is not in the cache: then ask tlc_vrate_take_named. */
static inline int tlc_vrate_take_cached(tlc_vrate_t *r, uint64_t key, uint64_t now_ms,
                                        uint64_t held, uint64_t *suppressed, uint64_t *next_ms) {
  size_t c = tlc__vrate_slot(key);
  if (key == 0 || r->cache[c].key != key)
    return -1;
  return tlc__vrate_bucket(r, &r->e[r->cache[c].idx], now_ms, held, suppressed, next_ms);
}

/* tlc_vrate_take_watch for budget i of watch w with the names read (its key: tlc_bwatch_key),
 * out of line. -1, nothing counted, when w has no budget i. */
int tlc_vrate_take_named(tlc_vrate_t *r, const tlc_bwatch_t *w, size_t i, const char *target,
                         uint64_t now_ms, uint64_t held, uint64_t *suppressed, uint64_t *next_ms);

/* tlc_vrate_take for budget i of watch w on target `target`, with its key (tlc_bwatch_key(w, i),
 * which the caller read): inline when the cache knows the key (a storm's every violation but
 * its first), else with the names. What pubsub and fleet ask for a violation. `held`: the
 * violations of this key the caller held back since its previous call, which are counted as
 * not sent (0: none). *next_ms: the earliest monotonic ms at which one of this key can be sent
 * again, 0 when one could be now; a caller may hold back the violations before it (they would
 * be counted, not sent) and hand their number with its next call, or to tlc_vrate_hold. */
static inline int tlc_vrate_take_watch(tlc_vrate_t *r, const tlc_bwatch_t *w, size_t i,
                                       const char *target, uint64_t key, uint64_t now_ms,
                                       uint64_t held, uint64_t *suppressed, uint64_t *next_ms) {
  int ok = tlc_vrate_take_cached(r, key, now_ms, held, suppressed, next_ms);
  return ok >= 0 ? ok : tlc_vrate_take_named(r, w, i, target, now_ms, held, suppressed, next_ms);
}

/* `held` violations of budget i of watch w on target `target` (its key as for
 * tlc_vrate_take_watch) held back and not handed over since: counted as not sent, nothing
 * taken (a caller's last ones before its budgets change). */
void tlc_vrate_hold(tlc_vrate_t *r, const tlc_bwatch_t *w, size_t i, const char *target,
                    uint64_t key, uint64_t now_ms, uint64_t held);

/* Bytes the limiter holds. */
size_t tlc_vrate_bytes(const tlc_vrate_t *r);

#endif
