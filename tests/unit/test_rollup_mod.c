/* test_rollup_mod.c - the rollup module (daemon/rollup): samples fed to an accumulator over
 * several minutes of target time and two clock epochs, written by the worker, read back per
 * minute, per hour and as one step, equal the statistics computed here from the samples; a
 * query submitted on the loop sees the open minute; hours answer alone once retention deleted
 * the minutes (their files made old); a torn block at a file's end is skipped and counted;
 * budget violations are counted per minute, area and context and shown by trend; a run killed
 * after a checkpoint and restarted with the records after it replayed counts every sample once,
 * in its minute and its hour, across a board's restart too; an engine's sample log feeding an
 * accumulator (tlc_rollup_slog: rows resolved by the worker) gives the same minutes, cell for
 * cell, as the engine's tap feeding another (tlc_rollup_tap), with tasks (an X's GROSS and CALL
 * differ: the log's pair expanded right), over chunks, minutes, a clock
 * restart and a clear whose rows name other areas; with the worker stalled and memory short,
 * blocks not taken are counted as dropped and the minutes around the shortage stay exact.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "base/err.h"
#include "base/alloc.h"
#include "base/out.h"
#include "engine/engine.h"
#include "rollup/report.h"
#include "rollup/rollup.h"
#include "rng.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#define NS    4000
#define SPANM 150 /* minutes of target time: 3 hours, two of them whole */

typedef struct smp {
  uint32_t handle;
  uint8_t kind;
  int64_t v, t;
  uint64_t epoch;
} smp_t;

static char dir[256];

static void rm_rf(const char *p) {
  char cmd[400];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", p);
  assert_int_equal(system(cmd), 0);
}

/* dir: a fresh empty directory /tmp/NAME.PID. */
static void fresh_dir(const char *name) {
  snprintf(dir, sizeof dir, "/tmp/%s.%d", name, (int)getpid());
  rm_rf(dir);
  assert_int_equal(mkdir(dir, 0755), 0);
}

/* A rollup on dir, on loop (initialised here), with *o its options (state_dir only). */
static tlc_rollup_t *rollup_start(uv_loop_t *loop, tlc_rollup_opts_t *o) {
  tlc_rollup_t *r;
  assert_int_equal(uv_loop_init(loop), 0);
  memset(o, 0, sizeof *o);
  o->state_dir = dir;
  assert_int_equal(tlc_rollup_new(loop, o, &r), 0);
  return r;
}

/* Closes r (its worker done with every job) and its loop. */
static void rollup_stop(uv_loop_t *loop, tlc_rollup_t *r) {
  tlc_rollup_close(r);
  uv_run(loop, UV_RUN_DEFAULT);
  assert_int_equal(uv_loop_close(loop), 0);
}

static tlc_rollup_acc_t *acc_new(tlc_rollup_t *r, const char *target) {
  tlc_rollup_acc_t *a = tlc_rollup_acc_new(r, target);
  assert_non_null(a);
  return a;
}

/* A query of target's area `handle` in clock epoch `epoch`, steps of step_min minutes. */
static tlc_rollup_q_t target_q(const char *target, uint32_t handle, int64_t epoch,
                               int64_t step_min) {
  tlc_rollup_q_t q;
  memset(&q, 0, sizeof q);
  snprintf(q.target, sizeof q.target, "%s", target);
  q.handle = handle;
  q.when = TLC_RQ_TARGET;
  q.epoch = epoch;
  q.step_min = step_min;
  return q;
}

/* Samples in time order (the engine closes them so), epoch 0 then 1 from sample NS/2. */
static smp_t *make(uint64_t seed) {
  rng_t r;
  smp_t *s = calloc(NS, sizeof(*s));
  int64_t t = 5 * TLC_ROLLUP_MINUTE_NS + 7;
  rng_seed(&r, seed);
  for (int i = 0; i < NS; i++) {
    s[i].handle = 10 + (uint32_t)rng_below(&r, 4);
    s[i].kind = (uint8_t)rng_below(&r, 2);
    s[i].v = (int64_t)rng_below(&r, 1ull << rng_below(&r, 28));
    if (i == NS / 2)
      t = 3 * TLC_ROLLUP_MINUTE_NS; /* the board restarted: a new epoch, times start over */
    t += (int64_t)rng_below(&r, 2 * (SPANM * TLC_ROLLUP_MINUTE_NS / NS));
    s[i].t = t;
    s[i].epoch = i < NS / 2 ? 0 : 1;
  }
  return s;
}

static void feed(tlc_rollup_acc_t *a, const smp_t *s, int from, int to) {
  for (int i = from; i < to; i++) {
    tlc_rollup_sample_t x = { s[i].handle, 0, 0, s[i].kind, 0, s[i].v, s[i].t, s[i].epoch };
    tlc_rollup_add(a, &x);
  }
}

