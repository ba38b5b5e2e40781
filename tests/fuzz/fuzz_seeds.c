/*
 * fuzz_seeds.c - writes the seed corpus of the fuzz targets
 * (tests/fuzz/corpus/<target>/) from real messages, payloads and files:
 *
 *   fuzz_seeds OUTDIR
 *
 * server: message sequences a worker sends (pull, push, compressed push
 * and pull, sparse pull and push, scan and put, clock, barrier, stats,
 * declare, bye, snapshot, rollback) in each mode, against the shard of fuzz_shard.h;
 * client: the correct reply to each request kind of fuzz_client.c, and the
 * ERESTARTED, PARKED and ERROR answers; codec: each codec's encoding of a
 * vector; snapshot: files and a MANIFEST that an in-process shard wrote
 * (zp_persist_final). The cluster-file seeds are the example files in
 * deploy/ (make_corpus.sh copies them). Seeds use fuzz_input.h's layout.
 */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "codec.h"
#include "fuzz_input.h"
#include "fuzz_shard.h"
#include "log.h"
#include "persist.h"
#include "snapshot.h"
#include "zeps_errors.h"

#define CAP 60000

typedef struct seed {
    uint8_t b[CAP];
    size_t n;
} seed;

static const char *outdir;

static void seed_save(const char *target, const char *name, const seed *s)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", outdir, target);
    mkdir(path, 0755);
    snprintf(path, sizeof(path), "%s/%s/%s", outdir, target, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(s->b, 1, s->n, f) != s->n || fclose(f) != 0) {
        perror(path);
        exit(1);
    }
}

static Zeps__Header hdr(int op, uint32_t rank, uint64_t seq)
{
    Zeps__Header h;
    zeps__header__init(&h);
    h.version = ZP_PROTOCOL_VERSION;
    h.op = op;
    h.rank = rank;
    h.incarnation = rank + 100;
    h.req_id = seq;
    h.seq = seq;
    return h;
}

/* Append a server message: control byte, header, up to two payloads. */
static void msg(seed *s, uint32_t rank, const Zeps__Header *h, const void *p1, size_t l1,
                const void *p2, size_t l2)
{
    uint8_t hb[1024];
    size_t hl = zeps__header__pack(h, hb);
    int extra = p2 ? 2 : p1 ? 1 : 0;
    zf_put_byte(s->b, CAP, &s->n, (uint8_t)(rank | (extra << 3)));
    zf_put_frame(s->b, CAP, &s->n, hb, hl);
    if (p1)
        zf_put_frame(s->b, CAP, &s->n, p1, l1);
    if (p2)
        zf_put_frame(s->b, CAP, &s->n, p2, l2);
}

static float ones[64] = {[0 ... 63] = 0.5f};

/* Append a server message as a packet of an attach connection (control
 * bit 7): the prelude of common/bell.h, the header, the payload if any. */
static void packet(seed *s, uint32_t rank, const Zeps__Header *h, const void *p, size_t l)
{
    uint8_t b[1024 + 12 + 64 * sizeof(float)];
    uint32_t hl = (uint32_t)zeps__header__pack(h, b + 12);
    uint32_t pre[3] = {ZP_BELL_MAGIC, ZP_BELL_MESSAGE | ((p ? 2u : 1u) << 16), hl};
    memcpy(b, pre, 12);
    if (p)
        memcpy(b + 12 + hl, p, l);
    zf_put_byte(s->b, CAP, &s->n, (uint8_t)(rank | 0x80));
    zf_put_frame(s->b, CAP, &s->n, b, 12 + hl + (p ? l : 0));
}

/* A worker's HELLO, pull, push and CLOCK as packets of its attach
 * connection, then a packet that is not a message. */
