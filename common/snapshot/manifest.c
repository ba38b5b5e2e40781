/*
 * manifest.c - the manifest of a snapshot directory (which sets are
 * complete), the choice of the set to restore, and pruning; see snapshot.h
 * and docs/snapshots.md. The manifest is a small text file with its own
 * CRC32C, replaced atomically (temporary file, fsync, rename, fsync of the
 * directory) under an flock, so writers of different shards never lose
 * each other's lines.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "alloc.h"
#include "errors.h"
#include "snapshot.h"
#include "snapshot_io.h"
#include "sparse_hash.h"
#include "zeps_errors.h"

#define MANIFEST_MAX ((size_t)16 << 20)

/* ---- the manifest ---- */

/*
 * Text, one record per line, ending in a CRC32C of everything before the
 * last line:
 *   zeps-manifest 1
 *   set <setid:016x> shards <S> clock <clock> created <ns>
 *   file <name> <size> <header crc:08x>        (S lines, by shard)
 *   ...
 *   crc32c <08x>
 */

void zp_manifest_free(zp_manifest **mp)
{
    if (!mp || !*mp)
        return;
    for (size_t i = 0; i < (*mp)->nsets; i++)
        free((*mp)->sets[i].files);
    free((*mp)->sets);
    free(*mp);
    *mp = NULL;
}

const zp_snap_set *zp_manifest_newest(const zp_manifest *m)
{
    return m && m->nsets ? &m->sets[0] : NULL;
}

static int manifest_path(char *buf, size_t len, const char *dir, const char *leaf)
{
    int n = snprintf(buf, len, "%s/%s", dir, leaf);
    return n < 0 || (size_t)n >= len ? ZEPS_EINVAL : 0;
}

/* Next line of text[*pos..end) into line (without '\n'); false at the end. */
static bool next_line(const char *text, size_t end, size_t *pos, char *line, size_t cap)
{
    if (*pos >= end)
        return false;
    const char *nl = memchr(text + *pos, '\n', end - *pos);
    size_t n = nl ? (size_t)(nl - (text + *pos)) : end - *pos;
    size_t c = n < cap - 1 ? n : cap - 1;
    memcpy(line, text + *pos, c);
    line[c] = '\0';
    *pos += n + (nl ? 1 : 0);
    return true;
}

static int manifest_parse(const char *path, const char *text, size_t size, zp_manifest *m,
                          char *err, size_t errlen)
{
#define BAD(...) zp_errors_set(err, errlen, ZEPS_EDATA, "manifest " __VA_ARGS__)
    /* The last line is the CRC of everything before it. */
    if (size == 0 || text[size - 1] != '\n')
        return BAD("%s: truncated (no final newline)", path);
    size_t last = size - 1;
    while (last > 0 && text[last - 1] != '\n')
        last--;
    unsigned crc;
    char tail[32];
    if (sscanf(text + last, "crc32c %8x%1[\n]", &crc, tail) != 2)
        return BAD("%s: no crc32c line at the end (truncated?)", path);
    if (zp_snapshot_crc32c(text, last) != crc)
        return BAD("%s: CRC mismatch", path);

    char line[256], name[128], canon[sizeof(((zp_snap_file *)0)->name)];
    size_t pos = 0, cap = 0;
    unsigned ver;
    if (!next_line(text, last, &pos, line, sizeof(line)) ||
        sscanf(line, "zeps-manifest %u", &ver) != 1 || ver != 1)
        return BAD("%s: first line is not 'zeps-manifest 1'", path);
    while (next_line(text, last, &pos, line, sizeof(line))) {
        uint64_t setid, created;
        int64_t clock;
        unsigned S;
        if (sscanf(line, "set %" SCNx64 " shards %u clock %" SCNd64 " created %" SCNu64, &setid, &S,
                   &clock, &created) != 4 ||
            S == 0 || S > 1u << 20)
            return BAD("%s: bad line '%s'", path, line);
        if (m->nsets == cap) {
            cap = cap ? 2 * cap : 8;
            m->sets = zp_alloc_resize(m->sets, cap * sizeof(zp_snap_set));
        }
        zp_snap_set *set = &m->sets[m->nsets++];
        *set = (zp_snap_set){.setid = setid, .nshards = S, .clock = clock, .created_ns = created};
        set->files = zp_alloc_zeroed(S, sizeof(zp_snap_file));
        if (m->nsets > 1 && setid >= m->sets[m->nsets - 2].setid)
            return BAD("%s: set %016" PRIx64 " out of order", path, setid);
        for (unsigned i = 0; i < S; i++) {
            zp_snap_file *f = &set->files[i];
            unsigned hc;
            snprintf(canon, sizeof(canon), "set-%016" PRIx64 "/shard-%u-of-%u.zsnap", setid, i, S);
            if (!next_line(text, last, &pos, line, sizeof(line)) ||
                sscanf(line, "file %127s %" SCNu64 " %8x", name, &f->size, &hc) != 3 ||
                strcmp(name, canon) != 0)
                return BAD("%s: set %016" PRIx64 ": expected the line of %s", path, setid, canon);
            memcpy(f->name, canon, sizeof(canon));
            f->header_crc = hc;
        }
    }
    return 0;
#undef BAD
}

