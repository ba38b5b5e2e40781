/*
 * test_config.c - the cluster file reader (common/config.c).
 *
 * Most cases go through zp_config_parse with the name "cluster.conf" so each
 * message can be checked for the file name, the line and the full key path;
 * zp_config_load is exercised with a temporary file under /tmp that every
 * test removes again. Line numbers in the expected messages count from the
 * first line of each test's text.
 */
#include "check_main.h"
#include "config.h"
#include "zeps_errors.h"

#include <check.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The smallest valid file: lines 1-3, then whatever a test adds, then "};". */
#define HEAD                                                                                       \
    "cluster = {\n"                                                                                \
    "  servers = [\"tcp://127.0.0.1:17000\"];\n"                                                   \
    "  workers = 2;\n"
#define TAIL "};\n"

static zp_config *new_cfg(void)
{
    zp_config *cfg = malloc(sizeof(*cfg));
    ck_assert_ptr_nonnull(cfg);
    return cfg;
}

/* Parse `text` as "cluster.conf" and check that it fails with `code` and a
 * message holding every one of the NULL-terminated substrings. */
static void expect_error(const char *text, int code, ...)
{
    zp_config *cfg = new_cfg();
    char err[512];
    memset(err, 'x', sizeof(err));
    int rc = zp_config_parse(cfg, text, "cluster.conf", err, sizeof(err));
    free(cfg);
    ck_assert_msg(rc == code, "expected %s, got %s (%s) for:\n%s", zeps_errname(code),
                  zeps_errname(rc), err, text);
    ck_assert_msg(memchr(err, '\0', sizeof(err)) != NULL, "message not terminated");
    va_list ap;
    va_start(ap, code);
    for (const char *want = va_arg(ap, const char *); want != NULL; want = va_arg(ap, const char *))
        ck_assert_msg(strstr(err, want) != NULL, "message \"%s\" lacks \"%s\"", err, want);
    va_end(ap);
}

/* Parse `text`, which must be valid, into a new config the caller frees. */
static zp_config *parse_ok(const char *text)
{
    zp_config *cfg = new_cfg();
    char err[512];
    int rc = zp_config_parse(cfg, text, "cluster.conf", err, sizeof(err));
    ck_assert_msg(rc == ZEPS_OK, "parse failed: %s (%s)", zeps_errname(rc), err);
    ck_assert_str_eq(err, "");
    return cfg;
}

/* Write `text` to a new file under /tmp; the name goes into path. */
static void write_temp(char *path, size_t len, const char *text)
{
    snprintf(path, len, "/tmp/zeps_test_config_XXXXXX");
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    size_t n = strlen(text);
    ck_assert_int_eq(write(fd, text, n), (ssize_t)n);
    ck_assert_int_eq(close(fd), 0);
}

