/*
 * test_config_keys.c - the cluster file's keys by concern (common/config*.c):
 * lost workers and snapshot timing, staleness and weighting, backup workers,
 * injected delays and slow ranks, the ctr model's group, and CurveZMQ. The
 * reader itself is test_config.c; the helpers tests/support/config_fixture.h.
 * Line numbers in the expected messages count from the first line of each
 * test's text.
 */
#include "check_main.h"
#include "config.h"
#include "config_fixture.h"
#include "zeps_errors.h"

#include <check.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* cluster.lost_worker_timeout_s, on_lost_worker, snapshot_mtbf_s,
 * snapshot_nice. */
START_TEST(fault_keys)
{
    zp_config *cfg = parse_ok(HEAD "  lost_worker_timeout_s = 2.5; on_lost_worker = \"continue\";\n"
                                   "  snapshot_mtbf_s = 3600; snapshot_nice = 19;\n" TAIL);
    ck_assert_double_eq(cfg->lost_worker_timeout_s, 2.5);
    ck_assert(cfg->lost_continue);
    ck_assert_double_eq(cfg->snapshot_mtbf_s, 3600.0);
    ck_assert_int_eq(cfg->snapshot_nice, 19);
    free(cfg);
    cfg = parse_ok(HEAD "  on_lost_worker = \"wait\";\n" TAIL);
    ck_assert(!cfg->lost_continue);
    ck_assert_double_eq(cfg->lost_worker_timeout_s, -1.0); /* auto */
    ck_assert_double_eq(cfg->lost_worker_wait_s, -1.0);    /* auto */
    ck_assert_double_eq(cfg->snapshot_mtbf_s, 0.0);
    ck_assert_int_eq(cfg->snapshot_nice, 10);
    free(cfg);
    expect_error(HEAD "  on_lost_worker = \"retry\";\n" TAIL, ZEPS_ECONFIG, "cluster.conf:4",
                 "on_lost_worker", "retry", NULL);
    expect_error(HEAD "  lost_worker_timeout_s = -2;\n" TAIL, ZEPS_ECONFIG, "cluster.conf:4",
                 "lost_worker_timeout_s", "out of range", NULL);
    expect_error(HEAD "  lost_worker_wait_s = -3;\n" TAIL, ZEPS_ECONFIG, "cluster.conf:4",
                 "lost_worker_wait_s", "out of range", NULL);
    cfg = parse_ok(HEAD "  lost_worker_timeout_s = 0; lost_worker_wait_s = 7.5;\n" TAIL);
    ck_assert_double_eq(cfg->lost_worker_timeout_s, 0.0); /* off */
    ck_assert_double_eq(cfg->lost_worker_wait_s, 7.5);
    free(cfg);
    expect_error(HEAD "  snapshot_nice = 20;\n" TAIL, ZEPS_ECONFIG, "cluster.conf:4",
                 "snapshot_nice", "out of range", NULL);
    expect_error(HEAD "  snapshot_mtbf_s = \"1h\";\n" TAIL, ZEPS_ECONFIG, "cluster.conf:4",
                 "snapshot_mtbf_s", NULL);
}
END_TEST

/* cluster.max_tables, max_rows, max_memory_mb: a shard's limits. */
START_TEST(limit_keys)
{
    zp_config *cfg = parse_ok(HEAD TAIL);
    ck_assert_int_eq(cfg->max_tables, 1024);
    ck_assert_uint_eq(cfg->max_rows, 0);
    ck_assert_uint_eq(cfg->max_memory_bytes, 0);
    free(cfg);
    cfg = parse_ok(HEAD "  max_tables = 5; max_rows = 10000000000L; max_memory_mb = 2048;\n" TAIL);
    ck_assert_int_eq(cfg->max_tables, 5);
    ck_assert_uint_eq(cfg->max_rows, 10000000000ull);
    ck_assert_uint_eq(cfg->max_memory_bytes, 2048ull << 20);
    free(cfg);
    expect_error(HEAD "  max_tables = 0;\n" TAIL, ZEPS_ECONFIG, "cluster.conf:4", "max_tables",
                 "out of range", NULL);
    expect_error(HEAD "  max_rows = -1;\n" TAIL, ZEPS_ECONFIG, "cluster.conf:4", "max_rows", NULL);
    expect_error(HEAD "  max_memory_mb = \"8G\";\n" TAIL, ZEPS_ECONFIG, "cluster.conf:4",
                 "max_memory_mb", NULL);
}
END_TEST

