/*
 * test_config.c - the cluster file reader (common/config*.c): every value
 * of a full file, the defaults, syntax, unknown keys, types, required keys,
 * ranges, endpoints, names, loading from a file and message truncation. The
 * keys of each concern (faults, staleness, delays, ctr, curve) are
 * test_config_keys.c; the helpers tests/support/config_fixture.h.
 *
 * Most cases go through zp_config_parse with the name "cluster.conf" so each
 * message can be checked for the file name, the line and the full key path;
 * zp_config_load is exercised with a scratch file (scratch.h) that every
 * test removes again. Line numbers in the expected messages count from the
 * first line of each test's text.
 */
#include "check_main.h"
#include "scratch.h"
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

/* Write `text` to a new scratch file (scratch.h); the name goes into path. */
static void write_temp(char *path, size_t len, const char *text)
{
    zt_scratch_path(path, len, "config-XXXXXX");
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    size_t n = strlen(text);
    ck_assert_int_eq(write(fd, text, n), (ssize_t)n);
    ck_assert_int_eq(close(fd), 0);
}

/* Every key of the first version of the file, each with a value other than
 * its default. */
static const char good_text[] =
    "# a full cluster file\n"
    "cluster = {\n"
    "  servers = [\"tcp://127.0.0.1:17000\", \"ipc:///tmp/zeps1\",\n"
    "             \"inproc://shard2\"];\n"
    "  binds = [\"tcp://*:17000\", \"ipc:///tmp/zeps1\", \"inproc://shard2\"];\n"
    "  workers = 4;\n"
    "  consistency = \"weighted\";\n"
    "  staleness = 3;\n"
    "  backup_workers = 1;\n"
    "  late_pushes = \"weighted\";\n"
    "  weighting = {\n"
    "    function = \"exp\"; lambda = 0.25; max_staleness = 8;\n"
    "    dc_lambda = 0.04; bound = 2;\n"
    "  };\n"
    "  trace_dir = \"/tmp/trace\";\n"
    "  request_timeout_ms = 500;\n"
    "  max_retries = 0;\n"
    "  hello_timeout_ms = 1000;\n"
    "  max_message_mb = 16;\n"
    "  reject_nonfinite = false;\n"
    "  log_level = \"debug\";\n"
    "};\n"
    "training = {\n"
    "  model = \"quadratic\"; data_dir = \"/data/x\"; epochs = 3;\n"
    "  batch_size = 32; hidden = 128; iterations = 50; dim = 10;\n"
    "  condition = 1000.5; optimizer = \"adam\"; lr = 0.001; momentum = 0.5;\n"
    "  beta1 = 0.8; beta2 = 0.99; eps = 1e-6; weight_decay = 0.0001;\n"
    "  seed = 42; eval_every = 2; max_train_examples = 1000;\n"
    "  delay_ms = 1.5; delay_jitter_ms = 2.0; result_dir = \"/tmp/res\";\n"
    "  delay_dist = \"lognormal\"; delay_sigma = 0.75;\n"
    "  slow_ranks = [3, 1]; slow_factor = 4; eval_every_steps = 20;\n"
    "};\n";

START_TEST(good_file_all_values)
{
    const char *text = good_text;
    zp_config *cfg = parse_ok(text);
    ck_assert_str_eq(cfg->path, "cluster.conf");
    ck_assert_int_eq(cfg->num_shards, 3);
    ck_assert_str_eq(cfg->servers[0], "tcp://127.0.0.1:17000");
    ck_assert_str_eq(cfg->servers[1], "ipc:///tmp/zeps1");
    ck_assert_str_eq(cfg->servers[2], "inproc://shard2");
    ck_assert_str_eq(cfg->binds[0], "tcp://*:17000");
    ck_assert_str_eq(cfg->binds[2], "inproc://shard2");
    ck_assert_int_eq(cfg->num_workers, 4);
    ck_assert_str_eq(cfg->consistency, "weighted");
    ck_assert_int_eq(cfg->staleness, 3);
    ck_assert_int_eq(cfg->backup_workers, 1);
    ck_assert(cfg->late_weighted);
    ck_assert_int_eq(cfg->weight_fn, ZP_WEIGHT_EXP);
    ck_assert_double_eq(cfg->weight_lambda, 0.25);
    ck_assert_int_eq(cfg->max_staleness, 8);
    ck_assert_double_eq(cfg->dc_lambda, 0.04);
    ck_assert_int_eq(cfg->weighted_bound, 2);
    ck_assert_str_eq(cfg->trace_dir, "/tmp/trace");
    ck_assert_int_eq(cfg->request_timeout_ms, 500);
    ck_assert_int_eq(cfg->max_retries, 0);
    ck_assert_int_eq(cfg->hello_timeout_ms, 1000);
    ck_assert_uint_eq(cfg->max_message_bytes, 16u << 20);
    ck_assert(!cfg->reject_nonfinite);
    ck_assert_str_eq(cfg->log_level, "debug");
    ck_assert_str_eq(cfg->model, "quadratic");
    ck_assert_str_eq(cfg->data_dir, "/data/x");
    ck_assert_int_eq(cfg->epochs, 3);
    ck_assert_int_eq(cfg->batch_size, 32);
    ck_assert_int_eq(cfg->hidden, 128);
    ck_assert_int_eq(cfg->iterations, 50);
    ck_assert_int_eq(cfg->dim, 10);
    ck_assert_double_eq(cfg->condition, 1000.5);
    ck_assert_str_eq(cfg->optimizer, "adam");
    ck_assert_double_eq(cfg->lr, 0.001);
    ck_assert_double_eq(cfg->momentum, 0.5);
    ck_assert_double_eq(cfg->beta1, 0.8);
    ck_assert_double_eq(cfg->beta2, 0.99);
    ck_assert_double_eq(cfg->eps, 1e-6);
    ck_assert_double_eq(cfg->weight_decay, 0.0001);
    ck_assert_uint_eq(cfg->seed, 42);
    ck_assert_int_eq(cfg->eval_every, 2);
    ck_assert_int_eq(cfg->max_train_examples, 1000);
    ck_assert_double_eq(cfg->delay_ms, 1.5);
    ck_assert_double_eq(cfg->delay_jitter_ms, 2.0);
    ck_assert_str_eq(cfg->result_dir, "/tmp/res");
    ck_assert_int_eq(cfg->delay_dist, ZP_DELAY_LOGNORMAL);
    ck_assert_double_eq(cfg->delay_sigma, 0.75);
    ck_assert_int_eq(cfg->num_slow_ranks, 2);
    ck_assert_int_eq(cfg->slow_ranks[0], 3);
    ck_assert_int_eq(cfg->slow_ranks[1], 1);
    ck_assert_double_eq(cfg->slow_factor, 4.0);
    ck_assert_int_eq(cfg->eval_every_steps, 20);
    free(cfg);
}
END_TEST

