/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Encrypted images, the generic part: dispatch to the format driver
 * (crypto/blockpriv.h) and payload encryption through a pool of ciphers.
 */
#include <inttypes.h>
#include <string.h>

#include "blockpriv.h"
#include "crypto/random.h"
#include "crypto/secure-mem.h"

/*
 * Upper bound of the cipher pool: more threads than this encrypting at the
 * same time wait for a free cipher rather than growing it further.
 */
#define QCRYPTO_BLOCK_MAX_CIPHERS 64

/* A format's first driver is its default (see crypto/blockpriv.h). */
static const QCryptoBlockDriver *const qcrypto_block_drivers[] = {
    &qcrypto_block_driver_luks,
    &qcrypto_block_driver_luks2,
};

/*
 * The driver of format for header version (0: the format's default), or
 * NULL and errp.
 */
static const QCryptoBlockDriver *block_driver(QCryptoBlockFormat format,
                                              int version, Error **errp)
{
    const QCryptoBlockDriver *first = NULL;
    g_autoptr(GString) versions = g_string_new(NULL);   /* "1 or 2" */

    for (size_t i = 0; i < G_N_ELEMENTS(qcrypto_block_drivers); i++) {
        const QCryptoBlockDriver *driver = qcrypto_block_drivers[i];

        if (driver->format != format) {
            continue;
        }
        if (version == 0 || driver->version == version) {
            return driver;
        }
        first = first ? first : driver;
        g_string_append_printf(versions, "%s%d", versions->len ? " or " : "",
                               driver->version);
    }
    if (!first) {
        error_setg(errp, "Unsupported encryption format %d", (int)format);
        return NULL;
    }
    error_setg(errp, "Unsupported %s version %d (%s)", first->name, version,
               versions->str);
    return NULL;
}

void qcrypto_block_create_options_init(QCryptoBlockCreateOptions *opts)
{
    QCryptoBlockSecret secret = opts->secret;

    memset(opts, 0, sizeof(*opts));
    opts->secret = secret;
    opts->format = QCRYPTO_BLOCK_FORMAT_LUKS;
    opts->cipher_alg = QCRYPTO_CIPHER_ALGO_AES_256;
    opts->cipher_mode = QCRYPTO_CIPHER_MODE_XTS;
    opts->ivgen_alg = QCRYPTO_IVGEN_ALGO_PLAIN64;
    opts->ivgen_hash_alg = QCRYPTO_HASH_ALGO_SHA256;
    opts->hash_alg = QCRYPTO_HASH_ALGO_SHA256;
    opts->iter_time = 2000;
}

/* The driver of format whose has_format() claims buf, or NULL. */
static const QCryptoBlockDriver *block_driver_claiming(
    QCryptoBlockFormat format, const uint8_t *buf, size_t len)
{
    for (size_t i = 0; i < G_N_ELEMENTS(qcrypto_block_drivers); i++) {
        const QCryptoBlockDriver *driver = qcrypto_block_drivers[i];

        if (driver->format == format && driver->has_format(buf, len)) {
            return driver;
        }
    }
    return NULL;
}

bool qcrypto_block_has_format(QCryptoBlockFormat format,
                              const uint8_t *buf, size_t len)
{
    return block_driver_claiming(format, buf, len) != NULL;
}

static const QCryptoBlockDriver *
block_create_driver(const QCryptoBlockCreateOptions *options, Error **errp)
{
    return block_driver(options->format, options->luks_version, errp);
}

QCryptoBlock *qcrypto_block_new(QCryptoBlockFormat format,
                                 const QCryptoBlockDriver *driver)
{
    QCryptoBlock *block = g_new0(QCryptoBlock, 1);

    block->format = format;
    block->driver = driver;
    block->max_pbkdf2_iters = QCRYPTO_BLOCK_PBKDF2_ITERS_MAX_DEFAULT;
    g_mutex_init(&block->lock);
    g_cond_init(&block->cond);
    return block;
}

