/* xlocd.c - where the extremes of the live targets are stored (see xlocd.h).
 *
 * The extremes a batch made new (tlc_engine_xnew) are handed to the batch's store mark
 * (locd.h) and located when it comes back. An extreme that a later one replaced before the
 * answer came is left alone (tlc_engine_xlocate checks its sequences). A checkpoint taken by a
 * later mark comes back after this one (marks are answered in order), so the locations found
 * are in it.
 */
#include "daemon/xlocd.h"

#include "base/alloc.h"
#include "daemon/locd.h"
#include "engine/engine.h"

#include <string.h>

#define XL_BATCH 16 /* extremes of one batch a mark locates (the engine lists 16) */

typedef struct xl_job {
  tlc_target_t *t; /* alive while the answer has a position (locd.h) */
  size_t n;
  tlc_engine_xnew_t v[XL_BATCH];
} xl_job_t;

static void located(void *ud, const tlc_locd_at_t *at) {
  xl_job_t *j = ud;
  /* without a position the target may be gone: j->t is not read then (with one, it and its
   * engine are there). A first record two segments back stays 0 (unknown), as a violation's. */
  if (at->pos != NULL)
    for (size_t i = 0; i < j->n; i++) {
      uint64_t loc[4];
      if (tlc_locd_span(at, j->v[i].seq_start, j->v[i].seq_end, loc))
        (void)tlc_engine_xlocate(j->t->pipe.engine, &j->v[i], loc);
    }
  tlc_free(j);
}

void tlc_xlocd_batch(tlc_daemon_t *d, const tlc_target_t *ct) {
  tlc_target_t *t = (tlc_target_t *)ct;
  tlc_engine_xnew_t v[XL_BATCH];
  size_t nv;
  xl_job_t *j;
  if (d->closing || t->pipe.engine == NULL)
    return;
  nv = tlc_engine_xnew(t->pipe.engine, v, XL_BATCH); /* always taken: the list starts anew */
  if (nv == 0 || !tlc_locd_ready(t) || (j = tlc_malloc(sizeof(*j))) == NULL)
    return;
  j->t = t;
  j->n = nv;
  memcpy(j->v, v, nv * sizeof(v[0]));
  if (tlc_locd_want(t, located, j) != 0)
    tlc_free(j);
}
