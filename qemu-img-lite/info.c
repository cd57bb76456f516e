/*
 * qemu-img-lite info: what qemu-img 7.2 prints, with the same fields and
 * JSON keys, in the same order (its order comes from a QDict walk: we
 * follow it so the outputs can be compared line by line).
 */
#include <stdio.h>

#include <json-glib/json-glib.h>

#include "img.h"

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
    }
    printf("    payload offset: %" G_GUINT64_FORMAT "\n", l->payload_offset);
    printf("    master key iters: %" G_GUINT64_FORMAT "\n",
           l->master_key_iters);
    if (l->detached_header) {
        printf("    detached header: true\n");
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