int zp_manifest_load(const char *dir, zp_manifest **out, char *err, size_t errlen)
{
    char path[PATH_MAX];
    if (manifest_path(path, sizeof(path), dir, "MANIFEST"))
        return zp_errors_set(err, errlen, ZEPS_EINVAL, "snapshot directory %s: path too long", dir);
    zp_manifest *m = zp_alloc_zeroed(1, sizeof(*m));
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT) {
            *out = m;
            return 0;
        }
        free(m);
        return zp_errors_set(err, errlen, ZEPS_EIO, "manifest %s: cannot open: %s", path,
                             strerror(errno));
    }
    struct stat st;
    int rc = 0;
    char *text = NULL;
    if (fstat(fd, &st) < 0 || (size_t)st.st_size > MANIFEST_MAX)
        rc = zp_errors_set(err, errlen, ZEPS_EDATA,
                           "manifest %s: cannot stat or larger than %zu bytes", path, MANIFEST_MAX);
    if (!rc) {
        text = zp_alloc((size_t)st.st_size + 1);
        rc = zp_snapshot_read_file(fd, path, text, (size_t)st.st_size, err, errlen);
        text[st.st_size] = '\0'; /* the parser's sscanf reads a C string */
    }
    close(fd);
    if (!rc)
        rc = manifest_parse(path, text, (size_t)st.st_size, m, err, errlen);
    free(text);
    if (rc) {
        zp_manifest_free(&m);
        return rc;
    }
    *out = m;
    return 0;
}

/* Rewrite MANIFEST atomically: tmp, fsync, rename, fsync the directory. */
struct text_buf {
    const char *text;
    size_t len;
};

static int fill_text(int fd, const void *arg)
{
    const struct text_buf *tb = arg;
    return zp_snapshot_write_all(fd, tb->text, tb->len);
}

