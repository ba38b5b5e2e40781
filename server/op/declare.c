/*
 * declare.c - DECLARE: create a table on this shard from its declaration,
 * or check that a re-declaration (another worker, a restart) names the same
 * table. A new table must fit the shard's limits (state/quota.c: how many
 * tables, the bytes its slice takes) before anything is allocated. The
 * table's kind (table/) builds and checks it; under cluster.inject a
 * sparse table keeps its rows' versions from the start (turns.c), or is
 * refused if its rows cannot. The reply names the table's id and this
 * shard's slice.
 */
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "errors.h"
#include "log.h"
#include "ops.h"
#include "server.h"
#include "tiered.h"
#include "zeps_errors.h"

#define ERRLEN 512

/* A table declared with a cold tier gets it (tier/, docs/sparse.md "Cold
 * tier"), where the shard can keep one. */
static int open_tier(zp_server *s, zp_table *t, char *err, size_t errlen)
{
    if (!t->rows)
        return zp_errors_set(err, errlen, ZEPS_EINVAL,
                             "table '%s': a cold tier (tier) is for sparse tables", t->name);
    const char *key = s->cfg.replicas > 1 ? "replicas" : s->inject.ops ? "inject" : NULL;
    if (key != NULL) /* each would miss the rows on disk */
        return zp_errors_set(err, errlen, ZEPS_ECONFIG,
                             "table '%s': a cold tier does not work with %s yet (its rows on "
                             "disk would be missing there): unset %s or declare it without tier",
                             t->name, key, key);
    return zp_tiered_open(t->rows, s->cfg.tier_dir, t->name, s->shard, s->nshards, err, errlen);
}

/* Elements of dense table t this shard holds: its pieces' together. */
static uint64_t held(const zp_server *s, const zp_table *t)
{
    uint64_t n = 0;
    for (uint32_t i = 0; i < s->ntables; i++)
        if (!s->tables[i]->rows && strcmp(s->tables[i]->name, t->name) == 0)
            n += s->tables[i]->n;
    return n;
}

static void reply_declared(zp_server *s, zp_request *r, const zp_table *t)
{
    Zeps__Header rep;
    zp_reply_init(s, r->h, &rep);
    rep.table = t->id;
    rep.offset = t->begin;
    /* a sparse table has no slice: count says the lead columns it keeps, so
     * a client can tell a shard that would ignore them (docs/protocol.md) */
    rep.count = t->rows ? t->rows->spec->lead_cols : held(s, t);
    zp_reply_send(s, r->identity, &rep, NULL, 0, NULL, NULL);
}

/* Make the records of table h->spec on this shard (a sparse table, the
 * default slice of a dense one, or each piece the map gives the shard)
 * as tables s->ntables, s->ntables + 1, ... and append them (s takes
 * them), the first into *out; 0, or an error with a reason in err. */
static int make_records(zp_server *s, const Zeps__Header *h, zp_table **out, char *err,
                        size_t errlen)
{
    const Zeps__TableSpec *spec = h->spec;
    /* by the map's pieces: a table it places by range, or any dense table
     * on a shard that joined (an empty record, until a move brings one) */
    bool pieces = spec->kind != 1 && (s->shard >= s->nshards ||
                                      zp_densemap_names(zp_slotmap_dense(s->slots), spec->name));
    zp_dense_piece *p = NULL;
    size_t n = pieces ? zp_pieces_mine(s, s->slots, spec->name, spec->length, &p) : 1;
    zp_table **made = zp_alloc_zeroed(n, sizeof(*made));
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        uint32_t id = s->ntables + (uint32_t)i;
        rc =
            pieces
                ? zp_table_new_piece(&made[i], id, spec, p[i].lo, p[i].hi, s->nworkers, err, errlen)
                : zp_table_new(&made[i], id, spec, s->shard, s->nshards, s->nworkers, err, errlen);
        if (rc == 0 && made[i]->rows) /* staleness on demand keeps rows' versions from the start */
            rc = zp_turns_rows_ready(s, made[i], 0, err, errlen);
        if (rc == 0 && spec->tier)
            rc = open_tier(s, made[i], err, errlen);
        if (rc == 0) /* what it took (a sparse table's index and sketch are known only now) */
            rc = zp_quota_check_table(&s->quota, s->tables, s->ntables, made[i]->name,
                                      zp_table_bytes(made[i]), s->shard, err, errlen);
    }
    *out = rc == 0 ? made[0] : NULL;
    for (size_t i = 0; i < n; i++) {
        if (rc != 0)
            zp_table_destroy(&made[i]); /* NULL (nothing made) is a no-op */
        else
            zp_table_append(&s->tables, &s->ntables, &s->cap_tables, made[i]); /* s takes it */
    }
    free(made);
    free(p);
    return rc;
}

