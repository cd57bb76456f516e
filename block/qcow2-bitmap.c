/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * qcow2 persistent dirty bitmaps, read-only: the bitmap directory, for
 * what info shows and measure counts. Bitmap data is never read: we do
 * not track writes, and convert does not copy bitmaps (qemu-img's
 * --bitmaps is not implemented).
 *
 * Layout: the spec's "Bitmaps" section. The directory is a run of
 * entries, each 24 bytes of fixed fields, extra data, the name, padded
 * to 8 bytes.
 */
#include <string.h>

#include "block/qcow2.h"
#include "block/qcow2-bitmap.h"

/* Spec, "Bitmap directory": fixed part of an entry. */
#define QCOW2_BITMAP_DIR_ENTRY_LEN 24
/* QEMU's limits: directory size, name length, number of bitmaps. */
#define QCOW2_MAX_BITMAP_DIRECTORY_SIZE (64 * 1024 * 1024)
#define QCOW2_MAX_BITMAP_NAME 1023
#define QCOW2_MAX_BITMAPS 65535
/* Spec: granularity_bits 9..31 in QEMU (512 B to 2 GiB). */
#define QCOW2_BITMAP_MIN_GRANULARITY_BITS 9
#define QCOW2_BITMAP_MAX_GRANULARITY_BITS 31
/* Spec, flags */
#define QCOW2_BITMAP_FLAG_IN_USE (1u << 0)
#define QCOW2_BITMAP_FLAG_AUTO   (1u << 1)

static int qcow2_bitmap_dir_invalid(Error **errp, const char *why)
{
    error_setg(errp, "qcow2 bitmap directory: %s", why);
    return -1;
}

int qcow2_bitmap_dir_parse(const uint8_t *dir, uint64_t len, uint32_t nb,
                           BlockImageInfoBitmap **out, Error **errp)
{
    g_autofree BlockImageInfoBitmap *list = g_new0(BlockImageInfoBitmap, nb);
    uint64_t off = 0;
    uint32_t i;

    for (i = 0; i < nb; i++) {
        const uint8_t *e = dir + off;
        uint32_t flags, extra;
        uint16_t name_len;
        uint8_t gran_bits;
        uint64_t entry_len;

        if (len - off < QCOW2_BITMAP_DIR_ENTRY_LEN) {
            goto fail_short;
        }
        flags = ldl_be_p(e + 12);
        gran_bits = e[17];
        name_len = lduw_be_p(e + 18);
        extra = ldl_be_p(e + 20);
        entry_len = ROUND_UP(QCOW2_BITMAP_DIR_ENTRY_LEN + (uint64_t)extra +
                             name_len, 8);
        if (entry_len > len - off) {
            goto fail_short;
        }
        if (name_len == 0 || name_len > QCOW2_MAX_BITMAP_NAME ||
            gran_bits < QCOW2_BITMAP_MIN_GRANULARITY_BITS ||
            gran_bits > QCOW2_BITMAP_MAX_GRANULARITY_BITS) {
            qcow2_bitmap_dir_invalid(errp, "invalid entry");
            goto fail;
        }
        list[i].name = g_strndup((const char *)e + QCOW2_BITMAP_DIR_ENTRY_LEN +
                                 extra, name_len);
        list[i].granularity = 1u << gran_bits;
        list[i].in_use = flags & QCOW2_BITMAP_FLAG_IN_USE;
        list[i].autoload = flags & QCOW2_BITMAP_FLAG_AUTO;
        off += entry_len;
    }
    *out = g_steal_pointer(&list);
    return 0;

fail_short:
    qcow2_bitmap_dir_invalid(errp, "entries run past its end");
fail:
    for (uint32_t j = 0; j < i; j++) {
        g_free(list[j].name);
    }
    return -1;
}

int qcow2_read_bitmaps(BlockDriverState *bs, BlockImageInfoBitmap **out,
                       size_t *nb, Error **errp)
{
    BDRVQcow2State *s = bs->opaque;
    const Qcow2Extensions *ext = &s->ext;
    g_autofree uint8_t *dir = NULL;

    *out = NULL;
    *nb = 0;
    if (ext->nb_bitmaps == 0) {
        return 0;
    }
    if (ext->nb_bitmaps > QCOW2_MAX_BITMAPS ||
        ext->bitmap_directory_size > QCOW2_MAX_BITMAP_DIRECTORY_SIZE ||
        ext->bitmap_directory_size < QCOW2_BITMAP_DIR_ENTRY_LEN ||
        ext->bitmap_directory_offset > s->file_size ||
        ext->bitmap_directory_size >
            s->file_size - ext->bitmap_directory_offset) {
        return qcow2_bitmap_dir_invalid(errp, "invalid size or offset");
    }
    dir = g_malloc(ext->bitmap_directory_size);
    if (bdrv_pread(bs->file, ext->bitmap_directory_offset,
                   dir, ext->bitmap_directory_size,
                   errp) < 0 ||
        qcow2_bitmap_dir_parse(dir, ext->bitmap_directory_size,
                               ext->nb_bitmaps, out, errp) < 0) {
        return -1;
    }
    *nb = ext->nb_bitmaps;
    return 0;
}

uint64_t qcow2_bitmaps_size(const BlockImageInfoBitmap *bitmaps, size_t nb,
                            uint64_t size, uint64_t cluster_size)
{
    uint64_t total = 0, dir = 0;

    /*
     * As QEMU's qcow2_get_persistent_dirty_bitmap_size(): every bitmap
     * fully allocated (one bit per granule of size bytes), its table,
     * and the directory entries.
     */
    for (size_t i = 0; i < nb; i++) {
        uint64_t granules = size / bitmaps[i].granularity +
                            (size % bitmaps[i].granularity != 0);
        uint64_t bytes = ROUND_UP(granules, 8) / 8;
        uint64_t clusters = ROUND_UP(bytes, cluster_size) / cluster_size;

        total += clusters * cluster_size;
        total += ROUND_UP(clusters * 8, cluster_size);
        dir += ROUND_UP(QCOW2_BITMAP_DIR_ENTRY_LEN + strlen(bitmaps[i].name),
                        8);
    }
    return total + ROUND_UP(dir, cluster_size);
}
