/* rollup.c - rollup cells, their merge and their serialised form (see rollup.h).
 *
 * Cost: adding a sample to a cell is O(log bins) (a binary search, an insertion when the bucket
 * is new: a cell holds at most TLC_ROLLUP_NB bins, usually a few dozen); merging two cells is
 * O(bins of both); a block's cells stay sorted so that merges and lookups are binary searches.
 */
#include "formats/rollup.h"

#include "base/alloc.h"
#include "base/err.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int tlc_rollup_key_cmp(const tlc_rollup_key_t *a, const tlc_rollup_key_t *b) {
  if (a->handle != b->handle)
    return a->handle < b->handle ? -1 : 1;
  if (a->context != b->context)
    return a->context < b->context ? -1 : 1;
  if (a->state != b->state)
    return a->state < b->state ? -1 : 1;
  if (a->kind != b->kind)
    return a->kind < b->kind ? -1 : 1;
  return 0;
}

void tlc_rollup_blk_init(tlc_rollup_blk_t *b) {
  memset(b, 0, sizeof(*b));
  b->span = 1;
}

void tlc_rollup_blk_clear(tlc_rollup_blk_t *b) {
  for (size_t i = 0; i < b->n; i++)
    tlc_free(b->cells[i].bins);
  b->n = 0;
}

void tlc_rollup_blk_fini(tlc_rollup_blk_t *b) {
  tlc_rollup_blk_clear(b);
  tlc_free(b->cells);
  tlc_rollup_blk_init(b);
}

/* Index of key k, or where it would go, negated minus one. */
static long cell_search(const tlc_rollup_blk_t *b, const tlc_rollup_key_t *k) {
  size_t a = 0, z = b->n;
  while (a < z) {
    size_t m = a + (z - a) / 2;
    if (tlc_rollup_key_cmp(&b->cells[m].key, k) < 0)
      a = m + 1;
    else
      z = m;
  }
  return a < b->n && tlc_rollup_key_cmp(&b->cells[a].key, k) == 0 ? (long)a : -(long)a - 1;
}

const tlc_rollup_cell_t *tlc_rollup_cell_find(const tlc_rollup_blk_t *b,
                                              const tlc_rollup_key_t *k) {
  long i = cell_search(b, k);
  return i >= 0 ? &b->cells[i] : NULL;
}

static int blk_reserve(tlc_rollup_blk_t *b, size_t n) {
  tlc_rollup_cell_t *nc;
  size_t cap = b->cap != 0 ? b->cap : 16;
  if (n <= b->cap)
    return 0;
  while (cap < n)
    cap *= 2;
  nc = tlc_realloc(b->cells, cap * sizeof(*nc));
  if (nc == NULL)
    return TLC_ENOMEM;
  b->cells = nc;
  b->cap = cap;
  return 0;
}

tlc_rollup_cell_t *tlc_rollup_cell_get(tlc_rollup_blk_t *b, const tlc_rollup_key_t *k) {
  long i = cell_search(b, k);
  size_t at;
  if (i >= 0)
    return &b->cells[i];
  if (blk_reserve(b, b->n + 1) != 0)
    return NULL;
  at = (size_t)(-(i + 1));
  memmove(&b->cells[at + 1], &b->cells[at], (b->n - at) * sizeof(b->cells[0]));
  memset(&b->cells[at], 0, sizeof(b->cells[0]));
  b->cells[at].key = *k;
  b->n++;
  return &b->cells[at];
}

int tlc_rollup_cell_bin(tlc_rollup_cell_t *c, uint32_t bucket, uint64_t count) {
  size_t a = 0, z = c->nbins;
  if (count == 0)
    return 0;
  while (a < z) {
    size_t m = a + (z - a) / 2;
    if (c->bins[m].b < bucket)
      a = m + 1;
    else
      z = m;
  }
  if (a < c->nbins && c->bins[a].b == bucket) {
    c->bins[a].n += count;
    return 0;
  }
  if (c->nbins == c->capbins) {
    uint32_t cap = c->capbins != 0 ? c->capbins * 2 : 8;
    tlc_rollup_bin_t *nb = tlc_realloc(c->bins, (size_t)cap * sizeof(*nb));
    if (nb == NULL)
      return TLC_ENOMEM;
    c->bins = nb;
    c->capbins = cap;
  }
  memmove(&c->bins[a + 1], &c->bins[a], (c->nbins - a) * sizeof(c->bins[0]));
  c->bins[a].b = bucket;
  c->bins[a].pad_ = 0;
  c->bins[a].n = count;
  c->nbins++;
  return 0;
}

