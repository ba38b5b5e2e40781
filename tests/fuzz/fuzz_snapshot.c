/*
 * fuzz_snapshot.c - libFuzzer target: reading snapshot files and the
 * MANIFEST of a snapshot directory (common/snapshot/).
 *
 * The input's first byte picks what the rest is: even, a snapshot file
 * (read by zp_snapshot_read_info, _read_verify and _read; a record read is
 * validated and resharded into shard 0 of 2, as zepsctl snapshot reshard
 * does); odd, a MANIFEST (loaded, its newest set looked up, and the
 * restore search run over it, which opens the set files it names: none
 * exist, so every set must be skipped with a reason). The file is written
 * to a private directory made at start-up in /dev/shm (removed at exit). Crashes,
 * sanitizer reports, and an error without a message are the findings.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz_input.h"
#include "snapshot.h"

static char dir[64];
static char file[128];

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void cleanup(void)
{
    char path[160];
    snprintf(path, sizeof(path), "%s/MANIFEST", dir);
    unlink(path);
    unlink(file);
    rmdir(dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    /* in memory where there is /dev/shm: ~40 times the execs of /tmp */
    snprintf(dir, sizeof(dir), "/dev/shm/zeps-fuzz-snap-XXXXXX");
    if (!mkdtemp(dir)) {
        const char *tmp = getenv("TMPDIR"); /* tests write where TMPDIR says */
        snprintf(dir, sizeof(dir), "%s/zeps-fuzz-snap-XXXXXX", tmp && *tmp ? tmp : "/tmp");
        if (!mkdtemp(dir))
            abort();
    }
    snprintf(file, sizeof(file), "%s/input.zsnap", dir);
    atexit(cleanup);
    return 0;
}

static void put_file(const char *path, const uint8_t *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(p, 1, n, f) != n || fclose(f) != 0)
        abort();
}

static void snapshot_file(const uint8_t *p, size_t n)
{
    char err[512];
    zp_snap_info info;
    put_file(file, p, n);
    err[0] = 0;
    if (zp_snapshot_read_info(file, &info, err, sizeof(err)) != 0 && !err[0])
        abort();
    err[0] = 0;
    if (zp_snapshot_read_verify(file, &info, err, sizeof(err)) != 0 && !err[0])
        abort();
    zp_snapshot *s = NULL;
    err[0] = 0;
    if (zp_snapshot_read(file, &s, err, sizeof(err)) != 0) {
        if (!err[0])
            abort();
        return;
    }
    if (zp_snapshot_validate(s, err, sizeof(err)) == 0 && s->h.nshards == 1) {
        zp_snapshot *out = NULL;
        const zp_snapshot *src[1] = {s};
        if (zp_reshard_build(src, 1, 0, 2, &out, err, sizeof(err)) == 0)
            zp_snapshot_free(&out);
    }
    zp_snapshot_free(&s);
}

static void ignore(void *arg, const char *msg)
{
}

static void manifest_file(const uint8_t *p, size_t n)
{
    char path[160], err[512];
    snprintf(path, sizeof(path), "%s/MANIFEST", dir);
    put_file(path, p, n);
    zp_manifest *m = NULL;
    err[0] = 0;
    if (zp_manifest_load(dir, &m, err, sizeof(err)) != 0) {
        if (!err[0])
            abort();
        return;
    }
    const zp_snap_set *newest = zp_manifest_newest(m);
    uint32_t nshards = newest ? newest->nshards : 1;
    zp_manifest_free(&m);
    zp_snapshot *s = NULL;
    uint64_t setid;
    zp_manifest_find_restorable(dir, 0, nshards, &s, &setid, ignore, NULL, err, sizeof(err));
    zp_snapshot_free(&s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    zf_cursor c = {data, size};
    if (zf_byte(&c) & 1)
        manifest_file(c.p, c.left);
    else
        snapshot_file(c.p, c.left);
    return 0;
}
