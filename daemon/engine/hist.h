/* hist.h - bounded log-bucket histogram for non-negative integer samples (engine-internal).
 *
 * Buckets: every value 0..255 has its own bucket (exact). Above, each power of two
 * [2^e, 2^(e+1)) (e = 8..62) is cut into 256 steps of 2^(e-8) (the 8 bits below the leading
 * one), and runs of consecutive steps form
 * TLC_HIST_SUB = 38 buckets: a run starting at step j holds at most g steps with
 * g / (2 * (256 + j)) <= 0.99% (5 steps at the bottom of the octave, 9 at the top;
 * tlc__hist_sub[] maps a step to its bucket, tlc__hist_start[] a bucket to its first step).
 * A bucket's representative is its integer midpoint, so a reported value is within 1% of every
 * value in its bucket: for a run [j, j + g) of steps of w = 2^(e-8) starting at
 * lo = 2^e + j * w, |rep - v| <= g * w / 2 <= 0.0099 * lo <= 0.0099 * v (the unit test checks
 * every bucket). Near-logarithmic buckets need 38 per octave where equal ones need 64 for the
 * same bound, so a histogram's span is 40% smaller. The whole int64 range takes
 * TLC_HIST_NB = 2346 buckets; a histogram stores only the dense span [lo, lo + nb) of buckets
 * it has seen (grown by doubling), so its memory is bounded by 2346 * 2 bytes plus its carries
 * (below) and a 16-byte header, and is usually a few hundred bytes to a few KiB.
 *
 * Quantile rank rule (nearest rank): for quantile q of n samples, rank k = ceil(q * n) (at least
 * 1); the answer is the k-th smallest sample. The histogram reports the representative of the
 * bucket holding the k-th smallest sample, clamped to [min, max] of the samples (so p of a
 * single-valued set is exact).
 *
 * Counts are 16 bits (the span stays 2 bytes per bucket for good, so that a capture that runs
 * for weeks keeps the cache footprint and the speed of its first minutes). A count that would
 * pass 65535 wraps to 0 and adds one to its bucket's carry: a 64-bit count of 65536s in a small
 * table after the counts, sorted by bucket, that holds only the buckets that ever wrapped (the
 * busiest few of a histogram). A bucket's count is low + carry * 65536, exact up to 2^80. A
 * count saturates at 65535 (the sample is lost, later ones try again) only while the carry
 * table finds no memory to grow.
 * Not thread-safe; plain data, owned by the engine row that holds it.
 */
#ifndef TLC_HIST_H
#define TLC_HIST_H

#include "formats/ckbuf.h"

#include <stddef.h>
#include <stdint.h>

#define TLC_HIST_SUB 38
#define TLC_HIST_NB  (256 + 55 * TLC_HIST_SUB)

/* step (8 bits below the leading one) -> bucket in the octave; bucket -> its first step */
extern const uint8_t tlc__hist_sub[256];
extern const uint16_t tlc__hist_start[TLC_HIST_SUB + 1];

/* The engine queues samples (as bucket indexes) in a log of its own and counts them in batches
 * with prefetching (engine.c), so a histogram holds only its counted buckets. */
/* A histogram's first TLC_HIST_INLINE samples are held in the header itself (their bucket
 * indexes in lo, nb and in2, count nin) and its span is allocated with the next one: an area
 * that is seldom hit (a million areas with a few calls each) costs no allocation. */
#define TLC_HIST_INLINE 3
typedef struct tlc_hist {
  void *b; /* the span (tlc_malloc'd): uint16_t counts of buckets lo .. lo + nb - 1, then, when
              in2 > 0, the carry table (hist.c: carry_off): uint64_t carries, then their uint16_t
              buckets, ascending. NULL: no span yet, nin samples inline */
  uint16_t lo;
  uint16_t nb;
  uint8_t pad_;
  uint8_t nin;  /* b == NULL: inline samples (0..TLC_HIST_INLINE) in lo, nb, in2 */
  uint16_t in2; /* b == NULL: the third inline sample; else the number of carries */
} tlc_hist_t;

