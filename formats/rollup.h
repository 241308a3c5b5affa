/* rollup.h - the rollups of SPEC section 14: per clock epoch and minute (or hour) of target time,
 * the statistics of the samples that closed in it, per (area, context, state, sample kind).
 *
 * A cell holds a tlc_dist_t (count, saturating sum, MIN/MAX, exact 128-bit sum of squares), the
 * target times at which its MIN and MAX samples closed, and the histogram as sparse bins: the
 * engine's own 1% buckets (daemon/engine/hist.h, bucket = tlc__hist_idx(value), fewer than
 * TLC_ROLLUP_NB of them) with 64-bit counts, ascending. Merging two cells adds their bins, so the
 * merge of any set of minutes is exactly the cell of all their samples, and a quantile taken from
 * it is the engine's (the representative of the bucket holding the nearest-rank sample, clamped
 * to [min, max]: within 1%). This module knows buckets only as numbers; the caller turns the
 * bucket tlc_rollup_rank() names into a value with the engine's tlc__hist_bounds().
 *
 * A block (tlc_rollup_blk_t) is one minute (span 1) or one hour (span 60) of one epoch: its
 * cells sorted by key, and the wall-clock times (Unix ns) of the first and last sample that
 * reached it, so that a wall-clock range can select blocks.
 *
 * Serialised form (tlc_rollup_encode / tlc_rollup_decode), host byte order (daemon state, like
 * the checkpoints: the magic read back in the other order is refused):
 *   u32 magic 'TLRU', u16 version (2), u16 0, u64 epoch, i64 minute (first minute of the block,
 *   floor(target ns / 60 s)), u32 span (minutes), u32 ncells, i64 wall_first, i64 wall_last,
 *   then per cell: u32 handle, u32 context, u64 state, u8 kind, u8 row_kind, u16 0,
 *   u32 nbins, u64 n, i64 sum, i64 min, i64 max, i64 tmin, i64 tmax, u64 sumsq_hi, u64 sumsq_lo,
 *   u64 violations (version 2 only; version 1 blocks read with 0), nbins x (u16 bucket,
 *   u64 count); then u64 FNV-1a (tlc_ck_fnv) of everything before it. A cell may have no
 *   samples only when it counts violations (then no bins, sum, min and max 0).
 * Decoding checks every length before allocating, the checksum, cells strictly ascending by
 * key, kinds in range, bins strictly ascending below TLC_ROLLUP_NB with non-zero counts summing
 * to n, and min <= max; anything else is TLC_EFRAME with a message naming the cell and why.
 *
 * Pure: no I/O, no globals. A block owns its arrays (tlc_malloc'd); not thread-safe.
 */
#ifndef TLC_ROLLUP_H
#define TLC_ROLLUP_H

#include "formats/ckbuf.h"
#include "formats/stats.h"

#include <stddef.h>
#include <stdint.h>

#define TLC_ROLLUP_MAGIC   0x55524c54u /* "TLRU" in little-endian memory */
#define TLC_ROLLUP_VERSION 2
/* buckets of the engine's histogram (TLC_HIST_NB; the unit test checks they agree) */
#define TLC_ROLLUP_NB 2346
/* cells in one block a decoder accepts (bounds the memory a file can make it take) */
#define TLC_ROLLUP_MAX_CELLS (1u << 22)
#define TLC_ROLLUP_MINUTE_NS 60000000000ll

typedef struct tlc_rollup_bin {
  uint32_t b; /* bucket */
  uint32_t pad_;
  uint64_t n;
} tlc_rollup_bin_t;

typedef struct tlc_rollup_key {
  uint32_t handle;
  uint32_t context; /* TLC_CTX_NONE for state and data rows */
  uint64_t state;
  uint8_t kind;     /* enum tlc_kind */
  uint8_t row_kind; /* enum tlc_row_kind (not part of the order: one per handle) */
} tlc_rollup_key_t;

