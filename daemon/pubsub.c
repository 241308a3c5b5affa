/* pubsub.c - the subscriber server (see pubsub.h and docs/protocol.md).
 *
 * Structure. A *subscriber* (sub) is one connection. Its *subscriptions* (subn) each refer to a
 * *feed*: the set of subscriptions, of any subscribers, with the same spec (interval, options,
 * target and area filters). A feed owns the interval timer; on each tick it takes one delta
 * snapshot per matching target from the provider (rows changed since the feed's last tick),
 * encodes it once into a reference-counted message (msg) and offers it to each subscription's
 * slot for that target. So the per-interval work is once per target and spec, not per
 * subscriber, and every subscriber of a feed gets the same bytes.
 *
 * Slots and sequence. A slot remembers the engine seq of the last snapshot committed to the
 * socket (sent_seq). A delta (base -> seq) fits a slot only when base == sent_seq and the slot
 * is empty; otherwise the slot drops what it held (coalescing: the subscriber was slow) and is
 * marked catch-up: when the subscriber's socket is ready again a private delta since sent_seq
 * (or a full snapshot, the first time) is built for it alone. Memory per slow subscriber is
 * therefore bounded by one message per slot, and what it finally receives is always complete.
 * Clients check that a delta's base_seq equals the previous seq of the same stream.
 *
 * Queues and limits. Per subscriber: control messages (replies, target events, errors: never
 * dropped) in a list, event batches in a ring of opts.max_batches (full: dropped and counted,
 * then told in a Dropped message), snapshot slots as above. queued counts the bytes of every
 * message the subscriber references, in flight included. Above obuf_hard, or above obuf_soft
 * for longer than obuf_soft_ms, it gets an ERR_OUTPUT_LIMIT error and is closed. At most one
 * uv_write is in flight per subscriber (up to WRITE_MAX_BUFS messages), so libuv's own write
 * queue never grows beyond that.
 *
 * Closing. Nothing that fills a subscriber's queue frees it: sub_fail() marks it closing, drops
 * its queued messages, queues the error and lets the write callback (or the grace timer) call
 * uv_close(); memory is freed in the close callback only. Feeds are freed in their timer's close
 * callback when their last subscription goes.
 *
 * Not done here: statistics (the engine's, through the provider), target lifecycle (the
 * daemon's), log formatting beyond one line per incident (the daemon's log hook rate-limits).
 */
#define _GNU_SOURCE /* struct ucred (SO_PEERCRED) */
#include "pubsub.h"

#include "pubsub-int.h"

#include "convert.h"
#include "frame.h"
#include "tlc_alloc.h"
#include "tlc_err.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fnmatch.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define WRITE_MAX_BUFS  16
#define WRITE_MAX_BYTES (1u << 20)
#define MAX_PATTERNS    64 /* per list in a Subscribe */
#define MAX_PATTERN_LEN 256
#define MAX_HANDLES     4096
#define MAX_LISTENERS   8
#define READ_BUF        (64u * 1024u)
#define MAX_REJECTING   64 /* connections being told "too many subscribers" at once */

enum msg_kind { PSM_CONTROL = 0, PSM_SNAP = 1, PSM_BATCH = 2 };

/* An encoded, framed message shared by reference count. */
typedef struct msg {
  uint32_t refs;
  uint8_t kind;
  uint64_t seq;   /* PSM_SNAP: engine seq */
  uint64_t base;  /* PSM_SNAP: base seq (0 = full) */
  size_t nevents; /* PSM_BATCH */
  size_t len;
  uint8_t data[];
} msg_t;

typedef struct ctl_node {
  struct ctl_node *next;
  msg_t *m;
} ctl_node_t;

/* A subscription's spec: what identifies a feed. */
typedef struct spec {
  char **targets;
  size_t ntargets;
  char **areas;
  size_t nareas;
  uint32_t *handles; /* sorted */
  size_t nhandles;
  uint32_t interval_ms;
  uint8_t windows, quantiles, neutral, names;
  char *key; /* canonical text of everything above */
} spec_t;

typedef struct slot {
  msg_t *pending;    /* a shared snapshot waiting for the socket */
  uint64_t sent_seq; /* seq of the last snapshot committed to the socket */
  uint8_t sent_any;
  uint8_t catchup; /* build a private snapshot since sent_seq when writing */
} slot_t;

struct feed;

typedef struct subn {
  uint32_t id;
  struct tlc__ps_sub *sub;
  struct feed *feed; /* NULL for events-only subscriptions */
  spec_t *spec;      /* target patterns for events and target events */
  uint8_t events;
  slot_t *slots; /* per target index */
  size_t nslots;
  struct subn *fprev, *fnext; /* in feed->subs */
} subn_t;

typedef struct feed_target {
  uint64_t last_seq;
  uint8_t have;
  uint8_t connected;
  tlc_counters_t counters;
  msg_t *full; /* full snapshot cached for subscribers that join (built at full_at) */
  uint64_t full_at;
} feed_target_t;

typedef struct feed {
  tlc_pubsub_t *ps;
  uv_timer_t timer;
  uint64_t id;
  spec_t *spec;
  subn_t *subs;
  size_t nsubs;
  feed_target_t *t;
  size_t nt;
  struct feed *prev, *next;
} feed_t;

struct tlc__ps_sub {
  tlc_pubsub_t *ps;
  union {
    uv_handle_t handle;
    uv_stream_t stream;
    uv_tcp_t tcp;
    uv_pipe_t pipe;
  } h;
  uv_timer_t timer; /* Hello deadline, then close grace / deferred close */
  int nhandles;     /* open handles; freed when it reaches 0 */
  uint64_t id;
  char peer[96];
  uint8_t is_unix, detached, authed, closing, closed, rejecting, close_when_flushed, kicking;
  uint32_t version;
  tlc_frame_dec_t dec;
  /* queues */
  ctl_node_t *ctl_head, *ctl_tail;
  msg_t **ring;
  size_t ring_head, ring_n;
  size_t queued;
  uint64_t soft_since; /* uv_now when queued went above obuf_soft, 0 if below */
  uint64_t drop_batches, drop_events, drop_total_batches, drop_total_events;
  /* subscriptions */
  subn_t **subs;
  size_t nsubs;
  /* writing */
  uv_write_t wreq;
  int writing;
  msg_t *inflight[WRITE_MAX_BUFS];
  size_t ninflight;
  uint64_t detached_bytes;
  struct tlc__ps_sub *prev, *next;
};

typedef struct listener {
  union {
    uv_handle_t handle;
    uv_stream_t stream;
    uv_tcp_t tcp;
    uv_pipe_t pipe;
  } h;
  tlc_pubsub_t *ps;
  uint8_t is_unix;
  char *path; /* unix: unlinked on close */
} listener_t;

struct tlc_pubsub {
  uv_loop_t *loop;
  tlc_pubsub_opts_t o;
  uint8_t *token;
  size_t token_len;
  tlc_ps_provider_t p;
  uint64_t instance_id;
  listener_t *listeners[MAX_LISTENERS];
  size_t nlisteners;
  tlc__ps_sub_t *subs;
  size_t nsubs, nrejecting;
  feed_t *feeds;
  size_t nfeeds;
  uint64_t next_sub_id, next_feed_id, next_tev_seq;
  size_t n_event_subns; /* subscriptions with events on: nothing to do when 0 */
  tlc_table_t scratch;
  tlc_pubsub_stats_t st;
  int closing;
  int open_handles; /* listeners + subscriber handles + feed timers */
  void (*close_cb)(void *ud);
  void *close_ud;
  uint64_t *batch_seq; /* per target index */
  size_t nbatch_seq;
  uv_timer_t house; /* periodic soft-limit check; also keeps close_cb on the loop */
  char rbuf[READ_BUF];
  int rbuf_busy;
};

/* ---- helpers ----------------------------------------------------------------------------- */

static void handle_closed(tlc_pubsub_t *ps);

