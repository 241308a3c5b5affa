/* store.c - the storage module's front (loop thread) and its writer thread.
 *
 * Design:
 *  - Loop side (tlc_store_write_chunk & co.): takes the records as the decoder found them and
 *    never re-derives what it knows. bin1x: each record's 24 bytes are copied as received from
 *    the chunk they were decoded from (encoded from the event's fields only when a record began
 *    in an earlier chunk: the same bytes), with its time, into a per-target gather buffer that
 *    is queued as one command at the end of the loop turn (a uv_prepare), before any other
 *    command (order kept), or when full; its queue room is taken as the records come, so
 *    drops are decided per call as before. evlog: a block that lies whole in the chunk its
 *    items were decoded from, items end to end, is copied as received (whole_block); one that
 *    began in an earlier chunk, or whose items do not cover it (refused items, a cut), is
 *    re-assembled from its items' raw bytes and the header fields the decoder kept (the evlog
 *    encoder: the same bytes for a whole block); either way with a descriptor per block
 *    (length, item count, smallest and largest index time) from its items. The queue is capped in
 * bytes (queue_bytes); over the cap the records are dropped and counted (dropped_buffer_full) and a
 * `buffer_full` gap is queued (control commands are never dropped: they are small and bounded by
 * the number of calls that make them). The loop never does file I/O after tlc_store_recover.
 *  - Writer thread: pops commands in order (so per-target order is kept), appends to the
 *    target's open segment (segment.c) in one write per command and builds its manifest from the
 *    commands' descriptors (no scan of the bytes but the checksum), rotates on size (at a record
 *    boundary) and age, syncs per policy, runs retention, handles ENOSPC (pause + count + probe)
 *    and I/O errors (R5/R6). It wakes at least every 250 ms for ticks (age, sync, probe,
 *    retention). The loop signals it for every command but data, and for data only while it is
 *    idle or once wake_bytes wait; while busy (its last look found a command) it looks every
 *    WPOLL_NS by itself: a futex wake per loop turn was a measurable share of the loop's time.
 *    To close a segment it only moves it (open fd, manifest, names) into a seal job: the next
 *    record opens the next segment at once.
 *  - Post-seal worker (worker.c): one job queue, in the order the writer closed the segments;
 *    a job is a segment to finish: seal, main export, compression, in that order, each stage
 *    taken in queue order by a thread of its own (a lane). The seal lane seals (segment.c:
 *    fdatasync, manifest, rename, fsync(dir), crash points; so a target's segments are sealed
 *    in sequence order), catalogues the segment, reports it and runs a retention pass. A
 *    segment being sealed is not in the catalog yet, so retention cannot touch it; a crash
 *    leaves it a .part like the open one, and recovery seals both. At most max_sealing seal jobs
 *    are in flight: the writer waits for room before handing over another (a bounded number of
 *    unsealed segments, fds and manifests in memory). The export lane writes the main exports
 *    the seal lane left to it, one at a time, not during a burst, at most EXPORT_QUEUE_MAX
 *    waiting; each is written and the manifest rewritten to name it. The compress lane then
 *    compresses the segment (zstd). Barriers pass through the same queue, so a barrier also
 *    covers the seals of the segments closed before it, and their main exports. A main export
 *    or manifest that could not be written for lack of space is kept (pend_t) and written by
 *    the seal lane when space returns; the main exports of segments found at start without one
 *    (crash recovery) wait with the writer until their target is configured, so that they get
 *    its mapping and context area, and are then written by the seal lane (never the loop).
 *  - Results (sealed, compressed, deleted, disk full, log lines, target closed, stopped) go back
 *    to the loop through a list and a uv_async_t; the loop logs and reports events.
 *
 * Counters live in the store under its mutex; tlc_store_counters copies them.
 * What it does not do: stats (the engine's), preamble handling (the ingest's).
 *
 * Files. store.c: this note, clocks and logging, backpressure, the loop side (queue, gathering,
 * keep_skipped, the API) and results on the loop; writer.c: the writer thread; worker.c: the
 * post-seal worker, its lanes and the exports and manifests it keeps for later; recovery.c:
 * recovery at start. What they share is in store-int.h.
 */
#include "store/store.h"

#include "base/alloc.h"
#include "base/err.h"
#include "base/log_level.h"
#include "formats/bin1x.h"
#include "formats/dec.h"
#include "formats/evlog.h"
#include "store/seg/iofault.h"
#include "store/seg/segread.h"
#include "store/store-int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

/* ---- backpressure ---- */

/* Backpressure: the high- and low-water marks of a target's share of the queue (under mu). */
static int flow_high(const tlc_store_t *s, const tlc_store_target_t *t) {
  size_t sh = tlc__store_flow_share(s);
  return t->qb >= sh - sh / 4;
}

/* loop: after queueing or gathering data of t: past the high-water mark, asks t to pause */
static void flow_check(tlc_store_target_t *t) {
  tlc_store_t *s = t->s;
  int pause = 0;
  if (!t->flow_cb || t->closed)
    return;
  uv_mutex_lock(&s->mu);
  if (!t->paused && flow_high(s, t)) {
    t->paused = 1;
    t->resume_due = 0;
    s->c.flow_pauses++;
    t->c.flow_pauses++;
    pause = 1;
    uv_cond_signal(&s->cv); /* a held target waits for the writer: no waiting for its poll */
  }
  uv_mutex_unlock(&s->mu);
  if (pause)
    t->flow_cb(t->flow_ud, 1);
}

/* loop (async): resumes the paused targets the writer drained below the low-water mark */
void tlc__store_flow_resume(tlc_store_t *s) {
  tlc_store_target_t *t;
  TAILQ_FOREACH(t, &s->lp.targets, link) {
    int resume = 0;
    uv_mutex_lock(&s->mu);
    if (t->paused && t->resume_due) {
      t->paused = 0;
      t->resume_due = 0;
      resume = 1;
    }
    uv_mutex_unlock(&s->mu);
    if (resume && t->flow_cb && !t->closed)
      t->flow_cb(t->flow_ud, 0);
  }
}

void tlc_store_target_set_flow(tlc_store_target_t *t, void (*cb)(void *ud, int paused), void *ud) {
  t->flow_cb = cb;
  t->flow_ud = ud;
}

/* ---- shared names (tmap) ---- */

