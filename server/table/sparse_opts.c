/*
 * sparse_opts.c - a sparse table's options checked (zp_sparse_new takes
 * them only from here), and the record and chunk sizes they make, which
 * the budget check needs before the table exists. Private to the store
 * (sparse_int.h).
 */
#include <math.h>

#include "admit.h"
#include "errors.h"
#include "optim.h"
#include "rowindex.h"
#include "sparse_int.h"
#include "zeps_errors.h"

#define CHUNK_TARGET_BYTES ((size_t)4 << 20)

/* 0 if x is finite and ok, else `code` with "<field> = <x> must be <range>". */
static int check(int code, const char *field, double x, int ok, const char *range, char *err,
                 size_t errlen)
{
    if (isfinite(x) && ok)
        return 0;
    return zp_errors_set(err, errlen, code, "sparse table: %s = %g must be %s", field, x,
                         isfinite(x) ? range : "finite");
}

/* Records per chunk as a power of two: about CHUNK_TARGET_BYTES (or 1/16 of a
 * memory budget, so chunk granularity does not eat the budget), at most 64k. */
uint32_t zp_sparse_opts_chunk_log2(size_t rec, uint64_t budget)
{
    size_t target = CHUNK_TARGET_BYTES;
    uint32_t lg = 0;

    if (budget != 0 && budget / 16 < target)
        target = (size_t)(budget / 16);
    while (lg < 16 && ((size_t)2 << lg) * rec <= target)
        lg++;
    return lg;
}

/* One record: header, values and state, rounded up to 8 bytes so every
 * header's u64 fields stay aligned. */
size_t zp_sparse_opts_rec_bytes(uint32_t dim, int spv)
{
    return HDR_BYTES + ((size_t)dim * 4 * (1 + (size_t)spv) + 7) / 8 * 8;
}

static int validate_lead(const zp_sparse_opts *o, char *err, size_t errlen)
{
    if (o->lead_cols > o->dim)
        return zp_errors_set(err, errlen, ZEPS_EINVAL,
                             "sparse table: lead_cols = %u must be at most dim = %u", o->lead_cols,
                             o->dim);
    /* finite even when unused: a NaN would make every re-declaration differ */
    int rc = check(ZEPS_EOPTIM, "lead_lr", o->lead_lr, o->lead_cols == 0 || o->lead_lr > 0,
                   "> 0 (lead_cols > 0)", err, errlen);
    if (rc == 0)
        rc = check(ZEPS_EINVAL, "lead_init_scale", o->lead_init_scale, 1, "", err, errlen);
    if (rc != 0 || o->lead_cols == 0)
        return rc;
    if ((unsigned)o->lead_init > ZP_INIT_NORMAL)
        return zp_errors_set(err, errlen, ZEPS_EINVAL, "sparse table: lead_init = %d unknown",
                             (int)o->lead_init);
    return 0;
}

int zp_sparse_opts_check(const zp_sparse_opts *o, const zp_optim_ops **optim, char *err,
                         size_t errlen)
{
    const int O = ZEPS_EOPTIM, I = ZEPS_EINVAL;
    int rc;

    if (o->dim < 1 || o->dim > 4096)
        return zp_errors_set(err, errlen, I, "sparse table: dim = %u must be in 1..4096", o->dim);
    *optim = zp_optim_find(o->optimizer);
    if (*optim == NULL || (*optim)->apply_row == NULL) {
        char known[128];
        zp_optim_names(ZP_OPTIM_ROW, known, sizeof known);
        *optim = NULL;
        return zp_errors_set(err, errlen, O, "sparse table: optimizer = '%s' unknown (known: %s)",
                             o->optimizer ? o->optimizer : "(null)", known);
    }
    if ((rc = check(O, "lr", o->lr, o->lr > 0, "> 0", err, errlen)) ||
        (rc = check(O, "weight_decay", o->weight_decay, o->weight_decay >= 0, ">= 0", err,
                    errlen)) ||
        (rc = check(O, "beta1", o->beta1, o->beta1 >= 0 && o->beta1 < 1, "in [0, 1)", err,
                    errlen)) ||
        (rc = check(O, "beta2", o->beta2, o->beta2 >= 0 && o->beta2 < 1, "in [0, 1)", err,
                    errlen)) ||
        (rc = check(O, "eps", o->eps, o->eps >= 0, "> 0 (0 = default 1e-8)", err, errlen)) ||
        (rc = check(O, "l1", o->l1, o->l1 >= 0, ">= 0", err, errlen)) ||
        (rc = check(O, "l2", o->l2, o->l2 >= 0, ">= 0", err, errlen)) ||
        (rc = check(O, "ftrl_beta", o->ftrl_beta, o->ftrl_beta >= 0, ">= 0 (0 = default 1)", err,
                    errlen)))
        return rc;
    if ((unsigned)o->init > ZP_INIT_NORMAL)
        return zp_errors_set(err, errlen, I, "sparse table: init = %d unknown", (int)o->init);
    if ((rc = validate_lead(o, err, errlen)) != 0)
        return rc;
    if ((rc = check(I, "init_scale", o->init_scale, 1, "", err, errlen)) ||
        (rc = check(I, "admit_prob", o->admit_prob, o->admit_prob >= 0 && o->admit_prob <= 1,
                    "in [0, 1] (0 = always)", err, errlen)))
        return rc;
    if (o->admit_count > UINT16_MAX)
        return zp_errors_set(err, errlen, I, "sparse table: admit_count = %u must be at most %u",
                             o->admit_count, (unsigned)UINT16_MAX);
    if (o->capacity_rows > MAX_ROWS)
        return zp_errors_set(err, errlen, I,
                             "sparse table: capacity_rows = %llu must be at most %llu",
                             (unsigned long long)o->capacity_rows, (unsigned long long)MAX_ROWS);
    if ((unsigned)o->evict > ZP_EVICT_LFU)
        return zp_errors_set(err, errlen, I, "sparse table: evict = %d unknown", (int)o->evict);
    if (o->ttl_clocks > INT64_MAX)
        return zp_errors_set(err, errlen, I, "sparse table: ttl_clocks = %llu too large",
                             (unsigned long long)o->ttl_clocks);
    if (o->memory_budget != 0) {
        size_t rec = zp_sparse_opts_rec_bytes(o->dim, (*optim)->state_per_param);
        uint64_t fixed = zp_admit_sketch_bytes(o->admit_count) +
                         ZP_ROWINDEX_MIN_CAP * sizeof(slot) +
                         (rec << zp_sparse_opts_chunk_log2(rec, o->memory_budget));
        if (o->memory_budget < fixed)
            return zp_errors_set(err, errlen, I,
                                 "sparse table: memory_budget = %llu bytes is below the table's "
                                 "minimum of %llu bytes (sketch, index, one chunk of rows)",
                                 (unsigned long long)o->memory_budget, (unsigned long long)fixed);
    }
    return 0;
}
