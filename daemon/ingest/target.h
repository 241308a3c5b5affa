/* target.h - a capture target and the daemon's registry of targets.
 *
 * A target is one stream of profiler events with a name (`probe1`, `ingest@10.0.0.7`): its
 * streaming decoder, its evlog mapping (evlog only), its statistics engine, its counters and
 * its mapping. Targets outlive connections: a target that disconnects keeps its statistics and
 * counters, and the next connection under the same name continues them (after an engine gap,
 * SPEC section 2). Sources (tcp.c, dial.c, serial.c) attach a connection to a
 * target, feed it bytes and detach it.
 *
 * Pipeline (pipeline.h), on the loop thread, no copy per event:
 *
 *     bytes -> tlc_dec_push -> [evlog: tlc_evmap_map] -> tlc_engine_push -> batch observers
 *
 * Observers (pubsub, storage) register on the registry and are called synchronously on the
 * loop thread; they must not block and must not free the target or detach it from inside a
 * callback. Kinds of target events (`kind` below) are enum tlc_target_ev.
 *
 * Storage seam: the storage module registers one observer. It receives
 *   - TLC_TEV_CREATED when a target is created (may set t->store),
 *   - TLC_TEV_CONNECTED / TLC_TEV_DISCONNECTED around every connection (segment boundaries),
 *   - records_cb with each batch exactly as decoded (one event per bin1x record or evlog item,
 *     raw fields and evlog item bytes included) and the received chunk it came from - what
 *     tlc_store_write_chunk takes,
 *   - batch_cb with the events given to the engine (evlog: after the evlog mapping),
 *   - skipped_cb with the bytes the decoder put in no record (keep_skipped),
 *   - read_buffer_cb when a source (TCP) is about to read: a place in its gather buffer, so
 *     that the bytes land where storage keeps them (tlc_target_read_buffer),
 *   - TLC_TEV_MAPPING when the target's mapping was replaced (its segments' exports use it),
 *   - TLC_TEV_FREED just before the target is freed (must release t->store).
 *
 * All functions run on the loop thread. Not thread-safe.
 */
#ifndef TLC_TARGET_H
#define TLC_TARGET_H

#include "base/clock.h"    /* tlc_now_unix_ms */
#include "config/config.h" /* enum tlc_src_kind */
#include "engine/engine.h"
#include "engine/pipeline.h"
#include "formats/dec.h"
#include "formats/evmap.h"
#include "formats/mapping.h"
#include "formats/preamble.h" /* TLC_TARGET_NAME_MAX */
#include "formats/stats.h"
#include "formats/tlc_event.h"
#include "ingest/budget.h"

#include <stddef.h>
#include <stdint.h>

struct tlc_engine;
struct tlc_evmap;

#define TLC_PEER_MAX             80  /* "[v6 address]:port" fits */
#define TLC_TARGET_BATCH         256 /* events decoded per tlc_dec_push call */
#define TLC_TARGET_GAPLOG        8   /* recent gaps kept per target */
#define TLC_TARGET_MAX_OBSERVERS 8

/* Target events for observers (`kind`). `detail` is a short human-readable text or NULL. */
enum tlc_target_ev {
  TLC_TEV_CREATED = 1,      /* target created (not yet connected) */
  TLC_TEV_CONNECTED = 2,    /* a connection attached; detail = peer */
  TLC_TEV_DISCONNECTED = 3, /* the connection detached; detail = reason; an engine gap was made */
  TLC_TEV_RESYNC = 4,       /* the decoder lost and regained sync; detail = "N bytes skipped" */
  TLC_TEV_DECODE_ERROR = 5, /* strict decoding failed; detail = "offset N: reason" */
  TLC_TEV_DROPS = 6,        /* events dropped (area limit) since the last report; detail = count */
  TLC_TEV_TRUNCATED = 7,    /* a partial record/block at end of stream; detail = decoder's reason */
  TLC_TEV_FREED = 8,        /* about to be freed (daemon shutdown); release anything held */
  TLC_TEV_MAPPING = 9,      /* t->mapping was replaced (tlc_target_load_mapping) */
  TLC_TEV_RESET = 10,       /* the statistics started afresh (tlc_target_reset) */
  TLC_TEV_FORGOTTEN = 11,   /* about to leave the registry (tlc_targets_forget); detail = its
                               index as decimal text; TLC_TEV_FREED follows */
  /* the target's clock restarted (SPEC 2) at the next event: announced between the observers'
   * records before it and those from it on (storage cuts its segment there); detail = "in
   * stream" or "after a gap" (a reconnect, which made its own segment boundary already) */
  TLC_TEV_CLOCK_RESET = 20
};

