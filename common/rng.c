/*
 * rng.c - see rng.h.
 */
#include "rng.h"

#include <math.h>
#include <sys/random.h>
#include <unistd.h>

#include "now.h"

uint64_t zp_rng_mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

void zp_rng_seed(zp_rng *r, uint64_t seed, uint64_t a, uint64_t b)
{
    uint64_t x =
        zp_rng_mix64(zp_rng_mix64(zp_rng_mix64(seed) ^ a) ^ (b * 0xd1342543de82ef95ull + 1));
    for (int i = 0; i < 4; i++) {
        x = zp_rng_mix64(x);
        r->s[i] = x;
    }
}

static inline uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

uint64_t zp_rng_next(zp_rng *r)
{
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

double zp_rng_uniform(zp_rng *r)
{
    return (double)(zp_rng_next(r) >> 11) * 0x1.0p-53;
}

double zp_rng_normal(zp_rng *r)
{
    double u1 = 1.0 - zp_rng_uniform(r); /* (0, 1]: log is finite */
    double u2 = zp_rng_uniform(r);
    return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}

uint32_t zp_rng_below(zp_rng *r, uint32_t n)
{
    /* multiply-shift: bias below 2^-32, irrelevant for shuffling */
    return (uint32_t)(((zp_rng_next(r) >> 32) * (uint64_t)n) >> 32);
}

void zp_rng_shuffle(zp_rng *r, uint32_t *v, size_t n)
{
    for (size_t i = n; i > 1; i--) {
        size_t j = zp_rng_below(r, (uint32_t)i);
        uint32_t t = v[i - 1];
        v[i - 1] = v[j];
        v[j] = t;
    }
}

uint64_t zp_rng_random64(void)
{
    uint64_t r = 0;
    if (getrandom(&r, sizeof(r), 0) != (ssize_t)sizeof(r))
        r ^= zp_now_ns() ^ ((uint64_t)getpid() << 32);
    return zp_rng_mix64(r);
}
