/* store-int.h - shared internals of the storage module (store.c, writer.c, sealer.c, zstd.c,
 * recovery.c, segment.c, manifest.c, retention.c, segread.c). Not a contract: nothing outside
 * daemon/store*, segment, manifest, retention and segread includes it (tests do, to reach the
 * scanners and the manifest codec).
 */
#ifndef TLC_STORE_INT_H
#define TLC_STORE_INT_H

#include "formats/evlog.h"
#include "formats/scan.h"
#include "formats/tlc_event.h"
#include "store/store.h"

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

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
} tlc_manifest_t;

void tlc__manifest_init(tlc_manifest_t *m);
void tlc__manifest_fini(tlc_manifest_t *m);
void tlc__manifest_reset(tlc_manifest_t *m); /* empties, keeps allocations */
int tlc__manifest_add_gap(tlc_manifest_t *m, const char *reason, uint64_t count);

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
  TLC_SK_SKIPPED   /* <data>.skipped (keep_skipped) */
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
/* "<UTC start>-<seq>" for a wall time in ns. */
void tlc__segname_base(char *out, size_t len, int64_t wall_ns, uint64_t seq);
/* Data file name for a base: "<base>.log" (evlog), "<base>.xml.BIN" (bin1x with an XML main
 * export: xml = 1) or "<base>.txt.BIN" (bin1x with a Text1 main export). */
void tlc__segname_data(char *out, size_t len, const char *base, tlc_format_t f, int xml);
/* The main export's extension for a data file name: ".xml" for <base>.xml.BIN, else ".txt". */
const char *tlc__segname_export_ext(const char *data);

/* ---- catalog of sealed segments (retention) ---- */

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

typedef struct tlc_catalog {
  uv_mutex_t mu;
  tlc_catent_t *v;
  size_t n, cap;
} tlc_catalog_t;

int tlc__catalog_init(tlc_catalog_t *c);
void tlc__catalog_fini(tlc_catalog_t *c);
/* Adds (copies) an entry; caller holds nothing (locks inside). 0 or TLC_ENOMEM. */
int tlc__catalog_add(tlc_catalog_t *c, const tlc_catent_t *e);
/* Whether e is the lowest sequence of its target in the catalog (the only one retention may
 * delete: while it is busy or pinned, its target waits). The caller holds c->mu. */
int tlc__catalog_is_oldest(const tlc_catalog_t *c, const tlc_catent_t *e);
/* Sum of every file size of a segment base in dir (data, .zst, export, manifest, torn, skipped). */
uint64_t tlc__segment_disk_bytes(const char *dir, const char *base, const char *data);

/* Deletes one sealed segment's files in the order data, (crash point), export, torn, skipped,
 * manifest, then fsyncs the directory. Returns the bytes freed (from its catalog entry). */
int tlc__segment_delete(const char *dir, const tlc_catent_t *e);

/* One retention pass over the catalog (writer, sealer or exporter thread, or the recovering thread
 * at start). Deletes oldest first, a target's lowest sequence only; calls `deleted` for each
 * deletion. Returns segments deleted. */
typedef struct tlc_retention {
  const char *state_dir;
  uint64_t max_total_bytes, max_target_bytes, min_free_bytes;
  uint32_t max_segments;
  int64_t max_age_ms;
  int64_t now_wall_ns;
  void (*deleted)(void *ud, const tlc_catent_t *e);
  void *ud;
} tlc_retention_t;
uint64_t tlc__retention_run(tlc_catalog_t *c, const tlc_retention_t *r);

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
 * frame (an empty file included), both at compressed byte in_off (issue 16: a cut .zst read as
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
} tlc_exset_t;

/* ---- segment data files: recovery of one .part (startup) ---- */

/* Recovers <dir>/<part>: keeps the whole-record prefix, moves the tail to <data>.torn, seals
 * under the data name with a rebuilt manifest (or keeps a valid manifest that matches).
 * Writes no main export: with a rebuilt manifest, an export left by the interrupted seal is
 * removed (it may describe other bytes), and the caller has the export written (with the
 * target's settings when it knows them) and recorded in the manifest. Fills *m (caller's,
 * initialised). Returns 0; 1 when the .part held no whole record (removed, with its manifest,
 * export and torn tail: no empty segment; kept when a .skipped file belongs to it); or a negative
 * error (the caller quarantines). */