/* One disconnect -> reconnect interval, wall clock (Unix ms); reconnect 0 while still open. */
typedef struct tlc_target_gap {
  int64_t disconnect_unix_ms;
  int64_t reconnect_unix_ms;
} tlc_target_gap_t;

/* What a target is created with. Copied by tlc_targets_get (strings and mapping included). */
typedef struct tlc_target_conf {
  tlc_format_t format;
  int resync; /* decoder mode: 1 for lossy links (serial) */
  uint8_t has_context_area;
  uint32_t context_area;
  struct tlc_bwatch *watch; /* its timing budgets (budget/budget.h; the daemon's budgets
                               module attaches it to pipe.engine), NULL: none applies */
  const char *mapping_path; /* NULL/"" for none; loaded at creation (errors logged, not fatal) */
  tlc_ctxpack_t pack;       /* packed context_area values (formats/rtos.h; masks 0: not) */
  const char *rtos_path;    /* context_rtos: its task names name the contexts (NULL: none; read
                               at creation, errors logged, not fatal; not kept in t->conf) */
  uint32_t nwindows;        /* 0: engine defaults */
  int64_t window_ns[TLC_MAX_WINDOWS];
  size_t max_areas, max_contexts, max_depth; /* 0: engine defaults */
  size_t max_names;                          /* evmap: distinct evlog names (0: 65536) */
  uint32_t max_block; /* evlog decoder: largest block accepted (0: decoder default) */
  uint8_t histograms;
  int64_t clock_reset_ns; /* clock restart threshold (0: engine default, 1 s; < 0: none) */
} tlc_target_conf_t;

typedef struct tlc_targets tlc_targets_t;

