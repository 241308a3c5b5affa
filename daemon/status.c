/* status.c - the daemon-wide figures (see status.h): the STATUS= line and the read side's
 * daemon-wide hooks, composed of what each running part answers for itself. Loop thread.
 */
#include "daemon/status.h"

#include "daemon/stored.h"

#include "base/err.h"
#include "base/log.h"
#include "base/sdnotify.h"
#include "ingest/source.h"
#include "ingest/target.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* The ingest context's figures: targets, connections, listeners, what was decoded or refused. */
static void ingest_text(const tlc_ingest_t *d, char *buf, size_t len) {
  size_t connected = 0;
  uint64_t skipped = 0, events = 0;
  for (size_t i = 0; i < d->targets.n; i++) {
    const tlc_target_t *t = d->targets.v[i];
    connected += t->connected ? 1 : 0;
    skipped += t->pipe.dec.c.bytes_skipped;
    events += tlc_engine_counters(t->pipe.engine)->events;
  }
  snprintf(buf, len,
           "targets=%zu connected=%zu conns=%zu listeners=%zu events=%" PRIu64 " bytes=%" PRIu64
           " decode_errors=%" PRIu64 " skipped=%" PRIu64 " refused=%" PRIu64 " deadline=%" PRIu64
           " log_dropped=%" PRIu64,
           d->targets.n, connected, d->nconns, tlc_listen_count(d), events, d->targets.bytes,
           d->targets.decode_errors, skipped, d->st.refused_limit + d->st.refused_target,
           d->st.closed_deadline, tlc_log_dropped());
}

void tlc_status_text(const tlc_daemon_t *d, char *buf, size_t len) {
  ingest_text(&d->in, buf, len);
  if (d->pubsub != NULL)
    tlc_pubsub_status(d->pubsub, buf, len);
  tlc_stored_status(d, buf, len);
  tlc_sources_status(&d->in, buf, len);
}

void tlc_status_daemon_info(void *ud, tlc_view_daemon_t *out) {
  const tlc_daemon_t *d = ud;
  memset(out, 0, sizeof(*out));
  if (d->pubsub != NULL) {
    tlc_pubsub_stats_t s;
    tlc_pubsub_get_stats(d->pubsub, &s);
    out->subscribers = s.subscribers;
    out->has_pubsub = 1;
    out->violations_sent = s.violations_sent;
    out->violations_suppressed = s.violations_suppressed;
  }
  tlc_stored_daemon_info(d, out);
  out->unhealthy = tlc_sd_health_check(&out->unhealthy_why) != 0;
  out->stopping = d->closing || d->in.stopping;
  out->sources_down = tlc_sources_down(&d->in, out->sources_why, sizeof(out->sources_why));
  snprintf(out->http_url, sizeof(out->http_url), "%s", d->http_url);
  snprintf(out->http_off, sizeof(out->http_off), "%s", d->http_off);
}

size_t tlc_status_target_subscribers(void *ud, size_t index) {
  const tlc_daemon_t *d = ud;
  if (d->pubsub == NULL || index >= d->in.targets.n)
    return 0;
  return tlc_pubsub_target_subscribers(d->pubsub, d->in.targets.v[index]->name);
}

int tlc_status_nats(void *ud, tlc_view_nats_t *out) {
  const tlc_daemon_t *d = ud;
  return d->fleet != NULL ? tlc_fleet_view(d->fleet, out) : TLC_EINVAL;
}

int tlc_status_alerts(void *ud, tlc_alert_counters_t *out) {
  const tlc_daemon_t *d = ud;
  if (d->alert == NULL)
    return TLC_EINVAL;
  tlc_alert_counters(d->alert, out);
  return 0;
}