START_TEST(good_file_all_values)
{
    const char *text = "# a full cluster file\n"
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
    zp_config *cfg = parse_ok(text);
    ck_assert_str_eq(cfg->path, "cluster.conf");
    ck_assert_int_eq(cfg->num_shards, 3);
    ck_assert_str_eq(cfg->servers[0], "tcp://127.0.0.1:17000");
    ck_assert_str_eq(cfg->servers[1], "ipc:///tmp/zeps1");
    ck_assert_str_eq(cfg->servers[2], "inproc://shard2");
    ck_assert_str_eq(cfg->binds[0], "tcp://*:17000");
    ck_assert_str_eq(cfg->binds[2], "inproc://shard2");
    ck_assert_int_eq(cfg->num_workers, 4);
    ck_assert_int_eq(cfg->consistency, ZP_CONSISTENCY_WEIGHTED);
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
    ck_assert_int_eq(cfg->consistency, ZP_CONSISTENCY_BSP);
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

    /* zp_config_defaults on its own: no servers, no workers, no path. */
    zp_config_defaults(cfg);
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
    expect_error(HEAD "  consistency = \"eventual\";\n" TAIL, ZEPS_ECONFIG,
                 "cluster.conf:4: 'cluster.consistency' = \"eventual\" is not one of "
                 "bsp, async, ssp, weighted",
                 NULL);
    expect_error(HEAD "  consistency = \"SSP\";\n" TAIL, ZEPS_ECONFIG,
                 "cluster.conf:4: 'cluster.consistency' = \"SSP\"", NULL);
    const char *modes[] = {"bsp", "async", "ssp", "weighted"};
    for (int i = 0; i < 4; i++) {
        char text[256];
        snprintf(text, sizeof(text), HEAD "  consistency = \"%s\";\n  staleness = 2;\n" TAIL,
                 modes[i]);
        zp_config *cfg = parse_ok(text);
        ck_assert_int_eq(cfg->consistency, i);
        ck_assert_int_eq(cfg->staleness, 2);
        free(cfg);
    }

    ck_assert_str_eq(zp_consistency_name(ZP_CONSISTENCY_BSP), "bsp");
    ck_assert_str_eq(zp_consistency_name(ZP_CONSISTENCY_ASYNC), "async");
    ck_assert_str_eq(zp_consistency_name(ZP_CONSISTENCY_SSP), "ssp");
    ck_assert_str_eq(zp_consistency_name(ZP_CONSISTENCY_WEIGHTED), "weighted");
    ck_assert_str_eq(zp_consistency_name((zp_consistency)42), "unknown");
    ck_assert_int_eq(zp_consistency_from_name("bsp"), ZP_CONSISTENCY_BSP);
    ck_assert_int_eq(zp_consistency_from_name("async"), ZP_CONSISTENCY_ASYNC);
    ck_assert_int_eq(zp_consistency_from_name("ssp"), ZP_CONSISTENCY_SSP);
    ck_assert_int_eq(zp_consistency_from_name("weighted"), ZP_CONSISTENCY_WEIGHTED);
    ck_assert_int_eq(zp_consistency_from_name("BSP"), -1);
    ck_assert_int_eq(zp_consistency_from_name(""), -1);
    ck_assert_int_eq(zp_consistency_from_name(NULL), -1);
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
    snprintf(path, sizeof(path), "/tmp/zeps_test_config_XXXXXX");
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

    /* No buffer at all is fine too. */
    ck_assert_int_eq(zp_config_parse(cfg, "junk", "x", NULL, 0), ZEPS_ECONFIG);
    ck_assert_int_eq(zp_config_load(cfg, "/nonexistent/zeps.conf", NULL, 0), ZEPS_EIO);
    ck_assert_int_eq(zp_config_parse(NULL, "", "x", err, sizeof(err)), ZEPS_EINVAL);
    ck_assert_int_eq(zp_config_parse(cfg, NULL, "x", err, sizeof(err)), ZEPS_EINVAL);
    free(cfg);
}
END_TEST

START_TEST(enum_names)
{
    ck_assert_str_eq(zp_weight_fn_name(ZP_WEIGHT_NONE), "none");
    ck_assert_str_eq(zp_weight_fn_name(ZP_WEIGHT_INVERSE), "inverse");
    ck_assert_str_eq(zp_weight_fn_name(ZP_WEIGHT_EXP), "exp");
    ck_assert_str_eq(zp_weight_fn_name(ZP_WEIGHT_LR_OVER_TAU), "lr_over_tau");
    ck_assert_str_eq(zp_weight_fn_name((zp_weight_fn)4), "unknown");
    ck_assert_str_eq(zp_weight_fn_name((zp_weight_fn)-1), "unknown");
    ck_assert_int_eq(zp_weight_fn_from_name("none"), ZP_WEIGHT_NONE);
    ck_assert_int_eq(zp_weight_fn_from_name("inverse"), ZP_WEIGHT_INVERSE);
    ck_assert_int_eq(zp_weight_fn_from_name("exp"), ZP_WEIGHT_EXP);
    ck_assert_int_eq(zp_weight_fn_from_name("lr_over_tau"), ZP_WEIGHT_LR_OVER_TAU);
    ck_assert_int_eq(zp_weight_fn_from_name("sqrt"), -1);
    ck_assert_int_eq(zp_weight_fn_from_name(NULL), -1);

    ck_assert_str_eq(zp_delay_dist_name(ZP_DELAY_FIXED), "fixed");
    ck_assert_str_eq(zp_delay_dist_name(ZP_DELAY_UNIFORM), "uniform");
    ck_assert_str_eq(zp_delay_dist_name(ZP_DELAY_LOGNORMAL), "lognormal");
    ck_assert_str_eq(zp_delay_dist_name((zp_delay_dist)3), "unknown");
    ck_assert_int_eq(zp_delay_dist_from_name("fixed"), ZP_DELAY_FIXED);
    ck_assert_int_eq(zp_delay_dist_from_name("uniform"), ZP_DELAY_UNIFORM);
    ck_assert_int_eq(zp_delay_dist_from_name("lognormal"), ZP_DELAY_LOGNORMAL);
    ck_assert_int_eq(zp_delay_dist_from_name("normal"), -1);
    ck_assert_int_eq(zp_delay_dist_from_name(""), -1);
    ck_assert_int_eq(zp_delay_dist_from_name(NULL), -1);
}
END_TEST