static int manifest_store(const char *dir, const zp_manifest *m, char *err, size_t errlen)
{
    size_t cap = 64, len = 0;
    for (size_t i = 0; i < m->nsets; i++)
        cap += 128 + (size_t)m->sets[i].nshards * 160; /* bounds of the two line formats */
    char *text = zp_alloc(cap);
    len += (size_t)snprintf(text + len, cap - len, "zeps-manifest 1\n");
    for (size_t i = 0; i < m->nsets; i++) {
        const zp_snap_set *s = &m->sets[i];
        len +=
            (size_t)snprintf(text + len, cap - len,
                             "set %016" PRIx64 " shards %u clock %" PRId64 " created %" PRIu64 "\n",
                             s->setid, s->nshards, s->clock, s->created_ns);
        for (uint32_t k = 0; k < s->nshards; k++)
            len += (size_t)snprintf(text + len, cap - len, "file %s %" PRIu64 " %08x\n",
                                    s->files[k].name, s->files[k].size, s->files[k].header_crc);
    }
    len += (size_t)snprintf(text + len, cap - len, "crc32c %08x\n", zp_snapshot_crc32c(text, len));

    char path[PATH_MAX], tmp[PATH_MAX];
    int n = snprintf(tmp, sizeof(tmp), "%s/MANIFEST.tmp.%ld", dir, (long)getpid());
    if (manifest_path(path, sizeof(path), dir, "MANIFEST") || n < 0 || (size_t)n >= sizeof(tmp)) {
        free(text);
        return zp_errors_set(err, errlen, ZEPS_EINVAL, "snapshot directory %s: path too long", dir);
    }
    struct text_buf tb = {text, len};
    int rc =
        zp_snapshot_write_replace_file(tmp, path, dir, "manifest", fill_text, &tb, err, errlen);
    free(text);
    return rc;
}

/* flock <dir>/MANIFEST.lock: serialises manifest changes between the shard
 * processes sharing dir. Returns the fd (close to unlock) or -1. */
static int manifest_lock(const char *dir, char *err, size_t errlen)
{
    char path[PATH_MAX];
    if (manifest_path(path, sizeof(path), dir, "MANIFEST.lock")) {
        zp_errors_set(err, errlen, ZEPS_EINVAL, "snapshot directory %s: path too long", dir);
        return -1;
    }
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
        zp_errors_set(err, errlen, ZEPS_EIO, "cannot open %s: %s", path, strerror(errno));
        return -1;
    }
    while (flock(fd, LOCK_EX) < 0) {
        if (errno != EINTR) {
            zp_errors_set(err, errlen, ZEPS_EIO, "cannot lock %s: %s", path, strerror(errno));
            close(fd);
            return -1;
        }
    }
    return fd;
}

int zp_manifest_set_complete(const char *dir, uint64_t setid, uint32_t nshards, char *err,
                             size_t errlen)
{
    if (nshards == 0)
        return zp_errors_set(err, errlen, ZEPS_EINVAL, "set %016" PRIx64 ": 0 shards", setid);
    for (uint32_t i = 0; i < nshards; i++) {
        char path[PATH_MAX];
        zp_snap_info in;
        if (zp_snapshot_path(path, sizeof(path), dir, setid, i, nshards))
            return zp_errors_set(err, errlen, ZEPS_EINVAL, "snapshot directory %s: path too long",
                                 dir);
        if (access(path, F_OK) < 0)
            return zp_errors_set(err, errlen, ZEPS_EDATA, "set %016" PRIx64 " incomplete: %s: %s",
                                 setid, path, strerror(errno));
        int rc = zp_snapshot_read_verify(path, &in, err, errlen);
        if (rc)
            return rc;
        if (in.h.setid != setid || in.h.shard != i || in.h.nshards != nshards)
            return zp_errors_set(err, errlen, ZEPS_EDATA,
                                 "snapshot %s: header says set %016" PRIx64 " shard %u of %u", path,
                                 in.h.setid, in.h.shard, in.h.nshards);
    }
    return 0;
}

/* Describe set `setid` from its files' headers into *set (which owns
 * set->files on success): every file present, of this set, agreeing on the
 * clock. Returns 0 or an error naming the file. */
