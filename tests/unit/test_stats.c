/*
 * test_stats.c - a shard's STATS reply and its /metrics text in process
 * (server/op/stats.c, server/metrics.c, server/state/hist.c, inproc.h):
 * each figure the snapshot carries read back at the value the shard's
 * state gives it, and the same figure in the Prometheus text. The
 * cluster test `metrics` compares the two over real sockets; this one
 * makes the states a real run seldom reaches (a lost worker, a seq jump,
 * an epoch) and checks the exact figures.
 */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check_main.h"
#include "hist.h"
#include "http.h"
#include "inproc.h"
#include "metrics.h"
#include "move.h"
#include "now.h"
#include "ops.h"
#include "stats.h"
#include "zeps_errors.h"

/* STATS asked by a tool; the reply's snapshot (owned by the shard's
 * capture list). */
static const Zeps__ShardStats *stats(zt_shard *z)
{
    Zeps__Header h = zt_header(z, ZEPS__OP__STATS, 0xffffffffu);
    ck_assert_int_eq(zt_send(z, &h, NULL, 0), 1);
    ck_assert_ptr_nonnull(zt_last(z)->h->stats);
    return zt_last(z)->h->stats;
}

/* Asserts that the rendered /metrics text has the line `line`. */
static void has_line(const zp_http_reply *rep, const char *line)
{
    ck_assert_msg(strstr(rep->body, line) != NULL, "/metrics has no line %s", line);
}

/* Two workers: rank 0 pushes and sends a seq jump, rank 1 falls silent
 * past lost_worker_timeout_s and is declared lost; the replica's epoch is
 * set by hand. STATS and /metrics give each figure. */
START_TEST(test_shard_figures)
{
    zp_config *cfg = zt_config("async", 2, 1);
    cfg->lost_worker_timeout_s = 1;
    zt_shard *z = zt_shard_start(cfg, 0);
    zt_hello(z, 0);
    zt_hello(z, 1);
    uint32_t t = zt_declare(z, 0, "w", 3, 0.25);
    float g[3] = {1, 1, 1};
    ck_assert_int_eq(zt_push(z, 0, t, 0, g, 3, 0, 0), 1);
    Zeps__Header h = zt_header(z, ZEPS__OP__PUSH, 0);
    h.table = t;
    h.count = 3;
    h.seq = UINT64_MAX; /* far past the window: refused and counted */
    zt_send(z, &h, g, sizeof(g));
    ck_assert_int_eq(zt_last(z)->h->error, ZEPS_EPROTO);
    z->s->workers.w[1].last_seen_s = zp_now_s() - 100;
    zp_clock_check_lost(z->s);
    z->s->role.epoch = 3;

    const Zeps__ShardStats *st = stats(z);
    ck_assert_uint_eq(st->lost_workers, 1);
    ck_assert_uint_eq(st->epoch, 3);
    ck_assert_uint_eq(st->elections, 0); /* no coordination session */
    ck_assert_uint_eq(st->n_tables, 1);
    const Zeps__TableStats *ts = st->tables[0];
    ck_assert(ts->lr_declared == (double)0.25f);
    ck_assert_uint_eq(ts->bytes_param, zp_table_bytes(z->s->tables[t]));
    ck_assert_uint_ge(ts->bytes_param, 3 * sizeof(float)); /* the slice's values at least */
    ck_assert_uint_eq(st->n_workers, 2);
    ck_assert_uint_eq(st->workers[0]->rank, 0);
    ck_assert_uint_eq(st->workers[0]->seq_jumps, 1);
    ck_assert_uint_eq(st->workers[1]->rank, 1);
    ck_assert_uint_eq(st->workers[1]->seq_jumps, 0);
    ck_assert_uint_eq(st->workers[1]->lost_count, 1);

    zp_http_reply rep = {0};
    zp_metrics_render(z->s, &rep);
    ck_assert_ptr_nonnull(rep.body);
    has_line(&rep, "\nzeps_lost_workers_total 1\n");
    has_line(&rep, "\nzeps_replica_epoch 3\n");
    has_line(&rep, "\nzeps_coord_elections_total 0\n");
    has_line(&rep, "\nzeps_worker_seq_jumps_total{rank=\"0\"} 1\n");
    has_line(&rep, "\nzeps_worker_lost_total{rank=\"1\"} 1\n");
    has_line(&rep, "\nzeps_worker_parked_pulls{rank=\"0\"} 0\n");
    has_line(&rep, "\nzeps_worker_parked_pulls{rank=\"1\"} 0\n");
    has_line(&rep, "\nzeps_slot_map_epoch 0\n");
    has_line(&rep, "\nzeps_slots_owned 4096\n");
    has_line(&rep, "\nzeps_move_in_doubt 0\n");
    free(rep.body);
    /* a move's source in doubt (op/move_ask.c): said by STATS and /metrics */
    zp_move *m = calloc(1, sizeof(*m));
    snprintf(m->doubt, sizeof(m->doubt), "move of 1 slots to shard 1 in doubt for 0.3 s");
    z->s->move = m;
    ck_assert_str_eq(stats(z)->move_doubt, m->doubt);
    memset(&rep, 0, sizeof(rep));
    zp_metrics_render(z->s, &rep);
    has_line(&rep, "\nzeps_move_in_doubt 1\n");
    free(rep.body);
    z->s->move = NULL;
    free(m);
    zt_shard_free(z);
}
END_TEST

