/*
 * ctl_gen.c - `zepsctl gen-criteo`: write a Criteo-format data set from a
 * hidden model (worker/criteo_gen.c), for the ctr workload.
 *
 *   zepsctl gen-criteo --out DIR [--train N] [--test N] [--seed N] [--zipf S]
 *                      [--scale X] [--interactions R] [--quiet]
 *
 * Prints the figures of truth.json when done.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "criteo_gen.h"
#include "ctl.h"
#include "zeps_errors.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: zepsctl gen-criteo --out DIR [options]\n\n"
            "Writes DIR/train.txt and DIR/test.txt in the Criteo TSV format (label, 13\n"
            "integer and 26 categorical fields) from a hidden logistic model with\n"
            "Zipf-distributed categorical values, and DIR/truth.json with the data set's\n"
            "figures: distinct ids, positive rate, the hidden model's test logloss and AUC,\n"
            "and those of a logistic regression on the integer fields only.\n\n"
            "  --train N          training examples (default 1000000)\n"
            "  --test N           held-out examples (default 100000)\n"
            "  --seed N           everything is a function of it (default 1)\n"
            "  --zipf S           rank exponent of the categorical values, > 1 (default 1.1)\n"
            "  --scale X          vocabulary sizes (Kaggle-like, up to 10M) times X (default 1)\n"
            "  --interactions R   rank of the hidden pairwise field interactions, 0 = none\n"
            "                     (default 4)\n"
            "  --interaction-scale X  std-dev of their factors (default 0.05)\n"
            "  --bias B           the hidden model's intercept (default -1.6)\n"
            "  --rare-k0 K        weights of the value of rank k shrink as\n"
            "                     1/sqrt(1 + k/K): rare values carry less signal (default 100)\n"
            "  -q, --quiet        no progress on stderr\n"
            "\n"
            "Exit status: 0 written; 1 a file could not be written; 2 bad options.\n");
}

static int parse_num(const char *opt, const char *v, double lo, double hi, double *out)
{
    char *end;
    double x = strtod(v, &end);
    if (end == v || *end || !(x >= lo && x <= hi)) {
        fprintf(stderr, "zepsctl gen-criteo: --%s '%s' is not a number in [%g, %g]\n", opt, v, lo,
                hi);
        return -1;
    }
    *out = x;
    return 0;
}

/* Apply option c (optarg) to o. Returns -1 to go on, else the exit status
 * (0 after --help, 2 for a bad value). */
static int apply_opt(zp_criteo_gen_opts *o, int c)
{
    double v;
    int bad = 0;
    switch (c) {
    case 'o':
        o->out_dir = optarg;
        break;
    case 't':
        bad = parse_num("train", optarg, 1, 1e12, &v);
        o->train = (uint64_t)v;
        break;
    case 'T':
        bad = parse_num("test", optarg, 2, 1e12, &v);
        o->test = (uint64_t)v;
        break;
    case 's':
        bad = parse_num("seed", optarg, 0, 1e18, &v);
        o->seed = (uint64_t)v;
        break;
    case 'z':
        bad = parse_num("zipf", optarg, 1.000001, 4, &o->zipf);
        break;
    case 'x':
        bad = parse_num("scale", optarg, 1e-6, 100, &o->scale);
        break;
    case 'r':
        bad = parse_num("interactions", optarg, 0, 16, &v);
        o->interaction_rank = (int)v;
        break;
    case 'i':
        bad = parse_num("interaction-scale", optarg, 0, 10, &o->interaction_scale);
        break;
    case 'b':
        bad = parse_num("bias", optarg, -20, 20, &o->bias);
        break;
    case 'k':
        bad = parse_num("rare-k0", optarg, 1e-3, 1e12, &o->rare_k0);
        break;
    case 'q':
        o->progress = 0;
        break;
    case 'h':
        usage(stdout);
        return 0;
    default:
        usage(stderr);
        return 2;
    }
    return bad ? 2 : -1;
}

/* What the generator wrote and the figures of its hidden model. */
static void print_truth(const zp_criteo_gen_opts *o, const zp_criteo_truth *t)
{
    printf("wrote %s/train.txt (%llu lines), %s/test.txt (%llu lines) in %.1f s\n", o->out_dir,
           (unsigned long long)t->train, o->out_dir, (unsigned long long)t->test, t->seconds);
    printf("  distinct ids           %llu\n", (unsigned long long)t->distinct_total);
    printf("  positive rate          %.4f (train), %.4f (test)\n", t->pos_rate_train,
           t->pos_rate_test);
    printf("  hidden model, test     AUC %.4f, logloss %.4f\n", t->truth_auc, t->truth_logloss);
    printf("  dense fields only      AUC %.4f, logloss %.4f\n", t->dense_auc, t->dense_logloss);
    printf("  figures in             %s/truth.json\n", o->out_dir);
}

int zp_ctl_gen_criteo(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"out", required_argument, NULL, 'o'},
        {"train", required_argument, NULL, 't'},
        {"test", required_argument, NULL, 'T'},
        {"seed", required_argument, NULL, 's'},
        {"zipf", required_argument, NULL, 'z'},
        {"scale", required_argument, NULL, 'x'},
        {"interactions", required_argument, NULL, 'r'},
        {"interaction-scale", required_argument, NULL, 'i'},
        {"bias", required_argument, NULL, 'b'},
        {"rare-k0", required_argument, NULL, 'k'},
        {"quiet", no_argument, NULL, 'q'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    zp_criteo_gen_opts o;
    zp_criteo_gen_defaults(&o);
    o.progress = 1;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, "qh", longopts, NULL)) != -1) {
        int rc = apply_opt(&o, c);
        if (rc >= 0)
            return rc;
    }
    if (optind < argc || !o.out_dir) {
        fprintf(stderr, "zepsctl gen-criteo: %s\n",
                o.out_dir ? "unexpected arguments" : "--out DIR is required");
        usage(stderr);
        return 2;
    }
    zp_criteo_truth t;
    char err[1200];
    int rc = zp_criteo_gen_write(&o, &t, err, sizeof(err));
    if (rc != 0) {
        fprintf(stderr, "zepsctl gen-criteo: %s\n", err);
        return rc == ZEPS_EINVAL ? 2 : 1;
    }
    print_truth(&o, &t);
    return 0;
}
