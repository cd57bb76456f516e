/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * qemu-img-lite rebase: give an overlay another backing file (or none),
 * as qemu-img rebase does.
 *
 * Safe mode (the default): every range the overlay does not hold itself
 * is read from the old backing file and from the new one; where they
 * differ, the old data is written into the overlay, so that what the
 * overlay reads stays the same. Then the header names the new backing
 * file. Unsafe mode (-u) only changes the header: for a backing file that
 * was renamed or moved.
 *
 * The comparison is sector by sector (512 bytes), in chunks of 2 MiB, as
 * qemu-img's: the overlay gets the same clusters allocated as qemu-img
 * would allocate.
 */
#include <stdio.h>
#include <string.h>

#include "img.h"

/* qemu-img's IO_BUF_SIZE. */
#define REBASE_CHUNK (2 * 1024 * 1024)

/*
 * Whether the first sector of a and b differ; *pnum: how many bytes from
 * the start (whole sectors, or to the end) share that answer (qemu-img's
 * compare_buffers()).
 */
static bool rebase_sectors_differ(const uint8_t *a, const uint8_t *b,
                                  size_t bytes, size_t *pnum)
{
    size_t first = MIN(bytes, BDRV_SECTOR_SIZE);
    bool differ = memcmp(a, b, first) != 0;
    size_t n = first;

    while (n < bytes) {
        size_t len = MIN(bytes - n, BDRV_SECTOR_SIZE);

        if ((memcmp(a + n, b + n, len) != 0) != differ) {
            break;
        }
        n += len;
    }
    *pnum = n;
    return differ;
}

/* Print progress each 2% (qemu-img's step for rebase), and at 0 and 100. */
static void rebase_progress(ImgProgress *p, double percent)
{
    if (p->enabled && (percent - p->last >= 2.0 || percent >= 100.0)) {
        p->last = percent;
        printf("    (%3.2f/100%%)\r", percent);
        fflush(stdout);
    }
}

/*
 * Make bs read the same over new_backing (NULL: none) as over its
 * current backing file. Returns 0, or -1 with the error printed.
 */
static int rebase_copy(BlockDriverState *bs, const char *filename,
                       BlockDriverState *new_backing, ImgProgress *prog)
{
    BlockDriverState *old_backing = bdrv_get_backing(bs);
    g_autofree uint8_t *buf_old = g_malloc(REBASE_CHUNK);
    g_autofree uint8_t *buf_new = g_malloc(REBASE_CHUNK);
    int64_t size, old_size = 0, new_size = 0;
    Error *err = NULL;

    size = bdrv_getlength(bs, &err);
    if (size < 0) {
        img_error_free(filename, err);
        return -1;
    }
    if (old_backing) {
        old_size = bdrv_getlength(old_backing, &err);
        if (old_size < 0) {
            img_error_free(NULL, err);
            return -1;
        }
    }
    if (new_backing) {
        new_size = bdrv_getlength(new_backing, &err);
        if (new_size < 0) {
            img_error_free(NULL, err);
            return -1;
        }
    }
    for (uint64_t offset = 0; offset < (uint64_t)size;) {
        uint64_t n = MIN(REBASE_CHUNK, (uint64_t)size - offset);
        uint64_t pnum = 0;
        bool old_zero = false;
        int st;

        if (img_interrupted) {
            img_error(NULL, "Interrupted");
            return -1;
        }
        /* What the overlay holds itself reads the same either way. */
        st = bdrv_block_status(bs, offset, n, &pnum, NULL, NULL, &err);
        if (st < 0) {
            img_error(NULL, "error while reading image metadata: %s",
                      error_get_pretty(err));
            error_free(err);
            return -1;
        }
        n = pnum;
        if (st & BDRV_BLOCK_ALLOCATED) {
            offset += n;
            rebase_progress(prog, 100.0 * offset / size);
            continue;
        }
        /* Backing files smaller than the overlay read as zeroes beyond. */
        if (offset >= (uint64_t)old_size) {
            memset(buf_old, 0, n);
            old_zero = true;
        } else {
            n = MIN(n, (uint64_t)old_size - offset);
            if (bdrv_pread(old_backing, offset, buf_old, n, &err) < 0) {
                img_error(NULL, "error while reading from old backing file: "
                          "%s", error_get_pretty(err));
                error_free(err);
                return -1;
            }
        }
        if (!new_backing || offset >= (uint64_t)new_size) {
            memset(buf_new, 0, n);
        } else {
            n = MIN(n, (uint64_t)new_size - offset);
            if (bdrv_pread(new_backing, offset, buf_new, n, &err) < 0) {
                img_error(NULL, "error while reading from new backing file: "
                          "%s", error_get_pretty(err));
                error_free(err);
                return -1;
            }
        }
        for (size_t done = 0; done < n;) {
            size_t run;
            int r = 0;

            if (rebase_sectors_differ(buf_old + done, buf_new + done,
                                      n - done, &run)) {
                /* Zeroes too must hold over the new backing file. */
                r = old_zero ?
                    bdrv_pwrite_zeroes(bs, offset + done, run,
                                       BDRV_REQ_EXPLICIT_ZERO, &err) :
                    bdrv_pwrite(bs, offset + done, buf_old + done, run,
                                BDRV_REQ_EXPLICIT_ZERO, &err);
            }
            if (r < 0) {
                img_error(NULL, "Error while writing to COW image: %s",
                          error_get_pretty(err));
                error_free(err);
                return -1;
            }
            done += run;
        }
        offset += n;
        rebase_progress(prog, 100.0 * offset / size);
    }
    return 0;
}