static void check_defaults(const zp_config *cfg)
{
    ck_assert_str_eq(cfg->consistency, "bsp");
    ck_assert_int_eq(cfg->staleness, 0);
    ck_assert_int_eq(cfg->backup_workers, 0);
    ck_assert(!cfg->late_weighted);
    ck_assert_int_eq(cfg->weight_fn, ZP_WEIGHT_INVERSE);
    ck_assert_double_eq(cfg->weight_lambda, 0.5);
    ck_assert_int_eq(cfg->max_staleness, -1);
    ck_assert_double_eq(cfg->dc_lambda, 0.0);
    ck_assert_int_eq(cfg->weighted_bound, -1);
    ck_assert_str_eq(cfg->trace_dir, "");
    ck_assert_int_eq(cfg->request_timeout_ms, 2000);
    ck_assert_int_eq(cfg->max_retries, 10);
    ck_assert_int_eq(cfg->hello_timeout_ms, 30000);
    ck_assert_uint_eq(cfg->max_message_bytes, 1024ull << 20);
    ck_assert(cfg->reject_nonfinite);
    ck_assert_str_eq(cfg->log_level, "info");
    ck_assert_str_eq(cfg->model, "mlp");
    ck_assert_str_eq(cfg->data_dir, "/usr/share/datasets/fashion-mnist");
    ck_assert_int_eq(cfg->epochs, 10);
    ck_assert_int_eq(cfg->batch_size, 64);
    ck_assert_int_eq(cfg->hidden, 256);
    ck_assert_int_eq(cfg->iterations, 1000);
    ck_assert_int_eq(cfg->dim, 100);
    ck_assert_double_eq(cfg->condition, 100.0);
    ck_assert_str_eq(cfg->optimizer, "momentum");
    ck_assert_double_eq(cfg->lr, 0.05);
    ck_assert_double_eq(cfg->momentum, 0.9);
    ck_assert_double_eq(cfg->worker_momentum, 0.0);
    ck_assert_double_eq(cfg->beta1, 0.9);
    ck_assert_double_eq(cfg->beta2, 0.999);
    ck_assert_double_eq(cfg->eps, 1e-8);
    ck_assert_double_eq(cfg->weight_decay, 0.0);
    ck_assert_uint_eq(cfg->seed, 1);
    ck_assert_int_eq(cfg->eval_every, 1);
    ck_assert_int_eq(cfg->max_train_examples, 0);
    ck_assert_double_eq(cfg->delay_ms, 0.0);
    ck_assert_double_eq(cfg->delay_jitter_ms, 0.0);
    ck_assert_str_eq(cfg->result_dir, "");
    ck_assert_int_eq(cfg->delay_dist, ZP_DELAY_FIXED);
    ck_assert_double_eq(cfg->delay_sigma, 0.5);
    ck_assert_int_eq(cfg->num_slow_ranks, 0);
    ck_assert_double_eq(cfg->slow_factor, 1.0);
    ck_assert_int_eq(cfg->eval_every_steps, 0);
    ck_assert_int_eq(cfg->inject, ZP_INJECT_OFF);
    ck_assert_int_eq(cfg->inject_tau, 1);
    ck_assert_int_eq(cfg->inject_max_tau, 0);
    ck_assert_double_eq(cfg->inject_p, 0.5);
    ck_assert_int_eq(cfg->inject_window, 0);
    ck_assert(cfg->inject_turns);
    ck_assert_uint_eq(cfg->inject_seed, 1);
}

