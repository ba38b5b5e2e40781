/*
 * move_rset.c - see move_rset.h.
 */
#include "move_rset.h"

#include <check.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void zt_rcl_endpoint(zt_rcl *c, int k, int r)
{
    _Static_assert(sizeof(c->cl.endpoints[0]) > sizeof(c->rs[0].ep[0]), "an endpoint fits");
    _Static_assert(sizeof(c->cl.replica_endpoints[0][0]) == sizeof(c->rs[0].ep[0]), "it fits");
    memcpy(c->cl.endpoints[k], c->rs[k].ep[r], sizeof(c->rs[k].ep[r]));
}

void zt_rcl_up(zt_rcl *c, const char *tag, const char *extra)
{
    memset(c, 0, sizeof(*c));
    ck_assert_int_eq(zt_zk_start(&c->zk), 0);
    char lines[400];
    snprintf(lines, sizeof(lines),
             "  workers = %d;\n  consistency = \"async\";\n  hello_timeout_ms = 20000;\n%s",
             ZT_RCL_WORKERS, extra);
    zt_rset_write_shards(c->rs, 2, tag, c->zk.hosts, tag, ZT_RCL_SESSION_MS, lines);
    for (int k = 0; k < 2; k++)
        zt_rset_up(&c->rs[k]);
    _Static_assert(sizeof(c->cl.dir) == sizeof(c->rs[0].dir), "the folder's path fits");
    _Static_assert(sizeof(c->cl.conf) == sizeof(c->rs[0].conf), "the file's path fits");
    memcpy(c->cl.dir, c->rs[0].dir, sizeof(c->cl.dir));
    memcpy(c->cl.conf, c->rs[0].conf, sizeof(c->cl.conf));
    c->cl.nservers = 2;
    c->cl.nworkers = ZT_RCL_WORKERS;
    c->cl.replicas = 2;
    for (int k = 0; k < 2; k++) {
        zt_rcl_endpoint(c, k, 0);
        for (int r = 0; r < 2; r++)
            memcpy(c->cl.replica_endpoints[k][r], c->rs[k].ep[r], sizeof(c->rs[k].ep[r]));
    }
}

void zt_rcl_up_pushing(zt_rcl *c, const char *tag)
{
    zt_rcl_up(c, tag, "");
    zt_move_workers_start(&c->cl, ZT_RCL_WORKERS, c->workers);
    zt_rcl_wait_pushes(c, 3 * ZT_RCL_WORKERS);
}

void zt_rcl_workers_run(const zt_rcl *c)
{
    zt_move_workers_run(c->workers, ZT_RCL_WORKERS);
}

void zt_rcl_workers_end(const zt_rcl *c, const char *what)
{
    long weighted = 0, sum = zt_move_workers_end(&c->cl, ZT_RCL_WORKERS, c->workers, &weighted);
    printf("%ld pushes answered through %s\n", sum, what);
    zt_move_check_oracle(&c->cl, sum, weighted);
}

void zt_rcl_down(zt_rcl *c)
{
    for (int k = 0; k < 2; k++)
        zt_rset_stop(&c->rs[k]);
    zt_zk_stop(&c->zk, SIGTERM);
}

void zt_rcl_fail_over(zt_rcl *c, int k)
{
    int r = zt_rset_primary(&c->rs[k]);
    uint64_t epoch = zt_rset_epoch(&c->rs[k], r);
    zt_rset_kill(&c->rs[k], r, SIGKILL);
    double s = zt_rset_wait(&c->rs[k], 1 - r, "primary", epoch + 1, -1, 30);
    printf("shard %d: replica %d primary %.2f s after the kill\n", k, 1 - r, s);
    zt_rcl_endpoint(c, k, 1 - r);
}

void zt_rcl_back_to_two(zt_rcl *c, int k)
{
    int r = zt_rset_primary(&c->rs[k]);
    zt_rset_start(&c->rs[k], 1 - r);
    zt_rset_wait(&c->rs[k], r, "primary", zt_rset_epoch(&c->rs[k], r), 2, 30);
}