/* a deep copy of a finished mapping (loop thread), one reference */
static tmap_t *tmap_copy(const tlc_mapping_t *src) {
  tmap_t *m = tlc_calloc(1, sizeof *m);
  if (!m)
    return NULL;
  m->refs = 1;
  tlc_mapping_init(&m->m);
  m->m.max_areas = src->max_areas;
  for (size_t i = 0; i < src->nareas; i++)
    if (tlc_mapping_add(&m->m, &src->areas[i]) < 0)
      goto fail;
  for (size_t i = 0; i < src->ncontexts; i++)
    if (tlc_mapping_add_ctx(&m->m, src->contexts[i].handle, src->contexts[i].name) < 0)
      goto fail;
  tlc_mapping_finish(&m->m);
  return m;
fail:
  tlc_mapping_fini(&m->m);
  tlc_free(m);
  return NULL;
}

/* ---- loop side: queue ---- */

static void gather_flush(tlc_store_target_t *t);

/* a gather buffer of the store's size for records and one for their times (tlc_malloc), or
 * TLC_ENOMEM with neither */
static int gather_alloc(tlc_store_t *s, uint8_t **b, int64_t **tm) {
  *b = tlc_malloc(s->lp.gather_max * TLC_BIN1X_RECORD);
  *tm = tlc_malloc(s->lp.gather_max * sizeof **tm);
  if (*b && *tm)
    return 0;
  tlc_free(*b);
  tlc_free(*tm);
  *b = NULL;
  *tm = NULL;
  return TLC_ENOMEM;
}

/* When the store opens (gather_at_start) or else the first bin1x target does: gather buffers
 * (records and times) for a quarter of the queue's room (GPOOL_MIN to GPOOL_MAX pairs), their pages
 * touched now and kept for the store's life. A burst then fills buffers the kernel has already
 * mapped instead of faulting fresh pages in on the loop, and glibc does not give them back between
 * bursts. Fewer when memory is short: the loop allocates the others as it needs them. */
static void gpool_fill(tlc_store_t *s) {
  if (s->lp.gpool_filled)
    return;
  s->lp.gpool_filled = 1;
  size_t keep = s->qcap / 4 / (s->lp.gather_max * (TLC_BIN1X_RECORD + sizeof(int64_t)));
  keep = keep < GPOOL_MIN ? GPOOL_MIN : keep > GPOOL_MAX ? GPOOL_MAX : keep;
  LOCKED(s, s->gpool_keep = keep);
  /* No gather buffer exists before the first bin1x target, so only this fills the pool; under
   * mu all the same, as the writer reads it. */
  uint8_t *b;
  int64_t *tm;
  for (size_t i = 0; i < keep && gather_alloc(s, &b, &tm) == 0; i++) {
    memset(b, 0, s->lp.gather_max * TLC_BIN1X_RECORD);
    memset(tm, 0, s->lp.gather_max * sizeof *tm);
    LOCKED(s, s->gpool_b[s->ngpool] = b; s->gpool_t[s->ngpool] = tm; s->ngpool++);
  }
}

/* under s->mu: a gather buffer pair the writer is done with, when it left one (1), else 0 */
static int gather_pooled(tlc_store_t *s, uint8_t **b, int64_t **tm) {
  if (s->ngpool == 0)
    return 0;
  s->ngpool--;
  *b = s->gpool_b[s->ngpool];
  *tm = s->gpool_t[s->ngpool];
  return 1;
}

/* a gather buffer pair: one the writer is done with, else new; 0 or TLC_ENOMEM */
static int gather_get(tlc_store_t *s, uint8_t **b, int64_t **tm) {
  int got;
  LOCKED(s, got = gather_pooled(s, b, tm));
  return got ? 0 : gather_alloc(s, b, tm);
}

/* 1 while the target's gather buffer is lent to its source for a read of this loop turn */
static int lent_now(const tlc_store_target_t *t) {
  return t->lend_turn == t->s->lp.turn;
}

static void gather_flush_all(tlc_store_t *s) {
  while (!TAILQ_EMPTY(&s->lp.gather))
    gather_flush(TAILQ_FIRST(&s->lp.gather));
}

static int enqueue_raw(tlc_store_t *s, cmd_t *c, int droppable);

/* Queues a command after the records gathered before it: those of its target, or of every
 * target for a store-wide command, so that the writer sees everything in call order. */
static int enqueue(tlc_store_t *s, cmd_t *c, int droppable) {
  if (c->t) {
    if (c->t->gq)
      gather_flush(c->t);
  } else {
    gather_flush_all(s);
  }
  return enqueue_raw(s, c, droppable);
}

/* droppable: 0 never dropped, 1 dropped when over the cap, Q_RESERVED its bytes are counted in
 * qbytes already (gathered records, see tlc_store_write_chunk) */
#define Q_RESERVED 2
static int enqueue_raw(tlc_store_t *s, cmd_t *c, int droppable) {
  uv_mutex_lock(&s->mu);
  if (droppable == 1 && s->qbytes + c->len > s->qcap) {
    uv_mutex_unlock(&s->mu);
    return TLC_ELIMIT;
  }
  STAILQ_INSERT_TAIL(&s->q, c, link);
  if (droppable != Q_RESERVED) {
    s->qbytes += c->len;
    if (c->t)
      c->t->qb += c->len;
  }
  s->c.queue_bytes = s->qbytes;
  if (s->qbytes > s->c.queue_peak_bytes)
    s->c.queue_peak_bytes = s->qbytes;
  /* data wakes the writer only when it is idle or once wake_bytes wait: a busy writer finds
   * the rest itself (WPOLL_NS), and the loop is spared a futex wake per command */
  if (c->type != C_DATA || !s->w_poll || s->qbytes >= s->wake_bytes)
    uv_cond_signal(&s->cv);
  uv_mutex_unlock(&s->mu);
  return 0;
}

static int ctl(tlc_store_t *s, int type, tlc_store_target_t *t, const char *reason, uint64_t count,
               int rot) {
  cmd_t *c = tlc_calloc(1, sizeof *c);
  if (!c)
    return TLC_ENOMEM;
  c->type = type;
  c->t = t;
  c->count = count;
  c->rot = rot;
  if (reason)
    snprintf(c->reason, sizeof c->reason, "%s", reason);
  return enqueue(s, c, 0);
}

static void count_buffer_full(tlc_store_target_t *t, uint64_t nrec, size_t len) {
  tlc_store_t *s = t->s;
  uv_mutex_lock(&s->mu);
  s->c.dropped_buffer_full_records += nrec;
  s->c.dropped_buffer_full_bytes += len;
  t->c.dropped_records += nrec;
  t->c.dropped_bytes += len;
  uv_mutex_unlock(&s->mu);
  t->pend_drop_rec += nrec;
}