/* The new backing file, named relative to the overlay as it will be. */
static BlockDriverState *rebase_open_new_backing(BlockDriverState *bs,
                                                 const char *backing,
                                                 const char *backing_fmt,
                                                 bool force_share)
{
    g_autofree char *dir = g_path_get_dirname(bdrv_get_filename(bs));
    g_autofree char *path = bdrv_backing_name_is_absolute(backing) ?
        g_strdup(backing) : g_build_filename(dir, backing, NULL);
    BlockDriverState *nb;
    Error *err = NULL;

    nb = bdrv_open(path, backing_fmt, NULL,
                   force_share ? BDRV_O_FORCE_SHARE : 0, &err);
    if (!nb) {
        img_error(NULL, "Could not open new backing file '%s': %s", backing,
                  error_get_pretty(err));
        error_free(err);
    }
    return nb;
}

int img_rebase(int argc, char **argv)
{
    g_autofree char *fmt = NULL, *backing = NULL, *backing_fmt = NULL;
    g_autofree char *cache = NULL, *src_cache = NULL;
    g_autoptr(BlockDriverState) bs = NULL;
    g_autoptr(BlockDriverState) new_backing = NULL;
    gboolean unsafe = FALSE, progress = FALSE, image_opts = FALSE;
    gboolean force_share = FALSE;
    ImgCommonOpts common = { 0 };
    const GOptionEntry entries[] = {
        { "format", 'f', 0, G_OPTION_ARG_STRING, &fmt,
          "format of FILENAME (default: probe)", "FMT" },
        { "backing", 'b', 0, G_OPTION_ARG_STRING, &backing,
          "the new backing file (\"\": none; the overlay then holds all "
          "its data)", "FILE" },
        { "backing-format", 'F', 0, G_OPTION_ARG_STRING, &backing_fmt,
          "its format (default, in safe mode: probed)", "FMT" },
        { "unsafe", 'u', 0, G_OPTION_ARG_NONE, &unsafe,
          "only change the name in the header (the new backing file holds "
          "the same data as the old)", NULL },
        { "progress", 'p', 0, G_OPTION_ARG_NONE, &progress,
          "show progress", NULL },
        { "cache", 't', 0, G_OPTION_ARG_STRING, &cache,
          "cache mode of FILENAME: writeback (default), writethrough, none, "
          "directsync or unsafe", "CACHE" },
        { "source-cache", 'T', 0, G_OPTION_ARG_STRING, &src_cache,
          "cache mode of the backing files (accepted: they are only read)",
          "CACHE" },
        { "image-opts", 0, 0, G_OPTION_ARG_NONE, &image_opts,
          "FILENAME is an option string (driver=...,file.filename=...)",
          NULL },
        { "force-share", 'U', 0, G_OPTION_ARG_NONE, &force_share,
          "open the backing files without locking them", NULL },
        { NULL }
    };
    ImgProgress prog = { 0 };
    Error *err = NULL;
    int flags = BDRV_O_RDWR, ret = 1;

    if (img_parse_args(&argc, &argv, "FILENAME",
                       "Change the backing file of the overlay FILENAME "
                       "(qcow2).",
                       "Without -u, what FILENAME reads stays the same: data "
                       "that differs between the old and the new backing "
                       "file is copied into FILENAME first.\n\n"
                       "Example:\n  qemu-img-lite rebase -b new-base.qcow2 "
                       "-F qcow2 overlay.qcow2",
                       entries, &common) < 0) {
        goto out;
    }
    if (argc != 2) {
        img_error(NULL, "Expecting one image file name");
        goto out;
    }
    if (!unsafe && !backing) {
        img_error(NULL, "Must specify backing file (-b) or use unsafe mode "
                  "(-u)");
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
    if (src_cache && !g_str_equal(src_cache, "none") &&
        !g_str_equal(src_cache, "directsync") &&
        !g_str_equal(src_cache, "writeback") &&
        !g_str_equal(src_cache, "writethrough") &&
        !g_str_equal(src_cache, "unsafe")) {
        img_error(NULL, "Invalid source cache option: %s", src_cache);
        goto out;
    }
    if (img_add_objects(common.objects) < 0) {
        goto out;
    }
    if (backing && !*backing) {
        g_clear_pointer(&backing, g_free);
    }
    img_progress_init(&prog, progress && !common.quiet);
    /* Unsafe: the old backing file need not even exist any more. */
    if (unsafe) {
        flags |= BDRV_O_NO_BACKING;
    }
    bs = img_open(argv[1], fmt, image_opts, flags);
    if (!bs) {
        goto out;
    }
    /*
     * -u only stores the name: any format QEMU knows (qemu-iotests 031
     * stores host_device); else the backing file is opened with it.
     */
    if (backing_fmt && (unsafe ? !bdrv_qemu_format_known(backing_fmt) :
                        (!g_str_equal(backing_fmt, "raw") &&
                         !g_str_equal(backing_fmt, "qcow2") &&
                         !g_str_equal(backing_fmt, "luks")))) {
        img_error(NULL, "Invalid format name: '%s'", backing_fmt);
        goto out;
    }
    if (!unsafe) {
        if (backing) {
            new_backing = rebase_open_new_backing(bs, backing, backing_fmt,
                                                  force_share);
            if (!new_backing) {
                goto out;
            }
            if (!backing_fmt) {
                backing_fmt = g_strdup(bdrv_get_format_name(new_backing));
            }
        }
        if (rebase_copy(bs, argv[1], new_backing, &prog) < 0) {
            goto out;
        }
    }
    if (bdrv_change_backing_file(bs, backing, backing_fmt, &err) < 0) {
        img_error(NULL, "Could not change the backing file to '%s': %s",
                  backing ? backing : "", error_get_pretty(err));
        error_free(err);
        goto out;
    }
    /* As every command that changes an image: durable before success. */
    if (bdrv_flush_final(bs, &err) < 0) {
        img_error_free(argv[1], err);
        goto out;
    }
    rebase_progress(&prog, 100.0);
    ret = 0;

out:
    if (prog.enabled) {
        img_progress_end(&prog);
    }
    img_common_opts_clear(&common);
    return ret;
}
