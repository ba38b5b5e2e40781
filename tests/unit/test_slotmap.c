/*
 * test_slotmap.c - common/slotmap.c: the default map puts every id where
 * `hash mod S` did (so old snapshot sets and clients agree with it); map
 * files parsed, and refused with the line at fault; the wire form round
 * trips and a bad one is refused; a map naming shards joined at run time
 * carries their endpoints, and a default map travels as before; dense
 * tables by range: default pieces, moved ranges cutting pieces, the dense
 * list's wire form (two tables in the order of their names) and its
 * refusals.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_main.h"
#include "scratch.h"
#include "slotmap.h"
#include "sparse_hash.h"
#include "zeps_errors.h"

START_TEST(test_default_is_hash_mod_s)
{
    for (int S = 1; S <= 70; S++) {
        zp_slotmap *m = NULL;
        ck_assert_int_eq(zp_slotmap_new_default(&m, S), 0);
        ck_assert_uint_eq(zp_slotmap_epoch(m), 0);
        ck_assert_uint_eq(zp_slotmap_slots(m) % (uint32_t)S, 0);
        ck_assert_uint_le(zp_slotmap_slots(m), ZP_SLOTS_DEFAULT);
        ck_assert_uint_gt(zp_slotmap_slots(m), ZP_SLOTS_DEFAULT - (uint32_t)S);
        uint64_t x = 88172645463325252ull;
        int wrong = 0, first = -1; /* one assertion per map: fast under ASan */
        for (int i = 0; i < 20000; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            uint64_t id = i < 100 ? (uint64_t)i : x;
            if (zp_slotmap_owner(m, id) != zp_sparse_shard_of(id, S) && wrong++ == 0)
                first = i;
        }
        ck_assert_msg(wrong == 0, "%d shards: %d ids placed apart from hash mod S (first: id #%d)",
                      S, wrong, first);
        zp_slotmap_destroy(&m);
        ck_assert_ptr_null(m);
    }
    zp_slotmap *m = NULL;
    ck_assert_int_eq(zp_slotmap_new_default(&m, 0), ZEPS_EINVAL);
    ck_assert_int_eq(zp_slotmap_new_default(&m, ZP_SLOTS_DEFAULT + 1), ZEPS_EINVAL);
    ck_assert_ptr_null(m);
    /* the most shards a default map takes: one slot each */
    ck_assert_int_eq(zp_slotmap_new_default(&m, ZP_SLOTS_DEFAULT), 0);
    ck_assert_uint_eq(zp_slotmap_slots(m), ZP_SLOTS_DEFAULT);
    ck_assert_int_eq(zp_slotmap_slot_owner(m, ZP_SLOTS_DEFAULT - 1), ZP_SLOTS_DEFAULT - 1);
    zp_slotmap_destroy(&m);
    zp_slotmap_destroy(NULL);
}
END_TEST

static const char *good = "# two shards, slots 0-9 moved to shard 1\n"
                          "epoch 7\n"
                          "slots 4096\n"
                          "0-9 1   # moved\n"
                          "10-2047 0\n"
                          "2048-4094 1\n"
                          "4095 0\n";

START_TEST(test_parse)
{
    zp_slotmap *m = NULL;
    char err[256] = "";
    ck_assert_int_eq(zp_slotmap_parse(&m, good, strlen(good), 2, err, sizeof(err)), 0);
    ck_assert_uint_eq(zp_slotmap_epoch(m), 7);
    ck_assert_uint_eq(zp_slotmap_slots(m), 4096);
    ck_assert_int_eq(zp_slotmap_shards(m), 2);
    ck_assert_int_eq(zp_slotmap_slot_owner(m, 0), 1);
    ck_assert_int_eq(zp_slotmap_slot_owner(m, 9), 1);
    ck_assert_int_eq(zp_slotmap_slot_owner(m, 10), 0);
    ck_assert_int_eq(zp_slotmap_slot_owner(m, 4094), 1);
    ck_assert_int_eq(zp_slotmap_slot_owner(m, 4095), 0);
    ck_assert_uint_eq(zp_slotmap_count(m, 1), 10 + 2047);
    ck_assert_uint_eq(zp_slotmap_count(m, 0), 4096 - 10 - 2047);
    /* an id's owner is its slot's */
    for (uint64_t id = 0; id < 1000; id++)
        ck_assert_int_eq(zp_slotmap_owner(m, id),
                         zp_slotmap_slot_owner(m, zp_slotmap_slot_of(m, id)));
    zp_slotmap_destroy(&m);
    /* the most slots a file may name (16385 is refused: test_parse_refusals) */
    const char *most = "epoch 1\nslots 16384\n0-16383 1\n";
    ck_assert_msg(zp_slotmap_parse(&m, most, strlen(most), 2, err, sizeof(err)) == 0, "%s", err);
    ck_assert_uint_eq(zp_slotmap_slots(m), ZP_SLOTS_MAX);
    ck_assert_int_eq(zp_slotmap_slot_owner(m, 16383), 1);
    zp_slotmap_destroy(&m);
}
END_TEST

