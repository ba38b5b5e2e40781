/*
 * ctl_bench_mem.c - `zepsctl bench --transport shm`: the ceiling and the
 * verdict. The memcpy side copies the payload of each request between two
 * buffers of this process on one thread (what a shared-memory path cannot
 * beat: every byte a push or a pull moves is written once at least); it
 * runs through the same loops as zeps and raw ZeroMQ, interleaved with
 * them per repetition, so all three see the same machine. The table set
 * zeps over shared memory against it and against raw ZeroMQ over ipc://
 * (the fastest socket path between two processes here).
 */
#include <stdlib.h>
#include <string.h>

#include "ctl_bench.h"
#include "zeps.pb-c.h"

#define SHM_AIM_MEMCPY 0.5 /* push+pull at 32 MB against one thread's memcpy: at least */

/* "1523", or "5.8" below 100 */
static const char *mbs_str(double v, char *buf)
{
    snprintf(buf, 16, v < 100 ? "%.1f" : "%.0f", v);
    return buf;
}

static void mem_select(void *ctx, int i, size_t bytes)
{
    (void)i;
    ((mem_side *)ctx)->bytes = bytes;
}

static int mem_start(void *ctx, int op, int slot)
{
    mem_side *m = ctx;
    if (op == OP_PUSH)
        memcpy(m->b[slot], m->a[slot], m->bytes);
    else
        memcpy(m->a[slot], m->b[slot], m->bytes);
    return 0;
}

static int mem_finish(void *ctx, int op, int slot)
{
    (void)ctx;
    (void)op;
    (void)slot;
    return 0;
}

const side_ops zp_ctl_bench_mem_ops = {
    .name = "memcpy",
    .select = mem_select,
    .start = mem_start,
    .finish = mem_finish,
};

int zp_ctl_bench_mem_check(bench *b)
{
    void *buf = NULL;
    size_t len = 0;
    int rc = zeps_stats_raw(b->z.c, 0, &buf, &len);
    Zeps__ShardStats *st = rc == 0 ? zeps__shard_stats__unpack(NULL, len, buf) : NULL;
    free(buf);
    bool shm = false;
    for (size_t i = 0; st && i < st->n_workers; i++)
        shm |= st->workers[i]->rank == 0 && strcmp(st->workers[i]->transport, "shm") == 0;
    if (st)
        zeps__shard_stats__free_unpacked(st, NULL);
    if (shm)
        return 0;
    fprintf(stderr, "bench: the zeps client is not on shared memory (its shard's STATS says "
                    "otherwise); see the server's log\n");
    b->o.keep = true;
    return ZEPS_ETRANSPORT;
}

void zp_ctl_bench_mem_print(const bench *b)
{
    char lbl[32], m[5][16];
    printf("\nshared memory against its ceilings, same run: memcpy = one thread copying the\n"
           "same bytes in this process; raw = ZeroMQ DEALER/ROUTER over ipc://\n");
    printf("%7s | %8s %8s %8s %8s | %-13s | %-13s\n", "", "zeps", "zeps", "memcpy", "raw ipc",
           "zeps/memcpy", "zeps/raw ipc");
    printf("%7s | %8s %8s %8s %8s | %6s %6s | %6s %6s\n", "size", "push+pl", "+view", "MB/s",
           "push+pl", "copy", "view", "copy", "view");
    for (int si = 0; si < b->o.nsizes; si++) {
        const double *z = b->res[si][SIDE_ZEPS].v, *c = b->res[si][SIDE_MEM].v,
                     *r = b->res[si][SIDE_RAW].v;
        printf("%7s | %8s %8s %8s %8s | %6.2f %6.2f | %6.2f %6.2f\n",
               size_label(b->o.sizes[si], lbl, sizeof lbl), mbs_str(z[F_BOTH], m[0]),
               mbs_str(z[F_BOTH_VIEW], m[1]), mbs_str(c[F_BOTH], m[2]), mbs_str(r[F_BOTH], m[3]),
               ratio(z[F_BOTH], c[F_BOTH]), ratio(z[F_BOTH_VIEW], c[F_BOTH]),
               ratio(z[F_BOTH], r[F_BOTH]), ratio(z[F_BOTH_VIEW], r[F_BOTH]));
    }
    for (int si = 0; si < b->o.nsizes; si++) {
        const double *z = b->res[si][SIDE_ZEPS].v, *c = b->res[si][SIDE_MEM].v,
                     *r = b->res[si][SIDE_RAW].v;
        if (b->o.sizes[si] == 64)
            printf("  64 B push round trip p50: zeps %.0f µs, raw ZeroMQ ipc:// %.0f µs "
                   "(the aim: zeps <= raw): %s\n",
                   z[F_PUSH_P50], r[F_PUSH_P50],
                   z[F_PUSH_P50] <= r[F_PUSH_P50] ? "met" : "not met");
        if (b->o.sizes[si] == (32u << 20))
            printf("  32 MB push+pull / memcpy: %.3f copying, %.3f with views (the aim: >= %.1f): "
                   "%s\n",
                   ratio(z[F_BOTH], c[F_BOTH]), ratio(z[F_BOTH_VIEW], c[F_BOTH]), SHM_AIM_MEMCPY,
                   ratio(z[F_BOTH], c[F_BOTH]) >= SHM_AIM_MEMCPY ? "met" : "not met");
    }
}

void zp_ctl_bench_mem_json(const bench *b, FILE *f, int si)
{
    const double *z = b->res[si][SIDE_ZEPS].v, *c = b->res[si][SIDE_MEM].v,
                 *r = b->res[si][SIDE_RAW].v;
    fprintf(f,
            "      \"shm\": {\"push_pull_vs_memcpy\": %.3f, \"push_pull_view_vs_memcpy\": %.3f, "
            "\"push_rtt_p50_vs_raw_ipc\": %.3f},\n",
            ratio(z[F_BOTH], c[F_BOTH]), ratio(z[F_BOTH_VIEW], c[F_BOTH]),
            ratio(z[F_PUSH_P50], r[F_PUSH_P50]));
}
