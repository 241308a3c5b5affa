/* rolld.c - the rollups in the daemon (see rolld.h).
 *
 * Each target's engine feeds the target's rollup accumulator through its sample log
 * (tlc_rollup_slog: a block of samples at a time, no call per sample; the taps are the budgets').
 * A budget violation comes in the same log, in order with the samples and with no hand-off of its
 * own: as the engine's tag of its sample (the budget watch's answer: budget.h), or, a rate's,
 * as a note (tlc_rolld_violation: tlc_rollup_slog_violation), so that a storm costs an entry
 * each.
 * Accumulators are kept by target pointer in d->raccs (a few per daemon: a linear search on events,
 * none per sample).
 *
 * Rebuilt from segments: a target created (at start, or when its source first names it) whose
 * rollup directory is missing (deleted, or rollups were off) while it has stored segments gets
 * its minutes rebuilt on libuv's threadpool: the history module's stream reads the segments
 * whose records arrived before that moment (a wall-clock range up to it, so the live samples
 * after it are not counted twice) through a pipeline with the target's settings, and its
 * engine's tap feeds a private accumulator of the target's rollups. Forgetting or freeing the
 * target (shutdown) cancels the rebuild and waits for its thread to stop.
 *
 * Test hook (tlcapd-test only, TLCAP_TESTING): TLCAP_TEST_REBUILD_SEGMENT_MS=N makes each
 * segment a rebuild reads take N ms longer, so that a rebuild of a few dozen segments lasts long
 * enough for a test to watch its progress (the dashboard's "rebuilding K/N",
 * tests/integ/test_http_dashboard.py); tlcapd has no such delay.
 *
 * What a user sees of it (the view's rebuild hook: `tlcap targets`, ListTargets, the HTTP
 * targets): while it runs, its thread publishes the segments read, the segments to read and the
 * samples counted in atomics that the loop reads (relaxed: progress figures, no ordering but
 * the start's); when it ends, the loop keeps its figures with the target's accumulator until the
 * target goes.
 */
#include "daemon/rolld.h"

#include "base/alloc.h"
#include "base/json.h"
#include "base/err.h"
#include "base/log.h"
#include "base/out.h"
#include "base/fileread.h"
#include "base/query.h"
#include "budget/budget.h"
#include "continuity/ckfile.h"
#include "history/history.h"
#include "formats/when.h"
#include "rollup/report.h"
#include "rollup/rollup.h"

#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

struct rebuild;
struct names_snap;

struct tlc_rolld_acc {
  const tlc_target_t *t;
  tlc_rollup_acc_t *acc;
  struct rebuild *rb;       /* a rebuild from segments running for it, or NULL */
  struct names_snap *names; /* its area names as diff last copied them (shared), or NULL */
  tlc_view_rebuild_t last;  /* the last rebuild that ended (state NONE: none) */
};

/* Every area name of a target's names, copied once per version of them and shared by the diff
 * documents being built (the worker reads them; the last reference frees them, any thread). */
typedef struct names_snap {
  atomic_uint refs;
  const tlc_mapping_t *src; /* the names it copied: tlc_target_names' result and its size */
  size_t nareas;
  tlc_rollup_names_t nm; /* context_name unused */
} names_snap_t;

static void snap_release(names_snap_t *s) {
  if (s != NULL && atomic_fetch_sub(&s->refs, 1) == 1) {
    tlc_rollup_names_fini(&s->nm);
    tlc_free(s);
  }
}

/* Every sample kind of every row, not the COUNT marks (rollups keep samples). */
static unsigned want(void *ud, uint32_t handle, uint32_t context, uint8_t row_kind, uint64_t state,
                     uint32_t *cookie) {
  (void)ud;
  (void)handle;
  (void)context;
  (void)row_kind;
  (void)state;
  *cookie = 0;
  return (1u << TLC_NKINDS) - 1;
}

static struct tlc_rolld_acc *find(tlc_daemon_t *d, const tlc_target_t *t) {
  for (size_t i = 0; i < d->nraccs; i++)
    if (d->raccs[i].t == t)
      return &d->raccs[i];
  return NULL;
}

static tlc_rollup_acc_t *find_name(tlc_daemon_t *d, const char *name) {
  for (size_t i = 0; i < d->nraccs; i++)
    if (strcmp(d->raccs[i].t->name, name) == 0)
      return d->raccs[i].acc;
  return NULL;
}

static void rebuild_stop(struct tlc_rolld_acc *a);

static void detach(tlc_daemon_t *d, struct tlc_rolld_acc *a) {
  if (a->rb != NULL || a->last.state != TLC_VIEW_REBUILD_NONE)
    d->nrebuilt--;
  rebuild_stop(a);
  snap_release(a->names);
  if (a->t->pipe.engine != NULL)
    tlc_engine_set_slog(a->t->pipe.engine, NULL, NULL); /* what it holds goes to a->acc first */
  tlc_rollup_acc_free(a->acc);
  *a = d->raccs[--d->nraccs];
}

/* ---- rebuilt from segments ---- */

