/* metrics.c - /metrics: Prometheus text format 0.0.4, or OpenMetrics 1.0 (SPEC 9).
 *
 * Families come one after the other with all their samples together (both formats need it),
 * so the targets are read first: per target its info, its storage figures and, when area
 * series are asked for, its code areas' calls and NET figures straight from the engine
 * (tlc_engine_code_net: no snapshot, no table rows), from which the metrics_areas areas with
 * the largest net time are chosen: merged over contexts (Neutral) when the target has several,
 * else those of its one context. Data and state areas have no area series (docs/http.md).
 *
 * The histogram tlcap_area_net_duration_seconds counts the NET samples (closed activations)
 * per bucket of the engine's own histogram (tlc_engine_hist_cum), at edges that are bucket
 * boundaries near 1-2.5-5 steps from 100 ns to 10 s, so each count is exact and adds up across
 * daemons; _count and the +Inf bucket are the number of NET samples, _sum their total.
 * Counters include open activations' time so far (the _total series), the histogram only
 * closed ones.
 *
 * Cost: per target one info call and, with area series, one pass over its engine's rows
 * (O(rows + open activations)) plus one histogram walk per exported area; everything is
 * written into one bounded tlc_out_t, sized from the previous scrape.
 */
#include "http-int.h"

#include "engine.h"
#include "json.h"
#include "mapping.h"
#include "tlc_alloc.h"
#include "tlc_err.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* 1-2.5-5 steps, ns, before rounding to the engine's bucket edges. */
static const int64_t nice_ns[] = { 100,       250,        500,        1000,       2500,
                                   5000,      10000,      25000,      50000,      100000,
                                   250000,    500000,     1000000,    2500000,    5000000,
                                   10000000,  25000000,   50000000,   100000000,  250000000,
                                   500000000, 1000000000, 2500000000, 5000000000, 10000000000 };
#define NEDGES (sizeof(nice_ns) / sizeof(nice_ns[0]))
static int64_t edges[NEDGES];
static int edges_done;

const int64_t *tlc__http_metrics_edges(size_t *n) {
  if (!edges_done) {
    for (size_t i = 0; i < NEDGES; i++)
      edges[i] = tlc_engine_hist_edge(nice_ns[i]);
    edges_done = 1;
  }
  *n = NEDGES;
  return edges;
}

void tlc__http_out_seconds(tlc_out_t *o, int64_t ns) {
  char frac[16];
  int k;
  uint64_t u;
  if (ns < 0) {
    tlc_out_putc(o, '-');
    u = (uint64_t)(-(ns + 1)) + 1u;
  } else {
    u = (uint64_t)ns;
  }
  tlc_out_u64(o, u / 1000000000u);
  u %= 1000000000u;
  if (u == 0)
    return;
  for (k = 8; k >= 0; k--, u /= 10)
    frac[k] = (char)('0' + u % 10);
  for (k = 8; k > 0 && frac[k] == '0'; k--)
    ;
  frac[k + 1] = '\0';
  tlc_out_putc(o, '.');
  tlc_out_puts(o, frac);
}

/* A label value: backslash, double quote and line feed escaped (both formats). */
static void label(tlc_out_t *o, const char *name, const char *v, int first) {
  if (!first)
    tlc_out_putc(o, ',');
  tlc_out_puts(o, name);
  tlc_out_puts(o, "=\"");
  for (; *v; v++) {
    if (*v == '\\')
      tlc_out_puts(o, "\\\\");
    else if (*v == '"')
      tlc_out_puts(o, "\\\"");
    else if (*v == '\n')
      tlc_out_puts(o, "\\n");
    else if ((unsigned char)*v < 0x80)
      tlc_out_putc(o, *v);
    else {
      /* Prometheus refuses invalid UTF-8: such bytes (a mapping's name) become U+FFFD */
      size_t l = tlc_utf8_len((const unsigned char *)v);
      if (l == 0) {
        tlc_out_puts(o, "\xEF\xBF\xBD");
      } else {
        tlc_out_write(o, v, l);
        v += l - 1;
      }
    }
  }
  tlc_out_putc(o, '"');
}

/* An exported area: what its lines need, read while its target's snapshot is at hand. */
typedef struct marea {
  uint64_t count, n;      /* calls; NET samples */
  int64_t net_total, sum; /* net time (open activations included); NET samples' sum */
  int have_hist;          /* cum[] filled */
  uint64_t cum[NEDGES];   /* NET samples <= edge */
  char *lab;              /* its labels, escaped once: target="..",...,handle=".." */
  size_t labn;
} marea_t;

