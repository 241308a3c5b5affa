/* json.c - JSON export of statistics (see json.h and docs/json-schema.md).
 *
 * Layout (indent shown; `compact` writes the same on one line):
 *   { "schema": "tlcap-stats/1", "target": ..., "format": "bin11", "first_time": ns,
 *     "last_time": ns, "total_time": ns, "context_area": "30000000"|null,
 *     "windows_ns": [..], "seq": n, "counters": {..}, "contexts": [{..}],
 *     "rows": [ { "handle": "00000000", "area": "function", "name": .., "context": "core0",
 *                 "count": n, "anomalies": n, "net": {dist}, "gross": .., "call": ..,
 *                 "period": .., "outside": .., "windows": [..] }, .. ] }
 * A dist is {"total": ns (not for period), "n", "sum", "min", "max", "min_at", "max_at", "avg",
 * "sumsq", "stddev", "p50", "p90", "p99", "p999"}; min/max/avg/quantiles are null without
 * samples; min_at/max_at ({"start_ns", "end_ns", "epoch", "seq_start", "seq_end", "wall_ms"
 * when known, "seg_first", "off_first", "seg_last", "off_last" when stored: when and where the
 * extreme's sample was taken, SPEC 13) are null without samples or when not known. Integers are
 * written exactly (64-bit; sumsq 128-bit as a decimal string, since it exceeds every JSON
 * reader's integers).
 *
 * Cost: O(rows); no allocation. Does not: read JSON back (the tests parse it with python).
 */
#include "formats/json.h"

#include <stdio.h>
#include <string.h>

static const char *const kind_key[TLC_NKINDS] = { "net", "gross", "call", "period", "outside" };
static const char *const area_name[6] = { "function",       "line", "variable",
                                          "variable_state", "aux",  "aux_state" };

typedef tlc_json_w_t jw_t;

static void kv_opt(jw_t *w, const char *k, int has, int64_t v) {
  tlc_json_w_key(w, k);
  if (has)
    tlc_out_i64(w->o, v);
  else
    tlc_out_puts(w->o, "null");
}

/* When an extreme's sample was taken (SPEC 13): null without samples or when not known. */
static void at(jw_t *w, const char *k, int has, const tlc_at_t *a) {
  if (!has || !a->known) {
    tlc_json_w_key(w, k);
    tlc_out_puts(w->o, "null");
    return;
  }
  tlc_json_w_open(w, k, '{');
  tlc_json_w_i64(w, "start_ns", a->start);
  tlc_json_w_i64(w, "end_ns", a->end);
  tlc_json_w_u64(w, "epoch", a->epoch);
  tlc_json_w_u64(w, "seq_start", a->seq_start);
  tlc_json_w_u64(w, "seq_end", a->seq_end);
  if (a->wall_ms != 0)
    tlc_json_w_i64(w, "wall_ms", a->wall_ms);
  if (a->seg_first != 0 || a->seg_last != 0) {
    tlc_json_w_u64(w, "seg_first", a->seg_first);
    tlc_json_w_u64(w, "off_first", a->off_first);
    tlc_json_w_u64(w, "seg_last", a->seg_last);
    tlc_json_w_u64(w, "off_last", a->off_last);
  }
  tlc_json_w_close(w, '}');
}

static void dist(jw_t *w, const char *k, const tlc_dist_t *d, int has_total, int64_t total) {
  char buf[64];
  int i;
  static const char *const qk[TLC_NQUANT] = { "p50", "p90", "p99", "p999" };
  tlc_json_w_open(w, k, '{');
  if (has_total)
    tlc_json_w_i64(w, "total", total);
  tlc_json_w_u64(w, "n", d->n);
  tlc_json_w_i64(w, "sum", d->sum);
  kv_opt(w, "min", d->n > 0, d->min);
  kv_opt(w, "max", d->n > 0, d->max);
  at(w, "min_at", d->n > 0, &d->min_at);
  at(w, "max_at", d->n > 0, &d->max_at);
  kv_opt(w, "avg", d->n > 0, tlc_dist_avg(d));
  tlc_json_w_key(w, "sumsq");
  tlc_out_putc(w->o, '"');
  tlc_out_u128(w->o, d->sumsq_hi, d->sumsq_lo);
  tlc_out_putc(w->o, '"');
  snprintf(buf, sizeof(buf), "%.3f", tlc_dist_stddev(d));
  tlc_json_w_raw(w, "stddev", buf);
  for (i = 0; i < TLC_NQUANT; i++)
    kv_opt(w, qk[i], d->n > 0 && d->has_q, d->q[i]);
  tlc_json_w_close(w, '}');
}

