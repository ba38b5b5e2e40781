/*
 * folder.h - a folder a process will write into (snapshot_dir, trace_dir,
 * result_dir), made ready at start: created with its parents if missing,
 * and proven writable by creating a file in it, so a folder that cannot
 * take a file stops the process at once with its name instead of failing
 * at the first snapshot or at the end of training. Creating a file is the
 * only test that holds for root too, whom mode bits do not stop (a
 * read-only mount, an immutable folder, a full disk still do).
 */
#ifndef ZP_FOLDER_H
#define ZP_FOLDER_H

#include <stddef.h>

/* Make `dir` (the value of key `key`, for the message) exist as a folder
 * and check that a file can be created in it. Returns 0, or ZEPS_ECONFIG
 * with a message naming the key, the folder and the reason in err. Any
 * thread. */
int zp_folder_ready(const char *key, const char *dir, char *err, size_t errlen);

/* Delete folder `dir` and the files in it, which must hold no folder (a
 * RocksDB checkpoint, say); errors are ignored (what is left stays). */
void zp_folder_remove_flat(const char *dir);

#endif