static void refused(const char *text, int nshards, const char *needle)
{
    zp_slotmap *m = NULL;
    char err[256] = "";
    ck_assert_int_eq(zp_slotmap_parse(&m, text, strlen(text), nshards, err, sizeof(err)),
                     ZEPS_ECONFIG);
    ck_assert_ptr_null(m);
    ck_assert_msg(strstr(err, needle), "'%s' lacks '%s'", err, needle);
}

START_TEST(test_parse_refusals)
{
    refused("epoch 1\nslots 4\n0-1 0\n1-3 1\n", 2, "line 4: slot 1 is named twice");
    refused("epoch 1\nslots 4\n0-2 0\n", 2, "slot 3 has no shard");
    refused("epoch 1\nslots 4\n0-3 2\n", 2, "line 3: shard 2 is not one of the cluster's 2");
    refused("epoch 0\nslots 4\n0-3 0\n", 2, "line 1: epoch 0 is the default map's");
    refused("0-3 0\n", 2, "line 1: `epoch` and `slots` must come before the ranges");
    refused("epoch 1\nslots 4\n2-1 0\n", 2, "line 3: range 2-1 is not within slots 0-3");
    refused("epoch 1\nslots 4\n0-4 0\n", 2, "range 0-4 is not within slots 0-3");
    refused("epoch 1\nslots 16385\n", 2, "slots 16385 is not in 1..16384");
    refused("epoch 1\nslots 4\n0-3 0 junk\n", 2, "line 3: a range line is `LO-HI SHARD`");
    refused("epoch 1\nslots 4\nsomething\n", 2, "line 3: expected");
    refused("epoch 1\nslots 4\n", 2, "no slot ranges");
    refused("epoch 1\nslots 4\n0-3 0\nepoch 2\n", 2, "line 4: `epoch N`");
    zp_slotmap *m = NULL;
    char err[256];
    ck_assert_int_eq(zp_slotmap_load(&m, "/nonexistent/map", 2, err, sizeof(err)), ZEPS_ECONFIG);
    ck_assert_ptr_nonnull(strstr(err, "slot map '/nonexistent/map'"));
}
END_TEST

/* A map file that is read but refused: the error names the file and why. */
START_TEST(test_load_refused)
{
    char path[512], err[512] = "";
    ck_assert_int_eq(zt_scratch_file(path, sizeof(path), "bad.map"), 0);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs("epoch 1\nslots 4\n", f);
    ck_assert_int_eq(fclose(f), 0);
    zp_slotmap *m = NULL;
    ck_assert_int_eq(zp_slotmap_load(&m, path, 2, err, sizeof(err)), ZEPS_ECONFIG);
    ck_assert_ptr_null(m);
    ck_assert_msg(strstr(err, path) && strstr(err, "no slot ranges"), "%s", err);
}
END_TEST

