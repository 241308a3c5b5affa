/* fleet.h - publishes a daemon's statistics, target events and sealed segments to a NATS
 * server with JetStream (SPEC section 11, docs/fleet.md), so a lab with many tlcapd hosts sees
 * them in one place without a tlcap-specific relay.
 *
 * Subjects, with PREFIX = nats_subject (default "tlcap.<hostname>") and TARGET the target name
 * made subject-safe (tlc_fleet_subject_token):
 *   PREFIX.TARGET.stats     ServerMessage{snapshot}: full on connect and every full_interval,
 *                           deltas (rows changed since the previous one) every interval
 *   PREFIX.TARGET.events    ServerMessage{target_event}
 *   PREFIX.TARGET.segments  ServerMessage{segment_sealed} with the segment's manifest
 *   PREFIX.TARGET.violations ServerMessage{target_event} TE_VIOLATION: a budget violation
 *                           (at most TLC_VSERVE_RATE a second per target and budget)
 * Each message is one protobuf ServerMessage (proto/tlcap.proto) without the length prefix the
 * subscriber stream uses (a NATS message is already delimited).
 *
 * The connection is libnats's, attached to tlcapd's libuv loop through the library's libuv
 * adapter (socket I/O on the loop, never blocking). libnats's own threads (reconnection, the
 * JetStream reply) hand what they learn back to the loop through a uv_async_t; nothing of
 * tlcapd's is touched from them. Messages are JetStream publishes: each awaits the stream's
 * acknowledgement (asynchronously; libnats calls back on its own thread), and only an
 * acknowledged message counts as published; a refusal (stream full, no stream, no answer in
 * time) is a drop counted by reason and logged, rate-limited. Publishing never waits: a message
 * that would take the client's buffered bytes, or the bytes awaiting acknowledgement, past
 * `buffer_bytes` is dropped and counted.
 *
 * All functions run on the loop thread.
 */
#ifndef TLC_FLEET_H
#define TLC_FLEET_H

#include "view/view.h"

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

typedef struct tlc_fleet tlc_fleet_t;

typedef struct tlc_fleet_opts {
  const char *url;            /* nats://HOST:PORT or tls://HOST:PORT (required) */
  const char *creds;          /* "" or a .creds file (JWT + seed) or a file holding a token */
  const char *subject;        /* "" = "tlcap.<hostname>" */
  uint64_t interval_ms;       /* statistics period (0: 1000) */
  uint64_t full_interval_ms;  /* full snapshot period (0: 60000) */
  uint64_t buffer_bytes;      /* cap on bytes the client holds unsent (0: 8 MiB) */
  uint64_t stream_max_age_ms; /* JetStream stream limits (0: 7 days, 1 GiB) */
  uint64_t stream_max_bytes;
  uint64_t instance_id; /* the daemon's instance id (Snapshot/TargetEvent.instance_id) */
  /* Log sink (level as log.h); loop thread. */
  void (*log)(void *ud, int level, const char *msg);
  void *log_ud;
} tlc_fleet_opts_t;

/* Why a message was not published (tlc_fleet_counters_t.drops; names: tlc_fleet_drop_name). */
enum tlc_fleet_drop {
  TLC_FLEET_DROP_NOT_CONNECTED,   /* no connection to a server */
  TLC_FLEET_DROP_BUFFER_FULL,     /* unsent or unacknowledged messages at their bound */
  TLC_FLEET_DROP_TOO_LARGE,       /* over the server's max_payload */
  TLC_FLEET_DROP_ENCODE,          /* not built: out of memory, or no subject for the name */
  TLC_FLEET_DROP_STREAM_FULL,     /* JetStream refused it: the stream (or the account's
                                     storage) is at its limits and discards new messages */
  TLC_FLEET_DROP_NO_RESPONDERS,   /* no stream covers the subject (or no JetStream) */
  TLC_FLEET_DROP_TIMEOUT,         /* no acknowledgement in time */
  TLC_FLEET_DROP_REFUSED,         /* JetStream refused it for another reason */
  TLC_FLEET_DROP_CONNECTION_LOST, /* awaiting its acknowledgement when the connection ended */
  TLC_FLEET_DROP_N
};

typedef struct tlc_fleet_counters {
  int connected;                    /* 1 while attached to a server */
  uint64_t published;               /* messages the JetStream stream acknowledged */
  uint64_t dropped;                 /* messages not published: the sum of drops[] */
  uint64_t drops[TLC_FLEET_DROP_N]; /* by reason (enum tlc_fleet_drop) */
  uint64_t awaiting_ack;            /* published to the server, acknowledgement not yet in */
  uint64_t dropped_bytes;
  uint64_t reconnects;            /* connections after the first */
  int stream_ready;               /* the JetStream stream was created or updated */
  uint64_t violations_sent;       /* TE_VIOLATION messages handed to publish (tlc_fleet_violation;
                                     each then counts as published or dropped) */
  uint64_t violations_suppressed; /* ... not sent: over the rate limit (TLC_VSERVE_RATE) */
  uint64_t publish_cpu_ns; /* loop thread CPU time in the statistics ticks (snapshots, encoding,
                              handing to the client): what publishing costs ingest */
} tlc_fleet_counters_t;

