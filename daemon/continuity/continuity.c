/* continuity.c - checkpoints and restore of every target's statistics (see continuity.h).
 *
 * A checkpoint: tlc_ckpt_encode_begin and a first slice of tlc_ckpt_encode_step on the loop
 * (about one memcpy per area into a buffer; past SPILL_BYTES the buffer goes to a threadpool
 * job that writes it to the .tmp file while the encoding goes on into a second one, and the
 * encoding pauses while both are full: a checkpoint holds about 2 MiB whatever the state's
 * size), the storage position asked at that same moment (opts.mark; without storage none);
 * a state not encoded within opts.slice_ns is frozen (tlc_target_freeze) and encoded on by an
 * idle handle, a slice per loop turn, then its input given back (tlc_target_thaw, 256 KiB per
 * turn); then a threadpool job writes the rest and the header, checksums the file (read back
 * in pieces when it was spilled) and makes it durable (fsync, rename, fsync dir). The loop does
 * no file I/O for a checkpoint: its file operations are threadpool jobs in one ordered chain
 * per checkpoint (see "writing" below). Invariant: from
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
 * A mapping loaded at run time (`tlcap mapping`) is kept beside the checkpoint (TLC_MAP_NAME,
 * written in the threadpool: temporary file, fsync, rename, directory fsync) and loaded again
 * when the target is created. A forgotten target's checkpoint and mapping are deleted.
 *
 * Does not: history queries.
 */
#include "continuity/continuity.h"

#include "base/alloc.h"
#include "base/json.h"
#include "base/err.h"
#include "base/list.h"
#include "base/log.h"
#include "engine/engine.h"
#include "formats/ckbuf.h"
#include "formats/evmap.h"
#include "store/seg/iofault.h"
#include "store/seg/segread.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
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
  struct job *job;               /* the job in flight (busy), whose idx follows the slot */
} slot_t;

/* A file operation on a target's kept files, run in order, one at a time, in the threadpool:
 * write its run-time mapping (TLC_MAP_NAME: temporary file, fsync, rename, directory fsync), or
 * delete its checkpoint and mapping (a forgotten target). */
typedef struct fop {
  uv_work_t req;
  struct fop *next;
  struct tlc_cont *c;
  int del; /* 1: delete; 0: write data[0..len) */
  char dir[1100];
  char *data;
  size_t len;
  int rc;        /* the threadpool's result (0 or -errno) */
  char what[64]; /* the operation that failed */
} fop_t;

typedef struct job {
  uv_work_t req;         /* the step of its file chain in flight (io_busy) */
  TAILQ_ENTRY(job) link; /* in tlc_cont.slicing while its target is frozen */
  tlc_cont_t *c;
  size_t idx;
  tlc_target_t *t; /* frozen for it (in the slicing list), else NULL */
  tlc_engine_saver_t sv;
  tlc_ckw_t w;   /* the encoding's buffer (the final step's, then freed by it) */
  tlc_ckw_t out; /* the buffer a spill step writes while io_busy; else the spare one */
  tlc_ckpt_pos_t pos;
  int encoded, have_pos;
  int queued;       /* its final step was queued */
  int io_busy;      /* a step in flight: at most one, in order */
  int paused;       /* its encoding waits for a spill to be back (both buffers full) */
  int failed;       /* given up: an error (rc, why) or an abort */
  int reported;     /* a failure already counted and logged */
  int slot_freed;   /* the target's slot released (slot_release) */
  uint64_t gen;     /* the target's (tlc_target_t.gen): still the same after the preparation */
  size_t est, wlen; /* the buffer's size estimate; the file's length */
  int fd;           /* the .tmp file once a spill step opened it (else -1): the threadpool's */
  uint64_t spilled; /* bytes handed to spill steps (w holds what follows) */
  uint64_t slices, pauses, encode_ns, frozen_at, frozen_ns;
  uint64_t max_slice_ns, max_slice_cpu_ns; /* its longest slice: wall clock, thread CPU */
  int64_t wall_ns;
  char dir[1100];
  int rc;
  fop_t *forget; /* the target was forgotten: its files go once this job is done */
  char why[1500];
  int io_rc; /* a step's error (written by the step, read on the loop once it is back) */
  char io_why[1500];
  uint64_t write_ns;
} job_t;

