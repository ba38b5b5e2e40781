/*
 * test_dense_snap.c - snapshots of a cluster whose dense table a live
 * move placed by range (docs/elastic.md, "Dense tables by range";
 * docs/snapshots.md, "Dense pieces"), with real shards, real worker
 * processes, the real `zepsctl shards move --dense` and `zepsctl
 * snapshot reshard`, and kill -9.
 *
 * Two shards under async with snapshot_dir; three worker processes
 * declare dense table 'w' (1000 elements, adam: two state floats an
 * element) and push and pull it whole over and over while `zepsctl
 * shards move --dense w:200-500 --from 0 --to 1` moves the end of shard
 * 0's slice (a cut at 200, then the move: map epoch 2). Then the workers
 * stop, a snapshot set is taken, and every shard's SCAN (each piece's
 * values, optimizer state and version) and a pull of the whole table are
 * kept. Every shard is killed with -9 and started again from the set:
 * each serves the set's map (epoch 2), its SCAN is the one before byte
 * for byte, piece by piece, and a new client pulls the same values
 * without a redirect. The set resharded to 1 and to 3 shards holds every
 * element's value and state once, on the default slices, in files of
 * format 1. A restored piece then moves whole ([500, 1000) back to
 * shard 0, epoch 3) and a new client pulls the same values; a move that
 * would cut a restored piece is refused, naming why. Last, shard 1's file
 * with a record's bounds changed (its CRCs made right): the shard refuses
 * to start, naming the file and the record.
 */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check_main.h"
#include "harness.h"
#include "move_fixture.h"
#include "snapshot.h"
#include "snapshot_io.h"
#include "zeps.h"

#define LEN     1000
#define WORKERS 3
#define SPP     2 /* adam */

static uint32_t declare(zeps_client *c)
{
    zeps_table_spec spec = {
        .name = "w", .length = LEN, .optimizer = "adam", .lr = 0.01, .init = "zeros", .seed = 1};
    uint32_t t;
    if (zeps_declare(c, &spec, &t) != 0)
        return UINT32_MAX;
    return t;
}

/* Worker process w: push and pull until `stop` exists (20 times at
 * least); exit 0, 1 on error. */
static void worker(const zt_cluster *cl, int w, const char *stop)
{
    static float g[LEN], got[LEN];
    zeps_client *c = zt_client(cl, (uint32_t)w);
    uint32_t t = c ? declare(c) : UINT32_MAX;
    if (t == UINT32_MAX)
        _exit(1);
    for (int step = 0; step < 20 || access(stop, F_OK) != 0; step++) {
        for (int i = 0; i < LEN; i++)
            g[i] = (float)((w + 1) * (1 + (i + step) % 3)) - got[i];
        if (zeps_push(c, t, g, 0, LEN, step) != 0 || zeps_pull(c, t, got, 0, LEN, step) != 0) {
            fprintf(stderr, "worker %d: step %d: %s\n", w, step, zeps_last_error(c));
            _exit(1);
        }
    }
    zeps_client_destroy(&c);
    _exit(0);
}

/* Shard k's SCAN of t: every page as it came (u64 offset, count and
 * version, then the floats), into a new buffer *out (the caller frees
 * it), and "lo-hi " per piece into text; the buffer's bytes. */
static size_t scan_shard(zeps_client *c, uint32_t t, int k, uint8_t **out, char *text, size_t len)
{
    size_t n = 0;
    uint64_t cursor = 0;
    *out = NULL;
    text[0] = '\0';
    do {
        zeps_page p;
        ck_assert_msg(zeps_scan(c, t, k, cursor, 0, &p) == 0, "%s", zeps_last_error(c));
        ck_assert_uint_eq(p.state_per_value, SPP);
        ck_assert_uint_eq(p.bytes, p.count * 4 * (1 + SPP));
        *out = realloc(*out, n + 24 + (size_t)p.bytes);
        uint64_t head[3] = {p.offset, p.count, p.version};
        memcpy(*out + n, head, 24);
        memcpy(*out + n + 24, p.data, (size_t)p.bytes);
        n += 24 + (size_t)p.bytes;
        snprintf(text + strlen(text), len - strlen(text), "%llu-%llu ",
                 (unsigned long long)p.offset, (unsigned long long)(p.offset + p.count));
        cursor = p.next;
        zeps_page_release(&p);
    } while (cursor != 0);
    return n;
}

