/*
 * test_snapmap.c - the slot map in snapshot files and sets
 * (common/snapshot/setmap.c, the format 2 section; docs/snapshots.md,
 * "The slot map of a set").
 *
 * A record of one sparse table whose rows are placed by a map: written as
 * format 2, read back with the same map; a row the map gives another
 * shard is refused on write, and on read (its section named); a map section naming another shard
 * count (its CRCs made right) is refused on read naming the file; a set whose files straddle a
 * move's commit is not recorded, and one where a shard only missed a change that did not concern it
 * is, and restores the set's newest map on that shard.
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
#include "snapshot_io.h"
#include "sparse_hash.h"
#include "zeps_errors.h"

#define S     3u
#define DIM   2u
#define NIDS  600u
#define REC   ZP_SNAP_ROW_LEN(DIM, 0)
#define SLOTS 4095u /* the default map of 3 shards */

static const uint8_t spec[4] = {1, 2, 3, 4}; /* the reader does not decode it */

/* The default map of 3 with slots [0, 2048) of shard 0 given to shard 2
 * at epoch 1: the map a move commits. */
static zp_slotmap *moved(void)
{
    zp_slotmap *d = NULL, *m = NULL;
    ck_assert_int_eq(zp_slotmap_new_default(&d, S), 0);
    static uint8_t which[SLOTS];
    for (uint32_t k = 0; k < SLOTS; k++)
        which[k] = k < 2048 && zp_slotmap_slot_owner(d, k) == 0;
    ck_assert_int_eq(zp_slotmap_moved(d, which, 2, &m), 0);
    zp_slotmap_destroy(&d);
    return m;
}

/* The record of shard k of set `setid`: table "emb" holding the ids
 * 1..NIDS that `place` gives shard k, its map `rec` (NULL: none, the
 * default). The caller frees it. */
static zp_snapshot *record(uint64_t setid, uint32_t k, const zp_slotmap *place,
                           const zp_slotmap *rec)
{
    zp_snapshot *s = zp_snapshot_new(1, 0);
    s->h.shard = k;
    s->h.nshards = S;
    s->h.nworkers = 1;
    s->h.setid = setid;
    snprintf(s->h.consistency, sizeof(s->h.consistency), "async");
    zp_snap_table *t = &s->tables[0];
    snprintf(t->name, sizeof(t->name), "emb");
    snprintf(t->optimizer, sizeof(t->optimizer), "sgd");
    t->kind = 1;
    t->length = DIM;
    uint8_t *mem = calloc(1, sizeof(spec) + ZP_SNAP_ROWS_HDR + NIDS * REC);
    memcpy(mem, spec, sizeof(spec));
    uint8_t *rows = mem + sizeof(spec), *at = rows + ZP_SNAP_ROWS_HDR;
    uint64_t n = 0;
    for (uint64_t id = 1; id <= NIDS; id++) {
        if (zp_slotmap_owner(place, id) != (int)k)
            continue;
        memcpy(at, &id, 8);
        float v[DIM] = {(float)id, 1.0f};
        memcpy(at + 24, v, sizeof(v));
        at += REC;
        n++;
    }
    zp_put64(rows, n);
    zp_put32(rows + 8, DIM);
    t->owned_bytes = mem;
    t->spec = mem;
    t->spec_len = sizeof(spec);
    t->rows = rows;
    t->rows_len = ZP_SNAP_ROWS_HDR + n * REC;
    if (rec) {
        uint8_t wire[ZP_SLOTMAP_WIRE_HDR + 2 * SLOTS];
        ck_assert_uint_eq(zp_slotmap_wire_size(rec), sizeof(wire));
        zp_slotmap_encode(rec, wire);
        zp_snapshot_set_map(s, wire, sizeof(wire));
    }
    return s;
}

