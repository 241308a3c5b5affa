/* seg-int.h - the leaf library store/seg/: segment files, manifests and the reader, shared by
 * the store (its writer, post-seal worker and recovery), history, continuity and `tlcapd replay`.
 * No threads, no event loop, no tlc_store_t: every function runs on its caller's thread and
 * touches only what it is given (a tlc_seg_t, a manifest, a reader) and the files it names.
 * A tlc_seg_t is owned by one thread at a time (the store's writer opens and appends to it and
 * hands it to the post-seal worker with tlc__seg_move). Not a contract for the other modules:
 * they use segread.h; the store and the tests include this.
 */
#ifndef TLC_SEG_INT_H
#define TLC_SEG_INT_H

#include "formats/evlog.h"
#include "formats/scan.h"
#include "formats/tlc_event.h"
#include "store/seg/seg.h"

#include <stddef.h>
#include <stdint.h>

#define TLC_SEG_NAME_MAX 96 /* a file name inside a target directory */
#define TLC_SEG_BASE_MAX 40 /* "20261122T034000Z-00000017" */
#define TLC_GAP_MAX                                                                                \
  256                            /* gap entries kept per manifest; more are merged into the latest \
                                      of the same reason (tlc__manifest_add_gap) */
#define TLC_GAP_REASONS       32 /* room beyond TLC_GAP_MAX for reasons not seen before */
#define TLC_GAP_REASON_MAX    32
#define TLC_QUARANTINE_DIR    ".quarantine"
#define TLC_MAX_BLOCK_DEFAULT (64u * 1024u * 1024u)
#define TLC_TARGET_NAME_MAX_  128 /* = TLC_TARGET_NAME_MAX of target.h */

/* ---- checksum: 64-bit FNV-1a ---- */
#define TLC_FNV_INIT 0xcbf29ce484222325ull
uint64_t tlc__fnv1a(uint64_t h, const void *p, size_t n);
/* The same over 8-byte little-endian words, then the bytes left over one at a time, applied
 * record by record (bin1x: 24 bytes, evlog: a block): the content checksum of manifests
 * written before `xxh3` (`fnv1a64w`), still read and verified, as is the byte-wise one of
 * older manifests still (`fnv1a64`). */
uint64_t tlc__fnv1a_w(uint64_t h, const void *p, size_t n);
/* tlc_manifest_t.csum: the content checksum's kind. 0, the zero value, is what new manifests
 * carry: XXH3-64 (seed 0) of the content bytes in order (Debian's libxxhash): at full ingest
 * 16 % of the writer's samples against the serial FNV chain's 27 % (bench/RESULTS.md,
 * "Design figures"). */
enum { TLC_CSUM_XXH3 = 0, TLC_CSUM_FNV1A64W = 1, TLC_CSUM_FNV1A64 = 2 };

/* ---- record scanner (bin1x records, evlog blocks): formats/scan.h ---- */

typedef tlc_scan_rec_t tlc_rec_t;

/* ---- manifest ---- */

typedef struct tlc_gap {
  char reason[TLC_GAP_REASON_MAX];
  uint64_t count;  /* what the reason counts (see docs/storage.md) */
  uint64_t offset; /* byte offset in the segment where it happened */
  uint64_t record; /* record number (0-based) before which it happened */
} tlc_gap_t;

typedef struct tlc_idx {
  uint64_t record; /* record number */
  uint64_t offset; /* byte offset of that record */
  int64_t time;    /* its tmin */
  int64_t maxb;    /* largest time of every record before it (INT64_MIN if none) */
  int64_t mina;    /* smallest time of it and every record after it */
} tlc_idx_t;

/* An arrival (wall-clock) index entry: the records from `record` (at byte `offset`) up to the
 * next entry's arrived at `wall` or less than a second after it (the writer adds one when a
 * second has passed since the last, or the clock stepped back). */
typedef struct tlc_widx {
  uint64_t record;
  uint64_t offset;
  int64_t wall; /* Unix ns */
} tlc_widx_t;

typedef struct tlc_manifest {
  tlc_format_t format;
  char target[TLC_TARGET_NAME_MAX_ + 1];
  char data[TLC_SEG_NAME_MAX];    /* data file name (without .zst) */
  char exportf[TLC_SEG_NAME_MAX]; /* main export file name, "" if none */
  uint64_t seq;
  uint64_t bytes, records, items;
  int64_t first_time, last_time, min_time, max_time; /* valid when records > 0 */
  uint64_t sum;                                      /* content checksum */
  int csum; /* its kind: TLC_CSUM_XXH3 (default), or one of older manifests (TLC_CSUM_*) */
  int64_t opened_wall_ns, closed_wall_ns;
  int reason; /* enum tlc_store_reason */
  int recovered, rebuilt, suspect;
  uint64_t torn_bytes;
  uint32_t index_interval;
  tlc_gap_t *gaps;
  size_t ngaps, capgaps;
  tlc_idx_t *idx;
  size_t nidx, capidx;
  tlc_widx_t *widx; /* arrival index (`wall` lines), in record order */
  size_t nwidx, capwidx;
} tlc_manifest_t;

