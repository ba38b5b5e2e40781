/*
 * fuzz_client.c - libFuzzer target: the client library's reply handling
 * (worker/lib/req.c and what fills a request's destination from a reply).
 *
 * A real libzeps client talks over ipc:// to a ROUTER socket this program
 * holds in place of a shard. At start-up a thread answers its HELLO and
 * DECLAREs correctly (one shard, bsp caps, tables "w" of 16 floats, "c" of
 * 64 floats with int8-compressed pulls, sparse "emb" of rows of 4). Then
 * each input starts one request, chosen by its first byte (dense pull into
 * a buffer, zero-copy view pull, compressed pull, push, sparse pull, sparse
 * push, clock, stats, HELLO), receives it on the ROUTER and answers it with
 * the input's frames: a control byte (bits 0-1: 1..3 frames; bit 2: keep
 * the fuzzed req_id instead of the request's) and the frames
 * (fuzz_input.h). Frame 0, when it unpacks as a header, gets the request's
 * req_id, so the reply reaches the request in flight. An ERROR reply
 * follows it, so the request ends whatever the fuzzed reply did (a reply
 * taken ends it first and the ERROR is then a late answer, dropped), and
 * the client's connection state is put back after each input. Crashes and
 * sanitizer reports are the findings; a request that ends in an error is
 * not, and one that never ends is a timeout finding.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client.h"
#include "fuzz_input.h"
#include "log.h"
#include "now.h"
#include "req.h"
#include "wire.h"
#include "zeps.h"

static struct {
    char dir[64], endpoint[128];
    void *zctx, *router;
    zeps_client *c;
    uint32_t w, cz, emb;
    zeps_sbatch *batch;
    atomic_int setup_done;
    uint32_t next_table;
} g;

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Send [identity][header][data] on the ROUTER. */
static void send_reply(zmq_msg_t *identity, const Zeps__Header *h, const void *d, size_t n)
{
    zmq_send(g.router, zmq_msg_data(identity), zmq_msg_size(identity), ZMQ_SNDMORE);
    zp_wire_send_header(g.router, h, d ? ZMQ_SNDMORE : 0);
    if (d)
        zmq_send(g.router, d, n, 0);
}

/* The correct answer to a HELLO or DECLARE (the setup's requests). */
static void answer(zp_frames *m)
{
    Zeps__Header *req = zp_wire_unpack_header(&m->f[1]);
    if (!req)
        abort();
    Zeps__Header h;
    zeps__header__init(&h);
    h.version = ZP_PROTOCOL_VERSION;
    h.op = req->op;
    h.req_id = req->req_id;
    h.incarnation = 0x5eed;
    if (req->op == ZEPS__OP__HELLO) {
        h.num_shards = 1;
        h.num_workers = 1;
        h.caps = ZP_CAP_ROLLBACK | ZP_CAP_CUTS;
        h.consistency = "bsp";
    } else if (req->op == ZEPS__OP__DECLARE && req->spec) {
        h.table = g.next_table++;
        h.count = req->spec->length;
    } else {
        abort(); /* the setup sends nothing else */
    }
    send_reply(&m->f[0], &h, NULL, 0);
    zeps__header__free_unpacked(req, NULL);
}

static void *setup_server(void *arg)
{
    zmq_pollitem_t it = {.socket = g.router, .events = ZMQ_POLLIN};
    while (!atomic_load(&g.setup_done)) {
        if (zmq_poll(&it, 1, 20) <= 0)
            continue;
        zp_frames m;
        if (zp_wire_frames_recv(g.router, &m, ZMQ_DONTWAIT) == 0) {
            answer(&m);
            zp_wire_frames_close(&m);
        }
    }
    return NULL;
}

static void cleanup(void)
{
    zeps_sbatch_free(&g.batch);
    zeps_client_destroy(&g.c);
    zmq_close(g.router);
    zmq_ctx_term(g.zctx);
    char path[160];
    snprintf(path, sizeof(path), "%s/shard", g.dir);
    unlink(path);
    rmdir(g.dir);
}

