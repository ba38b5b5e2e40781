/*
 * ctl_status.c - `zepsctl status`: ask shards for their statistics (STATS)
 * and print them as tables or JSON.
 *
 * The command doubles as a readiness probe, so its exit status means
 * something: 0 only if every shard asked answered. For the whole cluster it
 * connects through libzeps as a tool (rank ZEPS_RANK_TOOL), whose HELLO also
 * checks that each endpoint really serves the shard the cluster file says.
 * When that fails, or when one shard is asked with --shard, it sends STATS
 * straight to each shard on its own DEALER socket instead (ctl_probe.c): that way a probe of
 * shard i never waits on another shard (a StatefulSet with ordered start-up
 * would otherwise deadlock), and a failure names every shard that did not
 * answer, with its endpoint, not just the first.
 */
#define _GNU_SOURCE
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zmq.h>

#include "config.h"
#include "curve.h"
#include "exitcode.h"
#include "ctl.h"
#include "ctl_tier.h"
#include "ctl_hist.h"
#include "ctl_probe.h"
#include "ctl_status_json.h"
#include "ctl_stats_plot.h"
#include "folder.h"
#include "identity.h"
#include "log.h"
#include "alloc.h"
#include "now.h"
#include "wire.h"
#include "zeps.h"
#include "zeps.pb-c.h"

#define DEFAULT_TIMEOUT_MS 3000
#define PROBE_RETRIES      2 /* a probe must answer quickly: at most this many resends */
#define PROBE_MIN_S        0.25
#define JOINED_MIN_MS      1000 /* asking for the joined shards: at least this per request */

typedef struct status_opts {
    const char *config;
    int shard;              /* -1: all */
    const char *shard_text; /* --shard as given: N, auto, hostname, env:NAME */
    const char *endpoint;   /* --endpoint: ask the shard here instead */
    bool json;
    bool staleness;   /* zepsctl stats: also the staleness histograms */
    const char *plot; /* stats --plot DIR: the histograms as figures there */
    int timeout_ms;
} status_opts;

/* The usage of `zepsctl status`, or of `zepsctl stats` with `staleness`. */
static void usage(FILE *f, bool staleness)
{
    const char *cmd = staleness ? "stats" : "status";
    fprintf(f,
            "usage: zepsctl %s --config FILE [--shard I [--endpoint EP]] [--json]\n"
            "                      [--timeout MS]%s\n\n"
            "Asks every shard of the cluster in FILE (or only shard I) for its state and\n"
            "prints, per shard, a header line, its tables and its workers%s.\n"
            "Shards that joined at run time (named by the newest slot map of FILE's\n"
            "shards) follow, each after 'shard S joined at run time, at ENDPOINT'.\n\n",
            cmd, staleness ? " [--plot DIR]" : "",
            staleness ? ", and per table the\nstaleness histograms: tau (versions), "
                        "clock gap (clocks), pull wait (us), and for\nsparse tables tau by "
                        "row frequency"
                      : "");
    if (staleness)
        fprintf(f, "  --plot DIR      also draw the histograms, summed over the shards, as\n"
                   "                  PNGs in DIR (made if missing): tau.png per table,\n"
                   "                  tau_ranks.png per rank, clock_gap.png, pull_wait.png,\n"
                   "                  tau_by_freq.png (sparse tables: per-row tau by row\n"
                   "                  frequency); beside them the data (.dat) and the\n"
                   "                  gnuplot script (stats.gp); needs gnuplot (Debian:\n"
                   "                  gnuplot-nox):\n"
                   "                  exit 1 if the figures could not be made\n");
    fprintf(f,
            "  --config FILE   the cluster file\n"
            "  --shard I       ask shard I only (and wait for no other shard); I is a\n"
            "                  number, or auto | hostname | env:NAME as for zeps-server\n"
            "                  (auto in a StatefulSet pod: this pod's own shard)\n"
            "  --endpoint EP   with --shard: ask it at EP instead of the cluster file's\n"
            "                  address (a probe inside the pod: tcp://127.0.0.1:PORT)\n"
            "  --json          print a JSON array with one object per shard\n"
            "  --timeout MS    how long to wait for the shards (default %d; with a shard\n"
            "                  down, the command takes up to about twice this, and 1 s\n"
            "                  more per shard of FILE down)\n\n"
            "Exit status: 0 if every shard asked answered, 1 if one did not, 2 on bad\n"
            "options, a bad cluster file or key, or a key a shard refused.\n",
            DEFAULT_TIMEOUT_MS);
}

