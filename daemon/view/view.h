/* view.h - the read side: what the servers that show statistics (pubsub, the HTTP port, the
 * NATS publisher) see of the daemon. One table of hooks; they never touch a tlc_target_t, an
 * engine or the store.
 *
 * The daemon fills it over its target registry (tlc_view_reg_init: the targets, their engines'
 * snapshots, parts and /metrics reads, mapping loads) and adds the hooks of the modules it runs
 * (storage: rotate, segments, history, per-target storage figures; the subscriber server and
 * the store: daemon_info; the NATS publisher: nats). A hook left NULL means "not running".
 * Tests and fuzzers fill it with fakes.
 *
 * Target indexes are stable for the daemon's life (targets are never removed while it runs;
 * a full registry puts a new target in an evicted one's place, with a new `gen`), so an index
 * found once stays valid. Every hook runs on the loop thread and returns promptly (no I/O,
 * except segments: a manifest read per segment). Strings returned in tlc_view_target_t stay
 * valid until the next return to the event loop.
 *
 * Target events and live event batches reach pubsub through the observer interface of
 * target.h (tlc_targets_observe), not through this table.
 */
#ifndef TLC_VIEW_H
#define TLC_VIEW_H

#include "alert/alert.h"
#include "engine/cursor.h"
#include "engine/engine.h"
#include "formats/mapping.h"
#include "formats/stats.h"
#include "formats/tlc_event.h"
#include "formats/when.h"
#include "formats/moment.h"
#include "history/result.h"

#include <stddef.h>
#include <stdint.h>

typedef struct tlc_view_target {
  const char *name;
  tlc_format_t format;
  int connected;
  const char *peer; /* "ip:port", device path or "" */
  tlc_counters_t counters;
  uint64_t connections, reconnects, gaps, decode_errors;
  int64_t last_connect_unix_ms, last_disconnect_unix_ms; /* 0 = never */
  uint64_t memory_bytes, memory_refused; /* memory budget: held by the target, refused to it */
  uint64_t areas;                        /* rows-owning areas of its statistics */
  uint64_t gen;      /* changes when another target takes this index (a full table evicted one, one
                        before it was forgotten), and when its statistics or names start over (a
                        reset, a mapping loaded): a reader that follows it starts over in full */
  uint64_t seq;      /* its engine's change sequence (tlc_engine_seq; 0 from a view without) */
  int64_t last_time; /* its latest event time (tlc_engine_last_time; 0 before any) */
} tlc_view_target_t;

/* The NATS publisher as ListTargets shows it (daemon/fleet/fleet.h). */
#define TLC_VIEW_NATS_REASONS 16
typedef struct tlc_view_nats {
  const char *url;
  int connected, stream_ready;
  uint64_t published, dropped, reconnects; /* published: acknowledged by the JetStream stream */
  uint64_t publish_cpu_ns; /* the loop thread's CPU time spent building and handing over stats */
  uint64_t awaiting_ack;   /* published to the server, acknowledgement not yet in */
  size_t nreasons;         /* drops by reason: drop_reason[i] (e.g. "stream_full"), drops[i] */
  const char *drop_reason[TLC_VIEW_NATS_REASONS];
  uint64_t drops[TLC_VIEW_NATS_REASONS];
  /* budget violations (TE_VIOLATION) published, and not published over the rate limit */
  uint64_t violations_sent, violations_suppressed;
} tlc_view_nats_t;

/* One stored segment for ListSegments (see tlc_segent_t and tlc_seginfo_t in segread.h). */
typedef struct tlc_view_segment {
  uint64_t seq;
  int state; /* 1 open, 2 sealed, 3 compressed */
  char path[1200];
  uint64_t bytes, records, items, gaps;
  int64_t first_time, last_time, min_time, max_time;
  int64_t opened_wall_ns, closed_wall_ns;
  int reason, recovered;
  uint64_t epoch; /* clock epoch of its records (docs/board-resets.md) */
} tlc_view_segment_t;

