/*
 * test_daemon.c - a daemon's identity (shard index, worker rank) from its flag
 * or the engine's environment: each source, the order of precedence, and bad
 * values refused with a message that names the variable and its value.
 *
 * The start-up lines of zeps-server: one replica names the process
 * server[N] and says nothing of replicas; two name it server[N.R] and say
 * which replica it is and from where.
 *
 * Check forks every test, so setenv/unsetenv here never leak into another
 * test; each test starts from a clean set of the variables read.
 */
#include <check.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "daemon.h"
#include "exitcode.h"
#include "check_main.h"
#include "identity.h"
#include "scratch.h"
#include "zeps_errors.h"

static const char *const vars[] = {
    "ZEPS_SHARD",    "ZEPS_RANK", "JOB_COMPLETION_INDEX", "SLURM_PROCID", "SLURM_NODEID",
    "SLURM_LOCALID", NULL};

static void clean_env(void)
{
    for (int i = 0; vars[i]; i++)
        unsetenv(vars[i]);
}

/* Resolve and expect success; returns the index. */
static int ok(zp_identity_kind k, const char *flag, const char *host, const char *want_source)
{
    zp_identity id;
    char err[512] = "";
    int rc = zp_identity_resolve(k, flag, host, 256, &id, err, sizeof(err));
    ck_assert_msg(rc == 0, "unexpected error: %s", err);
    if (want_source)
        ck_assert_msg(strstr(id.source, want_source), "source '%s' lacks '%s'", id.source,
                      want_source);
    return id.index;
}

/* Resolve and expect ZEPS_ECONFIG with `want` in the message. */
static void bad(zp_identity_kind k, const char *flag, const char *host, const char *want)
{
    zp_identity id = {.index = 77};
    char err[512] = "";
    int rc = zp_identity_resolve(k, flag, host, 256, &id, err, sizeof(err));
    ck_assert_int_eq(rc, ZEPS_ECONFIG);
    ck_assert_msg(strstr(err, want), "message '%s' lacks '%s'", err, want);
    ck_assert_int_eq(id.index, 77); /* untouched on error */
}

START_TEST(test_each_source)
{
    clean_env();
    ck_assert_int_eq(ok(ZP_IDENTITY_SHARD, "2", NULL, "--shard=2"), 2);
    setenv("ZEPS_SHARD", "5", 1);
    ck_assert_int_eq(ok(ZP_IDENTITY_SHARD, NULL, NULL, "$ZEPS_SHARD"), 5);
    clean_env();
    setenv("ZEPS_RANK", "9", 1);
    ck_assert_int_eq(ok(ZP_IDENTITY_RANK, NULL, NULL, "ZEPS_RANK=9"), 9);
    clean_env();
    setenv("JOB_COMPLETION_INDEX", "4", 1);
    ck_assert_int_eq(ok(ZP_IDENTITY_RANK, NULL, NULL, "$JOB_COMPLETION_INDEX=4"), 4);
    clean_env();
    setenv("SLURM_PROCID", "3", 1);
    ck_assert_int_eq(ok(ZP_IDENTITY_SHARD, NULL, NULL, "$SLURM_PROCID=3"), 3);
    ck_assert_int_eq(ok(ZP_IDENTITY_RANK, NULL, NULL, "$SLURM_PROCID=3"), 3);
    clean_env();
    /* The StatefulSet ordinal, only when asked for. */
    ck_assert_int_eq(ok(ZP_IDENTITY_SHARD, "auto", "zeps-server-3", "host name zeps-server-3"), 3);
    ck_assert_int_eq(ok(ZP_IDENTITY_SHARD, "hostname", "zeps-server-12.zeps.ml.svc", NULL), 12);
    /* every digit counts as one (9 too); more than nine digits is no ordinal */
    ck_assert_int_eq(ok(ZP_IDENTITY_SHARD, "hostname", "zeps-server-9", NULL), 9);
    ck_assert_int_eq(ok(ZP_IDENTITY_SHARD, "hostname", "zeps-server-199", NULL), 199);
    bad(ZP_IDENTITY_SHARD, "hostname", "zeps-server-0000000001", "does not end in an ordinal");
    setenv("ZEPS_SHARD", "auto", 1);
    ck_assert_int_eq(ok(ZP_IDENTITY_SHARD, NULL, "zeps-server-0", "host name"), 0);
    clean_env();
    /* env:NAME picks any variable, e.g. one daemon per Slurm node. */
    setenv("SLURM_NODEID", "1", 1);
    setenv("SLURM_LOCALID", "0", 1);
    ck_assert_int_eq(ok(ZP_IDENTITY_SHARD, "env:SLURM_NODEID", NULL, "$SLURM_NODEID=1"), 1);
    setenv("ZEPS_RANK", "env:SLURM_LOCALID", 1);
    ck_assert_int_eq(ok(ZP_IDENTITY_RANK, NULL, NULL, "$SLURM_LOCALID=0"), 0);
}
END_TEST

