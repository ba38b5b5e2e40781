/*
 * ctl_status_json.c - `zepsctl status --json` and `zepsctl stats --json`:
 * one shard's statistics as a JSON object (ctl_status.c prints the array
 * around them and the tables for people).
 */
#include "ctl_status_json.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "ctl_tier.h"

/* A JSON string (names come from the network: escape everything needed). */
static void json_str(const char *s)
{
    putchar('"');
    for (; s && *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            printf("\\%c", c);
        else if (c < 0x20)
            printf("\\u%04x", c);
        else
            putchar(c);
    }
    putchar('"');
}

static void json_hist_body(const Zeps__Histogram *h)
{
    printf("{\"n\": %" PRIu64 ", \"sum\": %" PRIu64 ", \"max\": %" PRIu64 ", \"counts\": [",
           h ? h->n : 0, h ? h->sum : 0, h ? h->max : 0);
    for (size_t i = 0; h && i < h->n_counts; i++)
        printf("%s%" PRIu64, i ? ", " : "", h->counts[i]);
    printf("]}");
}

static void json_hist(const char *name, const Zeps__Histogram *h)
{
    printf(", \"%s\": ", name);
    json_hist_body(h);
}

static void json_table(const Zeps__TableStats *t)
{
    printf("{\"id\": %u, \"name\": ", t->id);
    json_str(t->name);
    printf(", \"length\": %" PRIu64 ", \"slice_begin\": %" PRIu64 ", \"slice_end\": %" PRIu64
           ", \"version\": %" PRIu64 ", \"rounds\": %" PRIu64 ", \"pushes\": %" PRIu64
           ", \"pulls\": %" PRIu64 ", \"parked\": %" PRIu64 ", \"bytes_param\": %" PRIu64
           ", \"optimizer\": ",
           t->length, t->slice_begin, t->slice_end, t->version, t->rounds, t->pushes, t->pulls,
           t->parked, t->bytes_param);
    json_str(t->optimizer);
    printf(", \"lr\": %.9g, \"lr_declared\": %.9g", t->lr, t->lr_declared);
    if (t->kind == 1)
        printf(", \"kind\": \"sparse\", \"dim\": %u, \"rows\": %" PRIu64
               ", \"rows_created\": %" PRIu64 ", \"not_admitted\": %" PRIu64
               ", \"pushes_skipped\": %" PRIu64 ", \"evicted_ttl\": %" PRIu64
               ", \"evicted_capacity\": %" PRIu64 ", \"bytes_per_row\": %" PRIu64
               ", \"keys_pulled\": %" PRIu64 ", \"keys_pushed\": %" PRIu64,
               t->dim, t->rows, t->rows_created, t->not_admitted, t->pushes_skipped, t->evicted_ttl,
               t->evicted_capacity, t->bytes_per_row, t->keys_pulled, t->keys_pushed);
    if (t->tiered)
        zp_ctl_tier_json(t);
    printf(", \"staleness\": %u, \"dropped\": %" PRIu64 ", \"late\": %" PRIu64, t->staleness,
           t->dropped, t->late);
    printf(", \"push_bytes_wire\": %" PRIu64 ", \"push_bytes_raw\": %" PRIu64
           ", \"decode_s\": %.6f, \"pull_bytes_wire\": %" PRIu64 ", \"pull_bytes_raw\": %" PRIu64
           ", \"encode_s\": %.6f, \"pull_resyncs\": %" PRIu64 ", \"pull_view_bytes\": %" PRIu64,
           t->push_bytes_wire, t->push_bytes_raw, t->decode_s, t->pull_bytes_wire,
           t->pull_bytes_raw, t->encode_s, t->pull_resyncs, t->pull_view_bytes);
    json_hist("tau", t->tau);
    json_hist("clock_gap", t->clock_gap);
    json_hist("pull_wait_us", t->pull_wait_us);
    printf(", \"tau_by_freq\": [");
    for (size_t b = 0; b < t->n_tau_by_freq; b++) {
        printf("%s", b ? ", " : "");
        json_hist_body(t->tau_by_freq[b]);
    }
    putchar(']');
    putchar('}');
}

/* One shard's object. Incarnations are hex strings: JSON readers keep only
 * 53 bits of a number. */