int tlc_rollup_cell_add(tlc_rollup_cell_t *c, int64_t v, int64_t t, uint32_t bucket) {
  if (c->d.n == 0 || v < c->d.min || (v == c->d.min && t < c->tmin))
    c->tmin = t;
  if (c->d.n == 0 || v > c->d.max || (v == c->d.max && t < c->tmax))
    c->tmax = t;
  tlc_dist_add(&c->d, v);
  return tlc_rollup_cell_bin(c, bucket, 1);
}

int tlc_rollup_cell_merge(tlc_rollup_cell_t *dst, const tlc_rollup_cell_t *src) {
  dst->violations += src->violations;
  if (src->d.n == 0)
    return 0;
  /* ties keep the earlier time, whichever block came first */
  if (dst->d.n == 0 || src->d.min < dst->d.min ||
      (src->d.min == dst->d.min && src->tmin < dst->tmin))
    dst->tmin = src->tmin;
  if (dst->d.n == 0 || src->d.max > dst->d.max ||
      (src->d.max == dst->d.max && src->tmax < dst->tmax))
    dst->tmax = src->tmax;
  tlc_dist_merge(&dst->d, &src->d);
  if (src->nbins == 0)
    return 0;
  if (src->nbins > dst->capbins - dst->nbins) {
    /* room for the union up front: the insertions below then never fail half way */
    uint32_t cap = dst->nbins + src->nbins;
    tlc_rollup_bin_t *nb = tlc_realloc(dst->bins, (size_t)cap * sizeof(*nb));
    if (nb == NULL)
      return TLC_ENOMEM;
    dst->bins = nb;
    dst->capbins = cap;
  }
  if (dst->nbins == 0) {
    memcpy(dst->bins, src->bins, src->nbins * sizeof(src->bins[0]));
    dst->nbins = src->nbins;
    return 0;
  }
  /* merge from the back, in place */
  {
    size_t i = dst->nbins, j = src->nbins, k = dst->nbins + src->nbins, dup = 0;
    for (size_t a = 0, b = 0; a < dst->nbins && b < src->nbins;) {
      if (dst->bins[a].b == src->bins[b].b) {
        dup++;
        a++;
        b++;
      } else if (dst->bins[a].b < src->bins[b].b) {
        a++;
      } else {
        b++;
      }
    }
    k -= dup;
    while (j > 0) {
      if (i > 0 && dst->bins[i - 1].b > src->bins[j - 1].b) {
        dst->bins[--k] = dst->bins[--i];
      } else if (i > 0 && dst->bins[i - 1].b == src->bins[j - 1].b) {
        dst->bins[--k] = dst->bins[--i];
        dst->bins[k].n += src->bins[--j].n;
      } else {
        dst->bins[--k] = src->bins[--j];
      }
    }
    dst->nbins = (uint32_t)(dst->nbins + src->nbins - dup);
  }
  return 0;
}

int tlc_rollup_blk_merge(tlc_rollup_blk_t *dst, const tlc_rollup_blk_t *src) {
  if (src->n > 0) {
    if (dst->n == 0 || src->wall_first < dst->wall_first)
      dst->wall_first = src->wall_first;
    if (dst->n == 0 || src->wall_last > dst->wall_last)
      dst->wall_last = src->wall_last;
  }
  if (blk_reserve(dst, dst->n + src->n) != 0)
    return TLC_ENOMEM;
  for (size_t i = 0; i < src->n; i++) {
    tlc_rollup_cell_t *c = tlc_rollup_cell_get(dst, &src->cells[i].key);
    int rc;
    if (c == NULL)
      return TLC_ENOMEM;
    if (c->d.n == 0)
      c->key.row_kind = src->cells[i].key.row_kind;
    if ((rc = tlc_rollup_cell_merge(c, &src->cells[i])) != 0)
      return rc;
  }
  return 0;
}

int32_t tlc_rollup_rank(const tlc_rollup_cell_t *c, uint64_t num, uint64_t den) {
  uint64_t total = 0, k, cum = 0;
  long double want;
  for (uint32_t i = 0; i < c->nbins; i++)
    total += c->bins[i].n;
  if (total == 0 || den == 0)
    return -1;
  /* ceil(num / den * total) without overflow for the quantiles in use */
  want = ceill((long double)num * (long double)total / (long double)den);
  k = want < 1 ? 1 : want > (long double)total ? total : (uint64_t)want;
  for (uint32_t i = 0; i < c->nbins; i++) {
    cum += c->bins[i].n;
    if (cum >= k)
      return (int32_t)c->bins[i].b;
  }
  return (int32_t)c->bins[c->nbins - 1].b;
}

