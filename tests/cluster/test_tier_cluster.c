/*
 * test_tier_cluster.c - the cold tier through real zeps-server processes
 * (docs/sparse.md, "Cold tier").
 *
 * Exact: one worker trains the same bsp job (a sparse adagrad table with a
 * lead column and a sparse adam table, gradients computed from the rows
 * pulled) on two shards whose tables keep a tenth of their rows hot and
 * the rest in RocksDB, and on two shards holding everything in RAM: every
 * pull answers the same bits, and at the end every row of both tiers
 * (SCAN) has the same values, optimizer state, version, touches and touch
 * clock. Refused: a table declared with tier on shards without tier_dir
 * (ECONFIG naming tier_dir), and a shard whose tier_dir is missing (exit
 * 2 naming the key). Crash: both shards killed with SIGKILL after clock
 * 10 restore the cut after clock 8 of both tiers (the snapshot's file and
 * its RocksDB checkpoint) exactly; that set resharded to 3 shards and
 * restored there, and back to 2, gives every row of both tiers again;
 * resharding a set with a damaged checkpoint is refused and leaves no set.
 */
#include <check.h>
#include <dirent.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>

#include "check_main.h"
#include "harness.h"
#include "snapshot.h"
#include "sparse_hash.h"
#include "scratch.h"
#include "zeps.h"
#include "zeps_errors.h"

#define NIDS  4000
#define BATCH 256
#define STEPS 120

static zeps_sparse_spec spec(const char *name, const char *optim, uint32_t dim, int tier)
{
    zeps_sparse_spec s = {.name = name,
                          .dim = dim,
                          .optimizer = optim,
                          .lr = 0.05,
                          .init = "uniform",
                          .init_scale = 0.1,
                          .seed = 11,
                          .lead_cols = 1,
                          .lead_lr = 0.2,
                          .tier = tier,
                          /* a tenth of the ~NIDS/2 ids of each shard */
                          .capacity_rows = tier ? NIDS / 20 : 0};
    return s;
}

/* Distinct ids of one step, skewed to the small ones (a hot set). */
static void draw(uint64_t *x, uint64_t *ids)
{
    for (size_t n = 0; n < BATCH;) {
        *x = *x * 6364136223846793005ull + 1442695040888963407ull;
        double u = (double)(*x >> 11) / 9007199254740992.0;
        uint64_t id = (uint64_t)(pow(u, 2.5) * NIDS) * 2654435761ull;
        bool dup = false;
        for (size_t i = 0; i < n && !dup; i++)
            dup = ids[i] == id;
        if (!dup)
            ids[n++] = id;
    }
}

/* Every record of sparse table t on every shard, sorted by id. */
static int by_id(const void *a, const void *b)
{
    uint64_t x, y;
    memcpy(&x, a, 8);
    memcpy(&y, b, 8);
    return x < y ? -1 : x > y;
}

static uint64_t all_rows(zeps_client *c, uint32_t t, uint32_t dim, uint8_t **out, uint64_t *rec)
{
    uint64_t n = 0;
    *out = NULL;
    for (int s = 0; s < zeps_num_shards(c); s++) {
        uint64_t cursor = 0;
        do {
            zeps_page p;
            ck_assert_msg(zeps_scan(c, t, s, cursor, 700, &p) == 0, "%s", zeps_last_error(c));
            *rec = ZEPS_ROW_RECORD_BYTES(dim, p.state_per_value);
            *out = realloc(*out, (size_t)((n + p.count) * *rec) + 1);
            memcpy(*out + n * *rec, p.data, (size_t)p.bytes);
            for (uint64_t i = 0; i < p.count; i++) { /* each row where its id hashes */
                uint64_t id;
                memcpy(&id, *out + (n + i) * *rec, 8);
                ck_assert_msg(zp_sparse_shard_of(id, zeps_num_shards(c)) == s,
                              "row %llu is on shard %d of %d", (unsigned long long)id, s,
                              zeps_num_shards(c));
            }
            n += p.count;
            cursor = p.next;
            zeps_page_release(&p);
        } while (cursor != 0);
    }
    qsort(*out, (size_t)n, (size_t)*rec, by_id);
    return n;
}

/* The job: STEPS bsp clocks of pulls and pushes of both tables, and a
 * SCAN every 10; the pulls' bits are appended to `trace` (STEPS * BATCH *
 * (3 + 9) floats). */