static void server_packets(uint8_t shape, const char *name)
{
    seed s = {.n = 0};
    zf_put_byte(s.b, CAP, &s.n, shape);
    uint64_t seq = 5;
    Zeps__Header h = hdr(ZEPS__OP__HELLO, 0, seq++);
    packet(&s, 0, &h, NULL, 0);
    h = hdr(ZEPS__OP__PULL, 0, seq++);
    h.count = 64;
    packet(&s, 0, &h, NULL, 0);
    h = hdr(ZEPS__OP__PUSH, 0, seq++);
    h.count = 64;
    packet(&s, 0, &h, ones, sizeof(ones));
    h = hdr(ZEPS__OP__CLOCK, 0, seq++);
    packet(&s, 0, &h, NULL, 0);
    zf_put_byte(s.b, CAP, &s.n, 0x80);
    zf_put_frame(s.b, CAP, &s.n, "ZPBL", 4);
    seed_save("server", name, &s);
}

/* Dense pull, push, pull, clock and stats from each worker of `shape`. */
static void server_dense(uint8_t shape, const char *name)
{
    seed s = {.n = 0};
    zf_put_byte(s.b, CAP, &s.n, shape);
    int nw = 1 + (shape >> 2) % 3;
    uint64_t n = (shape & 0x10) ? 32 : 64;
    for (int r = 0; r < nw; r++) {
        uint64_t seq = r == 0 ? 5 : 2;
        Zeps__Header h = hdr(ZEPS__OP__PULL, r, seq++);
        h.count = n;
        msg(&s, r, &h, NULL, 0, NULL, 0);
        h = hdr(ZEPS__OP__PUSH, r, seq++);
        h.count = n;
        h.flags = r & 1 ? ZP_FLAG_CLOCK : 0;
        msg(&s, r, &h, ones, n * sizeof(float), NULL, 0);
        h = hdr(ZEPS__OP__CLOCK, r, seq++);
        msg(&s, r, &h, NULL, 0, NULL, 0);
        h = hdr(ZEPS__OP__PULL, r, seq++);
        h.count = n;
        h.clock = 1;
        msg(&s, r, &h, NULL, 0, NULL, 0);
        h = hdr(ZEPS__OP__BARRIER, r, seq++);
        msg(&s, r, &h, NULL, 0, NULL, 0);
    }
    Zeps__Header h = hdr(ZEPS__OP__STATS, 0, 0);
    msg(&s, 0, &h, NULL, 0, NULL, 0);
    seed_save("server", name, &s);
}

/* bsp entries of a primary's log, applied as a backup applies them
 * (control bit 6): a round entry of both workers' pushes of table 0 (the
 * second closing the round, with its sum) and a CLOCK among them, then
 * worker 1 declared lost. */
static void server_round_entry(uint8_t shape, const char *name)
{
    seed s = {.n = 0};
    zf_put_byte(s.b, CAP, &s.n, shape);
    uint64_t n = (shape & 0x10) ? 32 : 64;
    uint8_t items[512];
    size_t at = 0;
    for (uint32_t r = 0; r < 3; r++) { /* rank 0's push, rank 0's CLOCK, rank 1's push */
        Zeps__Header h = hdr(r == 1 ? ZEPS__OP__CLOCK : ZEPS__OP__PUSH, r / 2, 2 + r);
        if (r != 1)
            h.count = n;
        uint8_t hb[256];
        uint32_t hl = (uint32_t)zeps__header__pack(&h, hb), closes = r == 2;
        uint64_t wire = r == 1 ? 0 : n * sizeof(float), sum_at = 0;
        memcpy(items + at, &hl, 4);
        memcpy(items + at + 4, &closes, 4);
        memcpy(items + at + 8, &wire, 8);
        memcpy(items + at + 16, &sum_at, 8);
        memcpy(items + at + 24, hb, hl);
        at += 24 + hl;
    }
    Zeps__Header h = hdr(ZEPS__OP__PUSH, 0, 0);
    h.flags = ZP_FLAG_ROUND;
    h.count = 3;
    uint8_t hb[256];
    size_t hl = zeps__header__pack(&h, hb);
    zf_put_byte(s.b, CAP, &s.n, 0x40); /* 1 + (0x40 >> 3) % 3: three frames */
    zf_put_frame(s.b, CAP, &s.n, hb, hl);
    zf_put_frame(s.b, CAP, &s.n, items, at);
    zf_put_frame(s.b, CAP, &s.n, ones, n * sizeof(float));
    h = hdr(ZEPS__OP__CLOCK, 1, 0);
    h.flags = ZP_FLAG_LOST;
    hl = zeps__header__pack(&h, hb);
    zf_put_byte(s.b, CAP, &s.n, 0x48); /* one frame */
    zf_put_frame(s.b, CAP, &s.n, hb, hl);
    seed_save("server", name, &s);
}

