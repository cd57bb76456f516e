/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * qemu-img-lite commit: write what an overlay holds into its backing
 * file, then (without -d) empty the overlay, as qemu-img commit does.
 *
 * Every image of the chain above the one committed into (BASE: the
 * backing file, or -b's) is opened without its backing file, so that
 * only what each holds is read, and BASE read-write on its own. BASE
 * grows first if the overlay is larger. Each run goes down from the
 * highest image that holds it; runs marked zero become zero writes. BASE
 * is synced before the overlay is emptied (not with -d or -b, as
 * qemu-img), so a crash leaves the data in one of the two at least.
 */
#include <stdio.h>
#include <string.h>

#include "img.h"

#define COMMIT_CHUNK (2 * 1024 * 1024)

/* What went wrong in the copy, in qemu-img's words (its block job's). */
static void commit_job_failed(Error *err)
{
    img_error(NULL, "Block job failed: %s", error_get_reason(err));
    error_free(err);
}

/*
 * Copy into base every run the images above it hold, layers[0] the top:
 * a run comes from the highest layer that holds it (a zero run there is
 * a zero write). Returns 0, or -1 (printed).
 */
static int commit_copy(GPtrArray *layers, BlockDriverState *base,
                       uint64_t size, uint64_t rate, ImgProgress *prog)
{
    g_autofree uint8_t *buf = g_malloc(COMMIT_CHUNK);
    gint64 start = g_get_monotonic_time();
    uint64_t copied = 0;
    Error *err = NULL;

    for (uint64_t offset = 0; offset < size;) {
        uint64_t n = MIN(COMMIT_CHUNK, size - offset);
        BlockDriverState *from = NULL;
        int st = 0;

        if (img_interrupted) {
            img_error(NULL, "Interrupted");
            return -1;
        }
        for (guint i = 0; i < layers->len && !from; i++) {
            BlockDriverState *l = g_ptr_array_index(layers, i);
            uint64_t pnum = 0;

            st = bdrv_block_status(l, offset, n, &pnum, NULL, NULL, &err);
            if (st < 0) {
                commit_job_failed(err);
                return -1;
            }
            /* The run ends where any layer's answer changes. */
            n = MIN(n, MAX(pnum, 1));
            if (st & BDRV_BLOCK_ALLOCATED) {
                from = l;
            }
        }
        if (from) {
            int r = (st & BDRV_BLOCK_ZERO) ?
                bdrv_pwrite_zeroes(base, offset, n, BDRV_REQ_MAY_UNMAP,
                                   &err) :
                (bdrv_pread(from, offset, buf, n, &err) < 0 ? -1 :
                 bdrv_pwrite(base, offset, buf, n, BDRV_REQ_MAY_CLOBBER,
                             &err));

            if (r < 0) {
                commit_job_failed(err);
                return -1;
            }
            copied += n;
            /* -r: bytes per second since the start. */
            while (rate && !img_interrupted &&
                   g_get_monotonic_time() - start <
                   (gint64)((double)copied * G_USEC_PER_SEC / rate)) {
                g_usleep(10000);
            }
        }
        offset += n;
        img_progress_update(prog, 100.0 * offset / size);
    }
    return 0;
}

/*
 * Whether -b NAME names the backing file of the image layer (file name
 * layer) whose header says stored, fully full: as QEMU's
 * bdrv_find_backing_image(), the name as stored, or NAME taken relative
 * to the layer's directory (not the working directory: qemu-iotests 020)
 * and the same file.
 */
static bool commit_is_base(const char *name, const char *layer,
                           const char *stored, const char *full)
{
    g_autofree char *dir = g_path_get_dirname(layer);
    g_autofree char *path = bdrv_backing_name_is_absolute(name) ?
        g_strdup(name) : g_build_filename(dir, name, NULL);
    g_autofree char *ra = NULL, *rb = NULL;

    if (g_str_equal(name, stored)) {
        return true;
    }
    ra = realpath(path, NULL);
    rb = realpath(full, NULL);
    return ra && rb && g_str_equal(ra, rb);
}

int img_commit(int argc, char **argv)
{
    g_autofree char *fmt = NULL, *cache = NULL, *base_name = NULL;
    g_autofree char *rate_str = NULL;
    g_autoptr(BlockDriverState) top = NULL;
    g_autoptr(BlockDriverState) base = NULL;
    g_autoptr(GPtrArray) layers = NULL;
    gboolean drop = FALSE, progress = FALSE, image_opts = FALSE;
    ImgCommonOpts common = { 0 };
    const GOptionEntry entries[] = {
        { "format", 'f', 0, G_OPTION_ARG_STRING, &fmt,
          "format of FILENAME (default: probe)", "FMT" },
        { "cache", 't', 0, G_OPTION_ARG_STRING, &cache,
          "cache mode: writeback (default), writethrough, none, directsync "
          "or unsafe", "CACHE" },
        { "base", 'b', 0, G_OPTION_ARG_STRING, &base_name,
          "the image of the backing chain to commit into (default: the "
          "backing file); implies -d", "BASE" },
        { "drop", 'd', 0, G_OPTION_ARG_NONE, &drop,
          "do not empty FILENAME afterwards", NULL },
        { "progress", 'p', 0, G_OPTION_ARG_NONE, &progress,
          "show progress", NULL },
        { "rate-limit", 'r', 0, G_OPTION_ARG_STRING, &rate_str,
          "at most RATE bytes per second", "RATE" },
        { "image-opts", 0, 0, G_OPTION_ARG_NONE, &image_opts,
          "FILENAME is an option string (driver=...,file.filename=...)",
          NULL },
        { NULL }
    };
    ImgProgress prog = { 0 };
    Error *err = NULL;
    uint64_t rate = 0;
    int64_t size, base_size;
    int flags = BDRV_O_RDWR, ret = 1;

    if (img_parse_args(&argc, &argv, "FILENAME",
                       "Commit the changes recorded in the overlay FILENAME "
                       "into its backing file.",
                       "Without -d, FILENAME is emptied afterwards: it reads "
                       "its backing file again.\n\nExample:\n  qemu-img-lite "
                       "commit overlay.qcow2",
                       entries, &common) < 0) {
        goto out;
    }
    if (argc != 2) {
        img_error(NULL, "Expecting one image file name");
        goto out;
    }
    if (cache) {
        if (g_str_equal(cache, "none") || g_str_equal(cache, "directsync")) {
            flags |= BDRV_O_NOCACHE;
        } else if (g_str_equal(cache, "unsafe")) {
            flags |= BDRV_O_NO_FLUSH;
        } else if (!g_str_equal(cache, "writeback") &&
                   !g_str_equal(cache, "writethrough")) {
            img_error(NULL, "Invalid cache option: %s", cache);
            goto out;
        }
    }
    if (rate_str && img_parse_size_as(rate_str, "rate limit", &rate) < 0) {
        goto out;
    }
    if (img_add_objects(common.objects) < 0) {
        goto out;
    }
    /* -b names the image to commit into, and implies -d (qemu-img's). */
    if (base_name) {
        drop = TRUE;
    }
    top = img_open(argv[1], fmt, image_opts,
                   (drop ? 0 : flags) | BDRV_O_NO_BACKING);
    if (!top) {
        goto out;
    }
    /*
     * The chain, one image at a time, each without its backing file: the
     * image committed into is opened for writing by itself, and this
     * process may not have it open twice.
     */
    layers = g_ptr_array_new_with_free_func((GDestroyNotify)bdrv_close);
    g_ptr_array_add(layers, g_steal_pointer(&top));
    for (;;) {
        BlockDriverState *l = g_ptr_array_index(layers, layers->len - 1);
        g_autoptr(BlockImageInfo) info = bdrv_get_image_info(l, &err);
        BlockDriverState *next;

        if (!info) {
            img_error_free(argv[1], err);
            goto out;
        }
        if (!info->backing_filename) {
            if (layers->len == 1) {
                img_error(NULL, "Image does not have a backing file");
            } else {
                img_error(NULL, "Did not find '%s' in the backing chain of "
                          "'%s'", base_name, argv[1]);
            }
            goto out;
        }
        /* A relative name over a node without a directory (quorum). */
        if (!info->full_backing_filename) {
            img_error(NULL, "Could not determine the actual path of backing "
                      "file '%s' of '%s'", info->backing_filename,
                      bdrv_get_filename(l));
            goto out;
        }
        if (!base_name ||
            commit_is_base(base_name, bdrv_get_filename(l),
                           info->backing_filename,
                           info->full_backing_filename)) {
            base = bdrv_open(info->full_backing_filename,
                             info->backing_filename_format, NULL, flags,
                             &err);
            if (!base) {
                img_error_free(NULL, err);
                goto out;
            }
            break;
        }
        next = bdrv_open(info->full_backing_filename,
                         info->backing_filename_format, NULL,
                         BDRV_O_NO_BACKING, &err);
        if (!next) {
            img_error_free(NULL, err);
            goto out;
        }
        g_ptr_array_add(layers, next);
    }
    top = NULL;
    bdrv_set_interrupt(base, &img_interrupted);
    size = bdrv_getlength(g_ptr_array_index(layers, 0), &err);
    base_size = size < 0 ? -1 : bdrv_getlength(base, &err);
    if (size < 0 || base_size < 0) {
        img_error_free(NULL, err);
        goto out;
    }
    /* The overlay may have grown past its backing file: so must it. */
    if (base_size < size &&
        bdrv_truncate(base, size, PREALLOC_MODE_OFF, &err) < 0) {
        commit_job_failed(err);
        goto out;
    }
    img_progress_init(&prog, progress && !common.quiet);
    if (commit_copy(layers, base, size, rate, &prog) < 0) {
        goto out;
    }
    /* Down first, durably: only then may the overlay let its data go. */
    if (bdrv_flush_final(base, &err) < 0) {
        img_error_free(NULL, err);
        goto out;
    }
    if (!drop && bdrv_make_empty(g_ptr_array_index(layers, 0), &err) < 0) {
        /* qemu-img's words, with the name as given (blkdebug:CONF:IMAGE) */
        img_error(NULL, "Failed to empty %s: %s", image_opts ?
                  bdrv_get_filename(g_ptr_array_index(layers, 0)) : argv[1],
                  error_get_reason(err));
        error_free(err);
        goto out;
    }
    if (!drop && bdrv_flush_final(g_ptr_array_index(layers, 0), &err) < 0) {
        img_error_free(NULL, err);
        goto out;
    }
    img_progress_update(&prog, 100.0);
    if (prog.enabled) {
        img_progress_end(&prog);
        prog.enabled = false;
    }
    if (!common.quiet) {
        printf("Image committed.\n");
    }
    ret = 0;

out:
    if (prog.enabled) {
        img_progress_end(&prog);
    }
    img_common_opts_clear(&common);
    return ret;
}
