/*
 * test_manifest.c - the manifest of complete snapshot sets
 * (common/snapshot/manifest.c): adding sets and their order, restoring with
 * a fallback past a corrupt or foreign file, and pruning.
 */
#define _GNU_SOURCE
#include <check.h>
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <isa-l/crc.h>

#include "check_main.h"
#include "snap_fixture.h"
#include "snapshot.h"
#include "zeps_errors.h"

/* ---- the manifest ---- */

static void write_set(uint64_t setid, uint32_t S, uint32_t only /* UINT32_MAX = all */)
{
    for (uint32_t k = 0; k < S; k++) {
        if (only != UINT32_MAX && k != only)
            continue;
        zt_snap_fx f;
        zt_snap_fx_make(&f, setid, k, S, (uint32_t)setid);
        zt_snap_write_ok(f.s, NULL, 0);
        zt_snap_fx_free(&f);
    }
}

static void add_ok(uint64_t setid, uint32_t S)
{
    char err[512];
    int rc = zp_manifest_set_complete(zt_snap_dir, setid, S, err, sizeof(err));
    ck_assert_msg(rc == 0, "complete: %s", err);
    rc = zp_manifest_add_set(zt_snap_dir, setid, S, err, sizeof(err));
    ck_assert_msg(rc == 0, "add: %s", err);
}

static void corrupt_payload(uint64_t setid, uint32_t shard, uint32_t S)
{
    char path[512];
    ck_assert_int_eq(zp_snapshot_path(path, sizeof(path), zt_snap_dir, setid, shard, S), 0);
    size_t len;
    uint8_t *b = zt_snap_slurp(path, &len);
    b[len - 100] ^= 0x04;
    zt_snap_spit(path, b, len);
    free(b);
}

START_TEST(test_manifest)
{
    zt_snap_dir_make();
    char err[512], path[512];
    zp_manifest *m = NULL;
    ck_assert_int_eq(zp_manifest_load(zt_snap_dir, &m, err, sizeof(err)), 0);
    ck_assert_uint_eq(m->nsets, 0);
    ck_assert_ptr_null(zp_manifest_newest(m));
    zp_manifest_free(&m);

    write_set(1, 2, UINT32_MAX);
    write_set(2, 2, UINT32_MAX);
    write_set(3, 2, UINT32_MAX);
    add_ok(2, 2);
    add_ok(3, 2);
    add_ok(1, 2);
    add_ok(2, 2); /* again: replaces, no duplicate */
    ck_assert_int_eq(zp_manifest_load(zt_snap_dir, &m, err, sizeof(err)), 0);
    ck_assert_uint_eq(m->nsets, 3);
    for (size_t i = 0; i < 3; i++) {
        const zp_snap_set *s = &m->sets[i];
        ck_assert_uint_eq(s->setid, 3 - i);
        ck_assert_uint_eq(s->nshards, 2);
        ck_assert_int_eq(s->clock, 42);
        for (uint32_t k = 0; k < 2; k++) {
            zp_snap_info in;
            ck_assert_int_eq(zp_snapshot_path(path, sizeof(path), zt_snap_dir, s->setid, k, 2), 0);
            ck_assert_str_eq(path + strlen(zt_snap_dir) + 1, s->files[k].name);
            ck_assert_int_eq(zp_snapshot_read_info(path, &in, err, sizeof(err)), 0);
            ck_assert_uint_eq(s->files[k].size, in.file_size);
            ck_assert_uint_eq(s->files[k].header_crc, in.header_crc);
        }
    }
    ck_assert_uint_eq(zp_manifest_newest(m)->setid, 3);
    zp_manifest_free(&m);
    ck_assert_ptr_null(m);

    /* An incomplete set is not complete and cannot be added. */
    write_set(4, 2, 0);
    ck_assert_int_eq(zp_manifest_set_complete(zt_snap_dir, 4, 2, err, sizeof(err)), ZEPS_EDATA);
    ck_assert_int_eq(zp_snapshot_path(path, sizeof(path), zt_snap_dir, 4, 1, 2), 0);
    ck_assert_msg(strstr(err, path), "%s", err);
    ck_assert_int_ne(zp_manifest_add_set(zt_snap_dir, 4, 2, err, sizeof(err)), 0);
    ck_assert_msg(strstr(err, path), "%s", err);
    /* A corrupt payload: present but not complete. */
    write_set(4, 2, 1);
    corrupt_payload(4, 1, 2);
    ck_assert_int_eq(zp_manifest_set_complete(zt_snap_dir, 4, 2, err, sizeof(err)), ZEPS_EDATA);
    ck_assert_msg(strstr(err, path) && strstr(err, "CRC mismatch"), "%s", err);

    /* No temporaries left in dir: MANIFEST, its lock and the set dirs. */
    ck_assert_int_eq(zt_snap_count_entries(zt_snap_dir), 2 + 4);

    /* A damaged manifest is detected. */
    char mpath[600];
    snprintf(mpath, sizeof(mpath), "%s/MANIFEST", zt_snap_dir);
    size_t len;
    uint8_t *b = zt_snap_slurp(mpath, &len);
    ck_assert_int_eq(memcmp(b, "zeps-manifest 1\n", 16), 0);
    b[20] ^= 1;
    zt_snap_spit(mpath, b, len);
    ck_assert_int_eq(zp_manifest_load(zt_snap_dir, &m, err, sizeof(err)), ZEPS_EDATA);
    ck_assert_msg(strstr(err, mpath) && strstr(err, "CRC mismatch"), "%s", err);
    zt_snap_spit(mpath, b, len / 2);
    ck_assert_int_eq(zp_manifest_load(zt_snap_dir, &m, err, sizeof(err)), ZEPS_EDATA);
    ck_assert_ptr_null(m);
    b[20] ^= 1; /* intact again, but for its final newline */
    zt_snap_spit(mpath, b, len - 1);
    ck_assert_int_eq(zp_manifest_load(zt_snap_dir, &m, err, sizeof(err)), ZEPS_EDATA);
    ck_assert_msg(strstr(err, mpath) && strstr(err, "truncated (no final newline)"), "%s", err);
    ck_assert_ptr_null(m);
    free(b);
    zt_snap_dir_remove();
}
END_TEST

