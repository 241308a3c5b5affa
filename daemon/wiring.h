/* wiring.h - connects the target registry to the subscriber server (pubsub.h) and to storage
 * (its policy, store/policy/policy.h, observes the targets itself), each optional at run time
 * (`serve` empty, `store = no`).
 *
 *   target events  -> tlc_pubsub_target_event (connected, disconnected, resync, drops, decode
 *                     error, added)
 *   engine batch   -> tlc_pubsub_events (live event batches)
 *   store events   -> pubsub SEGMENT_ROTATED
 *   half-close     -> tlc_store_barrier (d->barrier), the connection closed in its callback
 *
 * Loop thread only (recovery's helper thread exists only inside tlc_wiring_start).
 */
#ifndef TLC_WIRING_H
#define TLC_WIRING_H

#include "ingest/sources.h"
#include "view/view.h"
#include "store/policy/policy.h"

typedef struct tlc_wiring tlc_wiring_t;

/* Disconnected targets that keep their open segment (and its fds) until they reconnect (the
 * storage policy's limit, store/policy/policy.h): main.c keeps their fds in its reserve (the fd
 * reserve counts every fd a connection will need). */
#define TLC_WIRING_HELD_SEGMENTS TLC_STPOL_HELD_SEGMENTS

/* Starts storage (options from the [daemon] storage keys; crash recovery of the state
 * directory, blocking this call, on a helper thread while EXTEND_TIMEOUT_USEC is sent every
 * second; before READY=1), sets d->barrier (half-close answers) and the watchdog health check, and
 * the subscriber server (listening on d->cfg.serve and on inherited fds named "serve" or
 * "subscribe"), per the configuration, and registers their observers on d->targets. `pv`, the
 * daemon's read side, gets the hooks of the modules that run (storage, NATS, the daemon-wide
 * figures) and must outlive the wiring. Returns 0 or a negative error (logged; start-up must fail).
 */
int tlc_wiring_start(tlc_wiring_t **w, tlc_ingest_t *d, tlc_view_reg_t *pv);

/* SIGHUP, after d->cfg was replaced: applies the storage rotation/retention/sync limits
 * (tlc_store_reconfigure), seals every open segment, and logs what needs a restart (storage
 * on/off, state directory, compress, index_interval, store_queue, max_block). */
void tlc_wiring_reload(tlc_wiring_t *w);

/* Shutdown, after the sources are closed: closes pubsub and storage (segments sealed); frees
 * the wiring once both have finished (asynchronously, on the loop). NULL is fine. */
void tlc_wiring_close(tlc_wiring_t *w);

/* After a start-up failure, once tlc_wiring_close's services have closed (the loop ran out of
 * active handles), before the loop is closed: runs the loop (without waiting) until the HTTP
 * server that failed to start has closed the handles libwebsockets closes itself, or 1000
 * turns have passed; nothing else may close them (a double close aborts). */
void tlc_wiring_settle(uv_loop_t *loop);

/* Starts the HTTP port (daemon/http; d->cfg.http, "" = off) once everything else has started,
 * just before READY=1 (libwebsockets closes its handles itself: tlc_wiring_settle). Returns 0
 * or a negative error (logged; start-up must fail). A build without the HTTP port: 0. */
int tlc_wiring_start_http(tlc_wiring_t *w);

/* Adds ", subscribers=N, store_dropped=N" style counters to a STATUS line. */
void tlc_wiring_status(const tlc_wiring_t *w, char *buf, size_t len);

/* The stats dump's "checkpoints" object (continuity.h counters: checkpoints written, the
 * loop's longest encoding slice, the longest a target's input was held), written with the
 * dump's JSON writer. Nothing when checkpoints are off. Loop thread. */
struct tlc_json_w;
void tlc_wiring_dump(const tlc_wiring_t *w, struct tlc_json_w *j);

/* The token file (auth.h) and TLS context (tls.h) of the running configuration, or NULL when
 * not configured: borrowed by every server that needs them (subscribers, HTTP), valid until
 * tlc_wiring_close's services have closed. Re-read by tlc_wiring_reload (SIGHUP). */
struct tlc_auth;
struct tlc_tls;
struct tlc_auth *tlc_wiring_auth(const tlc_wiring_t *w);
struct tlc_tls *tlc_wiring_tls(const tlc_wiring_t *w);

#endif
