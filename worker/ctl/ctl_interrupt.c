/*
 * ctl_interrupt.c - SIGINT and SIGTERM for the commands that move slots:
 * see ctl_interrupt.h. The handler only stores the signal (and, the second
 * time, lets the default action end the process); the waits of ctl_mover.c
 * see zmq_poll fail with EINTR (no SA_RESTART) and read the flag.
 */
#include "ctl_interrupt.h"

#include <signal.h>
#include <string.h>

#include "exitcode.h"

static volatile sig_atomic_t taken;
static bool armed;

static void on_signal(int sig)
{
    if (taken) { /* the second: as if nothing caught it */
        signal(sig, SIG_DFL);
        raise(sig);
        return;
    }
    taken = sig;
}

void zp_ctl_interrupt_arm(void)
{
    if (armed)
        return;
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal; /* no SA_RESTART: a blocked poll returns EINTR */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    armed = true;
}

int zp_ctl_interrupt_taken(void)
{
    return taken;
}

int zp_ctl_interrupt_status(void)
{
    return taken == SIGTERM ? ZP_EXIT_STOPPED : ZP_EXIT_INTERRUPTED;
}

void zp_ctl_interrupt_hold(bool hold)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigprocmask(hold ? SIG_BLOCK : SIG_UNBLOCK, &set, NULL);
}
