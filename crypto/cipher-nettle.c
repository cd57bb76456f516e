/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The nettle cipher backend: every algorithm and mode of the interface, on
 * nettle's block ciphers.
 *
 * The block ciphers come from nettle's meta tables (struct nettle_cipher),
 * so one code path serves all of them: a cipher holds an encryption
 * context, a decryption context (they differ for AES only, whose
 * decryption uses the inverse key schedule) and, for XTS, the tweak key's
 * encryption context. ECB is one call of the block function over the whole
 * buffer; CBC and CTR are nettle's own cbc_encrypt/cbc_decrypt/ctr_crypt,
 * which leave the IV / counter at the value that continues the message;
 * XTS and LRW are crypto/xts.c and crypto/lrw.c, which work in bulk over
 * the same multi-block function.
 */
#include <string.h>

#include <nettle/cbc.h>
#include <nettle/ctr.h>
#include <nettle/des.h>
#include <nettle/nettle-meta.h>

#include "cipherpriv.h"
#include "lrwpriv.h"
#include "crypto/xts.h"

/*
 * nettle has no meta table for 3DES (its des3_set_key reports bad parity
 * instead of ignoring it), so we build one. DES ignores the parity bits,
 * and dm-crypt and QEMU accept keys whatever their parity: fix the parity
 * on a copy so that nettle computes the schedule of the same key.
 */
static void des3_set_key_any_parity(void *ctx, const uint8_t *key)
{
    uint8_t fixed[DES3_KEY_SIZE];

    des_fix_parity(sizeof(fixed), fixed, key);
    des3_set_key(ctx, fixed);   /* 0 only for parity or weak keys: ignored */
    explicit_bzero(fixed, sizeof(fixed));
}

static void des3_encrypt_func(const void *ctx, size_t length,
                              uint8_t *dst, const uint8_t *src)
{
    des3_encrypt(ctx, length, dst, src);
}

static void des3_decrypt_func(const void *ctx, size_t length,
                              uint8_t *dst, const uint8_t *src)
{
    des3_decrypt(ctx, length, dst, src);
}

static const struct nettle_cipher nettle_des3_any_parity = {
    .name = "des3",
    .context_size = sizeof(struct des3_ctx),
    .block_size = DES3_BLOCK_SIZE,
    .key_size = DES3_KEY_SIZE,
    .set_encrypt_key = des3_set_key_any_parity,
    .set_decrypt_key = des3_set_key_any_parity,
    .encrypt = des3_encrypt_func,
    .decrypt = des3_decrypt_func,
};

static const struct nettle_cipher *const nettle_algos[QCRYPTO_CIPHER_ALGO__MAX] = {
    [QCRYPTO_CIPHER_ALGO_AES_128] = &nettle_aes128,
    [QCRYPTO_CIPHER_ALGO_AES_192] = &nettle_aes192,
    [QCRYPTO_CIPHER_ALGO_AES_256] = &nettle_aes256,
    [QCRYPTO_CIPHER_ALGO_DES_EDE3] = &nettle_des3_any_parity,
    [QCRYPTO_CIPHER_ALGO_CAST5_128] = &nettle_cast128,
    [QCRYPTO_CIPHER_ALGO_SERPENT_128] = &nettle_serpent128,
    [QCRYPTO_CIPHER_ALGO_SERPENT_192] = &nettle_serpent192,
    [QCRYPTO_CIPHER_ALGO_SERPENT_256] = &nettle_serpent256,
    [QCRYPTO_CIPHER_ALGO_TWOFISH_128] = &nettle_twofish128,
    [QCRYPTO_CIPHER_ALGO_TWOFISH_192] = &nettle_twofish192,
    [QCRYPTO_CIPHER_ALGO_TWOFISH_256] = &nettle_twofish256,
};