/* Checks every step of res (handle h, kind k) against the samples of epoch e. */
static void check(const smp_t *s, int upto, const tlc_rollup_res_t *res, uint32_t h, uint64_t e,
                  int64_t step) {
  size_t found = 0;
  for (size_t i = 0; i < res->nsteps; i++) {
    for (uint8_t k = 0; k < 2; k++) {
      tlc_rollup_key_t key = { h, 0, 0, k, 0 };
      const tlc_rollup_cell_t *c = tlc_rollup_cell_find(&res->steps[i], &key);
      uint64_t n = 0;
      int64_t sum = 0, mx = 0;
      for (int j = 0; j < upto; j++) {
        int64_t m = s[j].t / TLC_ROLLUP_MINUTE_NS;
        if (s[j].handle != h || s[j].kind != k || s[j].epoch != e)
          continue;
        if (step > 0 && (m / step) * step != res->steps[i].minute)
          continue;
        if (n == 0 || s[j].v > mx)
          mx = s[j].v;
        n++;
        sum += s[j].v;
      }
      if (n == 0) {
        assert_true(c == NULL);
        continue;
      }
      assert_non_null(c);
      assert_int_equal(c->d.n, n);
      assert_int_equal(c->d.sum, sum);
      assert_int_equal(c->d.max, mx);
      /* the largest sample's bucket: its representative, within 1% */
      assert_true(llabs(tlc_rollup_quantile(c, 1000) - mx) <= mx / 100);
      found += n;
    }
  }
  /* and no step is missing: every sample of the epoch was in one */
  {
    size_t all = 0;
    for (int j = 0; j < upto; j++)
      all += s[j].handle == h && s[j].kind < 2 && s[j].epoch == e;
    assert_int_equal(found, all);
  }
}

static void query(uint32_t h, int64_t epoch, int64_t step, tlc_rollup_res_t *res) {
  tlc_rollup_q_t q = target_q("board/app", h, epoch, step);
  tlc_rollup_read(dir, &q, res);
  assert_int_equal(res->status, 0);
}

static int answered;
static tlc_rollup_res_t got;

static void on_answer(void *ud, tlc_rollup_res_t *res, size_t nq) {
  (void)ud;
  assert_int_equal(nq, 1);
  answered++;
  got = *res;
  res->steps = NULL; /* taken */
  res->nsteps = 0;
}

/* Submits q (with accs: sealing their open minutes first) and runs loop until it is answered:
 * the answer in got; the worker has done every job handed to it before. */
static void ask(uv_loop_t *loop, tlc_rollup_t *r, tlc_rollup_acc_t *const *accs,
                const tlc_rollup_q_t *q) {
  answered = 0;
  assert_int_equal(tlc_rollup_submit(r, accs, q, 1, NULL, on_answer, NULL, NULL), 0);
  while (answered == 0)
    uv_run(loop, UV_RUN_ONCE);
}

static void age_minutes(const char *d, int depth) {
  DIR *dd = opendir(d);
  struct dirent *de;
  if (dd == NULL)
    return;
  while ((de = readdir(dd)) != NULL) {
    char p[1024];
    struct stat st;
    if (de->d_name[0] == '.')
      continue;
    snprintf(p, sizeof p, "%s/%s", d, de->d_name);
    if (stat(p, &st) == 0 && S_ISDIR(st.st_mode))
      age_minutes(p, depth + (de->d_name[0] == 'm'));
    else if (depth > 0) {
      struct timeval tv[2] = { { 1000, 0 }, { 1000, 0 } };
      assert_int_equal(utimes(p, tv), 0);
    }
  }
  closedir(dd);
}

static void test_write_read(void **state) {
  uv_loop_t loop;
  tlc_rollup_t *r;
  tlc_rollup_acc_t *a;
  tlc_rollup_opts_t o;
  tlc_rollup_res_t res;
  tlc_rollup_q_t q;
  tlc_rollup_stats_t st;
  smp_t *s = make(7);
  (void)state;
  fresh_dir("test_rollup_mod");
  r = rollup_start(&loop, &o);
  a = acc_new(r, "board/app");
  feed(a, s, 0, NS - 100);
  /* a query on the loop sees everything fed so far, the open minute included */
  q = target_q("board/app", 11, -1, 1);
  ask(&loop, r, &a, &q);
  assert_int_equal(got.status, 0);
  assert_int_equal(got.epoch, 1);
  check(s, NS - 100, &got, 11, 1, 1);
  tlc_rollup_res_fini(&got);
  feed(a, s, NS - 100, NS);
  tlc_rollup_acc_free(a);
  tlc_rollup_get_stats(r, &st);
  assert_int_equal(st.samples_dropped, 0);
  rollup_stop(&loop, r);

  for (uint32_t h = 10; h < 14; h++)
    for (uint64_t e = 0; e < 2; e++) {
      query(h, (int64_t)e, 1, &res);
      check(s, NS, &res, h, e, 1);
      tlc_rollup_res_fini(&res);
      query(h, (int64_t)e, 60, &res);
      check(s, NS, &res, h, e, 60);
      tlc_rollup_res_fini(&res);
      query(h, (int64_t)e, 0, &res);
      assert_int_equal(res.nsteps, 1);
      check(s, NS, &res, h, e, 0);
      tlc_rollup_res_fini(&res);
    }

  /* retention: minutes made old go at the worker's first pass; the hours then answer alone */
  {
    char p[400];
    snprintf(p, sizeof p, "%s/.rollup", dir);
    age_minutes(p, 0);
  }
  assert_int_equal(uv_loop_init(&loop), 0);
  o.keep_minutes_ms = 86400000;
  assert_int_equal(tlc_rollup_new(&loop, &o, &r), 0);
  /* the worker's first pass runs before it takes any job: close's stop job waits for it */
  rollup_stop(&loop, r);
  for (uint32_t h = 10; h < 14; h++) {
    query(h, 1, 60, &res);
    check(s, NS, &res, h, 1, 60);
    tlc_rollup_res_fini(&res);
  }
  /* a torn block at the end of an hour file is skipped and counted */
  {
    char p[400];
    int fd;
    snprintf(p, sizeof p, "%s/.rollup/board/app/e1/h0/12.r", dir);
    fd = open(p, O_WRONLY | O_APPEND);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "TLRU\1\0\0\0garbage", 15), 15);
    close(fd);
    query(12, 1, 60, &res);
    check(s, NS, &res, 12, 1, 60);
    assert_int_equal(res.blocks_refused, 1);
    tlc_rollup_res_fini(&res);
  }
  rm_rf(dir);
  free(s);
}