typedef struct tlc_target {
  char *name; /* owned; unique in the registry */
  tlc_format_t format;
  int src_kind; /* enum tlc_src_kind of the source that created it */
  /* decoder -> evlog mapping -> engine (pipeline.h): pipe.dec, pipe.evmap (evlog only, else
   * NULL), pipe.engine; its batch buffers are the registry's */
  tlc_pipeline_t pipe;
  tlc_mapping_t mapping; /* per-target mapping (empty when none); stable address */
  int has_mapping;
  tlc_mapping_t rtos_names; /* context_rtos's task names (CONTEXTS only; empty when none),
                               added to every mapping the target loads where it names no task */
  tlc_mapping_t evnames;    /* evlog: the evmap's area names, as of the last tlc_target_names */
  size_t evnames_n;         /* evmap areas evnames holds */
  uint64_t evnames_bytes;   /* what evnames holds, charged to the memory budget */
  uint8_t has_context_area;
  uint32_t context_area;

  /* counters beyond tlc_counters_t (which tlc_target_counters assembles) */
  uint64_t connections;      /* attaches */
  uint64_t reconnects;       /* attaches after the first */
  uint64_t gaps;             /* detaches (each made an engine gap) */
  uint64_t decode_errors;    /* strict decode errors (each closed its connection) */
  uint64_t truncated_tails;  /* streams that ended inside a record/block */
  uint64_t deadline_closes;  /* connections closed by the partial-record deadline */
  uint64_t dropped_reported; /* dropped_area_limit already reported as TLC_TEV_DROPS */
  uint64_t resyncs_reported; /* resyncs already reported as TLC_TEV_RESYNC */
  uint64_t gaps_seen;        /* engine gaps after it took the last batch (a gap since: the
                                next batch's first events may restart the clock) */
  struct tlc_locd *locd;     /* where its records are stored (daemon/locd.c), or NULL */
  int64_t last_connect_unix_ms, last_disconnect_unix_ms; /* 0 = never */
  tlc_target_gap_t gaplog[TLC_TARGET_GAPLOG];            /* ring of the most recent gaps */
  uint64_t ngaplog;                                      /* gaps ever entered in the ring */

  int connected;
  uint64_t attach_pos;     /* decoder stream offset when the current connection attached */
  char peer[TLC_PEER_MAX]; /* "ip:port", device path, or "" */
  void *source;            /* the attached connection (opaque), NULL while detached */
  /* Backpressure: set by a source that can stop reading (TCP) when it attaches; called by
   * tlc_target_hold with the source and 1 (stop reading) or 0 (read again). NULL: the source
   * cannot wait (serial), holding does nothing. Cleared at detach. */
  void (*hold_cb)(void *source, int on);
  int held;       /* storage asked the target to hold its source (tlc_target_hold) */
  uint64_t holds; /* times it was held */
  void *store;    /* storage seam: owned by the storage observer */
  tlc_targets_t *reg;
  uint64_t gen; /* unique per registry: tells a target from one that took its index later */
  tlc_target_conf_t conf; /* as created (mapping_path owned): what a checkpoint records */
  int quiet;              /* replaying stored bytes (continuity): observers are not called */

  /* Checkpoint freeze (tlc_target_freeze): while frozen nothing reaches the decoder; the
   * source is held (hold_cb), and bytes of a source that cannot wait are kept in order in
   * fz_buf[fz_head, fz_len) (at most TLC_TARGET_FREEZE_MAX). */
  int frozen;
  uint8_t *fz_buf;
  size_t fz_head, fz_len, fz_cap;
  size_t fz_idle_at; /* SIZE_MAX, or a tlc_target_idle came when fz_len was this */
  void (*fz_abort_cb)(void *ud, struct tlc_target *t);
  void *fz_ud;
  uint64_t freezes;       /* times frozen */
  uint64_t freeze_aborts; /* freezes ended early (detach, hold buffer full, freed) */
  uint64_t freeze_bytes;  /* bytes kept in fz_buf, in all */

  /* memory budget (budget.h): what this target holds of it, and its refusals */
  uint64_t mem_bytes;     /* engine + mapping bytes charged to the registry's budget */
  uint64_t mapping_bytes; /* of which the mapping's */
  uint64_t mem_refused;   /* charges refused (new areas, growth, mappings) */
  int64_t mem_warn_ms;    /* last "memory limit" warning (rate limit), Unix ms */
  uint64_t mem_warned;    /* mem_refused at that warning */

  /* Names last (SPEC 10): where t->mapping came from (enum tlc_map_origin). During the
   * TLC_TEV_MAPPING announcement of a run-time load, map_text[0..map_len) is the text loaded
   * (borrowed; NULL otherwise), for continuity to keep it in the state directory. */
  uint8_t map_origin;
  const char *map_text;
  size_t map_len;
  uint64_t resets; /* tlc_target_reset calls */
  uint32_t pins;   /* sources that keep a pointer to it while detached (efl applications) */
} tlc_target_t;

/* Where a target's mapping came from. */
enum tlc_map_origin {
  TLC_MAP_NONE = 0,    /* no mapping */
  TLC_MAP_FILE = 1,    /* the configured mapping file, loaded at creation */
  TLC_MAP_RUNTIME = 2, /* `tlcap mapping` (LoadMapping): kept in the state directory */
  TLC_MAP_RESTORED = 3 /* the one kept in the state directory, loaded at creation */
};

/* Observer callbacks; any may be NULL. `cb` gets target events (enum tlc_target_ev);
 * `decoded_cb` each batch as decoded (before the evlog mapping; evlog slices valid only during
 * the call); `batch_cb` the events of each batch given to the engine (evlog: after mapping),
 * valid only during the call; `bytes_cb` the bytes pushed to the decoder, in stream order, with
 * the stream offset of buf[0] (valid only during the call); `records_cb` the same batch as
 * decoded_cb together with the chunk it was decoded from (chunk[0..clen) = stream bytes from
 * offset coff; a record may have begun in an earlier chunk), so that storage copies records as
 * received; chunk is NULL for what the decoder hands out at the end of a stream. Order per
 * batch: bytes_cb for the chunk, then decoded_cb and records_cb, then batch_cb. */
