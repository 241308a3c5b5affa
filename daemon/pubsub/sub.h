/* sub.h - a subscriber: one connection (sub.c), its queues (control messages, the
 * event batch ring, a snapshot slot per subscription and target), its TLS session, its writes
 * (on the serving thread, writer.h, or with uv_write) and the event fan-out. Everything here is
 * the loop thread's, except the TLS session (tls_mu: the serving thread encrypts under it) and
 * the write job `job` while the serving thread holds it (in_writer). sub calls nothing above
 * it: what it needs of requests, feeds and the server goes through tlc_pubsub.up
 * (pubsub-int.h). A subscription (subn_t) is made by request.c and attached to a feed; its
 * slots are the sub's queue, filled by the feed's ticks (feed.c) and emptied when writing. The
 * `gs` and `hq` members are request.c's and range.c's per-connection state.
 */
#ifndef TLC_PUBSUB_SUB_H
#define TLC_PUBSUB_SUB_H

#include "auth/peers.h"
#include "auth/tls.h"
#include "base/list.h"
#include "pubsub/msg.h"
#include "pubsub/spec.h"
#include "pubsub/writer.h"

#include "formats/when.h"

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

struct feed;

typedef struct slot {
  msg_t *pending;    /* a shared snapshot waiting for the socket */
  uint64_t sent_seq; /* seq of the last snapshot committed to the socket */
  uint8_t sent_any;
  uint8_t catchup; /* build a private snapshot since sent_seq when writing */
} slot_t;

typedef struct subn {
  uint32_t id;
  struct tlc__ps_sub *sub;
  struct feed *feed; /* NULL for events-only subscriptions */
  spec_t *spec;      /* target patterns for events and target events */
  uint8_t events;
  slot_t *slots; /* per target index */
  size_t nslots;
  LIST_ENTRY(subn) flink; /* in feed->subs */
} subn_t;

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
  STAILQ_HEAD(, ctl_node) ctl; /* control messages, oldest first: never dropped */
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
   * one query at a time per connection, computed off the loop by the view's history hook */
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
  /* a trend or diff (request.c; docs/rollups.md): one at a time per connection, built off the
   * loop by the view's rollup hook */
  struct {
    void *job; /* the running query, NULL when none */
    uint32_t req;
    char target[129];
  } rq;
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
  LIST_ENTRY(tlc__ps_sub) link; /* in tlc_pubsub.sb.subs while linked (link.le_prev != NULL) */
};

/* The subscriber layer's share of the server (tlc_pubsub.sb). Loop thread, except that the
 * serving thread's own state is in *wr (writer.h). */
typedef struct tlc__ps_subs {
  LIST_HEAD(tlc__ps_sub_list, tlc__ps_sub) subs; /* every linked connection */
  size_t nsubs, nrejecting;
  tlc_peers_t peers; /* subscribers per peer address (opts.max_per_address) */
  uint64_t next_sub_id, next_tev_seq;
  size_t n_event_subns; /* subscriptions with events on: nothing to do when 0 */
  uint64_t *batch_seq;  /* per target index: batches produced for event subscribers */
  uint64_t *batch_ev;   /* per target index: their events */
  size_t nbatch_seq;
  /* subscribers that take event batches now (authed, an events subscription, not stalled,
   * not closing): rebuilt from the subscriber list when evsubs_dirty */
  struct tlc__ps_sub **evsubs;
  size_t nevsubs, capevsubs;
  int evsubs_dirty;
  char rbuf[READ_BUF];
  int rbuf_busy;
  uint8_t tbuf[16384]; /* decrypted bytes of one TLS record, on their way to the input hook */
  /* the serving thread (NULL: writes with uv_write on the loop thread) */
  writer_t *wr;
  size_t jobs_inflight;
  int writer_failed;
} tlc__ps_subs_t;

/* a connection's life */
tlc__ps_sub_t *tlc__ps_sub_alloc(tlc_pubsub_t *ps);
void tlc__ps_sub_link(tlc_pubsub_t *ps, tlc__ps_sub_t *s);
void tlc__ps_sub_free(tlc__ps_sub_t *s);
void tlc__ps_sub_unlink(tlc__ps_sub_t *s);
void tlc__ps_sub_closed_cb(uv_handle_t *h);
void tlc__ps_sub_close_now(tlc__ps_sub_t *s);
void tlc__ps_sub_close_soon(tlc__ps_sub_t *s);
void tlc__ps_sub_fail(tlc__ps_sub_t *s, int code, const char *text, uint64_t *counter);
int tlc__ps_sub_read_start(tlc__ps_sub_t *s);
void tlc__ps_sub_deadline_start(tlc__ps_sub_t *s);
void tlc__ps_shutdown_note(tlc__ps_sub_t *s);

/* queues and writes */
void tlc__ps_queued_add(tlc__ps_sub_t *s, size_t n);
void tlc__ps_queued_sub(tlc__ps_sub_t *s, size_t n);
int tlc__ps_limits_check(tlc__ps_sub_t *s);
void tlc__ps_sub_ctl(tlc__ps_sub_t *s, msg_t *m);
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

#endif
