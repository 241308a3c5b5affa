/* targets.c - `tlcap targets [--json]`: the daemon's targets with their state, peer, counters
 * and the rebuild of their rollups from segments, then its memory budget and NATS link, as a
 * table or (--json) one JSON array, an object per target (docs/json-schema.md). One request
 * (ListTargets) and its reply; fails at once when the daemon is not there.
 */
#include "client/cli.h"

#include "base/out.h"
#include "formats/json.h"
#include "proto/convert.h"

#include <stdio.h>
#include <time.h>

static void fmt_age(char *buf, size_t len, int64_t unix_ms_) {
  struct timespec ts;
  int64_t now, d;
  if (unix_ms_ == 0) {
    snprintf(buf, len, "-");
    return;
  }
  clock_gettime(CLOCK_REALTIME, &ts);
  now = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
  d = (now - unix_ms_) / 1000;
  if (d < 0)
    d = 0;
  if (d < 120)
    snprintf(buf, len, "%llds ago", (long long)d);
  else if (d < 7200)
    snprintf(buf, len, "%lldm ago", (long long)(d / 60));
  else
    snprintf(buf, len, "%lldh ago", (long long)(d / 3600));
}

/* 1234 -> "1.2K", in powers of 1024 ("-" for 0: a daemon without a memory budget). */
static void fmt_bytes(char *buf, size_t len, uint64_t v) {
  static const char units[] = "BKMGTP";
  double x = (double)v;
  unsigned u = 0;
  if (v == 0) {
    snprintf(buf, len, "-");
    return;
  }
  while (x >= 1024 && u + 1 < sizeof(units) - 1) {
    x /= 1024;
    u++;
  }
  snprintf(buf, len, u ? "%.1f%c" : "%.0f%c", x, units[u]);
}

static const char *rebuild_name(const Tlcap__RollupRebuild *r) {
  switch (r->state) {
  case TLCAP__ROLLUP_REBUILD__STATE__REBUILDING:
    return "rebuilding";
  case TLCAP__ROLLUP_REBUILD__STATE__DONE:
    return "done";
  default:
    return "none";
  }
}

/* The ROLLUPS column: "off" (no rollups), "-" (no rebuild), "rebuilding 3/40" (segments read
 * of segments to read), "rebuilt 40" (segments read). */
static void fmt_rollups(char *buf, size_t len, const Tlcap__RollupRebuild *r) {
  if (r == NULL)
    snprintf(buf, len, "off");
  else if (r->state == TLCAP__ROLLUP_REBUILD__STATE__REBUILDING)
    snprintf(buf, len, "rebuilding %llu/%llu", (unsigned long long)r->segments_read,
             (unsigned long long)r->segments);
  else if (r->state == TLCAP__ROLLUP_REBUILD__STATE__DONE)
    snprintf(buf, len, "rebuilt %llu", (unsigned long long)r->segments_read);
  else
    snprintf(buf, len, "-");
}

