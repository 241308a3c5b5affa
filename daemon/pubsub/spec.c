/* spec.c - subscription specs: parsed from a Subscribe, matched against target names, turned
 * into engine snapshot options and a row filter. Pure data; calls no other file of pubsub. Loop
 * thread.
 */
#include "pubsub/pubsub-int.h"

#include "base/alloc.h"
#include "base/err.h"
#include "proto/convert.h"
#include "proto/frame.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <fnmatch.h>

void tlc__ps_spec_free(spec_t *s) {
  size_t i;
  if (s == NULL)
    return;
  for (i = 0; i < s->ntargets; i++)
    tlc_free(s->targets[i]);
  for (i = 0; i < s->nareas; i++)
    tlc_free(s->areas[i]);
  tlc_free(s->targets);
  tlc_free(s->areas);
  tlc_free(s->handles);
  tlc_free(s->columns);
  tlc_free(s->key);
  tlc_free(s);
}

static int cmp_u32(const void *a, const void *b) {
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return x < y ? -1 : x > y;
}

static int copy_patterns(char ***dst, size_t *n, char **src, size_t nsrc) {
  size_t i;
  *n = 0;
  *dst = NULL;
  if (nsrc == 0)
    return 0;
  *dst = tlc_calloc(nsrc, sizeof(char *));
  if (*dst == NULL)
    return TLC_ENOMEM;
  for (i = 0; i < nsrc; i++) {
    (*dst)[i] = tlc_strndup(src[i], strlen(src[i]));
    if ((*dst)[i] == NULL)
      return TLC_ENOMEM;
    (*n)++;
  }
  return 0;
}

/* Validates and copies a Subscribe's spec. Returns 0, TLC_EINVAL (with why) or TLC_ENOMEM. */
int tlc__ps_spec_new(tlc_pubsub_t *ps, const Tlcap__Subscribe *r, spec_t **out, const char **why) {
  spec_t *s;
  size_t i, keylen;
  char *k;
  *out = NULL;
  if (r->n_targets > MAX_PATTERNS || r->n_areas > MAX_PATTERNS) {
    *why = "too many patterns (max 64 per list)";
    return TLC_EINVAL;
  }
  if (r->n_handles > MAX_HANDLES) {
    *why = "too many handles (max 4096)";
    return TLC_EINVAL;
  }
  if (r->n_columns > MAX_COLUMNS_REQ) {
    *why = "too many columns (max 1024)";
    return TLC_EINVAL;
  }
  /* "\x1fH%08X" per handle, "\x1fC%u" per column (< TLC_COL_MAX_COLUMNS of them); the header
   * takes < 64 */
  keylen = 64 + r->n_handles * 10 + TLC_COL_MAX_COLUMNS * 8;
  for (i = 0; i < r->n_targets; i++) {
    size_t l = strlen(r->targets[i]);
    if (l > MAX_PATTERN_LEN) {
      *why = "pattern longer than 256 bytes";
      return TLC_EINVAL;
    }
    keylen += l + 24; /* "\x1fT<len>:" + pattern */
  }
  for (i = 0; i < r->n_areas; i++) {
    size_t l = strlen(r->areas[i]);
    if (l > MAX_PATTERN_LEN) {
      *why = "pattern longer than 256 bytes";
      return TLC_EINVAL;
    }
    keylen += l + 24; /* "\x1fA<len>:" + pattern */
  }
  s = tlc_calloc(1, sizeof(*s));
  if (s == NULL)
    return TLC_ENOMEM;
  s->interval_ms = r->interval_ms;
  if (s->interval_ms < ps->o.min_interval_ms)
    s->interval_ms = ps->o.min_interval_ms;
  if (s->interval_ms > ps->o.max_interval_ms)
    s->interval_ms = ps->o.max_interval_ms;
  s->windows = r->windows ? 1 : 0;
  s->quantiles = r->quantiles ? 1 : 0;
  s->neutral = r->neutral || r->neutral_only ? 1 : 0;
  s->neutral_only = r->neutral_only ? 1 : 0;
  s->names = r->names ? 1 : 0;
  if (r->n_columns > 0) {
    uint32_t cols[TLC_COL_MAX_COLUMNS];
    int w, q;
    s->ncolumns = tlc_cols_normalise(r->columns, r->n_columns, cols, &w, &q);
    s->windows = (uint8_t)w;
    s->quantiles = (uint8_t)q;
    s->kinds = (uint8_t)(TLC_SNAP_KINDS_SET | tlc_cols_kinds(cols, s->ncolumns));
    s->columns = tlc_malloc(s->ncolumns * sizeof(uint32_t));
    if (s->columns == NULL)
      goto fail_nomem;
    memcpy(s->columns, cols, s->ncolumns * sizeof(uint32_t));
  }
  if (copy_patterns(&s->targets, &s->ntargets, r->targets, r->n_targets) < 0 ||
      copy_patterns(&s->areas, &s->nareas, r->areas, r->n_areas) < 0)
    goto fail_nomem;
  if (r->n_handles > 0) {
    s->handles = tlc_malloc(r->n_handles * sizeof(uint32_t));
    if (s->handles == NULL)
      goto fail_nomem;
    memcpy(s->handles, r->handles, r->n_handles * sizeof(uint32_t));
    qsort(s->handles, r->n_handles, sizeof(uint32_t), cmp_u32);
    s->nhandles = r->n_handles;
  }
  s->key = k = tlc_malloc(keylen);
  if (k == NULL)
    goto fail_nomem;
  k += sprintf(k, "%u/%u%u%u%u%u", s->interval_ms, s->windows, s->quantiles, s->neutral, s->names,
               s->neutral_only);
  for (i = 0; i < s->ncolumns; i++)
    k += sprintf(k,
                 "\x1f"
                 "C%u",
                 s->columns[i]);
  /* Length-prefixed, so that no pattern's content can make two different specs collide. */
  for (i = 0; i < s->ntargets; i++)
    k += sprintf(k, "\x1fT%zu:%s", strlen(s->targets[i]), s->targets[i]);
  for (i = 0; i < s->nareas; i++)
    k += sprintf(k,
                 "\x1f"
                 "A%zu:%s",
                 strlen(s->areas[i]), s->areas[i]);
  for (i = 0; i < s->nhandles; i++)
    k += sprintf(k, "\x1fH%08X", s->handles[i]);
  *out = s;
  return 0;
fail_nomem:
  tlc__ps_spec_free(s);
  return TLC_ENOMEM;
}

