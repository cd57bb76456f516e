/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * qemu-img-lite info: what qemu-img 7.2 prints, with the same fields and
 * JSON keys, in the same order (its order comes from a QDict walk: we
 * follow it so the outputs can be compared line by line).
 */
#include <stdio.h>

#include <json-glib/json-glib.h>

#include "img.h"

/*
 * LUKS2 (which QEMU does not read, so it has no keys for it): our own keys,
 * in QEMU's style, after the LUKS1 ones.
 */
static void json_add_int(JsonBuilder *b, const char *key, int64_t v)
{
    json_builder_set_member_name(b, key);
    json_builder_add_int_value(b, v);
}

static void json_add_str(JsonBuilder *b, const char *key, const char *v)
{
    json_builder_set_member_name(b, key);
    json_builder_add_string_value(b, v);
}

static void info_add_luks2_slot_json(JsonBuilder *b,
                                     const QCryptoBlockInfoLUKSSlot *slot)
{
    json_add_str(b, "kdf", qcrypto_block_kdf_name(slot->kdf));
    if (slot->kdf != QCRYPTO_BLOCK_KDF_PBKDF2) {
        json_add_int(b, "kdf-memory", slot->kdf_memory);
        json_add_int(b, "kdf-parallel", slot->kdf_parallel);
    }
    json_add_int(b, "priority", slot->priority);
    json_builder_set_member_name(b, "bound");
    json_builder_add_boolean_value(b, slot->bound);
}

static void info_add_luks2_json(JsonBuilder *b, const QCryptoBlockInfo *l)
{
    json_add_int(b, "version", l->version);
    json_add_int(b, "sector-size", l->sector_size);
    if (l->label && *l->label) {
        json_add_str(b, "label", l->label);
    }
    if (l->subsystem && *l->subsystem) {
        json_add_str(b, "subsystem", l->subsystem);
    }
    json_add_int(b, "metadata-size", l->metadata_size);
    json_add_int(b, "keyslots-size", l->keyslots_size);
    json_builder_set_member_name(b, "segments");
    json_builder_begin_array(b);
    for (size_t i = 0; i < l->nsegments; i++) {
        const QCryptoBlockInfoLUKS2Segment *seg = &l->segments[i];

        json_builder_begin_object(b);
        json_add_int(b, "offset", seg->offset);
        if (seg->size_dynamic) {
            json_add_str(b, "size", "dynamic");
        } else {
            json_add_int(b, "size", seg->size);
        }
        json_add_int(b, "iv-tweak", seg->iv_tweak);
        json_add_str(b, "encryption", seg->encryption ? seg->encryption : "");
        json_add_int(b, "sector-size", seg->sector_size);
        json_builder_end_object(b);
    }
    json_builder_end_array(b);
    json_builder_set_member_name(b, "tokens");
    json_builder_begin_array(b);
    for (size_t i = 0; i < l->ntokens; i++) {
        const QCryptoBlockInfoLUKS2Token *tok = &l->tokens[i];

        json_builder_begin_object(b);
        json_add_int(b, "id", tok->id);
        json_add_str(b, "type", tok->type ? tok->type : "");
        json_builder_set_member_name(b, "keyslots");
        json_builder_begin_array(b);
        for (int k = 0; k < 32; k++) {
            if (tok->keyslots & (1u << k)) {
                json_builder_add_int_value(b, k);
            }
        }
        json_builder_end_array(b);
        json_builder_end_object(b);
    }
    json_builder_end_array(b);
}

/*
 * The LUKS header's keys; in_qcow2: as qcow2's "encrypt" object, which
 * QEMU gives a "format" key (placed where its QDict walk puts it).
 */
