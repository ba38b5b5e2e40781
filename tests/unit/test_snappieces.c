/*
 * test_snappieces.c - dense pieces in snapshot files and sets
 * (common/snapshot/snapshot_pieces.c, setmap.c, reshard.c; docs/snapshots.md,
 * "Dense pieces").
 *
 * Three shards and a dense table "w" of 90 elements with one state float
 * per element; the map `moved` gives [10, 30) of shard 0's default slice
 * to shard 1, which then holds [10, 30) and [30, 60). A file holds a
 * record per piece its map gives the shard, written and read back
 * exactly; a record that is not such a piece, a piece missing or twice,
 * and a map section changed under the records are refused naming the
 * table; a set whose files hold a moved piece twice or not at all is not
 * recorded, a restore falls back to the set before, and a shard that
 * missed a move not concerning it restores the set's map; a set is
 * resharded to 1, 2 and 3 shards with every element in place, and sets
 * holding a piece twice or not at all are refused. A 63-byte name and a
 * table of one element pass; a map naming a table twice does not.
 */
#include <check.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_main.h"
#include "slotmap.h"
#include "snap_fixture.h"
#include "snapshot.h"
#include "snapshot_format.h"
#include "snapshot_io.h"
#include "zeps_errors.h"

#define S   3u
#define LEN 90u

static float val(uint64_t i)
{
    return (float)i + 0.5f;
}

static float state(uint64_t i)
{
    return -(float)i * 0.25f;
}

/* The default map of 3 with [10, 30) of "w" given to shard 1 (epoch 1). */
static zp_slotmap *moved(void)
{
    zp_slotmap *d = NULL, *m = NULL;
    char err[256];
    ck_assert_int_eq(zp_slotmap_new_default(&d, S), 0);
    ck_assert_msg(zp_slotmap_dense_moved(d, "w", LEN, 10, 30, 1, &m, err, sizeof(err)) == 0, "%s",
                  err);
    zp_slotmap_destroy(&d);
    return m;
}

static zp_slotmap *dflt(void)
{
    zp_slotmap *d = NULL;
    ck_assert_int_eq(zp_slotmap_new_default(&d, S), 0);
    return d;
}

/* One record of "w": [lo, hi) with its values and state, version 100 + lo. */
static void piece(zp_snap_table *t, uint64_t lo, uint64_t hi)
{
    snprintf(t->name, sizeof(t->name), "w");
    snprintf(t->optimizer, sizeof(t->optimizer), "momentum");
    t->length = LEN;
    t->begin = lo;
    t->end = hi;
    t->hyper.lr = 0.5f;
    t->hyper.momentum = 0.9f;
    t->state_per_param = 1;
    t->version = 100 + lo;
    t->round = -1;
    uint64_t n = hi - lo;
    t->owned = calloc(2 * n + 1, sizeof(float));
    for (uint64_t i = 0; i < n; i++) {
        t->owned[i] = val(lo + i);
        t->owned[n + i] = state(lo + i);
    }
    t->params = t->owned;
    t->state = t->owned + n;
}

/* Shard k of set `setid`: a record per piece `place` gives it, its map
 * `rec` (NULL: none, the default). The caller frees it. */
static zp_snapshot *record(uint64_t setid, uint32_t k, const zp_slotmap *place,
                           const zp_slotmap *rec)
{
    zp_dense_piece p[8];
    size_t n = zp_slotmap_dense_pieces(place, "w", LEN, p, 8), mine = 0;
    for (size_t i = 0; i < n; i++)
        if (p[i].owner == (int)k)
            p[mine++] = p[i];
    if (mine == 0) /* none: one empty record answers for the table, as a shard has */
        p[mine++] = (zp_dense_piece){.lo = 0, .hi = 0, .owner = (int)k};
    zp_snapshot *s = zp_snapshot_new((uint32_t)mine, 0);
    s->h.shard = k;
    s->h.nshards = S;
    s->h.nworkers = 1;
    s->h.setid = setid;
    snprintf(s->h.consistency, sizeof(s->h.consistency), "async");
    for (size_t i = 0; i < mine; i++)
        piece(&s->tables[i], p[i].lo, p[i].hi);
    if (rec) {
        size_t len = zp_slotmap_wire_size(rec);
        uint8_t *wire = malloc(len);
        zp_slotmap_encode(rec, wire);
        zp_snapshot_set_map(s, wire, len);
        free(wire);
    }
    return s;
}

