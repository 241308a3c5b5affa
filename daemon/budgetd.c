/* budgetd.c - timing budgets on the live targets (see budgetd.h).
 *
 * One `struct tlc_budgetd_w` per watched target, allocated on its own (its address is the
 * watch's ud), kept by target pointer in d->bws (a few per daemon: a linear search on target
 * events, none per sample). The watch itself is the engine tap's ud.
 *
 * Restarts: as continuity checkpoints a target's statistics, its watch is saved beside them
 * (BWCK_NAME, written in the threadpool by a job that owns its bytes and path, so a watch
 * freed meanwhile does not matter); a watch made when its target is created takes the file
 * back. The engine's checkpoint is restored (and its stored records after it replayed) before
 * this observer sees the target, so the watch is the checkpoint's: violations among the
 * replayed records are not counted again. One write per checkpoint, at most one in flight
 * per target (continuity's rule), each to a temporary file of its own.
 *
 * Where a violation is stored (segment, byte offsets of its first and closing records): a
 * batch with violations (wiring.c's observer: tlc_budgetd_batch) hands them to the batch's
 * store mark (locd.h), shared with the extremes' (xlocd.c); its answer is where the records
 * are counted back from, into the segment written before it when they started there. A
 * location is given only while the count can be trusted, else it stays 0. A watch checkpoint
 * taken while marks are in flight is held until the last is back.
 *
 * Subscribers and the broker get a violation as a rate-limited target event (vserve.h): each
 * answer of their limiter says until when the budget's next would only be counted, and until
 * then the violations are held back here, a count per budget and consumer (vgate_t), handed
 * over with the next call or, before the watch's budgets change or it goes, on their own. A
 * storm thus pays a compare per violation, not the limiter's call.
 */
#include "daemon/budgetd.h"
#include "daemon/locd.h"
#include "daemon/rolld.h"

#include "base/alloc.h"
#include "base/err.h"
#include "base/fileread.h"
#include "base/log.h"
#include "budget/budget.h"
#include "fleet/fleet.h"
#include "formats/evmap.h"
#include "formats/mapping.h"
#include "pubsub/pubsub.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define BWCK_NAME "budgets.checkpoint"
#define BWCK_MAX  (256u << 20) /* the largest watch file read back */

#define LOC_BATCH 16 /* violations of one batch a mark locates (the rest: no location) */

/* Until when a budget's violations are held back from one consumer of target events (pubsub,
 * fleet), and how many were since its last call. */
typedef struct vgate {
  uint64_t until_ms; /* the limiter's answer (0: none, call) */
  uint64_t held;
} vgate_t;

/* A budget's gates: to the subscribers and to the broker. */
typedef struct vgates {
  vgate_t ps, fleet;
} vgates_t;

/* A violation waiting for its location. */
typedef struct loc_v {
  uint32_t budget;
  uint64_t count, seq_start, seq_end;
} loc_v_t;

struct tlc_budgetd_w {
  tlc_daemon_t *d;
  tlc_target_t *t; /* NULL once detached (a mark still in flight holds this) */
  tlc_bwatch_t *w;
  unsigned gen; /* bumped at every attach: budget indexes and sequences may have changed */
  size_t npend, inflight;
  loc_v_t pend[LOC_BATCH]; /* violations of the batch being pushed */
  uint64_t marks;          /* marks placed so far (a mark's id) */
  /* A checkpoint of the watch taken while marks were in flight: written once the last of
   * them is back, with the locations they brought (bwck_locate) */
  struct bwck_job *ck;
  uint64_t ck_mark;
  unsigned ck_gen;
  /* the target events' gates of the watch's first ngates budgets (those beyond, or all without
   * memory: every violation calls) */
  vgates_t *gates;
  size_t ngates;
};

static void bwck_held(struct tlc_budgetd_w *bw, int patch);

/* A batch's violations, handed to its store mark: where they are is counted back from it. */
typedef struct loc_job {
  struct tlc_budgetd_w *bw;
  unsigned gen;
  uint64_t id;
  size_t n;
  loc_v_t v[LOC_BATCH];
} loc_job_t;

