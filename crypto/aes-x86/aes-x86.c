/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Built-in AES for x86-64: CPU detection and the three backends
 * ("vaes-512", "vaes-256", "aesni") that crypto/cipher.c lists best first.
 *
 * All three share one cipher object and driver; they differ only in the
 * table of mode functions (AesX86Ops) the cipher points at, chosen when
 * it is created. This file keeps the chaining state between calls; the
 * tables do the work (aes-ni.c, aes-vaes.c, aes-x86-template.c.inc).
 */
#include <cpuid.h>
#include <string.h>

#include "crypto/cipherpriv.h"
#include "aes-x86.h"

typedef struct AesX86Cipher {
    QCryptoCipher base;
    const AesX86Ops *ops;
    AesX86Key key;
    AesX86Key tweak_key;        /* XTS: K2, which encrypts the IV */
    AesX86TweakCache tweak_cache;   /* XTS: first tweaks computed ahead */
    union {
        uint8_t iv[16];         /* CBC: last ciphertext; CTR: counter */
        xts_uint128 tweak;      /* XTS: tweak of the next block */
    };
} AesX86Cipher;

/* ---- CPU features ---- */

typedef struct AesX86Features {
    bool aesni, vaes256, vaes512;
    /* The zmm XTS loop for AMD cores (aes-vaes.c) rather than the template's. */
    bool xts_zen;
} AesX86Features;

/* XCR0 bits (Intel SDM vol. 1, 13.3): state the OS saves on switches. */
#define XCR0_SSE_AVX 0x06       /* XMM, YMM upper halves */
#define XCR0_AVX512 0xe0        /* opmask, ZMM0-15 upper, ZMM16-31 */

static uint64_t aes_x86_xgetbv0(void)
{
    uint32_t lo, hi;

    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((uint64_t)hi << 32) | lo;
}

/*
 * Which zmm XTS loop: AMD's cores with AVX-512 (Zen 4 and later) run the
 * rotation step of aes-vaes.c beside their AES rounds for free, Intel's
 * run its qword shift on the AES port (docs/aes.md). The environment
 * variable QCRYPTO_AES_XTS_LOOP=zen|generic overrides the CPU's vendor,
 * so both loops can be tested and measured on any AVX-512 machine.
 */
static bool aes_x86_xts_zen_wanted(void)
{
    const char *force = g_getenv("QCRYPTO_AES_XTS_LOOP");
    unsigned a, b, c, d;

    if (force && g_str_equal(force, "zen")) {
        return true;
    }
    if (force && g_str_equal(force, "generic")) {
        return false;
    }
    if (!__get_cpuid(0, &a, &b, &c, &d)) {
        return false;
    }
    /* "AuthenticAMD" in EBX, EDX, ECX. */
    return b == 0x68747541 && d == 0x69746e65 && c == 0x444d4163;
}

static gpointer aes_x86_detect(gpointer data)
{
    AesX86Features *f = data;
    unsigned a, b, c, d, b7 = 0, c7 = 0;
    uint64_t xcr0 = 0;

    if (!__get_cpuid(1, &a, &b, &c, &d)) {
        return f;
    }
    f->aesni = (c & bit_AES) && (c & bit_PCLMUL) && (c & bit_SSSE3);
    if (c & bit_OSXSAVE) {
        xcr0 = aes_x86_xgetbv0();
    }
    if (__get_cpuid_count(7, 0, &a, &b7, &c7, &d)) {
        f->vaes256 = f->aesni && (c & bit_AVX) && (b7 & bit_AVX2) &&
            (c7 & bit_VAES) && (c7 & bit_VPCLMULQDQ) &&
            (xcr0 & XCR0_SSE_AVX) == XCR0_SSE_AVX;
        f->vaes512 = f->vaes256 && (b7 & bit_AVX512F) &&
            (b7 & bit_AVX512BW) && (b7 & bit_AVX512VL) &&
            (xcr0 & XCR0_AVX512) == XCR0_AVX512;
    }
    f->xts_zen = f->vaes512 && aes_x86_xts_zen_wanted();
    return f;
}

static const AesX86Features *aes_x86_features(void)
{
    static GOnce once = G_ONCE_INIT;
    static AesX86Features features;

    return g_once(&once, aes_x86_detect, &features);
}

