/*
 * ctl_local_conf.c - `zepsctl local`: the run directory and its cluster
 * file: the embedded default (deploy/local/default.conf) with free
 * loopback ports and the command-line overrides, or a copy of --config
 * FILE, validated with zp_config_load; and where the binaries are.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <libconfig.h>
#include <stdio.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "freeport.h"
#include "alloc.h"
#include "ctl.h"
#include "ctl_local.h"

/* The embedded default cluster file. Keep it identical to
 * deploy/local/default.conf: that file is what operators read and copy, this
 * is what runs when no --config is given. */
/* deploy/local/default.conf, turned into a C string at build time. */
#include "default_conf.h"

const zp_local_override zp_ctl_local_conf_overrides[] = {
    {"servers", "cluster", "servers", 'n', 1, ZP_MAX_SHARDS},
    {"workers", "cluster", "workers", 'i', 1, ZP_MAX_WORKERS},
    {"model", "training", "model", 's', 0, 0},
    {"consistency", "cluster", "consistency", 's', 0, 0},
    {"epochs", "training", "epochs", 'i', 1, INT_MAX},
    {"lr", "training", "lr", 'f', 0, 1e6},
    {"batch", "training", "batch_size", 'i', 1, INT_MAX},
    {"max-train-examples", "training", "max_train_examples", 'i', 0, INT_MAX},
    {"seed", "training", "seed", 'i', 0, 1e18},
    {"transport", "cluster", "transport", 's', 0, 0},
};
_Static_assert(sizeof(zp_ctl_local_conf_overrides) / sizeof(zp_ctl_local_conf_overrides[0]) ==
                   N_OVERRIDES,
               "N_OVERRIDES");