/* takes ownership of buf and times (bin1x: each record's time; NULL for evlog); `counted`: the
 * records are in records_in already */
static int submit(tlc_store_target_t *t, uint8_t *buf, size_t len, uint64_t nrec, tlc_rec_t *recs) {
  tlc_store_t *s = t->s;
  if (nrec == 0) {
    tlc_free(buf);
    tlc_free(recs);
    return 0;
  }
  LOCKED(s, s->c.records_in += nrec; s->c.bytes_in += len; t->c.records_in += nrec;
         t->c.bytes_in += len);
  cmd_t *c = tlc_calloc(1, sizeof *c);
  if (!c) {
    tlc_free(buf);
    tlc_free(recs);
    count_buffer_full(t, nrec, len);
    return TLC_ENOMEM;
  }
  c->type = C_DATA;
  c->t = t;
  c->buf = buf;
  c->len = len;
  c->nrec = nrec;
  c->recs = recs;
  if (t->pend_drop_rec > 0) {
    /* the gap goes before these records; if the data is dropped too, it grows instead */
    uv_mutex_lock(&s->mu);
    int fits = s->qbytes + len <= s->qcap;
    uv_mutex_unlock(&s->mu);
    if (fits && ctl(s, C_GAP, t, "buffer_full", t->pend_drop_rec, 0) == 0)
      t->pend_drop_rec = 0;
  }
  if (enqueue(s, c, 1) < 0) {
    tlc_free(buf);
    tlc_free(recs);
    tlc_free(c);
    count_buffer_full(t, nrec, len);
  }
  flow_check(t);
  return 0;
}

/* gives back queue room reserved for gathered records that will not be queued */
static void unreserve(tlc_store_target_t *t, size_t len) {
  LOCKED(t->s, t->s->qbytes -= len; t->qb -= len; t->s->c.queue_bytes = t->s->qbytes);
}

/* queues the target's gathered bin1x records (in records_in, their queue room reserved when
 * they were gathered) as one command */
static void gather_flush(tlc_store_target_t *t) {
  tlc_store_t *s = t->s;
  if (t->gq)
    TAILQ_REMOVE(&s->lp.gather, t, glink);
  t->gq = 0;
  size_t n = t->gn, len = n * TLC_BIN1X_RECORD;
  cmd_t *c = n > 0 ? tlc_calloc(1, sizeof *c) : NULL;
  uint8_t *b = t->gb;
  int64_t *tm = t->gt;
  if (c && lent_now(t)) {
    /* the source may still read stream bytes from the buffer in this turn: the writer gets a
     * copy of the records, the buffer stays */
    b = NULL;
    tm = NULL;
    if (gather_get(s, &b, &tm) == 0) {
      memcpy(b, t->gb, len);
      memcpy(tm, t->gt, n * sizeof *tm);
    } else {
      tlc_free(c);
      c = NULL;
    }
  }
  if (!c) {
    if (n > 0) {
      unreserve(t, len);
      count_buffer_full(t, n, len);
    }
    t->gn = 0; /* the buffers are kept for the next records */
    return;
  }
  c->type = C_DATA;
  c->t = t;
  c->buf = b;
  c->len = len;
  c->nrec = n;
  c->times = tm;
  if (b == t->gb) {
    t->gb = NULL;
    t->gt = NULL;
  }
  t->gn = 0;
  enqueue_raw(s, c, Q_RESERVED);
}

static void on_prepare(uv_prepare_t *h) {
  tlc_store_t *s = h->data;
  s->lp.turn++; /* the reads of the last poll phase are done: what was lent is the store's again */
  gather_flush_all(s);
}

int tlc_store_read_buffer(tlc_store_target_t *t, size_t held, size_t want, uint8_t **buf,
                          size_t *len) {
  const size_t R = TLC_BIN1X_RECORD;
  if (!t || t->closed || t->format == TLC_FMT_EVLOG || held >= R || want == 0)
    return 0;
  tlc_store_t *s = t->s;
  size_t cap = s->lp.gather_max * R;
  if (cap < READ_LEND_MIN)
    return 0;       /* a queue too small for reads of a useful size: the source's own buffer */
  t->lend_turn = 0; /* the previous read from it is over */
  /* where the stream goes on: after the records gathered and the bytes of the record the
   * decoder holds (read here too when the last read was lent; else the next record is
   * encoded over them). The records gathered may fill the buffer (gathered from reads that
   * were not lent) while a record is held: then at > cap. */
  size_t at = t->gn * R + held;
  if (t->gb && (at >= cap || (cap - at < READ_LEND_MIN && cap - at < want))) {
    gather_flush(t); /* too little room left: to the writer, and a fresh buffer */
    at = held;
  }
  if (!t->gb) {
    if (gather_get(s, &t->gb, &t->gt) < 0)
      return 0;
    at = held; /* gn is 0 with no buffer */
  }
  *buf = t->gb + at;
  *len = cap - at < want ? cap - at : want;
  t->lend_turn = s->lp.turn;
  return 1;
}

/* takes the bytes the encoder wrote into `o` (whole blocks) and queues them */
static int submit_out(tlc_store_target_t *t, tlc_out_t *o, uint64_t nrec) {
  size_t len = 0;
  int rc = o->err;
  uint8_t *buf = (uint8_t *)tlc_out_take(o, &len);
  tlc_rec_t *recs = t->ed;
  int whole = t->ned == nrec && !t->ed_err; /* a descriptor for every block written */
  t->ed = NULL;
  t->ned = t->ced = 0;
  t->ed_err = 0;
  tlc_out_fini(o);
  if (buf && !whole) { /* no memory for the descriptors: the blocks are dropped and counted */
    LOCKED(t->s, t->s->c.records_in += nrec; t->s->c.bytes_in += len; t->c.records_in += nrec;
           t->c.bytes_in += len);
    count_buffer_full(t, nrec, len);
    tlc_free(buf);
    tlc_free(recs);
    return TLC_ENOMEM;
  }
  if (!buf) {
    tlc_free(recs);
    if (nrec > 0) {
      LOCKED(t->s, t->s->c.records_in += nrec; t->c.records_in += nrec);
      count_buffer_full(t, nrec, 0);
    }
    return rc < 0 ? rc : TLC_ENOMEM;
  }
  if (len == 0) {
    tlc_free(buf);
    tlc_free(recs);
    return 0;
  }
  return submit(t, buf, len, nrec, recs);
}