START_TEST(test_wire)
{
    zp_slotmap *m = NULL, *back = NULL;
    char err[256] = "";
    ck_assert_int_eq(zp_slotmap_parse(&m, good, strlen(good), 2, err, sizeof(err)), 0);
    size_t n = zp_slotmap_wire_size(m);
    ck_assert_uint_eq(n, 16 + 2 * 4096);
    unsigned char *buf = malloc(n);
    zp_slotmap_encode(m, buf);
    ck_assert_uint_eq(buf[0], 7);  /* epoch, little-endian */
    ck_assert_uint_eq(buf[16], 1); /* slot 0's owner */
    ck_assert_int_eq(zp_slotmap_decode(&back, buf, n, 2, err, sizeof(err)), 0);
    ck_assert_uint_eq(zp_slotmap_epoch(back), 7);
    for (uint32_t s = 0; s < 4096; s++)
        ck_assert_int_eq(zp_slotmap_slot_owner(back, s), zp_slotmap_slot_owner(m, s));
    zp_slotmap_destroy(&back);
    /* refused: short, another shard count, an owner past it */
    ck_assert_int_eq(zp_slotmap_decode(&back, buf, n - 1, 2, err, sizeof(err)), ZEPS_EPROTO);
    ck_assert_int_eq(zp_slotmap_decode(&back, buf, 8, 2, err, sizeof(err)), ZEPS_EPROTO);
    ck_assert_int_eq(zp_slotmap_decode(&back, buf, n, 3, err, sizeof(err)), ZEPS_EPROTO);
    ck_assert_ptr_nonnull(strstr(err, "over 2 shards; this cluster has 3"));
    buf[16 + 2 * 100] = 2;
    ck_assert_int_eq(zp_slotmap_decode(&back, buf, n, 2, err, sizeof(err)), ZEPS_EPROTO);
    ck_assert_ptr_nonnull(strstr(err, "slot 100 of the map names shard 2 of 2"));
    ck_assert_ptr_null(back);
    free(buf);
    zp_slotmap_destroy(&m);
}
END_TEST

/* A map that names shards joined at run time: their endpoints travel
 * after the owners (and only theirs: none for a base shard or one past
 * the last); a map of the base shards travels as before, byte for
 * byte; a list that does not fit is refused. */
START_TEST(test_joined_wire)
{
    zp_slotmap *d = NULL, *j = NULL, *j2 = NULL, *back = NULL, *mv = NULL;
    char err[256] = "";
    ck_assert_int_eq(zp_slotmap_new_default(&d, 2), 0);
    ck_assert_uint_eq(zp_slotmap_wire_size(d), 16 + 2 * 4096); /* unchanged */
    ck_assert_ptr_null(zp_slotmap_endpoint(d, 0));
    ck_assert_int_eq(zp_slotmap_joined(d, "tcp://10.0.0.3:7000", &j, err, sizeof(err)), 0);
    ck_assert_int_eq(zp_slotmap_joined(j, "tcp://10.0.0.4:7000", &j2, err, sizeof(err)), 0);
    ck_assert_int_eq(zp_slotmap_joined(j2, "tcp://10.0.0.3:7000", &back, err, sizeof(err)),
                     ZEPS_EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "is shard 2 of the map"));
    ck_assert_int_eq(zp_slotmap_joined(j2, "", &back, err, sizeof(err)), ZEPS_EINVAL);
    ck_assert_uint_eq(zp_slotmap_epoch(j2), 2);
    ck_assert_int_eq(zp_slotmap_shards(j2), 4);
    ck_assert_int_eq(zp_slotmap_base(j2), 2);
    ck_assert_uint_eq(zp_slotmap_count(j2, 2), 0); /* joined, owning nothing yet */
    uint8_t which[4096] = {0};
    which[5] = which[4095] = 1;
    ck_assert_int_eq(zp_slotmap_moved(j2, which, 3, &mv), 0);
    ck_assert_str_eq(zp_slotmap_endpoint(mv, 3), "tcp://10.0.0.4:7000"); /* kept */
    size_t n = zp_slotmap_wire_size(mv);
    ck_assert_uint_eq(n, 16 + 2 * 4096 + 4 + 2 * (2 + 19));
    unsigned char *buf = malloc(n + 1);
    zp_slotmap_encode(mv, buf);
    ck_assert_uint_eq(buf[12], 4);            /* shards, the joined ones included */
    ck_assert_uint_eq(buf[16 + 2 * 4096], 2); /* then the base */
    ck_assert_int_eq(zp_slotmap_decode(&back, buf, n, 2, err, sizeof(err)), 0);
    ck_assert_str_eq(zp_slotmap_endpoint(back, 2), "tcp://10.0.0.3:7000");
    ck_assert_str_eq(zp_slotmap_endpoint(back, 3), "tcp://10.0.0.4:7000");
    ck_assert_ptr_null(zp_slotmap_endpoint(back, 4)); /* one past the last shard: none */
    ck_assert_ptr_null(zp_slotmap_endpoint(back, 1)); /* a base shard: its own config's */
    ck_assert_int_eq(zp_slotmap_slot_owner(back, 5), 3);
    ck_assert_uint_eq(zp_slotmap_count(back, 3), 2);
    zp_slotmap_destroy(&back);
    /* refused: another base, a list cut short or too long, no list */
    ck_assert_int_eq(zp_slotmap_decode(&back, buf, n, 3, err, sizeof(err)), ZEPS_EPROTO);
    ck_assert_int_eq(zp_slotmap_decode(&back, buf, n - 1, 2, err, sizeof(err)), ZEPS_EPROTO);
    ck_assert_ptr_nonnull(strstr(err, "joined shard 3 of the slot map has no usable endpoint"));
    buf[n] = 'x';
    ck_assert_int_eq(zp_slotmap_decode(&back, buf, n + 1, 2, err, sizeof(err)), ZEPS_EPROTO);
    ck_assert_int_eq(zp_slotmap_decode(&back, buf, 16 + 2 * 4096, 2, err, sizeof(err)),
                     ZEPS_EPROTO);
    ck_assert_ptr_null(back);
    free(buf);
    zp_slotmap_destroy(&mv);
    zp_slotmap_destroy(&j2);
    zp_slotmap_destroy(&j);
    zp_slotmap_destroy(&d);
}
END_TEST

