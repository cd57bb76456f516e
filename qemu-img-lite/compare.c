/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * qemu-img-lite compare: whether two images hold the same data. As
 * qemu-img: exit 0 identical, 1 different, 2 error (4: a read failed);
 * mismatches are
 * reported at the offset of the first differing 512-byte sector.
 */
#include <stdio.h>
#include <string.h>

#include "img.h"
#include "qemu/buffer.h"

/* Read this much of each image at a time. */
#define COMPARE_CHUNK (1024 * 1024)

/*
 * Both images are walked one extent at a time (block status): where both
 * have a hole nothing is read, where one has a hole the other's data is
 * checked for zeroes, and only where both have data are both read. A
 * 2 TiB sparse image compares in the time its data takes.
 */
typedef struct CompareState {
    uint8_t *buf_a, *buf_b;     /* COMPARE_CHUNK each */
    ImgProgress *prog;
    uint64_t total;             /* for the progress: the larger size */
    bool io_error;              /* a read failed: exit 4, as qemu-img */
} CompareState;

/* Index of the first byte a != b (len if none). */
static size_t compare_first_mismatch(const uint8_t *a, const uint8_t *b,
                                     size_t len)
{
    size_t i = 0;

    while (i < len && a[i] == b[i]) {
        i++;
    }
    return i;
}

/* The sector holding byte offset: where qemu-img reports a mismatch. */
static uint64_t compare_mismatch_sector(uint64_t offset)
{
    return ROUND_DOWN(offset, BDRV_SECTOR_SIZE);
}

/*
 * Read n bytes at off of bs (named name in errors) into buf, unless the
 * user interrupted us: 0, or -1 with the error printed.
 */
static int compare_read(BlockDriverState *bs, const char *name, uint64_t off,
                        uint8_t *buf, size_t n, bool *io_error)
{
    Error *err = NULL;

    if (img_interrupted) {
        img_error(NULL, "Interrupted");
        return -1;
    }
    if (bdrv_pread(bs, off, buf, n, &err) < 0) {
        /* qemu-img's words, with the driver's reason when not an errno */
        img_error(NULL, "Error while reading offset %" G_GUINT64_FORMAT
                  " of %s: %s", off, name, error_get_errno(err)
                  ? g_strerror(error_get_errno(err)) : error_get_pretty(err));
        error_free(err);
        *io_error = true;
        return -1;
    }
    return 0;
}

/* Compare [start, end) of two images: 0 same, 1 not (*where), -1 error. */
static int compare_data(CompareState *s, BlockDriverState *a,
                        const char *name_a, BlockDriverState *b,
                        const char *name_b, uint64_t start, uint64_t end,
                        uint64_t *where)
{
    for (uint64_t off = start; off < end; off += COMPARE_CHUNK) {
        size_t n = MIN(end - off, COMPARE_CHUNK);

        if (compare_read(a, name_a, off, s->buf_a, n, &s->io_error) < 0 ||
            compare_read(b, name_b, off, s->buf_b, n, &s->io_error) < 0) {
            return -1;
        }
        if (memcmp(s->buf_a, s->buf_b, n)) {
            *where = compare_mismatch_sector(
                off + compare_first_mismatch(s->buf_a, s->buf_b, n));
            return 1;
        }
        img_progress_update(s->prog, 100.0 * (off + n) / s->total);
    }
    return 0;
}

/* Whether [start, end) of bs reads as zeroes: 0 yes, 1 no (*where). */
static int compare_zero_data(CompareState *s, BlockDriverState *bs,
                             const char *name, uint64_t start, uint64_t end,
                             uint64_t *where)
{
    for (uint64_t off = start; off < end; off += COMPARE_CHUNK) {
        size_t n = MIN(end - off, COMPARE_CHUNK);

        if (compare_read(bs, name, off, s->buf_a, n, &s->io_error) < 0) {
            return -1;
        }
        if (!buffer_is_zero(s->buf_a, n)) {
            uint8_t *p = s->buf_a;

            while (*p == 0) {
                p++;
            }
            *where = compare_mismatch_sector(off + (p - s->buf_a));
            return 1;
        }
        img_progress_update(s->prog, 100.0 * (off + n) / s->total);
    }
    return 0;
}

/* [0, len) of both images, extent by extent. */
static int compare_ranges(CompareState *s, BlockDriverState *a,
                          const char *name_a, BlockDriverState *b,
                          const char *name_b, uint64_t len, uint64_t *where)
{
    uint64_t off = 0, pnum_a, pnum_b, end;
    bool data_a, data_b;
    int r = 0;

    while (off < len && r == 0) {
        data_a = bdrv_block_status_is_data(a, off, len - off, &pnum_a);
        data_b = bdrv_block_status_is_data(b, off, len - off, &pnum_b);
        end = off + MIN(pnum_a, pnum_b);
        if (data_a && data_b) {
            r = compare_data(s, a, name_a, b, name_b, off, end, where);
        } else if (data_a) {
            r = compare_zero_data(s, a, name_a, off, end, where);
        } else if (data_b) {
            r = compare_zero_data(s, b, name_b, off, end, where);
        }
        off = end;
        img_progress_update(s->prog, 100.0 * off / s->total);
    }
    return r;
}

