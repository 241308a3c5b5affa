/* xml.c - XML export (see xml.h; element names: docs/xml-format.md).
 *
 *   <?xml version="1.0" encoding="UTF-8"?>
 *   <ProfilerExport version="1" generator="tlcap">
 *     <Info totalTime= firstTime= lastTime= format= target= contextArea=><Counters .../></Info>
 *     <Mapping><Contexts><Context handle= name=/>..</Contexts><Area handle= class= ../>..</Mapping>
 *     <Statistics>
 *       <ContextStatistics context= kind= index= handle=><Code ..><Net ../>..</Code>..</..>
 *       <DataStatistics><Data ..><Period ../></Data><State ..><Net ../></State></DataStatistics>
 *     </Statistics>
 *     <Timeline><Event handle= type= core= value= time= context= thread=/>..</Timeline>
 *   </ProfilerExport>
 *
 * Same content and number rules as Text1 (text1.c): handles 8 uppercase hex digits, values
 * unpadded hex (8 digits in the timeline), times decimal ns; an attribute that does not apply
 * is absent. Cost O(rows + mapping + events); code rows are bucketed per context with one
 * counting sort, like the Text1 writer. No allocation besides that bucket index.
 */
#include "formats/xml.h"

#include "base/alloc.h"
#include "base/err.h"
#include "formats/bin1x.h"
#include "formats/json.h"
#include "formats/text1.h"

#include <stdio.h>
#include <string.h>

void tlc_xml_opts_default(tlc_xml_opts_t *o) {
  memset(o, 0, sizeof(*o));
  o->indent = 1;
  o->timeline = TLC_XML_TL_INLINE;
  o->bin_version = TLC_FMT_BIN11;
}

void tlc_xml_attr_text(tlc_out_t *o, const char *str) {
  const unsigned char *s = (const unsigned char *)str;
  while (*s) {
    size_t n;
    switch (*s) {
    case '&':
      tlc_out_puts(o, "&amp;");
      s++;
      continue;
    case '<':
      tlc_out_puts(o, "&lt;");
      s++;
      continue;
    case '>':
      tlc_out_puts(o, "&gt;");
      s++;
      continue;
    case '"':
      tlc_out_puts(o, "&quot;");
      s++;
      continue;
    case '\t':
      tlc_out_puts(o, "&#9;");
      s++;
      continue;
    case '\n':
      tlc_out_puts(o, "&#10;");
      s++;
      continue;
    case '\r':
      tlc_out_puts(o, "&#13;");
      s++;
      continue;
    default:
      break;
    }
    if (*s < 0x20 || (n = tlc_utf8_len(s)) == 0) {
      tlc_out_puts(o, "&#xFFFD;");
      s++;
      continue;
    }
    tlc_out_write(o, s, n);
    s += n;
  }
}

typedef struct xw {
  tlc_out_t *o;
  int indent;
  int depth;
} xw_t;

static void nl(xw_t *w) {
  int i;
  if (!w->indent)
    return;
  tlc_out_putc(w->o, '\n');
  for (i = 0; i < w->depth; i++)
    tlc_out_puts(w->o, "  ");
}

/* <name  ...  (attributes follow with a_* then open_end or empty_end) */
static void open_tag(xw_t *w, const char *name) {
  nl(w);
  tlc_out_putc(w->o, '<');
  tlc_out_puts(w->o, name);
}

static void open_end(xw_t *w) {
  tlc_out_putc(w->o, '>');
  w->depth++;
}

static void empty_end(xw_t *w) {
  tlc_out_puts(w->o, "/>");
}

static void close_tag(xw_t *w, const char *name) {
  w->depth--;
  nl(w);
  tlc_out_puts(w->o, "</");
  tlc_out_puts(w->o, name);
  tlc_out_putc(w->o, '>');
}

static void a_name(xw_t *w, const char *k) {
  tlc_out_putc(w->o, ' ');
  tlc_out_puts(w->o, k);
  tlc_out_puts(w->o, "=\"");
}

