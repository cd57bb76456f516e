/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * qcow2 persistent dirty bitmaps (block/qcow2-bitmap.c): the directory
 * for info and measure, and for a read-write open the bitmaps themselves
 * (qemu-img bitmap, convert --bitmaps, the dirty bits of writes).
 */
#ifndef BLOCK_QCOW2_BITMAP_H
#define BLOCK_QCOW2_BITMAP_H

#include "block/block_int.h"

/*
 * The nb entries of a bitmap directory of len bytes (spec, "Bitmap
 * directory"), into a new array *out (free each name, then the array).
 */
int qcow2_bitmap_dir_parse(const uint8_t *dir, uint64_t len, uint32_t nb,
                           BlockImageInfoBitmap **out, Error **errp);

/* The bitmaps of an open qcow2 node (none: *out NULL, *nb 0). */
int qcow2_read_bitmaps(BlockDriverState *bs, BlockImageInfoBitmap **out,
                       size_t *nb, Error **errp);

/*
 * Bytes the bitmaps take in a qcow2 image of size bytes with clusters of
 * cluster_size: data, tables and directory (measure's "bitmaps size").
 */
uint64_t qcow2_bitmaps_size(const BlockImageInfoBitmap *bitmaps, size_t nb,
                            uint64_t size, uint64_t cluster_size);

/*
 * Check the n entries of a bitmap table (host byte order) as the spec
 * says: reserved bits clear, data clusters aligned and inside a file of
 * file_size bytes, "all ones" only without an offset.
 */
int qcow2_bitmap_table_validate(const uint64_t *table, uint32_t n,
                                uint64_t cluster_size, uint64_t file_size,
                                Error **errp);

/*
 * Re-lay the header cluster buf (cs bytes, version 3) with the bitmaps
 * extension saying nb, dir_size, dir_offset (none for nb 0) and the
 * autoclear bit to match; the other extensions and the backing file
 * name are kept (the name moves). buf is unchanged on failure.
 */
int qcow2_header_set_bitmaps_ext(uint8_t *buf, uint64_t cs, uint32_t nb,
                                 uint64_t dir_size, uint64_t dir_offset,
                                 Error **errp);

/*
 * Read-write open: load the directory and the enabled bitmaps, and mark
 * those in_use on disk before any write (refused if the directory or a
 * table is invalid).
 */
int qcow2_bitmaps_open_rw(BlockDriverState *bs, Error **errp);
/* Write the bitmaps back, in_use cleared (bdrv_bitmaps_store()). */
int qcow2_bitmaps_store(BlockDriverState *bs, Error **errp);
/* At close: store if not done yet (a failure leaves them in_use), free. */
void qcow2_bitmaps_close(BlockDriverState *bs);
/* Before a write of [offset, offset + bytes): set the enabled ones' bits. */
int qcow2_bitmaps_before_write(BlockDriverState *bs, uint64_t offset,
                               uint64_t bytes, Error **errp);
/* resize: refused with inconsistent bitmaps (their size would not fit). */
int qcow2_bitmaps_check_resize(BlockDriverState *bs, Error **errp);
/* After a resize to size: the loaded bitmaps cover the new disk. */
void qcow2_bitmaps_resize(BlockDriverState *bs, uint64_t size);
/* Whether the image has persistent bitmaps (a downgrade refuses). */
bool qcow2_has_bitmaps(BlockDriverState *bs);

/* The driver's bitmap operations (see bdrv_bitmap_op() and below). */
int qcow2_bitmap_op(BlockDriverState *bs, BdrvBitmapOp op, const char *name,
                    uint32_t granularity, Error **errp);
int qcow2_bitmap_get(BlockDriverState *bs, const char *name,
                     BdrvBitmapBits *out, Error **errp);
int qcow2_bitmap_merge(BlockDriverState *bs, const char *name,
                       const BdrvBitmapBits *src, Error **errp);

#endif
