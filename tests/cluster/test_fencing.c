/*
 * test_fencing.c - a worker is never evicted while it is alive (docs/faults.md,
 * "Two processes with one rank"; docs/operations.md, Security).
 *
 * Three worker processes train a bsp table through two real shards while
 * the test replays the forged-HELLO attack: HELLOs claiming rank 0 with
 * new incarnations, sent to every shard as fast as they are answered. Every
 * one must be refused with ERANK, training must finish, and the final
 * parameters must equal the undisturbed single-process reference bit for
 * bit (they start once worker 0 holds its rank on every shard: before, the
 * rank is anyone's to take). Without CURVE the lease refuses them; with CURVE the attacker holds
 * an allowed key bound to rank 2 only (refused by the binding), and the
 * workers' own key (bound to ranks 0-2 and tools) is refused by the lease.
 * A second client started with a live rank gets ERANK naming both
 * incarnations.
 */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bsp_ref.h"
#include "check_main.h"
#include "scratch.h"
#include "curve.h"
#include "harness.h"
#include "rawreq.h"
#include "wire.h"
#include "zeps.h"
#include "zeps_errors.h"

#define L     ZT_BSP_LEN
#define STEPS 400

static char keydir[128];

/* Keys: server; w (the workers, bound to ranks 0-2 and tools); m (an
 * attacker's allowed key, bound to rank 2). Returns the cluster-file lines. */
static const char *make_keys(char *extra, size_t len)
{
    char err[512], pub[41], path[256];
    ck_assert_int_eq(zt_scratch_dir(keydir, sizeof(keydir), "fence"), 0);
    snprintf(path, sizeof(path), "%s/allow", keydir);
    ck_assert_int_eq(mkdir(path, 0700), 0);
    ck_assert_msg(zp_curve_keygen(keydir, "server", NULL, err, sizeof(err)) == 0, "%s", err);
    const char *names[2] = {"w", "m"},
               *ids[2] = {"ranks = ( [0, 2] );\ntool = true;\n", "ranks = [2];\n"};
    for (int i = 0; i < 2; i++) {
        ck_assert_msg(zp_curve_keygen(keydir, names[i], pub, err, sizeof(err)) == 0, "%s", err);
        snprintf(path, sizeof(path), "%s/allow/%s.pub", keydir, names[i]);
        zt_scratch_write(path, pub);
        snprintf(path, sizeof(path), "%s/allow/%s.id", keydir, names[i]);
        zt_scratch_write(path, ids[i]);
    }
    snprintf(extra, len,
             "  curve_server_secret = \"%s/server.key\";\n"
             "  curve_server_public = \"%s/server.pub\";\n"
             "  curve_allow_dir = \"%s/allow\";\n"
             "  curve_client_secret = \"%s/w.key\";\n"
             "  curve_client_public = \"%s/w.pub\";\n",
             keydir, keydir, keydir, keydir, keydir);
    return extra;
}

/* A DEALER to shard k with the attacker's key m. */
static void *attacker_socket(void *zctx, const zt_cluster *cl, int k)
{
    char path[256], spub[41], mpub[41], msec[41], err[512];
    snprintf(path, sizeof(path), "%s/server.pub", keydir);
    ck_assert_int_eq(zp_curve_read_key(path, false, spub, err, sizeof(err)), 0);
    snprintf(path, sizeof(path), "%s/m.pub", keydir);
    ck_assert_int_eq(zp_curve_read_key(path, false, mpub, err, sizeof(err)), 0);
    snprintf(path, sizeof(path), "%s/m.key", keydir);
    ck_assert_int_eq(zp_curve_read_key(path, true, msec, err, sizeof(err)), 0);
    void *s = zmq_socket(zctx, ZMQ_DEALER);
    int zero = 0;
    zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof(zero));
    zp_curve_apply_client(s, spub, mpub, msec);
    zmq_connect(s, cl->endpoints[k]);
    return s;
}

/* One forged HELLO as rank 0 with a fresh incarnation to shard k. Refused
 * with ERANK (by the binding when `binding`, else by the lease, naming
 * both incarnations): returns 1. Taken: only allowed once worker 0 said
 * BYE to that shard (its rank is free then); returns 0. */
static int forge(const zt_cluster *cl, int k, void *sock, uint64_t inc, bool binding)
{
    Zeps__Header h;
    zeps__header__init(&h);
    h.version = ZP_PROTOCOL_VERSION;
    h.op = ZEPS__OP__HELLO;
    h.rank = 0;
    h.incarnation = inc;
    h.req_id = inc;
    Zeps__Header *rep = zt_raw_req(sock, &h, NULL, 0);
    int refused = rep->op == ZEPS__OP__ERROR && rep->error == ZEPS_ERANK;
    ck_assert_msg(refused || (cl && zt_log_has(cl, k, "worker 0 left")),
                  "forged HELLO to shard %d accepted while worker 0 trains (op %d, error %d)", k,
                  rep->op, rep->error);
    if (refused && binding)
        ck_assert_ptr_nonnull(
            strstr(rep->error_text, "may speak as ranks 2 (no tools), not as worker 0"));
    else if (refused)
        ck_assert_ptr_nonnull(strstr(rep->error_text, "is held by incarnation"));
    zeps__header__free_unpacked(rep, NULL);
    return refused;
}

/* Train with 3 workers in a child while forging HELLOs on every shard from
 * the workers' own key (and from the attacker's with CURVE). */