/* Daemon-wide figures for /metrics and the dashboard (has_store 0: storage off). */
typedef struct tlc_view_daemon {
  size_t subscribers;             /* protobuf subscribers connected */
  int has_pubsub;                 /* the subscriber server runs: the two below are valid */
  uint64_t violations_sent;       /* budget violations (TE_VIOLATION) sent to subscribers */
  uint64_t violations_suppressed; /* ... not sent: over the rate limit */
  int has_store;
  uint64_t store_queue_bytes;   /* bytes waiting for the storage writer */
  uint64_t store_bytes_written; /* bytes written to segments, all targets */
  uint64_t store_dropped;       /* records dropped by storage (queue full, disk full, I/O) */
  uint64_t stored_bytes;        /* sealed segments on disk */
  uint64_t stored_segments;     /* sealed segments on disk */
  uint64_t on_disk_bytes;       /* sealed and open segments on disk, all targets */
  uint64_t on_disk_segments;    /* the same segments, counted */
  int disk_full;                /* writing paused (ENOSPC) */
  int has_disk_free;            /* disk_free_bytes valid */
  uint64_t disk_free_bytes;     /* free bytes of the state directory's file system */
  /* Health and readiness (HTTP /-/healthy, /-/ready; docs/http.md). */
  int unhealthy;             /* a watchdog health check fails (tlc_sd_health_check) */
  const char *unhealthy_why; /* its reason (static), when unhealthy */
  int stopping;              /* the daemon is shutting down */
  size_t sources_down;       /* configured sources that run no source (tlc_sources_down) */
  char sources_why[256];     /* which ones */
  char http_url[300];        /* the dashboard's URL while the HTTP port serves, else "" */
  char http_off[360];        /* why the configured HTTP port does not serve, else "" */
} tlc_view_daemon_t;

/* One target's storage figures (has 0: not stored). */
typedef struct tlc_view_store {
  int has;
  uint64_t bytes_written, records_written, dropped_records;
  uint64_t segment_seq;   /* sequence of the open segment (0: none open) */
  uint64_t segment_bytes; /* bytes in the open segment */
  uint64_t disk_bytes;    /* its segments on disk, sealed (also from before a restart) and open */
  uint64_t disk_segments; /* the same segments, counted */
} tlc_view_store_t;

/* A target's rollups rebuilt from its stored segments (docs/rollups.md "Rebuilt from the
 * segments"): none since the target was created, one running, or the last one ended. */
enum { TLC_VIEW_REBUILD_NONE = 0, TLC_VIEW_REBUILD_RUNNING = 1, TLC_VIEW_REBUILD_DONE = 2 };
typedef struct tlc_view_rebuild {
  int state;              /* TLC_VIEW_REBUILD_* */
  uint64_t segments_read; /* running: segments read so far; done: read in all */
  uint64_t segments;      /* the segments it reads (running) or had to read (done) */
  uint64_t samples;       /* samples counted into the rollups so far, or in all */
  int64_t done_unix_ms;   /* done: when it ended (wall clock) */
} tlc_view_rebuild_t;

