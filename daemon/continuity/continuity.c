/* continuity.c - checkpoints and restore of every target's statistics (see continuity.h).
 *
 * A checkpoint: tlc_ckpt_encode_begin and a first slice of tlc_ckpt_encode_step on the loop
 * (about one memcpy per area into a buffer; past SPILL_BYTES the buffer's bytes go to the .tmp
 * file from the loop, so a checkpoint holds about 1 MiB whatever the state's size), the storage
 * position asked at that same moment (opts.mark; without storage none);
 * a state not encoded within opts.slice_ns is frozen (tlc_target_freeze) and encoded on by an
 * idle handle, a slice per loop turn, then its input given back (tlc_target_thaw, 256 KiB per
 * turn); then a threadpool job writes the rest and the header, checksums the file (read back
 * in pieces when it was spilled) and makes it durable (fsync, rename, fsync dir). Invariant: from
 * the position asked to the end of the encoding nothing reaches the target's engine, so the file
 * covers exactly that position (the engine asserts it on its change sequence). A freeze that must
 * end early (the target's callback on_abort) gives the checkpoint up, never a byte. Per target at
 * most one in flight (slot_t.busy), and not frozen again before as long as its last freeze lasted;
 * a target whose engine sequence, bytes and connection counters did not move since its last
 * checkpoint is skipped. Cost on the loop: the encoding's memcpy (bench/bench_checkpoint: ~1.1x
 * memcpy of the file), at most one slice of it at a time.
 *
 * A restore (the TLC_TEV_CREATED observer, before storage's observer sees the target): read
 * the file (bounded by max_file_bytes), tlc_ckpt_restore, then replay the stored records after
 * its position: the target's segments in sequence order (tlc_segread_list), each read record
 * by record (tlc_segread_next), runs of whole records fed to tlc_target_feed with t->quiet set
 * (no observer: nothing is stored, published or logged twice), a manifest `disconnect` gap
 * applied as the live target made it (engine gap, evlog mapping gap, gaps counter) at its
 * offset; then one gap when the stream was open at the end (the restart). Blocking file reads
 * on the loop: at start (before READY for the targets found then) or when a source creates a
 * target that has stored state. A resync or evlog-overflow gap is reproduced only as far as
 * the stored bytes carry it (an overflow count does; bytes a resync skipped are not stored:
 * docs/continuity.md).
 *
 * Does not: checkpoint mappings loaded at run time (`tlcap mapping`), or history queries.
 */
#include "continuity/continuity.h"

#include "base/alloc.h"
#include "base/err.h"
#include "base/log.h"
#include "engine/engine.h"
#include "formats/ckbuf.h"
#include "formats/evmap.h"
#include "store/seg/segread.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define REPLAY_CHUNK     (1u << 20)
#define QNAMES_MAX       4096
#define MIDBLOCK_WAIT_MS 20
#define MIDBLOCK_WAITS   100 /* 2 s, then the block is cut (docs/continuity.md) */

typedef struct slot {
  int busy;
  int written;    /* a checkpoint was written (or restored) */
  int again;      /* shutdown: checkpoint once the one in flight is done */
  unsigned waits; /* rounds waited for the end of an evlog block (mid_block) */
  uint64_t fp[4]; /* what the last one covered: engine seq, bytes, connections, gaps */
  uint64_t thawed_at, frozen_ns; /* the end and length of its last freeze (mono ns) */
} slot_t;

typedef struct job {
  uv_work_t req;
  struct job *next; /* in tlc_cont.slicing while its target is frozen */
  tlc_cont_t *c;
  size_t idx;
  tlc_target_t *t; /* frozen for it (in the slicing list), else NULL */
  tlc_engine_saver_t sv;
  tlc_ckw_t w;
  tlc_ckpt_pos_t pos;
  int encoded, have_pos, queued, written_back, aborted;
  uint64_t gen;     /* the target's (tlc_target_t.gen): still the same after the preparation */
  size_t est, wlen; /* the buffer's size estimate; the file's length (the buffer is freed by
                       the threadpool job that wrote it) */
  int fd;           /* the .tmp file once a chunk was spilled into it (else -1) */
  uint64_t spilled; /* bytes of the file written from the loop (w holds what follows) */
  uint64_t slices, encode_ns, frozen_at, frozen_ns;
  uint64_t max_slice_ns, max_slice_cpu_ns; /* its longest slice: wall clock, thread CPU */
  int64_t wall_ns;
  char dir[1100];
  int rc;
  char why[2600];
  uint64_t write_ns;
} job_t;

struct tlc_cont {
  uv_loop_t *loop;
  tlc_targets_t *targets;
  tlc_cont_opts_t o;
  char state_dir[1024];
  uv_timer_t timer;
  uv_timer_t soon; /* a checkpoint right after a restore */
  uv_work_t warm;  /* starts libuv's threadpool at start (see tlc_cont_new) */
  uv_idle_t idle;  /* encodes the frozen targets' states a slice per loop turn */
  job_t *slicing;  /* jobs whose target is frozen (encoding, or its input given back) */
  slot_t *slots;   /* one per registry index (the registry never reorders) */
  size_t nslots;
  unsigned inflight;
  char **qnames; /* targets whose checkpoint was set aside at start: rebuilt when created */
  size_t nq;
  int closing, timers_closed;
  void (*close_cb)(void *);
  void *close_ud;
  tlc_cont_stats_t st;
};

static int64_t wall_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

static uint64_t mono_ns(void) {
  return uv_hrtime();
}

static int target_dir(const tlc_cont_t *c, const char *name, char *out, size_t cap) {
  int n = snprintf(out, cap, "%s/%s", c->state_dir, name);
  return n < 0 || (size_t)n >= cap ? TLC_ERANGE : 0;
}

static ssize_t index_of(const tlc_cont_t *c, const tlc_target_t *t) {
  for (size_t i = 0; i < c->targets->n; i++)
    if (c->targets->v[i] == t)
      return (ssize_t)i;
  return -1;
}

/* ---- writing (threadpool) ---- */

static int fsync_dir(const char *dir) {
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  int rc = 0;
  if (fd < 0)
    return -errno;
  if (fsync(fd) != 0)
    rc = -errno;
  close(fd);
  return rc;
}

