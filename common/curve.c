/*
 * curve.c - CurveZMQ key files and transport-security checks; see curve.h.
 *
 * Key generation and the Z85 codec are libzmq's (zmq_curve_keypair,
 * zmq_z85_decode, zmq_curve_public); this file only adds the file handling
 * and the checks an operator needs to hear about before anything listens:
 * a missing file, a file that is not a key, a secret key others can read,
 * a public key that does not belong to its secret key.
 */
#define _GNU_SOURCE
#include "curve.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zmq.h>

#include "errors.h"
#include "zeps_errors.h"

/* A key file is 41 bytes; anything past a few hundred is not a key file. */
#define KEY_FILE_MAX 512

int zp_curve_read_key(const char *path, bool secret, char *out, char *err, size_t errlen)
{
    const char *what = secret ? "secret key file" : "public key file";
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return zp_errors_set(err, errlen, ZEPS_EIO, "%s %s: cannot open: %s", what, path,
                             strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return zp_errors_set(err, errlen, ZEPS_ECONFIG, "%s %s: not a regular file", what, path);
    }
    /* Like ssh for private keys, except that the group may read: a
     * Kubernetes Secret reaches a non-root pod only through its fsGroup
     * (mode 0440), as PostgreSQL allows 0640 for its key. */
    if (secret && (st.st_mode & 037)) {
        close(fd);
        return zp_errors_set(err, errlen, ZEPS_ECONFIG,
                             "%s %s: permissions %04o are too open: a secret key must not be "
                             "accessible by others or writable by the group (chmod 600 %s)",
                             what, path, (unsigned)(st.st_mode & 07777), path);
    }
    char buf[KEY_FILE_MAX + 1];
    ssize_t n = read(fd, buf, KEY_FILE_MAX + 1);
    int e = errno;
    close(fd);
    if (n < 0)
        return zp_errors_set(err, errlen, ZEPS_EIO, "%s %s: read error: %s", what, path,
                             strerror(e));
    if (n > KEY_FILE_MAX)
        return zp_errors_set(err, errlen, ZEPS_ECONFIG,
                             "%s %s: larger than %d bytes; not a key file (expected %d Z85 "
                             "characters, as written by 'zepsctl keygen')",
                             what, path, KEY_FILE_MAX, ZP_CURVE_KEY_LEN);
    buf[n] = '\0';
    char *p = buf + strspn(buf, " \t\r\n");
    size_t len = strcspn(p, " \t\r\n");
    char *rest = p + len;
    if (rest[strspn(rest, " \t\r\n")] != '\0' || len != ZP_CURVE_KEY_LEN)
        return zp_errors_set(err, errlen, ZEPS_ECONFIG,
                             "%s %s: does not hold one %d-character Z85 key (as written by "
                             "'zepsctl keygen')",
                             what, path, ZP_CURVE_KEY_LEN);
    p[len] = '\0';
    uint8_t raw[32];
    if (memchr(p, '\0', len) != NULL || zmq_z85_decode(raw, p) == NULL)
        return zp_errors_set(err, errlen, ZEPS_ECONFIG,
                             "%s %s: is not valid Z85 text (as written by 'zepsctl keygen')", what,
                             path);
    memcpy(out, p, ZP_CURVE_KEY_LEN + 1);
    return ZEPS_OK;
}

/* Write `text` to dir/file with `mode`, fsynced; refuses an existing file. */
static int write_new(const char *path, const char *text, mode_t mode, char *err, size_t errlen)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
    if (fd < 0)
        return zp_errors_set(err, errlen, ZEPS_EIO, "%s: cannot create: %s%s", path,
                             strerror(errno),
                             errno == EEXIST ? " (keygen never overwrites a key)" : "");
    size_t len = strlen(text);
    /* O_CREAT's mode is filtered by the umask; say exactly what we mean. */
    int rc = fchmod(fd, mode) == 0 && write(fd, text, len) == (ssize_t)len && fsync(fd) == 0;
    int e = errno;
    if (close(fd) != 0 && rc) {
        rc = 0;
        e = errno;
    }
    if (!rc) {
        unlink(path);
        return zp_errors_set(err, errlen, ZEPS_EIO, "%s: cannot write: %s", path, strerror(e));
    }
    return ZEPS_OK;
}

static bool good_name(const char *name)
{
    size_t n = strlen(name);
    if (n == 0 || n > 64 || name[0] == '.')
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-' || c == '.'))
            return false;
    }
    return true;
}

