/*
 * scratch.h - where tests write: every Check program makes its folders and
 * files under one root, $TMPDIR/zt-XXXXXX ($TMPDIR unset or empty: /tmp),
 * made by zt_run_suite before the tests and removed with everything in it
 * after them, passed or failed (Check runs each test in a forked child that
 * a failed assertion ends with _exit: nothing in the child can clean up).
 * With $ZEPS_TEST_KEEP set the root stays, and its path is printed.
 * Shell tests do the same through tests/support/lib.sh (zt_workdir).
 */
#ifndef ZT_SCRATCH_H
#define ZT_SCRATCH_H

#include <stddef.h>

/* Make the root, named after the program, and point $ZT_SCRATCH_ROOT at
 * it (children inherit it).
 * Returns 0, or -1 (nothing made: tests then use $TMPDIR itself). */
int zt_scratch_begin(void);

/* Remove the root with everything in it (or keep it and say so). */
void zt_scratch_end(void);

/* "<root>/<name>" into buf: the root, else $TMPDIR, else /tmp. */
void zt_scratch_path(char *buf, size_t len, const char *name);

/* A new folder "<root>/<name>-XXXXXX" (mkdtemp) into buf; 0 or -1. */
int zt_scratch_dir(char *buf, size_t len, const char *name);

/* A new empty file "<root>/<name>-XXXXXX" (mkstemp) into buf, closed; 0 or -1. */
int zt_scratch_file(char *buf, size_t len, const char *name);

/* Remove folder `dir` with everything in it: 0 once it is gone, or -1. */
int zt_scratch_remove(const char *dir);

/* Write `text` to the file at path (made, or emptied first) and close it;
 * asserts with Check, so only a test may call it. */
void zt_scratch_write(const char *path, const char *text);

#endif