/* A bsp round entry of sparse pushes (two workers: shape 0x04): each
 * rank's push of three rows of "emb" without its rows, each rank's CLOCK,
 * the last carrying the round's merge after the items (repl/rbatch.h). */
static void server_sparse_round_entry(uint8_t shape, const char *name)
{
    seed s = {.n = 0};
    zf_put_byte(s.b, CAP, &s.n, shape);
    uint8_t items[1024];
    size_t at = 0;
    for (uint32_t k = 0; k < 4; k++) {               /* pushes of ranks 0, 1, then their CLOCKs */
        uint32_t r = k % 2, rows = k == 3 ? 2u : 0u; /* flags: bit 1, it closed sparse rounds */
        Zeps__Header h =
            hdr(k < 2 ? ZEPS__OP__PUSH : ZEPS__OP__CLOCK, r, r ? 2 + k / 2 : 5 + k / 2);
        if (k < 2) {
            h.table = 2;
            h.count = 3;
            h.flags = ZP_FLAG_ROW_VERSIONS;
        }
        uint8_t hb[256];
        uint32_t hl = (uint32_t)zeps__header__pack(&h, hb);
        uint64_t wire = k < 2 ? 3 * (8 + 4 * 4 + 4) : 0, zero = 0;
        memcpy(items + at, &hl, 4);
        memcpy(items + at + 4, &rows, 4);
        memcpy(items + at + 8, &wire, 8);
        memcpy(items + at + 16, &zero, 8);
        at += 24;
        if (rows) { /* its merges start at byte 0 of the rows */
            memcpy(items + at, &zero, 8);
            at += 8;
        }
        memcpy(items + at, hb, hl);
        at += hl;
    }
    size_t rows_at = zp_rbatch_rows_start(at);
    memset(items + at, 0, rows_at - at);
    zp_rbatch_buf merge = {0};
    uint64_t ids[3] = {1, 2, 3};
    uint32_t vers[3] = {0, 0, 0};
    zp_rbatch_rows_put(&merge, 2, 0, ids, 3, ones, 4, vers);
    uint32_t count = merge.nrec, pad = 0;
    memcpy(items + rows_at, &count, 4);
    memcpy(items + rows_at + 4, &pad, 4);
    memcpy(items + rows_at + 8, merge.p, merge.len);
    at = rows_at + 8 + merge.len;
    free(merge.p);
    Zeps__Header h = hdr(ZEPS__OP__PUSH, 0, 0);
    h.flags = ZP_FLAG_ROUND;
    h.count = 4;
    uint8_t hb[256];
    size_t hl = zeps__header__pack(&h, hb);
    zf_put_byte(s.b, CAP, &s.n, 0x40); /* 1 + (0x40 >> 3) % 3: three frames */
    zf_put_frame(s.b, CAP, &s.n, hb, hl);
    zf_put_frame(s.b, CAP, &s.n, items, at);
    zf_put_frame(s.b, CAP, &s.n, ones, 0); /* no dense sums */
    seed_save("server", name, &s);
}