typedef struct tlc_target_observer {
  void (*cb)(void *ud, const tlc_target_t *t, int kind, const char *detail);
  void (*decoded_cb)(void *ud, const tlc_target_t *t, const tlc_event_t *ev, size_t n);
  void (*batch_cb)(void *ud, const tlc_target_t *t, const tlc_event_t *ev, size_t n);
  void (*bytes_cb)(void *ud, const tlc_target_t *t, const uint8_t *buf, size_t len,
                   uint64_t offset);
  void *ud;
  void (*records_cb)(void *ud, const tlc_target_t *t, const tlc_event_t *ev, size_t n,
                     const uint8_t *chunk, size_t clen, uint64_t coff);
  /* bytes of the stream in no record or block, as the decoder tells them (dec.h skipped_cb:
   * resync noise, bytes a reset dropped, a cut-off tail), stream offset `offset`, before the
   * events decoded after them; buf valid only during the call */
  void (*skipped_cb)(void *ud, const tlc_target_t *t, uint64_t offset, const uint8_t *buf,
                     size_t len);
  /* zero-copy reads: a place for the source to read the stream's next bytes into, at most
   * `want` (storage's gather buffer: tlc_store_read_buffer); `held` = tlc_target_pending.
   * Returns 1 with *buf, *len, or 0 (the source reads into its own buffer). The observer that
   * lends may rewrite a batch's bytes in its records_cb (storage moves records down within the
   * buffer), so no other observer reads a chunk's bytes after that. */
  int (*read_buffer_cb)(void *ud, const tlc_target_t *t, size_t held, size_t want, uint8_t **buf,
                        size_t *len);
} tlc_target_observer_t;

struct tlc_targets {
  tlc_target_t **v;       /* creation order; index = position */
  size_t n, max;          /* max: cap on targets (tlc_targets_init) */
  uint64_t refused_limit; /* tlc_targets_get refused: target cap reached, none evictable */
  uint64_t evicted;       /* targets evicted to make room (the longest disconnected) */
  uint64_t gens;          /* last tlc_target_t.gen given */
  uint64_t refused_name;  /* tlc_targets_get refused: invalid or too long a name */
  uint64_t events;        /* events pushed to engines, all targets */
  uint64_t bytes;         /* bytes fed, all targets */
  uint64_t decode_errors; /* all targets */
  tlc_target_observer_t obs[TLC_TARGET_MAX_OBSERVERS];
  size_t nobs;
  tlc_budget_t budget;    /* memory of every target's engine and mapping (budget.h); limit 0
                             (unlimited) after tlc_targets_init */
  uint64_t mapping_limit; /* a target's parsed mapping, bytes (0: no cap beyond the budget) */
  tlc_event_t evbuf[TLC_TARGET_BATCH];      /* decoder output (shared: loop thread only) */
  tlc_event_t mapbuf[2 * TLC_TARGET_BATCH]; /* evmap output */
};

/* Initialises an empty registry holding at most `max_targets` targets, with an unlimited
 * memory budget (set r->budget with tlc_budget_init / tlc_budget_set_limit before targets
 * appear, and r->mapping_limit). Returns 0. */
int tlc_targets_init(tlc_targets_t *r, size_t max_targets);

/* Frees every target (observers get TLC_TEV_FREED first). Safe on zeroed memory. Targets
 * must be detached (sources closed) before. */
void tlc_targets_fini(tlc_targets_t *r);

/* Registers an observer (copied). Returns 0 or TLC_ELIMIT. */
int tlc_targets_observe(tlc_targets_t *r, const tlc_target_observer_t *o);
/* Removes the observer registered with this `ud` (all of them). */
void tlc_targets_unobserve(tlc_targets_t *r, void *ud);

/* Validates a target name: 1..max bytes of [A-Za-z0-9._@:#+=[]-], not starting with '.'.
 * Returns 0 or TLC_EINVAL. (Names become storage directory names.) */