typedef struct rebuild {
  uv_work_t req;
  tlc_daemon_t *d;
  int orphan;            /* its target is gone: the after-work callback only frees it (loop) */
  tlc_rollup_acc_t *acc; /* private: fed on the threadpool thread, freed there at the end */
  char *name, *state_dir, *mapping_path;
  tlc_pipeline_conf_t pc; /* the target's settings (pointers into its conf: it outlives this) */
  int64_t until_ns;       /* wall clock when it was started: records that arrived before */
  int64_t reset_ns;
  atomic_int cancel;
  uv_mutex_t mu;
  uv_cond_t cv;
  int finished; /* under mu: the thread is done with everything but this struct */
  /* progress, written by the thread alone, read on the loop while it runs */
  atomic_int started;                /* segments chosen: nsegs is set (release) */
  atomic_uint_fast64_t nsegs, nread; /* segments to read, read so far */
  atomic_uint_fast64_t samples;      /* samples counted so far */
  /* results, read on the loop after finished */
  int rc;
  size_t segments;
  int64_t t0_ns, t1_ns; /* wall clock (Unix ns): started, ended */
  char err[300];
#ifdef TLCAP_TESTING
  long test_segment_ms; /* TLCAP_TEST_REBUILD_SEGMENT_MS, read on the loop when it started */
#endif
} rebuild_t;

static void rb_msg(void *ud, const char *msg) {
  rebuild_t *b = ud;
  if (b->err[0] == '\0')
    snprintf(b->err, sizeof b->err, "%s", msg);
}

static int rb_tap(void *ud, const tlc_engine_sample_t *s) {
  rebuild_t *b = ud;
  if (s->kind >= TLC_NKINDS)
    return 0;
  atomic_store_explicit(&b->samples, atomic_load_explicit(&b->samples, memory_order_relaxed) + 1,
                        memory_order_relaxed);
  return tlc_rollup_tap(b->acc, s);
}

#ifdef TLCAP_TESTING
/* The test hook (above): `segments` more read, each made to take test_segment_ms longer; slept in
 * steps of at most 10 ms that end on a cancel, so that a stop is not held up by it. Thread. */
static void test_segments_read(rebuild_t *b, size_t segments) {
  long ms = b->test_segment_ms * (long)segments;
  while (ms > 0 && !atomic_load(&b->cancel)) {
    uv_sleep(ms < 10 ? (unsigned)ms : 10);
    ms -= 10;
  }
}
#endif

/* The threadpool thread: the segments read, their samples into the private accumulator. */
static void rb_work(uv_work_t *req) {
  rebuild_t *b = req->data;
  tlc_when_range_t range;
  tlc_hist_epoch_ctx_t ec = { b->reset_ns, -1 };
  tlc_hist_files_t f;
  tlc_hist_stream_t s;
  tlc_mapping_t m;
  int has_m = 0, n;
  const tlc_event_t *evs;
  memset(&range, 0, sizeof range);
  range.kind = TLC_WHEN_WALL;
  range.epoch = -1;
  range.has_until = 1;
  range.until = b->until_ns;
  memset(&f, 0, sizeof f);
  memset(&s, 0, sizeof s);
  b->t0_ns = tlc_when_now();
  b->rc = tlc_hist_select(b->state_dir, b->name, &range, &ec, b->until_ns, &f, rb_msg, b, b->err,
                          sizeof b->err);
  if (b->rc != 0 || f.n == 0)
    goto done;
  tlc_rollup_note_rebuild(b->d->rollup, 1);
  b->segments = f.n;
  atomic_store_explicit(&b->nsegs, f.n, memory_order_relaxed);
  atomic_store_explicit(&b->started, 1, memory_order_release);
  if (b->mapping_path != NULL) { /* variable -> state links, as the live engine has them */
    char *text = NULL;
    size_t len = 0;
    tlc_parse_err_t pe;
    tlc_mapping_init(&m);
    if (tlc_file_read(b->mapping_path, 256u << 20, &text, &len) == 0 &&
        tlc_mapping_parse(&m, text, len, &pe) == 0) {
      tlc_mapping_finish(&m);
      has_m = 1;
    } else {
      tlc_mapping_fini(&m);
    }
    tlc_free(text);
  }
  s.files = f.files;
  s.nfiles = f.n;
  s.gap_before = f.gap_before;
  s.conf = b->pc;
  s.conf.format = f.fmt;
  s.conf.has_from = f.has_from;
  s.conf.has_to = f.has_to;
  s.conf.from = f.from;
  s.conf.to = f.to;
  s.has_wall = f.has_wall;
  s.wall_since = f.wall_since;
  s.wall_until = f.wall_until;
  s.conf.stop_on_map_error = 1; /* as tlcapd replay and range queries */
  s.conf.with_engine = 1;
  s.conf.engine.mapping = has_m ? &m : NULL;
  memset(&s.conf.engine.acct, 0, sizeof(s.conf.engine.acct));
  s.conf.engine.tap = rb_tap;
  s.conf.engine.tap_want = want;
  s.conf.engine.tap_ud = b;
  s.msg = rb_msg;
  s.msg_ud = b;
  s.report = 1;
  s.cancel = &b->cancel;
  if ((b->rc = tlc_hist_stream_init(&s)) == 0) {
    while ((n = tlc_hist_stream_next(&s, &evs)) > 0) { /* the pipeline feeds its engine */
#ifdef TLCAP_TESTING
      test_segments_read(b, s.fi - atomic_load_explicit(&b->nread, memory_order_relaxed));
#endif
      atomic_store_explicit(&b->nread, s.fi, memory_order_relaxed); /* files closed so far */
    }
    atomic_store_explicit(&b->nread, s.fi, memory_order_relaxed);
    b->rc = n < 0 ? n : 0;
  }
  tlc_hist_stream_fini(&s);
  if (has_m)
    tlc_mapping_fini(&m);
  tlc_rollup_note_rebuild(b->d->rollup, 0);
done:
  tlc_hist_files_fini(&f);
  tlc_rollup_acc_free(b->acc); /* its last minute to the worker */
  b->acc = NULL;
  b->t1_ns = tlc_when_now();
  uv_mutex_lock(&b->mu);
  b->finished = 1;
  uv_cond_signal(&b->cv);
  uv_mutex_unlock(&b->mu);
}

