/* when.h - the time spellings of SPEC section 10 (`--since T`, `--until T`, `?since=T`).
 *
 *   ns:N                      target time, nanoseconds, in the target's latest clock epoch
 *                             (TLC_WHEN_TARGET)
 *   epoch:K:N                 target time N in clock epoch K (SPEC 2: a board reset starts a new
 *                             one; `tlcap segments` shows each segment's) (TLC_WHEN_TARGET)
 *   2026-11-26T10:00:00Z      RFC 3339 UTC, fractions of a second allowed (TLC_WHEN_WALL)
 *   -2h                       relative to now: units s (or none), ms, m (min), h, d (TLC_WHEN_WALL)
 *
 * Pure: `now_ns` (wall clock, Unix ns) is passed in, so that the caller decides whose clock a
 * relative time refers to. Any thread.
 */
#ifndef TLC_WHEN_H
#define TLC_WHEN_H

#include <stddef.h>
#include <stdint.h>

enum tlc_when_kind { TLC_WHEN_NONE = 0, TLC_WHEN_TARGET = 1, TLC_WHEN_WALL = 2 };

/* A history range: since <= t < until on one clock; an open end when has_* is 0. */
typedef struct tlc_when_range {
  int kind;      /* enum tlc_when_kind of both bounds (NONE: neither given) */
  int64_t epoch; /* TARGET: the clock epoch both bounds are in; -1: the latest (ns:N) */
  int has_since, has_until;
  int64_t since, until; /* target ns (TARGET) or Unix ns (WALL) */
} tlc_when_range_t;

/* Parses one T into *kind and *v. Returns 0, or -1 when s is not one of the spellings. */
int tlc_when_parse(const char *s, int64_t now_ns, int *kind, int64_t *v);
/* The same, and *epoch: K of epoch:K:N, -1 for any other spelling. */
int tlc_when_parse_epoch(const char *s, int64_t now_ns, int *kind, int64_t *v, int64_t *epoch);

/* Builds *r from the optional spellings since/until (NULL: not given). Returns 0, or -1 with
 * a message in err (which bound, why): a bad spelling, bounds of different kinds, or since
 * after until (SPEC 10: a usage error). */
int tlc_when_range(const char *since, const char *until, int64_t now_ns, tlc_when_range_t *r,
                   char *err, size_t errlen);

/* The wall clock now, Unix ns. */
int64_t tlc_when_now(void);

#endif
