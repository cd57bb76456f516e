/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * IV generators: the IV of each disk sector, as dm-crypt computes it.
 *
 *   plain      sector number, 32-bit little-endian, zero-padded
 *   plain64    sector number, 64-bit little-endian, zero-padded
 *   plain64be  sector number, 64-bit big-endian, zero-padded
 *   essiv      E_salt(plain64), salt = hash(master key), with the cipher's
 *              algorithm keyed by the whole digest (dm-crypt's rule: the
 *              ESSIV key length is the hash length, so aes-128 with sha256
 *              runs ESSIV on aes-256)
 *   benbi      64-bit big-endian count of cipher blocks, starting at 1, in
 *              the last 8 bytes (for LRW)
 *   null       all zeroes
 */
#ifndef QCRYPTO_IVGEN_H
#define QCRYPTO_IVGEN_H

#include "crypto/cipher.h"
#include "crypto/hash.h"

typedef struct QCryptoIVGen QCryptoIVGen;

typedef enum {
    QCRYPTO_IVGEN_ALGO_PLAIN,
    QCRYPTO_IVGEN_ALGO_PLAIN64,
    QCRYPTO_IVGEN_ALGO_PLAIN64BE,
    QCRYPTO_IVGEN_ALGO_ESSIV,
    QCRYPTO_IVGEN_ALGO_BENBI,
    QCRYPTO_IVGEN_ALGO_NULL,
    QCRYPTO_IVGEN_ALGO__MAX,
} QCryptoIVGenAlgo;

/* "plain", "plain64", "plain64be", "essiv", "benbi", "null"; -1 if unknown */
const char *qcrypto_ivgen_algo_name(QCryptoIVGenAlgo alg);
int qcrypto_ivgen_algo_parse(const char *name);

/*
 * cipheralg is the data cipher's algorithm (it sets the IV length, and the
 * ESSIV cipher family). hash and key (the master key) are used by ESSIV
 * only; pass 0 / NULL / 0 otherwise.
 */
QCryptoIVGen *qcrypto_ivgen_new(QCryptoIVGenAlgo alg,
                                QCryptoCipherAlgo cipheralg,
                                QCryptoHashAlgo hash,
                                const uint8_t *key, size_t nkey,
                                Error **errp);

/*
 * Write the IV of sector (niv bytes, the cipher's block length) to iv.
 * sector is the number the IV is made of: where sectors are counted in
 * other units (LUKS2's 4096-byte sectors in 512-byte units), the caller
 * has converted it (crypto/sector.c does).
 */
int qcrypto_ivgen_calculate(QCryptoIVGen *ivgen, uint64_t sector,
                            uint8_t *iv, size_t niv, Error **errp);

QCryptoIVGenAlgo qcrypto_ivgen_get_algorithm(const QCryptoIVGen *ivgen);
QCryptoCipherAlgo qcrypto_ivgen_get_cipher(const QCryptoIVGen *ivgen);
QCryptoHashAlgo qcrypto_ivgen_get_hash(const QCryptoIVGen *ivgen);

void qcrypto_ivgen_free(QCryptoIVGen *ivgen);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(QCryptoIVGen, qcrypto_ivgen_free)

#endif
