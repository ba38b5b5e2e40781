/*
 * hyper.c - defaults of optimizer hyper-parameters (hyper.h).
 */
#include "hyper.h"

void zp_hyper_defaults(zp_hyper *h)
{
    if (h->momentum == 0.0f)
        h->momentum = 0.9f;
    if (h->beta1 == 0.0f)
        h->beta1 = 0.9f;
    if (h->beta2 == 0.0f)
        h->beta2 = 0.999f;
    if (h->eps == 0.0f)
        h->eps = 1e-8f;
}
