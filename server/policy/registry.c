/*
 * registry.c - the consistency modes of this build. Adding a mode is one
 * file in server/policy/ and one line here (and its name in common/config.c,
 * which parses the cluster file).
 */
#include "registry.h"

#include <string.h>

#include "modes.h"

static const zp_consistency_ops *const modes[] = {
    &zp_bsp_ops,
    &zp_async_ops,
    &zp_ssp_ops,
    &zp_weighted_ops,
};

const zp_consistency_ops *zp_registry_find(const char *name)
{
    for (size_t i = 0; name && i < sizeof(modes) / sizeof(modes[0]); i++)
        if (strcmp(modes[i]->name, name) == 0)
            return modes[i];
    return NULL;
}
