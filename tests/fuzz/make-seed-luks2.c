/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Make a small LUKS2 image for the fuzz corpora (make-seeds.sh runs it):
 * created by our own format code with the cheapest key slots it makes
 * (argon2 at 32 KiB and 4 passes), then its PBKDF2 key slots and digest
 * (calibrated to 1 ms and 125 ms on create) rewritten with 1000
 * iterations, re-deriving their keys, checked to open, then truncated
 * after the key
 * material of its last slot, or after the two header copies with
 * --header-only. Both checksum fields
 * are zeroed: the fuzz targets compute a zero checksum field afresh
 * (fuzz-luks2.h), so the fuzzer can change the JSON and still get past
 * the checksum.
 *
 *   make-seed-luks2 [--cipher aes-128] [--mode xts] [--ivgen plain64]
 *                   [--hash sha256] [--kdf argon2id] [--sector-size 4096]
 *                   [--label L] [--detached] [--header-only]
 *                   --passphrase P [--passphrase P2 ...] OUT
 */
#include <stdio.h>
#include <stdlib.h>

#include "crypto/blockpriv.h"  /* the volume key, for the digest */
#include "crypto/luks2priv.h"   /* the key slot area cipher */
#include "crypto/pbkdf.h"
#include "fuzz-luks2.h"
#include "seed-image.h"

/* What create enforces as a minimum (cryptsetup's too). */
#define SEED_ITERATIONS 1000

static int seed_read(QCryptoBlock *block, uint64_t offset, uint8_t *buf,
                     size_t len, void *opaque, Error **errp)
{
    return seed_read_image(block, offset, buf, len, false, errp);
}

static G_NORETURN void die(const char *what, Error *err)
{
    seed_die("make-seed-luks2", what, err);
}

static int parse_or_die(int value, const char *what, const char *name)
{
    return seed_parse_or_die("make-seed-luks2", value, what, name);
}

/* En/decrypt a key slot area as the format does (512-byte sectors). */
static void seed_area_crypt(const char *encryption, const uint8_t *key,
                            size_t nkey, uint8_t *buf, size_t len,
                            bool encrypt)
{
    g_autoptr(QCryptoSectorCipher) sc = NULL;
    QCryptoLUKS2Cipher c;
    Error *err = NULL;
    int ret;

    if (qcrypto_luks2_cipher_parse(encryption, nkey, &c, &err) < 0 ||
        !(sc = qcrypto_sector_cipher_new(&c, key, nkey, 512, 0, 0, &err))) {
        die("area cipher", err);
    }
    ret = encrypt ?
        qcrypto_sector_cipher_encrypt(sc, 0, buf, len, &err) :
        qcrypto_sector_cipher_decrypt(sc, 0, buf, len, &err);
    if (ret < 0) {
        die("area", err);
    }
}

static void seed_pbkdf2(const char *hashname, const uint8_t *key, size_t nkey,
                        const char *salt64, uint32_t iters, uint8_t *out,
                        size_t nout)
{
    int hash = qcrypto_hash_algo_parse(hashname);
    g_autofree guchar *salt = NULL;
    Error *err = NULL;
    gsize nsalt;

    salt = g_base64_decode(salt64, &nsalt);
    if (hash < 0 || qcrypto_pbkdf2(hash, key, nkey, salt, nsalt, iters, out,
                                   nout, &err) < 0) {
        die("pbkdf2", err);
    }
}

/*
 * PBKDF2 key slot id (unlocked by pass) down to 1000 iterations: its area
 * decrypted under the old key and encrypted under the new one, once
 * (reencrypt), the JSON edited in every copy.
 */
static void seed_cheap_keyslot(JsonObject *ks, const char *pass,
                               bool reencrypt)
{
    JsonObject *kdf = json_object_get_object_member(ks, "kdf");
    JsonObject *area = json_object_get_object_member(ks, "area");
    JsonObject *af = json_object_get_object_member(ks, "af");
    size_t nkey = json_object_get_int_member(area, "key_size");
    size_t len = (json_object_get_int_member(ks, "key_size") *
                  json_object_get_int_member(af, "stripes") + 511) / 512 * 512;
    uint64_t offset = g_ascii_strtoull(
        json_object_get_string_member(area, "offset"), NULL, 10);
    const char *encryption = json_object_get_string_member(area,
                                                           "encryption");
    const char *hash, *salt;
    uint8_t key[512];

    if (strcmp(json_object_get_string_member(kdf, "type"), "pbkdf2") != 0) {
        return;
    }
    hash = json_object_get_string_member(kdf, "hash");
    salt = json_object_get_string_member(kdf, "salt");
    if (reencrypt) {
        g_assert(nkey <= sizeof(key) && offset + len <= image->len);
        seed_pbkdf2(hash, (const uint8_t *)pass, strlen(pass), salt,
                    json_object_get_int_member(kdf, "iterations"), key, nkey);
        seed_area_crypt(encryption, key, nkey, image->data + offset, len,
                        false);
        seed_pbkdf2(hash, (const uint8_t *)pass, strlen(pass), salt,
                    SEED_ITERATIONS, key, nkey);
        seed_area_crypt(encryption, key, nkey, image->data + offset, len,
                        true);
        explicit_bzero(key, sizeof(key));
    }
    json_object_set_int_member(kdf, "iterations", SEED_ITERATIONS);
}