/* ---- names, as the exports show them ---- */

/* An area's name: the target's mapping's, else its evlog mapping's (names as the stream
 * brings them); NULL: none. */
static const char *area_name(void *ud, uint32_t handle) {
  const tlc_target_t *t = ((struct tlc_budgetd_w *)ud)->t;
  const tlc_map_area_t *a = t->has_mapping ? tlc_mapping_find(&t->mapping, handle) : NULL;
  if (a != NULL && a->name[0] != '\0')
    return a->name;
  if (t->pipe.evmap != NULL)
    return tlc_evmap_name(t->pipe.evmap, handle);
  return NULL;
}

/* Table context `context` of t's engine: a task's CONTEXTS name (the mapping's, else the RTOS
 * task names'), else core<N>, task<HEX>, thread<HEX>. NULL: no such context. */
static const char *ctx_name_t(const tlc_target_t *t, uint32_t context, char *buf, size_t len) {
  tlc_ctx_t c;
  const char *n;
  if (t->pipe.engine == NULL || tlc_engine_context(t->pipe.engine, context, &c) != 0)
    return NULL;
  if (c.kind == TLC_CTXK_TASK && t->has_mapping &&
      (n = tlc_mapping_ctx_name(&t->mapping, c.key)) != NULL)
    return n;
  if (c.kind == TLC_CTXK_TASK && (n = tlc_mapping_ctx_name(&t->rtos_names, c.key)) != NULL)
    return n;
  if (c.kind == TLC_CTXK_CORE && c.core == TLC_CORE_UNKNOWN)
    snprintf(buf, len, "core?");
  else if (c.kind == TLC_CTXK_CORE)
    snprintf(buf, len, "core%u", (unsigned)c.core);
  else
    snprintf(buf, len, "%s%llX", c.kind == TLC_CTXK_TASK ? "task" : "thread",
             (unsigned long long)c.key);
  return buf;
}

static const char *ctx_name(void *ud, uint32_t context, char *buf, size_t len) {
  return ctx_name_t(((struct tlc_budgetd_w *)ud)->t, context, buf, len);
}

void tlc_budgetd_names(void *tv, uint32_t handle, uint8_t row_kind, uint64_t state,
                       uint32_t context, char *area, size_t alen, char *ctx, size_t clen) {
  const tlc_target_t *t = tv;
  struct tlc_budgetd_w x;
  const char *n;
  x.t = (tlc_target_t *)t;
  if (row_kind == TLC_ROW_STATE)
    (void)tlc_mapping_state_display(t->has_mapping ? &t->mapping : NULL, handle, state, area, alen);
  else if ((n = area_name(&x, handle)) != NULL && n[0] != '\0')
    snprintf(area, alen, "%s", n);
  else
    snprintf(area, alen, "%08X", handle);
  if (context == TLC_CTX_NONE || (n = ctx_name_t(t, context, ctx, clen)) == NULL)
    snprintf(ctx, clen, "-");
  else if (n != ctx)
    snprintf(ctx, clen, "%s", n);
}

/* ---- the violation fan-out ---- */

/* v for the Alertmanager (alert/), with its names: made only for it, out of line, so that a
 * storm without one pays neither them nor their stack in on_violation. */
#if defined(__GNUC__)
__attribute__((noinline))
#endif
static void
alert_violation(struct tlc_budgetd_w *bw, const tlc_violation_t *v) {
  const tlc_tbudget_t *b = tlc_bwatch_budget(bw->w, v->budget);
  char area[300], ctx[128];
  tlc_alert_violation_t a;
  tlc_budgetd_names(bw->t, v->handle, v->row_kind, v->state, v->context, area, sizeof(area), ctx,
                    sizeof(ctx));
  memset(&a, 0, sizeof(a));
  a.budget = b->name;
  a.target = bw->t->name;
  a.area = area;
  a.context = v->context == TLC_CTX_NONE ? "" : ctx;
  a.stat = tlc_tbudget_stat_name(v->stat);
  a.value = v->value;
  a.limit = v->limit;
  a.over = v->over;
  a.start = v->start;
  a.end = v->end;
  a.epoch = v->epoch;
  a.wall_ns = v->wall_ms * 1000000;
  tlc_alert_violation(bw->d->alert, &a);
}

