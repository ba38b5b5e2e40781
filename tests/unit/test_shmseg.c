/*
 * test_shmseg.c - common/shmseg.c on real memfds: the client's segment
 * mapped again as the shard maps a received descriptor, payloads both ways,
 * and every refusal: a descriptor outside its area or not on a buffer, one
 * overlapping a buffer held, a stale generation (a buffer reused), a memfd
 * not sealed; buffers reused once released, kept while a request may be
 * resent.
 */
#define _GNU_SOURCE
#include <check.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check_main.h"
#include "shmseg.h"
#include "zeps_errors.h"

typedef struct pair {
    zp_shmseg *client, *shard;
} pair;

static pair make_pair(uint64_t area)
{
    pair p;
    int fd = -1;
    char err[256];
    ck_assert_int_eq(zp_shmseg_create(&p.client, &fd, area, err, sizeof(err)), 0);
    ck_assert_int_eq(zp_shmseg_attach(&p.shard, fd, err, sizeof(err)), 0);
    close(fd);
    return p;
}

static void free_pair(pair *p)
{
    zp_shmseg_unref(&p->client);
    zp_shmseg_unref(&p->shard);
}

/* The client writes `len` bytes of `byte` as a request; the descriptor. */
static zp_shm_desc put(zp_shmseg *w, size_t len, int byte, int keep)
{
    zp_shm_desc d;
    void *data;
    ck_assert_int_eq(zp_shmseg_alloc(w, len, &d, &data), 0);
    memset(data, byte, len);
    zp_shmseg_written(w, &d, keep);
    return d;
}

START_TEST(test_both_ways)
{
    pair p = make_pair(1 << 20);
    ck_assert_uint_eq(zp_shmseg_area_bytes(p.shard), 1 << 20);
    zp_shm_desc d = put(p.client, 1000, 0x5a, 1);
    const void *got;
    char err[256];
    ck_assert_int_eq(zp_shmseg_take(p.shard, &d, &got, err, sizeof(err)), 0);
    ck_assert_int_eq(((const unsigned char *)got)[999], 0x5a);
    ck_assert_int_eq(zp_shmseg_held(p.shard), 1);
    zp_shmseg_release(p.shard, got);
    ck_assert_int_eq(zp_shmseg_held(p.shard), 0);
    /* the reply area: the shard writes, the client reads */
    zp_shm_desc r;
    void *data;
    ck_assert_int_eq(zp_shmseg_alloc(p.shard, 64, &r, &data), 0);
    memcpy(data, "reply", 6);
    zp_shmseg_written(p.shard, &r, 0);
    ck_assert_int_eq(zp_shmseg_take(p.client, &r, &got, err, sizeof(err)), 0);
    ck_assert_str_eq(got, "reply");
    /* a reply never read is not reused by the shard */
    zp_shm_desc r2;
    ck_assert_int_eq(zp_shmseg_alloc(p.shard, 64, &r2, &data), 0);
    zp_shmseg_written(p.shard, &r2, 0);
    ck_assert_uint_ne(r2.offset, r.offset);
    zp_shmseg_release(p.client, got);
    free_pair(&p);
}
END_TEST

START_TEST(test_bounds)
{
    pair p = make_pair(4096 * 4);
    const void *got;
    char err[256];
    zp_shm_desc bad[] = {
        {.offset = 64, .length = 4096 * 4, .generation = 1},         /* past the end */
        {.offset = UINT64_MAX - 10, .length = 100, .generation = 1}, /* wraps */
        {.offset = 64, .length = UINT64_MAX, .generation = 1},
        {.offset = 0, .length = 8, .generation = 1},   /* no header before it */
        {.offset = 100, .length = 8, .generation = 1}, /* not aligned */
        {.offset = 64, .length = 0, .generation = 1},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        err[0] = '\0';
        ck_assert_int_eq(zp_shmseg_take(p.shard, &bad[i], &got, err, sizeof(err)), ZEPS_ESHM);
        ck_assert_msg(strstr(err, "outside") || strstr(err, "aligned"), "%zu: %s", i, err);
    }
    ck_assert_int_eq(zp_shmseg_held(p.shard), 0);
    /* a writer cannot allocate past its area: the payload goes inline */
    zp_shm_desc d;
    void *data;
    ck_assert_int_eq(zp_shmseg_alloc(p.client, 0, &d, &data), -1); /* nothing to place */
    ck_assert_int_eq(zp_shmseg_alloc(p.client, 4096 * 4, &d, &data), -1);
    ck_assert_int_eq(zp_shmseg_alloc(p.client, 4096 * 4 - 64, &d, &data), 0);
    /* a descriptor longer than its buffer */
    zp_shmseg_written(p.client, &d, 1);
    zp_shm_desc longer = d;
    longer.offset += 64;
    longer.length = 128;
    ck_assert_int_eq(zp_shmseg_take(p.shard, &longer, &got, err, sizeof(err)), ZEPS_ESHM);
    /* the buffer itself ends exactly at the area's end: taken */
    ck_assert_int_eq(zp_shmseg_take(p.shard, &d, &got, err, sizeof(err)), 0);
    zp_shmseg_release(p.shard, got);
    free_pair(&p);
}
END_TEST

