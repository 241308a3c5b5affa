/* stats.c - the statistics table (see stats.h).
 *
 * Invariants: nrows <= caprows; contexts grows by doubling; rows are plain structs, so a table
 * can be copied row by row and compared with memcmp after zeroing (tests rely on rows being
 * zero-initialised by tlc_table_add). Costs: add is amortised O(1); sort O(n log n).
 */
#include "formats/stats.h"

#include "base/alloc.h"
#include "base/err.h"
#include "base/out.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

const double tlc_quantiles[TLC_NQUANT] = { 0.50, 0.90, 0.99, 0.999 };

void tlc_table_init(tlc_table_t *t) {
  memset(t, 0, sizeof(*t));
}

void tlc_table_fini(tlc_table_t *t) {
  tlc_free(t->rows);
  tlc_free(t->contexts);
  t->rows = NULL;
  t->contexts = NULL;
  t->nrows = t->caprows = t->ncontexts = t->capcontexts = 0;
}

void tlc_table_clear(tlc_table_t *t) {
  t->nrows = 0;
  t->ncontexts = 0;
}

tlc_stat_t *tlc_table_add(tlc_table_t *t) {
  tlc_stat_t *r;
  if (t->maxrows != 0 && t->nrows >= t->maxrows)
    return NULL;
  if (t->nrows == t->caprows) {
    tlc_stat_t *nr = tlc_grow(t->rows, &t->caprows, t->nrows + 1, sizeof(*nr), 64);
    if (nr == NULL)
      return NULL;
    t->rows = nr;
  }
  r = &t->rows[t->nrows++];
  memset(r, 0, sizeof(*r));
  return r;
}

int tlc_table_add_ctx(tlc_table_t *t, const tlc_ctx_t *c) {
  if (t->ncontexts >= 0x7FFFFFF0u)
    return TLC_ELIMIT;
  if (t->ncontexts == t->capcontexts) {
    tlc_ctx_t *nc = tlc_grow(t->contexts, &t->capcontexts, t->ncontexts + 1, sizeof(*nc), 4);
    if (nc == NULL)
      return TLC_ENOMEM;
    t->contexts = nc;
  }
  t->contexts[t->ncontexts] = *c;
  return (int)t->ncontexts++;
}

static int ctx_rank(uint32_t c) {
  /* per-context rows first (by index), then Neutral, then context-less rows */
  return c == TLC_CTX_NEUTRAL ? 1 : c == TLC_CTX_NONE ? 2 : 0;
}

static int cmp_key(uint32_t ha, uint32_t ca, uint64_t sa, uint32_t hb, uint32_t cb, uint64_t sb) {
  int ra, rb;
  if (ha != hb)
    return ha < hb ? -1 : 1;
  ra = ctx_rank(ca);
  rb = ctx_rank(cb);
  if (ra != rb)
    return ra < rb ? -1 : 1;
  if (ca != cb)
    return ca < cb ? -1 : 1;
  if (sa != sb)
    return sa < sb ? -1 : 1;
  return 0;
}

static int cmp_rows(const void *a, const void *b) {
  const tlc_stat_t *x = a, *y = b;
  return cmp_key(x->handle, x->context, x->state, y->handle, y->context, y->state);
}

void tlc_table_sort(tlc_table_t *t) {
  size_t i;
  /* rows that are in order already (a client appending the parts of a statistics reply, which
   * come in key order) cost a pass, not a sort of large structs */
  for (i = 1; i < t->nrows && cmp_rows(&t->rows[i - 1], &t->rows[i]) <= 0; i++)
    ;
  if (i < t->nrows)
    qsort(t->rows, t->nrows, sizeof(t->rows[0]), cmp_rows);
}

