/*
 * rank.c - a worker's rank as every zeps worker finds it (zeps.h), for
 * programs that are not zeps-worker: the Python binding, user programs
 * started by `zepsctl local --exec`. One rule for all, common/identity.c.
 */
#include <limits.h>
#include <stdio.h>

#include "identity.h"
#include "zeps.h"

int zeps_resolve_rank(const char *value, uint32_t *rank, char *err, size_t errlen)
{
    zp_identity id;
    char buf[256];
    int rc = zp_identity_resolve(ZP_IDENTITY_RANK, value, NULL, INT_MAX, &id, buf, sizeof buf);

    if (rc != 0) {
        if (err != NULL && errlen > 0)
            snprintf(err, errlen, "%s", buf);
        return rc;
    }
    *rank = (uint32_t)id.index;
    return 0;
}