static void train(zeps_client *c, uint32_t e, uint32_t f, float *trace, int steps)
{
    static uint64_t ids[BATCH];
    static float re[BATCH * 9], rf[BATCH * 3], ge[BATCH * 9], gf[BATCH * 3];
    uint64_t x = 99;
    for (int64_t step = 0; step < steps; step++) {
        draw(&x, ids);
        ck_assert_msg(zeps_spull(c, e, ids, BATCH, re, step) == 0, "%s", zeps_last_error(c));
        ck_assert_msg(zeps_spull(c, f, ids, BATCH, rf, step) == 0, "%s", zeps_last_error(c));
        memcpy(trace, re, sizeof re);
        memcpy(trace + BATCH * 9, rf, sizeof rf);
        trace += BATCH * 12;
        for (size_t i = 0; i < BATCH * 9; i++)
            ge[i] = 0.3f * re[i] - 0.01f * (float)(i % 5);
        for (size_t i = 0; i < BATCH * 3; i++)
            gf[i] = rf[i] + 0.02f * (float)(ids[i / 3] % 3) - 0.02f;
        ck_assert_msg(zeps_spush(c, e, ids, BATCH, ge, step) == 0, "%s", zeps_last_error(c));
        ck_assert_msg(zeps_spush(c, f, ids, BATCH, gf, step) == 0, "%s", zeps_last_error(c));
        ck_assert_msg(zeps_clock(c, step) == 0, "%s", zeps_last_error(c));
        if (step % 10 == 9) { /* a SCAN writes the rows the tiers hold unwritten to RocksDB, so
                               * that later pulls of them are read off the loop */
            uint8_t *rows;
            uint64_t rec;
            all_rows(c, e, 9, &rows, &rec);
            free(rows);
        }
    }
}

/* One cluster's run: the pulls' trace and both tables' rows. */
typedef struct run {
    float *trace;
    uint8_t *rows[2];
    uint64_t n[2], rec[2];
    uint64_t demoted, promoted, cold, hot, parked, fetched, sync;
} run;

static void one_run(run *out, int tier, const char *tier_dir)
{
    zt_cluster cl;
    char extra[700] = "";
    if (tier)
        snprintf(extra, sizeof extra, "  tier_dir = \"%s\";", tier_dir);
    ck_assert_int_eq(zt_cluster_start(&cl, 2, 1, "bsp", extra, NULL), 0);
    zeps_client *c = zt_client(&cl, 0);
    ck_assert_ptr_nonnull(c);
    zeps_sparse_spec se = spec("emb", "adagrad", 9, tier), sf = spec("lin", "adam", 3, tier);
    uint32_t e, f;
    ck_assert_msg(zeps_declare_sparse(c, &se, &e) == 0, "%s", zeps_last_error(c));
    ck_assert_msg(zeps_declare_sparse(c, &sf, &f) == 0, "%s", zeps_last_error(c));
    out->trace = malloc(sizeof(float) * STEPS * BATCH * 12);
    train(c, e, f, out->trace, STEPS);
    out->n[0] = all_rows(c, e, 9, &out->rows[0], &out->rec[0]);
    out->n[1] = all_rows(c, f, 3, &out->rows[1], &out->rec[1]);
    out->demoted = out->promoted = out->cold = out->hot = 0;
    out->parked = out->fetched = out->sync = 0;
    for (int k = 0; k < 2; k++) {
        Zeps__ShardStats *st = zt_stats(c, k);
        ck_assert_ptr_nonnull(st);
        for (size_t i = 0; i < st->n_tables; i++) {
            ck_assert_int_eq(st->tables[i]->tiered, tier);
            out->demoted += st->tables[i]->tier_demotions;
            out->promoted += st->tables[i]->tier_promotions;
            out->cold += st->tables[i]->cold_rows;
            out->hot += st->tables[i]->rows;
            out->parked += st->tables[i]->tier_parked;
            out->fetched += st->tables[i]->tier_fetched;
            out->sync += st->tables[i]->tier_sync_reads;
            if (tier)
                ck_assert_uint_le(st->tables[i]->rows, NIDS / 20);
        }
        zeps__shard_stats__free_unpacked(st, NULL);
    }
    zeps_client_destroy(&c);
    ck_assert_int_eq(zt_cluster_stop(&cl), 0);
}

