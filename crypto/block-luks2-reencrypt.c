/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * LUKS2 in-place encryption with cryptsetup's re-encryption metadata
 * (cryptsetup 2.6, lib/luks2/luks2_reencrypt*.c; docs/reencrypt.md has the
 * whole story). Only "encrypt" with "datashift" resilience, backward, is
 * done here.
 *
 * Terms: S is the data shift (the final payload offset), V the data bytes
 * (the size of the "backup-previous" segment). Logical offset x of the data
 * is, before encryption, at physical x for x >= M and at moved + x for
 * x < M, where the first M = min(S, V) bytes were copied to "moved" at
 * init; after encryption it is at S + x. Hot zones run from the end
 * backwards and are never longer than S, so a zone's writes never touch
 * its own source nor any data not yet encrypted: a zone cut short by a
 * crash is simply done again (that is the datashift resilience).
 *
 * The on-disk state between zones is nothing but the segment list:
 *   [moved linear][linear M..lin][crypt in-reencryption][crypt done]
 *   + backup-previous, backup-final, backup-moved-segment
 * as cryptsetup writes it, so either tool can pick up where the other
 * stopped.
 */
#include <stdlib.h>
#include <string.h>

#include "crypto/blockpriv.h"
#include "crypto/luks2priv.h"
#include "crypto/pbkdf.h"
#include "crypto/random.h"
#include "crypto/reencrypt.h"
#include "block-luks2-json.h"

/* cryptsetup's LUKS2_REENCRYPT_REQ_VERSION for encryption and rotation. */
#define REENC_REQ_VERSION 2
#define REENC_REQUIREMENT "online-reencrypt-v2"
/* cryptsetup's reencrypt key slot area: one 4 KiB block, unused by datashift */
#define REENC_AREA_SIZE 4096
#define REENC_DIGEST_SALT_LEN 32
/* cryptsetup rejects longer strings when it serialises for the digest */
#define REENC_MAX_STR 256
/* Larger offsets and sizes are refused: sums of a few never wrap. */
#define REENC_MAX_BYTES (1ull << 60)

typedef struct Reenc {
    const QCryptoReencryptIO *io;
    QCryptoBlock *block;
    QCryptoLUKS2Header *hdr;
    JsonNode *root;
    int ks_id;                  /* the "reencrypt" key slot */
    int digest_new;             /* digest of the final segment's key */
    int digest_reenc;           /* digest over the re-encryption metadata */
    JsonObject *prev, *final, *moved;   /* the backup segments */
    uint64_t shift;             /* S */
    uint64_t size;              /* V */
    uint64_t moved_offset;
    uint64_t moved_size;        /* M */
} Reenc;

static void reenc_clear(Reenc *r)
{
    if (r->root) {
        json_node_unref(r->root);
    }
    qcrypto_luks2_header_free(r->hdr);
    qcrypto_block_free(r->block);
}

/* ---- I/O through the caller's callbacks ---- */

static int reenc_block_read(QCryptoBlock *block, uint64_t offset,
                            uint8_t *buf, size_t len, void *opaque,
                            Error **errp)
{
    const QCryptoReencryptIO *io = opaque;

    return io->read(io->opaque, offset, buf, len, errp);
}

static int reenc_block_write(QCryptoBlock *block, uint64_t offset,
                             const uint8_t *buf, size_t len, void *opaque,
                             Error **errp)
{
    const QCryptoReencryptIO *io = opaque;

    return io->write(io->opaque, offset, buf, len, errp);
}

/* ---- JSON helpers ---- */

static void set_u64(JsonObject *o, const char *key, uint64_t v)
{
    g_autofree char *s = g_strdup_printf("%" PRIu64, v);

    json_object_set_string_member(o, key, s);
}

static int get_u64(JsonObject *o, const char *what, const char *key,
                   uint64_t *v, Error **errp)
{
    return luks2_json_get_u64_string(o, what, key, v, errp);
}

static bool seg_has_flag(JsonObject *seg, const char *flag)
{
    JsonArray *flags;

    if (!json_object_has_member(seg, "flags") ||
        !JSON_NODE_HOLDS_ARRAY(json_object_get_member(seg, "flags"))) {
        return false;
    }
    flags = json_object_get_array_member(seg, "flags");
    for (guint i = 0; i < json_array_get_length(flags); i++) {
        JsonNode *n = json_array_get_element(flags, i);

        if (JSON_NODE_HOLDS_VALUE(n) &&
            json_node_get_value_type(n) == G_TYPE_STRING &&
            g_str_equal(json_node_get_string(n), flag)) {
            return true;
        }
    }
    return false;
}

/*
 * A deep copy of node (json_node_copy() shares objects and arrays, and
 * edits must not reach the original).
 */
static JsonNode *deep_copy(JsonNode *node)
{
    g_autoptr(JsonGenerator) gen = json_generator_new();
    g_autofree char *text = NULL;

    json_generator_set_root(gen, node);
    text = json_generator_to_data(gen, NULL);
    return json_from_string(text, NULL);
}

/* A deep copy of seg, with flags replaced (NULL: none). */
static JsonObject *seg_copy(JsonObject *seg, const char *flag)
{
    JsonNode *n = json_node_alloc();
    JsonNode *copy;
    JsonObject *o;

    json_node_init_object(n, seg);
    copy = deep_copy(n);
    json_node_unref(n);
    o = json_node_dup_object(copy);
    json_node_unref(copy);
    if (json_object_has_member(o, "flags")) {
        json_object_remove_member(o, "flags");
    }
    if (flag) {
        JsonArray *a = json_array_new();

        json_array_add_string_element(a, flag);
        json_object_set_array_member(o, "flags", a);
    }
    return o;
}