void tlc_rollup_encode(const tlc_rollup_blk_t *b, tlc_ckw_t *w) {
  size_t start = w->len;
  size_t est = 56;
  for (size_t i = 0; i < b->n; i++)
    est += 96 + (size_t)b->cells[i].nbins * 10u;
  tlc_ckw_reserve(w, w->len + est + 8);
  tlc_ckw_u32(w, TLC_ROLLUP_MAGIC);
  tlc_ckw_u16(w, TLC_ROLLUP_VERSION);
  tlc_ckw_u16(w, 0);
  tlc_ckw_u64(w, b->epoch);
  tlc_ckw_i64(w, b->minute);
  tlc_ckw_u32(w, b->span);
  tlc_ckw_u32(w, (uint32_t)b->n);
  tlc_ckw_i64(w, b->wall_first);
  tlc_ckw_i64(w, b->wall_last);
  for (size_t i = 0; i < b->n; i++) {
    const tlc_rollup_cell_t *c = &b->cells[i];
    tlc_ckw_u32(w, c->key.handle);
    tlc_ckw_u32(w, c->key.context);
    tlc_ckw_u64(w, c->key.state);
    tlc_ckw_u8(w, c->key.kind);
    tlc_ckw_u8(w, c->key.row_kind);
    tlc_ckw_u16(w, 0);
    tlc_ckw_u32(w, c->nbins);
    tlc_ckw_u64(w, c->d.n);
    tlc_ckw_i64(w, c->d.sum);
    tlc_ckw_i64(w, c->d.min);
    tlc_ckw_i64(w, c->d.max);
    tlc_ckw_i64(w, c->tmin);
    tlc_ckw_i64(w, c->tmax);
    tlc_ckw_u64(w, c->d.sumsq_hi);
    tlc_ckw_u64(w, c->d.sumsq_lo);
    tlc_ckw_u64(w, c->violations);
    for (uint32_t j = 0; j < c->nbins; j++) {
      tlc_ckw_u16(w, (uint16_t)c->bins[j].b);
      tlc_ckw_u64(w, c->bins[j].n);
    }
  }
  if (w->err == 0)
    tlc_ckw_u64(w, tlc_ck_fnv(w->p + start, w->len - start));
}