START_TEST(test_exact_against_ram)
{
    char dir[512];
    ck_assert_int_eq(zt_scratch_dir(dir, sizeof dir, "cold"), 0);
    run tiered, ram;
    one_run(&tiered, 1, dir);
    one_run(&ram, 0, NULL);
    for (int step = 0; step < STEPS; step++)
        ck_assert_msg(memcmp(tiered.trace + (size_t)step * BATCH * 12,
                             ram.trace + (size_t)step * BATCH * 12, BATCH * 12 * 4) == 0,
                      "step %d: the tiered shards answered other bits", step);
    ck_assert_uint_gt(tiered.demoted, 2000);
    ck_assert_uint_gt(tiered.promoted, 1000);
    ck_assert_uint_gt(tiered.cold, 1000);
    ck_assert_uint_eq(tiered.hot + tiered.cold, ram.hot);
    /* the pulls waited for reads off the loop; what the loop read itself */
    printf("tiered run: %llu demotions, %llu promotions, %llu pulls parked, %llu ids read off "
           "the loop, %llu rows read on it\n",
           (unsigned long long)tiered.demoted, (unsigned long long)tiered.promoted,
           (unsigned long long)tiered.parked, (unsigned long long)tiered.fetched,
           (unsigned long long)tiered.sync);
    ck_assert_uint_gt(tiered.parked, STEPS);
    ck_assert_uint_gt(tiered.fetched, 1000);
    ck_assert_uint_lt(tiered.sync * 10, tiered.promoted);
    for (int k = 0; k < 2; k++) {
        ck_assert_uint_eq(tiered.n[k], ram.n[k]);
        ck_assert_uint_eq(tiered.rec[k], ram.rec[k]);
        for (uint64_t i = 0; i < ram.n[k]; i++) {
            const uint8_t *a = tiered.rows[k] + i * ram.rec[k], *b = ram.rows[k] + i * ram.rec[k];
            uint64_t id;
            memcpy(&id, b, 8);
            ck_assert_msg(memcmp(a, b, (size_t)ram.rec[k]) == 0,
                          "table %d row %llu: values, state, version, touches or clock differ", k,
                          (unsigned long long)id);
        }
        free(tiered.rows[k]);
        free(ram.rows[k]);
    }
    free(tiered.trace);
    free(ram.trace);
}
END_TEST

/* Declare both tables on cl's shards and read every row of both. */
static void read_tables(const zt_cluster *cl, int tier, uint8_t **rows, uint64_t *n, uint64_t *rec)
{
    zeps_client *c = zt_client(cl, 0);
    ck_assert_ptr_nonnull(c);
    zeps_sparse_spec se = spec("emb", "adagrad", 9, tier), sf = spec("lin", "adam", 3, tier);
    uint32_t e, f;
    ck_assert_msg(zeps_declare_sparse(c, &se, &e) == 0, "%s", zeps_last_error(c));
    ck_assert_msg(zeps_declare_sparse(c, &sf, &f) == 0, "%s", zeps_last_error(c));
    n[0] = all_rows(c, e, 9, &rows[0], &rec[0]);
    n[1] = all_rows(c, f, 3, &rows[1], &rec[1]);
    zeps_client_destroy(&c);
}

/* Rows the shards of cl hold, hot and cold, by STATS; the cold ones in
 * *cold if not NULL. */
static uint64_t held_rows_cold(const zt_cluster *cl, uint64_t *cold)
{
    zeps_client *c = zt_client(cl, 0);
    ck_assert_ptr_nonnull(c);
    uint64_t n = 0, nc = 0;
    for (int k = 0; k < zeps_num_shards(c); k++) {
        Zeps__ShardStats *st = zt_stats(c, k);
        ck_assert_ptr_nonnull(st);
        for (size_t i = 0; i < st->n_tables; i++) {
            n += st->tables[i]->rows + st->tables[i]->cold_rows;
            nc += st->tables[i]->cold_rows;
        }
        zeps__shard_stats__free_unpacked(st, NULL);
    }
    zeps_client_destroy(&c);
    if (cold != NULL)
        *cold = nc;
    return n;
}

static uint64_t held_rows(const zt_cluster *cl)
{
    return held_rows_cold(cl, NULL);
}

/* `zepsctl snapshot reshard from to S2`, its output in `log`: the exit
 * status. */
static int zepsctl_reshard(const char *from, const char *to, int S2, const char *log)
{
    char bin[512], shards[16];
    snprintf(shards, sizeof shards, "%d", S2);
    char *argv[] = {(char *)zt_bin("zepsctl", bin, sizeof bin),
                    "snapshot",
                    "reshard",
                    (char *)from,
                    (char *)to,
                    shards,
                    NULL};
    int st = zt_wait(zt_spawn(argv[0], argv, log), 60);
    int rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    if (rc != 0) { /* say why in the test's output */
        char text[4096] = "";
        FILE *f = fopen(log, "r");
        size_t n = f ? fread(text, 1, sizeof text - 1, f) : 0;
        if (f)
            fclose(f);
        text[n] = '\0';
        fprintf(stderr, "zepsctl snapshot reshard %s %s %d: status %d\n%s\n", from, to, S2, st,
                text);
    }
    return rc;
}

