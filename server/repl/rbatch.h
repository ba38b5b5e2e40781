/*
 * rbatch.h - a replicated primary's bsp round entry (docs/replication.md,
 * "Replication after aggregation"): the dense bsp pushes whose rounds are
 * still open are not logged one by one; they wait here, in the order they
 * were applied, with their replies, until every round they belong to has
 * closed. Then ONE entry carries them all without their values (each
 * push's header: rank, seq, clock, flags, version read) and the sums of
 * the rounds they closed, as applied; a backup replays the pushes in the
 * same order through the same handlers (op/batch.c), taking each round's
 * sum instead of summing values it never received, and reaches the same
 * bits. If anything else must be logged first, the waiting pushes are
 * logged one by one as they arrived (a flush), which is what a backup
 * applied before this existed.
 *
 * A worker's CLOCK handled while the batch holds pushes joins it too (its
 * header says everything it does): a shard that holds none of a step's
 * last table gets the step's clock alone, between the step's pushes.
 *
 * A sparse bsp push kept for its round joins it the same way, without its
 * rows (each worker's rows for a clock are merged when every live worker
 * finished the clock, policy/bsp.c): the request whose clock closed sparse
 * rounds (a CLOCK, or a push carrying ZP_FLAG_CLOCK) carries each round's
 * merge as the primary applied it: ids in the order applied, the summed
 * gradient rows, the row versions read. A backup applies the same merge
 * through the same code (zp_sparse_push), so row values, optimizer state,
 * versions, touches, frequencies, admission and evictions follow as on the
 * primary; the merge is smaller than the rows it produced with their
 * optimizer state.
 *
 * The entry (a PUSH request with ZP_FLAG_ROUND, `count` items, frames
 * after its header):
 *   items: per push (or CLOCK), little-endian: u32 header length, u32 flags (bit 0:
 *          it closed its round; bit 1: it closed sparse rounds), u64 payload bytes as
 *          received, u64 where its round's sum starts in `sums` (floats; 0 unless it
 *          closed one), with bit 1 a u64: where its sparse rounds start in the rows
 *          (bytes), then its packed request header; after the `count` items, when an
 *          item has bit 1, from the next 8-byte boundary, the rows: per such item u32
 *          n, u32 0, then n merges: u32 table, u32 flags (bit 0: versions), i64 clock,
 *          u64 rows, u32 dim, u32 0, the ids (u64), rows * dim f32, with bit 0 the
 *          versions (u32), padded to 8 bytes;
 *   sums:  the sums, f32, one table slice after another.
 *
 * This module keeps the batch and encodes and decodes the entry; rlog.c
 * decides when it is logged. Threading: the shard's loop thread only.
 */
#ifndef ZP_REPL_BATCH_H
#define ZP_REPL_BATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <zmq.h>

#include "wire.h"
#include "workers.h"

#define ZP_RBATCH_MAX 4096 /* pushes a batch holds at most; the next one flushes it */
/* How long a batch holding sparse pushes of an open round waits after its
 * last new item before it is flushed (its requests logged one by one, as
 * they came, and their replies let go once acknowledged). A sparse round
 * closes when every worker finished the clock, so a client that waits for
 * its push's reply before it sends its CLOCK would wait for ever on a
 * batch that holds that reply: when every worker that has not finished
 * the round waits so (its last request is in the batch), the batch waits
 * STUCK; otherwise, in case a worker waits on something that waits for
 * one of these (another shard's batch, a barrier), IDLE. */
#define ZP_RBATCH_STUCK_S 0.010
#define ZP_RBATCH_IDLE_S  1.0

typedef struct zp_repl_entry {
    uint64_t lsn;
    uint64_t epoch; /* of the primary that logged it */
    int n;          /* frames: the request's header, then its payloads */
    size_t bytes;
    zmq_msg_t f[ZP_MAX_FRAMES - 1];
} zp_repl_entry;

/* A reply held until its entry is in every in-sync backup. */
typedef struct zp_repl_held {
    uint64_t lsn; /* in a batch: the index of the push it answers */
    zmq_msg_t identity;
    void *header; /* packed reply header */
    size_t header_len;
    void *data; /* payload (owned: freed by ffn, or a copy freed with free) */
    size_t len;
    zmq_free_fn *ffn;
    void *hint;
    double at_s;
} zp_repl_held;

/* Close a held reply unsent: its identity, header and payload (ffn or
 * free). */
void zp_rbatch_held_close(zp_repl_held *h);

/* A push waiting in the batch. */
typedef struct zp_repl_item {
    zp_repl_entry e; /* its request's frames (new references), logged alone on a flush */
    uint32_t table;
    uint32_t rank; /* its worker, and its seq: the reply that worker may wait for */
    uint64_t seq;
    bool sparse; /* a sparse push, of round `clock` of `table` */
    int64_t clock;
    bool closes;     /* it closed its table's round */
    bool closed;     /* its round has closed (by it or a later push) */
    uint64_t wire;   /* its payload's bytes as received */
    uint64_t sum_at; /* closes: where its round's sum starts in `sums` (floats) */
    bool has_rows;   /* it closed sparse rounds: their merges start at rows_at in `rows` */
    uint64_t rows_at;
} zp_repl_item;

/* Merges of sparse rounds being encoded (records of the rows frame). */
typedef struct zp_rbatch_buf {
    uint8_t *p; /* owned */
    size_t len, cap;
    uint32_t nrec;
} zp_rbatch_buf;

