/* continuity.c - checkpoints and restore of every target's statistics (see continuity.h).
 *
 * A checkpoint: tlc_ckpt_encode on the loop (the target's whole state into one buffer; about
 * one memcpy per area: bench/bench_checkpoint measures the loop's stall), then the storage
 * position (opts.mark; without storage none), then a threadpool job that finishes the header,
 * checksums and writes the file (tmp, fsync, rename, fsync dir). Per target at most one in
 * flight (slot_t.busy); a target whose engine sequence, bytes and connection counters did not
 * move since its last checkpoint is skipped.
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
#define _GNU_SOURCE /* pipe2, syscall */
#include "continuity.h"

#include "ckbuf.h"
#include "engine.h"
#include "evmap.h"
#include "log.h"
#include "tlc_alloc.h"
#include "tlc_err.h"
#include "segread.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define REPLAY_CHUNK     (1u << 20)
#define QNAMES_MAX       4096
#define MIDBLOCK_WAIT_MS 20
#define MIDBLOCK_WAITS   100 /* 2 s, then the block is cut (docs/continuity.md) */
#define CHILDREN_MAX     2 /* checkpoint processes at a time; a third large target waits a round */

typedef struct slot {
  int busy;
  int written;    /* a checkpoint was written (or restored) */
  int again;      /* shutdown: checkpoint once the one in flight is done */
  unsigned waits; /* rounds waited for the end of an evlog block (mid_block) */
  uint64_t fp[4]; /* what the last one covered: engine seq, bytes, connections, gaps */
} slot_t;