static JsonObject *linear_seg(uint64_t offset, uint64_t size)
{
    JsonObject *o = json_object_new();

    json_object_set_string_member(o, "type", "linear");
    set_u64(o, "offset", offset);
    set_u64(o, "size", size);
    return o;
}

/* A piece of the final crypt segment: logical [x, x + size). */
static JsonObject *crypt_seg(Reenc *r, uint64_t x, uint64_t size,
                             const char *flag)
{
    JsonObject *o = seg_copy(r->final, flag);

    set_u64(o, "offset", r->shift + x);
    set_u64(o, "size", size);
    set_u64(o, "iv_tweak", x / 512);
    return o;
}

static char *json_text(JsonNode *root)
{
    g_autoptr(JsonGenerator) gen = json_generator_new();

    json_generator_set_root(gen, root);
    return json_generator_to_data(gen, NULL);
}

static JsonObject *section(JsonNode *root, const char *name)
{
    return json_object_get_object_member(json_node_get_object(root), name);
}

static JsonArray *id_array(const int *ids, int n)
{
    JsonArray *a = json_array_new();

    for (int i = 0; i < n; i++) {
        g_autofree char *s = g_strdup_printf("%d", ids[i]);

        json_array_add_string_element(a, s);
    }
    return a;
}

/* ---- the digest over the re-encryption metadata ---- */

/*
 * cryptsetup 2.6 (luks2_reencrypt_digest.c) binds the re-encryption
 * parameters to the volume keys (CVE-2021-4122): a PBKDF2 digest of
 *   'v' '0'+version | old key | new key | reencrypt key slot fields |
 *   backup-previous | backup-final | backup-moved-segment
 * where strings are their bytes (no NUL), 64-bit numbers big-endian,
 * "dynamic" sizes the string, sector sizes 32-bit big-endian.
 */
static bool ser_str(GByteArray *b, JsonObject *o, const char *key)
{
    const char *s;

    if (!json_object_has_member(o, key) ||
        !JSON_NODE_HOLDS_VALUE(json_object_get_member(o, key)) ||
        json_node_get_value_type(json_object_get_member(o, key)) !=
            G_TYPE_STRING) {
        return false;
    }
    s = json_object_get_string_member(o, key);
    if (strlen(s) > REENC_MAX_STR) {
        return false;
    }
    g_byte_array_append(b, (const guint8 *)s, strlen(s));
    return true;
}

static bool ser_u64(GByteArray *b, JsonObject *o, const char *key,
                    bool dynamic_ok)
{
    uint64_t v;
    uint8_t be[8];

    if (!json_object_has_member(o, key) ||
        json_node_get_value_type(json_object_get_member(o, key)) !=
            G_TYPE_STRING) {
        return false;
    }
    if (dynamic_ok &&
        g_str_equal(json_object_get_string_member(o, key), "dynamic")) {
        return ser_str(b, o, key);
    }
    if (luks2_json_get_u64_string(o, "reencrypt", key, &v, NULL) < 0) {
        return false;
    }
    for (int i = 0; i < 8; i++) {
        be[i] = v >> (56 - 8 * i);
    }
    g_byte_array_append(b, be, 8);
    return true;
}

static bool ser_u32(GByteArray *b, JsonObject *o, const char *key)
{
    uint32_t v;
    uint8_t be[4];

    if (luks2_json_get_uint(o, "reencrypt", key, 0, UINT32_MAX, &v,
                            NULL) < 0) {
        return false;
    }
    for (int i = 0; i < 4; i++) {
        be[i] = v >> (24 - 8 * i);
    }
    g_byte_array_append(b, be, 4);
    return true;
}

static bool ser_segment(GByteArray *b, JsonObject *seg)
{
    const char *type = json_object_has_member(seg, "type") ?
        json_object_get_string_member(seg, "type") : NULL;

    if (!type || !ser_str(b, seg, "type") || !ser_u64(b, seg, "offset", false) ||
        !ser_u64(b, seg, "size", true)) {
        return false;
    }
    if (g_str_equal(type, "linear")) {
        return true;
    }
    return g_str_equal(type, "crypt") && ser_u64(b, seg, "iv_tweak", false) &&
        ser_str(b, seg, "encryption") && ser_u32(b, seg, "sector_size");
}

static bool ser_keyslot(GByteArray *b, JsonObject *ks)
{
    JsonObject *area = json_object_get_object_member(ks, "area");
    const char *type = json_object_get_string_member(area, "type");

    if (!ser_str(b, ks, "mode") || !ser_str(b, ks, "direction") ||
        !ser_str(b, area, "type") || !ser_u64(b, area, "offset", false) ||
        !ser_u64(b, area, "size", false)) {
        return false;
    }
    if (g_str_equal(type, "datashift")) {
        return ser_u64(b, area, "shift_size", false);
    }
    if (g_str_equal(type, "checksum")) {
        return ser_str(b, area, "hash") && ser_u32(b, area, "sector_size");
    }
    return true;
}

/* The bytes the digest covers; NULL if a field is missing or malformed. */
static GByteArray *reenc_verification_data(Reenc *r, const uint8_t *key,
                                           size_t nkey)
{
    GByteArray *b = g_byte_array_new();
    g_autofree char *id = g_strdup_printf("%d", r->ks_id);
    JsonObject *ks = json_object_get_object_member(
        section(r->root, "keyslots"), id);
    uint8_t head[2] = { 'v', '0' + REENC_REQ_VERSION };

    g_byte_array_append(b, head, 2);
    g_byte_array_append(b, key, nkey);
    if (!ser_keyslot(b, ks) || !ser_segment(b, r->prev) ||
        !ser_segment(b, r->final) || (r->moved && !ser_segment(b, r->moved))) {
        explicit_bzero(b->data, b->len);
        g_byte_array_unref(b);
        return NULL;
    }
    return b;
}

