/* pubsub.h - the subscriber server: live statistics, target events and event batches over the
 * protobuf protocol of proto/tlcap.proto (docs/protocol.md), on TCP and Unix sockets.
 *
 * The daemon creates one server on its loop (tlc_pubsub_new), starts listeners
 * (tlc_pubsub_listen_tcp / _unix / _fd), and feeds it target events (tlc_pubsub_target_event)
 * and decoded event batches (tlc_pubsub_events) as they happen. Statistics are pulled from the
 * targets through the read side (view/view.h) on each subscription interval, once per distinct
 * subscription and target however many subscribers share it (and one engine snapshot for the
 * subscriptions that tick together with the same options); each changed row is encoded once,
 * and every message is shared by reference count.
 *
 * Backpressure (Redis client-output-buffer-limit semantics): per subscriber, a snapshot slot
 * per (subscription, target) that coalesces to the latest, a bounded FIFO of event batches that
 * drops and counts (and tells the subscriber with a Dropped message), and control messages
 * (replies, target events, errors) that are never dropped. A subscriber whose queued bytes pass
 * the hard cap, or stay above the soft cap longer than the soft time, gets an error message and
 * is closed. Nothing here ever waits for a subscriber: the calls below return at once.
 *
 * Threads: everything runs on the loop thread of `loop`; no function is thread-safe. Socket
 * writes to subscribers are done by one serving thread the server owns (started with the first
 * connection, joined when it closes), unless opts.write_on_loop.
 */
#ifndef TLC_PUBSUB_H
#define TLC_PUBSUB_H

#include "auth/auth.h"
#include "auth/tls.h"
#include "base/log_level.h"
#include "formats/tlc_event.h"
#include "view/view.h"

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

typedef struct tlc_pubsub tlc_pubsub_t;

/* Target event kinds for tlc_pubsub_target_event: the protocol's TargetEventKind values. */
enum tlc_ps_ev {
  TLC_PS_EV_CONNECTED = 1,
  TLC_PS_EV_DISCONNECTED = 2, /* with a gap in the statistics */
  TLC_PS_EV_SEGMENT_ROTATED = 3,
  TLC_PS_EV_RESYNC = 4,
  TLC_PS_EV_DROPS = 5,
  TLC_PS_EV_MAPPING_LOADED = 6,
  TLC_PS_EV_DECODE_ERROR = 7,
  TLC_PS_EV_ADDED = 8,
  TLC_PS_EV_RESET = 20,      /* the statistics started afresh (tlcap reset) */
  TLC_PS_EV_FORGOTTEN = 21,  /* the target left the table (tlcap forget) */
  TLC_PS_EV_CLOCK_RESET = 22 /* the target's clock restarted: a gap and a new epoch */
};

/* Log levels handed to opts.log: the one set (formats/tlc_log_level.h); pubsub's names for
 * them. */
enum {
  TLC_PS_LOG_ERR = TLC_LOG_ERR,
  TLC_PS_LOG_WARN = TLC_LOG_WARN,
  TLC_PS_LOG_NOTICE = TLC_LOG_NOTICE,
  TLC_PS_LOG_INFO = TLC_LOG_INFO,
  TLC_PS_LOG_DEBUG = TLC_LOG_DEBUG
};

typedef struct tlc_pubsub_opts {
  size_t max_subscribers;      /* connections served at once (default 256); one more gets a
                                  "too many subscribers" error frame and is closed */
  size_t max_per_address;      /* ... of them from one TCP peer address (0, the default: no cap;
                                  the daemon's max_per_address: 16); one more gets the same error
                                  ("too many connections from this address") and is closed */
  size_t max_subscriptions;    /* per subscriber (default 64) */
  size_t max_request;          /* cap on a request frame after Hello (default 4 MiB) */
  size_t max_preauth;          /* cap on a frame before a successful Hello (default 1024) */
  uint64_t hello_timeout_ms;   /* a connection must complete Hello within this (default 10000) */
  size_t obuf_hard;            /* hard cap on a subscriber's queued bytes (default 32 MiB) */
  size_t obuf_soft;            /* soft cap (default 8 MiB) ... */
  uint64_t obuf_soft_ms;       /* ... held longer than this closes it (default 30000) */
  size_t max_batches;          /* event-batch FIFO length per subscriber (default 64) */
  size_t max_batch_events;     /* events per EventBatch message (default 4096) */
  size_t max_message;          /* largest message sent (default 64 MiB); a bigger snapshot is
                                  refused with an error naming the cap */
  uint32_t min_interval_ms;    /* interval clamp (default 50) */
  uint32_t max_interval_ms;    /* (default 3600000) */
  int sndbuf;                  /* SO_SNDBUF of subscriber sockets (0: the OS default); bounds the
                                  kernel's share of a slow subscriber's backlog */
  uint64_t close_grace_ms;     /* time a closing subscriber gets to take its error message
                                  (default 2000) */
  uint64_t request_timeout_ms; /* after Hello, a started request frame must complete within
                                  this (default 30000) */
  uint64_t auth_fail_delay_ms; /* a wrong token is answered (and closed) after this, reading
                                  nothing meanwhile: rate-limits guessing (default 250) */
  const char *token;           /* shared secret; NULL or "" = no authentication (copied) */
  tlc_auth_t *auth;            /* token file (auth.h; borrowed, must outlive the server): when
                                  set, it checks Hello's token instead of `token`, with its
                                  per-peer failure delays; re-read by its owner on SIGHUP */
  tlc_tls_t *tls;              /* TLS on every TCP listener (tls.h; borrowed, must outlive the
                                  server); NULL: plain TCP. Unix sockets stay plain */
  uint64_t tls_handshake_ms;   /* a TLS handshake must complete within this, else the
                                  connection is closed without a word (default 5000) */
  unsigned unix_mode;          /* permissions of a Unix socket created here (default 0660) */
  uint64_t instance_id;        /* 0: random (R14) */
  int write_on_loop;           /* 1: write to subscribers from the loop thread with uv_write
                                  instead of the serving thread (default 0: the thread, started
                                  with the first connection) */
  const char *daemon_version;  /* for Welcome (default "tlcapd VERSION", tlc_version.h) */
  /* Log hook (NULL: silent). Lines name the subscriber ("sub#N addr"). */
  void (*log)(void *ud, int level, const char *msg);
  void *log_ud;
} tlc_pubsub_opts_t;

