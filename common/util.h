/*
 * util.h - small things every zeps process needs: allocation that aborts on
 * exhaustion, monotonic time, a seeded random generator, counter-based
 * parameter initialisation, a fast finiteness check.
 *
 * Out-of-memory policy (written down once): small and fixed-size allocations
 * go through zp_xmalloc & co., which abort with a message, since a daemon that
 * cannot allocate a few hundred bytes cannot do anything useful. Sizes that
 * come from the network or from a table declaration are checked against the
 * configured limits first and allocated with plain malloc, and failure is an
 * ENOMEM reply, not an abort.
 */
#ifndef ZP_UTIL_H
#define ZP_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

void *zp_xmalloc(size_t n);
void *zp_xcalloc(size_t n, size_t size);
void *zp_xrealloc(void *p, size_t n);
char *zp_xstrdup(const char *s);

/* Keep large buffers on the heap instead of fresh mmaps: glibc maps every
 * allocation over 32 MB anew (and every heap of a secondary arena) and the
 * kernel faults it in page by page on every use, which halves the
 * throughput of large messages. Call once at start-up, before threads. */
void zp_malloc_tune(void);

/* Write a printf-style message into err (errlen bytes, always terminated;
 * nothing if err is NULL) and return `code`: the one helper behind every
 * "return an error code with a message" in zeps. */
int zp_seterr(char *err, size_t errlen, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Monotonic clock. */
uint64_t zp_now_ns(void);
double zp_now_s(void);

/* A seeded generator (xoshiro256**), deterministic across platforms. */
typedef struct zp_rng {
    uint64_t s[4];
} zp_rng;

/* Seed from a base seed and two stream numbers (e.g. rank and epoch), so
 * different (seed, a, b) give unrelated sequences. */
void zp_rng_seed(zp_rng *r, uint64_t seed, uint64_t a, uint64_t b);
uint64_t zp_rng_next(zp_rng *r);
double zp_rng_uniform(zp_rng *r);                /* [0, 1), 53 bits */
double zp_rng_normal(zp_rng *r);                 /* N(0, 1), Box-Muller */
uint32_t zp_rng_below(zp_rng *r, uint32_t n);    /* [0, n), n > 0 */
void zp_rng_shuffle(zp_rng *r, uint32_t *v, size_t n); /* Fisher-Yates */

/* 64 random bits from the kernel (getrandom; time and pid mixed in if it
 * fails): for incarnations and the seeds of hash tables fed with ids from
 * the network, so nobody can craft ids that collide. Any thread. */
uint64_t zp_random64(void);

/* splitmix64 finaliser: a bijective 64-bit mix. */
uint64_t zp_mix64(uint64_t x);

/* Parameter initialisers. The value of element `index` depends only on
 * (kind, scale, seed, index), never on how the table is sharded. */
typedef enum zp_init_kind {
    ZP_INIT_ZEROS = 0,
    ZP_INIT_CONSTANT = 1,
    ZP_INIT_UNIFORM = 2,
    ZP_INIT_NORMAL = 3,
} zp_init_kind;

/* "zeros" | "constant" | "uniform" | "normal" (NULL or "" = zeros); -1 if unknown. */
int zp_init_from_name(const char *name);
const char *zp_init_name(zp_init_kind k);
void zp_init_fill(float *dst, uint64_t first_index, size_t n, zp_init_kind kind, double scale,
                  uint64_t seed);

/* True if every v[i] is finite. A branch-free loop the compiler vectorises. */
bool zp_all_finite(const float *v, size_t n);

#endif
