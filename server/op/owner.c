/*
 * owner.c - which sparse ids this shard owns, and the EMOVED refusal of a
 * request that names others (docs/elastic.md, docs/protocol.md "Slots and
 * redirects").
 *
 * A sparse request (PULL, PUSH, PUT) is checked against the shard's slot
 * map before anything is read or touched; an id of a slot another shard
 * owns refuses the whole request with EMOVED, naming that shard and the
 * map's epoch, with the map itself as the payload: a client takes it and
 * sends the ids again to their owners, with no further round trip.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "alloc.h"
#include "log.h"
#include "now.h"
#include "ops.h"
#include "server.h"
#include "slotmap.h"
#include "zeps_errors.h"

ptrdiff_t zp_owner_foreign(const zp_server *s, const uint64_t *ids, size_t n)
{
    const zp_slotmap *m = s->slots;
    if (zp_slotmap_shards(m) == 1)
        return -1;
    for (size_t i = 0; i < n; i++)
        if (zp_slotmap_owner(m, ids[i]) != s->shard)
            return (ptrdiff_t)i;
    return -1;
}

static void free_map(void *data, void *hint)
{
    (void)hint;
    free(data);
}

void zp_owner_refuse(zp_server *s, zmq_msg_t *identity, const Zeps__Header *req, const char *what,
                     uint64_t id, size_t pos)
{
    const zp_slotmap *m = s->slots;
    uint32_t slot = zp_slotmap_slot_of(m, id);
    int owner = zp_slotmap_slot_owner(m, slot);
    char text[320];
    snprintf(text, sizeof(text),
             "%s: id %" PRIu64 " (position %zu) is in slot %u, which shard %d owns at slot map "
             "epoch %" PRIu64 ", not shard %d: send it there (the map is this reply's payload)",
             what, id, pos, slot, owner, zp_slotmap_epoch(m), s->shard);
    Zeps__Header rep;
    zp_reply_init(s, req, &rep);
    rep.op = ZEPS__OP__ERROR;
    rep.error = ZEPS_EMOVED;
    rep.error_text = text;
    rep.slot_owner = (uint32_t)owner;
    rep.slot_epoch = zp_slotmap_epoch(m);
    zp_reply_count_error(s, (unsigned)req->op, ZEPS_EMOVED);
    char note[96];
    if (zp_ratelimit_due(&s->logs.refused, zp_now_s(), note, sizeof(note)))
        zp_info("%s from rank %d refused (EMOVED): %s%s", zp_wire_op_name(req->op), (int)req->rank,
                text, note);
    size_t len = zp_slotmap_wire_size(m);
    void *map = zp_alloc(len);
    zp_slotmap_encode(m, map);
    zp_reply_send(s, identity, &rep, map, len, free_map, NULL); /* the sink owns map */
}
