/* spec.h - subscription specs (spec.c): what a Subscribe asks for, parsed and
 * canonicalised (its key identifies a feed), matched against target names, and the row filter
 * and engine snapshot options it gives. Pure data, loop thread; a spec is immutable once built
 * and owned by the feed or the subscription that holds it.
 */
#ifndef TLC_PUBSUB_SPEC_H
#define TLC_PUBSUB_SPEC_H

#include "pubsub/msg.h"

#include <stddef.h>
#include <stdint.h>

/* A subscription's spec: what identifies a feed. */
typedef struct spec {
  char **targets;
  size_t ntargets;
  char **areas;
  size_t nareas;
  uint32_t *handles; /* sorted */
  size_t nhandles;
  uint32_t *columns; /* columnar rows: normalised (key columns first); NULL: Row messages */
  size_t ncolumns;
  uint32_t interval_ms;
  uint8_t windows, quantiles, neutral, names, neutral_only;
  uint8_t kinds; /* tlc_snap_opts_t.kinds: the sample kinds the columns show (0: all) */
  char *key;     /* canonical text of everything above */
} spec_t;

/* Row filter for one build: the handles the spec selects (explicit ones, and those whose
 * mapping name matches an area pattern), plus the hex-handle match done per row. */
typedef struct keep_ctx {
  const spec_t *spec;
  uint32_t *named; /* sorted handles whose name matched */
  size_t nnamed;
} keep_ctx_t;

/* Builds a spec from a Subscribe: 0 and *out, or a negative error with *why. */
int tlc__ps_spec_new(tlc_pubsub_t *ps, const Tlcap__Subscribe *r, spec_t **out, const char **why);
void tlc__ps_spec_free(spec_t *s);
int tlc__ps_spec_target(const spec_t *s, const char *name);
int tlc__ps_keep_row(void *ud, const tlc_stat_t *r);
int tlc__ps_keep_init(keep_ctx_t *k, const spec_t *s, const tlc_mapping_t *m);
/* The engine snapshot options of a subscription spec: rows changed after `since` (0: all). */
void tlc__ps_snap_opts(const spec_t *spec, uint64_t since, tlc_snap_opts_t *so);

#endif