/* `tlcap targets --json`: one JSON array, an object per target (docs/json-schema.md). */
static int targets_json(const Tlcap__TargetList *tl) {
  tlc_out_t o;
  size_t i;
  tlc_out_init(&o, 0, tlc_cli_write_fd_cb, stdout);
  tlc_out_putc(&o, '[');
  for (i = 0; i < tl->n_targets; i++) {
    const Tlcap__TargetInfo *t = tl->targets[i];
    tlc_counters_t k;
    tlc_pb_counters_get(&k, t->counters);
    tlc_out_puts(&o, i ? ",\n {\"name\": " : "\n {\"name\": ");
    tlc_json_string(&o, t->name);
    tlc_out_printf(&o, ", \"format\": \"%s\", \"state\": \"%s\", \"peer\": ",
                   tlc_pb_format_name(t->format), t->connected ? "connected" : "disconnected");
    if (t->peer[0])
      tlc_json_string(&o, t->peer);
    else
      tlc_out_puts(&o, "null");
    tlc_out_printf(&o,
                   ", \"connections\": %llu, \"reconnects\": %llu, \"gaps\": %llu"
                   ", \"decode_errors\": %llu, \"last_connect_unix_ms\": %lld"
                   ", \"last_disconnect_unix_ms\": %lld, \"counters\": {\"events\": %llu"
                   ", \"anomalies\": %llu, \"dropped_area_limit\": %llu, \"gaps\": %llu"
                   ", \"bytes\": %llu, \"records\": %llu, \"bytes_skipped\": %llu"
                   ", \"resyncs\": %llu, \"records_invalid\": %llu, \"truncated\": %llu"
                   ", \"overflow_items\": %llu, \"clock_resets\": %llu}",
                   (unsigned long long)t->connections, (unsigned long long)t->reconnects,
                   (unsigned long long)t->gaps, (unsigned long long)t->decode_errors,
                   (long long)t->last_connect_unix_ms, (long long)t->last_disconnect_unix_ms,
                   (unsigned long long)k.events, (unsigned long long)k.anomalies,
                   (unsigned long long)k.dropped_area_limit, (unsigned long long)k.gaps,
                   (unsigned long long)k.bytes, (unsigned long long)k.records,
                   (unsigned long long)k.bytes_skipped, (unsigned long long)k.resyncs,
                   (unsigned long long)k.records_invalid, (unsigned long long)k.truncated,
                   (unsigned long long)k.overflow_items, (unsigned long long)k.clock_resets);
    if (t->rollups == NULL)
      tlc_out_puts(&o, ", \"rollups\": null}");
    else
      tlc_out_printf(&o,
                     ", \"rollups\": {\"rebuild\": \"%s\", \"segments_read\": %llu"
                     ", \"segments\": %llu, \"samples\": %llu, \"done_unix_ms\": %lld}}",
                     rebuild_name(t->rollups), (unsigned long long)t->rollups->segments_read,
                     (unsigned long long)t->rollups->segments,
                     (unsigned long long)t->rollups->samples, (long long)t->rollups->done_unix_ms);
  }
  tlc_out_puts(&o, tl->n_targets ? "\n]\n" : "]\n");
  return tlc_out_fini(&o) == 0 ? 0 : EXIT_BAD;
}

