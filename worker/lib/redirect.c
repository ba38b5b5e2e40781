/*
 * redirect.c - libzeps: following an EMOVED redirect (docs/elastic.md).
 *
 * A shard refuses a whole sparse PULL, PUSH or PUT that names an id of a
 * slot it does not own, with EMOVED and its slot map. The client takes
 * the map if it is newer than its own, and sends the refused sub-request's
 * ids again, split by their owners under the new map: one piece per
 * owner, each a new sub-request with a new seq (the refused seq is
 * recorded by the shard and never sent again, so nothing can be applied
 * twice). A piece refused again goes
 * again only if the client's map is now newer than the one it was split
 * by (moves in a row can send a slot on twice), or if the refusing shard's
 * map is older than that one: the shard has not taken the map yet (shards
 * learn it one by one, from ZooKeeper's watch or SLOTS), so the piece goes
 * again after a wait of 2 ms, doubling up to 256 ms, for up to
 * request_timeout_ms from the first such refusal. Refused at the same
 * epoch (two shards that disagree), or behind for longer, the error
 * reaches the caller with the shard's words.
 *
 * A map that names shards this client does not know (they joined at run
 * time) is taken only once join.c reached them all.
 *
 * A dense PULL or PUSH refused with EMOVED (a range in a piece another
 * shard holds, docs/elastic.md "Dense tables by range") is cut again by
 * the client's map the same way: one part per piece it touches, a pull's
 * part written into its place of the caller's buffer, a push's sent from
 * it (the caller's buffer outlives the wait).
 *
 * Pieces answer for their parent: a pull piece's rows go where the
 * parent's would have (zp_req_scatter.jmap), and the parent is finished
 * when its last piece is (req.c's sub_finish). The engine never calls
 * back into sparse.c: what a resend needs is in the sub (zp_req_resend).
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "client.h"
#include "join.h"
#include "log.h"
#include "now.h"
#include "redirect.h"
#include "slotmap.h"
#include "tables.h" /* zp_table: its name and length, nothing called */
#include "zeps.h"

/* Whether s can be sent again split: a sparse PULL with a scatter, or an
 * uncompressed sparse PUSH; a piece only by a newer map than the one it
 * was split by (the map moves forward at each step, so this cannot loop:
 * two shards that disagree at one epoch end it), or later, by behind(),
 * when the refusing shard's map is older than that one. A push that carried the
 * clock (a zeps_pipe step's, push_clock.h) goes on as pieces without it:
 * the pieces' owners get the step's clock from the step itself (its
 * clocked push or CLOCK there), and the refusing shard, which applied
 * nothing, from the worker's next clock there (docs/elastic.md). */
static int splittable(const zp_req_sub *s);

static int resendable(const zeps_client *c, const zp_req_sub *s)
{
    if (s->parent && zp_slotmap_epoch(c->slots) <= s->split_epoch)
        return 0;
    return splittable(s);
}

/* Whether s is of a kind that can be split and sent again at all. */
static int splittable(const zp_req_sub *s)
{
    if (!s->resend.table_ids)
        return 0;
    if (s->resend.dense && s->req->op == ZEPS__OP__PULL) /* not a view, not compressed */
        return s->dst != NULL && !s->compressed;
    if (s->req->op == ZEPS__OP__PULL)
        return s->scatter.rows != NULL;
    return s->req->op == ZEPS__OP__PUSH && s->resend.raw != NULL;
}

/* Whether piece s, refused by a shard whose map is of epoch `theirs`, is
 * to go again later: that shard is behind the map s was split by, and
 * will take it (ZooKeeper's watch, SLOTS). The refused seq is recorded
 * there (docs/protocol.md, "Retries and duplicates"), so it goes as new
 * pieces with new seqs, as any redirect; sets when (s->split_ns). */
