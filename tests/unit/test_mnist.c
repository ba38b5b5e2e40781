/*
 * test_mnist.c - the Fashion-MNIST reader (worker/train/data/mnist.c): the
 * IDX files of the real data set, and corrupted ones it must refuse.
 *
 * Needs the dataset-fashion-mnist package (the files in DATA_DIR).
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <zlib.h>

#include "check_main.h"
#include "scratch.h"
#include "config.h"
#include "mnist.h"
#include "zeps_errors.h"

#define DATA_DIR "/usr/share/datasets/fashion-mnist"

/* Write an IDX file of the given header words followed by `ndata` bytes. */
static void write_gz(const char *path, const uint32_t *words, int nwords, size_t ndata)
{
    gzFile gz = gzopen(path, "wb");
    ck_assert_ptr_nonnull(gz);
    for (int i = 0; i < nwords; i++) {
        uint8_t b[4] = {(uint8_t)(words[i] >> 24), (uint8_t)(words[i] >> 16),
                        (uint8_t)(words[i] >> 8), (uint8_t)words[i]};
        ck_assert_int_eq(gzwrite(gz, b, 4), 4);
    }
    for (size_t i = 0; i < ndata; i++) {
        uint8_t b = (uint8_t)(i % 10);
        ck_assert_int_eq(gzwrite(gz, &b, 1), 1);
    }
    ck_assert_int_eq(gzclose(gz), Z_OK);
}

/* ---- IDX reader ------------------------------------------------------------- */

static void check_set(const zp_dataset *ds, int n)
{
    ck_assert_int_eq(ds->n, n);
    ck_assert_int_eq(ds->rows, 28);
    ck_assert_int_eq(ds->cols, 28);
    ck_assert_int_eq(ds->dim, ZP_MNIST_PIXELS);
    int count[ZP_MNIST_CLASSES] = {0};
    for (int i = 0; i < ds->n; i++) {
        ck_assert_int_lt(ds->y[i], ZP_MNIST_CLASSES);
        count[ds->y[i]]++;
    }
    for (int k = 0; k < ZP_MNIST_CLASSES; k++)
        ck_assert_int_eq(count[k], n / 10); /* Fashion-MNIST is balanced */
    float lo = 1.0f, hi = 0.0f;
    double sum = 0.0;
    for (size_t i = 0; i < (size_t)ds->n * ds->dim; i++) {
        lo = ds->x[i] < lo ? ds->x[i] : lo;
        hi = ds->x[i] > hi ? ds->x[i] : hi;
        sum += ds->x[i];
    }
    ck_assert(lo == 0.0f && hi == 1.0f);
    double mean = sum / ((double)ds->n * ds->dim);
    ck_assert_msg(mean > 0.2 && mean < 0.4, "mean pixel %g", mean); /* ~0.286 */
}

START_TEST(idx_reads_real_files)
{
    char err[512] = "";
    zp_dataset ds;
    int rc = zp_mnist_read(&ds, DATA_DIR "/train-images-idx3-ubyte.gz",
                           DATA_DIR "/train-labels-idx1-ubyte.gz", NULL, 0, err, sizeof(err));
    ck_assert_msg(rc == 0, "%s", err);
    check_set(&ds, 60000);
    zp_mnist_dataset_fini(&ds);
    ck_assert_ptr_null(ds.x);

    rc = zp_mnist_read(&ds, DATA_DIR "/t10k-images-idx3-ubyte.gz",
                       DATA_DIR "/t10k-labels-idx1-ubyte.gz", NULL, 0, err, sizeof(err));
    ck_assert_msg(rc == 0, "%s", err);
    check_set(&ds, 10000);

    /* keep[] selects and orders examples */
    zp_dataset sub;
    uint32_t keep[3] = {9999, 0, 17};
    rc = zp_mnist_read(&sub, DATA_DIR "/t10k-images-idx3-ubyte.gz",
                       DATA_DIR "/t10k-labels-idx1-ubyte.gz", keep, 3, err, sizeof(err));
    ck_assert_msg(rc == 0, "%s", err);
    ck_assert_int_eq(sub.n, 3);
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(sub.y[i], ds.y[keep[i]]);
        ck_assert(memcmp(sub.x + (size_t)i * 784, ds.x + (size_t)keep[i] * 784,
                         784 * sizeof(float)) == 0);
    }
    keep[1] = 10000; /* out of range */
    zp_mnist_dataset_fini(&sub);
    rc = zp_mnist_read(&sub, DATA_DIR "/t10k-images-idx3-ubyte.gz",
                       DATA_DIR "/t10k-labels-idx1-ubyte.gz", keep, 3, err, sizeof(err));
    ck_assert_int_eq(rc, ZEPS_EDATA);
    zp_mnist_dataset_fini(&ds);
}
END_TEST