static bool parse_int(const char *opt, const char *s, int lo, int hi, int *out)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (end == s || *end || v < lo || v > hi) {
        fprintf(stderr, "zepsctl status: %s wants an integer in [%d, %d], not '%s'\n", opt, lo, hi,
                s);
        return false;
    }
    *out = (int)v;
    return true;
}

/* The --plot folder: made with parents and writable, and no '"' in its name
 * (it is quoted in the gnuplot script). */
static bool plot_dir_ok(const char *dir)
{
    char err[1024];
    if (strchr(dir, '"') || strchr(dir, '\\')) {
        fprintf(stderr, "zepsctl stats: --plot %s: the folder name may not hold '\"' or '\\'\n",
                dir);
        return false;
    }
    if (zp_folder_ready("--plot", dir, err, sizeof(err)) != 0) {
        fprintf(stderr, "zepsctl stats: %s\n", err);
        return false;
    }
    return true;
}

/* Returns -1 to go on, or the exit status. */
static int parse_opts(int argc, char **argv, status_opts *o, bool staleness)
{
    static const struct option opts[] = {
        {"config", required_argument, NULL, 'c'},   {"shard", required_argument, NULL, 's'},
        {"json", no_argument, NULL, 'j'},           {"timeout", required_argument, NULL, 't'},
        {"endpoint", required_argument, NULL, 'e'}, {"plot", required_argument, NULL, 'p'},
        {"help", no_argument, NULL, 'h'},           {NULL, 0, NULL, 0},
    };
    *o = (status_opts){.shard = -1, .timeout_ms = DEFAULT_TIMEOUT_MS};
    optind = 1;
    opterr = 0; /* getopt would name us "status" */
    int c;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        bool ok = true;
        if (c == 'h') {
            usage(stdout, staleness);
            return 0;
        } else if (c == 'c') {
            o->config = optarg;
        } else if (c == 's') {
            o->shard_text = optarg;
        } else if (c == 'e') {
            o->endpoint = optarg;
        } else if (c == 'j') {
            o->json = true;
        } else if (c == 'p' && staleness) {
            o->plot = optarg;
            ok = plot_dir_ok(optarg);
        } else if (c == 't') {
            ok = parse_int("--timeout", optarg, 10, 3600000, &o->timeout_ms);
        } else {
            fprintf(stderr, "zepsctl status: unknown option or missing value: '%s'\n",
                    argv[optind - 1]);
            ok = false;
        }
        if (!ok)
            return 2;
    }
    if (o->endpoint && !o->shard_text) {
        fprintf(stderr, "zepsctl status: --endpoint needs --shard\n");
        return 2;
    }
    if (optind < argc || !o->config) {
        fprintf(stderr,
                optind < argc ? "zepsctl status: unexpected argument '%s'\n"
                              : "zepsctl status: --config FILE is required%s\n",
                optind < argc ? argv[optind] : "");
        usage(stderr, staleness);
        return 2;
    }
    return -1;
}

/* ------------------------------------------------------------ asking */

/* Ask every shard through libzeps. Returns 0, or the zeps_err of a client
 * that could not connect (HELLO failed; the library has logged why, and
 * a[] is untouched). */