/* Every element of record t as piece() made it. */
static void assert_piece(const zp_snap_table *t, uint64_t lo, uint64_t hi)
{
    ck_assert_str_eq(t->name, "w");
    ck_assert_uint_eq(t->begin, lo);
    ck_assert_uint_eq(t->end, hi);
    for (uint64_t i = lo; i < hi; i++) {
        ck_assert_float_eq(t->params[i - lo], val(i));
        ck_assert_float_eq(t->state[i - lo], state(i));
    }
}

START_TEST(test_pieces_round_trip)
{
    zt_snap_dir_make();
    zp_slotmap *m = moved();
    char path[512], err[512];
    zt_snap_write_free(record(7, 1, m, m), path, sizeof(path));
    zp_snapshot *r = NULL;
    ck_assert_msg(zp_snapshot_read(path, &r, err, sizeof(err)) == 0, "%s", err);
    ck_assert_uint_eq(r->h.format, 2);
    ck_assert_uint_eq(r->h.slot_epoch, 1);
    ck_assert_uint_eq(r->ntables, 2);
    assert_piece(&r->tables[0], 10, 30);
    assert_piece(&r->tables[1], 30, 60);
    ck_assert_uint_eq(r->tables[0].version, 110);
    ck_assert_uint_eq(r->slotmap_len, zp_slotmap_wire_size(m));
    zp_snapshot_free(&r);
    ck_assert_msg(zp_snapshot_read_verify(path, NULL, err, sizeof(err)) == 0, "%s", err);
    zp_slotmap *got = NULL;
    ck_assert_int_eq(zp_snapshot_read_map(path, &got, NULL, err, sizeof(err)), 0);
    ck_assert_int_eq(zp_slotmap_same(got, m), true);
    zp_slotmap_destroy(&got);
    zp_slotmap_destroy(&m);
    zt_snap_dir_remove();
}
END_TEST

/* The writer's checks of the records against the map. */
START_TEST(test_records_checked)
{
    zt_snap_dir_make();
    zp_slotmap *m = moved(), *d = dflt();
    char err[512];
    zp_snapshot *s = record(7, 1, d, m); /* [30, 60) only */
    ck_assert_int_eq(zp_snapshot_write(zt_snap_dir, s, NULL, 0, err, sizeof(err)), ZEPS_EINVAL);
    zt_snap_assert_has(err,
                       "dense table 'w': shard 1 holds 2 pieces of it under the file's slot map "
                       "(epoch 1), the file has 1");
    zp_snapshot_free(&s);
    s = record(7, 1, m, m);
    s->tables[0].begin = 15; /* [15, 30): no piece */
    ck_assert_int_eq(zp_snapshot_write(zt_snap_dir, s, NULL, 0, err, sizeof(err)), ZEPS_EINVAL);
    zt_snap_assert_has(err,
                       "record [15, 30) is not a piece shard 1 holds under the file's slot map");
    s->tables[0].begin = 30;
    s->tables[0].end = 60; /* [30, 60) twice */
    ck_assert_int_eq(zp_snapshot_write(zt_snap_dir, s, NULL, 0, err, sizeof(err)), ZEPS_EINVAL);
    zt_snap_assert_has(err, "records 0 and 1 are both the piece [30, 60)");
    s->tables[0].begin = 10;
    s->tables[0].end = 30;
    s->tables[1].length = 91;
    ck_assert_int_eq(zp_snapshot_write(zt_snap_dir, s, NULL, 0, err, sizeof(err)), ZEPS_EINVAL);
    zt_snap_assert_has(err,
                       "dense table 'w' of length 91: the file's slot map (epoch 1) names it with "
                       "length 90");
    zp_snapshot_free(&s);
    s = record(7, 0, m, NULL); /* [0, 10) without the map that makes it a piece */
    ck_assert_int_eq(zp_snapshot_write(zt_snap_dir, s, NULL, 0, err, sizeof(err)), ZEPS_EINVAL);
    zt_snap_assert_has(err, "slice [0, 10) is not shard 0 of 3");
    zp_snapshot_free(&s);
    zp_slotmap_destroy(&d);
    zp_slotmap_destroy(&m);
    zt_snap_dir_remove();
}
END_TEST

