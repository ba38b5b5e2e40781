/*
 * init.h - counter-based parameter initialisation: the value of element
 * `index` depends only on (kind, scale, seed, index), never on how the
 * table is sharded or in which order it is filled.
 */
#ifndef ZP_INIT_H
#define ZP_INIT_H

#include <stddef.h>
#include <stdint.h>

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

#endif
