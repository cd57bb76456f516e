/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * qemu-img-lite bitmap: add, remove, clear, enable, disable and merge
 * persistent dirty bitmaps of a qcow2 image, as qemu-img 7.2 does: the
 * operations in the order given, on one bitmap, the first failure ending
 * the run ("Operation add on bitmap b0 failed: ...").
 */
#include <stdio.h>
#include <string.h>

#include "img.h"

typedef struct ImgBitmapAction {
    BdrvBitmapOp op;
    bool merge;
    char *source;                   /* --merge SOURCE */
} ImgBitmapAction;

/* GOption callbacks get no state of their own: the actions, in order. */
static GArray *img_bitmap_actions;

static void img_bitmap_action_clear(gpointer p)
{
    g_free(((ImgBitmapAction *)p)->source);
}

static gboolean img_bitmap_take_action(const char *option, const char *value,
                                       gpointer data, GError **error)
{
    static const struct {
        const char *name;
        BdrvBitmapOp op;
    } ops[] = {
        { "--add", BDRV_BITMAP_ADD },
        { "--remove", BDRV_BITMAP_REMOVE },
        { "--clear", BDRV_BITMAP_CLEAR },
        { "--enable", BDRV_BITMAP_ENABLE },
        { "--disable", BDRV_BITMAP_DISABLE },
    };
    ImgBitmapAction a = { 0 };

    if (g_str_equal(option, "--merge")) {
        a.merge = true;
        a.source = g_strdup(value);
    } else {
        for (size_t i = 0; i < G_N_ELEMENTS(ops); i++) {
            if (g_str_equal(option, ops[i].name)) {
                a.op = ops[i].op;
            }
        }
    }
    g_array_append_val(img_bitmap_actions, a);
    return TRUE;
}

static const char *img_bitmap_op_name(const ImgBitmapAction *a)
{
    static const char *const names[] = {
        [BDRV_BITMAP_ADD] = "add",
        [BDRV_BITMAP_REMOVE] = "remove",
        [BDRV_BITMAP_CLEAR] = "clear",
        [BDRV_BITMAP_ENABLE] = "enable",
        [BDRV_BITMAP_DISABLE] = "disable",
    };

    return a->merge ? "merge" : names[a->op];
}

/* qemu-img's checks of the option combination, in its order. */
static int img_bitmap_check_args(bool has_gran, const char *src_file,
                                 const char *src_fmt)
{
    bool add = false, merge = false;

    for (guint i = 0; i < img_bitmap_actions->len; i++) {
        const ImgBitmapAction *a = &g_array_index(img_bitmap_actions,
                                                  ImgBitmapAction, i);

        add |= !a->merge && a->op == BDRV_BITMAP_ADD;
        merge |= a->merge;
    }
    if (img_bitmap_actions->len == 0) {
        img_error(NULL, "Need at least one of --add, --remove, --clear, "
                  "--enable, --disable, or --merge");
    } else if (has_gran && !add) {
        img_error(NULL, "granularity only supported with --add");
    } else if (src_fmt && !src_file) {
        img_error(NULL, "-F only supported with -b");
    } else if (src_file && !merge) {
        img_error(NULL, "Merge bitmap source file only supported with "
                  "--merge");
    } else {
        return 0;
    }
    return -1;
}

static int img_bitmap_run(BlockDriverState *bs, BlockDriverState *src,
                          const char *bitmap, uint32_t granularity)
{
    Error *err = NULL;

    for (guint i = 0; i < img_bitmap_actions->len; i++) {
        const ImgBitmapAction *a = &g_array_index(img_bitmap_actions,
                                                  ImgBitmapAction, i);
        int ret;

        if (a->merge) {
            ret = bdrv_bitmap_merge(bs, bitmap, src, a->source, &err);
        } else {
            ret = bdrv_bitmap_op(bs, a->op, bitmap, granularity, &err);
        }
        if (ret < 0) {
            img_error(NULL, "Operation %s on bitmap %s failed: %s",
                      img_bitmap_op_name(a), bitmap, error_get_pretty(err));
            error_free(err);
            return -1;
        }
    }
    if (bdrv_bitmaps_store(bs, &err) < 0) {
        img_error_free(bdrv_get_filename(bs), err);
        return -1;
    }
    return 0;
}