int tlc_target_name_check(const char *name, size_t max);

/* The names of an efl source's targets, "SOURCE/APP-PID": two valid names joined by one '/'
 * (storage keeps them in a directory per source, docs/efl.md). Not for names from peers.
 * Returns 0 or TLC_EINVAL. */
int tlc_target_name_check_efl(const char *name, size_t max);

/* The target called `name`, or NULL. O(n). */
tlc_target_t *tlc_targets_find(const tlc_targets_t *r, const char *name);

/* The pipeline a target created with `conf` runs (decoder, evlog mapping and engine options,
 * with an engine; no memory accounting, no mapping, no range): what its history is computed
 * with too (daemon/history). Any thread. */
void tlc_target_pipeline_conf(const tlc_target_conf_t *conf, tlc_pipeline_conf_t *pc);

/* Finds `name` or creates it from `conf`. Returns 0 and *out; TLC_EINVAL (bad name, or an
 * existing target of another format: *out is set to it), TLC_ELIMIT (target cap), TLC_ENOMEM.
 * A created target is announced with TLC_TEV_CREATED. */
int tlc_targets_get(tlc_targets_t *r, const char *name, int src_kind, const tlc_target_conf_t *conf,
                    tlc_target_t **out);

/* Attaches a connection (`source` opaque, `peer` text) to a detached target: counts the
 * connection (and a reconnect if it is not the first), stamps the time, announces
 * TLC_TEV_CONNECTED. Returns 0, or TLC_EINVAL if it is already attached. */
int tlc_target_attach(tlc_target_t *t, void *source, const char *peer);

/* Feeds received bytes through the pipeline. Returns 0, or (strict mode) the decoder's
 * negative error; then t->pipe.dec.err_offset / t->pipe.dec.err_reason say where and why, the error
 * is counted and announced (TLC_TEV_DECODE_ERROR), and the caller must close the connection. */
int tlc_target_feed(tlc_target_t *t, const uint8_t *buf, size_t len);

/* Where a source that reads into a buffer of its choosing (TCP: libuv's alloc callback) should
 * read the target's next bytes: an observer's place (read_buffer_cb: storage's gather buffer,
 * so that what storage keeps is not copied again), at most `want` bytes. Returns 1 with
 * buf[0..*len), which the source must feed (tlc_target_feed) in the same loop turn, before it
 * reads again; 0 when no observer lends one (or the target is frozen or replaying): the source
 * uses its own buffer. Loop thread. */
int tlc_target_read_buffer(tlc_target_t *t, size_t want, uint8_t **buf, size_t *len);

/* Non-zero while the stream sits inside a record/block (bytes held or missing), for the
 * partial-record deadline. 0 when the stream sits on a record boundary. */
size_t tlc_target_pending(const tlc_target_t *t);
/* A count that changes whenever the decoder starts a new record or block (bin1x records, evlog
 * blocks begun, bytes skipped): with tlc_target_pending, tells a record that goes on from a new
 * one (partial_timeout measures time inside one record). Loop thread. */
uint64_t tlc_target_units(const tlc_target_t *t);
/* The source's line has been idle for resync_idle: delivers what the decoder held back only for
 * confirmation (tlc_dec_idle), through the same pipeline as tlc_target_feed. Loop thread. */
void tlc_target_idle(tlc_target_t *t);

/* Ends the current stream: flushes the decoder (a truncated tail is counted and announced),
 * makes an engine gap, stamps the disconnect time, announces TLC_TEV_DISCONNECTED with
 * `reason`, resets the decoder for the next connection. No-op when detached. */
void tlc_target_detach(tlc_target_t *t, const char *reason);

/* Backpressure from storage: on = 1 asks the attached source to stop reading (TCP: the
 * kernel's window then pushes back to the sender), 0 to read again. Remembered across
 * connections: a source attaching to a held target starts held (it checks t->held). */
void tlc_target_hold(tlc_target_t *t, int on);

