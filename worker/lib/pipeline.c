/*
 * pipeline.c - libzeps: a training step pipeline (zeps_pipe, see zeps.h and
 * docs/pipeline.md).
 *
 * A pipe holds a ring of slots, one per step between the caller feeding it
 * (the ids of a minibatch) and the shards acknowledging its pushes. A slot
 * owns, per table of the pipe, the step's sparse batch (zeps_sbatch), the
 * buffer its rows (or a dense table's values) are pulled into and the
 * buffer the caller writes the gradient into, plus the wait handles of its
 * requests. A slot goes FREE -> FED (batches built) -> PULLING (pulls sent)
 * -> READY (handed to the caller by zeps_pipe_next) -> PUSHING (pushes and
 * the clock sent) -> FREE (every reply in). The pipe decides two things: when
 * a fed step's pulls go out (at most `prefetch` steps ahead of the one being
 * computed, and always after the pushes of the steps before it, so a pull
 * sees every push the worker made before sending it), and how many steps'
 * pushes may be unanswered (`max_inflight`). A step's clock rides on its
 * last push to each shard (push_clock.h: one message less per shard and
 * step); a shard it pushed nothing to gets a CLOCK of its own. It uses the
 * public request API (zeps_sbatch_*, zeps_pull_start, zeps_wait) and those
 * clocked pushes, so it adds no path through the engine.
 *
 * On any error the pipe waits for every request it has in flight (so no
 * buffer is referenced by ZeroMQ any more), keeps the first error and
 * answers every later call with it until zeps_pipe_reset().
 */
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "client.h"
#include "push_clock.h"
#include "req.h"
#include "zeps.h"

enum { S_FREE, S_FED, S_PULLING, S_READY, S_PUSHING };

typedef struct slot {
    int state;
    uint64_t seq;        /* feed order: the ring is used in this order */
    zeps_pipe_step step; /* what the caller sees */
    size_t cap;          /* positions rows/grads of sparse tables hold */
    zeps_sbatch *sb[ZEPS_PIPE_MAX_TABLES];
    zeps_req *reqs[ZEPS_PIPE_MAX_TABLES + 1]; /* pulls, or pushes + the clock */
} slot;

struct zeps_pipe {
    zeps_client *c;
    int ntables;
    uint32_t tables[ZEPS_PIPE_MAX_TABLES];
    uint32_t dim[ZEPS_PIPE_MAX_TABLES];    /* 0: dense */
    uint64_t length[ZEPS_PIPE_MAX_TABLES]; /* dense: elements */
    zeps_pipe_opts o;
    int nslots;
    slot *slots;
    uint64_t fed, handed; /* steps fed, steps handed out (seq of the next to hand) */
    int64_t reached;      /* the clock this worker has reached (pull clock) */
    int have_reached;
    int rounds;        /* dense tables advance in rounds (ZEPS_CAP_CUTS) */
    uint8_t *clock_on; /* [(ntables + 1) * nshards]: plan_clock's, for the step pushed */
    int err;
};

/* Wait for every request of slot s; returns the first error. */
static int settle(slot *s, int n)
{
    return zeps_wait_all(s->reqs, n);
}

/* A step's clock rides on its pushes (push_clock.h), so a push a shard
 * refused left the step unfinished there, where a CLOCK of its own would
 * have finished it: finish it on every shard (one already past it
 * acknowledges and changes nothing), keeping the first error's text. Not
 * after errors of the connection or a restarted shard (rollback decides). */
static void finish_clock(zeps_pipe *p, int64_t clock, int rc)
{
    if (!p->o.clock || rc == ZEPS_ETIMEDOUT || rc == ZEPS_ECLOSED || rc == ZEPS_ETRANSPORT ||
        rc == ZEPS_ERESTARTED || rc == ZEPS_EREFUSED)
        return;
    char keep[sizeof p->c->err];
    memcpy(keep, p->c->err, sizeof keep);
    zeps_req *r;
    if (zeps_clock_start(p->c, clock, &r) == 0)
        zeps_wait(&r);
    memcpy(p->c->err, keep, sizeof keep);
}

/* Wait for slot s's pushes and clock; returns the first error. */
static int settle_push(zeps_pipe *p, slot *s)
{
    int rc = settle(s, p->ntables + 1);
    if (rc != 0)
        finish_clock(p, s->step.clock, rc);
    return rc;
}

