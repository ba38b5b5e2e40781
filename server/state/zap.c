/*
 * zap.c - the shard's ZAP handler; see zap.h.
 *
 * The allow-list is a sorted array of raw 32-byte keys searched with
 * bsearch: it is read once (and on SIGHUP) and consulted once per handshake,
 * so nothing fancier is needed. Requests are checked frame by frame, since a
 * ZAP request is built by libzmq but nothing here should trust a frame count
 * it did not check.
 */
#define _GNU_SOURCE
#include "zap.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <zmq.h>

#include "alloc.h"
#include "curve.h"
#include "errors.h"
#include "log.h"
#include "now.h"
#include "zeps_errors.h"

#define ZAP_ENDPOINT   "inproc://zeromq.zap.01"
#define ZAP_FRAMES_MAX 8 /* a CURVE request has 7 */

static int key_cmp(const void *a, const void *b)
{
    return memcmp(a, b, 32);
}

/* Bind key k from NAME.id beside its NAME.pub (path), if there is one;
 * *has_id says whether there was. */
static int load_bind(const char *path, zp_zap_key *k, bool *has_id, char *err, size_t errlen)
{
    char id[2048];
    snprintf(id, sizeof(id), "%.*s.id", (int)(strlen(path) - 4), path);
    *has_id = access(id, F_OK) == 0;
    if (!*has_id) {
        memset(&k->bind, 0, sizeof(k->bind));
        k->bind.any = true;
        return 0;
    }
    return zp_bind_load(id, &k->bind, err, errlen);
}

/* Either every key is bound or none is: a key left unbound beside bound
 * ones would speak as anything, which is surely not what was meant. */
static int check_bound(const char *dir, size_t n, size_t nbound, const char *unbound, char *err,
                       size_t errlen)
{
    if (nbound == 0 || nbound == n)
        return 0;
    return zp_errors_set(err, errlen, ZEPS_ECONFIG,
                         "curve_allow_dir %s: %s has no binding file (%.*s.id) but %zu other "
                         "key(s) have one; bind every key (ranks = [...]; tool = true) or none "
                         "(docs/operations.md, Security)",
                         dir, unbound, (int)strlen(unbound) - 4, unbound, nbound);
}

/* Read every *.pub of dir (and its NAME.id) into a new sorted array. */
static int load_keys(const char *dir, zp_zap_key **out, size_t *nout, bool *bound, char *err,
                     size_t errlen)
{
    DIR *d = opendir(dir);
    if (!d)
        return zp_errors_set(err, errlen, ZEPS_EIO, "curve_allow_dir %s: cannot open: %s", dir,
                             strerror(errno));
    zp_zap_key *keys = NULL;
    size_t n = 0, cap = 0, nbound = 0;
    char unbound[256] = "";
    int rc = ZEPS_OK;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name);
        if (e->d_name[0] == '.' || len < 5 || strcmp(e->d_name + len - 4, ".pub") != 0)
            continue;
        char path[2048], text[ZP_CURVE_KEY_LEN + 1];
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        if ((rc = zp_curve_read_key(path, false, text, err, errlen)) != 0)
            break;
        if (n == cap) {
            cap = cap ? 2 * cap : 16;
            keys = zp_alloc_resize(keys, cap * sizeof(*keys));
        }
        bool has_id;
        if ((rc = load_bind(path, &keys[n], &has_id, err, errlen)) != 0)
            break;
        nbound += has_id;
        if (!has_id)
            snprintf(unbound, sizeof(unbound), "%s", e->d_name);
        zmq_z85_decode(keys[n++].key, text);
    }
    closedir(d);
    if (rc == 0 && n == 0)
        rc = zp_errors_set(err, errlen, ZEPS_ECONFIG,
                           "curve_allow_dir %s: holds no .pub files, so no worker could connect "
                           "(copy each worker's NAME.pub from 'zepsctl keygen' there)",
                           dir);
    if (rc == 0)
        rc = check_bound(dir, n, nbound, unbound, err, errlen);
    if (rc != 0) {
        free(keys);
        return rc;
    }
    qsort(keys, n, sizeof(*keys), key_cmp);
    *out = keys;
    *nout = n;
    *bound = nbound > 0;
    return ZEPS_OK;
}

/* Say how many keys there are and how they are bound: "CURVE on: 2
 * allowed client keys from DIR, ..." (`what` is "CURVE on: " or "CURVE
 * allow-list reloaded: "); a warning for an unbound list. */