void zp_ctl_status_json_shard(int i, const Zeps__ShardStats *st, const answer *a, const char *ep)
{
    printf("  {\"shard\": %d, \"endpoint\": ", i);
    json_str(ep);
    printf(", \"joined\": %s, \"retired\": %s", a->ep[0] ? "true" : "false",
           a->retired ? "true" : "false");
    if (!st) {
        printf(", \"answered\": false, \"error\": ");
        json_str(a->why);
        printf("}");
        return;
    }
    if (st->move_doubt && st->move_doubt[0]) {
        printf(", \"move_doubt\": ");
        json_str(st->move_doubt);
    }
    if (st->replicas > 1) {
        printf(", \"replica\": %u, \"replicas\": %u, \"role\": ", st->replica, st->replicas);
        json_str(st->role);
        printf(", \"epoch\": %" PRIu64 ", \"primary_replica\": %d, \"in_sync\": %u, "
               "\"coord_session\": ",
               st->epoch, st->primary_replica, st->in_sync);
        json_str(st->coord_session);
        printf(", \"fenced\": %s", st->fenced ? "true" : "false");
        printf(", \"log_entry\": %" PRIu64 ", \"lag\": %" PRIu64 ", \"held\": %" PRIu64
               ", \"transfers\": %" PRIu64 ", \"round_entries\": %" PRIu64
               ", \"round_pushes\": %" PRIu64 ", \"flushed\": %" PRIu64 ", \"log_bytes\": %" PRIu64,
               st->repl_lsn, st->repl_lag, st->repl_held, st->repl_transfers,
               st->repl_round_entries, st->repl_round_pushes, st->repl_flushed, st->repl_log_bytes);
    }
    printf(", \"answered\": true, \"num_shards\": %u, \"num_workers\": %u, "
           "\"incarnation\": \"%016" PRIx64 "\", \"consistency\": ",
           st->num_shards, st->num_workers, st->incarnation);
    json_str(st->consistency);
    printf(", \"uptime_s\": %.3f, \"requests\": %" PRIu64 ", \"errors\": %" PRIu64
           ", \"bytes_in\": %" PRIu64 ", \"bytes_out\": %" PRIu64 ",\n",
           st->uptime_s, st->requests, st->errors, st->bytes_in, st->bytes_out);
    printf("   \"restored_clock\": %" PRId64 ", \"rollbacks\": %" PRIu64
           ", \"lost_workers\": %" PRIu64 ", \"snapshots_written\": %" PRIu64
           ", \"last_snapshot_s\": %.3f,\n",
           st->restored_clock, st->rollbacks, st->lost_workers, st->snapshots_written,
           st->last_snapshot_s);
    printf("   \"curve\": %s, \"curve_accepted\": %" PRIu64 ", \"curve_refused\": %" PRIu64 ",\n",
           st->curve ? "true" : "false", st->curve_accepted, st->curve_refused);
    printf("   \"max_tables\": %u, \"max_rows\": %" PRIu64 ", \"max_bytes\": %" PRIu64
           ", \"rows_held\": %" PRIu64 ", \"bytes_held\": %" PRIu64 ", \"full_refused\": %" PRIu64
           ", \"log_suppressed\": %" PRIu64 ",\n   \"tables\": [",
           st->max_tables, st->max_rows, st->max_bytes, st->rows_held, st->bytes_held,
           st->full_refused, st->log_suppressed);
    for (size_t k = 0; k < st->n_tables; k++) {
        printf("%s\n    ", k ? "," : "");
        json_table(st->tables[k]);
    }
    printf("],\n   \"workers\": [");
    for (size_t k = 0; k < st->n_workers; k++) {
        const Zeps__WorkerStats *w = st->workers[k];
        printf("%s\n    {\"rank\": %u, \"clock\": %" PRId64 ", \"incarnation\": \"%016" PRIx64
               "\", \"pushes\": %" PRIu64 ", \"pulls\": %" PRIu64 ", \"duplicates\": %" PRIu64
               ", \"last_seen_s\": %.3f, \"push_bytes_wire\": %" PRIu64
               ", \"push_bytes_raw\": %" PRIu64 ", \"pull_bytes_wire\": %" PRIu64
               ", \"pull_bytes_raw\": %" PRIu64 ", \"pull_resyncs\": %" PRIu64
               ", \"seq_jumps\": %" PRIu64 ", \"lost\": %s, \"transport\": \"%s\"}",
               k ? "," : "", w->rank, w->clock, w->incarnation, w->pushes, w->pulls, w->duplicates,
               w->last_seen_s, w->push_bytes_wire, w->push_bytes_raw, w->pull_bytes_wire,
               w->pull_bytes_raw, w->pull_resyncs, w->seq_jumps, w->lost ? "true" : "false",
               strcmp(w->transport, "shm") == 0 ? "shm" : "tcp");
    }
    printf("]}");
}
