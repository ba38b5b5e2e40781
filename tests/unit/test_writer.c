/*
 * test_writer.c - the snapshot writer child of a shard in process
 * (server/state/persist.c).
 *
 * The child keeps no descriptor of the shard's: a pipe's write end open in
 * the parent when the writer forks must reach EOF once the parent closes
 * it, while the child still runs (it waits here on the manifest lock the
 * test holds). A child that kept the shard's descriptors kept its
 * listening socket too, so a shard SIGKILLed while a writer ran could not
 * be restarted on its address ("Address already in use") until the writer
 * finished. And the child dies with the shard: a SIGKILLed shard's writer
 * that lived on recorded its set after the restarted shard restored an
 * older one, and its prune removed the set the job rolled back to.
 *
 * A SNAPSHOT request outside bsp names its set as asked, and one that
 * names none (set 0) gets the wall-clock second: never set 0.
 *
 * Auto snapshots under bsp (snapshot_mtbf_s): the first at clock 1; the
 * time per clock measured between rounds from the second on; none (and
 * no division by an interval of 0 clocks) before a tick has chosen the
 * interval from that first snapshot. A ROLLBACK of no recovery to a set
 * the shard wrote rolls it back when it stands past that cut
 * (server/state/restore.c), and does nothing when it stands at it; a
 * late ROLLBACK of a recovery before the last is done already. A set
 * written under a slot map is restored, and a restart leaks nothing.
 */
#include <check.h>
#include <fcntl.h>
#include <malloc.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check_main.h"
#include "scratch.h"
#include "inproc.h"
#include "now.h"
#include "persist.h"
#include "restore.h"
#include "slotmap.h"

/* A config of `mode` (1 worker, 1 shard) whose snapshots go to a new
 * scratch folder, its path into dir[0..len). The caller's. */
static zp_config *snap_config(const char *mode, char *dir, size_t len)
{
    ck_assert_int_eq(zt_scratch_dir(dir, len, "writer"), 0);
    zp_config *cfg = zt_config(mode, 1, 1);
    snprintf(cfg->snapshot_dir, sizeof(cfg->snapshot_dir), "%s", dir);
    return cfg;
}

START_TEST(test_child_closes_inherited)
{
    char dir[160];
    zp_config *cfg = snap_config("async", dir, sizeof(dir));
    zt_shard *z = zt_shard_start(cfg, 0);
    zt_hello(z, 0);
    zt_declare(z, 0, "w", 16, 1.0);

    char lock[256];
    snprintf(lock, sizeof(lock), "%s/MANIFEST.lock", dir);
    int lfd = open(lock, O_RDWR | O_CREAT, 0644);
    ck_assert_int_ge(lfd, 0);
    ck_assert_int_eq(flock(lfd, LOCK_EX), 0); /* the child will wait for it */
    int p[2];
    ck_assert_int_eq(pipe(p), 0); /* stands for the shard's sockets */

    ck_assert_int_eq(zp_persist_start(z->s, -1, 7, "test"), 0);
    close(p[1]);
    struct pollfd pfd = {.fd = p[0], .events = POLLIN};
    int ready = poll(&pfd, 1, 3000);
    char c;
    ssize_t n = ready == 1 ? read(p[0], &c, 1) : -1;
    ck_assert_int_eq(flock(lfd, LOCK_UN), 0);
    close(lfd);
    ck_assert_msg(ready == 1 && n == 0,
                  "the writer child still holds a descriptor of its parent (poll %d, read %zd)",
                  ready, n);
    close(p[0]);

    zp_persist_reap(z->s, 1);
    ck_assert_uint_eq(z->s->persist.written, 1); /* and it wrote its set */
    zt_shard_free(z);
    ck_assert_int_eq(zt_scratch_remove(dir), 0);
}
END_TEST

/* A shard SIGKILLed while its writer waits (on the manifest lock the test
 * holds): the writer dies with it and never records its set, which would
 * otherwise complete after a restarted shard restored an older one and
 * prune that one away. */
