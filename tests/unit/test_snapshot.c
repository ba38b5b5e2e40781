/*
 * test_snapshot.c - the snapshot file format (common/snapshot/snapshot*.c):
 * the round trip, detection of corruption, truncation and foreign files, and
 * the write protocol's failures; a record read and freed keeping nothing. The manifest is
 * test_manifest.c, resharding test_reshard.c; the fixture is tests/support/snap_fixture.c.
 */
#define _GNU_SOURCE
#include <check.h>
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <isa-l/crc.h>

#include "check_main.h"
#include "snap_fixture.h"
#include "snapshot.h"
#include "zeps_errors.h"

/* ---- the file ---- */

START_TEST(test_roundtrip)
{
    zt_snap_dir_make();
    zt_snap_fx f;
    zt_snap_fx_make(&f, 0x1234, 1, 2, 0);
    char path[512], want[512], err[512];
    zt_snap_write_ok(f.s, path, sizeof(path));
    snprintf(want, sizeof(want), "%s/set-0000000000001234/shard-1-of-2.zsnap", zt_snap_dir);
    ck_assert_str_eq(path, want);
    char buf[512];
    ck_assert_int_eq(zp_snapshot_path(buf, sizeof(buf), zt_snap_dir, 0x1234, 1, 2), 0);
    ck_assert_str_eq(buf, want);
    ck_assert_int_eq(zp_snapshot_path(buf, 10, zt_snap_dir, 0x1234, 1, 2), ZEPS_EINVAL);

    /* Only the final file in the set directory: no temporary left behind. */
    char setdir[512];
    snprintf(setdir, sizeof(setdir), "%s/set-0000000000001234", zt_snap_dir);
    ck_assert_int_eq(zt_snap_count_entries(setdir), 1);

    zp_snapshot *r = NULL;
    int rc = zp_snapshot_read(path, &r, err, sizeof(err));
    ck_assert_msg(rc == 0, "read: %s", err);
    ck_assert_uint_eq(r->h.format, ZP_SNAP_FORMAT_V1); /* no slot map: format 1 */
    ck_assert_ptr_null(r->slotmap);
    ck_assert_uint_eq(r->h.shard, 1);
    ck_assert_uint_eq(r->h.nshards, 2);
    ck_assert_uint_eq(r->h.nworkers, 3);
    ck_assert_str_eq(r->h.consistency, "async");
    ck_assert_int_eq(r->h.clock, 42);
    ck_assert_uint_eq(r->h.setid, 0x1234);
    ck_assert_uint_eq(r->h.incarnation, f.s->h.incarnation);
    ck_assert_uint_eq(r->h.created_ns, f.s->h.created_ns);
    ck_assert_uint_eq(r->ntables, ZT_SNAP_NT);
    for (uint32_t t = 0; t < ZT_SNAP_NT; t++) {
        zt_snap_assert_tables_equal(&r->tables[t], &f.s->tables[t]);
        ck_assert_uint_eq(r->tables[t].version, 100 + t);
        ck_assert_int_eq(r->tables[t].round, 7);
    }
    ck_assert_uint_eq(r->nworker_recs, 3);
    ck_assert_int_eq(memcmp(r->workers, f.s->workers, 3 * sizeof(zp_snap_worker)), 0);

    /* Byte for byte: what was read, written again, is the same file. */
    zp_snapshot *o = f.s;
    r->h.setid = 0x99;
    char path2[512];
    zt_snap_write_ok(r, path2, sizeof(path2));
    size_t l1, l2;
    uint8_t *b1 = zt_snap_slurp(path, &l1), *b2 = zt_snap_slurp(path2, &l2);
    ck_assert_uint_eq(l1, l2);
    ck_assert_uint_eq(l1 % 8, 0);
    /* differ only in the set id (bytes 32..39) and the header CRC */
    ck_assert_int_eq(memcmp(b1, b2, 32), 0);
    ck_assert_int_eq(memcmp(b1 + 40, b2 + 40, 124 - 40), 0);
    ck_assert_int_eq(memcmp(b1 + 128, b2 + 128, l1 - 128), 0);
    free(b1);
    free(b2);

    zp_snap_info in;
    ck_assert_int_eq(zp_snapshot_read_verify(path, &in, err, sizeof(err)), 0);
    ck_assert_uint_eq(in.file_size, l1);
    ck_assert_uint_eq(in.ntables, ZT_SNAP_NT);
    ck_assert_uint_eq(in.h.setid, o->h.setid);
    zp_snap_info in2;
    ck_assert_int_eq(zp_snapshot_read_info(path, &in2, err, sizeof(err)), 0);
    ck_assert_int_eq(memcmp(&in, &in2, sizeof(in)), 0);

    zp_snapshot_free(&r);
    ck_assert_ptr_null(r);
    zp_snapshot_free(&r); /* tolerates NULL */
    zt_snap_fx_free(&f);
    zt_snap_dir_remove();
}
END_TEST

