/*
 * test_config_replicas.c - replicated shards in the cluster file
 * (docs/configuration.md, docs/replication.md): cluster.replicas, the
 * servers' and binds' arrays of replica endpoints, the coordination group,
 * every bad combination refused with file:line:key, and the replica index
 * of a process (--replica, $ZEPS_REPLICA) checked against the file.
 */
#include "check_main.h"
#include "config.h"
#include "config_fixture.h"
#include "daemon.h"
#include "identity.h"
#include "zeps_errors.h"

#include <check.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define R2 "  replicas = 2;\n"
#define ZK "  coordination = { zookeeper = \"10.0.0.1:2181,10.0.0.2:2181\"; };\n"
#define SERVERS2                                                                                   \
    "  servers = ( [\"tcp://127.0.0.1:17000\", \"tcp://127.0.0.1:17001\"],\n"                      \
    "              [\"tcp://127.0.0.1:17002\", \"tcp://127.0.0.1:17003\"] );\n"

/* Two shards of two replicas: endpoints by (shard, replica), binds too. */
START_TEST(replica_endpoints)
{
    zp_config *cfg = parse_ok("cluster = {\n" SERVERS2 "  workers = 1;\n" R2 ZK
                              "  binds = ( [\"tcp://*:17000\", \"tcp://*:17001\"],\n"
                              "            [\"tcp://*:17002\", \"tcp://*:17003\"] );\n" TAIL);
    ck_assert_int_eq(cfg->num_shards, 2);
    ck_assert_int_eq(cfg->replicas, 2);
    ck_assert_str_eq(zp_config_endpoint(cfg, 0, 0), "tcp://127.0.0.1:17000");
    ck_assert_str_eq(zp_config_endpoint(cfg, 0, 1), "tcp://127.0.0.1:17001");
    ck_assert_str_eq(zp_config_endpoint(cfg, 1, 0), "tcp://127.0.0.1:17002");
    ck_assert_str_eq(zp_config_endpoint(cfg, 1, 1), "tcp://127.0.0.1:17003");
    ck_assert_str_eq(cfg->servers[1], "tcp://127.0.0.1:17002"); /* replica 0's, as before */
    ck_assert_str_eq(zp_config_bind(cfg, 1, 1), "tcp://*:17003");
    ck_assert_str_eq(zp_config_bind(cfg, 0, 2), ""); /* no third replica */
    ck_assert_str_eq(zp_config_bind(cfg, 2, 0), "");
    ck_assert_str_eq(zp_config_endpoint(cfg, 2, 0), "");
    ck_assert_str_eq(zp_config_endpoint(cfg, 0, 2), "");
    /* the count bounds the shards, not what the arrays hold: with one shard
     * counted, shard 1 is outside however its entries read */
    cfg->num_shards = 1;
    ck_assert_str_eq(zp_config_endpoint(cfg, 1, 0), "");
    ck_assert_str_eq(zp_config_endpoint(cfg, 1, 1), "");
    ck_assert_str_eq(zp_config_bind(cfg, 1, 0), "");
    ck_assert_str_eq(zp_config_bind(cfg, 1, 1), "");
    ck_assert_str_eq(zp_config_endpoint(cfg, 0, 1), "tcp://127.0.0.1:17001");
    cfg->num_shards = 2;
    ck_assert_str_eq(cfg->coord_zookeeper, "10.0.0.1:2181,10.0.0.2:2181");
    ck_assert_str_eq(cfg->coord_name, "zeps");
    ck_assert_int_eq(cfg->coord_session_timeout_ms, 6000);
    ck_assert_int_eq(cfg->coord_connect_timeout_ms, 15000);
    free(cfg);
    /* one replica: unchanged files, arrays of one endpoint accepted too */
    cfg = parse_ok(HEAD TAIL);
    ck_assert_int_eq(cfg->replicas, 1);
    ck_assert_str_eq(zp_config_endpoint(cfg, 0, 0), "tcp://127.0.0.1:17000");
    ck_assert_str_eq(zp_config_bind(cfg, 0, 0), "");
    free(cfg);
    cfg = parse_ok("cluster = {\n  servers = ( [\"tcp://h:1\"] );\n  workers = 1;\n"
                   "  coordination = { zookeeper = \"z:2181\"; name = \"job-7.a_b\";\n"
                   "    session_timeout_ms = 400; connect_timeout_ms = 100; };\n" TAIL);
    ck_assert_str_eq(cfg->servers[0], "tcp://h:1");
    ck_assert_str_eq(cfg->coord_name, "job-7.a_b");
    ck_assert_int_eq(cfg->coord_session_timeout_ms, 400);
    free(cfg);
}
END_TEST

