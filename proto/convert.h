/* convert.h - between stats.h's tlc_table_t and the protocol's messages, and frame packing.
 *
 * The daemon turns a snapshot table into a Tlcap__Snapshot (tlc_pb_snapshot_build) and packs
 * the envelope into one framed buffer (tlc_pb_frame_size/tlc_pb_frame_pack); the client turns
 * a received Snapshot back into a table (tlc_pb_snapshot_apply), so that `tlcap stats` prints
 * through the same exporters as `tlcapd replay`.
 *
 * Every allocation goes through tlc_malloc: protobuf-c's through tlc_pb_allocator, built
 * messages' through a tlc_pb_arena_t freed in one call. Pure: no I/O, no libuv.
 */
#ifndef TLC_CONVERT_H
#define TLC_CONVERT_H

#include "tlcap.pb-c.h"

#include "base/list.h"
#include "formats/mapping.h"
#include "formats/stats.h"

#include <stddef.h>
#include <stdint.h>

/* The protocol version this source tree speaks, and the oldest it still accepts. */
#define TLC_PROTO_VERSION     1u
#define TLC_PROTO_MIN_VERSION 1u

/* protobuf-c's allocator routed to tlc_malloc/tlc_free: pass it to every *__unpack and
 * *__free_unpacked call. */
extern ProtobufCAllocator tlc_pb_allocator;

/* A bump allocator for building messages: chunks from tlc_malloc, freed together. */
typedef struct tlc_pb_arena {
  SLIST_HEAD(, tlc_pb_chunk) head;  /* the chunks in use, the current one first */
  size_t used;                      /* bytes allocated so far (all chunks) */
  size_t max;                       /* cap on `used` (0: 1 GiB) */
  SLIST_HEAD(, tlc_pb_chunk) spare; /* chunks kept by tlc_pb_arena_rewind for the next ones */
} tlc_pb_arena_t;

void tlc_pb_arena_init(tlc_pb_arena_t *a, size_t max);
/* Frees every chunk. Safe on zeroed memory. */
void tlc_pb_arena_fini(tlc_pb_arena_t *a);
/* Forgets every allocation but keeps the chunks for the next ones (an arena that builds one
 * message after another allocates nothing once it has grown to the largest). */
void tlc_pb_arena_rewind(tlc_pb_arena_t *a);
/* Zeroed, 16-byte aligned memory valid until fini, or NULL (no memory or cap reached). */
void *tlc_pb_arena_alloc(tlc_pb_arena_t *a, size_t size);
/* An arena copy of s (NUL-terminated), or NULL. */
char *tlc_pb_arena_strdup(tlc_pb_arena_t *a, const char *s);

/* Columnar rows (Snapshot.columns and Snapshot.cells; docs/protocol.md "Columnar rows"): a
 * row is a list of cells, one int64 per column id. Row fields: */
enum {
  TLC_COL_HANDLE = 1,
  TLC_COL_CONTEXT = 2,
  TLC_COL_STATE = 3,
  TLC_COL_KIND = 4, /* bits 0-1 row kind, bit 2 has_value, bit 3 + k quantiles of kind k known */
  TLC_COL_COUNT = 6,
  TLC_COL_ANOMALIES = 7,
  TLC_COL_VALUE = 8,
  TLC_COL_VALUE_MIN = 9,
  TLC_COL_VALUE_MAX = 10,
  TLC_COL_SEQ = 11
};
/* Distribution fields f of sample kind k: column TLC_COL_DIST(k, f). */
enum {
  TLC_COLF_TOTAL = 0,
  TLC_COLF_N = 1,
  TLC_COLF_SUM = 2,
  TLC_COLF_MIN = 3,
  TLC_COLF_MAX = 4,
  TLC_COLF_SUMSQ_HI = 5,
  TLC_COLF_SUMSQ_LO = 6,
  TLC_COLF_Q = 7, /* 7 + i: quantile i of tlc_quantiles (p50, p90, p99, p99.9) */
  /* When MAX's sample was taken (tlc_at_t, SPEC 13): its first and closing events' target ns,
   * and EPOCH + 1 (0: not known; then START and END are 0 too) */
  TLC_COLF_MAX_START = 11,
  TLC_COLF_MAX_END = 12,
  TLC_COLF_MAX_EPOCH = 13,
  TLC_COLF_END = 14 /* fields 0 .. TLC_COLF_END - 1 are known */
};
#define TLC_COL_DIST(k, f) (16u + 16u * (unsigned)(k) + (unsigned)(f))
/* Window w's COUNT, and field f (N, SUM, MIN, MAX) of kind k in window w. */
enum { TLC_COLW_N = 0, TLC_COLW_SUM = 1, TLC_COLW_MIN = 2, TLC_COLW_MAX = 3 };
#define TLC_COL_WCOUNT(w)    (128u + 32u * (unsigned)(w))
#define TLC_COL_WIN(w, k, f) (128u + 32u * (unsigned)(w) + 1u + 4u * (unsigned)(k) + (unsigned)(f))
#define TLC_COL_NKEYS        4   /* HANDLE, CONTEXT, STATE, KIND: first in every columnar row */
#define TLC_COL_MAX_COLUMNS  176 /* more than every known column */

