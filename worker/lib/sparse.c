/*
 * sparse.c - libzeps: batches of sparse ids (zeps_sbatch, see zeps.h).
 *
 * A batch is built once from the caller's ids: repeated ids are merged (an
 * open-addressing map from id to its unique index), the unique ids are
 * ordered by shard (a counting sort on the slot map's owners), and for each
 * unique id the list of positions that name it is kept (CSR). Then:
 *  - a pull sends each shard the ids it holds and scatters each returned row
 *    to every position of its id, as the reply arrives;
 *  - a push sums the gradients of each id's positions into one row, and sends
 *    each shard [ids][rows][row versions], the versions being the ones the
 *    batch's last pull saw, so the server measures staleness per row.
 * An id's shard is the owner of its slot under the client's slot map
 * (c->slots, common/slotmap.h); a shard that answers EMOVED (the map moved
 * on) gets the ids sent again to their owners by the engine (redirect.c),
 * from what each sub-request carries in its zp_req_resend.
 * Payload buffers belong to the batch and are reused; one request per batch
 * may be in flight at a time. A freed batch's arrays are kept for the
 * client's next batch (sbspare.c), so building one per request touches
 * no fresh pages: glibc would otherwise hand buffers this large back to
 * the kernel at free and fault them in again. The batch builds the
 * requests (req.c) itself; a pull's sub-requests carry a scatter
 * (zp_req_scatter) that tells the engine where each returned row goes, so
 * nothing calls back into here.
 */
#include <stdlib.h>
#include <string.h>

#include <inttypes.h>

#include "alloc.h"
#include "client.h"
#include "config.h"
#include "push_clock.h"
#include "req.h"
#include "rng.h"
#include "rowres.h"
#include "rowcopy.h"
#include "sbatch.h"
#include "slotmap.h"
#include "sparse_hash.h"
#include "tables.h"
#include "wire.h"
#include "zeps.h"

static void encode_blocks(zeps_sbatch *b, const zp_codec_ops *codec, const zp_codec_params *p,
                          zp_rowres **res, int64_t clock);

/* Bytes of shard block k of a push: ids, rows, versions, padded to 8. */
static size_t block_bytes(size_t cnt, size_t dim)
{
    size_t b = cnt * (sizeof(uint64_t) + dim * sizeof(float) + sizeof(uint32_t));
    return (b + 7) & ~(size_t)7;
}

/* The scratch of zeps_sbatch_new, kept by the client between calls
 * (zp_sparse_build_free at zeps_client_destroy): a dedup table, cleared
 * for each call (4 bytes a slot: clearing the part a call uses costs less
 * than the cache misses of slots twice the size that generation stamps
 * would need; docs/sparse.md, step 9), and per-position and per-unique
 * arrays. Nothing in it outlives a call. */
/* A dedup slot: 0 when empty, else 1 + the unique index of the id that
 * took it (its id is uids[slot - 1]). */
typedef uint32_t dslot;

struct zp_sbuild {
    dslot *slots;
    size_t cap;
    size_t ncap;
    uint32_t *hs;    /* [n] each position's home slot */
    uint32_t *first; /* [n] unique index (first-appearance order) of each position */
    uint64_t *uids;  /* [n] uniques in first-appearance order (several shards) */
    uint32_t *ushard, *rank;
    size_t *fill, *pf;
};

/* At zeps_client_destroy: the scratch, and the client's reference to the
 * spare batch arrays. */
void zp_sparse_build_free(zeps_client *c)
{
    zp_sbspare_close(c);
    zp_sbuild *s = c->sbuild;
    if (!s)
        return;
    free(s->slots);
    free(s->hs);
    free(s->first);
    free(s->uids);
    free(s->ushard);
    free(s->rank);
    free(s->fill);
    free(s->pf);
    free(s);
    c->sbuild = NULL;
}

/* The client's scratch with room for n ids over S shards and a cleared
 * dedup table of *mask + 1 slots (>= 2n, at most 2^32 > n: home slots are
 * 32-bit). */
