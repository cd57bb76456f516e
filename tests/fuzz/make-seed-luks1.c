/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Make a small LUKS1 image for the fuzz corpora (make-seeds.sh runs it):
 * created by our own format code, then rewritten with a handful of PBKDF2
 * iterations, and truncated after the key material of its last active
 * slot, so that a fuzzer can open it hundreds of times a second.
 *
 * Create enforces at least 1000 iterations (the spec's minimum); open
 * accepts fewer (LUKS 1.0-era images have them). Lowering the count means
 * re-deriving: each slot's key material is decrypted under the old slot
 * key and encrypted again under a key derived with the new count, and the
 * master key digest is recomputed from the master key (merged from slot 0).
 *
 *   make-seed-luks1 [--cipher aes-256] [--mode xts] [--ivgen plain64]
 *                   [--ivgen-hash sha256] [--hash sha256] [--iters 4]
 *                   [--detached] --passphrase P [--passphrase P2 ...] OUT
 */
#include <stdio.h>
#include <stdlib.h>

#include "crypto/afsplit.h"
#include "crypto/pbkdf.h"
#include "crypto/sector.h"
#include "seed-image.h"

/* The LUKS1 spec's header offsets (figures 1 and 2) and constants. */
#define LUKS1_KEY_BYTES_OFFSET 108
#define LUKS1_MK_DIGEST_OFFSET 112
#define LUKS1_MK_DIGEST_LEN 20
#define LUKS1_MK_DIGEST_SALT_OFFSET 132
#define LUKS1_MK_DIGEST_ITER_OFFSET 164
#define LUKS1_KEY_SLOTS_OFFSET 208
#define LUKS1_KEY_SLOT_LEN 48
#define LUKS1_SLOT_ACTIVE 0x00AC71F3
#define LUKS1_SALT_LEN 32
#define LUKS1_STRIPES 4000
#define LUKS1_SECTOR 512

static int seed_read(QCryptoBlock *block, uint64_t offset, uint8_t *buf,
                     size_t len, void *opaque, Error **errp)
{
    return seed_read_image(block, offset, buf, len, true, errp);
}

static uint32_t get_be32(const uint8_t *p)
{
    return fuzz_get_be32(p, 4, 0);
}

static void put_be32(uint8_t *p, uint32_t v)
{
    p[0] = v >> 24;
    p[1] = v >> 16;
    p[2] = v >> 8;
    p[3] = v;
}

static G_NORETURN void die(const char *what, Error *err)
{
    seed_die("make-seed-luks1", what, err);
}

/* Encrypt or decrypt a slot's key material under key (the spec, 2.4). */
static void seed_crypt_material(const QCryptoBlockInfo *info,
                                const uint8_t *key, size_t nkey,
                                uint8_t *buf, size_t len, bool encrypt)
{
    QCryptoSectorCipherSpec spec = {
        .alg = info->cipher_alg,
        .mode = info->cipher_mode,
        .ivgen = info->ivgen_alg,
        .ivgen_hash = info->ivgen_hash_alg,
    };
    g_autoptr(QCryptoSectorCipher) sc = NULL;
    Error *err = NULL;
    int ret;

    /* IVs count the key material's sectors from 0 (the spec, 2.4). */
    sc = qcrypto_sector_cipher_new(&spec, key, nkey, LUKS1_SECTOR, 0, 0,
                                   &err);
    if (!sc) {
        die("cipher", err);
    }
    ret = encrypt ?
        qcrypto_sector_cipher_encrypt(sc, 0, buf, len, &err) :
        qcrypto_sector_cipher_decrypt(sc, 0, buf, len, &err);
    if (ret < 0) {
        die("key material", err);
    }
}

static void seed_pbkdf2(QCryptoHashAlgo hash, const uint8_t *key,
                        size_t nkey, const uint8_t *salt, uint32_t iters,
                        uint8_t *out, size_t nout)
{
    Error *err = NULL;

    if (qcrypto_pbkdf2(hash, key, nkey, salt, LUKS1_SALT_LEN, iters, out,
                       nout, &err) < 0) {
        die("pbkdf2", err);
    }
}

/*
 * Re-key slot i (unlocked by pass) with iters iterations; the master key
 * merged from its key material goes to mk when mk is not NULL. Returns
 * the end of the slot's key material.
 */
static size_t seed_rekey_slot(const QCryptoBlockInfo *info, int i,
                              const char *pass, uint32_t iters, uint8_t *mk)
{
    uint8_t *slot = image->data + LUKS1_KEY_SLOTS_OFFSET +
        i * LUKS1_KEY_SLOT_LEN;
    size_t nkey = get_be32(image->data + LUKS1_KEY_BYTES_OFFSET);
    size_t len = (nkey * LUKS1_STRIPES + LUKS1_SECTOR - 1) /
        LUKS1_SECTOR * LUKS1_SECTOR;
    size_t offset = (size_t)get_be32(slot + 40) * LUKS1_SECTOR;
    g_autofree uint8_t *key = g_malloc(nkey);
    Error *err = NULL;

    g_assert(get_be32(slot) == LUKS1_SLOT_ACTIVE);
    g_assert(offset + len <= image->len);
    seed_pbkdf2(info->hash_alg, (const uint8_t *)pass, strlen(pass),
                slot + 8, get_be32(slot + 4), key, nkey);
    seed_crypt_material(info, key, nkey, image->data + offset, len, false);
    if (mk && qcrypto_afsplit_decode(info->hash_alg, nkey, LUKS1_STRIPES,
                                     image->data + offset, mk, &err) < 0) {
        die("afsplit", err);
    }
    seed_pbkdf2(info->hash_alg, (const uint8_t *)pass, strlen(pass),
                slot + 8, iters, key, nkey);
    seed_crypt_material(info, key, nkey, image->data + offset, len, true);
    put_be32(slot + 4, iters);
    return offset + len;
}


int main(int argc, char **argv)
{
    g_autofree char *cipher = g_strdup("aes-256");
    g_autofree char *mode = g_strdup("xts");
    g_autofree char *ivgen = g_strdup("plain64");
    g_autofree char *ivhash = NULL;
    g_autofree char *hash = g_strdup("sha256");
    g_auto(GStrv) passphrases = NULL;
    gint iters = 4;
    gboolean detached = FALSE;
    GOptionEntry entries[] = {
        { "cipher", 0, 0, G_OPTION_ARG_STRING, &cipher, "cipher", "ALG" },
        { "mode", 0, 0, G_OPTION_ARG_STRING, &mode, "mode", "MODE" },
        { "ivgen", 0, 0, G_OPTION_ARG_STRING, &ivgen, "IV generator", "IV" },
        { "ivgen-hash", 0, 0, G_OPTION_ARG_STRING, &ivhash, "ESSIV hash",
          "HASH" },
        { "hash", 0, 0, G_OPTION_ARG_STRING, &hash, "PBKDF2/AF hash",
          "HASH" },
        { "iters", 0, 0, G_OPTION_ARG_INT, &iters, "PBKDF2 iterations",
          "N" },
        { "detached", 0, 0, G_OPTION_ARG_NONE, &detached,
          "detached header", NULL },
        { "passphrase", 0, 0, G_OPTION_ARG_STRING_ARRAY, &passphrases,
          "one per key slot, from slot 0", "P" },
        { NULL },
    };
    g_autoptr(GOptionContext) ctx = g_option_context_new("OUT");
    g_autoptr(GError) gerr = NULL;
    g_autoptr(QCryptoBlock) block = NULL;
    g_autoptr(QCryptoBlockInfo) info = NULL;
    QCryptoBlockCreateOptions opts = { 0 };
    Error *err = NULL;
    uint8_t mk[64];
    size_t end = 0;

    g_option_context_add_main_entries(ctx, entries, NULL);
    if (!g_option_context_parse(ctx, &argc, &argv, &gerr) || argc != 2 ||
        !passphrases || !passphrases[0] || iters < 1) {
        fprintf(stderr, "make-seed-luks1: %s\n",
                gerr ? gerr->message : "need --passphrase and OUT");
        return 2;
    }

    image = g_byte_array_new();
    qcrypto_block_create_options_init(&opts);
    opts.secret = (QCryptoBlockSecret) { (const uint8_t *)passphrases[0],
                                         strlen(passphrases[0]) };
    seed_cipher_options(&opts, "make-seed-luks1", cipher, mode, ivgen, ivhash,
                        hash);
    opts.has_iter_time = true;
    opts.iter_time = 1;         /* the minimum count, 1000, is plenty */
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
            .new_secret = { (const uint8_t *)passphrases[i],
                            strlen(passphrases[i]) },
            .has_iter_time = true, .iter_time = 1,
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

    for (int i = 0; passphrases[i]; i++) {
        end = MAX(end, seed_rekey_slot(info, i, passphrases[i], iters,
                                       i == 0 ? mk : NULL));
    }
    put_be32(image->data + LUKS1_MK_DIGEST_ITER_OFFSET, iters);
    seed_pbkdf2(info->hash_alg, mk,
                get_be32(image->data + LUKS1_KEY_BYTES_OFFSET),
                image->data + LUKS1_MK_DIGEST_SALT_OFFSET, iters,
                image->data + LUKS1_MK_DIGEST_OFFSET, LUKS1_MK_DIGEST_LEN);
    explicit_bzero(mk, sizeof(mk));
    g_byte_array_set_size(image, end);

    /* The truncated image must open with each passphrase, as fuzzed. */
    for (int i = 0; passphrases[i]; i++) {
        FuzzImage img = { image->data, image->len, false };
        QCryptoBlockOpenOptions o = {
            .format = QCRYPTO_BLOCK_FORMAT_LUKS,
            .secret = { (const uint8_t *)passphrases[i],
                        strlen(passphrases[i]) },
        };
        QCryptoBlock *check = qcrypto_block_open(
            &o, fuzz_image_read, &img,
            detached ? QCRYPTO_BLOCK_OPEN_DETACHED : 0, &err);

        if (!check) {
            die("reopen", err);
        }
        qcrypto_block_free(check);
    }
    if (!g_file_set_contents(argv[1], (const char *)image->data, image->len,
                             &gerr)) {
        fprintf(stderr, "make-seed-luks1: %s\n", gerr->message);
        return 1;
    }
    g_byte_array_unref(image);
    return 0;
}
