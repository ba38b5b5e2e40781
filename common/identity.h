/*
 * identity.h - which shard or rank this process is, from a flag or from the
 * variables a cluster engine sets.
 *
 * Every process of a cluster reads the same cluster file; only its index
 * differs. Under systemd templates, Kubernetes and Slurm one command line
 * (and one container image) serves every instance, so the index is taken,
 * in this order of precedence, from:
 *
 *   1. the flag (--shard / --rank), else
 *   2. $ZEPS_SHARD / $ZEPS_RANK, else
 *   3. $JOB_COMPLETION_INDEX (a Kubernetes indexed Job), else
 *   4. $SLURM_PROCID (the task's rank in its Slurm job step), else
 *   5. nothing: an error that names all of the above.
 *
 * Steps 1 and 2 take a value: a number N; "auto" (steps 3 and 4, then the
 * StatefulSet ordinal at the end of the host name, "zeps-server-3" -> 3);
 * "hostname" (the ordinal only); or "env:NAME" (the number in variable NAME,
 * e.g. env:SLURM_NODEID for one daemon per node, env:SLURM_LOCALID). The host
 * name is never used unless asked for: a machine called "node-7" must not
 * silently become shard 7. A set but empty variable counts as unset.
 */
#ifndef ZP_IDENTITY_H
#define ZP_IDENTITY_H

#include <stddef.h>

typedef enum zp_identity_kind {
    ZP_IDENTITY_SHARD = 0,   /* --shard, $ZEPS_SHARD */
    ZP_IDENTITY_RANK = 1,    /* --rank, $ZEPS_RANK */
    ZP_IDENTITY_REPLICA = 2, /* --replica, $ZEPS_REPLICA (docs/replication.md): a number,
                                hostname or env:NAME; never the engine variables,
                                which number shards and ranks */
} zp_identity_kind;

typedef struct zp_identity {
    int index;        /* >= 0 */
    char source[160]; /* where it came from, for the log: "$SLURM_PROCID=3" */
} zp_identity;

/* Resolve the index of `kind` as described above. `flag` is the flag's value
 * (NULL if absent), `hostname` the host name to read an ordinal from (NULL:
 * gethostname()), `max` the exclusive upper bound. Environment variables are
 * read with getenv. On success fills *out and returns 0; otherwise returns
 * ZEPS_ECONFIG and writes a message naming the variable or flag and its value
 * into err (errlen bytes, always terminated), e.g.
 * "SLURM_PROCID='x' is not a number". */
int zp_identity_resolve(zp_identity_kind kind, const char *flag, const char *hostname, int max,
                        zp_identity *out, char *err, size_t errlen);

/* A one-line summary of the order above for usage texts. */
const char *zp_identity_help(zp_identity_kind kind);

#endif