static int behind(const zeps_client *c, zp_req_sub *s, uint64_t theirs)
{
    if (!s->parent || theirs >= s->split_epoch || !splittable(s))
        return 0;
    uint64_t now = zp_now_ns();
    if (!s->behind_ns)
        s->behind_ns = now;
    else if (now - s->behind_ns >= (uint64_t)c->opt.request_timeout_ms * 1000000ull)
        return 0; /* the shard never took it: the error reaches the caller */
    s->split_ns = now + (2000000ull << (s->behind < 7 ? s->behind : 7));
    s->behind++;
    return 1;
}

uint64_t zp_redirect_learn(zeps_client *c, int k, const zp_frames *m)
{
    zp_slotmap *map = NULL;
    char why[256] = "";
    int rc = m->n == 2 ? zp_slotmap_decode(&map, zmq_msg_data((zmq_msg_t *)&m->f[1]),
                                           zmq_msg_size((zmq_msg_t *)&m->f[1]), c->ndense, why,
                                           sizeof(why))
                       : ZEPS_EPROTO;
    if (rc != 0) {
        zp_warn("shard %d sent no usable slot map (%s)", k, why[0] ? why : "no payload frame");
        return UINT64_MAX;
    }
    uint64_t theirs = zp_slotmap_epoch(map);
    if (zp_slotmap_epoch(map) > zp_slotmap_epoch(c->slots) &&
        zp_slotmap_shards(map) != c->nshards && zp_join_map(c, map) != 0) {
        /* a shard it names cannot be reached: placing ids by this map would
         * send them nowhere; the redirect's error reaches the caller */
        zp_warn("shard %d: slot map epoch %" PRIu64 " not taken: %s", k, zp_slotmap_epoch(map),
                c->err);
        zp_slotmap_destroy(&map);
        return theirs;
    }
    if (zp_slotmap_epoch(map) > zp_slotmap_epoch(c->slots)) {
        zp_info("shard %d: slot map epoch %" PRIu64 " (was %" PRIu64 "); id owners follow it", k,
                zp_slotmap_epoch(map), zp_slotmap_epoch(c->slots));
        zp_slotmap_destroy(&c->slots);
        c->slots = map; /* the client owns it from here */
        c->stats.slot_epoch = zp_slotmap_epoch(c->slots);
    } else {
        zp_slotmap_destroy(&map);
    }
    return theirs;
}

int zp_redirect_take(zeps_client *c, int k, zp_req_sub *s, const zp_frames *m)
{
    uint64_t theirs = zp_redirect_learn(c, k, m);
    if (resendable(c, s)) {
        s->split_ns = 0;
        c->stats.slot_redirects++;
        return 1;
    }
    if (!behind(c, s, theirs))
        return 0;
    zp_debug("%s piece (seq %" PRIu64 ") refused by shard %d at slot map epoch %" PRIu64
             ", behind the client's %" PRIu64 ": sent again in %" PRIu64 " ms",
             zp_wire_op_name(s->req->op), s->seq, k, theirs, s->split_epoch,
             (uint64_t)((s->split_ns - zp_now_ns()) / 1000000ull));
    return 1;
}

/* A push piece: the ids js[0..n) of s, their rows and versions (with
 * ROW_VERSIONS), copied out of s's raw block into a payload the piece owns. */
