/*
 * ctl_plot.c - see ctl_plot.h.
 */
#include "ctl_plot.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <string.h>

#include "spawn.h"

FILE *zp_ctl_plot_open(const char *who, const char *dir, const char *name, char *path, size_t len)
{
    snprintf(path, len, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (!f)
        fprintf(stderr, "zepsctl %s: cannot write %s: %s\n", who, path, strerror(errno));
    return f;
}

bool zp_ctl_plot_close(const char *who, FILE *f, const char *path)
{
    if (fclose(f) == 0)
        return true;
    fprintf(stderr, "zepsctl %s: cannot write %s: %s\n", who, path, strerror(errno));
    return false;
}

void zp_ctl_plot_preamble(FILE *f, const char *command, const char *gp)
{
    fprintf(f, "# Written by: %s\n# gnuplot %s\n", command, gp);
    fprintf(f, "set terminal pngcairo size 900,560 font \",11\"\nset datafile missing \"?\"\n"
               "set termoption noenhanced\nset grid\nset key top left\n");
}

void zp_ctl_plot_empty(FILE *f, const char *why)
{
    fprintf(f,
            "set label 1 \"%s\" at graph 0.5,0.5 center\nplot [0:1] [1:10] NaN notitle\n"
            "unset label 1\n",
            why);
}

bool zp_ctl_plot_run(const char *who, const char *dir, const char *gp)
{
    char log[PATH_MAX];
    snprintf(log, sizeof(log), "%s/gnuplot.log", dir);
    char *argv[] = {"gnuplot", (char *)gp, NULL};
    zp_spawn_opts so = {.log = log, .log_fd = -1, .flags = ZP_SPAWN_TRUNC | ZP_SPAWN_PATH};
    pid_t pid = zp_spawn_start(argv, &so);
    int status = 0, waited = pid > 0 ? zp_spawn_wait(pid, 60, &status) : -1;
    if (waited == 1 && zp_spawn_exit_code(status) == 0)
        return true;
    if (waited == 0)
        zp_spawn_stop(pid, SIGTERM, 1.0, NULL); /* still drawing after a minute */
    fprintf(stderr,
            "zepsctl %s: gnuplot did not make the figures (see %s; Debian: gnuplot-nox); "
            "the data and script are in %s\n",
            who, log, dir);
    return false;
}