/* Counters (for the daemon's status and the tests). */
typedef struct tlc_pubsub_stats {
  uint64_t accepted;            /* connections accepted */
  uint64_t rejected_limit;      /* closed with "too many subscribers" */
  uint64_t rejected_address;    /* ... of them: their address had max_per_address */
  uint64_t closed_frame;        /* closed for a malformed frame or message */
  uint64_t closed_oversize;     /* closed for a frame above the cap */
  uint64_t closed_auth;         /* closed for a wrong token or no Hello in time */
  uint64_t closed_timeout;      /* closed for a request left incomplete too long */
  uint64_t closed_hard;         /* closed at the hard output cap */
  uint64_t closed_soft;         /* closed after the soft cap held too long */
  uint64_t closed_peer;         /* the peer went away (EOF, reset) */
  uint64_t closed_tls;          /* TLS handshake failed (not TLS, bad version) or too slow */
  uint64_t requests;            /* requests dispatched */
  uint64_t bad_strings;         /* requests refused: a string field held a NUL byte */
  uint64_t unknown_requests;    /* requests of a type this server does not know */
  uint64_t snapshots_built;     /* snapshot messages encoded (shared ones count once) */
  uint64_t snapshots_sent;      /* snapshot messages written to subscribers */
  uint64_t snapshots_coalesced; /* slot replacements: a newer snapshot replaced an unsent one */
  uint64_t batches_built;
  uint64_t batches_dropped; /* per subscriber, summed */
  uint64_t events_dropped;
  uint64_t target_events;
  uint64_t violations_sent;       /* TE_VIOLATION events sent (tlc_pubsub_violation) */
  uint64_t violations_suppressed; /* ... not sent: over the rate limit (TLC_VSERVE_RATE) */
  size_t subscribers;             /* live connections (authenticated or not) */
  size_t feeds;                   /* distinct subscription specs with a timer */
  size_t queued_bytes;            /* sum of the subscribers' queued bytes */
} tlc_pubsub_stats_t;

/* Fills *o with the defaults above. */
void tlc_pubsub_opts_default(tlc_pubsub_opts_t *o);

/* Creates a server on `loop` (not listening yet). `o` (NULL: defaults) is copied, the token
 * too; `p` is copied and must stay usable until the close callback. Returns 0 with *out set,
 * or TLC_ENOMEM / a UV_* code; *out is then NULL and nothing needs closing. */
int tlc_pubsub_new(uv_loop_t *loop, const tlc_pubsub_opts_t *o, const tlc_view_t *p,
                   tlc_pubsub_t **out);

/* Listens on TCP host:port ("127.0.0.1", "::1", "0.0.0.0", ...; numeric, or "localhost").
 * port 0 picks a free port, returned in *bound_port (may be NULL). Refuses (TLC_EINVAL, and a
 * log line saying why) a non-loopback address when no token is configured (R16), and warns
 * about one without TLS. With opts.tls the port speaks TLS only. Returns 0 or a negative
 * error. May be called for several addresses. */
int tlc_pubsub_listen_tcp(tlc_pubsub_t *ps, const char *host, int port, int *bound_port);

/* Listens on a Unix socket at `path`, created with opts.unix_mode. A stale socket file (nobody
 * accepts on it) is removed first; a live one gives UV_EADDRINUSE; a non-socket file at the path
 * gives UV_EEXIST and is left alone. Peers' credentials (SO_PEERCRED) are logged on accept.
 * The file is removed when the server closes. */
int tlc_pubsub_listen_unix(tlc_pubsub_t *ps, const char *path);

/* Adopts an already-listening socket (systemd socket activation). `is_unix` says whether it is
 * AF_UNIX. A non-loopback TCP socket without a token is refused (TLC_EINVAL) as above. */