void tlc__manifest_init(tlc_manifest_t *m);
void tlc__manifest_fini(tlc_manifest_t *m);
void tlc__manifest_reset(tlc_manifest_t *m); /* empties, keeps allocations */
int tlc__manifest_add_gap(tlc_manifest_t *m, const char *reason, uint64_t count);
/* Notes that the records written from now on (m->records, m->bytes) arrived at wall_ns: adds an
 * arrival index entry when there is none yet, when a calendar second (ns / 10^9) other than the
 * last one's began, or when the clock went back; replaces the last one when no record followed it.
 * Returns 1 when an entry was added or changed (*out: it), 0 when none was needed, TLC_ENOMEM. */
int tlc__manifest_add_wall(tlc_manifest_t *m, int64_t wall_ns, tlc_widx_t *out);
/* The arrival index of an open segment, kept beside it while it is open: `<data>.widx`, one
 * 24-byte entry (record, offset, wall: little-endian) per line of the index. Loads the entries
 * of `path` whose offset is below m->bytes into m (a torn last entry is ignored). 0 (also when
 * there is no file), or TLC_ENOMEM. */
int tlc__manifest_load_widx(tlc_manifest_t *m, const char *path);
/* The entries of b[0..n) (whole 24-byte entries) into m, as tlc__manifest_load_widx reads them:
 * only increasing offsets and records below m->bytes / m->records. 0, 1 (an entry past them:
 * stop), or TLC_ENOMEM. */
int tlc__manifest_widx_decode(tlc_manifest_t *m, const uint8_t *b, size_t n);

/* Manifest builder: feed records in order; computes counts, times, checksum and the index.
 * Zero it before the first start; a builder started again reuses its checksum state; free it
 * with tlc__mbuild_free. The checksum's kind is m->csum as start finds it; an XXH3 builder
 * that cannot get memory for its state (about 640 bytes) falls back to TLC_CSUM_FNV1A64W, which the
 * manifest then names. */
typedef struct tlc_mbuild {
  tlc_manifest_t *m;
  uint32_t interval;
  int64_t running_max;
  void *xsmem; /* TLC_CSUM_XXH3: holds the streaming state (XXH3_state_t, 64-byte aligned in
                * it); owned (tlc_malloc) */
} tlc_mbuild_t;
void tlc__mbuild_start(tlc_mbuild_t *b, tlc_manifest_t *m, uint32_t interval);
int tlc__mbuild_add(tlc_mbuild_t *b, const uint8_t *rec, const tlc_rec_t *r);
/* computes the index's suffix minima and the checksum (m->sum) */
void tlc__mbuild_finish(tlc_mbuild_t *b);
void tlc__mbuild_free(tlc_mbuild_t *b);
/* Adds n whole bin1x records buf[0..n*24) whose times (as the decoder read them) are
 * times[0..n): the same result as n calls of tlc__mbuild_add, without reading the records. */
int tlc__mbuild_add_fixed(tlc_mbuild_t *b, const uint8_t *buf, size_t n, const int64_t *times);

/* Text form (docs/storage.md). tlc__manifest_format returns a tlc_malloc'd NUL-terminated
 * buffer (length in *len) or NULL. tlc__manifest_parse returns 0 or TLC_ESYNTAX (with a reason
 * naming the line) when the text is not a valid, self-consistent manifest. */
char *tlc__manifest_format(const tlc_manifest_t *m, size_t *len);
int tlc__manifest_parse(tlc_manifest_t *m, const char *buf, size_t len, char *why, size_t whylen);

/* Reads and parses a manifest file (O_NOFOLLOW). 0, -errno, or TLC_ESYNTAX. */
int tlc__manifest_load(const char *path, tlc_manifest_t *m, char *why, size_t whylen);
/* Writes `m` to path atomically (path.tmp, fsync, rename). 0 or -errno. Crash point
 * seal.after_manifest_write fires after the rename when `crashpoints` is set. */
int tlc__manifest_store(const char *path, const tlc_manifest_t *m);

/* Scans a data file (plain or .zst) and rebuilds a manifest from it. Sets *whole_len to the
 * length of the whole-record prefix and *file_len to the data length. Returns 0, or -errno /
 * TLC_E* when the file cannot be read. */
