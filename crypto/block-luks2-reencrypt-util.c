/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * What every LUKS2 re-encryption mode shares (encryption in
 * block-luks2-reencrypt.c): loading the state, JSON segment helpers, the
 * digest that binds the metadata to the volume keys, header writes through
 * the caller's I/O callbacks. docs/reencrypt.md tells the whole story.
 */
#include <stdlib.h>
#include <string.h>

#include "crypto/blockpriv.h"
#include "crypto/luks2priv.h"
#include "crypto/pbkdf.h"
#include "crypto/random.h"
#include "crypto/reencryptpriv.h"
#include "block-luks2-json.h"

QCryptoReencryptKeys *qcrypto_reencrypt_keys_new(void)
{
    return g_new0(QCryptoReencryptKeys, 1);
}

void qcrypto_reencrypt_keys_free(QCryptoReencryptKeys *keys)
{
    if (!keys) {
        return;
    }
    for (int i = 0; i < REENC_KEYS_MAX; i++) {
        qcrypto_secure_buf_free(keys->key[i]);
    }
    g_free(keys);
}

void reenc_keys_add(QCryptoReencryptKeys *keys, const uint8_t *key,
                    size_t nkey)
{
    if (!keys) {
        return;
    }
    for (int i = 0; i < REENC_KEYS_MAX; i++) {
        if (!keys->key[i]) {
            keys->key[i] = qcrypto_secure_buf_new(nkey);
            memcpy(keys->key[i]->data, key, nkey);
            return;
        }
    }
}

int reenc_keys_find(const QCryptoReencryptKeys *keys,
                    const QCryptoLUKS2Digest *d, QCryptoSecureBuf **key,
                    Error **errp)
{
    for (int i = 0; keys && i < REENC_KEYS_MAX; i++) {
        const QCryptoSecureBuf *k = keys->key[i];
        int r;

        if (!k) {
            continue;
        }
        r = qcrypto_luks2_digest_verify(d, k->data, k->len, errp);
        if (r < 0) {
            return -1;
        }
        if (r == 1) {
            *key = qcrypto_secure_buf_new(k->len);
            memcpy((*key)->data, k->data, k->len);
            return 1;
        }
    }
    return 0;
}

void reenc_clear(Reenc *r)
{
    if (r->root) {
        json_node_unref(r->root);
    }
    qcrypto_luks2_header_free(r->hdr);
    qcrypto_block_free(r->block);
}

/* ---- I/O through the caller's callbacks ---- */

int reenc_block_read(QCryptoBlock *block, uint64_t offset,
                            uint8_t *buf, size_t len, void *opaque,
                            Error **errp)
{
    const QCryptoReencryptIO *io = opaque;

    if (io->hdr_read) {
        return io->hdr_read(io->opaque, offset, buf, len, errp);
    }
    return io->read(io->opaque, offset, buf, len, errp);
}

int reenc_block_write(QCryptoBlock *block, uint64_t offset,
                             const uint8_t *buf, size_t len, void *opaque,
                             Error **errp)
{
    const QCryptoReencryptIO *io = opaque;

    if (io->hdr_write) {
        return io->hdr_write(io->opaque, offset, buf, len, errp);
    }
    return io->write(io->opaque, offset, buf, len, errp);
}

/* ---- JSON helpers ---- */

void reenc_set_u64(JsonObject *o, const char *key, uint64_t v)
{
    g_autofree char *s = g_strdup_printf("%" PRIu64, v);

    json_object_set_string_member(o, key, s);
}

void reenc_add_keyslot(Reenc *r, JsonObject *keyslots, JsonObject *area,
                       const char *mode, const char *direction)
{
    JsonObject *ks = json_object_new();
    g_autofree char *name = g_strdup_printf("%d", r->ks_id);

    json_object_set_object_member(ks, "area", area);
    json_object_set_string_member(ks, "type", "reencrypt");
    json_object_set_int_member(ks, "key_size", 1);
    json_object_set_string_member(ks, "mode", mode);
    json_object_set_string_member(ks, "direction", direction);
    json_object_set_int_member(ks, "priority", 0);
    json_object_set_object_member(keyslots, name, ks);
}

