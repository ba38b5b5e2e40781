/*
 * ctl_scale_report.c - `zepsctl scale`'s results: the alpha-beta line, the
 * table on stdout (the same rows in scale.md), scale.json, and scale.dat +
 * scale.gp made into scale.png by gnuplot (ctl_plot.c).
 *
 * Per cell, with worker times summed over the N workers:
 *   T        the slowest worker's training time
 *   S(N)     T(N0) * N0 / T(N), N0 the first N asked for (1 by default)
 *   E(N)     S(N) / N
 *   waiting  comm / (compute + comm): time blocked on the shards
 *   transfer 2 * steps * alpha + bytes * beta, as a share of worker time:
 *            what the wire alone would cost. A step's pulls go out together
 *            (every table, every shard) and so do its pushes, so a step pays
 *            two round trips of latency and every byte once; the waiting
 *            beyond that is barrier idle, shard CPU and processes sharing
 *            cores.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ctl_plot.h"
#include "ctl_scale.h"

void zp_ctl_scale_report_fit_line(scale_fit *fit)
{
    double sm = 0, st = 0, smm = 0, smt = 0, stt = 0;
    int n = fit->n;
    for (int i = 0; i < n; i++) {
        double m = (double)fit->size[i], t = fit->rtt_s[i];
        sm += m, st += t, smm += m * m, smt += m * t, stt += t * t;
    }
    double vm = n * smm - sm * sm, vt = n * stt - st * st, c = n * smt - sm * st;
    fit->ok = n >= 2 && vm > 0;
    if (!fit->ok)
        return;
    fit->beta_s_per_byte = c / vm;
    fit->alpha_s = (st - fit->beta_s_per_byte * sm) / n;
    fit->r2 = vt > 0 ? c * c / (vm * vt) : 1;
}

/* The derived figures of one cell. */
typedef struct row {
    double speedup, efficiency, waiting, transfer;
} row;

static const scale_cell *baseline(const scale *sc, int si)
{
    return &sc->cells[si * sc->o.nworkers]; /* the first N asked for */
}

static row derive(const scale *sc, int si, const scale_cell *c)
{
    const scale_cell *b = baseline(sc, si);
    row r;
    r.speedup = b->f.wall_s * b->workers / c->f.wall_s;
    r.efficiency = r.speedup / c->workers;
    double busy = c->f.compute_s + c->f.comm_s;
    r.waiting = busy > 0 ? c->f.comm_s / busy : NAN;
    const scale_fit *fit = &sc->fit;
    r.transfer = fit->ok && busy > 0
                     ? (2 * c->f.steps * fit->alpha_s + c->f.bytes * fit->beta_s_per_byte) / busy
                     : NAN;
    return r;
}

static void print_fit(FILE *f, const scale_fit *fit, const char *pre)
{
    if (!fit->ok) {
        fprintf(f, "%sno alpha-beta fit (no round trips measured)\n", pre);
        return;
    }
    fprintf(f,
            "%sround trip t(m) = alpha + beta m: alpha = %.1f us, beta = %.3f ns/B "
            "(%.0f MB/s), r^2 = %.3f over %d points\n",
            pre, fit->alpha_s * 1e6, fit->beta_s_per_byte * 1e9,
            fit->beta_s_per_byte > 0 ? 1e-6 / fit->beta_s_per_byte : INFINITY, fit->r2, fit->n);
}

static void fmt_pct(char *buf, size_t len, double v)
{
    if (isfinite(v))
        snprintf(buf, len, "%.1f%%", 100 * v);
    else
        snprintf(buf, len, "-");
}