int tlc__manifest_build_file(const char *path, int zst, tlc_format_t f, uint32_t interval,
                             uint32_t max_block, tlc_manifest_t *m, uint64_t *whole_len,
                             uint64_t *file_len);
/* The same with the checksum of kind `csum` (TLC_CSUM_*): to verify data against a manifest,
 * use that manifest's kind (build_file uses the default, TLC_CSUM_XXH3). */
int tlc__manifest_build_file_csum(const char *path, int zst, tlc_format_t f, uint32_t interval,
                                  uint32_t max_block, int csum, tlc_manifest_t *m,
                                  uint64_t *whole_len, uint64_t *file_len);

/* ---- names ---- */

enum tlc_seg_kind {
  TLC_SK_NONE = 0, /* not one of ours */
  TLC_SK_DATA,     /* <base>.txt.BIN | <base>.xml.BIN | <base>.log */
  TLC_SK_PART,     /* <data>.part */
  TLC_SK_ZST,      /* <data>.zst */
  TLC_SK_ZSTPART,  /* <data>.zst.part */
  TLC_SK_TORN,     /* <data>.torn */
  TLC_SK_EXPORT,   /* <base>.txt | <base>.xml (main export of a bin1x segment) */
  TLC_SK_MANIFEST, /* <base>.manifest */
  TLC_SK_TMP,      /* <base>.<anything>.tmp */
  TLC_SK_SKIPPED,  /* <data>.skipped (keep_skipped) */
  TLC_SK_WIDX      /* <data>.widx: the open segment's arrival index (removed at its seal) */
};

typedef struct tlc_segname {
  int kind; /* enum tlc_seg_kind */
  uint64_t seq;
  int evlog; /* data extension .log (else .txt.BIN or .xml.BIN); for data-ish kinds */
  int xml;   /* data extension .xml.BIN, or the export <base>.xml */
  char base[TLC_SEG_BASE_MAX];
} tlc_segname_t;

/* Parses a file name of a target directory. Returns kind (TLC_SK_NONE for foreign names). */
int tlc__segname_parse(const char *name, tlc_segname_t *out);
/* The wall clock (Unix ns, whole seconds) of a name's "<UTC start>", 0 when it has none. */
int64_t tlc__segname_time(const char *name);
/* An open segment keeps its arrival index beside it (<data>.widx) only once it holds a second
 * entry: a segment without one had all its records arrive in the (calendar) second it was
 * opened in, which its name says. For such a segment (no entry, records) this adds the entry
 * {0, 0, opened_ns}. */
void tlc__manifest_wall_default(tlc_manifest_t *m, int64_t opened_ns);
/* "<UTC start>-<seq>" for a wall time in ns. */
void tlc__segname_base(char *out, size_t len, int64_t wall_ns, uint64_t seq);
/* Data file name for a base: "<base>.log" (evlog), "<base>.xml.BIN" (bin1x with an XML main
 * export: xml = 1) or "<base>.txt.BIN" (bin1x with a Text1 main export). */
void tlc__segname_data(char *out, size_t len, const char *base, tlc_format_t f, int xml);
/* The main export's extension for a data file name: ".xml" for <base>.xml.BIN, else ".txt". */
const char *tlc__segname_export_ext(const char *data);

/* ---- a sealed segment as the catalog of retention keeps it (store/retention.c) ---- */

typedef struct tlc_catent {
  char target[TLC_TARGET_NAME_MAX_ + 1];
  char base[TLC_SEG_BASE_MAX];
  char data[TLC_SEG_NAME_MAX]; /* data file name without .zst */
  uint64_t seq;
  uint64_t bytes; /* every file of the segment */
  int64_t opened_wall_ns, closed_wall_ns;
  int compressed;
  int busy;   /* being compressed: retention waits for it (and so for its target's later ones) */
  int pinned; /* its main export or manifest is being written late: retention waits for it too */
} tlc_catent_t;

/* Sum of every file size of a segment base in dir (data, .zst, export, manifest, torn, skipped). */
uint64_t tlc__segment_disk_bytes(const char *dir, const char *base, const char *data);

/* Deletes one sealed segment's files in the order data, (crash point), export, torn, skipped,
 * manifest, then fsyncs the directory. Returns the bytes freed (from its catalog entry). */
int tlc__segment_delete(const char *dir, const tlc_catent_t *e);

/* ---- byte source over a data file, plain or zstd (segread.c) ---- */