START_TEST(test_overlap)
{
    pair p = make_pair(1 << 20);
    zp_shm_desc a = put(p.client, 4096, 1, 1);
    const void *got, *again;
    char err[256];
    ck_assert_int_eq(zp_shmseg_take(p.shard, &a, &got, err, sizeof(err)), 0);
    /* inside it, over its tail, or at its place with another generation */
    zp_shm_desc in = {.offset = a.offset + 1024, .length = 64, .generation = a.generation};
    zp_shm_desc tail = {.offset = a.offset + 4032, .length = 4096, .generation = 9};
    zp_shm_desc gen = {.offset = a.offset, .length = a.length, .generation = a.generation + 1};
    zp_shm_desc *bad[] = {&in, &tail, &gen};
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(zp_shmseg_take(p.shard, bad[i], &again, err, sizeof(err)), ZEPS_ESHM);
        ck_assert_msg(strstr(err, "overlaps a buffer in flight"), "%s", err);
    }
    /* a buffer that ends where the held one's header begins does not overlap it */
    zp_shm_desc b = put(p.client, 64, 2, 1), c = put(p.client, 64, 3, 1);
    ck_assert_uint_eq(c.offset, b.offset + 128);
    const void *gb, *gc;
    ck_assert_int_eq(zp_shmseg_take(p.shard, &c, &gc, err, sizeof(err)), 0);
    ck_assert_msg(zp_shmseg_take(p.shard, &b, &gb, err, sizeof(err)) == 0, "%s", err);
    zp_shmseg_release(p.shard, gb);
    zp_shmseg_release(p.shard, gc);
    /* the same descriptor again (a resend) is the same buffer */
    ck_assert_int_eq(zp_shmseg_take(p.shard, &a, &again, err, sizeof(err)), 0);
    ck_assert_ptr_eq(again, got);
    zp_shmseg_release(p.shard, got);
    ck_assert_int_eq(zp_shmseg_held(p.shard), 1);
    zp_shmseg_release(p.shard, again);
    ck_assert_int_eq(zp_shmseg_held(p.shard), 0);
    free_pair(&p);
}
END_TEST

START_TEST(test_stale_generation)
{
    pair p = make_pair(1 << 20);
    zp_shm_desc a = put(p.client, 4096, 1, 1);
    const void *got;
    char err[256];
    ck_assert_int_eq(zp_shmseg_take(p.shard, &a, &got, err, sizeof(err)), 0);
    zp_shmseg_release(p.shard, got);
    /* kept (the request is not answered): not reused, and a resend is taken */
    zp_shm_desc b = put(p.client, 4096, 2, 1);
    ck_assert_uint_ne(b.offset, a.offset);
    ck_assert_int_eq(zp_shmseg_take(p.shard, &a, &got, err, sizeof(err)), 0);
    ck_assert_int_eq(((const char *)got)[0], 1);
    zp_shmseg_release(p.shard, got);
    /* answered: the buffer is reused at a new generation */
    zp_shmseg_done(p.client, &a);
    zp_shmseg_done(p.client, &b);
    zp_shm_desc c = put(p.client, 4096, 3, 1);
    ck_assert_uint_eq(c.offset, a.offset);
    ck_assert_uint_gt(c.generation, a.generation);
    /* a late resend of the old request reads nothing */
    ck_assert_int_eq(zp_shmseg_take(p.shard, &a, &got, err, sizeof(err)), ZEPS_ESHM);
    ck_assert_msg(strstr(err, "stale"), "%s", err);
    ck_assert_int_eq(zp_shmseg_held(p.shard), 0);
    /* a generation never written */
    zp_shm_desc future = c;
    future.generation += 100;
    ck_assert_int_eq(zp_shmseg_take(p.shard, &future, &got, err, sizeof(err)), ZEPS_ESHM);
    /* a buffer the shard never took and the client gave up is reused at once */
    zp_shmseg_done(p.client, &c);
    zp_shm_desc e = put(p.client, 4096, 4, 0);
    ck_assert_uint_eq(e.offset, a.offset);
    ck_assert_int_eq(zp_shmseg_take(p.shard, &c, &got, err, sizeof(err)), ZEPS_ESHM);
    free_pair(&p);
}
END_TEST

