/* metrics.c - /metrics: Prometheus text format 0.0.4, or OpenMetrics 1.0 (SPEC 9).
 *
 * Families come one after the other with all their samples together (both formats need it),
 * so the targets are read first: per target its info, its storage figures and, when area
 * series are asked for, its code areas' calls and NET figures straight from the engine
 * (tlc_engine_code_net: no snapshot, no table rows), from which the metrics_areas areas with
 * the largest net time are chosen: merged over contexts (Neutral) when the target has several,
 * else those of its one context. Data and state areas have no area series (docs/http.md).
 *
 * The histogram tlcap_area_net_duration_seconds counts the NET samples (closed activations)
 * per bucket of the engine's own histogram (tlc_engine_hist_cum), at edges that are bucket
 * boundaries, so each count is exact and adds up across daemons: near 1-3 steps from 100 ns to
 * 10 s (17 edges) for every series, and from 1,000 samples on a band of 24 fine edges (3.9 %
 * apart) around the series' own p99, kept while the p99 stays inside it (series_edges,
 * band_holds; docs/http.md "Histogram edges"); _count and the +Inf bucket are the number of
 * NET samples, _sum their total.
 * Counters include open activations' time so far (the _total series), the histogram only
 * closed ones.
 *
 * Cost: per target one info call and, with area series, one pass over its engine's rows
 * (O(rows + open activations)), the top metrics_areas by a heap, and the histograms of the
 * exported areas walked in one engine call (prefetching: the walks are cache misses), the
 * lines rendered into a text of the target's own (tblob_t: its three families' lines). A scrape
 * (tlc__http_scrape_t) is made in steps so that the loop never holds it for long: the targets
 * a slice at a time (until the slice's time or rendered bytes run out), then the other
 * families (the head), 64 lines between looks at the clock; the answer is then the head, and
 * per area family its header and every target's lines for it, read out of where they are
 * (nothing is copied into a body: at 1,000 targets the area series are 50 MB). The texts are
 * also the cache (the view's mcache, an entry per target index): a target whose source's stamp
 * says its engine, its names, metrics_areas and the format are unchanged costs a reference to
 * its text; a changed one is rendered once, its old text living on while an answer still
 * sends it. What is kept is bounded by the response's cap (the texts and labels count against
 * it, with the rest of the answer); a source without a stamp keeps nothing. The cache may
 * change between two steps of a scrape (another scrape's): a scrape holds references to texts,
 * never pointers into the cache.
 * When a target is rendered again in the same engine epoch, an exported area whose NET sample
 * count and sum are those of the previous render takes that render's bucket counts (samples
 * are only added within an epoch: the histogram is the same) instead of a walk, and with the
 * same names its escaped labels.
 */
#include "http/http-int.h"
#include "http/promtext.h"

#include "base/alloc.h"
#include "base/clock.h"
#include "base/err.h"
#include "engine/engine.h"
#include "formats/json.h"
#include "formats/mapping.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The coarse ladder, every series' edges: 1-3 steps (half decades), ns, before rounding to the
 * engine's bucket edges: 17 edges from 100 ns to 10 s. */
static const int64_t nice_ns[] = { 100,        300,        1000,      3000,      10000,
                                   30000,      100000,     300000,    1000000,   3000000,
                                   10000000,   30000000,   100000000, 300000000, 1000000000,
                                   3000000000, 10000000000 };
#define NEDGES (sizeof(nice_ns) / sizeof(nice_ns[0]))
static int64_t edges[NEDGES];
static int edges_done;

/* The fine ladder (docs/http.md, "Histogram edges"): 60 steps a decade (3.9 % apart) from
 * 100 ns to 100 s, each rounded to the engine's nearest bucket edge. A series exports a band of
 * BAND consecutive fine edges around its own p99 besides the coarse ladder: the band starts at a
 * multiple of BAND_STEP (fifths of a decade, so that series of like distributions have the same
 * band and add up), is chosen once the series has BAND_MIN_N samples, and is kept while the p99
 * stays within BAND_KEEP steps of its ends (moved only when the p99 moves by a quarter of the
 * band or more). */
#define FINE_DECADE 60
#define NFINE       (9 * FINE_DECADE + 1)
#define BAND        24
#define BAND_STEP   12
#define BAND_KEEP   3
#define BAND_MIN_N  1000
#define NEMAX       (NEDGES + BAND) /* edges of one series at most */
#define NO_BAND     (-1)
/* 10^(k/60) * 10^6, rounded */
static const uint32_t fine_mant[FINE_DECADE] = {
  1000000, 1039122, 1079775, 1122018, 1165914, 1211528, 1258925, 1308177, 1359356, 1412538,
  1467799, 1525223, 1584893, 1646898, 1711328, 1778279, 1847850, 1920142, 1995262, 2073322,
  2154435, 2238721, 2326305, 2417315, 2511886, 2610157, 2712273, 2818383, 2928645, 3043220,
  3162278, 3285993, 3414549, 3548134, 3686945, 3831187, 3981072, 4136820, 4298662, 4466836,
  4641589, 4823178, 5011872, 5207948, 5411695, 5623413, 5843414, 6072022, 6309573, 6556418,
  6812921, 7079458, 7356423, 7644223, 7943282, 8254042, 8576959, 8912509, 9261187, 9623506
};
static int64_t fine[NFINE];

static void edges_init(void) {
  size_t i;
  if (edges_done)
    return;
  for (i = 0; i < NEDGES; i++)
    edges[i] = tlc_engine_hist_edge(nice_ns[i]);
  for (i = 0; i < NFINE; i++) {
    int64_t dec = 100; /* ns */
    for (size_t d = 0; d < i / FINE_DECADE; d++)
      dec *= 10;
    /* at most 10^11 * 10^7: within int64_t */
    fine[i] = tlc_engine_hist_edge((dec * (int64_t)fine_mant[i % FINE_DECADE] + 500000) / 1000000);
  }
  edges_done = 1;
}

const int64_t *tlc__http_metrics_edges(size_t *n) {
  edges_init();
  *n = NEDGES;
  return edges;
}

/* The edges of a series whose band starts at fine index `band` (NO_BAND: the coarse ladder
 * alone): the coarse and the band's fine edges merged, ascending, without repeats, into le (and
 * per edge its label: k < NEDGES coarse edge k, else fine edge k - NEDGES, into src). Returns
 * their number (at most NEMAX). */