typedef struct tlc_src {
  int fd;
  int zst;
  void *dctx;  /* ZSTD_DCtx */
  uint8_t *in; /* compressed input buffer */
  size_t in_len, in_pos, in_cap;
  int in_eof;
  int frame_done;
  uint64_t pos;          /* uncompressed bytes delivered so far */
  uint64_t in_off;       /* zstd: compressed bytes the decompressor consumed */
  const char *zst_error; /* zstd: ZSTD_getErrorName of the last TLC_EFRAME, or NULL */
} tlc_src_t;

/* Opens path (O_NOFOLLOW, regular files only). 0 or -errno / TLC_E*. */
int tlc__src_open(tlc_src_t *s, const char *path, int zst);
/* Reads up to n bytes; returns bytes (0 at end) or a negative error: for zstd, TLC_EFRAME for
 * damaged compressed data (zst_error says how) and TLC_ETRUNC for a file that ends inside a
 * frame (an empty file included), both at compressed byte in_off (a cut .zst is never read as
 * a shorter, valid segment). */
int64_t tlc__src_read(tlc_src_t *s, void *buf, size_t n);
/* Restarts from byte 0. */
int tlc__src_rewind(tlc_src_t *s);
void tlc__src_close(tlc_src_t *s);

/* Record reader over a source: a window buffer holding at least one whole record/block. */
typedef struct tlc_recrd {
  tlc_src_t src;
  tlc_format_t format;
  uint32_t max_block;
  uint8_t *buf;
  size_t cap, len, pos; /* window buf[pos..len) */
  uint64_t offset;      /* data offset of buf[pos] */
  int eof;
} tlc_recrd_t;

int tlc__recrd_open(tlc_recrd_t *rd, const char *path, int zst, tlc_format_t f, uint32_t max_block);
/* Next record: 1 (*rec points into the window, valid until the next call; *r filled; *off its
 * offset), 0 at a clean end, TLC_ETRUNC when the data ends inside a record (*off = where it
 * starts), TLC_EFRAME when bytes at *off cannot start a record, other negative on I/O error. */
int tlc__recrd_next(tlc_recrd_t *rd, const uint8_t **rec, tlc_rec_t *r, uint64_t *off);
/* Skips forward to data offset `off` (>= current), which must be a record boundary. */
int tlc__recrd_skip_to(tlc_recrd_t *rd, uint64_t off);
int tlc__recrd_rewind(tlc_recrd_t *rd);
void tlc__recrd_close(tlc_recrd_t *rd);

/* ---- what a segment's main export needs beyond the segment itself ---- */

typedef struct tlc_exset {
  const tlc_mapping_t *mapping; /* names, or NULL */
  uint8_t has_context_area;
  uint32_t context_area;
  tlc_ctxpack_t pack; /* packed context_area values (masks 0: not packed) */
} tlc_exset_t;

/* ---- segment data files: recovery of one .part (startup) ---- */

/* Recovers <dir>/<part>: keeps the whole-record prefix, moves the tail to <data>.torn, seals
 * under the data name with a rebuilt manifest (or keeps a valid manifest that matches).
 * Writes no main export: with a rebuilt manifest, an export left by the interrupted seal is
 * removed (it may describe other bytes), and the caller has the export written (with the
 * target's settings when it knows them) and recorded in the manifest. Fills *m (caller's,
 * initialised). `last`: the target's newest segment, whose stream the crash cut: its manifest
 * gets a `restart` gap at its end (a gap to history, as to the live statistics after the
 * restart). The arrival index of <data>.widx goes into a rebuilt manifest. Returns 0; 1 when the
 * .part held no whole record (removed, with its manifest, export and torn tail: no empty segment;
 * kept when a .skipped file belongs to it); or a negative error (the caller quarantines). */
int tlc__segment_recover_part(const char *dir, const char *target, const tlc_segname_t *sn,
                              tlc_format_t f, uint32_t interval, uint32_t max_block, int last,
                              tlc_manifest_t *m, uint64_t *torn_bytes);

/* Writes a bin1x segment's main export through the hook: <dir>/<base>.txt (xml: <base>.xml) via
 * .tmp, fsync, rename. `data_path` is read by the hook's timeline; `ex` (may be NULL: none)
 * gives the target's names and context area. Returns 0 or a negative error. */
int tlc__segment_write_export(const char *dir, const char *base, const char *target, tlc_format_t f,
                              int xml, uint64_t seq, const char *data_path, int recovered,
                              const tlc_exset_t *ex, tlc_store_export_fn cb, void *ud);

/* ---- the open segment of a target (writer thread) ---- */

