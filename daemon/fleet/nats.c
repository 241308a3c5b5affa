/* nats.c - the NATS JetStream publisher (see fleet.h and docs/fleet.md).
 *
 * Design. One libnats connection attached to the daemon's loop by libnats's libuv adapter
 * (adapters/libuv.h): socket reads and writes happen in uv_poll callbacks on the loop thread,
 * and natsConnection_Publish only appends to the client's buffer. Three things could still wait:
 *   - the first connect (natsConnection_Connect reads INFO and answers PONG synchronously). A
 *     non-blocking probe runs first on the loop (uv_tcp_connect, then the server's INFO line
 *     within PROBE_MS); only a server that has just answered is connected to, with a short
 *     connect timeout. A failed probe or connect retries with backoff (1 s doubling to 30 s).
 *   - reconnection after the link drops: done the same way as the first connection, by this
 *     file on the loop. libnats's reconnect thread is switched off: it holds the connection's
 *     lock while it connects, so a publish from the loop could wait for it. Messages while no
 *     connection exists are dropped and counted.
 *   - the JetStream API (stream create/update) is request/reply: the request is published
 *     with a reply inbox whose subscription callback runs on a libnats thread; it copies the
 *     reply into the bridge (mutex) and wakes the loop through uv_async.
 *   - every message is a JetStream publish (js_PublishAsync): the stream's acknowledgement, a
 *     refusal (stream full with discard new, no stream: no responders) or libnats's timeout
 *     after ACK_WAIT_MS reaches ack_cb on a libnats thread, which counts it in the bridge. Only
 *     acknowledged messages count as published; the rest are drops by reason, which tick_cb
 *     logs on the loop at most every DROP_LOG_MS. js_PublishAsync would wait (StallWait) with
 *     libnats's MaxPending messages in flight: publish keeps fewer in flight, so it never does.
 * Every libnats callback only touches the bridge (a small mutex-protected struct); the loop
 * reads it in wake_cb, tick_cb and tlc_fleet_counters. The bridge outlives the fleet when a
 * callback may still come: until its connection's closed callback ran, and, once a JetStream
 * publish made libnats's acknowledgement thread, until tlc_fleet_shutdown has seen every libnats
 * thread end (that thread can still be in ack_cb after the closed callback).
 *
 * Bounded: the bytes the client holds unsent (natsConnection_Buffered) never exceed
 * buffer_bytes (also the client's reconnect buffer), nor do the bytes of the messages awaiting
 * their acknowledgement (libnats keeps a copy of each; at most MAX_INFLIGHT of them): a message
 * that would pass either is dropped and counted, as is anything published while no connection
 * exists. The packing buffer this file keeps is at most buffer_bytes too (a message whose bound
 * passes it is sized first).
 *
 * Cost on the loop: per interval, one engine snapshot per target whose statistics changed
 * (rows changed since the last one: a delta), a full one at connect and every full_interval;
 * an unchanged target costs a look at its counters and engine seq. The snapshot table, the
 * arena the protobuf-c messages are built in and the packing buffer are kept from message to
 * message (table: parts of at most PART_ROWS rows, arena: at most ARENA_KEEP, buffer: at most
 * buffer_bytes), and a statistics message is packed by protobuf-c once, into a buffer of a bound
 * computed from the descriptors (tlc_pb_row_field_max), not sized first (bench/RESULTS.md,
 * "Fleet: NATS publishing").
 *
 * What libnats's threads run (the callbacks above, ack_cb among them) is bridge.c, sharing the
 * bridge with this file through nats-int.h.
 *
 * Does not: subscribe to anything but its own JetStream replies; retry dropped messages.
 */
#include "fleet/nats-int.h"

#include "base/alloc.h"
#include "base/clock.h"
#include "base/err.h"
#include "base/json.h"
#include "base/log.h"
#include "ingest/target.h"
#include "proto/convert.h"
#include "vserve/vserve.h"

#include <nats/adapters/libuv.h>

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define PROBE_MS       2000
#define CONNECT_MS     1000
#define BACKOFF_MIN_MS 1000
#define BACKOFF_MAX_MS 30000
#define MANIFEST_MAX   (256u * 1024u)
#define SUBJECT_MAX    512
#define DEF_BUFFER     (8u << 20)
#define DEF_MAX_AGE_MS (7ull * 86400 * 1000)
#define DEF_MAX_BYTES  (1ull << 30)
#define PART_ROWS      1024       /* rows per statistics message at most (publish_target) */
#define ARENA_KEEP     (4u << 20) /* the message builder's memory kept across ticks at most */
#define ACK_WAIT_MS    5000       /* a message unacknowledged this long is a timeout drop */
#define MAX_INFLIGHT   4096       /* messages awaiting their acknowledgement at most */
#define DROP_LOG_MS    10000      /* drops are logged at most this often (tick_cb) */

typedef struct tstate {
  tlc_cursor_t cur; /* what was last published of the target (its gen, seq, last full) */
  uint64_t last_events, last_bytes;
} tstate_t;

enum { ST_IDLE, ST_PROBING, ST_CONNECTED, ST_BACKOFF, ST_CLOSING };

struct tlc_fleet {
  uv_loop_t *loop;
  const tlc_view_t *pv;
  tlc_fleet_opts_t o;
  char url[512], creds[1024], prefix[256], root[256], stream[128];
  char host[256];
  int port;
  int state;
  uint64_t backoff_ms;
  natsOptions *nopts;
  natsConnection *nc;
  natsSubscription *js_sub;
  jsCtx *js;       /* the JetStream context of nc (publish) */
  jsPubOptions po; /* its publish options (MaxWait: ACK_WAIT_MS) */
  char js_inbox[128];
  bridge_t *br;
  uv_async_t wake;
  uv_timer_t tick, retry;
  uv_tcp_t probe;
  uv_getaddrinfo_t gai;
  uv_connect_t conn_req;
  char probe_buf[512];
  size_t probe_len;
  int probe_open, probe_closing, gai_pending;
  int ever_connected;
  int handles; /* uv handles of ours still to close (tlc_fleet_close) */
  tstate_t *ts;
  size_t nts, capts;
  tlc_table_t tab;    /* the snapshot table of publish_target, kept across ticks */
  tlc_pb_arena_t pba; /* where publish_target builds messages, its chunks kept likewise */
  uint8_t *pbuf;      /* the packing buffer of publish, kept; at most buffer_bytes */
  size_t pcap;
  tlc_fleet_counters_t c;
  uint64_t tev_seq;
  tlc_vrate_t vrate; /* budget violations published per (target, budget) */
  int warned_size;
  uint64_t logged[TLC_FLEET_DROP_N]; /* drops by reason as last logged (log_drops) */
  uint64_t drop_log_ms;              /* when they were */
  void (*close_cb)(void *ud);
  void *close_ud;
};

