/*
 * test_folder.c - common/folder.c and common/exitcode.c in process: a
 * missing folder made with its parents (and left without the probe file),
 * an existing one accepted, a file in the way or on the path refused with
 * the key, the folder and the reason; the exit status of each kind of
 * start-up failure. A folder that exists but cannot take a file needs a
 * read-only mount (root ignores mode bits): ctest exit_codes covers it.
 */
#define _GNU_SOURCE
#include <check.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "check_main.h"
#include "scratch.h"
#include "exitcode.h"
#include "folder.h"
#include "zeps_errors.h"

static char base[160];

static void make_base(void)
{
    ck_assert_int_eq(zt_scratch_dir(base, sizeof(base), "folder"), 0);
}

static void remove_base(void)
{
    char cmd[256];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", base);
    ck_assert_int_eq(system(cmd), 0);
}

static int is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static int entries(const char *path)
{
    DIR *d = opendir(path);
    int n = 0;
    ck_assert_ptr_nonnull(d);
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    closedir(d);
    return n;
}

START_TEST(test_made_with_parents)
{
    make_base();
    char dir[256], err[512] = "";
    snprintf(dir, sizeof(dir), "%s/a/b/c", base);
    ck_assert_int_eq(zp_folder_ready("trace_dir", dir, err, sizeof(err)), 0);
    ck_assert(is_dir(dir));
    ck_assert_int_eq(entries(dir), 0); /* the probe file is gone */
    /* again: it exists now, and a trailing slash changes nothing */
    strcat(dir, "/");
    ck_assert_int_eq(zp_folder_ready("trace_dir", dir, err, sizeof(err)), 0);
    remove_base();
}
END_TEST

START_TEST(test_file_in_the_way)
{
    make_base();
    char file[256], under[288], err[512] = "";
    snprintf(file, sizeof(file), "%s/f", base);
    FILE *f = fopen(file, "w");
    ck_assert_ptr_nonnull(f);
    fclose(f);
    ck_assert_int_eq(zp_folder_ready("snapshot_dir", file, err, sizeof(err)), ZEPS_ECONFIG);
    ck_assert_msg(strstr(err, "snapshot_dir '") && strstr(err, file) &&
                      strstr(err, "a file of that name exists"),
                  "%s", err);
    snprintf(under, sizeof(under), "%s/x/y", file);
    ck_assert_int_eq(zp_folder_ready("result_dir", under, err, sizeof(err)), ZEPS_ECONFIG);
    ck_assert_msg(strstr(err, "result_dir '") && strstr(err, under) &&
                      strstr(err, "a file, not a folder"),
                  "%s", err);
    remove_base();
}
END_TEST

/* A folder name of n bytes under base: components of 200 bytes. */
static void long_name(char *dir, size_t n)
{
    size_t at = (size_t)snprintf(dir, n + 1, "%s", base);
    while (at < n) {
        dir[at++] = '/';
        for (int k = 0; k < 200 && at < n; k++)
            dir[at++] = 'a';
    }
    if (dir[n - 1] == '/')
        dir[n - 1] = 'b'; /* a name, not a trailing slash */
    dir[n] = '\0';
}

/* The longest folder name taken is 4,063 bytes (room for the probe file
 * under PATH_MAX); one byte more is refused as too long. */
START_TEST(test_name_length_edge)
{
    make_base();
    char dir[4100], err[8192] = "";
    long_name(dir, 4064);
    ck_assert_int_eq(zp_folder_ready("trace_dir", dir, err, sizeof(err)), ZEPS_ECONFIG);
    ck_assert_msg(strstr(err, "is too long"), "%s", err);
    ck_assert(!is_dir(base) || entries(base) == 0); /* nothing made */
    long_name(dir, 4063);
    ck_assert_int_eq(zp_folder_ready("trace_dir", dir, err, sizeof(err)), 0);
    ck_assert(is_dir(dir));
    remove_base();
}
END_TEST

START_TEST(test_exit_statuses)
{
    ck_assert_int_eq(zp_exitcode_startup(ZEPS_OK), ZP_EXIT_OK);
    /* what the operator must fix: 2, so systemd does not restart it */
    const int fix[] = {ZEPS_ECONFIG, ZEPS_EIO,   ZEPS_EDATA,    ZEPS_ETRANSPORT,
                       ZEPS_EINVAL,  ZEPS_ERANK, ZEPS_EREFUSED, ZEPS_EVERSION};
    for (size_t i = 0; i < sizeof(fix) / sizeof(fix[0]); i++)
        ck_assert_msg(zp_exitcode_startup(fix[i]) == ZP_EXIT_SETUP, "%s", zeps_errname(fix[i]));
    /* what a restart may cure: 1 */
    const int retry[] = {ZEPS_ENOMEM, ZEPS_EINTERNAL, ZEPS_ETIMEDOUT, ZEPS_ECLOSED,
                         ZEPS_ERESTARTED};
    for (size_t i = 0; i < sizeof(retry) / sizeof(retry[0]); i++)
        ck_assert_msg(zp_exitcode_startup(retry[i]) == ZP_EXIT_FAILED, "%s",
                      zeps_errname(retry[i]));
    ck_assert_int_eq(ZP_EXIT_SETUP, 2);
    ck_assert_int_eq(ZP_EXIT_DIVERGED, 3);
    ck_assert_int_eq(ZP_EXIT_STOPPED, 143);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("folder");
    TCase *tc = tcase_create("folder");
    tcase_add_test(tc, test_made_with_parents);
    tcase_add_test(tc, test_file_in_the_way);
    tcase_add_test(tc, test_name_length_edge);
    tcase_add_test(tc, test_exit_statuses);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return zt_run_suite(suite());
}
