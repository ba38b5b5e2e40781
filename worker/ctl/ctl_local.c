/*
 * ctl_local.c - `zepsctl local`: a whole zeps cluster on this machine in one
 * command.
 *
 * It makes a run directory, writes the cluster file into it (the embedded
 * default with free loopback ports and the command-line overrides, or a copy
 * of --config FILE), validates it with zp_config_load, starts the servers and
 * then the workers as child processes, waits for the workers to finish
 * training, stops the servers, and summarises the workers' result files on
 * the terminal and as JSON.
 *
 * Process handling is one poll() loop in one thread: SIGCHLD, SIGINT and
 * SIGTERM arrive on a signalfd (so nothing runs in a signal handler), and rank
 * 0's output arrives on a pipe that the loop copies to its log file and to the
 * terminal. Each child leads its own process group, so a Ctrl-C typed in the
 * terminal reaches zepsctl alone, which then stops the children in order
 * (SIGTERM, 10 s of grace, SIGKILL); PR_SET_PDEATHSIG stops them as well if
 * zepsctl itself dies. Every exit path after the first fork reaps every child
 * (through common/spawn.c). The summary is ctl_local_report.c.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>

#include "freeport.h"
#include "ctl.h"
#include "exitcode.h"
#include "spawn.h"
#include "alloc.h"
#include "now.h"
#include "ctl_local.h"

#define GRACE_S           10.0 /* SIGTERM -> SIGKILL */
#define TAIL_LINES        10   /* log lines shown for a failed process */
#define DEFAULT_TIMEOUT_S 1800.0

/* ---------------------------------------------------------------- options */

static void usage(FILE *f)
{
    fprintf(f,
            "usage: zepsctl local [options]\n\n"
            "Runs a zeps cluster (servers + workers) on this machine, waits for training\n"
            "to finish, prints a summary, writes it as JSON, and stops everything.\n"
            "Without --config it runs the embedded default cluster (the same as\n"
            "deploy/local/default.conf) on free loopback ports.\n\n"
            "  --config FILE        run this cluster file as it is (in a copy whose only\n"
            "                       change is training.result_dir = the run directory)\n"
            "  --servers S, --workers N, --model quadratic|softmax|mlp,\n"
            "  --consistency bsp|ssp|async|weighted, --epochs E, --lr X, --batch B,\n"
            "  --max-train-examples N, --seed N, --transport tcp|auto\n"
            "                       change the embedded default (not with --config)\n"
            "  --dir DIR            run directory for cluster.conf, logs and results\n"
            "                       (default: a new $TMPDIR/zeps-local-XXXXXX, kept)\n"
            "  --json PATH          summary JSON (default: <dir>/summary.json)\n"
            "  --timeout SECONDS    stop everything and fail after this (default %.0f;\n"
            "                       0: none)\n"
            "  --exec CMD           run `sh -c CMD` as each worker instead of zeps-worker\n"
            "                       (a Python training script, say), with $ZEPS_RANK,\n"
            "                       $ZEPS_CONFIG (the cluster file) and $ZEPS_RESULT_DIR\n"
            "                       (where worker-<rank>.json goes) set, and the build\n"
            "                       tree's Python package on $PYTHONPATH when there is one\n"
            "  --metrics            every server and worker serves /metrics (and /healthz,\n"
            "                       /readyz) on a free loopback port; the URLs are printed\n"
            "                       and written as Prometheus file_sd targets to\n"
            "                       <dir>/prometheus-targets.json\n"
            "  -q, --quiet          do not echo the workers' output (rank 0's every line, the\n"
            "                       others' at most one line per 5 s and every warning)\n"
            "  --print-config       print the embedded default (with the options above,\n"
            "                       free loopback ports and training.result_dir =\n"
            "                       \"results\") as a cluster file to run by hand, and exit\n"
            "  --replicas R         R (2..5) zeps-server processes per shard, elected by a\n"
            "                       one-node ZooKeeper started in <dir>/zookeeper (Debian's\n"
            "                       zookeeper package: deploy/install-deps.sh zk); backups\n"
            "                       apply the primary's log (docs/replication.md). With\n"
            "                       --config, the file's shards get R free loopback ports each\n\n"
            "Exit status: 0 trained and stopped cleanly; 1 a process failed (not a server\n"
            "whose shard carries on at another replica), the run timed out or a result is\n"
            "missing; 2 bad options or cluster file, zeps-server\n"
            "or zeps-worker not found, or a run directory that cannot be made or\n"
            "written; 128+N when stopped by signal N.\n",
            DEFAULT_TIMEOUT_S);
}