int img_bitmap(int argc, char **argv)
{
    g_autofree char *fmt = NULL, *src_file = NULL, *src_fmt = NULL;
    g_autofree char *gran_str = NULL;
    g_autoptr(BlockDriverState) bs = NULL;
    g_autoptr(BlockDriverState) src = NULL;
    gboolean image_opts = FALSE;
    ImgCommonOpts common = { 0 };
    const GOptionEntry entries[] = {
        { "add", 0, G_OPTION_FLAG_NO_ARG, G_OPTION_ARG_CALLBACK,
          img_bitmap_take_action, "create the bitmap (enabled)", NULL },
        { "remove", 0, G_OPTION_FLAG_NO_ARG, G_OPTION_ARG_CALLBACK,
          img_bitmap_take_action, "delete the bitmap", NULL },
        { "clear", 0, G_OPTION_FLAG_NO_ARG, G_OPTION_ARG_CALLBACK,
          img_bitmap_take_action, "mark every granule clean", NULL },
        { "enable", 0, G_OPTION_FLAG_NO_ARG, G_OPTION_ARG_CALLBACK,
          img_bitmap_take_action, "let writes mark the bitmap", NULL },
        { "disable", 0, G_OPTION_FLAG_NO_ARG, G_OPTION_ARG_CALLBACK,
          img_bitmap_take_action, "stop writes marking the bitmap", NULL },
        { "merge", 0, G_OPTION_FLAG_FILENAME, G_OPTION_ARG_CALLBACK,
          img_bitmap_take_action, "set the bits that bitmap SOURCE has "
          "(of -b SOURCE_FILE, or of the image)", "SOURCE" },
        { "granularity", 'g', 0, G_OPTION_ARG_STRING, &gran_str,
          "bytes per bit for --add (a power of 2, 512 to 2G; default: the "
          "cluster size within 4k..64k)", "SIZE" },
        { "source-file", 'b', 0, G_OPTION_ARG_STRING, &src_file,
          "the image holding --merge's SOURCE", "SOURCE_FILE" },
        { "source-format", 'F', 0, G_OPTION_ARG_STRING, &src_fmt,
          "its format", "SOURCE_FMT" },
        { "format", 'f', 0, G_OPTION_ARG_STRING, &fmt,
          "image format (default: probe)", "FMT" },
        { "image-opts", 0, 0, G_OPTION_ARG_NONE, &image_opts,
          "FILENAME is an option string (driver=...,file.filename=...)",
          NULL },
        { NULL }
    };
    uint64_t granularity = 0;
    int ret = 1;

    img_bitmap_actions = g_array_new(FALSE, TRUE, sizeof(ImgBitmapAction));
    g_array_set_clear_func(img_bitmap_actions, img_bitmap_action_clear);
    if (img_parse_args(&argc, &argv, "(--merge SOURCE | --add | --remove | "
                       "--clear | --enable | --disable)... FILENAME BITMAP",
                       "Change the persistent dirty bitmap BITMAP of a qcow2 "
                       "image, the operations applied in the order given.",
                       "Example:\n  qemu-img-lite bitmap --add -g 64k "
                       "--disable disk.qcow2 backup-1",
                       entries, &common) < 0) {
        goto out;
    }
    if (gran_str) {
        if (img_parse_size_as(gran_str, "granularity", &granularity) < 0) {
            goto out;
        }
        /* qemu-img keeps 32 bits of it: 4G and up are refused. */
        if (granularity > UINT32_MAX) {
            granularity = 1;
        }
    }
    if (img_bitmap_check_args(gran_str != NULL, src_file, src_fmt) < 0) {
        goto out;
    }
    if (argc != 3) {
        img_error(NULL, "Expecting filename and bitmap name");
        goto out;
    }
    if (img_add_objects(common.objects) < 0) {
        goto out;
    }
    /* Bitmaps are neither data nor encrypted: no key, no backing file. */
    bs = img_open(argv[1], fmt, image_opts,
                  BDRV_O_RDWR | BDRV_O_NO_IO | BDRV_O_NO_BACKING);
    if (!bs) {
        goto out;
    }
    if (src_file) {
        src = img_open(src_file, src_fmt, false,
                       BDRV_O_NO_IO | BDRV_O_NO_BACKING);
        if (!src) {
            goto out;
        }
    }
    if (img_bitmap_run(bs, src, argv[2], granularity) == 0) {
        ret = 0;
    }

out:
    g_clear_pointer(&img_bitmap_actions, g_array_unref);
    img_common_opts_clear(&common);
    return ret;
}