/* evlog: a block the encoder wrote (`len` bytes): the items and times collected for it become
 * its descriptor for the writer (what the manifest needs), so that the writer never re-reads
 * the block */
static void ea_done(tlc_store_target_t *t, uint64_t len) {
  if (t->ned == t->ced) {
    tlc_rec_t *nr = tlc_grow(t->ed, &t->ced, t->ned + 1, sizeof *nr, 16);
    if (!nr) {
      t->ed_err = 1;
      t->ea = (tlc_rec_t){ 0, INT64_MAX, INT64_MIN, 0 };
      return;
    }
    t->ed = nr;
  }
  t->ea.len = (size_t)len;
  t->ed[t->ned++] = t->ea;
  t->ea = (tlc_rec_t){ 0, INT64_MAX, INT64_MIN, 0 };
}

static void ea_item(tlc_store_target_t *t, const tlc_evlog_ext_t *x) {
  int64_t ns;
  t->ea.items++;
  if (tlc_evlog_index_time(x->tim, &ns)) {
    if (ns < t->ea.tmin)
      t->ea.tmin = ns;
    if (ns > t->ea.tmax)
      t->ea.tmax = ns;
  }
}

/* ---- loop side: keep_skipped ----
 *
 * The decoder tells the bytes that go into no record or block (tlc_dec_opts_t.skipped_cb,
 * through the target's observers: resync noise, a cut-off tail) as it decides them; they are
 * gathered here (at most keep_skipped between two flushes, the rest counted) and queued for the
 * .skipped file (C_SKIP) before the records that follow them, or at the end of the stream.
 * Cost: a copy of each skipped byte kept; nothing per record.
 */

static void sk_flush(tlc_store_target_t *t) {
  tlc_store_t *s = t->s;
  if (t->sk_olen == 0 && t->sk_unkept == 0)
    return;
  cmd_t *c = tlc_calloc(1, sizeof *c);
  if (c) {
    c->type = C_SKIP;
    c->t = t;
    c->count = t->sk_unkept;
    if (t->sk_olen > 0) {
      c->buf = tlc_malloc(t->sk_olen);
      if (c->buf) {
        memcpy(c->buf, t->sk_out, t->sk_olen);
        c->len = t->sk_olen;
      }
    }
    if (c->len > 0 && enqueue(s, c, 1) == 0) {
      t->sk_olen = 0;
      t->sk_unkept = 0;
      return;
    }
    /* no memory or the queue is full: only the count goes (a control command) */
    tlc_free(c->buf);
    c->buf = NULL;
    c->len = 0;
    c->count = t->sk_unkept + t->sk_olen;
    if (enqueue(s, c, 0) == 0) {
      t->sk_olen = 0;
      t->sk_unkept = 0;
    }
  }
}

void tlc_store_skipped(tlc_store_target_t *t, uint64_t offset, const uint8_t *buf, size_t len) {
  (void)offset; /* in stream order: the file is their concatenation */
  if (!t || len == 0 || t->s->o.keep_skipped == 0)
    return;
  uint64_t keep = t->s->o.keep_skipped;
  size_t k = t->sk_olen >= keep ? 0 : (size_t)(keep - t->sk_olen < len ? keep - t->sk_olen : len);
  if (k > 0 && t->sk_olen + k > t->sk_ocap) {
    uint8_t *nb = tlc_grow(t->sk_out, &t->sk_ocap, t->sk_olen + k, 1, 4096);
    if (!nb)
      k = 0;
    else
      t->sk_out = nb;
  }
  if (k > 0) {
    memcpy(t->sk_out + t->sk_olen, buf, k);
    t->sk_olen += k;
  }
  t->sk_unkept += len - k;
}

void tlc_store_stream_end(tlc_store_target_t *t) {
  if (!t || t->s->o.keep_skipped == 0)
    return;
  sk_flush(t);
}

/* evlog: when ev[i] is the first item of a block that lies whole in the chunk and whose items
 * are ev[i..j] (each where the previous one ends, the last one marked BLOCK_END and ending the
 * block), returns j + 1: the block is stored as received. Else 0 (the encoder re-assembles it
 * from the items: a block that began in an earlier chunk, items the decoder refused, a cut). */
static size_t whole_block(const tlc_store_target_t *t, const tlc_event_t *ev, size_t i, size_t n,
                          const uint8_t *chunk, size_t clen, uint64_t coff) {
  const tlc_evlog_ext_t *x = ev[i].evlog;
  uint64_t bo = x->block_offset, next = bo + TLC_EVLOG_HEADER, end = next + x->block_size;
  if (!chunk || bo < coff || end > coff + clen || x->block_size > t->enc.opts.max_block)
    return 0;
  for (size_t j = i; j < n; j++) {
    const tlc_evlog_ext_t *y = ev[j].evlog;
    if (!y || (ev[j].flags & TLC_EVF_SYNTH) || y->block_offset != bo || ev[j].offset != next)
      return 0;
    next += y->item_len;
    if (ev[j].flags & TLC_EVF_BLOCK_END)
      return next == end ? j + 1 : 0;
  }
  return 0;
}

static int write_evlog(tlc_store_target_t *t, const tlc_event_t *ev, size_t n, const uint8_t *chunk,
                       size_t clen, uint64_t coff) {
  tlc_out_t o;
  uint64_t before = t->enc.blocks, raw = 0;
  int rc = 0;
  tlc_out_init(&o, 0, NULL, NULL);
  for (size_t i = 0; i < n; i++) {
    if (!ev[i].evlog || (ev[i].flags & TLC_EVF_SYNTH))
      continue;
    size_t j = whole_block(t, ev, i, n, chunk, clen, coff);
    if (j > 0) { /* the block's bytes as received, after what the encoder holds */
      const tlc_evlog_ext_t *x = ev[i].evlog;
      size_t blen = TLC_EVLOG_HEADER + (size_t)x->block_size;
      uint64_t b0 = t->enc.blocks, l0 = o.total;
      tlc_evlog_enc_flush(&t->enc, &o);
      if (t->enc.blocks != b0)
        ea_done(t, o.total - l0);
      for (size_t k = i; k < j; k++)
        ea_item(t, ev[k].evlog);
      tlc_out_write(&o, chunk + (x->block_offset - coff), blen);
      ea_done(t, blen);
      raw++;
      i = j - 1;
      continue;
    }
    uint64_t b0 = t->enc.blocks, l0 = o.total;
    int r = tlc_evlog_enc_add(&t->enc, &ev[i], &o);
    if (t->enc.blocks != b0)
      ea_done(t, o.total - l0); /* the open block was written: this item starts the next */
    if (r == 0)
      ea_item(t, ev[i].evlog);
    if (r < 0) {
      LOCKED(t->s, t->s->c.records_in++; t->c.records_in++);
      count_buffer_full(t, 1, 0); /* an item the encoder refused: counted, never silent */
      rc = r;
      continue;
    }
    if (ev[i].flags & TLC_EVF_BLOCK_END) {
      b0 = t->enc.blocks;
      l0 = o.total;
      tlc_evlog_enc_flush(&t->enc, &o);
      if (t->enc.blocks != b0)
        ea_done(t, o.total - l0);
    }
  }
  int src = submit_out(t, &o, t->enc.blocks - before + raw);
  return rc < 0 ? rc : src;
}