static void logf_(tlc_pubsub_t *ps, int level, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
static void logf_(tlc_pubsub_t *ps, int level, const char *fmt, ...) {
  char line[512];
  va_list ap;
  if (ps->o.log == NULL)
    return;
  va_start(ap, fmt);
  vsnprintf(line, sizeof(line), fmt, ap);
  va_end(ap);
  ps->o.log(ps->o.log_ud, level, line);
}

static int64_t unix_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static uint64_t now_ms(tlc_pubsub_t *ps) {
  return uv_now(ps->loop);
}

static void msg_unref(msg_t *m) {
  if (m != NULL && --m->refs == 0)
    tlc_free(m);
}

static msg_t *msg_ref(msg_t *m) {
  m->refs++;
  return m;
}

/* Encodes a ServerMessage into a new message (refs 1), or NULL (no memory, or above the cap:
 * *too_big is then set when given). */
static msg_t *msg_encode(tlc_pubsub_t *ps, const Tlcap__ServerMessage *sm, int kind, int *too_big) {
  size_t payload, n = tlc_pb_frame_size(&sm->base, &payload);
  msg_t *m;
  if (too_big != NULL)
    *too_big = 0;
  if (n > ps->o.max_message) {
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

int tlc_pubsub_token_equal(const uint8_t *given, size_t given_len, const uint8_t *secret,
                           size_t secret_len) {
  volatile uint8_t d = (uint8_t)(given_len != secret_len);
  size_t i;
  for (i = 0; i < secret_len; i++) {
    /* Read a byte of `given` at every position whatever its length (index clamped to 0 when
     * past its end, a dummy when it is empty), so timing does not depend on where it differs. */
    uint8_t g = given_len > 0 ? given[i < given_len ? i : 0] : 0;
    d |= (uint8_t)(g ^ secret[i]);
  }
  return d == 0;
}

/* ---- specs ------------------------------------------------------------------------------- */

static void spec_free(spec_t *s) {
  size_t i;
  if (s == NULL)
    return;
  for (i = 0; i < s->ntargets; i++)
    tlc_free(s->targets[i]);
  for (i = 0; i < s->nareas; i++)
    tlc_free(s->areas[i]);
  tlc_free(s->targets);
  tlc_free(s->areas);
  tlc_free(s->handles);
  tlc_free(s->key);
  tlc_free(s);
}

static int cmp_u32(const void *a, const void *b) {
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return x < y ? -1 : x > y;
}

static int copy_patterns(char ***dst, size_t *n, char **src, size_t nsrc) {
  size_t i;
  *n = 0;
  *dst = NULL;
  if (nsrc == 0)
    return 0;
  *dst = tlc_calloc(nsrc, sizeof(char *));
  if (*dst == NULL)
    return TLC_ENOMEM;
  for (i = 0; i < nsrc; i++) {
    (*dst)[i] = tlc_strndup(src[i], strlen(src[i]));
    if ((*dst)[i] == NULL)
      return TLC_ENOMEM;
    (*n)++;
  }
  return 0;
}

/* Validates and copies a Subscribe's spec. Returns 0, TLC_EINVAL (with why) or TLC_ENOMEM. */
static int spec_new(tlc_pubsub_t *ps, const Tlcap__Subscribe *r, spec_t **out, const char **why) {
  spec_t *s;
  size_t i, keylen;
  char *k;
  *out = NULL;
  if (r->n_targets > MAX_PATTERNS || r->n_areas > MAX_PATTERNS) {
    *why = "too many patterns (max 64 per list)";
    return TLC_EINVAL;
  }
  if (r->n_handles > MAX_HANDLES) {
    *why = "too many handles (max 4096)";
    return TLC_EINVAL;
  }
  keylen = 64 + r->n_handles * 10; /* "\x1fH%08X" each; the header takes < 64 */
  for (i = 0; i < r->n_targets; i++) {
    size_t l = strlen(r->targets[i]);
    if (l > MAX_PATTERN_LEN) {
      *why = "pattern longer than 256 bytes";
      return TLC_EINVAL;
    }
    keylen += l + 24; /* "\x1fT<len>:" + pattern */
  }
  for (i = 0; i < r->n_areas; i++) {
    size_t l = strlen(r->areas[i]);
    if (l > MAX_PATTERN_LEN) {
      *why = "pattern longer than 256 bytes";
      return TLC_EINVAL;
    }
    keylen += l + 24; /* "\x1fA<len>:" + pattern */
  }
  s = tlc_calloc(1, sizeof(*s));
  if (s == NULL)
    return TLC_ENOMEM;
  s->interval_ms = r->interval_ms;
  if (s->interval_ms < ps->o.min_interval_ms)
    s->interval_ms = ps->o.min_interval_ms;
  if (s->interval_ms > ps->o.max_interval_ms)
    s->interval_ms = ps->o.max_interval_ms;
  s->windows = r->windows ? 1 : 0;
  s->quantiles = r->quantiles ? 1 : 0;
  s->neutral = r->neutral ? 1 : 0;
  s->names = r->names ? 1 : 0;
  if (copy_patterns(&s->targets, &s->ntargets, r->targets, r->n_targets) < 0 ||
      copy_patterns(&s->areas, &s->nareas, r->areas, r->n_areas) < 0)
    goto fail_nomem;
  if (r->n_handles > 0) {
    s->handles = tlc_malloc(r->n_handles * sizeof(uint32_t));
    if (s->handles == NULL)
      goto fail_nomem;
    memcpy(s->handles, r->handles, r->n_handles * sizeof(uint32_t));
    qsort(s->handles, r->n_handles, sizeof(uint32_t), cmp_u32);
    s->nhandles = r->n_handles;
  }
  s->key = k = tlc_malloc(keylen);
  if (k == NULL)
    goto fail_nomem;
  k += sprintf(k, "%u/%u%u%u%u", s->interval_ms, s->windows, s->quantiles, s->neutral, s->names);
  /* Length-prefixed, so that no pattern's content can make two different specs collide. */
  for (i = 0; i < s->ntargets; i++)
    k += sprintf(k, "\x1fT%zu:%s", strlen(s->targets[i]), s->targets[i]);
  for (i = 0; i < s->nareas; i++)
    k += sprintf(k,
                 "\x1f"
                 "A%zu:%s",
                 strlen(s->areas[i]), s->areas[i]);
  for (i = 0; i < s->nhandles; i++)
    k += sprintf(k, "\x1fH%08X", s->handles[i]);
  *out = s;
  return 0;
fail_nomem:
  spec_free(s);
  return TLC_ENOMEM;
}

static int spec_target(const spec_t *s, const char *name) {
  size_t i;
  if (s->ntargets == 0)
    return 1;
  for (i = 0; i < s->ntargets; i++)
    if (fnmatch(s->targets[i], name, 0) == 0)
      return 1;
  return 0;
}

/* Row filter for one build: the handles the spec selects (explicit ones, and those whose
 * mapping name matches an area pattern), plus the hex-handle match done per row. */
typedef struct keep_ctx {
  const spec_t *spec;
  uint32_t *named; /* sorted handles whose name matched */
  size_t nnamed;
} keep_ctx_t;

static int keep_row(void *ud, const tlc_stat_t *r) {
  keep_ctx_t *k = ud;
  const spec_t *s = k->spec;
  char hex[9];
  size_t i;
  if (s->nareas == 0 && s->nhandles == 0)
    return 1;
  if (s->nhandles > 0 && bsearch(&r->handle, s->handles, s->nhandles, 4, cmp_u32) != NULL)
    return 1;
  if (k->nnamed > 0 && bsearch(&r->handle, k->named, k->nnamed, 4, cmp_u32) != NULL)
    return 1;
  if (s->nareas > 0) {
    snprintf(hex, sizeof(hex), "%08X", r->handle);
    for (i = 0; i < s->nareas; i++)
      if (fnmatch(s->areas[i], hex, 0) == 0)
        return 1;
  }
  return 0;
}

static int keep_init(keep_ctx_t *k, const spec_t *s, const tlc_mapping_t *m) {
  size_t i, j;
  k->spec = s;
  k->named = NULL;
  k->nnamed = 0;
  if (s->nareas == 0 || m == NULL || m->nareas == 0)
    return 0;
  k->named = tlc_malloc(m->nareas * sizeof(uint32_t));
  if (k->named == NULL)
    return TLC_ENOMEM;
  for (i = 0; i < m->nareas; i++) {
    const char *nm = m->areas[i].name != NULL ? m->areas[i].name : "";
    for (j = 0; j < s->nareas; j++)
      if (fnmatch(s->areas[j], nm, 0) == 0) {
        k->named[k->nnamed++] = m->areas[i].handle;
        break;
      }
  }
  qsort(k->named, k->nnamed, sizeof(uint32_t), cmp_u32);
  return 0;
}

/* ---- snapshots --------------------------------------------------------------------------- */

/* Builds the snapshot of target `idx` under `spec` with rows changed after `since` (0: full).
 * Returns 0 and *out (refs 1), 1 when nothing changed (delta with no change: *out NULL),
 * TLC_ELIMIT (above max_message), or another negative error. `ft` (may be NULL) gets the
 * state seen (seq, counters). `stream` goes into the message. With as_stats the message is a
 * reply to GetStats (a Stats envelope with request id `req`) instead of a Snapshot. */
static int snap_build(tlc_pubsub_t *ps, const spec_t *spec, size_t idx, uint64_t since,
                      uint64_t stream, feed_target_t *ft, int only_if_changed, int as_stats,
                      uint32_t req, msg_t **out) {
  tlc_ps_target_info_t info;
  tlc_snap_opts_t so;
  tlc_table_t *t = &ps->scratch;
  tlc_pb_arena_t a;
  Tlcap__Snapshot s;
  Tlcap__ServerMessage sm;
  Tlcap__Stats stats;
  tlc_pb_snap_sel_t sel;
  keep_ctx_t kc;
  const tlc_mapping_t *m;
  int r, too_big;
  *out = NULL;
  memset(&info, 0, sizeof(info));
  if ((r = ps->p.info(ps->p.ud, idx, &info)) < 0)
    return r;
  memset(&so, 0, sizeof(so));
  so.since_seq = since;
  so.windows = spec->windows;
  so.neutral = spec->neutral;
  so.quantiles = spec->quantiles;
  tlc_table_clear(t);
  if ((r = ps->p.snapshot(ps->p.ud, idx, t, &so)) < 0)
    return r;
  if (only_if_changed && ft != NULL && ft->have && t->seq == ft->last_seq &&
      ft->connected == (info.connected != 0) &&
      memcmp(&ft->counters, &t->counters, sizeof(t->counters)) == 0)
    return 1;
  if (ft != NULL) {
    ft->last_seq = t->seq;
    ft->have = 1;
    ft->connected = info.connected != 0;
    ft->counters = t->counters;
  }
  m = ps->p.mapping != NULL ? ps->p.mapping(ps->p.ud, idx) : NULL;
  if ((r = keep_init(&kc, spec, m)) < 0)
    return r;
  memset(&sel, 0, sizeof(sel));
  sel.windows = spec->windows;
  sel.quantiles = spec->quantiles;
  sel.keep = keep_row;
  sel.keep_ud = &kc;
  tlc_pb_arena_init(&a, ps->o.max_message * 4);
  r = tlc_pb_snapshot_build(&a, &s, t, info.name != NULL ? info.name : "", &sel,
                            spec->names && since == 0 ? m : NULL);
  tlc_free(kc.named);
  if (r < 0)
    goto done;
  s.instance_id = ps->instance_id;
  s.stream = stream;
  s.base_seq = since;
  s.full = since == 0;
  s.connected = info.connected != 0;
  s.unix_ms = unix_ms();
  tlcap__server_message__init(&sm);
  if (as_stats) {
    tlcap__stats__init(&stats);
    stats.snapshot = &s;
    sm.request_id = req;
    sm.msg_case = TLCAP__SERVER_MESSAGE__MSG_STATS;
    sm.stats = &stats;
  } else {
    sm.msg_case = TLCAP__SERVER_MESSAGE__MSG_SNAPSHOT;
    sm.snapshot = &s;
  }
  *out = msg_encode(ps, &sm, as_stats ? PSM_CONTROL : PSM_SNAP, &too_big);
  if (*out == NULL) {
    r = too_big ? TLC_ELIMIT : TLC_ENOMEM;
    goto done;
  }
  (*out)->seq = t->seq;
  (*out)->base = since;
  ps->st.snapshots_built++;
done:
  tlc_pb_arena_fini(&a);
  return r;
}

/* ---- subscriber queues ------------------------------------------------------------------- */

static void sub_kick(tlc__ps_sub_t *s);
static void sub_fail(tlc__ps_sub_t *s, int code, const char *text, uint64_t *counter);
static void sub_close_soon(tlc__ps_sub_t *s);

static void queued_add(tlc__ps_sub_t *s, size_t n) {
  s->queued += n;
  s->ps->st.queued_bytes += n;
}

static void queued_sub(tlc__ps_sub_t *s, size_t n) {
  s->queued -= n;
  s->ps->st.queued_bytes -= n;
}

/* Applies the output limits after queued grew. Returns 1 if the subscriber is now closing. */
static int limits_check(tlc__ps_sub_t *s) {
  tlc_pubsub_t *ps = s->ps;
  char why[128];
  if (s->closing)
    return 1;
  if (s->queued > ps->o.obuf_hard) {
    snprintf(why, sizeof(why), "output buffer above the hard limit (%zu bytes)", ps->o.obuf_hard);
    sub_fail(s, TLCAP__ERROR_CODE__ERR_OUTPUT_LIMIT, why, &ps->st.closed_hard);
    return 1;
  }
  if (s->queued > ps->o.obuf_soft) {
    uint64_t now = now_ms(ps) + 1; /* + 1: 0 means "below" */
    if (s->soft_since == 0)
      s->soft_since = now;
    else if (now - s->soft_since > ps->o.obuf_soft_ms) {
      snprintf(why, sizeof(why), "output buffer above the soft limit (%zu bytes) for %llu ms",
               ps->o.obuf_soft, (unsigned long long)ps->o.obuf_soft_ms);
      sub_fail(s, TLCAP__ERROR_CODE__ERR_OUTPUT_LIMIT, why, &ps->st.closed_soft);
      return 1;
    }
  } else {
    s->soft_since = 0;
  }
  return 0;
}

/* Queues a control message (takes a reference). Never dropped. */
static void sub_ctl(tlc__ps_sub_t *s, msg_t *m) {
  ctl_node_t *n;
  if (s->closed)
    return;
  n = tlc_malloc(sizeof(*n));
  if (n == NULL) {
    /* Cannot keep the promise "never dropped": close the connection rather than lie. */
    sub_close_soon(s);
    return;
  }
  n->m = msg_ref(m);
  n->next = NULL;
  if (s->ctl_tail != NULL)
    s->ctl_tail->next = n;
  else
    s->ctl_head = n;
  s->ctl_tail = n;
  queued_add(s, m->len);
  if (!limits_check(s))
    sub_kick(s);
}

/* Encodes and queues a reply or notice for this subscriber alone. */
static void sub_send(tlc__ps_sub_t *s, Tlcap__ServerMessage *sm) {
  int too_big;
  msg_t *m = msg_encode(s->ps, sm, PSM_CONTROL, &too_big);
  if (m == NULL) {
    if (too_big) {
      Tlcap__ServerMessage em;
      Tlcap__Error e;
      tlcap__server_message__init(&em);
      tlcap__error__init(&e);
      em.request_id = sm->request_id;
      em.msg_case = TLCAP__SERVER_MESSAGE__MSG_ERROR;
      em.error = &e;
      e.code = TLCAP__ERROR_CODE__ERR_FAILED;
      e.message = (char *)"reply larger than the daemon's message cap (max_message)";
      if ((m = msg_encode(s->ps, &em, PSM_CONTROL, NULL)) == NULL) {
        sub_close_soon(s);
        return;
      }
    } else {
      sub_close_soon(s);
      return;
    }
  }
  sub_ctl(s, m);
  msg_unref(m);
}

static void send_error(tlc__ps_sub_t *s, uint32_t req, int code, const char *text, int fatal,
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
  sub_send(s, &sm);
}

/* Drops everything queued and not yet in flight. */
static void sub_drop_queued(tlc__ps_sub_t *s) {
  size_t i, j;
  while (s->ctl_head != NULL) {
    ctl_node_t *n = s->ctl_head;
    s->ctl_head = n->next;
    queued_sub(s, n->m->len);
    msg_unref(n->m);
    tlc_free(n);
  }
  s->ctl_tail = NULL;
  while (s->ring_n > 0) {
    msg_t *m = s->ring[s->ring_head];
    s->ring_head = (s->ring_head + 1) % s->ps->o.max_batches;
    s->ring_n--;
    queued_sub(s, m->len);
    msg_unref(m);
  }
  for (i = 0; i < s->nsubs; i++)
    for (j = 0; j < s->subs[i]->nslots; j++) {
      slot_t *sl = &s->subs[i]->slots[j];
      if (sl->pending != NULL) {
        queued_sub(s, sl->pending->len);
        msg_unref(sl->pending);
        sl->pending = NULL;
      }
      sl->catchup = 0;
    }
}

/* ---- feeds and subscriptions ------------------------------------------------------------- */

static void feed_tick(uv_timer_t *t);
static void house_cb(uv_timer_t *t);

static void feed_closed_cb(uv_handle_t *h) {
  feed_t *f = h->data;
  tlc_pubsub_t *ps = f->ps;
  size_t i;
  for (i = 0; i < f->nt; i++)
    msg_unref(f->t[i].full);
  tlc_free(f->t);
  spec_free(f->spec);
  tlc_free(f);
  handle_closed(ps);
}

static void feed_release(feed_t *f) {
  tlc_pubsub_t *ps = f->ps;
  if (f->nsubs > 0)
    return;
  if (f->prev != NULL)
    f->prev->next = f->next;
  else
    ps->feeds = f->next;
  if (f->next != NULL)
    f->next->prev = f->prev;
  ps->nfeeds--;
  ps->st.feeds = ps->nfeeds;
  uv_timer_stop(&f->timer);
  uv_close((uv_handle_t *)&f->timer, feed_closed_cb);
}

/* Finds or creates the feed of `spec` (taking ownership of spec either way). */
static int feed_get(tlc_pubsub_t *ps, spec_t *spec, feed_t **out) {
  feed_t *f;
  for (f = ps->feeds; f != NULL; f = f->next)
    if (strcmp(f->spec->key, spec->key) == 0) {
      spec_free(spec);
      *out = f;
      return 0;
    }
  f = tlc_calloc(1, sizeof(*f));
  if (f == NULL) {
    spec_free(spec);
    return TLC_ENOMEM;
  }
  f->ps = ps;
  f->id = ++ps->next_feed_id;
  f->spec = spec;
  uv_timer_init(ps->loop, &f->timer);
  f->timer.data = f;
  ps->open_handles++;
  uv_timer_start(&f->timer, feed_tick, spec->interval_ms, spec->interval_ms);
  f->next = ps->feeds;
  if (ps->feeds != NULL)
    ps->feeds->prev = f;
  ps->feeds = f;
  ps->nfeeds++;
  ps->st.feeds = ps->nfeeds;
  *out = f;
  return 0;
}

static uint64_t stream_id(const feed_t *f, size_t idx) {
  return (f->id << 24) | (uint64_t)(idx & 0xFFFFFF);
}

/* Grows a subscription's slots to cover `n` targets. */
static int subn_slots(subn_t *sn, size_t n) {
  slot_t *v;
  if (n <= sn->nslots)
    return 0;
  v = tlc_realloc(sn->slots, n * sizeof(*v));
  if (v == NULL)
    return TLC_ENOMEM;
  memset(v + sn->nslots, 0, (n - sn->nslots) * sizeof(*v));
  sn->slots = v;
  sn->nslots = n;
  return 0;
}

static int feed_targets(feed_t *f, size_t n) {
  feed_target_t *v;
  if (n <= f->nt)
    return 0;
  v = tlc_realloc(f->t, n * sizeof(*v));
  if (v == NULL)
    return TLC_ENOMEM;
  memset(v + f->nt, 0, (n - f->nt) * sizeof(*v));
  f->t = v;
  f->nt = n;
  return 0;
}

/* Offers message m (a delta or full snapshot of target idx) to one subscription's slot. */
static void slot_offer(subn_t *sn, size_t idx, msg_t *m) {
  tlc__ps_sub_t *s = sn->sub;
  slot_t *sl;
  if (s->closing || subn_slots(sn, idx + 1) < 0)
    return;
  sl = &sn->slots[idx];
  if (sl->pending == NULL && !sl->catchup &&
      ((m->base == 0 && !sl->sent_any) || (sl->sent_any && m->base == sl->sent_seq))) {
    sl->pending = msg_ref(m);
    queued_add(s, m->len);
  } else {
    /* The subscriber still has an unsent state of this target: the newer one replaces it. */
    if (sl->pending != NULL || (sl->catchup && sl->sent_any))
      s->ps->st.snapshots_coalesced++;
    if (sl->pending != NULL) {
      queued_sub(s, sl->pending->len);
      msg_unref(sl->pending);
      sl->pending = NULL;
    }
    sl->catchup = 1;
  }
  if (!limits_check(s))
    sub_kick(s);
}

static void feed_tick(uv_timer_t *timer) {
  feed_t *f = timer->data;
  tlc_pubsub_t *ps = f->ps;
  size_t idx, n = ps->p.count(ps->p.ud);
  if (feed_targets(f, n) < 0)
    return;
  for (idx = 0; idx < n; idx++) {
    tlc_ps_target_info_t info;
    feed_target_t *ft = &f->t[idx];
    uint64_t base = ft->have ? ft->last_seq : 0;
    msg_t *m = NULL;
    subn_t *sn;
    int r;
    memset(&info, 0, sizeof(info));
    if (ps->p.info(ps->p.ud, idx, &info) < 0 || info.name == NULL ||
        !spec_target(f->spec, info.name))
      continue;
    r = snap_build(ps, f->spec, idx, base, stream_id(f, idx), ft, 1, 0, 0, &m);
    if (r == 1)
      continue;
    if (r < 0) {
      logf_(ps, TLC_PS_LOG_WARN, "snapshot of target %s failed: %s", info.name, tlc_strerror(r));
      if (r == TLC_ELIMIT)
        for (sn = f->subs; sn != NULL; sn = sn->fnext)
          send_error(sn->sub, 0, TLCAP__ERROR_CODE__ERR_FAILED,
                     "snapshot larger than the daemon's message cap: narrow the subscription", 0,
                     r);
      continue;
    }
    if (base == 0) { /* the first tick's snapshot is full: keep it for joiners */
      msg_unref(ft->full);
      ft->full = msg_ref(m);
      ft->full_at = now_ms(ps);
    }
    for (sn = f->subs; sn != NULL; sn = sn->fnext)
      slot_offer(sn, idx, m);
    msg_unref(m);
  }
}

void tlc__ps_tick_all(tlc_pubsub_t *ps) {
  feed_t *f;
  for (f = ps->feeds; f != NULL; f = f->next)
    feed_tick(&f->timer);
}

static void subn_free(tlc__ps_sub_t *s, subn_t *sn) {
  size_t j;
  tlc_pubsub_t *ps = s->ps;
  for (j = 0; j < sn->nslots; j++)
    if (sn->slots[j].pending != NULL) {
      queued_sub(s, sn->slots[j].pending->len);
      msg_unref(sn->slots[j].pending);
    }
  tlc_free(sn->slots);
  if (sn->events)
    ps->n_event_subns--;
  if (sn->feed != NULL) {
    feed_t *f = sn->feed;
    if (sn->fprev != NULL)
      sn->fprev->fnext = sn->fnext;
    else
      f->subs = sn->fnext;
    if (sn->fnext != NULL)
      sn->fnext->fprev = sn->fprev;
    f->nsubs--;
    feed_release(f);
  }
  spec_free(sn->spec);
  tlc_free(sn);
}

static void sub_unsubscribe_all(tlc__ps_sub_t *s) {
  while (s->nsubs > 0)
    subn_free(s, s->subs[--s->nsubs]);
}

/* ---- writing ----------------------------------------------------------------------------- */

static void sub_closed_cb(uv_handle_t *h);

static void write_cb(uv_write_t *req, int status);

/* Builds the catch-up snapshot of a slot now. Returns a message (refs 1) or NULL. */
static msg_t *slot_catchup(tlc__ps_sub_t *s, subn_t *sn, size_t idx) {
  tlc_pubsub_t *ps = s->ps;
  slot_t *sl = &sn->slots[idx];
  feed_t *f = sn->feed;
  msg_t *m = NULL;
  int r;
  sl->catchup = 0;
  if (f == NULL)
    return NULL;
  if (!sl->sent_any && idx < f->nt && f->t[idx].full != NULL && f->t[idx].full_at == now_ms(ps))
    return msg_ref(f->t[idx].full); /* several joiners in the same loop turn share one */
  r = snap_build(ps, f->spec, idx, sl->sent_any ? sl->sent_seq : 0, stream_id(f, idx), NULL, 0, 0,
                 0, &m);
  if (r < 0) {
    if (r == TLC_ELIMIT)
      send_error(s, 0, TLCAP__ERROR_CODE__ERR_FAILED,
                 "snapshot larger than the daemon's message cap: narrow the subscription", 0, r);
    return NULL;
  }
  if (!sl->sent_any && idx < f->nt) {
    msg_unref(f->t[idx].full);
    f->t[idx].full = msg_ref(m);
    f->t[idx].full_at = now_ms(ps);
  }
  return m;
}

static int take(tlc__ps_sub_t *s, msg_t *m, size_t *bytes) {
  /* m's bytes are already counted in queued (moved from a queue), or are added by the caller */
  s->inflight[s->ninflight++] = m;
  *bytes += m->len;
  return s->ninflight < WRITE_MAX_BUFS && *bytes < WRITE_MAX_BYTES;
}

static void sub_kick_once(tlc__ps_sub_t *s);

/* Starts a write of whatever is queued, if none is in flight. Re-entry (a catch-up snapshot
 * that queues an error while the write is being assembled) only queues: the outer call picks
 * it up. */
static void sub_kick(tlc__ps_sub_t *s) {
  int rounds = 0;
  if (s->kicking)
    return;
  do {
    s->kicking = 1;
    sub_kick_once(s);
    s->kicking = 0;
  } while (!s->writing && !s->closed && s->ctl_head != NULL && ++rounds < 64);
}

static void sub_kick_once(tlc__ps_sub_t *s) {
  tlc_pubsub_t *ps = s->ps;
  size_t bytes = 0, i, j;
  uv_buf_t bufs[WRITE_MAX_BUFS];
  int r, room = 1;
  if (s->writing || s->closed)
    return;
  s->ninflight = 0;
  while (room && s->ctl_head != NULL) {
    ctl_node_t *n = s->ctl_head;
    s->ctl_head = n->next;
    if (s->ctl_head == NULL)
      s->ctl_tail = NULL;
    room = take(s, n->m, &bytes);
    tlc_free(n);
  }
  if (!s->closing) {
    if (room && (s->drop_batches > 0)) {
      Tlcap__ServerMessage sm;
      Tlcap__Dropped d;
      msg_t *m;
      tlcap__server_message__init(&sm);
      tlcap__dropped__init(&d);
      sm.msg_case = TLCAP__SERVER_MESSAGE__MSG_DROPPED;
      sm.dropped = &d;
      d.batches = s->drop_batches;
      d.events = s->drop_events;
      d.total_batches = s->drop_total_batches;
      d.total_events = s->drop_total_events;
      if ((m = msg_encode(ps, &sm, PSM_CONTROL, NULL)) != NULL) {
        s->drop_batches = s->drop_events = 0;
        queued_add(s, m->len);
        room = take(s, m, &bytes);
      }
    }
    for (i = 0; room && i < s->nsubs; i++) {
      subn_t *sn = s->subs[i];
      for (j = 0; room && j < sn->nslots; j++) {
        slot_t *sl = &sn->slots[j];
        msg_t *m = sl->pending;
        if (m != NULL) {
          sl->pending = NULL;
        } else if (sl->catchup) {
          m = slot_catchup(s, sn, j);
          if (m == NULL)
            continue;
          queued_add(s, m->len);
        } else {
          continue;
        }
        sl->sent_seq = m->seq;
        sl->sent_any = 1;
        ps->st.snapshots_sent++;
        room = take(s, m, &bytes);
      }
    }
    while (room && s->ring_n > 0) {
      msg_t *m = s->ring[s->ring_head];
      s->ring_head = (s->ring_head + 1) % ps->o.max_batches;
      s->ring_n--;
      room = take(s, m, &bytes);
    }
  }
  if (s->ninflight == 0) {
    if (s->close_when_flushed)
      sub_close_soon(s);
    return;
  }
  if (s->detached) {
    for (i = 0; i < s->ninflight; i++) {
      s->detached_bytes += s->inflight[i]->len;
      queued_sub(s, s->inflight[i]->len);
      msg_unref(s->inflight[i]);
    }
    s->ninflight = 0;
    if (s->ctl_head != NULL || s->ring_n > 0)
      sub_kick_once(s);
    return;
  }
  for (i = 0; i < s->ninflight; i++)
    bufs[i] = uv_buf_init((char *)s->inflight[i]->data, (unsigned)s->inflight[i]->len);
  s->wreq.data = s;
  r = uv_write(&s->wreq, &s->h.stream, bufs, (unsigned)s->ninflight, write_cb);
  if (r < 0) {
    for (i = 0; i < s->ninflight; i++) {
      queued_sub(s, s->inflight[i]->len);
      msg_unref(s->inflight[i]);
    }
    s->ninflight = 0;
    ps->st.closed_peer++;
    sub_close_soon(s);
    return;
  }
  s->writing = 1;
}

static void write_cb(uv_write_t *req, int status) {
  tlc__ps_sub_t *s = req->data;
  size_t i;
  for (i = 0; i < s->ninflight; i++) {
    queued_sub(s, s->inflight[i]->len);
    msg_unref(s->inflight[i]);
  }
  s->ninflight = 0;
  s->writing = 0;
  if (s->queued <= s->ps->o.obuf_soft)
    s->soft_since = 0;
  if (status < 0) {
    if (!s->closing)
      s->ps->st.closed_peer++;
    sub_close_soon(s);
    return;
  }
  if (!s->closed)
    sub_kick(s);
}

/* ---- closing ----------------------------------------------------------------------------- */

static void sub_free(tlc__ps_sub_t *s) {
  tlc_pubsub_t *ps = s->ps;
  sub_drop_queued(s);
  sub_unsubscribe_all(s);
  tlc_free(s->subs);
  tlc_free(s->ring);
  tlc_frame_dec_fini(&s->dec);
  tlc_free(s);
  (void)ps;
}

static void sub_unlink(tlc__ps_sub_t *s) {
  tlc_pubsub_t *ps = s->ps;
  if (s->prev != NULL)
    s->prev->next = s->next;
  else if (ps->subs == s)
    ps->subs = s->next;
  if (s->next != NULL)
    s->next->prev = s->prev;
  s->prev = s->next = NULL;
  ps->nsubs--;
  if (s->rejecting)
    ps->nrejecting--;
  ps->st.subscribers = ps->nsubs;
}

static void sub_closed_cb(uv_handle_t *h) {
  tlc__ps_sub_t *s = h->data;
  tlc_pubsub_t *ps = s->ps;
  if (--s->nhandles == 0)
    sub_free(s);
  handle_closed(ps);
}

/* Closes the handles now (pending writes get UV_ECANCELED; memory goes in the close cb). */
static void sub_close_now(tlc__ps_sub_t *s) {
  if (s->closed)
    return;
  s->closed = 1;
  s->closing = 1;
  sub_unlink(s);
  /* Subscriptions go now, so feeds and event fan-out never see a closed subscriber. */
  sub_drop_queued(s);
  sub_unsubscribe_all(s);
  if (s->detached)
    return;
  uv_close(&s->h.handle, sub_closed_cb);
  uv_close((uv_handle_t *)&s->timer, sub_closed_cb);
}

static void close_timer_cb(uv_timer_t *t) {
  sub_close_now(t->data);
}

/* Closes from the next loop turn: safe from any callback of this subscriber. */
static void sub_close_soon(tlc__ps_sub_t *s) {
  s->closing = 1;
  if (s->closed)
    return;
  if (s->detached) {
    sub_close_now(s);
    return;
  }
  uv_timer_stop(&s->timer);
  uv_timer_start(&s->timer, close_timer_cb, 0, 0);
}

/* Fatal error: drop what is queued, queue the error, close once it is written (or after the
 * grace time if the peer does not take it). Never frees anything synchronously. */
static void sub_fail(tlc__ps_sub_t *s, int code, const char *text, uint64_t *counter) {
  tlc_pubsub_t *ps = s->ps;
  if (s->closing)
    return;
  if (counter != NULL)
    (*counter)++;
  logf_(ps, TLC_PS_LOG_NOTICE, "sub#%llu %s: closing: %s", (unsigned long long)s->id, s->peer,
        text);
  s->closing = 1;
  sub_drop_queued(s);
  s->close_when_flushed = 1;
  if (!s->detached) {
    uv_read_stop(&s->h.stream);
    uv_timer_stop(&s->timer);
    uv_timer_start(&s->timer, close_timer_cb, ps->o.close_grace_ms, 0);
  }
  {
    /* bypass sub_ctl's limit check: the error goes whatever the queue holds */
    Tlcap__ServerMessage sm;
    Tlcap__Error e;
    msg_t *m;
    tlcap__server_message__init(&sm);
    tlcap__error__init(&e);
    sm.msg_case = TLCAP__SERVER_MESSAGE__MSG_ERROR;
    sm.error = &e;
    e.code = (Tlcap__ErrorCode)code;
    e.message = (char *)text;
    e.fatal = 1;
    m = msg_encode(ps, &sm, PSM_CONTROL, NULL);
    if (m != NULL) {
      ctl_node_t *n = tlc_malloc(sizeof(*n));
      if (n != NULL) {
        n->m = m;
        n->next = NULL;
        s->ctl_head = s->ctl_tail = n;
        queued_add(s, m->len);
      } else {
        msg_unref(m);
      }
    }
  }
  sub_kick(s);
}

/* ---- requests ---------------------------------------------------------------------------- */

static void reply_ack(tlc__ps_sub_t *s, uint32_t req, uint32_t subid) {
  Tlcap__ServerMessage sm;
  Tlcap__Ack a;
  tlcap__server_message__init(&sm);
  tlcap__ack__init(&a);
  sm.request_id = req;
  sm.msg_case = TLCAP__SERVER_MESSAGE__MSG_ACK;
  sm.ack = &a;
  a.subscription_id = subid;
  sub_send(s, &sm);
}

static void auth_failed_cb(uv_timer_t *t) {
  tlc__ps_sub_t *s = t->data;
  s->closing = 0; /* was set only to stop input; now fail for real */
  sub_fail(s, TLCAP__ERROR_CODE__ERR_AUTH_FAILED, "authentication failed", &s->ps->st.closed_auth);
}

static void on_hello(tlc__ps_sub_t *s, uint32_t req, const Tlcap__Hello *h) {
  tlc_pubsub_t *ps = s->ps;
  uint32_t cmax = h->protocol_version != 0 ? h->protocol_version : 1;
  uint32_t cmin = h->min_protocol_version != 0 ? h->min_protocol_version : cmax;
  Tlcap__ServerMessage sm;
  Tlcap__Welcome w;
  if (cmin > cmax)
    cmin = cmax;
  if (cmax < TLC_PROTO_MIN_VERSION || cmin > TLC_PROTO_VERSION) {
    char why[128];
    snprintf(why, sizeof(why), "no common protocol version (client %u..%u, daemon %u..%u)", cmin,
             cmax, TLC_PROTO_MIN_VERSION, TLC_PROTO_VERSION);
    sub_fail(s, TLCAP__ERROR_CODE__ERR_VERSION, why, &ps->st.closed_frame);
    return;
  }
  if (!s->authed) {
    if (ps->token_len > 0 &&
        !tlc_pubsub_token_equal(h->token.data, h->token.len, ps->token, ps->token_len)) {
      /* Never log the token presented. The answer comes after auth_fail_delay_ms, and the
       * connection reads nothing meanwhile: with max_subscribers, that bounds guessing. */
      s->closing = 1;
      if (s->detached) {
        s->closing = 0;
        sub_fail(s, TLCAP__ERROR_CODE__ERR_AUTH_FAILED, "authentication failed",
                 &ps->st.closed_auth);
        return;
      }
      uv_read_stop(&s->h.stream);
      uv_timer_stop(&s->timer);
      uv_timer_start(&s->timer, auth_failed_cb, ps->o.auth_fail_delay_ms, 0);
      return;
    }
    s->authed = 1;
    tlc_frame_dec_set_max(&s->dec, ps->o.max_request);
    if (!s->detached)
      uv_timer_stop(&s->timer);
    logf_(ps, TLC_PS_LOG_INFO, "sub#%llu %s: hello from \"%.64s\"", (unsigned long long)s->id,
          s->peer, h->client_name != NULL ? h->client_name : "");
  }
  s->version = cmax < TLC_PROTO_VERSION ? cmax : TLC_PROTO_VERSION;
  tlcap__server_message__init(&sm);
  tlcap__welcome__init(&w);
  sm.request_id = req;
  sm.msg_case = TLCAP__SERVER_MESSAGE__MSG_WELCOME;
  sm.welcome = &w;
  w.protocol_version = s->version;
  w.min_protocol_version = TLC_PROTO_MIN_VERSION;
  w.daemon_version = (char *)ps->o.daemon_version;
  w.instance_id = ps->instance_id;
  w.max_request_bytes = ps->o.max_request;
  w.max_message_bytes = ps->o.max_message;
  w.max_subscriptions = (uint32_t)ps->o.max_subscriptions;
  w.min_interval_ms = ps->o.min_interval_ms;
  sub_send(s, &sm);
}

static void on_subscribe(tlc__ps_sub_t *s, uint32_t req, const Tlcap__Subscribe *r) {
  tlc_pubsub_t *ps = s->ps;
  spec_t *spec = NULL, *fspec = NULL;
  subn_t *sn;
  const char *why = "invalid subscription";
  size_t i, n;
  int e;
  for (i = 0; i < s->nsubs; i++)
    if (s->subs[i]->id == r->subscription_id) {
      send_error(s, req, TLCAP__ERROR_CODE__ERR_BAD_REQUEST,
                 "subscription_id already in use on this connection", 0, TLC_EINVAL);
      return;
    }
  if (s->nsubs >= ps->o.max_subscriptions) {
    send_error(s, req, TLCAP__ERROR_CODE__ERR_TOO_MANY_SUBSCRIPTIONS,
               "too many subscriptions on this connection", 0, TLC_ELIMIT);
    return;
  }
  if ((e = spec_new(ps, r, &spec, &why)) < 0 ||
      (!r->no_snapshots && (e = spec_new(ps, r, &fspec, &why)) < 0)) {
    spec_free(spec);
    send_error(s, req,
               e == TLC_EINVAL ? TLCAP__ERROR_CODE__ERR_BAD_REQUEST : TLCAP__ERROR_CODE__ERR_FAILED,
               e == TLC_EINVAL ? why : "out of memory", 0, e);
    return;
  }
  sn = tlc_calloc(1, sizeof(*sn));
  if (sn == NULL) {
    spec_free(spec);
    spec_free(fspec);
    send_error(s, req, TLCAP__ERROR_CODE__ERR_FAILED, "out of memory", 0, TLC_ENOMEM);
    return;
  }
  sn->id = r->subscription_id;
  sn->sub = s;
  sn->spec = spec;
  n = ps->p.count(ps->p.ud);
  if (subn_slots(sn, n) < 0) {
    spec_free(fspec);
    fspec = NULL;
    sn->feed = NULL;
  }
  if (sn->nslots < n || (fspec != NULL && feed_get(ps, fspec, &sn->feed) < 0)) {
    tlc_free(sn->slots);
    spec_free(spec);
    tlc_free(sn);
    send_error(s, req, TLCAP__ERROR_CODE__ERR_FAILED, "out of memory", 0, TLC_ENOMEM);
    return;
  }
  if (sn->feed != NULL) {
    feed_t *f = sn->feed;
    sn->fnext = f->subs;
    if (f->subs != NULL)
      f->subs->fprev = sn;
    f->subs = sn;
    f->nsubs++;
    /* First a full snapshot of every matching target, as soon as the socket takes it. */
    for (i = 0; i < n; i++) {
      tlc_ps_target_info_t info;
      memset(&info, 0, sizeof(info));
      if (ps->p.info(ps->p.ud, i, &info) == 0 && info.name != NULL &&
          spec_target(sn->spec, info.name))
        sn->slots[i].catchup = 1;
    }
  }
  if (r->events) {
    sn->events = 1;
    ps->n_event_subns++;
  }
  s->subs[s->nsubs++] = sn;
  reply_ack(s, req, sn->id);
}

static void on_unsubscribe(tlc__ps_sub_t *s, uint32_t req, const Tlcap__Unsubscribe *r) {
  size_t i;
  for (i = 0; i < s->nsubs; i++)
    if (s->subs[i]->id == r->subscription_id) {
      subn_t *sn = s->subs[i];
      s->subs[i] = s->subs[--s->nsubs];
      subn_free(s, sn);
      reply_ack(s, req, r->subscription_id);
      return;
    }
  send_error(s, req, TLCAP__ERROR_CODE__ERR_BAD_REQUEST, "no such subscription", 0, TLC_EINVAL);
}

static void on_list(tlc__ps_sub_t *s, uint32_t req) {
  tlc_pubsub_t *ps = s->ps;
  size_t i, n = ps->p.count(ps->p.ud), k = 0;
  tlc_pb_arena_t a;
  Tlcap__ServerMessage sm;
  Tlcap__TargetList tl;
  Tlcap__TargetInfo *ti;
  Tlcap__Counters *c;
  tlc_pb_arena_init(&a, ps->o.max_message * 4);
  tlcap__server_message__init(&sm);
  tlcap__target_list__init(&tl);
  sm.request_id = req;
  sm.msg_case = TLCAP__SERVER_MESSAGE__MSG_TARGETS;
  sm.targets = &tl;
  tl.instance_id = ps->instance_id;
  ti = tlc_pb_arena_alloc(&a, sizeof(*ti) * (n + 1));
  c = tlc_pb_arena_alloc(&a, sizeof(*c) * (n + 1));
  tl.targets = tlc_pb_arena_alloc(&a, sizeof(*tl.targets) * (n + 1));
  if (ti == NULL || c == NULL || tl.targets == NULL) {
    tlc_pb_arena_fini(&a);
    send_error(s, req, TLCAP__ERROR_CODE__ERR_FAILED, "out of memory", 0, TLC_ENOMEM);
    return;
  }
  for (i = 0; i < n; i++) {
    tlc_ps_target_info_t in;
    memset(&in, 0, sizeof(in));
    if (ps->p.info(ps->p.ud, i, &in) < 0)
      continue;
    tlcap__target_info__init(&ti[k]);
    ti[k].name = tlc_pb_arena_strdup(&a, in.name != NULL ? in.name : "");
    ti[k].peer = tlc_pb_arena_strdup(&a, in.peer != NULL ? in.peer : "");
    if (ti[k].name == NULL || ti[k].peer == NULL)
      break;
    ti[k].format = (Tlcap__Format)in.format;
    ti[k].connected = in.connected != 0;
    tlc_pb_counters_set(&c[k], &in.counters);
    ti[k].counters = &c[k];
    ti[k].connections = in.connections;
    ti[k].reconnects = in.reconnects;
    ti[k].gaps = in.gaps;
    ti[k].decode_errors = in.decode_errors;
    ti[k].last_connect_unix_ms = in.last_connect_unix_ms;
    ti[k].last_disconnect_unix_ms = in.last_disconnect_unix_ms;
    tl.targets[k] = &ti[k];
    k++;
  }
  tl.n_targets = k;
  sub_send(s, &sm);
  tlc_pb_arena_fini(&a);
}

static int find_target(tlc__ps_sub_t *s, uint32_t req, const char *name, size_t *idx) {
  tlc_pubsub_t *ps = s->ps;
  char why[200];
  if (name == NULL || ps->p.find(ps->p.ud, name, idx) < 0) {
    snprintf(why, sizeof(why), "no such target: %.128s", name != NULL ? name : "");
    send_error(s, req, TLCAP__ERROR_CODE__ERR_NO_SUCH_TARGET, why, 0, TLC_ERANGE);
    return -1;
  }
  return 0;
}

static void on_get_stats(tlc__ps_sub_t *s, uint32_t req, const Tlcap__GetStats *g) {
  tlc_pubsub_t *ps = s->ps;
  spec_t spec;
  size_t idx;
  msg_t *m = NULL;
  int r;
  if (find_target(s, req, g->target, &idx) < 0)
    return;
  memset(&spec, 0, sizeof(spec));
  spec.windows = g->windows ? 1 : 0;
  spec.quantiles = g->quantiles ? 1 : 0;
  spec.neutral = g->neutral ? 1 : 0;
  spec.names = g->names ? 1 : 0;
  r = snap_build(ps, &spec, idx, 0, 0, NULL, 0, 1, req, &m);
  if (r < 0) {
    send_error(s, req, TLCAP__ERROR_CODE__ERR_FAILED,
               r == TLC_ELIMIT ? "statistics larger than the daemon's message cap"
                               : tlc_strerror(r),
               0, r);
    return;
  }
  sub_ctl(s, m);
  msg_unref(m);
}

static void on_rotate(tlc__ps_sub_t *s, uint32_t req, const Tlcap__RotateTarget *r) {
  tlc_pubsub_t *ps = s->ps;
  size_t idx;
  int e;
  if (find_target(s, req, r->target, &idx) < 0)
    return;
  e = ps->p.rotate != NULL ? ps->p.rotate(ps->p.ud, idx) : TLC_EINVAL;
  if (e < 0) {
    char why[200];
    snprintf(why, sizeof(why), "rotate %.128s: %s", r->target, tlc_strerror(e));
    send_error(s, req, TLCAP__ERROR_CODE__ERR_FAILED, why, 0, e);
    return;
  }
  reply_ack(s, req, 0);
}

static void on_load_mapping(tlc__ps_sub_t *s, uint32_t req, const Tlcap__LoadMapping *r) {
  tlc_pubsub_t *ps = s->ps;
  char err[256], why[400];
  size_t idx;
  int e;
  if (find_target(s, req, r->target, &idx) < 0)
    return;
  err[0] = 0;
  e = ps->p.load_mapping != NULL ? ps->p.load_mapping(ps->p.ud, idx, (const char *)r->mapping.data,
                                                      r->mapping.len, err, sizeof(err))
                                 : TLC_EINVAL;
  if (e < 0) {
    snprintf(why, sizeof(why), "mapping for %.128s: %s", r->target,
             err[0] != 0 ? err : tlc_strerror(e));
    send_error(s, req, TLCAP__ERROR_CODE__ERR_FAILED, why, 0, e);
    return;
  }
  reply_ack(s, req, 0);
  tlc_pubsub_target_event(ps, r->target, TLC_PS_EV_MAPPING_LOADED, NULL);
}

static void on_ping(tlc__ps_sub_t *s, uint32_t req, const Tlcap__Ping *p) {
  Tlcap__ServerMessage sm;
  Tlcap__Pong pg;
  tlcap__server_message__init(&sm);
  tlcap__pong__init(&pg);
  sm.request_id = req;
  sm.msg_case = TLCAP__SERVER_MESSAGE__MSG_PONG;
  sm.pong = &pg;
  pg.cookie = p->cookie;
  sub_send(s, &sm);
}

/* Decodes and dispatches one request frame. */
static void dispatch(tlc__ps_sub_t *s, const uint8_t *frame, size_t len) {
  tlc_pubsub_t *ps = s->ps;
  Tlcap__ClientMessage *cm = tlcap__client_message__unpack(&tlc_pb_allocator, len, frame);
  uint32_t req;
  if (cm == NULL) {
    sub_fail(s, TLCAP__ERROR_CODE__ERR_BAD_FRAME, "malformed request (not a ClientMessage)",
             &ps->st.closed_frame);
    return;
  }
  ps->st.requests++;
  req = cm->request_id;
  if (!s->authed && cm->msg_case != TLCAP__CLIENT_MESSAGE__MSG_HELLO) {
    sub_fail(s, TLCAP__ERROR_CODE__ERR_HELLO_REQUIRED, "the first request must be Hello",
             &ps->st.closed_auth);
    goto done;
  }
  switch (cm->msg_case) {
  case TLCAP__CLIENT_MESSAGE__MSG_HELLO:
    on_hello(s, req, cm->hello);
    break;
  case TLCAP__CLIENT_MESSAGE__MSG_SUBSCRIBE:
    on_subscribe(s, req, cm->subscribe);
    break;
  case TLCAP__CLIENT_MESSAGE__MSG_UNSUBSCRIBE:
    on_unsubscribe(s, req, cm->unsubscribe);
    break;
  case TLCAP__CLIENT_MESSAGE__MSG_LIST_TARGETS:
    on_list(s, req);
    break;
  case TLCAP__CLIENT_MESSAGE__MSG_GET_STATS:
    on_get_stats(s, req, cm->get_stats);
    break;
  case TLCAP__CLIENT_MESSAGE__MSG_ROTATE:
    on_rotate(s, req, cm->rotate);
    break;
  case TLCAP__CLIENT_MESSAGE__MSG_LOAD_MAPPING:
    on_load_mapping(s, req, cm->load_mapping);
    break;
  case TLCAP__CLIENT_MESSAGE__MSG_PING:
    on_ping(s, req, cm->ping);
    break;
  default:
    /* A newer client's request type: say so and carry on (docs/protocol.md). */
    ps->st.unknown_requests++;
    send_error(s, req, TLCAP__ERROR_CODE__ERR_UNKNOWN_REQUEST,
               "unknown request type (newer client?)", 0, 0);
    break;
  }
done:
  tlcap__client_message__free_unpacked(cm, &tlc_pb_allocator);
}

static void request_timeout_cb(uv_timer_t *t) {
  tlc__ps_sub_t *s = t->data;
  char why[96];
  snprintf(why, sizeof(why), "request incomplete after %llu ms",
           (unsigned long long)s->ps->o.request_timeout_ms);
  sub_fail(s, TLCAP__ERROR_CODE__ERR_TIMEOUT, why, &s->ps->st.closed_timeout);
}

/* Feeds received bytes through the frame decoder into dispatch. */
static void sub_input(tlc__ps_sub_t *s, const uint8_t *p, size_t n) {
  tlc_pubsub_t *ps = s->ps;
  while (n > 0 && !s->closing) {
    const uint8_t *frame;
    size_t used, flen;
    int r = tlc_frame_dec_feed(&s->dec, p, n, &used, &frame, &flen);
    if (r == TLC_ELIMIT) {
      char why[128];
      snprintf(why, sizeof(why), "frame above the %s limit of %zu bytes",
               s->authed ? "request" : "pre-authentication", s->dec.max);
      sub_fail(s, TLCAP__ERROR_CODE__ERR_TOO_LARGE, why, &ps->st.closed_oversize);
      return;
    }
    if (r < 0) {
      sub_fail(s, TLCAP__ERROR_CODE__ERR_BAD_FRAME,
               r == TLC_ENOMEM ? "out of memory for the frame" : "malformed frame header",
               &ps->st.closed_frame);
      return;
    }
    p += used;
    n -= used;
    if (r == 1)
      dispatch(s, frame, flen);
  }
  /* After Hello the timer is free: it bounds how long a started request may stay incomplete
   * (a length prefix followed by silence). Before Hello the Hello deadline covers it. */
  if (s->authed && !s->closing && !s->detached) {
    int partial = s->dec.nhdr > 0 || s->dec.in_payload;
    if (partial && !uv_is_active((uv_handle_t *)&s->timer))
      uv_timer_start(&s->timer, request_timeout_cb, ps->o.request_timeout_ms, 0);
    else if (!partial)
      uv_timer_stop(&s->timer);
  }
}

/* ---- connections ------------------------------------------------------------------------- */

static void alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  tlc__ps_sub_t *s = h->data;
  (void)suggested;
  if (s->ps->rbuf_busy) {
    buf->base = NULL;
    buf->len = 0;
    return;
  }
  s->ps->rbuf_busy = 1;
  buf->base = s->ps->rbuf;
  buf->len = READ_BUF;
}

static void read_cb(uv_stream_t *st, ssize_t n, const uv_buf_t *buf) {
  tlc__ps_sub_t *s = st->data;
  tlc_pubsub_t *ps = s->ps;
  if (buf->base == ps->rbuf)
    ps->rbuf_busy = 0;
  if (n > 0) {
    sub_input(s, (const uint8_t *)buf->base, (size_t)n);
    return;
  }
  if (n < 0) {
    if (!s->closing) {
      ps->st.closed_peer++;
      logf_(ps, TLC_PS_LOG_INFO, "sub#%llu %s: disconnected (%s)", (unsigned long long)s->id,
            s->peer, uv_strerror((int)n));
    }
    uv_read_stop(st);
    sub_close_soon(s);
  }
}

static void hello_timeout_cb(uv_timer_t *t) {
  tlc__ps_sub_t *s = t->data;
  sub_fail(s, TLCAP__ERROR_CODE__ERR_TIMEOUT, "no Hello before the deadline",
           &s->ps->st.closed_auth);
}

static tlc__ps_sub_t *sub_alloc(tlc_pubsub_t *ps) {
  tlc__ps_sub_t *s = tlc_calloc(1, sizeof(*s));
  if (s == NULL)
    return NULL;
  s->ps = ps;
  s->id = ++ps->next_sub_id;
  s->ring = tlc_calloc(ps->o.max_batches, sizeof(msg_t *));
  s->subs = tlc_calloc(ps->o.max_subscriptions, sizeof(subn_t *));
  if (s->ring == NULL || s->subs == NULL) {
    tlc_free(s->ring);
    tlc_free(s->subs);
    tlc_free(s);
    return NULL;
  }
  tlc_frame_dec_init(&s->dec, ps->o.max_preauth);
  return s;
}

static void sub_link(tlc_pubsub_t *ps, tlc__ps_sub_t *s) {
  s->next = ps->subs;
  if (ps->subs != NULL)
    ps->subs->prev = s;
  ps->subs = s;
  ps->nsubs++;
  ps->st.subscribers = ps->nsubs;
}

static void discard_closed_cb(uv_handle_t *h) {
  tlc_pubsub_t *ps = h->data;
  tlc_free(h);
  handle_closed(ps);
}

static void peer_name(tlc__ps_sub_t *s) {
  if (s->is_unix) {
#ifdef SO_PEERCRED
    struct ucred uc;
    socklen_t l = sizeof(uc);
    uv_os_fd_t fd;
    if (uv_fileno(&s->h.handle, &fd) == 0 &&
        getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &uc, &l) == 0) {
      snprintf(s->peer, sizeof(s->peer), "unix pid=%d uid=%u gid=%u", (int)uc.pid, (unsigned)uc.uid,
               (unsigned)uc.gid);
      return;
    }
#endif
    snprintf(s->peer, sizeof(s->peer), "unix");
  } else {
    struct sockaddr_storage ss;
    int l = sizeof(ss);
    char ip[64] = "?";
    int port = 0;
    if (uv_tcp_getpeername(&s->h.tcp, (struct sockaddr *)&ss, &l) == 0) {
      if (ss.ss_family == AF_INET) {
        uv_ip4_name((struct sockaddr_in *)&ss, ip, sizeof(ip));
        port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
      } else if (ss.ss_family == AF_INET6) {
        uv_ip6_name((struct sockaddr_in6 *)&ss, ip, sizeof(ip));
        port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
      }
    }
    snprintf(s->peer, sizeof(s->peer), "%s:%d", ip, port);
  }
}

static void on_connection(uv_stream_t *server, int status) {
  listener_t *l = server->data;
  tlc_pubsub_t *ps = l->ps;
  tlc__ps_sub_t *s;
  int reject, r;
  if (status < 0) {
    logf_(ps, TLC_PS_LOG_WARN, "accept: %s", uv_strerror(status));
    return;
  }
  if (ps->closing)
    return;
  reject = ps->nsubs - ps->nrejecting >= ps->o.max_subscribers;
  s = (reject && ps->nrejecting >= MAX_REJECTING) ? NULL : sub_alloc(ps);
  if (s == NULL) {
    /* No room even to say why: accept and close at once, so the listener does not spin. */
    uv_handle_t *h = tlc_malloc(l->is_unix ? sizeof(uv_pipe_t) : sizeof(uv_tcp_t));
    if (h == NULL)
      return;
    if (l->is_unix)
      uv_pipe_init(ps->loop, (uv_pipe_t *)h, 0);
    else
      uv_tcp_init(ps->loop, (uv_tcp_t *)h);
    h->data = ps;
    ps->open_handles++;
    (void)uv_accept(server, (uv_stream_t *)h);
    ps->st.rejected_limit++;
    uv_close(h, discard_closed_cb);
    return;
  }
  s->is_unix = l->is_unix;
  if (l->is_unix)
    uv_pipe_init(ps->loop, &s->h.pipe, 0);
  else
    uv_tcp_init(ps->loop, &s->h.tcp);
  uv_timer_init(ps->loop, &s->timer);
  s->h.handle.data = s;
  s->timer.data = s;
  s->nhandles = 2;
  ps->open_handles += 2;
  sub_link(ps, s);
  r = uv_accept(server, &s->h.stream);
  if (r < 0) {
    sub_close_now(s);
    return;
  }
  ps->st.accepted++;
  if (!l->is_unix)
    uv_tcp_nodelay(&s->h.tcp, 1);
  if (ps->o.sndbuf > 0) {
    int v = ps->o.sndbuf;
    (void)uv_send_buffer_size(&s->h.handle, &v);
  }
  peer_name(s);
  if (reject) {
    s->rejecting = 1;
    ps->nrejecting++;
    logf_(ps, TLC_PS_LOG_WARN, "sub#%llu %s: refused: too many subscribers (max %zu)",
          (unsigned long long)s->id, s->peer, ps->o.max_subscribers);
    sub_fail(s, TLCAP__ERROR_CODE__ERR_TOO_MANY_SUBSCRIBERS, "too many subscribers",
             &ps->st.rejected_limit);
    return;
  }
  logf_(ps, TLC_PS_LOG_INFO, "sub#%llu %s: connected", (unsigned long long)s->id, s->peer);
  uv_timer_start(&s->timer, hello_timeout_cb, ps->o.hello_timeout_ms, 0);
  r = uv_read_start(&s->h.stream, alloc_cb, read_cb);
  if (r < 0)
    sub_close_soon(s);
}

/* ---- server ------------------------------------------------------------------------------ */

void tlc_pubsub_opts_default(tlc_pubsub_opts_t *o) {
  memset(o, 0, sizeof(*o));
  o->max_subscribers = 256;
  o->max_subscriptions = 64;
  o->max_request = 4u << 20;
  o->max_preauth = 1024;
  o->hello_timeout_ms = 10000;
  o->obuf_hard = 32u << 20;
  o->obuf_soft = 8u << 20;
  o->obuf_soft_ms = 30000;
  o->max_batches = 64;
  o->max_batch_events = 4096;
  o->max_message = 64u << 20;
  o->min_interval_ms = 50;
  o->max_interval_ms = 3600000;
  o->close_grace_ms = 2000;
  o->request_timeout_ms = 30000;
  o->auth_fail_delay_ms = 250;
  o->unix_mode = 0660;
  o->daemon_version = "tlcapd";
}

int tlc_pubsub_new(uv_loop_t *loop, const tlc_pubsub_opts_t *o, const tlc_ps_provider_t *p,
                   tlc_pubsub_t **out) {
  tlc_pubsub_t *ps;
  tlc_pubsub_opts_t d;
  *out = NULL;
  if (p == NULL || p->count == NULL || p->info == NULL || p->find == NULL || p->snapshot == NULL)
    return TLC_EINVAL;
  tlc_pubsub_opts_default(&d);
  if (o == NULL)
    o = &d;
  ps = tlc_calloc(1, sizeof(*ps));
  if (ps == NULL)
    return TLC_ENOMEM;
  ps->loop = loop;
  ps->o = *o;
  ps->p = *p;
#define DEF(f)                                                                                     \
  if (ps->o.f == 0)                                                                                \
  ps->o.f = d.f
  DEF(max_subscribers);
  DEF(max_subscriptions);
  DEF(max_request);
  DEF(max_preauth);
  DEF(hello_timeout_ms);
  DEF(obuf_hard);
  DEF(obuf_soft);
  DEF(obuf_soft_ms);
  DEF(max_batches);
  DEF(max_batch_events);
  DEF(max_message);
  DEF(min_interval_ms);
  DEF(max_interval_ms);
  DEF(close_grace_ms);
  DEF(request_timeout_ms);
  DEF(auth_fail_delay_ms);
  DEF(unix_mode);
#undef DEF
  if (ps->o.daemon_version == NULL)
    ps->o.daemon_version = d.daemon_version;
  if (o->token != NULL && o->token[0] != 0) {
    ps->token_len = strlen(o->token);
    ps->token = (uint8_t *)tlc_strndup(o->token, ps->token_len);
    if (ps->token == NULL) {
      tlc_free(ps);
      return TLC_ENOMEM;
    }
  }
  ps->o.token = NULL; /* only the private copy is kept */
  ps->instance_id = o->instance_id;
  while (ps->instance_id == 0) {
    if (uv_random(NULL, NULL, &ps->instance_id, sizeof(ps->instance_id), 0, NULL) < 0)
      ps->instance_id = ((uint64_t)time(NULL) << 20) ^ (uint64_t)getpid() ^ uv_hrtime();
  }
  tlc_table_init(&ps->scratch);
  uv_timer_init(loop, &ps->house);
  ps->house.data = ps;
  ps->open_handles = 1;
  uv_timer_start(&ps->house, house_cb, 1000, 1000);
  *out = ps;
  return 0;
}

uint64_t tlc_pubsub_instance_id(const tlc_pubsub_t *ps) {
  return ps->instance_id;
}

void tlc_pubsub_get_stats(const tlc_pubsub_t *ps, tlc_pubsub_stats_t *out) {
  *out = ps->st;
}

static int is_loopback(const struct sockaddr *sa) {
  if (sa->sa_family == AF_INET)
    return (ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >> 24) == 127;
  if (sa->sa_family == AF_INET6) {
    const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
    if (IN6_IS_ADDR_LOOPBACK(a))
      return 1;
    if (IN6_IS_ADDR_V4MAPPED(a))
      return a->s6_addr[12] == 127;
  }
  return 0;
}

static listener_t *listener_new(tlc_pubsub_t *ps, int is_unix) {
  listener_t *l;
  if (ps->nlisteners >= MAX_LISTENERS)
    return NULL;
  l = tlc_calloc(1, sizeof(*l));
  if (l == NULL)
    return NULL;
  l->ps = ps;
  l->is_unix = (uint8_t)is_unix;
  if (is_unix)
    uv_pipe_init(ps->loop, &l->h.pipe, 0);
  else
    uv_tcp_init(ps->loop, &l->h.tcp);
  l->h.handle.data = l;
  ps->open_handles++;
  ps->listeners[ps->nlisteners++] = l;
  return l;
}

static void listener_closed_cb(uv_handle_t *h) {
  listener_t *l = h->data;
  tlc_pubsub_t *ps = l->ps;
  tlc_free(l->path);
  tlc_free(l);
  handle_closed(ps);
}

/* Undoes listener_new for a listener that never listened. */
static void listener_drop(tlc_pubsub_t *ps, listener_t *l) {
  ps->nlisteners--;
  uv_close(&l->h.handle, listener_closed_cb);
}

int tlc_pubsub_listen_tcp(tlc_pubsub_t *ps, const char *host, int port, int *bound_port) {
  struct sockaddr_storage ss;
  listener_t *l;
  int r;
  if (strcmp(host, "localhost") == 0)
    host = "127.0.0.1";
  if (uv_ip4_addr(host, port, (struct sockaddr_in *)&ss) != 0 &&
      uv_ip6_addr(host, port, (struct sockaddr_in6 *)&ss) != 0) {
    logf_(ps, TLC_PS_LOG_ERR, "%s is not a numeric address", host);
    return TLC_EINVAL;
  }
  if (!is_loopback((struct sockaddr *)&ss) && ps->token_len == 0) {
    logf_(ps, TLC_PS_LOG_ERR,
          "refusing to serve subscribers on non-loopback %s:%d without a token "
          "(configure one, or use 127.0.0.1 or a Unix socket)",
          host, port);
    return TLC_EINVAL;
  }
  if ((l = listener_new(ps, 0)) == NULL)
    return TLC_ENOMEM;
  if ((r = uv_tcp_bind(&l->h.tcp, (struct sockaddr *)&ss, 0)) < 0 ||
      (r = uv_listen(&l->h.stream, 128, on_connection)) < 0) {
    logf_(ps, TLC_PS_LOG_ERR, "listen on %s:%d: %s", host, port, uv_strerror(r));
    listener_drop(ps, l);
    return r;
  }
  if (bound_port != NULL) {
    int len = sizeof(ss);
    *bound_port = 0;
    if (uv_tcp_getsockname(&l->h.tcp, (struct sockaddr *)&ss, &len) == 0)
      *bound_port = ntohs(ss.ss_family == AF_INET ? ((struct sockaddr_in *)&ss)->sin_port
                                                  : ((struct sockaddr_in6 *)&ss)->sin6_port);
  }
  logf_(ps, TLC_PS_LOG_INFO, "serving subscribers on %s:%d", host, port);
  return 0;
}

/* A socket file at path: 0 if absent or stale (removed), UV_EADDRINUSE if someone accepts on
 * it, UV_EEXIST if it is not a socket. */
static int unix_stale(tlc_pubsub_t *ps, const char *path) {
  struct stat st;
  struct sockaddr_un sa;
  int fd, r;
  if (lstat(path, &st) != 0)
    return 0;
  if (!S_ISSOCK(st.st_mode)) {
    logf_(ps, TLC_PS_LOG_ERR, "%s exists and is not a socket: leaving it alone", path);
    return UV_EEXIST;
  }
  if (strlen(path) >= sizeof(sa.sun_path))
    return UV_ENAMETOOLONG;
  memset(&sa, 0, sizeof(sa));
  sa.sun_family = AF_UNIX;
  memcpy(sa.sun_path, path, strlen(path) + 1);
  fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return uv_translate_sys_error(errno);
  r = connect(fd, (struct sockaddr *)&sa, sizeof(sa));
  close(fd);
  if (r == 0) {
    logf_(ps, TLC_PS_LOG_ERR, "%s is in use by another process", path);
    return UV_EADDRINUSE;
  }
  logf_(ps, TLC_PS_LOG_NOTICE, "removing stale socket %s", path);
  if (unlink(path) != 0 && errno != ENOENT)
    return uv_translate_sys_error(errno);
  return 0;
}

int tlc_pubsub_listen_unix(tlc_pubsub_t *ps, const char *path) {
  listener_t *l;
  int r;
  if ((r = unix_stale(ps, path)) < 0)
    return r;
  if ((l = listener_new(ps, 1)) == NULL)
    return TLC_ENOMEM;
  if ((r = uv_pipe_bind(&l->h.pipe, path)) < 0) {
    logf_(ps, TLC_PS_LOG_ERR, "bind %s: %s", path, uv_strerror(r));
    listener_drop(ps, l);
    return r;
  }
  l->path = tlc_strndup(path, strlen(path));
  if (l->path == NULL || chmod(path, ps->o.unix_mode) != 0 ||
      (r = uv_listen(&l->h.stream, 128, on_connection)) < 0) {
    if (l->path == NULL)
      r = TLC_ENOMEM;
    else if (r >= 0)
      r = uv_translate_sys_error(errno);
    logf_(ps, TLC_PS_LOG_ERR, "listen on %s: %s", path, tlc_strerror(r));
    unlink(path);
    listener_drop(ps, l);
    return r;
  }
  logf_(ps, TLC_PS_LOG_INFO, "serving subscribers on unix:%s (mode %03o)", path, ps->o.unix_mode);
  return 0;
}

int tlc_pubsub_listen_fd(tlc_pubsub_t *ps, int fd, int is_unix) {
  listener_t *l;
  int r;
  if (!is_unix) {
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);
    if (getsockname(fd, (struct sockaddr *)&ss, &len) != 0)
      return uv_translate_sys_error(errno);
    if (!is_loopback((struct sockaddr *)&ss) && ps->token_len == 0) {
      logf_(ps, TLC_PS_LOG_ERR, "refusing a non-loopback subscriber socket without a token");
      return TLC_EINVAL;
    }
  }
  if ((l = listener_new(ps, is_unix)) == NULL)
    return TLC_ENOMEM;
  r = is_unix ? uv_pipe_open(&l->h.pipe, fd) : uv_tcp_open(&l->h.tcp, fd);
  if (r < 0 || (r = uv_listen(&l->h.stream, 128, on_connection)) < 0) {
    listener_drop(ps, l);
    return r;
  }
  return 0;
}

