/*
 * metrics.c - a shard's state in the Prometheus text exposition format
 * (version 0.0.4), for GET /metrics. Every figure STATS also reports is read
 * from the same zp_stats_view (op/stats.c), so `zepsctl stats` and a scrape
 * taken between the same two requests agree exactly; what STATS does not
 * carry (requests by op, handling time, errors by code, the listener's own
 * counters, the process's memory) is read from zp_server here.
 *
 * Names follow Prometheus conventions: the zeps_ prefix, _total on
 * counters, base units (seconds, bytes) in the name. Label sets are bounded
 * (docs/operations.md lists them): op (12 values; "error" is never a
 * request), code (the zeps_err table), table (the declared tables), rank (only when the cluster has
 * at most ZP_METRICS_MAX_RANKS workers), and small fixed sets (direction, encoding, reason,
 * result).
 */
#include "metrics.h"

#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "now.h"
#include "server.h"
#include "stats.h"
#include "zeps_errors.h"

static const char *const op_names[ZP_SERVER_OPS] = {
    "invalid", "hello", "declare", "pull",     "push",      "clock", "barrier",
    "stats",   "bye",   "error",   "snapshot", "rollback",  "evict", "finish",
    "tune",    "scan",  "put",     "follow",   "replicate", "slots", "move",
};

/* tau and clock gap: bucket i = exactly i (63 = 63 or more); these are the
 * le bounds exported (cumulative counts are exact at each). */
static const int lin_le[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 16, 20, 24, 32, 48, 62};
/* log2 microsecond histograms: bucket 0 = [0, 1) us, i = [2^(i-1), 2^i) us */
#define LOG2_TOP 27 /* le up to 2^26 us = 67 s, then +Inf */

