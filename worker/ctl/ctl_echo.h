/*
 * ctl_echo.h - the workers' output as `zepsctl local` shows it: every byte
 * to the worker's log file, and its lines to the terminal, each prefixed by
 * the worker's rank. Rank 0's every line, the other ranks' lines at most one
 * per ZP_ECHO_EVERY_S each (a warning, an error or a Python traceback
 * always, and a rank's last line when it ends): enough to see that every
 * rank makes progress without eight ranks' logs scrolling by.
 */
#ifndef ZP_CTL_ECHO_H
#define ZP_CTL_ECHO_H

#include <poll.h>
#include <stdbool.h>
#include <stddef.h>

#define ZP_ECHO_EVERY_S 5.0
#define ZP_ECHO_LINE    2048 /* a longer line is shown cut (the log has it whole) */

typedef struct zp_echo_src {
    int fd;         /* read end of the worker's output pipe; -1 once it closed */
    int log;        /* its log file (we write it); -1 if none */
    int rank;
    double last_s;  /* when a rate-limited line of it was last shown */
    unsigned held;  /* lines not shown since */
    size_t len;     /* bytes of the line being gathered */
    char line[ZP_ECHO_LINE];
    char last[ZP_ECHO_LINE]; /* the last line held back: shown when the pipe closes */
} zp_echo_src;

typedef struct zp_echo {
    zp_echo_src *src;
    int n;
    int out; /* where lines go: the terminal (stdout) */
} zp_echo;

void zp_ctl_echo_init(zp_echo *e, int nworkers, int out);

/* Rank `rank`'s output comes from pipe `fd` and goes to file `log`; the echo
 * owns both from here (closed at end of file or by zp_ctl_echo_fini). */
void zp_ctl_echo_add(zp_echo *e, int rank, int fd, int log);

/* Fill p[0..) with one pollfd per open pipe (at most max); their count. */
int zp_ctl_echo_pollfds(const zp_echo *e, struct pollfd *p, int max);

/* Read what rank's pipe has: one read, or until it is empty if `drain`. */
void zp_ctl_echo_pump(zp_echo *e, int rank, bool drain);

/* Read every pipe that p (from zp_ctl_echo_pollfds, n entries) says is ready. */
void zp_ctl_echo_ready(zp_echo *e, const struct pollfd *p, int n);

/* Close what is still open, free. */
void zp_ctl_echo_fini(zp_echo *e);

#endif