/* Which driver of block->format opens the file (see crypto/blockpriv.h). */
static const QCryptoBlockDriver *
block_open_driver(QCryptoBlock *block, const QCryptoBlockDriver *fallback,
                  QCryptoBlockReadFunc readfunc, void *opaque)
{
    uint8_t buf[QCRYPTO_BLOCK_PROBE_LEN];
    const QCryptoBlockDriver *driver = NULL;

    /* A read error is left for the driver's open() to report. */
    if (readfunc(block, 0, buf, sizeof(buf), opaque, NULL) == 0) {
        driver = block_driver_claiming(block->format, buf, sizeof(buf));
        if (driver) {
            return driver;
        }
    }
    for (size_t i = 0; i < G_N_ELEMENTS(qcrypto_block_drivers); i++) {
        driver = qcrypto_block_drivers[i];
        if (driver->format == block->format && driver->probe &&
            driver->probe(block, readfunc, opaque)) {
            return driver;
        }
    }
    return fallback;
}

QCryptoBlock *qcrypto_block_open(const QCryptoBlockOpenOptions *options,
                                 QCryptoBlockReadFunc readfunc,
                                 void *opaque, unsigned int flags,
                                 Error **errp)
{
    const QCryptoBlockDriver *driver = block_driver(options->format, 0,
                                                    errp);
    QCryptoBlock *block;

    if (!driver) {
        return NULL;
    }
    block = qcrypto_block_new(options->format, driver);
    if (options->max_pbkdf2_iterations) {
        block->max_pbkdf2_iters = options->max_pbkdf2_iterations;
    }
    driver = block->driver = block_open_driver(block, driver, readfunc,
                                               opaque);
    if (driver->open(block, options, readfunc, opaque, flags, errp) < 0) {
        qcrypto_block_free(block);
        return NULL;
    }
    return block;
}

/* block may be NULL (the format layer used alone): the default limit. */
static uint64_t qcrypto_block_pbkdf2_limit(const QCryptoBlock *block)
{
    return block ? block->max_pbkdf2_iters :
        QCRYPTO_BLOCK_PBKDF2_ITERS_MAX_DEFAULT;
}

bool qcrypto_block_pbkdf2_within_limit(const QCryptoBlock *block,
                                       uint64_t iterations)
{
    return iterations <= qcrypto_block_pbkdf2_limit(block);
}

void qcrypto_block_unlock_error(const QCryptoBlock *block, uint32_t skipped,
                                Error **errp)
{
    g_autoptr(GString) slots = g_string_new(NULL);

    if (!skipped) {
        error_setg(errp, "Invalid password, cannot unlock any keyslot");
        return;
    }
    for (int i = 0; i < 32; i++) {
        if (skipped & (1u << i)) {
            g_string_append_printf(slots, "%s%d", slots->len ? ", " : "", i);
        }
    }
    error_setg(errp, "Invalid password, cannot unlock any keyslot within "
               "the PBKDF2 limit; key slot %s (more than "
               "max-pbkdf2-iterations=%" PRIu64 ") was not tried: raise "
               "that open option to try it", slots->str,
               qcrypto_block_pbkdf2_limit(block));
}

void qcrypto_block_digest_limit_error(const QCryptoBlock *block,
                                      const char *what, uint64_t iterations,
                                      Error **errp)
{
    error_setg(errp, "The %s needs %" PRIu64 " PBKDF2 iterations, more than "
               "max-pbkdf2-iterations=%" PRIu64 ": raise that open option "
               "to unlock this image", what, iterations,
               qcrypto_block_pbkdf2_limit(block));
}

QCryptoBlock *qcrypto_block_create(const QCryptoBlockCreateOptions *options,
                                   QCryptoBlockInitFunc initfunc,
                                   QCryptoBlockWriteFunc writefunc,
                                   void *opaque, Error **errp)
{
    const QCryptoBlockDriver *driver = block_create_driver(options, errp);
    QCryptoBlock *block;

    if (!driver) {
        return NULL;
    }
    block = qcrypto_block_new(options->format, driver);
    if (driver->create(block, options, initfunc, writefunc, opaque,
                       errp) < 0) {
        qcrypto_block_free(block);
        return NULL;
    }
    return block;
}

