/*
 * ctl_sweep_model.c - the model axis of `zepsctl study --model ...`: one
 * const zp_sweep_model per built-in model, saying what its training
 * section holds, which target ends a run (test accuracy for the
 * classifiers, the relative distance to x* for quadratic) and the default
 * step per optimizer. Adding a model to the sweeps is adding one table
 * here. The ctr model needs a click log: prepare() generates a small one
 * (`zepsctl gen-criteo`) in the sweep directory once.
 *
 * Default steps: sgd's is the model's usual one; momentum's is sgd's
 * times (1 - 0.9), so that its long-run step lr / (1 - mu) is sgd's; adam's
 * is the usual 1e-3 for the nets.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <string.h>

#include "ctl_sweep.h"
#include "spawn.h"

/* Budget lines of the MNIST models: epochs of the capped training set. */
static void write_mnist(FILE *f, const sweep *sw)
{
    const sweep_opts *o = &sw->o;
    fprintf(f, "  epochs = %d; batch_size = %d; max_train_examples = %d;\n", o->epochs, o->batch,
            o->train_examples);
}

static void write_quadratic(FILE *f, const sweep *sw, const sweep_cell *c)
{
    (void)c;
    fprintf(f, "  model = \"quadratic\"; epochs = 1; iterations = %d; dim = 100;\n",
            sw->o.iterations);
    fprintf(f, "  condition = 100;\n");
}

static void write_softmax(FILE *f, const sweep *sw, const sweep_cell *c)
{
    (void)c;
    fprintf(f, "  model = \"softmax\";\n");
    write_mnist(f, sw);
}

static void write_mlp(FILE *f, const sweep *sw, const sweep_cell *c)
{
    fprintf(f, "  model = \"mlp\"; depth = %d; hidden = %d;\n", c->depth, c->width);
    write_mnist(f, sw);
}

static void write_ctr(FILE *f, const sweep *sw, const sweep_cell *c)
{
    (void)c;
    const sweep_opts *o = &sw->o;
    fprintf(f, "  model = \"ctr\"; epochs = %d; batch_size = %d;\n", o->epochs, o->batch);
    fprintf(f, "  ctr = { train_file = \"%s/train.txt\"; test_file = \"%s/test.txt\"; };\n",
            sw->ctr_dir, sw->ctr_dir);
}

static const zp_sweep_model models[] = {
    {.name = "quadratic",
     .lr = {1.0, 0.1, 0.05},
     .target = 1e-4,
     .write_training = write_quadratic},
    {.name = "softmax",
     .classifier = true,
     .lr = {0.1, 0.01, 0.001},
     .target = 0.75,
     .write_training = write_softmax},
    {.name = "mlp",
     .classifier = true,
     .deep = true,
     .lr = {0.1, 0.01, 0.001},
     .target = 0.75,
     .write_training = write_mlp},
    {.name = "ctr",
     .classifier = true,
     .lr = {0.05, 0.005, 0.001},
     .target = 0.77,
     .write_training = write_ctr},
};

const zp_sweep_model *zp_ctl_sweep_model_find(const char *name)
{
    for (size_t i = 0; i < sizeof(models) / sizeof(models[0]); i++)
        if (strcmp(models[i].name, name) == 0)
            return &models[i];
    return NULL;
}

/* `zepsctl gen-criteo` into sw->ctr_dir: --train-examples lines of
 * training data (10000 by default), a quarter of that to test on. */
static bool gen_ctr(sweep *sw)
{
    char train[32], test[32], log[PATH_MAX + 32];
    snprintf(sw->ctr_dir, sizeof(sw->ctr_dir), "%s/ctr-data", sw->dir);
    snprintf(log, sizeof(log), "%s/gen-criteo.log", sw->dir);
    snprintf(train, sizeof(train), "%d", sw->o.train_examples);
    snprintf(test, sizeof(test), "%d", sw->o.train_examples / 4 + 1);
    char *argv[] = {sw->zepsctl, "gen-criteo", "--out",   sw->ctr_dir, "--train", train,
                    "--test",    test,         "--scale", "0.001",     "--quiet", NULL};
    zp_spawn_opts so = {.log = log, .log_fd = -1, .flags = ZP_SPAWN_TRUNC, .deathsig = SIGTERM};
    pid_t pid = zp_spawn_start(argv, &so);
    int status = 0;
    if (pid > 0 && zp_spawn_wait(pid, -1, &status) == 1 && zp_spawn_exit_code(status) == 0)
        return true;
    fprintf(stderr, "zepsctl study: could not generate the ctr data (see %s)\n", log);
    return false;
}

bool zp_ctl_sweep_model_prepare(sweep *sw)
{
    for (int i = 0; i < sw->o.ax.nmodel; i++)
        if (strcmp(sw->o.ax.model[i]->name, "ctr") == 0)
            return gen_ctr(sw);
    return true;
}