static int reenc_digest_compute(Reenc *r, QCryptoHashAlgo hash,
                                uint64_t iters, const uint8_t *salt,
                                size_t nsalt, const uint8_t *key, size_t nkey,
                                uint8_t *out, size_t nout, Error **errp)
{
    GByteArray *data = reenc_verification_data(r, key, nkey);
    int ret;

    if (!data) {
        error_setg(errp, "LUKS2 re-encryption metadata is malformed");
        return -1;
    }
    ret = qcrypto_pbkdf2(hash, data->data, data->len, salt, nsalt, iters,
                         out, nout, errp);
    explicit_bzero(data->data, data->len);
    g_byte_array_unref(data);
    return ret;
}

/* ---- reading the state ---- */

static JsonObject *find_backup(JsonObject *segs, const char *flag,
                               int *id)
{
    g_autoptr(GList) members = json_object_get_members(segs);

    for (GList *l = members; l; l = l->next) {
        JsonNode *n = json_object_get_member(segs, l->data);

        if (JSON_NODE_HOLDS_OBJECT(n) &&
            seg_has_flag(json_node_get_object(n), flag)) {
            if (id) {
                *id = atoi(l->data);
            }
            return json_node_get_object(n);
        }
    }
    return NULL;
}

static bool id_array_has(JsonObject *o, const char *key, int id)
{
    JsonArray *a;

    if (!json_object_has_member(o, key) ||
        !JSON_NODE_HOLDS_ARRAY(json_object_get_member(o, key))) {
        return false;
    }
    a = json_object_get_array_member(o, key);
    for (guint i = 0; i < json_array_get_length(a); i++) {
        JsonNode *n = json_array_get_element(a, i);

        if (json_node_get_value_type(n) == G_TYPE_STRING &&
            atoi(json_node_get_string(n)) == id) {
            return true;
        }
    }
    return false;
}

/* The re-encryption parameters of r->root: what cryptsetup checks too. */
static int reenc_parse(Reenc *r, Error **errp)
{
    JsonObject *top = json_node_get_object(r->root);
    JsonObject *config, *keyslots, *segs, *digests, *ks = NULL, *area;
    g_auto(GStrv) req = NULL;
    g_autoptr(GList) members = NULL;
    const char *mode, *dir, *atype;
    int final_id = -1;
    bool found = false;

    config = luks2_json_get_object(top, "metadata", "config", errp);
    if (!config) {
        return -1;
    }
    if (json_object_has_member(config, "requirements")) {
        JsonObject *ro = luks2_json_get_object(config, "config",
                                               "requirements", errp);

        if (!ro || luks2_json_get_strv(ro, "config requirements",
                                       "mandatory", &req, errp) < 0) {
            return -1;
        }
        for (char **p = req; *p; p++) {
            if (g_str_equal(*p, REENC_REQUIREMENT)) {
                found = true;
            } else if (g_str_has_prefix(*p, "online-reencrypt") ||
                       g_str_has_prefix(*p, "offline-reencrypt")) {
                error_setg(errp, "LUKS2 re-encryption state '%s' is not "
                           "supported (only '" REENC_REQUIREMENT "'): "
                           "finish it with cryptsetup reencrypt "
                           "--resume-only", *p);
                return -1;
            }
        }
    }
    if (!found) {
        error_setg(errp, "The image is not being re-encrypted (no '"
                   REENC_REQUIREMENT "' requirement)");
        return -1;
    }
    keyslots = luks2_json_get_object(top, "metadata", "keyslots", errp);
    segs = keyslots ? luks2_json_get_object(top, "metadata", "segments",
                                            errp) : NULL;
    digests = segs ? luks2_json_get_object(top, "metadata", "digests",
                                           errp) : NULL;
    if (!digests) {
        return -1;
    }
    members = json_object_get_members(keyslots);
    r->ks_id = -1;
    for (GList *l = members; l; l = l->next) {
        JsonNode *n = json_object_get_member(keyslots, l->data);
        const char *t;

        if (!JSON_NODE_HOLDS_OBJECT(n)) {
            continue;
        }
        t = json_object_get_string_member_with_default(
            json_node_get_object(n), "type", "");
        if (g_str_equal(t, "reencrypt")) {
            if (r->ks_id >= 0) {
                error_setg(errp, "LUKS2 image has two reencrypt key slots");
                return -1;
            }
            r->ks_id = luks2_json_parse_id(l->data,
                                           QCRYPTO_LUKS2_KEYSLOTS_MAX,
                                           "keyslot", errp);
            if (r->ks_id < 0) {
                return -1;
            }
            ks = json_node_get_object(n);
        }
    }
    if (!ks) {
        error_setg(errp, "LUKS2 re-encryption key slot is missing");
        return -1;
    }
    if (!(mode = luks2_json_get_string(ks, "reencrypt keyslot", "mode",
                                       errp)) ||
        !(dir = luks2_json_get_string(ks, "reencrypt keyslot", "direction",
                                      errp)) ||
        !(area = luks2_json_get_object(ks, "reencrypt keyslot", "area",
                                       errp)) ||
        !(atype = luks2_json_get_string(area, "reencrypt keyslot area",
                                        "type", errp))) {
        return -1;
    }
    if (!g_str_equal(mode, "encrypt")) {
        error_setg(errp, "LUKS2 re-encryption mode '%s' is not supported "
                   "here yet: finish it with cryptsetup reencrypt "
                   "--resume-only", mode);
        return -1;
    }
    if (!g_str_equal(dir, "backward") || !g_str_equal(atype, "datashift")) {
        error_setg(errp, "LUKS2 encryption with direction '%s' and "
                   "resilience '%s' is not supported (only backward, "
                   "datashift)", dir, atype);
        return -1;
    }
    if (get_u64(area, "reencrypt keyslot area", "shift_size", &r->shift,
                errp) < 0) {
        return -1;
    }
    r->prev = find_backup(segs, "backup-previous", NULL);
    r->final = find_backup(segs, "backup-final", &final_id);
    r->moved = find_backup(segs, "backup-moved-segment", NULL);
    if (!r->prev || !r->final || !r->moved) {
        error_setg(errp, "LUKS2 re-encryption backup segments are missing");
        return -1;
    }
    {
        uint64_t off, fo;
        const char *ft = json_object_get_string_member_with_default(
            r->final, "type", "");
        const char *fs = json_object_get_string_member_with_default(
            r->final, "size", "");

        if (get_u64(r->prev, "backup-previous segment", "size", &r->size,
                    errp) < 0 ||
            get_u64(r->prev, "backup-previous segment", "offset", &off,
                    errp) < 0 ||
            get_u64(r->final, "backup-final segment", "offset", &fo,
                    errp) < 0 ||
            get_u64(r->moved, "backup-moved-segment", "offset",
                    &r->moved_offset, errp) < 0 ||
            get_u64(r->moved, "backup-moved-segment", "size",
                    &r->moved_size, errp) < 0) {
            return -1;
        }
        /* Bounds first: no sum below may wrap (hostile numbers). */
        if (r->size > REENC_MAX_BYTES || r->shift > REENC_MAX_BYTES ||
            r->moved_offset > REENC_MAX_BYTES ||
            r->moved_size > REENC_MAX_BYTES ||
            off != 0 || !g_str_equal(ft, "crypt") || fo != r->shift ||
            !g_str_equal(fs, "dynamic") || r->shift == 0 ||
            r->shift % QCRYPTO_LUKS2_AREA_ALIGN ||
            r->moved_size != MIN(r->shift, r->size) ||
            r->moved_offset < r->shift + r->size ||
            !g_str_equal(json_object_get_string_member_with_default(
                             r->prev, "type", ""), "linear")) {
            error_setg(errp, "LUKS2 re-encryption segments are "
                       "inconsistent with a data shift of %" PRIu64
                       " bytes", r->shift);
            return -1;
        }
    }
    r->digest_new = r->digest_reenc = -1;
    g_list_free(members);
    members = json_object_get_members(digests);
    for (GList *l = members; l; l = l->next) {
        JsonNode *n = json_object_get_member(digests, l->data);

        if (!JSON_NODE_HOLDS_OBJECT(n)) {
            continue;
        }
        if (id_array_has(json_node_get_object(n), "segments", final_id)) {
            r->digest_new = atoi(l->data);
        }
        if (id_array_has(json_node_get_object(n), "keyslots", r->ks_id)) {
            r->digest_reenc = atoi(l->data);
        }
    }
    if (r->digest_new < 0 || r->digest_reenc < 0 ||
        r->digest_new == r->digest_reenc) {
        error_setg(errp, "LUKS2 re-encryption digests are missing");
        return -1;
    }
    return 0;
}

