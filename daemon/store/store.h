/* store.h - storage: every accepted record written to disk in the target's own format.
 *
 * Layout under the state directory (docs/storage.md has the full description):
 *
 *     <state>/<target>/<UTC start>-<seq>.txt.BIN     bin10/bin11 timeline (sealed segment)
 *     <state>/<target>/<UTC start>-<seq>.txt         its main export (mapping + statistics)
 *       (with an XML main export: <UTC start>-<seq>.xml.BIN and <UTC start>-<seq>.xml)
 *     <state>/<target>/<UTC start>-<seq>.log         evlog segment (whole blocks)
 *     <state>/<target>/<UTC start>-<seq>.manifest    sidecar manifest (key=value text)
 *     ...<data>.part    the open segment;  ...<data>.zst  a compressed sealed segment;
 *     ...<data>.torn    a torn tail moved aside by crash recovery
 *     ...<data>.skipped received bytes that are not in the segment (resync skips, cut-off
 *                       tails), with keep_skipped
 *     <state>/.quarantine/<target>/...               what startup could not trust
 *
 * Threads: every function here runs on the loop thread. File I/O happens on two threads owned
 * by the store: the writer, fed through a bounded queue (tlc_store_write never blocks: a target
 * whose share of the queue fills is asked to pause (tlc_store_target_set_flow); when the queue
 * is full the records are dropped and counted, `dropped_buffer_full`), appends to the open
 * segments; the post-seal worker finishes the segments the writer hands it from one job queue:
 * its seal lane (the sealer) seals them (fdatasync, manifest, rename, retention), at most
 * `max_sealing` at a time, so that sealing never holds up appends; its export lane (the
 * exporter) writes their main exports after them, not during a burst; its compress lane
 * compresses them after that. Results (sealed
 * segments, log lines, closed targets) come back to the loop through a uv_async_t.
 *
 * Conservation: for every target, records_in == records_written + dropped (buffer_full +
 * disk_full + io_error), at quiescence.
 */
#ifndef TLC_STORE_H
#define TLC_STORE_H

#include "base/out.h"
#include "formats/mapping.h"
#include "formats/timeline.h"
#include "formats/tlc_event.h"
#include "store/seg/seg.h"

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

typedef struct tlc_store tlc_store_t;
typedef struct tlc_store_target tlc_store_target_t;

/* Durability policy. Sealing and rotation always fdatasync (data, sidecars, directory). */
enum tlc_store_sync {
  TLC_SYNC_ON_CLOSE = 0, /* only at seal (default) */
  TLC_SYNC_NEVER = 1,    /* same as ON_CLOSE: a seal is always synced (documented) */
  TLC_SYNC_PERIODIC = 2  /* also every sync_interval_ms and/or every sync_bytes */
};

/* Events the store reports on the loop thread. */
enum tlc_store_ev {
  TLC_SEV_SEALED = 1,      /* a segment was sealed; path = data file, reason = enum reason */
  TLC_SEV_DELETED = 2,     /* retention deleted a segment; path = data file */
  TLC_SEV_DISK_FULL = 3,   /* writing paused (ENOSPC) */
  TLC_SEV_RESUMED = 4,     /* writing resumed after a disk-full pause */
  TLC_SEV_COMPRESSED = 5,  /* a sealed segment was compressed; path = the .zst */
  TLC_SEV_QUARANTINED = 6, /* a file was moved to quarantine; path = its new path */
  TLC_SEV_IO_ERROR = 7     /* an I/O error was counted; path = file */
};

typedef struct tlc_store_event {
  int kind;           /* enum tlc_store_ev */
  const char *target; /* target name, or NULL */
  const char *path;   /* may be NULL */
  int reason;         /* enum tlc_store_reason for SEALED, else 0 */
  uint64_t seq;       /* segment sequence, when there is one */
} tlc_store_event_t;

