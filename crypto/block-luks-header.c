/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The LUKS1 header: decoding, encoding and validation of its 592 bytes,
 * the cipher spec strings, and the layout of a new image.
 *
 * Every field read from disk goes through a named validation function
 * below before anything uses it, each failure with its own message, so a
 * hostile header is refused at open, before any allocation or PBKDF2 run
 * it could size.
 */
#include <inttypes.h>
#include <string.h>

#include "crypto/pbkdf.h"
#include "dmcryptpriv.h"
#include "lukspriv.h"
#include "qemu/bswap.h"

/* The spec: "all values are stored big endian" (include/qemu/bswap.h). */

/* Offsets of the fields, from the spec's figure 1 (phdr) and 2 (key slot). */
enum {
    HDR_MAGIC = 0,
    HDR_VERSION = 6,
    HDR_CIPHER_NAME = 8,
    HDR_CIPHER_MODE = 40,
    HDR_HASH_SPEC = 72,
    HDR_PAYLOAD_OFFSET = 104,
    HDR_KEY_BYTES = 108,
    HDR_MK_DIGEST = 112,
    HDR_MK_DIGEST_SALT = 132,
    HDR_MK_DIGEST_ITER = 164,
    HDR_UUID = 168,
    SLOT_ACTIVE = 0,
    SLOT_ITERATIONS = 4,
    SLOT_SALT = 8,
    SLOT_KEY_OFFSET = 40,
    SLOT_STRIPES = 44,
};

G_STATIC_ASSERT(HDR_UUID + QCRYPTO_LUKS_UUID_LEN ==
                QCRYPTO_LUKS_KEY_SLOTS_OFFSET);
G_STATIC_ASSERT(QCRYPTO_LUKS_KEY_SLOTS_OFFSET + QCRYPTO_LUKS_NUM_KEY_SLOTS *
                QCRYPTO_LUKS_KEY_SLOT_LEN == QCRYPTO_LUKS_HEADER_LEN);

void qcrypto_luks_header_decode(const uint8_t *buf, QCryptoLUKSHeader *hdr)
{
    memcpy(hdr->magic, buf + HDR_MAGIC, QCRYPTO_LUKS_MAGIC_LEN);
    hdr->version = lduw_be_p(buf + HDR_VERSION);
    memcpy(hdr->cipher_name, buf + HDR_CIPHER_NAME,
           QCRYPTO_LUKS_CIPHER_NAME_LEN);
    memcpy(hdr->cipher_mode, buf + HDR_CIPHER_MODE,
           QCRYPTO_LUKS_CIPHER_MODE_LEN);
    memcpy(hdr->hash_spec, buf + HDR_HASH_SPEC, QCRYPTO_LUKS_HASH_SPEC_LEN);
    hdr->payload_offset = ldl_be_p(buf + HDR_PAYLOAD_OFFSET);
    hdr->key_bytes = ldl_be_p(buf + HDR_KEY_BYTES);
    memcpy(hdr->mk_digest, buf + HDR_MK_DIGEST, QCRYPTO_LUKS_DIGEST_LEN);
    memcpy(hdr->mk_digest_salt, buf + HDR_MK_DIGEST_SALT,
           QCRYPTO_LUKS_SALT_LEN);
    hdr->mk_digest_iter = ldl_be_p(buf + HDR_MK_DIGEST_ITER);
    memcpy(hdr->uuid, buf + HDR_UUID, QCRYPTO_LUKS_UUID_LEN);

    for (int i = 0; i < QCRYPTO_LUKS_NUM_KEY_SLOTS; i++) {
        const uint8_t *p = buf + QCRYPTO_LUKS_KEY_SLOTS_OFFSET +
            i * QCRYPTO_LUKS_KEY_SLOT_LEN;
        QCryptoLUKSKeySlot *slot = &hdr->slots[i];

        slot->active = ldl_be_p(p + SLOT_ACTIVE);
        slot->iterations = ldl_be_p(p + SLOT_ITERATIONS);
        memcpy(slot->salt, p + SLOT_SALT, QCRYPTO_LUKS_SALT_LEN);
        slot->key_offset = ldl_be_p(p + SLOT_KEY_OFFSET);
        slot->stripes = ldl_be_p(p + SLOT_STRIPES);
    }
}

