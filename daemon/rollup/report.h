/* report.h - trend and diff (SPEC 14) from rollup query results: the figures per step or per
 * area, and their JSON documents (docs/rollups.md), built on the rollup worker.
 *
 * A trend step or a diff side of an area merges the area's cells of one sample kind over its
 * contexts and states (or the one context asked for). Diff: per area present in either range,
 * both sides' count, mean, sigma (population, from the exact sums of squares), p50, p99, max;
 * factor = mean_b / mean_a; Welch's t of the means (formats/rollup.h); significant when
 * |t| >= TLC_DIFF_T (or the area has samples on one side only); the p99 change is beyond the
 * histograms' error when the two p99 differ by more than 2% (1% each). Sorted by significance:
 * one-sided areas, then |t| descending, then the area handle.
 *
 * Any thread; plain data.
 */
#ifndef TLC_ROLLUP_REPORT_H
#define TLC_ROLLUP_REPORT_H

#include "base/out.h"
#include "rollup/rollup.h"

#define TLC_DIFF_T 4.0

typedef struct tlc_rollup_fig {
  uint64_t n;
  double mean, sigma;
  int64_t min, max, p50, p99;
} tlc_rollup_fig_t;

typedef struct tlc_rollup_diffrow {
  uint32_t handle;
  tlc_rollup_fig_t a, b;
  double factor;     /* mean_b / mean_a (0 when a side is empty or mean_a is 0) */
  double p99_factor; /* p99_b / p99_a, the same */
  double t;          /* Welch's t (+-INFINITY: zero variances, different means) */
  int one_sided;     /* samples on one side only */
  int significant, p99_beyond_error;
} tlc_rollup_diffrow_t;

/* The merged cell of `handle` and `kind` in blk (all contexts and states, or only `context`
 * when has_context) into *out (initialised here; fini with tlc_rollup_blk_fini on a block
 * holding it, or free out->bins); out->violations counts the area's budget violations whatever
 * statistic they broke (of those contexts). 0 or TLC_ENOMEM. */
int tlc_rollup_area_cell(const tlc_rollup_blk_t *blk, uint32_t handle, uint8_t kind,
                         int has_context, uint32_t context, tlc_rollup_cell_t *out);
void tlc_rollup_fig(const tlc_rollup_cell_t *c, tlc_rollup_fig_t *f);

/* The rows of a diff of a against b (one merged step each, NULL: empty), sorted. *rows is
 * tlc_malloc'd. 0 or TLC_ENOMEM. */
int tlc_rollup_diff(const tlc_rollup_blk_t *a, const tlc_rollup_blk_t *b, uint8_t kind,
                    int has_context, uint32_t context, tlc_rollup_diffrow_t **rows, size_t *n);

/* Kind names: net, gross, call, period, outside. -1 when unknown. */
int tlc_rollup_kind_parse(const char *s);
const char *tlc_rollup_kind_name(unsigned k);

/* The names a document shows (SPEC 10: the target's mapping, or its evlog items' names), copied
 * on the loop when the query is made so that the worker never reads a mapping the loop may
 * replace: area names by handle, and the name of the query's context. */
typedef struct tlc_rollup_name {
  uint32_t handle;
  char *name; /* owned, never "" */
} tlc_rollup_name_t;

typedef struct tlc_rollup_names {
  tlc_rollup_name_t *v; /* sorted by handle after tlc_rollup_names_sort */
  size_t n, cap;
  char *context_name; /* the query's context (NULL: no context asked for, or no name) */
} tlc_rollup_names_t;

/* Adds handle's name (copied; "" or NULL adds nothing). 0 or TLC_ENOMEM. */
int tlc_rollup_names_add(tlc_rollup_names_t *nm, uint32_t handle, const char *name);
/* Sorts by handle, keeping the first name added for a handle. */
void tlc_rollup_names_sort(tlc_rollup_names_t *nm);
/* The name of handle, or NULL (nm may be NULL). */
const char *tlc_rollup_names_area(const tlc_rollup_names_t *nm, uint32_t handle);
/* Frees what nm holds; safe on zeroed memory. */
void tlc_rollup_names_fini(tlc_rollup_names_t *nm);

/* The documents. q: the trend's query (its target, area, context, step); res its result; names
 * (may be NULL) the areas' and the context's names ("area_name", "context_name"). */
int tlc_rollup_trend_json(tlc_out_t *o, const tlc_rollup_q_t *q, const tlc_rollup_res_t *res,
                          uint8_t kind, const tlc_rollup_names_t *names);
int tlc_rollup_diff_json(tlc_out_t *o, const tlc_rollup_q_t *qa, const tlc_rollup_res_t *ra,
                         const tlc_rollup_q_t *qb, const tlc_rollup_res_t *rb, uint8_t kind,
                         const tlc_rollup_names_t *names);

/* The same as tables for people (`tlcap trend`, `tlcap diff` without --json). */
int tlc_rollup_trend_text(tlc_out_t *o, const tlc_rollup_q_t *q, const tlc_rollup_res_t *res,
                          uint8_t kind, const tlc_rollup_names_t *names);
int tlc_rollup_diff_text(tlc_out_t *o, const tlc_rollup_q_t *qa, const tlc_rollup_res_t *ra,
                         const tlc_rollup_q_t *qb, const tlc_rollup_res_t *rb, uint8_t kind,
                         const tlc_rollup_names_t *names);

#endif