int tlc_pubsub_listen_fd(tlc_pubsub_t *ps, int fd, int is_unix);

/* Socket activation: takes, from the inherited sockets `fds` (tlc_sd_listen_fds), those named
 * "serve" or "subscribe" that no one took yet, as TCP or Unix listeners (tlc_pubsub_listen_fd),
 * and marks them taken; the others are left for their servers. Returns 0, or a negative error
 * after logging which fd is wrong (not a listening stream socket, or refused): the caller must
 * then fail start-up. Loop thread. */
struct tlc_sd_fd;
int tlc_pubsub_adopt(tlc_pubsub_t *ps, struct tlc_sd_fd *fds, int n);

/* Closes every listener and subscriber (those get an ERR_SHUTDOWN error message, sent if their
 * socket takes it at once) and frees everything; `cb` (may be NULL) runs from the loop once the
 * last handle is closed. The server must not be used after this call. */
void tlc_pubsub_close(tlc_pubsub_t *ps, void (*cb)(void *ud), void *ud);

/* A target event (`kind`: enum tlc_ps_ev) for subscribers whose subscriptions match `target`.
 * `detail` may be NULL. A control message: never dropped (counts against the hard cap). */
void tlc_pubsub_target_event(tlc_pubsub_t *ps, const char *target, int kind, const char *detail);

/* A budget violation of `target` (budget/budget.h: v is one of watch w's, both borrowed, read
 * during the call) as a TE_VIOLATION target event for the subscribers with a subscription
 * matching `target` (docs/budgets.md "Served"). At most TLC_VSERVE_RATE (vserve/vserve.h) a
 * second per (target, budget) are sent; the others are counted and the next one sent carries
 * their number in TargetEvent.suppressed. A control message: never dropped. The daemon calls
 * it from the watch's on_violation (the engine's pass, loop thread), with key, the watch's
 * number for (target, v's budget) (budget/budget.h: tlc_bwatch_key(w, v->budget), no other),
 * and now_ms, the loop's time (uv_now): read once for pubsub and fleet. Returns the earliest
 * monotonic ms at which another violation of that (target, budget) can be sent, 0 when one could
 * be now: the violations before it would only be counted, so the caller may hold them back and
 * hand their number as `held` with its next call (or to tlc_pubsub_violations_held), which
 * counts them exactly as if each had come (a storm then pays this call about ten times a second
 * per budget, not once a violation). */
struct tlc_bwatch;
struct tlc_violation;
uint64_t tlc_pubsub_violation(tlc_pubsub_t *ps, const char *target, const struct tlc_bwatch *w,
                              const struct tlc_violation *v, uint64_t key, uint64_t now_ms,
                              uint64_t held);
/* `held` violations of budget `budget` of watch w held back after tlc_pubsub_violation's answer
 * and not handed over since (key as there): counted as not sent. The caller's last ones before
 * its watch's budgets change or it goes. */
void tlc_pubsub_violations_held(tlc_pubsub_t *ps, const char *target, const struct tlc_bwatch *w,
                                size_t budget, uint64_t key, uint64_t now_ms, uint64_t held);

/* A batch of decoded events of `target` (borrowed, only read during the call) for subscribers
 * that asked for events. Encoded at most once (in chunks of opts.max_batch_events) and shared;
 * costs nothing when nobody asked. */
void tlc_pubsub_events(tlc_pubsub_t *ps, const char *target, const tlc_event_t *ev, size_t n);

/* Runs the subscription ticks that are due now, if any (cheap otherwise: one clock read).
 * Ticks normally run from the server's own timer; a loop turn that spends long in ingest
 * delays that timer, so the daemon also calls this between batches of events it feeds to the
 * engines, which keeps snapshots on time (the engines are consistent between batches). Loop
 * thread; never from inside a pubsub callback. */
void tlc_pubsub_poll(tlc_pubsub_t *ps);

/* Copies the counters. */
void tlc_pubsub_get_stats(const tlc_pubsub_t *ps, tlc_pubsub_stats_t *out);

/* Appends the server's figures to a STATUS line in buf[0, len): " subscribers=N", with a token
 * file " auth_failed=N" (the token's refusals, tlc_auth_get_stats: every server that checks it),
 * with TLS " tls_failed=N" (closed_tls). Nothing when buf is full. Loop thread. */
void tlc_pubsub_status(const tlc_pubsub_t *ps, char *buf, size_t len);

/* Subscribers (authenticated, not closing) with a subscription whose targets include `target`
 * (statistics or events; a one-off GetStats is no subscription). Loop thread; cost
 * O(subscribers x their subscriptions' target patterns). */
size_t tlc_pubsub_target_subscribers(const tlc_pubsub_t *ps, const char *target);

/* The instance id sent in Welcome and every snapshot. */
uint64_t tlc_pubsub_instance_id(const tlc_pubsub_t *ps);

/* Constant-time comparison of a presented token with the secret: 1 when equal. Time depends
 * only on the secret's length, never on where the first difference is. */
int tlc_pubsub_token_equal(const uint8_t *given, size_t given_len, const uint8_t *secret,
                           size_t secret_len);

#endif