void qcrypto_luks_header_encode(const QCryptoLUKSHeader *hdr, uint8_t *buf)
{
    memset(buf, 0, QCRYPTO_LUKS_HEADER_LEN);
    memcpy(buf + HDR_MAGIC, hdr->magic, QCRYPTO_LUKS_MAGIC_LEN);
    stw_be_p(buf + HDR_VERSION, hdr->version);
    memcpy(buf + HDR_CIPHER_NAME, hdr->cipher_name,
           QCRYPTO_LUKS_CIPHER_NAME_LEN);
    memcpy(buf + HDR_CIPHER_MODE, hdr->cipher_mode,
           QCRYPTO_LUKS_CIPHER_MODE_LEN);
    memcpy(buf + HDR_HASH_SPEC, hdr->hash_spec, QCRYPTO_LUKS_HASH_SPEC_LEN);
    stl_be_p(buf + HDR_PAYLOAD_OFFSET, hdr->payload_offset);
    stl_be_p(buf + HDR_KEY_BYTES, hdr->key_bytes);
    memcpy(buf + HDR_MK_DIGEST, hdr->mk_digest, QCRYPTO_LUKS_DIGEST_LEN);
    memcpy(buf + HDR_MK_DIGEST_SALT, hdr->mk_digest_salt,
           QCRYPTO_LUKS_SALT_LEN);
    stl_be_p(buf + HDR_MK_DIGEST_ITER, hdr->mk_digest_iter);
    memcpy(buf + HDR_UUID, hdr->uuid, QCRYPTO_LUKS_UUID_LEN);

    for (int i = 0; i < QCRYPTO_LUKS_NUM_KEY_SLOTS; i++) {
        uint8_t *p = buf + QCRYPTO_LUKS_KEY_SLOTS_OFFSET +
            i * QCRYPTO_LUKS_KEY_SLOT_LEN;
        const QCryptoLUKSKeySlot *slot = &hdr->slots[i];

        stl_be_p(p + SLOT_ACTIVE, slot->active);
        stl_be_p(p + SLOT_ITERATIONS, slot->iterations);
        memcpy(p + SLOT_SALT, slot->salt, QCRYPTO_LUKS_SALT_LEN);
        stl_be_p(p + SLOT_KEY_OFFSET, slot->key_offset);
        stl_be_p(p + SLOT_STRIPES, slot->stripes);
    }
}

uint64_t qcrypto_luks_key_material_len(uint32_t key_bytes, uint32_t stripes)
{
    uint64_t len = (uint64_t)key_bytes * stripes;

    return qcrypto_luks_round_up(len, QCRYPTO_LUKS_SECTOR_SIZE);
}

/* ---- Cipher spec strings (dm-crypt's "cipher-chainmode-ivmode:ivopts") */

/*
 * "xts-plain64", "cbc-essiv:sha256", "ecb" -> mode, IV generator, hash
 * (dmcrypt-cipher.c), with LUKS1's own messages.
 */
