/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * qemu-img-lite check: the consistency of an image's metadata, and its
 * repair with -r, as qemu-img 7.2 reports them (its img_check): the
 * findings on stderr as they come, the summary on stdout, exit 0 when
 * clean, 1 when the check could not complete, 2 for corruptions, 3 for
 * leaks, 63 for a format without checks. After a repair the image is
 * checked again, and that second check is what is reported.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "img.h"

/* qemu-img's exit status for "This image format does not support checks". */
#define IMG_CHECK_NOT_SUPPORTED 63

static void check_print_finding(void *opaque, bool is_error, const char *msg)
{
    if (is_error) {
        img_error(NULL, "%s", msg);
    } else {
        fprintf(stderr, "%s\n", msg);
    }
}

static void check_print_human(const BdrvCheckResult *r)
{
    if (!(r->corruptions || r->leaks || r->check_errors)) {
        printf("No errors were found on the image.\n");
    } else {
        if (r->corruptions) {
            printf("\n%" PRId64 " errors were found on the image.\n"
                   "Data may be corrupted, or further writes to the image "
                   "may corrupt it.\n", r->corruptions);
        }
        if (r->leaks) {
            printf("\n%" PRId64 " leaked clusters were found on the image.\n"
                   "This means waste of disk space, but no harm to data.\n",
                   r->leaks);
        }
        if (r->check_errors) {
            printf("\n%" PRId64 " internal errors have occurred during the "
                   "check.\n", r->check_errors);
        }
    }
    if (r->total_clusters && r->allocated_clusters) {
        printf("%" PRId64 "/%" PRId64 " = %0.2f%% allocated, %0.2f%% "
               "fragmented, %0.2f%% compressed clusters\n",
               r->allocated_clusters, r->total_clusters,
               r->allocated_clusters * 100.0 / r->total_clusters,
               r->fragmented_clusters * 100.0 / r->allocated_clusters,
               r->compressed_clusters * 100.0 / r->allocated_clusters);
    }
    if (r->image_end_offset) {
        printf("Image end offset: %" PRId64 "\n", r->image_end_offset);
    }
}

/*
 * qemu-img's ImageCheck as JSON: its keys come out in the order of QEMU's
 * QDict hash buckets (tdb_hash(key) % 512), not in the schema's order;
 * optional members only when non-zero, as qemu-img sets them.
 */
static void check_print_json(const BdrvCheckResult *r, const char *filename,
                             const char *format)
{
    const struct {
        const char *key;
        int64_t value;
        bool always;
    } members[] = {
        { "image-end-offset", r->image_end_offset },
        { "compressed-clusters", r->compressed_clusters },
        { "total-clusters", r->total_clusters },
        { "corruptions", r->corruptions },
        { "corruptions-fixed", r->corruptions_fixed },
        { "check-errors", r->check_errors, true },
        { "leaks", r->leaks },
        { "leaks-fixed", r->leaks_fixed },
        { "allocated-clusters", r->allocated_clusters },
    };
    g_autoptr(GString) out = g_string_new("{\n");

    for (size_t i = 0; i < G_N_ELEMENTS(members); i++) {
        if (members[i].value || members[i].always) {
            g_string_append_printf(out, "    \"%s\": %" PRId64 ",\n",
                                   members[i].key, members[i].value);
        }
    }
    g_string_append(out, "    \"filename\": ");
    img_json_append_quoted(out, filename);
    g_string_append(out, ",\n    \"format\": ");
    img_json_append_quoted(out, format);
    if (r->fragmented_clusters) {
        g_string_append_printf(out, ",\n    \"fragmented-clusters\": %"
                               PRId64, r->fragmented_clusters);
    }
    g_string_append(out, "\n}\n");
    fputs(out->str, stdout);
}

/*
 * -T: qemu-img's cache modes; none and directsync read (and repair)
 * around the page cache (O_DIRECT), the others through it.
 */
static int check_parse_cache(const char *cache, int *flags)
{
    static const char *const modes[] = {
        "none", "directsync", "writeback", "writethrough", "unsafe",
    };

    if (!cache) {
        return 0;
    }
    for (size_t i = 0; i < G_N_ELEMENTS(modes); i++) {
        if (g_str_equal(cache, modes[i])) {
            if (i < 2) {
                *flags |= BDRV_O_NOCACHE;
            }
            return 0;
        }
    }
    img_error(NULL, "Invalid source cache option: %s", cache);
    return -1;
}

/* qemu-img's error_exit() hint, after a usage error. */
static void img_check_usage_hint(void)
{
    fprintf(stderr, "Try 'qemu-img-lite --help' for more information\n");
}

static int check_parse_repair(const char *repair, BdrvCheckMode *fix)
{
    *fix = 0;
    if (!repair) {
        return 0;
    }
    if (g_str_equal(repair, "leaks")) {
        *fix = BDRV_FIX_LEAKS;
    } else if (g_str_equal(repair, "all")) {
        *fix = BDRV_FIX_LEAKS | BDRV_FIX_ERRORS;
    } else {
        img_error(NULL, "Unknown option value for -r (expecting 'leaks' or "
                  "'all'): %s", repair);
        img_check_usage_hint();
        return -1;
    }
    return 0;
}

/*
 * Check (and repair); a repair is followed by a second, read-only check,
 * which is what the caller reports, with the first one's repair counts.
 */
