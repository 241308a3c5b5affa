/* nats-int.h - what the files of daemon/fleet share (private to the library): the bridge,
 * the one object libnats's threads touch (bridge.c), and the callbacks nats.c registers with
 * libnats. nats.c (the loop side: connection, stream, publishing, setup and teardown) calls
 * bridge.c's callbacks only through libnats, and bridge.c never calls nats.c.
 */
#ifndef TLC_FLEET_NATS_INT_H
#define TLC_FLEET_NATS_INT_H

#include "base/list.h"
#include "fleet/fleet.h"

#include <nats/nats.h>
#include <uv.h>

#include <stddef.h>
#include <stdint.h>

#define JS_REPLY_MAX 4096
#define ERR_TEXT     160

enum { BR_DISCONNECTED = 1, BR_CLOSED = 2, BR_JS_REPLY = 4 };

/* What libnats threads may touch. */
typedef struct bridge {
  uv_mutex_t mu;
  uv_async_t *wake; /* NULL once the fleet is gone */
  unsigned flags;
  char reply[JS_REPLY_MAX];
  size_t reply_len;
  int live;     /* connections whose closed callback has not run yet */
  int expected; /* of those, closed by us (their closed callback is no news) */
  /* JetStream acknowledgements (ack_cb) and what publish has in flight */
  int js_used;                      /* ack_cb may run, even after the closed callback */
  uint64_t acked;                   /* acknowledged: published */
  uint64_t drops[TLC_FLEET_DROP_N]; /* refused or unanswered, by reason */
  uint64_t dropped_bytes;
  uint64_t inflight, inflight_bytes;    /* published, acknowledgement to come */
  char why[TLC_FLEET_DROP_N][ERR_TEXT]; /* the server's last word for each reason */
  SLIST_ENTRY(bridge) orphan; /* in nats.c orphans (not libnats): tlc_fleet_shutdown frees these */
} bridge_t;

/* libnats's threads: the connection was lost; closed (news unless we closed it: expected). */
void tlc__fleet_disconnected_cb(natsConnection *nc, void *closure);
void tlc__fleet_closed_cb(natsConnection *nc, void *closure);
/* libnats's thread: a JetStream API reply (the stream's creation) into the bridge. */
void tlc__fleet_js_reply_cb(natsConnection *nc, natsSubscription *sub, natsMsg *msg, void *closure);
/* libnats's acknowledgement thread: one JetStream publish acknowledged, or dropped by reason. */
void tlc__fleet_ack_cb(jsCtx *js, natsMsg *msg, jsPubAck *pa, jsPubAckErr *pae, void *closure);
/* A drop reason in words, for the log ("stream full"); "" for an unknown one. Any thread. */
const char *tlc__fleet_drop_word(int r);

#endif