/* Wait for everything in flight and free every slot. */
static void drain(zeps_pipe *p)
{
    for (int i = 0; i < p->nslots; i++) {
        slot *s = &p->slots[i];
        if (s->state == S_PUSHING)
            settle_push(p, s);
        else
            settle(s, p->ntables + 1);
        s->state = S_FREE;
    }
    p->fed = p->handed = 0;
    p->have_reached = 0;
}

/* Record the first error (its text stays in zeps_last_error) and drain. */
static int fail(zeps_pipe *p, int rc)
{
    if (!p->err)
        p->err = rc;
    drain(p);
    return p->err;
}

int zeps_pipe_new(zeps_client *c, const uint32_t *tables, int ntables, const zeps_pipe_opts *opts,
                  zeps_pipe **out)
{
    if (!c || !out || !tables || ntables < 1)
        return ZEPS_EINVAL;
    if (ntables > ZEPS_PIPE_MAX_TABLES)
        return zp_fail(c, ZEPS_EINVAL, "a pipe holds at most %d tables", ZEPS_PIPE_MAX_TABLES);
    zeps_pipe_opts o = opts ? *opts : (zeps_pipe_opts){0};
    if (o.prefetch < 0 || o.prefetch > ZEPS_PIPE_MAX_AHEAD || o.max_inflight < 0 ||
        o.max_inflight > ZEPS_PIPE_MAX_AHEAD)
        return zp_fail(c, ZEPS_EINVAL, "pipe: prefetch and max_inflight must be in 0..%d",
                       ZEPS_PIPE_MAX_AHEAD);
    zeps_pipe *p = zp_alloc_zeroed(1, sizeof(*p));
    p->c = c;
    uint32_t caps = 0;
    zeps_consistency(c, &caps);
    p->rounds = (caps & ZEPS_CAP_CUTS) != 0;
    p->ntables = ntables;
    p->o = o;
    for (int i = 0; i < ntables; i++) {
        uint64_t len = zeps_table_length(c, tables[i]);
        uint32_t dim = zeps_table_dim(c, tables[i]);
        if (!len && !dim) {
            free(p);
            return zp_fail(c, ZEPS_ETABLE, "pipe: table handle %u is not declared", tables[i]);
        }
        p->tables[i] = tables[i];
        p->dim[i] = dim;
        p->length[i] = dim ? 0 : len;
    }
    /* prefetch + 1 steps pulled or computing, max_inflight + 1 pushing
     * (the one just pushed and those allowed to stay unanswered) */
    p->nslots = o.prefetch + o.max_inflight + 2;
    p->slots = zp_alloc_zeroed((size_t)p->nslots, sizeof(slot));
    p->clock_on = zp_alloc_zeroed((size_t)(ntables + 1) * ZP_MAX_SHARDS, 1); /* shards may join */
    for (int k = 0; k < p->nslots; k++)
        for (int i = 0; i < ntables; i++)
            if (!p->dim[i]) {
                p->slots[k].step.rows[i] = zp_alloc(p->length[i] * sizeof(float));
                p->slots[k].step.grads[i] = zp_alloc(p->length[i] * sizeof(float));
            }
    *out = p;
    return 0;
}

void zeps_pipe_destroy(zeps_pipe **pp)
{
    if (!pp || !*pp)
        return;
    zeps_pipe *p = *pp;
    drain(p);
    for (int k = 0; k < p->nslots; k++) {
        slot *s = &p->slots[k];
        for (int i = 0; i < p->ntables; i++) {
            zeps_sbatch_free(&s->sb[i]);
            free(s->step.rows[i]);
            free(s->step.grads[i]);
        }
    }
    free(p->slots);
    free(p->clock_on);
    free(p);
    *pp = NULL;
}

int zeps_pipe_slots(const zeps_pipe *p)
{
    return p ? p->nslots : 0;
}

/* The slot of feed number seq, or NULL if it is not in the ring. */
static slot *by_seq(zeps_pipe *p, uint64_t seq)
{
    slot *s = &p->slots[seq % (uint64_t)p->nslots];
    return s->state != S_FREE && s->seq == seq ? s : NULL;
}

/* Steps whose pulls were sent and that were not handed out yet, and
 * whether a step is with the caller. */
static int ahead(const zeps_pipe *p, int *holding)
{
    int n = 0;
    *holding = 0;
    for (int k = 0; k < p->nslots; k++) {
        n += p->slots[k].state == S_PULLING;
        *holding |= p->slots[k].state == S_READY;
    }
    return n;
}