static int describe_set(const char *dir, uint64_t setid, uint32_t nshards, zp_snap_set *set,
                        char *err, size_t errlen)
{
    *set = (zp_snap_set){.setid = setid, .nshards = nshards};
    set->files = zp_alloc_zeroed(nshards, sizeof(zp_snap_file));
    int rc = 0;
    for (uint32_t i = 0; i < nshards && !rc; i++) {
        char path[PATH_MAX];
        zp_snap_info in;
        if (zp_snapshot_path(path, sizeof(path), dir, setid, i, nshards)) {
            rc = zp_errors_set(err, errlen, ZEPS_EINVAL, "snapshot directory %s: path too long",
                               dir);
            break;
        }
        rc = zp_snapshot_read_info(path, &in, err, errlen);
        if (!rc && (in.h.setid != setid || in.h.shard != i || in.h.nshards != nshards ||
                    (i > 0 && in.h.clock != set->clock)))
            rc = zp_errors_set(
                err, errlen, ZEPS_EDATA,
                "snapshot %s: header says set %016" PRIx64 " shard %u of %u clock %" PRId64
                ", not part of set %016" PRIx64 " of %u shards (clock %" PRId64 ")",
                path, in.h.setid, in.h.shard, in.h.nshards, in.h.clock, setid, nshards, set->clock);
        if (rc)
            break;
        if (i == 0) {
            set->clock = in.h.clock;
            set->created_ns = in.h.created_ns;
        }
        if (in.h.created_ns > set->created_ns)
            set->created_ns = in.h.created_ns;
        zp_snap_file *f = &set->files[i];
        snprintf(f->name, sizeof(f->name), "set-%016" PRIx64 "/shard-%u-of-%u.zsnap", setid, i,
                 nshards);
        f->size = in.file_size;
        f->header_crc = in.header_crc;
    }
    if (rc) {
        free(set->files);
        set->files = NULL;
    }
    return rc;
}

/* Put `set` into m, newest first, replacing an entry of the same id; m
 * takes set->files. */
static void insert_set(zp_manifest *m, zp_snap_set *set)
{
    size_t at = 0;
    for (size_t i = 0; i < m->nsets; i++)
        if (m->sets[i].setid == set->setid) {
            free(m->sets[i].files);
            memmove(&m->sets[i], &m->sets[i + 1], (m->nsets - i - 1) * sizeof(zp_snap_set));
            m->nsets--;
            break;
        }
    while (at < m->nsets && m->sets[at].setid > set->setid)
        at++;
    m->sets = zp_alloc_resize(m->sets, (m->nsets + 1) * sizeof(zp_snap_set));
    memmove(&m->sets[at + 1], &m->sets[at], (m->nsets - at) * sizeof(zp_snap_set));
    m->sets[at] = *set;
    m->nsets++;
    set->files = NULL;
}

/* The files are read under the manifest lock, as prune deletes under it:
 * a set that a newer one pruned while its last writer was still on its
 * way (writers run in parallel at a low priority) is gone by then and is
 * not recorded; the manifest never names a file that is gone. */
int zp_manifest_add_set(const char *dir, uint64_t setid, uint32_t nshards, char *err, size_t errlen)
{
    if (nshards == 0)
        return zp_errors_set(err, errlen, ZEPS_EINVAL, "set %016" PRIx64 ": 0 shards", setid);
    int lk = manifest_lock(dir, err, errlen);
    if (lk < 0)
        return ZEPS_EIO;
    zp_manifest *m = NULL;
    zp_snap_set set = {0};
    int rc = zp_manifest_load(dir, &m, err, errlen);
    if (!rc) {
        rc = describe_set(dir, setid, nshards, &set, err, errlen);
        if (rc && m->nsets > 0 && m->sets[0].setid > setid)
            rc = 0; /* pruned by a newer set before it could be recorded */
        else if (!rc && !(rc = zp_setmap_check(dir, setid, nshards, NULL, err, errlen))) {
            insert_set(m, &set);
            rc = manifest_store(dir, m, err, errlen);
        }
    }
    free(set.files);
    zp_manifest_free(&m);
    close(lk);
    return rc;
}

/* Read this shard's file of `set` into *sp if it is the file the manifest
 * recorded (size and header CRC). 0, or an error with the reason in why
 * (*sp stays NULL). */