typedef struct logbuf {
    int n;
    char last[1024];
    char all[4096];
} logbuf;

static void log_cb(void *arg, const char *msg)
{
    logbuf *l = arg;
    l->n++;
    snprintf(l->last, sizeof(l->last), "%s", msg);
    size_t u = strlen(l->all);
    snprintf(l->all + u, sizeof(l->all) - u, "%s\n", msg);
}

/* A process whose descriptor 0 is free (standard input closed) gets the
 * manifest lock there: adding a set, pinning and pruning work all the same. */
START_TEST(test_descriptor_zero)
{
    zt_snap_dir_make();
    write_set(1, 2, UINT32_MAX);
    write_set(2, 2, UINT32_MAX);
    char err[512];
    ck_assert_int_eq(zp_manifest_set_complete(zt_snap_dir, 1, 2, err, sizeof(err)), 0);
    ck_assert_int_eq(zp_manifest_set_complete(zt_snap_dir, 2, 2, err, sizeof(err)), 0);
    pid_t kid = fork();
    ck_assert_int_ge(kid, 0);
    if (kid == 0) {
        close(0);
        unsigned removed = 0;
        int code = zp_manifest_add_set(zt_snap_dir, 1, 2, err, sizeof(err)) != 0        ? 1
                   : zp_manifest_add_set(zt_snap_dir, 2, 2, err, sizeof(err)) != 0      ? 2
                   : zp_manifest_pin(zt_snap_dir, 1, err, sizeof(err)) != 0             ? 3
                   : zp_manifest_prune(zt_snap_dir, 1, &removed, err, sizeof(err)) != 0 ? 4
                                                                                        : 0;
        if (code)
            fprintf(stderr, "step %d: %s\n", code, err);
        _exit(code);
    }
    int st;
    ck_assert_int_eq(waitpid(kid, &st, 0), kid);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %d", st);
    zp_manifest *m = NULL;
    ck_assert_int_eq(zp_manifest_load(zt_snap_dir, &m, err, sizeof(err)), 0);
    ck_assert_uint_eq(m->nsets, 2); /* both recorded, the pinned one kept */
    zp_manifest_free(&m);
    zt_snap_dir_remove();
}
END_TEST