/* Per target: what was read before writing. */
typedef struct mt {
  tlc_ps_target_info_t info;
  char *name; /* copy: info strings live only until the loop returns, ours until the end */
  tlc_http_store_info_t st;
  marea_t *a; /* the exported areas, by net time */
  size_t na;
  uint64_t not_exported;
} mt_t;

/* Family header. OpenMetrics: a counter's family name has no _total. */
static void family(tlc_out_t *o, int om, const char *name, const char *type, const char *help) {
  size_t n = strlen(name);
  int strip = om && strcmp(type, "counter") == 0 && n > 6 && strcmp(name + n - 6, "_total") == 0;
  tlc_out_puts(o, "# HELP ");
  tlc_out_write(o, name, strip ? n - 6 : n);
  tlc_out_putc(o, ' ');
  tlc_out_puts(o, help);
  tlc_out_puts(o, "\n# TYPE ");
  tlc_out_write(o, name, strip ? n - 6 : n);
  tlc_out_putc(o, ' ');
  tlc_out_puts(o, type);
  tlc_out_putc(o, '\n');
}

static void tsample(tlc_out_t *o, const char *name, const char *target, uint64_t v) {
  tlc_out_puts(o, name);
  tlc_out_putc(o, '{');
  label(o, "target", target, 1);
  tlc_out_puts(o, "} ");
  tlc_out_u64(o, v);
  tlc_out_putc(o, '\n');
}

static int cmp_net(const void *a, const void *b) {
  const tlc_engine_code_net_t *x = a, *y = b;
  if (x->net_total != y->net_total)
    return x->net_total > y->net_total ? -1 : 1;
  if (x->handle != y->handle)
    return x->handle < y->handle ? -1 : 1;
  return x->context < y->context ? -1 : x->context > y->context;
}

/* The labels of an area series (without the braces): the mapped name or the handle, the
 * context's name (as exporters give it), the handle. */
static void area_labels(tlc__http_view_t *v, size_t i, tlc_out_t *o, const char *target,
                        const tlc_mapping_t *map, const tlc_engine_code_net_t *a) {
  tlc_stat_t st;
  tlc_table_t one;
  tlc_ctx_t c;
  const tlc_map_area_t *ma;
  char hex[16], cbuf[64];
  const char *ctx = "Neutral";
  static const char digits[] = "0123456789ABCDEF";
  memset(&st, 0, sizeof(st));
  st.handle = a->handle;
  st.kind = TLC_ROW_CODE;
  st.context = a->context;
  ma = tlc_mapping_row_entry(map, &st);
  for (int k = 0; k < 8; k++)
    hex[k] = digits[(a->handle >> (28 - 4 * k)) & 15u];
  hex[8] = '\0';
  if (a->context != TLC_CTX_NEUTRAL) {
    /* a one-context table, for the exporters' naming (mapping's CONTEXTS, core<N>, ...) */
    tlc_table_init(&one);
    if (v->src.context == NULL || v->src.context(v->src.ud, i, a->context, &c) != 0)
      memset(&c, 0, sizeof(c));
    one.contexts = &c;
    one.ncontexts = 1;
    ctx = tlc_mapping_ctx_display(map, &one, 0, cbuf, sizeof(cbuf));
  }
  label(o, "target", target, 1);
  label(o, "area", ma != NULL && ma->name[0] != '\0' ? ma->name : hex, 0);
  label(o, "context", ctx, 0);
  label(o, "handle", hex, 0);
}

/* Reads target i: info, storage, and the areas to export (with their labels and histogram
 * counts), from the engine's code-area figures (no snapshot); `cn` is scratch reused from
 * target to target. */