static int restore_own(const char *dir, const zp_snap_set *set, uint32_t shard, uint32_t nshards,
                       zp_snapshot **sp, char *why, size_t whylen)
{
    char path[PATH_MAX];
    zp_snap_info in;
    int rc = 0;
    if (set->nshards != nshards) {
        rc = zp_errors_set(why, whylen, ZEPS_EDATA,
                           "it has %u shards, this cluster %u (it needs resharding)", set->nshards,
                           nshards);
    } else if (manifest_path(path, sizeof(path), dir, set->files[shard].name)) {
        rc = zp_errors_set(why, whylen, ZEPS_EINVAL, "path too long");
    } else if (!(rc = zp_snapshot_read_info(path, &in, why, whylen)) &&
               (in.file_size != set->files[shard].size ||
                in.header_crc != set->files[shard].header_crc)) {
        rc = zp_errors_set(why, whylen, ZEPS_EDATA,
                           "snapshot %s: %" PRIu64 " bytes, header CRC %08x; the manifest "
                           "recorded %" PRIu64 " bytes, %08x",
                           path, in.file_size, in.header_crc, set->files[shard].size,
                           set->files[shard].header_crc);
    }
    if (!rc)
        rc = zp_snapshot_read(path, sp, why, whylen);
    return rc;
}

/* Every shard must restore the same set: a set is usable only if the other
 * shards' files (in the same shared directory) are intact too, else one
 * shard would fall back and the others would not. 0 if they all verify and
 * match the manifest, or an error with the reason in why. */
static int restore_others(const char *dir, const zp_snap_set *set, uint32_t shard, uint32_t nshards,
                          char *why, size_t whylen)
{
    int rc = 0;
    for (uint32_t j = 0; !rc && j < nshards; j++) {
        if (j == shard)
            continue;
        char other[PATH_MAX];
        zp_snap_info in;
        if (manifest_path(other, sizeof(other), dir, set->files[j].name)) {
            rc = zp_errors_set(why, whylen, ZEPS_EINVAL, "path too long");
        } else if (!(rc = zp_snapshot_read_verify(other, &in, why, whylen)) &&
                   (in.file_size != set->files[j].size ||
                    in.header_crc != set->files[j].header_crc)) {
            rc = zp_errors_set(why, whylen, ZEPS_EDATA,
                               "snapshot %s (shard %u): changed since the manifest recorded it",
                               other, j);
        }
        if (rc) {
            char inner[400]; /* room for the sentence around it */
            snprintf(inner, sizeof(inner), "%.399s", why);
            snprintf(why, whylen,
                     "shard %u's file is not usable, so no shard may "
                     "restore this set: %s",
                     j, inner);
        }
    }
    return rc;
}

/* The set's slot map checked (setmap.c) and given to s, the shard's own
 * record, if it is newer than the one s's file recorded: a shard that
 * missed a map change which did not concern it restores the set's map. */
static int restore_map(const char *dir, const zp_snap_set *set, zp_snapshot *s, char *why,
                       size_t whylen)
{
    zp_slotmap *m = NULL;
    int rc = zp_setmap_check(dir, set->setid, set->nshards, &m, why, whylen);
    if (rc)
        return rc;
    if (zp_slotmap_epoch(m) > s->h.slot_epoch) {
        uint8_t *wire = zp_alloc(zp_slotmap_wire_size(m));
        zp_slotmap_encode(m, wire);
        zp_snapshot_set_map(s, wire, zp_slotmap_wire_size(m));
        s->h.slot_epoch = zp_slotmap_epoch(m);
        free(wire);
    }
    zp_slotmap_destroy(&m);
    return 0;
}

