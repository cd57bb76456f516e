/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * HMAC (RFC 2104) over any QCryptoHashAlgo.
 *
 * The key is processed once, in qcrypto_hmac_new: the states after hashing
 * K ^ ipad and K ^ opad are kept, and each message starts from a copy of
 * them. PBKDF2 (pbkdf.c) relies on this: its inner loop is copy, one short
 * update, digest, twice.
 */
#include <string.h>

#include "hashpriv.h"
#include "hmacpriv.h"

/* RFC 2104 section 2. */
#define HMAC_IPAD 0x36
#define HMAC_OPAD 0x5c

QCryptoHmac *qcrypto_hmac_new(QCryptoHashAlgo alg, const uint8_t *key,
                              size_t nkey, Error **errp)
{
    g_autoptr(QCryptoHmac) hmac = g_new0(QCryptoHmac, 1);
    uint8_t pad[QCRYPTO_HASH_MAX_BLOCK_LEN];
    uint8_t hashed_key[QCRYPTO_HASH_MAX_DIGEST_LEN];
    size_t block_len;

    hmac->alg = alg;
    hmac->inner = qcrypto_hash_new(alg, errp);
    if (!hmac->inner) {
        return NULL;
    }
    hmac->outer = qcrypto_hash_new(alg, errp);
    hmac->msg = qcrypto_hash_new(alg, errp);
    block_len = qcrypto_hash_block_len(alg);
    g_assert(block_len <= sizeof(pad));

    /* RFC 2104 section 2: a key longer than B is replaced by H(key). */
    if (nkey > block_len) {
        qcrypto_hash_update(hmac->inner, key, nkey);
        qcrypto_hash_finalize(hmac->inner, hashed_key);
        key = hashed_key;
        nkey = qcrypto_hash_digest_len(alg);
    }

    memset(pad, HMAC_IPAD, block_len);
    for (size_t i = 0; i < nkey; i++) {
        pad[i] ^= key[i];
    }
    qcrypto_hash_update(hmac->inner, pad, block_len);

    memset(pad, HMAC_OPAD, block_len);
    for (size_t i = 0; i < nkey; i++) {
        pad[i] ^= key[i];
    }
    qcrypto_hash_update(hmac->outer, pad, block_len);

    qcrypto_hash_copy(hmac->msg, hmac->inner);

    explicit_bzero(pad, sizeof(pad));
    explicit_bzero(hashed_key, sizeof(hashed_key));
    return g_steal_pointer(&hmac);
}

void qcrypto_hmac_update(QCryptoHmac *hmac, const void *buf, size_t len)
{
    qcrypto_hash_update_fast(hmac->msg, buf, len);
}

void qcrypto_hmac_finalize(QCryptoHmac *hmac, uint8_t *out)
{
    qcrypto_hmac_finalize_fast(hmac, out);
}

void qcrypto_hmac_free(QCryptoHmac *hmac)
{
    if (!hmac) {
        return;
    }
    qcrypto_hash_free(hmac->inner);
    qcrypto_hash_free(hmac->outer);
    qcrypto_hash_free(hmac->msg);
    g_free(hmac);
}

int qcrypto_hmac_bytes(QCryptoHashAlgo alg, const uint8_t *key, size_t nkey,
                       const void *buf, size_t len, uint8_t *out,
                       Error **errp)
{
    g_autoptr(QCryptoHmac) hmac = qcrypto_hmac_new(alg, key, nkey, errp);

    if (!hmac) {
        return -1;
    }
    qcrypto_hmac_update(hmac, buf, len);
    qcrypto_hmac_finalize(hmac, out);
    return 0;
}
