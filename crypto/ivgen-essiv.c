/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * ESSIV, "encrypted salt-sector IV" (Clemens Fruhwirth, used by dm-crypt
 * and LUKS1 as "cbc-essiv:sha256"): IV = E_salt(plain64 sector), with
 * salt = hash(master key). The IV cannot be predicted without the key,
 * which defeats the watermarking attack on plain IVs with CBC.
 *
 * dm-crypt keys the ESSIV cipher with the whole digest, so its key length
 * is the hash length and its algorithm is the data cipher's family at
 * that key length: aes-128 with sha256 runs ESSIV on aes-256. A family
 * that has no such key length (cast5 with sha256, aes with sha1) is an
 * error, as it is for the kernel.
 */
#include <string.h>

#include "ivgenpriv.h"

/* Each family's members by key length; the data cipher picks the row. */
static const QCryptoCipherAlgo essiv_families[][3] = {
    { QCRYPTO_CIPHER_ALGO_AES_128, QCRYPTO_CIPHER_ALGO_AES_192,
      QCRYPTO_CIPHER_ALGO_AES_256 },
    { QCRYPTO_CIPHER_ALGO_SERPENT_128, QCRYPTO_CIPHER_ALGO_SERPENT_192,
      QCRYPTO_CIPHER_ALGO_SERPENT_256 },
    { QCRYPTO_CIPHER_ALGO_TWOFISH_128, QCRYPTO_CIPHER_ALGO_TWOFISH_192,
      QCRYPTO_CIPHER_ALGO_TWOFISH_256 },
    /* Single-member families; the repeats keep the rows one shape. */
    { QCRYPTO_CIPHER_ALGO_CAST5_128, QCRYPTO_CIPHER_ALGO_CAST5_128,
      QCRYPTO_CIPHER_ALGO_CAST5_128 },
    { QCRYPTO_CIPHER_ALGO_DES_EDE3, QCRYPTO_CIPHER_ALGO_DES_EDE3,
      QCRYPTO_CIPHER_ALGO_DES_EDE3 },
};

/* The member of cipheralg's family whose key is nkey bytes, or -1. */
static int essiv_cipher_for_key_len(QCryptoCipherAlgo cipheralg, size_t nkey)
{
    for (size_t f = 0; f < G_N_ELEMENTS(essiv_families); f++) {
        bool in_family = false;

        for (size_t m = 0; m < G_N_ELEMENTS(essiv_families[f]); m++) {
            in_family |= essiv_families[f][m] == cipheralg;
        }
        if (!in_family) {
            continue;
        }
        for (size_t m = 0; m < G_N_ELEMENTS(essiv_families[f]); m++) {
            if (qcrypto_cipher_get_key_len(essiv_families[f][m]) == nkey) {
                return essiv_families[f][m];
            }
        }
        return -1;
    }
    return -1;
}

static int ivgen_essiv_init(QCryptoIVGen *ivgen, const uint8_t *key,
                            size_t nkey, Error **errp)
{
    uint8_t salt[QCRYPTO_HASH_MAX_DIGEST_LEN];
    size_t nsalt;
    int essiv_alg;
    QCryptoCipher *cipher;

    if ((unsigned)ivgen->hash >= QCRYPTO_HASH_ALGO__MAX ||
        !qcrypto_hash_supports(ivgen->hash)) {
        error_setg(errp, "ESSIV: hash algorithm %d is not supported",
                   (int)ivgen->hash);
        return -1;
    }
    if (!key || nkey == 0) {
        error_setg(errp, "ESSIV needs the master key");
        return -1;
    }
    nsalt = qcrypto_hash_digest_len(ivgen->hash);
    essiv_alg = essiv_cipher_for_key_len(ivgen->cipher, nsalt);
    if (essiv_alg < 0) {
        error_setg(errp, "ESSIV with %s needs a %zu-byte %s key, which "
                   "that cipher family does not have",
                   qcrypto_hash_algo_name(ivgen->hash), nsalt,
                   qcrypto_cipher_algo_name(ivgen->cipher));
        return -1;
    }
    if (qcrypto_hash_bytes(ivgen->hash, key, nkey, salt, errp) < 0) {
        return -1;
    }
    cipher = qcrypto_cipher_new(essiv_alg, QCRYPTO_CIPHER_MODE_ECB,
                                salt, nsalt, errp);
    explicit_bzero(salt, sizeof(salt));
    if (!cipher) {
        error_prepend(errp, "ESSIV: ");
        return -1;
    }
    ivgen->private = cipher;
    return 0;
}

static int ivgen_essiv_calculate(QCryptoIVGen *ivgen, uint64_t sector,
                                 uint8_t *iv, size_t niv, Error **errp)
{
    uint64_t le = GUINT64_TO_LE(sector);

    /* Same family, so the ESSIV block length is the IV length. */
    memcpy(iv, &le, MIN(niv, sizeof(le)));
    return qcrypto_cipher_encrypt(ivgen->private, iv, iv, niv, errp);
}

static void ivgen_essiv_cleanup(QCryptoIVGen *ivgen)
{
    qcrypto_cipher_free(ivgen->private);
    ivgen->private = NULL;
}

const QCryptoIVGenDriver qcrypto_ivgen_essiv = {
    .init = ivgen_essiv_init,
    .calculate = ivgen_essiv_calculate,
    .cleanup = ivgen_essiv_cleanup,
};
