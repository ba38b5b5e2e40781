/*
 * wmetrics.h - zeps-worker's own metrics endpoint (wmetrics.c): GET /metrics
 * and /healthz on training.metrics_listen (or --metrics-listen), served by
 * the same bounded listener as the shards' (common/http.c) on a thread of
 * its own, so a scrape never stalls a training step and a step never
 * stalls a scrape. docs/operations.md says why workers serve their own
 * rather than pushing through a shard.
 */
#ifndef ZP_WMETRICS_H
#define ZP_WMETRICS_H

#include <stdint.h>

#include "train.h"
#include "zeps.h"

typedef struct zp_wmetrics zp_wmetrics;

/* Listen on `listen` ("HOST:PORT") for worker `rank` and start the thread.
 * On success *out owns it; on error a zeps_err with a message in err. */
int zp_wmetrics_start(zp_wmetrics **out, const char *listen, int rank, char *err, size_t errlen);

/* Publish the training thread's figures after a step that took step_s
 * (seconds, compute + communication). Cheap: a copy under a mutex. */
void zp_wmetrics_update(zp_wmetrics *m, const zp_train_result *res, const zeps_client_stats *cs,
                        double step_s);

/* Stop the thread, close the listener, free. Takes *mp; NULL is ignored. */
void zp_wmetrics_stop(zp_wmetrics **mp);

#endif
