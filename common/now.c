/*
 * now.c - see now.h.
 */
#include "now.h"

#include <time.h>

uint64_t zp_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

double zp_now_s(void)
{
    return (double)zp_now_ns() * 1e-9;
}
