/*
 * curve.h - CurveZMQ key files and the transport-security rules every zeps
 * process applies.
 *
 * zeps authenticates and encrypts its traffic with ZeroMQ's CURVE mechanism
 * (libzmq's own implementation, over libsodium). Keys live in small text
 * files: NAME.pub holds a public key and NAME.key a secret key, each as the
 * 40-character Z85 text zmq_curve_keypair() produces, followed by a newline.
 * A secret key file must not be readable by group or others (like ssh's
 * private keys): a key anyone on the host can read authenticates nobody.
 *
 * The cluster file names the files (cluster.curve_*); this module reads and
 * checks them, says whether an endpoint is loopback-only (the one case where
 * running without keys is allowed unless `insecure = true`), and applies the
 * client keys to a socket. The server's allow-list and ZAP handler are in
 * server/zap.c.
 */
#ifndef ZP_CURVE_H
#define ZP_CURVE_H

#include <stdbool.h>
#include <stddef.h>

#include "config.h"

#define ZP_CURVE_KEY_LEN 40 /* Z85 text of a 32-byte key */

/* The three keys a client needs, as Z85 text ("" = not configured). */
typedef struct zp_curve_client_keys {
    char server_public[ZP_CURVE_KEY_LEN + 1];
    char client_public[ZP_CURVE_KEY_LEN + 1];
    char client_secret[ZP_CURVE_KEY_LEN + 1];
} zp_curve_client_keys;

/* Read the key file at `path` into out (40 chars + NUL). The file must hold
 * exactly one Z85 key (surrounding whitespace allowed) that decodes to 32
 * bytes; when `secret` is true it must also have no group or other
 * permission bits. Returns 0, ZEPS_EIO (cannot open or read) or ZEPS_ECONFIG
 * (bad content or mode), with a message naming the file in err. Any thread. */
int zp_curve_read_key(const char *path, bool secret, char *out, char *err, size_t errlen);

/* Write a new key pair as DIR/NAME.key (mode 0600) and DIR/NAME.pub (0644),
 * each fsynced, with the directory fsynced after. Refuses to overwrite an
 * existing file. `name` is 1..64 chars of [A-Za-z0-9_.-], not starting with a
 * dot. On success copies the public key text into public_out (41 bytes) if
 * not NULL. Returns 0, ZEPS_EINVAL (bad name), ZEPS_EIO or ZEPS_ETRANSPORT
 * (no CURVE in this libzmq), with a message in err. */
int zp_curve_keygen(const char *dir, const char *name, char *public_out, char *err, size_t errlen);

/* True if `ep` can only be reached from this host: ipc://, inproc://, or
 * tcp:// to 127.0.0.0/8, ::1 or localhost. A wildcard or any other address
 * (including a host name) is not. */
bool zp_curve_is_loopback(const char *ep);

/* True if the config turns CURVE on for the server side (a server secret
 * key is configured). */
bool zp_curve_server_enabled(const zp_config *cfg);

/* Check that a server binding `bind_ep` under cfg is allowed: with CURVE off
 * the endpoint must be loopback unless cfg->insecure. Also checks that the
 * server-side keys come as a complete set (secret, public, allow dir).
 * Returns 0 or ZEPS_ECONFIG with a message. Any thread. */
int zp_curve_check_server(const zp_config *cfg, const char *bind_ep, char *err, size_t errlen);

/* Load the client keys the config names into *out (all empty when the config
 * has none). The client keys and the server public key come together or not
 * at all. Returns 0, ZEPS_EIO or ZEPS_ECONFIG with a message. */
int zp_curve_load_client(const zp_config *cfg, zp_curve_client_keys *out, char *err, size_t errlen);

/* Set ZMQ_CURVE_SERVERKEY/PUBLICKEY/SECRETKEY on `sock` (before connect) from
 * Z85 text. Returns 0 or ZEPS_ETRANSPORT (errno from zmq_setsockopt). */
int zp_curve_apply_client(void *sock, const char *server_public, const char *client_public,
                          const char *client_secret);

/* With CURVE on for servers (cfg), set `sock` (before connect) to speak it
 * with the servers' own key pair, as one server reaching another does:
 * every server holds the cluster's server key, and a server's ZAP allows
 * that key as a tool (a backup following its primary, a move's source
 * asking its target). 0 (also with CURVE off), or ZEPS_EIO, ZEPS_ECONFIG
 * or ZEPS_ETRANSPORT with a message in err. */
int zp_curve_apply_server_pair(const zp_config *cfg, void *sock, char *err, size_t errlen);

#endif