typedef struct tlc_store_opts {
  const char *state_dir;         /* required; created if missing (copied) */
  uint64_t max_segment_bytes;    /* rotate at this size (0: 64 MiB) */
  int64_t max_segment_age_ms;    /* rotate at this age (0: never) */
  uint64_t max_total_bytes;      /* retention: all targets together (0: no limit) */
  uint64_t max_target_bytes;     /* retention: per target (0: no limit) */
  uint32_t max_segments;         /* retention: sealed segments per target (0: no limit) */
  int64_t max_age_ms;            /* retention: sealed segment age (0: no limit) */
  uint64_t min_free_bytes;       /* retention: free-space floor (0: none) */
  int64_t retention_interval_ms; /* periodic retention pass (0: 10 s) */
  int sync_mode;                 /* enum tlc_store_sync */
  int64_t sync_interval_ms;      /* TLC_SYNC_PERIODIC: 0 = not by time */
  uint64_t sync_bytes;           /* TLC_SYNC_PERIODIC: 0 = not by size */
  int compress;                  /* 1: zstd-compress sealed segments */
  int compress_level;            /* zstd level (0: 3) */
  uint32_t index_interval;       /* index entry every N records (0: 1024) */
  size_t queue_bytes;            /* cap on bytes queued to the writer (0: 64 MiB) */
  int64_t probe_interval_ms;     /* disk-full probe period (0: 1000) */
  uint64_t resume_free_bytes;    /* free bytes needed to resume after ENOSPC (0: 1 MiB) */
  uint32_t max_block;            /* evlog: largest block accepted (0: 64 MiB) */
  uint32_t max_sealing;  /* segments handed to the sealer and not yet sealed (0: 2); beyond it the
                            writer waits for the sealer before it closes another segment */
  uint64_t keep_skipped; /* 0: off. Else received bytes that are not in the segment (skipped by a
                            resync, a stream's cut-off tail) are kept in <data>.skipped, at most
                            this many per segment (and per target waiting in memory); the rest
                            is counted (gap skipped_unkept). Needs tlc_store_skipped. */
  int quick_start;       /* tlc_store_recover: 1 = check sizes and index only, not every byte */
  int gather_at_start;   /* 1: the gather buffers for bin1x records are taken when the store
                            opens (a bin1x source is configured), else when the first bin1x
                            target opens (docs/storage.md) */
  uint32_t max_deferred_exports; /* tlc_store_recover: main exports of segments found without
                                    one that wait for their target's settings (0: 1024); the
                                    rest are written at once without them */
  /* Clocks (NULL: CLOCK_REALTIME / CLOCK_MONOTONIC). Called from the writer thread. */
  int64_t (*now_wall_ns)(void *ud);
  int64_t (*now_mono_ns)(void *ud);
  void *clock_ud;
  tlc_store_export_fn export_cb; /* main export of bin1x segments (NULL: none written); tlcapd's
                                    is tlc_stpol_main_export (store/policy/export.h) */
  void *export_ud;
  /* Log lines (loop thread; rate limiting of repeats is done by the store). level: enum
   * tlc_log_level (formats/tlc_log_level.h, syslog's numbers). NULL: stderr. */
  void (*log_cb)(void *ud, int level, const char *msg);
  void *log_ud;
  void (*event_cb)(void *ud, const tlc_store_event_t *ev); /* loop thread; may be NULL */
  void *event_ud;
} tlc_store_opts_t;

/* Counters (a copy; tlc_store_counters). Bytes and records are those of the native format
 * (records = 24-byte records for bin1x, blocks for evlog). */
