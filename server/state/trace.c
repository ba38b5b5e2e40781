/*
 * trace.c - the per-update trace CSV of a shard: one row per applied,
 * dropped or late push and per answered pull, through a 1 MiB stdio
 * buffer flushed by the server's timer and at exit. The op layer writes
 * rows; nothing here knows about tables or policies. See trace.h.
 */
#include "trace.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "alloc.h"
#include "errors.h"
#include "folder.h"
#include "now.h"
#include "zeps_errors.h"

struct zp_trace {
    FILE *f;
    char *buf;
    double t0;
};

int zp_trace_open(zp_trace **out, const char *dir, int shard, char *err, size_t errlen)
{
    char path[1200];
    int rc = zp_folder_ready("trace_dir", dir, err, errlen);
    if (rc != 0)
        return rc;
    snprintf(path, sizeof(path), "%s/trace-shard%d.csv", dir, shard);
    FILE *f = fopen(path, "w");
    if (!f)
        return zp_errors_set(err, errlen, ZEPS_EIO, "cannot open trace %s: %s", path,
                             strerror(errno));
    zp_trace *t = zp_alloc_zeroed(1, sizeof(*t));
    t->f = f;
    t->buf = zp_alloc(1 << 20);
    setvbuf(f, t->buf, _IOFBF, 1 << 20);
    t->t0 = zp_now_s();
    fprintf(f, "time_s,kind,worker,table,clock,version_read,version_applied,tau,clock_gap,weight,"
               "wait_us,applied\n");
    *out = t;
    return 0;
}

void zp_trace_write(zp_trace *t, const zp_trace_row *r)
{
    static const char *const kinds[] = {"push", "drop", "late", "pull"};
    fprintf(t->f, "%.6f,%s,%u,%u,%lld,%llu,%llu,%llu,%lld,%.9g,%.1f,%d\n", zp_now_s() - t->t0,
            kinds[r->kind], r->worker, r->table, (long long)r->clock,
            (unsigned long long)r->version_read, (unsigned long long)r->version_applied,
            (unsigned long long)r->tau, (long long)r->clock_gap, r->weight, r->wait_us, r->applied);
}

void zp_trace_flush(zp_trace *t)
{
    if (t)
        fflush(t->f);
}

void zp_trace_close(zp_trace **tp)
{
    zp_trace *t = tp ? *tp : NULL;
    if (!t)
        return;
    fflush(t->f);
    fsync(fileno(t->f));
    fclose(t->f);
    free(t->buf);
    free(t);
    *tp = NULL;
}