START_TEST(defaults_applied)
{
    zp_config *cfg = parse_ok(HEAD TAIL);
    ck_assert_int_eq(cfg->num_shards, 1);
    ck_assert_int_eq(cfg->num_workers, 2);
    ck_assert_str_eq(cfg->servers[0], "tcp://127.0.0.1:17000");
    ck_assert_str_eq(cfg->binds[0], ""); /* "" = bind where workers connect */
    check_defaults(cfg);

    /* An empty training section or weighting group changes nothing either. */
    zp_config *cfg2 = parse_ok(HEAD TAIL "training = {};\n");
    check_defaults(cfg2);
    free(cfg2);
    cfg2 = parse_ok(HEAD "  weighting = {};\n" TAIL);
    check_defaults(cfg2);
    free(cfg2);

    /* zp_config_keys_defaults on its own: no servers, no workers, no path. */
    zp_config_keys_defaults(cfg);
    check_defaults(cfg);
    ck_assert_str_eq(cfg->path, "");
    ck_assert_int_eq(cfg->num_shards, 0);
    ck_assert_int_eq(cfg->num_workers, 0);
    free(cfg);
}
END_TEST

START_TEST(numbers_flexible)
{
    /* Ints where floats are expected; seeds with and without the L suffix. */
    zp_config *cfg = parse_ok(HEAD TAIL "training = { condition = 100; lr = 1; eps = 1;\n"
                                        "  seed = 5000000000L; delay_ms = 0; };\n");
    ck_assert_double_eq(cfg->condition, 100.0);
    ck_assert_double_eq(cfg->lr, 1.0);
    ck_assert_double_eq(cfg->eps, 1.0);
    ck_assert_uint_eq(cfg->seed, 5000000000ull);
    free(cfg);
    cfg = parse_ok(HEAD TAIL "training = { seed = 7; condition = 2L; };\n");
    ck_assert_uint_eq(cfg->seed, 7);
    ck_assert_double_eq(cfg->condition, 2.0);
    free(cfg);
    cfg = parse_ok(HEAD "  max_message_mb = 0x10;\n" TAIL);
    ck_assert_uint_eq(cfg->max_message_bytes, 16u << 20);
    free(cfg);

    /* libconfig 1.5 would wrap these to 32 bits; they must not pass silently. */
    expect_error(HEAD TAIL "training = {\n  seed = 5000000000;\n};\n", ZEPS_ECONFIG,
                 "cluster.conf:6:", "'training.seed'", "5000000000", "L suffix", NULL);
    expect_error(HEAD "  max_retries = 4294967297; # wraps to 1\n" TAIL, ZEPS_ECONFIG,
                 "cluster.conf:4:", "'cluster.max_retries' = 4294967297", "out of range", NULL);
    expect_error(HEAD "  max_retries = 0x100000001;\n" TAIL, ZEPS_ECONFIG,
                 "cluster.conf:4:", "'cluster.max_retries' = 0x100000001", NULL);
    /* A big number elsewhere on the line is not mistaken for the value. */
    cfg = parse_ok(HEAD "  max_retries = 5; # not 4294967297\n" TAIL);
    ck_assert_int_eq(cfg->max_retries, 5);
    free(cfg);
    cfg = parse_ok(HEAD TAIL "training = { result_dir = \"seed = 99999999999\"; seed = 3; };\n");
    ck_assert_uint_eq(cfg->seed, 3);
    free(cfg);
    /* nor a longer name ending in the key's (4294967299 wraps to the 3 stored) */
    static const char *const longer[] = {
        HEAD TAIL "training = { result_dir = \"Xseed = 4294967299\"; seed = 3; };\n",
        HEAD TAIL "training = { result_dir = \"xseed = 4294967299\"; seed = 3; };\n",
        HEAD TAIL "training = { result_dir = \"9seed = 4294967299\"; seed = 3; };\n"};
    for (size_t i = 0; i < sizeof(longer) / sizeof(longer[0]); i++) {
        cfg = parse_ok(longer[i]);
        ck_assert_uint_eq(cfg->seed, 3);
        free(cfg);
    }
    /* libconfig's "name: value" is looked at as "name = value" is */
    expect_error(HEAD TAIL "training = {\n  seed: 5000000000;\n};\n", ZEPS_ECONFIG,
                 "cluster.conf:6:", "'training.seed'", "5000000000", NULL);
}
END_TEST

START_TEST(syntax_error)
{
    expect_error("cluster = {\n  workers = ;\n};\n", ZEPS_ECONFIG,
                 "cluster.conf:2:", "syntax error", NULL);
    expect_error(HEAD "  workers = 3;\n" TAIL, ZEPS_ECONFIG, "cluster.conf:4:", "duplicate", NULL);
    expect_error(HEAD, ZEPS_ECONFIG, "cluster.conf:", NULL); /* unclosed group */
}
END_TEST

/* A slot map file (docs/elastic.md) is read by the shards, with or
 * without snapshots (their files record the map: docs/snapshots.md). */
START_TEST(slot_map_key)
{
    zp_config *cfg =
        parse_ok(HEAD "  slot_map = \"/x/slots.map\";\n  snapshot_dir = \"/x/snap\";\n" TAIL);
    ck_assert_str_eq(cfg->slot_map, "/x/slots.map");
    ck_assert_str_eq(cfg->snapshot_dir, "/x/snap");
    free(cfg);
}
END_TEST

