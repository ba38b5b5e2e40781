/*
 * dc.h - a dense table's DC-ASGD state: per worker, the parameter buffer it
 * last pulled (a reference: copy-on-write keeps it as it was sent), and the
 * scratch for a compensated gradient. Made on first use, only when the
 * policy asks for it (policy/weighted.c with dc_lambda > 0), and for
 * DC-ASGD-a the running mean square of the gradients pushed (n floats).
 */
#ifndef ZP_DC_H
#define ZP_DC_H

#include <stddef.h>
#include <stdint.h>

struct zp_buf;

typedef struct zp_dc {
    struct zp_buf **pulled; /* [nworkers], NULL until the first pull */
    float *scratch;         /* n floats, made on first compensated push */
    float *ms; /* DC-ASGD-a: n floats, the mean square of g; made at first use, zeroed */
} zp_dc;

/* Keep a reference on b as the buffer `rank` (< nworkers) last pulled,
 * dropping the one kept before. The state takes its own reference; the
 * caller keeps its own. */
void zp_dc_remember(zp_dc *dc, int nworkers, uint32_t rank, struct zp_buf *b);

/* The buffer `rank` last pulled, or NULL. */
const struct zp_buf *zp_dc_pulled(const zp_dc *dc, uint32_t rank);

/* n floats of scratch, or NULL when it cannot be allocated. */
float *zp_dc_scratch(zp_dc *dc, size_t n);

/* out[i] = g[i] + lambda * g[i]^2 * (w_now[i] - w_stale[i]). */
void zp_dc_compensate(float *out, const float *g, const float *w_now, const float *w_stale,
                      size_t n, float lambda);

/* DC-ASGD-a (the paper's adaptive lambda): first ms = m ms + (1 - m) g^2,
 * then out = g + lambda0 / sqrt(ms + 1e-7) * g^2 * (w_now - w_stale),
 * elementwise over [0, n). */
void zp_dc_compensate_adaptive(float *out, const float *g, const float *w_now, const float *w_stale,
                               float *ms, size_t n, float lambda0, float m);

/* The table's mean square (n floats, zero at first), or NULL when it
 * cannot be allocated. */
float *zp_dc_mean_square(zp_dc *dc, size_t n);

/* Release every reference and the scratch. */
void zp_dc_fini(zp_dc *dc, int nworkers);

/* Bytes of scratch and mean square held (the pulled buffers are the
 * table's, shared). */
uint64_t zp_dc_bytes(const zp_dc *dc, size_t n);

#endif