struct tlc_cont {
  uv_loop_t *loop;
  tlc_targets_t *targets;
  tlc_cont_opts_t o;
  char state_dir[1024];
  uv_timer_t timer;
  uv_timer_t soon;           /* a checkpoint right after a restore */
  uv_work_t warm;            /* starts libuv's threadpool at start (see tlc_cont_new) */
  uv_idle_t idle;            /* encodes the frozen targets' states a slice per loop turn */
  TAILQ_HEAD(, job) slicing; /* jobs whose target is frozen (encoding, or its input given back) */
  slot_t *slots;             /* one per registry index (the registry never reorders) */
  size_t nslots;
  unsigned inflight;
  char **qnames; /* targets whose checkpoint was set aside at start: rebuilt when created */
  size_t nq;
  int closing, timers_closed;
  int shutdown;     /* the last checkpoints: encoded as far as their writes allow at once */
  int idle_closing; /* the idle handle is closed once the last checkpoint is done */
  void (*close_cb)(void *);
  void *close_ud;
  tlc_cont_stats_t st;
  fop_t *fops, *fops_tail; /* queued file operations; the head runs when fop_busy */
  int fop_busy;
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

/* ---- writing (threadpool) ----
 *
 * Every file operation of a checkpoint runs in libuv's threadpool, as one ordered chain per
 * checkpoint: at most one step in flight (job_t.io_busy), the next one queued on the loop once
 * the previous one is back (chain_next). The steps: spills (the first creates the directory and
 * opens the .tmp file; each writes one filled buffer), then either the final step (the last
 * bytes, the header, the checksum read back, fsync, rename, fsync of the directory) or, for a
 * checkpoint given up after its file was opened, a discard (closed and removed). A step that
 * fails removes the file itself. The loop only hands buffers over; the file descriptor is the
 * threadpool's. Every file call goes through tlc_io (iofault.h: faults and slow disks in the
 * tests). */

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
      int rc;
      p[i] = '\0';
      rc = tlc_io->mkdir(p, 0750);
      if (rc != 0 && rc != -EEXIST)
        return rc;
      p[i] = ch;
    }
  return 0;
}

/* A negative errno or a TLC_E* code, in words. */
static const char *err_text(int rc) {
  return rc <= TLC_ERR_BASE ? tlc_strerror(rc) : strerror(-rc);
}

static void tmp_path(const job_t *j, char *out, size_t cap) {
  snprintf(out, cap, "%s/%s.tmp", j->dir, TLC_CKPT_NAME);
}

/* Threadpool: the .tmp file closed (when open) and removed. */
static void tmp_remove(job_t *j) {
  char tmp[1200];
  if (j->fd >= 0) {
    (void)tlc_io->close(j->fd);
    j->fd = -1;
  }
  tmp_path(j, tmp, sizeof tmp);
  (void)tlc_io->unlink(tmp);
}

/* Threadpool: a step failed: the error in io_rc and io_why, the file removed. Returns rc. */
static int io_fail(job_t *j, int rc, const char *what, const char *path) {
  j->io_rc = rc;
  snprintf(j->io_why, sizeof j->io_why, "%s %s: %s", what, path, err_text(rc));
  tmp_remove(j);
  return rc;
}

/* n bytes at offset off (lseek and write: every write goes through tlc_io). 0 or -errno. */
static int write_at(int fd, const void *p, size_t n, uint64_t off) {
  size_t done;
  if (lseek(fd, (off_t)off, SEEK_SET) < 0)
    return -errno;
  return tlc_io_write_all(fd, p, n, &done);
}

/* Spill step: the .tmp file opened at the first one, then the filled buffer (out) written. */
static void spill_work(uv_work_t *req) {
  job_t *j = req->data;
  char tmp[1200];
  size_t done;
  int rc;
  tmp_path(j, tmp, sizeof tmp);
  if (j->fd < 0) {
    if ((rc = mkdir_p(j->dir)) != 0) {
      io_fail(j, rc, "mkdir", j->dir);
      return;
    }
    /* read and write: the final step reads it back for the checksum */
    rc = tlc_io->open(tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0640);
    if (rc < 0) {
      io_fail(j, rc, "open", tmp);
      return;
    }
    j->fd = rc;
  }
  if ((rc = tlc_io_write_all(j->fd, j->out.p, j->out.len, &done)) != 0)
    io_fail(j, rc, "write", tmp);
  j->out.len = 0; /* the loop's spare buffer again */
}

/* Final step of a spilled checkpoint: its last bytes, its header (position and length now
 * known) over the room left for it, then the checksum of the whole file, read back in pieces
 * through the larger of its two buffers. 0 or an error (io_rc, io_why set, file removed). */