/* Called once per closed handle of ours; frees the server after the last one while closing. */
static void handle_closed(tlc_pubsub_t *ps) {
  void (*cb)(void *);
  void *ud;
  if (--ps->open_handles > 0 || !ps->closing)
    return;
  cb = ps->close_cb;
  ud = ps->close_ud;
  tlc_table_fini(&ps->scratch);
  tlc_free(ps->token);
  tlc_free(ps->batch_seq);
  tlc_free(ps);
  if (cb != NULL)
    cb(ud);
}

static void house_closed_cb(uv_handle_t *h) {
  handle_closed(h->data);
}

/* Every second: the soft limit also applies to subscribers that receive nothing new. */
static void house_cb(uv_timer_t *t) {
  tlc_pubsub_t *ps = t->data;
  tlc__ps_sub_t *s, *next;
  for (s = ps->subs; s != NULL; s = next) {
    next = s->next;
    if (!s->closing && s->queued > ps->o.obuf_soft)
      limits_check(s);
  }
}

void tlc_pubsub_close(tlc_pubsub_t *ps, void (*cb)(void *ud), void *ud) {
  size_t i;
  ps->closing = 1;
  ps->close_cb = cb;
  ps->close_ud = ud;
  for (i = 0; i < ps->nlisteners; i++) {
    listener_t *l = ps->listeners[i];
    if (l->path != NULL)
      unlink(l->path);
    uv_close(&l->h.handle, listener_closed_cb);
  }
  ps->nlisteners = 0;
  while (ps->subs != NULL) {
    tlc__ps_sub_t *s = ps->subs;
    if (!s->detached && !s->closed) {
      /* One best-effort attempt to say why; never wait for a subscriber on the way out. */
      Tlcap__ServerMessage sm;
      Tlcap__Error e;
      msg_t *m;
      tlcap__server_message__init(&sm);
      tlcap__error__init(&e);
      sm.msg_case = TLCAP__SERVER_MESSAGE__MSG_ERROR;
      sm.error = &e;
      e.code = TLCAP__ERROR_CODE__ERR_SHUTDOWN;
      e.message = (char *)"the daemon is stopping";
      e.fatal = 1;
      /* Safe to append only when libuv holds no unwritten bytes of an earlier message (a
       * write whose bytes all went out may still await its callback). */
      if (s->h.stream.write_queue_size == 0 &&
          (m = msg_encode(ps, &sm, PSM_CONTROL, NULL)) != NULL) {
        uv_buf_t b = uv_buf_init((char *)m->data, (unsigned)m->len);
        (void)uv_try_write(&s->h.stream, &b, 1);
        msg_unref(m);
      }
    }
    sub_close_now(s); /* unlinks s (detached ones are only unlinked: their owner frees them) */
  }
  uv_timer_stop(&ps->house);
  uv_close((uv_handle_t *)&ps->house, house_closed_cb);
}