/* Send slot s's pulls: sparse rows as of the clock reached. Where dense
 * tables advance in rounds (consistent cuts), a push must be for the round
 * its table collects, so a step must not compute before the round before
 * it closed: its dense pulls ask for the step's own clock and the shards
 * hold them until then (they travel early all the same). */
static int pull_slot(zeps_pipe *p, slot *s)
{
    int64_t dense_clock = p->rounds ? s->step.clock : p->reached;
    for (int i = 0; i < p->ntables; i++) {
        int rc = p->dim[i]
                     ? zeps_sbatch_pull_start(s->sb[i], s->step.rows[i], p->reached, &s->reqs[i])
                     : zeps_pull_start(p->c, p->tables[i], s->step.rows[i], 0, p->length[i],
                                       dense_clock, &s->reqs[i]);
        if (rc != 0)
            return rc;
    }
    s->state = S_PULLING;
    return 0;
}

/* Send the pulls of fed steps, oldest first, while the bound allows:
 * fewer than prefetch steps pulled ahead of the one with the caller, or
 * prefetch + 1 when none is. */
static int pump(zeps_pipe *p)
{
    int holding, n = ahead(p, &holding);
    for (uint64_t q = p->handed; q < p->fed; q++) {
        slot *s = by_seq(p, q);
        if (!s || s->state != S_FED)
            continue;
        if (n >= p->o.prefetch + !holding)
            break;
        int rc = pull_slot(p, s);
        if (rc != 0)
            return rc;
        n++;
    }
    return 0;
}

/* Wait for the pushes of the oldest pushing slot; returns 0 if there was
 * none to wait for (*waited = 0) or its replies were fine. */
static int settle_oldest(zeps_pipe *p, int *waited)
{
    slot *old = NULL;
    for (int k = 0; k < p->nslots; k++) {
        slot *s = &p->slots[k];
        if (s->state == S_PUSHING && (!old || s->seq < old->seq))
            old = s;
    }
    *waited = old != NULL;
    if (!old)
        return 0;
    int rc = settle_push(p, old);
    old->state = S_FREE;
    return rc;
}

static int pushing(const zeps_pipe *p)
{
    int n = 0;
    for (int k = 0; k < p->nslots; k++)
        n += p->slots[k].state == S_PUSHING;
    return n;
}

static void grow(float **b, size_t n)
{
    *b = zp_alloc_resize(*b, (n ? n : 1) * sizeof(float));
}

int zeps_pipe_feed(zeps_pipe *p, int64_t clock, const uint64_t *ids, size_t n, void *user)
{
    if (!p || (n && !ids))
        return ZEPS_EINVAL;
    if (p->err)
        return p->err;
    slot *s = &p->slots[p->fed % (uint64_t)p->nslots];
    if (s->state == S_PUSHING) {
        int waited, rc = settle_oldest(p, &waited);
        while (rc == 0 && s->state == S_PUSHING)
            rc = settle_oldest(p, &waited);
        if (rc != 0)
            return fail(p, rc);
    }
    if (s->state != S_FREE)
        return zp_fail(p->c, ZEPS_EINVAL,
                       "pipe: %d steps fed and not pushed; a pipe holds %d (prefetch + "
                       "max_inflight + 2)",
                       p->nslots, p->nslots);
    if (!p->have_reached) {
        p->reached = clock; /* the first step after new/reset: pulls are asked at its clock */
        p->have_reached = 1;
    }
    if (n > s->cap) {
        s->cap = n;
        for (int i = 0; i < p->ntables; i++)
            if (p->dim[i]) {
                grow(&s->step.rows[i], n * p->dim[i]);
                grow(&s->step.grads[i], n * p->dim[i]);
            }
    }
    for (int i = 0; i < p->ntables; i++) {
        if (!p->dim[i])
            continue;
        zeps_sbatch_free(&s->sb[i]);
        int rc = zeps_sbatch_new(p->c, p->tables[i], ids, n, &s->sb[i]);
        if (rc != 0)
            return fail(p, rc);
    }
    s->seq = p->fed++;
    s->state = S_FED;
    s->step.clock = clock;
    s->step.user = user;
    s->step.n = n;
    int rc = pump(p);
    return rc ? fail(p, rc) : 0;
}