START_TEST(unknown_key)
{
    expect_error(HEAD "  request_timeout_ms = 100;\n  wrokers = 3;\n" TAIL, ZEPS_ECONFIG,
                 "cluster.conf:5: unknown key 'cluster.wrokers'", NULL);
    expect_error(HEAD TAIL "trainig = { epochs = 1; };\n", ZEPS_ECONFIG,
                 "cluster.conf:5: unknown key 'trainig'", NULL);
    expect_error(HEAD TAIL "training = {\n  epochs = 1;\n  learning_rate = 0.1;\n};\n",
                 ZEPS_ECONFIG, "cluster.conf:7: unknown key 'training.learning_rate'", NULL);
    expect_error(HEAD "  extra = { a = 1; };\n" TAIL, ZEPS_ECONFIG,
                 "cluster.conf:4: unknown key 'cluster.extra'", NULL);
}
END_TEST

START_TEST(wrong_type)
{
    expect_error("cluster = {\n  servers = [\"tcp://h:1\"];\n  workers = \"4\";\n};\n",
                 ZEPS_ECONFIG,
                 "cluster.conf:3: 'cluster.workers' must be an integer (got a string)", NULL);
    expect_error(HEAD "  staleness = 1.5;\n" TAIL, ZEPS_ECONFIG,
                 "cluster.conf:4: 'cluster.staleness' must be an integer (got a float)", NULL);
    expect_error(HEAD "  reject_nonfinite = 1;\n" TAIL, ZEPS_ECONFIG,
                 "cluster.conf:4:", "'cluster.reject_nonfinite' must be a boolean",
                 "(got an integer)", NULL);
    expect_error(HEAD "  log_level = info;\n" TAIL, ZEPS_ECONFIG, "cluster.conf:4:", NULL);
    expect_error(HEAD "  log_level = 3;\n" TAIL, ZEPS_ECONFIG,
                 "cluster.conf:4: 'cluster.log_level' must be a string (got an integer)", NULL);
    expect_error(HEAD TAIL "training = {\n  lr = \"fast\";\n};\n", ZEPS_ECONFIG,
                 "cluster.conf:6: 'training.lr' must be a number (got a string)", NULL);
    expect_error(HEAD TAIL "training = { seed = 1.0; };\n", ZEPS_ECONFIG,
                 "cluster.conf:5:", "'training.seed' must be an integer (got a float)", NULL);
    expect_error("cluster = {\n  servers = \"tcp://h:1\";\n  workers = 1;\n};\n", ZEPS_ECONFIG,
                 "cluster.conf:2: 'cluster.servers' must be an array of strings (got a string)",
                 NULL);
    /* libconfig itself refuses mixed arrays; a list may mix, so we check. */
    expect_error("cluster = {\n  servers = [\"tcp://h:1\",\n    17000];\n  workers = 1;\n};\n",
                 ZEPS_ECONFIG, "cluster.conf:3: mismatched element type", NULL);
    expect_error("cluster = {\n  servers = (\"tcp://h:1\",\n    17000);\n  workers = 1;\n};\n",
                 ZEPS_ECONFIG,
                 "cluster.conf:3: 'cluster.servers[1]' must be a string (got an integer)", NULL);
    expect_error("cluster = 5;\n", ZEPS_ECONFIG, "cluster.conf:1: 'cluster' must be a group",
                 "(got an integer)", NULL);
    expect_error(HEAD TAIL "training = [1, 2];\n", ZEPS_ECONFIG,
                 "cluster.conf:5: 'training' must be a group", "(got an array)", NULL);
}
END_TEST

START_TEST(missing_required)
{
    expect_error("cluster = {\n  workers = 2;\n};\n", ZEPS_ECONFIG,
                 "cluster.conf:1: missing required key 'cluster.servers'", NULL);
    expect_error("\ncluster = {\n  servers = [\"tcp://h:1\"];\n};\n", ZEPS_ECONFIG,
                 "cluster.conf:2: missing required key 'cluster.workers'", NULL);
    expect_error("training = { epochs = 1; };\n", ZEPS_ECONFIG,
                 "cluster.conf: missing required key 'cluster'", NULL);
    expect_error("", ZEPS_ECONFIG, "cluster.conf: missing required key 'cluster'", NULL);
    expect_error("# only a comment\n", ZEPS_ECONFIG, "missing required key 'cluster'", NULL);
}
END_TEST

