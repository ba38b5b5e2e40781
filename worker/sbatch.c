/*
 * sbatch.c - batches of sparse ids (zeps_sbatch, see zeps.h).
 *
 * A batch is built once from the caller's ids: repeated ids are merged (an
 * open-addressing map from id to its unique index), the unique ids are
 * ordered by shard (a counting sort on zp_sparse_shard_of), and for each
 * unique id the list of positions that name it is kept (CSR). Then:
 *  - a pull sends each shard the ids it holds and scatters each returned row
 *    to every position of its id, as the reply arrives;
 *  - a push sums the gradients of each id's positions into one row, and sends
 *    each shard [ids][rows][row versions], the versions being the ones the
 *    batch's last pull saw, so the server measures staleness per row.
 * Payload buffers belong to the batch and are reused; one request per batch
 * may be in flight at a time.
 */
#include <stdlib.h>
#include <string.h>

#include "client_internal.h"
#include "config.h"
#include "sparse_hash.h"
#include "util.h"
#include "wire.h"
#include "zeps.h"

struct zeps_sbatch {
    zeps_client *c;
    uint32_t table, dim;
    int nshards;
    size_t n, nu;
    uint32_t *pos_u;     /* [n] unique index (in shard order) of each position */
    uint64_t *ukeys;     /* [nu] unique ids in shard order */
    size_t *sbegin;      /* [nshards + 1] shard k holds uniques [sbegin[k], sbegin[k+1]) */
    size_t *pbegin;      /* [nu + 1] positions of unique u: plist[pbegin[u] .. pbegin[u+1]) */
    uint32_t *plist;     /* [n] */
    uint32_t *uversions; /* [nu] row versions the last pull saw */
    int pulled;          /* uversions is valid: every shard of the last pull replied */
    int pull_parts, pull_replies;
    float *rows;         /* destination of the pull in flight */
    unsigned char *push; /* push payload, shard blocks at boff[k] */
    size_t *boff;        /* [nshards + 1] */
    unsigned char *enc;  /* compressed push payload, shard k at eoff[k], elen[k] bytes */
    size_t enc_cap;
    size_t *eoff, *elen;
    uint32_t codec;      /* of the push being sent (0: raw) */
};

static void encode_blocks(zeps_sbatch *b, const zp_codec_ops *codec, const zp_codec_params *p,
                          zp_rowres **res, int64_t clock);

/* --- error-feedback residuals per row --- */

struct zp_rowres {
    uint32_t dim;
    uint64_t seed;       /* hash seed, random */
    size_t cap, n;       /* index slots (power of two), rows held */
    uint64_t *keys;
    uint32_t *row;       /* slot -> row number, UINT32_MAX = empty */
    float *vals;         /* n rows of dim */
    size_t vcap;         /* rows allocated */
};

static void rowres_grow(zp_rowres *r)
{
    size_t cap = r->cap ? 2 * r->cap : 1024;
    uint64_t *keys = zp_xmalloc(cap * sizeof(uint64_t));
    uint32_t *row = zp_xmalloc(cap * sizeof(uint32_t));
    memset(row, 0xff, cap * sizeof(uint32_t));
    for (size_t i = 0; i < r->cap; i++) {
        if (r->row[i] == UINT32_MAX)
            continue;
        size_t j = (size_t)zp_id_hash(r->keys[i], r->seed) & (cap - 1);
        while (row[j] != UINT32_MAX)
            j = (j + 1) & (cap - 1);
        keys[j] = r->keys[i];
        row[j] = r->row[i];
    }
    free(r->keys);
    free(r->row);
    r->keys = keys;
    r->row = row;
    r->cap = cap;
}

