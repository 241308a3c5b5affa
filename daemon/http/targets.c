/* targets.c - what the JSON documents of the HTTP port say about a target, written once for
 * both: /api/v1/targets (route.c) and the live overview of the dashboard (live.c).
 *
 * Both read a target the same way (the view's info and the storage figures) and open its
 * object with the same fields (name, format, state, peer, subscribers, rollups: the rebuild of
 * its rollups from its segments, running or ended, or null without rollups); their storage objects
 * hold the same five figures under the names each document has always had, and disk_bytes and
 * disk_segments alike (docs/http.md). Pure: reads the daemon only through the read side
 * (view/view.h), on the loop thread.
 */
#include "http/http-int.h"

#include "formats/dec.h"
#include "formats/json.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

int tlc__http_target_read(tlc__http_view_t *v, size_t i, tlc_view_target_t *ti,
                          tlc_view_store_t *st) {
  const tlc_view_t *pv = v->src;
  int rc = pv->info(pv->ud, i, ti);
  if (rc != 0)
    return rc;
  memset(st, 0, sizeof(*st));
  if (v->src->target_store != NULL)
    v->src->target_store(v->src->daemon_ud, i, st);
  return 0;
}

void tlc__http_target_head(tlc__http_view_t *v, size_t i, tlc_out_t *o,
                           const tlc_view_target_t *ti) {
  tlc_out_puts(o, "{\"name\": ");
  tlc_json_string(o, ti->name);
  tlc_out_puts(o, ", \"format\": \"");
  tlc_out_puts(o, tlc_format_name(ti->format));
  tlc_out_puts(o, ti->connected ? "\", \"state\": \"connected\", \"peer\": "
                                : "\", \"state\": \"disconnected\", \"peer\": ");
  tlc_json_string(o, ti->peer != NULL ? ti->peer : "");
  tlc_out_puts(o, ", \"subscribers\": ");
  tlc_out_u64(
      o, v->src->target_subscribers != NULL ? v->src->target_subscribers(v->src->daemon_ud, i) : 0);
  tlc__http_target_rollups(v->src, o, ti->name);
}

void tlc__http_target_rollups(const tlc_view_t *pv, tlc_out_t *o, const char *name) {
  static const char *const states[] = { "none", "rebuilding", "done" };
  tlc_view_rebuild_t rb;
  if (pv->rebuild == NULL) {
    tlc_out_puts(o, ", \"rollups\": null");
    return;
  }
  pv->rebuild(pv->rollup_ud, name, &rb);
  tlc_out_puts(o, ", \"rollups\": {\"rebuild\": \"");
  tlc_out_puts(o, rb.state >= 0 && rb.state <= 2 ? states[rb.state] : "none");
  tlc_out_puts(o, "\", \"segments_read\": ");
  tlc_out_u64(o, rb.segments_read);
  tlc_out_puts(o, ", \"segments\": ");
  tlc_out_u64(o, rb.segments);
  tlc_out_puts(o, ", \"samples\": ");
  tlc_out_u64(o, rb.samples);
  tlc_out_puts(o, ", \"done_unix_ms\": ");
  tlc_out_printf(o, "%" PRId64, rb.done_unix_ms);
  tlc_out_putc(o, '}');
}

void tlc__http_target_storage(tlc_out_t *o, const char *key, const tlc_view_store_t *st,
                              const char *const names[5]) {
  const uint64_t val[5] = { st->bytes_written, st->records_written, st->dropped_records,
                            st->segment_seq, st->segment_bytes };
  tlc_out_puts(o, ", \"");
  tlc_out_puts(o, key);
  if (!st->has) {
    tlc_out_puts(o, "\": null");
    return;
  }
  tlc_out_puts(o, "\": {");
  for (int k = 0; k < 5; k++) {
    tlc_out_puts(o, k ? ", \"" : "\"");
    tlc_out_puts(o, names[k]);
    tlc_out_puts(o, "\": ");
    tlc_out_u64(o, val[k]);
  }
  /* the same names in both documents: what is on disk of it, also from before a restart */
  tlc_out_puts(o, ", \"disk_bytes\": ");
  tlc_out_u64(o, st->disk_bytes);
  tlc_out_puts(o, ", \"disk_segments\": ");
  tlc_out_u64(o, st->disk_segments);
  tlc_out_putc(o, '}');
}

void tlc__http_bnames(void *ud, uint32_t handle, uint8_t row_kind, uint64_t state, uint32_t context,
                      char *area, size_t alen, char *ctx, size_t clen) {
  const tlc__http_bnames_t *x = ud;
  const tlc_map_area_t *a;
  const char *n;
  tlc_ctx_t c;
  if (row_kind == TLC_ROW_STATE)
    (void)tlc_mapping_state_display(x->m, handle, state, area, alen);
  else if (x->m != NULL && (a = tlc_mapping_find(x->m, handle)) != NULL && a->name[0] != '\0')
    snprintf(area, alen, "%s", a->name);
  if (context == TLC_CTX_NONE || x->pv->context == NULL ||
      x->pv->context(x->pv->ud, x->idx, context, &c) != 0)
    return; /* "-" */
  if (c.kind == TLC_CTXK_TASK && x->m != NULL && (n = tlc_mapping_ctx_name(x->m, c.key)) != NULL)
    snprintf(ctx, clen, "%s", n);
  else if (c.kind == TLC_CTXK_CORE && c.core == TLC_CORE_UNKNOWN)
    snprintf(ctx, clen, "core?");
  else if (c.kind == TLC_CTXK_CORE)
    snprintf(ctx, clen, "core%u", (unsigned)c.core);
  else
    snprintf(ctx, clen, "%s%llX", c.kind == TLC_CTXK_TASK ? "task" : "thread",
             (unsigned long long)c.key);
}
