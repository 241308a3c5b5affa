/* alloc.c - the hookable allocator (see tlc_alloc.h).
 *
 * Invariant: `cur` always holds four valid function pointers. Cost: one indirect call per
 * allocation. It does not track sizes or count anything itself; the counting allocator of the
 * tests does that on top of this hook.
 */
#include "base/alloc.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static tlc_allocator_t cur = { malloc, calloc, realloc, free };

void tlc_alloc_set(const tlc_allocator_t *a) {
  if (a == NULL) {
    cur.malloc_fn = malloc;
    cur.calloc_fn = calloc;
    cur.realloc_fn = realloc;
    cur.free_fn = free;
  } else {
    cur = *a;
  }
}

void *tlc_malloc(size_t size) {
  return cur.malloc_fn(size);
}

void *tlc_calloc(size_t count, size_t size) {
  if (size != 0 && count > SIZE_MAX / size)
    return NULL;
  return cur.calloc_fn(count, size);
}

void *tlc_realloc(void *ptr, size_t size) {
  return cur.realloc_fn(ptr, size);
}

void tlc_free(void *ptr) {
  if (ptr != NULL)
    cur.free_fn(ptr);
}

void *tlc_grow(void *p, size_t *cap, size_t need, size_t elem, size_t first) {
  size_t nc = *cap != 0 ? *cap : (first != 0 ? first : 1);
  void *np;
  if (need <= *cap)
    return p;
  while (nc < need) {
    if (nc > SIZE_MAX / 2)
      return NULL;
    nc *= 2;
  }
  if (elem != 0 && nc > SIZE_MAX / elem)
    return NULL;
  np = tlc_realloc(p, nc * elem);
  if (np != NULL)
    *cap = nc;
  return np;
}

char *tlc_strndup(const char *s, size_t len) {
  char *p;
  if (len == SIZE_MAX)
    return NULL;
  p = tlc_malloc(len + 1);
  if (p == NULL)
    return NULL;
  memcpy(p, s, len);
  p[len] = '\0';
  return p;
}