/* Check `s` as a number in [lo, hi] (an integer if `integer`). */
static bool check_num(const char *opt, const char *s, double lo, double hi, bool integer)
{
    char *end;
    errno = 0;
    double v = integer ? (double)strtoll(s, &end, 10) : strtod(s, &end);
    if (!errno && end != s && !*end && v >= lo && v <= hi)
        return true;
    fprintf(stderr, "zepsctl local: --%s wants %s in [%g, %g], not '%s'\n", opt,
            integer ? "an integer" : "a number", lo, hi, s);
    return false;
}

enum { OPT_TIMEOUT = 't', OPT_REPLICAS = 'R', OPT_OVERRIDE = 256 };

static const struct option long_opts[] = {
    {"config", required_argument, NULL, 'c'},
    {"dir", required_argument, NULL, 'd'},
    {"json", required_argument, NULL, 'j'},
    {"timeout", required_argument, NULL, OPT_TIMEOUT},
    {"quiet", no_argument, NULL, 'q'},
    {"exec", required_argument, NULL, 'x'},
    {"metrics", no_argument, NULL, 'm'},
    {"help", no_argument, NULL, 'h'},
    {"print-config", no_argument, NULL, 'p'},
    {"replicas", required_argument, NULL, OPT_REPLICAS},
    /* overrides[], in order */
    {"servers", required_argument, NULL, OPT_OVERRIDE + 0},
    {"workers", required_argument, NULL, OPT_OVERRIDE + 1},
    {"model", required_argument, NULL, OPT_OVERRIDE + 2},
    {"consistency", required_argument, NULL, OPT_OVERRIDE + 3},
    {"epochs", required_argument, NULL, OPT_OVERRIDE + 4},
    {"lr", required_argument, NULL, OPT_OVERRIDE + 5},
    {"batch", required_argument, NULL, OPT_OVERRIDE + 6},
    {"max-train-examples", required_argument, NULL, OPT_OVERRIDE + 7},
    {"seed", required_argument, NULL, OPT_OVERRIDE + 8},
    {"transport", required_argument, NULL, OPT_OVERRIDE + 9},
    {NULL, 0, NULL, 0},
};

/* Apply one option; false on a bad one (already reported). */
static bool apply_opt(local_opts *o, int c, const char *arg)
{
    if (c >= OPT_OVERRIDE && c < OPT_OVERRIDE + N_OVERRIDES) {
        const zp_local_override *ov = &zp_ctl_local_conf_overrides[c - OPT_OVERRIDE];
        o->ov[c - OPT_OVERRIDE] = arg;
        o->noverrides++;
        return ov->type == 's' || check_num(ov->opt, arg, ov->lo, ov->hi, ov->type != 'f');
    }
    switch (c) {
    case 'c':
        o->config = arg;
        return true;
    case 'd':
        o->dir = arg;
        return true;
    case 'j':
        o->json = arg;
        return true;
    case 'q':
        o->quiet = true;
        return true;
    case 'x':
        o->exec = arg;
        return true;
    case 'm':
        o->metrics = true;
        return true;
    case 'p':
        o->print_config = true;
        return true;
    case OPT_TIMEOUT:
        o->timeout_s = strtod(arg, NULL);
        return check_num("timeout", arg, 0, 1e9, false);
    case OPT_REPLICAS: /* with --config too: the file's shards get R replicas each */
        o->replicas = atoi(arg);
        return check_num("replicas", arg, 1, ZP_MAX_REPLICAS, true);
    default:
        return false;
    }
}

