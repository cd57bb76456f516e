/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * benbi: "big-endian narrow block count", the IV dm-crypt pairs with LRW
 * (cryptsetup's "lrw-benbi"). The IV is the 64-bit big-endian number of
 * the sector's first cipher block, counting from 1, in the last 8 bytes:
 * a 512-byte sector holds 512 / blocklen blocks, so the count is
 * (sector << (9 - log2(blocklen))) + 1.
 */
#include <string.h>

#include "ivgenpriv.h"

/* dm-crypt's sector unit: benbi always counts in 512-byte sectors. */
#define BENBI_SECTOR_BITS 9

typedef struct {
    unsigned shift;     /* 9 - log2(block length) */
} IVGenBenbi;

static int ivgen_benbi_init(QCryptoIVGen *ivgen, const uint8_t *key,
                            size_t nkey, Error **errp)
{
    IVGenBenbi *benbi;
    unsigned log = g_bit_nth_msf(ivgen->block_len, -1);

    /* Every block length we have (8, 16) passes; keep dm-crypt's checks. */
    if (ivgen->block_len != (1u << log) || log > BENBI_SECTOR_BITS ||
        ivgen->block_len < sizeof(uint64_t)) {
        error_setg(errp, "benbi needs a power-of-two block length from 8 "
                   "to 512 bytes, not %zu", ivgen->block_len);
        return -1;
    }
    benbi = g_new0(IVGenBenbi, 1);
    benbi->shift = BENBI_SECTOR_BITS - log;
    ivgen->private = benbi;
    return 0;
}

static int ivgen_benbi_calculate(QCryptoIVGen *ivgen, uint64_t sector,
                                 uint8_t *iv, size_t niv, Error **errp)
{
    IVGenBenbi *benbi = ivgen->private;
    uint64_t be = GUINT64_TO_BE((sector << benbi->shift) + 1);

    memcpy(iv + niv - sizeof(be), &be, sizeof(be));
    return 0;
}

static void ivgen_benbi_cleanup(QCryptoIVGen *ivgen)
{
    g_free(ivgen->private);
    ivgen->private = NULL;
}

const QCryptoIVGenDriver qcrypto_ivgen_benbi = {
    .init = ivgen_benbi_init,
    .calculate = ivgen_benbi_calculate,
    .cleanup = ivgen_benbi_cleanup,
};