static void row(jw_t *w, const tlc_table_t *t, const tlc_mapping_t *m, const tlc_stat_t *r) {
  unsigned area = tlc_handle_area(r->handle), k, i;
  const tlc_map_area_t *ma = NULL;
  char buf[64];
  ma = tlc_mapping_row_entry(m, r);
  if (ma == NULL && m != NULL && r->kind == TLC_ROW_STATE)
    ma = tlc_mapping_find(m, r->handle);
  tlc_json_w_open(w, NULL, '{');
  tlc_json_w_hex8(w, "handle", r->handle);
  tlc_json_w_str(w, "area", area < 6 ? area_name[area] : "unknown");
  tlc_json_w_str(w, "name", ma ? ma->name : NULL);
  if (r->kind == TLC_ROW_CODE) {
    tlc_json_w_str(w, "context", tlc_mapping_ctx_display(m, t, r->context, buf, sizeof(buf)));
  }
  if (r->kind == TLC_ROW_STATE)
    tlc_json_w_u64(w, "state", r->state);
  tlc_json_w_u64(w, "count", r->count);
  tlc_json_w_u64(w, "anomalies", r->anomalies);
  if (r->kind == TLC_ROW_DATA) {
    /* data values are unsigned 64-bit: written as unsigned, null before the first write */
    tlc_json_w_key(w, "value");
    if (r->has_value)
      tlc_out_u64(w->o, r->value);
    else
      tlc_out_puts(w->o, "null");
    tlc_json_w_key(w, "value_min");
    if (r->has_value)
      tlc_out_u64(w->o, r->value_min);
    else
      tlc_out_puts(w->o, "null");
    tlc_json_w_key(w, "value_max");
    if (r->has_value)
      tlc_out_u64(w->o, r->value_max);
    else
      tlc_out_puts(w->o, "null");
  }
  for (k = 0; k < TLC_NKINDS; k++)
    if (tlc_stat_kind_applies(r, k))
      dist(w, kind_key[k], &r->dist[k], k != TLC_PERIOD, r->total[k]);
  if (r->nwin > 0) {
    tlc_json_w_open(w, "windows", '[');
    for (i = 0; i < r->nwin && i < TLC_MAX_WINDOWS; i++) {
      const tlc_wstat_t *ws = &r->win[i];
      tlc_json_w_open(w, NULL, '{');
      tlc_json_w_i64(w, "window_ns", i < t->nwindows ? t->window_ns[i] : 0);
      tlc_json_w_u64(w, "count", ws->count);
      for (k = 0; k < TLC_NKINDS; k++) {
        if (!tlc_stat_kind_applies(r, k))
          continue;
        tlc_json_w_open(w, kind_key[k], '{');
        tlc_json_w_u64(w, "n", ws->k[k].n);
        tlc_json_w_i64(w, "sum", ws->k[k].sum);
        kv_opt(w, "min", ws->k[k].n > 0, ws->k[k].min);
        kv_opt(w, "max", ws->k[k].n > 0, ws->k[k].max);
        kv_opt(w, "avg", ws->k[k].n > 0, ws->k[k].n ? ws->k[k].sum / (int64_t)ws->k[k].n : 0);
        tlc_json_w_close(w, '}');
      }
      tlc_json_w_close(w, '}');
    }
    tlc_json_w_close(w, ']');
  }
  tlc_json_w_close(w, '}');
}