int tlc_cli_targets(int argc, char **argv) {
  Tlcap__ClientMessage cm = TLCAP__CLIENT_MESSAGE__INIT;
  Tlcap__ListTargets lt = TLCAP__LIST_TARGETS__INIT;
  Tlcap__ServerMessage *m;
  tlc_client_t *c;
  int status = 0, json = 0;
  size_t i;
  int o;
  if ((o = tlc_cli_json_help(
           argc, argv, &json,
           "usage: tlcap [--connect ADDR] targets [--json]\n"
           "Lists the daemon's targets: name, format, state, peer, events, bytes, gaps,\n"
           "resyncs, clock restarts (board resets), bytes skipped, decode errors, events\n"
           "dropped for the area limit or the\n"
           "memory budget, memory held, its rollups (ROLLUPS: off, -, rebuilding READ/ALL\n"
           "segments, rebuilt N) and the last connect/disconnect; then a line per rollup\n"
           "rebuild from segments (segments read, samples, when it ended) and the daemon's\n"
           "memory budget (used, limit, refusals).\n"
           "--json: a JSON array, an object per target with every counter.\n")) >= 0)
    return o;
  if (tlc_cli_operands(argc, 0, 0, "tlcap targets [--json]") < 0)
    return EXIT_USAGE;
  if ((c = tlc_cli_connect("tlcap targets", &status)) == NULL)
    return status;
  cm.msg_case = TLCAP__CLIENT_MESSAGE__MSG_LIST_TARGETS;
  cm.list_targets = &lt;
  if ((m = tlc_cli_request(c, &cm, &status)) == NULL)
    goto done;
  if (m->msg_case != TLCAP__SERVER_MESSAGE__MSG_TARGETS) {
    fprintf(stderr, "tlcap: %s: unexpected reply\n", tlc_client_addr(c));
    status = EXIT_BAD;
    goto done_msg;
  }
  if (json) {
    status = targets_json(m->targets);
    goto done_msg;
  }
  printf("%-24s %-6s %-12s %-22s %12s %14s %6s %7s %6s %10s %6s %10s %8s %-18s %s\n", "TARGET",
         "FORMAT", "STATE", "PEER", "EVENTS", "BYTES", "GAPS", "RESYNCS", "RESETS", "SKIPPED",
         "DECERR", "DROPPED", "MEMORY", "ROLLUPS", "LAST");
  for (i = 0; i < m->targets->n_targets; i++) {
    const Tlcap__TargetInfo *t = m->targets->targets[i];
    tlc_counters_t k;
    char age[32], mem[32], roll[64];
    tlc_pb_counters_get(&k, t->counters);
    fmt_age(age, sizeof(age), t->connected ? t->last_connect_unix_ms : t->last_disconnect_unix_ms);
    fmt_bytes(mem, sizeof(mem), t->memory_bytes);
    fmt_rollups(roll, sizeof(roll), t->rollups);
    printf("%-24s %-6s %-12s %-22s %12llu %14llu %6llu %7llu %6llu %10llu %6llu %10llu %8s %-18s "
           "%s\n",
           t->name, tlc_pb_format_name(t->format), t->connected ? "connected" : "disconnected",
           t->peer[0] ? t->peer : "-", (unsigned long long)k.events, (unsigned long long)k.bytes,
           (unsigned long long)t->gaps, (unsigned long long)k.resyncs,
           (unsigned long long)k.clock_resets, (unsigned long long)k.bytes_skipped,
           (unsigned long long)t->decode_errors, (unsigned long long)k.dropped_area_limit, mem,
           roll, age);
  }
  for (i = 0; i < m->targets->n_targets; i++) { /* the rebuilds' figures, under the table */
    const Tlcap__TargetInfo *t = m->targets->targets[i];
    const Tlcap__RollupRebuild *r = t->rollups;
    char age[32];
    if (r != NULL && r->state == TLCAP__ROLLUP_REBUILD__STATE__REBUILDING)
      printf("rollups of %s: rebuilding from its segments, %llu of %llu read, %llu samples so "
             "far\n",
             t->name, (unsigned long long)r->segments_read, (unsigned long long)r->segments,
             (unsigned long long)r->samples);
    else if (r != NULL && r->state == TLCAP__ROLLUP_REBUILD__STATE__DONE) {
      fmt_age(age, sizeof(age), r->done_unix_ms);
      printf("rollups of %s: rebuilt from %llu of %llu segments, %llu samples, %s\n", t->name,
             (unsigned long long)r->segments_read, (unsigned long long)r->segments,
             (unsigned long long)r->samples, age);
    }
  }
  if (m->targets->memory_limit != 0) {
    char used[32], lim[32];
    fmt_bytes(used, sizeof(used), m->targets->memory_used);
    fmt_bytes(lim, sizeof(lim), m->targets->memory_limit);
    printf("memory: %s of %s in use (--memory-limit), %llu charges refused\n", used, lim,
           (unsigned long long)m->targets->memory_refused);
  }
  if (m->targets->n_targets == 0)
    printf("(no targets yet)\n");
  if (m->targets->nats != NULL) {
    const Tlcap__NatsStatus *n = m->targets->nats;
    printf("nats %s: %s, stream %s, published %llu, dropped %llu, reconnects %llu\n", n->url,
           n->connected ? "connected" : "disconnected", n->stream_ready ? "ready" : "not ready",
           (unsigned long long)n->published, (unsigned long long)n->dropped,
           (unsigned long long)n->reconnects);
  }
  if (m->targets->http != NULL && m->targets->http->url[0] != '\0')
    printf("dashboard: %s  metrics: %smetrics\n", m->targets->http->url, m->targets->http->url);
  else if (m->targets->http != NULL)
    printf("DASHBOARD OFF: %s\n", m->targets->http->off);
done_msg:
  tlc_client_msg_free(m);
done:
  tlc_client_free(c);
  return status;
}