static int check_run(BlockDriverState *bs, BdrvCheckMode fix, bool human,
                     BdrvCheckResult *res)
{
    int64_t leaks_fixed, corruptions_fixed;
    Error *err = NULL;
    int ret;

    res->report = check_print_finding;
    ret = bdrv_check(bs, res, fix);
    if (ret < 0 || !(res->corruptions_fixed || res->leaks_fixed)) {
        return ret;
    }
    /* A repair is only done once it is on the disk. */
    if (bdrv_flush_final(bs, &err) < 0) {
        img_error_free(NULL, err);
        return -EIO;
    }
    leaks_fixed = res->leaks_fixed;
    corruptions_fixed = res->corruptions_fixed;

    if (human) {
        printf("The following inconsistencies were found and repaired:\n\n"
               "    %" PRId64 " leaked clusters\n"
               "    %" PRId64 " corruptions\n\n"
               "Double checking the fixed image now...\n",
               leaks_fixed, corruptions_fixed);
    }
    ret = bdrv_check(bs, res, 0);
    res->leaks_fixed = leaks_fixed;
    res->corruptions_fixed = corruptions_fixed;
    return ret;
}

/*
 * As img_open(), with qemu-img check's message for an image that does not
 * open: "Could not open 'NAME': ...".
 */
static BlockDriverState *check_open(const char *name, const char *fmt,
                                    bool image_opts, int flags)
{
    g_autoptr(GHashTable) opts = NULL;
    BlockDriverState *bs;
    Error *err = NULL;

    if (image_opts) {
        if (fmt) {
            img_error(NULL, "--image-opts and --format are mutually "
                      "exclusive");
            return NULL;
        }
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
        img_error(NULL, "Could not open '%s': %s", name,
                  error_get_pretty(err));
        img_error_hint(err);
        error_free(err);
        return NULL;
    }
    if (bdrv_get_warning(bs)) {
        img_error(name, "warning: %s", bdrv_get_warning(bs));
    }
    return bs;
}

int img_check(int argc, char **argv)
{
    g_autofree char *fmt = NULL, *output = NULL, *repair = NULL;
    g_autofree char *cache = NULL;
    g_autoptr(BlockDriverState) bs = NULL;
    gboolean image_opts = FALSE, force_share = FALSE;
    ImgCommonOpts common = { 0 };
    const GOptionEntry entries[] = {
        { "format", 'f', 0, G_OPTION_ARG_STRING, &fmt,
          "format of FILENAME (default: probe)", "FMT" },
        { "image-opts", 0, 0, G_OPTION_ARG_NONE, &image_opts,
          "FILENAME is an option string (driver=...,file.filename=...)",
          NULL },
        { "output", 0, 0, G_OPTION_ARG_STRING, &output,
          "output format: human (default) or json", "FMT" },
        { "repair", 'r', 0, G_OPTION_ARG_STRING, &repair,
          "repair: 'leaks' frees leaked clusters, 'all' also fixes "
          "refcounts that are too low and COPIED flags, and rebuilds the "
          "refcount structures if need be", "leaks|all" },
        { "force-share", 'U', 0, G_OPTION_ARG_NONE, &force_share,
          "take no lock on FILENAME, and read it even while another "
          "process writes it", NULL },
        { "source-cache", 'T', 0, G_OPTION_ARG_STRING, &cache,
          "cache mode: writeback (default), none or directsync (O_DIRECT); "
          "unsafe and writethrough as writeback", "CACHE" },
        { NULL }
    };
    BdrvCheckResult res = { 0 };
    BdrvCheckMode fix;
    int flags = BDRV_O_CHECK;
    bool json;
    int ret;

    if (img_parse_args(&argc, &argv, "FILENAME",
                       "Check the consistency of an image's metadata (qcow2: "
                       "reference counts, L1/L2 tables), and repair it with "
                       "-r.",
                       "Exit status: 0 no errors, 1 the check failed, 2 "
                       "corruptions, 3 leaked clusters, 63 the format has no "
                       "checks.", entries, &common) < 0 ||
        img_parse_output_format(output, &json) < 0 ||
        check_parse_repair(repair, &fix) < 0) {
        ret = 1;
        goto out;
    }
    if (check_parse_cache(cache, &flags) < 0) {
        ret = 1;
        goto out;
    }
    if (argc != 2) {
        img_error(NULL, "Expecting one image file name");
        img_check_usage_hint();
        ret = 1;
        goto out;
    }
    if (img_add_objects(common.objects) < 0) {
        ret = 1;
        goto out;
    }
    if (fix) {
        flags |= BDRV_O_RDWR;
    }
    if (force_share) {
        if (fix) {
            img_error(NULL, "Could not open '%s': force-share=on can only "
                      "be used with read-only images", argv[1]);
            ret = 1;
            goto out;
        }
        flags |= BDRV_O_FORCE_SHARE;
    }
    bs = check_open(argv[1], fmt, image_opts, flags);
    if (!bs) {
        ret = 1;
        goto out;
    }

    ret = check_run(bs, fix, !json && !common.quiet, &res);
    if (ret == -ENOTSUP) {
        img_error(NULL, "This image format does not support checks");
        ret = IMG_CHECK_NOT_SUPPORTED;
        goto out;
    }
    if (ret == 0 && !common.quiet) {
        if (json) {
            check_print_json(&res, argv[1], bdrv_get_format_name(bs));
        } else {
            check_print_human(&res);
        }
    }
    if (ret < 0 || res.check_errors) {
        if (ret < 0) {
            img_error(NULL, "Check failed: %s", g_strerror(-ret));
        } else {
            img_error(NULL, "Check failed");
        }
        ret = 1;
    } else if (res.corruptions) {
        ret = 2;
    } else if (res.leaks) {
        ret = 3;
    } else {
        ret = 0;
    }

out:
    img_common_opts_clear(&common);
    return ret;
}