/*
 * The metadata as it will be when done: the reencrypt key slot, its digest
 * and the requirement gone, backup-final as segment 0.
 */
static JsonNode *reenc_final_root(Reenc *r)
{
    JsonNode *root = deep_copy(r->root);
    JsonObject *segs = json_object_new();
    JsonObject *config = section(root, "config");
    JsonObject *dg;
    g_autofree char *ks = g_strdup_printf("%d", r->ks_id);
    g_autofree char *dr = g_strdup_printf("%d", r->digest_reenc);
    g_autofree char *dn = g_strdup_printf("%d", r->digest_new);
    int zero = 0;

    json_object_remove_member(section(root, "keyslots"), ks);
    json_object_remove_member(section(root, "digests"), dr);
    json_object_set_object_member(segs, "0", seg_copy(r->final, NULL));
    json_object_set_object_member(json_node_get_object(root), "segments",
                                  segs);
    dg = json_object_get_object_member(section(root, "digests"), dn);
    json_object_set_array_member(dg, "segments", id_array(&zero, 1));
    json_object_remove_member(config, "requirements");
    return root;
}

/*
 * The metadata with lin bytes still linear (plain text), then a zone of
 * zone bytes in re-encryption, the rest encrypted.
 */
static JsonNode *reenc_state_root(Reenc *r, uint64_t lin, uint64_t zone)
{
    JsonNode *root = deep_copy(r->root);
    JsonObject *segs = json_object_new();
    JsonObject *dg;
    g_autofree char *dn = g_strdup_printf("%d", r->digest_new);
    int crypt_ids[3], ncrypt = 0, id = 0;
    uint64_t done = r->size - lin - zone;

#define ADD(o) do { g_autofree char *k = g_strdup_printf("%d", id++); \
        json_object_set_object_member(segs, k, (o)); } while (0)
    if (lin) {
        ADD(linear_seg(r->moved_offset, MIN(lin, r->moved_size)));
    }
    if (lin > r->moved_size) {
        ADD(linear_seg(r->moved_size, lin - r->moved_size));
    }
    if (zone) {
        crypt_ids[ncrypt++] = id;
        ADD(crypt_seg(r, lin, zone, "in-reencryption"));
    }
    if (done) {
        JsonObject *seg = crypt_seg(r, lin + zone, done, NULL);

        /*
         * All done: "dynamic", as cryptsetup writes its last state before
         * the final one (it cannot load a fixed size there).
         */
        if (!lin && !zone) {
            json_object_set_string_member(seg, "size", "dynamic");
        }
        crypt_ids[ncrypt++] = id;
        ADD(seg);
    }
    ADD(seg_copy(r->prev, "backup-previous"));
    crypt_ids[ncrypt++] = id;
    ADD(seg_copy(r->final, "backup-final"));
    ADD(seg_copy(r->moved, "backup-moved-segment"));
