/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * dm-crypt cipher specs (see dmcryptpriv.h): the name table, the split of
 * a mode key, and the "mode-ivgen[:hash]" chain, both ways.
 */
#include <string.h>

#include "dmcryptpriv.h"

/* dm-crypt's cipher names and our algorithms, by the cipher's key length. */
static const struct {
    const char *name;
    size_t key_len;
    QCryptoCipherAlgo alg;
} dmcrypt_cipher_names[] = {
    { "aes", 16, QCRYPTO_CIPHER_ALGO_AES_128 },
    { "aes", 24, QCRYPTO_CIPHER_ALGO_AES_192 },
    { "aes", 32, QCRYPTO_CIPHER_ALGO_AES_256 },
    { "serpent", 16, QCRYPTO_CIPHER_ALGO_SERPENT_128 },
    { "serpent", 24, QCRYPTO_CIPHER_ALGO_SERPENT_192 },
    { "serpent", 32, QCRYPTO_CIPHER_ALGO_SERPENT_256 },
    { "twofish", 16, QCRYPTO_CIPHER_ALGO_TWOFISH_128 },
    { "twofish", 24, QCRYPTO_CIPHER_ALGO_TWOFISH_192 },
    { "twofish", 32, QCRYPTO_CIPHER_ALGO_TWOFISH_256 },
    { "cast5", 16, QCRYPTO_CIPHER_ALGO_CAST5_128 },
    { "des3_ede", 24, QCRYPTO_CIPHER_ALGO_DES_EDE3 },
};

const char *qcrypto_dmcrypt_cipher_name(QCryptoCipherAlgo alg)
{
    for (size_t i = 0; i < G_N_ELEMENTS(dmcrypt_cipher_names); i++) {
        if (dmcrypt_cipher_names[i].alg == alg) {
            return dmcrypt_cipher_names[i].name;
        }
    }
    return NULL;
}

bool qcrypto_dmcrypt_cipher_name_known(const char *name)
{
    for (size_t i = 0; i < G_N_ELEMENTS(dmcrypt_cipher_names); i++) {
        if (g_str_equal(dmcrypt_cipher_names[i].name, name)) {
            return true;
        }
    }
    return false;
}

/*
 * The cipher's own key length within key_bytes: XTS holds two keys, LRW a
 * key and one 16-byte tweak block (dm-crypt's lrw key layout; all LRW
 * ciphers have 128-bit blocks).
 */
static bool dmcrypt_cipher_key_len(QCryptoCipherMode mode, size_t key_bytes,
                                   size_t *key_len)
{
    switch (mode) {
    case QCRYPTO_CIPHER_MODE_XTS:
        if (key_bytes % 2) {
            return false;
        }
        *key_len = key_bytes / 2;
        return true;
    case QCRYPTO_CIPHER_MODE_LRW:
        if (key_bytes <= 16) {
            return false;
        }
        *key_len = key_bytes - 16;
        return true;
    default:
        *key_len = key_bytes;
        return true;
    }
}

bool qcrypto_dmcrypt_cipher_find(const char *name, QCryptoCipherMode mode,
                                 size_t key_bytes, QCryptoCipherAlgo *alg)
{
    size_t key_len;

    if (!dmcrypt_cipher_key_len(mode, key_bytes, &key_len)) {
        return false;
    }
    for (size_t i = 0; i < G_N_ELEMENTS(dmcrypt_cipher_names); i++) {
        if (g_str_equal(dmcrypt_cipher_names[i].name, name) &&
            dmcrypt_cipher_names[i].key_len == key_len) {
            *alg = dmcrypt_cipher_names[i].alg;
            return true;
        }
    }
    return false;
}

QCryptoDMCryptChainStatus qcrypto_dmcrypt_chain_parse(
    const char *str, QCryptoDMCryptChain *chain)
{
    char *ivgen, *hash;
    int mode, ivalg, hashalg;

    /* Cut a copy at the first '-' and the first ':' after it. */
    chain->buf = g_strdup(str);
    chain->mode_str = chain->buf;
    ivgen = strchr(chain->buf, '-');
    hash = NULL;
    if (ivgen) {
        *ivgen++ = '\0';
        hash = strchr(ivgen, ':');
        if (hash) {
            *hash++ = '\0';
        }
    }
    chain->ivgen_str = ivgen;
    chain->hash_str = hash;
    chain->ivgen = QCRYPTO_IVGEN_ALGO_NULL;
    chain->has_ivgen_hash = false;
    chain->ivgen_hash = QCRYPTO_HASH_ALGO_SHA256;

    mode = qcrypto_cipher_mode_parse(chain->mode_str);
    if (mode < 0) {
        return QCRYPTO_DMCRYPT_CHAIN_BAD_MODE;
    }
    chain->mode = mode;
    /*
     * ECB takes no IV, and every other mode names its generator. A
     * generator named with ECB is parsed but never used: QEMU writes its
     * ECB images as "ecb-plain64", and dm-crypt ignores the IV mode of a
     * cipher without IVs (with a warning), so such images are valid.
     */
    if (mode == QCRYPTO_CIPHER_MODE_ECB && !ivgen) {
        return QCRYPTO_DMCRYPT_CHAIN_OK;
    }
    if (!ivgen) {
        return QCRYPTO_DMCRYPT_CHAIN_NO_IVGEN;
    }
    ivalg = qcrypto_ivgen_algo_parse(ivgen);
    if (ivalg < 0) {
        return QCRYPTO_DMCRYPT_CHAIN_BAD_IVGEN;
    }
    chain->ivgen = ivalg;
    /* essiv, and only essiv, takes a hash (its ":sha256"). */
    if (ivalg != QCRYPTO_IVGEN_ALGO_ESSIV) {
        return hash ? QCRYPTO_DMCRYPT_CHAIN_IVGEN_OPTION :
            QCRYPTO_DMCRYPT_CHAIN_OK;
    }
    if (!hash) {
        return QCRYPTO_DMCRYPT_CHAIN_NO_HASH;
    }
    hashalg = qcrypto_hash_algo_parse(hash);
    if (hashalg < 0 || !qcrypto_hash_supports(hashalg)) {
        return QCRYPTO_DMCRYPT_CHAIN_BAD_HASH;
    }
    chain->has_ivgen_hash = true;
    chain->ivgen_hash = hashalg;
    return QCRYPTO_DMCRYPT_CHAIN_OK;
}

void qcrypto_dmcrypt_chain_clear(QCryptoDMCryptChain *chain)
{
    g_clear_pointer(&chain->buf, g_free);
    chain->mode_str = chain->ivgen_str = chain->hash_str = NULL;
}

char *qcrypto_dmcrypt_chain_format(QCryptoCipherMode mode,
                                   QCryptoIVGenAlgo ivgen,
                                   QCryptoHashAlgo ivgen_hash)
{
    const char *name = qcrypto_cipher_mode_name(mode);

    if (mode == QCRYPTO_CIPHER_MODE_ECB) {
        return g_strdup(name);
    }
    if (ivgen == QCRYPTO_IVGEN_ALGO_ESSIV) {
        return g_strdup_printf("%s-essiv:%s", name,
                               qcrypto_hash_algo_name(ivgen_hash));
    }
    return g_strdup_printf("%s-%s", name, qcrypto_ivgen_algo_name(ivgen));
}