START_TEST(idx_rejects_bad_files)
{
    char img[128], lab[128], err[512];
    zp_dataset ds;
    zt_scratch_path(img, sizeof(img), "mnist-img.gz");
    zt_scratch_path(lab, sizeof(lab), "mnist-lab.gz");
    const uint32_t good_lab[] = {0x801, 2};
    write_gz(lab, good_lab, 2, 2);

    /* bad magic */
    const uint32_t bad_magic[] = {0x802, 2, 28, 28};
    write_gz(img, bad_magic, 4, 2 * 784);
    int rc = zp_mnist_read(&ds, img, lab, NULL, 0, err, sizeof(err));
    ck_assert_int_eq(rc, ZEPS_EDATA);
    ck_assert_msg(strstr(err, img) != NULL && strstr(err, "magic") != NULL, "%s", err);
    ck_assert_ptr_null(ds.x);

    /* labels file given where images are expected */
    rc = zp_mnist_read(&ds, lab, lab, NULL, 0, err, sizeof(err));
    ck_assert_int_eq(rc, ZEPS_EDATA);

    /* short header */
    write_gz(img, bad_magic, 2, 0);
    rc = zp_mnist_read(&ds, img, lab, NULL, 0, err, sizeof(err));
    ck_assert_int_eq(rc, ZEPS_EDATA);
    ck_assert_msg(strstr(err, "truncated") != NULL, "%s", err);

    /* truncated data */
    const uint32_t good_img[] = {0x803, 2, 28, 28};
    write_gz(img, good_img, 4, 784 + 100);
    rc = zp_mnist_read(&ds, img, lab, NULL, 0, err, sizeof(err));
    ck_assert_int_eq(rc, ZEPS_EDATA);
    ck_assert_msg(strstr(err, img) != NULL && strstr(err, "truncated") != NULL, "%s", err);

    /* trailing data */
    write_gz(img, good_img, 4, 3 * 784);
    rc = zp_mnist_read(&ds, img, lab, NULL, 0, err, sizeof(err));
    ck_assert_int_eq(rc, ZEPS_EDATA);

    /* zero / absurd dimensions */
    const uint32_t zero_n[] = {0x803, 0, 28, 28};
    write_gz(img, zero_n, 4, 0);
    ck_assert_int_eq(zp_mnist_read(&ds, img, lab, NULL, 0, err, sizeof(err)), ZEPS_EDATA);
    const uint32_t huge[] = {0x803, 2, 100000, 28};
    write_gz(img, huge, 4, 0);
    ck_assert_int_eq(zp_mnist_read(&ds, img, lab, NULL, 0, err, sizeof(err)), ZEPS_EDATA);

    /* counts disagree */
    const uint32_t three_lab[] = {0x801, 3};
    write_gz(img, good_img, 4, 2 * 784);
    write_gz(lab, three_lab, 2, 3);
    rc = zp_mnist_read(&ds, img, lab, NULL, 0, err, sizeof(err));
    ck_assert_int_eq(rc, ZEPS_EDATA);
    ck_assert_msg(strstr(err, "2 images") != NULL && strstr(err, "3 labels") != NULL, "%s", err);

    /* and the good pair reads */
    write_gz(lab, good_lab, 2, 2);
    rc = zp_mnist_read(&ds, img, lab, NULL, 0, err, sizeof(err));
    ck_assert_msg(rc == 0, "%s", err);
    ck_assert_int_eq(ds.n, 2);
    ck_assert_int_eq(ds.y[1], 1);
    zp_mnist_dataset_fini(&ds);

    /* label out of range: data bytes are i % 10, so write a file by hand */
    gzFile gz = gzopen(lab, "wb");
    const uint8_t bad_labels[] = {0, 0, 8, 1, 0, 0, 0, 2, 3, 10};
    gzwrite(gz, bad_labels, sizeof(bad_labels));
    gzclose(gz);
    rc = zp_mnist_read(&ds, img, lab, NULL, 0, err, sizeof(err));
    ck_assert_int_eq(rc, ZEPS_EDATA);
    ck_assert_msg(strstr(err, "label 1 is 10") != NULL, "%s", err);

    /* missing file: the message says where to get it */
    unlink(img);
    unlink(lab);
    rc = zp_mnist_read(&ds, img, lab, NULL, 0, err, sizeof(err));
    ck_assert_int_eq(rc, ZEPS_EDATA);
    ck_assert_msg(strstr(err, img) != NULL &&
                      strstr(err, "apt-get install dataset-fashion-mnist") != NULL,
                  "%s", err);
}
END_TEST

static Suite *mnist_suite(void)
{
    Suite *s = suite_create("mnist");
    TCase *tc = tcase_create("idx");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, idx_reads_real_files);
    tcase_add_test(tc, idx_rejects_bad_files);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return zt_run_suite(mnist_suite());
}
