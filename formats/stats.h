/* stats.h - the statistics of one target as plain data.
 *
 * One model for every consumer: the engine (daemon/engine.h) fills a tlc_table_t as a
 * snapshot; subscribers receive the same rows over protobuf and rebuild a table; every exporter
 * (Text1, XML, JSON, aprof, BR) writes from a table. So `tlcap stats` (live, over protobuf) and
 * `tlcapd replay` (offline) print through the same code.
 *
 * Definitions are those of SPEC section 2. A row is one (area, context) for code areas, one
 * area for data areas, one (area, state value) for state areas. Neutral rows (the merged
 * context, when a table has more than one context) are rows like the others with
 * context == TLC_CTX_NEUTRAL.
 *
 * Pure: no I/O. A table owns its arrays (tlc_malloc'd); not thread-safe.
 */
#ifndef TLC_STATS_H
#define TLC_STATS_H

#include "formats/tlc_event.h"

#include <stddef.h>
#include <stdint.h>

/* Sample kinds. */
enum tlc_kind { TLC_NET = 0, TLC_GROSS, TLC_CALL, TLC_PERIOD, TLC_OUTSIDE, TLC_NKINDS };

/* Quantiles served beside MIN/MAX/AVG: p50, p90, p99, p99.9. */
#define TLC_NQUANT 4
extern const double tlc_quantiles[TLC_NQUANT];

#define TLC_MAX_WINDOWS 4

/* row.kind */
enum tlc_row_kind { TLC_ROW_CODE = 0, TLC_ROW_DATA = 1, TLC_ROW_STATE = 2 };

/* row.context for rows that are not per context (data and state areas) and for Neutral. */
#define TLC_CTX_NONE    0xFFFFFFFFu
#define TLC_CTX_NEUTRAL 0xFFFFFFFEu

/* When the sample of an extreme (MIN or MAX, SPEC 13) was taken: the target times of its first
 * and closing events, the clock epoch it closed in (tlc_counters_t.clock_resets then), and the
 * engine change sequences of those two events (tlc_stat_t.seq's counter), which the daemon
 * resolves to segment offsets as it does for budget violations (daemon/xlocd.c). known == 0:
 * not known (statistics from a version 1 checkpoint, or a merge with such), every other field 0.
 * Of two samples with the same extreme value the earlier one is kept (tlc_at_earlier).
 * wall_ms: the wall clock (Unix ms) of the batch the closing event arrived in, 0 when not known
 * (offline replay, an older checkpoint). seg_first/off_first, seg_last/off_last: the segment
 * sequence and byte offset of the first and of the closing record where the target is stored;
 * seg 0: not known (not stored, not counted, or not yet: a location comes a moment after). */
typedef struct tlc_at {
  int64_t start, end;
  uint64_t seq_start, seq_end;
  uint32_t epoch;
  uint32_t known;
  int64_t wall_ms;
  uint64_t seg_first, off_first, seg_last, off_last;
} tlc_at_t;

/* A distribution of samples of one kind (the samples MIN/MAX/AVG are taken over). */
typedef struct tlc_dist {
  uint64_t n;        /* number of samples */
  int64_t sum;       /* sum of samples, ns */
  int64_t min, max;  /* valid when n > 0 */
  uint64_t sumsq_hi; /* exact sum of squares, 128-bit: hi * 2^64 + lo */
  uint64_t sumsq_lo;
  int64_t q[TLC_NQUANT]; /* quantiles (<= 1% relative error), valid when n > 0 && has_q */
  uint8_t has_q;
  tlc_at_t min_at, max_at; /* when MIN's and MAX's samples were taken (valid when n > 0) */
} tlc_dist_t;

/* A rolling window's view of one row: E events and closed samples within the window. */
typedef struct tlc_wdist {
  uint64_t n;
  int64_t sum, min, max; /* min/max valid when n > 0 */
} tlc_wdist_t;

typedef struct tlc_wstat {
  uint64_t count; /* E events (code), entries (state), writes (data) */
  tlc_wdist_t k[TLC_NKINDS];
} tlc_wstat_t;