int zp_manifest_find_restorable(const char *dir, uint32_t shard, uint32_t nshards,
                                zp_snapshot **out, uint64_t *setid_out, zp_snap_log_fn log,
                                void *log_arg, char *err, size_t errlen)
{
    if (nshards == 0 || shard >= nshards)
        return zp_errors_set(err, errlen, ZEPS_EINVAL, "restore: shard %u of %u", shard, nshards);
    zp_manifest *m = NULL;
    int rc = zp_manifest_load(dir, &m, err, errlen);
    if (rc)
        return rc;
    if (m->nsets == 0) {
        zp_manifest_free(&m);
        *out = NULL;
        return 0;
    }
    char why[512], msg[600];
    size_t skipped = 0;
    for (size_t i = 0; i < m->nsets; i++) {
        const zp_snap_set *set = &m->sets[i];
        zp_snapshot *s = NULL;
        rc = restore_own(dir, set, shard, nshards, &s, why, sizeof(why));
        if (!rc)
            rc = restore_others(dir, set, shard, nshards, why, sizeof(why));
        if (!rc)
            rc = restore_map(dir, set, s, why, sizeof(why));
        if (rc)
            zp_snapshot_free(&s);
        if (!rc) {
            zp_manifest_free(&m);
            if (setid_out)
                *setid_out = s->h.setid;
            *out = s;
            return 0;
        }
        skipped++;
        snprintf(msg, sizeof(msg), "skipping snapshot set %016" PRIx64 " for shard %u of %u: %s",
                 set->setid, shard, nshards, why);
        if (log)
            log(log_arg, msg);
    }
    size_t nsets = m->nsets;
    zp_manifest_free(&m);
    return zp_errors_set(err, errlen, ZEPS_EDATA,
                         "no restorable snapshot for shard %u of %u in %s: all %zu set(s) skipped "
                         "(last: %s)",
                         shard, nshards, dir, nsets, skipped ? why : "none");
}