typedef struct tlc_store_counters {
  uint64_t records_in, bytes_in;           /* given to tlc_store_write (after encoding) */
  uint64_t records_written, bytes_written; /* reached a segment file */
  uint64_t dropped_buffer_full_records, dropped_buffer_full_bytes;
  uint64_t dropped_disk_full_records, dropped_disk_full_bytes;
  uint64_t dropped_io_error_records, dropped_io_error_bytes;
  uint64_t segments_opened, segments_sealed, segments_recovered;
  uint64_t quarantined; /* files moved to quarantine */
  uint64_t torn_bytes;  /* bytes moved aside by recovery */
  uint64_t io_errors, fsync_errors;
  uint64_t deletions, deleted_bytes; /* retention */
  uint64_t compressed, compress_errors;
  uint64_t disk_full_events;              /* times writing paused */
  int disk_full;                          /* 1 while paused */
  uint64_t queue_bytes, queue_peak_bytes; /* writer queue */
  uint64_t seal_queue;                    /* segments handed to the sealer, not yet sealed */
  uint64_t seal_waits; /* times the writer waited because max_sealing segments were in flight */
  uint64_t skipped_kept_bytes;   /* written to .skipped files (keep_skipped) */
  uint64_t skipped_unkept_bytes; /* not kept: over keep_skipped, queue full, write error */
  uint64_t stored_bytes;         /* sealed segments on disk (all files), all targets */
  uint64_t stored_segments;
  /* Main exports of sealed bin1x segments not written yet: left out for lack of space (written
   * when space returns), of segments recovered at start waiting for their target's settings
   * (written once a target of that name is configured, else at tlc_store_close), or waiting
   * for the exporter thread (export_queue). */
  uint64_t exports_pending;
  uint64_t exports_late; /* main exports written after their segment was sealed, for space */
  /* Main exports handed to the exporter thread at the seal (written after a burst being ingested
   * has passed), and those of them still to write (also in exports_pending). */
  uint64_t exports_background;
  uint64_t export_queue;
  /* Health (R15): the writer's monotonic clock (ns) at its last loop turn; it turns at least
   * every 250 ms unless stuck in a system call or waiting for the sealer (max_sealing segments
   * in flight: a stuck seal stalls the writer after at most that many more segments). With
   * queue_bytes > 0 and a heartbeat older than a few seconds, the writer is stalled: a watchdog
   * should stop pinging. */
  int64_t writer_heartbeat_ns;
  uint64_t flow_pauses; /* times a target was asked to pause (tlc_store_target_set_flow) */
} tlc_store_counters_t;

typedef struct tlc_store_target_counters {
  uint64_t records_in, bytes_in, records_written, bytes_written;
  uint64_t dropped_records, dropped_bytes; /* all reasons */
  uint64_t segment_seq;                    /* sequence of the open segment (0: none open) */
  uint64_t segment_bytes;                  /* bytes in the open segment */
  uint64_t durable_bytes;                  /* of the open segment, confirmed by fdatasync */
  uint64_t flow_pauses;                    /* times it was asked to pause */
} tlc_store_target_counters_t;

/* Summary of tlc_store_recover. */
typedef struct tlc_store_recovery {
  uint64_t targets, segments;   /* target dirs and sealed segments found */
  uint64_t recovered;           /* .part files sealed */
  uint64_t torn_bytes;          /* bytes moved aside to .torn files */
  uint64_t rebuilt_manifests;   /* manifests rebuilt from data */
  uint64_t quarantined;         /* entries moved to quarantine */
  uint64_t completed_deletions; /* half-done retention deletions completed */
  uint64_t deleted;             /* segments deleted by the retention pass at start */
  uint64_t foreign;             /* files left alone (not tlcap's) */
  uint64_t exports_deferred;    /* bin1x segments recovered or found without their main export:
                                   written once their target is configured (or at close) */
  uint64_t exports_unset;       /* the same beyond max_deferred_exports: written during
                                   recovery, without the target's settings */
} tlc_store_recovery_t;

/* Fills opts with defaults (all zero = defaults; state_dir NULL). */
void tlc_store_opts_default(tlc_store_opts_t *opts);

/* Creates a store on `loop` (opts copied; state_dir created if missing). Starts nothing yet.
 * Returns 0 and *out, TLC_EINVAL (no state_dir), TLC_ENOMEM, or -errno (mkdir). Loop thread. */
int tlc_store_new(uv_loop_t *loop, const tlc_store_opts_t *opts, tlc_store_t **out);

/* Crash recovery and the first retention pass, synchronously on the calling thread (call
 * before READY): recovers every .part, verifies or rebuilds manifests, quarantines what it
 * cannot trust, completes interrupted deletions, then starts the writer thread. Never fails
 * because of what it finds; returns 0 (summary in *sum, may be NULL) or a negative error only
 * when the state directory itself is unusable or the writer thread cannot start.
 * Main exports (export_cb set): a bin1x segment sealed by recovery, or found sealed without its
 * export, gets it later, with the settings of its target (tlc_store_target_configure and
 * tlc_store_target_set_mapping) once one of that name is opened and configured, or at
 * tlc_store_close without settings; at most max_deferred_exports wait, the rest are written
 * here without settings (exports_unset). */