static void info_add_luks_fields_json(JsonBuilder *b,
                                      const QCryptoBlockInfo *l,
                                      bool in_qcow2)
{
    json_builder_set_member_name(b, "ivgen-alg");
    json_builder_add_string_value(b, qcrypto_ivgen_algo_name(l->ivgen_alg));
    json_builder_set_member_name(b, "hash-alg");
    json_builder_add_string_value(b, qcrypto_hash_algo_name(l->hash_alg));
    json_builder_set_member_name(b, "cipher-alg");
    json_builder_add_string_value(b,
                                  qcrypto_cipher_algo_name(l->cipher_alg));
    json_builder_set_member_name(b, "uuid");
    json_builder_add_string_value(b, l->uuid ? l->uuid : "");
    if (l->has_ivgen_hash_alg) {
        json_builder_set_member_name(b, "ivgen-hash-alg");
        json_builder_add_string_value(
            b, qcrypto_hash_algo_name(l->ivgen_hash_alg));
    }
    if (in_qcow2) {
        json_add_str(b, "format", "luks");
    }
    json_builder_set_member_name(b, "cipher-mode");
    json_builder_add_string_value(b,
                                  qcrypto_cipher_mode_name(l->cipher_mode));
    json_builder_set_member_name(b, "slots");
    json_builder_begin_array(b);
    for (size_t i = 0; i < l->nslots; i++) {
        const QCryptoBlockInfoLUKSSlot *slot = &l->slots[i];

        json_builder_begin_object(b);
        json_builder_set_member_name(b, "active");
        json_builder_add_boolean_value(b, slot->active);
        if (slot->active) {
            json_builder_set_member_name(b, "iters");
            json_builder_add_int_value(b, slot->iters);
        }
        json_builder_set_member_name(b, "key-offset");
        json_builder_add_int_value(b, slot->key_offset);
        if (slot->active) {
            json_builder_set_member_name(b, "stripes");
            json_builder_add_int_value(b, slot->stripes);
        }
        if (slot->active && l->version == 2) {
            info_add_luks2_slot_json(b, slot);
        }
        json_builder_end_object(b);
    }
    json_builder_end_array(b);
    json_builder_set_member_name(b, "payload-offset");
    json_builder_add_int_value(b, l->payload_offset);
    json_builder_set_member_name(b, "master-key-iters");
    json_builder_add_int_value(b, l->master_key_iters);
    if (l->detached_header) {
        /* QEMU 9's key; QEMU 7.2 has no detached headers. */
        json_builder_set_member_name(b, "detached-header");
        json_builder_add_boolean_value(b, TRUE);
    }
    if (l->version == 2) {
        info_add_luks2_json(b, l);
    }
}

static void info_add_luks_json(JsonBuilder *b, const QCryptoBlockInfo *l)
{
    json_builder_set_member_name(b, "format-specific");
    json_builder_begin_object(b);
    json_add_str(b, "type", "luks");
    json_builder_set_member_name(b, "data");
    json_builder_begin_object(b);
    info_add_luks_fields_json(b, l, false);
    json_builder_end_object(b);
    json_builder_end_object(b);
}

static void json_add_bool(JsonBuilder *b, const char *key, bool v)
{
    json_builder_set_member_name(b, key);
    json_builder_add_boolean_value(b, v);
}

/* qcow2's persistent bitmaps, as qemu-img 7.2 lists them. */
static void info_add_bitmaps_json(JsonBuilder *b, const BlockImageInfoQcow2 *q)
{
    json_builder_set_member_name(b, "bitmaps");
    json_builder_begin_array(b);
    for (size_t i = 0; i < q->nb_bitmaps; i++) {
        const BlockImageInfoBitmap *bm = &q->bitmaps[i];

        json_builder_begin_object(b);
        json_builder_set_member_name(b, "flags");
        json_builder_begin_array(b);
        if (bm->in_use) {
            json_builder_add_string_value(b, "in-use");
        }
        if (bm->autoload) {
            json_builder_add_string_value(b, "auto");
        }
        json_builder_end_array(b);
        json_add_str(b, "name", bm->name);
        json_add_int(b, "granularity", bm->granularity);
        json_builder_end_object(b);
    }
    json_builder_end_array(b);
}

