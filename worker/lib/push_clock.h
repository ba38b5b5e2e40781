/*
 * push_clock.h - pushes that also finish the worker's clock (ZP_FLAG_CLOCK,
 * docs/protocol.md), for the step pipe (pipeline.c): a step's last push to
 * each shard carries its clock, so the step costs no CLOCK message and
 * reply of its own on that shard; a shard the step pushed nothing to gets
 * a CLOCK alone. Internal to libzeps.
 *
 * clock_on is nshards flags: shard k's sub-request carries the flag if
 * clock_on[k] is not 0 (NULL: none does). The caller sends no later push
 * of the step to such a shard: a shard handles one client's messages in
 * order, so the clock then follows all of them, as a CLOCK would.
 */
#ifndef ZP_PUSH_CLOCK_H
#define ZP_PUSH_CLOCK_H

#include <stdbool.h>
#include <stdint.h>

#include "zeps.h"

/* dense.c: zeps_push_start, with clock_on. */
int zp_dense_push_start_clocked(zeps_client *c, uint32_t table, const float *grad, uint64_t offset,
                                uint64_t count, int64_t clock, const uint8_t *clock_on,
                                zeps_req **req);

/* sparse.c: zeps_sbatch_push_start, with clock_on; and whether the batch
 * has ids on shard k (its pushes and pulls go there). */
int zp_sparse_push_start_clocked(zeps_sbatch *b, const float *grads, int64_t clock,
                                 const uint8_t *clock_on, zeps_req **req);
bool zp_sparse_on_shard(const zeps_sbatch *b, int k);

/* control.c: the shards a CLOCK goes to (on[k] != 0): live ones that own
 * a slot or hold a dense slice (all of them under bsp's cuts); a shard
 * removed by a move gets none, so it can be stopped (docs/elastic.md). */
void zp_control_clock_targets(const zeps_client *c, uint8_t *on);

/* control.c: CLOCK `clock` to the shards k with shards[k] != 0; *req is
 * NULL if there is none. */
void zp_control_clock_start_on(zeps_client *c, int64_t clock, const uint8_t *shards,
                               zeps_req **req);

#endif