/* mkdir -p: the state directory itself may not exist yet without storage. 0 or -errno. */
static int mkdir_p(const char *dir) {
  char p[1100];
  size_t n = strlen(dir);
  if (n == 0 || n >= sizeof p)
    return -ENAMETOOLONG;
  memcpy(p, dir, n + 1);
  for (size_t i = 1; i <= n; i++)
    if (p[i] == '/' || p[i] == '\0') {
      char ch = p[i];
      p[i] = '\0';
      if (mkdir(p, 0750) != 0 && errno != EEXIST)
        return -errno;
      p[i] = ch;
    }
  return 0;
}

/* A negative errno or a TLC_E* code, in words. */
static const char *err_text(int rc) {
  return rc <= TLC_ERR_BASE ? tlc_strerror(rc) : strerror(-rc);
}

/* Writes n bytes at the file's current offset. 0 or -errno (TLC_EIO for a short write). */
static int write_all(int fd, const uint8_t *p, size_t n) {
  while (n > 0) {
    ssize_t k = write(fd, p, n);
    if (k < 0 && errno == EINTR)
      continue;
    if (k <= 0)
      return k < 0 ? -errno : TLC_EIO;
    p += k;
    n -= (size_t)k;
  }
  return 0;
}

/* A checkpoint whose first bytes were spilled (j->fd, j->spilled): its last bytes, its header
 * (position and length now known) over the room left for it, then the checksum of the whole
 * file, read back in pieces of the job's buffer. 0 or an error (j->why set). */
static int finish_spilled(job_t *j, const char *tmp) {
  uint8_t h[TLC_CKPT_HEADER];
  uint64_t total = j->spilled + j->w.len, sum = TLC_CK_FNV_BASIS, off = 0;
  size_t piece = j->w.cap & ~(size_t)7;
  int rc;
  if (j->w.err != 0 || piece == 0) {
    snprintf(j->why, sizeof j->why, "encoding: %s", err_text(j->w.err ? j->w.err : TLC_EINVAL));
    return j->w.err ? j->w.err : TLC_EINVAL;
  }
  if ((rc = write_all(j->fd, j->w.p, j->w.len)) != 0) {
    snprintf(j->why, sizeof j->why, "write %s: %s", tmp, err_text(rc));
    return rc;
  }
  tlc_ckpt_header(h, &j->pos, j->wall_ns, total - TLC_CKPT_HEADER);
  errno = 0; /* a short pwrite sets none */
  if (pwrite(j->fd, h, sizeof h, 0) != (ssize_t)sizeof h) {
    rc = errno ? -errno : TLC_EIO;
    snprintf(j->why, sizeof j->why, "write %s: %s", tmp, err_text(rc));
    return rc;
  }
  while (off < total) {
    size_t n = total - off < piece ? (size_t)(total - off) : piece;
    ssize_t k = pread(j->fd, j->w.p, n, (off_t)off);
    if (k < 0 && errno == EINTR)
      continue;
    if (k != (ssize_t)n) { /* a short read back: pieces must stay multiples of 8 */
      rc = k < 0 ? -errno : TLC_EIO;
      snprintf(j->why, sizeof j->why, "read back %s: %s", tmp, err_text(rc));
      return rc;
    }
    sum = tlc_ck_fnv_more(sum, j->w.p, n);
    off += n;
  }
  errno = 0;
  if (pwrite(j->fd, &sum, 8, (off_t)total) != 8) {
    rc = errno ? -errno : TLC_EIO;
    snprintf(j->why, sizeof j->why, "write %s: %s", tmp, err_text(rc));
    return rc;
  }
  j->wlen = (size_t)(total + 8);
  return 0;
}

static void write_work(uv_work_t *req) {
  job_t *j = req->data;
  char tmp[1200], fin[1200];
  uint64_t t0 = mono_ns();
  int fd;
  snprintf(tmp, sizeof tmp, "%s/%s.tmp", j->dir, TLC_CKPT_NAME);
  snprintf(fin, sizeof fin, "%s/%s", j->dir, TLC_CKPT_NAME);
  if (j->fd >= 0) { /* spilled from the loop: the file is open, its first chunks written */
    fd = j->fd;
    j->rc = finish_spilled(j, tmp);
    j->fd = -1; /* this thread's now: closed below */
    if (j->rc != 0) {
      close(fd);
      unlink(tmp);
      return;
    }
  } else {
    j->rc = tlc_ckpt_finish(&j->w, &j->pos, j->wall_ns);
    if (j->rc != 0) {
      snprintf(j->why, sizeof j->why, "encoding: %s", tlc_strerror(j->rc));
      return;
    }
    if ((j->rc = mkdir_p(j->dir)) != 0) {
      snprintf(j->why, sizeof j->why, "mkdir %s: %s", j->dir, strerror(-j->rc));
      return;
    }
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0640);
    if (fd < 0) {
      j->rc = -errno;
      snprintf(j->why, sizeof j->why, "%s: %s", tmp, strerror(errno));
      return;
    }
    if ((j->rc = write_all(fd, j->w.p, j->w.len)) != 0) {
      snprintf(j->why, sizeof j->why, "write %s: %s", tmp, err_text(j->rc));
      close(fd);
      unlink(tmp);
      return;
    }
    j->wlen = j->w.len;
  }
  if (fsync(fd) != 0) { /* R5: a failed fsync is never trusted: the old checkpoint stays */
    j->rc = -errno;
    snprintf(j->why, sizeof j->why, "fsync %s: %s", tmp, strerror(errno));
    close(fd);
    unlink(tmp);
    return;
  }
  close(fd);
  if (rename(tmp, fin) != 0) {
    j->rc = -errno;
    snprintf(j->why, sizeof j->why, "rename %s: %s", tmp, strerror(errno));
    unlink(tmp);
    return;
  }
  j->rc = fsync_dir(j->dir);
  if (j->rc != 0)
    snprintf(j->why, sizeof j->why, "fsync %s: %s", j->dir, strerror(-j->rc));
  j->write_ns = mono_ns() - t0;
}

/* Threadpool: writes the file, then frees the buffer here (unmapping a large one takes
 * milliseconds, which the loop must not spend). */
static void write_and_free(uv_work_t *req) {
  job_t *j = req->data;
  write_work(req);
  tlc_ckw_fini(&j->w);
}

