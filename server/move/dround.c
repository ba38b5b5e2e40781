/*
 * dround.c - the open bsp rounds of a dense move's pieces, paged from
 * the source to the target: see dround.h. A page carries one held push,
 * so a page is never larger than the push it copies.
 */
#include "dround.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "finite.h"
#include "move.h"
#include "server.h"
#include "table.h"
#include "zeps_errors.h"

#define PUSH 1u /* a page's flags: a push follows */

/* Pages of round rd: one per held push, one if it holds none. */
static size_t pages_of(const zp_round *rd)
{
    return rd->npending > 0 ? (size_t)rd->npending : 1;
}

uint64_t zp_dround_left(const zp_server *s)
{
    const zp_move *m = s->move;
    if (!m || m->role != ZP_MOVE_SOURCE || !m->frozen || !s->cons->rounds)
        return 0;
    uint64_t n = 0;
    for (size_t i = m->round_piece; i < m->npieces; i++) {
        const zp_table *t = zp_dmove_record((zp_server *)s, i);
        size_t p = t ? pages_of(&t->round) : 0, sent = i == m->round_piece ? m->round_sent : 0;
        n += p > sent ? p - sent : 0;
    }
    return n;
}

/* The rank of the j-th push rd holds, in rank order; -1 if none. */
static int held_rank(const zp_round *rd, size_t j)
{
    for (int r = 0; r < rd->nworkers; r++)
        if (rd->have[r] && j-- == 0)
            return r;
    return -1;
}

size_t zp_dround_page(zp_server *s, uint8_t **buf, zp_table **t)
{
    zp_move *m = s->move;
    *buf = NULL;
    *t = NULL;
    while (zp_dround_left(s) > 0) {
        zp_table *r = zp_dmove_record(s, m->round_piece);
        if (!r || m->round_sent >= pages_of(&r->round)) {
            m->round_piece++;
            m->round_sent = 0;
            continue;
        }
        const zp_round *rd = &r->round;
        int rank = held_rank(rd, m->round_sent++);
        size_t g = rank >= 0 ? zmq_msg_size((zmq_msg_t *)&rd->pending[rank]) : 0;
        uint32_t head[2] = {rank >= 0 ? PUSH : 0, rank >= 0 ? (uint32_t)rank : 0};
        uint64_t version = rank >= 0 ? rd->pending_version[rank] : 0;
        *buf = zp_alloc(ZP_DROUND_HEAD + g);
        memcpy(*buf, &rd->closed, 8);
        memcpy(*buf + 8, head, 8);
        memcpy(*buf + 16, &version, 8);
        if (g)
            memcpy(*buf + ZP_DROUND_HEAD, zmq_msg_data((zmq_msg_t *)&rd->pending[rank]), g);
        *t = r;
        return ZP_DROUND_HEAD + g;
    }
    return 0;
}

/* Check page[0..len) for piece t: 0 or an error with why. */
static int check(const zp_table *t, const uint8_t *page, size_t len, char *why, size_t whylen)
{
    int64_t closed;
    uint32_t head[2];
    if (len < ZP_DROUND_HEAD)
        return snprintf(why, whylen, "a round page of %zu bytes is cut short", len), ZEPS_ESIZE;
    memcpy(&closed, page, 8);
    memcpy(head, page + 8, 8);
    size_t want = ZP_DROUND_HEAD + (head[0] & PUSH ? t->n * sizeof(float) : 0);
    if (head[0] > PUSH || len != want || closed < 0 ||
        (head[0] && head[1] >= (uint32_t)t->round.nworkers)) {
        snprintf(why, whylen,
                 "a round page of %zu bytes (flags %u, rank %u of %d workers, %" PRId64
                 " rounds closed) is not the %zu bytes of a page of this %zu-element piece",
                 len, head[0], head[1], t->round.nworkers, closed, want, t->n);
        return ZEPS_ESIZE;
    }
    if (t->round.npending > 0 && closed != t->round.closed) {
        snprintf(why, whylen, "round %" PRId64 " after pages of round %" PRId64, closed,
                 t->round.closed);
        return ZEPS_EINVAL;
    }
    if (head[0] && zp_round_holds(&t->round, head[1])) {
        snprintf(why, whylen, "a second push of rank %u for round %" PRId64, head[1], closed);
        return ZEPS_EINVAL;
    }
    if (head[0] && !zp_finite_all((const float *)(page + ZP_DROUND_HEAD), t->n)) {
        snprintf(why, whylen, "the push of rank %u holds NaN or Inf", head[1]);
        return ZEPS_ENONFINITE;
    }
    return 0;
}

int zp_dround_put(zp_server *s, const char *name, uint64_t lo, uint64_t count, const void *page,
                  size_t len, char *why, size_t whylen)
{
    zp_table *t = zp_dmove_piece_in(s, name, lo, count);
    if (!t || t->begin != lo || t->n != count) {
        snprintf(why, whylen, "[%" PRIu64 ", %" PRIu64 ") is not a piece moving to shard %d", lo,
                 lo + count, s->shard);
        return ZEPS_EINVAL;
    }
    int rc = check(t, page, len, why, whylen);
    if (rc != 0)
        return rc;
    int64_t closed;
    uint32_t head[2];
    uint64_t version;
    memcpy(&closed, page, 8);
    memcpy(head, (const uint8_t *)page + 8, 8);
    memcpy(&version, (const uint8_t *)page + 16, 8);
    if (t->round.npending == 0)
        zp_round_reset(&t->round, closed);
    if (head[0] &&
        zp_round_hold_copy(&t->round, head[1],
                           (const float *)((const uint8_t *)page + ZP_DROUND_HEAD), version) != 0) {
        snprintf(why, whylen, "no memory to hold a push of %zu elements", t->n);
        return ZEPS_ENOMEM; /* the move aborts, which drops the piece */
    }
    return 0;
}
