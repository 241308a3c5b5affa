/* families.c - /metrics' daemon-wide families, written before the per-target ones (metrics.c):
 * the build and uptime, the process (node_exporter's process collector's names), the memory
 * budget, the HTTP port, storage, the NATS publisher, the Alertmanager client and the timing
 * budgets. Plain counters and gauges of a struct are rows of a table (scalar_t), written by
 * one loop; families with labels are written by hand.
 */
#include "http/http-int.h"

#include "base/clock.h"
#include "base/proc.h"
#include "budget/budget.h"
#include "formats/mapping.h"

#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

/* One unlabelled family whose value is a field of a struct. */
enum scalar_kind {
  S_U64,  /* uint64_t */
  S_SIZE, /* size_t */
  S_NS,   /* uint64_t nanoseconds, written as seconds */
  S_MS    /* uint64_t milliseconds, written as seconds */
};
typedef struct scalar {
  const char *name, *type, *help;
  size_t off;
  enum scalar_kind kind;
} scalar_t;
#define NSCALARS(t) (sizeof(t) / sizeof((t)[0]))

/* The families of t[0..n), their values read from `base`. */
static void scalars(tlc_out_t *o, int om, const void *base, const scalar_t *t, size_t n) {
  for (size_t i = 0; i < n; i++) {
    const char *p = (const char *)base + t[i].off;
    uint64_t u;
    tlc__http_family(o, om, t[i].name, t[i].type, t[i].help);
    tlc_out_puts(o, t[i].name);
    tlc_out_putc(o, ' ');
    if (t[i].kind == S_SIZE) {
      size_t z;
      memcpy(&z, p, sizeof(z));
      u = z;
    } else {
      memcpy(&u, p, sizeof(u));
    }
    if (t[i].kind == S_NS)
      tlc__http_out_seconds(o, (int64_t)(u & INT64_MAX));
    else if (t[i].kind == S_MS)
      tlc__http_out_seconds(
          o, (int64_t)((u > INT64_MAX / 1000000 ? INT64_MAX / 1000000 : u) * 1000000));
    else
      tlc_out_u64(o, u);
    tlc_out_putc(o, '\n');
  }
}

/* Budget violations handed to each sink that publishes them (the subscriber server, NATS),
 * and those each held back over its rate limit (docs/budgets.md "Served"). */
static void head_violation_events(const tlc_view_t *pv, const tlc_view_daemon_t *di, int om,
                                  tlc_out_t *o) {
  tlc_view_nats_t ns;
  int nats = 0, f;
  memset(&ns, 0, sizeof(ns));
  if (pv->nats != NULL && pv->nats(pv->nats_ud, &ns) == 0)
    nats = 1;
  if (!di->has_pubsub && !nats)
    return;
  for (f = 0; f < 2; f++) {
    const char *name =
        f == 0 ? "tlcap_violation_events_sent_total" : "tlcap_violation_events_suppressed_total";
    tlc__http_family(o, om, name, "counter",
                     f == 0 ? "Budget violation events sent, by sink."
                            : "Budget violation events not sent (over the sink's rate limit).");
    if (di->has_pubsub)
      tlc_out_printf(o, "%s{sink=\"subscribers\"} %" PRIu64 "\n", name,
                     f == 0 ? di->violations_sent : di->violations_suppressed);
    if (nats)
      tlc_out_printf(o, "%s{sink=\"nats\"} %" PRIu64 "\n", name,
                     f == 0 ? ns.violations_sent : ns.violations_suppressed);
  }
}

/* The daemon's own families: build, uptime, subscribers, live WebSockets. */
static void head_build(tlc__http_view_t *v, int om, const tlc_view_daemon_t *di, tlc_out_t *o) {
  tlc__http_family(o, om, "tlcap_build_info", "gauge",
                   "tlcapd build (always 1; the version is a label).");
  tlc_out_puts(o, "tlcap_build_info{");
  tlc__http_label(o, "version", v->version != NULL ? v->version : "", 1);
  tlc_out_puts(o, "} 1\n");
  tlc__http_family(o, om, "tlcap_uptime_seconds", "gauge", "Seconds since tlcapd started.");
  tlc_out_puts(o, "tlcap_uptime_seconds ");
  {
    int64_t up = tlc_now_unix_ms() - v->start_unix_ms;
    tlc__http_out_seconds(o, (up < 0 ? 0 : up) * 1000000);
  }
  tlc_out_putc(o, '\n');
  tlc__http_family(o, om, "tlcap_subscribers", "gauge", "Protobuf subscribers connected.");
  tlc_out_printf(o, "tlcap_subscribers %zu\n", di->subscribers);
  tlc__http_family(o, om, "tlcap_http_websockets", "gauge", "Live dashboard WebSockets open.");
  tlc_out_printf(o, "tlcap_http_websockets %zu\n", v->websockets);
}