#undef ADD
    json_object_set_object_member(json_node_get_object(root), "segments",
                                  segs);
    dg = json_object_get_object_member(section(root, "digests"), dn);
    json_object_set_array_member(dg, "segments", id_array(crypt_ids, ncrypt));
    return root;
}

static int reenc_write_root(Reenc *r, JsonNode *root, Error **errp)
{
    g_autofree char *json = json_text(root);

    if (qcrypto_luks2_header_write(r->hdr, json, r->block, reenc_block_write,
                                   (void *)r->io, errp) < 0) {
        return -1;
    }
    return r->io->sync(r->io->opaque, errp);
}

/* ---- encrypt: init ---- */

typedef struct MemHeader {
    uint8_t *buf;
    uint64_t len;
} MemHeader;

static int mem_init(QCryptoBlock *block, uint64_t headerlen, void *opaque,
                    Error **errp)
{
    MemHeader *m = opaque;

    m->buf = g_malloc0(headerlen);
    m->len = headerlen;
    return 0;
}

static int mem_write(QCryptoBlock *block, uint64_t offset, const uint8_t *buf,
                     size_t len, void *opaque, Error **errp)
{
    MemHeader *m = opaque;

    g_assert(offset + len <= m->len);
    memcpy(m->buf + offset, buf, len);
    return 0;
}

static int mem_read(QCryptoBlock *block, uint64_t offset, uint8_t *buf,
                    size_t len, void *opaque, Error **errp)
{
    MemHeader *m = opaque;

    if (offset + len > m->len) {
        error_setg(errp, "read beyond the header");
        return -1;
    }
    memcpy(buf, m->buf + offset, len);
    return 0;
}

/* The secondary copy only, into the memory image. */
static int mem_secondary_write(QCryptoBlock *block, uint64_t offset,
                               const uint8_t *buf, size_t len, void *opaque,
                               Error **errp)
{
    return offset ? mem_write(block, offset, buf, len, opaque, errp) : 0;
}

/* Copy len bytes from src to dst in the file, in 1 MiB pieces. */
static int io_copy(const QCryptoReencryptIO *io, uint64_t src, uint64_t dst,
                   uint64_t len, Error **errp)
{
    const size_t chunk = 1 << 20;
    g_autofree uint8_t *buf = g_malloc(chunk);

    for (uint64_t done = 0; done < len; done += chunk) {
        size_t n = MIN(chunk, len - done);

        if (io->read(io->opaque, src + done, buf, n, errp) < 0 ||
            io->write(io->opaque, dst + done, buf, n, errp) < 0) {
            return -1;
        }
    }
    return 0;
}

/* Add the reencrypt key slot, backup segments, digest and requirement. */
static int reenc_init_metadata(Reenc *r, uint64_t keyslots_end,
                               Error **errp)
{
    JsonObject *keyslots = section(r->root, "keyslots");
    JsonObject *segs = section(r->root, "segments");
    JsonObject *digests = section(r->root, "digests");
    JsonObject *config = section(r->root, "config");
    JsonObject *ks = json_object_new(), *area = json_object_new();
    JsonObject *dg, *reqo, *newsegs;
    JsonArray *mand;
    uint64_t area_off = 0, iters;
    g_autoptr(GList) members = json_object_get_members(keyslots);
    g_autofree char *ksname = NULL, *dname = NULL, *salt64 = NULL,
        *dig64 = NULL;
    uint8_t salt[REENC_DIGEST_SALT_LEN], dig[32];
    int zero = 0;

    /* The first free id and the end of the used key-slot area. */
    r->ks_id = 0;
    for (GList *l = members; l; l = l->next) {
        JsonObject *o = json_object_get_object_member(keyslots, l->data);
        JsonObject *a = json_object_get_object_member(o, "area");
        uint64_t off, size;

        r->ks_id = MAX(r->ks_id, atoi(l->data) + 1);
        if (get_u64(a, "keyslot area", "offset", &off, errp) < 0 ||
            get_u64(a, "keyslot area", "size", &size, errp) < 0) {
            return -1;
        }
        area_off = MAX(area_off, off + size);
    }
    area_off = qcrypto_luks2_round_up(area_off, QCRYPTO_LUKS2_AREA_ALIGN);
    if (area_off + REENC_AREA_SIZE > keyslots_end) {
        error_setg(errp, "No room in the LUKS2 key-slot area for the "
                   "re-encryption key slot");
        return -1;
    }
    set_u64(area, "offset", area_off);
    set_u64(area, "size", REENC_AREA_SIZE);
    json_object_set_string_member(area, "type", "datashift");
    set_u64(area, "shift_size", r->shift);
    json_object_set_object_member(ks, "area", area);
    json_object_set_string_member(ks, "type", "reencrypt");
    json_object_set_int_member(ks, "key_size", 1);
    json_object_set_string_member(ks, "mode", "encrypt");
    json_object_set_string_member(ks, "direction", "backward");
    json_object_set_int_member(ks, "priority", 0);
    ksname = g_strdup_printf("%d", r->ks_id);
    json_object_set_object_member(keyslots, ksname, ks);

    /* The backups; the active list is written by reenc_state_root(). */
    r->final = seg_copy(json_object_get_object_member(segs, "0"),
                        "backup-final");
    newsegs = json_object_new();
    json_object_set_object_member(newsegs, "0", linear_seg(0, r->size));
    json_object_set_object_member(newsegs, "1", r->final);
    json_object_set_object_member(newsegs, "2",
                                  linear_seg(r->moved_offset,
                                             r->moved_size));
    r->prev = json_object_get_object_member(newsegs, "0");
    r->moved = json_object_get_object_member(newsegs, "2");
    json_object_set_array_member(r->prev, "flags", json_array_new());
    json_array_add_string_element(
        json_object_get_array_member(r->prev, "flags"), "backup-previous");
    json_object_set_array_member(r->moved, "flags", json_array_new());
    json_array_add_string_element(
        json_object_get_array_member(r->moved, "flags"),
        "backup-moved-segment");
    json_object_set_object_member(json_node_get_object(r->root), "segments",
                                  newsegs);

    r->digest_new = 0;
    dg = json_object_get_object_member(digests, "0");
    json_object_set_array_member(dg, "segments", id_array(&zero, 0));
    iters = json_object_get_int_member(dg, "iterations");

    reqo = json_object_new();
    mand = json_array_new();
    json_array_add_string_element(mand, REENC_REQUIREMENT);
    json_object_set_array_member(reqo, "mandatory", mand);
    json_object_set_object_member(config, "requirements", reqo);

    /* The digest that binds it all to the volume key. */
    r->digest_reenc = 1;
    while (json_object_has_member(digests,
                                  dname = g_strdup_printf("%d",
                                                          r->digest_reenc))) {
        g_free(dname);
        r->digest_reenc++;
    }
    if (qcrypto_random_bytes(salt, sizeof(salt), errp) < 0 ||
        reenc_digest_compute(r, QCRYPTO_HASH_ALGO_SHA256, iters, salt,
                             sizeof(salt), r->block->master_key,
                             r->block->master_key_len, dig, sizeof(dig),
                             errp) < 0) {
        return -1;
    }
    salt64 = g_base64_encode(salt, sizeof(salt));
    dig64 = g_base64_encode(dig, sizeof(dig));
    dg = json_object_new();
    json_object_set_string_member(dg, "type", "pbkdf2");
    json_object_set_array_member(dg, "keyslots", id_array(&r->ks_id, 1));
    json_object_set_array_member(dg, "segments", json_array_new());
    json_object_set_string_member(dg, "hash", "sha256");
    json_object_set_int_member(dg, "iterations", iters);
    json_object_set_string_member(dg, "salt", salt64);
    json_object_set_string_member(dg, "digest", dig64);
    json_object_set_object_member(digests, dname, dg);
    return 0;
}