/* ---- fan-out from the daemon ------------------------------------------------------------- */

static int subn_wants_target(const subn_t *sn, const char *target) {
  return spec_target(sn->spec, target);
}

void tlc_pubsub_target_event(tlc_pubsub_t *ps, const char *target, int kind, const char *detail) {
  Tlcap__ServerMessage sm;
  Tlcap__TargetEvent te;
  tlc__ps_sub_t *s;
  msg_t *m = NULL;
  if (ps->closing || target == NULL)
    return;
  ps->st.target_events++;
  tlcap__server_message__init(&sm);
  tlcap__target_event__init(&te);
  sm.msg_case = TLCAP__SERVER_MESSAGE__MSG_TARGET_EVENT;
  sm.target_event = &te;
  te.target = (char *)target;
  te.kind = (Tlcap__TargetEventKind)kind;
  te.detail = (char *)(detail != NULL ? detail : "");
  te.unix_ms = unix_ms();
  te.instance_id = ps->instance_id;
  te.seq = ++ps->next_tev_seq;
  for (s = ps->subs; s != NULL; s = s->next) {
    size_t i;
    if (s->closing || !s->authed)
      continue;
    for (i = 0; i < s->nsubs; i++)
      if (subn_wants_target(s->subs[i], target))
        break;
    if (i == s->nsubs)
      continue;
    if (m == NULL && (m = msg_encode(ps, &sm, PSM_CONTROL, NULL)) == NULL)
      return;
    sub_ctl(s, m);
  }
  msg_unref(m);
}