static void a_str(xw_t *w, const char *k, const char *v) {
  if (v == NULL)
    return;
  a_name(w, k);
  tlc_xml_attr_text(w->o, v);
  tlc_out_putc(w->o, '"');
}

static void a_i64(xw_t *w, const char *k, int64_t v) {
  a_name(w, k);
  tlc_out_i64(w->o, v);
  tlc_out_putc(w->o, '"');
}

static void a_u64(xw_t *w, const char *k, uint64_t v) {
  a_name(w, k);
  tlc_out_u64(w->o, v);
  tlc_out_putc(w->o, '"');
}

static void a_hex(xw_t *w, const char *k, uint64_t v, unsigned width) {
  a_name(w, k);
  tlc_out_hex(w->o, v, width);
  tlc_out_putc(w->o, '"');
}

static void a_ctxhex(xw_t *w, const char *k, uint64_t v) {
  a_name(w, k);
  tlc_out_puts(w->o, "0x");
  tlc_out_hex(w->o, v, 0);
  tlc_out_putc(w->o, '"');
}

static const char *const kind_elem[TLC_NKINDS] = { "Net", "Gross", "Call", "Period", "Outside" };

static void dist(xw_t *w, unsigned k, const tlc_dist_t *d, int has_total, int64_t total) {
  char buf[64];
  static const char *const qk[TLC_NQUANT] = { "p50", "p90", "p99", "p999" };
  int i;
  open_tag(w, kind_elem[k]);
  if (has_total)
    a_i64(w, "total", total);
  a_u64(w, "n", d->n);
  a_i64(w, "sum", d->sum);
  if (d->n > 0) {
    a_i64(w, "min", d->min);
    a_i64(w, "max", d->max);
    a_i64(w, "avg", tlc_dist_avg(d));
  }
  a_name(w, "sumsq");
  tlc_out_u128(w->o, d->sumsq_hi, d->sumsq_lo);
  tlc_out_putc(w->o, '"');
  snprintf(buf, sizeof(buf), "%.3f", tlc_dist_stddev(d));
  a_str(w, "stddev", buf);
  if (d->n > 0 && d->has_q)
    for (i = 0; i < TLC_NQUANT; i++)
      a_i64(w, qk[i], d->q[i]);
  empty_end(w);
}

static void windows(xw_t *w, const tlc_table_t *t, const tlc_stat_t *r) {
  uint32_t i;
  unsigned k;
  for (i = 0; i < r->nwin && i < TLC_MAX_WINDOWS; i++) {
    const tlc_wstat_t *ws = &r->win[i];
    open_tag(w, "Window");
    a_i64(w, "ns", i < t->nwindows ? t->window_ns[i] : 0);
    a_u64(w, "count", ws->count);
    open_end(w);
    for (k = 0; k < TLC_NKINDS; k++) {
      if (!tlc_stat_kind_applies(r, k))
        continue;
      open_tag(w, kind_elem[k]);
      a_u64(w, "n", ws->k[k].n);
      a_i64(w, "sum", ws->k[k].sum);
      if (ws->k[k].n > 0) {
        a_i64(w, "min", ws->k[k].min);
        a_i64(w, "max", ws->k[k].max);
        a_i64(w, "avg", ws->k[k].sum / (int64_t)ws->k[k].n);
      }
      empty_end(w);
    }
    close_tag(w, "Window");
  }
}

/* Children of a row (distributions, windows) and the closing tag; or an empty element. */
static void row_body(xw_t *w, const tlc_table_t *t, const tlc_stat_t *r, const char *elem) {
  unsigned k;
  int any = r->nwin > 0;
  for (k = 0; k < TLC_NKINDS; k++)
    any |= tlc_stat_kind_applies(r, k);
  if (!any) {
    empty_end(w);
    return;
  }
  open_end(w);
  for (k = 0; k < TLC_NKINDS; k++)
    if (tlc_stat_kind_applies(r, k))
      dist(w, k, &r->dist[k], k != TLC_PERIOD, r->total[k]);
  windows(w, t, r);
  close_tag(w, elem);
}

