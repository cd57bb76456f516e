/*
 * qemu-img-lite create / measure / resize / amend: the commands that make
 * an image or change its size or key slots, without copying data.
 */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "img.h"

/*
 * The creation options in the order qemu-img prints them in its
 * "Formatting ..." line, and describes them for "-o help".
 */
static const struct {
    const char *name;
    const char *help;
    bool luks_only;
} img_create_opts[] = {
    { "size", "Virtual disk size", false },
    { "key-secret", "ID of the secret that holds the LUKS passphrase", true },
    { "cipher-alg", "Name of encryption cipher algorithm (aes-128, aes-192, "
      "aes-256, serpent-128/192/256, twofish-128/192/256, cast5-128, 3des; "
      "default aes-256)", true },
    { "cipher-mode", "Name of encryption cipher mode (xts, cbc, ctr, ecb; "
      "default xts)", true },
    { "ivgen-alg", "Name of IV generator algorithm (plain, plain64, essiv; "
      "default plain64)", true },
    { "ivgen-hash-alg", "Name of IV generator hash algorithm (for essiv, "
      "default sha256)", true },
    { "hash-alg", "Name of encryption hash algorithm (sha1, sha256, sha512, "
      "...; default sha256)", true },
    { "iter-time", "Time to spend in PBKDF in milliseconds (default 2000)",
      true },
    { "preallocation", "Preallocation mode (allowed values: off, falloc, "
      "full)", false },
    { "detached-header", "Create a LUKS header only, to be used as the "
      "'header' child of an image whose data lives in another file", true },
    { "align-payload", "Align the LUKS payload to this many 512-byte "
      "sectors, as cryptsetup (2048 = 1 MiB; default: QEMU's layout)", true },
};

static void img_print_create_help(const char *fmt)
{
    printf("Supported options:\n");
    for (size_t i = 0; i < G_N_ELEMENTS(img_create_opts); i++) {
        if (!img_create_opts[i].luks_only || g_str_equal(fmt, "luks")) {
            printf("  %-16s - %s\n", img_create_opts[i].name,
                   img_create_opts[i].help);
        }
    }
}

static bool img_opts_want_help(GHashTable *opts)
{
    return g_hash_table_contains(opts, "help") ||
        g_hash_table_contains(opts, "?");
}

/* "Formatting 'x', fmt=luks size=N key-secret=s0 iter-time=10" */
static void img_print_formatting(const char *filename, const char *fmt,
                                 GHashTable *opts)
{
    printf("Formatting '%s', fmt=%s", filename, fmt);
    for (size_t i = 0; i < G_N_ELEMENTS(img_create_opts); i++) {
        const char *v = g_hash_table_lookup(opts, img_create_opts[i].name);

        if (v) {
            printf(" %s=%s", img_create_opts[i].name, v);
        }
    }
    printf("\n");
    fflush(stdout);
}

/* Take "-o help" apart from the real options: true if help was printed. */
static bool img_handle_opts_help(GHashTable *opts, const char *fmt)
{
    if (img_opts_want_help(opts)) {
        img_print_create_help(fmt);
        return true;
    }
    return false;
}

int img_create(int argc, char **argv)
{
    g_autofree char *fmt = NULL;
    g_auto(GStrv) opt_strs = NULL;
    g_autoptr(GHashTable) opts = NULL;
    ImgCommonOpts common = { 0 };
    const GOptionEntry entries[] = {
        { "format", 'f', 0, G_OPTION_ARG_STRING, &fmt,
          "image format: raw (default) or luks", "FMT" },
        { "options", 'o', 0, G_OPTION_ARG_STRING_ARRAY, &opt_strs,
          "creation options, comma separated ('-o help' lists them)",
          "OPTIONS" },
        { NULL }
    };
    const char *filename;
    Error *err = NULL;
    int ret = 1;

    if (img_parse_args(&argc, &argv, "FILENAME [SIZE]",
                       "Create a new disk image FILENAME of SIZE bytes "
                       "(suffixes k, M, G, T: 1G, 1.5G, 512M, 4k).",
                       "Unlike qemu-img, an existing file is never "
                       "overwritten.\n\nExample:\n  qemu-img-lite create -f "
                       "luks --object secret,id=s0,data=pass -o "
                       "key-secret=s0 disk.luks 1G",
                       entries, &common) < 0) {
        goto out;
    }
    if (!fmt) {
        fmt = g_strdup("raw");
    }
    opts = img_parse_create_opts(opt_strs);
    if (!opts) {
        goto out;
    }
    if (img_handle_opts_help(opts, fmt)) {
        ret = 0;
        goto out;
    }
    if (argc < 2 || argc > 3) {
        img_error(NULL, argc < 2 ? "Expecting image file name" :
                  "Unexpected argument: %s", argv[argc - 1]);
        goto out;
    }
    filename = argv[1];
    if (img_add_objects(common.objects) < 0) {
        goto out;
    }
    if (argc == 3) {
        uint64_t size;

        if (img_parse_size(argv[2], &size) < 0) {
            goto out;
        }
        g_hash_table_insert(opts, g_strdup("size"),
                            g_strdup_printf("%" G_GUINT64_FORMAT, size));
    } else if (!g_hash_table_contains(opts, "size") &&
               !g_hash_table_contains(opts, "detached-header")) {
        img_error(NULL, "Image creation needs a size parameter");
        goto out;
    }
    if (!common.quiet) {
        img_print_formatting(filename, fmt, opts);
    }
    if (bdrv_create(fmt, filename, opts, &err) < 0) {
        img_error_free(filename, err);
        goto out;
    }
    if (img_interrupted) {
        unlink(filename);
        img_error(filename, "Interrupted: the new image was removed");
        goto out;
    }
    ret = 0;

out:
    img_common_opts_clear(&common);
    return ret;
}

