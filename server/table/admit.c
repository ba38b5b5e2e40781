/*
 * admit.c - which unknown ids a sparse table's store gives a row.
 *
 * admit_count k > 1 is counted in a count-min sketch of
 * ZP_ADMIT_SKETCH_DEPTH x 2^ZP_ADMIT_SKETCH_WIDTH_LOG2 saturating u16
 * counters with conservative update (only the smallest counters are raised,
 * which keeps the over-count small); ids that already have a row are not
 * counted, since the store asks only about unknown ids. admit_prob p < 1
 * draws from a generator seeded from the table seed. When both are set, an
 * id must reach k and then pass the draw (zp_admit_touch, admit.h).
 *
 * The sketch and the generator live in the zp_sparse (sparse_int.h), which
 * owns them.
 */
#include "admit.h"

#include "alloc.h"
#include "errors.h"
#include "rng.h"

void zp_admit_init(zp_sparse *t)
{
    if (t->admit_count > 1) {
        t->sketch = zp_alloc_zeroed(zp_admit_sketch_bytes(t->admit_count), 1);
        t->sketch_seed = zp_rng_mix64(t->seed ^ 0x736b65746368ull);
    }
    zp_rng_seed(&t->rng_admit, t->seed, 0x61646d6974ull, 0);
}

uint32_t zp_admit_sketch_touch(zp_sparse *t, uint64_t h)
{
    uint64_t a = zp_rng_mix64(h ^ t->sketch_seed), b = zp_rng_mix64(a) | 1;
    const uint64_t width = (uint64_t)1 << ZP_ADMIT_SKETCH_WIDTH_LOG2;
    uint16_t *cell[ZP_ADMIT_SKETCH_DEPTH];
    uint32_t min = UINT16_MAX;

    for (int d = 0; d < ZP_ADMIT_SKETCH_DEPTH; d++) {
        uint64_t col = (a + (uint64_t)d * b) >> (64 - ZP_ADMIT_SKETCH_WIDTH_LOG2);
        cell[d] = &t->sketch[(uint64_t)d * width + col];
        if (*cell[d] < min)
            min = *cell[d];
    }
    if (min == UINT16_MAX)
        return min;
    for (int d = 0; d < ZP_ADMIT_SKETCH_DEPTH; d++)
        if (*cell[d] == min)
            (*cell[d])++;
    return min + 1;
}
