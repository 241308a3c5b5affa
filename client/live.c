/* live.c - the live view that `tlcap watch` and `tlcap top` share: per target, the statistics
 * table rebuilt from the daemon's snapshots (a full one, then deltas) with its area names, the
 * stream and sequence of the last snapshot, and the sequence gaps seen (a delta whose base is not
 * the last snapshot applied).
 *
 * At most 4096 targets, so a pattern subscription cannot grow the view without bound; a target's
 * table is as large as the daemon's, whose caps bound it. It neither draws nor prints: watch.c
 * prints JSON lines, top.c the terminal view. Main thread only.
 */
#include "client/cli.h"

#include "base/alloc.h"
#include "proto/convert.h"

#include <string.h>

static tlc_cli_view_target_t *view_get(tlc_cli_view_t *w, const char *name) {
  size_t i;
  tlc_cli_view_target_t *nv;
  for (i = 0; i < w->n; i++)
    if (strcmp(w->v[i].name, name) == 0)
      return &w->v[i];
  if (w->n >= 4096)
    return NULL;
  nv = tlc_realloc(w->v, (w->n + 1) * sizeof(*nv));
  if (nv == NULL)
    return NULL;
  w->v = nv;
  nv = &w->v[w->n];
  memset(nv, 0, sizeof(*nv));
  nv->name = tlc_strndup(name, strlen(name));
  if (nv->name == NULL)
    return NULL;
  tlc_table_init(&nv->t);
  tlc_mapping_init(&nv->map);
  w->n++;
  return nv;
}

void tlc_cli_view_fini(tlc_cli_view_t *w) {
  size_t i;
  for (i = 0; i < w->n; i++) {
    tlc_free(w->v[i].name);
    tlc_table_fini(&w->v[i].t);
    tlc_mapping_fini(&w->v[i].map);
  }
  tlc_free(w->v);
  memset(w, 0, sizeof(*w));
}

void tlc_cli_view_event(tlc_cli_view_t *w, const Tlcap__TargetEvent *te) {
  if (te == NULL || te->target == NULL || te->kind != TLCAP__TARGET_EVENT_KIND__TE_FORGOTTEN)
    return;
  for (size_t i = 0; i < w->n; i++)
    if (strcmp(w->v[i].name, te->target) == 0) {
      tlc_free(w->v[i].name);
      tlc_table_fini(&w->v[i].t);
      tlc_mapping_fini(&w->v[i].map);
      memmove(&w->v[i], &w->v[i + 1], (w->n - i - 1) * sizeof(*w->v));
      w->n--;
      return;
    }
}

/* Applies a Snapshot; returns the target or NULL. Detects gaps (a delta whose base is not the
 * stream's last seq) and counts them. */
tlc_cli_view_target_t *tlc_cli_view_apply(tlc_cli_view_t *w, const Tlcap__Snapshot *s) {
  tlc_cli_view_target_t *vt = view_get(w, s->target);
  if (vt == NULL)
    return NULL;
  if (!s->full && (!vt->have || s->stream != vt->stream || s->base_seq != vt->seq))
    vt->gaps_seen++;
  if (tlc_pb_snapshot_apply(&vt->t, s) < 0)
    return NULL;
  if (s->full && s->mapping != NULL) {
    tlc_mapping_fini(&vt->map);
    tlc_mapping_init(&vt->map);
    vt->have_map = tlc_pb_mapping_get(&vt->map, s->mapping) == 0;
  }
  vt->have = 1;
  vt->stream = s->stream;
  vt->seq = s->seq;
  vt->connected = s->connected;
  w->instance_id = s->instance_id;
  return vt;
}
