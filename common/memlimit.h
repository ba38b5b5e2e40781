/*
 * memlimit.h - how much memory this process may use: the machine's
 * physical memory, or less when a cgroup v2 `memory.max` (or v1
 * `memory.limit_in_bytes`) of the process's cgroup or any parent says so, as under systemd's
 * MemoryMax=, a Kubernetes memory limit or a container runtime. A shard derives its default row and
 * byte limits from it (server/state/limits.c), so that a peer cannot make it grow until the
 * kernel's OOM killer ends it.
 */
#ifndef ZP_MEMLIMIT_H
#define ZP_MEMLIMIT_H

#include <stddef.h>
#include <stdint.h>

/* The limit in bytes; `from` (if not NULL) receives where it came from:
 * "physical memory" or "cgroup <dir>/memory.max". Reads /proc and /sys;
 * any thread. */
uint64_t zp_memlimit_bytes(char *from, size_t fromlen);

/* The cgroup v2 part alone, with the cgroup filesystem at `cgroup_root`,
 * the process's cgroup path `cgroup` (as in /proc/self/cgroup's "0::<path>"
 * line) and `physical` bytes of memory: for tests. */
uint64_t zp_memlimit_from(const char *cgroup_root, const char *cgroup, uint64_t physical,
                          char *from, size_t fromlen);

#endif
