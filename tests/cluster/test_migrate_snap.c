/*
 * test_migrate_snap.c - snapshots of a cluster whose slot map a live move
 * changed (docs/elastic.md "Snapshots", docs/snapshots.md "The slot map
 * of a set"), with real shards, real worker processes, the real
 * `zepsctl shards move` and `zepsctl snapshot reshard`, and kill -9.
 *
 * test_restore_after_move: three shards with snapshot_dir; two worker
 * processes push every id over and over (sgd, lr 1, zeros: the counter
 * oracle of test_migrate) while zepsctl moves half of shard 0's slots to
 * shard 2; then a snapshot set is taken, every shard's rows are SCANned,
 * every shard is killed with -9 and started again from the set. The rows
 * SCANned after are the rows before, byte for byte, each on the shard the
 * moved map names; every shard serves that map (epoch 1, newer than the
 * cluster file's default); a new client pushes every id once without a
 * redirect and reads the oracle plus one. The set resharded (3 to 3, and
 * to 2) holds the same rows placed by the default map of its count.
 * Then a cluster file whose map (epoch 5) is newer than the set's: a
 * shard refuses the set, naming both epochs. Last, shard 2's file with a
 * byte of its slot map damaged: the shard refuses to start, naming the
 * file and the section.
 *
 * test_snapshot_during_move: a set taken while a move is between its
 * copy and its commit (steps driven by hand, as a tool of its own would)
 * holds every row once: the source's file has the moving rows (it owns
 * them until the commit), the target's file leaves out the rows it
 * imported; the set is recorded.
 */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <zmq.h>

#include "check_main.h"
#include "harness.h"
#include "move_fixture.h"
#include "rawreq.h"
#include "slotmap.h"
#include "snapshot.h"
#include "sparse_hash.h"
#include "wire.h"
#include "zeps.h"

#define WORKERS 2
#define REC     ZEPS_ROW_RECORD_BYTES(DIM, 0) /* sgd: no state */

static int by_id(const void *a, const void *b)
{
    uint64_t x, y;
    memcpy(&x, a, 8);
    memcpy(&y, b, 8);
    return x < y ? -1 : x > y;
}

/* Every row of table t on shard k (SCAN), sorted by id; their count. */
static uint64_t scan_shard(zeps_client *c, uint32_t t, int k, uint8_t **out)
{
    uint64_t n = 0, cursor = 0;
    *out = NULL;
    do {
        zeps_page p;
        ck_assert_msg(zeps_scan(c, t, k, cursor, 700, &p) == 0, "%s", zeps_last_error(c));
        ck_assert_uint_eq(p.state_per_value, 0);
        *out = realloc(*out, (size_t)((n + p.count) * REC) + 1);
        memcpy(*out + n * REC, p.data, (size_t)p.bytes);
        n += p.count;
        cursor = p.next;
        zeps_page_release(&p);
    } while (cursor != 0);
    qsort(*out, (size_t)n, REC, by_id);
    return n;
}

/* The map the move commits: shard 0's slots below 2048 on shard 2, epoch 1. */
static zp_slotmap *moved_map(void)
{
    zp_slotmap *d = NULL, *next = NULL;
    ck_assert_int_eq(zp_slotmap_new_default(&d, 3), 0);
    uint8_t which[4095];
    char err[256];
    ck_assert_int_eq(zp_slotmap_parse_set("0-2047", 4095, which, err, sizeof(err)), 2048);
    for (int k = 0; k < 4095; k++)
        which[k] = which[k] && zp_slotmap_slot_owner(d, (uint32_t)k) == 0;
    ck_assert_int_eq(zp_slotmap_moved(d, which, 2, &next), 0);
    zp_slotmap_destroy(&d);
    return next;
}

/* Every shard's rows: each where `m` puts it, every id once, each the
 * oracle (`total` pushes, `weighted` in column 1). */