START_TEST(test_restore_fallback)
{
    zt_snap_dir_make();
    char err[1024];
    zp_snapshot *s = (zp_snapshot *)1;
    uint64_t id = 0;
    logbuf lb = {0};

    /* Nothing yet: a fresh start, not an error. */
    ck_assert_int_eq(
        zp_manifest_find_restorable(zt_snap_dir, 0, 2, &s, &id, log_cb, &lb, err, sizeof(err)), 0);
    ck_assert_ptr_null(s);

    write_set(1, 2, UINT32_MAX);
    write_set(2, 2, UINT32_MAX);
    write_set(3, 3, UINT32_MAX); /* a different shard count */
    add_ok(1, 2);
    add_ok(2, 2);
    add_ok(3, 3);
    corrupt_payload(2, 1, 2);

    /* Shard 0's file of set 2 is fine, but shard 1's is corrupt: every shard
     * must restore the same set, so shard 0 falls back to set 1 as well and
     * names shard 1's file. */
    ck_assert_int_eq(
        zp_manifest_find_restorable(zt_snap_dir, 0, 2, &s, &id, log_cb, &lb, err, sizeof(err)), 0);
    ck_assert_uint_eq(id, 1);
    ck_assert_uint_eq(s->h.setid, 1);
    ck_assert_int_eq(lb.n, 2); /* set 3 has 3 shards; set 2 has a corrupt file */
    ck_assert_msg(strstr(lb.all, "0000000000000003") && strstr(lb.all, "resharding"), "%s", lb.all);
    ck_assert_msg(strstr(lb.last, "0000000000000002") && strstr(lb.last, "shard 1's file") &&
                      strstr(lb.last, "shard-1-of-2.zsnap") && strstr(lb.last, "CRC mismatch"),
                  "%s", lb.last);
    ck_assert_float_eq(s->tables[0].params[0], zt_snap_val(0, -1, 0, 1));
    zp_snapshot_free(&s);

    /* Shard 1's file of set 2 is corrupt: falls back to set 1, and says so. */
    lb = (logbuf){0};
    ck_assert_int_eq(
        zp_manifest_find_restorable(zt_snap_dir, 1, 2, &s, &id, log_cb, &lb, err, sizeof(err)), 0);
    ck_assert_uint_eq(id, 1);
    ck_assert_uint_eq(s->h.shard, 1);
    ck_assert_float_eq(s->tables[0].params[0], zt_snap_val(0, -1, 500, 1));
    ck_assert_int_eq(lb.n, 2);
    ck_assert_msg(strstr(lb.last, "0000000000000002") && strstr(lb.last, "CRC mismatch") &&
                      strstr(lb.last, "shard-1-of-2.zsnap"),
                  "%s", lb.last);
    zp_snapshot_free(&s);

    /* A valid file that is not the one the manifest recorded is skipped. */
    char p1[512];
    zp_snapshot_path(p1, sizeof(p1), zt_snap_dir, 1, 1, 2);
    {
        zt_snap_fx f;
        zt_snap_fx_make(&f, 1, 1, 2, 1);
        f.s->h.clock = 43;
        zt_snap_write_ok(f.s, NULL, 0);
        zt_snap_fx_free(&f);
    }
    lb = (logbuf){0};
    s = (zp_snapshot *)1;
    int rc = zp_manifest_find_restorable(zt_snap_dir, 1, 2, &s, &id, log_cb, &lb, err, sizeof(err));
    ck_assert_int_eq(rc, ZEPS_EDATA);
    ck_assert_ptr_eq(s, (zp_snapshot *)1); /* untouched on error */
    ck_assert_int_eq(lb.n, 3);
    ck_assert_msg(strstr(lb.last, "0000000000000001") && strstr(lb.last, "manifest recorded"), "%s",
                  lb.last);
    ck_assert_msg(strstr(err, "no restorable snapshot for shard 1 of 2") && strstr(err, "3 set"),
                  "%s", err);
    /* without a log callback the summary still arrives */
    ck_assert_int_eq(
        zp_manifest_find_restorable(zt_snap_dir, 1, 2, &s, NULL, NULL, NULL, err, sizeof(err)),
        ZEPS_EDATA);
    zt_snap_dir_remove();
}
END_TEST

/* A shard outside the count, or no shards, is the caller's error. */
START_TEST(test_restore_bad_shard)
{
    zt_snap_dir_make();
    char err[1024];
    zp_snapshot *s = NULL;
    ck_assert_int_eq(
        zp_manifest_find_restorable(zt_snap_dir, 2, 2, &s, NULL, NULL, NULL, err, sizeof(err)),
        ZEPS_EINVAL);
    ck_assert_msg(strstr(err, "shard 2 of 2"), "%s", err);
    ck_assert_int_eq(
        zp_manifest_find_restorable(zt_snap_dir, 0, 0, &s, NULL, NULL, NULL, err, sizeof(err)),
        ZEPS_EINVAL);
    ck_assert_ptr_null(s);
    zt_snap_dir_remove();
}
END_TEST

static bool exists(uint64_t setid)
{
    char p[512];
    snprintf(p, sizeof(p), "%s/set-%016" PRIx64, zt_snap_dir, setid);
    return access(p, F_OK) == 0;
}