/* A cluster of S2 shards restores the newest set of `snapdir` (its tiers
 * in a folder of their own): every row of both tables, hot and cold, is
 * the record of `want` (SCAN of the original), and some are cold. */
static void restored_equal(const char *snapdir, int S2, uint8_t **want, const uint64_t *wn,
                           const uint64_t *wrec)
{
    char dir[512], extra[1400], name[32];
    snprintf(name, sizeof name, "tiers-of-%d", S2);
    ck_assert_int_eq(zt_scratch_dir(dir, sizeof dir, name), 0);
    snprintf(extra, sizeof extra,
             "  tier_dir = \"%s\"; snapshot_dir = \"%s\"; snapshot_on_exit = false;", dir, snapdir);
    zt_cluster cl;
    ck_assert_int_eq(zt_cluster_start(&cl, S2, 1, "bsp", extra, NULL), 0);
    for (int k = 0; k < S2; k++) {
        ck_assert(zt_log_has(&cl, k, "restored snapshot set 0000000000000008"));
        ck_assert(zt_log_has(&cl, k, "rows restored from"));
    }
    uint8_t *got[2];
    uint64_t n[2], rec[2], cold = 0;
    read_tables(&cl, 1, got, n, rec);
    ck_assert_uint_eq(held_rows_cold(&cl, &cold), n[0] + n[1]);
    ck_assert_msg(cold > 0, "%d shards: no row is cold after the restore", S2);
    ck_assert_int_eq(zt_cluster_stop(&cl), 0);
    for (int k = 0; k < 2; k++) {
        ck_assert_msg(n[k] == wn[k], "%d shards, table %d: %llu rows, the original %llu", S2, k,
                      (unsigned long long)n[k], (unsigned long long)wn[k]);
        ck_assert_uint_eq(rec[k], wrec[k]);
        for (uint64_t i = 0; i < n[k]; i++)
            ck_assert_msg(memcmp(got[k] + i * rec[k], want[k] + i * rec[k], (size_t)rec[k]) == 0,
                          "%d shards, table %d: row %llu differs from the original's", S2, k,
                          (unsigned long long)i);
        free(got[k]);
    }
}

/* A damaged cold tier checkpoint (a file of its database gone): reshard
 * exits 1 naming it, and leaves no set in `to` and no checkpoint there,
 * under its final name or a temporary one. */
static void damaged_refused(const char *cldir, const char *snap)
{
    char bad[700], to[700], log[700], cmd[2200], set[800];
    snprintf(bad, sizeof bad, "%s/snap-damaged", cldir);
    snprintf(to, sizeof to, "%s/resharded-damaged", cldir);
    snprintf(log, sizeof log, "%s/reshard-damaged.log", cldir);
    snprintf(cmd, sizeof cmd,
             "cp -a %s %s && rm %s/set-0000000000000008/tier-emb-shard-1-of-2/*.sst", snap, bad,
             bad);
    ck_assert_int_eq(system(cmd), 0);
    ck_assert_int_eq(zepsctl_reshard(bad, to, 3, log), 1);
    FILE *f = fopen(log, "r");
    char text[4096] = "";
    size_t len = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[len] = '\0';
    ck_assert_msg(strstr(text, "tier-emb-shard-1-of-2") && strstr(text, "damaged"), "%s", text);
    zp_manifest *m = NULL;
    char err[1024];
    if (zp_manifest_load(to, &m, err, sizeof err) == 0) {
        ck_assert_msg(zp_manifest_newest(m) == NULL, "a set was listed after a failed reshard");
        zp_manifest_free(&m);
    }
    snprintf(set, sizeof set, "%s/set-0000000000000008", to);
    DIR *d = opendir(set);
    struct dirent *e;
    while (d != NULL && (e = readdir(d)) != NULL)
        ck_assert_msg(strncmp(e->d_name, "tier-", 5) != 0, "%s left in %s", e->d_name, set);
    if (d != NULL)
        closedir(d);
}

/* Acceptance 6, another shard count: the set of 2 tiered shards
 * resharded to 3 and restored there, that set resharded back to 2 and
 * restored, and the set resharded to 1 (more hot rows than its hot tier
 * holds): every row of both tiers each time the original's. */
