/*
 * test_shards_add.c - shards that join a running cluster and shards that
 * give all their slots away (docs/elastic.md, "Adding a shard", "Removing
 * a shard"), with real shards, real worker processes and the real zepsctl.
 *
 * test_learned_shard: the protocol and the client alone. Two shards; a
 * client pushes every id once. A third shard starts with --join; every
 * shard takes (SLOTS) the map one epoch up that names it; a tool client
 * made then learns it from HELLO and reaches it; `zepsctl shards move`
 * gives it all of shard 0's slots. The first client, never restarted and
 * holding the default map of 2, pushes every id again: the EMOVED it gets
 * carries the map, libzeps connects to the shard it never heard of, says
 * HELLO, declares the table there and sends the ids: every row then holds
 * 2 pushes, the client knows 3 shards at epoch 2, and shard 2's STATS
 * shows its pushes.
 *
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <zmq.h>

#include "check_main.h"
#include "harness.h"
#include "move_fixture.h"
#include "rawreq.h"
#include "slotmap.h"
#include "wire.h"
#include "zeps.h"

/* The endpoint of a shard that joins: ipc:// in the cluster's folder. */
static void join_endpoint(const zt_cluster *cl, int k, char *buf, size_t len)
{
    snprintf(buf, len, "ipc://%s/joined-%d", cl->dir, k);
}

/* SLOTS with `map` to shard k, as a tool on a socket of its own: the
 * reply's error code (0: taken). */
static int send_slots(const zt_cluster *cl, int k, const zp_slotmap *map)
{
    size_t len = zp_slotmap_wire_size(map);
    void *wire = malloc(len);
    zp_slotmap_encode(map, wire);
    void *ctx = zmq_ctx_new(), *sock = zt_raw_socket(ctx, cl, k);
    Zeps__Header h;
    zeps__header__init(&h);
    h.version = ZP_PROTOCOL_VERSION;
    h.op = ZEPS__OP__SLOTS;
    h.req_id = 1;
    h.rank = 0xffffffffu;
    Zeps__Header *rep = zt_raw_req(sock, &h, wire, len);
    int rc = rep->op == ZEPS__OP__ERROR ? (int)rep->error : 0;
    if (rc)
        printf("SLOTS to shard %d: %s\n", k, rep->error_text);
    zeps__header__free_unpacked(rep, NULL);
    zmq_close(sock);
    zmq_ctx_term(ctx);
    free(wire);
    return rc;
}

/* Shard k's table 0 pushes and slots owned (STATS). */
static uint64_t table_pushes(zeps_client *c, int k, uint32_t *owned)
{
    Zeps__ShardStats *st = zt_stats(c, k);
    ck_assert_ptr_nonnull(st);
    uint64_t n = st->n_tables > 0 ? st->tables[0]->pushes : 0;
    if (owned)
        *owned = st->slots_owned;
    zeps__shard_stats__free_unpacked(st, NULL);
    return n;
}

START_TEST(test_learned_shard)
{
    zt_cluster cl;
    ck_assert_int_eq(zt_cluster_start(&cl, 2, 1, "async", NULL, NULL), 0);
    static uint64_t ids[NIDS];
    zt_move_ids(ids, NIDS, 0);
    zeps_client *a = zt_client(&cl, 0);
    ck_assert_ptr_nonnull(a);
    uint32_t ta = zt_move_declare(a);
    zt_move_populate(a, ta, ids, NIDS);
    ck_assert_int_eq(zeps_num_shards(a), 2);

    char ep[400];
    join_endpoint(&cl, 2, ep, sizeof(ep));
    ck_assert_int_eq(zt_server_join(&cl, 2, ep), 0);
    zp_slotmap *base = NULL, *joined = NULL;
    char why[256];
    ck_assert_int_eq(zp_slotmap_new_default(&base, 2), 0);
    ck_assert_int_eq(zp_slotmap_joined(base, ep, &joined, why, sizeof(why)), 0);
    for (int k = 2; k >= 0; k--) /* the new shard first, as zepsctl shards add does */
        ck_assert_int_eq(send_slots(&cl, k, joined), 0);
    /* a map without the shard that joined is refused now: it would forget it */
    zp_slotmap *older = NULL;
    uint8_t none[4096] = {0};
    ck_assert_int_eq(zp_slotmap_new_default(&older, 2), 0);
    zp_slotmap *bumped = NULL;
    ck_assert_int_eq(zp_slotmap_moved(older, none, 0, &bumped), 0); /* epoch 1, 2 shards */
    zp_slotmap *bumped2 = NULL;
    ck_assert_int_eq(zp_slotmap_moved(bumped, none, 0, &bumped2), 0); /* epoch 2 */
    ck_assert_int_eq(send_slots(&cl, 0, bumped2), ZEPS_EINVAL);
    zp_slotmap_destroy(&older);
    zp_slotmap_destroy(&bumped);
    zp_slotmap_destroy(&bumped2);

    /* a client made now learns the shard from HELLO and declares there */
    zeps_client *tl = zt_move_tool(&cl);
    ck_assert_int_eq(zeps_num_shards(tl), 3);
    zt_move_declare(tl);
    char log[400];
    snprintf(log, sizeof(log), "%s/move.log", cl.dir);
    char *move[] = {"shards", "move", "--config", cl.conf,  "--from", "0",
                    "--to",   "2",    "--slots",  "0-4095", NULL};
    int st = zt_move_zepsctl(log, move);
    zt_move_print_file(log);
    ck_assert_int_eq(st, 0);
    uint64_t moved = zt_move_rows(tl, 2, NULL);
    ck_assert_uint_gt(moved, NIDS / 3);
    ck_assert_uint_eq(zt_move_rows(tl, 0, NULL), 0);

    /* the first client never heard of shard 2: one push of every id again */
    zt_move_populate(a, ta, ids, NIDS);
    zeps_client_stats cs;
    zeps_client_get_stats(a, &cs);
    ck_assert_int_eq(zeps_num_shards(a), 3);
    ck_assert_uint_eq(cs.slot_epoch, 2);
    ck_assert_uint_ge(cs.slot_redirects, 1);
    ck_assert_uint_ge(table_pushes(tl, 2, NULL), 1); /* a's push reached it */
    float row[DIM];
    for (int i = 0; i < NIDS; i += 7) {
        ck_assert_int_eq(zeps_spull(a, ta, &ids[i], 1, row, 0), 0);
        ck_assert_msg(row[0] == 2.0f && row[1] == (float)(2 * (i % 5 + 1)),
                      "id %d: %g %g after 2 pushes", i, row[0], row[1]);
    }
    ck_assert_uint_eq(zt_move_rows(tl, 2, NULL), moved);
    printf("a client that knew 2 shards reached the joined one: %llu rows there, %llu redirects\n",
           (unsigned long long)moved, (unsigned long long)cs.slot_redirects);
    zp_slotmap_destroy(&base);
    zp_slotmap_destroy(&joined);
    zeps_client_destroy(&tl);
    zeps_client_destroy(&a);
    ck_assert_int_eq(zt_cluster_stop(&cl), 0);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("shards_add");
    TCase *tc = tcase_create("shards_add");
    tcase_set_timeout(tc, 400);
    tcase_add_test(tc, test_learned_shard);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return zt_run_suite(suite());
}
