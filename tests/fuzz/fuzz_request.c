/* fuzz_request.c - libFuzzer harness for the subscriber server's request path: frame ->
 * decode -> dispatch -> encode reply, against a fake provider with two small targets, through a
 * detached subscriber (no socket). Authentication is bypassed (the subscriber starts
 * authenticated) when the first input byte is even, so both the pre-auth and the full request
 * surface are reached. Every feed is ticked after the input, so subscriptions also encode
 * snapshots, and a GetStats in parts (max_rows) is answered part by part. Range queries
 * (GetStats.range, Subscribe.history) go to a fake history hook, one at a time (another gets
 * TLC_ELIMIT, as the daemon's queue does when busy), completed after the input from the fake
 * target's table (or "no segments" for another name), which runs the reply and a
 * subscription's attach to its feed. Target "lab1" has a budget watch with violations (the
 * view's budgets hook), so a ViolationsRequest builds a whole reply, and a violation event goes
 * to the input's subscriptions after it. No crash, no UB, no leak; decode memory is bounded by
 * the frame cap. */
#include "base/alloc.h"
#include "base/err.h"
#include "budget/budget.h"
#include "history/history.h"
#include "pubsub/pubsub-int.h"
#include "pubsub/pubsub.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct ft {
  tlc_table_t t[2];
  tlc_mapping_t map;
  tlc_map_area_t area;
} ft_t;

static const char *const names[2] = { "lab1", "evl@127.0.0.1" };

static size_t f_count(void *ud) {
  (void)ud;
  return 2;
}

static int f_info(void *ud, size_t i, tlc_view_target_t *out) {
  ft_t *f = ud;
  if (i >= 2)
    return TLC_ERANGE;
  memset(out, 0, sizeof(*out));
  out->name = names[i];
  out->format = i == 0 ? TLC_FMT_BIN11 : TLC_FMT_EVLOG;
  out->connected = (int)i;
  out->peer = "";
  out->counters = f->t[i].counters;
  return 0;
}

static int f_find(void *ud, const char *name, size_t *idx) {
  size_t i;
  (void)ud;
  for (i = 0; i < 2; i++)
    if (strcmp(name, names[i]) == 0) {
      *idx = i;
      return 0;
    }
  return TLC_ERANGE;
}

static int f_snapshot(void *ud, size_t i, tlc_table_t *t, const tlc_snap_opts_t *so) {
  ft_t *f = ud;
  size_t k;
  tlc_table_clear(t);
  t->seq = f->t[i].seq;
  t->nwindows = f->t[i].nwindows;
  t->window_ns[0] = f->t[i].window_ns[0];
  for (k = 0; k < f->t[i].ncontexts; k++)
    if (tlc_table_add_ctx(t, &f->t[i].contexts[k]) < 0)
      return TLC_ENOMEM;
  for (k = 0; k < f->t[i].nrows; k++) {
    tlc_stat_t *r;
    if (f->t[i].rows[k].seq <= so->since_seq)
      continue;
    if ((r = tlc_table_add(t)) == NULL)
      return TLC_ENOMEM;
    *r = f->t[i].rows[k];
  }
  return 0;
}

/* statistics in parts: one row per part (the rows' handles are 0, 1, 2) */
static int f_split(void *ud, size_t i, uint64_t lo, size_t n, uint64_t since, uint64_t *hi) {
  (void)ud;
  (void)i;
  (void)n;
  (void)since;
  *hi = lo >= 2 ? (uint64_t)1 << 32 : lo + 1;
  return 0;
}

static int f_snapshot_part(void *ud, size_t i, tlc_table_t *t, const tlc_snap_opts_t *so,
                           uint64_t lo, uint64_t hi) {
  size_t k, j = 0;
  int r = f_snapshot(ud, i, t, so);
  if (r < 0)
    return r;
  for (k = 0; k < t->nrows; k++)
    if (t->rows[k].handle >= lo && t->rows[k].handle < hi)
      t->rows[j++] = t->rows[k];
  t->nrows = j;
  return 0;
}

static const tlc_mapping_t *f_mapping(void *ud, size_t i) {
  return i == 0 ? &((ft_t *)ud)->map : NULL;
}

static int f_rotate(void *ud, size_t i) {
  (void)ud;
  return i == 0 ? 0 : TLC_EINVAL;
}

