/*
 * snapshot_io.h - what the snapshot files (snapshot*.c), manifest.c and
 * reshard.c share: byte order helpers for the little-endian format, the CRC,
 * durable writes. Internal to common/snapshot/ (and its tools).
 */
#ifndef ZP_SNAPSHOT_IO_H
#define ZP_SNAPSHOT_IO_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

static inline void zp_put32(uint8_t *p, uint32_t v)
{
    memcpy(p, &v, 4);
}
static inline void zp_put64(uint8_t *p, uint64_t v)
{
    memcpy(p, &v, 8);
}
static inline uint32_t zp_get32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}
static inline uint64_t zp_get64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

/* First element of slice k of S of a dense table of `length`. */
static inline uint64_t zp_slice_at(uint64_t length, uint32_t k, uint32_t S)
{
    return (uint64_t)((unsigned __int128)length * k / S);
}

/* CRC32C (standard init and final xor), through ISA-L. */
uint32_t zp_snapshot_crc32c(const void *p, size_t n);

/* Write all of buf through EINTR and short writes: 0 or an errno. */
int zp_snapshot_write_all(int fd, const void *buf, size_t len);

/* fsync a directory (its entries durable): 0 or an errno. */
int zp_snapshot_write_fsync_dir(const char *path);

/* Write a file so that readers see the old one or the new one whole: create
 * tmp, fill it (fill returns 0 or an errno), fsync, close, rename to path,
 * fsync dir. Returns 0 or ZEPS_EIO with "<label> <path>: <step> failed:
 * <reason>" in err (tmp removed). */
int zp_snapshot_write_replace_file(const char *tmp, const char *path, const char *dir,
                                   const char *label, int (*fill)(int fd, const void *arg),
                                   const void *arg, char *err, size_t errlen);

/* Read exactly len bytes from offset 0 of fd; 0 or a zeps_err with a
 * message naming path in err. */
int zp_snapshot_read_file(int fd, const char *path, void *buf, size_t len, char *err,
                          size_t errlen);

#endif