JsonObject *reenc_pbkdf2_digest(const char *hash, int64_t iterations,
                                const uint8_t *salt, size_t nsalt,
                                const uint8_t *dig, size_t ndig,
                                JsonArray *keyslots, JsonArray *segments)
{
    g_autofree char *salt64 = g_base64_encode(salt, nsalt);
    g_autofree char *dig64 = g_base64_encode(dig, ndig);
    JsonObject *dg = json_object_new();

    json_object_set_string_member(dg, "type", "pbkdf2");
    json_object_set_array_member(dg, "keyslots", keyslots);
    json_object_set_array_member(dg, "segments", segments);
    json_object_set_string_member(dg, "hash", hash);
    json_object_set_int_member(dg, "iterations", iterations);
    json_object_set_string_member(dg, "salt", salt64);
    json_object_set_string_member(dg, "digest", dig64);
    return dg;
}

int reenc_get_u64(JsonObject *o, const char *what, const char *key,
                   uint64_t *v, Error **errp)
{
    return luks2_json_get_u64_string(o, what, key, v, errp);
}

const char *reenc_get_str(JsonObject *o, const char *key, const char *def)
{
    JsonNode *n = json_object_get_member(o, key);

    if (!n || !JSON_NODE_HOLDS_VALUE(n) ||
        json_node_get_value_type(n) != G_TYPE_STRING) {
        return def;
    }
    return json_node_get_string(n);
}

bool reenc_seg_has_flag(JsonObject *seg, const char *flag)
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
JsonNode *reenc_deep_copy(JsonNode *node)
{
    g_autoptr(JsonGenerator) gen = json_generator_new();
    g_autofree char *text = NULL;

    json_generator_set_root(gen, node);
    text = json_generator_to_data(gen, NULL);
    return json_from_string(text, NULL);
}

