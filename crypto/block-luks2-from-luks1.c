/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * A LUKS1 header as LUKS2 metadata, the way `cryptsetup convert --type
 * luks2` sees it (cryptsetup's lib/luks2/luks2_luks1_convert.c is the
 * reference): the same volume key, key slots and payload, nothing
 * re-encrypted.
 *
 *   LUKS1                          LUKS2
 *   cipher_name "-" cipher_mode    segment 0 and key-slot area "encryption"
 *   payload_offset (sectors)       segment 0 "offset" (bytes), sector 512
 *   key slot: iterations, salt     "kdf": pbkdf2 with hash_spec
 *   key slot: stripes              "af": luks1 with hash_spec
 *   key material                   "area": raw, copied to the new area
 *   mk_digest (20 bytes), salt,    digest 0: pbkdf2 with hash_spec, bound
 *   mk_digest_iter                 to every active slot and segment 0
 *
 * Only the in-place decryption uses it (block-luks2-reencrypt-decrypt.c):
 * the result is a detached header, written to its own file, so the key
 * slots can be laid out afresh, one after the other, instead of being
 * moved inside the image as cryptsetup convert must.
 */
#include <string.h>

#include "crypto/random.h"
#include "blockpriv.h"
#include "crypto/luks2priv.h"
#include "lukspriv.h"

/* The LUKS2 header size used for the converted metadata. */
#define FROM_LUKS1_HDR_SIZE QCRYPTO_LUKS2_HDR_SIZE_MIN

typedef struct MemArea {
    uint8_t *buf;
    uint64_t len;
} MemArea;

static int mem_area_write(QCryptoBlock *block, uint64_t offset,
                          const uint8_t *buf, size_t len, void *opaque,
                          Error **errp)
{
    MemArea *m = opaque;

    if (offset > m->len || len > m->len - offset) {
        error_setg(errp, "LUKS2 header write beyond its area");
        return -1;
    }
    memcpy(m->buf + offset, buf, len);
    return 0;
}

static char *luks1_cipher_spec(const QCryptoLUKSHeader *h)
{
    return g_strdup_printf("%s-%s", h->cipher_name, h->cipher_mode);
}

