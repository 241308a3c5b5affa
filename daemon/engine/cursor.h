/* cursor.h - a reader's place in an engine's statistics: which snapshot to take next.
 *
 * Every reader that sends statistics again and again (a pubsub feed's mirror, a GetStats in
 * parts, the NATS publisher) follows the same rule: a snapshot of the rows changed since the seq
 * of the last one it completed, taken in parts of at most n rows (the handle ranges of
 * tlc_engine_handle_split_since), a full one at the start, after a failure, every `full_every`
 * of the caller's clock, and when the source it follows is replaced by another (a new
 * generation). The cursor holds that state and plans the parts; the caller takes each part's
 * snapshot (through whatever gives it the engine) and tells the cursor its seq.
 *
 * A pass:   tlc_cursor_begin, then tlc_cursor_next / take the part / tlc_cursor_took until
 *           tlc_cursor_next returns 0, then tlc_cursor_end(ok). A pass that is left without
 *           tlc_cursor_end (nothing worth sending) changes nothing: the next begins afresh.
 * Pure: no I/O, no libuv, no allocation; one thread at a time (the owner's).
 */
#ifndef TLC_ENGINE_CURSOR_H
#define TLC_ENGINE_CURSOR_H

#include "engine/engine.h"

#include <stddef.h>
#include <stdint.h>

/* Handles are 32-bit: the hi of the last part. */
#define TLC_CURSOR_END ((uint64_t)1 << 32)
/* tlc_cursor_begin's full_every for a reader that needs no full pass after its first. */
#define TLC_CURSOR_NEVER UINT64_MAX

/* Where the part that starts at handle lo ends for at most n rows of a snapshot since `since`
 * (tlc_engine_handle_split_since's contract). 0 or a negative error. */
typedef int (*tlc_cursor_split_fn)(void *ud, uint64_t lo, size_t n, uint64_t since, uint64_t *hi);

typedef struct tlc_cursor {
  /* across passes */
  uint64_t gen;     /* the generation of the source followed (tlc_cursor_renew) */
  uint64_t seq;     /* the seq of the last pass completed: the next delta's base (when have) */
  uint64_t full_at; /* the caller's clock at the last full pass completed */
  uint8_t have;     /* a pass was completed since the start, the last failure or renewal */
  /* the pass under way */
  uint8_t full, more;
  uint32_t no;   /* parts planned so far */
  uint64_t base; /* the pass's since_seq: 0 when full */
  uint64_t lo;   /* the next part starts at this handle */
  uint64_t prev; /* the seq of the last part taken (tlc_cursor_took) */
} tlc_cursor_t;

/* One part of a pass: the areas lo <= handle < hi. */
typedef struct tlc_cursor_part {
  uint64_t lo, hi;
  uint64_t since; /* tlc_snap_opts_t.since_seq for it: the pass's base (0: full) */
  uint64_t base;  /* Snapshot.base_seq: the pass's base for part 0, the previous part's seq after */
  uint32_t no;    /* Snapshot.part */
  uint8_t more;   /* parts follow */
  uint8_t full;   /* the pass is full (since 0) */
  uint8_t whole;  /* no split: one snapshot of everything (tlc_engine_snapshot), lo 0, hi END */
} tlc_cursor_part_t;

/* A cursor with nothing sent: its first pass is full. */
void tlc_cursor_init(tlc_cursor_t *c);

/* The next pass is full (what was sent is lost: a new connection). */
void tlc_cursor_want_full(tlc_cursor_t *c);

/* Follows generation `gen` of the source: when it differs from the one followed, the cursor
 * starts over (its next pass full, never a delta against another source's seq) and 1 is
 * returned; else 0. */
int tlc_cursor_renew(tlc_cursor_t *c, uint64_t gen);

/* Begins a pass at the caller's time `now`: full when nothing was completed yet or when
 * now - (the time of the last full pass) >= `full_every` in unsigned arithmetic (same unit; a
 * clock that went back makes it full; TLC_CURSOR_NEVER: never), else a delta since the last
 * completed pass's seq. Returns 1 when full, 0 for a delta. */
int tlc_cursor_begin(tlc_cursor_t *c, uint64_t now, uint64_t full_every);

/* Plans the pass's next part of at most `rows` rows with `split` (NULL: the pass is one whole
 * snapshot). Returns 1 with *p, 0 when the pass has no more parts, or split's error. */
int tlc_cursor_next(tlc_cursor_t *c, tlc_cursor_split_fn split, void *ud, size_t rows,
                    tlc_cursor_part_t *p);

/* The part just planned was taken at engine seq `seq` (the snapshot table's seq). */
void tlc_cursor_took(tlc_cursor_t *c, uint64_t seq);

/* Ends the pass: ok, it is completed (the next delta is since its last part's seq; a full pass
 * restarts the full cadence at `now`); not ok (a part was lost), the next pass is full. */
void tlc_cursor_end(tlc_cursor_t *c, int ok, uint64_t now);

/* The engine as a cursor's source: a split function over a tlc_engine_t * (ud), and the
 * snapshot of part p into t with options so (so->since_seq is set to p->since). */
int tlc_cursor_engine_split(void *ud, uint64_t lo, size_t n, uint64_t since, uint64_t *hi);
int tlc_cursor_engine_take(tlc_engine_t *e, const tlc_cursor_part_t *p, tlc_table_t *t,
                           tlc_snap_opts_t *so);

#endif
