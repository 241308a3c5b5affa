/* fuzz_bwatch_ck.c - libFuzzer harness for the saved budgets' watch that a restart reads back
 * from <state>/<target>/budgets.checkpoint (budget/budget.h: tlc_bwatch_load). The first byte
 * picks how the rest is used:
 *   0: the bytes as the file, as they are (nearly always refused by the checksum);
 *   1: the bytes with their checksum appended (the parser behind it);
 *   2: edits of a real saved watch (a reference watch with violations, kept, worst and counts):
 *      triples (u16 offset, u8 xor) applied to its body, then its checksum made right again,
 *      so that every field is reached from a valid file.
 * Whatever reads must be a watch: at most `keep` kept per budget, each found again by its
 * number (tlc_bwatch_find), and saving it and loading that into a fresh watch gives the same
 * bytes again. Anything refused leaves the watch as it was (nothing counted). No crash, no UB,
 * no leak; memory bounded by the input. */
#include "base/alloc.h"
#include "budget/budget.h"
#include "engine/engine.h"
#include "formats/budget.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char budgets[] = "[budget main_net]\narea = main\nstat = net\nmax = 10ns\n"
                              "[budget any_min]\narea = *\nstat = net\nmin = 1us\n"
                              "[budget tick]\narea = 00000002\nstat = period\nmax = 150ns\n";

static const char *w_area(void *ud, uint32_t handle) {
  (void)ud;
  return handle == 1 ? "main" : NULL;
}

static int64_t w_wall(void *ud) {
  (void)ud;
  return 1764748800000; /* a fixed wall clock: the reference is the same every run */
}

static tlc_bwatch_t *fresh(void) {
  tlc_tbudget_set_t s;
  tlc_bwatch_opts_t o;
  tlc_bwatch_t *w = NULL;
  char err[200];
  tlc_tbudget_set_init(&s);
  memset(&o, 0, sizeof(o));
  o.area_name = w_area;
  o.wall_ms = w_wall;
  o.keep = 3;
  o.max_keys = 4;
  if (tlc_tbudget_parse(&s, budgets, sizeof(budgets) - 1, "f.ini", err, sizeof(err)) != 0 ||
      tlc_bwatch_new(&w, "lab1", &s, &o) != 0)
    abort();
  tlc_tbudget_set_fini(&s);
  return w;
}

/* The reference: a watch that saw a few activations of handles 1..3 (violations of each
 * budget, more than keep of some, counters past max_keys), saved. */
static uint8_t *reference(size_t *len) {
  static uint8_t *blob;
  static size_t blen;
  tlc_bwatch_t *w;
  tlc_engine_t *e;
  tlc_event_t ev[48];
  size_t i;
  if (blob != NULL) {
    *len = blen;
    return blob;
  }
  w = fresh();
  if (tlc_engine_new(&e, TLC_FMT_BIN11, NULL) != 0)
    abort();
  tlc_bwatch_attach(w, e);
  memset(ev, 0, sizeof(ev));
  for (i = 0; i < 48; i++) {
    ev[i].time_ns = (int64_t)(100 * i + (i % 2) * (int64_t)(20 + 7 * (i % 5)));
    ev[i].handle = 1 + (uint32_t)((i / 2) % 3);
    ev[i].core = (uint8_t)((i / 6) % 3);
    ev[i].type = i % 2 == 0 ? TLC_EV_ENTRY : TLC_EV_EXIT;
  }
  tlc_engine_push(e, ev, 48);
  if (tlc_bwatch_all(w) == 0 || tlc_bwatch_save(w, &blob, &blen) != 0)
    abort();
  tlc_engine_free(e);
  tlc_bwatch_free(w);
  *len = blen;
  return blob;
}

static uint64_t fnv1a(const uint8_t *p, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; i++)
    h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

static void put_sum(uint8_t *p, size_t body) {
  uint64_t h = fnv1a(p, body);
  for (int i = 0; i < 8; i++)
    p[body + i] = (uint8_t)(h >> (8 * i));
}

static void check(const uint8_t *buf, size_t len) {
  tlc_bwatch_t *w = fresh(), *w2;
  uint8_t *a = NULL, *b = NULL;
  size_t alen, blen, i, j;
  char err[300] = "";
  int r = tlc_bwatch_load(w, buf, len, err, sizeof(err));
  if (r != 0) {
    if (tlc_bwatch_all(w) != 0 || tlc_bwatch_dropped_keys(w) != 0 || err[0] == '\0')
      abort(); /* refused: as it was, and says why */
    tlc_bwatch_free(w);
    return;
  }
  for (i = 0; i < tlc_bwatch_nbudgets(w); i++) {
    tlc_violation_t kept[8], v;
    size_t n = tlc_bwatch_recent(w, i, kept, 8);
    if (n > tlc_bwatch_keep(w))
      abort();
    for (j = 0; j < n; j++)
      if (tlc_bwatch_find(w, tlc_bwatch_budget(w, i)->name, kept[j].count, &v, err, sizeof(err)) !=
              0 &&
          kept[j].count != 0)
        abort();
  }
  if (tlc_bwatch_save(w, &a, &alen) != 0)
    abort();
  w2 = fresh();
  if (tlc_bwatch_load(w2, a, alen, err, sizeof(err)) != 0 || tlc_bwatch_save(w2, &b, &blen) != 0 ||
      blen != alen || memcmp(a, b, alen) != 0)
    abort(); /* what we save reads back to itself */ /* what we save reads back to itself */
  tlc_free(a);
  tlc_free(b);
  tlc_bwatch_free(w2);
  tlc_bwatch_free(w);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  uint8_t *buf;
  size_t len;
  if (size < 1 || size > (1u << 20))
    return 0;
  switch (data[0] % 3) {
  case 0:
    check(data + 1, size - 1);
    break;
  case 1:
    if ((buf = tlc_malloc(size - 1 + 8)) == NULL)
      return 0;
    memcpy(buf, data + 1, size - 1);
    put_sum(buf, size - 1);
    check(buf, size - 1 + 8);
    tlc_free(buf);
    break;
  default: {
    const uint8_t *ref = reference(&len);
    if ((buf = tlc_malloc(len)) == NULL)
      return 0;
    memcpy(buf, ref, len);
    for (size_t i = 1; i + 3 <= size; i += 3) {
      size_t off = ((size_t)data[i] | (size_t)data[i + 1] << 8) % (len - 8);
      buf[off] ^= data[i + 2];
    }
    put_sum(buf, len - 8);
    check(buf, len);
    tlc_free(buf);
    break;
  }
  }
  return 0;
}