int tlc__segment_recover_part(const char *dir, const char *target, const tlc_segname_t *sn,
                              tlc_format_t f, uint32_t interval, uint32_t max_block,
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

/* ---- the store's own state: its queues, targets and threads (see the design note in store.c) ----
 */

#define TICK_NS         (250 * 1000000ll)
#define PGAP_MAX        16
#define DISKFULL_LOG_NS (10ll * 1000000000ll)
#define GATHER_RECS     8192       /* bin1x records gathered per command (192 KiB) */
#define GPOOL_MIN       8          /* gather buffer pairs kept for reuse, at least */
#define GPOOL_MAX       64         /* and at most (16 MiB with GATHER_RECS: records and times) */
#define WAKE_BYTES      (1u << 20) /* data queued that wakes the writer at once (or 1/8 cap) */
#define WPOLL_NS        (5 * 1000000ll) /* a busy writer looks for unannounced data this often */
#define READ_LEND_MIN   (16u * 1024u)   /* least room a source is lent to read into */

enum {
  C_OPEN = 1,
  C_DATA,
  C_GAP,
  C_ROTATE,
  C_CLOSE,
  C_RETENTION,
  C_RECONF,
  C_BARRIER,
  C_BARRIER_WRITTEN,
  C_STOP,
  C_SETMAP,
  C_SETCONF,
  C_SKIP,
  C_RECEXPORT,
  C_MARK
};
enum { J_SEAL = 1, J_BARRIER, J_RETRY, J_EXPORT, J_RETAIN };
enum { R_LOG = 1, R_EVENT, R_CLOSED, R_BARRIER, R_COMPRESS, R_STOPPED, R_MARK };

/* A target's names for its segments' exports: an immutable copy of its mapping, shared by the
 * writer (the target's current names) and the seal jobs closed under it. refs under the store's
 * mutex; the last reference frees it (whichever thread that is). */
typedef struct tmap {
  uint32_t refs;
  tlc_mapping_t m;
} tmap_t;

/* A sealed bin1x segment whose main export and/or manifest is still to be written. Two kinds:
 *  - left out by its seal for lack of space (bytes or inodes): the sealer keeps it (s->pend, at
 *    most PEND_MAX) and writes it when space returns: before its next job, when writing resumes
 *    (J_RETRY), at its last try at shutdown;
 *  - recovered at start, or found sealed without its export: the writer keeps it (s->rx, at
 *    most max_deferred_exports) until a target of that name is configured, then hands it to
 *    the sealer (J_EXPORT) with that target's settings; at shutdown, without settings.
 * What is still missing after the last try is done at the next start (a manifest rebuilt from
 * the data, a missing export written). Owned by one thread at a time; need_ex entries are
 * counted in exports_pending. */
typedef struct pend {
  struct pend *next;
  char target[TLC_TARGET_NAME_MAX_ + 1];
  char base[TLC_SEG_BASE_MAX];
  char data[TLC_SEG_NAME_MAX]; /* data file name (without .zst) */
  tlc_format_t format;
  int xml, recovered;
  uint64_t seq;
  int need_ex;          /* the main export is to write, with map and tc */
  int deferred;         /* need_ex: handed to the exporter at the seal (not late for space) */
  int need_mf;          /* m is to write as the manifest */
  tlc_manifest_t m;     /* need_mf: the manifest (its gaps say what was dropped) */
  tmap_t *map;          /* need_ex: a reference to the target's names (NULL: none) */
  tlc_store_tconf_t tc; /* need_ex: its context area */
} pend_t;
#define PEND_MAX 256 /* segments waiting for space */
/* Main exports queued for the exporter at most: with that many it exports without waiting for
 * a burst to pass, and the sealer waits for room before it hands over another (sealer.c). */
#define EXPORT_QUEUE_MAX 4
/* The exporter starts an export only when the store took records in at less than
 * EXPORT_BUSY_BPS over the last EXPORT_WAIT_MS: not during a burst (sealer.c) */
#define EXPORT_BUSY_BPS 32e6
#define EXPORT_WAIT_MS  100

typedef struct cmd {
  struct cmd *next;
  int type;
  tlc_store_target_t *t;
  uint8_t *buf;
  size_t len;
  uint64_t nrec;
  int64_t *times;  /* C_DATA, bin1x: each record's time as the decoder read it (nrec entries) */
  tlc_rec_t *recs; /* C_DATA, evlog: each block's length, times and items (nrec entries) */
  char reason[TLC_GAP_REASON_MAX];
  uint64_t count;
  int rot;
  tlc_store_opts_t *conf;
  tmap_t *map;          /* C_SETMAP: a reference, handed to the writer (NULL: no names) */
  tlc_store_tconf_t tc; /* C_SETCONF */
  void (*cb)(void *);
  void *ud;
  tlc_store_mark_fn mcb; /* C_MARK */
} cmd_t;

typedef struct res {
  struct res *next;
  int type;
  int level;
  int kind, reason;
  int plain; /* R_EVENT sealed: not compressed now (its export first; an R_COMPRESS after it) */
  uint64_t seq;
  tlc_store_target_t *t;
  void (*cb)(void *);
  void *ud;
  tlc_store_mark_fn mcb; /* R_MARK, with pos */
  tlc_store_pos_t pos;
  char target[TLC_TARGET_NAME_MAX_ + 1];
  char path[1200];
  char msg[512];
} res_t;

/* A job for the sealer: a segment to seal (moved out of its target), or a barrier result to
 * deliver once every seal before it is done. Owns everything it holds. */
typedef struct sjob {
  struct sjob *next;
  int kind;
  tlc_seg_t seg;        /* J_SEAL: the closed segment, its fd still open */
  int reason;           /* J_SEAL: enum tlc_store_reason */
  int64_t wall_ns;      /* J_SEAL: when it was closed (manifest closed_wall_ns) */
  tmap_t *map;          /* J_SEAL: a reference to the target's names then (may be NULL) */
  tlc_store_tconf_t tc; /* J_SEAL: the target's export settings then */
  res_t *res;           /* J_BARRIER: the R_BARRIER result to push */
  pend_t *p;            /* J_EXPORT: a recovered segment's export, with its settings */
} sjob_t;

typedef struct pgap {
  char reason[TLC_GAP_REASON_MAX];
  uint64_t count;
} pgap_t;

struct tlc_store_target {
  tlc_store_t *s;
  char name[TLC_TARGET_NAME_MAX_ + 1];
  tlc_format_t format;
  struct tlc_store_target *next; /* loop: list of open targets */
  /* loop side: evlog block re-assembly (the evlog encoder, byte-identical blocks) */
  tlc_evlog_enc_t enc;
  tlc_rec_t ea;           /* the open block's items and times */
  tlc_rec_t *ed;          /* blocks written and not queued yet: their descriptors */
  size_t ned, ced;        /* used, allocated */
  int ed_err;             /* a descriptor could not be kept: those blocks are dropped */
  uint64_t pend_drop_rec; /* buffer_full drops not yet queued as a gap */
  /* loop side, bin1x: records gathered (as received) and their times, queued as one command at
   * the end of the loop turn (prepare callback), when GATHER_RECS are held, or before any
   * other command of this target or of the store (so the order of commands is kept) */
  uint8_t *gb;
  int64_t *gt;
  size_t gn;
  int gq; /* on the store's list of targets with gathered records */
  struct tlc_store_target *gnext;
  /* zero-copy reads (tlc_store_read_buffer): gb was lent to the source for a read in loop turn
   * lend_turn (0: not lent); while that turn lasts, bytes of the stream may still be read from
   * it, so it is not handed to the writer (gather_flush queues a copy instead) */
  uint64_t lend_turn;
  /* loop side, keep_skipped: the bytes the decoder told in no record (tlc_store_skipped) */
  uint8_t *sk_out; /* skipped bytes kept, to queue (C_SKIP); at most keep_skipped */
  size_t sk_olen, sk_ocap;
  uint64_t sk_unkept; /* skipped bytes that could not be kept, to queue */
  int rx_state;       /* loop: 1 configured, C_RECEXPORT to queue (rx_mark); 2 queued */
  /* writer side */
  tlc_seg_t seg;
  char dir[1024];
  uint64_t next_seq;
  int seq_known;
  uint64_t pause_rec;  /* records dropped during the current disk-full pause */
  pgap_t pg[PGAP_MAX]; /* gaps waiting for the next segment */
  size_t npg;
  tmap_t *wmap;         /* names for the exports (a reference; NULL: none) */
  tlc_store_tconf_t tc; /* export settings */
  uint8_t *skpend;      /* keep_skipped: bytes waiting for the next segment (<= keep_skipped) */
  size_t skpend_len;
  struct tlc_store_target *wnext;
  /* loop side: backpressure (tlc_store_target_set_flow) */
  void (*flow_cb)(void *ud, int paused);
  void *flow_ud;
  int closed; /* tlc_store_target_close was called: no more flow calls */
  /* under s->mu */
  tlc_store_target_counters_t c;
  size_t qb;      /* bytes of this target queued or gathered for the writer */
  int paused;     /* flow: the target was asked to pause */
  int resume_due; /* flow: the writer drained it below the low-water mark */
};

struct tlc_store {
  uv_loop_t *loop;
  tlc_store_opts_t o;
  char *state_dir;
  uv_mutex_t mu;
  uv_cond_t cv;
  cmd_t *qh, *qt;
  size_t qbytes, qcap;
  size_t ntargets; /* open targets (under mu): each one's share of the queue is qcap / ntargets */
  res_t *rh, *rt;
  uv_async_t async;
  uv_thread_t thr;
  int thr_started, thr_exited, joined;
  tlc_store_counters_t c; /* under mu */
  tlc_catalog_t cat;
  /* sealer (queue, count and stop flag under mu); it signals cv when a job is done */
  uv_thread_t sthr;
  uv_cond_t scv; /* the sealer waits here for jobs */
  sjob_t *sh, *st;
  uint32_t sealing; /* J_SEAL jobs queued or running */
  int sstop, sthr_started;
  /* exporter (queue, count, busy and stop flags under mu): the main exports of the segments the
   * sealer sealed without them, one at a time, not during a burst (sealer.c) */
  uv_thread_t xthr;
  uv_cond_t xcv; /* the exporter waits here for jobs, the sealer for room or for all done */
  sjob_t *xh, *xt;
  uint32_t nx; /* jobs queued for the exporter, not taken yet */
  int xbusy;   /* the exporter is writing one */
  int xhurry;  /* a barrier (or the stop) waits for every export: no waiting for a burst */
  int xstop, xthr_started;
  pend_t *pend; /* sealer only: segments whose export or manifest waits for space */
  size_t npend;
  /* writer only (filled by recovery before the writer starts): exports waiting for their
   * target's settings */
  pend_t *rx, **rx_tail;
  size_t nrx;
  /* writer only */
  tlc_store_target_t *wlist;
  int disk_full;
  int64_t next_probe, next_retention, next_tick, df_log_last;
  uint64_t df_suppressed;
  /* loop only */
  tlc_store_target_t *targets;
  tlc_store_target_t *gather; /* targets with gathered records (gq) */
  uv_prepare_t prep;          /* queues the gathered records at the end of each loop turn */
  uint64_t turn;              /* loop turns seen by prep, from 1 (gather buffers lent for a read) */
  int nhandles;               /* handles not closed yet (async, prep) */
  size_t gather_max; /* records gathered per command: GATHER_RECS, at most a quarter of the queue */
  /* gather buffers (records and times, gather_max each) ready for the loop to fill: taken at
   * start and given back by the writer, at most gpool_keep of them (under mu) */
  uint8_t *gpool_b[GPOOL_MAX];
  int64_t *gpool_t[GPOOL_MAX];
  size_t ngpool, gpool_keep;
  int gpool_filled; /* loop only: gpool_fill ran (the first bin1x target opened) */
  /* the writer's wake-ups (under mu): the loop signals cv for every command but data, and for
   * data only while the writer is idle (w_poll 0) or once wake_bytes are queued; a busy writer
   * (w_poll 1) looks for data every WPOLL_NS by itself */
  size_t wake_bytes;
  int w_poll;
  int rx_any;        /* recovery deferred some exports (set before the writer starts) */
  int retain_live;   /* recovery's catalog is complete (set before the threads start): an unpin
                      * runs a retention pass */
  int rx_kick;       /* a target was marked by rx_mark: rx_flush has work */
  unsigned inflight; /* compressions */
  int closing;
  void (*close_cb)(void *);
  void *close_ud;
};

#define LOCKED(s, stmt)                                                                            \
  do {                                                                                             \
    uv_mutex_lock(&(s)->mu);                                                                       \
    stmt;                                                                                          \
    uv_mutex_unlock(&(s)->mu);                                                                     \
  } while (0)

/* store.c */
int64_t tlc__store_wall(tlc_store_t *s);
int64_t tlc__store_mono(tlc_store_t *s);
void tlc__store_log_direct(tlc_store_t *s, int level, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
void tlc__store_push_res(tlc_store_t *s, res_t *r);
void tlc__store_wlog(tlc_store_t *s, int level, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
void tlc__store_wevent(tlc_store_t *s, int kind, const char *target, const char *path, int reason,
                       uint64_t seq);
/* the same; plain: a sealed segment not to compress at this event (its export is still to
 * write: sealer.c asks for the compression after it) */
void tlc__store_wevent_plain(tlc_store_t *s, int kind, const char *target, const char *path,
                             int reason, uint64_t seq, int plain);
int tlc__store_flow_low(const tlc_store_t *s, const tlc_store_target_t *t);
void tlc__store_flow_resume(tlc_store_t *s);
void tlc__store_tmap_unref(tlc_store_t *s, tmap_t *m);
tmap_t *tlc__store_tmap_ref(tlc_store_t *s, tmap_t *m);
void tlc__store_maybe_finish_close(tlc_store_t *s);

/* writer.c */
int tlc__store_is_nospace(int rc);
void tlc__store_w_deleted(void *ud, const tlc_catent_t *e);
void tlc__store_fill_retention(tlc_store_t *s, tlc_retention_t *r);
void tlc__store_update_stored(tlc_store_t *s);
void tlc__store_retention_pass(tlc_store_t *s);
int tlc__store_ensure_dir(const char *path);
int tlc__store_ensure_dirs(const char *path, size_t from);
int tlc__store_target_name_ok(const char *name);
void tlc__store_apply_defaults(tlc_store_opts_t *o);
void tlc__store_writer_main(void *arg);

/* sealer.c */
tlc_catent_t *tlc__store_cat_find(tlc_catalog_t *c, const char *target, uint64_t seq);
pend_t *tlc__store_pend_new(const char *target, const char *base, const char *data, tlc_format_t f,
                            int xml, uint64_t seq, int recovered);
void tlc__store_pend_want_export(tlc_store_t *s, pend_t *p);
void tlc__store_pend_free(tlc_store_t *s, pend_t *p);
int tlc__store_pend_try(tlc_store_t *s, pend_t *p);
void tlc__store_pend_keep(tlc_store_t *s, pend_t *p);
void tlc__store_seal_now(tlc_store_t *s, tlc_seg_t *seg, int reason, int64_t wall_ns, tmap_t *map,
                         const tlc_store_tconf_t *tc);
void tlc__store_push_job(tlc_store_t *s, sjob_t *j);
void tlc__store_sealer_main(void *arg);
void tlc__store_exporter_main(void *arg);
/* Stops the exporter once it has written every export queued (nothing when not started). */
void tlc__store_stop_exporter(tlc_store_t *s);
/* Waits until every export handed to the exporter is written (a barrier; any thread but the
 * exporter). */
void tlc__store_wait_exports(tlc_store_t *s);
void tlc__store_stop_sealer(tlc_store_t *s);

/* zstd.c */
void tlc__store_start_compress(tlc_store_t *s, const res_t *r);

#endif
