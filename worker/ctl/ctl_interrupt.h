/*
 * ctl_interrupt.h - Ctrl-C (SIGINT) and SIGTERM of a zepsctl command that
 * drives moves (ctl_interrupt.c): the first signal only sets a flag, which
 * the mover's waits watch, so that a move not yet committed is aborted at
 * both shards (ABORT) instead of being left to their leases; a second one
 * stops the process at once. Around a move's commit the signals are held,
 * so that the commit's steps all go out (docs/elastic.md, "What each
 * failure does"). One thread.
 */
#ifndef ZP_CTL_INTERRUPT_H
#define ZP_CTL_INTERRUPT_H

#include <stdbool.h>

/* Take SIGINT and SIGTERM as above (once per process; again is a no-op). */
void zp_ctl_interrupt_arm(void);

/* The signal taken (SIGINT or SIGTERM), or 0 if none came. */
int zp_ctl_interrupt_taken(void);

/* The exit status for the signal taken: 130 for SIGINT, 143 for SIGTERM. */
int zp_ctl_interrupt_status(void);

/* Hold the signals (true) until released (false): one taken meanwhile is
 * acted on at the release. */
void zp_ctl_interrupt_hold(bool hold);

#endif
