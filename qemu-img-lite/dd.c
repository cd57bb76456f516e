/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * qemu-img-lite dd: copy an image's bytes into a new image, with dd(1)'s
 * operands, as qemu-img 7.2 does it: bs= (default 512), count= blocks,
 * skip= blocks of the input, if= and of=. The output is created (-O, raw
 * by default) with no creation options, so a LUKS output is refused as
 * qemu-img refuses it (no key-secret); a LUKS input is read through
 * --image-opts with its key-secret.
 *
 * Unlike qemu-img, the output gets its name only when complete and synced
 * (bdrv_create_finish()): an interrupted or failed dd leaves none.
 *
 * qemu-img 7.2 quirk, kept for byte-identical output: count= bounds the
 * input's end, not the amount copied, so with skip=S count=C it copies
 * C - S blocks.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "img.h"

/* Bytes per read and write at most (a whole number of blocks, or one). */
#define DD_CHUNK_BYTES (1024 * 1024)

typedef struct DdArgs {
    const char *in;
    const char *out;
    uint64_t bs;
    uint64_t count;
    uint64_t skip;
    bool has_count;
    bool has_skip;
} DdArgs;

/* qemu-img's cvtnum_full(): a size between min and max; prints errors. */
static int dd_parse_num(const char *name, const char *str, uint64_t min,
                        uint64_t max, uint64_t *value)
{
    if (qemu_strtosz(str, value, NULL) < 0) {
        img_error(NULL, "Invalid %s specified. You may use k, M, G, T, P or "
                  "E suffixes for", name);
        img_error(NULL, "kilobytes, megabytes, gigabytes, terabytes, "
                  "petabytes and exabytes.");
        return -1;
    }
    if (*value < min || *value > max) {
        img_error(NULL, "Invalid %s specified. Must be between %"
                  G_GUINT64_FORMAT " and %" G_GUINT64_FORMAT ".", name, min,
                  max);
        return -1;
    }
    return 0;
}

/* The operands NAME=VALUE (the last of a name wins, as in qemu-img). */
static int dd_parse_operands(int argc, char **argv, DdArgs *a)
{
    for (int i = 1; i < argc; i++) {
        g_autofree char *name = g_strdup(argv[i]);
        char *value = strchr(name, '=');
        int ret = 0;

        if (value) {
            *value++ = '\0';
        }
        if (value && g_str_equal(name, "if")) {
            a->in = argv[i] + 3;
        } else if (value && g_str_equal(name, "of")) {
            a->out = argv[i] + 3;
        } else if (value && g_str_equal(name, "bs")) {
            ret = dd_parse_num("bs", value, 1, G_MAXINT, &a->bs);
        } else if (value && g_str_equal(name, "count")) {
            ret = dd_parse_num("count", value, 0, G_MAXINT64, &a->count);
            a->has_count = true;
        } else if (value && g_str_equal(name, "skip")) {
            ret = dd_parse_num("skip", value, 0, G_MAXINT64, &a->skip);
            a->has_skip = true;
        } else {
            img_error(NULL, "unrecognized operand %s", name);
            return -1;
        }
        if (ret < 0) {
            return -1;
        }
    }
    if (!a->in || !a->out) {
        img_error(NULL, "Must specify both input and output files");
        return -1;
    }
    return 0;
}

/* Copy [in_pos, end) of src to dst from offset 0, a chunk at a time. */
static int dd_copy(BlockDriverState *src, BlockDriverState *dst,
                   uint64_t in_pos, uint64_t end, uint64_t bs)
{
    /* Whole blocks per chunk: the bytes are the same as block by block. */
    size_t chunk = bs >= DD_CHUNK_BYTES ? bs : ROUND_DOWN(DD_CHUNK_BYTES, bs);
    g_autofree uint8_t *buf = g_malloc(chunk);
    uint64_t out_pos = 0;
    Error *err = NULL;

    while (in_pos < end) {
        size_t n = MIN(chunk, end - in_pos);

        if (img_interrupted) {
            img_error(NULL, "Interrupted");
            return -1;
        }
        if (bdrv_pread(src, in_pos, buf, n, &err) < 0) {
            img_error(NULL, "error while reading from input image file: %s",
                      error_get_pretty(err));
            error_free(err);
            return -1;
        }
        if (bdrv_pwrite(dst, out_pos, buf, n, BDRV_REQ_MAY_CLOBBER,
                        &err) < 0) {
            img_error(NULL, "error while writing to output image file: %s",
                      error_get_pretty(err));
            error_free(err);
            return -1;
        }
        in_pos += n;
        out_pos += n;
    }
    return 0;
}

