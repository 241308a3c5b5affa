/* tlcap_client.h - a small C library to talk to tlcapd's subscriber port.
 *
 * Connects over TCP ("HOST:PORT", "[V6ADDR]:PORT"), TLS ("tls://HOST:PORT": OpenSSL, the
 * daemon's certificate verified against opts.ca_file or the system's CAs, and its name or IP
 * against HOST) or a Unix socket ("unix:PATH"), says Hello (with a token when one is given),
 * and then sends requests and receives decoded messages (the protobuf-c structs of
 * proto/tlcap.proto, see tlcap.pb-c.h in the build tree). It keeps the subscriptions it sent
 * so that a reconnection restores them after the daemon restarts (the new Welcome's
 * instance_id then differs: statistics start again).
 *
 * Reconnection: with opts.reconnect, tlc_client_recv itself reconnects when the link is lost
 * (EOF, a reset, or the daemon's ERR_SHUTDOWN), with a backoff that doubles from
 * opts.backoff_min_ms to opts.backoff_max_ms, subscribes again, and tells the caller through
 * opts.event_cb (lost, each failed attempt, reconnected: with both instance ids, so a restart
 * is told from a dropped link). Errors that another attempt cannot cure (a refused token, a
 * certificate that does not verify, no common protocol version) end it: tlc_client_recv
 * returns them. Without opts.reconnect (one-shot commands) every loss is returned at once.
 *
 * Blocking I/O with timeouts (poll), no threads, no event loop: usable from a CLI as-is, and
 * from an event loop through tlc_client_fd() (wait for readability, then call tlc_client_recv
 * with timeout 0). Every received frame is checked against a size cap before anything is
 * allocated for it. Allocation goes through tlc_malloc.
 *
 * Errors: negative codes, either -errno (ECONNREFUSED, ETIMEDOUT, ...) or tlcap's TLC_E*;
 * tlc_strerror() names both. A function that fails also fills `err` when it takes one.
 * One tlc_client_t per thread.
 *
 * Example:
 *
 *   tlc_client_t *c;
 *   char err[256];
 *   if (tlc_client_connect("127.0.0.1:7400", NULL, &c, err, sizeof err) < 0) { puts(err); ... }
 *   Tlcap__Subscribe s = TLCAP__SUBSCRIBE__INIT;
 *   s.interval_ms = 1000;
 *   tlc_client_subscribe(c, &s);
 *   for (;;) {
 *     Tlcap__ServerMessage *m;
 *     if (tlc_client_recv(c, -1, &m) <= 0) break;
 *     if (m->msg_case == TLCAP__SERVER_MESSAGE__MSG_SNAPSHOT) ...
 *     tlc_client_msg_free(m);
 *   }
 *   tlc_client_free(c);
 */
#ifndef TLCAP_CLIENT_H
#define TLCAP_CLIENT_H

#include "tlc_err.h" /* the TLC_E* codes and tlc_strerror() */
#include "tlcap.pb-c.h"

#include <stddef.h>
#include <stdint.h>

/* The subscriber address tlcap uses by default. */
#define TLC_CLIENT_DEFAULT_ADDR "127.0.0.1:7400"

typedef struct tlc_client tlc_client_t;

/* What opts.event_cb is told. */
enum tlc_client_ev {
  TLC_CLIENT_EV_LOST = 1,       /* the link went (reason); reconnecting */
  TLC_CLIENT_EV_RETRY = 2,      /* an attempt failed (reason); the next after backoff_ms */
  TLC_CLIENT_EV_RECONNECTED = 3 /* back, subscriptions sent again */
};

typedef struct tlc_client_event {
  int kind;                 /* enum tlc_client_ev */
  const char *reason;       /* LOST, RETRY: why (valid during the call) */
  unsigned attempts;        /* attempts made since the loss */
  uint64_t backoff_ms;      /* RETRY: the wait before the next attempt */
  uint64_t down_ms;         /* RECONNECTED: time since the loss */
  uint64_t old_instance_id; /* the daemon's instance before the loss */
  uint64_t instance_id;     /* RECONNECTED: the daemon's instance now */
  int restarted;            /* RECONNECTED: instance_id != old_instance_id */
} tlc_client_event_t;