static zp_sbuild *sbuild_get(zeps_client *c, size_t n, int S, size_t *mask)
{
    zp_sbuild *s = c->sbuild;
    if (!s)
        s = c->sbuild = zp_alloc_zeroed(1, sizeof(*s));
    size_t cap = 16;
    while (cap < 2 * n && cap < ((size_t)1 << 32))
        cap <<= 1;
    if (cap > s->cap) {
        free(s->slots);
        s->slots = zp_alloc_zeroed(cap, sizeof(dslot));
        s->cap = cap;
    }
    if (n + 1 > s->ncap) {
        size_t m = n + 1;
        s->hs = zp_alloc_resize(s->hs, m * sizeof(uint32_t));
        s->first = zp_alloc_resize(s->first, m * sizeof(uint32_t));
        s->uids = zp_alloc_resize(s->uids, m * sizeof(uint64_t));
        s->ushard = zp_alloc_resize(s->ushard, m * sizeof(uint32_t));
        s->rank = zp_alloc_resize(s->rank, m * sizeof(uint32_t));
        s->pf = zp_alloc_resize(s->pf, (m + 1) * sizeof(size_t));
        s->ncap = m;
    }
    s->fill = zp_alloc_resize(s->fill, ((size_t)S + 1) * sizeof(size_t));
    memset(s->slots, 0, cap * sizeof(dslot));
    *mask = cap - 1;
    return s;
}

/* Unique index (first-appearance order) of every position into first[],
 * the uniques into uids[]; returns nu. The table is hashed under a seed
 * drawn at random per call: ids from training data cannot be made to
 * collide. Home slots are computed in one pass and prefetched a few
 * positions ahead, so the probes' cache misses overlap; a slot holds no id
 * (4 bytes: the table is a quarter of the size), a probe compares with
 * uids[]. */
static size_t dedup(zp_sbuild *s, size_t mask, const uint64_t *ids, size_t n, uint32_t *first,
                    uint64_t *uids)
{
    enum { AHEAD = 16 };
    uint64_t seed = zp_rng_random64();
    uint32_t *hs = s->hs;
    dslot *sl = s->slots;
    for (size_t i = 0; i < n; i++)
        hs[i] = (uint32_t)(zp_sparse_hash_id(ids[i], seed) & mask);
    for (size_t i = 0; i < n && i < AHEAD; i++)
        __builtin_prefetch(&sl[hs[i]], 1);
    size_t nu = 0;
    for (size_t i = 0; i < n; i++) {
        if (i + AHEAD < n)
            __builtin_prefetch(&sl[hs[i + AHEAD]], 1);
        uint64_t id = ids[i];
        size_t j = hs[i];
        while (sl[j] != 0 && uids[sl[j] - 1] != id)
            j = (j + 1) & mask;
        if (sl[j] == 0) {
            uids[nu++] = id;
            sl[j] = (uint32_t)nu;
        }
        first[i] = sl[j] - 1;
    }
    return nu;
}

/* Steps 1 and 2 of a batch: merge repeated ids (order of first appearance)
 * into b->ukeys grouped by shard (b->sbegin), b->pos_u[i] the unique of
 * position i. On one shard the first-appearance order is the shard order:
 * dedup writes the batch's own arrays and step 2 has nothing to do. */