static size_t synth_count(const tlc_event_t *ev, size_t n) {
  size_t k = 0;
  for (size_t i = 0; i < n; i++)
    k += (ev[i].flags & TLC_EVF_SYNTH) != 0;
  return k;
}

/* bin1x: gives back the count (and the queue room, when `reserved`) tlc_store_write_chunk took
 * for `syn` synthesised events, which have no record */
static void synth_back(tlc_store_target_t *t, size_t syn, int reserved) {
  if (syn == 0)
    return;
  size_t len = syn * TLC_BIN1X_RECORD;
  LOCKED(t->s, t->s->c.records_in -= syn; t->s->c.bytes_in -= len; t->c.records_in -= syn;
         t->c.bytes_in -= len);
  if (reserved)
    unreserve(t, len);
}

int tlc_store_write(tlc_store_target_t *t, const tlc_event_t *ev, size_t n) {
  return tlc_store_write_chunk(t, ev, n, NULL, 0, 0);
}

int tlc_store_write_chunk(tlc_store_target_t *t, const tlc_event_t *ev, size_t n,
                          const uint8_t *chunk, size_t clen, uint64_t coff) {
  if (!t || n == 0)
    return 0;
  tlc_store_t *s = t->s;
  if (s->o.keep_skipped)
    sk_flush(t); /* the skipped bytes the decoder told go before these records */
  if (t->format == TLC_FMT_EVLOG)
    return write_evlog(t, ev, n, chunk, clen, coff);
  /* The queue room is taken now, so that the records are dropped (or not) as they come, as
   * if each call were queued at once. One record an event: bin1x events are never synthesised
   * (TLC_EVF_SYNTH is the evlog mapping's), so the events are not counted first; any that were
   * are skipped below and their room and count given back (synth_back). */
  size_t len = n * TLC_BIN1X_RECORD;
  int fits;
  uv_mutex_lock(&s->mu);
  s->c.records_in += n;
  s->c.bytes_in += len;
  t->c.records_in += n;
  t->c.bytes_in += len;
  fits = s->qbytes + len <= s->qcap;
  if (fits) {
    s->qbytes += len;
    t->qb += len;
    s->c.queue_bytes = s->qbytes;
    if (s->qbytes > s->c.queue_peak_bytes)
      s->c.queue_peak_bytes = s->qbytes;
    if (!t->gb)
      gather_pooled(s, &t->gb, &t->gt);
  }
  uv_mutex_unlock(&s->mu);
  if (!fits) {
    size_t syn = synth_count(ev, n);
    synth_back(t, syn, 0);
    count_buffer_full(t, n - syn, (n - syn) * TLC_BIN1X_RECORD);
    return 0;
  }
  if (t->pend_drop_rec > 0 && ctl(s, C_GAP, t, "buffer_full", t->pend_drop_rec, 0) == 0)
    t->pend_drop_rec = 0; /* after the records gathered before the drop, before these */
  const size_t R = TLC_BIN1X_RECORD;
  size_t syn = 0;
  for (size_t i = 0; i < n;) {
    if (ev[i].flags & TLC_EVF_SYNTH) {
      syn++;
      i++;
      continue;
    }
    if (t->gn == s->lp.gather_max)
      gather_flush(t);
    if (!t->gb) {
      if (gather_get(s, &t->gb, &t->gt) < 0) {
        size_t syn_left = synth_count(ev + i, n - i), left = n - i - syn_left;
        synth_back(t, syn + syn_left, 1);
        unreserve(t, left * R);
        count_buffer_full(t, left, left * R);
        if (t->gn > 0 && !t->gq) {
          t->gq = 1;
          TAILQ_INSERT_HEAD(&s->lp.gather, t, glink);
        }
        return TLC_ENOMEM;
      }
    }
    /* The records' bytes as received: a run of records lying one after the other in the chunk
     * is copied at once, or not at all when the chunk was read into this very place
     * (tlc_store_read_buffer; else, in a lent buffer, the run may lie further on in the same
     * buffer: memmove). A record that began in an earlier chunk (or with no chunk given) is
     * encoded from its fields, which gives the same bytes (tlc_bin1x_encode keeps the
     * received flags word): in a lent buffer, the same bytes that were read there. */
    uint8_t *dst = t->gb + t->gn * R;
    uint64_t o = ev[i].offset - coff;
    if (chunk && ev[i].offset >= coff && o < clen && clen - o >= R) {
      size_t room = s->lp.gather_max - t->gn;
      size_t fit = (size_t)((clen - o) / R); /* whole records the chunk holds from o */
      size_t lim = n - i < room ? n - i : room;
      if (lim > fit)
        lim = fit;
      /* The run's times, and whether all lim events are one run (each a record right after the
       * one before, none synthesised): the usual case, checked in the same branch-free pass.
       * Else the run ends at the first event that is not. */
      const tlc_event_t *e = ev + i;
      int64_t *gt = t->gt + t->gn;
      uint64_t o0 = e[0].offset, off = 0;
      uint64_t bad = 0;
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC unroll 4
#endif
      for (size_t m = 0; m < lim; m++, off += R) {
        gt[m] = e[m].time_ns;
        bad |= (e[m].offset - o0 - off) | (e[m].flags & TLC_EVF_SYNTH);
      }
      size_t j = i + lim;
      if (bad) {
        j = i + 1;
        for (off = R; j - i < lim && !(ev[j].flags & TLC_EVF_SYNTH) && ev[j].offset == o0 + off;
             off += R)
          j++;
      }
      if (dst != chunk + o)
        memmove(dst, chunk + o, (j - i) * R);
      t->gn += j - i;
      i = j;
    } else {
      tlc_bin1x_encode(t->format, &ev[i], dst);
      t->gt[t->gn++] = ev[i].time_ns;
      i++;
    }
  }
  synth_back(t, syn, 1);
  if (t->gn > 0 && !t->gq) {
    t->gq = 1;
    TAILQ_INSERT_HEAD(&s->lp.gather, t, glink);
  }
  flow_check(t);
  return 0;
}

