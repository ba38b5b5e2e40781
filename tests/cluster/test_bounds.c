/*
 * test_bounds.c - a real zeps-server against requests that would make it
 * hold more than it should: sequence numbers that jump past the duplicate
 * window, flag bits it does not know, clocks at the end of their range, a
 * flood of refused requests (the log stays a few lines, STATS counts the
 * rest), and tables, rows and bytes past the shard's limits (a sparse pull
 * of 10M new ids against a small row cap is refused and the server's RSS
 * stays bounded).
 *
 * Each case starts its own server (ipc endpoints in a private directory)
 * and talks to it over a raw DEALER socket as rank 1 while a library
 * client (rank 0) checks what the table holds.
 */
#include <check.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <zmq.h>

#include "check_main.h"
#include "harness.h"
#include "now.h"
#include "rawreq.h"
#include "wire.h"
#include "zeps.h"

#define LEN 16

static zt_cluster cl;
static zeps_client *good;
static uint32_t tid;
static void *zctx, *raw;
static const uint64_t inc = 0x5eed;

static void start(const char *extra)
{
    ck_assert_int_eq(zt_cluster_start(&cl, 1, 2, "async", extra, NULL), 0);
    good = zt_client(&cl, 0);
    ck_assert_ptr_nonnull(good);
    zeps_table_spec spec = {.name = "t", .length = LEN, .optimizer = "sgd", .lr = 1.0};
    ck_assert_int_eq(zeps_declare(good, &spec, &tid), 0);
    zctx = zmq_ctx_new();
    raw = zt_raw_socket(zctx, &cl, 0);
}

static void setup(void)
{
    start(NULL);
}

static void teardown(void)
{
    zmq_close(raw);
    zmq_ctx_term(zctx);
    zeps_client_destroy(&good);
    ck_assert_int_eq(zt_cluster_stop(&cl), 0);
}

static Zeps__Header header(Zeps__Op op, uint64_t seq)
{
    Zeps__Header h;
    zeps__header__init(&h);
    h.version = ZP_PROTOCOL_VERSION;
    h.op = op;
    h.req_id = seq;
    h.rank = 1;
    h.incarnation = inc;
    h.seq = seq;
    return h;
}

static Zeps__Header *hello(uint64_t incarnation, uint64_t seq)
{
    Zeps__Header h = header(ZEPS__OP__HELLO, seq);
    h.incarnation = incarnation;
    return zt_raw_req(raw, &h, NULL, 0);
}

/* A PUSH of ones to the whole table as rank 1 with `seq` and `flags`. */
static Zeps__Header *push(uint64_t incarnation, uint64_t seq, uint32_t flags)
{
    float ones[LEN];
    for (int i = 0; i < LEN; i++)
        ones[i] = 1.0f;
    Zeps__Header h = header(ZEPS__OP__PUSH, seq);
    h.incarnation = incarnation;
    h.table = tid;
    h.count = LEN;
    h.flags = flags;
    return zt_raw_req(raw, &h, ones, sizeof(ones));
}

/* The reply is an ack with exactly `flags`; frees it. */
static void expect_ack(Zeps__Header *rep, uint32_t flags)
{
    ck_assert_msg(rep->op == ZEPS__OP__PUSH || rep->op == ZEPS__OP__CLOCK ||
                      rep->op == ZEPS__OP__HELLO || rep->op == ZEPS__OP__BYE,
                  "op %d: %s", rep->op, rep->error_text ? rep->error_text : "");
    ck_assert_uint_eq(rep->flags, flags);
    zeps__header__free_unpacked(rep, NULL);
}

/* Every element of the table (sgd, lr 1, from 0) equals -pushes. */
static void expect_value(float pushes)
{
    float v[LEN];
    ck_assert_int_eq(zeps_pull(good, tid, v, 0, LEN, 0), 0);
    for (int i = 0; i < LEN; i++)
        ck_assert_msg(v[i] == -pushes, "v[%d] = %g, expected %g", i, v[i], -pushes);
}

/* Lines of server 0's log containing `needle`. */
static int log_count(const char *needle)
{
    char path[400], line[2048];
    snprintf(path, sizeof(path), "%s/server-0.log", cl.dir);
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    int n = 0;
    while (fgets(line, sizeof(line), f))
        n += strstr(line, needle) != NULL;
    fclose(f);
    return n;
}

static int file_has(const char *path, const char *needle)
{
    char line[4096];
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    int found = 0;
    while (!found && fgets(line, sizeof(line), f))
        found = strstr(line, needle) != NULL;
    fclose(f);
    return found;
}