/* One merge as read from a rows frame (views into it, unaligned). */
typedef struct zp_rbatch_rec {
    uint32_t table;
    int64_t clock;
    uint64_t n;
    uint32_t dim;
    const uint8_t *ids, *g, *vers; /* vers NULL: none */
} zp_rbatch_rec;

typedef struct zp_repl_batch {
    zp_repl_item *items;
    size_t n, cap;
    size_t open;  /* items whose round has not closed */
    size_t npush; /* items that are pushes (the others: CLOCKs) */
    float *sums;  /* owned; moves into the entry */
    size_t nsums, capsums;
    zp_repl_held *held; /* the items' replies, lsn = the item's index */
    size_t nheld, capheld;
    zp_rbatch_buf rows; /* the sparse rounds' merges (records, grouped per item) */
    double last_s;      /* when the last item was added */
} zp_repl_batch;

/* One push of a round entry, as read by zp_rbatch_read (views into the
 * items frame). */
typedef struct zp_rbatch_view {
    const uint8_t *header;
    uint32_t header_len;
    bool closes;
    uint64_t wire;
    uint64_t sum_at;
    bool has_rows;
    uint64_t rows_at;
} zp_rbatch_view;

/* Free everything the batch holds, its held replies included (dropped
 * unanswered), and leave it empty. */
void zp_rbatch_fini(zp_repl_batch *b);

/* Add a push: frames f[0..n) (new references are kept), its table, its
 * payload's bytes; `sum` (nsum floats) when it closed its table's round:
 * on return the batch owns *sum and *sum is NULL. The push's replies
 * follow with zp_rbatch_hold. */
void zp_rbatch_add(zp_repl_batch *b, zmq_msg_t *f, int n, uint32_t table, uint64_t wire,
                   float **sum, size_t nsum);

/* Add a request that is no push but whose header says all it does (a
 * CLOCK): it is replayed in its place among the pushes. */
void zp_rbatch_add_plain(zp_repl_batch *b, zmq_msg_t *f, int n);

/* Add a sparse push kept for round `clock` of `table` (frames f[0..n):
 * new references are kept; its rows stay out of the entry). */
void zp_rbatch_add_sparse(zp_repl_batch *b, zmq_msg_t *f, int n, uint32_t table, int64_t clock,
                          uint64_t wire);

/* Say who sent the last item added (rank, seq). */
void zp_rbatch_sender(zp_repl_batch *b, uint32_t rank, uint64_t seq);

/* Append the merge of round `clock` of sparse `table` to *buf: ids[0..n),
 * g[0..n*dim), vers[0..n) or NULL (all copied). */
void zp_rbatch_rows_put(zp_rbatch_buf *buf, uint32_t table, int64_t clock, const uint64_t *ids,
                        size_t n, const float *g, uint32_t dim, const uint32_t *vers);

/* The last item added closed the sparse rounds whose merges *recs holds:
 * they go into the entry with it, and the items of those rounds are
 * closed. *recs is left empty (its buffer kept). */
void zp_rbatch_attach_rows(zp_repl_batch *b, zp_rbatch_buf *recs);

/* Read the merge at *off of a rows frame (p, len) and move *off past it.
 * 0, or -1 if what is there is not a whole merge. */
int zp_rbatch_rec_read(const uint8_t *p, size_t len, size_t *off, zp_rbatch_rec *rec);

/* Read the count of merges of the group at *off (an item's rows_at) and
 * move *off past it; 0, or -1. */
int zp_rbatch_rows_group(const uint8_t *p, size_t len, size_t *off, uint32_t *count);

/* How long the batch may wait after its last item before it is flushed:
 * -1 if it holds no sparse push of an open round; ZP_RBATCH_STUCK_S if
 * every worker that counts towards the rounds (not gone, `lost_continue`
 * as the bounds count them) and has not finished the oldest such round
 * last sent a request the batch holds the reply of (its highest seq is an
 * item's): nothing can close the round until the batch lets its replies
 * go; else ZP_RBATCH_IDLE_S. */
double zp_rbatch_patience(const zp_repl_batch *b, const zp_workers *ws, bool lost_continue);

/* Keep reply *h (moved: the caller forgets it) with the last push added. */
void zp_rbatch_hold(zp_repl_batch *b, const zp_repl_held *h);

/* Every push of the batch has its round closed: it can be logged as one entry. */
bool zp_rbatch_ready(const zp_repl_batch *b);

/* The entry's frames: f[0] its header (a PUSH with ZP_FLAG_ROUND, count =
 * items), f[1] the items (and the sparse rounds' merges), f[2] the sums
 * (the batch's buffer, moved into the frame). The caller owns the three
 * frames. Returns 3. */
int zp_rbatch_entry(zp_repl_batch *b, zmq_msg_t f[3]);

/* Where the rows start in an items frame whose items end at items_end. */
size_t zp_rbatch_rows_start(size_t items_end);

/* Forget the pushes (their frames closed) and sums; held replies must have
 * been taken already (nheld 0). */
void zp_rbatch_clear(zp_repl_batch *b);

/* Read the push at *off of an items frame (p, len) and move *off past it.
 * 0, or -1 if what is there is not a whole item. */
int zp_rbatch_read(const uint8_t *p, size_t len, size_t *off, zp_rbatch_view *v);

#endif