/* Element i's value (q = 0) or state block q - 1 from the SCANs kept. */
static float scanned(uint8_t *const scans[2], const size_t n[2], uint64_t i, int q)
{
    for (int k = 0; k < 2; k++)
        for (size_t at = 0; at < n[k];) {
            uint64_t head[3];
            memcpy(head, scans[k] + at, 24);
            if (i >= head[0] && i < head[0] + head[1]) {
                float v;
                memcpy(&v, scans[k] + at + 24 + 4 * ((uint64_t)q * head[1] + i - head[0]), 4);
                return v;
            }
            at += 24 + 4 * (size_t)head[1] * (1 + SPP);
        }
    ck_abort_msg("element %llu in no SCAN", (unsigned long long)i);
    return 0;
}

/* zepsctl snapshot reshard into <dir>/reshard-<s2>: every file of format
 * 1 with the default slice of 'w', each element's value and state as the
 * SCANs before the kill had them. */
static void check_reshard(const char *snapdir, const char *dir, int s2, uint8_t *const scans[2],
                          const size_t n[2])
{
    char dst[500], log[500], count[8];
    snprintf(dst, sizeof(dst), "%s/reshard-%d", dir, s2);
    snprintf(log, sizeof(log), "%s/reshard-%d.log", dir, s2);
    snprintf(count, sizeof(count), "%d", s2);
    char *args[] = {"snapshot", "reshard", (char *)snapdir, dst, count, NULL};
    int st = zt_move_zepsctl(log, args);
    zt_move_print_file(log);
    ck_assert_int_eq(st, 0);
    zp_manifest *m = NULL;
    char err[1024];
    ck_assert_int_eq(zp_manifest_load(dst, &m, err, sizeof(err)), 0);
    const zp_snap_set *set = zp_manifest_newest(m);
    ck_assert_ptr_nonnull(set);
    for (int j = 0; j < s2; j++) {
        char path[700];
        zp_snapshot *s = NULL;
        ck_assert_int_eq(
            zp_snapshot_path(path, sizeof(path), dst, set->setid, (uint32_t)j, (uint32_t)s2), 0);
        ck_assert_msg(zp_snapshot_read(path, &s, err, sizeof(err)) == 0, "%s", err);
        ck_assert_uint_eq(s->h.format, ZP_SNAP_FORMAT_V1);
        ck_assert_uint_eq(s->ntables, 1);
        const zp_snap_table *t = &s->tables[0];
        ck_assert_uint_eq(t->begin, zp_slice_at(LEN, (uint32_t)j, (uint32_t)s2));
        ck_assert_uint_eq(t->end, zp_slice_at(LEN, (uint32_t)j + 1, (uint32_t)s2));
        uint64_t w = t->end - t->begin;
        for (uint64_t i = t->begin; i < t->end; i++) {
            ck_assert_float_eq(t->params[i - t->begin], scanned(scans, n, i, 0));
            for (int q = 0; q < SPP; q++)
                ck_assert_float_eq(t->state[(uint64_t)q * w + i - t->begin],
                                   scanned(scans, n, i, 1 + q));
        }
        zp_snapshot_free(&s);
    }
    zp_manifest_free(&m);
}

/* Shard 1 killed, its first record's begin moved up one in the file (the
 * section's CRCs made right): it refuses to start, naming the file and
 * the record that is no piece of its map. */