int tlc__ps_spec_target(const spec_t *s, const char *name) {
  size_t i;
  if (s->ntargets == 0)
    return 1;
  for (i = 0; i < s->ntargets; i++)
    if (fnmatch(s->targets[i], name, 0) == 0)
      return 1;
  return 0;
}

int tlc__ps_keep_row(void *ud, const tlc_stat_t *r) {
  keep_ctx_t *k = ud;
  const spec_t *s = k->spec;
  char hex[9];
  size_t i;
  if (s->nareas == 0 && s->nhandles == 0)
    return 1;
  if (s->nhandles > 0 && bsearch(&r->handle, s->handles, s->nhandles, 4, cmp_u32) != NULL)
    return 1;
  if (k->nnamed > 0 && bsearch(&r->handle, k->named, k->nnamed, 4, cmp_u32) != NULL)
    return 1;
  if (s->nareas > 0) {
    snprintf(hex, sizeof(hex), "%08X", r->handle);
    for (i = 0; i < s->nareas; i++)
      if (fnmatch(s->areas[i], hex, 0) == 0)
        return 1;
  }
  return 0;
}

int tlc__ps_keep_init(keep_ctx_t *k, const spec_t *s, const tlc_mapping_t *m) {
  size_t i, j;
  k->spec = s;
  k->named = NULL;
  k->nnamed = 0;
  if (s->nareas == 0 || m == NULL || m->nareas == 0)
    return 0;
  k->named = tlc_malloc(m->nareas * sizeof(uint32_t));
  if (k->named == NULL)
    return TLC_ENOMEM;
  for (i = 0; i < m->nareas; i++) {
    const char *nm = m->areas[i].name != NULL ? m->areas[i].name : "";
    for (j = 0; j < s->nareas; j++)
      if (fnmatch(s->areas[j], nm, 0) == 0) {
        k->named[k->nnamed++] = m->areas[i].handle;
        break;
      }
  }
  qsort(k->named, k->nnamed, sizeof(uint32_t), cmp_u32);
  return 0;
}

/* The engine snapshot options of a subscription spec: rows changed after `since` (0: all). */
void tlc__ps_snap_opts(const spec_t *spec, uint64_t since, tlc_snap_opts_t *so) {
  memset(so, 0, sizeof(*so));
  so->since_seq = since;
  so->windows = spec->windows;
  so->neutral = spec->neutral;
  so->quantiles = spec->quantiles;
  so->neutral_only = spec->neutral_only;
  so->kinds = spec->kinds;
}
