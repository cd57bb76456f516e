/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * HMAC internals, for PBKDF2's inner loop (private to crypto/).
 */
#ifndef QCRYPTO_HMACPRIV_H
#define QCRYPTO_HMACPRIV_H

#include "crypto/hmac.h"
#include "hashpriv.h"

struct QCryptoHmac {
    QCryptoHashAlgo alg;
    QCryptoHash *inner;         /* state after hashing K ^ ipad */
    QCryptoHash *outer;         /* state after hashing K ^ opad */
    QCryptoHash *msg;           /* the message being MACed, from inner */
};

/*
 * Finish the message: out = H(outer || H(inner || message)), with out
 * (digest_len bytes) also holding the inner digest on the way. hmac->msg
 * ends as a fresh copy of the inner state, ready for the next message, so
 * nothing of this message remains in it.
 */
static inline void qcrypto_hmac_finalize_fast(QCryptoHmac *hmac,
                                              uint8_t *out)
{
    size_t dlen = hmac->msg->driver->digest_len;

    qcrypto_hash_digest_fast(hmac->msg, out);
    qcrypto_hash_copy(hmac->msg, hmac->outer);
    qcrypto_hash_update_fast(hmac->msg, out, dlen);
    qcrypto_hash_digest_fast(hmac->msg, out);
    qcrypto_hash_copy(hmac->msg, hmac->inner);
}

#endif
