/*
 * test_policy.c - server/policy/: every consistency mode through its ops
 * table, called directly on an in-process shard (inproc.h) with no socket:
 * pull_ready, what becomes of a push (applied, kept, round closed, dropped,
 * late) with its version, weight and tau, the bsp quorum (backup workers,
 * lost workers), the cut, the weighting functions, DC-ASGD's hooks, and the
 * registry.
 */
#include <check.h>
#include <math.h>

#include "check_main.h"
#include "dc.h"
#include "inproc.h"
#include "modes.h"
#include "registry.h"
#include "zeps_errors.h"

/* A push of g[0..n) by `rank` at `clock` from `version`, in a frame. */
typedef struct tpush {
    zmq_msg_t frame;
    zp_push p;
} tpush;

static void tpush_init(tpush *x, uint32_t rank, int64_t clock, uint64_t version, const float *g,
                       size_t n)
{
    zmq_msg_init_size(&x->frame, n * sizeof(float));
    memcpy(zmq_msg_data(&x->frame), g, n * sizeof(float));
    x->p = (zp_push){.rank = rank,
                     .clock = clock,
                     .data_version = version,
                     .g = zmq_msg_data(&x->frame),
                     .off = 0,
                     .count = n,
                     .frame = &x->frame};
}

static int push(zt_shard *z, zp_table *t, uint32_t rank, int64_t clock, uint64_t version,
                const float *g, size_t n, zp_push_result *res)
{
    tpush x;
    tpush_init(&x, rank, clock, version, g, n);
    char err[256];
    memset(res, 0, sizeof(*res));
    int rc = z->s->cons->push(z->s, t, &x.p, res, err, sizeof(err));
    zmq_msg_close(&x.frame);
    return rc;
}

static zp_table *table(zt_shard *z, uint64_t length, double lr)
{
    zt_hello(z, 0);
    uint32_t id = zt_declare(z, 0, "w", length, lr); /* may grow s->tables */
    return z->s->tables[id];
}

START_TEST(test_registry)
{
    static const char *const names[] = {"bsp", "async", "ssp", "weighted"};
    for (size_t i = 0; i < 4; i++) {
        const zp_consistency_ops *ops = zp_registry_find(names[i]);
        ck_assert_ptr_nonnull(ops);
        ck_assert_str_eq(ops->name, names[i]);
        /* every hook filled: code outside policy/ calls them unchecked */
        ck_assert(ops->pull_ready && ops->rows_pull_ready && ops->push && ops->push_rows &&
                  ops->bounds_moved && ops->quorum_changed && ops->forget && ops->cut &&
                  ops->needs_values && ops->cpull_ok && ops->pulled);
    }
    ck_assert_ptr_null(zp_registry_find("eventual"));
    ck_assert_ptr_null(zp_registry_find(NULL));
    ck_assert(zp_bsp_ops.holds_frames);
    ck_assert(!zp_async_ops.holds_frames && !zp_ssp_ops.holds_frames &&
              !zp_weighted_ops.holds_frames);
}
END_TEST

/* bsp: pushes kept until every worker pushed, then the rank-ordered sum
 * applied once, scaled by 1/k; pulls wait for the round. */
START_TEST(test_bsp_round)
{
    zt_shard *z = zt_shard_new("bsp", 3);
    zp_table *t = table(z, 2, 1.0);
    const zp_consistency_ops *c = z->s->cons;
    ck_assert(c->pull_ready(z->s, t, 0, 0));
    ck_assert(!c->pull_ready(z->s, t, 0, 1));
    float g[3][2] = {{0.1f, 1.0f}, {0.2f, 1e8f}, {0.3f, -1e8f}};
    zp_push_result res;
    ck_assert_int_eq(push(z, t, 2, 0, 0, g[2], 2, &res), 0);
    ck_assert_int_eq(res.outcome, ZP_PUSH_KEPT);
    ck_assert_int_eq(push(z, t, 0, 0, 0, g[0], 2, &res), 0);
    ck_assert_int_eq(res.outcome, ZP_PUSH_KEPT);
    ck_assert_uint_eq(t->version, 0);
    ck_assert_int_eq(push(z, t, 1, 0, 0, g[1], 2, &res), 0);
    ck_assert_int_eq(res.outcome, ZP_PUSH_ROUND_CLOSED);
    ck_assert(res.applied);
    ck_assert_int_eq(res.round, 0);
    ck_assert_uint_eq(res.version_applied, 0);
    ck_assert_int_eq(res.nheld, 3);
    for (int r = 0; r < 3; r++)
        ck_assert_uint_eq(res.held_rank[r], (uint32_t)r); /* rank order */
    ck_assert_uint_eq(t->version, 1);
    ck_assert(c->pull_ready(z->s, t, 0, 1));
    /* rank order: (0.1 + 0.2) + 0.3 and (1 + 1e8) - 1e8 = 0 in f32 (any
     * order starting from rank 1 or 2 gives (1e8 - 1e8) + 1 = 1), then / 3 */
    float s0 = (g[0][0] + g[1][0]) + g[2][0], s1 = (g[0][1] + g[1][1]) + g[2][1];
    ck_assert_float_eq_tol(t->params->data[0], 1.0f - s0 / 3.0f, 1e-6f);
    ck_assert_float_eq(t->params->data[1], 1.0f - s1 * (1.0f / 3.0f));
    ck_assert_int_eq(c->cut(z->s), 1);
    zt_shard_free(z);
}
END_TEST

