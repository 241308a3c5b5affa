/* test_histq.c - range queries off the loop (daemon/history/histq.c): at most max_jobs at once
 * (one more is refused at once with TLC_ELIMIT, counted), the result comes back on the loop,
 * a cancelled query never calls back, closing the queue with queries running frees it once
 * they have returned, and the loop closes with nothing left. With an answer
 * (tlc_hist_answer_t) the answer is built on the pool thread, not the loop's, the callback gets
 * it back with the table gone, and a cancelled query frees it. The queries name a target with
 * no segments: the point here is the queue, test_history.py checks the statistics. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "base/err.h"
#include "history/histq.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

typedef struct got {
  int calls, status;
  char err[300];
} got_t;

static void done_cb(void *ud, tlc_hist_result_t *r) {
  got_t *g = ud;
  g->calls++;
  g->status = r->status;
  snprintf(g->err, sizeof(g->err), "%s", r->err);
}

static void never_cb(void *ud, tlc_hist_result_t *r) {
  (void)ud;
  (void)r;
  fail_msg("a cancelled query called back");
}

/* An answer: which thread built it, from which status; freed through ans_free. */
typedef struct ans {
  uv_thread_t loop_thread, built_on;
  int built, status, freed;
} ans_t;

static size_t ans_encode(void *ctx, tlc_hist_result_t *r) {
  ans_t *a = ctx;
  a->built_on = uv_thread_self();
  a->built = 1;
  a->status = r->status;
  return 1234;
}

static void ans_free(void *ctx) {
  ((ans_t *)ctx)->freed++;
}

static void ans_done_cb(void *ud, tlc_hist_result_t *r) {
  done_cb(ud, r);
  assert_null(r->t.rows); /* freed where the answer was built */
}

static void query(tlc_hist_query_t *q, const char *dir) {
  memset(q, 0, sizeof(*q));
  q->state_dir = dir;
  q->target = "nosuch";
  q->range.kind = TLC_WHEN_TARGET;
  q->range.epoch = -1;
  q->live_epoch = -1;
  q->now_ns = tlc_when_now();
  tlc_engine_opts_default(&q->eo);
}

static void test_limit_and_result(void **state) {
  uv_loop_t loop;
  tlc_histq_t *hq;
  tlc_hist_query_t q;
  tlc_histq_stats_t st;
  got_t a, b, c;
  char dir[] = "/tmp/tlc-histq-XXXXXX";
  (void)state;
  assert_non_null(mkdtemp(dir));
  memset(&a, 0, sizeof(a));
  memset(&b, 0, sizeof(b));
  memset(&c, 0, sizeof(c));
  assert_int_equal(uv_loop_init(&loop), 0);
  assert_int_equal(tlc_histq_new(&loop, 2, &hq), 0);
  query(&q, dir);
  assert_int_equal(tlc_histq_submit(hq, &q, NULL, done_cb, &a, NULL), 0);
  assert_int_equal(tlc_histq_submit(hq, &q, NULL, done_cb, &b, NULL), 0);
  assert_int_equal(tlc_histq_submit(hq, &q, NULL, done_cb, &c, NULL), TLC_ELIMIT); /* at once */
  tlc_histq_get_stats(hq, &st);
  assert_int_equal(st.running, 2);
  assert_int_equal(st.refused_busy, 1);
  assert_int_equal(a.calls + b.calls, 0); /* never from inside submit */
  assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(a.calls, 1);
  assert_int_equal(b.calls, 1);
  assert_int_equal(c.calls, 0);
  assert_int_equal(a.status, -ENOENT);
  assert_non_null(strstr(a.err, "no segments of that target"));
  tlc_histq_get_stats(hq, &st);
  assert_int_equal(st.running, 0);
  assert_int_equal(st.done, 2);
  /* a slot is free again */
  assert_int_equal(tlc_histq_submit(hq, &q, NULL, done_cb, &c, NULL), 0);
  assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(c.calls, 1);
  tlc_histq_close(hq);
  assert_int_equal(uv_loop_close(&loop), 0);
  rmdir(dir);
}