static int qcrypto_block_luks_parse_cipher_mode(const char *str,
                                                QCryptoLUKSCipherSpec *spec,
                                                Error **errp)
{
    g_auto(QCryptoDMCryptChain) chain = { 0 };

    switch (qcrypto_dmcrypt_chain_parse(str, &chain)) {
    case QCRYPTO_DMCRYPT_CHAIN_OK:
        break;
    case QCRYPTO_DMCRYPT_CHAIN_BAD_MODE:
        error_setg(errp, "Unsupported LUKS cipher mode '%s'", str);
        return -1;
    case QCRYPTO_DMCRYPT_CHAIN_NO_IVGEN:
        error_setg(errp, "LUKS cipher mode '%s' lacks an IV generator "
                   "(as in '%s-plain64')", str, str);
        return -1;
    case QCRYPTO_DMCRYPT_CHAIN_BAD_IVGEN:
        error_setg(errp, "Unsupported IV generator '%s' in LUKS cipher "
                   "mode '%s'", chain.ivgen_str, str);
        return -1;
    case QCRYPTO_DMCRYPT_CHAIN_NO_HASH:
        error_setg(errp, "LUKS cipher mode '%s' lacks the ESSIV hash "
                   "(as in 'essiv:sha256')", str);
        return -1;
    case QCRYPTO_DMCRYPT_CHAIN_BAD_HASH:
        error_setg(errp, "Unsupported ESSIV hash '%s' in LUKS cipher "
                   "mode '%s'", chain.hash_str, str);
        return -1;
    case QCRYPTO_DMCRYPT_CHAIN_IVGEN_OPTION:
        /*
         * A hash after a generator that takes none is ignored, as QEMU
         * and dm-crypt do: qemu-img writes "xts-plain64:sha256" for
         * ivgen-alg=plain64,ivgen-hash-alg=sha256 (libvirt asks for it).
         * qemu-img's info does not show that hash; nor does ours.
         */
        if (qcrypto_hash_algo_parse(chain.hash_str) >= 0) {
            break;
        }
        error_setg(errp, "IV generator '%s' takes no option, yet LUKS "
                   "cipher mode '%s' gives one", chain.ivgen_str, str);
        return -1;
    }
    spec->cipher_mode = chain.mode;
    spec->ivgen_alg = chain.ivgen;
    spec->has_ivgen_hash_alg = chain.has_ivgen_hash;
    if (chain.has_ivgen_hash) {
        spec->ivgen_hash_alg = chain.ivgen_hash;
    }
    return 0;
}

/* cipher_name and key_bytes -> algorithm, given the mode. */
static int qcrypto_block_luks_parse_cipher_name(const char *name,
                                                uint32_t key_bytes,
                                                QCryptoLUKSCipherSpec *spec,
                                                Error **errp)
{
    if (!qcrypto_dmcrypt_cipher_name_known(name)) {
        error_setg(errp, "Unsupported LUKS cipher '%s'", name);
        return -1;
    }
    if (!qcrypto_dmcrypt_cipher_find(name, spec->cipher_mode, key_bytes,
                                     &spec->cipher_alg)) {
        error_setg(errp, "LUKS key size of %" PRIu32 " bytes does not fit "
                   "cipher %s in mode %s", key_bytes, name,
                   qcrypto_cipher_mode_name(spec->cipher_mode));
        return -1;
    }
    return 0;
}

/* ---- Validation: one named function per rule */

static int qcrypto_block_luks_validate_magic(const QCryptoLUKSHeader *hdr,
                                             Error **errp)
{
    if (memcmp(hdr->magic, QCRYPTO_LUKS_MAGIC, QCRYPTO_LUKS_MAGIC_LEN)) {
        error_setg(errp, "Not a LUKS image: the magic bytes are wrong");
        return -1;
    }
    return 0;
}

static int qcrypto_block_luks_validate_version(const QCryptoLUKSHeader *hdr,
                                               Error **errp)
{
    if (hdr->version != QCRYPTO_LUKS_VERSION) {
        error_setg(errp, "LUKS version %u is not supported by the LUKS1 "
                   "driver", hdr->version);
        return -1;
    }
    return 0;
}

static int qcrypto_block_luks_validate_string(const char *field, size_t len,
                                              const char *what, Error **errp)
{
    if (!memchr(field, '\0', len)) {
        error_setg(errp, "LUKS header field '%s' is not NUL-terminated "
                   "within its %zu bytes", what, len);
        return -1;
    }
    return 0;
}

static int qcrypto_block_luks_validate_strings(const QCryptoLUKSHeader *hdr,
                                               Error **errp)
{
    if (qcrypto_block_luks_validate_string(hdr->cipher_name,
                                           sizeof(hdr->cipher_name),
                                           "cipher-name", errp) < 0 ||
        qcrypto_block_luks_validate_string(hdr->cipher_mode,
                                           sizeof(hdr->cipher_mode),
                                           "cipher-mode", errp) < 0 ||
        qcrypto_block_luks_validate_string(
            hdr->hash_spec, sizeof(hdr->hash_spec), "hash-spec", errp) < 0 ||
        qcrypto_block_luks_validate_string(hdr->uuid, sizeof(hdr->uuid),
                                           "uuid", errp) < 0) {
        return -1;
    }
    return 0;
}

