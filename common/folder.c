/*
 * folder.c - see folder.h. mkdir one level at a time (as mkdir -p), then a
 * probe file made with mkstemp and removed at once.
 */
#include "folder.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "errors.h"
#include "zeps_errors.h"

/* mkdir -p `dir`; returns 0 or -1 with errno of the step that failed and
 * the path of that step in `at`. */
static int make_path(const char *dir, char *at, size_t atlen)
{
    snprintf(at, atlen, "%s", dir);
    for (char *p = at + 1;; p++) {
        char c = *p;
        if (c != '/' && c != '\0')
            continue;
        *p = '\0';
        struct stat st;
        if (mkdir(at, 0750) != 0 && errno != EEXIST)
            return -1;
        if (stat(at, &st) != 0)
            return -1;
        if (!S_ISDIR(st.st_mode)) {
            errno = ENOTDIR;
            return -1;
        }
        if (c == '\0')
            return 0;
        *p = '/';
    }
}

int zp_folder_ready(const char *key, const char *dir, char *err, size_t errlen)
{
    char at[4096], probe[4200];
    if (!dir[0])
        return zp_errors_set(err, errlen, ZEPS_ECONFIG, "%s is empty", key);
    if (strlen(dir) >= sizeof(at) - 32)
        return zp_errors_set(err, errlen, ZEPS_ECONFIG, "%s '%s' is too long", key, dir);
    if (make_path(dir, at, sizeof(at)) != 0) {
        int e = errno;
        if (strcmp(at, dir) == 0)
            return zp_errors_set(err, errlen, ZEPS_ECONFIG, "%s '%s' cannot be made a folder: %s",
                                 key, dir,
                                 e == ENOTDIR ? "a file of that name exists" : strerror(e));
        return zp_errors_set(err, errlen, ZEPS_ECONFIG, "%s '%s' cannot be made: %s: %s", key, dir,
                             at, e == ENOTDIR ? "a file, not a folder" : strerror(e));
    }
    snprintf(probe, sizeof(probe), "%s/.zeps-write-test-XXXXXX", dir);
    int fd = mkstemp(probe);
    if (fd < 0)
        return zp_errors_set(err, errlen, ZEPS_ECONFIG,
                             "%s '%s' is not writable: creating a file there failed: %s", key, dir,
                             strerror(errno));
    close(fd);
    unlink(probe);
    return 0;
}

void zp_folder_remove_flat(const char *dir)
{
    DIR *d = opendir(dir);
    if (d == NULL)
        return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
            unlinkat(dirfd(d), e->d_name, 0);
    closedir(d);
    rmdir(dir);
}
