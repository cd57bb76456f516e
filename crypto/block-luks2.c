/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The LUKS2 format driver: opens, creates and amends cryptsetup 2.x's
 * default format through the driver table of crypto/blockpriv.h. The
 * pieces live in their own modules (luks2priv.h); this file ties them to
 * a QCryptoBlock.
 *
 * What we create is what `cryptsetup luksFormat --type luks2` 2.6 makes
 * on an image file: 16 KiB header copies, the key-slot area up to a
 * 16 MiB payload offset, one "crypt" segment of 4096-byte sectors running
 * to the end of the file, key slot 0 with argon2id, areas encrypted with
 * the segment's cipher, a PBKDF2 digest calibrated to 125 ms.
 */
#include <string.h>

#include "blockpriv.h"
#include "crypto/pbkdf.h"
#include "crypto/random.h"
#include "crypto/secure-mem.h"
#include "luks2priv.h"

/* cryptsetup 2.6's default layout (lib/luks2/luks2.h, lib/setup.c). */
#define LUKS2_DEFAULT_PAYLOAD_OFFSET (16 * 1024 * 1024)
/* LUKS2 spec, "keyslots" object, af: cryptsetup writes 4000 stripes */
#define LUKS2_DEFAULT_STRIPES 4000
#define LUKS2_DEFAULT_ITER_TIME_MS 2000
#define LUKS2_DEFAULT_MEMORY_KIB (1024 * 1024)
/*
 * cryptsetup's LUKS_MKD_ITERATIONS_MS and its floor of 1000 iterations.
 * A shorter iter-time shortens the digest too (to iter-time / 8, the rule
 * QEMU uses for LUKS1's digest): the digest hashes a random volume key,
 * which no count of iterations makes easier or harder to guess, so only
 * the key slots' iterations guard the passphrase, and a user who asks for
 * a 10 ms key slot asked for a fast create, not a 125 ms digest.
 */
#define LUKS2_DIGEST_ITER_TIME_MS 125
#define LUKS2_DIGEST_MIN_ITERS 1000
#define LUKS2_SALT_LEN 32

typedef struct QCryptoBlockLUKS2 {
    QCryptoLUKS2Header *hdr;
    QCryptoLUKS2Metadata *md;
} QCryptoBlockLUKS2;

static void qcrypto_luks2_cleanup(QCryptoBlock *block)
{
    QCryptoBlockLUKS2 *luks = block->opaque;

    if (luks) {
        qcrypto_luks2_metadata_free(luks->md);
        qcrypto_luks2_header_free(luks->hdr);
        g_free(luks);
        block->opaque = NULL;
    }
}

/* The data segment: segment 0, the only one we handle. */
const QCryptoLUKS2Segment *qcrypto_luks2_data_segment(
    const QCryptoLUKS2Metadata *md, Error **errp)
{
    for (int i = 1; i < QCRYPTO_LUKS2_SEGMENTS_MAX; i++) {
        if (md->segments[i]) {
            error_setg(errp, "LUKS2 image has %d or more data segments; "
                       "only one is supported", i + 1);
            return NULL;
        }
    }
    if (!md->segments[0]) {
        error_setg(errp, "LUKS2 image has no data segment");
        return NULL;
    }
    return md->segments[0];
}

/*
 * The payload cipher from the volume key: the IV counts 512-byte units
 * whatever the sector size (cryptsetup's default, without
 * iv_large_sectors), and starts at iv_tweak.
 */
static int qcrypto_luks2_init_cipher(QCryptoBlock *block,
                                     const QCryptoLUKS2Segment *seg,
                                     const uint8_t *key, size_t nkey,
                                     Error **errp)
{
    QCryptoLUKS2Cipher c;
    uint64_t units = seg->sector_size / 512;

    if (qcrypto_luks2_cipher_parse(seg->encryption, nkey, &c, errp) < 0) {
        return -1;
    }
    block->ivgen_sector_shift = __builtin_ctzll(units);
    block->iv_sector_offset = seg->iv_tweak / units;
    return qcrypto_block_init_cipher(block, &c, key, nkey, errp);
}

/* Everything the header points at lies inside a file of size bytes. */
static int qcrypto_luks2_check_size(const QCryptoLUKS2Metadata *md,
                                    const QCryptoLUKS2Segment *seg,
                                    uint64_t size, bool detached, Error **errp)
{
    for (int i = 0; i < QCRYPTO_LUKS2_KEYSLOTS_MAX; i++) {
        const QCryptoLUKS2Keyslot *ks = md->keyslots[i];

        if (ks && ks->area_offset + ks->area_size > size) {
            error_setg(errp, "LUKS2 key slot %d lies beyond the end of the "
                       "file (%" PRIu64 " bytes)", i, size);
            return -1;
        }
    }
    if (!detached && seg->offset > size) {
        error_setg(errp, "LUKS2 payload offset %" PRIu64 " lies beyond the "
                   "end of the file (%" PRIu64 " bytes)", seg->offset, size);
        return -1;
    }
    return 0;
}

