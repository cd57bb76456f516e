/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * LUKS2 JSON metadata (LUKS2 spec, "JSON area"): the life of a
 * QCryptoLUKS2Metadata. The text is parsed with json-glib and validated
 * (block-luks2-json-validate.c) into the structs of luks2priv.h. The
 * parsed JsonNode is kept: edits (block-luks2-json-edit.c) are made to it,
 * so unknown fields and tokens survive a rewrite, and the result is
 * validated again (reload) before its text (to_json) is written.
 */
#include "block-luks2-json.h"

static const char *const luks2_json_kdf_names[QCRYPTO_BLOCK_KDF__MAX] = {
    [QCRYPTO_BLOCK_KDF_PBKDF2] = "pbkdf2",
    [QCRYPTO_BLOCK_KDF_ARGON2I] = "argon2i",
    [QCRYPTO_BLOCK_KDF_ARGON2ID] = "argon2id",
};

const char *qcrypto_block_kdf_name(QCryptoBlockKDF type)
{
    g_assert(type < QCRYPTO_BLOCK_KDF__MAX);
    return luks2_json_kdf_names[type];
}

int qcrypto_block_kdf_parse(const char *name)
{
    for (int i = 0; i < QCRYPTO_BLOCK_KDF__MAX; i++) {
        if (g_str_equal(name, luks2_json_kdf_names[i])) {
            return i;
        }
    }
    return -1;
}

/* Free the derived structs (not root). */
static void qcrypto_luks2_json_metadata_clear(QCryptoLUKS2Metadata *md)
{
    g_clear_pointer(&md->config_flags, g_strfreev);
    g_clear_pointer(&md->requirements, g_strfreev);
    for (int i = 0; i < QCRYPTO_LUKS2_KEYSLOTS_MAX; i++) {
        if (md->keyslots[i]) {
            g_free(md->keyslots[i]->area_encryption);
            g_free(md->keyslots[i]);
            md->keyslots[i] = NULL;
        }
    }
    for (int i = 0; i < QCRYPTO_LUKS2_SEGMENTS_MAX; i++) {
        if (md->segments[i]) {
            g_free(md->segments[i]->encryption);
            g_free(md->segments[i]);
            md->segments[i] = NULL;
        }
    }
    for (int i = 0; i < QCRYPTO_LUKS2_DIGESTS_MAX; i++) {
        g_clear_pointer(&md->digests[i], g_free);
    }
    for (int i = 0; i < QCRYPTO_LUKS2_TOKENS_MAX; i++) {
        if (md->tokens[i]) {
            g_free(md->tokens[i]->type);
            g_free(md->tokens[i]);
            md->tokens[i] = NULL;
        }
    }
}

QCryptoLUKS2Metadata *qcrypto_luks2_metadata_parse(const char *json,
                                                   uint64_t hdr_size,
                                                   Error **errp)
{
    g_autoptr(JsonParser) parser = json_parser_new();
    g_autoptr(QCryptoLUKS2Metadata) md = g_new0(QCryptoLUKS2Metadata, 1);
    g_autoptr(GError) gerr = NULL;

    md->hdr_size = hdr_size;
    if (luks2_json_validate_depth(json, errp) < 0) {
        return NULL;
    }
    if (!json_parser_load_from_data(parser, json, -1, &gerr)) {
        error_setg(errp, "LUKS2 metadata is not valid JSON: %s",
                   gerr->message);
        return NULL;
    }
    md->root = json_parser_steal_root(parser);
    if (!md->root) {
        error_setg(errp, "LUKS2 metadata is empty");
        return NULL;
    }
    if (luks2_json_validate(md, errp) < 0) {
        return NULL;
    }
    return g_steal_pointer(&md);
}

int qcrypto_luks2_metadata_reload(QCryptoLUKS2Metadata *md, Error **errp)
{
    QCryptoLUKS2Metadata fresh = { .root = md->root,
                                   .hdr_size = md->hdr_size };

    if (luks2_json_validate(&fresh, errp) < 0) {
        qcrypto_luks2_json_metadata_clear(&fresh);
        return -1;
    }
    qcrypto_luks2_json_metadata_clear(md);
    *md = fresh;
    return 0;
}

char *qcrypto_luks2_metadata_to_json(const QCryptoLUKS2Metadata *md)
{
    g_autoptr(JsonGenerator) gen = json_generator_new();
    g_autofree char *text = NULL, *again = NULL;
    g_autoptr(JsonNode) back = NULL;

    json_generator_set_root(gen, md->root);
    text = json_generator_to_data(gen, NULL);
    /* The same text from what it reads back: a fixed point, readable. */
    back = json_from_string(text, NULL);
    if (!back) {
        return NULL;
    }
    json_generator_set_root(gen, back);
    again = json_generator_to_data(gen, NULL);
    if (!g_str_equal(text, again)) {
        return NULL;
    }
    return g_steal_pointer(&text);
}

uint64_t qcrypto_luks2_keyslots_end(const QCryptoLUKS2Metadata *md)
{
    return 2 * md->hdr_size + md->keyslots_size;
}

int qcrypto_luks2_segment_digest(const QCryptoLUKS2Metadata *md, int seg)
{
    return md->segments[seg] ? md->segments[seg]->digest : -1;
}

void qcrypto_luks2_metadata_free(QCryptoLUKS2Metadata *md)
{
    if (!md) {
        return;
    }
    qcrypto_luks2_json_metadata_clear(md);
    if (md->root) {
        json_node_unref(md->root);
    }
    g_free(md);
}
