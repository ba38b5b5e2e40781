/*
 * bsp_ref.c - see bsp_ref.h.
 */
#include "bsp_ref.h"

#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "init.h"
#include "now.h"
#include "optim.h"

const zeps_table_spec zt_bsp_spec = {
    .name = "w",
    .length = ZT_BSP_LEN,
    .optimizer = "adam",
    .lr = 0.01,
    .init = "normal",
    .init_scale = 0.5,
    .seed = 7,
};

/* A deterministic function of the parameters pulled, so any difference in
 * what was applied before shows. Element i depends on element i + LEN/2
 * too, which lies on another shard: parameters of another clock pulled
 * from one shard change the gradient pushed to the others. */
void zt_bsp_gradient(const float *w, float *g, int r, int64_t c)
{
    for (int i = 0; i < ZT_BSP_LEN; i++)
        g[i] = 0.1f * sinf(w[i] * (float)(r + 1) + 0.01f * (float)c +
                           0.5f * w[(i + ZT_BSP_LEN / 2) % ZT_BSP_LEN]) +
               0.001f * (float)((i * 7 + r * 13) % 17);
}

void zt_bsp_worker(const zt_cluster *cl, int r, int steps)
{
    zeps_client *c = zt_client(cl, (uint32_t)r);
    if (!c)
        _exit(10);
    uint32_t t;
    if (zeps_declare(c, &zt_bsp_spec, &t) != 0)
        _exit(11);
    float *w = malloc(ZT_BSP_LEN * sizeof(float)), *g = malloc(ZT_BSP_LEN * sizeof(float));
    unsigned seed = (unsigned)(getpid() ^ zp_now_ns());
    for (int64_t k = 0; k < steps; k++) {
        if (zeps_pull(c, t, w, 0, ZT_BSP_LEN, k) != 0)
            _exit(12);
        zt_bsp_gradient(w, g, r, k);
        struct timespec ts = {0, (long)(rand_r(&seed) % 3000) * 1000L};
        nanosleep(&ts, NULL);
        if (zeps_push(c, t, g, 0, ZT_BSP_LEN, k) != 0)
            _exit(13);
        if (zeps_clock(c, k) != 0)
            _exit(14);
    }
    free(w);
    free(g);
    zeps_client_destroy(&c);
    _exit(0);
}

int zt_bsp_step(zeps_client *const *cs, int n, uint32_t t, int64_t k)
{
    float *w = malloc((size_t)n * ZT_BSP_LEN * sizeof(float));
    float *g = malloc((size_t)n * ZT_BSP_LEN * sizeof(float));
    zeps_req **reqs = calloc((size_t)n, sizeof(*reqs));
    int rc = 0;
    for (int r = 0; r < n && rc == 0; r++)
        rc = zeps_pull(cs[r], t, w + (size_t)r * ZT_BSP_LEN, 0, ZT_BSP_LEN, k);
    /* every push in flight before any is waited for, as n processes would
     * send them: a replicated primary answers a bsp push once its round's
     * entry is in the backups, so when the round has closed */
    for (int r = 0; r < n && rc == 0; r++) {
        zt_bsp_gradient(w + (size_t)r * ZT_BSP_LEN, g + (size_t)r * ZT_BSP_LEN, r, k);
        rc = zeps_push_start(cs[r], t, g + (size_t)r * ZT_BSP_LEN, 0, ZT_BSP_LEN, k, &reqs[r]);
    }
    int rw = zeps_wait_all(reqs, n);
    rc = rc ? rc : rw;
    for (int r = 0; r < n && rc == 0; r++)
        rc = zeps_clock(cs[r], k);
    free(reqs);
    free(g);
    free(w);
    return rc;
}

int zt_bsp_worker_step(zeps_client *c, int r, uint32_t t, int64_t k)
{
    float w[ZT_BSP_LEN], g[ZT_BSP_LEN];
    int rc = zeps_pull(c, t, w, 0, ZT_BSP_LEN, k);
    if (rc == 0) {
        zt_bsp_gradient(w, g, r, k);
        rc = zeps_push(c, t, g, 0, ZT_BSP_LEN, k);
    }
    return rc ? rc : zeps_clock(c, k);
}

int zt_bsp_run_workers(const zt_cluster *cl, int n, int steps)
{
    pid_t pids[16];
    assert(n >= 1 && n <= 16); /* pids[] */
    for (int r = 0; r < n; r++) {
        pids[r] = fork();
        if (pids[r] == 0)
            zt_bsp_worker(cl, r, steps);
    }
    int failed = 0;
    for (int r = 0; r < n; r++) {
        int st = zt_wait(pids[r], 60);
        failed += !(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    return failed;
}

void zt_bsp_reference(int nworkers, int steps, float *w)
{
    const zp_optim_ops *ops = zp_optim_find(zt_bsp_spec.optimizer);
    zp_hyper h = {.lr = (float)zt_bsp_spec.lr};
    zp_hyper_defaults(&h);
    float *state = calloc((size_t)ops->state_per_param * ZT_BSP_LEN, sizeof(float));
    float *acc = malloc(ZT_BSP_LEN * sizeof(float)), *g = malloc(ZT_BSP_LEN * sizeof(float));
    zp_init_fill(w, 0, ZT_BSP_LEN, ZP_INIT_NORMAL, zt_bsp_spec.init_scale, zt_bsp_spec.seed);
    for (int64_t k = 0; k < steps; k++) {
        zt_bsp_gradient(w, acc, 0, k);
        for (int r = 1; r < nworkers; r++) {
            zt_bsp_gradient(w, g, r, k);
            for (int i = 0; i < ZT_BSP_LEN; i++)
                acc[i] += g[i];
        }
        ops->apply(w, state, acc, ZT_BSP_LEN, ZT_BSP_LEN, &h, (uint64_t)k,
                   nworkers == 1 ? 1.0f : 1.0f / (float)nworkers);
    }
    free(state);
    free(acc);
    free(g);
}