int tlc_store_recover(tlc_store_t *s, tlc_store_recovery_t *sum);

/* Opens (registers) a target: `name` must be a valid target name (target.h rules), `format`
 * bin10, bin11 or evlog. No file is created before the first record. Returns 0 and *out,
 * TLC_EINVAL, TLC_ENOMEM, or TLC_ELIMIT if the store is closing. */
int tlc_store_target_open(tlc_store_t *s, const char *name, tlc_format_t format,
                          tlc_store_target_t **out);

/* Queues decoded events for writing: bin1x records are gathered as received and queued as one
 * command at the end of the loop turn (or before the next command of the target or of the
 * store, or every 8,192 records), with the times the decoder read, so that the writer neither
 * re-encodes nor re-scans them; evlog items are re-assembled into blocks from their raw item
 * bytes (a block is queued when complete: TLC_EVF_BLOCK_END, its size reached, or the next
 * block starts). Events flagged TLC_EVF_SYNTH are skipped. Records count in records_in at
 * once. Never blocks: if the writer queue is over its cap, the records are dropped, counted and
 * recorded as a `buffer_full` gap. Returns 0 or TLC_ENOMEM (counted as buffer_full too). */
int tlc_store_write(tlc_store_target_t *t, const tlc_event_t *ev, size_t n);

/* The same, with the chunk the events were decoded from (`chunk[0..clen)` = stream bytes from
 * offset `coff`, valid during the call; target.h's records_cb): a bin1x record lying whole in
 * the chunk is copied from it byte for byte; any other (begun in an earlier chunk) is encoded
 * from its fields, which gives the same bytes. Loop thread. */
int tlc_store_write_chunk(tlc_store_target_t *t, const tlc_event_t *ev, size_t n,
                          const uint8_t *chunk, size_t clen, uint64_t coff);

/* Zero-copy reads (bin1x): lends the source a place in the target's gather buffer to read the
 * stream's next bytes into, right where storage keeps them, so that tlc_store_write_chunk
 * finds each run of records already in place and copies nothing. `held`: the bytes of a partial
 * record the decoder holds (tlc_dec_pending; 24 or more: nothing lent); `want`: the most the
 * source would read. Returns 1 with buf[0..*len) (1 <= *len <= want), or 0 when nothing is lent
 * (evlog, a queue too small for 16 KiB reads, no memory): the source reads into its own buffer.
 * The bytes read there must be fed (tlc_target_feed) before the loop turn ends and before the
 * next call for this target; until the turn ends, the buffer is not handed to the writer (a
 * command queued meanwhile takes a copy). Nothing else changes: records are kept, dropped and
 * counted as tlc_store_write_chunk says, whether the chunk was read here or elsewhere.
 * Loop thread. */
int tlc_store_read_buffer(tlc_store_target_t *t, size_t held, size_t want, uint8_t **buf,
                          size_t *len);

/* Backpressure instead of loss for sources that can wait (TCP). A target's share of the writer
 * queue is queue_bytes / (targets open); when its records queued (or gathered) reach 3/4 of its
 * share, cb(ud, 1) asks the caller to stop reading the target's source; once the writer has
 * drained them to 1/4 of the share, cb(ud, 0) lets it read again. Other targets go on. Records
 * that still arrive while paused are stored as usual (and dropped, counted, only past the
 * queue's cap). Without a callback (serial lines, which cannot wait) nothing pauses and a full
 * queue drops and counts (buffer_full). cb runs on the loop thread (from tlc_store_write* or
 * the store's async callback), never after tlc_store_target_close. */
void tlc_store_target_set_flow(tlc_store_target_t *t, void (*cb)(void *ud, int paused), void *ud);

/* Main export beside a bin1x segment (tlc_store_tconf_t.main_export). */
enum tlc_store_main_export {
  TLC_MAIN_TEXT1 = 0, /* <base>.txt beside <base>.txt.BIN (default) */
  TLC_MAIN_XML = 1    /* <base>.xml beside <base>.xml.BIN */
};