START_TEST(test_bsp_refusals)
{
    zt_shard *z = zt_shard_new("bsp", 2);
    zp_table *t = table(z, 2, 1.0);
    float g[2] = {1, 1};
    zp_push_result res;
    tpush x;
    tpush_init(&x, 0, 0, 0, g, 1); /* half the slice */
    char err[256];
    ck_assert_int_eq(z->s->cons->push(z->s, t, &x.p, &res, err, sizeof(err)), ZEPS_ERANGE);
    zmq_msg_close(&x.frame);
    ck_assert_int_eq(push(z, t, 0, 1, 0, g, 2, &res), ZEPS_ECLOCK); /* the round is 0 */
    ck_assert_int_eq(push(z, t, 0, 0, 0, g, 2, &res), 0);
    ck_assert_int_eq(push(z, t, 0, 0, 0, g, 2, &res), ZEPS_ESTATE); /* twice */
    z->s->cons->forget(z->s, t, 0); /* it rejoined: its push is dropped */
    ck_assert_int_eq(t->round.npending, 0);
    ck_assert_int_eq(push(z, t, 0, 0, 0, g, 2, &res), 0);
    ck_assert_int_eq(res.outcome, ZP_PUSH_KEPT);
    ck_assert_int_eq(push(z, t, 1, 0, 0, g, 2, &res), 0);
    ck_assert_int_eq(res.outcome, ZP_PUSH_ROUND_CLOSED);
    /* round 0 closed: worker 0 finished clock 0 and pushes for it again (a
     * step sent with an older step's clock): refused, not dropped; worker 1
     * has not finished it (declared lost and back): dropped as late */
    z->s->workers.w[0].clock = 1;
    float before = t->params->data[0];
    ck_assert_int_eq(push(z, t, 0, 0, 0, g, 2, &res), ZEPS_ECLOCK);
    ck_assert_int_eq(push(z, t, 1, 0, 0, g, 2, &res), 0);
    ck_assert_int_eq(res.outcome, ZP_PUSH_LATE);
    ck_assert_uint_eq(res.reply_flags, ZP_FLAG_DROPPED);
    /* a new incarnation of worker 0 redoing clock 0, which its predecessor
     * finished here (hello_clock 1): dropped as late, not refused */
    z->s->workers.w[0].hello_clock = 1;
    ck_assert_int_eq(push(z, t, 0, 0, 0, g, 2, &res), 0);
    ck_assert_uint_eq(res.reply_flags, ZP_FLAG_DROPPED);
    ck_assert_float_eq(t->params->data[0], before);
    zt_shard_free(z);
}
END_TEST

/* bsp: a dense table declared after clock 0 starts at the round its
 * declarer is in (it hung: a pull at that clock waited for rounds the new
 * table never had). */
START_TEST(test_bsp_late_declare)
{
    zt_shard *z = zt_shard_new("bsp", 2);
    zt_hello(z, 0);
    zt_hello(z, 1);
    z->s->workers.w[0].clock = 3;
    z->s->workers.w[1].clock = 2;
    z->s->workers.min_clock = 2;
    uint32_t id = zt_declare(z, 0, "late", 2, 1.0); /* may grow s->tables */
    zp_table *t = z->s->tables[id];
    ck_assert_int_eq(t->round.closed, 3);
    ck_assert(z->s->cons->pull_ready(z->s, t, 0, 3));
    float g[2] = {1, 1};
    zp_push_result res;
    ck_assert_int_eq(push(z, t, 0, 3, 0, g, 2, &res), 0);
    ck_assert_int_eq(push(z, t, 1, 3, 0, g, 2, &res), 0);
    ck_assert_int_eq(res.outcome, ZP_PUSH_ROUND_CLOSED);
    ck_assert_int_eq(t->round.closed, 4);
    zt_shard_free(z);
}
END_TEST

