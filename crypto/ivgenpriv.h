/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The IV generator driver table (private to crypto/).
 *
 * Each generator (ivgen-plain.c, ivgen-benbi.c, ivgen-essiv.c) fills a
 * QCryptoIVGenDriver. crypto/ivgen.c checks the arguments and zeroes the
 * IV buffer before calling calculate, so a driver only writes the bytes
 * it owns.
 */
#ifndef QCRYPTO_IVGENPRIV_H
#define QCRYPTO_IVGENPRIV_H

#include "crypto/ivgen.h"

typedef struct QCryptoIVGenDriver {
    /* Set up private state (ivgen->private); NULL when there is none. */
    int (*init)(QCryptoIVGen *ivgen, const uint8_t *key, size_t nkey,
                Error **errp);
    /* iv is niv (= block length) zero bytes on entry. */
    int (*calculate)(QCryptoIVGen *ivgen, uint64_t sector,
                     uint8_t *iv, size_t niv, Error **errp);
    /* Wipe and free private state; NULL when there is none. */
    void (*cleanup)(QCryptoIVGen *ivgen);
} QCryptoIVGenDriver;

struct QCryptoIVGen {
    QCryptoIVGenAlgo algo;
    QCryptoCipherAlgo cipher;
    QCryptoHashAlgo hash;
    size_t block_len;               /* of the data cipher: the IV length */
    const QCryptoIVGenDriver *driver;
    void *private;
};

extern const QCryptoIVGenDriver qcrypto_ivgen_plain;
extern const QCryptoIVGenDriver qcrypto_ivgen_plain64;
extern const QCryptoIVGenDriver qcrypto_ivgen_plain64be;
extern const QCryptoIVGenDriver qcrypto_ivgen_essiv;
extern const QCryptoIVGenDriver qcrypto_ivgen_benbi;
extern const QCryptoIVGenDriver qcrypto_ivgen_null;

#endif
