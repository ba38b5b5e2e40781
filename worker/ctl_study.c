/* zepsctl study - being written; see docs/consistency.md. */
#include <stdio.h>

#include "ctl.h"

int zp_ctl_study(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "zepsctl study: not available in this build\n");
    return 2;
}