/* Section k's offset, walking the file as docs/snapshots.md lays it out. */
static size_t section_at(const uint8_t *b, size_t len, int k)
{
    size_t pos = 128;
    for (int i = 0; i < k; i++) {
        uint64_t l;
        memcpy(&l, b + pos + 8, 8);
        pos += 24 + ((l + 7) & ~7ull);
        ck_assert_uint_le(pos, len);
    }
    return pos;
}

static void expect_fail(const char *path, int code, const char *what)
{
    char err[512];
    zp_snapshot *r = NULL;
    int rc = zp_snapshot_read(path, &r, err, sizeof(err));
    ck_assert_msg(rc == code, "read returned %d (%s), expected %d for '%s'", rc, rc ? err : "",
                  code, what);
    ck_assert_ptr_null(r);
    ck_assert_msg(strstr(err, path), "message does not name the file: %s", err);
    ck_assert_msg(strstr(err, what), "message '%s' does not say '%s'", err, what);
    /* verify walks the same checks without loading */
    rc = zp_snapshot_read_verify(path, NULL, err, sizeof(err));
    ck_assert_int_eq(rc, code);
    ck_assert_msg(strstr(err, what), "verify: '%s' does not say '%s'", err, what);
}

START_TEST(test_corruption)
{
    zt_snap_dir_make();
    zt_snap_fx f;
    zt_snap_fx_make(&f, 7, 1, 2, 0);
    char path[512], bad[600];
    zt_snap_write_ok(f.s, path, sizeof(path));
    snprintf(bad, sizeof(bad), "%s/bad.zsnap", zt_snap_dir);
    size_t len;
    uint8_t *orig = zt_snap_slurp(path, &len), *b = malloc(len);

    memcpy(b, orig, len);
    b[20] ^= 0x01; /* nshards */
    zt_snap_spit(bad, b, len);
    expect_fail(bad, ZEPS_EDATA, "header CRC mismatch");

    const char *labels[] = {
        "workers",
        "table #0 meta",
        "table 'w1' params",
        "table 'w1' optimizer state",
        "table #1 meta",
        "table 'b' params",
        "table 'b' optimizer state",
        "table #2 meta",
        "table 'emb' params",
        "table 'emb' optimizer state",
        "table #3 meta",
        "table 's' params",
    };
    for (int k = 0; k < (int)(sizeof(labels) / sizeof(labels[0])); k++) {
        size_t pos = section_at(orig, len, k);
        uint64_t l;
        memcpy(&l, orig + pos + 8, 8);
        char what[128];

        memcpy(b, orig, len);
        b[pos + 3] ^= 0x40; /* the section type */
        zt_snap_spit(bad, b, len);
        snprintf(what, sizeof(what), "section %d (%s) header CRC mismatch", k, labels[k]);
        expect_fail(bad, ZEPS_EDATA, what);

        if (l == 0)
            continue;
        memcpy(b, orig, len);
        b[pos + 24 + l / 2] ^= 0x10; /* the middle of the payload */
        zt_snap_spit(bad, b, len);
        snprintf(what, sizeof(what), "section %d (%s) CRC mismatch", k, labels[k]);
        expect_fail(bad, ZEPS_EDATA, what);
    }

    /* Padding: w1's slice on shard 1 of 2 is 501 floats, 4 bytes of pad. */
    size_t pos = section_at(orig, len, 2);
    ck_assert_uint_eq(orig[pos + 24 + 2004], 0);
    memcpy(b, orig, len);
    b[pos + 24 + 2005] = 0xff;
    zt_snap_spit(bad, b, len);
    expect_fail(bad, ZEPS_EDATA, "section 2 (table 'w1' params): nonzero padding");

    /* The untouched copy still reads. */
    zt_snap_spit(bad, orig, len);
    char err[512];
    zp_snapshot *r = NULL;
    ck_assert_int_eq(zp_snapshot_read(bad, &r, err, sizeof(err)), 0);
    zp_snapshot_free(&r);
    free(b);
    free(orig);
    zt_snap_fx_free(&f);
    zt_snap_dir_remove();
}
END_TEST

