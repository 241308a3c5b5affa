/* dump.h - the stats dump (--dump-stats-on-exit FILE, SIGUSR1), written off the event loop.
 *
 * The document (README "stats dump"): {"daemon": {...}, "targets": [{name, counters, ...,
 * "stats": <the JSON export of its statistics>}, ...]}, written to FILE.tmp and renamed when
 * complete. The loop takes each target's statistics in parts of at most TLC_DUMP_PART_ROWS
 * rows (an engine snapshot of a handle range, tlc_engine_snapshot_part, with the mapping
 * entries those rows name copied), and a libuv pool thread formats and writes each part while
 * the loop goes on ingesting; the next part is taken when the previous one is written. So the
 * loop pays one part's snapshot at a time (about 1.3 ms for 1,024 rows in a Release build, 70 ms
 * under ThreadSanitizer, whose allocator the rows' histograms go through), never the
 * formatting or the file I/O, and the memory is one part's, whatever the size of the targets.
 * Parts of one target are taken at different times: each area's rows are consistent, the
 * target header (counters, contexts) is the first part's.
 *
 * Loop thread, except what the pool thread does inside (documented in dump.c).
 */
#ifndef TLC_DUMP_H
#define TLC_DUMP_H

#include "base/out.h"
#include "formats/json.h"
#include "formats/mapping.h"
#include "formats/stats.h"
#include "ingest/target.h"

#include <stdio.h>
#include <uv.h>

#define TLC_DUMP_PART_ROWS 1024

typedef struct tlc_dump {
  uv_loop_t *loop;
  tlc_targets_t *reg;
  char path[4096];
  /* writes the document's first members (the "daemon" object) with the dump's writer */
  void (*head_cb)(void *ud, tlc_json_w_t *w);
  void *head_ud;
  uv_work_t req;
  int busy, again, failed_errno;
  uint64_t written, done; /* dumps completed */
  /* progress (loop thread) */
  size_t ti;   /* target being written */
  uint64_t lo; /* its next part starts at this handle (0: its first part) */
  char *cur;   /* its name (re-found by name for each part) */
  /* the job (filled on the loop, read by the pool thread, freed on the loop) */
  struct {
    char *text; /* written first */
    char *name; /* the target's name, for the statistics document (with begin) */
    size_t textlen;
    int has_table, begin, end, finish;
    int close_target; /* the target's entry ends with this job */
    tlc_table_t tab;
    tlc_mapping_t map;
    int has_map;
  } job;
  /* the pool thread's (one job at a time) */
  FILE *f;
  char wpath[4096]; /* the dump in flight's file: path copied at its start (a reload may change
                     * path meanwhile, on the loop, while the pool thread writes this one) */
  char tmp[4100];
  /* the document's writer (formats/json.h), carried from job to job: the loop writes a target's
   * head with it (job_next), the pool thread the statistics and the closes (never both at once:
   * the loop fills the next job once the previous one is back) */
  tlc_json_w_t js;
} tlc_dump_t;

/* Initialises an idle dump writing to `path` ("" = off) for the targets of `reg`; `head_cb`
 * formats the daemon object when a dump starts. */
void tlc_dump_init(tlc_dump_t *d, uv_loop_t *loop, tlc_targets_t *reg, const char *path,
                   void (*head_cb)(void *ud, tlc_json_w_t *w), void *ud);

/* The document's first members for the daemon object `ud` (a struct tlc_daemon, daemon.h): the
 * "daemon" object (its ingest counters, the log's, systemd's notifications, the memory budget),
 * then each running part's own, in this order: the sources (tlc_sources_dump), the NATS
 * publisher, storage, range queries, checkpoints. The head_cb the daemon passes to
 * tlc_dump_init; loop thread. */
void tlc_dump_daemon_head(void *ud, tlc_json_w_t *w);

/* Starts a dump now, or, while one is being written, once more after it. No-op when the path is
 * "". Never blocks: the file is written by a pool thread. */
void tlc_dump_request(tlc_dump_t *d);

/* Changes the path (SIGHUP); a dump being written finishes under its old name. */
void tlc_dump_set_path(tlc_dump_t *d, const char *path);

/* 1 while a dump is being written (the loop stays alive for it). */
int tlc_dump_busy(const tlc_dump_t *d);

/* Frees what an idle dump holds. Safe on zeroed memory. */
void tlc_dump_fini(tlc_dump_t *d);

#endif
