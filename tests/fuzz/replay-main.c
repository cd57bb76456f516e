/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Replay a corpus without libFuzzer: the main() the fuzz targets are
 * linked with in the ordinary build. Each argument is a file or a
 * directory; every file (dot files excepted) is fed once to
 * LLVMFuzzerTestOneInput, in name order so a failure is reproducible.
 * A crash or sanitizer report fails the test; a missing path fails too,
 * so a renamed corpus cannot go silently unreplayed.
 */
#include <stdio.h>
#include <stdlib.h>

#include "fuzz-image.h"

static int replay_file(const char *path)
{
    g_autoptr(GError) err = NULL;
    g_autofree char *data = NULL;
    gsize len;

    if (!g_file_get_contents(path, &data, &len, &err)) {
        fprintf(stderr, "%s\n", err->message);
        return -1;
    }
    /*
     * libFuzzer hands over a heap copy exactly len bytes long, so that
     * ASan sees a read one byte past the end: so do we (the buffer of
     * g_file_get_contents() has a NUL after it).
     */
    g_autofree uint8_t *copy = fuzz_memdup((const uint8_t *)data, len);

    LLVMFuzzerTestOneInput(copy, len);
    return 0;
}

static gint compare_names(gconstpointer a, gconstpointer b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int replay_dir(const char *dir, unsigned *count)
{
    g_autoptr(GError) err = NULL;
    g_autoptr(GDir) d = g_dir_open(dir, 0, &err);
    g_autoptr(GPtrArray) names = g_ptr_array_new_with_free_func(g_free);
    const char *name;

    if (!d) {
        fprintf(stderr, "%s\n", err->message);
        return -1;
    }
    while ((name = g_dir_read_name(d))) {
        if (name[0] != '.') {
            g_ptr_array_add(names, g_build_filename(dir, name, NULL));
        }
    }
    g_ptr_array_sort(names, compare_names);
    for (guint i = 0; i < names->len; i++) {
        const char *path = names->pdata[i];

        if (g_file_test(path, G_FILE_TEST_IS_DIR)) {
            continue;
        }
        if (replay_file(path) < 0) {
            return -1;
        }
        (*count)++;
    }
    return 0;
}

int main(int argc, char **argv)
{
    unsigned total = 0;

    if (argc < 2) {
        fprintf(stderr, "usage: %s CORPUS-DIR|FILE...\n", argv[0]);
        return 2;
    }
    for (int i = 1; i < argc; i++) {
        unsigned count = 0;
        int ret;

        if (g_file_test(argv[i], G_FILE_TEST_IS_DIR)) {
            ret = replay_dir(argv[i], &count);
        } else {
            ret = replay_file(argv[i]);
            count = ret == 0;
        }
        if (ret < 0) {
            return 1;
        }
        printf("%s: %u input%s replayed\n", argv[i], count,
               count == 1 ? "" : "s");
        total += count;
    }
    printf("%u inputs replayed\n", total);
    return 0;
}