/* Budget violations counted in the minute of their end time, per area and context, whatever
 * statistic they broke (a rate's and a PERIOD's in a minute with no PERIOD sample too); trend
 * shows them per step (minutes and hours), only for the context asked for when one is. */
static void test_violations(void **state) {
  uv_loop_t loop;
  tlc_rollup_t *r;
  tlc_rollup_acc_t *a;
  tlc_rollup_opts_t o;
  tlc_rollup_res_t res;
  tlc_rollup_q_t q = target_q("board", 20, 0, 0);
  tlc_rollup_stats_t st;
  tlc_rollup_cell_t c;
  tlc_out_t out;
  char *doc;
  size_t len;
  const int64_t M = TLC_ROLLUP_MINUTE_NS;
  /* per minute 0..4: the violations of area 20 in context 0 and in context 1 */
  static const unsigned want0[5] = { 1, 0, 3, 0, 1 }, want1[5] = { 0, 2, 0, 0, 0 };
  (void)state;
  fresh_dir("test_rollup_viol");
  r = rollup_start(&loop, &o);
  a = acc_new(r, "board");
  for (int m = 0; m < 5; m++) {
    tlc_rollup_sample_t x = { 20, 0, 0, 0 /* NET */, 0, 1000 + m, m * M + 10, 0 };
    tlc_rollup_add(a, &x);
    for (unsigned k = 0; k < want0[m]; k++) /* NET, PERIOD (no sample of it), a rate */
      tlc_rollup_add_violation(a, 20, 0, 0,
                               (uint8_t)(k == 0   ? 0
                                         : k == 1 ? 3
                                                  : 5),
                               0, m * M + 20 + k, 0);
    for (unsigned k = 0; k < want1[m]; k++)
      tlc_rollup_add_violation(a, 20, 1, 0, 0, 0, m * M + 30, 0);
    x.handle = 21; /* another area's samples in between */
    x.end = m * M + 40;
    tlc_rollup_add(a, &x);
  }
  tlc_rollup_acc_free(a);
  /* a query runs after everything handed to the worker before it: then the counters are in */
  ask(&loop, r, NULL, &q);
  tlc_rollup_res_fini(&got);
  tlc_rollup_get_stats(r, &st);
  assert_int_equal(st.violations, 7);
  assert_int_equal(st.samples_dropped, 0);
  rollup_stop(&loop, r);

  for (int ctx = -1; ctx <= 1; ctx++) {
    q.has_context = ctx >= 0;
    q.context = ctx >= 0 ? (uint32_t)ctx : 0;
    q.step_min = 1;
    tlc_rollup_read(dir, &q, &res);
    assert_int_equal(res.status, 0);
    assert_int_equal(res.nsteps, 5);
    for (size_t i = 0; i < res.nsteps; i++) {
      unsigned w = ctx == 0 ? want0[i] : ctx == 1 ? want1[i] : want0[i] + want1[i];
      assert_int_equal(res.steps[i].minute, (int64_t)i);
      assert_int_equal(tlc_rollup_area_cell(&res.steps[i], 20, 0, q.has_context, q.context, &c), 0);
      assert_int_equal(c.violations, w);
      assert_int_equal(c.d.n, ctx == 1 ? 0 : 1);
      tlc_free(c.bins);
    }
    tlc_rollup_res_fini(&res);
    q.step_min = 60; /* the hour */
    tlc_rollup_read(dir, &q, &res);
    assert_int_equal(res.nsteps, 1);
    assert_int_equal(tlc_rollup_area_cell(&res.steps[0], 20, 0, q.has_context, q.context, &c), 0);
    assert_int_equal(c.violations, ctx == 0 ? 5 : ctx == 1 ? 2 : 7);
    tlc_free(c.bins);
    tlc_rollup_res_fini(&res);
  }
  /* the trend document: a "violations" member on the steps that have some */
  q.has_context = 0;
  q.step_min = 1;
  tlc_rollup_read(dir, &q, &res);
  tlc_out_init(&out, 1u << 20, NULL, NULL);
  assert_int_equal(tlc_rollup_trend_json(&out, &q, &res, 0, NULL), 0);
  doc = tlc_out_take(&out, &len);
  assert_non_null(doc);
  assert_non_null(strstr(doc, "\"start\":0,\"count\":1,"));
  assert_non_null(strstr(doc, "\"max_time\":10,\"violations\":1}"));
  assert_non_null(strstr(doc, "\"max_time\":60000000010,\"violations\":2}"));
  assert_non_null(strstr(doc, "\"max_time\":120000000010,\"violations\":3}"));
  assert_non_null(strstr(doc, "\"max_time\":180000000010}"));
  tlc_free(doc);
  tlc_out_fini(&out);
  tlc_out_init(&out, 1u << 20, NULL, NULL);
  assert_int_equal(tlc_rollup_trend_text(&out, &q, &res, 0, NULL), 0);
  doc = tlc_out_take(&out, &len);
  assert_non_null(strstr(doc, "VIOLATIONS"));
  tlc_free(doc);
  tlc_out_fini(&out);
  tlc_rollup_res_fini(&res);
  rm_rf(dir);
}