static void rb_free(rebuild_t *b) {
  uv_mutex_destroy(&b->mu);
  uv_cond_destroy(&b->cv);
  tlc_free(b->name);
  tlc_free(b->state_dir);
  tlc_free(b->mapping_path);
  tlc_free(b);
}

static void rb_after(uv_work_t *req, int status) {
  rebuild_t *b = req->data;
  (void)status;
  if (!b->orphan) {
    tlc_daemon_t *d = b->d;
    uint64_t samples = atomic_load_explicit(&b->samples, memory_order_relaxed);
    for (size_t i = 0; i < d->nraccs; i++)
      if (d->raccs[i].rb == b) {
        d->raccs[i].rb = NULL;
        if (b->segments > 0) /* it read segments (all, or as far as it could) */
          d->raccs[i].last =
              (tlc_view_rebuild_t){ TLC_VIEW_REBUILD_DONE,
                                    atomic_load_explicit(&b->nread, memory_order_relaxed),
                                    b->segments, samples, b->t1_ns / 1000000 };
        else if (d->raccs[i].last.state == TLC_VIEW_REBUILD_NONE)
          d->nrebuilt--; /* nothing to rebuild from: nothing to show */
      }
    if (b->rc == 0 && b->segments > 0)
      tlc_log(TLC_LOG_NOTICE, TLC_LOGC_TARGET,
              "target %s: rollups rebuilt from %zu stored segments: %" PRIu64
              " samples (%.1f s)%s%s",
              b->name, b->segments, samples, (double)(b->t1_ns - b->t0_ns) / 1e9,
              b->err[0] ? "; " : "", b->err);
    else if (b->rc != 0 && b->rc != -ENOENT && b->rc != TLC_ERANGE)
      tlc_log(TLC_LOG_WARN, TLC_LOGC_TARGET,
              "target %s: rollups not rebuilt from its segments: %s (%" PRIu64 " samples)", b->name,
              b->err[0] ? b->err : tlc_strerror(b->rc), samples);
  }
  rb_free(b);
}

/* Cancels a's rebuild and waits for its thread to stop (the target is going). Loop thread. */
static void rebuild_stop(struct tlc_rolld_acc *a) {
  rebuild_t *b = a->rb;
  if (b == NULL)
    return;
  atomic_store(&b->cancel, 1);
  uv_mutex_lock(&b->mu);
  while (!b->finished)
    uv_cond_wait(&b->cv, &b->mu);
  uv_mutex_unlock(&b->mu);
  b->orphan = 1;
  a->rb = NULL;
}

/* Starts rebuilding t's rollups when it has none on disk and has a directory of segments. */
static void rebuild_start(tlc_daemon_t *d, struct tlc_rolld_acc *a, tlc_target_t *t) {
  const tlc_config_t *c = &d->in.cfg;
  char dir[1200], kept[1300];
  struct stat sb;
  rebuild_t *b;
  const char *mp = t->conf.mapping_path;
  if (d->store == NULL || tlc_rollup_exists(d->rollup, t->name))
    return;
  snprintf(dir, sizeof dir, "%s/%s", c->state_dir, t->name);
  if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
    return; /* a new target: nothing stored */
  snprintf(kept, sizeof kept, "%s/%s", dir, TLC_MAP_NAME);
  if (t->map_origin == TLC_MAP_RUNTIME || t->map_origin == TLC_MAP_RESTORED)
    mp = kept; /* the names the live target has */
  if ((b = tlc_calloc(1, sizeof(*b))) == NULL)
    return;
  b->req.data = b;
  b->d = d;
  b->name = tlc_strndup(t->name, strlen(t->name));
  b->state_dir = tlc_strndup(c->state_dir, strlen(c->state_dir));
  b->mapping_path = mp != NULL && mp[0] != '\0' ? tlc_strndup(mp, strlen(mp)) : NULL;
  b->acc = tlc_rollup_acc_new_past(d->rollup, t->name);
  tlc_target_pipeline_conf(&t->conf, &b->pc);
  b->until_ns = tlc_when_now();
  b->reset_ns = t->conf.clock_reset_ns != 0 ? t->conf.clock_reset_ns : 1000000000;
#ifdef TLCAP_TESTING
  {
    const char *e = getenv("TLCAP_TEST_REBUILD_SEGMENT_MS");
    b->test_segment_ms = e != NULL ? strtol(e, NULL, 10) : 0;
  }
#endif
  atomic_init(&b->cancel, 0);
  atomic_init(&b->started, 0);
  atomic_init(&b->nsegs, 0);
  atomic_init(&b->nread, 0);
  atomic_init(&b->samples, 0);
  if (b->name == NULL || b->state_dir == NULL ||
      (mp != NULL && mp[0] != '\0' && !b->mapping_path) || b->acc == NULL ||
      uv_mutex_init(&b->mu) != 0) {
    tlc_rollup_acc_free(b->acc);
    tlc_free(b->name);
    tlc_free(b->state_dir);
    tlc_free(b->mapping_path);
    tlc_free(b);
    tlc_log(TLC_LOG_ERR, TLC_LOGC_TARGET, "target %s: no memory to rebuild its rollups", t->name);
    return;
  }
  if (uv_cond_init(&b->cv) != 0) {
    uv_mutex_destroy(&b->mu);
    b->mu = (uv_mutex_t){ 0 };
    tlc_rollup_acc_free(b->acc);
    tlc_free(b->name);
    tlc_free(b->state_dir);
    tlc_free(b->mapping_path);
    tlc_free(b);
    return;
  }
  if (uv_queue_work(d->in.loop, &b->req, rb_work, rb_after) != 0) {
    tlc_rollup_acc_free(b->acc);
    rb_free(b);
    return;
  }
  if (a->last.state == TLC_VIEW_REBUILD_NONE)
    d->nrebuilt++;
  a->rb = b;
  tlc_log(TLC_LOG_NOTICE, TLC_LOGC_TARGET,
          "target %s: no rollups on disk: rebuilding them from its stored segments", t->name);
}

