/* pubsub-int.h - the subscriber server's root (private to pubsub, its tests and fuzzers): the
 * owners' headers and struct tlc_pubsub, which holds each owner's state as its own struct. The
 * layers, each calling only those below it (scripts/call-edges daemon/pubsub):
 *
 *   server.c   listeners, accepting, the server's life             state: tlc_pubsub.srv
 *   request.c  requests decoded and dispatched (request.h)          state: sub's gs
 *   range.c    range statistics off the loop (range.h)              state: sub's hq
 *   feed.c     feeds, ticks, mirrors, GetStats snapshots (feed.h)   state: tlc_pubsub.fd
 *   sub.c      a connection: queues, TLS, writes, fan-out (sub.h)   state: tlc_pubsub.sb
 *   writer.c   the serving thread (writer.h)                        state: *tlc_pubsub.sb.wr
 *   spec.c     subscription specs (spec.h)
 *   msg.c      shared messages, errors, the log line (msg.h)
 *
 * What a lower layer needs of an upper one goes through tlc_pubsub.up, which server.c fills.
 * Everything is the loop thread's but the serving thread's share (writer.h) and a TLS session
 * (sub.h). The design is described in server.c.
 */
#ifndef TLC_PUBSUB_INT_H
#define TLC_PUBSUB_INT_H

#include "pubsub/feed.h"
#include "pubsub/msg.h"
#include "pubsub/pubsub.h"
#include "pubsub/range.h"
#include "pubsub/request.h"
#include "pubsub/spec.h"
#include "pubsub/sub.h"
#include "pubsub/writer.h"
#include "vserve/vserve.h"

#include <stddef.h>
#include <stdint.h>

typedef struct listener {
  union {
    uv_handle_t handle;
    uv_stream_t stream;
    uv_tcp_t tcp;
    uv_pipe_t pipe;
  } h;
  tlc_pubsub_t *ps;
  uint8_t is_unix;
  uint8_t tls; /* speaks TLS (opts.tls, TCP) */
  char *path;  /* unix: unlinked on close */
} listener_t;

/* The server's own state (tlc_pubsub.srv): listeners and the housekeeping timer. Loop thread. */
typedef struct tlc__ps_server {
  listener_t *listeners[MAX_LISTENERS];
  size_t nlisteners;
  uv_timer_t house; /* periodic soft-limit check; also keeps close_cb on the loop */
} tlc__ps_server_t;

/* What the lower layers call above them, filled by tlc_pubsub_new. Loop thread. */
typedef struct tlc__ps_up {
  void (*input)(tlc__ps_sub_t *s, const uint8_t *p, size_t n); /* bytes read (request.c) */
  void (*writable)(tlc__ps_sub_t *s); /* queue empty, no write in flight (request.c) */
  void (*release)(tlc__ps_sub_t *s);  /* closing: range query, subscriptions (request.c) */
  msg_t *(*catchup)(tlc__ps_sub_t *s, subn_t *sn, size_t idx); /* a slot's (feed.c) */
  void (*written)(tlc__ps_sub_t *s, int status); /* a serving-thread job back (sub.c) */
  void (*handle_closed)(tlc_pubsub_t *ps);       /* a handle of ours closed (server.c) */
} tlc__ps_up_t;

struct tlc_pubsub {
  uv_loop_t *loop;
  tlc_pubsub_opts_t o;
  uint8_t *token;
  size_t token_len;
  tlc_view_t p;
  uint64_t instance_id;
  tlc_pubsub_stats_t st;
  int closing;
  int open_handles; /* listeners + subscriber handles + timers + the writer's async */
  void (*close_cb)(void *ud);
  void *close_ud;
  tlc__ps_up_t up;
  tlc__ps_server_t srv;
  tlc__ps_subs_t sb;
  tlc__ps_feeds_t fd;
  tlc_vrate_t vrate; /* budget violations sent per (target, budget): tlc_pubsub_violation */
};

/* server.c */
void tlc__ps_handle_closed(tlc_pubsub_t *ps);
void tlc__ps_house_cb(uv_timer_t *t);

#endif