/* cluster.weighting = { ... }: every function, and the values that mean
 * "no bound". */
START_TEST(staleness_keys)
{
    /* Every weighting function by name; lambda as an int. */
    const char *fns[] = {"none", "inverse", "exp", "lr_over_tau"};
    for (int i = 0; i < 4; i++) {
        char text[256];
        snprintf(text, sizeof(text),
                 HEAD "  weighting = { function = \"%s\"; lambda = 2; };\n" TAIL, fns[i]);
        zp_config *cfg = parse_ok(text);
        ck_assert_int_eq(cfg->weight_fn, i);
        ck_assert_double_eq(cfg->weight_lambda, 2.0);
        free(cfg);
    }
    zp_config *cfg =
        parse_ok(HEAD "  late_pushes = \"drop\"; backup_workers = 0;\n"
                      "  weighting = { max_staleness = -1; bound = -1; dc_lambda = 0; };\n" TAIL);
    ck_assert(!cfg->late_weighted);
    ck_assert_int_eq(cfg->max_staleness, -1);
    ck_assert_int_eq(cfg->weighted_bound, -1);
    ck_assert_double_eq(cfg->dc_lambda, 0.0);
    free(cfg);
    cfg = parse_ok(HEAD "  weighting = { max_staleness = 0; bound = 0; };\n" TAIL);
    ck_assert_int_eq(cfg->max_staleness, 0);
    ck_assert_int_eq(cfg->weighted_bound, 0);
    free(cfg);
}
END_TEST

/* The weighting group: names, ranges, types, unknown keys. */
START_TEST(weighting_errors)
{
    expect_error(HEAD "  weighting = {\n"
                      "    function = \"sqrt\";\n"
                      "  };\n" TAIL,
                 ZEPS_ECONFIG,
                 "cluster.conf:5: 'cluster.weighting.function' = \"sqrt\" is not one of "
                 "none, inverse, exp, lr_over_tau",
                 NULL);
    expect_error(HEAD "  weighting = {\n    lambda = -1;\n  };\n" TAIL, ZEPS_ECONFIG,
                 "cluster.conf:5: 'cluster.weighting.lambda' = -1 is out of range "
                 "(allowed: lambda > 0)",
                 NULL);
    expect_error(HEAD "  weighting = { lambda = 0.0; };\n" TAIL, ZEPS_ECONFIG,
                 "cluster.conf:4: 'cluster.weighting.lambda' = 0 is out of range", "lambda > 0",
                 NULL);
    expect_error(HEAD "  weighting = { lambda = 1e400; };\n" TAIL, ZEPS_ECONFIG,
                 "cluster.conf:4: 'cluster.weighting.lambda' = inf is out of range", NULL);
    expect_error(HEAD "  weighting = { lambda = -1e400; };\n" TAIL, ZEPS_ECONFIG,
                 "cluster.conf:4: 'cluster.weighting.lambda' = -inf", NULL);
    expect_error(HEAD "  weighting = { lambda = \"nan\"; };\n" TAIL, ZEPS_ECONFIG,
                 "cluster.conf:4: 'cluster.weighting.lambda' must be a number (got a string)",
                 NULL);
    expect_error(HEAD "  weighting = { dc_lambda = -0.5; };\n" TAIL, ZEPS_ECONFIG,
                 "cluster.conf:4: 'cluster.weighting.dc_lambda' = -0.5 is out of range",
                 "dc_lambda >= 0", NULL);
    expect_error(HEAD "  weighting = { dc_lambda = 1e400; };\n" TAIL, ZEPS_ECONFIG,
                 "'cluster.weighting.dc_lambda' = inf", NULL);
    expect_error(HEAD "  weighting = { dc_lambda = 0.5; dc_mean_square = 1.0; };\n" TAIL,
                 ZEPS_ECONFIG, "'cluster.weighting.dc_mean_square' = 1 is out of range", NULL);
    expect_error(HEAD "  weighting = { dc_mean_square = 0.95; };\n" TAIL, ZEPS_ECONFIG,
                 "needs 'cluster.weighting.dc_lambda' > 0", NULL);
    expect_error(HEAD "  weighting = {\n    max_staleness = -2;\n  };\n" TAIL, ZEPS_ECONFIG,
                 "cluster.conf:5: 'cluster.weighting.max_staleness' = -2 is out of range",
                 "-1 <= max_staleness", NULL);
    expect_error(HEAD "  weighting = { bound = -2; };\n" TAIL, ZEPS_ECONFIG,
                 "cluster.conf:4: 'cluster.weighting.bound' = -2 is out of range", NULL);
    expect_error(HEAD "  weighting = { max_staleness = 1.5; };\n" TAIL, ZEPS_ECONFIG,
                 "cluster.conf:4: 'cluster.weighting.max_staleness' must be an integer", NULL);
    expect_error(HEAD "  weighting = {\n    function = \"exp\";\n    decay = 0.1;\n  };\n" TAIL,
                 ZEPS_ECONFIG, "cluster.conf:6: unknown key 'cluster.weighting.decay'", NULL);
    expect_error(HEAD "  weighting = \"inverse\";\n" TAIL, ZEPS_ECONFIG,
                 "cluster.conf:4: 'cluster.weighting' must be a group", "(got a string)", NULL);
    expect_error(HEAD TAIL "training = { weighting = { lambda = 1; }; };\n", ZEPS_ECONFIG,
                 "cluster.conf:5: unknown key 'training.weighting'", NULL);
}
END_TEST

