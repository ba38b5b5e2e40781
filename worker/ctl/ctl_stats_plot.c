/*
 * ctl_stats_plot.c - `zepsctl stats --plot DIR`: the staleness report of a
 * live cluster as figures. The shards' histograms are summed over the
 * shards (a dense table's slices, a worker's pushes to every shard) and
 * written as gnuplot data, one column per table or rank:
 *
 *   tau.dat, tau.png              tau of applied pushes, per table
 *   tau_ranks.dat, tau_ranks.png  tau of applied pushes, per rank
 *   clock_gap.dat, clock_gap.png  clock gap of applied pushes, per table
 *   pull_wait.dat, pull_wait.png  how long pulls were parked, per table
 *   tau_by_freq.dat, tau_by_freq.png  per-row tau of sparse tables by row
 *                                 frequency: mean, p50, p90, p99 per bucket
 *
 * with stats.gp, the script gnuplot ran (ctl_plot.c).
 */
#include "ctl_stats_plot.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "ctl_hist.h"
#include "ctl_plot.h"

/* One histogram summed over shards, under a name (table or "rank N"). */
typedef struct series {
    char name[80];
    uint64_t counts[64];
    size_t nb; /* buckets up to the last nonzero one */
} series;

typedef struct series_set {
    series *s;
    size_t n, cap;
} series_set;

static series *find_or_add(series_set *set, const char *name)
{
    for (size_t i = 0; i < set->n; i++)
        if (strcmp(set->s[i].name, name) == 0)
            return &set->s[i];
    if (set->n == set->cap) {
        set->cap = set->cap ? 2 * set->cap : 8;
        set->s = zp_alloc_resize(set->s, set->cap * sizeof(series));
    }
    series *x = &set->s[set->n++];
    memset(x, 0, sizeof(*x));
    snprintf(x->name, sizeof(x->name), "%s", name);
    return x;
}

static void add_hist(series *x, const Zeps__Histogram *h)
{
    for (size_t i = 0; h && i < h->n_counts && i < 64; i++) {
        x->counts[i] += h->counts[i];
        if (h->counts[i] && i + 1 > x->nb)
            x->nb = i + 1;
    }
}

/* A sparse table's per-row tau by row frequency, summed over the shards. */
typedef struct freq_series {
    char name[80];
    uint64_t counts[ZP_CTL_FREQ_BUCKETS][64];
    uint64_t n[ZP_CTL_FREQ_BUCKETS], sum[ZP_CTL_FREQ_BUCKETS], max[ZP_CTL_FREQ_BUCKETS];
} freq_series;

typedef struct freq_set {
    freq_series *s;
    size_t n, cap;
} freq_set;

static void add_freq(freq_set *set, const Zeps__TableStats *t)
{
    if (t->n_tau_by_freq == 0)
        return;
    freq_series *x = NULL;
    for (size_t i = 0; i < set->n && !x; i++)
        if (strcmp(set->s[i].name, t->name) == 0)
            x = &set->s[i];
    if (!x) {
        if (set->n == set->cap) {
            set->cap = set->cap ? 2 * set->cap : 4;
            set->s = zp_alloc_resize(set->s, set->cap * sizeof(freq_series));
        }
        x = &set->s[set->n++];
        memset(x, 0, sizeof(*x));
        snprintf(x->name, sizeof(x->name), "%s", t->name);
    }
    for (size_t b = 0; b < t->n_tau_by_freq && b < ZP_CTL_FREQ_BUCKETS; b++) {
        const Zeps__Histogram *h = t->tau_by_freq[b];
        for (size_t i = 0; h && i < h->n_counts && i < 64; i++)
            x->counts[b][i] += h->counts[i];
        x->n[b] += h ? h->n : 0;
        x->sum[b] += h ? h->sum : 0;
        if (h && h->max > x->max[b])
            x->max[b] = h->max;
    }
}

/* A name as a gnuplot string can hold it (it comes from the network). */
static void gp_name(const char *in, char *out, size_t len)
{
    size_t k = 0;
    for (; *in && k + 1 < len; in++)
        out[k++] = *in == '"' || *in == '\\' ? '_' : *in;
    out[k] = '\0';
}

/* tau_by_freq.dat: one block per sparse table (gnuplot `index`), a row per
 * non-empty frequency bucket: bucket, touches, rows pushed, mean, p50,
 * p90, p99, max of their tau. */