/* A deep copy of seg, with flags replaced (NULL: none). */
JsonObject *reenc_seg_copy(JsonObject *seg, const char *flag)
{
    JsonNode *n = json_node_alloc();
    JsonNode *copy;
    JsonObject *o;

    json_node_init_object(n, seg);
    copy = reenc_deep_copy(n);
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

JsonObject *reenc_crypt_seg(JsonObject *tmpl, uint64_t physical, uint64_t x,
                            uint64_t size, const char *flag)
{
    JsonObject *o = reenc_seg_copy(tmpl, flag);

    reenc_set_u64(o, "offset", physical);
    if (size) {
        reenc_set_u64(o, "size", size);
    } else {
        json_object_set_string_member(o, "size", "dynamic");
    }
    reenc_set_u64(o, "iv_tweak", x / 512);
    return o;
}

int reenc_slot_lookup(JsonNode *root, JsonObject *ks, JsonObject **segs,
                      JsonObject **digests, JsonObject **area,
                      const char **dir, const char **atype, Error **errp)
{
    JsonObject *top = json_node_get_object(root);

    if (!(*segs = luks2_json_get_object(top, "metadata", "segments",
                                        errp)) ||
        !(*digests = luks2_json_get_object(top, "metadata", "digests",
                                           errp)) ||
        !(*dir = luks2_json_get_string(ks, "reencrypt keyslot", "direction",
                                       errp)) ||
        !(*area = luks2_json_get_object(ks, "reencrypt keyslot", "area",
                                        errp)) ||
        !(*atype = luks2_json_get_string(*area, "reencrypt keyslot area",
                                         "type", errp))) {
        return -1;
    }
    return 0;
}

JsonObject *reenc_linear_seg(uint64_t offset, uint64_t size)
{
    JsonObject *o = json_object_new();

    json_object_set_string_member(o, "type", "linear");
    reenc_set_u64(o, "offset", offset);
    reenc_set_u64(o, "size", size);
    return o;
}


char *reenc_json_text(JsonNode *root)
{
    g_autoptr(JsonGenerator) gen = json_generator_new();

    json_generator_set_root(gen, root);
    return json_generator_to_data(gen, NULL);
}

JsonObject *reenc_section(JsonNode *root, const char *name)
{
    return json_object_get_object_member(json_node_get_object(root), name);
}

/* Whether token node n is our data-size token (a non-string type is not). */
static bool reenc_is_size_token(JsonNode *n)
{
    return JSON_NODE_HOLDS_OBJECT(n) &&
        g_str_equal(reenc_get_str(json_node_get_object(n), "type", ""),
                    QCRYPTO_LUKS2_TOKEN_DATA_SIZE);
}

/* The "tokens" object, or NULL if it is missing or not an object. */
static JsonObject *reenc_tokens(JsonNode *root)
{
    JsonNode *n = json_object_get_member(json_node_get_object(root),
                                         "tokens");

    return n && JSON_NODE_HOLDS_OBJECT(n) ? json_node_get_object(n) : NULL;
}

void reenc_drop_size_token(JsonNode *root)
{
    JsonObject *tokens = reenc_tokens(root);
    g_autoptr(GList) ids = tokens ? json_object_get_members(tokens) : NULL;

    for (GList *l = ids; l; l = l->next) {
        if (reenc_is_size_token(json_object_get_member(tokens, l->data))) {
            json_object_remove_member(tokens, l->data);
        }
    }
}

uint64_t reenc_size_token(JsonNode *root)
{
    JsonObject *tokens = reenc_tokens(root);
    g_autoptr(GList) ids = tokens ? json_object_get_members(tokens) : NULL;

    for (GList *l = ids; l; l = l->next) {
        JsonNode *n = json_object_get_member(tokens, l->data);
        uint64_t size;

        if (reenc_is_size_token(n) &&
            luks2_json_get_u64_string(json_node_get_object(n), "token",
                                      "size", &size, NULL) == 0 &&
            size && size % 512 == 0) {
            return size;
        }
    }
    return 0;
}

int reenc_add_size_token(JsonNode *root, uint64_t size, Error **errp)
{
    JsonObject *tokens = reenc_tokens(root);
    JsonObject *tok;
    g_autofree char *key = NULL;
    int id;

    if (!tokens) {
        error_setg(errp, "LUKS2 metadata has no tokens object");
        return -1;
    }
    reenc_drop_size_token(root);
    for (id = 0; id < QCRYPTO_LUKS2_TOKENS_MAX; id++) {
        g_autofree char *k = g_strdup_printf("%d", id);

        if (!json_object_has_member(tokens, k)) {
            break;
        }
    }
    if (id == QCRYPTO_LUKS2_TOKENS_MAX) {
        error_setg(errp, "No free LUKS2 token for the data size (all %d "
                   "are in use)", QCRYPTO_LUKS2_TOKENS_MAX);
        return -1;
    }
    tok = json_object_new();
    json_object_set_string_member(tok, "type", QCRYPTO_LUKS2_TOKEN_DATA_SIZE);
    json_object_set_array_member(tok, "keyslots", json_array_new());
    reenc_set_u64(tok, "size", size);
    key = g_strdup_printf("%d", id);
    json_object_set_object_member(tokens, key, tok);
    return 0;
}

JsonArray *reenc_id_array(const int *ids, int n)
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
    const char *type = reenc_get_str(seg, "type", NULL);

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
    const char *type = area ? reenc_get_str(area, "type", NULL) : NULL;

    if (!type || !ser_str(b, ks, "mode") || !ser_str(b, ks, "direction") ||
        !ser_str(b, area, "type") || !ser_u64(b, area, "offset", false) ||
        !ser_u64(b, area, "size", false)) {
        return false;
    }
    if (g_str_equal(type, "datashift")) {
        return ser_u64(b, area, "shift_size", false);
    }
    if (g_str_equal(type, "datashift-checksum")) {
        return ser_str(b, area, "hash") && ser_u32(b, area, "sector_size") &&
            ser_u64(b, area, "shift_size", false);
    }
    if (g_str_equal(type, "checksum")) {
        return ser_str(b, area, "hash") && ser_u32(b, area, "sector_size");
    }
    return true;
}

/*
 * The bytes the digest covers; NULL if a field is missing or malformed.
 * old is the key of the data as it was (re-encryption, decryption), new
 * the key it gets (re-encryption, encryption); either may be absent.
 */
static GByteArray *reenc_verification_data(Reenc *r, const uint8_t *old,
                                           size_t nold, const uint8_t *new,
                                           size_t nnew)
{
    GByteArray *b = g_byte_array_new();
    g_autofree char *id = g_strdup_printf("%d", r->ks_id);
    JsonObject *ks = json_object_get_object_member(
        reenc_section(r->root, "keyslots"), id);
    uint8_t head[2] = { 'v', '0' + r->version };

    g_byte_array_append(b, head, 2);
    if (old) {
        g_byte_array_append(b, old, nold);
    }
    if (new) {
        g_byte_array_append(b, new, nnew);
    }
    if (!ks || !ser_keyslot(b, ks) || !ser_segment(b, r->prev) ||
        !ser_segment(b, r->final) || (r->moved && !ser_segment(b, r->moved))) {
        explicit_bzero(b->data, b->len);
        g_byte_array_unref(b);
        return NULL;
    }
    return b;
}