/* Per-target settings for the main exports of the target's bin1x segments. */
typedef struct tlc_store_tconf {
  uint8_t has_context_area; /* as the live target's engine: contexts are this handle's values */
  uint32_t context_area;
  int main_export;    /* enum tlc_store_main_export; applies from the next segment opened */
  tlc_ctxpack_t pack; /* packed context_area values, as the live target's engine */
} tlc_store_tconf_t;

/* Sets the target's export settings (copied). context_area applies to the segments closed
 * after the writer reaches this command (a segment takes the settings in force when it is
 * closed); main_export to the segments opened after it (it decides their names). A control
 * command: never dropped. Returns 0, TLC_EINVAL or TLC_ENOMEM (nothing changes).
 * The first call of this or tlc_store_target_set_mapping on a target also releases the exports
 * of that target's segments recovered at start (tlc_store_recover): they are written with the
 * settings given by the calls made in the same loop callback (as tlcapd configures a target
 * when it creates it), a later change does not reach them. */
int tlc_store_target_configure(tlc_store_target_t *t, const tlc_store_tconf_t *conf);

/* Gives the target's segments the names of `mapping` (a finished mapping; NULL: none), as the
 * live target has them, so that each segment's main export names its areas and tasks like the
 * live statistics. The mapping is copied here (O(size), loop thread: the caller may change or
 * free its own at once); applied like tlc_store_target_configure. Returns 0, TLC_EINVAL or
 * TLC_ENOMEM (the previous names stay). */
int tlc_store_target_set_mapping(tlc_store_target_t *t, const tlc_mapping_t *mapping);

/* keep_skipped: bytes of the target's stream that go into no record or block, as the decoder
 * tells them (dec.h's skipped_cb, target.h's skipped_cb: resync noise, a stream's cut-off tail),
 * in stream order (`offset`: the stream offset of buf[0]). Kept for the .skipped file of the
 * segment the next records go to (at most keep_skipped waiting; the rest is counted); no-op
 * when keep_skipped is 0. Loop thread. */
void tlc_store_skipped(tlc_store_target_t *t, uint64_t offset, const uint8_t *buf, size_t len);

/* keep_skipped: the stream ended (disconnect): the skipped bytes told since the last records
 * (a truncated tail, trailing noise) are queued for the .skipped file too. */
void tlc_store_stream_end(tlc_store_target_t *t);

/* Records a gap in the open (or next) segment's manifest: `reason` (short word: "reconnect",
 * "resync", "overflow", ..., at most 31 bytes) and a count (bytes, items, whatever the reason
 * counts; documented per reason in docs/storage.md). */
int tlc_store_gap(tlc_store_target_t *t, const char *reason, uint64_t count);

/* Seals the open segment (if it holds any record) at the current record/block boundary; the
 * next record opens a new one. `reason`: enum tlc_store_reason. */
int tlc_store_rotate(tlc_store_target_t *t, int reason);

/* Rotates every target (SIGHUP). */
int tlc_store_rotate_all(tlc_store_t *s, int reason);

/* Flushes a pending evlog block, seals the open segment (reason shutdown) and releases the
 * target; `t` must not be used after. Freed memory is released once the writer is done. */
void tlc_store_target_close(tlc_store_target_t *t);

/* Calls cb(ud) on the loop once the writer has processed every command queued before this
 * call (records written or dropped and counted, gaps and rotations done) and the sealer has
 * sealed every segment closed by them (with the retention pass after each seal). For "a target
 * that half-closes is answered once every byte is written" and for tests. Returns 0 or
 * TLC_ENOMEM (cb is then never called). */
int tlc_store_barrier(tlc_store_t *s, void (*cb)(void *ud), void *ud);

/* The same without the seals: cb(ud) is called on the loop once the writer has processed every
 * command queued before this call (records written to their segments, or dropped and counted;
 * gaps and rotations done); segments closed by them may still be sealing. "A target that
 * half-closes is answered once every byte it sent is written" (SPEC 1): the answer does not
 * wait for the sealer, which seals them in the background (docs/storage.md). Returns 0 or
 * TLC_ENOMEM (cb is then never called). */