static int ask_all(const zp_config *cfg, const zp_curve_client_keys *keys, int timeout_ms,
                   answer *a)
{
    /* At least 1 retry: the library reads 0 as its default of 10. */
    int retries = cfg->max_retries < PROBE_RETRIES ? cfg->max_retries : PROBE_RETRIES;
    zeps_options opt = {
        .request_timeout_ms =
            cfg->request_timeout_ms < timeout_ms ? cfg->request_timeout_ms : timeout_ms,
        .max_retries = retries > 0 ? retries : 1,
        .hello_timeout_ms = timeout_ms,
        .num_workers = cfg->num_workers,
        .curve_server_key = keys->server_public,
        .curve_public_key = keys->client_public,
        .curve_secret_key = keys->client_secret,
    };
    const char *eps[ZP_MAX_SHARDS];
    for (int k = 0; k < cfg->num_shards; k++)
        eps[k] = cfg->servers[k];
    zeps_client *c = NULL;
    int rc = zeps_client_new_endpoints(&c, eps, cfg->num_shards, ZEPS_RANK_TOOL, &opt);
    if (rc != 0)
        return rc;
    for (int k = 0; k < cfg->num_shards; k++) {
        void *buf;
        size_t len;
        if (zeps_stats_raw(c, k, &buf, &len) == 0) {
            a[k].buf = buf;
            a[k].len = len;
        } else {
            snprintf(a[k].why, sizeof(a[k].why), "%s", zeps_last_error(c));
        }
    }
    zeps_client_destroy(&c);
    return 0;
}

/* ------------------------------------------------------------ printing */

/* A byte count for people: "812 B", "1.5 KiB", "3.2 MiB", "1.1 GiB". */
static const char *human(uint64_t n, char *buf, size_t len)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)n;
    int u = 0;
    while (v >= 1024 && u < 4) {
        v /= 1024;
        u++;
    }
    snprintf(buf, len, u ? "%.1f %s" : "%.0f %s", v, units[u]);
    return buf;
}

/* The value below which a fraction q of a linear histogram's observations
 * fall (bucket i = value i; the last bucket means "that much or more"). */
/* "0:120 1:40 2:3" for the non-empty buckets (log2 buckets as ranges). */
static void print_buckets(const char *label, const Zeps__Histogram *h, bool log2)
{
    char p50[32], p99[32];
    zp_ctl_hist_quantile(h, 0.5, log2, p50, sizeof(p50));
    zp_ctl_hist_quantile(h, 0.99, log2, p99, sizeof(p99));
    printf("      %-13s n %" PRIu64 "  mean %.2f  p50 %s  p99 %s  max %" PRIu64 "\n        ", label,
           h ? h->n : 0, zp_ctl_hist_mean(h), p50, p99, h ? h->max : 0);
    int shown = 0;
    for (size_t i = 0; h && i < h->n_counts; i++) {
        if (!h->counts[i])
            continue;
        if (log2)
            printf(" %s%llu:%" PRIu64, i ? "<" : "", i ? 1ull << i : 0ull, h->counts[i]);
        else
            printf(" %zu%s:%" PRIu64, i, i + 1 == 64 ? "+" : "", h->counts[i]);
        shown++;
    }
    printf("%s\n", shown ? "" : " (none)");
}

/* A sparse table's per-row tau by row frequency: a line per non-empty
 * bucket (the row's touches when it was pushed). */
static void print_tau_by_freq(const Zeps__TableStats *t)
{
    if (t->n_tau_by_freq == 0)
        return;
    printf("      tau by row frequency (rows pushed, by touches of the row)\n");
    printf("        %-13s %12s %8s %5s %5s %5s\n", "touches", "rows pushed", "mean", "p50", "p99",
           "max");
    for (size_t b = 0; b < t->n_tau_by_freq; b++) {
        const Zeps__Histogram *h = t->tau_by_freq[b];
        if (!h || h->n == 0)
            continue;
        char label[32], p50[32], p99[32];
        zp_ctl_hist_freq_label(b, label, sizeof(label));
        zp_ctl_hist_quantile(h, 0.5, false, p50, sizeof(p50));
        zp_ctl_hist_quantile(h, 0.99, false, p99, sizeof(p99));
        printf("        %-13s %12" PRIu64 " %8.2f %5s %5s %5" PRIu64 "\n", label, h->n,
               zp_ctl_hist_mean(h), p50, p99, h->max);
    }
}