/* t's accumulator, made when it has none (*made set). NULL on no memory (logged). */
static struct tlc_rolld_acc *ensure(tlc_daemon_t *d, const tlc_target_t *t, int *made) {
  struct tlc_rolld_acc *a = find(d, t);
  *made = 0;
  if (a != NULL)
    return a;
  if (d->nraccs == d->capraccs) {
    size_t nc = d->capraccs ? d->capraccs * 2 : 16;
    struct tlc_rolld_acc *nv = tlc_realloc(d->raccs, nc * sizeof(*nv));
    if (nv == NULL)
      return NULL;
    d->raccs = nv;
    d->capraccs = nc;
  }
  a = &d->raccs[d->nraccs];
  a->t = t;
  a->rb = NULL;
  a->names = NULL;
  memset(&a->last, 0, sizeof a->last);
  if ((a->acc = tlc_rollup_acc_new(d->rollup, t->name)) == NULL) {
    tlc_log(TLC_LOG_ERR, TLC_LOGC_TARGET, "target %s: no memory for its rollups", t->name);
    return NULL;
  }
  d->nraccs++;
  *made = 1;
  return a;
}

/* t's engine (it may have been replaced: a restore) feeds a through its sample log (engine.h:
 * tlc_engine_set_slog; cheaper than a tap: no call per sample), once. */
static void tap_on(struct tlc_rolld_acc *a, const tlc_target_t *t) {
  if (t->pipe.engine == NULL)
    return;
  if (tlc_engine_set_slog(t->pipe.engine, tlc_rollup_slog, a->acc) < 0)
    tlc_log(TLC_LOG_ERR, TLC_LOGC_TARGET, "target %s: no memory for its rollups' sample log",
            t->name);
}

void tlc_rolld_target_event(tlc_daemon_t *d, const tlc_target_t *t, int kind) {
  struct tlc_rolld_acc *a;
  int made;
  if (d->rollup == NULL)
    return;
  a = find(d, t);
  if (kind == TLC_TEV_MAPPING && a != NULL) { /* new names: the next diff copies them */
    snap_release(a->names);
    a->names = NULL;
    return;
  }
  if (kind == TLC_TEV_FREED || kind == TLC_TEV_FORGOTTEN) {
    if (a != NULL)
      detach(d, a);
    return;
  }
  if (kind != TLC_TEV_CREATED && kind != TLC_TEV_RESET && kind != TLC_TEV_CONNECTED)
    return;
  if ((a = ensure(d, t, &made)) == NULL)
    return;
  if (made && kind == TLC_TEV_CREATED) /* the observer's target is the registry's */
    rebuild_start(d, a, (tlc_target_t *)(uintptr_t)t);
  /* again on a reset or a connection: the engine may have been replaced (a restore) */
  tap_on(a, t);
}

void tlc_rolld_replay(void *ud, tlc_target_t *t, const tlc_ckpt_pos_t *pos, int begin) {
  tlc_daemon_t *d = ud;
  struct tlc_rolld_acc *a;
  int made;
  if (d->rollup == NULL)
    return;
  if (!begin) {
    if ((a = find(d, t)) != NULL)
      tlc_rollup_acc_replay_end(a->acc);
    return;
  }
  /* without rollups on disk the target's creation rebuilds them from every segment, these
   * records included */
  if (!tlc_rollup_exists(d->rollup, t->name) || (a = ensure(d, t, &made)) == NULL)
    return;
  tap_on(a, t);
  tlc_rollup_acc_replay(a->acc, &(tlc_rollup_pos_t){ pos->seq, pos->bytes, pos->disconnects });
}

void tlc_rolld_violation(tlc_daemon_t *d, tlc_target_t *t, const tlc_violation_t *v) {
  struct tlc_rolld_acc *a;
  if (d->rollup == NULL || (a = find(d, t)) == NULL)
    return;
  /* in the engine's sample log, in order with its samples; else after the samples logged so
   * far (a chunk holds one minute, in order) */
  if (t->pipe.engine != NULL) {
    if (tlc_rollup_slog_violation(a->acc, t->pipe.engine, v->handle, v->context, v->state, v->stat,
                                  v->row_kind, v->end, v->epoch) == 0)
      return;
    tlc_engine_slog_flush(t->pipe.engine);
  }
  tlc_rollup_add_violation(a->acc, v->handle, v->context, v->state, v->stat, v->row_kind, v->end,
                           v->epoch);
}

