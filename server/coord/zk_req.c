/*
 * zk_req.c - the ZooKeeper backend's request tracker (zk_impl.h): each
 * asynchronous call carries a `req` naming the session generation it was
 * sent in, so an answer from a session that expired since is dropped;
 * and a write's answer as a zeps_err. Below zk.c and zk_clean.c, which
 * both use it.
 */
#include <stdlib.h>

#include "alloc.h"
#include "zeps_errors.h"
#include "zk_impl.h"

req *zp_zk_req_new(zk *z)
{
    req *r = zp_alloc_zeroed(1, sizeof(*r));
    r->z = z;
    r->gen = z->gen;
    return r;
}

zk *zp_zk_req_live(const void *data)
{
    const req *r = data;
    return r->z->closing || r->gen != r->z->gen ? NULL : r->z;
}

zhandle_t *zp_zk_req_handle(zk *z)
{
    return zp_zk_session_handle(z->sess);
}

/* A write's answer as a zeps_err: a lost connection or session leaves it
 * unknown whether the write happened (ECLOSED). */
int zp_zk_req_write_rc(int rc)
{
    if (rc == ZOK)
        return 0;
    if (rc == ZBADVERSION)
        return ZEPS_ESTALE;
    if (rc == ZCONNECTIONLOSS || rc == ZSESSIONEXPIRED || rc == ZCLOSING || rc == ZOPERATIONTIMEOUT)
        return ZEPS_ECLOSED;
    return ZEPS_EIO;
}

int zp_zk_req_end_write(const void *data, int rc, zk **z, zp_coord_done *done, void **arg)
{
    const req *r = data;
    *z = r->z;
    bool current = zp_zk_req_live(data) != NULL;
    *done = r->done;
    *arg = r->arg;
    free((void *)data);
    if ((*z)->closing)
        return -1; /* no callback after destroy */
    return !current ? ZEPS_ECLOSED : zp_zk_req_write_rc(rc);
}