START_TEST(test_format2_round_trip)
{
    zt_snap_dir_make();
    zp_slotmap *m = moved();
    char path[512], err[512];
    zt_snap_write_free(record(7, 2, m, m), path, sizeof(path));
    zp_snapshot *r = NULL;
    ck_assert_msg(zp_snapshot_read(path, &r, err, sizeof(err)) == 0, "%s", err);
    ck_assert_uint_eq(r->h.format, 2);
    ck_assert_uint_eq(r->h.slot_epoch, 1);
    uint8_t wire[ZP_SLOTMAP_WIRE_HDR + 2 * SLOTS];
    zp_slotmap_encode(m, wire);
    ck_assert_uint_eq(r->slotmap_len, sizeof(wire));
    ck_assert_mem_eq(r->slotmap, wire, sizeof(wire));
    uint64_t n;
    memcpy(&n, r->tables[0].rows, 8);
    ck_assert_uint_gt(n, 0);
    zp_snapshot_free(&r);
    /* the map alone, and the default one of a file of format 1 */
    zp_slotmap *got = NULL;
    zp_snap_info in;
    ck_assert_int_eq(zp_snapshot_read_map(path, &got, &in, err, sizeof(err)), 0);
    ck_assert_uint_eq(zp_slotmap_epoch(got), 1);
    ck_assert_int_eq(zp_slotmap_slot_owner(got, 0), 2);
    zp_slotmap_destroy(&got);
    zp_slotmap *d = NULL;
    ck_assert_int_eq(zp_slotmap_new_default(&d, S), 0);
    zt_snap_write_free(record(8, 1, d, NULL), path, sizeof(path));
    ck_assert_int_eq(zp_snapshot_read_map(path, &got, &in, err, sizeof(err)), 0);
    ck_assert_uint_eq(in.h.format, 1);
    ck_assert_uint_eq(zp_slotmap_epoch(got), 0);
    zp_slotmap_destroy(&got);
    zp_slotmap_destroy(&d);
    zp_slotmap_destroy(&m);
    zt_snap_dir_remove();
}
END_TEST

/* Rows placed by the default map in a file that records the moved map:
 * the writer refuses it, naming the row and the map's epoch. */
START_TEST(test_rows_checked_against_the_map)
{
    zt_snap_dir_make();
    zp_slotmap *m = moved(), *d = NULL;
    ck_assert_int_eq(zp_slotmap_new_default(&d, S), 0);
    zp_snapshot *s = record(7, 0, d, m);
    char err[512];
    ck_assert_int_eq(zp_snapshot_write(zt_snap_dir, s, NULL, 0, err, sizeof(err)), ZEPS_EINVAL);
    zt_snap_assert_has(err, "belongs to shard 2, not 0 of 3 (slot map of epoch 1)");
    zp_snapshot_free(&s);
    zp_slotmap_destroy(&d);
    zp_slotmap_destroy(&m);
    zt_snap_dir_remove();
}
END_TEST

/* A map section over 4 shards in a file of 3, its CRCs made right. */
START_TEST(test_map_of_another_shard_count)
{
    zt_snap_dir_make();
    zp_slotmap *m = moved();
    char path[512], err[512];
    zt_snap_write_free(record(7, 1, m, m), path, sizeof(path));
    size_t len;
    uint8_t *b = zt_snap_slurp(path, &len);
    uint8_t *sec = b + 128, *payload = sec + 24;
    zp_put32(payload + 12, 4);
    zp_put32(sec + 16, zp_snapshot_crc32c(payload, ZP_SLOTMAP_WIRE_HDR + 2 * SLOTS));
    zp_put32(sec + 20, zp_snapshot_crc32c(sec, 20));
    zt_snap_spit(path, b, len);
    free(b);
    zp_snapshot *r = NULL;
    ck_assert_int_eq(zp_snapshot_read(path, &r, err, sizeof(err)), ZEPS_EDATA);
    zt_snap_assert_has(err, path);
    zt_snap_assert_has(err,
                       "section 0 (slot map): slot map over 4 shards, the file is one of 3 shards");
    zp_slotmap *got = NULL;
    ck_assert_int_eq(zp_snapshot_read_map(path, &got, NULL, err, sizeof(err)), ZEPS_EDATA);
    zt_snap_assert_has(err, "slot map over 4 shards");
    zp_slotmap_destroy(&m);
    zt_snap_dir_remove();
}
END_TEST

/* A file whose map section (its CRCs made right) gives shard 0 a slot
 * holding one of shard 2's rows: the reader refuses it, naming the rows'
 * section, 4 (0 the map, 1 the workers, 2 the meta, 3 the declaration). */
