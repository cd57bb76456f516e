/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * LUKS2 cipher specs: the "encryption" strings of segments and key-slot
 * areas (LUKS2 spec, "keyslots" and "segments" objects) use dm-crypt's
 * "cipher-mode-iv[:hash]" spelling, e.g. "aes-xts-plain64", "serpent-cbc-
 * essiv:sha256", and the key size picks the variant (a 64-byte aes-xts key is
 * AES-256 twice).
 */
#include <string.h>

#include "dmcryptpriv.h"
#include "luks2priv.h"

/*
 * The chain's problems in LUKS2's words (the chain is the spec after the
 * cipher name: mode-iv[:hash]).
 */
static void qcrypto_luks2_cipher_chain_error(QCryptoDMCryptChainStatus status,
                                             const char *spec,
                                             const QCryptoDMCryptChain *chain,
                                             Error **errp)
{
    switch (status) {
    case QCRYPTO_DMCRYPT_CHAIN_OK:
        g_assert_not_reached();
    case QCRYPTO_DMCRYPT_CHAIN_BAD_MODE:
        error_setg(errp, "cipher '%s': unsupported mode '%s'", spec,
                   chain->mode_str);
        return;
    case QCRYPTO_DMCRYPT_CHAIN_NO_IVGEN:
        error_setg(errp, "cipher '%s' names no IV generator", spec);
        return;
    case QCRYPTO_DMCRYPT_CHAIN_BAD_IVGEN:
        error_setg(errp, "cipher '%s': unsupported IV generator", spec);
        return;
    case QCRYPTO_DMCRYPT_CHAIN_NO_HASH:
    case QCRYPTO_DMCRYPT_CHAIN_IVGEN_OPTION:
        error_setg(errp, "cipher '%s': essiv, and only essiv, takes a hash",
                   spec);
        return;
    case QCRYPTO_DMCRYPT_CHAIN_BAD_HASH:
        error_setg(errp, "cipher '%s': unsupported ESSIV hash", spec);
        return;
    }
}

int qcrypto_luks2_cipher_parse(const char *spec, size_t key_bytes,
                               QCryptoLUKS2Cipher *out, Error **errp)
{
    const char *dash = strchr(spec, '-');
    g_autofree char *name = NULL;
    g_auto(QCryptoDMCryptChain) chain = { 0 };
    QCryptoDMCryptChainStatus status;

    if (!dash) {
        error_setg(errp, "cipher '%s' is not of the form cipher-mode-iv",
                   spec);
        return -1;
    }
    name = g_strndup(spec, dash - spec);
    status = qcrypto_dmcrypt_chain_parse(dash + 1, &chain);
    if (status == QCRYPTO_DMCRYPT_CHAIN_BAD_MODE) {
        qcrypto_luks2_cipher_chain_error(status, spec, &chain, errp);
        return -1;
    }
    out->mode = chain.mode;

    /* The key is checked before the IV part, which may then be bad too. */
    if (!qcrypto_dmcrypt_cipher_find(name, chain.mode, key_bytes,
                                     &out->alg)) {
        error_setg(errp, "cipher '%s' with a %zu-byte key is not supported",
                   spec, key_bytes);
        return -1;
    }
    if (qcrypto_cipher_get_mode_key_len(out->alg, chain.mode) != key_bytes) {
        error_setg(errp, "cipher '%s': a %zu-byte key does not fit", spec,
                   key_bytes);
        return -1;
    }
    if (status != QCRYPTO_DMCRYPT_CHAIN_OK) {
        qcrypto_luks2_cipher_chain_error(status, spec, &chain, errp);
        return -1;
    }
    out->ivgen = chain.ivgen;
    out->ivgen_hash = chain.ivgen_hash;
    return 0;
}

char *qcrypto_luks2_cipher_format(const QCryptoLUKS2Cipher *c)
{
    const char *name = qcrypto_dmcrypt_cipher_name(c->alg);
    g_autofree char *chain = NULL;

    g_assert(name);
    chain = qcrypto_dmcrypt_chain_format(c->mode, c->ivgen, c->ivgen_hash);
    return g_strdup_printf("%s-%s", name, chain);
}

size_t qcrypto_luks2_cipher_key_len(const QCryptoLUKS2Cipher *c)
{
    return qcrypto_cipher_get_mode_key_len(c->alg, c->mode);
}