static bool write_freq_dat(const char *dir, const freq_set *set, const char *command)
{
    char path[PATH_MAX];
    FILE *f = zp_ctl_plot_open("stats", dir, "tau_by_freq.dat", path, sizeof(path));
    if (!f)
        return false;
    fprintf(f, "# Written by: %s\n# per-row tau of sparse tables by row frequency (touches of the "
               "row when pushed), summed over the shards\n", command);
    for (size_t i = 0; i < set->n; i++) {
        const freq_series *x = &set->s[i];
        char name[80];
        gp_name(x->name, name, sizeof(name));
        fprintf(f, "%s# table \"%s\"\nbucket touches rows mean p50 p90 p99 max\n", i ? "\n\n" : "",
                name);
        for (size_t b = 0; b < ZP_CTL_FREQ_BUCKETS; b++) {
            if (x->n[b] == 0)
                continue;
            Zeps__Histogram h = ZEPS__HISTOGRAM__INIT;
            h.counts = (uint64_t *)x->counts[b];
            h.n_counts = 64;
            h.n = x->n[b];
            h.sum = x->sum[b];
            h.max = x->max[b];
            char label[32];
            zp_ctl_hist_freq_label(b, label, sizeof(label));
            fprintf(f, "%zu %s %llu %.4f %zu %zu %zu %llu\n", b, label,
                    (unsigned long long)x->n[b], zp_ctl_hist_mean(&h), zp_ctl_hist_bucket(&h, 0.5),
                    zp_ctl_hist_bucket(&h, 0.9), zp_ctl_hist_bucket(&h, 0.99),
                    (unsigned long long)x->max[b]);
        }
    }
    if (set->n == 0)
        fprintf(f, "# no sparse table pushed rows with their versions\n");
    return zp_ctl_plot_close("stats", f, path);
}

/* tau_by_freq.png: per table, mean tau (lines) and p50/p90/p99 (points)
 * against the row frequency bucket. */
static void plot_freq(FILE *f, const char *dir, const freq_set *set)
{
    fprintf(f, "set output \"%s/tau_by_freq.png\"\nset title \"Per-row staleness of sparse "
               "tables, by row frequency\"\nset xlabel \"touches of the row when pushed (log2 "
               "buckets)\"\nset ylabel \"tau (versions)\"\nset style data linespoints\n"
               "set xtics rotate by -45\nset offsets 0.5, 0.5, graph 0.08, 0\nset key inside left top\n",
            dir);
    if (set->n == 0) {
        fprintf(f, "set label 1 \"no data\" at graph 0.5, graph 0.5 center\n"
                   "plot [0:1] [0:1] NaN notitle\nunset label 1\n");
        return;
    }
    fprintf(f, "plot ");
    static const char *const what[4] = {"mean", "p50", "p90", "p99"};
    for (size_t i = 0; i < set->n; i++) {
        char name[80];
        gp_name(set->s[i].name, name, sizeof(name));
        for (int k = 0; k < 4; k++)
            fprintf(f, "%s\"%s/tau_by_freq.dat\" index %zu using 1:%d:xtic(2) with linespoints "
                       "lc %zu dt %d pt %d lw %d title \"%s %s\"",
                    i || k ? ", \\\n     " : "", dir, i, 4 + k, i + 1, k + 1, k + 5, k ? 1 : 2,
                    name, what[k]);
    }
    fprintf(f, "\n");
}

/* The label of bucket i: tau and clock gap count 0, 1, ..; pull waits are
 * log2 buckets of microseconds (0, then [2^(i-1), 2^i)); bucket 63, the
 * last a shard sends (trailing empty ones are left out), holds everything
 * past it (docs/protocol.md, STATS). */
static void bucket_label(bool log2us, size_t i, char *buf, size_t len)
{
    if (i == 63)
        snprintf(buf, len, log2us ? ">=%lluus" : "%llu+", log2us ? 1ull << (i - 1) : i);
    else if (!log2us || i == 0)
        snprintf(buf, len, "%zu", i);
    else if (i < 11)
        snprintf(buf, len, "<%lluus", 1ull << i);
    else if (i < 21)
        snprintf(buf, len, "<%llums", (1ull << i) / 1000);
    else
        snprintf(buf, len, "<%.0fs", (double)(1ull << i) / 1e6);
}

/* name.dat: a header naming the columns, then a row per bucket up to the
 * last nonzero one of any series. */
