/*
 * test_redirect.c - the client's rule for a piece refused by a shard
 * behind the map it was split by (worker/lib/redirect.c,
 * docs/elastic.md "A shard behind the map"), on a client struct made by
 * hand: no shard, no socket. zp_redirect_take is given EMOVED frames that
 * carry a map of a chosen epoch and says whether the piece goes again,
 * and when (split_ns).
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "check_main.h"
#include "client.h"
#include "now.h"
#include "redirect.h"
#include "slotmap.h"

#define MS 1000000ull

typedef struct fixture {
    zeps_client c;
    zp_slotmap *mine; /* the client's map (c.slots), epoch 1 */
    zp_req *req;
    zp_req_sub parent, *s;
    uint32_t table_ids[2];
    unsigned char raw[64];
} fixture;

/* A client of 2 shards at epoch 1 and a push piece split by it. */
static void setup(fixture *f)
{
    memset(f, 0, sizeof(*f));
    zp_slotmap *d = NULL;
    uint8_t which[4096] = {1};
    ck_assert_int_eq(zp_slotmap_new_default(&d, 2), 0);
    ck_assert_int_eq(zp_slotmap_moved(d, which, 1, &f->mine), 0); /* slot 0 to shard 1 */
    zp_slotmap_destroy(&d);
    ck_assert_uint_eq(zp_slotmap_epoch(f->mine), 1);
    f->c.nshards = 2;
    f->c.ndense = 2;
    f->c.opt.request_timeout_ms = 1000;
    f->c.slots = f->mine;
    f->req = calloc(1, sizeof(zp_req) + sizeof(zp_req_sub));
    f->req->op = ZEPS__OP__PUSH;
    f->s = &f->req->subs[0];
    f->s->req = f->req;
    f->s->parent = &f->parent;
    f->s->split_epoch = 1;
    f->s->resend.table_ids = f->table_ids;
    f->s->resend.raw = f->raw;
}

static void teardown(fixture *f)
{
    zp_slotmap_destroy(&f->c.slots);
    free(f->req);
}

/* EMOVED frames carrying shard 1's map of `epoch`: the default one (0),
 * the client's (1), or one newer (2: slot 1 to shard 1 as well). */
static void emoved(zp_frames *m, uint64_t epoch)
{
    zp_slotmap *d = NULL, *map = NULL;
    uint8_t which[4096] = {1}; /* slot 0, then slot 2: shard 0's by default */
    ck_assert_int_eq(zp_slotmap_new_default(&d, 2), 0);
    if (epoch > 0) {
        ck_assert_int_eq(zp_slotmap_moved(d, which, 1, &map), 0);
        zp_slotmap_destroy(&d);
    } else {
        map = d;
    }
    if (epoch > 1) {
        which[0] = 0;
        which[2] = 1;
        d = map;
        ck_assert_int_eq(zp_slotmap_moved(d, which, 1, &map), 0);
        zp_slotmap_destroy(&d);
    }
    ck_assert_uint_eq(zp_slotmap_epoch(map), epoch);
    memset(m, 0, sizeof(*m));
    m->n = 2;
    zmq_msg_init_size(&m->f[0], 1);
    zmq_msg_init_size(&m->f[1], zp_slotmap_wire_size(map));
    zp_slotmap_encode(map, zmq_msg_data(&m->f[1]));
    zp_slotmap_destroy(&map);
}

static int take(fixture *f, uint64_t epoch)
{
    zp_frames m;
    emoved(&m, epoch);
    int rc = zp_redirect_take(&f->c, 1, f->s, &m);
    zmq_msg_close(&m.f[0]);
    zmq_msg_close(&m.f[1]);
    return rc;
}

/* A piece refused by an older map goes again after 2 ms, then 4, 8 ...
 * (at most 256), not counted as a redirect; once request_timeout_ms has
 * passed since the first refusal, it does not. */
START_TEST(test_behind_waits_doubling)
{
    fixture f;
    setup(&f);
    for (int i = 0; i < 10; i++) {
        uint64_t t0 = zp_now_ns();
        ck_assert_int_eq(take(&f, 0), 1);
        uint64_t want = (2 * MS) << (i < 7 ? i : 7);
        ck_assert_uint_ge(f.s->split_ns, t0 + want);
        ck_assert_uint_le(f.s->split_ns, zp_now_ns() + want);
        ck_assert_int_eq(f.s->behind, i + 1);
    }
    ck_assert_uint_eq(f.c.stats.slot_redirects, 0);
    ck_assert_uint_ne(f.s->behind_ns, 0); /* the budget runs from the first refusal */
    ck_assert_ptr_eq(f.c.slots, f.mine);      /* never back to an older map */
    f.s->behind_ns = zp_now_ns() - 1000 * MS; /* the budget spent */
    ck_assert_int_eq(take(&f, 0), 0);
    teardown(&f);
}
END_TEST

/* Refused at the piece's own epoch (shards that disagree): not again; by
 * a newer map: again at once, counted; a piece that cannot be split
 * (no table ids: the error reaches the caller) never waits. */
START_TEST(test_same_newer_unsplittable)
{
    fixture f;
    setup(&f);
    ck_assert_int_eq(take(&f, 1), 0);
    ck_assert_int_eq(f.s->behind, 0);
    f.s->resend.table_ids = NULL;
    ck_assert_int_eq(take(&f, 0), 0);
    f.s->resend.table_ids = f.table_ids;
    f.s->split_ns = 12345;
    ck_assert_int_eq(take(&f, 2), 1);
    ck_assert_uint_eq(f.s->split_ns, 0);
    ck_assert_uint_eq(f.c.stats.slot_redirects, 1);
    ck_assert_uint_eq(zp_slotmap_epoch(f.c.slots), 2);
    teardown(&f);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("redirect");
    TCase *tc = tcase_create("redirect");
    tcase_add_test(tc, test_behind_waits_doubling);
    tcase_add_test(tc, test_same_newer_unsplittable);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return zt_run_suite(suite());
}
