/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Size rounding of LUKS images: which encryption sector size a new image
 * gets, and how a requested size becomes whole sectors. One rule, used by
 * the "luks" block driver for create, convert (which creates), measure and
 * resize (docs/luks.md, "Size rounding").
 */
#include "crypto/block.h"

/* LUKS1 sectors, and the smallest LUKS2 sector (LUKS2 spec, "segments"). */
#define LUKS_SECTOR_SIZE 512
/* cryptsetup 2.6's largest encryption sector (MAX_SECTOR_SIZE). */
#define LUKS2_SECTOR_SIZE_MAX 4096

uint32_t qcrypto_block_create_sector_size(
    const QCryptoBlockCreateOptions *options)
{
    if (options->sector_size) {
        return options->sector_size;
    }
    if (options->luks_version != 2) {
        return LUKS_SECTOR_SIZE;
    }
    /*
     * cryptsetup 2.6 (lib/setup.c, LUKS2 format) starts from the device's
     * optimal sector (4096 on the file systems images live on) and falls
     * back to 512 when the data area is not a whole number of such
     * sectors: dm-crypt cannot map a partial sector. The same here, with
     * the size the image is to hold, so that it keeps that size exactly.
     */
    return options->size % LUKS2_SECTOR_SIZE_MAX ? LUKS_SECTOR_SIZE :
        LUKS2_SECTOR_SIZE_MAX;
}

uint64_t qcrypto_block_round_to_sectors(uint64_t size, uint64_t sector_size)
{
    return (size + sector_size - 1) & ~(sector_size - 1);
}

uint64_t qcrypto_block_create_payload_size(
    const QCryptoBlockCreateOptions *options)
{
    return qcrypto_block_round_to_sectors(
        options->size, qcrypto_block_create_sector_size(options));
}