static void reshard_both_ways(const char *cldir, uint8_t **want, const uint64_t *wn,
                              const uint64_t *wrec)
{
    char snap[700], to3[700], to2[700], log[700];
    snprintf(snap, sizeof snap, "%s/snap", cldir);
    snprintf(to3, sizeof to3, "%s/resharded-3", cldir);
    snprintf(to2, sizeof to2, "%s/resharded-2", cldir);
    snprintf(log, sizeof log, "%s/reshard-3.log", cldir);
    ck_assert_int_eq(zepsctl_reshard(snap, to3, 3, log), 0);
    restored_equal(to3, 3, want, wn, wrec);
    snprintf(log, sizeof log, "%s/reshard-2.log", cldir);
    ck_assert_int_eq(zepsctl_reshard(to3, to2, 2, log), 0);
    restored_equal(to2, 2, want, wn, wrec);
    /* onto 1 shard: its hot rows pass the table's capacity (a tenth of
     * the rows of one shard of two), and the restore demotes the excess */
    snprintf(to2, sizeof to2, "%s/resharded-1", cldir);
    snprintf(log, sizeof log, "%s/reshard-1.log", cldir);
    ck_assert_int_eq(zepsctl_reshard(snap, to2, 1, log), 0);
    restored_equal(to2, 1, want, wn, wrec);
    damaged_refused(cldir, snap);
}

/* Acceptance 6: kill -9 of every shard during training; the restart
 * restores both tiers of the cut after clock 8 (snapshots every 4 clocks)
 * exactly: every row equal to a run all in RAM stopped there (8 steps). */
START_TEST(test_crash_restores_both_tiers)
{
    char dir[512], extra[1400];
    ck_assert_int_eq(zt_scratch_dir(dir, sizeof dir, "crash"), 0);
    snprintf(extra, sizeof extra,
             "  tier_dir = \"%s\"; snapshot_dir = \"@DIR@/snap\"; snapshot_every_clocks = 4;\n"
             "  snapshot_on_exit = false;",
             dir);
    zt_cluster cl;
    ck_assert_int_eq(zt_cluster_start(&cl, 2, 1, "bsp", extra, NULL), 0);
    zeps_client *c = zt_client(&cl, 0);
    zeps_sparse_spec se = spec("emb", "adagrad", 9, 1), sf = spec("lin", "adam", 3, 1);
    uint32_t e, f;
    ck_assert_msg(zeps_declare_sparse(c, &se, &e) == 0, "%s", zeps_last_error(c));
    ck_assert_msg(zeps_declare_sparse(c, &sf, &f) == 0, "%s", zeps_last_error(c));
    float *trace = malloc(sizeof(float) * 11 * BATCH * 12);
    train(c, e, f, trace, 11); /* clocks 0..10: the cut after 8 is the newest */
    const char *done = "snapshot set 0000000000000008 (every clocks, clock 8) written";
    for (int i = 0; i < 200 && !(zt_log_has(&cl, 0, done) && zt_log_has(&cl, 1, done)); i++) {
        struct timespec ts = {0, 50000000};
        nanosleep(&ts, NULL);
    }
    ck_assert(zt_log_has(&cl, 0, done) && zt_log_has(&cl, 1, done));
    zeps_client_destroy(&c);
    for (int k = 0; k < 2; k++)
        zt_server_kill(&cl, k, SIGKILL);
    ck_assert(zt_cluster_quiet(&cl, 10));
    for (int k = 0; k < 2; k++)
        ck_assert_int_eq(zt_server_start(&cl, k), 0);
    for (int k = 0; k < 2; k++) {
        ck_assert(zt_log_has(&cl, k, "restored snapshot set 0000000000000008"));
        ck_assert(zt_log_has(&cl, k, "rows restored from"));
    }
    uint8_t *got[2], *want[2];
    uint64_t n[2], rec[2], wn[2], wrec[2];
    read_tables(&cl, 1, got, n, rec);
    /* the records a promotion left in the checkpoint (out of date: their
     * rows are hot) are no cold rows of the restored tier */
    ck_assert_uint_eq(held_rows(&cl), n[0] + n[1]);

    reshard_both_ways(cl.dir, got, n, rec); /* before the stop, which deletes cl.dir */
    ck_assert_int_eq(zt_cluster_stop(&cl), 0);

    zt_cluster ram; /* the reference: the cut "after clock 8" is 8 closed rounds, steps 0..7 */
    ck_assert_int_eq(zt_cluster_start(&ram, 2, 1, "bsp", NULL, NULL), 0);
    c = zt_client(&ram, 0);
    se.tier = sf.tier = 0;
    se.capacity_rows = sf.capacity_rows = 0;
    ck_assert_int_eq(zeps_declare_sparse(c, &se, &e), 0);
    ck_assert_int_eq(zeps_declare_sparse(c, &sf, &f), 0);
    train(c, e, f, trace, 8);
    zeps_client_destroy(&c);
    read_tables(&ram, 0, want, wn, wrec);
    ck_assert_int_eq(zt_cluster_stop(&ram), 0);
    for (int k = 0; k < 2; k++) {
        ck_assert_uint_eq(n[k], wn[k]);
        ck_assert_uint_eq(rec[k], wrec[k]);
        for (uint64_t i = 0; i < n[k]; i++)
            ck_assert_msg(memcmp(got[k] + i * rec[k], want[k] + i * rec[k], (size_t)rec[k]) == 0,
                          "table %d: restored row %llu differs from the state after clock 8", k,
                          (unsigned long long)i);
        free(got[k]);
        free(want[k]);
    }
    free(trace);
}
END_TEST