/* A checkpoint's position asked: where the copy taken at gen goes once it comes. */
typedef struct ck_wait {
  tlc_daemon_t *d;
  uint64_t gen;
  tlc_cont_done_fn done;
  void *done_ud;
  char name[];
} ck_wait_t;

static void ck_done(void *ud, const tlc_ckpt_pos_t *pos) {
  ck_wait_t *w = ud;
  tlc_rollup_acc_t *acc = w->d->rollup != NULL ? find_name(w->d, w->name) : NULL;
  if (acc != NULL && pos->valid)
    tlc_rollup_acc_saved_at(acc, w->gen,
                            &(tlc_rollup_pos_t){ pos->seq, pos->bytes, pos->disconnects });
  w->done(w->done_ud, pos);
  tlc_free(w);
}

int tlc_rolld_checkpoint(tlc_daemon_t *d, tlc_target_t *t, tlc_cont_mark_fn mark,
                         tlc_cont_done_fn done, void *done_ud) {
  struct tlc_rolld_acc *a;
  ck_wait_t *w;
  size_t n = strlen(t->name);
  int rc;
  if (d->rollup == NULL || (a = find(d, t)) == NULL ||
      (w = tlc_malloc(sizeof(*w) + n + 1)) == NULL) {
    if (d->rollup != NULL && (a = find(d, t)) != NULL)
      (void)tlc_rollup_acc_save(a->acc); /* no copy on disk: a restart drops its minute */
    return mark(d, t, done, done_ud);
  }
  w->d = d;
  w->gen = tlc_rollup_acc_save(a->acc);
  w->done = done;
  w->done_ud = done_ud;
  memcpy(w->name, t->name, n + 1);
  rc = mark(d, t, ck_done, w);
  if (rc != 0)
    tlc_free(w);
  return rc;
}

/* ---- the read side's hook ---- */

static int parse_u32(const char *s, uint32_t *v) {
  char *end;
  unsigned long long x;
  if (s[0] == '\0' || s[0] == '-')
    return -1;
  x = strtoull(s, &end, 0);
  if (*end != '\0' || x > UINT32_MAX)
    return -1;
  *v = (uint32_t)x;
  return 0;
}

/* 1m, 5m, 1h, 1d, ... into minutes. */
static int parse_step(const char *s, int64_t *min) {
  char *end;
  long long v = strtoll(s, &end, 10);
  int64_t mul;
  if (end == s || v <= 0 || v > 366 * 100)
    return -1;
  if (strcmp(end, "m") == 0 || strcmp(end, "min") == 0)
    mul = 1;
  else if (strcmp(end, "h") == 0)
    mul = 60;
  else if (strcmp(end, "d") == 0)
    mul = 1440;
  else
    return -1;
  *min = v * mul;
  return 0;
}

/* since/until spellings (formats/when.h) into q. */
static int range_into(const char *since, const char *until, int64_t now, tlc_rollup_q_t *q,
                      char *err, size_t errlen) {
  tlc_when_range_t r;
  if (tlc_when_range(since, until, now, &r, err, errlen) < 0)
    return TLC_EINVAL;
  q->when = r.kind == TLC_WHEN_WALL ? TLC_RQ_WALL : TLC_RQ_TARGET;
  q->epoch = r.kind == TLC_WHEN_TARGET ? r.epoch : -1;
  q->has_since = (uint8_t)r.has_since;
  q->has_until = (uint8_t)r.has_until;
  q->since = r.since;
  q->until = r.until;
  return 0;
}

/* "T1..T2" into q. */
static int span_into(const char *what, const char *s, int64_t now, tlc_rollup_q_t *q, char *err,
                     size_t errlen) {
  char a[128], b[128];
  const char *dots = strstr(s, "..");
  char why[200];
  if (dots == NULL || (size_t)(dots - s) >= sizeof a || strlen(dots + 2) >= sizeof b) {
    snprintf(err, errlen, "%s: expected T1..T2 (each as --since takes it), got \"%.64s\"", what, s);
    return TLC_EINVAL;
  }
  memcpy(a, s, (size_t)(dots - s));
  a[dots - s] = '\0';
  snprintf(b, sizeof b, "%s", dots + 2);
  if (range_into(a[0] ? a : NULL, b[0] ? b : NULL, now, q, why, sizeof why) != 0) {
    snprintf(err, errlen, "%s: %s", what, why);
    return TLC_EINVAL;
  }
  return 0;
}

