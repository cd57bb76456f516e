/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Built-in AES for x86-64: what the three paths (aesni, vaes-256, vaes-512)
 * share. Private to crypto/aes-x86/.
 *
 * Each path is a table of mode functions (AesX86Ops) over expanded keys
 * (AesX86Key). aes-x86.c picks the table at cipher creation and keeps the
 * chaining state (CBC IV, CTR counter, XTS running tweak); the functions
 * here are pure transforms of whole runs of blocks and never allocate.
 */
#ifndef QCRYPTO_AES_X86_H
#define QCRYPTO_AES_X86_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <immintrin.h>

#include "crypto/cipher.h"
#include "crypto/xts.h"

/* FIPS-197 section 5, figure 4: Nr = 10, 12 or 14. */
#define AES_X86_MAX_ROUNDS 14
#define AES_X86_BLOCK 16

typedef struct AesX86Key {
    /* Round keys for the cipher, then for the equivalent inverse cipher. */
    __m128i enc[AES_X86_MAX_ROUNDS + 1];
    __m128i dec[AES_X86_MAX_ROUNDS + 1];
    unsigned rounds;
} AesX86Key;

/*
 * XTS first tweaks computed ahead, for one-sector calls (the template's
 * xts_one_sector()): tw[next .. n-1] are E_K2 of the IV numbers num,
 * num + (1 << iv_shift), ... in iv_format. A tweak depends on K2 and the
 * IV number alone, so an entry is never stale: a call for another sector
 * simply misses. Key material: wiped with the cipher.
 */
typedef struct AesX86TweakCache {
    xts_uint128 tw[4];          /* one zmm of lanes at most */
    uint64_t num;
    unsigned next, n;
    unsigned iv_shift;
    QCryptoCipherIVFormat iv_format;
} AesX86TweakCache;

typedef struct AesX86Ops {
    const char *name;
    /* nblocks whole 16-byte blocks; in == out allowed. */
    void (*ecb_encrypt)(const AesX86Key *key, const uint8_t *in,
                        uint8_t *out, size_t nblocks);
    void (*ecb_decrypt)(const AesX86Key *key, const uint8_t *in,
                        uint8_t *out, size_t nblocks);
    /* iv is updated to the last ciphertext block. */
    void (*cbc_encrypt)(const AesX86Key *key, uint8_t *iv,
                        const uint8_t *in, uint8_t *out, size_t nblocks);
    void (*cbc_decrypt)(const AesX86Key *key, uint8_t *iv,
                        const uint8_t *in, uint8_t *out, size_t nblocks);
    /* ctr: 128-bit big-endian counter, advanced by nblocks. */
    void (*ctr_crypt)(const AesX86Key *key, uint8_t *ctr,
                      const uint8_t *in, uint8_t *out, size_t nblocks);
    /*
     * XTS over len >= 16 bytes with running tweak *T (advanced past the
     * data); a ragged len ends with ciphertext stealing.
     */
    void (*xts_encrypt)(const AesX86Key *key, xts_uint128 *T,
                        const uint8_t *in, uint8_t *out, size_t len);
    void (*xts_decrypt)(const AesX86Key *key, xts_uint128 *T,
                        const uint8_t *in, uint8_t *out, size_t len);
    /*
     * count whole sectors in place, with IVs counted as s says (see
     * crypto/cipher.h); the first tweak of each is E_tkey(its IV). A
     * one-sector call takes its tweak from cache when it is there, and
     * leaves the next sector's there.
     */
    void (*xts_encrypt_sectors)(const AesX86Key *key, const AesX86Key *tkey,
                                AesX86TweakCache *cache,
                                const QCryptoCipherSectors *s, uint8_t *buf,
                                size_t count);
    void (*xts_decrypt_sectors)(const AesX86Key *key, const AesX86Key *tkey,
                                AesX86TweakCache *cache,
                                const QCryptoCipherSectors *s, uint8_t *buf,
                                size_t count);
} AesX86Ops;

/*
 * The IVs of sectors first .. first + n - 1 of the run s, the inputs of
 * their first XTS tweaks: IV number s->first_iv + (i << s->iv_shift) for
 * sector i, laid out as s->iv_format says (crypto/cipher.h). The layout
 * is chosen once per batch, outside the loop, and the number steps by
 * addition: this runs once per sector, so it must stay a few instructions.
 */
static inline void aes_x86_sector_ivs(xts_uint128 *iv,
                                      const QCryptoCipherSectors *s,
                                      size_t first, size_t n)
{
    uint64_t num = s->first_iv + ((uint64_t)first << s->iv_shift);
    uint64_t step = (uint64_t)1 << s->iv_shift;

    switch (s->iv_format) {
    case QCRYPTO_CIPHER_IV_LE32:
        for (size_t i = 0; i < n; i++, num += step) {
            iv[i].u[0] = GUINT64_TO_LE(num & UINT32_MAX);
            iv[i].u[1] = 0;
        }
        break;
    case QCRYPTO_CIPHER_IV_LE64:
        for (size_t i = 0; i < n; i++, num += step) {
            iv[i].u[0] = GUINT64_TO_LE(num);
            iv[i].u[1] = 0;
        }
        break;
    case QCRYPTO_CIPHER_IV_BE64:
        /* Big-endian in the last 8 bytes: the high qword. */
        for (size_t i = 0; i < n; i++, num += step) {
            iv[i].u[0] = 0;
            iv[i].u[1] = GUINT64_TO_BE(num);
        }
        break;
    }
}

/*
 * The IV of number num laid out as iv_format says, built in a register
 * rather than in memory: the one-sector path feeds it straight into E_K2,
 * and a 16-byte load of two 8-byte stores just made would miss store
 * forwarding on the critical path of a call whose tweak is not cached.
 */
static inline __m128i aes_x86_iv_vec(QCryptoCipherIVFormat iv_format,
                                     uint64_t num)
{
    switch (iv_format) {
    case QCRYPTO_CIPHER_IV_LE32:
        return _mm_cvtsi64_si128((long long)(num & UINT32_MAX));
    case QCRYPTO_CIPHER_IV_LE64:
        return _mm_cvtsi64_si128((long long)num);
    default:
        /* BE64: big-endian in the high qword. */
        return _mm_set_epi64x((long long)GUINT64_TO_BE(num), 0);
    }
}

/* aes-ni.c: key expansion (FIPS-197 section 5.2) and the xmm path. */
void aes_x86_expand_key(AesX86Key *key, const uint8_t *bytes, size_t nkey);
/* The CBC encryption every path shares: serial by nature, see aes-ni.c. */
void aes_x86_cbc_encrypt(const AesX86Key *key, uint8_t *iv,
                         const uint8_t *in, uint8_t *out, size_t nblocks);
extern const AesX86Ops aes_x86_ops_aesni;

/* aes-vaes.c: the same modes on ymm and zmm vectors. */
extern const AesX86Ops aes_x86_ops_vaes256;
extern const AesX86Ops aes_x86_ops_vaes512;
/* The zmm path with the XTS loop for AMD cores (Zen 4 and later). */
extern const AesX86Ops aes_x86_ops_vaes512_zen;

#endif