static void print_staleness(const Zeps__ShardStats *st)
{
    printf("  staleness (tau in versions, clock gap in clocks, pull wait in us)\n");
    for (size_t i = 0; i < st->n_tables; i++) {
        const Zeps__TableStats *t = st->tables[i];
        char bound[32] = "";
        if (st->caps & ZP_CAP_BOUND)
            snprintf(bound, sizeof(bound), "%s bound %u, ", st->consistency, t->staleness);
        printf("    table %s: %sdropped %" PRIu64 ", late %" PRIu64 "\n", t->name, bound,
               t->dropped, t->late);
        print_buckets("tau", t->tau, false);
        print_buckets("clock gap", t->clock_gap, false);
        print_buckets("pull wait us", t->pull_wait_us, true);
        print_tau_by_freq(t);
    }
    for (size_t i = 0; i < st->n_workers; i++) {
        const Zeps__WorkerStats *w = st->workers[i];
        printf("    worker %u: tau mean %.2f max %" PRIu64 ", dropped %" PRIu64 ", late %" PRIu64
               "\n",
               w->rank, zp_ctl_hist_mean(w->tau), w->tau ? w->tau->max : 0, w->dropped, w->late);
    }
}

/* "812 B / 3.2 MiB (0.24)": bytes on the wire / as f32, and their ratio. */
static const char *wire_raw(uint64_t wire, uint64_t raw, char *buf, size_t len)
{
    char a[32], b[32];
    snprintf(buf, len, "%s / %s (%.3f)", human(wire, a, sizeof(a)), human(raw, b, sizeof(b)),
             raw ? (double)wire / (double)raw : 1.0);
    return buf;
}

/* Payload bytes per direction, on the wire and as f32 (compression). */
static void print_traffic(const Zeps__ShardStats *st)
{
    char push[96], pull[96], views[32];
    printf("  payload bytes, wire / f32 (ratio)\n");
    for (size_t i = 0; i < st->n_tables; i++) {
        const Zeps__TableStats *t = st->tables[i];
        printf("    table %-20s push %s decode %.3f s; pull %s encode %.3f s, resyncs %" PRIu64
               ", views %s\n",
               t->name, wire_raw(t->push_bytes_wire, t->push_bytes_raw, push, sizeof(push)),
               t->decode_s, wire_raw(t->pull_bytes_wire, t->pull_bytes_raw, pull, sizeof(pull)),
               t->encode_s, t->pull_resyncs, human(t->pull_view_bytes, views, sizeof(views)));
    }
    for (size_t i = 0; i < st->n_workers; i++) {
        const Zeps__WorkerStats *w = st->workers[i];
        printf("    worker %-5u push %s; pull %s, resyncs %" PRIu64 "\n", w->rank,
               wire_raw(w->push_bytes_wire, w->push_bytes_raw, push, sizeof(push)),
               wire_raw(w->pull_bytes_wire, w->pull_bytes_raw, pull, sizeof(pull)),
               w->pull_resyncs);
    }
}

