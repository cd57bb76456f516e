/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The LUKS anti-forensic splitter (LUKS1 On-Disk Format Specification
 * 1.2.3, section 2.4 "AF-Splitter").
 *
 * Splitting a key D of blocklen bytes into n stripes s_0 .. s_{n-1}:
 *
 *     d_0 = 0;  d_{k+1} = H(d_k ^ s_k) for random s_0 .. s_{n-2};
 *     s_{n-1} = d_{n-1} ^ D
 *
 * and merging recomputes d_{n-1} from the stripes and XORs it into the last
 * one. H, the diffuser, hashes the buffer in digest-sized pieces, piece j
 * prefixed by j as a 32-bit big-endian number; a last partial piece keeps
 * only as many bytes of its digest as it has.
 */
#include <string.h>

#include "crypto/afsplit.h"
#include "crypto/random.h"
#include "hashpriv.h"

static void afsplit_xor(uint8_t *dst, const uint8_t *a, const uint8_t *b,
                        size_t len)
{
    for (size_t i = 0; i < len; i++) {
        dst[i] = a[i] ^ b[i];
    }
}

/* The spec's diffuse(): buf = H(buf), in place. */
static void afsplit_diffuse(QCryptoHash *hash, uint8_t *buf, size_t blocklen)
{
    size_t dlen = hash->driver->digest_len;
    uint8_t digest[QCRYPTO_HASH_MAX_DIGEST_LEN];

    for (uint32_t j = 0; (size_t)j * dlen < blocklen; j++) {
        uint8_t *piece = buf + (size_t)j * dlen;
        size_t n = MIN(dlen, blocklen - (size_t)j * dlen);
        uint8_t iv[4] = { j >> 24, j >> 16, j >> 8, j };

        qcrypto_hash_update(hash, iv, sizeof(iv));
        qcrypto_hash_update(hash, piece, n);
        qcrypto_hash_finalize(hash, digest);
        memcpy(piece, digest, n);
    }
    explicit_bzero(digest, sizeof(digest));
}

static int afsplit_check(QCryptoHashAlgo alg, size_t blocklen,
                         uint32_t stripes, Error **errp)
{
    if (!qcrypto_hash_supports(alg)) {
        error_setg(errp, "AF splitter: unsupported hash algorithm %d",
                   (int)alg);
        return -1;
    }
    if (blocklen == 0 || stripes == 0) {
        error_setg(errp, "AF splitter: key length and stripes must be "
                   "nonzero");
        return -1;
    }
    if (blocklen > SIZE_MAX / stripes) {
        error_setg(errp, "AF splitter: %zu bytes x %u stripes is too large",
                   blocklen, stripes);
        return -1;
    }
    return 0;
}

/*
 * d_{n-1} from stripes s_0 .. s_{n-2} (in; already present in the output
 * when encoding, since the random stripes are the output's first part).
 */
static void afsplit_hash_stripes(QCryptoHash *hash, size_t blocklen,
                                 uint32_t stripes, const uint8_t *in,
                                 uint8_t *d)
{
    memset(d, 0, blocklen);
    for (uint32_t k = 0; k + 1 < stripes; k++) {
        afsplit_xor(d, d, in + (size_t)k * blocklen, blocklen);
        afsplit_diffuse(hash, d, blocklen);
    }
}

int qcrypto_afsplit_encode(QCryptoHashAlgo alg, size_t blocklen,
                           uint32_t stripes, const uint8_t *in,
                           uint8_t *out, Error **errp)
{
    g_autoptr(QCryptoHash) hash = NULL;
    g_autofree uint8_t *d = NULL;
    size_t last;

    if (afsplit_check(alg, blocklen, stripes, errp) < 0) {
        return -1;
    }
    last = (size_t)(stripes - 1) * blocklen;
    if (qcrypto_random_bytes(out, last, errp) < 0) {
        return -1;
    }
    hash = qcrypto_hash_new(alg, errp);
    d = g_malloc(blocklen);
    afsplit_hash_stripes(hash, blocklen, stripes, out, d);
    afsplit_xor(out + last, d, in, blocklen);
    explicit_bzero(d, blocklen);
    return 0;
}

int qcrypto_afsplit_decode(QCryptoHashAlgo alg, size_t blocklen,
                           uint32_t stripes, const uint8_t *in,
                           uint8_t *out, Error **errp)
{
    g_autoptr(QCryptoHash) hash = NULL;
    g_autofree uint8_t *d = NULL;

    if (afsplit_check(alg, blocklen, stripes, errp) < 0) {
        return -1;
    }
    hash = qcrypto_hash_new(alg, errp);
    d = g_malloc(blocklen);
    afsplit_hash_stripes(hash, blocklen, stripes, in, d);
    afsplit_xor(out, d, in + (size_t)(stripes - 1) * blocklen, blocklen);
    explicit_bzero(d, blocklen);
    return 0;
}
