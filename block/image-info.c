/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * What "qemu-img info" shows of an image (QEMU's block/qapi.c): the fields
 * every node has, from the core, and the format-specific part, which the
 * driver's bdrv_get_info fills. This is the one place outside the drivers
 * that knows the format-specific types (to free them), so that the core
 * (block.c) names no format.
 */
#include "block/block_int.h"

BlockImageInfo *bdrv_get_image_info(BlockDriverState *bs, Error **errp)
{
    g_autoptr(BlockImageInfo) info = g_new0(BlockImageInfo, 1);
    int64_t len = bdrv_getlength(bs, errp);

    if (len < 0) {
        return NULL;
    }
    /* QEMU's name for the node: json:{...} where no file name says it. */
    info->filename = g_strdup(bs->json_filename ? bs->json_filename
                                                : bdrv_get_filename(bs));
    info->format = g_strdup(bs->drv->format_name);
    info->virtual_size = len;
    info->actual_size = bdrv_get_allocated_file_size(bs);
    info->encrypted = bdrv_is_encrypted(bs);
    if (bs->drv->bdrv_get_info && bs->drv->bdrv_get_info(bs, info, errp) < 0) {
        return NULL;
    }
    if (bdrv_snapshot_list(bs, &info->snapshots, &info->nb_snapshots,
                           errp) < 0) {
        return NULL;
    }
    return g_steal_pointer(&info);
}

void bdrv_image_info_free(BlockImageInfo *info)
{
    if (!info) {
        return;
    }
    g_free(info->filename);
    g_free(info->format);
    if (info->luks) {
        qcrypto_block_info_free(info->luks);
    }
    if (info->qcow2) {
        g_free(info->qcow2->data_file);
        for (size_t i = 0; i < info->qcow2->nb_bitmaps; i++) {
            g_free(info->qcow2->bitmaps[i].name);
        }
        g_free(info->qcow2->bitmaps);
        if (info->qcow2->encrypt_luks) {
            qcrypto_block_info_free(info->qcow2->encrypt_luks);
        }
        g_free(info->qcow2);
    }
    g_free(info->rbd);
    g_free(info->backing_filename);
    g_free(info->full_backing_filename);
    g_free(info->backing_filename_format);
    bdrv_snapshot_info_list_free(info->snapshots, info->nb_snapshots);
    g_free(info);
}
