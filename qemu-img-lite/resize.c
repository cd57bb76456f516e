/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * qemu-img-lite resize: change the virtual size of an image (grow it, or
 * shrink it with --shrink).
 */
#include <stdio.h>

#include "img.h"

int img_resize(int argc, char **argv)
{
    g_autofree char *fmt = NULL, *prealloc_str = NULL;
    g_autoptr(BlockDriverState) bs = NULL;
    g_autofree char *size_arg = NULL;
    gboolean image_opts = FALSE, shrink = FALSE;
    ImgCommonOpts common = { 0 };
    const GOptionEntry entries[] = {
        { "format", 'f', 0, G_OPTION_ARG_STRING, &fmt,
          "image format (default: probe)", "FMT" },
        { "image-opts", 0, 0, G_OPTION_ARG_NONE, &image_opts,
          "FILENAME is an option string (driver=...,file.filename=...)",
          NULL },
        { "preallocation", 0, 0, G_OPTION_ARG_STRING, &prealloc_str,
          "how to allocate the added space: off (default), falloc, full",
          "MODE" },
        { "shrink", 0, 0, G_OPTION_ARG_NONE, &shrink,
          "allow making the image smaller (data past the end is lost)",
          NULL },
        { NULL }
    };
    int prealloc = PREALLOC_MODE_OFF;
    int64_t old_size, new_size;
    uint64_t size;
    Error *err = NULL;
    const char *filename;
    int sign = 0;
    int ret = 1;

    /*
     * "-1G" would be taken for an option: take the size off the end first,
     * as qemu-img does.
     */
    if (argc > 2 && argv[argc - 1][0] == '-' &&
        g_ascii_isdigit(argv[argc - 1][1])) {
        size_arg = g_strdup(argv[--argc]);
    }
    if (img_parse_args(&argc, &argv, "FILENAME [+|-]SIZE",
                       "Change the virtual size of an image to SIZE, or by "
                       "+SIZE / -SIZE.",
                       "Example:\n  qemu-img-lite resize --image-opts "
                       "driver=luks,key-secret=s0,file.filename=disk.luks "
                       "+1G --object secret,id=s0,data=pass",
                       entries, &common) < 0) {
        goto out;
    }
    if (!size_arg && argc == 3) {
        size_arg = g_strdup(argv[--argc]);
    }
    if (argc != 2 || !size_arg) {
        img_error(NULL, "Expecting image file name and size");
        goto out;
    }
    filename = argv[1];
    if (prealloc_str) {
        prealloc = g_str_equal(prealloc_str, "metadata") ?
                   PREALLOC_MODE_METADATA : prealloc_mode_parse(prealloc_str);
        if (prealloc < 0) {
            img_error(NULL, "Invalid preallocation mode '%s'", prealloc_str);
            goto out;
        }
    }
    if (size_arg[0] == '+' || size_arg[0] == '-') {
        sign = size_arg[0] == '+' ? 1 : -1;
    }
    if (img_parse_size(size_arg + (sign != 0), &size) < 0 ||
        img_add_objects(common.objects) < 0) {
        goto out;
    }
    /* Only the layout matters: a LUKS image needs no key to be resized. */
    bs = img_open(filename, fmt, image_opts, BDRV_O_RDWR | BDRV_O_NO_IO);
    if (!bs) {
        goto out;
    }
    old_size = bdrv_getlength(bs, &err);
    if (old_size < 0) {
        img_error_free(filename, err);
        goto out;
    }
    if (sign > 0) {
        size += old_size;
    } else if (sign < 0) {
        if (size > (uint64_t)old_size) {
            img_error(NULL, "New image size must be positive");
            goto out;
        }
        size = old_size - size;
    }
    /* As qemu-img: no format here takes an empty image's bitmaps either */
    if (size == 0) {
        img_error(NULL, "New image size must be positive");
        goto out;
    }
    if (size < (uint64_t)old_size && !shrink) {
        img_error(NULL, "Use the --shrink option to perform a shrink "
                  "operation.");
        goto out;
    }
    if (size < (uint64_t)old_size && prealloc != PREALLOC_MODE_OFF) {
        img_error(NULL, "Preallocation can only be used for growing images");
        goto out;
    }
    if (bdrv_truncate(bs, size, prealloc, &err) < 0) {
        /* As qemu-img: the message alone ("Cannot resize device files"). */
        img_error_free(NULL, err);
        goto out;
    }
    /* "Image resized." only once the new size is on the disk. */
    if (bdrv_flush_final(bs, &err) < 0) {
        img_error_free(filename, err);
        /*
         * A grown image goes back to its old size (what it held is
         * unchanged): the command failed, the image is as it was. The
         * flush stays failed (sticky), so this is all that can be done.
         */
        if (size > (uint64_t)old_size) {
            bdrv_truncate(bs, old_size, PREALLOC_MODE_OFF, NULL);
        }
        goto out;
    }
    /*
     * The driver keeps whole encryption sectors (docs/luks.md, "Size
     * rounding"); past the 512-byte rounding every format does, say so.
     */
    new_size = bdrv_getlength(bs, NULL);
    if (new_size > 0 &&
        (uint64_t)new_size > ROUND_UP(size, BDRV_SECTOR_SIZE)) {
        img_error(filename, "warning: the size was rounded up to %"
                  G_GINT64_FORMAT " bytes (whole encryption sectors)",
                  new_size);
    }
    if (!common.quiet) {
        printf("Image resized.\n");
    }
    ret = 0;

out:
    img_common_opts_clear(&common);
    return ret;
}