/* qcow2's format-specific data, in qemu-img 7.2's key order. */
static void info_add_qcow2_json(JsonBuilder *b, const BlockImageInfoQcow2 *q)
{
    bool v3 = q->version >= 3;

    json_builder_set_member_name(b, "format-specific");
    json_builder_begin_object(b);
    json_add_str(b, "type", "qcow2");
    json_builder_set_member_name(b, "data");
    json_builder_begin_object(b);
    json_add_str(b, "compat", v3 ? "1.1" : "0.10");
    json_add_str(b, "compression-type", q->compression_type);
    if (v3) {
        json_add_bool(b, "lazy-refcounts", q->lazy_refcounts);
    }
    if (q->nb_bitmaps) {
        info_add_bitmaps_json(b, q);
    }
    json_add_int(b, "refcount-bits", q->refcount_bits);
    if (q->data_file) {
        json_add_str(b, "data-file", q->data_file);
    }
    if (q->encrypt_format) {
        json_builder_set_member_name(b, "encrypt");
        json_builder_begin_object(b);
        if (q->encrypt_luks) {
            info_add_luks_fields_json(b, q->encrypt_luks, true);
        } else {
            json_add_str(b, "format", q->encrypt_format);
        }
        json_builder_end_object(b);
    }
    if (v3 && q->has_data_file) {
        json_add_bool(b, "data-file-raw", q->data_file_raw);
    }
    if (v3) {
        json_add_bool(b, "corrupt", q->corrupt);
        json_add_bool(b, "extended-l2", q->extended_l2);
    }
    json_builder_end_object(b);
    json_builder_end_object(b);
}


/* "snapshots": qemu-img 7.2's SnapshotInfo objects, in its key order. */
static void info_add_snapshots_json(JsonBuilder *b,
                                    const BlockSnapshotInfo *list, size_t n)
{
    json_builder_set_member_name(b, "snapshots");
    json_builder_begin_array(b);
    for (size_t i = 0; i < n; i++) {
        const BlockSnapshotInfo *sn = &list[i];

        json_builder_begin_object(b);
        if (sn->icount != UINT64_MAX) {
            json_add_int(b, "icount", sn->icount);
        }
        json_add_int(b, "vm-clock-nsec", sn->vm_clock_nsec % 1000000000ull);
        json_add_str(b, "name", sn->name);
        json_add_int(b, "date-sec", sn->date_sec);
        json_add_int(b, "date-nsec", sn->date_nsec);
        json_add_int(b, "vm-clock-sec", sn->vm_clock_nsec / 1000000000ull);
        json_add_str(b, "id", sn->id);
        json_add_int(b, "vm-state-size", sn->vm_state_size);
        json_builder_end_object(b);
    }
    json_builder_end_array(b);
}

/* One image's object, keys in qemu-img 7.2's order. */
static void info_add_image_json(JsonBuilder *b, const BlockImageInfo *info)
{
    json_builder_begin_object(b);
    if (info->backing_filename_format) {
        json_add_str(b, "backing-filename-format",
                     info->backing_filename_format);
    }
    if (info->nb_snapshots) {
        info_add_snapshots_json(b, info->snapshots, info->nb_snapshots);
    }
    json_add_int(b, "virtual-size", info->virtual_size);
    json_add_str(b, "filename", info->filename);
    if (info->cluster_size) {
        json_add_int(b, "cluster-size", info->cluster_size);
    }
    json_add_str(b, "format", info->format);
    if (info->actual_size >= 0) {
        json_add_int(b, "actual-size", info->actual_size);
    }
    if (info->luks) {
        info_add_luks_json(b, info->luks);
    }
    if (info->qcow2) {
        info_add_qcow2_json(b, info->qcow2);
    }
    if (info->rbd) {
        json_builder_set_member_name(b, "format-specific");
        json_builder_begin_object(b);
        json_add_str(b, "type", "rbd");
        json_builder_set_member_name(b, "data");
        json_builder_begin_object(b);
        if (info->rbd->encryption_format) {
            json_add_str(b, "encryption-format",
                         info->rbd->encryption_format);
        }
        json_builder_end_object(b);
        json_builder_end_object(b);
    }
    if (info->full_backing_filename) {
        json_add_str(b, "full-backing-filename", info->full_backing_filename);
    }
    if (info->encrypted) {
        json_add_bool(b, "encrypted", TRUE);
    }
    if (info->backing_filename) {
        json_add_str(b, "backing-filename", info->backing_filename);
    }
    json_add_bool(b, "dirty-flag", info->dirty_flag);
    json_builder_end_object(b);
}

