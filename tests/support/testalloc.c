/* testalloc.c - counting, failing allocator for the tests (see testalloc.h).
 *
 * Invariant: every live block is preceded by a 16-byte header holding its size, so realloc and
 * free can keep the live-byte count exact. Cost: one header per block; fine for tests.
 */
#include "testalloc.h"

#include "base/alloc.h"

#include <stdlib.h>
#include <string.h>

#define HDR 16

static size_t live_bytes, live_blocks, peak_bytes, max_request;
static uint64_t count, fail_nth, failed;

static int should_fail(size_t size) {
  count++;
  if (size > max_request)
    max_request = size;
  if (fail_nth != 0 && count == fail_nth) {
    failed++;
    return 1;
  }
  return 0;
}

static void account(size_t add, size_t sub) {
  live_bytes += add;
  live_bytes -= sub;
  if (live_bytes > peak_bytes)
    peak_bytes = live_bytes;
}

static void *t_malloc(size_t size) {
  unsigned char *p;
  if (should_fail(size) || size > SIZE_MAX - HDR)
    return NULL;
  p = malloc(size + HDR);
  if (p == NULL)
    return NULL;
  memcpy(p, &size, sizeof(size));
  account(size, 0);
  live_blocks++;
  return p + HDR;
}

static void *t_calloc(size_t n, size_t size) {
  void *p;
  if (size != 0 && n > SIZE_MAX / size)
    return NULL;
  p = t_malloc(n * size);
  if (p != NULL)
    memset(p, 0, n * size);
  return p;
}

static void t_free(void *ptr) {
  unsigned char *p;
  size_t size;
  if (ptr == NULL)
    return;
  p = (unsigned char *)ptr - HDR;
  memcpy(&size, p, sizeof(size));
  account(0, size);
  live_blocks--;
  free(p);
}

static void *t_realloc(void *ptr, size_t size) {
  unsigned char *p, *np;
  size_t old;
  if (ptr == NULL)
    return t_malloc(size);
  if (size == 0) {
    t_free(ptr);
    return NULL;
  }
  if (should_fail(size) || size > SIZE_MAX - HDR)
    return NULL;
  p = (unsigned char *)ptr - HDR;
  memcpy(&old, p, sizeof(old));
  np = realloc(p, size + HDR);
  if (np == NULL)
    return NULL;
  memcpy(np, &size, sizeof(size));
  account(size, old);
  return np + HDR;
}

void testalloc_install(void) {
  static const tlc_allocator_t a = { t_malloc, t_calloc, t_realloc, t_free };
  live_bytes = live_blocks = peak_bytes = max_request = 0;
  count = fail_nth = failed = 0;
  tlc_alloc_set(&a);
}

void testalloc_uninstall(void) {
  tlc_alloc_set(NULL);
}

size_t testalloc_live_bytes(void) {
  return live_bytes;
}

size_t testalloc_live_blocks(void) {
  return live_blocks;
}

uint64_t testalloc_count(void) {
  return count;
}

size_t testalloc_peak_bytes(void) {
  return peak_bytes;
}

size_t testalloc_max_request(void) {
  return max_request;
}

void testalloc_max_request_reset(void) {
  max_request = 0;
}

void testalloc_fail_at(uint64_t nth) {
  count = 0;
  fail_nth = nth;
}

uint64_t testalloc_failed(void) {
  return failed;
}
