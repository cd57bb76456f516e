/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The cipher driver table: what a backend provides (private to crypto/).
 *
 * A backend (nettle, each built-in AES path) is a QCryptoCipherBackend: it
 * says whether this CPU can run it and which algorithm x mode pairs it
 * handles, and creates ciphers. Each cipher it creates embeds a
 * QCryptoCipher as its first member and points at a QCryptoCipherDriver,
 * the per-cipher operations. crypto/cipher.c validates arguments (key and
 * IV lengths, data lengths) before calling a driver, so drivers need not.
 */
#ifndef QCRYPTO_CIPHERPRIV_H
#define QCRYPTO_CIPHERPRIV_H

#include "crypto/cipher.h"

typedef struct QCryptoCipherDriver QCryptoCipherDriver;

struct QCryptoCipher {
    QCryptoCipherAlgo alg;
    QCryptoCipherMode mode;
    const QCryptoCipherDriver *driver;
    const char *impl;           /* static string, see get_impl_name() */
    /*
     * Set by crypto/cipher.c, not the backend: the argument checks of
     * every call read these rather than look the algorithm up again
     * (they run once per sector on the per-sector path).
     */
    size_t block_len;
    size_t iv_len;              /* 0 for ECB */
};

struct QCryptoCipherDriver {
    int (*cipher_encrypt)(QCryptoCipher *cipher, const void *in, void *out,
                          size_t len, Error **errp);
    int (*cipher_decrypt)(QCryptoCipher *cipher, const void *in, void *out,
                          size_t len, Error **errp);
    int (*cipher_setiv)(QCryptoCipher *cipher, const uint8_t *iv,
                        size_t niv, Error **errp);
    /*
     * Optional: runs of sectors with counted IVs (see
     * QCryptoCipherSectors in crypto/cipher.h), in place. A driver that
     * has them says for which ciphers and IV formats in
     * cipher_has_sectors; crypto/cipher.c has checked the lengths.
     */
    bool (*cipher_has_sectors)(const QCryptoCipher *cipher,
                               QCryptoCipherIVFormat iv_format);
    void (*cipher_encrypt_sectors)(QCryptoCipher *cipher,
                                   const QCryptoCipherSectors *s,
                                   uint8_t *buf, size_t count);
    void (*cipher_decrypt_sectors)(QCryptoCipher *cipher,
                                   const QCryptoCipherSectors *s,
                                   uint8_t *buf, size_t count);
    /* Wipe key material and free the cipher. */
    void (*cipher_free)(QCryptoCipher *cipher);
};

typedef struct QCryptoCipherBackend {
    const char *name;
    /* Can this CPU and OS run it? (Asked once, at start-up.) */
    bool (*usable)(void);
    bool (*supports)(QCryptoCipherAlgo alg, QCryptoCipherMode mode);
    /* alg/mode are supported and nkey is right when this is called. */
    QCryptoCipher *(*cipher_new)(QCryptoCipherAlgo alg,
                                 QCryptoCipherMode mode,
                                 const uint8_t *key, size_t nkey,
                                 Error **errp);
} QCryptoCipherBackend;

extern const QCryptoCipherBackend qcrypto_cipher_backend_nettle;

#ifdef CONFIG_AES_X86
/* Built-in AES (crypto/aes-x86/): one backend per path, best first. */
extern const QCryptoCipherBackend qcrypto_cipher_backend_vaes512;
extern const QCryptoCipherBackend qcrypto_cipher_backend_vaes256;
extern const QCryptoCipherBackend qcrypto_cipher_backend_aesni;
#endif

#endif
