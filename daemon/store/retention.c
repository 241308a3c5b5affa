/* retention.c - the catalog of sealed segments and the retention pass.
 *
 * The catalog lists every sealed segment tlcap wrote (found at start by tlc_store_recover,
 * added at each seal) with its target, sequence, times and size on disk. Only catalog entries
 * are ever deleted, so files tlcap did not write (foreign names), quarantined files and the
 * open `.part` of each target are never touched (R8).
 *
 * A pass applies, in order: age (closed more than max_age ago by the injected wall clock; an
 * entry closed "in the future" after a backward clock step has age 0 and stays), segment
 * count per target, bytes per target, total bytes, and the free-space floor (statvfs through
 * the shim, re-read after each deletion). Within a target the victim is always the lowest
 * sequence; across targets (total bytes, free floor) the segment opened first, ties broken by
 * sequence. Only the lowest sequence of a target is ever deleted: when it is being compressed
 * (busy) or its main export or manifest is being written late (pinned), that target keeps
 * everything for this pass (over its budget for a moment), and the thread that clears the flag
 * on a target's lowest sequence asks for another pass (worker.c). Skipping it for the next
 * one would leave the kept stream with a hole, which replay and the exports would read as one
 * stream.
 *
 * Cost: O(n) per deletion over the catalog (n = sealed segments, typically hundreds), O(n^2)
 * when the oldest entries are all held (each candidate then scans for a lower sequence).
 * Thread-safety: the catalog has its own mutex; a pass holds it (the writer and the worker's
 * lanes run passes).
 */
#include "base/alloc.h"
#include "base/err.h"
#include "store/seg/iofault.h"
#include "store/store-int.h"

#include <stdio.h>
#include <string.h>

int tlc__catalog_init(tlc_catalog_t *c) {
  memset(c, 0, sizeof *c);
  return uv_mutex_init(&c->mu);
}

void tlc__catalog_fini(tlc_catalog_t *c) {
  tlc_free(c->v);
  uv_mutex_destroy(&c->mu);
  memset(c, 0, sizeof *c);
}

int tlc__catalog_add(tlc_catalog_t *c, const tlc_catent_t *e) {
  int rc = 0;
  uv_mutex_lock(&c->mu);
  if (c->n == c->cap) {
    tlc_catent_t *v = tlc_grow(c->v, &c->cap, c->n + 1, sizeof *v, 64);
    if (!v) {
      rc = TLC_ENOMEM;
      goto out;
    }
    c->v = v;
  }
  c->v[c->n++] = *e;
out:
  uv_mutex_unlock(&c->mu);
  return rc;
}

/* older(a, b): a goes first */
static int older(const tlc_catent_t *a, const tlc_catent_t *b, int same_target) {
  if (same_target)
    return a->seq < b->seq;
  if (a->opened_wall_ns != b->opened_wall_ns)
    return a->opened_wall_ns < b->opened_wall_ns;
  return a->seq < b->seq;
}

int tlc__catalog_is_oldest(const tlc_catalog_t *c, const tlc_catent_t *e) {
  for (size_t j = 0; j < c->n; j++)
    if (c->v[j].seq < e->seq && strcmp(c->v[j].target, e->target) == 0)
      return 0;
  return 1;
}

/* whether v[i] may go now: the lowest sequence of its target, neither busy nor pinned */
static int deletable(const tlc_catalog_t *c, size_t i) {
  return !c->v[i].busy && !c->v[i].pinned && tlc__catalog_is_oldest(c, &c->v[i]);
}

/* Index of the next victim, or SIZE_MAX: the lowest sequence of `target`, unless it is busy or
 * pinned (then none: the target waits for it); with target NULL, the oldest of the targets'
 * deletable lowest sequences. A target's segments go strictly in order, so what is kept is
 * always a contiguous tail of its stream, never a stream with a hole. */
