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
 */
#include "daemon/budgetd.h"
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

struct tlc_budgetd_w {
  tlc_daemon_t *d;
  tlc_target_t *t;
  tlc_bwatch_t *w;
};

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

/* Every new violation of every live target, on the loop thread, inside the engine's push
 * (budget/budget.h: on_violation): no I/O here, each module queues what it sends. */
static void on_violation(void *ud, const tlc_violation_t *v) {
  struct tlc_budgetd_w *bw = ud;
  tlc_daemon_t *d = bw->d;
  const tlc_tbudget_t *b = tlc_bwatch_budget(bw->w, v->budget);
  char area[300], ctx[128];
  tlc_budgetd_names(bw->t, v->handle, v->row_kind, v->state, v->context, area, sizeof(area), ctx,
                    sizeof(ctx));
  if (d->alert != NULL) {
    tlc_alert_violation_t a;
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
    tlc_alert_violation(d->alert, &a);
  }
  /* subscribers and the lab's broker: target events, rate-limited per budget (vserve) */
  if (d->pubsub != NULL)
    tlc_pubsub_violation(d->pubsub, bw->t->name, bw->w, v);
  if (d->fleet != NULL)
    tlc_fleet_violation(d->fleet, bw->t->name, bw->w, v);
  /* the trend's violations per step: counted in the rollup minute of its end */
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

/* The watch becomes a tap of t's engine (again: its rows are asked again). */
static void attach(struct tlc_budgetd_w *bw) {
  tlc_engine_t *e = bw->t->pipe.engine;
  if (e == NULL)
    return;
  tlc_engine_remove_tap(e, bw->w);
  if (tlc_engine_add_tap(e, tlc_bwatch_tap, tlc_bwatch_want, bw->w) < 0)
    tlc_log(TLC_LOG_ERR, TLC_LOGC_TARGET, "target %s: no tap left for its budgets", bw->t->name);
}

static void detach(tlc_daemon_t *d, struct tlc_budgetd_w **slot) {
  struct tlc_budgetd_w *bw = *slot;
  if (bw->t->pipe.engine != NULL)
    tlc_engine_remove_tap(bw->t->pipe.engine, bw->w);
  bw->t->conf.watch = NULL;
  tlc_bwatch_free(bw->w);
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
  char tmp[1200], fin[1200];
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
  if ((j->rc = mkdirs(j->dir)) != 0) {
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

static void bwck_after(uv_work_t *req, int status) {
  bwck_job_t *j = req->data;
  if (status == 0 && j->rc != 0)
    tlc_log(TLC_LOG_ERR, TLC_LOGC_TARGET, "target %s: budgets not saved: %s %s/%s: %s", j->target,
            j->what, j->dir, BWCK_NAME, tlc_strerror(j->rc));
  tlc_free(j->blob);
  tlc_free(j);
}

/* Saves the watch of slot (NULL: removes t's saved watch) in the threadpool. */
static void bwck_queue(tlc_daemon_t *d, const tlc_target_t *t, struct tlc_budgetd_w **slot) {
  static unsigned seq;
  bwck_job_t *j;
  int n;
  if (d->in.cfg.state_dir[0] == '\0')
    return;
  if ((j = tlc_calloc(1, sizeof(*j))) == NULL)
    goto nomem;
  n = snprintf(j->dir, sizeof(j->dir), "%s/%s", d->in.cfg.state_dir, t->name);
  snprintf(j->target, sizeof(j->target), "%s", t->name);
  j->seq = ++seq;
  j->req.data = j;
  if (n < 0 || (size_t)n >= sizeof(j->dir)) {
    tlc_free(j);
    return;
  }
  if (slot != NULL && tlc_bwatch_save((*slot)->w, &j->blob, &j->len) != 0) {
    tlc_free(j);
    goto nomem;
  }
  if (uv_queue_work(d->in.loop, &j->req, bwck_work, bwck_after) != 0) {
    tlc_free(j->blob);
    tlc_free(j);
    goto nomem;
  }
  return;
nomem:
  tlc_log(TLC_LOG_ERR, TLC_LOGC_TARGET, "target %s: budgets not saved: %s", t->name,
          tlc_strerror(TLC_ENOMEM));
}

void tlc_budgetd_checkpoint(void *ud, tlc_target_t *t) {
  tlc_daemon_t *d = ud;
  struct tlc_budgetd_w **slot = find(d, t);
  if (slot != NULL)
    bwck_queue(d, t, slot);
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
    if (tlc_bwatch_set_budgets(bw->w, &d->in.cfg.bset) != 0)
      tlc_log(TLC_LOG_ERR, TLC_LOGC_TARGET,
              "target %s: no memory for its new budgets: the old ones stay", bw->t->name);
    attach(bw);
    i++;
  }
  (void)tlc_budgetd_start(d); /* targets a budget applies to now */
  if (d->in.cfg.bset.n > 0)
    tlc_log(TLC_LOG_INFO, TLC_LOGC_CONFIG, "budgets: %zu, on %zu targets", d->in.cfg.bset.n,
            d->nbws);
}

void tlc_budgetd_close(tlc_daemon_t *d) {
  d->view.view.budgets = NULL;
  while (d->nbws > 0)
    detach(d, &d->bws[d->nbws - 1]);
  tlc_free(d->bws);
  d->bws = NULL;
  d->capbws = 0;
}