static int qcrypto_luks2_open(QCryptoBlock *block,
                              const QCryptoBlockOpenOptions *options,
                              QCryptoBlockReadFunc readfunc, void *opaque,
                              unsigned int flags, Error **errp)
{
    QCryptoBlockLUKS2 *luks = g_new0(QCryptoBlockLUKS2, 1);
    const QCryptoLUKS2Segment *seg;
    bool detached = flags & QCRYPTO_BLOCK_OPEN_DETACHED;
    g_autoptr(QCryptoSecureBuf) key = NULL;
    int slot;

    block->opaque = luks;
    luks->hdr = qcrypto_luks2_header_read(block, readfunc, opaque,
                                          &block->warning, errp);
    if (!luks->hdr) {
        return -1;
    }
    luks->md = qcrypto_luks2_metadata_parse(luks->hdr->json,
                                            luks->hdr->bin.hdr_size, errp);
    if (!luks->md) {
        return -1;
    }
    seg = qcrypto_luks2_data_segment(luks->md, errp);
    if (!seg) {
        return -1;
    }
    if (!detached && seg->offset == 0) {
        error_setg(errp, "LUKS2 payload offset is 0: this is a detached "
                   "header, to be opened as the header of another file");
        return -1;
    }
    if (options->size &&
        qcrypto_luks2_check_size(luks->md, seg, options->size, detached,
                                 errp) < 0) {
        return -1;
    }
    block->payload_offset = seg->offset;
    block->sector_size = seg->sector_size;
    block->detached_header = detached;
    block->data_size = qcrypto_luks2_data_size(luks->md, seg);

    if (flags & QCRYPTO_BLOCK_OPEN_NO_IO) {
        return 0;
    }
    if (qcrypto_luks2_unlock(luks->md, &options->secret, block, readfunc,
                             opaque, &key, &slot, errp) < 0) {
        return -1;
    }
    return qcrypto_luks2_init_cipher(block, seg, key->data, key->len, errp);
}

/*
 * The payload's size if the header fixes it: the segment's own size, or
 * for a "dynamic" one the size in our data-size token; else 0.
 */
uint64_t qcrypto_luks2_data_size(const QCryptoLUKS2Metadata *md,
                                 const QCryptoLUKS2Segment *seg)
{
    if (!seg->size_dynamic) {
        return seg->size;
    }
    for (int i = 0; i < QCRYPTO_LUKS2_TOKENS_MAX; i++) {
        if (md->tokens[i] && md->tokens[i]->data_size) {
            return md->tokens[i]->data_size;
        }
    }
    return 0;
}

/* qcrypto_luks2_metadata_to_json() gave NULL */
#define QCRYPTO_LUKS2_UNWRITABLE_MSG                                    \
    "LUKS2 metadata holds values (numbers such as 1e20) that cannot be " \
    "written back unchanged; refusing to rewrite the header"

/* ---- create ---- */

typedef struct LUKS2Layout {
    uint64_t hdr_size;
    uint64_t keyslots_size;
    uint64_t payload_offset;    /* 0 with a detached header */
    uint64_t header_len;        /* what the header's file holds */
} LUKS2Layout;

static int qcrypto_luks2_layout(const QCryptoBlockCreateOptions *options,
                                LUKS2Layout *l, Error **errp)
{
    uint64_t end = LUKS2_DEFAULT_PAYLOAD_OFFSET;

    l->hdr_size = QCRYPTO_LUKS2_HDR_SIZE_DEFAULT;
    /* As cryptsetup's --align-payload: the payload at that alignment. */
    if (options->align_payload && !options->detached_header) {
        end = options->align_payload * 512;
        if (end % QCRYPTO_LUKS2_AREA_ALIGN ||
            end < 2 * l->hdr_size + qcrypto_luks2_keyslot_area_size(
                QCRYPTO_HASH_MAX_DIGEST_LEN, LUKS2_DEFAULT_STRIPES)) {
            error_setg(errp, "align-payload %" PRIu64 " (sectors) leaves no "
                       "room for a LUKS2 header and a key slot, or is not "
                       "a multiple of 8", options->align_payload);
            return -1;
        }
    }
    l->keyslots_size = end - 2 * l->hdr_size;
    l->header_len = end;
    l->payload_offset = options->detached_header ? 0 : end;
    return 0;
}