/* Checkpoint freeze (continuity.c): holds the target's input so that its state stays exactly
 * at one stream position while a checkpoint is taken in parts across loop turns (other targets
 * go on). A source that can wait (TCP: hold_cb) stops reading, and the kernel's window pushes
 * back; the bytes of any other (serial, efl) are kept in order, up to TLC_TARGET_FREEZE_MAX;
 * a resync idle is kept with its place. Nothing is lost: when the freeze must end early (the
 * kept bytes would pass the cap, a detach, the target freed) abort_cb(ud, t) is called first
 * (it must only forget the checkpoint: no call back into the target), then what was kept is
 * fed at once. Returns 0, or TLC_EINVAL when already frozen. Loop thread. */
#define TLC_TARGET_FREEZE_MAX ((size_t)4 << 20)
int tlc_target_freeze(tlc_target_t *t, void (*abort_cb)(void *ud, tlc_target_t *t), void *ud);
/* Ends the freeze in parts: feeds at most max_bytes of what was kept (and a kept idle at its
 * place), and once nothing is left unfreezes the target and lets its source read again.
 * Returns 1 when the target is no longer frozen, 0 when more is left (call again later: bytes
 * arriving meanwhile are kept behind). abort_cb is not called. Loop thread. */
int tlc_target_thaw(tlc_target_t *t, size_t max_bytes);
/* 1 while the source should not read: storage's hold or a checkpoint freeze. */
int tlc_target_holding(const tlc_target_t *t);

/* Assembles the target's tlc_counters_t: engine counters plus decoder counters. */
void tlc_target_counters(const tlc_target_t *t, tlc_counters_t *out);

/* Snapshot of the statistics (tlc_engine_snapshot) with table->counters filled by
 * tlc_target_counters. Returns 0 or a negative error. */
int tlc_target_snapshot(const tlc_target_t *t, tlc_table_t *tab, const tlc_snap_opts_t *so);

/* Replaces the target's mapping with one parsed from buf[0..len) and announces
 * TLC_TEV_MAPPING (a run-time load: t->map_text is buf during the announcement). On error the
 * old mapping stays and err gets "line N: reason". Returns 0 or a negative error. A new
 * mapping gives the target a new `gen`, so that every reader starts over with the new names
 * (a full snapshot carries them). */
int tlc_target_load_mapping(tlc_target_t *t, const char *buf, size_t len, char *err, size_t errlen);
/* The same with its origin (enum tlc_map_origin): only TLC_MAP_RUNTIME sets t->map_text. */
int tlc_target_load_mapping_as(tlc_target_t *t, const char *buf, size_t len, int origin, char *err,
                               size_t errlen);

/* Starts the target's statistics afresh (SPEC 10 `tlcap reset`): a new engine with the same
 * options and mapping, the engine counters from zero, a gap (the target's gap count and log),
 * a new `gen` so that every reader starts over; announces TLC_TEV_RESET. The decoder and the
 * connection stay: a stream in progress goes on into the new engine. Not while frozen for a
 * checkpoint (TLC_EAGAIN, nothing changed). Returns 0 or TLC_EAGAIN. Loop thread. */
int tlc_target_reset(tlc_target_t *t);

/* Removes target `t` from the registry and frees it (SPEC 10 `tlcap forget`): only a detached
 * one with no source holding it (a configured dial, serial or efl source keeps its target:
 * TLC_EINVAL) and not frozen (TLC_EAGAIN); nothing changes then. Observers get
 * TLC_TEV_FORGOTTEN, then TLC_TEV_FREED; the targets after it move down one index (each keeps
 * its `gen`, so readers that follow an index start over). Returns 0, TLC_EINVAL or TLC_EAGAIN.
 * Loop thread. */
int tlc_targets_forget(tlc_targets_t *r, tlc_target_t *t);

/* The names to show with the target's statistics: its mapping when it has one, else (evlog)
 * the area names its evlog items gave, exported from the evmap again whenever new areas
 * appeared (as `tlcapd replay` names them), else NULL. The result is owned by the target and
 * valid until the next call or tlc_target_load_mapping. Loop thread. */
const tlc_mapping_t *tlc_target_names(tlc_target_t *t);

/* Announces a target event to every observer (sources use it for their own kinds). */
void tlc_target_notify(const tlc_target_t *t, int kind, const char *detail);

#endif
