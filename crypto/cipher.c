/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The cipher interface: argument checks and backend choice. The work
 * itself is done by backends through the driver table in cipherpriv.h.
 */
#include <string.h>

#include "cipherpriv.h"

static const char *const cipher_algo_names[QCRYPTO_CIPHER_ALGO__MAX] = {
    [QCRYPTO_CIPHER_ALGO_AES_128] = "aes-128",
    [QCRYPTO_CIPHER_ALGO_AES_192] = "aes-192",
    [QCRYPTO_CIPHER_ALGO_AES_256] = "aes-256",
    [QCRYPTO_CIPHER_ALGO_DES_EDE3] = "3des",
    [QCRYPTO_CIPHER_ALGO_CAST5_128] = "cast5-128",
    [QCRYPTO_CIPHER_ALGO_SERPENT_128] = "serpent-128",
    [QCRYPTO_CIPHER_ALGO_SERPENT_192] = "serpent-192",
    [QCRYPTO_CIPHER_ALGO_SERPENT_256] = "serpent-256",
    [QCRYPTO_CIPHER_ALGO_TWOFISH_128] = "twofish-128",
    [QCRYPTO_CIPHER_ALGO_TWOFISH_192] = "twofish-192",
    [QCRYPTO_CIPHER_ALGO_TWOFISH_256] = "twofish-256",
};

static const size_t cipher_algo_key_len[QCRYPTO_CIPHER_ALGO__MAX] = {
    [QCRYPTO_CIPHER_ALGO_AES_128] = 16,
    [QCRYPTO_CIPHER_ALGO_AES_192] = 24,
    [QCRYPTO_CIPHER_ALGO_AES_256] = 32,
    [QCRYPTO_CIPHER_ALGO_DES_EDE3] = 24,
    [QCRYPTO_CIPHER_ALGO_CAST5_128] = 16,
    [QCRYPTO_CIPHER_ALGO_SERPENT_128] = 16,
    [QCRYPTO_CIPHER_ALGO_SERPENT_192] = 24,
    [QCRYPTO_CIPHER_ALGO_SERPENT_256] = 32,
    [QCRYPTO_CIPHER_ALGO_TWOFISH_128] = 16,
    [QCRYPTO_CIPHER_ALGO_TWOFISH_192] = 24,
    [QCRYPTO_CIPHER_ALGO_TWOFISH_256] = 32,
};

static const char *const cipher_mode_names[QCRYPTO_CIPHER_MODE__MAX] = {
    [QCRYPTO_CIPHER_MODE_ECB] = "ecb",
    [QCRYPTO_CIPHER_MODE_CBC] = "cbc",
    [QCRYPTO_CIPHER_MODE_XTS] = "xts",
    [QCRYPTO_CIPHER_MODE_CTR] = "ctr",
    [QCRYPTO_CIPHER_MODE_LRW] = "lrw",
};

const char *qcrypto_cipher_algo_name(QCryptoCipherAlgo alg)
{
    g_assert(alg < QCRYPTO_CIPHER_ALGO__MAX);
    return cipher_algo_names[alg];
}

int qcrypto_cipher_algo_parse(const char *name)
{
    for (int i = 0; i < QCRYPTO_CIPHER_ALGO__MAX; i++) {
        if (g_str_equal(name, cipher_algo_names[i])) {
            return i;
        }
    }
    return -1;
}

const char *qcrypto_cipher_mode_name(QCryptoCipherMode mode)
{
    g_assert(mode < QCRYPTO_CIPHER_MODE__MAX);
    return cipher_mode_names[mode];
}

int qcrypto_cipher_mode_parse(const char *name)
{
    for (int i = 0; i < QCRYPTO_CIPHER_MODE__MAX; i++) {
        if (g_str_equal(name, cipher_mode_names[i])) {
            return i;
        }
    }
    return -1;
}

size_t qcrypto_cipher_get_block_len(QCryptoCipherAlgo alg)
{
    g_assert(alg < QCRYPTO_CIPHER_ALGO__MAX);
    switch (alg) {
    case QCRYPTO_CIPHER_ALGO_DES_EDE3:
    case QCRYPTO_CIPHER_ALGO_CAST5_128:
        return 8;
    default:
        return 16;
    }
}

