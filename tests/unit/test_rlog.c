/*
 * test_rlog.c - server/repl/rlog.c, a replicated primary's log and its
 * followers, in process (docs/replication.md): a shard made by
 * zp_server_new_core is told it is the primary (its role set here, as the
 * coordination service would), its ROUTER is an inproc socket, and the
 * backup is a DEALER of a known routing id whose FOLLOW and
 * acknowledgements are handed to zp_rlog_follow and zp_rlog_acked.
 *
 *   - a backup whose last entry is this log's entry (same LSN, same
 *     epoch) follows from the log: no whole state is sent, it is sent the
 *     entries after its own; one whose entry of that LSN was logged at
 *     another epoch (a deposed primary's) is sent the whole state;
 *   - a backup that follows anew forgets what its last link had: one that
 *     was in sync and now needs the whole state is not in sync, and an
 *     acknowledgement of entries the new link never sent is refused;
 *   - a request the primary logs is sent to a following backup, and its
 *     reply released, as it is logged (not at the loop's next pump);
 *   - a shard that logs nothing (one replica, or not the primary) asks
 *     the loop for no replication wake-up;
 *   - the rows of sparse rounds a request logged alone closed are not
 *     attached again to the next batched push;
 *   - a backup being sent the whole state stops following with its
 *     transfer ended when the replica is deposed;
 *   - a request the primary refuses is not logged;
 *   - the frames of batched requests are all released with the shard.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "check_main.h"
#include "inproc.h"
#include "rlog.h"
#include "scratch.h"
#include "server.h"
#include "wire.h"

#define BACKUP_ID "b1"

typedef struct primary {
    zt_shard *z;
    void *backup; /* the backup's DEALER, routing id BACKUP_ID */
    zmq_msg_t id; /* that id, as the ROUTER names it */
} primary;

/* Replica 0 of two, primary at `epoch`, both members live, the in-sync set
 * itself alone (so nothing waits on the backup). */
static void primary_up(primary *p, uint64_t epoch)
{
    char tmp[256]; /* the whole state's files: under the test's own folder */
    ck_assert_int_eq(zt_scratch_dir(tmp, sizeof(tmp), "rlog"), 0);
    setenv("TMPDIR", tmp, 1);
    zp_config *cfg = zt_config("async", 1, 1);
    cfg->replicas = 2;
    cfg->repl_max_lag_ms = 600000; /* lag never decides here, however loaded the machine */
    p->z = zt_shard_start(cfg, 0);
    zp_server *s = p->z->s;
    ck_assert(s->repl.on);
    zp_role *r = &s->role;
    r->kind = ZP_ROLE_PRIMARY;
    r->epoch = epoch;
    r->primary_replica = 0;
    snprintf(r->me, sizeof(r->me), "m0");
    r->nlive = 2;
    snprintf(r->live[0], sizeof(r->live[0]), "m0");
    snprintf(r->live[1], sizeof(r->live[1]), "m1");
    r->isr.version = 1;
    r->isr.epoch = epoch;
    r->isr.n = 1;
    snprintf(r->isr.m[0], sizeof(r->isr.m[0]), "m0");
    int zero = 0;
    s->zctx = zmq_ctx_new();
    s->sock = zmq_socket(s->zctx, ZMQ_ROUTER);
    zmq_setsockopt(s->sock, ZMQ_LINGER, &zero, sizeof(zero));
    ck_assert_int_eq(zmq_bind(s->sock, "inproc://rlog"), 0);
    p->backup = zmq_socket(s->zctx, ZMQ_DEALER);
    zmq_setsockopt(p->backup, ZMQ_LINGER, &zero, sizeof(zero));
    zmq_setsockopt(p->backup, ZMQ_ROUTING_ID, BACKUP_ID, strlen(BACKUP_ID));
    ck_assert_int_eq(zmq_connect(p->backup, "inproc://rlog"), 0);
    zmq_msg_init_size(&p->id, strlen(BACKUP_ID));
    memcpy(zmq_msg_data(&p->id), BACKUP_ID, strlen(BACKUP_ID));
}

static void primary_down(primary *p)
{
    zmq_close(p->backup);
    zmq_msg_close(&p->id);
    zt_shard_free(p->z); /* closes the ROUTER and its context */
}

/* Log `n` entries at the role's epoch (a lost worker's CLOCK each). */
static void log_entries(primary *p, int n)
{
    for (int i = 0; i < n; i++)
        zp_rlog_lost(p->z->s, 0);
}

