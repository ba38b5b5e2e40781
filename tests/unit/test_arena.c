/*
 * test_arena.c - common/alloc.c's huge-page arrays and common/arena.c:
 * alignment, where small sizes go, pieces carved back to back, a new
 * mapping when one is full, and the advice the kernel was given (read back
 * from /proc/self/smaps); and an array that zp_alloc_grow grows. A huge
 * array keeps only its own length mapped (the rest of the span it was cut
 * from is given back), and after zp_alloc_tune another thread's
 * allocations come from the one arena.
 */
#include <check.h>
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

/* zp_alloc_grow keeps the elements it had and zeroes the new ones, even
 * where the block it grows in place held other bytes. */
START_TEST(test_grow_zeroes_the_new)
{
    uint32_t *a = zp_alloc(100 * sizeof(*a));
    memset(a, 0xa5, 100 * sizeof(*a));
    a = zp_alloc_resize(a, 3 * sizeof(*a)); /* glibc shrinks in place: 0xa5 beyond */
    a[0] = 7, a[1] = 8, a[2] = 9;
    a = zp_alloc_grow(a, 3, 100, sizeof(*a));
    ck_assert(a[0] == 7 && a[1] == 8 && a[2] == 9);
    for (int i = 3; i < 100; i++)
        ck_assert_msg(a[i] == 0, "element %d: 0x%x", i, a[i]);
    a = zp_alloc_grow(a, 100, 100, sizeof(*a)); /* no growth: nothing changes */
    ck_assert_uint_eq(a[2], 9);
    free(a);
    uint64_t *b = zp_alloc_grow(NULL, 0, 5, sizeof(*b));
    for (int i = 0; i < 5; i++)
        ck_assert_uint_eq(b[i], 0);
    free(b);
}
END_TEST

/* The process's mapped bytes (VmSize, in KiB), read without allocating. */
static long vm_kib(void)
{
    char buf[4096];
    int fd = open("/proc/self/status", O_RDONLY);
    ck_assert_int_ge(fd, 0);
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    ck_assert_int_gt(n, 0);
    buf[n] = '\0';
    const char *v = strstr(buf, "VmSize:");
    ck_assert_ptr_nonnull(v);
    return strtol(v + 7, NULL, 10);
}

/* A huge array maps its length rounded up to 2 MiB, no more: the head and
 * the tail of the span it was aligned in are unmapped, and its free gives
 * back the rest. */
START_TEST(test_huge_maps_its_length)
{
    size_t n = ZP_ALLOC_HUGE_MIN * 3 + 4096; /* 4 huge pages */
    for (int i = 0; i < 3; i++) {
        long before = vm_kib();
        char *p = zp_alloc_huge(n);
        long held = vm_kib() - before;
        p[n - 1] = 1;
        zp_alloc_huge_free(p, n);
        long after = vm_kib() - before;
        ck_assert_msg(held == (long)(4 * ZP_ALLOC_HUGE_MIN / 1024),
                      "a huge array of %zu bytes mapped %ld KiB", n, held);
        ck_assert_msg(after == 0, "%ld KiB left mapped after its free", after);
    }
}
END_TEST

static void *take_mib(void *arg)
{
    char *p = malloc(1 << 20);
    memset(p, 1, 1 << 20);
    *(char **)arg = p;
    return NULL;
}

/* The arenas glibc's allocator has (malloc_info lists one <heap> each). */
static int arenas(void)
{
    char *xml = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&xml, &len);
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(malloc_info(0, f), 0);
    fclose(f);
    int n = 0;
    for (const char *q = xml; (q = strstr(q, "<heap nr=")); q++)
        n++;
    free(xml);
    return n;
}

/* After zp_alloc_tune, a thread's allocations come from the one arena
 * (ZeroMQ's I/O thread would otherwise get its own: alloc.c says why). */
START_TEST(test_threads_share_the_arena)
{
#ifdef __SANITIZE_ADDRESS__
    return; /* the sanitizer's allocator has no arenas */
#endif
    zp_alloc_tune();
    char *p = NULL;
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, take_mib, &p), 0);
    ck_assert_int_eq(pthread_join(t, NULL), 0);
    ck_assert_int_eq(arenas(), 1);
    free(p);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("arena");
    TCase *tc = tcase_create("arena");
    tcase_add_test(tc, test_huge_alignment);
    tcase_add_test(tc, test_arena_back_to_back);
    tcase_add_test(tc, test_grow_zeroes_the_new);
    tcase_add_test(tc, test_huge_maps_its_length);
    tcase_add_test(tc, test_threads_share_the_arena);
    suite_add_tcase(s, tc);
    return zt_run_suite(s);
}
