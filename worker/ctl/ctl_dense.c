/*
 * ctl_dense.c - zepsctl shards move --dense TABLE:LO-HI: a live move of
 * elements [LO, HI) of a dense table from one running shard to another
 * (docs/elastic.md, "Dense tables by range"), driven as ctl_mover.c
 * drives a slot set, through the same MOVE steps.
 *
 * First, if the range does not fall on piece ends, every shard takes a
 * map one epoch up that cuts the pieces there (no owner changes: a
 * shard cuts a written piece in place). Then the move: BEGIN and IMPORT
 * with the map giving the range's pieces to the target, FREEZE (the
 * source parks the writes of those pieces), the copy of their values,
 * optimizer state and versions page by page, SLOTS to the target (the
 * commit point), COMMIT to the source, SLOTS to the others. A dense piece
 * changes at every push, so it is copied during the cut-over only.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "ctl.h"
#include "ctl_mover.h"
#include "exitcode.h"
#include "now.h"
#include "wire.h"
#include "zeps_errors.h"

typedef struct dm {
    zp_mover *m;
    const zp_mv_opts *o;
    char name[64];
    uint64_t lo, hi, length;
    uint64_t elems, bytes; /* copied */
    uint64_t held;         /* bsp pushes of the pieces' open rounds handed over */
} dm;

/* "TABLE:LO-HI" into d; 0 or -1 (said). */
static int parse_range(dm *d, const char *text)
{
    const char *colon = strrchr(text, ':');
    unsigned long long lo, hi;
    char tail;
    if (!colon || colon == text || (size_t)(colon - text) >= sizeof(d->name) ||
        sscanf(colon + 1, "%llu-%llu%c", &lo, &hi, &tail) != 2 || lo >= hi) {
        fprintf(stderr, "zepsctl shards move: --dense '%s' is not TABLE:LO-HI with LO < HI\n",
                text);
        return -1;
    }
    memcpy(d->name, text, (size_t)(colon - text));
    d->name[colon - text] = '\0';
    d->lo = lo;
    d->hi = hi;
    return 0;
}

/* The table's length from shard k's STATS (a dense table there); 0 or the
 * error code (said). */
static int table_length(dm *d, int k)
{
    Zeps__Header h, *rep;
    zeps__header__init(&h);
    h.op = ZEPS__OP__STATS;
    int rc = zp_ctl_mover_rpc(d->m, k, &h, NULL, 0, &rep, NULL);
    if (rc != 0) {
        fprintf(stderr, "zepsctl shards move: %s\n", zp_ctl_mover_err(d->m));
        return rc;
    }
    d->length = 0;
    for (size_t i = 0; rep->stats && i < rep->stats->n_tables; i++)
        if (rep->stats->tables[i]->kind == 0 && strcmp(rep->stats->tables[i]->name, d->name) == 0)
            d->length = rep->stats->tables[i]->length;
    zeps__header__free_unpacked(rep, NULL);
    if (d->length == 0 || d->hi > d->length) {
        fprintf(stderr,
                "zepsctl shards move: shard %d has no dense table '%s' holding [%" PRIu64
                ", %" PRIu64 ")\n",
                k, d->name, d->lo, d->hi);
        return ZEPS_EINVAL;
    }
    return 0;
}

/* A MOVE step to shard k (peer, bound, payload); *rep the caller's. */
static int step(dm *d, int k, uint32_t st, int peer, uint32_t bound, const void *payload,
                size_t len, Zeps__Header **rep, zmq_msg_t *data)
{
    Zeps__Header h;
    zeps__header__init(&h);
    h.op = ZEPS__OP__MOVE;
    h.move_step = st;
    h.move_peer = (uint32_t)peer;
    h.move_bound_ms = bound;
    h.count = st == ZP_MOVE_ROWS ? d->o->page : 0; /* elements per page (--page) */
    return zp_ctl_mover_rpc(d->m, k, &h, payload, len, rep, data);
}

/* Whether map m gives every element of [lo, hi) to shard k. */
static bool all_on(const zp_slotmap *m, const dm *d, int k)
{
    for (uint64_t at = d->lo; at < d->hi;) {
        zp_dense_piece p;
        zp_slotmap_dense_find(m, d->name, d->length, at, &p);
        if (p.owner != k)
            return false;
        at = p.hi;
    }
    return true;
}