static int refuse(tlc_rollup_blk_t *b, char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int refuse(tlc_rollup_blk_t *b, char *err, size_t errlen, const char *fmt, ...) {
  va_list ap;
  if (err != NULL && errlen > 0) {
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
  }
  tlc_rollup_blk_clear(b);
  return TLC_EFRAME;
}

int tlc_rollup_decode(tlc_rollup_blk_t *b, const void *p, size_t len, size_t *used, char *err,
                      size_t errlen) {
  tlc_ckr_t r;
  uint32_t magic, ncells;
  uint16_t ver, reserved;
  size_t body;
  uint64_t sum;
  tlc_rollup_blk_clear(b);
  if (used != NULL)
    *used = 0;
  tlc_ckr_init(&r, p, len);
  magic = tlc_ckr_u32(&r);
  ver = tlc_ckr_u16(&r);
  reserved = tlc_ckr_u16(&r);
  if (r.err != 0)
    return refuse(b, err, errlen, "rollup block: truncated header (%zu bytes)", len);
  if (magic != TLC_ROLLUP_MAGIC)
    return refuse(b, err, errlen,
                  "rollup block: bad magic 0x%08x (not a rollup, or written "
                  "on a host of the other byte order)",
                  (unsigned)magic);
  if (ver < 1 || ver > TLC_ROLLUP_VERSION || reserved != 0)
    return refuse(b, err, errlen, "rollup block: version %u.%u, this build reads 1.0 to %u.0",
                  (unsigned)ver, (unsigned)reserved, (unsigned)TLC_ROLLUP_VERSION);
  b->epoch = tlc_ckr_u64(&r);
  b->minute = tlc_ckr_i64(&r);
  b->span = tlc_ckr_u32(&r);
  ncells = tlc_ckr_u32(&r);
  b->wall_first = tlc_ckr_i64(&r);
  b->wall_last = tlc_ckr_i64(&r);
  if (r.err != 0)
    return refuse(b, err, errlen, "rollup block: truncated header (%zu bytes)", len);
  if (b->span == 0 || b->span > 60 * 24)
    return refuse(b, err, errlen, "rollup block: span of %u minutes", (unsigned)b->span);
  if (ncells > TLC_ROLLUP_MAX_CELLS || !tlc_ckr_room(&r, ncells, 64))
    return refuse(b, err, errlen, "rollup block: %u cells do not fit in %zu bytes",
                  (unsigned)ncells, len);
  if (blk_reserve(b, ncells) != 0)
    return TLC_ENOMEM;
  for (uint32_t i = 0; i < ncells; i++) {
    tlc_rollup_cell_t *c = &b->cells[b->n];
    uint64_t tot = 0;
    memset(c, 0, sizeof(*c));
    c->key.handle = tlc_ckr_u32(&r);
    c->key.context = tlc_ckr_u32(&r);
    c->key.state = tlc_ckr_u64(&r);
    c->key.kind = tlc_ckr_u8(&r);
    c->key.row_kind = tlc_ckr_u8(&r);
    reserved = tlc_ckr_u16(&r);
    c->nbins = tlc_ckr_u32(&r);
    c->d.n = tlc_ckr_u64(&r);
    c->d.sum = tlc_ckr_i64(&r);
    c->d.min = tlc_ckr_i64(&r);
    c->d.max = tlc_ckr_i64(&r);
    c->tmin = tlc_ckr_i64(&r);
    c->tmax = tlc_ckr_i64(&r);
    c->d.sumsq_hi = tlc_ckr_u64(&r);
    c->d.sumsq_lo = tlc_ckr_u64(&r);
    if (ver >= 2)
      c->violations = tlc_ckr_u64(&r);
    if (r.err != 0)
      return refuse(b, err, errlen, "rollup block: cell %u truncated", (unsigned)i);
    if (c->key.kind >= TLC_NKINDS || c->key.row_kind > TLC_ROW_STATE || reserved != 0)
      return refuse(b, err, errlen, "rollup block: cell %u has kind %u/%u", (unsigned)i,
                    (unsigned)c->key.kind, (unsigned)c->key.row_kind);
    if (b->n > 0 && tlc_rollup_key_cmp(&b->cells[b->n - 1].key, &c->key) >= 0)
      return refuse(b, err, errlen, "rollup block: cell %u is out of order", (unsigned)i);
    /* a cell without samples holds a budget's violations (version 2) and nothing else */
    if ((c->d.n == 0 && (c->violations == 0 || c->nbins != 0 || c->d.sum != 0 || c->d.min != 0 ||
                         c->d.max != 0)) ||
        c->d.min > c->d.max)
      return refuse(b, err, errlen, "rollup block: cell %u has %llu samples, min > max or none",
                    (unsigned)i, (unsigned long long)c->d.n);
    if (c->nbins > TLC_ROLLUP_NB || !tlc_ckr_room(&r, c->nbins, 10))
      return refuse(b, err, errlen, "rollup block: cell %u: %u bins do not fit", (unsigned)i,
                    (unsigned)c->nbins);
    c->capbins = c->nbins;
    if (c->nbins > 0 && (c->bins = tlc_malloc((size_t)c->nbins * sizeof(*c->bins))) == NULL) {
      c->nbins = 0;
      tlc_rollup_blk_clear(b);
      return TLC_ENOMEM;
    }
    b->n++; /* owns its bins from here: a refusal frees them */
    for (uint32_t j = 0; j < c->nbins; j++) {
      c->bins[j].b = tlc_ckr_u16(&r);
      c->bins[j].pad_ = 0;
      c->bins[j].n = tlc_ckr_u64(&r);
      if (c->bins[j].b >= TLC_ROLLUP_NB || c->bins[j].n == 0 ||
          (j > 0 && c->bins[j].b <= c->bins[j - 1].b) || c->bins[j].n > c->d.n - tot)
        return refuse(b, err, errlen, "rollup block: cell %u, bin %u: bucket %u count %llu",
                      (unsigned)i, (unsigned)j, (unsigned)c->bins[j].b,
                      (unsigned long long)c->bins[j].n);
      tot += c->bins[j].n;
    }
    if (tot != c->d.n && c->nbins > 0)
      return refuse(b, err, errlen, "rollup block: cell %u: bins count %llu of %llu samples",
                    (unsigned)i, (unsigned long long)tot, (unsigned long long)c->d.n);
  }
  body = r.off;
  sum = tlc_ckr_u64(&r);
  if (r.err != 0)
    return refuse(b, err, errlen, "rollup block: no checksum after %zu bytes", body);
  if (sum != tlc_ck_fnv(p, body))
    return refuse(b, err, errlen, "rollup block: checksum mismatch (%zu bytes)", body);
  if (used != NULL)
    *used = r.off;
  return 0;
}

double tlc_rollup_welch(const tlc_dist_t *a, const tlc_dist_t *b) {
  double na, nb, ma, mb, va, vb, se;
  if (a->n < 2 || b->n < 2)
    return 0.0;
  na = (double)a->n;
  nb = (double)b->n;
  ma = (double)a->sum / na;
  mb = (double)b->sum / nb;
  va = tlc_dist_stddev(a);
  vb = tlc_dist_stddev(b);
  va = va * va * na / (na - 1);
  vb = vb * vb * nb / (nb - 1);
  se = sqrt(va / na + vb / nb);
  if (se > 0)
    return (mb - ma) / se;
  if (mb == ma)
    return 0.0;
  return mb > ma ? INFINITY : -INFINITY;
}
