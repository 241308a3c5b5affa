/* msg.c - encoded messages shared by reference count, errors encoded, and the module's log line:
 * what every other file of pubsub uses; calls none of them. Loop thread, except
 * tlc__ps_msg_pack (any thread: range answers are encoded on the pool).
 */
#include "pubsub/pubsub-int.h"

#include "base/alloc.h"
#include "base/err.h"
#include "proto/convert.h"
#include "proto/frame.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void tlc__ps_logf_(tlc_pubsub_t *ps, int level, const char *fmt, ...) {
  char line[512];
  va_list ap;
  if (ps->o.log == NULL)
    return;
  va_start(ap, fmt);
  vsnprintf(line, sizeof(line), fmt, ap);
  va_end(ap);
  ps->o.log(ps->o.log_ud, level, line);
}

uint64_t tlc__ps_now_ms(tlc_pubsub_t *ps) {
  return uv_now(ps->loop);
}

void tlc__ps_msg_unref(msg_t *m) {
  if (m != NULL && --m->refs == 0)
    tlc_free(m);
}

msg_t *tlc__ps_msg_ref(msg_t *m) {
  m->refs++;
  return m;
}

/* Encodes a ServerMessage into a new message (refs 1), or NULL (no memory, or above the cap:
 * *too_big is then set when given). */
msg_t *tlc__ps_msg_encode(tlc_pubsub_t *ps, const Tlcap__ServerMessage *sm, int kind,
                          int *too_big) {
  return tlc__ps_msg_pack(ps->o.max_message, sm, kind, too_big);
}

msg_t *tlc__ps_msg_pack(size_t max_message, const Tlcap__ServerMessage *sm, int kind,
                        int *too_big) {
  size_t payload, n = tlc_pb_frame_size(&sm->base, &payload);
  msg_t *m;
  if (too_big != NULL)
    *too_big = 0;
  if (n > max_message) {
    if (too_big != NULL)
      *too_big = 1;
    return NULL;
  }
  m = tlc_malloc(sizeof(*m) + n);
  if (m == NULL)
    return NULL;
  memset(m, 0, sizeof(*m));
  m->refs = 1;
  m->kind = (uint8_t)kind;
  m->len = tlc_pb_frame_pack(&sm->base, payload, m->data);
  return m;
}

/* An Error message (request id `req`), encoded; NULL when memory is short. */
msg_t *tlc__ps_error_encode(tlc_pubsub_t *ps, uint32_t req, int code, const char *text, int fatal,
                            int detail) {
  Tlcap__ServerMessage sm;
  Tlcap__Error e;
  tlcap__server_message__init(&sm);
  tlcap__error__init(&e);
  sm.request_id = req;
  sm.msg_case = TLCAP__SERVER_MESSAGE__MSG_ERROR;
  sm.error = &e;
  e.code = (Tlcap__ErrorCode)code;
  e.message = (char *)text;
  e.fatal = fatal ? 1 : 0;
  e.detail_code = detail;
  return tlc__ps_msg_encode(ps, &sm, PSM_CONTROL, NULL);
}