static const Zeps__WorkerStats *worker_stats(const Zeps__ShardStats *st, uint32_t rank)
{
    for (size_t i = 0; i < st->n_workers; i++)
        if (st->workers[i]->rank == rank)
            return st->workers[i];
    ck_abort_msg("no stats for worker %u", rank);
    return NULL;
}

/* One PUSH with seq 2^64-1 used to make every later push of the rank a
 * "duplicate" (acknowledged, never applied). It is refused now, and the
 * rank's pushes go on being applied; 64 ahead is the largest step taken. */
START_TEST(test_seq_jump_refused)
{
    expect_ack(hello(inc, 1), 0);
    expect_ack(push(inc, 2, 0), 0);
    expect_value(1);
    zt_raw_expect_error(push(inc, UINT64_MAX, 0), ZEPS_EPROTO, "past the highest");
    zt_raw_expect_error(push(inc, 2 + 65, 0), ZEPS_EPROTO, "at most 64 ahead");
    expect_ack(push(inc, 3, 0), 0); /* not a duplicate: the window did not move */
    expect_value(2);
    expect_ack(push(inc, 3 + 64, 0), 0); /* exactly the largest step */
    expect_ack(push(inc, 4, 0), 0);      /* inside the window, never seen */
    expect_value(4);
    /* a CLOCK and a PULL are held to the same rule */
    Zeps__Header h = header(ZEPS__OP__CLOCK, 67 + 100);
    zt_raw_expect_error(zt_raw_req(raw, &h, NULL, 0), ZEPS_EPROTO, "past the highest");
    h = header(ZEPS__OP__PULL, 67 + 100);
    h.table = tid;
    h.count = LEN;
    zt_raw_expect_error(zt_raw_req(raw, &h, NULL, 0), ZEPS_EPROTO, "past the highest");

    Zeps__ShardStats *st = zt_stats(good, 0);
    ck_assert_ptr_nonnull(st);
    ck_assert_uint_eq(worker_stats(st, 1)->seq_jumps, 4);
    zeps__shard_stats__free_unpacked(st, NULL);
    ck_assert_int_eq(log_count("jumps"), 1); /* logged once per incarnation */

    /* a restarted worker (new incarnation) starts its numbers afresh; the
     * old one said BYE first (a live one holds its rank: test_lease) ... */
    Zeps__Header bye = header(ZEPS__OP__BYE, 68);
    expect_ack(zt_raw_req(raw, &bye, NULL, 0), 0);
    expect_ack(hello(inc + 1, 1), 0); /* after BYE nothing of the old one is redone */
    expect_ack(push(inc + 1, 2, 0), 0);
    expect_value(5);
    /* ... and a HELLO sets where the numbers stand (a client that gave up
     * requests, or whose shard restored an older record, says HELLO) */
    expect_ack(hello(inc + 1, 1000), 0);
    expect_ack(push(inc + 1, 1001, 0), 0);
    expect_value(6);
    zt_raw_expect_error(push(inc + 1, 1001 + 65, 0), ZEPS_EPROTO, "past the highest");
    ck_assert_int_eq(log_count("jumps"), 2); /* once for the new incarnation */
}
END_TEST

/* Flag bits a request may not carry are refused with EPROTO and change
 * nothing; the known ones still work. */
START_TEST(test_unknown_flags_refused)
{
    expect_ack(hello(inc, 1), 0);
    zt_raw_expect_error(push(inc, 2, 0xffffffffu), ZEPS_EPROTO, "unknown flag bits 0xffffffee");
    zt_raw_expect_error(push(inc, 3, ZP_FLAG_PULL_DELTA), ZEPS_EPROTO, "unknown flag bits 0x100");
    expect_value(0);
    Zeps__Header h = header(ZEPS__OP__PULL, 4);
    h.table = tid;
    h.count = LEN;
    h.flags = ZP_FLAG_CLOCK;
    zt_raw_expect_error(zt_raw_req(raw, &h, NULL, 0), ZEPS_EPROTO, "in a PULL request");
    h = header(ZEPS__OP__CLOCK, 5);
    h.flags = 0x80000000u;
    zt_raw_expect_error(zt_raw_req(raw, &h, NULL, 0), ZEPS_EPROTO, "0x80000000");
    h = header(ZEPS__OP__HELLO, 6);
    h.flags = ZP_FLAG_DUPLICATE; /* a reply's flag */
    zt_raw_expect_error(zt_raw_req(raw, &h, NULL, 0), ZEPS_EPROTO, "in a HELLO request");
    /* a tool's request too */
    h = header(ZEPS__OP__STATS, 0);
    h.rank = 0xffffffffu;
    h.flags = 0x40;
    zt_raw_expect_error(zt_raw_req(raw, &h, NULL, 0), ZEPS_EPROTO, "0x40");
    expect_ack(push(inc, 7, ZP_FLAG_CLOCK), 0); /* a known flag */
    expect_value(1);
}
END_TEST