/* Sparse pull and push (with row versions) of three ids: a push is one
 * frame of the ids, the gradients and (ZP_FLAG_ROW_VERSIONS) the versions. */
static void server_sparse(uint8_t shape, const char *name)
{
    seed s = {.n = 0};
    zf_put_byte(s.b, CAP, &s.n, shape);
    uint64_t ids[3] = {1, 2, 3};
    uint8_t push[sizeof(ids) + 15 * sizeof(float)] = {0}; /* u32 versions 0 */
    memcpy(push, ids, sizeof(ids));
    memcpy(push + sizeof(ids), ones, 12 * sizeof(float));
    Zeps__Header h = hdr(ZEPS__OP__PULL, 0, 5);
    h.table = 2;
    h.count = 3;
    msg(&s, 0, &h, ids, sizeof(ids), NULL, 0);
    h = hdr(ZEPS__OP__PUSH, 0, 6);
    h.table = 2;
    h.count = 3;
    msg(&s, 0, &h, push, sizeof(ids) + 12 * sizeof(float), NULL, 0);
    h = hdr(ZEPS__OP__PUSH, 0, 7);
    h.table = 2;
    h.count = 3;
    h.flags = ZP_FLAG_ROW_VERSIONS | ZP_FLAG_CLOCK;
    msg(&s, 0, &h, push, sizeof(push), NULL, 0);
    h = hdr(ZEPS__OP__PULL, 0, 8);
    h.table = 2;
    h.count = 3;
    h.clock = 1;
    msg(&s, 0, &h, ids, sizeof(ids), NULL, 0);
    seed_save("server", name, &s);
}

/* Compressed pushes (int8, top-k) and a compressed pull of table "a". */
static void server_codecs(uint8_t shape, const char *name)
{
    seed s = {.n = 0};
    zf_put_byte(s.b, CAP, &s.n, shape);
    uint8_t payload[1024];
    zp_codec_params p;
    zp_codec_params_init(&p);
    p.count = 4;
    const zp_codec_ops *codecs[2] = {&zp_int8_ops, &zp_sparsify_topk_ops};
    for (int i = 0; i < 2; i++) {
        size_t len = codecs[i]->encode(ones, 32, &p, 1, payload);
        Zeps__Header h = hdr(ZEPS__OP__PUSH, 0, 5 + (uint64_t)i);
        h.table = 1;
        h.count = 32;
        h.codec = codecs[i]->id;
        h.codec_count = 4;
        msg(&s, 0, &h, payload, len, NULL, 0);
    }
    for (int i = 0; i < 2; i++) {
        Zeps__Header h = hdr(ZEPS__OP__PULL, 0, 7 + (uint64_t)i);
        h.table = 1;
        h.count = 32;
        h.flags = ZP_FLAG_PULL_DELTA;
        h.codec = ZP_CODEC_INT8;
        h.view_id = (uint64_t)i;
        msg(&s, 0, &h, NULL, 0, NULL, 0);
    }
    seed_save("server", name, &s);
}

/* SCAN and PUT of the sparse table "emb" (adagrad: 1 state float per
 * value, records of 24 + 4 x 4 x 2 bytes) and the dense table "a" (adam:
 * values then 2 state blocks). */