/* A shard joining at run time (zeps-server --join, past the servers list)
 * has one replica: replica 0's endpoint and bind are the join's, any
 * other replica of it has none; without --join the shard has neither. */
START_TEST(join_endpoints)
{
    zp_config *cfg = parse_ok(HEAD TAIL);
    ck_assert_int_eq(cfg->num_shards, 1);
    ck_assert_str_eq(zp_config_endpoint(cfg, 1, 0), "");
    ck_assert_str_eq(zp_config_bind(cfg, 1, 0), "");
    snprintf(cfg->join, sizeof(cfg->join), "tcp://127.0.0.1:17100");
    snprintf(cfg->join_bind, sizeof(cfg->join_bind), "tcp://*:17100");
    ck_assert_str_eq(zp_config_endpoint(cfg, 1, 0), "tcp://127.0.0.1:17100");
    ck_assert_str_eq(zp_config_bind(cfg, 1, 0), "tcp://*:17100");
    ck_assert_str_eq(zp_config_endpoint(cfg, 1, 1), "");
    ck_assert_str_eq(zp_config_bind(cfg, 1, 1), "");
    ck_assert_str_eq(zp_config_endpoint(cfg, 0, 0), "tcp://127.0.0.1:17000"); /* as listed */
    free(cfg);
}
END_TEST

/* Every bad combination, with file, line and key. */
START_TEST(replica_errors)
{
    expect_error(HEAD R2 TAIL, ZEPS_ECONFIG,
                 "cluster.conf:4: 'cluster.replicas' = 2, but 'cluster.servers' gives one "
                 "endpoint per shard",
                 NULL);
    expect_error("cluster = {\n" SERVERS2 "  workers = 1;\n" R2 TAIL, ZEPS_ECONFIG,
                 "cluster.conf:5: 'cluster.replicas' = 2 needs a coordination service",
                 "'cluster.coordination.zookeeper'", NULL);
    expect_error("cluster = {\n" SERVERS2 "  workers = 1;\n  replicas = 3;\n" ZK TAIL, ZEPS_ECONFIG,
                 "cluster.conf:2: 'cluster.servers' gives 2 endpoints per shard, but "
                 "'cluster.replicas' = 3",
                 NULL);
    expect_error("cluster = {\n  servers = ( [\"tcp://h:1\", \"tcp://h:2\"],\n"
                 "    [\"tcp://h:3\"] );\n  workers = 1;\n" R2 ZK TAIL,
                 ZEPS_ECONFIG,
                 "'cluster.servers[1]' gives 1 endpoint(s) but 'cluster.servers[0]' gives 2", NULL);
    expect_error("cluster = {\n  servers = ( [\"tcp://h:1\", \"tcp://h:2\"],\n"
                 "    [\"tcp://h:3\", \"tcp://h:2\"] );\n  workers = 1;\n" R2 ZK TAIL,
                 ZEPS_ECONFIG,
                 "'cluster.servers[1][1]' = \"tcp://h:2\" repeats 'cluster.servers[0][1]'", NULL);
    expect_error("cluster = {\n  servers = ( (\"tcp://h:1\", 5) );\n  workers = 1;\n" R2 ZK TAIL,
                 ZEPS_ECONFIG, "cluster.conf:2: 'cluster.servers[0][1]' must be a string", NULL);
    expect_error(
        "cluster = {\n  servers = ( [\"tcp://h:1\", \"tcp://*:2\"] );\n  workers = 1;\n" R2 ZK TAIL,
        ZEPS_ECONFIG, "'cluster.servers[0][1]' = \"tcp://*:2\" needs a host name", NULL);
    expect_error("cluster = {\n  servers = ( [\"a\", \"b\", \"c\", \"d\", \"e\", \"f\"] );\n"
                 "  workers = 1;\n" TAIL,
                 ZEPS_ECONFIG, "'cluster.servers[0]' has 6 endpoints (allowed: 1..5 replicas)",
                 NULL);
    expect_error("cluster = {\n" SERVERS2 "  workers = 1;\n" R2 ZK
                 "  binds = [\"tcp://*:1\", \"tcp://*:2\"];\n" TAIL,
                 ZEPS_ECONFIG,
                 "'cluster.binds' gives 1 endpoint(s) per shard, but 'cluster.replicas' = 2", NULL);
    expect_error(
        "cluster = {\n  servers = ( [\"tcp://h:1\", \"tcp://h:2\"] );\n  workers = 1;\n" R2 ZK
        "  binds = ( [\"tcp://*:1\"] );\n" TAIL,
        ZEPS_ECONFIG, "'cluster.binds' gives 1 endpoint(s) per shard, but 'cluster.replicas' = 2",
        NULL);
    expect_error(HEAD "  replicas = 6;\n" TAIL, ZEPS_ECONFIG,
                 "cluster.conf:4: 'cluster.replicas' = 6 is out of range (allowed: 1 <= replicas "
                 "<= 5)",
                 NULL);
    expect_error(HEAD "  coordination = { name = \"a/b\"; };\n" TAIL, ZEPS_ECONFIG,
                 "'cluster.coordination.name' = \"a/b\" must be a name", NULL);
    expect_error(HEAD "  coordination = { session_timeout_ms = 100; };\n" TAIL, ZEPS_ECONFIG,
                 "cluster.conf:4: 'cluster.coordination.session_timeout_ms' = 100 is out of range",
                 NULL);
    expect_error(HEAD "  coordination = { etcd = \"x\"; };\n" TAIL, ZEPS_ECONFIG,
                 "cluster.conf:4: unknown key 'cluster.coordination.etcd'", NULL);
}
END_TEST

