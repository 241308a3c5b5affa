/* rng.c - splitmix64 (Steele, Lea, Flood 2014); deterministic across hosts. */
#include "rng.h"

void rng_seed(rng_t *r, uint64_t seed) {
  r->s = seed;
}

uint64_t rng_next(rng_t *r) {
  uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint64_t rng_below(rng_t *r, uint64_t n) {
  /* Lemire-free simple rejection to avoid modulo bias. */
  uint64_t lim = UINT64_MAX - UINT64_MAX % n, x;
  do
    x = rng_next(r);
  while (x >= lim);
  return x % n;
}

int64_t rng_range(rng_t *r, int64_t lo, int64_t hi) {
  uint64_t span = (uint64_t)hi - (uint64_t)lo + 1;
  if (span == 0)
    return (int64_t)rng_next(r);
  return (int64_t)((uint64_t)lo + rng_below(r, span));
}

int rng_chance(rng_t *r, unsigned num, unsigned den) {
  return rng_below(r, den) < num;
}