static size_t series_edges(int band, int64_t *le, uint16_t *src) {
  size_t a = 0, b = band == NO_BAND ? BAND : 0, n = 0;
  edges_init();
  while (a < NEDGES || b < BAND) {
    int64_t x = a < NEDGES ? edges[a] : INT64_MAX;
    int64_t y = b < BAND ? fine[(size_t)band + b] : INT64_MAX;
    if (x <= y) {
      src[n] = (uint16_t)a;
      le[n++] = x;
      a++;
      if (x == y)
        b++;
    } else {
      src[n] = (uint16_t)(NEDGES + (size_t)band + b);
      le[n++] = y;
      b++;
    }
  }
  return n;
}

/* Per target: what was read before writing. */
typedef struct mt {
  char *name; /* copy: info strings live only until the loop returns, ours until the end */
  int connected;
  tlc_counters_t counters;
  tlc_view_store_t st;
  int areas; /* it has area series (asked for) */
  uint64_t not_exported;
} mt_t;

static void tsample(tlc_out_t *o, const char *name, const char *target, uint64_t v) {
  tlc_out_puts(o, name);
  tlc_out_putc(o, '{');
  tlc__http_label(o, "target", target, 1);
  tlc_out_puts(o, "} ");
  tlc_out_u64(o, v);
  tlc_out_putc(o, '\n');
}

/* The labels of an area series (without the braces): the mapped name or the handle, the
 * context's name (as exporters give it), the handle. */
static void area_labels(tlc__http_view_t *v, size_t i, tlc_out_t *o, const char *target,
                        const tlc_mapping_t *map, const tlc_engine_code_net_t *a) {
  tlc_stat_t st;
  tlc_table_t one;
  tlc_ctx_t c;
  const tlc_map_area_t *ma;
  char hex[16], cbuf[64];
  const char *ctx = "Neutral";
  static const char digits[] = "0123456789ABCDEF";
  memset(&st, 0, sizeof(st));
  st.handle = a->handle;
  st.kind = TLC_ROW_CODE;
  st.context = a->context;
  ma = tlc_mapping_row_entry(map, &st);
  for (int k = 0; k < 8; k++)
    hex[k] = digits[(a->handle >> (28 - 4 * k)) & 15u];
  hex[8] = '\0';
  if (a->context != TLC_CTX_NEUTRAL) {
    /* a one-context table, for the exporters' naming (mapping's CONTEXTS, core<N>, ...) */
    tlc_table_init(&one);
    if (v->src->context == NULL || v->src->context(v->src->ud, i, a->context, &c) != 0)
      memset(&c, 0, sizeof(c));
    one.contexts = &c;
    one.ncontexts = 1;
    ctx = tlc_mapping_ctx_display(map, &one, 0, cbuf, sizeof(cbuf));
  }
  tlc__http_label(o, "target", target, 1);
  tlc__http_label(o, "area", ma != NULL && ma->name[0] != '\0' ? ma->name : hex, 0);
  tlc__http_label(o, "context", ctx, 0);
  tlc__http_label(o, "handle", hex, 0);
}

/* A growing byte run capped by the scrape's budget. */
typedef struct blk {
  char *b;
  size_t len, cap;
} blk_t;

/* A target's rendered area series: the lines of its calls, net-seconds and histogram families,
 * len[k] bytes each, one after the other in b. Shared by the cache (its entry) and the
 * scrapes that send it, freed by its last owner (loop thread only). */
typedef struct tblob {
  size_t refs;
  size_t len[3];
  char b[];
} tblob_t;

static void tblob_unref(tblob_t *t) {
  if (t != NULL && --t->refs == 0)
    tlc_free(t);
}

/* One target's area series, rendered (txt: the lines of the three area families), kept from
 * scrape to scrape while the target's engine is in the same state (epoch, seq), its names as
 * many, and metrics_areas and the format are the same: a target whose statistics did not
 * change costs a scrape a reference to its text; a changed one is rendered once, and every
 * answer sends the texts as they are. */
typedef struct tlc__http_mcent {
  char *name;
  int valid;      /* txt holds the lines of (stamp, areas, om) */
  int has_st;     /* st, areas, om: those of the last render (kept or not) */
  uint64_t st[3]; /* the source's stamp: engine epoch and seq, names */
  uint32_t areas;
  int om;
  uint64_t not_exported;
  tblob_t *txt; /* its lines (the last render), or NULL */
  /* what the histogram run is written from (the last render): */
  size_t na;                 /* exported areas */
  tlc_engine_code_net_t *cn; /* their figures */
  size_t capcn;
  uint64_t *cum; /* NEMAX per exported area (its series_edges' counts) */
  size_t capcum;
  int *band; /* per exported area: its band (series_edges), or NO_BAND */
  size_t capband;
  int *have; /* per exported area: cum filled */
  size_t caphave;
  size_t *labo; /* per exported area: its labels' offset in lab, then their end */
  size_t caplabo;
  blk_t lab; /* the exported areas' labels, escaped once */
} mcent_t;

struct tlc__http_mcache {
  mcent_t *e; /* per target index of the last scrape */
  size_t n;
};

static void ent_fini(mcent_t *c) {
  tlc_free(c->name);
  tlc_free(c->cn);
  tlc_free(c->cum);
  tlc_free(c->band);
  tlc_free(c->have);
  tlc_free(c->labo);
  tlc_free(c->lab.b);
  tblob_unref(c->txt);
  memset(c, 0, sizeof(*c));
}

void tlc__http_metrics_cache_free(tlc__http_view_t *v) {
  struct tlc__http_mcache *mc = v->mcache;
  if (mc == NULL)
    return;
  for (size_t i = 0; i < mc->n; i++)
    ent_fini(&mc->e[i]);
  tlc_free(mc->e);
  tlc_free(mc);
  v->mcache = NULL;
}

/* n entries (new ones empty, those past n freed). 0 or TLC_ENOMEM. */
static int cache_size(tlc__http_view_t *v, size_t n) {
  struct tlc__http_mcache *mc = v->mcache;
  mcent_t *e;
  if (mc == NULL) {
    if ((mc = tlc_calloc(1, sizeof(*mc))) == NULL)
      return TLC_ENOMEM;
    v->mcache = mc;
  }
  if (n == mc->n)
    return 0;
  for (size_t i = n; i < mc->n; i++)
    ent_fini(&mc->e[i]);
  if (n > 0 && (e = tlc_realloc(mc->e, n * sizeof(*e))) == NULL) {
    if (n < mc->n)
      mc->n = n; /* the tail is freed already; the array stays as large as it was */
    return TLC_ENOMEM;
  }
  if (n == 0) {
    tlc_free(mc->e);
    e = NULL;
  }
  if (n > mc->n)
    memset(e + mc->n, 0, (n - mc->n) * sizeof(*e));
  mc->e = e;
  mc->n = n;
  return 0;
}

