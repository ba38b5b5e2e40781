/*
 * ctl_snapshot.c - zepsctl snapshot: look into snapshot files and sets.
 *
 *   zepsctl snapshot inspect FILE.zsnap   header, tables, workers; every CRC checked
 *   zepsctl snapshot inspect DIR          the sets its MANIFEST names, newest first
 *   zepsctl snapshot reshard SRC DST S2   the newest set of SRC, re-cut for S2 shards, into DST
 *   zepsctl snapshot take --config FILE   ask a running cluster for a snapshot (bsp: a cut at
 *                                         the next clock every shard reaches) and wait for it
 *
 * Reading goes through common/snapshot (zeps_snapshot), the same code the
 * server restores with, so what this prints is what a restore would see.
 * `take` learns from the shards' STATS whether the cluster's mode takes
 * consistent cuts (ZP_CAP_CUTS); it never parses the mode's name.
 */
#include <inttypes.h>
#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <time.h>

#include "config.h"
#include "curve.h"
#include "ctl.h"
#include "ctl_reshard_tier.h"
#include "exitcode.h"
#include "snapshot.h"
#include "wire.h"
#include "zeps.h"
#include "zeps.pb-c.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: zepsctl snapshot inspect FILE.zsnap | SNAPSHOT_DIR\n"
               "       zepsctl snapshot reshard SRC_DIR DST_DIR SHARDS\n"
               "  inspect FILE: print its header, tables and workers after checking every CRC\n"
               "  inspect DIR:  list the complete sets its MANIFEST names, newest first\n"
               "  reshard: write the newest complete set of SRC_DIR, re-cut for SHARDS\n"
               "           shards (dense slices and optimizer state; sparse rows and cold\n"
               "           tier checkpoints re-hashed), as a set of DST_DIR; start the new\n"
               "           cluster with snapshot_dir = DST_DIR\n"
               "       zepsctl snapshot take --config FILE [--timeout S]\n"
               "  take: ask every shard of a running cluster for a snapshot and wait (up to\n"
               "        S seconds, default 60) until every shard wrote it. bsp: a consistent\n"
               "        cut at the clock every shard stands at, or else the next one; other\n"
               "        modes: now, as one set\n");
}

/* Connect to the cluster of `conf` as a tool, waiting at most `timeout` s
 * for the shards (a missing cluster ends in that time, not after the
 * cluster file's hello_timeout_ms). Returns 0 with *out owning the client,
 * or the exit status after printing why. */
static int connect_tool(const char *conf, double timeout, zeps_client **out)
{
    zp_config *cfg = calloc(1, sizeof(*cfg));
    char err[1024];
    zp_curve_client_keys keys;
    if (!cfg || zp_config_load(cfg, conf, err, sizeof(err)) != 0 ||
        zp_curve_load_client(cfg, &keys, err, sizeof(err)) != 0) {
        fprintf(stderr, "zepsctl snapshot take: %s\n", cfg ? err : "out of memory");
        free(cfg);
        return ZP_EXIT_SETUP;
    }
    int ms = timeout * 1000 < 100 ? 100 : timeout * 1000 > 3.6e6 ? 3600000 : (int)(timeout * 1000);
    if (cfg->hello_timeout_ms < ms) /* the cluster file's bound, when it is the tighter one */
        ms = cfg->hello_timeout_ms;
    zeps_options opt = {
        .request_timeout_ms = cfg->request_timeout_ms < ms ? cfg->request_timeout_ms : ms,
        .max_retries = cfg->max_retries > 0 ? cfg->max_retries : 1,
        .hello_timeout_ms = ms,
        .num_workers = cfg->num_workers,
        .max_message_bytes = cfg->max_message_bytes,
        .curve_server_key = keys.server_public,
        .curve_public_key = keys.client_public,
        .curve_secret_key = keys.client_secret,
    };
    /* every replica of every shard: with replicas the tool asks the primaries */
    const char *eps[ZP_MAX_SHARDS + ZP_MAX_REPLICA_ENDPOINTS];
    int n = 0;
    for (int k = 0; k < cfg->num_shards; k++)
        for (int r = 0; r < cfg->replicas; r++)
            eps[n++] = zp_config_endpoint(cfg, k, r);
    int rc =
        zeps_client_new_replicas(out, eps, cfg->num_shards, cfg->replicas, ZEPS_RANK_TOOL, &opt);
    explicit_bzero(&keys, sizeof(keys));
    if (rc != 0) /* the library logged why: a key file, a refused key, no answer */
        fprintf(stderr, "zepsctl snapshot take: cannot reach the cluster of %s within %.1f s\n",
                conf, ms / 1e3);
    free(cfg);
    return rc == 0 ? 0 : zp_exitcode_startup(rc);
}

