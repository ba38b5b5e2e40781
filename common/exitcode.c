/*
 * exitcode.c - see exitcode.h: which start-up failures an operator must fix.
 */
#include "exitcode.h"

#include "zeps_errors.h"

int zp_exitcode_startup(int err)
{
    switch (err) {
    case ZEPS_OK:
        return ZP_EXIT_OK;
    case ZEPS_ENOMEM:
    case ZEPS_EINTERNAL:
    case ZEPS_ETIMEDOUT: /* a shard did not answer: it may come up later */
    case ZEPS_ECLOSED:
    case ZEPS_ERESTARTED:
        return ZP_EXIT_FAILED;
    default:
        return ZP_EXIT_SETUP;
    }
}
