/* request.h - the requests (request.c): a connection's input decoded and dispatched
 * (Hello and the token, Subscribe, GetStats whole and in parts, the lists, rotate, mapping,
 * ping). Its per-connection state is tlc__ps_sub_t.gs (a GetStats in parts). Loop thread.
 */
#ifndef TLC_PUBSUB_REQUEST_H
#define TLC_PUBSUB_REQUEST_H

#include "pubsub/feed.h"
#include "pubsub/range.h"
#include "pubsub/sub.h"

void tlc__ps_sub_input(tlc__ps_sub_t *s, const uint8_t *p, size_t n);
/* sub's writable hook: the next part of a GetStats in parts. */
void tlc__ps_gs_next(tlc__ps_sub_t *s);
/* sub's release hook: a closing connection's range query and subscriptions go. */
void tlc__ps_request_release(tlc__ps_sub_t *s);

/* ---- detached subscribers (fuzzing) ---- */

/* A subscriber with no socket, for the request fuzzer: frames fed in with
 * tlc__ps_detached_feed are decoded and dispatched exactly as from a socket; replies are
 * encoded and then released instead of written. `authed` skips Hello and the token (the fuzz
 * build's authentication bypass). Returns NULL on no memory. */
tlc__ps_sub_t *tlc__ps_detached_new(tlc_pubsub_t *ps, int authed);

/* Feeds raw bytes (framing included). Returns 0 while the subscriber is open, 1 once it has
 * been closed by what it sent (it must still be freed). */
int tlc__ps_detached_feed(tlc__ps_sub_t *s, const uint8_t *data, size_t len);

/* Runs every feed's tick once (what the interval timers do), for the fuzzer. */
void tlc__ps_tick_all(tlc_pubsub_t *ps);

/* Frees a detached subscriber and everything it holds. */
void tlc__ps_detached_free(tlc__ps_sub_t *s);

/* Bytes encoded for a detached subscriber so far (replies it would have been sent). */
uint64_t tlc__ps_detached_bytes(const tlc__ps_sub_t *s);

#endif