static void maybe_finish(tlc_cont_t *c);

#define PREP_BYTES ((size_t)4 << 20) /* a buffer this large is freed off the loop */

/* A large buffer freed in the threadpool (a job given up, or a target gone meanwhile). */
typedef struct bigfree {
  uv_work_t req;
  tlc_cont_t *c;
  tlc_ckw_t w;
} bigfree_t;

static void bigfree_work(uv_work_t *req) {
  bigfree_t *b = req->data;
  tlc_ckw_fini(&b->w);
}

static void bigfree_after(uv_work_t *req, int status) {
  bigfree_t *b = req->data;
  tlc_cont_t *c = b->c;
  (void)status;
  tlc_free(b);
  c->inflight--;
  maybe_finish(c);
}

/* Releases w (empty afterwards): a large one in the threadpool, a small one here. */
static void buffer_release(tlc_cont_t *c, tlc_ckw_t *w) {
  bigfree_t *b;
  if (w->cap >= PREP_BYTES && (b = tlc_malloc(sizeof *b)) != NULL) {
    b->c = c;
    b->w = *w;
    b->req.data = b;
    if (uv_queue_work(c->loop, &b->req, bigfree_work, bigfree_after) == 0) {
      c->inflight++;
      tlc_ckw_init(w, w->max);
      return;
    }
    tlc_free(b);
  }
  tlc_ckw_fini(w);
}

static void checkpoint_one(tlc_cont_t *c, size_t i, int may_slice);
static void spill_discard(job_t *j);
static void on_soon(uv_timer_t *h);
static void unlist(job_t *j);
static void thawed(job_t *j);
static void start_encoding(job_t *j, tlc_target_t *t, int may_slice);

static void job_done(job_t *j, size_t len) {
  tlc_cont_t *c = j->c;
  const char *name = j->idx < c->targets->n ? c->targets->v[j->idx]->name : "?";
  if (j->rc != 0) {
    c->st.write_errors++;
    tlc_log(TLC_LOG_ERR, TLC_LOGC_TARGET, "target %s: checkpoint not written: %s", name, j->why);
  } else {
    c->st.written++;
    c->st.last_write_ns = j->write_ns;
    TLC_LOGD(TLC_LOGC_TARGET,
             "target %s: checkpoint written (%zu bytes, %.1f ms; %" PRIu64
             " loop slices, longest %.3f ms (CPU %.3f ms), target held %.1f ms)",
             name, len, (double)j->write_ns / 1e6, j->slices, (double)j->max_slice_ns / 1e6,
             (double)j->max_slice_cpu_ns / 1e6, (double)j->frozen_ns / 1e6);
  }
  if (j->idx < c->nslots) {
    c->slots[j->idx].busy = 0;
    if (j->rc != 0)
      c->slots[j->idx].written = 0; /* tried again at the next interval */
  }
  {
    size_t idx = j->idx;
    spill_discard(j); /* a write that never ran */
    buffer_release(c, &j->w);
    tlc_free(j);
    if (idx < c->nslots && c->slots[idx].again && idx < c->targets->n) {
      /* the shutdown's checkpoint waited for this one: now (no position if storage is gone:
       * the state then covers every record, nothing is to replay) */
      c->slots[idx].again = 0;
      checkpoint_one(c, idx, 0);
    }
  }
  c->inflight--;
  maybe_finish(c);
}

static void write_after(uv_work_t *req, int status) {
  job_t *j = req->data;
  if (status != 0 && j->rc == 0) {
    j->rc = status;
    snprintf(j->why, sizeof j->why, "%s", uv_strerror(status));
  }
  j->written_back = 1;
  if (j->t == NULL) /* the target's input flows again: nothing else refers to the job */
    job_done(j, j->wlen);
}

/* Both the state (encoded) and the position (asked of storage) are in: to the threadpool. */
static void maybe_write(job_t *j) {
  int rc;
  if (!j->encoded || !j->have_pos || j->queued)
    return;
  j->queued = 1;
  j->req.data = j;
  rc = uv_queue_work(j->c->loop, &j->req, write_and_free, write_after);
  if (rc != 0) {
    j->rc = rc;
    snprintf(j->why, sizeof j->why, "threadpool: %s", uv_strerror(rc));
    write_after(&j->req, 0);
  }
}

/* A job given up before its state was encoded (abort_cb): freed once nothing refers to it
 * (the position may still be on its way). */
static void job_drop(job_t *j) {
  tlc_cont_t *c = j->c;
  spill_discard(j); /* now: a later job of the target may open its .tmp meanwhile */
  if (!j->have_pos)
    return; /* on_pos frees it */
  buffer_release(c, &j->w);
  tlc_free(j);
  c->inflight--;
  maybe_finish(c);
}

static void on_pos(void *ud, const tlc_ckpt_pos_t *pos) {
  job_t *j = ud;
  if (pos != NULL)
    j->pos = *pos;
  j->have_pos = 1;
  if (j->aborted)
    job_drop(j);
  else
    maybe_write(j);
}

/* ---- encoding in slices (the loop never stalls on a large target) ----
 *
 * The first slice runs where the checkpoint is taken; a state that is not encoded within
 * opts.slice_ns is frozen (tlc_target_freeze: its source stops reading, or its bytes are kept
 * in order) and encoded on by the idle handle, a slice per loop turn, so every other handle
 * (other targets' reads, subscribers, storage) runs between two slices; then its input is
 * given back in slices of THAW_BYTES. The state is frozen from the moment its position was
 * asked of storage until it was encoded, so the file covers exactly that position. */

#define THAW_BYTES  (256u << 10)      /* kept bytes fed per loop turn after the encoding */
#define SLICE_UNITS 16                /* rows encoded between two looks at the clock */
#define SPILL_BYTES ((size_t)1 << 20) /* encoded bytes held before they go to the file */

/* Writes what the encoding holds (its multiple of 8 bytes: the checksum is taken word-wise when
 * the file is read back) to the .tmp file, opened at the first spill, and keeps the rest: a
 * checkpoint holds about SPILL_BYTES plus one step's rows in memory, however large the state.
 * A buffered write of about SPILL_BYTES on the loop, as a slice's encoding costs. 0 or an
 * error (-errno). */
