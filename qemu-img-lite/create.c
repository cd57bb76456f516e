/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * qemu-img-lite create: make a new image. Also the creation options (-o)
 * that create and measure share: their table, "-o help" and the
 * "Formatting ..." line.
 */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "img.h"

/*
 * The creation options in the order qemu-img prints them in its
 * "Formatting ..." line (the others are not shown there).
 */
static const char *const img_formatting_opts[] = {
    "size", "key-secret", "cipher-alg", "cipher-mode", "ivgen-alg",
    "ivgen-hash-alg", "hash-alg", "iter-time", "preallocation",
    "detached-header", "align-payload",
};

/* "  name=<type>   - help", qemu-img's layout. */
static void img_print_option_list(const char *title, GPtrArray *list)
{
    printf("%s\n", title);
    for (guint i = 0; i < list->len; i++) {
        const BlockOptionDesc *d = g_ptr_array_index(list, i);
        g_autofree char *lhs = g_strdup_printf("%s=<%s>", d->name, d->type);

        printf("  %-22s - %s\n", lhs, d->help);
    }
}

static bool img_opts_want_help(GHashTable *opts)
{
    return g_hash_table_contains(opts, "help") ||
        g_hash_table_contains(opts, "?");
}

/* qemu-img's order for qcow2, with the defaults it prints. */
static const struct {
    const char *name;
    const char *dflt;
} img_qcow2_formatting[] = {
    { "encryption" }, { "encrypt.format" }, { "encrypt.key-secret" }, { "encrypt.cipher-alg" },
    { "encrypt.cipher-mode" }, { "encrypt.ivgen-alg" },
    { "encrypt.ivgen-hash-alg" }, { "encrypt.hash-alg" },
    { "encrypt.iter-time" }, { "cluster_size", "65536" },
    { "extended_l2", "off" }, { "preallocation" },
    { "compression_type", "zlib" }, { "size" }, { "compat" },
    { "backing_file" }, { "backing_fmt" }, { "data_file" },
    { "data_file_raw" }, { "lazy_refcounts", "off" },
    { "refcount_bits", "16" },
};

/*
 * " name=value", a comma in the value doubled as in an option string
 * (qemu-img's qemu_opts_print(): a json: backing file name, 020).
 */
static void img_print_formatting_opt(const char *name, const char *value)
{
    g_auto(GStrv) parts = g_strsplit(value, ",", -1);
    g_autofree char *escaped = g_strjoinv(",,", parts);

    printf(" %s=%s", name, escaped);
}

/* "Formatting 'x', fmt=luks size=N key-secret=s0 iter-time=10" */
static void img_print_formatting(const char *filename, const char *fmt,
                                 GHashTable *opts)
{
    printf("Formatting '%s', fmt=%s", filename, fmt);
    for (size_t i = 0; g_str_equal(fmt, "qcow2") &&
         i < G_N_ELEMENTS(img_qcow2_formatting); i++) {
        const char *v = g_hash_table_lookup(opts,
                                            img_qcow2_formatting[i].name);

        uint64_t bytes;

        v = v ? v : img_qcow2_formatting[i].dflt;
        /* qemu-img prints the cluster size in bytes ("4k": 4096). */
        if (v && g_str_equal(img_qcow2_formatting[i].name, "cluster_size") &&
            qemu_strtosz(v, &bytes, NULL) == 0) {
            printf(" cluster_size=%" G_GUINT64_FORMAT, bytes);
        } else if (v) {
            img_print_formatting_opt(img_qcow2_formatting[i].name, v);
        }
    }
    for (size_t i = 0; !g_str_equal(fmt, "qcow2") &&
         i < G_N_ELEMENTS(img_formatting_opts); i++) {
        const char *v = g_hash_table_lookup(opts, img_formatting_opts[i]);

        if (v) {
            img_print_formatting_opt(img_formatting_opts[i], v);
        }
    }
    printf("\n");
    fflush(stdout);
}

int img_handle_opts_help(GHashTable *opts, const char *fmt,
                         const char *filename)
{
    g_autoptr(GPtrArray) list = NULL;
    g_autofree char *title = NULL;
    Error *err = NULL;

    if (!img_opts_want_help(opts)) {
        return 0;
    }
    /*
     * As qemu-img: with the target's file name, the protocol's options
     * too, under one title; without, the format's and a hint.
     */
    list = bdrv_create_option_list(fmt, filename, &err);
    if (!list) {
        img_error_free(NULL, err);
        return -1;
    }
    if (filename) {
        img_print_option_list("Supported options:", list);
        return 1;
    }
    title = g_strdup_printf("Supported %s options:", fmt);
    img_print_option_list(title, list);
    printf("\nThe protocol level may support further options.\n"
           "Specify the target filename to include those options.\n");
    return 1;
}