/* 1 when `col` is a column id this tree knows. */
int tlc_col_known(uint32_t col);
/* The cell of column `col` (known) for row r: uint64 fields as their int64 bits; MIN, MAX and
 * quantiles 0 without samples (as in Dist). */
int64_t tlc_col_get(const tlc_stat_t *r, uint32_t col);
/* The reverse, into a row; unknown columns are ignored. Window cells raise r->nwin to cover
 * their window. */
void tlc_col_set(tlc_stat_t *r, uint32_t col, int64_t v);
/* Normalises a requested column list into out[] (capacity TLC_COL_MAX_COLUMNS): the key
 * columns first, then each known requested column once, in request order; unknown ids are
 * left out. Returns the count and sets *windows / *quantiles when a window or quantile column
 * is among them. */
size_t tlc_cols_normalise(const uint32_t *req, size_t n, uint32_t *out, int *windows,
                          int *quantiles);

/* Which rows and parts of a table a snapshot carries. */
typedef struct tlc_pb_snap_sel {
  int windows;   /* copy the rolling windows */
  int quantiles; /* copy quantiles */
  /* Optional row filter: keep the row when it returns non-zero (NULL: keep all). */
  int (*keep)(void *ud, const tlc_stat_t *r);
  void *keep_ud;
  /* Columnar rows when ncolumns > 0: these columns (normalised, tlc_cols_normalise) in
   * Snapshot.columns and .cells instead of Snapshot.rows. */
  const uint32_t *columns;
  size_t ncolumns;
  /* Leave out the per-context code rows of a table with more than one context (Neutral rows,
   * data and state rows stay). */
  int neutral_only;
} tlc_pb_snap_sel_t;

/* Fills `s` (initialised here) from table `t`; every pointer it holds lives in `a`. `target`
 * is copied. `m` (may be NULL) is added as Snapshot.mapping. Returns 0 or TLC_ENOMEM. */
int tlc_pb_snapshot_build(tlc_pb_arena_t *a, Tlcap__Snapshot *s, const tlc_table_t *t,
                          const char *target, const tlc_pb_snap_sel_t *sel, const tlc_mapping_t *m);

/* Pre-encoded rows, for a server that keeps each row's bytes and assembles snapshots from them
 * (a row is encoded once when it changes, however many messages carry it). A row's bytes are
 * either a whole Snapshot.rows field (tag and length included) or, for columnar rows, its
 * cells; either way a snapshot's rows part is their plain concatenation:
 *  - tlc_pb_row_build fills one Row message (its pointers in `a`; sel->windows / quantiles as
 *    for tlc_pb_snapshot_build, nwin the table's window count); tlc_pb_row_field_size and
 *    tlc_pb_row_field_pack encode it as a Snapshot.rows field;
 *  - tlc_pb_cells_encode writes a row's cells as packed sint64 varints (at most 10 bytes per
 *    column) and returns their length; `qmask` (tlc_pb_cells_qmask) keeps KIND's "quantiles
 *    known" bits to the kinds whose quantile columns are sent;
 *  - tlc_pb_snapshot_frame_size and _frame_begin frame ServerMessage{snapshot}: `hdr` is the
 *    Snapshot without rows and cells (with `columns` for columnar rows), and `row_bytes` the
 *    length of the rows part that the caller copies after what _frame_begin wrote. Protobuf
 *    readers accept the rows after the other fields, so the message decodes exactly like one
 *    packed by protobuf-c. */