static void check_rows(uint8_t *const rows[3], const uint64_t n[3], const zp_slotmap *m, long total,
                       long weighted)
{
    ck_assert_uint_eq(n[0] + n[1] + n[2], NIDS);
    for (int k = 0; k < 3; k++)
        for (uint64_t i = 0; i < n[k]; i++) {
            const uint8_t *r = rows[k] + i * REC;
            uint64_t id;
            float v[DIM];
            memcpy(&id, r, 8);
            memcpy(v, r + 24, sizeof(v));
            ck_assert_msg(zp_slotmap_owner(m, id) == k, "id %llu is on shard %d, the map says %d",
                          (unsigned long long)id, k, zp_slotmap_owner(m, id));
            ck_assert_msg(v[0] == (float)total && v[1] == (float)weighted,
                          "id %llu: %g pushes applied (%g weighted), %ld (%ld) answered",
                          (unsigned long long)id, v[0], v[1], total, weighted);
        }
}

/* Push (as worker 0 of new incarnations) every id once while the map
 * moves under them, then stop: the pushes answered, summed over workers,
 * into *total and *weighted. */
static void push_and_move(zt_cluster *cl, long *total, long *weighted)
{
    char stop[400], out[WORKERS][400], log[400];
    snprintf(stop, sizeof(stop), "%s/stop", cl->dir);
    snprintf(log, sizeof(log), "%s/move.log", cl->dir);
    pid_t pids[WORKERS];
    for (int w = 0; w < WORKERS; w++) {
        snprintf(out[w], sizeof(out[w]), "%s/worker-%d.out", cl->dir, w);
        pids[w] = fork();
        ck_assert_int_ge(pids[w], 0);
        if (pids[w] == 0)
            zt_move_push_worker(cl, w, stop, out[w]);
    }
    zeps_client *tl = zt_move_tool(cl);
    for (int i = 0; i < 600; i++) { /* the move begins once the workers push */
        Zeps__ShardStats *st = zt_stats(tl, 0);
        ck_assert_ptr_nonnull(st);
        uint64_t pushes = st->n_tables > 0 ? st->tables[0]->pushes : 0;
        zeps__shard_stats__free_unpacked(st, NULL);
        if (pushes >= 2 * WORKERS)
            break;
        usleep(50 * 1000);
    }
    zeps_client_destroy(&tl);
    char *args[] = {"shards",  "move",   "--config", cl->conf, "--from",      "0",  "--to", "2",
                    "--slots", "0-2047", "--page",   "512",    "--threshold", "64", NULL};
    int st = zt_move_zepsctl(log, args);
    zt_move_print_file(log);
    ck_assert_int_eq(st, 0);
    for (int w = 0; w < WORKERS; w++) /* they pushed all along */
        ck_assert_int_eq(waitpid(pids[w], NULL, WNOHANG), 0);
    FILE *f = fopen(stop, "w");
    fclose(f);
    *total = *weighted = 0;
    for (int w = 0; w < WORKERS; w++) {
        int ws = zt_wait(pids[w], 60);
        ck_assert_msg(ws >= 0 && WIFEXITED(ws) && WEXITSTATUS(ws) == 0, "worker %d failed", w);
        long p = 0;
        FILE *o = fopen(out[w], "r");
        ck_assert_int_eq(fscanf(o, "%ld", &p), 1);
        fclose(o);
        *total += p;
        *weighted += p * (w + 1);
    }
}

/* The newest set of `dir` resharded by zepsctl onto `s2` shards: format 1
 * files whose rows are those of rows[] (every id once, byte for byte),
 * each where the default map of s2 puts it. */