int reenc_digest_compute(Reenc *r, QCryptoHashAlgo hash, uint64_t iters,
                         const uint8_t *salt, size_t nsalt,
                         const uint8_t *old, size_t nold,
                         const uint8_t *new, size_t nnew,
                         uint8_t *out, size_t nout, Error **errp)
{
    GByteArray *data = reenc_verification_data(r, old, nold, new, nnew);
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

int reenc_digest_check(Reenc *r, const uint8_t *old, size_t nold,
                       const uint8_t *new, size_t nnew, Error **errp)
{
    g_autofree char *dn = g_strdup_printf("%d", r->digest_reenc);
    JsonObject *dg = json_object_get_object_member(
        reenc_section(r->root, "digests"), dn);
    uint8_t salt[QCRYPTO_LUKS2_JSON_SALT_MAX], want[QCRYPTO_HASH_MAX_DIGEST_LEN];
    uint8_t got[QCRYPTO_HASH_MAX_DIGEST_LEN];
    QCryptoHashAlgo hash;
    size_t nsalt, nwant;
    uint32_t iters;
    uint8_t diff = 0;

    if (!dg) {
        error_setg(errp, "LUKS2 re-encryption digest is missing");
        return -1;
    }
    if (luks2_json_get_hash(dg, "digest", "hash", &hash, errp) < 0 ||
        luks2_json_get_uint(dg, "digest", "iterations", 1000,
                            r->block->max_pbkdf2_iters, &iters, errp) < 0 ||
        luks2_json_get_base64(dg, "digest", "salt", salt, sizeof(salt),
                              &nsalt, errp) < 0 ||
        luks2_json_get_base64(dg, "digest", "digest", want, sizeof(want),
                              &nwant, errp) < 0 ||
        reenc_digest_compute(r, hash, iters, salt, nsalt, old, nold, new,
                             nnew, got, nwant, errp) < 0) {
        return -1;
    }
    /* constant time: the digest is a function of the volume key */
    for (size_t i = 0; i < nwant; i++) {
        diff |= got[i] ^ want[i];
    }
    explicit_bzero(got, sizeof(got));
    if (diff) {
        error_setg(errp, "LUKS2 re-encryption metadata does not match its "
                   "digest: it is damaged or was changed; refusing to touch "
                   "the data");
        return -1;
    }
    return 0;
}

/* ---- reading the state ---- */

JsonObject *reenc_find_backup(JsonObject *segs, const char *flag,
                               int *id)
{
    g_autoptr(GList) members = json_object_get_members(segs);

    for (GList *l = members; l; l = l->next) {
        JsonNode *n = json_object_get_member(segs, l->data);

        if (JSON_NODE_HOLDS_OBJECT(n) &&
            reenc_seg_has_flag(json_node_get_object(n), flag)) {
            if (id) {
                /* -1 if not a strict id ("01", "1x", "-1"...) */
                *id = luks2_json_parse_id(l->data,
                                          QCRYPTO_LUKS2_SEGMENTS_MAX,
                                          "segment", NULL);
            }
            return json_node_get_object(n);
        }
    }
    return NULL;
}

bool reenc_id_array_has(JsonObject *o, const char *key, int id)
{
    JsonArray *a;

    if (!json_object_has_member(o, key) ||
        !JSON_NODE_HOLDS_ARRAY(json_object_get_member(o, key))) {
        return false;
    }
    a = json_object_get_array_member(o, key);
    for (guint i = 0; i < json_array_get_length(a); i++) {
        JsonNode *n = json_array_get_element(a, i);

        /* strict: "01" or "1x" is not id 1 */
        if (JSON_NODE_HOLDS_VALUE(n) &&
            json_node_get_value_type(n) == G_TYPE_STRING &&
            luks2_json_parse_id(json_node_get_string(n),
                                QCRYPTO_LUKS2_SEGMENTS_MAX, "id",
                                NULL) == id) {
            return true;
        }
    }
    return false;
}

int reenc_hdr_sync(const QCryptoReencryptIO *io, Error **errp)
{
    return io->hdr_sync ? io->hdr_sync(io->opaque, errp)
                        : io->sync(io->opaque, errp);
}

int reenc_block_flush(QCryptoBlock *block, void *opaque, Error **errp)
{
    return reenc_hdr_sync(opaque, errp);
}

int reenc_write_root(Reenc *r, JsonNode *root, Error **errp)
{
    g_autofree char *json = reenc_json_text(root);

    if (qcrypto_luks2_header_write(r->hdr, json, r->block, reenc_block_write,
                                   reenc_block_flush, (void *)r->io,
                                   errp) < 0) {
        return -1;
    }
    return 0;
}

/*
 * Aligned to the largest LUKS2 sector (4 KiB, a page): a write from it
 * reaches the file in whole sectors and pages, never split inside one
 * by a bounce buffer or the kernel, which a crash would leave torn
 * (half old, half new: no resilience can tell what it was).
 */
uint8_t *reenc_zone_buf_new(uint64_t len)
{
    void *p = NULL;

    if (posix_memalign(&p, REENC_ZONE_ALIGN, MAX(len, 1)) != 0) {
        g_error("out of memory for a hot zone of %" PRIu64 " bytes", len);
    }
    return p;
}

void reenc_zone_buf_free(uint8_t *buf, uint64_t len)
{
    if (buf) {
        explicit_bzero(buf, len);
        free(buf);
    }
}

/* Copy len bytes from src to dst in the file, in 1 MiB pieces. */
int reenc_io_copy(const QCryptoReencryptIO *io, uint64_t src, uint64_t dst,
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

/* ---- loading ---- */

/*
 * Every step rewrites the metadata from its tree with json-glib's
 * generator (and copies it that way, reenc_deep_copy()): refuse, before
 * anything is written, metadata it cannot write back as JSON that reads
 * the same (json-glib 1.6 writes 1e20 as "1e+20.0" and 1e999 as "inf.0",
 * which no parser reads: the next header would be lost).
 */
static int reenc_check_round_trip(JsonNode *root, Error **errp)
{
    g_autofree char *text = reenc_json_text(root);
    g_autoptr(JsonNode) again = json_from_string(text, NULL);
    g_autofree char *text2 = again ? reenc_json_text(again) : NULL;

    if (!text2 || !g_str_equal(text, text2)) {
        error_setg(errp, "LUKS2 metadata holds values (numbers such as "
                   "1e20) that cannot be written back unchanged; refusing "
                   "to rewrite it");
        return -1;
    }
    return 0;
}

int reenc_load(Reenc *r, const QCryptoReencryptIO *io, Error **errp)
{
    r->io = io;
    r->block = qcrypto_block_new(QCRYPTO_BLOCK_FORMAT_LUKS, NULL);
    r->hdr = qcrypto_luks2_header_read(r->block, reenc_block_read,
                                       (void *)io, NULL, errp);
    if (!r->hdr || luks2_json_validate_depth(r->hdr->json, errp) < 0) {
        return -1;
    }
    r->root = json_from_string(r->hdr->json, NULL);
    if (!r->root || !JSON_NODE_HOLDS_OBJECT(r->root)) {
        error_setg(errp, "LUKS2 metadata is not a JSON object");
        return -1;
    }
    return reenc_check_round_trip(r->root, errp);
}

/*
 * The requirement (sets r->version) and the reencrypt key slot (sets
 * r->ks_id, returns it); its mode in *mode.
 */
JsonObject *reenc_find_keyslot(Reenc *r, const char **mode, Error **errp)
{
    JsonObject *top = json_node_get_object(r->root);
    JsonObject *config, *keyslots, *ks = NULL;
    g_auto(GStrv) req = NULL;
    g_autoptr(GList) members = NULL;

    r->version = 0;
    config = luks2_json_get_object(top, "metadata", "config", errp);
    if (!config) {
        return NULL;
    }
    if (json_object_has_member(config, "requirements")) {
        JsonObject *ro = luks2_json_get_object(config, "config",
                                               "requirements", errp);

        if (!ro || luks2_json_get_strv(ro, "config requirements",
                                       "mandatory", &req, errp) < 0) {
            return NULL;
        }
        for (char **p = req; *p; p++) {
            if (g_str_equal(*p, "online-reencrypt-v2")) {
                r->version = 2;
            } else if (g_str_equal(*p, "online-reencrypt-v3")) {
                r->version = 3;
            } else if (g_str_has_prefix(*p, "online-reencrypt") ||
                       g_str_has_prefix(*p, "offline-reencrypt")) {
                error_setg(errp, "LUKS2 re-encryption state '%s' is not "
                           "supported (only online-reencrypt-v2 and -v3): "
                           "finish it with cryptsetup reencrypt "
                           "--resume-only", *p);
                return NULL;
            }
        }
    }
    if (!r->version) {
        error_setg(errp, "The image is not being re-encrypted (no "
                   "'online-reencrypt' requirement)");
        return NULL;
    }
    keyslots = luks2_json_get_object(top, "metadata", "keyslots", errp);
    if (!keyslots) {
        return NULL;
    }
    members = json_object_get_members(keyslots);
    r->ks_id = -1;
    for (GList *l = members; l; l = l->next) {
        JsonNode *n = json_object_get_member(keyslots, l->data);
        const char *t;

        if (!JSON_NODE_HOLDS_OBJECT(n)) {
            continue;
        }
        t = reenc_get_str(json_node_get_object(n), "type", "");
        if (g_str_equal(t, "reencrypt")) {
            if (r->ks_id >= 0) {
                error_setg(errp, "LUKS2 image has two reencrypt key slots");
                return NULL;
            }
            r->ks_id = luks2_json_parse_id(l->data,
                                           QCRYPTO_LUKS2_KEYSLOTS_MAX,
                                           "keyslot", errp);
            if (r->ks_id < 0) {
                return NULL;
            }
            ks = json_node_get_object(n);
        }
    }
    if (!ks) {
        error_setg(errp, "LUKS2 re-encryption key slot is missing");
        return NULL;
    }
    *mode = luks2_json_get_string(ks, "reencrypt keyslot", "mode", errp);
    return *mode ? ks : NULL;
}

bool qcrypto_reencrypt_unfinished(const QCryptoReencryptIO *io)
{
    QCryptoBlock *probe;
    bool luks2;
    Reenc r = { 0 };
    JsonObject *config, *req;
    JsonArray *mand;
    bool ret = false;

    if (reenc_luks1_running(io)) {
        return true;
    }
    probe = qcrypto_block_new(QCRYPTO_BLOCK_FORMAT_LUKS, NULL);
    luks2 = qcrypto_luks2_probe(probe, reenc_block_read, (void *)io);
    qcrypto_block_free(probe);
    if (!luks2 || reenc_load(&r, io, NULL) < 0) {
        goto out;
    }
    config = luks2_json_get_object(json_node_get_object(r.root), "metadata",
                                   "config", NULL);
    if (!config || !json_object_has_member(config, "requirements") ||
        !JSON_NODE_HOLDS_OBJECT(json_object_get_member(config,
                                                       "requirements"))) {
        goto out;
    }
    req = json_object_get_object_member(config, "requirements");
    if (!json_object_has_member(req, "mandatory") ||
        !JSON_NODE_HOLDS_ARRAY(json_object_get_member(req, "mandatory"))) {
        goto out;
    }
    mand = json_object_get_array_member(req, "mandatory");
    for (guint i = 0; i < json_array_get_length(mand); i++) {
        JsonNode *n = json_array_get_element(mand, i);
        const char *s = JSON_NODE_HOLDS_VALUE(n) &&
            json_node_get_value_type(n) == G_TYPE_STRING ?
            json_node_get_string(n) : "";

        ret |= g_str_has_prefix(s, "online-reencrypt") ||
               g_str_has_prefix(s, "offline-reencrypt");
    }
out:
    reenc_clear(&r);
    return ret;
}

uint64_t reenc_hotzone_size(uint64_t asked, uint64_t dflt, uint64_t max,
                            uint64_t align, Error **errp)
{
    uint64_t h = MIN(asked ? asked : dflt, max);

    h -= h % align;
    if (!h) {
        error_setg(errp, "The hot zone must hold at least one block of %"
                   PRIu64 " bytes", align);
    }
    return h;
}

void reenc_slot_not_opened(Error **errp, const char *fmt, int slot,
                           bool from_list)
{
    error_setg(errp, "%s key slot %d does not open with %s: give every key "
               "slot's secret with slot-secrets=ID:ID... (in slot order), or "
               "keep one slot with keyslot=N", fmt, slot,
               from_list ? "its slot-secrets entry" : "key-secret");
}