static int take(int argc, char **argv)
{
    const char *conf = NULL;
    double timeout = 60;
    for (int i = 2; i < argc; i++) {
        if (strcmp(argv[i], "--config") == 0 && i + 1 < argc)
            conf = argv[++i];
        else if (strcmp(argv[i], "--timeout") == 0 && i + 1 < argc)
            timeout = atof(argv[++i]);
        else {
            usage(stderr);
            return 2;
        }
    }
    if (!conf) {
        fprintf(stderr, "zepsctl snapshot take: --config FILE is required\n");
        return 2;
    }
    zeps_client *c;
    int rc = connect_tool(conf, timeout, &c);
    if (rc != 0)
        return rc;
    int64_t cut = -1;
    uint64_t setid = 0;
    rc = zeps_snapshot_take(c, timeout, &cut, &setid);
    if (rc == 0 && cut >= 0)
        printf("snapshot set %016" PRIx64 " (consistent cut at clock %lld) written by all %d "
               "shards\n",
               setid, (long long)cut, zeps_num_shards(c));
    else if (rc == 0)
        printf("snapshot set %016" PRIx64 " (point in time) written by all %d shards\n", setid,
               zeps_num_shards(c));
    else
        fprintf(stderr, "zepsctl snapshot take: %s\n", zeps_last_error(c));
    zeps_client_destroy(&c);
    return rc == 0 ? 0 : 1;
}

/* Read the newest complete set of dir: *src gets its nsets records. */
static int read_newest(const char *dir, zp_snapshot ***src, uint32_t *n, uint64_t *setid)
{
    zp_manifest *m;
    char err[1024];
    if (zp_manifest_load(dir, &m, err, sizeof(err)) != 0) {
        fprintf(stderr, "zepsctl snapshot: %s\n", err);
        return 1;
    }
    const zp_snap_set *set = zp_manifest_newest(m);
    if (!set) {
        fprintf(stderr, "zepsctl snapshot: %s holds no complete set\n", dir);
        zp_manifest_free(&m);
        return 1;
    }
    *n = set->nshards;
    *setid = set->setid;
    *src = calloc(set->nshards, sizeof(**src));
    int rc = 0;
    for (uint32_t k = 0; k < set->nshards && rc == 0; k++) {
        char path[2048];
        snprintf(path, sizeof(path), "%s/%s", dir, set->files[k].name);
        if (zp_snapshot_read(path, &(*src)[k], err, sizeof(err)) != 0) {
            fprintf(stderr, "zepsctl snapshot: %s\n", err);
            rc = 1;
        }
    }
    zp_manifest_free(&m);
    return rc;
}