static size_t group_uniques(zeps_sbatch *b, zp_sbuild *s, size_t mask, const uint64_t *ids)
{
    int S = b->nshards;
    size_t n = b->n, nu;
    if (S == 1) {
        nu = dedup(s, mask, ids, n, b->pos_u, b->ukeys);
        b->sbegin[1] = nu;
        return nu;
    }
    nu = dedup(s, mask, ids, n, s->first, s->uids);
    /* 2. order uniques by shard (stable counting sort); the slot map is
     * read once per distinct id */
    const zp_slotmap *map = b->c->slots;
    for (size_t u = 0; u < nu; u++) {
        s->ushard[u] = (uint32_t)zp_slotmap_owner(map, s->uids[u]);
        b->sbegin[s->ushard[u] + 1]++;
    }
    for (int k = 0; k < S; k++)
        b->sbegin[k + 1] += b->sbegin[k];
    memcpy(s->fill, b->sbegin, ((size_t)S + 1) * sizeof(size_t));
    for (size_t u = 0; u < nu; u++) {
        size_t at = s->fill[s->ushard[u]]++;
        s->rank[u] = (uint32_t)at;
        b->ukeys[at] = s->uids[u];
    }
    for (size_t i = 0; i < n; i++)
        b->pos_u[i] = s->rank[s->first[i]];
    /* the order the distinct rows of the _unique calls take: the same on
     * any shard count */
    memcpy(b->pos_fa, s->first, n * sizeof(uint32_t));
    for (size_t u = 0; u < nu; u++)
        b->fa_of[s->rank[u]] = (uint32_t)u;
    return nu;
}

/* Step 3: positions per unique (CSR); without repeats on one shard it is
 * the identity (b->in_order) and nothing reads it but a repeated-id push's
 * summing, which then does not run. */
static void list_positions(zeps_sbatch *b, zp_sbuild *s)
{
    size_t n = b->n, nu = b->nu;
    b->in_order = nu == n && b->nshards == 1;
    if (b->in_order)
        return;
    memset(b->pbegin, 0, (nu + 1) * sizeof(size_t));
    for (size_t i = 0; i < n; i++)
        b->pbegin[b->pos_u[i] + 1]++;
    for (size_t u = 0; u < nu; u++)
        b->pbegin[u + 1] += b->pbegin[u];
    size_t *pf = s->pf;
    memcpy(pf, b->pbegin, (nu + 1) * sizeof(size_t));
    for (size_t i = 0; i < n; i++)
        b->plist[pf[b->pos_u[i]]++] = (uint32_t)i;
}

int zeps_sbatch_new(zeps_client *c, uint32_t table, const uint64_t *ids, size_t n,
                    zeps_sbatch **out)
{
    if (!c || !out || (n && !ids))
        return ZEPS_EINVAL;
    zp_table *ti = zp_tables_get(c, table);
    if (!ti)
        return ZEPS_ETABLE;
    if (!ti->dim)
        return zp_fail(c, ZEPS_EINVAL, "table '%s' is dense; sparse calls need a sparse table",
                       ti->name);
    uint32_t dim = ti->dim;
    if (n >= UINT32_MAX)
        return zp_fail(c, ZEPS_ETOOBIG, "a sparse batch holds fewer than 2^32 ids");
    int S = c->nshards;
    size_t mask;
    zp_sbuild *s = sbuild_get(c, n, S, &mask);
    zeps_sbatch *b = zp_sbspare_take(c, n);
    b->table = table;
    b->dim = dim;
    b->nshards = S;
    b->n = n;
    b->unique_io = 0;
    b->nu = group_uniques(b, s, mask, ids);
    list_positions(b, s);
    memset(b->uversions, 0, (b->nu ? b->nu : 1) * sizeof(uint32_t));
    for (int k = 0; k < S; k++)
        b->boff[k + 1] = b->boff[k] + block_bytes(b->sbegin[k + 1] - b->sbegin[k], dim);
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
    *bp = NULL;
    zp_sbspare_give(b);
}

/* uversions holds what every shard of the last pull replied (a pull a shard
 * failed sends no versions with the next push). */
static int pulled(const zeps_sbatch *b)
{
    return b->pull_started && b->pull_parts > 0 && b->pull_replies == b->pull_parts;
}

/* Shard k's part of a push or pull of b: the payload (borrowed from the
 * batch), its bytes, and for a push its bytes as raw f32 rows. */
typedef struct part {
    const void *data;
    size_t len, raw_len;
    uint32_t flags, codec;
} part;

