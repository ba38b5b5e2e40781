/*
 * util.c - see util.h.
 */
#include "util.h"

#include <malloc.h>
#include <stdarg.h>
#include <math.h>
#include <stdio.h>
#include <sys/random.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void oom(size_t n)
{
    fprintf(stderr, "zeps: out of memory allocating %zu bytes\n", n);
    abort();
}

void *zp_xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p)
        oom(n);
    return p;
}

void *zp_xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p)
        oom(n * size);
    return p;
}

void *zp_xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (!q)
        oom(n);
    return q;
}

char *zp_xstrdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *p = zp_xmalloc(n);
    memcpy(p, s, n);
    return p;
}

void zp_malloc_tune(void)
{
    /* 1 GiB: buffers up to that size are reused from the heap. Trimming is
     * raised with it so freed message buffers are not handed back at once. */
    mallopt(M_MMAP_THRESHOLD, 1 << 30);
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
    /* One arena: ZeroMQ's I/O thread would otherwise get its own, whose
     * heaps hold at most 64 MB and are unmapped as soon as they empty, so
     * every large receive faulted in fresh pages (measured: 311k faults for
     * 105 pairs of 32 MB push+pull; 24.6k with one arena). */
    mallopt(M_ARENA_MAX, 1);
}

int zp_seterr(char *err, size_t errlen, int code, const char *fmt, ...)
{
    if (err && errlen > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return code;
}

uint64_t zp_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

double zp_now_s(void)
{
    return (double)zp_now_ns() * 1e-9;
}

uint64_t zp_mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

void zp_rng_seed(zp_rng *r, uint64_t seed, uint64_t a, uint64_t b)
{
    uint64_t x = zp_mix64(zp_mix64(zp_mix64(seed) ^ a) ^ (b * 0xd1342543de82ef95ull + 1));
    for (int i = 0; i < 4; i++) {
        x = zp_mix64(x);
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

int zp_init_from_name(const char *name)
{
    if (!name || !*name || strcmp(name, "zeros") == 0)
        return ZP_INIT_ZEROS;
    if (strcmp(name, "constant") == 0)
        return ZP_INIT_CONSTANT;
    if (strcmp(name, "uniform") == 0)
        return ZP_INIT_UNIFORM;
    if (strcmp(name, "normal") == 0)
        return ZP_INIT_NORMAL;
    return -1;
}

const char *zp_init_name(zp_init_kind k)
{
    static const char *const names[] = {"zeros", "constant", "uniform", "normal"};
    return (unsigned)k < 4 ? names[k] : "?";
}

/* Two uniforms in (0,1) from one counter: hash-based, so element i's value
 * never depends on which shard or in which order it was filled. */
static inline double unit(uint64_t h)
{
    return ((double)(h >> 11) + 0.5) * 0x1.0p-53;
}

void zp_init_fill(float *dst, uint64_t first_index, size_t n, zp_init_kind kind, double scale,
                  uint64_t seed)
{
    uint64_t key = zp_mix64(seed ^ 0x7a657073ull);
    for (size_t i = 0; i < n; i++) {
        uint64_t idx = first_index + i;
        uint64_t h1 = zp_mix64(key ^ (idx * 2));
        switch (kind) {
        case ZP_INIT_ZEROS:
            dst[i] = 0.0f;
            break;
        case ZP_INIT_CONSTANT:
            dst[i] = (float)scale;
            break;
        case ZP_INIT_UNIFORM:
            dst[i] = (float)((2.0 * unit(h1) - 1.0) * scale);
            break;
        case ZP_INIT_NORMAL: {
            uint64_t h2 = zp_mix64(key ^ (idx * 2 + 1));
            double z = sqrt(-2.0 * log(unit(h1))) * cos(2.0 * M_PI * unit(h2));
            dst[i] = (float)(z * scale);
            break;
        }
        }
    }
}

bool zp_all_finite(const float *v, size_t n)
{
    /* An f32 is Inf or NaN iff its exponent bits are all ones. OR-reducing a
     * mask test keeps the loop branch-free so it vectorises. */
    const uint32_t *u = (const uint32_t *)v;
    uint32_t bad = 0;
    for (size_t i = 0; i < n; i++)
        bad |= ((u[i] & 0x7f800000u) == 0x7f800000u);
    return bad == 0;
}

uint64_t zp_random64(void)
{
    uint64_t r = 0;
    if (getrandom(&r, sizeof(r), 0) != (ssize_t)sizeof(r))
        r ^= zp_now_ns() ^ ((uint64_t)getpid() << 32);
    return zp_mix64(r);
}
