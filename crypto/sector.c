/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Sector ciphers (include/crypto/sector.h): the one place where a cipher
 * meets an IV generator.
 *
 * A call takes one of three paths, chosen when the object is built:
 * - ECB: no IV, one cipher call over the whole buffer;
 * - bulk: the IVs are numbers that count up (plain, plain64, plain64be)
 *   and the cipher's backend runs such sectors itself
 *   (qcrypto_cipher_has_sectors()): one call, the backend computes the
 *   IVs (the built-in AES does 32 XTS tweaks at once);
 * - per sector: IV generator, setiv, encrypt, for each sector in turn
 *   (ESSIV, benbi, null, or a backend without a fast path).
 */
#include <string.h>

#include "crypto/sector.h"

struct QCryptoSectorCipher {
    QCryptoCipher *cipher;
    QCryptoIVGen *ivgen;            /* NULL for ECB */
    size_t sector_size;
    unsigned iv_shift;
    uint64_t iv_offset;
    bool bulk;                      /* the backend's multi-sector path */
    QCryptoCipherIVFormat iv_format;    /* when bulk */
};

/* The IV generators whose IV is the number itself, laid out. */
static bool sector_counted_iv_format(QCryptoIVGenAlgo ivgen,
                                     QCryptoCipherIVFormat *format)
{
    switch (ivgen) {
    case QCRYPTO_IVGEN_ALGO_PLAIN:
        *format = QCRYPTO_CIPHER_IV_LE32;
        return true;
    case QCRYPTO_IVGEN_ALGO_PLAIN64:
        *format = QCRYPTO_CIPHER_IV_LE64;
        return true;
    case QCRYPTO_IVGEN_ALGO_PLAIN64BE:
        *format = QCRYPTO_CIPHER_IV_BE64;
        return true;
    default:
        return false;
    }
}

QCryptoSectorCipher *qcrypto_sector_cipher_new(
    const QCryptoSectorCipherSpec *spec, const uint8_t *key, size_t nkey,
    size_t sector_size, unsigned iv_shift, uint64_t iv_offset, Error **errp)
{
    g_autoptr(QCryptoSectorCipher) sc = g_new0(QCryptoSectorCipher, 1);

    sc->cipher = qcrypto_cipher_new(spec->alg, spec->mode, key, nkey, errp);
    if (!sc->cipher) {
        return NULL;
    }
    /* Checked after the cipher, which vouches for spec->alg. */
    if (sector_size == 0 ||
        sector_size % qcrypto_cipher_get_block_len(spec->alg)) {
        error_setg(errp, "Sector size %zu is not a multiple of the %zu-byte "
                   "block of %s", sector_size,
                   qcrypto_cipher_get_block_len(spec->alg),
                   qcrypto_cipher_algo_name(spec->alg));
        return NULL;
    }
    if (iv_shift >= 64) {
        error_setg(errp, "IV shift %u is not below 64", iv_shift);
        return NULL;
    }
    sc->sector_size = sector_size;
    sc->iv_shift = iv_shift;
    sc->iv_offset = iv_offset;
    if (spec->mode == QCRYPTO_CIPHER_MODE_ECB) {
        return g_steal_pointer(&sc);
    }

    /* Generators other than ESSIV ignore the hash and the key. */
    sc->ivgen = qcrypto_ivgen_new(spec->ivgen, spec->alg, spec->ivgen_hash,
                                  key, nkey, errp);
    if (!sc->ivgen) {
        return NULL;
    }
    sc->bulk = sector_counted_iv_format(spec->ivgen, &sc->iv_format) &&
        qcrypto_cipher_has_sectors(sc->cipher, sc->iv_format);
    return g_steal_pointer(&sc);
}

void qcrypto_sector_cipher_free(QCryptoSectorCipher *sc)
{
    if (sc) {
        qcrypto_cipher_free(sc->cipher);
        qcrypto_ivgen_free(sc->ivgen);
        g_free(sc);
    }
}

/* The per-sector path: one IV, one setiv and one cipher call a sector. */
static int sector_cipher_each(QCryptoSectorCipher *sc, uint64_t sector,
                              uint8_t *buf, size_t len, bool encrypt,
                              Error **errp)
{
    QCryptoCipherAlgo alg = qcrypto_cipher_get_algo(sc->cipher);
    size_t niv = qcrypto_cipher_get_block_len(alg);
    uint8_t iv[16];     /* the largest block length */
    int ret = 0;

    for (size_t done = 0; done < len && ret == 0;
         done += sc->sector_size, sector++) {
        /* Wraps modulo 2^64, high bits shifted out: dm-crypt's sums. */
        ret = qcrypto_ivgen_calculate(sc->ivgen, sector << sc->iv_shift,
                                      iv, niv, errp);
        if (ret == 0) {
            ret = qcrypto_cipher_setiv(sc->cipher, iv, niv, errp);
        }
        if (ret == 0) {
            ret = encrypt ?
                qcrypto_cipher_encrypt(sc->cipher, buf + done, buf + done,
                                       sc->sector_size, errp) :
                qcrypto_cipher_decrypt(sc->cipher, buf + done, buf + done,
                                       sc->sector_size, errp);
        }
    }
    /* An ESSIV IV is a function of the key: leave none behind. */
    explicit_bzero(iv, sizeof(iv));
    return ret;
}

static int sector_cipher_crypt(QCryptoSectorCipher *sc, uint64_t first_sector,
                               uint8_t *buf, size_t len, bool encrypt,
                               Error **errp)
{
    uint64_t sector = first_sector + sc->iv_offset;

    if (sc->bulk) {
        /* The cipher checks the length: one division per request. */
        QCryptoCipherSectors s = {
            .first_iv = sector << sc->iv_shift,
            .iv_shift = sc->iv_shift,
            .iv_format = sc->iv_format,
            .sector_size = sc->sector_size,
        };

        return encrypt ?
            qcrypto_cipher_encrypt_sectors(sc->cipher, &s, buf, len, errp) :
            qcrypto_cipher_decrypt_sectors(sc->cipher, &s, buf, len, errp);
    }
    if (len % sc->sector_size) {
        error_setg(errp, "Length %zu is not a whole number of %zu-byte "
                   "sectors", len, sc->sector_size);
        return -1;
    }
    if (len == 0) {
        return 0;
    }
    if (!sc->ivgen) {
        return encrypt ?
            qcrypto_cipher_encrypt(sc->cipher, buf, buf, len, errp) :
            qcrypto_cipher_decrypt(sc->cipher, buf, buf, len, errp);
    }
    return sector_cipher_each(sc, sector, buf, len, encrypt, errp);
}

int qcrypto_sector_cipher_encrypt(QCryptoSectorCipher *sc,
                                  uint64_t first_sector,
                                  uint8_t *buf, size_t len, Error **errp)
{
    return sector_cipher_crypt(sc, first_sector, buf, len, true, errp);
}

int qcrypto_sector_cipher_decrypt(QCryptoSectorCipher *sc,
                                  uint64_t first_sector,
                                  uint8_t *buf, size_t len, Error **errp)
{
    return sector_cipher_crypt(sc, first_sector, buf, len, false, errp);
}

size_t qcrypto_sector_cipher_get_sector_size(const QCryptoSectorCipher *sc)
{
    return sc->sector_size;
}

const char *qcrypto_sector_cipher_get_impl_name(const QCryptoSectorCipher *sc)
{
    return qcrypto_cipher_get_impl_name(sc->cipher);
}

bool qcrypto_sector_cipher_is_bulk(const QCryptoSectorCipher *sc)
{
    return sc->bulk;
}