/* v to the subscribers (fleet 0) or to the broker (fleet 1) after `held` held back: their
 * limiter's answer (pubsub.h: tlc_pubsub_violation). */
static uint64_t vsend(struct tlc_budgetd_w *bw, const tlc_violation_t *v, uint64_t now,
                      uint64_t held, int fleet) {
  uint64_t key = tlc_bwatch_key(bw->w, v->budget);
  if (fleet)
    return tlc_fleet_violation(bw->d->fleet, bw->t->name, bw->w, v, key, now, held);
  return tlc_pubsub_violation(bw->d->pubsub, bw->t->name, bw->w, v, key, now, held);
}

/* v to one consumer of target events through its gate g (NULL: none): held back while the
 * limiter's last answer holds. */
static inline void gate_send(struct tlc_budgetd_w *bw, const tlc_violation_t *v, vgate_t *g,
                             uint64_t now, int fleet) {
  if (g == NULL) {
    (void)vsend(bw, v, now, 0, fleet);
  } else if (now < g->until_ms) {
    g->held++;
  } else {
    g->until_ms = vsend(bw, v, now, g->held, fleet);
    g->held = 0;
  }
}

/* Hands every budget's held-back violations over, as counted, and forgets the gates: before
 * the watch's budgets change (their indexes and keys with them) or it goes. */
static void gates_flush(struct tlc_budgetd_w *bw) {
  tlc_daemon_t *d = bw->d;
  uint64_t now = uv_now(d->in.loop);
  for (size_t i = 0; i < bw->ngates; i++) {
    const vgates_t *g = &bw->gates[i];
    uint64_t key = tlc_bwatch_key(bw->w, i);
    if (g->ps.held > 0 && d->pubsub != NULL)
      tlc_pubsub_violations_held(d->pubsub, bw->t->name, bw->w, i, key, now, g->ps.held);
    if (g->fleet.held > 0 && d->fleet != NULL)
      tlc_fleet_violations_held(d->fleet, bw->t->name, bw->w, i, key, now, g->fleet.held);
  }
  tlc_free(bw->gates);
  bw->gates = NULL;
  bw->ngates = 0;
}

/* Fresh gates for the watch's budgets (without memory: none, every violation calls). */
static void gates_make(struct tlc_budgetd_w *bw) {
  size_t n = tlc_bwatch_nbudgets(bw->w);
  if (n > 0 && (bw->gates = tlc_calloc(n, sizeof(vgates_t))) != NULL)
    bw->ngates = n;
}

/* Every new violation of every live target, on the loop thread, inside the engine's push
 * (budget/budget.h: on_violation): no I/O here, each module queues what it sends. */
static void on_violation(void *ud, const tlc_violation_t *v) {
  struct tlc_budgetd_w *bw = ud;
  tlc_daemon_t *d = bw->d;
  if (bw->npend < LOC_BATCH && v->seq_end != 0) {
    loc_v_t *p = &bw->pend[bw->npend++];
    p->budget = v->budget;
    p->count = v->count;
    p->seq_start = v->seq_start;
    p->seq_end = v->seq_end;
  }
  if (d->alert != NULL)
    alert_violation(bw, v);
  /* subscribers and the lab's broker: target events, rate-limited per budget (vserve), held
   * back here while the limiter said none would go (vgate_t) */
  if (d->pubsub != NULL || d->fleet != NULL) {
    uint64_t now = uv_now(d->in.loop);
    vgates_t *g = v->budget < bw->ngates ? &bw->gates[v->budget] : NULL;
    if (d->pubsub != NULL)
      gate_send(bw, v, g != NULL ? &g->ps : NULL, now, 0);
    if (d->fleet != NULL)
      gate_send(bw, v, g != NULL ? &g->fleet : NULL, now, 1);
  }
  /* the trend's violations per step, counted in the rollup minute of its end: a rate's here;
   * the others come to the rollups as the engine's tag of their sample (the watch's tap
   * answers their number: budget.h), no call of their own */
  if (v->stat == TLC_BSTAT_RATE)
    tlc_rolld_violation(d, bw->t, v);
}