/* The residual row of `id`, zeros when first asked for. */
static float *rowres_get(zp_rowres *r, uint64_t id)
{
    if (2 * (r->n + 1) > r->cap)
        rowres_grow(r);
    size_t j = (size_t)zp_id_hash(id, r->seed) & (r->cap - 1);
    while (r->row[j] != UINT32_MAX && r->keys[j] != id)
        j = (j + 1) & (r->cap - 1);
    if (r->row[j] == UINT32_MAX) {
        if (r->n == r->vcap) {
            r->vcap = r->vcap ? 2 * r->vcap : 1024;
            r->vals = zp_xrealloc(r->vals, r->vcap * r->dim * sizeof(float));
        }
        memset(r->vals + r->n * r->dim, 0, r->dim * sizeof(float));
        r->keys[j] = id;
        r->row[j] = (uint32_t)r->n++;
    }
    return r->vals + (size_t)r->row[j] * r->dim;
}

void zp_rowres_free(zp_rowres **rp)
{
    if (!rp || !*rp)
        return;
    free((*rp)->keys);
    free((*rp)->row);
    free((*rp)->vals);
    free(*rp);
    *rp = NULL;
}

/* Bytes of shard block k of a push: ids, rows, versions, padded to 8. */
static size_t block_bytes(size_t cnt, size_t dim)
{
    size_t b = cnt * (sizeof(uint64_t) + dim * sizeof(float) + sizeof(uint32_t));
    return (b + 7) & ~(size_t)7;
}

/* Unique index (first-appearance order) of every position; returns nu.
 * Hashed under a random seed: ids from training data cannot be made to
 * collide. */
static size_t dedup(const uint64_t *ids, size_t n, uint32_t *first_u, uint64_t *uids)
{
    uint64_t seed = zp_random64();
    size_t cap = 16;
    while (cap < 2 * n)
        cap <<= 1;
    uint64_t *keys = zp_xmalloc(cap * sizeof(uint64_t));
    uint32_t *val = zp_xmalloc(cap * sizeof(uint32_t));
    memset(val, 0xff, cap * sizeof(uint32_t));
    size_t nu = 0, mask = cap - 1;
    for (size_t i = 0; i < n; i++) {
        size_t j = (size_t)zp_id_hash(ids[i], seed) & mask;
        while (val[j] != UINT32_MAX && keys[j] != ids[i])
            j = (j + 1) & mask;
        if (val[j] == UINT32_MAX) {
            keys[j] = ids[i];
            val[j] = (uint32_t)nu;
            uids[nu++] = ids[i];
        }
        first_u[i] = val[j];
    }
    free(keys);
    free(val);
    return nu;
}