/* A clock at the end of its range is refused as out of range, not reported
 * as going backwards with an overflowed number. */
START_TEST(test_clock_range)
{
    expect_ack(hello(inc, 1), 0);
    Zeps__Header h = header(ZEPS__OP__CLOCK, 2);
    h.clock = 5;
    expect_ack(zt_raw_req(raw, &h, NULL, 0), 0);
    h = header(ZEPS__OP__CLOCK, 3);
    h.clock = INT64_MAX;
    Zeps__Header *rep = zt_raw_req(raw, &h, NULL, 0);
    ck_assert_ptr_null(strstr(rep->error_text ? rep->error_text : "", "backwards"));
    zt_raw_expect_error(rep, ZEPS_ECLOCK, "is out of range (at most 9223372036854775806)");
    h = header(ZEPS__OP__CLOCK, 4);
    h.clock = 2;
    zt_raw_expect_error(zt_raw_req(raw, &h, NULL, 0), ZEPS_ECLOCK,
                        "clock goes backwards: finished 2 after 5");
    rep = push(inc, 5, 0);
    expect_ack(rep, 0);
    float ones[LEN] = {0};
    h = header(ZEPS__OP__PUSH, 6);
    h.table = tid;
    h.count = LEN;
    h.clock = INT64_MAX;
    zt_raw_expect_error(zt_raw_req(raw, &h, ones, sizeof(ones)), ZEPS_ECLOCK, "out of range");
    expect_value(1);
}
END_TEST

/* A flood of refused requests is logged on a few lines; the rest are
 * counted in STATS (log_suppressed), and the next line says how many were
 * left out. */
START_TEST(test_refusals_rate_limited)
{
    expect_ack(hello(inc, 1), 0);
    int lines0 = log_count("refused (EPROTO)");
    double t0 = zp_now_s();
    for (uint64_t i = 0; i < 500; i++)
        zt_raw_expect_error(push(inc, 2, 0x4000u), ZEPS_EPROTO, "unknown flag bits");
    int lines = log_count("refused (EPROTO)") - lines0;
    /* a burst of 10, then one a second: 500 refusals take a fraction of a
     * second here, longer under a sanitizer on a loaded machine */
    int most = 10 + (int)(zp_now_s() - t0) + 1;
    ck_assert_msg(lines >= 1 && lines <= most, "%d lines for 500 refusals (at most %d)", lines,
                  most);
    Zeps__ShardStats *st = zt_stats(good, 0);
    ck_assert_ptr_nonnull(st);
    ck_assert_uint_ge(st->errors, 500);
    ck_assert_uint_eq(st->log_suppressed, 500 - (uint64_t)lines);
    zeps__shard_stats__free_unpacked(st, NULL);
    /* zepsctl stats shows the count, and JSON carries it */
    char cmd[1024], out[400], want[64];
    snprintf(out, sizeof(out), "%s/stats.out", cl.dir);
    snprintf(cmd, sizeof(cmd), "%s/zepsctl stats --config %s > %s 2>&1", getenv("ZEPS_BINDIR"),
             cl.conf, out);
    ck_assert_int_eq(system(cmd), 0);
    snprintf(want, sizeof(want), "%d log lines suppressed", 500 - lines);
    ck_assert_msg(file_has(out, want), "no '%s' in %s", want, out);
    snprintf(cmd, sizeof(cmd), "%s/zepsctl stats --json --config %s > %s 2>&1",
             getenv("ZEPS_BINDIR"), cl.conf, out);
    ck_assert_int_eq(system(cmd), 0);
    snprintf(want, sizeof(want), "\"log_suppressed\": %d", 500 - lines);
    ck_assert_msg(file_has(out, want), "no '%s' in %s", want, out);
    sleep(2); /* the bucket refills: the next line is logged, with the count */
    zt_raw_expect_error(push(inc, 3, 0x4000u), ZEPS_EPROTO, "unknown flag bits");
    ck_assert(zt_wait_log(&cl, 0, "more refused since the last message"));
}
END_TEST

