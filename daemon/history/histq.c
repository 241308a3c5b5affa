/* histq.c - range queries on libuv's threadpool (histq.h).
 *
 * Each job owns a copy of its query (strings included) and a cancel flag the pool thread
 * polls between batches of events (tlc_hist_stream_t.cancel). Jobs are in a list so that
 * closing the queue can cancel them all; the queue is freed when the last job's after_work has
 * run. Invariant: `running` counts jobs between submit and after_work, and never exceeds
 * max_jobs.
 *
 * With an answer (tlc_hist_answer_t) the pool thread also encodes the result into the
 * requester's ctx and frees the table and names, so that after_cb, on the loop, only moves
 * pointers: nothing there grows with the range, the number of areas or the answer's size.
 * encoded_bytes is written by the pool thread and read by the loop only after after_cb
 * (uv_queue_work's completion orders the two).
 *
 * CPU: a query runs at nice HISTQ_NICE above the daemon's (on its pool thread only; Linux's
 * nice is per thread), so that on a busy machine the loop, the storage threads and capture win
 * the CPU over a range query: a query is background work, capture is not (bench/RESULTS.md
 * "History queries and the loop"). The thread's priority is given back afterwards when the
 * daemon may raise it again (CAP_SYS_NICE, or an RLIMIT_NICE that allows it: the systemd unit
 * sets LimitNICE); otherwise that pool thread keeps the lower priority for the rest of its
 * work (zstd, checkpoint and dump writes: background work too).
 */
#define _GNU_SOURCE /* gettid */
#include "history/histq.h"

#include "base/alloc.h"
#include "base/err.h"
#include "base/json.h"
#include "base/list.h"

#include <errno.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#define HISTQ_NICE 10 /* above the daemon's: a CPU weight of 110 against 1024 (nice 0) */

struct tlc_histq_job {
  uv_work_t req;
  tlc_histq_t *hq;
  LIST_ENTRY(tlc_histq_job) link; /* in hq->jobs */
  tlc_hist_query_t q;
  char *state_dir, *target, *mapping_path; /* the query's strings, owned */
  atomic_int cancel;
  tlc_histq_cb cb; /* NULL once cancelled */
  void *ud;
  tlc_hist_answer_t ans; /* ans.encode NULL: none */
  size_t ans_bytes;      /* what ans.encode returned (pool thread, then the loop) */
  int encoded;
  tlc_hist_result_t res;
};

struct tlc_histq {
  uv_loop_t *loop;
  size_t max_jobs;
  LIST_HEAD(, tlc_histq_job) jobs; /* submitted, not yet after_cb */
  int closing;
  tlc_histq_stats_t st;
};

int tlc_histq_new(uv_loop_t *loop, size_t max_jobs, tlc_histq_t **out) {
  tlc_histq_t *hq = tlc_calloc(1, sizeof(*hq));
  *out = NULL;
  if (hq == NULL)
    return TLC_ENOMEM;
  hq->loop = loop;
  hq->max_jobs = max_jobs > 0 ? max_jobs : 1;
  LIST_INIT(&hq->jobs);
  *out = hq;
  return 0;
}

static char *dup_or_null(const char *s) {
  return s != NULL ? tlc_strndup(s, strlen(s)) : NULL;
}

static void job_free(tlc_histq_job_t *j) {
  tlc_hist_result_fini(&j->res);
  tlc_free(j->state_dir);
  tlc_free(j->target);
  tlc_free(j->mapping_path);
  tlc_free(j);
}

static void work_cb(uv_work_t *req) {
  tlc_histq_job_t *j = req->data;
  id_t tid = (id_t)gettid();
  int was;
  errno = 0;
  was = getpriority(PRIO_PROCESS, tid);
  if (errno != 0)
    was = 0;
  (void)setpriority(PRIO_PROCESS, tid, was + HISTQ_NICE > 19 ? 19 : was + HISTQ_NICE);
  (void)tlc_hist_compute(&j->q, &j->res);
  if (j->ans.encode != NULL && !atomic_load(&j->cancel)) {
    j->ans_bytes = j->ans.encode(j->ans.ctx, &j->res);
    j->encoded = 1;
  }
  if (j->ans.encode != NULL) { /* the answer holds what is sent: the table goes here */
    tlc_hist_result_fini(&j->res);
    tlc_table_init(&j->res.t);
    tlc_mapping_init(&j->res.names);
  }
  (void)setpriority(PRIO_PROCESS, tid, was); /* may be refused: see the note above */
}