/* cluster.inject = { ... }: defaults, every schedule, and what each needs. */
START_TEST(inject_keys)
{
    zp_config *c = parse_ok(HEAD TAIL);
    ck_assert_int_eq(c->inject, ZP_INJECT_OFF);
    ck_assert(c->inject_turns);
    ck_assert_int_eq(c->inject_window, 0);
    free(c);
    c = parse_ok(HEAD "  inject = { schedule = \"uniform\"; max_tau = 8; seed = 3; turns = false; "
                      "window = 10; };\n" TAIL);
    ck_assert_int_eq(c->inject, ZP_INJECT_UNIFORM);
    ck_assert_int_eq(c->inject_max_tau, 8);
    ck_assert_uint_eq(c->inject_seed, 3);
    ck_assert(!c->inject_turns);
    ck_assert_int_eq(c->inject_window, 10);
    free(c);
    c = parse_ok(HEAD "  inject = { schedule = \"straggler\"; straggler = 1; tau = 5; };\n" TAIL);
    ck_assert_int_eq(c->inject, ZP_INJECT_STRAGGLER);
    ck_assert_int_eq(c->inject_straggler, 1);
    free(c);
    expect_error(HEAD "  inject = {\n    schedule = \"normal\";\n  };\n" TAIL, ZEPS_ECONFIG,
                 "cluster.conf:5: 'cluster.inject.schedule' = \"normal\" is not one of off, fixed, "
                 "uniform, geometric, replay, straggler",
                 NULL);
    expect_error(HEAD "  inject = {\n    schedule = \"uniform\";\n  };\n" TAIL, ZEPS_ECONFIG,
                 "cluster.conf:5: 'cluster.inject.schedule' = \"uniform\" needs "
                 "'cluster.inject.max_tau' >= 1",
                 NULL);
    expect_error(HEAD "  inject = { schedule = \"replay\"; };\n" TAIL, ZEPS_ECONFIG,
                 "cluster.conf:4: 'cluster.inject.schedule' = \"replay\" needs "
                 "'cluster.inject.replay_file'",
                 NULL);
    expect_error(HEAD "  inject = { schedule = \"straggler\"; straggler = 2; };\n" TAIL,
                 ZEPS_ECONFIG,
                 "cluster.conf:4: 'cluster.inject.straggler' = 2 is out of range (allowed: 0 <= "
                 "rank < workers = 2)",
                 NULL);
    expect_error(HEAD "  inject = { schedule = \"fixed\"; tau = 5; window = 4; };\n" TAIL,
                 ZEPS_ECONFIG,
                 "cluster.conf:4: 'cluster.inject.window' = 4 keeps fewer versions than schedule "
                 "\"fixed\" can ask for (tau up to 5)",
                 NULL);
    expect_error(HEAD "  inject = { schedule = \"geometric\"; max_tau = 4; p = 0; };\n" TAIL,
                 ZEPS_ECONFIG, "cluster.conf:4: 'cluster.inject.p' = 0 is out of range", NULL);
    expect_error(HEAD "  inject = { tau = -1; };\n" TAIL, ZEPS_ECONFIG,
                 "cluster.conf:4: 'cluster.inject.tau' = -1 is out of range", NULL);
}
END_TEST