/* Peak resident memory (VmHWM) of server 0, in MiB. */
static long server_hwm_mib(void)
{
    char path[64], line[256];
    snprintf(path, sizeof(path), "/proc/%d/status", (int)cl.pids[0]);
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    long kb = -1;
    while (fgets(line, sizeof(line), f))
        if (sscanf(line, "VmHWM: %ld kB", &kb) == 1)
            break;
    fclose(f);
    return kb / 1024;
}

static Zeps__ShardStats *stats0(void)
{
    Zeps__ShardStats *st = zt_stats(good, 0);
    ck_assert_ptr_nonnull(st);
    return st;
}

/* A raw sparse PULL of ids [first, first + n) of table `table` as rank 1;
 * the reply may take up to 60 s (10M ids under a sanitizer on a loaded
 * machine take more than zt_raw_req's 5 s). */
static Zeps__Header *spull(uint64_t seq, uint32_t table, uint64_t first, size_t n)
{
    uint64_t *ids = malloc(n * sizeof(uint64_t));
    ck_assert_ptr_nonnull(ids);
    for (size_t i = 0; i < n; i++)
        ids[i] = first + i;
    Zeps__Header h = header(ZEPS__OP__PULL, seq);
    h.table = table;
    h.count = n;
    zt_raw_send(raw, &h, ids, n * sizeof(uint64_t));
    free(ids);
    return zt_raw_recv(raw, 60000);
}

/* max_tables = 3: the fourth table is refused with ENOMEM; declaring one
 * that exists still answers. */
START_TEST(test_max_tables)
{
    start("  max_tables = 3;");
    zeps_table_spec spec = {.name = "u", .length = LEN, .optimizer = "sgd", .lr = 1.0};
    uint32_t id;
    ck_assert_int_eq(zeps_declare(good, &spec, &id), 0);
    spec.name = "v";
    ck_assert_int_eq(zeps_declare(good, &spec, &id), 0);
    spec.name = "w";
    ck_assert_int_eq(zeps_declare(good, &spec, &id), ZEPS_ENOMEM);
    ck_assert_ptr_nonnull(strstr(zeps_last_error(good), "holds 3 tables, its limit (max_tables)"));
    spec.name = "u";
    ck_assert_int_eq(zeps_declare(good, &spec, &id), 0);
    Zeps__ShardStats *st = stats0();
    ck_assert_uint_eq(st->n_tables, 3);
    ck_assert_uint_eq(st->max_tables, 3);
    ck_assert_uint_eq(st->full_refused, 1);
    zeps__shard_stats__free_unpacked(st, NULL);
}
END_TEST

/* max_memory_mb = 1: a dense table whose slice needs more is refused
 * before anything is allocated (2^36 elements would be 512 GiB), and the
 * shard goes on serving. */
START_TEST(test_max_bytes_dense)
{
    start("  max_memory_mb = 1;");
    zeps_table_spec spec = {.name = "big", .length = 1u << 20, .optimizer = "adam", .lr = 0.1};
    uint32_t id;
    ck_assert_int_eq(zeps_declare(good, &spec, &id), ZEPS_ENOMEM);
    ck_assert_ptr_nonnull(strstr(zeps_last_error(good), "needs 16777216 bytes on shard 0"));
    ck_assert_ptr_nonnull(strstr(zeps_last_error(good), "(max_memory_mb)"));
    spec.length = 1ull << 36;
    ck_assert_int_eq(zeps_declare(good, &spec, &id), ZEPS_ENOMEM);
    spec.name = "small";
    spec.length = 1000;
    ck_assert_int_eq(zeps_declare(good, &spec, &id), 0);
    expect_value(0);
    Zeps__ShardStats *st = stats0();
    ck_assert_uint_eq(st->max_bytes, 1u << 20);
    ck_assert_uint_gt(st->bytes_held, 1000 * 4);
    ck_assert_uint_le(st->bytes_held, 1u << 20);
    ck_assert_uint_eq(st->full_refused, 2);
    zeps__shard_stats__free_unpacked(st, NULL);
}
END_TEST

/* A sparse pull of 10M new ids against max_rows = 100000 is refused with
 * ENOMEM before a row is made, and the server's peak RSS stays far below
 * what 10M rows take (they took it from 54 to 973 MiB); pulls that fit
 * still create their rows, and a table that evicts (capacity_rows) only
 * counts the growth up to its own bound. */