int zeps_sbatch_new(zeps_client *c, uint32_t table, const uint64_t *ids, size_t n,
                    zeps_sbatch **out)
{
    if (!c || !out || (n && !ids))
        return ZEPS_EINVAL;
    uint32_t dim;
    int rc = zp_client_sparse_table(c, table, &dim);
    if (rc != 0)
        return rc;
    if (n >= UINT32_MAX)
        return zp_client_fail(c, ZEPS_ETOOBIG, "a sparse batch holds fewer than 2^32 ids");
    zeps_sbatch *b = zp_xcalloc(1, sizeof(*b));
    b->c = c;
    b->table = table;
    b->dim = dim;
    b->nshards = zeps_num_shards(c);
    b->n = n;
    int S = b->nshards;

    /* 1. merge repeated ids (order of first appearance) */
    uint32_t *first_u = zp_xmalloc((n ? n : 1) * sizeof(uint32_t));
    uint64_t *uids = zp_xmalloc((n ? n : 1) * sizeof(uint64_t));
    size_t nu = dedup(ids, n, first_u, uids);
    b->nu = nu;

    /* 2. order uniques by shard (stable counting sort) */
    int *ushard = zp_xmalloc((nu ? nu : 1) * sizeof(int));
    b->sbegin = zp_xcalloc((size_t)S + 1, sizeof(size_t));
    for (size_t u = 0; u < nu; u++) {
        ushard[u] = zp_sparse_shard_of(uids[u], S);
        b->sbegin[ushard[u] + 1]++;
    }
    for (int k = 0; k < S; k++)
        b->sbegin[k + 1] += b->sbegin[k];
    size_t *fill = zp_xmalloc(((size_t)S + 1) * sizeof(size_t));
    memcpy(fill, b->sbegin, ((size_t)S + 1) * sizeof(size_t));
    uint32_t *rank = zp_xmalloc((nu ? nu : 1) * sizeof(uint32_t)); /* first-order -> shard order */
    b->ukeys = zp_xmalloc((nu ? nu : 1) * sizeof(uint64_t));
    for (size_t u = 0; u < nu; u++) {
        size_t at = fill[ushard[u]]++;
        rank[u] = (uint32_t)at;
        b->ukeys[at] = uids[u];
    }

    /* 3. positions per unique (CSR) */
    b->pos_u = zp_xmalloc((n ? n : 1) * sizeof(uint32_t));
    b->pbegin = zp_xcalloc(nu + 1, sizeof(size_t));
    for (size_t i = 0; i < n; i++) {
        b->pos_u[i] = rank[first_u[i]];
        b->pbegin[b->pos_u[i] + 1]++;
    }
    for (size_t u = 0; u < nu; u++)
        b->pbegin[u + 1] += b->pbegin[u];
    b->plist = zp_xmalloc((n ? n : 1) * sizeof(uint32_t));
    size_t *pf = zp_xmalloc((nu + 1) * sizeof(size_t));
    memcpy(pf, b->pbegin, (nu + 1) * sizeof(size_t));
    for (size_t i = 0; i < n; i++)
        b->plist[pf[b->pos_u[i]]++] = (uint32_t)i;

    b->uversions = zp_xcalloc(nu ? nu : 1, sizeof(uint32_t));
    b->boff = zp_xcalloc((size_t)S + 1, sizeof(size_t));
    for (int k = 0; k < S; k++)
        b->boff[k + 1] = b->boff[k] + block_bytes(b->sbegin[k + 1] - b->sbegin[k], dim);

    free(first_u);
    free(uids);
    free(ushard);
    free(fill);
    free(rank);
    free(pf);
    *out = b;
    return 0;
}

size_t zeps_sbatch_size(const zeps_sbatch *b)
{
    return b ? b->n : 0;
}

size_t zeps_sbatch_unique(const zeps_sbatch *b)
{
    return b ? b->nu : 0;
}

void zeps_sbatch_free(zeps_sbatch **bp)
{
    if (!bp || !*bp)
        return;
    zeps_sbatch *b = *bp;
    free(b->pos_u);
    free(b->ukeys);
    free(b->sbegin);
    free(b->pbegin);
    free(b->plist);
    free(b->uversions);
    free(b->push);
    free(b->boff);
    free(b->enc);
    free(b->eoff);
    free(b->elen);
    free(b);
    *bp = NULL;
}

/* A request with no ids has nothing to send: an empty request completes at once. */
static int start(zeps_sbatch *b, int push, int64_t clock, zeps_req **req)
{
    zp_sparse_part parts[ZP_MAX_SHARDS];
    int np = 0;
    for (int k = 0; k < b->nshards; k++) {
        size_t cnt = b->sbegin[k + 1] - b->sbegin[k];
        if (!cnt)
            continue;
        zp_sparse_part *p = &parts[np++];
        memset(p, 0, sizeof(*p));
        p->shard = k;
        p->nkeys = cnt;
        if (push && b->codec) {
            p->data = b->enc + b->eoff[k];
            p->len = b->elen[k];
            p->flags = b->pulled ? ZP_FLAG_ROW_VERSIONS : 0;
            p->codec = b->codec;
            p->raw_len = cnt * (sizeof(uint64_t) + b->dim * sizeof(float)) +
                         (b->pulled ? cnt * sizeof(uint32_t) : 0);
        } else if (push) {
            p->data = b->push + b->boff[k];
            p->len = cnt * (sizeof(uint64_t) + b->dim * sizeof(float)) +
                     (b->pulled ? cnt * sizeof(uint32_t) : 0);
            p->flags = b->pulled ? ZP_FLAG_ROW_VERSIONS : 0;
            p->raw_len = p->len;
        } else {
            p->data = b->ukeys + b->sbegin[k];
            p->len = cnt * sizeof(uint64_t);
        }
    }
    if (!push) {
        b->pulled = 0; /* until every shard of this pull has replied */
        b->pull_parts = np;
        b->pull_replies = 0;
    }
    return zp_client_sparse_start(b->c, push, b->table, clock, b, parts, np, req);
}