int img_dd(int argc, char **argv)
{
    g_autofree char *fmt = NULL, *out_fmt = NULL;
    g_autoptr(BlockDriverState) src = NULL;
    g_autoptr(BlockDriverState) dst = NULL;
    g_autoptr(GHashTable) opts = qemu_opts_new();
    gboolean image_opts = FALSE, force_share = FALSE;
    ImgCommonOpts common = { 0 };
    const GOptionEntry entries[] = {
        { "format", 'f', 0, G_OPTION_ARG_STRING, &fmt,
          "input image format (default: probe)", "FMT" },
        { "output-format", 'O', 0, G_OPTION_ARG_STRING, &out_fmt,
          "output image format (default: raw)", "FMT" },
        { "image-opts", 0, 0, G_OPTION_ARG_NONE, &image_opts,
          "if= is an option string (driver=...,file.filename=...)", NULL },
        { "force-share", 'U', 0, G_OPTION_ARG_NONE, &force_share,
          "take no lock on the input, and read it even while another "
          "process writes it", NULL },
        { NULL }
    };
    DdArgs a = { .bs = 512 };
    Error *err = NULL;
    uint64_t in_pos, end, out_size;
    bool skip_past_end;
    int64_t size;
    int ret = 1;

    if (img_parse_args(&argc, &argv, "if=INPUT of=OUTPUT [bs=N] [count=N] "
                       "[skip=N]",
                       "Copy INPUT's bytes into a new image OUTPUT: blocks of "
                       "bs bytes (default 512), count blocks at most, from "
                       "block skip on.",
                       "As qemu-img dd: OUTPUT is created with no creation "
                       "options (a LUKS output needs -o key-secret, which "
                       "dd has not: use convert); unlike qemu-img, an "
                       "existing file is never overwritten.\n\nExample:\n"
                       "  qemu-img-lite dd -f raw bs=1M count=16 if=disk.img "
                       "of=head.img", entries, &common) < 0) {
        goto out;
    }
    if (dd_parse_operands(argc, argv, &a) < 0) {
        goto out;
    }
    if (img_add_objects(common.objects) < 0) {
        goto out;
    }
    src = img_open(a.in, fmt, image_opts,
                   force_share ? BDRV_O_FORCE_SHARE : 0);
    if (!src) {
        goto out;
    }
    size = bdrv_getlength(src, &err);
    if (size < 0) {
        error_free(err);
        img_error(NULL, "Failed to get size for '%s'", a.in);
        goto out;
    }
    end = size;
    if (a.has_count && a.count <= G_MAXINT64 / a.bs &&
        a.count * a.bs < end) {
        end = a.count * a.bs;
    }
    /* Skipping past the end makes an empty output, as dd(1) and qemu-img. */
    skip_past_end = a.has_skip &&
        (a.skip > G_MAXINT64 / a.bs || a.skip * a.bs > end);
    if (skip_past_end) {
        in_pos = end;
        out_size = 0;
    } else {
        in_pos = a.skip * a.bs;
        out_size = end - in_pos;
    }
    g_hash_table_insert(opts, g_strdup("size"),
                        g_strdup_printf("%" G_GUINT64_FORMAT, out_size));
    /* Named only once complete, as convert's targets: a kill leaves none. */
    dst = bdrv_create_open(out_fmt ? out_fmt : "raw", a.out, opts, 0,
                           &img_interrupted, &err);
    if (!dst) {
        img_error(a.out, "error while creating output image: %s",
                  error_get_pretty(err));
        error_free(err);
        goto out;
    }
    if (skip_past_end) {
        img_error(a.in, "cannot skip to specified offset");
    }
    if (dd_copy(src, dst, in_pos, end, a.bs) < 0) {
        goto out;
    }
    if (bdrv_create_finish(dst, &err) < 0) {
        img_error_free(a.out, err);
        goto out;
    }
    ret = 0;

out:
    img_common_opts_clear(&common);
    return ret;
}