static int qcrypto_block_luks_validate_hash_spec(const QCryptoLUKSHeader *hdr,
                                                 QCryptoLUKSCipherSpec *spec,
                                                 Error **errp)
{
    int hash = qcrypto_hash_algo_parse(hdr->hash_spec);

    if (hash < 0 || !qcrypto_pbkdf2_supports(hash)) {
        error_setg(errp, "Unsupported LUKS hash '%s'", hdr->hash_spec);
        return -1;
    }
    spec->hash_alg = hash;
    return 0;
}

/*
 * The IV generator must be buildable for this cipher: ESSIV keys the
 * cipher family with the whole digest, so e.g. des3_ede with
 * essiv:sha256 (a 32-byte 3DES key) does not exist. Building the sector
 * cipher the payload will use, with a dummy key, is the exact test.
 */
static int qcrypto_block_luks_validate_ivgen(const QCryptoLUKSCipherSpec *spec,
                                             uint32_t key_bytes, Error **errp)
{
    QCryptoSectorCipherSpec sspec = qcrypto_luks_sector_spec(spec);
    g_autofree uint8_t *key = g_malloc0(key_bytes);
    g_autoptr(QCryptoSectorCipher) sc =
        qcrypto_sector_cipher_new(&sspec, key, key_bytes,
                                  QCRYPTO_LUKS_SECTOR_SIZE, 0, 0, errp);

    if (!sc) {
        error_prepend(errp, "LUKS IV generator: ");
        return -1;
    }
    return 0;
}

static int qcrypto_block_luks_validate_cipher(const QCryptoLUKSHeader *hdr,
                                              QCryptoLUKSCipherSpec *spec,
                                              Error **errp)
{
    if (qcrypto_block_luks_parse_cipher_mode(hdr->cipher_mode, spec,
                                             errp) < 0 ||
        qcrypto_block_luks_parse_cipher_name(hdr->cipher_name, hdr->key_bytes,
                                             spec, errp) < 0) {
        return -1;
    }
    if ((spec->cipher_mode == QCRYPTO_CIPHER_MODE_XTS ||
         spec->cipher_mode == QCRYPTO_CIPHER_MODE_LRW) &&
        qcrypto_cipher_get_block_len(spec->cipher_alg) != 16) {
        error_setg(errp, "LUKS cipher %s-%s: %s needs a 128-bit block "
                   "cipher", hdr->cipher_name, hdr->cipher_mode,
                   qcrypto_cipher_mode_name(spec->cipher_mode));
        return -1;
    }
    if (!qcrypto_cipher_supports(spec->cipher_alg, spec->cipher_mode)) {
        error_setg(errp, "Cipher %s in mode %s is not supported by this "
                   "build", qcrypto_cipher_algo_name(spec->cipher_alg),
                   qcrypto_cipher_mode_name(spec->cipher_mode));
        return -1;
    }
    return qcrypto_block_luks_validate_ivgen(spec, hdr->key_bytes, errp);
}

static int qcrypto_block_luks_validate_iterations(uint32_t iterations,
                                                  const char *what,
                                                  Error **errp)
{
    /*
     * LUKS 1.0-era images have as few as 10 master key digest iterations:
     * anything from 1 is accepted on open; 1000 is a minimum for create.
     * No upper bound here: a costly slot is legal (cryptsetup makes them
     * on request) and must not hide the header; unlocking skips the slots
     * above the open option max-pbkdf2-iterations (crypto/block-luks.c).
     */
    if (iterations == 0) {
        error_setg(errp, "LUKS %s has 0 PBKDF2 iterations", what);
        return -1;
    }
    return 0;
}