/* ---- loop side: exports of segments found at start ----
 *
 * Recovery leaves the exports of the segments it sealed (or found without one) with the writer
 * (s->w.rx) until a target of their name is configured. The first tlc_store_target_configure or
 * tlc_store_target_set_mapping of a target marks it; the C_RECEXPORT that releases them is
 * queued once the caller's callback has returned (the store's async callback), or before a
 * barrier or the target's close, so that it comes after every setting given together (tlcapd
 * gives the context area and the mapping in one callback). */

static void rx_mark(tlc_store_target_t *t) {
  tlc_store_t *s = t->s;
  if (!s->rx_any || t->rx_state != 0)
    return;
  t->rx_state = 1;
  s->lp.rx_kick = 1;
  uv_async_send(&s->async);
}

static void rx_queue(tlc_store_target_t *t) {
  if (t->rx_state == 1 && ctl(t->s, C_RECEXPORT, t, NULL, 0, 0) == 0)
    t->rx_state = 2; /* without memory: the exports are written at shutdown, without settings */
}

static void rx_flush(tlc_store_t *s) {
  if (!s->lp.rx_kick)
    return;
  s->lp.rx_kick = 0;
  for (tlc_store_target_t *t = TAILQ_FIRST(&s->lp.targets); t; t = TAILQ_NEXT(t, link))
    rx_queue(t);
}

int tlc_store_target_configure(tlc_store_target_t *t, const tlc_store_tconf_t *conf) {
  if (!t || !conf)
    return TLC_EINVAL;
  cmd_t *c = tlc_calloc(1, sizeof *c);
  if (!c)
    return TLC_ENOMEM;
  c->type = C_SETCONF;
  c->t = t;
  c->tc = *conf;
  int rc = enqueue(t->s, c, 0);
  if (rc == 0)
    rx_mark(t);
  return rc;
}

int tlc_store_target_set_mapping(tlc_store_target_t *t, const tlc_mapping_t *mapping) {
  if (!t)
    return TLC_EINVAL;
  cmd_t *c = tlc_calloc(1, sizeof *c);
  if (!c)
    return TLC_ENOMEM;
  if (mapping && !(c->map = tmap_copy(mapping))) {
    tlc_free(c);
    return TLC_ENOMEM;
  }
  c->type = C_SETMAP;
  c->t = t;
  int rc = enqueue(t->s, c, 0);
  if (rc == 0)
    rx_mark(t);
  return rc;
}

int tlc_store_gap(tlc_store_target_t *t, const char *reason, uint64_t count) {
  if (!t)
    return TLC_EINVAL;
  return ctl(t->s, C_GAP, t, reason ? reason : "unknown", count, 0);
}

static int flush_block(tlc_store_target_t *t) {
  if (t->format != TLC_FMT_EVLOG)
    return 0;
  tlc_out_t o;
  uint64_t before = t->enc.blocks;
  tlc_out_init(&o, 0, NULL, NULL);
  tlc_evlog_enc_flush(&t->enc, &o);
  if (t->enc.blocks != before)
    ea_done(t, o.total);
  return submit_out(t, &o, t->enc.blocks - before);
}

int tlc_store_rotate(tlc_store_target_t *t, int reason) {
  if (!t)
    return TLC_EINVAL;
  flush_block(t);
  return ctl(t->s, C_ROTATE, t, NULL, 0, reason);
}

int tlc_store_rotate_all(tlc_store_t *s, int reason) {
  int rc = 0;
  for (tlc_store_target_t *t = TAILQ_FIRST(&s->lp.targets); t; t = TAILQ_NEXT(t, link)) {
    int r = tlc_store_rotate(t, reason);
    if (r < 0)
      rc = r;
  }
  return rc;
}

static int barrier(tlc_store_t *s, void (*cb)(void *), void *ud, int written) {
  rx_flush(s); /* a barrier covers the exports released before it */
  cmd_t *c = tlc_calloc(1, sizeof *c);
  if (!c)
    return TLC_ENOMEM;
  c->type = written ? C_BARRIER_WRITTEN : C_BARRIER;
  c->cb = cb;
  c->ud = ud;
  return enqueue(s, c, 0);
}

int tlc_store_barrier(tlc_store_t *s, void (*cb)(void *), void *ud) {
  return barrier(s, cb, ud, 0);
}

int tlc_store_barrier_written(tlc_store_t *s, void (*cb)(void *), void *ud) {
  return barrier(s, cb, ud, 1);
}

int tlc_store_target_mid_block(const tlc_store_target_t *t) {
  return t != NULL && t->format == TLC_FMT_EVLOG && t->enc.open;
}

int tlc_store_pos_back(const tlc_store_pos_t *pos, uint64_t back, uint64_t *seg, uint64_t *off) {
  if (!pos->valid)
    return 0;
  if (back <= pos->bytes) {
    *seg = pos->seq;
    *off = pos->bytes - back;
    return 1;
  }
  back -= pos->bytes; /* before segment seq's first byte: at the end of the one before */
  if (!pos->prev_valid || back > pos->prev_bytes)
    return 0;
  *seg = pos->prev_seq;
  *off = pos->prev_bytes - back;
  return 1;
}

int tlc_store_pos_record(const tlc_store_pos_t *pos, uint64_t first, uint64_t last, uint64_t seq,
                         uint64_t rec, uint64_t *seg, uint64_t *off) {
  if (seq < first || seq > last)
    return 0;
  return tlc_store_pos_back(pos, (last - seq + 1) * rec, seg, off);
}

int tlc_store_mark(tlc_store_target_t *t, tlc_store_mark_fn cb, void *ud) {
  cmd_t *c;
  /* evlog: the items of a block still open are counted by the engine already; the block is
   * cut here (as a rotation cuts it) so that they are before the mark */
  if (flush_block(t) < 0)
    return TLC_ENOMEM;
  c = tlc_calloc(1, sizeof *c);
  if (!c)
    return TLC_ENOMEM;
  c->type = C_MARK;
  c->t = t;
  c->mcb = cb;
  c->ud = ud;
  return enqueue(t->s, c, 0);
}

void tlc_store_retention_now(tlc_store_t *s) {
  ctl(s, C_RETENTION, NULL, NULL, 0, 0);
}

