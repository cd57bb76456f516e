/*
 * LUKS2 cipher specs: the "encryption" strings of segments and key-slot
 * areas (LUKS2 spec, "keyslots" and "segments" objects) use dm-crypt's
 * "cipher-mode-iv[:hash]" spelling, e.g. "aes-xts-plain64", "serpent-cbc-
 * essiv:sha256", and the key size picks the variant (a 64-byte aes-xts key is
 * AES-256 twice).
 */
#include <string.h>

#include "luks2priv.h"

/* dm-crypt's cipher names and our algorithms, by key length. */
static const struct {
    const char *name;
    size_t key_len;
    QCryptoCipherAlgo alg;
} luks2_cipher_names[] = {
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

/* The bytes of key the bare algorithm gets out of a mode key. */
static size_t luks2_alg_key_bytes(QCryptoCipherMode mode, size_t key_bytes)
{
    switch (mode) {
    case QCRYPTO_CIPHER_MODE_XTS:
        return key_bytes % 2 ? 0 : key_bytes / 2;
    case QCRYPTO_CIPHER_MODE_LRW:
        /* LRW keys end with one 16-byte tweak block (all 128-bit ciphers) */
        return key_bytes > 16 ? key_bytes - 16 : 0;
    default:
        return key_bytes;
    }
}

int qcrypto_luks2_cipher_parse(const char *spec, size_t key_bytes,
                               QCryptoLUKS2Cipher *out, Error **errp)
{
    g_auto(GStrv) parts = g_strsplit(spec, "-", 3);
    int mode, ivgen;
    size_t alg_key;
    const char *iv, *colon;
    g_autofree char *ivname = NULL;

    if (g_strv_length(parts) < 2) {
        error_setg(errp, "cipher '%s' is not of the form cipher-mode-iv",
                   spec);
        return -1;
    }
    mode = qcrypto_cipher_mode_parse(parts[1]);
    if (mode < 0) {
        error_setg(errp, "cipher '%s': unsupported mode '%s'", spec,
                   parts[1]);
        return -1;
    }
    out->mode = mode;

    alg_key = luks2_alg_key_bytes(mode, key_bytes);
    out->alg = QCRYPTO_CIPHER_ALGO__MAX;
    for (size_t i = 0; i < G_N_ELEMENTS(luks2_cipher_names); i++) {
        if (g_str_equal(parts[0], luks2_cipher_names[i].name) &&
            luks2_cipher_names[i].key_len == alg_key) {
            out->alg = luks2_cipher_names[i].alg;
        }
    }
    if (out->alg == QCRYPTO_CIPHER_ALGO__MAX) {
        error_setg(errp, "cipher '%s' with a %zu-byte key is not supported",
                   spec, key_bytes);
        return -1;
    }
    if (qcrypto_cipher_get_mode_key_len(out->alg, mode) != key_bytes) {
        error_setg(errp, "cipher '%s': a %zu-byte key does not fit", spec,
                   key_bytes);
        return -1;
    }

    /* ECB takes no IV; every other mode names its generator. */
    iv = parts[2];
    if (mode == QCRYPTO_CIPHER_MODE_ECB) {
        if (iv) {
            error_setg(errp, "cipher '%s': ECB takes no IV", spec);
            return -1;
        }
        out->ivgen = QCRYPTO_IVGEN_ALGO_NULL;
        out->ivgen_hash = QCRYPTO_HASH_ALGO_SHA256;
        return 0;
    }
    if (!iv) {
        error_setg(errp, "cipher '%s' names no IV generator", spec);
        return -1;
    }
    colon = strchr(iv, ':');
    ivname = g_strndup(iv, colon ? (size_t)(colon - iv) : strlen(iv));
    ivgen = qcrypto_ivgen_algo_parse(ivname);
    if (ivgen < 0) {
        error_setg(errp, "cipher '%s': unsupported IV generator", spec);
        return -1;
    }
    out->ivgen = ivgen;
    out->ivgen_hash = QCRYPTO_HASH_ALGO_SHA256;
    if ((ivgen == QCRYPTO_IVGEN_ALGO_ESSIV) != (colon != NULL)) {
        error_setg(errp, "cipher '%s': essiv, and only essiv, takes a hash",
                   spec);
        return -1;
    }
    if (colon) {
        int hash = qcrypto_hash_algo_parse(colon + 1);

        if (hash < 0 || !qcrypto_hash_supports(hash)) {
            error_setg(errp, "cipher '%s': unsupported ESSIV hash", spec);
            return -1;
        }
        out->ivgen_hash = hash;
    }
    return 0;
}

char *qcrypto_luks2_cipher_format(const QCryptoLUKS2Cipher *c)
{
    const char *name = NULL;
    const char *mode = qcrypto_cipher_mode_name(c->mode);

    for (size_t i = 0; i < G_N_ELEMENTS(luks2_cipher_names); i++) {
        if (luks2_cipher_names[i].alg == c->alg) {
            name = luks2_cipher_names[i].name;
        }
    }
    g_assert(name);
    if (c->mode == QCRYPTO_CIPHER_MODE_ECB) {
        return g_strdup_printf("%s-%s", name, mode);
    }
    if (c->ivgen == QCRYPTO_IVGEN_ALGO_ESSIV) {
        return g_strdup_printf("%s-%s-essiv:%s", name, mode,
                               qcrypto_hash_algo_name(c->ivgen_hash));
    }
    return g_strdup_printf("%s-%s-%s", name, mode,
                           qcrypto_ivgen_algo_name(c->ivgen));
}

size_t qcrypto_luks2_cipher_key_len(const QCryptoLUKS2Cipher *c)
{
    return qcrypto_cipher_get_mode_key_len(c->alg, c->mode);
}