/* A rebuild's accumulator (the past) and the live one of the same target, fed in turns, never
 * cut each other's minutes or hours: one block per area and minute, one per area and hour. */
static void test_past_apart(void **state) {
  uv_loop_t loop;
  tlc_rollup_t *r;
  tlc_rollup_acc_t *live, *past;
  tlc_rollup_opts_t o;
  tlc_rollup_stats_t st;
  tlc_rollup_res_t res;
  tlc_rollup_q_t q;
  const int64_t M = TLC_ROLLUP_MINUTE_NS;
  const int per = 3000; /* more than a chunk: chunks of both reach the worker in turns */
  (void)state;
  fresh_dir("test_rollup_past");
  r = rollup_start(&loop, &o);
  live = acc_new(r, "board");
  past = tlc_rollup_acc_new_past(r, "board");
  assert_non_null(past);
  for (int m = 0; m < 5; m++)
    for (int i = 0; i < per; i++) {
      tlc_rollup_sample_t x = { 1, 0, 0, 0, 0, 100 + i, m * M + i, 0 };
      tlc_rollup_sample_t y = { 2, 0, 0, 0, 0, 200 + i, 100 * M + m * per + i, 0 };
      tlc_rollup_add(past, &x);
      tlc_rollup_add(live, &y);
    }
  tlc_rollup_acc_free(past);
  tlc_rollup_acc_free(live);
  q = target_q("board", 1, 0, 0);
  ask(&loop, r, NULL, &q);
  tlc_rollup_res_fini(&got);
  tlc_rollup_get_stats(r, &st);
  assert_int_equal(st.blocks_written, 5 + 1); /* the minutes: the hours are open */
  assert_int_equal(st.samples, 10 * (uint64_t)per);
  rollup_stop(&loop, r);
  for (uint32_t h = 1; h <= 2; h++) {
    q.handle = h;
    q.step_min = 1;
    tlc_rollup_read(dir, &q, &res);
    assert_int_equal(res.status, 0);
    assert_int_equal(res.nsteps, h == 1 ? 5 : 1);
    for (size_t i = 0; i < res.nsteps; i++) {
      tlc_rollup_key_t k = { h, 0, 0, 0, 0 };
      const tlc_rollup_cell_t *c = tlc_rollup_cell_find(&res.steps[i], &k);
      assert_non_null(c);
      assert_int_equal(c->d.n, h == 1 ? (uint64_t)per : 5 * (uint64_t)per);
    }
    tlc_rollup_res_fini(&res);
  }
  rm_rf(dir);
}

/* Waits until the worker did every job handed to it so far (a query that seals nothing; with
 * acc, one that seals its open minute first, as trend does). */
static void sync_worker(uv_loop_t *loop, tlc_rollup_t *r, tlc_rollup_acc_t *acc) {
  tlc_rollup_q_t q = target_q("board/app", 10, 0, 0);
  ask(loop, r, acc != NULL ? &acc : NULL, &q);
  tlc_rollup_res_fini(&got);
}

/* A run killed after a checkpoint: samples [0, ck) before the checkpoint (its copy taken and
 * written under pos), [ck, kill) after it, the open minute sealed early at `early` (a query;
 * -1: none); the state directory as the kill left it (a copy taken then) is restarted on: the
 * records after the checkpoint, [ck, kill), replayed, then [kill, NS) live. Every minute and
 * every hour of both epochs holds each sample once. */
