/*
 * test_snapshot.c - server/snapshot.c: the file format round trip, detection
 * of corruption, truncation and foreign files, the write protocol's
 * failures, the manifest (add, order, fallback on a corrupt file, pruning)
 * and resharding against a straightforward reference.
 */
#define _GNU_SOURCE
#include <check.h>
#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <isa-l/crc.h>

#include "check_main.h"
#include "snapshot.h"
#include "zeps_errors.h"

/* ---- fixtures ---- */

typedef struct tspec {
    const char *name, *opt;
    uint64_t length;
    uint32_t spp;
} tspec;

/* w1: Adam (2 state blocks), odd slice lengths (padding); b: SGD, no state;
 * emb: momentum; s: one element, so some shards hold an empty slice. */
static const tspec TABLES[] = {
    {"w1", "adam", 1001, 2},
    {"b", "sgd", 7, 0},
    {"emb", "momentum", 50, 1},
    {"s", "sgd", 1, 0},
};
#define NT ((uint32_t)(sizeof(TABLES) / sizeof(TABLES[0])))

/* The value of global element i of block q (-1 = params) of table t. */
static float val(uint32_t t, int q, uint64_t i, uint32_t salt)
{
    uint64_t x = (t + 1) * 1000003ull + (uint64_t)(q + 2) * 7919ull + i * 2654435761ull + salt;
    x ^= x >> 29;
    return (float)(x % 100003) / 1000.0f - 50.0f;
}

typedef struct fx {
    zp_snapshot *s;
    float *mem[2 * 8];
    int nmem;
} fx;

static uint64_t at(uint64_t len, uint32_t k, uint32_t S)
{
    return len * k / S;
}

/* Shard `shard` of S of a set, floats owned by the fixture. */
static void fx_make(fx *f, uint64_t setid, uint32_t shard, uint32_t S, uint32_t salt)
{
    memset(f, 0, sizeof(*f));
    zp_snapshot *s = zp_snapshot_new(NT, 3);
    s->h.shard = shard;
    s->h.nshards = S;
    s->h.nworkers = 3;
    snprintf(s->h.consistency, sizeof(s->h.consistency), "async");
    s->h.clock = 42;
    s->h.setid = setid;
    s->h.incarnation = 0xabcdef00ull + shard;
    for (uint32_t t = 0; t < NT; t++) {
        zp_snap_table *x = &s->tables[t];
        snprintf(x->name, sizeof(x->name), "%s", TABLES[t].name);
        snprintf(x->optimizer, sizeof(x->optimizer), "%s", TABLES[t].opt);
        x->length = TABLES[t].length;
        x->begin = at(x->length, shard, S);
        x->end = at(x->length, shard + 1, S);
        x->hyper = (zp_hyper){.lr = 0.01f * (float)(t + 1),
                              .momentum = 0.9f,
                              .beta1 = 0.9f,
                              .beta2 = 0.999f,
                              .eps = 1e-8f,
                              .weight_decay = 1e-4f};
        x->init = 2;
        x->init_scale = 0.05 * (t + 1);
        x->seed = 1234 + t;
        x->has_staleness = t == 2;
        x->staleness = t == 2 ? 3 : 0;
        x->version = 100 + t;
        x->round = 7;
        x->state_per_param = TABLES[t].spp;
        size_t n = (size_t)(x->end - x->begin);
        float *p = malloc(n * 4 + 4);
        for (size_t i = 0; i < n; i++)
            p[i] = val(t, -1, x->begin + i, salt);
        f->mem[f->nmem++] = p;
        x->params = p;
        if (x->state_per_param) {
            float *st = malloc(n * 4 * x->state_per_param + 4);
            for (uint32_t q = 0; q < x->state_per_param; q++)
                for (size_t i = 0; i < n; i++)
                    st[q * n + i] = val(t, (int)q, x->begin + i, salt);
            f->mem[f->nmem++] = st;
            x->state = st;
        }
    }
    for (uint32_t r = 0; r < 3; r++)
        s->workers[r] = (zp_snap_worker){.rank = r,
                                         .joined = true,
                                         .left = r == 2,
                                         .incarnation = 0x1000 + r,
                                         .clock = 40 + r + shard,
                                         .max_seq = 500 + 10 * shard + r,
                                         .window = 0xf0f0f0f0ull + r};
    f->s = s;
}