/*
 * The KDF options of a new key slot, checked as cryptsetup checks them
 * (lib/utils_pbkdf.c): memory and lanes are argon2 costs, an error with
 * pbkdf2; too much memory is an error that says the maximum, not a value
 * quietly lowered. (Memory above half the RAM is still lowered at
 * calibration, as cryptsetup does.)
 */
static int qcrypto_luks2_check_kdf_options(bool has_kdf, QCryptoBlockKDF kdf,
                                           uint32_t memory, uint32_t parallel,
                                           Error **errp)
{
    if (has_kdf && kdf == QCRYPTO_BLOCK_KDF_PBKDF2 && (memory || parallel)) {
        error_setg(errp, "Option '%s' is an argon2 cost: it cannot be used "
                   "with kdf=pbkdf2", memory ? "kdf-memory" : "kdf-parallel");
        return -1;
    }
    if (memory > QCRYPTO_LUKS2_ARGON2_MEMORY_MAX_KIB) {
        error_setg(errp, "Option 'kdf-memory' %" PRIu32 " is too high "
                   "(maximum is %u KiB)", memory,
                   QCRYPTO_LUKS2_ARGON2_MEMORY_MAX_KIB);
        return -1;
    }
    if (memory && memory < QCRYPTO_LUKS2_ARGON2_MEMORY_MIN_KIB) {
        error_setg(errp, "Option 'kdf-memory' %" PRIu32 " is too low "
                   "(minimum is %u KiB)", memory,
                   QCRYPTO_LUKS2_ARGON2_MEMORY_MIN_KIB);
        return -1;
    }
    if (parallel > QCRYPTO_LUKS2_ARGON2_PARALLEL_MAX) {
        error_setg(errp, "Option 'kdf-parallel' %" PRIu32 " is too high "
                   "(maximum is %u)", parallel,
                   QCRYPTO_LUKS2_ARGON2_PARALLEL_MAX);
        return -1;
    }
    return 0;
}

/* The options of a new image that the layout does not check. */
static int qcrypto_luks2_check_create_options(
    const QCryptoBlockCreateOptions *options, Error **errp)
{
    uint32_t sector_size = options->sector_size;

    if (sector_size && (sector_size < 512 || sector_size > 4096 ||
                        (sector_size & (sector_size - 1)))) {
        error_setg(errp, "Option 'sector-size' %" PRIu32 " is not 512, "
                   "1024, 2048 or 4096", sector_size);
        return -1;
    }
    if (options->label &&
        strlen(options->label) >= QCRYPTO_LUKS2_LABEL_LEN) {
        error_setg(errp, "Option 'label' '%s' is longer than %d bytes",
                   options->label, QCRYPTO_LUKS2_LABEL_LEN - 1);
        return -1;
    }
    return qcrypto_luks2_check_kdf_options(options->has_kdf, options->kdf,
                                           options->kdf_memory,
                                           options->kdf_parallel, errp);
}

static int qcrypto_luks2_calculate_payload_offset(
    const QCryptoBlockCreateOptions *options, uint64_t *payload_offset,
    Error **errp)
{
    LUKS2Layout l;

    if (qcrypto_luks2_check_create_options(options, errp) < 0 ||
        qcrypto_luks2_layout(options, &l, errp) < 0) {
        return -1;
    }
    *payload_offset = l.payload_offset;
    return 0;
}

/* The KDF of a new key slot from the create / amend options. */
static void qcrypto_luks2_kdf_params(QCryptoLUKS2KDFParams *p, bool has_kdf,
                                     QCryptoBlockKDF kdf, QCryptoHashAlgo hash,
                                     bool has_iter_time, uint64_t iter_time,
                                     uint32_t memory, uint32_t parallel)
{
    *p = (QCryptoLUKS2KDFParams) {
        .type = has_kdf ? kdf : QCRYPTO_BLOCK_KDF_ARGON2ID,
        .hash = hash,
        .iter_time_ms = has_iter_time ? iter_time : LUKS2_DEFAULT_ITER_TIME_MS,
        .max_memory_kib = memory ? memory : LUKS2_DEFAULT_MEMORY_KIB,
        .parallel = parallel,
    };
}

/*
 * Put key (the volume key) into a new key slot id of md, under secret,
 * bound to the data segment's digest: area found, KDF calibrated, area
 * written, metadata updated and re-validated (the header is the caller's).
 */
