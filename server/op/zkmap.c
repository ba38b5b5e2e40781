/*
 * zkmap.c - the slot map in ZooKeeper as a move's single commit point, on
 * a shard with coordination (docs/elastic.md, "The map in ZooKeeper").
 *
 * The node /zeps/<name>/slots holds the map's wire form. A tool commits a
 * move by writing the new map there, conditionally on the version it
 * read when the move began; SLOTS and COMMIT follow as before, but only
 * hasten what the node already decided. A primary takes every newer map
 * the node's watch brings (role.c keeps the last one read, and asks again
 * when this replica is elected, before it serves): the source of the move
 * it commits commits as at COMMIT (M dropped, the parked requests answered
 * EMOVED naming the target), the target commits its import, any other
 * shard (a source's new primary, a shard in no move) takes the map and
 * drops the rows of the slots it gives away. What it took is logged as a
 * COMMIT, which its backups apply as one from the log.
 *
 * A part of a move whose lease or cut-over bound ends must not abort while
 * the node may hold its map: it reads the node; if it holds the move's map
 * it commits; otherwise it writes the bytes read back at the version read
 * (a fence: the tool's conditional write then fails) and only then aborts.
 * Until ZooKeeper answers, the part stays as it is (requests of M parked).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "alloc.h"
#include "handover.h"
#include "log.h"
#include "move.h"
#include "now.h"
#include "ops.h"
#include "server.h"
#include "slotmap.h"
#include "zeps_errors.h"

/* Log the map the primary took as a COMMIT of its own. */
static void log_taken(zp_server *s)
{
    size_t len = zp_slotmap_wire_size(s->slots);
    uint8_t *wire = zp_alloc(len);
    zp_slotmap_encode(s->slots, wire);
    Zeps__Header h;
    zeps__header__init(&h);
    h.version = ZP_PROTOCOL_VERSION;
    h.op = ZEPS__OP__MOVE;
    h.rank = 0xffffffffu;
    h.move_step = ZP_MOVE_COMMIT;
    zp_rlog_own(s, &h, wire, len);
    free(wire);
}

/* Take `map` (newer than the shard's; this call takes it) as the steps of
 * a move would. */
static void take(zp_server *s, zp_slotmap *map)
{
    zp_move *m = s->move;
    uint64_t epoch = zp_slotmap_epoch(map), dropped = 0;
    const char *how = "taken";
    if (m && m->role == ZP_MOVE_SOURCE && zp_slotmap_same(map, m->next)) {
        zp_slotmap_destroy(&map);
        dropped = zp_move_op_commit(s);
        how = "the move's commit (the source's part)";
    } else if (m && m->role == ZP_MOVE_TARGET && zp_slotmap_same(map, m->next)) {
        zp_slotmap_destroy(&s->slots);
        s->slots = map; /* the shard owns it */
        zp_handover_map_taken(s);
        how = "the move's commit (the target's part)";
    } else {
        if (m) /* another map won: this move never commits */
            zp_move_op_end_by_time(s);
        dropped = zp_move_drop_foreign(s, map);
        zp_slotmap_destroy(&s->slots);
        s->slots = map;                /* the shard owns it */
        zp_sparse_ops_refuse_moved(s); /* pulls held for rows it gave away */
    }
    zp_info("slot map of epoch %" PRIu64 " read from ZooKeeper: %s; %" PRIu64
            " rows of slots it gives away dropped",
            epoch, how, dropped);
    log_taken(s);
}

/* The node's bytes as a map with the shard's slot count, newer than the
 * shard's; NULL otherwise (said in the log when they are not a map). */
static zp_slotmap *newer(zp_server *s, const void *data, size_t len)
{
    zp_slotmap *map = NULL;
    char why[384];
    if (!len)
        return NULL;
    if (zp_slotmap_decode(&map, data, len, s->nshards, why, sizeof(why)) != 0) {
        zp_warn("the slot map node in ZooKeeper holds no map this shard can take (%s): ignored",
                why);
        return NULL;
    }
    if (zp_slotmap_epoch(map) <= zp_slotmap_epoch(s->slots) ||
        zp_slotmap_slots(map) != zp_slotmap_slots(s->slots))
        zp_slotmap_destroy(&map);
    return map;
}

