/*
 * fuzz_config.c - libFuzzer target: the cluster-file parser
 * (common/config*.c over libconfig's config_read_string).
 *
 * The input is the file's text (cut at its first NUL, as a file read into a
 * string would be). Whatever it says must end in a config or in an error
 * message naming file and line; then, for a config read, the mode check
 * runs on it as the daemons run it.
 */
#include <stdlib.h>
#include <string.h>

#include "config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    memcpy(text, data, size);
    text[size] = 0;
    zp_config *cfg = calloc(1, sizeof(*cfg));
    char err[1024];
    if (zp_config_parse(cfg, text, "fuzz.conf", err, sizeof(err)) == 0) {
        static const char *const known[] = {"bsp", "async", "ssp", "weighted", NULL};
        zp_config_check_mode(cfg, known, err, sizeof(err));
    } else if (!err[0]) {
        abort(); /* refused without saying why */
    }
    free(cfg);
    free(text);
    return 0;
}