/* The table, with `md` markdown pipes or aligned columns. */
static void print_table(FILE *f, const scale *sc, bool md)
{
    const char *hdr[] = {"S",    "N",          "procs/cores", "T (s)",          "S(N)",
                         "E(N)", "examples/s", "waiting",     "transfer (a-b)", "accuracy"};
    int nh = (int)(sizeof(hdr) / sizeof(hdr[0]));
    for (int i = 0; i < nh; i++)
        fprintf(f, md ? "| %s " : "%15s", hdr[i]);
    fprintf(f, md ? "|\n" : "\n");
    if (md) {
        for (int i = 0; i < nh; i++)
            fprintf(f, "|---");
        fprintf(f, "|\n");
    }
    for (int si = 0; si < sc->o.nservers; si++)
        for (int wi = 0; wi < sc->o.nworkers; wi++) {
            const scale_cell *c = &sc->cells[si * sc->o.nworkers + wi];
            row r = derive(sc, si, c);
            char pc[32], w[16], t[16], acc[16];
            snprintf(pc, sizeof(pc), "%d/%d", c->servers + c->workers, sc->cores);
            fmt_pct(w, sizeof(w), r.waiting);
            fmt_pct(t, sizeof(t), r.transfer);
            if (isfinite(c->f.accuracy))
                snprintf(acc, sizeof(acc), "%.4f", c->f.accuracy);
            else
                snprintf(acc, sizeof(acc), "-");
            const char *fmt = md ? "| %d | %d | %s | %.2f | %.2f | %.2f | %.0f | %s | %s | %s |\n"
                                 : "%15d%15d%15s%15.2f%15.2f%15.2f%15.0f%15s%15s%15s\n";
            fprintf(f, fmt, c->servers, c->workers, pc, c->f.wall_s, r.speedup, r.efficiency,
                    c->f.eps, w, t, acc);
        }
}

static bool write_markdown(const scale *sc, const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "zepsctl scale: cannot write %s: %s\n", path, strerror(errno));
        return false;
    }
    fprintf(f,
            "`%s` (%s, %s, %d epoch(s), batch %d; %d core(s); %d run(s) per cell, the "
            "median time kept; %.0f s in all)\n\n",
            sc->command, sc->o.model, sc->o.consistency, sc->o.epochs, sc->o.batch, sc->cores,
            sc->o.reps, sc->wall_s);
    print_table(f, sc, true);
    fprintf(f, "\n");
    print_fit(f, &sc->fit, "");
    return fclose(f) == 0;
}

static void json_cell(FILE *f, const scale *sc, int si, const scale_cell *c, bool last)
{
    row r = derive(sc, si, c);
    fprintf(f,
            "    {\"servers\": %d, \"workers\": %d, \"wall_s\": %.4f, \"speedup\": %.4f, "
            "\"efficiency\": %.4f, \"examples_per_s\": %.1f, \"compute_s\": %.4f, "
            "\"comm_s\": %.4f, \"requests\": %.0f, \"steps\": %.0f, \"bytes\": %.0f, ",
            c->servers, c->workers, c->f.wall_s, r.speedup, r.efficiency, c->f.eps, c->f.compute_s,
            c->f.comm_s, c->f.requests, c->f.steps, c->f.bytes);
    if (isfinite(r.transfer))
        fprintf(f, "\"transfer_share\": %.4f, ", r.transfer);
    if (isfinite(c->f.accuracy))
        fprintf(f, "\"accuracy\": %.4f, ", c->f.accuracy);
    fprintf(f, "\"waiting_share\": %.4f, \"run_wall_s\": [", r.waiting);
    for (int i = 0; i < c->reps; i++)
        fprintf(f, "%s%.4f", i ? ", " : "", c->run_wall[i]);
    fprintf(f, "]}%s\n", last ? "" : ",");
}

static bool write_json(const scale *sc, const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "zepsctl scale: cannot write %s: %s\n", path, strerror(errno));
        return false;
    }
    fprintf(f, "{\n  \"command\": \"");
    for (const char *p = sc->command; *p; p++)
        fprintf(f, *p == '"' || *p == '\\' ? "\\%c" : "%c", *p);
    fprintf(f,
            "\",\n  \"model\": \"%s\", \"consistency\": \"%s\", \"epochs\": %d, "
            "\"batch\": %d, \"cores\": %d, \"wall_s\": %.1f,\n",
            sc->o.model, sc->o.consistency, sc->o.epochs, sc->o.batch, sc->cores, sc->wall_s);
    if (sc->fit.ok)
        fprintf(f, "  \"fit\": {\"alpha_s\": %.9g, \"beta_s_per_byte\": %.9g, \"r2\": %.4f},\n",
                sc->fit.alpha_s, sc->fit.beta_s_per_byte, sc->fit.r2);
    fprintf(f, "  \"cells\": [\n");
    int n = sc->o.nservers * sc->o.nworkers;
    for (int i = 0; i < n; i++)
        json_cell(f, sc, i / sc->o.nworkers, &sc->cells[i], i + 1 == n);
    fprintf(f, "  ]\n}\n");
    return fclose(f) == 0;
}

