/* fuzz_ingest.c - libFuzzer harness for a whole TCP ingest session of tlcapd (RELIABILITY
 * T17(b)): the fuzz input is written into one end of a socketpair, the other end is adopted by
 * the daemon's own connection code (tlc_listen_take_fd, daemon/src_tcp.c: the path an accepted
 * connection takes - preamble, target naming, decoder, evlog mapping, statistics engine,
 * counters, deadlines, half-close answer, shutdown drain), and the loop is run with
 * uv_run(UV_RUN_NOWAIT) until everything is drained and closed. Each input builds and frees a
 * whole daemon context of its own (loop, configuration, target registry), so nothing carries
 * over from one input to the next.
 *
 * Input: byte 0 = mode, byte 1 = seed, the rest = the stream (for two connections: a 16-bit
 * little-endian length of the first stream, then the two streams). Mode bits:
 *   0-1  the listener's format: 0 bin10, 1 bin11, 2 and 3 evlog (a preamble may override it)
 *   2    write in random chunks (1..300 bytes, or 1..7), a loop turn after each, instead of
 *        as much as the socket takes
 *   3    a storage barrier as wiring.c installs it: a half-close is answered (the connection
 *        closed) only once the harness runs the barrier's callback a loop turn later
 *   4    end by the daemon's shutdown path (tlc__conns_drain_close) instead of the peer's EOF
 *   5    two connections at once on the same listener ("#2" naming, format clashes, reuse)
 *   6    the partial-record deadline fires half-way (tlc__conn_sweep with a late clock)
 *   7    a small read buffer (1..64 bytes) instead of 64 KiB, so the daemon reads in pieces
 *
 * Checked (abort on violation), after every input:
 *  - no crash, UB, leak or hang (ASan/UBSan/LSan; a session that does not finish within
 *    SPIN_MAX loop turns aborts); the loop closes (uv_loop_close == 0) and the bytes
 *    allocated through tlc_malloc (which libuv uses too) return to zero;
 *  - no single allocation larger than MAX_BLOCK + 256 bytes per input byte + 2 MiB: an
 *    announced length (an evlog block size) is never allocated before it is checked;
 *  - bytes consumed == bytes fed: every byte a target's decoder took was announced in stream
 *    order (bytes_cb offsets contiguous); when no connection was refused or closed early, the
 *    decoders took exactly the bytes written less the preamble lines; one preamble error per
 *    stream whose first line is a bad preamble;
 *  - the counters agree: per target, records == events decoded, bin1x 24 * records +
 *    truncated == bytes (no decode error), one gap per connection, every target detached;
 *  - the statistics invariants: a snapshot succeeds with the engine's event count, every row's
 *    context exists, durations are never negative, min <= quantiles <= max.
 *
 * The wire formats (bin10, bin11, evlog, the preamble) carry no checksums, so there is nothing
 * for FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION to bypass here; in formats/ that macro turns on
 * the decoders' internal invariant checks (bin1x.c), which this harness thereby exercises.
 */
#include "base/alloc.h"
#include "base/err.h"
#include "base/log.h"
#include "config/config.h"
#include "engine/engine.h"
#include "formats/preamble.h"
#include "ingest/sources.h"
#include "ingest/target.h"
#include "testalloc.h"

#include <uv.h>

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(x)                                                                                   \
  do {                                                                                             \
    if (!(x))                                                                                      \
      abort();                                                                                     \
  } while (0)

#define SPIN_MAX  (1u << 20)   /* loop turns before a session counts as hung */
#define MAX_BLOCK (256u << 10) /* the daemon's max_block here (evlog carry cap) */
#define NFEED     2
#define NPEND     4  /* barriers waiting at once; beyond it the barrier fails (close at once) */
#define NTRACK    16 /* targets tracked (at most one per connection, and reconnects reuse) */

typedef struct feed {
  int fd; /* the harness's end of the socketpair, -1 once closed */
  const uint8_t *p;
  size_t len, off; /* the stream and the bytes written so far */
  int dead;        /* the daemon closed its end: writing stopped */
  int pre_bad;     /* the stream starts with a bad preamble (the parser's verdict) */
  size_t pre_len;  /* length of its valid preamble line, else 0 */
} feed_t;