int tlc_rolld_parse(int what, const char *name, const char *query, int64_t now_ns,
                    tlc_rollup_q_t *q, size_t *nq, uint8_t *kind, char *err, size_t errlen) {
  static const char *const tk[] = { "area", "context", "kind", "since", "until", "step", NULL };
  static const char *const dk[] = { "a", "b", "b_target", "kind", "context", NULL };
  char v[256], v2[256], bad[80];
  int k;
  memset(q, 0, 2 * sizeof(*q));
  *kind = TLC_NET;
  if (tlc_query_unknown(query, what == 1 ? tk : dk, bad, sizeof bad)) {
    snprintf(err, errlen, "unknown query parameter \"%s\"", bad);
    return TLC_EINVAL;
  }
  if (strlen(name) >= sizeof q->target) {
    snprintf(err, errlen, "target name too long");
    return TLC_EINVAL;
  }
  snprintf(q[0].target, sizeof q[0].target, "%s", name);
  if (tlc_query_param(query, "kind", v, sizeof v) == 1) {
    if ((k = tlc_rollup_kind_parse(v)) < 0) {
      snprintf(err, errlen, "kind: one of net, gross, call, period, outside");
      return TLC_EINVAL;
    }
    *kind = (uint8_t)k;
  }
  if (tlc_query_param(query, "context", v, sizeof v) == 1) {
    if (parse_u32(v, &q[0].context) != 0) {
      snprintf(err, errlen, "context: a context number as the statistics list it");
      return TLC_EINVAL;
    }
    q[0].has_context = 1;
  }
  if (what == 1) {
    int hs, hu;
    if (tlc_query_param(query, "area", v, sizeof v) != 1 || parse_u32(v, &q[0].handle) != 0) {
      snprintf(err, errlen, "area: the area's handle (decimal or 0x hex) is required");
      return TLC_EINVAL;
    }
    hs = tlc_query_param(query, "since", v, sizeof v);
    hu = tlc_query_param(query, "until", v2, sizeof v2);
    if (hs != 1) {
      snprintf(err, errlen, "since is required (-1h, an RFC 3339 time, ns:N or epoch:K:N)");
      return TLC_EINVAL;
    }
    if (range_into(v, hu == 1 ? v2 : NULL, now_ns, &q[0], err, errlen) != 0)
      return TLC_EINVAL;
    q[0].step_min = 1;
    if (tlc_query_param(query, "step", v, sizeof v) == 1 && parse_step(v, &q[0].step_min) != 0) {
      snprintf(err, errlen, "step: N followed by m, h or d (1m, 1h, 1d)");
      return TLC_EINVAL;
    }
    *nq = 1;
    return 0;
  }
  q[0].all_handles = 1;
  q[1] = q[0];
  if (tlc_query_param(query, "b_target", v, sizeof v) == 1)
    snprintf(q[1].target, sizeof q[1].target, "%s", v);
  if (tlc_query_param(query, "a", v, sizeof v) != 1 ||
      tlc_query_param(query, "b", v2, sizeof v2) != 1) {
    snprintf(err, errlen, "a and b are required: two ranges T1..T2");
    return TLC_EINVAL;
  }
  if (span_into("a", v, now_ns, &q[0], err, errlen) != 0 ||
      span_into("b", v2, now_ns, &q[1], err, errlen) != 0)
    return TLC_EINVAL;
  q[0].step_min = q[1].step_min = 0;
  *nq = 2;
  return 0;
}

typedef struct rdoc {
  int what;
  uint8_t kind;
  tlc_rollup_names_t own;   /* trend: its area's name; both: the context's (owned) */
  names_snap_t *snap;       /* diff: every area's name (a reference) */
  tlc_rollup_names_t names; /* what the document shows: own, or snap's areas and own's context */
  size_t cap;
  char *body;
  size_t len;
  int rc;
  void (*done)(void *done_ud, int status, const char *err, char *body, size_t len);
  void *done_ud;
} rdoc_t;

static void rdoc_free(void *ctx) {
  rdoc_t *r = ctx;
  if (r != NULL) {
    tlc_free(r->body);
    tlc_rollup_names_fini(&r->own);
    snap_release(r->snap);
  }
  tlc_free(r);
}

/* On the rollup worker. */
static void rdoc_encode(void *ctx, const tlc_rollup_q_t *q, tlc_rollup_res_t *res, size_t nq) {
  rdoc_t *r = ctx;
  tlc_out_t o;
  for (size_t i = 0; i < nq; i++)
    if (res[i].status != 0) {
      r->rc = res[i].status;
      return;
    }
  tlc_out_init(&o, r->cap, NULL, NULL);
  if (r->what & TLC_VIEW_ROLLUP_TEXT)
    r->rc = (r->what & 3) == 1
                ? tlc_rollup_trend_text(&o, &q[0], &res[0], r->kind, &r->names)
                : tlc_rollup_diff_text(&o, &q[0], &res[0], &q[1], &res[1], r->kind, &r->names);
  else
    r->rc = (r->what & 3) == 1
                ? tlc_rollup_trend_json(&o, &q[0], &res[0], r->kind, &r->names)
                : tlc_rollup_diff_json(&o, &q[0], &res[0], &q[1], &res[1], r->kind, &r->names);
  if (r->rc == 0 && o.err != 0)
    r->rc = o.err;
  if (r->rc == 0 && (r->body = tlc_out_take(&o, &r->len)) == NULL)
    r->rc = TLC_ENOMEM;
  tlc_out_fini(&o);
}

static void rdoc_done(void *ud, tlc_rollup_res_t *res, size_t nq) {
  rdoc_t *r = ud;
  const char *why = "";
  for (size_t i = 0; i < nq; i++)
    if (res[i].status != 0)
      why = res[i].err;
  if (r->rc == TLC_ELIMIT)
    why = "larger than the response limit";
  r->done(r->done_ud, r->rc, why, r->body, r->len);
  r->body = NULL;
  rdoc_free(r);
}