int zeps_sbatch_pull_start(zeps_sbatch *b, float *rows, int64_t clock, zeps_req **req)
{
    if (!b || !req || (b->n && !rows))
        return ZEPS_EINVAL;
    b->rows = rows;
    return start(b, 0, clock, req);
}

int zp_sbatch_pull_reply(zeps_sbatch *b, int shard, const void *data, size_t len, char *err,
                         size_t errlen)
{
    size_t lo = b->sbegin[shard], cnt = b->sbegin[shard + 1] - lo, dim = b->dim;
    if (len != cnt * (dim + 1) * sizeof(float))
        return zp_seterr(err, errlen, -1, "%zu bytes for %zu rows of dim %zu (expected %zu)", len,
                         cnt, dim, cnt * (dim + 1) * sizeof(float));
    const unsigned char *rows = data;
    const unsigned char *vers = rows + cnt * dim * sizeof(float);
    for (size_t j = 0; j < cnt; j++) {
        size_t u = lo + j;
        memcpy(&b->uversions[u], vers + j * sizeof(uint32_t), sizeof(uint32_t));
        for (size_t q = b->pbegin[u]; q < b->pbegin[u + 1]; q++)
            memcpy(b->rows + (size_t)b->plist[q] * dim, rows + j * dim * sizeof(float),
                   dim * sizeof(float));
    }
    if (++b->pull_replies == b->pull_parts)
        b->pulled = 1; /* a pull a shard failed sends no versions with the next push */
    return 0;
}

int zeps_sbatch_pull(zeps_sbatch *b, float *rows, int64_t clock)
{
    zeps_req *r;
    int rc = zeps_sbatch_pull_start(b, rows, clock, &r);
    return rc ? rc : zeps_wait(&r);
}

int zeps_sbatch_push_start(zeps_sbatch *b, const float *grads, int64_t clock, zeps_req **req)
{
    if (!b || !req || (b->n && !grads))
        return ZEPS_EINVAL;
    size_t dim = b->dim;
    if (!b->push)
        b->push = zp_xmalloc(b->boff[b->nshards] ? b->boff[b->nshards] : 8);
    /* per shard block: ids, then the summed rows, then the versions read */
    for (int k = 0; k < b->nshards; k++) {
        size_t lo = b->sbegin[k], cnt = b->sbegin[k + 1] - lo;
        unsigned char *blk = b->push + b->boff[k];
        memcpy(blk, b->ukeys + lo, cnt * sizeof(uint64_t));
        float *g = (float *)(blk + cnt * sizeof(uint64_t));
        for (size_t j = 0; j < cnt; j++) {
            size_t u = lo + j;
            float *row = g + j * dim;
            const float *first = grads + (size_t)b->plist[b->pbegin[u]] * dim;
            memcpy(row, first, dim * sizeof(float));
            for (size_t q = b->pbegin[u] + 1; q < b->pbegin[u + 1]; q++) {
                const float *x = grads + (size_t)b->plist[q] * dim;
                for (size_t d = 0; d < dim; d++)
                    row[d] += x[d];
            }
        }
        memcpy(blk + cnt * (sizeof(uint64_t) + dim * sizeof(float)), b->uversions + lo,
               cnt * sizeof(uint32_t));
    }
    const zp_codec_ops *codec;
    const zp_codec_params *params;
    zp_rowres **res;
    zp_client_sparse_codec(b->c, b->table, &codec, &params, &res);
    b->codec = codec ? (uint32_t)codec->id : 0;
    if (codec)
        encode_blocks(b, codec, params, res, clock);
    return start(b, 1, clock, req);
}

