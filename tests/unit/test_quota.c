/*
 * test_quota.c - a shard's limits in process (server/state/quota.c,
 * common/memlimit.c, inproc.h): the memory figure from a cgroup tree, the
 * defaults derived from it, and the table, byte and row limits as DECLARE
 * and sparse PULL/PUSH meet them; also the seq-jump and flag checks of the
 * request path (server/op/request.c, server/dispatch.c).
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check_main.h"
#include "scratch.h"
#include "inproc.h"
#include "memlimit.h"
#include "quota.h"
#include "zeps_errors.h"

/* The smallest memory.max of the cgroup and its parents wins over the
 * physical memory; "max" means none; the root's own file is not read. */
START_TEST(test_memlimit_cgroup)
{
    char root[160], p[256];
    ck_assert_int_eq(zt_scratch_dir(root, sizeof(root), "quota"), 0);
    snprintf(p, sizeof(p), "%s/a", root);
    ck_assert_int_eq(mkdir(p, 0700), 0);
    snprintf(p, sizeof(p), "%s/a/b", root);
    ck_assert_int_eq(mkdir(p, 0700), 0);
    snprintf(p, sizeof(p), "%s/a/b/memory.max", root);
    zt_scratch_write(p, "max\n");
    snprintf(p, sizeof(p), "%s/a/memory.max", root);
    zt_scratch_write(p, "1048576\n");
    snprintf(p, sizeof(p), "%s/memory.max", root);
    zt_scratch_write(p, "1024\n"); /* the root itself has no limit file in cgroup v2 */
    char from[256];
    ck_assert_uint_eq(zp_memlimit_from(root, "/a/b", 8ull << 30, from, sizeof(from)), 1048576);
    ck_assert_msg(strstr(from, "/a/memory.max") != NULL, "from: %s", from);
    ck_assert_uint_eq(zp_memlimit_from(root, "/a/b", 4096, from, sizeof(from)), 4096);
    ck_assert_str_eq(from, "physical memory");
    ck_assert_uint_eq(zp_memlimit_from(root, "", 8ull << 30, from, sizeof(from)), 8ull << 30);
    ck_assert_uint_eq(zp_memlimit_from(root, "/gone", 8ull << 30, NULL, 0), 8ull << 30);
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
    ck_assert_int_eq(system(cmd), 0);
    /* this process: at most the physical memory, and something */
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    uint64_t m = zp_memlimit_bytes(from, sizeof(from));
    ck_assert_uint_gt(m, 0);
    ck_assert_uint_le(m, (uint64_t)pages * (uint64_t)page);
}
END_TEST

START_TEST(test_defaults)
{
    zt_shard *z = zt_shard_new("async", 1);
    const zp_quota *q = &z->s->quota;
    ck_assert_uint_eq(q->max_tables, 1024);
    ck_assert_uint_eq(q->max_bytes, q->memory / 2);
    ck_assert_uint_eq(q->max_rows, q->max_bytes / 64);
    zt_shard_free(z);
    zp_config *c = zt_config("async", 1, 1);
    c->max_rows = 7;
    c->max_memory_bytes = 1u << 20;
    z = zt_shard_start(c, 0);
    ck_assert_uint_eq(z->s->quota.max_rows, 7);
    ck_assert_uint_eq(z->s->quota.max_bytes, 1u << 20);
    zt_shard_free(z);
}
END_TEST

START_TEST(test_tables_and_bytes)
{
    zp_config *c = zt_config("async", 1, 1);
    c->max_tables = 2;
    c->max_memory_bytes = 1u << 20;
    zt_shard *z = zt_shard_start(c, 0);
    zt_hello(z, 0);
    zt_declare(z, 0, "a", 100, 0.1);
    zt_declare(z, 0, "b", 100, 0.1);
    Zeps__TableSpec spec;
    zeps__table_spec__init(&spec);
    spec.name = "c";
    spec.length = 100;
    spec.optimizer = "sgd";
    spec.lr = 0.1;
    spec.init = "zeros";
    Zeps__Header h = zt_header(z, ZEPS__OP__DECLARE, 0);
    h.spec = &spec;
    zt_send(z, &h, NULL, 0);
    ck_assert_int_eq(zt_last(z)->h->error, ZEPS_ENOMEM);
    ck_assert_ptr_nonnull(strstr(zt_last(z)->h->error_text, "max_tables"));
    ck_assert_uint_eq(z->s->ntables, 2);
    zt_shard_free(z);

    c = zt_config("async", 1, 1);
    c->max_memory_bytes = 1u << 20;
    z = zt_shard_start(c, 0);
    zt_hello(z, 0);
    spec.name = "d";
    spec.length = 1u << 17; /* sgd: 2 x 4 bytes x 2^17 = 1 MiB: fits exactly */
    h = zt_header(z, ZEPS__OP__DECLARE, 0);
    h.spec = &spec;
    zt_send(z, &h, NULL, 0);
    ck_assert_msg(zt_last(z)->h->op == ZEPS__OP__DECLARE, "%s", zt_last(z)->h->error_text);
    /* it holds 512 KiB (no push scratch yet): 2 x 4 x (2^16 + 1) bytes
     * more do not fit */
    ck_assert_uint_eq(zp_quota_bytes_held(z->s->tables, z->s->ntables), 1u << 19);
    spec.name = "e";
    spec.length = (1u << 16) + 1;
    h = zt_header(z, ZEPS__OP__DECLARE, 0);
    h.spec = &spec;
    zt_send(z, &h, NULL, 0);
    ck_assert_int_eq(zt_last(z)->h->error, ZEPS_ENOMEM);
    ck_assert_uint_eq(z->s->quota.full_refused, 1);
    /* a sparse table with admission counts holds a 2 MiB sketch from the
     * start: measured once made, and refused */
    spec.name = "s";
    spec.kind = 1;
    spec.dim = 1;
    spec.admit_count = 2;
    h = zt_header(z, ZEPS__OP__DECLARE, 0);
    h.spec = &spec;
    zt_send(z, &h, NULL, 0);
    ck_assert_int_eq(zt_last(z)->h->error, ZEPS_ENOMEM);
    ck_assert_ptr_nonnull(strstr(zt_last(z)->h->error_text, "table 's' needs"));
    ck_assert_uint_eq(z->s->ntables, 1);
    zt_shard_free(z);
}
END_TEST