/* An area's name as the statistics show it: a state area's is its variable's (the parent of its
 * value entries), any other area's its entry's. */
static const char *area_name(const tlc_mapping_t *m, uint32_t handle) {
  const tlc_map_area_t *a = tlc_mapping_find(m, handle), *p;
  if (a == NULL)
    return NULL;
  if (a->parent != TLC_NO_HANDLE && (p = tlc_mapping_find(m, a->parent)) != NULL &&
      p->state_handle == handle && p->name[0] != '\0')
    return p->name;
  return a->name;
}

/* The shared copy of every area name in m, t's names (a new reference): a's cached one while
 * m is the same and has as many areas (TLC_TEV_MAPPING drops it), else a new copy. NULL on
 * TLC_ENOMEM. */
static names_snap_t *snap_get(struct tlc_rolld_acc *a, const tlc_mapping_t *m) {
  names_snap_t *s = a->names;
  if (s == NULL || s->src != m || s->nareas != m->nareas) {
    if ((s = tlc_calloc(1, sizeof(*s))) == NULL)
      return NULL;
    atomic_init(&s->refs, 1); /* the cache's */
    s->src = m;
    s->nareas = m->nareas;
    for (size_t k = 0; k < m->nareas; k++) {
      uint32_t h = m->areas[k].handle;
      if ((k > 0 && m->areas[k - 1].handle == h) ||
          tlc_rollup_names_add(&s->nm, h, area_name(m, h)) == 0)
        continue;
      snap_release(s);
      return NULL;
    }
    tlc_rollup_names_sort(&s->nm);
    snap_release(a->names);
    a->names = s;
  }
  atomic_fetch_add(&s->refs, 1);
  return s;
}

/* The names the document shows, from the targets' names (tlc_target_names, as `tlcap stats`):
 * the trend's area, or (diff) every area of a's target's names (b's when a has none), and the
 * query's context. 0 or TLC_ENOMEM. */
static int names_of(tlc_daemon_t *d, int what, const tlc_rollup_q_t *q, size_t nq, rdoc_t *r) {
  tlc_rollup_names_t *nm = &r->own;
  for (size_t i = 0; i < nq; i++) {
    tlc_target_t *t = tlc_targets_find(&d->in.targets, q[i].target);
    const tlc_mapping_t *m = t != NULL ? tlc_target_names(t) : NULL;
    struct tlc_rolld_acc *a = t != NULL ? find(d, t) : NULL;
    if (t == NULL)
      continue;
    if (m != NULL && what == 1) {
      if (tlc_rollup_names_add(nm, q[i].handle, area_name(m, q[i].handle)) != 0)
        return TLC_ENOMEM;
    } else if (m != NULL && a != NULL && r->snap == NULL && m->nareas > 0) {
      if ((r->snap = snap_get(a, m)) == NULL)
        return TLC_ENOMEM;
    }
    if (q[i].has_context && nm->context_name == NULL && t->pipe.engine != NULL) {
      tlc_ctx_t c;
      tlc_table_t tab;
      char buf[64];
      const char *n;
      uint32_t ci = 0;
      memset(&tab, 0, sizeof tab); /* one context: tlc_mapping_ctx_display's view of it */
      if (tlc_engine_context(t->pipe.engine, q[i].context, &c) == 0) {
        tab.contexts = &c;
        tab.ncontexts = 1;
      } else if (q[i].context == TLC_CTX_NEUTRAL) {
        ci = TLC_CTX_NEUTRAL;
      } else {
        continue;
      }
      n = tlc_mapping_ctx_display(m, &tab, ci, buf, sizeof buf);
      if (n != NULL && n[0] != '\0' && (nm->context_name = tlc_strndup(n, strlen(n))) == NULL)
        return TLC_ENOMEM;
    }
  }
  tlc_rollup_names_sort(nm);
  r->names = *nm; /* a view: never finished itself */
  if (r->snap != NULL) {
    r->names.v = r->snap->nm.v;
    r->names.n = r->snap->nm.n;
    r->names.cap = 0;
  }
  return 0;
}

static int hook(void *ud, int what, const char *name, const char *query, size_t cap,
                void (*done)(void *done_ud, int status, const char *err, char *body, size_t len),
                void *done_ud, void **job, char *err, size_t errlen) {
  tlc_daemon_t *d = ud;
  tlc_rollup_q_t q[2];
  size_t nq;
  uint8_t kind;
  tlc_rollup_acc_t *accs[2];
  tlc_rollup_ans_t ans;
  rdoc_t *r;
  int rc;
  *job = NULL;
  if (d->rollup == NULL) {
    snprintf(err, errlen, "rollups are off");
    return -ENOENT;
  }
  rc = tlc_rolld_parse(what & 3, name, query, tlc_when_now(), q, &nq, &kind, err, errlen);
  if (rc != 0)
    return rc;
  if ((r = tlc_calloc(1, sizeof(*r))) == NULL) {
    snprintf(err, errlen, "out of memory");
    return TLC_ENOMEM;
  }
  r->what = what;
  r->kind = kind;
  r->cap = cap;
  r->done = done;
  r->done_ud = done_ud;
  if (names_of(d, what & 3, q, nq, r) != 0) {
    rdoc_free(r);
    snprintf(err, errlen, "out of memory");
    return TLC_ENOMEM;
  }
  ans.encode = rdoc_encode;
  ans.free = rdoc_free;
  ans.ctx = r;
  for (size_t i = 0; i < nq; i++)
    accs[i] = find_name(d, q[i].target);
  rc = tlc_rollup_submit(d->rollup, accs, q, nq, &ans, rdoc_done, r, (tlc_rollup_job_t **)job);
  if (rc != 0) {
    rdoc_free(r);
    snprintf(err, errlen, "%s", tlc_strerror(rc));
  }
  return rc;
}