/* Queues a shared batch for one subscriber: dropped (and counted) when its ring is full. */
static void sub_batch(tlc__ps_sub_t *s, msg_t *m) {
  tlc_pubsub_t *ps = s->ps;
  if (s->ring_n >= ps->o.max_batches) {
    s->drop_batches++;
    s->drop_events += m->nevents;
    s->drop_total_batches++;
    s->drop_total_events += m->nevents;
    ps->st.batches_dropped++;
    ps->st.events_dropped += m->nevents;
    return;
  }
  s->ring[(s->ring_head + s->ring_n) % ps->o.max_batches] = msg_ref(m);
  s->ring_n++;
  queued_add(s, m->len);
  if (!limits_check(s))
    sub_kick(s);
}

static uint64_t next_batch_seq(tlc_pubsub_t *ps, const char *target) {
  size_t idx;
  if (ps->p.find(ps->p.ud, target, &idx) < 0 || idx > (1u << 24))
    return 0;
  if (idx >= ps->nbatch_seq) {
    uint64_t *v = tlc_realloc(ps->batch_seq, (idx + 1) * sizeof(*v));
    if (v == NULL)
      return 0;
    memset(v + ps->nbatch_seq, 0, (idx + 1 - ps->nbatch_seq) * sizeof(*v));
    ps->batch_seq = v;
    ps->nbatch_seq = idx + 1;
  }
  return ++ps->batch_seq[idx];
}