static void print_shard(const Zeps__ShardStats *st)
{
    char in[32], out[32], held[32];
    printf("shard %u/%u  incarnation %016" PRIx64 "  consistency %s  uptime %.1f s  "
           "requests %" PRIu64 "  errors %" PRIu64 "  bytes in %s  out %s\n",
           st->shard, st->num_shards, st->incarnation, st->consistency, st->uptime_s, st->requests,
           st->errors, human(st->bytes_in, in, sizeof(in)), human(st->bytes_out, out, sizeof(out)));
    if (st->move_doubt && st->move_doubt[0]) /* docs/elastic.md, "What each failure does" */
        printf("  MOVE IN DOUBT: %s\n", st->move_doubt);
    if (st->replicas > 1) {
        char who[320] = "none known";
        if (st->primary_replica >= 0)
            snprintf(who, sizeof(who), "replica %d at %s", st->primary_replica, st->primary);
        printf("  replica %u of %u: %s at epoch %" PRIu64 "  primary %s  in sync %u  "
               "coordination session %s%s\n",
               st->replica, st->replicas, st->role, st->epoch, who, st->in_sync, st->coord_session,
               st->fenced ? "  FENCED (expired while primary)" : "");
        printf("  log: entry %" PRIu64 "  lag %" PRIu64 " entries  held replies %" PRIu64
               "  whole-state transfers %" PRIu64 "  bsp round entries %" PRIu64 " (%" PRIu64
               " pushes, %" PRIu64 " flushed)  %" PRIu64 " bytes\n",
               st->repl_lsn, st->repl_lag, st->repl_held, st->repl_transfers,
               st->repl_round_entries, st->repl_round_pushes, st->repl_flushed, st->repl_log_bytes);
    }
    printf("  recovery: restored clock %" PRId64 "  rollbacks %" PRIu64 "  lost workers %" PRIu64
           "  snapshots written %" PRIu64 " (last set %016" PRIx64 ", %.3f s)\n",
           st->restored_clock, st->rollbacks, st->lost_workers, st->snapshots_written,
           st->last_snapshot_set, st->last_snapshot_s);
    if (st->curve)
        printf("  CURVE on: %" PRIu64 " handshakes accepted, %" PRIu64 " refused\n",
               st->curve_accepted, st->curve_refused);
    else
        printf("  CURVE off (traffic neither authenticated nor encrypted)\n");
    char bh[32], bm[32];
    printf("  limits: tables %zu of %u, rows %" PRIu64 " of %" PRIu64 ", bytes %s of %s; "
           "%" PRIu64 " requests refused as full; %" PRIu64 " log lines suppressed\n",
           st->n_tables, st->max_tables, st->rows_held, st->max_rows,
           human(st->bytes_held, bh, sizeof(bh)), human(st->max_bytes, bm, sizeof(bm)),
           st->full_refused, st->log_suppressed);
    printf("  tables (%zu)\n", st->n_tables);
    if (st->n_tables)
        printf("    %3s  %-20s %-25s %10s %10s %10s %10s %6s %11s  %s\n", "id", "name",
               "slice [begin, end)", "version", "rounds", "pushes", "pulls", "parked", "bytes held",
               "optimizer");
    for (size_t i = 0; i < st->n_tables; i++) {
        const Zeps__TableStats *t = st->tables[i];
        char slice[64];
        if (t->kind == 1)
            snprintf(slice, sizeof(slice), "sparse dim %u", t->dim);
        else
            snprintf(slice, sizeof(slice), "[%" PRIu64 ", %" PRIu64 ")", t->slice_begin,
                     t->slice_end);
        printf("    %3u  %-20s %-25s %10" PRIu64 " %10" PRIu64 " %10" PRIu64 " %10" PRIu64
               " %6" PRIu64 " %11s  %s\n",
               t->id, t->name, slice, t->version, t->rounds, t->pushes, t->pulls, t->parked,
               human(t->bytes_param, held, sizeof(held)), t->optimizer);
        if (t->kind == 1)
            printf("         rows %" PRIu64 " (created %" PRIu64 ", %" PRIu64
                   " B each), not admitted %" PRIu64 ", pushes skipped %" PRIu64
                   ", evicted ttl %" PRIu64 " capacity %" PRIu64 ", keys pulled %" PRIu64
                   " pushed %" PRIu64 "\n",
                   t->rows, t->rows_created, t->bytes_per_row, t->not_admitted, t->pushes_skipped,
                   t->evicted_ttl, t->evicted_capacity, t->keys_pulled, t->keys_pushed);
        if (t->tiered)
            zp_ctl_tier_print(t);
    }
    printf("  workers (%zu of %u joined)\n", st->n_workers, st->num_workers);
    if (st->n_workers)
        printf("    %5s %10s  %-16s %10s %10s %10s %12s %5s %9s\n", "rank", "clock", "incarnation",
               "pushes", "pulls", "duplicates", "last seen s", "lost", "transport");
    for (size_t i = 0; i < st->n_workers; i++) {
        const Zeps__WorkerStats *w = st->workers[i];
        printf("    %5u %10" PRId64 "  %016" PRIx64 " %10" PRIu64 " %10" PRIu64 " %10" PRIu64
               " %12.1f %5s %9s\n",
               w->rank, w->clock, w->incarnation, w->pushes, w->pulls, w->duplicates,
               w->last_seen_s, w->lost ? "yes" : "no", w->transport[0] ? w->transport : "tcp");
    }
    print_traffic(st);
}

/* Whether a shard may have joined at run time: some shard's map is not
 * the default (a join moves it past epoch 0), or some shard did not say.
 * Asking for the joined shards costs every shard a request, which a scrape
 * taken after these STATS would count, so it is made only then. */
static bool maybe_joined(const answer *a, int n)
{
    for (int k = 0; k < n; k++) {
        Zeps__ShardStats *st =
            a[k].buf ? zeps__shard_stats__unpack(NULL, a[k].len, a[k].buf) : NULL;
        uint64_t epoch = st ? st->slot_epoch : 1;
        if (st)
            zeps__shard_stats__free_unpacked(st, NULL);
        if (epoch != 0)
            return true;
    }
    return false;
}