static void server_scan(uint8_t shape, const char *name)
{
    seed s = {.n = 0};
    zf_put_byte(s.b, CAP, &s.n, shape);
    uint8_t recs[2 * 56] = {0};
    for (int i = 0; i < 2; i++) {
        uint64_t id = (uint64_t)i + 1;
        uint32_t version = 3, touches = 1;
        memcpy(recs + i * 56, &id, 8);
        memcpy(recs + i * 56 + 8, &version, 4);
        memcpy(recs + i * 56 + 12, &touches, 4);
        memcpy(recs + i * 56 + 24, ones, 8 * sizeof(float));
    }
    Zeps__Header h = hdr(ZEPS__OP__SCAN, 0, 5);
    h.table = 2;
    h.count = 10;
    msg(&s, 0, &h, NULL, 0, NULL, 0);
    h = hdr(ZEPS__OP__PUT, 0, 6);
    h.table = 2;
    h.count = 2;
    h.state_per_value = 1;
    msg(&s, 0, &h, recs, sizeof(recs), NULL, 0);
    h = hdr(ZEPS__OP__SCAN, 0, 7);
    h.table = 2;
    h.offset = 1;
    h.count = 1;
    msg(&s, 0, &h, NULL, 0, NULL, 0);
    h = hdr(ZEPS__OP__PUT, 0, 8);
    h.table = 1;
    h.count = 8;
    h.state_per_value = 2;
    h.data_version = 4;
    msg(&s, 0, &h, ones, 24 * sizeof(float), NULL, 0);
    h = hdr(ZEPS__OP__SCAN, 0, 9);
    h.table = 1;
    h.count = 16;
    msg(&s, 0, &h, NULL, 0, NULL, 0);
    seed_save("server", name, &s);
}

/* Declarations (a new table, a conflicting one), snapshot, rollback, bye. */
static void server_admin(uint8_t shape, const char *name)
{
    seed s = {.n = 0};
    zf_put_byte(s.b, CAP, &s.n, shape);
    Zeps__TableSpec spec;
    zeps__table_spec__init(&spec);
    spec.name = "x";
    spec.length = 10;
    spec.optimizer = "momentum";
    spec.lr = 0.1;
    spec.has_staleness = 1;
    spec.staleness = 2;
    Zeps__Header h = hdr(ZEPS__OP__DECLARE, 0, 5);
    h.spec = &spec;
    msg(&s, 0, &h, NULL, 0, NULL, 0);
    spec.length = 11;
    h = hdr(ZEPS__OP__DECLARE, 0, 6);
    h.spec = &spec;
    msg(&s, 0, &h, NULL, 0, NULL, 0);
    h = hdr(ZEPS__OP__SNAPSHOT, 0, 7);
    h.clock = 1;
    msg(&s, 0, &h, NULL, 0, NULL, 0);
    h = hdr(ZEPS__OP__ROLLBACK, 0, 8);
    msg(&s, 0, &h, NULL, 0, NULL, 0);
    h = hdr(ZEPS__OP__HELLO, 0, 9);
    h.incarnation = 999;
    msg(&s, 0, &h, NULL, 0, NULL, 0);
    h = hdr(ZEPS__OP__BYE, 0, 10);
    h.incarnation = 999;
    msg(&s, 0, &h, NULL, 0, NULL, 0);
    h = hdr(ZEPS__OP__FOLLOW, 0xffffffffu, 11); /* replication (refused: one replica) */
    h.epoch = 1;
    h.lsn = 3;
    h.replica = 1;
    h.member = "m-1-0000000001";
    msg(&s, 0, &h, NULL, 0, NULL, 0);
    h = hdr(ZEPS__OP__REPLICATE, 0xffffffffu, 12);
    h.epoch = 1;
    h.lsn = 4;
    msg(&s, 0, &h, ones, 8 * sizeof(float), NULL, 0);
    seed_save("server", name, &s);
}

/* A client seed: request kind, then one reply of a header and payloads. */
static void client_seed(uint8_t kind, const Zeps__Header *h, const void *p, size_t len,
                        const char *name)
{
    seed s = {.n = 0};
    uint8_t hb[1024];
    size_t hl = zeps__header__pack(h, hb);
    zf_put_byte(s.b, CAP, &s.n, kind);
    zf_put_byte(s.b, CAP, &s.n, p ? 1 : 0);
    zf_put_frame(s.b, CAP, &s.n, hb, hl);
    if (p)
        zf_put_frame(s.b, CAP, &s.n, p, len);
    seed_save("client", name, &s);
}