static void check_reshard(const char *dir, const char *logdir, int s2, uint8_t *const rows[3],
                          const uint64_t n[3])
{
    char dst[400], log[400], s2s[8];
    snprintf(dst, sizeof(dst), "%s/resharded-%d", logdir, s2);
    snprintf(log, sizeof(log), "%s/reshard-%d.log", logdir, s2);
    snprintf(s2s, sizeof(s2s), "%d", s2);
    char *args[] = {"snapshot", "reshard", (char *)dir, dst, s2s, NULL};
    int st = zt_move_zepsctl(log, args);
    zt_move_print_file(log);
    ck_assert_int_eq(st, 0);
    zp_manifest *m = NULL;
    char err[512];
    ck_assert_int_eq(zp_manifest_load(dst, &m, err, sizeof(err)), 0);
    const zp_snap_set *set = zp_manifest_newest(m);
    ck_assert_ptr_nonnull(set);
    uint64_t seen = 0;
    for (int j = 0; j < s2; j++) {
        char path[600];
        zp_snapshot *s = NULL;
        ck_assert_int_eq(
            zp_snapshot_path(path, sizeof(path), dst, set->setid, (uint32_t)j, (uint32_t)s2), 0);
        ck_assert_msg(zp_snapshot_read(path, &s, err, sizeof(err)) == 0, "%s", err);
        ck_assert_uint_eq(s->h.format, ZP_SNAP_FORMAT_V1); /* the default map: no map recorded */
        ck_assert_ptr_null(s->slotmap);
        const zp_snap_table *t = &s->tables[0];
        uint64_t nr;
        memcpy(&nr, t->rows, 8);
        for (uint64_t i = 0; i < nr; i++) {
            const uint8_t *r = t->rows + ZP_SNAP_ROWS_HDR + i * REC;
            uint64_t id;
            memcpy(&id, r, 8);
            ck_assert_int_eq(zp_sparse_shard_of(id, s2), j);
            const uint8_t *was = NULL;
            for (int k = 0; k < 3 && !was; k++)
                was = bsearch(r, rows[k], (size_t)n[k], REC, by_id);
            ck_assert_msg(was && memcmp(was, r, REC) == 0, "id %llu changed in the reshard",
                          (unsigned long long)id);
        }
        seen += nr;
        zp_snapshot_free(&s);
    }
    ck_assert_uint_eq(seen, NIDS);
    zp_manifest_free(&m);
}

/* As worker 0 on the restored cluster: one more push of every id, read
 * back as the oracle plus one, without a redirect (the map came with
 * HELLO). */
static void push_once(zeps_client *c, uint32_t t, long total, long weighted)
{
    static uint64_t ids[NIDS];
    static float g[NIDS * DIM], rows[NIDS * DIM];
    zt_move_ids(ids, NIDS, 0);
    for (int i = 0; i < NIDS * DIM; i++)
        g[i] = -1.0f;
    ck_assert_msg(zeps_spush(c, t, ids, NIDS, g, 0) == 0, "%s", zeps_last_error(c));
    ck_assert_msg(zeps_spull(c, t, ids, NIDS, rows, 0) == 0, "%s", zeps_last_error(c));
    for (int i = 0; i < NIDS; i++)
        ck_assert_msg(rows[i * DIM] == (float)(total + 1) &&
                          rows[i * DIM + 1] == (float)(weighted + 1),
                      "id %d: %g, %g after one more push of %ld, %ld", i, rows[i * DIM],
                      rows[i * DIM + 1], total, weighted);
    zeps_client_stats cs;
    zeps_client_get_stats(c, &cs);
    ck_assert_uint_eq(cs.slot_redirects, 0);
    ck_assert_uint_eq(cs.slot_epoch, 1);
}

/* Shard 2 killed, an owner in its file's slot map changed: it refuses to
 * start, naming the file and the section. */
static void damaged_map_refused(zt_cluster *cl, const char *snapdir, uint64_t setid)
{
    zt_server_kill(cl, 2, SIGKILL);
    char path[600];
    ck_assert_int_eq(zp_snapshot_path(path, sizeof(path), snapdir, setid, 2, 3), 0);
    FILE *f = fopen(path, "r+b");
    ck_assert_ptr_nonnull(f);
    /* header 128, section header 24, map header 16: slot 0's owner */
    ck_assert_int_eq(fseek(f, 128 + 24 + 16, SEEK_SET), 0);
    int b = fgetc(f);
    ck_assert_int_eq(fseek(f, 128 + 24 + 16, SEEK_SET), 0);
    fputc(b ^ 1, f);
    fclose(f);
    ck_assert_int_ne(zt_server_start(cl, 2), 0);
    ck_assert(zt_log_has(cl, 2, "shard-2-of-3.zsnap: section 0 (slot map) CRC mismatch"));
}