/* A digest recomputed from the volume key with 1000 iterations. */
static void seed_cheap_digest(JsonObject *d, const uint8_t *mk, size_t nkey)
{
    g_autofree guchar *old = NULL;
    g_autofree char *b64 = NULL;
    uint8_t out[QCRYPTO_HASH_MAX_DIGEST_LEN];
    gsize nout;

    old = g_base64_decode(json_object_get_string_member(d, "digest"), &nout);
    g_assert(nout <= sizeof(out));
    seed_pbkdf2(json_object_get_string_member(d, "hash"), mk, nkey,
                json_object_get_string_member(d, "salt"), SEED_ITERATIONS,
                out, nout);
    b64 = g_base64_encode(out, nout);
    json_object_set_int_member(d, "iterations", SEED_ITERATIONS);
    json_object_set_string_member(d, "digest", b64);
}

/*
 * The JSON area at json (json_size bytes) with cheap digests and PBKDF2
 * key slots (slot i opened by passphrases[i]).
 */
static void seed_cheapen(uint8_t *json, size_t json_size, const uint8_t *mk,
                         size_t nkey, char **passphrases, bool reencrypt)
{
    g_autoptr(JsonParser) parser = json_parser_new();
    g_autoptr(JsonGenerator) gen = json_generator_new();
    g_autoptr(GList) digest_ids = NULL;
    g_autofree char *text = NULL;
    JsonObject *root, *digests, *keyslots;
    GError *gerr = NULL;
    gsize len;

    if (!json_parser_load_from_data(parser, (const char *)json, -1, &gerr)) {
        die(gerr->message, NULL);
    }
    root = json_node_get_object(json_parser_get_root(parser));
    keyslots = json_object_get_object_member(root, "keyslots");
    for (int i = 0; passphrases[i]; i++) {
        g_autofree char *id = g_strdup_printf("%d", i);

        seed_cheap_keyslot(json_object_get_object_member(keyslots, id),
                           passphrases[i], reencrypt);
    }
    digests = json_object_get_object_member(root, "digests");
    digest_ids = json_object_get_members(digests);
    for (GList *l = digest_ids; l; l = l->next) {
        seed_cheap_digest(json_object_get_object_member(digests, l->data),
                          mk, nkey);
    }
    json_generator_set_root(gen, json_parser_get_root(parser));
    text = json_generator_to_data(gen, &len);
    g_assert(len < json_size);
    memset(json, 0, json_size);
    memcpy(json, text, len);
}

static QCryptoBlockSecret secret_of(const char *pass)
{
    return (QCryptoBlockSecret) { (const uint8_t *)pass, strlen(pass) };
}