static void fx_free(fx *f)
{
    zp_snapshot_free(&f->s);
    for (int i = 0; i < f->nmem; i++)
        free(f->mem[i]);
    f->nmem = 0;
}

static char tmpdir[256];

static void make_tmpdir(void)
{
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/zeps-snap-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    return remove(p);
}

static void remove_tmpdir(void)
{
    nftw(tmpdir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static uint8_t *slurp(const char *path, size_t *len)
{
    FILE *fp = fopen(path, "rb");
    ck_assert_ptr_nonnull(fp);
    fseek(fp, 0, SEEK_END);
    long n = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    uint8_t *b = malloc((size_t)n + 1);
    ck_assert_uint_eq(fread(b, 1, (size_t)n, fp), (size_t)n);
    fclose(fp);
    *len = (size_t)n;
    return b;
}

static void spit(const char *path, const uint8_t *b, size_t len)
{
    FILE *fp = fopen(path, "wb");
    ck_assert_ptr_nonnull(fp);
    ck_assert_uint_eq(fwrite(b, 1, len, fp), len);
    fclose(fp);
}

static void write_ok(const zp_snapshot *s, char *path, size_t len)
{
    char err[512];
    int rc = zp_snapshot_write(tmpdir, s, path, len, err, sizeof(err));
    ck_assert_msg(rc == 0, "write: %s", err);
}

static int count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)))
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
            n++;
    closedir(d);
    return n;
}

static void assert_tables_equal(const zp_snap_table *a, const zp_snap_table *b)
{
    ck_assert_str_eq(a->name, b->name);
    ck_assert_str_eq(a->optimizer, b->optimizer);
    ck_assert_uint_eq(a->kind, b->kind);
    ck_assert_uint_eq(a->length, b->length);
    ck_assert_uint_eq(a->begin, b->begin);
    ck_assert_uint_eq(a->end, b->end);
    ck_assert_int_eq(memcmp(&a->hyper, &b->hyper, sizeof(a->hyper)), 0);
    ck_assert_uint_eq(a->init, b->init);
    ck_assert(a->init_scale == b->init_scale);
    ck_assert_uint_eq(a->seed, b->seed);
    ck_assert_int_eq(a->has_staleness, b->has_staleness);
    ck_assert_uint_eq(a->staleness, b->staleness);
    ck_assert_uint_eq(a->state_per_param, b->state_per_param);
    size_t n = (size_t)(a->end - a->begin);
    ck_assert_int_eq(memcmp(a->params, b->params, n * 4), 0);
    if (a->state_per_param)
        ck_assert_int_eq(memcmp(a->state, b->state, n * 4 * a->state_per_param), 0);
}

/* ---- the file ---- */

