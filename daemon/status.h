/* status.h - the daemon-wide figures, composed of what each running part answers for itself:
 * the STATUS= line the status tick sends (daemon.c), and the read side's daemon-wide hooks
 * (view.h daemon_info, target_subscribers, nats) that wiring.c installs.
 *
 * The hooks take the daemon object (daemon.h) as their `ud`. Loop thread only.
 */
#ifndef TLC_DAEMON_STATUS_H
#define TLC_DAEMON_STATUS_H

#include "daemon/daemon.h"

#include <stddef.h>

/* The STATUS= text into buf[0, len): the ingest figures ("targets=N connected=N conns=N
 * listeners=N events=N bytes=N decode_errors=N skipped=N refused=N deadline=N log_dropped=N"),
 * then the subscriber server's (tlc_pubsub_status), storage's (tlc_stored_status) and the
 * sources' (tlc_sources_status), each while it runs. */
void tlc_status_text(const tlc_daemon_t *d, char *buf, size_t len);

/* view daemon_info: the subscribers connected, storage's figures (tlc_stored_daemon_info). */
void tlc_status_daemon_info(void *ud, tlc_view_daemon_t *out);

/* view target_subscribers: the subscribers of target `index` (0 without the server). */
size_t tlc_status_target_subscribers(void *ud, size_t index);

/* view nats: the NATS publisher's state (tlc_fleet_view); TLC_EINVAL while it does not run. */
int tlc_status_nats(void *ud, tlc_view_nats_t *out);

/* view alerts: the Alertmanager client's figures; TLC_EINVAL while it does not run. */
int tlc_status_alerts(void *ud, tlc_alert_counters_t *out);

#endif
