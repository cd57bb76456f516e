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

static void info_add_luks_json(JsonBuilder *b, const QCryptoBlockInfo *l)
{
    json_builder_set_member_name(b, "format-specific");
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "type");
    json_builder_add_string_value(b, "luks");
    json_builder_set_member_name(b, "data");
    json_builder_begin_object(b);
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
    json_builder_end_object(b);
    json_builder_end_object(b);
}


static void info_print_json(const BlockImageInfo *info)
{
    g_autoptr(JsonBuilder) b = json_builder_new();
    g_autoptr(JsonGenerator) gen = json_generator_new();
    g_autoptr(JsonNode) root = NULL;
    g_autofree char *text = NULL;

    json_builder_begin_object(b);
    json_builder_set_member_name(b, "virtual-size");
    json_builder_add_int_value(b, info->virtual_size);
    json_builder_set_member_name(b, "filename");
    json_builder_add_string_value(b, info->filename);
    json_builder_set_member_name(b, "format");
    json_builder_add_string_value(b, info->format);
    if (info->actual_size >= 0) {
        json_builder_set_member_name(b, "actual-size");
        json_builder_add_int_value(b, info->actual_size);
    }
    if (info->luks) {
        info_add_luks_json(b, info->luks);
    }
    if (info->encrypted) {
        json_builder_set_member_name(b, "encrypted");
        json_builder_add_boolean_value(b, TRUE);
    }
    json_builder_set_member_name(b, "dirty-flag");
    json_builder_add_boolean_value(b, FALSE);
    json_builder_end_object(b);

    root = json_builder_get_root(b);
    json_generator_set_root(gen, root);
    json_generator_set_pretty(gen, TRUE);
    json_generator_set_indent(gen, 4);
    text = json_generator_to_data(gen, NULL);
    printf("%s\n", text);
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

static void info_print_luks_human(const QCryptoBlockInfo *l)
{
    printf("Format specific information:\n");
    printf("    ivgen alg: %s\n", qcrypto_ivgen_algo_name(l->ivgen_alg));
    printf("    hash alg: %s\n", qcrypto_hash_algo_name(l->hash_alg));
    printf("    cipher alg: %s\n", qcrypto_cipher_algo_name(l->cipher_alg));
    printf("    uuid: %s\n", l->uuid ? l->uuid : "");
    if (l->has_ivgen_hash_alg) {
        printf("    ivgen hash alg: %s\n",
               qcrypto_hash_algo_name(l->ivgen_hash_alg));
    }
    printf("    cipher mode: %s\n", qcrypto_cipher_mode_name(l->cipher_mode));
    printf("    slots:\n");
    for (size_t i = 0; i < l->nslots; i++) {
        const QCryptoBlockInfoLUKSSlot *slot = &l->slots[i];

        printf("        [%zu]:\n", i);
        printf("            active: %s\n", slot->active ? "true" : "false");
        if (slot->active) {
            printf("            iters: %" G_GUINT64_FORMAT "\n", slot->iters);
        }
        printf("            key offset: %" G_GUINT64_FORMAT "\n",
               slot->key_offset);
        if (slot->active) {
            printf("            stripes: %" G_GUINT64_FORMAT "\n",
                   slot->stripes);
        }
        if (slot->active && l->version == 2) {
            printf("            kdf: %s\n", qcrypto_block_kdf_name(slot->kdf));
            if (slot->kdf != QCRYPTO_BLOCK_KDF_PBKDF2) {
                printf("            kdf memory: %u\n", slot->kdf_memory);
                printf("            kdf parallel: %u\n", slot->kdf_parallel);
            }
            printf("            priority: %d\n", slot->priority);
            printf("            bound: %s\n", slot->bound ? "true" : "false");
        }
    }
    printf("    payload offset: %" G_GUINT64_FORMAT "\n", l->payload_offset);
    printf("    master key iters: %" G_GUINT64_FORMAT "\n",
           l->master_key_iters);
    if (l->detached_header) {
        printf("    detached header: true\n");
    }
    if (l->version == 2) {
        info_print_luks2_human(l);
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
    if (info->luks) {
        info_print_luks_human(info->luks);
    }
}

int img_info(int argc, char **argv)
{
    g_autofree char *fmt = NULL, *output = NULL;
    g_autoptr(BlockDriverState) bs = NULL;
    g_autoptr(BlockImageInfo) info = NULL;
    gboolean image_opts = FALSE, force_share = FALSE;
    ImgCommonOpts common = { 0 };
    const GOptionEntry entries[] = {
        { "format", 'f', 0, G_OPTION_ARG_STRING, &fmt,
          "image format (default: probe)", "FMT" },
        { "image-opts", 0, 0, G_OPTION_ARG_NONE, &image_opts,
          "FILENAME is an option string (driver=...,file.filename=...)",
          NULL },
        { "output", 0, 0, G_OPTION_ARG_STRING, &output,
          "output format: human (default) or json", "FMT" },
        { "force-share", 'U', 0, G_OPTION_ARG_NONE, &force_share,
          "accepted for qemu-img compatibility (images are never locked)",
          NULL },
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
    /* The header is all info needs: no key, never unlocked. */
    bs = img_open(argv[1], fmt, image_opts, BDRV_O_NO_IO);
    if (!bs) {
        goto out;
    }
    info = bdrv_get_image_info(bs, &err);
    if (!info) {
        img_error_free(argv[1], err);
        goto out;
    }
    if (json) {
        info_print_json(info);
    } else {
        info_print_human(info);
    }
    ret = 0;

out:
    img_common_opts_clear(&common);
    return ret;
}
