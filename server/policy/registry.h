/*
 * registry.h - the consistency modes this build has, by name (registry.c).
 */
#ifndef ZP_REGISTRY_H
#define ZP_REGISTRY_H

#include "consistency.h"

/* The ops of mode `name` ("bsp", "async", ...); NULL if not built. */
const zp_consistency_ops *zp_registry_find(const char *name);

#endif
