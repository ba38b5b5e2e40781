/*
 * test_dense_range.c - dense tables placed by range with real shards
 * (docs/elastic.md, "Dense tables by range").
 *
 * Two shards under async; two clients declare dense table 'w' (100
 * elements, sgd, lr 1, zeros) on the default slices. A tool sends both
 * shards a map (SLOTS, epoch 1) that gives elements [0, 30) to shard 1,
 * while no push has reached the table: shard 1 now holds two pieces,
 * [0, 30) and [50, 100), and shard 0 one, [30, 50). The clients still cut
 * by the default slices: the first one's first push, and the second
 * one's first pull, meet EMOVED from shard 0 (the range begins in shard
 * 1's piece); each takes the map and sends the range again, cut by the
 * pieces, once. Every push is applied exactly
 * once (sgd from zeros, lr 1: the values are minus the sums of the
 * integer gradients), pulls return them through the pieces, a client
 * made after the map is never redirected, each shard's SCAN holds
 * exactly its pieces (shard 1's page cursor goes from one piece to the
 * next) and gives them as series of their own in /metrics (label
 * `piece`, no series twice); a map that would give written elements away is refused by the
 * shard that wrote them and changes nothing; a map that cuts a written
 * piece in two is taken (the parts keep their values), and a client that
 * cuts by the older map is redirected to the same shard and applies its
 * push once. Under bsp a
 * shard cuts a piece whose open round holds a push: the parts hold its
 * parts, and the round closes on them with the bits of the whole piece.
 */
#include <check.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_main.h"
#include "harness.h"
#include "httpget.h"
#include "rawreq.h"
#include "slotmap.h"
#include "wire.h"
#include "zeps.h"

#define LEN 100

static zeps_client_stats stats(const zeps_client *c)
{
    zeps_client_stats st;
    zeps_client_get_stats(c, &st);
    return st;
}

static uint32_t declare(zeps_client *c)
{
    zeps_table_spec spec = {
        .name = "w", .length = LEN, .optimizer = "sgd", .lr = 1.0, .init = "zeros", .seed = 1};
    uint32_t t;
    ck_assert_int_eq(zeps_declare(c, &spec, &t), 0);
    return t;
}

/* Send shard k of cl `m` as a tool's SLOTS; the reply's header (the
 * caller frees it). */
static Zeps__Header *send_map_to(const zt_cluster *cl, int k, const zp_slotmap *m)
{
    size_t len = zp_slotmap_wire_size(m);
    unsigned char *buf = malloc(len);
    zp_slotmap_encode(m, buf);
    void *ctx = zmq_ctx_new(), *sock = zt_raw_socket(ctx, cl, k);
    Zeps__Header h;
    zeps__header__init(&h);
    h.version = ZP_PROTOCOL_VERSION;
    h.op = ZEPS__OP__SLOTS;
    h.req_id = 1;
    h.rank = 0xffffffffu;
    Zeps__Header *rep = zt_raw_req(sock, &h, buf, len);
    zmq_close(sock);
    zmq_ctx_term(ctx);
    free(buf);
    return rep;
}

/* The same to both shards, into rep[0..2). */
static void send_map(const zt_cluster *cl, const zp_slotmap *m, Zeps__Header **rep)
{
    for (int k = 0; k < 2; k++)
        rep[k] = send_map_to(cl, k, m);
}

/* The values of every element, pulled by c, equal want. */
static void check_values(zeps_client *c, uint32_t t, const float *want)
{
    float got[LEN];
    ck_assert_int_eq(zeps_pull(c, t, got, 0, LEN, 0), 0);
    for (int i = 0; i < LEN; i++)
        ck_assert_msg(got[i] == want[i], "element %d: %g, want %g", i, (double)got[i],
                      (double)want[i]);
}

/* Shard k's SCAN of t, page by page: the elements it holds, in order, as
 * "lo-hi " items of its pages, and their values equal want. */
static void check_scan(zeps_client *c, uint32_t t, int k, const float *want, const char *expect)
{
    char got[128] = "";
    uint64_t cursor = 0;
    do {
        zeps_page p;
        ck_assert_int_eq(zeps_scan(c, t, k, cursor, 0, &p), 0);
        snprintf(got + strlen(got), sizeof(got) - strlen(got), "%llu-%llu ",
                 (unsigned long long)p.offset, (unsigned long long)(p.offset + p.count));
        const float *v = p.data;
        for (uint64_t i = 0; i < p.count; i++)
            ck_assert(v[i] == want[p.offset + i]);
        cursor = p.next;
        zeps_page_release(&p);
    } while (cursor != 0);
    ck_assert_msg(strcmp(got, expect) == 0, "shard %d scans '%s', want '%s'", k, got, expect);
}

/* After test_placed_by_range's pushes (want: the values): a map giving
 * written elements away is refused; a cut of a written piece is taken,
 * and a client that cut by the map before is redirected to the same
 * shard and applies its push once. */
