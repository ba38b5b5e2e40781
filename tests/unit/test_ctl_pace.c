/*
 * test_ctl_pace.c - the pace of a move's copy (worker/ctl/ctl_pace.c,
 * zepsctl shards move --max-mb-s) on a clock the test sets: the wait it
 * asks for given the pages of the last second and those in flight, the
 * sliding second, a page bigger than the limit, the ring when full, and
 * --max-mb-s's values.
 */
#include <check.h>
#include <math.h>

#include "check_main.h"
#include "ctl_pace.h"

#define MB 1000000ull

/* Unlimited: never a wait, whatever went. */
START_TEST(test_unlimited)
{
    zp_ctl_pace p;
    zp_ctl_pace_init(&p, 0);
    for (int i = 0; i < 100; i++)
        zp_ctl_pace_note(&p, 0.001 * i, 10 * MB);
    ck_assert(zp_ctl_pace_wait(&p, 0.1, 3) == 0);
    ck_assert_uint_eq(p.peak, 1000 * MB);
}
END_TEST

/* 10 MB/s, pages of 1 MB: ten go at once, the eleventh waits until the
 * first leaves the sliding second; pages in flight count as the last. */
START_TEST(test_window)
{
    zp_ctl_pace p;
    zp_ctl_pace_init(&p, 10);
    ck_assert(zp_ctl_pace_wait(&p, 0, 0) == 0); /* nothing known: ask one */
    ck_assert(zp_ctl_pace_wait(&p, 0, 1) > 0);  /* not two before a size is known */
    for (int i = 0; i < 9; i++) {
        zp_ctl_pace_note(&p, 0.1 * i, MB);
        ck_assert_msg(zp_ctl_pace_wait(&p, 0.1 * i, 0) == 0, "page %d", i + 2);
    }
    /* 9 MB in the window: one more fits, not two (one in flight) */
    ck_assert(zp_ctl_pace_wait(&p, 0.85, 1) > 0);
    zp_ctl_pace_note(&p, 0.9, MB);
    ck_assert_uint_eq(zp_ctl_pace_bytes(&p, 0.9), 10 * MB);
    double w = zp_ctl_pace_wait(&p, 0.9, 0); /* until the page of t=0 leaves: t=1.0 */
    ck_assert_msg(fabs(w - 0.1) < 1e-9, "wait %f", w);
    w = zp_ctl_pace_wait(&p, 0.9, 2); /* 3 more: until the pages of 0, 0.1, 0.2 leave */
    ck_assert_msg(fabs(w - 0.3) < 1e-9, "wait %f", w);
    ck_assert(zp_ctl_pace_wait(&p, 1.0, 0) == 0); /* the window slid */
    ck_assert_uint_eq(zp_ctl_pace_bytes(&p, 1.0), 9 * MB);
    ck_assert_uint_eq(zp_ctl_pace_bytes(&p, 2.0), 0);
    ck_assert_uint_eq(p.peak, 10 * MB);
}
END_TEST

/* A schedule that obeys every wait: no sliding second ever holds more
 * than the limit, and the bytes take at least (total - limit) / limit s. */
START_TEST(test_schedule)
{
    zp_ctl_pace p;
    zp_ctl_pace_init(&p, 4);
    double now = 0;
    uint64_t sent = 0, page = 300000;
    int inflight = 0;
    while (sent < 20 * MB) {
        double w;
        while ((w = zp_ctl_pace_wait(&p, now, inflight)) > 0) { /* as zp_ctl_pace_ask */
            ck_assert(w <= 1.0);
            now += w;
            p.slept += w;
        }
        zp_ctl_pace_note(&p, now, page); /* each page arrives as it is asked */
        sent += page;
        now += 0.001;
        ck_assert_msg(p.peak <= 4 * MB, "a second held %llu bytes", (unsigned long long)p.peak);
    }
    ck_assert_msg(now >= (20.0 - 4) / 4 - 0.1, "20 MB at 4 MB/s in %.2f s", now);
    ck_assert_msg(now <= 20.0 / 4 + 0.5, "20 MB at 4 MB/s took %.2f s: too slow", now);
    ck_assert(p.slept > 3.5);
}
END_TEST

