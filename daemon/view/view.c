/* view.c - the read side (view.h) over the target registry.
 *
 * Thin adapters: indexes are registry positions (stable: the registry only grows, except that a
 * full registry puts a new target in an evicted one's place, with a new `gen`), names are the
 * targets' own strings, statistics are the targets' engines' (snapshots, parts, and the
 * per-area reads of /metrics). No allocation, no I/O; everything runs on the loop thread.
 * The hooks of the daemon's modules (storage, subscribers, NATS) are not here: the daemon sets
 * them.
 */
#include "view/view.h"

#include "base/err.h"
#include "ingest/target.h"

#include <stdio.h>
#include <string.h>

static tlc_target_t *at(void *ud, size_t index) {
  tlc_view_reg_t *p = ud;
  return index < p->targets->n ? p->targets->v[index] : NULL;
}

static size_t pv_count(void *ud) {
  tlc_view_reg_t *p = ud;
  return p->targets->n;
}

static int pv_info(void *ud, size_t index, tlc_view_target_t *out) {
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
  out->last_time = tlc_engine_last_time(t->pipe.engine);
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
  tlc_view_reg_t *p = ud;
  *limit = p->targets->budget.limit;
  *used = p->targets->budget.used;
  *refused = p->targets->budget.refused;
}

static int pv_find(void *ud, const char *name, size_t *index) {
  tlc_view_reg_t *p = ud;
  for (size_t i = 0; i < p->targets->n; i++) {
    if (strcmp(p->targets->v[i]->name, name) == 0) {
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
  tlc_view_reg_t *p = ud;
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

static int pv_reset(void *ud, size_t index) {
  tlc_target_t *t = at(ud, index);
  if (t == NULL)
    return TLC_ERANGE;
  return tlc_target_reset(t);
}

static int pv_forget(void *ud, size_t index, char *err, size_t errlen) {
  tlc_view_reg_t *p = ud;
  tlc_target_t *t = at(ud, index);
  int r;
  if (t == NULL)
    return TLC_ERANGE;
  r = tlc_targets_forget(p->targets, t);
  if (r == TLC_EINVAL)
    snprintf(err, errlen, "%s",
             t->connected || t->source != NULL
                 ? "connected: only a disconnected target can be forgotten"
                 : "its configured source keeps it (remove the source from the configuration "
                   "and reload first)");
  else if (r == TLC_EAGAIN)
    snprintf(err, errlen, "a checkpoint holds it: try again");
  return r;
}

/* ---- the per-area reads of /metrics (engine/snapshot.c) ---- */

static int pv_hist_cum(void *ud, size_t index, uint32_t handle, uint32_t context, unsigned kind,
                       const int64_t *le, size_t nle, uint64_t *cum) {
  tlc_target_t *t = at(ud, index);
  if (t == NULL)
    return TLC_ERANGE;
  return tlc_engine_hist_cum(t->pipe.engine, handle, context, kind, le, nle, cum);
}

static int pv_code_hist(void *ud, size_t index, const tlc_engine_code_net_t *x, const int64_t *le,
                        size_t nle, uint64_t *cum) {
  tlc_target_t *t = at(ud, index);
  if (t == NULL)
    return TLC_ERANGE;
  return tlc_engine_code_hist(t->pipe.engine, x, TLC_NET, le, nle, cum);
}

static int pv_code_hists(void *ud, size_t index, const tlc_engine_code_net_t *xs, size_t nx,
                         const int64_t *le, size_t nle, uint64_t *cum, int *ok) {
  tlc_target_t *t = at(ud, index);
  if (t == NULL)
    return TLC_ERANGE;
  return tlc_engine_code_hists(t->pipe.engine, xs, nx, TLC_NET, le, nle, cum, ok);
}

static int pv_code_net(void *ud, size_t index, tlc_engine_code_net_t **out, size_t *n,
                       size_t *cap) {
  tlc_target_t *t = at(ud, index);
  if (t == NULL)
    return TLC_ERANGE;
  return tlc_engine_code_net(t->pipe.engine, out, n, cap);
}

static int pv_context(void *ud, size_t index, uint32_t context, tlc_ctx_t *c) {
  tlc_target_t *t = at(ud, index);
  if (t == NULL)
    return TLC_ERANGE;
  return tlc_engine_context(t->pipe.engine, context, c);
}

static int pv_stamp(void *ud, size_t index, uint64_t st[3]) {
  tlc_target_t *t = at(ud, index);
  const tlc_mapping_t *names;
  if (t == NULL)
    return TLC_ERANGE;
  names = tlc_target_names(t);
  st[0] = tlc_engine_epoch(t->pipe.engine);
  st[1] = tlc_engine_seq(t->pipe.engine);
  st[2] = names != NULL ? names->nareas : 0;
  return 0;
}

void tlc_view_reg_init(tlc_view_reg_t *p, struct tlc_targets *targets, tlc_view_rotate_fn rotate,
                       void *rotate_ud) {
  memset(p, 0, sizeof(*p));
  p->targets = targets;
  p->rotate = rotate;
  p->rotate_ud = rotate_ud;
  p->view.count = pv_count;
  p->view.info = pv_info;
  p->view.find = pv_find;
  p->view.memory = pv_memory;
  p->view.split = pv_split;
  p->view.snapshot_part = pv_snapshot_part;
  p->view.snapshot = pv_snapshot;
  p->view.mapping = pv_mapping;
  p->view.rotate = pv_rotate;
  p->view.load_mapping = pv_load_mapping;
  p->view.hist_cum = pv_hist_cum;
  p->view.code_hist = pv_code_hist;
  p->view.code_hists = pv_code_hists;
  p->view.code_net = pv_code_net;
  p->view.context = pv_context;
  p->view.stamp = pv_stamp;
  p->view.reset = pv_reset;
  p->view.forget = pv_forget;
  p->view.ud = p;
}

static int at_split(void *ud, uint64_t lo, size_t n, uint64_t since, uint64_t *hi) {
  const tlc_view_at_t *at = ud;
  return at->p->split(at->p->ud, at->index, lo, n, since, hi);
}

tlc_cursor_split_fn tlc_view_cursor_split(const tlc_view_t *v) {
  return v->split != NULL && v->snapshot_part != NULL ? at_split : NULL;
}

int tlc_view_cursor_take(const tlc_view_at_t *at, const tlc_cursor_part_t *part, tlc_table_t *t,
                         tlc_snap_opts_t *so) {
  so->since_seq = part->since;
  if (part->whole)
    return at->p->snapshot(at->p->ud, at->index, t, so);
  return at->p->snapshot_part(at->p->ud, at->index, t, so, part->lo, part->hi);
}