typedef struct QCryptoCipherNettle {
    QCryptoCipher base;
    const struct nettle_cipher *algo;
    void *enc_ctx;
    void *dec_ctx;
    void *tweak_ctx;            /* XTS: encryption under the tweak key */
    LRWKey *lrw_key;            /* LRW: multiples of the tweak key */
    union {
        uint8_t iv[16];         /* CBC: last ciphertext; CTR: counter */
        xts_uint128 xts;        /* XTS: tweak of the next block */
        LRWTweak lrw;           /* LRW: index and tweak of the next block */
    } state;
} QCryptoCipherNettle;

static QCryptoCipherNettle *to_nettle(QCryptoCipher *cipher)
{
    return (QCryptoCipherNettle *)cipher;
}

static int cipher_nettle_crypt(QCryptoCipher *cipher, const void *in,
                               void *out, size_t len, bool encrypt)
{
    QCryptoCipherNettle *c = to_nettle(cipher);
    const struct nettle_cipher *a = c->algo;
    nettle_cipher_func *fn = encrypt ? a->encrypt : a->decrypt;
    void *ctx = encrypt ? c->enc_ctx : c->dec_ctx;

    switch (cipher->mode) {
    case QCRYPTO_CIPHER_MODE_ECB:
        fn(ctx, len, out, in);
        break;
    case QCRYPTO_CIPHER_MODE_CBC:
        if (encrypt) {
            cbc_encrypt(ctx, fn, a->block_size, c->state.iv, len, out, in);
        } else {
            cbc_decrypt(ctx, fn, a->block_size, c->state.iv, len, out, in);
        }
        break;
    case QCRYPTO_CIPHER_MODE_CTR:
        /* CTR runs the block cipher forwards both ways. */
        ctr_crypt(c->enc_ctx, a->encrypt, a->block_size, c->state.iv,
                  len, out, in);
        break;
    case QCRYPTO_CIPHER_MODE_XTS:
        if (encrypt) {
            xts_encrypt(ctx, fn, &c->state.xts, len, out, in);
        } else {
            xts_decrypt(ctx, fn, &c->state.xts, len, out, in);
        }
        break;
    case QCRYPTO_CIPHER_MODE_LRW:
        lrw_crypt(ctx, fn, c->lrw_key, &c->state.lrw, len, out, in);
        break;
    default:
        g_assert_not_reached();
    }
    return 0;
}

static int cipher_nettle_encrypt(QCryptoCipher *cipher, const void *in,
                                 void *out, size_t len, Error **errp)
{
    return cipher_nettle_crypt(cipher, in, out, len, true);
}

static int cipher_nettle_decrypt(QCryptoCipher *cipher, const void *in,
                                 void *out, size_t len, Error **errp)
{
    return cipher_nettle_crypt(cipher, in, out, len, false);
}

static void cipher_nettle_setiv_internal(QCryptoCipherNettle *c,
                                         const uint8_t *iv, size_t niv)
{
    switch (c->base.mode) {
    case QCRYPTO_CIPHER_MODE_XTS:
        xts_tweak_init(c->tweak_ctx, c->algo->encrypt, iv, &c->state.xts);
        break;
    case QCRYPTO_CIPHER_MODE_LRW:
        lrw_tweak_init(c->lrw_key, iv, &c->state.lrw);
        break;
    default:
        memcpy(c->state.iv, iv, niv);
        break;
    }
}

static int cipher_nettle_setiv(QCryptoCipher *cipher, const uint8_t *iv,
                               size_t niv, Error **errp)
{
    cipher_nettle_setiv_internal(to_nettle(cipher), iv, niv);
    return 0;
}

static void cipher_nettle_free_ctx(void *ctx, size_t size)
{
    if (ctx) {
        explicit_bzero(ctx, size);
        g_free(ctx);
    }
}