int zp_curve_keygen(const char *dir, const char *name, char *public_out, char *err, size_t errlen)
{
    if (!good_name(name))
        return zp_errors_set(err, errlen, ZEPS_EINVAL,
                             "key name '%s' must be 1..64 characters of [A-Za-z0-9_.-] and not "
                             "start with a dot",
                             name);
    char pub[ZP_CURVE_KEY_LEN + 1], sec[ZP_CURVE_KEY_LEN + 1];
    if (zmq_curve_keypair(pub, sec) != 0)
        return zp_errors_set(err, errlen, ZEPS_ETRANSPORT, "cannot make a CURVE key pair: %s",
                             zmq_strerror(zmq_errno()));
    char kpath[ZP_PATH_MAX], ppath[ZP_PATH_MAX], text[ZP_CURVE_KEY_LEN + 2];
    if ((size_t)snprintf(kpath, sizeof(kpath), "%s/%s.key", dir, name) >= sizeof(kpath) ||
        (size_t)snprintf(ppath, sizeof(ppath), "%s/%s.pub", dir, name) >= sizeof(ppath))
        return zp_errors_set(err, errlen, ZEPS_EINVAL, "key directory path is too long: %s", dir);
    /* Check both before writing either, so a refusal leaves nothing half-made. */
    if (access(kpath, F_OK) == 0 || access(ppath, F_OK) == 0)
        return zp_errors_set(err, errlen, ZEPS_EIO,
                             "%s: already exists (keygen never overwrites a key)",
                             access(kpath, F_OK) == 0 ? kpath : ppath);
    snprintf(text, sizeof(text), "%s\n", sec);
    int rc = write_new(kpath, text, 0600, err, errlen);
    snprintf(text, sizeof(text), "%s\n", pub);
    if (rc == 0 && (rc = write_new(ppath, text, 0644, err, errlen)) != 0)
        unlink(kpath);
    explicit_bzero(sec, sizeof(sec));
    explicit_bzero(text, sizeof(text));
    if (rc != 0)
        return rc;
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
    }
    if (public_out)
        memcpy(public_out, pub, sizeof(pub));
    return ZEPS_OK;
}

bool zp_curve_is_loopback(const char *ep)
{
    if (strncmp(ep, "ipc://", 6) == 0 || strncmp(ep, "inproc://", 9) == 0)
        return true;
    if (strncmp(ep, "tcp://", 6) != 0)
        return false;
    const char *host = ep + 6;
    /* ZeroMQ's "tcp://iface;addr" form: the part after ';' is the peer. */
    const char *semi = strchr(host, ';');
    if (semi)
        host = semi + 1;
    const char *colon = strrchr(host, ':');
    if (!colon)
        return false;
    char h[ZP_ENDPOINT_MAX];
    size_t n = (size_t)(colon - host);
    if (n == 0 || n >= sizeof(h))
        return false;
    memcpy(h, host, n);
    h[n] = '\0';
    if (h[0] == '[' && n >= 2 && h[n - 1] == ']') {
        memmove(h, h + 1, n - 2);
        h[n - 2] = '\0';
    }
    if (strcmp(h, "localhost") == 0)
        return true;
    struct in_addr a4;
    struct in6_addr a6;
    if (inet_pton(AF_INET, h, &a4) == 1)
        return (ntohl(a4.s_addr) >> 24) == 127;
    if (inet_pton(AF_INET6, h, &a6) == 1)
        return IN6_IS_ADDR_LOOPBACK(&a6);
    return false; /* "*", an interface name or a host name */
}

bool zp_curve_server_enabled(const zp_config *cfg)
{
    return cfg->curve_server_secret[0] != '\0';
}

int zp_curve_check_server(const zp_config *cfg, const char *bind_ep, char *err, size_t errlen)
{
    const char *f = cfg->path;
    if (zp_curve_server_enabled(cfg)) {
        if (!cfg->curve_allow_dir[0])
            return zp_errors_set(err, errlen, ZEPS_ECONFIG,
                                 "%s: 'cluster.curve_server_secret' is set but "
                                 "'cluster.curve_allow_dir' is not: name the directory of the "
                                 "workers' .pub files that may connect",
                                 f);
        return ZEPS_OK;
    }
    if (cfg->curve_allow_dir[0])
        return zp_errors_set(
            err, errlen, ZEPS_ECONFIG,
            "%s: 'cluster.curve_allow_dir' is set but 'cluster.curve_server_secret' "
            "is not: a server needs its secret key to use CURVE",
            f);
    if (!zp_curve_is_loopback(bind_ep) && !cfg->insecure)
        return zp_errors_set(
            err, errlen, ZEPS_ECONFIG,
            "%s: refusing to bind %s without CURVE keys: that address is reachable "
            "from other hosts and the traffic would be neither authenticated nor "
            "encrypted. Set 'cluster.curve_server_secret', 'curve_server_public' "
            "and 'curve_allow_dir' (keys from 'zepsctl keygen'), or set "
            "'cluster.insecure = true' to accept this on a trusted network",
            f, bind_ep);
    return ZEPS_OK;
}