/* The backup's FOLLOW: replica 1 as member m1 at the primary's epoch,
 * holding entry `lsn` logged at `lsn_epoch` of the log from `base`. */
static void follow(primary *p, uint64_t lsn, uint64_t lsn_epoch, uint64_t base)
{
    Zeps__Header h;
    zeps__header__init(&h);
    h.version = ZP_PROTOCOL_VERSION;
    h.op = ZEPS__OP__FOLLOW;
    h.epoch = p->z->s->role.epoch;
    h.replica = 1;
    h.member = "m1";
    h.lsn = lsn;
    h.lsn_epoch = lsn_epoch;
    h.log_base = base;
    char err[256] = "";
    ck_assert_msg(zp_rlog_follow(p->z->s, &p->id, &h, err, sizeof(err)) == 0, "%s", err);
}

/* The backup acknowledges entry `lsn`: whether the primary took it. */
static bool ack(primary *p, uint64_t lsn)
{
    Zeps__Header h;
    zeps__header__init(&h);
    h.version = ZP_PROTOCOL_VERSION;
    h.op = ZEPS__OP__REPLICATE;
    h.epoch = p->z->s->role.epoch;
    h.lsn = lsn;
    return zp_rlog_acked(p->z->s, &p->id, &h);
}

/* The next REPLICATE the backup got: its LSN, or 0 if none came within a
 * second (a whole state's chunk fails the test). */
static uint64_t next_entry(primary *p)
{
    zmq_pollitem_t it = {.socket = p->backup, .events = ZMQ_POLLIN};
    if (zmq_poll(&it, 1, 1000) != 1)
        return 0;
    zp_frames m;
    ck_assert_int_eq(zp_wire_frames_recv(p->backup, &m, 0), 0);
    Zeps__Header *h = zp_wire_unpack_header(&m.f[0]);
    ck_assert_ptr_nonnull(h);
    ck_assert_int_eq(h->op, ZEPS__OP__REPLICATE);
    ck_assert_msg(!(h->flags & ZP_FLAG_STATE), "a chunk of the whole state, not an entry");
    uint64_t lsn = h->lsn;
    zeps__header__free_unpacked(h, NULL);
    zp_wire_frames_close(&m);
    return lsn;
}

/* primary_up at epoch 1, the backup following from the start and a
 * HELLO of rank 0 logged as entry 1 (its reply goes out through the
 * ROUTER): the shard, which p owns (primary_down frees it). */
static zp_server *hello_logged(primary *p)
{
    primary_up(p, 1);
    zp_server *s = p->z->s;
    follow(p, 0, 0, 0);
    Zeps__Header h = zt_header(p->z, ZEPS__OP__HELLO, 0);
    zt_send(p->z, &h, NULL, 0);
    ck_assert_uint_eq(s->repl.lsn, 1);
    return s;
}

/* Entries 1-5 logged at epoch 1, 6-8 at epoch 2 (a failover between). A
 * backup holding entry 4 of epoch 1 is sent 5-8 from the log; one holding
 * an entry 4 of epoch 2 (which this log never had) gets the whole state. */
START_TEST(test_follow_from_matching_entry)
{
    primary p;
    primary_up(&p, 1);
    zp_server *s = p.z->s;
    log_entries(&p, 5);
    s->role.epoch = 2;
    log_entries(&p, 3);
    ck_assert_uint_eq(s->repl.lsn, 8);

    follow(&p, 4, 1, 0);
    const zp_repl_follower *f = &s->repl.followers[1];
    ck_assert_msg(s->repl.transfers == 0, "a backup whose log matches was sent the whole state");
    ck_assert(f->on && f->xfer.phase == ZP_XFER_NONE);
    ck_assert_uint_eq(f->acked, 4);
    ck_assert_uint_eq(f->sent, 8);
    for (uint64_t lsn = 5; lsn <= 8; lsn++)
        ck_assert_uint_eq(next_entry(&p), lsn);
    ck_assert(ack(&p, 8));
    ck_assert_uint_eq(f->acked, 8);

    follow(&p, 4, 2, 0); /* the same position, another epoch's entry */
    ck_assert_msg(s->repl.transfers == 1, "a backup whose entry 4 differs follows from the log");
    ck_assert(f->on && f->xfer.phase != ZP_XFER_NONE);
    primary_down(&p);
}
END_TEST

/* A backup in sync follows anew from a log this primary cannot serve (it
 * restored another state): the whole state is sent, and until it has it
 * the backup is neither in sync nor acknowledged for entries it had. */