/* A stale descriptor whose header now lies in the unwritten tail of a later,
 * smaller buffer's data: one byte written at the header's place (the state
 * byte) must not make the old generation claimable again (found by
 * fuzz_shm: the shard held free space the client then handed out). */
START_TEST(test_stale_header_under_data)
{
    pair p = make_pair(64 << 10);
    zp_shm_desc small = put(p.client, 101, 1, 1); /* two blocks of data */
    zp_shm_desc big = put(p.client, 4097, 2, 1);
    ck_assert_uint_eq(big.offset, small.offset + 192);
    zp_shmseg_done(p.client, &small);
    zp_shmseg_done(p.client, &big);
    put(p.client, 1, 3, 1); /* the first half of small's place */
    zp_shm_desc cover;
    void *data;
    ck_assert_int_eq(zp_shmseg_alloc(p.client, 2, &cover, &data), 0);
    ck_assert_uint_eq(cover.offset, big.offset - 64); /* its data holds big's header */
    ck_assert_uint_lt(big.generation, 256);
    /* the bytes of a released (DONE) buffer's state and big's generation:
     * the tag alone would read as big's (fuzz_shm's second find) */
    ((uint8_t *)data)[0] = 4;
    ((uint8_t *)data)[1] = (uint8_t)big.generation;
    zp_shmseg_written(p.client, &cover, 1);
    const void *got;
    char err[256];
    ck_assert_int_eq(zp_shmseg_take(p.shard, &big, &got, err, sizeof(err)), ZEPS_ESHM);
    ck_assert_msg(strstr(err, "longer than its buffer (0)"), "%s", err);
    ck_assert_int_eq(zp_shmseg_held(p.shard), 0);
    /* and the refusal wrote nothing into the client's data */
    ck_assert_uint_eq(((uint8_t *)data)[0], 4);
    ck_assert_uint_eq(((uint8_t *)data)[1], big.generation);
    zp_shm_desc zero = big;
    zero.generation = 0;
    ck_assert_int_eq(zp_shmseg_take(p.shard, &zero, &got, err, sizeof(err)), ZEPS_ESHM);
    ck_assert_msg(strstr(err, "generation 0"), "%s", err);
    free_pair(&p);
}
END_TEST

START_TEST(test_held_not_reused)
{
    pair p = make_pair(1 << 20);
    zp_shm_desc a = put(p.client, 8192, 1, 1);
    const void *got;
    char err[256];
    ck_assert_int_eq(zp_shmseg_take(p.shard, &a, &got, err, sizeof(err)), 0);
    zp_shmseg_done(p.client, &a); /* answered, but the shard still holds it (a bsp round) */
    zp_shm_desc b = put(p.client, 8192, 2, 1);
    ck_assert_uint_ne(b.offset, a.offset);
    ck_assert_int_eq(((const char *)got)[8191], 1);
    zp_shmseg_release(p.shard, got);
    zp_shm_desc c = put(p.client, 8192, 3, 1);
    ck_assert_uint_eq(c.offset, a.offset);
    /* a full area (b and c kept): -1, the caller sends inline */
    zp_shm_desc d;
    void *data;
    ck_assert_int_eq(zp_shmseg_alloc(p.client, (1 << 20) - 8192, &d, &data), -1);
    free_pair(&p);
}
END_TEST

/* First fit: of two freed places that both fit, the lower one is used
 * (the area stays packed at its start). */
START_TEST(test_first_fit)
{
    pair p = make_pair(1 << 20);
    zp_shm_desc a = put(p.client, 4096, 1, 1), b = put(p.client, 4096, 2, 1);
    zp_shm_desc c = put(p.client, 4096, 3, 1), d = put(p.client, 4096, 4, 1);
    ck_assert_uint_lt(a.offset, c.offset);
    zp_shmseg_done(p.client, &a);
    zp_shmseg_done(p.client, &c);
    zp_shm_desc e = put(p.client, 4096, 5, 1);
    ck_assert_uint_eq(e.offset, a.offset);
    zp_shm_desc f = put(p.client, 4096, 6, 1);
    ck_assert_uint_eq(f.offset, c.offset);
    ck_assert_int_eq(zp_shmseg_live(p.client), 4);
    (void)b;
    (void)d;
    free_pair(&p);
}
END_TEST