static int spill(job_t *j) {
  tlc_cont_t *c = j->c;
  size_t n = j->w.len & ~(size_t)7;
  int rc;
  if (j->fd < 0) {
    char tmp[1200];
    if ((rc = mkdir_p(j->dir)) != 0)
      return rc;
    snprintf(tmp, sizeof tmp, "%s/%s.tmp", j->dir, TLC_CKPT_NAME);
    /* read and write: the threadpool job reads it back for the checksum */
    j->fd = open(tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0640);
    if (j->fd < 0)
      return -errno;
  }
  if ((rc = write_all(j->fd, j->w.p, n)) != 0)
    return rc;
  memmove(j->w.p, j->w.p + n, j->w.len - n);
  j->w.len -= n;
  j->spilled += n;
  j->w.max = c->o.max_file_bytes - (size_t)j->spilled; /* the file's cap, not the buffer's */
  return 0;
}

/* A job's .tmp file, when it is given up before its write: closed and removed. */
static void spill_discard(job_t *j) {
  char tmp[1200];
  if (j->fd < 0)
    return;
  close(j->fd);
  j->fd = -1;
  snprintf(tmp, sizeof tmp, "%s/%s.tmp", j->dir, TLC_CKPT_NAME);
  unlink(tmp);
}

static uint64_t cpu_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Encodes target t's state for one slice (budget ns; UINT64_MAX: to the end). 1 done, 0 more,
 * or an error (w's). */
static int slice(job_t *j, tlc_target_t *t, uint64_t budget) {
  tlc_cont_t *c = j->c;
  uint64_t t0 = mono_ns(), c0 = cpu_ns(), dt, dc;
  int rc;
  do {
    rc = tlc_ckpt_encode_step(t, &j->sv, &j->w, SLICE_UNITS);
    if (rc >= 0 && j->w.err == 0 && j->w.len >= SPILL_BYTES) {
      int sr = spill(j);
      if (sr != 0) {
        tlc_log(TLC_LOG_ERR, TLC_LOGC_TARGET, "target %s: checkpoint %s/%s.tmp: %s", t->name,
                j->dir, TLC_CKPT_NAME, err_text(sr));
        rc = sr;
      }
    }
  } while (rc == 0 && mono_ns() - t0 < budget);
  dt = mono_ns() - t0;
  dc = cpu_ns() - c0;
  j->slices++;
  j->encode_ns += dt;
  c->st.slices++;
  if (dt > j->max_slice_ns)
    j->max_slice_ns = dt;
  if (dc > j->max_slice_cpu_ns)
    j->max_slice_cpu_ns = dc;
  if (budget != UINT64_MAX) { /* a stall of the loop: shutdown's whole encodings aside */
    if (dt > c->st.max_slice_ns)
      c->st.max_slice_ns = dt;
    if (dc > c->st.max_slice_cpu_ns)
      c->st.max_slice_cpu_ns = dc;
  }
  return rc;
}

static void job_fail_encode(job_t *j, tlc_target_t *t, int rc) {
  tlc_cont_t *c = j->c;
  tlc_log(TLC_LOG_ERR, TLC_LOGC_TARGET, "target %s: checkpoint not taken: %s", t->name,
          tlc_strerror(rc));
  c->st.write_errors++;
  if (j->idx < c->nslots) {
    c->slots[j->idx].busy = 0;
    c->slots[j->idx].written = 0;
  }
  j->aborted = 1;
  job_drop(j);
}

/* The state is encoded: its position and the file are the threadpool's; the input flows
 * again (in slices: unlist when it is all given back). */
static void encoded(job_t *j) {
  tlc_cont_t *c = j->c;
  j->encoded = 1;
  c->st.last_encode_ns = j->encode_ns;
  if (j->encode_ns > c->st.max_encode_ns)
    c->st.max_encode_ns = j->encode_ns;
  maybe_write(j);
}

static void on_idle(uv_idle_t *h) {
  tlc_cont_t *c = h->data;
  job_t *j = c->slicing;
  tlc_target_t *t;
  int rc;
  if (j == NULL) {
    uv_idle_stop(h);
    return;
  }
  /* round robin: this job goes to the end of the list */
  if (j->next != NULL) {
    job_t *last = j->next;
    while (last->next != NULL)
      last = last->next;
    c->slicing = j->next;
    j->next = NULL;
    last->next = j;
  }
  t = j->t;
  if (!j->encoded) {
    rc = slice(j, t, c->o.slice_ns);
    if (rc < 0) {
      unlist(j);
      (void)tlc_target_thaw(t, SIZE_MAX); /* the kept bytes, then reading again */
      job_fail_encode(j, t, rc);
      return;
    }
    if (rc == 1)
      encoded(j);
    return;
  }
  if (tlc_target_thaw(t, THAW_BYTES)) {
    thawed(j);
    unlist(j);
    if (j->written_back)
      job_done(j, j->wlen);
  }
}

/* The target's input flows again: how long it was held (a target is not frozen again before
 * as long has passed: its input flows at least half of the time). */
static void thawed(job_t *j) {
  tlc_cont_t *c = j->c;
  uint64_t now = mono_ns();
  j->frozen_ns = now - j->frozen_at;
  if (j->frozen_ns > c->st.max_frozen_ns)
    c->st.max_frozen_ns = j->frozen_ns;
  if (j->idx < c->nslots) {
    c->slots[j->idx].thawed_at = now;
    c->slots[j->idx].frozen_ns = j->frozen_ns;
  }
}

static void unlist(job_t *j) {
  tlc_cont_t *c = j->c;
  job_t **pp = &c->slicing;
  while (*pp != NULL && *pp != j)
    pp = &(*pp)->next;
  if (*pp == j)
    *pp = j->next;
  j->next = NULL;
  j->t = NULL;
  if (c->slicing == NULL)
    uv_idle_stop(&c->idle);
}

/* target.h abort_cb: the target's freeze ends early (a detach, the kept bytes at their cap,
 * the target freed). Called from inside the target: only forgets. */
static void on_abort(void *ud, tlc_target_t *t) {
  job_t *j = ud;
  tlc_cont_t *c = j->c;
  (void)t;
  thawed(j);
  unlist(j);
  if (j->encoded) { /* only its input was still being given back: the checkpoint stands */
    if (j->written_back)
      job_done(j, j->wlen);
    return;
  }
  c->st.aborted++;
  tlc_log(TLC_LOG_INFO, TLC_LOGC_TARGET,
          "target %s: checkpoint given up (its stream ended or its held input reached %zu "
          "bytes); again at the next interval",
          t->name, (size_t)TLC_TARGET_FREEZE_MAX);
  if (j->idx < c->nslots) {
    c->slots[j->idx].busy = 0;
    c->slots[j->idx].written = 0;
  }
  j->aborted = 1;
  job_drop(j);
}

/* Finishes every sliced job now (shutdown): the encodings to their end, the input given back. */
static void finish_slicing(tlc_cont_t *c) {
  while (c->slicing != NULL) {
    job_t *j = c->slicing;
    tlc_target_t *t = j->t;
    if (!j->encoded) {
      int rc = slice(j, t, UINT64_MAX);
      if (rc < 0) {
        unlist(j);
        (void)tlc_target_thaw(t, SIZE_MAX);
        job_fail_encode(j, t, rc);
        continue;
      }
      encoded(j);
    }
    unlist(j);
    (void)tlc_target_thaw(t, SIZE_MAX);
    if (j->written_back)
      job_done(j, j->wlen);
  }
}

static void fingerprint(const tlc_target_t *t, uint64_t fp[4]) {
  fp[0] = tlc_engine_seq(t->pipe.engine);
  fp[1] = t->pipe.dec.c.bytes;
  fp[2] = t->connections;
  fp[3] = t->gaps;
}

/* Checkpoints target i when its state moved since the last one and none is in flight.
 * may_slice 0 (shutdown): encoded here in one go. */
static void checkpoint_one(tlc_cont_t *c, size_t i, int may_slice) {
  tlc_target_t *t = c->targets->v[i];
  slot_t *s;
  job_t *j;
  uint64_t fp[4];
  if (i >= c->nslots)
    return;
  s = &c->slots[i];
  fingerprint(t, fp);
  if (s->written && memcmp(fp, s->fp, sizeof fp) == 0)
    return;
  if (s->busy) {
    c->st.skipped_busy++;
    if (!may_slice)
      s->again = 1; /* shutdown: taken when the one in flight is done */
    return;
  }
  if (may_slice && s->frozen_ns > 0 && mono_ns() - s->thawed_at < s->frozen_ns) {
    c->st.skipped_busy++; /* its input was held as long just now: the next round */
    return;
  }
  if (may_slice && c->o.mid_block != NULL && c->o.mid_block(c->o.mark_ud, t) &&
      s->waits < MIDBLOCK_WAITS) {
    /* between two blocks the position cuts nothing: try again shortly */
    s->waits++;
    uv_timer_start(&c->soon, on_soon, MIDBLOCK_WAIT_MS, 0);
    return;
  }
  s->waits = 0;
  j = tlc_calloc(1, sizeof *j);
  if (j == NULL)
    return;
  j->c = c;
  j->idx = i;
  j->gen = t->gen;
  j->fd = -1;
  if (target_dir(c, t->name, j->dir, sizeof j->dir) != 0) {
    tlc_free(j);
    return;
  }
  tlc_ckw_init(&j->w, c->o.max_file_bytes);
  {
    /* the buffer at about its final size at once (growing it by doubling would copy it), a
     * small state's, or what is held between two spills (spill) */
    tlc_engine_mem_t m;
    tlc_engine_mem(t->pipe.engine, &m);
    j->est = m.bytes + m.bytes / 8 + 65536;
    if (j->est > 2 * SPILL_BYTES)
      j->est = 2 * SPILL_BYTES;
  }
  s->busy = 1;
  c->inflight++;
  tlc_ckw_reserve(&j->w, j->est);
  start_encoding(j, t, may_slice);
}

/* Encodes job j's target: begin and a first slice here, the position asked at this same
 * moment; more than a slice: frozen and sliced on by on_idle. */
static void start_encoding(job_t *j, tlc_target_t *t, int may_slice) {
  tlc_cont_t *c = j->c;
  slot_t *s = &c->slots[j->idx];
  int rc;
  j->wall_ns = wall_ns();
  fingerprint(t, s->fp);
  rc = tlc_ckpt_encode_begin(t, &j->sv, &j->w);
  if (rc == 0)
    rc = slice(j, t, may_slice && !c->closing ? c->o.slice_ns : UINT64_MAX);
  if (rc < 0) {
    tlc_log(TLC_LOG_ERR, TLC_LOGC_TARGET, "target %s: checkpoint not taken: %s", t->name,
            tlc_strerror(rc));
    c->st.write_errors++;
    s->busy = 0;
    s->written = 0;
    spill_discard(j);
    buffer_release(c, &j->w);
    tlc_free(j);
    c->inflight--;
    maybe_finish(c);
    return;
  }
  s->written = 1;
  if (rc == 0) {
    /* more than a slice: the state stays as it is (input held) until encoded */
    if (tlc_target_freeze(t, on_abort, j) != 0) { /* cannot be: one job per target */
      (void)slice(j, t, UINT64_MAX);
    } else {
      j->t = t;
      j->frozen_at = mono_ns();
      j->next = c->slicing;
      c->slicing = j;
      uv_idle_start(&c->idle, on_idle);
    }
  }
  /* the position: everything queued to storage so far, which is what the state holds */
  if (c->o.mark == NULL || c->o.mark(c->o.mark_ud, t, on_pos, j) != 0)
    on_pos(j, NULL);
  if (j->t == NULL && !j->encoded)
    encoded(j); /* in one slice (j is not freed before the write) */
}

static void round_all(tlc_cont_t *c, int may_slice) {
  for (size_t i = 0; i < c->targets->n; i++)
    checkpoint_one(c, i, may_slice);
}

void tlc_cont_checkpoint_all(tlc_cont_t *c) {
  if (c == NULL)
    return;
  finish_slicing(c);
  round_all(c, 0); /* shutdown: encoded on the loop in one go */
}

static void on_timer(uv_timer_t *h) {
  round_all(h->data, 1);
}

static void on_soon(uv_timer_t *h) {
  round_all(h->data, 1);
}

/* ---- restore ---- */

/* Reads a whole file (at most max bytes). 0 with *buf and *len, -errno, TLC_ELIMIT. */
static int read_file(const char *path, size_t max, uint8_t **buf, size_t *len) {
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  struct stat sb;
  uint8_t *p;
  size_t off = 0;
  *buf = NULL;
  *len = 0;
  if (fd < 0)
    return -errno;
  if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
    close(fd);
    return TLC_EFRAME;
  }
  if ((uint64_t)sb.st_size > max) {
    close(fd);
    return TLC_ELIMIT;
  }
  p = tlc_malloc((size_t)sb.st_size + 1);
  if (p == NULL) {
    close(fd);
    return TLC_ENOMEM;
  }
  while (off < (size_t)sb.st_size) {
    ssize_t n = read(fd, p + off, (size_t)sb.st_size - off);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      break;
    off += (size_t)n;
  }
  close(fd);
  *buf = p;
  *len = off;
  return 0;
}