/* Every shard killed; the cluster file given a map file of epoch 5 (the
 * default owners): a shard refuses the set, written under epoch 1, naming
 * both epochs; with the file as it was, every shard starts again. */
static void older_map_refused(zt_cluster *cl)
{
    for (int k = 0; k < 3; k++)
        zt_server_kill(cl, k, SIGKILL);
    char map[500], conf[500];
    snprintf(map, sizeof(map), "%s/epoch5.map", cl->dir);
    FILE *f = fopen(map, "w");
    fprintf(f, "epoch 5\nslots 4095\n");
    for (int n = 0; n < 4095; n++)
        fprintf(f, "%d %d\n", n, n % 3);
    fclose(f);
    static char text[1 << 16];
    f = fopen(cl->conf, "r");
    ck_assert_ptr_nonnull(f);
    size_t len = fread(text, 1, sizeof(text) - 1, f);
    fclose(f);
    text[len] = '\0';
    ck_assert_ptr_nonnull(strstr(text, "cluster = {\n"));
    snprintf(conf, sizeof(conf), "%s.orig", cl->conf);
    ck_assert_int_eq(rename(cl->conf, conf), 0);
    f = fopen(cl->conf, "w");
    fprintf(f, "cluster = {\n  slot_map = \"%s\";\n%s", map, text + strlen("cluster = {\n"));
    fclose(f);
    ck_assert_int_ne(zt_server_start(cl, 0), 0);
    ck_assert(zt_log_has(cl, 0,
                         "was written under slot map epoch 1, older than this shard's map "
                         "(epoch 5"));
    ck_assert_int_eq(rename(conf, cl->conf), 0);
    for (int k = 0; k < 3; k++)
        ck_assert_int_eq(zt_server_start(cl, k), 0);
}

START_TEST(test_restore_after_move)
{
    zt_cluster cl;
    ck_assert_int_eq(
        zt_cluster_start(&cl, 3, WORKERS, "async", "  snapshot_dir = \"@DIR@/snap\";", NULL), 0);
    char snapdir[400];
    snprintf(snapdir, sizeof(snapdir), "%s/snap", cl.dir);
    long total, weighted;
    push_and_move(&cl, &total, &weighted);

    zeps_client *tl = zt_move_tool(&cl);
    uint64_t setid = 0;
    ck_assert_msg(zeps_snapshot_take(tl, 60, NULL, &setid) == 0, "%s", zeps_last_error(tl));
    zeps_client_destroy(&tl);
    char file[600], ilog[400];
    ck_assert_int_eq(zp_snapshot_path(file, sizeof(file), snapdir, setid, 2, 3), 0);
    snprintf(ilog, sizeof(ilog), "%s/inspect.log", cl.dir);
    char *inspect[] = {"snapshot", "inspect", file, NULL};
    ck_assert_int_eq(zt_move_zepsctl(ilog, inspect), 0);
    ck_assert(zt_move_file_has(ilog, "format 2, shard 2 of 3"));
    ck_assert(zt_move_file_has(ilog, "slot map: epoch 1, 4095 slots"));
    /* SCAN is a worker's: rank 0 again, its pushes done */
    zeps_client *c = zt_client_replacing(&cl, 0);
    ck_assert_ptr_nonnull(c);
    uint32_t t = zt_move_declare(c);
    uint8_t *before[3], *after[3];
    uint64_t nb[3], na[3];
    for (int k = 0; k < 3; k++)
        nb[k] = scan_shard(c, t, k, &before[k]);
    zeps_client_destroy(&c);
    zp_slotmap *m = moved_map();
    check_rows(before, nb, m, total, weighted);

    for (int k = 0; k < 3; k++)
        zt_server_kill(&cl, k, SIGKILL);
    ck_assert(zt_cluster_quiet(&cl, 30)); /* no writer of the dead shards left */
    for (int k = 0; k < 3; k++)
        ck_assert_int_eq(zt_server_start(&cl, k), 0);
    for (int k = 0; k < 3; k++)
        ck_assert(zt_log_has(&cl, k, "restore: slot map of epoch 1 from set"));

    /* a client takes the restored map with HELLO: exact rows where the
     * map says, and no redirect */
    c = zt_client_replacing(&cl, 0);
    ck_assert_ptr_nonnull(c);
    t = zt_move_declare(c);
    for (int k = 0; k < 3; k++) {
        na[k] = scan_shard(c, t, k, &after[k]);
        ck_assert_uint_eq(na[k], nb[k]);
        ck_assert_msg(memcmp(after[k], before[k], (size_t)(na[k] * REC)) == 0,
                      "shard %d: its rows differ from before the kill", k);
        uint64_t epoch;
        zt_move_rows(c, k, &epoch);
        ck_assert_uint_eq(epoch, 1); /* the set's map, not the cluster file's default */
    }
    push_once(c, t, total, weighted);
    zeps_client_destroy(&c);

    check_reshard(snapdir, cl.dir, 3, before, nb);
    check_reshard(snapdir, cl.dir, 2, before, nb);

    older_map_refused(&cl);
    damaged_map_refused(&cl, snapdir, setid);
    for (int k = 0; k < 3; k++) {
        free(before[k]);
        free(after[k]);
    }
    zp_slotmap_destroy(&m);
    zt_cluster_stop(&cl);
}
END_TEST

