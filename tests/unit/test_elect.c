/*
 * test_elect.c - the coordination layer's pure parts (server/coord/):
 * who may be elected (elect.c) and what the shard's nodes hold (znode.c),
 * without a service.
 */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "check_main.h"
#include "elect.h"
#include "zeps_errors.h"
#include "znode.h"

static zp_znode_isr isr_of(int n, const char *const *m)
{
    zp_znode_isr s = {.epoch = 3, .n = n};
    for (int i = 0; i < n; i++)
        strcpy(s.m[i], m[i]);
    return s;
}

/* Sequence numbers decide, not the order of the list nor the session part
 * of the name; before the first election anyone may win. */
START_TEST(test_pick_lowest_sequence)
{
    const char *live[] = {"m-1f-0000000012", "m-2-0000000009", "m-3a-0000000010"};
    zp_znode_isr none = isr_of(0, NULL);
    ck_assert_int_eq(zp_elect_pick(live, 3, &none), 1);
    const char *in[] = {"m-3a-0000000010", "m-1f-0000000012"};
    zp_znode_isr s = isr_of(2, in);
    ck_assert_int_eq(zp_elect_pick(live, 3, &s), 2);
    const char *gone[] = {"m-77-0000000001"};
    s = isr_of(1, gone);
    ck_assert_int_eq(zp_elect_pick(live, 3, &s), -1); /* no in-sync replica alive */
    ck_assert_int_eq(zp_elect_pick(live, 0, &none), -1);
    /* ZooKeeper numbers the first member 0; the lowest first in the list
     * stays the pick */
    const char *first[] = {"m-5-0000000000", "m-6-0000000004", "m-7-0000000002"};
    ck_assert_int_eq(zp_elect_pick(first, 3, &none), 0);
    const char *lowest_first[] = {"m-5-0000000003", "m-6-0000000004", "m-7-0000000005"};
    ck_assert_int_eq(zp_elect_pick(lowest_first, 3, &none), 0);
}
END_TEST

/* Every replica of the shard lost its session at once (a stalled
 * ZooKeeper, a paused host) and made its member node again: the in-sync
 * set still names the old nodes, and the same processes (the same
 * incarnation, the part before the sequence number) are eligible under
 * their new nodes; a process the set does not name is not. */
START_TEST(test_pick_after_every_session_expired)
{
    const char *before[] = {"m-3a-0000000001", "m-1f-0000000002"};
    zp_znode_isr s = isr_of(2, before);
    const char *again[] = {"m-1f-0000000007", "m-3a-0000000008", "m-99-0000000006"};
    ck_assert_int_eq(zp_elect_pick(again, 3, &s), 0); /* m-99 is lower, not in the set */
    ck_assert(zp_elect_in_isr(&s, "m-3a-0000000008"));
    ck_assert(!zp_elect_in_isr(&s, "m-3-0000000001")); /* a shorter incarnation */
    ck_assert(!zp_elect_in_isr(&s, "m-3ab-0000000001"));
    ck_assert(!zp_znode_same_process("m-3a-0000000001", "m-3a0000000001"));
    const char *restarted[] = {"m-4b-0000000009", "m-5c-0000000010"};
    ck_assert_int_eq(zp_elect_pick(restarted, 2, &s), -1); /* new processes: waits */
    /* the next set names the live nodes, the new primary first */
    zp_znode_isr n;
    zp_elect_next_isr(&n, &s, again, 3, "m-1f-0000000007", 5);
    ck_assert_int_eq(n.n, 2);
    ck_assert_str_eq(n.m[0], "m-1f-0000000007");
    ck_assert_str_eq(n.m[1], "m-3a-0000000008");
}
END_TEST

