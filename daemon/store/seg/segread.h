/* segread.h - reading sealed (or open) segments: verify or rebuild the manifest, seek by time
 * with the index, stream whole records.
 *
 * Used by `tlcapd replay --from TIME --to TIME`, by the main-export hook (a timeline over the
 * segment being sealed), by tlc_store_recover and by the tests. A segment is named by its data
 * file: `<base>.txt.BIN`, `<base>.xml.BIN`, `<base>.log`, either with `.zst` (read directly,
 * streaming), or the open `.part`. Its manifest `<base>.manifest` is loaded and checked against the
 * data (self checksum, byte length, index times at the index offsets; with TLC_SEGREAD_VERIFY also
 * the content checksum); when it is missing or does not match, a manifest is rebuilt in memory from
 * the data (tlc_seginfo_t.rebuilt says so). Nothing is written.
 *
 * Time range: a record (bin1x) is in [from, to] when from <= time <= to; an evlog block when
 * any of its items is (its [min, max] meets [from, to]). Records come in file order.
 *
 * Not thread-safe per reader; any thread. No event loop.
 */
#ifndef TLC_SEGREAD_H
#define TLC_SEGREAD_H

#include "formats/timeline.h"
#include "formats/tlc_event.h"

#include <stddef.h>
#include <stdint.h>

typedef struct tlc_segread tlc_segread_t;

#define TLC_SEGREAD_VERIFY 0x1u /* read the whole data once to check the content checksum */

typedef struct tlc_seginfo {
  tlc_format_t format;
  uint64_t seq;
  char target[129];
  uint64_t bytes;      /* whole-record bytes (for a .part: its whole-record prefix) */
  uint64_t file_bytes; /* data length as found (may exceed bytes for a torn .part) */
  uint64_t records, items;
  int64_t first_time, last_time, min_time, max_time; /* valid when items > 0 */
  uint64_t checksum; /* of the content, of the manifest's kind (xxh3, fnv1a64w or fnv1a64) */
  uint64_t ngaps;
  int compressed; /* read from a .zst */
  int rebuilt;    /* the manifest was missing or did not match: rebuilt from the data */
  int suspect;    /* the manifest marks the segment suspect (fsync/write error) */
  int recovered;  /* sealed by crash recovery */
  char why[160];  /* why the manifest was rebuilt, "" otherwise */
  int64_t opened_wall_ns, closed_wall_ns; /* wall clock (0: unknown or still open) */
  int reason;                             /* enum tlc_store_reason (0 while open) */
} tlc_seginfo_t;

/* Opens the segment whose data file is `path`. `format` is used when no manifest says it
 * (TLC_FMT_NONE: .log means evlog, .txt.BIN or .xml.BIN means bin11 unless the records look like
 * bin10). Returns 0 and *out; -errno (cannot open/read), TLC_EFRAME when the content does not match
 * a valid manifest's checksum (only with TLC_SEGREAD_VERIFY) or the data is not whole records of
 * its format (err names the offset), TLC_ENOMEM. */
int tlc_segread_open(const char *path, tlc_format_t format, unsigned flags, tlc_segread_t **out,
                     char *err, size_t errlen);

/* Summary of the (loaded or rebuilt) manifest. */
void tlc_segread_info(const tlc_segread_t *r, tlc_seginfo_t *out);

/* Gap i (0-based, < info.ngaps): reason (static until close), count, byte offset. 0 or
 * TLC_ERANGE. */
int tlc_segread_gap(const tlc_segread_t *r, size_t i, const char **reason, uint64_t *count,
                    uint64_t *offset);

/* Restricts reading to [from, to] and positions at the first record that can be in it, using
 * the index (no scan of what precedes). INT64_MIN/INT64_MAX for open ends. 0 or negative. */
int tlc_segread_range(tlc_segread_t *r, int64_t from, int64_t to);

/* Restricts reading to the records that arrived (wall clock, Unix ns) in [since, until), to
 * within a second, through the segment's arrival index (`wall` lines of the manifest; an open
 * segment's <data>.widx): from the first index entry whose time is in the range to the entry
 * after the last such one. Returns 0, 1 when the segment has no arrival index (the whole
 * segment is read: a segment written by an earlier version), or a negative error. */
int tlc_segread_wall_range(tlc_segread_t *r, int64_t since, int64_t until);

/* Next record/block in the range: returns 1 with *rec and *len (valid until the next call) and its
 * byte offset in *off (may be NULL), 0 at the end, negative on error. */
int tlc_segread_next(tlc_segread_t *r, const uint8_t **rec, size_t *len, uint64_t *off);

/* Copies whole records of the range into buf; returns the bytes copied (0 at end), TLC_ERANGE
 * if the next record alone is larger than len, or a negative error. */
int64_t tlc_segread_read(tlc_segread_t *r, void *buf, size_t len);

/* A timeline (timeline.h) over the range's events, bin10/bin11 only (TLC_EFORMAT for evlog):
 * records decoded as the bin1x decoder does (handle, raw, type, core, data, time, offset).
 * Valid while r is open. */
int tlc_segread_timeline(tlc_segread_t *r, tlc_timeline_t *tl);

void tlc_segread_close(tlc_segread_t *r);

/* Reads a .zst segment's compressed data to its end. Returns 0 when it is whole, or
 * TLC_ETRUNC (cut inside a frame) / TLC_EFRAME (damaged) / a negative I/O error, with `why`
 * naming the compressed byte offset and the reason. Blocking; any thread. */
int tlc_segread_zst_check(const char *path, char *why, size_t wl);

/* A target's segments on disk (tlc_segread_list), in sequence order. */
enum tlc_seg_state {
  TLC_SEGST_OPEN = 1,       /* <data>.part: being written (or left by a crash, until recovery) */
  TLC_SEGST_SEALED = 2,     /* <data> */
  TLC_SEGST_COMPRESSED = 3, /* <data>.zst */
  TLC_SEGST_SEALING = 4     /* <data>.part closed and waiting for its seal (told by the daemon,
                               which knows its targets' open segments; never by this reader) */
};
typedef struct tlc_segent {
  uint64_t seq;
  int state;       /* enum tlc_seg_state */
  char path[1200]; /* the data file to tlc_segread_open */
} tlc_segent_t;

/* Lists the segments of `target` under `state_dir` (<state_dir>/<target>/), sorted by sequence
 * (a segment found both plain and .zst is listed once, plain). At most `max` entries (the
 * lowest sequences beyond it are dropped: *n says how many were kept). Returns 0 with *out
 * (tlc_free it; NULL when *n is 0), -errno when the directory cannot be read (-ENOENT: no
 * segments ever), TLC_ENOMEM. Any thread. */
int tlc_segread_list(const char *state_dir, const char *target, size_t max, tlc_segent_t **out,
                     size_t *n);

#endif
