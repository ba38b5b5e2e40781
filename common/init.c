/*
 * init.c - see init.h.
 */
#include "init.h"

#include <math.h>
#include <string.h>

#include "rng.h"

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
    uint64_t key = zp_rng_mix64(seed ^ 0x7a657073ull);
    for (size_t i = 0; i < n; i++) {
        uint64_t idx = first_index + i;
        uint64_t h1 = zp_rng_mix64(key ^ (idx * 2));
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
            uint64_t h2 = zp_rng_mix64(key ^ (idx * 2 + 1));
            double z = sqrt(-2.0 * log(unit(h1))) * cos(2.0 * M_PI * unit(h2));
            dst[i] = (float)(z * scale);
            break;
        }
        }
    }
}
