/* pubsub.c - the subscriber server (see pubsub.h and docs/protocol.md).
 *
 * Structure. A *subscriber* (sub) is one connection. Its *subscriptions* (subn) each refer to a
 * *feed*: the set of subscriptions, of any subscribers, with the same spec (interval, options,
 * columns, target and area filters). On each tick a feed takes from the provider the rows
 * changed since its previous tick, per matching target, and merges them into that target's
 * *mirror*: every row the spec selects, each kept as its encoded bytes (a Snapshot.rows field,
 * or columnar cells). A row is encoded once when it changes. Every snapshot message is then
 * assembled from the mirror by copying bytes: the tick's delta (shared by all subscriptions of
 * the feed), the catch-up delta of a subscriber that fell behind (rows changed after the seq it
 * was last sent, up to the last tick: shared by every subscriber at that seq, and the next
 * shared delta chains on it), and the full snapshot of one that joins (shared too). So the
 * per-interval work is one engine snapshot per target and options and one encoding per changed
 * row, whatever the number of subscribers, and a slow subscriber costs a copy, never an engine
 * snapshot.
 *
 * Ticks. Feeds tick on a grid of their interval from one epoch, so feeds of the same interval
 * tick in the same pass; within a pass, feeds that ask the engine for the same thing (target,
 * base seq, windows, neutral, quantiles) share one engine snapshot. A pass takes its targets
 * cheapest first (rows at the last tick) and hands each delta to the writer at once: an event
 * that arrives during a pass waits for its target's next tick, so the targets whose snapshots
 * take microseconds go before those that take milliseconds, and their subscribers are not
 * kept waiting for the large ones to be encoded. One timer
 * fires at the earliest due time (measured on uv_hrtime, so lateness does not accumulate; a
 * feed that fell behind skips to its next grid point). tlc_pubsub_poll lets the daemon run a
 * due pass between two ingest batches, so a long loop turn does not delay it.
 *
 * Slots and sequence. A slot remembers the engine seq of the last snapshot committed to the
 * socket (sent_seq). A delta (base -> seq) fits a slot only when base == sent_seq and the slot
 * is empty; otherwise the slot drops what it held (coalescing: the subscriber was slow) and is
 * marked catch-up: when the subscriber's socket is ready again it gets the mirror's catch-up
 * delta from sent_seq (or the full snapshot, the first time). Memory per slow subscriber is
 * bounded by one message per slot, and what it finally receives is always complete. Clients
 * check that a delta's base_seq equals the previous seq of the same stream.
 *
 * Writing. The serving thread (writer_main) does the socket writes: the loop thread hands it a
 * subscriber's in-flight messages as one job (at most one per subscriber, up to WRITE_MAX_BUFS
 * messages) and gets the job back through an async handle; the thread only reads message bytes
 * and writes to sockets (reference counts, queues and subscribers stay on the loop thread), so
 * the copies into 100 sockets are not taken from ingest. A subscriber closes its socket only
 * once its job is back (cancellation makes that prompt). Without the thread (write_on_loop, or
 * it could not start) uv_write does the same on the loop thread.
 *
 * TLS. A TLS subscriber's session (tls.h: OpenSSL over memory BIOs) is shared by the loop
 * thread, which feeds it what the socket received and reads the plaintext out (handshake,
 * requests), and the serving thread, which encrypts a job's messages into the subscriber's
 * ciphertext buffer (sized by the loop beforehand) and writes that: the session's mutex
 * serialises the two, and the encryption, like the socket copies, stays off the ingest thread.
 * Ciphertext the loop's reads produce (handshake, alerts) is taken by the next job ahead of
 * its messages, so records leave in the order they were made. Without the serving thread the
 * loop encrypts. An encrypted message is per subscriber (the shared encoding is not).
 *
 * Queues and limits. Per subscriber: control messages (replies, target events, errors: never
 * dropped) in a list, event batches in a ring of opts.max_batches (full: dropped and counted,
 * then told in a Dropped message), snapshot slots as above. queued counts the bytes of every
 * message the subscriber references, in flight included. Above obuf_hard, or above obuf_soft
 * for longer than obuf_soft_ms, it gets an ERR_OUTPUT_LIMIT error and is closed.
 *
 * Event fan-out. Batches go to the subscribers in evsubs (authenticated, with an events
 * subscription, not stalled), rebuilt when that set changes. A subscriber whose batch ring is
 * full stalls: it leaves evsubs, so a never-reading subscriber costs ingest nothing per batch (no
 * pattern match; no encoding at all when nobody takes the batch), and its drops are settled from
 * the per-target batch/event counters (batch_seq, batch_ev) when its ring drains (ev_settle).
 *
 * GetStats in parts (GetStats.max_rows): the subscriber remembers the request (gs); each part is
 * an engine snapshot of a handle range (provider split / snapshot_part), built by sub_kick_once
 * when the control queue is empty and no write is in flight, i.e. when the socket has taken the
 * previous part: one part's memory and a few milliseconds of the loop at a time.
 *
 * Closing. Nothing that fills a subscriber's queue frees it: sub_fail() marks it closing, drops
 * its queued messages, queues the error and lets the write completion (or the grace timer)
 * close it; memory is freed in the close callbacks only. A feed goes with its last
 * subscription (at the end of the tick pass if one is running).
 *
 * Cost. Per tick and target: one engine snapshot of the changed rows, an encoding per changed
 * row, a copy of the unchanged rows' bytes into the next mirror (O(mirror bytes)), one message
 * assembled per distinct (base, rows) and one job per subscriber. Memory: per feed and target,
 * the mirror (about twice its encoded size, double-buffered) and up to three cached messages.
 *
 * Not done here: statistics (the engine's, through the provider), target lifecycle (the
 * daemon's), log formatting beyond one line per incident (the daemon's log hook rate-limits).
 * A row that a mapping loaded later makes match an area pattern appears in a feed's mirror when
 * it next changes.
 */
#define _GNU_SOURCE /* struct ucred (SO_PEERCRED) */
#include "pubsub.h"

#include "pubsub-int.h"

#include "convert.h"
#include "frame.h"
#include "history.h"
#include "tlc_alloc.h"
#include "tlc_err.h"
#include "tlc_version.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define WRITE_MAX_BUFS  16
#define WRITE_MAX_BYTES (1u << 20)
#define MAX_PATTERNS    64 /* per list in a Subscribe */
#define MAX_PATTERN_LEN 256
#define MAX_HANDLES     4096
#define MAX_COLUMNS_REQ                                                                            \
  1024 /* column ids in a Subscribe (duplicates and unknown ones included)                         \
        */
#define MAX_LISTENERS 8
#define READ_BUF      (64u * 1024u)
#define MAX_REJECTING 64             /* connections being told "too many subscribers" at once */
#define SNAP_CACHE    4              /* engine snapshots shared within one tick pass */
#define TICK_EARLY_NS 1000000u       /* a feed due within 1 ms runs in the current pass */
#define JOIN_FRESH_NS 10000000u      /* a joiner gets the mirror as is if it is this fresh */
#define TLS_OUT_SLACK (256u * 1024u) /* TLS: ciphertext beyond one write's plaintext (records) */
#define TLS_BUF_KEEP  (256u * 1024u) /* TLS: a larger ciphertext buffer is freed once written */
#define MIRROR_PART_ROWS                                                                           \
  8192 /* a target with more areas is snapshotted for a feed's tick in parts of this many rows */

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
  uint32_t *columns; /* columnar rows: normalised (key columns first); NULL: Row messages */
  size_t ncolumns;
  uint32_t interval_ms;
  uint8_t windows, quantiles, neutral, names, neutral_only;
  uint8_t kinds; /* tlc_snap_opts_t.kinds: the sample kinds the columns show (0: all) */
  char *key;     /* canonical text of everything above */
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

/* A row of a mirror: its key, when it last changed (engine seq, and the feed's tick number),
 * and its encoded bytes buf[off .. off + len): a Snapshot.rows field, or columnar cells. */
typedef struct mrow {
  uint32_t handle, context;
  uint64_t state;
  uint64_t changed;
  uint64_t tick;
  size_t off, len;
} mrow_t;

/* What a feed serves of one target: every row its spec selects, encoded, as of its last tick,
 * in the table's key order. The tick's shared delta, the catch-up delta of a subscriber that
 * fell behind (rows changed after the seq it was last sent) and the full snapshot for one that
 * joins are all assembled from it, without asking the engine again and without encoding a row
 * twice; catch-ups end at the tick's seq, so the next tick's shared delta chains on. A
 * catch-up or full message is built once per tick and base, and shared. */
typedef struct feed_target {
  mrow_t *rows, *rows2; /* rows2, buf2: the next tick's, swapped in */
  size_t n, cap, cap2;
  uint8_t *buf, *buf2;
  size_t len, bcap, bcap2;
  uint64_t seq; /* engine seq at the last tick (valid when have) */
  uint8_t have;
  uint8_t connected;
  int64_t unix_ms;
  tlc_table_t hdr; /* the last tick's header fields (contexts, counters, times); no rows */
  msg_t *full;     /* full snapshot at seq, built when a subscriber joins */
  msg_t *catchup;  /* delta catchup_base -> seq, built when a slow subscriber catches up */
  uint64_t catchup_base;
  uint64_t gen; /* the provider's gen of the target this mirror is of */
} feed_target_t;

typedef struct feed {
  tlc_pubsub_t *ps;
  uint64_t id;
  uint64_t due_ns;  /* next tick (uv_hrtime), on the grid of the interval */
  uint64_t tickno;  /* ticks run */
  uint64_t tick_ns; /* uv_hrtime of the last tick */
  uint8_t dead;     /* released during a tick pass: freed at its end */
  spec_t *spec;
  subn_t *subs;
  size_t nsubs;
  feed_target_t *t;
  size_t nt;
  struct feed *prev, *next;
} feed_t;

/* A write handed to the serving thread: a subscriber's in-flight messages. Owned by the
 * writer from writer_post until it comes back through done_async; the loop thread touches
 * only `cancel` meanwhile (under the writer's lock). */
typedef struct wjob {
  struct wjob *next;
  struct tlc__ps_sub *sub;
  int fd;
  int cancel;
  int status;  /* 0, or the UV_E* code the write failed with (UV_ECANCELED) */
  int partial; /* iov[cur] is partly written (the stream is inside a message) */
  size_t nbufs, cur;
  struct iovec iov[WRITE_MAX_BUFS];
  /* TLS: the writer encrypts iov[] (plaintext messages) into cbuf after the clen bytes already
   * there, under the session's lock, once (encrypted), then writes cbuf. cbuf is sized by the
   * loop thread beforehand (the writer never allocates). */
  tlc_tls_conn_t *tls;
  uv_mutex_t *tls_mu;
  uint8_t *cbuf;
  size_t clen, ccap;
  int encrypted;
} wjob_t;

/* The serving thread: writes encoded messages to subscriber sockets, so that the socket
 * copies (the cost that grows with the subscriber count) are not taken from ingest on the
 * loop thread. */
typedef struct writer {
  uv_thread_t thread;
  uv_mutex_t lock;
  int pipe_r, pipe_w;    /* wakes the writer */
  uv_async_t done_async; /* wakes the loop */
  wjob_t *in_head, *in_tail, *done_head, *done_tail;
  int sleeping, woken, stop, cancels;
  size_t max_active;
  struct pollfd *pfd; /* writer thread only */
  wjob_t **pjob;
} writer_t;

/* An engine snapshot shared by the feeds of one tick pass that ask for the same thing. */
typedef struct snap_cache {
  size_t idx;
  uint64_t since;
  uint8_t windows, neutral, quantiles, neutral_only, kinds, used;
  tlc_table_t t;
} snap_cache_t;

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
  /* event fan-out: a subscriber whose batch ring is full is *stalled*: it leaves the fan-out
   * list (costs nothing per batch) and its drops are settled from the per-target counters
   * (stall_b/stall_e: their values when it stalled) once it drains (ev_settle) */
  uint8_t ev_stalled;
  uint64_t *stall_b, *stall_e;
  size_t nstall;
  /* subscriptions */
  subn_t **subs;
  size_t nsubs;
  /* a GetStats answered in parts (GetStats.max_rows): the next part is built when the socket
   * has taken the previous one (gs_next), so its memory is one part's */
  struct {
    uint8_t active;
    uint32_t req, no;
    size_t max_rows;
    uint64_t lo, seq;
    spec_t spec; /* options only */
    char *target;
  } gs;
  /* range statistics (GetStats.range, Subscribe.history; docs/protocol.md "History"): one
   * query at a time per connection, computed off the loop by the provider's history hook */
  struct {
    void *job;    /* the running query, NULL when none */
    uint32_t req; /* the request it answers */
    uint8_t windows, quantiles, neutral, names, neutral_only;
    tlc_when_range_t range;
    char **names_left; /* Subscribe.history: the targets to compute, in order */
    size_t nleft, next;
    struct subn *sn;  /* ... the subscription whose live snapshots wait for them (NULL: it
                         was unsubscribed meanwhile) */
    spec_t *fspec;    /* ... its feed's spec, attached when the history is sent */
    char target[129]; /* the target of the running query */
  } hq;
  /* writing */
  uv_write_t wreq;
  wjob_t job;
  int writing;        /* a write (uv_write or a writer job) is in flight */
  int in_writer;      /* ... and it is the writer's job */
  int close_deferred; /* close the stream once the writer gives the job back */
  int shutdown_note;  /* ... and first try to tell it the daemon is stopping */
  msg_t *inflight[WRITE_MAX_BUFS];
  size_t ninflight;
  uint64_t detached_bytes;
  /* TLS (a TLS listener): the session, whether its handshake is done, the ciphertext produced
   * and not yet handed to a write (tout), and that of the write in flight (tjob, read by the
   * serving thread meanwhile, so never touched until the job is back). */
  tlc_tls_conn_t *tls;
  uv_mutex_t tls_mu; /* the session is used by the loop (reads) and the serving thread (writes) */
  uint8_t tls_ready;
  uint8_t *tout, *tjob;
  size_t tout_len, tout_cap, tjob_len, tjob_cap;
  char peer_ip[64]; /* the address without the port, for the token's per-peer rate limit */
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
  uint8_t tls; /* speaks TLS (opts.tls, TCP) */
  char *path;  /* unix: unlinked on close */
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
  tlc_pb_arena_t enc; /* Row encoding scratch */
  /* ticks */
  uv_timer_t tick_timer; /* fires at the earliest feed due time */
  uint64_t epoch_ns;     /* the feeds' grids start here: same-interval feeds tick together */
  uint64_t next_due_ns;  /* earliest due time, UINT64_MAX with no feed */
  int ticking;           /* in a tick pass: feeds released meanwhile are freed at its end */
  snap_cache_t cache[SNAP_CACHE];
  /* the serving thread (NULL: writes with uv_write on the loop thread) */
  writer_t *wr;
  size_t jobs_inflight;
  int writer_failed;
  tlc_pubsub_stats_t st;
  int closing;
  int open_handles; /* listeners + subscriber handles + timers + the writer's async */
  void (*close_cb)(void *ud);
  void *close_ud;
  uint64_t *batch_seq; /* per target index: batches produced for event subscribers */
  uint64_t *batch_ev;  /* per target index: their events */
  size_t nbatch_seq;
  /* subscribers that take event batches now (authed, an events subscription, not stalled,
   * not closing): rebuilt from the subscriber list when evsubs_dirty */
  struct tlc__ps_sub **evsubs;
  size_t nevsubs, capevsubs;
  int evsubs_dirty;
  uv_timer_t house; /* periodic soft-limit check; also keeps close_cb on the loop */
  char rbuf[READ_BUF];
  int rbuf_busy;
  uint8_t tbuf[16384]; /* decrypted bytes of one TLS record, on their way to sub_input */
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
  tlc_free(s->columns);
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
  if (r->n_columns > MAX_COLUMNS_REQ) {
    *why = "too many columns (max 1024)";
    return TLC_EINVAL;
  }
  /* "\x1fH%08X" per handle, "\x1fC%u" per column (< TLC_COL_MAX_COLUMNS of them); the header
   * takes < 64 */
  keylen = 64 + r->n_handles * 10 + TLC_COL_MAX_COLUMNS * 8;
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
  s->neutral = r->neutral || r->neutral_only ? 1 : 0;
  s->neutral_only = r->neutral_only ? 1 : 0;
  s->names = r->names ? 1 : 0;
  if (r->n_columns > 0) {
    uint32_t cols[TLC_COL_MAX_COLUMNS];
    int w, q;
    s->ncolumns = tlc_cols_normalise(r->columns, r->n_columns, cols, &w, &q);
    s->windows = (uint8_t)w;
    s->quantiles = (uint8_t)q;
    s->kinds = (uint8_t)(TLC_SNAP_KINDS_SET | tlc_cols_kinds(cols, s->ncolumns));
    s->columns = tlc_malloc(s->ncolumns * sizeof(uint32_t));
    if (s->columns == NULL)
      goto fail_nomem;
    memcpy(s->columns, cols, s->ncolumns * sizeof(uint32_t));
  }
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
  k += sprintf(k, "%u/%u%u%u%u%u", s->interval_ms, s->windows, s->quantiles, s->neutral, s->names,
               s->neutral_only);
  for (i = 0; i < s->ncolumns; i++)
    k += sprintf(k,
                 "\x1f"
                 "C%u",
                 s->columns[i]);
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

