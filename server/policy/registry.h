/*
 * registry.h - the consistency modes this build has, by name (registry.c).
 */
#ifndef ZP_REGISTRY_H
#define ZP_REGISTRY_H

#include <stddef.h>

#include "consistency.h"

/* THE registry: the modes of this build, one entry each. Mode `m` is the
 * table `zp_<m>_ops` defined in policy/<m>.c; adding a mode is that file
 * plus its entry here (docs/architecture.md, "Adding a consistency mode"). */
#define ZP_MODES(X) X(bsp) X(async) X(ssp) X(weighted)

#define ZP_MODE_EXTERN_(m) extern const zp_consistency_ops zp_##m##_ops;
ZP_MODES(ZP_MODE_EXTERN_)
#undef ZP_MODE_EXTERN_

/* The ops of mode `name` ("bsp", "async", ...); NULL if not built. */
const zp_consistency_ops *zp_registry_find(const char *name);

/* The names of every mode, in registry order, into out[0..cap-1] with a
 * NULL after the last one written (at most cap - 1 names). Returns how many
 * modes there are. Any thread. */
size_t zp_registry_names(const char **out, size_t cap);

#endif
