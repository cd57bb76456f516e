/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The block drivers of this build: the one list that names them. The core
 * (block.c) looks drivers up by name here and probes every format in this
 * order, so on a tie in score the earlier wins. A new driver is a line
 * here, its extern in block/block_int.h and its file in
 * meson.build.
 *
 * The formats recognised only to be refused (block/foreign.c) come last:
 * a tie goes to a format that can be read.
 */
#include "block/block_int.h"

const BlockDriver *const bdrv_drivers[] = {
    &bdrv_file,
    &bdrv_raw,
    &bdrv_luks,
    &bdrv_qcow2,
    &bdrv_blkdebug,
    &bdrv_null_co,
    &bdrv_null_aio,
#ifdef CONFIG_NBD
    &bdrv_nbd,
    &bdrv_nbd_tcp,
    &bdrv_nbd_unix,
    &bdrv_nbds,
    &bdrv_nbds_unix,
#endif
#ifdef CONFIG_RBD
    &bdrv_rbd,
#endif
    &bdrv_vmdk,
    &bdrv_vhdx,
    &bdrv_vdi,
    &bdrv_vpc,
    &bdrv_qed,
    &bdrv_qcow,
    &bdrv_parallels,
    &bdrv_dmg,
    &bdrv_cloop,
    &bdrv_bochs,
    NULL,
};
