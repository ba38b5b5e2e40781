/*
 * leave.c - the clean exit of a replicated primary; see leave.h. The
 * coordination session must outlive the snapshot and the record's write,
 * and a coord callback must not end it: the record's answer restarts a
 * timer at 0, whose callback ends the session; the same timer, started at
 * the session timeout, ends it if no answer comes (nothing waits for
 * ever).
 */
#include "leave.h"

#include <inttypes.h>
#include <stdio.h>

#include "coord.h"
#include "log.h"
#include "persist.h"
#include "server.h"

static void on_timer_closed(uv_handle_t *h)
{
    (void)h; /* embedded in the server, which outlives its loop */
}

static void on_timer(uv_timer_t *t)
{
    zp_server *s = t->data;
    zp_role_stop(&s->role); /* the primary's nodes go: its record stays */
    uv_close((uv_handle_t *)t, on_timer_closed);
}

static void on_recorded(void *arg, int rc)
{
    zp_server *s = arg;
    (void)rc; /* logged by the coordination layer */
    uv_timer_start(&s->leave.timer, on_timer, 0, 0);
}

bool zp_leave_start(zp_server *s)
{
    if (!s->leave.signalled || s->cfg.replicas <= 1 || !s->role.coord ||
        !zp_role_serves(&s->role) || !s->cfg.snapshot_dir[0] || !s->cfg.snapshot_on_exit)
        return false;
    s->leave.final_done = true;
    s->leave.final_rc = zp_persist_final(s); /* requests stopped: it holds every ack */
    if (s->leave.final_rc != 0 || !s->persist.final.written)
        return false;
    char name[ZP_COORD_SNAP_MAX];
    zp_coord_snapshot_name(name, sizeof(name), s->persist.final.setid, s->incarnation,
                           s->persist.final.created_ns);
    uv_timer_init(&s->loop, &s->leave.timer);
    s->leave.timer.data = s;
    if (zp_role_leave(&s->role, name, on_recorded, s) != 0) {
        zp_warn("clean-exit record not written (no session, or no longer primary): a restart of "
                "every replica will wait for a replica of the in-sync set");
        uv_close((uv_handle_t *)&s->leave.timer, on_timer_closed);
        return false;
    }
    zp_info("final snapshot %s written: recording the clean exit at epoch %" PRIu64, name,
            s->role.epoch);
    int bound = s->cfg.coord_session_timeout_ms > 0 ? s->cfg.coord_session_timeout_ms : 6000;
    uv_timer_start(&s->leave.timer, on_timer, (uint64_t)bound, 0);
    return true;
}