/* Send map `next` (SLOTS) to every live shard, `first` first: 0, or -1
 * (said) when a shard refuses or does not answer. */
static int send_all(dm *d, const zp_slotmap *next, int first, int skip, const char *what)
{
    int n = zp_ctl_mover_shards(d->m);
    for (int j = -1; j < n; j++) {
        int k = j < 0 ? first : j;
        if ((j >= 0 && k == first) || k == skip || zp_ctl_mover_retired(d->m, k))
            continue;
        if (zp_ctl_mover_slots(d->m, k, next) != 0) {
            if (what) /* NULL: quiet, the caller tries again */
                fprintf(stderr,
                        "zepsctl shards move: shard %d did not take the %s (epoch %" PRIu64
                        "): %s\n",
                        k, what, zp_slotmap_epoch(next), zp_ctl_mover_err(d->m));
            return -1;
        }
    }
    return 0;
}

/* The map with [lo, hi) on piece ends, taken by every shard if it is not
 * so already, into *out (the caller's). 0 or an exit status. */
static int cut(dm *d, int from, zp_slotmap **out)
{
    zp_slotmap *cur = NULL, *c = NULL;
    char err[256];
    if (zp_ctl_mover_map(d->m, from, &cur) != 0) {
        fprintf(stderr, "zepsctl shards move: %s\n", zp_ctl_mover_err(d->m));
        return ZP_EXIT_FAILED;
    }
    if (!all_on(cur, d, from)) {
        fprintf(stderr,
                "zepsctl shards move: shard %d does not hold all of [%" PRIu64 ", %" PRIu64
                ") of dense table '%s' (slot map epoch %" PRIu64 ")\n",
                from, d->lo, d->hi, d->name, zp_slotmap_epoch(cur));
        zp_slotmap_destroy(&cur);
        return ZP_EXIT_SETUP;
    }
    /* giving the range to its own holder cuts its pieces at lo and hi */
    if (zp_slotmap_dense_moved(cur, d->name, d->length, d->lo, d->hi, from, &c, err, sizeof(err)) !=
        0) {
        fprintf(stderr, "zepsctl shards move: %s\n", err);
        zp_slotmap_destroy(&cur);
        return ZP_EXIT_SETUP;
    }
    size_t na = zp_slotmap_dense_pieces(cur, d->name, d->length, NULL, 0);
    size_t nc = zp_slotmap_dense_pieces(c, d->name, d->length, NULL, 0);
    if (na == nc && zp_densemap_names(zp_slotmap_dense(cur), d->name)) {
        zp_slotmap_destroy(&c); /* on piece ends already */
        *out = cur;
        return 0;
    }
    zp_slotmap_destroy(&cur);
    /* the holder first: it alone may refuse a cut, and then nobody took it
     * (a refusal: exit 2, as a refused BEGIN) */
    int rc = zp_ctl_mover_slots(d->m, from, c), code = ZP_EXIT_FAILED;
    if (rc != 0 && rc != ZEPS_ETIMEDOUT && rc != ZEPS_ETRANSPORT)
        code = ZP_EXIT_SETUP;
    if (rc == 0)
        rc = send_all(d, c, from, from, NULL);
    if (rc != 0) {
        fprintf(stderr,
                "zepsctl shards move: the cut of the pieces (epoch %" PRIu64
                ") was not taken: %s\n",
                zp_slotmap_epoch(c), zp_ctl_mover_err(d->m));
        zp_slotmap_destroy(&c);
        return code;
    }
    printf("cut dense table '%s' at %" PRIu64 " and %" PRIu64 " (slot map epoch %" PRIu64 ")\n",
           d->name, d->lo, d->hi, zp_slotmap_epoch(c));
    *out = c;
    return 0;
}