static void write_info(xw_t *w, const tlc_xml_opts_t *opts, const tlc_table_t *t) {
  const tlc_counters_t *c = &t->counters;
  open_tag(w, "Info");
  a_i64(w, "totalTime", tlc_table_total_time(t));
  if (c->events) {
    a_i64(w, "firstTime", t->first_time);
    a_i64(w, "lastTime", t->last_time);
  }
  if (t->format != TLC_FMT_NONE)
    a_str(w, "format",
          t->format == TLC_FMT_BIN10   ? "bin10"
          : t->format == TLC_FMT_BIN11 ? "bin11"
                                       : "evlog");
  a_str(w, "target", opts->target);
  if (t->has_context_area)
    a_hex(w, "contextArea", t->context_area, 8);
  open_end(w);
  open_tag(w, "Counters");
  a_u64(w, "events", c->events);
  a_u64(w, "anomalies", c->anomalies);
  a_u64(w, "droppedAreaLimit", c->dropped_area_limit);
  a_u64(w, "gaps", c->gaps);
  a_u64(w, "bytes", c->bytes);
  a_u64(w, "records", c->records);
  a_u64(w, "bytesSkipped", c->bytes_skipped);
  a_u64(w, "resyncs", c->resyncs);
  a_u64(w, "recordsInvalid", c->records_invalid);
  a_u64(w, "truncated", c->truncated);
  a_u64(w, "overflowItems", c->overflow_items);
  empty_end(w);
  close_tag(w, "Info");
}

static const char *class_of(uint32_t handle) {
  unsigned a = tlc_handle_area(handle);
  return a <= TLC_AREA_LINE ? "Functions" : a <= TLC_AREA_VARSTATE ? "Data" : "AUX";
}

static void write_mapping(xw_t *w, const tlc_table_t *t, const tlc_mapping_t *m) {
  size_t i;
  char buf[64];
  open_tag(w, "Mapping");
  open_end(w);
  open_tag(w, "Contexts");
  if (t->ncontexts == 0) {
    empty_end(w);
  } else {
    open_end(w);
    for (i = 0; i < t->ncontexts; i++) {
      open_tag(w, "Context");
      a_ctxhex(w, "handle", tlc_ctx_handle(&t->contexts[i]));
      a_str(w, "name", tlc_mapping_ctx_display(m, t, (uint32_t)i, buf, sizeof(buf)));
      empty_end(w);
    }
    close_tag(w, "Contexts");
  }
  /* the mapping's entries, then observed areas it does not list */
  for (i = 0; m != NULL && i < m->nareas; i++) {
    const tlc_map_area_t *a = &m->areas[i];
    open_tag(w, "Area");
    a_hex(w, "handle", a->handle, 8);
    a_str(w, "class", class_of(a->handle));
    a_str(w, "name", a->name);
    if (a->parent != TLC_NO_HANDLE)
      a_hex(w, "parent", a->parent, 8);
    if (a->state_handle != TLC_NO_HANDLE)
      a_hex(w, "state", a->state_handle, 8);
    if (a->has_value)
      a_hex(w, "value", a->value, 0);
    if (a->value_type[0])
      a_str(w, "valueType", a->value_type);
    if (a->unit[0])
      a_str(w, "unit", a->unit);
    if (a->file[0])
      a_str(w, "file", a->file);
    if (a->path[0])
      a_str(w, "path", a->path);
    empty_end(w);
  }
  for (i = 0; i < t->nrows; i++) {
    const tlc_stat_t *r = &t->rows[i];
    if (!tlc_mapping_row_unlisted(m, t, i))
      continue;
    open_tag(w, "Area");
    a_hex(w, "handle", r->handle, 8);
    a_str(w, "class", class_of(r->handle));
    if (r->kind == TLC_ROW_STATE)
      a_hex(w, "value", r->state, 0);
    empty_end(w);
  }
  close_tag(w, "Mapping");
}