/* A slot set from its text, and the map that gives it to another shard. */
START_TEST(test_moved_set)
{
    uint8_t which[4095];
    char err[256];
    ck_assert_int_eq(zp_slotmap_parse_set("0-9,20,15-16,9", 4095, which, err, sizeof(err)), 13);
    for (uint32_t k = 0; k < 30; k++)
        ck_assert_int_eq(which[k], k <= 9 || k == 15 || k == 16 || k == 20);
    ck_assert_int_eq(zp_slotmap_parse_set("4094", 4095, which, err, sizeof(err)), 1);
    /* refused: past the map, reversed, not numbers, empty items */
    const char *bad[] = {"4095", "5-3", "x", "1-", "-1", "1,,2", "3,", "", "1-2x"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        ck_assert_msg(zp_slotmap_parse_set(bad[i], 4095, which, err, sizeof(err)) == -1,
                      "'%s' taken", bad[i]);
    ck_assert_int_eq(zp_slotmap_parse_set("4000-4095", 4095, which, err, sizeof(err)), -1);
    ck_assert_ptr_nonnull(strstr(err, "LO <= HI < 4095"));

    zp_slotmap *d = NULL, *m = NULL;
    ck_assert_int_eq(zp_slotmap_new_default(&d, 3), 0);
    ck_assert_int_eq(zp_slotmap_parse_set("0-2047", 4095, which, err, sizeof(err)), 2048);
    for (uint32_t k = 0; k < 4095; k++)
        which[k] = which[k] && zp_slotmap_slot_owner(d, k) == 0;
    ck_assert_int_eq(zp_slotmap_moved(d, which, 2, &m), 0);
    ck_assert_uint_eq(zp_slotmap_epoch(m), 1);
    ck_assert_uint_eq(zp_slotmap_slots(m), 4095);
    for (uint32_t k = 0; k < 4095; k++)
        ck_assert_int_eq(zp_slotmap_slot_owner(m, k),
                         k < 2048 && k % 3 == 0 ? 2 : zp_slotmap_slot_owner(d, k));
    ck_assert_uint_eq(zp_slotmap_count(m, 0), 1365 - 683);
    ck_assert_int_eq(zp_slotmap_moved(d, which, 3, &m), ZEPS_EINVAL); /* no shard 3 */
    zp_slotmap_destroy(&m);
    zp_slotmap_destroy(&d);
}
END_TEST

/* A retired shard: retired only when it owns no slot, never shard 0, never
 * twice; the retirement travels after the joined list (also with no joined
 * shard), survives joins and moves, and a map giving a retired shard a slot
 * or listing it out of order is refused. */
START_TEST(test_retired_wire)
{
    zp_slotmap *d = NULL, *mv = NULL, *r = NULL, *r2 = NULL, *back = NULL, *j = NULL;
    char err[256] = "";
    ck_assert_int_eq(zp_slotmap_new_default(&d, 3), 0);
    ck_assert_int_eq(zp_slotmap_retire(d, 1, &r, err, sizeof(err)), ZEPS_EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "shard 1 owns 1365 slots"));
    ck_assert_int_eq(zp_slotmap_retire(d, 0, &r, err, sizeof(err)), ZEPS_EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "BARRIER"));
    ck_assert_int_eq(zp_slotmap_retire(d, 3, &r, err, sizeof(err)), ZEPS_EINVAL);
    uint8_t which[4095];
    for (uint32_t k = 0; k < 4095; k++)
        which[k] = zp_slotmap_slot_owner(d, k) == 1;
    ck_assert_int_eq(zp_slotmap_moved(d, which, 2, &mv), 0);
    ck_assert_int_eq(zp_slotmap_retire(mv, 1, &r, err, sizeof(err)), 0);
    ck_assert_uint_eq(zp_slotmap_epoch(r), 2);
    ck_assert(zp_slotmap_retired(r, 1));
    ck_assert(!zp_slotmap_retired(r, 0) && !zp_slotmap_retired(r, 2) && !zp_slotmap_retired(r, 3));
    ck_assert(!zp_slotmap_retired(mv, 1));
    ck_assert_int_eq(zp_slotmap_retire(r, 1, &r2, err, sizeof(err)), ZEPS_EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "retired already"));
    for (uint32_t k = 0; k < 4095; k++)
        ck_assert_int_eq(zp_slotmap_slot_owner(r, k), zp_slotmap_slot_owner(mv, k));
    ck_assert_int_eq(zp_slotmap_moved(r, which, 1, &r2), ZEPS_EINVAL); /* never a slot again */
    ck_assert_int_eq(zp_slotmap_unretires(r, mv), 1);                  /* an older map forgets it */
    ck_assert_int_eq(zp_slotmap_unretires(mv, r), -1);
    ck_assert_int_eq(zp_slotmap_unretires(r, r), -1);

    /* the wire: no joined shard, an empty joined list, then the retired one */
    size_t n = zp_slotmap_wire_size(r);
    ck_assert_uint_eq(n, 16 + 2 * 4095 + 4 + 4 + 2);
    unsigned char *buf = malloc(n + 2);
    zp_slotmap_encode(r, buf);
    ck_assert_uint_eq(buf[16 + 2 * 4095], 3);     /* the base */
    ck_assert_uint_eq(buf[16 + 2 * 4095 + 4], 1); /* one retired */
    ck_assert_uint_eq(buf[16 + 2 * 4095 + 8], 1); /* shard 1 */
    ck_assert_int_eq(zp_slotmap_decode(&back, buf, n, 3, err, sizeof(err)), 0);
    ck_assert(zp_slotmap_retired(back, 1) && !zp_slotmap_retired(back, 2));
    ck_assert_int_eq(zp_slotmap_shards(back), 3);
    zp_slotmap_destroy(&back);
    /* refused: the retired shard owning a slot, shard 0 or a repeat listed,
     * an empty or cut list, an empty joined list with no retired one */
    unsigned char *own = buf + 16 + 2 * 7; /* slot 7: shard 2's after the move */
    own[0] = 1;
    ck_assert_int_eq(zp_slotmap_decode(&back, buf, n, 3, err, sizeof(err)), ZEPS_EPROTO);
    ck_assert_ptr_nonnull(strstr(err, "slot 7 of the map names shard 1, which the map retires"));
    own[0] = 2;
    buf[n - 2] = 0;
    ck_assert_int_eq(zp_slotmap_decode(&back, buf, n, 3, err, sizeof(err)), ZEPS_EPROTO);
    buf[n - 2] = 1;
    ck_assert_int_eq(zp_slotmap_decode(&back, buf, n - 1, 3, err, sizeof(err)), ZEPS_EPROTO);
    ck_assert_int_eq(zp_slotmap_decode(&back, buf, n - 6, 3, err, sizeof(err)), ZEPS_EPROTO);
    ck_assert_ptr_nonnull(strstr(err, "no retired one"));
    buf[n - 6] = 2; /* count 2: 1, 1 */
    buf[n] = 1;
    buf[n + 1] = 0;
    ck_assert_int_eq(zp_slotmap_decode(&back, buf, n + 2, 3, err, sizeof(err)), ZEPS_EPROTO);
    ck_assert_ptr_nonnull(strstr(err, "ascending"));
    ck_assert_ptr_null(back);

    /* a join keeps the retirement; the joined shard can retire in turn */
    ck_assert_int_eq(zp_slotmap_joined(r, "tcp://10.0.0.9:7000", &j, err, sizeof(err)), 0);
    ck_assert(zp_slotmap_retired(j, 1) && !zp_slotmap_retired(j, 3));
    ck_assert_int_eq(zp_slotmap_retire(j, 3, &r2, err, sizeof(err)), 0);
    size_t n2 = zp_slotmap_wire_size(r2);
    ck_assert_uint_eq(n2, 16 + 2 * 4095 + 4 + 2 + 19 + 4 + 2 * 2);
    unsigned char *buf2 = malloc(n2);
    zp_slotmap_encode(r2, buf2);
    ck_assert_int_eq(zp_slotmap_decode(&back, buf2, n2, 3, err, sizeof(err)), 0);
    ck_assert(zp_slotmap_retired(back, 1) && zp_slotmap_retired(back, 3));
    ck_assert_str_eq(zp_slotmap_endpoint(back, 3), "tcp://10.0.0.9:7000");
    free(buf2);
    free(buf);
    zp_slotmap_destroy(&back);
    zp_slotmap_destroy(&r2);
    zp_slotmap_destroy(&j);
    zp_slotmap_destroy(&r);
    zp_slotmap_destroy(&mv);
    zp_slotmap_destroy(&d);
}
END_TEST

