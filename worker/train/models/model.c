/*
 * model.c - the registry of built-in models: a const array of their ops
 * tables, looked up by the name in training.model. Adding a model is adding
 * its file and one line here.
 */
#include "model.h"

#include <string.h>

static const zp_model_ops *const models[] = {
    &zp_quadratic_ops,
    &zp_softmax_ops,
    &zp_mlp_ops,
    &zp_ctr_ops,
};

#define NUM_MODELS (sizeof(models) / sizeof(models[0]))

const zp_model_ops *zp_model_find(const char *name)
{
    if (name == NULL)
        return NULL;
    for (size_t i = 0; i < NUM_MODELS; i++)
        if (strcmp(models[i]->name, name) == 0)
            return models[i];
    return NULL;
}

const char *zp_model_names(void)
{
    /* A literal rather than a string built at run time: no buffer, no state.
     * Keep in step with models[] (test_models checks that it is). */
    return "quadratic, softmax, mlp, ctr";
}