/* ABORT to both (best effort) and return `code`. */
static int abort_both(dm *d, int from, int to, int code)
{
    fprintf(stderr, "zepsctl shards move: %s\n", zp_ctl_mover_err(d->m));
    int ends[2] = {from, to}, peers[2] = {to, from};
    for (int i = 0; i < 2; i++) {
        Zeps__Header *rep;
        if (step(d, ends[i], ZP_MOVE_ABORT, peers[i], 0, NULL, 0, &rep, NULL) == 0)
            zeps__header__free_unpacked(rep, NULL);
    }
    fprintf(stderr, "zepsctl shards move: aborted; the pieces stay on shard %d\n", from);
    return code;
}

/* One page from the source to the target: 0 (*n elements or a round
 * page, *left pages or elements to go) or the error. A page with flag
 * HELD is a piece's open round under bsp (server/move/dround.h): the
 * round's closed count and at most one push held for it. */
static int page(dm *d, int from, int to, uint64_t *n, uint64_t *left)
{
    Zeps__Header *rep;
    zmq_msg_t data;
    int rc = step(d, from, ZP_MOVE_ROWS, to, 0, NULL, 0, &rep, &data);
    if (rc != 0)
        return rc;
    *n = rep->count;
    *left = rep->cursor;
    if (*n > 0) {
        Zeps__Header p, *ack;
        zeps__header__init(&p);
        p.op = ZEPS__OP__MOVE;
        p.move_step = ZP_MOVE_PUT;
        p.move_peer = (uint32_t)from;
        p.move_table = rep->move_table;
        p.offset = rep->offset;
        p.count = rep->count;
        p.state_per_value = rep->state_per_value;
        p.data_version = rep->data_version;
        p.flags = rep->flags & ZP_FLAG_HELD;
        rc = zp_ctl_mover_rpc(d->m, to, &p, zmq_msg_data(&data), zmq_msg_size(&data), &ack, NULL);
        if (rc == 0)
            zeps__header__free_unpacked(ack, NULL);
        bool held = (rep->flags & ZP_FLAG_HELD) != 0;
        d->elems += held ? 0 : *n;
        d->held += held && zmq_msg_size(&data) > 24; /* a round page with a push */
        d->bytes += zmq_msg_size(&data);
    }
    zmq_msg_close(&data);
    zeps__header__free_unpacked(rep, NULL);
    return rc;
}

/* The cut-over and the commit, after BEGIN and IMPORT; an exit status. */
static int cutover(dm *d, int from, int to, const void *wire, size_t len, uint64_t epoch, double t0)
{
    Zeps__Header *rep;
    double c0 = zp_now_s();
    if (step(d, from, ZP_MOVE_FREEZE, to, d->o->cutover_ms, NULL, 0, &rep, NULL) != 0)
        return abort_both(d, from, to, ZP_EXIT_FAILED);
    zeps__header__free_unpacked(rep, NULL);
    uint64_t n = 0, left = 1;
    while (n > 0 || left > 0)
        if (page(d, from, to, &n, &left) != 0)
            return abort_both(d, from, to, ZP_EXIT_FAILED);
    if ((zp_now_s() - c0) * 1e3 > d->o->cutover_ms / 2.0) {
        fprintf(stderr, "zepsctl shards move: the copy took over half the cut-over's bound\n");
        return abort_both(d, from, to, ZP_EXIT_FAILED);
    }
    Zeps__Header h;
    zeps__header__init(&h);
    h.op = ZEPS__OP__SLOTS;
    if (zp_ctl_mover_rpc(d->m, to, &h, wire, len, &rep, NULL) != 0) /* the commit point */
        return abort_both(d, from, to, ZP_EXIT_FAILED);
    zeps__header__free_unpacked(rep, NULL);
    if (step(d, from, ZP_MOVE_COMMIT, to, 0, wire, len, &rep, NULL) != 0) {
        fprintf(stderr,
                "zepsctl shards move: shard %d took the map of epoch %" PRIu64
                " but the source did not commit: %s\nsend shard %d MOVE COMMIT again, or restart "
                "it (docs/elastic.md)\n",
                to, epoch, zp_ctl_mover_err(d->m), from);
        return ZP_EXIT_FAILED;
    }
    zeps__header__free_unpacked(rep, NULL);
    double cut_ms = (zp_now_s() - c0) * 1e3, secs = zp_now_s() - t0;
    zp_slotmap *next = NULL;
    char err[256];
    if (zp_slotmap_decode(&next, wire, len, zp_ctl_mover_base(d->m), err, sizeof(err)) == 0) {
        int n_sh = zp_ctl_mover_shards(d->m);
        for (int k = 0; k < n_sh; k++)
            if (k != from && k != to && !zp_ctl_mover_retired(d->m, k) &&
                zp_ctl_mover_slots(d->m, k, next) != 0)
                fprintf(stderr, "zepsctl shards move: shard %d did not take the map (%s)\n", k,
                        zp_ctl_mover_err(d->m));
        zp_slotmap_destroy(&next);
    }
    if (d->held > 0) /* under bsp: pushes the pieces' open rounds held */
        printf("cut-over: %" PRIu64 " elements and %" PRIu64 " held bsp pushes in %.1f ms (the "
               "longest a write of them waited)\n",
               d->elems, d->held, cut_ms);
    else
        printf("cut-over: %" PRIu64 " elements in %.1f ms (the longest a write of them waited)\n",
               d->elems, cut_ms);
    printf("summary: elements=%" PRIu64 " bytes=%" PRIu64 " seconds=%.3f cutover_ms=%.1f "
           "epoch=%" PRIu64 "\n",
           d->elems, d->bytes, secs, cut_ms, epoch);
    return ZP_EXIT_OK;
}