typedef struct track {
  const tlc_target_t *t;
  uint64_t bytes, decoded, events, connected, disconnected;
} track_t;

typedef struct pend {
  void (*cb)(void *);
  void *ud;
} pend_t;

static struct {
  pend_t pend[NPEND];
  size_t npend;
  track_t tr[NTRACK];
  size_t ntr;
  uint64_t bytes, events;
} S;

static uint32_t rng_state;

static uint32_t rng(void) {
  rng_state = rng_state * 1103515245u + 12345u;
  return rng_state >> 16;
}

static track_t *track(const tlc_target_t *t) {
  for (size_t i = 0; i < S.ntr; i++)
    if (S.tr[i].t == t)
      return &S.tr[i];
  CHECK(S.ntr < NTRACK);
  S.tr[S.ntr].t = t;
  return &S.tr[S.ntr++];
}

/* ---- observers: what the storage and pubsub observers would see ---- */

static void obs_event(void *ud, const tlc_target_t *t, int kind, const char *detail) {
  track_t *k = track(t);
  (void)ud;
  (void)detail;
  if (kind == TLC_TEV_CONNECTED) {
    CHECK(t->connected && k->connected == k->disconnected);
    k->connected++;
  } else if (kind == TLC_TEV_DISCONNECTED) {
    CHECK(!t->connected && k->connected == k->disconnected + 1);
    k->disconnected++;
  }
}

static void obs_bytes(void *ud, const tlc_target_t *t, const uint8_t *buf, size_t len,
                      uint64_t offset) {
  track_t *k = track(t);
  (void)ud;
  (void)buf;
  CHECK(t->connected && len > 0);
  CHECK(offset + len == t->pipe.dec.pos); /* the decoder took exactly these, in stream order */
  k->bytes += len;
  S.bytes += len;
}

static void obs_decoded(void *ud, const tlc_target_t *t, const tlc_event_t *ev, size_t n) {
  track_t *k = track(t);
  (void)ud;
  CHECK(n > 0 && n <= TLC_TARGET_BATCH);
  for (size_t i = 0; i < n; i++) {
    CHECK(ev[i].offset < t->pipe.dec.pos);
    CHECK(i == 0 || ev[i].offset > ev[i - 1].offset);
    if (t->format != TLC_FMT_EVLOG)
      CHECK(ev[i].type <= TLC_EV_WRITE && (ev[i].handle >> 28) <= TLC_AREA_AUXSTATE);
  }
  k->decoded += n;
}

static void obs_batch(void *ud, const tlc_target_t *t, const tlc_event_t *ev, size_t n) {
  (void)ud;
  (void)ev;
  track(t)->events += n;
  S.events += n;
}

/* ---- the storage barrier, as wiring.c provides it (answered a loop turn later) ---- */

static int barrier(void *ud, void (*cb)(void *cb_ud), void *cb_ud) {
  (void)ud;
  if (S.npend == NPEND)
    return TLC_ENOMEM; /* the daemon then closes at once: that path is covered too */
  S.pend[S.npend].cb = cb;
  S.pend[S.npend].ud = cb_ud;
  S.npend++;
  return 0;
}

static void run_barriers(void) {
  pend_t p[NPEND];
  size_t n = S.npend;
  memcpy(p, S.pend, sizeof(p));
  S.npend = 0;
  for (size_t i = 0; i < n; i++)
    p[i].cb(p[i].ud);
}

/* One loop turn: barriers queued during the last one are answered, then the loop runs once.
 * Returns non-zero while anything is left to do. */
static int turn(tlc_ingest_t *d, unsigned *spins) {
  run_barriers();
  uv_run(d->loop, UV_RUN_NOWAIT);
  CHECK(++*spins < SPIN_MAX);
  return uv_loop_alive(d->loop) || S.npend > 0 || !LIST_EMPTY(&d->conns);
}

/* Writes what the socket takes of a feed (a chunk of it in chunked mode). */
static void write_some(feed_t *f, int chunked) {
  size_t n = f->len - f->off;
  ssize_t w;
  if (f->dead || n == 0)
    return;
  if (chunked) {
    size_t c = 1 + rng() % ((rng() & 1) ? 7 : 300);
    if (c < n)
      n = c;
  }
  w = send(f->fd, f->p + f->off, n, MSG_NOSIGNAL | MSG_DONTWAIT);
  if (w > 0)
    f->off += (size_t)w;
  else if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
    f->dead = 1; /* EPIPE/ECONNRESET: the daemon closed the connection */
}

