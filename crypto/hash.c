/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Message digests: one table row per algorithm, each pointing at a
 * nettle-style implementation (see hashpriv.h).
 */
#include <string.h>

#include <nettle/md5.h>
#include <nettle/ripemd160.h>
#include <nettle/sha1.h>
#include <nettle/sha2.h>

#include "hashpriv.h"

/* The unit of sharing between CPU caches on x86 and arm64 CPUs. */
#define QCRYPTO_HASH_CACHE_LINE 64

static const QCryptoHashDriver hash_drivers[QCRYPTO_HASH_ALGO__MAX] = {
    [QCRYPTO_HASH_ALGO_MD5] = { "md5", &nettle_md5, MD5_DIGEST_SIZE },
    [QCRYPTO_HASH_ALGO_SHA1] = { "sha1", &nettle_sha1, SHA1_DIGEST_SIZE },
    [QCRYPTO_HASH_ALGO_SHA224] = {
        "sha224", &nettle_sha224, SHA224_DIGEST_SIZE },
    [QCRYPTO_HASH_ALGO_SHA256] = {
        "sha256", &nettle_sha256, SHA256_DIGEST_SIZE },
    [QCRYPTO_HASH_ALGO_SHA384] = {
        "sha384", &nettle_sha384, SHA384_DIGEST_SIZE },
    [QCRYPTO_HASH_ALGO_SHA512] = {
        "sha512", &nettle_sha512, SHA512_DIGEST_SIZE },
    [QCRYPTO_HASH_ALGO_RIPEMD160] = {
        "ripemd160", &nettle_ripemd160, RIPEMD160_DIGEST_SIZE },
    [QCRYPTO_HASH_ALGO_WHIRLPOOL] = {
        "whirlpool", &qcrypto_whirlpool_hash, 64 },
    /* Linux crypto/wp512.c: wp384 and wp256 keep a prefix of the digest. */
    [QCRYPTO_HASH_ALGO_WP256] = { "wp256", &qcrypto_whirlpool_hash, 32 },
    [QCRYPTO_HASH_ALGO_WP384] = { "wp384", &qcrypto_whirlpool_hash, 48 },
};

const QCryptoHashDriver *qcrypto_hash_driver(QCryptoHashAlgo alg)
{
    g_assert((unsigned)alg < QCRYPTO_HASH_ALGO__MAX);
    return &hash_drivers[alg];
}

const char *qcrypto_hash_algo_name(QCryptoHashAlgo alg)
{
    return qcrypto_hash_driver(alg)->name;
}

int qcrypto_hash_algo_parse(const char *name)
{
    for (int i = 0; i < QCRYPTO_HASH_ALGO__MAX; i++) {
        if (g_str_equal(name, hash_drivers[i].name)) {
            return i;
        }
    }
    /* The Linux kernel's name for full-length Whirlpool. */
    if (g_str_equal(name, "wp512")) {
        return QCRYPTO_HASH_ALGO_WHIRLPOOL;
    }
    return -1;
}

bool qcrypto_hash_supports(QCryptoHashAlgo alg)
{
    return (unsigned)alg < QCRYPTO_HASH_ALGO__MAX;
}

size_t qcrypto_hash_digest_len(QCryptoHashAlgo alg)
{
    return qcrypto_hash_driver(alg)->digest_len;
}

size_t qcrypto_hash_block_len(QCryptoHashAlgo alg)
{
    return qcrypto_hash_driver(alg)->impl->block_size;
}

QCryptoHash *qcrypto_hash_new(QCryptoHashAlgo alg, Error **errp)
{
    const QCryptoHashDriver *driver;
    QCryptoHash *hash;
    size_t size;

    if (!qcrypto_hash_supports(alg)) {
        error_setg(errp, "Unsupported hash algorithm %d", (int)alg);
        return NULL;
    }
    driver = &hash_drivers[alg];
    /*
     * Whole cache lines of its own: PBKDF2 runs one HMAC per thread, and
     * states that shared a line with another thread's running state
     * (allocated next to each other) cost it a third of its speed.
     */
    size = sizeof(*hash) + driver->impl->context_size;
    size = (size + QCRYPTO_HASH_CACHE_LINE - 1) &
           ~(size_t)(QCRYPTO_HASH_CACHE_LINE - 1);
    hash = g_aligned_alloc0(1, size, QCRYPTO_HASH_CACHE_LINE);
    hash->driver = driver;
    driver->impl->init(hash->ctx);
    return hash;
}

void qcrypto_hash_copy(QCryptoHash *dst, const QCryptoHash *src)
{
    g_assert(dst->driver->impl == src->driver->impl);
    memcpy(dst->ctx, src->ctx, src->driver->impl->context_size);
}

void qcrypto_hash_update(QCryptoHash *hash, const void *buf, size_t len)
{
    qcrypto_hash_update_fast(hash, buf, len);
}

void qcrypto_hash_finalize(QCryptoHash *hash, uint8_t *out)
{
    const struct nettle_hash *impl = hash->driver->impl;

    impl->digest(hash->ctx, hash->driver->digest_len, out);
    /*
     * nettle's digest re-initialises the chaining state but leaves the
     * last message block in the buffer: wipe everything, then start over.
     */
    explicit_bzero(hash->ctx, impl->context_size);
    impl->init(hash->ctx);
}

void qcrypto_hash_free(QCryptoHash *hash)
{
    if (!hash) {
        return;
    }
    explicit_bzero(hash->ctx, hash->driver->impl->context_size);
    g_aligned_free(hash);
}

int qcrypto_hash_bytes(QCryptoHashAlgo alg, const void *buf, size_t len,
                       uint8_t *out, Error **errp)
{
    g_autoptr(QCryptoHash) hash = qcrypto_hash_new(alg, errp);

    if (!hash) {
        return -1;
    }
    qcrypto_hash_update(hash, buf, len);
    qcrypto_hash_finalize(hash, out);
    return 0;
}