/* The engine snapshot options of a subscription spec: rows changed after `since` (0: all). */
static void snap_opts(const spec_t *spec, uint64_t since, tlc_snap_opts_t *so) {
  memset(so, 0, sizeof(*so));
  so->since_seq = since;
  so->windows = spec->windows;
  so->neutral = spec->neutral;
  so->quantiles = spec->quantiles;
  so->neutral_only = spec->neutral_only;
  so->kinds = spec->kinds;
}

/* The engine snapshot of target idx with options so: in a tick pass (shared) one from the
 * pass's cache when another feed asked for the same, else taken now; outside a pass, or with
 * no cache entry free, into the scratch table. NULL with *err on failure. */
static tlc_table_t *snap_get(tlc_pubsub_t *ps, size_t idx, const tlc_snap_opts_t *so, int shared,
                             int *err) {
  snap_cache_t *c = NULL;
  tlc_table_t *t = &ps->scratch;
  size_t i;
  if (shared) {
    for (i = 0; i < SNAP_CACHE; i++) {
      snap_cache_t *e = &ps->cache[i];
      if (!e->used) {
        if (c == NULL)
          c = e;
        continue;
      }
      if (e->idx == idx && e->since == so->since_seq && e->windows == so->windows &&
          e->neutral == so->neutral && e->quantiles == so->quantiles &&
          e->neutral_only == so->neutral_only && e->kinds == so->kinds)
        return &e->t;
    }
    if (c != NULL)
      t = &c->t;
  }
  tlc_table_clear(t);
  if ((*err = ps->p.snapshot(ps->p.ud, idx, t, so)) < 0)
    return NULL;
  if (c != NULL) {
    c->used = 1;
    c->idx = idx;
    c->since = so->since_seq;
    c->windows = so->windows;
    c->neutral = so->neutral;
    c->neutral_only = so->neutral_only;
    c->kinds = so->kinds;
    c->quantiles = so->quantiles;
  }
  return t;
}

/* A part of a GetStats reply in parts: the areas with lo <= handle < hi, part number `no`,
 * `more` parts after it, `base` the previous part's seq; `seq` gets this part's. */
typedef struct stats_part {
  uint64_t lo, hi, base, seq;
  uint32_t no;
  int more;
} stats_part_t;

/* Builds the full statistics of target `idx` with the options of `spec` as a reply to GetStats
 * (a Stats envelope with request id `req`), or with `pt` (NULL: whole) one part of them.
 * Returns 0 and *out (refs 1), TLC_ELIMIT (above max_message), or another negative error.
 * (Subscriptions are served from their feeds' mirrors, not from here.) */
static int stats_build(tlc_pubsub_t *ps, const spec_t *spec, size_t idx, uint32_t req,
                       stats_part_t *pt, msg_t **out) {
  tlc_ps_target_info_t info;
  tlc_snap_opts_t so;
  tlc_table_t *t;
  tlc_pb_arena_t a;
  Tlcap__Snapshot s;
  Tlcap__ServerMessage sm;
  Tlcap__Stats stats;
  tlc_pb_snap_sel_t sel;
  const tlc_mapping_t *m;
  int r, too_big;
  *out = NULL;
  memset(&info, 0, sizeof(info));
  if ((r = ps->p.info(ps->p.ud, idx, &info)) < 0)
    return r;
  snap_opts(spec, 0, &so);
  if (pt != NULL) {
    t = &ps->scratch;
    tlc_table_clear(t);
    if ((r = ps->p.snapshot_part(ps->p.ud, idx, t, &so, pt->lo, pt->hi)) < 0)
      return r;
    pt->seq = t->seq;
  } else if ((t = snap_get(ps, idx, &so, 0, &r)) == NULL) {
    return r;
  }
  m = ps->p.mapping != NULL ? ps->p.mapping(ps->p.ud, idx) : NULL;
  memset(&sel, 0, sizeof(sel));
  sel.windows = spec->windows;
  sel.quantiles = spec->quantiles;
  tlc_pb_arena_init(&a, ps->o.max_message * 4);
  r = tlc_pb_snapshot_build(&a, &s, t, info.name != NULL ? info.name : "", &sel,
                            spec->names && (pt == NULL || pt->no == 0) ? m : NULL);
  if (r < 0)
    goto done;
  s.instance_id = ps->instance_id;
  s.full = pt == NULL || pt->no == 0;
  if (pt != NULL) {
    s.part = pt->no;
    s.more = pt->more != 0;
    s.base_seq = pt->no > 0 ? pt->base : 0;
  }
  s.connected = info.connected != 0;
  s.unix_ms = unix_ms();
  tlcap__server_message__init(&sm);
  tlcap__stats__init(&stats);
  stats.snapshot = &s;
  sm.request_id = req;
  sm.msg_case = TLCAP__SERVER_MESSAGE__MSG_STATS;
  sm.stats = &stats;
  *out = msg_encode(ps, &sm, PSM_CONTROL, &too_big);
  if (*out == NULL) {
    r = too_big ? TLC_ELIMIT : TLC_ENOMEM;
    goto done;
  }
  ps->st.snapshots_built++;
done:
  tlc_pb_arena_fini(&a);
  return r;
}

/* ---- subscriber queues ------------------------------------------------------------------- */

static void sub_kick(tlc__ps_sub_t *s);
static void ev_settle(tlc__ps_sub_t *s);
static void ev_unstall(tlc__ps_sub_t *s);
static void sub_fail(tlc__ps_sub_t *s, int code, const char *text, uint64_t *counter);
static void sub_close_soon(tlc__ps_sub_t *s);
static void hist_stop(tlc__ps_sub_t *s);

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

/* An Error message (request id `req`), encoded; NULL when memory is short. */
static msg_t *error_encode(tlc_pubsub_t *ps, uint32_t req, int code, const char *text, int fatal,
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
  return msg_encode(ps, &sm, PSM_CONTROL, NULL);
}