/* The reference state after clock 8 (8 steps all in RAM) into want/wn/wrec. */
static void reference_8(uint8_t **want, uint64_t *wn, uint64_t *wrec)
{
    zt_cluster ram;
    ck_assert_int_eq(zt_cluster_start(&ram, 2, 1, "bsp", NULL, NULL), 0);
    zeps_client *c = zt_client(&ram, 0);
    zeps_sparse_spec se = spec("emb", "adagrad", 9, 0), sf = spec("lin", "adam", 3, 0);
    uint32_t e, f;
    ck_assert_int_eq(zeps_declare_sparse(c, &se, &e), 0);
    ck_assert_int_eq(zeps_declare_sparse(c, &sf, &f), 0);
    float *trace = malloc(sizeof(float) * 8 * BATCH * 12);
    train(c, e, f, trace, 8);
    free(trace);
    zeps_client_destroy(&c);
    read_tables(&ram, 0, want, wn, wrec);
    ck_assert_int_eq(zt_cluster_stop(&ram), 0);
}

/* One shard SIGKILLed and restarted while the other runs on: the worker's
 * rollback sends the running shard's tiered tables, hot and cold, back to
 * the cut after clock 8 too (its tier replaced by the set's checkpoint). */
START_TEST(test_rollback_one_shard)
{
    char dir[512], extra[1400];
    ck_assert_int_eq(zt_scratch_dir(dir, sizeof dir, "rollback"), 0);
    snprintf(extra, sizeof extra,
             "  tier_dir = \"%s\"; snapshot_dir = \"@DIR@/snap\"; snapshot_every_clocks = 4;\n"
             "  snapshot_on_exit = false;",
             dir);
    zt_cluster cl;
    ck_assert_int_eq(zt_cluster_start(&cl, 2, 1, "bsp", extra, NULL), 0);
    zeps_client *c = zt_client(&cl, 0);
    zeps_sparse_spec se = spec("emb", "adagrad", 9, 1), sf = spec("lin", "adam", 3, 1);
    uint32_t e, f;
    ck_assert_msg(zeps_declare_sparse(c, &se, &e) == 0, "%s", zeps_last_error(c));
    ck_assert_msg(zeps_declare_sparse(c, &sf, &f) == 0, "%s", zeps_last_error(c));
    float *trace = malloc(sizeof(float) * 11 * BATCH * 12);
    train(c, e, f, trace, 11);
    free(trace);
    const char *done = "snapshot set 0000000000000008 (every clocks, clock 8) written";
    for (int i = 0; i < 200 && !(zt_log_has(&cl, 0, done) && zt_log_has(&cl, 1, done)); i++) {
        struct timespec ts = {0, 50000000};
        nanosleep(&ts, NULL);
    }
    ck_assert(zt_log_has(&cl, 0, done) && zt_log_has(&cl, 1, done));
    zt_server_kill(&cl, 0, SIGKILL);
    ck_assert_int_eq(zt_server_start(&cl, 0), 0);
    uint64_t ids[BATCH];
    static float rows[BATCH * 9];
    uint64_t x = 5;
    draw(&x, ids);
    ck_assert_int_eq(zeps_spull(c, e, ids, BATCH, rows, 11), ZEPS_ERESTARTED);
    ck_assert_int_eq(zeps_resume_clock(c), 8);
    ck_assert_msg(zeps_rollback(c, 8) == 0, "%s", zeps_last_error(c));
    ck_assert(zt_wait_log(&cl, 1, "rolled back to snapshot set 0000000000000008"));
    ck_assert(zt_log_has(&cl, 1, "rows restored from"));
    uint8_t *got[2], *want[2];
    uint64_t n[2], rec[2], wn[2], wrec[2];
    n[0] = all_rows(c, e, 9, &got[0], &rec[0]);
    n[1] = all_rows(c, f, 3, &got[1], &rec[1]);
    zeps_client_destroy(&c);
    ck_assert_int_eq(zt_cluster_stop(&cl), 0);
    reference_8(want, wn, wrec);
    for (int k = 0; k < 2; k++) {
        ck_assert_uint_eq(n[k], wn[k]);
        for (uint64_t i = 0; i < n[k]; i++)
            ck_assert_msg(memcmp(got[k] + i * rec[k], want[k] + i * rec[k], (size_t)rec[k]) == 0,
                          "table %d: row %llu after the rollback differs from the state after "
                          "clock 8",
                          k, (unsigned long long)i);
        free(got[k]);
        free(want[k]);
    }
}
END_TEST