int img_handle_amend_opts_help(GHashTable *opts, const char *fmt)
{
    g_autoptr(GPtrArray) list = NULL;
    g_autofree char *title = NULL;
    Error *err = NULL;

    if (!img_opts_want_help(opts)) {
        return 0;
    }
    list = bdrv_amend_option_list(fmt, &err);
    if (!list) {
        img_error_free(NULL, err);
        return -1;
    }
    title = g_strdup_printf("Amend options for '%s':", fmt);
    img_print_option_list(title, list);
    return 1;
}

/*
 * -o size=2M and iter-time=0x10 are printed as qemu-img prints them, in
 * decimal ("size=2097152", "iter-time=16"); a value that does not parse
 * is left for the driver to refuse.
 */
void img_normalize_size_opt(GHashTable *opts)
{
    static const char *const numbers[] = { "iter-time", "align-payload" };
    const char *str = g_hash_table_lookup(opts, "size");
    uint64_t v;

    if (str && qemu_strtosz(str, &v, NULL) == 0) {
        if (qemu_strtosz_is_hex_with_suffix(str)) {
            /* (qemu-img says it twice, we once) */
            img_error(NULL, "warning: Using a multiplier suffix on hex "
                      "numbers is deprecated: %s", str);
        }
        g_hash_table_insert(opts, g_strdup("size"),
                            g_strdup_printf("%" G_GUINT64_FORMAT, v));
    }
    for (size_t i = 0; i < G_N_ELEMENTS(numbers); i++) {
        str = g_hash_table_lookup(opts, numbers[i]);
        if (str && qemu_strtou64_opt(str, &v) == 0) {
            g_hash_table_insert(opts, g_strdup(numbers[i]),
                                g_strdup_printf("%" G_GUINT64_FORMAT, v));
        }
    }
}

void img_warn_if_padded(const char *filename, BlockDriverState *bs,
                        uint64_t size)
{
    int64_t len = bdrv_getlength(bs, NULL);

    /* Whole 512-byte sectors are what every qemu-img format keeps. */
    if (len > 0 && (uint64_t)len > ROUND_UP(size, BDRV_SECTOR_SIZE)) {
        img_error(filename, "warning: sector-size pads the image from %"
                  G_GUINT64_FORMAT " to %" G_GINT64_FORMAT " bytes (whole "
                  "encryption sectors); the padding reads as zeroes", size,
                  len);
    }
}

/* After create: the padding warning, which needs the image's layout. */
static void img_create_check_padding(const char *filename, const char *fmt,
                                     uint64_t size)
{
    g_autoptr(BlockDriverState) bs = bdrv_open(filename, fmt, NULL,
                                               BDRV_O_NO_IO, NULL);

    if (bs) {
        img_warn_if_padded(filename, bs, size);
    }
}

/* Whether key is a creation option of the format or the protocol. */
static bool img_create_option_known(GPtrArray *list, const char *key)
{
    /* Taken by the formats but not listed, as in qemu-img's lists. */
    static const char *const unlisted[] = {
        "encryption", "data_file", "data_file_raw", "x-backing-unchecked",
    };

    for (guint i = 0; i < list->len; i++) {
        const BlockOptionDesc *d = g_ptr_array_index(list, i);

        if (g_str_equal(d->name, key)) {
            return true;
        }
    }
    for (size_t i = 0; i < G_N_ELEMENTS(unlisted); i++) {
        if (g_str_equal(unlisted[i], key)) {
            return true;
        }
    }
    return false;
}

/*
 * What qemu-img refuses before its "Formatting" line (bdrv_img_create()):
 * an option that neither the format nor the protocol takes; an empty
 * backing file name or the image's own; a backing file that does not open
 * (unless -u) or has no format. A backing file that opens gives the size
 * if none was given. Everything else is the format's to refuse, after the
 * line, as in qemu-img. Prints errors.
 */
