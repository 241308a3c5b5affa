/* histq.h - range queries off the event loop: tlc_hist_compute on libuv's threadpool.
 *
 * The daemon owns one queue. A request (GetStats with a range, Subscribe with history, HTTP
 * ?since=) submits a query; the computation runs on a threadpool thread (uv_queue_work), and
 * the callback runs later on the loop thread with the result. At most `max_jobs` queries run at
 * once, daemon-wide: one more is refused at once (TLC_ELIMIT), so that range queries never
 * occupy every threadpool thread (storage and checkpoints use the same pool) and never hold
 * more than max_jobs engines. Ingest is never waited for: the loop's only work is to copy the
 * query and, at the end, to hand the answer to the callback. With a tlc_hist_answer_t the
 * answer itself (the encoded message or document) is built on the pool thread too, and the
 * result's table and names are freed there: the loop's share of a query is then the same
 * whatever the range holds.
 *
 * Threads: every function and callback runs on the loop thread (but tlc_hist_answer_t.encode);
 * the query itself on a pool thread, touching nothing but its own copy of the query, the files
 * and the answer's ctx.
 */
#ifndef TLC_HISTQ_H
#define TLC_HISTQ_H

#include "history/history.h"

#include <stddef.h>
#include <uv.h>

typedef struct tlc_histq tlc_histq_t;
typedef struct tlc_histq_job tlc_histq_job_t;

/* Runs on the loop with the result (r->status 0 or the error, r->err why). r is owned by the
 * queue and freed after the call; the callee may take r->t and r->names (swap them with
 * initialised ones). */
typedef void (*tlc_histq_cb)(void *ud, tlc_hist_result_t *r);

typedef struct tlc_histq_stats {
  uint64_t started, done, refused_busy, cancelled;
  size_t running;
  uint64_t encoded;       /* answers built on the pool (tlc_hist_answer_t.encode) */
  uint64_t encoded_bytes; /* ... their bytes (what encode returned) */
} tlc_histq_stats_t;

/* Creates a queue on `loop` running at most max_jobs (>= 1) queries at once. 0 or ENOMEM. */
int tlc_histq_new(uv_loop_t *loop, size_t max_jobs, tlc_histq_t **out);

/* Starts query q (copied, strings included; q->cancel is ignored: the job has its own flag).
 * ans (may be NULL: the callback gets the table) is copied; on success its ctx belongs to the
 * job until cb runs (the requester then has it back, encoded, and r->t and r->names are empty)
 * or, when the query is cancelled, until the job frees it with ans->free. Returns 0 with *job
 * (may be NULL if not wanted), TLC_ELIMIT when max_jobs are running, TLC_EINVAL after
 * tlc_histq_close, TLC_ENOMEM; on error cb is never called and ctx stays the caller's. */
int tlc_histq_submit(tlc_histq_t *hq, const tlc_hist_query_t *q, const tlc_hist_answer_t *ans,
                     tlc_histq_cb cb, void *ud, tlc_histq_job_t **job);

/* The requester is gone: cb will not be called; the computation stops at its next batch. */
void tlc_histq_cancel(tlc_histq_job_t *job);

void tlc_histq_get_stats(const tlc_histq_t *hq, tlc_histq_stats_t *out);

/* The stats dump's "history" object (the counters above; encoded* counts the answers built on
 * the pool, not the loop), written with the dump's writer. Loop thread. */
struct tlc_json_w;
void tlc_histq_dump(const tlc_histq_t *hq, struct tlc_json_w *j);

/* Cancels every job (no callback runs) and frees the queue once the last one has returned to
 * the loop (the loop must run until then; jobs stop at their next batch of events). */
void tlc_histq_close(tlc_histq_t *hq);

#endif