/* Compress each shard's summed rows into b->enc as [ids][C(rows)][versions].
 * With error feedback the rows' residuals are gathered into one vector,
 * carried through zp_ef_encode with the rows, and scattered back. */
static void encode_blocks(zeps_sbatch *b, const zp_codec_ops *codec, const zp_codec_params *p,
                          zp_rowres **res, int64_t clock)
{
    size_t dim = b->dim, S = (size_t)b->nshards;
    if (!b->eoff) {
        b->eoff = zp_xcalloc(S + 1, sizeof(size_t));
        b->elen = zp_xcalloc(S, sizeof(size_t));
    }
    size_t need = 0;
    for (size_t k = 0; k < S; k++) {
        size_t cnt = b->sbegin[k + 1] - b->sbegin[k];
        b->eoff[k] = need;
        need += (cnt * (sizeof(uint64_t) + sizeof(uint32_t)) + codec->max_size(cnt * dim, p) + 7) &
                ~(size_t)7;
    }
    if (need > b->enc_cap) {
        free(b->enc);
        b->enc_cap = need;
        b->enc = zp_xmalloc(need ? need : 8);
    }
    if (res && !*res) {
        *res = zp_xcalloc(1, sizeof(zp_rowres));
        (*res)->dim = b->dim;
        (*res)->seed = zp_random64();
    }
    float *r = NULL;
    for (size_t k = 0; k < S; k++) {
        size_t lo = b->sbegin[k], cnt = b->sbegin[k + 1] - lo;
        if (!cnt)
            continue;
        const unsigned char *blk = b->push + b->boff[k];
        const float *g = (const float *)(blk + cnt * sizeof(uint64_t));
        unsigned char *out = b->enc + b->eoff[k];
        memcpy(out, blk, cnt * sizeof(uint64_t));
        unsigned char *payload = out + cnt * sizeof(uint64_t);
        uint64_t nonce = zp_mix64((uint64_t)clock * 1315423911u + k) ^ b->ukeys[lo];
        size_t len;
        if (res) {
            r = zp_xrealloc(r, cnt * dim * sizeof(float));
            for (size_t j = 0; j < cnt; j++)
                memcpy(r + j * dim, rowres_get(*res, b->ukeys[lo + j]), dim * sizeof(float));
            len = zp_ef_encode(codec, p, r, g, cnt * dim, nonce, payload);
            for (size_t j = 0; j < cnt; j++)
                memcpy(rowres_get(*res, b->ukeys[lo + j]), r + j * dim, dim * sizeof(float));
        } else {
            len = codec->encode(g, cnt * dim, p, nonce, payload);
        }
        memcpy(payload + len, b->uversions + lo, cnt * sizeof(uint32_t));
        b->elen[k] = cnt * sizeof(uint64_t) + len + (b->pulled ? cnt * sizeof(uint32_t) : 0);
    }
    free(r);
}

int zeps_sbatch_push(zeps_sbatch *b, const float *grads, int64_t clock)
{
    zeps_req *r;
    int rc = zeps_sbatch_push_start(b, grads, clock, &r);
    return rc ? rc : zeps_wait(&r);
}

int zeps_spull(zeps_client *c, uint32_t table, const uint64_t *ids, size_t n, float *rows,
               int64_t clock)
{
    zeps_sbatch *b;
    int rc = zeps_sbatch_new(c, table, ids, n, &b);
    if (rc == 0)
        rc = zeps_sbatch_pull(b, rows, clock);
    zeps_sbatch_free(&b);
    return rc;
}

int zeps_spush(zeps_client *c, uint32_t table, const uint64_t *ids, size_t n, const float *grads,
               int64_t clock)
{
    zeps_sbatch *b;
    int rc = zeps_sbatch_new(c, table, ids, n, &b);
    if (rc == 0)
        rc = zeps_sbatch_push(b, grads, clock);
    zeps_sbatch_free(&b);
    return rc;
}