static int qcrypto_luks2_add_keyslot(QCryptoLUKS2Metadata *md, int id,
                                     const QCryptoLUKS2KDFParams *params,
                                     const QCryptoBlockSecret *secret,
                                     const uint8_t *key, size_t nkey,
                                     QCryptoBlock *block,
                                     QCryptoBlockWriteFunc writefunc,
                                     void *opaque, Error **errp)
{
    const QCryptoLUKS2Segment *seg = qcrypto_luks2_data_segment(md, errp);
    QCryptoLUKS2Keyslot ks = {
        .id = id,
        .key_size = nkey,
        .priority = QCRYPTO_LUKS2_PRIORITY_NORMAL,
        .af_hash = params->hash,
        .af_stripes = LUKS2_DEFAULT_STRIPES,
        .area_key_size = nkey,
    };

    if (!seg) {
        return -1;
    }
    if (seg->digest < 0) {
        error_setg(errp, "LUKS2 image has no digest for its data segment");
        return -1;
    }
    /* cryptsetup encrypts key-slot areas with the segment's cipher. */
    ks.area_encryption = seg->encryption;
    ks.digest = seg->digest;
    ks.area_size = qcrypto_luks2_keyslot_area_size(nkey, ks.af_stripes);
    if (qcrypto_luks2_keyslot_find_area(md, ks.area_size, &ks.area_offset,
                                        errp) < 0 ||
        qcrypto_luks2_kdf_calibrate(params, ks.area_key_size, &ks.kdf,
                                    errp) < 0 ||
        qcrypto_luks2_keyslot_store(&ks, secret, key, nkey, block,
                                    writefunc, opaque, errp) < 0) {
        return -1;
    }
    qcrypto_luks2_metadata_set_keyslot(md, &ks);
    return qcrypto_luks2_metadata_reload(md, errp);
}

/* The metadata of a new image, with no key slot yet. */
static QCryptoLUKS2Metadata *qcrypto_luks2_new_metadata(
    const LUKS2Layout *l, const char *cipher, uint32_t sector_size,
    QCryptoHashAlgo hash, uint64_t digest_ms, const uint8_t *key,
    size_t nkey, Error **errp)
{
    uint8_t salt[LUKS2_SALT_LEN];
    uint8_t digest[QCRYPTO_HASH_MAX_DIGEST_LEN];
    size_t ndigest = qcrypto_hash_digest_len(hash);
    g_autofree char *salt64 = NULL, *digest64 = NULL, *json = NULL;
    uint64_t iters;

    if (qcrypto_random_bytes(salt, sizeof(salt), errp) < 0) {
        return NULL;
    }
    if (qcrypto_pbkdf2_iters_for_time(hash, ndigest, digest_ms, &iters,
                                      errp) < 0) {
        return NULL;
    }
    iters = MAX(iters, LUKS2_DIGEST_MIN_ITERS);
    iters = MIN(iters, QCRYPTO_LUKS2_PBKDF2_ITERS_MAX);
    if (qcrypto_pbkdf2(hash, key, nkey, salt, sizeof(salt), iters, digest,
                       ndigest, errp) < 0) {
        return NULL;
    }
    salt64 = g_base64_encode(salt, sizeof(salt));
    digest64 = g_base64_encode(digest, ndigest);
    explicit_bzero(digest, sizeof(digest));

    /* Every value below is ours (no user text), so printf is safe. */
    json = g_strdup_printf(
        "{\"keyslots\":{},\"tokens\":{},"
        "\"segments\":{\"0\":{\"type\":\"crypt\",\"offset\":\"%" PRIu64 "\","
        "\"size\":\"dynamic\",\"iv_tweak\":\"0\",\"encryption\":\"%s\","
        "\"sector_size\":%" PRIu32 "}},"
        "\"digests\":{\"0\":{\"type\":\"pbkdf2\",\"keyslots\":[],"
        "\"segments\":[\"0\"],\"hash\":\"%s\",\"iterations\":%" PRIu64 ","
        "\"salt\":\"%s\",\"digest\":\"%s\"}},"
        "\"config\":{\"json_size\":\"%" PRIu64 "\","
        "\"keyslots_size\":\"%" PRIu64 "\"}}",
        l->payload_offset, cipher, sector_size, qcrypto_hash_algo_name(hash),
        iters, salt64, digest64, l->hdr_size - QCRYPTO_LUKS2_BIN_HDR_LEN,
        l->keyslots_size);
    return qcrypto_luks2_metadata_parse(json, l->hdr_size, errp);
}