static void on_map_late(uv_timer_t *t)
{
    zp_server *s = t->data;
    unsigned ms = s->map_late_ms;
    s->map_late_ms = 0; /* once */
    zp_zkmap_heard(s);
    s->map_late_ms = ms;
}

/* A test's fault hook (docs/testing.md): with ZEPS_FAULT_MAP_LATE_MS=<ms>
 * in its environment a move's target takes the map the node's watch
 * brought that many ms late, so its source takes it first. Returns
 * whether it deferred this one. */
static bool map_late(zp_server *s)
{
    if (!s->map_late_ms || !s->has_loop || !s->move || s->move->role != ZP_MOVE_TARGET)
        return false;
    if (!uv_is_active((uv_handle_t *)&s->map_late)) {
        zp_warn("fault injection: the map read from ZooKeeper taken %u ms late", s->map_late_ms);
        uv_timer_start(&s->map_late, on_map_late, s->map_late_ms, 0);
    }
    return true;
}

void zp_zkmap_heard(void *arg)
{
    zp_server *s = arg;
    if (!zp_role_serves(&s->role))
        return; /* a backup takes maps from its primary's log */
    if (map_late(s))
        return;
    zp_slotmap *map = newer(s, s->role.zkmap.map, s->role.zkmap.len);
    if (map)
        take(s, map);
}

static void fence(zp_server *s);

/* The fence's write landed (the tool's commit cannot now), or lost to a
 * newer version (read it again). */
static void fenced(void *arg, int rc, int32_t version)
{
    (void)version;
    zp_server *s = arg;
    zp_move *m = s->move;
    if (!m || !m->fencing)
        return; /* the move ended meanwhile (the tool's COMMIT, the watch) */
    m->fencing = false;
    if (!zp_role_serves(&s->role))
        return; /* demoted meanwhile: its part is the new primary's to judge */
    if (rc == 0)
        zp_move_op_end_by_time(s);
    else if (rc == ZEPS_ESTALE)
        fence(s);
    /* else unknown whether it landed: the next check asks again */
}

/* The node as it is now: the move's map (commit), or anything else (write
 * it back at its version, or this shard's map if there is no node). */
static void got(void *arg, int rc, const void *data, size_t len, int32_t version)
{
    zp_server *s = arg;
    zp_move *m = s->move;
    if (!m || !m->fencing)
        return;
    if (!zp_role_serves(&s->role)) {
        m->fencing = false; /* demoted meanwhile: its part is the new primary's to judge */
        return;
    }
    m->fencing = rc == 0;
    zp_slotmap *map = rc == 0 ? newer(s, data, len) : NULL;
    if (map && zp_slotmap_same(map, m->next)) {
        m->fencing = false;
        take(s, map);
        return;
    }
    zp_slotmap_destroy(&map);
    if (rc != 0)
        return; /* the next check asks again */
    uint8_t *mine = NULL;
    if (!len) { /* no node: the tool made none yet, and now cannot */
        len = zp_slotmap_wire_size(s->slots);
        data = mine = zp_alloc(len);
        zp_slotmap_encode(s->slots, mine);
    }
    m->fencing = zp_coord_slots_set(s->role.coord, data, len, version, fenced, s) == 0;
    free(mine);
}

static void fence(zp_server *s)
{
    s->move->fencing = zp_coord_slots_get(s->role.coord, got, s) == 0;
}

bool zp_zkmap_fence(zp_server *s)
{
    zp_move *m = s->move;
    if (!s->role.coord)
        return false;
    if (!m->fencing && m->fences++ == 0)
        zp_info("move of %u slots %s shard %d ends by time (%s): asking ZooKeeper whether its "
                "map of epoch %" PRIu64 " was committed before aborting",
                m->nmoving, m->role == ZP_MOVE_SOURCE ? "to" : "from", m->peer,
                zp_move_past_bound(s, zp_now_s()) ? "the cut-over's bound" : "the tool's lease",
                zp_slotmap_epoch(m->next));
    if (!m->fencing)
        fence(s);
    return true;
}