static bool aes_x86_usable_aesni(void)
{
    return aes_x86_features()->aesni;
}

static bool aes_x86_usable_vaes256(void)
{
    return aes_x86_features()->vaes256;
}

static bool aes_x86_usable_vaes512(void)
{
    return aes_x86_features()->vaes512;
}

/* ---- the driver ---- */

static int aes_x86_encrypt(QCryptoCipher *cipher, const void *in, void *out,
                           size_t len, Error **errp)
{
    AesX86Cipher *c = (AesX86Cipher *)cipher;
    const AesX86Ops *ops = c->ops;

    switch (cipher->mode) {
    case QCRYPTO_CIPHER_MODE_ECB:
        ops->ecb_encrypt(&c->key, in, out, len / 16);
        break;
    case QCRYPTO_CIPHER_MODE_CBC:
        ops->cbc_encrypt(&c->key, c->iv, in, out, len / 16);
        break;
    case QCRYPTO_CIPHER_MODE_CTR:
        ops->ctr_crypt(&c->key, c->iv, in, out, len / 16);
        break;
    case QCRYPTO_CIPHER_MODE_XTS:
        ops->xts_encrypt(&c->key, &c->tweak, in, out, len);
        break;
    default:
        g_assert_not_reached();
    }
    return 0;
}

static int aes_x86_decrypt(QCryptoCipher *cipher, const void *in, void *out,
                           size_t len, Error **errp)
{
    AesX86Cipher *c = (AesX86Cipher *)cipher;
    const AesX86Ops *ops = c->ops;

    switch (cipher->mode) {
    case QCRYPTO_CIPHER_MODE_ECB:
        ops->ecb_decrypt(&c->key, in, out, len / 16);
        break;
    case QCRYPTO_CIPHER_MODE_CBC:
        ops->cbc_decrypt(&c->key, c->iv, in, out, len / 16);
        break;
    case QCRYPTO_CIPHER_MODE_CTR:
        ops->ctr_crypt(&c->key, c->iv, in, out, len / 16);
        break;
    case QCRYPTO_CIPHER_MODE_XTS:
        ops->xts_decrypt(&c->key, &c->tweak, in, out, len);
        break;
    default:
        g_assert_not_reached();
    }
    return 0;
}

static void aes_x86_set_iv(AesX86Cipher *c, const uint8_t *iv)
{
    if (c->base.mode == QCRYPTO_CIPHER_MODE_XTS) {
        /* IEEE 1619-2007 section 5.3.1: T = E_K2(i). */
        c->ops->ecb_encrypt(&c->tweak_key, iv, c->tweak.b, 1);
    } else {
        memcpy(c->iv, iv, sizeof(c->iv));
    }
}

static int aes_x86_setiv(QCryptoCipher *cipher, const uint8_t *iv,
                         size_t niv, Error **errp)
{
    aes_x86_set_iv((AesX86Cipher *)cipher, iv);
    return 0;
}

/*
 * The multi-sector fast path: XTS, with any of the counted IV formats
 * (crypto/cipher.h). CBC has no use for it (it is serial within a
 * sector), ECB has no IV, and CTR's counter already spans the run.
 */
static bool aes_x86_has_sectors(const QCryptoCipher *cipher,
                                QCryptoCipherIVFormat iv_format)
{
    return cipher->mode == QCRYPTO_CIPHER_MODE_XTS;
}

static void aes_x86_encrypt_sectors(QCryptoCipher *cipher,
                                    const QCryptoCipherSectors *s,
                                    uint8_t *buf, size_t count)
{
    AesX86Cipher *c = (AesX86Cipher *)cipher;

    c->ops->xts_encrypt_sectors(&c->key, &c->tweak_key, &c->tweak_cache, s,
                               buf, count);
}

static void aes_x86_decrypt_sectors(QCryptoCipher *cipher,
                                    const QCryptoCipherSectors *s,
                                    uint8_t *buf, size_t count)
{
    AesX86Cipher *c = (AesX86Cipher *)cipher;

    c->ops->xts_decrypt_sectors(&c->key, &c->tweak_key, &c->tweak_cache, s,
                               buf, count);
}

static void aes_x86_free(QCryptoCipher *cipher)
{
    explicit_bzero(cipher, sizeof(AesX86Cipher));
    g_free(cipher);
}

