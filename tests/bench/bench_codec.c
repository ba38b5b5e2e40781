/*
 * bench_codec.c - throughput of the gradient codecs (common/codec/), the
 * figures docs/compression.md cites. Not a test: it asserts nothing.
 *
 * For 1M and 16M gaussian f32 values and default parameters (int8 block
 * 256, topk/randk fraction 0.01), it times encode, validate, decode and
 * decode_add of each codec and prints GB/s of the f32 input (4n bytes per
 * call, 10^9 B/s), best of a few runs, and the payload size relative to
 * raw f32. Two composite operations follow what zeps does per message:
 * ef_enc is a push with error feedback (zp_codec_ef_encode: r += g, encode,
 * r -= decoded), and pull is what a shard does for a compressed pull
 * (delta = params - view, encode, view += decoded). "saved" is the share of
 * bytes a message of that codec does not send. Usage: bench_codec [reps]
 * (default 5).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "codec.h"
#include "now.h"
#include "rng.h"

typedef struct bench_ctx {
    const zp_codec_ops *c;
    const zp_codec_params *p;
    const float *x;
    size_t n, len;
    unsigned char *buf;
    float *out;
    float *residual, *delta; /* ef_enc's residual; pull's view is out */
} bench_ctx;

enum { OP_ENCODE, OP_VALIDATE, OP_DECODE, OP_DECODE_ADD, OP_EF_ENCODE, OP_PULL, NOPS };

static void run_op(bench_ctx *b, int op, uint64_t rep)
{
    char err[128];
    switch (op) {
    case OP_ENCODE:
        b->len = b->c->encode(b->x, b->n, b->p, rep, b->buf);
        break;
    case OP_VALIDATE:
        if (b->c->validate(b->buf, b->len, b->n, err, sizeof err) != 0) {
            fprintf(stderr, "bench_codec: %s: %s\n", b->c->name, err);
            exit(1);
        }
        break;
    case OP_DECODE:
        b->c->decode(b->buf, b->len, b->n, b->out);
        break;
    case OP_DECODE_ADD:
        b->c->decode_add(b->buf, b->len, b->n, 0.5f, b->out);
        break;
    case OP_EF_ENCODE:
        b->len = zp_codec_ef_encode(b->c, b->p, b->residual, b->x, b->n, rep, b->buf);
        break;
    default:
        for (size_t i = 0; i < b->n; i++)
            b->delta[i] = b->x[i] - b->out[i];
        b->len = b->c->encode(b->delta, b->n, b->p, rep, b->buf);
        b->c->decode_add(b->buf, b->len, b->n, 1.0f, b->out);
        break;
    }
}

/* Best wall time of `reps` runs of one operation, in seconds. */
static double best_of(bench_ctx *b, int op, int reps)
{
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        double t0 = zp_now_s();
        run_op(b, op, (uint64_t)r);
        double t = zp_now_s() - t0;
        best = t < best ? t : best;
    }
    return best;
}

int main(int argc, char **argv)
{
    int reps = argc > 1 ? atoi(argv[1]) : 5;
    if (reps < 1)
        reps = 1;
    zp_alloc_tune();
    const size_t sizes[] = {(size_t)1 << 20, (size_t)1 << 24};
    zp_codec_params p;
    zp_codec_params_init(&p);
    p.seed = 1;
    printf("%-6s %9s %8s %7s %9s %9s %9s %9s %9s %9s\n", "codec", "n", "ratio", "saved", "encode",
           "validate", "decode", "dec_add", "ef_enc", "pull");
    for (int si = 0; si < 2; si++) {
        size_t n = sizes[si];
        float *x = zp_alloc(n * sizeof(float));
        float *out = zp_alloc(n * sizeof(float));
        float *residual = zp_alloc_zeroed(n, sizeof(float));
        float *delta = zp_alloc_zeroed(n, sizeof(float));
        zp_rng r;
        zp_rng_seed(&r, 1, 0, 0);
        for (size_t i = 0; i < n; i++)
            x[i] = (float)zp_rng_normal(&r);
        memset(out, 0, n * sizeof(float));
        for (size_t ci = 0; zp_codec_at(ci); ci++) {
            const zp_codec_ops *c = zp_codec_at(ci);
            bench_ctx b = {
                .c = c, .p = &p, .x = x, .n = n, .out = out, .residual = residual, .delta = delta};
            b.buf = zp_alloc(c->max_size(n, &p));
            memset(b.buf, 0, c->max_size(n, &p)); /* fault the pages in before timing */
            run_op(&b, OP_ENCODE, 0);
            double ratio = (double)b.len / (4.0 * (double)n);
            double gbs[NOPS];
            for (int op = 0; op < NOPS; op++) {
                if (op == OP_EF_ENCODE) /* the ops before read the payload of OP_ENCODE */
                    memset(residual, 0, n * sizeof(float));
                gbs[op] = 4.0 * (double)n / best_of(&b, op, reps) / 1e9;
            }
            printf("%-6s %9zu %8.4f %6.1f%% %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f\n", c->name, n,
                   ratio, 100.0 * (1.0 - ratio), gbs[0], gbs[1], gbs[2], gbs[3], gbs[4], gbs[5]);
            free(b.buf);
        }
        free(x);
        free(out);
        free(residual);
        free(delta);
    }
    printf("GB/s of f32 input (4n bytes, 10^9 B/s), best of %d\n", reps);
    return 0;
}
