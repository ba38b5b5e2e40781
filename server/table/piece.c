/*
 * piece.c - a dense table's piece made like another of the same table:
 * the same declaration (optimizer, hyper-parameters, initializer, the lr
 * in force), another range (docs/elastic.md, "Dense tables by range").
 * A shard makes one when a map changes its pieces or a move brings one.
 */
#include "piece.h"
#include "table.h"

int zp_piece_like(zp_table **out, const zp_table *like, uint32_t id, uint64_t begin, uint64_t end,
                  char *err, size_t errlen)
{
    zp_snap_table st;
    zp_table_describe(like, &st);
    Zeps__TableSpec *spec;
    int rc = like->kind->snap_spec(&st, &spec, err, errlen);
    if (rc != 0)
        return rc;
    zp_table *t = NULL;
    rc = zp_table_new_piece(&t, id, spec, begin, end, like->nworkers, err, errlen);
    zeps__table_spec__free_unpacked(spec, NULL);
    if (rc == 0)
        rc = zp_table_set_lr(t, like->lr_now, err, errlen);
    if (rc != 0) {
        zp_table_destroy(&t);
        return rc;
    }
    *out = t;
    return 0;
}
