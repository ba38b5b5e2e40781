/*
 * ctl_keygen.c - `zepsctl keygen`: make a CurveZMQ key pair for a server or
 * a worker.
 *
 *   zepsctl keygen --out DIR --name NAME
 *
 * writes DIR/NAME.key (the secret key, mode 0600) and DIR/NAME.pub (the
 * public key), each one line of Z85 text, and prints the public key. It never
 * overwrites a key: replacing a key is a decision, not a side effect of
 * running the command twice.
 */
#define _GNU_SOURCE
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "ctl.h"
#include "curve.h"
#include "zeps_errors.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: zepsctl keygen --out DIR --name NAME\n\n"
               "Writes a new CurveZMQ key pair: DIR/NAME.key (secret, mode 0600) and\n"
               "DIR/NAME.pub (public), each a 40-character Z85 line, and prints the public\n"
               "key. DIR is created (mode 0700) if missing; existing keys are never\n"
               "overwritten.\n\n"
               "  --out DIR     where to write the two files\n"
               "  --name NAME   file name stem, 1..64 of [A-Za-z0-9_.-] (e.g. server, worker-3)\n\n"
               "Servers name their pair in curve_server_secret / curve_server_public; each\n"
               "worker names its own in curve_client_secret / curve_client_public, and its\n"
               ".pub file goes into the servers' curve_allow_dir (docs/operations.md).\n"
               "Exit status: 0 on success, 1 if the files cannot be written, 2 on bad options.\n");
}

int zp_ctl_keygen(int argc, char **argv)
{
    static const struct option opts[] = {
        {"out", required_argument, NULL, 'o'},
        {"name", required_argument, NULL, 'n'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *dir = NULL, *name = NULL;
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        if (c == 'h') {
            usage(stdout);
            return 0;
        } else if (c == 'o') {
            dir = optarg;
        } else if (c == 'n') {
            name = optarg;
        } else {
            fprintf(stderr, "zepsctl keygen: unknown option or missing value: '%s'\n",
                    argv[optind - 1]);
            usage(stderr);
            return 2;
        }
    }
    if (optind < argc || !dir || !name) {
        if (optind < argc)
            fprintf(stderr, "zepsctl keygen: unexpected argument '%s'\n", argv[optind]);
        else
            fprintf(stderr, "zepsctl keygen: --out DIR and --name NAME are required\n");
        usage(stderr);
        return 2;
    }
    struct stat st;
    if (stat(dir, &st) != 0 && mkdir(dir, 0700) != 0) {
        perror("zepsctl keygen: cannot create the output directory");
        return 1;
    }
    char pub[ZP_CURVE_KEY_LEN + 1], err[1024];
    int rc = zp_curve_keygen(dir, name, pub, err, sizeof(err));
    if (rc != 0) {
        fprintf(stderr, "zepsctl keygen: %s\n", err);
        return rc == ZEPS_EINVAL ? 2 : 1;
    }
    printf("%s\n", pub);
    fprintf(stderr, "zepsctl keygen: wrote %s/%s.key (secret, 0600) and %s/%s.pub\n", dir, name,
            dir, name);
    return 0;
}