/* Print every answer (a[] holds `replicas` rows of n: replica r of shard
 * first + k at a[r * n + k]; then the `joined` shards that joined at run
 * time, first + n on); returns how many did not answer. */
static int print_answers(const zp_config *cfg, int first, int n, int replicas, int joined,
                         answer *a, bool json, bool staleness)
{
    int missing = 0, all = n * replicas + joined;
    if (json)
        printf("[\n");
    for (int i = 0; i < all; i++) {
        int k = i % n, shard = i < n * replicas ? first + k : first + n + i - n * replicas;
        int r = i < n * replicas ? i / n : 0;
        const char *ep = a[i].ep[0] ? a[i].ep : zp_config_endpoint(cfg, shard, r);
        Zeps__ShardStats *st =
            a[i].buf ? zeps__shard_stats__unpack(NULL, a[i].len, a[i].buf) : NULL;
        if (a[i].buf && !st)
            snprintf(a[i].why, sizeof(a[i].why), "sent statistics that do not decode");
        if (!st && a[i].retired) {
            if (!json)
                printf("shard %d (%s) is retired: it owns nothing and need not run\n", shard, ep);
        } else if (!st) {
            missing++;
            if (replicas > 1)
                fprintf(stderr, "zepsctl status: shard %d replica %d (%s) %s\n", shard, r, ep,
                        a[i].why);
            else
                fprintf(stderr, "zepsctl status: shard %d (%s) %s\n", shard, ep, a[i].why);
        }
        if (!json && st && a[i].ep[0])
            printf("shard %d joined at run time, at %s\n", shard, ep);
        if (!json && st && a[i].retired)
            printf("shard %d is retired: it owns nothing and need not run\n", shard);
        if (json)
            zp_ctl_status_json_shard(shard, st, &a[i], ep);
        else if (st)
            print_shard(st);
        if (!json && st && staleness)
            print_staleness(st);
        if (json)
            printf("%s\n", i + 1 < all ? "," : "");
        zeps__shard_stats__free_unpacked(st, NULL);
    }
    if (json)
        printf("]\n");
    fflush(stdout);
    return missing;
}

/* stats --plot: the answers' histograms as figures in dir. Returns 0 or
 * what zp_ctl_stats_plot returned. */
static int plot_answers(const char *dir, const answer *a, int n, int argc, char **argv)
{
    char command[1024] = "zepsctl stats";
    size_t used = strlen(command);
    for (int i = 1; i < argc && used + 2 < sizeof(command); i++)
        used += (size_t)snprintf(command + used, sizeof(command) - used, " %s", argv[i]);
    Zeps__ShardStats **st = zp_alloc_zeroed((size_t)n, sizeof(*st));
    for (int k = 0; k < n; k++)
        st[k] = a[k].buf ? zeps__shard_stats__unpack(NULL, a[k].len, a[k].buf) : NULL;
    int rc = zp_ctl_stats_plot(dir, st, n, command);
    for (int k = 0; k < n; k++)
        zeps__shard_stats__free_unpacked(st[k], NULL);
    free(st);
    return rc;
}

/* Load the cluster file of o into cfg and its client keys into keys, and
 * check --shard and --endpoint against it (setting o->shard): 0, or 2 with
 * the reason printed. */
static int load(status_opts *o, zp_config *cfg, zp_curve_client_keys *keys)
{
    char err[1024];
    zp_identity id;
    int rc = 0;
    if (zp_config_load(cfg, o->config, err, sizeof(err)) != 0 ||
        zp_curve_load_client(cfg, keys, err, sizeof(err)) != 0) {
        rc = 2;
    } else if (o->shard_text && zp_identity_resolve(ZP_IDENTITY_SHARD, o->shard_text, NULL,
                                                    ZP_MAX_SHARDS, &id, err, sizeof(err)) != 0) {
        rc = 2;
    } else if (o->shard_text && (o->shard = id.index) >= cfg->num_shards) {
        snprintf(err, sizeof(err), "--shard %d (%s), but %s has %d shards", o->shard, id.source,
                 o->config, cfg->num_shards);
        rc = 2;
    } else if (o->endpoint) {
        if (strlen(o->endpoint) >= sizeof(cfg->servers[0])) {
            snprintf(err, sizeof(err), "--endpoint is longer than %zu bytes",
                     sizeof(cfg->servers[0]) - 1);
            rc = 2;
        } else {
            snprintf(cfg->servers[o->shard], sizeof(cfg->servers[0]), "%s", o->endpoint);
        }
    }
    if (rc == 2)
        fprintf(stderr, "zepsctl status: %s\n", err);
    return rc;
}

