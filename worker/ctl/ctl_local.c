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
 * zepsctl itself dies. Every exit path after the first fork reaps every child.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <libconfig.h>
#include <limits.h>
#include <math.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "config.h"
#include "ctl.h"
#include "spawn.h"
#include "util.h"

#define GRACE_S           10.0 /* SIGTERM -> SIGKILL */
#define TAIL_LINES        10   /* log lines shown for a failed process */
#define DEFAULT_TIMEOUT_S 1800.0
#define MAX_RESULT_BYTES  (1 << 20)

/* The embedded default cluster file. Keep it identical to
 * deploy/local/default.conf: that file is what operators read and copy, this
 * is what runs when no --config is given. */
/* deploy/local/default.conf, turned into a C string at build time. */
#include "default_conf.h"

/* The overrides of the embedded default: option, where its value goes in the
 * cluster file, type ('i' integer, 'f' float, 's' string, 'n' the number of
 * servers, which become that many free ports) and range. */
static const struct override {
    const char *opt, *group, *key;
    char type;
    double lo, hi;
} overrides[] = {
    {"servers", "cluster", "servers", 'n', 1, ZP_MAX_SHARDS},
    {"workers", "cluster", "workers", 'i', 1, ZP_MAX_WORKERS},
    {"model", "training", "model", 's', 0, 0},
    {"consistency", "cluster", "consistency", 's', 0, 0},
    {"epochs", "training", "epochs", 'i', 1, INT_MAX},
    {"lr", "training", "lr", 'f', 0, 1e6},
    {"batch", "training", "batch_size", 'i', 1, INT_MAX},
    {"max-train-examples", "training", "max_train_examples", 'i', 0, INT_MAX},
    {"seed", "training", "seed", 'i', 0, 1e18},
};
#define N_OVERRIDES ((int)(sizeof(overrides) / sizeof(overrides[0])))

typedef struct local_opts {
    const char *config;          /* --config FILE; NULL: the embedded default */
    const char *dir;             /* --dir DIR; NULL: a new $TMPDIR/zeps-local-XXXXXX */
    const char *json;            /* --json PATH; NULL: <dir>/summary.json */
    double timeout_s;            /* --timeout; 0: none */
    bool quiet;                  /* -q: rank 0's output only goes to its log */
    const char *ov[N_OVERRIDES]; /* override values as given; NULL: not given */
    int noverrides;
} local_opts;

typedef struct kid {
    const char *role; /* "server" | "worker" */
    int index;        /* shard or rank */
    pid_t pid;        /* 0 before it is started */
    bool running;     /* started and not reaped yet */
    bool judged;      /* its exit was looked at by check_exits */
    bool killed;      /* stop_kids had to SIGKILL it */
    int status;       /* wait status once reaped */
    char log[PATH_MAX];
} kid;

typedef struct local_run {
    local_opts o;
    zp_config *cfg;        /* the validated cluster file */
    char dir[ZP_PATH_MAX]; /* absolute; it becomes training.result_dir */
    char conf[PATH_MAX], json[PATH_MAX];
    char server_bin[PATH_MAX], worker_bin[PATH_MAX];
    kid *kids; /* servers [0, nservers), then workers by rank */
    int nkids, nservers;
    int sigfd;
    sigset_t oldmask;
    int echo_fd;  /* read end of rank 0's output pipe; -1 if none */
    int echo_log; /* rank 0's log file, written by us; -1 if none */
    int signo;    /* first SIGINT/SIGTERM received; 0 if none */
    int nsignals;
    int failed; /* index of the kid whose exit failed the run; -1 if none */
    double t0;  /* when the first child was started */
} local_run;

