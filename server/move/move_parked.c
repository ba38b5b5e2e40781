/*
 * move_parked.c - the requests a move's source parks in its cut-over (sparse
 * ones from move.c, dense writes from dmove.c), in the order they came,
 * until the commit or the abort answers them (op/move.c).
 *
 * Threading: the shard's loop only.
 */
#include <stdlib.h>

#include "alloc.h"
#include "move.h"
#include "server.h"

zp_move_parked *zp_move_parked_add(zp_move *m, const zmq_msg_t *identity, const Zeps__Header *h)
{
    for (zp_move_parked *p = m->parked; p; p = p->next)
        if (p->h.rank == h->rank && p->h.seq == h->seq && p->h.op == h->op)
            return NULL; /* a resend: answered with the first */
    zp_move_parked *p = zp_alloc_zeroed(1, sizeof(*p));
    zmq_msg_init(&p->identity);
    zmq_msg_copy(&p->identity, (zmq_msg_t *)identity);
    zeps__header__init(&p->h);
    p->h.op = h->op;
    p->h.req_id = h->req_id;
    p->h.rank = h->rank;
    p->h.incarnation = h->incarnation; /* its seq is that process's (op/owner.c) */
    p->h.seq = h->seq;
    p->h.table = h->table;
    *m->parked_tail = p;
    m->parked_tail = &p->next;
    m->nparked++;
    return p;
}

zp_move_parked *zp_move_parked_take(zp_server *s)
{
    zp_move *m = s->move;
    zp_move_parked *p = m ? m->parked : NULL;
    if (!p)
        return NULL;
    m->parked = p->next;
    if (!m->parked)
        m->parked_tail = &m->parked;
    m->nparked--;
    return p;
}

void zp_move_parked_free(zp_move_parked *p)
{
    zmq_msg_close(&p->identity);
    free(p);
}