static void cipher_nettle_free(QCryptoCipher *cipher)
{
    QCryptoCipherNettle *c = to_nettle(cipher);
    size_t size = c->algo->context_size;

    if (c->dec_ctx != c->enc_ctx) {
        cipher_nettle_free_ctx(c->dec_ctx, size);
    }
    cipher_nettle_free_ctx(c->enc_ctx, size);
    cipher_nettle_free_ctx(c->tweak_ctx, size);
    cipher_nettle_free_ctx(c->lrw_key, sizeof(*c->lrw_key));
    explicit_bzero(c, sizeof(*c));
    g_free(c);
}

static const QCryptoCipherDriver cipher_nettle_driver = {
    .cipher_encrypt = cipher_nettle_encrypt,
    .cipher_decrypt = cipher_nettle_decrypt,
    .cipher_setiv = cipher_nettle_setiv,
    .cipher_free = cipher_nettle_free,
};

/*
 * Contexts are allocated at the algorithm's size (a Twofish context is
 * over 4 KiB, a CAST5 one a few hundred bytes) rather than embedded.
 */
static QCryptoCipher *cipher_nettle_new(QCryptoCipherAlgo alg,
                                        QCryptoCipherMode mode,
                                        const uint8_t *key, size_t nkey,
                                        Error **errp)
{
    const struct nettle_cipher *a = nettle_algos[alg];
    QCryptoCipherNettle *c = g_new0(QCryptoCipherNettle, 1);
    uint8_t zero_iv[16] = { 0 };

    g_assert(a->key_size == qcrypto_cipher_get_key_len(alg));
    c->base.alg = alg;
    c->base.mode = mode;
    c->base.driver = &cipher_nettle_driver;
    c->base.impl = "nettle";
    c->algo = a;

    c->enc_ctx = g_malloc0(a->context_size);
    a->set_encrypt_key(c->enc_ctx, key);
    /* CTR only ever encrypts; the others need the decryption schedule. */
    if (mode == QCRYPTO_CIPHER_MODE_CTR ||
        a->set_decrypt_key == a->set_encrypt_key) {
        c->dec_ctx = c->enc_ctx;
    } else {
        c->dec_ctx = g_malloc0(a->context_size);
        a->set_decrypt_key(c->dec_ctx, key);
    }

    /* The second half of an XTS key (IEEE 1619 5.1: Key2) is the tweak key. */
    if (mode == QCRYPTO_CIPHER_MODE_XTS) {
        c->tweak_ctx = g_malloc0(a->context_size);
        a->set_encrypt_key(c->tweak_ctx, key + a->key_size);
    }
    /* LRW: the cipher key is followed by one block of tweak key (K2). */
    if (mode == QCRYPTO_CIPHER_MODE_LRW) {
        c->lrw_key = g_new0(LRWKey, 1);
        lrw_key_init(c->lrw_key, key + a->key_size);
    }

    if (mode != QCRYPTO_CIPHER_MODE_ECB) {
        cipher_nettle_setiv_internal(c, zero_iv, a->block_size);
    }
    return &c->base;
}

static bool cipher_nettle_usable(void)
{
    return true;
}

static bool cipher_nettle_supports(QCryptoCipherAlgo alg,
                                   QCryptoCipherMode mode)
{
    if (alg >= QCRYPTO_CIPHER_ALGO__MAX) {
        return false;
    }
    switch (mode) {
    case QCRYPTO_CIPHER_MODE_ECB:
    case QCRYPTO_CIPHER_MODE_CBC:
    case QCRYPTO_CIPHER_MODE_CTR:
        return true;
    case QCRYPTO_CIPHER_MODE_XTS:
    case QCRYPTO_CIPHER_MODE_LRW:
        /* Both are defined over 128-bit blocks only. */
        return nettle_algos[alg]->block_size == 16;
    default:
        return false;
    }
}

const QCryptoCipherBackend qcrypto_cipher_backend_nettle = {
    .name = "nettle",
    .usable = cipher_nettle_usable,
    .supports = cipher_nettle_supports,
    .cipher_new = cipher_nettle_new,
};