int qcrypto_block_calculate_payload_offset(
    const QCryptoBlockCreateOptions *options, uint64_t *payload_offset,
    Error **errp)
{
    const QCryptoBlockDriver *driver = block_create_driver(options, errp);

    if (!driver) {
        return -1;
    }
    return driver->calculate_payload_offset(options, payload_offset, errp);
}

int qcrypto_block_amend_options(QCryptoBlock *block,
                                QCryptoBlockReadFunc readfunc,
                                QCryptoBlockWriteFunc writefunc,
                                QCryptoBlockFlushFunc flushfunc,
                                void *opaque,
                                const QCryptoBlockAmendOptions *options,
                                bool force, Error **errp)
{
    return block->driver->amend(block, readfunc, writefunc, flushfunc, opaque,
                                options, force, errp);
}

QCryptoBlockInfo *qcrypto_block_get_info(QCryptoBlock *block, Error **errp)
{
    g_autoptr(QCryptoBlockInfo) info = g_new0(QCryptoBlockInfo, 1);

    info->format = block->format;
    info->detached_header = block->detached_header;
    info->payload_offset = block->payload_offset;
    if (block->driver->get_info(block, info, errp) < 0) {
        return NULL;
    }
    return g_steal_pointer(&info);
}

void qcrypto_block_info_free(QCryptoBlockInfo *info)
{
    if (info) {
        g_free(info->uuid);
        g_free(info->slots);
        g_free(info->label);
        g_free(info->subsystem);
        for (size_t i = 0; i < info->nsegments; i++) {
            g_free(info->segments[i].encryption);
        }
        g_free(info->segments);
        for (size_t i = 0; i < info->ntokens; i++) {
            g_free(info->tokens[i].type);
        }
        g_free(info->tokens);
        g_free(info);
    }
}

uint64_t qcrypto_block_get_payload_offset(QCryptoBlock *block)
{
    return block->payload_offset;
}

uint64_t qcrypto_block_get_data_size(QCryptoBlock *block)
{
    return block->data_size;
}

uint64_t qcrypto_block_get_sector_size(QCryptoBlock *block)
{
    return block->sector_size;
}

const char *qcrypto_block_get_warning(QCryptoBlock *block)
{
    return block->warning;
}

static QCryptoSectorCipher *block_cipher_new(QCryptoBlock *block,
                                             Error **errp)
{
    return qcrypto_sector_cipher_new(&block->cipher_spec, block->master_key,
                                     block->master_key_len,
                                     block->sector_size,
                                     block->ivgen_sector_shift,
                                     block->iv_sector_offset, errp);
}

int qcrypto_block_init_cipher(QCryptoBlock *block,
                              const QCryptoSectorCipherSpec *spec,
                              const uint8_t *key, size_t nkey,
                              Error **errp)
{
    QCryptoSectorCipher *sc;

    g_assert(!block->has_master_key);
    block->cipher_spec = *spec;
    block->master_key = qcrypto_secure_alloc(nkey);
    memcpy(block->master_key, key, nkey);
    block->master_key_len = nkey;
    block->has_master_key = true;

    sc = block_cipher_new(block, errp);
    if (!sc) {
        return -1;
    }
    block->free_ciphers = g_new0(QCryptoSectorCipher *,
                                 QCRYPTO_BLOCK_MAX_CIPHERS);
    block->free_ciphers[0] = sc;
    block->n_free = 1;
    block->n_ciphers = 1;
    return 0;
}