/* Find `name` beside the running zepsctl, else in PATH. */
bool zp_ctl_local_conf_find_bin(const char *name, char *out, size_t len)
{
    char dir[PATH_MAX];
    zp_zepsctl_bindir(dir, sizeof(dir));
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

void zp_ctl_local_conf_exec_env(local_run *r)
{
    char dir[PATH_MAX], pkg[PATH_MAX + 32], py[PATH_MAX];
    snprintf(r->env_config, sizeof(r->env_config), "ZEPS_CONFIG=%s", r->conf);
    snprintf(r->env_result, sizeof(r->env_result), "ZEPS_RESULT_DIR=%s", r->dir);
    r->env_python[0] = '\0';
    zp_zepsctl_bindir(dir, sizeof(dir));
    snprintf(pkg, sizeof(pkg), "%s/../python/zeps/__init__.py", dir);
    if (!dir[0] || access(pkg, R_OK) != 0 || !realpath(strcat(dir, "/../python"), py))
        return; /* an installed zepsctl: the package is where python3 looks */
    const char *old = getenv("PYTHONPATH");
    snprintf(r->env_python, sizeof(r->env_python), "PYTHONPATH=%s%s%s", py, old && *old ? ":" : "",
             old && *old ? old : "");
}

/* Create the run directory (--dir, or a new one under $TMPDIR or /tmp) and
 * store its absolute path in r->dir. */
bool zp_ctl_local_conf_make_run_dir(local_run *r)
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

/* cluster.servers = `n` endpoints on distinct free loopback ports (arrays
 * of `replicas` per shard when replicas >= 2; zp_freeport_pick: below the
 * ephemeral range, so no connection made before a replica started, to
 * ZooKeeper say, can hold its port). */
static bool set_servers(config_t *lc, int shards, int replicas)
{
    config_setting_t *list =
        fresh(lc, "cluster", "servers", replicas > 1 ? CONFIG_TYPE_LIST : CONFIG_TYPE_ARRAY);
    config_setting_t *shard = list;
    int n = shards * replicas;
    int *ports = zp_alloc_zeroed((size_t)n, sizeof(int));
    bool ok = true;
    for (int i = 0; i < n && ok; i++) {
        bool again = true;
        for (int tries = 0; again && tries < 100; tries++) {
            ports[i] = zp_freeport_pick();
            again = false;
            for (int j = 0; j < i && ports[i] > 0; j++)
                again |= ports[j] == ports[i];
        }
        ok = ports[i] > 0 && !again;
        char ep[64];
        snprintf(ep, sizeof(ep), "tcp://127.0.0.1:%d", ports[i]);
        if (ok && replicas > 1 && i % replicas == 0)
            shard = config_setting_add(list, NULL, CONFIG_TYPE_ARRAY);
        if (ok)
            config_setting_set_string_elem(shard, -1, ep);
        else
            fprintf(stderr, "zepsctl local: cannot pick a free port: %s\n", strerror(errno));
    }
    free(ports);
    return ok;
}

/* --replicas R (>= 2): cluster.replicas and the coordination group, the
 * run's ZooKeeper on o->zk_port. The cluster's name is the run's own
 * ("local-<time>-<pid>"): a run again in the same directory finds the
 * previous run's in-sync sets in its ZooKeeper's data, naming members
 * that are gone, under which no replica would be elected. */
static void set_replicas(const local_opts *o, config_t *lc)
{
    char zk[64], name[64];
    snprintf(zk, sizeof(zk), "127.0.0.1:%d", o->zk_port);
    snprintf(name, sizeof(name), "local-%lld-%d", (long long)time(NULL), (int)getpid());
    config_setting_set_int(fresh(lc, "cluster", "replicas", CONFIG_TYPE_INT), o->replicas);
    config_setting_t *c = fresh(lc, "cluster", "coordination", CONFIG_TYPE_GROUP);
    config_setting_set_string(config_setting_add(c, "zookeeper", CONFIG_TYPE_STRING), zk);
    config_setting_set_string(config_setting_add(c, "name", CONFIG_TYPE_STRING), name);
    config_setting_set_int(config_setting_add(c, "session_timeout_ms", CONFIG_TYPE_INT), 2000);
}

/* --config with --replicas R: the file's shards (cluster.servers, one
 * endpoint each) become R free loopback ports each, its binds go (they
 * named the old endpoints), and replicas and the coordination group are set
 * as for the default. False (said) if the file has no servers or is
 * replicated already. */
static bool replicate_file(const local_opts *o, config_t *lc)
{
    config_setting_t *old = config_lookup(lc, "cluster.servers");
    int has = 1;
    if (config_lookup_int(lc, "cluster.replicas", &has) && has > 1) {
        fprintf(stderr,
                "zepsctl local: %s has cluster.replicas = %d already; leave out "
                "--replicas (and run its coordination service) or set it to 1\n",
                o->config, has);
        return false;
    }
    if (!old || config_setting_length(old) < 1) {
        fprintf(stderr, "zepsctl local: %s has no cluster.servers to replicate\n", o->config);
        return false;
    }
    config_setting_t *cluster = config_lookup(lc, "cluster");
    if (config_setting_get_member(cluster, "binds"))
        config_setting_remove(cluster, "binds");
    if (!set_servers(lc, config_setting_length(old), o->replicas))
        return false;
    set_replicas(o, lc);
    return true;
}

/* The embedded default with free ports and the command-line overrides. */
static bool apply_overrides(const local_opts *o, config_t *lc)
{
    config_setting_t *old = config_lookup(lc, "cluster.servers");
    int replicas = o->replicas > 1 ? o->replicas : 1;
    if (!set_servers(lc,
                     o->ov[0] ? atoi(o->ov[0])
                     : old    ? config_setting_length(old)
                              : 2,
                     replicas))
        return false;
    if (replicas > 1)
        set_replicas(o, lc);
    for (int i = 1; i < N_OVERRIDES; i++) {
        const zp_local_override *ov = &zp_ctl_local_conf_overrides[i];
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

int zp_ctl_local_conf_print(const local_opts *o)
{
    config_t lc;
    config_init(&lc);
    int rc = 1;
    if (!config_read_string(&lc, default_conf)) {
        fprintf(stderr, "zepsctl local: the embedded default:%d: %s\n", config_error_line(&lc),
                config_error_text(&lc));
    } else if (o->exec || o->dir || o->json) {
        fprintf(stderr,
                "zepsctl local: --print-config prints a cluster file; %s applies to a "
                "run, not to the file (leave it out)\n",
                o->exec  ? "--exec"
                : o->dir ? "--dir"
                         : "--json");
        rc = 2;
    } else if (apply_overrides(o, &lc)) {
        config_setting_set_string(fresh(&lc, "training", "result_dir", CONFIG_TYPE_STRING),
                                  "results");
        if (o->metrics) { /* one file for every process: port 0, each logs the port it got */
            config_setting_set_string(fresh(&lc, "cluster", "metrics_listen", CONFIG_TYPE_STRING),
                                      "127.0.0.1:0");
            config_setting_set_string(fresh(&lc, "training", "metrics_listen", CONFIG_TYPE_STRING),
                                      "127.0.0.1:0");
        }
        printf("# The default cluster of zepsctl local (deploy/local/default.conf), printed by\n"
               "# `zepsctl local --print-config` to run by hand (README, \"Running by hand\").\n"
               "# cluster.servers: loopback ports that were free when this was printed;\n"
               "# edit them (or print again) if one has been taken since.\n"
               "# training.result_dir: each worker writes results/worker-<rank>.json,\n"
               "# relative to the folder it runs in (made if missing).\n%s\n",
               o->metrics
                   ? "# metrics_listen (--metrics): every shard and worker serves /metrics on"
                     "\n# a free loopback port and logs it (\"metrics listening on\").\n"
                   : "");
        config_write(&lc, stdout);
        rc = fflush(stdout) == 0 && !ferror(stdout) ? 0 : 1;
    }
    config_destroy(&lc);
    return rc;
}

/* Validate the file at `path` into r->cfg; prints the loader's message. */
bool zp_ctl_local_conf_load(local_run *r, const char *path)
{
    char err[1024];
    if (zp_config_load(r->cfg, path, err, sizeof(err)) == 0)
        return true;
    fprintf(stderr, "zepsctl local: %s\n", err);
    return false;
}

/* Write <dir>/cluster.conf and validate it. Returns -1 to go on, or the exit
 * status. */
int zp_ctl_local_conf_make(local_run *r)
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
    if (r->o.config && r->o.replicas > 1 && !replicate_file(&r->o, &lc)) {
        rc = 2;
        goto out;
    }
    config_setting_set_string(fresh(&lc, "training", "result_dir", CONFIG_TYPE_STRING), r->dir);
    if (!(f = fopen(r->conf, "w"))) {
        fprintf(stderr, "zepsctl local: cannot write %s: %s\n", r->conf, strerror(errno));
        rc = 2; /* the run directory cannot take a file */
        goto out;
    }
    fprintf(f, "# Written by zepsctl local from %s.\n\n", from);
    config_write(&lc, f);
    if (fclose(f) != 0)
        fprintf(stderr, "zepsctl local: cannot write %s: %s\n", r->conf, strerror(errno));
    else
        rc = zp_ctl_local_conf_load(r, r->conf) ? -1 : 2;
out:
    config_destroy(&lc);
    return rc;
}

bool zp_ctl_local_conf_metrics(local_run *r)
{
    char path[ZP_PATH_MAX + 32];
    snprintf(path, sizeof(path), "%s/prometheus-targets.json", r->dir);
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "zepsctl local: cannot write %s: %s\n", path, strerror(errno));
        return false;
    }
    fprintf(f, "[");
    for (int i = 0; i < r->nkids; i++) {
        kid *k = &r->kids[i];
        if ((k->metrics_port = zp_freeport_pick()) <= 0) {
            k->metrics_port = 0;
            fprintf(stderr, "zepsctl local: no free loopback port for --metrics\n");
            fclose(f);
            return false;
        }
        const char *job = i < r->nservers ? "zeps-server" : "zeps-worker";
        char replica[40] = "", who[32]; /* who: "0", or "0.1" for replica 1 of shard 0 */
        snprintf(who, sizeof(who), "%d", k->index);
        if (k->replica >= 0) {
            snprintf(replica, sizeof(replica), ", \"replica\": \"%d\"", k->replica);
            snprintf(who, sizeof(who), "%d.%d", k->index, k->replica);
        }
        fprintf(f,
                "%s\n  {\"targets\": [\"127.0.0.1:%d\"], \"labels\": {\"job\": \"%s\", "
                "\"%s\": \"%d\"%s}}",
                i ? "," : "", k->metrics_port, job, i < r->nservers ? "shard" : "rank", k->index,
                replica);
        printf("zeps local: %s %s metrics on http://127.0.0.1:%d/metrics\n", k->role, who,
               k->metrics_port);
    }
    fprintf(f, "\n]\n");
    printf("zeps local: Prometheus targets (file_sd) in %s\n", path);
    fflush(stdout);
    return fclose(f) == 0;
}