/* cluster.backup_workers, late_pushes, trace_dir. */
START_TEST(backup_and_trace_keys)
{
    /* backup_workers below workers (2 here), whichever order the keys come in. */
    expect_error(HEAD "  backup_workers = 2;\n" TAIL, ZEPS_ECONFIG,
                 "cluster.conf:4: 'cluster.backup_workers' = 2 is out of range",
                 "backup_workers < workers = 2", NULL);
    expect_error("cluster = {\n  backup_workers = 5;\n  servers = [\"tcp://h:1\"];\n"
                 "  workers = 3;\n};\n",
                 ZEPS_ECONFIG, "cluster.conf:2: 'cluster.backup_workers' = 5", "workers = 3", NULL);
    expect_error(HEAD "  backup_workers = -1;\n" TAIL, ZEPS_ECONFIG,
                 "cluster.conf:4: 'cluster.backup_workers' = -1 is out of range", NULL);
    zp_config *cfg = parse_ok(HEAD "  backup_workers = 1;\n" TAIL);
    ck_assert_int_eq(cfg->backup_workers, 1);
    free(cfg);

    expect_error(HEAD "  late_pushes = \"apply\";\n" TAIL, ZEPS_ECONFIG,
                 "cluster.conf:4: 'cluster.late_pushes' = \"apply\" is not one of drop, weighted",
                 NULL);
    expect_error(HEAD "  late_pushes = true;\n" TAIL, ZEPS_ECONFIG,
                 "cluster.conf:4: 'cluster.late_pushes' must be a string (got a boolean)", NULL);

    char dir[ZP_PATH_MAX + 8], text[ZP_PATH_MAX + 256];
    memset(dir, 't', sizeof(dir));
    dir[ZP_PATH_MAX] = '\0';
    snprintf(text, sizeof(text), HEAD "  trace_dir = \"%s\";\n" TAIL, dir);
    expect_error(text, ZEPS_ECONFIG, "cluster.conf:4: 'cluster.trace_dir' is too long", NULL);
    dir[ZP_PATH_MAX - 1] = '\0';
    snprintf(text, sizeof(text), HEAD "  trace_dir = \"%s\";\n" TAIL, dir);
    cfg = parse_ok(text);
    ck_assert_str_eq(cfg->trace_dir, dir);
    free(cfg);
}
END_TEST

/* training.delay_dist, delay_sigma, slow_ranks, slow_factor, eval_every_steps. */
START_TEST(delay_keys)
{
    const char *dists[] = {"fixed", "uniform", "lognormal"};
    for (int i = 0; i < 3; i++) {
        char text[256];
        snprintf(text, sizeof(text), HEAD TAIL "training = { delay_dist = \"%s\"; };\n", dists[i]);
        zp_config *cfg = parse_ok(text);
        ck_assert_int_eq(cfg->delay_dist, i);
        free(cfg);
    }
    /* Training may come first: slow ranks are checked against workers at the end. */
    zp_config *cfg = parse_ok("training = { slow_ranks = [1, 0]; slow_factor = 1000.0;\n"
                              "  delay_sigma = 10; eval_every_steps = 0; };\n" HEAD TAIL);
    ck_assert_int_eq(cfg->num_slow_ranks, 2);
    ck_assert_int_eq(cfg->slow_ranks[0], 1);
    ck_assert_int_eq(cfg->slow_ranks[1], 0);
    ck_assert_double_eq(cfg->slow_factor, 1000.0);
    ck_assert_double_eq(cfg->delay_sigma, 10.0);
    free(cfg);
    cfg = parse_ok(HEAD TAIL "training = { slow_ranks = []; slow_factor = 1; };\n");
    ck_assert_int_eq(cfg->num_slow_ranks, 0);
    free(cfg);

    /* A jitter without delay_dist is a uniform delay, as before delay_dist
     * existed; a delay_dist given explicitly stands. */
    cfg = parse_ok(HEAD TAIL "training = { delay_ms = 1; delay_jitter_ms = 2; };\n");
    ck_assert_int_eq(cfg->delay_dist, ZP_DELAY_UNIFORM);
    free(cfg);
    cfg = parse_ok(HEAD TAIL "training = { delay_jitter_ms = 2; delay_dist = \"fixed\"; };\n");
    ck_assert_int_eq(cfg->delay_dist, ZP_DELAY_FIXED);
    free(cfg);
    cfg = parse_ok(HEAD TAIL "training = { delay_ms = 1; delay_jitter_ms = 0; };\n");
    ck_assert_int_eq(cfg->delay_dist, ZP_DELAY_FIXED);
    free(cfg);

    expect_error(HEAD TAIL "training = {\n  delay_dist = \"normal\";\n};\n", ZEPS_ECONFIG,
                 "cluster.conf:6: 'training.delay_dist' = \"normal\" is not one of "
                 "fixed, uniform, lognormal",
                 NULL);
    expect_error(HEAD TAIL "training = { delay_sigma = 0; };\n", ZEPS_ECONFIG,
                 "cluster.conf:5: 'training.delay_sigma' = 0 is out of range",
                 "0 < delay_sigma <= 10", NULL);
    expect_error(HEAD TAIL "training = { delay_sigma = 10.5; };\n", ZEPS_ECONFIG,
                 "'training.delay_sigma' = 10.5 is out of range", NULL);
    expect_error(HEAD TAIL "training = { slow_factor = 0.5; };\n", ZEPS_ECONFIG,
                 "cluster.conf:5: 'training.slow_factor' = 0.5 is out of range",
                 "1 <= slow_factor <= 1000", NULL);
    expect_error(HEAD TAIL "training = { slow_factor = 1001; };\n", ZEPS_ECONFIG,
                 "'training.slow_factor' = 1001 is out of range", NULL);
    expect_error(HEAD TAIL "training = { eval_every_steps = -1; };\n", ZEPS_ECONFIG,
                 "cluster.conf:5: 'training.eval_every_steps' = -1 is out of range", NULL);
}
END_TEST

