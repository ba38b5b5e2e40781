/*
 * registry.c - the consistency modes of this build, by name, from the
 * ZP_MODES list in registry.h. Adding a mode is one file in server/policy/
 * and one entry in that list: the cluster file's
 * `consistency` is checked against these names when a shard starts
 * (zp_config_check_mode), and clients learn what a mode implies from its
 * caps in the HELLO reply.
 */
#include "registry.h"

#include <string.h>


#define MODE_PTR_(m) &zp_##m##_ops,
static const zp_consistency_ops *const modes[] = {ZP_MODES(MODE_PTR_)};
#undef MODE_PTR_

const zp_consistency_ops *zp_registry_find(const char *name)
{
    for (size_t i = 0; name && i < sizeof(modes) / sizeof(modes[0]); i++)
        if (strcmp(modes[i]->name, name) == 0)
            return modes[i];
    return NULL;
}

size_t zp_registry_names(const char **out, size_t cap)
{
    size_t n = sizeof(modes) / sizeof(modes[0]), i;
    for (i = 0; i < n && i + 1 < cap; i++)
        out[i] = modes[i]->name;
    if (cap > 0)
        out[i] = NULL;
    return n;
}
