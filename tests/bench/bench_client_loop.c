/*
 * bench_client_loop.c - the C side of the Python binding's overhead
 * benchmark (worker/python/bench/bench_overhead.py): push then pull `floats`
 * floats of a dense table in a loop for `seconds`, and print the mean time
 * of one push+pull pair in microseconds.
 *
 *   bench_client_loop FLOATS SECONDS endpoint...
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "zeps.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: bench_client_loop FLOATS SECONDS endpoint...\n");
        return 2;
    }
    size_t n = (size_t)atol(argv[1]);
    double seconds = atof(argv[2]);
    zeps_client *c;
    zeps_options opt = {.request_timeout_ms = 10000};
    if (zeps_client_new_endpoints(&c, (const char *const *)argv + 3, argc - 3, 0, &opt) != 0)
        return 1;
    char name[64];
    snprintf(name, sizeof name, "bench-%zu", n); /* one table per size */
    zeps_table_spec spec = {.name = name, .length = n, .optimizer = "sgd", .lr = 1e-9};
    uint32_t t;
    float *g = calloc(n, sizeof(float)), *p = calloc(n, sizeof(float));
    if (g == NULL || p == NULL || zeps_declare(c, &spec, &t) != 0)
        return 1;
    long iters = 0;
    for (int warm = 0; warm < 20; warm++)
        if (zeps_push(c, t, g, 0, n, 0) != 0 || zeps_pull(c, t, p, 0, n, 0) != 0)
            return 1;
    double t0 = now_s(), el;
    do {
        if (zeps_push(c, t, g, 0, n, 0) != 0 || zeps_pull(c, t, p, 0, n, 0) != 0)
            return 1;
        iters++;
    } while ((el = now_s() - t0) < seconds);
    printf("%.3f\n", el / (double)iters * 1e6);
    zeps_client_destroy(&c);
    free(g);
    free(p);
    return 0;
}