static void json_newline(GString *out, int indent)
{
    g_string_append_c(out, '\n');
    for (int i = 0; i < indent; i++) {
        g_string_append(out, "    ");
    }
}

/*
 * node as qemu-img prints JSON (QEMU's pretty qobject_to_json): four
 * spaces a level, "key": value, every member and element on a line of its
 * own, empty containers too. json-glib spaces its output differently.
 */
static void json_append_node(GString *out, JsonNode *node, int indent)
{
    const char *sep = "";

    switch (JSON_NODE_TYPE(node)) {
    case JSON_NODE_OBJECT: {
        JsonObjectIter iter;
        const char *key;
        JsonNode *member;

        g_string_append_c(out, '{');
        json_object_iter_init_ordered(&iter, json_node_get_object(node));
        while (json_object_iter_next_ordered(&iter, &key, &member)) {
            g_string_append(out, sep);
            json_newline(out, indent + 1);
            img_json_append_quoted(out, key);
            g_string_append(out, ": ");
            json_append_node(out, member, indent + 1);
            sep = ",";
        }
        json_newline(out, indent);
        g_string_append_c(out, '}');
        break;
    }
    case JSON_NODE_ARRAY: {
        JsonArray *a = json_node_get_array(node);

        g_string_append_c(out, '[');
        for (guint i = 0; i < json_array_get_length(a); i++) {
            g_string_append(out, sep);
            json_newline(out, indent + 1);
            json_append_node(out, json_array_get_element(a, i), indent + 1);
            sep = ",";
        }
        json_newline(out, indent);
        g_string_append_c(out, ']');
        break;
    }
    case JSON_NODE_NULL:
        g_string_append(out, "null");
        break;
    case JSON_NODE_VALUE:
        switch (json_node_get_value_type(node)) {
        case G_TYPE_BOOLEAN:
            g_string_append(out, json_node_get_boolean(node) ? "true"
                                                            : "false");
            break;
        case G_TYPE_STRING:
            img_json_append_quoted(out, json_node_get_string(node));
            break;
        default:
            g_string_append_printf(out, "%" G_GINT64_FORMAT,
                                   json_node_get_int(node));
        }
        break;
    }
}

/* One image, or with chain an array of them (--backing-chain). */
static void info_print_json(GPtrArray *infos, bool chain)
{
    g_autoptr(JsonBuilder) b = json_builder_new();
    g_autoptr(JsonNode) root = NULL;
    g_autoptr(GString) text = g_string_new(NULL);

    if (chain) {
        json_builder_begin_array(b);
    }
    for (guint i = 0; i < infos->len; i++) {
        info_add_image_json(b, g_ptr_array_index(infos, i));
    }
    if (chain) {
        json_builder_end_array(b);
    }
    root = json_builder_get_root(b);
    json_append_node(text, root, 0);
    printf("%s\n", text->str);
}