static void bad_record_refused(zt_cluster *cl, const char *snapdir, uint64_t setid)
{
    zt_server_kill(cl, 1, SIGKILL);
    char path[600], err[512];
    ck_assert_int_eq(zp_snapshot_path(path, sizeof(path), snapdir, setid, 1, 2), 0);
    zp_snapshot *s = NULL;
    ck_assert_int_eq(zp_snapshot_read(path, &s, err, sizeof(err)), 0);
    uint64_t maplen = s->slotmap_len, nw = s->nworker_recs;
    zp_snapshot_free(&s);
    FILE *f = fopen(path, "r+b");
    ck_assert_ptr_nonnull(f);
    /* header, map section, workers section (48-byte records), table 0's
     * meta section: begin at 96 into its payload */
    long sec = 128 + 24 + (long)((maplen + 7) & ~7ull) + 24 + (long)(48 * nw);
    uint8_t b[24 + 184];
    ck_assert_int_eq(fseek(f, sec, SEEK_SET), 0);
    ck_assert_uint_eq(fread(b, 1, sizeof(b), f), sizeof(b));
    ck_assert_uint_eq(zp_get32(b), 2); /* a meta section */
    uint64_t lo = zp_get64(b + 24 + 96) + 1, hi = zp_get64(b + 24 + 104);
    zp_put64(b + 24 + 96, lo);
    zp_put32(b + 16, zp_snapshot_crc32c(b + 24, 184));
    zp_put32(b + 20, zp_snapshot_crc32c(b, 20));
    ck_assert_int_eq(fseek(f, sec, SEEK_SET), 0);
    ck_assert_uint_eq(fwrite(b, 1, sizeof(b), f), sizeof(b));
    fclose(f);
    ck_assert_int_ne(zt_server_start(cl, 1), 0);
    char want[200];
    snprintf(want, sizeof(want),
             "shard-1-of-2.zsnap: section 2 (table #0 meta): dense table 'w': record [%llu, "
             "%llu) is not a piece shard 1 holds",
             (unsigned long long)lo, (unsigned long long)hi);
    ck_assert_msg(zt_log_has(cl, 1, want), "shard 1's log lacks \"%s\"", want);
}

/* zepsctl shards move --dense RANGE --from A --to B: exit 0. */
static void move(const zt_cluster *cl, const char *range, const char *from, const char *to)
{
    char log[400];
    snprintf(log, sizeof(log), "%s/move-%s.log", cl->dir, from);
    char *mv[] = {"shards", "move",     "--config", (char *)cl->conf, "--from", (char *)from,
                  "--to",   (char *)to, "--dense",  (char *)range,    NULL};
    int st = zt_move_zepsctl(log, mv);
    zt_move_print_file(log);
    ck_assert_msg(st == 0, "zepsctl shards move --dense %s: exit %d", range, st);
}

/* The workers push while [200, 500) of 'w' moves from shard 0 to 1
 * (map epoch 2), then stop; each exits 0. */
static void push_and_move(const zt_cluster *cl)
{
    char stop[400];
    snprintf(stop, sizeof(stop), "%s/stop", cl->dir);
    pid_t pids[WORKERS];
    for (int w = 0; w < WORKERS; w++)
        if ((pids[w] = fork()) == 0)
            worker(cl, w, stop);
    usleep(300 * 1000);
    move(cl, "w:200-500", "0", "1");
    usleep(200 * 1000);
    FILE *f = fopen(stop, "w");
    fclose(f);
    for (int w = 0; w < WORKERS; w++) {
        int ws = zt_wait(pids[w], 60);
        ck_assert_msg(ws >= 0 && WIFEXITED(ws) && WEXITSTATUS(ws) == 0, "worker %d failed", w);
    }
}

/* A snapshot set taken now; shard 1's file, inspected, records the map
 * with its dense pieces and a record of [200, 500). Its set id. */
static uint64_t take_set(const zt_cluster *cl, const char *snapdir)
{
    zeps_client *tl = zt_move_tool(cl);
    uint64_t setid = 0;
    ck_assert_msg(zeps_snapshot_take(tl, 60, NULL, &setid) == 0, "%s", zeps_last_error(tl));
    zeps_client_destroy(&tl);
    char file[600], ilog[400];
    ck_assert_int_eq(zp_snapshot_path(file, sizeof(file), snapdir, setid, 1, 2), 0);
    snprintf(ilog, sizeof(ilog), "%s/inspect.log", cl->dir);
    char *inspect[] = {"snapshot", "inspect", file, NULL};
    ck_assert_int_eq(zt_move_zepsctl(ilog, inspect), 0);
    zt_move_print_file(ilog);
    ck_assert(zt_move_file_has(ilog, "slot map: epoch 2, 4096 slots and dense pieces"));
    ck_assert(zt_move_file_has(ilog, "slice [200, 500)"));
    return setid;
}

/* After the restore: shard 1's piece [500, 1000) moved whole to shard 0
 * (no cut: epoch 3); a new client pulls the values of before, without a
 * redirect, and shard 0's SCAN holds both its pieces. A move that would
 * cut restored piece [0, 200) is refused (pieces of restored tables are
 * not remade), exit 2 naming why. */