static int f_segments(void *ud, const char *name, size_t max, tlc_view_segment_t **out, size_t *n,
                      int *truncated) {
  tlc_view_segment_t *v;
  (void)ud;
  *out = NULL;
  *n = 0;
  *truncated = 0;
  if (strcmp(name, "lab1") != 0)
    return TLC_EINVAL;
  v = tlc_calloc(2, sizeof(*v));
  if (v == NULL)
    return TLC_ENOMEM;
  for (size_t i = 0; i < 2 && i < max; i++) {
    v[i].seq = i + 1;
    v[i].state = i == 0 ? 2 : 1;
    snprintf(v[i].path, sizeof(v[i].path), "/state/lab1/20261126T100000Z-%08zu.txt.BIN%s", i + 1,
             i == 0 ? "" : ".part");
    v[i].records = 10;
    v[i].bytes = 240;
  }
  *out = v;
  *n = 2;
  return 0;
}

static int f_load(void *ud, size_t i, const char *buf, size_t len, char *err, size_t errlen) {
  (void)ud;
  (void)i;
  if (len > 0 && buf[0] == 'x') {
    snprintf(err, errlen, "line 1: bad");
    return TLC_ESYNTAX;
  }
  return 0;
}

/* The fake history queue: one query at a time. */
static struct {
  int active;
  void (*done)(void *ud, tlc_hist_result_t *r);
  void *ud;
  char name[64];
  tlc_snap_opts_t so;
  tlc_hist_answer_t ans; /* encoded before done, as the daemon's pool does; freed if cancelled */
  int moment;            /* an AroundRequest (the around hook): the result carries its export */
} g_hist;

static int f_history(void *ud, const char *name, const tlc_when_range_t *range,
                     const tlc_snap_opts_t *so, const tlc_hist_answer_t *ans,
                     void (*done)(void *, tlc_hist_result_t *), void *done_ud, void **job) {
  (void)ud;
  (void)range;
  if (g_hist.active)
    return TLC_ELIMIT;
  g_hist.active = 1;
  g_hist.done = done;
  g_hist.ans = *ans;
  g_hist.ud = done_ud;
  g_hist.so = *so;
  snprintf(g_hist.name, sizeof(g_hist.name), "%s", name);
  *job = &g_hist;
  return 0;
}

static int f_around(void *ud, const char *name, const tlc_moment_t *mo, int export_, size_t max,
                    const tlc_hist_answer_t *ans, void (*done)(void *, tlc_hist_result_t *),
                    void *done_ud, void **job) {
  tlc_snap_opts_t so;
  int r;
  (void)export_;
  (void)max;
  memset(&so, 0, sizeof(so));
  r = f_history(ud, name, &mo->range, &so, ans, done, done_ud, job);
  if (r == 0)
    g_hist.moment = 1;
  return r;
}

static void f_history_cancel(void *ud, void *job) {
  (void)ud;
  (void)job;
  g_hist.active = 0;
  g_hist.ans.free(g_hist.ans.ctx);
}

/* Completes the queries the input started (each done may start the next: bounded). */
static void hist_run(ft_t *f) {
  for (int i = 0; i < 40 && g_hist.active; i++) {
    tlc_hist_result_t r;
    tlc_hist_result_init(&r);
    g_hist.active = 0;
    if (strcmp(g_hist.name, names[0]) == 0) {
      if (f_snapshot(f, 0, &r.t, &g_hist.so) < 0)
        r.status = TLC_ENOMEM;
      r.segments = 2;
      if (g_hist.moment && (r.moment = tlc_malloc(7)) != NULL) {
        memcpy(r.moment, "moment", 7);
        r.moment_len = 6;
      }
    } else {
      r.status = -ENOENT;
      snprintf(r.err, sizeof(r.err), "no segments of that target");
    }
    g_hist.moment = 0;
    (void)g_hist.ans.encode(g_hist.ans.ctx, &r); /* then the table goes, as on the pool */
    tlc_table_fini(&r.t);
    tlc_mapping_fini(&r.names);
    g_hist.done(g_hist.ud, &r);
    tlc_hist_result_fini(&r);
  }
}

/* One watch for the process: budgets on handle 1 ("main") of "lab1", broken by a few
 * activations pushed through a real engine once. */
static tlc_bwatch_t *g_watch;
static tlc_engine_t *g_engine;

static const char *w_area(void *ud, uint32_t handle) {
  (void)ud;
  return handle == 1 ? "main" : NULL;
}

static tlc_bwatch_t *watch(void) {
  static const char text[] = "[budget main_net]\narea = main\nstat = net\nmax = 10ns\n"
                             "[budget any_min]\narea = *\nstat = net\nmin = 1us\n";
  tlc_tbudget_set_t s;
  tlc_bwatch_opts_t o;
  tlc_event_t ev[8];
  char err[200];
  size_t i;
  if (g_watch != NULL)
    return g_watch;
  tlc_tbudget_set_init(&s);
  memset(&o, 0, sizeof(o));
  o.area_name = w_area;
  if (tlc_tbudget_parse(&s, text, sizeof(text) - 1, "f.ini", err, sizeof(err)) != 0 ||
      tlc_bwatch_new(&g_watch, "lab1", &s, &o) != 0 ||
      tlc_engine_new(&g_engine, TLC_FMT_BIN11, NULL) != 0)
    abort();
  tlc_tbudget_set_fini(&s);
  tlc_bwatch_attach(g_watch, g_engine);
  memset(ev, 0, sizeof(ev));
  for (i = 0; i < 8; i++) {
    ev[i].time_ns = (int64_t)(100 * i + (i % 2) * 50);
    ev[i].handle = 1 + (uint32_t)(i / 4);
    ev[i].type = i % 2 == 0 ? TLC_EV_ENTRY : TLC_EV_EXIT;
  }
  tlc_engine_push(g_engine, ev, 8);
  return g_watch;
}