static void log_binding(const zp_zap *z, const char *what)
{
    if (z->bound)
        zp_info("%s%zu %s from %s, each bound to its ranks or tools", what, z->nkeys,
                z->nkeys == 1 ? "allowed client key" : "allowed client keys", z->allow_dir);
    else
        zp_warn("%s%zu %s from %s; none is bound to an identity, so any of them may speak as "
                "any worker rank or as a tool (add NAME.id files: docs/operations.md, Security)",
                what, z->nkeys, z->nkeys == 1 ? "allowed client key" : "allowed client keys",
                z->allow_dir);
}

int zp_zap_open(zp_zap *z, void *zctx, const char *allow_dir, char *err, size_t errlen)
{
    memset(z, 0, sizeof(*z));
    zp_ratelimit_init(&z->log, "refused", 1, 1.0);
    snprintf(z->allow_dir, sizeof(z->allow_dir), "%s", allow_dir);
    int rc = load_keys(allow_dir, &z->keys, &z->nkeys, &z->bound, err, errlen);
    if (rc != 0)
        return rc;
    z->sock = zmq_socket(zctx, ZMQ_REP);
    int zero = 0;
    if (z->sock)
        zmq_setsockopt(z->sock, ZMQ_LINGER, &zero, sizeof(zero));
    if (!z->sock || zmq_bind(z->sock, ZAP_ENDPOINT) != 0) {
        rc = zp_errors_set(err, errlen, ZEPS_ETRANSPORT, "cannot start the ZAP handler at %s: %s",
                           ZAP_ENDPOINT, zmq_strerror(zmq_errno()));
        if (z->sock)
            zmq_close(z->sock);
        free(z->keys);
        memset(z, 0, sizeof(*z));
        return rc;
    }
    z->enabled = true;
    log_binding(z, "CURVE on: ");
    return ZEPS_OK;
}

int zp_zap_reload(zp_zap *z, char *err, size_t errlen)
{
    zp_zap_key *keys;
    size_t n;
    bool bound;
    int rc = load_keys(z->allow_dir, &keys, &n, &bound, err, errlen);
    if (rc != 0)
        return rc;
    free(z->keys);
    z->keys = keys;
    z->nkeys = n;
    z->bound = bound;
    log_binding(z, "CURVE allow-list reloaded: ");
    return ZEPS_OK;
}

static bool has_input(zp_zap *z)
{
    int events = 0;
    size_t len = sizeof(events);
    return zmq_getsockopt(z->sock, ZMQ_EVENTS, &events, &len) == 0 && (events & ZMQ_POLLIN);
}

/* A frame as a C string for logs (at most cap - 1 bytes, non-printables as '?'). */
static void frame_text(zmq_msg_t *m, char *buf, size_t cap)
{
    size_t n = zmq_msg_size(m) < cap - 1 ? zmq_msg_size(m) : cap - 1;
    const char *p = zmq_msg_data(m);
    for (size_t i = 0; i < n; i++)
        buf[i] = (p[i] >= 32 && p[i] < 127) ? p[i] : '?';
    buf[n] = '\0';
}

static bool frame_is(zmq_msg_t *m, const char *s)
{
    return zmq_msg_size(m) == strlen(s) && memcmp(zmq_msg_data(m), s, strlen(s)) == 0;
}

/* Whether to log this refusal: at most one message a second, so a client
 * retrying a refused key every 100 ms does not flood the log; z->note then
 * says how many went unlogged in between (every refusal is counted). */
static bool warn_due(zp_zap *z)
{
    z->note[0] = '\0';
    return zp_ratelimit_due(&z->log, zp_now_s(), z->note, sizeof(z->note));
}

/* Decide one request: fills status/text, and uid (the key as Z85) when it
 * accepts; returns true to accept. */
static bool decide(zp_zap *z, zmq_msg_t *f, int n, const char **status, const char **text,
                   char *uid)
{
    char addr[64], prefix[ZP_CURVE_KEY_LEN + 1];
    if (n < 6 || !frame_is(&f[0], "1.0")) {
        *status = "500";
        *text = "malformed ZAP request";
        zp_warn("CURVE: malformed ZAP request (%d frames) refused", n);
        return false;
    }
    frame_text(&f[3], addr, sizeof(addr));
    if (!frame_is(&f[5], "CURVE") || n != 7 || zmq_msg_size(&f[6]) != 32) {
        *status = "400";
        *text = "CURVE required";
        z->refused++;
        if (warn_due(z))
            zp_warn("CURVE: refused a connection from %s without a CURVE key%s", addr, z->note);
        return false;
    }
    const uint8_t *key = zmq_msg_data(&f[6]);
    if ((z->nkeys && bsearch(key, z->keys, z->nkeys, sizeof(*z->keys), key_cmp)) ||
        (z->has_peer && memcmp(key, z->peer, sizeof(z->peer)) == 0)) {
        *status = "200";
        *text = "OK";
        zmq_z85_encode(uid, key, 32);
        z->accepted++;
        return true;
    }
    zmq_z85_encode(prefix, key, 32);
    *status = "400";
    *text = "key not in the allow-list";
    z->refused++;
    if (warn_due(z))
        zp_warn("CURVE: refused client key %.8s... from %s: not in the allow-list %s (%" PRIu64
                " refused so far)%s",
                prefix, addr, z->allow_dir, z->refused, z->note);
    return false;
}