/* The HTTP port's counters (v->st: the server's; NULL in the fuzzer). */
static const scalar_t http_scalars[] = {
  { "tlcap_http_connections", "gauge", "HTTP and WebSocket connections open.",
    offsetof(tlc_http_stats_t, connections), S_SIZE },
  { "tlcap_http_requests_total", "counter", "HTTP requests answered.",
    offsetof(tlc_http_stats_t, requests), S_U64 },
  { "tlcap_http_errors_total", "counter", "HTTP requests answered with a 4xx or 5xx status.",
    offsetof(tlc_http_stats_t, errors), S_U64 },
  { "tlcap_http_refused_total", "counter",
    "Connections refused at accept: http_max_connections or max_per_address reached.",
    offsetof(tlc_http_stats_t, refused), S_U64 },
  { "tlcap_http_refused_address_total", "counter",
    "Connections refused at accept because their peer address had max_per_address.",
    offsetof(tlc_http_stats_t, refused_address), S_U64 },
  { "tlcap_http_misdirected_total", "counter",
    "Requests answered 421 (a Host that is not this daemon's) and live WebSocket "
    "handshakes refused for their Host or Origin.",
    offsetof(tlc_http_stats_t, misdirected), S_U64 },
  { "tlcap_http_busy_total", "counter",
    "Responses refused with 503: over the response size or in-flight byte limits.",
    offsetof(tlc_http_stats_t, busy), S_U64 },
  { "tlcap_http_ws_coalesced_total", "counter",
    "Live updates merged into a later one for a slow dashboard.",
    offsetof(tlc_http_stats_t, ws_coalesced), S_U64 },
  { "tlcap_http_auth_failed_total", "counter",
    "Requests and live sockets refused for a missing or wrong token.",
    offsetof(tlc_http_stats_t, auth_failed), S_U64 },
  { "tlcap_http_ws_cpu_seconds_total", "counter",
    "Loop thread CPU time spent building and writing live dashboard messages.",
    offsetof(tlc_http_stats_t, ws_cpu_ns), S_NS },
  { "tlcap_http_ws_bad_total", "counter", "Live WebSockets closed for a bad message or frame.",
    offsetof(tlc_http_stats_t, ws_bad), S_U64 },
};

/* Storage and the state directory's free space (when storage runs). */
static void head_store(const tlc_view_daemon_t *di, int om, tlc_out_t *o) {
  if (di->has_store) {
    tlc__http_family(o, om, "tlcap_store_queue_bytes", "gauge",
                     "Bytes waiting for the storage writer (store queue depth).");
    tlc_out_printf(o, "tlcap_store_queue_bytes %" PRIu64 "\n", di->store_queue_bytes);
    tlc__http_family(o, om, "tlcap_store_dropped_records_total", "counter",
                     "Records storage dropped (queue full, disk full, I/O error).");
    tlc_out_printf(o, "tlcap_store_dropped_records_total %" PRIu64 "\n", di->store_dropped);
    tlc__http_family(o, om, "tlcap_store_stored_bytes", "gauge",
                     "Bytes of sealed segments on disk.");
    tlc_out_printf(o, "tlcap_store_stored_bytes %" PRIu64 "\n", di->stored_bytes);
    tlc__http_family(o, om, "tlcap_store_disk_full", "gauge",
                     "1 while writing is paused by a full disk.");
    tlc_out_printf(o, "tlcap_store_disk_full %d\n", di->disk_full ? 1 : 0);
  }
  if (di->has_disk_free) {
    tlc__http_family(o, om, "tlcap_store_disk_free_bytes", "gauge",
                     "Free bytes of the state directory's file system.");
    tlc_out_printf(o, "tlcap_store_disk_free_bytes %" PRIu64 "\n", di->disk_free_bytes);
  }
}

