/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The "raw" format driver: the image is its file's bytes, one to one.
 */
#include "block/block_int.h"
#include "block/crypto.h"

/* Any bytes are a raw image: the fallback when no other format claims. */
static int raw_probe(const uint8_t *buf, int buf_size, const char *filename)
{
    return 1;
}

/*
 * The "offset" and "size" options, as QEMU's raw driver: the image is the
 * size bytes of the file from offset on (a partition inside a disk image).
 * Without size, it runs to the end of the file.
 */
typedef struct BDRVRawState {
    uint64_t offset;
    uint64_t size;
    bool has_size;
} BDRVRawState;

/* The bounds QEMU checks on open, with its messages. */
static int raw_check_window(BlockDriverState *bs, Error **errp)
{
    BDRVRawState *s = bs->opaque;
    int64_t file_len = bdrv_getlength_exact(bs->file, errp);

    if (file_len < 0) {
        return -1;
    }
    if (s->offset > (uint64_t)file_len) {
        error_setg(errp, "Offset (%" G_GUINT64_FORMAT ") cannot be greater "
                   "than size of the containing file (%" G_GINT64_FORMAT ")",
                   s->offset, file_len);
        return -1;
    }
    if (s->has_size && s->size > (uint64_t)file_len - s->offset) {
        error_setg(errp, "The sum of offset (%" G_GUINT64_FORMAT ") and size "
                   "(%" G_GUINT64_FORMAT ") has to be smaller or equal to the "
                   " actual size of the containing file (%" G_GINT64_FORMAT
                   ")", s->offset, s->size, file_len);
        return -1;
    }
    return 0;
}

static int raw_open(BlockDriverState *bs, GHashTable *opts, int flags,
                    Error **errp)
{
    BDRVRawState *s = bs->opaque;

    s->has_size = g_hash_table_contains(opts, "size");
    if (qemu_opt_take_size(opts, "offset", 0, &s->offset, errp) < 0 ||
        qemu_opt_take_size(opts, "size", 0, &s->size, errp) < 0) {
        return -1;
    }
    /* QEMU counts whole sectors; an odd offset is allowed, an odd size not. */
    if (s->has_size && s->size % BDRV_SECTOR_SIZE) {
        error_setg(errp, "Specified size is not multiple of %d",
                   BDRV_SECTOR_SIZE);
        return -1;
    }
    /* An image being re-encrypted in place may be named raw (-f raw). */
    if (block_crypto_check_not_reencrypting(bs->file, flags, errp) < 0) {
        return -1;
    }
    return raw_check_window(bs, errp);
}

/* A request must stay inside the window (offset and size are options). */
static int raw_check_request(BlockDriverState *bs, uint64_t offset,
                             size_t bytes, Error **errp)
{
    BDRVRawState *s = bs->opaque;

    if (s->has_size && (offset > s->size || bytes > s->size - offset)) {
        error_setg(errp, "Request at %" G_GUINT64_FORMAT " (%zu bytes) is "
                   "beyond the end of the image (size=%" G_GUINT64_FORMAT ")",
                   offset, bytes, s->size);
        return -1;
    }
    return 0;
}

static int raw_pread(BlockDriverState *bs, uint64_t offset, void *buf,
                     size_t bytes, Error **errp)
{
    BDRVRawState *s = bs->opaque;

    if (raw_check_request(bs, offset, bytes, errp) < 0) {
        return -1;
    }
    bdrv_debug_event(bs->file, "read_aio");
    return bdrv_pread(bs->file, s->offset + offset, buf,
                      bytes, errp);
}

static int raw_pwrite(BlockDriverState *bs, uint64_t offset, const void *buf,
                      size_t bytes, int flags, Error **errp)
{
    BDRVRawState *s = bs->opaque;

    if (raw_check_request(bs, offset, bytes, errp) < 0) {
        return -1;
    }
    bdrv_debug_event(bs->file, "write_aio");
    return bdrv_pwrite(bs->file, s->offset + offset, buf,
                       bytes, flags, errp);
}

static int raw_pwrite_zeroes(BlockDriverState *bs, uint64_t offset,
                             size_t bytes, int flags, Error **errp)
{
    BDRVRawState *s = bs->opaque;

    if (raw_check_request(bs, offset, bytes, errp) < 0) {
        return -1;
    }
    return bdrv_pwrite_zeroes(bs->file, s->offset + offset, bytes, flags,
                              errp);
}

static int raw_pdiscard(BlockDriverState *bs, uint64_t offset, size_t bytes,
                        Error **errp)
{
    BDRVRawState *s = bs->opaque;

    if (raw_check_request(bs, offset, bytes, errp) < 0) {
        return -1;
    }
    return bdrv_pdiscard(bs->file, s->offset + offset, bytes, errp);
}

