/*
 * stats.c - STATS: a snapshot of the shard's counters, histograms and
 * per-worker state in one reply (zepsctl stats, the staleness study). The
 * same snapshot (zp_stats_fill) is what /metrics renders (server/metrics.c),
 * so the two always agree. The records point into the live histograms; the
 * arrays holding them belong to the view and are freed by
 * zp_stats_view_fini once the reply is packed and sent.
 */
#include <stdlib.h>

#include "alloc.h"
#include "modes.h"
#include "move.h"
#include "now.h"
#include "ops.h"
#include "server.h"
#include "stats.h"

/* The shard's place in its replica set (repl/role.h) and its log
 * (repl/rlog.h). */
static void replica_stats(const zp_role *r, const zp_repl *log, Zeps__ShardStats *st)
{
    st->repl_lsn = log->lsn;
    st->repl_lag = zp_rlog_lag(log);
    st->repl_held = zp_rlog_held_count(log);
    st->repl_transfers = log->transfers;
    st->repl_round_entries = log->round_entries;
    st->repl_round_pushes = log->round_pushes;
    st->repl_flushed = log->flushed;
    st->repl_log_bytes = log->log_bytes;
    zp_coord_stats cs;
    zp_role_coord_stats(r, &cs);
    st->replicas = (uint32_t)r->replicas;
    st->replica = (uint32_t)r->replica;
    st->role = (char *)zp_role_kind_name(r->kind);
    st->epoch = r->epoch;
    st->primary_replica = r->primary_replica;
    st->primary = (char *)r->primary_endpoint;
    st->coord_session = (char *)zp_role_session_name(r->session);
    st->fenced = r->fenced;
    st->coord_sessions = cs.sessions;
    st->coord_suspensions = cs.suspensions;
    st->coord_expirations = cs.expirations;
    st->elections = cs.elections;
    st->coord_disconnected_s = cs.disconnected_s;
    st->role_changes = r->role_changes;
    st->in_sync = (uint32_t)zp_role_in_sync(r);
}

static void shard_stats(const zp_server *s, Zeps__ShardStats *st, double now)
{
    zeps__shard_stats__init(st);
    st->shard = (uint32_t)s->shard;
    st->num_shards = (uint32_t)s->nshards;
    st->num_workers = (uint32_t)s->nworkers;
    st->incarnation = s->incarnation;
    st->consistency = (char *)s->cons->name;
    st->caps = s->cons->caps;
    st->uptime_s = now - s->start_s;
    st->bytes_in = s->bytes_in;
    st->bytes_out = s->bytes_out;
    st->requests = s->requests;
    st->errors = s->errors;
    st->lost_workers = s->lost_total;
    st->rollbacks = s->rollbacks;
    st->snapshots_written = s->persist.written;
    st->last_snapshot_set = s->persist.last_setid;
    st->snapshot_failures = s->persist.failures;
    st->last_failed_set = s->persist.last_failed_setid;
    st->last_snapshot_s = s->persist.last_duration_s;
    st->restored_clock = s->restored_clock;
    st->curve = s->zap.enabled;
    st->curve_accepted = s->zap.accepted;
    st->curve_refused = s->zap.refused;
    st->max_tables = s->quota.max_tables;
    st->max_rows = s->quota.max_rows;
    st->max_bytes = s->quota.max_bytes;
    st->bytes_held = zp_quota_bytes_held(s->tables, s->ntables);
    st->rows_held = zp_quota_rows_held(s->tables, s->ntables);
    st->full_refused = s->quota.full_refused;
    st->log_suppressed = s->logs.refused.suppressed + s->logs.joined.suppressed +
                         s->logs.left.suppressed + s->logs.send.suppressed + s->zap.log.suppressed;
    replica_stats(&s->role, &s->repl, st);
    st->slot_epoch = zp_slotmap_epoch(s->slots);
    st->slots_owned = zp_slotmap_count(s->slots, s->shard);
    st->slots = zp_slotmap_slots(s->slots);
    if (s->move && s->move->doubt[0]) /* asked its target (op/move_ask.c) */
        st->move_doubt = (char *)s->move->doubt;
}