/* The byte where the dense list of m's wire form puts piece 1's lo. */
static size_t piece1_lo_at(const zp_slotmap *m)
{
    /* owners, u32 base, u32 retired, u32 tables, u16 + "w", u64 length,
     * u32 pieces, piece 0 (u64 lo, u16 owner) */
    return ZP_SLOTMAP_WIRE_HDR + 2 * (size_t)zp_slotmap_slots(m) + 12 + 3 + 8 + 4 + 10;
}

/* Shard 1's file with its map section changed under its records: piece
 * [10, 30) made [20, 30) (CRCs made right) is refused naming the file
 * and the record; a changed byte with the CRCs left is refused too, and
 * so are a piece on a shard past the count and a piece of shard 1 the
 * file has no record of. */
START_TEST(test_inconsistent_map_refused_on_read)
{
    zt_snap_dir_make();
    zp_slotmap *m = moved();
    char path[512], err[512];
    zt_snap_write_free(record(7, 1, m, m), path, sizeof(path));
    size_t len, maplen = zp_slotmap_wire_size(m);
    uint8_t *b = zt_snap_slurp(path, &len);
    uint8_t *sec = b + 128, *payload = sec + 24;
    ck_assert_uint_eq(zp_get64(payload + piece1_lo_at(m)), 10);
    zp_put64(payload + piece1_lo_at(m), 20);
    zp_put32(sec + 16, zp_snapshot_crc32c(payload, maplen));
    zp_put32(sec + 20, zp_snapshot_crc32c(sec, 20));
    zt_snap_spit(path, b, len);
    zp_snapshot *r = NULL;
    ck_assert_int_eq(zp_snapshot_read(path, &r, err, sizeof(err)), ZEPS_EDATA);
    zt_snap_assert_has(err, path);
    zt_snap_assert_has(err, "dense table 'w': record [10, 30) is not a piece shard 1 holds");
    ck_assert_int_eq(zp_snapshot_read_verify(path, NULL, err, sizeof(err)), ZEPS_EDATA);
    zt_snap_assert_has(err, "record [10, 30) is not a piece");
    payload[piece1_lo_at(m)] ^= 1; /* CRC no longer right */
    zt_snap_spit(path, b, len);
    ck_assert_int_eq(zp_snapshot_read(path, &r, err, sizeof(err)), ZEPS_EDATA);
    zt_snap_assert_has(err, "section 0 (slot map) CRC mismatch");
    /* a piece on shard 5 of 3, its CRCs made right */
    payload[piece1_lo_at(m)] ^= 1;
    zp_put64(payload + piece1_lo_at(m), 10);
    payload[piece1_lo_at(m) + 8] = 5;
    zp_put32(sec + 16, zp_snapshot_crc32c(payload, maplen));
    zp_put32(sec + 20, zp_snapshot_crc32c(sec, 20));
    zt_snap_spit(path, b, len);
    ck_assert_int_eq(zp_snapshot_read(path, &r, err, sizeof(err)), ZEPS_EDATA);
    zt_snap_assert_has(err, "table 'w' piece 1 at 10 on shard 5");
    /* piece 3, [60, 90), given to shard 1 too: every record a piece of
     * shard 1, but one of its pieces has none */
    payload[piece1_lo_at(m) + 8] = 1;
    payload[piece1_lo_at(m) + 28] = 1;
    zp_put32(sec + 16, zp_snapshot_crc32c(payload, maplen));
    zp_put32(sec + 20, zp_snapshot_crc32c(sec, 20));
    zt_snap_spit(path, b, len);
    ck_assert_int_eq(zp_snapshot_read(path, &r, err, sizeof(err)), ZEPS_EDATA);
    zt_snap_assert_has(err,
                       "dense table 'w': shard 1 holds 3 pieces of it under the file's slot map "
                       "(epoch 1), the file has 2");
    free(b);
    zp_slotmap_destroy(&m);
    zt_snap_dir_remove();
}
END_TEST

