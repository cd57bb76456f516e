/* SPDX-License-Identifier: GPL-2.0-or-later */
/* HMAC (RFC 2104) over any QCryptoHashAlgo. */
#ifndef QCRYPTO_HMAC_H
#define QCRYPTO_HMAC_H

#include "crypto/hash.h"

typedef struct QCryptoHmac QCryptoHmac;

QCryptoHmac *qcrypto_hmac_new(QCryptoHashAlgo alg, const uint8_t *key,
                              size_t nkey, Error **errp);
void qcrypto_hmac_update(QCryptoHmac *hmac, const void *buf, size_t len);
/* Write the MAC (digest_len bytes) and reset for a new message, same key. */
void qcrypto_hmac_finalize(QCryptoHmac *hmac, uint8_t *out);
/* Wipes the keyed state. */
void qcrypto_hmac_free(QCryptoHmac *hmac);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(QCryptoHmac, qcrypto_hmac_free)

int qcrypto_hmac_bytes(QCryptoHashAlgo alg, const uint8_t *key, size_t nkey,
                       const void *buf, size_t len, uint8_t *out,
                       Error **errp);

#endif