static int read_target(tlc__http_view_t *v, size_t i, mt_t *m, tlc_engine_code_net_t **cn,
                       size_t *capcn) {
  const tlc_ps_provider_t *pv = v->src.pv;
  const tlc_mapping_t *map;
  size_t nk = 0, r, ne;
  const int64_t *le = tlc__http_metrics_edges(&ne);
  int rc;
  if ((rc = pv->info(pv->ud, i, &m->info)) != 0)
    return rc;
  m->name = tlc_malloc(strlen(m->info.name) + 1);
  if (m->name == NULL)
    return TLC_ENOMEM;
  strcpy(m->name, m->info.name);
  if (v->src.target_store != NULL)
    v->src.target_store(v->src.ud, i, &m->st);
  if (v->metrics_areas == 0 || v->src.code_net == NULL)
    return 0;
  map = pv->mapping != NULL ? pv->mapping(pv->ud, i) : NULL;
  if ((rc = v->src.code_net(v->src.ud, i, cn, &nk, capcn)) != 0)
    return rc;
  qsort(*cn, nk, sizeof(**cn), cmp_net);
  m->na = nk < v->metrics_areas ? nk : v->metrics_areas;
  m->not_exported = nk - m->na;
  if (m->na == 0)
    return 0;
  if ((m->a = tlc_calloc(m->na, sizeof(*m->a))) == NULL)
    return TLC_ENOMEM;
  for (r = 0; r < m->na; r++) {
    const tlc_engine_code_net_t *s = &(*cn)[r];
    marea_t *x = &m->a[r];
    tlc_out_t lo;
    x->count = s->count;
    x->n = s->n;
    x->net_total = s->net_total;
    x->sum = s->sum;
    x->have_hist = v->src.hist_cum != NULL && v->src.hist_cum(v->src.ud, i, s->handle, s->context,
                                                              TLC_NET, le, ne, x->cum) == 0;
    tlc_out_init(&lo, 4096, NULL, NULL);
    area_labels(v, i, &lo, m->name, map, s);
    if ((x->lab = tlc_out_take(&lo, &x->labn)) == NULL)
      return TLC_ENOMEM; /* labels past 4 KiB (a giant name): the scrape fails, 500 */
  }
  return 0;
}

/* One area line's start: NAME{ labels TAIL (name and tail string literals). */
#define AREA_LINE(name, tail)                                                                      \
  do {                                                                                             \
    tlc_out_write(o, name, sizeof(name) - 1);                                                      \
    tlc_out_write(o, m[i].a[j].lab, m[i].a[j].labn);                                               \
    tlc_out_write(o, tail, sizeof(tail) - 1);                                                      \
  } while (0)