void zp_declare_on(zp_server *s, zp_request *r)
{
    const Zeps__Header *h = r->h;
    if (h->rank != 0xffffffffu && !zp_request_worker(s, r))
        return;
    if (!h->spec) {
        zp_reply_error(s, r->identity, h, ZEPS_EPROTO, "DECLARE without a table spec");
        return;
    }
    char err[ERRLEN];
    for (uint32_t i = 0; i < s->ntables; i++) {
        if (strcmp(s->tables[i]->name, h->spec->name) != 0)
            continue;
        int rc = zp_table_check_same(s->tables[i], h->spec, err, sizeof(err));
        if (rc != 0)
            zp_reply_error(s, r->identity, h, rc, "%s", err);
        else
            reply_declared(s, r, s->tables[i]);
        return;
    }
    int rc = zp_quota_check_table(&s->quota, s->tables, s->ntables, h->spec->name,
                                  zp_table_estimate_bytes(h->spec, s->shard, s->nshards), s->shard,
                                  err, sizeof(err));
    if (rc != 0) {
        zp_reply_error(s, r->identity, h, rc, "%s", err);
        return;
    }
    uint32_t first = s->ntables;
    zp_table *t = NULL;
    rc = make_records(s, h, &t, err, sizeof(err));
    if (rc != 0) {
        zp_reply_error(s, r->identity, h, rc, "%s", err);
        return;
    }
    for (uint32_t i = first + 1; i < s->ntables; i++) /* the other pieces (bsp) */
        if (s->cons->rounds)
            zp_round_reset(&s->tables[i]->round, h->rank < (uint32_t)s->nworkers
                                                     ? s->workers.w[h->rank].clock
                                                     : s->workers.min_clock);
    if (t->rows) /* a sparse table declared late starts at the rounds the workers closed */
        s->cons->bounds_moved(s, t);
    else if (s->cons->rounds) /* a dense one at the round its declarer is in (bsp) */
        zp_round_reset(&t->round, h->rank < (uint32_t)s->nworkers ? s->workers.w[h->rank].clock
                                                                  : s->workers.min_clock);
    t->kind->log_declared(t, h->spec);
    reply_declared(s, r, t);
}

void zp_declare_on_tune(zp_server *s, zp_request *r)
{
    const Zeps__Header *h = r->h;
    zp_worker *w = zp_request_worker(s, r);
    zp_table *t = w ? zp_request_table(s, r) : NULL;
    if (!t)
        return;
    if (!h->spec) {
        zp_reply_error(s, r->identity, h, ZEPS_EPROTO, "TUNE of table '%s' without a spec (lr)",
                       t->name);
        return;
    }
    if (zp_workers_seen(w, h->seq)) { /* a resend: an older value must not come back */
        zp_reply_ok(s, r->identity, h, ZP_FLAG_DUPLICATE);
        return;
    }
    char err[ERRLEN];
    float was = t->lr_now;
    int rc = zp_table_set_lr(t, h->spec->lr, err, sizeof(err));
    if (rc != 0) {
        zp_reply_error(s, r->identity, h, rc, "%s", err);
        return;
    }
    zp_workers_record(w, h->seq);
    if (t->lr_now != was)
        zp_info("table '%s': lr %g (was %g, declared %g), set by worker %u", t->name,
                (double)t->lr_now, (double)was, (double)t->lr_declared, h->rank);
    zp_reply_ok(s, r->identity, h, 0);
}