static void crash_and_replay(const smp_t *s, int ck, int early, int kill) {
  uv_loop_t loop;
  tlc_rollup_t *r;
  tlc_rollup_acc_t *a;
  tlc_rollup_opts_t o;
  tlc_rollup_stats_t st;
  tlc_rollup_res_t res;
  const tlc_rollup_pos_t pos = { 3, 4096, 1 };
  char cmd[700], img[300];
  uint64_t gen;
  fresh_dir("test_rollup_replay");
  snprintf(img, sizeof img, "%s.kill", dir);
  rm_rf(img);
  r = rollup_start(&loop, &o);
  a = acc_new(r, "board/app");
  feed(a, s, 0, ck);
  gen = tlc_rollup_acc_save(a);
  tlc_rollup_acc_saved_at(a, gen, &pos);
  if (early >= 0) {
    feed(a, s, ck, early);
    sync_worker(&loop, r, a);
    feed(a, s, early, kill);
  } else {
    feed(a, s, ck, kill);
  }
  sync_worker(&loop, r, NULL); /* the worker as far as the chunks handed to it: the kill */
  snprintf(cmd, sizeof cmd, "cp -a '%s' '%s'", dir, img);
  assert_int_equal(system(cmd), 0);
  tlc_rollup_acc_free(a);
  tlc_rollup_close(r);
  uv_run(&loop, UV_RUN_DEFAULT);
  rm_rf(dir);
  assert_int_equal(rename(img, dir), 0);
  /* the restart */
  assert_int_equal(tlc_rollup_new(&loop, &o, &r), 0);
  a = acc_new(r, "board/app");
  tlc_rollup_acc_replay(a, &pos);
  feed(a, s, ck, kill);
  tlc_rollup_acc_replay_end(a);
  feed(a, s, kill, NS);
  tlc_rollup_acc_free(a);
  sync_worker(&loop, r, NULL);
  tlc_rollup_get_stats(r, &st);
  rollup_stop(&loop, r);
  assert_true(st.replay_dropped > 0); /* the kill came after minutes were written */
  assert_int_equal(st.samples_dropped, 0);
  for (uint64_t e = 0; e < 2; e++)
    for (uint32_t h = 10; h < 14; h++) {
      query(h, (int64_t)e, 1, &res);
      check(s, NS, &res, h, e, 1);
      tlc_rollup_res_fini(&res);
    }
  /* the hours alone: the minute directories deleted */
  snprintf(cmd, sizeof cmd, "rm -rf '%s'/.rollup/board/app/e*/m*", dir);
  assert_int_equal(system(cmd), 0);
  for (uint64_t e = 0; e < 2; e++)
    for (uint32_t h = 10; h < 14; h++) {
      query(h, (int64_t)e, 60, &res);
      check(s, NS, &res, h, e, 60);
      tlc_rollup_res_fini(&res);
    }
  rm_rf(dir);
}

static void test_replay_once(void **state) {
  smp_t *s = make(7);
  (void)state;
  crash_and_replay(s, 1000, -1, 1700);                 /* minutes written after the checkpoint */
  crash_and_replay(s, 1000, 1200, 1700);               /* ... one of them sealed early by a query */
  crash_and_replay(s, NS / 2 - 300, -1, NS / 2 + 400); /* across the board's restart */
  crash_and_replay(s, 1000, 1010, 1020); /* the checkpoint's minute sealed early only */
  free(s);
}

/* E/X of 24 code areas from `base` on 2 cores and writes of 4 data areas, times from *t */
static void slog_events(tlc_event_t *ev, size_t n, int64_t *t, uint32_t base, rng_t *r) {
  for (size_t i = 0; i < n; i++) {
    tlc_event_t *x = &ev[i];
    memset(x, 0, sizeof(*x));
    *t += 1 + (int64_t)rng_below(r, 40000000); /* ~20 ms: 30,000 events span 10 minutes */
    x->time_ns = *t;
    x->core = (uint8_t)rng_below(r, 2);
    if (rng_below(r, 10) < 8) {
      x->handle = 0x10000000u + base + (uint32_t)rng_below(r, 24);
      x->type = (uint8_t)(rng_below(r, 2) ? TLC_EV_ENTRY : TLC_EV_EXIT);
    } else {
      x->handle = 0x20000000u + base + (uint32_t)rng_below(r, 4);
      x->type = TLC_EV_WRITE;
      x->data = rng_below(r, 1000);
    }
  }
}

/* the writes to the first data area (context_area) name one of two tasks */
static void two_tasks(tlc_event_t *ev, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (ev[i].handle == 0x20000000u)
      ev[i].data %= 2;
}

/* a and b (all areas of an epoch, per minute) have the same steps and cells (as many in each:
 * every cell of a found in b) */