/* The pieces of table `name` under m, as "lo-hi:owner " items. */
static void pieces_text(const zp_slotmap *m, const char *name, uint64_t length, char *out,
                        size_t len)
{
    zp_dense_piece p[16];
    size_t n = zp_slotmap_dense_pieces(m, name, length, p, 16);
    out[0] = '\0';
    for (size_t i = 0; i < n && i < 16; i++)
        snprintf(out + strlen(out), len - strlen(out), "%llu-%llu:%d ", (unsigned long long)p[i].lo,
                 (unsigned long long)p[i].hi, p[i].owner);
}

START_TEST(test_dense_pieces)
{
    zp_slotmap *d = NULL, *j = NULL, *m = NULL, *back = NULL, *m2 = NULL, *m3 = NULL, *x = NULL;
    char err[256] = "", txt[256];
    ck_assert_int_eq(zp_slotmap_new_default(&d, 2), 0);
    /* no entry: the default slices of the base shards, empty ones left out */
    pieces_text(d, "w", 100, txt, sizeof(txt));
    ck_assert_str_eq(txt, "0-50:0 50-100:1 ");
    pieces_text(d, "bias", 1, txt, sizeof(txt));
    ck_assert_str_eq(txt, "0-1:1 ");
    zp_dense_piece p;
    ck_assert_uint_eq(zp_slotmap_dense_find(d, "w", 100, 49, &p), 0);
    ck_assert(p.lo == 0 && p.hi == 50 && p.owner == 0);
    ck_assert_uint_eq(zp_slotmap_dense_find(d, "w", 100, 50, &p), 1);
    ck_assert(p.lo == 50 && p.hi == 100 && p.owner == 1);
    ck_assert_ptr_null(zp_slotmap_dense(d));
    /* a joined shard takes [33, 67): two pieces cut, each its own */
    ck_assert_int_eq(zp_slotmap_joined(d, "tcp://10.0.0.9:7000", &j, err, sizeof(err)), 0);
    size_t plain = zp_slotmap_wire_size(j); /* no dense list: as before */
    ck_assert_uint_eq(plain, 16 + 2 * 4096 + 4 + 2 + 19);
    ck_assert_int_eq(zp_slotmap_dense_moved(j, "w", 100, 33, 67, 2, &m, err, sizeof(err)), 0);
    ck_assert_uint_eq(zp_slotmap_epoch(m), 2);
    pieces_text(m, "w", 100, txt, sizeof(txt));
    ck_assert_str_eq(txt, "0-33:0 33-50:2 50-67:2 67-100:1 ");
    pieces_text(m, "v", 100, txt, sizeof(txt)); /* another table: default */
    ck_assert_str_eq(txt, "0-50:0 50-100:1 ");
    pieces_text(m, "w", 99, txt, sizeof(txt)); /* another length: not this entry */
    ck_assert_str_eq(txt, "0-49:0 49-99:1 ");
    for (uint32_t k = 0; k < 4096; k++)
        ck_assert_int_eq(zp_slotmap_slot_owner(m, k), zp_slotmap_slot_owner(j, k));
    ck_assert_uint_eq(zp_slotmap_dense_find(m, "w", 100, 66, &p), 2);
    ck_assert(p.lo == 50 && p.hi == 67 && p.owner == 2);
    ck_assert_uint_eq(zp_densemap_held(zp_slotmap_dense(m), "w", 100, 2, 2), 34);
    /* the wire: joined list, a retired count of 0, the dense list */
    size_t n = zp_slotmap_wire_size(m);
    ck_assert_uint_eq(n, plain + 4 + 4 + 2 + 1 + 8 + 4 + 4 * 10);
    unsigned char *buf = malloc(n + 16);
    zp_slotmap_encode(m, buf);
    ck_assert_uint_eq(buf[plain], 0);     /* no retired shard */
    ck_assert_uint_eq(buf[plain + 4], 1); /* one table */
    ck_assert_int_eq(zp_slotmap_decode(&back, buf, n, 2, err, sizeof(err)), 0);
    pieces_text(back, "w", 100, txt, sizeof(txt));
    ck_assert_str_eq(txt, "0-33:0 33-50:2 50-67:2 67-100:1 ");
    ck_assert_str_eq(zp_slotmap_endpoint(back, 2), "tcp://10.0.0.9:7000");
    zp_slotmap_destroy(&back);
    /* back again: the pieces stay apart (each keeps its version) */
    ck_assert_int_eq(zp_slotmap_dense_moved(m, "w", 100, 33, 50, 0, &m2, err, sizeof(err)), 0);
    ck_assert_int_eq(zp_slotmap_dense_moved(m2, "w", 100, 50, 67, 1, &m3, err, sizeof(err)), 0);
    pieces_text(m3, "w", 100, txt, sizeof(txt));
    ck_assert_str_eq(txt, "0-33:0 33-50:0 50-67:1 67-100:1 ");
    ck_assert_uint_eq(zp_slotmap_epoch(m3), 4);
    /* the joined shard holds nothing now and can retire; moves keep the list */
    ck_assert_int_eq(zp_slotmap_retire(m, 2, &x, err, sizeof(err)), ZEPS_EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "holds a piece of a dense table"));
    ck_assert_int_eq(zp_slotmap_retire(m3, 2, &x, err, sizeof(err)), 0);
    pieces_text(x, "w", 100, txt, sizeof(txt));
    ck_assert_str_eq(txt, "0-33:0 33-50:0 50-67:1 67-100:1 ");
    zp_slotmap_destroy(&x);
    /* refused: an empty range, past the length, another length, a bad shard */
    ck_assert_int_eq(zp_slotmap_dense_moved(m, "w", 100, 5, 5, 1, &x, err, sizeof(err)),
                     ZEPS_EINVAL);
    ck_assert_int_eq(zp_slotmap_dense_moved(m, "w", 100, 5, 101, 1, &x, err, sizeof(err)),
                     ZEPS_EINVAL);
    ck_assert_int_eq(zp_slotmap_dense_moved(m, "w", 99, 5, 10, 1, &x, err, sizeof(err)),
                     ZEPS_EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "has 100 elements in the map, not 99"));
    ck_assert_int_eq(zp_slotmap_dense_moved(m, "w", 100, 5, 10, 3, &x, err, sizeof(err)),
                     ZEPS_EINVAL);
    ck_assert_ptr_null(x);
    free(buf);
    zp_slotmap_destroy(&m3);
    zp_slotmap_destroy(&m2);
    zp_slotmap_destroy(&m);
    zp_slotmap_destroy(&j);
    zp_slotmap_destroy(&d);
}
END_TEST