typedef struct tlc_seg {
  int fd; /* -1: none open */
  tlc_format_t format;
  uint64_t seq;
  char dir[1024]; /* <state>/<target> */
  char target[TLC_TARGET_NAME_MAX_ + 1];
  char base[TLC_SEG_BASE_MAX];
  char data[TLC_SEG_NAME_MAX]; /* data file name (sealed) */
  tlc_manifest_t m;            /* built as records are written; gaps recorded */
  tlc_mbuild_t b;
  uint64_t durable; /* bytes confirmed by fdatasync */
  uint64_t since_sync;
  int64_t last_sync_mono, opened_mono;
  int suspect; /* a write or fsync failed: seal as suspect, never trust */
  uint32_t max_block;
  int seal_err;      /* first error of the last seal after which it still sealed */
  int mf_err;        /* the last seal's manifest write error (0: written) */
  int ex_err;        /* the last seal's main export error (0: written, or none due) */
  int xml;           /* bin1x: <base>.xml.BIN with an XML main export (else .txt.BIN, Text1) */
  int skfd;          /* <data>.skipped while open (keep_skipped), else -1 */
  int wfd;           /* <data>.widx while open (the arrival index so far), else -1 */
  uint64_t sk_bytes; /* bytes in it */
} tlc_seg_t;

void tlc__seg_init(tlc_seg_t *s);
void tlc__seg_fini(tlc_seg_t *s);
/* Moves an open segment (fd, manifest and its arrays, names) from `from` to `to` (uninitialised
 * memory) and leaves `from` initialised with no segment open: how the writer hands a segment
 * to the sealer thread. */
void tlc__seg_move(tlc_seg_t *to, tlc_seg_t *from);
/* Creates <dir>/<base>.<ext>.part (O_EXCL|O_NOFOLLOW) and fsyncs the directory; `xml` picks
 * the bin1x names of an XML main export (.xml.BIN). 0 or -errno. */
int tlc__seg_open(tlc_seg_t *s, const char *dir, const char *target, tlc_format_t f, int xml,
                  uint64_t seq, int64_t wall_ns, int64_t mono_ns, uint32_t interval);
/* Appends buf[0..len) (whole records). On a failed or short write, truncates the file back to
 * the last whole record written (R6) and returns the error; *wrec and *wbytes always say how many
 * whole records/bytes are in the file from this call. */
int tlc__seg_append(tlc_seg_t *s, const uint8_t *buf, size_t len, uint64_t *wrec, uint64_t *wbytes);
/* The same for the n whole records/blocks buf[0..len) that recs describes (lengths, times, items
 * as the decoder found them): the manifest is built from recs, the bytes are not scanned. */
int tlc__seg_append_recs(tlc_seg_t *s, const uint8_t *buf, size_t len, const tlc_rec_t *recs,
                         size_t n, uint64_t *wrec, uint64_t *wbytes);
/* The same for n whole bin1x records buf[0..n*24) with their times (tlc__mbuild_add_fixed):
 * the manifest is built from the times given, not from the bytes. */
int tlc__seg_append_fixed(tlc_seg_t *s, const uint8_t *buf, size_t n, const int64_t *times,
                          uint64_t *wrec, uint64_t *wbytes);
/* The records appended from now on arrived at wall_ns: the manifest's arrival index, and the
 * open segment's <data>.widx for readers of the .part (written, not synced: an index). */
void tlc__seg_wall(tlc_seg_t *s, int64_t wall_ns);
/* fdatasync; on failure marks the segment suspect (R5: never retried) and returns the error. */
int tlc__seg_sync(tlc_seg_t *s, int64_t mono_ns);
/* Appends to <dir>/<data>.skipped (created on first use), at most `room` bytes of buf[0..len);
 * returns the bytes written (the rest is the caller's to count) or a negative error. */
int64_t tlc__seg_skipped(tlc_seg_t *s, const uint8_t *buf, size_t len, uint64_t room);
/* Seals: fdatasync (and the .skipped file's fsync), main export (bin1x, hook, with `ex`: may be
 * NULL), manifest, rename .part -> data name, fsync the directory; with crash points. Closes the
 * fd. Fills *ent for the catalog. A segment with no record is removed instead (returns 1). 0
 * sealed, 1 removed, negative on failure (the file is then left as .part or quarantined: see
 * segment.c). */
int tlc__seg_seal(tlc_seg_t *s, int reason, int64_t wall_ns, const tlc_exset_t *ex,
                  tlc_store_export_fn cb, void *ud, tlc_catent_t *ent);

/* Path helper: snprintf into a buffer, TLC_ERANGE when it does not fit. */
int tlc__path(char *out, size_t len, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

int64_t tlc__wall_ns(void);
int64_t tlc__mono_ns(void);

#endif