static part part_of(const zeps_sbatch *b, int push, int k)
{
    size_t cnt = b->sbegin[k + 1] - b->sbegin[k];
    size_t vers = pulled(b) ? cnt * sizeof(uint32_t) : 0;
    part p = {0};
    if (!push) {
        p.data = b->ukeys + b->sbegin[k];
        p.len = cnt * sizeof(uint64_t);
        return p;
    }
    p.flags = pulled(b) ? ZP_FLAG_ROW_VERSIONS : 0;
    p.raw_len = cnt * (sizeof(uint64_t) + b->dim * sizeof(float)) + vers;
    if (b->codec) {
        p.data = b->enc + b->eoff[k];
        p.len = b->elen[k];
        p.codec = b->codec;
    } else {
        p.data = b->push + b->boff[k];
        p.len = p.raw_len;
    }
    return p;
}

/* The servers drop messages over max_message_bytes (and the connection with
 * them): refuse such a request here, with a reason, instead. */
static int check_size(const zeps_sbatch *b, int push, const zp_table *ti)
{
    zeps_client *c = b->c;
    uint64_t limit = c->opt.max_message_bytes;
    for (int k = 0; limit && k < b->nshards; k++) {
        uint64_t cnt = b->sbegin[k + 1] - b->sbegin[k];
        if (!cnt)
            continue;
        part p = part_of(b, push, k);
        /* what the shard must hold: the request, and the rows it sends back
         * (pull) or decodes (compressed push) */
        uint64_t rows = push ? p.raw_len : cnt * (ti->dim + 1) * sizeof(float);
        uint64_t big = p.len > rows ? p.len : rows;
        if (big + 1024 > limit)
            return zp_fail(c, ZEPS_ETOOBIG,
                           "a sparse %s of %" PRIu64 " rows (%" PRIu64 " bytes) to shard %d "
                           "of table '%s' exceeds max_message_mb (%" PRIu64 " bytes); use "
                           "smaller batches",
                           push ? "push" : "pull", cnt, big, k, ti->name, limit);
    }
    return 0;
}

/* Start a pull (push = 0) or push of b: one sub-request per shard that holds
 * some of its ids. A request with no ids has nothing to send: an empty
 * request completes at once. On success *req is the caller's wait handle. */
static int start(zeps_sbatch *b, int push, int64_t clock, const uint8_t *clock_on, zeps_req **req)
{
    zeps_client *c = b->c;
    zp_table *ti = &c->tables[b->table];
    int np = 0;
    for (int k = 0; k < b->nshards; k++)
        np += b->sbegin[k + 1] > b->sbegin[k];
    if (!push) {
        b->pull_started = 1; /* pulled() is false until every shard of it replied */
        b->pull_parts = np;
        b->pull_replies = 0;
    }
    int rc = check_size(b, push, ti);
    if (rc != 0)
        return rc;
    zp_req *r = zp_req_new(c, push ? ZEPS__OP__PUSH : ZEPS__OP__PULL, np);
    r->clock = clock;
    for (int k = 0; k < b->nshards; k++) {
        size_t lo = b->sbegin[k], cnt = b->sbegin[k + 1] - lo;
        if (!cnt)
            continue;
        part p = part_of(b, push, k);
        zp_req_sub *s = zp_req_add(r, k);
        s->table = ti->ids[k];
        s->count = cnt;
        s->data = p.data;
        s->data_len = p.len;
        s->flags = p.flags | (push && clock_on && clock_on[k] ? ZP_FLAG_CLOCK : 0);
        s->codec = p.codec;
        s->resend = (zp_req_resend){.table_ids = ti->ids,
                                    .versions = ti->version,
                                    .dim = b->dim,
                                    /* a compressed push is not split (its codec's error
                                     * feedback already counted it as sent) */
                                    .raw = push && !p.codec ? p.data : NULL};
        if (push) {
            c->stats.bytes_out += p.len;
            c->stats.bytes_out_raw += p.raw_len;
        } else {
            /* in order: one copy; the _unique calls: each row to its
             * first-appearance place (one shard: that is shard order) */
            int direct = b->in_order || (b->unique_io && b->nshards == 1);
            s->scatter = (zp_req_scatter){.rows = b->rows,
                                          .dim = b->dim,
                                          .in_order = direct,
                                          .perm = direct || !b->unique_io ? NULL : b->fa_of + lo,
                                          .pbegin = b->pbegin + lo,
                                          .plist = b->plist,
                                          .versions = b->uversions + lo,
                                          .replied = &b->pull_replies};
            s->version_out = &ti->version[k]; /* the table's pushes applied on shard k */
        }
        zp_req_send(r, s);
    }
    *req = r;
    return 0;
}