START_TEST(test_follow_anew_forgets)
{
    primary p;
    primary_up(&p, 1);
    zp_server *s = p.z->s;
    log_entries(&p, 3);
    follow(&p, 0, 0, 0);
    for (uint64_t lsn = 1; lsn <= 3; lsn++)
        ck_assert_uint_eq(next_entry(&p), lsn);
    ck_assert(ack(&p, 3));
    ck_assert_msg(zp_rlog_in_sync(s, "m1", false), "caught up, yet not in sync");

    follow(&p, 3, 1, 0x5eed); /* another log's entry 3 */
    const zp_repl_follower *f = &s->repl.followers[1];
    ck_assert_uint_eq(s->repl.transfers, 1);
    ck_assert(f->on && f->xfer.phase != ZP_XFER_NONE);
    ck_assert_uint_eq(f->acked, 0);
    ck_assert_uint_eq(f->sent, 0);
    ck_assert_msg(!zp_rlog_in_sync(s, "m1", false),
                  "a backup being sent the whole state is in sync by its last link");
    ck_assert_msg(!ack(&p, 3), "an acknowledgement of entries this link never sent was taken");
    primary_down(&p);
}
END_TEST

/* A request the primary logs is sent to a following backup as it is
 * logged, and its reply goes out at once when the in-sync set is the
 * primary alone: neither waits for the loop's next pump. */
START_TEST(test_logged_request_sent_at_once)
{
    primary p;
    zp_server *s = hello_logged(&p);
    ck_assert_msg(zp_rlog_held_count(&s->repl) == 0,
                  "the HELLO's reply is held though no backup is in the in-sync set");
    ck_assert_uint_eq(s->repl.followers[1].sent, 1);
    ck_assert_uint_eq(next_entry(&p), 1);
    primary_down(&p);
}
END_TEST

/* A shard that logs nothing (one replica) or is not the primary asks the
 * loop for no replication wake-up: a wake-up it asked for would run its
 * loop every millisecond for nothing (server.c drain_all). */
START_TEST(test_no_wake_without_log)
{
    zt_shard *z = zt_shard_new("async", 1); /* replicas = 1 */
    ck_assert(!z->s->repl.on);
    zp_rlog_pump(z->s);
    ck_assert_msg(z->s->repl.wake_s < 0, "an unreplicated shard asked to be woken in %g s",
                  z->s->repl.wake_s);
    zt_shard_free(z);
    zp_config *cfg = zt_config("async", 1, 1);
    cfg->replicas = 2;
    z = zt_shard_start(cfg, 0); /* a replica not (yet) told it is the primary */
    ck_assert(z->s->repl.on && !zp_role_serves(&z->s->role));
    zp_rlog_pump(z->s);
    ck_assert_msg(z->s->repl.wake_s < 0, "a backup asked to be woken in %g s", z->s->repl.wake_s);
    zt_shard_free(z);
}
END_TEST

/* A request of rank 0 begun on the primary as dispatch begins one: its
 * header frame packed from op and seq, then *payload if not NULL (this
 * call takes it: the log keeps copies, and the frames are closed here);
 * zp_rlog_end closes the request. */
static void begin(primary *p, Zeps__Op op, uint64_t seq, zmq_msg_t *payload)
{
    Zeps__Header h;
    zeps__header__init(&h);
    h.version = ZP_PROTOCOL_VERSION;
    h.op = op;
    h.seq = seq;
    zmq_msg_t f[2];
    zmq_msg_init_size(&f[0], zeps__header__get_packed_size(&h));
    zeps__header__pack(&h, zmq_msg_data(&f[0]));
    if (payload) {
        zmq_msg_init(&f[1]);
        zmq_msg_move(&f[1], payload); /* *payload is left empty */
    }
    ck_assert(zp_rlog_begin(p->z->s, f, payload ? 2 : 1, &p->id, &h));
    zmq_msg_close(&f[0]);
    if (payload)
        zmq_msg_close(&f[1]);
}

/* A request that closed a sparse round and is logged alone (here: none
 * batched before it) carries its merged rows in its own entry; they are
 * not attached again to the next batched push, which closed no round. */