START_TEST(test_next_isr)
{
    const char *live[] = {"m-1-0000000002", "m-2-0000000003"};
    const char *old[] = {"m-0-0000000001", "m-1-0000000002", "m-2-0000000003"};
    zp_znode_isr o = isr_of(3, old), n;
    zp_elect_next_isr(&n, &o, live, 2, "m-2-0000000003", 4);
    ck_assert_uint_eq(n.epoch, 4);
    ck_assert_int_eq(n.n, 2);
    ck_assert_str_eq(n.m[0], "m-2-0000000003"); /* the new primary first */
    ck_assert_str_eq(n.m[1], "m-1-0000000002");

    /* a new primary outside a full set: the next set stays within its
     * ZP_COORD_ISR_MAX names */
    static char names[ZP_COORD_ISR_MAX + 1][ZP_COORD_MEMBER_MAX];
    const char *all[ZP_COORD_ISR_MAX + 1];
    for (int i = 0; i <= ZP_COORD_ISR_MAX; i++) {
        snprintf(names[i], sizeof(names[i]), "m-%x-%010d", i + 1, i);
        all[i] = names[i];
    }
    zp_znode_isr full = isr_of(ZP_COORD_ISR_MAX, all);
    zp_elect_next_isr(&n, &full, all, ZP_COORD_ISR_MAX + 1, names[ZP_COORD_ISR_MAX], 5);
    ck_assert_int_eq(n.n, ZP_COORD_ISR_MAX);
    ck_assert_str_eq(n.m[0], names[ZP_COORD_ISR_MAX]);
}
END_TEST

