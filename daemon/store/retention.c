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
 * sequence. Entries being compressed (busy) or whose main export or manifest the sealer is
 * writing late (pinned) are skipped for this pass.
 *
 * Cost: O(n) per deletion over the catalog (n = sealed segments, typically hundreds).
 * Thread-safety: the catalog has its own mutex; a pass holds it (the writer thread runs
 * passes; compression workers only flip flags).
 */
#include "iofault.h"
#include "store-int.h"
#include "tlc_alloc.h"
#include "tlc_err.h"

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

/* index of the oldest deletable entry (of `target`, or of any when NULL), or SIZE_MAX */
static size_t oldest(const tlc_catalog_t *c, const char *target) {
  size_t best = SIZE_MAX;
  for (size_t i = 0; i < c->n; i++) {
    if (c->v[i].busy || c->v[i].pinned || (target && strcmp(c->v[i].target, target) != 0))
      continue;
    if (best == SIZE_MAX || older(&c->v[i], &c->v[best], target != NULL))
      best = i;
  }
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
    for (size_t i = 0; i < c->n;) {
      int64_t age = r->now_wall_ns - c->v[i].closed_wall_ns;
      if (!c->v[i].busy && !c->v[i].pinned && age > 0 && age >= lim) {
        delete_at(c, i, r);
        deleted++;
      } else {
        i++;
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
