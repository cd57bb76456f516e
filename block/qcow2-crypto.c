/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * qcow2 encryption, read side (spec, "Full disk encryption header
 * pointer" and "Data encryption"):
 *
 * - LUKS (crypt_method 2): a LUKS1 header and its key material live in
 *   clusters of the image file that the FDE header extension points at.
 *   The crypto/ layer opens it through a read callback confined to those
 *   clusters (its offsets count from their start). Payload sectors are
 *   encrypted with IVs from the *host* offset: sector = host offset / 512,
 *   so the same guest data at another host cluster is another ciphertext.
 *
 * - Legacy AES (crypt_method 1): AES-128-CBC, IV plain64 of the *guest*
 *   sector number, key = the passphrase's first 16 bytes, zero-padded
 *   (QEMU's crypto/block-qcow.c). No salt, no KDF, no integrity: read
 *   only, so that such images can be converted to LUKS.
 *
 * Compressed clusters are never encrypted (QEMU refuses to write them
 * to encrypted images), so only standard clusters pass through here.
 *
 * Both decrypt through sector ciphers (crypto/sector.h): LUKS through its
 * QCryptoBlock (a pool of them, so threads decrypt in parallel), AES
 * through one of its own { AES-128, CBC, plain64 }.
 */
#include <string.h>

#include "block/qcow2.h"
#include "crypto/sector.h"

#define QCOW2_AES_KEY_LEN 16
#define QCOW2_CRYPTO_SECTOR 512

struct Qcow2Crypto {
    int method;
    bool no_io;                 /* header only (info): nothing to decrypt */
    /* LUKS */
    QCryptoBlock *luks;
    BlockDriverState *file;
    uint64_t hdr_offset;
    uint64_t hdr_length;
    /* AES: a sector cipher keeps its IV between sectors: one thread. */
    GMutex aes_lock;
    QCryptoSectorCipher *aes;
};

/* The LUKS header's reads, confined to the header clusters. */
int qcow2_crypto_hdr_read(QCryptoBlock *block, uint64_t offset,
                          uint8_t *buf, size_t buflen, void *opaque,
                          Error **errp)
{
    Qcow2Crypto *c = opaque;

    if (offset > c->hdr_length || buflen > c->hdr_length - offset) {
        error_setg(errp, "LUKS header read of %zu bytes at offset %"
                   G_GUINT64_FORMAT " is outside the qcow2 crypto header (%"
                   G_GUINT64_FORMAT " bytes)", buflen, offset,
                   c->hdr_length);
        return -1;
    }
    return bdrv_pread(c->file, c->hdr_offset + offset, buf,
                      buflen, errp);
}

static int qcow2_crypto_open_luks(Qcow2Crypto *c, BlockDriverState *bs,
                                  const Qcow2Extensions *ext,
                                  const QCryptoBlockSecret *secret,
                                  bool no_io, Error **errp)
{
    QCryptoBlockOpenOptions opts = {
        .format = QCRYPTO_BLOCK_FORMAT_LUKS,
        .size = ext->crypto_header_length,
    };

    if (secret) {
        opts.secret = *secret;
    }
    c->file = bs->file;
    c->hdr_offset = ext->crypto_header_offset;
    c->hdr_length = ext->crypto_header_length;
    c->luks = qcrypto_block_open(&opts, qcow2_crypto_hdr_read, c,
                                 no_io ? QCRYPTO_BLOCK_OPEN_NO_IO : 0, errp);
    if (!c->luks) {
        return -1;
    }
    /* QEMU writes (and reads) LUKS1, 512-byte sectors, in qcow2. */
    if (qcrypto_block_get_sector_size(c->luks) != QCOW2_CRYPTO_SECTOR) {
        error_setg(errp, "The LUKS header in this qcow2 image has %"
                   G_GUINT64_FORMAT "-byte sectors; qcow2 encryption uses "
                   "512-byte sectors", qcrypto_block_get_sector_size(c->luks));
        return -1;
    }
    return 0;
}

static int qcow2_crypto_open_aes(Qcow2Crypto *c,
                                 const QCryptoBlockSecret *secret,
                                 Error **errp)
{
    /* QEMU's crypto/block-qcow.c: 512-byte sectors, plain64 guest IVs. */
    static const QCryptoSectorCipherSpec spec = {
        .alg = QCRYPTO_CIPHER_ALGO_AES_128,
        .mode = QCRYPTO_CIPHER_MODE_CBC,
        .ivgen = QCRYPTO_IVGEN_ALGO_PLAIN64,
    };
    uint8_t key[QCOW2_AES_KEY_LEN] = { 0 };
    const uint8_t *nul = memchr(secret->data, 0, secret->len);
    size_t len = nul ? (size_t)(nul - secret->data) : secret->len;

    /* QEMU takes the secret as a C string: up to a NUL, at most 16 bytes. */
    memcpy(key, secret->data, MIN(len, sizeof(key)));
    c->aes = qcrypto_sector_cipher_new(&spec, key, sizeof(key),
                                       QCOW2_CRYPTO_SECTOR, 0, 0, errp);
    memset(key, 0, sizeof(key));
    return c->aes ? 0 : -1;
}

Qcow2Crypto *qcow2_crypto_open(BlockDriverState *bs, const Qcow2Header *h,
                               const Qcow2Extensions *ext,
                               const QCryptoBlockSecret *secret, bool no_io,
                               Error **errp)
{
    Qcow2Crypto *c = g_new0(Qcow2Crypto, 1);
    int ret = 0;

    c->method = h->crypt_method;
    c->no_io = no_io;
    g_mutex_init(&c->aes_lock);
    if (h->crypt_method == QCOW2_CRYPT_LUKS) {
        ret = qcow2_crypto_open_luks(c, bs, ext, secret, no_io, errp);
    } else if (!no_io) {
        ret = qcow2_crypto_open_aes(c, secret, errp);
    }
    if (ret < 0) {
        qcow2_crypto_free(c);
        return NULL;
    }
    return c;
}

void qcow2_crypto_free(Qcow2Crypto *c)
{
    if (!c) {
        return;
    }
    qcrypto_block_free(c->luks);
    qcrypto_sector_cipher_free(c->aes);
    g_mutex_clear(&c->aes_lock);
    g_free(c);
}

int qcow2_crypto_decrypt(Qcow2Crypto *c, uint64_t host_offset,
                         uint64_t guest_offset, uint8_t *buf, size_t len,
                         Error **errp)
{
    int ret;

    g_assert(host_offset % QCOW2_CRYPTO_SECTOR == 0 &&
             guest_offset % QCOW2_CRYPTO_SECTOR == 0 &&
             len % QCOW2_CRYPTO_SECTOR == 0);
    if (c->no_io) {
        error_setg(errp, "The image was opened without its key");
        return -1;
    }
    if (c->luks) {
        return qcrypto_block_decrypt(c->luks, host_offset, buf, len, errp);
    }
    g_mutex_lock(&c->aes_lock);
    ret = qcrypto_sector_cipher_decrypt(c->aes,
                                        guest_offset / QCOW2_CRYPTO_SECTOR,
                                        buf, len, errp);
    g_mutex_unlock(&c->aes_lock);
    return ret;
}

QCryptoBlockInfo *qcow2_crypto_get_info(Qcow2Crypto *c, Error **errp)
{
    if (!c || !c->luks) {
        error_setg(errp, "No LUKS header to describe");
        return NULL;
    }
    return qcrypto_block_get_info(c->luks, errp);
}

/* ---- Writing */

int qcow2_crypto_hdr_write(QCryptoBlock *block, uint64_t offset,
                           const uint8_t *buf, size_t buflen, void *opaque,
                           Error **errp)
{
    Qcow2Crypto *c = opaque;

    if (offset > c->hdr_length || buflen > c->hdr_length - offset) {
        error_setg(errp, "LUKS header write of %zu bytes at offset %"
                   G_GUINT64_FORMAT " is outside the qcow2 crypto header (%"
                   G_GUINT64_FORMAT " bytes)", buflen, offset,
                   c->hdr_length);
        return -1;
    }
    return bdrv_pwrite(c->file, c->hdr_offset + offset, buf,
                       buflen, 0, errp);
}

/* The LUKS header's writes are ordered with flushes of the image file. */
int qcow2_crypto_hdr_flush(QCryptoBlock *block, void *opaque, Error **errp)
{
    Qcow2Crypto *c = opaque;

    return bdrv_flush(c->file, errp);
}

Qcow2Crypto *qcow2_crypto_new_luks(BlockDriverState *file,
                                   QCryptoBlock *block, uint64_t hdr_offset,
                                   uint64_t hdr_length)
{
    Qcow2Crypto *c = g_new0(Qcow2Crypto, 1);

    c->method = QCOW2_CRYPT_LUKS;
    g_mutex_init(&c->aes_lock);
    c->luks = block;
    c->file = file;
    c->hdr_offset = hdr_offset;
    c->hdr_length = hdr_length;
    return c;
}

QCryptoBlock *qcow2_crypto_get_block(Qcow2Crypto *c)
{
    return c ? c->luks : NULL;
}

int qcow2_crypto_encrypt(Qcow2Crypto *c, uint64_t host_offset, uint8_t *buf,
                         size_t len, Error **errp)
{
    g_assert(host_offset % QCOW2_CRYPTO_SECTOR == 0 &&
             len % QCOW2_CRYPTO_SECTOR == 0);
    if (c->no_io || !c->luks) {
        error_setg(errp, "The image was opened without its key");
        return -1;
    }
    /* As QEMU: the IVs follow the host offset of each sector. */
    return qcrypto_block_encrypt(c->luks, host_offset, buf, len, errp);
}