/* slow_ranks: in range for workers = 2, distinct, integers, at most 64. */
START_TEST(slow_ranks_keys)
{
    expect_error(HEAD TAIL "training = {\n  slow_ranks = [1, 2];\n};\n", ZEPS_ECONFIG,
                 "cluster.conf:6: 'training.slow_ranks[1]' = 2 is out of range",
                 "rank < workers = 2", NULL);
    expect_error("training = {\n  slow_ranks = [5];\n};\n" HEAD TAIL, ZEPS_ECONFIG,
                 "cluster.conf:2: 'training.slow_ranks[0]' = 5", "workers = 2", NULL);
    expect_error(HEAD TAIL "training = { slow_ranks = [-1]; };\n", ZEPS_ECONFIG,
                 "cluster.conf:5: 'training.slow_ranks[0]' = -1 is out of range", NULL);
    expect_error(HEAD TAIL "training = {\n  slow_ranks = [1, 0,\n    1];\n};\n", ZEPS_ECONFIG,
                 "cluster.conf:7: 'training.slow_ranks[2]' = 1 repeats 'training.slow_ranks[0]'",
                 NULL);
    expect_error(HEAD TAIL "training = { slow_ranks = 1; };\n", ZEPS_ECONFIG,
                 "cluster.conf:5: 'training.slow_ranks' must be an array of integers "
                 "(got an integer)",
                 NULL);
    expect_error(HEAD TAIL "training = { slow_ranks = (1, \"2\"); };\n", ZEPS_ECONFIG,
                 "cluster.conf:5: 'training.slow_ranks[1]' must be an integer (got a string)",
                 NULL);
    char text[1024];
    size_t len =
        (size_t)snprintf(text, sizeof(text),
                         "cluster = {\n  servers = [\"tcp://h:1\"];\n  workers = 100;\n};\n"
                         "training = { slow_ranks = [");
    for (int i = 0; i <= ZP_MAX_SLOW_RANKS; i++)
        len += (size_t)snprintf(text + len, sizeof(text) - len, "%s%d", i ? ", " : "", i);
    snprintf(text + len, sizeof(text) - len, "]; };\n");
    expect_error(text, ZEPS_ECONFIG, "cluster.conf:5: 'training.slow_ranks' has 65 entries",
                 "at most 64", NULL);
    /* Exactly 64 is fine. */
    char *comma = strrchr(text, ',');
    snprintf(comma, sizeof(text) - (size_t)(comma - text), "]; };\n");
    zp_config *cfg = parse_ok(text);
    ck_assert_int_eq(cfg->num_slow_ranks, ZP_MAX_SLOW_RANKS);
    ck_assert_int_eq(cfg->slow_ranks[63], 63);
    free(cfg);
}
END_TEST