/* ts points into t, into th[0..TH_PER_TABLE) and into fp[0..ZP_FREQ_BUCKETS)
 * (which the caller owns). */
static void table_stats(const zp_server *s, const zp_table *t, Zeps__TableStats *ts,
                        Zeps__Histogram *th, Zeps__Histogram **fp)
{
    zeps__table_stats__init(ts);
    ts->id = t->id;
    ts->name = (char *)t->name;
    ts->length = t->length;
    ts->slice_begin = t->begin;
    ts->slice_end = t->end;
    ts->version = t->version;
    ts->pushes = t->stats.pushes;
    ts->pulls = t->stats.pulls;
    ts->bytes_param = zp_table_bytes(t);
    ts->optimizer = (char *)t->optimizer;
    ts->lr = t->lr_now;
    ts->lr_declared = t->lr_declared;
    ts->scans = t->stats.scans;
    ts->puts = t->stats.puts;
    ts->rounds = (uint64_t)t->round.closed;
    ts->parked = t->parked.n;
    zp_hist_to_pb(&t->stats.tau, &th[0]);
    zp_hist_to_pb(&t->stats.clock_gap, &th[1]);
    zp_hist_to_pb(&t->stats.pull_wait_us, &th[2]);
    ts->tau = &th[0];
    ts->clock_gap = &th[1];
    ts->pull_wait_us = &th[2];
    ts->n_tau_by_freq = zp_hist_freq_used(&t->stats.tau_by_freq);
    for (size_t b = 0; b < ts->n_tau_by_freq; b++) {
        zp_hist_freq_to_pb(&t->stats.tau_by_freq, b, &th[3 + b]);
        fp[b] = &th[3 + b];
    }
    ts->tau_by_freq = fp;
    ts->dropped = t->stats.dropped;
    ts->late = t->stats.late;
    ts->staleness = zp_ssp_bound(s, t);
    ts->push_bytes_wire = t->stats.push_bytes_wire;
    ts->push_bytes_raw = t->stats.push_bytes_raw;
    ts->decode_s = t->stats.decode_s;
    t->kind->stats(t, ts);
    ts->pull_bytes_wire = t->stats.pull_bytes_wire;
    ts->pull_bytes_raw = t->stats.pull_bytes_raw;
    ts->encode_s = t->stats.encode_s;
    ts->pull_resyncs = t->stats.pull_resyncs;
    ts->pull_view_bytes = zp_cpull_bytes(t);
}

static void worker_stats(const zp_server *s, const zp_worker *w, int rank, double now,
                         Zeps__WorkerStats *ws, Zeps__Histogram *wh)
{
    zeps__worker_stats__init(ws);
    ws->transport = (char *)zp_shmhost_transport(&s->shm, (uint32_t)rank);
    ws->shm_requests = zp_shmhost_requests(&s->shm, (uint32_t)rank);
    ws->rank = (uint32_t)rank;
    ws->clock = w->clock;
    ws->incarnation = w->incarnation;
    ws->pushes = w->pushes;
    ws->pulls = w->pulls;
    ws->duplicates = w->duplicates;
    ws->last_seen_s = now - w->last_seen_s;
    zp_hist_to_pb(&w->tau, wh);
    ws->tau = wh;
    ws->dropped = w->dropped;
    ws->late = w->late;
    ws->push_bytes_wire = w->push_bytes_wire;
    ws->push_bytes_raw = w->push_bytes_raw;
    ws->lost = w->lost;
    ws->left = w->left;
    ws->lost_count = w->lost_count;
    ws->seq_jumps = w->seq_jumps;
    ws->max_seq = w->max_seq;
    ws->seq_window = w->window;
    ws->parked = w->parked;
    ws->pull_bytes_wire = w->pull_bytes_wire;
    ws->pull_bytes_raw = w->pull_bytes_raw;
    ws->pull_resyncs = w->pull_resyncs;
}

