/*
 * finite.h - the finiteness check on float vectors that guards what arrives
 * from the network (pushed gradients, decoded payloads).
 */
#ifndef ZP_FINITE_H
#define ZP_FINITE_H

#include <stdbool.h>
#include <stddef.h>

/* True if every v[i] is finite. A branch-free loop the compiler vectorises. */
bool zp_finite_all(const float *v, size_t n);

#endif
