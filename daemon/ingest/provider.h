/* provider.h - what the subscriber server (pubsub) sees of the targets.
 *
 * pubsub never touches tlc_target_t: it asks a tlc_ps_provider_t, which the daemon builds over
 * its target registry (provider.c, tlc_provider_init). Target indexes are stable for the
 * daemon's life (targets are never removed while it runs), so an index found once stays valid.
 *
 * Every callback runs on the loop thread and returns promptly (no I/O). Strings returned in
 * tlc_ps_target_info_t stay valid until the next return to the event loop.
 *
 * Target events and live event batches reach pubsub through the observer interface of
 * target.h (tlc_targets_observe), not through this table.
 */
#ifndef TLC_PROVIDER_H
#define TLC_PROVIDER_H

#include "engine/cursor.h"
#include "engine/engine.h"
#include "formats/mapping.h"
#include "formats/stats.h"
#include "formats/tlc_event.h"
#include "formats/when.h"

#include <stddef.h>
#include <stdint.h>

typedef struct tlc_ps_target_info {
  const char *name;
  tlc_format_t format;
  int connected;
  const char *peer; /* "ip:port", device path or "" */
  tlc_counters_t counters;
  uint64_t connections, reconnects, gaps, decode_errors;
  int64_t last_connect_unix_ms, last_disconnect_unix_ms; /* 0 = never */
  uint64_t memory_bytes, memory_refused; /* memory budget: held by the target, refused to it */
  uint64_t areas;                        /* rows-owning areas of its statistics */
  uint64_t gen; /* changes when another target takes this index (a full table evicted one) */
  uint64_t seq; /* its engine's change sequence (tlc_engine_seq; 0 from a provider without) */
} tlc_ps_target_info_t;

/* The NATS publisher as ListTargets shows it (daemon/fleet/fleet.h). */
#define TLC_PS_NATS_REASONS 16
typedef struct tlc_ps_nats {
  const char *url;
  int connected, stream_ready;
  uint64_t published, dropped, reconnects; /* published: acknowledged by the JetStream stream */
  uint64_t publish_cpu_ns; /* the loop thread's CPU time spent building and handing over stats */
  uint64_t awaiting_ack;   /* published to the server, acknowledgement not yet in */
  size_t nreasons;         /* drops by reason: drop_reason[i] (e.g. "stream_full"), drops[i] */
  const char *drop_reason[TLC_PS_NATS_REASONS];
  uint64_t drops[TLC_PS_NATS_REASONS];
} tlc_ps_nats_t;

/* One stored segment for ListSegments (see tlc_segent_t and tlc_seginfo_t in segread.h). */
typedef struct tlc_ps_segment {
  uint64_t seq;
  int state; /* 1 open, 2 sealed, 3 compressed */
  char path[1200];
  uint64_t bytes, records, items, gaps;
  int64_t first_time, last_time, min_time, max_time;
  int64_t opened_wall_ns, closed_wall_ns;
  int reason, recovered;
} tlc_ps_segment_t;

struct tlc_hist_result; /* history.h */
struct tlc_hist_answer;