typedef struct tlc_client_opts {
  const char *name;    /* client_name in Hello (default "tlcap-client") */
  const char *token;   /* secret for a daemon that requires one (NULL: none) */
  int timeout_ms;      /* connect, Hello and request timeout (default 5000) */
  size_t max_message;  /* cap on a received message (default 64 MiB) */
  size_t max_queued;   /* unsolicited messages kept while waiting for a reply (default 4096) */
  const char *ca_file; /* tls://: PEM CA certificates to verify the daemon against (NULL: the
                          system's default CA store) */
  int reconnect;       /* 1: tlc_client_recv reconnects by itself (above) */
  uint64_t backoff_min_ms, backoff_max_ms; /* reconnect backoff (defaults 100, 5000) */
  /* Told about losses and reconnections (may be NULL); runs inside tlc_client_recv. */
  void (*event_cb)(void *ud, const tlc_client_event_t *ev);
  void *event_ud;
} tlc_client_opts_t;

/* The one dialer of the client side (subscribers and `tlcap send`): connects to addr
 * ("HOST:PORT", "[V6]:PORT" or "unix:PATH") within timeout_ms (-1: no limit), trying every
 * address the name resolves to; *out is a connected non-blocking socket (the caller's). On
 * failure returns a negative error and err says why, ending "(is tlcapd WHAT there?)" (what
 * NULL: "running and serving"). Blocking; any thread. */
int tlc_client_dial(const char *addr, int timeout_ms, const char *what, int *out, char *err,
                    size_t errlen);

/* Connects to `addr`, sends Hello and waits for Welcome. `o` may be NULL (defaults; copied).
 * Returns 0 with *out set (free with tlc_client_free), or a negative error with a message in
 * err naming the address ("cannot connect to 127.0.0.1:7400: connection refused ...", or the
 * daemon's own Error message). */
int tlc_client_connect(const char *addr, const tlc_client_opts_t *o, tlc_client_t **out, char *err,
                       size_t errlen);

/* Closes the connection and frees everything. NULL is accepted. */
void tlc_client_free(tlc_client_t *c);

/* The socket, for poll()/an event loop. -1 while disconnected. */
int tlc_client_fd(const tlc_client_t *c);

/* The address given to connect. */
const char *tlc_client_addr(const tlc_client_t *c);

/* The daemon's Welcome of the current connection (owned by the client). */
const Tlcap__Welcome *tlc_client_welcome(const tlc_client_t *c);

/* Sends one request. A request_id of 0 is replaced by the next free id. Returns the request id
 * (> 0) or a negative error. */
int tlc_client_send(tlc_client_t *c, Tlcap__ClientMessage *m);

/* Receives the next message: returns 1 with *out set (free with tlc_client_msg_free), 0 when
 * timeout_ms passed (0: do not wait; -1: wait forever), or a negative error (-ECONNRESET or
 * TLC_EIO when the daemon closed, TLC_ELIMIT for a message above the cap, TLC_EFRAME for a
 * malformed one). With opts.reconnect a lost link is re-established here (see above): the
 * call returns 0 when timeout_ms passes while reconnecting, and an error only when reconnecting
 * cannot succeed (tlc_client_last_error says why). */
int tlc_client_recv(tlc_client_t *c, int timeout_ms, Tlcap__ServerMessage **out);

/* Frees a message returned by the client. NULL is accepted. */
void tlc_client_msg_free(Tlcap__ServerMessage *m);

/* Sends `req` and waits up to the client's timeout for the reply with the same request id
 * (messages that arrive meanwhile are kept for tlc_client_recv, up to max_queued). An Error
 * reply is returned like any other (check msg_case). Returns 1 with *reply, or a negative
 * error (with err filled). */
int tlc_client_request(tlc_client_t *c, Tlcap__ClientMessage *req, Tlcap__ServerMessage **reply,
                       char *err, size_t errlen);

/* Sends a Subscribe (subscription_id 0 gets the next free id) and remembers it for reconnects.
 * Does not wait for the Ack (it arrives through tlc_client_recv). Returns the subscription id
 * or a negative error. */
int tlc_client_subscribe(tlc_client_t *c, Tlcap__Subscribe *s);

/* Reconnects (after an error or EOF): connect, Hello, then every remembered subscription is
 * sent again. Returns 0 or a negative error with err filled. */
int tlc_client_reconnect(tlc_client_t *c, char *err, size_t errlen);

/* The last reconnection failure's text ("" if none). */
const char *tlc_client_last_error(const tlc_client_t *c);

/* Writes a human-readable message for a received Error into buf. Returns buf. */
char *tlc_client_error_text(const Tlcap__Error *e, char *buf, size_t len);

#endif