static size_t same_steps(const tlc_rollup_res_t *a, const tlc_rollup_res_t *b) {
  size_t cells = 0;
  assert_int_equal(a->nsteps, b->nsteps);
  for (size_t i = 0; i < a->nsteps; i++) {
    const tlc_rollup_blk_t *x = &a->steps[i], *y = &b->steps[i];
    assert_int_equal(x->minute, y->minute);
    assert_int_equal(x->n, y->n);
    for (size_t j = 0; j < x->n; j++) {
      const tlc_rollup_cell_t *c = &x->cells[j], *d = tlc_rollup_cell_find(y, &c->key);
      assert_non_null(d);
      assert_int_equal(c->key.row_kind, d->key.row_kind);
      assert_int_equal(c->d.n, d->d.n);
      assert_int_equal(c->d.sum, d->d.sum);
      assert_int_equal(c->d.min, d->d.min);
      assert_int_equal(c->d.max, d->d.max);
      assert_int_equal(c->tmin, d->tmin);
      assert_int_equal(c->tmax, d->tmax);
      assert_int_equal(c->nbins, d->nbins);
      assert_memory_equal(c->bins, d->bins, c->nbins * sizeof(*c->bins));
      assert_int_equal(c->violations, d->violations);
      cells++;
    }
  }
  return cells;
}

/* An engine feeding two accumulators of one rollup (on a fresh dir): "board/tap" through its
 * tap, "board/log" through its sample log; with context_area when it is not 0. */
typedef struct pair {
  uv_loop_t loop;
  tlc_rollup_opts_t o;
  tlc_rollup_t *r;
  tlc_rollup_acc_t *at, *al;
  tlc_engine_t *e;
} pair_t;

static void pair_start(pair_t *p, uint32_t context_area) {
  tlc_engine_opts_t eo;
  fresh_dir("test_rollup_mod");
  p->r = rollup_start(&p->loop, &p->o);
  p->at = acc_new(p->r, "board/tap");
  p->al = acc_new(p->r, "board/log");
  tlc_engine_opts_default(&eo);
  eo.tap = tlc_rollup_tap;
  eo.tap_ud = p->at;
  eo.has_context_area = context_area != 0;
  eo.context_area = context_area;
  assert_int_equal(tlc_engine_new(&p->e, TLC_FMT_BIN11, &eo), 0);
  assert_int_equal(tlc_engine_set_slog(p->e, tlc_rollup_slog, p->al), 0);
}

/* Frees the engine and both accumulators, then takes the rollup's stats into *st (the drops
 * are counted as blocks are refused, on this thread) and stops it. */
static void pair_stop(pair_t *p, tlc_rollup_stats_t *st) {
  tlc_engine_free(p->e);
  tlc_rollup_acc_free(p->at);
  tlc_rollup_acc_free(p->al);
  tlc_rollup_get_stats(p->r, st);
  rollup_stop(&p->loop, p->r);
}

/* What the pair wrote in clock epoch `epoch`, every area per minute: the tap's into a, the
 * log's into b. */
static void pair_read(int64_t epoch, tlc_rollup_res_t *a, tlc_rollup_res_t *b) {
  tlc_rollup_q_t q = target_q("board/tap", 0, epoch, 1);
  q.all_handles = 1;
  tlc_rollup_read(dir, &q, a);
  assert_int_equal(a->status, 0);
  snprintf(q.target, sizeof q.target, "%s", "board/log");
  tlc_rollup_read(dir, &q, b);
  assert_int_equal(b->status, 0);
}

/* the sum of the cells' violations of res's steps */
static uint64_t res_violations(const tlc_rollup_res_t *res) {
  uint64_t n = 0;
  for (size_t i = 0; i < res->nsteps; i++)
    for (size_t j = 0; j < res->steps[i].n; j++)
      n += res->steps[i].cells[j].violations;
  return n;
}

/* The pair's minutes of clock epochs 0 and 1 compared (each has 5 steps or more, the same
 * cells): the cells compared, the tap's and the log's violations added to *va and *vb (NULL:
 * not asked). */
static size_t pair_same(uint64_t *va, uint64_t *vb) {
  size_t cells = 0;
  for (int64_t ep = 0; ep < 2; ep++) {
    tlc_rollup_res_t a, b;
    pair_read(ep, &a, &b);
    assert_true(a.nsteps >= 5);
    cells += same_steps(&a, &b);
    if (va != NULL)
      *va += res_violations(&a);
    if (vb != NULL)
      *vb += res_violations(&b);
    tlc_rollup_res_fini(&a);
    tlc_rollup_res_fini(&b);
  }
  return cells;
}

static void test_slog_as_tap(void **state) {
  enum { N = 30000 };
  pair_t p;
  tlc_rollup_stats_t st;
  tlc_event_t *ev = calloc(N, sizeof(*ev));
  int64_t t = 10 * TLC_ROLLUP_MINUTE_NS;
  rng_t g;
  (void)state;
  rng_seed(&g, 99);
  assert_non_null(ev);
  /* tasks: GROSS (time in the task) differs from CALL, each from its half of the log's pair */
  pair_start(&p, 0x20000000u);
  slog_events(ev, N, &t, 0, &g);
  two_tasks(ev, N);
  tlc_engine_push(p.e, ev, N / 3);
  tlc_engine_push(p.e, ev + N / 3, N - N / 3);
  /* a board restart: a gap, then times far below (epoch 1) */
  tlc_engine_gap(p.e);
  t = 2 * TLC_ROLLUP_MINUTE_NS;
  slog_events(ev, N, &t, 0, &g);
  two_tasks(ev, N);
  tlc_engine_push(p.e, ev, N);
  assert_int_equal(tlc_engine_counters(p.e)->clock_resets, 1);
  /* a clear: row indexes reused by other areas (epoch 0 again: the clock restarts' count) */
  tlc_engine_clear(p.e);
  t += TLC_ROLLUP_MINUTE_NS;
  slog_events(ev, N, &t, 100, &g);
  tlc_engine_push(p.e, ev, N);
  pair_stop(&p, &st);
  assert_int_equal(st.samples_dropped, 0);

  assert_true(pair_same(NULL, NULL) > 200);
  free(ev);
  rm_rf(dir);
}