START_TEST(test_roundtrip)
{
    make_tmpdir();
    fx f;
    fx_make(&f, 0x1234, 1, 2, 0);
    char path[512], want[512], err[512];
    write_ok(f.s, path, sizeof(path));
    snprintf(want, sizeof(want), "%s/set-0000000000001234/shard-1-of-2.zsnap", tmpdir);
    ck_assert_str_eq(path, want);
    char buf[512];
    ck_assert_int_eq(zp_snapshot_path(buf, sizeof(buf), tmpdir, 0x1234, 1, 2), 0);
    ck_assert_str_eq(buf, want);
    ck_assert_int_eq(zp_snapshot_path(buf, 10, tmpdir, 0x1234, 1, 2), ZEPS_EINVAL);

    /* Only the final file in the set directory: no temporary left behind. */
    char setdir[512];
    snprintf(setdir, sizeof(setdir), "%s/set-0000000000001234", tmpdir);
    ck_assert_int_eq(count_entries(setdir), 1);

    zp_snapshot *r = NULL;
    int rc = zp_snapshot_read(path, &r, err, sizeof(err));
    ck_assert_msg(rc == 0, "read: %s", err);
    ck_assert_uint_eq(r->h.format, ZP_SNAP_FORMAT);
    ck_assert_uint_eq(r->h.shard, 1);
    ck_assert_uint_eq(r->h.nshards, 2);
    ck_assert_uint_eq(r->h.nworkers, 3);
    ck_assert_str_eq(r->h.consistency, "async");
    ck_assert_int_eq(r->h.clock, 42);
    ck_assert_uint_eq(r->h.setid, 0x1234);
    ck_assert_uint_eq(r->h.incarnation, f.s->h.incarnation);
    ck_assert_uint_eq(r->h.created_ns, f.s->h.created_ns);
    ck_assert_uint_eq(r->ntables, NT);
    for (uint32_t t = 0; t < NT; t++) {
        assert_tables_equal(&r->tables[t], &f.s->tables[t]);
        ck_assert_uint_eq(r->tables[t].version, 100 + t);
        ck_assert_int_eq(r->tables[t].round, 7);
    }
    ck_assert_uint_eq(r->nworker_recs, 3);
    ck_assert_int_eq(memcmp(r->workers, f.s->workers, 3 * sizeof(zp_snap_worker)), 0);

    /* Byte for byte: what was read, written again, is the same file. */
    zp_snapshot *o = f.s;
    r->h.setid = 0x99;
    char path2[512];
    write_ok(r, path2, sizeof(path2));
    size_t l1, l2;
    uint8_t *b1 = slurp(path, &l1), *b2 = slurp(path2, &l2);
    ck_assert_uint_eq(l1, l2);
    ck_assert_uint_eq(l1 % 8, 0);
    /* differ only in the set id (bytes 32..39) and the header CRC */
    ck_assert_int_eq(memcmp(b1, b2, 32), 0);
    ck_assert_int_eq(memcmp(b1 + 40, b2 + 40, 124 - 40), 0);
    ck_assert_int_eq(memcmp(b1 + 128, b2 + 128, l1 - 128), 0);
    free(b1);
    free(b2);

    zp_snap_info in;
    ck_assert_int_eq(zp_snapshot_verify(path, &in, err, sizeof(err)), 0);
    ck_assert_uint_eq(in.file_size, l1);
    ck_assert_uint_eq(in.ntables, NT);
    ck_assert_uint_eq(in.h.setid, o->h.setid);
    zp_snap_info in2;
    ck_assert_int_eq(zp_snapshot_read_info(path, &in2, err, sizeof(err)), 0);
    ck_assert_int_eq(memcmp(&in, &in2, sizeof(in)), 0);

    zp_snapshot_free(&r);
    ck_assert_ptr_null(r);
    zp_snapshot_free(&r); /* tolerates NULL */
    fx_free(&f);
    remove_tmpdir();
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
    rc = zp_snapshot_verify(path, NULL, err, sizeof(err));
    ck_assert_int_eq(rc, code);
    ck_assert_msg(strstr(err, what), "verify: '%s' does not say '%s'", err, what);
}

START_TEST(test_corruption)
{
    make_tmpdir();
    fx f;
    fx_make(&f, 7, 1, 2, 0);
    char path[512], bad[600];
    write_ok(f.s, path, sizeof(path));
    snprintf(bad, sizeof(bad), "%s/bad.zsnap", tmpdir);
    size_t len;
    uint8_t *orig = slurp(path, &len), *b = malloc(len);

    memcpy(b, orig, len);
    b[20] ^= 0x01; /* nshards */
    spit(bad, b, len);
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
        spit(bad, b, len);
        snprintf(what, sizeof(what), "section %d (%s) header CRC mismatch", k, labels[k]);
        expect_fail(bad, ZEPS_EDATA, what);

        if (l == 0)
            continue;
        memcpy(b, orig, len);
        b[pos + 24 + l / 2] ^= 0x10; /* the middle of the payload */
        spit(bad, b, len);
        snprintf(what, sizeof(what), "section %d (%s) CRC mismatch", k, labels[k]);
        expect_fail(bad, ZEPS_EDATA, what);
    }

    /* Padding: w1's slice on shard 1 of 2 is 501 floats, 4 bytes of pad. */
    size_t pos = section_at(orig, len, 2);
    ck_assert_uint_eq(orig[pos + 24 + 2004], 0);
    memcpy(b, orig, len);
    b[pos + 24 + 2005] = 0xff;
    spit(bad, b, len);
    expect_fail(bad, ZEPS_EDATA, "section 2 (table 'w1' params): nonzero padding");

    /* The untouched copy still reads. */
    spit(bad, orig, len);
    char err[512];
    zp_snapshot *r = NULL;
    ck_assert_int_eq(zp_snapshot_read(bad, &r, err, sizeof(err)), 0);
    zp_snapshot_free(&r);
    free(b);
    free(orig);
    fx_free(&f);
    remove_tmpdir();
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
    make_tmpdir();
    fx f;
    fx_make(&f, 8, 0, 3, 0);
    char path[512], bad[600];
    write_ok(f.s, path, sizeof(path));
    snprintf(bad, sizeof(bad), "%s/cut.zsnap", tmpdir);
    size_t len;
    uint8_t *orig = slurp(path, &len);
    size_t cuts[] = {0, 5, 8, 15, 16, 100, 127, 128, 140, 300, len / 2, len - 8, len - 1};
    for (size_t i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++) {
        spit(bad, orig, cuts[i]);
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
        spit(bad, b, deep[i]);
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
    spit(bad, b, 300);
    expect_fail(bad, ZEPS_EDATA, "header: 13 sections for 4 tables in 300 bytes");
    /* Extra bytes at the end. */
    memcpy(b, orig, len);
    memset(b + len, 0, 8);
    spit(bad, b, len + 8);
    expect_fail(bad, ZEPS_EDATA, "trailing bytes");
    fix_header(b, len + 8);
    spit(bad, b, len + 8);
    expect_fail(bad, ZEPS_EDATA, "8 bytes after the last section");
    free(b);
    free(orig);
    fx_free(&f);
    remove_tmpdir();
}
END_TEST

