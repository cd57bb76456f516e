/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * LUKS2 JSON metadata: edits (a key slot added, replaced or removed). They
 * are made to the parsed JsonNode, so unknown fields and tokens survive a
 * rewrite; the caller validates the result again with
 * qcrypto_luks2_metadata_reload() before it is written.
 */
#include "luks2priv.h"

static JsonObject *qcrypto_luks2_json_edit_section(QCryptoLUKS2Metadata *md,
                                                   const char *name)
{
    return json_object_get_object_member(json_node_get_object(md->root),
                                         name);
}

static void qcrypto_luks2_json_edit_set_u64_string(JsonObject *obj,
                                                   const char *key, uint64_t v)
{
    g_autofree char *s = g_strdup_printf("%" PRIu64, v);

    json_object_set_string_member(obj, key, s);
}

static void qcrypto_luks2_json_edit_set_base64(JsonObject *obj,
                                               const char *key,
                                               const uint8_t *data, size_t len)
{
    g_autofree char *s = g_base64_encode(data, len);

    json_object_set_string_member(obj, key, s);
}

/* Remove id from (or, with add, append it to) the id array obj[key]. */
static void qcrypto_luks2_json_edit_id_array(JsonObject *obj, const char *key,
                                             int id, bool add)
{
    JsonArray *arr = json_object_get_array_member(obj, key);
    g_autofree char *s = g_strdup_printf("%d", id);

    for (guint i = json_array_get_length(arr); i-- > 0;) {
        if (g_str_equal(json_array_get_string_element(arr, i), s)) {
            if (add) {
                return;
            }
            json_array_remove_element(arr, i);
        }
    }
    if (add) {
        json_array_add_string_element(arr, s);
    }
}

void qcrypto_luks2_metadata_set_keyslot(QCryptoLUKS2Metadata *md,
                                        const QCryptoLUKS2Keyslot *ks)
{
    g_autofree char *id = g_strdup_printf("%d", ks->id);
    JsonObject *obj = json_object_new();
    JsonObject *af = json_object_new();
    JsonObject *area = json_object_new();
    JsonObject *kdf = json_object_new();

    /* Field order as cryptsetup writes it. */
    json_object_set_string_member(obj, "type", "luks2");
    json_object_set_int_member(obj, "key_size", ks->key_size);
    if (ks->priority != QCRYPTO_LUKS2_PRIORITY_NORMAL) {
        json_object_set_int_member(obj, "priority", ks->priority);
    }

    json_object_set_string_member(af, "type", "luks1");
    json_object_set_int_member(af, "stripes", ks->af_stripes);
    json_object_set_string_member(af, "hash",
                                  qcrypto_hash_algo_name(ks->af_hash));
    json_object_set_object_member(obj, "af", af);

    json_object_set_string_member(area, "type", "raw");
    qcrypto_luks2_json_edit_set_u64_string(area, "offset", ks->area_offset);
    qcrypto_luks2_json_edit_set_u64_string(area, "size", ks->area_size);
    json_object_set_string_member(area, "encryption", ks->area_encryption);
    json_object_set_int_member(area, "key_size", ks->area_key_size);
    json_object_set_object_member(obj, "area", area);

    json_object_set_string_member(kdf, "type",
                                  qcrypto_block_kdf_name(ks->kdf.type));
    if (ks->kdf.type == QCRYPTO_BLOCK_KDF_PBKDF2) {
        json_object_set_string_member(kdf, "hash",
                                      qcrypto_hash_algo_name(ks->kdf.hash));
        json_object_set_int_member(kdf, "iterations", ks->kdf.iterations);
    } else {
        json_object_set_int_member(kdf, "time", ks->kdf.time);
        json_object_set_int_member(kdf, "memory", ks->kdf.memory);
        json_object_set_int_member(kdf, "cpus", ks->kdf.parallel);
    }
    qcrypto_luks2_json_edit_set_base64(kdf, "salt", ks->kdf.salt,
                                       ks->kdf.nsalt);
    json_object_set_object_member(obj, "kdf", kdf);

    json_object_set_object_member(
        qcrypto_luks2_json_edit_section(md, "keyslots"), id, obj);

    if (ks->digest >= 0) {
        g_autofree char *did = g_strdup_printf("%d", ks->digest);
        JsonObject *d = json_object_get_object_member(
            qcrypto_luks2_json_edit_section(md, "digests"), did);

        g_assert(d);
        qcrypto_luks2_json_edit_id_array(d, "keyslots", ks->id, true);
    }
}

void qcrypto_luks2_metadata_remove_keyslot(QCryptoLUKS2Metadata *md, int id)
{
    g_autofree char *sid = g_strdup_printf("%d", id);
    const char *const sections[] = { "digests", "tokens" };

    json_object_remove_member(qcrypto_luks2_json_edit_section(md, "keyslots"),
                              sid);
    for (size_t s = 0; s < G_N_ELEMENTS(sections); s++) {
        JsonObject *sec = qcrypto_luks2_json_edit_section(md, sections[s]);
        g_autoptr(GList) members = json_object_get_members(sec);

        for (GList *l = members; l; l = l->next) {
            qcrypto_luks2_json_edit_id_array(
                json_object_get_object_member(sec, l->data), "keyslots", id,
                false);
        }
    }
}