/* Returns -1 to go on, or the exit status. */
static int parse_opts(int argc, char **argv, local_opts *o)
{
    *o = (local_opts){.timeout_s = DEFAULT_TIMEOUT_S};
    optind = 1;
    opterr = 0; /* getopt would name us "local" */
    int c;
    while ((c = getopt_long(argc, argv, "qh", long_opts, NULL)) != -1) {
        if (c == 'h') {
            usage(stdout);
            return 0;
        }
        if (c == '?')
            fprintf(stderr, "zepsctl local: unknown option or missing value: '%s'\n",
                    argv[optind - 1]);
        if (!apply_opt(o, c, optarg)) {
            fprintf(stderr, "'zepsctl local --help' lists the options\n");
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "zepsctl local: unexpected argument '%s'\n", argv[optind]);
        return 2;
    }
    if (o->config && o->print_config) {
        fprintf(stderr, "zepsctl local: --print-config prints the embedded default; with "
                        "--config you have the file already\n");
        return 2;
    }
    if (o->print_config && o->replicas > 1)
        o->zk_port = 2181; /* the printed file names ZooKeeper's usual port */
    if (o->config && o->noverrides) {
        fprintf(stderr, "zepsctl local: --servers, --workers, --model, --consistency, "
                        "--epochs, --lr, --batch,\n  --max-train-examples, --seed and "
                        "--transport change the embedded default; with --config, edit the "
                        "file\n");
        return 2;
    }
    return -1;
}

/* --------------------------------------------------------- child processes */

/* Start kid k as `bin --config <conf> <flag> <index>`, its output going to
 * its log (through the echo pipe if `echo`). */
