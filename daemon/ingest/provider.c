/* provider.c - the pubsub provider (provider.h) over the target registry.
 *
 * Thin adapters: indexes are registry positions (stable: the registry only grows, except that a
 * full registry puts a new target in an evicted one's place, with a new `gen`), names are the
 * targets' own strings. No allocation, no I/O; everything runs on the loop thread.
 */
#include "ingest/provider.h"

#include "base/err.h"
#include "ingest/target.h"

#include <string.h>

static tlc_target_t *at(void *ud, size_t index) {
  tlc_provider_t *p = ud;
  return index < p->reg->n ? p->reg->v[index] : NULL;
}

static size_t pv_count(void *ud) {
  tlc_provider_t *p = ud;
  return p->reg->n;
}

static int pv_info(void *ud, size_t index, tlc_ps_target_info_t *out) {
  tlc_target_t *t = at(ud, index);
  if (t == NULL)
    return TLC_ERANGE;
  memset(out, 0, sizeof(*out));
  out->name = t->name;
  out->format = t->format;
  out->connected = t->connected;
  out->peer = t->peer;
  tlc_target_counters(t, &out->counters);
  out->connections = t->connections;
  out->reconnects = t->reconnects;
  out->gaps = t->gaps;
  out->decode_errors = t->decode_errors;
  out->last_connect_unix_ms = t->last_connect_unix_ms;
  out->last_disconnect_unix_ms = t->last_disconnect_unix_ms;
  out->memory_bytes = t->mem_bytes;
  out->memory_refused = t->mem_refused;
  {
    tlc_engine_mem_t m;
    tlc_engine_mem(t->pipe.engine, &m);
    out->areas = m.areas;
  }
  out->gen = t->gen;
  out->seq = tlc_engine_seq(t->pipe.engine);
  return 0;
}

static int pv_split(void *ud, size_t index, uint64_t lo, size_t n, uint64_t since, uint64_t *hi) {
  tlc_target_t *t = at(ud, index);
  if (t == NULL)
    return TLC_ERANGE;
  return tlc_engine_handle_split_since(t->pipe.engine, lo, n, since, hi);
}

static int pv_snapshot_part(void *ud, size_t index, tlc_table_t *tab, const tlc_snap_opts_t *so,
                            uint64_t lo, uint64_t hi) {
  tlc_target_t *t = at(ud, index);
  int r;
  if (t == NULL)
    return TLC_ERANGE;
  r = tlc_engine_snapshot_part(t->pipe.engine, tab, so, lo, hi);
  tlc_target_counters(t, &tab->counters);
  return r;
}

static void pv_memory(void *ud, uint64_t *limit, uint64_t *used, uint64_t *refused) {
  tlc_provider_t *p = ud;
  *limit = p->reg->budget.limit;
  *used = p->reg->budget.used;
  *refused = p->reg->budget.refused;
}

static int pv_find(void *ud, const char *name, size_t *index) {
  tlc_provider_t *p = ud;
  for (size_t i = 0; i < p->reg->n; i++) {
    if (strcmp(p->reg->v[i]->name, name) == 0) {
      *index = i;
      return 0;
    }
  }
  return TLC_ERANGE;
}

static int pv_snapshot(void *ud, size_t index, tlc_table_t *tab, const tlc_snap_opts_t *so) {
  tlc_target_t *t = at(ud, index);
  if (t == NULL)
    return TLC_ERANGE;
  return tlc_target_snapshot(t, tab, so);
}

static const tlc_mapping_t *pv_mapping(void *ud, size_t index) {
  tlc_target_t *t = at(ud, index);
  return t != NULL ? tlc_target_names(t) : NULL; /* evlog targets: their items' names */
}

static int pv_rotate(void *ud, size_t index) {
  tlc_provider_t *p = ud;
  tlc_target_t *t = at(ud, index);
  if (t == NULL)
    return TLC_ERANGE;
  if (p->rotate == NULL)
    return TLC_EINVAL;
  return p->rotate(p->rotate_ud, t);
}

static int pv_load_mapping(void *ud, size_t index, const char *buf, size_t len, char *err,
                           size_t errlen) {
  tlc_target_t *t = at(ud, index);
  if (t == NULL)
    return TLC_ERANGE;
  return tlc_target_load_mapping(t, buf, len, err, errlen);
}

void tlc_provider_init(tlc_provider_t *p, struct tlc_targets *r, tlc_provider_rotate_fn rotate,
                       void *rotate_ud) {
  memset(p, 0, sizeof(*p));
  p->reg = r;
  p->rotate = rotate;
  p->rotate_ud = rotate_ud;
  p->ps.count = pv_count;
  p->ps.info = pv_info;
  p->ps.find = pv_find;
  p->ps.memory = pv_memory;
  p->ps.split = pv_split;
  p->ps.snapshot_part = pv_snapshot_part;
  p->ps.snapshot = pv_snapshot;
  p->ps.mapping = pv_mapping;
  p->ps.rotate = pv_rotate;
  p->ps.load_mapping = pv_load_mapping;
  p->ps.ud = p;
}

static int at_split(void *ud, uint64_t lo, size_t n, uint64_t since, uint64_t *hi) {
  const tlc_ps_at_t *at = ud;
  return at->p->split(at->p->ud, at->index, lo, n, since, hi);
}

tlc_cursor_split_fn tlc_ps_cursor_split(const tlc_ps_provider_t *p) {
  return p->split != NULL && p->snapshot_part != NULL ? at_split : NULL;
}

int tlc_ps_cursor_take(const tlc_ps_at_t *at, const tlc_cursor_part_t *part, tlc_table_t *t,
                       tlc_snap_opts_t *so) {
  so->since_seq = part->since;
  if (part->whole)
    return at->p->snapshot(at->p->ud, at->index, t, so);
  return at->p->snapshot_part(at->p->ud, at->index, t, so, part->lo, part->hi);
}