typedef struct tlc_view {
  /* ---- the targets and their statistics (tlc_view_reg_init), called with ud ---- */
  /* Number of targets; indexes are 0..count-1. */
  size_t (*count)(void *ud);
  /* Fills *out for target `index`. 0 or TLC_ERANGE. */
  int (*info)(void *ud, size_t index, tlc_view_target_t *out);
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
  /* tlc_engine_hist_cum of target `index` (NET samples for /metrics' histograms). May be NULL
   * (no histograms). */
  int (*hist_cum)(void *ud, size_t index, uint32_t handle, uint32_t context, unsigned kind,
                  const int64_t *le, size_t nle, uint64_t *cum);
  /* tlc_engine_code_hist of target `index`: hist_cum of an entry code_net gave in the same
   * scrape (no lookup by handle). May be NULL (hist_cum is used). */
  int (*code_hist)(void *ud, size_t index, const tlc_engine_code_net_t *x, const int64_t *le,
                   size_t nle, uint64_t *cum);
  /* tlc_engine_code_hists of target `index`: code_hist of xs[0..nx) in one call (prefetching),
   * cum nle per entry, ok[i] 1 when entry i's are there. May be NULL (code_hist is used). */
  int (*code_hists)(void *ud, size_t index, const tlc_engine_code_net_t *xs, size_t nx,
                    const int64_t *le, size_t nle, uint64_t *cum, int *ok);
  /* tlc_engine_code_net and tlc_engine_context of target `index` (/metrics' area series).
   * code_net NULL: no area series. */
  int (*code_net)(void *ud, size_t index, tlc_engine_code_net_t **out, size_t *n, size_t *cap);
  int (*context)(void *ud, size_t index, uint32_t context, tlc_ctx_t *c);
  /* The state of target `index`'s statistics and names in three numbers: tlc_engine_epoch and
   * tlc_engine_seq of its engine, and the number of names it has (an evlog target's names
   * grow as items arrive). 0, or not 0: unknown. /metrics keeps a target's rendered area
   * series while they stay the same. May be NULL (nothing kept). */
  int (*stamp)(void *ud, size_t index, uint64_t st[3]);
  void *ud;

  /* ---- the daemon's modules (each NULL when that module does not run) ---- */
  /* Daemon-wide figures (subscribers, storage, free disk), into *out. Called with daemon_ud. */
  void (*daemon_info)(void *daemon_ud, tlc_view_daemon_t *out);
  /* Target `index`'s storage figures, into *out. Called with daemon_ud. */
  void (*target_store)(void *daemon_ud, size_t index, tlc_view_store_t *out);
  /* Protobuf subscribers with a subscription that includes target `index` (the dashboard's
   * overview and /api/v1/targets). NULL: 0. Called with daemon_ud. */
  size_t (*target_subscribers)(void *daemon_ud, size_t index);
  void *daemon_ud;
  /* The NATS publisher's state for TargetList (NULL when tlcapd does not publish): 0 when it
   * filled *out. Called with nats_ud. */
  int (*nats)(void *nats_ud, tlc_view_nats_t *out);
  void *nats_ud;
  /* The Alertmanager client's counters (tlc_alert_counters; NULL when alertmanager_url is
   * off): 0 when it filled *out. Called with alerts_ud. */
  int (*alerts)(void *alerts_ud, tlc_alert_counters_t *out);
  void *alerts_ud;
  /* The stored segments of the target called `name` (live or not), at most `max`, the newest
   * kept: 0 with *out (tlc_free'd by the caller; NULL when none) and *n, *truncated set; or a
   * negative error. NULL hook: no storage. Loop thread (reads the state directory: a manifest
   * per segment). Called with segments_ud. */
  int (*segments)(void *segments_ud, const char *name, size_t max, tlc_view_segment_t **out,
                  size_t *n, int *truncated);
  void *segments_ud;
  /* History (SPEC 10; daemon/history/histq.h): starts computing, off the loop, the statistics
   * of the stored records of the target called `name` (live or not) in `range`, with the
   * snapshot options `so` and the target's settings; `ans` (result.h, may be NULL) encodes
   * the answer off the loop too, into its ctx, which belongs to the query until done runs or,
   * cancelled, until the query frees it (ans->free). done(done_ud, r) runs later on the loop
   * with the result (r->status 0 or the error, r->err why; without ans the callee may take r->t
   * and r->names by swapping; with ans they are empty and ctx holds the answer). Returns 0 with
   * *job (for history_cancel), TLC_ELIMIT when as many range queries as the daemon runs at once
   * are running, TLC_EINVAL (a bad name), or another negative error: done is then never called
   * and ctx stays the caller's. NULL hook: no storage. Loop thread. Called with history_ud. */
  int (*history)(void *history_ud, const char *name, const tlc_when_range_t *range,
                 const tlc_snap_opts_t *so, const tlc_hist_answer_t *ans,
                 void (*done)(void *ud, tlc_hist_result_t *r), void *done_ud, void **job);
  /* The requester of `job` is gone: its done will not be called. */
  void (*history_cancel)(void *history_ud, void *job);
  void *history_ud;
  /* The moment (history/moment.h, `tlcap around`): as history, for the range of `mo`, and the
   * range's events written in `export_` (tlc_moment_export), at most `max` bytes, into
   * r->moment off the loop. Cancelled with history_cancel. NULL hook: no storage. */
  int (*around)(void *history_ud, const char *name, const tlc_moment_t *mo, int export_, size_t max,
                const tlc_hist_answer_t *ans, void (*done)(void *ud, tlc_hist_result_t *r),
                void *done_ud, void **job);
  /* Rollups (SPEC 14; daemon/rollup, docs/rollups.md): starts a trend (what 1) or a diff
   * (what 2) of target `name` as the HTTP query string `query` asks; the JSON document (at most
   * cap bytes) is built off the loop, and done(done_ud, status, err, body, len) runs later on
   * the loop (status 0 or the error, err why; body tlc_malloc'd, the callee's). Returns 0 with
   * *job (for rollup_cancel), or an error with err filled: TLC_EINVAL a bad parameter, -ENOENT
   * rollups off. NULL hook: no rollups (no storage). Loop thread. */
#define TLC_VIEW_ROLLUP_TEXT 0x100 /* or'ed into what: a table for people instead of JSON */
  int (*rollup)(void *rollup_ud, int what, const char *name, const char *query, size_t cap,
                void (*done)(void *done_ud, int status, const char *err, char *body, size_t len),
                void *done_ud, void **job, char *err, size_t errlen);
  void (*rollup_cancel)(void *rollup_ud, void *job);
  /* The rebuild from segments of the rollups of the target called `name`, into *out (state
   * NONE when there was none, or the target has no rollups). NULL hook: no rollups. Loop thread
   * (the running rebuild's progress is read from its thread's counters). Called with
   * rollup_ud. */
  void (*rebuild)(void *rollup_ud, const char *name, tlc_view_rebuild_t *out);
  void *rollup_ud;
  /* Budgets (SPEC 13; budget/budget.h): the watch of the target called `name`, NULL when no
   * budget applies to it. Read it at once (tlc_bwatch_total, _recent, _worst, _counts): it may
   * change at the next event or SIGHUP. NULL hook: no budgets. Loop thread. Called with
   * budgets_ud. */
  const struct tlc_bwatch *(*budgets)(void *budgets_ud, const char *name);
  void *budgets_ud;

  /* ---- starting over (SPEC 10), called with ud (tlc_view_reg_init sets them) ---- */
  /* `tlcap reset`: target `index`'s statistics start afresh (a gap, a new gen). 0, TLC_ERANGE,
   * or TLC_EAGAIN (a checkpoint holds the target for a moment: try again). */
  int (*reset)(void *ud, size_t index);
  /* `tlcap forget`: target `index` leaves the table (the indexes after it move down, each
   * target keeping its gen) and its kept checkpoint and mapping are deleted; its stored
   * segments stay. 0, TLC_ERANGE, TLC_EINVAL (connected, or kept by its source: err says
   * why) or TLC_EAGAIN (held by a checkpoint for a moment). */
  int (*forget)(void *ud, size_t index, char *err, size_t errlen);
} tlc_view_t;

