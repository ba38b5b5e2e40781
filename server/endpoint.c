/*
 * endpoint.c - a shard's HTTP routes: GET /metrics (metrics.c), /healthz
 * (the loop turns: answering at all proves it, since the handler runs on
 * the shard's own loop) and /readyz (serving: restored or fresh, not
 * shutting down; with ?workers=all, also every configured worker joined and
 * none lost or gone). It owns the shard's zp_http listener (common/http.c).
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "log.h"
#include "metrics.h"
#include "server.h"

/* 200 if ready; else 503 with the reason in why. */
static bool ready(const zp_server *s, bool all_workers, char *why, size_t len)
{
    if (s->stopping) {
        snprintf(why, len, "shutting down");
        return false;
    }
    for (int i = 0; all_workers && i < s->nworkers; i++) {
        const zp_worker *w = &s->workers.w[i];
        if (!w->joined || w->left || w->lost || w->rehello) {
            snprintf(why, len, "worker %d %s", i,
                     !w->joined ? "has not joined"
                     : w->left  ? "has left"
                     : w->lost  ? "is lost"
                                : "has not said HELLO since the restore");
            return false;
        }
    }
    snprintf(why, len, "ready: shard %d of %d, %s, clock %lld", s->shard, s->nshards,
             s->restored_by || s->restored_clock >= 0 ? "restored" : "fresh", /* async sets: -1 */
             (long long)s->workers.min_clock);
    return true;
}

static void serve(void *arg, const char *path, const char *query, zp_http_reply *rep)
{
    zp_server *s = arg;
    if (strcmp(path, "/metrics") == 0) {
        zp_metrics_render(s, rep);
    } else if (strcmp(path, "/healthz") == 0) {
        zp_http_printf(rep, "ok\n");
    } else if (strcmp(path, "/readyz") == 0) {
        char why[160];
        bool all = strstr(query, "workers=all") != NULL;
        rep->status = ready(s, all, why, sizeof(why)) ? 200 : 503;
        zp_http_printf(rep, "%s\n", why);
    } else {
        rep->status = 404;
        zp_http_printf(rep, "no such path '%s': try /metrics, /healthz or /readyz\n", path);
    }
}

int zp_endpoint_start(zp_server *s, const char *listen, char *err, size_t errlen)
{
    int rc = zp_http_start(&s->http, &s->loop, listen, NULL, serve, s, err, errlen);
    if (rc != 0)
        return rc;
    s->http_port = zp_http_port(s->http);
    zp_info("metrics listening on %s (port %d): /metrics /healthz /readyz", listen, s->http_port);
    return 0;
}

void zp_endpoint_stop(zp_server *s, void (*done)(void *arg), void *arg)
{
    if (!s->http) {
        done(arg);
        return;
    }
    zp_http_close(&s->http, done, arg);
}