typedef struct tlc_rollup_cell {
  tlc_rollup_key_t key;
  tlc_dist_t d;        /* has_q and q unused */
  int64_t tmin, tmax;  /* target time the MIN / MAX sample closed (the earliest of equals) */
  uint64_t violations; /* budget violations that ended in the block for this key (version 2) */
  tlc_rollup_bin_t *bins;
  uint32_t nbins, capbins;
} tlc_rollup_cell_t;

typedef struct tlc_rollup_blk {
  uint64_t epoch;
  int64_t minute; /* first minute: floor(target ns / 60 s) */
  uint32_t span;  /* minutes: 1 or 60 */
  int64_t wall_first, wall_last;
  tlc_rollup_cell_t *cells; /* sorted by key (tlc_rollup_key_cmp) unless noted */
  size_t n, cap;
} tlc_rollup_blk_t;

/* The minute of a target time (floor division, any int64). */
static inline int64_t tlc_rollup_minute(int64_t t) {
  int64_t m = t / TLC_ROLLUP_MINUTE_NS;
  return (t % TLC_ROLLUP_MINUTE_NS < 0) ? m - 1 : m;
}

int tlc_rollup_key_cmp(const tlc_rollup_key_t *a, const tlc_rollup_key_t *b);

void tlc_rollup_blk_init(tlc_rollup_blk_t *b);
void tlc_rollup_blk_fini(tlc_rollup_blk_t *b);
/* Empties the cells (keeps the cell array). */
void tlc_rollup_blk_clear(tlc_rollup_blk_t *b);

/* The cell of key k in a sorted block, added (empty) in its place when absent; NULL on
 * TLC_ENOMEM. Pointers into the block are valid until the next add. */
tlc_rollup_cell_t *tlc_rollup_cell_get(tlc_rollup_blk_t *b, const tlc_rollup_key_t *k);
/* Binary search; NULL when absent. */
const tlc_rollup_cell_t *tlc_rollup_cell_find(const tlc_rollup_blk_t *b, const tlc_rollup_key_t *k);

/* Adds one sample (value v, closed at target time t, in bucket `bucket` < TLC_ROLLUP_NB).
 * 0 or TLC_ENOMEM (then only the histogram misses it). */
int tlc_rollup_cell_add(tlc_rollup_cell_t *c, int64_t v, int64_t t, uint32_t bucket);
/* Adds count to bucket (< TLC_ROLLUP_NB) of c's histogram only. 0 or TLC_ENOMEM. */
int tlc_rollup_cell_bin(tlc_rollup_cell_t *c, uint32_t bucket, uint64_t count);
/* Merges src into dst (same key): scalars, MIN/MAX times, bins. 0 or TLC_ENOMEM. */
int tlc_rollup_cell_merge(tlc_rollup_cell_t *dst, const tlc_rollup_cell_t *src);
/* Merges every cell of src into dst (both sorted); wall times widen, minute/span are the
 * caller's. 0 or TLC_ENOMEM. */
int tlc_rollup_blk_merge(tlc_rollup_blk_t *dst, const tlc_rollup_blk_t *src);

/* The bucket holding the nearest-rank sample of quantile num/den (rank ceil(num/den * n), at
 * least 1), or -1 when the cell has no bins. */
int32_t tlc_rollup_rank(const tlc_rollup_cell_t *c, uint64_t num, uint64_t den);

/* Serialises b (cells sorted) into w (w->err says whether it fitted). */
void tlc_rollup_encode(const tlc_rollup_blk_t *b, tlc_ckw_t *w);
/* Decodes one block from p[0..len) into b (initialised, emptied first). Returns 0,
 * TLC_EFRAME (err names why; b emptied) or TLC_ENOMEM. *used (may be NULL): bytes consumed. */
int tlc_rollup_decode(tlc_rollup_blk_t *b, const void *p, size_t len, size_t *used, char *err,
                      size_t errlen);

/* Welch's t for the difference of the means of a and b (b - a over its standard error, the
 * population variances from the exact sums of squares scaled by n / (n - 1)); 0 when either has
 * fewer than 2 samples or both variances are 0 and the means are equal; +-INFINITY when the
 * variances are 0 and the means differ. */
double tlc_rollup_welch(const tlc_dist_t *a, const tlc_dist_t *b);

#endif