int qcrypto_reencrypt_encrypt_init(const QCryptoBlockCreateOptions *options,
                                   const QCryptoReencryptIO *io,
                                   Error **errp)
{
    QCryptoBlockCreateOptions opts = *options;
    MemHeader m = { 0 };
    g_autoptr(QCryptoLUKS2Metadata) md = NULL;
    g_autofree char *json = NULL;
    Reenc r = { .io = io };
    int64_t len = io->length(io->opaque, errp);
    uint64_t sector;
    int ret = -1;

    if (len < 0) {
        return -1;
    }
    if (len == 0 || len % 512) {
        error_setg(errp, "The image size (%" PRId64 " bytes) is not a "
                   "positive multiple of 512", len);
        return -1;
    }
    if (opts.detached_header) {
        error_setg(errp, "In-place encryption keeps the header in the image: "
                   "detached-header is not supported");
        return -1;
    }
    opts.luks_version = 2;
    opts.size = len;
    sector = qcrypto_block_create_sector_size(&opts);
    if (len % sector) {
        error_setg(errp, "The image size (%" PRId64 " bytes) is not a "
                   "multiple of the sector size %" PRIu64, len, sector);
        return -1;
    }
    r.block = qcrypto_block_create(&opts, mem_init, mem_write, &m, errp);
    if (!r.block) {
        goto out;
    }
    r.hdr = qcrypto_luks2_header_read(r.block, mem_read, &m, NULL, errp);
    if (!r.hdr) {
        goto out;
    }
    md = qcrypto_luks2_metadata_parse(r.hdr->json, r.hdr->bin.hdr_size, errp);
    if (!md) {
        goto out;
    }
    r.root = json_from_string(r.hdr->json, NULL);
    r.shift = m.len;
    r.size = len;
    r.moved_size = MIN(r.shift, r.size);
    /*
     * The file grows by 2 S: cryptsetup's layout for a device reduced by
     * 2 S (its --reduce-device-size must be at least twice the offset),
     * so that the zone next to the copy never overwrites it. The last S
     * are given back when done.
     */
    r.moved_offset = len + r.shift;
    if (!r.root ||
        reenc_init_metadata(&r, qcrypto_luks2_keyslots_end(md), errp) < 0) {
        goto out;
    }
    {
        g_autoptr(JsonNode) state = reenc_state_root(&r, r.size, 0);

        json = json_text(state);
    }
    /* The copy first, durable before its source is overwritten. */
    if (io->truncate(io->opaque, len + 2 * r.shift, errp) < 0 ||
        io_copy(io, 0, r.moved_offset, r.moved_size, errp) < 0 ||
        io->sync(io->opaque, errp) < 0) {
        goto out;
    }
    /*
     * The secondary header and the key-slot area behind it in one write,
     * so that no kill between two writes leaves key material without a
     * header that says where the data went (cryptsetup and we both find
     * a header by its secondary copy); then both copies.
     */
    if (qcrypto_luks2_header_write(r.hdr, json, r.block, mem_secondary_write,
                                   &m, errp) < 0 ||
        io->write(io->opaque, r.hdr->bin.hdr_size,
                  m.buf + r.hdr->bin.hdr_size,
                  m.len - r.hdr->bin.hdr_size, errp) < 0 ||
        io->sync(io->opaque, errp) < 0 ||
        qcrypto_luks2_header_write(r.hdr, json, r.block, reenc_block_write,
                                   (void *)io, errp) < 0 ||
        io->sync(io->opaque, errp) < 0) {
        goto out;
    }
    ret = 0;
out:
    if (m.buf) {
        explicit_bzero(m.buf, m.len);
        g_free(m.buf);
    }
    reenc_clear(&r);
    return ret;
}

