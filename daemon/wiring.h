/* wiring.h - creates the daemon object's modules (daemon.h) and connects them: remote access
 * (access.h), storage and its policy (store/policy/policy.h, which observes the targets
 * itself), range queries, the subscriber server, the NATS publisher, checkpoints and the HTTP
 * port, each optional at run time (`store = no`, `nats_url`, `http`).
 *
 *   target events  -> tlc_pubsub_target_event (connected, disconnected, resync, drops, decode
 *                     error, added), tlc_fleet_target_event
 *   engine batch   -> tlc_pubsub_events (live event batches)
 *   store events   -> pubsub SEGMENT_ROTATED, tlc_fleet_segment_sealed
 *   half-close     -> tlc_stored_barrier (d->in.barrier), the connection closed in its callback
 *   the read side  <- the hooks of the modules that run (storage: stored.h; the subscribers,
 *                     the daemon-wide figures, the NATS publisher's state)
 *
 * Loop thread only (recovery's helper thread exists only inside tlc_wiring_start).
 */
#ifndef TLC_WIRING_H
#define TLC_WIRING_H

#include "daemon/daemon.h"

/* Creates the modules the configuration asks for, in this order: the token and the TLS
 * context; storage (options from the [daemon] storage keys; crash recovery of the state
 * directory, blocking this call, on a helper thread while EXTEND_TIMEOUT_USEC is sent every
 * second; before READY=1), with range queries and d->in.barrier; the subscriber server
 * (listening on cfg.serve and on inherited fds named "serve" or "subscribe"); the NATS
 * publisher; checkpoints. Registers their observers on the targets, gives the read side
 * (d->view, which outlives them) their hooks, and restores every checkpointed target. Returns
 * 0, or a negative error (logged; start-up must fail: the caller closes as a shutdown does). */
int tlc_wiring_start(tlc_daemon_t *d);

/* Starts the HTTP port (cfg.http, "" = off) once everything else has started, just before
 * READY=1 (libwebsockets closes its handles itself: main.c settles them after a failed start-up).
 * Returns 0 or a negative error (logged; start-up must fail). */
int tlc_wiring_start_http(tlc_daemon_t *d);

/* Shutdown or a failed start-up, after the sources are closed: the last checkpoints, then HTTP,
 * NATS, pubsub and storage (segments sealed) closed, each asynchronously on the loop; the token
 * and the TLS context are freed once all have closed. Once only (a second call does nothing). */
void tlc_wiring_close(tlc_daemon_t *d);

#endif