int zeps_pipe_next(zeps_pipe *p, zeps_pipe_step **step)
{
    if (!p || !step)
        return ZEPS_EINVAL;
    if (p->err)
        return p->err;
    slot *held = p->handed ? by_seq(p, p->handed - 1) : NULL;
    if (held && held->state == S_READY)
        return zp_fail(p->c, ZEPS_EINVAL, "pipe: the step handed out was not pushed");
    slot *s = by_seq(p, p->handed);
    if (!s)
        return zp_fail(p->c, ZEPS_EINVAL, "pipe: no step was fed");
    int rc = 0, waited = 1;
    while (rc == 0 && waited && pushing(p) > p->o.max_inflight)
        rc = settle_oldest(p, &waited);
    if (rc == 0 && s->state == S_FED)
        rc = pull_slot(p, s); /* fed while another step was with the caller */
    if (rc == 0)
        rc = settle(s, p->ntables);
    if (rc != 0)
        return fail(p, rc);
    s->state = S_READY;
    p->handed++;
    *step = &s->step;
    return 0;
}

/* Whether table i of slot s sends shard k anything. */
static bool sends(const zeps_pipe *p, const slot *s, int i, int k)
{
    int S = p->c->ndense;
    if (p->dim[i])
        return zp_sparse_on_shard(s->sb[i], k);
    return zp_tables_slice_begin(p->length[i], k, S) <
           zp_tables_slice_begin(p->length[i], k + 1, S);
}

/* Where slot s's clock goes on each shard (push_clock.h): on the last
 * table's push to it, in row i of clock_on, or, where no table pushes,
 * in row ntables: a CLOCK of its own, to the shards a CLOCK goes to (not
 * to one that owns nothing: a removed shard may be stopped). */
static void plan_clock(zeps_pipe *p, const slot *s)
{
    int S = p->c->nshards;
    uint8_t to[ZP_MAX_SHARDS];
    zp_control_clock_targets(p->c, to);
    memset(p->clock_on, 0, (size_t)(p->ntables + 1) * (size_t)S);
    for (int k = 0; k < S; k++) {
        int last = p->ntables;
        for (int i = 0; i < p->ntables; i++)
            if (sends(p, s, i, k))
                last = i;
        if (last < p->ntables || to[k])
            p->clock_on[last * S + k] = 1;
    }
}

int zeps_pipe_push(zeps_pipe *p, zeps_pipe_step *step)
{
    if (!p || !step)
        return ZEPS_EINVAL;
    if (p->err)
        return p->err;
    slot *s = by_seq(p, p->handed - 1);
    if (!s || s->state != S_READY || &s->step != step)
        return zp_fail(p->c, ZEPS_EINVAL, "pipe: push the step zeps_pipe_next handed out");
    int rc = 0, S = p->c->nshards;
    if (p->o.clock)
        plan_clock(p, s);
    for (int i = 0; i < p->ntables && rc == 0; i++) {
        const uint8_t *on = p->o.clock ? &p->clock_on[i * S] : NULL;
        rc = p->dim[i] ? zp_sparse_push_start_clocked(s->sb[i], step->grads[i], step->clock, on,
                                                      &s->reqs[i])
                       : zp_dense_push_start_clocked(p->c, p->tables[i], step->grads[i], 0,
                                                     p->length[i], step->clock, on, &s->reqs[i]);
    }
    if (rc == 0 && p->o.clock)
        zp_control_clock_start_on(p->c, step->clock, &p->clock_on[p->ntables * S],
                                  &s->reqs[p->ntables]);
    s->state = S_PUSHING;
    if (rc != 0) { /* a push not sent: the step's clock may be finished on some shards only */
        settle(s, p->ntables + 1);
        finish_clock(p, step->clock, rc);
        return fail(p, rc);
    }
    if (step->clock + 1 > p->reached)
        p->reached = step->clock + 1;
    rc = pump(p);
    return rc ? fail(p, rc) : 0;
}

int zeps_pipe_drain(zeps_pipe *p)
{
    if (!p)
        return ZEPS_EINVAL;
    if (p->err)
        return p->err;
    int rc = 0;
    for (int k = 0; k < p->nslots; k++) {
        slot *s = &p->slots[k];
        if (s->state != S_PUSHING)
            continue;
        int r = settle_push(p, s);
        s->state = S_FREE;
        rc = rc ? rc : r;
    }
    return rc ? fail(p, rc) : 0;
}

void zeps_pipe_reset(zeps_pipe *p)
{
    if (!p)
        return;
    drain(p);
    p->err = 0;
}