START_TEST(out_of_range)
{
    expect_error("cluster = {\n  servers = [\"tcp://h:1\"];\n  workers = 0;\n};\n", ZEPS_ECONFIG,
                 "cluster.conf:3: 'cluster.workers' = 0 is out of range", "1 <= workers <= 4096",
                 NULL);
    expect_error("cluster = {\n  servers = [\"tcp://h:1\"];\n  workers = 4097;\n};\n", ZEPS_ECONFIG,
                 "cluster.conf:3: 'cluster.workers' = 4097", "4096", NULL);
    expect_error(HEAD "  request_timeout_ms = 5;\n" TAIL, ZEPS_ECONFIG,
                 "cluster.conf:4: 'cluster.request_timeout_ms' = 5 is out of range",
                 "10 <= request_timeout_ms <= 600000", NULL);
    expect_error(HEAD "  max_retries = -1;\n" TAIL, ZEPS_ECONFIG,
                 "'cluster.max_retries' = -1 is out of range", NULL);
    expect_error(HEAD "  staleness = -2;\n" TAIL, ZEPS_ECONFIG, "'cluster.staleness' = -2", NULL);
    expect_error(HEAD "  max_message_mb = 0;\n" TAIL, ZEPS_ECONFIG,
                 "'cluster.max_message_mb' = 0 is out of range", NULL);
    expect_error(HEAD TAIL "training = {\n  momentum = 1.0;\n};\n", ZEPS_ECONFIG,
                 "cluster.conf:6: 'training.momentum' = 1 is out of range", "0 <= momentum < 1",
                 NULL);
    expect_error(HEAD TAIL "training = { worker_momentum = 1.0; };\n", ZEPS_ECONFIG,
                 "'training.worker_momentum' = 1 is out of range", "0 <= worker_momentum < 1",
                 NULL);
    expect_error(HEAD TAIL "training = { lr = 0.0; };\n", ZEPS_ECONFIG,
                 "cluster.conf:5:", "'training.lr' = 0 is out of range", "0 < lr <= 1000", NULL);
    expect_error(HEAD TAIL "training = { lr = -0.1; };\n", ZEPS_ECONFIG, "'training.lr' = -0.1",
                 NULL);
    expect_error(HEAD TAIL "training = { lr = 1e400; };\n", ZEPS_ECONFIG, "'training.lr' = inf",
                 NULL);
    expect_error(HEAD TAIL "training = { batch_size = 0; };\n", ZEPS_ECONFIG,
                 "'training.batch_size' = 0 is out of range", NULL);
    expect_error(HEAD TAIL "training = { epochs = 0; };\n", ZEPS_ECONFIG,
                 "'training.epochs' = 0 is out of range", NULL);
    expect_error(HEAD TAIL "training = { condition = 0.5; };\n", ZEPS_ECONFIG,
                 "'training.condition' = 0.5 is out of range", NULL);
    expect_error(HEAD TAIL "training = { seed = -1L; };\n", ZEPS_ECONFIG,
                 "'training.seed' = -1 is out of range", "seed >= 0", NULL);
    expect_error(HEAD TAIL "training = { eps = 0; };\n", ZEPS_ECONFIG, "'training.eps' = 0", NULL);
    expect_error(HEAD TAIL "training = { delay_ms = -1; };\n", ZEPS_ECONFIG,
                 "'training.delay_ms' = -1", NULL);

    /* 256 servers are fine, 257 are not. */
    char *text = malloc(256 * 40 + 256);
    ck_assert_ptr_nonnull(text);
    for (int n = 256; n <= 257; n++) {
        size_t len = (size_t)sprintf(text, "cluster = {\n  workers = 1;\n  servers = [");
        for (int i = 0; i < n; i++)
            len += (size_t)sprintf(text + len, "%s\"tcp://h:%d\"", i ? ", " : "", 1000 + i);
        sprintf(text + len, "];\n};\n");
        if (n == 256) {
            zp_config *cfg = parse_ok(text);
            ck_assert_int_eq(cfg->num_shards, 256);
            ck_assert_str_eq(cfg->servers[255], "tcp://h:1255");
            free(cfg);
        } else {
            expect_error(text, ZEPS_ECONFIG, "cluster.conf:3: 'cluster.servers' has 257 entries",
                         "1..256", NULL);
        }
    }
    free(text);
    expect_error("cluster = {\n  workers = 1;\n  servers = [];\n};\n", ZEPS_ECONFIG,
                 "cluster.conf:3: 'cluster.servers' has 0 entries", NULL);
}
END_TEST