typedef struct job {
  uv_work_t req;
  uv_poll_t poll; /* forked: the child's status pipe */
  pid_t pid;      /* forked: the child encoding and writing (0: encoded here) */
  int to_fd;      /* forked: the position goes to the child here */
  int from_fd;    /* forked: its status comes back here */
  tlc_cont_t *c;
  size_t idx;
  tlc_ckw_t w;
  tlc_ckpt_pos_t pos;
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
  slot_t *slots;   /* one per registry index (the registry never reorders) */
  size_t nslots;
  unsigned inflight;
  unsigned children; /* checkpoint processes running (at most CHILDREN_MAX) */
  char **qnames;     /* targets whose checkpoint was set aside at start: rebuilt when created */
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

static void write_work(uv_work_t *req) {
  job_t *j = req->data;
  char tmp[1200], fin[1200];
  uint64_t t0 = mono_ns();
  size_t off = 0;
  int fd;
  j->rc = tlc_ckpt_finish(&j->w, &j->pos, j->wall_ns);
  if (j->rc != 0) {
    snprintf(j->why, sizeof j->why, "encoding: %s", tlc_strerror(j->rc));
    return;
  }
  if ((j->rc = mkdir_p(j->dir)) != 0) {
    snprintf(j->why, sizeof j->why, "mkdir %s: %s", j->dir, strerror(-j->rc));
    return;
  }
  snprintf(tmp, sizeof tmp, "%s/%s.tmp", j->dir, TLC_CKPT_NAME);
  snprintf(fin, sizeof fin, "%s/%s", j->dir, TLC_CKPT_NAME);
  fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0640);
  if (fd < 0) {
    j->rc = -errno;
    snprintf(j->why, sizeof j->why, "%s: %s", tmp, strerror(errno));
    return;
  }
  while (off < j->w.len) {
    ssize_t n = write(fd, j->w.p + off, j->w.len - off);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      j->rc = n < 0 ? -errno : TLC_EIO;
      snprintf(j->why, sizeof j->why, "write %s: %s", tmp, n < 0 ? strerror(errno) : "short");
      close(fd);
      unlink(tmp);
      return;
    }
    off += (size_t)n;
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

static void maybe_finish(tlc_cont_t *c);
static void checkpoint_one(tlc_cont_t *c, size_t i, int may_fork);
static void on_soon(uv_timer_t *h);

static void job_done(job_t *j, size_t len) {
  tlc_cont_t *c = j->c;
  const char *name = j->idx < c->targets->n ? c->targets->v[j->idx]->name : "?";
  if (j->rc != 0) {
    c->st.write_errors++;
    tlc_log(TLC_LOG_ERR, TLC_LOGC_TARGET, "target %s: checkpoint not written: %s", name, j->why);
  } else {
    c->st.written++;
    c->st.last_write_ns = j->write_ns;
    TLC_LOGD(TLC_LOGC_TARGET, "target %s: checkpoint written (%zu bytes, %.1f ms%s)", name, len,
             (double)j->write_ns / 1e6, j->pid > 0 ? ", by a child process" : "");
  }
  if (j->idx < c->nslots) {
    c->slots[j->idx].busy = 0;
    if (j->rc != 0)
      c->slots[j->idx].written = 0; /* tried again at the next interval */
  }
  if (j->pid > 0)
    c->children--;
  {
    size_t idx = j->idx;
    tlc_ckw_fini(&j->w);
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
  job_done(j, j->w.len);
}

/* ---- encoding in a child process (copy-on-write: the loop stalls only for fork) ---- */

typedef struct child_status {
  int rc;
  uint64_t len, write_ns;
  char why[2600];
} child_status_t;

static void close_fds_but(int a, int b) {
  int lo = a < b ? a : b, hi = a < b ? b : a;
#if defined(SYS_close_range)
  if (syscall(SYS_close_range, 3u, (unsigned)lo - 1u, 0u) == 0 &&
      (hi - lo < 2 || syscall(SYS_close_range, (unsigned)lo + 1u, (unsigned)hi - 1u, 0u) == 0) &&
      syscall(SYS_close_range, (unsigned)hi + 1u, ~0u, 0u) == 0)
    return;
#endif
  for (long fd = 3, mx = sysconf(_SC_OPEN_MAX) > 0 ? sysconf(_SC_OPEN_MAX) : 1024;
       fd < mx && fd < 1048576; fd++)
    if (fd != a && fd != b)
      close((int)fd);
}

/* The child: the state as it was at fork(), encoded; the position from the parent; the file
 * written; the status back. Only memory code and file system calls: no log, no loop. */
static void child_main(job_t *j, tlc_target_t *t) {
  child_status_t st;
  struct pollfd pf;
  size_t got = 0;
  close_fds_but(j->to_fd, j->from_fd);
  memset(&st, 0, sizeof st);
  tlc_ckw_init(&j->w, j->c->o.max_file_bytes);
  st.rc = tlc_ckpt_encode(t, &j->w);
  if (st.rc != 0) {
    snprintf(st.why, sizeof st.why, "encoding: %s", tlc_strerror(st.rc));
    goto out;
  }
  pf.fd = j->to_fd;
  pf.events = POLLIN;
  while (got < sizeof j->pos) {
    ssize_t n;
    if (poll(&pf, 1, 120000) <= 0) {
      st.rc = TLC_EIO;
      snprintf(st.why, sizeof st.why, "no storage position from the daemon");
      goto out;
    }
    n = read(j->to_fd, (char *)&j->pos + got, sizeof j->pos - got);
    if (n <= 0) {
      st.rc = TLC_EIO;
      snprintf(st.why, sizeof st.why, "no storage position from the daemon");
      goto out;
    }
    got += (size_t)n;
  }
  j->req.data = j;
  write_work(&j->req);
  st.rc = j->rc;
  st.len = j->w.len;
  st.write_ns = j->write_ns;
  memcpy(st.why, j->why, sizeof st.why);
out:
  (void)!write(j->from_fd, &st, sizeof st);
  _exit(0);
}

static void child_closed(uv_handle_t *h) {
  job_t *j = h->data;
  close(j->from_fd);
  job_done(j, j->w.len);
}

static void on_child(uv_poll_t *p, int status, int events) {
  job_t *j = p->data;
  child_status_t st;
  ssize_t n;
  int ws;
  (void)status;
  (void)events;
  n = read(j->from_fd, &st, sizeof st);
  if (n < 0 && errno == EAGAIN)
    return;
  if (n == (ssize_t)sizeof st) {
    j->rc = st.rc;
    j->write_ns = st.write_ns;
    j->w.len = (size_t)st.len; /* reported size only: the buffer was the child's */
    memcpy(j->why, st.why, sizeof j->why);
    j->why[sizeof j->why - 1] = '\0';
  } else {
    j->rc = TLC_EIO;
    snprintf(j->why, sizeof j->why, "the checkpoint process ended without a status");
  }
  while (waitpid(j->pid, &ws, 0) < 0 && errno == EINTR)
    ;
  if (j->to_fd >= 0) {
    close(j->to_fd);
    j->to_fd = -1;
  }
  uv_poll_stop(p);
  uv_close((uv_handle_t *)p, child_closed);
}

/* Forks the child for target t's checkpoint j. 0, or an error (nothing started). */
static int fork_job(tlc_cont_t *c, job_t *j, tlc_target_t *t) {
  int to[2], from[2];
  pid_t pid;
  if (pipe2(to, O_CLOEXEC) != 0)
    return -errno;
  if (pipe2(from, O_CLOEXEC) != 0) {
    int e = -errno;
    close(to[0]);
    close(to[1]);
    return e;
  }
  j->to_fd = to[0];
  j->from_fd = from[1];
  pid = fork();
  if (pid == 0)
    child_main(j, t); /* never returns */
  close(to[0]);
  close(from[1]);
  if (pid < 0) {
    int e = -errno;
    close(to[1]);
    close(from[0]);
    return e;
  }
  j->pid = pid;
  j->to_fd = to[1];
  j->from_fd = from[0];
  (void)fcntl(j->from_fd, F_SETFL, fcntl(j->from_fd, F_GETFL) | O_NONBLOCK);
  j->poll.data = j;
  if (uv_poll_init(c->loop, &j->poll, j->from_fd) != 0 ||
      uv_poll_start(&j->poll, UV_READABLE | UV_DISCONNECT, on_child) != 0) {
    /* cannot watch it: wait for it here (rare; the child exits once it has no position) */
    int ws;
    close(j->to_fd);
    while (waitpid(pid, &ws, 0) < 0 && errno == EINTR)
      ;
    close(j->from_fd);
    j->pid = 0;
    return TLC_EIO;
  }
  return 0;
}

static void on_pos(void *ud, const tlc_ckpt_pos_t *pos) {
  job_t *j = ud;
  int rc;
  if (pos != NULL)
    j->pos = *pos;
  if (j->pid > 0) { /* the child waits for it (a pipe's buffer holds it: never blocks) */
    (void)!write(j->to_fd, &j->pos, sizeof j->pos);
    close(j->to_fd);
    j->to_fd = -1;
    return;
  }
  j->req.data = j;
  rc = uv_queue_work(j->c->loop, &j->req, write_work, write_after);
  if (rc != 0) {
    j->rc = rc;
    snprintf(j->why, sizeof j->why, "threadpool: %s", uv_strerror(rc));
    write_after(&j->req, 0);
  }
}

static void fingerprint(const tlc_target_t *t, uint64_t fp[4]) {
  fp[0] = tlc_engine_seq(t->pipe.engine);
  fp[1] = t->pipe.dec.c.bytes;
  fp[2] = t->connections;
  fp[3] = t->gaps;
}

/* Checkpoints target i when its state moved since the last one and none is in flight. */
static void checkpoint_one(tlc_cont_t *c, size_t i, int may_fork) {
  tlc_target_t *t = c->targets->v[i];
  slot_t *s;
  job_t *j;
  uint64_t fp[4], t0;
  if (i >= c->nslots)
    return;
  s = &c->slots[i];
  fingerprint(t, fp);
  if (s->written && memcmp(fp, s->fp, sizeof fp) == 0)
    return;
  if (s->busy) {
    c->st.skipped_busy++;
    if (!may_fork)
      s->again = 1; /* shutdown: taken when the one in flight is done */
    return;
  }
  if (may_fork && c->o.mid_block != NULL && c->o.mid_block(c->o.mark_ud, t) &&
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
  j->wall_ns = wall_ns();
  if (target_dir(c, t->name, j->dir, sizeof j->dir) != 0) {
    tlc_free(j);
    return;
  }
  j->to_fd = j->from_fd = -1;
  if (may_fork && !c->closing && c->o.fork_bytes != SIZE_MAX) {
    tlc_engine_mem_t m;
    tlc_engine_mem(t->pipe.engine, &m);
    if (m.bytes >= c->o.fork_bytes && c->children < CHILDREN_MAX) {
      int rc;
      t0 = mono_ns();
      rc = fork_job(c, j, t);
      if (rc == 0) {
        c->children++;
        c->st.last_encode_ns = mono_ns() - t0;
        if (c->st.last_encode_ns > c->st.max_encode_ns)
          c->st.max_encode_ns = c->st.last_encode_ns;
        s->busy = 1;
        s->written = 1;
        memcpy(s->fp, fp, sizeof fp);
        c->inflight++;
        if (c->o.mark == NULL || c->o.mark(c->o.mark_ud, t, on_pos, j) != 0)
          on_pos(j, NULL);
        return;
      }
      tlc_log(TLC_LOG_WARN, TLC_LOGC_TARGET,
              "target %s: checkpoint process not started (%s): encoding on the loop", t->name,
              tlc_strerror(rc));
    }
  }
  tlc_ckw_init(&j->w, c->o.max_file_bytes);
  t0 = mono_ns();
  if (tlc_ckpt_encode(t, &j->w) != 0) {
    tlc_log(TLC_LOG_ERR, TLC_LOGC_TARGET, "target %s: checkpoint not taken: %s", t->name,
            tlc_strerror(j->w.err));
    c->st.write_errors++;
    tlc_ckw_fini(&j->w);
    tlc_free(j);
    return;
  }
  c->st.last_encode_ns = mono_ns() - t0;
  if (c->st.last_encode_ns > c->st.max_encode_ns)
    c->st.max_encode_ns = c->st.last_encode_ns;
  s->busy = 1;
  s->written = 1;
  memcpy(s->fp, fp, sizeof fp);
  c->inflight++;
  if (c->o.mark == NULL || c->o.mark(c->o.mark_ud, t, on_pos, j) != 0)
    on_pos(j, NULL);
}

static void round_all(tlc_cont_t *c, int may_fork) {
  for (size_t i = 0; i < c->targets->n; i++)
    checkpoint_one(c, i, may_fork);
}

void tlc_cont_checkpoint_all(tlc_cont_t *c) {
  if (c != NULL)
    round_all(c, 0); /* shutdown: encoded on the loop, no process left behind */
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
  if (c->o.fork_bytes == 0)
    c->o.fork_bytes = (size_t)8 << 20;
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
  if (!c->closing || c->inflight > 0 || c->timers_closed < 2)
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
  c->o.mark = NULL; /* storage is going away: positions already asked for still come */
  tlc_targets_unobserve(c->targets, c);
  uv_close((uv_handle_t *)&c->timer, timer_closed);
  uv_close((uv_handle_t *)&c->soon, timer_closed);
}

void tlc_cont_get_stats(const tlc_cont_t *c, tlc_cont_stats_t *s) {
  *s = c->st;
}