/* Set 8 is sound (every file under the moved map). Set 9: shard 0's file
 * was written before the move's commit (it holds [0, 30)) and shard 1's
 * after ([10, 30) again). Set 10: shard 0's after ([0, 10)) and shard
 * 1's before ([30, 60)): [10, 30) nowhere. Neither is recorded, and a
 * restore takes set 8. Set 11: shard 2 missed the move, which did not
 * concern it: recorded, and shard 2 restores the set's map. */
START_TEST(test_set_holding_a_piece_twice_or_not_at_all)
{
    zt_snap_dir_make();
    zp_slotmap *m = moved(), *d = dflt();
    char err[700];
    for (uint32_t k = 0; k < S; k++)
        zt_snap_write_free(record(8, k, m, m), NULL, 0);
    ck_assert_msg(zp_manifest_add_set(zt_snap_dir, 8, S, err, sizeof(err)) == 0, "%s", err);
    const zp_slotmap *at[2][S] = {{d, m, m}, {m, d, m}};
    for (int q = 0; q < 2; q++) {
        for (uint32_t k = 0; k < S; k++)
            zt_snap_write_free(record(9 + (uint64_t)q, k, at[q][k], at[q][k] == m ? m : NULL), NULL,
                               0);
        ck_assert_int_eq(
            zp_manifest_set_complete(zt_snap_dir, 9 + (uint64_t)q, S, err, sizeof(err)), 0);
        ck_assert_int_eq(zp_manifest_add_set(zt_snap_dir, 9 + (uint64_t)q, S, err, sizeof(err)),
                         ZEPS_EDATA);
        zt_snap_assert_has(
            err, q == 0 ? "shard 0's file was written at slot map epoch 0 and shard 1's at "
                          "epoch 1, under which shard 0 owns other slots or dense pieces"
                        : "shard 1's file was written at slot map epoch 0 and shard 0's "
                          "at epoch 1, under which shard 1 owns other slots or dense "
                          "pieces");
        zt_snap_assert_has(err, "the moved rows or pieces twice or not at all");
    }
    zp_snapshot *r = NULL;
    uint64_t setid = 0;
    ck_assert_int_eq(
        zp_manifest_find_restorable(zt_snap_dir, 0, S, &r, &setid, NULL, NULL, err, sizeof(err)),
        0);
    ck_assert_uint_eq(setid, 8);
    zp_snapshot_free(&r);
    zt_snap_write_free(record(11, 0, m, m), NULL, 0);
    zt_snap_write_free(record(11, 1, m, m), NULL, 0);
    zt_snap_write_free(record(11, 2, d, NULL), NULL, 0);
    ck_assert_msg(zp_manifest_add_set(zt_snap_dir, 11, S, err, sizeof(err)) == 0, "%s", err);
    ck_assert_int_eq(
        zp_manifest_find_restorable(zt_snap_dir, 2, S, &r, &setid, NULL, NULL, err, sizeof(err)),
        0);
    ck_assert_uint_eq(setid, 11);
    ck_assert_uint_eq(r->h.slot_epoch, 1);
    ck_assert_uint_eq(r->slotmap_len, zp_slotmap_wire_size(m));
    assert_piece(&r->tables[0], 60, 90);
    zp_snapshot_free(&r);
    zp_slotmap_destroy(&d);
    zp_slotmap_destroy(&m);
    zt_snap_dir_remove();
}
END_TEST

/* Reshard of the set under `moved` to 1, 2 and 3 shards: each the default
 * slice, every element's value and state in place, the newest version. */
START_TEST(test_reshard_assembles_pieces)
{
    zp_slotmap *m = moved();
    zp_snapshot *src[S];
    for (uint32_t k = 0; k < S; k++)
        src[k] = record(5, k, m, m);
    char err[512];
    for (uint32_t n = 1; n <= 3; n++)
        for (uint32_t j = 0; j < n; j++) {
            zp_snapshot *out = NULL;
            ck_assert_msg(zp_reshard_build((const zp_snapshot *const *)src, S, j, n, &out, err,
                                           sizeof(err)) == 0,
                          "%s", err);
            ck_assert_uint_eq(out->ntables, 1);
            ck_assert_ptr_null(out->slotmap);
            assert_piece(&out->tables[0], zp_slice_at(LEN, j, n), zp_slice_at(LEN, j + 1, n));
            ck_assert_uint_eq(out->tables[0].version, 160);
            ck_assert_int_eq(zp_snapshot_validate(out, err, sizeof(err)), 0);
            zp_snapshot_free(&out);
        }
    for (uint32_t k = 0; k < S; k++)
        zp_snapshot_free(&src[k]);
    zp_slotmap_destroy(&m);
}
END_TEST