static QCryptoLUKS2Header *qcrypto_luks2_new_header(const LUKS2Layout *l,
                                                    const char *label,
                                                    Error **errp)
{
    g_autoptr(QCryptoLUKS2Header) hdr = g_new0(QCryptoLUKS2Header, 1);
    g_autofree char *uuid = g_uuid_string_random();

    if (label && strlen(label) >= QCRYPTO_LUKS2_LABEL_LEN) {
        error_setg(errp, "LUKS2 label '%s' is longer than %d bytes", label,
                   QCRYPTO_LUKS2_LABEL_LEN - 1);
        return NULL;
    }
    hdr->bin.version = QCRYPTO_LUKS2_VERSION;
    hdr->bin.hdr_size = l->hdr_size;
    g_strlcpy(hdr->bin.label, label ? label : "", sizeof(hdr->bin.label));
    g_strlcpy(hdr->bin.checksum_alg, "sha256",
              sizeof(hdr->bin.checksum_alg));
    g_strlcpy(hdr->bin.uuid, uuid, sizeof(hdr->bin.uuid));
    if (qcrypto_random_bytes(hdr->salt_primary, QCRYPTO_LUKS2_SALT_LEN,
                             errp) < 0 ||
        qcrypto_random_bytes(hdr->salt_secondary, QCRYPTO_LUKS2_SALT_LEN,
                             errp) < 0) {
        return NULL;
    }
    return g_steal_pointer(&hdr);
}

static int qcrypto_luks2_create(QCryptoBlock *block,
                                const QCryptoBlockCreateOptions *options,
                                QCryptoBlockInitFunc initfunc,
                                QCryptoBlockWriteFunc writefunc, void *opaque,
                                Error **errp)
{
    QCryptoBlockLUKS2 *luks = g_new0(QCryptoBlockLUKS2, 1);
    QCryptoLUKS2Cipher c = {
        .alg = options->cipher_alg, .mode = options->cipher_mode,
        .ivgen = options->ivgen_alg,
        .ivgen_hash = options->has_ivgen_hash_alg ?
            options->ivgen_hash_alg : QCRYPTO_HASH_ALGO_SHA256,
    };
    uint32_t sector_size = qcrypto_block_create_sector_size(options);
    size_t nkey = qcrypto_luks2_cipher_key_len(&c);
    g_autoptr(QCryptoSecureBuf) key = qcrypto_secure_buf_new(nkey);
    g_autofree char *cipher = NULL, *json = NULL;
    QCryptoLUKS2KDFParams params;
    LUKS2Layout l;
    uint64_t digest_ms = LUKS2_DIGEST_ITER_TIME_MS;

    if (options->has_iter_time) {
        digest_ms = MIN(digest_ms, options->iter_time / 8);
    }
    block->opaque = luks;
    if (qcrypto_luks2_check_create_options(options, errp) < 0 ||
        qcrypto_luks2_layout(options, &l, errp) < 0 ||
        qcrypto_random_bytes(key->data, nkey, errp) < 0) {
        return -1;
    }
    cipher = qcrypto_luks2_cipher_format(&c);
    /* Refuse what we could not open (e.g. ECB's missing IV, bad mixes). */
    if (qcrypto_luks2_cipher_parse(cipher, nkey, &c, errp) < 0 ||
        !(luks->hdr = qcrypto_luks2_new_header(&l, options->label, errp)) ||
        !(luks->md = qcrypto_luks2_new_metadata(&l, cipher, sector_size,
                                                options->hash_alg,
                                                digest_ms, key->data, nkey,
                                                errp))) {
        return -1;
    }
    if (initfunc(block, l.header_len, opaque, errp) < 0) {
        return -1;
    }
    qcrypto_luks2_kdf_params(&params, options->has_kdf, options->kdf,
                             options->hash_alg, options->has_iter_time,
                             options->iter_time, options->kdf_memory,
                             options->kdf_parallel);
    if (qcrypto_luks2_add_keyslot(luks->md, 0, &params, &options->secret,
                                  key->data, nkey, block, writefunc, opaque,
                                  errp) < 0) {
        return -1;
    }
    json = qcrypto_luks2_metadata_to_json(luks->md);
    if (!json) {
        error_setg(errp, QCRYPTO_LUKS2_UNWRITABLE_MSG);
        return -1;
    }
    /* A new image: nobody reads it before its creator is done. */
    if (qcrypto_luks2_header_write(luks->hdr, json, block, writefunc, NULL,
                                   opaque, errp) < 0) {
        return -1;
    }
    block->payload_offset = l.payload_offset;
    block->sector_size = sector_size;
    block->detached_header = options->detached_header;
    return qcrypto_luks2_init_cipher(block, luks->md->segments[0], key->data,
                                     nkey, errp);
}

/* ---- amend ---- */

