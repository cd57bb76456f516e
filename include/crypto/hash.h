/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Message digests: nettle's, plus Whirlpool of our own (crypto/whirlpool.c),
 * which nettle lacks but old cryptsetup images use.
 */
#ifndef QCRYPTO_HASH_H
#define QCRYPTO_HASH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "qemu/error.h"

typedef enum {
    QCRYPTO_HASH_ALGO_MD5,
    QCRYPTO_HASH_ALGO_SHA1,
    QCRYPTO_HASH_ALGO_SHA224,
    QCRYPTO_HASH_ALGO_SHA256,
    QCRYPTO_HASH_ALGO_SHA384,
    QCRYPTO_HASH_ALGO_SHA512,
    QCRYPTO_HASH_ALGO_RIPEMD160,
    QCRYPTO_HASH_ALGO_WHIRLPOOL,    /* "whirlpool" (= Linux's "wp512") */
    /*
     * Whirlpool truncated to 256 / 384 bits, as the Linux kernel's "wp256"
     * and "wp384": dm-crypt images use them for ESSIV (xts-essiv:wp256).
     */
    QCRYPTO_HASH_ALGO_WP256,
    QCRYPTO_HASH_ALGO_WP384,
    QCRYPTO_HASH_ALGO__MAX,
} QCryptoHashAlgo;

#define QCRYPTO_HASH_MAX_DIGEST_LEN 64
#define QCRYPTO_HASH_MAX_BLOCK_LEN 128

typedef struct QCryptoHash QCryptoHash;

/*
 * Names as LUKS headers and cryptsetup spell them: "md5", "sha1",
 * "sha256", "ripemd160", "whirlpool", "wp256"; parse also accepts "wp512"
 * for whirlpool. Parse returns -1 for an unknown name.
 */
const char *qcrypto_hash_algo_name(QCryptoHashAlgo alg);
int qcrypto_hash_algo_parse(const char *name);

bool qcrypto_hash_supports(QCryptoHashAlgo alg);
size_t qcrypto_hash_digest_len(QCryptoHashAlgo alg);
/* Internal block length (for HMAC): 64 for SHA-256, 128 for SHA-512. */
size_t qcrypto_hash_block_len(QCryptoHashAlgo alg);

QCryptoHash *qcrypto_hash_new(QCryptoHashAlgo alg, Error **errp);
void qcrypto_hash_update(QCryptoHash *hash, const void *buf, size_t len);
/*
 * Write the digest (digest_len bytes) to out, wipe the state and reset the
 * context so it may be used again for a new message.
 */
void qcrypto_hash_finalize(QCryptoHash *hash, uint8_t *out);
void qcrypto_hash_free(QCryptoHash *hash);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(QCryptoHash, qcrypto_hash_free)

/* One-shot: out receives qcrypto_hash_digest_len(alg) bytes. */
int qcrypto_hash_bytes(QCryptoHashAlgo alg, const void *buf, size_t len,
                       uint8_t *out, Error **errp);

#endif