int zp_ctl_dense_move(zp_mover *m, const zp_mv_opts *o, const char *range)
{
    dm d = {.m = m, .o = o};
    int replicas = zp_ctl_mover_config(m)->replicas;
    if (replicas > 1) { /* the shards refuse the cut's map; say so before asking */
        fprintf(stderr,
                "zepsctl shards move: --dense with shards of %d replicas: not built (a move's "
                "pieces are not replicated; docs/elastic.md, \"Dense tables by range\"); "
                "nothing changed\n",
                replicas);
        return ZP_EXIT_SETUP;
    }
    if (parse_range(&d, range) != 0)
        return ZP_EXIT_SETUP;
    if (table_length(&d, o->from) != 0)
        return ZP_EXIT_SETUP;
    zp_slotmap *cur = NULL, *next = NULL;
    int rc = cut(&d, o->from, &cur);
    if (rc != 0)
        return rc;
    char err[256];
    rc = zp_slotmap_dense_moved(cur, d.name, d.length, d.lo, d.hi, o->to, &next, err, sizeof(err));
    zp_slotmap_destroy(&cur);
    if (rc != 0) {
        fprintf(stderr, "zepsctl shards move: %s\n", err);
        return ZP_EXIT_SETUP;
    }
    size_t len = zp_slotmap_wire_size(next);
    void *wire = zp_alloc(len);
    zp_slotmap_encode(next, wire);
    uint64_t epoch = zp_slotmap_epoch(next);
    zp_slotmap_destroy(&next);
    double t0 = zp_now_s();
    Zeps__Header *rep;
    rc = step(&d, o->from, ZP_MOVE_BEGIN, o->to, o->lease_ms, wire, len, &rep, NULL);
    if (rc == 0) {
        printf("moving elements [%" PRIu64 ", %" PRIu64 ") of dense table '%s' from shard %d to "
               "shard %d (map epoch %" PRIu64 " to commit)\n",
               d.lo, d.hi, d.name, o->from, o->to, epoch);
        zeps__header__free_unpacked(rep, NULL);
        rc = step(&d, o->to, ZP_MOVE_IMPORT, o->from, o->lease_ms, wire, len, &rep, NULL);
        if (rc == 0) {
            zeps__header__free_unpacked(rep, NULL);
            rc = cutover(&d, o->from, o->to, wire, len, epoch, t0);
        } else {
            rc = abort_both(&d, o->from, o->to,
                            rc == ZEPS_ETIMEDOUT || rc == ZEPS_ETRANSPORT ? ZP_EXIT_FAILED
                                                                          : ZP_EXIT_SETUP);
        }
    } else {
        fprintf(stderr, "zepsctl shards move: %s\n", zp_ctl_mover_err(m));
        rc = rc == ZEPS_ETIMEDOUT || rc == ZEPS_ETRANSPORT ? ZP_EXIT_FAILED : ZP_EXIT_SETUP;
    }
    free(wire);
    return rc;
}