START_TEST(test_child_dies_with_shard)
{
    char dir[160];
    ck_assert_int_eq(zt_scratch_dir(dir, sizeof(dir), "writer"), 0);
    char lock[256], manifest[256];
    snprintf(lock, sizeof(lock), "%s/MANIFEST.lock", dir);
    snprintf(manifest, sizeof(manifest), "%s/MANIFEST", dir);
    int lfd = open(lock, O_RDWR | O_CREAT, 0644);
    ck_assert_int_ge(lfd, 0);
    ck_assert_int_eq(flock(lfd, LOCK_EX), 0);
    int p[2];
    ck_assert_int_eq(pipe(p), 0);
    pid_t shard = fork();
    ck_assert_int_ge(shard, 0);
    if (shard == 0) { /* the shard: starts its writer, says so, waits to be killed */
        close(lfd);
        zp_config *cfg = zt_config("async", 1, 1);
        snprintf(cfg->snapshot_dir, sizeof(cfg->snapshot_dir), "%s", dir);
        zt_shard *z = zt_shard_start(cfg, 0);
        zt_hello(z, 0);
        zt_declare(z, 0, "w", 16, 1.0);
        int rc = zp_persist_start(z->s, -1, 7, "test");
        char c = rc == 0 ? 'y' : 'n';
        if (write(p[1], &c, 1) != 1)
            _exit(1);
        for (;;)
            pause();
    }
    close(p[1]);
    char c = 0;
    ck_assert_int_eq(read(p[0], &c, 1), 1);
    ck_assert_int_eq(c, 'y');
    close(p[0]);
    ck_assert_int_eq(kill(shard, SIGKILL), 0);
    ck_assert_int_eq(waitpid(shard, NULL, 0), shard);
    usleep(300 * 1000);
    ck_assert_int_eq(flock(lfd, LOCK_UN), 0); /* a writer still alive records its set now */
    close(lfd);
    usleep(1000 * 1000);
    ck_assert_msg(access(manifest, F_OK) != 0,
                  "the writer of a SIGKILLed shard outlived it and recorded its set");
    ck_assert_int_eq(zt_scratch_remove(dir), 0);
}
END_TEST

/* The set id of the writer started last (the slot of the highest pid
 * would not do: pids wrap), by its start. */
static uint64_t newest_setid(const zp_server *s)
{
    const zp_writer *newest = NULL;
    for (int i = 0; i < ZP_PERSIST_WRITERS; i++) {
        const zp_writer *w = &s->persist.writers[i];
        if (w->pid > 0 && (!newest || w->started >= newest->started))
            newest = w;
    }
    ck_assert_ptr_nonnull(newest);
    return newest->setid;
}

/* The wall-clock second as the shard reads it (CLOCK_REALTIME). */
static uint64_t wall_second(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec;
}

START_TEST(test_request_set_id)
{
    char dir[160], err[256] = "";
    zp_config *cfg = snap_config("async", dir, sizeof(dir));
    zt_shard *z = zt_shard_start(cfg, 0);
    zt_hello(z, 0);
    zt_declare(z, 0, "w", 16, 1.0);
    ck_assert_msg(zp_persist_request(z->s, -1, 1, err, sizeof(err)) == 0, "%s", err);
    ck_assert_uint_eq(newest_setid(z->s), 1); /* as asked */
    zp_persist_reap(z->s, 1);
    uint64_t before = wall_second(); /* the shard's clock: time() is the coarse one, which
                                        can still say the last second */
    ck_assert_msg(zp_persist_request(z->s, -1, 0, err, sizeof(err)) == 0, "%s", err);
    uint64_t after = wall_second(), id = newest_setid(z->s);
    ck_assert_msg(id >= before && id <= after,
                  "a SNAPSHOT naming no set wrote set %llu, not the wall-clock second (%llu)",
                  (unsigned long long)id, (unsigned long long)before);
    zp_persist_reap(z->s, 1);
    ck_assert_uint_eq(z->s->persist.written, 2);
    ck_assert_uint_eq(z->s->persist.last_setid, id);
    zt_shard_free(z);
    ck_assert_int_eq(zt_scratch_remove(dir), 0);
}
END_TEST

/* One worker's round under bsp: its push of `clock`, then its CLOCK. */
static void round_of(zt_shard *z, uint32_t t, int64_t clock)
{
    float g[16] = {0};
    zt_push(z, 0, t, 0, g, 16, clock, 0);
    Zeps__Header h = zt_header(z, ZEPS__OP__CLOCK, 0);
    h.clock = clock;
    zt_send(z, &h, NULL, 0);
}