/* ---- watches ---- */

static struct tlc_budgetd_w **find(tlc_daemon_t *d, const tlc_target_t *t) {
  for (size_t i = 0; i < d->nbws; i++)
    if (d->bws[i]->t == t)
      return &d->bws[i];
  return NULL;
}

/* 1 when some budget of the running configuration applies to target `name`. */
static int applies(const tlc_daemon_t *d, const char *name) {
  const tlc_tbudget_set_t *s = &d->in.cfg.bset;
  for (size_t i = 0; i < s->n; i++)
    if (tlc_tbudget_target_match(&s->b[i], name))
      return 1;
  return 0;
}

/* ---- where a violation is stored ---- */

/* The mark after a batch with violations is back (at: where its records are). */
static void located(void *ud, const tlc_locd_at_t *at) {
  loc_job_t *j = ud;
  struct tlc_budgetd_w *bw = j->bw;
  bw->inflight--;
  if (bw->t == NULL) { /* detached meanwhile */
    if (bw->inflight == 0)
      tlc_free(bw);
    tlc_free(j);
    return;
  }
  if (j->gen == bw->gen) /* else the budgets were reloaded meanwhile */
    for (size_t i = 0; i < j->n; i++) {
      uint64_t loc[4];
      if (tlc_locd_span(at, j->v[i].seq_start, j->v[i].seq_end, loc))
        (void)tlc_bwatch_locate(bw->w, j->v[i].budget, j->v[i].count, j->v[i].seq_end, loc);
    }
  if (bw->ck != NULL && j->id >= bw->ck_mark)
    bwck_held(bw, 1);
  tlc_free(j);
}

void tlc_budgetd_batch(tlc_daemon_t *d, const tlc_target_t *t) {
  struct tlc_budgetd_w *bw;
  loc_job_t *j;
  (void)d;
  if (t->conf.watch == NULL)
    return;
  bw = tlc_bwatch_ud(t->conf.watch);
  if (bw->npend == 0)
    return;
  if (tlc_locd_ready(t) && (j = tlc_malloc(sizeof(*j))) != NULL) {
    j->bw = bw;
    j->gen = bw->gen;
    j->id = bw->marks + 1;
    j->n = bw->npend;
    memcpy(j->v, bw->pend, bw->npend * sizeof(bw->pend[0]));
    if (tlc_locd_want(t, located, j) == 0) {
      bw->inflight++;
      bw->marks++;
    } else
      tlc_free(j);
  }
  bw->npend = 0;
}

/* The watch becomes a tap of t's engine (again: its rows are asked again). */
static void attach(struct tlc_budgetd_w *bw) {
  tlc_engine_t *e = bw->t->pipe.engine;
  bw->gen++;
  bw->npend = 0;
  if (e == NULL)
    return;
  if (tlc_bwatch_add_tap(bw->w, e) < 0)
    tlc_log(TLC_LOG_ERR, TLC_LOGC_TARGET, "target %s: no tap left for its budgets", bw->t->name);
}

static void detach(tlc_daemon_t *d, struct tlc_budgetd_w **slot) {
  struct tlc_budgetd_w *bw = *slot;
  if (bw->ck != NULL)
    bwck_held(bw, 0); /* written as it was taken */
  if (bw->t->pipe.engine != NULL)
    tlc_engine_remove_tap(bw->t->pipe.engine, bw->w);
  bw->t->conf.watch = NULL;
  gates_flush(bw);
  tlc_bwatch_free(bw->w);
  bw->w = NULL;
  bw->t = NULL;
  if (bw->inflight == 0) /* else the last mark's callback frees it */
    tlc_free(bw);
  *slot = d->bws[--d->nbws];
}

