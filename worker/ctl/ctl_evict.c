/*
 * ctl_evict.c - zepsctl evict RANK: release a worker rank on every shard.
 *
 * A shard refuses a HELLO from a new incarnation of a rank whose current
 * incarnation was heard from within its lease (docs/faults.md, "Two
 * processes with one rank"). When the operator knows the old process is
 * gone (or must go), this tells every shard to let the next new
 * incarnation take the rank at once; the old one's requests are refused
 * from then on.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl.h"
#include "zeps.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: zepsctl evict RANK --config FILE\n"
               "\n"
               "Release worker RANK on every shard: the next HELLO of a new process with\n"
               "that rank takes it even though the old one was heard from within its lease.\n");
}

int zp_ctl_evict(int argc, char **argv)
{
    const char *conf = NULL, *rank_text = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--config") == 0 && i + 1 < argc)
            conf = argv[++i];
        else if (strcmp(argv[i], "--help") == 0) {
            usage(stdout);
            return 0;
        } else if (!rank_text && argv[i][0] != '-')
            rank_text = argv[i];
        else {
            usage(stderr);
            return 2;
        }
    }
    char *end = NULL;
    unsigned long rank = rank_text ? strtoul(rank_text, &end, 10) : 0;
    if (!conf || !rank_text || *end != '\0' || rank >= ZEPS_RANK_TOOL) {
        usage(stderr);
        return 2;
    }
    zeps_client *c;
    if (zeps_client_new(&c, conf, ZEPS_RANK_TOOL) != 0) {
        fprintf(stderr, "zepsctl evict: cannot reach the cluster of %s\n", conf);
        return 1;
    }
    int rc = zeps_evict(c, (uint32_t)rank);
    if (rc != 0)
        fprintf(stderr, "zepsctl evict: %s\n", zeps_last_error(c));
    else
        printf("worker %lu released on %d shard(s): a new process with that rank may say HELLO\n",
               rank, zeps_num_shards(c));
    zeps_client_destroy(&c);
    return rc == 0 ? 0 : 1;
}