/* A table that needs exactly the byte limit fits on an empty shard; one
 * byte more does not, and is counted as refused. */
START_TEST(test_bytes_edge)
{
    zp_quota q = {.max_tables = 4, .max_bytes = 1000};
    char err[256];
    ck_assert_int_eq(zp_quota_check_table(&q, NULL, 0, "a", 1000, 0, err, sizeof(err)), ZEPS_OK);
    ck_assert_int_eq(zp_quota_check_table(&q, NULL, 0, "a", 1001, 0, err, sizeof(err)),
                     ZEPS_ENOMEM);
    ck_assert_ptr_nonnull(strstr(err, "table 'a' needs 1001 bytes"));
    ck_assert_uint_eq(q.full_refused, 1);
}
END_TEST

/* A sparse table of dim 1 (sgd); returns its id. */
static uint32_t declare_sparse(zt_shard *z, const char *name, uint64_t capacity)
{
    Zeps__TableSpec spec;
    zeps__table_spec__init(&spec);
    spec.name = (char *)name;
    spec.kind = 1;
    spec.dim = 1;
    spec.optimizer = "sgd";
    spec.lr = 0.1;
    spec.init = "zeros";
    spec.capacity_rows = capacity;
    Zeps__Header h = zt_header(z, ZEPS__OP__DECLARE, 0);
    h.spec = &spec;
    ck_assert_int_eq(zt_send(z, &h, NULL, 0), 1);
    ck_assert_msg(zt_last(z)->h->op == ZEPS__OP__DECLARE, "%s", zt_last(z)->h->error_text);
    return zt_last(z)->h->table;
}

/* A sparse pull of ids [first, first + n); returns the reply's error. */
static int spull(zt_shard *z, uint32_t t, uint64_t first, size_t n)
{
    uint64_t *ids = malloc(n * sizeof(uint64_t));
    for (size_t i = 0; i < n; i++)
        ids[i] = first + i;
    Zeps__Header h = zt_header(z, ZEPS__OP__PULL, 0);
    h.table = t;
    h.count = n;
    zt_send(z, &h, ids, n * sizeof(uint64_t));
    free(ids);
    return zt_last(z)->h->error;
}

START_TEST(test_rows)
{
    zp_config *c = zt_config("async", 1, 1);
    c->max_rows = 100;
    zt_shard *z = zt_shard_start(c, 0);
    zt_hello(z, 0);
    uint32_t t = declare_sparse(z, "s", 0);
    ck_assert_int_eq(spull(z, t, 0, 101), ZEPS_ENOMEM);
    ck_assert_ptr_nonnull(strstr(zt_last(z)->h->error_text, "101 new rows of table 's'"));
    ck_assert_uint_eq(zp_quota_rows_held(z->s->tables, z->s->ntables), 0);
    ck_assert_int_eq(spull(z, t, 0, 60), 0);
    ck_assert_int_eq(spull(z, t, 30, 70), 0); /* 30 known + 40 new = 100 */
    ck_assert_uint_eq(zp_quota_rows_held(z->s->tables, z->s->ntables), 100);
    ck_assert_int_eq(spull(z, t, 100, 1), ZEPS_ENOMEM);
    ck_assert_int_eq(spull(z, t, 0, 100), 0); /* all known */
    /* an evicting table at its own bound grows no more: allowed */
    uint32_t l = declare_sparse(z, "l", 10);
    ck_assert_int_eq(spull(z, l, 0, 1), ZEPS_ENOMEM); /* the shard is full */
    ck_assert_uint_eq(z->s->quota.full_refused, 3);
    zt_shard_free(z);

    c = zt_config("async", 1, 1);
    c->max_rows = 100;
    z = zt_shard_start(c, 0);
    zt_hello(z, 0);
    l = declare_sparse(z, "l", 10);
    ck_assert_int_eq(spull(z, l, 0, 1000), 0); /* grows by 10, evicts the rest */
    ck_assert_int_eq(spull(z, l, 5000, 1000), 0);
    ck_assert_uint_eq(zp_quota_rows_held(z->s->tables, z->s->ntables), 10);
    zt_shard_free(z);
}
END_TEST