static int img_create_precheck(const char *filename, const char *path,
                               const char *fmt, GHashTable *opts,
                               bool unsafe)
{
    g_autoptr(GPtrArray) list = bdrv_create_option_list(fmt, filename, NULL);
    const char *backing = g_hash_table_lookup(opts, "backing_file");
    const char *backing_fmt = g_hash_table_lookup(opts, "backing_fmt");
    g_autofree char *dir = NULL, *full = NULL;
    g_autoptr(BlockDriverState) bs = NULL;
    GHashTableIter it;
    gpointer key;
    Error *err = NULL;
    uint64_t size;
    int64_t len;

    g_hash_table_iter_init(&it, opts);
    while (list && g_hash_table_iter_next(&it, &key, NULL)) {
        if (!img_create_option_known(list, key)) {
            img_error(filename, "Invalid parameter '%s'", (char *)key);
            return -1;
        }
    }
    /* -o size= is parsed with the options, in qemu-img's words */
    if (g_hash_table_contains(opts, "size") &&
        qemu_strtosz(g_hash_table_lookup(opts, "size"), &size, NULL) < 0) {
        img_error(filename, "Parameter 'size' expects a non-negative number "
                  "below 2^64\nOptional suffix k, M, G, T, P or E means "
                  "kilo-, mega-, giga-, tera-, peta-\nand exabytes, "
                  "respectively.");
        return -1;
    }
    if (!backing) {
        return 0;
    }
    if (!*backing) {
        img_error(filename, "Expected backing file name, got empty string");
        return -1;
    }
    if (g_str_equal(backing, filename)) {
        img_error(filename, "Error: Trying to create an image with the "
                  "same filename as the backing file");
        return -1;
    }
    if (unsafe) {
        if (!backing_fmt) {
            img_error(filename, "Backing file specified without backing "
                      "format");
            return -1;
        }
        return 0;
    }
    /* Relative to the new image; other protocols' names are the format's. */
    if (!bdrv_names_local_file(filename)) {
        return 0;
    }
    dir = g_path_get_dirname(path);
    full = bdrv_backing_name_is_absolute(backing) ?
        g_strdup(backing) : g_build_filename(dir, backing, NULL);
    bs = bdrv_open(full, backing_fmt, NULL, BDRV_O_NO_IO, &err);
    if (!bs) {
        img_error(filename, "%s\nCould not open backing image.",
                  error_get_pretty(err));
        error_free(err);
        return -1;
    }
    if (!backing_fmt) {
        img_error(filename, "Backing file specified without backing format\n"
                  "Detected format of %s.", bdrv_get_format_name(bs));
        return -1;
    }
    len = bdrv_getlength(bs, NULL);
    if (!g_hash_table_contains(opts, "size") && len >= 0) {
        g_hash_table_insert(opts, g_strdup("size"),
                            g_strdup_printf("%" G_GINT64_FORMAT, len));
    }
    return 0;
}

/*
 * No size given: an image on a block device fills it (qemu-img wants a
 * size): its size is what the device holds after the format's header.
 * Anywhere else the size is missing. Prints errors.
 */
static int img_create_size_from_device(const char *filename,
                                       const char *fmt, GHashTable *opts)
{
    int64_t dev_size = bdrv_block_device_size(filename);
    g_autoptr(GHashTable) copy = NULL;
    BlockMeasureInfo m = { 0 };
    uint64_t header;
    Error *err = NULL;

    if (dev_size < 0) {
        img_error(NULL, "Image creation needs a size parameter");
        return -1;
    }
    /* What a format needs for no data is its header. */
    copy = qemu_opts_copy(opts);
    if (bdrv_measure(fmt, copy, NULL, 0, &m, &err) < 0) {
        img_error_free(filename, err);
        return -1;
    }
    header = m.required;
    if (header > (uint64_t)dev_size) {
        img_error(filename, "Cannot grow device files");
        return -1;
    }
    g_hash_table_insert(opts, g_strdup("size"),
                        g_strdup_printf("%" G_GUINT64_FORMAT,
                                        ROUND_DOWN(dev_size - header,
                                                   BDRV_SECTOR_SIZE)));
    return 0;
}