static int64_t raw_getlength(BlockDriverState *bs, Error **errp)
{
    BDRVRawState *s = bs->opaque;
    int64_t len;

    if (s->has_size) {
        return s->size;
    }
    len = bdrv_getlength_exact(bs->file, errp);
    if (len < 0) {
        return -1;
    }
    /* The file may have shrunk under us since open: never negative. */
    return (uint64_t)len > s->offset ? len - (int64_t)s->offset : 0;
}

static int raw_truncate(BlockDriverState *bs, uint64_t size,
                        PreallocMode prealloc, Error **errp)
{
    BDRVRawState *s = bs->opaque;

    if (s->has_size) {
        error_setg(errp, "Cannot resize fixed-size raw disks");
        return -1;
    }
    if (size > G_MAXINT64 - s->offset) {
        error_setg(errp, "Image size too large: the offset and size add "
                   "up to more than 2^63 bytes");
        return -1;
    }
    return bdrv_truncate(bs->file, s->offset + size, prealloc, errp);
}

static bool raw_block_status_is_data(BlockDriverState *bs, uint64_t offset,
                                     uint64_t bytes, uint64_t *pnum)
{
    BDRVRawState *s = bs->opaque;

    return bdrv_block_status_is_data(bs->file, s->offset + offset, bytes,
                                     pnum);
}

/* The raw node passes its bytes through: copy offloading goes below it. */
static BlockDriverState *raw_passthrough(BlockDriverState *bs,
                                         uint64_t *offset)
{
    BDRVRawState *s = bs->opaque;

    *offset += s->offset;
    return bs->file;
}

/*
 * The file's status at the same offset, past the window's start (QEMU's
 * BDRV_BLOCK_RAW): *map is where the bytes lie in the file.
 */
static int raw_block_status(BlockDriverState *bs, uint64_t offset,
                            uint64_t bytes, uint64_t *pnum, uint64_t *map,
                            BlockDriverState **file, Error **errp)
{
    BDRVRawState *s = bs->opaque;

    return bdrv_block_status(bs->file, s->offset + offset, bytes, pnum, map,
                             file, errp);
}

static bool raw_has_zero_init(BlockDriverState *bs)
{
    BDRVRawState *s = bs->opaque;

    /* Only a whole new file is known to read as zeroes. */
    return s->offset == 0 && !s->has_size && bdrv_has_zero_init(bs->file);
}

static int raw_create(BlockDriverState *file, GHashTable *opts, int flags,
                      BlockDriverState **pbs, Error **errp)
{
    PreallocMode prealloc;
    uint64_t size;

    if (bdrv_create_take_size_prealloc(opts, &size, &prealloc, errp) < 0) {
        return -1;
    }
    /* qemu-img makes raw images a whole number of sectors long. */
    return bdrv_create_fit_raw(file, ROUND_UP(size, BDRV_SECTOR_SIZE),
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

/*
 * QEMU 7.2's raw_get_info(): the protocol's cluster size (an RBD image's
 * object size), nothing format-specific of its own.
 */
static int raw_get_info(BlockDriverState *bs, BlockImageInfo *info,
                        Error **errp)
{
    BlockDriverState *file = bs->file;
    g_autoptr(BlockImageInfo) finfo = NULL;

    if (!file->drv->bdrv_get_info) {
        return 0;
    }
    finfo = g_new0(BlockImageInfo, 1);
    if (file->drv->bdrv_get_info(file, finfo, errp) < 0) {
        return -1;
    }
    info->cluster_size = finfo->cluster_size;
    return 0;
}

/* "-o help" (qemu-img's words; preallocation is the file protocol's). */
static const BlockOptionDesc raw_create_opts[] = {
    { "size", "size", "Virtual disk size" },
    { NULL }
};

const BlockDriver bdrv_raw = {
    .format_name = "raw",
    .instance_size = sizeof(BDRVRawState),
    .bdrv_probe = raw_probe,
    .bdrv_open = raw_open,
    .bdrv_pread = raw_pread,
    .bdrv_pwrite = raw_pwrite,
    .bdrv_pwrite_zeroes = raw_pwrite_zeroes,
    .bdrv_pdiscard = raw_pdiscard,
    .bdrv_getlength = raw_getlength,
    .bdrv_truncate = raw_truncate,
    .bdrv_block_status_is_data = raw_block_status_is_data,
    .bdrv_block_status = raw_block_status,
    .bdrv_has_zero_init = raw_has_zero_init,
    .bdrv_passthrough = raw_passthrough,
    .bdrv_create = raw_create,
    .bdrv_measure = raw_measure,
    .bdrv_get_info = raw_get_info,
    .create_opts = raw_create_opts,
};
