/* evlog_gen.h - builds evlog byte streams for tests, fuzz seeds and benchmarks.
 *
 * Written independently of formats/evlog.c (its own byte writer), so that tests can hold the
 * decoder against it. Memory comes from the C library (not tlc_malloc), so the counting
 * allocator of a test sees only the code under test; failures abort.
 *
 * Typical use:
 *     evgen_t g;
 *     evgen_init(&g, 0);
 *     evgen_block(&g, 0);
 *     evgen_item(&g, 1.5, 0.0, 0x1000, 0, "+main", NULL);
 *     evgen_item(&g, 1.75, 0.0, 0x1000, 0, "-main", NULL);
 *     evgen_end(&g);            -> g.buf[0..g.len): one block of two items
 *     evgen_free(&g);
 * Large streams (benchmarks): evgen_random(&g, seed, nitems, items_per_block) writes nested
 * +/- pairs, state and data events and CPUFREQ items over a few threads, at about 60 bytes per
 * item, with no allocation per item beyond the doubling buffer.
 */
#ifndef TLC_EVLOG_GEN_H
#define TLC_EVLOG_GEN_H

#include <stddef.h>
#include <stdint.h>

#define EVGEN_ITEM_BE   1u /* item fields big-endian (a non-eina writer) */
#define EVGEN_MAGIC_BE  2u /* magic big-endian (efl_debug on a big-endian host) */
#define EVGEN_SIZES_BE  4u /* size and overflow words big-endian */
#define EVGEN_STALE_PAD 8u /* padding bytes are 0xA5.. instead of zero (stale memory) */

typedef struct evgen {
  uint8_t *buf;
  size_t len, cap;
  size_t block; /* offset of the open block's header */
  int open;     /* a block is open */
  unsigned flags;
  uint64_t items, blocks;
} evgen_t;

void evgen_init(evgen_t *g, unsigned flags);
void evgen_free(evgen_t *g);
/* Closes the open block (if any) and opens a new one with this overflow count. */
void evgen_block(evgen_t *g, uint32_t overflow);
/* Appends one item to the open block (opening one with overflow 0 if none); detail NULL: none.
 * Returns the item's offset in g->buf. */
size_t evgen_item(evgen_t *g, double tim, double srctim, uint64_t thread, uint64_t obj,
                  const char *event, const char *detail);
/* Closes the open block: writes its size word. */
void evgen_end(evgen_t *g);
/* Appends raw bytes (damage, garbage, hand-made headers). */
void evgen_raw(evgen_t *g, const void *p, size_t n);

/* Appends nitems valid items in blocks of items_per_block (the last one may be shorter), built
 * from a deterministic generator seeded with `seed`: 4 threads with properly nested +f/-f
 * pairs over 16 function names, >s/<s state events, !v writes, *CPUFREQ n with a detail, and
 * an occasional metadata item; times increase per thread. Closes its last block. */
void evgen_random(evgen_t *g, uint64_t seed, size_t nitems, size_t items_per_block);

#endif