static int finish_spilled(job_t *j, const char *tmp) {
  uint8_t h[TLC_CKPT_HEADER];
  uint64_t total = j->spilled + j->w.len, sum = TLC_CK_FNV_BASIS, off = 0;
  tlc_ckw_t *rb = j->out.cap > j->w.cap ? &j->out : &j->w;
  size_t piece = rb->cap & ~(size_t)7, done;
  int rc;
  if (j->w.err != 0 || piece == 0 || j->fd < 0) {
    rc = j->w.err ? j->w.err : TLC_EINVAL;
    return io_fail(j, rc, "encoding", tmp);
  }
  if ((rc = tlc_io_write_all(j->fd, j->w.p, j->w.len, &done)) != 0)
    return io_fail(j, rc, "write", tmp);
  tlc_ckpt_header(h, &j->pos, j->wall_ns, total - TLC_CKPT_HEADER);
  if ((rc = write_at(j->fd, h, sizeof h, 0)) != 0)
    return io_fail(j, rc, "write", tmp);
  while (off < total) { /* pieces stay multiples of 8: the checksum is taken word-wise */
    size_t n = total - off < piece ? (size_t)(total - off) : piece;
    int64_t k = tlc_io_pread_all(j->fd, rb->p, n, (int64_t)off);
    if (k != (int64_t)n)
      return io_fail(j, k < 0 ? (int)k : TLC_EIO, "read back", tmp);
    sum = tlc_ck_fnv_more(sum, rb->p, n);
    off += n;
  }
  if ((rc = write_at(j->fd, &sum, 8, total)) != 0)
    return io_fail(j, rc, "write", tmp);
  j->wlen = (size_t)(total + 8);
  return 0;
}

/* Final step: the file completed and made durable; then the buffers are freed here (unmapping a
 * large one takes milliseconds, which the loop must not spend). */
static void final_work(uv_work_t *req) {
  job_t *j = req->data;
  char tmp[1200], fin[1200];
  uint64_t t0 = mono_ns();
  size_t done;
  int rc;
  tmp_path(j, tmp, sizeof tmp);
  snprintf(fin, sizeof fin, "%s/%s", j->dir, TLC_CKPT_NAME);
  if (j->spilled > 0) { /* the file is open, its first buffers written */
    if (finish_spilled(j, tmp) != 0)
      goto out;
  } else {
    if ((rc = tlc_ckpt_finish(&j->w, &j->pos, j->wall_ns)) != 0) {
      j->io_rc = rc;
      snprintf(j->io_why, sizeof j->io_why, "encoding: %s", tlc_strerror(rc));
      goto out;
    }
    if ((rc = mkdir_p(j->dir)) != 0) {
      io_fail(j, rc, "mkdir", j->dir);
      goto out;
    }
    rc = tlc_io->open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0640);
    if (rc < 0) {
      io_fail(j, rc, "open", tmp);
      goto out;
    }
    j->fd = rc;
    if ((rc = tlc_io_write_all(j->fd, j->w.p, j->w.len, &done)) != 0) {
      io_fail(j, rc, "write", tmp);
      goto out;
    }
    j->wlen = j->w.len;
  }
  if ((rc = tlc_io->fsync(j->fd)) != 0) { /* R5: a failed fsync is never trusted */
    io_fail(j, rc, "fsync", tmp);
    goto out;
  }
  (void)tlc_io->close(j->fd);
  j->fd = -1;
  if ((rc = tlc_io->rename(tmp, fin)) != 0) {
    io_fail(j, rc, "rename", tmp);
    goto out;
  }
  if ((rc = tlc_io_fsync_dir(j->dir)) != 0) {
    j->io_rc = rc;
    snprintf(j->io_why, sizeof j->io_why, "fsync %s: %s", j->dir, err_text(rc));
    goto out;
  }
  j->write_ns = mono_ns() - t0;
out:
  tlc_ckw_fini(&j->w);
  tlc_ckw_fini(&j->out);
}

