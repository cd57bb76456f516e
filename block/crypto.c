/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The "luks" format driver: a LUKS image on a child node ("file"), its
 * header either at the start of that file or in a file of its own (the
 * "header" child, as QEMU 9's detached headers).
 *
 * The LUKS format itself lives in crypto/ (include/crypto/block.h) and does
 * no I/O: it reads and writes its header through the callbacks below. This
 * driver moves the payload: requests are encrypted or decrypted in whole
 * runs of sectors, one qcrypto_block_*crypt() call per piece (never a call
 * per 512-byte sector). The QCryptoBlock keeps a pool of ciphers, so
 * requests from several threads are encrypted in parallel.
 */
#include <string.h>
#include <unistd.h>

#include "block/block_int.h"
#include "block/crypto.h"
#include "block/crypto-online.h"
#include "crypto/reencrypt.h"
#include "crypto/secret.h"

typedef struct BlockCrypto {
    QCryptoBlock *block;
    /* Where the header lives: the "header" child, or bs->file. */
    BlockDriverState *header;
    bool detached;
    /*
     * A file that holds a header and no payload (a detached header, or
     * cryptsetup luksHeaderBackup output), opened for info only: no data.
     */
    bool header_only;
    uint64_t payload_offset;        /* bytes into bs->file */
    uint64_t data_size;             /* fixed by the header; 0: to the end */
    uint64_t sector_size;
    /* reencrypt=on: a new volume key while served (crypto-online.c) */
    BlockCryptoOnline *online;
} BlockCrypto;

/* Header I/O callbacks: opaque is the node holding the header. */

static int block_crypto_header_read(QCryptoBlock *block, uint64_t offset,
                                    uint8_t *buf, size_t buflen, void *opaque,
                                    Error **errp)
{
    BlockDriverState *hdr = opaque;
    int64_t len = bdrv_getlength_exact(hdr, errp);

    if (len < 0) {
        return -1;
    }
    /* A header that points past the end of its file is damaged. */
    if (offset > (uint64_t)len || buflen > (uint64_t)len - offset) {
        error_setg(errp, "LUKS header read of %zu bytes at offset %"
                   G_GUINT64_FORMAT " is beyond the end of '%s' (%"
                   G_GINT64_FORMAT " bytes)", buflen, offset,
                   bdrv_get_filename(hdr), len);
        return -1;
    }
    return bdrv_pread(hdr, offset, buf, buflen, errp);
}

static int block_crypto_header_write(QCryptoBlock *block, uint64_t offset,
                                     const uint8_t *buf, size_t buflen,
                                     void *opaque, Error **errp)
{
    BlockDriverState *hdr = opaque;

    return bdrv_pwrite(hdr, offset, buf, buflen, 0, errp);
}

/* Where the format orders its header writes (see QCryptoBlockFlushFunc). */
static int block_crypto_header_flush(QCryptoBlock *block, void *opaque,
                                     Error **errp)
{
    return bdrv_flush(opaque, errp);
}

/* ---- a decryption in place under way (docs/reencrypt.md) ---- */

static int block_crypto_decrypt_header_read(void *opaque, uint64_t offset,
                                            void *buf, size_t len,
                                            Error **errp)
{
    return bdrv_pread(opaque, offset, buf, len, errp);
}

/*
 * A file by its literal name (no "file:" parsing), and without locks: the
 * reencrypt command holds it open for writing meanwhile. NULL if it does
 * not open.
 */
static BlockDriverState *block_crypto_open_unlocked(const char *path)
{
    g_autoptr(GHashTable) opts = qemu_opts_new();

    g_hash_table_insert(opts, g_strdup("driver"), g_strdup("file"));
    g_hash_table_insert(opts, g_strdup("filename"), g_strdup(path));
    g_hash_table_insert(opts, g_strdup("locking"), g_strdup("off"));
    return bdrv_open(NULL, NULL, opts, BDRV_O_FORCE_SHARE, NULL);
}

/*
 * Whether the data file still starts with the LUKS2 header whose first
 * binary header (magic, version, UUID) the header file holds: the header
 * file is then an export cut short, not a decryption under way (whose
 * data file starts with moved ciphertext or plain text).
 */
static bool block_crypto_decrypt_export_cut_short(BlockDriverState *hdr,
                                                  const char *filename)
{
    /* LUKS2 on-disk format, section 2.1: the UUID field is at 0xa8 */
    enum { UUID_OFFSET = 0xa8, UUID_LEN = 40 };
    g_autoptr(BlockDriverState) data = block_crypto_open_unlocked(filename);
    uint8_t a[UUID_OFFSET + UUID_LEN], b[UUID_OFFSET + UUID_LEN];

    return data && bdrv_pread(hdr, 0, a, sizeof(a), NULL) == 0 &&
        bdrv_pread(data, 0, b, sizeof(b), NULL) == 0 &&
        !memcmp(a, b, 8) && a[UUID_OFFSET] &&
        !memcmp(a + UUID_OFFSET, b + UUID_OFFSET, UUID_LEN);
}

bool block_crypto_decrypt_in_progress(const char *filename)
{
    /* LUKS2 on-disk format, section 2.1: magic, then version 2 (BE). */
    static const uint8_t luks2_magic[8] = {
        'L', 'U', 'K', 'S', 0xba, 0xbe, 0, 2
    };
    g_autoptr(BlockDriverState) hdr = NULL;
    g_autofree char *path = NULL;
    QCryptoReencryptIO io = { .hdr_read = block_crypto_decrypt_header_read };
    QCryptoReencryptDecryptState state;
    uint8_t magic[sizeof(luks2_magic)];
    uint64_t size;

    if (!filename || !*filename) {
        return false;
    }
    path = g_strconcat(filename, ".luks2-header", NULL);
    hdr = block_crypto_open_unlocked(path);
    if (!hdr || bdrv_pread(hdr, 0, magic, sizeof(magic), NULL) < 0 ||
        memcmp(magic, luks2_magic, sizeof(magic))) {
        return false;
    }
    io.opaque = hdr;
    /*
     * A LUKS2 header we cannot read may hide one: refuse rather than
     * guess, unless it is an export cut short (cryptsetup writes it in
     * place): the image still starts with the header it copies.
     */
    if (qcrypto_reencrypt_decrypt_state(&io, &state, &size, NULL) < 0 ||
        state == QCRYPTO_REENCRYPT_DECRYPT_NONE) {
        return !block_crypto_decrypt_export_cut_short(hdr, filename);
    }
    /*
     * Exported, init not done (PLAIN): the image is still itself while
     * its own header is there; an init that failed may have overwritten
     * that header already (the moved copy goes to the start of the data
     * file), and then it is neither LUKS nor raw.
     */
    if (state == QCRYPTO_REENCRYPT_DECRYPT_PLAIN) {
        g_autoptr(BlockDriverState) data = block_crypto_open_unlocked(filename);

        return data && (bdrv_pread(data, 0, magic, sizeof(magic), NULL) < 0 ||
                        memcmp(magic, luks2_magic, 6));
    }
    return state == QCRYPTO_REENCRYPT_DECRYPT_RUNNING ||
           state == QCRYPTO_REENCRYPT_DECRYPT_NONE;
}

int block_crypto_check_not_decrypting(BlockDriverState *file, int flags,
                                      Error **errp)
{
    const char *filename = bdrv_get_filename(file);

    if ((flags & BDRV_O_REENCRYPT) ||
        !block_crypto_decrypt_in_progress(filename)) {
        return 0;
    }
    error_setg(errp, "'%s' is being decrypted in place (its header is in "
               "'%s.luks2-header'): finish with 'qemu-img-lite reencrypt "
               "--resume-only --image-opts driver=luks,key-secret=ID,"
               "file.filename=%s' or cryptsetup reencrypt --resume-only "
               "--header %s.luks2-header",
               filename, filename, filename, filename);
    return -1;
}

/*
 * The file's own LUKS2 header (either copy) says it is being re-encrypted.
 * Read through a node of its own when the name opens as a file, so that
 * these reads are not requests of the caller's node (blkdebug counts
 * those); else (another protocol) through file.
 */
static QCryptoReencryptKind
block_crypto_file_reencrypting(BlockDriverState *file)
{
    const char *path = bdrv_get_filename(file);
    g_autoptr(BlockDriverState) own = path && *path ?
        block_crypto_open_unlocked(path) : NULL;
    QCryptoReencryptIO io = {
        .read = block_crypto_decrypt_header_read,
        .opaque = own ? own : file,
    };

    return qcrypto_reencrypt_unfinished_kind(&io);
}

int block_crypto_check_not_reencrypting(BlockDriverState *file, int flags,
                                        Error **errp)
{
    const char *filename = bdrv_get_filename(file);
    QCryptoReencryptKind kind;

    if (block_crypto_check_not_decrypting(file, flags, errp) < 0) {
        return -1;
    }
    if (flags & BDRV_O_REENCRYPT) {
        return 0;
    }
    kind = block_crypto_file_reencrypting(file);
    switch (kind) {
    case QCRYPTO_REENCRYPT_KIND_NONE:
        return 0;
    case QCRYPTO_REENCRYPT_KIND_LUKS1:
        error_setg(errp, "'%s' is being given a new volume key in place "
                   "(LUKS1, by qemu-img-lite): finish with 'qemu-img-lite "
                   "reencrypt --resume-only --image-opts driver=luks,"
                   "key-secret=ID,file.filename=%s'", filename, filename);
        return -1;
    case QCRYPTO_REENCRYPT_KIND_LUKS1_CRYPTSETUP:
        error_setg(errp, "'%s' is being re-encrypted by cryptsetup (LUKS1, "
                   "header marked LUKS\\xde\\xad): finish with 'cryptsetup "
                   "reencrypt %s' in the directory holding its "
                   "LUKS-<UUID>.log", filename, filename);
        return -1;
    default:
        error_setg(errp, "'%s' is being re-encrypted in place (LUKS2 with an "
                   "unfinished re-encryption): finish with 'qemu-img-lite "
                   "reencrypt --resume-only --image-opts driver=luks,"
                   "key-secret=ID,file.filename=%s' or cryptsetup reencrypt "
                   "--resume-only --force-offline-reencrypt %s",
                   filename, filename, filename);
        return -1;
    }
}

/*
 * A LUKS1 or LUKS2 header: its magic and version. An image being
 * decrypted in place is LUKS too, whatever its start now holds: its
 * header is in its default detached header file, next to it; so is one
 * being encrypted whose primary header was not written yet.
 */
static int block_crypto_probe(const uint8_t *buf, int buf_size,
                              const char *filename)
{
    g_autoptr(BlockDriverState) file = NULL;
    QCryptoReencryptIO io = { .read = block_crypto_decrypt_header_read };

    if (qcrypto_block_has_format(QCRYPTO_BLOCK_FORMAT_LUKS, buf, buf_size) ||
        block_crypto_decrypt_in_progress(filename)) {
        return 100;
    }
    /* An encryption stopped before its primary header: the secondary. */
    file = filename && *filename ? block_crypto_open_unlocked(filename)
                                 : NULL;
    io.opaque = file;
    return file && qcrypto_reencrypt_unfinished(&io) ? 100 : 0;
}

/* The secret named by option key ("key-secret", ...). */
int block_crypto_take_secret(GHashTable *opts, const char *key,
                             bool required, bool *has,
                             QCryptoBlockSecret *secret, Error **errp)
{
    g_autofree char *id = qemu_opt_take(opts, key);
    uint8_t *data;
    size_t len;

    if (has) {
        *has = false;
    }
    if (!id) {
        if (required) {
            error_setg(errp, "Parameter '%s' is required for cipher", key);
            return -1;
        }
        return 0;
    }
    if (qcrypto_secret_lookup(id, &data, &len, errp) < 0) {
        return -1;
    }
    secret->data = data;
    secret->len = len;
    if (has) {
        *has = true;
    }
    return 0;
}

static void block_crypto_secret_free(QCryptoBlockSecret *secret)
{
    qcrypto_secret_value_free((uint8_t *)secret->data, secret->len);
    secret->data = NULL;
    secret->len = 0;
}

/*
 * The secret that locks a new image or key slot (key-secret on create,
 * new-secret on amend) must not be empty: data=, or a file=/dev/stdin
 * read to its end already, would lock the data with no passphrase at all.
 * (Opening a slot with an empty passphrase stays allowed: cryptsetup lets
 * one be made on request.)
 */
static int block_crypto_take_new_secret(GHashTable *opts, const char *key,
                                        bool required, bool *has,
                                        QCryptoBlockSecret *secret,
                                        Error **errp)
{
    g_autofree char *id = g_strdup(g_hash_table_lookup(opts, key));

    if (block_crypto_take_secret(opts, key, required, has, secret, errp) < 0) {
        return -1;
    }
    if (id && secret->len == 0) {
        error_setg(errp, "Secret '%s' (%s) is empty: a new key slot needs a "
                   "passphrase of at least one byte", id, key);
        block_crypto_secret_free(secret);
        if (has) {
            *has = false;
        }
        return -1;
    }
    return 0;
}

/*
 * Read the header. For info (BDRV_O_NO_IO), a file that is a header and
 * no payload opens too, as cryptsetup luksDump shows it: one whose
 * payload offset is 0 (a detached header) or past its end (a header
 * backup). It is read as a detached header of no data (size 0, "detached
 * header: true"); the first error stands if that fails as well.
 */
static QCryptoBlock *block_crypto_open_block(BlockDriverState *bs,
                                             QCryptoBlockOpenOptions *o,
                                             unsigned int qflags, int flags,
                                             Error **errp)
{
    BlockCrypto *s = bs->opaque;
    BlockDriverState *hdr = s->detached ? s->header : bs->file;
    Error *err = NULL;
    QCryptoBlock *block;

    block = qcrypto_block_open(o, block_crypto_header_read, hdr, qflags,
                               &err);
    if (block || s->detached || !(flags & BDRV_O_NO_IO)) {
        error_propagate(errp, err);
        return block;
    }
    block = qcrypto_block_open(o, block_crypto_header_read, hdr,
                               qflags | QCRYPTO_BLOCK_OPEN_DETACHED, NULL);
    if (!block) {
        error_propagate(errp, err);
        return NULL;
    }
    error_free(err);
    s->header_only = true;
    return block;
}

/*
 * reencrypt=on: serve the image while it gets a new volume key, started
 * here or resumed (block/crypto-online.c); the run's thread starts with
 * block_crypto_online_start_node().
 */
static int block_crypto_open_online(BlockDriverState *bs, GHashTable *opts,
                                    int flags, Error **errp)
{
    BlockCrypto *s = bs->opaque;
    QCryptoBlockSecret secret = { 0 };

    if (!(flags & BDRV_O_RDWR) || (flags & BDRV_O_NO_IO)) {
        error_setg(errp, "reencrypt=on needs the image opened for writing");
        return -1;
    }
    if (bdrv_opts_has_child(opts, "header")) {
        error_setg(errp, "reencrypt=on does not take a detached header");
        return -1;
    }
    if (block_crypto_check_not_decrypting(bs->file, flags, errp) < 0 ||
        block_crypto_take_secret(opts, "key-secret", true, NULL, &secret,
                                 errp) < 0) {
        return -1;
    }
    s->online = block_crypto_online_open(bs->file, opts, &secret, errp);
    block_crypto_secret_free(&secret);
    if (!s->online) {
        return -1;
    }
    s->sector_size = block_crypto_online_sector_size(s->online);
    bs->request_alignment = s->sector_size;
    return 0;
}

bool block_crypto_online_node(const BlockDriverState *bs)
{
    return bs && bs->drv == &bdrv_luks &&
           ((const BlockCrypto *)bs->opaque)->online;
}

bool block_crypto_online_start_node(BlockDriverState *bs,
                                    BlockCryptoOnlineProgress *progress,
                                    void *opaque)
{
    BlockCrypto *s;

    if (!bs || bs->drv != &bdrv_luks) {
        return false;
    }
    s = bs->opaque;
    if (!s->online) {
        return false;
    }
    block_crypto_online_start(s->online, progress, opaque);
    return true;
}

static int block_crypto_open(BlockDriverState *bs, GHashTable *opts, int flags,
                             Error **errp)
{
    BlockCrypto *s = bs->opaque;
    QCryptoBlockOpenOptions open_opts = {
        .format = QCRYPTO_BLOCK_FORMAT_LUKS,
    };
    unsigned int qflags = 0;
    int64_t hdr_len, file_len;
    bool online;
    int ret = -1;

    if (qemu_opt_take_bool(opts, "reencrypt", false, &online, errp) < 0) {
        return -1;
    }
    if (online) {
        return block_crypto_open_online(bs, opts, flags, errp);
    }
    /* First: no secret or header can make such an image readable. */
    if (block_crypto_check_not_reencrypting(bs->file, flags, errp) < 0) {
        return -1;
    }
    if (block_crypto_take_secret(opts, "key-secret", !(flags & BDRV_O_NO_IO),
                                 NULL, &open_opts.secret, errp) < 0) {
        return -1;
    }
    /* Raises (or lowers) the PBKDF2 cost we agree to compute: docs/luks.md */
    if (qemu_opt_take_uint(opts, "max-pbkdf2-iterations", 0,
                           &open_opts.max_pbkdf2_iterations, errp) < 0) {
        block_crypto_secret_free(&open_opts.secret);
        return -1;
    }
    if (flags & BDRV_O_NO_IO) {
        qflags |= QCRYPTO_BLOCK_OPEN_NO_IO;
    }

    if (bdrv_opts_has_child(opts, "header")) {
        s->header = bdrv_open_child(opts, "header", flags, false, errp);
        if (!s->header) {
            goto out;
        }
        bdrv_attach_child(bs, s->header, "header", BDRV_CHILD_METADATA);
        s->detached = true;
        qflags |= QCRYPTO_BLOCK_OPEN_DETACHED;
    }
    hdr_len = bdrv_getlength_exact(s->detached ? s->header : bs->file, errp);
    if (hdr_len < 0) {
        goto out;
    }
    open_opts.size = hdr_len;

    s->block = block_crypto_open_block(bs, &open_opts, qflags, flags, errp);
    if (!s->block) {
        goto out;
    }
    s->payload_offset = qcrypto_block_get_payload_offset(s->block);
    s->data_size = qcrypto_block_get_data_size(s->block);
    s->sector_size = qcrypto_block_get_sector_size(s->block);
    bs->request_alignment = s->sector_size;

    file_len = bdrv_getlength_exact(bs->file, errp);
    if (file_len < 0) {
        goto out;
    }
    if (!s->header_only && (uint64_t)file_len < s->payload_offset) {
        error_setg(errp, "The LUKS payload starts at offset %" G_GUINT64_FORMAT
                   ", beyond the end of '%s' (%" G_GINT64_FORMAT " bytes)",
                   s->payload_offset, bdrv_get_filename(bs->file), file_len);
        goto out;
    }
    ret = 0;

out:
    block_crypto_secret_free(&open_opts.secret);
    if (ret < 0) {
        /* A failed open is not closed by the caller: undo it here. */
        g_clear_pointer(&s->block, qcrypto_block_free);
    }
    return ret;
}

static void block_crypto_close(BlockDriverState *bs)
{
    BlockCrypto *s = bs->opaque;

    if (s->online) {
        block_crypto_online_close(g_steal_pointer(&s->online));
        return;
    }
    qcrypto_block_free(s->block);
}

/* Read and decrypt whole sectors [offset, offset + bytes) into buf. */
static int block_crypto_read_sectors(BlockDriverState *bs, uint64_t offset,
                                     uint8_t *buf, size_t bytes, Error **errp)
{
    BlockCrypto *s = bs->opaque;
    BlockDriverState *file = bs->file;

    if (s->online) {
        return block_crypto_online_pread(s->online, offset, buf, bytes, errp);
    }
    /* The file may end inside the last sector: the rest reads as zeroes. */
    if (bdrv_pread(file, s->payload_offset + offset, buf, bytes,
                   errp) < 0) {
        return -1;
    }
    return qcrypto_block_decrypt(s->block, offset, buf, bytes, errp);
}

/* Encrypt (in place) and write whole sectors. */
static int block_crypto_write_sectors(BlockDriverState *bs, uint64_t offset,
                                      uint8_t *buf, size_t bytes, Error **errp)
{
    BlockCrypto *s = bs->opaque;
    BlockDriverState *file = bs->file;

    if (s->online) {
        return block_crypto_online_pwrite(s->online, offset, buf, bytes,
                                          errp);
    }
    if (qcrypto_block_encrypt(s->block, offset, buf, bytes, errp) < 0) {
        return -1;
    }
    return bdrv_pwrite(file, s->payload_offset + offset, buf,
                       bytes, 0, errp);
}

/*
 * Whole sectors only (bs->request_alignment): block/io.c splits and
 * patches other requests.
 */
static int block_crypto_pread(BlockDriverState *bs, uint64_t offset, void *buf,
                              size_t bytes, Error **errp)
{
    return block_crypto_read_sectors(bs, offset, buf, bytes, errp);
}

static int block_crypto_pwrite(BlockDriverState *bs, uint64_t offset,
                               const void *buf, size_t bytes, int flags,
                               Error **errp)
{
    g_autofree uint8_t *bounce = NULL;
    const uint8_t *in = buf;

    /*
     * The convert loop's case: the caller gave the buffer away
     * (BDRV_REQ_MAY_CLOBBER), so encrypt it in place, no copy.
     */
    if (flags & BDRV_REQ_MAY_CLOBBER) {
        return block_crypto_write_sectors(bs, offset, (uint8_t *)buf, bytes,
                                          errp);
    }
    /* Else the caller's bytes stay as they are: encrypt a copy. */
    bounce = g_malloc(MIN(bytes, BDRV_BOUNCE_SIZE));
    while (bytes) {
        size_t n = MIN(bytes, BDRV_BOUNCE_SIZE);

        memcpy(bounce, in, n);
        if (block_crypto_write_sectors(bs, offset, bounce, n, errp) < 0) {
            return -1;
        }
        in += n;
        offset += n;
        bytes -= n;
    }
    return 0;
}

static int64_t block_crypto_getlength(BlockDriverState *bs, Error **errp)
{
    BlockCrypto *s = bs->opaque;
    int64_t len;

    if (s->online) {
        return block_crypto_online_size(s->online);
    }
    len = bdrv_getlength_exact(bs->file, errp);
    if (len < 0) {
        return -1;
    }
    if (s->header_only) {
        return 0;
    }
    len -= s->payload_offset;           /* checked at open: not negative */
    /* A size the header fixes ends the data before the file ends. */
    return s->data_size ? (int64_t)MIN((uint64_t)len, s->data_size) : len;
}

static int block_crypto_truncate(BlockDriverState *bs, uint64_t size,
                                 PreallocMode prealloc, Error **errp)
{
    BlockCrypto *s = bs->opaque;

    /*
     * Whole encryption sectors only (docs/luks.md, "Size rounding"): a
     * partial last sector could not be read or written, and cryptsetup
     * refuses such a device. Up, as QEMU reports a partial one.
     */
    if (s->online) {
        error_setg(errp, "The image is being re-encrypted (reencrypt=on): "
                   "it cannot be resized meanwhile");
        return -1;
    }
    size = qcrypto_block_round_to_sectors(size, s->sector_size);
    if (s->data_size) {
        error_setg(errp, "The LUKS2 header fixes the data size at %" G_GUINT64_FORMAT
                   " bytes (a segment of fixed size, or the size an "
                   "in-place encryption recorded: 'qemu-img-lite reencrypt "
                   "--resume-only' ends that): it cannot be resized",
                   s->data_size);
        return -1;
    }
    return bdrv_truncate(bs->file, s->payload_offset + size, prealloc, errp);
}

static const char *block_crypto_get_warning(BlockDriverState *bs)
{
    BlockCrypto *s = bs->opaque;

    return s->block ? qcrypto_block_get_warning(s->block) : NULL;
}

static bool block_crypto_is_encrypted(BlockDriverState *bs)
{
    return true;
}

static int block_crypto_get_info(BlockDriverState *bs, BlockImageInfo *info,
                                 Error **errp)
{
    BlockCrypto *s = bs->opaque;

    if (s->online) {
        error_setg(errp, "The image is being re-encrypted (reencrypt=on)");
        return -1;
    }
    info->luks = qcrypto_block_get_info(s->block, errp);
    return info->luks ? 0 : -1;
}

/* kdf=, kdf-memory=, kdf-parallel= (LUKS2 key slots; 0: the default) */
static int block_crypto_take_kdf_opts(GHashTable *opts, bool *has_kdf,
                                      QCryptoBlockKDF *kdf, uint32_t *memory,
                                      uint32_t *parallel, Error **errp)
{
    g_autofree char *name = qemu_opt_take(opts, "kdf");
    uint64_t mem, par;

    if (name) {
        int k = qcrypto_block_kdf_parse(name);

        if (k < 0) {
            error_setg(errp, "Invalid parameter '%s' for 'kdf' (use pbkdf2, "
                       "argon2i or argon2id)", name);
            return -1;
        }
        *has_kdf = true;
        *kdf = k;
    }
    if (qemu_opt_take_uint(opts, "kdf-memory", 0, &mem, errp) < 0 ||
        qemu_opt_take_uint(opts, "kdf-parallel", 0, &par, errp) < 0) {
        return -1;
    }
    if (mem > G_MAXUINT32 || par > G_MAXUINT32) {
        error_setg(errp, "Parameter 'kdf-memory' or 'kdf-parallel' is too "
                   "large");
        return -1;
    }
    *memory = mem;
    *parallel = par;
    return 0;
}

/*
 * The LUKS2 creation options (see docs/luks2.md). The label string is
 * kept in copts->label: free it with block_crypto_create_opts_clear().
 */
static int
block_crypto_take_luks2_create_opts(GHashTable *opts,
                                    QCryptoBlockCreateOptions *copts,
                                    Error **errp)
{
    uint64_t version, sector_size;

    if (qemu_opt_take_uint(opts, "luks-version", 1, &version, errp) < 0 ||
        qemu_opt_take_uint(opts, "sector-size", 0, &sector_size, errp) < 0) {
        return -1;
    }
    if (version != 1 && version != 2) {
        error_setg(errp, "Invalid parameter '%" G_GUINT64_FORMAT "' for "
                   "'luks-version' (use 1 or 2)", version);
        return -1;
    }
    if (sector_size > G_MAXUINT32) {
        error_setg(errp, "Invalid sector size %" G_GUINT64_FORMAT,
                   sector_size);
        return -1;
    }
    copts->luks_version = version;
    copts->sector_size = sector_size;
    copts->label = qemu_opt_take(opts, "label");
    return block_crypto_take_kdf_opts(opts, &copts->has_kdf, &copts->kdf,
                                      &copts->kdf_memory,
                                      &copts->kdf_parallel, errp);
}

static void block_crypto_create_opts_clear(QCryptoBlockCreateOptions *copts)
{
    block_crypto_secret_free(&copts->secret);
    g_free((char *)copts->label);
    copts->label = NULL;
}

/*
 * The creation options (-o) of a LUKS image, as QEMU names them. Takes
 * them from opts; *secret (if asked for) must be freed with
 * block_crypto_secret_free().
 */
static int
block_crypto_take_create_opts_inner(GHashTable *opts,
                                    QCryptoBlockCreateOptions *copts,
                                    bool need_secret, Error **errp)
{
    static const struct {
        const char *key;
        int (*parse)(const char *);
    } enums[] = {
        { "cipher-alg", qcrypto_cipher_algo_parse },
        { "cipher-mode", qcrypto_cipher_mode_parse },
        { "ivgen-alg", qcrypto_ivgen_algo_parse },
        { "ivgen-hash-alg", qcrypto_hash_algo_parse },
        { "hash-alg", qcrypto_hash_algo_parse },
    };
    int values[G_N_ELEMENTS(enums)];
    bool given[G_N_ELEMENTS(enums)];
    bool has_iter_time = g_hash_table_contains(opts, "iter-time");

    memset(copts, 0, sizeof(*copts));
    qcrypto_block_create_options_init(copts);
    copts->format = QCRYPTO_BLOCK_FORMAT_LUKS;

    for (size_t i = 0; i < G_N_ELEMENTS(enums); i++) {
        g_autofree char *str = qemu_opt_take(opts, enums[i].key);

        given[i] = str != NULL;
        if (str) {
            values[i] = enums[i].parse(str);
            if (values[i] < 0) {
                error_setg(errp, "Invalid parameter '%s' for '%s'", str,
                           enums[i].key);
                return -1;
            }
        }
    }
    if (given[0]) {
        copts->cipher_alg = values[0];
    }
    if (given[1]) {
        copts->cipher_mode = values[1];
    }
    if (given[2]) {
        copts->ivgen_alg = values[2];
    }
    if (given[3]) {
        copts->has_ivgen_hash_alg = true;
        copts->ivgen_hash_alg = values[3];
    }
    if (given[4]) {
        copts->hash_alg = values[4];
    }

    if (block_crypto_take_luks2_create_opts(opts, copts, errp) < 0 ||
        qemu_opt_take_uint(opts, "iter-time", copts->iter_time,
                           &copts->iter_time, errp) < 0 ||
        qemu_opt_take_bool(opts, "detached-header", false,
                           &copts->detached_header, errp) < 0 ||
        qemu_opt_take_uint(opts, "align-payload", 0, &copts->align_payload,
                           errp) < 0) {
        return -1;
    }
    copts->has_iter_time = has_iter_time;
    /* need_secret: a new image (measure does not use the secret). */
    if (need_secret) {
        return block_crypto_take_new_secret(opts, "key-secret", true, NULL,
                                            &copts->secret, errp);
    }
    return block_crypto_take_secret(opts, "key-secret", false, NULL,
                                    &copts->secret, errp);
}

/* On failure nothing is left to free in copts. */
static int block_crypto_take_create_opts(GHashTable *opts,
                                         QCryptoBlockCreateOptions *copts,
                                         bool need_secret, Error **errp)
{
    if (block_crypto_take_create_opts_inner(opts, copts, need_secret,
                                            errp) < 0) {
        block_crypto_create_opts_clear(copts);
        return -1;
    }
    return 0;
}

typedef struct LUKSCreateState {
    BlockDriverState *file;
    uint64_t size;
    uint64_t payload;       /* size in whole sectors: see docs/luks.md */
    PreallocMode prealloc;
    bool detached;
} LUKSCreateState;

/* Write zeroes over [0, len) of file as data (see write_whole_header). */
static int block_crypto_fill_header_area(BlockDriverState *file,
                                         uint64_t len, Error **errp)
{
    const size_t chunk = 1024 * 1024;
    g_autofree uint8_t *zeroes = g_malloc0(chunk);

    for (uint64_t off = 0; off < len; off += chunk) {
        if (bdrv_pwrite(file, off, zeroes, MIN(chunk, len - off), 0,
                        errp) < 0) {
            return -1;
        }
    }
    return 0;
}

/* The header is about to be written: make the file its final size. */
static int block_crypto_create_init(QCryptoBlock *block, uint64_t headerlen,
                                    void *opaque, Error **errp)
{
    LUKSCreateState *cs = opaque;
    uint64_t size;

    /* A detached header file holds the header only: no payload. */
    size = cs->detached ? headerlen : headerlen + cs->payload;

    if (bdrv_create_fit(cs->file, size, cs->prealloc, errp) < 0) {
        return -1;
    }
    if (cs->file->drv->write_whole_header) {
        return block_crypto_fill_header_area(cs->file, headerlen, errp);
    }
    return 0;
}

static int block_crypto_create_write(QCryptoBlock *block, uint64_t offset,
                                     const uint8_t *buf, size_t buflen,
                                     void *opaque, Error **errp)
{
    LUKSCreateState *cs = opaque;

    return block_crypto_header_write(block, offset, buf, buflen, cs->file,
                                     errp);
}

/*
 * A size that is not whole sectors was padded: the padding must read as
 * zeroes (so that compare with the source passes), not as the decryption
 * of whatever the file held. It lies in the last sector, which a new image
 * has no data in yet: write it as encrypted zeroes.
 */
static int block_crypto_create_zero_padding(QCryptoBlock *block,
                                            LUKSCreateState *cs, Error **errp)
{
    uint64_t sector_size = qcrypto_block_get_sector_size(block);
    uint64_t last = cs->payload - sector_size;
    g_autofree uint8_t *buf = NULL;

    if (cs->detached || cs->payload == cs->size) {
        return 0;
    }
    buf = g_malloc0(sector_size);
    if (qcrypto_block_encrypt(block, last, buf, sector_size, errp) < 0) {
        return -1;
    }
    return bdrv_pwrite(cs->file, qcrypto_block_get_payload_offset(block) +
                       last, buf, sector_size, 0, errp);
}

static int block_crypto_create(BlockDriverState *file, GHashTable *opts,
                               int flags, BlockDriverState **pbs,
                               Error **errp)
{
    QCryptoBlockCreateOptions copts;
    LUKSCreateState cs = { .file = file };
    g_autoptr(QCryptoBlock) block = NULL;
    BlockCrypto *s;
    int ret = -1;

    if (qemu_opt_take_size(opts, "size", 0, &cs.size, errp) < 0 ||
        bdrv_create_take_prealloc(opts, &cs.prealloc, errp) < 0 ||
        block_crypto_take_create_opts(opts, &copts, true, errp) < 0) {
        return -1;
    }
    cs.detached = copts.detached_header;
    copts.size = cs.size;
    cs.payload = qcrypto_block_create_payload_size(&copts);
    if (cs.detached && pbs) {
        error_setg(errp, "A detached header cannot be written here: create "
                   "it with 'create', then write the data with 'convert -n' "
                   "and --target-image-opts");
        goto out;
    }
    if (bdrv_create_check_leftovers(opts, errp) < 0) {
        goto out;
    }
    block = qcrypto_block_create(&copts, block_crypto_create_init,
                                 block_crypto_create_write, &cs, errp);
    if (!block || block_crypto_create_zero_padding(block, &cs, errp) < 0 ||
        bdrv_flush(cs.file, errp) < 0) {
        goto out;
    }
    ret = 0;
    if (!pbs) {
        goto out;
    }
    /* Hand over the image with the master key just made. */
    *pbs = bdrv_new_node(&bdrv_luks, cs.file, BDRV_O_RDWR | flags);
    s = (*pbs)->opaque;
    s->block = g_steal_pointer(&block);
    s->payload_offset = qcrypto_block_get_payload_offset(s->block);
    s->sector_size = qcrypto_block_get_sector_size(s->block);
    (*pbs)->request_alignment = s->sector_size;

out:
    block_crypto_create_opts_clear(&copts);
    return ret;
}

static int block_crypto_measure(GHashTable *opts, BlockDriverState *in_bs,
                                uint64_t size, BlockMeasureInfo *info,
                                Error **errp)
{
    QCryptoBlockCreateOptions copts;
    PreallocMode prealloc;
    uint64_t header;
    int ret = -1;

    /* The layout does not depend on the passphrase: it is not needed. */
    if (bdrv_create_take_prealloc(opts, &prealloc, errp) < 0 ||
        block_crypto_take_create_opts(opts, &copts, false, errp) < 0) {
        return -1;
    }
    if (bdrv_create_check_leftovers(opts, errp) < 0 ||
        qcrypto_block_calculate_payload_offset(&copts, &header, errp) < 0) {
        goto out;
    }
    /* The header plus the payload as create makes it (whole sectors). */
    copts.size = size;
    info->required = info->fully_allocated =
        header + qcrypto_block_create_payload_size(&copts);
    ret = 0;

out:
    block_crypto_create_opts_clear(&copts);
    return ret;
}

static int block_crypto_take_amend_opts(GHashTable *opts,
                                        QCryptoBlockAmendOptions *aopts,
                                        Error **errp)
{
    g_autofree char *state = qemu_opt_take(opts, "state");
    uint64_t keyslot;

    memset(aopts, 0, sizeof(*aopts));
    if (!state) {
        error_setg(errp, "Parameter 'state' is required");
        return -1;
    }
    if (g_str_equal(state, "active")) {
        aopts->state = QCRYPTO_BLOCK_AMEND_STATE_ACTIVE;
    } else if (g_str_equal(state, "inactive")) {
        aopts->state = QCRYPTO_BLOCK_AMEND_STATE_INACTIVE;
    } else {
        error_setg(errp, "Parameter 'state' does not accept value '%s' "
                   "(use active or inactive)", state);
        return -1;
    }
    if (g_hash_table_contains(opts, "keyslot")) {
        if (qemu_opt_take_uint(opts, "keyslot", 0, &keyslot, errp) < 0) {
            return -1;
        }
        if (keyslot > G_MAXINT) {
            error_setg(errp, "Invalid keyslot %" G_GUINT64_FORMAT, keyslot);
            return -1;
        }
        aopts->has_keyslot = true;
        aopts->keyslot = keyslot;
    }
    if (g_hash_table_contains(opts, "iter-time")) {
        aopts->has_iter_time = true;
        if (qemu_opt_take_uint(opts, "iter-time", 0, &aopts->iter_time,
                               errp) < 0) {
            return -1;
        }
    }
    if (block_crypto_take_kdf_opts(opts, &aopts->has_kdf, &aopts->kdf,
                                   &aopts->kdf_memory, &aopts->kdf_parallel,
                                   errp) < 0) {
        return -1;
    }
    if (block_crypto_take_secret(opts, "old-secret", false,
                                 &aopts->has_old_secret, &aopts->old_secret,
                                 errp) < 0 ||
        block_crypto_take_new_secret(opts, "new-secret", false,
                                     &aopts->has_new_secret,
                                     &aopts->new_secret, errp) < 0) {
        return -1;
    }
    return 0;
}

static int block_crypto_amend(BlockDriverState *bs, GHashTable *opts,
                              bool force, BdrvAmendStatusCB *status_cb,
                              void *cb_opaque, Error **errp)
{
    BlockCrypto *s = bs->opaque;
    QCryptoBlockAmendOptions aopts;
    g_autofree char *unknown = NULL;
    int ret = -1;

    if (block_crypto_take_amend_opts(opts, &aopts, errp) < 0) {
        goto out;
    }
    unknown = qemu_opts_first_key(opts);
    if (unknown) {
        error_setg(errp, "Invalid parameter '%s'", unknown);
        goto out;
    }
    if (s->online) {
        error_setg(errp, "The image is being re-encrypted (reencrypt=on): "
                   "its key slots cannot be changed meanwhile");
        goto out;
    }
    ret = qcrypto_block_amend_options(s->block, block_crypto_header_read,
                                      block_crypto_header_write,
                                      block_crypto_header_flush,
                                      s->detached ? s->header : bs->file,
                                      &aopts, force, errp);
out:
    block_crypto_secret_free(&aopts.old_secret);
    block_crypto_secret_free(&aopts.new_secret);
    return ret;
}

/* For the formats with LUKS inside (qcow2's encrypt.* options). */
int block_crypto_take_luks_create_opts(GHashTable *opts,
                                       QCryptoBlockCreateOptions *copts,
                                       bool need_secret, Error **errp)
{
    return block_crypto_take_create_opts(opts, copts, need_secret, errp);
}

void block_crypto_clear_luks_create_opts(QCryptoBlockCreateOptions *copts)
{
    block_crypto_create_opts_clear(copts);
}

int block_crypto_take_luks_amend_opts(GHashTable *opts,
                                      QCryptoBlockAmendOptions *aopts,
                                      Error **errp)
{
    return block_crypto_take_amend_opts(opts, aopts, errp);
}

void block_crypto_clear_luks_amend_opts(QCryptoBlockAmendOptions *aopts)
{
    block_crypto_secret_free(&aopts->old_secret);
    block_crypto_secret_free(&aopts->new_secret);
}

/*
 * "-o help": qemu-img's options in its words, then ours (LUKS2, detached
 * headers, payload alignment: docs/luks.md, docs/luks2.md).
 */
static const BlockOptionDesc block_crypto_create_opts[] = {
    { "size", "size", "Virtual disk size" },
    { "key-secret", "str",
      "ID of the secret that provides the keyslot passphrase" },
    { "cipher-alg", "str", "Name of encryption cipher algorithm" },
    { "cipher-mode", "str", "Name of encryption cipher mode" },
    { "ivgen-alg", "str", "Name of IV generator algorithm" },
    { "ivgen-hash-alg", "str", "Name of IV generator hash algorithm" },
    { "hash-alg", "str", "Name of encryption hash algorithm" },
    { "iter-time", "num", "Time to spend in PBKDF in milliseconds" },
    { "luks-version", "num", "LUKS version: 1 (default, as qemu-img) or 2 "
      "(as cryptsetup 2.x)" },
    { "sector-size", "num", "LUKS2 encryption sector size in bytes: 512, "
      "1024, 2048 or 4096 (default: 4096 where the size is whole 4096-byte "
      "sectors, else 512)" },
    { "label", "str", "LUKS2 label" },
    { "kdf", "str", "LUKS2 key slot PBKDF: pbkdf2, argon2i or argon2id "
      "(default)" },
    { "kdf-memory", "num", "LUKS2 argon2 memory cost in KiB, 32 to 4194304 "
      "(default 1048576)" },
    { "kdf-parallel", "num", "LUKS2 argon2 threads, at most 16 (default: "
      "min(4, CPUs))" },
    { "detached-header", "bool (on/off)", "Create a LUKS header only, to be "
      "used as the 'header' child of an image whose data lives in another "
      "file" },
    { "align-payload", "num", "Align the LUKS payload to this many 512-byte "
      "sectors, as cryptsetup (2048 = 1 MiB; default: QEMU's layout)" },
    { NULL }
};

/* "-o help" for amend (qemu-img's words). */
static const BlockOptionDesc block_crypto_amend_opts[] = {
    { "state", "str",
      "Select new state of affected keyslots (active/inactive)" },
    { "keyslot", "num", "Select a single keyslot to modify explicitly" },
    { "old-secret", "str", "Select all keyslots that match this password" },
    { "new-secret", "str", "New secret to set in the matching keyslots. "
      "Empty string to erase" },
    { "iter-time", "num", "Time to spend in PBKDF in milliseconds" },
    { "kdf", "str", "LUKS2: the new key slot's PBKDF: pbkdf2, argon2i or "
      "argon2id (default)" },
    { "kdf-memory", "num", "LUKS2 argon2 memory cost in KiB, 32 to 4194304 "
      "(default 1048576)" },
    { "kdf-parallel", "num", "LUKS2 argon2 threads, at most 16 (default: "
      "min(4, CPUs))" },
    { NULL }
};

const BlockDriver bdrv_luks = {
    .format_name = "luks",
    .instance_size = sizeof(BlockCrypto),
    .bdrv_probe = block_crypto_probe,
    .bdrv_open = block_crypto_open,
    .bdrv_close = block_crypto_close,
    .bdrv_pread = block_crypto_pread,
    .bdrv_pwrite = block_crypto_pwrite,
    .bdrv_getlength = block_crypto_getlength,
    .bdrv_truncate = block_crypto_truncate,
    .bdrv_is_encrypted = block_crypto_is_encrypted,
    .bdrv_get_warning = block_crypto_get_warning,
    .bdrv_create = block_crypto_create,
    .bdrv_measure = block_crypto_measure,
    .bdrv_get_info = block_crypto_get_info,
    .bdrv_amend = block_crypto_amend,
    .create_opts = block_crypto_create_opts,
    .amend_opts = block_crypto_amend_opts,
};
