/*
 * zeps_errors.h - the one error channel of zeps.
 *
 * Every fallible function of zeps returns an int that is 0 (ZEPS_OK) or one
 * of these codes; the same codes travel on the wire in ERROR replies, so a
 * code's number never changes once released. The table is an X-macro so the
 * enum and zeps_strerror() cannot drift apart. This header is public: it is
 * installed beside zeps.h.
 */
#ifndef ZEPS_ERRORS_H
#define ZEPS_ERRORS_H

#ifdef __cplusplus
extern "C" {
#endif

/* X(name, number, description) */
#define ZEPS_ERROR_TABLE(X)                                                                        \
    X(OK, 0, "success")                                                                            \
    X(EINVAL, 1, "invalid argument")                                                               \
    X(ENOMEM, 2, "out of memory")                                                                  \
    X(EPROTO, 3, "malformed message")                                                              \
    X(EVERSION, 4, "protocol version mismatch")                                                    \
    X(EOP, 5, "unknown or unexpected operation")                                                   \
    X(ETABLE, 6, "unknown table")                                                                  \
    X(ECONFLICT, 7, "table already declared with a different spec")                                \
    X(ERANGE, 8, "element range outside the table or shard slice")                                 \
    X(ESIZE, 9, "payload length does not match the header")                                        \
    X(ENONFINITE, 10, "NaN or Inf in values")                                                      \
    X(ETIMEDOUT, 11, "request timed out")                                                          \
    X(EIO, 12, "input/output error")                                                               \
    X(ECONFIG, 13, "bad configuration")                                                            \
    X(ERANK, 14, "worker rank outside the cluster")                                                \
    X(ECLOSED, 15, "shutting down or closed")                                                      \
    X(ETRANSPORT, 16, "transport (ZeroMQ) error")                                                  \
    X(ETOOBIG, 17, "request larger than the configured maximum")                                   \
    X(ESTATE, 18, "operation not valid in this state")                                             \
    X(ECLOCK, 19, "clock out of order")                                                            \
    X(ESTALE, 20, "update too stale, dropped")                                                     \
    X(EDATA, 21, "bad or missing data file")                                                       \
    X(EOPTIM, 22, "unknown optimizer or bad hyper-parameter")                                      \
    X(EINTERNAL, 23, "internal error")                                                             \
    X(EDIVERGED, 24, "training diverged")                                                          \
    X(ERESTARTED, 35, "a shard restarted or rolled back: resume from its cut")                     \
    X(EREFUSED, 36, "a shard refused this client's CURVE key")                                     \
    X(EFINISHED, 37, "a worker reached the job's target: training is over")                        \
    X(ENOTPRIMARY, 38, "this replica is not its shard's primary: ask the one named")               \
    X(ESHM, 39, "bad shared-memory descriptor: outside its segment, overlapping, or stale")        \
    X(EMOVED, 40, "a sparse id's slot lives on another shard: ask the one named")

typedef enum zeps_err {
#define ZEPS_ERR_ENUM_(name, num, text) ZEPS_##name = num,
    ZEPS_ERROR_TABLE(ZEPS_ERR_ENUM_)
#undef ZEPS_ERR_ENUM_
        ZEPS_ERR_COUNT_
} zeps_err;

/* A static, human-readable description of `err` (never NULL). Thread-safe. */
const char *zeps_strerror(int err);

/* The symbolic name of `err` ("ETABLE"), or "UNKNOWN". Thread-safe. */
const char *zeps_errname(int err);

#ifdef __cplusplus
}
#endif
#endif