START_TEST(ctr_keys)
{
    /* defaults, and every key of the group */
    zp_config *cfg =
        parse_ok(HEAD TAIL "training = { model = \"ctr\";\n"
                           "  ctr = { train_file = \"/d/tr\"; test_file = \"/d/te\"; };\n"
                           "};\n");
    ck_assert_str_eq(cfg->model, "ctr");
    ck_assert_str_eq(cfg->ctr_format, "criteo");
    ck_assert_str_eq(cfg->ctr_train_file, "/d/tr");
    ck_assert_int_eq(cfg->ctr_emb_dim, 8);
    ck_assert_str_eq(cfg->ctr_sparse_optimizer, "adagrad");
    ck_assert(cfg->ctr_sparse_lr == 0.05 && cfg->ctr_emb_lr == 0.003 && cfg->ctr_emb_init == 0.01);
    free(cfg);
    cfg = parse_ok(HEAD TAIL "training = { model = \"ctr\"; ctr = {\n"
                             "  format = \"libsvm\"; train_file = \"a\"; test_file = \"b\";\n"
                             "  emb_dim = 16; sparse_optimizer = \"ftrl\"; sparse_lr = 0.1;\n"
                             "  emb_lr = 0.01; emb_init = 0.0; l1 = 1.0; l2 = 0.5;\n"
                             "  max_test_examples = 100; }; };\n");
    ck_assert_str_eq(cfg->ctr_format, "libsvm");
    ck_assert_int_eq(cfg->ctr_emb_dim, 16);
    ck_assert_str_eq(cfg->ctr_sparse_optimizer, "ftrl");
    ck_assert(cfg->ctr_sparse_lr == 0.1 && cfg->ctr_emb_lr == 0.01 && cfg->ctr_emb_init == 0.0);
    ck_assert(cfg->ctr_l1 == 1.0 && cfg->ctr_l2 == 0.5 && cfg->ctr_max_test_examples == 100);
    free(cfg);
    /* the group is optional for other models */
    cfg = parse_ok(HEAD TAIL "training = { model = \"mlp\"; };\n");
    free(cfg);

    expect_error(HEAD TAIL "training = { model = \"ctr\"; };\n", ZEPS_ECONFIG,
                 "'training.ctr.train_file'", NULL);
    expect_error(HEAD TAIL "training = { model = \"ctr\"; ctr = { train_file = \"a\"; }; };\n",
                 ZEPS_ECONFIG, "'training.ctr.test_file'", NULL);
    expect_error(HEAD TAIL "training = {\n  ctr = { format = \"csv\"; };\n};\n", ZEPS_ECONFIG,
                 "cluster.conf:6: 'training.ctr.format' = \"csv\" is not one of criteo, libsvm",
                 NULL);
    expect_error(HEAD TAIL "training = {\n  ctr = { emb_dim = 0; };\n};\n", ZEPS_ECONFIG,
                 "cluster.conf:6:", "'training.ctr.emb_dim'", NULL);
    expect_error(HEAD TAIL "training = {\n  ctr = { sparse_optimizer = \"momentum\"; };\n};\n",
                 ZEPS_ECONFIG, "'training.ctr.sparse_optimizer'", NULL);
    expect_error(HEAD TAIL "training = {\n  ctr = { emb_lr = 0.0; };\n};\n", ZEPS_ECONFIG,
                 "'training.ctr.emb_lr'", NULL);
    expect_error(HEAD TAIL "training = {\n  ctr = { dim = 8; };\n};\n", ZEPS_ECONFIG,
                 "cluster.conf:6: unknown key 'training.ctr.dim'", NULL);
    expect_error(HEAD TAIL "training = { ctr = 3; };\n", ZEPS_ECONFIG,
                 "'training.ctr' must be a group", NULL);
}
END_TEST

/* CurveZMQ keys: paths land in their fields; insecure is a boolean and off
 * by default (the key files themselves are checked at start, test_curve). */