/* Receive one request (all frames) and answer it; false if none waited. */
static bool serve_one(zp_zap *z)
{
    zmq_msg_t f[ZAP_FRAMES_MAX];
    int n = 0, more = 1;
    while (more) {
        zmq_msg_t m;
        zmq_msg_init(&m);
        if (zmq_msg_recv(&m, z->sock, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&m);
            if (n == 0)
                return false;
            break; /* a multipart message arrives whole; cannot happen */
        }
        more = zmq_msg_more(&m);
        if (n < ZAP_FRAMES_MAX)
            f[n] = m;
        else
            zmq_msg_close(&m);
        n++;
    }
    const char *status, *text;
    char uid[ZP_CURVE_KEY_LEN + 1] = "";
    int have = n < ZAP_FRAMES_MAX ? n : ZAP_FRAMES_MAX;
    decide(z, f, n, &status, &text, uid);
    /* Reply: version, request id, status code, status text, user id, metadata. */
    zmq_send(z->sock, "1.0", 3, ZMQ_SNDMORE | ZMQ_DONTWAIT);
    if (have >= 2)
        zmq_send(z->sock, zmq_msg_data(&f[1]), zmq_msg_size(&f[1]), ZMQ_SNDMORE | ZMQ_DONTWAIT);
    else
        zmq_send(z->sock, "", 0, ZMQ_SNDMORE | ZMQ_DONTWAIT);
    zmq_send(z->sock, status, 3, ZMQ_SNDMORE | ZMQ_DONTWAIT);
    zmq_send(z->sock, text, strlen(text), ZMQ_SNDMORE | ZMQ_DONTWAIT);
    zmq_send(z->sock, uid, strlen(uid), ZMQ_SNDMORE | ZMQ_DONTWAIT); /* User-Id: the key */
    zmq_send(z->sock, "", 0, ZMQ_DONTWAIT);
    for (int i = 0; i < have; i++)
        zmq_msg_close(&f[i]);
    return true;
}

void zp_zap_pump(zp_zap *z)
{
    if (!z->enabled)
        return;
    /* Drain fully: handshakes are few, and a request left waiting is a
     * client left hanging until the next edge. */
    while (has_input(z))
        if (!serve_one(z))
            break;
}

static void on_poll(uv_poll_t *h, int status, int events)
{
    (void)events;
    zp_zap *z = (zp_zap *)((char *)h - offsetof(zp_zap, poll));
    if (status < 0) {
        zp_error("poll on the ZAP socket failed: %s", uv_strerror(status));
        return;
    }
    zp_zap_pump(z);
}

int zp_zap_start(zp_zap *z, uv_loop_t *loop, char *err, size_t errlen)
{
    int fd;
    size_t len = sizeof(fd);
    if (zmq_getsockopt(z->sock, ZMQ_FD, &fd, &len) != 0)
        return zp_errors_set(err, errlen, ZEPS_ETRANSPORT, "ZAP socket ZMQ_FD: %s",
                             zmq_strerror(zmq_errno()));
    uv_poll_init(loop, &z->poll, fd);
    uv_poll_start(&z->poll, UV_READABLE, on_poll);
    return ZEPS_OK;
}

const zp_bind *zp_zap_binding(const zp_zap *z, const char *user_id)
{
    uint8_t key[32];
    if (!user_id || strlen(user_id) != ZP_CURVE_KEY_LEN || !zmq_z85_decode(key, user_id))
        return NULL;
    if (z->has_peer && memcmp(key, z->peer, sizeof(z->peer)) == 0)
        return &z->peer_bind;
    const zp_zap_key *k = bsearch(key, z->keys, z->nkeys, sizeof(*z->keys), key_cmp);
    return k ? &k->bind : NULL;
}

void zp_zap_allow_peer(zp_zap *z, const char *public_z85)
{
    z->has_peer = zmq_z85_decode(z->peer, public_z85) != NULL;
    memset(&z->peer_bind, 0, sizeof(z->peer_bind));
    z->peer_bind.tool = true;
}

void zp_zap_close(zp_zap *z)
{
    if (z->sock)
        zmq_close(z->sock);
    free(z->keys);
    z->sock = NULL;
    z->keys = NULL;
    z->enabled = false;
}