int zeps_sbatch_pull_start(zeps_sbatch *b, float *rows, int64_t clock, zeps_req **req)
{
    if (!b || !req || (b->n && !rows))
        return ZEPS_EINVAL;
    b->rows = rows;
    b->unique_io = 0;
    return start(b, 0, clock, NULL, req);
}

int zeps_sbatch_pull_unique_start(zeps_sbatch *b, float *urows, int64_t clock, zeps_req **req)
{
    if (!b || !req || (b->n && !urows))
        return ZEPS_EINVAL;
    b->rows = urows;
    b->unique_io = 1;
    return start(b, 0, clock, NULL, req);
}

const uint32_t *zeps_sbatch_positions(const zeps_sbatch *b)
{
    return !b ? NULL : b->nshards == 1 ? b->pos_u : b->pos_fa;
}

int zeps_sbatch_pull(zeps_sbatch *b, float *rows, int64_t clock)
{
    zeps_req *r;
    int rc = zeps_sbatch_pull_start(b, rows, clock, &r);
    return rc ? rc : zeps_wait(&r);
}

/* Into g: the summed gradient rows of uniques lo .. lo + cnt, in order (one
 * copy when the batch is in order). */
static void sum_rows(const zeps_sbatch *b, const float *grads, size_t lo, size_t cnt, float *g)
{
    size_t dim = b->dim;
    if (b->in_order || (b->unique_io && b->nshards == 1)) {
        memcpy(g, grads + lo * dim, cnt * dim * sizeof(float));
        return;
    }
    for (size_t j = 0; b->unique_io && j < cnt; j++)
        zp_rowcopy(g + j * dim, grads + (size_t)b->fa_of[lo + j] * dim, dim);
    if (b->unique_io)
        return;
    for (size_t j = 0; j < cnt; j++) {
        size_t u = lo + j;
        float *row = g + j * dim;
        const float *first = grads + (size_t)b->plist[b->pbegin[u]] * dim;
        zp_rowcopy(row, first, dim);
        for (size_t q = b->pbegin[u] + 1; q < b->pbegin[u + 1]; q++) {
            const float *x = grads + (size_t)b->plist[q] * dim;
            for (size_t d = 0; d < dim; d++)
                row[d] += x[d];
        }
    }
}

bool zp_sparse_on_shard(const zeps_sbatch *b, int k)
{
    if (k >= b->nshards) /* a shard that joined after the batch was cut */
        return false;
    return b->sbegin[k + 1] > b->sbegin[k];
}

int zeps_sbatch_push_start(zeps_sbatch *b, const float *grads, int64_t clock, zeps_req **req)
{
    if (b)
        b->unique_io = 0;
    return zp_sparse_push_start_clocked(b, grads, clock, NULL, req);
}

int zeps_sbatch_push_unique_start(zeps_sbatch *b, const float *ugrads, int64_t clock,
                                  zeps_req **req)
{
    if (b)
        b->unique_io = 1;
    return zp_sparse_push_start_clocked(b, ugrads, clock, NULL, req);
}

int zeps_sbatch_pull_unique(zeps_sbatch *b, float *urows, int64_t clock)
{
    zeps_req *r;
    int rc = zeps_sbatch_pull_unique_start(b, urows, clock, &r);
    return rc ? rc : zeps_wait(&r);
}

int zeps_sbatch_push_unique(zeps_sbatch *b, const float *ugrads, int64_t clock)
{
    zeps_req *r;
    int rc = zeps_sbatch_push_unique_start(b, ugrads, clock, &r);
    return rc ? rc : zeps_wait(&r);
}