static void test_cancel(void **state) {
  uv_loop_t loop;
  tlc_histq_t *hq;
  tlc_histq_job_t *j;
  tlc_hist_query_t q;
  tlc_histq_stats_t st;
  char dir[] = "/tmp/tlc-histq-XXXXXX";
  (void)state;
  assert_non_null(mkdtemp(dir));
  assert_int_equal(uv_loop_init(&loop), 0);
  assert_int_equal(tlc_histq_new(&loop, 1, &hq), 0);
  query(&q, dir);
  assert_int_equal(tlc_histq_submit(hq, &q, NULL, never_cb, NULL, &j), 0);
  assert_non_null(j);
  tlc_histq_cancel(j);
  assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
  tlc_histq_get_stats(hq, &st);
  assert_int_equal(st.cancelled, 1);
  assert_int_equal(st.done, 1);
  assert_int_equal(st.running, 0);
  tlc_histq_close(hq);
  assert_int_equal(uv_loop_close(&loop), 0);
  rmdir(dir);
}

static void test_close_while_running(void **state) {
  uv_loop_t loop;
  tlc_histq_t *hq;
  tlc_hist_query_t q;
  char dir[] = "/tmp/tlc-histq-XXXXXX";
  (void)state;
  assert_non_null(mkdtemp(dir));
  assert_int_equal(uv_loop_init(&loop), 0);
  assert_int_equal(tlc_histq_new(&loop, 2, &hq), 0);
  query(&q, dir);
  assert_int_equal(tlc_histq_submit(hq, &q, NULL, never_cb, NULL, NULL), 0);
  assert_int_equal(tlc_histq_submit(hq, &q, NULL, never_cb, NULL, NULL), 0);
  tlc_histq_close(hq); /* cancels both; freed when they have returned */
  assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(uv_loop_close(&loop), 0);
  rmdir(dir);
}

static void test_answer_off_loop(void **state) {
  uv_loop_t loop;
  tlc_histq_t *hq;
  tlc_histq_job_t *j;
  tlc_hist_query_t q;
  tlc_histq_stats_t st;
  tlc_hist_answer_t ans;
  ans_t a, c;
  got_t g;
  char dir[] = "/tmp/tlc-histq-XXXXXX";
  (void)state;
  assert_non_null(mkdtemp(dir));
  memset(&a, 0, sizeof(a));
  memset(&c, 0, sizeof(c));
  memset(&g, 0, sizeof(g));
  a.loop_thread = uv_thread_self();
  assert_int_equal(uv_loop_init(&loop), 0);
  assert_int_equal(tlc_histq_new(&loop, 2, &hq), 0);
  query(&q, dir);
  ans.encode = ans_encode;
  ans.free = ans_free;
  ans.ctx = &a;
  assert_int_equal(tlc_histq_submit(hq, &q, &ans, ans_done_cb, &g, NULL), 0);
  assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(g.calls, 1);
  assert_int_equal(a.built, 1);
  assert_int_equal(a.status, -ENOENT); /* built whatever the status: the requester decides */
  assert_false(uv_thread_equal(&a.built_on, &a.loop_thread));
  assert_int_equal(a.freed, 0); /* the requester's again */
  /* cancelled: no callback, the answer freed by the queue */
  ans.ctx = &c;
  assert_int_equal(tlc_histq_submit(hq, &q, &ans, never_cb, NULL, &j), 0);
  tlc_histq_cancel(j);
  assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(c.freed, 1);
  tlc_histq_get_stats(hq, &st);
  assert_int_equal(st.encoded, 1 + (uint64_t)c.built);
  assert_int_equal(st.encoded_bytes, 1234 * (1 + (uint64_t)c.built));
  tlc_histq_close(hq);
  assert_int_equal(uv_loop_close(&loop), 0);
  rmdir(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_limit_and_result),
    cmocka_unit_test(test_cancel),
    cmocka_unit_test(test_close_while_running),
    cmocka_unit_test(test_answer_off_loop),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