/* A page over the limit goes once the window is empty, at most a second
 * later; a full ring counts a page with the newest. */
START_TEST(test_big_page_and_full_ring)
{
    zp_ctl_pace p;
    zp_ctl_pace_init(&p, 1);
    zp_ctl_pace_note(&p, 5.0, 3 * MB);
    double w = zp_ctl_pace_wait(&p, 5.2, 0);
    ck_assert_msg(fabs(w - 0.8) < 1e-9, "wait %f", w);
    ck_assert(zp_ctl_pace_wait(&p, 6.0, 0) == 0);
    ck_assert(zp_ctl_pace_wait(&p, 6.0, 1) > 0); /* not a second one while the first flies */
    zp_ctl_pace_note(&p, 6.5, 0);                /* an empty page: the estimate stays 3 MB */
    ck_assert(zp_ctl_pace_wait(&p, 6.5, 0) == 0);
    ck_assert(zp_ctl_pace_wait(&p, 6.5, 1) > 0);

    zp_ctl_pace_init(&p, 1000);
    for (int i = 0; i < ZP_PACE_LOG + 10; i++)
        zp_ctl_pace_note(&p, 0.001 * i, 1000);
    ck_assert_int_eq(p.n, ZP_PACE_LOG);
    ck_assert_uint_eq(zp_ctl_pace_bytes(&p, 0.5), (ZP_PACE_LOG + 10) * 1000ull);
    ck_assert_uint_eq(zp_ctl_pace_bytes(&p, 1.27), 0);
}
END_TEST

/* A short page (a round's tail) counts the pages in flight after it as
 * full pages of its rows, not as itself: the full pages of the next round
 * would pass the limit. */
START_TEST(test_short_page)
{
    zp_ctl_pace p;
    zp_ctl_pace_init(&p, 10);
    zp_ctl_pace_note_rows(&p, 0, 2 * MB, 100, 100);  /* full pages of 100 rows, 2 MB */
    zp_ctl_pace_note_rows(&p, 0.1, MB / 5, 10, 100); /* the tail: 10 rows */
    ck_assert_uint_eq(zp_ctl_pace_bytes(&p, 0.1), 2 * MB + MB / 5);
    ck_assert(zp_ctl_pace_wait(&p, 1.2, 4) == 0); /* the window slid: 5 pages of 2 MB fit */
    ck_assert(zp_ctl_pace_wait(&p, 1.2, 5) > 0);  /* 6 do not */
    zp_ctl_pace_note_rows(&p, 2.0, 0, 0, 100);    /* an empty page: the estimate stays */
    ck_assert(zp_ctl_pace_wait(&p, 2.0, 5) > 0);
}
END_TEST

/* --max-mb-s: numbers >= 0; text, negatives, NaN, inf and empty refused. */
START_TEST(test_parse)
{
    double v = -1;
    ck_assert_int_eq(zp_ctl_pace_parse("10", &v), 0);
    ck_assert(v == 10);
    ck_assert_int_eq(zp_ctl_pace_parse("0.5", &v), 0);
    ck_assert(v == 0.5);
    ck_assert_int_eq(zp_ctl_pace_parse("0", &v), 0);
    ck_assert(v == 0);
    const char *bad[] = {"-1", "nan", "NaN", "inf", "", "ten", "10MB", "1e7", " "};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        v = 7;
        ck_assert_msg(zp_ctl_pace_parse(bad[i], &v) == -1, "'%s' taken", bad[i]);
        ck_assert(v == 7);
    }
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("ctl_pace");
    TCase *tc = tcase_create("pace");
    tcase_add_test(tc, test_unlimited);
    tcase_add_test(tc, test_window);
    tcase_add_test(tc, test_schedule);
    tcase_add_test(tc, test_big_page_and_full_ring);
    tcase_add_test(tc, test_short_page);
    tcase_add_test(tc, test_parse);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return zt_run_suite(suite());
}