int zeps_sbatch_new_pull_unique(zeps_client *c, uint32_t table, const uint64_t *ids, size_t n,
                                float *urows, int64_t clock, zeps_sbatch **out, zeps_req **req)
{
    if (!out)
        return ZEPS_EINVAL;
    zeps_sbatch *b;
    int rc = zeps_sbatch_new(c, table, ids, n, &b);
    if (rc != 0)
        return rc;
    rc = req ? zeps_sbatch_pull_unique_start(b, urows, clock, req)
             : zeps_sbatch_pull_unique(b, urows, clock);
    if (rc != 0) {
        zeps_sbatch_free(&b);
        return rc;
    }
    *out = b;
    return 0;
}

int zp_sparse_push_start_clocked(zeps_sbatch *b, const float *grads, int64_t clock,
                                 const uint8_t *clock_on, zeps_req **req)
{
    if (!b || !req || (b->n && !grads))
        return ZEPS_EINVAL;
    size_t bytes = b->boff[b->nshards] ? b->boff[b->nshards] : 8;
    if (bytes > b->push_cap) {
        free(b->push);
        b->push = zp_alloc(bytes);
        b->push_cap = bytes;
    }
    /* per shard block: ids, then the summed rows, then the versions read */
    for (int k = 0; k < b->nshards; k++) {
        size_t lo = b->sbegin[k], cnt = b->sbegin[k + 1] - lo;
        unsigned char *blk = b->push + b->boff[k];
        memcpy(blk, b->ukeys + lo, cnt * sizeof(uint64_t));
        float *g = (float *)(blk + cnt * sizeof(uint64_t));
        sum_rows(b, grads, lo, cnt, g);
        memcpy(blk + cnt * (sizeof(uint64_t) + b->dim * sizeof(float)), b->uversions + lo,
               cnt * sizeof(uint32_t));
    }
    zp_table *ti = &b->c->tables[b->table];
    b->codec = ti->codec ? (uint32_t)ti->codec->id : 0;
    if (ti->codec)
        encode_blocks(b, ti->codec, &ti->cparams, ti->row_ef ? &ti->row_residual : NULL, clock);
    return start(b, 1, clock, clock_on, req);
}

/* Compress each shard's summed rows into b->enc as [ids][C(rows)][versions].
 * With error feedback the rows' residuals are gathered into one vector,
 * carried through zp_codec_ef_encode with the rows, and scattered back. */
static void encode_blocks(zeps_sbatch *b, const zp_codec_ops *codec, const zp_codec_params *p,
                          zp_rowres **res, int64_t clock)
{
    size_t dim = b->dim, S = (size_t)b->nshards;
    if (!b->eoff) {
        b->eoff = zp_alloc_zeroed(S + 1, sizeof(size_t));
        b->elen = zp_alloc_zeroed(S, sizeof(size_t));
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
        b->enc = zp_alloc(need ? need : 8);
    }
    if (res && !*res)
        *res = zp_rowres_new(b->dim);
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
        uint64_t nonce = zp_rng_mix64((uint64_t)clock * 1315423911u + k) ^ b->ukeys[lo];
        size_t len;
        if (res) {
            r = zp_alloc_resize(r, cnt * dim * sizeof(float));
            for (size_t j = 0; j < cnt; j++)
                memcpy(r + j * dim, zp_rowres_get(*res, b->ukeys[lo + j]), dim * sizeof(float));
            len = zp_codec_ef_encode(codec, p, r, g, cnt * dim, nonce, payload);
            for (size_t j = 0; j < cnt; j++)
                memcpy(zp_rowres_get(*res, b->ukeys[lo + j]), r + j * dim, dim * sizeof(float));
        } else {
            len = codec->encode(g, cnt * dim, p, nonce, payload);
        }
        memcpy(payload + len, b->uversions + lo, cnt * sizeof(uint32_t));
        b->elen[k] = cnt * sizeof(uint64_t) + len + (pulled(b) ? cnt * sizeof(uint32_t) : 0);
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