typedef struct tlc_stat {
  uint32_t handle;
  uint32_t context;  /* index into tlc_table_t.contexts, TLC_CTX_NEUTRAL or TLC_CTX_NONE */
  uint64_t state;    /* state rows: the state value; 0 otherwise */
  uint8_t kind;      /* enum tlc_row_kind */
  uint8_t has_value; /* data rows: a value has been written */
  uint16_t pad_;
  uint32_t nwin;             /* entries in win[] (0 when windows were not requested) */
  uint64_t count;            /* COUNT: E events (code), entries (state), writes (data) */
  int64_t total[TLC_NKINDS]; /* totals (open parts included); PERIOD's is unused and 0 */
  tlc_dist_t dist[TLC_NKINDS];
  uint64_t anomalies; /* per-row anomaly count (truncations, X without E, negative durations) */
  uint64_t value;     /* data rows: VALUE (last written) */
  uint64_t value_min; /* data rows: smallest value written */
  uint64_t value_max; /* data rows: largest value written */
  uint64_t seq;       /* engine change sequence of the last update (for delta snapshots) */
  tlc_wstat_t win[TLC_MAX_WINDOWS];
} tlc_stat_t;

/* ctx.kind */
enum tlc_ctx_kind {
  TLC_CTXK_CORE = 0,  /* bin1x core (core 0xFF = unknown); with context_area: before any task */
  TLC_CTXK_TASK = 1,  /* context_area value (key) */
  TLC_CTXK_THREAD = 2 /* evlog thread (key) */
};

typedef struct tlc_ctx {
  uint8_t kind; /* enum tlc_ctx_kind */
  uint8_t core; /* TLC_CTXK_CORE: the core, 0xFF unknown */
  uint16_t pad_;
  uint32_t pad2_;
  uint64_t key; /* TLC_CTXK_TASK: the task value; TLC_CTXK_THREAD: the thread id */
} tlc_ctx_t;

/* Target-wide counters (decoder and engine); every one a subscriber can see. */
typedef struct tlc_counters {
  uint64_t events;             /* events processed by the engine */
  uint64_t anomalies;          /* sum of all anomalies */
  uint64_t dropped_area_limit; /* events dropped because the area/context cap was reached */
  uint64_t gaps;               /* gaps (disconnects, resyncs, overflows) the engine closed at */
  uint64_t bytes;              /* decoder: bytes received */
  uint64_t records;            /* decoder: records decoded */
  uint64_t bytes_skipped;
  uint64_t resyncs;
  uint64_t records_invalid;
  uint64_t truncated;
  uint64_t overflow_items; /* evlog: items the writer lost */
  uint64_t clock_resets;   /* clock restarts (engine): also the current clock epoch's number */
} tlc_counters_t;

typedef struct tlc_table {
  tlc_format_t format;
  int64_t first_time;    /* first event time (valid when counters.events > 0) */
  int64_t last_time;     /* latest event time seen: "now" for open parts */
  uint32_t context_area; /* handle, valid when has_context_area */
  uint8_t has_context_area;
  uint32_t nwindows;
  int64_t window_ns[TLC_MAX_WINDOWS];
  tlc_counters_t counters;
  uint64_t seq; /* engine change sequence at snapshot time */
  tlc_ctx_t *contexts;
  size_t ncontexts;
  size_t capcontexts;
  tlc_stat_t *rows;
  size_t nrows;
  size_t caprows;
  size_t maxrows; /* cap on rows (0: no cap beyond memory) */
} tlc_table_t;

/* Initialises an empty table. Safe to fini without any add. */
void tlc_table_init(tlc_table_t *t);
void tlc_table_fini(tlc_table_t *t);
/* Empties rows and contexts, keeping the allocations. */
void tlc_table_clear(tlc_table_t *t);

/* Appends a zeroed row and returns it (valid until the next add), or NULL (TLC_ENOMEM, or the
 * cap maxrows reached). */
tlc_stat_t *tlc_table_add(tlc_table_t *t);
/* Appends a context; returns its index or a negative error. */
int tlc_table_add_ctx(tlc_table_t *t, const tlc_ctx_t *c);

/* Sorts rows by (handle, context with Neutral after the others, state). Exporters expect this. */
void tlc_table_sort(tlc_table_t *t);
/* Binary search in a sorted table; NULL if absent. */
const tlc_stat_t *tlc_table_find(const tlc_table_t *t, uint32_t handle, uint32_t context,
                                 uint64_t state);

/* b - a for event times, saturated at INT64_MAX / INT64_MIN instead of overflowing (the engine's
 * rule: a target may send any int64 time, INT64_MIN and INT64_MAX included). */
int64_t tlc_time_sub(int64_t b, int64_t a);
/* TOTAL_TIME of a table: last_time - first_time saturated (tlc_time_sub), 0 without events. Every
 * exporter's total time comes from here. */