/* A second tap on the pair's engine that makes every sample whose value is a multiple of 7 a
 * violation (two when it is a multiple of 3 too), as the daemon hands them on: to the tap's
 * accumulator through its chunk, to the log's through the engine's sample log during the
 * push: an even value's as the budget watch's answer (the engine's tag of the sample:
 * budgetd.c), an odd one's as a note (tlc_rollup_slog_violation: rolld.c, a rate's). */
typedef struct viol_tap {
  pair_t *p;
  uint64_t n, tagged; /* violations; those of them tagged */
} viol_tap_t;

static int viol_tap(void *ud, const tlc_engine_sample_t *s) {
  viol_tap_t *v = ud;
  int n;
  if (s->kind >= TLC_NKINDS || s->value % 7 != 0)
    return 0;
  n = s->value % 3 == 0 ? 2 : 1;
  for (int i = 0; i < n; i++)
    tlc_rollup_add_violation(v->p->at, s->handle, s->context, s->state, s->kind, s->row_kind,
                             s->end, s->epoch);
  v->n += (uint64_t)n;
  if (s->value % 2 == 0) {
    v->tagged += (uint64_t)n;
    return n;
  }
  for (int i = 0; i < n; i++)
    assert_int_equal(tlc_rollup_slog_violation(v->p->al, v->p->e, s->handle, s->context, s->state,
                                               s->kind, s->row_kind, s->end, s->epoch),
                     0);
  return 0;
}

/* Budget violations through the sample log (a tap's tag of their sample, or
 * tlc_rollup_slog_violation's note: no hand-off per violation) land in the minutes and cells the
 * accumulator's chunk puts them in (tlc_rollup_add_violation, in order with a tap's samples):
 * during pushes, across minutes and a clock restart, and outside a push (handed over at once);
 * none lost. A log that is not the accumulator's takes none. */
static void test_slog_violations(void **state) {
  enum { N = 30000 };
  pair_t p;
  viol_tap_t v = { &p, 0, 0 };
  tlc_rollup_stats_t st;
  tlc_event_t *ev = calloc(N, sizeof(*ev));
  int64_t t = 10 * TLC_ROLLUP_MINUTE_NS;
  uint64_t nva = 0, nv = 0;
  size_t cells;
  rng_t g;
  (void)state;
  rng_seed(&g, 17);
  assert_non_null(ev);
  pair_start(&p, 0x20000000u);
  assert_int_equal(tlc_engine_add_tap(p.e, viol_tap, NULL, NULL, &v), 0);
  assert_int_equal(tlc_rollup_slog_violation(p.at, p.e, 1, 0, 0, TLC_NET, 0, t, 0), TLC_EINVAL);
  slog_events(ev, N, &t, 0, &g);
  two_tasks(ev, N);
  for (size_t i = 0; i < N; i += 256) /* the daemon's chunks */
    tlc_engine_push(p.e, ev + i, N - i < 256 ? N - i : 256);
  /* a board restart: a gap, then times far below (epoch 1) */
  tlc_engine_gap(p.e);
  t = 2 * TLC_ROLLUP_MINUTE_NS;
  slog_events(ev, N, &t, 0, &g);
  tlc_engine_push(p.e, ev, N);
  /* outside a push: the last thing before the engine goes, in the last minute */
  tlc_rollup_add_violation(p.at, 0x10000001u, 0, 0, TLC_CALL, TLC_ROW_CODE, t, 1);
  assert_int_equal(
      tlc_rollup_slog_violation(p.al, p.e, 0x10000001u, 0, 0, TLC_CALL, TLC_ROW_CODE, t, 1), 0);
  v.n++;
  assert_true(v.n > 1000 && v.tagged > v.n / 4 && v.tagged < v.n * 3 / 4);
  pair_stop(&p, &st);
  assert_int_equal(st.samples_dropped, 0);
  cells = pair_same(&nva, &nv);
  assert_int_equal(nva, nv);
  assert_int_equal(nv, v.n);
  assert_true(cells > 200);
  free(ev);
  rm_rf(dir);
}

/* ---- memory short while the worker is stalled: blocks of the sample log not taken ---- */

static int blocks_fail; /* the loop's allocations of sample log blocks fail */
static void *fail_malloc(size_t n) {
  if (blocks_fail && n == TLC_SLOG_BLOCK * sizeof(tlc_engine_slent_t))
    return NULL;
  return malloc(n);
}
static void *fail_calloc(size_t c, size_t n) {
  return calloc(c, n);
}
static void *fail_realloc(void *p, size_t n) {
  return realloc(p, n);
}

