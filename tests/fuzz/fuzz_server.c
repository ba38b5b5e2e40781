/*
 * fuzz_server.c - libFuzzer target: the shard's whole request handling
 * (zp_dispatch and everything below it) in process, without sockets.
 *
 * Each input gets a fresh shard (fuzz_shard.h: zp_server_new_core, replies
 * dropped) in a state where the deep paths are reachable: every worker said
 * HELLO and three tables, dense and sparse, are declared. The input's first byte picks the mode
 * (bsp, async, ssp, weighted), the number of workers (1..3) and of shards
 * (1 or 2, this being shard 0); the rest is up to 32 messages, each a
 * control byte (bits 0-1: the sender's identity "w<r>", bits 3-4: one
 * header frame plus 0..2 payload frames, bit 5: as if more frames than
 * ZP_MAX_FRAMES arrived, bit 6: applied as an entry of the primary's log,
 * as a backup applies it: a bsp round entry, a lost worker; bit 7: its
 * first frame is a packet of an attach connection, common/bell.h, read by
 * the packet parser first) and its frames (fuzz_input.h). Crashes, sanitizer
 * reports and aborts are the findings; a refused message is not.
 */
#include <stdlib.h>
#include <string.h>

#include "fuzz_input.h"
#include "fuzz_shard.h"
#include "log.h"

#define MAX_MESSAGES 32

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    /* refusals would flood the output; ZEPS_FUZZ_VERBOSE=1 shows them */
    zp_log_init("fuzz_server", getenv("ZEPS_FUZZ_VERBOSE") ? ZP_LOG_DEBUG : ZP_LOG_ERROR + 1);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    zf_cursor c = {data, size};
    static zp_config cfg; /* large: made once, refilled by zf_shard_start */
    zp_server *s = zf_shard_start(&cfg, zf_byte(&c));
    for (int i = 0; i < MAX_MESSAGES && c.left; i++) {
        uint8_t ctl = zf_byte(&c);
        char id[16];
        snprintf(id, sizeof(id), "w%u", ctl & 3u);
        int nframes = 1 + (ctl >> 3) % 3;
        const void *f[3];
        size_t len[3];
        for (int k = 0; k < nframes; k++)
            f[k] = zf_frame(&c, &len[k]);
        if (ctl >> 7) /* a packet of an attach connection: parsed, then dispatched */
            zf_deliver_packet(s, id, f[0], len[0]);
        else if ((ctl >> 6) & 1) /* as an entry of the primary's log (a bsp round entry...) */
            zf_apply_entry(s, f, len, nframes);
        else
            zf_deliver(s, id, f, len, nframes, (ctl >> 5) & 1);
    }
    zp_server_destroy(&s);
    return 0;
}