/* backup_workers = 1: a round of 3 closes with 2 pushes; the third is late:
 * dropped, or applied scaled by w(tau) with late_pushes = weighted. */
START_TEST(test_bsp_backup_late)
{
    for (int weighted = 0; weighted < 2; weighted++) {
        zp_config *cfg = zt_config("bsp", 3, 1);
        cfg->backup_workers = 1;
        cfg->late_weighted = weighted;
        cfg->weight_fn = ZP_WEIGHT_INVERSE;
        zt_shard *z = zt_shard_start(cfg, 0);
        zp_table *t = table(z, 1, 1.0);
        float g[1] = {1.0f};
        zp_push_result res;
        push(z, t, 0, 0, 0, g, 1, &res);
        push(z, t, 1, 0, 0, g, 1, &res);
        ck_assert_int_eq(res.outcome, ZP_PUSH_ROUND_CLOSED);
        ck_assert_int_eq(res.nheld, 2);
        ck_assert_float_eq(t->params->data[0], 0.0f);
        ck_assert_int_eq(push(z, t, 2, 0, 0, g, 1, &res), 0);
        ck_assert_int_eq(res.outcome, ZP_PUSH_LATE);
        ck_assert_uint_eq(res.tau, 1);
        if (weighted) {
            ck_assert(res.applied);
            ck_assert_double_eq(res.weight, 0.5);
            ck_assert_uint_eq(res.reply_flags, 0);
            ck_assert_float_eq(t->params->data[0], -0.5f);
        } else {
            ck_assert(!res.applied);
            ck_assert_uint_eq(res.reply_flags, ZP_FLAG_DROPPED);
            ck_assert_float_eq(t->params->data[0], 0.0f);
        }
        zt_shard_free(z);
    }
}
END_TEST

/* on_lost_worker = continue: a worker declared lost lowers the quorum, and
 * the round waiting for it closes through quorum_changed. */
START_TEST(test_bsp_lost_quorum)
{
    zp_config *cfg = zt_config("bsp", 2, 1);
    cfg->lost_continue = true;
    zt_shard *z = zt_shard_start(cfg, 0);
    zp_table *t = table(z, 1, 1.0);
    float g[1] = {1.0f};
    zp_push_result res;
    push(z, t, 0, 0, 0, g, 1, &res);
    ck_assert(!z->s->cons->quorum_changed(z->s, t, &res));
    ck_assert_int_eq(zp_workers_quorum(&z->s->workers, true, 0), 2);
    z->s->workers.w[1].lost = true;
    ck_assert_int_eq(zp_workers_quorum(&z->s->workers, true, 0), 1);
    ck_assert_int_eq(zp_workers_quorum(&z->s->workers, false, 0), 2);
    memset(&res, 0, sizeof(res));
    ck_assert(z->s->cons->quorum_changed(z->s, t, &res));
    ck_assert_int_eq(res.outcome, ZP_PUSH_ROUND_CLOSED);
    ck_assert_int_eq(res.nheld, 1);
    ck_assert_uint_eq(t->version, 1);
    ck_assert(!zp_async_ops.quorum_changed(z->s, t, &res));
    zt_shard_free(z);
}
END_TEST

/* The cut: the round every dense table stands at, -1 when they differ;
 * always -1 in modes without cuts. */
START_TEST(test_cut)
{
    zt_shard *z = zt_shard_new("bsp", 1);
    zt_hello(z, 0);
    ck_assert_int_eq(z->s->cons->cut(z->s), -1); /* no tables */
    zt_declare(z, 0, "a", 1, 1.0);
    zt_declare(z, 0, "b", 1, 1.0);
    zp_table *a = z->s->tables[0];
    ck_assert_int_eq(z->s->cons->cut(z->s), 0);
    float g[1] = {1};
    zp_push_result res;
    push(z, a, 0, 0, 0, g, 1, &res);
    ck_assert_int_eq(z->s->cons->cut(z->s), -1);
    ck_assert_int_eq(zp_async_ops.cut(z->s), -1);
    ck_assert_int_eq(zp_weighted_ops.cut(z->s), -1);
    zt_shard_free(z);
}
END_TEST

