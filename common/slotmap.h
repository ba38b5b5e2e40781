/*
 * slotmap.h - where a sparse row lives: hash slots and the versioned map
 * from slot to shard (docs/elastic.md).
 *
 * Row `id` of every sparse table is in slot XXH3(id) mod N (the shard seed
 * of sparse_hash.h) and lives on the shard the map names for that slot.
 * The map carries an epoch that only grows: a shard answers a request for
 * a slot it does not own with EMOVED, the owner and its map, and a client
 * takes a map whose epoch is newer than its own.
 *
 * The default map of S shards (epoch 0) has N = S * floor(4096 / S) slots,
 * slot n on shard n mod S. Since S divides N, (h mod N) mod S = h mod S:
 * every id lives where `hash mod S` put it before slots existed, so
 * snapshot sets, offline reshards and clients that place ids by
 * `hash mod S` agree with it. A map read from a file (cluster.slot_map)
 * may name any owner for any slot.
 *
 * A map also lists the shards beyond the cluster file's `servers` (its
 * "base" shards): shards joined at run time (`zepsctl shards add`), each
 * with its endpoint, so that a client learns where a shard it never heard
 * of listens from the map that names it. A map of the base shards only
 * travels exactly as before (no endpoint list).
 *
 * A map is immutable once made: a newer one replaces it whole. Any thread
 * may read a map no thread replaces.
 */
#ifndef ZP_SLOTMAP_H
#define ZP_SLOTMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "densemap.h"

#define ZP_SLOTS_DEFAULT      4096 /* the default map's slots are the largest multiple of S up to it */
#define ZP_SLOTS_MAX          16384 /* a map file may name at most this many */
#define ZP_SLOTMAP_WIRE_HDR   16    /* u64 epoch, u32 slots, u32 shards; then u16 owners */
#define ZP_SLOTMAP_SHARDS_MAX 256   /* shards a map may name, those joined at run time included */
#define ZP_SLOTMAP_EP_MAX     256   /* bytes of a joined shard's endpoint, its NUL included */

typedef struct zp_slotmap zp_slotmap;

/* The default map of `nshards` (1..ZP_SLOTS_DEFAULT) into *out (the
 * caller's, freed with zp_slotmap_destroy). 0 or ZEPS_EINVAL. */
int zp_slotmap_new_default(zp_slotmap **out, int nshards);

/* A map from its text (docs/elastic.md, "The map file"): `epoch E` (>= 1),
 * `slots N` (1..ZP_SLOTS_MAX), then `LO-HI SHARD` or `SLOT SHARD` lines
 * that cover every slot exactly once with shards 0..nshards-1; `#`
 * starts a comment. On success *out is the caller's; on error *out is
 * untouched and err names the line. ZEPS_ECONFIG on a bad text. */
int zp_slotmap_parse(zp_slotmap **out, const char *text, size_t len, int nshards, char *err,
                     size_t errlen);

/* The same from the file at `path` (ZEPS_ECONFIG also when unreadable). */
int zp_slotmap_load(zp_slotmap **out, const char *path, int nshards, char *err, size_t errlen);

/* A shard's map at start: the file `path` names (cluster.slot_map), or the
 * default map when path is "". As zp_slotmap_load. */
int zp_slotmap_start(zp_slotmap **out, const char *path, int nshards, char *err, size_t errlen);

/* Free *mp (NULL allowed) and set it to NULL. */
void zp_slotmap_destroy(zp_slotmap **mp);

/* The map's epoch (0: the default map), slot count, shard count (the
 * joined ones included), and base shards (the cluster file's). */
uint64_t zp_slotmap_epoch(const zp_slotmap *m);
uint32_t zp_slotmap_slots(const zp_slotmap *m);
int zp_slotmap_shards(const zp_slotmap *m);
int zp_slotmap_base(const zp_slotmap *m);

/* The endpoint of joined shard k (base <= k < shards), the map's; NULL
 * for a base shard (its endpoint is the cluster file's). */
const char *zp_slotmap_endpoint(const zp_slotmap *m, int k);

/* The map at m's epoch + 1 with one more shard (index: m's shard count),
 * joined at `endpoint` and owning no slot, into *out (the caller's).
 * 0, or ZEPS_EINVAL with a reason in err (an endpoint empty, too long or
 * already in the map's list, or ZP_SLOTMAP_SHARDS_MAX shards already). */
int zp_slotmap_joined(const zp_slotmap *m, const char *endpoint, zp_slotmap **out, char *err,
                      size_t errlen);

/* Whether the map retires shard k: a shard removed for good (zepsctl
 * shards retire), which owns no slot, never gets one again and need not
 * run (docs/elastic.md, "Retiring a removed shard"). */