/* The volume key: from old-secret if given, else the one we hold. */
static int qcrypto_luks2_amend_volume_key(
    QCryptoBlock *block, QCryptoBlockReadFunc readfunc, void *opaque,
    const QCryptoBlockAmendOptions *options, QCryptoSecureBuf **key,
    Error **errp)
{
    QCryptoBlockLUKS2 *luks = block->opaque;
    int slot;

    if (options->has_old_secret) {
        return qcrypto_luks2_unlock(luks->md, &options->old_secret, block,
                                    readfunc, opaque, key, &slot, errp);
    }
    if (!block->has_master_key) {
        error_setg(errp, "Adding a LUKS2 key slot needs the volume key: "
                   "give 'old-secret' or open the image with its secret");
        return -1;
    }
    *key = qcrypto_secure_buf_new(block->master_key_len);
    memcpy((*key)->data, block->master_key, block->master_key_len);
    return 0;
}

/*
 * Write md as the new header and make it the block's metadata: what was
 * written before it is flushed first, then each copy in turn (see
 * qcrypto_luks2_header_write()).
 */
static int qcrypto_luks2_commit(QCryptoBlock *block, QCryptoLUKS2Metadata **md,
                                QCryptoBlockWriteFunc writefunc,
                                QCryptoBlockFlushFunc flushfunc, void *opaque,
                                Error **errp)
{
    QCryptoBlockLUKS2 *luks = block->opaque;
    g_autofree char *json = qcrypto_luks2_metadata_to_json(*md);

    if (!json) {
        error_setg(errp, QCRYPTO_LUKS2_UNWRITABLE_MSG);
        return -1;
    }
    if (qcrypto_luks2_header_write(luks->hdr, json, block, writefunc,
                                   flushfunc, opaque, errp) < 0) {
        return -1;
    }
    qcrypto_luks2_metadata_free(luks->md);
    luks->md = g_steal_pointer(md);
    return 0;
}

/*
 * Edits go to a fresh copy of the metadata (parsed again from its text):
 * if anything fails, the block's own metadata is untouched.
 */
static QCryptoLUKS2Metadata *qcrypto_luks2_md_copy(QCryptoBlockLUKS2 *luks,
                                                   Error **errp)
{
    g_autofree char *json = qcrypto_luks2_metadata_to_json(luks->md);

    if (!json) {
        error_setg(errp, QCRYPTO_LUKS2_UNWRITABLE_MSG);
        return NULL;
    }
    return qcrypto_luks2_metadata_parse(json, luks->hdr->bin.hdr_size, errp);
}

/* QCryptoBlockKeyslots.try_secret: does secret open slot i? */
static int qcrypto_luks2_keyslot_try_secret(QCryptoBlock *block, int i,
                                            const QCryptoBlockSecret *secret,
                                            QCryptoBlockReadFunc readfunc,
                                            void *opaque, Error **errp)
{
    QCryptoBlockLUKS2 *luks = block->opaque;
    const QCryptoLUKS2Keyslot *ks = luks->md->keyslots[i];
    g_autoptr(QCryptoSecureBuf) key = qcrypto_secure_buf_new(ks->key_size);

    return qcrypto_luks2_keyslot_open(luks->md, ks, secret, block, readfunc,
                                      opaque, key->data, errp);
}

/*
 * The slots for the shared amend policy: those that open the data are
 * the ones bound to the data segment's digest.
 */
static void qcrypto_luks2_keyslots(const QCryptoBlockLUKS2 *luks,
                                   QCryptoBlockKeyslots *slots)
{
    int digest = qcrypto_luks2_segment_digest(luks->md, 0);

    *slots = (QCryptoBlockKeyslots) {
        .nslots = QCRYPTO_LUKS2_KEYSLOTS_MAX,
        .openers = digest >= 0 ? luks->md->digests[digest]->keyslots : 0,
        .try_secret = qcrypto_luks2_keyslot_try_secret,
    };
    for (int i = 0; i < QCRYPTO_LUKS2_KEYSLOTS_MAX; i++) {
        if (luks->md->keyslots[i]) {
            slots->active |= 1u << i;
        }
    }
}