START_TEST(test_async)
{
    zt_shard *z = zt_shard_new("async", 2);
    zp_table *t = table(z, 2, 0.5);
    ck_assert(z->s->cons->pull_ready(z->s, t, 1, 1000));
    float g[2] = {2.0f, 4.0f};
    zp_push_result res;
    push(z, t, 0, 0, 0, g, 2, &res);
    push(z, t, 1, 0, 0, g, 2, &res); /* read version 0, applied at 1 */
    ck_assert_int_eq(res.outcome, ZP_PUSH_APPLIED);
    ck_assert_uint_eq(res.version_applied, 1);
    ck_assert_uint_eq(res.tau, 1);
    ck_assert_double_eq(res.weight, 1.0); /* the full step whatever tau */
    ck_assert_float_eq(t->params->data[1], 1.0f - 2.0f * 0.5f * 4.0f);
    zt_shard_free(z);
}
END_TEST

/* ssp: a pull at clock c waits for min_clock >= c - s, with the table's own
 * bound before the cluster's. */
START_TEST(test_ssp)
{
    zp_config *cfg = zt_config("ssp", 2, 1);
    cfg->staleness = 2;
    zt_shard *z = zt_shard_start(cfg, 0);
    zp_table *t = table(z, 1, 1.0);
    const zp_consistency_ops *c = z->s->cons;
    ck_assert(c->pull_ready(z->s, t, 0, 2));
    ck_assert(!c->pull_ready(z->s, t, 0, 3));
    ck_assert(!c->rows_pull_ready(z->s, t, 0, 3));
    z->s->workers.min_clock = 1;
    ck_assert(c->pull_ready(z->s, t, 0, 3));
    t->has_staleness = true;
    t->staleness = 0;
    ck_assert_uint_eq(zp_ssp_bound(z->s, t), 0);
    ck_assert(!c->pull_ready(z->s, t, 0, 3));
    ck_assert(c->pull_ready(z->s, t, 0, 1));
    zt_shard_free(z);
}
END_TEST

START_TEST(test_weights)
{
    ck_assert_double_eq(zp_weighted_weight(ZP_WEIGHT_INVERSE, 0, 3), 0.25);
    ck_assert_double_eq(zp_weighted_weight(ZP_WEIGHT_LR_OVER_TAU, 0, 4), 0.25);
    ck_assert_double_eq(zp_weighted_weight(ZP_WEIGHT_LR_OVER_TAU, 0, 0), 1.0);
    ck_assert_double_eq_tol(zp_weighted_weight(ZP_WEIGHT_EXP, 0.5, 2), exp(-1.0), 1e-15);
    ck_assert_double_eq(zp_weighted_weight(ZP_WEIGHT_NONE, 0, 9), 1.0);
}
END_TEST

/* weighted: scaled by w(tau), dropped past max_staleness, pulls held by
 * `bound`. */
START_TEST(test_weighted)
{
    zp_config *cfg = zt_config("weighted", 2, 1);
    cfg->weight_fn = ZP_WEIGHT_INVERSE;
    cfg->max_staleness = 1;
    cfg->weighted_bound = 1;
    zt_shard *z = zt_shard_start(cfg, 0);
    zp_table *t = table(z, 1, 1.0);
    const zp_consistency_ops *c = z->s->cons;
    ck_assert(c->pull_ready(z->s, t, 0, 1));
    ck_assert(!c->pull_ready(z->s, t, 0, 2));
    float g[1] = {1.0f};
    zp_push_result res;
    push(z, t, 0, 0, 0, g, 1, &res);
    ck_assert_double_eq(res.weight, 1.0);
    push(z, t, 1, 0, 0, g, 1, &res); /* tau 1: w = 1/2 */
    ck_assert_int_eq(res.outcome, ZP_PUSH_APPLIED);
    ck_assert_double_eq(res.weight, 0.5);
    ck_assert_float_eq(t->params->data[0], 1.0f - 1.0f - 0.5f);
    push(z, t, 1, 0, 0, g, 1, &res); /* tau 2 > max_staleness */
    ck_assert_int_eq(res.outcome, ZP_PUSH_DROPPED);
    ck_assert(!res.applied);
    ck_assert_uint_eq(res.tau, 2);
    ck_assert_uint_eq(res.reply_flags, ZP_FLAG_DROPPED);
    ck_assert_uint_eq(t->version, 2);
    zt_shard_free(z);
}
END_TEST

