/*
 * xfer.c - see xfer.h. The state file is a snapshot file (common/snapshot),
 * checksummed as every snapshot is, so a chunk lost or damaged on the way
 * fails the backup's read and the transfer starts over.
 */
#include "xfer.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "errors.h"
#include "log.h"
#include "move.h"
#include "now.h"
#include "rmsg.h"
#include "persist.h"
#include "restore.h"
#include "server.h"
#include "snapshot.h"
#include "zeps_errors.h"

/* Where this replica writes state files: <snapshot_dir>/transfer, or a
 * folder of its own under $TMPDIR; removed when a transfer ends and leaves
 * it empty (remove_state_file). */
static int xfer_path(const zp_server *s, char *buf, size_t len)
{
    const char *tmp = getenv("TMPDIR");
    int n = s->cfg.snapshot_dir[0]
                ? snprintf(buf, len, "%s/transfer", s->cfg.snapshot_dir)
                : snprintf(buf, len, "%s/zeps-transfer-%d-%d-%d", tmp && tmp[0] ? tmp : "/tmp",
                           s->shard, s->replica, (int)getpid());
    return n > 0 && (size_t)n < len ? 0 : -1;
}

/* The same, made if missing. */
static int xfer_dir(const zp_server *s, char *buf, size_t len)
{
    if (xfer_path(s, buf, len) != 0) {
        zp_error("state transfer: the folder's path is too long");
        return -1;
    }
    if (mkdir(buf, 0700) != 0 && errno != EEXIST) {
        zp_error("state transfer: cannot make %s: %s", buf, strerror(errno));
        return -1;
    }
    return 0;
}

/* Remove a state file, and the folders above it up to the transfer
 * folder that it leaves empty (`levels`: 2 for the writer's file, in a
 * set's folder; 1 for a backup's incoming file). A folder another transfer
 * still uses is not empty and stays; a process killed mid-transfer leaves
 * its folder behind. */
static void remove_state_file(const char *path, int levels)
{
    char dir[ZP_PATH_MAX + 64];
    unlink(path);
    snprintf(dir, sizeof(dir), "%s", path);
    char *d = dir;
    for (int i = 0; i < levels && rmdir(d = dirname(d)) == 0; i++)
        ;
}

void zp_xfer_end(zp_repl_follower *f)
{
    zp_xfer *x = &f->xfer;
    if (x->pid > 0) {
        kill(x->pid, SIGKILL);
        waitpid(x->pid, NULL, 0);
    }
    if (x->path[0])
        remove_state_file(x->path, 2);
    free(x->data);
    memset(x, 0, sizeof(*x));
}

void zp_xfer_begin(zp_server *s, zp_repl_follower *f)
{
    zp_xfer_end(f);
    f->xfer.phase = ZP_XFER_WAIT;
    f->xfer.started_s = zp_now_s();
    s->repl.transfers++;
    zp_info("replica %d (%s) is sent the whole state: the log does not hold what it lacks",
            f->replica, f->member);
}

/* No table holds pushes of an open round, and no move imports rows here:
 * a snapshot is the whole state. (A move's part is its state, not the
 * snapshot's: a backup sent the rows of a move in progress without it
 * could not apply the move's next pages from the log.) */
static bool quiet(const zp_server *s)
{
    if (s->move && s->move->role == ZP_MOVE_TARGET)
        return false;
    for (uint32_t i = 0; i < s->ntables; i++)
        if (zp_table_holds_pushes(s->tables[i]))
            return false;
    return true;
}

static void start_writer(zp_server *s, zp_repl_follower *f)
{
    zp_xfer *x = &f->xfer;
    char dir[ZP_PATH_MAX + 64];
    if (!quiet(s) || xfer_dir(s, dir, sizeof(dir)) != 0)
        return;
    x->lsn = s->repl.lsn;
    x->lsn_epoch = s->repl.epoch;
    if (zp_snapshot_path(x->path, sizeof(x->path), dir, x->lsn, (uint32_t)s->shard,
                         (uint32_t)s->nshards) != 0 ||
        (x->pid = zp_persist_fork_file(s, dir, x->lsn)) <= 0) {
        x->path[0] = '\0';
        x->pid = 0;
        return;
    }
    x->phase = ZP_XFER_WRITING;
}

/* The writer finished: read the file. */
static void file_written(zp_repl_follower *f)
{
    zp_xfer *x = &f->xfer;
    int st = 0;
    if (waitpid(x->pid, &st, WNOHANG) != x->pid)
        return;
    x->pid = 0;
    FILE *in = WIFEXITED(st) && WEXITSTATUS(st) == 0 ? fopen(x->path, "rb") : NULL;
    struct stat sb;
    if (in && fstat(fileno(in), &sb) == 0 && (x->data = malloc((size_t)sb.st_size + 1)) &&
        fread(x->data, 1, (size_t)sb.st_size, in) == (size_t)sb.st_size) {
        x->size = (size_t)sb.st_size;
        x->phase = ZP_XFER_STREAMING;
        zp_info("state for replica %d: %zu bytes at entry %" PRIu64 ", streaming", f->replica,
                x->size, x->lsn);
    } else {
        zp_error("state for replica %d: the file %s could not be written or read; trying again",
                 f->replica, x->path);
        free(x->data);
        x->data = NULL;
        x->phase = ZP_XFER_WAIT;
    }
    if (in)
        fclose(in);
}

