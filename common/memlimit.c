/*
 * memlimit.c - the memory this process may use; see memlimit.h. cgroup v2
 * (`memory.max`, Debian 12 and current Kubernetes nodes) and, on hosts
 * that still mount it, v1 (`memory.limit_in_bytes` under .../memory, whose
 * "no limit" is a huge number that the physical memory undercuts); a
 * missing or unreadable file just means "no limit there".
 */
#include "memlimit.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The limit file `name` of one cgroup directory: its bytes, or 0 for
 * "max" / none. */
static uint64_t read_max(const char *dir, const char *name)
{
    char path[4096], text[64];
    if (snprintf(path, sizeof(path), "%s/%s", dir, name) >= (int)sizeof(path))
        return 0;
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    uint64_t v = 0;
    if (fgets(text, sizeof(text), f) && strncmp(text, "max", 3) != 0)
        v = strtoull(text, NULL, 10);
    fclose(f);
    return v;
}

/* The smallest limit `name` of cgroup `cgroup` and its parents under
 * `root`, if below *best (then `from` names it). */
static void walk(const char *root, const char *cgroup, const char *name, uint64_t *best, char *from,
                 size_t fromlen)
{
    char dir[4096];
    if (snprintf(dir, sizeof(dir), "%s%s", root, cgroup ? cgroup : "") >= (int)sizeof(dir))
        return;
    size_t rootlen = strlen(root);
    while (strlen(dir) > rootlen) { /* the root's own file is no limit */
        uint64_t v = read_max(dir, name);
        if (v && v < *best) {
            *best = v;
            if (from && fromlen)
                snprintf(from, fromlen, "cgroup %s/%s", dir, name);
        }
        char *slash = strrchr(dir, '/');
        if (!slash || (size_t)(slash - dir) < rootlen)
            break;
        *slash = '\0';
    }
}

uint64_t zp_memlimit_from(const char *cgroup_root, const char *cgroup, uint64_t physical,
                          char *from, size_t fromlen)
{
    uint64_t best = physical;
    if (from && fromlen)
        snprintf(from, fromlen, "physical memory");
    walk(cgroup_root, cgroup, "memory.max", &best, from, fromlen);
    return best;
}

/* The cgroup paths of this process: v2 ("0::/a/b" in /proc/self/cgroup)
 * and v1's memory controller ("N:memory:/a/b"); "" when absent or "/". */
static void own_cgroups(char *v2, char *v1, size_t cap)
{
    v2[0] = v1[0] = '\0';
    FILE *f = fopen("/proc/self/cgroup", "r");
    if (!f)
        return;
    char line[4096];
    while (fgets(line, sizeof(line), f)) {
        line[strcspn(line, "\n")] = '\0';
        const char *p = NULL;
        char *out = NULL;
        if (strncmp(line, "0::", 3) == 0) {
            p = line + 3;
            out = v2;
        } else if ((p = strstr(line, ":memory:")) != NULL) {
            p += strlen(":memory:");
            out = v1;
        }
        if (out && snprintf(out, cap, "%s", strcmp(p, "/") == 0 ? "" : p) >= (int)cap)
            out[0] = '\0'; /* a path that long: read no limit there */
    }
    fclose(f);
}

uint64_t zp_memlimit_bytes(char *from, size_t fromlen)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    uint64_t physical = pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : 1ull << 30;
    char v2[2048], v1[2048];
    own_cgroups(v2, v1, sizeof(v2));
    uint64_t best = zp_memlimit_from("/sys/fs/cgroup", v2, physical, from, fromlen);
    walk("/sys/fs/cgroup/memory", v1, "memory.limit_in_bytes", &best, from, fromlen);
    return best;
}