static const struct tlc_bwatch *f_budgets(void *ud, const char *name) {
  (void)ud;
  return strcmp(name, "lab1") == 0 ? watch() : NULL;
}

/* The rollups' rebuild hook: lab1's running, every other target's ended. */
static void f_rebuild(void *ud, const char *name, tlc_view_rebuild_t *out) {
  (void)ud;
  memset(out, 0, sizeof(*out));
  out->state = strcmp(name, "lab1") == 0 ? TLC_VIEW_REBUILD_RUNNING : TLC_VIEW_REBUILD_DONE;
  out->segments_read = 3;
  out->segments = 7;
  out->samples = 1000;
  out->done_unix_ms = out->state == TLC_VIEW_REBUILD_DONE ? 1700000000000 : 0;
}

static void closed(void *ud) {
  *(int *)ud = 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  uv_loop_t loop;
  ft_t f;
  tlc_view_t p;
  tlc_pubsub_opts_t o;
  tlc_pubsub_t *ps;
  tlc__ps_sub_t *s;
  tlc_ctx_t c;
  size_t i, k;
  int done = 0;
  if (size < 1)
    return 0;
  memset(&f, 0, sizeof(f));
  memset(&c, 0, sizeof(c));
  for (i = 0; i < 2; i++) {
    tlc_table_init(&f.t[i]);
    f.t[i].nwindows = 1;
    f.t[i].window_ns[0] = 1000;
    tlc_table_add_ctx(&f.t[i], &c);
    for (k = 0; k < 3; k++) {
      tlc_stat_t *r = tlc_table_add(&f.t[i]);
      if (r == NULL)
        continue;
      r->handle = (uint32_t)k;
      r->count = k;
      r->nwin = 1;
      r->seq = k + 1;
    }
    f.t[i].seq = 3;
  }
  f.area.handle = 1;
  f.area.name = (char *)"main";
  f.area.file = f.area.value_type = f.area.unit = f.area.path = (char *)"";
  f.map.areas = &f.area;
  f.map.nareas = 1;
  memset(&p, 0, sizeof(p));
  p.count = f_count;
  p.info = f_info;
  p.find = f_find;
  p.snapshot = f_snapshot;
  p.mapping = f_mapping;
  p.rotate = f_rotate;
  p.load_mapping = f_load;
  p.segments = f_segments;
  p.split = f_split;
  p.snapshot_part = f_snapshot_part;
  p.history = f_history;
  p.history_cancel = f_history_cancel;
  p.around = f_around;
  p.budgets = f_budgets;
  p.rebuild = f_rebuild;
  p.ud = &f;
  memset(&g_hist, 0, sizeof(g_hist));
  tlc_pubsub_opts_default(&o);
  o.max_request = 1u << 16;
  o.max_subscriptions = 8;
  uv_loop_init(&loop);
  if (tlc_pubsub_new(&loop, &o, &p, &ps) == 0) {
    s = tlc__ps_detached_new(ps, (data[0] & 1) == 0);
    if (s != NULL) {
      tlc__ps_detached_feed(s, data + 1, size - 1);
      hist_run(&f);
      f.t[0].rows[1].seq = ++f.t[0].seq;
      tlc__ps_tick_all(ps);
      tlc_pubsub_target_event(ps, "lab1", TLC_PS_EV_CONNECTED, "127.0.0.1:9");
      {
        tlc_violation_t v;
        if (tlc_bwatch_recent(watch(), 0, &v, 1) == 1)
          tlc_pubsub_violation(ps, "lab1", watch(), &v, tlc_bwatch_key(watch(), v.budget),
                               uv_now(&loop), 0);
      }
      tlc__ps_detached_free(s);
    }
    tlc_pubsub_close(ps, closed, &done);
    for (i = 0; i < 10 && !done; i++)
      uv_run(&loop, UV_RUN_ONCE);
  }
  uv_run(&loop, UV_RUN_NOWAIT);
  uv_loop_close(&loop);
  for (i = 0; i < 2; i++)
    tlc_table_fini(&f.t[i]);
  return 0;
}
