/*
 * spawn.h - starting, waiting for, signalling and reaping child programs:
 * what zepsctl local, bench and study and the test harness do with the
 * servers and workers they run (spawn.c).
 */
#ifndef ZP_SPAWN_H
#define ZP_SPAWN_H

#include <signal.h>
#include <stdbool.h>
#include <sys/types.h>

enum {
    ZP_SPAWN_TRUNC = 1 << 0,  /* truncate the log file (default: append) */
    ZP_SPAWN_GROUP = 1 << 1,  /* the child leads its own process group (a
                                 terminal's ^C then reaches only the parent) */
    ZP_SPAWN_NULLIN = 1 << 2, /* stdin from /dev/null */
    ZP_SPAWN_PATH = 1 << 3,   /* look argv[0] up on PATH (execvp) */
};

typedef struct zp_spawn_opts {
    const char *log;         /* stdout and stderr go to this file (NULL: see log_fd) */
    int log_fd;              /* ... or to this descriptor if >= 0 (NULL log and -1: inherited) */
    int flags;               /* ZP_SPAWN_* */
    int deathsig;            /* sent to the child when the parent dies (0: none) */
    const sigset_t *sigmask; /* the signal mask the child starts with (NULL: the parent's) */
    char *const *env;        /* "NAME=value" strings set in the child before exec, after
                                the parent's environment (NULL: none) */
} zp_spawn_opts;

/* Start argv[0] with argv as described by o (NULL: defaults, as
 * {.log_fd = -1}). The child's SIGINT, SIGTERM and SIGPIPE are reset to their
 * defaults; if exec fails it writes why to its stderr and exits with 127.
 * Returns the child's pid, or -1 with errno set. The caller owns the child:
 * it must reap it (zp_spawn_wait, zp_spawn_stop or zp_spawn_reap). Call
 * from one thread of a process that does not run others. */
pid_t zp_spawn_start(char *const argv[], const zp_spawn_opts *o);

/* Fork a child that runs fn(arg) (which must not return; it should _exit)
 * with the options' death signal and process group. Returns as
 * zp_spawn_start. */
pid_t zp_spawn_fork(void (*fn)(void *arg), void *arg, const zp_spawn_opts *o);

/* Wait for child pid up to timeout_s seconds (< 0: as long as it takes;
 * EINTR is retried). Returns 1 with *status (waitpid's) when it exited, 0
 * when it still runs at the timeout, -1 on error (errno). */
int zp_spawn_wait(pid_t pid, double timeout_s, int *status);

/* Send sig to pid; with `group`, to its process group (falling back to the
 * pid alone). Returns 0 or -1 with errno. */
int zp_spawn_signal(pid_t pid, int sig, bool group);

/* Stop child pid: send sig, wait up to grace_s, then SIGKILL and reap it.
 * Returns 1 with *status if it exited within the grace time, 0 if it had to
 * be killed (*status then is the kill's), -1 on error. status may be NULL. */
int zp_spawn_stop(pid_t pid, int sig, double grace_s, int *status);

/* Reap any one exited child without blocking: its pid and *status, or 0 if
 * none has exited (or -1: no children). */
pid_t zp_spawn_reap(int *status);

/* The exit code a shell would give for waitpid status st: the exit status,
 * or 128 + the signal. */
int zp_spawn_exit_code(int st);

#endif