static void check_stats(const tlc_target_t *t) {
  tlc_table_t tab;
  const tlc_counters_t *ec = tlc_engine_counters(t->pipe.engine);
  tlc_table_init(&tab);
  CHECK(tlc_target_snapshot(t, &tab, NULL) == 0);
  CHECK(tab.counters.events == ec->events && tab.counters.bytes == t->pipe.dec.c.bytes);
  for (size_t i = 0; i < tab.nrows; i++) {
    const tlc_stat_t *r = &tab.rows[i];
    CHECK(r->context < tab.ncontexts || r->context == TLC_CTX_NEUTRAL ||
          r->context == TLC_CTX_NONE);
    for (int k = 0; k < TLC_NKINDS; k++) {
      const tlc_dist_t *dd = &r->dist[k];
      CHECK(r->total[k] >= 0);
      if (dd->n == 0)
        continue;
      CHECK(dd->min >= 0 && dd->min <= dd->max && dd->sum >= 0);
      for (int q = 0; dd->has_q && q < TLC_NQUANT; q++)
        CHECK(dd->q[q] >= dd->min && dd->q[q] <= dd->max);
    }
  }
  tlc_table_fini(&tab);
}

static void setup_once(void) {
  static int done;
  if (done)
    return;
  done = 1;
  /* Every allocation, libuv's included, is counted (as tlcapd installs tlc_malloc). */
  testalloc_install();
  uv_replace_allocator(tlc_malloc, tlc_realloc, tlc_calloc, tlc_free);
  tlc_log_set_level(TLC_LOG_ERR); /* quiet: the paths under test log warnings by design */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static tlc_ingest_t d;
  tlc_target_observer_t o;
  uv_loop_t loop;
  feed_t feed[NFEED];
  size_t nfeed, len, live0, expect_bad = 0;
  unsigned spins = 0;
  uint8_t mode;
  int deadline_done = 0, all_written;
  tlc_format_t fmt;

  if (size < 2)
    return 0;
  setup_once();
  mode = data[0];
  rng_state = 0x9e3779b9u ^ data[1];
  data += 2;
  len = size - 2;
  fmt = (mode & 3) == 0 ? TLC_FMT_BIN10 : (mode & 3) == 1 ? TLC_FMT_BIN11 : TLC_FMT_EVLOG;
  memset(&S, 0, sizeof(S));
  live0 = testalloc_live_bytes();
  testalloc_max_request_reset();

  /* A daemon context as main.c makes it, without storage and subscribers. */
  memset(&d, 0, sizeof(d));
  CHECK(uv_loop_init(&loop) == 0);
  d.loop = &loop;
  CHECK(tlc_config_init(&d.cfg) == 0);
  d.cfg.max_block = MAX_BLOCK;
  d.cfg.max_targets = 8;
  d.rbuf_len = (mode & 0x80) ? 1 + rng() % 64 : 64u << 10;
  d.rbuf = tlc_malloc(d.rbuf_len);
  CHECK(d.rbuf != NULL);
  d.max_conns = NFEED;
  tlc_targets_init(&d.targets, d.cfg.max_targets);
  if (mode & 0x08) {
    d.barrier = barrier;
    d.barrier_ud = &S;
  }
  memset(&o, 0, sizeof(o));
  o.cb = obs_event;
  o.bytes_cb = obs_bytes;
  o.decoded_cb = obs_decoded;
  o.batch_cb = obs_batch;
  o.ud = &S;
  CHECK(tlc_targets_observe(&d.targets, &o) == 0);

  /* The streams, each into a socketpair whose other end the daemon adopts. */
  nfeed = (mode & 0x20) ? 2 : 1;
  for (size_t i = 0; i < nfeed; i++) {
    feed_t *f = &feed[i];
    tlc_preamble_t p;
    char why[160];
    int sv[2];
    memset(f, 0, sizeof(*f));
    if (nfeed == 1) {
      f->p = data;
      f->len = len;
    } else {
      /* Two streams: the first two bytes (little-endian) say where the first one ends. */
      size_t hdr = len < 2 ? len : 2;
      size_t cut = hdr == 2 ? ((size_t)data[0] | (size_t)data[1] << 8) % (len - 1) : 0;
      f->p = i == 0 ? data + hdr : data + hdr + cut;
      f->len = i == 0 ? cut : len - hdr - cut;
    }
    switch (
        tlc_preamble_parse((const char *)f->p, f->len, 1, d.cfg.max_name, &p, why, sizeof(why))) {
    case TLC_PRE_OK:
      f->pre_len = p.length;
      break;
    case TLC_PRE_BAD:
      f->pre_bad = 1;
      expect_bad++;
      break;
    default:
      break;
    }
    CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
    f->fd = sv[0];
    CHECK(tlc_listen_take_fd(&d, "fz", fmt, sv[1]) == 0);
  }

  /* Feed: write, turn the loop, until every stream is written or refused. */
  do {
    size_t written = 0;
    all_written = 1;
    for (size_t i = 0; i < nfeed; i++) {
      write_some(&feed[i], (mode & 0x04) != 0);
      written += feed[i].off;
      if (!feed[i].dead && feed[i].off < feed[i].len)
        all_written = 0;
    }
    turn(&d, &spins);
    if ((mode & 0x40) && !deadline_done && 2 * written >= len) {
      /* The sweep timer fires with the clock past partial_timeout. */
      deadline_done = 1;
      tlc__conn_sweep(&d, uv_now(&loop) + d.cfg.partial_timeout_ms);
    }
  } while (!all_written);

  /* End: the daemon stops (reading what the kernel holds), or the peers close. */
  if (mode & 0x10) {
    d.stopping = 1;
    tlc__conns_drain_close(&d);
  }
  for (size_t i = 0; i < nfeed; i++) {
    close(feed[i].fd);
    feed[i].fd = -1;
  }
  while (turn(&d, &spins))
    ;
  CHECK(d.nconns == 0);
  CHECK(uv_loop_close(&loop) == 0);

  /* Invariants. */
  /* the slack: fixed allocations of the session, the largest the configuration's table of
   * sources (TLC_CFG_MAX_SOURCES entries, about 1.5 MiB) */
  CHECK(testalloc_max_request() <= (size_t)MAX_BLOCK + 256 * size + (2u << 20));
  CHECK(d.targets.bytes >= S.bytes && d.targets.events == S.events);
  if (!(mode & 0x40))
    CHECK(d.st.preamble_errors == expect_bad);
  {
    uint64_t taken = 0, expect = 0;
    int whole = !deadline_done && d.st.preamble_errors == 0 && d.st.closed_decode == 0 &&
                d.st.refused_target == 0;
    for (size_t i = 0; i < d.targets.n; i++) {
      const tlc_target_t *t = d.targets.v[i];
      track_t *k = track(t);
      CHECK(!t->connected && t->source == NULL);
      CHECK(k->connected == k->disconnected && k->connected == t->connections);
      CHECK(t->gaps == t->connections && tlc_engine_counters(t->pipe.engine)->gaps >= t->gaps);
      CHECK(k->bytes == t->pipe.dec.c.bytes && k->decoded == t->pipe.dec.c.records);
      CHECK(tlc_engine_counters(t->pipe.engine)->events <= k->events);
      if (t->format != TLC_FMT_EVLOG && t->decode_errors == 0)
        CHECK(24 * t->pipe.dec.c.records + t->pipe.dec.c.truncated == t->pipe.dec.c.bytes);
      check_stats(t);
      taken += t->pipe.dec.c.bytes;
    }
    for (size_t i = 0; i < nfeed; i++) {
      if (feed[i].off != feed[i].len)
        whole = 0;
      expect += feed[i].len - feed[i].pre_len;
    }
    if (whole)
      CHECK(taken == expect && d.targets.bytes == expect);
    else
      CHECK(taken <= len);
  }

  /* Free everything; nothing may stay allocated. */
  tlc_targets_fini(&d.targets);
  tlc_config_fini(&d.cfg);
  tlc_free(d.rbuf);
  CHECK(testalloc_live_bytes() == live0);
  return 0;
}