static int qcrypto_luks2_amend_add(QCryptoBlock *block,
                                   QCryptoBlockReadFunc readfunc,
                                   QCryptoBlockWriteFunc writefunc,
                                   QCryptoBlockFlushFunc flushfunc,
                                   void *opaque,
                                   const QCryptoBlockAmendOptions *options,
                                   Error **errp)
{
    QCryptoBlockLUKS2 *luks = block->opaque;
    g_autoptr(QCryptoLUKS2Metadata) md = NULL;
    const QCryptoLUKS2Keyslot *any = NULL;
    QCryptoLUKS2KDFParams params;
    g_autoptr(QCryptoSecureBuf) key = NULL;
    QCryptoBlockKeyslots slots;
    int id;

    if (qcrypto_luks2_check_kdf_options(options->has_kdf, options->kdf,
                                        options->kdf_memory,
                                        options->kdf_parallel, errp) < 0) {
        return -1;
    }
    qcrypto_luks2_keyslots(luks, &slots);
    /*
     * No --force over an active LUKS2 slot: its JSON, digest and area
     * would have to go first (qemu-img has no LUKS2 to follow).
     */
    id = qcrypto_block_keyslot_select_free(&slots, options, false, errp);
    if (id < 0) {
        return -1;
    }
    for (int i = 0; i < QCRYPTO_LUKS2_KEYSLOTS_MAX && !any; i++) {
        any = luks->md->keyslots[i];
    }

    md = qcrypto_luks2_md_copy(luks, errp);
    if (!md ||
        qcrypto_luks2_amend_volume_key(block, readfunc, opaque, options, &key,
                                       errp) < 0) {
        return -1;
    }
    /* The AF hash follows the existing slots (sha256 otherwise). */
    qcrypto_luks2_kdf_params(&params, options->has_kdf, options->kdf,
                             any ? any->af_hash : QCRYPTO_HASH_ALGO_SHA256,
                             options->has_iter_time, options->iter_time,
                             options->kdf_memory, options->kdf_parallel);
    if (qcrypto_luks2_add_keyslot(md, id, &params, &options->new_secret,
                                  key->data, key->len, block, writefunc,
                                  opaque, errp) < 0) {
        return -1;
    }
    /* The key material on disk, then the header that names it. */
    if (qcrypto_block_flush(block, flushfunc, opaque, errp) < 0) {
        error_prepend(errp, "cannot write LUKS2 key slot %d: ", id);
        return -1;
    }
    return qcrypto_luks2_commit(block, &md, writefunc, flushfunc, opaque,
                                errp);
}

static int qcrypto_luks2_amend_erase(QCryptoBlock *block,
                                     QCryptoBlockReadFunc readfunc,
                                     QCryptoBlockWriteFunc writefunc,
                                     QCryptoBlockFlushFunc flushfunc,
                                     void *opaque,
                                     const QCryptoBlockAmendOptions *options,
                                     bool force, Error **errp)
{
    QCryptoBlockLUKS2 *luks = block->opaque;
    g_autoptr(QCryptoLUKS2Metadata) md = NULL;
    QCryptoLUKS2Keyslot wipe[QCRYPTO_LUKS2_KEYSLOTS_MAX];
    QCryptoBlockKeyslots slots;
    uint32_t selected;
    int nwipe = 0;

    qcrypto_luks2_keyslots(luks, &slots);
    if (qcrypto_block_keyslot_select_erase(block, &slots, readfunc, opaque,
                                           options, force, &selected,
                                           errp) < 0) {
        return -1;
    }

    md = qcrypto_luks2_md_copy(luks, errp);
    if (!md) {
        return -1;
    }
    for (int i = 0; i < QCRYPTO_LUKS2_KEYSLOTS_MAX; i++) {
        if (selected & (1u << i)) {
            wipe[nwipe++] = *luks->md->keyslots[i];
            qcrypto_luks2_metadata_remove_keyslot(md, i);
        }
    }
    /*
     * Header first, then the areas: a crash in between leaves slots that
     * no header names, never a header naming a wiped slot.
     */
    if (qcrypto_luks2_metadata_reload(md, errp) < 0 ||
        qcrypto_luks2_commit(block, &md, writefunc, flushfunc, opaque,
                             errp) < 0) {
        return -1;
    }
    for (int i = 0; i < nwipe; i++) {
        if (qcrypto_luks2_keyslot_wipe(&wipe[i], block, writefunc, opaque,
                                       errp) < 0) {
            return -1;
        }
    }
    return qcrypto_block_flush(block, flushfunc, opaque, errp);
}

static int qcrypto_luks2_amend(QCryptoBlock *block,
                               QCryptoBlockReadFunc readfunc,
                               QCryptoBlockWriteFunc writefunc,
                               QCryptoBlockFlushFunc flushfunc, void *opaque,
                               const QCryptoBlockAmendOptions *options,
                               bool force, Error **errp)
{
    if (options->state == QCRYPTO_BLOCK_AMEND_STATE_ACTIVE) {
        return qcrypto_luks2_amend_add(block, readfunc, writefunc, flushfunc,
                                       opaque, options, errp);
    }
    return qcrypto_luks2_amend_erase(block, readfunc, writefunc, flushfunc,
                                     opaque, options, force, errp);
}

/* ---- info ---- */