/* ---- resume ---- */

/* Unlock the final key, check the digest, set up the payload cipher. */
static int reenc_unlock(Reenc *r, const QCryptoBlockSecret *secret,
                        Error **errp)
{
    g_autoptr(JsonNode) fin = reenc_final_root(r);
    g_autofree char *json = json_text(fin);
    g_autoptr(QCryptoLUKS2Metadata) md = NULL;
    g_autoptr(QCryptoSecureBuf) key = NULL;
    g_autofree char *dn = g_strdup_printf("%d", r->digest_reenc);
    JsonObject *dg = json_object_get_object_member(section(r->root, "digests"),
                                                   dn);
    const QCryptoLUKS2Segment *seg;
    QCryptoHashAlgo hash;
    uint8_t salt[QCRYPTO_LUKS2_JSON_SALT_MAX], want[QCRYPTO_HASH_MAX_DIGEST_LEN];
    uint8_t got[QCRYPTO_HASH_MAX_DIGEST_LEN];
    size_t nsalt, nwant;
    uint32_t iters;
    QCryptoLUKS2Cipher c;
    uint8_t diff = 0;
    int slot;

    md = qcrypto_luks2_metadata_parse(json, r->hdr->bin.hdr_size, errp);
    if (!md || qcrypto_luks2_unlock(md, secret, r->block, reenc_block_read,
                                    (void *)r->io, &key, &slot, errp) < 0) {
        return -1;
    }
    if (luks2_json_get_hash(dg, "digest", "hash", &hash, errp) < 0 ||
        luks2_json_get_uint(dg, "digest", "iterations", 1000,
                            r->block->max_pbkdf2_iters, &iters, errp) < 0 ||
        luks2_json_get_base64(dg, "digest", "salt", salt, sizeof(salt),
                              &nsalt, errp) < 0 ||
        luks2_json_get_base64(dg, "digest", "digest", want, sizeof(want),
                              &nwant, errp) < 0 ||
        reenc_digest_compute(r, hash, iters, salt, nsalt, key->data,
                             key->len, got, nwant, errp) < 0) {
        return -1;
    }
    for (size_t i = 0; i < nwant; i++) {
        diff |= got[i] ^ want[i];
    }
    if (diff) {
        error_setg(errp, "LUKS2 re-encryption metadata does not match its "
                   "digest: it is damaged or was changed; refusing to touch "
                   "the data");
        return -1;
    }
    seg = md->segments[0];
    if (qcrypto_luks2_cipher_parse(seg->encryption, key->len, &c, errp) < 0) {
        return -1;
    }
    r->block->payload_offset = r->shift;
    r->block->sector_size = seg->sector_size;
    r->block->ivgen_sector_shift = __builtin_ctzll(seg->sector_size / 512);
    r->block->iv_sector_offset = 0;
    if (r->size % seg->sector_size) {
        error_setg(errp, "LUKS2 re-encryption: data size %" PRIu64 " is not "
                   "a multiple of the sector size %" PRIu32, r->size,
                   seg->sector_size);
        return -1;
    }
    return qcrypto_block_init_cipher(r->block, &c, key->data, key->len, errp);
}

/* Where the active segments say we are: lin plain bytes, zone in work. */
static int reenc_position(Reenc *r, uint64_t *lin, uint64_t *zone,
                          Error **errp)
{
    JsonObject *segs = section(r->root, "segments");
    uint64_t done = 0, expect_crypt = UINT64_MAX;

    *lin = *zone = 0;
    for (int id = 0; id < QCRYPTO_LUKS2_SEGMENTS_MAX; id++) {
        g_autofree char *k = g_strdup_printf("%d", id);
        JsonObject *s;
        const char *type;
        uint64_t off, size;

        if (!json_object_has_member(segs, k)) {
            break;
        }
        s = json_object_get_object_member(segs, k);
        if (!s || seg_has_flag(s, "backup-previous") ||
            seg_has_flag(s, "backup-final") ||
            seg_has_flag(s, "backup-moved-segment")) {
            break;
        }
        type = json_object_get_string_member_with_default(s, "type", "");
        if (get_u64(s, "segment", "offset", &off, errp) < 0) {
            return -1;
        }
        /*
         * cryptsetup writes the encrypted part as "dynamic" once it
         * reaches the end of the device (its last state before the final
         * one): whatever is left.
         */
        if (g_str_equal(type, "crypt") &&
            g_str_equal(json_object_get_string_member_with_default(
                            s, "size", ""), "dynamic")) {
            size = r->size - MIN(r->size, *lin + *zone + done);
        } else if (get_u64(s, "segment", "size", &size, errp) < 0) {
            return -1;
        }
        if (g_str_equal(type, "linear") && !*zone && !done) {
            /* physical = logical, or the moved copy */
            if (off != (*lin < r->moved_size ? r->moved_offset + *lin
                                              : *lin)) {
                goto bad;
            }
            *lin += size;
        } else if (g_str_equal(type, "crypt")) {
            if (off != r->shift + *lin + *zone + done) {
                goto bad;
            }
            if (seg_has_flag(s, "in-reencryption")) {
                if (*zone || done) {
                    goto bad;
                }
                *zone = size;
            } else {
                done += size;
            }
            expect_crypt = 0;
        } else {
            goto bad;
        }
    }
    (void)expect_crypt;
    if (*lin + *zone + done != r->size || *zone > r->shift) {
        goto bad;
    }
    return 0;
bad:
    error_setg(errp, "LUKS2 re-encryption segments do not describe a "
               "backward encryption with data shift in progress");
    return -1;
}

