/*
 * test_bind.c - CURVE key bindings (server/state/bind.c) and how the ZAP
 * handler's allow-list takes them (server/state/zap.c): NAME.id files read
 * right (ranks, ranges, tool), bad ones refused with file and line; a list
 * with no binding kept (any rank), one partly bound refused naming the
 * unbound key; a key found by its Z85 text (the ZAP User-Id).
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zmq.h>

#include "bind.h"
#include "check_main.h"
#include "scratch.h"
#include "zap.h"
#include "zeps_errors.h"

static char dir[128];

static void put(const char *name, const char *text)
{
    char path[256];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

static void fresh_dir(void)
{
    ck_assert_int_eq(zt_scratch_dir(dir, sizeof(dir), "bind"), 0);
}

static void remove_dir(void)
{
    char cmd[256];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    ck_assert_int_eq(system(cmd), 0);
}

/* A key pair's public text into pub (41 bytes), written as dir/NAME.pub. */
static void key(const char *name, char *pub)
{
    char sec[41], file[64];
    ck_assert_int_eq(zmq_curve_keypair(pub, sec), 0);
    snprintf(file, sizeof(file), "%s.pub", name);
    put(file, pub);
}

static int load(const char *text, zp_bind *b, char *err, size_t len)
{
    char path[256];
    put("k.id", text);
    snprintf(path, sizeof(path), "%s/k.id", dir);
    return zp_bind_load(path, b, err, len);
}

START_TEST(test_bind_files)
{
    fresh_dir();
    zp_bind b;
    char err[512], desc[128];
    ck_assert_int_eq(load("ranks = ( [0, 3], 7 );\ntool = true;\n", &b, err, sizeof(err)), 0);
    ck_assert(zp_bind_allows(&b, 0) && zp_bind_allows(&b, 3) && zp_bind_allows(&b, 7));
    ck_assert(!zp_bind_allows(&b, 4) && !zp_bind_allows(&b, 8));
    ck_assert(zp_bind_allows(&b, 0xffffffffu));
    zp_bind_describe(&b, desc, sizeof(desc));
    ck_assert_str_eq(desc, "ranks 0-3, 7 and tools");
    ck_assert_int_eq(load("ranks = [2];\n", &b, err, sizeof(err)), 0);
    ck_assert(zp_bind_allows(&b, 2) && !zp_bind_allows(&b, 0) && !zp_bind_allows(&b, 0xffffffffu));
    zp_bind_describe(&b, desc, sizeof(desc));
    ck_assert_str_eq(desc, "ranks 2 (no tools)");
    ck_assert_int_eq(load("tool = true;\n", &b, err, sizeof(err)), 0);
    ck_assert(!zp_bind_allows(&b, 0) && zp_bind_allows(&b, 0xffffffffu));
    /* refused, with the file and line */
    ck_assert_int_eq(load("ranks = [1];\nrole = \"shard\";\n", &b, err, sizeof(err)), ZEPS_ECONFIG);
    ck_assert_ptr_nonnull(strstr(err, "k.id:2: unknown or mistyped setting 'role'"));
    ck_assert_int_eq(load("ranks = ( [3, 1] );\n", &b, err, sizeof(err)), ZEPS_ECONFIG);
    ck_assert_ptr_nonnull(strstr(err, "3..1 is not 0 <= first <= last"));
    ck_assert_int_eq(load("ranks = [-1];\n", &b, err, sizeof(err)), ZEPS_ECONFIG);
    ck_assert_int_eq(load("tool = false;\n", &b, err, sizeof(err)), ZEPS_ECONFIG);
    ck_assert_ptr_nonnull(strstr(err, "binds its key to nothing"));
    ck_assert_int_eq(load("ranks = [1\n", &b, err, sizeof(err)), ZEPS_ECONFIG);
    ck_assert_ptr_nonnull(strstr(err, "k.id:"));
    remove_dir();
}
END_TEST

START_TEST(test_allow_list)
{
    fresh_dir();
    char a[41], b[41], err[512];
    key("a", a);
    key("b", b);
    void *zctx = zmq_ctx_new(); /* one per open: the ZAP endpoint is bound once */
    zp_zap z;
    /* no bindings: kept, any rank */
    ck_assert_int_eq(zp_zap_open(&z, zctx, dir, err, sizeof(err)), 0);
    ck_assert(!z.bound);
    const zp_bind *k = zp_zap_binding(&z, a);
    ck_assert(k && zp_bind_allows(k, 5) && zp_bind_allows(k, 0xffffffffu));
    ck_assert_ptr_null(zp_zap_binding(&z, "not a key"));
    zp_zap_close(&z);
    zmq_ctx_term(zctx);
    zctx = zmq_ctx_new();
    /* partly bound: refused, naming the unbound key */
    put("a.id", "ranks = [0];\n");
    ck_assert_int_eq(zp_zap_open(&z, zctx, dir, err, sizeof(err)), ZEPS_ECONFIG);
    ck_assert_ptr_nonnull(strstr(err, "b.pub has no binding file (b.id)"));
    /* all bound: each key its own */
    put("b.id", "tool = true;\n");
    ck_assert_int_eq(zp_zap_open(&z, zctx, dir, err, sizeof(err)), 0);
    ck_assert(z.bound);
    k = zp_zap_binding(&z, a);
    ck_assert(k && zp_bind_allows(k, 0) && !zp_bind_allows(k, 1) &&
              !zp_bind_allows(k, 0xffffffffu));
    k = zp_zap_binding(&z, b);
    ck_assert(k && !zp_bind_allows(k, 0) && zp_bind_allows(k, 0xffffffffu));
    /* a bad binding stops a reload; the old list stays */
    put("b.id", "tool = 3;\n");
    ck_assert_int_eq(zp_zap_reload(&z, err, sizeof(err)), ZEPS_ECONFIG);
    ck_assert_ptr_nonnull(zp_zap_binding(&z, b));
    zp_zap_close(&z);
    zmq_ctx_term(zctx);
    remove_dir();
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("bind");
    TCase *tc = tcase_create("bind");
    tcase_add_test(tc, test_bind_files);
    tcase_add_test(tc, test_allow_list);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return zt_run_suite(suite());
}
