/* pubsub-int.h - pubsub internals shared by its files (pubsub.c, feed.c, request.c, queue.c,
 * writer.c, range.c) and with its tests and fuzzers only ("private to pubsub", as libuv's
 * uv-common.h is to libuv). Not a contract for the rest of the daemon. The design is described in
 * pubsub.c.
 */
#ifndef TLC_PUBSUB_INT_H
#define TLC_PUBSUB_INT_H

#include "auth/peers.h"
#include "pubsub/pubsub.h"

#include "formats/when.h"
#include "proto/convert.h"
#include "proto/frame.h"

#include <poll.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

typedef struct tlc__ps_sub tlc__ps_sub_t;

/* ---- the module's state (see the design note in pubsub.c) ---- */

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
  tlc_cursor_t cur; /* the engine's rows merged so far: cur.seq the last tick's engine seq
                       (valid when cur.have), cur.gen the provider's gen of the target */
  uint8_t connected;
  int64_t unix_ms;
  tlc_table_t hdr; /* the last tick's header fields (contexts, counters, times); no rows */
  msg_t *full;     /* full snapshot at seq, built when a subscriber joins */
  msg_t *catchup;  /* delta catchup_base -> seq, built when a slow subscriber catches up */
  uint64_t catchup_base;
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
    uint32_t req;
    size_t max_rows;
    tlc_cursor_t cur; /* the parts sent so far */
    spec_t spec;      /* options only */
    char *target;
  } gs;
  /* range statistics (GetStats.range, Subscribe.history; range.c, docs/protocol.md "History"):
   * one query at a time per connection, computed off the loop by the provider's history hook */
  struct {
    void *job;            /* the running query, NULL when none */
    struct hist_ans *ans; /* its answer, encoded off the loop (range.c; the query's until done) */
    uint32_t req;         /* the request it answers */
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
  size_t peer_slot; /* its count in ps->peers (TLC_PEERS_NONE: not counted), until unlinked */
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
  tlc_peers_t peers; /* subscribers per peer address (opts.max_per_address) */
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

/* Row filter for one build: the handles the spec selects (explicit ones, and those whose
 * mapping name matches an area pattern), plus the hex-handle match done per row. */
typedef struct keep_ctx {
  const spec_t *spec;
  uint32_t *named; /* sorted handles whose name matched */
  size_t nnamed;
} keep_ctx_t;

/* A part of a GetStats reply in parts: the areas with lo <= handle < hi, part number `no`,
 * `more` parts after it, `base` the previous part's seq; `seq` gets this part's. */
typedef struct stats_part {
  uint64_t lo, hi, base, seq;
  uint32_t no;
  int more;
} stats_part_t;

/* pubsub.c */
void tlc__ps_logf_(tlc_pubsub_t *ps, int level, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
int64_t tlc__ps_unix_ms(void);
uint64_t tlc__ps_now_ms(tlc_pubsub_t *ps);
void tlc__ps_msg_unref(msg_t *m);
msg_t *tlc__ps_msg_ref(msg_t *m);
msg_t *tlc__ps_msg_encode(tlc_pubsub_t *ps, const Tlcap__ServerMessage *sm, int kind, int *too_big);
/* The same with the cap given: any thread (range.c encodes range answers on the pool). */
msg_t *tlc__ps_msg_pack(size_t max_message, const Tlcap__ServerMessage *sm, int kind, int *too_big);
void tlc__ps_sub_free(tlc__ps_sub_t *s);
void tlc__ps_sub_unlink(tlc__ps_sub_t *s);
void tlc__ps_sub_closed_cb(uv_handle_t *h);
void tlc__ps_sub_close_now(tlc__ps_sub_t *s);
void tlc__ps_sub_close_soon(tlc__ps_sub_t *s);
void tlc__ps_sub_fail(tlc__ps_sub_t *s, int code, const char *text, uint64_t *counter);
tlc__ps_sub_t *tlc__ps_sub_alloc(tlc_pubsub_t *ps);
void tlc__ps_sub_link(tlc_pubsub_t *ps, tlc__ps_sub_t *s);
void tlc__ps_handle_closed(tlc_pubsub_t *ps);
void tlc__ps_house_cb(uv_timer_t *t);
void tlc__ps_shutdown_note(tlc__ps_sub_t *s);

/* feed.c */
void tlc__ps_snap_opts(const spec_t *spec, uint64_t since, tlc_snap_opts_t *so);
int tlc__ps_stats_build(tlc_pubsub_t *ps, const spec_t *spec, size_t idx, uint32_t req,
                        stats_part_t *pt, msg_t **out);
void tlc__ps_feed_free(feed_t *f);
void tlc__ps_feed_unlink(feed_t *f);
int tlc__ps_feed_get(tlc_pubsub_t *ps, spec_t *spec, feed_t **out);
int tlc__ps_subn_slots(subn_t *sn, size_t n);
int tlc__ps_hdr_copy(tlc_table_t *h, const tlc_table_t *t);
/* tlc__ps_mirror_msg's modes: this tick's rows, rows changed since a seq, all. */
enum { MM_TICK, MM_SINCE, MM_FULL };
int tlc__ps_mirror_msg(feed_t *f, size_t idx, int mode, uint64_t base, msg_t **out);
void tlc__ps_feed_target_renew(feed_t *f, size_t idx, uint64_t gen);
void tlc__ps_feed_tick(feed_t *f);
void tlc__ps_pass_end(tlc_pubsub_t *ps);
void tlc__ps_subn_free(tlc__ps_sub_t *s, subn_t *sn);
void tlc__ps_sub_unsubscribe_all(tlc__ps_sub_t *s);
/* request.c: links a subscription to its feed and marks the targets whose full snapshot it
 * needs; returns the feed to tick now for it, or NULL. */
feed_t *tlc__ps_subn_attach(tlc__ps_sub_t *s, subn_t *sn);

/* range.c: range statistics (GetStats.range, Subscribe.history) off the loop */
void tlc__ps_hist_stop(tlc__ps_sub_t *s);
void tlc__ps_hist_get_stats(tlc__ps_sub_t *s, uint32_t req, const Tlcap__GetStats *g);
int tlc__ps_hist_subscribe_check(tlc__ps_sub_t *s, uint32_t req, const Tlcap__Subscribe *r);
void tlc__ps_hist_subscribe_start(tlc__ps_sub_t *s, uint32_t req, const Tlcap__Subscribe *r,
                                  subn_t *sn, spec_t *fspec);

/* request.c */
void tlc__ps_spec_free(spec_t *s);
int tlc__ps_spec_target(const spec_t *s, const char *name);
int tlc__ps_keep_row(void *ud, const tlc_stat_t *r);
int tlc__ps_keep_init(keep_ctx_t *k, const spec_t *s, const tlc_mapping_t *m);
void tlc__ps_gs_next(tlc__ps_sub_t *s);
void tlc__ps_sub_input(tlc__ps_sub_t *s, const uint8_t *p, size_t n);

/* queue.c */
void tlc__ps_queued_add(tlc__ps_sub_t *s, size_t n);
void tlc__ps_queued_sub(tlc__ps_sub_t *s, size_t n);
int tlc__ps_limits_check(tlc__ps_sub_t *s);
void tlc__ps_sub_ctl(tlc__ps_sub_t *s, msg_t *m);
msg_t *tlc__ps_error_encode(tlc_pubsub_t *ps, uint32_t req, int code, const char *text, int fatal,
                            int detail);
void tlc__ps_sub_send(tlc__ps_sub_t *s, Tlcap__ServerMessage *sm);
void tlc__ps_send_error(tlc__ps_sub_t *s, uint32_t req, int code, const char *text, int fatal,
                        int detail);
void tlc__ps_sub_drop_queued(tlc__ps_sub_t *s);
int tlc__ps_take(tlc__ps_sub_t *s, msg_t *m, size_t *bytes);
void tlc__ps_sub_kick(tlc__ps_sub_t *s);
int tlc__ps_tls_collect(tlc__ps_sub_t *s);
void tlc__ps_sub_kick_once(tlc__ps_sub_t *s);
void tlc__ps_write_done(tlc__ps_sub_t *s, int status);
void tlc__ps_ev_settle(tlc__ps_sub_t *s);

/* writer.c */
int tlc__ps_job_encrypt(wjob_t *j);
void tlc__ps_writer_post(tlc_pubsub_t *ps, wjob_t *j);
void tlc__ps_writer_cancel(tlc_pubsub_t *ps, wjob_t *j);
void tlc__ps_writer_done_cb(uv_async_t *a);
void tlc__ps_writer_stop(tlc_pubsub_t *ps);
void tlc__ps_writer_start(tlc_pubsub_t *ps);

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