int main(int argc, char **argv)
{
    g_autofree char *cipher = g_strdup("aes-128");
    g_autofree char *mode = g_strdup("xts");
    g_autofree char *ivgen = g_strdup("plain64");
    g_autofree char *ivhash = NULL;
    g_autofree char *hash = g_strdup("sha256");
    g_autofree char *kdf = g_strdup("argon2id");
    g_autofree char *label = NULL;
    g_auto(GStrv) passphrases = NULL;
    gint sector_size = 4096;
    gboolean detached = FALSE, header_only = FALSE;
    GOptionEntry entries[] = {
        { "cipher", 0, 0, G_OPTION_ARG_STRING, &cipher, "cipher", "ALG" },
        { "mode", 0, 0, G_OPTION_ARG_STRING, &mode, "mode", "MODE" },
        { "ivgen", 0, 0, G_OPTION_ARG_STRING, &ivgen, "IV generator", "IV" },
        { "ivgen-hash", 0, 0, G_OPTION_ARG_STRING, &ivhash, "ESSIV hash",
          "HASH" },
        { "hash", 0, 0, G_OPTION_ARG_STRING, &hash, "PBKDF2/AF hash",
          "HASH" },
        { "kdf", 0, 0, G_OPTION_ARG_STRING, &kdf, "key slot KDF", "KDF" },
        { "sector-size", 0, 0, G_OPTION_ARG_INT, &sector_size,
          "payload sector size", "N" },
        { "label", 0, 0, G_OPTION_ARG_STRING, &label, "label", "L" },
        { "detached", 0, 0, G_OPTION_ARG_NONE, &detached,
          "detached header", NULL },
        { "header-only", 0, 0, G_OPTION_ARG_NONE, &header_only,
          "only the two header copies", NULL },
        { "passphrase", 0, 0, G_OPTION_ARG_STRING_ARRAY, &passphrases,
          "one per key slot, from slot 0", "P" },
        { NULL },
    };
    g_autoptr(GOptionContext) ctx = g_option_context_new("OUT");
    g_autoptr(GError) gerr = NULL;
    g_autoptr(QCryptoBlock) block = NULL;
    g_autoptr(QCryptoBlockInfo) info = NULL;
    QCryptoBlockCreateOptions opts = { 0 };
    size_t nkey, end;
    Error *err = NULL;

    g_option_context_add_main_entries(ctx, entries, NULL);
    if (!g_option_context_parse(ctx, &argc, &argv, &gerr) || argc != 2 ||
        !passphrases || !passphrases[0]) {
        fprintf(stderr, "make-seed-luks2: %s\n",
                gerr ? gerr->message : "need --passphrase and OUT");
        return 2;
    }

    image = g_byte_array_new();
    qcrypto_block_create_options_init(&opts);
    opts.luks_version = 2;
    opts.secret = secret_of(passphrases[0]);
    seed_cipher_options(&opts, "make-seed-luks2", cipher, mode, ivgen, ivhash,
                        hash);
    opts.has_kdf = true;
    opts.kdf = parse_or_die(qcrypto_block_kdf_parse(kdf), "kdf", kdf);
    /* The cheapest slots create makes: 1 ms, 32 KiB, one lane. */
    opts.has_iter_time = true;
    opts.iter_time = 1;
    opts.kdf_memory = 32;
    opts.kdf_parallel = 1;
    opts.sector_size = sector_size;
    opts.label = label;
    opts.detached_header = detached;
    block = qcrypto_block_create(&opts, seed_init, seed_write, NULL, &err);
    if (!block) {
        die("create", err);
    }
    for (int i = 1; passphrases[i]; i++) {
        QCryptoBlockAmendOptions add = {
            .state = QCRYPTO_BLOCK_AMEND_STATE_ACTIVE,
            .has_keyslot = true, .keyslot = i,
            .has_new_secret = true,
            .new_secret = secret_of(passphrases[i]),
            .has_iter_time = true, .iter_time = 1,
            .has_kdf = true, .kdf = opts.kdf,
            .kdf_memory = 32, .kdf_parallel = 1,
        };

        if (qcrypto_block_amend_options(block, seed_read, seed_write, NULL,
                                        NULL, &add, false, &err) < 0) {
            die("amend", err);
        }
    }
    info = qcrypto_block_get_info(block, &err);
    if (!info) {
        die("info", err);
    }

    /* Past the last slot's key material, or past the secondary header. */
    nkey = qcrypto_cipher_get_mode_key_len(info->cipher_alg,
                                           info->cipher_mode);
    end = 2 * info->metadata_size;
    for (size_t i = 0; i < info->nslots && !header_only; i++) {
        if (info->slots[i].active) {
            end = MAX(end, info->slots[i].key_offset +
                      (nkey * info->slots[i].stripes + 511) / 512 * 512);
        }
    }
    g_assert(end <= image->len);
    g_byte_array_set_size(image, end);

    /*
     * Cheap digests and key slots in both copies (the key material
     * re-encrypted once, with the primary), checksums left to the harness.
     */
    for (uint64_t off = 0; off <= info->metadata_size;
         off += info->metadata_size) {
        seed_cheapen(image->data + off + LUKS2_BIN_HDR_LEN,
                     info->metadata_size - LUKS2_BIN_HDR_LEN,
                     block->master_key, block->master_key_len, passphrases,
                     off == 0 && !header_only);
        memset(image->data + off + LUKS2_OFF_CSUM, 0, LUKS2_CSUM_LEN);
    }

    /* It opens as the open target sees it: truncated, size unknown. */
    g_autofree uint8_t *fixed = fuzz_memdup(image->data, image->len);
    fuzz_luks2_fix_checksums(fixed, image->len);
    for (int i = 0; passphrases[i]; i++) {
        FuzzImage img = { fixed, image->len, false };
        QCryptoBlockOpenOptions o = {
            .format = QCRYPTO_BLOCK_FORMAT_LUKS,
            .secret = secret_of(passphrases[i]),
        };
        QCryptoBlock *check = qcrypto_block_open(
            &o, fuzz_image_read, &img,
            (detached ? QCRYPTO_BLOCK_OPEN_DETACHED : 0) |
            (header_only ? QCRYPTO_BLOCK_OPEN_NO_IO : 0), &err);

        if (!check) {
            die("reopen", err);
        }
        if (qcrypto_block_get_warning(check)) {
            die(qcrypto_block_get_warning(check), NULL);
        }
        qcrypto_block_free(check);
    }
    if (!fuzz_luks2_costs_bounded(image->data, image->len)) {
        fprintf(stderr, "%s\n", image->data + LUKS2_BIN_HDR_LEN);
        die("key slots too costly for the open target", NULL);
    }
    if (!g_file_set_contents(argv[1], (const char *)image->data, image->len,
                             &gerr)) {
        fprintf(stderr, "make-seed-luks2: %s\n", gerr->message);
        return 1;
    }
    g_byte_array_unref(image);
    return 0;
}
