/* queue.c - the rollup module's shared plumbing under acc.c and rollup.c: the worker's job
 * queue, the counters, the pools of chunk buffers and sample log blocks and freeing a minute's
 * slots. Any thread (everything here takes the module's mutex or touches only what it is given).
 */
#include "rollup/rollup-int.h"

#include "base/alloc.h"

void tlc__rollup_count(tlc_rollup_t *r, uint64_t *ctr, uint64_t n) {
  uv_mutex_lock(&r->mu);
  *ctr += n;
  uv_mutex_unlock(&r->mu);
}

void tlc__rollup_push(tlc_rollup_t *r, tlc_rollup_job_t *j) {
  j->next = NULL;
  uv_mutex_lock(&r->mu);
  if (r->tail)
    r->tail->next = j;
  else
    r->head = j;
  r->tail = j;
  uv_cond_signal(&r->cv);
  uv_mutex_unlock(&r->mu);
}

tlc_rollup_sample_t *tlc__rollup_chunk_get(tlc_rollup_t *r) {
  tlc_rollup_sample_t *c = NULL;
  uv_mutex_lock(&r->mu);
  if (r->npool > 0)
    c = r->pool[--r->npool];
  uv_mutex_unlock(&r->mu);
  return c != NULL ? c : tlc_malloc(TLC_ROLLUP_CHUNK * sizeof(*c));
}

void tlc__rollup_chunk_put(tlc_rollup_t *r, tlc_rollup_sample_t *c) {
  if (c == NULL)
    return;
  uv_mutex_lock(&r->mu);
  if (r->npool < TLC_ROLLUP_POOL) {
    r->pool[r->npool++] = c;
    c = NULL;
  }
  uv_mutex_unlock(&r->mu);
  tlc_free(c);
}

void tlc__rollup_block_put(tlc_rollup_t *r, tlc_engine_slent_t *b) {
  if (b == NULL)
    return;
  uv_mutex_lock(&r->mu);
  if (r->nbpool < TLC_ROLLUP_BPOOL) {
    r->bpool[r->nbpool++] = b;
    b = NULL;
  }
  uv_mutex_unlock(&r->mu);
  tlc_free(b);
}

void tlc__rollup_bjob_put(tlc_rollup_t *r, tlc_rollup_job_t *j) {
  tlc_engine_slent_t *b = j->block;
  j->block = NULL;
  uv_mutex_lock(&r->mu);
  if (b != NULL && r->nbpool < TLC_ROLLUP_BPOOL) {
    r->bpool[r->nbpool++] = b;
    b = NULL;
  }
  if (r->njpool < TLC_ROLLUP_BPOOL) {
    r->jpool[r->njpool++] = j;
    j = NULL;
  }
  uv_mutex_unlock(&r->mu);
  tlc_free(b);
  if (j != NULL) {
    tlc_free(j->target);
    tlc_free(j);
  }
}

void tlc__rollup_slots_free(tlc_rollup_slot_t *v, size_t n) {
  for (size_t i = 0; i < n; i++)
    tlc__hist_fini(&v[i].h);
  tlc_free(v);
}

void tlc_rollup_note_rebuild(tlc_rollup_t *r, int started) {
  uv_mutex_lock(&r->mu);
  if (started) {
    r->st.rebuilds++;
    r->st.rebuilding++;
  } else {
    r->st.rebuilds_done++;
    r->st.rebuilding--;
  }
  uv_mutex_unlock(&r->mu);
}