/* Every page of the moving slots from shard 0 to shard 2 (one round):
 * the rows put. */
static uint64_t copy_pages(const zt_cluster *cl)
{
    uint64_t put = 0;
    void *ctx = zmq_ctx_new();
    for (;;) {
        void *sock = zt_raw_socket(ctx, cl, 0);
        Zeps__Header h;
        zeps__header__init(&h);
        h.version = ZP_PROTOCOL_VERSION;
        h.op = ZEPS__OP__MOVE;
        h.req_id = 1;
        h.rank = 0xffffffffu;
        h.move_step = ZP_MOVE_ROWS;
        h.move_peer = 2;
        h.count = 500;
        zt_raw_send(sock, &h, NULL, 0);
        zmq_pollitem_t it = {.socket = sock, .events = ZMQ_POLLIN};
        ck_assert_int_eq(zmq_poll(&it, 1, 5000), 1);
        zp_frames f;
        ck_assert_int_eq(zp_wire_frames_recv(sock, &f, 0), 0);
        Zeps__Header *rep = zp_wire_unpack_header(&f.f[0]);
        ck_assert_msg(rep->op == ZEPS__OP__MOVE, "%s", rep->error_text);
        uint64_t n = rep->count, left = rep->cursor;
        if (n > 0) {
            Zeps__Header p;
            zeps__header__init(&p);
            p.version = ZP_PROTOCOL_VERSION;
            p.op = ZEPS__OP__MOVE;
            p.req_id = 2;
            p.rank = 0xffffffffu;
            p.move_step = ZP_MOVE_PUT;
            p.move_peer = 0;
            p.move_table = rep->move_table;
            p.count = n;
            p.state_per_value = rep->state_per_value;
            void *sb = zt_raw_socket(ctx, cl, 2);
            Zeps__Header *ack = zt_raw_req(sb, &p, zmq_msg_data(&f.f[1]), zmq_msg_size(&f.f[1]));
            ck_assert_msg(ack->op == ZEPS__OP__MOVE, "%s", ack->error_text);
            zeps__header__free_unpacked(ack, NULL);
            zmq_close(sb);
            put += n;
        }
        zeps__header__free_unpacked(rep, NULL);
        zp_wire_frames_close(&f);
        zmq_close(sock);
        if (n == 0 && left == 0)
            break;
    }
    zmq_ctx_term(ctx);
    return put;
}

/* The rows of table 0 in shard k's file of set `setid`, each checked to
 * be where `m` puts it. */