static void info_print_luks2_human(const QCryptoBlockInfo *l)
{
    printf("    version: %d\n", l->version);
    printf("    sector size: %" G_GUINT64_FORMAT "\n", l->sector_size);
    if (l->label && *l->label) {
        printf("    label: %s\n", l->label);
    }
    if (l->subsystem && *l->subsystem) {
        printf("    subsystem: %s\n", l->subsystem);
    }
    printf("    metadata size: %" G_GUINT64_FORMAT "\n", l->metadata_size);
    printf("    keyslots size: %" G_GUINT64_FORMAT "\n", l->keyslots_size);
    printf("    segments:\n");
    for (size_t i = 0; i < l->nsegments; i++) {
        const QCryptoBlockInfoLUKS2Segment *seg = &l->segments[i];

        printf("        [%zu]:\n", i);
        printf("            offset: %" G_GUINT64_FORMAT "\n", seg->offset);
        if (seg->size_dynamic) {
            printf("            size: dynamic\n");
        } else {
            printf("            size: %" G_GUINT64_FORMAT "\n", seg->size);
        }
        printf("            iv tweak: %" G_GUINT64_FORMAT "\n", seg->iv_tweak);
        printf("            encryption: %s\n",
               seg->encryption ? seg->encryption : "");
        printf("            sector size: %" G_GUINT64_FORMAT "\n",
               seg->sector_size);
    }
    if (l->ntokens) {
        printf("    tokens:\n");
    }
    for (size_t i = 0; i < l->ntokens; i++) {
        printf("        [%d]:\n", l->tokens[i].id);
        printf("            type: %s\n",
               l->tokens[i].type ? l->tokens[i].type : "");
        printf("            keyslots:");
        for (int k = 0; k < 32; k++) {
            if (l->tokens[i].keyslots & (1u << k)) {
                printf(" %d", k);
            }
        }
        printf("\n");
    }
}

/*
 * The LUKS header's lines, shifted right by ind ("" alone, "    " inside
 * qcow2's "encrypt", where QEMU adds a "format" line).
 */
static void info_print_luks_human(const QCryptoBlockInfo *l, const char *ind,
                                  bool in_qcow2)
{
    printf("%s    ivgen alg: %s\n", ind,
           qcrypto_ivgen_algo_name(l->ivgen_alg));
    printf("%s    hash alg: %s\n", ind, qcrypto_hash_algo_name(l->hash_alg));
    printf("%s    cipher alg: %s\n", ind,
           qcrypto_cipher_algo_name(l->cipher_alg));
    printf("%s    uuid: %s\n", ind, l->uuid ? l->uuid : "");
    if (l->has_ivgen_hash_alg) {
        printf("%s    ivgen hash alg: %s\n", ind,
               qcrypto_hash_algo_name(l->ivgen_hash_alg));
    }
    if (in_qcow2) {
        printf("%s    format: luks\n", ind);
    }
    printf("%s    cipher mode: %s\n", ind,
           qcrypto_cipher_mode_name(l->cipher_mode));
    printf("%s    slots:\n", ind);
    for (size_t i = 0; i < l->nslots; i++) {
        const QCryptoBlockInfoLUKSSlot *slot = &l->slots[i];

        printf("%s        [%zu]:\n", ind, i);
        printf("%s            active: %s\n", ind,
               slot->active ? "true" : "false");
        if (slot->active) {
            printf("%s            iters: %" G_GUINT64_FORMAT "\n", ind,
                   slot->iters);
        }
        printf("%s            key offset: %" G_GUINT64_FORMAT "\n", ind,
               slot->key_offset);
        if (slot->active) {
            printf("%s            stripes: %" G_GUINT64_FORMAT "\n", ind,
                   slot->stripes);
        }
        if (slot->active && l->version == 2) {
            printf("%s            kdf: %s\n", ind,
                   qcrypto_block_kdf_name(slot->kdf));
            if (slot->kdf != QCRYPTO_BLOCK_KDF_PBKDF2) {
                printf("%s            kdf memory: %u\n", ind,
                       slot->kdf_memory);
                printf("%s            kdf parallel: %u\n", ind,
                       slot->kdf_parallel);
            }
            printf("%s            priority: %d\n", ind, slot->priority);
            printf("%s            bound: %s\n", ind,
                   slot->bound ? "true" : "false");
        }
    }
    printf("%s    payload offset: %" G_GUINT64_FORMAT "\n", ind,
           l->payload_offset);
    printf("%s    master key iters: %" G_GUINT64_FORMAT "\n", ind,
           l->master_key_iters);
    if (l->detached_header) {
        printf("%s    detached header: true\n", ind);
    }
    if (l->version == 2) {
        info_print_luks2_human(l);
    }
}