/* The request path: a seq jump and an unknown flag, in process. */
START_TEST(test_seq_and_flags)
{
    zt_shard *z = zt_shard_new("async", 1);
    zt_hello(z, 0);
    uint32_t t = zt_declare(z, 0, "d", 4, 1.0);
    float g[4] = {1, 1, 1, 1};
    Zeps__Header h = zt_header(z, ZEPS__OP__PUSH, 0);
    h.table = t;
    h.count = 4;
    h.seq = UINT64_MAX;
    zt_send(z, &h, g, sizeof(g));
    ck_assert_int_eq(zt_last(z)->h->error, ZEPS_EPROTO);
    ck_assert_uint_eq(z->s->workers.w[0].seq_jumps, 1);
    ck_assert_uint_eq(z->s->workers.w[0].max_seq, 0); /* nothing recorded */
    ck_assert_int_eq(zt_push(z, 0, t, 0, g, 4, 0, 0), 1);
    ck_assert_uint_eq(zt_last(z)->h->flags, 0); /* applied, not a duplicate */
    h = zt_header(z, ZEPS__OP__PUSH, 0);
    h.table = t;
    h.count = 4;
    h.flags = 0x20;
    zt_send(z, &h, g, sizeof(g));
    ck_assert_int_eq(zt_last(z)->h->error, ZEPS_EPROTO);
    ck_assert_ptr_nonnull(strstr(zt_last(z)->h->error_text, "unknown flag bits 0x20"));
    ck_assert_uint_eq(z->s->tables[t]->version, 1);
    zt_shard_free(z);
}
END_TEST

/* At most ZP_PARKED_MAX pulls of one rank wait at once; served ones make
 * room again. ssp with bound 0: a pull at clock c waits until every worker
 * finished c - 1. */
START_TEST(test_parked_bounded)
{
    zp_config *c = zt_config("ssp", 2, 1);
    c->staleness = 0;
    zt_shard *z = zt_shard_start(c, 0);
    zt_hello(z, 0);
    zt_hello(z, 1);
    uint32_t t = zt_declare(z, 0, "d", 4, 0.1);
    zt_clear(z);
    for (int i = 0; i < ZP_PARKED_MAX; i++)
        ck_assert_int_eq(zt_pull(z, 0, t, 0, 4, i < 200 ? 1 : 2), 0); /* parked: no reply */
    ck_assert_uint_eq(z->s->workers.w[0].parked, ZP_PARKED_MAX);
    ck_assert_int_eq(zt_pull(z, 0, t, 0, 4, 1), 1);
    ck_assert_int_eq(zt_last(z)->h->error, ZEPS_ENOMEM);
    ck_assert_ptr_nonnull(strstr(zt_last(z)->h->error_text, "256 pulls waiting"));
    ck_assert_int_eq(zt_pull(z, 1, t, 0, 4, 1), 0); /* another rank is not held back */
    zt_clear(z);
    Zeps__Header h = zt_header(z, ZEPS__OP__CLOCK, 1);
    h.clock = 0;
    ck_assert_int_eq(zt_send(z, &h, NULL, 0), 1);
    zt_clear(z);
    h = zt_header(z, ZEPS__OP__CLOCK, 0);
    h.clock = 0;
    ck_assert_int_eq(zt_send(z, &h, NULL, 0), 1 + 200 + 1); /* the ack, rank 0's and rank 1's */
    ck_assert_uint_eq(z->s->workers.w[0].parked, ZP_PARKED_MAX - 200);
    ck_assert_uint_eq(z->s->workers.w[1].parked, 0);
    zt_clear(z);
    ck_assert_int_eq(zt_pull(z, 0, t, 0, 4, 2), 0); /* room again */
    ck_assert_uint_eq(z->s->workers.w[0].parked, ZP_PARKED_MAX - 199);
    zt_shard_free(z);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("quota");
    TCase *tc = tcase_create("quota");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_memlimit_cgroup);
    tcase_add_test(tc, test_defaults);
    tcase_add_test(tc, test_tables_and_bytes);
    tcase_add_test(tc, test_bytes_edge);
    tcase_add_test(tc, test_rows);
    tcase_add_test(tc, test_seq_and_flags);
    tcase_add_test(tc, test_parked_bounded);
    suite_add_tcase(s, tc);
    return zt_run_suite(s);
}