bool zp_slotmap_retired(const zp_slotmap *m, int k);

/* The map at m's epoch + 1 with shard k retired, into *out (the
 * caller's). 0, or ZEPS_EINVAL with a reason in err: k is shard 0 (which
 * keeps the cluster's BARRIER), not a shard of the map, retired already,
 * or owns a slot. */
int zp_slotmap_retire(const zp_slotmap *m, int k, zp_slotmap **out, char *err, size_t errlen);

/* The first shard `have` retires and `next` does not (a map never
 * forgets a retirement), or -1. */
int zp_slotmap_unretires(const zp_slotmap *have, const zp_slotmap *next);

/* The slot of `id`, and the shard that owns it. */
uint32_t zp_slotmap_slot_of(const zp_slotmap *m, uint64_t id);
int zp_slotmap_owner(const zp_slotmap *m, uint64_t id);

/* The owner of slot `slot` (< zp_slotmap_slots). */
int zp_slotmap_slot_owner(const zp_slotmap *m, uint32_t slot);

/* Slots shard k owns. */
uint32_t zp_slotmap_count(const zp_slotmap *m, int k);

/* The map as it travels (the payload of an EMOVED reply, docs/protocol.md):
 * ZP_SLOTMAP_WIRE_HDR + 2 * slots bytes, little-endian; a map with joined
 * or retired shards then lists the joined ones: u32 base, and per joined
 * shard a u16 length and its endpoint's bytes (no NUL); a map with retired
 * shards or dense pieces then lists the retired ones: u32 count (0 only
 * before dense pieces), and a u16 index each, ascending; a map with dense
 * pieces then has its dense list (densemap.h). A map without dense pieces
 * travels exactly as before they existed. */
size_t zp_slotmap_wire_size(const zp_slotmap *m);
void zp_slotmap_encode(const zp_slotmap *m, void *buf);

/* Whether a and b are the same map: the same wire form. */
bool zp_slotmap_same(const zp_slotmap *a, const zp_slotmap *b);

/* A map from its wire form, checked: the length, a slot count in
 * 1..ZP_SLOTS_MAX, `nshards` base shards (the cluster file's), joined
 * shards only with their endpoints, every owner below the shard count and
 * not retired, retired shards listed once each, never shard 0. On
 * success *out is the caller's; ZEPS_EPROTO with a reason otherwise. */
int zp_slotmap_decode(zp_slotmap **out, const void *buf, size_t len, int nshards, char *err,
                      size_t errlen);

/* The map at m's epoch + 1 with every slot k where which[k] != 0 given
 * to shard `to` (< m's shards, not retired), the others (and the joined
 * and retired shards) as in m, into *out (the caller's). 0 or
 * ZEPS_EINVAL. */
int zp_slotmap_moved(const zp_slotmap *m, const uint8_t *which, int to, zp_slotmap **out);

/* Dense tables by range (docs/elastic.md, "Dense tables by range"): the
 * map's dense list (NULL: none, every table on its default slices). */
const zp_densemap *zp_slotmap_dense(const zp_slotmap *m);

/* The pieces of dense table `name` of `length` elements under m (its
 * entry, else the default slices of m's base shards): at most `max` into
 * out; returns how many there are (zp_densemap_pieces). */
size_t zp_slotmap_dense_pieces(const zp_slotmap *m, const char *name, uint64_t length,
                               zp_dense_piece *out, size_t max);

/* The piece holding element `at` (< length) into *out; its index. */
size_t zp_slotmap_dense_find(const zp_slotmap *m, const char *name, uint64_t length, uint64_t at,
                             zp_dense_piece *out);

/* The map at m's epoch + 1 with elements [lo, hi) of dense table `name`
 * given to shard `to` (a shard of m, not retired), the pieces they cut
 * cut there, the slots and the rest as in m, into *out (the caller's).
 * 0, or ZEPS_EINVAL with a reason in err (zp_densemap_moved's). */
int zp_slotmap_dense_moved(const zp_slotmap *m, const char *name, uint64_t length, uint64_t lo,
                           uint64_t hi, int to, zp_slotmap **out, char *err, size_t errlen);

/* A slot set from its text, `LO-HI` or `SLOT` items separated by commas
 * ("0-99,512,1000-1023"), each inside [0, slots): which[0..slots) is set to
 * 1 for the slots named, 0 for the others; returns the slots named, or -1
 * with a reason in err (ZEPS_EINVAL's). */
int64_t zp_slotmap_parse_set(const char *text, uint32_t slots, uint8_t *which, char *err,
                             size_t errlen);

#endif