/* qcow2's persistent bitmaps, as qemu-img 7.2 prints lists. */
static void info_print_bitmaps_human(const BlockImageInfoQcow2 *q)
{
    printf("    bitmaps:\n");
    for (size_t i = 0; i < q->nb_bitmaps; i++) {
        const BlockImageInfoBitmap *bm = &q->bitmaps[i];
        int flag = 0;

        printf("        [%zu]:\n", i);
        printf("            flags:\n");
        if (bm->in_use) {
            printf("                [%d]: in-use\n", flag++);
        }
        if (bm->autoload) {
            printf("                [%d]: auto\n", flag++);
        }
        printf("            name: %s\n", bm->name);
        printf("            granularity: %u\n", bm->granularity);
    }
}

/* qcow2's format-specific lines, in qemu-img 7.2's order. */
static void info_print_qcow2_human(const BlockImageInfoQcow2 *q)
{
    bool v3 = q->version >= 3;

    printf("    compat: %s\n", v3 ? "1.1" : "0.10");
    printf("    compression type: %s\n", q->compression_type);
    if (v3) {
        printf("    lazy refcounts: %s\n",
               q->lazy_refcounts ? "true" : "false");
    }
    if (q->nb_bitmaps) {
        info_print_bitmaps_human(q);
    }
    printf("    refcount bits: %u\n", q->refcount_bits);
    if (q->data_file) {
        printf("    data file: %s\n", q->data_file);
    }
    if (q->encrypt_format) {
        printf("    encrypt:\n");
        if (q->encrypt_luks) {
            info_print_luks_human(q->encrypt_luks, "    ", true);
        } else {
            printf("        format: %s\n", q->encrypt_format);
        }
    }
    if (v3 && q->has_data_file) {
        printf("    data file raw: %s\n", q->data_file_raw ? "true" : "false");
    }
    if (v3) {
        printf("    corrupt: %s\n", q->corrupt ? "true" : "false");
        printf("    extended l2: %s\n", q->extended_l2 ? "true" : "false");
    }
}

static void info_print_human(const BlockImageInfo *info)
{
    g_autofree char *vsize = img_size_to_str(info->virtual_size);

    printf("image: %s\n", info->filename);
    printf("file format: %s\n", info->format);
    printf("virtual size: %s (%" G_GUINT64_FORMAT " bytes)\n", vsize,
           info->virtual_size);
    if (info->actual_size >= 0) {
        g_autofree char *dsize = img_size_to_str(info->actual_size);

        printf("disk size: %s\n", dsize);
    } else {
        printf("disk size: unavailable\n");
    }
    if (info->encrypted) {
        printf("encrypted: yes\n");
    }
    if (info->cluster_size) {
        printf("cluster_size: %" G_GINT64_FORMAT "\n", info->cluster_size);
    }
    if (info->dirty_flag) {
        printf("cleanly shut down: no\n");
    }
    if (info->backing_filename) {
        printf("backing file: %s", info->backing_filename);
        if (!info->full_backing_filename) {
            printf(" (cannot determine actual path)");
        } else if (!g_str_equal(info->backing_filename,
                                info->full_backing_filename)) {
            printf(" (actual path: %s)", info->full_backing_filename);
        }
        printf("\n");
    }
    if (info->backing_filename_format) {
        printf("backing file format: %s\n", info->backing_filename_format);
    }
    if (info->nb_snapshots) {
        img_print_snapshot_list(info->snapshots, info->nb_snapshots);
    }
    if (info->luks) {
        printf("Format specific information:\n");
        info_print_luks_human(info->luks, "", false);
    }
    if (info->qcow2) {
        printf("Format specific information:\n");
        info_print_qcow2_human(info->qcow2);
    }
    if (info->rbd) {
        printf("Format specific information:\n");
        if (info->rbd->encryption_format) {
            printf("    encryption format: %s\n",
                   info->rbd->encryption_format);
        }
    }
}