void tlc_pubsub_events(tlc_pubsub_t *ps, const char *target, const tlc_event_t *ev, size_t n) {
  size_t off;
  if (ps->closing || ps->n_event_subns == 0 || n == 0 || target == NULL)
    return;
  for (off = 0; off < n; off += ps->o.max_batch_events) {
    size_t k = n - off < ps->o.max_batch_events ? n - off : ps->o.max_batch_events, i;
    tlc__ps_sub_t *s;
    msg_t *m = NULL;
    for (s = ps->subs; s != NULL; s = s->next) {
      size_t j;
      if (s->closing)
        continue;
      for (j = 0; j < s->nsubs; j++)
        if (s->subs[j]->events && subn_wants_target(s->subs[j], target))
          break;
      if (j == s->nsubs)
        continue;
      if (m == NULL) {
        /* Encoded once for every subscriber that wants it. */
        Tlcap__ServerMessage sm;
        Tlcap__EventBatch b;
        Tlcap__Event *e = tlc_malloc(k * sizeof(*e));
        Tlcap__Event **ep = tlc_malloc(k * sizeof(*ep));
        if (e == NULL || ep == NULL) {
          tlc_free(e);
          tlc_free(ep);
          return;
        }
        tlcap__server_message__init(&sm);
        tlcap__event_batch__init(&b);
        sm.msg_case = TLCAP__SERVER_MESSAGE__MSG_EVENTS;
        sm.events = &b;
        b.target = (char *)target;
        b.seq = next_batch_seq(ps, target);
        for (i = 0; i < k; i++) {
          const tlc_event_t *x = &ev[off + i];
          tlcap__event__init(&e[i]);
          e[i].time_ns = x->time_ns;
          e[i].handle = x->handle;
          e[i].type = x->type;
          e[i].core = x->core;
          e[i].data = x->data;
          e[i].thread = x->thread;
          e[i].flags = x->flags;
          ep[i] = &e[i];
        }
        b.n_events = k;
        b.events = ep;
        m = msg_encode(ps, &sm, PSM_BATCH, NULL);
        tlc_free(e);
        tlc_free(ep);
        if (m == NULL)
          return;
        m->nevents = k;
        ps->st.batches_built++;
      }
      sub_batch(s, m);
    }
    msg_unref(m);
  }
}

/* ---- detached subscribers (fuzzing) ------------------------------------------------------ */

tlc__ps_sub_t *tlc__ps_detached_new(tlc_pubsub_t *ps, int authed) {
  tlc__ps_sub_t *s = sub_alloc(ps);
  if (s == NULL)
    return NULL;
  s->detached = 1;
  snprintf(s->peer, sizeof(s->peer), "detached");
  if (authed) {
    s->authed = 1;
    tlc_frame_dec_set_max(&s->dec, ps->o.max_request);
  }
  sub_link(ps, s);
  return s;
}

int tlc__ps_detached_feed(tlc__ps_sub_t *s, const uint8_t *data, size_t len) {
  if (!s->closing)
    sub_input(s, data, len);
  return s->closing ? 1 : 0;
}

uint64_t tlc__ps_detached_bytes(const tlc__ps_sub_t *s) {
  return s->detached_bytes;
}

void tlc__ps_detached_free(tlc__ps_sub_t *s) {
  if (!s->closed) {
    s->closed = 1;
    sub_unlink(s);
  }
  sub_free(s);
}