START_TEST(test_rows_logged_alone_forgotten)
{
    primary p;
    primary_up(&p, 1);
    zp_server *s = p.z->s;
    begin(&p, ZEPS__OP__CLOCK, 1, NULL);
    uint64_t id = 7;
    float g = 1.5f;
    zp_rbatch_rows_put(&s->repl.note_rows, 0, 0, &id, 1, &g, 1, NULL); /* round 0 merged */
    ck_assert_uint_eq(s->repl.note_rows.nrec, 1);
    zp_rlog_end(s);
    ck_assert_uint_eq(s->repl.lsn, 1);
    ck_assert_uint_eq(s->repl.batch.n, 0);
    ck_assert_uint_eq(s->repl.note_rows.len, 0);
    ck_assert_uint_eq(s->repl.note_rows.nrec, 0);

    begin(&p, ZEPS__OP__PUSH, 2, NULL); /* a sparse push held for round 1: batched */
    zp_rnote_round_sparse(s, 0, 1, 64);
    zp_rlog_end(s);
    ck_assert_uint_eq(s->repl.batch.n, 1);
    ck_assert_msg(!s->repl.batch.items[0].has_rows && s->repl.batch.rows.nrec == 0,
                  "the push carries %u merged rows of a round it did not close",
                  s->repl.batch.rows.nrec);
    primary_down(&p);
}
END_TEST

/* A backup being sent the whole state stops following when this replica
 * is no longer the primary: its transfer ends with it (no writer child,
 * no state file, no bytes kept for a link that is gone). */
START_TEST(test_off_ends_transfer)
{
    primary p;
    primary_up(&p, 1);
    zp_server *s = p.z->s;
    log_entries(&p, 2);
    follow(&p, 2, 1, 0x5eed); /* another log's entry 2: the whole state */
    const zp_repl_follower *f = &s->repl.followers[1];
    ck_assert(f->on && f->xfer.phase != ZP_XFER_NONE);
    s->role.kind = ZP_ROLE_BACKUP; /* deposed */
    zp_rlog_pump(s);
    ck_assert(!f->on);
    ck_assert_int_eq(f->xfer.phase, ZP_XFER_NONE);
    ck_assert_int_eq(f->xfer.pid, 0);
    ck_assert_str_eq(f->xfer.path, "");
    ck_assert_ptr_null(f->xfer.data);
    primary_down(&p);
}
END_TEST

/* A request the primary refuses (a PUSH to a table it does not have) is
 * not logged: only the HELLO before it is, and the backup is sent that
 * one alone. */
START_TEST(test_refused_not_logged)
{
    primary p;
    zp_server *s = hello_logged(&p);
    const float g[2] = {1, 1};
    zt_push(p.z, 0, 7, 0, g, 2, 0, 0); /* its ERROR goes out through the ROUTER */
    ck_assert_uint_eq(s->repl.lsn, 1);
    ck_assert_uint_eq(zp_rlog_held_count(&s->repl), 0);
    ck_assert_uint_eq(next_entry(&p), 1);
    ck_assert_uint_eq(next_entry(&p), 0);
    primary_down(&p);
}
END_TEST

static int frames_freed;

static void count_free(void *data, void *hint)
{
    (void)hint;
    free(data);
    frames_freed++;
}

/* Ten sparse pushes held for a round (batched), each with a payload
 * frame of its own: every frame the log took is released by the time the
 * shard is freed (the log keeps copies, never the request's frames). */
START_TEST(test_batched_frames_released)
{
    primary p;
    primary_up(&p, 1);
    zp_server *s = p.z->s;
    frames_freed = 0;
    for (uint64_t seq = 1; seq <= 10; seq++) {
        zmq_msg_t payload;
        zmq_msg_init_data(&payload, calloc(1, 256), 256, count_free, NULL);
        begin(&p, ZEPS__OP__PUSH, seq, &payload);
        zp_rnote_round_sparse(s, 0, 1, 64);
        zp_rlog_end(s);
    }
    ck_assert_uint_gt(s->repl.batch.n, 0);
    primary_down(&p);
    ck_assert_int_eq(frames_freed, 10);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("rlog");
    TCase *tc = tcase_create("rlog");
    tcase_add_test(tc, test_follow_from_matching_entry);
    tcase_add_test(tc, test_follow_anew_forgets);
    tcase_add_test(tc, test_logged_request_sent_at_once);
    tcase_add_test(tc, test_no_wake_without_log);
    tcase_add_test(tc, test_rows_logged_alone_forgotten);
    tcase_add_test(tc, test_off_ends_transfer);
    tcase_add_test(tc, test_refused_not_logged);
    tcase_add_test(tc, test_batched_frames_released);
    suite_add_tcase(s, tc);
    return zt_run_suite(s);
}
