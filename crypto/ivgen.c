/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * IV generators: names and argument checks. The generators themselves
 * sit in ivgen-*.c behind the table in ivgenpriv.h.
 */
#include <string.h>

#include "ivgenpriv.h"

static const char *const ivgen_algo_names[QCRYPTO_IVGEN_ALGO__MAX] = {
    [QCRYPTO_IVGEN_ALGO_PLAIN] = "plain",
    [QCRYPTO_IVGEN_ALGO_PLAIN64] = "plain64",
    [QCRYPTO_IVGEN_ALGO_PLAIN64BE] = "plain64be",
    [QCRYPTO_IVGEN_ALGO_ESSIV] = "essiv",
    [QCRYPTO_IVGEN_ALGO_BENBI] = "benbi",
    [QCRYPTO_IVGEN_ALGO_NULL] = "null",
};

static const QCryptoIVGenDriver *const ivgen_drivers[QCRYPTO_IVGEN_ALGO__MAX] = {
    [QCRYPTO_IVGEN_ALGO_PLAIN] = &qcrypto_ivgen_plain,
    [QCRYPTO_IVGEN_ALGO_PLAIN64] = &qcrypto_ivgen_plain64,
    [QCRYPTO_IVGEN_ALGO_PLAIN64BE] = &qcrypto_ivgen_plain64be,
    [QCRYPTO_IVGEN_ALGO_ESSIV] = &qcrypto_ivgen_essiv,
    [QCRYPTO_IVGEN_ALGO_BENBI] = &qcrypto_ivgen_benbi,
    [QCRYPTO_IVGEN_ALGO_NULL] = &qcrypto_ivgen_null,
};

const char *qcrypto_ivgen_algo_name(QCryptoIVGenAlgo alg)
{
    g_assert(alg < QCRYPTO_IVGEN_ALGO__MAX);
    return ivgen_algo_names[alg];
}

int qcrypto_ivgen_algo_parse(const char *name)
{
    for (int i = 0; i < QCRYPTO_IVGEN_ALGO__MAX; i++) {
        if (g_str_equal(name, ivgen_algo_names[i])) {
            return i;
        }
    }
    return -1;
}

QCryptoIVGen *qcrypto_ivgen_new(QCryptoIVGenAlgo alg,
                                QCryptoCipherAlgo cipheralg,
                                QCryptoHashAlgo hash,
                                const uint8_t *key, size_t nkey,
                                Error **errp)
{
    g_autoptr(QCryptoIVGen) ivgen = NULL;

    if ((unsigned)alg >= QCRYPTO_IVGEN_ALGO__MAX) {
        error_setg(errp, "Unknown IV generator %d", (int)alg);
        return NULL;
    }
    if ((unsigned)cipheralg >= QCRYPTO_CIPHER_ALGO__MAX) {
        error_setg(errp, "Unknown cipher algorithm %d", (int)cipheralg);
        return NULL;
    }

    ivgen = g_new0(QCryptoIVGen, 1);
    ivgen->algo = alg;
    ivgen->cipher = cipheralg;
    ivgen->hash = hash;
    ivgen->block_len = qcrypto_cipher_get_block_len(cipheralg);
    ivgen->driver = ivgen_drivers[alg];
    if (ivgen->driver->init &&
        ivgen->driver->init(ivgen, key, nkey, errp) < 0) {
        return NULL;
    }
    return g_steal_pointer(&ivgen);
}

int qcrypto_ivgen_calculate(QCryptoIVGen *ivgen, uint64_t sector,
                            uint8_t *iv, size_t niv, Error **errp)
{
    /*
     * The IV is one cipher block (dm-crypt's iv_size for every mode we
     * have): a shorter buffer would silently drop bytes of the sector
     * number, a longer one would leave bytes the cipher never sees.
     */
    if (niv != ivgen->block_len) {
        error_setg(errp, "IV length %zu should be %zu for %s",
                   niv, ivgen->block_len,
                   qcrypto_cipher_algo_name(ivgen->cipher));
        return -1;
    }
    memset(iv, 0, niv);
    return ivgen->driver->calculate(ivgen, sector, iv, niv, errp);
}

QCryptoIVGenAlgo qcrypto_ivgen_get_algorithm(const QCryptoIVGen *ivgen)
{
    return ivgen->algo;
}

QCryptoCipherAlgo qcrypto_ivgen_get_cipher(const QCryptoIVGen *ivgen)
{
    return ivgen->cipher;
}

QCryptoHashAlgo qcrypto_ivgen_get_hash(const QCryptoIVGen *ivgen)
{
    return ivgen->hash;
}

void qcrypto_ivgen_free(QCryptoIVGen *ivgen)
{
    if (!ivgen) {
        return;
    }
    if (ivgen->driver && ivgen->driver->cleanup) {
        ivgen->driver->cleanup(ivgen);
    }
    g_free(ivgen);
}
