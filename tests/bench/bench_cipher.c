/*
 * bench_cipher.c - the cipher speed behind CurveZMQ on this machine: one
 * core's rate of libsodium's crypto_box_easy_afternm (XSalsa20-Poly1305,
 * what ZeroMQ's CURVE mechanism runs once per message) and of its open,
 * on messages of the given size. docs/performance.md turns it into the
 * most a CURVE push+pull can reach on N cores.
 *
 *   build/bin/bench_cipher [MiB per message (4)] [messages (50)]
 *
 * Not a test: it prints figures and asserts nothing. Rates are over the
 * thread's CPU time, so other processes on the machine do not lower them.
 */
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double thread_cpu_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    long mib_arg = argc > 1 ? atol(argv[1]) : 4;
    int reps = argc > 2 ? atoi(argv[2]) : 50;
    if (mib_arg < 1 || mib_arg > 1024 || reps <= 0 || sodium_init() < 0) {
        fprintf(stderr, "usage: bench_cipher [MiB per message, 1..1024] [messages > 0]\n");
        return 2;
    }
    size_t mib = (size_t)mib_arg, n = mib << 20;
    unsigned char *plain = calloc(n, 1), *boxed = malloc(n + crypto_box_MACBYTES);
    unsigned char *opened = malloc(n);
    unsigned char pk[crypto_box_PUBLICKEYBYTES], sk[crypto_box_SECRETKEYBYTES];
    unsigned char key[crypto_box_BEFORENMBYTES], nonce[crypto_box_NONCEBYTES] = {0};
    if (!plain || !boxed || !opened || crypto_box_keypair(pk, sk) != 0 ||
        crypto_box_beforenm(key, pk, sk) != 0)
        return 1;
    double t0 = thread_cpu_s();
    for (int i = 0; i < reps; i++)
        crypto_box_easy_afternm(boxed, plain, n, nonce, key);
    double t1 = thread_cpu_s();
    for (int i = 0; i < reps; i++)
        if (crypto_box_open_easy_afternm(opened, boxed, n + crypto_box_MACBYTES, nonce, key) != 0)
            return 1;
    double t2 = thread_cpu_s();
    double mb = (double)n * reps / 1e6;
    printf("XSalsa20-Poly1305 on %zu MiB messages, one core (CPU time): box %.0f MB/s, "
           "open %.0f MB/s\n",
           mib, mb / (t1 - t0), mb / (t2 - t1));
    free(plain);
    free(boxed);
    free(opened);
    return 0;
}
