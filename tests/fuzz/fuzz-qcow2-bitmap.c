/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Fuzz target: qcow2 persistent dirty bitmaps (block/qcow2-bitmap.c).
 *
 * The input is a qcow2 image (seeds: make-seeds-qcow2-bitmap.sh, images
 * with bitmaps made by the real qemu-img and qemu-io), followed by zeros
 * as in fuzz-qcow2-open.c, in a memfd the "file" driver opens. Three
 * passes:
 *  - the bitmap directory parser on bytes: the directory the header
 *    extension points at, and the input itself taken as a directory;
 *    what it accepts must keep the spec's promises (names of 1 to 1023
 *    bytes, granularities powers of two from 512 bytes to 2 GiB);
 *  - a read-only open: every bitmap listed is read (its table checked,
 *    its data loaded), as convert --bitmaps and bitmap -b do;
 *  - a read-write open (the bitmaps loaded and marked in use), the
 *    operations of "qemu-img bitmap" (add, merge, clear, disable,
 *    remove) and the store; the result must open and list again, and
 *    every bitmap in it read back (the write path's dirty bits run in
 *    fuzz-qcow2-open's writes).
 * What the driver refuses it must say why (an error, never a crash).
 */
#include <unistd.h>

#include "block/qcow2.h"
#include "block/qcow2-bitmap.h"
#include "fuzz-image.h"
#include "fuzz-memfd.h"

/* Bitmaps read or changed per input. */
#define FUZZ_MAX_BITMAPS 8
/* Directory entries parsed from the raw input. */
#define FUZZ_MAX_RAW_ENTRIES 64

static void fuzz_check_list(const BlockImageInfoBitmap *list, size_t nb)
{
    for (size_t i = 0; i < nb; i++) {
        size_t n = strlen(list[i].name);
        uint32_t g = list[i].granularity;

        if (n == 0 || n > 1023 || g < 512 || (g & (g - 1))) {
            fuzz_fail("bitmap %zu: name of %zu bytes, granularity %" PRIu32,
                      i, n, g);
        }
    }
}

/* The directory parser on bytes: accepted entries keep their promises. */
static void fuzz_parse_dir(const uint8_t *dir, uint64_t len, uint32_t nb)
{
    g_autoptr(Error) err = NULL;
    BlockImageInfoBitmap *list = NULL;
    g_autofree uint8_t *copy = fuzz_memdup(dir, len);

    if (qcow2_bitmap_dir_parse(copy, len, nb, &list, &err) < 0) {
        g_assert(err);
        return;
    }
    fuzz_check_list(list, nb);
    for (uint32_t i = 0; i < nb; i++) {
        g_free(list[i].name);
    }
    g_free(list);
}

static void fuzz_parse(const uint8_t *data, size_t size)
{
    size_t cluster = (size_t)1 << QCOW2_MAX_CLUSTER_BITS;
    g_autofree uint8_t *first = g_malloc0(cluster);
    Qcow2Header h;
    Qcow2Extensions ext;

    fuzz_parse_dir(data, size,
                   MIN(size / 24, (size_t)FUZZ_MAX_RAW_ENTRIES));
    memcpy(first, data, MIN(size, cluster));
    if (qcow2_header_parse(first, cluster, FUZZ_IMAGE_MAX_SIZE, &h,
                           NULL) < 0 ||
        qcow2_extensions_parse(&h, first, cluster, FUZZ_IMAGE_MAX_SIZE, &ext,
                               NULL) < 0) {
        return;
    }
    if (ext.nb_bitmaps && ext.nb_bitmaps <= 65535 &&
        ext.bitmap_directory_offset < size &&
        ext.bitmap_directory_size <= size - ext.bitmap_directory_offset) {
        fuzz_parse_dir(data + ext.bitmap_directory_offset,
                       ext.bitmap_directory_size, ext.nb_bitmaps);
    }
    qcow2_extensions_clear(&ext);
}

/* List the bitmaps of an open image and read each one. */
static void fuzz_read_bitmaps(BlockDriverState *bs)
{
    g_autoptr(Error) err = NULL;
    BlockImageInfoBitmap *list;
    size_t nb;

    if (bdrv_bitmap_list(bs, &list, &nb, &err) < 0) {
        g_assert(err);
        fuzz_debug("bitmap list", err);
        return;
    }
    fuzz_check_list(list, nb);
    for (size_t i = 0; i < MIN(nb, (size_t)FUZZ_MAX_BITMAPS); i++) {
        g_autoptr(Error) gerr = NULL;
        BdrvBitmapBits bits;
        int ret = bdrv_bitmap_get(bs, list[i].name, &bits, &gerr);

        g_assert((ret < 0) == !!gerr);
        fuzz_debug("bitmap get", gerr);
        if (ret == 0) {
            if (bits.granularity != list[i].granularity) {
                fuzz_fail("bitmap '%s': granularity %" PRIu32 " listed, %"
                          PRIu32 " read", list[i].name, list[i].granularity,
                          bits.granularity);
            }
            g_free(bits.bits);
        }
    }
    bdrv_bitmap_list_free(list, nb);
}

static BlockDriverState *fuzz_open(int flags)
{
    g_autoptr(GHashTable) opts = qemu_opts_new();
    g_autoptr(Error) err = NULL;
    BlockDriverState *bs;

    /* Encrypted seeds too: bitmaps need no key (their data is plain). */
    bs = bdrv_open(fuzz_path, "qcow2", opts,
                   flags | BDRV_O_NO_BACKING | BDRV_O_NO_IO, &err);
    g_assert(!bs == !!err);
    fuzz_debug("open", err);
    return bs;
}

/* What "qemu-img bitmap" does, on every bitmap (bounded). */
static void fuzz_operations(BlockDriverState *bs)
{
    BlockImageInfoBitmap *list;
    size_t nb;

    if (bdrv_bitmap_list(bs, &list, &nb, NULL) < 0) {
        return;
    }
    bdrv_bitmap_op(bs, BDRV_BITMAP_ADD, "fuzz", 0, NULL);
    for (size_t i = 0; i < MIN(nb, (size_t)FUZZ_MAX_BITMAPS); i++) {
        const char *name = list[i].name;
        g_autoptr(Error) err = NULL;

        if (bdrv_bitmap_merge(bs, "fuzz", NULL, name, &err) < 0) {
            g_assert(err);
        }
        switch (i % 3) {
        case 0:
            bdrv_bitmap_op(bs, BDRV_BITMAP_CLEAR, name, 0, NULL);
            break;
        case 1:
            bdrv_bitmap_op(bs, BDRV_BITMAP_DISABLE, name, 0, NULL);
            break;
        default:
            bdrv_bitmap_op(bs, BDRV_BITMAP_REMOVE, name, 0, NULL);
            break;
        }
    }
    bdrv_bitmap_list_free(list, nb);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    g_autoptr(Error) err = NULL;
    BlockDriverState *bs;

    fuzz_init();
    fuzz_memfd_setup("fuzz-qcow2-bitmap");
    fuzz_parse(data, size);
    fuzz_set_file(data, size);

    bs = fuzz_open(0);
    if (!bs) {
        return 0;
    }
    fuzz_read_bitmaps(bs);
    bdrv_close(bs);

    bs = fuzz_open(BDRV_O_RDWR);
    if (!bs) {
        return 0;
    }
    fuzz_operations(bs);
    if (bdrv_bitmaps_store(bs, &err) < 0) {
        g_assert(err);
        fuzz_debug("store", err);
        bdrv_close(bs);
        return 0;
    }
    bdrv_close(bs);

    /* What we stored opens and reads back. */
    bs = fuzz_open(0);
    if (!bs) {
        fuzz_fail("the image does not open after the bitmaps were stored");
    }
    fuzz_read_bitmaps(bs);
    bdrv_close(bs);
    return 0;
}