static uv_sem_t stall_sem;
static void stall_encode(void *ctx, const tlc_rollup_q_t *q, tlc_rollup_res_t *res, size_t nq) {
  (void)ctx;
  (void)q;
  (void)res;
  (void)nq;
  uv_sem_wait(&stall_sem); /* the worker waits here until the test lets it go */
}
static void stall_cb(void *ud, tlc_rollup_res_t *res, size_t nq) {
  (void)res;
  (void)nq;
  *(int *)ud = 1;
}

/* events from *t until `end` (exclusive) pushed into e, in batches */
static void push_until(tlc_engine_t *e, int64_t *t, int64_t end, rng_t *g) {
  enum { B = 512 };
  tlc_event_t ev[B];
  size_t n = 0;
  for (;;) {
    int64_t t0 = *t;
    slog_events(&ev[n], 1, t, 0, g);
    if (ev[n].time_ns >= end) {
      *t = t0; /* not taken: the next phase starts from there */
      break;
    }
    if (++n == B) {
      tlc_engine_push(e, ev, n);
      n = 0;
    }
  }
  if (n > 0)
    tlc_engine_push(e, ev, n);
}

/* the sum of the cells' counts of res's steps */
static uint64_t res_count(const tlc_rollup_res_t *res) {
  uint64_t n = 0;
  for (size_t i = 0; i < res->nsteps; i++)
    for (size_t j = 0; j < res->steps[i].n; j++)
      n += res->steps[i].cells[j].d.n;
  return n;
}

/* The worker stalled (a query's encoding waits) and memory short for the sample log's blocks:
 * once the pool the worker filled is used up, the engine's blocks are not taken, their samples
 * counted as dropped (the stats a user sees); memory back, the engine describes its rows again
 * and the minutes before and after the shortage equal the tap's cell for cell; the samples
 * written and those dropped add up to the tap's. */
static void test_slog_memory_short(void **state) {
  pair_t p;
  tlc_rollup_stats_t st;
  tlc_allocator_t fa = { fail_malloc, fail_calloc, fail_realloc, free };
  tlc_rollup_q_t sq;
  tlc_rollup_ans_t ans = { stall_encode, NULL, NULL };
  int64_t t = 10 * TLC_ROLLUP_MINUTE_NS;
  int stalled_done = 0;
  rng_t g;
  (void)state;
  rng_seed(&g, 7);
  tlc_alloc_set(&fa);
  assert_int_equal(uv_sem_init(&stall_sem, 0), 0);
  pair_start(&p, 0);
  /* minutes 10-19: all taken */
  push_until(p.e, &t, 20 * TLC_ROLLUP_MINUTE_NS, &g);
  /* minutes 20-49: the worker stalled after what came so far, block allocations failing */
  sq = target_q("nothing", 0, 0, 1);
  sq.all_handles = 1;
  assert_int_equal(tlc_rollup_submit(p.r, NULL, &sq, 1, &ans, stall_cb, &stalled_done, NULL), 0);
  blocks_fail = 1;
  push_until(p.e, &t, 50 * TLC_ROLLUP_MINUTE_NS, &g);
  tlc_rollup_get_stats(p.r, &st);
  assert_true(st.samples_dropped > 0);
  /* minutes 50-59: memory back, the worker going on */
  blocks_fail = 0;
  uv_sem_post(&stall_sem);
  push_until(p.e, &t, 60 * TLC_ROLLUP_MINUTE_NS, &g);
  pair_stop(&p, &st);
  assert_int_equal(stalled_done, 1);
  {
    tlc_rollup_res_t a, b;
    pair_read(0, &a, &b);
    assert_int_equal(a.nsteps, 50);
    for (size_t i = 0, k = 0; i < a.nsteps; i++) {
      const tlc_rollup_blk_t *x = &a.steps[i];
      tlc_rollup_res_t one = { 0 }, other = { 0 };
      if (x->minute >= 20 && x->minute < 50)
        continue;
      while (k < b.nsteps && b.steps[k].minute < x->minute)
        k++;
      assert_true(k < b.nsteps && b.steps[k].minute == x->minute);
      one.steps = a.steps + i; /* borrowed: one step each */
      one.nsteps = 1;
      other.steps = b.steps + k;
      other.nsteps = 1;
      assert_true(same_steps(&one, &other) > 10);
    }
    assert_int_equal(res_count(&b) + st.samples_dropped, res_count(&a));
    assert_true(res_count(&b) < res_count(&a));
    tlc_rollup_res_fini(&a);
    tlc_rollup_res_fini(&b);
  }
  uv_sem_destroy(&stall_sem);
  tlc_alloc_set(NULL);
  rm_rf(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_write_read),        cmocka_unit_test(test_violations),
    cmocka_unit_test(test_past_apart),        cmocka_unit_test(test_replay_once),
    cmocka_unit_test(test_slog_as_tap),       cmocka_unit_test(test_slog_violations),
    cmocka_unit_test(test_slog_memory_short),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