size_t qcrypto_cipher_get_key_len(QCryptoCipherAlgo alg)
{
    g_assert(alg < QCRYPTO_CIPHER_ALGO__MAX);
    return cipher_algo_key_len[alg];
}

size_t qcrypto_cipher_get_mode_key_len(QCryptoCipherAlgo alg,
                                       QCryptoCipherMode mode)
{
    switch (mode) {
    case QCRYPTO_CIPHER_MODE_XTS:
        return 2 * qcrypto_cipher_get_key_len(alg);
    case QCRYPTO_CIPHER_MODE_LRW:
        return qcrypto_cipher_get_key_len(alg) +
            qcrypto_cipher_get_block_len(alg);
    default:
        return qcrypto_cipher_get_key_len(alg);
    }
}

size_t qcrypto_cipher_get_iv_len(QCryptoCipherAlgo alg,
                                 QCryptoCipherMode mode)
{
    if (mode == QCRYPTO_CIPHER_MODE_ECB) {
        return 0;
    }
    return qcrypto_cipher_get_block_len(alg);
}

/*
 * Backends, best first. The list of usable ones is fixed at the first use
 * (CPUID does not change under a running process).
 */
static const QCryptoCipherBackend *const cipher_backends_all[] = {
#ifdef CONFIG_AES_X86
    &qcrypto_cipher_backend_vaes512,
    &qcrypto_cipher_backend_vaes256,
    &qcrypto_cipher_backend_aesni,
#endif
    &qcrypto_cipher_backend_nettle,
};

#define N_BACKENDS G_N_ELEMENTS(cipher_backends_all)

static struct {
    const QCryptoCipherBackend *usable[N_BACKENDS + 1];
    const char *names[N_BACKENDS + 1];
    const QCryptoCipherBackend *forced;     /* NULL: auto */
    /*
     * What was wrong with QCRYPTO_CIPHER_BACKEND, or NULL. A library must
     * not end the process, and ignoring a choice the user made would
     * measure or test the wrong code: every qcrypto_cipher_new() reports
     * it instead, until qcrypto_cipher_set_backend() chooses again.
     */
    char *env_error;
} cipher_backends;

static int cipher_backend_find(const char *name,
                               const QCryptoCipherBackend **backend,
                               Error **errp);

static gpointer cipher_backends_init_once(gpointer unused)
{
    /*
     * The one environment variable library code reads, on purpose: tests
     * and benchmarks force a backend in programs that have no option for
     * it (docs/architecture.md, "The environment").
     */
    const char *env = g_getenv("QCRYPTO_CIPHER_BACKEND");
    size_t n = 0;

    for (size_t i = 0; i < N_BACKENDS; i++) {
        if (cipher_backends_all[i]->usable()) {
            cipher_backends.usable[n] = cipher_backends_all[i];
            cipher_backends.names[n] = cipher_backends_all[i]->name;
            n++;
        }
    }
    if (env && *env) {
        Error *err = NULL;

        if (cipher_backend_find(env, &cipher_backends.forced, &err) < 0) {
            cipher_backends.env_error =
                g_strdup_printf("QCRYPTO_CIPHER_BACKEND: %s",
                                error_get_pretty(err));
            error_free(err);
        }
    }
    return NULL;
}

static void cipher_backends_init(void)
{
    static GOnce once = G_ONCE_INIT;
    g_once(&once, cipher_backends_init_once, NULL);
}

static int cipher_backend_find(const char *name,
                               const QCryptoCipherBackend **backend,
                               Error **errp)
{
    if (g_str_equal(name, "auto")) {
        *backend = NULL;
        return 0;
    }
    for (size_t i = 0; cipher_backends.usable[i]; i++) {
        if (g_str_equal(name, cipher_backends.usable[i]->name)) {
            *backend = cipher_backends.usable[i];
            return 0;
        }
    }
    for (size_t i = 0; i < N_BACKENDS; i++) {
        if (g_str_equal(name, cipher_backends_all[i]->name)) {
            error_setg(errp, "Cipher backend '%s' cannot run on this CPU",
                       name);
            return -1;
        }
    }
    error_setg(errp, "Unknown cipher backend '%s'", name);
    return -1;
}

