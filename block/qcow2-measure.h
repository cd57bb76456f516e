/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * qcow2 size arithmetic (block/qcow2-measure.c): the metadata an image of
 * a given geometry needs, as QEMU computes it for "qemu-img measure" and
 * for preallocation. Private to the qcow2 driver.
 */
#ifndef BLOCK_QCOW2_MEASURE_H
#define BLOCK_QCOW2_MEASURE_H

#include <stdbool.h>
#include <stdint.h>

#include "block/block_int.h"

/*
 * Bytes of refcount table and refcount blocks that count clusters host
 * clusters and themselves (QEMU's qcow2_refcount_metadata_size()). With
 * generous_increase, room for the table to grow by half again. The
 * number of refcount blocks goes to *refblock_count if it is set.
 */
uint64_t qcow2_refcount_metadata_size(uint64_t clusters,
                                      uint64_t cluster_size,
                                      unsigned refcount_order,
                                      bool generous_increase,
                                      uint64_t *refblock_count);

/*
 * The file size of an image of size bytes (rounded up to clusters) whose
 * every cluster is allocated: header cluster, L2 tables, L1 table,
 * refcount metadata and data (QEMU's qcow2_calc_prealloc_size()). No LUKS
 * header: add it, rounded up to clusters, when the image has one.
 */
uint64_t qcow2_calc_prealloc_size(uint64_t size, uint64_t cluster_size,
                                  unsigned refcount_order, bool extended_l2);

/*
 * Whether an image of size bytes fits QEMU's L1 table limit
 * (QCOW2_MAX_L1_BYTES); size must be a multiple of cluster_size.
 */
bool qcow2_size_fits_l1(uint64_t size, uint64_t cluster_size,
                        bool extended_l2);

/* The driver's bdrv_measure ("qemu-img measure -O qcow2"). */
int qcow2_measure(GHashTable *opts, BlockDriverState *in_bs, uint64_t size,
                  BlockMeasureInfo *info, Error **errp);

#endif