static const char *name_of(const tlc_mapping_t *m, const tlc_stat_t *r) {
  const tlc_map_area_t *ma = tlc_mapping_row_entry(m, r);
  return ma != NULL && ma->name[0] ? ma->name : NULL;
}

static void code_row(xw_t *w, const tlc_table_t *t, const tlc_mapping_t *m, const tlc_stat_t *r) {
  const tlc_map_area_t *ma = m ? tlc_mapping_find(m, r->handle) : NULL;
  open_tag(w, "Code");
  a_hex(w, "handle", r->handle, 8);
  a_str(w, "name", name_of(m, r));
  if (tlc_handle_area(r->handle) == TLC_AREA_LINE && ma != NULL && ma->has_value)
    a_hex(w, "value", ma->value, 0);
  a_u64(w, "count", r->count);
  a_u64(w, "anomalies", r->anomalies);
  row_body(w, t, r, "Code");
}

static int write_statistics(xw_t *w, const tlc_table_t *t, const tlc_mapping_t *m) {
  size_t nctx = t->ncontexts, i, b, *start, *order;
  char buf[64];
  int any_data = 0;
  static const char *const kind_names[3] = { "core", "task", "thread" };
  if (tlc_table_by_context(t, &start, &order) < 0)
    return TLC_ENOMEM;
  for (i = 0; i < t->nrows; i++)
    any_data |= t->rows[i].kind != TLC_ROW_CODE;
  open_tag(w, "Statistics");
  open_end(w);
  for (b = 0; b <= nctx; b++) {
    if (b == nctx && start[nctx + 1] == start[nctx])
      break; /* no Neutral rows */
    open_tag(w, "ContextStatistics");
    if (b < nctx) {
      const tlc_ctx_t *x = &t->contexts[b];
      a_str(w, "context", tlc_mapping_ctx_display(m, t, (uint32_t)b, buf, sizeof(buf)));
      a_u64(w, "index", b);
      a_str(w, "kind", x->kind < 3 ? kind_names[x->kind] : "core");
      a_ctxhex(w, "handle", tlc_ctx_handle(x));
    } else {
      a_str(w, "context", "Neutral");
      a_str(w, "kind", "neutral");
    }
    if (start[b + 1] == start[b]) {
      empty_end(w);
      continue;
    }
    open_end(w);
    for (i = start[b]; i < start[b + 1]; i++)
      code_row(w, t, m, &t->rows[order[i]]);
    close_tag(w, "ContextStatistics");
  }
  if (any_data) {
    open_tag(w, "DataStatistics");
    open_end(w);
    for (i = 0; i < t->nrows; i++) {
      const tlc_stat_t *r = &t->rows[i];
      const char *elem = r->kind == TLC_ROW_STATE ? "State" : "Data";
      if (r->kind == TLC_ROW_CODE)
        continue;
      open_tag(w, elem);
      a_hex(w, "handle", r->handle, 8);
      if (r->kind == TLC_ROW_STATE)
        a_hex(w, "value", r->state, 0);
      a_str(w, "name", name_of(m, r));
      a_u64(w, "count", r->count);
      a_u64(w, "anomalies", r->anomalies);
      if (r->kind == TLC_ROW_DATA && r->has_value) {
        a_hex(w, "value", r->value, 0);
        a_hex(w, "valueMin", r->value_min, 0);
        a_hex(w, "valueMax", r->value_max, 0);
      }
      row_body(w, t, r, elem);
    }
    close_tag(w, "DataStatistics");
  }
  close_tag(w, "Statistics");
  tlc_free(start);
  tlc_free(order);
  return 0;
}