static int status_or_stats(int argc, char **argv, bool staleness)
{
    status_opts o;
    int rc = parse_opts(argc, argv, &o, staleness);
    o.staleness = staleness;
    if (rc >= 0)
        return rc;
    zp_config *cfg = zp_alloc(sizeof(*cfg));
    zp_curve_client_keys keys;
    if (load(&o, cfg, &keys) != 0) {
        free(cfg);
        return 2;
    }
    /* The library's progress lines ("waiting for shard ...") are noise here;
     * its errors name the shard, so keep those. */
    zp_log_init("zepsctl", ZP_LOG_ERROR);
    int first = o.shard >= 0 ? o.shard : 0, n = o.shard >= 0 ? 1 : cfg->num_shards;
    /* >= 2: every replica is asked, straight; --endpoint names one process */
    int replicas = o.endpoint ? 1 : cfg->replicas;
    /* room after the file's shards for those that joined at run time */
    answer *a = zp_alloc_zeroed((size_t)n * (size_t)replicas + ZP_MAX_SHARDS, sizeof(*a));
    /* one --timeout for the whole command: the probe after a failed ask_all
     * gets what is left (at least PROBE_MIN_S, for the shards that are up:
     * they answer in milliseconds) */
    double deadline = zp_now_s() + o.timeout_ms / 1e3;
    rc = o.shard >= 0 || replicas > 1 ? ZEPS_ETIMEDOUT : ask_all(cfg, &keys, o.timeout_ms, a);
    if (rc == ZEPS_EREFUSED) {
        /* The library said which shard refused our key; asking each shard
         * on its own would only wait out the timeout on it. */
        fprintf(stderr,
                "zepsctl status: our key (curve_client_public of %s) was refused: "
                "fix the allow-list or the key, then ask again\n",
                o.config);
        explicit_bzero(&keys, sizeof(keys));
        free(a);
        free(cfg);
        return ZP_EXIT_SETUP;
    }
    for (int r = 0; rc != 0 && r < replicas; r++)
        zp_ctl_probe(cfg, &keys, first, n, r, fmax(deadline, zp_now_s() + PROBE_MIN_S),
                     o.timeout_ms, a + (size_t)r * (size_t)n);
    explicit_bzero(&keys, sizeof(keys));
    /* the whole cluster: also the shards that joined at run time (none
     * with replicas: a shard does not join then), in what is left of
     * --timeout (at least JOINED_MIN_MS: each shard down that is asked for
     * its map waits that long) */
    int left = (int)fmax(JOINED_MIN_MS, (deadline - zp_now_s()) * 1e3);
    int joined = o.shard < 0 && replicas == 1 && maybe_joined(a, n)
                     ? zp_ctl_probe_joined(o.config, left, a, n, a + n, ZP_MAX_SHARDS)
                     : 0;
    rc = print_answers(cfg, first, n, replicas, joined, a, o.json, o.staleness) ? ZP_EXIT_FAILED
                                                                                : ZP_EXIT_OK;
    if (o.plot && plot_answers(o.plot, a, n + joined, argc, argv) != 0)
        rc = ZP_EXIT_FAILED;
    for (int k = 0; k < n * replicas; k++)
        if (a[k].refused)
            rc = ZP_EXIT_SETUP; /* a key to fix, not a shard to wait for */
    for (int k = 0; k < n * replicas + joined; k++)
        free(a[k].buf);
    free(a);
    free(cfg);
    return rc;
}

int zp_ctl_status(int argc, char **argv)
{
    return status_or_stats(argc, argv, false);
}

int zp_ctl_status_stats(int argc, char **argv)
{
    return status_or_stats(argc, argv, true);
}