static int qcrypto_block_luks_validate_mk_digest(const QCryptoLUKSHeader *hdr,
                                                 Error **errp)
{
    return qcrypto_block_luks_validate_iterations(hdr->mk_digest_iter,
                                                  "master key digest", errp);
}

/* State, iterations and stripes of one slot. */
static int qcrypto_block_luks_validate_key_slot(const QCryptoLUKSHeader *hdr,
                                                int i, Error **errp)
{
    const QCryptoLUKSKeySlot *slot = &hdr->slots[i];
    g_autofree char *what = NULL;

    if (slot->active != QCRYPTO_LUKS_KEY_SLOT_ACTIVE &&
        slot->active != QCRYPTO_LUKS_KEY_SLOT_DISABLED) {
        error_setg(errp, "LUKS key slot %d has an invalid state 0x%08"
                   PRIx32 " (neither active nor disabled)", i, slot->active);
        return -1;
    }
    /* cryptsetup enforces LUKS_STRIPES on every slot; so do we. */
    if (slot->stripes != QCRYPTO_LUKS_STRIPES) {
        error_setg(errp, "LUKS key slot %d has %" PRIu32 " AF stripes, "
                   "LUKS1 requires %d", i, slot->stripes,
                   QCRYPTO_LUKS_STRIPES);
        return -1;
    }
    if (slot->active == QCRYPTO_LUKS_KEY_SLOT_ACTIVE) {
        what = g_strdup_printf("key slot %d", i);
        return qcrypto_block_luks_validate_iterations(slot->iterations, what,
                                                      errp);
    }
    return 0;
}

/*
 * Where each slot's key material lies: after the header, apart from the
 * other slots, before the payload (in the same file), inside the file.
 */
static int qcrypto_block_luks_validate_key_slot_areas(
    const QCryptoLUKSHeader *hdr, uint64_t file_size, bool detached,
    Error **errp)
{
    uint64_t start[QCRYPTO_LUKS_NUM_KEY_SLOTS];
    uint64_t end[QCRYPTO_LUKS_NUM_KEY_SLOTS];
    uint64_t payload = (uint64_t)hdr->payload_offset *
        QCRYPTO_LUKS_SECTOR_SIZE;
    uint64_t len = qcrypto_luks_key_material_len(hdr->key_bytes,
                                                 QCRYPTO_LUKS_STRIPES);

    for (int i = 0; i < QCRYPTO_LUKS_NUM_KEY_SLOTS; i++) {
        start[i] = (uint64_t)hdr->slots[i].key_offset *
            QCRYPTO_LUKS_SECTOR_SIZE;
        end[i] = start[i] + len;
        if (start[i] < QCRYPTO_LUKS_HEADER_LEN) {
            error_setg(errp, "LUKS key slot %d key material at sector %"
                       PRIu32 " overlaps the header", i,
                       hdr->slots[i].key_offset);
            return -1;
        }
        if (!detached && end[i] > payload) {
            error_setg(errp, "LUKS key slot %d key material (sectors %"
                       PRIu64 "-%" PRIu64 ") overlaps the payload at "
                       "sector %" PRIu32, i,
                       start[i] / QCRYPTO_LUKS_SECTOR_SIZE,
                       end[i] / QCRYPTO_LUKS_SECTOR_SIZE - 1,
                       hdr->payload_offset);
            return -1;
        }
        if (file_size && end[i] > file_size) {
            error_setg(errp, "LUKS key slot %d key material ends at byte %"
                       PRIu64 ", beyond the end of the file (%" PRIu64
                       " bytes)", i, end[i], file_size);
            return -1;
        }
        for (int j = 0; j < i; j++) {
            if (start[i] < end[j] && start[j] < end[i]) {
                error_setg(errp, "LUKS key slots %d and %d have "
                           "overlapping key material", j, i);
                return -1;
            }
        }
    }
    return 0;
}

