/*
 * zepsctl.c - entry point of the operator tool: dispatches to the
 * subcommands in ctl_*.c.
 */
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "alloc.h"
#include "ctl.h"
#include "exitcode.h"
#include "wire.h"
#include "zeps.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: zepsctl <command> [options]\n"
               "\n"
               "commands:\n"
               "  local    run a whole cluster (servers + workers) on this machine\n"
               "  status   ask every shard of a cluster for its state\n"
               "  stats    status plus staleness histograms (tau, clock gap, pull wait)\n"
               "  bench    zeps vs raw ZeroMQ throughput and latency on loopback\n"
               "  study    staleness sweeps (quadratic; any model with --model)\n"
               "  scale    strong scaling: speedup, efficiency, waiting, alpha-beta fit\n"
               "  snapshot inspect, take or reshard snapshots (inspect|take|reshard)\n"
               "  gen-criteo write a Criteo-format data set from a hidden model\n"
               "  keygen   write a CurveZMQ key pair for a server or worker\n"
               "  evict    release a worker rank so a new process may take it over\n"
               "  shards   move slots between running shards (shards move, shards rebalance)\n"
               "  version  print the version\n"
               "\n"
               "'zepsctl <command> --help' describes a command's options.\n");
}

char *zp_zepsctl_bindir(char *buf, unsigned long len)
{
    ssize_t n = readlink("/proc/self/exe", buf, len - 1);
    if (n <= 0) {
        buf[0] = '\0';
        return buf;
    }
    buf[n] = '\0';
    char *slash = strrchr(buf, '/');
    if (slash)
        *slash = '\0';
    return buf;
}

/* `zepsctl version`: no options but --help, which prints the version too. */
static int version(int argc, char **argv)
{
    if (argc > 2 || (argc == 2 && strcmp(argv[1], "--help") != 0 && strcmp(argv[1], "-h") != 0)) {
        fprintf(stderr, "zepsctl version: unexpected argument '%s' (it takes none)\n", argv[1]);
        return ZP_EXIT_SETUP;
    }
    printf("zepsctl %s (protocol %d)\n", ZEPS_VERSION_STRING, ZP_PROTOCOL_VERSION);
    return ZP_EXIT_OK;
}

int main(int argc, char **argv)
{
    zp_alloc_tune();
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "local") == 0)
        return zp_ctl_local(argc - 1, argv + 1);
    if (strcmp(cmd, "status") == 0)
        return zp_ctl_status(argc - 1, argv + 1);
    if (strcmp(cmd, "stats") == 0)
        return zp_ctl_status_stats(argc - 1, argv + 1);
    if (strcmp(cmd, "snapshot") == 0)
        return zp_ctl_snapshot(argc - 1, argv + 1);
    if (strcmp(cmd, "study") == 0)
        return zp_ctl_study(argc - 1, argv + 1);
    if (strcmp(cmd, "scale") == 0)
        return zp_ctl_scale(argc - 1, argv + 1);
    if (strcmp(cmd, "gen-criteo") == 0)
        return zp_ctl_gen_criteo(argc - 1, argv + 1);
    if (strcmp(cmd, "evict") == 0)
        return zp_ctl_evict(argc - 1, argv + 1);
    if (strcmp(cmd, "shards") == 0)
        return zp_ctl_shards(argc - 1, argv + 1);
    if (strcmp(cmd, "keygen") == 0)
        return zp_ctl_keygen(argc - 1, argv + 1);
    if (strcmp(cmd, "bench") == 0)
        return zp_ctl_bench(argc - 1, argv + 1);
    if (strcmp(cmd, "version") == 0 || strcmp(cmd, "--version") == 0)
        return version(argc - 1, argv + 1);
    if (strcmp(cmd, "help") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0) {
        usage(stdout);
        return 0;
    }
    fprintf(stderr, "zepsctl: unknown command '%s'\n", cmd);
    usage(stderr);
    return 2;
}