/* The NATS publisher (--nats, docs/fleet.md), when it runs. */
static void head_nats(const tlc_view_t *pv, int om, tlc_out_t *o) {
  tlc_view_nats_t ns;
  if (pv->nats == NULL)
    return;
  memset(&ns, 0, sizeof(ns));
  if (pv->nats(pv->nats_ud, &ns) == 0) {
    tlc__http_family(o, om, "tlcap_nats_connected", "gauge",
                     "1 while connected to the NATS server.");
    tlc_out_printf(o, "tlcap_nats_connected %d\n", ns.connected ? 1 : 0);
    tlc__http_family(o, om, "tlcap_nats_published_total", "counter",
                     "Messages the JetStream stream acknowledged.");
    tlc_out_printf(o, "tlcap_nats_published_total %" PRIu64 "\n", ns.published);
    tlc__http_family(o, om, "tlcap_nats_awaiting_ack", "gauge",
                     "Messages published to NATS whose JetStream acknowledgement is not in yet.");
    tlc_out_printf(o, "tlcap_nats_awaiting_ack %" PRIu64 "\n", ns.awaiting_ack);
    tlc__http_family(o, om, "tlcap_nats_dropped_total", "counter",
                     "Messages not published, by reason (docs/fleet.md).");
    for (size_t k = 0; k < ns.nreasons; k++)
      tlc_out_printf(o, "tlcap_nats_dropped_total{reason=\"%s\"} %" PRIu64 "\n", ns.drop_reason[k],
                     ns.drops[k]);
    tlc__http_family(o, om, "tlcap_nats_reconnects_total", "counter",
                     "Connections to the NATS server after the first.");
    tlc_out_printf(o, "tlcap_nats_reconnects_total %" PRIu64 "\n", ns.reconnects);
    tlc__http_family(o, om, "tlcap_nats_publish_cpu_seconds_total", "counter",
                     "CPU time of the loop thread spent publishing statistics to NATS.");
    tlc_out_printf(o, "tlcap_nats_publish_cpu_seconds_total %.9f\n",
                   (double)ns.publish_cpu_ns / 1e9);
  }
}

/* The Alertmanager client (alertmanager_url, docs/alerts.md), when it runs: its counters,
 * then the drops and failures by reason, then the backoff. */
static const scalar_t alert_scalars[] = {
  { "tlcap_alerts_violations_total", "counter",
    "Budget violations handed to the Alertmanager client.",
    offsetof(tlc_alert_counters_t, violations), S_U64 },
  { "tlcap_alerts_active", "gauge", "Alerts held: firing, or resolved and not yet delivered.",
    offsetof(tlc_alert_counters_t, active), S_U64 },
  { "tlcap_alerts_firing", "gauge", "Alerts firing.", offsetof(tlc_alert_counters_t, firing),
    S_U64 },
  { "tlcap_alerts_requests_total", "counter",
    "POST /api/v2/alerts requests the Alertmanager accepted.",
    offsetof(tlc_alert_counters_t, requests), S_U64 },
  { "tlcap_alerts_posted_total", "counter",
    "Alerts the Alertmanager accepted (once per request carrying one).",
    offsetof(tlc_alert_counters_t, posted), S_U64 },
  { "tlcap_alerts_resolved_total", "counter", "Resolutions the Alertmanager accepted.",
    offsetof(tlc_alert_counters_t, resolved), S_U64 },
};
static const scalar_t alert_backoff[] = {
  { "tlcap_alerts_backoff_seconds", "gauge",
    "The wait before the next request after failures (0: none).",
    offsetof(tlc_alert_counters_t, backoff_ms), S_MS },
};

static void head_alerts(const tlc_view_t *pv, int om, tlc_out_t *o) {
  tlc_alert_counters_t as;
  if (pv->alerts == NULL)
    return;
  memset(&as, 0, sizeof(as));
  if (pv->alerts(pv->alerts_ud, &as) != 0)
    return;
  scalars(o, om, &as, alert_scalars, NSCALARS(alert_scalars));
  tlc__http_family(o, om, "tlcap_alerts_dropped_total", "counter",
                   "Violations or alerts not sent, by reason (docs/alerts.md).");
  for (int k = 0; k < TLC_ALERT_DROP_N; k++)
    tlc_out_printf(o, "tlcap_alerts_dropped_total{reason=\"%s\"} %" PRIu64 "\n",
                   tlc_alert_drop_name(k), as.drops[k]);
  tlc__http_family(o, om, "tlcap_alerts_failures_total", "counter",
                   "Requests to the Alertmanager that failed, by reason (each is retried).");
  for (int k = 0; k < TLC_ALERT_FAIL_N; k++)
    tlc_out_printf(o, "tlcap_alerts_failures_total{reason=\"%s\"} %" PRIu64 "\n",
                   tlc_alert_fail_name(k), as.fails[k]);
  scalars(o, om, &as, alert_backoff, NSCALARS(alert_backoff));
}