static int reshard(const char *src_dir, const char *dst_dir, const char *shards_text)
{
    char *end;
    long nout = strtol(shards_text, &end, 10);
    if (*end || nout < 1 || nout > 256) {
        fprintf(stderr, "zepsctl snapshot reshard: SHARDS must be 1..256, got '%s'\n", shards_text);
        return 2;
    }
    zp_snapshot **src = NULL;
    uint32_t nsrc = 0;
    uint64_t setid = 0;
    int rc = read_newest(src_dir, &src, &nsrc, &setid);
    if (rc == 0)
        rc = zp_ctl_reshard_tier_check(src_dir, setid, (const zp_snapshot *const *)src, nsrc);
    if (rc == 0 && mkdir(dst_dir, 0750) != 0 && errno != EEXIST) {
        fprintf(stderr, "zepsctl snapshot reshard: %s: %s\n", dst_dir, strerror(errno));
        rc = 1;
    }
    char err[1024];
    for (long j = 0; rc == 0 && j < nout; j++) {
        zp_snapshot *out;
        char path[2048];
        if (zp_reshard_build((const zp_snapshot *const *)src, nsrc, (uint32_t)j, (uint32_t)nout,
                             &out, err, sizeof(err)) != 0 ||
            zp_snapshot_write(dst_dir, out, path, sizeof(path), err, sizeof(err)) != 0) {
            fprintf(stderr, "zepsctl snapshot reshard: %s\n", err);
            rc = 1;
        } else {
            printf("wrote %s\n", path);
        }
        zp_snapshot_free(&out);
    }
    /* the cold tiers after the files, the manifest last: a set is listed
     * (complete) only once every part of it is written */
    if (rc == 0)
        rc = zp_ctl_reshard_tier_write(src_dir, dst_dir, setid, (const zp_snapshot *const *)src,
                                       nsrc, (uint32_t)nout);
    if (rc == 0 && zp_manifest_add_set(dst_dir, setid, (uint32_t)nout, err, sizeof(err)) != 0) {
        fprintf(stderr, "zepsctl snapshot reshard: %s\n", err);
        rc = 1;
    }
    if (rc == 0)
        printf("set %016" PRIx64 " of %s: %u shards -> %ld shards in %s\n", setid, src_dir, nsrc,
               nout, dst_dir);
    for (uint32_t k = 0; src && k < nsrc; k++)
        zp_snapshot_free(&src[k]);
    free(src);
    return rc;
}

static int inspect_file(const char *path)
{
    zp_snapshot *s;
    char err[1024];
    if (zp_snapshot_read(path, &s, err, sizeof(err)) != 0) {
        fprintf(stderr, "zepsctl snapshot: %s\n", err);
        return 1;
    }
    printf("%s: valid (every CRC checked)\n", path);
    printf("  format %u, shard %u of %u, %u workers, consistency %s\n", s->h.format, s->h.shard,
           s->h.nshards, s->h.nworkers, s->h.consistency);
    printf("  set %016" PRIx64 ", %s %" PRId64 ", written by incarnation %016" PRIx64 "\n",
           s->h.setid, s->h.clock >= 0 ? "consistent cut after clock" : "point in time, clock",
           s->h.clock, s->h.incarnation);
    if (s->slotmap) /* format 2: the map the rows were placed by */
    {
        uint32_t slots;
        memcpy(&slots, s->slotmap + 8, 4);
        bool dense = s->slotmap_len > ZP_SLOTMAP_WIRE_HDR + 2 * (uint64_t)slots;
        printf("  slot map: epoch %" PRIu64 ", %u slots%s (recorded: rows %schecked against "
               "it)\n",
               s->h.slot_epoch, slots, dense ? " and dense pieces" : "",
               dense ? "and dense records " : "");
    } else
        printf("  slot map: the default map of %u shards (epoch 0)\n", s->h.nshards);
    printf("  tables (%u)\n", s->ntables);
    for (uint32_t i = 0; i < s->ntables; i++) {
        const zp_snap_table *t = &s->tables[i];
        if (t->kind == 1) {
            uint64_t hdr[8];
            memcpy(hdr, t->rows, sizeof(hdr));
            printf("    %-20s sparse, dim %" PRIu64 ", %" PRIu64 " rows, %u state floats/value; "
                   "created %" PRIu64 ", not admitted %" PRIu64 ", evicted %" PRIu64
                   " (ttl) %" PRIu64 " (capacity)\n",
                   t->name, t->length, hdr[0], t->state_per_param, hdr[2], hdr[3], hdr[5], hdr[6]);
            continue;
        }
        printf("    %-20s length %" PRIu64 ", slice [%" PRIu64 ", %" PRIu64 "), %s lr %g, version "
               "%" PRIu64 ", round %" PRId64 ", %u state floats/param\n",
               t->name, t->length, t->begin, t->end, t->optimizer, (double)t->hyper.lr, t->version,
               t->round, t->state_per_param);
    }
    printf("  workers (%u)\n", s->nworker_recs);
    for (uint32_t i = 0; i < s->nworker_recs; i++) {
        const zp_snap_worker *w = &s->workers[i];
        printf("    rank %u: %s, clock %" PRId64 ", incarnation %016" PRIx64 ", max seq %" PRIu64
               "\n",
               w->rank,
               w->left     ? "left"
               : w->joined ? "joined"
                           : "never joined",
               w->clock, w->incarnation, w->max_seq);
    }
    zp_snapshot_free(&s);
    return 0;
}

