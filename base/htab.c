/* htab.c - the open-addressing hash table (see htab.h). */
#include "base/htab.h"

#include "base/alloc.h"
#include "base/err.h"

#define FIRST_CAP 16

void tlc_htab_init(tlc_htab_t *h, size_t max) {
  h->s = NULL;
  h->cap = 0;
  h->n = 0;
  h->max = max;
}

void tlc_htab_fini(tlc_htab_t *h) {
  tlc_free(h->s);
  tlc_htab_init(h, h->max);
}

static void slots_empty(tlc_htab_slot_t *s, size_t n) {
  for (size_t i = 0; i < n; i++)
    s[i].val = TLC_HTAB_EMPTY;
}

void tlc_htab_clear(tlc_htab_t *h) {
  slots_empty(h->s, h->cap);
  h->n = 0;
}

/* The slot (key, val) goes to in s (cap slots, at least one empty). */
static size_t free_slot(const tlc_htab_slot_t *s, size_t cap, uint64_t key) {
  size_t mask = cap - 1, i = (size_t)tlc_mix64(key) & mask;
  while (s[i].val != TLC_HTAB_EMPTY)
    i = (i + 1) & mask;
  return i;
}

int tlc_htab_reserve(tlc_htab_t *h, size_t n) {
  size_t cap = h->cap != 0 ? h->cap : FIRST_CAP;
  tlc_htab_slot_t *s;
  if (h->max != 0 && n > h->max)
    return TLC_ELIMIT;
  if (n > SIZE_MAX / (4 * sizeof(*s)))
    return TLC_ENOMEM; /* the slots' size would overflow */
  while (n > cap / 2)
    cap *= 2;
  if (cap == h->cap)
    return 0;
  s = tlc_malloc(cap * sizeof(*s));
  if (s == NULL)
    return TLC_ENOMEM;
  slots_empty(s, cap);
  for (size_t i = 0; i < h->cap; i++)
    if (h->s[i].val != TLC_HTAB_EMPTY)
      s[free_slot(s, cap, h->s[i].key)] = h->s[i];
  tlc_free(h->s);
  h->s = s;
  h->cap = cap;
  return 0;
}

int tlc_htab_add(tlc_htab_t *h, uint64_t key, uint64_t val) {
  int rc;
  size_t i;
  if (h->n + 1 > h->cap / 2 && (rc = tlc_htab_reserve(h, h->n + 1)) != 0)
    return rc;
  if (h->max != 0 && h->n >= h->max)
    return TLC_ELIMIT;
  i = free_slot(h->s, h->cap, key);
  h->s[i].key = key;
  h->s[i].val = val;
  h->n++;
  return 0;
}

int tlc_htab_put(tlc_htab_t *h, uint64_t key, uint64_t val) {
  uint64_t *v = tlc_htab_get(h, key);
  if (v != NULL) {
    *v = val;
    return 0;
  }
  return tlc_htab_add(h, key, val);
}

void tlc_htab_del_at(tlc_htab_t *h, uint64_t *v) {
  size_t mask = h->cap - 1;
  size_t i =
      (size_t)((tlc_htab_slot_t *)(void *)((char *)v - offsetof(tlc_htab_slot_t, val)) - h->s);
  size_t j = i;
  /* backward shift: each later entry of the run whose home is not in (i, j] moves into i */
  for (;;) {
    size_t home;
    j = (j + 1) & mask;
    if (h->s[j].val == TLC_HTAB_EMPTY)
      break;
    home = (size_t)tlc_mix64(h->s[j].key) & mask;
    if (((j - home) & mask) >= ((j - i) & mask)) {
      h->s[i] = h->s[j];
      i = j;
    }
  }
  h->s[i].val = TLC_HTAB_EMPTY;
  h->n--;
}

int tlc_htab_del(tlc_htab_t *h, uint64_t key) {
  uint64_t *v = tlc_htab_get(h, key);
  if (v == NULL)
    return 0;
  tlc_htab_del_at(h, v);
  return 1;
}