/* scale.dat: N, then speedup and efficiency per S; scale.gp draws both. */
static bool write_plot(const scale *sc)
{
    char dat[PATH_MAX], gp[PATH_MAX];
    FILE *f = zp_ctl_plot_open("scale", sc->dir, "scale.dat", dat, sizeof(dat));
    if (!f)
        return false;
    fprintf(f, "# Written by: %s\nN", sc->command);
    for (int si = 0; si < sc->o.nservers; si++)
        fprintf(f, " \"S(N), %d shard(s)\" \"E(N), %d shard(s)\"", sc->o.servers[si],
                sc->o.servers[si]);
    fprintf(f, "\n");
    for (int wi = 0; wi < sc->o.nworkers; wi++) {
        fprintf(f, "%d", sc->o.workers[wi]);
        for (int si = 0; si < sc->o.nservers; si++) {
            row r = derive(sc, si, &sc->cells[si * sc->o.nworkers + wi]);
            fprintf(f, " %.4f %.4f", r.speedup, r.efficiency);
        }
        fprintf(f, "\n");
    }
    if (!zp_ctl_plot_close("scale", f, dat))
        return false;
    if (!(f = zp_ctl_plot_open("scale", sc->dir, "scale.gp", gp, sizeof(gp))))
        return false;
    zp_ctl_plot_preamble(f, sc->command, gp);
    fprintf(f, "set terminal pngcairo size 1200,520 font \",11\"\nset output \"%s/scale.png\"\n",
            sc->dir);
    fprintf(f, "set multiplot layout 1,2 title \"%s, %s: strong scaling on %d core(s)\"\n",
            sc->o.model, sc->o.consistency, sc->cores);
    fprintf(f, "set xlabel \"workers N\"\nset logscale x 2\nset ylabel \"speedup S(N)\"\n");
    fprintf(f,
            "plot x dt 2 lw 1 title \"ideal\", for [i=0:%d] \"%s\" using 1:(column(2+2*i)) "
            "with linespoints lw 2 title columnheader(2+2*i)\n",
            sc->o.nservers - 1, dat);
    fprintf(f, "set ylabel \"efficiency E(N)\"\nset yrange [0:*]\n");
    fprintf(f,
            "plot 1 dt 2 lw 1 title \"ideal\", for [i=0:%d] \"%s\" using 1:(column(3+2*i)) "
            "with linespoints lw 2 title columnheader(3+2*i)\nunset multiplot\n",
            sc->o.nservers - 1, dat);
    if (!zp_ctl_plot_close("scale", f, gp))
        return false;
    if (zp_ctl_plot_run("scale", sc->dir, gp))
        printf("scale: figure %s/scale.png\n", sc->dir);
    return true;
}

bool zp_ctl_scale_report_write(const scale *sc)
{
    printf("\n%s: %s, %s, %d epoch(s), batch %d, on %d core(s)\n", sc->command, sc->o.model,
           sc->o.consistency, sc->o.epochs, sc->o.batch, sc->cores);
    print_table(stdout, sc, false);
    print_fit(stdout, &sc->fit, "\n");
    char json[PATH_MAX], md[PATH_MAX];
    snprintf(json, sizeof(json), "%s/scale.json", sc->dir);
    snprintf(md, sizeof(md), "%s/scale.md", sc->dir);
    const char *jp = sc->o.json ? sc->o.json : json, *mp = sc->o.markdown ? sc->o.markdown : md;
    bool ok = write_json(sc, jp) && write_markdown(sc, mp) && write_plot(sc);
    if (ok)
        printf("scale: %s, %s (%.0f s)\n", jp, mp, sc->wall_s);
    fflush(stdout);
    return ok;
}