/* ---- restarts ---- */

typedef struct bwck_job {
  uv_work_t req;
  uint8_t *blob;
  size_t len;
  int rc;
  char what[64];
  char dir[1100], target[129];
  unsigned seq;
  tlc_daemon_t *d;
  struct bwck_job *next;    /* on d->bwck_busy while its write runs */
  struct bwck_job *pending; /* the target's next write, started when this one is done */
} bwck_job_t;

static int mkdirs(char *path) {
  for (char *p = path + 1; *p != '\0'; p++)
    if (*p == '/') {
      *p = '\0';
      if (mkdir(path, 0755) != 0 && errno != EEXIST) {
        *p = '/';
        return -errno;
      }
      *p = '/';
    }
  return mkdir(path, 0755) != 0 && errno != EEXIST ? -errno : 0;
}

static void bwck_work(uv_work_t *req) {
  bwck_job_t *j = req->data;
  char tmp[1200], fin[1200], dir[sizeof(j->dir)];
  size_t off = 0;
  int fd;
  snprintf(tmp, sizeof(tmp), "%s/%s.tmp%u", j->dir, BWCK_NAME, j->seq);
  snprintf(fin, sizeof(fin), "%s/%s", j->dir, BWCK_NAME);
  if (j->blob == NULL) { /* the target is forgotten: its saved watch goes with it */
    if (unlink(fin) != 0 && errno != ENOENT) {
      j->rc = -errno;
      snprintf(j->what, sizeof(j->what), "unlink");
    }
    return;
  }
  /* on a copy: mkdirs cuts the path in place, and the loop reads j->dir meanwhile (bwck_start
   * matches a newer write of the same target against the running one) */
  snprintf(dir, sizeof(dir), "%s", j->dir);
  if ((j->rc = mkdirs(dir)) != 0) {
    snprintf(j->what, sizeof(j->what), "mkdir");
    return;
  }
  if ((fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)) < 0) {
    j->rc = -errno;
    snprintf(j->what, sizeof(j->what), "open");
    return;
  }
  while (off < j->len) {
    ssize_t n = write(fd, j->blob + off, j->len - off);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      j->rc = n < 0 ? -errno : TLC_EIO;
      snprintf(j->what, sizeof(j->what), "write");
      break;
    }
    off += (size_t)n;
  }
  if (j->rc == 0 && fsync(fd) != 0) {
    j->rc = -errno;
    snprintf(j->what, sizeof(j->what), "fsync");
  }
  if (close(fd) != 0 && j->rc == 0) {
    j->rc = -errno;
    snprintf(j->what, sizeof(j->what), "close");
  }
  if (j->rc == 0 && rename(tmp, fin) != 0) {
    j->rc = -errno;
    snprintf(j->what, sizeof(j->what), "rename");
  }
  if (j->rc != 0)
    (void)unlink(tmp);
  else if ((fd = open(j->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) >= 0) {
    (void)fsync(fd);
    (void)close(fd);
  }
}

static void bwck_start(tlc_daemon_t *d, bwck_job_t *j);

static void bwck_free(bwck_job_t *j) {
  tlc_free(j->blob);
  tlc_free(j);
}

/* A write done: the target's next one (a newer checkpoint) starts now, so that the writes of a
 * target never overlap and the last one renamed is the newest. */
static void bwck_after(uv_work_t *req, int status) {
  bwck_job_t *j = req->data, **p;
  if (status == 0 && j->rc != 0)
    tlc_log(TLC_LOG_ERR, TLC_LOGC_TARGET, "target %s: budgets not saved: %s %s/%s: %s", j->target,
            j->what, j->dir, BWCK_NAME, tlc_strerror(j->rc));
  for (p = &j->d->bwck_busy; *p != NULL; p = &(*p)->next)
    if (*p == j) {
      *p = j->next;
      break;
    }
  if (j->pending != NULL)
    bwck_start(j->d, j->pending);
  bwck_free(j);
}