const char *const *qcrypto_cipher_backend_list(void)
{
    cipher_backends_init();
    return cipher_backends.names;
}

int qcrypto_cipher_set_backend(const char *name, Error **errp)
{
    cipher_backends_init();
    if (cipher_backend_find(name, &cipher_backends.forced, errp) < 0) {
        return -1;
    }
    /* A choice made here replaces a bad one from the environment. */
    g_clear_pointer(&cipher_backends.env_error, g_free);
    return 0;
}

const char *qcrypto_cipher_get_backend(void)
{
    cipher_backends_init();
    return cipher_backends.forced ? cipher_backends.forced->name : "auto";
}

static const QCryptoCipherBackend *
cipher_backend_for(QCryptoCipherAlgo alg, QCryptoCipherMode mode)
{
    cipher_backends_init();
    if (cipher_backends.forced) {
        return cipher_backends.forced->supports(alg, mode) ?
            cipher_backends.forced : NULL;
    }
    for (size_t i = 0; cipher_backends.usable[i]; i++) {
        if (cipher_backends.usable[i]->supports(alg, mode)) {
            return cipher_backends.usable[i];
        }
    }
    return NULL;
}

bool qcrypto_cipher_supports(QCryptoCipherAlgo alg, QCryptoCipherMode mode)
{
    if (alg >= QCRYPTO_CIPHER_ALGO__MAX || mode >= QCRYPTO_CIPHER_MODE__MAX) {
        return false;
    }
    return cipher_backend_for(alg, mode) != NULL;
}

QCryptoCipher *qcrypto_cipher_new(QCryptoCipherAlgo alg,
                                  QCryptoCipherMode mode,
                                  const uint8_t *key, size_t nkey,
                                  Error **errp)
{
    const QCryptoCipherBackend *backend;
    QCryptoCipher *cipher;
    size_t want;

    if (alg >= QCRYPTO_CIPHER_ALGO__MAX || mode >= QCRYPTO_CIPHER_MODE__MAX) {
        error_setg(errp, "Unknown cipher algorithm or mode");
        return NULL;
    }
    backend = cipher_backend_for(alg, mode);
    if (cipher_backends.env_error) {
        error_setg(errp, "%s", cipher_backends.env_error);
        return NULL;
    }
    if (!backend) {
        if (cipher_backends.forced) {
            error_setg(errp, "Cipher backend '%s' does not support "
                       "algorithm %s in mode %s", cipher_backends.forced->name,
                       cipher_algo_names[alg], cipher_mode_names[mode]);
        } else {
            error_setg(errp, "Cipher algorithm %s in mode %s is not supported",
                       cipher_algo_names[alg], cipher_mode_names[mode]);
        }
        return NULL;
    }
    /* XTS with 3DES or CAST5 would need a 64-bit block variant of XTS. */
    if ((mode == QCRYPTO_CIPHER_MODE_XTS || mode == QCRYPTO_CIPHER_MODE_LRW) &&
        qcrypto_cipher_get_block_len(alg) != 16) {
        error_setg(errp, "Mode %s needs a 128-bit block cipher, not %s",
                   cipher_mode_names[mode], cipher_algo_names[alg]);
        return NULL;
    }
    want = qcrypto_cipher_get_mode_key_len(alg, mode);
    if (nkey != want) {
        error_setg(errp, "Cipher key length %zu should be %zu for %s-%s",
                   nkey, want, cipher_algo_names[alg], cipher_mode_names[mode]);
        return NULL;
    }
    cipher = backend->cipher_new(alg, mode, key, nkey, errp);
    if (cipher) {
        cipher->block_len = qcrypto_cipher_get_block_len(alg);
        cipher->iv_len = qcrypto_cipher_get_iv_len(alg, mode);
    }
    return cipher;
}

void qcrypto_cipher_free(QCryptoCipher *cipher)
{
    if (cipher) {
        cipher->driver->cipher_free(cipher);
    }
}

QCryptoCipherAlgo qcrypto_cipher_get_algo(const QCryptoCipher *cipher)
{
    return cipher->alg;
}

QCryptoCipherMode qcrypto_cipher_get_mode(const QCryptoCipher *cipher)
{
    return cipher->mode;
}

const char *qcrypto_cipher_get_impl_name(const QCryptoCipher *cipher)
{
    return cipher->impl;
}

