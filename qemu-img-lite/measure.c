/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * qemu-img-lite measure: the file size a new image needs, to hold a given
 * size or the contents of an existing image.
 */
#include <stdio.h>

#include "img.h"

int img_measure(int argc, char **argv)
{
    g_autofree char *fmt = NULL, *out_fmt = NULL, *output = NULL;
    g_autofree char *size_str = NULL, *snapshot = NULL;
    g_autofree char *sn_id = NULL, *sn_name = NULL;
    g_auto(GStrv) opt_strs = NULL;
    g_autoptr(GHashTable) opts = NULL;
    g_autoptr(BlockDriverState) bs = NULL;
    gboolean image_opts = FALSE, force_share = FALSE;
    ImgCommonOpts common = { 0 };
    const GOptionEntry entries[] = {
        { "format", 'f', 0, G_OPTION_ARG_STRING, &fmt,
          "format of FILENAME (default: probe)", "FMT" },
        { "target-format", 'O', 0, G_OPTION_ARG_STRING, &out_fmt,
          "format of the image to measure for (default raw)", "FMT" },
        { "options", 'o', 0, G_OPTION_ARG_STRING_ARRAY, &opt_strs,
          "creation options of the new image", "OPTIONS" },
        { "size", 0, 0, G_OPTION_ARG_STRING, &size_str,
          "measure for a new image of this size", "SIZE" },
        { "image-opts", 0, 0, G_OPTION_ARG_NONE, &image_opts,
          "FILENAME is an option string (driver=...,file.filename=...)",
          NULL },
        { "output", 0, 0, G_OPTION_ARG_STRING, &output,
          "output format: human (default) or json", "FMT" },
        { "snapshot", 'l', 0, G_OPTION_ARG_STRING, &snapshot,
          "an internal snapshot of FILENAME (qemu-img's option; none is "
          "supported yet)", "SNAPSHOT" },
        { "force-share", 'U', 0, G_OPTION_ARG_NONE, &force_share,
          "take no lock on FILENAME, and read it even while another "
          "process writes it", NULL },
        { NULL }
    };
    BlockMeasureInfo info;
    uint64_t size;
    Error *err = NULL;
    bool json;
    int r, ret = 1;

    if (img_parse_args(&argc, &argv, "[--size N | FILENAME]",
                       "Print the file size a new image needs to hold SIZE "
                       "bytes, or the contents of FILENAME.",
                       "Example:\n  qemu-img-lite measure -O luks --size 1G",
                       entries, &common) < 0) {
        goto out;
    }
    /* qemu-img checks -l's form while it parses the options. */
    if (snapshot && img_parse_snapshot_param(snapshot, &sn_id,
                                             &sn_name) < 0) {
        goto out;
    }
    if (img_parse_output_format(output, &json) < 0) {
        goto out;
    }
    if (!out_fmt) {
        out_fmt = g_strdup("raw");
    }
    opts = img_parse_create_opts(opt_strs);
    if (!opts) {
        goto out;
    }
    /* (qemu-img 7.2 refuses "-o help" here; listing is more useful.) */
    r = img_handle_opts_help(opts, out_fmt, NULL);
    if (r) {
        ret = r < 0;
        goto out;
    }
    if (img_add_objects(common.objects) < 0) {
        goto out;
    }
    /* qemu-img's checks, in its order. */
    if (argc > 2) {
        img_error(NULL, "At most one filename argument is allowed.");
        goto out;
    }
    if (argc < 2 && (image_opts || fmt || snapshot)) {
        img_error(NULL, "--image-opts, -f, and -l require a filename "
                  "argument.");
        goto out;
    }
    if (size_str && argc == 2) {
        img_error(NULL, "--size N cannot be used together with a filename.");
        goto out;
    }
    if (!size_str && argc != 2) {
        img_error(NULL, "Either --size N or one filename must be specified.");
        goto out;
    }
    if (size_str) {
        if (img_parse_size(size_str, &size) < 0) {
            goto out;
        }
    } else {
        int64_t len;

        bs = img_open(argv[1], fmt, image_opts,
                      force_share ? BDRV_O_FORCE_SHARE : 0);
        if (!bs) {
            goto out;
        }
        if (snapshot &&
            img_load_snapshot(bs, snapshot, sn_id, sn_name) < 0) {
            goto out;
        }
        len = bdrv_getlength(bs, &err);
        if (len < 0) {
            img_error_free(argv[1], err);
            goto out;
        }
        size = len;
    }
    if (bdrv_measure(out_fmt, opts, bs, size, &info, &err) < 0) {
        img_error_free(NULL, err);
        goto out;
    }
    /* qemu-img's order: bitmaps first in JSON, last for humans. */
    if (json) {
        printf("{\n");
        if (info.has_bitmaps) {
            printf("    \"bitmaps\": %" G_GUINT64_FORMAT ",\n", info.bitmaps);
        }
        printf("    \"required\": %" G_GUINT64_FORMAT ",\n"
               "    \"fully-allocated\": %" G_GUINT64_FORMAT "\n}\n",
               info.required, info.fully_allocated);
    } else {
        printf("required size: %" G_GUINT64_FORMAT "\n"
               "fully allocated size: %" G_GUINT64_FORMAT "\n",
               info.required, info.fully_allocated);
        if (info.has_bitmaps) {
            printf("bitmaps size: %" G_GUINT64_FORMAT "\n", info.bitmaps);
        }
    }
    ret = 0;

out:
    img_common_opts_clear(&common);
    return ret;
}
