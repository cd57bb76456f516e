/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The IV generators that lay the sector number out as it is: plain,
 * plain64, plain64be, and null (no IV at all). Layouts as in Linux
 * dm-crypt (Documentation/admin-guide/device-mapper/dm-crypt.rst).
 */
#include <string.h>

#include "ivgenpriv.h"

/* plain: the low 32 bits, little-endian. Wraps past 2 TiB of 512-byte
 * sectors, which is why cryptsetup moved to plain64. */
static int ivgen_plain_calculate(QCryptoIVGen *ivgen, uint64_t sector,
                                 uint8_t *iv, size_t niv, Error **errp)
{
    uint32_t le = GUINT32_TO_LE((uint32_t)sector);

    memcpy(iv, &le, sizeof(le));
    return 0;
}

/* plain64: all 64 bits, little-endian, at the start of the IV. */
static int ivgen_plain64_calculate(QCryptoIVGen *ivgen, uint64_t sector,
                                   uint8_t *iv, size_t niv, Error **errp)
{
    uint64_t le = GUINT64_TO_LE(sector);

    memcpy(iv, &le, sizeof(le));
    return 0;
}

/*
 * plain64be: 64 bits big-endian in the *last* 8 bytes, so that the whole
 * IV read as a big-endian number is the sector (dm-crypt's layout).
 */
static int ivgen_plain64be_calculate(QCryptoIVGen *ivgen, uint64_t sector,
                                     uint8_t *iv, size_t niv, Error **errp)
{
    uint64_t be = GUINT64_TO_BE(sector);

    memcpy(iv + niv - sizeof(be), &be, sizeof(be));
    return 0;
}

static int ivgen_null_calculate(QCryptoIVGen *ivgen, uint64_t sector,
                                uint8_t *iv, size_t niv, Error **errp)
{
    return 0;
}

const QCryptoIVGenDriver qcrypto_ivgen_plain = {
    .calculate = ivgen_plain_calculate,
};

const QCryptoIVGenDriver qcrypto_ivgen_plain64 = {
    .calculate = ivgen_plain64_calculate,
};

const QCryptoIVGenDriver qcrypto_ivgen_plain64be = {
    .calculate = ivgen_plain64be_calculate,
};

const QCryptoIVGenDriver qcrypto_ivgen_null = {
    .calculate = ivgen_null_calculate,
};