static int cipher_check_len(QCryptoCipher *cipher, size_t len, Error **errp)
{
    size_t blocklen = cipher->block_len;

    if (cipher->mode == QCRYPTO_CIPHER_MODE_XTS) {
        /* IEEE 1619 ciphertext stealing needs at least one full block. */
        if (len < blocklen && len != 0) {
            error_setg(errp, "XTS needs at least %zu bytes, not %zu",
                       blocklen, len);
            return -1;
        }
        return 0;
    }
    /* Block lengths are powers of two (8, 16): no division. */
    if (len & (blocklen - 1)) {
        error_setg(errp, "Length %zu must be a multiple of the block "
                   "size %zu", len, blocklen);
        return -1;
    }
    return 0;
}

int qcrypto_cipher_encrypt(QCryptoCipher *cipher, const void *in, void *out,
                           size_t len, Error **errp)
{
    if (cipher_check_len(cipher, len, errp) < 0) {
        return -1;
    }
    if (len == 0) {
        return 0;
    }
    return cipher->driver->cipher_encrypt(cipher, in, out, len, errp);
}

int qcrypto_cipher_decrypt(QCryptoCipher *cipher, const void *in, void *out,
                           size_t len, Error **errp)
{
    if (cipher_check_len(cipher, len, errp) < 0) {
        return -1;
    }
    if (len == 0) {
        return 0;
    }
    return cipher->driver->cipher_decrypt(cipher, in, out, len, errp);
}

int qcrypto_cipher_setiv(QCryptoCipher *cipher, const uint8_t *iv,
                         size_t niv, Error **errp)
{
    size_t want = cipher->iv_len;

    if (want == 0) {
        error_setg(errp, "Mode %s takes no IV", cipher_mode_names[cipher->mode]);
        return -1;
    }
    if (niv != want) {
        error_setg(errp, "IV length %zu should be %zu", niv, want);
        return -1;
    }
    return cipher->driver->cipher_setiv(cipher, iv, niv, errp);
}

bool qcrypto_cipher_has_sectors(const QCryptoCipher *cipher,
                                QCryptoCipherIVFormat iv_format)
{
    return cipher->driver->cipher_has_sectors &&
        cipher->driver->cipher_has_sectors(cipher, iv_format);
}

static int cipher_sectors(QCryptoCipher *cipher, const QCryptoCipherSectors *s,
                          uint8_t *buf, size_t len, bool encrypt,
                          Error **errp)
{
    size_t blocklen = cipher->block_len;
    size_t count;

    if (!qcrypto_cipher_has_sectors(cipher, s->iv_format)) {
        error_setg(errp, "The %s implementation of %s-%s does not run "
                   "counted-IV sectors", cipher->impl,
                   cipher_algo_names[cipher->alg],
                   cipher_mode_names[cipher->mode]);
        return -1;
    }
    /* Once per request on the fast path: one division, and a mask. */
    count = s->sector_size ? len / s->sector_size : 0;
    if (s->sector_size == 0 || (s->sector_size & (blocklen - 1)) ||
        count * s->sector_size != len) {
        error_setg(errp, "Length %zu is not a whole number of %zu-byte "
                   "sectors", len, s->sector_size);
        return -1;
    }
    if (s->iv_shift >= 64) {
        error_setg(errp, "IV shift %u is not below 64", s->iv_shift);
        return -1;
    }
    if (count == 0) {
        return 0;
    }
    if (encrypt) {
        cipher->driver->cipher_encrypt_sectors(cipher, s, buf, count);
    } else {
        cipher->driver->cipher_decrypt_sectors(cipher, s, buf, count);
    }
    return 0;
}

int qcrypto_cipher_encrypt_sectors(QCryptoCipher *cipher,
                                   const QCryptoCipherSectors *s,
                                   uint8_t *buf, size_t len, Error **errp)
{
    return cipher_sectors(cipher, s, buf, len, true, errp);
}

int qcrypto_cipher_decrypt_sectors(QCryptoCipher *cipher,
                                   const QCryptoCipherSectors *s,
                                   uint8_t *buf, size_t len, Error **errp)
{
    return cipher_sectors(cipher, s, buf, len, false, errp);
}
