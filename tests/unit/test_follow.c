/*
 * test_follow.c - server/repl/follow.c, a backup following its primary,
 * in process (docs/replication.md): a shard made by zp_server_new_core is
 * told it is the backup of a primary at an inproc endpoint, which is a
 * ROUTER of this test; the test answers the backup's FOLLOW and sends it
 * entries, and the shard's apply is replaced by one that looks, at the
 * moment the entry is applied, at what the primary has received.
 *
 *   - the last entry that arrived is acknowledged before it is applied:
 *     the primary holds the acknowledgement of entry 1 when the backup
 *     applies entry 1 (the primary's reply then overlaps the apply);
 *   - entries that arrived together get one acknowledgement, the last's,
 *     sent before the last is applied and not before: nothing has reached
 *     the primary when entry 1 of two is applied;
 *   - every entry is applied, in order, and kept in the backup's log
 *     before its acknowledgement leaves;
 *   - an entry sent again (a new FOLLOW resends what the backup may have)
 *     is neither applied nor acknowledged a second time.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>
#include <zmq.h>

#include "check_main.h"
#include "follow.h"
#include "inproc.h"
#include "server.h"
#include "wire.h"

#define PRIMARY_EP "inproc://follow-primary"

typedef struct backup {
    zt_shard *z;
    void *primary; /* the test's ROUTER, where the backup's link connects */
    zmq_msg_t id;  /* the backup's routing id, from its FOLLOW */
} backup;

/* What the replaced apply saw, per entry applied (in order). */
static struct {
    backup *b;
    int n;
    uint64_t lsn[8];   /* the backup's log end as it applied */
    uint64_t acked[8]; /* the highest LSN the primary had been acknowledged by then */
    int wait_ms;       /* how long apply waits for an acknowledgement */
} seen;

/* The primary's next message from the backup within ms: its header
 * (unpacked, the caller frees it) or NULL. */
static Zeps__Header *primary_recv(backup *b, int ms)
{
    zmq_pollitem_t it = {.socket = b->primary, .events = ZMQ_POLLIN};
    if (zmq_poll(&it, 1, ms) != 1)
        return NULL;
    zp_frames m;
    ck_assert_int_eq(zp_wire_frames_recv(b->primary, &m, 0), 0);
    ck_assert_int_ge(m.n, 2);
    Zeps__Header *h = zp_wire_unpack_header(&m.f[1]);
    ck_assert_ptr_nonnull(h);
    if (zmq_msg_size(&b->id) == 0)
        zmq_msg_copy(&b->id, &m.f[0]);
    zp_wire_frames_close(&m);
    return h;
}

/* Take the acknowledgements that reached the primary within ms (a
 * message within ms, then whatever else is there at once): the highest
 * LSN acknowledged, or `acked` if none came. */
static uint64_t primary_acks(backup *b, int ms, uint64_t acked)
{
    Zeps__Header *h;
    while ((h = primary_recv(b, ms)) != NULL) {
        ck_assert_int_eq(h->op, ZEPS__OP__REPLICATE);
        if (h->lsn > acked)
            acked = h->lsn;
        zeps__header__free_unpacked(h, NULL);
        ms = 0;
    }
    return acked;
}

static void seen_apply(zp_server *s, zmq_msg_t *f, int n)
{
    (void)f;
    (void)n;
    ck_assert_int_lt(seen.n, 8);
    uint64_t before = seen.n ? seen.acked[seen.n - 1] : 0;
    seen.lsn[seen.n] = s->repl.lsn;
    seen.acked[seen.n] = primary_acks(seen.b, seen.wait_ms, before);
    seen.n++;
}

static void no_kick(zp_server *s)
{
    (void)s;
}

/* Replica 1 of two, backup at epoch 1 of the primary at PRIMARY_EP (this
 * test's ROUTER); the link opened, its FOLLOW received and answered. */
static void backup_up(backup *b)
{
    zp_config *cfg = zt_config("async", 1, 1);
    cfg->replicas = 2;
    b->z = zt_shard_start(cfg, 0);
    zp_server *s = b->z->s;
    ck_assert(s->repl.on);
    ck_assert_int_eq(uv_loop_init(&s->loop), 0); /* the link's poll handle lives on it */
    s->zctx = zmq_ctx_new();
    int zero = 0;
    b->primary = zmq_socket(s->zctx, ZMQ_ROUTER);
    zmq_setsockopt(b->primary, ZMQ_LINGER, &zero, sizeof(zero));
    ck_assert_int_eq(zmq_bind(b->primary, PRIMARY_EP), 0);
    zmq_msg_init(&b->id);
    zp_role *r = &s->role;
    r->kind = ZP_ROLE_BACKUP;
    r->epoch = 1;
    r->primary_replica = 0;
    snprintf(r->primary_endpoint, sizeof(r->primary_endpoint), "%s", PRIMARY_EP);
    snprintf(r->me, sizeof(r->me), "m1");
    s->follow.apply = seen_apply;
    s->follow.kick = no_kick;
    memset(&seen, 0, sizeof(seen));
    seen.b = b;
    zp_follow_check(s); /* opens the link and sends FOLLOW */
    Zeps__Header *h = primary_recv(b, 2000);
    ck_assert_msg(h && h->op == ZEPS__OP__FOLLOW, "no FOLLOW from the backup");
    zeps__header__free_unpacked(h, NULL);
    Zeps__Header a;
    zeps__header__init(&a);
    a.version = ZP_PROTOCOL_VERSION;
    a.op = ZEPS__OP__FOLLOW;
    a.epoch = 1;
    zmq_msg_t id;
    zmq_msg_init(&id);
    zmq_msg_copy(&id, &b->id);
    ck_assert_int_ge(zmq_msg_send(&id, b->primary, ZMQ_SNDMORE), 0);
    ck_assert_int_eq(zp_wire_send_header(b->primary, &a, 0), 0);
}