typedef enum run_end { END_DONE, END_FAILED, END_SIGNAL, END_TIMEOUT } run_end;

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
            "  --consistency bsp|async, --epochs E, --lr X, --batch B,\n"
            "  --max-train-examples N, --seed N\n"
            "                       change the embedded default (not with --config)\n"
            "  --dir DIR            run directory for cluster.conf, logs and results\n"
            "                       (default: a new $TMPDIR/zeps-local-XXXXXX, kept)\n"
            "  --json PATH          summary JSON (default: <dir>/summary.json)\n"
            "  --timeout SECONDS    stop everything and fail after this (default %.0f;\n"
            "                       0: none)\n"
            "  -q, --quiet          do not echo rank 0's output\n\n"
            "Exit status: 0 trained and stopped cleanly; 1 a process failed, the run\n"
            "timed out or a result is missing; 2 bad options or cluster file; 128+N\n"
            "when stopped by signal N.\n",
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

enum { OPT_TIMEOUT = 't', OPT_OVERRIDE = 256 };

static const struct option long_opts[] = {
    {"config", required_argument, NULL, 'c'},
    {"dir", required_argument, NULL, 'd'},
    {"json", required_argument, NULL, 'j'},
    {"timeout", required_argument, NULL, OPT_TIMEOUT},
    {"quiet", no_argument, NULL, 'q'},
    {"help", no_argument, NULL, 'h'},
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
    {NULL, 0, NULL, 0},
};