/* Saves the watch of slot (NULL: removes t's saved watch) in the threadpool. */
/* A job writing t's watch (slot NULL: removing its file), or NULL (logged). */
static bwck_job_t *bwck_make(tlc_daemon_t *d, const tlc_target_t *t, struct tlc_budgetd_w **slot) {
  static unsigned seq;
  bwck_job_t *j;
  int n;
  if (d->in.cfg.state_dir[0] == '\0')
    return NULL;
  if ((j = tlc_calloc(1, sizeof(*j))) == NULL)
    goto nomem;
  n = snprintf(j->dir, sizeof(j->dir), "%s/%s", d->in.cfg.state_dir, t->name);
  snprintf(j->target, sizeof(j->target), "%s", t->name);
  j->seq = ++seq;
  j->d = d;
  j->req.data = j;
  if (n < 0 || (size_t)n >= sizeof(j->dir)) {
    tlc_free(j);
    return NULL;
  }
  if (slot != NULL && tlc_bwatch_save((*slot)->w, &j->blob, &j->len) != 0) {
    tlc_free(j);
    goto nomem;
  }
  return j;
nomem:
  tlc_log(TLC_LOG_ERR, TLC_LOGC_TARGET, "target %s: budgets not saved: %s", t->name,
          tlc_strerror(TLC_ENOMEM));
  return NULL;
}

/* Starts j's write, or (a write of its target running) makes it that one's next, in place of
 * an older next. Checkpoints are taken in order, but one held for its marks (bwck_held) may
 * start after a newer one: in turn, the newer is written last. */
static void bwck_start(tlc_daemon_t *d, bwck_job_t *j) {
  bwck_job_t *b;
  for (b = d->bwck_busy; b != NULL; b = b->next)
    if (strcmp(b->dir, j->dir) == 0) {
      if (b->pending != NULL && b->pending->seq > j->seq) {
        bwck_free(j); /* a newer one waits already */
      } else {
        if (b->pending != NULL)
          bwck_free(b->pending);
        b->pending = j;
      }
      return;
    }
  j->next = d->bwck_busy;
  j->pending = NULL;
  d->bwck_busy = j;
  if (uv_queue_work(d->in.loop, &j->req, bwck_work, bwck_after) != 0) {
    tlc_log(TLC_LOG_ERR, TLC_LOGC_TARGET, "target %s: budgets not saved: %s", j->target,
            tlc_strerror(TLC_ENOMEM));
    d->bwck_busy = j->next;
    bwck_free(j);
  }
}

static void bwck_queue(tlc_daemon_t *d, const tlc_target_t *t, struct tlc_budgetd_w **slot) {
  bwck_job_t *j = bwck_make(d, t, slot);
  if (j != NULL)
    bwck_start(d, j);
}

/* The held checkpoint's watch, taken back into a watch of its own, gets the locations the
 * marks brought since (same budgets: no reload meanwhile), and is saved again. Without memory
 * it is written as it was taken. */
static void bwck_locate(struct tlc_budgetd_w *bw, bwck_job_t *j) {
  tlc_bwatch_t *tmp;
  tlc_bwatch_opts_t o;
  uint8_t *blob;
  size_t len;
  char err[160];
  memset(&o, 0, sizeof(o));
  o.keep = tlc_bwatch_keep(bw->w);
  if (tlc_bwatch_new(&tmp, bw->t->name, &bw->d->in.cfg.bset, &o) != 0)
    return;
  if (tlc_bwatch_load(tmp, j->blob, j->len, err, sizeof(err)) == 0 &&
      tlc_bwatch_copy_locations(tmp, bw->w) > 0 && tlc_bwatch_save(tmp, &blob, &len) == 0) {
    tlc_free(j->blob);
    j->blob = blob;
    j->len = len;
  }
  tlc_bwatch_free(tmp);
}

