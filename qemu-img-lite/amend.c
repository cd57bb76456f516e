/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * qemu-img-lite amend: add or remove the passphrases (key slots) of a LUKS
 * image, without copying data.
 */
#include "img.h"

/*
 * "-o help": the amend options of -f's format, or of the image's (opened
 * for its header only: no key needed). Returns the exit status.
 */
static int img_amend_help(GHashTable *opts, const char *fmt, bool image_opts,
                          const char *filename)
{
    g_autoptr(BlockDriverState) bs = NULL;

    if (!fmt || image_opts) {
        if (!filename) {
            img_error(NULL, "Expecting one image file name");
            return 1;
        }
        bs = img_open(filename, fmt, image_opts, BDRV_O_NO_IO);
        if (!bs) {
            return 1;
        }
        fmt = bdrv_get_format_name(bs);
    }
    return img_handle_amend_opts_help(opts, fmt) < 0;
}

/* qemu-img's amend_status_cb: the share done, in percent. */
static void img_amend_status(BlockDriverState *bs, uint64_t done,
                             uint64_t total, void *opaque)
{
    img_progress_print(opaque, total ? 100.0f * done / total : 0);
}

int img_amend(int argc, char **argv)
{
    g_autofree char *fmt = NULL;
    g_auto(GStrv) opt_strs = NULL;
    g_autoptr(GHashTable) opts = NULL;
    g_autoptr(BlockDriverState) bs = NULL;
    gboolean image_opts = FALSE, force = FALSE, progress = FALSE;
    ImgProgress prog;
    ImgCommonOpts common = { 0 };
    const GOptionEntry entries[] = {
        { "format", 'f', 0, G_OPTION_ARG_STRING, &fmt,
          "image format (default: probe)", "FMT" },
        { "options", 'o', 0, G_OPTION_ARG_STRING_ARRAY, &opt_strs,
          "state=active|inactive,keyslot=N,old-secret=ID,new-secret=ID,"
          "iter-time=MS", "OPTIONS" },
        { "image-opts", 0, 0, G_OPTION_ARG_NONE, &image_opts,
          "FILENAME is an option string (driver=...,file.filename=...)",
          NULL },
        { "force", 0, 0, G_OPTION_ARG_NONE, &force,
          "allow erasing the last active key slot", NULL },
        { "progress", 'p', 0, G_OPTION_ARG_NONE, &progress,
          "show progress (qcow2 refcount_bits changes report it)", NULL },
        { NULL }
    };
    g_autofree char *key_secret = NULL;
    const char *filename;
    Error *err = NULL;
    int flags = BDRV_O_RDWR;
    int ret = 1;

    if (img_parse_args(&argc, &argv, "-o OPTIONS FILENAME",
                       "Change the key slots of a LUKS image.",
                       "Options (-o):\n"
                       "  state=active,new-secret=ID[,keyslot=N][,iter-time=MS]"
                       "   add a passphrase\n"
                       "  state=inactive,keyslot=N | old-secret=ID"
                       "         remove passphrases\n\n"
                       "Example:\n  qemu-img-lite amend --object secret,id=s0,"
                       "data=old --object secret,id=s1,data=new \\\n"
                       "      --image-opts driver=luks,key-secret=s0,"
                       "file.filename=disk.luks \\\n"
                       "      -o state=active,new-secret=s1",
                       entries, &common) < 0) {
        goto out;
    }
    opts = img_parse_create_opts(opt_strs);
    if (!opts) {
        goto out;
    }
    if (g_hash_table_contains(opts, "help") ||
        g_hash_table_contains(opts, "?")) {
        ret = img_amend_help(opts, fmt, image_opts, argc == 2 ? argv[1]
                                                              : NULL);
        goto out;
    }
    if (!opt_strs) {
        img_error(NULL, "Must specify options (-o)");
        goto out;
    }
    if (argc != 2) {
        img_error(NULL, "Expecting one image file name");
        goto out;
    }
    filename = argv[1];
    if (img_add_objects(common.objects) < 0) {
        goto out;
    }
    /*
     * Adding a key slot needs the master key, so the image is unlocked with
     * key-secret; erasing slots can do without (no key-secret: header only).
     */
    if (image_opts || g_str_has_prefix(filename, "json:")) {
        g_autoptr(GHashTable) o = image_opts ?
            qemu_opts_parse(filename, "file.filename", NULL) :
            qemu_opts_from_json(filename + 5, NULL);
        key_secret = o ? g_strdup(g_hash_table_lookup(o, "key-secret"))
                       : NULL;
        /* qcow2's LUKS header is unlocked with encrypt.key-secret. */
        if (o && !key_secret) {
            key_secret = g_strdup(g_hash_table_lookup(o,
                                                      "encrypt.key-secret"));
        }
    }
    if (!key_secret) {
        flags |= BDRV_O_NO_IO;
    }
    bs = img_open(filename, fmt, image_opts, flags);
    if (!bs) {
        goto out;
    }
    /*
     * Done only once it is on the disk: a failed sync is a failure.
     * qemu-img's amend errors name no image (error_report_err()); a
     * flush error names its file itself.
     */
    img_progress_init(&prog, progress && !common.quiet);
    if (bdrv_amend(bs, opts, force, img_amend_status, &prog, &err) < 0 ||
        bdrv_flush_final(bs, &err) < 0) {
        img_progress_end(&prog);
        img_error_free(NULL, err);
        goto out;
    }
    img_progress_print(&prog, 100);
    img_progress_end(&prog);
    ret = 0;

out:
    img_common_opts_clear(&common);
    return ret;
}