void zp_stats_fill(const zp_server *s, zp_stats_view *v)
{
    double now = zp_now_s();
    Zeps__ShardStats *st = &v->st;
    shard_stats(s, st, now);
    size_t nt = s->ntables ? s->ntables : 1, nw = s->nworkers > 0 ? (size_t)s->nworkers : 1;
    v->ts = zp_alloc_zeroed(nt, sizeof(*v->ts));
    v->th = zp_alloc_zeroed(TH_PER_TABLE * nt, sizeof(*v->th));
    v->tfp = zp_alloc_zeroed(ZP_FREQ_BUCKETS * nt, sizeof(*v->tfp));
    v->tsp = zp_alloc_zeroed(nt, sizeof(*v->tsp));
    for (uint32_t i = 0; i < s->ntables; i++) {
        table_stats(s, s->tables[i], &v->ts[i], &v->th[TH_PER_TABLE * i],
                    &v->tfp[ZP_FREQ_BUCKETS * i]);
        v->tsp[i] = &v->ts[i];
    }
    st->n_tables = s->ntables;
    st->tables = v->tsp;
    v->ws = zp_alloc_zeroed(nw, sizeof(*v->ws));
    v->wh = zp_alloc_zeroed(nw, sizeof(*v->wh));
    v->wsp = zp_alloc_zeroed(nw, sizeof(*v->wsp));
    size_t k = 0;
    for (int i = 0; i < s->nworkers; i++) {
        const zp_worker *w = &s->workers.w[i];
        if (!w->joined && !w->rehello)
            continue;
        worker_stats(s, w, i, now, &v->ws[k], &v->wh[k]);
        v->wsp[k] = &v->ws[k];
        k++;
    }
    st->n_workers = k;
    st->workers = v->wsp;
}

void zp_stats_view_fini(zp_stats_view *v)
{
    free(v->ts);
    free(v->th);
    free(v->tfp);
    free(v->tsp);
    free(v->ws);
    free(v->wh);
    free(v->wsp);
}

/* A dense table's declaration, as a shard that joins is given it
 * (zepsctl shards add; without init segments, which a record does not
 * keep); the caller frees it. NULL if it does not encode. */
static Zeps__TableSpec *dense_spec(const zp_table *t)
{
    zp_snap_table st;
    zp_table_describe(t, &st);
    Zeps__TableSpec *spec = NULL;
    char err[128];
    if (t->kind->snap_spec(&st, &spec, err, sizeof(err)) != 0)
        return NULL;
    return spec;
}

void zp_stats_on(zp_server *s, zp_request *r)
{
    zp_stats_view v;
    zp_stats_fill(s, &v);
    Zeps__Header rep;
    zp_reply_init(s, r->h, &rep);
    rep.stats = &v.st;
    for (uint32_t i = 0; (r->h->flags & ZP_FLAG_SPECS) && i < s->ntables; i++)
        if (s->tables[i]->rows)
            v.ts[i].spec = s->tables[i]->rows->spec; /* borrowed until the reply is packed */
        else
            v.ts[i].spec = dense_spec(s->tables[i]); /* ours, freed below */
    rep.num_shards = (uint32_t)s->nshards;
    rep.num_workers = (uint32_t)s->nworkers;
    zp_reply_send(s, r->identity, &rep, NULL, 0, NULL, NULL);
    for (uint32_t i = 0; (r->h->flags & ZP_FLAG_SPECS) && i < s->ntables; i++)
        if (!s->tables[i]->rows && v.ts[i].spec)
            zeps__table_spec__free_unpacked(v.ts[i].spec, NULL);
    zp_stats_view_fini(&v);
}