/* Worker 0's HELLO, the dense table "w" (16, sgd lr 1) declared, and its
 * rounds of clocks 0 to n - 1 under bsp, the writer of each reaped. */
static void rounds_written(zt_shard *z, int64_t n)
{
    zt_hello(z, 0);
    uint32_t t = zt_declare(z, 0, "w", 16, 1.0);
    for (int64_t c = 0; c < n; c++) {
        round_of(z, t, c);
        zp_persist_reap(z->s, 1);
    }
}

/* auto snapshots under bsp (snapshot_mtbf_s): the first at clock 1; the
 * time per clock measured from the second round on, between rounds (not
 * from the clock's zero); and until the next tick chooses the interval
 * from that first snapshot, no auto snapshot (and no crash: every 0
 * clocks is no interval). */
START_TEST(test_auto_first_rounds)
{
    char dir[160];
    zp_config *cfg = snap_config("bsp", dir, sizeof(dir));
    cfg->snapshot_mtbf_s = 3600;
    zt_shard *z = zt_shard_start(cfg, 0);
    zp_persist *p = &z->s->persist;
    zt_hello(z, 0);
    uint32_t t = zt_declare(z, 0, "w", 16, 1.0);
    double t0 = zp_now_s();
    round_of(z, t, 0);
    ck_assert_int_eq(z->s->cons->cut(z->s), 1);
    ck_assert_int_eq(p->last_cut, 1); /* the first auto snapshot, at clock 1 */
    ck_assert(p->round_s == 0);       /* one round: nothing measured yet */
    zp_persist_reap(z->s, 1);
    ck_assert_uint_eq(p->written, 1);
    ck_assert_int_eq(p->auto_every_clocks, 0); /* no tick yet */
    round_of(z, t, 1);
    double t1 = zp_now_s();
    ck_assert_int_eq(z->s->cons->cut(z->s), 2);
    ck_assert_int_eq(p->last_cut, 1); /* no interval chosen: no snapshot */
    ck_assert_msg(p->round_s > 0 && p->round_s <= t1 - t0,
                  "time per clock %g s, the two rounds took %g s", p->round_s, t1 - t0);
    zt_shard_free(z);
    ck_assert_int_eq(zt_scratch_remove(dir), 0);
}
END_TEST

/* A bsp shard with a snapshot every 2 clocks to a new scratch folder (its
 * path into dir[0..len)), n rounds written: the shard and the folder are
 * the caller's (zt_shard_free, zt_scratch_remove). */
static zt_shard *bsp_rounds_written(char *dir, size_t len, int64_t n)
{
    zp_config *cfg = snap_config("bsp", dir, len);
    cfg->snapshot_every_clocks = 2;
    zt_shard *z = zt_shard_start(cfg, 0);
    rounds_written(z, n);
    return z;
}

/* A ROLLBACK of no recovery (0) to a set the shard wrote two clocks ago
 * rolls the state back to that cut (server/state/restore.c): standing past
 * the cut is not standing at it. */
START_TEST(test_rollback_past_cut)
{
    char dir[160], err[256] = "";
    zt_shard *z = bsp_rounds_written(dir, sizeof(dir), 4);
    ck_assert_uint_eq(z->s->persist.written, 2); /* sets 2 and 4 */
    ck_assert_int_eq(z->s->cons->cut(z->s), 4);
    bool rolled = false;
    ck_assert_msg(zp_restore_rollback(z->s, 2, 2, 0, 0, &rolled, err, sizeof(err)) == 0, "%s", err);
    ck_assert_msg(rolled, "a shard at clock 4 took a rollback to clock 2 as done already");
    ck_assert_int_eq(z->s->cons->cut(z->s), 2);
    ck_assert_int_eq(z->s->restored_clock, 2);
    rolled = true; /* now it stands at the cut it came from: nothing to do */
    ck_assert_msg(zp_restore_rollback(z->s, 2, 2, 0, 0, &rolled, err, sizeof(err)) == 0, "%s", err);
    ck_assert(!rolled);
    zt_shard_free(z);
    ck_assert_int_eq(zt_scratch_remove(dir), 0);
}
END_TEST