int zp_curve_load_client(const zp_config *cfg, zp_curve_client_keys *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof(*out));
    bool any =
        cfg->curve_client_secret[0] || cfg->curve_client_public[0] || cfg->curve_server_public[0];
    if (!any)
        return ZEPS_OK;
    if (!cfg->curve_client_secret[0] || !cfg->curve_server_public[0])
        return zp_errors_set(err, errlen, ZEPS_ECONFIG,
                             "%s: a CURVE client needs both 'cluster.curve_client_secret' and "
                             "'cluster.curve_server_public' (and optionally curve_client_public)",
                             cfg->path);
    int rc = zp_curve_read_key(cfg->curve_server_public, false, out->server_public, err, errlen);
    if (rc == 0)
        rc = zp_curve_read_key(cfg->curve_client_secret, true, out->client_secret, err, errlen);
    char derived[ZP_CURVE_KEY_LEN + 1];
    if (rc == 0 && zmq_curve_public(derived, out->client_secret) != 0)
        rc = zp_errors_set(err, errlen, ZEPS_ECONFIG, "%s: cannot derive its public key: %s",
                           cfg->curve_client_secret, zmq_strerror(zmq_errno()));
    if (rc == 0 && cfg->curve_client_public[0]) {
        rc = zp_curve_read_key(cfg->curve_client_public, false, out->client_public, err, errlen);
        if (rc == 0 && strcmp(derived, out->client_public) != 0)
            rc = zp_errors_set(err, errlen, ZEPS_ECONFIG,
                               "public key file %s does not belong to secret key file %s",
                               cfg->curve_client_public, cfg->curve_client_secret);
    }
    if (rc == 0)
        memcpy(out->client_public, derived, sizeof(derived));
    explicit_bzero(derived, sizeof(derived));
    if (rc != 0)
        explicit_bzero(out, sizeof(*out));
    return rc;
}

int zp_curve_apply_client(void *sock, const char *server_public, const char *client_public,
                          const char *client_secret)
{
    if (zmq_setsockopt(sock, ZMQ_CURVE_SERVERKEY, server_public, ZP_CURVE_KEY_LEN + 1) != 0 ||
        zmq_setsockopt(sock, ZMQ_CURVE_PUBLICKEY, client_public, ZP_CURVE_KEY_LEN + 1) != 0 ||
        zmq_setsockopt(sock, ZMQ_CURVE_SECRETKEY, client_secret, ZP_CURVE_KEY_LEN + 1) != 0)
        return ZEPS_ETRANSPORT;
    return ZEPS_OK;
}

int zp_curve_apply_server_pair(const zp_config *cfg, void *sock, char *err, size_t errlen)
{
    if (!zp_curve_server_enabled(cfg))
        return 0;
    char secret[ZP_CURVE_KEY_LEN + 1], pub[ZP_CURVE_KEY_LEN + 1];
    int rc = zp_curve_read_key(cfg->curve_server_secret, true, secret, err, errlen);
    if (rc == 0 && zmq_curve_public(pub, secret) != 0) {
        snprintf(err, errlen, "bad server key");
        rc = ZEPS_ECONFIG;
    }
    if (rc == 0 && (zmq_setsockopt(sock, ZMQ_CURVE_SERVERKEY, pub, ZP_CURVE_KEY_LEN + 1) |
                    zmq_setsockopt(sock, ZMQ_CURVE_PUBLICKEY, pub, ZP_CURVE_KEY_LEN + 1) |
                    zmq_setsockopt(sock, ZMQ_CURVE_SECRETKEY, secret, ZP_CURVE_KEY_LEN + 1))) {
        snprintf(err, errlen, "%s", zmq_strerror(zmq_errno()));
        rc = ZEPS_ETRANSPORT;
    }
    explicit_bzero(secret, sizeof(secret));
    return rc;
}
