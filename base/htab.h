/* htab.h - the open-addressing hash table: a 64-bit key to a 64-bit value.
 *
 * Layout: cap slots of { key, val } (cap 0 before the first insert, else a power of two, at
 * least 16), linear probing from tlc_mix64(key) & (cap - 1), at most half of them used (the
 * table doubles before an insert would pass that). A slot is empty when its val is
 * TLC_HTAB_EMPTY, so a value is anything but UINT64_MAX (indexes, counts, packed pairs) and a key
 * is any 64-bit number (0 included). Deletion shifts the entries after it back into place
 * (no tombstones): probe sequences stay as short as if the deleted key had never been there.
 *
 * Keys that are not 64-bit numbers (names, pairs wider than 64 bits) are stored by their 64-bit
 * hash, with the value naming where the caller keeps the real key: tlc_htab_add inserts beside
 * an equal key, and tlc_htab_get / tlc_htab_get_next walk every entry of that hash for the
 * caller to compare.
 *
 * Memory: the slots come from tlc_malloc (one block, 16 bytes a slot); a failed allocation
 * leaves the table as it was and is reported (TLC_ENOMEM). `max`, given at creation, caps the
 * entries (TLC_ELIMIT past it), and so the slots at twice that, rounded up.
 *
 * Cost: tlc_htab_get is inline (the hot lookups inline it); a probe touches consecutive slots.
 *
 * Threads: none; a table is used by one thread at a time.
 */
#ifndef TLC_HTAB_H
#define TLC_HTAB_H

#include "base/hash.h"

#include <stddef.h>
#include <stdint.h>

#define TLC_HTAB_EMPTY UINT64_MAX /* the val of an empty slot: never a value */

typedef struct tlc_htab_slot {
  uint64_t key, val;
} tlc_htab_slot_t;

typedef struct tlc_htab {
  tlc_htab_slot_t *s;
  size_t cap; /* slots: 0 (nothing allocated) or a power of two */
  size_t n;   /* entries */
  size_t max; /* at most this many entries; 0: no cap */
} tlc_htab_t;

/* An empty table for at most max entries (0: as many as memory allows). Allocates nothing.
 * Zeroed memory is an empty table too (no cap). */
void tlc_htab_init(tlc_htab_t *h, size_t max);
/* Frees the slots; h is then empty, as after tlc_htab_init with the same max. */
void tlc_htab_fini(tlc_htab_t *h);
/* Removes every entry, keeping the slots. */
void tlc_htab_clear(tlc_htab_t *h);

/* Makes room for n entries in all, so that inserts up to that many allocate nothing and cannot
 * fail. 0, TLC_ELIMIT (n > max) or TLC_ENOMEM; the table is unchanged on failure. */
int tlc_htab_reserve(tlc_htab_t *h, size_t n);

/* Sets key's value (inserted, or replaced when key is there). val != TLC_HTAB_EMPTY. Returns 0,
 * TLC_ELIMIT (a new key past max) or TLC_ENOMEM; the table is unchanged on failure. */
int tlc_htab_put(tlc_htab_t *h, uint64_t key, uint64_t val);
/* Inserts (key, val) as a new entry even when key is there already (keys that are hashes).
 * Same returns as tlc_htab_put. */
int tlc_htab_add(tlc_htab_t *h, uint64_t key, uint64_t val);
/* Removes key's entry (the first one tlc_htab_get finds). 1 removed, 0 absent. */
int tlc_htab_del(tlc_htab_t *h, uint64_t key);
/* Removes the entry whose value tlc_htab_get/get_next returned (v points into the table).
 * Pointers into the table are invalid after any insert or delete. */
void tlc_htab_del_at(tlc_htab_t *h, uint64_t *v);

/* Slot bytes held (cap * 16). */
static inline size_t tlc_htab_bytes(const tlc_htab_t *h) {
  return h->cap * sizeof(tlc_htab_slot_t);
}

/* A pointer to key's value (the first entry of key), or NULL. Valid until the next insert or
 * delete; the value may be written through it. */
static inline uint64_t *tlc_htab_get(const tlc_htab_t *h, uint64_t key) {
  size_t mask, i;
  if (h->cap == 0)
    return NULL;
  mask = h->cap - 1;
  for (i = (size_t)tlc_mix64(key) & mask; h->s[i].val != TLC_HTAB_EMPTY; i = (i + 1) & mask)
    if (h->s[i].key == key)
      return &h->s[i].val;
  return NULL;
}

/* The next entry of key after the one whose value is at v (from tlc_htab_get or this), or NULL. */
static inline uint64_t *tlc_htab_get_next(const tlc_htab_t *h, uint64_t key, const uint64_t *v) {
  size_t mask = h->cap - 1;
  size_t i = (size_t)((const tlc_htab_slot_t *)(const void *)((const char *)v -
                                                              offsetof(tlc_htab_slot_t, val)) -
                      h->s);
  for (i = (i + 1) & mask; h->s[i].val != TLC_HTAB_EMPTY; i = (i + 1) & mask)
    if (h->s[i].key == key)
      return &h->s[i].val;
  return NULL;
}

/* Iterates: *pos starts at 0; returns the next entry's slot (slot order) or NULL at the end. */
static inline const tlc_htab_slot_t *tlc_htab_next(const tlc_htab_t *h, size_t *pos) {
  while (*pos < h->cap) {
    const tlc_htab_slot_t *s = &h->s[(*pos)++];
    if (s->val != TLC_HTAB_EMPTY)
      return s;
  }
  return NULL;
}

#endif