static int qcrypto_luks2_get_info(QCryptoBlock *block, QCryptoBlockInfo *info,
                                  Error **errp)
{
    QCryptoBlockLUKS2 *luks = block->opaque;
    const QCryptoLUKS2Metadata *md = luks->md;
    const QCryptoLUKS2Segment *seg = md->segments[0];
    int digest = seg->digest;
    QCryptoLUKS2Cipher c;
    int nslots = 0, ntokens = 0;

    info->version = 2;
    info->uuid = g_strdup(luks->hdr->bin.uuid);
    info->label = g_strdup(luks->hdr->bin.label);
    info->subsystem = g_strdup(luks->hdr->bin.subsystem);
    info->metadata_size = luks->hdr->bin.hdr_size;
    info->keyslots_size = md->keyslots_size;
    info->sector_size = seg->sector_size;
    info->payload_offset = seg->offset;
    info->detached_header = block->detached_header;

    /* The cipher from the segment, with the key size of its slots. */
    for (int i = 0; i < QCRYPTO_LUKS2_KEYSLOTS_MAX; i++) {
        const QCryptoLUKS2Keyslot *ks = md->keyslots[i];

        if (ks && ks->digest == digest && digest >= 0 &&
            qcrypto_luks2_cipher_parse(seg->encryption, ks->key_size, &c,
                                       NULL) == 0) {
            info->cipher_alg = c.alg;
            info->cipher_mode = c.mode;
            info->ivgen_alg = c.ivgen;
            info->has_ivgen_hash_alg = c.ivgen == QCRYPTO_IVGEN_ALGO_ESSIV;
            info->ivgen_hash_alg = c.ivgen_hash;
            break;
        }
    }
    if (digest >= 0) {
        info->hash_alg = md->digests[digest]->hash;
        info->master_key_iters = md->digests[digest]->iterations;
    }

    info->nsegments = 1;
    info->segments = g_new0(QCryptoBlockInfoLUKS2Segment, 1);
    info->segments[0] = (QCryptoBlockInfoLUKS2Segment) {
        .offset = seg->offset, .size_dynamic = seg->size_dynamic,
        .size = seg->size, .iv_tweak = seg->iv_tweak,
        .encryption = g_strdup(seg->encryption),
        .sector_size = seg->sector_size,
    };

    for (int i = 0; i < QCRYPTO_LUKS2_KEYSLOTS_MAX; i++) {
        if (md->keyslots[i]) {
            nslots = i + 1;
        }
    }
    for (int i = 0; i < QCRYPTO_LUKS2_TOKENS_MAX; i++) {
        ntokens += md->tokens[i] != NULL;
    }
    info->nslots = nslots;
    info->slots = g_new0(QCryptoBlockInfoLUKSSlot, nslots);
    for (int i = 0; i < nslots; i++) {
        const QCryptoLUKS2Keyslot *ks = md->keyslots[i];
        QCryptoBlockInfoLUKSSlot *s = &info->slots[i];

        if (!ks) {
            continue;
        }
        s->active = true;
        s->kdf = ks->kdf.type;
        s->iters = ks->kdf.type == QCRYPTO_BLOCK_KDF_PBKDF2 ?
            ks->kdf.iterations : ks->kdf.time;
        s->kdf_memory = ks->kdf.memory;
        s->kdf_parallel = ks->kdf.parallel;
        s->stripes = ks->af_stripes;
        s->key_offset = ks->area_offset;
        s->priority = ks->priority;
        s->bound = digest >= 0 && ks->digest == digest;
    }
    info->ntokens = ntokens;
    info->tokens = g_new0(QCryptoBlockInfoLUKS2Token, ntokens);
    for (int i = 0, n = 0; i < QCRYPTO_LUKS2_TOKENS_MAX; i++) {
        if (md->tokens[i]) {
            info->tokens[n++] = (QCryptoBlockInfoLUKS2Token) {
                .id = i, .type = g_strdup(md->tokens[i]->type),
                .keyslots = md->tokens[i]->keyslots,
            };
        }
    }
    return 0;
}

/* The same format as LUKS1 (and magic): the header's version tells. */
const QCryptoBlockDriver qcrypto_block_driver_luks2 = {
    .format = QCRYPTO_BLOCK_FORMAT_LUKS,
    .version = QCRYPTO_LUKS2_VERSION,
    .name = "LUKS",
    .open = qcrypto_luks2_open,
    .create = qcrypto_luks2_create,
    .amend = qcrypto_luks2_amend,
    .get_info = qcrypto_luks2_get_info,
    .cleanup = qcrypto_luks2_cleanup,
    .has_format = qcrypto_luks2_has_format,
    .probe = qcrypto_luks2_probe,
    .calculate_payload_offset = qcrypto_luks2_calculate_payload_offset,
};