START_TEST(test_sparse_rows_bounded)
{
    start("  max_rows = 100000;");
    expect_ack(hello(inc, 1), 0);
    zeps_sparse_spec sp = {.name = "e", .dim = 1, .optimizer = "sgd", .lr = 0.1};
    uint32_t e;
    ck_assert_int_eq(zeps_declare_sparse(good, &sp, &e), 0);
    long before = server_hwm_mib();
    Zeps__Header *big = spull(2, e, 1, 10000000);
    long after = server_hwm_mib();
    fprintf(stderr, "a pull of 10M new ids: server peak RSS %ld MiB before, %ld MiB after\n",
            before, after);
    zt_raw_expect_error(big, ZEPS_ENOMEM, "shard 0 is full: 10000000 new rows of table 'e'");
    Zeps__ShardStats *st = stats0();
    ck_assert_uint_eq(st->rows_held, 0);
    ck_assert_uint_eq(st->max_rows, 100000);
    ck_assert_uint_eq(st->full_refused, 1);
    zeps__shard_stats__free_unpacked(st, NULL);
    /* the 80 MB request itself passes through; 10M rows would be ~1 GiB */
    ck_assert_msg(after - before < 400, "peak RSS grew from %ld to %ld MiB", before, after);

    Zeps__Header *rep = spull(3, e, 1, 60000);
    ck_assert_msg(rep->op == ZEPS__OP__PULL, "%s", rep->error_text);
    zeps__header__free_unpacked(rep, NULL);
    zt_raw_expect_error(spull(4, e, 100000, 60000), ZEPS_ENOMEM, "beside 60000 rows");
    /* a push of new ids would create rows too */
    rep = spull(5, e, 1, 60000); /* known ids: nothing new */
    ck_assert_int_eq(rep->op, ZEPS__OP__PULL);
    zeps__header__free_unpacked(rep, NULL);

    sp.name = "lru";
    sp.capacity_rows = 30000;
    uint32_t l;
    ck_assert_int_eq(zeps_declare_sparse(good, &sp, &l), 0);
    rep = spull(6, l, 1, 80000); /* grows by 30000 at most, then evicts */
    ck_assert_msg(rep->op == ZEPS__OP__PULL, "%s", rep->error_text);
    zeps__header__free_unpacked(rep, NULL);
    st = stats0();
    ck_assert_uint_eq(st->rows_held, 90000);
    zeps__shard_stats__free_unpacked(st, NULL);
}
END_TEST

/* A sparse push of new ids past the limit is refused and changes no row. */
START_TEST(test_sparse_push_bounded)
{
    start("  max_rows = 1000;");
    expect_ack(hello(inc, 1), 0);
    zeps_sparse_spec sp = {.name = "e", .dim = 2, .optimizer = "sgd", .lr = 1.0};
    uint32_t e;
    ck_assert_int_eq(zeps_declare_sparse(good, &sp, &e), 0);
    size_t n = 1500;
    size_t len = n * sizeof(uint64_t) + n * 2 * sizeof(float);
    unsigned char *buf = calloc(1, len);
    for (size_t i = 0; i < n; i++) {
        uint64_t id = i;
        memcpy(buf + i * sizeof(id), &id, sizeof(id));
    }
    Zeps__Header h = header(ZEPS__OP__PUSH, 2);
    h.table = e;
    h.count = n;
    zt_raw_expect_error(zt_raw_req(raw, &h, buf, len), ZEPS_ENOMEM, "1500 new rows");
    h = header(ZEPS__OP__PUSH, 3);
    h.table = e;
    h.count = 800;
    expect_ack(zt_raw_req(raw, &h, buf, 800 * sizeof(uint64_t) + 800 * 2 * sizeof(float)), 0);
    free(buf);
    Zeps__ShardStats *st = stats0();
    ck_assert_uint_eq(st->rows_held, 800);
    zeps__shard_stats__free_unpacked(st, NULL);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("bounds");
    TCase *tc = tcase_create("requests");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_seq_jump_refused);
    tcase_add_test(tc, test_unknown_flags_refused);
    tcase_add_test(tc, test_clock_range);
    tcase_add_test(tc, test_refusals_rate_limited);
    suite_add_tcase(s, tc);
    tc = tcase_create("limits");
    tcase_add_checked_fixture(tc, NULL, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_max_tables);
    tcase_add_test(tc, test_max_bytes_dense);
    tcase_add_test(tc, test_sparse_rows_bounded);
    tcase_add_test(tc, test_sparse_push_bounded);
    suite_add_tcase(s, tc);
    return zt_run_suite(s);
}