static const QCryptoCipherDriver aes_x86_driver = {
    .cipher_encrypt = aes_x86_encrypt,
    .cipher_decrypt = aes_x86_decrypt,
    .cipher_setiv = aes_x86_setiv,
    .cipher_has_sectors = aes_x86_has_sectors,
    .cipher_encrypt_sectors = aes_x86_encrypt_sectors,
    .cipher_decrypt_sectors = aes_x86_decrypt_sectors,
    .cipher_free = aes_x86_free,
};

/* ---- the backends ---- */

static bool aes_x86_supports(QCryptoCipherAlgo alg, QCryptoCipherMode mode)
{
    switch (alg) {
    case QCRYPTO_CIPHER_ALGO_AES_128:
    case QCRYPTO_CIPHER_ALGO_AES_192:
    case QCRYPTO_CIPHER_ALGO_AES_256:
        break;
    default:
        return false;
    }
    /* LRW is left to nettle: rare, and only in old LUKS1 images. */
    return mode == QCRYPTO_CIPHER_MODE_ECB ||
        mode == QCRYPTO_CIPHER_MODE_CBC ||
        mode == QCRYPTO_CIPHER_MODE_CTR ||
        mode == QCRYPTO_CIPHER_MODE_XTS;
}

static QCryptoCipher *aes_x86_cipher_new(const AesX86Ops *ops,
                                         QCryptoCipherAlgo alg,
                                         QCryptoCipherMode mode,
                                         const uint8_t *key, size_t nkey)
{
    /* g_new0 is malloc: 16-byte aligned, as the __m128i keys need. */
    AesX86Cipher *c = g_new0(AesX86Cipher, 1);
    static const uint8_t zero_iv[16];

    c->base.alg = alg;
    c->base.mode = mode;
    c->base.driver = &aes_x86_driver;
    c->base.impl = ops->name;
    c->ops = ops;
    if (mode == QCRYPTO_CIPHER_MODE_XTS) {
        /* IEEE 1619-2007 section 5.1: Key = Key1 | Key2. */
        aes_x86_expand_key(&c->key, key, nkey / 2);
        aes_x86_expand_key(&c->tweak_key, key + nkey / 2, nkey / 2);
    } else {
        aes_x86_expand_key(&c->key, key, nkey);
    }
    aes_x86_set_iv(c, zero_iv);
    return &c->base;
}

static QCryptoCipher *aes_x86_new_vaes512(QCryptoCipherAlgo alg,
                                          QCryptoCipherMode mode,
                                          const uint8_t *key, size_t nkey,
                                          Error **errp)
{
    return aes_x86_cipher_new(aes_x86_features()->xts_zen ?
                              &aes_x86_ops_vaes512_zen : &aes_x86_ops_vaes512,
                              alg, mode, key, nkey);
}

static QCryptoCipher *aes_x86_new_vaes256(QCryptoCipherAlgo alg,
                                          QCryptoCipherMode mode,
                                          const uint8_t *key, size_t nkey,
                                          Error **errp)
{
    return aes_x86_cipher_new(&aes_x86_ops_vaes256, alg, mode, key, nkey);
}

static QCryptoCipher *aes_x86_new_aesni(QCryptoCipherAlgo alg,
                                        QCryptoCipherMode mode,
                                        const uint8_t *key, size_t nkey,
                                        Error **errp)
{
    return aes_x86_cipher_new(&aes_x86_ops_aesni, alg, mode, key, nkey);
}

const QCryptoCipherBackend qcrypto_cipher_backend_vaes512 = {
    .name = "vaes-512",
    .usable = aes_x86_usable_vaes512,
    .supports = aes_x86_supports,
    .cipher_new = aes_x86_new_vaes512,
};

const QCryptoCipherBackend qcrypto_cipher_backend_vaes256 = {
    .name = "vaes-256",
    .usable = aes_x86_usable_vaes256,
    .supports = aes_x86_supports,
    .cipher_new = aes_x86_new_vaes256,
};

const QCryptoCipherBackend qcrypto_cipher_backend_aesni = {
    .name = "aesni",
    .usable = aes_x86_usable_aesni,
    .supports = aes_x86_supports,
    .cipher_new = aes_x86_new_aesni,
};