START_TEST(test_row_of_another_shard_on_read)
{
    zt_snap_dir_make();
    zp_slotmap *m = moved();
    char path[512], err[512];
    zt_snap_write_free(record(7, 2, m, m), path, sizeof(path));
    uint64_t id = 1;
    while (zp_slotmap_owner(m, id) != 2)
        id++;
    size_t len;
    uint8_t *b = zt_snap_slurp(path, &len);
    uint8_t *sec = b + 128, *payload = sec + 24;
    uint8_t *owner = payload + ZP_SLOTMAP_WIRE_HDR + 2 * zp_slotmap_slot_of(m, id);
    owner[0] = owner[1] = 0;
    zp_put32(sec + 16, zp_snapshot_crc32c(payload, ZP_SLOTMAP_WIRE_HDR + 2 * SLOTS));
    zp_put32(sec + 20, zp_snapshot_crc32c(sec, 20));
    zt_snap_spit(path, b, len);
    free(b);
    zp_snapshot *r = NULL;
    ck_assert_int_eq(zp_snapshot_read(path, &r, err, sizeof(err)), ZEPS_EDATA);
    zt_snap_assert_has(err, path);
    char want[128];
    snprintf(want, sizeof(want),
             "section 4 (sparse table 'emb' rows): sparse table 'emb': row 0 (id %" PRIu64
             ") belongs to shard 0, not 2 of 3",
             id);
    zt_snap_assert_has(err, want);
    zp_slotmap_destroy(&m);
    zt_snap_dir_remove();
}
END_TEST

/* Set 9: shard 0 wrote its file before the commit (the default map, the
 * moved slots' rows), shard 2 after (the moved map, those rows again):
 * not recorded, both named. Set 10: shard 1 missed the commit (the
 * default map) but owns the same slots under both: recorded, and shard 1
 * restores the set's map. */
START_TEST(test_set_straddling_a_commit)
{
    zt_snap_dir_make();
    zp_slotmap *m = moved(), *d = NULL;
    ck_assert_int_eq(zp_slotmap_new_default(&d, S), 0);
    zt_snap_write_free(record(9, 0, d, NULL), NULL, 0);
    zt_snap_write_free(record(9, 1, m, m), NULL, 0);
    zt_snap_write_free(record(9, 2, m, m), NULL, 0);
    char err[600];
    ck_assert_int_eq(zp_manifest_set_complete(zt_snap_dir, 9, S, err, sizeof(err)), 0);
    ck_assert_int_eq(zp_manifest_add_set(zt_snap_dir, 9, S, err, sizeof(err)), ZEPS_EDATA);
    zt_snap_assert_has(err,
                       "shard 0's file was written at slot map epoch 0 and shard 1's at epoch 1");
    zt_snap_assert_has(err, "a move committed while the set was taken");
    zp_manifest *man = NULL;
    ck_assert_int_eq(zp_manifest_load(zt_snap_dir, &man, err, sizeof(err)), 0);
    ck_assert_uint_eq(man->nsets, 0);
    zp_manifest_free(&man);

    zt_snap_write_free(record(10, 0, m, m), NULL, 0);
    zt_snap_write_free(record(10, 1, m, NULL), NULL, 0); /* shard 1: the same rows either way */
    zt_snap_write_free(record(10, 2, m, m), NULL, 0);
    ck_assert_msg(zp_manifest_add_set(zt_snap_dir, 10, S, err, sizeof(err)) == 0, "%s", err);
    zp_snapshot *r = NULL;
    uint64_t setid = 0;
    ck_assert_msg(zp_manifest_find_restorable(zt_snap_dir, 1, S, &r, &setid, NULL, NULL, err,
                                              sizeof(err)) == 0,
                  "%s", err);
    ck_assert_uint_eq(setid, 10);
    ck_assert_uint_eq(r->h.slot_epoch, 1);
    ck_assert_ptr_nonnull(r->slotmap);
    ck_assert_uint_eq(zp_get64(r->slotmap), 1);
    zp_snapshot_free(&r);
    zp_slotmap_destroy(&d);
    zp_slotmap_destroy(&m);
    zt_snap_dir_remove();
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("snapmap");
    TCase *tc = tcase_create("snapmap");
    tcase_add_test(tc, test_format2_round_trip);
    tcase_add_test(tc, test_rows_checked_against_the_map);
    tcase_add_test(tc, test_map_of_another_shard_count);
    tcase_add_test(tc, test_row_of_another_shard_on_read);
    tcase_add_test(tc, test_set_straddling_a_commit);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return zt_run_suite(suite());
}
