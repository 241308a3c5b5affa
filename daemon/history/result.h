/* result.h - what a range query (history.h, histq.h) hands back: the statistics of a past range
 * and how a requester turns them into its answer off the loop.
 *
 * Kept apart from history.h so that the servers that only read a result (pubsub, HTTP, through
 * view/view.h) include the table and mapping types, not the decoder, the pipeline and the
 * segment reader; and inline, so that they need no link to the history library for it.
 */
#ifndef TLC_HIST_RESULT_H
#define TLC_HIST_RESULT_H

#include "base/alloc.h"
#include "formats/mapping.h"
#include "formats/stats.h"
#include "formats/tlc_event.h"

#include <stddef.h>
#include <string.h>

typedef struct tlc_hist_result {
  tlc_table_t t;       /* the statistics; counters: the decoders' and the engine's */
  tlc_mapping_t names; /* the mapping file's, or the evlog mapping's names */
  int has_names;
  tlc_format_t fmt;
  size_t segments;   /* segments read */
  int status;        /* 0, or the error (also returned) */
  char err[300];     /* why, when status != 0; a warning (a skipped file) otherwise, or "" */
  char *moment;      /* a moment query's export (history/moment.h; tlc_malloc'd), or NULL */
  size_t moment_len; /* its length */
} tlc_hist_result_t;

/* How a requester turns a range query's result into its answer off the loop (histq.h): the
 * daemon's servers (pubsub, HTTP) encode the answer they send on the threadpool thread that
 * computed it, so that the loop only hands the finished bytes on. */
typedef struct tlc_hist_answer {
  /* Runs on the pool thread right after the computation, whatever r->status: builds the answer
   * from r into ctx, touching nothing but ctx and r (r->t and r->names are freed on the same
   * thread afterwards). Returns the answer's size in bytes (0: none, e.g. an error). */
  size_t (*encode)(void *ctx, struct tlc_hist_result *r);
  /* Frees ctx (loop thread) when the query ends without its callback (cancelled). */
  void (*free)(void *ctx);
  void *ctx;
} tlc_hist_answer_t;

static inline void tlc_hist_result_init(tlc_hist_result_t *r) {
  memset(r, 0, sizeof(*r));
  tlc_table_init(&r->t);
  tlc_mapping_init(&r->names);
}

static inline void tlc_hist_result_fini(tlc_hist_result_t *r) {
  tlc_table_fini(&r->t);
  tlc_mapping_fini(&r->names);
  r->has_names = 0;
  tlc_free(r->moment);
  r->moment = NULL;
  r->moment_len = 0;
}

#endif