static void push_piece(const zp_req_sub *s, zp_req_sub *p, const uint32_t *js, size_t n)
{
    size_t cnt = (size_t)s->count, dim = s->resend.dim;
    int vers = (s->flags & ZP_FLAG_ROW_VERSIONS) != 0;
    const unsigned char *raw = s->resend.raw;
    const float *rows = (const float *)(raw + cnt * sizeof(uint64_t));
    const uint32_t *v = (const uint32_t *)(raw + cnt * (sizeof(uint64_t) + dim * sizeof(float)));
    size_t len = n * (sizeof(uint64_t) + dim * sizeof(float) + (vers ? sizeof(uint32_t) : 0));
    unsigned char *out = zp_alloc(len ? len : 8);
    uint64_t *oid = (uint64_t *)out;
    float *orow = (float *)(out + n * sizeof(uint64_t));
    uint32_t *ov = (uint32_t *)(out + n * (sizeof(uint64_t) + dim * sizeof(float)));
    for (size_t i = 0; i < n; i++) {
        memcpy(&oid[i], raw + (size_t)js[i] * sizeof(uint64_t), sizeof(uint64_t));
        memcpy(orow + i * dim, rows + (size_t)js[i] * dim, dim * sizeof(float));
        if (vers)
            memcpy(&ov[i], &v[js[i]], sizeof(uint32_t));
    }
    p->encoded = out; /* the piece owns it; zp_req_free frees it */
    p->data = out;
    p->data_len = len;
    p->flags = s->flags & ZP_FLAG_ROW_VERSIONS;
    p->resend.raw = out; /* ids, rows, versions: as s's, if it is refused in turn */
}

static void pull_piece(const zp_req_sub *s, zp_req_sub *p, const uint32_t *js, size_t n, int k)
{
    const uint64_t *ids = s->data;
    uint64_t *out = zp_alloc(n ? n * sizeof(uint64_t) : 8);
    p->jmap = zp_alloc(n ? n * sizeof(uint32_t) : 4);
    for (size_t i = 0; i < n; i++) { /* positions in the request's own ids */
        out[i] = ids[js[i]];
        p->jmap[i] = s->scatter.jmap ? s->scatter.jmap[js[i]] : js[i];
    }
    p->encoded = out;
    p->data = out;
    p->data_len = n * sizeof(uint64_t);
    p->scatter = s->scatter;
    p->scatter.jmap = p->jmap;
    p->scatter.replied = NULL; /* the parent counts once its pieces are in */
    p->version_out = s->resend.versions ? &s->resend.versions[k] : NULL;
}

/* The ids of s, as indices into its own, grouped by their owner under the
 * client's map: owner k's are js[at[k] .. at[k + 1]). */
static void group(const zeps_client *c, const zp_req_sub *s, uint32_t *js, size_t *at)
{
    const unsigned char *ids = s->data;
    if (s->req->op == ZEPS__OP__PUSH)
        ids = s->resend.raw;
    size_t cnt = (size_t)s->count, S = (size_t)c->nshards;
    int *own = zp_alloc(cnt ? cnt * sizeof(int) : sizeof(int));
    memset(at, 0, (S + 1) * sizeof(size_t));
    for (size_t j = 0; j < cnt; j++) {
        uint64_t id;
        memcpy(&id, ids + j * sizeof(uint64_t), sizeof(id));
        own[j] = zp_slotmap_owner(c->slots, id);
        at[own[j] + 1]++;
    }
    for (size_t k = 0; k < S; k++)
        at[k + 1] += at[k];
    size_t *fill = zp_alloc((S + 1) * sizeof(size_t));
    memcpy(fill, at, (S + 1) * sizeof(size_t));
    for (size_t j = 0; j < cnt; j++)
        js[fill[own[j]]++] = (uint32_t)j;
    free(fill);
    free(own);
}

/* A piece for shard k in follow-up request f (room was checked). */
static zp_req_sub *piece_add(zeps_client *c, zp_req *f, zp_req_sub *s, int k)
{
    zp_req_sub *p = &f->subs[f->nsub++];
    memset(p, 0, sizeof(*p));
    p->req = f;
    p->shard = k;
    p->req_id = ++c->next_req_id;
    p->seq = ++c->shards[k].next_seq;
    p->max_retries = c->opt.max_retries;
    p->parent = s;
    p->split_epoch = zp_slotmap_epoch(c->slots);
    p->behind_ns = s->behind_ns; /* a shard behind the map: one budget for the whole chain */
    p->behind = s->behind;
    p->resend = s->resend; /* a piece refused by a newer map goes again in turn */
    p->table = s->resend.table_ids[k];
    p->data_version = s->data_version;
    return p;
}