static size_t oldest(const tlc_catalog_t *c, const char *target) {
  size_t best = SIZE_MAX;
  for (size_t i = 0; i < c->n; i++) {
    if (target) {
      if (strcmp(c->v[i].target, target) == 0 &&
          (best == SIZE_MAX || older(&c->v[i], &c->v[best], 1)))
        best = i;
    } else if (!c->v[i].busy && !c->v[i].pinned &&
               (best == SIZE_MAX || older(&c->v[i], &c->v[best], 0)) &&
               tlc__catalog_is_oldest(c, &c->v[i])) {
      best = i; /* that scan last: in practice only the first few entries get that far */
    }
  }
  if (target && best != SIZE_MAX && (c->v[best].busy || c->v[best].pinned))
    return SIZE_MAX;
  return best;
}

static void delete_at(tlc_catalog_t *c, size_t i, const tlc_retention_t *r) {
  char dir[2048];
  tlc_catent_t e = c->v[i];
  if (tlc__path(dir, sizeof dir, "%s/%s", r->state_dir, e.target) == 0)
    tlc__segment_delete(dir, &e);
  memmove(&c->v[i], &c->v[i + 1], (c->n - i - 1) * sizeof c->v[0]);
  c->n--;
  if (r->deleted)
    r->deleted(r->ud, &e);
}

static uint64_t target_bytes(const tlc_catalog_t *c, const char *t, size_t *count) {
  uint64_t b = 0;
  size_t n = 0;
  for (size_t i = 0; i < c->n; i++)
    if (strcmp(c->v[i].target, t) == 0) {
      b += c->v[i].bytes;
      n++;
    }
  if (count)
    *count = n;
  return b;
}

uint64_t tlc__retention_run(tlc_catalog_t *c, const tlc_retention_t *r) {
  uint64_t deleted = 0;
  uv_mutex_lock(&c->mu);
  /* 1. age */
  if (r->max_age_ms > 0) {
    int64_t lim = r->max_age_ms * 1000000;
    for (int more = 1; more;) { /* again while one went: the next of its target may be due */
      more = 0;
      for (size_t i = 0; i < c->n;) {
        int64_t age = r->now_wall_ns - c->v[i].closed_wall_ns;
        if (age > 0 && age >= lim && deletable(c, i)) {
          delete_at(c, i, r);
          deleted++;
          more = 1;
        } else {
          i++;
        }
      }
    }
  }
  /* 2, 3. per target: count, bytes (targets visited in catalog order; bounded by n) */
  if (r->max_segments > 0 || r->max_target_bytes > 0) {
    for (size_t i = 0; i < c->n; i++) {
      char t[sizeof c->v[0].target];
      snprintf(t, sizeof t, "%s", c->v[i].target);
      for (size_t guard = c->n; guard > 0; guard--) {
        size_t count;
        uint64_t b = target_bytes(c, t, &count);
        if (!((r->max_segments > 0 && count > r->max_segments) ||
              (r->max_target_bytes > 0 && b > r->max_target_bytes)))
          break;
        size_t v = oldest(c, t);
        if (v == SIZE_MAX)
          break;
        delete_at(c, v, r);
        deleted++;
      }
    }
  }
  /* 4. total bytes */
  if (r->max_total_bytes > 0) {
    for (size_t guard = c->n; guard > 0; guard--) {
      uint64_t b = 0;
      for (size_t i = 0; i < c->n; i++)
        b += c->v[i].bytes;
      if (b <= r->max_total_bytes)
        break;
      size_t v = oldest(c, NULL);
      if (v == SIZE_MAX)
        break;
      delete_at(c, v, r);
      deleted++;
    }
  }
  /* 5. free-space floor */
  if (r->min_free_bytes > 0) {
    for (size_t guard = c->n; guard > 0; guard--) {
      tlc_io_space_t sp;
      if (tlc_io->statvfs(r->state_dir, &sp) < 0 || sp.avail_bytes >= r->min_free_bytes)
        break;
      size_t v = oldest(c, NULL);
      if (v == SIZE_MAX)
        break;
      delete_at(c, v, r);
      deleted++;
    }
  }
  uv_mutex_unlock(&c->mu);
  return deleted;
}