static void fix_header(uint8_t *b, uint64_t size)
{
    memcpy(b + 64, &size, 8);
    uint32_t crc = ~crc32_iscsi(b, 124, 0xffffffffu);
    memcpy(b + 124, &crc, 4);
}

START_TEST(test_truncation)
{
    zt_snap_dir_make();
    zt_snap_fx f;
    zt_snap_fx_make(&f, 8, 0, 3, 0);
    char path[512], bad[600];
    zt_snap_write_ok(f.s, path, sizeof(path));
    snprintf(bad, sizeof(bad), "%s/cut.zsnap", zt_snap_dir);
    size_t len;
    uint8_t *orig = zt_snap_slurp(path, &len);
    size_t cuts[] = {0, 5, 8, 15, 16, 100, 127, 128, 140, 300, len / 2, len - 8, len - 1};
    for (size_t i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++) {
        zt_snap_spit(bad, orig, cuts[i]);
        expect_fail(bad, ZEPS_EDATA, "truncated");
    }
    /* A header that agrees with the shortened size (a writer that lied, or a
     * corrupt size field with a matching CRC): the section walk still
     * catches it without reading past the end. */
    uint8_t *b = malloc(len + 8);
    size_t deep[] = {1100, 2000, len / 2, len - 8};
    for (size_t i = 0; i < sizeof(deep) / sizeof(deep[0]); i++) {
        memcpy(b, orig, len);
        fix_header(b, deep[i]);
        zt_snap_spit(bad, b, deep[i]);
        char err[512];
        zp_snapshot *r = NULL;
        int rc = zp_snapshot_read(bad, &r, err, sizeof(err));
        ck_assert_int_eq(rc, ZEPS_EDATA);
        ck_assert_msg(strstr(err, "past the end of the file"), "cut at %zu: %s", deep[i], err);
        ck_assert_ptr_nonnull(strstr(err, bad));
    }
    /* Too short for the tables the header declares: caught before any
     * section is read. */
    memcpy(b, orig, len);
    fix_header(b, 300);
    zt_snap_spit(bad, b, 300);
    expect_fail(bad, ZEPS_EDATA, "header: 13 sections for 4 tables in 300 bytes");
    /* Extra bytes at the end. */
    memcpy(b, orig, len);
    memset(b + len, 0, 8);
    zt_snap_spit(bad, b, len + 8);
    expect_fail(bad, ZEPS_EDATA, "trailing bytes");
    fix_header(b, len + 8);
    zt_snap_spit(bad, b, len + 8);
    expect_fail(bad, ZEPS_EDATA, "8 bytes after the last section");
    free(b);
    free(orig);
    zt_snap_fx_free(&f);
    zt_snap_dir_remove();
}
END_TEST

START_TEST(test_magic_and_version)
{
    zt_snap_dir_make();
    zt_snap_fx f;
    zt_snap_fx_make(&f, 9, 0, 1, 0);
    char path[512], bad[600], err[512];
    zt_snap_write_ok(f.s, path, sizeof(path));
    snprintf(bad, sizeof(bad), "%s/other.zsnap", zt_snap_dir);
    size_t len;
    uint8_t *b = zt_snap_slurp(path, &len);
    b[0] = 'X';
    zt_snap_spit(bad, b, len);
    expect_fail(bad, ZEPS_EDATA, "bad magic");
    b[0] = 'Z';
    uint32_t v = 3;
    memcpy(b + 8, &v, 4);
    zt_snap_spit(bad, b, len);
    expect_fail(bad, ZEPS_EVERSION, "format version 3, this build reads version 2");
    fix_header(b, len); /* with a valid CRC it is still too new */
    zt_snap_spit(bad, b, len);
    expect_fail(bad, ZEPS_EVERSION, "format version 3");
    zt_snap_spit(bad, (const uint8_t *)"hello, world, this is text\n", 27);
    expect_fail(bad, ZEPS_EDATA, "bad magic");
    ck_assert_int_eq(
        zp_snapshot_read("/nonexistent/x.zsnap", &(zp_snapshot *){NULL}, err, sizeof(err)),
        ZEPS_EIO);
    ck_assert_ptr_nonnull(strstr(err, "/nonexistent/x.zsnap"));
    free(b);
    zt_snap_fx_free(&f);
    zt_snap_dir_remove();
}
END_TEST