struct tlc_targets;
struct tlc_target;

/* Storage's rotate hook: rotates target `t`'s open segment, 0 or negative. */
typedef int (*tlc_view_rotate_fn)(void *ud, struct tlc_target *t);

/* The view over a target registry: embed it where it lives as long as the servers that read
 * it; pass &r->view to them. */
typedef struct tlc_view_reg {
  tlc_view_t view; /* view.ud points back to this struct */
  struct tlc_targets *targets;
  tlc_view_rotate_fn rotate;
  void *rotate_ud;
} tlc_view_reg_t;

/* Fills `r` with the target hooks over registry `targets` (the module hooks NULL). `rotate`
 * (may be NULL: rotate answers TLC_EINVAL; settable later) is called with `rotate_ud`. No
 * allocation. Loop thread. */
void tlc_view_reg_init(tlc_view_reg_t *r, struct tlc_targets *targets, tlc_view_rotate_fn rotate,
                       void *rotate_ud);

/* Target `index` of view `v` as the source of a snapshot cursor (engine/cursor.h): pass
 * tlc_view_cursor_split(v) with a tlc_view_at_t as its ud to tlc_cursor_next, and take each
 * part with tlc_view_cursor_take. */
typedef struct tlc_view_at {
  const tlc_view_t *p;
  size_t index;
} tlc_view_at_t;

/* The split function of view v's targets, or NULL when it cannot take statistics in parts
 * (no split or snapshot_part hook): then every pass is one whole snapshot. */
tlc_cursor_split_fn tlc_view_cursor_split(const tlc_view_t *v);

/* The snapshot of part `part` of target at->index into t (tlc_table_init'ed, counters filled
 * too) with options so, whose since_seq is set to part->since. 0 or a negative error. */
int tlc_view_cursor_take(const tlc_view_at_t *at, const tlc_cursor_part_t *part, tlc_table_t *t,
                         tlc_snap_opts_t *so);

#endif