/* The JSON metadata; key slot i's area at areas[i] (0: inactive). */
static char *luks1_json(const QCryptoLUKSHeader *h, const uint64_t *areas,
                        uint64_t area_len, uint64_t keyslots_size)
{
    g_autoptr(JsonBuilder) b = json_builder_new();
    g_autoptr(JsonGenerator) gen = json_generator_new();
    g_autoptr(JsonNode) root = NULL;
    g_autofree char *spec = luks1_cipher_spec(h);
    g_autofree char *dsalt = g_base64_encode(h->mk_digest_salt,
                                             sizeof(h->mk_digest_salt));
    g_autofree char *digest = g_base64_encode(h->mk_digest,
                                              sizeof(h->mk_digest));
    char num[32];

#define STR_U64(v) (g_snprintf(num, sizeof(num), "%" PRIu64, (uint64_t)(v)), num)
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "keyslots");
    json_builder_begin_object(b);
    for (int i = 0; i < QCRYPTO_LUKS_NUM_KEY_SLOTS; i++) {
        const QCryptoLUKSKeySlot *s = &h->slots[i];
        g_autofree char *salt = NULL;

        if (!areas[i]) {
            continue;
        }
        salt = g_base64_encode(s->salt, sizeof(s->salt));
        json_builder_set_member_name(b, STR_U64(i));
        json_builder_begin_object(b);
        json_builder_set_member_name(b, "type");
        json_builder_add_string_value(b, "luks2");
        json_builder_set_member_name(b, "key_size");
        json_builder_add_int_value(b, h->key_bytes);
        json_builder_set_member_name(b, "af");
        json_builder_begin_object(b);
        json_builder_set_member_name(b, "type");
        json_builder_add_string_value(b, "luks1");
        json_builder_set_member_name(b, "stripes");
        json_builder_add_int_value(b, s->stripes);
        json_builder_set_member_name(b, "hash");
        json_builder_add_string_value(b, h->hash_spec);
        json_builder_end_object(b);
        json_builder_set_member_name(b, "area");
        json_builder_begin_object(b);
        json_builder_set_member_name(b, "type");
        json_builder_add_string_value(b, "raw");
        json_builder_set_member_name(b, "offset");
        json_builder_add_string_value(b, STR_U64(areas[i]));
        json_builder_set_member_name(b, "size");
        json_builder_add_string_value(b, STR_U64(area_len));
        json_builder_set_member_name(b, "encryption");
        json_builder_add_string_value(b, spec);
        json_builder_set_member_name(b, "key_size");
        json_builder_add_int_value(b, h->key_bytes);
        json_builder_end_object(b);
        json_builder_set_member_name(b, "kdf");
        json_builder_begin_object(b);
        json_builder_set_member_name(b, "type");
        json_builder_add_string_value(b, "pbkdf2");
        json_builder_set_member_name(b, "hash");
        json_builder_add_string_value(b, h->hash_spec);
        json_builder_set_member_name(b, "iterations");
        json_builder_add_int_value(b, s->iterations);
        json_builder_set_member_name(b, "salt");
        json_builder_add_string_value(b, salt);
        json_builder_end_object(b);
        json_builder_end_object(b);
    }
    json_builder_end_object(b);
    json_builder_set_member_name(b, "tokens");
    json_builder_begin_object(b);
    json_builder_end_object(b);
    json_builder_set_member_name(b, "segments");
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "0");
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "type");
    json_builder_add_string_value(b, "crypt");
    json_builder_set_member_name(b, "offset");
    json_builder_add_string_value(b, STR_U64((uint64_t)h->payload_offset *
                                             QCRYPTO_LUKS_SECTOR_SIZE));
    json_builder_set_member_name(b, "size");
    json_builder_add_string_value(b, "dynamic");
    json_builder_set_member_name(b, "iv_tweak");
    json_builder_add_string_value(b, "0");
    json_builder_set_member_name(b, "encryption");
    json_builder_add_string_value(b, spec);
    json_builder_set_member_name(b, "sector_size");
    json_builder_add_int_value(b, QCRYPTO_LUKS_SECTOR_SIZE);
    json_builder_end_object(b);
    json_builder_end_object(b);
    json_builder_set_member_name(b, "digests");
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "0");
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "type");
    json_builder_add_string_value(b, "pbkdf2");
    json_builder_set_member_name(b, "keyslots");
    json_builder_begin_array(b);
    for (int i = 0; i < QCRYPTO_LUKS_NUM_KEY_SLOTS; i++) {
        if (areas[i]) {
            json_builder_add_string_value(b, STR_U64(i));
        }
    }
    json_builder_end_array(b);
    json_builder_set_member_name(b, "segments");
    json_builder_begin_array(b);
    json_builder_add_string_value(b, "0");
    json_builder_end_array(b);
    json_builder_set_member_name(b, "hash");
    json_builder_add_string_value(b, h->hash_spec);
    json_builder_set_member_name(b, "iterations");
    json_builder_add_int_value(b, h->mk_digest_iter);
    json_builder_set_member_name(b, "salt");
    json_builder_add_string_value(b, dsalt);
    json_builder_set_member_name(b, "digest");
    json_builder_add_string_value(b, digest);
    json_builder_end_object(b);
    json_builder_end_object(b);
    json_builder_set_member_name(b, "config");
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "json_size");
    json_builder_add_string_value(b, STR_U64(FROM_LUKS1_HDR_SIZE -
                                             QCRYPTO_LUKS2_BIN_HDR_LEN));
    json_builder_set_member_name(b, "keyslots_size");
    json_builder_add_string_value(b, STR_U64(keyslots_size));
    json_builder_end_object(b);
    json_builder_end_object(b);
#undef STR_U64
    root = json_builder_get_root(b);
    json_generator_set_root(gen, root);
    return json_generator_to_data(gen, NULL);
}