static void train_under_attack(const zt_cluster *cl, bool curve)
{
    pid_t child = fork();
    if (child == 0)
        _exit(zt_bsp_run_workers(cl, 3, STEPS));
    for (int k = 0; k < 2; k++) /* a rank nobody holds yet is anyone's to take */
        ck_assert_msg(zt_wait_log(cl, k, "worker 0 joined"), "worker 0 never joined shard %d", k);
    void *zctx = zmq_ctx_new();
    void *own[2], *evil[2] = {NULL, NULL};
    for (int k = 0; k < 2; k++) {
        own[k] = zt_raw_socket(zctx, cl, k);
        if (curve)
            evil[k] = attacker_socket(zctx, cl, k);
    }
    int forged = 0, st = 0;
    uint64_t inc = 0xf0f0000000000001ull;
    while (waitpid(child, &st, WNOHANG) == 0) {
        for (int k = 0; k < 2; k++) {
            forged += forge(cl, k, own[k], inc++, false);
            if (curve)
                forged += forge(cl, k, evil[k], inc++, true);
        }
    }
    for (int k = 0; k < 2; k++) {
        zmq_close(own[k]);
        if (evil[k])
            zmq_close(evil[k]);
    }
    zmq_ctx_term(zctx);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "training failed (status %d)", st);
    ck_assert_int_gt(forged, 10);
    printf("%s: %d forged HELLOs refused during training\n", curve ? "curve" : "plain", forged);
}

/* The table after training equals the reference bit for bit. */
static void same_as_reference(const zt_cluster *cl)
{
    float *a = malloc(L * sizeof(float)), *ref = malloc(L * sizeof(float));
    zeps_client *c = zt_client(cl, 2); /* rank 2 said BYE (a forger may hold 0 by now) */
    ck_assert_ptr_nonnull(c);
    uint32_t t;
    ck_assert_int_eq(zeps_declare(c, &zt_bsp_spec, &t), 0);
    ck_assert_int_eq(zeps_pull(c, t, a, 0, L, STEPS), 0);
    zeps_client_destroy(&c);
    zt_bsp_reference(3, STEPS, ref);
    int diff = -1;
    for (int i = 0; i < L && diff < 0; i++)
        if (memcmp(&a[i], &ref[i], sizeof(float)) != 0)
            diff = i;
    ck_assert_msg(diff < 0, "element %d is %.9g, reference %.9g", diff, diff >= 0 ? a[diff] : 0,
                  diff >= 0 ? ref[diff] : 0);
    free(a);
    free(ref);
}

/* A second process with a live rank: ERANK after its hello_timeout_ms,
 * the shard's log naming both incarnations; zepsctl evict lets it in. */
static void double_start(const zt_cluster *cl)
{
    zeps_options a = {.request_timeout_ms = 500, .hello_timeout_ms = 5000, .incarnation = 0xa11ce};
    zeps_client *first = zt_client_opts(cl, 1, &a);
    ck_assert_ptr_nonnull(first);
    zeps_options b = {.request_timeout_ms = 500, .hello_timeout_ms = 1500, .incarnation = 0xb0b};
    zeps_client *second = zt_client_opts(cl, 1, &b);
    ck_assert_ptr_null(second);
    ck_assert(zt_log_has(cl, 0, "worker 1 is held by incarnation a11ce"));
    ck_assert(zt_log_has(cl, 0, "HELLO from incarnation b0b refused"));
    /* the operator releases the rank: the second one gets in */
    zeps_client *tool = zt_client(cl, ZEPS_RANK_TOOL);
    ck_assert_ptr_nonnull(tool);
    ck_assert_int_eq(zeps_evict(tool, 1), 0);
    zeps_client_destroy(&tool);
    second = zt_client_opts(cl, 1, &b);
    ck_assert_ptr_nonnull(second);
    ck_assert(zt_log_has(cl, 1, "released by an operator"));
    zeps_client_destroy(&second);
    zeps_client_destroy(&first);
}

START_TEST(test_plain)
{
    zt_cluster cl;
    ck_assert_int_eq(zt_cluster_start(&cl, 2, 3, "bsp", NULL, NULL), 0);
    train_under_attack(&cl, false);
    same_as_reference(&cl);
    double_start(&cl);
    ck_assert_int_eq(zt_cluster_stop(&cl), 0);
}
END_TEST

START_TEST(test_curve)
{
    char extra[1024];
    zt_cluster cl;
    ck_assert_int_eq(zt_cluster_start(&cl, 2, 3, "bsp", make_keys(extra, sizeof(extra)), NULL), 0);
    ck_assert(zt_log_has(&cl, 0, "each bound to its ranks or tools"));
    /* the attacker's key through the library: refused at once, by name */
    void *zctx = zmq_ctx_new();
    void *evil = attacker_socket(zctx, &cl, 0);
    ck_assert_int_eq(forge(NULL, 0, evil, 42, true), 1);
    zmq_close(evil);
    zmq_ctx_term(zctx);
    train_under_attack(&cl, true);
    same_as_reference(&cl);
    double_start(&cl);
    ck_assert_int_eq(zt_cluster_stop(&cl), 0);
    char cmd[256];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", keydir);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("fencing");
    TCase *tc = tcase_create("processes");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_plain);
    tcase_add_test(tc, test_curve);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return zt_run_suite(suite());
}