void tlc_store_reconfigure(tlc_store_t *s, const tlc_store_opts_t *opts) {
  cmd_t *c = tlc_calloc(1, sizeof *c);
  tlc_store_opts_t *o = tlc_malloc(sizeof *o);
  if (!c || !o) {
    tlc_free(c);
    tlc_free(o);
    tlc__store_log_direct(s, TLC_LOG_ERR, "reconfigure: out of memory; old limits kept");
    return;
  }
  *o = *opts;
  c->type = C_RECONF;
  c->conf = o;
  enqueue(s, c, 0);
}

int tlc_store_target_open(tlc_store_t *s, const char *name, tlc_format_t format,
                          tlc_store_target_t **out) {
  size_t n = name ? strlen(name) : 0;
  *out = NULL;
  if (s->lp.closing)
    return TLC_ELIMIT;
  if (n == 0 || !tlc__store_target_name_ok(name) ||
      (format != TLC_FMT_BIN10 && format != TLC_FMT_BIN11 && format != TLC_FMT_EVLOG))
    return TLC_EINVAL;
  if (!s->thr_started)
    return TLC_EINVAL; /* tlc_store_recover first */
  for (tlc_store_target_t *o = TAILQ_FIRST(&s->lp.targets); o; o = TAILQ_NEXT(o, link))
    if (strcmp(o->name, name) == 0)
      return TLC_EINVAL; /* one writer per directory */
  tlc_store_target_t *t = tlc_calloc(1, sizeof *t);
  if (!t)
    return TLC_ENOMEM;
  t->s = s;
  memcpy(t->name, name, n + 1);
  t->format = format;
  tlc__seg_init(&t->seg);
  t->ea = (tlc_rec_t){ 0, INT64_MAX, INT64_MIN, 0 };
  tlc_evlog_enc_opts_t eo = { s->o.max_block, 0, 0 };
  if (format == TLC_FMT_EVLOG && tlc_evlog_enc_init(&t->enc, &eo) < 0) {
    tlc_free(t);
    return TLC_EINVAL;
  }
  if (tlc__path(t->dir, sizeof t->dir, "%s/%s", s->state_dir, name) < 0) {
    tlc_free(t);
    return TLC_ERANGE;
  }
  int rc = ctl(s, C_OPEN, t, NULL, 0, 0);
  if (rc < 0) {
    tlc_free(t);
    return rc;
  }
  TAILQ_INSERT_HEAD(&s->lp.targets, t, link);
  LOCKED(s, s->ntargets++);
  if (format != TLC_FMT_EVLOG)
    gpool_fill(s);
  *out = t;
  return 0;
}

void tlc_store_target_close(tlc_store_target_t *t) {
  if (!t)
    return;
  tlc_store_t *s = t->s;
  flush_block(t);
  rx_queue(t); /* configured in this callback: its recovered segments' exports first */
  if (t->pend_drop_rec > 0 && ctl(s, C_GAP, t, "buffer_full", t->pend_drop_rec, 0) == 0)
    t->pend_drop_rec = 0;
  TAILQ_REMOVE(&s->lp.targets, t, link);
  t->closed = 1;
  LOCKED(s, s->ntargets--);
  if (ctl(s, C_CLOSE, t, NULL, 0, 0) < 0)
    tlc__store_log_direct(s, TLC_LOG_ERR,
                          "%s: out of memory closing the target; its segment is sealed at exit",
                          t->name);
}

void tlc_store_counters(tlc_store_t *s, tlc_store_counters_t *out) {
  LOCKED(s, *out = s->c);
}

void tlc_store_target_counters(tlc_store_target_t *t, tlc_store_target_counters_t *out) {
  LOCKED(t->s, *out = t->c);
}

void tlc_store_target_stored(tlc_store_t *s, const char *target, uint64_t *bytes,
                             uint64_t *segments) {
  uint64_t b = 0, n = 0;
  uv_mutex_lock(&s->cat.mu);
  for (size_t i = 0; i < s->cat.n; i++)
    if (strcmp(s->cat.v[i].target, target) == 0) {
      b += s->cat.v[i].bytes;
      n++;
    }
  uv_mutex_unlock(&s->cat.mu);
  *bytes = b;
  *segments = n;
}

void tlc_store_opts_default(tlc_store_opts_t *o) {
  memset(o, 0, sizeof *o);
}

/* ---- results on the loop ---- */

static void free_target(tlc_store_target_t *t) {
  tlc__store_tmap_unref(t->s, t->wmap); /* the writer is done with the target */
  tlc_free(t->skpend);
  tlc_free(t->sk_out);
  tlc_free(t->gb);
  tlc_free(t->gt);
  tlc_free(t->ed);
  tlc__seg_fini(&t->seg);
  tlc_evlog_enc_fini(&t->enc);
  tlc_free(t);
}

static void on_async(uv_async_t *a) {
  tlc_store_t *s = a->data;
  rx_flush(s);
  tlc__store_flow_resume(s);
  uv_mutex_lock(&s->mu);
  res_t *r = STAILQ_FIRST(&s->res); /* the whole list, taken: its links stay as they are */
  STAILQ_INIT(&s->res);
  uv_mutex_unlock(&s->mu);
  while (r) {
    res_t *nx = STAILQ_NEXT(r, link);
    switch (r->type) {
    case R_LOG:
      tlc__store_log_direct(s, r->level, "%s", r->msg);
      break;
    case R_EVENT:
      if (s->o.event_cb) {
        tlc_store_event_t ev = { r->kind, r->target[0] ? r->target : NULL,
                                 r->path[0] ? r->path : NULL, r->reason, r->seq };
        s->o.event_cb(s->o.event_ud, &ev);
      }
      break;
    case R_CLOSED:
      free_target(r->t);
      break;
    case R_BARRIER:
      r->cb(r->ud);
      break;
    case R_MARK:
      r->mcb(r->ud, &r->pos);
      break;
    case R_STOPPED:
      break;
    default:
      break;
    }
    tlc_free(r);
    r = nx;
  }
  if (s->lp.closing)
    tlc__store_maybe_finish_close(s);
}

