/*
 * rowres.h - per-row error-feedback residuals of a sparse table (rowres.c).
 * Internal to libzeps.
 */
#ifndef ZP_ROWRES_H
#define ZP_ROWRES_H

#include <stdint.h>

typedef struct zp_rowres zp_rowres;

/* An empty store of rows of `dim` floats. The caller owns it and frees it
 * with zp_rowres_free. */
zp_rowres *zp_rowres_new(uint32_t dim);

/* Free *rp (NULL is fine) and set it to NULL. */
void zp_rowres_free(zp_rowres **rp);

/* The residual row of `id` (dim floats), zeros when first asked for. The
 * pointer stays valid until the next zp_rowres_get. */
float *zp_rowres_get(zp_rowres *r, uint64_t id);

#endif