START_TEST(bad_endpoint)
{
    expect_error("cluster = {\n  workers = 1;\n  servers = [\"http://h:1\"];\n};\n", ZEPS_ECONFIG,
                 "cluster.conf:3: 'cluster.servers[0]' = \"http://h:1\"",
                 "tcp://, ipc:// or inproc://", NULL);
    expect_error("cluster = {\n  workers = 1;\n  servers = [\"tcp://h:1\",\n"
                 "    \"127.0.0.1:17001\"];\n};\n",
                 ZEPS_ECONFIG, "cluster.conf:4: 'cluster.servers[1]'", NULL);
    expect_error("cluster = {\n  workers = 1;\n  servers = [\"tcp://hostonly\"];\n};\n",
                 ZEPS_ECONFIG, "'cluster.servers[0]' = \"tcp://hostonly\"", "host:port", NULL);
    expect_error("cluster = {\n  workers = 1;\n  servers = [\"tcp://h:70000\"];\n};\n",
                 ZEPS_ECONFIG, "'cluster.servers[0]'", "1..65535", NULL);
    expect_error("cluster = {\n  workers = 1;\n  servers = [\"tcp://*:17000\"];\n};\n",
                 ZEPS_ECONFIG, "'cluster.servers[0]'", "only for binds", NULL);
    expect_error("cluster = {\n  workers = 1;\n  servers = [\"ipc://\"];\n};\n", ZEPS_ECONFIG,
                 "'cluster.servers[0]'", "no address", NULL);
    expect_error("cluster = {\n  workers = 1;\n  servers = [\"tcp://h:1\", \"tcp://h:1\"];\n};\n",
                 ZEPS_ECONFIG, "'cluster.servers[1]'", "repeats 'cluster.servers[0]'", NULL);
    /* localhost is 127.0.0.1: one endpoint under two names */
    expect_error("cluster = {\n  workers = 1;\n  servers = [\"tcp://127.0.0.1:17300\", "
                 "\"tcp://localhost:17300\"];\n};\n",
                 ZEPS_ECONFIG, "'cluster.servers[1]' = \"tcp://localhost:17300\"",
                 "repeats 'cluster.servers[0]'", NULL);

    char long_ep[ZP_ENDPOINT_MAX + 16];
    memset(long_ep, 'a', sizeof(long_ep));
    memcpy(long_ep, "ipc://", 6);
    long_ep[ZP_ENDPOINT_MAX] = '\0'; /* one byte more than fits */
    char text[2 * ZP_ENDPOINT_MAX + 128];
    snprintf(text, sizeof(text), "cluster = {\n  workers = 1;\n  servers = [\"%s\"];\n};\n",
             long_ep);
    expect_error(text, ZEPS_ECONFIG, "cluster.conf:3: 'cluster.servers[0]' is too long", NULL);
    long_ep[ZP_ENDPOINT_MAX - 1] = '\0'; /* exactly fits */
    snprintf(text, sizeof(text), "cluster = {\n  workers = 1;\n  servers = [\"%s\"];\n};\n",
             long_ep);
    zp_config *cfg = parse_ok(text);
    ck_assert_str_eq(cfg->servers[0], long_ep);
    free(cfg);

    /* binds: same count as servers, and wildcards are fine there. */
    expect_error(HEAD "  binds = [\"tcp://*:1\", \"tcp://*:2\"];\n" TAIL, ZEPS_ECONFIG,
                 "cluster.conf:4: 'cluster.binds' has 2 entries but 'cluster.servers' has 1", NULL);
    expect_error(HEAD "  binds = [];\n" TAIL, ZEPS_ECONFIG,
                 "cluster.conf:4: 'cluster.binds' has 0 entries but 'cluster.servers' has 1", NULL);
    expect_error(HEAD "  binds = [\"udp://*:1\"];\n" TAIL, ZEPS_ECONFIG,
                 "cluster.conf:4: 'cluster.binds[0]' = \"udp://*:1\"", NULL);
    cfg = parse_ok("cluster = {\n  binds = [\"tcp://*:*\"];\n  workers = 1;\n"
                   "  servers = [\"tcp://[::1]:5\"];\n};\n");
    ck_assert_str_eq(cfg->binds[0], "tcp://*:*");
    ck_assert_str_eq(cfg->servers[0], "tcp://[::1]:5");
    free(cfg);
}
END_TEST

START_TEST(bad_names)
{
    expect_error(HEAD TAIL "training = {\n  model = \"cnn\";\n};\n", ZEPS_ECONFIG,
                 "cluster.conf:6: 'training.model' = \"cnn\" is not one of quadratic, softmax, mlp",
                 NULL);
    expect_error(HEAD TAIL "training = { optimizer = \"rmsprop\"; };\n", ZEPS_ECONFIG,
                 "cluster.conf:5: 'training.optimizer' = \"rmsprop\"",
                 "sgd, momentum, adagrad, adam", NULL);
    expect_error(HEAD "  log_level = \"verbose\";\n" TAIL, ZEPS_ECONFIG,
                 "cluster.conf:4: 'cluster.log_level' = \"verbose\"", "debug, info, warn, error",
                 NULL);
    expect_error(HEAD TAIL "training = { model = \"MLP\"; };\n", ZEPS_ECONFIG, "'training.model'",
                 NULL);

    char dir[ZP_PATH_MAX + 8], text[ZP_PATH_MAX + 256];
    memset(dir, 'd', sizeof(dir));
    dir[ZP_PATH_MAX] = '\0';
    snprintf(text, sizeof(text), HEAD TAIL "training = { data_dir = \"%s\"; };\n", dir);
    expect_error(text, ZEPS_ECONFIG, "cluster.conf:5: 'training.data_dir' is too long", NULL);
}
END_TEST

START_TEST(consistency_modes)
{
    /* The loader takes any mode name; the program that runs the modes
     * checks it against the ones it has (the server: its policy registry). */
    static const char *const known[] = {"bsp", "async", "ssp", "weighted", NULL};
    zp_config *ev = parse_ok(HEAD "  consistency = \"eventual\";\n" TAIL);
    char err[512];
    ck_assert_int_eq(zp_config_check_mode(ev, known, err, sizeof(err)), ZEPS_ECONFIG);
    ck_assert_str_eq(err, "cluster.conf:4: 'cluster.consistency' = \"eventual\" is not one of "
                          "bsp, async, ssp, weighted");
    free(ev);
    expect_error(HEAD "  consistency = \"SSP\";\n" TAIL, ZEPS_ECONFIG,
                 "cluster.conf:4: 'cluster.consistency' = \"SSP\" is not a mode name", NULL);
    expect_error(HEAD "  consistency = \"\";\n" TAIL, ZEPS_ECONFIG,
                 "cluster.conf:4: 'cluster.consistency' = \"\" is not a mode name", NULL);
    expect_error(HEAD "  consistency = 3;\n" TAIL, ZEPS_ECONFIG,
                 "cluster.conf:4: 'cluster.consistency' must be a string", NULL);
    for (int i = 0; known[i] != NULL; i++) {
        char text[256];
        snprintf(text, sizeof(text), HEAD "  consistency = \"%s\";\n  staleness = 2;\n" TAIL,
                 known[i]);
        zp_config *cfg = parse_ok(text);
        ck_assert_str_eq(cfg->consistency, known[i]);
        ck_assert_uint_eq(cfg->consistency_line, 4);
        ck_assert_int_eq(zp_config_check_mode(cfg, known, err, sizeof(err)), 0);
        ck_assert_int_eq(cfg->staleness, 2);
        free(cfg);
    }
}
END_TEST