int tlc_store_barrier_written(tlc_store_t *s, void (*cb)(void *ud), void *ud);

/* A storage position (tlc_store_mark): every record queued before the mark is in the target's
 * segments of sequence < seq or in the first `bytes` bytes of segment `seq` (which may not
 * exist yet when bytes is 0); `disconnects` counts the disconnect gaps segment `seq` records
 * before that point. A replay from the position reads the rest of segment seq and every later
 * one. prev_valid: the segment written just before it in this run (closed by a rotation, an idle
 * or a disconnect while the writer ran) is prev_seq, prev_bytes long, and ends with the records
 * queued just before segment seq's first (tlc_store_pos_back). */
typedef struct tlc_store_pos {
  int valid;
  uint64_t seq, bytes, disconnects;
  int prev_valid;
  uint64_t prev_seq, prev_bytes;
} tlc_store_pos_t;

/* Where the stored content `back` bytes before pos starts: in pos's segment (its first pos->bytes
 * bytes), or in the segment written before it (pos->prev_*). 1 and *seg, *off (the byte offset in
 * that segment's uncompressed content); 0 when it lies further back or is not known. */
int tlc_store_pos_back(const tlc_store_pos_t *pos, uint64_t back, uint64_t *seg, uint64_t *off);

/* Where the record numbered `seq` starts, when the records numbered [first, last] are the last
 * ones before pos, `rec` bytes each, one number per record (daemon/locd.c counts them
 * by the engine's change sequence): tlc_store_pos_back of (last - seq + 1) records. 1 and *seg,
 * *off; 0 when seq is outside [first, last] or further back than pos_back reaches. */
int tlc_store_pos_record(const tlc_store_pos_t *pos, uint64_t first, uint64_t last, uint64_t seq,
                         uint64_t rec, uint64_t *seg, uint64_t *off);
typedef void (*tlc_store_mark_fn)(void *ud, const tlc_store_pos_t *pos);

/* Calls cb(ud, pos) on the loop once the writer has reached this point of the target's queue:
 * pos is where everything queued before it lies (records dropped before it, buffer_full or
 * disk_full, are not in the segments). An evlog block still being collected is cut here, as a
 * rotation cuts it (its first part written now, the rest as the next block): its items given
 * so far are before the mark. A control command,
 * never dropped. For checkpoints (the statistics then cover exactly the records before pos).
 * Returns 0 or TLC_ENOMEM (cb is then never called). */
int tlc_store_mark(tlc_store_target_t *t, tlc_store_mark_fn cb, void *ud);

/* 1 while an evlog block of the target is being collected (a mark now would cut it), else 0.
 * Loop thread. */
int tlc_store_target_mid_block(const tlc_store_target_t *t);

/* Copies the counters (loop thread; they are maintained by the writer under a lock). */
void tlc_store_counters(tlc_store_t *s, tlc_store_counters_t *out);
void tlc_store_target_counters(tlc_store_target_t *t, tlc_store_target_counters_t *out);
/* The sealed segments of the target called `target` in the catalog (found on disk at start,
 * added at each seal, gone with retention): their files' bytes on disk (as stored_bytes) and
 * their number. O(sealed segments of all targets). Any thread. */
void tlc_store_target_stored(tlc_store_t *s, const char *target, uint64_t *bytes,
                             uint64_t *segments);

/* Queues a retention pass now (e.g. after a reload). */
void tlc_store_retention_now(tlc_store_t *s);

/* Changes budgets and rotation limits at run time (SIGHUP reload): copies the numeric fields
 * of `opts` (state_dir, hooks and clocks are ignored) and runs a retention pass. */
void tlc_store_reconfigure(tlc_store_t *s, const tlc_store_opts_t *opts);

/* Closes every target still open (sealing their segments), waits for the writer thread and
 * compressions in flight, closes the store's handles, frees the store and calls `cb` (may be
 * NULL) from the loop. The loop must run until then. */
void tlc_store_close(tlc_store_t *s, void (*cb)(void *ud), void *ud);

#endif
