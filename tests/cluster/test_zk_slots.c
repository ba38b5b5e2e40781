/*
 * test_zk_slots.c - the cluster's slot map node in the ZooKeeper backend
 * (server/coord/zk_slots.c, docs/elastic.md "The map in ZooKeeper"),
 * against a real ZooKeeper (tests/support/coord_fixture.h), with one call
 * of the client wrapped (tests/cluster/CMakeLists.txt):
 *
 *   - no node: the replica is told so once (version -1), and told the
 *     bytes at version 0 once the node is made (the watch a missing node
 *     keeps);
 *   - a node it may not read (no read permission): a read of it answers
 *     EIO, not ECLOSED (nothing was lost: asking again will not help);
 *   - writes the client refuses at once, as on an expired handle, cost
 *     nothing (the heap stays flat over 300 of them).
 */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include <zookeeper/zookeeper.h>

#include "check_main.h"
#include "coord_fixture.h"
#include "zeps_errors.h"

/* Writes of the slot node, as the backend makes them: the client may
 * refuse them at once (ZINVALIDSTATE) when the test says. */
static bool refuse_writes;
static int writes_refused;

int __real_zoo_aset(zhandle_t *zh, const char *path, const char *buf, int len, int version,
                    stat_completion_t c, const void *data);
int __wrap_zoo_aset(zhandle_t *zh, const char *path, const char *buf, int len, int version,
                    stat_completion_t c, const void *data);

int __wrap_zoo_aset(zhandle_t *zh, const char *path, const char *buf, int len, int version,
                    stat_completion_t c, const void *data)
{
    if (refuse_writes) {
        writes_refused++;
        return ZINVALIDSTATE;
    }
    return __real_zoo_aset(zh, path, buf, len, version, c, data);
}

/* What the replica was told of the node (the coord's `slots` callback),
 * and what a read answered (zp_coord_got). */
typedef struct seen {
    int told, got;
    int32_t version;
    char bytes[64];
    int rc;
} seen;

static void on_slots(void *arg, const void *map, size_t len, int32_t version)
{
    seen *s = arg;
    s->told++;
    s->version = version;
    snprintf(s->bytes, sizeof(s->bytes), "%.*s", (int)len, map ? (const char *)map : "");
}

static void on_got(void *arg, int rc, const void *data, size_t len, int32_t version)
{
    (void)data, (void)len, (void)version;
    seen *s = arg;
    s->got++;
    s->rc = rc;
}

/* Replica 0 of shard 0 of cluster "t", its slot node's news in *s. */
static zp_coord *start(seen *s)
{
    memset(s, 0, sizeof(*s));
    zp_coord_opts o = {.backend = "zookeeper",
                       .hosts = fx.zk.hosts,
                       .cluster = "t",
                       .endpoint = "tcp://127.0.0.1:7000",
                       .session_timeout_ms = SESSION_MS,
                       .connect_timeout_ms = 5000};
    zp_coord_cbs cbs = {.slots = on_slots, .arg = s};
    zp_coord *c = NULL;
    char err[256] = "";
    ck_assert_msg(zp_coord_new(&c, &fx.lp.l, &o, &cbs, err, sizeof(err)) == 0, "%s", err);
    return c;
}

START_TEST(test_no_node_told_once)
{
    seen s;
    zp_coord *c = start(&s);
    WAIT_FOR(10, s.told == 1, &fx.lp);
    ck_assert_int_eq(s.version, -1);
    run_for(&fx.lp, 1);
    ck_assert_int_eq(s.told, 1);
    zk_cli_running(fx.zk.hosts, "create /zeps/t/slots abc\\n", &fx.lp);
    WAIT_FOR(10, s.told == 2, &fx.lp);
    ck_assert_int_eq(s.version, 0);
    ck_assert_str_eq(s.bytes, "abc");
    zp_coord_destroy(&c);
}
END_TEST

START_TEST(test_unreadable_node_eio)
{
    zk_cli(fx.zk.hosts,
           "create /zeps\\ncreate /zeps/t\\ncreate /zeps/t/slots abc\\n"
           "setAcl /zeps/t/slots world:anyone:cdwa\\n",
           NULL, 0);
    seen s;
    zp_coord *c = start(&s);
    zp_coord_stats st = {0};
    WAIT_FOR(10, (zp_coord_stats_get(c, &st), st.connected), &fx.lp);
    ck_assert_int_eq(zp_coord_slots_get(c, on_got, &s), 0);
    WAIT_FOR(10, s.got == 1, &fx.lp);
    ck_assert_msg(s.rc == ZEPS_EIO, "a read without permission: %s", zeps_strerror(s.rc));
    ck_assert_int_eq(s.told, 0); /* the watch's read failed the same way */
    zp_coord_destroy(&c);
}
END_TEST

START_TEST(test_refused_writes_flat)
{
    seen s;
    zp_coord *c = start(&s);
    WAIT_FOR(10, s.told == 1, &fx.lp);
    enum { WARM = 20, WRITES = 300 };
    refuse_writes = true;
    long before = 0;
    for (int i = 0; i < WARM + WRITES; i++) {
        if (i == WARM)
            before = heap_used();
        ck_assert_int_eq(zp_coord_slots_set(c, "abc", 3, 0, NULL, NULL), ZEPS_ESTATE);
    }
    long grown = heap_used() - before;
    refuse_writes = false;
    printf("heap after %d refused writes: %+ld bytes\n", WRITES, grown);
    ck_assert_int_eq(writes_refused, WARM + WRITES);
    ck_assert_msg(grown < WRITES * 16, "%d refused writes grew the heap by %ld bytes", WRITES,
                  grown);
    zp_coord_destroy(&c);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("zk_slots");
    TCase *tc = fx_case(s, true);
    tcase_add_test(tc, test_no_node_told_once);
    tcase_add_test(tc, test_unreadable_node_eio);
    tcase_add_test(tc, test_refused_writes_flat);
    return s;
}

int main(void)
{
    return zt_run_suite(suite());
}
