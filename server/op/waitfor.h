/*
 * waitfor.h - what a held request waits for (waitfor.c).
 */
#ifndef ZP_WAITFOR_H
#define ZP_WAITFOR_H

#include <stdbool.h>
#include <stdint.h>

#include <zmq.h>

#include "parked.h"
#include "zeps.pb-c.h"

typedef struct zp_server zp_server;
typedef struct zp_table zp_table;

#define ZP_WAITFOR_LISTLEN 256

/* Mark (mark[i] = 1, mark has s->nworkers entries) the ranks parked pull
 * p of table t waits for; returns how many. */
int zp_waitfor_pull(const zp_server *s, const zp_table *t, const zp_parked *p, unsigned char *mark);
/* The same for a worker waiting in the barrier. */
int zp_waitfor_barrier(const zp_server *s, unsigned char *mark);
/* "1, 3 (lost 12 s ago), 4 (left 3 s ago), 5 (never joined)" for the
 * marked ranks, cut to the buffer. */
void zp_waitfor_list(const zp_server *s, const unsigned char *mark, double now, char *buf,
                     size_t len);
/* Answer a retry of parked pull p of table t PARKED, with what it waits
 * for as the reply's text (the worker logs it). */
void zp_waitfor_reply_parked(zp_server *s, zmq_msg_t *identity, const Zeps__Header *req,
                             const zp_table *t, const zp_parked *p);

#endif