/* Encodes and queues a reply or notice for this subscriber alone. */
static void sub_send(tlc__ps_sub_t *s, Tlcap__ServerMessage *sm) {
  int too_big;
  msg_t *m = msg_encode(s->ps, sm, PSM_CONTROL, &too_big);
  if (m == NULL) {
    if (too_big) {
      m = error_encode(s->ps, sm->request_id, TLCAP__ERROR_CODE__ERR_FAILED,
                       "reply larger than the daemon's message cap (max_message)", 0, 0);
      if (m == NULL) {
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
  msg_t *m = error_encode(s->ps, req, code, text, fatal, detail);
  if (m == NULL) {
    sub_close_soon(s);
    return;
  }
  sub_ctl(s, m);
  msg_unref(m);
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

static void house_cb(uv_timer_t *t);
static void sched_arm(tlc_pubsub_t *ps);

static void feed_free(feed_t *f) {
  size_t i;
  for (i = 0; i < f->nt; i++) {
    feed_target_t *ft = &f->t[i];
    msg_unref(ft->full);
    msg_unref(ft->catchup);
    tlc_free(ft->rows);
    tlc_free(ft->rows2);
    tlc_free(ft->buf);
    tlc_free(ft->buf2);
    tlc_table_fini(&ft->hdr);
  }
  tlc_free(f->t);
  spec_free(f->spec);
  tlc_free(f);
}

static void feed_unlink(feed_t *f) {
  tlc_pubsub_t *ps = f->ps;
  if (f->prev != NULL)
    f->prev->next = f->next;
  else
    ps->feeds = f->next;
  if (f->next != NULL)
    f->next->prev = f->prev;
  ps->nfeeds--;
  ps->st.feeds = ps->nfeeds;
}

/* The last subscription of a feed went: the feed goes too (at the end of a tick pass when one
 * is running, since the pass walks the feed list). */
static void feed_release(feed_t *f) {
  tlc_pubsub_t *ps = f->ps;
  if (f->nsubs > 0 || f->dead)
    return;
  if (ps->ticking) {
    f->dead = 1;
    return;
  }
  feed_unlink(f);
  feed_free(f);
}

/* The next point strictly after `now` of the grid epoch + k * interval. */
static uint64_t grid_next(const tlc_pubsub_t *ps, uint64_t interval_ns, uint64_t now) {
  if (now < ps->epoch_ns)
    return ps->epoch_ns;
  return ps->epoch_ns + ((now - ps->epoch_ns) / interval_ns + 1) * interval_ns;
}

/* Finds or creates the feed of `spec` (taking ownership of spec either way). */
static int feed_get(tlc_pubsub_t *ps, spec_t *spec, feed_t **out) {
  feed_t *f;
  for (f = ps->feeds; f != NULL; f = f->next)
    if (!f->dead && strcmp(f->spec->key, spec->key) == 0) {
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
  f->due_ns = grid_next(ps, (uint64_t)spec->interval_ms * 1000000u, uv_hrtime());
  f->next = ps->feeds;
  if (ps->feeds != NULL)
    ps->feeds->prev = f;
  ps->feeds = f;
  ps->nfeeds++;
  ps->st.feeds = ps->nfeeds;
  if (f->due_ns < ps->next_due_ns)
    sched_arm(ps);
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
  for (; f->nt < n; f->nt++)
    tlc_table_init(&v[f->nt].hdr);
  f->t = v;
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

/* ---- mirrors ----------------------------------------------------------------------------- */

static int key_cmp(uint32_t ha, uint32_t ca, uint64_t sa, const mrow_t *b) {
  if (ha != b->handle)
    return ha < b->handle ? -1 : 1;
  if (ca != b->context) /* Neutral (0xFFFFFFFE) and none (0xFFFFFFFF) after the contexts */
    return ca < b->context ? -1 : 1;
  if (sa != b->state)
    return sa < b->state ? -1 : 1;
  return 0;
}

static int stat_before(const tlc_stat_t *a, const tlc_stat_t *b) {
  mrow_t k;
  k.handle = b->handle;
  k.context = b->context;
  k.state = b->state;
  return key_cmp(a->handle, a->context, a->state, &k) < 0;
}

/* Copies the header fields of table t (contexts included, no rows) into h. */
static int hdr_copy(tlc_table_t *h, const tlc_table_t *t) {
  size_t i;
  tlc_table_clear(h);
  h->format = t->format;
  h->first_time = t->first_time;
  h->last_time = t->last_time;
  h->context_area = t->context_area;
  h->has_context_area = t->has_context_area;
  h->nwindows = t->nwindows;
  memcpy(h->window_ns, t->window_ns, sizeof(h->window_ns));
  h->counters = t->counters;
  h->seq = t->seq;
  for (i = 0; i < t->ncontexts; i++)
    if (tlc_table_add_ctx(h, &t->contexts[i]) < 0)
      return TLC_ENOMEM;
  return 0;
}

/* ft->buf2 grown to hold at least `need` bytes. 0 or TLC_ENOMEM. */
static int buf2_reserve(feed_target_t *ft, size_t need) {
  uint8_t *nb = tlc_grow(ft->buf2, &ft->bcap2, need, 1, 64);
  if (nb == NULL)
    return TLC_ENOMEM;
  ft->buf2 = nb;
  return 0;
}

/* Encodes row r for spec into ft->buf2 at ft->len2 (grown as needed). */
static int row_encode(tlc_pubsub_t *ps, const spec_t *spec, const tlc_stat_t *r, uint32_t nwin,
                      int64_t qmask, feed_target_t *ft, size_t *len2, size_t *out_len) {
  if (spec->ncolumns > 0) {
    if (buf2_reserve(ft, *len2 + spec->ncolumns * 10) < 0)
      return TLC_ENOMEM;
    *out_len = tlc_pb_cells_encode(r, spec->columns, spec->ncolumns, qmask, ft->buf2 + *len2);
  } else {
    tlc_pb_snap_sel_t sel;
    Tlcap__Row pr;
    size_t packed, n;
    memset(&sel, 0, sizeof(sel));
    sel.windows = spec->windows;
    sel.quantiles = spec->quantiles;
    if (ps->enc.used > 32 * 1024)
      tlc_pb_arena_reset(&ps->enc);
    if (tlc_pb_row_build(&ps->enc, &pr, r, spec->windows ? nwin : 0, &sel) < 0)
      return TLC_ENOMEM;
    n = tlc_pb_row_field_size(&pr, &packed);
    if (buf2_reserve(ft, *len2 + n) < 0)
      return TLC_ENOMEM;
    *out_len = tlc_pb_row_field_pack(&pr, packed, ft->buf2 + *len2);
  }
  *len2 += *out_len;
  return 0;
}

static int row_kept(const spec_t *spec, const tlc_table_t *t, const tlc_stat_t *r, keep_ctx_t *kc) {
  if (spec->neutral_only && t->ncontexts > 1 && r->kind == TLC_ROW_CODE &&
      r->context != TLC_CTX_NEUTRAL)
    return 0;
  return keep_row(kc, r);
}

/* A merge of a tick's changed rows into the mirror, possibly fed in parts (handle ranges in
 * order): j the next old row, n2/len2 what the spare buffers hold, prev the last row taken. */
typedef struct merge_st {
  size_t j, n2, len2;
  const tlc_stat_t *prev;
} merge_st_t;

/* Merges changed rows (table t, in key order, every handle below `hi`) into the mirror being
 * built in the spare buffers: changed rows are encoded, the old rows with a handle below hi that
 * t does not replace are copied. Rows keep their order; a row the engine no longer reports stays
 * as it was. */
static int mirror_merge_part(tlc_pubsub_t *ps, feed_t *f, feed_target_t *ft, const tlc_table_t *t,
                             keep_ctx_t *kc, merge_st_t *m, uint64_t hi) {
  const spec_t *spec = f->spec;
  uint32_t nwin = t->nwindows <= TLC_MAX_WINDOWS ? t->nwindows : TLC_MAX_WINDOWS;
  int64_t qmask = spec->ncolumns > 0 ? tlc_pb_cells_qmask(spec->columns, spec->ncolumns) : 0;
  size_t i = 0;
  for (;;) {
    const tlc_stat_t *r = NULL;
    mrow_t *o = m->j < ft->n && ft->rows[m->j].handle < hi ? &ft->rows[m->j] : NULL, *d, *nr;
    int c;
    while (i < t->nrows && !row_kept(spec, t, &t->rows[i], kc))
      i++;
    if (i < t->nrows) {
      r = &t->rows[i];
      if ((m->prev != NULL && !stat_before(m->prev, r)) || r->handle >= hi)
        return TLC_EFRAME; /* not in key order (engine.h promises it is) */
    }
    if (r == NULL && o == NULL)
      break;
    c = r == NULL ? 1 : o == NULL ? -1 : key_cmp(r->handle, r->context, r->state, o);
    nr = tlc_grow(ft->rows2, &ft->cap2, m->n2 + 1, sizeof(*nr), 64);
    if (nr == NULL)
      return TLC_ENOMEM;
    ft->rows2 = nr;
    d = &ft->rows2[m->n2++];
    if (c <= 0) { /* changed (or new): encode */
      d->handle = r->handle;
      d->context = r->context;
      d->state = r->state;
      d->changed = t->seq;
      d->tick = f->tickno;
      d->off = m->len2;
      if (row_encode(ps, spec, r, nwin, qmask, ft, &m->len2, &d->len) < 0)
        return TLC_ENOMEM;
      m->prev = r;
      i++;
      if (c == 0)
        m->j++;
    } else { /* unchanged: copy */
      *d = *o;
      d->off = m->len2;
      if (buf2_reserve(ft, m->len2 + o->len) < 0)
        return TLC_ENOMEM;
      memcpy(ft->buf2 + m->len2, ft->buf + o->off, o->len);
      m->len2 += o->len;
      m->j++;
    }
    if (m->len2 > ps->o.max_message)
      return TLC_ELIMIT;
  }
  m->prev = NULL; /* the next part's table is another one (its keys are above hi) */
  return 0;
}

/* The merged mirror replaces the old one (buffers swapped). */
static void mirror_swap(feed_target_t *ft, const merge_st_t *m) {
  mrow_t *rv = ft->rows;
  uint8_t *bv = ft->buf;
  size_t rc = ft->cap, bc = ft->bcap;
  ft->rows = ft->rows2;
  ft->cap = ft->cap2;
  ft->n = m->n2;
  ft->buf = ft->buf2;
  ft->bcap = ft->bcap2;
  ft->len = m->len2;
  ft->rows2 = rv;
  ft->cap2 = rc;
  ft->buf2 = bv;
  ft->bcap2 = bc;
}

enum { MM_TICK, MM_SINCE, MM_FULL };

static int mrow_in(const feed_t *f, const mrow_t *r, int mode, uint64_t base) {
  return mode == MM_FULL || (mode == MM_TICK ? r->tick == f->tickno : r->changed > base);
}

/* Assembles a snapshot of target idx from its mirror: the rows of this tick (MM_TICK, a delta
 * from `base`), the rows changed after `base` (MM_SINCE), or all (MM_FULL). Returns 0 with *out
 * (refs 1), TLC_ELIMIT (above max_message) or TLC_ENOMEM. */
static int mirror_msg(feed_t *f, size_t idx, int mode, uint64_t base, msg_t **out) {
  tlc_pubsub_t *ps = f->ps;
  feed_target_t *ft = &f->t[idx];
  const spec_t *spec = f->spec;
  tlc_ps_target_info_t info;
  tlc_pb_snap_sel_t sel;
  tlc_pb_arena_t a;
  Tlcap__Snapshot s;
  size_t i, row_bytes = 0, hdr_len, n;
  const tlc_mapping_t *m = NULL;
  uint8_t *p;
  msg_t *msg;
  int r;
  *out = NULL;
  memset(&info, 0, sizeof(info));
  if ((r = ps->p.info(ps->p.ud, idx, &info)) < 0)
    return r;
  if ((mode == MM_FULL || base == 0) && spec->names && ps->p.mapping != NULL)
    m = ps->p.mapping(ps->p.ud, idx); /* full snapshots carry the names */
  for (i = 0; i < ft->n; i++)
    if (mrow_in(f, &ft->rows[i], mode, base))
      row_bytes += ft->rows[i].len;
  memset(&sel, 0, sizeof(sel));
  sel.windows = spec->windows;
  sel.columns = spec->columns;
  sel.ncolumns = spec->ncolumns;
  tlc_pb_arena_init(&a, ps->o.max_message * 4);
  r = tlc_pb_snapshot_build(&a, &s, &ft->hdr, info.name != NULL ? info.name : "", &sel, m);
  if (r < 0)
    goto done;
  s.instance_id = ps->instance_id;
  s.stream = stream_id(f, idx);
  s.base_seq = mode == MM_FULL ? 0 : base;
  s.full = mode == MM_FULL || base == 0;
  s.connected = ft->connected;
  s.unix_ms = ft->unix_ms;
  n = tlc_pb_snapshot_frame_size(&s, row_bytes, &hdr_len);
  if (n > ps->o.max_message) {
    r = TLC_ELIMIT;
    goto done;
  }
  msg = tlc_malloc(sizeof(*msg) + n);
  if (msg == NULL) {
    r = TLC_ENOMEM;
    goto done;
  }
  memset(msg, 0, sizeof(*msg));
  msg->refs = 1;
  msg->kind = PSM_SNAP;
  msg->seq = ft->seq;
  msg->base = s.base_seq;
  p = tlc_pb_snapshot_frame_begin(&s, hdr_len, row_bytes, msg->data);
  for (i = 0; i < ft->n; i++)
    if (mrow_in(f, &ft->rows[i], mode, base)) {
      memcpy(p, ft->buf + ft->rows[i].off, ft->rows[i].len);
      p += ft->rows[i].len;
    }
  msg->len = (size_t)(p - msg->data);
  ps->st.snapshots_built++;
  *out = msg;
done:
  tlc_pb_arena_fini(&a);
  return r;
}

/* One tick of feed f for target idx: the engine's rows changed since the last tick go into the
 * mirror, and their delta is returned (refs 1; the first tick's is full). Returns 1 when
 * nothing changed (no message), or a negative error. */
static int mirror_tick(feed_t *f, size_t idx, const tlc_ps_target_info_t *info, msg_t **out) {
  tlc_pubsub_t *ps = f->ps;
  feed_target_t *ft = &f->t[idx];
  const spec_t *spec = f->spec;
  uint64_t base = ft->have ? ft->seq : 0;
  tlc_snap_opts_t so;
  tlc_table_t *t;
  keep_ctx_t kc;
  merge_st_t m;
  uint64_t hi = (uint64_t)1 << 32;
  int r, parts;
  *out = NULL;
  snap_opts(spec, base, &so);
  /* A large target's snapshot is taken and merged in handle ranges of at most MIRROR_PART_ROWS
   * rows, all in this call (the engine does not change meanwhile: the parts are one consistent
   * snapshot), so that the table held at a time is one part's, never one of every area. */
  parts = ps->p.split != NULL && ps->p.snapshot_part != NULL && info->areas > MIRROR_PART_ROWS;
  if (!parts) {
    if ((t = snap_get(ps, idx, &so, 1, &r)) == NULL)
      return r;
  } else {
    t = &ps->scratch;
    tlc_table_clear(t);
    if ((r = ps->p.split(ps->p.ud, idx, 0, MIRROR_PART_ROWS, base, &hi)) < 0 ||
        (r = ps->p.snapshot_part(ps->p.ud, idx, t, &so, 0, hi)) < 0)
      return r;
  }
  if (ft->have && t->seq == ft->seq && ft->connected == (info->connected != 0) &&
      memcmp(&ft->hdr.counters, &t->counters, sizeof(t->counters)) == 0)
    return 1;
  if ((r = keep_init(&kc, spec, ps->p.mapping != NULL ? ps->p.mapping(ps->p.ud, idx) : NULL)) < 0)
    return r;
  memset(&m, 0, sizeof(m));
  r = mirror_merge_part(ps, f, ft, t, &kc, &m, hi);
  while (r == 0 && hi < ((uint64_t)1 << 32)) {
    uint64_t lo = hi;
    tlc_table_clear(t);
    if ((r = ps->p.split(ps->p.ud, idx, lo, MIRROR_PART_ROWS, base, &hi)) < 0 ||
        (r = ps->p.snapshot_part(ps->p.ud, idx, t, &so, lo, hi)) < 0)
      break;
    r = mirror_merge_part(ps, f, ft, t, &kc, &m, hi);
  }
  if (r == 0)
    mirror_swap(ft, &m);
  tlc_free(kc.named);
  if (r < 0 || (r = hdr_copy(&ft->hdr, t)) < 0) {
    /* the mirror may be half merged: start again with a full snapshot next tick */
    ft->have = 0;
    ft->n = 0;
    ft->len = 0;
    return r;
  }
  ft->seq = t->seq;
  ft->have = 1;
  ft->connected = info->connected != 0;
  ft->unix_ms = unix_ms();
  msg_unref(ft->full);
  msg_unref(ft->catchup);
  ft->full = ft->catchup = NULL;
  r = mirror_msg(f, idx, MM_TICK, base, out);
  if (r == 0 && base == 0)
    ft->full = msg_ref(*out); /* the first tick's message is the full snapshot joiners get */
  return r;
}

/* Another target took index idx (a full registry evicted the one there): its mirror and every
 * subscription's slot start again, so the next message is the new target's full snapshot and no
 * delta is built against the old target's state. */
static void feed_target_renew(feed_t *f, size_t idx, uint64_t gen) {
  feed_target_t *ft = &f->t[idx];
  subn_t *sn;
  ft->have = 0;
  ft->n = 0;
  ft->len = 0;
  ft->seq = 0;
  msg_unref(ft->full);
  msg_unref(ft->catchup);
  ft->full = ft->catchup = NULL;
  ft->gen = gen;
  for (sn = f->subs; sn != NULL; sn = sn->fnext) {
    slot_t *sl;
    if (idx >= sn->nslots)
      continue;
    sl = &sn->slots[idx];
    if (sl->pending != NULL) {
      queued_sub(sn->sub, sl->pending->len);
      msg_unref(sl->pending);
      sl->pending = NULL;
    }
    sl->sent_any = 0;
    sl->sent_seq = 0;
    sl->catchup = 0;
  }
}

/* One tick of feed f for target idx: snapshot, mirror, and the delta offered to every slot. */
static void feed_tick_target(feed_t *f, size_t idx) {
  tlc_pubsub_t *ps = f->ps;
  tlc_ps_target_info_t info;
  msg_t *m = NULL;
  subn_t *sn;
  int r;
  memset(&info, 0, sizeof(info));
  if (f->dead || ps->p.info(ps->p.ud, idx, &info) < 0 || info.name == NULL ||
      !spec_target(f->spec, info.name))
    return;
  if (idx < f->nt && f->t[idx].gen != info.gen)
    feed_target_renew(f, idx, info.gen);
  r = mirror_tick(f, idx, &info, &m);
  if (r == 1)
    return;
  if (r < 0) {
    logf_(ps, TLC_PS_LOG_WARN, "snapshot of target %s failed: %s", info.name, tlc_strerror(r));
    if (r == TLC_ELIMIT)
      for (sn = f->subs; sn != NULL; sn = sn->fnext)
        send_error(sn->sub, 0, TLCAP__ERROR_CODE__ERR_FAILED,
                   "snapshot larger than the daemon's message cap: narrow the subscription", 0, r);
    return;
  }
  /* Subscriptions are not freed during a pass (closing is deferred), so the list holds. */
  for (sn = f->subs; sn != NULL; sn = sn->fnext)
    slot_offer(sn, idx, m);
  msg_unref(m);
}

typedef struct tick_job {
  feed_t *f;
  size_t idx;
  size_t cost; /* rows in the mirror at the last tick */
} tick_job_t;

static int cmp_job(const void *a, const void *b) {
  const tick_job_t *x = a, *y = b;
  if (x->cost != y->cost)
    return x->cost < y->cost ? -1 : 1;
  if (x->f->id != y->f->id)
    return x->f->id < y->f->id ? -1 : 1;
  return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/* Ticks the feeds fs[0..nf) (in a pass). Targets go cheapest first (fewest rows at the last
 * tick): an event that arrives while a pass runs waits for the next tick of its target, so
 * small targets, whose snapshots take microseconds, are taken before large ones take
 * milliseconds. Without memory for the order, feed by feed in target order. */
static void feeds_tick(tlc_pubsub_t *ps, feed_t **fs, size_t nf) {
  size_t n = ps->p.count(ps->p.ud), i, idx, nj = 0;
  tick_job_t *jobs;
  for (i = 0; i < nf; i++) {
    if (feed_targets(fs[i], n) < 0) {
      fs[i] = NULL;
      continue;
    }
    fs[i]->tickno++;
    fs[i]->tick_ns = uv_hrtime();
  }
  jobs = n > 0 && nf > 0 && nf <= SIZE_MAX / n / sizeof(*jobs) ? tlc_malloc(nf * n * sizeof(*jobs))
                                                               : NULL;
  for (i = 0; i < nf; i++)
    for (idx = 0; fs[i] != NULL && idx < n; idx++) {
      if (jobs == NULL) {
        feed_tick_target(fs[i], idx);
        continue;
      }
      jobs[nj].f = fs[i];
      jobs[nj].idx = idx;
      jobs[nj].cost = fs[i]->t[idx].n;
      nj++;
    }
  if (jobs == NULL)
    return;
  qsort(jobs, nj, sizeof(*jobs), cmp_job);
  for (i = 0; i < nj; i++)
    feed_tick_target(jobs[i].f, jobs[i].idx);
  tlc_free(jobs);
}

static void feed_tick(feed_t *f) {
  feeds_tick(f->ps, &f, 1);
}

static void cache_reset(tlc_pubsub_t *ps) {
  size_t i;
  for (i = 0; i < SNAP_CACHE; i++) {
    ps->cache[i].used = 0;
    tlc_table_clear(&ps->cache[i].t);
  }
}

static void sub_close_now(tlc__ps_sub_t *s);

/* Ends a tick pass: shared snapshots dropped, released feeds freed, subscribers that closed
 * during it closed. */
static void pass_end(tlc_pubsub_t *ps) {
  feed_t *f, *next;
  tlc__ps_sub_t *s, *sn;
  cache_reset(ps);
  ps->ticking = 0;
  for (f = ps->feeds; f != NULL; f = next) {
    next = f->next;
    if (f->dead) {
      feed_unlink(f);
      feed_free(f);
    }
  }
  for (s = ps->subs; s != NULL; s = sn) {
    sn = s->next;
    if (s->detached && s->closing && !s->closed)
      sub_close_now(s);
  }
}

/* Runs every feed that is due (within TICK_EARLY_NS) in one pass, so that feeds of the same
 * interval share their engine snapshots and all their subscribers are written together, then
 * arms the timer for the next one. A feed that fell behind skips to its next grid point rather
 * than ticking in a burst. */
static void run_due(tlc_pubsub_t *ps) {
  uint64_t now = uv_hrtime();
  feed_t *f, *fs[16];
  size_t nf = 0;
  if (ps->ticking || ps->closing)
    return;
  ps->ticking = 1;
  for (f = ps->feeds; f != NULL; f = f->next) {
    uint64_t iv = (uint64_t)f->spec->interval_ms * 1000000u;
    if (f->dead || f->due_ns > now + TICK_EARLY_NS)
      continue;
    if (nf == sizeof(fs) / sizeof(fs[0])) { /* more feeds due at once: batches of 16 */
      feeds_tick(ps, fs, nf);
      nf = 0;
    }
    fs[nf++] = f;
    f->due_ns += iv;
    if (f->due_ns <= now)
      f->due_ns = grid_next(ps, iv, now);
  }
  if (nf > 0)
    feeds_tick(ps, fs, nf);
  pass_end(ps);
  sched_arm(ps);
}

static void tick_timer_cb(uv_timer_t *t) {
  run_due(t->data);
}

/* Arms the tick timer for the earliest due feed. The timer's clock is the loop's (ms, read at
 * the start of a loop turn), so the time left is measured on uv_hrtime and the loop time is
 * refreshed first; it may fire up to about 1 ms early, which run_due accepts. */
static void sched_arm(tlc_pubsub_t *ps) {
  uint64_t min = UINT64_MAX, now;
  feed_t *f;
  if (ps->closing)
    return;
  for (f = ps->feeds; f != NULL; f = f->next)
    if (!f->dead && f->due_ns < min)
      min = f->due_ns;
  ps->next_due_ns = min;
  if (min == UINT64_MAX) {
    uv_timer_stop(&ps->tick_timer);
    return;
  }
  uv_update_time(ps->loop);
  now = uv_hrtime();
  uv_timer_start(&ps->tick_timer, tick_timer_cb, min > now ? (min - now) / 1000000u : 0, 0);
}

void tlc_pubsub_poll(tlc_pubsub_t *ps) {
  if (ps->next_due_ns <= uv_hrtime() + TICK_EARLY_NS)
    run_due(ps);
}

void tlc__ps_tick_all(tlc_pubsub_t *ps) {
  feed_t *f;
  if (ps->ticking || ps->closing)
    return;
  ps->ticking = 1;
  for (f = ps->feeds; f != NULL; f = f->next)
    if (!f->dead)
      feed_tick(f);
  pass_end(ps); /* (tests and fuzzers: feed by feed) */
}

static void subn_free(tlc__ps_sub_t *s, subn_t *sn) {
  size_t j;
  tlc_pubsub_t *ps = s->ps;
  if (s->hq.sn == sn)
    s->hq.sn = NULL; /* its history still comes; nothing is attached after it */
  for (j = 0; j < sn->nslots; j++)
    if (sn->slots[j].pending != NULL) {
      queued_sub(s, sn->slots[j].pending->len);
      msg_unref(sn->slots[j].pending);
    }
  tlc_free(sn->slots);
  if (sn->events) {
    ps->n_event_subns--;
    ps->evsubs_dirty = 1;
  }
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

/* ---- the serving thread ------------------------------------------------------------------ */

/* Writes what the socket takes of job j. Returns 0 when all of it is written, UV_EAGAIN when
 * the socket is full, or the failure (UV_EPIPE, UV_ECONNRESET, ...). Writer thread. */
/* TLS: encrypts the job's messages into its ciphertext buffer (once). Writer thread. */
static int job_encrypt(wjob_t *j) {
  size_t i;
  int r = 0;
  uv_mutex_lock(j->tls_mu);
  for (i = 0; i < j->nbufs && r == 0; i++)
    r = tlc_tls_conn_write(j->tls, j->iov[i].iov_base, j->iov[i].iov_len);
  if (r == 0) /* with what the loop's reads produced meanwhile (alerts), in order */
    j->clen += tlc_tls_conn_take(j->tls, j->cbuf + j->clen, j->ccap - j->clen);
  uv_mutex_unlock(j->tls_mu);
  j->encrypted = 1;
  if (r < 0)
    return UV_EPROTO;
  j->iov[0].iov_base = j->cbuf;
  j->iov[0].iov_len = j->clen;
  j->nbufs = j->clen > 0 ? 1 : 0;
  j->cur = 0;
  return 0;
}

static int job_write(wjob_t *j) {
  if (j->tls != NULL && !j->encrypted) {
    int r = job_encrypt(j);
    if (r < 0)
      return r;
  }
  while (j->cur < j->nbufs) {
    struct msghdr mh;
    ssize_t n;
    memset(&mh, 0, sizeof(mh));
    mh.msg_iov = &j->iov[j->cur];
    mh.msg_iovlen = j->nbufs - j->cur;
    n = sendmsg(j->fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK)
        return UV_EAGAIN;
      return uv_translate_sys_error(errno);
    }
    while (n > 0 && j->cur < j->nbufs) {
      if ((size_t)n >= j->iov[j->cur].iov_len) {
        n -= (ssize_t)j->iov[j->cur].iov_len;
        j->cur++;
        j->partial = 0;
      } else {
        j->iov[j->cur].iov_base = (char *)j->iov[j->cur].iov_base + n;
        j->iov[j->cur].iov_len -= (size_t)n;
        j->partial = 1;
        n = 0;
      }
    }
  }
  return 0;
}

static void job_done_append(wjob_t **head, wjob_t **last, wjob_t *j) {
  j->next = NULL;
  if (*last != NULL)
    (*last)->next = j;
  else
    *head = j;
  *last = j;
}

/* The writer thread: takes jobs, writes them as far as their sockets take them, waits in
 * poll() for sockets to drain (and for new jobs or cancellations on its pipe), and hands
 * finished jobs back to the loop through done_async. Touches only the jobs and the writer's
 * queues; never a msg_t's reference count, a subscriber, or libuv (except uv_async_send). */
static void writer_main(void *arg) {
  writer_t *w = arg;
  wjob_t *active = NULL;
  for (;;) {
    wjob_t *in, *done = NULL, *last = NULL, **pp, *j;
    size_t np = 0;
    int stop;
    uv_mutex_lock(&w->lock);
    in = w->in_head;
    w->in_head = w->in_tail = NULL;
    stop = w->stop;
    w->cancels = 0;
    /* new jobs after the waiting ones; cancellations are read under the lock */
    for (pp = &active; *pp != NULL; pp = &(*pp)->next)
      ;
    *pp = in;
    for (pp = &active; (j = *pp) != NULL;) {
      if (j->cancel) {
        *pp = j->next;
        j->status = UV_ECANCELED;
        job_done_append(&done, &last, j);
      } else {
        pp = &j->next;
      }
    }
    uv_mutex_unlock(&w->lock);
    for (pp = &active; (j = *pp) != NULL;) {
      int r = job_write(j);
      if (r == UV_EAGAIN) {
        pp = &j->next;
        continue;
      }
      *pp = j->next;
      j->status = r;
      job_done_append(&done, &last, j);
    }
    if (done != NULL) {
      uv_mutex_lock(&w->lock);
      if (w->done_tail != NULL)
        w->done_tail->next = done;
      else
        w->done_head = done;
      w->done_tail = last;
      uv_mutex_unlock(&w->lock);
      uv_async_send(&w->done_async);
    }
    if (stop && active == NULL)
      break;
    /* sleep until a socket drains, a job comes or one is cancelled */
    w->pfd[np].fd = w->pipe_r;
    w->pfd[np].events = POLLIN;
    w->pfd[np].revents = 0;
    np++;
    for (j = active; j != NULL && np < w->max_active; j = j->next) {
      w->pfd[np].fd = j->fd;
      w->pfd[np].events = POLLOUT;
      w->pfd[np].revents = 0;
      np++;
    }
    uv_mutex_lock(&w->lock);
    if (w->in_head == NULL && w->cancels == 0 && !w->stop) {
      w->sleeping = 1;
      uv_mutex_unlock(&w->lock);
      (void)poll(w->pfd, (nfds_t)np, -1);
      uv_mutex_lock(&w->lock);
      w->sleeping = 0;
      if (w->woken) {
        char b[64];
        w->woken = 0;
        while (read(w->pipe_r, b, sizeof(b)) > 0)
          ;
      }
    }
    uv_mutex_unlock(&w->lock);
  }
}

/* Wakes the writer if it sleeps (at most one pipe write per sleep). Under the lock. */
static void writer_wake_locked(writer_t *w) {
  if (w->sleeping && !w->woken) {
    char c = 1;
    w->woken = 1;
    if (write(w->pipe_w, &c, 1) < 0) {
      /* the pipe is non-blocking and holds one byte per sleep: it cannot be full */
    }
  }
}

/* Hands job j to the writer and wakes it if it sleeps (one pipe write per sleep, however
 * many jobs follow while it works). Loop thread. */
static void writer_post(tlc_pubsub_t *ps, wjob_t *j) {
  writer_t *w = ps->wr;
  j->next = NULL;
  j->cancel = 0;
  j->status = 0;
  ps->jobs_inflight++;
  uv_mutex_lock(&w->lock);
  if (w->in_tail != NULL)
    w->in_tail->next = j;
  else
    w->in_head = j;
  w->in_tail = j;
  writer_wake_locked(w);
  uv_mutex_unlock(&w->lock);
}

static void writer_cancel(tlc_pubsub_t *ps, wjob_t *j) {
  writer_t *w = ps->wr;
  uv_mutex_lock(&w->lock);
  j->cancel = 1;
  w->cancels++;
  writer_wake_locked(w);
  uv_mutex_unlock(&w->lock);
}

static void write_done(tlc__ps_sub_t *s, int status);
static void writer_stop(tlc_pubsub_t *ps);

static void writer_done_cb(uv_async_t *a) {
  tlc_pubsub_t *ps = a->data;
  wjob_t *j, *next;
  uv_mutex_lock(&ps->wr->lock);
  j = ps->wr->done_head;
  ps->wr->done_head = ps->wr->done_tail = NULL;
  uv_mutex_unlock(&ps->wr->lock);
  for (; j != NULL; j = next) {
    next = j->next;
    ps->jobs_inflight--;
    write_done(j->sub, j->status);
  }
  if (ps->closing && ps->jobs_inflight == 0)
    writer_stop(ps);
}

static void writer_closed_cb(uv_handle_t *h) {
  tlc_pubsub_t *ps = h->data;
  writer_t *w = (writer_t *)(void *)((char *)h - offsetof(writer_t, done_async));
  if (ps->wr == w)
    ps->wr = NULL;
  uv_mutex_destroy(&w->lock);
  tlc_free(w->pfd);
  tlc_free(w);
  handle_closed(ps);
}

/* Stops and joins the thread (every job has come back: it exits at once) and closes the
 * async handle; the writer is freed in its close callback. */
static void writer_stop(tlc_pubsub_t *ps) {
  writer_t *w = ps->wr;
  if (w == NULL || w->stop)
    return;
  uv_mutex_lock(&w->lock);
  w->stop = 1; /* seen before it sleeps again; the byte wakes it if it sleeps now */
  if (write(w->pipe_w, "", 1) < 0) {
    /* non-blocking pipe already holding a byte: it will wake anyway */
  }
  uv_mutex_unlock(&w->lock);
  uv_thread_join(&w->thread);
  close(w->pipe_r);
  close(w->pipe_w);
  uv_close((uv_handle_t *)&w->done_async, writer_closed_cb);
}

/* Starts the serving thread (first real subscriber). On failure subscribers are written from
 * the loop thread with uv_write, as before: slower under load, otherwise the same. */
static void writer_start(tlc_pubsub_t *ps) {
  writer_t *w;
  int fds[2];
  if (ps->wr != NULL || ps->writer_failed || ps->o.write_on_loop || ps->closing)
    return;
  ps->writer_failed = 1; /* until it succeeds: one attempt */
  w = tlc_calloc(1, sizeof(*w));
  if (w == NULL)
    return;
  w->max_active = ps->o.max_subscribers + MAX_REJECTING + 1;
  w->pfd = tlc_calloc(w->max_active, sizeof(*w->pfd));
  if (w->pfd == NULL)
    goto fail_pfd;
  if (pipe(fds) != 0)
    goto fail_pfd;
  w->pipe_r = fds[0];
  w->pipe_w = fds[1];
  if (fcntl(fds[0], F_SETFL, O_NONBLOCK) != 0 || fcntl(fds[1], F_SETFL, O_NONBLOCK) != 0 ||
      fcntl(fds[0], F_SETFD, FD_CLOEXEC) != 0 || fcntl(fds[1], F_SETFD, FD_CLOEXEC) != 0)
    goto fail_pipe;
  if (uv_mutex_init(&w->lock) != 0)
    goto fail_pipe;
  if (uv_async_init(ps->loop, &w->done_async, writer_done_cb) != 0)
    goto fail_mutex;
  w->done_async.data = ps;
  ps->open_handles++;
  if (uv_thread_create(&w->thread, writer_main, w) != 0) {
    uv_close((uv_handle_t *)&w->done_async, writer_closed_cb);
    close(w->pipe_r);
    close(w->pipe_w);
    logf_(ps, TLC_PS_LOG_WARN, "serving thread: cannot start; writing from the loop thread");
    return;
  }
  ps->wr = w;
  ps->writer_failed = 0;
  return;
fail_mutex:
  uv_mutex_destroy(&w->lock);
fail_pipe:
  close(fds[0]);
  close(fds[1]);
fail_pfd:
  tlc_free(w->pfd);
  tlc_free(w);
  logf_(ps, TLC_PS_LOG_WARN, "serving thread: cannot start; writing from the loop thread");
}

/* ---- writing ----------------------------------------------------------------------------- */

static void sub_closed_cb(uv_handle_t *h);
static void shutdown_note(tlc__ps_sub_t *s);

static void write_cb(uv_write_t *req, int status);

/* The catch-up snapshot of a slot, from the feed's mirror: the full snapshot for a slot that
 * was never sent one, else the delta from what it was last sent to the last tick. Shared with
 * every other slot in the same position until the next tick. Returns a message (refs 1), or
 * NULL (nothing to send yet: the next tick delivers). */
static msg_t *slot_catchup(tlc__ps_sub_t *s, subn_t *sn, size_t idx) {
  slot_t *sl = &sn->slots[idx];
  feed_t *f = sn->feed;
  feed_target_t *ft;
  msg_t **cache;
  int r = 0;
  sl->catchup = 0;
  if (f == NULL || idx >= f->nt || !f->t[idx].have)
    return NULL;
  {
    tlc_ps_target_info_t info;
    memset(&info, 0, sizeof(info));
    if (f->ps->p.info(f->ps->p.ud, idx, &info) < 0 || info.gen != f->t[idx].gen) {
      /* another target took this index since the last tick: the next tick sends its full */
      feed_target_renew(f, idx, info.gen);
      return NULL;
    }
  }
  ft = &f->t[idx];
  if (!sl->sent_any) {
    cache = &ft->full;
    if (*cache == NULL)
      r = mirror_msg(f, idx, MM_FULL, 0, cache);
  } else {
    cache = &ft->catchup;
    if (*cache == NULL || ft->catchup_base != sl->sent_seq) {
      msg_unref(*cache);
      *cache = NULL;
      ft->catchup_base = sl->sent_seq;
      r = mirror_msg(f, idx, MM_SINCE, sl->sent_seq, cache);
    }
  }
  if (r < 0) {
    if (r == TLC_ELIMIT)
      send_error(s, 0, TLCAP__ERROR_CODE__ERR_FAILED,
                 "snapshot larger than the daemon's message cap: narrow the subscription", 0, r);
    return NULL;
  }
  return msg_ref(*cache);
}

static int take(tlc__ps_sub_t *s, msg_t *m, size_t *bytes) {
  /* m's bytes are already counted in queued (moved from a queue), or are added by the caller */
  s->inflight[s->ninflight++] = m;
  *bytes += m->len;
  return s->ninflight < WRITE_MAX_BUFS && *bytes < WRITE_MAX_BYTES;
}

static void sub_kick_once(tlc__ps_sub_t *s);
static void gs_next(tlc__ps_sub_t *s);

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
  } while (!s->writing && !s->closed && s->ctl_head != NULL && (s->tls == NULL || s->tls_ready) &&
           ++rounds < 64);
}

/* TLS: moves the session's waiting ciphertext to s->tout. Its size is bounded by what one
 * write encrypts (WRITE_MAX_BYTES plus one message of at most max_message) and the handshake:
 * above that something is wrong and the subscriber is closed (TLC_ELIMIT). */
static int tls_collect(tlc__ps_sub_t *s) {
  size_t n, cap;
  uv_mutex_lock(&s->tls_mu);
  n = tlc_tls_conn_pending(s->tls);
  uv_mutex_unlock(&s->tls_mu);
  if (n == 0)
    return 0;
  if (s->tout_len + n > s->tout_cap) {
    uint8_t *nb;
    cap = s->tout_cap > 0 ? s->tout_cap * 2 : 16384;
    while (cap < s->tout_len + n)
      cap *= 2;
    if (cap > s->ps->o.max_message + 2 * WRITE_MAX_BYTES + TLS_OUT_SLACK) {
      cap = s->tout_len + n;
      if (cap > s->ps->o.max_message + 2 * WRITE_MAX_BYTES + TLS_OUT_SLACK)
        return TLC_ELIMIT;
    }
    nb = tlc_realloc(s->tout, cap);
    if (nb == NULL)
      return TLC_ENOMEM;
    s->tout = nb;
    s->tout_cap = cap;
  }
  uv_mutex_lock(&s->tls_mu);
  s->tout_len += tlc_tls_conn_take(s->tls, s->tout + s->tout_len, n);
  uv_mutex_unlock(&s->tls_mu);
  return 0;
}

/* TLS: encrypts the in-flight messages and makes the ciphertext waiting so far the next
 * write's (tjob). Returns 0 or a negative error (the subscriber must then be closed). */
static int tls_prepare(tlc__ps_sub_t *s, int encrypt) {
  uint8_t *t;
  size_t i, c;
  int r;
  r = 0;
  uv_mutex_lock(&s->tls_mu); /* uncontended here (no job in flight); kept for the invariant */
  for (i = 0; encrypt && i < s->ninflight && r == 0; i++)
    r = tlc_tls_conn_write(s->tls, s->inflight[i]->data, s->inflight[i]->len);
  uv_mutex_unlock(&s->tls_mu);
  if (r < 0)
    return TLC_EIO;
  if ((r = tls_collect(s)) != 0)
    return r;
  t = s->tjob; /* empty: no write is in flight */
  c = s->tjob_cap;
  s->tjob = s->tout;
  s->tjob_cap = s->tout_cap;
  s->tjob_len = s->tout_len;
  s->tout = t;
  s->tout_cap = c;
  s->tout_len = 0;
  if (s->tout_cap > TLS_BUF_KEEP) { /* one large snapshot must not pin its size per subscriber */
    tlc_free(s->tout);
    s->tout = NULL;
    s->tout_cap = 0;
  }
  return 0;
}

static void sub_kick_once(tlc__ps_sub_t *s) {
  tlc_pubsub_t *ps = s->ps;
  size_t bytes = 0, i, j, first_snap;
  uv_buf_t bufs[WRITE_MAX_BUFS];
  uv_os_fd_t fd = -1;
  int r, room = 1, to_writer;
  /* TLS before its handshake completes: only handshake bytes go out. */
  int gather = s->tls == NULL || s->tls_ready;
  if (s->writing || s->closed)
    return;
  if (s->gs.active && s->ctl_head == NULL && !s->closing)
    gs_next(s); /* the previous part is written: the next one (queued as a control message) */
  s->ninflight = 0;
  while (gather && room && s->ctl_head != NULL) {
    ctl_node_t *n = s->ctl_head;
    s->ctl_head = n->next;
    if (s->ctl_head == NULL)
      s->ctl_tail = NULL;
    room = take(s, n->m, &bytes);
    tlc_free(n);
  }
  if (gather && !s->closing) {
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
    first_snap = s->ninflight;
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
    /* Snapshots of different targets are independent streams: the smaller first, so a
     * target with few changes is not delivered behind a large one. (Insertion sort: at most
     * WRITE_MAX_BUFS entries.) */
    for (i = first_snap + 1; i < s->ninflight; i++) {
      msg_t *m = s->inflight[i];
      for (j = i; j > first_snap && s->inflight[j - 1]->len > m->len; j--)
        s->inflight[j] = s->inflight[j - 1];
      s->inflight[j] = m;
    }
    while (room && s->ring_n > 0) {
      msg_t *m = s->ring[s->ring_head];
      s->ring_head = (s->ring_head + 1) % ps->o.max_batches;
      s->ring_n--;
      room = take(s, m, &bytes);
    }
    if (s->ev_stalled && s->ring_n < ps->o.max_batches)
      ev_unstall(s);
  }
  to_writer = ps->wr != NULL && !s->detached && uv_fileno(&s->h.handle, &fd) == 0;
  /* TLS: with the serving thread, it encrypts (job_encrypt) after the ciphertext waiting now;
   * without it, the loop thread does. */
  if (s->tls != NULL && (r = tls_prepare(s, !to_writer)) < 0) {
    for (i = 0; i < s->ninflight; i++) {
      queued_sub(s, s->inflight[i]->len);
      msg_unref(s->inflight[i]);
    }
    s->ninflight = 0;
    logf_(ps, TLC_PS_LOG_WARN, "sub#%llu %s: TLS: cannot encrypt: %s", (unsigned long long)s->id,
          s->peer, tlc_strerror(r));
    ps->st.closed_peer++;
    sub_close_soon(s);
    return;
  }
  if (s->ninflight == 0 && (s->tls == NULL || s->tjob_len == 0)) {
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
    if (s->ctl_head != NULL || s->ring_n > 0 || (s->gs.active && !s->closing))
      sub_kick_once(s);
    return;
  }
  if (to_writer) {
    wjob_t *job = &s->job;
    {
      size_t plain = 0;
      for (i = 0; i < s->ninflight; i++) {
        job->iov[i].iov_base = s->inflight[i]->data;
        job->iov[i].iov_len = s->inflight[i]->len;
        plain += s->inflight[i]->len;
      }
      job->nbufs = s->ninflight;
      job->tls = NULL;
      if (s->tls != NULL) {
        /* room for the ciphertext: records of 16 KiB with at most 64 bytes of framing, tag
         * and padding each, and what the loop's reads may add meanwhile (alerts) */
        size_t need = s->tjob_len + plain + (plain / 16384 + 1) * 64 + 4096;
        if (need > s->tjob_cap) {
          uint8_t *nb = tlc_realloc(s->tjob, need);
          if (nb == NULL) {
            for (i = 0; i < s->ninflight; i++) {
              queued_sub(s, s->inflight[i]->len);
              msg_unref(s->inflight[i]);
            }
            s->ninflight = 0;
            s->tjob_len = 0;
            ps->st.closed_peer++;
            sub_close_soon(s);
            return;
          }
          s->tjob = nb;
          s->tjob_cap = need;
        }
        job->tls = s->tls;
        job->tls_mu = &s->tls_mu;
        job->cbuf = s->tjob;
        job->clen = s->tjob_len;
        job->ccap = s->tjob_cap;
        job->encrypted = 0;
      }
      job->cur = 0;
      job->partial = 0;
      job->fd = fd;
      job->sub = s;
      s->writing = 1;
      s->in_writer = 1;
      writer_post(ps, job);
      return;
    }
  }
  for (i = 0; i < s->ninflight; i++)
    bufs[i] = uv_buf_init((char *)s->inflight[i]->data, (unsigned)s->inflight[i]->len);
  s->wreq.data = s;
  if (s->tls != NULL) {
    bufs[0] = uv_buf_init((char *)s->tjob, (unsigned)s->tjob_len);
    r = uv_write(&s->wreq, &s->h.stream, bufs, 1, write_cb);
  } else {
    r = uv_write(&s->wreq, &s->h.stream, bufs, (unsigned)s->ninflight, write_cb);
  }
  if (r < 0) {
    for (i = 0; i < s->ninflight; i++) {
      queued_sub(s, s->inflight[i]->len);
      msg_unref(s->inflight[i]);
    }
    s->ninflight = 0;
    s->tjob_len = 0;
    ps->st.closed_peer++;
    sub_close_soon(s);
    return;
  }
  s->writing = 1;
}

/* A write finished (written, failed, or cancelled because the subscriber is closing). */
static void write_done(tlc__ps_sub_t *s, int status) {
  size_t i;
  for (i = 0; i < s->ninflight; i++) {
    queued_sub(s, s->inflight[i]->len);
    msg_unref(s->inflight[i]);
  }
  s->ninflight = 0;
  s->writing = 0;
  s->in_writer = 0;
  if (s->close_deferred) {
    /* sub_close_now waited for the writer to give the socket back; the note goes between two
     * messages (TLS: after the records the job made and did not send, shutdown_note). */
    s->close_deferred = 0;
    if (s->shutdown_note && !s->job.partial)
      shutdown_note(s);
    s->job.tls = NULL;
    s->tjob_len = 0;
    uv_close(&s->h.handle, sub_closed_cb);
    return;
  }
  s->job.tls = NULL;
  s->tjob_len = 0;
  if (s->tjob_cap > TLS_BUF_KEEP) {
    tlc_free(s->tjob);
    s->tjob = NULL;
    s->tjob_cap = 0;
  }
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

static void write_cb(uv_write_t *req, int status) {
  write_done(req->data, status);
}

/* ---- closing ----------------------------------------------------------------------------- */

static void sub_free(tlc__ps_sub_t *s) {
  tlc_pubsub_t *ps = s->ps;
  sub_drop_queued(s);
  hist_stop(s);
  sub_unsubscribe_all(s);
  tlc_free(s->subs);
  tlc_free(s->ring);
  tlc_free(s->stall_b);
  tlc_free(s->stall_e);
  tlc_free(s->gs.target);
  tlc_frame_dec_fini(&s->dec);
  if (s->tls != NULL) {
    tlc_tls_conn_free(s->tls);
    uv_mutex_destroy(&s->tls_mu);
  }
  tlc_free(s->tout);
  tlc_free(s->tjob);
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
  ps->evsubs_dirty = 1; /* evsubs never holds an unlinked subscriber */
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
  hist_stop(s);
  sub_unsubscribe_all(s);
  if (s->detached)
    return;
  if (s->in_writer) {
    /* The serving thread may be inside a write on this socket: the stream (and its fd) is
     * closed when the job comes back (write_done), which cancellation makes prompt. */
    s->close_deferred = 1;
    writer_cancel(s->ps, &s->job);
  } else {
    uv_close(&s->h.handle, sub_closed_cb);
  }
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
    if (!s->ps->ticking) /* else at the end of the tick pass, which walks the subscriptions */
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
    msg_t *m = error_encode(ps, 0, code, text, 1, 0);
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
    uint64_t delay = ps->o.auth_fail_delay_ms;
    int ok = 1;
    if (ps->o.auth != NULL)
      ok = tlc_auth_check(ps->o.auth, s->detached ? NULL : s->peer_ip, h->token.data, h->token.len,
                          now_ms(ps), &delay);
    else if (ps->token_len > 0)
      ok = tlc_pubsub_token_equal(h->token.data, h->token.len, ps->token, ps->token_len);
    if (!ok) {
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
      uv_timer_start(&s->timer, auth_failed_cb, delay, 0);
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

static feed_t *subn_attach(tlc__ps_sub_t *s, subn_t *sn);
static int hist_subscribe_check(tlc__ps_sub_t *s, uint32_t req, const Tlcap__Subscribe *r);
static void hist_subscribe_start(tlc__ps_sub_t *s, uint32_t req, const Tlcap__Subscribe *r,
                                 subn_t *sn, spec_t *fspec);

static void on_subscribe(tlc__ps_sub_t *s, uint32_t req, const Tlcap__Subscribe *r) {
  tlc_pubsub_t *ps = s->ps;
  feed_t *tick = NULL;
  spec_t *spec = NULL, *fspec = NULL, *hist_fspec = NULL;
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
  if (r->history != NULL && fspec != NULL) { /* join mid-stream: the history first */
    if (hist_subscribe_check(s, req, r) < 0) {
      tlc_free(sn->slots);
      spec_free(spec);
      spec_free(fspec);
      tlc_free(sn);
      return;
    }
    hist_fspec = fspec;
    fspec = NULL;
  }
  if (sn->nslots < n || (fspec != NULL && feed_get(ps, fspec, &sn->feed) < 0)) {
    tlc_free(sn->slots);
    spec_free(spec);
    spec_free(hist_fspec);
    tlc_free(sn);
    send_error(s, req, TLCAP__ERROR_CODE__ERR_FAILED, "out of memory", 0, TLC_ENOMEM);
    return;
  }
  tick = subn_attach(s, sn);
  if (r->events) {
    if (s->ev_stalled)
      ev_settle(s); /* drops so far by the subscriptions it had */
    sn->events = 1;
    ps->n_event_subns++;
    ps->evsubs_dirty = 1;
  }
  s->subs[s->nsubs++] = sn;
  reply_ack(s, req, sn->id);
  if (hist_fspec != NULL) { /* the live snapshots follow the history (hist_done) */
    hist_subscribe_start(s, req, r, sn, hist_fspec);
    return;
  }
  /* After the Ack: the snapshot follows it. (A subscriber closing now - it could not even be
   * sent the Ack - may have taken the feed with it.) */
  if (tick != NULL && !s->closing && !ps->ticking) {
    ps->ticking = 1;
    feed_tick(tick);
    pass_end(ps); /* may free the feed if the subscriber closed meanwhile */
  }
}

/* Links a subscription to its feed (sn->feed, when it has one) and marks the targets whose
 * full snapshot it needs. Returns the feed to tick now for it, or NULL. */
static feed_t *subn_attach(tlc__ps_sub_t *s, subn_t *sn) {
  tlc_pubsub_t *ps = s->ps;
  feed_t *tick = NULL;
  size_t i, n = sn->nslots;
  if (sn->feed != NULL) {
    feed_t *f = sn->feed;
    sn->fnext = f->subs;
    if (f->subs != NULL)
      f->subs->fprev = sn;
    f->subs = sn;
    f->nsubs++;
    /* First a full snapshot of every matching target, as soon as the socket takes it: from
     * the feed's first tick, run now; or, joining a feed that has ticked, from its mirror,
     * after a tick run now unless the last one is fresh (JOIN_FRESH_NS). */
    if (f->tickno == 0 || uv_hrtime() - f->tick_ns > JOIN_FRESH_NS)
      tick = f;
    for (i = 0; i < n && f->tickno > 0; i++) {
      tlc_ps_target_info_t info;
      memset(&info, 0, sizeof(info));
      if (ps->p.info(ps->p.ud, i, &info) == 0 && info.name != NULL &&
          spec_target(sn->spec, info.name))
        sn->slots[i].catchup = 1;
    }
  }
  return tick;
}

static void on_unsubscribe(tlc__ps_sub_t *s, uint32_t req, const Tlcap__Unsubscribe *r) {
  size_t i;
  for (i = 0; i < s->nsubs; i++)
    if (s->subs[i]->id == r->subscription_id) {
      subn_t *sn = s->subs[i];
      if (sn->events && s->ev_stalled)
        ev_settle(s); /* drops so far by the subscriptions it had */
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
  if (ps->p.memory != NULL)
    ps->p.memory(ps->p.ud, &tl.memory_limit, &tl.memory_used, &tl.memory_refused);
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
    ti[k].memory_bytes = in.memory_bytes;
    ti[k].memory_refused = in.memory_refused;
    tl.targets[k] = &ti[k];
    k++;
  }
  tl.n_targets = k;
  tlc_ps_nats_t nst;
  Tlcap__NatsStatus ns;
  memset(&nst, 0, sizeof(nst));
  if (ps->p.nats != NULL && ps->p.nats(ps->p.nats_ud, &nst) == 0) {
    tlcap__nats_status__init(&ns);
    ns.url = (char *)(nst.url != NULL ? nst.url : "");
    ns.connected = nst.connected != 0;
    ns.published = nst.published;
    ns.dropped = nst.dropped;
    ns.reconnects = nst.reconnects;
    ns.stream_ready = nst.stream_ready != 0;
    tl.nats = &ns;
  }
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

static size_t put_varint(uint8_t *p, uint64_t v) {
  size_t n = 0;
  do {
    p[n++] = (uint8_t)((v & 0x7Fu) | (v > 0x7Fu ? 0x80u : 0));
    v >>= 7;
  } while (v != 0);
  return n;
}

static size_t varint_len(uint64_t v) {
  uint8_t b[10];
  return put_varint(b, v);
}

/* GetStats answered in one message (older clients) for a target with more than
 * MIRROR_PART_ROWS areas: its rows are taken from the engine in parts of that many (all now:
 * one consistent snapshot) and encoded one after the other, so the memory is one part's table
 * plus the encoded rows, which max_message caps (TLC_ELIMIT past it), never a table of every
 * area. Returns 0 and *out (refs 1) or a negative error. */
static int stats_build_parts(tlc_pubsub_t *ps, const spec_t *spec, size_t idx, uint32_t req,
                             msg_t **out) {
  tlc_ps_target_info_t info;
  tlc_snap_opts_t so;
  tlc_table_t *t = &ps->scratch, hdr;
  tlc_pb_snap_sel_t sel;
  tlc_pb_arena_t a;
  Tlcap__Snapshot s;
  uint8_t *rows = NULL, *p;
  size_t nrows_b = 0, caprows = 0, snap_hdr, snap_len, stats_len, msg_len, n, k;
  uint64_t lo = 0, hi = 0;
  const tlc_mapping_t *m;
  msg_t *msg;
  int r = 0;
  *out = NULL;
  memset(&info, 0, sizeof(info));
  if ((r = ps->p.info(ps->p.ud, idx, &info)) < 0)
    return r;
  snap_opts(spec, 0, &so);
  memset(&sel, 0, sizeof(sel));
  sel.windows = spec->windows;
  sel.quantiles = spec->quantiles;
  tlc_table_init(&hdr);
  tlc_pb_arena_init(&a, ps->o.max_message * 4);
  while (hi < ((uint64_t)1 << 32)) {
    tlc_table_clear(t);
    if ((r = ps->p.split(ps->p.ud, idx, lo, MIRROR_PART_ROWS, 0, &hi)) < 0 ||
        (r = ps->p.snapshot_part(ps->p.ud, idx, t, &so, lo, hi)) < 0)
      goto done;
    if (lo == 0 && (r = hdr_copy(&hdr, t)) < 0) /* the header: contexts, counters, times */
      goto done;
    for (k = 0; k < t->nrows; k++) {
      Tlcap__Row pr;
      size_t packed, len;
      if (a.used > 32 * 1024)
        tlc_pb_arena_reset(&a);
      if ((r = tlc_pb_row_build(&a, &pr, &t->rows[k], spec->windows ? t->nwindows : 0, &sel)) < 0)
        goto done;
      len = tlc_pb_row_field_size(&pr, &packed);
      if (nrows_b + len > ps->o.max_message) {
        r = TLC_ELIMIT;
        goto done;
      }
      if (nrows_b + len > caprows) {
        uint8_t *nb = tlc_grow(rows, &caprows, nrows_b + len, 1, 1u << 16);
        if (nb == NULL) {
          r = TLC_ENOMEM;
          goto done;
        }
        rows = nb;
      }
      nrows_b += tlc_pb_row_field_pack(&pr, packed, rows + nrows_b);
    }
    lo = hi;
  }
  tlc_pb_arena_reset(&a);
  m = ps->p.mapping != NULL && spec->names ? ps->p.mapping(ps->p.ud, idx) : NULL;
  if ((r = tlc_pb_snapshot_build(&a, &s, &hdr, info.name != NULL ? info.name : "", &sel, m)) < 0)
    goto done;
  s.n_rows = 0; /* the header only: the rows are the bytes encoded above */
  s.instance_id = ps->instance_id;
  s.full = 1;
  s.connected = info.connected != 0;
  s.unix_ms = unix_ms();
  /* ServerMessage{request_id, stats: Stats{snapshot: header + rows}}, framed */
  snap_hdr = tlcap__snapshot__get_packed_size(&s);
  snap_len = snap_hdr + nrows_b;
  stats_len = 1 + varint_len(snap_len) + snap_len;
  msg_len = (req ? 1 + varint_len(req) : 0) + 2 + varint_len(stats_len) + stats_len;
  n = varint_len(msg_len) + msg_len;
  if (n > ps->o.max_message) {
    r = TLC_ELIMIT;
    goto done;
  }
  if ((msg = tlc_malloc(sizeof(*msg) + n)) == NULL) {
    r = TLC_ENOMEM;
    goto done;
  }
  memset(msg, 0, sizeof(*msg));
  msg->refs = 1;
  msg->kind = PSM_CONTROL;
  p = msg->data;
  p += put_varint(p, msg_len);
  if (req) {
    *p++ = 0x08; /* field 1 (request_id), varint */
    p += put_varint(p, req);
  }
  *p++ = 0x8A; /* field 17 (stats), length-delimited: two-byte tag */
  *p++ = 0x01;
  p += put_varint(p, stats_len);
  *p++ = 0x0A; /* Stats field 1 (snapshot), length-delimited */
  p += put_varint(p, snap_len);
  p += tlcap__snapshot__pack(&s, p);
  if (nrows_b > 0)
    memcpy(p, rows, nrows_b);
  p += nrows_b;
  msg->len = (size_t)(p - msg->data);
  ps->st.snapshots_built++;
  *out = msg;
done:
  tlc_pb_arena_fini(&a);
  tlc_table_fini(&hdr);
  tlc_free(rows);
  return r;
}

#define GS_MIN_ROWS 64
#define GS_MAX_ROWS 65536
#define GS_ROW_MIN  16 /* bytes: no encoded row is smaller (handle, context, kind, tags) */

/* Queues the next part of the subscriber's GetStats in parts (s->gs), and ends it after the
 * last. Runs when the previous part has been written (sub_kick_once). */
static void gs_next(tlc__ps_sub_t *s) {
  tlc_pubsub_t *ps = s->ps;
  stats_part_t pt;
  size_t idx;
  msg_t *m = NULL;
  int r;
  char why[200];
  memset(&pt, 0, sizeof(pt));
  s->gs.active = 0; /* set again below while parts remain */
  if (ps->p.find(ps->p.ud, s->gs.target, &idx) < 0) {
    snprintf(why, sizeof(why), "no such target any more: %.128s", s->gs.target);
    send_error(s, s->gs.req, TLCAP__ERROR_CODE__ERR_NO_SUCH_TARGET, why, 0, TLC_ERANGE);
    return;
  }
  pt.lo = s->gs.lo;
  pt.no = s->gs.no;
  pt.base = s->gs.seq;
  if ((r = ps->p.split(ps->p.ud, idx, pt.lo, s->gs.max_rows, 0, &pt.hi)) == 0) {
    pt.more = pt.hi < ((uint64_t)1 << 32);
    r = stats_build(ps, &s->gs.spec, idx, s->gs.req, &pt, &m);
  }
  if (r < 0) {
    send_error(s, s->gs.req, TLCAP__ERROR_CODE__ERR_FAILED,
               r == TLC_ELIMIT ? "a part of the statistics is larger than the daemon's message cap"
                               : tlc_strerror(r),
               0, r);
    return;
  }
  s->gs.lo = pt.hi;
  s->gs.no++;
  s->gs.seq = pt.seq;
  s->gs.active = pt.more != 0;
  sub_ctl(s, m);
  msg_unref(m);
}

/* ---- history: range statistics (GetStats.range, Subscribe.history) ------------------------
 *
 * The statistics of a target's stored records in a range are computed off the loop by the
 * provider's history hook (daemon/history/histq.h: libuv's threadpool, a few at once
 * daemon-wide). Per connection one query runs at a time (s->hq); another request meanwhile gets
 * ERR_BUSY, as does one that finds the daemon's queries all busy. The result comes back on the
 * loop (hist_done) and is sent as one control message (never dropped): a Stats reply, or for a
 * Subscribe.history a Snapshot with `range` set, target after target; then the subscription
 * is attached to its feed, so its live snapshots (full, then deltas) come after the history.
 * A subscriber that closes cancels its query (hist_stop). */

#define HIST_MAX_TARGETS 16 /* targets a Subscribe.history computes (its matching ones) */

static void hist_done(void *ud, tlc_hist_result_t *r);

static void hist_range_get(const Tlcap__TimeRange *tr, tlc_when_range_t *r) {
  memset(r, 0, sizeof(*r));
  r->kind = tr->clock == TLCAP__TIME_RANGE__CLOCK__WALL ? TLC_WHEN_WALL : TLC_WHEN_TARGET;
  r->has_since = tr->has_since;
  r->since = tr->since;
  r->has_until = tr->has_until;
  r->until = tr->until;
}

static void hist_range_set(const tlc_when_range_t *r, Tlcap__TimeRange *tr) {
  tlcap__time_range__init(tr);
  tr->clock =
      r->kind == TLC_WHEN_WALL ? TLCAP__TIME_RANGE__CLOCK__WALL : TLCAP__TIME_RANGE__CLOCK__TARGET;
  tr->has_since = r->has_since != 0;
  tr->since = r->since;
  tr->has_until = r->has_until != 0;
  tr->until = r->until;
}

static void hist_names_free(tlc__ps_sub_t *s) {
  for (size_t i = 0; i < s->hq.nleft; i++)
    tlc_free(s->hq.names_left[i]);
  tlc_free(s->hq.names_left);
  s->hq.names_left = NULL;
  s->hq.nleft = s->hq.next = 0;
}

/* The subscriber goes away: its query is cancelled, what waited for it dropped. */
static void hist_stop(tlc__ps_sub_t *s) {
  tlc_pubsub_t *ps = s->ps;
  if (s->hq.job != NULL && ps->p.history_cancel != NULL)
    ps->p.history_cancel(ps->p.history_ud, s->hq.job);
  s->hq.job = NULL;
  hist_names_free(s);
  spec_free(s->hq.fspec);
  s->hq.fspec = NULL;
  s->hq.sn = NULL;
}

/* Starts the query of s->hq.target; 0, or the hook's error (nothing started). */
static int hist_start(tlc__ps_sub_t *s) {
  tlc_pubsub_t *ps = s->ps;
  tlc_snap_opts_t so;
  memset(&so, 0, sizeof(so));
  so.windows = s->hq.windows;
  so.quantiles = s->hq.quantiles;
  so.neutral = s->hq.neutral;
  so.neutral_only = s->hq.neutral_only;
  return ps->p.history(ps->p.history_ud, s->hq.target, &s->hq.range, &so, hist_done, s, &s->hq.job);
}

/* Error for a query that could not start or failed. */
static void hist_error(tlc__ps_sub_t *s, uint32_t req, const char *target, int e,
                       const char *detail) {
  char why[400];
  int code = e == TLC_ELIMIT   ? TLCAP__ERROR_CODE__ERR_BUSY
             : e == -ENOENT    ? TLCAP__ERROR_CODE__ERR_NO_SUCH_TARGET
             : e == TLC_EINVAL ? TLCAP__ERROR_CODE__ERR_BAD_REQUEST
                               : TLCAP__ERROR_CODE__ERR_FAILED;
  if (e == TLC_ELIMIT)
    snprintf(why, sizeof(why),
             "range statistics of %.128s: the daemon is computing as many "
             "ranges as it runs at once: try again later",
             target);
  else
    snprintf(why, sizeof(why), "range statistics of %.128s: %s", target,
             detail != NULL && detail[0] ? detail : tlc_strerror(e));
  send_error(s, req, code, why, 0, e);
}

/* Is a range query possible on this connection now? Else the error is sent (-1). */
static int hist_can_start(tlc__ps_sub_t *s, uint32_t req, const Tlcap__TimeRange *tr) {
  tlc_pubsub_t *ps = s->ps;
  if (ps->p.history == NULL) {
    send_error(s, req, TLCAP__ERROR_CODE__ERR_FAILED,
               "range statistics are computed from stored segments: this daemon does not store", 0,
               TLC_EINVAL);
    return -1;
  }
  if (s->hq.job != NULL || s->hq.nleft > 0) {
    send_error(s, req, TLCAP__ERROR_CODE__ERR_BUSY,
               "a range query is already running on this connection: one at a time", 0, TLC_ELIMIT);
    return -1;
  }
  if (tr->has_since && tr->has_until && tr->since > tr->until) {
    send_error(s, req, TLCAP__ERROR_CODE__ERR_BAD_REQUEST, "the range's since is after until", 0,
               TLC_EINVAL);
    return -1;
  }
  return 0;
}

static void hist_get_stats(tlc__ps_sub_t *s, uint32_t req, const Tlcap__GetStats *g) {
  int e;
  if (hist_can_start(s, req, g->range) < 0)
    return;
  if (g->target == NULL || g->target[0] == '\0' || strlen(g->target) >= sizeof(s->hq.target)) {
    send_error(s, req, TLCAP__ERROR_CODE__ERR_NO_SUCH_TARGET, "no such target", 0, TLC_EINVAL);
    return;
  }
  s->hq.req = req;
  s->hq.windows = g->windows ? 1 : 0;
  s->hq.quantiles = g->quantiles ? 1 : 0;
  s->hq.neutral = g->neutral ? 1 : 0;
  s->hq.names = g->names ? 1 : 0;
  s->hq.neutral_only = 0;
  hist_range_get(g->range, &s->hq.range);
  snprintf(s->hq.target, sizeof(s->hq.target), "%s", g->target);
  if ((e = hist_start(s)) < 0)
    hist_error(s, req, g->target, e, NULL);
}

/* Subscribe.history: possible now? (-1: the error is sent.) */
static int hist_subscribe_check(tlc__ps_sub_t *s, uint32_t req, const Tlcap__Subscribe *r) {
  if (hist_can_start(s, req, r->history) < 0)
    return -1;
  return 0;
}

/* Attaches the waiting subscription to its feed: its live snapshots start. */
static void hist_attach(tlc__ps_sub_t *s) {
  tlc_pubsub_t *ps = s->ps;
  subn_t *sn = s->hq.sn;
  spec_t *fspec = s->hq.fspec;
  feed_t *tick;
  s->hq.sn = NULL;
  s->hq.fspec = NULL;
  if (sn == NULL || s->closing) {
    spec_free(fspec);
    return;
  }
  if (feed_get(ps, fspec, &sn->feed) < 0) {
    send_error(s, 0, TLCAP__ERROR_CODE__ERR_FAILED, "out of memory: no live snapshots", 0,
               TLC_ENOMEM);
    return;
  }
  tick = subn_attach(s, sn);
  if (tick != NULL && !ps->ticking) {
    ps->ticking = 1;
    feed_tick(tick);
    pass_end(ps);
  }
}

/* The next target of a Subscribe.history, or, none left, the live part. */
static void hist_subscribe_next(tlc__ps_sub_t *s) {
  while (s->hq.next < s->hq.nleft && !s->closing) {
    char *name = s->hq.names_left[s->hq.next++];
    int e;
    snprintf(s->hq.target, sizeof(s->hq.target), "%s", name);
    if ((e = hist_start(s)) == 0)
      return;
    hist_error(s, s->hq.req, name, e, NULL);
  }
  hist_names_free(s);
  hist_attach(s);
}

static void hist_subscribe_start(tlc__ps_sub_t *s, uint32_t req, const Tlcap__Subscribe *r,
                                 subn_t *sn, spec_t *fspec) {
  tlc_pubsub_t *ps = s->ps;
  size_t i, n = ps->p.count(ps->p.ud), k = 0;
  s->hq.req = req;
  s->hq.sn = sn;
  s->hq.fspec = fspec;
  s->hq.windows = r->windows ? 1 : 0;
  s->hq.quantiles = r->quantiles ? 1 : 0;
  s->hq.neutral = r->neutral || r->neutral_only ? 1 : 0;
  s->hq.neutral_only = r->neutral_only ? 1 : 0;
  s->hq.names = r->names ? 1 : 0;
  hist_range_get(r->history, &s->hq.range);
  s->hq.range.has_until = 0; /* up to now */
  s->hq.names_left = tlc_calloc(HIST_MAX_TARGETS, sizeof(char *));
  for (i = 0; i < n && s->hq.names_left != NULL && k < HIST_MAX_TARGETS; i++) {
    tlc_ps_target_info_t info;
    memset(&info, 0, sizeof(info));
    if (ps->p.info(ps->p.ud, i, &info) == 0 && info.name != NULL &&
        spec_target(sn->spec, info.name) &&
        (s->hq.names_left[k] = tlc_strndup(info.name, strlen(info.name))) != NULL)
      k++;
  }
  s->hq.nleft = k;
  if (k == HIST_MAX_TARGETS && i < n)
    send_error(s, req, TLCAP__ERROR_CODE__ERR_FAILED,
               "history for the first 16 matching targets only: name fewer", 0, TLC_ELIMIT);
  hist_subscribe_next(s);
}

/* hist_done: the snapshot of a result, as a Stats reply (GetStats) or a Snapshot (Subscribe).
 * NULL with *err on failure. */
static msg_t *hist_msg(tlc__ps_sub_t *s, tlc_hist_result_t *r, int *err) {
  tlc_pubsub_t *ps = s->ps;
  tlc_pb_arena_t a;
  tlc_pb_snap_sel_t sel;
  Tlcap__Snapshot snap;
  Tlcap__ServerMessage sm;
  Tlcap__Stats stats;
  Tlcap__TimeRange tr;
  tlc_when_range_t range = s->hq.range;
  msg_t *m = NULL;
  int too_big = 0, sub = s->hq.nleft > 0;
  memset(&sel, 0, sizeof(sel));
  sel.windows = s->hq.windows;
  sel.quantiles = s->hq.quantiles;
  tlc_pb_arena_init(&a, ps->o.max_message * 4);
  *err = tlc_pb_snapshot_build(&a, &snap, &r->t, s->hq.target, &sel,
                               s->hq.names && r->has_names ? &r->names : NULL);
  if (*err < 0)
    goto done;
  if (sub) { /* Subscribe.history: up to now */
    range.has_until = 1;
    range.until = range.kind == TLC_WHEN_WALL ? (int64_t)unix_ms() * 1000000 : r->t.last_time + 1;
  }
  hist_range_set(&range, &tr);
  snap.range = &tr;
  snap.segments = (uint32_t)r->segments;
  snap.instance_id = ps->instance_id;
  snap.full = 1;
  snap.unix_ms = unix_ms();
  tlcap__server_message__init(&sm);
  if (sub) {
    sm.msg_case = TLCAP__SERVER_MESSAGE__MSG_SNAPSHOT;
    sm.snapshot = &snap;
  } else {
    tlcap__stats__init(&stats);
    stats.snapshot = &snap;
    sm.request_id = s->hq.req;
    sm.msg_case = TLCAP__SERVER_MESSAGE__MSG_STATS;
    sm.stats = &stats;
  }
  m = msg_encode(ps, &sm, PSM_CONTROL, &too_big);
  if (m == NULL)
    *err = too_big ? TLC_ELIMIT : TLC_ENOMEM;
  else
    ps->st.snapshots_built++;
done:
  tlc_pb_arena_fini(&a);
  return m;
}

static void hist_done(void *ud, tlc_hist_result_t *r) {
  tlc__ps_sub_t *s = ud;
  msg_t *m;
  int e = r->status;
  s->hq.job = NULL;
  if (s->closing) {
    hist_stop(s);
    return;
  }
  if (e == 0 && (m = hist_msg(s, r, &e)) != NULL) {
    sub_ctl(s, m);
    msg_unref(m);
  } else {
    hist_error(s, s->hq.req, s->hq.target, e,
               e == TLC_ELIMIT ? "larger than the daemon's message cap" : r->err);
  }
  if (s->hq.nleft > 0)
    hist_subscribe_next(s);
}

static void on_get_stats(tlc__ps_sub_t *s, uint32_t req, const Tlcap__GetStats *g) {
  tlc_pubsub_t *ps = s->ps;
  tlc_ps_target_info_t info;
  spec_t spec;
  size_t idx;
  msg_t *m = NULL;
  int r;
  if (g->range != NULL) { /* a past range: off the loop (docs/protocol.md "History") */
    hist_get_stats(s, req, g);
    return;
  }
  if (find_target(s, req, g->target, &idx) < 0)
    return;
  memset(&spec, 0, sizeof(spec));
  spec.windows = g->windows ? 1 : 0;
  spec.quantiles = g->quantiles ? 1 : 0;
  spec.neutral = g->neutral ? 1 : 0;
  spec.names = g->names ? 1 : 0;
  if (g->max_rows > 0 && ps->p.split != NULL && ps->p.snapshot_part != NULL) {
    /* in parts: one part at a time, each built when the socket has taken the previous one */
    if (s->gs.active) {
      send_error(s, req, TLCAP__ERROR_CODE__ERR_BAD_REQUEST,
                 "a GetStats in parts is already being answered on this connection", 0, TLC_EINVAL);
      return;
    }
    tlc_free(s->gs.target);
    memset(&s->gs, 0, sizeof(s->gs));
    if ((s->gs.target = tlc_strndup(g->target, strlen(g->target))) == NULL) {
      send_error(s, req, TLCAP__ERROR_CODE__ERR_FAILED, "out of memory", 0, TLC_ENOMEM);
      return;
    }
    s->gs.req = req;
    s->gs.spec = spec;
    s->gs.max_rows = g->max_rows < GS_MIN_ROWS   ? GS_MIN_ROWS
                     : g->max_rows > GS_MAX_ROWS ? GS_MAX_ROWS
                                                 : g->max_rows;
    gs_next(s);
    return;
  }
  /* whole: refused before anything is built when it cannot fit in one message */
  memset(&info, 0, sizeof(info));
  if (ps->p.info(ps->p.ud, idx, &info) == 0 && info.areas > ps->o.max_message / GS_ROW_MIN) {
    char why[240];
    snprintf(why, sizeof(why),
             "statistics of %llu areas are larger than the daemon's message cap (%zu bytes): "
             "ask for them in parts (GetStats.max_rows)",
             (unsigned long long)info.areas, ps->o.max_message);
    send_error(s, req, TLCAP__ERROR_CODE__ERR_FAILED, why, 0, TLC_ELIMIT);
    return;
  }
  if (info.areas > MIRROR_PART_ROWS && ps->p.split != NULL && ps->p.snapshot_part != NULL)
    r = stats_build_parts(ps, &spec, idx, req, &m); /* memory: one part and the message */
  else
    r = stats_build(ps, &spec, idx, req, NULL, &m);
  if (r < 0) {
    send_error(s, req, TLCAP__ERROR_CODE__ERR_FAILED,
               r == TLC_ELIMIT ? "statistics larger than the daemon's message cap: ask for them "
                                 "in parts (GetStats.max_rows)"
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

/* ListSegments: the target's stored segments (storage's hook reads the state directory). */
#define MAX_LIST_SEGMENTS 5000
static void on_list_segments(tlc__ps_sub_t *s, uint32_t req, const Tlcap__ListSegments *r) {
  tlc_pubsub_t *ps = s->ps;
  tlc_ps_segment_t *v = NULL;
  size_t n = 0, i;
  int trunc = 0, e;
  char why[200];
  Tlcap__ServerMessage sm;
  Tlcap__SegmentList sl;
  Tlcap__SegmentInfo *si = NULL, **sp = NULL;
  if (ps->p.segments == NULL) {
    send_error(s, req, TLCAP__ERROR_CODE__ERR_FAILED, "no storage (tlcapd runs with --no-store)", 0,
               TLC_EINVAL);
    return;
  }
  e = ps->p.segments(ps->p.segments_ud, r->target != NULL ? r->target : "", MAX_LIST_SEGMENTS, &v,
                     &n, &trunc);
  if (e < 0) {
    snprintf(why, sizeof(why), "segments of %.128s: %s", r->target != NULL ? r->target : "",
             tlc_strerror(e));
    send_error(s, req,
               e == TLC_EINVAL ? TLCAP__ERROR_CODE__ERR_NO_SUCH_TARGET
                               : TLCAP__ERROR_CODE__ERR_FAILED,
               why, 0, e);
    return;
  }
  if (n > 0) {
    si = tlc_calloc(n, sizeof(*si));
    sp = tlc_calloc(n, sizeof(*sp));
    if (si == NULL || sp == NULL) {
      tlc_free(si);
      tlc_free(sp);
      tlc_free(v);
      send_error(s, req, TLCAP__ERROR_CODE__ERR_FAILED, "out of memory", 0, TLC_ENOMEM);
      return;
    }
  }
  tlcap__server_message__init(&sm);
  tlcap__segment_list__init(&sl);
  sm.request_id = req;
  sm.msg_case = TLCAP__SERVER_MESSAGE__MSG_SEGMENTS;
  sm.segments = &sl;
  sl.target = r->target;
  sl.truncated = trunc != 0;
  sl.n_segments = n;
  sl.segments = sp;
  for (i = 0; i < n; i++) {
    Tlcap__SegmentInfo *x = &si[i];
    tlcap__segment_info__init(x);
    x->seq = v[i].seq;
    x->state = (Tlcap__SegmentInfo__State)v[i].state;
    x->path = v[i].path;
    x->bytes = v[i].bytes;
    x->records = v[i].records;
    x->items = v[i].items;
    x->first_time = v[i].first_time;
    x->last_time = v[i].last_time;
    x->min_time = v[i].min_time;
    x->max_time = v[i].max_time;
    x->opened_unix_ns = v[i].opened_wall_ns;
    x->closed_unix_ns = v[i].closed_wall_ns;
    x->reason = (uint32_t)v[i].reason;
    x->recovered = v[i].recovered != 0;
    x->gaps = v[i].gaps;
    sp[i] = x;
  }
  sub_send(s, &sm);
  tlc_free(si);
  tlc_free(sp);
  tlc_free(v);
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

/* Whether a string field of message `d` in the encoded bytes p[0..n) (sub-messages included, at
 * most 16 deep) holds a NUL byte. protobuf-c hands strings over NUL-terminated, so such a string
 * would reach the handlers cut at the NUL: "t1\0x" acting on target t1 (issue 16). Only walks
 * what unpack accepted; anything it cannot follow is left to unpack (returns 0). */
static int pb_string_has_nul(const ProtobufCMessageDescriptor *d, const uint8_t *p, size_t n,
                             int depth) {
  size_t i = 0;
  if (depth > 16)
    return 0;
  while (i < n) {
    uint64_t key, len;
    int k = tlc_frame_varint(p + i, n - i, &key);
    const ProtobufCFieldDescriptor *f;
    if (k <= 0)
      return 0;
    i += (size_t)k;
    switch (key & 7) {
    case 0:
      if ((k = tlc_frame_varint(p + i, n - i, &len)) <= 0)
        return 0;
      i += (size_t)k;
      break;
    case 1:
      i += 8;
      break;
    case 5:
      i += 4;
      break;
    case 2:
      if ((k = tlc_frame_varint(p + i, n - i, &len)) <= 0 || len > n - i - (size_t)k)
        return 0;
      i += (size_t)k;
      f = key >> 3 <= UINT32_MAX ? protobuf_c_message_descriptor_get_field(d, (unsigned)(key >> 3))
                                 : NULL;
      if (f != NULL && f->type == PROTOBUF_C_TYPE_STRING && memchr(p + i, 0, (size_t)len) != NULL)
        return 1;
      if (f != NULL && f->type == PROTOBUF_C_TYPE_MESSAGE &&
          pb_string_has_nul(f->descriptor, p + i, (size_t)len, depth + 1))
        return 1;
      i += (size_t)len;
      break;
    default:
      return 0;
    }
  }
  return 0;
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
  if (pb_string_has_nul(&tlcap__client_message__descriptor, frame, len, 0)) {
    ps->st.bad_strings++;
    send_error(s, req, TLCAP__ERROR_CODE__ERR_BAD_REQUEST,
               "a string field holds a NUL byte (names and text never do)", 0, 0);
    goto done;
  }
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
  case TLCAP__CLIENT_MESSAGE__MSG_LIST_SEGMENTS:
    on_list_segments(s, req, cm->list_segments);
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

static void hello_timeout_cb(uv_timer_t *t);

/* TLS: a handshake that failed (not TLS, no common version, garbage) or stalled. The peer is
 * told nothing (not even the alert OpenSSL prepared: a plain-text client must not get bytes
 * that look like an answer); the connection is closed. */
static void tls_drop(tlc__ps_sub_t *s, const char *why) {
  tlc_pubsub_t *ps = s->ps;
  if (s->closing)
    return;
  ps->st.closed_tls++;
  logf_(ps, TLC_PS_LOG_NOTICE, "sub#%llu %s: closing: TLS handshake: %s", (unsigned long long)s->id,
        s->peer, why);
  uv_read_stop(&s->h.stream);
  sub_close_soon(s);
}

static void tls_timeout_cb(uv_timer_t *t) {
  tlc__ps_sub_t *s = t->data;
  char why[64];
  snprintf(why, sizeof(why), "not complete after %llu ms",
           (unsigned long long)s->ps->o.tls_handshake_ms);
  tls_drop(s, why);
}

/* TLS: received ciphertext -> handshake, then decrypted bytes into sub_input; whatever the
 * session has to send (handshake, alerts) goes out through sub_kick. */
static void tls_input(tlc__ps_sub_t *s, const uint8_t *p, size_t n) {
  tlc_pubsub_t *ps = s->ps;
  char why[160];
  int r;
  uv_mutex_lock(&s->tls_mu); /* the serving thread may be encrypting for this session */
  r = tlc_tls_conn_feed(s->tls, p, n);
  uv_mutex_unlock(&s->tls_mu);
  if (r < 0) {
    tls_drop(s, "out of memory");
    return;
  }
  if (!s->tls_ready) {
    uv_mutex_lock(&s->tls_mu);
    r = tlc_tls_conn_handshake(s->tls, why, sizeof(why));
    uv_mutex_unlock(&s->tls_mu);
    if (r < 0) {
      tls_drop(s, why);
      return;
    }
    if (r == 0) {
      sub_kick(s);
      return;
    }
    s->tls_ready = 1;
    logf_(ps, TLC_PS_LOG_INFO, "sub#%llu %s: %s", (unsigned long long)s->id, s->peer,
          tlc_tls_conn_version(s->tls));
    if (!s->closing) {
      /* the handshake deadline is over; Hello's starts */
      uv_timer_stop(&s->timer);
      uv_timer_start(&s->timer, hello_timeout_cb, ps->o.hello_timeout_ms, 0);
    }
  }
  while (!s->closing) {
    int k;
    uv_mutex_lock(&s->tls_mu);
    k = tlc_tls_conn_read(s->tls, ps->tbuf, sizeof(ps->tbuf));
    uv_mutex_unlock(&s->tls_mu); /* not held in sub_input: its replies take it again */
    if (k == 0)
      break;
    if (k < 0) {
      ps->st.closed_peer++;
      logf_(ps, TLC_PS_LOG_INFO, "sub#%llu %s: disconnected (TLS session ended)",
            (unsigned long long)s->id, s->peer);
      uv_read_stop(&s->h.stream);
      sub_close_soon(s);
      return;
    }
    sub_input(s, ps->tbuf, (size_t)k);
  }
  sub_kick(s);
}

static void read_cb(uv_stream_t *st, ssize_t n, const uv_buf_t *buf) {
  tlc__ps_sub_t *s = st->data;
  tlc_pubsub_t *ps = s->ps;
  if (buf->base == ps->rbuf)
    ps->rbuf_busy = 0;
  if (n > 0) {
    if (s->tls != NULL)
      tls_input(s, (const uint8_t *)buf->base, (size_t)n);
    else
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
      snprintf(s->peer_ip, sizeof(s->peer_ip), "unix");
      return;
    }
#endif
    snprintf(s->peer, sizeof(s->peer), "unix");
    snprintf(s->peer_ip, sizeof(s->peer_ip), "unix");
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
    snprintf(s->peer_ip, sizeof(s->peer_ip), "%s", ip);
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
  writer_start(ps);
  reject = ps->nsubs - ps->nrejecting >= ps->o.max_subscribers;
  s = (reject && ps->nrejecting >= MAX_REJECTING) ? NULL : sub_alloc(ps);
  if (s != NULL && l->tls && ps->o.tls != NULL) {
    if ((s->tls = tlc_tls_conn_new(ps->o.tls)) != NULL && uv_mutex_init(&s->tls_mu) != 0) {
      tlc_tls_conn_free(s->tls);
      s->tls = NULL;
    }
    if (s->tls == NULL) {
      sub_free(s);
      s = NULL;
    }
  }
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
    /* TLS: the error can only be told once the handshake is done (within the grace time); the
     * handshake's input is read, nothing else (sub_input ignores a closing subscriber). */
    if (s->tls != NULL && uv_read_start(&s->h.stream, alloc_cb, read_cb) < 0)
      sub_close_soon(s);
    return;
  }
  logf_(ps, TLC_PS_LOG_INFO, "sub#%llu %s: connected%s", (unsigned long long)s->id, s->peer,
        s->tls != NULL ? " (TLS)" : "");
  if (s->tls != NULL)
    uv_timer_start(&s->timer, tls_timeout_cb,
                   ps->o.tls_handshake_ms < ps->o.hello_timeout_ms ? ps->o.tls_handshake_ms
                                                                   : ps->o.hello_timeout_ms,
                   0);
  else
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
  o->tls_handshake_ms = 5000;
  o->unix_mode = 0660;
  o->daemon_version = "tlcapd " TLC_VERSION;
}

int tlc_pubsub_new(uv_loop_t *loop, const tlc_pubsub_opts_t *o, const tlc_ps_provider_t *p,
                   tlc_pubsub_t **out) {
  tlc_pubsub_t *ps;
  tlc_pubsub_opts_t d;
  size_t i;
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
  DEF(tls_handshake_ms);
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
  tlc_pb_arena_init(&ps->enc, 0);
  for (i = 0; i < SNAP_CACHE; i++)
    tlc_table_init(&ps->cache[i].t);
  uv_timer_init(loop, &ps->house);
  ps->house.data = ps;
  uv_timer_init(loop, &ps->tick_timer);
  ps->tick_timer.data = ps;
  ps->open_handles = 2;
  ps->epoch_ns = uv_hrtime();
  ps->next_due_ns = UINT64_MAX;
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
  if (!is_loopback((struct sockaddr *)&ss) && ps->token_len == 0 && ps->o.auth == NULL) {
    logf_(ps, TLC_PS_LOG_ERR,
          "refusing to serve subscribers on non-loopback %s:%d without a token "
          "(set token_file, or use 127.0.0.1 or a Unix socket)",
          host, port);
    return TLC_EINVAL;
  }
  if (!is_loopback((struct sockaddr *)&ss) && ps->o.tls == NULL)
    logf_(ps, TLC_PS_LOG_WARN,
          "subscribers on non-loopback %s:%d without TLS: the token and the statistics cross "
          "the network in clear (set tls_cert and tls_key)",
          host, port);
  if ((l = listener_new(ps, 0)) == NULL)
    return TLC_ENOMEM;
  l->tls = ps->o.tls != NULL;
  if ((r = uv_tcp_bind(&l->h.tcp, (struct sockaddr *)&ss, 0)) < 0 ||
      (r = uv_listen(&l->h.stream, 128, on_connection)) < 0) {
    logf_(ps, TLC_PS_LOG_ERR, "listen on %s:%d: %s", host, port, uv_strerror(r));
    listener_drop(ps, l);
    return r;
  }
  {
    int len = sizeof(ss), bound = port;
    if (uv_tcp_getsockname(&l->h.tcp, (struct sockaddr *)&ss, &len) == 0)
      bound = ntohs(ss.ss_family == AF_INET ? ((struct sockaddr_in *)&ss)->sin_port
                                            : ((struct sockaddr_in6 *)&ss)->sin6_port);
    if (bound_port != NULL)
      *bound_port = bound;
    /* the one line saying so (the daemon's wiring does not repeat it), with the bound port */
    logf_(ps, TLC_PS_LOG_INFO, "serving subscribers on %s:%d%s", host, bound,
          l->tls ? " (TLS)" : "");
  }
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
    if (!is_loopback((struct sockaddr *)&ss) && ps->token_len == 0 && ps->o.auth == NULL) {
      logf_(ps, TLC_PS_LOG_ERR, "refusing a non-loopback subscriber socket without a token");
      return TLC_EINVAL;
    }
    if (!is_loopback((struct sockaddr *)&ss) && ps->o.tls == NULL)
      logf_(ps, TLC_PS_LOG_WARN, "a non-loopback subscriber socket without TLS");
  }
  if ((l = listener_new(ps, is_unix)) == NULL)
    return TLC_ENOMEM;
  l->tls = !is_unix && ps->o.tls != NULL;
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
  size_t i;
  if (--ps->open_handles > 0 || !ps->closing)
    return;
  cb = ps->close_cb;
  ud = ps->close_ud;
  tlc_table_fini(&ps->scratch);
  tlc_pb_arena_fini(&ps->enc);
  for (i = 0; i < SNAP_CACHE; i++)
    tlc_table_fini(&ps->cache[i].t);
  while (ps->feeds != NULL) { /* every subscription is gone: only released ones, if any */
    feed_t *f = ps->feeds;
    feed_unlink(f);
    feed_free(f);
  }
  tlc_free(ps->token);
  tlc_free(ps->batch_seq);
  tlc_free(ps->batch_ev);
  tlc_free(ps->evsubs);
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

/* Tries once to write "the daemon is stopping" to a subscriber (never waits). */
static void shutdown_note(tlc__ps_sub_t *s) {
  msg_t *m;
  if (s->tls != NULL) {
    /* TLS: encrypted after whatever the session already produced, sent in one try. */
    if (s->tls_ready && s->h.stream.write_queue_size == 0 &&
        (m = error_encode(s->ps, 0, TLCAP__ERROR_CODE__ERR_SHUTDOWN, "the daemon is stopping", 1,
                          0)) != NULL) {
      int w;
      uv_mutex_lock(&s->tls_mu);
      w = tlc_tls_conn_write(s->tls, m->data, m->len);
      uv_mutex_unlock(&s->tls_mu);
      if (w == 0 && tls_collect(s) == 0 && s->tout_len > 0) {
        /* Records carry sequence numbers: those a cancelled job made and did not send go
         * first (all of them or none: the job is not partly written here). */
        uv_buf_t b[2];
        unsigned nb = 0;
        if (s->job.tls != NULL && s->job.encrypted && s->job.cur < s->job.nbufs)
          b[nb++] = uv_buf_init((char *)s->job.cbuf, (unsigned)s->job.clen);
        b[nb++] = uv_buf_init((char *)s->tout, (unsigned)s->tout_len);
        (void)uv_try_write(&s->h.stream, b, nb);
      }
      s->tout_len = 0;
      msg_unref(m);
    }
    return;
  }
  /* Safe to append only when libuv holds no unwritten bytes of an earlier message (a write
   * whose bytes all went out may still await its callback). */
  if (s->h.stream.write_queue_size == 0 &&
      (m = error_encode(s->ps, 0, TLCAP__ERROR_CODE__ERR_SHUTDOWN, "the daemon is stopping", 1,
                        0)) != NULL) {
    uv_buf_t b = uv_buf_init((char *)m->data, (unsigned)m->len);
    (void)uv_try_write(&s->h.stream, &b, 1);
    msg_unref(m);
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
      /* One best-effort attempt to say why; never wait for a subscriber on the way out. With
       * a job at the serving thread, when the job comes back (between two messages). */
      if (s->in_writer)
        s->shutdown_note = 1;
      else
        shutdown_note(s);
    }
    sub_close_now(s); /* unlinks s (detached ones are only unlinked: their owner frees them) */
  }
  uv_timer_stop(&ps->house);
  uv_close((uv_handle_t *)&ps->house, house_closed_cb);
  uv_timer_stop(&ps->tick_timer);
  uv_close((uv_handle_t *)&ps->tick_timer, house_closed_cb);
  if (ps->jobs_inflight == 0)
    writer_stop(ps); /* else when the cancelled jobs come back (writer_done_cb) */
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

/* Whether any of s's event subscriptions wants `target`'s batches. */
static int sub_wants_events(const tlc__ps_sub_t *s, const char *target) {
  size_t j;
  for (j = 0; j < s->nsubs; j++)
    if (s->subs[j]->events && subn_wants_target(s->subs[j], target))
      return 1;
  return 0;
}

/* Remembers the per-target batch counters as they are now (the start of s's stall). Without
 * memory for new targets' entries those count from 0 at settlement (over-counting drops of
 * targets created meanwhile, never under-counting). */
static void ev_mark(tlc__ps_sub_t *s) {
  tlc_pubsub_t *ps = s->ps;
  size_t i;
  if (s->nstall < ps->nbatch_seq) {
    uint64_t *b = tlc_realloc(s->stall_b, ps->nbatch_seq * sizeof(*b));
    uint64_t *e = b != NULL ? tlc_realloc(s->stall_e, ps->nbatch_seq * sizeof(*e)) : NULL;
    if (b != NULL)
      s->stall_b = b;
    if (e != NULL) {
      s->stall_e = e;
      s->nstall = ps->nbatch_seq;
    }
  }
  for (i = 0; i < s->nstall && i < ps->nbatch_seq; i++) {
    s->stall_b[i] = ps->batch_seq[i];
    s->stall_e[i] = ps->batch_ev[i];
  }
}

/* Counts, for a stalled subscriber, the batches and events produced since it stalled (or since
 * its last settlement) for the targets it wants as dropped, and restarts the count from now.
 * O(targets); runs when it drains and when its subscriptions change, never per batch. */
static void ev_settle(tlc__ps_sub_t *s) {
  tlc_pubsub_t *ps = s->ps;
  size_t i;
  for (i = 0; i < ps->nbatch_seq; i++) {
    uint64_t b0 = i < s->nstall ? s->stall_b[i] : 0, e0 = i < s->nstall ? s->stall_e[i] : 0;
    uint64_t db = ps->batch_seq[i] - b0, de = ps->batch_ev[i] - e0;
    tlc_ps_target_info_t info;
    if (db == 0)
      continue;
    memset(&info, 0, sizeof(info));
    if (ps->p.info(ps->p.ud, i, &info) != 0 || info.name == NULL || !sub_wants_events(s, info.name))
      continue;
    s->drop_batches += db;
    s->drop_events += de;
    s->drop_total_batches += db;
    s->drop_total_events += de;
    ps->st.batches_dropped += db;
    ps->st.events_dropped += de;
  }
  ev_mark(s);
}

/* The subscriber's ring has room again (its writer took batches): back into the fan-out. */
static void ev_unstall(tlc__ps_sub_t *s) {
  if (!s->ev_stalled)
    return;
  ev_settle(s);
  s->ev_stalled = 0;
  s->ps->evsubs_dirty = 1;
}

/* Queues a shared batch for one subscriber. When its ring is full the batch is dropped and
 * counted, and the subscriber stalls: it leaves the fan-out list, so until it drains it costs
 * the ingest path nothing (its later drops are settled from the per-target counters). */
static void sub_batch(tlc__ps_sub_t *s, msg_t *m) {
  tlc_pubsub_t *ps = s->ps;
  if (s->ring_n >= ps->o.max_batches) {
    s->drop_batches++;
    s->drop_events += m->nevents;
    s->drop_total_batches++;
    s->drop_total_events += m->nevents;
    ps->st.batches_dropped++;
    ps->st.events_dropped += m->nevents;
    s->ev_stalled = 1;
    ev_mark(s); /* from the counters at this batch (counted above) */
    ps->evsubs_dirty = 1;
    return;
  }
  s->ring[(s->ring_head + s->ring_n) % ps->o.max_batches] = msg_ref(m);
  s->ring_n++;
  queued_add(s, m->len);
  if (!limits_check(s))
    sub_kick(s);
}

/* Index of `target` in the provider, growing the per-target batch counters to hold it. 0 or
 * negative (unknown target, no memory). */
static int batch_index(tlc_pubsub_t *ps, const char *target, size_t *idx) {
  if (ps->p.find(ps->p.ud, target, idx) < 0 || *idx > (1u << 24))
    return TLC_ERANGE;
  if (*idx >= ps->nbatch_seq) {
    size_t n = *idx + 1;
    uint64_t *v = tlc_realloc(ps->batch_seq, n * sizeof(*v));
    uint64_t *w;
    if (v == NULL)
      return TLC_ENOMEM;
    ps->batch_seq = v;
    if ((w = tlc_realloc(ps->batch_ev, n * sizeof(*w))) == NULL)
      return TLC_ENOMEM; /* batch_seq grown, nbatch_seq not yet: consistent */
    ps->batch_ev = w;
    memset(v + ps->nbatch_seq, 0, (n - ps->nbatch_seq) * sizeof(*v));
    memset(w + ps->nbatch_seq, 0, (n - ps->nbatch_seq) * sizeof(*w));
    ps->nbatch_seq = n;
  }
  return 0;
}

/* Rebuilds the fan-out list: subscribers that take event batches now. */
static void evsubs_rebuild(tlc_pubsub_t *ps) {
  tlc__ps_sub_t *s;
  size_t n = 0;
  for (s = ps->subs; s != NULL; s = s->next) {
    size_t j;
    if (s->closing || !s->authed || s->ev_stalled)
      continue;
    for (j = 0; j < s->nsubs && !s->subs[j]->events; j++)
      ;
    if (j == s->nsubs)
      continue;
    if (n == ps->capevsubs) {
      tlc__ps_sub_t **v = tlc_grow(ps->evsubs, &ps->capevsubs, n + 1, sizeof(*v), 16);
      if (v == NULL)
        return; /* stays dirty: tried again on the next batch */
      ps->evsubs = v;
    }
    ps->evsubs[n++] = s;
  }
  ps->nevsubs = n;
  ps->evsubs_dirty = 0;
}

void tlc_pubsub_events(tlc_pubsub_t *ps, const char *target, const tlc_event_t *ev, size_t n) {
  size_t off, idx;
  if (ps->closing || ps->n_event_subns == 0 || n == 0 || target == NULL)
    return;
  if (batch_index(ps, target, &idx) < 0)
    return;
  if (ps->evsubs_dirty)
    evsubs_rebuild(ps);
  for (off = 0; off < n; off += ps->o.max_batch_events) {
    size_t k = n - off < ps->o.max_batch_events ? n - off : ps->o.max_batch_events, i, si;
    msg_t *m = NULL;
    uint64_t seq = ++ps->batch_seq[idx];
    ps->batch_ev[idx] += k;
    /* stalled subscribers are not in evsubs: they cost nothing here (ev_settle counts their
     * drops from batch_seq / batch_ev when they drain) */
    for (si = 0; si < ps->nevsubs; si++) {
      tlc__ps_sub_t *s = ps->evsubs[si];
      if (s->closing || s->ev_stalled || !sub_wants_events(s, target))
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
        b.seq = seq;
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