int qcrypto_luks2_from_luks1(const uint8_t *phdr, uint64_t file_size,
                             QCryptoBlockReadFunc readfunc, void *opaque,
                             uint8_t **out, uint64_t *out_len, Error **errp)
{
    QCryptoLUKSHeader h;
    QCryptoLUKSCipherSpec spec;
    uint64_t areas[QCRYPTO_LUKS_NUM_KEY_SLOTS] = { 0 };
    uint64_t payload, material, area_len, next, keyslots_size;
    g_autoptr(QCryptoLUKS2Header) hdr = g_new0(QCryptoLUKS2Header, 1);
    g_autoptr(QCryptoLUKS2Metadata) md = NULL;
    g_autoptr(QCryptoBlock) block = qcrypto_block_new(QCRYPTO_BLOCK_FORMAT_LUKS,
                                                      NULL);
    g_autofree char *json = NULL;
    MemArea m = { 0 };

    qcrypto_luks_header_decode(phdr, &h);
    if (qcrypto_luks_header_validate(&h, file_size, false, &spec, errp) < 0) {
        return -1;
    }
    payload = (uint64_t)h.payload_offset * QCRYPTO_LUKS_SECTOR_SIZE;
    /* Header copies first, then the active slots' areas, 4 KiB aligned. */
    next = 2 * FROM_LUKS1_HDR_SIZE;
    area_len = 0;
    for (int i = 0; i < QCRYPTO_LUKS_NUM_KEY_SLOTS; i++) {
        if (h.slots[i].active != QCRYPTO_LUKS_KEY_SLOT_ACTIVE) {
            continue;
        }
        material = qcrypto_luks_key_material_len(h.key_bytes,
                                                 h.slots[i].stripes);
        area_len = qcrypto_luks2_round_up(material, QCRYPTO_LUKS2_AREA_ALIGN);
        areas[i] = next;
        next += area_len;
    }
    if (!area_len) {
        error_setg(errp, "LUKS1 header has no active key slot");
        return -1;
    }
    /*
     * LUKS2 wants the header and key-slot area below the payload; the
     * rest is room for the re-encryption key slot.
     */
    keyslots_size = payload > 2 * FROM_LUKS1_HDR_SIZE ?
        (payload - 2 * FROM_LUKS1_HDR_SIZE) & ~(uint64_t)
            (QCRYPTO_LUKS2_AREA_ALIGN - 1) : 0;
    if (next > 2 * FROM_LUKS1_HDR_SIZE + keyslots_size) {
        error_setg(errp, "LUKS1 payload offset %" PRIu64 " leaves no room "
                   "for its key slots in a LUKS2 header", payload);
        return -1;
    }

    m.len = 2 * FROM_LUKS1_HDR_SIZE + keyslots_size;
    m.buf = g_malloc0(m.len);
    for (int i = 0; i < QCRYPTO_LUKS_NUM_KEY_SLOTS; i++) {
        if (!areas[i]) {
            continue;
        }
        material = qcrypto_luks_key_material_len(h.key_bytes,
                                                 h.slots[i].stripes);
        if (readfunc(block, (uint64_t)h.slots[i].key_offset *
                     QCRYPTO_LUKS_SECTOR_SIZE, m.buf + areas[i], material,
                     opaque, errp) < 0) {
            goto fail;
        }
    }
    json = luks1_json(&h, areas, area_len, keyslots_size);
    md = qcrypto_luks2_metadata_parse(json, FROM_LUKS1_HDR_SIZE, errp);
    if (!md) {
        error_prepend(errp, "LUKS1 header cannot be expressed as LUKS2: ");
        goto fail;
    }

    hdr->bin.version = QCRYPTO_LUKS2_VERSION;
    hdr->bin.hdr_size = FROM_LUKS1_HDR_SIZE;
    g_strlcpy(hdr->bin.checksum_alg, "sha256", sizeof(hdr->bin.checksum_alg));
    g_strlcpy(hdr->bin.uuid, h.uuid, MIN(sizeof(hdr->bin.uuid),
                                         sizeof(h.uuid) + 1));
    if (qcrypto_random_bytes(hdr->salt_primary, QCRYPTO_LUKS2_SALT_LEN,
                             errp) < 0 ||
        qcrypto_random_bytes(hdr->salt_secondary, QCRYPTO_LUKS2_SALT_LEN,
                             errp) < 0 ||
        qcrypto_luks2_header_write(hdr, json, block, mem_area_write, NULL, &m,
                                   errp) < 0) {
        goto fail;
    }
    *out = m.buf;
    *out_len = m.len;
    return 0;
fail:
    explicit_bzero(m.buf, m.len);
    g_free(m.buf);
    return -1;
}