static int send_chunk(zp_server *s, zp_repl_follower *f)
{
    zp_xfer *x = &f->xfer;
    size_t len = x->size - x->sent < ZP_XFER_CHUNK ? x->size - x->sent : ZP_XFER_CHUNK;
    Zeps__Header h;
    zp_rmsg_header(s, &h, ZEPS__OP__REPLICATE, s->role.epoch);
    h.flags = ZP_FLAG_STATE;
    h.lsn = x->lsn;
    h.lsn_epoch = x->lsn_epoch;
    h.offset = x->sent;
    h.count = x->size;
    if (zp_rmsg_send_to(s, &f->identity, &h, true) != 0 ||
        zp_wire_send_data(s->sock, x->data + x->sent, len, NULL, NULL, ZMQ_DONTWAIT) < 0)
        return -1;
    x->sent += len;
    s->bytes_out += len;
    return 0;
}

bool zp_xfer_pump(zp_server *s, zp_repl_follower *f)
{
    zp_xfer *x = &f->xfer;
    if (x->phase == ZP_XFER_WAIT)
        start_writer(s, f);
    if (x->phase == ZP_XFER_WRITING)
        file_written(f);
    while (x->phase == ZP_XFER_STREAMING && x->sent < x->size &&
           x->sent - x->acked < (size_t)ZP_XFER_WINDOW * ZP_XFER_CHUNK)
        if (send_chunk(s, f) != 0)
            return true; /* its connection is gone: rlog.c finds out */
    return x->phase != ZP_XFER_NONE;
}

void zp_xfer_acked(zp_server *s, zp_repl_follower *f, uint64_t bytes)
{
    zp_xfer *x = &f->xfer;
    if (x->phase != ZP_XFER_STREAMING || bytes > x->sent)
        return;
    x->acked = bytes;
    if (x->acked < x->size)
        return;
    zp_info("replica %d has the whole state (%zu bytes, entry %" PRIu64 ") after %.2f s: the log "
            "follows",
            f->replica, x->size, x->lsn, zp_now_s() - x->started_s);
    uint64_t lsn = x->lsn;
    zp_xfer_end(f);
    f->acked = f->sent = lsn;
    f->target = s->repl.lsn;   /* in sync once it has caught up with the log's end from here */
    if (f->acked >= f->target) /* nothing logged since: caught up now (an idle primary logs
                                  nothing that would admit it later) */
        f->since_s = zp_now_s();
}

/* --- the backup's side --- */

void zp_xfer_in_init(zp_xfer_in *in)
{
    memset(in, 0, sizeof(*in));
    in->fd = -1;
}

void zp_xfer_in_fini(zp_xfer_in *in)
{
    if (in->fd >= 0)
        close(in->fd);
    if (in->path[0])
        remove_state_file(in->path, 1);
    zp_xfer_in_init(in);
}

/* The last chunk is in: put the state in place. */
static int take_state(zp_server *s, const Zeps__Header *h)
{
    zp_xfer_in *in = &s->follow.xin;
    char err[ZP_PATH_MAX + 512];
    int rc = fsync(in->fd) == 0 ? 0 : ZEPS_EIO;
    close(in->fd);
    in->fd = -1;
    if (rc == 0)
        rc = zp_restore_transfer(s, in->path, err, sizeof(err));
    else
        snprintf(err, sizeof(err), "fsync %s: %s", in->path, strerror(errno));
    if (rc != 0) {
        zp_error("state transfer failed: %s", err);
        zp_xfer_in_fini(in);
        return -1;
    }
    s->repl.transfers++;
    zp_info("took the primary's whole state (%" PRIu64 " bytes, %u tables) at entry %" PRIu64,
            in->size, s->ntables, h->lsn);
    zp_xfer_in_fini(in);
    return 1;
}

int zp_xfer_take(zp_server *s, const Zeps__Header *h, zp_frames *m, uint64_t *got)
{
    zp_xfer_in *in = &s->follow.xin;
    if (m->n < 2 || h->offset != in->got || (h->offset > 0 && in->lsn != h->lsn)) {
        zp_warn("state transfer: a chunk at byte %" PRIu64 " of entry %" PRIu64
                ", expected byte %" PRIu64 ": starting over",
                h->offset, h->lsn, in->got);
        zp_xfer_in_fini(in);
        return -1;
    }
    if (h->offset == 0) {
        char dir[ZP_PATH_MAX + 64];
        zp_xfer_in_fini(in);
        if (xfer_dir(s, dir, sizeof(dir)) != 0)
            return -1;
        snprintf(in->path, sizeof(in->path), "%s/incoming-%" PRIu64, dir, h->lsn);
        in->fd = open(in->path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        in->lsn = h->lsn;
        in->size = h->count;
        if (in->fd < 0) {
            zp_error("state transfer: cannot write %s: %s", in->path, strerror(errno));
            in->path[0] = '\0';
            return -1;
        }
    }
    const zmq_msg_t *chunk = &m->f[m->n - 1];
    size_t len = zmq_msg_size(chunk);
    if (pwrite(in->fd, zmq_msg_data((zmq_msg_t *)chunk), len, (off_t)in->got) != (ssize_t)len) {
        zp_error("state transfer: writing %s: %s", in->path, strerror(errno));
        zp_xfer_in_fini(in);
        return -1;
    }
    in->got += len;
    *got = in->got;
    return in->got >= in->size ? take_state(s, h) : 0;
}