START_TEST(load_file)
{
    char path[64], err[512];
    write_temp(path, sizeof(path), HEAD "  workers = 3;\n" TAIL);
    zp_config *cfg = new_cfg();
    /* An error in a file names the file itself. */
    int rc = zp_config_load(cfg, path, err, sizeof(err));
    ck_assert_int_eq(rc, ZEPS_ECONFIG);
    char want[128];
    snprintf(want, sizeof(want), "%s:4:", path);
    ck_assert_msg(strstr(err, want) != NULL, "\"%s\" lacks \"%s\"", err, want);
    ck_assert_int_eq(unlink(path), 0);

    write_temp(path, sizeof(path), HEAD TAIL "training = { model = \"softmax\"; };\n");
    rc = zp_config_load(cfg, path, err, sizeof(err));
    ck_assert_msg(rc == ZEPS_OK, "%s", err);
    ck_assert_str_eq(cfg->path, path);
    ck_assert_int_eq(cfg->num_workers, 2);
    ck_assert_str_eq(cfg->model, "softmax");
    ck_assert_int_eq(unlink(path), 0);

    /* The file is gone now: EIO with the path and strerror. */
    rc = zp_config_load(cfg, path, err, sizeof(err));
    ck_assert_int_eq(rc, ZEPS_EIO);
    ck_assert_ptr_nonnull(strstr(err, path));
    ck_assert_ptr_nonnull(strstr(err, strerror(ENOENT)));

    /* A directory opens but cannot be read. */
    rc = zp_config_load(cfg, "/tmp", err, sizeof(err));
    ck_assert_int_eq(rc, ZEPS_EIO);
    ck_assert_ptr_nonnull(strstr(err, "/tmp"));
    ck_assert_ptr_nonnull(strstr(err, strerror(EISDIR)));
    /* A path too long to keep: refused, saying so; one byte shorter: tried. */
    static char lpath[ZP_PATH_MAX + 1], lerr[ZP_PATH_MAX + 128];
    memset(lpath, 'a', ZP_PATH_MAX);
    lpath[0] = '/';
    ck_assert_int_eq(zp_config_load(cfg, lpath, lerr, sizeof(lerr)), ZEPS_EINVAL);
    ck_assert_msg(strstr(lerr, ": path is longer than 1023 bytes") != NULL, "%s", lerr);
    lpath[ZP_PATH_MAX - 1] = '\0';
    ck_assert_int_eq(zp_config_load(cfg, lpath, lerr, sizeof(lerr)), ZEPS_EIO);
    free(cfg);
}
END_TEST

/* A file past the first 4 KiB read is read whole; one past 16 MiB is
 * refused before it is parsed. */
START_TEST(load_large)
{
    char path[64], err[512];
    size_t pad = 64 << 10, big = (16u << 20) + 1;
    char *text = malloc(big + 1);
    ck_assert_ptr_nonnull(text);
    memset(text, '#', pad);
    text[pad - 1] = '\n';
    strcpy(text + pad, HEAD TAIL);
    write_temp(path, sizeof(path), text);
    zp_config *cfg = new_cfg();
    int rc = zp_config_load(cfg, path, err, sizeof(err));
    ck_assert_msg(rc == ZEPS_OK, "%s", err);
    ck_assert_int_eq(cfg->num_workers, 2); /* past the padding, read whole */
    ck_assert_int_eq(unlink(path), 0);

    memset(text, '#', big);
    text[big] = '\0';
    write_temp(path, sizeof(path), text);
    rc = zp_config_load(cfg, path, err, sizeof(err));
    ck_assert_int_eq(rc, ZEPS_ECONFIG);
    ck_assert_msg(strstr(err, "larger than 16 MiB") != NULL, "%s", err);
    ck_assert_int_eq(unlink(path), 0);
    free(text);
    free(cfg);
}
END_TEST

START_TEST(load_unreadable)
{
    char path[64], err[512];
    write_temp(path, sizeof(path), HEAD TAIL);
    ck_assert_int_eq(chmod(path, 0), 0);
    zp_config *cfg = new_cfg();
    int rc = zp_config_load(cfg, path, err, sizeof(err));
    if (geteuid() != 0) { /* root reads anything */
        ck_assert_int_eq(rc, ZEPS_EIO);
        ck_assert_ptr_nonnull(strstr(err, path));
        ck_assert_ptr_nonnull(strstr(err, strerror(EACCES)));
    }
    ck_assert_int_eq(unlink(path), 0);

    /* Binary junk with a NUL byte is refused, not half-read. */
    zt_scratch_path(path, sizeof(path), "config-XXXXXX");
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, "cluster\0= 1;\n", 13), 13);
    ck_assert_int_eq(close(fd), 0);
    rc = zp_config_load(cfg, path, err, sizeof(err));
    ck_assert_int_eq(rc, ZEPS_ECONFIG);
    ck_assert_ptr_nonnull(strstr(err, path));
    ck_assert_int_eq(unlink(path), 0);
    free(cfg);
}
END_TEST