int tlc__http_metrics(tlc__http_view_t *v, int om, tlc_out_t *o) {
  const tlc_ps_provider_t *pv = v->src.pv;
  size_t n = pv->count(pv->ud), i, j, ne;
  const int64_t *le = tlc__http_metrics_edges(&ne);
  tlc_http_daemon_info_t di;
  mt_t *m = tlc_calloc(n ? n : 1, sizeof(*m));
  tlc_engine_code_net_t *cn = NULL;
  size_t capcn = 0;
  int rc = 0;
  if (m == NULL)
    return TLC_ENOMEM;
  for (i = 0; i < n && rc == 0; i++)
    rc = read_target(v, i, &m[i], &cn, &capcn);
  tlc_free(cn);
  if (rc != 0)
    goto out;
  memset(&di, 0, sizeof(di));
  if (v->src.daemon_info != NULL)
    v->src.daemon_info(v->src.ud, &di);

  family(o, om, "tlcap_build_info", "gauge", "tlcapd build (always 1; the version is a label).");
  tlc_out_puts(o, "tlcap_build_info{");
  label(o, "version", v->version != NULL ? v->version : "", 1);
  tlc_out_puts(o, "} 1\n");
  family(o, om, "tlcap_uptime_seconds", "gauge", "Seconds since tlcapd started.");
  tlc_out_puts(o, "tlcap_uptime_seconds ");
  {
    struct timespec ts;
    int64_t up;
    clock_gettime(CLOCK_REALTIME, &ts);
    up = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000 - v->start_unix_ms;
    tlc__http_out_seconds(o, (up < 0 ? 0 : up) * 1000000);
  }
  tlc_out_putc(o, '\n');
  family(o, om, "tlcap_subscribers", "gauge", "Protobuf subscribers connected.");
  tlc_out_printf(o, "tlcap_subscribers %zu\n", di.subscribers);
  family(o, om, "tlcap_http_websockets", "gauge", "Live dashboard WebSockets open.");
  tlc_out_printf(o, "tlcap_http_websockets %zu\n", v->websockets);
  if (v->st != NULL) {
    family(o, om, "tlcap_http_connections", "gauge", "HTTP and WebSocket connections open.");
    tlc_out_printf(o, "tlcap_http_connections %zu\n", v->st->connections);
    family(o, om, "tlcap_http_requests_total", "counter", "HTTP requests answered.");
    tlc_out_printf(o, "tlcap_http_requests_total %" PRIu64 "\n", v->st->requests);
    family(o, om, "tlcap_http_errors_total", "counter",
           "HTTP requests answered with a 4xx or 5xx status.");
    tlc_out_printf(o, "tlcap_http_errors_total %" PRIu64 "\n", v->st->errors);
    family(o, om, "tlcap_http_refused_total", "counter",
           "Connections refused at accept: http_max_connections reached.");
    tlc_out_printf(o, "tlcap_http_refused_total %" PRIu64 "\n", v->st->refused);
    family(o, om, "tlcap_http_busy_total", "counter",
           "Responses refused with 503: over the response size or in-flight byte limits.");
    tlc_out_printf(o, "tlcap_http_busy_total %" PRIu64 "\n", v->st->busy);
    family(o, om, "tlcap_http_ws_coalesced_total", "counter",
           "Live updates merged into a later one for a slow dashboard.");
    tlc_out_printf(o, "tlcap_http_ws_coalesced_total %" PRIu64 "\n", v->st->ws_coalesced);
    family(o, om, "tlcap_http_auth_failed_total", "counter",
           "Requests and live sockets refused for a missing or wrong token.");
    tlc_out_printf(o, "tlcap_http_auth_failed_total %" PRIu64 "\n", v->st->auth_failed);
    family(o, om, "tlcap_http_ws_bad_total", "counter",
           "Live WebSockets closed for a bad message or frame.");
    tlc_out_printf(o, "tlcap_http_ws_bad_total %" PRIu64 "\n", v->st->ws_bad);
  }
  if (di.has_store) {
    family(o, om, "tlcap_store_queue_bytes", "gauge",
           "Bytes waiting for the storage writer (store queue depth).");
    tlc_out_printf(o, "tlcap_store_queue_bytes %" PRIu64 "\n", di.store_queue_bytes);
    family(o, om, "tlcap_store_dropped_records_total", "counter",
           "Records storage dropped (queue full, disk full, I/O error).");
    tlc_out_printf(o, "tlcap_store_dropped_records_total %" PRIu64 "\n", di.store_dropped);
    family(o, om, "tlcap_store_stored_bytes", "gauge", "Bytes of sealed segments on disk.");
    tlc_out_printf(o, "tlcap_store_stored_bytes %" PRIu64 "\n", di.stored_bytes);
    family(o, om, "tlcap_store_disk_full", "gauge", "1 while writing is paused by a full disk.");
    tlc_out_printf(o, "tlcap_store_disk_full %d\n", di.disk_full ? 1 : 0);
  }
  if (di.has_disk_free) {
    family(o, om, "tlcap_store_disk_free_bytes", "gauge",
           "Free bytes of the state directory's file system.");
    tlc_out_printf(o, "tlcap_store_disk_free_bytes %" PRIu64 "\n", di.disk_free_bytes);
  }
  if (pv->nats != NULL) { /* the NATS publisher (--nats, docs/fleet.md) */
    tlc_ps_nats_t ns;
    memset(&ns, 0, sizeof(ns));
    if (pv->nats(pv->nats_ud, &ns) == 0) {
      family(o, om, "tlcap_nats_connected", "gauge", "1 while connected to the NATS server.");
      tlc_out_printf(o, "tlcap_nats_connected %d\n", ns.connected ? 1 : 0);
      family(o, om, "tlcap_nats_published_total", "counter", "Messages handed to the NATS client.");
      tlc_out_printf(o, "tlcap_nats_published_total %" PRIu64 "\n", ns.published);
      family(o, om, "tlcap_nats_dropped_total", "counter",
             "Messages not published: client buffer full, no connection, or over max_payload.");
      tlc_out_printf(o, "tlcap_nats_dropped_total %" PRIu64 "\n", ns.dropped);
      family(o, om, "tlcap_nats_reconnects_total", "counter",
             "Connections to the NATS server after the first.");
      tlc_out_printf(o, "tlcap_nats_reconnects_total %" PRIu64 "\n", ns.reconnects);
      family(o, om, "tlcap_nats_publish_cpu_seconds_total", "counter",
             "CPU time of the loop thread spent publishing statistics to NATS.");
      tlc_out_printf(o, "tlcap_nats_publish_cpu_seconds_total %.9f\n",
                     (double)ns.publish_cpu_ns / 1e9);
    }
  }

  if (n > 0) {
    family(o, om, "tlcap_target_connected", "gauge", "1 while the target is connected.");
    for (i = 0; i < n; i++)
      tsample(o, "tlcap_target_connected", m[i].name, m[i].info.connected ? 1 : 0);
#define TFAM(nm, help, field)                                                                      \
  family(o, om, nm, "counter", help);                                                              \
  for (i = 0; i < n; i++)                                                                          \
    tsample(o, nm, m[i].name, m[i].info.field);
    TFAM("tlcap_target_events_total", "Events processed by the statistics engine.", counters.events)
    TFAM("tlcap_target_bytes_total", "Bytes received from the target.", counters.bytes)
    TFAM("tlcap_target_gaps_total",
         "Gaps in the statistics (disconnects, resyncs, evlog overflows).", counters.gaps)
    TFAM("tlcap_target_resyncs_total", "Times the decoder lost and regained sync.",
         counters.resyncs)
    TFAM("tlcap_target_bytes_skipped_total", "Bytes skipped by resyncs.", counters.bytes_skipped)
    TFAM("tlcap_target_records_invalid_total", "Records the decoder found invalid.",
         counters.records_invalid)
    TFAM("tlcap_target_anomalies_total", "Anomalies counted by the statistics engine.",
         counters.anomalies)
    TFAM("tlcap_target_dropped_area_limit_total",
         "Events dropped because the area, context or memory limit was reached.",
         counters.dropped_area_limit)
#undef TFAM
    for (i = 0; i < n && !m[i].st.has; i++)
      ;
    if (i < n) {
      family(o, om, "tlcap_store_bytes_written_total", "counter",
             "Bytes of the target written to its segments.");
      for (i = 0; i < n; i++)
        if (m[i].st.has)
          tsample(o, "tlcap_store_bytes_written_total", m[i].name, m[i].st.bytes_written);
    }
    family(o, om, "tlcap_target_areas_not_exported", "gauge",
           "Code areas without area series (beyond metrics_areas, by net time).");
    for (i = 0; i < n; i++)
      tsample(o, "tlcap_target_areas_not_exported", m[i].name, m[i].not_exported);
  }

  for (i = 0; i < n && m[i].na == 0; i++)
    ;
  if (i < n) {
    /* ~30 lines per area: each line is copies of strings made once (labels, edges) */
    char les[NEDGES][32];
    size_t lel[NEDGES];
    for (j = 0; j < ne; j++) {
      tlc_out_t lo;
      char *b;
      tlc_out_init(&lo, sizeof(les[0]) - 1, NULL, NULL);
      tlc_out_puts(&lo, ",le=\"");
      tlc__http_out_seconds(&lo, le[j]);
      if (om && le[j] % 1000000000 == 0)
        tlc_out_puts(&lo, ".0");
      tlc_out_puts(&lo, "\"} ");
      b = tlc_out_take(&lo, &lel[j]);
      if (b == NULL) {
        rc = TLC_ENOMEM;
        goto out;
      }
      memcpy(les[j], b, lel[j] + 1);
      tlc_free(b);
    }
    family(o, om, "tlcap_area_calls_total", "counter", "Calls (E events) of the area.");
    for (i = 0; i < n; i++)
      for (j = 0; j < m[i].na; j++) {
        AREA_LINE("tlcap_area_calls_total{", "} ");
        tlc_out_u64(o, m[i].a[j].count);
        tlc_out_putc(o, '\n');
      }
    family(o, om, "tlcap_area_net_seconds_total", "counter",
           "Net (running) time of the area, open activations included.");
    for (i = 0; i < n; i++)
      for (j = 0; j < m[i].na; j++) {
        AREA_LINE("tlcap_area_net_seconds_total{", "} ");
        tlc__http_out_seconds(o, m[i].a[j].net_total);
        tlc_out_putc(o, '\n');
      }
    family(o, om, "tlcap_area_net_duration_seconds", "histogram",
           "Net time of closed activations (engine histogram edges: exact counts).");
    for (i = 0; i < n; i++)
      for (j = 0; j < m[i].na; j++) {
        const marea_t *x = &m[i].a[j];
        uint64_t nn = x->n;
        size_t k;
        for (k = 0; x->have_hist && k < ne; k++) {
          tlc_out_write(o, "tlcap_area_net_duration_seconds_bucket{", 39);
          tlc_out_write(o, x->lab, x->labn);
          tlc_out_write(o, les[k], lel[k]);
          tlc_out_u64(o, x->cum[k] <= nn ? x->cum[k] : nn);
          tlc_out_putc(o, '\n');
        }
        AREA_LINE("tlcap_area_net_duration_seconds_bucket{", ",le=\"+Inf\"} ");
        tlc_out_u64(o, nn);
        tlc_out_putc(o, '\n');
        AREA_LINE("tlcap_area_net_duration_seconds_sum{", "} ");
        tlc__http_out_seconds(o, x->sum);
        tlc_out_putc(o, '\n');
        AREA_LINE("tlcap_area_net_duration_seconds_count{", "} ");
        tlc_out_u64(o, nn);
        tlc_out_putc(o, '\n');
      }
  }
  if (om)
    tlc_out_puts(o, "# EOF\n");
  rc = o->err;
out:
  for (i = 0; i < n; i++) {
    for (j = 0; m[i].a != NULL && j < m[i].na; j++)
      tlc_free(m[i].a[j].lab);
    tlc_free(m[i].a);
    tlc_free(m[i].name);
  }
  tlc_free(m);
  return rc;
}