/* The map of 2 base shards with [0, 10) of 'w' (100) on shard 1, encoded
 * into a fresh buffer of *n bytes (+16 spare). */
static unsigned char *dense_wire(size_t *n)
{
    zp_slotmap *d = NULL, *m = NULL;
    char err[128];
    ck_assert_int_eq(zp_slotmap_new_default(&d, 2), 0);
    ck_assert_int_eq(zp_slotmap_dense_moved(d, "w", 100, 0, 10, 1, &m, err, sizeof(err)), 0);
    *n = zp_slotmap_wire_size(m);
    unsigned char *buf = malloc(*n + 16);
    zp_slotmap_encode(m, buf);
    zp_slotmap_destroy(&m);
    zp_slotmap_destroy(&d);
    return buf;
}

static void dense_refused(const unsigned char *buf, size_t n, const char *needle)
{
    zp_slotmap *back = NULL;
    char err[256] = "";
    ck_assert_int_eq(zp_slotmap_decode(&back, buf, n, 2, err, sizeof(err)), ZEPS_EPROTO);
    ck_assert_msg(strstr(err, needle), "'%s' not in '%s'", needle, err);
    ck_assert_ptr_null(back);
}

START_TEST(test_dense_wire_refusals)
{
    size_t n;
    unsigned char *buf = dense_wire(&n);
    size_t dl = 16 + 2 * 4096 + 4 + 4; /* the dense list's start */
    ck_assert_uint_eq(n, dl + 4 + 2 + 1 + 8 + 4 + 3 * 10);
    zp_slotmap *back = NULL;
    char err[256] = "";
    ck_assert_int_eq(zp_slotmap_decode(&back, buf, n, 2, err, sizeof(err)), 0);
    zp_dense_piece p;
    ck_assert_uint_eq(zp_slotmap_dense_find(back, "w", 100, 9, &p), 0);
    ck_assert(p.lo == 0 && p.hi == 10 && p.owner == 1);
    zp_slotmap_destroy(&back);
    size_t piece = dl + 4 + 2 + 1 + 12; /* piece 0: u64 lo, u16 owner */
    buf[piece + 8] = 2;                 /* a shard the map does not have */
    dense_refused(buf, n, "piece 0 of dense table 'w' of the map: at 0 on shard 2");
    buf[piece + 8] = 1;
    buf[piece + 10] = 0; /* piece 1 at 0: not ascending */
    dense_refused(buf, n, "piece 1 of dense table 'w'");
    buf[piece + 10] = 10;
    buf[piece + 20] = 100; /* piece 2 at the length */
    dense_refused(buf, n, "piece 2 of dense table 'w'");
    buf[piece + 20] = 50;
    buf[piece - 4] = 0; /* 0 pieces */
    dense_refused(buf, n, "0 pieces of 100 elements");
    buf[piece - 4] = 3;
    buf[dl + 4] = 0; /* a name of 0 bytes */
    dense_refused(buf, n, "without a usable name");
    buf[dl + 4] = 1;
    buf[dl] = 0; /* no table */
    dense_refused(buf, n, "names 0 tables");
    buf[dl] = 1;
    dense_refused(buf, n - 1, "piece"); /* cut */
    buf[n] = 7;
    dense_refused(buf, n + 1, "1 bytes past its end");
    free(buf);
}
END_TEST