int64_t tlc_table_total_time(const tlc_table_t *t);

/* Dist helpers. AVG = sum / n truncated toward zero (SPEC); stddev is the population sigma from
 * the exact sum of squares (0 when n == 0). */
int64_t tlc_dist_avg(const tlc_dist_t *d);
double tlc_dist_stddev(const tlc_dist_t *d);
/* Adds one sample (no histogram): n, sum, min, max, sum of squares. The sum saturates at
 * INT64_MAX / INT64_MIN, as the engine's sums do. A new MIN or MAX has no time (known = 0). */
void tlc_dist_add(tlc_dist_t *d, int64_t v);
/* tlc_dist_add with the sample's time: it becomes min_at / max_at when v is a new extreme (a
 * sample equal to the extreme keeps the earlier one, which is the one added first). */
void tlc_dist_add_at(tlc_dist_t *d, int64_t v, const tlc_at_t *at);
/* Merges b into a (n, sum, min, max, sumsq; quantiles are not merged: has_q is cleared). The
 * sum saturates, as in tlc_dist_add. An extreme's time comes with its value: the dist whose
 * value wins, on a tie the earlier (tlc_at_earlier). */
void tlc_dist_merge(tlc_dist_t *a, const tlc_dist_t *b);

/* Whether x was taken before y, for two samples of the same extreme value: a known time before
 * an unknown one, then the smaller (epoch, end, seq_end) - the sample that closed first. */
int tlc_at_earlier(const tlc_at_t *x, const tlc_at_t *y);

/* An extreme's time as `tlcap stats --extremes` and `tlcap top` show it: "START..END eEPOCH"
 * (target ns of the sample's first and closing events, the clock epoch), "-" when not known.
 * Returns buf. */
const char *tlc_at_text(const tlc_at_t *a, char *buf, size_t len);

/* Where an extreme's sample is stored, as `tlcap stats --extremes` shows it:
 * "SEG:OFF..SEG:OFF" (segment sequence and byte offset of its first and closing records; "?"
 * for an end not known), "-" when neither is. Returns buf. */
const char *tlc_at_where(const tlc_at_t *a, char *buf, size_t len);

struct tlc_out;
/* `tlcap stats --extremes`: one line per row and sample kind with samples (kinds that apply,
 * tlc_stat_kind_applies), in the table's order: area (handle, and name(ud, r) when name is not
 * NULL and gives one), context (tlc_ctx_name), kind, MAX and when its sample was taken ("max
 * at": first..closing event, target ns, and the clock epoch; "-" when not known), then MIN
 * likewise. Writes to o (base/out.h); returns 0 or o's error. */
int tlc_extremes_write(struct tlc_out *o, const tlc_table_t *t,
                       const char *(*name)(void *ud, const tlc_stat_t *r), void *ud);

/* Code rows grouped by context, for exporters that write one section per context: bucket b
 * (0..ncontexts-1 the contexts, ncontexts Neutral) holds rows order[start[b] .. start[b+1]),
 * in the table's (handle) order. One counting sort, O(rows + contexts). On success the caller
 * owns *start (ncontexts + 2 entries) and *order and frees both with tlc_free. Returns 0 or
 * TLC_ENOMEM. */
int tlc_table_by_context(const tlc_table_t *t, size_t **start, size_t **order);

/* The handle a context is listed under in CONTEXTS: the core index, the task value or the
 * thread id. */
static inline uint64_t tlc_ctx_handle(const tlc_ctx_t *c) {
  return c->kind == TLC_CTXK_CORE ? c->core : c->key;
}

/* Whether sample kind k (enum tlc_kind) applies to the row's area type (SPEC sections 2 and 4):
 * code rows have all five; state rows NET (time in the state) and PERIOD; data rows PERIOD
 * only. Exporters print nothing for a kind that does not apply. */
int tlc_stat_kind_applies(const tlc_stat_t *r, unsigned k);

/* Context names as SPEC section 4 gives them: core<N> / core? , task<HEX>, thread<HEX>
 * (uppercase hex, no 0x, no padding), or "Neutral" for TLC_CTX_NEUTRAL. A mapping's CONTEXTS
 * names take precedence for tasks; that lookup is the exporter's (mapping.h). Writes into buf
 * (NUL-terminated, truncated to len) and returns buf. */
char *tlc_ctx_name(const tlc_table_t *t, uint32_t context, char *buf, size_t len);

#endif