/* The document up to its rows, as member `k` (NULL: an element, or the document itself). */
static void begin(jw_t *wp, const char *k, const tlc_table_t *t, const tlc_mapping_t *m,
                  const char *target) {
  jw_t w = *wp;
  const tlc_counters_t *c = &t->counters;
  size_t i;
  char buf[64];
  static const char *const ctx_kind[3] = { "core", "task", "thread" };
  tlc_json_w_open(&w, k, '{');
  tlc_json_w_str(&w, "schema", "tlcap-stats/1");
  tlc_json_w_str(&w, "target", target);
  tlc_json_w_str(&w, "format",
                 t->format == TLC_FMT_BIN10   ? "bin10"
                 : t->format == TLC_FMT_BIN11 ? "bin11"
                 : t->format == TLC_FMT_EVLOG ? "evlog"
                                              : NULL);
  kv_opt(&w, "first_time", c->events > 0, t->first_time);
  kv_opt(&w, "last_time", c->events > 0, t->last_time);
  tlc_json_w_i64(&w, "total_time", tlc_table_total_time(t));
  if (t->has_context_area)
    tlc_json_w_hex8(&w, "context_area", t->context_area);
  else
    tlc_json_w_str(&w, "context_area", NULL);
  tlc_json_w_open(&w, "windows_ns", '[');
  for (i = 0; i < t->nwindows && i < TLC_MAX_WINDOWS; i++)
    tlc_json_w_i64(&w, NULL, t->window_ns[i]);
  tlc_json_w_close(&w, ']');
  tlc_json_w_u64(&w, "seq", t->seq);
  tlc_json_w_open(&w, "counters", '{');
  tlc_json_w_u64(&w, "events", c->events);
  tlc_json_w_u64(&w, "anomalies", c->anomalies);
  tlc_json_w_u64(&w, "dropped_area_limit", c->dropped_area_limit);
  tlc_json_w_u64(&w, "gaps", c->gaps);
  tlc_json_w_u64(&w, "bytes", c->bytes);
  tlc_json_w_u64(&w, "records", c->records);
  tlc_json_w_u64(&w, "bytes_skipped", c->bytes_skipped);
  tlc_json_w_u64(&w, "resyncs", c->resyncs);
  tlc_json_w_u64(&w, "records_invalid", c->records_invalid);
  tlc_json_w_u64(&w, "truncated", c->truncated);
  tlc_json_w_u64(&w, "overflow_items", c->overflow_items);
  tlc_json_w_close(&w, '}');
  tlc_json_w_open(&w, "contexts", '[');
  for (i = 0; i < t->ncontexts; i++) {
    const tlc_ctx_t *x = &t->contexts[i];
    tlc_json_w_open(&w, NULL, '{');
    tlc_json_w_u64(&w, "index", i);
    tlc_json_w_str(&w, "name", tlc_mapping_ctx_display(m, t, (uint32_t)i, buf, sizeof(buf)));
    tlc_json_w_str(&w, "kind", x->kind < 3 ? ctx_kind[x->kind] : "unknown");
    if (x->kind == TLC_CTXK_CORE)
      kv_opt(&w, "core", x->core != TLC_CORE_UNKNOWN, x->core);
    else
      tlc_json_w_u64(&w, "key", x->key);
    tlc_json_w_close(&w, '}');
  }
  tlc_json_w_close(&w, ']');
  tlc_json_w_open(&w, "rows", '[');
  *wp = w;
}

int tlc_json_begin(tlc_json_part_t *st, tlc_out_t *o, const tlc_table_t *t, const tlc_mapping_t *m,
                   const char *target, int compact) {
  tlc_json_w_init(st, o, compact);
  begin(st, NULL, t, m, target);
  return o->err;
}

int tlc_json_begin_member(tlc_json_w_t *w, tlc_out_t *o, const char *key, const tlc_table_t *t,
                          const tlc_mapping_t *m, const char *target) {
  w->o = o;
  begin(w, key, t, m, target);
  return o->err;
}

int tlc_json_rows(tlc_json_part_t *st, tlc_out_t *o, const tlc_table_t *t, const tlc_mapping_t *m) {
  size_t i;
  st->o = o;
  for (i = 0; i < t->nrows; i++)
    row(st, t, m, &t->rows[i]);
  return o->err;
}

int tlc_json_end_member(tlc_json_w_t *w, tlc_out_t *o) {
  w->o = o;
  tlc_json_w_close(w, ']');
  tlc_json_w_close(w, '}');
  return o->err;
}

int tlc_json_end(tlc_json_part_t *st, tlc_out_t *o) {
  tlc_json_end_member(st, o);
  tlc_out_putc(o, '\n');
  return o->err;
}

int tlc_json_write(tlc_out_t *o, const tlc_table_t *t, const tlc_mapping_t *m, const char *target,
                   int compact) {
  tlc_json_part_t st;
  tlc_json_begin(&st, o, t, m, target, compact);
  tlc_json_rows(&st, o, t, m);
  return tlc_json_end(&st, o);
}