/* Apply one option; false on a bad one (already reported). */
static bool apply_opt(local_opts *o, int c, const char *arg)
{
    if (c >= OPT_OVERRIDE && c < OPT_OVERRIDE + N_OVERRIDES) {
        const struct override *ov = &overrides[c - OPT_OVERRIDE];
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
    case OPT_TIMEOUT:
        o->timeout_s = strtod(arg, NULL);
        return check_num("timeout", arg, 0, 1e9, false);
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
    if (o->config && o->noverrides) {
        fprintf(stderr, "zepsctl local: --servers, --workers, --model, --consistency, "
                        "--epochs, --lr, --batch,\n  --max-train-examples and --seed change "
                        "the embedded default; with --config, edit the file\n");
        return 2;
    }
    return -1;
}

/* -------------------------------------------------------- the cluster file */

/* Find `name` beside the running zepsctl, else in PATH. */
static bool find_bin(const char *name, char *out, size_t len)
{
    char dir[PATH_MAX];
    zp_ctl_bindir(dir, sizeof(dir));
    if (dir[0] && snprintf(out, len, "%s/%s", dir, name) < (int)len && access(out, X_OK) == 0)
        return true;
    for (const char *p = getenv("PATH"); p && *p; p += strcspn(p, ":"), p += *p == ':') {
        int n = (int)strcspn(p, ":");
        if (n > 0 && snprintf(out, len, "%.*s/%s", n, p, name) < (int)len && access(out, X_OK) == 0)
            return true;
    }
    fprintf(stderr, "zepsctl local: cannot find %s (looked in %s and in PATH)\n", name,
            dir[0] ? dir : "the directory of zepsctl");
    return false;
}

/* Create the run directory (--dir, or a new one under $TMPDIR or /tmp) and
 * store its absolute path in r->dir. */
static bool make_run_dir(local_run *r)
{
    char tmp[PATH_MAX];
    const char *base = getenv("TMPDIR");
    bool made;
    if (r->o.dir) {
        snprintf(tmp, sizeof(tmp), "%s", r->o.dir);
        made = mkdir(tmp, 0755) == 0 || errno == EEXIST;
    } else {
        snprintf(tmp, sizeof(tmp), "%s/zeps-local-XXXXXX", base && *base ? base : "/tmp");
        made = mkdtemp(tmp) != NULL;
    }
    char *abs = made ? realpath(tmp, NULL) : NULL;
    struct stat st;
    bool ok = abs && strlen(abs) < sizeof(r->dir) && stat(abs, &st) == 0 && S_ISDIR(st.st_mode);
    if (ok)
        snprintf(r->dir, sizeof(r->dir), "%s", abs);
    else
        fprintf(stderr, "zepsctl local: cannot make run directory %s: %s\n", tmp,
                !made || !abs ? strerror(errno) : "not a directory, or its path is too long");
    free(abs);
    return ok;
}

/* Replace member `name` of group `group` (created if missing) with a new
 * setting of `type`; returns it. */
static config_setting_t *fresh(config_t *lc, const char *group, const char *name, int type)
{
    config_setting_t *g = config_lookup(lc, group);
    if (!g)
        g = config_setting_add(config_root_setting(lc), group, CONFIG_TYPE_GROUP);
    config_setting_t *s = config_setting_get_member(g, name);
    if (s && config_setting_type(s) == type && type != CONFIG_TYPE_ARRAY)
        return s; /* keeps its place in the file */
    if (s)
        config_setting_remove(g, name);
    return config_setting_add(g, name, type);
}

/* cluster.servers = `n` endpoints on distinct free loopback ports: bind each
 * to port 0 and read what the kernel chose, holding all until all are read. */
static bool set_servers(config_t *lc, int n)
{
    config_setting_t *list = fresh(lc, "cluster", "servers", CONFIG_TYPE_ARRAY);
    int *fds = zp_xcalloc((size_t)n, sizeof(int));
    bool ok = true;
    int i;
    for (i = 0; i < n && ok; i++) {
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        socklen_t alen = sizeof(a);
        fds[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        ok = fds[i] >= 0 && bind(fds[i], (struct sockaddr *)&a, sizeof(a)) == 0 &&
             getsockname(fds[i], (struct sockaddr *)&a, &alen) == 0;
        char ep[64];
        snprintf(ep, sizeof(ep), "tcp://127.0.0.1:%d", ntohs(a.sin_port));
        if (ok)
            config_setting_set_string_elem(list, -1, ep);
        else
            fprintf(stderr, "zepsctl local: cannot pick a free port: %s\n", strerror(errno));
    }
    while (i-- > 0)
        if (fds[i] >= 0)
            close(fds[i]);
    free(fds);
    return ok;
}

/* The embedded default with free ports and the command-line overrides. */
static bool apply_overrides(const local_opts *o, config_t *lc)
{
    config_setting_t *old = config_lookup(lc, "cluster.servers");
    if (!set_servers(lc, o->ov[0] ? atoi(o->ov[0]) : old ? config_setting_length(old) : 2))
        return false;
    for (int i = 1; i < N_OVERRIDES; i++) {
        const struct override *ov = &overrides[i];
        const char *v = o->ov[i];
        long long x = v ? strtoll(v, NULL, 10) : 0;
        if (!v)
            continue;
        if (ov->type == 's')
            config_setting_set_string(fresh(lc, ov->group, ov->key, CONFIG_TYPE_STRING), v);
        else if (ov->type == 'f')
            config_setting_set_float(fresh(lc, ov->group, ov->key, CONFIG_TYPE_FLOAT),
                                     strtod(v, NULL));
        else if (x <= INT_MAX)
            config_setting_set_int(fresh(lc, ov->group, ov->key, CONFIG_TYPE_INT), (int)x);
        else
            config_setting_set_int64(fresh(lc, ov->group, ov->key, CONFIG_TYPE_INT64), x);
    }
    return true;
}

/* Validate the file at `path` into r->cfg; prints the loader's message. */
static bool load_conf(local_run *r, const char *path)
{
    char err[1024];
    if (zp_config_load(r->cfg, path, err, sizeof(err)) == 0)
        return true;
    fprintf(stderr, "zepsctl local: %s\n", err);
    return false;
}

/* Write <dir>/cluster.conf and validate it. Returns -1 to go on, or the exit
 * status. */
static int make_conf(local_run *r)
{
    const char *from = r->o.config ? r->o.config : "the embedded default";
    snprintf(r->conf, sizeof(r->conf), "%s/cluster.conf", r->dir);
    config_t lc;
    config_init(&lc);
    int rc = 1;
    FILE *f = NULL;
    if (r->o.config ? !config_read_file(&lc, r->o.config)
                    : !config_read_string(&lc, default_conf)) {
        fprintf(stderr, "zepsctl local: %s:%d: %s\n", from, config_error_line(&lc),
                config_error_text(&lc));
        rc = 2;
        goto out;
    }
    if (!r->o.config && !apply_overrides(&r->o, &lc))
        goto out;
    config_setting_set_string(fresh(&lc, "training", "result_dir", CONFIG_TYPE_STRING), r->dir);
    if (!(f = fopen(r->conf, "w"))) {
        fprintf(stderr, "zepsctl local: cannot write %s: %s\n", r->conf, strerror(errno));
        goto out;
    }
    fprintf(f, "# Written by zepsctl local from %s.\n\n", from);
    config_write(&lc, f);
    if (fclose(f) != 0)
        fprintf(stderr, "zepsctl local: cannot write %s: %s\n", r->conf, strerror(errno));
    else
        rc = load_conf(r, r->conf) ? -1 : 2;
out:
    config_destroy(&lc);
    return rc;
}

/* --------------------------------------------------------- child processes */

static void write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return; /* a closed terminal or a full disk must not stop the run */
        p += w;
        n -= (size_t)w;
    }
}

