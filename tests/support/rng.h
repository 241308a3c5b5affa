/* rng.h - a small deterministic PRNG (splitmix64) for property tests and generators.
 * Seeds are printed by the tests on failure so that a case can be replayed. */
#ifndef TLC_RNG_H
#define TLC_RNG_H

#include <stdint.h>

typedef struct rng {
  uint64_t s;
} rng_t;

void rng_seed(rng_t *r, uint64_t seed);
uint64_t rng_next(rng_t *r);
/* Uniform in [0, n); n > 0. */
uint64_t rng_below(rng_t *r, uint64_t n);
/* Uniform in [lo, hi]. */
int64_t rng_range(rng_t *r, int64_t lo, int64_t hi);
/* 1 with probability num/den. */
int rng_chance(rng_t *r, unsigned num, unsigned den);

#endif
