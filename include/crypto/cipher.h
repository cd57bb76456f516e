/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Block ciphers: one interface (QEMU's qcrypto_cipher_* shape), several
 * backends behind a driver table (crypto/cipherpriv.h). Callers never know
 * which backend runs a cipher.
 */
#ifndef QCRYPTO_CIPHER_H
#define QCRYPTO_CIPHER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "qemu/error.h"

typedef struct QCryptoCipher QCryptoCipher;

typedef enum {
    QCRYPTO_CIPHER_ALGO_AES_128,
    QCRYPTO_CIPHER_ALGO_AES_192,
    QCRYPTO_CIPHER_ALGO_AES_256,
    QCRYPTO_CIPHER_ALGO_DES_EDE3,       /* "3des": des3-ede, 24-byte key */
    QCRYPTO_CIPHER_ALGO_CAST5_128,
    QCRYPTO_CIPHER_ALGO_SERPENT_128,
    QCRYPTO_CIPHER_ALGO_SERPENT_192,
    QCRYPTO_CIPHER_ALGO_SERPENT_256,
    QCRYPTO_CIPHER_ALGO_TWOFISH_128,
    QCRYPTO_CIPHER_ALGO_TWOFISH_192,
    QCRYPTO_CIPHER_ALGO_TWOFISH_256,
    QCRYPTO_CIPHER_ALGO__MAX,
} QCryptoCipherAlgo;

typedef enum {
    QCRYPTO_CIPHER_MODE_ECB,
    QCRYPTO_CIPHER_MODE_CBC,
    QCRYPTO_CIPHER_MODE_XTS,
    QCRYPTO_CIPHER_MODE_CTR,
    QCRYPTO_CIPHER_MODE_LRW,
    QCRYPTO_CIPHER_MODE__MAX,
} QCryptoCipherMode;

/* "aes-256", "serpent-128", "3des", "cast5-128", ... (QEMU's QAPI names) */
const char *qcrypto_cipher_algo_name(QCryptoCipherAlgo alg);
/* Returns -1 if the name is unknown. */
int qcrypto_cipher_algo_parse(const char *name);
/* "ecb", "cbc", "xts", "ctr", "lrw" */
const char *qcrypto_cipher_mode_name(QCryptoCipherMode mode);
int qcrypto_cipher_mode_parse(const char *name);

/* Block length of the algorithm in bytes (16 for AES, 8 for 3DES). */
size_t qcrypto_cipher_get_block_len(QCryptoCipherAlgo alg);
/* Key length of the algorithm alone (32 for AES-256). */
size_t qcrypto_cipher_get_key_len(QCryptoCipherAlgo alg);
/*
 * Key length qcrypto_cipher_new() expects for alg in mode: twice the
 * algorithm's key for XTS (data key then tweak key), the algorithm's key
 * plus one block for LRW (key then tweak multiplier, as dm-crypt's
 * lrw(aes) takes it), the algorithm's key otherwise.
 */
size_t qcrypto_cipher_get_mode_key_len(QCryptoCipherAlgo alg,
                                       QCryptoCipherMode mode);
/* IV length for alg in mode: 0 for ECB, the block length otherwise. */
size_t qcrypto_cipher_get_iv_len(QCryptoCipherAlgo alg,
                                 QCryptoCipherMode mode);

/* Whether some usable backend supports alg in mode. */
bool qcrypto_cipher_supports(QCryptoCipherAlgo alg, QCryptoCipherMode mode);

/*
 * Create a cipher. nkey must be qcrypto_cipher_get_mode_key_len(alg, mode).
 * The IV starts as all zeroes.
 */
QCryptoCipher *qcrypto_cipher_new(QCryptoCipherAlgo alg,
                                  QCryptoCipherMode mode,
                                  const uint8_t *key, size_t nkey,
                                  Error **errp);

/* Free a cipher, wiping its key material. NULL is allowed. */
void qcrypto_cipher_free(QCryptoCipher *cipher);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(QCryptoCipher, qcrypto_cipher_free)

QCryptoCipherAlgo qcrypto_cipher_get_algo(const QCryptoCipher *cipher);
QCryptoCipherMode qcrypto_cipher_get_mode(const QCryptoCipher *cipher);

/*
 * Name of the implementation that runs this cipher: "nettle", or the
 * built-in AES path ("aesni", "vaes-256", "vaes-512").
 */
const char *qcrypto_cipher_get_impl_name(const QCryptoCipher *cipher);

/*
 * Encrypt / decrypt len bytes from in to out (in == out is allowed).
 *
 * len must be a multiple of the block length, except in XTS mode, where
 * any len >= 16 is accepted and a ragged tail is handled with IEEE 1619
 * ciphertext stealing (which ends the data unit: set a new IV next).
 *
 * Chaining state carries over between calls, so one message may be handed
 * over in several pieces: the CBC IV, the CTR counter, and the XTS and LRW
 * tweak (block index) all advance. qcrypto_cipher_setiv() starts over.
 */
int qcrypto_cipher_encrypt(QCryptoCipher *cipher, const void *in, void *out,
                           size_t len, Error **errp);
int qcrypto_cipher_decrypt(QCryptoCipher *cipher, const void *in, void *out,
                           size_t len, Error **errp);

/* Set the IV (niv == qcrypto_cipher_get_iv_len()); not for ECB. */
int qcrypto_cipher_setiv(QCryptoCipher *cipher, const uint8_t *iv,
                         size_t niv, Error **errp);

/*
 * Runs of sectors whose IVs count up: dm-crypt's plain, plain64 and
 * plain64be, which crypto/sector.c hands to the cipher in one call so
 * that a backend can work on many sectors at once (all their XTS tweaks
 * in one pass, say). The cipher knows nothing of IV generators: it gets
 * the numbers. The IV of the i-th sector of a run is the number
 *
 *     first_iv + (i << iv_shift)      (modulo 2^64)
 *
 * written into an all-zero IV as iv_format says.
 */
typedef enum {
    QCRYPTO_CIPHER_IV_LE32,     /* low 32 bits, little-endian, at byte 0 */
    QCRYPTO_CIPHER_IV_LE64,     /* 64 bits, little-endian, at byte 0 */
    QCRYPTO_CIPHER_IV_BE64,     /* 64 bits, big-endian, in the last 8 bytes */
} QCryptoCipherIVFormat;

typedef struct QCryptoCipherSectors {
    uint64_t first_iv;
    unsigned iv_shift;          /* below 64 */
    QCryptoCipherIVFormat iv_format;
    size_t sector_size;         /* a non-zero multiple of the block length */
} QCryptoCipherSectors;

/*
 * Whether this cipher's backend runs counted-IV sectors in iv_format
 * itself. When it does not, the caller loops: setiv + encrypt per sector.
 */
bool qcrypto_cipher_has_sectors(const QCryptoCipher *cipher,
                                QCryptoCipherIVFormat iv_format);

/*
 * Encrypt / decrypt, in place, len bytes (a whole number of sectors) as
 * sectors described by s. Only for a cipher and format that
 * qcrypto_cipher_has_sectors() accepts. Leaves the cipher's IV undefined.
 */
int qcrypto_cipher_encrypt_sectors(QCryptoCipher *cipher,
                                   const QCryptoCipherSectors *s,
                                   uint8_t *buf, size_t len, Error **errp);
int qcrypto_cipher_decrypt_sectors(QCryptoCipher *cipher,
                                   const QCryptoCipherSectors *s,
                                   uint8_t *buf, size_t len, Error **errp);

/*
 * Backend choice. The implementations this build and CPU can run, best
 * first, NULL-terminated: e.g. { "vaes-512", "vaes-256", "aesni",
 * "nettle", NULL }. "auto" (the default) takes, for each new cipher, the
 * first one that supports its algorithm and mode. Forcing a name makes
 * every new cipher use that implementation, or fail with a clear error if
 * it cannot run the algorithm and mode. The environment variable
 * QCRYPTO_CIPHER_BACKEND sets the initial choice; a value that names no
 * backend this CPU can run makes every qcrypto_cipher_new() fail with an
 * error saying so, until qcrypto_cipher_set_backend() chooses again.
 */
const char *const *qcrypto_cipher_backend_list(void);
int qcrypto_cipher_set_backend(const char *name, Error **errp);
const char *qcrypto_cipher_get_backend(void);

#endif