/* [60, 90) moved on to shard 1 as well: shard 2 holds no piece, and its
 * file one empty record [0, 0), which the reader and reshard take. */
START_TEST(test_shard_without_a_piece)
{
    zt_snap_dir_make();
    zp_slotmap *m = moved(), *m2 = NULL;
    char path[512], err[512];
    ck_assert_int_eq(zp_slotmap_dense_moved(m, "w", LEN, 60, 90, 1, &m2, err, sizeof(err)), 0);
    zt_snap_write_free(record(4, 2, m2, m2), path, sizeof(path));
    zp_snapshot *src[S];
    for (uint32_t k = 0; k < 2; k++)
        src[k] = record(4, k, m2, m2);
    ck_assert_msg(zp_snapshot_read(path, &src[2], err, sizeof(err)) == 0, "%s", err);
    ck_assert_uint_eq(src[2]->ntables, 1);
    ck_assert_uint_eq(src[2]->tables[0].end, 0);
    zp_snapshot *out = NULL;
    for (uint32_t j = 0; j < 2; j++) {
        ck_assert_msg(
            zp_reshard_build((const zp_snapshot *const *)src, S, j, 2, &out, err, sizeof(err)) == 0,
            "%s", err);
        assert_piece(&out->tables[0], zp_slice_at(LEN, j, 2), zp_slice_at(LEN, j + 1, 2));
        zp_snapshot_free(&out);
    }
    for (uint32_t k = 0; k < S; k++)
        zp_snapshot_free(&src[k]);
    zp_slotmap_destroy(&m2);
    zp_slotmap_destroy(&m);
    zt_snap_dir_remove();
}
END_TEST

/* Sources holding [10, 30) twice, or not at all: refused, naming it. */
START_TEST(test_reshard_refuses_a_piece_twice_or_missing)
{
    zp_slotmap *m = moved(), *d = dflt();
    const zp_slotmap *at[2][S] = {{d, m, m}, {m, d, m}};
    const char *why[2] = {"dense table 'w': shard 0's file and shard 1's both hold element 10 "
                          "(a piece twice",
                          "dense table 'w': no file of the set holds element 10 (a piece "
                          "missing"};
    char err[512];
    for (int q = 0; q < 2; q++) {
        zp_snapshot *src[S], *out = NULL;
        for (uint32_t k = 0; k < S; k++)
            src[k] = record(5, k, at[q][k], at[q][k] == m ? m : NULL);
        ck_assert_int_eq(
            zp_reshard_build((const zp_snapshot *const *)src, S, 0, 2, &out, err, sizeof(err)),
            ZEPS_EDATA);
        zt_snap_assert_has(err, why[q]);
        for (uint32_t k = 0; k < S; k++)
            zp_snapshot_free(&src[k]);
    }
    zp_slotmap_destroy(&d);
    zp_slotmap_destroy(&m);
}
END_TEST

/* A name of 63 bytes (the most) and a table of one element, placed by
 * the map on shard 1: written and read back. */
