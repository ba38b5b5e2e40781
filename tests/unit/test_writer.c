/*
 * test_writer.c - the snapshot writer child of a shard in process
 * (server/state/persist.c).
 *
 * The child keeps no descriptor of the shard's: a pipe's write end open in
 * the parent when the writer forks must reach EOF once the parent closes
 * it, while the child still runs (it waits here on the manifest lock the
 * test holds). A child that kept the shard's descriptors kept its
 * listening socket too, so a shard SIGKILLed while a writer ran could not
 * be restarted on its address ("Address already in use") until the writer
 * finished.
 */
#include <check.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/file.h>
#include <unistd.h>

#include "check_main.h"
#include "inproc.h"
#include "persist.h"

START_TEST(test_child_closes_inherited)
{
    char dir[] = "/tmp/zeps-writer-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    zp_config *cfg = zt_config("async", 1, 1);
    snprintf(cfg->snapshot_dir, sizeof(cfg->snapshot_dir), "%s", dir);
    zt_shard *z = zt_shard_start(cfg, 0);
    zt_hello(z, 0);
    zt_declare(z, 0, "w", 16, 1.0);

    char lock[256];
    snprintf(lock, sizeof(lock), "%s/MANIFEST.lock", dir);
    int lfd = open(lock, O_RDWR | O_CREAT, 0644);
    ck_assert_int_ge(lfd, 0);
    ck_assert_int_eq(flock(lfd, LOCK_EX), 0); /* the child will wait for it */
    int p[2];
    ck_assert_int_eq(pipe(p), 0); /* stands for the shard's sockets */

    ck_assert_int_eq(zp_persist_start(z->s, -1, 7, "test"), 0);
    close(p[1]);
    struct pollfd pfd = {.fd = p[0], .events = POLLIN};
    int ready = poll(&pfd, 1, 3000);
    char c;
    ssize_t n = ready == 1 ? read(p[0], &c, 1) : -1;
    ck_assert_int_eq(flock(lfd, LOCK_UN), 0);
    close(lfd);
    ck_assert_msg(ready == 1 && n == 0,
                  "the writer child still holds a descriptor of its parent (poll %d, read %zd)",
                  ready, n);
    close(p[0]);

    zp_persist_reap(z->s, 1);
    ck_assert_uint_eq(z->s->persist.written, 1); /* and it wrote its set */
    zt_shard_free(z);
    char rm[300];
    snprintf(rm, sizeof(rm), "rm -rf %s", dir);
    ck_assert_int_eq(system(rm), 0);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("writer");
    TCase *tc = tcase_create("writer");
    tcase_add_test(tc, test_child_closes_inherited);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return zt_run_suite(suite());
}