typedef struct tlc_ps_provider {
  /* Number of targets; indexes are 0..count-1. */
  size_t (*count)(void *ud);
  /* Fills *out for target `index`. 0 or TLC_ERANGE. */
  int (*info)(void *ud, size_t index, tlc_ps_target_info_t *out);
  /* Index of the target called `name`. 0 or TLC_ERANGE. */
  int (*find)(void *ud, const char *name, size_t *index);
  /* Statistics snapshot into `t` (tlc_table_init'ed by the caller), counters filled too. */
  int (*snapshot)(void *ud, size_t index, tlc_table_t *t, const tlc_snap_opts_t *so);
  /* Names for exports; NULL when the target has no mapping. */
  const tlc_mapping_t *(*mapping)(void *ud, size_t index);
  /* Storage rotate; TLC_EINVAL if no store. */
  int (*rotate)(void *ud, size_t index);
  /* Replace the target's mapping from a Text1 or XML export in buf[0..len); on error the old
   * one stays and err gets the reason (with line). */
  int (*load_mapping)(void *ud, size_t index, const char *buf, size_t len, char *err,
                      size_t errlen);
  /* Statistics in parts (both may be NULL: not supported): where the part that starts at
   * handle lo ends for at most n rows of a snapshot since `since` (0: full;
   * tlc_engine_handle_split_since), and the snapshot of the areas with lo <= handle < hi into
   * `t` (tlc_engine_snapshot_part), counters filled too. */
  int (*split)(void *ud, size_t index, uint64_t lo, size_t n, uint64_t since, uint64_t *hi);
  int (*snapshot_part)(void *ud, size_t index, tlc_table_t *t, const tlc_snap_opts_t *so,
                       uint64_t lo, uint64_t hi);
  /* The daemon-wide memory budget: limit, bytes in use, charges refused. May be NULL. */
  void (*memory)(void *ud, uint64_t *limit, uint64_t *used, uint64_t *refused);
  void *ud;
  /* The NATS publisher's state for TargetList (NULL when tlcapd does not publish): 0 when it
   * filled *out. Called with nats_ud. */
  int (*nats)(void *nats_ud, struct tlc_ps_nats *out);
  void *nats_ud;
  /* The stored segments of the target called `name` (live or not), at most `max`, the newest
   * kept: 0 with *out (tlc_free'd by the caller; NULL when none) and *n, *truncated set; or a
   * negative error. NULL hook: no storage. Loop thread (reads the state directory: a manifest
   * per segment). Called with segments_ud. */
  int (*segments)(void *segments_ud, const char *name, size_t max, tlc_ps_segment_t **out,
                  size_t *n, int *truncated);
  void *segments_ud;
  /* History (SPEC 10; daemon/history/histq.h): starts computing, off the loop, the statistics
   * of the stored records of the target called `name` (live or not) in `range`, with the
   * snapshot options `so` and the target's settings; `ans` (history.h, may be NULL) encodes
   * the answer off the loop too, into its ctx, which belongs to the query until done runs or,
   * cancelled, until the query frees it (ans->free). done(done_ud, r) runs later on the loop
   * with the result (r->status 0 or the error, r->err why; without ans the callee may take r->t
   * and r->names by swapping; with ans they are empty and ctx holds the answer). Returns 0 with
   * *job (for history_cancel), TLC_ELIMIT when as many range queries as the daemon runs at once
   * are running, TLC_EINVAL (a bad name), or another negative error: done is then never called
   * and ctx stays the caller's. NULL hook: no storage. Loop thread. Called with history_ud. */
  int (*history)(void *history_ud, const char *name, const tlc_when_range_t *range,
                 const tlc_snap_opts_t *so, const struct tlc_hist_answer *ans,
                 void (*done)(void *ud, struct tlc_hist_result *r), void *done_ud, void **job);
  /* The requester of `job` is gone: its done will not be called. */
  void (*history_cancel)(void *history_ud, void *job);
  void *history_ud;
} tlc_ps_provider_t;

struct tlc_targets;

/* Storage's rotate hook for the provider: rotates target `t`'s segment, 0 or negative. */
typedef int (*tlc_provider_rotate_fn)(void *ud, void *target);

/* The provider over a registry: embed it where it lives as long as the pubsub server; pass
 * &p->ps to pubsub. */
typedef struct tlc_provider {
  tlc_ps_provider_t ps; /* ps.ud points back to this struct */
  struct tlc_targets *reg;
  tlc_provider_rotate_fn rotate;
  void *rotate_ud;
} tlc_provider_t;

/* Fills `p` with callbacks over registry `r`. `rotate` (may be NULL: rotate answers
 * TLC_EINVAL) is called with `rotate_ud` and the tlc_target_t *. */
void tlc_provider_init(tlc_provider_t *p, struct tlc_targets *r, tlc_provider_rotate_fn rotate,
                       void *rotate_ud);

/* Target `index` of provider `p` as the source of a snapshot cursor (engine/cursor.h): pass
 * tlc_ps_cursor_split(p) with a tlc_ps_at_t as its ud to tlc_cursor_next, and take each part
 * with tlc_ps_cursor_take. */
typedef struct tlc_ps_at {
  const tlc_ps_provider_t *p;
  size_t index;
} tlc_ps_at_t;

/* The split function of provider p's targets, or NULL when it cannot take statistics in parts
 * (no split or snapshot_part hook): then every pass is one whole snapshot. */
tlc_cursor_split_fn tlc_ps_cursor_split(const tlc_ps_provider_t *p);

/* The snapshot of part `part` of target at->index into t (tlc_table_init'ed, counters filled
 * too) with options so, whose since_seq is set to part->since. 0 or a negative error. */
int tlc_ps_cursor_take(const tlc_ps_at_t *at, const tlc_cursor_part_t *part, tlc_table_t *t,
                       tlc_snap_opts_t *so);

#endif
