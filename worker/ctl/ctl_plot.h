/*
 * ctl_plot.h - what zepsctl's figures share (`study`, `stats --plot`): data
 * and a gnuplot script written into a folder, then Debian's gnuplot-nox run
 * on the script, so a figure can be remade or restyled from the files.
 */
#ifndef ZP_CTL_PLOT_H
#define ZP_CTL_PLOT_H

#include <stdbool.h>
#include <stdio.h>

/* Open dir/name for writing; path receives the full path. NULL (said on
 * stderr as "zepsctl WHO: cannot write ...") on failure. */
FILE *zp_ctl_plot_open(const char *who, const char *dir, const char *name, char *path, size_t len);

/* fclose f; false (said) if the data did not reach the file. */
bool zp_ctl_plot_close(const char *who, FILE *f, const char *path);

/* The script's opening lines: who wrote it, the PNG terminal, defaults. */
void zp_ctl_plot_preamble(FILE *f, const char *command, const char *gp);

/* A plot with nothing to show (every point of its data is "?", where
 * gnuplot would stop at an invalid range): an empty frame saying `why`. */
void zp_ctl_plot_empty(FILE *f, const char *why);

/* Run gnuplot on the script gp (a minute at most; its output goes to
 * dir/gnuplot.log). True if it made the figures; a missing or failing
 * gnuplot is said on stderr and returns false. */
bool zp_ctl_plot_run(const char *who, const char *dir, const char *gp);

#endif