/* A process whose descriptor 0 is free (standard input closed) gets its
 * memfd there, and that is a segment like any other. */
START_TEST(test_descriptor_zero)
{
    pid_t kid = fork();
    ck_assert_int_ge(kid, 0);
    if (kid == 0) {
        close(0);
        zp_shmseg *g = NULL;
        int fd = -1;
        char err[256];
        int rc = zp_shmseg_create(&g, &fd, 4096, err, sizeof(err));
        _exit(rc == 0 && fd == 0 && g ? 0 : 1);
    }
    int st;
    ck_assert_int_eq(waitpid(kid, &st, 0), kid);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %d", st);
}
END_TEST

/* This process's address space in bytes (VmSize), 0 if unknown. */
static uint64_t vm_bytes(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    unsigned long long kb = 0;
    while (f && fgets(line, sizeof(line), f))
        if (sscanf(line, "VmSize: %llu kB", &kb) == 1)
            break;
    if (f)
        fclose(f);
    return (uint64_t)kb << 10;
}

/* A segment that cannot be mapped (the address space limited below its
 * size) is refused with the reason and leaves no descriptor open. */
START_TEST(test_map_failure_leaks_nothing)
{
    uint64_t vm = vm_bytes();
    ck_assert_uint_gt(vm, 0);
    struct rlimit old, lim;
    ck_assert_int_eq(getrlimit(RLIMIT_AS, &old), 0);
    lim = old;
    lim.rlim_cur = vm + (256u << 20);
    if (old.rlim_cur != RLIM_INFINITY && old.rlim_cur < lim.rlim_cur)
        lim.rlim_cur = old.rlim_cur;
    int probe = open("/dev/null", O_RDONLY | O_CLOEXEC); /* the lowest free descriptor */
    ck_assert_int_ge(probe, 0);
    close(probe);
    ck_assert_int_eq(setrlimit(RLIMIT_AS, &lim), 0);
    zp_shmseg *g = NULL;
    int fd = -1, rc;
    char err[256] = "";
    rc = zp_shmseg_create(&g, &fd, (uint64_t)1 << 30, err, sizeof(err)); /* 2 GiB mapped */
    ck_assert_int_eq(setrlimit(RLIMIT_AS, &old), 0);
    ck_assert_int_eq(rc, ZEPS_ETRANSPORT);
    ck_assert_msg(strstr(err, "mmap of"), "%s", err);
    ck_assert_ptr_null(g);
    int next = open("/dev/null", O_RDONLY | O_CLOEXEC);
    ck_assert_int_eq(next, probe); /* the memfd was closed */
    close(next);
}
END_TEST

START_TEST(test_unsealed_refused)
{
    int fd = memfd_create("zeps-test", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(ftruncate(fd, 4096 * 3), 0);
    zp_shmseg *g = NULL;
    char err[256];
    ck_assert_int_eq(zp_shmseg_attach(&g, fd, err, sizeof(err)), ZEPS_EPROTO);
    ck_assert_msg(strstr(err, "not sealed"), "%s", err);
    ck_assert_int_eq(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW), 0);
    ck_assert_int_eq(zp_shmseg_attach(&g, fd, err, sizeof(err)), ZEPS_EPROTO); /* no head */
    ck_assert_ptr_null(g);
    close(fd);
    ck_assert_int_eq(zp_shmseg_attach(&g, 0, err, sizeof(err)) != 0, 1); /* not a memfd */
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("shmseg");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_both_ways);
    tcase_add_test(tc, test_bounds);
    tcase_add_test(tc, test_overlap);
    tcase_add_test(tc, test_stale_generation);
    tcase_add_test(tc, test_stale_header_under_data);
    tcase_add_test(tc, test_held_not_reused);
    tcase_add_test(tc, test_unsealed_refused);
    tcase_add_test(tc, test_map_failure_leaks_nothing);
    tcase_add_test(tc, test_first_fit);
    tcase_add_test(tc, test_descriptor_zero);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return zt_run_suite(suite());
}
