/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Hash internals shared by hash.c, hmac.c and pbkdf.c (private to crypto/).
 *
 * Every algorithm is a nettle-style description (struct nettle_hash: context
 * size, block size, init/update/digest): nettle's own for the SHA family,
 * MD5 and RIPEMD-160, ours for Whirlpool (whirlpool.c). A context is plain
 * memory, so HMAC can precompute its keyed inner and outer states once and
 * copy them for each message (qcrypto_hash_copy), which is what makes
 * PBKDF2 cheap: two compressions and two small copies per iteration.
 */
#ifndef QCRYPTO_HASHPRIV_H
#define QCRYPTO_HASHPRIV_H

#include <stdalign.h>
#include <stddef.h>

#include <nettle/nettle-meta.h>

#include "crypto/hash.h"

typedef struct QCryptoHashDriver {
    const char *name;
    const struct nettle_hash *impl;
    /*
     * Output length: the implementation's digest size, or less for the
     * truncated Whirlpool variants (nettle's digest functions write a
     * prefix when asked for fewer bytes).
     */
    size_t digest_len;
} QCryptoHashDriver;

struct QCryptoHash {
    const QCryptoHashDriver *driver;
    /* The implementation's context (impl->context_size bytes). */
    alignas(max_align_t) uint8_t ctx[];
};

const QCryptoHashDriver *qcrypto_hash_driver(QCryptoHashAlgo alg);

/* Copy the whole running state of src into dst (same algorithm). */
void qcrypto_hash_copy(QCryptoHash *dst, const QCryptoHash *src);

/*
 * Write the digest and restart the context, without the wipe that
 * qcrypto_hash_finalize adds: for loops (PBKDF2) that overwrite the state
 * with a copy right away and wipe once at the end.
 */
static inline void qcrypto_hash_digest_fast(QCryptoHash *hash, uint8_t *out)
{
    hash->driver->impl->digest(hash->ctx, hash->driver->digest_len, out);
}

static inline void qcrypto_hash_update_fast(QCryptoHash *hash,
                                            const void *buf, size_t len)
{
    hash->driver->impl->update(hash->ctx, len, buf);
}

/* Whirlpool (whirlpool.c), in nettle's shape so the table can hold it. */
extern const struct nettle_hash qcrypto_whirlpool_hash;

#endif
