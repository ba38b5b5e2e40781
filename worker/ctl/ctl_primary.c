/*
 * ctl_primary.c - see ctl_primary.h.
 */
#include "ctl_primary.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "ctl_probe.h"
#include "now.h"
#include "zeps.h"
#include "zeps.pb-c.h"

/* Read a[k]'s answer (replica r's) into ep[k] if it says primary, is
 * not fenced (its session expired: another may be primary) and has the
 * highest epoch so far (*epoch), and add what it said to said (len
 * bytes); a[k] is freed and cleared. */
static void take_answer(const zp_config *cfg, int k, int r, answer *a, char *ep, uint64_t *epoch,
                        char *said, size_t len)
{
    Zeps__ShardStats *st = a->buf ? zeps__shard_stats__unpack(NULL, a->len, a->buf) : NULL;
    if (st && strcmp(st->role, "primary") == 0 && !st->fenced && (!ep[0] || st->epoch > *epoch)) {
        snprintf(ep, ZP_ENDPOINT_MAX, "%s", zp_config_endpoint(cfg, k, r));
        *epoch = st->epoch;
    }
    size_t at = strlen(said);
    snprintf(said + at, len - at, "%sreplica %d %s%s", at ? ", " : "", r,
             st ? st->role : "did not answer", st && st->fenced ? " (fenced)" : "");
    zeps__shard_stats__free_unpacked(st, NULL);
    free(a->buf);
    memset(a, 0, sizeof(*a));
}

int zp_ctl_primary_find(const zp_config *cfg, const zp_curve_client_keys *keys, int timeout_ms,
                        char (*ep)[ZP_ENDPOINT_MAX], char *err, size_t errlen)
{
    int n = cfg->num_shards;
    answer *a = zp_alloc_zeroed((size_t)n, sizeof(*a));
    char(*said)[160] = zp_alloc_zeroed((size_t)n, sizeof(*said));
    uint64_t *epoch = zp_alloc_zeroed((size_t)n, sizeof(*epoch));
    for (int k = 0; k < n; k++)
        ep[k][0] = '\0';
    for (int r = 0; r < cfg->replicas; r++) {
        zp_ctl_probe(cfg, keys, 0, n, r, zp_now_s() + timeout_ms / 1000.0, timeout_ms, a);
        for (int k = 0; k < n; k++)
            take_answer(cfg, k, r, &a[k], ep[k], &epoch[k], said[k], sizeof(said[k]));
    }
    int rc = 0;
    for (int k = 0; k < n; k++)
        if (!ep[k][0]) {
            if (rc == 0)
                snprintf(err, errlen, "shard %d has no primary now (%s)", k, said[k]);
            snprintf(ep[k], ZP_ENDPOINT_MAX, "%s", zp_config_endpoint(cfg, k, 0));
            rc = ZEPS_ENOTPRIMARY;
        }
    free(a);
    free(said);
    free(epoch);
    return rc;
}