START_TEST(test_magic_and_version)
{
    make_tmpdir();
    fx f;
    fx_make(&f, 9, 0, 1, 0);
    char path[512], bad[600], err[512];
    write_ok(f.s, path, sizeof(path));
    snprintf(bad, sizeof(bad), "%s/other.zsnap", tmpdir);
    size_t len;
    uint8_t *b = slurp(path, &len);
    b[0] = 'X';
    spit(bad, b, len);
    expect_fail(bad, ZEPS_EDATA, "bad magic");
    b[0] = 'Z';
    uint32_t v = 2;
    memcpy(b + 8, &v, 4);
    spit(bad, b, len);
    expect_fail(bad, ZEPS_EVERSION, "format version 2, this build reads version 1");
    fix_header(b, len); /* with a valid CRC it is still too new */
    spit(bad, b, len);
    expect_fail(bad, ZEPS_EVERSION, "format version 2");
    spit(bad, (const uint8_t *)"hello, world, this is text\n", 27);
    expect_fail(bad, ZEPS_EDATA, "bad magic");
    ck_assert_int_eq(
        zp_snapshot_read("/nonexistent/x.zsnap", &(zp_snapshot *){NULL}, err, sizeof(err)),
        ZEPS_EIO);
    ck_assert_ptr_nonnull(strstr(err, "/nonexistent/x.zsnap"));
    free(b);
    fx_free(&f);
    remove_tmpdir();
}
END_TEST

START_TEST(test_write_failures)
{
    make_tmpdir();
    fx f;
    fx_make(&f, 10, 0, 1, 0);
    char err[512], dir[600], file[512], path[700] = "untouched";

    /* A parent that is a regular file: cannot make the directory (as root,
     * permissions would not stop us). */
    snprintf(file, sizeof(file), "%s/plainfile", tmpdir);
    spit(file, (const uint8_t *)"x", 1);
    snprintf(dir, sizeof(dir), "%s/snaps", file);
    int rc = zp_snapshot_write(dir, f.s, path, sizeof(path), err, sizeof(err));
    ck_assert_int_eq(rc, ZEPS_EIO);
    ck_assert_msg(strstr(err, dir), "%s", err);
    ck_assert_str_eq(path, "untouched"); /* output only on success */

    /* The final name is taken by a directory: rename fails, the temporary
     * file is removed and the message names the snapshot. */
    char setdir[700], target[800];
    snprintf(setdir, sizeof(setdir), "%s/set-000000000000000a", tmpdir);
    ck_assert_int_eq(mkdir(setdir, 0755), 0);
    snprintf(target, sizeof(target), "%s/shard-0-of-1.zsnap", setdir);
    ck_assert_int_eq(mkdir(target, 0755), 0);
    rc = zp_snapshot_write(tmpdir, f.s, path, sizeof(path), err, sizeof(err));
    ck_assert_int_eq(rc, ZEPS_EIO);
    ck_assert_msg(strstr(err, target) && strstr(err, "rename"), "%s", err);
    ck_assert_int_eq(count_entries(setdir), 1); /* only the directory, no .tmp */
    rmdir(target);

    /* A record that does not describe shard i of S is refused. */
    f.s->tables[0].end--;
    rc = zp_snapshot_write(tmpdir, f.s, NULL, 0, err, sizeof(err));
    ck_assert_int_eq(rc, ZEPS_EINVAL);
    ck_assert_msg(strstr(err, "'w1'") && strstr(err, "slice"), "%s", err);
    f.s->tables[0].end++;
    f.s->workers[1].rank = 3;
    ck_assert_int_eq(zp_snapshot_write(tmpdir, f.s, NULL, 0, err, sizeof(err)), ZEPS_EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "rank 3"));
    f.s->workers[1].rank = 1;
    const float *p = f.s->tables[2].state;
    f.s->tables[2].state = NULL;
    ck_assert_int_eq(zp_snapshot_write(tmpdir, f.s, NULL, 0, err, sizeof(err)), ZEPS_EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "'emb'"));
    f.s->tables[2].state = p;
    ck_assert_int_eq(count_entries(setdir), 0);
    /* and the fixed record writes */
    ck_assert_int_eq(zp_snapshot_write(tmpdir, f.s, NULL, 0, err, sizeof(err)), 0);
    ck_assert_int_eq(count_entries(setdir), 1);
    fx_free(&f);
    remove_tmpdir();
}
END_TEST