START_TEST(test_prune)
{
    zt_snap_dir_make();
    char err[512];
    unsigned removed = 99;
    /* Nothing complete: prune deletes nothing. */
    write_set(1, 2, 0);
    ck_assert_int_eq(zp_manifest_prune(zt_snap_dir, 1, &removed, err, sizeof(err)), 0);
    ck_assert_uint_eq(removed, 0);
    ck_assert(exists(1));
    write_set(1, 2, 1);

    uint64_t complete[] = {1, 2, 4, 5};
    for (int i = 0; i < 4; i++) {
        if (complete[i] != 1)
            write_set(complete[i], 2, UINT32_MAX);
        add_ok(complete[i], 2);
    }
    write_set(3, 2, 0); /* abandoned: older than a complete set */
    write_set(6, 2, 0); /* newer than the newest complete: maybe in progress */

    ck_assert_int_eq(zp_manifest_prune(zt_snap_dir, 2, &removed, err, sizeof(err)), 0);
    ck_assert_uint_eq(removed, 3);
    zp_manifest *m = NULL;
    ck_assert_int_eq(zp_manifest_load(zt_snap_dir, &m, err, sizeof(err)), 0);
    ck_assert_uint_eq(m->nsets, 2);
    ck_assert_uint_eq(m->sets[0].setid, 5);
    ck_assert_uint_eq(m->sets[1].setid, 4);
    zp_manifest_free(&m);
    ck_assert(!exists(1) && !exists(2) && !exists(3));
    ck_assert(exists(4) && exists(5) && exists(6));

    /* keep 0 still keeps the newest complete set */
    ck_assert_int_eq(zp_manifest_prune(zt_snap_dir, 0, &removed, err, sizeof(err)), 0);
    ck_assert_uint_eq(removed, 1);
    ck_assert(!exists(4) && exists(5) && exists(6));
    ck_assert_int_eq(zp_manifest_set_complete(zt_snap_dir, 5, 2, err, sizeof(err)), 0);
    zp_snapshot *s = NULL;
    ck_assert_int_eq(
        zp_manifest_find_restorable(zt_snap_dir, 1, 2, &s, NULL, NULL, NULL, err, sizeof(err)), 0);
    ck_assert_uint_eq(s->h.setid, 5);
    zp_snapshot_free(&s);
    /* idempotent */
    ck_assert_int_eq(zp_manifest_prune(zt_snap_dir, 1, &removed, err, sizeof(err)), 0);
    ck_assert_uint_eq(removed, 0);
    zt_snap_dir_remove();
}
END_TEST

/* A pinned set (the one a restarted shard restored) outlives any number
 * of newer sets completing after it, whatever `keep` says, until another
 * set is pinned. */
START_TEST(test_prune_keeps_the_pinned_set)
{
    zt_snap_dir_make();
    char err[512];
    unsigned removed = 0;
    for (uint64_t id = 1; id <= 3; id++) {
        write_set(id, 2, UINT32_MAX);
        add_ok(id, 2);
    }
    ck_assert_int_eq(zp_manifest_pin(zt_snap_dir, 2, err, sizeof(err)), 0);
    for (uint64_t id = 4; id <= 6; id++) { /* the abandoned timeline's sets */
        write_set(id, 2, UINT32_MAX);
        add_ok(id, 2);
        ck_assert_int_eq(zp_manifest_prune(zt_snap_dir, 2, &removed, err, sizeof(err)), 0);
    }
    ck_assert(exists(2) && exists(5) && exists(6));
    ck_assert(!exists(1) && !exists(3) && !exists(4));
    zp_manifest *m = NULL;
    ck_assert_int_eq(zp_manifest_load(zt_snap_dir, &m, err, sizeof(err)), 0);
    ck_assert_uint_eq(m->nsets, 3);
    ck_assert_uint_eq(m->sets[0].setid, 6);
    ck_assert_uint_eq(m->sets[1].setid, 5);
    ck_assert_uint_eq(m->sets[2].setid, 2);
    zp_manifest_free(&m);
    zp_snapshot *s = NULL;
    ck_assert_int_eq(
        zp_manifest_find_restorable(zt_snap_dir, 0, 2, &s, NULL, NULL, NULL, err, sizeof(err)), 0);
    ck_assert_uint_eq(s->h.setid, 6);
    zp_snapshot_free(&s);
    /* another pin: the old one goes with the next prune */
    ck_assert_int_eq(zp_manifest_pin(zt_snap_dir, 6, err, sizeof(err)), 0);
    ck_assert_int_eq(zp_manifest_prune(zt_snap_dir, 2, &removed, err, sizeof(err)), 0);
    ck_assert_uint_eq(removed, 1);
    ck_assert(!exists(2) && exists(5) && exists(6));
    zt_snap_dir_remove();
}
END_TEST

int main(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    Suite *s = suite_create("manifest");
    TCase *tc = tcase_create("manifest");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_manifest);
    tcase_add_test(tc, test_descriptor_zero);
    tcase_add_test(tc, test_restore_fallback);
    tcase_add_test(tc, test_restore_bad_shard);
    tcase_add_test(tc, test_prune);
    tcase_add_test(tc, test_prune_keeps_the_pinned_set);
    suite_add_tcase(s, tc);
    return zt_run_suite(s);
}