/* Writes the held checkpoint (patch: with the locations come back since). */
static void bwck_held(struct tlc_budgetd_w *bw, int patch) {
  bwck_job_t *j = bw->ck;
  bw->ck = NULL;
  if (patch && bw->ck_gen == bw->gen)
    bwck_locate(bw, j);
  bwck_start(bw->d, j);
}

void tlc_budgetd_checkpoint(void *ud, tlc_target_t *t) {
  tlc_daemon_t *d = ud;
  struct tlc_budgetd_w **slot = find(d, t);
  struct tlc_budgetd_w *bw;
  bwck_job_t *j;
  if (slot == NULL)
    return;
  bw = *slot;
  if (bw->inflight == 0) {
    bwck_queue(d, t, slot);
    return;
  }
  /* marks in flight: their violations are in this checkpoint, their locations not yet; it is
   * written when the last of them is back (a newer checkpoint replaces it) */
  if ((j = bwck_make(d, t, slot)) == NULL)
    return;
  if (bw->ck != NULL) {
    tlc_free(bw->ck->blob);
    tlc_free(bw->ck);
  }
  bw->ck = j;
  bw->ck_mark = bw->marks;
  bw->ck_gen = bw->gen;
}

/* A new target's watch takes back what the last checkpoint saved (none: afresh; a bad file:
 * one log line, afresh). */
static void restore(tlc_daemon_t *d, struct tlc_budgetd_w *bw) {
  char path[1200], err[200];
  char *data = NULL;
  size_t len = 0;
  int r;
  if (d->in.cfg.state_dir[0] == '\0' ||
      (size_t)snprintf(path, sizeof(path), "%s/%s/%s", d->in.cfg.state_dir, bw->t->name,
                       BWCK_NAME) >= sizeof(path) ||
      access(path, F_OK) != 0)
    return;
  if ((r = tlc_file_read(path, BWCK_MAX, &data, &len)) != 0) {
    tlc_log(TLC_LOG_WARN, TLC_LOGC_TARGET, "target %s: %s: %s: its budgets start afresh",
            bw->t->name, path, tlc_strerror(r));
    return;
  }
  if ((r = tlc_bwatch_load(bw->w, (const uint8_t *)data, len, err, sizeof(err))) != 0)
    tlc_log(TLC_LOG_WARN, TLC_LOGC_TARGET, "target %s: %s: %s: its budgets start afresh",
            bw->t->name, path, r == TLC_ENOMEM ? tlc_strerror(r) : err);
  else
    tlc_log(TLC_LOG_INFO, TLC_LOGC_TARGET, "target %s: budgets restored (%" PRIu64 " violations)",
            bw->t->name, tlc_bwatch_all(bw->w));
  tlc_free(data);
}

/* Makes t's watch (a budget applies to it and it has none): 0 or TLC_ENOMEM (logged). */
static int make(tlc_daemon_t *d, tlc_target_t *t) {
  struct tlc_budgetd_w *bw;
  tlc_bwatch_opts_t o;
  if (d->nbws == d->capbws) {
    size_t nc = d->capbws ? d->capbws * 2 : 16;
    struct tlc_budgetd_w **nv = tlc_realloc(d->bws, nc * sizeof(*nv));
    if (nv == NULL)
      goto nomem;
    d->bws = nv;
    d->capbws = nc;
  }
  if ((bw = tlc_calloc(1, sizeof(*bw))) == NULL)
    goto nomem;
  bw->d = d;
  bw->t = t;
  memset(&o, 0, sizeof(o));
  o.keep = d->in.cfg.budget_keep;
  o.area_name = area_name;
  o.ctx_name = ctx_name;
  o.on_violation = on_violation;
  o.ud = bw;
  if (tlc_bwatch_new(&bw->w, t->name, &d->in.cfg.bset, &o) != 0) {
    tlc_free(bw);
    goto nomem;
  }
  t->conf.watch = bw->w;
  d->bws[d->nbws++] = bw;
  gates_make(bw);
  attach(bw);
  return 0;
nomem:
  tlc_log(TLC_LOG_ERR, TLC_LOGC_TARGET, "target %s: no memory for its budgets", t->name);
  return TLC_ENOMEM;
}