/* ---- the manifest ---- */

static void write_set(uint64_t setid, uint32_t S, uint32_t only /* UINT32_MAX = all */)
{
    for (uint32_t k = 0; k < S; k++) {
        if (only != UINT32_MAX && k != only)
            continue;
        fx f;
        fx_make(&f, setid, k, S, (uint32_t)setid);
        write_ok(f.s, NULL, 0);
        fx_free(&f);
    }
}

static void add_ok(uint64_t setid, uint32_t S)
{
    char err[512];
    int rc = zp_snapshot_set_complete(tmpdir, setid, S, err, sizeof(err));
    ck_assert_msg(rc == 0, "complete: %s", err);
    rc = zp_manifest_add_set(tmpdir, setid, S, err, sizeof(err));
    ck_assert_msg(rc == 0, "add: %s", err);
}

static void corrupt_payload(uint64_t setid, uint32_t shard, uint32_t S)
{
    char path[512];
    ck_assert_int_eq(zp_snapshot_path(path, sizeof(path), tmpdir, setid, shard, S), 0);
    size_t len;
    uint8_t *b = slurp(path, &len);
    b[len - 100] ^= 0x04;
    spit(path, b, len);
    free(b);
}

START_TEST(test_manifest)
{
    make_tmpdir();
    char err[512], path[512];
    zp_manifest *m = NULL;
    ck_assert_int_eq(zp_manifest_load(tmpdir, &m, err, sizeof(err)), 0);
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
    ck_assert_int_eq(zp_manifest_load(tmpdir, &m, err, sizeof(err)), 0);
    ck_assert_uint_eq(m->nsets, 3);
    for (size_t i = 0; i < 3; i++) {
        const zp_snap_set *s = &m->sets[i];
        ck_assert_uint_eq(s->setid, 3 - i);
        ck_assert_uint_eq(s->nshards, 2);
        ck_assert_int_eq(s->clock, 42);
        for (uint32_t k = 0; k < 2; k++) {
            zp_snap_info in;
            ck_assert_int_eq(zp_snapshot_path(path, sizeof(path), tmpdir, s->setid, k, 2), 0);
            ck_assert_str_eq(path + strlen(tmpdir) + 1, s->files[k].name);
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
    ck_assert_int_eq(zp_snapshot_set_complete(tmpdir, 4, 2, err, sizeof(err)), ZEPS_EDATA);
    ck_assert_int_eq(zp_snapshot_path(path, sizeof(path), tmpdir, 4, 1, 2), 0);
    ck_assert_msg(strstr(err, path), "%s", err);
    ck_assert_int_ne(zp_manifest_add_set(tmpdir, 4, 2, err, sizeof(err)), 0);
    ck_assert_msg(strstr(err, path), "%s", err);
    /* A corrupt payload: present but not complete. */
    write_set(4, 2, 1);
    corrupt_payload(4, 1, 2);
    ck_assert_int_eq(zp_snapshot_set_complete(tmpdir, 4, 2, err, sizeof(err)), ZEPS_EDATA);
    ck_assert_msg(strstr(err, path) && strstr(err, "CRC mismatch"), "%s", err);

    /* No temporaries left in dir: MANIFEST, its lock and the set dirs. */
    ck_assert_int_eq(count_entries(tmpdir), 2 + 4);

    /* A damaged manifest is detected. */
    char mpath[600];
    snprintf(mpath, sizeof(mpath), "%s/MANIFEST", tmpdir);
    size_t len;
    uint8_t *b = slurp(mpath, &len);
    ck_assert_int_eq(memcmp(b, "zeps-manifest 1\n", 16), 0);
    b[20] ^= 1;
    spit(mpath, b, len);
    ck_assert_int_eq(zp_manifest_load(tmpdir, &m, err, sizeof(err)), ZEPS_EDATA);
    ck_assert_msg(strstr(err, mpath) && strstr(err, "CRC mismatch"), "%s", err);
    spit(mpath, b, len / 2);
    ck_assert_int_eq(zp_manifest_load(tmpdir, &m, err, sizeof(err)), ZEPS_EDATA);
    ck_assert_ptr_null(m);
    free(b);
    remove_tmpdir();
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

START_TEST(test_restore_fallback)
{
    make_tmpdir();
    char err[1024];
    zp_snapshot *s = (zp_snapshot *)1;
    uint64_t id = 0;
    logbuf lb = {0};

    /* Nothing yet: a fresh start, not an error. */
    ck_assert_int_eq(
        zp_snapshot_find_restorable(tmpdir, 0, 2, &s, &id, log_cb, &lb, err, sizeof(err)), 0);
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
        zp_snapshot_find_restorable(tmpdir, 0, 2, &s, &id, log_cb, &lb, err, sizeof(err)), 0);
    ck_assert_uint_eq(id, 1);
    ck_assert_uint_eq(s->h.setid, 1);
    ck_assert_int_eq(lb.n, 2); /* set 3 has 3 shards; set 2 has a corrupt file */
    ck_assert_msg(strstr(lb.all, "0000000000000003") && strstr(lb.all, "resharding"), "%s",
                  lb.all);
    ck_assert_msg(strstr(lb.last, "0000000000000002") && strstr(lb.last, "shard 1's file") &&
                      strstr(lb.last, "shard-1-of-2.zsnap") && strstr(lb.last, "CRC mismatch"),
                  "%s", lb.last);
    ck_assert_float_eq(s->tables[0].params[0], val(0, -1, 0, 1));
    zp_snapshot_free(&s);

    /* Shard 1's file of set 2 is corrupt: falls back to set 1, and says so. */
    lb = (logbuf){0};
    ck_assert_int_eq(
        zp_snapshot_find_restorable(tmpdir, 1, 2, &s, &id, log_cb, &lb, err, sizeof(err)), 0);
    ck_assert_uint_eq(id, 1);
    ck_assert_uint_eq(s->h.shard, 1);
    ck_assert_float_eq(s->tables[0].params[0], val(0, -1, 500, 1));
    ck_assert_int_eq(lb.n, 2);
    ck_assert_msg(strstr(lb.last, "0000000000000002") && strstr(lb.last, "CRC mismatch") &&
                      strstr(lb.last, "shard-1-of-2.zsnap"),
                  "%s", lb.last);
    zp_snapshot_free(&s);

    /* A valid file that is not the one the manifest recorded is skipped. */
    char p1[512];
    zp_snapshot_path(p1, sizeof(p1), tmpdir, 1, 1, 2);
    {
        fx f;
        fx_make(&f, 1, 1, 2, 1);
        f.s->h.clock = 43;
        write_ok(f.s, NULL, 0);
        fx_free(&f);
    }
    lb = (logbuf){0};
    s = (zp_snapshot *)1;
    int rc = zp_snapshot_find_restorable(tmpdir, 1, 2, &s, &id, log_cb, &lb, err, sizeof(err));
    ck_assert_int_eq(rc, ZEPS_EDATA);
    ck_assert_ptr_eq(s, (zp_snapshot *)1); /* untouched on error */
    ck_assert_int_eq(lb.n, 3);
    ck_assert_msg(strstr(lb.last, "0000000000000001") && strstr(lb.last, "manifest recorded"), "%s",
                  lb.last);
    ck_assert_msg(strstr(err, "no restorable snapshot for shard 1 of 2") && strstr(err, "3 set"),
                  "%s", err);
    /* without a log callback the summary still arrives */
    ck_assert_int_eq(
        zp_snapshot_find_restorable(tmpdir, 1, 2, &s, NULL, NULL, NULL, err, sizeof(err)),
        ZEPS_EDATA);
    remove_tmpdir();
}
END_TEST

static bool exists(uint64_t setid)
{
    char p[512];
    snprintf(p, sizeof(p), "%s/set-%016" PRIx64, tmpdir, setid);
    return access(p, F_OK) == 0;
}

START_TEST(test_prune)
{
    make_tmpdir();
    char err[512];
    unsigned removed = 99;
    /* Nothing complete: prune deletes nothing. */
    write_set(1, 2, 0);
    ck_assert_int_eq(zp_manifest_prune(tmpdir, 1, &removed, err, sizeof(err)), 0);
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

    ck_assert_int_eq(zp_manifest_prune(tmpdir, 2, &removed, err, sizeof(err)), 0);
    ck_assert_uint_eq(removed, 3);
    zp_manifest *m = NULL;
    ck_assert_int_eq(zp_manifest_load(tmpdir, &m, err, sizeof(err)), 0);
    ck_assert_uint_eq(m->nsets, 2);
    ck_assert_uint_eq(m->sets[0].setid, 5);
    ck_assert_uint_eq(m->sets[1].setid, 4);
    zp_manifest_free(&m);
    ck_assert(!exists(1) && !exists(2) && !exists(3));
    ck_assert(exists(4) && exists(5) && exists(6));

    /* keep 0 still keeps the newest complete set */
    ck_assert_int_eq(zp_manifest_prune(tmpdir, 0, &removed, err, sizeof(err)), 0);
    ck_assert_uint_eq(removed, 1);
    ck_assert(!exists(4) && exists(5) && exists(6));
    ck_assert_int_eq(zp_snapshot_set_complete(tmpdir, 5, 2, err, sizeof(err)), 0);
    zp_snapshot *s = NULL;
    ck_assert_int_eq(
        zp_snapshot_find_restorable(tmpdir, 1, 2, &s, NULL, NULL, NULL, err, sizeof(err)), 0);
    ck_assert_uint_eq(s->h.setid, 5);
    zp_snapshot_free(&s);
    /* idempotent */
    ck_assert_int_eq(zp_manifest_prune(tmpdir, 1, &removed, err, sizeof(err)), 0);
    ck_assert_uint_eq(removed, 0);
    remove_tmpdir();
}
END_TEST

/* ---- resharding ---- */

/* The reference: the whole of block q (-1 = params) of table t, by
 * concatenating the sources' slices in shard order. */
static float *concat(zp_snapshot *const *src, uint32_t S, uint32_t t, int q)
{
    uint64_t len = src[0]->tables[t].length, pos = 0;
    float *all = malloc(len * 4 + 4);
    for (uint32_t k = 0; k < S; k++) {
        const zp_snap_table *x = &src[k]->tables[t];
        uint64_t n = x->end - x->begin;
        memcpy(all + pos, q < 0 ? x->params : x->state + (uint64_t)q * n, n * 4);
        pos += n;
    }
    ck_assert_uint_eq(pos, len);
    return all;
}

static void check_against_reference(zp_snapshot *const *src, uint32_t S, zp_snapshot *const *dst,
                                    uint32_t S2)
{
    for (uint32_t t = 0; t < NT; t++) {
        for (int q = -1; q < (int)TABLES[t].spp; q++) {
            float *all = concat(src, S, t, q);
            for (uint32_t j = 0; j < S2; j++) {
                const zp_snap_table *x = &dst[j]->tables[t];
                uint64_t n = x->end - x->begin;
                ck_assert_uint_eq(x->begin, TABLES[t].length * j / S2);
                ck_assert_uint_eq(x->end, TABLES[t].length * (j + 1) / S2);
                const float *got = q < 0 ? x->params : x->state + (uint64_t)q * n;
                ck_assert_msg(memcmp(got, all + x->begin, n * 4) == 0,
                              "table %s block %d shard %u of %u", TABLES[t].name, q, j, S2);
            }
            free(all);
        }
    }
}

static void reshard_all(zp_snapshot *const *src, uint32_t S, zp_snapshot **dst, uint32_t S2)
{
    char err[512];
    for (uint32_t j = 0; j < S2; j++) {
        int rc = zp_snapshot_reshard((const zp_snapshot *const *)src, S, j, S2, &dst[j], err,
                                     sizeof(err));
        ck_assert_msg(rc == 0, "reshard: %s", err);
        ck_assert_uint_eq(dst[j]->h.shard, j);
        ck_assert_uint_eq(dst[j]->h.nshards, S2);
    }
}

START_TEST(test_reshard)
{
    make_tmpdir();
    fx f[2];
    zp_snapshot *src[2], *three[3], *one[1], *back[2];
    for (uint32_t k = 0; k < 2; k++) {
        fx_make(&f[k], 5, k, 2, 77);
        f[k].s->tables[0].version = 1000 + 5 * k; /* slices may differ */
        src[k] = f[k].s;
    }
    /* The fixture is the same data however it is cut. */
    float *a = concat(src, 2, 0, 1);
    for (uint64_t i = 0; i < TABLES[0].length; i++)
        ck_assert(a[i] == val(0, 1, i, 77));
    free(a);

    reshard_all(src, 2, three, 3);
    check_against_reference(src, 2, three, 3);
    reshard_all(src, 2, one, 1);
    check_against_reference(src, 2, one, 1);
    ck_assert_uint_eq(one[0]->tables[3].end, 1);

    /* Versions: the max of the sources'; workers merged, dedup afresh. */
    ck_assert_uint_eq(three[1]->tables[0].version, 1005);
    ck_assert_uint_eq(three[1]->tables[1].version, 101);
    ck_assert_uint_eq(three[2]->nworker_recs, 3);
    for (uint32_t r = 0; r < 3; r++) {
        const zp_snap_worker *w = &three[2]->workers[r];
        ck_assert_uint_eq(w->rank, r);
        ck_assert_int_eq(w->clock, 41 + r); /* max over shards 0 and 1 */
        ck_assert_uint_eq(w->incarnation, 0x1000 + r);
        ck_assert(!w->joined);
        ck_assert_int_eq(w->left, r == 2);
        ck_assert_uint_eq(w->max_seq, 0);
        ck_assert_uint_eq(w->window, 0);
    }
    ck_assert_uint_eq(three[0]->h.incarnation, 0xabcdef01ull);
    ck_assert_int_eq(three[0]->h.clock, 42);

    /* 2 -> 3 -> 2 gives back the original bytes. */
    reshard_all(three, 3, back, 2);
    for (uint32_t k = 0; k < 2; k++)
        for (uint32_t t = 0; t < NT; t++)
            assert_tables_equal(&back[k]->tables[t], &src[k]->tables[t]);

    /* A resharded record is a valid snapshot. */
    char path[512], err[512];
    three[2]->h.setid = 6;
    write_ok(three[2], path, sizeof(path));
    zp_snapshot *r = NULL;
    ck_assert_int_eq(zp_snapshot_read(path, &r, err, sizeof(err)), 0);
    for (uint32_t t = 0; t < NT; t++)
        assert_tables_equal(&r->tables[t], &three[2]->tables[t]);
    zp_snapshot_free(&r);

    /* Sources out of order or from different cuts are refused. */
    zp_snapshot *swapped[2] = {src[1], src[0]};
    ck_assert_int_eq(
        zp_snapshot_reshard((const zp_snapshot *const *)swapped, 2, 0, 3, &r, err, sizeof(err)),
        ZEPS_EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "expected 0 of 2"));
    src[1]->h.clock = 43;
    ck_assert_int_eq(
        zp_snapshot_reshard((const zp_snapshot *const *)src, 2, 0, 3, &r, err, sizeof(err)),
        ZEPS_EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "same cut"));
    src[1]->h.clock = 42;
    snprintf(src[1]->tables[2].optimizer, 16, "adam");
    ck_assert_int_eq(
        zp_snapshot_reshard((const zp_snapshot *const *)src, 2, 0, 3, &r, err, sizeof(err)),
        ZEPS_EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "'emb'"));
    ck_assert_ptr_null(r);

    for (int j = 0; j < 3; j++)
        zp_snapshot_free(&three[j]);
    zp_snapshot_free(&one[0]);
    for (int k = 0; k < 2; k++) {
        zp_snapshot_free(&back[k]);
        fx_free(&f[k]);
    }
    remove_tmpdir();
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
    tcase_add_test(tc, test_manifest);
    tcase_add_test(tc, test_restore_fallback);
    tcase_add_test(tc, test_prune);
    tcase_add_test(tc, test_reshard);
    suite_add_tcase(s, tc);
    return zt_run_suite(s);
}