static void quarantine(tlc_cont_t *c, const char *name, const char *path, const char *why) {
  char q[1200], dst[1300];
  snprintf(q, sizeof q, "%s/.quarantine", c->state_dir);
  (void)mkdir(q, 0750);
  snprintf(q, sizeof q, "%s/.quarantine/%s", c->state_dir, name);
  (void)mkdir(q, 0750);
  snprintf(dst, sizeof dst, "%s/%s.%" PRId64, q, TLC_CKPT_NAME,
           (int64_t)(wall_ns() / 1000000000ll));
  c->st.quarantined++;
  if (c->nq < QNAMES_MAX) {
    char **nv = tlc_realloc(c->qnames, (c->nq + 1) * sizeof(*nv));
    if (nv != NULL) {
      c->qnames = nv;
      if ((nv[c->nq] = tlc_strndup(name, strlen(name))) != NULL)
        c->nq++;
    }
  }
  if (rename(path, dst) == 0)
    tlc_log(TLC_LOG_WARN, TLC_LOGC_TARGET,
            "target %s: checkpoint %s unusable (%s): moved to %s; rebuilding from its segments",
            name, path, why, dst);
  else
    tlc_log(TLC_LOG_WARN, TLC_LOGC_TARGET,
            "target %s: checkpoint %s unusable (%s), not moved (%s); rebuilding from its segments",
            name, path, why, strerror(errno));
}