static void write_conf(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

/* Parse and load as zeps-server would; returns zp_daemon_load's answer. */
static int load(const char *conf, const char *replica_flag, zp_daemon_args *a, zp_config *cfg)
{
    char *argv[8] = {"zeps-server", "--config", (char *)conf, "--shard", "0", NULL};
    int argc = 5;
    if (replica_flag) {
        argv[argc++] = "--replica";
        argv[argc++] = (char *)replica_flag;
    }
    argv[argc] = NULL;
    optind = 0;
    ck_assert_int_eq(zp_daemon_parse(ZP_DAEMON_SERVER, argc, argv, a), -1);
    return zp_daemon_load(ZP_DAEMON_SERVER, a, cfg);
}

/* --replica and $ZEPS_REPLICA against cluster.replicas. */
START_TEST(replica_index)
{
    char dir[256], one[320], two[320];
    ck_assert_int_eq(zt_scratch_dir(dir, sizeof(dir), "replica"), 0);
    snprintf(one, sizeof(one), "%s/one.conf", dir);
    snprintf(two, sizeof(two), "%s/two.conf", dir);
    write_conf(one, HEAD TAIL);
    write_conf(two, "cluster = {\n" SERVERS2 "  workers = 1;\n" R2 ZK TAIL);
    unsetenv("ZEPS_REPLICA");
    zp_daemon_args a;
    zp_config *cfg = new_cfg();
    ck_assert_int_eq(load(one, NULL, &a, cfg), -1); /* one replica: 0 without a flag */
    ck_assert_int_eq(a.replica, 0);
    ck_assert_int_eq(load(one, "1", &a, cfg), 2);  /* outside replicas = 1 */
    ck_assert_int_eq(load(two, NULL, &a, cfg), 2); /* two: the index is required */
    ck_assert_int_eq(load(two, "1", &a, cfg), -1);
    ck_assert_int_eq(a.replica, 1);
    ck_assert_int_eq(load(two, "2", &a, cfg), 2);
    ck_assert_int_eq(load(two, "auto", &a, cfg), 2);
    setenv("ZEPS_REPLICA", "1", 1);
    ck_assert_int_eq(load(two, NULL, &a, cfg), -1);
    ck_assert_int_eq(a.replica, 1);
    ck_assert_msg(strstr(a.replica_source, "ZEPS_REPLICA"), "%s", a.replica_source);
    ck_assert_int_eq(load(two, "0", &a, cfg), -1); /* the flag wins */
    ck_assert_int_eq(a.replica, 0);
    unsetenv("ZEPS_REPLICA");
    /* the engine variables number shards, never replicas */
    setenv("SLURM_PROCID", "1", 1);
    zp_identity id;
    char err[256];
    ck_assert_int_eq(zp_identity_resolve(ZP_IDENTITY_REPLICA, NULL, NULL, 5, &id, err, sizeof(err)),
                     ZEPS_ECONFIG);
    ck_assert_msg(strstr(err, "--replica") && strstr(err, "ZEPS_REPLICA"), "%s", err);
    unsetenv("SLURM_PROCID");
    free(cfg);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("config_replicas");
    TCase *tc = tcase_create("replicas");
    tcase_add_test(tc, replica_endpoints);
    tcase_add_test(tc, join_endpoints);
    tcase_add_test(tc, replica_errors);
    tcase_add_test(tc, replica_index);
    suite_add_tcase(s, tc);
    return zt_run_suite(s);
}
