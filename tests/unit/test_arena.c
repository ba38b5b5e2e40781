/*
 * test_arena.c - common/alloc.c's huge-page arrays and common/arena.c:
 * alignment, where small sizes go, pieces carved back to back, a new
 * mapping when one is full, and the advice the kernel was given (read back
 * from /proc/self/smaps).
 */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "arena.h"
#include "check_main.h"

/* The VmFlags line of the mapping that holds p contains "hg" (MADV_HUGEPAGE). */
static int advised_huge(const void *p)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    ck_assert_ptr_nonnull(f);
    char line[512];
    int in = 0, found = -1;
    while (fgets(line, sizeof(line), f) && found < 0) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' '))
            in = (uintptr_t)p >= lo && (uintptr_t)p < hi;
        else if (in && strncmp(line, "VmFlags:", 8) == 0)
            found = strstr(line, " hg") != NULL;
    }
    fclose(f);
    return found;
}

START_TEST(test_huge_alignment)
{
    size_t n = ZP_ALLOC_HUGE_MIN * 3 + 4096;
    char *p = zp_alloc_huge(n);
    ck_assert_uint_eq((uintptr_t)p % ZP_ALLOC_HUGE_MIN, 0);
    memset(p, 0x5a, n); /* all of it is usable */
    ck_assert_int_eq(p[n - 1], 0x5a);
    ck_assert_int_eq(advised_huge(p), 1);
    zp_alloc_huge_free(p, n);
    char *small = zp_alloc_huge(1000); /* from malloc */
    memset(small, 1, 1000);
    ck_assert_int_eq(advised_huge(small), 0);
    zp_alloc_huge_free(small, 1000);
    zp_alloc_huge_free(NULL, n);
}
END_TEST

START_TEST(test_arena_back_to_back)
{
    zp_arena a = {0};
    char *first = zp_arena_take(&a, 3 << 20);
    char *second = zp_arena_take(&a, 100); /* rounded up to 64 */
    char *third = zp_arena_take(&a, 64);
    ck_assert_uint_eq((uintptr_t)first % ZP_ALLOC_HUGE_MIN, 0);
    ck_assert_ptr_eq(second, first + (3 << 20));
    ck_assert_ptr_eq(third, second + 128);
    ck_assert_uint_eq(a.nregions, 1);
    ck_assert_int_eq(advised_huge(first), 1);
    /* what does not fit in the region left gets a new mapping */
    char *big = zp_arena_take(&a, ZP_ARENA_REGION - (3 << 20));
    ck_assert_uint_eq(a.nregions, 2);
    ck_assert_uint_eq((uintptr_t)big % ZP_ALLOC_HUGE_MIN, 0);
    big[ZP_ARENA_REGION - (3 << 20) - 1] = 7;
    /* larger than a region: a mapping of its own size */
    char *huge = zp_arena_take(&a, ZP_ARENA_REGION + 1);
    ck_assert_uint_eq(a.nregions, 3);
    ck_assert_uint_ge(a.lens[2], ZP_ARENA_REGION + 1);
    huge[ZP_ARENA_REGION] = 1;
    zp_arena_fini(&a);
    ck_assert_uint_eq(a.nregions, 0);
    ck_assert_ptr_null(a.regions);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("arena");
    TCase *tc = tcase_create("arena");
    tcase_add_test(tc, test_huge_alignment);
    tcase_add_test(tc, test_arena_back_to_back);
    suite_add_tcase(s, tc);
    return zt_run_suite(s);
}