static Zeps__Header reply(int op)
{
    Zeps__Header h = hdr(op, 0, 0);
    h.incarnation = 0x5eed;
    return h;
}

/* The correct answer to each request kind of fuzz_client.c. */
static void client_replies(void)
{
    Zeps__Header h = reply(ZEPS__OP__PULL);
    h.count = 16;
    h.data_version = 3;
    client_seed(0, &h, ones, 16 * sizeof(float), "pull");
    client_seed(1, &h, ones, 16 * sizeof(float), "view");
    uint8_t payload[1024];
    zp_codec_params p;
    zp_codec_params_init(&p);
    h.count = 64;
    h.codec = ZP_CODEC_INT8;
    h.flags = ZP_FLAG_PULL_DELTA;
    client_seed(2, &h, payload, zp_int8_ops.encode(ones, 64, &p, 1, payload), "cpull-delta");
    h.flags = ZP_FLAG_PULL_FULL;
    client_seed(2, &h, ones, 64 * sizeof(float), "cpull-full");
    h = reply(ZEPS__OP__PUSH);
    client_seed(3, &h, NULL, 0, "push");
    h.flags = ZP_FLAG_DROPPED;
    client_seed(3, &h, NULL, 0, "push-dropped");
    float rows[3 * 5] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 0, 0, 0};
    h = reply(ZEPS__OP__PULL);
    h.table = 2;
    h.count = 3;
    client_seed(4, &h, rows, sizeof(rows), "spull");
    h = reply(ZEPS__OP__PUSH);
    h.table = 2;
    client_seed(5, &h, NULL, 0, "spush");
    h = reply(ZEPS__OP__CLOCK);
    client_seed(6, &h, NULL, 0, "clock");
    Zeps__ShardStats st;
    zeps__shard_stats__init(&st);
    st.num_shards = 1;
    st.consistency = "bsp";
    h = reply(ZEPS__OP__STATS);
    h.stats = &st;
    client_seed(7, &h, NULL, 0, "stats");
    h = reply(ZEPS__OP__HELLO);
    h.num_shards = 1;
    h.num_workers = 1;
    h.caps = ZP_CAP_ROLLBACK | ZP_CAP_CUTS;
    h.consistency = "bsp";
    h.flags = ZP_FLAG_REJOINED;
    client_seed(8, &h, NULL, 0, "hello");
    h = reply(ZEPS__OP__ERROR);
    h.error = ZEPS_ERESTARTED;
    h.cut = 4;
    h.cut_set = 4;
    client_seed(0, &h, NULL, 0, "restarted");
    h = reply(ZEPS__OP__PULL);
    h.flags = ZP_FLAG_PARKED;
    client_seed(0, &h, NULL, 0, "parked");
    h = reply(ZEPS__OP__ERROR);
    h.error = ZEPS_ERANGE;
    h.error_text = "out of range";
    client_seed(3, &h, NULL, 0, "error");
}

/* Each codec's encoding of a vector of 100 and of 1. */
static void codec_seeds(void)
{
    float x[100];
    for (int i = 0; i < 100; i++)
        x[i] = (float)((i * 37) % 23) - 11.0f;
    zp_codec_params p;
    zp_codec_params_init(&p);
    p.count = 10;
    p.block = 16;
    for (size_t c = 0; zp_codec_at(c); c++) {
        const zp_codec_ops *ops = zp_codec_at(c);
        for (uint32_t n = 1; n <= 100; n += 99) {
            seed s = {.n = 0};
            zf_put_byte(s.b, CAP, &s.n, (uint8_t)c);
            for (int i = 0; i < 4; i++)
                zf_put_byte(s.b, CAP, &s.n, (uint8_t)(n >> (8 * i)));
            s.n += ops->encode(x, n, &p, 7, s.b + s.n);
            char name[64];
            snprintf(name, sizeof(name), "%s-%u", ops->name, n);
            seed_save("codec", name, &s);
        }
    }
}

