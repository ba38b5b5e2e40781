/*
 * push.c - PUSH: the path of a gradient from the wire into a table.
 *
 * Check the request (worker, table, range, duplicate window, payload size,
 * version, clock, finiteness) before touching anything - finiteness of a
 * push the policy applies on arrival is checked in the pass that applies
 * it (zp_push.unchecked: the table's kernel refuses it with nothing
 * applied), so the gradient is read once; hand the values to
 * the policy (s->cons->push), which applies, keeps or drops them and says
 * which in a zp_push_result; then record it (record.c), hand a BSP round's
 * push to a replicated primary's round batch (repl/rbatch.h), start a
 * snapshot when it closed a BSP round (state/persist.c), count, advance the
 * clock (ZP_FLAG_CLOCK), reply, and serve the pulls the update may have
 * released. On a backup replaying a round entry (op/batch.c) the push comes
 * without values (zp_request.phantom) and only its checks and bookkeeping
 * run; its round closes on the sum the entry gives.
 * Values are read in place from the ZeroMQ frame; a compressed push is
 * decoded first (into a frame of its own when the policy holds frames, into
 * the table's scratch otherwise). A sparse table's push is sparse_ops.c's.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "finite.h"
#include "now.h"
#include "ops.h"
#include "server.h"
#include "zeps_errors.h"

#define ERRLEN 512

/* A payload frame's floats, 4-byte aligned. */
static const float *aligned_values(zmq_msg_t *frame)
{
    return zp_request_aligned(frame, 4);
}

/* A compressed push's codec, after checking the payload against its rules
 * (nothing reads it before). Returns NULL after replying with an error. */
static const zp_codec_ops *checked_codec(zp_server *s, zp_request *r, zp_table *t)
{
    const Zeps__Header *h = r->h;
    const zp_codec_ops *codec = zp_codec_by_id(h->codec);
    if (!codec) {
        zp_reply_error(s, r->identity, h, ZEPS_EPROTO, "unknown codec %u in a PUSH to table '%s'",
                       h->codec, t->name);
        return NULL;
    }
    char err[ERRLEN];
    int rc = codec->validate(zmq_msg_data(r->payload), zmq_msg_size(r->payload), (size_t)h->count,
                             err, sizeof(err));
    if (rc != 0) {
        zp_reply_error(s, r->identity, h, rc, "%s push to table '%s' from worker %u: %s",
                       codec->name, t->name, h->rank, err);
        return NULL;
    }
    return codec;
}

/* A compressed push to a policy that holds frames: replace the frame with
 * the decoded f32 values, so the rest of the path sees plain floats.
 * Returns 0, or -1 after replying with an error. */
static int decode_to_frame(zp_server *s, zp_request *r, zp_table *t)
{
    const Zeps__Header *h = r->h;
    double t0 = zp_now_s();
    const zp_codec_ops *codec = checked_codec(s, r, t);
    if (!codec)
        return -1;
    zmq_msg_t dec;
    if (zmq_msg_init_size(&dec, h->count * sizeof(float)) != 0) {
        zp_reply_error(s, r->identity, h, ZEPS_ENOMEM, "cannot decode %" PRIu64 " elements",
                       h->count);
        return -1;
    }
    codec->decode(zmq_msg_data(r->payload), zmq_msg_size(r->payload), (size_t)h->count,
                  zmq_msg_data(&dec));
    zmq_msg_close(r->payload);
    zmq_msg_init(r->payload);
    zmq_msg_move(r->payload, &dec);
    t->stats.decode_s += zp_now_s() - t0;
    return 0;
}

/* A compressed push applied before the next message is read: a topk/randk
 * payload goes to the update as it is where the optimizer and the policy
 * allow (p->sparse_codec, O(k)); any other is decoded into the table's
 * scratch (p->g), with no allocation per push. Returns 0, or -1 after
 * replying with an error. */
