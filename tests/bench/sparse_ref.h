/*
 * sparse_ref.h - the reference that bench_sparse --ref holds zeps against:
 * a plain sparse parameter server with nothing but the work itself. A
 * forked child binds a raw ZeroMQ ROUTER; its tables are open-addressing
 * hash maps from id to a row of `dim` values followed by `dim` Adagrad
 * accumulators. No versions, admission, eviction, validation or
 * deduplication: a pull copies each named row (creating it on first touch),
 * a push applies Adagrad once per id named.
 *
 * Wire (this program only): a request is [hdr][ids] (pull) or
 * [hdr][ids][grads] (push) with hdr = {u32 op, u32 dim, u64 count}; a reply
 * is [hdr] (push) or [hdr][rows] (pull), rows sent without copying.
 */
#ifndef ZT_SPARSE_REF_H
#define ZT_SPARSE_REF_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

enum { REF_PULL = 1, REF_PUSH = 2, REF_RESET = 3, REF_RSS = 4 };

/* Map variants, for the comparison in docs/sparse.md: the default batches
 * the work (hash a group of ids, prefetch their slots, probe, prefetch their
 * rows, then touch them); "naive" probes and touches one id at a time. */
enum { REF_MAP_BATCHED = 0, REF_MAP_NAIVE = 1 };

/* The reference's map (the batched variant) in this process, for
 * bench_sparse --ref --store: rows created on first touch; a pull (g NULL)
 * copies dim floats per id into out, a push applies g's rows. */
typedef struct zt_smap zt_smap;
zt_smap *zt_smap_new(uint32_t dim);
void zt_smap_run(zt_smap *m, const uint64_t *ids, size_t n, float *out, const float *g);
void zt_smap_free(zt_smap **m);

typedef struct zt_sref {
    pid_t pid;
    void *ctx, *sock;
    char endpoint[128];
} zt_sref;

/* Fork the reference server (map variant `variant`) on an ipc:// endpoint
 * and connect to it. Call before this process makes any ZeroMQ context.
 * Returns 0 or -1. */
int zt_sref_start(zt_sref *r, int variant);

/* Stop the child and close the socket. */
void zt_sref_stop(zt_sref *r);

/* Drop every table (the server's memory returns to the allocator). */
int zt_sref_reset(zt_sref *r);

/* The server's resident set in bytes, or 0. */
uint64_t zt_sref_rss(zt_sref *r);

/* Pull the rows of ids[0..n) of the table of dimension dim into rows
 * (n * dim floats). Returns 0 or -1. */
int zt_sref_pull(zt_sref *r, uint32_t dim, const uint64_t *ids, size_t n, float *rows);

/* Push grads (n * dim floats) to the rows of ids[0..n). Returns 0 or -1. */
int zt_sref_push(zt_sref *r, uint32_t dim, const uint64_t *ids, size_t n, const float *grads);

#endif