/* DC-ASGD: the policy remembers the buffer each worker pulled and
 * compensates its next push against it; it needs values and refuses
 * compressed pulls. */
START_TEST(test_weighted_dc)
{
    zp_config *cfg = zt_config("weighted", 2, 1);
    cfg->weight_fn = ZP_WEIGHT_NONE;
    cfg->dc_lambda = 0.5;
    zt_shard *z = zt_shard_start(cfg, 0);
    zp_table *t = table(z, 1, 1.0);
    const zp_consistency_ops *c = z->s->cons;
    ck_assert(c->needs_values(z->s));
    ck_assert(!c->cpull_ok(z->s));
    ck_assert(!zp_async_ops.needs_values(z->s) && zp_async_ops.cpull_ok(z->s));
    zt_pull(z, 1, 0, 0, 1, 0); /* rank 1 pulled w = 1: not joined, refused */
    zt_hello(z, 1);
    zt_pull(z, 1, 0, 0, 1, 0);
    ck_assert_ptr_nonnull(zp_dc_pulled(&t->dc, 1));
    ck_assert_ptr_null(zp_dc_pulled(&t->dc, 0));
    float g[1] = {2.0f};
    zp_push_result res;
    push(z, t, 0, 0, 0, g, 1, &res); /* never pulled: plain, w = 1 - 2 = -1 */
    ck_assert_float_eq(t->params->data[0], -1.0f);
    push(z, t, 1, 0, 0, g, 1, &res); /* g + 0.5 g^2 (w_now - w_stale) = 2 + 2 * (-2) */
    ck_assert_float_eq(t->params->data[0], -1.0f + 2.0f);
    zt_shard_free(z);
}
END_TEST

/* DC-ASGD-a: lambda scaled by the running mean square of the pushed
 * gradients, which a push updates whether or not its sender pulled. */
START_TEST(test_weighted_dc_adaptive)
{
    zp_config *cfg = zt_config("weighted", 2, 1);
    cfg->weight_fn = ZP_WEIGHT_NONE;
    cfg->dc_lambda = 0.5;
    cfg->dc_mean_square = 0.75;
    zt_shard *z = zt_shard_start(cfg, 0);
    zp_table *t = table(z, 1, 1.0);
    zt_hello(z, 1);
    zt_pull(z, 1, 0, 0, 1, 0); /* rank 1 holds w = 1 */
    float g[1] = {2.0f};
    zp_push_result res;
    push(z, t, 0, 0, 0, g, 1, &res); /* not pulled: plain, w = -1; ms = 0.25 * 4 = 1 */
    ck_assert_float_eq(t->params->data[0], -1.0f);
    ck_assert_float_eq_tol(t->dc.ms[0], 1.0f, 1e-6f);
    /* ms = 0.75 + 0.25 * 4 = 1.75; g + 0.5 / sqrt(1.75) * 4 * (-1 - 1) */
    push(z, t, 1, 0, 0, g, 1, &res);
    float want = -1.0f - (2.0f - 0.5f / sqrtf(1.75f + 1e-7f) * 4.0f * 2.0f);
    ck_assert_float_eq_tol(t->params->data[0], want, 1e-5f);
    ck_assert_float_eq_tol(t->dc.ms[0], 1.75f, 1e-6f);
    ck_assert_uint_eq(zp_dc_bytes(&t->dc, 1), 2 * sizeof(float));
    zt_shard_free(z);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("policy");
    TCase *tc = tcase_create("modes");
    tcase_add_test(tc, test_registry);
    tcase_add_test(tc, test_bsp_round);
    tcase_add_test(tc, test_bsp_refusals);
    tcase_add_test(tc, test_bsp_late_declare);
    tcase_add_test(tc, test_bsp_backup_late);
    tcase_add_test(tc, test_bsp_lost_quorum);
    tcase_add_test(tc, test_cut);
    tcase_add_test(tc, test_async);
    tcase_add_test(tc, test_ssp);
    tcase_add_test(tc, test_weights);
    tcase_add_test(tc, test_weighted);
    tcase_add_test(tc, test_weighted_dc);
    tcase_add_test(tc, test_weighted_dc_adaptive);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return zt_run_suite(suite());
}