static void file_seed(const char *path, uint8_t kind, const char *name)
{
    seed s = {.n = 0};
    zf_put_byte(s.b, CAP, &s.n, kind);
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        exit(1);
    }
    s.n += fread(s.b + s.n, 1, CAP - s.n, f);
    fclose(f);
    seed_save("snapshot", name, &s);
}

/* A shard of `shape` trained a little and snapshotted (zp_persist_final):
 * its file and MANIFEST become seeds. */
static void snapshot_seeds(uint8_t shape, const char *name)
{
    char dir[256], path[512];
    const char *tmp = getenv("TMPDIR"); /* tests write where TMPDIR says */
    snprintf(dir, sizeof(dir), "%s/zeps-fuzz-seeds-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir))
        exit(1);
    zp_config cfg;
    zp_server *s = zf_shard_start(&cfg, shape);
    snprintf(s->cfg.snapshot_dir, sizeof(s->cfg.snapshot_dir), "%s", dir);
    s->cfg.snapshot_on_exit = 1;
    uint8_t push[3 * sizeof(uint64_t) + 12 * sizeof(float)];
    for (uint64_t id = 1; id <= 3; id++)
        memcpy(push + (id - 1) * sizeof(id), &id, sizeof(id));
    memcpy(push + 3 * sizeof(uint64_t), ones, 12 * sizeof(float));
    Zeps__Header h = hdr(ZEPS__OP__PUSH, 0, 5);
    h.count = 64;
    h.flags = ZP_FLAG_CLOCK;
    uint8_t hb[512];
    size_t len[3] = {zeps__header__pack(&h, hb), 64 * sizeof(float)};
    const void *f[3] = {hb, ones};
    zf_deliver(s, "w0", f, len, 2, 0);
    h = hdr(ZEPS__OP__PUSH, 0, 6);
    h.table = 2;
    h.count = 3;
    len[0] = zeps__header__pack(&h, hb);
    f[1] = push;
    len[1] = sizeof(push);
    zf_deliver(s, "w0", f, len, 2, 0);
    if (zp_persist_final(s) != 0)
        exit(1);
    zp_manifest *m;
    char err[512];
    if (zp_manifest_load(dir, &m, err, sizeof(err)) != 0 || !zp_manifest_newest(m))
        exit(1);
    snprintf(path, sizeof(path), "%s/%s", dir, zp_manifest_newest(m)->files[0].name);
    file_seed(path, 0, name);
    unlink(path);
    *strrchr(path, '/') = 0;
    rmdir(path);
    zp_manifest_free(&m);
    snprintf(path, sizeof(path), "%s/MANIFEST", dir);
    char mname[64];
    snprintf(mname, sizeof(mname), "%s-manifest", name);
    file_seed(path, 1, mname);
    unlink(path);
    rmdir(dir);
    zp_server_destroy(&s);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: fuzz_seeds OUTDIR\n");
        return 2;
    }
    outdir = argv[1];
    mkdir(outdir, 0755);
    zp_log_init("fuzz_seeds", ZP_LOG_WARN);
    server_dense(0x01, "async-dense");
    server_packets(0x01, "async-packets");
    server_dense(0x04, "bsp-2-workers");
    server_dense(0x06, "ssp-2-workers");
    server_dense(0x17, "weighted-2-shards");
    server_sparse(0x01, "async-sparse");
    server_sparse(0x04, "bsp-sparse");
    server_codecs(0x01, "async-codecs");
    server_scan(0x01, "async-scan");
    server_admin(0x00, "bsp-admin");
    server_round_entry(0x04, "bsp-round-entry");
    server_sparse_round_entry(0x04, "bsp-sparse-round-entry");
    client_replies();
    codec_seeds();
    snapshot_seeds(0x01, "async");
    snapshot_seeds(0x00, "bsp");
    return 0;
}