static bool write_dat(const char *dir, const char *name, const series_set *set, bool log2us,
                      const char *command)
{
    char path[PATH_MAX];
    FILE *f = zp_ctl_plot_open("stats", dir, name, path, sizeof(path));
    if (!f)
        return false;
    size_t nb = 1;
    for (size_t i = 0; i < set->n; i++)
        if (set->s[i].nb > nb)
            nb = set->s[i].nb;
    fprintf(f, "# Written by: %s\n# counts summed over the shards\nbucket", command);
    for (size_t i = 0; i < set->n; i++)
        fprintf(f, " \"%s\"", set->s[i].name);
    fprintf(f, "\n");
    for (size_t b = 0; b < nb; b++) {
        char label[32];
        bucket_label(log2us, b, label, sizeof(label));
        fprintf(f, "%s", label);
        for (size_t i = 0; i < set->n; i++)
            fprintf(f, " %llu", (unsigned long long)set->s[i].counts[b]);
        fprintf(f, "\n");
    }
    return zp_ctl_plot_close("stats", f, path);
}

static void plot_one(FILE *f, const char *dir, const char *base, size_t ncols, const char *title,
                     const char *xlabel)
{
    fprintf(f, "set output \"%s/%s.png\"\nset title \"%s\"\nset xlabel \"%s\"\n", dir, base,
            title, xlabel);
    if (ncols == 0) {
        fprintf(f, "set label 1 \"no data\" at graph 0.5, graph 0.5 center\n"
                   "plot [0:1] [0:1] NaN notitle\nunset label 1\n");
        return;
    }
    fprintf(f, "plot for [i=2:%zu] \"%s/%s.dat\" using i:xtic(1) title columnheader(i)\n",
            ncols + 1, dir, base);
}

static bool write_script(const char *dir, const char *command, const series_set sets[4],
                         const freq_set *fset, char *gp, size_t len)
{
    FILE *f = zp_ctl_plot_open("stats", dir, "stats.gp", gp, len);
    if (!f)
        return false;
    zp_ctl_plot_preamble(f, command, gp);
    fprintf(f, "set style data histograms\nset style histogram clustered gap 1\n"
               "set style fill solid 0.8 border -1\nset key outside right top\n"
               "set offsets 0, 0, graph 0.08, 0\nset yrange [0:*]\n"
               "set ylabel \"count\"\nset xtics rotate by -45\n");
    plot_one(f, dir, "tau", sets[0].n, "Staleness of applied pushes, per table",
             "tau (versions applied between the pull and the push)");
    plot_one(f, dir, "tau_ranks", sets[1].n, "Staleness of applied pushes, per rank",
             "tau (versions)");
    plot_one(f, dir, "clock_gap", sets[2].n, "Clock gap of applied pushes, per table",
             "clock gap (clocks)");
    plot_one(f, dir, "pull_wait", sets[3].n, "How long pulls waited, per table",
             "wait (log2 buckets)");
    plot_freq(f, dir, fset);
    return zp_ctl_plot_close("stats", f, gp);
}

int zp_ctl_stats_plot(const char *dir, Zeps__ShardStats *const *st, int n, const char *command)
{
    series_set sets[4] = {{0}}; /* tau, tau by rank, clock gap, pull wait */
    freq_set fset = {0};
    for (int k = 0; k < n; k++) {
        for (size_t i = 0; st[k] && i < st[k]->n_tables; i++) {
            const Zeps__TableStats *t = st[k]->tables[i];
            add_hist(find_or_add(&sets[0], t->name), t->tau);
            add_hist(find_or_add(&sets[2], t->name), t->clock_gap);
            add_hist(find_or_add(&sets[3], t->name), t->pull_wait_us);
            add_freq(&fset, t);
        }
        for (size_t i = 0; st[k] && i < st[k]->n_workers; i++) {
            char name[32];
            snprintf(name, sizeof(name), "rank %u", st[k]->workers[i]->rank);
            add_hist(find_or_add(&sets[1], name), st[k]->workers[i]->tau);
        }
    }
    static const char *const base[4] = {"tau.dat", "tau_ranks.dat", "clock_gap.dat",
                                        "pull_wait.dat"};
    char gp[PATH_MAX];
    bool ok = true;
    for (int i = 0; i < 4 && ok; i++)
        ok = write_dat(dir, base[i], &sets[i], i == 3, command);
    ok = ok && write_freq_dat(dir, &fset, command);
    ok = ok && write_script(dir, command, sets, &fset, gp, sizeof(gp));
    for (int i = 0; i < 4; i++)
        free(sets[i].s);
    free(fset.s);
    if (!ok)
        return -1;
    if (!zp_ctl_plot_run("stats", dir, gp))
        return 1;
    printf("stats: figures %s/tau.png, %s/tau_ranks.png, %s/clock_gap.png, %s/pull_wait.png, "
           "%s/tau_by_freq.png\n",
           dir, dir, dir, dir, dir);
    return 0;
}
