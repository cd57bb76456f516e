/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * qcow2 persistent dirty bitmaps, read-only (block/qcow2-bitmap.c):
 * their names, granularities and flags, and the space they take.
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

#endif
