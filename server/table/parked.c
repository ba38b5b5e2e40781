/*
 * parked.c - the FIFO of pulls waiting on a table; see parked.h. Order is
 * kept: a pull is answered no earlier than one parked before it that became
 * ready at the same time.
 */
#include "parked.h"

#include <stdlib.h>

#include "alloc.h"

void zp_parked_init(zp_parked_queue *q)
{
    q->head = NULL;
    q->tail = &q->head;
    q->n = 0;
}

zp_parked *zp_parked_new(const zmq_msg_t *identity)
{
    zp_parked *p = zp_alloc_zeroed(1, sizeof(*p));
    zmq_msg_init(&p->identity);
    zmq_msg_copy(&p->identity, (zmq_msg_t *)identity);
    return p;
}

void zp_parked_push(zp_parked_queue *q, zp_parked *p)
{
    p->next = NULL;
    *q->tail = p;
    q->tail = &p->next;
    q->n++;
}

zp_parked *zp_parked_take_ready(zp_parked_queue *q, const zp_server *s, const struct zp_table *t)
{
    for (zp_parked **pp = &q->head; *pp; pp = &(*pp)->next) {
        zp_parked *p = *pp;
        if (!p->path->ready(s, t, p))
            continue;
        *pp = p->next;
        if (q->tail == &p->next)
            q->tail = pp;
        q->n--;
        return p;
    }
    return NULL;
}

zp_parked *zp_parked_take_if(zp_parked_queue *q, bool (*pred)(const zp_parked *p, void *arg),
                             void *arg)
{
    for (zp_parked **pp = &q->head; *pp; pp = &(*pp)->next) {
        zp_parked *p = *pp;
        if (!pred(p, arg))
            continue;
        *pp = p->next;
        if (q->tail == &p->next)
            q->tail = pp;
        q->n--;
        return p;
    }
    return NULL;
}

zp_parked *zp_parked_pop(zp_parked_queue *q)
{
    zp_parked *p = q->head;
    if (!p)
        return NULL;
    q->head = p->next;
    if (!q->head)
        q->tail = &q->head;
    q->n--;
    return p;
}

const zp_parked *zp_parked_find(const zp_parked_queue *q, uint32_t rank, uint64_t seq)
{
    for (const zp_parked *p = q->head; p; p = p->next)
        if (p->rank == rank && p->seq == seq)
            return p;
    return NULL;
}

void zp_parked_free(zp_parked *p)
{
    zmq_msg_close(&p->identity);
    if (p->has_keys)
        zmq_msg_close(&p->keys);
    free(p);
}

void zp_parked_fini(zp_parked_queue *q)
{
    zp_parked *p;
    while ((p = zp_parked_pop(q)))
        zp_parked_free(p);
}