/* cluster.backup_workers, late_pushes, weighting = { ... }, trace_dir. */
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
    ck_assert_double_eq(cfg->lost_worker_timeout_s, 0.0);
    ck_assert_double_eq(cfg->snapshot_mtbf_s, 0.0);
    ck_assert_int_eq(cfg->snapshot_nice, 10);
    free(cfg);
    expect_error(HEAD "  on_lost_worker = \"retry\";\n" TAIL, ZEPS_ECONFIG, "cluster.conf:4",
                 "on_lost_worker", "retry", NULL);
    expect_error(HEAD "  lost_worker_timeout_s = -1;\n" TAIL, ZEPS_ECONFIG, "cluster.conf:4",
                 "lost_worker_timeout_s", "out of range", NULL);
    expect_error(HEAD "  snapshot_nice = 20;\n" TAIL, ZEPS_ECONFIG, "cluster.conf:4", "snapshot_nice",
                 "out of range", NULL);
    expect_error(HEAD "  snapshot_mtbf_s = \"1h\";\n" TAIL, ZEPS_ECONFIG, "cluster.conf:4",
                 "snapshot_mtbf_s", NULL);
}
END_TEST

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

    /* The weighting group: names, ranges, types, unknown keys. */
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

    /* backup_workers below workers (2 here), whichever order the keys come in. */
    expect_error(HEAD "  backup_workers = 2;\n" TAIL, ZEPS_ECONFIG,
                 "cluster.conf:4: 'cluster.backup_workers' = 2 is out of range",
                 "backup_workers < workers = 2", NULL);
    expect_error("cluster = {\n  backup_workers = 5;\n  servers = [\"tcp://h:1\"];\n"
                 "  workers = 3;\n};\n",
                 ZEPS_ECONFIG, "cluster.conf:2: 'cluster.backup_workers' = 5", "workers = 3", NULL);
    expect_error(HEAD "  backup_workers = -1;\n" TAIL, ZEPS_ECONFIG,
                 "cluster.conf:4: 'cluster.backup_workers' = -1 is out of range", NULL);
    cfg = parse_ok(HEAD "  backup_workers = 1;\n" TAIL);
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

    /* slow_ranks: in range for workers = 2, distinct, integers, at most 64. */
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
    cfg = parse_ok(text);
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

static Suite *config_suite(void)
{
    Suite *s = suite_create("config");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, good_file_all_values);
    tcase_add_test(tc, defaults_applied);
    tcase_add_test(tc, numbers_flexible);
    tcase_add_test(tc, syntax_error);
    tcase_add_test(tc, unknown_key);
    tcase_add_test(tc, wrong_type);
    tcase_add_test(tc, missing_required);
    tcase_add_test(tc, out_of_range);
    tcase_add_test(tc, bad_endpoint);
    tcase_add_test(tc, bad_names);
    tcase_add_test(tc, consistency_modes);
    tcase_add_test(tc, enum_names);
    tcase_add_test(tc, staleness_keys);
    tcase_add_test(tc, delay_keys);
    tcase_add_test(tc, ctr_keys);
    tcase_add_test(tc, curve_keys);
    tcase_add_test(tc, load_file);
    tcase_add_test(tc, load_unreadable);
    tcase_add_test(tc, message_truncated);
    tcase_add_test(tc, fault_keys);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return zt_run_suite(config_suite());
}
