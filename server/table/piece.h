/*
 * piece.h - a dense table's piece made like another of the same table
 * (piece.c; docs/elastic.md, "Dense tables by range").
 */
#ifndef ZP_PIECE_H
#define ZP_PIECE_H

#include <stddef.h>
#include <stdint.h>

#include "table.h"

/* A piece [begin, end) of the dense table `like` is a piece of, as table
 * `id`: its declaration and lr in force, initialized. *out owns it on
 * success; an error with a reason in err otherwise. Any thread that owns
 * `like`. */
int zp_piece_like(zp_table **out, const zp_table *like, uint32_t id, uint64_t begin, uint64_t end,
                  char *err, size_t errlen);

#endif