int tlc_pb_row_build(tlc_pb_arena_t *a, Tlcap__Row *pr, const tlc_stat_t *r, uint32_t nwin,
                     const tlc_pb_snap_sel_t *sel);
size_t tlc_pb_row_field_size(const Tlcap__Row *pr, size_t *packed);
size_t tlc_pb_row_field_pack(const Tlcap__Row *pr, size_t packed, uint8_t *out);
/* The most bytes a Row that tlc_pb_row_build makes with these arguments (sel->windows,
 * ->quantiles; nwin the table's window count) takes as a Snapshot.rows field (key and length
 * included), whatever its values: a bound computed from protobuf-c's descriptors, so that a
 * snapshot can be packed by protobuf-c into a buffer of its bound without being sized first.
 * 0 when tlcap.proto has a Row field the bound does not know. */
size_t tlc_pb_row_field_max(uint32_t nwin, const tlc_pb_snap_sel_t *sel);
int64_t tlc_pb_cells_qmask(const uint32_t *cols, size_t ncols);
/* The sample kinds (bit k: enum tlc_kind k) whose distribution or window columns are among
 * cols[0, ncols): what a snapshot must fill for them (tlc_snap_opts_t.kinds). 0 when none. */
unsigned tlc_cols_kinds(const uint32_t *cols, size_t ncols);
size_t tlc_pb_cells_encode(const tlc_stat_t *r, const uint32_t *cols, size_t ncols, int64_t qmask,
                           uint8_t *out);
/* Returns the frame's size; *hdr_len gets the header's packed size. */
size_t tlc_pb_snapshot_frame_size(const Tlcap__Snapshot *hdr, size_t row_bytes, size_t *hdr_len);
/* Writes the frame up to the rows part into out; returns where the rows part goes. */
uint8_t *tlc_pb_snapshot_frame_begin(const Tlcap__Snapshot *hdr, size_t hdr_len, size_t row_bytes,
                                     uint8_t *out);

/* Empties the arena, keeping one chunk for reuse. */
void tlc_pb_arena_reset(tlc_pb_arena_t *a);

/* Fills `c` from the table counters (c is initialised here). */
void tlc_pb_counters_set(Tlcap__Counters *c, const tlc_counters_t *k);
/* The reverse. */
void tlc_pb_counters_get(tlc_counters_t *k, const Tlcap__Counters *c);

/* Applies a received snapshot to `t`: a full one replaces the table's content; a delta
 * replaces or adds the rows it carries (matched by handle, context and state) and takes its
 * header fields (times, counters, contexts, seq). Rows come as Row messages or as columnar
 * cells (fields whose columns were not sent are 0). Leaves `t` sorted. Validates what it copies
 * (context indices, array lengths, at most TLC_MAX_WINDOWS windows, whole columnar rows with
 * the key columns): returns 0, TLC_EFRAME for a snapshot that does not make sense, or
 * TLC_ENOMEM / TLC_ELIMIT (t->maxrows). */
int tlc_pb_snapshot_apply(tlc_table_t *t, const Tlcap__Snapshot *s);

/* Fills mapping `m` (initialised by the caller) from a received Mapping and finishes it.
 * Defined in convert_map.c (links formats' mapping.c). Returns 0 or a negative error. */
int tlc_pb_mapping_get(tlc_mapping_t *m, const Tlcap__Mapping *pm);

/* Framed size of an envelope: sets *payload to its packed size and returns header + payload. */
size_t tlc_pb_frame_size(const ProtobufCMessage *m, size_t *payload);
/* Writes header + payload into out (tlc_pb_frame_size bytes). Returns the bytes written. */
size_t tlc_pb_frame_pack(const ProtobufCMessage *m, size_t payload, uint8_t *out);

/* Names for the enums, for messages and JSON: "bin11", "connected", "ERR_TOO_LARGE", ... */
const char *tlc_pb_format_name(int f);
const char *tlc_pb_event_kind_name(int k);
const char *tlc_pb_error_name(int code);

#endif
