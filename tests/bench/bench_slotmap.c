/*
 * bench_slotmap.c - what placing an id by the slot map costs against
 * `hash mod S` (docs/elastic.md, "Cost"): both over the same 4 Mi random
 * ids, interleaved, best of 7, for S = 2 and 3. libzeps does this once per
 * distinct id of a batch when the cluster has more than one shard.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "slotmap.h"
#include "sparse_hash.h"

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(void)
{
    enum { N = 1 << 22, REPS = 7 };
    uint64_t *ids = malloc(N * sizeof(uint64_t));
    uint32_t *out = malloc(N * sizeof(uint32_t));
    if (!ids || !out)
        return 1;
    uint64_t x = 88172645463325252ull, sink = 0;
    for (int i = 0; i < N; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        ids[i] = x;
    }
    printf("S  hash mod S (ns/id)  slot map (ns/id)  ratio\n");
    for (int S = 2; S <= 3; S++) {
        zp_slotmap *m = NULL;
        if (zp_slotmap_new_default(&m, S) != 0)
            return 1;
        double a = 1e9, b = 1e9;
        for (int rep = 0; rep < REPS; rep++) {
            double t0 = now_s();
            for (int i = 0; i < N; i++)
                out[i] = (uint32_t)zp_sparse_shard_of(ids[i], S);
            double t1 = now_s();
            for (int i = 0; i < N; i++)
                sink += out[i];
            double t2 = now_s();
            for (int i = 0; i < N; i++)
                out[i] = (uint32_t)zp_slotmap_owner(m, ids[i]);
            double t3 = now_s();
            for (int i = 0; i < N; i++)
                sink -= out[i];
            a = t1 - t0 < a ? t1 - t0 : a;
            b = t3 - t2 < b ? t3 - t2 : b;
        }
        printf("%d  %18.2f  %16.2f  %5.2f\n", S, a / N * 1e9, b / N * 1e9, b / a);
        zp_slotmap_destroy(&m);
    }
    free(ids);
    free(out);
    return sink == 0 ? 0 : 1; /* the same owners both ways */
}