START_TEST(test_precedence)
{
    clean_env();
    setenv("ZEPS_SHARD", "1", 1);
    setenv("JOB_COMPLETION_INDEX", "2", 1);
    setenv("SLURM_PROCID", "3", 1);
    /* flag > ZEPS_* > JOB_COMPLETION_INDEX > SLURM_PROCID > (auto) host name */
    ck_assert_int_eq(ok(ZP_IDENTITY_SHARD, "0", "zeps-server-4", NULL), 0);
    ck_assert_int_eq(ok(ZP_IDENTITY_SHARD, NULL, "zeps-server-4", NULL), 1);
    unsetenv("ZEPS_SHARD");
    ck_assert_int_eq(ok(ZP_IDENTITY_SHARD, NULL, "zeps-server-4", NULL), 2);
    ck_assert_int_eq(ok(ZP_IDENTITY_SHARD, "auto", "zeps-server-4", NULL), 2);
    unsetenv("JOB_COMPLETION_INDEX");
    ck_assert_int_eq(ok(ZP_IDENTITY_SHARD, NULL, "zeps-server-4", NULL), 3);
    ck_assert_int_eq(ok(ZP_IDENTITY_SHARD, "auto", "zeps-server-4", NULL), 3);
    unsetenv("SLURM_PROCID");
    ck_assert_int_eq(ok(ZP_IDENTITY_SHARD, "auto", "zeps-server-4", NULL), 4);
    /* "hostname" skips the engine variables. */
    setenv("SLURM_PROCID", "3", 1);
    ck_assert_int_eq(ok(ZP_IDENTITY_SHARD, "hostname", "zeps-server-4", NULL), 4);
    /* ZEPS_SHARD is not read by a worker, nor ZEPS_RANK by a server. */
    clean_env();
    setenv("ZEPS_SHARD", "6", 1);
    setenv("ZEPS_RANK", "7", 1);
    ck_assert_int_eq(ok(ZP_IDENTITY_RANK, NULL, NULL, NULL), 7);
    ck_assert_int_eq(ok(ZP_IDENTITY_SHARD, NULL, NULL, NULL), 6);
    /* A set but empty variable counts as unset. */
    clean_env();
    setenv("ZEPS_RANK", "", 1);
    setenv("JOB_COMPLETION_INDEX", "", 1);
    setenv("SLURM_PROCID", "8", 1);
    ck_assert_int_eq(ok(ZP_IDENTITY_RANK, NULL, NULL, "SLURM_PROCID"), 8);
}
END_TEST