/* Two recoveries in a row (A to clock 4, then B to clock 2): a late
 * ROLLBACK of A (a worker that asks after the others) is done already,
 * and does not take the shard forward again to A's cut. */
START_TEST(test_recoveries_remembered)
{
    char dir[160], err[256] = "";
    zt_shard *z = bsp_rounds_written(dir, sizeof(dir), 6);
    ck_assert_uint_eq(z->s->persist.written, 3); /* sets 2, 4 and 6 */
    bool rolled = false;
    ck_assert_msg(zp_restore_rollback(z->s, 4, 4, 0xa, 0, &rolled, err, sizeof(err)) == 0, "%s",
                  err);
    ck_assert(rolled);
    ck_assert_msg(zp_restore_rollback(z->s, 2, 2, 0xb, 0, &rolled, err, sizeof(err)) == 0, "%s",
                  err);
    ck_assert(rolled);
    ck_assert_int_eq(z->s->cons->cut(z->s), 2);
    int rc = zp_restore_rollback(z->s, 4, 4, 0xa, 1, &rolled, err, sizeof(err));
    ck_assert_msg(rc == 0 && !rolled, "a late ROLLBACK of recovery a: %d, rolled %d (%s)", rc,
                  rolled, err);
    ck_assert_int_eq(z->s->cons->cut(z->s), 2);
    ck_assert_uint_eq(z->s->rollbacks, 2);
    zt_shard_free(z);
    ck_assert_int_eq(zt_scratch_remove(dir), 0);
}
END_TEST

/* A config of `mode` on snapshot folder `dir` and the map file `map`. */
static zp_config *map_config(const char *mode, const char *dir, const char *map)
{
    zp_config *cfg = zt_config(mode, 1, 1);
    snprintf(cfg->snapshot_dir, sizeof(cfg->snapshot_dir), "%s", dir);
    snprintf(cfg->slot_map, sizeof(cfg->slot_map), "%s", map);
    cfg->snapshot_every_clocks = 2;
    return cfg;
}

/* A shard under a slot map of epoch 1 writes a set (which carries that
 * map); started again on it twice, it restores the set (its map checked
 * against the shard's own, of the same epoch), and the second start and
 * free leave the heap in use as they found it (the first may fill the
 * libraries' caches). */
START_TEST(test_restart_under_map_flat)
{
    char dir[160], mdir[160], map[200];
    ck_assert_int_eq(zt_scratch_dir(dir, sizeof(dir), "writer"), 0);
    ck_assert_int_eq(zt_scratch_dir(mdir, sizeof(mdir), "writer_map"), 0);
    snprintf(map, sizeof(map), "%s/slots.map", mdir);
    zt_scratch_write(map, "epoch 1\nslots 4096\n0-4095 0\n");
    zt_shard *z = zt_shard_start(map_config("bsp", dir, map), 0);
    rounds_written(z, 2);
    ck_assert_uint_eq(z->s->persist.written, 1);
    zt_shard_free(z);
    size_t before = 0;
    for (int k = 0; k < 2; k++) {
        before = mallinfo2().uordblks;
        z = zt_shard_start(map_config("bsp", dir, map), 0);
        char err[256] = "";
        ck_assert_msg(zp_restore_newest(z->s, err, sizeof(err)) == 0, "%s", err);
        ck_assert_int_eq(z->s->restored_clock, 2);
        ck_assert_uint_eq(zp_slotmap_epoch(z->s->slots), 1);
        zt_shard_free(z);
    }
    size_t after = mallinfo2().uordblks;
    ck_assert_msg(after < before + 4096, "a restart grew the heap by %zd bytes",
                  (ssize_t)(after - before));
    ck_assert_int_eq(zt_scratch_remove(dir), 0);
    ck_assert_int_eq(zt_scratch_remove(mdir), 0);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("writer");
    TCase *tc = tcase_create("writer");
    tcase_add_test(tc, test_child_closes_inherited);
    tcase_add_test(tc, test_child_dies_with_shard);
    tcase_add_test(tc, test_request_set_id);
    tcase_add_test(tc, test_auto_first_rounds);
    tcase_add_test(tc, test_rollback_past_cut);
    tcase_add_test(tc, test_recoveries_remembered);
    tcase_add_test(tc, test_restart_under_map_flat);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return zt_run_suite(suite());
}
