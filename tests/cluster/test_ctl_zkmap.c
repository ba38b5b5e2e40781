/*
 * test_ctl_zkmap.c - zepsctl's commit of a move's slot map in ZooKeeper
 * (worker/ctl/ctl_zkmap.c, docs/elastic.md "The map in ZooKeeper")
 * against a real ZooKeeper (tests/support/zkserver.h), with the client's
 * multi-op wrapped (tests/cluster/CMakeLists.txt):
 *
 *   - a write that landed but whose session expired before its answer
 *     (the tool sends it again in a new session, which ZooKeeper refuses
 *     for the version the first changed) is a commit, not a refusal: the
 *     tool would otherwise abort a move the shards take from the node;
 *   - a node changed by someone else since the move began (a shard's
 *     fence) is still refused: ZEPS_ESTALE, the move did not commit.
 */
#include <check.h>
#include <string.h>

#include <zookeeper/zookeeper.h>

#include "check_main.h"
#include "config.h"
#include "coord_fixture.h"
#include "ctl_zkmap.h"
#include "zeps_errors.h"

/* The next multi-op's answer replaced by ZSESSIONEXPIRED once it came:
 * the write is in ZooKeeper, the tool is told its session ended. */
static bool expire_next;
static int multis;
static void_completion_t real_done;

int __real_zoo_amulti(zhandle_t *zh, int count, const zoo_op_t *ops, zoo_op_result_t *results,
                      void_completion_t done, const void *data);
int __wrap_zoo_amulti(zhandle_t *zh, int count, const zoo_op_t *ops, zoo_op_result_t *results,
                      void_completion_t done, const void *data);

static void expired(int rc, const void *data)
{
    ck_assert_int_eq(rc, ZOK); /* it landed */
    real_done(ZSESSIONEXPIRED, data);
}

int __wrap_zoo_amulti(zhandle_t *zh, int count, const zoo_op_t *ops, zoo_op_result_t *results,
                      void_completion_t done, const void *data)
{
    multis++;
    if (!expire_next)
        return __real_zoo_amulti(zh, count, ops, results, done, data);
    expire_next = false;
    real_done = done;
    return __real_zoo_amulti(zh, count, ops, results, expired, data);
}

/* A cluster of one shard named "t" whose shard 0 has an epoch node (as
 * an elected primary leaves it), and the slot node made empty if asked. */
static void cluster(zp_config *cfg, bool slots_node)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->num_shards = 1;
    snprintf(cfg->coord_zookeeper, sizeof(cfg->coord_zookeeper), "%s", fx.zk.hosts);
    snprintf(cfg->coord_name, sizeof(cfg->coord_name), "t");
    zk_cli(fx.zk.hosts,
           slots_node ? "create /zeps\\ncreate /zeps/t\\ncreate /zeps/t/shards\\n"
                        "create /zeps/t/shards/0\\ncreate /zeps/t/shards/0/epoch e1\\n"
                        "create /zeps/t/slots\\n"
                      : "create /zeps\\ncreate /zeps/t\\ncreate /zeps/t/shards\\n"
                        "create /zeps/t/shards/0\\ncreate /zeps/t/shards/0/epoch e1\\n",
           NULL, 0);
}

START_TEST(test_landed_before_its_session_expired)
{
    for (int slots_node = 0; slots_node < 2; slots_node++) { /* create, then set */
        if (slots_node) {
            zt_zk_stop(&fx.zk, SIGTERM);
            start_zk(&fx.zk); /* a fresh folder: no nodes */
        }
        zp_config cfg;
        cluster(&cfg, slots_node);
        char err[512] = "";
        zp_ctl_zkmap *z = NULL;
        ck_assert_int_eq(zp_ctl_zkmap_open(&z, &cfg, 5000, err, sizeof(err)), 0);
        ck_assert_msg(zp_ctl_zkmap_begin(z, 0, 0, err, sizeof(err)) == 0, "%s", err);
        static const char wire[] = "the map of epoch 1";
        expire_next = true;
        multis = 0;
        int rc = zp_ctl_zkmap_commit(z, wire, sizeof(wire), err, sizeof(err));
        ck_assert_msg(rc == 0, "node %s: rc %d: %s", slots_node ? "set" : "created", rc, err);
        ck_assert_int_eq(multis, 2); /* sent again in a new session, refused */
        zp_ctl_zkmap_close(&z);
    }
}
END_TEST

START_TEST(test_fenced_node_refused)
{
    zp_config cfg;
    cluster(&cfg, true);
    char err[512] = "";
    zp_ctl_zkmap *z = NULL;
    ck_assert_int_eq(zp_ctl_zkmap_open(&z, &cfg, 5000, err, sizeof(err)), 0);
    ck_assert_msg(zp_ctl_zkmap_begin(z, 0, 0, err, sizeof(err)) == 0, "%s", err);
    zk_cli(fx.zk.hosts, "set /zeps/t/slots fenced\\n", NULL, 0); /* a shard's fence */
    static const char wire[] = "the map of epoch 1";
    int rc = zp_ctl_zkmap_commit(z, wire, sizeof(wire), err, sizeof(err));
    ck_assert_int_eq(rc, ZEPS_ESTALE);
    ck_assert_ptr_nonnull(strstr(err, "the move did not commit"));
    zp_ctl_zkmap_close(&z);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("ctl_zkmap");
    TCase *tc = fx_case(s, true);
    tcase_add_test(tc, test_landed_before_its_session_expired);
    tcase_add_test(tc, test_fenced_node_refused);
    return s;
}

int main(void)
{
    return zt_run_suite(suite());
}