START_TEST(message_truncated)
{
    zp_config *cfg = new_cfg();
    char err[16];
    memset(err, 'x', sizeof(err));
    int rc =
        zp_config_parse(cfg, "cluster = {};\n", "a-rather-long-file-name.conf", err, sizeof(err));
    ck_assert_int_eq(rc, ZEPS_ECONFIG);
    ck_assert_uint_eq(strlen(err), sizeof(err) - 1);
    ck_assert(strncmp(err, "a-rather-long-f", 15) == 0);

    /* No buffer at all is fine too, whatever length comes with it. */
    ck_assert_int_eq(zp_config_parse(cfg, "junk", "x", NULL, 0), ZEPS_ECONFIG);
    ck_assert_int_eq(zp_config_parse(cfg, "junk", "x", NULL, 16), ZEPS_ECONFIG);
    ck_assert_int_eq(zp_config_load(cfg, "/nonexistent/zeps.conf", NULL, 0), ZEPS_EIO);
    ck_assert_int_eq(zp_config_load(cfg, "/nonexistent/zeps.conf", NULL, 16), ZEPS_EIO);
    char path[64];
    write_temp(path, sizeof(path), HEAD TAIL);
    ck_assert_int_eq(zp_config_load(cfg, path, NULL, 16), ZEPS_OK);
    ck_assert_int_eq(unlink(path), 0);
    ck_assert_int_eq(zp_config_parse(NULL, "", "x", err, sizeof(err)), ZEPS_EINVAL);
    ck_assert_int_eq(zp_config_parse(cfg, NULL, "x", err, sizeof(err)), ZEPS_EINVAL);
    free(cfg);
}
END_TEST

START_TEST(enum_names)
{
    ck_assert_str_eq(zp_config_keys_weight_fn_name(ZP_WEIGHT_NONE), "none");
    ck_assert_str_eq(zp_config_keys_weight_fn_name(ZP_WEIGHT_INVERSE), "inverse");
    ck_assert_str_eq(zp_config_keys_weight_fn_name(ZP_WEIGHT_EXP), "exp");
    ck_assert_str_eq(zp_config_keys_weight_fn_name(ZP_WEIGHT_LR_OVER_TAU), "lr_over_tau");
    ck_assert_str_eq(zp_config_keys_weight_fn_name((zp_weight_fn)4), "unknown");
    ck_assert_str_eq(zp_config_keys_weight_fn_name((zp_weight_fn)-1), "unknown");
    ck_assert_int_eq(zp_config_keys_weight_fn_from_name("none"), ZP_WEIGHT_NONE);
    ck_assert_int_eq(zp_config_keys_weight_fn_from_name("inverse"), ZP_WEIGHT_INVERSE);
    ck_assert_int_eq(zp_config_keys_weight_fn_from_name("exp"), ZP_WEIGHT_EXP);
    ck_assert_int_eq(zp_config_keys_weight_fn_from_name("lr_over_tau"), ZP_WEIGHT_LR_OVER_TAU);
    ck_assert_int_eq(zp_config_keys_weight_fn_from_name("sqrt"), -1);
    ck_assert_int_eq(zp_config_keys_weight_fn_from_name(NULL), -1);

    ck_assert_str_eq(zp_config_keys_delay_dist_name(ZP_DELAY_FIXED), "fixed");
    ck_assert_str_eq(zp_config_keys_delay_dist_name(ZP_DELAY_UNIFORM), "uniform");
    ck_assert_str_eq(zp_config_keys_delay_dist_name(ZP_DELAY_LOGNORMAL), "lognormal");
    ck_assert_str_eq(zp_config_keys_delay_dist_name((zp_delay_dist)3), "unknown");
    ck_assert_int_eq(zp_config_keys_delay_dist_from_name("fixed"), ZP_DELAY_FIXED);
    ck_assert_int_eq(zp_config_keys_delay_dist_from_name("uniform"), ZP_DELAY_UNIFORM);
    ck_assert_int_eq(zp_config_keys_delay_dist_from_name("lognormal"), ZP_DELAY_LOGNORMAL);
    ck_assert_int_eq(zp_config_keys_delay_dist_from_name("normal"), -1);
    ck_assert_int_eq(zp_config_keys_delay_dist_from_name(""), -1);
    ck_assert_int_eq(zp_config_keys_delay_dist_from_name(NULL), -1);
}
END_TEST

static Suite *config_suite(void)
{
    Suite *s = suite_create("config");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, good_file_all_values);
    tcase_add_test(tc, defaults_applied);
    tcase_add_test(tc, numbers_flexible);
    tcase_add_test(tc, syntax_error);
    tcase_add_test(tc, slot_map_key);
    tcase_add_test(tc, unknown_key);
    tcase_add_test(tc, wrong_type);
    tcase_add_test(tc, missing_required);
    tcase_add_test(tc, out_of_range);
    tcase_add_test(tc, bad_endpoint);
    tcase_add_test(tc, bad_names);
    tcase_add_test(tc, consistency_modes);
    tcase_add_test(tc, enum_names);
    tcase_add_test(tc, load_file);
    tcase_add_test(tc, load_large);
    tcase_add_test(tc, load_unreadable);
    tcase_add_test(tc, message_truncated);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return zt_run_suite(config_suite());
}