/* Starts publishing for the targets of `pv` (borrowed; must outlive the fleet). The first
 * connection attempt starts on the loop; failures retry with backoff (1 s doubling to 30 s).
 * Returns 0 or a negative error (bad URL or options: the message went to o->log). */
int tlc_fleet_new(tlc_fleet_t **f, uv_loop_t *loop, const tlc_view_t *pv,
                  const tlc_fleet_opts_t *o);

/* A target event (enum tlc_target_ev of target.h) of target `name`, with `detail` (may be
 * NULL); kinds the protocol has no TargetEventKind for are not published. */
void tlc_fleet_target_event(tlc_fleet_t *f, const char *name, int kind, const char *detail);

/* A budget violation of `target` (budget/budget.h: v is one of watch w's, both borrowed, read
 * during the call), published on PREFIX.TARGET.violations as ServerMessage{target_event} of
 * kind TE_VIOLATION (docs/fleet.md). At most TLC_VSERVE_RATE (vserve/vserve.h) a second per
 * (target, budget) are published; the others are counted (violations_suppressed) and the next
 * one published carries their number in TargetEvent.suppressed. Like every message it is
 * dropped, and counted by reason, when it cannot be published (not connected, buffer full).
 * The daemon calls it from the watch's on_violation (loop thread), with key, the watch's number
 * for (target, v's budget) (budget/budget.h: tlc_bwatch_key(w, v->budget), no other), and
 * now_ms, the loop's time (uv_now): read once for pubsub and fleet. Returns, takes `held` and
 * is paired with tlc_fleet_violations_held as tlc_pubsub_violation (pubsub/pubsub.h). */
struct tlc_bwatch;
struct tlc_violation;
uint64_t tlc_fleet_violation(tlc_fleet_t *f, const char *target, const struct tlc_bwatch *w,
                             const struct tlc_violation *v, uint64_t key, uint64_t now_ms,
                             uint64_t held);
void tlc_fleet_violations_held(tlc_fleet_t *f, const char *target, const struct tlc_bwatch *w,
                               size_t budget, uint64_t key, uint64_t now_ms, uint64_t held);

/* A sealed segment of target `name`: data file `path`; its manifest (`path` + ".idx" or as
 * docs/storage.md names it) is read and published with it. */
void tlc_fleet_segment_sealed(tlc_fleet_t *f, const char *name, const char *path, uint64_t seq,
                              int reason);

/* Safe while libnats's threads count acknowledgements (they update them under a lock). */
void tlc_fleet_counters(const tlc_fleet_t *f, tlc_fleet_counters_t *out);

/* The stats dump's "nats" object (connected, stream_ready, published, awaiting_ack,
 * dropped_total, dropped_bytes, dropped by reason, reconnects, violations_sent,
 * violations_suppressed), written with the dump's writer. */
struct tlc_json_w;
void tlc_fleet_dump(const tlc_fleet_t *f, struct tlc_json_w *j);

/* The publisher as the read side shows it (view.h nats: its URL, connection, counters and drops
 * by reason). Returns 0. */
int tlc_fleet_view(const tlc_fleet_t *f, tlc_view_nats_t *out);

/* The name of drop reason r (enum tlc_fleet_drop), a Prometheus label value and JSON key:
 * "not_connected", "buffer_full", "too_large", "encode", "stream_full", "no_responders",
 * "timeout", "refused", "connection_lost"; NULL past the last. */
const char *tlc_fleet_drop_name(int r);

/* Stops: flushes what the client holds (without waiting for the broker), closes the
 * connection and every handle, then calls cb(ud). The loop must keep running until then. */
void tlc_fleet_close(tlc_fleet_t *f, void (*cb)(void *ud), void *ud);

/* After every fleet is closed and the loop has ended: waits (up to 10 s) for libnats's own
 * threads to finish, so that none runs while the process exits. A no-op when no fleet was
 * ever started. */
void tlc_fleet_shutdown(void);

/* Writes `in` as one subject token into out[0, cap): bytes other than [A-Za-z0-9_@:#+=[\]-]
 * (so '.', '*', '>', '%', spaces and non-ASCII) become %XX. Returns the length, or 0 when it
 * does not fit. */
size_t tlc_fleet_subject_token(const char *in, char *out, size_t cap);

#endif