static void written_pieces(const zt_cluster *cl, zeps_client **c, const uint32_t *t,
                           const zp_slotmap *m, float *want)
{
    zp_slotmap *m2 = NULL;
    Zeps__Header *rep[2];
    char err[256];
    float ones[LEN];
    for (int i = 0; i < LEN; i++)
        ones[i] = 1.0f;
    /* written elements do not move by SLOTS: the shard that wrote them
     * refuses (a tool sends the giver first), nothing changed */
    ck_assert_int_eq(zp_slotmap_dense_moved(m, "w", LEN, 30, 50, 1, &m2, err, sizeof(err)), 0);
    rep[0] = send_map_to(cl, 0, m2);
    ck_assert_int_eq(rep[0]->op, ZEPS__OP__ERROR);
    ck_assert_int_eq(rep[0]->error, ZEPS_ESTATE);
    ck_assert_ptr_nonnull(strstr(rep[0]->error_text, "gives element 30 of dense table 'w'"));
    zeps__header__free_unpacked(rep[0], NULL);
    check_values(c[0], t[0], want);
    check_scan(c[0], t[0], 0, want, "30-50 ");
    zp_slotmap_destroy(&m2);

    /* a cut of a written piece (no owner changes) is taken: shard 1 keeps
     * what [50, 100) held in [50, 75) and [75, 100); c[0], at epoch 1,
     * pushes [50, 100), which leaves the piece: redirected to shard 1
     * itself, cut by the map of epoch 2, applied once */
    ck_assert_int_eq(zp_slotmap_dense_moved(m, "w", LEN, 75, LEN, 1, &m2, err, sizeof(err)), 0);
    send_map(cl, m2, rep);
    for (int k = 0; k < 2; k++) {
        ck_assert_msg(rep[k]->op == ZEPS__OP__SLOTS, "cut: %s",
                      rep[k]->error_text ? rep[k]->error_text : "?");
        zeps__header__free_unpacked(rep[k], NULL);
    }
    check_scan(c[2], t[2], 1, want, "0-30 50-75 75-100 ");
    for (int i = 50; i < LEN; i++)
        want[i] -= 1.0f;
    ck_assert_int_eq(zeps_push(c[0], t[0], ones + 50, 50, 50, 0), 0);
    ck_assert_uint_eq(stats(c[0]).slot_redirects, 2);
    ck_assert_uint_eq(stats(c[0]).slot_epoch, 2);
    check_values(c[0], t[0], want);
    check_values(c[1], t[1], want);
    zp_slotmap_destroy(&m2);
}

/* /metrics of each shard: shard 1's two pieces of 'w' are two series,
 * told apart by their piece label; shard 0's one piece has none; no
 * series twice (a scrape Prometheus would refuse). */
static void check_metrics(const zt_cluster *cl)
{
    static char text[1 << 20];
    zt_http_get(zt_metrics_port(cl, 1), "/metrics", text, sizeof(text));
    zt_metrics_unique(text);
    ck_assert_ptr_nonnull(strstr(text, "\nzeps_table_pushes_total{table=\"w\",piece=\"0-30\"} "));
    ck_assert_ptr_nonnull(strstr(text, "\nzeps_table_pushes_total{table=\"w\",piece=\"50-100\"} "));
    zt_http_get(zt_metrics_port(cl, 0), "/metrics", text, sizeof(text));
    zt_metrics_unique(text);
    ck_assert_ptr_nonnull(strstr(text, "\nzeps_table_pushes_total{table=\"w\"} "));
}