/* Take a cipher of the pool, making one if none is free and room is left. */
static QCryptoSectorCipher *block_cipher_get(QCryptoBlock *block,
                                             Error **errp)
{
    QCryptoSectorCipher *sc;

    g_mutex_lock(&block->lock);
    while (block->n_free == 0 &&
           block->n_ciphers >= QCRYPTO_BLOCK_MAX_CIPHERS) {
        g_cond_wait(&block->cond, &block->lock);
    }
    if (block->n_free) {
        sc = block->free_ciphers[--block->n_free];
        g_mutex_unlock(&block->lock);
        return sc;
    }
    block->n_ciphers++;
    g_mutex_unlock(&block->lock);

    /* Key setup (and the ESSIV hash) runs outside the lock. */
    sc = block_cipher_new(block, errp);
    if (!sc) {
        g_mutex_lock(&block->lock);
        block->n_ciphers--;
        g_cond_signal(&block->cond);
        g_mutex_unlock(&block->lock);
    }
    return sc;
}

static void block_cipher_put(QCryptoBlock *block, QCryptoSectorCipher *sc)
{
    g_mutex_lock(&block->lock);
    block->free_ciphers[block->n_free++] = sc;
    g_cond_signal(&block->cond);
    g_mutex_unlock(&block->lock);
}

static int block_crypt(QCryptoBlock *block, uint64_t offset, uint8_t *buf,
                       size_t len, bool encrypt, Error **errp)
{
    QCryptoSectorCipher *sc;
    uint64_t sector;
    int ret;

    if (!block->has_master_key) {
        error_setg(errp, "The image was opened without its key: it can "
                   "be inspected but not read or written");
        return -1;
    }
    if (offset % block->sector_size || len % block->sector_size) {
        error_setg(errp, "Encrypted I/O at offset %" G_GUINT64_FORMAT
                   " length %zu is not aligned to %" G_GUINT64_FORMAT
                   "-byte sectors", offset, len, block->sector_size);
        return -1;
    }
    sector = offset / block->sector_size;
    sc = block_cipher_get(block, errp);
    if (!sc) {
        return -1;
    }
    ret = encrypt ?
        qcrypto_sector_cipher_encrypt(sc, sector, buf, len, errp) :
        qcrypto_sector_cipher_decrypt(sc, sector, buf, len, errp);
    block_cipher_put(block, sc);
    return ret;
}

int qcrypto_block_decrypt(QCryptoBlock *block, uint64_t offset,
                          uint8_t *buf, size_t len, Error **errp)
{
    return block_crypt(block, offset, buf, len, false, errp);
}

int qcrypto_block_encrypt(QCryptoBlock *block, uint64_t offset,
                          uint8_t *buf, size_t len, Error **errp)
{
    return block_crypt(block, offset, buf, len, true, errp);
}

void qcrypto_block_free(QCryptoBlock *block)
{
    if (!block) {
        return;
    }
    if (block->driver && block->driver->cleanup) {
        block->driver->cleanup(block);
    }
    /* Every cipher is back in the pool: no request may outlive the block. */
    g_assert(block->n_free == block->n_ciphers);
    for (size_t i = 0; i < block->n_free; i++) {
        qcrypto_sector_cipher_free(block->free_ciphers[i]);
    }
    g_free(block->free_ciphers);
    if (block->master_key) {
        qcrypto_secure_free(block->master_key, block->master_key_len);
    }
    g_free(block->warning);
    g_mutex_clear(&block->lock);
    g_cond_clear(&block->cond);
    g_free(block);
}

int qcrypto_block_flush(QCryptoBlock *block, QCryptoBlockFlushFunc flushfunc,
                        void *opaque, Error **errp)
{
    return flushfunc ? flushfunc(block, opaque, errp) : 0;
}

int qcrypto_block_wipe_area(QCryptoBlock *block,
                            QCryptoBlockWriteFunc writefunc, void *opaque,
                            uint64_t offset, uint64_t len, Error **errp)
{
    /* In chunks: a LUKS2 area may be as large as the whole key-slot area. */
    const size_t chunk = 64 * 1024;
    g_autofree uint8_t *buf = g_malloc(MIN(chunk, len));

    for (uint64_t done = 0; done < len; done += chunk) {
        size_t n = MIN(chunk, len - done);

        if (qcrypto_random_bytes(buf, n, errp) < 0 ||
            writefunc(block, offset + done, buf, n, opaque, errp) < 0) {
            return -1;
        }
    }
    return 0;
}