/* One gap as the live target makes it at a disconnect: engine and evlog mapping forget what
 * is open; a disconnect is counted as one (the restart is not a disconnect). */
static void replay_gap(tlc_target_t *t, int disconnect) {
  tlc_dec_reset(&t->pipe.dec);
  tlc_engine_gap(t->pipe.engine);
  if (t->pipe.evmap != NULL)
    tlc_evmap_gap(t->pipe.evmap);
  if (disconnect)
    t->gaps++;
}

typedef struct rbuf {
  uint8_t *p;
  size_t len;
} rbuf_t;

static void rflush(tlc_cont_t *c, tlc_target_t *t, rbuf_t *b, int *opened) {
  if (b->len == 0)
    return;
  (void)tlc_target_feed(t, b->p, b->len); /* whole records: a strict error cannot come */
  c->st.replayed_bytes += b->len;
  b->len = 0;
  *opened = 1;
}

/* Applies the disconnect gaps of segment r recorded at offsets <= upto (all of them at the
 * offset itself with `incl`, else ... the same: a gap at a record's offset comes before it),
 * the first skip_disc of them excepted (the checkpoint has them). */
static void gap_upto(tlc_cont_t *c, tlc_target_t *t, tlc_segread_t *r, const tlc_seginfo_t *info,
                     size_t *gi, uint64_t upto, int incl, uint64_t *skip_disc, rbuf_t *b,
                     int *opened) {
  (void)incl;
  for (; *gi < info->ngaps; (*gi)++) {
    const char *reason;
    uint64_t cnt, goff;
    if (tlc_segread_gap(r, *gi, &reason, &cnt, &goff) != 0 || goff > upto)
      break;
    if (strcmp(reason, "disconnect") != 0)
      continue;
    if (cnt <= *skip_disc) {
      *skip_disc -= cnt;
      continue;
    }
    cnt -= *skip_disc;
    *skip_disc = 0;
    rflush(c, t, b, opened);
    while (cnt-- > 0)
      replay_gap(t, 1);
    *opened = 0;
  }
}

