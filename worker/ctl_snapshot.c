/*
 * ctl_snapshot.c - zepsctl snapshot: look into snapshot files and sets.
 *
 *   zepsctl snapshot inspect FILE.zsnap   header, tables, workers; every CRC checked
 *   zepsctl snapshot inspect DIR          the sets its MANIFEST names, newest first
 *   zepsctl snapshot reshard SRC DST S2   the newest set of SRC, re-cut for S2 shards, into DST
 *
 * Reading goes through server/snapshot.c, the same code the server restores
 * with, so what this prints is what a restore would see.
 */
#include <inttypes.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ctl.h"
#include "snapshot.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: zepsctl snapshot inspect FILE.zsnap | SNAPSHOT_DIR\n"
               "       zepsctl snapshot reshard SRC_DIR DST_DIR SHARDS\n"
               "  inspect FILE: print its header, tables and workers after checking every CRC\n"
               "  inspect DIR:  list the complete sets its MANIFEST names, newest first\n"
               "  reshard: write the newest complete set of SRC_DIR, re-cut for SHARDS\n"
               "           shards (dense slices and optimizer state), as a set of DST_DIR;\n"
               "           start the new cluster with snapshot_dir = DST_DIR\n");
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
    if (rc == 0 && mkdir(dst_dir, 0750) != 0 && errno != EEXIST) {
        fprintf(stderr, "zepsctl snapshot reshard: %s: %s\n", dst_dir, strerror(errno));
        rc = 1;
    }
    char err[1024];
    for (long j = 0; rc == 0 && j < nout; j++) {
        zp_snapshot *out;
        char path[2048];
        if (zp_snapshot_reshard((const zp_snapshot *const *)src, nsrc, (uint32_t)j,
                                (uint32_t)nout, &out, err, sizeof(err)) != 0 ||
            zp_snapshot_write(dst_dir, out, path, sizeof(path), err, sizeof(err)) != 0) {
            fprintf(stderr, "zepsctl snapshot reshard: %s\n", err);
            rc = 1;
        } else {
            printf("wrote %s\n", path);
        }
        zp_snapshot_free(&out);
    }
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
    printf("  tables (%u)\n", s->ntables);
    for (uint32_t i = 0; i < s->ntables; i++) {
        const zp_snap_table *t = &s->tables[i];
        printf("    %-20s length %" PRIu64 ", slice [%" PRIu64 ", %" PRIu64 "), %s lr %g, version "
               "%" PRIu64 ", round %" PRId64 ", %u state floats/param\n",
               t->name, t->length, t->begin, t->end, t->optimizer, (double)t->hyper.lr,
               t->version, t->round, t->state_per_param);
    }
    printf("  workers (%u)\n", s->nworker_recs);
    for (uint32_t i = 0; i < s->nworker_recs; i++) {
        const zp_snap_worker *w = &s->workers[i];
        printf("    rank %u: %s, clock %" PRId64 ", incarnation %016" PRIx64 ", max seq %" PRIu64
               "\n",
               w->rank, w->left ? "left" : w->joined ? "joined" : "never joined", w->clock,
               w->incarnation, w->max_seq);
    }
    zp_snapshot_free(&s);
    return 0;
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
            int rc = zp_snapshot_verify(path, &info, err, sizeof(err));
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
    if (argc == 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        usage(stdout);
        return 0;
    }
    if (argc == 5 && strcmp(argv[1], "reshard") == 0)
        return reshard(argv[2], argv[3], argv[4]);
    if (argc != 3 || strcmp(argv[1], "inspect") != 0) {
        usage(stderr);
        return 2;
    }
    struct stat sb;
    if (stat(argv[2], &sb) != 0) {
        fprintf(stderr, "zepsctl snapshot: %s: not found\n", argv[2]);
        return 1;
    }
    return S_ISDIR(sb.st_mode) ? inspect_dir(argv[2]) : inspect_file(argv[2]);
}