static void hook_cancel(void *ud, void *job) {
  (void)ud;
  tlc_rollup_cancel(job);
}

/* The view's rebuild hook: the running rebuild's progress, or the last one's figures. */
static void hook_rebuild(void *ud, const char *name, tlc_view_rebuild_t *out) {
  tlc_daemon_t *d = ud;
  memset(out, 0, sizeof *out);
  if (d->nrebuilt == 0)
    return; /* the usual case: no target to look for, whatever their number */
  for (size_t i = 0; i < d->nraccs; i++) {
    const struct tlc_rolld_acc *a = &d->raccs[i];
    const rebuild_t *b = a->rb;
    if (strcmp(a->t->name, name) != 0)
      continue;
    if (b != NULL && atomic_load_explicit(&b->started, memory_order_acquire)) {
      out->state = TLC_VIEW_REBUILD_RUNNING;
      out->segments = atomic_load_explicit(&b->nsegs, memory_order_relaxed);
      out->segments_read = atomic_load_explicit(&b->nread, memory_order_relaxed);
      out->samples = atomic_load_explicit(&b->samples, memory_order_relaxed);
    } else {
      *out = a->last; /* not started yet (choosing its segments): the last one, or none */
    }
    return;
  }
}

int tlc_rolld_start(tlc_daemon_t *d) {
  const tlc_config_t *c = &d->in.cfg;
  tlc_rollup_opts_t o;
  int r;
  if (c->rollup_bytes == 0) { /* off: no tap on the engines, none of its ingest cost */
    tlc_log(TLC_LOG_NOTICE, TLC_LOGC_MAIN,
            "rollups off (rollup_bytes = 0): trend and diff are off");
    return 0;
  }
  memset(&o, 0, sizeof o);
  o.state_dir = c->state_dir;
  o.keep_minutes_ms = c->rollup_minutes_ms;
  o.keep_hours_ms = c->rollup_hours_ms;
  o.max_bytes = c->rollup_bytes;
  r = tlc_rollup_new(d->in.loop, &o, &d->rollup);
  if (r != 0) {
    tlc_log(TLC_LOG_ERR, TLC_LOGC_MAIN, "rollups: %s (trend and diff are off)", tlc_strerror(r));
    return r;
  }
  d->view.view.rollup = hook;
  d->view.view.rollup_cancel = hook_cancel;
  d->view.view.rebuild = hook_rebuild;
  d->view.view.rollup_ud = d;
  return 0;
}

void tlc_rolld_dump(const tlc_daemon_t *d, tlc_json_w_t *w) {
  tlc_rollup_stats_t st;
  if (d->rollup == NULL)
    return;
  tlc_rollup_get_stats(d->rollup, &st);
  tlc_json_w_open(w, "rollup", '{');
  tlc_json_w_u64(w, "samples", st.samples);
  tlc_json_w_u64(w, "violations", st.violations);
  tlc_json_w_u64(w, "samples_dropped", st.samples_dropped);
  tlc_json_w_u64(w, "minutes_sealed", st.minutes_sealed);
  tlc_json_w_u64(w, "blocks_written", st.blocks_written);
  tlc_json_w_u64(w, "bytes_written", st.bytes_written);
  tlc_json_w_u64(w, "write_errors", st.write_errors);
  tlc_json_w_u64(w, "blocks_refused", st.blocks_refused);
  tlc_json_w_u64(w, "dirs_deleted", st.dirs_deleted);
  tlc_json_w_u64(w, "bytes_on_disk", st.bytes_on_disk);
  tlc_json_w_u64(w, "queries", st.queries);
  tlc_json_w_u64(w, "saved_samples", st.saved_samples);
  tlc_json_w_u64(w, "restored", st.restored);
  tlc_json_w_u64(w, "rebuilds", st.rebuilds);
  tlc_json_w_u64(w, "rebuilds_done", st.rebuilds_done);
  tlc_json_w_u64(w, "rebuilding", st.rebuilding);
  tlc_json_w_u64(w, "replayed", st.replayed);
  tlc_json_w_u64(w, "replay_dropped", st.replay_dropped);
  tlc_json_w_close(w, '}');
}

void tlc_rolld_reload(tlc_daemon_t *d) {
  const tlc_config_t *c = &d->in.cfg;
  if (d->rollup != NULL)
    tlc_rollup_set_budget(d->rollup, c->rollup_minutes_ms, c->rollup_hours_ms, c->rollup_bytes);
}

void tlc_rolld_close(tlc_daemon_t *d) {
  if (d->rollup == NULL)
    return;
  d->view.view.rollup = NULL;
  d->view.view.rebuild = NULL;
  while (d->nraccs > 0)
    detach(d, &d->raccs[d->nraccs - 1]);
  tlc_free(d->raccs);
  d->raccs = NULL;
  d->capraccs = 0;
  d->nrebuilt = 0;
  tlc_rollup_close(d->rollup);
  d->rollup = NULL;
}
