/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * qemu-img-lite and qemu-nbd-lite: opening an image from a file name or
 * --image-opts, and the sizes users type.
 */
#include <stdio.h>

#include "img.h"

/*
 * Test-only: with QIL_TEST_HOLD_OPEN=PATH in the environment, each image
 * img_open() opens is held open, and locked, until PATH (which this
 * creates) is removed, for at most a minute. tests/cli/test_locking.py
 * runs qemu-img against an image qemu-img-lite has open this way.
 */
static void img_test_hold_open(void)
{
    const char *path = g_getenv("QIL_TEST_HOLD_OPEN");

    if (!path || !g_file_set_contents(path, "", 0, NULL)) {
        return;
    }
    for (int i = 0; i < 6000 && g_file_test(path, G_FILE_TEST_EXISTS); i++) {
        g_usleep(10000);
    }
}

BlockDriverState *img_open(const char *name, const char *fmt,
                           bool image_opts, int flags)
{
    BlockDriverState *bs;
    Error *err = NULL;

    if (image_opts) {
        g_autoptr(GHashTable) opts = NULL;

        if (fmt) {
            img_error(NULL, "--image-opts and --format are mutually "
                      "exclusive");
            return NULL;
        }
        /* A bare first word is a file name, as "-drive file=..." */
        opts = qemu_opts_parse(name, "file.filename", &err);
        if (!opts) {
            img_error_free(name, err);
            return NULL;
        }
        bs = bdrv_open(NULL, NULL, opts, flags, &err);
    } else {
        bs = bdrv_open(name, fmt, NULL, flags, &err);
    }
    if (!bs) {
        /* qemu-img's words for every image it could not open */
        img_error(NULL, "Could not open '%s': %s", name,
                  error_get_pretty(err));
        img_error_hint(err);
        error_free(err);
        return NULL;
    }
    /* Long operations on it (resize's full preallocation) stop on a signal. */
    bdrv_set_interrupt(bs, &img_interrupted);
    if (bdrv_get_warning(bs)) {
        img_error(name, "warning: %s", bdrv_get_warning(bs));
    }
    img_test_hold_open();
    return bs;
}

int img_parse_size_as(const char *str, const char *what, uint64_t *size)
{
    /* Image sizes are signed in QEMU: stay below 2^63. */
    if (qemu_strtosz(str, size, NULL) < 0 || *size > G_MAXINT64) {
        /* qemu-img's two lines, word for word. */
        img_error(NULL, "Invalid %s specified. You may use k, M, G, T, P or "
                  "E suffixes for", what);
        img_error(NULL, "kilobytes, megabytes, gigabytes, terabytes, "
                  "petabytes and exabytes.");
        return -1;
    }
    if (qemu_strtosz_is_hex_with_suffix(str)) {
        img_error(NULL, "warning: Using a multiplier suffix on hex numbers "
                  "is deprecated: %s", str);
    }
    return 0;
}

int img_parse_size(const char *str, uint64_t *size)
{
    return img_parse_size_as(str, "image size", size);
}

char *img_size_to_str(uint64_t size)
{
    static const char *const suffixes[] = {
        "B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB",
    };
    double value = size;
    unsigned i = 0;

    /*
     * As qemu-img: the next unit from 1000 of the current one on, so the
     * number never needs four digits ("0.977 KiB" for 1000 bytes).
     */
    while (i + 1 < G_N_ELEMENTS(suffixes) && value >= 1000) {
        value /= 1024;
        i++;
    }
    return g_strdup_printf("%0.3g %s", value, suffixes[i]);
}

int img_parse_snapshot_param(const char *param, char **id, char **name)
{
    g_autoptr(GHashTable) sn = NULL;
    g_autofree char *unknown = NULL;

    *id = *name = NULL;
    if (!g_str_has_prefix(param, "snapshot.")) {
        /* A bare word: an id or a name (img_load_snapshot). */
        *name = g_strdup(param);
        return 0;
    }
    sn = qemu_opts_parse(param, NULL, NULL);
    if (sn) {
        *id = qemu_opt_take(sn, "snapshot.id");
        *name = qemu_opt_take(sn, "snapshot.name");
        unknown = qemu_opts_first_key(sn);
    }
    if (!sn || unknown) {
        if (unknown) {
            img_error(NULL, "Invalid parameter '%s'", unknown);
        }
        img_error(NULL, "Failed in parsing snapshot param '%s'", param);
        g_clear_pointer(id, g_free);
        g_clear_pointer(name, g_free);
        return -1;
    }
    return 0;
}

int img_load_snapshot(BlockDriverState *bs, const char *param,
                      const char *id, const char *name)
{
    Error *err = NULL;
    int ret;

    if (g_str_has_prefix(param, "snapshot.")) {
        ret = bdrv_snapshot_load_tmp(bs, id, name, &err);
    } else {
        /* As qemu-img: the word as an id first, then as a name. */
        ret = bdrv_snapshot_load_tmp(bs, name, NULL, NULL);
        if (ret < 0) {
            ret = bdrv_snapshot_load_tmp(bs, NULL, name, &err);
        }
    }
    if (ret < 0) {
        img_error(NULL, "Failed to load snapshot: %s", error_get_pretty(err));
        error_free(err);
        return -1;
    }
    return 0;
}