static bool spawn(local_run *r, kid *k, const char *bin, const char *flag, bool echo)
{
    char idx[16], rep[16];
    snprintf(idx, sizeof(idx), "%d", k->index);
    snprintf(rep, sizeof(rep), "%d", k->replica);
    if (k->replica >= 0) /* server-<shard>.<replica>.log */
        snprintf(k->log, sizeof(k->log), "%s/%s-%d.%d.log", r->dir, k->role, k->index, k->replica);
    else
        snprintf(k->log, sizeof(k->log), "%s/%s-%d.log", r->dir, k->role, k->index);
    int logfd = open(k->log, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
    int pfd[2] = {-1, -1};
    pid_t pid = -1;
    if (logfd >= 0 && (!echo || pipe2(pfd, O_CLOEXEC) == 0)) {
        char listen[32];
        snprintf(listen, sizeof(listen), "127.0.0.1:%d", k->metrics_port);
        char *argv[10] = {(char *)bin, "--config", r->conf, (char *)flag, idx};
        int na = 5;
        if (k->replica >= 0) {
            argv[na++] = "--replica";
            argv[na++] = rep;
        }
        if (k->metrics_port) {
            argv[na++] = "--metrics-listen";
            argv[na++] = listen;
        }
        bool user = r->o.exec != NULL && strcmp(k->role, "worker") == 0;
        char *shell[] = {"/bin/sh", "-c", (char *)r->o.exec, NULL};
        char rank[32], menv[64];
        snprintf(rank, sizeof(rank), "ZEPS_RANK=%d", k->index);
        snprintf(menv, sizeof(menv), "ZEPS_METRICS_LISTEN=%s", listen);
        char *env[6] = {rank, r->env_config, r->env_result, NULL, NULL, NULL};
        int ne = 3;
        if (r->env_python[0])
            env[ne++] = r->env_python;
        if (k->metrics_port) /* a libzeps program may serve its own metrics there */
            env[ne++] = menv;
        /* its own group: a terminal's Ctrl-C reaches zepsctl only */
        zp_spawn_opts so = {.log_fd = echo ? pfd[1] : logfd,
                            .flags = ZP_SPAWN_GROUP | ZP_SPAWN_NULLIN,
                            .deathsig = SIGTERM,
                            .sigmask = &r->oldmask,
                            .env = user ? env : NULL};
        pid = zp_spawn_start(user ? shell : argv, &so);
    }
    if (pid < 0) {
        fprintf(stderr, "zepsctl local: cannot start %s %d: %s\n", k->role, k->index,
                strerror(errno));
        for (int i = 0; i < 2; i++)
            if (pfd[i] >= 0)
                close(pfd[i]);
        if (logfd >= 0)
            close(logfd);
        return false;
    }
    k->pid = pid;
    k->running = true;
    if (!echo) {
        close(logfd);
        return true;
    }
    close(pfd[1]);
    fcntl(pfd[0], F_SETFL, O_NONBLOCK);
    zp_ctl_echo_add(&r->echo, k->index, pfd[0], logfd); /* the echo takes both */
    return true;
}

static void signal_kid(const kid *k, int sig)
{
    if (k->running)
        zp_spawn_signal(k->pid, sig, true);
}

/* Collect every exited child, and the signals that arrived. */
static void read_signals(local_run *r)
{
    struct signalfd_siginfo si;
    while (read(r->sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
        if (si.ssi_signo != SIGCHLD && !r->nsignals++)
            r->signo = (int)si.ssi_signo;
    }
    int st;
    pid_t pid;
    while ((pid = zp_spawn_reap(&st)) > 0) { /* SIGCHLDs coalesce: always look */
        if (pid == r->zk_pid)
            r->zk_running = false;
        for (int i = 0; i < r->nkids; i++) {
            if (r->kids[i].pid != pid)
                continue;
            r->kids[i].running = false;
            r->kids[i].status = st;
            if (i >= r->nservers) /* its last words before anything is reported */
                zp_ctl_echo_pump(&r->echo, i - r->nservers, true);
        }
    }
}

/* Wait for and handle one round of events, until `deadline` at the latest. */
static void pump(local_run *r, double deadline)
{
    struct pollfd p[1 + ZP_MAX_WORKERS] = {{.fd = r->sigfd, .events = POLLIN}};
    int n = 1 + zp_ctl_echo_pollfds(&r->echo, p + 1, ZP_MAX_WORKERS);
    double left = deadline - zp_now_s();
    int ms = isinf(deadline) ? -1 : left <= 0 ? 0 : left > 3600 ? 3600000 : (int)(left * 1e3) + 1;
    if (poll(p, (nfds_t)n, ms) < 0 && errno != EINTR) {
        fprintf(stderr, "zepsctl local: poll: %s\n", strerror(errno));
        return;
    }
    zp_ctl_echo_ready(&r->echo, p + 1, n - 1); /* before a reap drains a pipe and closes it */
    if (p[0].revents)
        read_signals(r);
}

static int count_running(const local_run *r, int first, int count)
{
    int n = 0;
    for (int i = first; i < first + count; i++)
        n += r->kids[i].running;
    return n;
}

/* SIGTERM the running kids in [first, first + count), give them GRACE_S (cut
 * short by another SIGINT/SIGTERM), SIGKILL the rest, and reap them all.
 * Returns how many had to be killed. */
static int stop_kids(local_run *r, int first, int count)
{
    int nsig = r->nsignals, killed = 0;
    for (int i = first; i < first + count; i++)
        signal_kid(&r->kids[i], SIGTERM);
    double deadline = zp_now_s() + GRACE_S;
    while (count_running(r, first, count) && zp_now_s() < deadline && r->nsignals == nsig)
        pump(r, deadline);
    for (int i = first; i < first + count; i++) {
        kid *k = &r->kids[i];
        if (!k->running)
            continue;
        fprintf(stderr, "zepsctl local: %s %d (pid %d) did not stop %s; killing it\n", k->role,
                k->index, (int)k->pid,
                r->nsignals != nsig ? "before a second signal" : "within 10 s of SIGTERM");
        signal_kid(k, SIGKILL);
        k->killed = true;
        killed++;
    }
    while (count_running(r, first, count))
        pump(r, INFINITY);
    return killed;
}

/* ------------------------------------------------------------------ the run */

static void describe_exit(const kid *k, char *buf, size_t len)
{
    if (WIFSIGNALED(k->status))
        snprintf(buf, len, "was killed by signal %d (%s)", WTERMSIG(k->status),
                 strsignal(WTERMSIG(k->status)));
    else if (WEXITSTATUS(k->status) == 0)
        snprintf(buf, len, "exited with status 0 while workers were still training");
    else
        snprintf(buf, len, "exited with status %d", WEXITSTATUS(k->status));
}

/* Print the last `lines` lines of the file at `path`, indented. */
static void print_tail(const char *path, int lines)
{
    char buf[16384];
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    off_t size = fd >= 0 ? lseek(fd, 0, SEEK_END) : 0;
    off_t from = size > (off_t)sizeof(buf) - 1 ? size - (off_t)sizeof(buf) + 1 : 0;
    ssize_t n = fd >= 0 ? pread(fd, buf, sizeof(buf) - 1, from) : -1;
    if (fd >= 0)
        close(fd);
    while (n > 0 && buf[n - 1] == '\n')
        n--;
    if (n <= 0) {
        fprintf(stderr, "    (the log is empty or unreadable)\n");
        return;
    }
    buf[n] = '\0';
    char *start = buf + n;
    for (int seen = 0; start > buf; start--)
        if (start[-1] == '\n' && ++seen == lines)
            break;
    for (char *line = strtok(start, "\n"); line; line = strtok(NULL, "\n"))
        fprintf(stderr, "    %s\n", line);
}

static void report_failure(const local_run *r, const kid *k)
{
    char what[128];
    describe_exit(k, what, sizeof(what));
    fprintf(stderr, "zepsctl local: %s %d (pid %d) %s; last lines of its log %s:\n", k->role,
            k->index, (int)k->pid, what, k->log);
    print_tail(k->log, TAIL_LINES);
}

/* The replicas of server k's shard still running (0 for a shard of one). */
static int replicas_left(const local_run *r, const kid *k)
{
    int n = 0;
    for (int i = 0; i < r->nservers && k->replica >= 0; i++)
        n += r->kids[i].running && r->kids[i].index == k->index;
    return n;
}

/* Server k of a replicated shard ended while another replica of its shard
 * runs: the shard fails over (docs/replication.md); said once, and the
 * run goes on. */
static void note_failover(const local_run *r, kid *k)
{
    char what[128];
    describe_exit(k, what, sizeof(what));
    fprintf(stderr,
            "zepsctl local: server %d.%d (pid %d) %s; shard %d carries on at its other "
            "replicas (%d of %d running); see %s\n",
            k->index, k->replica, (int)k->pid, what, k->index, replicas_left(r, k),
            r->cfg->replicas, k->log);
    k->failed_over = true;
}

/* Look at the children that exited since the last call: a worker failed
 * unless it exited 0; a server failed if it exited non-zero, or at all while
 * a worker still runs, unless another replica of its shard still runs.
 * Sets r->failed to the first that failed. */
static void check_exits(local_run *r)
{
    int workers_left = count_running(r, r->nservers, r->nkids - r->nservers);
    for (int i = 0; i < r->nkids && r->failed < 0; i++) {
        kid *k = &r->kids[i];
        if (k->running || k->judged || !k->pid)
            continue;
        k->judged = true;
        bool ok = WIFEXITED(k->status) && WEXITSTATUS(k->status) == 0;
        if (i < r->nservers && workers_left > 0 && replicas_left(r, k) > 0)
            note_failover(r, k);
        else if (!ok || (i < r->nservers && workers_left > 0))
            r->failed = i;
    }
}

static run_end wait_training(local_run *r)
{
    double deadline = r->o.timeout_s > 0 ? r->t0 + r->o.timeout_s : INFINITY;
    for (;;) {
        check_exits(r);
        if (r->failed >= 0)
            return END_FAILED;
        if (r->signo)
            return END_SIGNAL;
        if (count_running(r, r->nservers, r->nkids - r->nservers) == 0)
            return END_DONE;
        if (zp_now_s() >= deadline)
            return END_TIMEOUT;
        pump(r, deadline);
    }
}

/* Kids [first, last): servers by shard, or workers by rank. */
static bool spawn_range(local_run *r, int first, int last)
{
    for (int i = first; i < last; i++) {
        kid *k = &r->kids[i];
        bool server = i < r->nservers;
        if (!(server ? spawn(r, k, r->server_bin, "--shard", false)
                     : spawn(r, k, r->worker_bin, "--rank", !r->o.quiet)))
            return false;
    }
    return true;
}

/* Servers first, then workers; the workers' HELLO waits for the servers.
 * Replicated shards: every shard's replica 0 first, elected primary before
 * the other replicas start, since workers reach replica 0; the workers once
 * every backup is in the in-sync set, so that every push waits for them. */
static bool start_all(local_run *r)
{
    int shards = r->cfg->num_shards, replicas = r->cfg->replicas;
    r->nservers = shards * replicas;
    r->nkids = r->nservers + r->cfg->num_workers;
    r->kids = zp_alloc_zeroed((size_t)r->nkids, sizeof(kid));
    zp_ctl_echo_init(&r->echo, r->cfg->num_workers, STDOUT_FILENO);
    r->t0 = zp_now_s();
    for (int i = 0; i < r->cfg->num_workers; i++) { /* no stale results from a reused --dir */
        char path[PATH_MAX + 32];
        snprintf(path, sizeof(path), "%s/worker-%d.json", r->cfg->result_dir, i);
        unlink(path);
    }
    for (int i = 0; i < r->nkids; i++) {
        kid *k = &r->kids[i];
        k->role = i < r->nservers ? "server" : "worker";
        k->index = i < r->nservers ? i % shards : i - r->nservers;
        k->replica = i < r->nservers && replicas > 1 ? i / shards : -1;
    }
    if (r->o.metrics && !zp_ctl_local_conf_metrics(r))
        return false;
    if (replicas == 1)
        return spawn_range(r, 0, r->nkids);
    double wait_s = r->cfg->coord_connect_timeout_ms / 1e3 + 30;
    return spawn_range(r, 0, shards) && zp_ctl_local_zk_wait_primaries(r, 1, wait_s) &&
           spawn_range(r, shards, r->nservers) &&
           zp_ctl_local_zk_wait_primaries(r, replicas, wait_s) &&
           spawn_range(r, r->nservers, r->nkids);
}

/* Stop the run's ZooKeeper (after the servers, whose sessions end first). */
static void stop_zk(local_run *r)
{
    if (!r->zk_pid)
        return;
    zp_spawn_signal(r->zk_pid, SIGTERM, true);
    double deadline = zp_now_s() + GRACE_S;
    while (r->zk_running && zp_now_s() < deadline)
        pump(r, deadline);
    if (r->zk_running)
        zp_spawn_signal(r->zk_pid, SIGKILL, true);
    while (r->zk_running)
        pump(r, INFINITY);
}

static bool block_signals(local_run *r)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGCHLD);
    if (sigprocmask(SIG_BLOCK, &set, &r->oldmask) == 0 &&
        (r->sigfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC)) >= 0) {
        signal(SIGPIPE, SIG_IGN); /* a closed terminal must not kill us mid-run */
        return true;
    }
    fprintf(stderr, "zepsctl local: cannot set up signal handling: %s\n", strerror(errno));
    sigprocmask(SIG_SETMASK, &r->oldmask, NULL);
    return false;
}
/* After training: stop the servers; true if each exited 0 in time. */
static bool stop_servers(local_run *r)
{
    bool clean = stop_kids(r, 0, r->nservers) == 0;
    for (int i = 0; i < r->nservers; i++) {
        kid *k = &r->kids[i];
        if (k->killed || k->failed_over || (WIFEXITED(k->status) && WEXITSTATUS(k->status) == 0))
            continue; /* reported by stop_kids, or when its shard failed over */
        char what[128];
        describe_exit(k, what, sizeof(what));
        fprintf(stderr, "zepsctl local: server %d (pid %d) %s at shutdown; see %s\n", i,
                (int)k->pid, what, k->log);
        clean = false;
    }
    return clean;
}