static int write_timeline(xw_t *w, const tlc_xml_opts_t *opts, const tlc_table_t *t,
                          const tlc_mapping_t *m, tlc_timeline_t *tl, tlc_out_t *sidecar) {
  int r, n, k;
  uint64_t events = 0;
  tlc_evctx_t *x = tlc_calloc(1, sizeof(*x));
  char buf[64];
  if (x == NULL)
    return TLC_ENOMEM;
  r = tl->rewind(tl->ud);
  if (opts->timeline == TLC_XML_TL_INLINE) {
    open_tag(w, "Timeline");
    open_end(w);
  }
  while (r == 0) {
    const tlc_event_t *evs;
    n = tl->next(tl->ud, &evs);
    if (n < 0)
      r = n;
    if (n <= 0)
      break;
    for (k = 0; k < n; k++) {
      const tlc_event_t *ev = &evs[k];
      unsigned area = tlc_handle_area(ev->handle);
      if (ev->type > TLC_EV_WRITE)
        continue;
      events++;
      if (opts->timeline == TLC_XML_TL_BINARY) {
        uint8_t rec[TLC_BIN1X_RECORD];
        tlc_event_t e = *ev;
        if (t->format != opts->bin_version)
          e.raw = 0;
        tlc_bin1x_encode(opts->bin_version, &e, rec);
        tlc_out_write(sidecar, rec, sizeof(rec));
        continue;
      }
      open_tag(w, "Event");
      a_hex(w, "handle", ev->handle, 8);
      a_name(w, "type");
      tlc_out_putc(w->o, tlc_ev_char(ev->type));
      tlc_out_putc(w->o, '"');
      if (ev->core == TLC_CORE_UNKNOWN)
        a_str(w, "core", "-1");
      else
        a_u64(w, "core", ev->core);
      if (ev->type == TLC_EV_WRITE || area >= TLC_AREA_VARIABLE)
        a_hex(w, "value", ev->data, 8);
      a_i64(w, "time", ev->time_ns);
      a_str(w, "context", tlc_evctx_name(x, t, m, ev, buf, sizeof(buf)));
      if (ev->evlog != NULL || t->format == TLC_FMT_EVLOG)
        a_hex(w, "thread", ev->thread, 0);
      empty_end(w);
      tlc_evctx_update(x, t, ev);
    }
    if (w->o->err)
      r = w->o->err;
    else if (sidecar != NULL && sidecar->err)
      r = sidecar->err;
  }
  if (opts->timeline == TLC_XML_TL_INLINE) {
    close_tag(w, "Timeline");
  } else {
    open_tag(w, "Timeline");
    a_str(w, "binary", opts->sidecar_name ? opts->sidecar_name : "");
    a_str(w, "binaryVersion", opts->bin_version == TLC_FMT_BIN10 ? "1.0" : "1.1");
    a_u64(w, "events", events);
    empty_end(w);
  }
  tlc_free(x);
  return r;
}

int tlc_xml_write(tlc_out_t *o, const tlc_xml_opts_t *opts, const tlc_table_t *t,
                  const tlc_mapping_t *m, tlc_timeline_t *tl, tlc_out_t *sidecar) {
  xw_t w = { o, opts->indent, 0 };
  int r = 0;
  if (opts->timeline == TLC_XML_TL_BINARY &&
      (sidecar == NULL ||
       (opts->bin_version != TLC_FMT_BIN10 && opts->bin_version != TLC_FMT_BIN11)))
    return TLC_EINVAL;
  tlc_out_puts(o, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
  tlc_out_puts(o, "<ProfilerExport version=\"1\" generator=\"tlcap\">");
  w.depth = 1;
  write_info(&w, opts, t);
  write_mapping(&w, t, m);
  r = write_statistics(&w, t, m);
  if (r == 0 && tl != NULL && opts->timeline != TLC_XML_TL_NONE)
    r = write_timeline(&w, opts, t, m, tl, sidecar);
  w.depth = 0;
  tlc_out_puts(o, w.indent ? "\n</ProfilerExport>\n" : "</ProfilerExport>\n");
  if (r == 0)
    r = o->err;
  return r;
}