static uint64_t file_rows(const char *dir, uint64_t setid, int k, const zp_slotmap *m)
{
    char path[600], err[512];
    ck_assert_int_eq(zp_snapshot_path(path, sizeof(path), dir, setid, (uint32_t)k, 3), 0);
    zp_snapshot *s = NULL;
    ck_assert_msg(zp_snapshot_read(path, &s, err, sizeof(err)) == 0, "%s", err);
    ck_assert_ptr_null(s->slotmap); /* the map before the commit: the default */
    uint64_t n;
    memcpy(&n, s->tables[0].rows, 8);
    for (uint64_t i = 0; i < n; i++) {
        uint64_t id;
        memcpy(&id, s->tables[0].rows + ZP_SNAP_ROWS_HDR + i * REC, 8);
        ck_assert_int_eq(zp_slotmap_owner(m, id), k);
    }
    zp_snapshot_free(&s);
    return n;
}

START_TEST(test_snapshot_during_move)
{
    zt_cluster cl;
    ck_assert_int_eq(zt_cluster_start(&cl, 3, 1, "async", "  snapshot_dir = \"@DIR@/snap\";", NULL),
                     0);
    char snapdir[400];
    snprintf(snapdir, sizeof(snapdir), "%s/snap", cl.dir);
    zeps_client *c = zt_client(&cl, 0);
    uint32_t t = zt_move_declare(c);
    static uint64_t ids[NIDS];
    zt_move_ids(ids, NIDS, 0);
    zt_move_populate(c, t, ids, NIDS);
    zp_slotmap *m = moved_map(), *d = NULL;
    ck_assert_int_eq(zp_slotmap_new_default(&d, 3), 0);
    static uint8_t wire[16 + 2 * 4095];
    zp_slotmap_encode(m, wire);
    Zeps__Header *rep = zt_move_step(&cl, 0, 2, ZP_MOVE_BEGIN, wire, sizeof(wire));
    ck_assert_msg(rep->op == ZEPS__OP__MOVE, "%s", rep->error_text);
    zeps__header__free_unpacked(rep, NULL);
    rep = zt_move_step(&cl, 2, 0, ZP_MOVE_IMPORT, wire, sizeof(wire));
    ck_assert_msg(rep->op == ZEPS__OP__MOVE, "%s", rep->error_text);
    zeps__header__free_unpacked(rep, NULL);
    uint64_t moving = copy_pages(&cl);
    ck_assert_uint_gt(moving, 0);
    uint64_t held[3];
    for (int k = 0; k < 3; k++)
        held[k] = zt_move_rows(c, k, NULL);
    ck_assert_uint_eq(held[0] + held[1] + held[2], NIDS + moving); /* the target holds copies */

    zeps_client *tl = zt_move_tool(&cl);
    uint64_t setid = 0;
    ck_assert_msg(zeps_snapshot_take(tl, 60, NULL, &setid) == 0, "%s", zeps_last_error(tl));
    zeps_client_destroy(&tl);
    uint64_t n0 = file_rows(snapdir, setid, 0, d), n1 = file_rows(snapdir, setid, 1, d),
             n2 = file_rows(snapdir, setid, 2, d);
    ck_assert_uint_eq(n0, held[0]);
    ck_assert_uint_eq(n2, held[2] - moving);
    ck_assert_uint_eq(n0 + n1 + n2, NIDS);
    zp_manifest *man = NULL;
    char err[512];
    ck_assert_int_eq(zp_manifest_load(snapdir, &man, err, sizeof(err)), 0);
    ck_assert_ptr_nonnull(zp_manifest_newest(man));
    ck_assert_uint_eq(zp_manifest_newest(man)->setid, setid);
    zp_manifest_free(&man);

    for (int k = 0; k < 3; k += 2) {
        rep = zt_move_step(&cl, k, (uint32_t)(2 - k), ZP_MOVE_ABORT, NULL, 0);
        zeps__header__free_unpacked(rep, NULL);
    }
    zp_slotmap_destroy(&m);
    zp_slotmap_destroy(&d);
    zeps_client_destroy(&c);
    zt_cluster_stop(&cl);
}
END_TEST

int main(void)
{
    const zt_case cases[] = {
        {"migrate_snap", 300, {test_restore_after_move, test_snapshot_during_move}},
    };
    return zt_run_cases("migrate_snap", cases, sizeof(cases) / sizeof(cases[0]));
}