/* Room for `need` more bytes in b, all runs of this scrape within *budget. */
static char *blk_room(blk_t *b, size_t need, size_t *budget) {
  if (need > *budget)
    return NULL;
  size_t want = b->len + need;
  /* never NULL, even for 0 bytes: a target without areas yet */
  char *p = tlc_grow(b->b, &b->cap, want > 0 ? want : 1, 1, 4096);
  if (p == NULL)
    return NULL;
  b->b = p;
  return b->b + b->len;
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

static int cmp_net(const void *a, const void *b) {
  const tlc_engine_code_net_t *x = a, *y = b;
  if (x->net_total != y->net_total)
    return x->net_total > y->net_total ? -1 : 1;
  if (x->handle != y->handle)
    return x->handle < y->handle ? -1 : 1;
  return x->context < y->context ? -1 : x->context > y->context;
}

static void sift(tlc_engine_code_net_t *a, size_t k, size_t i) {
  for (;;) {
    size_t l = 2 * i + 1, w = i;
    tlc_engine_code_net_t t;
    if (l < k && cmp_net(&a[l], &a[w]) > 0)
      w = l;
    if (l + 1 < k && cmp_net(&a[l + 1], &a[w]) > 0)
      w = l + 1;
    if (w == i)
      return;
    t = a[i];
    a[i] = a[w];
    a[w] = t;
    i = w;
  }
}

/* Moves the k first of a[0..n) in cmp_net order (the largest net times) to a[0..k), sorted:
 * a heap of the k kept, its root the last of them, O(n log k) (a target may have 100,000
 * areas and export 20). */
static void top_k(tlc_engine_code_net_t *a, size_t n, size_t k) {
  size_t i;
  if (k == 0)
    return;
  for (i = k / 2; i-- > 0;)
    sift(a, k, i);
  for (i = k; i < n; i++)
    if (cmp_net(&a[i], &a[0]) < 0) {
      tlc_engine_code_net_t t = a[0];
      a[0] = a[i];
      a[i] = t;
      sift(a, k, 0);
    }
  qsort(a, k, sizeof(*a), cmp_net);
}

/* Scratch of one scrape, reused from target to target. */
typedef struct scratch {
  tlc_engine_code_net_t *cn;
  size_t capcn;
  tlc_engine_code_net_t *pcn; /* the target's previous exported areas (their figures, */
  size_t cappcn;
  uint64_t *pcum; /* bucket counts, bands, and whether those were found) */
  size_t cappcum;
  int *pband;
  size_t cappband;
  int *phave;
  size_t capphave;
  size_t *plabo; /* and their labels' offsets in c->lab (same_labels) */
  size_t capplabo;
  tlc_engine_code_net_t *wx; /* the exported areas whose histograms are walked (code_hists), */
  size_t capwx;
  uint64_t *walk; /* their bands + 1 (high 32 bits) and places among the exported, */
  size_t capwalk;
  uint64_t *wcum; /* their counts, */
  size_t capwcum;
  int *wok; /* and whether those were found */
  size_t capwok;
  tlc_out_t lab; /* the exported areas' labels, escaped once */
  blk_t a[3];    /* a target's lines being rendered (calls, net seconds, histogram) */
  char les[NEDGES + NFINE][32]; /* ,le="EDGE"} of the coarse, then the fine edges */
  size_t lel[NEDGES + NFINE];
} scratch_t;

/* Each line: a family name (< 48), the labels, an le (< 32), a number (< 32), a newline. */
#define ROOM(blk, lines)                                                                           \
  do {                                                                                             \
    size_t need_ = (lines) * (labn + 112);                                                         \
    if ((q = blk_room((blk), need_, budget)) == NULL)                                              \
      return need_ > *budget ? TLC_ELIMIT : TLC_ENOMEM;                                            \
  } while (0)
#define LIT(str) (memcpy(q, str, sizeof(str) - 1), q += sizeof(str) - 1)
#define LAB()    (memcpy(q, lab, labn), q += labn)
#define DONE(blk)                                                                                  \
  do {                                                                                             \
    *budget -= (size_t)(q - ((blk)->b + (blk)->len));                                              \
    (blk)->len = (size_t)(q - (blk)->b);                                                           \
  } while (0)

/* The histogram lines of c's exported area r, appended to b. 0, TLC_ENOMEM or TLC_ELIMIT. */
static int hist_lines(const mcent_t *c, size_t r, const scratch_t *s, blk_t *b, size_t *budget) {
  const char *lab = c->lab.b + c->labo[r];
  size_t labn = c->labo[r + 1] - c->labo[r], k;
  const uint64_t *cum = &c->cum[r * NEMAX];
  uint64_t nn = c->cn[r].n;
  int64_t le[NEMAX];
  uint16_t src[NEMAX];
  size_t ne = series_edges(c->band[r], le, src);
  char *q;
  ROOM(b, ne + 3);
  for (k = 0; c->have[r] && k < ne; k++) {
    LIT("tlcap_area_net_duration_seconds_bucket{");
    LAB();
    memcpy(q, s->les[src[k]], s->lel[src[k]]);
    q += s->lel[src[k]];
    q = tlc__http_p_u64(q, cum[k] <= nn ? cum[k] : nn);
    *q++ = '\n';
  }
  LIT("tlcap_area_net_duration_seconds_bucket{");
  LAB();
  LIT(",le=\"+Inf\"} ");
  q = tlc__http_p_u64(q, nn);
  *q++ = '\n';
  LIT("tlcap_area_net_duration_seconds_sum{");
  LAB();
  LIT("} ");
  q = tlc__http_p_seconds(q, c->cn[r].sum);
  *q++ = '\n';
  LIT("tlcap_area_net_duration_seconds_count{");
  LAB();
  LIT("} ");
  q = tlc__http_p_u64(q, nn);
  *q++ = '\n';
  DONE(b);
  return 0;
}

/* Counts of x (target i) at le[0..ne) into cum, by the walk the source has. 0 or an error. */
static int hist_one(tlc__http_view_t *v, size_t i, const tlc_engine_code_net_t *x,
                    const int64_t *le, size_t ne, uint64_t *cum) {
  const tlc_view_t *pv = v->src;
  int ok = 0;
  if (pv->code_hist != NULL)
    return pv->code_hist(pv->ud, i, x, le, ne, cum);
  if (pv->code_hists != NULL) {
    (void)pv->code_hists(pv->ud, i, x, 1, le, ne, cum, &ok);
    return ok ? 0 : TLC_ERANGE;
  }
  if (pv->hist_cum != NULL)
    return pv->hist_cum(pv->ud, i, x->handle, x->context, TLC_NET, le, ne, cum);
  return TLC_EINVAL;
}

/* The rank of the 99th percentile among n samples: 0.99 n rounded up (at least 1). */
static uint64_t rank99(uint64_t n) {
  uint64_t r = n - n / 100;
  return r > 0 ? r : 1;
}

/* The count at edge x of a series with counts cum at le[0..ne) (x one of them). */
static uint64_t cum_at(const int64_t *le, const uint64_t *cum, size_t ne, int64_t x) {
  for (size_t k = 0; k < ne; k++)
    if (le[k] == x)
      return cum[k];
  return 0;
}

/* 1 when band is kept for a series of n samples with counts cum at le[0..ne) (its
 * series_edges): its p99 (the first fine edge with rank99(n) samples at or below it) at least
 * BAND_KEEP steps inside either end of the band that is not an end of the fine ladder. */
static int band_holds(int band, const int64_t *le, const uint64_t *cum, size_t ne, uint64_t n) {
  uint64_t r = rank99(n);
  if (band == NO_BAND)
    return 0;
  if (band > 0 && cum_at(le, cum, ne, fine[band + BAND_KEEP - 1]) >= r)
    return 0;
  if (band + BAND < NFINE && cum_at(le, cum, ne, fine[band + BAND - BAND_KEEP - 1]) < r)
    return 0;
  return 1;
}

/* The band of a series whose p99 is at fine index j: the multiple of BAND_STEP that puts j
 * (BAND - BAND_STEP) / 2 steps or more inside both ends, within the ladder. */
static int band_for(int j) {
  int b = j - (BAND - BAND_STEP) / 2, top = (NFINE - BAND) / BAND_STEP * BAND_STEP;
  b = b < 0 ? 0 : b / BAND_STEP * BAND_STEP;
  return b > top ? top : b;
}

/* The fine index of x's p99, from its counts cum at le[0..ne) and one walk of the fine edges
 * between the two of le that hold it; -1 when the walk fails. */
static int p99_fine(tlc__http_view_t *v, size_t i, const tlc_engine_code_net_t *x,
                    const int64_t *le, const uint64_t *cum, size_t ne) {
  uint64_t r = rank99(x->n), fc[64];
  int64_t lo = -1, hi = INT64_MAX;
  size_t k, jl = 0, jh;
  for (k = 0; k < ne && cum[k] < r; k++)
    lo = le[k];
  if (k < ne)
    hi = le[k];
  while (jl < NFINE - 1 && fine[jl] <= lo)
    jl++;
  for (jh = jl; jh < NFINE - 1 && fine[jh] < hi && jh - jl < 63;)
    jh++;
  if (hist_one(v, i, x, &fine[jl], jh - jl + 1, fc) != 0)
    return -1;
  for (k = 0; k < jh - jl && fc[k] < r; k++)
    ;
  return (int)(jl + k);
}

/* Renders the area series of target i (name `name`) for c: its calls, net-seconds and
 * histogram runs at the ends of R's runs. same_epoch: c's previous render is of the same
 * engine epoch (its areas' samples were only added to since); same_labels: also of the same
 * names and target name (an area found in it keeps its escaped labels). An area exported by
 * the previous render keeps its band (any epoch). 0, TLC_ENOMEM, TLC_ELIMIT (past *budget,
 * which is reduced by what c and its runs hold), or the source's error. */
static int render(tlc__http_view_t *v, size_t i, const char *name, mcent_t *c, scratch_t *s,
                  int same_epoch, int same_labels, size_t *budget) {
  const tlc_view_t *pv = v->src;
  const tlc_mapping_t *map = pv->mapping != NULL ? pv->mapping(pv->ud, i) : NULL;
  size_t nk = 0, na, r, nw = 0, pna = c->na;
  int rc;
  void *p;
  if (pna > 0) {
    /* the previous render's figures: an area whose NET samples are as many (same engine
     * epoch: samples are only added) has the same histogram, its counts need no walk */
    if ((p = tlc_grow(s->pcn, &s->cappcn, pna, sizeof(*s->pcn), 16)) == NULL)
      return TLC_ENOMEM;
    s->pcn = p;
    if ((p = tlc_grow(s->pcum, &s->cappcum, pna * NEMAX, sizeof(*s->pcum), 64)) == NULL)
      return TLC_ENOMEM;
    s->pcum = p;
    if ((p = tlc_grow(s->pband, &s->cappband, pna, sizeof(*s->pband), 16)) == NULL)
      return TLC_ENOMEM;
    s->pband = p;
    if ((p = tlc_grow(s->phave, &s->capphave, pna, sizeof(*s->phave), 16)) == NULL)
      return TLC_ENOMEM;
    s->phave = p;
    memcpy(s->pcn, c->cn, pna * sizeof(*s->pcn));
    memcpy(s->pcum, c->cum, pna * NEMAX * sizeof(*s->pcum));
    memcpy(s->pband, c->band, pna * sizeof(*s->pband));
    memcpy(s->phave, c->have, pna * sizeof(*s->phave));
    if (same_labels) { /* and their labels (still in c->lab while the new ones are made) */
      if ((p = tlc_grow(s->plabo, &s->capplabo, pna + 1, sizeof(*s->plabo), 16)) == NULL)
        return TLC_ENOMEM;
      s->plabo = p;
      memcpy(s->plabo, c->labo, (pna + 1) * sizeof(*s->plabo));
    }
  }
  for (r = 0; r < 3; r++)
    s->a[r].len = 0;
  c->lab.len = 0;
  c->na = 0;
  c->not_exported = 0;
  if ((rc = v->src->code_net(v->src->ud, i, &s->cn, &nk, &s->capcn)) != 0)
    return rc;
  na = nk < v->metrics_areas ? nk : v->metrics_areas;
  top_k(s->cn, nk, na);
  c->not_exported = nk - na;
  if ((p = tlc_grow(c->cn, &c->capcn, na + 1, sizeof(*c->cn), 16)) == NULL)
    return TLC_ENOMEM;
  c->cn = p;
  if ((p = tlc_grow(c->cum, &c->capcum, (na + 1) * NEMAX, sizeof(*c->cum), 64)) == NULL)
    return TLC_ENOMEM;
  c->cum = p;
  if ((p = tlc_grow(c->band, &c->capband, na + 1, sizeof(*c->band), 16)) == NULL)
    return TLC_ENOMEM;
  c->band = p;
  if ((p = tlc_grow(c->have, &c->caphave, na + 1, sizeof(*c->have), 16)) == NULL)
    return TLC_ENOMEM;
  c->have = p;
  if ((p = tlc_grow(c->labo, &c->caplabo, na + 1, sizeof(*c->labo), 16)) == NULL)
    return TLC_ENOMEM;
  c->labo = p;
  memcpy(c->cn, s->cn, na * sizeof(*c->cn));
  s->lab.len = s->lab.total = 0;
  if ((p = tlc_grow(s->walk, &s->capwalk, na + 1, sizeof(*s->walk), 16)) == NULL)
    return TLC_ENOMEM;
  s->walk = p;
  for (r = 0; r < na; r++) {
    const tlc_engine_code_net_t *x = &c->cn[r];
    size_t q = r;
    c->labo[r] = s->lab.len;
    if (q >= pna || s->pcn[q].handle != x->handle || s->pcn[q].context != x->context)
      for (q = 0; q < pna; q++) /* not at the same place: anywhere */
        if (s->pcn[q].handle == x->handle && s->pcn[q].context == x->context)
          break;
    c->band[r] = q < pna ? s->pband[q] : NO_BAND;
    if (same_epoch && q < pna && s->phave[q] && s->pcn[q].n == x->n && s->pcn[q].sum == x->sum) {
      memcpy(&c->cum[r * NEMAX], &s->pcum[q * NEMAX], NEMAX * sizeof(*c->cum));
      c->have[r] = 1;
    } else {
      c->have[r] = 0; /* walked below with the others of its band, in one call */
      s->walk[nw++] = ((uint64_t)(c->band[r] + 1) << 32) | r;
    }
    if (same_labels && q < pna) /* its labels as escaped then (same names, same target) */
      tlc_out_write(&s->lab, c->lab.b + s->plabo[q], s->plabo[q + 1] - s->plabo[q]);
    else
      area_labels(v, i, &s->lab, name, map, x);
  }
  if (nw > 0) { /* the areas whose histograms changed, walked a band at a time (prefetching) */
    int64_t le[NEMAX];
    uint16_t src[NEMAX];
    size_t ne, g, h;
    if ((p = tlc_grow(s->wx, &s->capwx, nw, sizeof(*s->wx), 16)) == NULL)
      return TLC_ENOMEM;
    s->wx = p;
    if ((p = tlc_grow(s->wcum, &s->capwcum, nw * NEMAX, sizeof(*s->wcum), 64)) == NULL)
      return TLC_ENOMEM;
    s->wcum = p;
    if ((p = tlc_grow(s->wok, &s->capwok, nw, sizeof(*s->wok), 16)) == NULL)
      return TLC_ENOMEM;
    s->wok = p;
    qsort(s->walk, nw, sizeof(*s->walk), cmp_u64); /* by band */
    for (g = 0; g < nw; g = h) {
      int band = (int)(s->walk[g] >> 32) - 1;
      for (h = g; h < nw && (s->walk[h] >> 32) == (s->walk[g] >> 32); h++) {
        s->wx[h - g] = c->cn[(uint32_t)s->walk[h]];
        s->wok[h - g] = 0;
      }
      ne = series_edges(band, le, src);
      if (pv->code_hists != NULL)
        (void)pv->code_hists(pv->ud, i, s->wx, h - g, le, ne, s->wcum, s->wok); /* per ok[] */
      else
        for (r = 0; r < h - g; r++)
          s->wok[r] = hist_one(v, i, &s->wx[r], le, ne, &s->wcum[r * ne]) == 0;
      for (r = 0; r < h - g; r++) {
        size_t a = (uint32_t)s->walk[g + r];
        c->have[a] = s->wok[r];
        if (s->wok[r])
          memcpy(&c->cum[a * NEMAX], &s->wcum[r * ne], ne * sizeof(*c->cum));
      }
    }
    for (g = 0; g < nw; g++) { /* the walked ones' bands: kept, chosen or moved */
      size_t a = (uint32_t)s->walk[g];
      const tlc_engine_code_net_t *x = &c->cn[a];
      int j, nb;
      if (!c->have[a] || x->n < BAND_MIN_N)
        continue;
      ne = series_edges(c->band[a], le, src);
      if (band_holds(c->band[a], le, &c->cum[a * NEMAX], ne, x->n))
        continue;
      if ((j = p99_fine(v, i, x, le, &c->cum[a * NEMAX], ne)) < 0 ||
          (nb = band_for(j)) == c->band[a])
        continue;
      ne = series_edges(nb, le, src);
      if (hist_one(v, i, x, le, ne, &c->cum[a * NEMAX]) == 0)
        c->band[a] = nb;
      else /* (the old band's counts are gone) */
        c->have[a] = 0;
    }
  }
  c->labo[na] = s->lab.len;
  if (s->lab.err != 0)
    return s->lab.err; /* labels past the cap (a giant name): the scrape fails */
  {
    size_t labn = s->lab.len; /* the labels, kept with c: counted against the budget */
    char *q;
    if (labn > *budget || (q = blk_room(&c->lab, labn, budget)) == NULL)
      return labn > *budget ? TLC_ELIMIT : TLC_ENOMEM;
    if (labn > 0) /* no area yet: no label buffer either */
      memcpy(q, s->lab.buf, labn);
    q += labn;
    DONE(&c->lab);
  }
  c->na = na;
  for (r = 0; r < na; r++) {
    const char *lab = c->lab.b + c->labo[r];
    size_t labn = c->labo[r + 1] - c->labo[r];
    char *q;
    ROOM(&s->a[0], 1);
    LIT("tlcap_area_calls_total{");
    LAB();
    LIT("} ");
    q = tlc__http_p_u64(q, c->cn[r].count);
    *q++ = '\n';
    DONE(&s->a[0]);
  }
  for (r = 0; r < na; r++) {
    const char *lab = c->lab.b + c->labo[r];
    size_t labn = c->labo[r + 1] - c->labo[r];
    char *q;
    ROOM(&s->a[1], 1);
    LIT("tlcap_area_net_seconds_total{");
    LAB();
    LIT("} ");
    q = tlc__http_p_seconds(q, c->cn[r].net_total);
    *q++ = '\n';
    DONE(&s->a[1]);
  }
  for (r = 0; r < na; r++)
    if ((rc = hist_lines(c, r, s, &s->a[2], budget)) != 0)
      return rc;
  return 0;
}
#undef ROOM
#undef LIT
#undef LAB
#undef DONE

/* Target i: info, storage, and its area series (*txt, a new owner: the cache's when its
 * engine's state is the one they were rendered from, else rendered now; NULL: none asked for).
 * *rendered: bytes rendered. */
static int read_target(tlc__http_view_t *v, int om, size_t i, mt_t *m, scratch_t *s, tblob_t **txt,
                       size_t *rendered, size_t *budget) {
  mcent_t *c = &v->mcache->e[i];
  uint64_t st[3] = { 0, 0, 0 };
  int known, same, same_epoch, same_labels, rc;
  tlc_view_target_t ti;
  tblob_t *t;
  size_t tot;
  *txt = NULL;
  *rendered = 0;
  if ((rc = tlc__http_target_read(v, i, &ti, &m->st)) != 0)
    return rc;
  m->connected = ti.connected;
  m->counters = ti.counters;
  m->name = tlc_malloc(strlen(ti.name) + 1);
  if (m->name == NULL)
    return TLC_ENOMEM;
  strcpy(m->name, ti.name);
  if (v->metrics_areas == 0 || v->src->code_net == NULL) {
    ent_fini(c);
    return 0;
  }
  known = v->src->stamp != NULL && v->src->stamp(v->src->ud, i, st) == 0;
  same = known && c->has_st && memcmp(c->st, st, sizeof(st)) == 0 && c->areas == v->metrics_areas &&
         c->om == om && c->name != NULL && strcmp(c->name, m->name) == 0;
  if (same && c->valid && c->txt != NULL) {
    tot = c->txt->len[0] + c->txt->len[1] + c->txt->len[2];
    if (tot + c->lab.len > *budget)
      return TLC_ELIMIT;
    *budget -= tot + c->lab.len;
    c->txt->refs++;
    *txt = c->txt;
    m->not_exported = c->not_exported;
    m->areas = 1;
    return 0;
  }
  c->valid = 0;
  same_epoch = known && c->has_st && c->st[0] == st[0];
  /* the same names and target name too: an area's labels are those it had */
  same_labels = same_epoch && c->st[2] == st[2] && c->name != NULL && strcmp(c->name, m->name) == 0;
  c->has_st = 0;
  if (c->name == NULL || strcmp(c->name, m->name) != 0) {
    tlc_free(c->name);
    if ((c->name = tlc_malloc(strlen(m->name) + 1)) == NULL)
      return TLC_ENOMEM;
    strcpy(c->name, m->name);
  }
  if ((rc = render(v, i, m->name, c, s, same_epoch, same_labels, budget)) != 0)
    return rc;
  tot = s->a[0].len + s->a[1].len + s->a[2].len;
  if ((t = tlc_malloc(sizeof(*t) + (tot > 0 ? tot : 1))) == NULL)
    return TLC_ENOMEM;
  t->refs = 2; /* the cache's and the scrape's */
  for (int k = 0, off = 0; k < 3; off += (int)s->a[k].len, k++) {
    t->len[k] = s->a[k].len;
    if (t->len[k] > 0)
      memcpy(t->b + off, s->a[k].b, t->len[k]);
  }
  tblob_unref(c->txt);
  c->txt = t;
  *txt = t;
  *rendered = tot;
  m->not_exported = c->not_exported;
  m->areas = 1;
  c->valid = known;
  c->has_st = known;
  memcpy(c->st, st, sizeof(st));
  c->areas = v->metrics_areas;
  c->om = om;
  return 0;
}

static const char *const run_family[3][3] = {
  { "tlcap_area_calls_total", "counter", "Calls (E events) of the area." },
  { "tlcap_area_net_seconds_total", "counter",
    "Net (running) time of the area, open activations included." },
  { "tlcap_area_net_duration_seconds", "histogram",
    "Net time of closed activations (engine histogram edges: exact counts)." },
};

/* The per-target families, in their order (after the daemon's). */
enum {
  TF_CONNECTED,
  TF_EVENTS,
  TF_BYTES,
  TF_GAPS,
  TF_RESYNCS,
  TF_CLOCK_RESETS,
  TF_SKIPPED,
  TF_INVALID,
  TF_ANOMALIES,
  TF_DROPPED,
  TF_STORE,
  TF_NOT_EXPORTED,
  TF_N
};
static const char *const tfam[TF_N][3] = {
  { "tlcap_target_connected", "gauge", "1 while the target is connected." },
  { "tlcap_target_events_total", "counter", "Events processed by the statistics engine." },
  { "tlcap_target_bytes_total", "counter", "Bytes received from the target." },
  { "tlcap_target_gaps_total", "counter",
    "Gaps in the statistics (disconnects, resyncs, evlog overflows)." },
  { "tlcap_target_resyncs_total", "counter", "Times the decoder lost and regained sync." },
  { "tlcap_target_clock_resets_total", "counter",
    "Times the target's clock restarted (a board reset): a gap and a new epoch." },
  { "tlcap_target_bytes_skipped_total", "counter", "Bytes skipped by resyncs." },
  { "tlcap_target_records_invalid_total", "counter", "Records the decoder found invalid." },
  { "tlcap_target_anomalies_total", "counter", "Anomalies counted by the statistics engine." },
  { "tlcap_target_dropped_area_limit_total", "counter",
    "Events dropped because the area, context or memory limit was reached." },
  { "tlcap_store_bytes_written_total", "counter", "Bytes of the target written to its segments." },
  { "tlcap_target_areas_not_exported", "gauge",
    "Code areas without area series (beyond metrics_areas, by net time)." },
};

static uint64_t tfam_value(const mt_t *m, int f) {
  switch (f) {
  case TF_CONNECTED:
    return m->connected ? 1 : 0;
  case TF_EVENTS:
    return m->counters.events;
  case TF_BYTES:
    return m->counters.bytes;
  case TF_GAPS:
    return m->counters.gaps;
  case TF_RESYNCS:
    return m->counters.resyncs;
  case TF_CLOCK_RESETS:
    return m->counters.clock_resets;
  case TF_SKIPPED:
    return m->counters.bytes_skipped;
  case TF_INVALID:
    return m->counters.records_invalid;
  case TF_ANOMALIES:
    return m->counters.anomalies;
  case TF_DROPPED:
    return m->counters.dropped_area_limit;
  case TF_STORE:
    return m->st.bytes_written;
  default:
    return m->areas ? m->not_exported : 0;
  }
}

/* A scrape being made (http-int.h). */
struct tlc__http_scrape {
  int om;
  int state; /* READ (targets), HEAD (the other families), DONE, or FAILED (err) */
  int err;
  size_t cap;     /* the response's cap */
  size_t budget;  /* what is left of it */
  size_t n, next; /* targets (their count at the start), the next to read */
  mt_t *m;
  tblob_t **txt; /* per target: its area series, or NULL */
  scratch_t *s;
  int any;       /* some target has area lines */
  int has_store; /* some target is stored */
  tlc_out_t fam; /* the three area families' headers, one after the other */
  size_t famo[4];
  tlc_out_t head; /* everything before the area families */
  int hf;         /* HEAD: the per-target family being written (-1: the daemon's first) */
  size_t hi;      /* its next target */
  size_t total;   /* DONE: bytes of the answer */
  size_t rendered, nrendered;
  size_t seg, soff; /* sending: segment (0 head, then per family its header and targets, then
                       "# EOF"), bytes of it sent */
};
enum { ST_READ, ST_HEAD, ST_DONE, ST_FAILED };

static void scratch_free(scratch_t *s) {
  if (s == NULL)
    return;
  tlc_free(s->cn);
  tlc_free(s->pcn);
  tlc_free(s->pcum);
  tlc_free(s->pband);
  tlc_free(s->phave);
  tlc_free(s->plabo);
  tlc_free(s->wx);
  tlc_free(s->walk);
  tlc_free(s->wcum);
  tlc_free(s->wok);
  for (int k = 0; k < 3; k++)
    tlc_free(s->a[k].b);
  tlc_out_fini(&s->lab);
  tlc_free(s);
}

void tlc__http_scrape_free(tlc__http_scrape_t *sc) {
  if (sc == NULL)
    return;
  for (size_t i = 0; sc->m != NULL && i < sc->n; i++)
    tlc_free(sc->m[i].name);
  for (size_t i = 0; sc->txt != NULL && i < sc->n; i++)
    tblob_unref(sc->txt[i]);
  tlc_free(sc->m);
  tlc_free(sc->txt);
  scratch_free(sc->s);
  tlc_out_fini(&sc->fam);
  tlc_out_fini(&sc->head);
  tlc_free(sc);
}

int tlc__http_scrape_start(tlc__http_view_t *v, int om, size_t cap, tlc__http_scrape_t **out) {
  const tlc_view_t *pv = v->src;
  tlc__http_scrape_t *sc = tlc_calloc(1, sizeof(*sc));
  size_t j, ne;
  const int64_t *le = tlc__http_metrics_edges(&ne);
  *out = NULL;
  if (sc == NULL)
    return TLC_ENOMEM;
  sc->om = om;
  sc->cap = sc->budget = cap;
  sc->n = pv->count(pv->ud);
  sc->hf = -1;
  tlc_out_init(&sc->fam, 4096, NULL, NULL);
  tlc_out_init(&sc->head, 1, NULL, NULL); /* sized when the targets are read */
  sc->m = tlc_calloc(sc->n ? sc->n : 1, sizeof(*sc->m));
  sc->txt = tlc_calloc(sc->n ? sc->n : 1, sizeof(*sc->txt));
  sc->s = tlc_calloc(1, sizeof(*sc->s));
  if (sc->m == NULL || sc->txt == NULL || sc->s == NULL) {
    tlc__http_scrape_free(sc);
    return TLC_ENOMEM;
  }
  tlc_out_init(&sc->s->lab, 1u << 20, NULL, NULL); /* labels past 1 MiB: a 500 */
  for (j = 0; j < ne + NFINE; j++) { /* the coarse edges' labels, then the fine ones' */
    int64_t x = j < ne ? le[j] : fine[j - ne];
    char *q = sc->s->les[j];
    memcpy(q, ",le=\"", 5);
    q = tlc__http_p_seconds(q + 5, x);
    if (om && x % 1000000000 == 0)
      q = (memcpy(q, ".0", 2), q + 2);
    memcpy(q, "\"} ", 3);
    sc->s->lel[j] = (size_t)(q + 3 - sc->s->les[j]);
  }
  for (int k = 0; k < 3; k++) {
    sc->famo[k] = sc->fam.len;
    tlc__http_family(&sc->fam, om, run_family[k][0], run_family[k][1], run_family[k][2]);
  }
  sc->famo[3] = sc->fam.len;
  if (sc->fam.err != 0 || sc->fam.len > sc->budget) {
    int rc = sc->fam.err != 0 ? sc->fam.err : TLC_ELIMIT;
    tlc__http_scrape_free(sc);
    return rc;
  }
  sc->budget -= sc->fam.len;
  *out = sc;
  return 0;
}

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void fail(tlc__http_view_t *v, tlc__http_scrape_t *sc, int rc) {
  sc->state = ST_FAILED;
  sc->err = rc;
  tlc__http_metrics_cache_free(v); /* as after any failed scrape: nothing kept */
}

/* The scrape's first phase: targets read (rendered or taken from the cache) until the slice is
 * used. 0: more to read; 1: made (failed); 2: every target read (sc->state ST_HEAD). */
static int step_targets(tlc__http_view_t *v, tlc__http_scrape_t *sc, uint64_t t0, uint64_t slice_ns,
                        size_t slice_bytes, size_t *bytes) {
  const tlc_view_t *pv = v->src;
  int rc;
  size_t now = pv->count(pv->ud);
  if (now < sc->n) /* cannot happen (indexes are reused, never removed): fewer targets */
    while (sc->n > now && sc->n > sc->next) {
      sc->n--;
      tlc_free(sc->m[sc->n].name);
      sc->m[sc->n].name = NULL;
    }
  if ((rc = cache_size(v, now > sc->n ? now : sc->n)) != 0) {
    fail(v, sc, rc);
    return 1;
  }
  while (sc->next < sc->n) {
    size_t r;
    rc = read_target(v, sc->om, sc->next, &sc->m[sc->next], sc->s, &sc->txt[sc->next], &r,
                     &sc->budget);
    if (rc != 0) {
      fail(v, sc, rc);
      return 1;
    }
    if (sc->txt[sc->next] != NULL)
      sc->any |=
          sc->txt[sc->next]->len[0] + sc->txt[sc->next]->len[1] + sc->txt[sc->next]->len[2] > 0;
    sc->has_store |= sc->m[sc->next].st.has;
    sc->next++;
    if (r > 0) {
      sc->rendered += r;
      sc->nrendered++;
    }
    *bytes += r + 64;
    if (sc->next < sc->n && (*bytes >= slice_bytes || now_ns() - t0 >= slice_ns))
      return 0;
  }
  if (sc->any && sc->om) { /* "# EOF" after the area families */
    if (sc->budget < 6) {
      fail(v, sc, TLC_ELIMIT);
      return 1;
    }
    sc->budget -= 6;
  }
  sc->state = ST_HEAD;
  return 2;
}

/* The second phase: the daemon's families, then the per-target families of the figures read
 * in the first, until the slice is used. 0: more to write; 1: made (or failed). */
static int step_head(tlc__http_view_t *v, tlc__http_scrape_t *sc, uint64_t t0, uint64_t slice_ns,
                     size_t slice_bytes, size_t bytes) {
  tlc_out_t *o = &sc->head;
  size_t len0;
  if (sc->hf < 0) {
    /* about as large as the previous scrape's: one allocation instead of doublings */
    size_t hint = v->metrics_hint + v->metrics_hint / 8;
    o->max = sc->budget > 0 ? sc->budget : 1;
    if (hint > 0 && hint <= o->max && (o->buf = tlc_malloc(hint)) != NULL)
      o->cap = hint;
    tlc__http_head(v, sc->om, o);
    sc->hf = sc->n > 0 ? 0 : TF_N;
    sc->hi = 0;
  }
  len0 = o->len;
  while (sc->hf < TF_N) {
    if (sc->hi == 0) {
      if (sc->hf == TF_STORE && !sc->has_store) {
        sc->hf++;
        continue;
      }
      tlc__http_family(o, sc->om, tfam[sc->hf][0], tfam[sc->hf][1], tfam[sc->hf][2]);
    }
    while (sc->hi < sc->n) {
      const mt_t *m = &sc->m[sc->hi++];
      if (sc->hf != TF_STORE || m->st.has)
        tsample(o, tfam[sc->hf][0], m->name, tfam_value(m, sc->hf));
      if ((sc->hi & 63) == 0 && sc->hi < sc->n &&
          (bytes + (o->len - len0) >= slice_bytes || now_ns() - t0 >= slice_ns))
        return 0;
    }
    sc->hf++;
    sc->hi = 0;
  }
  if (sc->om && !sc->any)
    tlc_out_puts(o, "# EOF\n");
  if (o->err != 0) {
    fail(v, sc, o->err);
    return 1;
  }
  v->metrics_hint = o->len;
  sc->total = o->len;
  if (sc->any) {
    sc->total += sc->fam.len + (sc->om ? 6 : 0);
    for (size_t i = 0; i < sc->n; i++)
      if (sc->txt[i] != NULL)
        sc->total += sc->txt[i]->len[0] + sc->txt[i]->len[1] + sc->txt[i]->len[2];
  }
  sc->state = ST_DONE;
  if (v->src->stamp == NULL)
    tlc__http_metrics_cache_free(v); /* nothing to reuse: no memory kept */
  return 1;
}

int tlc__http_scrape_step(tlc__http_view_t *v, tlc__http_scrape_t *sc, uint64_t slice_ns,
                          size_t slice_bytes) {
  uint64_t t0 = now_ns();
  size_t bytes = 0;
  if (sc->state == ST_READ) {
    int rc = step_targets(v, sc, t0, slice_ns, slice_bytes, &bytes);
    if (rc != 2)
      return rc;
  }
  if (sc->state == ST_HEAD)
    return step_head(v, sc, t0, slice_ns, slice_bytes, bytes);
  return 1;
}

int tlc__http_scrape_error(const tlc__http_scrape_t *sc) {
  return sc->state == ST_FAILED ? sc->err : 0;
}

size_t tlc__http_scrape_len(const tlc__http_scrape_t *sc) {
  return sc->state == ST_DONE ? sc->total : 0;
}

void tlc__http_scrape_figures(const tlc__http_scrape_t *sc, size_t *targets, size_t *rendered,
                              size_t *rendered_bytes) {
  *targets = sc->n;
  *rendered = sc->nrendered;
  *rendered_bytes = sc->rendered;
}

/* Segment g of the answer (0 the head, then per area family its header and its targets' lines,
 * then "# EOF" in OpenMetrics), *len bytes; NULL past the end. */
static const char *segment_of(const tlc__http_scrape_t *sc, size_t g, size_t *len) {
  size_t per = sc->n + 1, k, j, off = 0;
  const tblob_t *t;
  if (g == 0) {
    *len = sc->head.len;
    return sc->head.buf;
  }
  if (!sc->any)
    return NULL;
  g--;
  if (g == 3 * per && sc->om) {
    *len = 6;
    return "# EOF\n";
  }
  if (g >= 3 * per)
    return NULL;
  k = g / per;
  j = g % per;
  if (j == 0) {
    *len = sc->famo[k + 1] - sc->famo[k];
    return sc->fam.buf + sc->famo[k];
  }
  if ((t = sc->txt[j - 1]) == NULL) {
    *len = 0;
    return "";
  }
  for (size_t q = 0; q < k; q++)
    off += t->len[q];
  *len = t->len[k];
  return t->b + off;
}

size_t tlc__http_scrape_read(tlc__http_scrape_t *sc, void *dst, size_t cap) {
  size_t got = 0, len;
  const char *p;
  if (sc->state != ST_DONE)
    return 0;
  while (got < cap && (p = segment_of(sc, sc->seg, &len)) != NULL) {
    size_t k = len - sc->soff < cap - got ? len - sc->soff : cap - got;
    if (k > 0)
      memcpy((char *)dst + got, p + sc->soff, k);
    got += k;
    sc->soff += k;
    if (sc->soff == len) {
      sc->seg++;
      sc->soff = 0;
    }
  }
  return got;
}

int tlc__http_metrics(tlc__http_view_t *v, int om, tlc_out_t *o) {
  tlc__http_scrape_t *sc;
  size_t cap = o->max > o->len ? o->max - o->len : 0, n;
  char buf[65536];
  int rc = tlc__http_scrape_start(v, om, cap, &sc);
  if (rc != 0) {
    tlc__http_metrics_cache_free(v);
    return rc;
  }
  while (!tlc__http_scrape_step(v, sc, UINT64_MAX, SIZE_MAX))
    ;
  if ((rc = tlc__http_scrape_error(sc)) == 0) {
    while ((n = tlc__http_scrape_read(sc, buf, sizeof(buf))) > 0)
      tlc_out_write(o, buf, n);
    rc = o->err;
  }
  tlc__http_scrape_free(sc);
  return rc;
}

int tlc__http_scrape_om(const tlc__http_scrape_t *sc) {
  return sc->om;
}
