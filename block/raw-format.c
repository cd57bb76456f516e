/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The "raw" format driver: the image is its file's bytes, one to one.
 */
#include "block/block_int.h"

/* Any bytes are a raw image: the fallback when no other format claims. */
static int raw_probe(const uint8_t *buf, int buf_size, const char *filename)
{
    return 1;
}

static int raw_open(BlockDriverState *bs, GHashTable *opts, int flags,
                    Error **errp)
{
    return 0;
}

static int raw_pread(BlockDriverState *bs, uint64_t offset, void *buf,
                     size_t bytes, Error **errp)
{
    return bs->file->drv->bdrv_pread(bs->file, offset, buf, bytes, errp);
}

static int raw_pwrite(BlockDriverState *bs, uint64_t offset, const void *buf,
                      size_t bytes, int flags, Error **errp)
{
    return bs->file->drv->bdrv_pwrite(bs->file, offset, buf, bytes, flags,
                                      errp);
}

static int64_t raw_getlength(BlockDriverState *bs, Error **errp)
{
    return bdrv_getlength_exact(bs->file, errp);
}

static int raw_truncate(BlockDriverState *bs, uint64_t size,
                        PreallocMode prealloc, Error **errp)
{
    return bdrv_truncate(bs->file, size, prealloc, errp);
}

static bool raw_block_status_is_data(BlockDriverState *bs, uint64_t offset,
                                     uint64_t bytes, uint64_t *pnum)
{
    return bdrv_block_status_is_data(bs->file, offset, bytes, pnum);
}

/* The file's status at the same offset (QEMU's BDRV_BLOCK_RAW). */
static int raw_block_status(BlockDriverState *bs, uint64_t offset,
                            uint64_t bytes, uint64_t *pnum, uint64_t *map,
                            BlockDriverState **file, Error **errp)
{
    return bdrv_block_status(bs->file, offset, bytes, pnum, map, file, errp);
}

static bool raw_has_zero_init(BlockDriverState *bs)
{
    return bdrv_has_zero_init(bs->file);
}

static int raw_create(const char *filename, GHashTable *opts, int flags,
                      BlockDriverState **pbs, Error **errp)
{
    PreallocMode prealloc;
    uint64_t size;

    if (bdrv_create_take_size_prealloc(opts, &size, &prealloc, errp) < 0) {
        return -1;
    }
    /* qemu-img makes raw images a whole number of sectors long. */
    return bdrv_create_file(filename, ROUND_UP(size, BDRV_SECTOR_SIZE),
                            prealloc, errp);
}

static int raw_measure(GHashTable *opts, BlockDriverState *in_bs,
                       uint64_t size, BlockMeasureInfo *info, Error **errp)
{
    PreallocMode prealloc;

    if (bdrv_create_take_prealloc(opts, &prealloc, errp) < 0) {
        return -1;
    }
    if (bdrv_create_check_leftovers(opts, errp) < 0) {
        return -1;
    }
    info->required = info->fully_allocated = ROUND_UP(size, BDRV_SECTOR_SIZE);
    return 0;
}

const BlockDriver bdrv_raw = {
    .format_name = "raw",
    .bdrv_probe = raw_probe,
    .bdrv_open = raw_open,
    .bdrv_pread = raw_pread,
    .bdrv_pwrite = raw_pwrite,
    .bdrv_getlength = raw_getlength,
    .bdrv_truncate = raw_truncate,
    .bdrv_block_status_is_data = raw_block_status_is_data,
    .bdrv_block_status = raw_block_status,
    .bdrv_has_zero_init = raw_has_zero_init,
    .bdrv_create = raw_create,
    .bdrv_measure = raw_measure,
};