/* The process's own figures, node_exporter's process collector's names (base/proc.h). */
static void head_process(int om, tlc_out_t *o) {
  tlc_proc_t pr;
  if (tlc_proc_self(&pr) != 0)
    return;
  tlc__http_family(o, om, "process_cpu_seconds_total", "counter",
                   "Total user and system CPU time spent in seconds.");
  tlc_out_printf(o, "process_cpu_seconds_total %.2f\n", pr.cpu_seconds);
  tlc__http_family(o, om, "process_open_fds", "gauge", "Number of open file descriptors.");
  tlc_out_printf(o, "process_open_fds %" PRIu64 "\n", pr.open_fds);
  tlc__http_family(o, om, "process_max_fds", "gauge", "Maximum number of open file descriptors.");
  if (pr.max_fds == UINT64_MAX)
    tlc_out_puts(o, "process_max_fds +Inf\n");
  else
    tlc_out_printf(o, "process_max_fds %" PRIu64 "\n", pr.max_fds);
  tlc__http_family(o, om, "process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.");
  tlc_out_printf(o, "process_virtual_memory_bytes %" PRIu64 "\n", pr.virtual_bytes);
  tlc__http_family(o, om, "process_resident_memory_bytes", "gauge",
                   "Resident memory size in bytes.");
  tlc_out_printf(o, "process_resident_memory_bytes %" PRIu64 "\n", pr.resident_bytes);
  tlc__http_family(o, om, "process_start_time_seconds", "gauge",
                   "Start time of the process since unix epoch in seconds.");
  tlc_out_printf(o, "process_start_time_seconds %.2f\n", pr.start_time);
}

/* The daemon-wide memory budget (memory_limit; docs/configuration.md), when the view has it. */
static void head_memory(const tlc_view_t *pv, int om, tlc_out_t *o) {
  uint64_t limit = 0, used = 0, refused = 0;
  if (pv->memory == NULL)
    return;
  pv->memory(pv->ud, &limit, &used, &refused);
  tlc__http_family(o, om, "tlcap_memory_budget_bytes", "gauge",
                   "The memory budget (memory_limit) for targets' statistics and buffers.");
  tlc_out_printf(o, "tlcap_memory_budget_bytes %" PRIu64 "\n", limit);
  tlc__http_family(o, om, "tlcap_memory_used_bytes", "gauge", "Bytes of the memory budget in use.");
  tlc_out_printf(o, "tlcap_memory_used_bytes %" PRIu64 "\n", used);
  tlc__http_family(
      o, om, "tlcap_memory_refused_total", "counter",
      "Charges to the memory budget refused (new areas, contexts or buffers not taken).");
  tlc_out_printf(o, "tlcap_memory_refused_total %" PRIu64 "\n", refused);
}

/* ---- timing budgets (SPEC 13, docs/budgets.md) ---- */

typedef struct bmet {
  tlc_out_t *o;
  const char *target;
  const struct tlc_bwatch *w;
  tlc__http_bnames_t names;
} bmet_t;

static void bcount_line(void *ud, const tlc_bcount_t *c) {
  bmet_t *b = ud;
  char area[300], ctx[128];
  const tlc_tbudget_t *bd = tlc_bwatch_budget(b->w, c->budget);
  snprintf(area, sizeof(area), "%08X", c->handle);
  ctx[0] = '\0';
  tlc__http_bnames(&b->names, c->handle, c->row_kind, c->state, c->context, area, sizeof(area), ctx,
                   sizeof(ctx));
  tlc_out_puts(b->o, "tlcap_budget_violations_total{");
  tlc__http_label(b->o, "target", b->target, 1);
  tlc__http_label(b->o, "budget", bd->name, 0);
  tlc__http_label(b->o, "area", area, 0);
  tlc__http_label(b->o, "context", c->context == TLC_CTX_NONE ? "" : ctx, 0);
  tlc__http_label(b->o, "stat", tlc_tbudget_stat_name(bd->stat), 0);
  tlc_out_puts(b->o, "} ");
  tlc_out_u64(b->o, c->count);
  tlc_out_putc(b->o, '\n');
}