uint64_t zt_rcl_moved_map(const char *set, const uint64_t *ids, size_t n, zp_slotmap **next)
{
    zp_slotmap *d = NULL;
    ck_assert_int_eq(zp_slotmap_new_default(&d, 2), 0);
    uint32_t slots = zp_slotmap_slots(d);
    uint8_t *which = calloc(slots, 1);
    char err[256];
    ck_assert_int_gt(zp_slotmap_parse_set(set, slots, which, err, sizeof(err)), 0);
    for (uint32_t k = 0; k < slots; k++)
        which[k] = which[k] && zp_slotmap_slot_owner(d, k) == 0;
    ck_assert_int_eq(zp_slotmap_moved(d, which, 1, next), 0);
    uint64_t moved = 0;
    for (size_t i = 0; i < n; i++)
        moved += zp_slotmap_owner(d, ids[i]) != zp_slotmap_owner(*next, ids[i]);
    free(which);
    zp_slotmap_destroy(&d);
    return moved;
}

void zt_rcl_check_placed(const zt_rcl *c, const uint64_t *ids, size_t n, const zp_slotmap *map,
                         uint64_t epoch)
{
    uint64_t want[2] = {0, 0};
    for (size_t i = 0; i < n; i++)
        want[zp_slotmap_owner(map, ids[i])]++;
    zeps_client *t = zt_move_tool(&c->cl);
    for (int k = 0; k < 2; k++) {
        uint64_t e = 0, rows = zt_move_rows(t, k, &e);
        ck_assert_msg(rows == want[k] && e == epoch,
                      "shard %d holds %llu rows at map epoch %llu; the map of epoch %llu gives it "
                      "%llu",
                      k, (unsigned long long)rows, (unsigned long long)e, (unsigned long long)epoch,
                      (unsigned long long)want[k]);
    }
    zeps_client_destroy(&t);
}

void zt_rcl_check_oracle_placed(const zt_rcl *c, const char *moved)
{
    static uint64_t ids[NIDS];
    zt_move_ids(ids, NIDS, 0);
    zp_slotmap *map = NULL;
    if (moved)
        ck_assert_uint_gt(zt_rcl_moved_map(moved, ids, NIDS, &map), 0);
    else
        ck_assert_int_eq(zp_slotmap_new_default(&map, 2), 0);
    zt_rcl_check_placed(c, ids, NIDS, map, moved ? 1 : 0);
    zp_slotmap_destroy(&map);
}

/* The pushes shard k's primary applied to table 0 (STATS). */
static uint64_t pushes_at(zeps_client *t, int k)
{
    Zeps__ShardStats *st = zt_stats(t, k);
    ck_assert_ptr_nonnull(st);
    uint64_t p = st->n_tables > 0 ? st->tables[0]->pushes : 0;
    zeps__shard_stats__free_unpacked(st, NULL);
    return p;
}

void zt_rcl_wait_pushes(const zt_rcl *c, uint64_t n)
{
    zeps_client *t = zt_move_tool(&c->cl);
    for (int i = 0; i < 600 && pushes_at(t, 0) < n; i++)
        usleep(50 * 1000);
    zeps_client_destroy(&t);
}

void zt_rcl_check_all_parked(const zt_rcl *c)
{
    zeps_client *t = zt_move_tool(&c->cl);
    uint64_t before = pushes_at(t, 0) + pushes_at(t, 1);
    usleep(300 * 1000);
    uint64_t after = pushes_at(t, 0) + pushes_at(t, 1);
    zeps_client_destroy(&t);
    ck_assert_msg(after == before,
                  "pushes went on in the cut-over (%" PRIu64 " -> %" PRIu64
                  "): not every worker's push was parked",
                  before, after);
}

void zt_rcl_wait_owned(const zt_rcl *c, int k, const uint64_t *ids, size_t n, const zp_slotmap *d,
                       double secs)
{
    uint64_t want = 0;
    for (size_t i = 0; i < n; i++)
        want += zp_slotmap_owner(d, ids[i]) == k;
    double t0 = zt_now_s();
    for (;;) {
        zeps_client *tl = zt_move_tool(&c->cl);
        uint64_t e, got = zt_move_rows(tl, k, &e);
        zeps_client_destroy(&tl);
        if (got == want)
            return;
        ck_assert_msg(zt_now_s() - t0 < secs, "shard %d still holds %llu rows, %llu its own", k,
                      (unsigned long long)got, (unsigned long long)want);
        usleep(100 * 1000);
    }
}