/* Encrypt logical [a, a + len) from its old place to its new one. */
static int reenc_zone(Reenc *r, uint64_t a, uint64_t len, uint8_t *buf,
                      Error **errp)
{
    const QCryptoReencryptIO *io = r->io;
    uint64_t src = a < r->moved_size ? r->moved_offset + a : a;
    g_autoptr(JsonNode) during = reenc_state_root(r, a, len);
    g_autoptr(JsonNode) after = reenc_state_root(r, a, 0);

    /* The zone is marked before a byte of it moves, durable (see top). */
    if (reenc_write_root(r, during, errp) < 0 ||
        io->read(io->opaque, src, buf, len, errp) < 0 ||
        qcrypto_block_encrypt(r->block, a, buf, len, errp) < 0 ||
        io->write(io->opaque, r->shift + a, buf, len, errp) < 0 ||
        io->sync(io->opaque, errp) < 0) {
        return -1;
    }
    return reenc_write_root(r, after, errp);
}

/*
 * Wipe the moved copy (plain text, no longer needed once the last zone is
 * recorded), write the final metadata, give the room back. The wipe comes
 * first so that no crash leaves plain text behind a finished header.
 */
static int reenc_finish(Reenc *r, Error **errp)
{
    const QCryptoReencryptIO *io = r->io;
    g_autoptr(JsonNode) fin = reenc_final_root(r);
    g_autofree uint8_t *zero = g_malloc0(1 << 20);
    int64_t len = io->length(io->opaque, errp);
    uint64_t end;

    if (len < 0) {
        return -1;
    }
    end = MIN((uint64_t)len, r->moved_offset + r->moved_size);
    for (uint64_t o = r->moved_offset; o < end; o += 1 << 20) {
        if (io->write(io->opaque, o, zero, MIN(1 << 20, end - o),
                      errp) < 0) {
            return -1;
        }
    }
    if (io->sync(io->opaque, errp) < 0 ||
        reenc_write_root(r, fin, errp) < 0) {
        return -1;
    }
    if (io->truncate && (uint64_t)len > r->shift + r->size &&
        (io->truncate(io->opaque, r->shift + r->size, errp) < 0 ||
         io->sync(io->opaque, errp) < 0)) {
        return -1;
    }
    return 0;
}

int qcrypto_reencrypt_resume(const QCryptoBlockSecret *secret,
                             uint64_t hotzone, const QCryptoReencryptIO *io,
                             Error **errp)
{
    Reenc r = { .io = io };
    g_autofree uint8_t *buf = NULL;
    uint64_t lin, zone, bufsize = 0;
    int64_t flen;
    int ret = -1;

    r.block = qcrypto_block_new(QCRYPTO_BLOCK_FORMAT_LUKS, NULL);
    r.hdr = qcrypto_luks2_header_read(r.block, reenc_block_read, (void *)io,
                                      NULL, errp);
    if (!r.hdr) {
        goto out;
    }
    if (luks2_json_validate_depth(r.hdr->json, errp) < 0) {
        goto out;
    }
    r.root = json_from_string(r.hdr->json, NULL);
    if (!r.root || !JSON_NODE_HOLDS_OBJECT(r.root)) {
        error_setg(errp, "LUKS2 metadata is not a JSON object");
        goto out;
    }
    if (reenc_parse(&r, errp) < 0 || reenc_position(&r, &lin, &zone,
                                                    errp) < 0 ||
        reenc_unlock(&r, secret, errp) < 0) {
        goto out;
    }
    flen = io->length(io->opaque, errp);
    if (flen < 0) {
        goto out;
    }
    if (r.moved_offset + r.moved_size > (uint64_t)flen) {
        error_setg(errp, "The moved data lies beyond the end of the file: "
                   "was it truncated?");
        goto out;
    }
    hotzone = hotzone ? MIN(hotzone, r.shift) : r.shift;
    hotzone -= hotzone % r.block->sector_size;
    if (!hotzone) {
        error_setg(errp, "The hot zone must hold at least one sector");
        goto out;
    }
    /* A zone is at most the hot zone, a cut one, or the moved copy. */
    bufsize = MAX(MAX(hotzone, zone), r.moved_size);
    buf = g_malloc(bufsize);
    /* A zone cut short: its source is intact, do it again. */
    if (zone && reenc_zone(&r, lin, zone, buf, errp) < 0) {
        goto out;
    }
    while (lin) {
        uint64_t len, floor = lin > r.moved_size ? r.moved_size : 0;

        if (io->progress && io->progress(io->opaque, r.size - lin, r.size)) {
            ret = 1;
            goto out;
        }
        /*
         * Never across the end of the moved copy, and the copy in one
         * zone whatever the hot-zone size: cryptsetup cannot load a state
         * with less than a whole data shift of plain text left.
         */
        len = floor ? MIN(hotzone, lin - floor) : lin;
        if (reenc_zone(&r, lin - len, len, buf, errp) < 0) {
            goto out;
        }
        lin -= len;
    }
    /* For tests only: stop in the last state before the final one. */
    if (g_getenv("QIL_TEST_REENCRYPT_STOP_BEFORE_FINISH")) {
        ret = 1;
        goto out;
    }
    if (reenc_finish(&r, errp) < 0) {
        goto out;
    }
    if (io->progress) {
        io->progress(io->opaque, r.size, r.size);
    }
    ret = 0;
out:
    if (buf) {
        explicit_bzero(buf, bufsize);
    }
    reenc_clear(&r);
    return ret;
}
