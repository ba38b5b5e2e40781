/*
 * zt_replay.c - one worker of a fixed training run, driven from files: the
 * C side of the Python binding's "same bits" tests
 * (worker/python/tests/test_same_bits.py).
 *
 *   zt_replay RANK WORKERS STEPS N K DIM DIR endpoint...
 *
 * declares a dense table "w" of N floats (momentum, lr 0.05) and a sparse
 * table "e" of rows of DIM floats (adagrad, lr 0.1); then for clock
 * c < STEPS: pulls w at c, pushes DIR/grads.f32[c][RANK] (N floats), pulls
 * and pushes the K ids DIR/ids.u64[c][RANK] with DIR/sgrads.f32[c][RANK]
 * (K x DIM floats) through one sparse batch, and finishes the clock. At the
 * end (after a barrier) it writes the final w and the rows of every id ever
 * used to DIR/c-w-RANK.f32 and DIR/c-rows-RANK.f32. Exit 0 on success.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zeps.h"

static void *slurp(const char *dir, const char *leaf, size_t want)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, leaf);
    FILE *f = fopen(path, "rb");
    void *buf = malloc(want ? want : 1);
    if (f == NULL || buf == NULL || fread(buf, 1, want, f) != want) {
        fprintf(stderr, "zt_replay: cannot read %zu bytes of %s\n", want, path);
        exit(2);
    }
    fclose(f);
    return buf;
}

static void spit(const char *dir, const char *leaf, int rank, const void *buf, size_t len)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s-%d.f32", dir, leaf, rank);
    FILE *f = fopen(path, "wb");
    if (f == NULL || fwrite(buf, 1, len, f) != len || fclose(f) != 0) {
        fprintf(stderr, "zt_replay: cannot write %s\n", path);
        exit(2);
    }
}

static void check(int rc, const zeps_client *c, const char *what)
{
    if (rc != 0) {
        fprintf(stderr, "zt_replay: %s: %s\n", what, zeps_last_error(c));
        exit(1);
    }
}

int main(int argc, char **argv)
{
    if (argc < 9) {
        fprintf(stderr, "usage: zt_replay RANK WORKERS STEPS N K DIM DIR endpoint...\n");
        return 2;
    }
    uint32_t rank = (uint32_t)atoi(argv[1]);
    size_t W = (size_t)atoi(argv[2]), T = (size_t)atoi(argv[3]), N = (size_t)atoi(argv[4]);
    size_t K = (size_t)atoi(argv[5]), D = (size_t)atoi(argv[6]);
    const char *dir = argv[7];
    float *grads = slurp(dir, "grads.f32", T * W * N * sizeof(float));
    uint64_t *ids = slurp(dir, "ids.u64", T * W * K * sizeof(uint64_t));
    float *sgrads = slurp(dir, "sgrads.f32", T * W * K * D * sizeof(float));
    zeps_options opt = {.request_timeout_ms = 5000};
    zeps_client *c;
    if (zeps_client_new_endpoints(&c, (const char *const *)argv + 8, argc - 8, rank, &opt) != 0)
        return 1;
    zeps_table_spec ws = {.name = "w", .length = N, .optimizer = "momentum", .lr = 0.05};
    zeps_sparse_spec es = {.name = "e", .dim = (uint32_t)D, .optimizer = "adagrad", .lr = 0.1,
                           .init = "normal", .init_scale = 0.1, .seed = 9};
    uint32_t w, e;
    check(zeps_declare(c, &ws, &w), c, "declare w");
    check(zeps_declare_sparse(c, &es, &e), c, "declare e");
    float *params = malloc(N * sizeof(float)), *rows = malloc(K * D * sizeof(float));
    for (size_t t = 0; t < T; t++) {
        size_t at = t * W + rank;
        zeps_sbatch *b;
        check(zeps_pull(c, w, params, 0, N, (int64_t)t), c, "pull");
        check(zeps_push(c, w, grads + at * N, 0, N, (int64_t)t), c, "push");
        check(zeps_sbatch_new(c, e, ids + at * K, K, &b), c, "batch");
        check(zeps_sbatch_pull(b, rows, (int64_t)t), c, "sparse pull");
        check(zeps_sbatch_push(b, sgrads + at * K * D, (int64_t)t), c, "sparse push");
        zeps_sbatch_free(&b);
        check(zeps_clock(c, (int64_t)t), c, "clock");
    }
    check(zeps_barrier(c), c, "barrier");
    check(zeps_pull(c, w, params, 0, N, (int64_t)T), c, "final pull");
    spit(dir, "c-w", (int)rank, params, N * sizeof(float));
    float *all = malloc(T * W * K * D * sizeof(float));
    check(zeps_spull(c, e, ids, T * W * K, all, (int64_t)T), c, "final rows");
    spit(dir, "c-rows", (int)rank, all, T * W * K * D * sizeof(float));
    zeps_client_destroy(&c);
    free(all);
    free(params);
    free(rows);
    free(grads);
    free(ids);
    free(sgrads);
    return 0;
}
