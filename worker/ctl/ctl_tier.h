/*
 * ctl_tier.h - what `zepsctl stats` shows of a sparse table's cold tier
 * (docs/sparse.md, "Cold tier"): a line of text, or the JSON fields.
 */
#ifndef ZP_CTL_TIER_H
#define ZP_CTL_TIER_H

#include "zeps.pb-c.h"

/* Touches of a tiered table's rows found hot, of all that found a row
 * (hot or cold); 1 when none did. */
double zp_ctl_tier_hit_rate(const Zeps__TableStats *t);

/* One indented line of text; the JSON fields, each after ", ". */
void zp_ctl_tier_print(const Zeps__TableStats *t);
void zp_ctl_tier_json(const Zeps__TableStats *t);

#endif