/* The follow-up request of sub s, of n pieces (added by the caller),
 * chained after s's request, which owns it (freed with it). */
static zp_req *follow_up(zeps_client *c, zp_req_sub *s, int n)
{
    zp_req *f = zp_req_new(c, s->req->op, n);
    f->clock = s->req->clock;
    f->follow = s->req->follow;
    s->req->follow = f;
    s->pieces = n;
    return f;
}

/* The follow-up of a dense sub s: one part per piece of s's range under
 * the client's map; NULL if a shard has no room for one now. */
static zp_req *dense_split(zeps_client *c, zp_req_sub *s)
{
    const zp_table *ti = &c->tables[s->resend.handle];
    size_t np = zp_slotmap_dense_pieces(c->slots, ti->name, ti->length, NULL, 0);
    zp_dense_piece *pc = zp_alloc((np ? np : 1) * sizeof(*pc));
    zp_slotmap_dense_pieces(c->slots, ti->name, ti->length, pc, np);
    uint64_t lo0 = s->offset, hi0 = s->offset + s->count;
    int n = 0;
    for (size_t i = 0; i < np; i++) {
        if (pc[i].hi <= lo0 || pc[i].lo >= hi0)
            continue;
        n++;
        if (c->shards[pc[i].owner].nout >= ZP_REQ_MAX_IN_FLIGHT) {
            free(pc);
            return NULL;
        }
    }
    zp_req *f = follow_up(c, s, n);
    for (size_t i = 0; i < np; i++) {
        uint64_t lo = lo0 > pc[i].lo ? lo0 : pc[i].lo, hi = hi0 < pc[i].hi ? hi0 : pc[i].hi;
        if (lo >= hi)
            continue;
        int k = pc[i].owner;
        zp_req_sub *p = piece_add(c, f, s, k);
        p->offset = lo;
        p->count = hi - lo;
        if (s->req->op == ZEPS__OP__PUSH) {
            p->data = (const float *)s->resend.raw + (lo - lo0);
            p->data_len = p->count * sizeof(float);
            p->data_version = s->resend.versions[k];
            p->resend.raw = p->data;
        } else {
            p->dst = s->dst + (lo - lo0);
            p->version_out = &s->resend.versions[k];
        }
        zp_debug("%s of elements [%" PRIu64 ", %" PRIu64 ") sent again to shard %d (seq %" PRIu64
                 ") after a redirect",
                 zp_wire_op_name(s->req->op), lo, hi, k, p->seq);
    }
    free(pc);
    return f;
}

zp_req *zp_redirect_split(zeps_client *c, zp_req_sub *s)
{
    if (s->resend.dense)
        return dense_split(c, s);
    size_t cnt = (size_t)s->count, S = (size_t)c->nshards;
    uint32_t *js = zp_alloc(cnt ? cnt * sizeof(uint32_t) : 4);
    size_t *at = zp_alloc((S + 1) * sizeof(size_t));
    group(c, s, js, at);
    int np = 0;
    for (size_t k = 0; k < S; k++) {
        if (at[k + 1] == at[k])
            continue;
        np++;
        if (c->shards[k].nout >= ZP_REQ_MAX_IN_FLIGHT) {
            free(js);
            free(at);
            return NULL;
        }
    }
    zp_req *f = follow_up(c, s, np);
    for (size_t k = 0; k < S; k++) {
        size_t n = at[k + 1] - at[k];
        if (n == 0)
            continue;
        zp_req_sub *p = piece_add(c, f, s, (int)k);
        p->count = n;
        if (s->req->op == ZEPS__OP__PUSH)
            push_piece(s, p, js + at[k], n);
        else
            pull_piece(s, p, js + at[k], n, (int)k);
        zp_debug("%s of %zu ids sent again to shard %zu (seq %" PRIu64 ") after a redirect",
                 zp_wire_op_name(s->req->op), n, k, p->seq);
    }
    free(js);
    free(at);
    return f;
}
