/*
 * parked.h - the pulls waiting on a table (a FIFO), each owning a copy of
 * its requester's routing identity and, for a sparse table, of its ids.
 *
 * The queue stores; the op that parked a pull names how it is answered
 * (zp_parked.path), so serving the queue needs no test of the table's kind.
 */
#ifndef ZP_PARKED_H
#define ZP_PARKED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <zmq.h>

#include "cpull.h"

typedef struct zp_parked zp_parked;
typedef struct zp_server zp_server;
struct zp_table;

/* How a parked pull is answered: set by the op file that parked it. */
typedef struct zp_parked_path {
    bool (*ready)(const zp_server *s, const struct zp_table *t, const zp_parked *p);
    void (*serve)(zp_server *s, struct zp_table *t, zp_parked *p); /* p is not freed */
} zp_parked_path;

/* A pull waiting for its clock (BSP/SSP). */
struct zp_parked {
    zp_parked *next;
    const zp_parked_path *path;
    zmq_msg_t identity;
    uint64_t req_id;
    uint32_t rank;
    uint64_t seq;
    uint64_t offset, count;
    int64_t clock;
    double since_s; /* when it was parked */
    zmq_msg_t keys; /* sparse tables: the ids asked for */
    bool has_keys;
    zp_cpull_req cp;      /* a compressed pull (cp.codec != NULL) */
    uint64_t cold_tag;    /* a sparse pull's cold rows being read (tier/fetch.h); 0: none */
    uint32_t cold_pieces; /* ... in that many reads still out (op/sparse_ops.c) */
};

typedef struct zp_parked_queue {
    zp_parked *head;
    zp_parked **tail;
    size_t n;
} zp_parked_queue;

void zp_parked_init(zp_parked_queue *q);

/* A parked pull with a copy of `identity` (the caller keeps its own). */
zp_parked *zp_parked_new(const zmq_msg_t *identity);

/* Append p; the queue takes it. */
void zp_parked_push(zp_parked_queue *q, zp_parked *p);

/* Remove and return the first pull whose path says it is ready, scanning
 * from the head in order; NULL if none. The caller owns what it gets. */
zp_parked *zp_parked_take_ready(zp_parked_queue *q, const zp_server *s, const struct zp_table *t);

/* Remove and return the first pull pred(p, arg) accepts, in order; NULL
 * if none. The caller owns what it gets. */
zp_parked *zp_parked_take_if(zp_parked_queue *q, bool (*pred)(const zp_parked *p, void *arg),
                             void *arg);

/* Remove and return the head, NULL if empty. The caller owns it. */
zp_parked *zp_parked_pop(zp_parked_queue *q);

/* Rank's parked request seq (a retry is a keep-alive), NULL if none; the
 * queue keeps it. */
const zp_parked *zp_parked_find(const zp_parked_queue *q, uint32_t rank, uint64_t seq);

/* Close what a parked pull holds and free it. */
void zp_parked_free(zp_parked *p);

/* Free every parked pull. */
void zp_parked_fini(zp_parked_queue *q);

#endif
