/* hash.h - the 64-bit mixer the hash table (htab.h) places its keys with.
 *
 * MurmurHash3's fmix64 finaliser: every input bit affects every output bit, so keys that differ
 * only in high bits (handles, thread ids, pointers) spread over a power-of-two table. Pure.
 */
#ifndef TLC_HASH_H
#define TLC_HASH_H

#include <stdint.h>

static inline uint64_t tlc_mix64(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  return x ^ (x >> 33);
}

#endif