/* Whether [start, end) of bs reads as zeroes, skipping its holes. */
static int compare_check_zero(CompareState *s, BlockDriverState *bs,
                              const char *name, uint64_t start, uint64_t end,
                              uint64_t *where)
{
    uint64_t off = start, pnum;
    int r = 0;

    while (off < end && r == 0) {
        if (bdrv_block_status_is_data(bs, off, end - off, &pnum)) {
            r = compare_zero_data(s, bs, name, off, off + pnum, where);
        }
        off += pnum;
        img_progress_update(s->prog, 100.0 * off / s->total);
    }
    return r;
}

int img_compare(int argc, char **argv)
{
    g_autofree char *fmt1 = NULL, *fmt2 = NULL;
    g_autoptr(BlockDriverState) bs1 = NULL;
    g_autoptr(BlockDriverState) bs2 = NULL;
    gboolean image_opts = FALSE, strict = FALSE, progress = FALSE;
    gboolean force_share = FALSE;
    ImgCommonOpts common = { 0 };
    const GOptionEntry entries[] = {
        { "a-format", 'f', 0, G_OPTION_ARG_STRING, &fmt1,
          "format of FILE1 (default: probe)", "FMT" },
        { "b-format", 'F', 0, G_OPTION_ARG_STRING, &fmt2,
          "format of FILE2 (default: probe)", "FMT" },
        { "image-opts", 0, 0, G_OPTION_ARG_NONE, &image_opts,
          "FILE1 and FILE2 are option strings "
          "(driver=...,file.filename=...)", NULL },
        { "strict", 's', 0, G_OPTION_ARG_NONE, &strict,
          "images of different sizes differ, whatever they hold", NULL },
        { "progress", 'p', 0, G_OPTION_ARG_NONE, &progress,
          "show progress", NULL },
        { "force-share", 'U', 0, G_OPTION_ARG_NONE, &force_share,
          "take no image locks, and read the images even while another "
          "process writes them (what is read may be inconsistent)", NULL },
        { NULL }
    };
    const char *name1, *name2;
    int64_t len1, len2;
    uint64_t where = 0;
    CompareState s = { 0 };
    ImgProgress prog;
    Error *err = NULL;
    int r, ret = 2;

    if (img_parse_args(&argc, &argv, "FILE1 FILE2",
                       "Compare the contents of two images. Exit status: 0 "
                       "identical, 1 different, 2 error.",
                       "Images of different sizes are identical if the "
                       "larger one holds only zeroes past the end of the "
                       "smaller (unless -s).\n\nExample:\n  qemu-img-lite "
                       "compare --object secret,id=s0,data=pass "
                       "--image-opts \\\n      driver=raw,file.filename=disk.raw "
                       "driver=luks,key-secret=s0,file.filename=disk.luks",
                       entries, &common) < 0) {
        ret = 1;    /* usage errors exit 1, as in qemu-img */
        goto out;
    }
    if (argc != 3) {
        img_error(NULL, "Expecting two image file names");
        fprintf(stderr, "Try 'qemu-img-lite --help' for more information\n");
        ret = 1;
        goto out;
    }
    name1 = argv[1];
    name2 = argv[2];
    if (img_add_objects(common.objects) < 0) {
        goto out;
    }
    if (image_opts && (fmt1 || fmt2)) {
        img_error(NULL, "--image-opts and --format are mutually exclusive");
        goto out;
    }
    bs1 = img_open(name1, fmt1, image_opts,
                   force_share ? BDRV_O_FORCE_SHARE : 0);
    if (!bs1) {
        goto out;
    }
    bs2 = img_open(name2, fmt2, image_opts,
                   force_share ? BDRV_O_FORCE_SHARE : 0);
    if (!bs2) {
        goto out;
    }
    len1 = bdrv_getlength(bs1, &err);
    if (len1 < 0) {
        img_error_free(name1, err);
        goto out;
    }
    len2 = bdrv_getlength(bs2, &err);
    if (len2 < 0) {
        img_error_free(name2, err);
        goto out;
    }
    if (len1 != len2 && strict) {
        if (!common.quiet) {
            printf("Strict mode: Image size mismatch!\n");
        }
        ret = 1;
        goto out;
    }

    img_progress_init(&prog, progress && !common.quiet);
    s.buf_a = g_malloc(COMPARE_CHUNK);
    s.buf_b = g_malloc(COMPARE_CHUNK);
    s.prog = &prog;
    s.total = MAX(len1, len2) ? MAX(len1, len2) : 1;
    r = compare_ranges(&s, bs1, name1, bs2, name2, MIN(len1, len2), &where);
    if (r == 0 && len1 != len2) {
        if (!common.quiet) {
            printf("Warning: Image size mismatch!\n");
        }
        r = len1 > len2
            ? compare_check_zero(&s, bs1, name1, len2, len1, &where)
            : compare_check_zero(&s, bs2, name2, len1, len2, &where);
    }
    g_free(s.buf_a);
    g_free(s.buf_b);
    img_progress_update(&prog, 100.0);
    img_progress_end(&prog);
    if (r < 0) {
        ret = s.io_error ? 4 : 2;
        goto out;
    }
    if (!common.quiet) {
        if (r) {
            printf("Content mismatch at offset %" G_GUINT64_FORMAT "!\n",
                   where);
        } else {
            printf("Images are identical.\n");
        }
    }
    ret = r;

out:
    img_common_opts_clear(&common);
    return ret;
}
