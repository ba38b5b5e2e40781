/*
 * spawn.c - child programs, written once for every place that runs them
 * (zepsctl local, bench and study, tests/support/harness.c).
 *
 * Between fork and exec the child only makes async-signal-safe calls: it
 * takes the death signal (and checks the parent did not die before that
 * took effect), joins its own process group if asked, points stdin at
 * /dev/null and stdout/stderr at the log, restores the signals and mask a
 * daemon expects, and execs. Waiting polls waitpid with WNOHANG every 10 ms
 * so a timeout needs no SIGALRM and no thread; reaping the whole family at
 * once (zepsctl local's signalfd loop) is zp_spawn_reap.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "spawn.h"

static void say(const char *a, const char *b)
{
    ssize_t rc = write(STDERR_FILENO, a, strlen(a));
    rc = write(STDERR_FILENO, b, strlen(b));
    rc = write(STDERR_FILENO, "\n", 1);
    (void)rc;
}

/* In the child, before it runs anything: async-signal-safe calls only. */
static void child_setup(const zp_spawn_opts *o, pid_t parent)
{
    if (o->flags & ZP_SPAWN_GROUP)
        setpgid(0, 0);
    if (o->deathsig) {
        prctl(PR_SET_PDEATHSIG, o->deathsig);
        if (getppid() != parent)
            _exit(127); /* the parent died before prctl took effect */
    }
    if (o->flags & ZP_SPAWN_NULLIN) {
        int nul = open("/dev/null", O_RDONLY);
        if (nul > 0) {
            dup2(nul, STDIN_FILENO);
            close(nul);
        }
    }
    int fd = o->log_fd;
    if (o->log)
        fd = open(o->log, O_WRONLY | O_CREAT | (o->flags & ZP_SPAWN_TRUNC ? O_TRUNC : O_APPEND),
                  0644);
    if (fd >= 0) {
        dup2(fd, STDOUT_FILENO);
        dup2(fd, STDERR_FILENO);
        if (fd > STDERR_FILENO)
            close(fd);
    }
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    signal(SIGPIPE, SIG_DFL);
    if (o->sigmask)
        sigprocmask(SIG_SETMASK, o->sigmask, NULL);
    for (char *const *e = o->env; e && *e; e++)
        putenv(*e); /* the child's own copy of the environment: nothing to free */
}

static const zp_spawn_opts defaults = {.log_fd = -1};

pid_t zp_spawn_start(char *const argv[], const zp_spawn_opts *o)
{
    if (!o)
        o = &defaults;
    pid_t parent = getpid(), pid = fork();
    if (pid != 0) {
        if (pid > 0 && (o->flags & ZP_SPAWN_GROUP))
            setpgid(pid, pid); /* also here, so the group exists before we signal it */
        return pid;
    }
    child_setup(o, parent);
    if (o->flags & ZP_SPAWN_PATH)
        execvp(argv[0], argv);
    else
        execv(argv[0], argv);
    say("cannot run ", argv[0]);
    _exit(127);
}

pid_t zp_spawn_fork(void (*fn)(void *arg), void *arg, const zp_spawn_opts *o)
{
    if (!o)
        o = &defaults;
    pid_t parent = getpid(), pid = fork();
    if (pid != 0) {
        if (pid > 0 && (o->flags & ZP_SPAWN_GROUP))
            setpgid(pid, pid);
        return pid;
    }
    child_setup(o, parent);
    fn(arg);
    _exit(127);
}

int zp_spawn_wait(pid_t pid, double timeout_s, int *status)
{
    int st = 0;
    if (timeout_s < 0) {
        while (waitpid(pid, &st, 0) < 0)
            if (errno != EINTR)
                return -1;
        if (status)
            *status = st;
        return 1;
    }
    struct timespec ts = {0, 10000000};
    for (double t = 0;; t += 0.01) {
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid) {
            if (status)
                *status = st;
            return 1;
        }
        if (r < 0 && errno != EINTR)
            return -1;
        if (t >= timeout_s)
            return 0;
        nanosleep(&ts, NULL);
    }
}

int zp_spawn_signal(pid_t pid, int sig, bool group)
{
    if (pid <= 0)
        return -1;
    if (group && kill(-pid, sig) == 0)
        return 0;
    return kill(pid, sig);
}

int zp_spawn_stop(pid_t pid, int sig, double grace_s, int *status)
{
    if (pid <= 0)
        return -1;
    kill(pid, sig);
    int rc = zp_spawn_wait(pid, grace_s, status);
    if (rc != 0)
        return rc;
    kill(pid, SIGKILL);
    return zp_spawn_wait(pid, -1, status) == 1 ? 0 : -1;
}

pid_t zp_spawn_reap(int *status)
{
    return waitpid(-1, status, WNOHANG);
}

int zp_spawn_exit_code(int st)
{
    return WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ? 128 + WTERMSIG(st) : -1;
}