const tlc_stat_t *tlc_table_find(const tlc_table_t *t, uint32_t handle, uint32_t context,
                                 uint64_t state) {
  size_t lo = 0, hi = t->nrows;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    const tlc_stat_t *r = &t->rows[mid];
    int c = cmp_key(r->handle, r->context, r->state, handle, context, state);
    if (c == 0)
      return r;
    if (c < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  return NULL;
}

int64_t tlc_time_sub(int64_t b, int64_t a) {
  if (a < 0 ? b > INT64_MAX + a : b < INT64_MIN + a)
    return a < 0 ? INT64_MAX : INT64_MIN;
  return b - a;
}

int64_t tlc_table_total_time(const tlc_table_t *t) {
  return t->counters.events ? tlc_time_sub(t->last_time, t->first_time) : 0;
}

int64_t tlc_dist_avg(const tlc_dist_t *d) {
  if (d->n == 0)
    return 0;
  if (d->n > (uint64_t)INT64_MAX) /* |sum| <= INT64_MAX < n (only a hostile table has this) */
    return 0;
  return d->sum / (int64_t)d->n;
}

/* 64x64 -> 128 multiply of magnitudes, in portable C. */
static void mul128(uint64_t a, uint64_t b, uint64_t *hi, uint64_t *lo) {
  uint64_t a0 = a & 0xFFFFFFFFu, a1 = a >> 32, b0 = b & 0xFFFFFFFFu, b1 = b >> 32;
  uint64_t p00 = a0 * b0, p01 = a0 * b1, p10 = a1 * b0, p11 = a1 * b1;
  uint64_t mid = (p00 >> 32) + (p01 & 0xFFFFFFFFu) + (p10 & 0xFFFFFFFFu);
  *lo = (mid << 32) | (p00 & 0xFFFFFFFFu);
  *hi = p11 + (p01 >> 32) + (p10 >> 32) + (mid >> 32);
}

/* a + b, stopping at INT64_MAX or INT64_MIN instead of overflowing: the engine's rule for
 * sums (engine.h), which a merge of saturated sums (a Neutral row) has to keep. */
static int64_t sat_add(int64_t a, int64_t b) {
  if (b > 0 ? a > INT64_MAX - b : a < INT64_MIN - b)
    return b > 0 ? INT64_MAX : INT64_MIN;
  return a + b;
}

void tlc_dist_add(tlc_dist_t *d, int64_t v) {
  uint64_t mag = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v, hi, lo;
  if (d->n == 0 || v < d->min) {
    d->min = v;
    memset(&d->min_at, 0, sizeof(d->min_at)); /* a new extreme whose time is not known */
  }
  if (d->n == 0 || v > d->max) {
    d->max = v;
    memset(&d->max_at, 0, sizeof(d->max_at));
  }
  d->n++;
  d->sum = sat_add(d->sum, v);
  mul128(mag, mag, &hi, &lo);
  d->sumsq_lo += lo;
  d->sumsq_hi += hi + (d->sumsq_lo < lo);
}

void tlc_dist_add_at(tlc_dist_t *d, int64_t v, const tlc_at_t *at) {
  int mn = d->n == 0 || v < d->min, mx = d->n == 0 || v > d->max;
  tlc_dist_add(d, v);
  if (mn)
    d->min_at = *at;
  if (mx)
    d->max_at = *at;
}

int tlc_at_earlier(const tlc_at_t *x, const tlc_at_t *y) {
  if (x->known != y->known)
    return x->known != 0;
  if (x->epoch != y->epoch)
    return x->epoch < y->epoch;
  if (x->end != y->end)
    return x->end < y->end;
  return x->seq_end < y->seq_end;
}

void tlc_dist_merge(tlc_dist_t *a, const tlc_dist_t *b) {
  if (b->n == 0)
    return;
  if (a->n == 0 || b->min < a->min ||
      (b->min == a->min && tlc_at_earlier(&b->min_at, &a->min_at))) {
    a->min = b->min;
    a->min_at = b->min_at;
  }
  if (a->n == 0 || b->max > a->max ||
      (b->max == a->max && tlc_at_earlier(&b->max_at, &a->max_at))) {
    a->max = b->max;
    a->max_at = b->max_at;
  }
  a->n += b->n;
  a->sum = sat_add(a->sum, b->sum);
  a->sumsq_lo += b->sumsq_lo;
  a->sumsq_hi += b->sumsq_hi + (a->sumsq_lo < b->sumsq_lo);
  a->has_q = 0;
}

double tlc_dist_stddev(const tlc_dist_t *d) {
  double n, mean, ex2, var;
  if (d->n == 0)
    return 0.0;
  n = (double)d->n;
  mean = (double)d->sum / n;
  ex2 = ((double)d->sumsq_hi * 18446744073709551616.0 + (double)d->sumsq_lo) / n;
  var = ex2 - mean * mean;
  return var > 0 ? sqrt(var) : 0.0;
}

/* The bucket of a code row, or SIZE_MAX for rows that are not per context. */
static size_t ctx_bucket(const tlc_table_t *t, const tlc_stat_t *r) {
  if (r->kind != TLC_ROW_CODE)
    return SIZE_MAX;
  if (r->context == TLC_CTX_NEUTRAL)
    return t->ncontexts;
  return r->context < t->ncontexts ? r->context : SIZE_MAX;
}

int tlc_table_by_context(const tlc_table_t *t, size_t **startp, size_t **orderp) {
  size_t nb = t->ncontexts + 1, i, b, *start, *order;
  start = tlc_calloc(nb + 1, sizeof(*start));
  order = tlc_malloc((t->nrows ? t->nrows : 1) * sizeof(*order));
  if (start == NULL || order == NULL) {
    tlc_free(start);
    tlc_free(order);
    return TLC_ENOMEM;
  }
  /* counts, then start[b] = first slot of bucket b */
  for (i = 0; i < t->nrows; i++)
    if ((b = ctx_bucket(t, &t->rows[i])) != SIZE_MAX)
      start[b + 1]++;
  for (b = 1; b <= nb; b++)
    start[b] += start[b - 1];
  /* fill in row order, using start[b] as the cursor: afterwards start[b] is bucket b's end */
  for (i = 0; i < t->nrows; i++)
    if ((b = ctx_bucket(t, &t->rows[i])) != SIZE_MAX)
      order[start[b]++] = i;
  /* a bucket's end is the next one's start: shift back by one */
  for (b = nb; b > 0; b--)
    start[b] = start[b - 1];
  start[0] = 0;
  *startp = start;
  *orderp = order;
  return 0;
}

int tlc_stat_kind_applies(const tlc_stat_t *r, unsigned k) {
  if (r->kind == TLC_ROW_CODE)
    return k < TLC_NKINDS;
  if (r->kind == TLC_ROW_STATE)
    return k == TLC_NET || k == TLC_PERIOD;
  return k == TLC_PERIOD;
}

char *tlc_ctx_name(const tlc_table_t *t, uint32_t context, char *buf, size_t len) {
  const tlc_ctx_t *c;
  if (context == TLC_CTX_NEUTRAL) {
    snprintf(buf, len, "Neutral");
    return buf;
  }
  if (context == TLC_CTX_NONE || context >= t->ncontexts) {
    snprintf(buf, len, "%s", "");
    return buf;
  }
  c = &t->contexts[context];
  switch (c->kind) {
  case TLC_CTXK_CORE:
    if (c->core == TLC_CORE_UNKNOWN)
      snprintf(buf, len, "core?");
    else
      snprintf(buf, len, "core%u", (unsigned)c->core);
    break;
  case TLC_CTXK_TASK:
    snprintf(buf, len, "task%llX", (unsigned long long)c->key);
    break;
  default:
    snprintf(buf, len, "thread%llX", (unsigned long long)c->key);
    break;
  }
  return buf;
}

const char *tlc_at_text(const tlc_at_t *a, char *buf, size_t len) {
  if (!a->known)
    snprintf(buf, len, "-");
  else
    snprintf(buf, len, "%lld..%lld e%u", (long long)a->start, (long long)a->end, a->epoch);
  return buf;
}

/* An extreme's wall clock as `tlcap stats --extremes` shows it: RFC 3339 UTC with ms, "-". */
static const char *at_wall(const tlc_at_t *a, char *buf, size_t len) {
  time_t s;
  struct tm tm;
  if (!a->known || a->wall_ms <= 0) {
    snprintf(buf, len, "-");
    return buf;
  }
  s = (time_t)(a->wall_ms / 1000);
  if (gmtime_r(&s, &tm) == NULL) {
    snprintf(buf, len, "-");
    return buf;
  }
  snprintf(buf, len, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1,
           tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (int)(a->wall_ms % 1000));
  return buf;
}

const char *tlc_at_where(const tlc_at_t *a, char *buf, size_t len) {
  char f[48], l[48];
  if (!a->known || (a->seg_first == 0 && a->seg_last == 0)) {
    snprintf(buf, len, "-");
    return buf;
  }
  if (a->seg_first != 0)
    snprintf(f, sizeof(f), "%llu:%llu", (unsigned long long)a->seg_first,
             (unsigned long long)a->off_first);
  else
    snprintf(f, sizeof(f), "?");
  if (a->seg_last != 0)
    snprintf(l, sizeof(l), "%llu:%llu", (unsigned long long)a->seg_last,
             (unsigned long long)a->off_last);
  else
    snprintf(l, sizeof(l), "?");
  snprintf(buf, len, "%s..%s", f, l);
  return buf;
}

int tlc_extremes_write(struct tlc_out *o, const tlc_table_t *t,
                       const char *(*name)(void *ud, const tlc_stat_t *r), void *ud) {
  static const char *const kn[TLC_NKINDS] = { "net", "gross", "call", "period", "outside" };
  size_t i;
  unsigned k;
  tlc_out_printf(o, "%-8s %-24s %-14s %-7s %20s %-36s %-24s %-24s %20s %-36s %-24s %s\n", "HANDLE",
                 "AREA", "CONTEXT", "KIND", "MAX", "MAX AT", "MAX WALL", "MAX STORED", "MIN",
                 "MIN AT", "MIN WALL", "MIN STORED");
  /* AREA: the mapping's name; CONTEXT: a state row's state value */
  for (i = 0; i < t->nrows; i++) {
    const tlc_stat_t *r = &t->rows[i];
    const char *nm = name != NULL ? name(ud, r) : NULL;
    char ctx[64], amax[80], amin[80], wmax[80], wmin[80], smax[104], smin[104];
    if (r->kind == TLC_ROW_STATE)
      snprintf(ctx, sizeof(ctx), "state=%llu", (unsigned long long)r->state);
    else
      tlc_ctx_name(t, r->context, ctx, sizeof(ctx));
    for (k = 0; k < TLC_NKINDS; k++) {
      const tlc_dist_t *d = &r->dist[k];
      if (!tlc_stat_kind_applies(r, k) || d->n == 0)
        continue;
      tlc_out_printf(
          o, "%08X %-24s %-14s %-7s %20lld %-36s %-24s %-24s %20lld %-36s %-24s %s\n",
          (unsigned)r->handle, nm != NULL && nm[0] != '\0' ? nm : "-", ctx[0] != '\0' ? ctx : "-",
          kn[k], (long long)d->max, tlc_at_text(&d->max_at, amax, sizeof(amax)),
          at_wall(&d->max_at, wmax, sizeof(wmax)), tlc_at_where(&d->max_at, smax, sizeof(smax)),
          (long long)d->min, tlc_at_text(&d->min_at, amin, sizeof(amin)),
          at_wall(&d->min_at, wmin, sizeof(wmin)), tlc_at_where(&d->min_at, smin, sizeof(smin)));
    }
  }
  return o->err;
}
