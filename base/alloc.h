/* tlc_alloc.h - the one allocator every part of tlcap goes through.
 *
 * tlc_malloc/tlc_calloc/tlc_realloc/tlc_free forward to the C library unless a test (or the
 * daemon, for accounting) installs other functions with tlc_alloc_set(). The daemon installs
 * the same functions into libuv (uv_replace_allocator) and protobuf-c (ProtobufCAllocator), so
 * that tests can count live bytes and fail the Nth allocation (see tests/unit/testalloc.h).
 *
 * This is the single process-wide hook in formats/; it is set once at start-up before any
 * other thread exists and never changed while allocations are live.
 */
#ifndef TLC_ALLOC_H
#define TLC_ALLOC_H

#include <stddef.h>

typedef struct tlc_allocator {
  void *(*malloc_fn)(size_t size);
  void *(*calloc_fn)(size_t count, size_t size);
  void *(*realloc_fn)(void *ptr, size_t size);
  void (*free_fn)(void *ptr);
} tlc_allocator_t;

/* Installs `a` (copied), or the C library's functions when `a` is NULL. Call only while no
 * memory obtained from the previous allocator is live. */
void tlc_alloc_set(const tlc_allocator_t *a);

/* Same contracts as the C library's functions; NULL on failure. tlc_calloc checks
 * count * size for overflow and returns NULL when it overflows. tlc_free(NULL) does nothing. */
void *tlc_malloc(size_t size);
void *tlc_calloc(size_t count, size_t size);
void *tlc_realloc(void *ptr, size_t size);
void tlc_free(void *ptr);

/* Grows an array: `p` holds *cap elements of `elem` bytes; returns an array that holds at least
 * `need` (>= 1) elements: p itself when it already does, else p tlc_realloc'd to the capacity
 * doubled from *cap (from `first` when *cap is 0) until it fits, *cap updated. NULL when out of
 * memory or when the size overflows: p and *cap are then untouched. Callers assign the result to
 * their typed pointer (no pointer is written through another pointer type). */
void *tlc_grow(void *p, size_t *cap, size_t need, size_t elem, size_t first);

/* Returns a tlc_malloc'd copy of s[0..len) with a NUL appended, or NULL. */
char *tlc_strndup(const char *s, size_t len);

#endif
