/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The LUKS1 format driver: unlocking key slots, creating images, adding
 * and erasing key slots (QEMU's crypto/block-luks.c does the same job).
 *
 * A key slot holds the master key, spread by the AF splitter over 4000
 * stripes and encrypted with a key derived from a passphrase by PBKDF2
 * (the spec's "key slot" operations). The master key is recognised by its
 * PBKDF2 digest in the header. The header parsing and validation live in
 * block-luks-header.c; nothing here runs before the header passed it.
 */
#include <inttypes.h>
#include <string.h>

#include <nettle/memops.h>

#include "blockpriv.h"
#include "crypto/afsplit.h"
#include "crypto/pbkdf.h"
#include "crypto/random.h"
#include "crypto/secure-mem.h"
#include "lukspriv.h"

/* QEMU's and cryptsetup's default PBKDF2 time per key slot. */
#define LUKS_DEFAULT_ITER_TIME_MS 2000

/*
 * The master key digest costs iter-time / 8: with all 8 slots in use,
 * trying them all costs about one slot's time more (cryptsetup's and
 * QEMU's rule).
 */
#define LUKS_MK_DIGEST_ITER_DIVISOR 8

typedef struct QCryptoBlockLUKS {
    QCryptoLUKSHeader header;
    QCryptoLUKSCipherSpec spec;
} QCryptoBlockLUKS;

static const uint8_t *qcrypto_block_luks_secret_data(
    const QCryptoBlockSecret *secret)
{
    /* An empty passphrase is legal; PBKDF2 still wants a pointer. */
    return secret->data ? secret->data : (const uint8_t *)"";
}

/*
 * Encrypt or decrypt key material (len bytes, whole sectors) under a slot
 * key, with the payload's cipher spec and sector numbers counted from 0
 * at the start of the slot's key material (the spec, 1.1.1 onwards, makes
 * the IV reference point explicit).
 */
static int qcrypto_block_luks_key_material_crypt(
    const QCryptoLUKSCipherSpec *spec, const uint8_t *key, size_t nkey,
    uint8_t *buf, size_t len, bool encrypt, Error **errp)
{
    QCryptoSectorCipherSpec sspec = qcrypto_luks_sector_spec(spec);
    g_autoptr(QCryptoSectorCipher) sc =
        qcrypto_sector_cipher_new(&sspec, key, nkey, QCRYPTO_LUKS_SECTOR_SIZE,
                                  0, 0, errp);

    if (!sc) {
        return -1;
    }
    return encrypt ?
        qcrypto_sector_cipher_encrypt(sc, 0, buf, len, errp) :
        qcrypto_sector_cipher_decrypt(sc, 0, buf, len, errp);
}

/*
 * Try one active slot: 1 if secret unlocks it (mk then holds the master
 * key), 0 if it does not, -1 on an error that is not a wrong passphrase.
 */
static int qcrypto_block_luks_keyslot_unlock(QCryptoBlock *block,
                                             const QCryptoLUKSHeader *hdr,
                                             const QCryptoLUKSCipherSpec *spec,
                                             int i,
                                             const QCryptoBlockSecret *secret,
                                             QCryptoBlockReadFunc readfunc,
                                             void *opaque, uint8_t *mk,
                                             Error **errp)
{
    const QCryptoLUKSKeySlot *slot = &hdr->slots[i];
    QCryptoHashAlgo hash = spec->hash_alg;
    size_t nkey = hdr->key_bytes;
    g_autoptr(QCryptoSecureBuf) slotkey = qcrypto_secure_buf_new(nkey);
    g_autoptr(QCryptoSecureBuf) candidate = qcrypto_secure_buf_new(nkey);
    g_autoptr(QCryptoSecureBuf) split = qcrypto_secure_buf_new(
        qcrypto_luks_key_material_len(nkey, slot->stripes));
    uint8_t digest[QCRYPTO_LUKS_DIGEST_LEN];

    /* Above the limit: never computed (the caller says so if none opens) */
    if (!qcrypto_block_pbkdf2_within_limit(block, slot->iterations)) {
        return 0;
    }
    if (!qcrypto_block_pbkdf2_within_limit(block, hdr->mk_digest_iter)) {
        qcrypto_block_digest_limit_error(block, "LUKS master key digest",
                                         hdr->mk_digest_iter, errp);
        return -1;
    }
    if (qcrypto_pbkdf2(hash, qcrypto_block_luks_secret_data(secret),
                       secret->len, slot->salt, QCRYPTO_LUKS_SALT_LEN,
                       slot->iterations, slotkey->data, nkey, errp) < 0) {
        return -1;
    }
    if (readfunc(block, (uint64_t)slot->key_offset * QCRYPTO_LUKS_SECTOR_SIZE,
                 split->data, split->len, opaque, errp) < 0) {
        error_prepend(errp, "Cannot read key slot %d: ", i);
        return -1;
    }
    if (qcrypto_block_luks_key_material_crypt(spec, slotkey->data, nkey,
                                              split->data, split->len, false,
                                              errp) < 0 ||
        qcrypto_afsplit_decode(hash, nkey, slot->stripes, split->data,
                               candidate->data, errp) < 0 ||
        qcrypto_pbkdf2(hash, candidate->data, nkey, hdr->mk_digest_salt,
                       QCRYPTO_LUKS_SALT_LEN, hdr->mk_digest_iter, digest,
                       sizeof(digest), errp) < 0) {
        return -1;
    }
    /* Constant time, so the comparison tells nothing about the key. */
    if (!memeql_sec(digest, hdr->mk_digest, QCRYPTO_LUKS_DIGEST_LEN)) {
        return 0;
    }
    memcpy(mk, candidate->data, nkey);
    return 1;
}

/* The first active slot secret unlocks, or -1. */
static int qcrypto_block_luks_unlock(QCryptoBlock *block,
                                     const QCryptoLUKSHeader *hdr,
                                     const QCryptoLUKSCipherSpec *spec,
                                     const QCryptoBlockSecret *secret,
                                     QCryptoBlockReadFunc readfunc,
                                     void *opaque, uint8_t *mk, Error **errp)
{
    uint32_t skipped = 0;

    for (int i = 0; i < QCRYPTO_LUKS_NUM_KEY_SLOTS; i++) {
        const QCryptoLUKSKeySlot *slot = &hdr->slots[i];
        int ret;

        if (slot->active != QCRYPTO_LUKS_KEY_SLOT_ACTIVE) {
            continue;
        }
        if (!qcrypto_block_pbkdf2_within_limit(block, slot->iterations)) {
            skipped |= 1u << i;
            continue;
        }
        ret = qcrypto_block_luks_keyslot_unlock(block, hdr, spec, i, secret,
                                                readfunc, opaque, mk, errp);
        if (ret != 0) {
            return ret < 0 ? -1 : i;
        }
    }
    qcrypto_block_unlock_error(block, skipped, errp);
    return -1;
}

static int qcrypto_block_luks_header_read(QCryptoBlock *block,
                                          QCryptoBlockReadFunc readfunc,
                                          void *opaque, uint64_t file_size,
                                          QCryptoLUKSHeader *hdr, Error **errp)
{
    uint8_t buf[QCRYPTO_LUKS_HEADER_LEN];

    if (file_size && file_size < QCRYPTO_LUKS_HEADER_LEN) {
        error_setg(errp, "File of %" PRIu64 " bytes is too small for a "
                   "LUKS header (%d bytes)", file_size,
                   QCRYPTO_LUKS_HEADER_LEN);
        return -1;
    }
    if (readfunc(block, 0, buf, sizeof(buf), opaque, errp) < 0) {
        error_prepend(errp, "Cannot read the LUKS header: ");
        return -1;
    }
    qcrypto_luks_header_decode(buf, hdr);
    return 0;
}

/*
 * The header has one copy: with flushfunc, what was written before it (a
 * new slot's key material) is flushed first, and the header after it
 * (cryptsetup's order), so that a slot is never enabled over material
 * that is not on disk, and a disabled slot's material is wiped only once
 * the header no longer names it. NULL: a new image, not yet named.
 */
static int qcrypto_block_luks_header_write(QCryptoBlock *block,
                                           QCryptoBlockLUKS *luks,
                                           QCryptoBlockWriteFunc writefunc,
                                           QCryptoBlockFlushFunc flushfunc,
                                           void *opaque, Error **errp)
{
    uint8_t buf[QCRYPTO_LUKS_HEADER_LEN];

    qcrypto_luks_header_encode(&luks->header, buf);
    if (qcrypto_block_flush(block, flushfunc, opaque, errp) < 0 ||
        writefunc(block, 0, buf, sizeof(buf), opaque, errp) < 0 ||
        qcrypto_block_flush(block, flushfunc, opaque, errp) < 0) {
        error_prepend(errp, "Cannot write the LUKS header: ");
        return -1;
    }
    return 0;
}

static int qcrypto_block_luks_init_payload_cipher(QCryptoBlock *block,
                                                  QCryptoBlockLUKS *luks,
                                                  const uint8_t *mk,
                                                  Error **errp)
{
    QCryptoSectorCipherSpec spec = qcrypto_luks_sector_spec(&luks->spec);

    return qcrypto_block_init_cipher(block, &spec, mk, luks->header.key_bytes,
                                     errp);
}

static int qcrypto_block_luks_open(QCryptoBlock *block,
                                   const QCryptoBlockOpenOptions *options,
                                   QCryptoBlockReadFunc readfunc, void *opaque,
                                   unsigned int flags, Error **errp)
{
    QCryptoBlockLUKS *luks = g_new0(QCryptoBlockLUKS, 1);
    bool detached = flags & QCRYPTO_BLOCK_OPEN_DETACHED;
    g_autoptr(QCryptoSecureBuf) mk = NULL;

    block->opaque = luks;
    block->sector_size = QCRYPTO_LUKS_SECTOR_SIZE;
    block->detached_header = detached;

    if (qcrypto_block_luks_header_read(block, readfunc, opaque, options->size,
                                       &luks->header, errp) < 0 ||
        qcrypto_luks_header_validate(&luks->header, options->size, detached,
                                     &luks->spec, errp) < 0) {
        return -1;
    }
    /*
     * With a detached header the offset counts in the data file: 0 in what
     * QEMU and we create, cryptsetup's --offset otherwise.
     */
    block->payload_offset =
        (uint64_t)luks->header.payload_offset * QCRYPTO_LUKS_SECTOR_SIZE;

    if (flags & QCRYPTO_BLOCK_OPEN_NO_IO) {
        return 0;
    }
    mk = qcrypto_secure_buf_new(luks->header.key_bytes);
    if (qcrypto_block_luks_unlock(block, &luks->header, &luks->spec,
                                  &options->secret, readfunc,
                                  opaque, mk->data, errp) < 0) {
        return -1;
    }
    return qcrypto_block_luks_init_payload_cipher(block, luks, mk->data, errp);
}

/*
 * PBKDF2 iterations worth iter_time / divisor ms on this CPU for nout
 * bytes of output, at least QCRYPTO_LUKS_MIN_ITERS, at most what we accept
 * on open.
 */
static uint32_t qcrypto_block_luks_pbkdf2_iters(QCryptoHashAlgo hash,
                                                size_t nout,
                                                uint64_t iter_time,
                                                unsigned divisor, Error **errp)
{
    uint64_t iters;

    if (qcrypto_pbkdf2_iters_for_time(hash, nout, iter_time, &iters,
                                      errp) < 0) {
        return 0;
    }
    iters /= divisor;
    iters = MAX(iters, QCRYPTO_LUKS_MIN_ITERS);
    if (iters > QCRYPTO_LUKS_MAX_ITERS) {
        error_setg(errp, "iter-time of %" PRIu64 " ms gives %" PRIu64
                   " PBKDF2 iterations, more than the limit of %u",
                   iter_time, iters, QCRYPTO_LUKS_MAX_ITERS);
        return 0;
    }
    return iters;
}

/*
 * Store mk in slot i under secret: new salt and iterations, key material
 * written to the slot's area. Updates the in-memory header only: the
 * caller writes it, after the key material, so an interrupted write never
 * leaves an active slot pointing at missing key material.
 */
static int qcrypto_block_luks_keyslot_store(
    QCryptoBlock *block, QCryptoLUKSHeader *hdr,
    const QCryptoLUKSCipherSpec *spec, int i,
    const QCryptoBlockSecret *secret, const uint8_t *mk, uint64_t iter_time,
    QCryptoBlockWriteFunc writefunc, void *opaque, Error **errp)
{
    QCryptoLUKSKeySlot *slot = &hdr->slots[i];
    QCryptoHashAlgo hash = spec->hash_alg;
    size_t nkey = hdr->key_bytes;
    g_autoptr(QCryptoSecureBuf) slotkey = qcrypto_secure_buf_new(nkey);
    g_autoptr(QCryptoSecureBuf) split = qcrypto_secure_buf_new(
        qcrypto_luks_key_material_len(nkey, slot->stripes));
    uint8_t salt[QCRYPTO_LUKS_SALT_LEN];
    uint32_t iters;

    if (qcrypto_random_bytes(salt, sizeof(salt), errp) < 0) {
        return -1;
    }
    iters = qcrypto_block_luks_pbkdf2_iters(hash, nkey, iter_time, 1, errp);
    if (!iters ||
        qcrypto_pbkdf2(hash, qcrypto_block_luks_secret_data(secret),
                       secret->len, salt, sizeof(salt), iters, slotkey->data,
                       nkey, errp) < 0 ||
        qcrypto_afsplit_encode(hash, nkey, slot->stripes, mk, split->data,
                               errp) < 0 ||
        qcrypto_block_luks_key_material_crypt(spec, slotkey->data, nkey,
                                              split->data, split->len, true,
                                              errp) < 0) {
        return -1;
    }
    if (writefunc(block, (uint64_t)slot->key_offset * QCRYPTO_LUKS_SECTOR_SIZE,
                  split->data, split->len, opaque, errp) < 0) {
        error_prepend(errp, "Cannot write key slot %d: ", i);
        return -1;
    }
    slot->active = QCRYPTO_LUKS_KEY_SLOT_ACTIVE;
    slot->iterations = iters;
    memcpy(slot->salt, salt, sizeof(salt));
    return 0;
}

/* The cipher spec the create options ask for, with QEMU's defaults. */
void qcrypto_luks_create_spec(
    const QCryptoBlockCreateOptions *options, QCryptoLUKSCipherSpec *spec)
{
    spec->cipher_alg = options->cipher_alg;
    spec->cipher_mode = options->cipher_mode;
    spec->ivgen_alg = options->cipher_mode == QCRYPTO_CIPHER_MODE_ECB ?
        QCRYPTO_IVGEN_ALGO_NULL : options->ivgen_alg;
    spec->has_ivgen_hash_alg = spec->ivgen_alg == QCRYPTO_IVGEN_ALGO_ESSIV;
    spec->ivgen_hash_alg = options->has_ivgen_hash_alg ?
        options->ivgen_hash_alg : QCRYPTO_HASH_ALGO_SHA256;
    spec->hash_alg = options->hash_alg;
}

/* Everything of a new header but its secrets; header_len for initfunc. */
/*
 * The LUKS2-only options are errors on LUKS1, as cryptsetup makes them
 * ("Requested PBKDF type is not supported for LUKS1"): silently making a
 * PBKDF2 image with 512-byte sectors and no label would not be what was
 * asked for. Each message names the option.
 */
static int qcrypto_block_luks_check_kdf_options(bool has_kdf,
                                                QCryptoBlockKDF kdf,
                                                uint32_t memory,
                                                uint32_t parallel,
                                                Error **errp)
{
    if (has_kdf && kdf != QCRYPTO_BLOCK_KDF_PBKDF2) {
        error_setg(errp, "Option 'kdf=%s' needs luks-version=2: LUKS1 key "
                   "slots use PBKDF2 only", qcrypto_block_kdf_name(kdf));
        return -1;
    }
    if (memory || parallel) {
        error_setg(errp, "Option '%s' needs luks-version=2: it is an argon2 "
                   "cost, and LUKS1 key slots use PBKDF2 only",
                   memory ? "kdf-memory" : "kdf-parallel");
        return -1;
    }
    return 0;
}

static int qcrypto_block_luks_check_create_options(
    const QCryptoBlockCreateOptions *options, Error **errp)
{
    if (options->sector_size) {
        error_setg(errp, "Option 'sector-size' needs luks-version=2: LUKS1 "
                   "sectors are 512 bytes");
        return -1;
    }
    if (options->label) {
        error_setg(errp, "Option 'label' needs luks-version=2: a LUKS1 "
                   "header has no label");
        return -1;
    }
    return qcrypto_block_luks_check_kdf_options(options->has_kdf,
                                                options->kdf,
                                                options->kdf_memory,
                                                options->kdf_parallel, errp);
}

static int qcrypto_block_luks_create_layout(
    const QCryptoBlockCreateOptions *options, QCryptoLUKSHeader *hdr,
    QCryptoLUKSCipherSpec *spec, uint64_t *header_len, Error **errp)
{
    if (options->cipher_alg >= QCRYPTO_CIPHER_ALGO__MAX ||
        options->cipher_mode >= QCRYPTO_CIPHER_MODE__MAX ||
        options->ivgen_alg >= QCRYPTO_IVGEN_ALGO__MAX ||
        options->hash_alg >= QCRYPTO_HASH_ALGO__MAX ||
        (options->has_ivgen_hash_alg &&
         options->ivgen_hash_alg >= QCRYPTO_HASH_ALGO__MAX)) {
        error_setg(errp, "Invalid LUKS create options: unknown algorithm");
        return -1;
    }
    if (qcrypto_block_luks_check_create_options(options, errp) < 0) {
        return -1;
    }
    memset(hdr, 0, sizeof(*hdr));
    qcrypto_luks_create_spec(options, spec);
    memcpy(hdr->magic, QCRYPTO_LUKS_MAGIC, QCRYPTO_LUKS_MAGIC_LEN);
    hdr->version = QCRYPTO_LUKS_VERSION;
    for (int i = 0; i < QCRYPTO_LUKS_NUM_KEY_SLOTS; i++) {
        hdr->slots[i].active = QCRYPTO_LUKS_KEY_SLOT_DISABLED;
    }
    if (qcrypto_luks_cipher_spec_format(spec, hdr, errp) < 0) {
        return -1;
    }
    return qcrypto_luks_layout(hdr, options->align_payload,
                               options->detached_header, header_len, errp);
}

static int qcrypto_block_luks_calculate_payload_offset(
    const QCryptoBlockCreateOptions *options, uint64_t *payload_offset,
    Error **errp)
{
    QCryptoLUKSHeader hdr;
    QCryptoLUKSCipherSpec spec;
    uint64_t header_len;

    if (qcrypto_block_luks_create_layout(options, &hdr, &spec, &header_len,
                                         errp) < 0) {
        return -1;
    }
    *payload_offset = (uint64_t)hdr.payload_offset * QCRYPTO_LUKS_SECTOR_SIZE;
    return 0;
}

static int qcrypto_block_luks_create(QCryptoBlock *block,
                                     const QCryptoBlockCreateOptions *options,
                                     QCryptoBlockInitFunc initfunc,
                                     QCryptoBlockWriteFunc writefunc,
                                     void *opaque, Error **errp)
{
    QCryptoBlockLUKS *luks = g_new0(QCryptoBlockLUKS, 1);
    QCryptoLUKSHeader *hdr = &luks->header;
    uint64_t iter_time = options->has_iter_time ? options->iter_time :
        LUKS_DEFAULT_ITER_TIME_MS;
    g_autoptr(QCryptoSecureBuf) mk = NULL;
    g_autofree char *uuid = NULL;
    uint64_t header_len;

    block->opaque = luks;
    block->sector_size = QCRYPTO_LUKS_SECTOR_SIZE;
    block->detached_header = options->detached_header;

    if (!options->secret.data && options->secret.len) {
        error_setg(errp, "Invalid LUKS passphrase: no data");
        return -1;
    }
    if (iter_time == 0) {
        error_setg(errp, "iter-time must be at least 1 ms");
        return -1;
    }
    if (qcrypto_block_luks_create_layout(options, hdr, &luks->spec,
                                         &header_len, errp) < 0) {
        return -1;
    }

    uuid = g_uuid_string_random();
    g_assert(strlen(uuid) < QCRYPTO_LUKS_UUID_LEN);
    memcpy(hdr->uuid, uuid, strlen(uuid));

    /* The master key and its digest (the spec's partition initialisation). */
    mk = qcrypto_secure_buf_new(hdr->key_bytes);
    if (qcrypto_random_bytes(mk->data, mk->len, errp) < 0 ||
        qcrypto_random_bytes(hdr->mk_digest_salt, QCRYPTO_LUKS_SALT_LEN,
                             errp) < 0) {
        return -1;
    }
    hdr->mk_digest_iter = qcrypto_block_luks_pbkdf2_iters(
        luks->spec.hash_alg, QCRYPTO_LUKS_DIGEST_LEN, iter_time,
        LUKS_MK_DIGEST_ITER_DIVISOR, errp);
    if (!hdr->mk_digest_iter ||
        qcrypto_pbkdf2(luks->spec.hash_alg, mk->data, mk->len,
                       hdr->mk_digest_salt, QCRYPTO_LUKS_SALT_LEN,
                       hdr->mk_digest_iter, hdr->mk_digest,
                       QCRYPTO_LUKS_DIGEST_LEN, errp) < 0) {
        return -1;
    }

    /* The payload cipher before any write: a failure leaves no file. */
    if (qcrypto_block_luks_init_payload_cipher(block, luks, mk->data,
                                               errp) < 0) {
        return -1;
    }
    /* Room first, then slot 0's key material, the header last. */
    if (initfunc(block, header_len, opaque, errp) < 0 ||
        qcrypto_block_luks_keyslot_store(block, hdr, &luks->spec, 0,
                                         &options->secret, mk->data,
                                         iter_time, writefunc, opaque,
                                         errp) < 0 ||
        qcrypto_block_luks_header_write(block, luks, writefunc, NULL, opaque,
                                        errp) < 0) {
        return -1;
    }
    block->payload_offset =
        (uint64_t)hdr->payload_offset * QCRYPTO_LUKS_SECTOR_SIZE;
    return 0;
}

static bool qcrypto_block_luks_slot_active(const QCryptoBlockLUKS *luks, int i)
{
    return luks->header.slots[i].active == QCRYPTO_LUKS_KEY_SLOT_ACTIVE;
}

/* QCryptoBlockKeyslots.try_secret: does secret open slot i? */
static int qcrypto_block_luks_keyslot_try_secret(
    QCryptoBlock *block, int i, const QCryptoBlockSecret *secret,
    QCryptoBlockReadFunc readfunc, void *opaque, Error **errp)
{
    QCryptoBlockLUKS *luks = block->opaque;
    g_autoptr(QCryptoSecureBuf) mk =
        qcrypto_secure_buf_new(luks->header.key_bytes);

    return qcrypto_block_luks_keyslot_unlock(block, &luks->header,
                                             &luks->spec, i, secret, readfunc,
                                             opaque, mk->data, errp);
}

/* The slots for the shared amend policy: every active slot opens. */
static void qcrypto_block_luks_keyslots(const QCryptoBlockLUKS *luks,
                                        QCryptoBlockKeyslots *slots)
{
    *slots = (QCryptoBlockKeyslots) {
        .nslots = QCRYPTO_LUKS_NUM_KEY_SLOTS,
        .try_secret = qcrypto_block_luks_keyslot_try_secret,
    };
    for (int i = 0; i < QCRYPTO_LUKS_NUM_KEY_SLOTS; i++) {
        if (qcrypto_block_luks_slot_active(luks, i)) {
            slots->active |= 1u << i;
        }
    }
    slots->openers = slots->active;
}

/*
 * amend state=active: put a new passphrase into a free slot (or, with
 * force and keyslot=N, over the active slot N, as qemu-img does).
 */
static int qcrypto_block_luks_amend_add_key(
    QCryptoBlock *block, QCryptoBlockLUKS *luks, QCryptoBlockReadFunc readfunc,
    QCryptoBlockWriteFunc writefunc, QCryptoBlockFlushFunc flushfunc,
    void *opaque, const QCryptoBlockAmendOptions *options, bool force,
    Error **errp)
{
    uint64_t iter_time = options->has_iter_time ? options->iter_time :
        LUKS_DEFAULT_ITER_TIME_MS;
    g_autoptr(QCryptoSecureBuf) mk =
        qcrypto_secure_buf_new(luks->header.key_bytes);
    QCryptoLUKSHeader saved = luks->header;
    QCryptoBlockKeyslots slots;
    int slot;

    qcrypto_block_luks_keyslots(luks, &slots);
    slot = qcrypto_block_keyslot_select_free(&slots, options, force, errp);
    if (slot < 0) {
        return -1;
    }
    if (iter_time == 0) {
        error_setg(errp, "iter-time must be at least 1 ms");
        return -1;
    }

    if (options->has_old_secret) {
        if (qcrypto_block_luks_unlock(block, &luks->header, &luks->spec,
                                      &options->old_secret, readfunc, opaque,
                                      mk->data, errp) < 0) {
            return -1;
        }
    } else if (block->has_master_key) {
        memcpy(mk->data, block->master_key, mk->len);
    } else {
        error_setg(errp, "Adding a key slot needs old-secret: the image "
                   "was opened without its key");
        return -1;
    }

    /* The key material on disk, then the header that enables it. */
    if (qcrypto_block_luks_keyslot_store(
            block, &luks->header, &luks->spec, slot, &options->new_secret,
            mk->data, iter_time, writefunc, opaque, errp) < 0) {
        luks->header = saved;
        return -1;
    }
    if (qcrypto_block_flush(block, flushfunc, opaque, errp) < 0) {
        error_prepend(errp, "Cannot write key slot %d: ", slot);
        luks->header = saved;
        return -1;
    }
    if (qcrypto_block_luks_header_write(block, luks, writefunc, flushfunc,
                                        opaque, errp) < 0) {
        luks->header = saved;
        return -1;
    }
    return 0;
}

/*
 * amend state=inactive: mark the slots disabled in the header, then
 * overwrite their key material with random bytes, so the master key
 * cannot be recovered from them even with the old passphrase.
 */
static int qcrypto_block_luks_amend_erase_keys(
    QCryptoBlock *block, QCryptoBlockLUKS *luks, QCryptoBlockReadFunc readfunc,
    QCryptoBlockWriteFunc writefunc, QCryptoBlockFlushFunc flushfunc,
    void *opaque, const QCryptoBlockAmendOptions *options, bool force,
    Error **errp)
{
    QCryptoLUKSHeader saved = luks->header;
    QCryptoBlockKeyslots slots;
    uint32_t erase;
    uint64_t len = qcrypto_luks_key_material_len(luks->header.key_bytes,
                                                 QCRYPTO_LUKS_STRIPES);

    qcrypto_block_luks_keyslots(luks, &slots);
    if (qcrypto_block_keyslot_select_erase(block, &slots, readfunc, opaque,
                                           options, force, &erase,
                                           errp) < 0) {
        return -1;
    }

    for (int i = 0; i < QCRYPTO_LUKS_NUM_KEY_SLOTS; i++) {
        if (erase & (1u << i)) {
            QCryptoLUKSKeySlot *slot = &luks->header.slots[i];

            slot->active = QCRYPTO_LUKS_KEY_SLOT_DISABLED;
            slot->iterations = 0;
            memset(slot->salt, 0, sizeof(slot->salt));
        }
    }
    if (qcrypto_block_luks_header_write(block, luks, writefunc, flushfunc,
                                        opaque, errp) < 0) {
        luks->header = saved;
        return -1;
    }

    for (int i = 0; i < QCRYPTO_LUKS_NUM_KEY_SLOTS; i++) {
        uint64_t offset = (uint64_t)luks->header.slots[i].key_offset *
            QCRYPTO_LUKS_SECTOR_SIZE;

        if (!(erase & (1u << i))) {
            continue;
        }
        if (qcrypto_block_wipe_area(block, writefunc, opaque, offset, len,
                                    errp) < 0) {
            error_prepend(errp, "Key slot %d is disabled but its key "
                          "material could not be overwritten: ", i);
            return -1;
        }
    }
    return qcrypto_block_flush(block, flushfunc, opaque, errp);
}

static int qcrypto_block_luks_amend(QCryptoBlock *block,
                                    QCryptoBlockReadFunc readfunc,
                                    QCryptoBlockWriteFunc writefunc,
                                    QCryptoBlockFlushFunc flushfunc,
                                    void *opaque,
                                    const QCryptoBlockAmendOptions *options,
                                    bool force, Error **errp)
{
    QCryptoBlockLUKS *luks = block->opaque;

    if (qcrypto_block_luks_check_kdf_options(options->has_kdf, options->kdf,
                                             options->kdf_memory,
                                             options->kdf_parallel,
                                             errp) < 0) {
        return -1;
    }
    switch (options->state) {
    case QCRYPTO_BLOCK_AMEND_STATE_ACTIVE:
        return qcrypto_block_luks_amend_add_key(
            block, luks, readfunc, writefunc, flushfunc, opaque, options,
            force, errp);
    case QCRYPTO_BLOCK_AMEND_STATE_INACTIVE:
        return qcrypto_block_luks_amend_erase_keys(
            block, luks, readfunc, writefunc, flushfunc, opaque, options,
            force, errp);
    }
    error_setg(errp, "Invalid key slot state %d", (int)options->state);
    return -1;
}

static int qcrypto_block_luks_get_info(QCryptoBlock *block,
                                       QCryptoBlockInfo *info, Error **errp)
{
    const QCryptoBlockLUKS *luks = block->opaque;
    const QCryptoLUKSHeader *hdr = &luks->header;

    info->version = QCRYPTO_LUKS_VERSION;
    info->cipher_alg = luks->spec.cipher_alg;
    info->cipher_mode = luks->spec.cipher_mode;
    info->ivgen_alg = luks->spec.ivgen_alg;
    info->has_ivgen_hash_alg = luks->spec.has_ivgen_hash_alg;
    info->ivgen_hash_alg = luks->spec.ivgen_hash_alg;
    info->hash_alg = luks->spec.hash_alg;
    info->master_key_iters = hdr->mk_digest_iter;
    info->uuid = g_strdup(hdr->uuid);
    info->nslots = QCRYPTO_LUKS_NUM_KEY_SLOTS;
    info->slots = g_new0(QCryptoBlockInfoLUKSSlot, info->nslots);
    for (size_t i = 0; i < info->nslots; i++) {
        const QCryptoLUKSKeySlot *slot = &hdr->slots[i];

        info->slots[i].active = slot->active == QCRYPTO_LUKS_KEY_SLOT_ACTIVE;
        info->slots[i].iters = info->slots[i].active ? slot->iterations : 0;
        info->slots[i].stripes = slot->stripes;
        info->slots[i].key_offset =
            (uint64_t)slot->key_offset * QCRYPTO_LUKS_SECTOR_SIZE;
    }
    return 0;
}

static void qcrypto_block_luks_cleanup(QCryptoBlock *block)
{
    QCryptoBlockLUKS *luks = block->opaque;

    if (luks) {
        explicit_bzero(luks, sizeof(*luks));
        g_free(luks);
        block->opaque = NULL;
    }
}

static bool qcrypto_block_luks_has_format(const uint8_t *buf, size_t buflen)
{
    /* Magic and version 1: LUKS2 shares the magic (its own driver). */
    return buflen >= QCRYPTO_LUKS_MAGIC_LEN + 2 &&
        memcmp(buf, QCRYPTO_LUKS_MAGIC, QCRYPTO_LUKS_MAGIC_LEN) == 0 &&
        buf[6] == 0 && buf[7] == QCRYPTO_LUKS_VERSION;
}

/* ---- Key slots of a header of the caller's (lukspriv.h) ---- */

int qcrypto_luks_keyslot_open(QCryptoBlock *block,
                              const QCryptoLUKSHeader *hdr,
                              const QCryptoLUKSCipherSpec *spec, int slot,
                              const QCryptoBlockSecret *secret,
                              QCryptoBlockReadFunc readfunc, void *opaque,
                              uint8_t *mk, Error **errp)
{
    if (slot < 0) {
        return qcrypto_block_luks_unlock(block, hdr, spec, secret, readfunc,
                                         opaque, mk, errp);
    }
    g_assert(slot < QCRYPTO_LUKS_NUM_KEY_SLOTS);
    if (hdr->slots[slot].active != QCRYPTO_LUKS_KEY_SLOT_ACTIVE) {
        return 0;
    }
    return qcrypto_block_luks_keyslot_unlock(block, hdr, spec, slot, secret,
                                             readfunc, opaque, mk, errp);
}

int qcrypto_luks_keyslot_store(QCryptoBlock *block, QCryptoLUKSHeader *hdr,
                               const QCryptoLUKSCipherSpec *spec, int slot,
                               const QCryptoBlockSecret *secret,
                               const uint8_t *mk, uint64_t iter_time,
                               QCryptoBlockWriteFunc writefunc, void *opaque,
                               Error **errp)
{
    g_assert(slot >= 0 && slot < QCRYPTO_LUKS_NUM_KEY_SLOTS);
    return qcrypto_block_luks_keyslot_store(block, hdr, spec, slot, secret,
                                            mk, iter_time ? iter_time :
                                            LUKS_DEFAULT_ITER_TIME_MS,
                                            writefunc, opaque, errp);
}

const QCryptoBlockDriver qcrypto_block_driver_luks = {
    .format = QCRYPTO_BLOCK_FORMAT_LUKS,
    .version = QCRYPTO_LUKS_VERSION,
    .name = "LUKS",
    .open = qcrypto_block_luks_open,
    .create = qcrypto_block_luks_create,
    .amend = qcrypto_block_luks_amend,
    .get_info = qcrypto_block_luks_get_info,
    .cleanup = qcrypto_block_luks_cleanup,
    .has_format = qcrypto_block_luks_has_format,
    .calculate_payload_offset = qcrypto_block_luks_calculate_payload_offset,
};
