/* evlog_gen.c - evlog stream builder for tests (see evlog_gen.h).
 *
 * Layout written (SPEC section 1): block = u32 magic 0x0ffee211, u32 size, u32 overflow, then
 * items; item = f64 tim, f64 srctim, u64 thread, u64 obj, u16 event_offset (40), u16
 * detail_offset (0 or right after the event's NUL), u16 event_next (item and strings rounded up
 * to 8), 2 padding bytes, the strings, padding. Byte orders per the EVGEN_* flags.
 * Independent of formats/evlog.c on purpose; plain malloc, abort on failure.
 */
#include "evlog_gen.h"

#include "rng.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void reserve(evgen_t *g, size_t n) {
  size_t nc = g->cap != 0 ? g->cap : 4096;
  uint8_t *nb;
  if (g->len + n <= g->cap)
    return;
  while (nc < g->len + n)
    nc *= 2;
  nb = realloc(g->buf, nc);
  if (nb == NULL)
    abort();
  g->buf = nb;
  g->cap = nc;
}

static void put(uint8_t *p, uint64_t v, unsigned n, int be) {
  unsigned i;
  for (i = 0; i < n; i++)
    p[be ? n - 1 - i : i] = (uint8_t)(v >> (8 * i));
}

void evgen_init(evgen_t *g, unsigned flags) {
  memset(g, 0, sizeof(*g));
  g->flags = flags;
}

void evgen_free(evgen_t *g) {
  free(g->buf);
  memset(g, 0, sizeof(*g));
}

void evgen_raw(evgen_t *g, const void *p, size_t n) {
  reserve(g, n);
  memcpy(g->buf + g->len, p, n);
  g->len += n;
}

void evgen_end(evgen_t *g) {
  if (!g->open)
    return;
  put(g->buf + g->block + 4, g->len - g->block - 12, 4, (g->flags & EVGEN_SIZES_BE) != 0);
  g->open = 0;
}

void evgen_block(evgen_t *g, uint32_t overflow) {
  evgen_end(g);
  reserve(g, 12);
  g->block = g->len;
  put(g->buf + g->len, 0x0ffee211u, 4, (g->flags & EVGEN_MAGIC_BE) != 0);
  put(g->buf + g->len + 4, 0, 4, 0);
  put(g->buf + g->len + 8, overflow, 4, (g->flags & EVGEN_SIZES_BE) != 0);
  g->len += 12;
  g->open = 1;
  g->blocks++;
}

size_t evgen_item(evgen_t *g, double tim, double srctim, uint64_t thread, uint64_t obj,
                  const char *event, const char *detail) {
  int be = (g->flags & EVGEN_ITEM_BE) != 0;
  size_t el = strlen(event), dl = detail != NULL ? strlen(detail) + 1 : 0;
  size_t raw = 40 + el + 1 + dl, n = (raw + 7) / 8 * 8, at;
  uint64_t u;
  uint8_t *p;
  if (n > 65528) {
    fprintf(stderr, "evgen_item: item of %zu bytes too long\n", n);
    abort();
  }
  if (!g->open)
    evgen_block(g, 0);
  reserve(g, n);
  at = g->len;
  p = g->buf + at;
  memset(p, (g->flags & EVGEN_STALE_PAD) ? 0xA5 : 0, n);
  memcpy(&u, &tim, 8);
  put(p, u, 8, be);
  memcpy(&u, &srctim, 8);
  put(p + 8, u, 8, be);
  put(p + 16, thread, 8, be);
  put(p + 24, obj, 8, be);
  put(p + 32, 40, 2, be);
  put(p + 34, detail != NULL ? 40 + el + 1 : 0, 2, be);
  put(p + 36, n, 2, be);
  memcpy(p + 40, event, el + 1);
  if (detail != NULL)
    memcpy(p + 40 + el + 1, detail, dl);
  g->len += n;
  g->items++;
  return at;
}

void evgen_random(evgen_t *g, uint64_t seed, size_t nitems, size_t items_per_block) {
  enum { THREADS = 4, DEPTH = 6 };
  static const uint64_t tid[THREADS] = { 0x7f0000001000ull, 0x7f0000002000ull, 0x7f0000003000ull,
                                         0x7f0000004000ull };
  int stack[THREADS][DEPTH];
  int depth[THREADS] = { 0 };
  double clock = 1000.0;
  size_t i, inblock = 0;
  rng_t r;
  char ev[32], det[32];
  rng_seed(&r, seed);
  if (items_per_block == 0)
    items_per_block = 1;
  for (i = 0; i < nitems; i++) {
    unsigned t = (unsigned)rng_below(&r, THREADS);
    unsigned k = (unsigned)rng_below(&r, 100);
    const char *detail = NULL;
    if (inblock == 0)
      evgen_block(g, 0);
    clock += (double)(1 + rng_below(&r, 5000)) * 1e-9;
    if (k < 70) {
      if (depth[t] < DEPTH && (depth[t] == 0 || rng_chance(&r, 1, 2))) {
        int f = (int)rng_below(&r, 16);
        stack[t][depth[t]++] = f;
        snprintf(ev, sizeof(ev), "+f%d", f);
      } else {
        snprintf(ev, sizeof(ev), "-f%d", stack[t][--depth[t]]);
      }
    } else if (k < 80) {
      snprintf(ev, sizeof(ev), "%cs%u", rng_chance(&r, 1, 2) ? '>' : '<',
               (unsigned)rng_below(&r, 4));
    } else if (k < 90) {
      snprintf(ev, sizeof(ev), "!v%u", (unsigned)rng_below(&r, 4));
    } else if (k < 98) {
      snprintf(ev, sizeof(ev), "*CPUFREQ %u", (unsigned)rng_below(&r, 4));
      snprintf(det, sizeof(det), "%u", (unsigned)(800 + rng_below(&r, 3000)));
      detail = det;
    } else {
      snprintf(ev, sizeof(ev), "*meta");
      snprintf(det, sizeof(det), "x%u", (unsigned)rng_below(&r, 1000));
      detail = det;
    }
    evgen_item(g, clock, 0.0, tid[t], rng_below(&r, 4) * 0x1000, ev, detail);
    if (++inblock == items_per_block)
      inblock = 0;
  }
  evgen_end(g);
}
