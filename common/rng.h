/*
 * rng.h - random numbers: a seeded generator (xoshiro256**) whose streams
 * are the same on every platform, the splitmix64 mix behind it and behind
 * counter-based hashing, and 64 unpredictable bits from the kernel.
 */
#ifndef ZP_RNG_H
#define ZP_RNG_H

#include <stddef.h>
#include <stdint.h>

/* A seeded generator (xoshiro256**), deterministic across platforms. */
typedef struct zp_rng {
    uint64_t s[4];
} zp_rng;

/* Seed from a base seed and two stream numbers (e.g. rank and epoch), so
 * different (seed, a, b) give unrelated sequences. */
void zp_rng_seed(zp_rng *r, uint64_t seed, uint64_t a, uint64_t b);
uint64_t zp_rng_next(zp_rng *r);
double zp_rng_uniform(zp_rng *r);                      /* [0, 1), 53 bits */
double zp_rng_normal(zp_rng *r);                       /* N(0, 1), Box-Muller */
uint32_t zp_rng_below(zp_rng *r, uint32_t n);          /* [0, n), n > 0 */
void zp_rng_shuffle(zp_rng *r, uint32_t *v, size_t n); /* Fisher-Yates */

/* 64 random bits from the kernel (getrandom; time and pid mixed in if it
 * fails): for incarnations and the seeds of hash tables fed with ids from
 * the network, so nobody can craft ids that collide. Any thread. */
uint64_t zp_rng_random64(void);

/* splitmix64 finaliser: a bijective 64-bit mix. */
uint64_t zp_rng_mix64(uint64_t x);

#endif