START_TEST(test_bounds_of_names_and_lengths)
{
    zt_snap_dir_make();
    char name[64], path[512], err[512];
    memset(name, 'n', 63);
    name[63] = '\0';
    zp_slotmap *d = dflt(), *m = NULL;
    ck_assert_msg(zp_slotmap_dense_moved(d, name, 1, 0, 1, 1, &m, err, sizeof(err)) == 0, "%s",
                  err);
    zp_snapshot *s = zp_snapshot_new(1, 0);
    s->h.shard = 1;
    s->h.nshards = S;
    s->h.nworkers = 1;
    s->h.setid = 3;
    piece(&s->tables[0], 0, 1);
    snprintf(s->tables[0].name, sizeof(s->tables[0].name), "%s", name);
    s->tables[0].length = 1;
    size_t len = zp_slotmap_wire_size(m);
    uint8_t *wire = malloc(len);
    zp_slotmap_encode(m, wire);
    zp_snapshot_set_map(s, wire, len);
    free(wire);
    zt_snap_write_free(s, path, sizeof(path));
    zp_snapshot *r = NULL;
    ck_assert_msg(zp_snapshot_read(path, &r, err, sizeof(err)) == 0, "%s", err);
    ck_assert_str_eq(r->tables[0].name, name);
    ck_assert_uint_eq(r->tables[0].end, 1);
    zp_snapshot_free(&r);
    zp_slotmap_destroy(&m);
    zp_slotmap_destroy(&d);
    zt_snap_dir_remove();
}
END_TEST

/* A map naming "a" and "w", its "a" made "w" (CRCs made right): the
 * reader refuses a table named twice. */
START_TEST(test_table_named_twice_refused)
{
    zt_snap_dir_make();
    zp_slotmap *m = moved(), *m2 = NULL;
    char path[512], err[512];
    ck_assert_int_eq(zp_slotmap_dense_moved(m, "a", 10, 0, 5, 1, &m2, err, sizeof(err)), 0);
    zt_snap_write_free(record(7, 0, m2, m2), path, sizeof(path));
    size_t len, maplen = zp_slotmap_wire_size(m2);
    uint8_t *b = zt_snap_slurp(path, &len);
    uint8_t *sec = b + 128, *payload = sec + 24;
    /* owners, u32 base, u32 retired, u32 tables, u16 name length: "a" */
    size_t at = ZP_SLOTMAP_WIRE_HDR + 2 * (size_t)zp_slotmap_slots(m2) + 14;
    ck_assert_int_eq(payload[at], 'a');
    payload[at] = 'w';
    zp_put32(sec + 16, zp_snapshot_crc32c(payload, maplen));
    zp_put32(sec + 20, zp_snapshot_crc32c(sec, 20));
    zt_snap_spit(path, b, len);
    free(b);
    zp_snapshot *r = NULL;
    ck_assert_int_eq(zp_snapshot_read(path, &r, err, sizeof(err)), ZEPS_EDATA);
    zt_snap_assert_has(err,
                       "section 0 (slot map): dense list: table 'w' out of order or named twice");
    zp_slotmap_destroy(&m2);
    zp_slotmap_destroy(&m);
    zt_snap_dir_remove();
}
END_TEST

/* A map whose bytes after the owners stop inside the 12 of its shard
 * counts and dense list is refused as such, not as naming joined shards;
 * one naming a joined shard as that. */
START_TEST(test_short_tail_refused)
{
    uint8_t tail[20] = {0};
    char err[256];
    zp_put32(tail, 3);
    ck_assert_int_eq(zp_snapshot_pieces_map(tail, 0, 8, 3, err, sizeof(err)), ZEPS_EINVAL);
    zt_snap_assert_has(err, "ends 8 bytes after its owners, inside the 12");
    zp_put32(tail, 4); /* base 4 of a 3-shard file: a shard joined */
    ck_assert_int_eq(zp_snapshot_pieces_map(tail, 0, 20, 3, err, sizeof(err)), ZEPS_EINVAL);
    zt_snap_assert_has(err, "names joined or retired shards");
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("snappieces");
    TCase *tc = tcase_create("snappieces");
    tcase_add_test(tc, test_pieces_round_trip);
    tcase_add_test(tc, test_records_checked);
    tcase_add_test(tc, test_inconsistent_map_refused_on_read);
    tcase_add_test(tc, test_set_holding_a_piece_twice_or_not_at_all);
    tcase_add_test(tc, test_reshard_assembles_pieces);
    tcase_add_test(tc, test_reshard_refuses_a_piece_twice_or_missing);
    tcase_add_test(tc, test_shard_without_a_piece);
    tcase_add_test(tc, test_bounds_of_names_and_lengths);
    tcase_add_test(tc, test_table_named_twice_refused);
    tcase_add_test(tc, test_short_tail_refused);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return zt_run_suite(suite());
}
