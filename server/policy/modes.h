/*
 * modes.h - what the modes' files share (the list of modes is registry.h),
 * for them and the policy tests: async.c's "apply on
 * arrival" hooks, which ssp and weighted reuse.
 */
#ifndef ZP_MODES_H
#define ZP_MODES_H

#include "consistency.h"

#include "registry.h" /* zp_<mode>_ops of every mode */

/* async.c: apply p to t now scaled by `weight` and describe it in *res as
 * `outcome` (ZP_PUSH_APPLIED or ZP_PUSH_LATE). An unchecked push is checked
 * in the same pass: 0, or ZEPS_ENONFINITE with nothing applied and the
 * message in err. */
int zp_async_apply(zp_table *t, zp_push *p, double weight, zp_push_outcome outcome,
                   zp_push_result *res, char *err, size_t errlen);

/* async.c: for a policy about to drop or transform p: 0 if p is checked
 * or finite (then marked checked), else ZEPS_ENONFINITE and the message
 * a bad push gets in err. */
int zp_async_push_check(const zp_table *t, zp_push *p, char *err, size_t errlen);

/* async.c: ZEPS_ENONFINITE and its message for p in err. */
int zp_async_nonfinite(const zp_table *t, const zp_push *p, char *err, size_t errlen);

/* async.c: describe in *res a push refused as `outcome` (dropped or late). */
void zp_async_refuse(const zp_table *t, const zp_push *p, zp_push_outcome outcome,
                     zp_push_result *res);

/* async.c: the hooks of a mode that applies every push on arrival. */
bool zp_async_ready(const zp_server *s, const zp_table *t, uint32_t rank, int64_t clock);
int zp_async_push(zp_server *s, zp_table *t, zp_push *p, zp_push_result *res, char *err,
                  size_t errlen);
int zp_async_push_rows(zp_server *s, zp_table *t, const zp_rows_push *rp, size_t *dropped,
                       char *err, size_t errlen);
bool zp_async_bounds_moved(zp_server *s, zp_table *t);
bool zp_async_quorum_changed(zp_server *s, zp_table *t, zp_push_result *res);
void zp_async_forget(zp_server *s, zp_table *t, uint32_t rank);
int64_t zp_async_cut(const zp_server *s);
bool zp_async_needs_values(const zp_server *s);
bool zp_async_cpull_ok(const zp_server *s);
void zp_async_pulled(zp_server *s, zp_table *t, uint32_t rank, struct zp_buf *b);

/* ssp.c: the staleness bound in force for table t (its own, or the
 * cluster's). */
uint32_t zp_ssp_bound(const zp_server *s, const zp_table *t);

/* weighted.c: w(tau) of a weighting function (config.h's zp_weight_fn)
 * with parameter lambda (exp only). Pure arithmetic. */
double zp_weighted_weight(int fn, double lambda, uint64_t tau);

#endif
