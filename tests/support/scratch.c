/*
 * scratch.c - the tests' scratch root; see scratch.h.
 */
#define _GNU_SOURCE /* program_invocation_short_name, nftw */
#include "scratch.h"

#include <check.h>
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char root[512];

static const char *tmp_base(void)
{
    const char *t = getenv("TMPDIR");
    return t && *t ? t : "/tmp";
}

int zt_scratch_begin(void)
{
    snprintf(root, sizeof(root), "%s/zt-%.24s-XXXXXX", tmp_base(), program_invocation_short_name);
    if (!mkdtemp(root)) {
        root[0] = '\0';
        return -1;
    }
    setenv("ZT_SCRATCH_ROOT", root, 1);
    return 0;
}

static int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    remove(path);
    return 0;
}

void zt_scratch_end(void)
{
    if (!root[0])
        return;
    const char *keep = getenv("ZEPS_TEST_KEEP");
    if (keep && *keep)
        printf("kept %s\n", root);
    else
        nftw(root, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    unsetenv("ZT_SCRATCH_ROOT");
    root[0] = '\0';
}

void zt_scratch_path(char *buf, size_t len, const char *name)
{
    const char *r = getenv("ZT_SCRATCH_ROOT");
    snprintf(buf, len, "%s/%s", r && *r ? r : tmp_base(), name);
}

int zt_scratch_dir(char *buf, size_t len, const char *name)
{
    char n[128];
    snprintf(n, sizeof(n), "%s-XXXXXX", name);
    zt_scratch_path(buf, len, n);
    return mkdtemp(buf) ? 0 : -1;
}

int zt_scratch_remove(const char *dir)
{
    nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    return access(dir, F_OK) == 0 ? -1 : 0;
}

int zt_scratch_file(char *buf, size_t len, const char *name)
{
    char n[128];
    snprintf(n, sizeof(n), "%s-XXXXXX", name);
    zt_scratch_path(buf, len, n);
    int fd = mkstemp(buf);
    if (fd < 0)
        return -1;
    close(fd);
    return 0;
}

void zt_scratch_write(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    ck_assert_msg(f != NULL, "%s: %s", path, strerror(errno));
    fputs(text, f);
    ck_assert_int_eq(fclose(f), 0);
}