/* Discard step: a checkpoint given up after its file was opened. */
static void discard_work(uv_work_t *req) {
  tmp_remove(req->data);
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
static void on_soon(uv_timer_t *h);
static void on_idle(uv_idle_t *h);
static void chain_next(job_t *j);
static void start_encoding(job_t *j, tlc_target_t *t, int may_slice);
static void fop_queue(tlc_cont_t *c, fop_t *op);

/* The target's slot is free again (once per job): the checkpoint's file is written or gone and
 * its target thawed. A shutdown's checkpoint that waited for this one is taken now (no position
 * if storage is gone: the state then covers every record, nothing is to replay). */
static void slot_release(job_t *j) {
  tlc_cont_t *c = j->c;
  size_t idx = j->idx;
  if (j->slot_freed)
    return;
  j->slot_freed = 1;
  if (j->forget != NULL) {
    fop_queue(c, j->forget);
    j->forget = NULL;
  }
  if (idx >= c->nslots)
    return;
  c->slots[idx].busy = 0;
  c->slots[idx].job = NULL;
  if (j->failed)
    c->slots[idx].written = 0; /* tried again at the next interval */
  if (c->slots[idx].again && idx < c->targets->n) {
    c->slots[idx].again = 0;
    checkpoint_one(c, idx, 0);
  }
}

/* The job's end: counted, logged and freed. */
static void job_end(job_t *j) {
  tlc_cont_t *c = j->c;
  const char *name = j->idx < c->targets->n ? c->targets->v[j->idx]->name : "?";
  if (j->failed && !j->reported) {
    c->st.write_errors++;
    tlc_log(TLC_LOG_ERR, TLC_LOGC_TARGET, "target %s: checkpoint not written: %s", name, j->why);
  } else if (!j->failed) {
    c->st.written++;
    c->st.last_write_ns = j->write_ns;
    TLC_LOGD(TLC_LOGC_TARGET,
             "target %s: checkpoint written (%zu bytes, %.1f ms; %" PRIu64
             " loop slices, longest %.3f ms (CPU %.3f ms), %" PRIu64
             " paused for a write, target held %.1f ms)",
             name, j->wlen, (double)j->write_ns / 1e6, j->slices, (double)j->max_slice_ns / 1e6,
             (double)j->max_slice_cpu_ns / 1e6, j->pauses, (double)j->frozen_ns / 1e6);
  }
  slot_release(j);
  buffer_release(c, &j->w);
  buffer_release(c, &j->out);
  tlc_free(j);
  c->inflight--;
  maybe_finish(c);
}

/* A threadpool step is back (on the loop). */
static void step_after(uv_work_t *req, int status) {
  job_t *j = req->data;
  j->io_busy = 0;
  if (status != 0 && j->io_rc == 0) {
    j->io_rc = status;
    snprintf(j->io_why, sizeof j->io_why, "threadpool: %s", uv_strerror(status));
  }
  if (j->io_rc != 0 && !j->failed) {
    j->failed = 1;
    j->rc = j->io_rc;
    snprintf(j->why, sizeof j->why, "%s", j->io_why);
  }
  if (j->t != NULL) { /* its encoding goes on (or, given up, gives its input back) */
    j->paused = 0;
    uv_idle_start(&j->c->idle, on_idle);
  }
  chain_next(j);
}

/* Queues a step (io_busy: none in flight). */
static void queue_step(job_t *j, uv_work_cb work) {
  j->req.data = j;
  j->io_busy = 1;
  if (uv_queue_work(j->c->loop, &j->req, work, step_after) != 0) {
    /* cannot be (it fails only without a callback): the step runs here rather than leak */
    work(&j->req);
    step_after(&j->req, 0);
  }
}

/* The checkpoint's next step, decided on the loop whenever what it waits for came: a step back,
 * the position, the end of the encoding, its input given back. Ends (frees) the job once its
 * file is written or gone, its target thawed and its position in: the caller does not touch j
 * afterwards. */
static void chain_next(job_t *j) {
  if (j->io_busy)
    return;
  if (j->failed) {
    if (j->fd >= 0) {
      queue_step(j, discard_work);
      return;
    }
  } else if (!j->queued) {
    if (j->encoded && j->have_pos) {
      j->queued = 1;
      queue_step(j, final_work);
    }
    return;
  }
  if (j->t != NULL) /* its input is still being given back */
    return;
  slot_release(j);
  if (j->have_pos) /* else on_pos ends it */
    job_end(j);
}

static void on_pos(void *ud, const tlc_ckpt_pos_t *pos) {
  job_t *j = ud;
  if (pos != NULL)
    j->pos = *pos;
  j->have_pos = 1;
  chain_next(j);
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

/* Hands what the encoding holds (its multiple of 8 bytes: the checksum is taken word-wise when
 * the file is read back) to a spill step and encodes on into the spare buffer (the one the
 * previous spill wrote), the rest copied over: a checkpoint holds two buffers of about
 * SPILL_BYTES plus one step's rows, however large the state. Only while no step is in flight.
 * 0 or w's error. */
static int spill(job_t *j) {
  tlc_cont_t *c = j->c;
  size_t n = j->w.len & ~(size_t)7, tail = j->w.len - n;
  tlc_ckw_t full = j->w;
  j->w = j->out;
  j->w.len = 0;
  j->w.err = 0;
  j->w.max = c->o.max_file_bytes - (size_t)(j->spilled + n); /* the file's cap */
  tlc_ckw_reserve(&j->w, j->est);
  tlc_ckw_bytes(&j->w, full.p + n, tail);
  j->out = full;
  j->out.len = n;
  j->spilled += n;
  queue_step(j, spill_work);
  return j->w.err;
}

static uint64_t cpu_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Encodes target t's state for one slice (budget ns; UINT64_MAX: as far as it can). 1 done,
 * 0 more (j->paused: its buffer is full while the previous one is still being written: it goes
 * on when that write is back), or an error (w's). */
static int slice(job_t *j, tlc_target_t *t, uint64_t budget) {
  tlc_cont_t *c = j->c;
  uint64_t t0 = mono_ns(), c0 = cpu_ns(), dt, dc;
  int rc = 0;
  for (;;) {
    if (j->w.err == 0 && j->w.len >= SPILL_BYTES) {
      if (j->io_busy) {
        j->paused = 1;
        j->pauses++;
        break;
      }
      if ((rc = spill(j)) != 0)
        break;
    }
    rc = tlc_ckpt_encode_step(t, &j->sv, &j->w, SLICE_UNITS);
    if (rc != 0 || mono_ns() - t0 >= budget)
      break;
  }
  if (rc == 0 && !j->paused && !j->io_busy && j->w.err == 0 && j->w.len >= SPILL_BYTES)
    rc = spill(j); /* written while the loop does other work */
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

/* The encoding failed: counted and logged now; the job ends once its file is gone. */
static void fail_encode(job_t *j, tlc_target_t *t, int rc) {
  tlc_cont_t *c = j->c;
  tlc_log(TLC_LOG_ERR, TLC_LOGC_TARGET, "target %s: checkpoint not taken: %s", t->name,
          tlc_strerror(rc));
  c->st.write_errors++;
  j->failed = 1;
  j->reported = 1;
  j->rc = rc;
}

/* The state is encoded: its position and the file are the threadpool's; the input flows
 * again (in slices: unlist when it is all given back). */
static void encoded(job_t *j) {
  tlc_cont_t *c = j->c;
  j->encoded = 1;
  c->st.last_encode_ns = j->encode_ns;
  if (j->encode_ns > c->st.max_encode_ns)
    c->st.max_encode_ns = j->encode_ns;
  chain_next(j);
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
  if (j->t != NULL) /* listed */
    TAILQ_REMOVE(&c->slicing, j, link);
  j->t = NULL;
  if (TAILQ_EMPTY(&c->slicing))
    uv_idle_stop(&c->idle);
}

/* One turn of a sliced job: a slice of its encoding, or of its input given back. */
static void advance(job_t *j, uint64_t budget, size_t thaw_bytes) {
  tlc_target_t *t = j->t;
  if (!j->encoded && !j->failed) {
    int rc = slice(j, t, budget);
    if (rc == 1)
      encoded(j); /* listed: not freed */
    if (rc >= 0)
      return;
    fail_encode(j, t, rc);
  }
  if (j->failed && !j->encoded) { /* given up: the kept bytes at once, then reading again */
    unlist(j);
    thawed(j);
    (void)tlc_target_thaw(t, SIZE_MAX);
    chain_next(j);
    return;
  }
  if (tlc_target_thaw(t, thaw_bytes)) {
    thawed(j);
    unlist(j);
    chain_next(j);
  }
}

static void on_idle(uv_idle_t *h) {
  tlc_cont_t *c = h->data;
  job_t *j;
  /* the first job that can go on (not waiting for a write) */
  TAILQ_FOREACH(j, &c->slicing, link) {
    if (!j->paused || j->encoded || j->failed)
      break;
  }
  if (j == NULL) { /* each one waits for its write, whose end starts the handle again */
    uv_idle_stop(h);
    return;
  }
  /* round robin: this job goes to the end of the list */
  TAILQ_REMOVE(&c->slicing, j, link);
  TAILQ_INSERT_TAIL(&c->slicing, j, link);
  /* from the shutdown on (the sources are gone), as far as it can at once */
  advance(j, c->shutdown ? UINT64_MAX : c->o.slice_ns, c->shutdown ? SIZE_MAX : THAW_BYTES);
}

/* target.h abort_cb: the target's freeze ends early (a detach, the kept bytes at their cap,
 * the target freed). Called from inside the target: only forgets. */
static void on_abort(void *ud, tlc_target_t *t) {
  job_t *j = ud;
  tlc_cont_t *c = j->c;
  thawed(j);
  unlist(j);
  if (j->encoded || j->failed) { /* only its input was still being given back */
    chain_next(j);
    return;
  }
  c->st.aborted++;
  tlc_log(TLC_LOG_INFO, TLC_LOGC_TARGET,
          "target %s: checkpoint given up (its stream ended or its held input reached %zu "
          "bytes); again at the next interval",
          t->name, (size_t)TLC_TARGET_FREEZE_MAX);
  j->failed = 1;
  j->reported = 1; /* not a write error */
  chain_next(j);
}

/* Shutdown (the sources are gone): the sliced checkpoints go on as far as they can at once,
 * from the idle handle, which runs until the last checkpoint is done (tlc_cont_close). */
static void finish_slicing(tlc_cont_t *c) {
  c->shutdown = 1;
  if (!TAILQ_EMPTY(&c->slicing))
    uv_idle_start(&c->idle, on_idle);
}

static void fingerprint(const tlc_target_t *t, uint64_t fp[4]) {
  fp[0] = tlc_engine_seq(t->pipe.engine);
  fp[1] = t->pipe.dec.c.bytes;
  fp[2] = t->connections;
  fp[3] = t->gaps;
}

/* Checkpoints target i when its state moved since the last one and none is in flight.
 * may_slice 0 (shutdown): encoded as far as its writes allow at once. */
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
  tlc_ckw_init(&j->out, c->o.max_file_bytes);
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
  s->job = j;
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
    rc = slice(j, t, may_slice && !c->shutdown ? c->o.slice_ns : UINT64_MAX);
  if (rc == 0 && tlc_target_freeze(t, on_abort, j) != 0)
    rc = TLC_EINVAL; /* cannot be: one checkpoint per target */
  if (rc < 0) {
    fail_encode(j, t, rc);
    j->have_pos = 1; /* none asked */
    chain_next(j);   /* a spill in flight: ended once it is back and its file removed */
    return;
  }
  s->written = 1;
  if (c->o.on_checkpoint != NULL)
    c->o.on_checkpoint(c->o.hook_ud, t);
  if (rc == 0) {
    /* more than a slice: the state stays as it is (input held) until encoded */
    j->t = t;
    j->frozen_at = mono_ns();
    TAILQ_INSERT_HEAD(&c->slicing, j, link);
    uv_idle_start(&c->idle, on_idle);
  }
  /* the position: everything queued to storage so far, which is what the state holds (j is
   * not freed before its final step: not given up, nothing ends it here) */
  if (c->o.mark == NULL || c->o.mark(c->o.mark_ud, t, on_pos, j) != 0)
    on_pos(j, NULL);
  if (rc == 1)
    encoded(j); /* in one slice */
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

/* ---- kept files: the run-time mapping, a forgotten target's files (threadpool) ---- */

static void fop_work(uv_work_t *req) {
  fop_t *op = req->data;
  char path[1200], tmp[1220];
  int fd, rc = 0;
  snprintf(path, sizeof path, "%s/%s", op->dir, TLC_MAP_NAME);
  if (op->del) {
    char ck[1200];
    snprintf(ck, sizeof ck, "%s/%s", op->dir, TLC_CKPT_NAME);
    if (unlink(ck) != 0 && errno != ENOENT) {
      snprintf(op->what, sizeof op->what, "unlink %s", TLC_CKPT_NAME);
      op->rc = -errno;
      return;
    }
    if (unlink(path) != 0 && errno != ENOENT) {
      snprintf(op->what, sizeof op->what, "unlink %s", TLC_MAP_NAME);
      op->rc = -errno;
      return;
    }
    op->rc = tlc_io_fsync_dir(op->dir);
    if (op->rc == -ENOENT)
      op->rc = 0;
    if (op->rc != 0)
      snprintf(op->what, sizeof op->what, "fsync of the directory");
    return;
  }
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  if ((rc = mkdir_p(op->dir)) != 0) {
    snprintf(op->what, sizeof op->what, "mkdir");
    op->rc = rc;
    return;
  }
  fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0640);
  if (fd < 0) {
    snprintf(op->what, sizeof op->what, "open %s.tmp", TLC_MAP_NAME);
    op->rc = -errno;
    return;
  }
  if ((rc = write_at(fd, op->data, op->len, 0)) != 0) {
    snprintf(op->what, sizeof op->what, "write %s.tmp", TLC_MAP_NAME);
  } else if (fsync(fd) != 0) {
    rc = -errno;
    snprintf(op->what, sizeof op->what, "fsync %s.tmp", TLC_MAP_NAME);
  }
  if (close(fd) != 0 && rc == 0) {
    rc = -errno;
    snprintf(op->what, sizeof op->what, "close %s.tmp", TLC_MAP_NAME);
  }
  if (rc == 0 && rename(tmp, path) != 0) {
    rc = -errno;
    snprintf(op->what, sizeof op->what, "rename to %s", TLC_MAP_NAME);
  }
  if (rc == 0 && (rc = tlc_io_fsync_dir(op->dir)) != 0)
    snprintf(op->what, sizeof op->what, "fsync of the directory");
  if (rc != 0)
    (void)unlink(tmp);
  op->rc = rc;
}

static void fop_start(tlc_cont_t *c);

static void fop_after(uv_work_t *req, int status) {
  fop_t *op = req->data;
  tlc_cont_t *c = op->c;
  (void)status;
  if (op->rc != 0) {
    c->st.write_errors++;
    tlc_log(TLC_LOG_ERR, TLC_LOGC_TARGET, "%s: %s: %s", op->dir, op->what, err_text(op->rc));
  } else {
    TLC_LOGD(TLC_LOGC_TARGET, "%s: %s", op->dir,
             op->del ? "checkpoint and mapping removed" : "mapping kept");
  }
  c->fops = op->next;
  if (c->fops == NULL)
    c->fops_tail = NULL;
  c->fop_busy = 0;
  tlc_free(op->data);
  tlc_free(op);
  c->inflight--;
  fop_start(c);
  maybe_finish(c);
}

static void fop_start(tlc_cont_t *c) {
  while (!c->fop_busy && c->fops != NULL) {
    fop_t *op = c->fops;
    op->req.data = op;
    if (uv_queue_work(c->loop, &op->req, fop_work, fop_after) == 0) {
      c->fop_busy = 1;
      return;
    }
    c->fops = op->next; /* not queued: logged, dropped */
    if (c->fops == NULL)
      c->fops_tail = NULL;
    tlc_log(TLC_LOG_ERR, TLC_LOGC_TARGET, "%s: file operation not queued", op->dir);
    tlc_free(op->data);
    tlc_free(op);
    c->inflight--;
  }
}

/* Appends op to the file operations (in order: a target's writes and its deletion never
 * cross). Counted in inflight until done, so that closing waits for it. */
static void fop_queue(tlc_cont_t *c, fop_t *op) {
  op->c = c;
  op->next = NULL;
  if (c->fops_tail != NULL)
    c->fops_tail->next = op;
  else
    c->fops = op;
  c->fops_tail = op;
  c->inflight++;
  fop_start(c);
}

static fop_t *fop_new(tlc_cont_t *c, const tlc_target_t *t, int del) {
  fop_t *op = tlc_calloc(1, sizeof *op);
  if (op == NULL)
    return NULL;
  op->del = del;
  if (target_dir(c, t->name, op->dir, sizeof op->dir) != 0) {
    tlc_free(op);
    return NULL;
  }
  return op;
}

/* A mapping loaded at run time: kept in the state directory (written off the loop). */
static void keep_mapping(tlc_cont_t *c, const tlc_target_t *t) {
  fop_t *op;
  if (t->map_text == NULL || c->closing)
    return;
  if ((op = fop_new(c, t, 0)) == NULL || (op->data = tlc_malloc(t->map_len + 1)) == NULL) {
    tlc_free(op);
    tlc_log(TLC_LOG_ERR, TLC_LOGC_TARGET, "target %s: mapping not kept: %s", t->name,
            tlc_strerror(TLC_ENOMEM));
    return;
  }
  memcpy(op->data, t->map_text, t->map_len);
  op->len = t->map_len;
  fop_queue(c, op);
}

/* Target registry index `i` is leaving (forgotten): its files go (after the checkpoint in
 * flight for it, if any), and the slots after it move down with the registry. */
static void forget(tlc_cont_t *c, const tlc_target_t *t, size_t i) {
  fop_t *op;
  if (i >= c->nslots || i >= c->targets->n)
    return;
  op = fop_new(c, t, 1);
  if (c->slots[i].busy && c->slots[i].job != NULL) {
    c->slots[i].job->idx = SIZE_MAX; /* its slot is gone */
    c->slots[i].job->forget = op;
  } else if (op != NULL) {
    fop_queue(c, op);
  }
  for (size_t k = i + 1; k < c->targets->n && k < c->nslots; k++)
    if (c->slots[k].job != NULL)
      c->slots[k].job->idx = k - 1;
  memmove(&c->slots[i], &c->slots[i + 1], (c->nslots - i - 1) * sizeof *c->slots);
  memset(&c->slots[c->nslots - 1], 0, sizeof *c->slots);
}

/* The run-time mapping kept for the target, loaded before its checkpoint is restored (so that
 * the records replayed after it meet the same names as the live target). Blocking read, as
 * the checkpoint's. */
static void restore_mapping(tlc_cont_t *c, tlc_target_t *t, const char *dir) {
  char path[1200], err[200];
  uint8_t *buf = NULL;
  size_t len = 0;
  int rc;
  snprintf(path, sizeof path, "%s/%s", dir, TLC_MAP_NAME);
  rc = read_file(path, c->o.max_file_bytes, &buf, &len);
  if (rc == -ENOENT)
    return;
  if (rc != 0) {
    tlc_log(TLC_LOG_ERR, TLC_LOGC_TARGET, "target %s: kept mapping %s: %s", t->name, path,
            rc == TLC_ELIMIT ? "larger than the cap" : tlc_strerror(rc));
    return;
  }
  if (tlc_target_load_mapping_as(t, (const char *)buf, len, TLC_MAP_RESTORED, err, sizeof err) != 0)
    tlc_log(TLC_LOG_ERR, TLC_LOGC_TARGET, "target %s: kept mapping %s:%s", t->name, path, err);
  else
    tlc_log(TLC_LOG_INFO, TLC_LOGC_TARGET, "target %s: mapping %s restored: %zu areas", t->name,
            path, t->mapping.nareas);
  tlc_free(buf);
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
  restore_mapping(c, t, dir);
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
  if (c->o.replay && (have ? pos.valid : 1)) {
    if (have && c->o.on_replay != NULL)
      c->o.on_replay(c->o.hook_ud, t, &pos, 1);
    recs = replay_after(c, t, have ? &pos : NULL, &open);
    if (have && c->o.on_replay != NULL)
      c->o.on_replay(c->o.hook_ud, t, &pos, 0);
  }
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
  if (kind == TLC_TEV_CREATED && !c->closing)
    restore(c, t);
  else if (kind == TLC_TEV_MAPPING)
    keep_mapping(c, t);
  else if (kind == TLC_TEV_FORGOTTEN && detail != NULL)
    forget(c, t, (size_t)strtoull(detail, NULL, 10));
  else if (kind == TLC_TEV_RESET && !c->closing) {
    /* checkpointed soon, so that a restart does not bring the old statistics back */
    ssize_t i = index_of(c, t);
    if (i >= 0 && (size_t)i < c->nslots)
      c->slots[i].written = 0;
    uv_timer_start(&c->soon, on_soon, 0, 0);
  }
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
  TAILQ_INIT(&c->slicing);
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

static void timer_closed(uv_handle_t *h);

static void maybe_finish(tlc_cont_t *c) {
  if (!c->closing || c->inflight > 0)
    return;
  if (!c->idle_closing) { /* the last checkpoint is done: nothing starts the handle again */
    c->idle_closing = 1;
    uv_close((uv_handle_t *)&c->idle, timer_closed);
    return;
  }
  if (c->timers_closed < 3)
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
  finish_slicing(c); /* the checkpoints in flight go on: waited for below */
  c->o.mark = NULL;  /* storage is going away: positions already asked for still come */
  tlc_targets_unobserve(c->targets, c);
  uv_close((uv_handle_t *)&c->timer, timer_closed);
  uv_close((uv_handle_t *)&c->soon, timer_closed);
  maybe_finish(c); /* the idle handle once no checkpoint is in flight */
}

void tlc_cont_get_stats(const tlc_cont_t *c, tlc_cont_stats_t *s) {
  *s = c->st;
}

void tlc_cont_dump(const tlc_cont_t *c, tlc_json_w_t *j) {
  const tlc_cont_stats_t *s = &c->st;
  tlc_json_w_open(j, "checkpoints", '{');
  tlc_json_w_u64(j, "written", s->written);
  tlc_json_w_u64(j, "write_errors", s->write_errors);
  tlc_json_w_u64(j, "aborted", s->aborted);
  tlc_json_w_u64(j, "restored", s->restored);
  tlc_json_w_u64(j, "rebuilt", s->rebuilt);
  tlc_json_w_u64(j, "quarantined", s->quarantined);
  tlc_json_w_u64(j, "slices", s->slices);
  tlc_json_w_u64(j, "max_slice_us", s->max_slice_ns / 1000);
  tlc_json_w_u64(j, "max_slice_cpu_us", s->max_slice_cpu_ns / 1000);
  tlc_json_w_u64(j, "max_encode_ms", s->max_encode_ns / 1000000);
  tlc_json_w_u64(j, "max_frozen_ms", s->max_frozen_ns / 1000000);
  tlc_json_w_u64(j, "last_write_ms", s->last_write_ns / 1000000);
  tlc_json_w_close(j, '}');
}