START_TEST(test_formats)
{
    zp_znode_paths p;
    char err[256];
    ck_assert_int_eq(zp_znode_paths_make(&p, "prod-1", 2, err, sizeof(err)), 0);
    ck_assert_str_eq(p.primary, "/zeps/prod-1/shards/2/primary");
    ck_assert_str_eq(p.members, "/zeps/prod-1/shards/2/members");
    ck_assert_int_eq(zp_znode_paths_make(&p, "..", 0, err, sizeof(err)), ZEPS_ECONFIG);
    ck_assert_int_eq(zp_znode_paths_make(&p, ".", 0, err, sizeof(err)), ZEPS_ECONFIG);
    ck_assert_int_eq(zp_znode_paths_make(&p, "a b", 0, err, sizeof(err)), ZEPS_ECONFIG);
    /* every edge of the name's characters and length */
    ck_assert_int_eq(zp_znode_paths_make(&p, "azAZ09._-", 0, err, sizeof(err)), 0);
    const char *bad[] = {"`", "{", "@", "[", "/", ":", "a/b"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        ck_assert_msg(zp_znode_paths_make(&p, bad[i], 0, err, sizeof(err)) == ZEPS_ECONFIG,
                      "cluster name '%s' accepted", bad[i]);
    char longest[66];
    memset(longest, 'n', 64);
    longest[64] = '\0';
    ck_assert_int_eq(zp_znode_paths_make(&p, longest, 0, err, sizeof(err)), 0);
    longest[64] = 'n';
    longest[65] = '\0';
    ck_assert_int_eq(zp_znode_paths_make(&p, longest, 0, err, sizeof(err)), ZEPS_ECONFIG);

    ck_assert_int_eq(zp_znode_seq("m-ab-0000000042"), 42);
    ck_assert_int_eq(zp_znode_seq("x-ab-0000000042"), -1);
    ck_assert_int_eq(zp_znode_seq("m-ab-"), -1);

    char buf[512];
    zp_znode_primary pr = {.epoch = 7,
                           .member = "m-9-0000000001",
                           .replica = 1,
                           .endpoint = "tcp://h:1"},
                     back;
    ck_assert_int_eq(zp_znode_primary_format(buf, sizeof(buf), &pr), 0);
    ck_assert_int_eq(zp_znode_primary_parse(buf, (int)strlen(buf), &back), 0);
    ck_assert_uint_eq(back.epoch, 7);
    ck_assert_str_eq(back.member, pr.member);
    ck_assert_str_eq(back.endpoint, "tcp://h:1");
    /* ZooKeeper numbers the first member 0; replica 0 is a replica */
    ck_assert_int_eq(zp_znode_primary_parse("7 m-9-0000000000 0 tcp://h:1", 28, &back), 0);
    ck_assert_int_eq(back.replica, 0);
    ck_assert_int_eq(zp_znode_primary_parse("7 m-9-0000000001 -1 tcp://h:1", 29, &back),
                     ZEPS_EPROTO);
    ck_assert_int_eq(zp_znode_primary_parse("7 m-9-0000000001 1", 18, &back), ZEPS_EPROTO);
    ck_assert_int_eq(zp_znode_primary_parse("7 m-9-1 1 e x", 13, &back), ZEPS_EPROTO);

    const char *m[] = {"m-1-0000000002", "m-2-0000000003"};
    zp_znode_isr s = isr_of(2, m), t;
    ck_assert_int_eq(zp_znode_isr_format(buf, sizeof(buf), &s), 0);
    ck_assert_str_eq(buf, "3 m-1-0000000002 m-2-0000000003");
    ck_assert_int_eq(zp_znode_isr_parse(buf, (int)strlen(buf), &t), 0);
    ck_assert_int_eq(t.n, 2);
    ck_assert_str_eq(t.m[1], "m-2-0000000003");
    ck_assert_int_eq(zp_znode_isr_parse("0", 1, &t), 0);
    ck_assert_int_eq(t.n, 0);
    ck_assert_int_eq(zp_znode_isr_parse("x", 1, &t), ZEPS_EPROTO);
    ck_assert_int_eq(zp_znode_isr_parse("1 bad", 5, &t), ZEPS_EPROTO);
    /* a member name fills ZP_COORD_MEMBER_MAX with its NUL, not more */
    char isr_text[160], name[ZP_COORD_MEMBER_MAX + 2];
    memset(name, '7', sizeof(name));
    memcpy(name, "m-", 2);
    name[ZP_COORD_MEMBER_MAX - 12] = '-';
    name[ZP_COORD_MEMBER_MAX - 1] = '\0'; /* 63 characters */
    snprintf(isr_text, sizeof(isr_text), "1 %s", name);
    ck_assert_int_eq(zp_znode_isr_parse(isr_text, (int)strlen(isr_text), &t), 0);
    name[ZP_COORD_MEMBER_MAX - 1] = '7';
    name[ZP_COORD_MEMBER_MAX] = '\0'; /* 64 */
    snprintf(isr_text, sizeof(isr_text), "1 %s", name);
    ck_assert_int_eq(zp_znode_isr_parse(isr_text, (int)strlen(isr_text), &t), ZEPS_EPROTO);

    uint64_t e;
    ck_assert_int_eq(zp_znode_epoch_parse("12", 2, &e), 0);
    ck_assert_uint_eq(e, 12);
    ck_assert_int_eq(zp_znode_epoch_parse("-1", 2, &e), ZEPS_EPROTO);
    ck_assert_int_eq(zp_znode_epoch_parse("", 0, &e), ZEPS_EPROTO);
}
END_TEST

/* The clean-exit rule: only at the record's epoch, only a member that
 * restored exactly its snapshot, the lowest sequence of those. */
START_TEST(test_pick_clean)
{
    const char *live[] = {"m-a1-0000000007", "m-b2-0000000005", "m-c3-0000000006"};
    const char *snap = "0000000000000010-00000000000000a1-1700000000000000000";
    const char *other = "0000000000000010-00000000000000a1-1700000000000000001";
    const char *restored[] = {snap, other, snap};
    zp_znode_clean c = {.epoch = 3};
    snprintf(c.member, sizeof(c.member), "m-d4-0000000001");
    snprintf(c.snapshot, sizeof(c.snapshot), "%s", snap);
    zp_elect_clean_why why;
    /* members 0 and 2 restored it; 2 has the lower sequence */
    ck_assert_int_eq(zp_elect_pick_clean(live, restored, 3, &c, 3, &why), 2);
    ck_assert_int_eq(why, ZP_ELECT_CLEAN_OK);
    /* a record of an older epoch (a later primary may have acknowledged more) */
    ck_assert_int_eq(zp_elect_pick_clean(live, restored, 3, &c, 4, &why), -1);
    ck_assert_int_eq(why, ZP_ELECT_CLEAN_VOID);
    /* no record */
    ck_assert_int_eq(zp_elect_pick_clean(live, restored, 3, NULL, 3, &why), -1);
    ck_assert_int_eq(why, ZP_ELECT_CLEAN_NONE);
    /* nobody restored that file (another creation time of the same set, or nothing) */
    const char *none[] = {"", other, ""};
    ck_assert_int_eq(zp_elect_pick_clean(live, none, 3, &c, 3, &why), -1);
    ck_assert_int_eq(why, ZP_ELECT_CLEAN_NO_MATCH);
}
END_TEST

/* The member node's and the clean-exit record's text, and what is refused. */
START_TEST(test_clean_formats)
{
    char buf[400];
    zp_znode_member m = {.replica = 1}, mb;
    snprintf(m.endpoint, sizeof(m.endpoint), "tcp://127.0.0.1:5600");
    ck_assert_int_eq(zp_znode_member_format(buf, sizeof(buf), &m), 0);
    ck_assert_str_eq(buf, "1 tcp://127.0.0.1:5600 -");
    ck_assert_int_eq(zp_znode_member_parse(buf, (int)strlen(buf), &mb), 0);
    ck_assert_str_eq(mb.restored, "");
    snprintf(m.restored, sizeof(m.restored), "00000000000000ff-0000000000000abc-12");
    ck_assert_int_eq(zp_znode_member_format(buf, sizeof(buf), &m), 0);
    ck_assert_int_eq(zp_znode_member_parse(buf, (int)strlen(buf), &mb), 0);
    ck_assert_str_eq(mb.restored, m.restored);
    ck_assert_str_eq(mb.endpoint, m.endpoint);
    /* a buffer one byte short of the text and its NUL: refused, not cut */
    size_t need = strlen(buf) + 1;
    ck_assert_int_eq(zp_znode_member_format(buf, need - 1, &m), ZEPS_EINVAL);
    ck_assert_int_eq(zp_znode_member_format(buf, need, &m), 0);
    ck_assert_str_eq(buf, "1 tcp://127.0.0.1:5600 00000000000000ff-0000000000000abc-12");
    const char *bad_members[] = {"1 tcp://x", "1 tcp://x SNAP", "-1 tcp://x -", "1 tcp://x - z"};
    for (size_t i = 0; i < sizeof(bad_members) / sizeof(bad_members[0]); i++)
        ck_assert_int_eq(zp_znode_member_parse(bad_members[i], (int)strlen(bad_members[i]), &mb),
                         ZEPS_EPROTO);

    zp_znode_clean c = {.epoch = 7}, cb;
    snprintf(c.member, sizeof(c.member), "m-ab-0000000003");
    snprintf(c.snapshot, sizeof(c.snapshot), "00000000000000ff-0000000000000abc-12");
    ck_assert_int_eq(zp_znode_clean_format(buf, sizeof(buf), &c), 0);
    ck_assert_str_eq(buf, "7 m-ab-0000000003 00000000000000ff-0000000000000abc-12");
    ck_assert_int_eq(zp_znode_clean_format(buf, strlen(buf), &c), ZEPS_EINVAL);
    ck_assert_int_eq(zp_znode_clean_format(buf, sizeof(buf), &c), 0);
    ck_assert_int_eq(zp_znode_clean_parse(buf, (int)strlen(buf), &cb), 0);
    ck_assert_uint_eq(cb.epoch, 7);
    ck_assert_str_eq(cb.member, c.member);
    ck_assert_str_eq(cb.snapshot, c.snapshot);
    const char *bad[] = {"",
                         "7",
                         "7 m-ab-0000000003",
                         "7 m-ab-0000000003 -",
                         "7 x 00ff-1-2",
                         "-7 m-ab-0000000003 00ff-1-2",
                         "7 m-ab-0000000003 00FF-1-2",
                         "7 m-ab-0000000003 00ff-1-2 extra"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        ck_assert_msg(zp_znode_clean_parse(bad[i], (int)strlen(bad[i]), &cb) == ZEPS_EPROTO,
                      "accepted '%s'", bad[i]);
    snprintf(c.snapshot, sizeof(c.snapshot), "-");
    ck_assert_int_eq(zp_znode_clean_format(buf, sizeof(buf), &c), ZEPS_EINVAL);

    char name[ZP_COORD_SNAP_MAX];
    zp_coord_snapshot_name(name, sizeof(name), 0x10, 0xa1, 1700000000000000000ull);
    ck_assert_str_eq(name, "0000000000000010-00000000000000a1-1700000000000000000");
    zp_coord_snapshot_name(name, sizeof(name), UINT64_MAX, UINT64_MAX, UINT64_MAX);
    ck_assert_uint_lt(strlen(name), ZP_COORD_SNAP_MAX - 1);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("elect");
    TCase *tc = tcase_create("pure");
    tcase_add_test(tc, test_pick_lowest_sequence);
    tcase_add_test(tc, test_pick_after_every_session_expired);
    tcase_add_test(tc, test_next_isr);
    tcase_add_test(tc, test_formats);
    tcase_add_test(tc, test_pick_clean);
    tcase_add_test(tc, test_clean_formats);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return zt_run_suite(suite());
}