/* The counters of shard 0's tiered table: parked pulls, ids read off the
 * loop, rows read on it. */
static void tier_reads(zeps_client *c, uint64_t *parked, uint64_t *fetched, uint64_t *sync)
{
    Zeps__ShardStats *st = zt_stats(c, 0);
    ck_assert_ptr_nonnull(st);
    ck_assert_uint_eq(st->n_tables, 1);
    *parked = st->tables[0]->tier_parked;
    *fetched = st->tables[0]->tier_fetched;
    *sync = st->tables[0]->tier_sync_reads;
    zeps__shard_stats__free_unpacked(st, NULL);
}

/* A pull of 1,000 cold ids (written to the store: a SCAN writes the rows
 * held unwritten) is read in pieces of 256, each made hot as it comes
 * back, and served once all are in: no row read on the loop, the rows
 * those it was given at the fill. */
START_TEST(test_large_pull_in_pieces)
{
    char dir[512], extra[700];
    ck_assert_int_eq(zt_scratch_dir(dir, sizeof dir, "pieces"), 0);
    snprintf(extra, sizeof extra, "  tier_dir = \"%s\";", dir);
    zt_cluster cl;
    ck_assert_int_eq(zt_cluster_start(&cl, 1, 1, "async", extra, NULL), 0);
    zeps_client *c = zt_client(&cl, 0);
    zeps_sparse_spec s = spec("emb", "adagrad", 9, 1);
    s.capacity_rows = 200;
    uint32_t e;
    ck_assert_msg(zeps_declare_sparse(c, &s, &e) == 0, "%s", zeps_last_error(c));
    enum { N = 3000, PULL = 1000, D = 9 };
    static uint64_t ids[N];
    static float first[N * D], again[PULL * D];
    for (uint64_t i = 0; i < N; i++)
        ids[i] = 1000003 * i + 7;
    for (size_t at = 0; at < N; at += 100)
        ck_assert_msg(zeps_spull(c, e, ids + at, 100, first + at * D, 0) == 0, "%s",
                      zeps_last_error(c));
    uint8_t *rows;
    uint64_t rec;
    ck_assert_uint_eq(all_rows(c, e, 9, &rows, &rec), N);
    free(rows);
    uint64_t p0, f0, s0, p1, f1, s1;
    tier_reads(c, &p0, &f0, &s0);
    ck_assert_msg(zeps_spull(c, e, ids, PULL, again, 0) == 0, "%s", zeps_last_error(c));
    tier_reads(c, &p1, &f1, &s1);
    ck_assert_int_eq(memcmp(again, first, sizeof again), 0);
    ck_assert_uint_eq(p1 - p0, 1);
    ck_assert_uint_ge(f1 - f0, PULL - 200);
    ck_assert_uint_eq(s1 - s0, 0);
    zeps_client_destroy(&c);
    ck_assert_int_eq(zt_cluster_stop(&cl), 0);
}
END_TEST

/* A pull of ids the tier was never given is not parked for a read (its
 * filter of ids given, seen.h) and answers what all in RAM gives them;
 * a pull of cold ids written to RocksDB still is parked. */