/* The carry of bucket idx (0 when it never wrapped). */
uint64_t tlc__hist_carry(const tlc_hist_t *h, uint32_t idx);

/* The count of the bucket at offset i from lo (i < nb; a histogram with a span, b != NULL). */
static inline uint64_t tlc__hist_count(const tlc_hist_t *h, uint32_t i) {
  uint64_t low = ((const uint16_t *)h->b)[i];
  return h->in2 == 0 ? low : low + (tlc__hist_carry(h, h->lo + i) << 16);
}

/* Bucket index of a sample (v >= 0; negative values count as 0). */
static inline uint32_t tlc__hist_idx(int64_t sv) {
  uint64_t v = sv < 0 ? 0 : (uint64_t)sv;
  unsigned e, m;
  if (v < 256)
    return (uint32_t)v;
  e = 63u - (unsigned)__builtin_clzll(v);
  m = (unsigned)(v >> (e - 8u)) & 255u;
  return 256u + (e - 8u) * TLC_HIST_SUB + tlc__hist_sub[m];
}

/* Smallest and largest value of bucket idx (< TLC_HIST_NB). */
void tlc__hist_bounds(uint32_t idx, uint64_t *lo, uint64_t *hi);

/* Counts one sample of bucket idx (< TLC_HIST_NB), growing the span (or adding a carry) when
 * needed. Returns 0, or TLC_ENOMEM (the sample is then not counted). */
int tlc__hist_inc_slow(tlc_hist_t *h, uint32_t idx);

static inline int tlc__hist_inc(tlc_hist_t *h, uint32_t idx) {
  uint32_t i = idx - h->lo;
  if (h->b != NULL && idx >= h->lo && i < h->nb && ((uint16_t *)h->b)[i] != UINT16_MAX) {
    ((uint16_t *)h->b)[i]++;
    return 0;
  }
  return tlc__hist_inc_slow(h, idx);
}

/* Records one sample (value v). Returns 0 or TLC_ENOMEM. */
static inline int tlc__hist_add(tlc_hist_t *h, int64_t v) {
  return tlc__hist_inc(h, tlc__hist_idx(v));
}

/* Frees the buckets; h is empty afterwards. */
void tlc__hist_fini(tlc_hist_t *h);

/* Checkpoints: writes h (span, carries or inline samples) to w; reads one back into h (any
 * previous content is not freed: pass an empty one), every index checked (span inside
 * TLC_HIST_NB, carries ascending inside the span). 0, TLC_EFRAME (h left empty) or TLC_ENOMEM. */
void tlc__hist_save(const tlc_hist_t *h, tlc_ckw_t *w);
int tlc__hist_load(tlc_hist_t *h, tlc_ckr_t *r);

/* Bytes held by h's buckets (the header not included). */
size_t tlc__hist_bytes(const tlc_hist_t *h);

/* Bucket counts by edge: eb[0..n) ascending bucket indexes; each bucket b of h adds its count
 * to slot[i] for the first i with b <= eb[i] (slot[n] when b is above every eb). The caller's
 * prefix sum of slot[] is then the number of samples <= the largest value of bucket eb[i]. */
void tlc__hist_cum(const tlc_hist_t *h, const uint32_t *eb, size_t n, uint64_t *slot);

/* Nearest rank k = ceil(num/den * n), at least 1 (n > 0), without overflow. */
uint64_t tlc__hist_rank(uint64_t n, uint64_t num, uint64_t den);

/* Quantiles tlc_quantiles[0..TLC_NQUANT) over the union of hs[0..nh) (NULL entries and empty
 * histograms are skipped). n = total samples in the union (the sum of the counts unless a bucket
 * saturated or a sample found no memory), min/max of the samples. Writes
 * q[TLC_NQUANT]. Returns 1 when q was filled, 0 when there is nothing (n == 0 or no buckets). */
int tlc__hist_quantiles(const tlc_hist_t *const *hs, size_t nh, uint64_t n, int64_t min,
                        int64_t max, int64_t *q);

#endif