/* One limit of budget bd: seconds (durations) or events per window (rate). */
static void blimit_line(tlc_out_t *o, const char *target, const tlc_tbudget_t *bd,
                        const char *which, int64_t v) {
  int rate = bd->stat == TLC_BSTAT_RATE;
  tlc_out_puts(o, rate ? "tlcap_budget_limit_events{" : "tlcap_budget_limit_seconds{");
  tlc__http_label(o, "target", target, 1);
  tlc__http_label(o, "budget", bd->name, 0);
  tlc__http_label(o, "stat", tlc_tbudget_stat_name(bd->stat), 0);
  tlc__http_label(o, "limit", which, 0);
  if (rate) {
    tlc_out_puts(o, ",window_seconds=\"");
    tlc__http_out_seconds(o, bd->window_ns);
    tlc_out_puts(o, "\"} ");
    tlc_out_printf(o, "%" PRId64 "\n", v);
  } else {
    tlc_out_puts(o, "} ");
    tlc__http_out_seconds(o, v);
    tlc_out_putc(o, '\n');
  }
}

/* The violation counters per (budget, area, context) of every watched target, and every
 * budget's limits. Families only when some target has budgets. */
static void head_budgets(const tlc_view_t *pv, int om, tlc_out_t *o) {
  size_t i, j, n, pass;
  static const char *const fam[3][3] = {
    { "tlcap_budget_violations_total", "counter",
      "Timing budget violations per budget, area and context (docs/budgets.md)." },
    { "tlcap_budget_limit_seconds", "gauge",
      "A timing budget's max or min (net, gross, call, period, outside), seconds." },
    { "tlcap_budget_limit_events", "gauge",
      "A rate budget's max or min, events per window of window_seconds." },
  };
  if (pv->budgets == NULL)
    return;
  n = pv->count(pv->ud);
  for (pass = 0; pass < 3; pass++) {
    int head = 0;
    for (i = 0; i < n; i++) {
      tlc_view_target_t ti;
      const struct tlc_bwatch *w;
      if (pv->info(pv->ud, i, &ti) != 0 || (w = pv->budgets(pv->budgets_ud, ti.name)) == NULL)
        continue;
      for (j = 0; j < tlc_bwatch_nbudgets(w); j++) {
        const tlc_tbudget_t *bd = tlc_bwatch_budget(w, j);
        if (pass > 0 && (pass == 2) != (bd->stat == TLC_BSTAT_RATE))
          continue;
        if (!head) {
          tlc__http_family(o, om, fam[pass][0], fam[pass][1], fam[pass][2]);
          head = 1;
        }
        if (pass == 0) {
          bmet_t b;
          b.o = o;
          b.target = ti.name;
          b.w = w;
          b.names.pv = pv;
          b.names.idx = i;
          b.names.m = pv->mapping != NULL ? pv->mapping(pv->ud, i) : NULL;
          tlc_bwatch_counts(w, bcount_line, &b);
          break; /* the counters are the watch's, not per budget */
        }
        if (bd->has_max)
          blimit_line(o, ti.name, bd, "max", bd->max);
        if (bd->has_min)
          blimit_line(o, ti.name, bd, "min", bd->min);
      }
    }
  }
}

void tlc__http_head(tlc__http_view_t *v, int om, tlc_out_t *o) {
  tlc_view_daemon_t di;
  memset(&di, 0, sizeof(di));
  if (v->src->daemon_info != NULL)
    v->src->daemon_info(v->src->daemon_ud, &di);
  head_build(v, om, &di, o);
  head_process(om, o);
  head_memory(v->src, om, o);
  if (v->st != NULL)
    scalars(o, om, v->st, http_scalars, NSCALARS(http_scalars));
  head_store(&di, om, o);
  head_nats(v->src, om, o);
  head_violation_events(v->src, &di, om, o);
  head_alerts(v->src, om, o);
  head_budgets(v->src, om, o);
}