static int qcrypto_block_luks_validate_payload_offset(
    const QCryptoLUKSHeader *hdr, uint64_t file_size, bool detached,
    Error **errp)
{
    uint64_t payload = (uint64_t)hdr->payload_offset *
        QCRYPTO_LUKS_SECTOR_SIZE;

    if (detached) {
        /* The payload offset counts in the data file, which we do not see. */
        return 0;
    }
    if (payload == 0) {
        error_setg(errp, "LUKS payload offset is 0: this is a detached "
                   "header, open it with its data file");
        return -1;
    }
    if (payload < QCRYPTO_LUKS_HEADER_LEN) {
        error_setg(errp, "LUKS payload offset (sector %" PRIu32 ") "
                   "overlaps the header", hdr->payload_offset);
        return -1;
    }
    if (file_size && payload > file_size) {
        error_setg(errp, "LUKS payload offset %" PRIu64 " is beyond the "
                   "end of the file (%" PRIu64 " bytes)", payload,
                   file_size);
        return -1;
    }
    return 0;
}

int qcrypto_luks_header_validate(const QCryptoLUKSHeader *hdr,
                                 uint64_t file_size, bool detached,
                                 QCryptoLUKSCipherSpec *spec, Error **errp)
{
    if (qcrypto_block_luks_validate_magic(hdr, errp) < 0 ||
        qcrypto_block_luks_validate_version(hdr, errp) < 0 ||
        qcrypto_block_luks_validate_strings(hdr, errp) < 0 ||
        qcrypto_block_luks_validate_hash_spec(hdr, spec, errp) < 0 ||
        qcrypto_block_luks_validate_cipher(hdr, spec, errp) < 0 ||
        qcrypto_block_luks_validate_mk_digest(hdr, errp) < 0 ||
        qcrypto_block_luks_validate_payload_offset(hdr, file_size, detached,
                                                   errp) < 0) {
        return -1;
    }
    for (int i = 0; i < QCRYPTO_LUKS_NUM_KEY_SLOTS; i++) {
        if (qcrypto_block_luks_validate_key_slot(hdr, i, errp) < 0) {
            return -1;
        }
    }
    return qcrypto_block_luks_validate_key_slot_areas(hdr, file_size, detached,
                                                      errp);
}

/* ---- Create: spec strings and layout */

int qcrypto_luks_cipher_spec_format(const QCryptoLUKSCipherSpec *spec,
                                    QCryptoLUKSHeader *hdr, Error **errp)
{
    const char *name = qcrypto_dmcrypt_cipher_name(spec->cipher_alg);
    const char *mode = qcrypto_cipher_mode_name(spec->cipher_mode);
    g_autofree char *modestr = NULL;
    size_t keylen = qcrypto_cipher_get_mode_key_len(spec->cipher_alg,
                                                    spec->cipher_mode);

    if (!name) {
        error_setg(errp, "Cipher %s cannot be used with LUKS",
                   qcrypto_cipher_algo_name(spec->cipher_alg));
        return -1;
    }
    if ((spec->cipher_mode == QCRYPTO_CIPHER_MODE_XTS ||
         spec->cipher_mode == QCRYPTO_CIPHER_MODE_LRW) &&
        qcrypto_cipher_get_block_len(spec->cipher_alg) != 16) {
        error_setg(errp, "Cipher mode %s needs a 128-bit block cipher, "
                   "not %s", mode, qcrypto_cipher_algo_name(spec->cipher_alg));
        return -1;
    }
    if (!qcrypto_cipher_supports(spec->cipher_alg, spec->cipher_mode)) {
        error_setg(errp, "Cipher %s in mode %s is not supported by this "
                   "build", qcrypto_cipher_algo_name(spec->cipher_alg), mode);
        return -1;
    }
    if (!qcrypto_pbkdf2_supports(spec->hash_alg)) {
        error_setg(errp, "Hash %s is not supported for PBKDF2",
                   qcrypto_hash_algo_name(spec->hash_alg));
        return -1;
    }
    if (spec->cipher_mode != QCRYPTO_CIPHER_MODE_ECB) {
        if (spec->ivgen_alg == QCRYPTO_IVGEN_ALGO_ESSIV &&
            !qcrypto_hash_supports(spec->ivgen_hash_alg)) {
            error_setg(errp, "ESSIV hash %s is not supported",
                       qcrypto_hash_algo_name(spec->ivgen_hash_alg));
            return -1;
        }
        if (spec->ivgen_alg == QCRYPTO_IVGEN_ALGO_NULL) {
            error_setg(errp, "Cipher mode %s needs an IV generator", mode);
            return -1;
        }
    }
    if (qcrypto_block_luks_validate_ivgen(spec, keylen, errp) < 0) {
        return -1;
    }
    /*
     * ECB takes no IV, but QEMU (crypto/block-luks.c, header parsing)
     * refuses a cipher mode without "-<ivgen>": write the form QEMU itself
     * writes, "ecb-plain64", whose IV generator QEMU, dm-crypt and we all
     * ignore for a cipher without IVs. (LUKS2 keeps cryptsetup's "ecb".)
     */
    if (spec->cipher_mode == QCRYPTO_CIPHER_MODE_ECB) {
        modestr = g_strdup_printf("%s-%s", mode, qcrypto_ivgen_algo_name(
                                      QCRYPTO_IVGEN_ALGO_PLAIN64));
    } else {
        modestr = qcrypto_dmcrypt_chain_format(spec->cipher_mode,
                                               spec->ivgen_alg,
                                               spec->ivgen_hash_alg);
    }
    /* Longest case: "xts-essiv:ripemd160" fits easily in 31 chars. */
    g_assert(strlen(modestr) < QCRYPTO_LUKS_CIPHER_MODE_LEN);

    memset(hdr->cipher_name, 0, sizeof(hdr->cipher_name));
    memset(hdr->cipher_mode, 0, sizeof(hdr->cipher_mode));
    memset(hdr->hash_spec, 0, sizeof(hdr->hash_spec));
    strcpy(hdr->cipher_name, name);
    strcpy(hdr->cipher_mode, modestr);
    strcpy(hdr->hash_spec, qcrypto_hash_algo_name(spec->hash_alg));
    hdr->key_bytes = keylen;
    return 0;
}