int img_info(int argc, char **argv)
{
    g_autofree char *fmt = NULL, *output = NULL, *name = NULL;
    g_autoptr(GHashTable) seen = NULL;
    gboolean image_opts = FALSE, force_share = FALSE, backing_chain = FALSE;
    g_autoptr(GPtrArray) infos =
        g_ptr_array_new_with_free_func((GDestroyNotify)bdrv_image_info_free);
    ImgCommonOpts common = { 0 };
    const GOptionEntry entries[] = {
        { "format", 'f', 0, G_OPTION_ARG_STRING, &fmt,
          "image format (default: probe)", "FMT" },
        { "image-opts", 0, 0, G_OPTION_ARG_NONE, &image_opts,
          "FILENAME is an option string (driver=...,file.filename=...)",
          NULL },
        { "output", 0, 0, G_OPTION_ARG_STRING, &output,
          "output format: human (default) or json", "FMT" },
        { "backing-chain", 0, 0, G_OPTION_ARG_NONE, &backing_chain,
          "show every image of the backing chain", NULL },
        { "force-share", 'U', 0, G_OPTION_ARG_NONE, &force_share,
          "take no image lock, and read the image even while another "
          "process writes it (what is read may be inconsistent)", NULL },
        { NULL }
    };
    Error *err = NULL;
    bool json;
    int ret = 1;

    if (img_parse_args(&argc, &argv, "FILENAME",
                       "Show an image's format, sizes and, for LUKS, its "
                       "header and key slots (no passphrase needed).",
                       "Example:\n  qemu-img-lite info --output=json "
                       "disk.luks", entries, &common) < 0) {
        goto out;
    }
    if (img_parse_output_format(output, &json) < 0) {
        goto out;
    }
    if (argc != 2) {
        img_error(NULL, "Expecting one image file name");
        goto out;
    }
    if (img_add_objects(common.objects) < 0) {
        goto out;
    }
    /*
     * The header is all info needs: no key, never unlocked. A chain is
     * opened image by image, as qemu-img does, each without its backing
     * file: a file met twice is a loop, named before anything is opened
     * again (qemu-iotests 043).
     */
    seen = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    name = g_strdup(argv[1]);
    while (name) {
        g_autoptr(BlockDriverState) node = NULL;
        BlockImageInfo *info;

        node = img_open(name, fmt, image_opts, BDRV_O_NO_IO |
                        BDRV_O_NO_BACKING |
                        (force_share ? BDRV_O_FORCE_SHARE : 0));
        if (!node) {
            goto out;
        }
        info = bdrv_get_image_info(node, &err);
        if (!info) {
            img_error_free(name, err);
            goto out;
        }
        g_ptr_array_add(infos, info);
        g_hash_table_add(seen, g_steal_pointer(&name));
        if (!backing_chain || !info->backing_filename) {
            break;
        }
        if (!info->full_backing_filename) {
            img_error(NULL, "Could not determine absolute backing filename, "
                      "but backing filename '%s' present",
                      info->backing_filename);
            goto out;
        }
        name = g_strdup(info->full_backing_filename);
        g_free(fmt);
        fmt = g_strdup(info->backing_filename_format);
        image_opts = FALSE;
        if (g_hash_table_contains(seen, name)) {
            img_error(NULL, "Backing file '%s' creates an infinite loop.",
                      name);
            goto out;
        }
    }
    if (json) {
        info_print_json(infos, backing_chain);
    } else {
        for (guint i = 0; i < infos->len; i++) {
            if (i) {
                printf("\n");
            }
            info_print_human(g_ptr_array_index(infos, i));
        }
    }
    ret = 0;

out:
    img_common_opts_clear(&common);
    return ret;
}
