/*
 * snap_fixture.c - the snapshot tests' fixture (test_snapshot, test_manifest,
 * test_reshard): shards of a set of four tables with known values, a
 * scratch directory, and file and table assertions. See snap_fixture.h.
 */
#define _GNU_SOURCE
#include "snap_fixture.h"

#include <check.h>
#include <dirent.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "scratch.h"

/* w1: Adam (2 state blocks), odd slice lengths (padding); b: SGD, no state;
 * emb: momentum; s: one element, so some shards hold an empty slice. */
const zt_snap_tspec zt_snap_tables[ZT_SNAP_NT] = {
    {"w1", "adam", 1001, 2},
    {"b", "sgd", 7, 0},
    {"emb", "momentum", 50, 1},
    {"s", "sgd", 1, 0},
};

float zt_snap_val(uint32_t t, int q, uint64_t i, uint32_t salt)
{
    uint64_t x = (t + 1) * 1000003ull + (uint64_t)(q + 2) * 7919ull + i * 2654435761ull + salt;
    x ^= x >> 29;
    return (float)(x % 100003) / 1000.0f - 50.0f;
}

static uint64_t at(uint64_t len, uint32_t k, uint32_t S)
{
    return len * k / S;
}

/* Shard `shard` of S of a set, floats owned by the fixture. */
void zt_snap_fx_make(zt_snap_fx *f, uint64_t setid, uint32_t shard, uint32_t S, uint32_t salt)
{
    memset(f, 0, sizeof(*f));
    zp_snapshot *s = zp_snapshot_new(ZT_SNAP_NT, 3);
    s->h.shard = shard;
    s->h.nshards = S;
    s->h.nworkers = 3;
    snprintf(s->h.consistency, sizeof(s->h.consistency), "async");
    s->h.clock = 42;
    s->h.setid = setid;
    s->h.incarnation = 0xabcdef00ull + shard;
    for (uint32_t t = 0; t < ZT_SNAP_NT; t++) {
        zp_snap_table *x = &s->tables[t];
        snprintf(x->name, sizeof(x->name), "%s", zt_snap_tables[t].name);
        snprintf(x->optimizer, sizeof(x->optimizer), "%s", zt_snap_tables[t].opt);
        x->length = zt_snap_tables[t].length;
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
        x->state_per_param = zt_snap_tables[t].spp;
        size_t n = (size_t)(x->end - x->begin);
        float *p = malloc(n * 4 + 4);
        for (size_t i = 0; i < n; i++)
            p[i] = zt_snap_val(t, -1, x->begin + i, salt);
        f->mem[f->nmem++] = p;
        x->params = p;
        if (x->state_per_param) {
            float *st = malloc(n * 4 * x->state_per_param + 4);
            for (uint32_t q = 0; q < x->state_per_param; q++)
                for (size_t i = 0; i < n; i++)
                    st[q * n + i] = zt_snap_val(t, (int)q, x->begin + i, salt);
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

void zt_snap_fx_free(zt_snap_fx *f)
{
    zp_snapshot_free(&f->s);
    for (int i = 0; i < f->nmem; i++)
        free(f->mem[i]);
    f->nmem = 0;
}

char zt_snap_dir[256];

void zt_snap_dir_make(void)
{
    ck_assert_int_eq(zt_scratch_dir(zt_snap_dir, sizeof(zt_snap_dir), "snap"), 0);
}

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    return remove(p);
}

void zt_snap_dir_remove(void)
{
    nftw(zt_snap_dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

uint8_t *zt_snap_slurp(const char *path, size_t *len)
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

void zt_snap_spit(const char *path, const uint8_t *b, size_t len)
{
    FILE *fp = fopen(path, "wb");
    ck_assert_ptr_nonnull(fp);
    ck_assert_uint_eq(fwrite(b, 1, len, fp), len);
    fclose(fp);
}

void zt_snap_write_ok(const zp_snapshot *s, char *path, size_t len)
{
    char err[512];
    int rc = zp_snapshot_write(zt_snap_dir, s, path, len, err, sizeof(err));
    ck_assert_msg(rc == 0, "write: %s", err);
}

void zt_snap_write_free(zp_snapshot *s, char *path, size_t len)
{
    zt_snap_write_ok(s, path, len);
    zp_snapshot_free(&s);
}

void zt_snap_assert_has(const char *err, const char *needle)
{
    ck_assert_msg(strstr(err, needle) != NULL, "\"%s\" lacks \"%s\"", err, needle);
}

int zt_snap_count_entries(const char *dir)
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

void zt_snap_assert_tables_equal(const zp_snap_table *a, const zp_snap_table *b)
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