START_TEST(test_bad_values)
{
    clean_env();
    setenv("SLURM_PROCID", "x", 1);
    bad(ZP_IDENTITY_RANK, NULL, NULL, "SLURM_PROCID='x' is not a number");
    setenv("SLURM_PROCID", "3x", 1);
    bad(ZP_IDENTITY_RANK, NULL, NULL, "SLURM_PROCID='3x' is not a number");
    setenv("SLURM_PROCID", "-1", 1);
    bad(ZP_IDENTITY_SHARD, NULL, NULL, "SLURM_PROCID='-1' is out of range (0..255)");
    setenv("SLURM_PROCID", "99999999999999999999", 1);
    bad(ZP_IDENTITY_SHARD, NULL, NULL, "is not a number");
    clean_env();
    setenv("JOB_COMPLETION_INDEX", "256", 1);
    bad(ZP_IDENTITY_SHARD, NULL, NULL, "JOB_COMPLETION_INDEX='256' is out of range (0..255)");
    /* A bad engine variable is an error, not a reason to look further. */
    setenv("JOB_COMPLETION_INDEX", "one", 1);
    setenv("SLURM_PROCID", "1", 1);
    bad(ZP_IDENTITY_RANK, "auto", "zeps-worker-2", "JOB_COMPLETION_INDEX='one' is not a number");
    clean_env();
    bad(ZP_IDENTITY_SHARD, "two", NULL,
        "--shard='two' is not a number (want N, auto, hostname or env:NAME)");
    setenv("ZEPS_RANK", "-3", 1);
    bad(ZP_IDENTITY_RANK, NULL, NULL, "ZEPS_RANK='-3' is out of range");
    clean_env();
    bad(ZP_IDENTITY_SHARD, "", NULL, "--shard='' is not a number");
    bad(ZP_IDENTITY_SHARD, "auto", "zeps-server",
        "host name 'zeps-server' does not end in an ordinal");
    bad(ZP_IDENTITY_SHARD, "auto", "node7", "host name 'node7' does not end in an ordinal");
    bad(ZP_IDENTITY_SHARD, "hostname", "zeps-server-3a", "does not end in an ordinal");
    bad(ZP_IDENTITY_SHARD, "hostname", "zeps-server-300", "ordinal 300 is out of range (0..255)");
    bad(ZP_IDENTITY_SHARD, "env:SLURM_NODEID", NULL,
        "--shard='env:SLURM_NODEID', but SLURM_NODEID is not set");
    bad(ZP_IDENTITY_SHARD, "env:", NULL, "names no variable");
    setenv("SLURM_LOCALID", "z", 1);
    bad(ZP_IDENTITY_RANK, "env:SLURM_LOCALID", NULL, "SLURM_LOCALID='z' is not a number");
    /* Nothing at all: name every way to give one. A host name alone is
     * never used unless asked for. */
    bad(ZP_IDENTITY_RANK, NULL, "zeps-worker-1",
        "no worker rank: give --rank N (or --rank auto), or set ZEPS_RANK, "
        "JOB_COMPLETION_INDEX or SLURM_PROCID");
}
END_TEST

/* The daemons' command line: the flag reaches the resolver, errors exit 2. */
START_TEST(test_daemon_parse)
{
    clean_env();
    zp_daemon_args a;
    char *argv1[] = {"zeps-server", "--config", "c.conf", "--shard", "1", NULL};
    optind = 0;
    ck_assert_int_eq(zp_daemon_parse(ZP_DAEMON_SERVER, 5, argv1, &a), -1);
    ck_assert_int_eq(a.index, 1);
    ck_assert_str_eq(a.config, "c.conf");
    setenv("SLURM_PROCID", "2", 1);
    char *argv2[] = {"zeps-worker", "-c", "c.conf", NULL};
    optind = 0;
    ck_assert_int_eq(zp_daemon_parse(ZP_DAEMON_WORKER, 3, argv2, &a), -1);
    ck_assert_int_eq(a.index, 2);
    ck_assert_msg(strstr(a.index_source, "SLURM_PROCID"), "%s", a.index_source);
    setenv("SLURM_PROCID", "x", 1);
    optind = 0;
    ck_assert_int_eq(zp_daemon_parse(ZP_DAEMON_WORKER, 3, argv2, &a), 2);
}
END_TEST