static void after_cb(uv_work_t *req, int status) {
  tlc_histq_job_t *j = req->data;
  tlc_histq_t *hq = j->hq;
  LIST_REMOVE(j, link);
  hq->st.running--;
  hq->st.done++;
  if (status == UV_ECANCELED && j->res.status == 0) { /* never started */
    j->res.status = -ECANCELED;
    snprintf(j->res.err, sizeof(j->res.err), "cancelled");
  }
  if (j->encoded) {
    hq->st.encoded++;
    hq->st.encoded_bytes += j->ans_bytes;
  }
  if (j->cb != NULL)
    j->cb(j->ud, &j->res); /* ctx is the requester's again (encoded: only cancel skips it) */
  else if (j->ans.free != NULL)
    j->ans.free(j->ans.ctx);
  job_free(j);
  if (hq->closing && LIST_EMPTY(&hq->jobs))
    tlc_free(hq);
}

int tlc_histq_submit(tlc_histq_t *hq, const tlc_hist_query_t *q, const tlc_hist_answer_t *ans,
                     tlc_histq_cb cb, void *ud, tlc_histq_job_t **job) {
  tlc_histq_job_t *j;
  int r;
  if (job != NULL)
    *job = NULL;
  if (hq->closing)
    return TLC_EINVAL;
  if (hq->st.running >= hq->max_jobs) {
    hq->st.refused_busy++;
    return TLC_ELIMIT;
  }
  j = tlc_calloc(1, sizeof(*j));
  if (j == NULL)
    return TLC_ENOMEM;
  j->q = *q;
  j->state_dir = dup_or_null(q->state_dir);
  j->target = dup_or_null(q->target);
  j->mapping_path = dup_or_null(q->mapping_path);
  if (j->state_dir == NULL || j->target == NULL ||
      (q->mapping_path != NULL && j->mapping_path == NULL)) {
    job_free(j);
    return TLC_ENOMEM;
  }
  j->q.state_dir = j->state_dir;
  j->q.target = j->target;
  j->q.mapping_path = j->mapping_path;
  j->q.eo.mapping = NULL;
  atomic_init(&j->cancel, 0);
  j->q.cancel = &j->cancel;
  tlc_hist_result_init(&j->res);
  j->hq = hq;
  j->cb = cb;
  j->ud = ud;
  if (ans != NULL)
    j->ans = *ans;
  j->req.data = j;
  r = uv_queue_work(hq->loop, &j->req, work_cb, after_cb);
  if (r != 0) {
    job_free(j);
    return r;
  }
  LIST_INSERT_HEAD(&hq->jobs, j, link);
  hq->st.running++;
  hq->st.started++;
  if (job != NULL)
    *job = j;
  return 0;
}

void tlc_histq_cancel(tlc_histq_job_t *j) {
  if (j == NULL || j->cb == NULL)
    return;
  j->cb = NULL;
  j->hq->st.cancelled++;
  atomic_store(&j->cancel, 1);
  (void)uv_cancel((uv_req_t *)&j->req); /* not started yet: after_cb gets UV_ECANCELED */
}

void tlc_histq_get_stats(const tlc_histq_t *hq, tlc_histq_stats_t *out) {
  *out = hq->st;
}

void tlc_histq_dump(const tlc_histq_t *hq, tlc_json_w_t *j) {
  const tlc_histq_stats_t *h = &hq->st;
  tlc_json_w_open(j, "history", '{');
  tlc_json_w_u64(j, "started", h->started);
  tlc_json_w_u64(j, "done", h->done);
  tlc_json_w_u64(j, "refused_busy", h->refused_busy);
  tlc_json_w_u64(j, "cancelled", h->cancelled);
  tlc_json_w_u64(j, "running", h->running);
  tlc_json_w_u64(j, "encoded", h->encoded);
  tlc_json_w_u64(j, "encoded_bytes", h->encoded_bytes);
  tlc_json_w_close(j, '}');
}

void tlc_histq_close(tlc_histq_t *hq) {
  if (hq == NULL)
    return;
  hq->closing = 1;
  tlc_histq_job_t *j;
  LIST_FOREACH(j, &hq->jobs, link) {
    tlc_histq_cancel(j);
  }
  if (LIST_EMPTY(&hq->jobs))
    tlc_free(hq);
}