/* A sparse table's per-row tau by row frequency in STATS: row 5 pushed
 * twice from version 0 (its 1st touch at tau 0, its 2nd at tau 1). */
START_TEST(test_rows_by_frequency)
{
    zt_shard *z = zt_shard_new("weighted", 1);
    zt_hello(z, 0);
    uint32_t t = zt_declare_sparse(z, "emb", 2);
    uint64_t a = 5;
    float g[2] = {1, 1};
    uint32_t rv0 = 0;
    ck_assert_int_eq(zt_spush(z, 0, t, &a, 1, g, 2, &rv0), 1);
    ck_assert_int_eq(zt_spush(z, 0, t, &a, 1, g, 2, &rv0), 1);
    const Zeps__TableStats *ts = stats(z)->tables[0];
    ck_assert_uint_eq(ts->n_tau_by_freq, 2);
    ck_assert_uint_eq(ts->tau_by_freq[0]->n, 1);
    ck_assert_uint_eq(ts->tau_by_freq[0]->sum, 0);
    ck_assert_uint_eq(ts->tau_by_freq[1]->n, 1);
    ck_assert_uint_eq(ts->tau_by_freq[1]->sum, 1);
    zt_shard_free(z);
}
END_TEST

/* The top frequency bucket in /metrics is open-ended: a row pushed 2^15
 * times is labelled touches="32768+", not a closed range. */
START_TEST(test_top_frequency_label)
{
    zt_shard *z = zt_shard_new("weighted", 1);
    zt_hello(z, 0);
    uint32_t t = zt_declare_sparse(z, "emb", 1);
    uint64_t a = 5;
    float g = 0;
    uint32_t rv0 = 0;
    for (int i = 0; i < 1 << 15; i++) {
        ck_assert_int_eq(zt_spush(z, 0, t, &a, 1, &g, 1, &rv0), 1);
        zt_clear(z);
    }
    ck_assert_uint_eq(stats(z)->tables[0]->n_tau_by_freq, ZP_FREQ_BUCKETS);
    zp_http_reply rep = {0};
    zp_metrics_render(z->s, &rep);
    ck_assert_ptr_nonnull(strstr(rep.body, "touches=\"16384-32767\""));
    const char *top = strstr(rep.body, "touches=\"32768");
    ck_assert_msg(top && strncmp(top, "touches=\"32768+\"", 16) == 0, "the top bucket: %.24s",
                  top ? top : "(none)");
    free(rep.body);
    zt_shard_free(z);
}
END_TEST

/* The snapshot lists the workers of the cluster and no more: a record
 * just past them that looks joined (the test's own array of three for a
 * cluster of two) is not read. */
START_TEST(test_workers_within_cluster)
{
    zt_shard *z = zt_shard_new("async", 2);
    zt_hello(z, 0);
    zt_hello(z, 1);
    zp_worker *real = z->s->workers.w;
    zp_worker *guarded = calloc(3, sizeof(*guarded));
    memcpy(guarded, real, 2 * sizeof(*guarded));
    guarded[2] = guarded[0];
    z->s->workers.w = guarded;
    zp_stats_view v;
    zp_stats_fill(z->s, &v);
    size_t n = v.st.n_workers;
    uint32_t last = n ? v.st.workers[n - 1]->rank : 0;
    zp_stats_view_fini(&v);
    z->s->workers.w = real;
    free(guarded);
    ck_assert_uint_eq(n, 2);
    ck_assert_uint_eq(last, 1);
    zt_shard_free(z);
}
END_TEST

/* A log2 histogram's last bucket holds everything from 2^62 up, the
 * largest value too, and nothing spills past the buckets. */
START_TEST(test_hist_log2_top)
{
    zp_hist h;
    memset(&h, 0, sizeof(h));
    zp_hist_add_log2(&h, UINT64_MAX);
    ck_assert_uint_eq(h.counts[ZP_HIST_BUCKETS - 1], 1);
    ck_assert_uint_eq(h.n, 1);
    ck_assert_uint_eq(h.max, UINT64_MAX);
    zp_hist_add_log2(&h, 1ull << 62);
    ck_assert_uint_eq(h.counts[ZP_HIST_BUCKETS - 1], 2);
    ck_assert_uint_eq(h.n, 2);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("stats");
    TCase *tc = tcase_create("stats");
    tcase_add_test(tc, test_shard_figures);
    tcase_add_test(tc, test_rows_by_frequency);
    tcase_add_test(tc, test_top_frequency_label);
    tcase_add_test(tc, test_workers_within_cluster);
    tcase_add_test(tc, test_hist_log2_top);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return zt_run_suite(suite());
}