START_TEST(test_new_ids_not_read)
{
    char dir[512], extra[700];
    ck_assert_int_eq(zt_scratch_dir(dir, sizeof dir, "new-ids"), 0);
    snprintf(extra, sizeof extra, "  tier_dir = \"%s\";", dir);
    zt_cluster cl;
    ck_assert_int_eq(zt_cluster_start(&cl, 1, 1, "async", extra, NULL), 0);
    zeps_client *c = zt_client(&cl, 0);
    zeps_sparse_spec s = spec("emb", "adagrad", 9, 1), r = spec("ram", "adagrad", 9, 0);
    s.capacity_rows = 200;
    uint32_t e, e2;
    ck_assert_msg(zeps_declare_sparse(c, &s, &e) == 0, "%s", zeps_last_error(c));
    enum { N = 3000, PULL = 500, D = 9 };
    static uint64_t ids[N + PULL];
    static float rows[(N + PULL) * D], fresh[PULL * D];
    for (uint64_t i = 0; i < N + PULL; i++)
        ids[i] = 1000003 * i + 7;
    for (size_t at = 0; at < N; at += 100)
        ck_assert_msg(zeps_spull(c, e, ids + at, 100, rows + at * D, 0) == 0, "%s",
                      zeps_last_error(c));
    uint8_t *all;
    uint64_t rec;
    ck_assert_uint_eq(all_rows(c, e, 9, &all, &rec), N); /* the cold rows written */
    free(all);
    uint64_t p0, f0, s0, p1, f1, s1, p2, f2, s2;
    tier_reads(c, &p0, &f0, &s0);
    ck_assert_msg(zeps_spull(c, e, ids + N, PULL, rows + N * D, 0) == 0, "%s", zeps_last_error(c));
    tier_reads(c, &p1, &f1, &s1);
    ck_assert_uint_eq(p1 - p0, 0);
    ck_assert_uint_eq(f1 - f0, 0);
    ck_assert_uint_eq(s1 - s0, 0);
    ck_assert_msg(zeps_spull(c, e, ids, PULL, rows, 0) == 0, "%s", zeps_last_error(c));
    tier_reads(c, &p2, &f2, &s2);
    ck_assert_uint_eq(p2 - p1, 1);
    ck_assert_uint_ge(f2 - f1, PULL - 200);
    zeps_client_destroy(&c);
    ck_assert_int_eq(zt_cluster_stop(&cl), 0);
    ck_assert_int_eq(zt_cluster_start(&cl, 1, 1, "async", NULL, NULL), 0);
    c = zt_client(&cl, 0);
    r.name = "emb";
    ck_assert_msg(zeps_declare_sparse(c, &r, &e2) == 0, "%s", zeps_last_error(c));
    ck_assert_msg(zeps_spull(c, e2, ids + N, PULL, fresh, 0) == 0, "%s", zeps_last_error(c));
    ck_assert_int_eq(memcmp(fresh, rows + N * D, sizeof fresh), 0);
    zeps_client_destroy(&c);
    ck_assert_int_eq(zt_cluster_stop(&cl), 0);
}
END_TEST

START_TEST(test_refused)
{
    /* tier asked of shards without tier_dir */
    zt_cluster cl;
    ck_assert_int_eq(zt_cluster_start(&cl, 1, 1, "async", NULL, NULL), 0);
    zeps_client *c = zt_client(&cl, 0);
    zeps_sparse_spec s = spec("emb", "adagrad", 9, 1);
    uint32_t e;
    ck_assert_int_eq(zeps_declare_sparse(c, &s, &e), ZEPS_ECONFIG);
    ck_assert_msg(strstr(zeps_last_error(c), "tier_dir"), "%s", zeps_last_error(c));
    zeps_client_destroy(&c);
    ck_assert_int_eq(zt_cluster_stop(&cl), 0);

    /* a shard whose tier_dir is missing does not start */
    char dir[512], conf[700], log[700], bin[512];
    ck_assert_int_eq(zt_scratch_dir(dir, sizeof dir, "missing"), 0);
    snprintf(conf, sizeof conf, "%s/c.conf", dir);
    snprintf(log, sizeof log, "%s/server.log", dir);
    FILE *f = fopen(conf, "w");
    fprintf(f, "cluster = { servers = [\"ipc://%s/s0\"]; workers = 1; tier_dir = \"%s/nope\"; };\n",
            dir, dir);
    fclose(f);
    char *argv[] = {
        (char *)zt_bin("zeps-server", bin, sizeof bin), "--config", conf, "--shard", "0", NULL};
    int st = zt_wait(zt_spawn(argv[0], argv, log), 10);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 2, "status %d", st);
    f = fopen(log, "r");
    char text[4096] = "";
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = '\0';
    ck_assert_msg(strstr(text, "tier_dir") && strstr(text, "nope"), "%s", text);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("tier_cluster");
    TCase *tc = tcase_create("tier_cluster");
    tcase_set_timeout(tc, 240);
    tcase_add_test(tc, test_exact_against_ram);
    tcase_add_test(tc, test_refused);
    tcase_add_test(tc, test_large_pull_in_pieces);
    tcase_add_test(tc, test_new_ids_not_read);
    tcase_add_test(tc, test_crash_restores_both_tiers);
    tcase_add_test(tc, test_rollback_one_shard);
    suite_add_tcase(s, tc);
    return zt_run_suite(s);
}
