/*
 * bench_push.c - what a compressed push costs a real shard: one zeps-server
 * (1 shard, the consistency mode given, sgd) and one client pushing a 1M
 * float gradient R times per codec, blocking, after W warm-up pushes. Prints
 * per codec: wire bytes per push, client pushes/s, the client's encode time
 * per push and the shard's validate+decode(+apply for sparse codecs) time
 * per push from STATS (decode_s / pushes), and the CPU time of the shard's
 * loop thread per push (from /proc/PID/schedstat: everything the shard does
 * for a push, receive, validate, decode, apply, reply).
 *
 * usage: ZEPS_BINDIR=build/bin bench_push [REPS (200)] [async|bsp|ssp] [N (1048576)]
 * Not a test: a figure for docs/compression.md.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "now.h"
#include "rng.h"
#include "zeps.h"

/* CPU time of the server's main (loop) thread in seconds. */
static double loop_cpu_s(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/schedstat", (int)pid);
    FILE *f = fopen(path, "r");
    unsigned long long ns = 0;
    if (f) {
        if (fscanf(f, "%llu", &ns) != 1)
            ns = 0;
        fclose(f);
    }
    return (double)ns * 1e-9;
}

static const Zeps__TableStats *table_stats(Zeps__ShardStats *st, const char *name)
{
    for (size_t i = 0; i < st->n_tables; i++)
        if (strcmp(st->tables[i]->name, name) == 0)
            return st->tables[i];
    return NULL;
}

int main(int argc, char **argv)
{
    int reps = argc > 1 ? atoi(argv[1]) : 200;
    const char *cons = argc > 2 ? argv[2] : "async";
    uint64_t n = argc > 3 ? strtoull(argv[3], NULL, 10) : (1u << 20);
    const int warm = 10;
    zt_cluster cl;
    if (zt_cluster_start(&cl, 1, 1, cons, NULL, NULL) != 0) {
        fprintf(stderr, "bench_push: cannot start a server (ZEPS_BINDIR?)\n");
        return 1;
    }
    zeps_client *c = zt_client(&cl, 0);
    if (!c) {
        zt_cluster_stop(&cl);
        return 1;
    }
    float *g = malloc(n * sizeof(float));
    zp_rng rng;
    zp_rng_seed(&rng, 7, 0, 0);
    for (uint64_t i = 0; i < n; i++)
        g[i] = (float)(zp_rng_normal(&rng) * 1e-3);
    static const char *const codecs[] = {"none", "fp16", "bf16", "int8", "sign", "topk", "randk"};
    printf("consistency %s, n = %llu floats, %d pushes per codec after %d warm-up\n", cons,
           (unsigned long long)n, reps, warm);
    printf("%-6s %12s %10s %12s %14s %14s\n", "codec", "wire B/push", "pushes/s", "encode us",
           "decode us", "loop cpu us");
    int64_t clock = 0;
    for (size_t k = 0; k < sizeof(codecs) / sizeof(codecs[0]); k++) {
        char name[32];
        snprintf(name, sizeof(name), "b_%s", codecs[k]);
        zeps_table_spec sp = {.name = name, .length = n, .optimizer = "sgd", .lr = 1e-6};
        uint32_t t;
        if (zeps_declare(c, &sp, &t) != 0)
            return 1;
        zeps_codec_opts o = {.codec = codecs[k], .fraction = 0.01, .error_feedback = 0};
        if (zeps_set_push_codec(c, t, &o) != 0)
            return 1;
        double t0 = 0, dec0 = 0, enc0 = 0, cpu0 = 0;
        uint64_t out0 = 0, p0 = 0;
        for (int i = 0; i < warm + reps; i++) {
            if (i == warm) {
                Zeps__ShardStats *st = zt_stats(c, 0);
                dec0 = table_stats(st, name)->decode_s;
                p0 = table_stats(st, name)->pushes;
                zeps__shard_stats__free_unpacked(st, NULL);
                zeps_client_stats cs;
                zeps_client_get_stats(c, &cs);
                enc0 = cs.encode_s;
                out0 = cs.bytes_out;
                t0 = zp_now_s();
                cpu0 = loop_cpu_s(cl.pids[0]);
            }
            /* bsp: one worker closes a round per push, clocks advance */
            if (zeps_push(c, t, g, 0, n, clock) != 0) {
                fprintf(stderr, "push: %s\n", zeps_last_error(c));
                return 1;
            }
            if (strcmp(cons, "bsp") == 0)
                clock++;
        }
        double wall = zp_now_s() - t0;
        double cpu = loop_cpu_s(cl.pids[0]) - cpu0;
        Zeps__ShardStats *st = zt_stats(c, 0);
        const Zeps__TableStats *ts = table_stats(st, name);
        double dec = ts->decode_s - dec0;
        uint64_t pushes = ts->pushes - p0;
        zeps__shard_stats__free_unpacked(st, NULL);
        zeps_client_stats cs;
        zeps_client_get_stats(c, &cs);
        printf("%-6s %12.0f %10.1f %12.1f %14.1f %14.1f\n", codecs[k],
               (double)(cs.bytes_out - out0) / reps, reps / wall, (cs.encode_s - enc0) / reps * 1e6,
               pushes ? dec / (double)pushes * 1e6 : NAN, cpu / reps * 1e6);
        fflush(stdout);
    }
    free(g);
    zeps_client_destroy(&c);
    return zt_cluster_stop(&cl) == 0 ? 0 : 1;
}