static int decode_in_place(zp_server *s, zp_request *r, zp_table *t, zp_push *p)
{
    const Zeps__Header *h = r->h;
    double t0 = zp_now_s();
    const zp_codec_ops *codec = checked_codec(s, r, t);
    if (!codec)
        return -1;
    const void *buf = zmq_msg_data(r->payload);
    size_t len = zmq_msg_size(r->payload);
    if ((codec->id == ZP_CODEC_TOPK || codec->id == ZP_CODEC_RANDK) && !s->cons->needs_values(s) &&
        zp_table_sparse_ok(t)) {
        p->sparse_codec = codec;
        p->sparse_buf = buf;
        p->sparse_len = len;
    } else {
        float *scratch = zp_table_push_scratch(t);
        if (!scratch) {
            zp_reply_error(s, r->identity, h, ZEPS_ENOMEM,
                           "no memory to decode pushes to table '%s'", t->name);
            return -1;
        }
        codec->decode(buf, len, (size_t)h->count, scratch);
        p->g = scratch;
    }
    t->stats.decode_s += zp_now_s() - t0;
    return 0;
}

/* The payload as values: decoded if compressed, sized, aligned, finite.
 * Fills p->g (or p->sparse_*). Returns 0, or -1 after replying. */
static int checked_values(zp_server *s, zp_request *r, zp_table *t, zp_push *p)
{
    const Zeps__Header *h = r->h;
    bool in_place = h->codec != 0 && !s->cons->holds_frames;
    if (in_place ? decode_in_place(s, r, t, p) != 0
                 : h->codec != 0 && decode_to_frame(s, r, t) != 0)
        return -1;
    size_t bytes = zmq_msg_size(r->payload);
    if (!in_place && bytes != h->count * sizeof(float)) {
        zp_reply_error(s, r->identity, h, ZEPS_ESIZE,
                       "PUSH of %" PRIu64
                       " elements to table '%s' carries %zu bytes, expected %" PRIu64,
                       h->count, t->name, bytes, h->count * (uint64_t)sizeof(float));
        return -1;
    }
    if (in_place)
        return 0; /* a validated payload is finite already: validate checked every value */
    p->g = aligned_values(r->payload);
    return 0;
}

/* The version the push was computed from, checked against the slice's;
 * -1 after replying. A push read before a restore took the slice back
 * counts as read now (tau 0); so does one to a piece of a table placed by
 * range, whose client keeps one version per shard, not per piece
 * (docs/elastic.md, "Dense tables by range"). */
static int checked_version(zp_server *s, zp_request *r, zp_table *t, uint64_t *out)
{
    const Zeps__Header *h = r->h;
    uint64_t v = h->data_version;
    if (v > t->version && (s->epoch > 0 || zp_densemap_names(zp_slotmap_dense(s->slots), t->name)))
        v = t->version;
    if (v > t->version) {
        zp_reply_error(s, r->identity, h, ZEPS_EINVAL,
                       "PUSH to table '%s' claims it was computed from version %" PRIu64
                       ", but shard %d's slice is only at version %" PRIu64,
                       t->name, h->data_version, s->shard, t->version);
        return -1;
    }
    if (zp_request_clock(s, r) != 0)
        return -1;
    *out = v;
    return 0;
}

