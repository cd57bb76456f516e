/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * dm-crypt's cipher spelling, private to crypto/: shared by LUKS1, whose
 * header keeps the cipher name ("aes") and the chain ("xts-plain64") in
 * separate fields (LUKS1 spec, "cipher-name" and "cipher-mode"), and
 * LUKS2, which joins them in one "encryption" string ("aes-xts-plain64").
 *
 * The chain is "mode[-ivgen[:hash]]": "ecb" alone, "cbc-essiv:sha256",
 * "xts-plain64", "lrw-benbi". The cipher name says nothing of the key
 * size: that comes from the header's key length, split by the mode.
 *
 * What a format makes of a parsed spec (algorithm, mode, IV generator,
 * ESSIV hash) is a QCryptoSectorCipherSpec, from which crypto/sector.c
 * builds its sector ciphers.
 */
#ifndef QCRYPTO_DMCRYPTPRIV_H
#define QCRYPTO_DMCRYPTPRIV_H

#include "crypto/ivgen.h"

/* dm-crypt's name for alg ("aes"), or NULL if dm-crypt has none. */
const char *qcrypto_dmcrypt_cipher_name(QCryptoCipherAlgo alg);

/* Whether dm-crypt knows the cipher name, at any key length. */
bool qcrypto_dmcrypt_cipher_name_known(const char *name);

/*
 * The algorithm called name whose key, split out of a mode key of
 * key_bytes, fits (XTS holds two cipher keys, LRW a cipher key and a
 * tweak block). false: no such algorithm.
 */
bool qcrypto_dmcrypt_cipher_find(const char *name, QCryptoCipherMode mode,
                                 size_t key_bytes, QCryptoCipherAlgo *alg);

/*
 * What is wrong with a chain, the first problem found, in the order the
 * string reads. The callers word the messages: LUKS1 and LUKS2 each keep
 * their own.
 */
typedef enum QCryptoDMCryptChainStatus {
    QCRYPTO_DMCRYPT_CHAIN_OK,
    QCRYPTO_DMCRYPT_CHAIN_BAD_MODE,         /* "gcm-plain64" */
    QCRYPTO_DMCRYPT_CHAIN_NO_IVGEN,         /* "xts" */
    QCRYPTO_DMCRYPT_CHAIN_BAD_IVGEN,        /* "xts-foo" */
    QCRYPTO_DMCRYPT_CHAIN_NO_HASH,          /* "cbc-essiv" */
    QCRYPTO_DMCRYPT_CHAIN_BAD_HASH,         /* "cbc-essiv:md4x" */
    QCRYPTO_DMCRYPT_CHAIN_IVGEN_OPTION,     /* "xts-plain64:sha1" */
} QCryptoDMCryptChainStatus;

typedef struct QCryptoDMCryptChain {
    QCryptoCipherMode mode;             /* valid unless BAD_MODE */
    QCryptoIVGenAlgo ivgen;             /* NULL for ECB */
    bool has_ivgen_hash;                /* essiv only */
    QCryptoHashAlgo ivgen_hash;         /* sha256 unless has_ivgen_hash */
    /* The pieces as written (NULL: absent), for messages; in buf. */
    const char *mode_str, *ivgen_str, *hash_str;
    char *buf;
} QCryptoDMCryptChain;

/* Parse str into chain; clear it with qcrypto_dmcrypt_chain_clear(). */
QCryptoDMCryptChainStatus qcrypto_dmcrypt_chain_parse(
    const char *str, QCryptoDMCryptChain *chain);
void qcrypto_dmcrypt_chain_clear(QCryptoDMCryptChain *chain);
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(QCryptoDMCryptChain,
                                 qcrypto_dmcrypt_chain_clear)

/* The chain string of mode, ivgen and (ESSIV only) hash: a new string. */
char *qcrypto_dmcrypt_chain_format(QCryptoCipherMode mode,
                                   QCryptoIVGenAlgo ivgen,
                                   QCryptoHashAlgo ivgen_hash);

#endif
