/*
 * shmmsg.h - the two messages of a shared-memory attach, on the shard's
 * unix socket (docs/protocol.md, "Shared memory"): the client's attach,
 * sent with its memfd as SCM_RIGHTS, and the shard's answer. Both sides
 * are on one host, so the structs travel as they are in memory.
 */
#ifndef ZP_SHMMSG_H
#define ZP_SHMMSG_H

#include <stdint.h>

#define ZP_SHM_MAGIC_ATTACH 0x5441484d4853505aull /* "ZPSHMHAT" */
#define ZP_SHM_MAGIC_OK     0x4b4f4d4853505aull   /* "ZPSHMOK" */

typedef struct zp_shm_attach {
    uint64_t magic; /* ZP_SHM_MAGIC_ATTACH */
    uint32_t rank;  /* as in the client's HELLO */
    uint32_t pad;
    uint64_t incarnation; /* as in the client's HELLO */
    uint64_t token;       /* the HELLO reply's shm_token */
} zp_shm_attach;

typedef struct zp_shm_ok {
    uint64_t magic;   /* ZP_SHM_MAGIC_OK */
    uint64_t segment; /* the name requests give the segment (Header.shm_segment) */
    int32_t code;     /* 0, or the zeps_err of a refusal */
    char text[232];   /* why it was refused */
    uint32_t flags;   /* ZP_SHM_OK_BELL (last: an older shard's answer has zeros there) */
} zp_shm_ok;

/* zp_shm_ok.flags: the connection carries requests and replies too
 * (common/bell.h); without it the client keeps its headers on ZeroMQ. */
#define ZP_SHM_OK_BELL 0x1u

#endif