/* Every check of a dense push; fills *p. Returns 0, or -1 after replying. */
static int checked_push(zp_server *s, zp_request *r, zp_table *t, zp_push *p)
{
    const Zeps__Header *h = r->h;
    if (r->phantom) { /* its values are in its round's sum (op/batch.c) */
        *p = (zp_push){.rank = h->rank,
                       .clock = h->clock,
                       .data_version = h->data_version,
                       .off = h->offset - t->begin,
                       .count = h->count};
        return checked_version(s, r, t, &p->data_version);
    }
    if (r->npayload != 1) {
        zp_reply_error(s, r->identity, h, ZEPS_EPROTO,
                       "PUSH must carry exactly one values frame, got %d", r->npayload);
        return -1;
    }
    *p = (zp_push){.rank = h->rank,
                   .clock = h->clock,
                   .data_version = h->data_version,
                   .off = h->offset - t->begin,
                   .count = h->count,
                   .frame = r->payload};
    bool in_place = h->codec != 0 && !s->cons->holds_frames;
    if (checked_values(s, r, t, p) != 0 || checked_version(s, r, t, &p->data_version) != 0)
        return -1;
    if (!s->cfg.reject_nonfinite || in_place)
        return 0;
    if (!s->cons->holds_frames) {
        /* Applied on arrival: the policy checks it while applying, reading
         * it once; the frame is closed after the reply, so the kernel may
         * consume it (zp_push.unchecked, g_own). */
        p->unchecked = true;
        /* a replicated shard's log holds this frame for its backups: the
         * kernel must leave it as it came (found by the bench: an sgd
         * table's backups applied the old weights written into it) */
        p->g_own = s->repl.on ? NULL : zmq_msg_data(r->payload);
        return 0;
    }
    if (!zp_finite_all(p->g, h->count)) { /* kept for a round: refused before it is held */
        zp_reply_error(s, r->identity, h, ZEPS_ENONFINITE,
                       "PUSH to table '%s' from worker %u contains NaN or Inf; nothing applied",
                       t->name, h->rank);
        return -1;
    }
    return 0;
}

static void count_push(zp_table *t, zp_worker *w, size_t wire, uint64_t raw)
{
    w->pushes++;
    t->stats.pushes++;
    t->stats.push_bytes_wire += wire;
    t->stats.push_bytes_raw += raw;
    w->push_bytes_wire += wire;
    w->push_bytes_raw += raw;
}

/* What follows an applied push, sparse or dense: the clock, the reply, the
 * pulls it released. */
static void finish(zp_server *s, zp_request *r, zp_worker *w, zp_table *t, uint32_t flags)
{
    const Zeps__Header *h = r->h;
    zp_turns_done(s, t, h->rank);
    if (h->flags & ZP_FLAG_CLOCK)
        zp_clock_advance(s, w, h->clock);
    zp_reply_ok(s, r->identity, h, flags);
    if (h->flags & ZP_FLAG_CLOCK)
        zp_pull_serve_all(s);
    else
        zp_pull_serve_parked(s, t);
}

void zp_push_on(zp_server *s, zp_request *r)
{
    const Zeps__Header *h = r->h;
    zp_worker *w = zp_request_worker(s, r);
    zp_table *t = w ? zp_request_table(s, r) : NULL;
    if (!t)
        return;
    /* a resend of a push applied here is a duplicate, whatever the map
     * says now: checked before the range, which may have moved since */
    if (zp_workers_seen(w, h->seq)) {
        w->duplicates++;
        zp_reply_ok(s, r->identity, h, ZP_FLAG_DUPLICATE);
        return;
    }
    if (!t->rows && zp_request_range(s, r, &t) != 0)
        return;
    uint32_t flags;
    if (t->rows) {
        if (zp_sparse_ops_on_push(s, r, w, t, &flags) == 0)
            finish(s, r, w, t, flags);
        return;
    }
    /* before any decode */
    size_t wire_bytes = r->phantom ? r->wire : r->payload ? zmq_msg_size(r->payload) : 0;
    zp_push p;
    if (checked_push(s, r, t, &p) != 0)
        return;
    char err[ERRLEN];
    zp_push_result res = {0};
    int rc = s->cons->push(s, t, &p, &res, err, sizeof(err));
    if (rc != 0) {
        zp_reply_error(s, r->identity, h, rc, "%s", err);
        return;
    }
    zp_record_result(s, t, &p, &res);
    /* a replicated primary logs a round's pushes as one entry (repl/rbatch.h) */
    if (res.outcome == ZP_PUSH_KEPT || res.outcome == ZP_PUSH_ROUND_CLOSED)
        zp_rnote_round_push(s, t->id, wire_bytes, &res.sum, t->n);
    free(res.sum);
    if (res.outcome == ZP_PUSH_ROUND_CLOSED)
        zp_persist_on_round(s);
    zp_workers_record(w, h->seq);
    count_push(t, w, wire_bytes, h->count * sizeof(float));
    finish(s, r, w, t, res.reply_flags);
}