int img_create(int argc, char **argv)
{
    g_autofree char *fmt = NULL;
    g_autofree char *backing = NULL, *backing_fmt = NULL;
    g_auto(GStrv) opt_strs = NULL;
    g_autoptr(GHashTable) opts = NULL, shown = NULL;
    gboolean unsafe = FALSE;
    ImgCommonOpts common = { 0 };
    const GOptionEntry entries[] = {
        { "format", 'f', 0, G_OPTION_ARG_STRING, &fmt,
          "image format: raw (default), luks or qcow2", "FMT" },
        { "backing", 'b', 0, G_OPTION_ARG_STRING, &backing,
          "backing file of a new qcow2 overlay (-o backing_file)", "FILE" },
        { "backing-format", 'F', 0, G_OPTION_ARG_STRING, &backing_fmt,
          "its format, raw or qcow2 (-o backing_fmt)", "FMT" },
        { "options", 'o', 0, G_OPTION_ARG_STRING_ARRAY, &opt_strs,
          "creation options, comma separated ('-o help' lists them)",
          "OPTIONS" },
        { "unsafe", 'u', 0, G_OPTION_ARG_NONE, &unsafe,
          "do not open the backing file (-b): it may not exist yet; SIZE "
          "is then needed", NULL },
        { NULL }
    };
    const char *filename;
    g_autofree char *path = NULL;
    Error *err = NULL;
    bool padding_possible;
    uint64_t size = 0;
    int r, ret = 1;

    if (img_parse_args(&argc, &argv, "FILENAME [SIZE]",
                       "Create a new disk image FILENAME of SIZE bytes "
                       "(suffixes k, M, G, T: 1G, 1.5G, 512M, 4k).",
                       "An existing file is replaced, but only by the "
                       "complete new image.\n\nExample:\n  qemu-img-lite "
                       "create -f "
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
    r = img_handle_opts_help(opts, fmt, argc >= 2 ? argv[1] : NULL);
    if (r) {
        ret = r < 0;
        goto out;
    }
    if (backing) {
        g_hash_table_insert(opts, g_strdup("backing_file"),
                            g_steal_pointer(&backing));
    }
    if (backing_fmt) {
        g_hash_table_insert(opts, g_strdup("backing_fmt"),
                            g_steal_pointer(&backing_fmt));
    }
    if (argc < 2 || argc > 3) {
        img_error(NULL, argc < 2 ? "Expecting image file name" :
                  "Unexpected argument: %s", argv[argc - 1]);
        goto out;
    }
    filename = argv[1];
    /* "file:x" is x; another protocol (json: among them) is refused. */
    path = bdrv_parse_filename(filename, &err);
    if (!path) {
        img_error_free(filename, err);
        goto out;
    }
    if (img_add_objects(common.objects) < 0) {
        goto out;
    }
    /* As qemu-img: a size in -o and one on the command line conflict. */
    if (argc == 3 && g_hash_table_contains(opts, "size")) {
        img_error(filename, "The image size must be specified only once");
        goto out;
    }
    if (argc == 3) {
        if (img_parse_size(argv[2], &size) < 0) {
            goto out;
        }
        g_hash_table_insert(opts, g_strdup("size"),
                            g_strdup_printf("%" G_GUINT64_FORMAT, size));
    }
    if (img_create_precheck(filename, path, fmt, opts, unsafe) < 0) {
        goto out;
    }
    if (g_hash_table_contains(opts, "backing_file")) {
        /* the size came from the backing file, or the format says */
    } else if (!g_hash_table_contains(opts, "size") &&
               !g_hash_table_contains(opts, "detached-header") &&
               img_create_size_from_device(path, fmt, opts) < 0) {
        goto out;
    }
    img_normalize_size_opt(opts);
    shown = qemu_opts_copy(opts);
    /* -u: the format is told not to open the backing file (not shown). */
    if (unsafe && g_hash_table_contains(opts, "backing_file")) {
        g_hash_table_insert(opts, g_strdup("x-backing-unchecked"),
                            g_strdup("on"));
    }
    /* Only a requested sector size pads more than 512-byte rounding. */
    padding_possible = g_hash_table_contains(opts, "sector-size") &&
        !g_hash_table_contains(opts, "detached-header");
    if (padding_possible && argc != 3 &&
        qemu_strtosz(g_hash_table_lookup(opts, "size"), &size, NULL) < 0) {
        padding_possible = false;   /* bdrv_create reports the bad size */
    }
    /*
     * The line comes before the format's own refusals, as in qemu-img
     * (which then leaves no image either).
     */
    if (!common.quiet) {
        img_print_formatting(filename, fmt, shown);
    }
    /* Interrupted, it fails: the new image is never named. */
    if (bdrv_create(fmt, path, opts, &img_interrupted, &err) < 0) {
        img_error_free(filename, err);
        goto out;
    }
    if (padding_possible) {
        img_create_check_padding(path, fmt, size);
    }
    ret = 0;

out:
    img_common_opts_clear(&common);
    return ret;
}