static void on_async_closed(uv_handle_t *h) {
  tlc_store_t *s = h->data;
  if (--s->lp.nhandles > 0)
    return; /* the last of the store's handles frees it */
  void (*cb)(void *) = s->lp.close_cb;
  void *ud = s->lp.close_ud;
  /* drop whatever is still queued (nothing after a clean stop) */
  cmd_t *c;
  while ((c = STAILQ_FIRST(&s->q)) != NULL) {
    STAILQ_REMOVE_HEAD(&s->q, link);
    tlc_free(c->buf);
    tlc_free(c->times);
    tlc_free(c->recs);
    tlc_free(c->conf);
    tlc__store_tmap_unref(s, c->map);
    tlc_free(c);
  }
  res_t *r;
  while ((r = STAILQ_FIRST(&s->res)) != NULL) {
    STAILQ_REMOVE_HEAD(&s->res, link);
    if (r->type == R_CLOSED)
      free_target(r->t);
    tlc_free(r);
  }
  /* left when the threads never ran (tlc_store_recover failed or was not called) */
  pend_t *p;
  while ((p = TAILQ_FIRST(&s->w.rx)) != NULL) {
    TAILQ_REMOVE(&s->w.rx, p, link);
    tlc__store_pend_free(s, p);
  }
  tlc__store_free_jobs(s);
  tlc__catalog_fini(&s->cat);
  for (size_t i = 0; i < s->ngpool; i++) {
    tlc_free(s->gpool_b[i]);
    tlc_free(s->gpool_t[i]);
  }
  uv_cond_destroy(&s->zcv);
  uv_cond_destroy(&s->xcv);
  uv_cond_destroy(&s->scv);
  uv_cond_destroy(&s->cv);
  uv_mutex_destroy(&s->mu);
  tlc_free(s->state_dir);
  tlc_free(s);
  if (cb)
    cb(ud);
}

void tlc__store_maybe_finish_close(tlc_store_t *s) {
  int exited;
  LOCKED(s, exited = s->thr_exited);
  if (s->thr_started && !exited)
    return;
  if (s->thr_started && !s->joined) {
    uv_thread_join(&s->thr);
    s->joined = 1;
    /* results pushed just before exit */
    on_async(&s->async);
    return; /* on_async calls us again */
  }
  if (uv_is_closing((uv_handle_t *)&s->async))
    return;
  s->lp.nhandles = 2;
  uv_close((uv_handle_t *)&s->lp.prep, on_async_closed);
  uv_close((uv_handle_t *)&s->async, on_async_closed);
}

void tlc_store_close(tlc_store_t *s, void (*cb)(void *), void *ud) {
  s->lp.close_cb = cb;
  s->lp.close_ud = ud;
  while (!TAILQ_EMPTY(&s->lp.targets))
    tlc_store_target_close(TAILQ_FIRST(&s->lp.targets));
  s->lp.closing = 1;
  if (s->thr_started) {
    cmd_t *c = tlc_calloc(1, sizeof *c);
    if (c) {
      c->type = C_STOP;
      enqueue(s, c, 0);
    } else {
      /* last resort: a static stop command is not possible to free; signal by flag */
      tlc__store_log_direct(s, TLC_LOG_ERR,
                            "close: out of memory; waiting for the writer to drain");
    }
  }
  tlc__store_maybe_finish_close(s);
}

int tlc_store_new(uv_loop_t *loop, const tlc_store_opts_t *opts, tlc_store_t **out) {
  *out = NULL;
  if (!opts || !opts->state_dir || !opts->state_dir[0])
    return TLC_EINVAL;
  tlc_store_t *s = tlc_calloc(1, sizeof *s);
  if (!s)
    return TLC_ENOMEM;
  s->loop = loop;
  s->o = *opts;
  STAILQ_INIT(&s->q);
  STAILQ_INIT(&s->res);
  TAILQ_INIT(&s->lp.targets);
  TAILQ_INIT(&s->lp.gather);
  TAILQ_INIT(&s->w.wlist);
  TAILQ_INIT(&s->w.rx);
  TAILQ_INIT(&s->wk.pend);
  TAILQ_INIT(&s->jq);
  tlc__store_apply_defaults(&s->o);
  s->qcap = s->o.queue_bytes;
  s->lp.turn = 1; /* a target's lend_turn 0: not lent */
  s->lp.gather_max = s->qcap / (4 * TLC_BIN1X_RECORD);
  if (s->lp.gather_max > GATHER_RECS)
    s->lp.gather_max = GATHER_RECS;
  if (s->lp.gather_max == 0)
    s->lp.gather_max = 1;
  s->wake_bytes = s->qcap / 8 < WAKE_BYTES ? s->qcap / 8 : WAKE_BYTES;
  s->gpool_keep = GPOOL_MIN; /* until a bin1x target opens (gpool_fill) */
  size_t n = strlen(opts->state_dir);
  while (n > 1 && opts->state_dir[n - 1] == '/')
    n--;
  s->state_dir = tlc_strndup(opts->state_dir, n);
  s->o.state_dir = s->state_dir;
  int rc = TLC_ENOMEM;
  if (!s->state_dir)
    goto fail_dir;
  rc = tlc__store_ensure_dir(s->state_dir);
  if (rc < 0)
    goto fail_mkdir;
  if ((rc = uv_mutex_init(&s->mu)) < 0)
    goto fail_mkdir;
  if ((rc = uv_cond_init(&s->cv)) < 0)
    goto fail_cond;
  if ((rc = uv_cond_init(&s->scv)) < 0)
    goto fail_scv;
  if ((rc = uv_cond_init(&s->xcv)) < 0)
    goto fail_xcv;
  if ((rc = uv_cond_init(&s->zcv)) < 0)
    goto fail_zcv;
  if ((rc = tlc__catalog_init(&s->cat)) < 0)
    goto fail_cat;
  if ((rc = uv_async_init(loop, &s->async, on_async)) < 0)
    goto fail_async;
  s->async.data = s;
  uv_prepare_init(loop, &s->lp.prep); /* cannot fail on Unix; after the last step that can */
  s->lp.prep.data = s;
  uv_prepare_start(&s->lp.prep, on_prepare);
  uv_unref((uv_handle_t *)&s->lp.prep); /* it never keeps the loop alive */
  if (s->o.gather_at_start)
    gpool_fill(s);
  *out = s;
  return 0;
fail_async:
  tlc__catalog_fini(&s->cat);
fail_cat:
  uv_cond_destroy(&s->zcv);
fail_zcv:
  uv_cond_destroy(&s->xcv);
fail_xcv:
  uv_cond_destroy(&s->scv);
fail_scv:
  uv_cond_destroy(&s->cv);
fail_cond:
  uv_mutex_destroy(&s->mu);
fail_mkdir:
  tlc_free(s->state_dir);
fail_dir:
  tlc_free(s);
  return rc;
}