/* setid of a "set-<16 hex>" name; false if it is not one. */
static bool parse_set_name(const char *name, uint64_t *setid)
{
    if (strncmp(name, "set-", 4) != 0 || strlen(name) != 20)
        return false;
    uint64_t v = 0;
    for (int i = 4; i < 20; i++) {
        char c = name[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (d < 0)
            return false;
        v = v << 4 | (uint64_t)d;
    }
    *setid = v;
    return true;
}

/* Delete entry `name` of the folder open as dfd: a file, or a folder of
 * files (a sparse table's cold tier checkpoint, docs/sparse.md). */
static int remove_entry(int dfd, const char *name)
{
    if (unlinkat(dfd, name, 0) == 0 || (errno != EISDIR && errno != EPERM))
        return errno == ENOENT ? 0 : (errno ? -1 : 0);
    int sub = openat(dfd, name, O_RDONLY | O_DIRECTORY);
    DIR *d = sub < 0 ? NULL : fdopendir(sub);
    if (d == NULL)
        return -1;
    struct dirent *de;
    while ((de = readdir(d)) != NULL)
        if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
            unlinkat(sub, de->d_name, 0);
    closedir(d);
    return unlinkat(dfd, name, AT_REMOVEDIR);
}

/* Delete the files of one set directory (and its cold tier checkpoints),
 * then the directory. */
static int remove_set_dir(const char *dir, const char *name, char *err, size_t errlen)
{
    char path[PATH_MAX];
    if (manifest_path(path, sizeof(path), dir, name))
        return zp_errors_set(err, errlen, ZEPS_EINVAL, "%s/%s: path too long", dir, name);
    DIR *d = opendir(path);
    if (!d)
        return zp_errors_set(err, errlen, ZEPS_EIO, "cannot open %s: %s", path, strerror(errno));
    int dfd = dirfd(d), rc = 0;
    struct dirent *de;
    while (!rc && (de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        errno = 0;
        if (remove_entry(dfd, de->d_name) < 0)
            rc = zp_errors_set(err, errlen, ZEPS_EIO, "cannot delete %s/%s: %s", path, de->d_name,
                               strerror(errno));
    }
    closedir(d);
    if (!rc && rmdir(path) < 0)
        rc = zp_errors_set(err, errlen, ZEPS_EIO, "cannot delete %s: %s", path, strerror(errno));
    return rc;
}

int zp_manifest_pin(const char *dir, uint64_t setid, char *err, size_t errlen)
{
    char path[PATH_MAX], tmp[PATH_MAX], text[64];
    int n = snprintf(tmp, sizeof(tmp), "%s/PINNED.tmp.%ld", dir, (long)getpid());
    if (manifest_path(path, sizeof(path), dir, "PINNED") || n < 0 || (size_t)n >= sizeof(tmp))
        return zp_errors_set(err, errlen, ZEPS_EINVAL, "snapshot directory %s: path too long", dir);
    int lk = manifest_lock(dir, err, errlen);
    if (lk < 0)
        return ZEPS_EIO;
    struct text_buf tb = {text,
                          (size_t)snprintf(text, sizeof(text), "pinned %016" PRIx64 "\n", setid)};
    int rc = zp_snapshot_write_replace_file(tmp, path, dir, "pin", fill_text, &tb, err, errlen);
    close(lk);
    return rc;
}

/* The set <dir>/PINNED names, if any. */
static bool pinned(const char *dir, uint64_t *setid)
{
    char path[PATH_MAX], text[64] = "";
    if (manifest_path(path, sizeof(path), dir, "PINNED"))
        return false;
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    bool ok = fgets(text, sizeof(text), f) != NULL && sscanf(text, "pinned %" SCNx64, setid) == 1;
    fclose(f);
    return ok;
}

/* Keep the newest `keep` sets of m, and the pinned one, in order. */
static void keep_sets(zp_manifest *m, unsigned keep, bool has_pin, uint64_t pin)
{
    size_t n = keep;
    for (size_t i = keep; i < m->nsets; i++) {
        if (has_pin && m->sets[i].setid == pin)
            m->sets[n++] = m->sets[i]; /* n <= i: its slot's files were freed */
        else
            free(m->sets[i].files);
    }
    m->nsets = n;
}

int zp_manifest_prune(const char *dir, unsigned keep, unsigned *removed, char *err, size_t errlen)
{
    if (keep == 0)
        keep = 1; /* never delete the newest complete set */
    int lk = manifest_lock(dir, err, errlen);
    if (lk < 0)
        return ZEPS_EIO;
    zp_manifest *m = NULL;
    unsigned nrm = 0;
    int rc = zp_manifest_load(dir, &m, err, errlen);
    if (rc || m->nsets == 0)
        goto done; /* no complete set: delete nothing */
    uint64_t pin = 0;
    bool has_pin = pinned(dir, &pin);
    if (m->nsets > keep) {
        /* The manifest forgets the sets first, so it never names a file
         * that is gone. */
        size_t before = m->nsets;
        keep_sets(m, keep, has_pin, pin);
        if (m->nsets != before && (rc = manifest_store(dir, m, err, errlen)))
            goto done;
    }
    /* Any set directory older than the newest complete set and not kept is
     * either dropped or was never completed; shards write their sets in
     * order, so none of those is still being written. */
    uint64_t newest = m->sets[0].setid;
    DIR *d = opendir(dir);
    if (!d) {
        rc = zp_errors_set(err, errlen, ZEPS_EIO, "cannot open %s: %s", dir, strerror(errno));
        goto done;
    }
    struct dirent *de;
    while (!rc && (de = readdir(d)) != NULL) {
        uint64_t id;
        if (!parse_set_name(de->d_name, &id) || id >= newest)
            continue;
        bool kept = false;
        for (size_t i = 0; i < m->nsets && !kept; i++)
            kept = m->sets[i].setid == id;
        if (kept)
            continue;
        rc = remove_set_dir(dir, de->d_name, err, errlen);
        if (!rc)
            nrm++;
    }
    closedir(d);
    int e;
    if (!rc && nrm && (e = zp_snapshot_write_fsync_dir(dir)))
        rc =
            zp_errors_set(err, errlen, ZEPS_EIO, "cannot fsync directory %s: %s", dir, strerror(e));
done:
    zp_manifest_free(&m);
    close(lk);
    if (!rc && removed)
        *removed = nrm;
    return rc;
}
