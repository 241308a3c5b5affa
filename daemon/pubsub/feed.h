/* feed.h - feeds (feed.c): the subscriptions of every subscriber with the same spec
 * share a feed, which ticks on its interval, keeps a mirror per target (engine/cursor.h: since
 * the last tick, in parts, a new generation starts over) and offers each tick's delta to its
 * subscriptions' slots. It sends only through sub.h (queues, errors, kicks). Also GetStats'
 * snapshots (tlc__ps_stats_build) and a slot's catch-up message. Loop thread.
 */
#ifndef TLC_PUBSUB_FEED_H
#define TLC_PUBSUB_FEED_H

#include "pubsub/msg.h"
#include "pubsub/spec.h"
#include "pubsub/sub.h"

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

/* A row of a mirror: its key, when it last changed (engine seq, and the feed's tick number),
 * and its encoded bytes buf[off .. off + len): a Snapshot.rows field, or columnar cells. */
typedef struct mrow {
  uint32_t handle, context;
  uint64_t state;
  uint64_t changed;
  uint64_t tick;
  size_t off, len;
} mrow_t;

/* What a feed serves of one target: every row its spec selects, encoded, as of its last tick,
 * in the table's key order. The tick's shared delta, the catch-up delta of a subscriber that
 * fell behind (rows changed after the seq it was last sent) and the full snapshot for one that
 * joins are all assembled from it, without asking the engine again and without encoding a row
 * twice; catch-ups end at the tick's seq, so the next tick's shared delta chains on. A
 * catch-up or full message is built once per tick and base, and shared. */
typedef struct feed_target {
  mrow_t *rows, *rows2; /* rows2, buf2: the next tick's, swapped in */
  size_t n, cap, cap2;
  uint8_t *buf, *buf2;
  size_t len, bcap, bcap2;
  tlc_cursor_t cur; /* the engine's rows merged so far: cur.seq the last tick's engine seq
                       (valid when cur.have), cur.gen the view's gen of the target */
  uint8_t connected;
  int64_t unix_ms;
  tlc_table_t hdr; /* the last tick's header fields (contexts, counters, times); no rows */
  msg_t *full;     /* full snapshot at seq, built when a subscriber joins */
  msg_t *catchup;  /* delta catchup_base -> seq, built when a slow subscriber catches up */
  uint64_t catchup_base;
} feed_target_t;

typedef struct feed {
  tlc_pubsub_t *ps;
  uint64_t id;
  uint64_t due_ns;  /* next tick (uv_hrtime), on the grid of the interval */
  uint64_t tickno;  /* ticks run */
  uint64_t tick_ns; /* uv_hrtime of the last tick */
  uint8_t dead;     /* released during a tick pass: freed at its end */
  spec_t *spec;
  LIST_HEAD(subn_list, subn) subs;
  size_t nsubs;
  feed_target_t *t;
  size_t nt;
  LIST_ENTRY(feed) link; /* in tlc_pubsub.fd.feeds */
} feed_t;

/* An engine snapshot shared by the feeds of one tick pass that ask for the same thing. */
typedef struct snap_cache {
  size_t idx;
  uint64_t since;
  uint8_t windows, neutral, quantiles, neutral_only, kinds, used;
  tlc_table_t t;
} snap_cache_t;

/* A part of a GetStats reply in parts: the areas with lo <= handle < hi, part number `no`,
 * `more` parts after it, `base` the previous part's seq; `seq` gets this part's. */
typedef struct stats_part {
  uint64_t lo, hi, base, seq;
  uint32_t no;
  int more;
} stats_part_t;

/* The feeds' share of the server (tlc_pubsub.fd). Loop thread. */
typedef struct tlc__ps_feeds {
  LIST_HEAD(feed_list, feed) feeds;
  size_t nfeeds;
  uint64_t next_feed_id;
  tlc_table_t scratch;
  tlc_pb_arena_t enc;    /* Row encoding scratch */
  uv_timer_t tick_timer; /* fires at the earliest feed due time */
  uint64_t epoch_ns;     /* the feeds' grids start here: same-interval feeds tick together */
  uint64_t next_due_ns;  /* earliest due time, UINT64_MAX with no feed */
  int ticking;           /* in a tick pass: feeds released meanwhile are freed at its end */
  snap_cache_t cache[SNAP_CACHE];
} tlc__ps_feeds_t;

int tlc__ps_stats_build(tlc_pubsub_t *ps, const spec_t *spec, size_t idx, uint32_t req,
                        stats_part_t *pt, msg_t **out);
void tlc__ps_feed_free(feed_t *f);
void tlc__ps_feed_unlink(feed_t *f);
int tlc__ps_feed_get(tlc_pubsub_t *ps, spec_t *spec, feed_t **out);
int tlc__ps_subn_slots(subn_t *sn, size_t n);
int tlc__ps_hdr_copy(tlc_table_t *h, const tlc_table_t *t);
/* tlc__ps_mirror_msg's modes: this tick's rows, rows changed since a seq, all. */
enum { MM_TICK, MM_SINCE, MM_FULL };
int tlc__ps_mirror_msg(feed_t *f, size_t idx, int mode, uint64_t base, msg_t **out);
void tlc__ps_feed_target_renew(feed_t *f, size_t idx, uint64_t gen);
/* The catch-up snapshot of slot idx of sn (sub's catchup hook): see feed.c. */
msg_t *tlc__ps_slot_catchup(tlc__ps_sub_t *s, subn_t *sn, size_t idx);
void tlc__ps_feed_tick(feed_t *f);
void tlc__ps_pass_end(tlc_pubsub_t *ps);
void tlc__ps_subn_free(tlc__ps_sub_t *s, subn_t *sn);
void tlc__ps_sub_unsubscribe_all(tlc__ps_sub_t *s);
/* Links a subscription to its feed and marks the targets whose full snapshot it needs;
 * returns the feed to tick now for it, or NULL. */
feed_t *tlc__ps_subn_attach(tlc__ps_sub_t *s, subn_t *sn);
/* Runs every feed's tick once (what the interval timers do), for the fuzzer. */
void tlc__ps_tick_all(tlc_pubsub_t *ps);

#endif