int qcrypto_luks_layout(QCryptoLUKSHeader *hdr, uint64_t align_payload,
                        bool detached, uint64_t *header_len, Error **errp)
{
    const uint64_t align = QCRYPTO_LUKS_KEY_SLOT_ALIGN /
        QCRYPTO_LUKS_SECTOR_SIZE;
    uint64_t stride = qcrypto_luks_key_material_len(hdr->key_bytes,
                                                    QCRYPTO_LUKS_STRIPES) /
        QCRYPTO_LUKS_SECTOR_SIZE;
    uint64_t end, payload;

    /* Each slot starts on a 4096-byte boundary, the first at 4096. */
    stride = qcrypto_luks_round_up(stride, align);
    for (int i = 0; i < QCRYPTO_LUKS_NUM_KEY_SLOTS; i++) {
        hdr->slots[i].key_offset = align + stride * i;
        hdr->slots[i].stripes = QCRYPTO_LUKS_STRIPES;
    }
    end = align + stride * QCRYPTO_LUKS_NUM_KEY_SLOTS;

    if (detached) {
        if (align_payload) {
            error_setg(errp, "align-payload cannot be used with a detached "
                       "header: the payload starts at offset 0 of its file");
            return -1;
        }
        payload = 0;
        *header_len = end * QCRYPTO_LUKS_SECTOR_SIZE;
    } else {
        /* cryptsetup: the end of the key material, rounded up. */
        if (align_payload > UINT32_MAX) {
            error_setg(errp, "align-payload %" PRIu64 " is too large (at "
                       "most %" PRIu32 " sectors)", align_payload,
                       UINT32_MAX);
            return -1;
        }
        payload = align_payload ?
            qcrypto_luks_round_up(end, align_payload) : end;
        if (payload > UINT32_MAX) {
            error_setg(errp, "align-payload %" PRIu64 " puts the payload "
                       "beyond what LUKS1 can address", align_payload);
            return -1;
        }
        *header_len = payload * QCRYPTO_LUKS_SECTOR_SIZE;
    }
    hdr->payload_offset = payload;
    return 0;
}