static void backup_down(backup *b)
{
    zp_server *s = b->z->s;
    zp_follow_stop(s);
    uv_run(&s->loop, UV_RUN_NOWAIT); /* the poll handle's close callback */
    ck_assert_int_eq(uv_loop_close(&s->loop), 0);
    zmq_close(b->primary);
    zmq_msg_close(&b->id);
    zt_shard_free(b->z); /* terminates the context */
}

/* Entry `lsn` of epoch 1: [REPLICATE][a PUSH header]. */
static void send_entry(backup *b, uint64_t lsn)
{
    Zeps__Header h, req;
    zeps__header__init(&h);
    h.version = ZP_PROTOCOL_VERSION;
    h.op = ZEPS__OP__REPLICATE;
    h.epoch = 1;
    h.lsn = lsn;
    h.lsn_epoch = 1;
    zeps__header__init(&req);
    req.version = ZP_PROTOCOL_VERSION;
    req.op = ZEPS__OP__PUSH;
    req.seq = lsn;
    zmq_msg_t id;
    zmq_msg_init(&id);
    zmq_msg_copy(&id, &b->id);
    ck_assert_int_ge(zmq_msg_send(&id, b->primary, ZMQ_SNDMORE), 0);
    ck_assert_int_eq(zp_wire_send_header(b->primary, &h, ZMQ_SNDMORE), 0);
    ck_assert_int_eq(zp_wire_send_header(b->primary, &req, 0), 0);
}

/* The backup's loop turn, until it took `n` entries (inproc delivery is
 * not instant: a second at most). */
static void backup_take(backup *b, int n)
{
    zp_server *s = b->z->s;
    for (int i = 0; i < 200 && seen.n < n; i++) {
        zp_follow_check(s);
        if (seen.n < n)
            zmq_poll(NULL, 0, 5);
    }
    ck_assert_int_eq(seen.n, n);
}

/* One entry: acknowledged before it is applied. */
START_TEST(test_ack_before_apply)
{
    backup b;
    backup_up(&b);
    seen.wait_ms = 2000; /* the acknowledgement is on its way when apply begins */
    send_entry(&b, 1);
    backup_take(&b, 1);
    ck_assert_uint_eq(seen.lsn[0], 1);
    ck_assert_msg(seen.acked[0] == 1,
                  "entry 1 applied before its acknowledgement left (the primary had %llu)",
                  (unsigned long long)seen.acked[0]);
    ck_assert_uint_eq(b.z->s->follow.acked, 1);
    backup_down(&b);
}
END_TEST

/* Two entries waiting together: no acknowledgement while the first is
 * applied (one for both follows), that of entry 2 before entry 2 is. */
START_TEST(test_one_ack_for_entries_together)
{
    backup b;
    backup_up(&b);
    send_entry(&b, 1);
    send_entry(&b, 2);
    zmq_poll(NULL, 0, 100); /* both delivered to the backup's link */
    seen.wait_ms = 100;     /* long enough for an acknowledgement in flight over inproc */
    backup_take(&b, 2);
    ck_assert_uint_eq(seen.lsn[0], 1);
    ck_assert_uint_eq(seen.lsn[1], 2);
    ck_assert_msg(seen.acked[0] == 0, "entry 1 of two acknowledged alone (%llu)",
                  (unsigned long long)seen.acked[0]);
    ck_assert_msg(seen.acked[1] == 2, "entry 2 applied before its acknowledgement left (%llu)",
                  (unsigned long long)seen.acked[1]);
    ck_assert_uint_eq(primary_acks(&b, 100, 0), 0); /* nothing more: one acknowledgement */
    backup_down(&b);
}
END_TEST

/* Entry 1, then entry 1 again and entry 2: the copy is skipped, entry 2
 * applied; two applies in all. */
START_TEST(test_entry_again_not_applied)
{
    backup b;
    backup_up(&b);
    seen.wait_ms = 100;
    send_entry(&b, 1);
    backup_take(&b, 1);
    send_entry(&b, 1);
    send_entry(&b, 2);
    backup_take(&b, 2);
    zp_follow_check(b.z->s); /* anything left */
    ck_assert_int_eq(seen.n, 2);
    ck_assert_msg(seen.lsn[1] == 2, "entry 1 sent again was applied again");
    ck_assert_uint_eq(seen.acked[1], 2);
    backup_down(&b);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("follow");
    TCase *tc = tcase_create("follow");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_ack_before_apply);
    tcase_add_test(tc, test_one_ack_for_entries_together);
    tcase_add_test(tc, test_entry_again_not_applied);
    suite_add_tcase(s, tc);
    return zt_run_suite(s);
}