/* Two dense tables travel in the order of their names and come back both;
 * a list naming one twice, or out of order, is refused. */
START_TEST(test_dense_wire_two_tables)
{
    zp_slotmap *d = NULL, *m1 = NULL, *m2 = NULL, *back = NULL;
    char err[256] = "";
    ck_assert_int_eq(zp_slotmap_new_default(&d, 2), 0);
    ck_assert_int_eq(zp_slotmap_dense_moved(d, "b", 100, 0, 10, 1, &m1, err, sizeof(err)), 0);
    ck_assert_int_eq(zp_slotmap_dense_moved(m1, "a", 100, 0, 10, 1, &m2, err, sizeof(err)), 0);
    size_t n = zp_slotmap_wire_size(m2);
    unsigned char *buf = malloc(n);
    zp_slotmap_encode(m2, buf);
    ck_assert_int_eq(zp_slotmap_decode(&back, buf, n, 2, err, sizeof(err)), 0);
    ck_assert_uint_eq(zp_densemap_count(zp_slotmap_dense(back)), 2);
    zp_dense_piece p;
    ck_assert_uint_eq(zp_slotmap_dense_find(back, "b", 100, 9, &p), 0);
    ck_assert(p.lo == 0 && p.hi == 10 && p.owner == 1);
    zp_slotmap_destroy(&back);
    size_t name0 = 16 + 2 * 4096 + 4 + 4 + 4 + 2, name1 = name0 + 1 + 8 + 4 + 3 * 10 + 2;
    ck_assert(buf[name0] == 'a' && buf[name1] == 'b');
    buf[name1] = 'a';
    dense_refused(buf, n, "dense table 'a' of the map is out of order");
    buf[name0] = 'c';
    dense_refused(buf, n, "dense table 'a' of the map is out of order");
    free(buf);
    zp_slotmap_destroy(&m2);
    zp_slotmap_destroy(&m1);
    zp_slotmap_destroy(&d);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("slotmap");
    TCase *tc = tcase_create("slotmap");
    tcase_add_test(tc, test_default_is_hash_mod_s);
    tcase_add_test(tc, test_parse);
    tcase_add_test(tc, test_parse_refusals);
    tcase_add_test(tc, test_load_refused);
    tcase_add_test(tc, test_wire);
    tcase_add_test(tc, test_moved_set);
    tcase_add_test(tc, test_joined_wire);
    tcase_add_test(tc, test_retired_wire);
    tcase_add_test(tc, test_dense_pieces);
    tcase_add_test(tc, test_dense_wire_refusals);
    tcase_add_test(tc, test_dense_wire_two_tables);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return zt_run_suite(suite());
}