static void move_after_restore(const zt_cluster *cl, const float *pulled)
{
    move(cl, "w:500-1000", "1", "0");
    zeps_client *c = zt_client_replacing(cl, 0);
    ck_assert_ptr_nonnull(c);
    uint32_t t = declare(c);
    static float now[LEN];
    ck_assert_int_eq(zeps_pull(c, t, now, 0, LEN, 0), 0);
    ck_assert_mem_eq(now, pulled, sizeof(now));
    zeps_client_stats cs;
    zeps_client_get_stats(c, &cs);
    ck_assert_uint_eq(cs.slot_redirects, 0);
    ck_assert_uint_eq(cs.slot_epoch, 3);
    uint8_t *scan;
    char text[128];
    scan_shard(c, t, 0, &scan, text, sizeof(text));
    ck_assert_str_eq(text, "0-200 500-1000 ");
    free(scan);
    zeps_client_destroy(&c);
    char log[400];
    snprintf(log, sizeof(log), "%s/cut.log", cl->dir);
    char *cut[] = {"shards", "move", "--config", (char *)cl->conf, "--from", "0",
                   "--to",   "1",    "--dense",  "w:100-150",      NULL};
    int st = zt_move_zepsctl(log, cut);
    zt_move_print_file(log);
    ck_assert_int_eq(st, 2); /* refused by the holder, nothing changed */
    ck_assert(zt_move_file_has(log, "was declared with init segments or restored"));
}

START_TEST(test_restore_after_dense_move)
{
    zt_cluster cl;
    ck_assert_int_eq(
        zt_cluster_start(&cl, 2, WORKERS, "async", "  snapshot_dir = \"@DIR@/snap\";", NULL), 0);
    char snapdir[400];
    snprintf(snapdir, sizeof(snapdir), "%s/snap", cl.dir);
    push_and_move(&cl);
    uint64_t setid = take_set(&cl, snapdir);

    zeps_client *c = zt_client_replacing(&cl, 0);
    ck_assert_ptr_nonnull(c);
    uint32_t t = declare(c);
    uint8_t *before[2], *after[2];
    size_t nb[2], na[2];
    char text[2][128], again[128];
    static float pulled[LEN], now[LEN];
    for (int k = 0; k < 2; k++)
        nb[k] = scan_shard(c, t, k, &before[k], text[k], sizeof(text[k]));
    ck_assert_str_eq(text[0], "0-200 ");
    ck_assert_str_eq(text[1], "200-500 500-1000 ");
    ck_assert_int_eq(zeps_pull(c, t, pulled, 0, LEN, 0), 0);
    zeps_client_destroy(&c);

    for (int k = 0; k < 2; k++)
        zt_server_kill(&cl, k, SIGKILL);
    ck_assert(zt_cluster_quiet(&cl, 30));
    for (int k = 0; k < 2; k++)
        ck_assert_int_eq(zt_server_start(&cl, k), 0);
    for (int k = 0; k < 2; k++)
        ck_assert(zt_log_has(&cl, k, "restore: slot map of epoch 2 from set"));

    c = zt_client_replacing(&cl, 0);
    ck_assert_ptr_nonnull(c);
    t = declare(c);
    for (int k = 0; k < 2; k++) {
        na[k] = scan_shard(c, t, k, &after[k], again, sizeof(again));
        ck_assert_str_eq(again, text[k]);
        ck_assert_uint_eq(na[k], nb[k]);
        ck_assert_msg(memcmp(after[k], before[k], na[k]) == 0,
                      "shard %d: a piece's values, state or version differ from before the kill",
                      k);
    }
    ck_assert_int_eq(zeps_pull(c, t, now, 0, LEN, 0), 0);
    ck_assert_mem_eq(now, pulled, sizeof(now));
    zeps_client_stats cs;
    zeps_client_get_stats(c, &cs);
    ck_assert_uint_eq(cs.slot_redirects, 0);
    ck_assert_uint_eq(cs.slot_epoch, 2);
    zeps_client_destroy(&c);

    check_reshard(snapdir, cl.dir, 1, before, nb);
    check_reshard(snapdir, cl.dir, 3, before, nb);
    move_after_restore(&cl, pulled);
    bad_record_refused(&cl, snapdir, setid);
    for (int k = 0; k < 2; k++) {
        free(before[k]);
        free(after[k]);
    }
    zt_cluster_stop(&cl);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("dense_snap");
    TCase *tc = tcase_create("dense_snap");
    tcase_set_timeout(tc, 240);
    tcase_add_test(tc, test_restore_after_dense_move);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return zt_run_suite(suite());
}