int img_measure(int argc, char **argv)
{
    g_autofree char *fmt = NULL, *out_fmt = NULL, *output = NULL;
    g_autofree char *size_str = NULL;
    g_auto(GStrv) opt_strs = NULL;
    g_autoptr(GHashTable) opts = NULL;
    g_autoptr(BlockDriverState) bs = NULL;
    gboolean image_opts = FALSE;
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
        { NULL }
    };
    uint64_t size, required, full;
    Error *err = NULL;
    bool json;
    int ret = 1;

    if (img_parse_args(&argc, &argv, "[--size N | FILENAME]",
                       "Print the file size a new image needs to hold SIZE "
                       "bytes, or the contents of FILENAME.",
                       "Example:\n  qemu-img-lite measure -O luks --size 1G",
                       entries, &common) < 0) {
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
    if (img_handle_opts_help(opts, out_fmt)) {
        ret = 0;
        goto out;
    }
    if (img_add_objects(common.objects) < 0) {
        goto out;
    }
    if ((size_str != NULL) == (argc == 2) || argc > 2) {
        img_error(NULL, "Either --size N or one filename must be specified.");
        goto out;
    }
    if (size_str) {
        if (img_parse_size(size_str, &size) < 0) {
            goto out;
        }
    } else {
        int64_t len;

        bs = img_open(argv[1], fmt, image_opts, 0);
        if (!bs) {
            goto out;
        }
        len = bdrv_getlength(bs, &err);
        if (len < 0) {
            img_error_free(argv[1], err);
            goto out;
        }
        size = len;
    }
    if (bdrv_measure(out_fmt, opts, size, &required, &full, &err) < 0) {
        img_error_free(NULL, err);
        goto out;
    }
    if (json) {
        printf("{\n    \"required\": %" G_GUINT64_FORMAT ",\n"
               "    \"fully-allocated\": %" G_GUINT64_FORMAT "\n}\n",
               required, full);
    } else {
        printf("required size: %" G_GUINT64_FORMAT "\n"
               "fully allocated size: %" G_GUINT64_FORMAT "\n",
               required, full);
    }
    ret = 0;

out:
    img_common_opts_clear(&common);
    return ret;
}

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
    int64_t old_size;
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
        prealloc = prealloc_mode_parse(prealloc_str);
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
        img_error_free(filename, err);
        goto out;
    }
    if (!common.quiet) {
        printf("Image resized.\n");
    }
    ret = 0;

out:
    img_common_opts_clear(&common);
    return ret;
}

int img_amend(int argc, char **argv)
{
    g_autofree char *fmt = NULL;
    g_auto(GStrv) opt_strs = NULL;
    g_autoptr(GHashTable) opts = NULL;
    g_autoptr(BlockDriverState) bs = NULL;
    gboolean image_opts = FALSE, force = FALSE;
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
    if (image_opts) {
        g_autoptr(GHashTable) o = qemu_opts_parse(filename, "file.filename",
                                                  NULL);
        key_secret = o ? g_strdup(g_hash_table_lookup(o, "key-secret"))
                       : NULL;
    }
    if (!key_secret) {
        flags |= BDRV_O_NO_IO;
    }
    bs = img_open(filename, fmt, image_opts, flags);
    if (!bs) {
        goto out;
    }
    if (bdrv_amend(bs, opts, force, &err) < 0) {
        img_error_free(filename, err);
        goto out;
    }
    ret = 0;

out:
    img_common_opts_clear(&common);
    return ret;
}