static void flog(tlc_fleet_t *f, int level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void flog(tlc_fleet_t *f, int level, const char *fmt, ...) {
  char buf[1024];
  va_list ap;
  if (f->o.log == NULL)
    return;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  f->o.log(f->o.log_ud, level, buf);
}

static uint64_t thread_cpu_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

size_t tlc_fleet_subject_token(const char *in, char *out, size_t cap) {
  static const char hex[] = "0123456789ABCDEF";
  size_t n = 0;
  for (; *in != '\0'; in++) {
    unsigned char ch = (unsigned char)*in;
    int plain = (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
                strchr("_@:#+=[]-", ch) != NULL;
    if (plain) {
      if (n + 1 >= cap)
        return 0;
      out[n++] = (char)ch;
    } else {
      if (n + 3 >= cap)
        return 0;
      out[n++] = '%';
      out[n++] = hex[ch >> 4];
      out[n++] = hex[ch & 15];
    }
  }
  if (n == 0 || n >= cap)
    return 0;
  out[n] = '\0';
  return n;
}

/* ---- the libuv adapter, with poll changes in order and at once on the loop thread ----
 *
 * natsLibuv (nats/adapters/libuv.h) queues a poll change for the loop when it is asked from
 * another thread, and also on the loop thread while anything is queued (to keep the order).
 * libnats closes the socket right after asking to stop polling it (natsConnection_Close), so
 * a queued stop came too late: the poll handle still had a change pending for the closed
 * descriptor, and libuv abort()s when epoll_ctl fails on it. On the loop thread, the queue is
 * applied first and then the change itself, so polling has stopped before the socket closes.
 * (A libnats thread closing the connection, e.g. after a stale ping, still queues: libnats
 * holds the connection's lock around these calls, so they never run concurrently.) */
static void ev_drain(natsLibuvEvents *nle) {
  if (nle != NULL && nle->head != NULL && uv_key_get(&uvLoopThreadKey) == nle->loop)
    uvAsyncCb(nle->scheduler); /* what the scheduler's callback would do, in the same order */
}

static natsStatus ev_read(void *ud, bool add) {
  ev_drain(ud);
  return natsLibuv_Read(ud, add);
}

static natsStatus ev_write(void *ud, bool add) {
  ev_drain(ud);
  return natsLibuv_Write(ud, add);
}

static natsStatus ev_detach(void *ud) {
  ev_drain(ud);
  return natsLibuv_Detach(ud);
}

/* ---- connection lifecycle (loop thread) ---- */

static void start_probe(tlc_fleet_t *f);
static void ensure_stream(tlc_fleet_t *f);

static void retry_cb(uv_timer_t *t) {
  tlc_fleet_t *f = t->data;
  if (f->state == ST_BACKOFF)
    start_probe(f);
}

static void backoff(tlc_fleet_t *f) {
  if (f->state == ST_CLOSING)
    return;
  f->state = ST_BACKOFF;
  if (f->backoff_ms == 0)
    f->backoff_ms = BACKOFF_MIN_MS;
  uv_timer_start(&f->retry, retry_cb, f->backoff_ms, 0);
  f->backoff_ms *= 2;
  if (f->backoff_ms > BACKOFF_MAX_MS)
    f->backoff_ms = BACKOFF_MAX_MS;
}

/* The messages still awaiting their acknowledgement when the connection ended: none will come
 * (libnats hands them back), so they are drops, connection_lost; at tlc_fleet_close, not
 * counted. An acknowledgement being handled meanwhile counts its message in ack_cb instead. */
static void take_pending(tlc_fleet_t *f) {
  natsMsgList pend;
  uint64_t n = 0, bytes = 0;
  int i;
  if (js_PublishAsyncGetPendingList(&pend, f->js) != NATS_OK)
    return; /* none */
  for (i = 0; i < pend.Count; i++) {
    if (pend.Msgs[i] != NULL) {
      n++;
      bytes += (uint64_t)natsMsg_GetDataLength(pend.Msgs[i]);
    }
  }
  natsMsgList_Destroy(&pend);
  uv_mutex_lock(&f->br->mu);
  f->br->inflight -= n < f->br->inflight ? n : f->br->inflight;
  f->br->inflight_bytes -= bytes < f->br->inflight_bytes ? bytes : f->br->inflight_bytes;
  if (f->state != ST_CLOSING) {
    f->br->drops[TLC_FLEET_DROP_CONNECTION_LOST] += n;
    f->br->dropped_bytes += bytes;
  }
  uv_mutex_unlock(&f->br->mu);
}

static void drop_connection(tlc_fleet_t *f) {
  if (f->js_sub != NULL) {
    natsSubscription_Destroy(f->js_sub);
    f->js_sub = NULL;
  }
  if (f->nc != NULL) {
    if (!natsConnection_IsClosed(f->nc)) { /* its closed callback is still to come */
      uv_mutex_lock(&f->br->mu);
      f->br->expected++;
      uv_mutex_unlock(&f->br->mu);
    }
    natsConnection_Close(f->nc); /* no acknowledgement arrives after this */
    if (f->js != NULL) {
      take_pending(f);
      jsCtx_Destroy(f->js);
      f->js = NULL;
    }
    natsConnection_Destroy(f->nc);
    f->nc = NULL;
  }
  f->c.connected = 0;
}

static void mark_all_full(tlc_fleet_t *f) {
  size_t i;
  for (i = 0; i < f->nts; i++)
    tlc_cursor_want_full(&f->ts[i].cur);
}

static void do_connect(tlc_fleet_t *f) {
  natsStatus s;
  natsConnection *nc = NULL;
  s = natsConnection_Connect(&nc, f->nopts);
  if (s != NATS_OK) {
    flog(f, TLC_LOG_WARN, "nats %s: cannot connect: %s (retrying)", f->url, natsStatus_GetText(s));
    if (nc != NULL)
      natsConnection_Destroy(nc);
    backoff(f);
    return;
  }
  uv_mutex_lock(&f->br->mu);
  f->br->live++;
  uv_mutex_unlock(&f->br->mu);
  f->nc = nc;
  {
    /* libnats's MaxPending is a backstop: publish keeps at most MAX_INFLIGHT in flight, so
     * js_PublishAsync never stalls the loop (libnats counts a message until ack_cb returns) */
    jsOptions jo;
    jsOptions_Init(&jo);
    jo.PublishAsync.MaxPending = 2 * MAX_INFLIGHT;
    jo.PublishAsync.StallWait = 1;
    jo.PublishAsync.AckHandler = tlc__fleet_ack_cb;
    jo.PublishAsync.AckHandlerClosure = f->br;
    jsPubOptions_Init(&f->po);
    f->po.MaxWait = ACK_WAIT_MS;
    s = natsConnection_JetStream(&f->js, nc, &jo);
    if (s != NATS_OK) {
      f->js = NULL;
      flog(f, TLC_LOG_WARN, "nats %s: no JetStream context: %s (retrying)", f->url,
           natsStatus_GetText(s));
      drop_connection(f);
      backoff(f);
      return;
    }
    uv_mutex_lock(&f->br->mu);
    f->br->js_used = 1;
    uv_mutex_unlock(&f->br->mu);
  }
  f->state = ST_CONNECTED;
  if (f->ever_connected)
    f->c.reconnects++;
  f->ever_connected = 1;
  f->backoff_ms = 0;
  f->c.connected = 1;
  mark_all_full(f);
  flog(f, TLC_LOG_INFO, "nats %s: connected; publishing under %s.>", f->url, f->prefix);
  snprintf(f->js_inbox, sizeof(f->js_inbox), "_INBOX.tlcapd.%llx.%llx",
           (unsigned long long)f->o.instance_id, (unsigned long long)(uint64_t)tlc_now_unix_ms());
  if (natsConnection_Subscribe(&f->js_sub, nc, f->js_inbox, tlc__fleet_js_reply_cb, f->br) !=
      NATS_OK) {
    f->js_sub = NULL;
    flog(f, TLC_LOG_WARN, "nats %s: cannot subscribe to JetStream replies", f->url);
  } else {
    ensure_stream(f);
  }
}

static void probe_closed_cb(uv_handle_t *h) {
  tlc_fleet_t *f = h->data;
  int ok = f->probe_len > 5 && memcmp(f->probe_buf, "INFO ", 5) == 0;
  f->probe_open = 0;
  f->probe_closing = 0;
  if (f->state == ST_CLOSING)
    return; /* tlc_fleet_close's wait timer sees it */
  uv_timer_stop(&f->retry);
  if (ok)
    do_connect(f);
  else
    backoff(f);
}

static void probe_end(tlc_fleet_t *f) {
  if (f->probe_open && !f->probe_closing) {
    f->probe_closing = 1;
    uv_close((uv_handle_t *)&f->probe, probe_closed_cb);
  }
}

static void probe_alloc_cb(uv_handle_t *h, size_t sz, uv_buf_t *buf) {
  tlc_fleet_t *f = h->data;
  (void)sz;
  buf->base = f->probe_buf + f->probe_len;
  buf->len = sizeof(f->probe_buf) - 1 - f->probe_len;
}

static void probe_read_cb(uv_stream_t *s, ssize_t n, const uv_buf_t *buf) {
  tlc_fleet_t *f = s->data;
  (void)buf;
  if (n < 0) {
    f->probe_len = 0; /* no INFO: failed */
    probe_end(f);
    return;
  }
  f->probe_len += (size_t)n;
  f->probe_buf[f->probe_len] = '\0';
  if (strstr(f->probe_buf, "\r\n") != NULL || f->probe_len >= sizeof(f->probe_buf) - 1)
    probe_end(f);
}

static void probe_connect_cb(uv_connect_t *req, int status) {
  tlc_fleet_t *f = req->data;
  if (status < 0 || f->state != ST_PROBING) {
    if (status < 0)
      flog(f, TLC_LOG_DEBUG, "nats %s: probe: %s", f->url, uv_strerror(status));
    f->probe_len = 0;
    probe_end(f);
    return;
  }
  if (uv_read_start((uv_stream_t *)&f->probe, probe_alloc_cb, probe_read_cb) < 0) {
    f->probe_len = 0;
    probe_end(f);
  }
}

static void probe_timeout_cb(uv_timer_t *t) {
  tlc_fleet_t *f = t->data;
  if (f->state == ST_PROBING && f->probe_open) {
    flog(f, TLC_LOG_DEBUG, "nats %s: no INFO within %d ms", f->url, PROBE_MS);
    f->probe_len = 0;
    probe_end(f);
  }
}

static void gai_cb(uv_getaddrinfo_t *req, int status, struct addrinfo *res) {
  tlc_fleet_t *f = req->data;
  int r;
  f->gai_pending = 0;
  if (f->state != ST_PROBING) {
    uv_freeaddrinfo(res);
    return;
  }
  if (status < 0 || res == NULL) {
    flog(f, TLC_LOG_WARN, "nats %s: cannot resolve %s: %s (retrying)", f->url, f->host,
         uv_strerror(status));
    uv_freeaddrinfo(res);
    backoff(f);
    return;
  }
  r = uv_tcp_init(f->loop, &f->probe);
  if (r == 0) {
    f->probe.data = f;
    f->probe_open = 1;
    f->probe_len = 0;
    f->conn_req.data = f;
    r = uv_tcp_connect(&f->conn_req, &f->probe, res->ai_addr, probe_connect_cb);
    if (r < 0)
      probe_end(f);
    else
      uv_timer_start(&f->retry, probe_timeout_cb, PROBE_MS, 0);
  } else {
    backoff(f);
  }
  uv_freeaddrinfo(res);
}

static void start_probe(tlc_fleet_t *f) {
  struct addrinfo hints;
  char port[16];
  memset(&hints, 0, sizeof(hints));
  hints.ai_socktype = SOCK_STREAM;
  snprintf(port, sizeof(port), "%d", f->port);
  f->state = ST_PROBING;
  f->gai.data = f;
  if (uv_getaddrinfo(f->loop, &f->gai, gai_cb, f->host, port, &hints) < 0) {
    backoff(f);
    return;
  }
  f->gai_pending = 1;
}

/* ---- JetStream stream ---- */

/* One stream per first subject token, shared by every daemon whose prefix starts with it (the
 * default tlcap.<hostname> of every host: stream TLCAP_tlcap over tlcap.>), so that one
 * consumer reads the whole fleet. */
static void stream_name(const char *prefix, char *root, size_t rcap, char *out, size_t cap) {
  size_t n = 0;
  const char *p, *dot = strchr(prefix, '.');
  size_t rl = dot != NULL ? (size_t)(dot - prefix) : strlen(prefix);
  snprintf(root, rcap, "%.*s", (int)rl, prefix);
  n = (size_t)snprintf(out, cap, "TLCAP_");
  for (p = root; *p != '\0' && n + 1 < cap; p++) {
    unsigned char ch = (unsigned char)*p;
    int ok = (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
             ch == '-' || ch == '_';
    out[n++] = ok ? (char)ch : '_';
  }
  out[n] = '\0';
}

static void ensure_stream(tlc_fleet_t *f) {
  char subj[256], body[1024];
  int n;
  if (f->nc == NULL || f->js_sub == NULL)
    return;
  snprintf(subj, sizeof(subj), "$JS.API.STREAM.CREATE.%s", f->stream);
  n = snprintf(body, sizeof(body),
               "{\"name\":\"%s\",\"subjects\":[\"%s.>\"],\"retention\":\"limits\","
               "\"storage\":\"file\",\"discard\":\"old\",\"max_age\":%llu,\"max_bytes\":%llu}",
               f->stream, f->root, (unsigned long long)f->o.stream_max_age_ms * 1000000ull,
               (unsigned long long)f->o.stream_max_bytes);
  if (natsConnection_PublishRequest(f->nc, subj, f->js_inbox, body, n) != NATS_OK)
    flog(f, TLC_LOG_WARN, "nats %s: cannot send the JetStream stream request", f->url);
}

static void js_reply(tlc_fleet_t *f, const char *reply, size_t len) {
  if (len == 0) {
    /* an empty reply with a 503 status: no JetStream on that server */
    flog(f, TLC_LOG_WARN,
         "nats %s: the server has no JetStream (start nats-server with -js): no stream keeps "
         "the messages, each is a drop (no_responders)",
         f->url);
    return;
  }
  if (strstr(reply, "\"error\"") == NULL) {
    if (!f->c.stream_ready)
      flog(f, TLC_LOG_INFO, "nats %s: JetStream stream %s covers %s.>", f->url, f->stream, f->root);
    f->c.stream_ready = 1;
    return;
  }
  if (strstr(reply, "10058") != NULL) {
    /* another daemon made it with other limits: theirs stay (no update war) */
    if (!f->c.stream_ready)
      flog(f, TLC_LOG_INFO, "nats %s: JetStream stream %s exists with other limits; keeping them",
           f->url, f->stream);
    f->c.stream_ready = 1;
    return;
  }
  flog(f, TLC_LOG_WARN, "nats %s: JetStream stream %s: %.300s", f->url, f->stream, reply);
}

/* ---- publishing ---- */

/* The packing buffer at least n bytes long; NULL when out of memory. */
static uint8_t *pack_buf(tlc_fleet_t *f, size_t n) {
  if (n > f->pcap) {
    uint8_t *b = tlc_malloc(n);
    if (b == NULL)
      return NULL;
    tlc_free(f->pbuf);
    f->pbuf = b;
    f->pcap = n;
  }
  return f->pbuf;
}

/* A message not published, for reason r (enum tlc_fleet_drop); loop thread. */
static void drop(tlc_fleet_t *f, int r, size_t len) {
  f->c.drops[r]++;
  f->c.dropped_bytes += len;
}

/* Publishes one message to JetStream; 0 (its acknowledgement is to come: ack_cb), or -1 when
 * it was dropped (and counted). `bound` (0: none) is at least the message's packed size:
 * protobuf-c then packs it once into a buffer of that size, without sizing it first (a
 * statistics message's size walk costs as much as a third of its packing;
 * tlc_pb_row_field_max). */
static int publish(tlc_fleet_t *f, const char *target, const char *kind,
                   const Tlcap__ServerMessage *m, size_t bound) {
  char tok[SUBJECT_MAX], subj[SUBJECT_MAX + 300];
  size_t len = 0;
  uint8_t *buf;
  int64_t maxp;
  int room;
  natsStatus s;
  if (f->nc == NULL || f->js == NULL || !f->c.connected) {
    drop(f, TLC_FLEET_DROP_NOT_CONNECTED, 0);
    return -1;
  }
  if (tlc_fleet_subject_token(target, tok, sizeof(tok)) == 0) {
    drop(f, TLC_FLEET_DROP_ENCODE, 0);
    return -1;
  }
  if (bound == 0 || bound > f->o.buffer_bytes)
    bound = 0, len = protobuf_c_message_get_packed_size(&m->base);
  maxp = natsConnection_GetMaxPayload(f->nc);
  if (bound != 0) {
    if ((buf = pack_buf(f, bound)) == NULL) {
      drop(f, TLC_FLEET_DROP_ENCODE, 0);
      return -1;
    }
    len = protobuf_c_message_pack(&m->base, buf);
  }
  if (maxp > 0 && (int64_t)len > maxp) {
    drop(f, TLC_FLEET_DROP_TOO_LARGE, len);
    if (!f->warned_size) { /* once: a part of PART_ROWS rows (or a mapping) is that large */
      f->warned_size = 1;
      flog(f, TLC_LOG_WARN,
           "nats %s: target %s: a %s message of %zu bytes is larger than the server's "
           "max_payload (%lld): dropped (raise max_payload in nats-server's configuration)",
           f->url, target, kind, len, (long long)maxp);
    }
    return -1;
  }
  if ((uint64_t)natsConnection_Buffered(f->nc) + len > f->o.buffer_bytes) {
    drop(f, TLC_FLEET_DROP_BUFFER_FULL, len);
    return -1;
  }
  uv_mutex_lock(&f->br->mu); /* a place among the messages awaiting acknowledgement */
  room = f->br->inflight < MAX_INFLIGHT && f->br->inflight_bytes + len <= f->o.buffer_bytes;
  if (room) {
    f->br->inflight++;
    f->br->inflight_bytes += len;
  }
  uv_mutex_unlock(&f->br->mu);
  if (!room) {
    drop(f, TLC_FLEET_DROP_BUFFER_FULL, len);
    return -1;
  }
  if (bound == 0) {
    if ((buf = pack_buf(f, len > 0 ? len : 1)) == NULL) {
      s = NATS_NO_MEMORY;
      goto unreserve;
    }
    protobuf_c_message_pack(&m->base, buf);
  }
  snprintf(subj, sizeof(subj), "%s.%s.%s", f->prefix, tok, kind);
  /* js_PublishAsync copies the bytes (a message libnats keeps until ack_cb, and the client's
   * buffer) */
  s = js_PublishAsync(f->js, subj, buf, (int)len, &f->po);
  if (s == NATS_OK)
    return 0;
unreserve:
  uv_mutex_lock(&f->br->mu);
  f->br->inflight--;
  f->br->inflight_bytes -= len;
  uv_mutex_unlock(&f->br->mu);
  drop(f,
       s == NATS_NO_MEMORY ? TLC_FLEET_DROP_ENCODE
       : s == NATS_TIMEOUT ? TLC_FLEET_DROP_BUFFER_FULL
                           : TLC_FLEET_DROP_NOT_CONNECTED,
       len);
  return -1;
}

/* A bound of the packed size of statistics message m (publish), whose rows were built by
 * tlc_pb_snapshot_build with rowmax = tlc_pb_row_field_max (0: none): the exact size of the
 * message without its rows, 5 for the longer length of the Snapshot, rowmax a row. */
static size_t stats_bound(const Tlcap__ServerMessage *m, size_t rowmax) {
  Tlcap__Snapshot *s = m->snapshot;
  size_t nr = s->n_rows, h;
  if (rowmax == 0 || nr > (SIZE_MAX / 2) / rowmax)
    return 0;
  s->n_rows = 0;
  h = protobuf_c_message_get_packed_size(&m->base);
  s->n_rows = nr;
  return h + 5 + nr * rowmax;
}

static int ensure_ts(tlc_fleet_t *f, size_t n) {
  tstate_t *v;
  size_t old = f->capts;
  if (n <= f->nts)
    return 0;
  if (n > f->capts) {
    v = tlc_grow(f->ts, &f->capts, n, sizeof(*v), 16);
    if (v == NULL)
      return TLC_ENOMEM;
    f->ts = v;
    memset(f->ts + old, 0, (f->capts - old) * sizeof(*v));
  }
  f->nts = n;
  return 0;
}

/* The snapshot table is kept from target to target and tick to tick (no allocation and no fresh
 * pages per snapshot), unless a part was unusually large (one area of many rows). */
static void shrink_tab(tlc_fleet_t *f) {
  if (f->tab.caprows > 4 * PART_ROWS) {
    tlc_table_fini(&f->tab);
    tlc_table_init(&f->tab);
  }
}

/* Publishes target i's statistics: a delta since the last message, or a full snapshot. A table
 * of more than PART_ROWS rows goes in parts (Snapshot.part, .more; docs/protocol.md "Statistics
 * in parts"), all built in this loop turn so they share one seq: part 0 is full or the delta
 * since the last message, each later one a delta based on the previous part's seq. So no message
 * outgrows the server's max_payload and the loop never holds a copy of a huge target at once. */
static void publish_target(tlc_fleet_t *f, size_t i, uint64_t now) {
  tlc_view_target_t info;
  tstate_t *ts = &f->ts[i];
  tlc_view_at_t at = { f->pv, i };
  tlc_cursor_split_fn split = tlc_view_cursor_split(f->pv);
  tlc_cursor_part_t pt;
  tlc_snap_opts_t so;
  tlc_table_t *t = &f->tab;
  tlc_pb_snap_sel_t sel;
  Tlcap__ServerMessage m;
  const tlc_mapping_t *map = NULL;
  size_t rowmax;
  int full, r, ok = 1;
  memset(&info, 0, sizeof(info));
  if (f->pv->info(f->pv->ud, i, &info) < 0 || info.name == NULL)
    return;
  if (tlc_cursor_renew(&ts->cur, info.gen)) {
    /* another target took index i (a full registry evicted the one there): start it over with
     * a full snapshot, never a delta since the evicted target's seq */
    ts->last_events = ts->last_bytes = 0;
  }
  full = tlc_cursor_begin(&ts->cur, now, f->o.full_interval_ms);
  if (!full && info.seq != 0 && info.seq == ts->cur.seq &&
      info.counters.events == ts->last_events && info.counters.bytes == ts->last_bytes)
    return; /* nothing changed since the last message (the check below, without a snapshot) */
  memset(&so, 0, sizeof(so));
  /* windows, quantiles and Neutral rows only in full snapshots: for every changed row at every
   * tick they cost a busy target a large share of the loop (docs/fleet.md, bench/RESULTS.md
   * "Fleet"); a consumer adds a Neutral row up from its area's context rows */
  so.windows = full;
  so.neutral = full;
  so.quantiles = full;
  memset(&sel, 0, sizeof(sel));
  sel.windows = full;
  sel.quantiles = full;
  if (full && f->pv->mapping != NULL)
    map = f->pv->mapping(f->pv->ud, i);
  while ((r = tlc_cursor_next(&ts->cur, split, &at, PART_ROWS, &pt)) == 1) {
    tlc_pb_arena_t *a = &f->pba;
    Tlcap__Snapshot s;
    if (tlc_view_cursor_take(&at, &pt, t, &so) < 0) {
      ok = 0;
      break;
    }
    if (pt.no == 0 && !pt.more && !full && t->seq == ts->cur.seq &&
        t->counters.events == ts->last_events && t->counters.bytes == ts->last_bytes) {
      shrink_tab(f); /* nothing changed since the last message */
      return;
    }
    if (tlc_pb_snapshot_build(a, &s, t, info.name, &sel, pt.no == 0 ? map : NULL) == 0) {
      s.instance_id = f->o.instance_id;
      s.stream = 1;
      s.full = full && pt.no == 0;
      s.base_seq = pt.base;
      s.part = pt.no;
      s.more = pt.more != 0;
      s.connected = info.connected != 0;
      s.unix_ms = (int64_t)now;
      tlcap__server_message__init(&m);
      m.msg_case = TLCAP__SERVER_MESSAGE__MSG_SNAPSHOT;
      m.snapshot = &s;
      rowmax = tlc_pb_row_field_max(t->nwindows, &sel);
      if (publish(f, info.name, "stats", &m, stats_bound(&m, rowmax)) < 0)
        ok = 0;
    } else {
      drop(f, TLC_FLEET_DROP_ENCODE, 0);
      ok = 0;
    }
    if (a->used > ARENA_KEEP) { /* an unusually large message: its chunks are not kept */
      tlc_pb_arena_fini(a);
      tlc_pb_arena_init(a, 0);
    } else {
      tlc_pb_arena_rewind(a);
    }
    tlc_cursor_took(&ts->cur, t->seq);
    if (!ok)
      break;
  }
  if (r < 0)
    ok = 0;
  /* a part lost: the next message is a full snapshot */
  tlc_cursor_end(&ts->cur, ok, now);
  if (ok) {
    ts->last_events = t->counters.events;
    ts->last_bytes = t->counters.bytes;
  }
  shrink_tab(f);
}

/* Logs the drops since the last such line, at most every DROP_LOG_MS: one line, with the
 * count of each reason and the server's words for the refusals. Drops for want of a connection
 * are not in it (the lost connection is logged once). */
static void log_drops(tlc_fleet_t *f, uint64_t now) {
  tlc_fleet_counters_t c;
  char line[900], why[TLC_FLEET_DROP_N][ERR_TEXT];
  size_t n = 0;
  uint64_t total = 0;
  int r;
  if (f->drop_log_ms != 0 && now - f->drop_log_ms < DROP_LOG_MS)
    return;
  tlc_fleet_counters(f, &c);
  uv_mutex_lock(&f->br->mu);
  memcpy(why, f->br->why, sizeof(why));
  uv_mutex_unlock(&f->br->mu);
  line[0] = '\0';
  for (r = 0; r < TLC_FLEET_DROP_N; r++) {
    uint64_t d = c.drops[r] - f->logged[r];
    if (d == 0 || r == TLC_FLEET_DROP_NOT_CONNECTED)
      continue;
    total += d;
    if (n < sizeof(line))
      n += (size_t)snprintf(line + n, sizeof(line) - n, "%s%s %" PRIu64 "%s%s%s", n > 0 ? ", " : "",
                            tlc__fleet_drop_word(r), d, why[r][0] ? " (" : "", why[r],
                            why[r][0] ? ")" : "");
  }
  if (total == 0)
    return;
  memcpy(f->logged, c.drops, sizeof(f->logged));
  flog(f, TLC_LOG_WARN,
       "nats %s: %" PRIu64 " message%s not published%s: %s (logged at most every %d s)", f->url,
       total, total == 1 ? "" : "s", f->drop_log_ms != 0 ? " since the last such line" : "", line,
       DROP_LOG_MS / 1000);
  f->drop_log_ms = now;
}

static void tick_cb(uv_timer_t *t) {
  tlc_fleet_t *f = t->data;
  size_t i, n;
  uint64_t now = (uint64_t)tlc_now_unix_ms();
  log_drops(f, now);
  if (f->state != ST_CONNECTED || !f->c.connected)
    return;
  uint64_t c0 = thread_cpu_ns();
  n = f->pv->count(f->pv->ud);
  if (ensure_ts(f, n) < 0)
    return;
  for (i = 0; i < n; i++)
    publish_target(f, i, now);
  f->c.publish_cpu_ns += thread_cpu_ns() - c0;
}

static int te_kind(int kind) {
  switch (kind) {
  case TLC_TEV_CREATED:
    return TLCAP__TARGET_EVENT_KIND__TE_ADDED;
  case TLC_TEV_CONNECTED:
    return TLCAP__TARGET_EVENT_KIND__TE_CONNECTED;
  case TLC_TEV_DISCONNECTED:
    return TLCAP__TARGET_EVENT_KIND__TE_DISCONNECTED;
  case TLC_TEV_RESYNC:
    return TLCAP__TARGET_EVENT_KIND__TE_RESYNC;
  case TLC_TEV_DROPS:
    return TLCAP__TARGET_EVENT_KIND__TE_DROPS;
  case TLC_TEV_DECODE_ERROR:
    return TLCAP__TARGET_EVENT_KIND__TE_DECODE_ERROR;
  case TLC_TEV_MAPPING:
    return TLCAP__TARGET_EVENT_KIND__TE_MAPPING_LOADED;
  case TLC_TEV_RESET:
    return TLCAP__TARGET_EVENT_KIND__TE_RESET;
  case TLC_TEV_FORGOTTEN:
    return TLCAP__TARGET_EVENT_KIND__TE_FORGOTTEN;
  case TLC_TEV_CLOCK_RESET:
    return TLCAP__TARGET_EVENT_KIND__TE_CLOCK_RESET;
  default:
    return 0;
  }
}

void tlc_fleet_target_event(tlc_fleet_t *f, const char *name, int kind, const char *detail) {
  Tlcap__TargetEvent te;
  Tlcap__ServerMessage m;
  if (kind == TLC_TEV_FORGOTTEN)
    detail = NULL; /* its detail is the registry index: nothing for a consumer */
  if (f == NULL || name == NULL || f->state == ST_CLOSING || (kind = te_kind(kind)) == 0)
    return;
  tlcap__target_event__init(&te);
  te.target = (char *)name;
  te.kind = (Tlcap__TargetEventKind)kind;
  te.detail = (char *)(detail != NULL ? detail : "");
  te.unix_ms = (int64_t)(uint64_t)tlc_now_unix_ms();
  te.instance_id = f->o.instance_id;
  te.seq = ++f->tev_seq;
  tlcap__server_message__init(&m);
  m.msg_case = TLCAP__SERVER_MESSAGE__MSG_TARGET_EVENT;
  m.target_event = &te;
  publish(f, name, "events", &m, 0);
}

/* The target event of a violation the rate limit let through. Out of line: in a storm most are
 * not, and they should not pay for this frame. */
#if defined(__GNUC__)
__attribute__((noinline))
#endif
static void
violation_send(tlc_fleet_t *f, const char *target, const struct tlc_bwatch *w,
               const struct tlc_violation *v, uint64_t suppressed) {
  Tlcap__TargetEvent te;
  Tlcap__Violation pv;
  Tlcap__ServerMessage m;
  tlc_vserve_names_t nm;
  tlc_vserve_fill(&pv, f->pv, target, w, v, &nm);
  tlcap__target_event__init(&te);
  te.target = (char *)target;
  te.kind = TLCAP__TARGET_EVENT_KIND__TE_VIOLATION;
  te.detail = (char *)"";
  te.unix_ms = v->wall_ms != 0 ? v->wall_ms : (int64_t)(uint64_t)tlc_now_unix_ms();
  te.instance_id = f->o.instance_id;
  te.seq = ++f->tev_seq;
  te.violation = &pv;
  te.suppressed = suppressed;
  tlcap__server_message__init(&m);
  m.msg_case = TLCAP__SERVER_MESSAGE__MSG_TARGET_EVENT;
  m.target_event = &te;
  publish(f, target, "violations", &m, 0);
}

uint64_t tlc_fleet_violation(tlc_fleet_t *f, const char *target, const struct tlc_bwatch *w,
                             const struct tlc_violation *v, uint64_t key, uint64_t now_ms,
                             uint64_t held) {
  uint64_t suppressed, next;
  if (f == NULL || target == NULL || w == NULL || v == NULL || f->state == ST_CLOSING)
    return 0;
  /* counted by the limiter (tlc_fleet_counters reads its totals) */
  if (tlc_vrate_take_watch(&f->vrate, w, v->budget, target, key, now_ms, held, &suppressed, &next) >
      0)
    violation_send(f, target, w, v, suppressed);
  return next;
}

void tlc_fleet_violations_held(tlc_fleet_t *f, const char *target, const struct tlc_bwatch *w,
                               size_t budget, uint64_t key, uint64_t now_ms, uint64_t held) {
  if (f != NULL && target != NULL && w != NULL && f->state != ST_CLOSING)
    tlc_vrate_hold(&f->vrate, w, budget, target, key, now_ms, held);
}

/* The manifest beside data file `path`: the same name up to the first '.' of its last
 * component, then ".manifest" (docs/storage.md). Read whole (capped). */
static uint8_t *read_manifest(const char *path, size_t *len) {
  char mp[4096];
  const char *base = strrchr(path, '/');
  const char *dot;
  FILE *fp;
  uint8_t *buf;
  size_t n;
  base = base != NULL ? base + 1 : path;
  dot = strchr(base, '.');
  if (dot == NULL)
    dot = base + strlen(base);
  if ((size_t)(dot - path) + sizeof(".manifest") > sizeof(mp))
    return NULL;
  memcpy(mp, path, (size_t)(dot - path));
  memcpy(mp + (dot - path), ".manifest", sizeof(".manifest"));
  fp = fopen(mp, "rb");
  if (fp == NULL)
    return NULL;
  buf = tlc_malloc(MANIFEST_MAX);
  if (buf == NULL) {
    fclose(fp);
    return NULL;
  }
  n = fread(buf, 1, MANIFEST_MAX, fp);
  fclose(fp);
  *len = n;
  return buf;
}

void tlc_fleet_segment_sealed(tlc_fleet_t *f, const char *name, const char *path, uint64_t seq,
                              int reason) {
  Tlcap__SegmentSealed ss;
  Tlcap__ServerMessage m;
  uint8_t *man;
  size_t mlen = 0;
  if (f == NULL || name == NULL || path == NULL || f->state == ST_CLOSING)
    return;
  if (!f->c.connected) {
    drop(f, TLC_FLEET_DROP_NOT_CONNECTED, 0);
    return;
  }
  /* The manifest was renamed into place just before the seal was announced: it is small and
   * in the page cache, so this read does not wait on the disk. */
  man = read_manifest(path, &mlen);
  tlcap__segment_sealed__init(&ss);
  ss.target = (char *)name;
  ss.path = (char *)path;
  ss.seq = seq;
  ss.reason = (uint32_t)reason;
  ss.unix_ms = (int64_t)(uint64_t)tlc_now_unix_ms();
  ss.instance_id = f->o.instance_id;
  ss.manifest.data = man;
  ss.manifest.len = man != NULL ? mlen : 0;
  tlcap__server_message__init(&m);
  m.msg_case = TLCAP__SERVER_MESSAGE__MSG_SEGMENT_SEALED;
  m.segment_sealed = &ss;
  publish(f, name, "segments", &m, 0);
  tlc_free(man);
}

void tlc_fleet_counters(const tlc_fleet_t *f, tlc_fleet_counters_t *out) {
  int r;
  if (f == NULL) {
    memset(out, 0, sizeof(*out));
    return;
  }
  *out = f->c;
  /* the violations' rate limiter counts what it let go and what it held back */
  out->violations_sent = f->vrate.sent;
  out->violations_suppressed = f->vrate.suppressed;
  uv_mutex_lock(&f->br->mu);
  out->published = f->br->acked;
  out->awaiting_ack = f->br->inflight;
  out->dropped_bytes += f->br->dropped_bytes;
  for (r = 0; r < TLC_FLEET_DROP_N; r++)
    out->drops[r] += f->br->drops[r];
  uv_mutex_unlock(&f->br->mu);
  out->dropped = 0;
  for (r = 0; r < TLC_FLEET_DROP_N; r++)
    out->dropped += out->drops[r];
}

void tlc_fleet_dump(const tlc_fleet_t *f, tlc_json_w_t *j) {
  tlc_fleet_counters_t c;
  tlc_fleet_counters(f, &c);
  tlc_json_w_open(j, "nats", '{');
  tlc_json_w_u64(j, "connected", (uint64_t)c.connected);
  tlc_json_w_u64(j, "stream_ready", (uint64_t)c.stream_ready);
  tlc_json_w_u64(j, "published", c.published);
  tlc_json_w_u64(j, "awaiting_ack", c.awaiting_ack);
  tlc_json_w_u64(j, "dropped_total", c.dropped);
  tlc_json_w_u64(j, "dropped_bytes", c.dropped_bytes);
  tlc_json_w_open(j, "dropped", '{');
  for (int r = 0; r < TLC_FLEET_DROP_N; r++)
    tlc_json_w_u64(j, tlc_fleet_drop_name(r), c.drops[r]);
  tlc_json_w_close(j, '}');
  tlc_json_w_u64(j, "reconnects", c.reconnects);
  tlc_json_w_u64(j, "violations_sent", c.violations_sent);
  tlc_json_w_u64(j, "violations_suppressed", c.violations_suppressed);
  tlc_json_w_close(j, '}');
}

int tlc_fleet_view(const tlc_fleet_t *f, tlc_view_nats_t *out) {
  tlc_fleet_counters_t c;
  tlc_fleet_counters(f, &c);
  out->url = f->url;
  out->connected = c.connected;
  out->stream_ready = c.stream_ready;
  out->published = c.published;
  out->dropped = c.dropped;
  out->reconnects = c.reconnects;
  out->publish_cpu_ns = c.publish_cpu_ns;
  out->awaiting_ack = c.awaiting_ack;
  out->violations_sent = c.violations_sent;
  out->violations_suppressed = c.violations_suppressed;
  out->nreasons = 0;
  for (int r = 0; r < TLC_FLEET_DROP_N && r < TLC_VIEW_NATS_REASONS; r++) {
    out->drop_reason[r] = tlc_fleet_drop_name(r);
    out->drops[r] = c.drops[r];
    out->nreasons++;
  }
  return 0;
}

/* ---- wake-ups from libnats threads ---- */

static void wake_cb(uv_async_t *h) {
  tlc_fleet_t *f = h->data;
  unsigned flags;
  char reply[JS_REPLY_MAX];
  size_t rlen = 0;
  uv_mutex_lock(&f->br->mu);
  flags = f->br->flags;
  f->br->flags = 0;
  if (flags & BR_JS_REPLY) {
    rlen = f->br->reply_len;
    memcpy(reply, f->br->reply, rlen + 1);
  }
  uv_mutex_unlock(&f->br->mu);
  if (f->state == ST_CLOSING)
    return;
  if (flags & BR_DISCONNECTED)
    f->c.connected = 0; /* the closed callback follows (no libnats reconnection) */
  if (flags & BR_JS_REPLY)
    js_reply(f, reply, rlen);
  if ((flags & BR_CLOSED) && f->state == ST_CONNECTED) {
    flog(f, TLC_LOG_WARN,
         "nats %s: connection lost; connecting again (messages meanwhile are "
         "dropped and counted)",
         f->url);
    drop_connection(f);
    backoff(f);
  }
}

/* ---- setup and teardown ---- */

static int parse_url(tlc_fleet_t *f) {
  const char *p = f->url, *colon;
  size_t hl;
  if (strncmp(p, "nats://", 7) == 0)
    p += 7;
  else if (strncmp(p, "tls://", 6) == 0)
    p += 6;
  else
    return TLC_EINVAL;
  if (strchr(p, '@') != NULL)
    p = strrchr(p, '@') + 1; /* user:pass@ */
  colon = strrchr(p, ':');
  f->port = 4222;
  if (*p == '[') { /* [v6]:port */
    const char *e = strchr(p, ']');
    if (e == NULL)
      return TLC_EINVAL;
    hl = (size_t)(e - p - 1);
    if (hl == 0 || hl >= sizeof(f->host))
      return TLC_EINVAL;
    memcpy(f->host, p + 1, hl);
    f->host[hl] = '\0';
    colon = e[1] == ':' ? e + 1 : NULL;
  } else {
    hl = colon != NULL ? (size_t)(colon - p) : strlen(p);
    if (hl == 0 || hl >= sizeof(f->host))
      return TLC_EINVAL;
    memcpy(f->host, p, hl);
    f->host[hl] = '\0';
  }
  if (colon != NULL) {
    char *end;
    long v = strtol(colon + 1, &end, 10);
    if (end == colon + 1 || (*end != '\0' && *end != '/') || v < 1 || v > 65535)
      return TLC_EINVAL;
    f->port = (int)v;
  }
  return 0;
}

static natsStatus set_creds(tlc_fleet_t *f) {
  FILE *fp;
  char tok[1024];
  size_t n;
  const char *ext = strrchr(f->creds, '.');
  if (ext != NULL && strcmp(ext, ".creds") == 0)
    return natsOptions_SetUserCredentialsFromFiles(f->nopts, f->creds, NULL);
  fp = fopen(f->creds, "r");
  if (fp == NULL)
    return NATS_ERR;
  n = fread(tok, 1, sizeof(tok) - 1, fp);
  fclose(fp);
  tok[n] = '\0';
  while (n > 0 && (tok[n - 1] == '\n' || tok[n - 1] == '\r' || tok[n - 1] == ' '))
    tok[--n] = '\0';
  if (n == 0)
    return NATS_ERR;
  return natsOptions_SetToken(f->nopts, tok);
}

/* libnats is a process-wide library: whether this process opened it (tlc_fleet_shutdown) */
static int lib_opened;
/* The bridges of closed fleets that a libnats thread may still use (tlc_fleet_close) */
static SLIST_HEAD(, bridge) orphans = SLIST_HEAD_INITIALIZER(orphans);

void tlc_fleet_shutdown(void) {
  if (lib_opened && nats_CloseAndWait(10000) == NATS_OK) {
    lib_opened = 0;
    while (!SLIST_EMPTY(&orphans)) { /* no libnats thread runs any more */
      bridge_t *b = SLIST_FIRST(&orphans);
      SLIST_REMOVE_HEAD(&orphans, orphan);
      uv_mutex_destroy(&b->mu);
      free(b);
    }
  }
}

int tlc_fleet_new(tlc_fleet_t **out, uv_loop_t *loop, const tlc_view_t *pv,
                  const tlc_fleet_opts_t *o) {
  tlc_fleet_t *f;
  natsStatus s;
  char host[256];
  *out = NULL;
  f = tlc_malloc(sizeof(*f));
  if (f == NULL)
    return TLC_ENOMEM;
  memset(f, 0, sizeof(*f));
  tlc_pb_arena_init(&f->pba, 0);
  tlc_vrate_init(&f->vrate, TLC_VSERVE_RATE);
  f->loop = loop;
  f->pv = pv;
  f->o = *o;
  if (f->o.interval_ms == 0)
    f->o.interval_ms = 1000;
  if (f->o.full_interval_ms == 0)
    f->o.full_interval_ms = 60000;
  if (f->o.buffer_bytes == 0)
    f->o.buffer_bytes = DEF_BUFFER;
  if (f->o.stream_max_age_ms == 0)
    f->o.stream_max_age_ms = DEF_MAX_AGE_MS;
  if (f->o.stream_max_bytes == 0)
    f->o.stream_max_bytes = DEF_MAX_BYTES;
  snprintf(f->url, sizeof(f->url), "%s", o->url != NULL ? o->url : "");
  snprintf(f->creds, sizeof(f->creds), "%s", o->creds != NULL ? o->creds : "");
  if (parse_url(f) < 0) {
    flog(f, TLC_LOG_ERR, "nats: bad URL \"%s\" (want nats://HOST[:PORT] or tls://HOST[:PORT])",
         f->url);
    tlc_free(f);
    return TLC_EINVAL;
  }
  if (o->subject != NULL && o->subject[0] != '\0') {
    snprintf(f->prefix, sizeof(f->prefix), "%s", o->subject);
  } else {
    char tok[200];
    if (gethostname(host, sizeof(host)) != 0)
      snprintf(host, sizeof(host), "localhost");
    host[sizeof(host) - 1] = '\0';
    if (tlc_fleet_subject_token(host, tok, sizeof(tok)) == 0)
      snprintf(tok, sizeof(tok), "localhost");
    snprintf(f->prefix, sizeof(f->prefix), "tlcap.%s", tok);
  }
  if (strpbrk(f->prefix, " \t*>") != NULL || f->prefix[0] == '.' ||
      f->prefix[strlen(f->prefix) - 1] == '.' || strstr(f->prefix, "..") != NULL) {
    flog(f, TLC_LOG_ERR,
         "nats: bad subject prefix \"%s\" (tokens separated by '.', no '*', '>' "
         "or spaces)",
         f->prefix);
    tlc_free(f);
    return TLC_EINVAL;
  }
  stream_name(f->prefix, f->root, sizeof(f->root), f->stream, sizeof(f->stream));

  f->br = calloc(1, sizeof(*f->br));
  if (f->br == NULL || uv_mutex_init(&f->br->mu) != 0) {
    free(f->br);
    tlc_free(f);
    return TLC_ENOMEM;
  }
  natsLibuv_Init();
  natsLibuv_SetThreadLocalLoop(loop);
  lib_opened = 1;
  s = natsOptions_Create(&f->nopts);
  if (s == NATS_OK)
    s = natsOptions_SetURL(f->nopts, f->url);
  if (s == NATS_OK)
    s = natsOptions_SetName(f->nopts, "tlcapd");
  if (s == NATS_OK)
    s = natsOptions_SetTimeout(f->nopts, CONNECT_MS);
  /* Reconnection is ours (probe, then connect, with backoff), not libnats's reconnect thread:
   * that thread holds the connection's lock while it connects, and a publish from the loop
   * would wait for it (up to the connect timeout). */
  if (s == NATS_OK)
    s = natsOptions_SetAllowReconnect(f->nopts, false);
  if (s == NATS_OK)
    s = natsOptions_SetNoEcho(f->nopts, true);
  if (s == NATS_OK && strncmp(f->url, "tls://", 6) == 0)
    s = natsOptions_SetSecure(f->nopts, true);
  if (s == NATS_OK && f->creds[0] != '\0' && (s = set_creds(f)) != NATS_OK)
    flog(f, TLC_LOG_ERR, "nats: cannot use credentials file %s", f->creds);
  if (s == NATS_OK)
    s = natsOptions_SetEventLoop(f->nopts, (void *)loop, natsLibuv_Attach, ev_read, ev_write,
                                 ev_detach);
  if (s == NATS_OK)
    s = natsOptions_SetDisconnectedCB(f->nopts, tlc__fleet_disconnected_cb, f->br);
  if (s == NATS_OK)
    s = natsOptions_SetClosedCB(f->nopts, tlc__fleet_closed_cb, f->br);
  if (s != NATS_OK) {
    flog(f, TLC_LOG_ERR, "nats %s: bad options: %s", f->url, natsStatus_GetText(s));
    natsOptions_Destroy(f->nopts);
    uv_mutex_destroy(&f->br->mu);
    free(f->br);
    tlc_free(f);
    return TLC_EINVAL;
  }
  uv_async_init(loop, &f->wake, wake_cb);
  f->wake.data = f;
  f->br->wake = &f->wake;
  uv_timer_init(loop, &f->tick);
  f->tick.data = f;
  uv_timer_init(loop, &f->retry);
  f->retry.data = f;
  uv_timer_start(&f->tick, tick_cb, f->o.interval_ms, f->o.interval_ms);
  start_probe(f);
  *out = f;
  return 0;
}

static void handle_closed_cb(uv_handle_t *h) {
  tlc_fleet_t *f = h->data;
  void (*cb)(void *) = f->close_cb;
  void *ud = f->close_ud;
  if (--f->handles > 0)
    return;
  tlc_free(f->ts);
  tlc_table_fini(&f->tab);
  tlc_pb_arena_fini(&f->pba);
  tlc_free(f->pbuf);
  tlc_vrate_fini(&f->vrate);
  tlc_free(f);
  if (cb != NULL)
    cb(ud);
}

static void close_handles(tlc_fleet_t *f) {
  f->handles = 3;
  if (f->probe_open) {
    f->handles++;
    f->probe_open = 0;
    uv_close((uv_handle_t *)&f->probe, handle_closed_cb);
  }
  uv_close((uv_handle_t *)&f->wake, handle_closed_cb);
  uv_close((uv_handle_t *)&f->tick, handle_closed_cb);
  uv_close((uv_handle_t *)&f->retry, handle_closed_cb);
}

static void gai_wait_cb(uv_timer_t *t);

void tlc_fleet_close(tlc_fleet_t *f, void (*cb)(void *ud), void *ud) {
  bridge_t *b = f->br;
  int free_bridge;
  f->close_cb = cb;
  f->close_ud = ud;
  f->state = ST_CLOSING;
  uv_timer_stop(&f->tick);
  uv_timer_stop(&f->retry);
  drop_connection(f); /* natsConnection_Close hands what is buffered to the socket */
  natsOptions_Destroy(f->nopts);
  f->nopts = NULL;
  /* The closed callback runs on a libnats thread, possibly after this returns, and so may
   * ack_cb: the bridge stays for them (tlc_fleet_shutdown frees it once libnats's threads
   * ended) unless no connection ever made a JetStream context and the closed callbacks ran. */
  uv_mutex_lock(&b->mu);
  b->wake = NULL;
  free_bridge = b->live == 0 && !b->js_used;
  uv_mutex_unlock(&b->mu);
  if (free_bridge) {
    uv_mutex_destroy(&b->mu);
    free(b);
  } else {
    SLIST_INSERT_HEAD(&orphans, b, orphan);
  }
  f->br = NULL;
  /* A getaddrinfo request in flight cannot be cancelled for sure, nor a closing probe hurried:
   * wait for them (their callbacks see ST_CLOSING). */
  probe_end(f);
  if (f->gai_pending || f->probe_closing) {
    uv_timer_start(&f->retry, gai_wait_cb, 10, 10);
    return;
  }
  close_handles(f);
}

static void gai_wait_cb(uv_timer_t *t) {
  tlc_fleet_t *f = t->data;
  if (f->gai_pending || f->probe_closing)
    return;
  uv_timer_stop(t);
  close_handles(f);
}