START_TEST(curve_keys)
{
    zp_config *cfg = parse_ok("cluster = {\n  servers = [\"tcp://h:1\"];\n  workers = 1;\n"
                              "  curve_server_secret = \"/k/s.key\";\n"
                              "  curve_server_public = \"/k/s.pub\";\n"
                              "  curve_client_secret = \"/k/c.key\";\n"
                              "  curve_client_public = \"/k/c.pub\";\n"
                              "  curve_allow_dir = \"/k/allow\";\n  insecure = true;\n};\n");
    ck_assert_str_eq(cfg->curve_server_secret, "/k/s.key");
    ck_assert_str_eq(cfg->curve_server_public, "/k/s.pub");
    ck_assert_str_eq(cfg->curve_client_secret, "/k/c.key");
    ck_assert_str_eq(cfg->curve_client_public, "/k/c.pub");
    ck_assert_str_eq(cfg->curve_allow_dir, "/k/allow");
    ck_assert(cfg->insecure);
    free(cfg);
    cfg = parse_ok("cluster = {\n  servers = [\"tcp://h:1\"];\n  workers = 1;\n};\n");
    ck_assert(!cfg->insecure);
    ck_assert_str_eq(cfg->curve_server_secret, "");
    free(cfg);
    expect_error("cluster = {\n  servers = [\"tcp://h:1\"];\n  workers = 1;\n"
                 "  insecure = \"yes\";\n};\n",
                 ZEPS_ECONFIG, "cluster.conf:4:", "'cluster.insecure'", "boolean", NULL);
    expect_error("cluster = {\n  servers = [\"tcp://h:1\"];\n  workers = 1;\n"
                 "  curve_allow_dir = 3;\n};\n",
                 ZEPS_ECONFIG, "cluster.conf:4:", "'cluster.curve_allow_dir'", "string", NULL);
}
END_TEST

/* training.prefetch, max_inflight: 0 by default, 0..64; pull_views: true
 * by default. */
START_TEST(pipeline_keys)
{
    zp_config *cfg = parse_ok(HEAD TAIL "training = { model = \"quadratic\"; };\n");
    ck_assert_int_eq(cfg->prefetch, 0);
    ck_assert_int_eq(cfg->max_inflight, 0);
    ck_assert(cfg->pull_views);
    free(cfg);
    cfg = parse_ok(HEAD TAIL "training = { pull_views = false; };\n");
    ck_assert(!cfg->pull_views);
    free(cfg);
    expect_error(HEAD TAIL "training = { pull_views = 1; };\n", ZEPS_ECONFIG,
                 "cluster.conf:5:", "'training.pull_views'", "boolean", NULL);
    cfg = parse_ok(HEAD TAIL "training = { prefetch = 64; max_inflight = 3; };\n");
    ck_assert_int_eq(cfg->prefetch, 64);
    ck_assert_int_eq(cfg->max_inflight, 3);
    free(cfg);
    expect_error(HEAD TAIL "training = { prefetch = 65; };\n", ZEPS_ECONFIG,
                 "cluster.conf:5: 'training.prefetch' = 65 is out of range", NULL);
    expect_error(HEAD TAIL "training = { max_inflight = -1; };\n", ZEPS_ECONFIG,
                 "cluster.conf:5: 'training.max_inflight' = -1 is out of range", NULL);
}
END_TEST

/* cluster.slot_map: a path (docs/elastic.md), "" by default; the shards
 * read the file (test_slotmap, test_slots). */
START_TEST(slot_map_key)
{
    zp_config *cfg = parse_ok(HEAD "  slot_map = \"/etc/zeps/slots.map\";\n" TAIL);
    ck_assert_str_eq(cfg->slot_map, "/etc/zeps/slots.map");
    free(cfg);
    cfg = parse_ok(HEAD TAIL);
    ck_assert_str_eq(cfg->slot_map, "");
    free(cfg);
    expect_error(HEAD "  slot_map = 3;\n" TAIL, ZEPS_ECONFIG, "cluster.conf:4", NULL);
}
END_TEST

static Suite *config_keys_suite(void)
{
    Suite *s = suite_create("config_keys");
    TCase *tc = tcase_create("keys");
    tcase_add_test(tc, fault_keys);
    tcase_add_test(tc, slot_map_key);
    tcase_add_test(tc, limit_keys);
    tcase_add_test(tc, staleness_keys);
    tcase_add_test(tc, weighting_errors);
    tcase_add_test(tc, backup_and_trace_keys);
    tcase_add_test(tc, delay_keys);
    tcase_add_test(tc, slow_ranks_keys);
    tcase_add_test(tc, ctr_keys);
    tcase_add_test(tc, curve_keys);
    tcase_add_test(tc, inject_keys);
    tcase_add_test(tc, pipeline_keys);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return zt_run_suite(config_keys_suite());
}