static void head(zp_http_reply *r, const char *name, const char *type, const char *help)
{
    zp_http_printf(r, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* A label value with \ " and newline escaped, as the format requires. */
static void label_value(char *out, size_t cap, const char *v)
{
    size_t k = 0;
    for (; *v && k + 3 < cap; v++) {
        if (*v == '\\' || *v == '"' || *v == '\n') {
            out[k++] = '\\';
            out[k++] = *v == '\n' ? 'n' : *v;
        } else {
            out[k++] = *v;
        }
    }
    out[k] = '\0';
}

static void gauge1(zp_http_reply *r, const char *name, const char *help, double v)
{
    head(r, name, "gauge", help);
    zp_http_printf(r, "%s %.17g\n", name, v);
}

static void counter1(zp_http_reply *r, const char *name, const char *help, uint64_t v)
{
    head(r, name, "counter", help);
    zp_http_printf(r, "%s %" PRIu64 "\n", name, v);
}

/* One histogram series: labels is "" or `k="v",` (with the comma). */
static void hist_series(zp_http_reply *r, const char *name, const char *labels,
                        const Zeps__Histogram *h, bool log2_us)
{
    uint64_t cum = 0;
    size_t b = 0;
    int nle = log2_us ? LOG2_TOP : (int)(sizeof(lin_le) / sizeof(lin_le[0]));
    for (int i = 0; i < nle; i++) {
        size_t upto = log2_us ? (size_t)i : (size_t)lin_le[i];
        for (; b <= upto && b < h->n_counts; b++)
            cum += h->counts[b];
        if (log2_us)
            zp_http_printf(r, "%s_bucket{%sle=\"%.9g\"} %" PRIu64 "\n", name, labels,
                           (double)(1ull << i) * 1e-6, cum);
        else
            zp_http_printf(r, "%s_bucket{%sle=\"%d\"} %" PRIu64 "\n", name, labels, lin_le[i], cum);
    }
    zp_http_printf(r, "%s_bucket{%sle=\"+Inf\"} %" PRIu64 "\n", name, labels, h->n);
    size_t ll = strlen(labels);
    char bare[200];
    snprintf(bare, sizeof(bare), "%.*s", ll ? (int)ll - 1 : 0, labels); /* no trailing comma */
    const char *open = ll ? "{" : "", *close = ll ? "}" : "";
    if (log2_us)
        zp_http_printf(r, "%s_sum%s%s%s %.17g\n", name, open, bare, close, (double)h->sum * 1e-6);
    else
        zp_http_printf(r, "%s_sum%s%s%s %" PRIu64 "\n", name, open, bare, close, h->sum);
    zp_http_printf(r, "%s_count%s%s%s %" PRIu64 "\n", name, open, bare, close, h->n);
}

static void shard_metrics(const zp_server *s, const Zeps__ShardStats *st, zp_http_reply *r)
{
    char cons[64];
    label_value(cons, sizeof(cons), st->consistency);
    head(r, "zeps_shard_info", "gauge", "This shard: index, shard count and consistency mode.");
    zp_http_printf(r, "zeps_shard_info{shard=\"%u\",num_shards=\"%u\",consistency=\"%s\"} 1\n",
                   st->shard, st->num_shards, cons);
    gauge1(r, "zeps_uptime_seconds", "Seconds since this shard process started.", st->uptime_s);
    counter1(r, "zeps_requests_total", "Requests received (all ops; STATS requests).",
             st->requests);
    head(r, "zeps_op_requests_total", "counter",
         "Requests received by op (op=invalid: no readable header or no such op).");
    for (int i = 0; i < ZP_SERVER_OPS; i++)
        if (i != ZEPS__OP__ERROR)
            zp_http_printf(r, "zeps_op_requests_total{op=\"%s\"} %" PRIu64 "\n", op_names[i],
                           s->op_requests[i]);
    counter1(r, "zeps_errors_total", "ERROR replies sent (STATS errors).", st->errors);
    head(r, "zeps_op_errors_total", "counter",
         "ERROR replies sent, by the op answered and the zeps_err code name (only those seen).");
    for (int i = 0; i < ZP_SERVER_OPS; i++)
        for (int c = 0; c < ZP_SERVER_CODES; c++)
            if (s->errors_by[i][c] > 0)
                zp_http_printf(r, "zeps_op_errors_total{op=\"%s\",code=\"%s\"} %" PRIu64 "\n",
                               op_names[i], c ? zeps_errname(c) : "UNKNOWN", s->errors_by[i][c]);
    head(r, "zeps_op_duration_seconds", "histogram",
         "Time this shard spent handling a request, by op (a parked pull's wait excluded).");
    for (int i = 0; i < ZP_SERVER_OPS; i++) {
        if (s->op_handle_us[i].n == 0)
            continue;
        char labels[40];
        snprintf(labels, sizeof(labels), "op=\"%s\",", op_names[i]);
        Zeps__Histogram h;
        zp_hist_to_pb(&s->op_handle_us[i], &h);
        hist_series(r, "zeps_op_duration_seconds", labels, &h, true);
    }
    head(r, "zeps_network_bytes_total", "counter",
         "Bytes of ZeroMQ messages received and sent (STATS bytes_in, bytes_out).");
    zp_http_printf(r, "zeps_network_bytes_total{direction=\"in\"} %" PRIu64 "\n", st->bytes_in);
    zp_http_printf(r, "zeps_network_bytes_total{direction=\"out\"} %" PRIu64 "\n", st->bytes_out);
}

/* The shard's place in its replica set (docs/replication.md); with one
 * replica: primary at epoch 0, coordination off. */
static void replica_metrics(const Zeps__ShardStats *st, zp_http_reply *r)
{
    static const char *const roles[] = {"primary", "backup", "none"};
    static const char *const sessions[] = {"off",       "connecting", "connected",
                                           "suspended", "expired",    "unreachable"};
    gauge1(r, "zeps_replicas", "Processes per shard (cluster.replicas).", st->replicas);
    gauge1(r, "zeps_replica_index", "This process's replica index.", st->replica);
    head(r, "zeps_replica_role", "gauge", "1 for this replica's role, 0 for the others.");
    for (size_t i = 0; i < 3; i++)
        zp_http_printf(r, "zeps_replica_role{role=\"%s\"} %d\n", roles[i],
                       strcmp(st->role, roles[i]) == 0);
    gauge1(r, "zeps_replica_epoch", "The primary's epoch as this replica knows it.", st->epoch);
    gauge1(r, "zeps_replica_primary_index", "The primary's replica index (-1: none known).",
           st->primary_replica);
    gauge1(r, "zeps_replica_in_sync", "Replicas in the shard's in-sync set as last heard.",
           st->in_sync);
    gauge1(r, "zeps_replica_log_entry",
           "The replication log's last entry (primary) or the last one applied (backup).",
           st->repl_lsn);
    gauge1(r, "zeps_replica_lag_entries",
           "Primary: log entries the furthest following backup has not applied.", st->repl_lag);
    gauge1(r, "zeps_replica_held_replies",
           "Primary: replies held until every in-sync backup applied their entry.", st->repl_held);
    counter1(r, "zeps_replica_transfers_total",
             "Whole-state transfers sent (primary) or taken (backup).", st->repl_transfers);
    counter1(r, "zeps_replica_round_entries_total",
             "bsp round entries logged (primary) or applied (backup).", st->repl_round_entries);
    counter1(r, "zeps_replica_round_pushes_total",
             "Pushes the bsp round entries carried without their values.", st->repl_round_pushes);
    counter1(r, "zeps_replica_flushed_pushes_total",
             "Primary: bsp round pushes logged one by one instead (a flush).", st->repl_flushed);
    counter1(r, "zeps_replica_log_bytes_total",
             "Bytes of the entries logged (primary) or kept (backup).", st->repl_log_bytes);
    gauge1(r, "zeps_replica_fenced",
           "1 if the session expired while this replica was primary (it serves nothing).",
           st->fenced);
    counter1(r, "zeps_replica_role_changes_total", "Changes of role or epoch seen.",
             st->role_changes);
    head(r, "zeps_coord_session", "gauge",
         "1 for the coordination session's state, 0 for the others (off: replicas = 1).");
    for (size_t i = 0; i < 6; i++)
        zp_http_printf(r, "zeps_coord_session{state=\"%s\"} %d\n", sessions[i],
                       strcmp(st->coord_session, sessions[i]) == 0);
    gauge1(r, "zeps_coord_disconnected_seconds",
           "How long the coordination service has been out of reach (0: connected).",
           st->coord_disconnected_s);
    counter1(r, "zeps_coord_sessions_total", "Sessions made with the coordination service.",
             st->coord_sessions);
    counter1(r, "zeps_coord_suspensions_total", "Connections to the coordination service lost.",
             st->coord_suspensions);
    counter1(r, "zeps_coord_expirations_total", "Coordination sessions lost.",
             st->coord_expirations);
    counter1(r, "zeps_coord_elections_total", "Elections this replica won.", st->elections);
}

static void state_metrics(const zp_server *s, const Zeps__ShardStats *st, zp_http_reply *r)
{
    double now = zp_now_s();
    gauge1(r, "zeps_workers_configured", "Workers in the cluster file.", st->num_workers);
    int joined = 0;
    for (int i = 0; i < s->nworkers; i++)
        joined += s->workers.w[i].joined && !s->workers.w[i].left;
    gauge1(r, "zeps_workers_joined", "Workers that said HELLO and not BYE.", joined);
    gauge1(r, "zeps_workers_live", "Workers counted live (not left, not lost under continue).",
           zp_workers_live(&s->workers, s->cfg.lost_continue));
    gauge1(r, "zeps_clock_min", "Slowest live worker's clock.", (double)s->workers.min_clock);
    gauge1(r, "zeps_clock_max", "Most advanced worker's clock.", (double)s->workers.max_clock);
    counter1(r, "zeps_lost_workers_total", "Workers declared lost (silent past the timeout).",
             st->lost_workers);
    counter1(r, "zeps_restores_total", "Times this shard's state came from a snapshot at start.",
             s->epoch >= s->rollbacks ? s->epoch - s->rollbacks : 0);
    counter1(r, "zeps_rollbacks_total", "bsp rollbacks to a cut.", st->rollbacks);
    gauge1(r, "zeps_restored_clock", "Clock of the set restored or rolled back to (-1 = none).",
           (double)st->restored_clock);
    counter1(r, "zeps_snapshots_written_total", "Snapshot files this shard wrote.",
             st->snapshots_written);
    counter1(r, "zeps_snapshot_failures_total", "Snapshot writers that failed.",
             st->snapshot_failures);
    gauge1(r, "zeps_snapshot_last_duration_seconds", "How long the last snapshot took to write.",
           st->last_snapshot_s);
    gauge1(r, "zeps_snapshot_age_seconds",
           "Seconds since the last snapshot was complete (-1 = none yet).",
           s->persist.last_done_s > 0 ? now - s->persist.last_done_s : -1);
    gauge1(r, "zeps_snapshot_last_set", "Set id of the last snapshot written (0 = none).",
           (double)st->last_snapshot_set);
    gauge1(r, "zeps_curve_enabled", "1 if CURVE authenticates clients.", st->curve);
    head(r, "zeps_curve_handshakes_total", "counter", "CURVE handshakes by result.");
    zp_http_printf(r, "zeps_curve_handshakes_total{result=\"accepted\"} %" PRIu64 "\n",
                   st->curve_accepted);
    zp_http_printf(r, "zeps_curve_handshakes_total{result=\"refused\"} %" PRIu64 "\n",
                   st->curve_refused);
    counter1(r, "zeps_hello_refused_total",
             "HELLOs refused: the rank is held by a live incarnation (its lease).",
             s->hello_refused);
    counter1(r, "zeps_key_refused_total",
             "Requests refused: the CURVE key may not speak as the rank it claimed.",
             s->key_refused);
    counter1(r, "zeps_held_requests_failed_total",
             "Held pulls and barriers failed: they waited for a worker gone past "
             "lost_worker_wait_s.",
             s->waits_failed);
    counter1(r, "zeps_log_suppressed_total",
             "Per-request log lines left out by the rate limits (STATS log_suppressed).",
             st->log_suppressed);
    gauge1(r, "zeps_limit_tables", "Tables this shard accepts (max_tables).", st->max_tables);
    gauge1(r, "zeps_limit_rows", "Sparse rows this shard holds at most, all tables (max_rows).",
           (double)st->max_rows);
    gauge1(r, "zeps_limit_memory_bytes",
           "Parameter and optimizer bytes this shard holds at most (max_memory_mb).",
           (double)st->max_bytes);
    gauge1(r, "zeps_held_rows", "Sparse rows held now, all tables (STATS rows_held).",
           (double)st->rows_held);
    gauge1(r, "zeps_held_memory_bytes",
           "Parameter and optimizer bytes held now, all tables (STATS bytes_held).",
           (double)st->bytes_held);
    counter1(r, "zeps_limit_refused_total",
             "Requests refused because a limit was reached (ENOMEM, ETOOBIG; STATS full_refused).",
             st->full_refused);
}

/* A per-table field: its offset in Zeps__TableStats and whether it is a
 * double; `label` adds a fixed label (`encoding="wire"`) to a family. */
typedef struct tfield {
    const char *name, *type, *help, *label;
    size_t off;
    bool dbl, sparse_only;
} tfield;

#define TF(f, n, t, h)                                                                             \
    {                                                                                              \
        .name = n, .type = t, .help = h, .off = offsetof(Zeps__TableStats, f)                      \
    }

static const tfield tfields[] = {
    TF(version, "zeps_table_version", "gauge", "Updates applied to the table on this shard."),
    TF(pushes, "zeps_table_pushes_total", "counter", "Pushes received for the table."),
    TF(pulls, "zeps_table_pulls_total", "counter", "Pulls answered for the table."),
    TF(bytes_param, "zeps_table_memory_bytes", "gauge",
       "Bytes of parameters, optimizer state and scratch held."),
    TF(rounds, "zeps_table_rounds_total", "counter", "bsp rounds closed."),
    TF(parked, "zeps_table_parked_pulls", "gauge", "Pulls waiting now (bsp/ssp)."),
    TF(dropped, "zeps_table_dropped_pushes_total", "counter",
       "Pushes dropped as too stale (weighted max_staleness)."),
    TF(late, "zeps_table_late_pushes_total", "counter", "Pushes for a bsp round already closed."),
    TF(staleness, "zeps_table_staleness_bound", "gauge", "The ssp bound in force (clocks)."),
    TF(pull_resyncs, "zeps_table_pull_resyncs_total", "counter",
       "Compressed pulls answered with full values."),
    TF(pull_view_bytes, "zeps_table_pull_view_bytes", "gauge",
       "Memory of the per-worker views of compressed pulls."),
};

#define TB(f, n, l, h)                                                                             \
    {                                                                                              \
        .name = n, .type = "counter", .help = h, .label = l, .off = offsetof(Zeps__TableStats, f)  \
    }
#define TS(f, n, t, h)                                                                             \
    {                                                                                              \
        .name = n, .type = t, .help = h, .off = offsetof(Zeps__TableStats, f), .sparse_only = true \
    }

/* families with two series told apart by a fixed label, then sparse ones */
static const tfield tpairs[] = {
    TB(push_bytes_wire, "zeps_table_push_bytes_total", "encoding=\"wire\"",
       "Push payload bytes: as received (wire) and as f32 (raw)."),
    TB(push_bytes_raw, "zeps_table_push_bytes_total", "encoding=\"f32\"", NULL),
    TB(pull_bytes_wire, "zeps_table_pull_bytes_total", "encoding=\"wire\"",
       "Pull reply payload bytes: as sent (wire) and as f32 (raw)."),
    TB(pull_bytes_raw, "zeps_table_pull_bytes_total", "encoding=\"f32\"", NULL),
    TB(evicted_ttl, "zeps_table_rows_evicted_total", "reason=\"ttl\"",
       "Sparse rows evicted, by reason."),
    TB(evicted_capacity, "zeps_table_rows_evicted_total", "reason=\"capacity\"", NULL),
    TS(rows, "zeps_table_rows", "gauge", "Sparse rows held on this shard."),
    TS(rows_created, "zeps_table_rows_created_total", "counter", "Sparse rows created (admitted)."),
    TS(not_admitted, "zeps_table_not_admitted_total", "counter",
       "Touches of ids that did not (yet) get a row."),
    TS(pushes_skipped, "zeps_table_row_pushes_skipped_total", "counter",
       "Row gradients for ids without a row."),
    TS(keys_pulled, "zeps_table_keys_pulled_total", "counter", "Sparse ids pulled."),
    TS(keys_pushed, "zeps_table_keys_pushed_total", "counter", "Sparse ids pushed."),
    TS(tier_hits, "zeps_table_tier_hits_total", "counter",
       "Touches of sparse rows found in the hot tier (tables with a cold tier)."),
    TS(tier_promotions, "zeps_table_tier_promotions_total", "counter",
       "Sparse rows taken back from the cold tier."),
    TS(tier_demotions, "zeps_table_tier_demotions_total", "counter",
       "Sparse rows written to the cold tier (evicted from the hot one)."),
    TS(cold_rows, "zeps_table_cold_rows", "gauge", "Sparse rows in the cold tier."),
    TS(cold_bytes, "zeps_table_cold_bytes", "gauge",
       "Bytes the cold tier's store takes (disk and write buffers)."),
    TS(tier_fetched, "zeps_table_tier_fetched_total", "counter",
       "Ids read from the cold tier off the loop, for pulls."),
    TS(tier_sync_reads, "zeps_table_tier_sync_reads_total", "counter",
       "Sparse rows read from the cold tier on the loop."),
    TS(tier_parked, "zeps_table_tier_parked_pulls_total", "counter",
       "Pulls parked until their cold rows were read."),
    TS(tier_mem_share, "zeps_table_tier_memory_share_bytes", "gauge",
       "The share of memory_budget the cold tier's store is given (0: unbounded)."),
    TS(tier_mem_write_buffers, "zeps_table_tier_memory_write_buffers_bytes", "gauge",
       "The cold tier's write buffers: its rows not yet written and RocksDB's "
       "(rocksdb.cur-size-all-mem-tables)."),
    TS(tier_mem_table_readers, "zeps_table_tier_memory_table_readers_bytes", "gauge",
       "Index and filter blocks held outside the block cache "
       "(rocksdb.estimate-table-readers-mem)."),
    TS(tier_mem_block_cache, "zeps_table_tier_memory_block_cache_bytes", "gauge",
       "The cold tier's block cache usage."),
};

/* The labels naming each table entry, computed once a scrape rather
 * than once per series: table="NAME", and
 * piece="BEGIN-END" when this shard holds more than one piece of that
 * dense table (after live moves, docs/elastic.md), so that no two series
 * share labels. The caller frees the array; NULL when out of memory. */
typedef char zp_metrics_tl[220];

static zp_metrics_tl *table_labels(const Zeps__ShardStats *st)
{
    zp_metrics_tl *out = calloc(st->n_tables ? st->n_tables : 1, sizeof(*out));
    if (!out)
        return NULL;
    for (size_t i = 0; i < st->n_tables; i++) {
        const Zeps__TableStats *t = st->tables[i];
        char name[160];
        label_value(name, sizeof(name), t->name);
        bool pieces = false;
        for (size_t j = 0; j < st->n_tables && !pieces; j++)
            pieces = j != i && strcmp(st->tables[j]->name, t->name) == 0;
        if (pieces)
            snprintf(out[i], sizeof(out[i]), "table=\"%s\",piece=\"%" PRIu64 "-%" PRIu64 "\"", name,
                     t->slice_begin, t->slice_end);
        else
            snprintf(out[i], sizeof(out[i]), "table=\"%s\"", name);
    }
    return out;
}

static void table_family(const Zeps__ShardStats *st, const zp_metrics_tl *tl, const tfield *f,
                         bool header, zp_http_reply *r)
{
    if (header)
        head(r, f->name, f->type, f->help);
    for (size_t i = 0; i < st->n_tables; i++) {
        const Zeps__TableStats *t = st->tables[i];
        if (f->sparse_only && t->kind != 1)
            continue;
        const char *p = (const char *)t + f->off;
        uint64_t v = f->off == offsetof(Zeps__TableStats, staleness) ? *(const uint32_t *)p
                                                                     : *(const uint64_t *)p;
        zp_http_printf(r, "%s{%s%s%s} %" PRIu64 "\n", f->name, tl[i], f->label ? "," : "",
                       f->label ? f->label : "", v);
    }
}

static void table_metrics(const Zeps__ShardStats *st, zp_http_reply *r)
{
    zp_metrics_tl *tl = table_labels(st);
    if (!tl)
        return; /* the scrape goes without its table series */
    for (size_t k = 0; k < sizeof(tfields) / sizeof(tfields[0]); k++)
        table_family(st, tl, &tfields[k], true, r);
    for (size_t k = 0; k < sizeof(tpairs) / sizeof(tpairs[0]); k++)
        table_family(st, tl, &tpairs[k], tpairs[k].help != NULL, r);
    head(r, "zeps_table_codec_seconds_total", "counter",
         "Time spent decoding compressed pushes and encoding compressed pulls.");
    for (size_t i = 0; i < st->n_tables; i++) {
        zp_http_printf(r, "zeps_table_codec_seconds_total{%s,stage=\"decode\"} %.17g\n", tl[i],
                       st->tables[i]->decode_s);
        zp_http_printf(r, "zeps_table_codec_seconds_total{%s,stage=\"encode\"} %.17g\n", tl[i],
                       st->tables[i]->encode_s);
    }
    static const struct {
        const char *name, *help;
        int which; /* 0 tau, 1 clock gap, 2 pull wait */
    } hs[] = {
        {"zeps_push_staleness_versions", "Staleness tau of applied pushes, in versions.", 0},
        {"zeps_push_clock_gap_clocks", "Clock gap of applied pushes, in clocks.", 1},
        {"zeps_pull_wait_seconds", "How long pulls were parked before their answer.", 2},
    };
    for (size_t k = 0; k < 3; k++) {
        head(r, hs[k].name, "histogram", hs[k].help);
        for (size_t i = 0; i < st->n_tables; i++) {
            const Zeps__TableStats *t = st->tables[i];
            const Zeps__Histogram *h = hs[k].which == 0   ? t->tau
                                       : hs[k].which == 1 ? t->clock_gap
                                                          : t->pull_wait_us;
            char labels[sizeof(zp_metrics_tl) + 4];
            snprintf(labels, sizeof(labels), "%s,", tl[i]);
            hist_series(r, hs[k].name, labels, h, hs[k].which == 2);
        }
    }
    free(tl);
}

/* Per-row tau of sparse tables by row frequency: a series per table and
 * non-empty frequency bucket, labelled by the bucket's touches. */
static void row_tau_metrics(const Zeps__ShardStats *st, zp_http_reply *r)
{
    static const char name[] = "zeps_row_staleness_versions";
    head(r, name, "histogram",
         "Staleness tau of a sparse table's applied rows, by the row's touches when pushed "
         "(log2 buckets), in versions.");
    for (size_t i = 0; i < st->n_tables; i++) {
        const Zeps__TableStats *t = st->tables[i];
        char tname[128], labels[200], touches[48];
        label_value(tname, sizeof(tname), t->name);
        for (size_t b = 0; b < t->n_tau_by_freq; b++) {
            if (t->tau_by_freq[b]->n == 0)
                continue;
            unsigned long long lo = 1ull << b;
            if (b + 1 == ZP_FREQ_BUCKETS)
                snprintf(touches, sizeof(touches), "%llu+", lo);
            else if (b == 0)
                snprintf(touches, sizeof(touches), "1");
            else
                snprintf(touches, sizeof(touches), "%llu-%llu", lo, 2 * lo - 1);
            snprintf(labels, sizeof(labels), "table=\"%s\",touches=\"%s\",", tname, touches);
            hist_series(r, name, labels, t->tau_by_freq[b], false);
        }
    }
}

static void worker_metrics(const Zeps__ShardStats *st, zp_http_reply *r)
{
    if (st->num_workers > ZP_METRICS_MAX_RANKS)
        return; /* per-rank series only while their number is small */
    static const struct {
        const char *name, *type, *help;
        size_t off;
    } wf[] = {
        {"zeps_worker_clock", "gauge", "The worker's clock.", offsetof(Zeps__WorkerStats, clock)},
        {"zeps_worker_pushes_total", "counter", "Pushes from the worker.",
         offsetof(Zeps__WorkerStats, pushes)},
        {"zeps_worker_pulls_total", "counter", "Pulls from the worker.",
         offsetof(Zeps__WorkerStats, pulls)},
        {"zeps_worker_duplicates_total", "counter",
         "Retried requests answered without re-applying.", offsetof(Zeps__WorkerStats, duplicates)},
        {"zeps_worker_lost_total", "counter", "Times the worker was declared lost.",
         offsetof(Zeps__WorkerStats, lost_count)},
        {"zeps_worker_seq_jumps_total", "counter",
         "Requests refused: seq more than 64 past the highest the worker sent.",
         offsetof(Zeps__WorkerStats, seq_jumps)},
    };
    for (size_t k = 0; k < sizeof(wf) / sizeof(wf[0]); k++) {
        head(r, wf[k].name, wf[k].type, wf[k].help);
        for (size_t i = 0; i < st->n_workers; i++) {
            const char *p = (const char *)st->workers[i] + wf[k].off;
            zp_http_printf(r, "%s{rank=\"%u\"} %" PRId64 "\n", wf[k].name, st->workers[i]->rank,
                           *(const int64_t *)p);
        }
    }
    head(r, "zeps_worker_parked_pulls", "gauge", "The worker's pulls waiting now, all tables.");
    for (size_t i = 0; i < st->n_workers; i++)
        zp_http_printf(r, "zeps_worker_parked_pulls{rank=\"%u\"} %u\n", st->workers[i]->rank,
                       st->workers[i]->parked);
    head(r, "zeps_worker_last_seen_seconds", "gauge", "Seconds since the worker was last heard.");
    for (size_t i = 0; i < st->n_workers; i++)
        zp_http_printf(r, "zeps_worker_last_seen_seconds{rank=\"%u\"} %.6f\n", st->workers[i]->rank,
                       st->workers[i]->last_seen_s);
    head(r, "zeps_worker_push_staleness_versions", "histogram",
         "Staleness tau of the worker's applied pushes (all tables), in versions.");
    for (size_t i = 0; i < st->n_workers; i++) {
        char labels[32];
        snprintf(labels, sizeof(labels), "rank=\"%u\",", st->workers[i]->rank);
        hist_series(r, "zeps_worker_push_staleness_versions", labels, st->workers[i]->tau, false);
    }
}

static void process_metrics(const zp_server *s, zp_http_reply *r)
{
    long pages = 0, rss = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f) {
        if (fscanf(f, "%ld %ld", &pages, &rss) != 2)
            rss = 0;
        fclose(f);
    }
    gauge1(r, "process_resident_memory_bytes", "Resident memory of this process.",
           (double)rss * (double)sysconf(_SC_PAGESIZE));
    gauge1(r, "process_start_time_seconds", "Start time of this process (Unix time).",
           (double)time(NULL) - (zp_now_s() - s->start_s));
    if (!s->http)
        return;
    zp_http_counts c = zp_http_get_counts(s->http);
    gauge1(r, "zeps_http_connections", "Open connections to this metrics endpoint.", c.open);
    head(r, "zeps_http_connections_total", "counter",
         "Connections to this endpoint by outcome (served, bad request, evicted over the cap, "
         "timed out).");
    zp_http_printf(r, "zeps_http_connections_total{result=\"served\"} %" PRIu64 "\n", c.served);
    zp_http_printf(r, "zeps_http_connections_total{result=\"bad\"} %" PRIu64 "\n", c.bad);
    zp_http_printf(r, "zeps_http_connections_total{result=\"evicted\"} %" PRIu64 "\n", c.evicted);
    zp_http_printf(r, "zeps_http_connections_total{result=\"timed_out\"} %" PRIu64 "\n",
                   c.timed_out);
}

/* The shard's slot map and a move of it in doubt (docs/elastic.md). */
static void slot_metrics(const Zeps__ShardStats *st, zp_http_reply *r)
{
    gauge1(r, "zeps_slot_map_epoch", "The epoch of this shard's slot map (0: the default map).",
           (double)st->slot_epoch);
    gauge1(r, "zeps_slots_owned", "Slots of the map this shard owns.", st->slots_owned);
    gauge1(r, "zeps_move_in_doubt",
           "1 while a move's source waits for its target to say whether it committed "
           "(the slots' requests parked; zepsctl shards resolve).",
           st->move_doubt && st->move_doubt[0]);
}

void zp_metrics_render(const zp_server *s, zp_http_reply *r)
{
    zp_stats_view v;
    zp_stats_fill(s, &v);
    shard_metrics(s, &v.st, r);
    state_metrics(s, &v.st, r);
    replica_metrics(&v.st, r);
    slot_metrics(&v.st, r);
    table_metrics(&v.st, r);
    row_tau_metrics(&v.st, r);
    worker_metrics(&v.st, r);
    process_metrics(s, r);
    zp_stats_view_fini(&v);
    r->type = "text/plain; version=0.0.4; charset=utf-8";
}