/* True if set `setid` is no longer in dir's manifest (read anew). */
static bool pruned_since(const char *dir, uint64_t setid)
{
    zp_manifest *m;
    char err[1024];
    if (zp_manifest_load(dir, &m, err, sizeof(err)) != 0)
        return false;
    bool gone = true;
    for (size_t i = 0; i < m->nsets; i++)
        gone &= m->sets[i].setid != setid;
    zp_manifest_free(&m);
    return gone;
}

static int inspect_dir(const char *dir)
{
    zp_manifest *m;
    char err[1024];
    if (zp_manifest_load(dir, &m, err, sizeof(err)) != 0) {
        fprintf(stderr, "zepsctl snapshot: %s\n", err);
        return 1;
    }
    printf("%s: %zu complete set(s), newest first\n", dir, m->nsets);
    int bad = 0;
    for (size_t i = 0; i < m->nsets; i++) {
        const zp_snap_set *set = &m->sets[i];
        printf("  set %016" PRIx64 ": %u shards, clock %" PRId64 "\n", set->setid, set->nshards,
               set->clock);
        for (uint32_t k = 0; k < set->nshards; k++) {
            char path[2048];
            snprintf(path, sizeof(path), "%s/%s", dir, set->files[k].name);
            zp_snap_info info;
            int rc = zp_snapshot_read_verify(path, &info, err, sizeof(err));
            bool pruned = false;
            /* Live shards prune while we read; their writers run at a low
             * priority, so give the manifest a moment to say so before
             * calling a missing file damage. */
            for (int t = 0; rc != 0 && !(pruned = pruned_since(dir, set->setid)) && t < 20; t++) {
                struct timespec ts = {0, 50000000};
                nanosleep(&ts, NULL);
                rc = zp_snapshot_read_verify(path, &info, err, sizeof(err));
            }
            if (rc != 0 && pruned) {
                /* a live shard completed a newer set and pruned this one
                 * after the manifest was read: not damage */
                printf("    %-40s %10" PRIu64 " bytes  pruned while inspecting\n",
                       set->files[k].name, set->files[k].size);
                continue;
            }
            printf("    %-40s %10" PRIu64 " bytes  %s\n", set->files[k].name, set->files[k].size,
                   rc == 0 ? "ok" : err);
            bad += rc != 0;
        }
    }
    zp_manifest_free(&m);
    return bad ? 1 : 0;
}

int zp_ctl_snapshot(int argc, char **argv)
{
    /* `snapshot --help` and `snapshot inspect|take|reshard --help` alike */
    for (int i = 1; i < argc && i <= 2; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return 0;
        }
    if (argc == 5 && strcmp(argv[1], "reshard") == 0)
        return reshard(argv[2], argv[3], argv[4]);
    if (argc >= 2 && strcmp(argv[1], "take") == 0)
        return take(argc, argv);
    if (argc != 3 || strcmp(argv[1], "inspect") != 0) {
        usage(stderr);
        return 2;
    }
    struct stat sb;
    if (stat(argv[2], &sb) != 0) {
        fprintf(stderr, "zepsctl snapshot: %s: not found\n", argv[2]);
        return ZP_EXIT_SETUP; /* a bad argument, as a bad option */
    }
    return S_ISDIR(sb.st_mode) ? inspect_dir(argv[2]) : inspect_file(argv[2]);
}