/* zp_daemon_load of zeps-server --shard 0 [--replica R] on the cluster file
 * `text` (written in `dir`); what it logged, in `out`. */
static int load_logged(const char *dir, const char *text, const char *replica, char *out,
                       size_t len)
{
    char conf[320], log[320];
    snprintf(conf, sizeof(conf), "%s/c.conf", dir);
    snprintf(log, sizeof(log), "%s/stderr", dir);
    FILE *f = fopen(conf, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
    char *argv[8] = {"zeps-server", "--config", conf, "--shard", "0", NULL};
    int argc = 5;
    if (replica) {
        argv[argc++] = "--replica";
        argv[argc++] = (char *)replica;
        argv[argc] = NULL;
    }
    zp_daemon_args a;
    optind = 0;
    ck_assert_int_eq(zp_daemon_parse(ZP_DAEMON_SERVER, argc, argv, &a), -1);
    zp_config *cfg = malloc(sizeof(*cfg));
    fflush(stderr);
    int saved = dup(2), fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ck_assert(saved >= 0 && fd >= 0);
    dup2(fd, 2);
    close(fd);
    int rc = zp_daemon_load(ZP_DAEMON_SERVER, &a, cfg);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    free(cfg);
    f = fopen(log, "r");
    ck_assert_ptr_nonnull(f);
    size_t n = fread(out, 1, len - 1, f);
    out[n] = '\0';
    fclose(f);
    return rc;
}

/* The start-up lines: a replica's number only where there are replicas. */
START_TEST(test_start_lines)
{
    clean_env();
    unsetenv("ZEPS_REPLICA");
    char dir[256], log[4096];
    ck_assert_int_eq(zt_scratch_dir(dir, sizeof(dir), "daemon"), 0);
    ck_assert_int_eq(load_logged(dir,
                                 "cluster = {\n  servers = [\"tcp://127.0.0.1:17000\"];\n"
                                 "  workers = 2;\n};\n",
                                 NULL, log, sizeof(log)),
                     -1);
    ck_assert_msg(strstr(log, " server[0] ") && strstr(log, "shard index 0 of 1 (from --shard=0)"),
                  "one replica logged:\n%s", log);
    ck_assert_msg(!strstr(log, "replica") && !strstr(log, "server[0."),
                  "one replica, yet its start-up names a replica:\n%s", log);
    ck_assert_int_eq(load_logged(dir,
                                 "cluster = {\n  servers = ( [\"tcp://127.0.0.1:17000\", "
                                 "\"tcp://127.0.0.1:17001\"] );\n  workers = 1;\n  replicas = 2;\n"
                                 "  coordination = { zookeeper = \"10.0.0.1:2181\"; };\n};\n",
                                 "1", log, sizeof(log)),
                     -1);
    ck_assert_msg(strstr(log, " server[0.1] ") && strstr(log, "replica 1 of 2 (from --replica"),
                  "replica 1 of 2 logged:\n%s", log);
}
END_TEST

/* zp_daemon_load of zeps-server --shard `shard` --join `join` [--bind
 * `bind`] on a cluster file of two servers: its status, the endpoint it
 * joins at in `out`, and (bound not NULL) where it binds. */
static int load_join_bind(const char *dir, const char *shard, const char *join, const char *bind,
                          char *out, size_t len, char *bound)
{
    char conf[320];
    snprintf(conf, sizeof(conf), "%s/join.conf", dir);
    FILE *f = fopen(conf, "w");
    ck_assert_ptr_nonnull(f);
    fputs("cluster = {\n  servers = [\"tcp://127.0.0.1:17000\", \"tcp://127.0.0.1:17001\"];\n"
          "  workers = 1;\n};\n",
          f);
    fclose(f);
    char *argv[12] = {"zeps-server", "--config",   conf,          "--shard", (char *)shard,
                      "--join",      (char *)join, "--log-level", "error",   NULL};
    int argc = 9;
    if (bind) {
        argv[argc++] = "--bind";
        argv[argc++] = (char *)bind;
        argv[argc] = NULL;
    }
    zp_daemon_args a;
    optind = 0;
    ck_assert_int_eq(zp_daemon_parse(ZP_DAEMON_SERVER, argc, argv, &a), -1);
    zp_config *cfg = malloc(sizeof(*cfg));
    int rc = zp_daemon_load(ZP_DAEMON_SERVER, &a, cfg);
    snprintf(out, len, "%s", cfg->join);
    if (bound)
        snprintf(bound, len, "%s", rc == -1 ? zp_config_bind(cfg, a.index, 0) : "");
    free(cfg);
    return rc;
}

static int load_join(const char *dir, const char *shard, const char *join, char *out, size_t len)
{
    return load_join_bind(dir, shard, join, NULL, out, len, NULL);
}

/* --join with %d: one command line for every pod of a StatefulSet. A shard
 * of the file's two starts as itself, one past them joins at the pattern
 * with its index put in; a plain endpoint for a shard of the file is
 * refused, as is one that does not fit. */
START_TEST(test_join_pattern)
{
    clean_env();
    char dir[256], ep[512];
    ck_assert_int_eq(zt_scratch_dir(dir, sizeof(dir), "daemon-join"), 0);
    ck_assert_int_eq(load_join(dir, "1", "tcp://zeps-server-%d.zeps:5555", ep, sizeof(ep)), -1);
    ck_assert_str_eq(ep, "");
    ck_assert_int_eq(load_join(dir, "2", "tcp://zeps-server-%d.zeps:5555", ep, sizeof(ep)), -1);
    ck_assert_str_eq(ep, "tcp://zeps-server-2.zeps:5555");
    ck_assert_int_eq(load_join(dir, "12", "%d", ep, sizeof(ep)), -1);
    ck_assert_str_eq(ep, "12");
    ck_assert_int_eq(load_join(dir, "3", "ipc:///tmp/j", ep, sizeof(ep)), -1);
    ck_assert_str_eq(ep, "ipc:///tmp/j");
    ck_assert_int_eq(load_join(dir, "1", "ipc:///tmp/j", ep, sizeof(ep)), ZP_EXIT_SETUP);
    char longer[300];
    memset(longer, 'x', sizeof(longer) - 1);
    longer[sizeof(longer) - 1] = '\0';
    memcpy(longer, "tcp://%d", 8);
    ck_assert_int_eq(load_join(dir, "2", longer, ep, sizeof(ep)), ZP_EXIT_SETUP);
    /* --bind: where the joining shard binds; ignored by a shard of the file */
    char bound[512];
    ck_assert_int_eq(load_join_bind(dir, "2", "tcp://zeps-server-%d.zeps:5555", "tcp://*:5555", ep,
                                    sizeof(ep), bound),
                     -1);
    ck_assert_str_eq(bound, "tcp://*:5555");
    ck_assert_int_eq(load_join_bind(dir, "2", "ipc:///tmp/j", NULL, ep, sizeof(ep), bound), -1);
    ck_assert_str_eq(bound, ""); /* its join endpoint */
    ck_assert_int_eq(
        load_join_bind(dir, "0", "tcp://h-%d:5555", "tcp://*:5555", ep, sizeof(ep), bound), -1);
    ck_assert_str_eq(bound, ""); /* the file's: binds[0] unset */
}
END_TEST

int main(void)
{
    Suite *s = suite_create("args");
    TCase *tc = tcase_create("identity");
    tcase_add_test(tc, test_each_source);
    tcase_add_test(tc, test_precedence);
    tcase_add_test(tc, test_bad_values);
    tcase_add_test(tc, test_daemon_parse);
    tcase_add_test(tc, test_start_lines);
    tcase_add_test(tc, test_join_pattern);
    suite_add_tcase(s, tc);
    return zt_run_suite(s);
}