/* The exit status for the stopping signal (only SIGINT and SIGTERM are taken). */
static int signal_exit(int signo)
{
    return signo == SIGINT ? ZP_EXIT_INTERRUPTED : ZP_EXIT_STOPPED;
}

static int finish(local_run *r, run_end end)
{
    if (end == END_DONE) {
        double t_end = zp_now_s();
        bool clean = stop_servers(r);
        for (int i = 0; i < r->echo.n; i++)
            zp_ctl_echo_pump(&r->echo, i, true);
        int rc = zp_ctl_local_report(r, t_end, clean, "done");
        return r->signo ? signal_exit(r->signo) : rc;
    }
    if (end == END_FAILED)
        report_failure(r, &r->kids[r->failed]);
    else if (end == END_SIGNAL)
        fprintf(stderr, "zepsctl local: got SIG%s; stopping the cluster\n", sigabbrev_np(r->signo));
    else
        fprintf(stderr, "zepsctl local: timed out after %.0f s (--timeout); stopping the cluster\n",
                r->o.timeout_s);
    /* workers first (a stopped worker writes its result and says BYE), then
     * the servers, each judged by how it exited */
    stop_kids(r, r->nservers, r->nkids - r->nservers);
    bool clean = stop_servers(r);
    zp_ctl_local_report(r, zp_now_s(), clean,
                        end == END_FAILED   ? "failed"
                        : end == END_SIGNAL ? "signal"
                                            : "timeout");
    fprintf(stderr, "zepsctl local: logs are in %s\n", r->dir);
    return end == END_SIGNAL ? signal_exit(r->signo) : ZP_EXIT_FAILED;
}

