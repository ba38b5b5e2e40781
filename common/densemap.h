/*
 * densemap.h - where the elements of a dense table live once ranges of it
 * moved: per table, pieces [lo, hi) covering [0, length), each with an
 * owner shard (docs/elastic.md, "Dense tables by range").
 *
 * A dense map is part of a slot map (slotmap.c holds one, or none) and
 * shares its epoch: it names only the tables a move has touched; a table
 * it does not name keeps its default pieces, the cluster file's S
 * slices. Tables are named by their declared name (table ids are each
 * shard's own) and carry their length, so a map is checked alone.
 *
 * A dense map is immutable once made: a change makes a new one. Any
 * thread may read a map no thread replaces.
 */
#ifndef ZP_DENSEMAP_H
#define ZP_DENSEMAP_H

#include <stddef.h>
#include <stdint.h>

#define ZP_DENSEMAP_NAME_MAX   63   /* bytes of a table name (a table's name[64]) */
#define ZP_DENSEMAP_PIECES_MAX 4096 /* pieces a table may be cut into */

typedef struct zp_densemap zp_densemap;

/* One piece: elements [lo, hi) of a table, on shard `owner`. */
typedef struct zp_dense_piece {
    uint64_t lo, hi;
    int owner;
} zp_dense_piece;

/* Free *dp (NULL allowed) and set it to NULL. */
void zp_densemap_destroy(zp_densemap **dp);

/* A copy of d (NULL gives NULL), the caller's. */
zp_densemap *zp_densemap_copy(const zp_densemap *d);

/* The pieces of table `name` of `length` elements: d's entry for it if
 * d names it with that length, else the default slices of `base` shards
 * (shard k: [floor(k*length/base), floor((k+1)*length/base)), empty ones
 * left out). Writes at most `max` pieces to out (NULL with max 0 to
 * count) and returns how many there are. d may be NULL. */
size_t zp_densemap_pieces(const zp_densemap *d, const char *name, uint64_t length, int base,
                          zp_dense_piece *out, size_t max);

/* The piece of table `name` holding element `at` (< length), into *out
 * (by zp_densemap_pieces' rules); returns its index among the pieces. */
size_t zp_densemap_find(const zp_densemap *d, const char *name, uint64_t length, int base,
                        uint64_t at, zp_dense_piece *out);

/* The tables d names (0 for NULL), and table i's name and length. */
size_t zp_densemap_count(const zp_densemap *d);
const char *zp_densemap_name(const zp_densemap *d, size_t i);
uint64_t zp_densemap_length(const zp_densemap *d, size_t i);

/* Whether d names table `name` (with any length). */
int zp_densemap_names(const zp_densemap *d, const char *name);

/* Elements of table `name` shard k holds. */
uint64_t zp_densemap_held(const zp_densemap *d, const char *name, uint64_t length, int base, int k);

/* The first shard d gives a piece of any table it names, among those
 * for which bad(k, arg) is non-zero; -1 if none. */
int zp_densemap_any_owner(const zp_densemap *d, int (*bad)(int k, const void *arg),
                          const void *arg);

/* A new dense map (the caller's): d with elements [lo, hi) of table
 * `name` (`length` elements) given to shard `to`, the pieces they cut cut
 * at lo and hi (each part keeps being a piece of its own). 0, or
 * ZEPS_EINVAL with a reason in err: a range empty or past the length, a
 * name empty or too long, d naming the table with another length, or
 * more than ZP_DENSEMAP_PIECES_MAX pieces. */
int zp_densemap_moved(const zp_densemap *d, const char *name, uint64_t length, int base,
                      uint64_t lo, uint64_t hi, int to, zp_densemap **out, char *err,
                      size_t errlen);

/* Whether a and b (either may be NULL: no entry) name the same tables
 * with the same pieces and owners. */
int zp_densemap_same(const zp_densemap *a, const zp_densemap *b);

/* The wire form (docs/protocol.md, "Slots and redirects"): u32 tables
 * (>= 1); per table, by ascending name, u16 name length, the name's
 * bytes, u64 length, u32 pieces, then per piece u64 lo and u16 owner. */
size_t zp_densemap_wire_size(const zp_densemap *d);
void zp_densemap_encode(const zp_densemap *d, unsigned char *p);

/* A dense map from exactly `len` bytes of its wire form, checked (names
 * 1..ZP_DENSEMAP_NAME_MAX bytes without NUL, ascending and distinct;
 * length >= 1; 1..ZP_DENSEMAP_PIECES_MAX pieces, the first at 0, each
 * next higher and below the length; owners below `nshards`). On success
 * *out is the caller's; ZEPS_EPROTO with a reason otherwise. */
int zp_densemap_decode(zp_densemap **out, const unsigned char *p, size_t len, int nshards,
                       char *err, size_t errlen);

#endif
