/* hist.c - bounded log-bucket histogram (see hist.h for the bucket layout and the rank rule).
 *
 * Invariants: b == NULL iff nb == 0; lo + nb <= TLC_HIST_NB; counts are uint16_t until one at 65535
 * gets another sample (then uint32_t, saturating at UINT32_MAX). Cost: add is O(1) (one clz, a
 * shift, an increment); growing copies the span (rare: only when a sample falls outside every value
 * range seen before, at most log2(TLC_HIST_NB) doublings). Quantiles are O(span * histograms). Does
 * not: merge in place, shrink, or keep exact values.
 */
#include "hist.h"

#include "stats.h"
#include "tlc_alloc.h"
#include "tlc_err.h"

#include <stdlib.h>
#include <string.h>

void tlc__hist_bounds(uint32_t idx, uint64_t *lo, uint64_t *hi) {
  unsigned e, sub;
  if (idx < 128) {
    *lo = *hi = idx;
    return;
  }
  e = 7u + (idx - 128u) / 64u;
  sub = (idx - 128u) % 64u;
  *lo = (uint64_t)(64u + sub) << (e - 6u);
  *hi = *lo + ((uint64_t)1 << (e - 6u)) - 1u;
}

/* Grows the span to hold [ilo, ihi]. 0 or TLC_ENOMEM. */
static int grow(tlc_hist_t *h, uint32_t ilo, uint32_t ihi) {
  uint32_t nlo, nhi, want;
  size_t es = h->wide ? sizeof(uint32_t) : sizeof(uint16_t);
  unsigned char *nb;
  if (h->b == NULL) {
    /* at least 16 buckets around the first samples */
    nlo = ilo >= 8 ? ilo - 8 : 0;
    nhi = ihi + 1 > nlo + 16 ? ihi + 1 : nlo + 16;
    if (nhi > TLC_HIST_NB)
      nhi = TLC_HIST_NB;
    nb = tlc_calloc(nhi - nlo, es);
    if (nb == NULL)
      return TLC_ENOMEM;
    h->b = nb;
    h->lo = (uint16_t)nlo;
    h->nb = (uint16_t)(nhi - nlo);
    return 0;
  }
  nlo = h->lo;
  nhi = (uint32_t)h->lo + h->nb;
  if (ilo < nlo)
    nlo = ilo;
  if (ihi + 1 > nhi)
    nhi = ihi + 1;
  /* at least double the span, towards the side that grew */
  want = (uint32_t)h->nb * 2;
  if (nhi - nlo < want) {
    if (ilo < h->lo)
      nlo = nhi >= want ? nhi - want : 0;
    else
      nhi = nlo + want > TLC_HIST_NB ? TLC_HIST_NB : nlo + want;
  }
  nb = tlc_calloc(nhi - nlo, es);
  if (nb == NULL)
    return TLC_ENOMEM;
  memcpy(nb + (h->lo - nlo) * es, h->b, h->nb * es);
  tlc_free(h->b);
  h->b = nb;
  h->lo = (uint16_t)nlo;
  h->nb = (uint16_t)(nhi - nlo);
  return 0;
}

/* 16-bit counts to 32-bit. 0 or TLC_ENOMEM. */
static int widen(tlc_hist_t *h) {
  const uint16_t *o = h->b;
  uint32_t *w = tlc_malloc((size_t)h->nb * sizeof(*w));
  unsigned i;
  if (w == NULL)
    return TLC_ENOMEM;
  for (i = 0; i < h->nb; i++)
    w[i] = o[i];
  tlc_free(h->b);
  h->b = w;
  h->wide = 1;
  return 0;
}

int tlc__hist_inc_slow(tlc_hist_t *h, uint32_t idx) {
  uint32_t i;
  if (h->b == NULL || idx < h->lo || idx >= (uint32_t)h->lo + h->nb) {
    if (grow(h, idx, idx) < 0)
      return TLC_ENOMEM;
  }
  i = idx - h->lo;
  if (!h->wide) {
    uint16_t *b = h->b;
    if (b[i] != UINT16_MAX) {
      b[i]++;
      return 0;
    }
    if (widen(h) < 0)
      return TLC_ENOMEM; /* saturated at 65535 */
  }
  if (((uint32_t *)h->b)[i] != UINT32_MAX)
    ((uint32_t *)h->b)[i]++;
  return 0;
}

void tlc__hist_fini(tlc_hist_t *h) {
  tlc_free(h->b);
  memset(h, 0, sizeof(*h));
}

size_t tlc__hist_bytes(const tlc_hist_t *h) {
  return (size_t)h->nb * (h->wide ? sizeof(uint32_t) : sizeof(uint16_t));
}

uint64_t tlc__hist_rank(uint64_t n, uint64_t num, uint64_t den) {
  uint64_t k = (n / den) * num + ((n % den) * num + den - 1) / den;
  return k == 0 ? 1 : k;
}

/* quantiles as num/1000, matching tlc_quantiles[] (0.5, 0.9, 0.99, 0.999) */
static const uint64_t qnum[TLC_NQUANT] = { 500, 900, 990, 999 };

int tlc__hist_quantiles(const tlc_hist_t *const *hs, size_t nh, uint64_t n, int64_t min,
                        int64_t max, int64_t *q) {
  uint32_t lo = TLC_HIST_NB, hi = 0, i;
  uint64_t rank[TLC_NQUANT], cum = 0;
  size_t j;
  unsigned qi = 0;
  if (n == 0)
    return 0;
  for (j = 0; j < nh; j++) {
    const tlc_hist_t *h = hs[j];
    if (h != NULL && h->b != NULL) {
      if (h->lo < lo)
        lo = h->lo;
      if ((uint32_t)h->lo + h->nb > hi)
        hi = (uint32_t)h->lo + h->nb;
    }
  }
  if (lo >= hi)
    return 0;
  for (qi = 0; qi < TLC_NQUANT; qi++)
    rank[qi] = tlc__hist_rank(n, qnum[qi], 1000);
  qi = 0;
  for (i = lo; i < hi && qi < TLC_NQUANT; i++) {
    for (j = 0; j < nh; j++) {
      const tlc_hist_t *h = hs[j];
      if (h != NULL && h->b != NULL && i >= h->lo && i < (uint32_t)h->lo + h->nb)
        cum += tlc__hist_count(h, i - h->lo);
    }
    while (qi < TLC_NQUANT && cum >= rank[qi]) {
      uint64_t blo, bhi;
      int64_t rep;
      tlc__hist_bounds(i, &blo, &bhi);
      rep = (int64_t)(blo + (bhi - blo) / 2);
      if (rep < min)
        rep = min;
      if (rep > max)
        rep = max;
      q[qi++] = rep;
    }
  }
  /* saturated buckets or samples that found no memory can leave ranks unreached: report max */
  while (qi < TLC_NQUANT)
    q[qi++] = max;
  return 1;
}