static int execute(local_run *r)
{
    if (!block_signals(r))
        return 1;
    printf("zeps local: run directory %s (cluster.conf, logs, results)\n", r->dir);
    fflush(stdout);
    int rc = 1;
    if (r->o.replicas > 1 && !zp_ctl_local_zk_start(r)) {
        stop_zk(r);
    } else if (!start_all(r)) {
        stop_kids(r, 0, r->nkids);
        stop_zk(r);
    } else {
        printf("zeps local: started %d servers and %d workers; Ctrl-C stops them\n", r->nservers,
               r->nkids - r->nservers);
        fflush(stdout);
        rc = finish(r, wait_training(r));
        stop_zk(r);
    }
    zp_ctl_echo_fini(&r->echo);
    close(r->sigfd);
    sigprocmask(SIG_SETMASK, &r->oldmask, NULL);
    return rc;
}

/* Binaries, run directory, cluster file. Returns -1 to go on, or the exit
 * status. */
static int prepare(local_run *r)
{
    if (r->o.config && !zp_ctl_local_conf_load(r, r->o.config))
        return 2; /* before anything is created */
    if (!zp_ctl_local_conf_find_bin("zeps-server", r->server_bin, sizeof(r->server_bin)) ||
        !zp_ctl_local_conf_find_bin("zeps-worker", r->worker_bin, sizeof(r->worker_bin)) ||
        !zp_ctl_local_conf_make_run_dir(r))
        return ZP_EXIT_SETUP; /* an installation or a folder to fix */
    if (r->o.replicas > 1 && (r->zk_port = r->o.zk_port = zp_freeport_pick()) <= 0) {
        fprintf(stderr, "zepsctl local: no free loopback port for ZooKeeper\n");
        return 1;
    }
    int rc = zp_ctl_local_conf_make(r);
    if (rc >= 0)
        return rc;
    snprintf(r->json, sizeof(r->json), "%s%s", r->o.json ? r->o.json : r->dir,
             r->o.json ? "" : "/summary.json");
    /* Several BLAS thread pools on a few cores fight the event loops. */
    setenv("OPENBLAS_NUM_THREADS", "1", 0);
    if (r->o.exec)
        zp_ctl_local_conf_exec_env(r);
    return -1;
}

int zp_ctl_local(int argc, char **argv)
{
    local_run r = {.sigfd = -1, .failed = -1};
    int rc = parse_opts(argc, argv, &r.o);
    if (rc >= 0)
        return rc;
    if (r.o.print_config)
        return zp_ctl_local_conf_print(&r.o);
    r.cfg = zp_alloc_zeroed(1, sizeof(*r.cfg));
    rc = prepare(&r);
    if (rc < 0)
        rc = execute(&r);
    free(r.kids);
    free(r.cfg);
    return rc;
}
