/*
 * coord.c - the coordination layer's entry points: the backends of this
 * build by name, and a zp_coord that forwards to the one chosen (the way
 * a transport is chosen by its endpoint's scheme). The backend does the
 * work; see coord.h for the contract and zk.c for ZooKeeper.
 */
#include "coord.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "errors.h"
#include "zeps_errors.h"
#ifdef ZEPS_HAVE_ZOOKEEPER
#include "zk.h"
#endif

struct zp_coord {
    const zp_coord_ops *ops;
    void *impl;
};

static const zp_coord_ops *const backends[] = {
#ifdef ZEPS_HAVE_ZOOKEEPER
    &zp_zk_ops,
#endif
    NULL,
};

const zp_coord_ops *zp_coord_find(const char *name)
{
    for (int i = 0; backends[i]; i++)
        if (strcmp(backends[i]->name, name) == 0)
            return backends[i];
    return NULL;
}

int zp_coord_new(zp_coord **out, uv_loop_t *loop, const zp_coord_opts *o, const zp_coord_cbs *cbs,
                 char *err, size_t errlen)
{
    const char *name = o->backend && o->backend[0] ? o->backend : "zookeeper";
    const zp_coord_ops *ops = zp_coord_find(name);
    if (!ops)
        return zp_errors_set(err, errlen, ZEPS_ECONFIG,
                             "coordination service '%s' is not available in this build%s", name,
                             strcmp(name, "zookeeper") == 0
                                 ? " (its C client was not found: bash deploy/install-deps.sh "
                                   "zk, then build again)"
                                 : "");
    zp_coord *c = zp_alloc_zeroed(1, sizeof(*c));
    c->ops = ops;
    int rc = ops->create(&c->impl, loop, o, cbs, err, errlen);
    if (rc != 0) {
        free(c);
        return rc;
    }
    *out = c;
    return 0;
}

void zp_coord_destroy(zp_coord **cp)
{
    zp_coord *c = *cp;
    if (!c)
        return;
    c->ops->destroy(c->impl); /* frees the backend once its handles closed */
    free(c);
    *cp = NULL;
}

int zp_coord_isr_set(zp_coord *c, const char *const *members, int n, int32_t version,
                     zp_coord_done done, void *arg)
{
    if (n <= 0 || n > ZP_COORD_ISR_MAX)
        return ZEPS_EINVAL;
    return c->ops->isr_set(c->impl, members, n, version, done, arg);
}

int zp_coord_clean_set(zp_coord *c, const char *snapshot, zp_coord_done done, void *arg)
{
    if (!snapshot || !snapshot[0] || strlen(snapshot) >= ZP_COORD_SNAP_MAX)
        return ZEPS_EINVAL;
    return c->ops->clean_set(c->impl, snapshot, done, arg);
}

int zp_coord_slots_get(zp_coord *c, zp_coord_got got, void *arg)
{
    return c->ops->slots_get(c->impl, got, arg);
}

int zp_coord_slots_set(zp_coord *c, const void *map, size_t len, int32_t version,
                       zp_coord_done done, void *arg)
{
    return c->ops->slots_set(c->impl, map, len, version, done, arg);
}

void zp_coord_snapshot_name(char *buf, size_t len, uint64_t setid, uint64_t incarnation,
                            uint64_t created_ns)
{
    snprintf(buf, len, "%016" PRIx64 "-%016" PRIx64 "-%" PRIu64, setid, incarnation, created_ns);
}

void zp_coord_view_get(zp_coord *c, zp_coord_view *v)
{
    c->ops->view(c->impl, v);
}

bool zp_coord_is_stale(zp_coord *c, uint64_t epoch)
{
    zp_coord_view v;
    c->ops->view(c->impl, &v);
    return epoch < v.epoch;
}

void zp_coord_stats_get(zp_coord *c, zp_coord_stats *st)
{
    c->ops->stats(c->impl, st);
}