/* Replays the target's stored records after pos (pos NULL: all). Returns the bytes fed. */
static uint64_t replay_after(tlc_cont_t *c, tlc_target_t *t, const tlc_ckpt_pos_t *pos,
                             int *opened) {
  tlc_segent_t *v = NULL;
  size_t n = 0;
  rbuf_t b = { NULL, 0 };
  uint64_t recs = 0;
  if (tlc_segread_list(c->state_dir, t->name, (size_t)1 << 20, &v, &n) != 0 || n == 0)
    return 0;
  b.p = tlc_malloc(REPLAY_CHUNK);
  if (b.p == NULL) {
    tlc_free(v);
    return 0;
  }
  t->quiet = 1;
  for (size_t i = 0; i < n; i++) {
    tlc_segread_t *r;
    tlc_seginfo_t info;
    char err[200];
    uint64_t skip_bytes = 0, skip_disc = 0;
    size_t gi = 0;
    const uint8_t *rec;
    size_t len;
    uint64_t off;
    int rc;
    if (pos != NULL && pos->valid && v[i].seq < pos->seq)
      continue;
    if (pos != NULL && pos->valid && v[i].seq == pos->seq) {
      skip_bytes = pos->bytes;
      skip_disc = pos->disconnects;
    }
    if (tlc_segread_open(v[i].path, t->format, 0, &r, err, sizeof err) != 0) {
      tlc_log(TLC_LOG_WARN, TLC_LOGC_TARGET, "target %s: replay: %s: %s (skipped)", t->name,
              v[i].path, err);
      continue;
    }
    tlc_segread_info(r, &info);
    rc = 0;
    if (v[i].state != TLC_SEGST_COMPRESSED) {
      /* a plain file: read in large chunks up to each gap (gaps sit on record boundaries;
       * the decoder takes any cut in between) */
      int fd = open(v[i].path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
      uint64_t cur = skip_bytes, end = info.bytes;
      if (fd < 0) {
        rc = -errno;
      } else {
        for (;;) {
          uint64_t lim = end;
          gap_upto(c, t, r, &info, &gi, cur, 1, &skip_disc, &b, opened);
          if (gi < info.ngaps) {
            const char *reason;
            uint64_t cnt, goff;
            if (tlc_segread_gap(r, gi, &reason, &cnt, &goff) == 0 && goff < lim)
              lim = goff;
          }
          if (cur >= end)
            break;
          while (cur < lim) {
            size_t want = lim - cur < REPLAY_CHUNK ? (size_t)(lim - cur) : REPLAY_CHUNK;
            ssize_t got = pread(fd, b.p, want, (off_t)cur);
            if (got <= 0) {
              rc = got < 0 ? -errno : TLC_ETRUNC;
              break;
            }
            b.len = (size_t)got;
            recs += (uint64_t)got;
            cur += (uint64_t)got;
            rflush(c, t, &b, opened);
          }
          if (rc != 0)
            break;
        }
        close(fd);
      }
    } else {
      for (;;) {
        rc = tlc_segread_next(r, &rec, &len, &off);
        /* the gaps recorded before this record (or before the end) */
        gap_upto(c, t, r, &info, &gi, rc == 1 ? off : UINT64_MAX, 0, &skip_disc, &b, opened);
        if (rc != 1)
          break;
        if (off < skip_bytes)
          continue;
        if (b.len + len > REPLAY_CHUNK)
          rflush(c, t, &b, opened);
        if (len > REPLAY_CHUNK) { /* one block larger than the chunk: fed alone */
          (void)tlc_target_feed(t, rec, len);
          c->st.replayed_bytes += len;
          *opened = 1;
        } else {
          memcpy(b.p + b.len, rec, len);
          b.len += len;
        }
        recs += len;
      }
    }
    rflush(c, t, &b, opened);
    if (rc < 0)
      tlc_log(TLC_LOG_WARN, TLC_LOGC_TARGET, "target %s: replay: %s: read error %s", t->name,
              v[i].path, tlc_strerror(rc));
    tlc_segread_close(r);
  }
  tlc_dec_reset(&t->pipe.dec);
  t->quiet = 0;
  tlc_free(b.p);
  tlc_free(v);
  return recs;
}

static int was_quarantined(tlc_cont_t *c, const char *name) {
  for (size_t i = 0; i < c->nq; i++)
    if (strcmp(c->qnames[i], name) == 0)
      return 1;
  return 0;
}

static void restore(tlc_cont_t *c, tlc_target_t *t) {
  char dir[1100], path[1200], why[240] = "";
  uint8_t *buf = NULL;
  size_t len = 0;
  int rc, have = 0, open = 0;
  tlc_ckpt_info_t *info = NULL;
  tlc_ckpt_pos_t pos;
  uint64_t recs = 0, t0 = mono_ns();
  ssize_t idx = index_of(c, t);
  memset(&pos, 0, sizeof pos);
  if (target_dir(c, t->name, dir, sizeof dir) != 0)
    return;
  snprintf(path, sizeof path, "%s/%s", dir, TLC_CKPT_NAME);
  rc = read_file(path, c->o.max_file_bytes, &buf, &len);
  if (rc == 0) {
    info = tlc_malloc(sizeof *info);
    rc = info == NULL ? TLC_ENOMEM : tlc_ckpt_check(buf, len, info, why, sizeof why);
    if (rc == 0)
      rc = tlc_ckpt_restore(t, buf, len, why, sizeof why);
    if (rc == 0) {
      have = 1;
      pos = info->pos;
      open = info->connected;
    } else if (rc == TLC_ENOMEM) {
      tlc_log(TLC_LOG_ERR, TLC_LOGC_TARGET,
              "target %s: checkpoint %s: out of memory; rebuilding from its segments", t->name,
              path);
    } else {
      quarantine(c, t->name, path, why[0] ? why : tlc_strerror(rc));
    }
  } else if (rc != -ENOENT) {
    quarantine(c, t->name, path, rc == TLC_ELIMIT ? "larger than the cap" : tlc_strerror(rc));
  }
  tlc_free(buf);
  tlc_free(info);
  if (!have && !was_quarantined(c, t->name)) {
    /* No checkpoint: a new target (or segments from before checkpoints existed: they are not
     * replayed, the statistics start afresh). Its empty state is checkpointed at once, with
     * the storage position of its first record, so that a crash before the first periodic
     * checkpoint is brought forward from there. */
    if (idx >= 0 && (size_t)idx < c->nslots && !c->closing) {
      c->slots[idx].written = 0;
      uv_timer_start(&c->soon, on_soon, 0, 0);
    }
    return;
  }
  if (!have)
    pos.valid = 0; /* set aside: rebuilt from every segment */
  if (c->o.replay && (have ? pos.valid : 1))
    recs = replay_after(c, t, have ? &pos : NULL, &open);
  if (open)
    replay_gap(t, 0); /* the restart: the stream that was open is over */
  if (have)
    c->st.restored++;
  else
    c->st.rebuilt++;
  if (idx >= 0 && (size_t)idx < c->nslots) {
    /* what is on disk now is its state: the next checkpoint only once it moves; a state
     * brought forward is checkpointed at once (next loop turn, once storage has the target),
     * so that a crash soon after does not replay across this restart's boundary */
    c->slots[idx].written = have && recs == 0 && !open;
    fingerprint(t, c->slots[idx].fp);
    if (!c->slots[idx].written && !c->closing)
      uv_timer_start(&c->soon, on_soon, 0, 0);
  }
  tlc_log(TLC_LOG_NOTICE, TLC_LOGC_TARGET,
          "target %s: %s%s, %" PRIu64 " bytes of stored records replayed (%.1f ms), %" PRIu64
          " events in all",
          t->name, have ? "statistics restored from its checkpoint" : "statistics rebuilt",
          have && !pos.valid ? " (no storage position)" : "", recs, (double)(mono_ns() - t0) / 1e6,
          tlc_engine_counters(t->pipe.engine)->events);
  if (have && pos.valid)
    TLC_LOGD(TLC_LOGC_TARGET,
             "target %s: checkpoint position: segment %" PRIu64 " byte %" PRIu64 ", %" PRIu64
             " disconnects before it",
             t->name, pos.seq, pos.bytes, pos.disconnects);
}

static void obs_cb(void *ud, const tlc_target_t *ct, int kind, const char *detail) {
  tlc_cont_t *c = ud;
  tlc_target_t *t = (tlc_target_t *)(uintptr_t)ct; /* the registry's; restored in place */
  (void)detail;
  if (kind == TLC_TEV_CREATED && !c->closing)
    restore(c, t);
}

void tlc_cont_restore_all(tlc_cont_t *c) {
  DIR *d = opendir(c->state_dir);
  struct dirent *de;
  if (d == NULL)
    return;
  while ((de = readdir(d)) != NULL) {
    char path[1600];
    uint8_t *buf;
    size_t len;
    tlc_ckpt_info_t *info;
    tlc_target_t *t;
    if (de->d_name[0] == '.' || tlc_target_name_check(de->d_name, TLC_TARGET_NAME_MAX) != 0)
      continue;
    if (tlc_targets_find(c->targets, de->d_name) != NULL)
      continue;
    snprintf(path, sizeof path, "%s/%s/%s", c->state_dir, de->d_name, TLC_CKPT_NAME);
    if (read_file(path, c->o.max_file_bytes, &buf, &len) != 0)
      continue; /* none (a target without checkpoint is rebuilt when its source creates it) */
    info = tlc_malloc(sizeof *info);
    if (info != NULL) {
      char why[200] = "";
      int rc = tlc_ckpt_check(buf, len, info, why, sizeof why);
      if (rc == 0 && strcmp(info->name, de->d_name) != 0) {
        snprintf(why, sizeof why, "names target \"%s\"", info->name);
        rc = TLC_EFRAME;
      }
      if (rc == 0) /* created with the settings it was checkpointed with; restored by obs_cb */
        (void)tlc_targets_get(c->targets, info->name, info->src_kind, &info->conf, &t);
      else /* set aside now; the target is rebuilt from its segments when its source makes it */
        quarantine(c, de->d_name, path, why);
    }
    tlc_free(info);
    tlc_free(buf);
  }
  closedir(d);
}

/* ---- life cycle ---- */

static void warm_work(uv_work_t *req) {
  (void)req;
}

static void warm_after(uv_work_t *req, int status) {
  tlc_cont_t *c = req->data;
  (void)status;
  c->inflight--;
  maybe_finish(c);
}

int tlc_cont_new(uv_loop_t *loop, tlc_targets_t *targets, const tlc_cont_opts_t *o,
                 tlc_cont_t **out) {
  tlc_cont_t *c;
  tlc_target_observer_t ob;
  int rc;
  *out = NULL;
  c = tlc_calloc(1, sizeof *c);
  if (c == NULL)
    return TLC_ENOMEM;
  c->loop = loop;
  c->targets = targets;
  c->o = *o;
  if (c->o.max_file_bytes == 0)
    c->o.max_file_bytes = (size_t)4 << 30;
  if (c->o.slice_ns == 0)
    c->o.slice_ns = 1000000;
  snprintf(c->state_dir, sizeof c->state_dir, "%s", o->state_dir != NULL ? o->state_dir : ".");
  c->o.state_dir = c->state_dir;
  c->nslots = targets->max;
  c->slots = tlc_calloc(c->nslots > 0 ? c->nslots : 1, sizeof *c->slots);
  if (c->slots == NULL) {
    tlc_free(c);
    return TLC_ENOMEM;
  }
  memset(&ob, 0, sizeof ob);
  ob.cb = obs_cb;
  ob.ud = c;
  if ((rc = tlc_targets_observe(targets, &ob)) != 0) {
    tlc_free(c->slots);
    tlc_free(c);
    return rc;
  }
  uv_timer_init(loop, &c->timer);
  c->timer.data = c;
  uv_timer_init(loop, &c->soon);
  c->soon.data = c;
  uv_idle_init(loop, &c->idle);
  c->idle.data = c;
  if (c->o.interval_ms > 0)
    uv_timer_start(&c->timer, on_timer, c->o.interval_ms, c->o.interval_ms);
  /* Checkpoint files are written in libuv's threadpool, whose threads start with its first
   * job: started now, they are part of the daemon's threads from the start instead of
   * appearing at the first checkpoint (the thread count stays constant: test_soak). */
  c->warm.data = c;
  if (uv_queue_work(loop, &c->warm, warm_work, warm_after) == 0)
    c->inflight++;
  *out = c;
  return 0;
}

void tlc_cont_set_mark(tlc_cont_t *c, tlc_cont_mark_fn mark, void *ud, int replay) {
  /* (mid_block stays as given to tlc_cont_new) */
  if (c == NULL)
    return;
  c->o.mark = mark;
  c->o.mark_ud = ud;
  c->o.replay = replay;
}

static void maybe_finish(tlc_cont_t *c) {
  if (!c->closing || c->inflight > 0 || c->timers_closed < 3)
    return;
  void (*cb)(void *) = c->close_cb;
  void *ud = c->close_ud;
  for (size_t i = 0; i < c->nq; i++)
    tlc_free(c->qnames[i]);
  tlc_free(c->qnames);
  tlc_free(c->slots);
  tlc_free(c);
  if (cb != NULL)
    cb(ud);
}

static void timer_closed(uv_handle_t *h) {
  tlc_cont_t *c = h->data;
  c->timers_closed++;
  maybe_finish(c);
}

void tlc_cont_close(tlc_cont_t *c, void (*cb)(void *), void *ud) {
  if (c == NULL) {
    if (cb != NULL)
      cb(ud);
    return;
  }
  if (c->closing)
    return;
  c->closing = 1;
  c->close_cb = cb;
  c->close_ud = ud;
  finish_slicing(c); /* no target stays frozen */
  c->o.mark = NULL;  /* storage is going away: positions already asked for still come */
  tlc_targets_unobserve(c->targets, c);
  uv_close((uv_handle_t *)&c->timer, timer_closed);
  uv_close((uv_handle_t *)&c->soon, timer_closed);
  uv_close((uv_handle_t *)&c->idle, timer_closed);
}

void tlc_cont_get_stats(const tlc_cont_t *c, tlc_cont_stats_t *s) {
  *s = c->st;
}