void tlc_budgetd_target_event(tlc_daemon_t *d, const tlc_target_t *ct, int kind) {
  /* the daemon owns its targets: the registry hands them out const to observers that only
   * read, this module keeps its watch in them (target.h: conf.watch) */
  tlc_target_t *t = (tlc_target_t *)ct;
  struct tlc_budgetd_w **slot;
  if (d->closing)
    return;
  slot = find(d, t);
  if (kind == TLC_TEV_FREED || kind == TLC_TEV_FORGOTTEN) {
    if (slot != NULL)
      detach(d, slot);
    if (kind == TLC_TEV_FORGOTTEN)
      bwck_queue(d, t, NULL); /* as continuity removes its checkpoint */
    return;
  }
  if (kind != TLC_TEV_CREATED && kind != TLC_TEV_RESET && kind != TLC_TEV_CONNECTED &&
      kind != TLC_TEV_MAPPING)
    return;
  if (slot == NULL) {
    if (applies(d, t->name) && make(d, t) == 0 && kind == TLC_TEV_CREATED)
      restore(d, d->bws[d->nbws - 1]);
    return;
  }
  /* again on a reset or a connection (the engine may have been replaced: a restore) and on a
   * new mapping (areas matched by name are matched again) */
  attach(*slot);
}

static const struct tlc_bwatch *hook(void *ud, const char *name) {
  tlc_daemon_t *d = ud;
  const tlc_target_t *t = tlc_targets_find(&d->in.targets, name);
  return t != NULL ? t->conf.watch : NULL;
}

int tlc_budgetd_start(tlc_daemon_t *d) {
  int r = 0;
  d->view.view.budgets = hook;
  d->view.view.budgets_ud = d;
  for (size_t i = 0; i < d->in.targets.n; i++) {
    tlc_target_t *t = d->in.targets.v[i];
    if (find(d, t) == NULL && applies(d, t->name) && make(d, t) != 0)
      r = TLC_ENOMEM;
  }
  return r;
}

void tlc_budgetd_reload(tlc_daemon_t *d) {
  size_t i;
  if (d->closing)
    return;
  for (i = 0; i < d->nbws;) {
    struct tlc_budgetd_w *bw = d->bws[i];
    if (!applies(d, bw->t->name)) { /* none applies any more */
      detach(d, &d->bws[i]);
      continue;
    }
    gates_flush(bw);
    if (tlc_bwatch_set_budgets(bw->w, &d->in.cfg.bset) != 0)
      tlc_log(TLC_LOG_ERR, TLC_LOGC_TARGET,
              "target %s: no memory for its new budgets: the old ones stay", bw->t->name);
    gates_make(bw);
    attach(bw);
    i++;
  }
  (void)tlc_budgetd_start(d); /* targets a budget applies to now */
  if (d->in.cfg.bset.n > 0)
    tlc_log(TLC_LOG_INFO, TLC_LOGC_CONFIG, "budgets: %zu, on %zu targets", d->in.cfg.bset.n,
            d->nbws);
}

void tlc_budgetd_final(tlc_daemon_t *d) {
  for (size_t i = 0; i < d->nbws; i++) {
    struct tlc_budgetd_w *bw = d->bws[i];
    if (bw->ck != NULL) { /* the watch now holds all it held, and the locations come since */
      bwck_free(bw->ck);
      bw->ck = NULL;
    }
    bwck_queue(d, bw->t, &d->bws[i]);
  }
}

void tlc_budgetd_close(tlc_daemon_t *d) {
  d->view.view.budgets = NULL;
  while (d->nbws > 0)
    detach(d, &d->bws[d->nbws - 1]);
  tlc_free(d->bws);
  d->bws = NULL;
  d->capbws = 0;
}