START_TEST(test_write_failures)
{
    zt_snap_dir_make();
    zt_snap_fx f;
    zt_snap_fx_make(&f, 10, 0, 1, 0);
    char err[512], dir[600], file[512], path[700] = "untouched";

    /* A parent that is a regular file: cannot make the directory (as root,
     * permissions would not stop us). */
    snprintf(file, sizeof(file), "%s/plainfile", zt_snap_dir);
    zt_snap_spit(file, (const uint8_t *)"x", 1);
    snprintf(dir, sizeof(dir), "%s/snaps", file);
    int rc = zp_snapshot_write(dir, f.s, path, sizeof(path), err, sizeof(err));
    ck_assert_int_eq(rc, ZEPS_EIO);
    ck_assert_msg(strstr(err, dir), "%s", err);
    ck_assert_str_eq(path, "untouched"); /* output only on success */

    /* The final name is taken by a directory: rename fails, the temporary
     * file is removed and the message names the snapshot. */
    char setdir[700], target[800];
    snprintf(setdir, sizeof(setdir), "%s/set-000000000000000a", zt_snap_dir);
    ck_assert_int_eq(mkdir(setdir, 0755), 0);
    snprintf(target, sizeof(target), "%s/shard-0-of-1.zsnap", setdir);
    ck_assert_int_eq(mkdir(target, 0755), 0);
    rc = zp_snapshot_write(zt_snap_dir, f.s, path, sizeof(path), err, sizeof(err));
    ck_assert_int_eq(rc, ZEPS_EIO);
    ck_assert_msg(strstr(err, target) && strstr(err, "rename"), "%s", err);
    ck_assert_int_eq(zt_snap_count_entries(setdir), 1); /* only the directory, no .tmp */
    rmdir(target);

    /* A record that does not describe shard i of S is refused. */
    f.s->tables[0].end--;
    rc = zp_snapshot_write(zt_snap_dir, f.s, NULL, 0, err, sizeof(err));
    ck_assert_int_eq(rc, ZEPS_EINVAL);
    ck_assert_msg(strstr(err, "'w1'") && strstr(err, "slice"), "%s", err);
    f.s->tables[0].end++;
    f.s->workers[1].rank = 3;
    ck_assert_int_eq(zp_snapshot_write(zt_snap_dir, f.s, NULL, 0, err, sizeof(err)), ZEPS_EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "rank 3"));
    f.s->workers[1].rank = 1;
    const float *p = f.s->tables[2].state;
    f.s->tables[2].state = NULL;
    ck_assert_int_eq(zp_snapshot_write(zt_snap_dir, f.s, NULL, 0, err, sizeof(err)), ZEPS_EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "'emb'"));
    f.s->tables[2].state = p;
    ck_assert_int_eq(zt_snap_count_entries(setdir), 0);
    /* and the fixed record writes */
    ck_assert_int_eq(zp_snapshot_write(zt_snap_dir, f.s, NULL, 0, err, sizeof(err)), 0);
    ck_assert_int_eq(zt_snap_count_entries(setdir), 1);
    zt_snap_fx_free(&f);
    zt_snap_dir_remove();
}
END_TEST

/* Heap in use, mapped blocks included. */
static size_t heap_used(void)
{
    struct mallinfo2 mi = mallinfo2();
    return mi.uordblks + mi.hblkhd;
}

/* A record read and freed 200 times: the floats each read allocates
 * for a dense table are the record's, freed with it (the heap stays
 * flat). */
START_TEST(test_read_frees_tables)
{
    zt_snap_dir_make();
    zt_snap_fx f;
    zt_snap_fx_make(&f, 0x77, 0, 2, 0);
    char path[512], err[512];
    zt_snap_write_ok(f.s, path, sizeof(path));
    zt_snap_fx_free(&f);
    size_t before = 0;
    for (int i = 0; i < 220; i++) {
        if (i == 20)
            before = heap_used();
        zp_snapshot *r = NULL;
        ck_assert_msg(zp_snapshot_read(path, &r, err, sizeof(err)) == 0, "read: %s", err);
        zp_snapshot_free(&r);
    }
    struct stat st;
    ck_assert_int_eq(stat(path, &st), 0);
    size_t after = heap_used();
    ck_assert_msg(after < before + (size_t)st.st_size * 10,
                  "200 reads of a %jd-byte file grew the heap by %zu bytes", (intmax_t)st.st_size,
                  after - before);
    zt_snap_dir_remove();
}
END_TEST

int main(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    Suite *s = suite_create("snapshot");
    TCase *tc = tcase_create("snapshot");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_roundtrip);
    tcase_add_test(tc, test_corruption);
    tcase_add_test(tc, test_truncation);
    tcase_add_test(tc, test_magic_and_version);
    tcase_add_test(tc, test_write_failures);
    tcase_add_test(tc, test_read_frees_tables);
    suite_add_tcase(s, tc);
    return zt_run_suite(s);
}