/* Copy what rank 0 wrote to its log and the terminal: one read, or until the
 * pipe is empty if `drain`. Closes the pipe at end of file. */
static void pump_echo(local_run *r, bool drain)
{
    char buf[65536];
    while (r->echo_fd >= 0) {
        ssize_t n = read(r->echo_fd, buf, sizeof(buf));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            return;
        if (n <= 0) {
            close(r->echo_fd);
            r->echo_fd = -1;
            return;
        }
        write_all(r->echo_log, buf, (size_t)n);
        write_all(STDOUT_FILENO, buf, (size_t)n);
        if (!drain)
            return;
    }
}

/* Start kid k as `bin --config <conf> <flag> <index>`, its output going to
 * its log (through the echo pipe if `echo`). */
static bool spawn(local_run *r, kid *k, const char *bin, const char *flag, bool echo)
{
    char idx[16];
    snprintf(idx, sizeof(idx), "%d", k->index);
    snprintf(k->log, sizeof(k->log), "%s/%s-%d.log", r->dir, k->role, k->index);
    int logfd = open(k->log, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
    int pfd[2] = {-1, -1};
    pid_t pid = -1;
    if (logfd >= 0 && (!echo || pipe2(pfd, O_CLOEXEC) == 0)) {
        char *argv[] = {(char *)bin, "--config", r->conf, (char *)flag, idx, NULL};
        /* its own group: a terminal's Ctrl-C reaches zepsctl only */
        zp_spawn_opts so = {.log_fd = echo ? pfd[1] : logfd,
                            .flags = ZP_SPAWN_GROUP | ZP_SPAWN_NULLIN,
                            .deathsig = SIGTERM,
                            .sigmask = &r->oldmask};
        pid = zp_spawn_start(argv, &so);
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
    r->echo_fd = pfd[0];
    r->echo_log = logfd;
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
        for (int i = 0; i < r->nkids; i++) {
            if (r->kids[i].pid != pid)
                continue;
            r->kids[i].running = false;
            r->kids[i].status = st;
            if (i == r->nservers)
                pump_echo(r, true); /* rank 0's last words before anything is reported */
        }
    }
}

/* Wait for and handle one round of events, until `deadline` at the latest. */
static void pump(local_run *r, double deadline)
{
    struct pollfd p[2] = {{.fd = r->sigfd, .events = POLLIN}, {.fd = r->echo_fd, .events = POLLIN}};
    double left = deadline - zp_now_s();
    int ms = isinf(deadline) ? -1 : left <= 0 ? 0 : left > 3600 ? 3600000 : (int)(left * 1e3) + 1;
    if (poll(p, r->echo_fd >= 0 ? 2 : 1, ms) < 0 && errno != EINTR) {
        fprintf(stderr, "zepsctl local: poll: %s\n", strerror(errno));
        return;
    }
    if (p[0].revents)
        read_signals(r);
    if (p[1].revents && r->echo_fd >= 0)
        pump_echo(r, false);
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

/* Look at the children that exited since the last call: a worker failed
 * unless it exited 0; a server failed if it exited non-zero, or at all while
 * a worker still runs. Sets r->failed to the first that failed. */
static void check_exits(local_run *r)
{
    int workers_left = count_running(r, r->nservers, r->nkids - r->nservers);
    for (int i = 0; i < r->nkids && r->failed < 0; i++) {
        kid *k = &r->kids[i];
        if (k->running || k->judged || !k->pid)
            continue;
        k->judged = true;
        bool ok = WIFEXITED(k->status) && WEXITSTATUS(k->status) == 0;
        if (!ok || (i < r->nservers && workers_left > 0))
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

/* Servers first, then workers; the workers' HELLO waits for the servers. */
static bool start_all(local_run *r)
{
    r->nservers = r->cfg->num_shards;
    r->nkids = r->nservers + r->cfg->num_workers;
    r->kids = zp_xcalloc((size_t)r->nkids, sizeof(kid));
    r->t0 = zp_now_s();
    for (int i = 0; i < r->cfg->num_workers; i++) { /* no stale results from a reused --dir */
        char path[PATH_MAX + 32];
        snprintf(path, sizeof(path), "%s/worker-%d.json", r->cfg->result_dir, i);
        unlink(path);
    }
    for (int i = 0; i < r->nkids; i++) {
        kid *k = &r->kids[i];
        bool server = i < r->nservers;
        k->role = server ? "server" : "worker";
        k->index = server ? i : i - r->nservers;
        if (!(server ? spawn(r, k, r->server_bin, "--shard", false)
                     : spawn(r, k, r->worker_bin, "--rank", k->index == 0 && !r->o.quiet)))
            return false;
    }
    return true;
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

/* ------------------------------------------------------------------ results */

/* What zepsctl reads from each <result_dir>/worker-<rank>.json. */
enum {
    RK_WALL, RK_COMPUTE, RK_COMM, RK_EPS, RK_LOSS, RK_ACC, RK_DIST, RK_RELDIST, RK_AUC, RK_COUNT
};
static const char *const result_keys[] = {
    "wall_s",     "compute_s",      "comm_s",         "examples_per_s",
    "final_loss", "final_accuracy", "final_distance", "final_rel_distance",
    "final_auc",  "epochs",         "iterations",     "examples",
};
#define N_RESULT_KEYS ((int)(sizeof(result_keys) / sizeof(result_keys[0])))

typedef struct result {
    bool ok;
    double v[N_RESULT_KEYS]; /* NAN when missing or null */
} result;

/* The number after "key": in a flat JSON object; NAN if absent or not a
 * number (null). */
static double json_number(const char *text, const char *key)
{
    char pat[80];
    snprintf(pat, sizeof(pat), "\"%s\"", key);
    for (const char *p = strstr(text, pat); p; p = strstr(p + 1, pat)) {
        const char *q = p + strlen(pat);
        q += strspn(q, " \t\r\n");
        if (*q != ':')
            continue;
        q += 1 + strspn(q + 1, " \t\r\n");
        char *end;
        double v = strtod(q, &end);
        return end == q ? NAN : v;
    }
    return NAN;
}

static result read_result(const char *path)
{
    result res = {.ok = false};
    char *text = zp_xmalloc(MAX_RESULT_BYTES + 1);
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(text, 1, MAX_RESULT_BYTES, f) : 0;
    if (f)
        fclose(f);
    text[n] = '\0';
    res.ok = strchr(text, '{') != NULL;
    for (int i = 0; i < N_RESULT_KEYS; i++)
        res.v[i] = res.ok ? json_number(text, result_keys[i]) : NAN;
    free(text);
    if (!res.ok)
        fprintf(stderr, "zepsctl local: no readable result in %s\n", path);
    return res;
}

/* The summary: JSON key, label on the terminal (NULL: JSON only), format,
 * note, and the factor the terminal shows it with. */
enum {
    S_ACC, S_AUC, S_LOSS, S_RELDIST, S_DIST, S_WALL, S_EPS, S_SHARE, S_RUN, S_CPU, S_COMM, S_COUNT
};
static const struct sum_field {
    const char *key, *label, *fmt, *note;
    double scale;
} sum_fields[S_COUNT] = {
    [S_ACC] = {"final_accuracy", "final test accuracy", "%.4f", "", 1},
    [S_AUC] = {"final_auc", "final test AUC", "%.4f", "", 1},
    [S_LOSS] = {"final_loss", "final test loss", "%.4f", "", 1},
    [S_RELDIST] = {"final_rel_distance", "final rel. distance", "%.4g", "", 1},
    [S_DIST] = {"final_distance", "final distance", "%.4g", "", 1},
    [S_WALL] = {"wall_s", "wall time", "%.1f s", "  (slowest worker)", 1},
    [S_EPS] = {"examples_per_s", "examples/s", "%.0f", "   (sum over workers)", 1},
    [S_SHARE] = {"comm_share", "communication share", "%.1f %%",
                 "  (worker time spent waiting on the parameter servers)", 100},
    [S_RUN] = {"run_s", NULL, NULL, NULL, 1},
    [S_CPU] = {"compute_s", NULL, NULL, NULL, 1},
    [S_COMM] = {"comm_s", NULL, NULL, NULL, 1},
};

static void summarise(const result *res, int w, double *s)
{
    s[S_ACC] = res[0].v[RK_ACC]; /* rank 0 evaluates */
    s[S_AUC] = res[0].v[RK_AUC];
    s[S_LOSS] = res[0].v[RK_LOSS];
    s[S_RELDIST] = res[0].v[RK_RELDIST];
    s[S_DIST] = res[0].v[RK_DIST];
    s[S_WALL] = s[S_EPS] = NAN;
    s[S_CPU] = s[S_COMM] = 0;
    for (int i = 0; i < w; i++) {
        const double *v = res[i].v;
        if (!isnan(v[RK_WALL]) && !(v[RK_WALL] <= s[S_WALL])) /* the max; NAN-safe */
            s[S_WALL] = v[RK_WALL];
        if (!isnan(v[RK_EPS]))
            s[S_EPS] = (isnan(s[S_EPS]) ? 0 : s[S_EPS]) + v[RK_EPS];
        s[S_CPU] += isnan(v[RK_COMPUTE]) ? 0 : v[RK_COMPUTE];
        s[S_COMM] += isnan(v[RK_COMM]) ? 0 : v[RK_COMM];
    }
    double busy = s[S_CPU] + s[S_COMM];
    s[S_SHARE] = busy > 0 ? s[S_COMM] / busy : NAN;
}

static void json_str(FILE *f, const char *key, const char *s, const char *after)
{
    fprintf(f, "\"%s\": \"", key);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        fprintf(f, c == '"' || c == '\\' ? "\\%c" : c < 0x20 ? "\\u%04x" : "%c", c);
    }
    fprintf(f, "\"%s", after);
}

static void json_num(FILE *f, const char *key, double v, const char *after)
{
    if (isfinite(v))
        fprintf(f, "\"%s\": %.10g%s", key, v, after);
    else
        fprintf(f, "\"%s\": null%s", key, after);
}

static bool write_json(const local_run *r, const double *s, const result *res, bool clean,
                       const char *outcome)
{
    const zp_config *c = r->cfg;
    FILE *f = fopen(r->json, "w");
    if (!f) {
        fprintf(stderr, "zepsctl local: cannot write %s: %s\n", r->json, strerror(errno));
        return false;
    }
    fputs("{\n  ", f);
    json_str(f, "outcome", outcome, ",\n  ");
    json_str(f, "run_dir", r->dir, ",\n  ");
    json_str(f, "cluster_file", r->conf, ",\n  ");
    fprintf(f, "\"servers\": %d,\n  \"workers\": %d,\n  ", c->num_shards, c->num_workers);
    json_str(f, "model", c->model, ",\n  ");
    json_str(f, "consistency", zp_consistency_name(c->consistency), ",\n  ");
    for (int i = 0; i < S_COUNT; i++)
        json_num(f, sum_fields[i].key, s[i], ",\n  ");
    fprintf(f, "\"servers_stopped_cleanly\": %s,\n  \"worker_results\": [\n",
            clean ? "true" : "false");
    for (int w = 0; w < c->num_workers; w++) {
        int st = r->kids[r->nservers + w].status;
        fprintf(f, "    {\"rank\": %d, \"exit_status\": %d, \"result_ok\": %s", w,
                WIFEXITED(st) ? WEXITSTATUS(st) : -1, res[w].ok ? "true" : "false");
        for (int i = 0; i < N_RESULT_KEYS; i++) {
            fputs(", ", f);
            json_num(f, result_keys[i], res[w].v[i], "");
        }
        fprintf(f, "}%s\n", w + 1 < c->num_workers ? "," : "");
    }
    fputs("  ]\n}\n", f);
    if (fclose(f) == 0)
        return true;
    fprintf(stderr, "zepsctl local: cannot write %s: %s\n", r->json, strerror(errno));
    return false;
}

static void print_summary(const local_run *r, const double *s, bool json_ok)
{
    const zp_config *c = r->cfg;
    bool quadratic = strcmp(c->model, "quadratic") == 0;
    printf("zeps local cluster: %d servers, %d workers, model %s, consistency %s\n", c->num_shards,
           c->num_workers, c->model, zp_consistency_name(c->consistency));
    for (int i = 0; i < S_COUNT; i++) {
        const struct sum_field *sf = &sum_fields[i];
        if (!sf->label || (quadratic ? i == S_ACC || i == S_LOSS : i == S_RELDIST || i == S_DIST))
            continue;
        if (i == S_AUC && strcmp(c->model, "ctr") != 0)
            continue; /* only the ctr model reports an AUC */
        printf("  %-21s ", sf->label);
        if (isfinite(s[i]))
            printf(sf->fmt, s[i] * sf->scale);
        else
            printf("n/a");
        printf("%s\n", sf->note);
    }
    printf("  %-21s %s\n", "summary JSON", json_ok ? r->json : "(not written)");
    fflush(stdout);
}

/* Read the workers' results, print and write the summary (`outcome`: done,
 * failed, signal, timeout). Returns the exit status for a finished run. */
static int report(local_run *r, double t_end, bool clean, const char *outcome)
{
    int w = r->cfg->num_workers, missing = 0;
    result *res = zp_xcalloc((size_t)w, sizeof(result));
    for (int i = 0; i < w; i++) {
        char path[PATH_MAX + 32];
        snprintf(path, sizeof(path), "%s/worker-%d.json", r->cfg->result_dir, i);
        res[i] = read_result(path);
        missing += !res[i].ok;
    }
    double s[S_COUNT];
    summarise(res, w, s);
    s[S_RUN] = t_end - r->t0;
    bool json_ok = write_json(r, s, res, clean, outcome);
    print_summary(r, s, json_ok);
    free(res);
    return missing == 0 && clean && json_ok ? 0 : 1;
}

/* After training: stop the servers; true if each exited 0 in time. */
static bool stop_servers(local_run *r)
{
    bool clean = stop_kids(r, 0, r->nservers) == 0;
    for (int i = 0; i < r->nservers; i++) {
        kid *k = &r->kids[i];
        if (k->killed || (WIFEXITED(k->status) && WEXITSTATUS(k->status) == 0))
            continue; /* killed ones were reported by stop_kids */
        char what[128];
        describe_exit(k, what, sizeof(what));
        fprintf(stderr, "zepsctl local: server %d (pid %d) %s at shutdown; see %s\n", i,
                (int)k->pid, what, k->log);
        clean = false;
    }
    return clean;
}

static int finish(local_run *r, run_end end)
{
    if (end == END_DONE) {
        double t_end = zp_now_s();
        bool clean = stop_servers(r);
        pump_echo(r, true);
        int rc = report(r, t_end, clean, "done");
        return r->signo ? 128 + r->signo : rc;
    }
    if (end == END_FAILED)
        report_failure(r, &r->kids[r->failed]);
    else if (end == END_SIGNAL)
        fprintf(stderr, "zepsctl local: got SIG%s; stopping the cluster\n", sigabbrev_np(r->signo));
    else
        fprintf(stderr, "zepsctl local: timed out after %.0f s (--timeout); stopping the cluster\n",
                r->o.timeout_s);
    stop_kids(r, 0, r->nkids);
    /* what the workers managed to write (a stopped worker writes its result) */
    report(r, zp_now_s(), false,
           end == END_FAILED ? "failed" : end == END_SIGNAL ? "signal" : "timeout");
    fprintf(stderr, "zepsctl local: logs are in %s\n", r->dir);
    return end == END_SIGNAL ? 128 + r->signo : 1;
}

static int execute(local_run *r)
{
    if (!block_signals(r))
        return 1;
    printf("zeps local: run directory %s (cluster.conf, logs, results)\n", r->dir);
    fflush(stdout);
    int rc = 1;
    if (!start_all(r)) {
        stop_kids(r, 0, r->nkids);
    } else {
        printf("zeps local: started %d servers and %d workers; Ctrl-C stops them\n", r->nservers,
               r->nkids - r->nservers);
        fflush(stdout);
        rc = finish(r, wait_training(r));
    }
    if (r->echo_fd >= 0)
        close(r->echo_fd);
    if (r->echo_log >= 0)
        close(r->echo_log);
    close(r->sigfd);
    sigprocmask(SIG_SETMASK, &r->oldmask, NULL);
    return rc;
}

/* Binaries, run directory, cluster file. Returns -1 to go on, or the exit
 * status. */
static int prepare(local_run *r)
{
    if (r->o.config && !load_conf(r, r->o.config))
        return 2; /* before anything is created */
    if (!find_bin("zeps-server", r->server_bin, sizeof(r->server_bin)) ||
        !find_bin("zeps-worker", r->worker_bin, sizeof(r->worker_bin)) || !make_run_dir(r))
        return 1;
    int rc = make_conf(r);
    if (rc >= 0)
        return rc;
    snprintf(r->json, sizeof(r->json), "%s%s", r->o.json ? r->o.json : r->dir,
             r->o.json ? "" : "/summary.json");
    /* Several BLAS thread pools on a few cores fight the event loops. */
    setenv("OPENBLAS_NUM_THREADS", "1", 0);
    return -1;
}

int zp_ctl_local(int argc, char **argv)
{
    local_run r = {.sigfd = -1, .echo_fd = -1, .echo_log = -1, .failed = -1};
    int rc = parse_opts(argc, argv, &r.o);
    if (rc >= 0)
        return rc;
    r.cfg = zp_xcalloc(1, sizeof(*r.cfg));
    rc = prepare(&r);
    if (rc < 0)
        rc = execute(&r);
    free(r.kids);
    free(r.cfg);
    return rc;
}