START_TEST(test_placed_by_range)
{
    zt_cluster cl;
    ck_assert_int_eq(
        zt_cluster_start(&cl, 2, 3, "async", "  metrics_listen = \"127.0.0.1:0\";", NULL), 0);
    zeps_client *c[3] = {zt_client(&cl, 0), zt_client(&cl, 1), NULL};
    ck_assert(c[0] && c[1]);
    uint32_t t[3] = {declare(c[0]), declare(c[1]), 0};

    /* the map: [0, 30) of 'w' on shard 1, nothing written yet */
    zp_slotmap *d = NULL, *m = NULL;
    char err[256];
    ck_assert_int_eq(zp_slotmap_new_default(&d, 2), 0);
    ck_assert_int_eq(zp_slotmap_dense_moved(d, "w", LEN, 0, 30, 1, &m, err, sizeof(err)), 0);
    Zeps__Header *rep[2];
    send_map(&cl, m, rep);
    for (int k = 0; k < 2; k++) {
        ck_assert_msg(rep[k]->op == ZEPS__OP__SLOTS, "SLOTS to shard %d: %s", k,
                      rep[k]->error_text ? rep[k]->error_text : "?");
        zeps__header__free_unpacked(rep[k], NULL);
    }

    /* stale clients: redirected once each, every push applied once */
    float g0[LEN], g1[LEN], want[LEN];
    for (int i = 0; i < LEN; i++) {
        g0[i] = (float)(1 + i % 5);
        g1[i] = 2.0f;
        want[i] = -g0[i] - (i >= 20 && i < 70 ? g1[i] : 0.0f);
    }
    ck_assert_int_eq(zeps_push(c[0], t[0], g0, 0, LEN, 0), 0);
    float got[LEN]; /* c[1]'s first request, a pull, is redirected */
    ck_assert_int_eq(zeps_pull(c[1], t[1], got, 0, LEN, 0), 0);
    for (int i = 0; i < LEN; i++)
        ck_assert_msg(got[i] == -g0[i], "element %d: %g after one push", i, (double)got[i]);
    ck_assert_int_eq(zeps_push(c[1], t[1], g1 + 20, 20, 50, 0), 0);
    for (int i = 0; i < 2; i++) {
        ck_assert_uint_eq(stats(c[i]).slot_redirects, 1);
        ck_assert_uint_eq(stats(c[i]).slot_epoch, 1);
    }
    check_values(c[0], t[0], want);
    check_values(c[1], t[1], want);
    ck_assert_uint_eq(stats(c[0]).slot_redirects, 1); /* the pull was cut by the map */

    /* a client made now has the map from HELLO and is never redirected */
    c[2] = zt_client(&cl, 2);
    ck_assert_ptr_nonnull(c[2]);
    t[2] = declare(c[2]);
    float ones[LEN];
    for (int i = 0; i < LEN; i++) {
        ones[i] = 1.0f;
        want[i] -= 1.0f;
    }
    ck_assert_int_eq(zeps_push(c[2], t[2], ones, 0, LEN, 0), 0);
    check_values(c[2], t[2], want);
    ck_assert_uint_eq(stats(c[2]).slot_redirects, 0);

    /* each shard holds exactly its pieces */
    check_scan(c[2], t[2], 0, want, "30-50 ");
    check_scan(c[2], t[2], 1, want, "0-30 50-100 ");
    check_metrics(&cl);

    written_pieces(&cl, c, t, m, want);

    zp_slotmap_destroy(&m);
    zp_slotmap_destroy(&d);
    for (int i = 0; i < 3; i++)
        zeps_client_destroy(&c[i]);
    ck_assert_int_eq(zt_cluster_stop(&cl), 0);
}
END_TEST

/* Under bsp a shard cuts a piece whose open round holds a push: each part
 * holds its part of the push, and the round closes there with the other
 * worker's push, sent again cut by the new map, with the bits of a round
 * on the whole piece: sgd from zeros, lr 1, two workers, -(g0 + g1) / 2. */
START_TEST(test_cut_under_bsp)
{
    zt_cluster cl;
    ck_assert_int_eq(zt_cluster_start(&cl, 2, 2, "bsp", NULL, NULL), 0);
    zeps_client *c[2] = {zt_client(&cl, 0), zt_client(&cl, 1)};
    ck_assert(c[0] && c[1]);
    uint32_t t[2] = {declare(c[0]), declare(c[1])};
    float g[2][LEN], want[LEN], got[LEN];
    for (int i = 0; i < LEN; i++) {
        g[0][i] = (float)(i % 7 + 1); /* unlike at 0 and at 30, where the cut is */
        g[1][i] = (float)(i % 5);
        want[i] = -(g[0][i] + g[1][i]) / 2;
    }
    ck_assert_int_eq(zeps_push(c[0], t[0], g[0], 0, LEN, 0), 0); /* held: round 0 is open */
    zp_slotmap *d = NULL, *m = NULL;
    char err[256];
    ck_assert_int_eq(zp_slotmap_new_default(&d, 2), 0);
    /* giving [0, 30) to its own holder cuts shard 0's piece at 30 */
    ck_assert_int_eq(zp_slotmap_dense_moved(d, "w", LEN, 0, 30, 0, &m, err, sizeof(err)), 0);
    Zeps__Header *rep[2];
    send_map(&cl, m, rep);
    for (int k = 0; k < 2; k++) {
        ck_assert_msg(rep[k]->op != ZEPS__OP__ERROR, "shard %d: %s", k, rep[k]->error_text);
        zeps__header__free_unpacked(rep[k], NULL);
    }
    ck_assert_int_eq(zeps_push(c[1], t[1], g[1], 0, LEN, 0), 0); /* EMOVED, sent again cut */
    ck_assert_uint_eq(stats(c[1]).slot_redirects, 1);
    for (int w = 0; w < 2; w++) {
        ck_assert_int_eq(zeps_pull(c[w], t[w], got, 0, LEN, 1), 0); /* round 0 applied */
        for (int i = 0; i < LEN; i++)
            ck_assert_msg(got[i] == want[i], "worker %d, element %d: %g, want %g", w, i,
                          (double)got[i], (double)want[i]);
    }
    check_scan(c[1], t[1], 0, want, "0-30 30-50 ");
    zp_slotmap_destroy(&m);
    zp_slotmap_destroy(&d);
    for (int w = 0; w < 2; w++)
        zeps_client_destroy(&c[w]);
    ck_assert_int_eq(zt_cluster_stop(&cl), 0);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("dense_range");
    TCase *tc = tcase_create("cluster");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_placed_by_range);
    tcase_add_test(tc, test_cut_under_bsp);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return zt_run_suite(suite());
}
