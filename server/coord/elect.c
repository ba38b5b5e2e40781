/*
 * elect.c - who should be primary; see elect.h. Kept apart from the
 * backend so the rule is read (and tested) in one place.
 */
#include "elect.h"

#include <stdio.h>
#include <string.h>

bool zp_elect_in_isr(const zp_znode_isr *isr, const char *member)
{
    for (int i = 0; i < isr->n; i++)
        if (zp_znode_same_process(isr->m[i], member))
            return true;
    return false;
}

int zp_elect_pick(const char *const *live, int nlive, const zp_znode_isr *isr)
{
    int best = -1;
    int64_t best_seq = 0;
    for (int i = 0; i < nlive; i++) {
        int64_t seq = zp_znode_seq(live[i]);
        if (seq < 0 || (isr->n > 0 && !zp_elect_in_isr(isr, live[i])))
            continue;
        if (best < 0 || seq < best_seq) {
            best = i;
            best_seq = seq;
        }
    }
    return best;
}

/* The live node of member m's process, or NULL if it has none. */
static const char *live_node(const char *const *live, int nlive, const char *m)
{
    for (int i = 0; i < nlive; i++)
        if (zp_znode_same_process(live[i], m))
            return live[i];
    return NULL;
}

void zp_elect_next_isr(zp_znode_isr *next, const zp_znode_isr *old, const char *const *live,
                       int nlive, const char *me, uint64_t epoch)
{
    memset(next, 0, sizeof(*next));
    next->epoch = epoch;
    snprintf(next->m[next->n++], ZP_COORD_MEMBER_MAX, "%s", me);
    for (int i = 0; i < old->n && next->n < ZP_COORD_ISR_MAX; i++) {
        const char *node = live_node(live, nlive, old->m[i]);
        if (node && !zp_znode_same_process(node, me))
            snprintf(next->m[next->n++], ZP_COORD_MEMBER_MAX, "%s", node);
    }
}

int zp_elect_pick_clean(const char *const *live, const char *const *restored, int nlive,
                        const zp_znode_clean *clean, uint64_t epoch, zp_elect_clean_why *why)
{
    *why = !clean                  ? ZP_ELECT_CLEAN_NONE
           : clean->epoch != epoch ? ZP_ELECT_CLEAN_VOID
                                   : ZP_ELECT_CLEAN_NO_MATCH;
    if (*why != ZP_ELECT_CLEAN_NO_MATCH)
        return -1;
    int best = -1;
    int64_t best_seq = 0;
    for (int i = 0; i < nlive; i++) {
        int64_t seq = zp_znode_seq(live[i]);
        if (seq < 0 || strcmp(restored[i], clean->snapshot) != 0)
            continue;
        if (best < 0 || seq < best_seq) {
            best = i;
            best_seq = seq;
        }
    }
    if (best >= 0)
        *why = ZP_ELECT_CLEAN_OK;
    return best;
}
