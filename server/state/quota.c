/*
 * quota.c - a shard's table, row and byte limits; see quota.h. The sums
 * walk the tables on each check: at most max_tables of them, and only
 * DECLARE and sparse requests ask.
 */
#include "quota.h"

#include <inttypes.h>
#include <stdbool.h>

#include "errors.h"
#include "memlimit.h"
#include "rows.h"
#include "table.h"
#include "zeps_errors.h"

/* A row record with its index entry and slab slack is never below this. */
#define MIN_ROW_BYTES 64

void zp_quota_init(zp_quota *l, const zp_config *cfg)
{
    *l = (zp_quota){.max_tables = (uint32_t)cfg->max_tables};
    l->memory = zp_memlimit_bytes(l->memory_from, sizeof(l->memory_from));
    l->max_bytes = cfg->max_memory_bytes ? cfg->max_memory_bytes : l->memory / 2;
    l->max_rows = cfg->max_rows ? cfg->max_rows : l->max_bytes / MIN_ROW_BYTES;
}

uint64_t zp_quota_bytes_held(zp_table *const *tables, uint32_t n)
{
    uint64_t b = 0;
    for (uint32_t i = 0; i < n; i++)
        b += zp_table_bytes(tables[i]);
    return b;
}

static uint64_t rows_of(const zp_table *t)
{
    if (!t->rows)
        return 0;
    zp_sparse_counters c;
    zp_sparse_get_counters(t->rows->store, &c);
    return c.rows;
}

uint64_t zp_quota_rows_held(zp_table *const *tables, uint32_t n)
{
    uint64_t r = 0;
    for (uint32_t i = 0; i < n; i++)
        r += rows_of(tables[i]);
    return r;
}

int zp_quota_check_table(zp_quota *l, zp_table *const *tables, uint32_t n, const char *name,
                         uint64_t bytes, int shard, char *err, size_t errlen)
{
    if (n >= l->max_tables) {
        l->full_refused++;
        return zp_errors_set(err, errlen, ZEPS_ENOMEM,
                             "shard %d holds %u tables, its limit (max_tables); table '%s' is "
                             "not created",
                             shard, n, name);
    }
    uint64_t held = zp_quota_bytes_held(tables, n);
    if (bytes > l->max_bytes || held > l->max_bytes - bytes) {
        l->full_refused++;
        return zp_errors_set(err, errlen, ZEPS_ENOMEM,
                             "table '%s' needs %" PRIu64 " bytes on shard %d, which holds %" PRIu64
                             " of its limit of %" PRIu64 " (max_memory_mb)",
                             name, bytes, shard, held, l->max_bytes);
    }
    return ZEPS_OK;
}

uint64_t zp_quota_new_rows(const zp_table *t, const uint64_t *ids, size_t count)
{
    uint64_t fresh = 0;
    zp_sparse_row row;
    for (size_t i = 0; i < count; i++)
        fresh += !zp_sparse_get(t->rows->store, ids[i], &row);
    return fresh;
}

/* The rows t may still grow by under its own bound (capacity_rows,
 * memory_budget: past it, it evicts); UINT64_MAX without one. */
static uint64_t own_room(const zp_table *t, const zp_sparse_counters *c)
{
    const Zeps__TableSpec *sp = t->rows->spec;
    uint64_t room = UINT64_MAX;
    if (sp->capacity_rows)
        room = sp->capacity_rows > c->rows ? sp->capacity_rows - c->rows : 0;
    if (sp->memory_budget && c->bytes_per_row) {
        uint64_t b = sp->memory_budget > c->bytes ? sp->memory_budget - c->bytes : 0;
        if (b / c->bytes_per_row < room)
            room = b / c->bytes_per_row;
    }
    return room;
}

/* Whether `rows` new rows of t fit; fills *grow, *rows_held, *bytes_held
 * and *bytes for the message. */
static bool rows_fit(const zp_quota *l, zp_table *const *tables, uint32_t n, const zp_table *t,
                     uint64_t rows, uint64_t out[4])
{
    zp_sparse_counters c;
    zp_sparse_get_counters(t->rows->store, &c);
    uint64_t room = own_room(t, &c);
    uint64_t grow = rows < room ? rows : room;
    out[0] = grow;
    if (grow == 0)
        return true;
    uint64_t rows_held = zp_quota_rows_held(tables, n);
    uint64_t bytes_held = zp_quota_bytes_held(tables, n);
    uint64_t per_row = c.bytes_per_row + 16; /* + its index entry */
    uint64_t bytes = grow > UINT64_MAX / per_row ? UINT64_MAX : grow * per_row;
    out[1] = bytes;
    out[2] = rows_held;
    out[3] = bytes_held;
    return grow <= l->max_rows - (rows_held < l->max_rows ? rows_held : l->max_rows) &&
           bytes_held <= l->max_bytes && bytes <= l->max_bytes - bytes_held;
}

bool zp_quota_room_for(const zp_quota *l, zp_table *const *tables, uint32_t n, const zp_table *t,
                       uint64_t rows)
{
    uint64_t out[4];
    return rows_fit(l, tables, n, t, rows, out);
}

int zp_quota_check_rows(zp_quota *l, zp_table *const *tables, uint32_t n, const zp_table *t,
                        uint64_t rows, int shard, char *err, size_t errlen)
{
    uint64_t out[4];
    if (rows_fit(l, tables, n, t, rows, out))
        return ZEPS_OK;
    l->full_refused++;
    return zp_errors_set(err, errlen, ZEPS_ENOMEM,
                         "shard %d is full: %" PRIu64 " new rows of table '%s' (%" PRIu64
                         " bytes) do not fit beside %" PRIu64 " rows and %" PRIu64
                         " bytes held (limits: max_rows %" PRIu64 ", max_memory_mb %" PRIu64
                         " bytes); nothing was created. Bound the table (capacity_rows, "
                         "memory_budget, ttl_clocks) or raise the limits",
                         shard, out[0], t->name, out[1], out[2], out[3], l->max_rows, l->max_bytes);
}