static void declare_tables(void)
{
    zeps_table_spec w = {.name = "w", .length = 16, .optimizer = "sgd", .lr = 0.1};
    zeps_table_spec cz = {.name = "c", .length = 64, .optimizer = "sgd", .lr = 0.1};
    zeps_sparse_spec emb = {.name = "emb", .dim = 4, .optimizer = "adagrad", .lr = 0.1};
    zeps_codec_opts int8 = {.codec = "int8"};
    static const uint64_t ids[] = {1, 2, 2, 3};
    if (zeps_declare(g.c, &w, &g.w) || zeps_declare(g.c, &cz, &g.cz) ||
        zeps_declare_sparse(g.c, &emb, &g.emb) || zeps_set_pull_codec(g.c, g.cz, &int8) ||
        zeps_sbatch_new(g.c, g.emb, ids, 4, &g.batch))
        abort();
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    /* refusals would flood the output; ZEPS_FUZZ_VERBOSE=1 shows them */
    zp_log_init("fuzz_client", getenv("ZEPS_FUZZ_VERBOSE") ? ZP_LOG_DEBUG : ZP_LOG_ERROR + 1);
    const char *tmp = getenv("TMPDIR"); /* tests write where TMPDIR says */
    snprintf(g.dir, sizeof(g.dir), "%s/zeps-fuzz-client-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(g.dir))
        abort();
    snprintf(g.endpoint, sizeof(g.endpoint), "ipc://%s/shard", g.dir);
    g.zctx = zmq_ctx_new();
    g.router = zmq_socket(g.zctx, ZMQ_ROUTER);
    int linger = 0, timeout = 10000; /* > request_timeout_ms * (max_retries + 1) */
    zmq_setsockopt(g.router, ZMQ_LINGER, &linger, sizeof(linger));
    zmq_setsockopt(g.router, ZMQ_RCVTIMEO, &timeout, sizeof(timeout));
    if (zmq_bind(g.router, g.endpoint) != 0)
        abort();
    pthread_t t;
    pthread_create(&t, NULL, setup_server, NULL);
    const char *eps[1] = {g.endpoint};
    zeps_options opt = {.request_timeout_ms = 1000, .max_retries = 3, .hello_timeout_ms = 10000};
    if (zeps_client_new_endpoints(&g.c, eps, 1, 0, &opt) != 0)
        abort();
    declare_tables();
    atomic_store(&g.setup_done, 1);
    pthread_join(t, NULL);
    atexit(cleanup);
    return 0;
}

/* Start request `kind` (its buffers are static: a reply writes into them). */
static zp_req *start(uint8_t kind, int *view)
{
    static float dst[64], grad[64], rows[4 * 4];
    zp_req *r = NULL;
    *view = 0;
    switch (kind % 9) {
    case 0:
        zeps_pull_start(g.c, g.w, dst, 0, 16, 0, &r);
        break;
    case 1:
        *view = 1;
        zeps_pull_view_start(g.c, g.w, 0, 16, 0, &r);
        break;
    case 2:
        zeps_pull_start(g.c, g.cz, dst, 0, 64, 0, &r);
        break;
    case 3:
        zeps_push_start(g.c, g.w, grad, 0, 16, 0, &r);
        break;
    case 4:
        zeps_sbatch_pull_start(g.batch, rows, 0, &r);
        break;
    case 5:
        zeps_sbatch_push_start(g.batch, rows, 0, &r);
        break;
    case 6:
        zeps_clock_start(g.c, 0, &r);
        break;
    default:
        r = zp_req_new(g.c, kind % 9 == 7 ? ZEPS__OP__STATS : ZEPS__OP__HELLO, 1);
        zp_req_send(r, zp_req_add(r, 0));
        break;
    }
    return r;
}

/* Receive the request with req_id `want` on the ROUTER into *m; returns
 * its header. Older requests (a resend that crossed its answer) are
 * dropped. A request whose first send failed (a socket just reset) comes
 * with its resend, after request_timeout_ms. Not there within 8 s (under
 * libFuzzer's -timeout of 10): a finding, with the client's state. */
static Zeps__Header *recv_request(zp_frames *m, uint64_t want)
{
    uint64_t end = zp_now_ns() + 8000000000ull;
    zmq_pollitem_t it = {.socket = g.router, .events = ZMQ_POLLIN};
    for (;;) {
        uint64_t now = zp_now_ns();
        /* EINTR (libFuzzer's -timeout alarm) just polls again */
        if (now >= end || (zmq_poll(&it, 1, (long)((end - now) / 1000000ull) + 1) > 0 &&
                           zp_wire_frames_recv(g.router, m, ZMQ_DONTWAIT) != 0)) {
            fprintf(stderr,
                    "fuzz_client: no request %" PRIu64 " from the client in 8 s (%s); "
                    "the client: %d in flight, need_hello %d, in_rehello %d, caps %#x\n",
                    want, zmq_strerror(zmq_errno()), g.c->shards[0].nout,
                    g.c->shards[0].need_hello, g.c->in_rehello, (unsigned)g.c->caps);
            abort();
        }
        if (!(it.revents & ZMQ_POLLIN))
            continue;
        it.revents = 0;
        Zeps__Header *req = m->n >= 2 ? zp_wire_unpack_header(&m->f[1]) : NULL;
        if (req && req->req_id == want)
            return req;
        if (req) {
            if (getenv("ZEPS_FUZZ_VERBOSE"))
                fprintf(stderr, "fuzz_client: dropped request %" PRIu64 " (op %d), want %" PRIu64 "\n",
                        req->req_id, req->op, want);
            zeps__header__free_unpacked(req, NULL);
        }
        zp_wire_frames_close(m);
    }
}

/* Answer request `want` with the input's frames, then with an ERROR that
 * ends it if the fuzzed reply did not. */
static void answer_fuzzed(zf_cursor *c, uint64_t want)
{
    zp_frames m;
    Zeps__Header *req = recv_request(&m, want);
    uint8_t ctl = zf_byte(c);
    int nframes = 1 + ctl % 3;
    zmq_send(g.router, zmq_msg_data(&m.f[0]), zmq_msg_size(&m.f[0]), ZMQ_SNDMORE);
    for (int i = 0; i < nframes; i++) {
        size_t len;
        const uint8_t *f = zf_frame(c, &len);
        int more = i + 1 < nframes ? ZMQ_SNDMORE : 0;
        Zeps__Header *h = i == 0 && !(ctl & 4) ? zeps__header__unpack(NULL, len, f) : NULL;
        if (h) {
            h->req_id = req->req_id;
            zp_wire_send_header(g.router, h, more);
            zeps__header__free_unpacked(h, NULL);
        } else {
            zmq_send(g.router, f, len, more);
        }
    }
    Zeps__Header e;
    zeps__header__init(&e);
    e.version = ZP_PROTOCOL_VERSION;
    e.op = ZEPS__OP__ERROR;
    e.req_id = req->req_id;
    e.error = ZEPS_EINVAL;
    e.error_text = "the fuzz target's closing answer";
    send_reply(&m.f[0], &e, NULL, 0);
    zeps__header__free_unpacked(req, NULL);
    zp_wire_frames_close(&m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    zf_cursor c = {data, size};
    int view;
    zp_req *r = start(zf_byte(&c), &view);
    if (!r)
        abort(); /* a request of a declared table could not start */
    answer_fuzzed(&c, r->subs[0].req_id);
    if (view) {
        zeps_view *v = NULL;
        zeps_wait_view(&r, &v);
        zeps_view_release(&v);
    } else {
        zeps_wait(&r);
    }
    /* what a HELLO or ERESTARTED answer changed, back to the start's state */
    g.c->caps = ZP_CAP_ROLLBACK | ZP_CAP_CUTS;
    g.c->nworkers = 1;
    g.c->abort_all = 0;
    g.c->shards[0].need_hello = 0;
    return 0;
}
