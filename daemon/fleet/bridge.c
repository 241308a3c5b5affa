/* bridge.c - what libnats's own threads run (nats-int.h): the connection's disconnected and
 * closed callbacks, the JetStream API replies, and the acknowledgement of every JetStream
 * publish (tlc__fleet_ack_cb: published, or a drop by reason, with the server's words). They touch
 * only the bridge, under its mutex, and wake the loop through its uv_async_t (nats.c's wake_cb
 * reads what they left); nothing of tlcapd's is touched from them.
 */
#include "fleet/nats-int.h"

#include <stdio.h>
#include <string.h>

static void bridge_set(bridge_t *b, unsigned flag) {
  uv_mutex_lock(&b->mu);
  b->flags |= flag;
  if (b->wake != NULL)
    uv_async_send(b->wake);
  uv_mutex_unlock(&b->mu);
}

void tlc__fleet_disconnected_cb(natsConnection *nc, void *closure) {
  (void)nc;
  bridge_set(closure, BR_DISCONNECTED);
}

void tlc__fleet_closed_cb(natsConnection *nc, void *closure) {
  bridge_t *b = closure;
  (void)nc;
  uv_mutex_lock(&b->mu);
  if (b->live > 0)
    b->live--;
  if (b->expected > 0) {
    b->expected--;
  } else {
    b->flags |= BR_CLOSED;
    if (b->wake != NULL)
      uv_async_send(b->wake);
  }
  uv_mutex_unlock(&b->mu);
}

void tlc__fleet_js_reply_cb(natsConnection *nc, natsSubscription *sub, natsMsg *msg,
                            void *closure) {
  bridge_t *b = closure;
  const char *d = natsMsg_GetData(msg);
  int len = natsMsg_GetDataLength(msg);
  (void)nc;
  (void)sub;
  uv_mutex_lock(&b->mu);
  if (len < 0)
    len = 0;
  if ((size_t)len >= sizeof(b->reply))
    len = (int)sizeof(b->reply) - 1;
  if (d != NULL)
    memcpy(b->reply, d, (size_t)len);
  b->reply[len] = '\0';
  b->reply_len = (size_t)len;
  b->flags |= BR_JS_REPLY;
  if (b->wake != NULL)
    uv_async_send(b->wake);
  uv_mutex_unlock(&b->mu);
  natsMsg_Destroy(msg);
}

static const char *const drop_names[TLC_FLEET_DROP_N] = {
  "not_connected", "buffer_full", "too_large", "encode",         "stream_full",
  "no_responders", "timeout",     "refused",   "connection_lost"
};

/* the same in words, for the log */
static const char *const drop_words[TLC_FLEET_DROP_N] = {
  "not connected", "buffer full", "too large", "not built",      "stream full",
  "no responders", "timeout",     "refused",   "connection lost"
};

const char *tlc_fleet_drop_name(int r) {
  return r >= 0 && r < TLC_FLEET_DROP_N ? drop_names[r] : NULL;
}

/* What a negative acknowledgement means. A full stream with discard new answers "maximum
 * messages exceeded" (or bytes, or per subject) as a store failure; an account or server out of
 * JetStream storage answers with a resource error. */
static int refusal_reason(const jsPubAckErr *pae) {
  if (pae->Err == NATS_TIMEOUT)
    return TLC_FLEET_DROP_TIMEOUT;
  if (pae->Err == NATS_NO_RESPONDERS)
    return TLC_FLEET_DROP_NO_RESPONDERS;
  switch ((int)pae->ErrCode) {
  case JSStreamStoreFailedErr:
    return pae->ErrText != NULL && strstr(pae->ErrText, "maximum") != NULL
               ? TLC_FLEET_DROP_STREAM_FULL
               : TLC_FLEET_DROP_REFUSED;
  case JSAccountResourcesExceededErr:
  case JSInsufficientResourcesErr:
  case JSMemoryResourcesExceededErr:
  case JSStorageResourcesExceededErr:
    return TLC_FLEET_DROP_STREAM_FULL;
  default:
    return TLC_FLEET_DROP_REFUSED;
  }
}

/* The outcome of one JetStream publish (libnats's acknowledgement thread): acknowledged, or a
 * drop by reason. */
void tlc__fleet_ack_cb(jsCtx *js, natsMsg *msg, jsPubAck *pa, jsPubAckErr *pae, void *closure) {
  bridge_t *b = closure;
  uint64_t len = (uint64_t)natsMsg_GetDataLength(msg);
  (void)js;
  uv_mutex_lock(&b->mu);
  if (b->inflight > 0)
    b->inflight--;
  b->inflight_bytes -= len < b->inflight_bytes ? len : b->inflight_bytes;
  if (pa != NULL) {
    b->acked++;
  } else {
    int r = pae != NULL ? refusal_reason(pae) : TLC_FLEET_DROP_REFUSED;
    b->drops[r]++;
    b->dropped_bytes += len;
    if (pae != NULL && pae->ErrText != NULL)
      snprintf(b->why[r], sizeof(b->why[r]), "%s", pae->ErrText);
  }
  uv_mutex_unlock(&b->mu);
  natsMsg_Destroy(msg);
}

const char *tlc__fleet_drop_word(int r) {
  return r >= 0 && r < TLC_FLEET_DROP_N ? drop_words[r] : "";
}
