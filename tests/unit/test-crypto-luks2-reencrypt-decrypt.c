/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * crypto/block-luks2-reencrypt-decrypt.c on files in memory (the image and
 * its detached header): in-place decryption gives back the raw image byte
 * for byte, going on the way qemu-img-lite reencrypt goes on from what the
 * header file holds. A crash after any write:
 * test-crypto-luks2-reencrypt-crash.c, for every mode.
 */
#include <string.h>

#include "crypto/random.h"
#include "reencrypt-files.h"

#define MiB (1024 * 1024)
#define SHIFT MiB                   /* align-payload 2048 sectors */

/* A LUKS2 image of data (our in-place encryption makes it). */
static Files *luks2_image(const uint8_t *data, size_t size,
                          unsigned sector_size)
{
    Files *f = files_new(data, size);
    QCryptoReencryptIO io = files_io(f, false);
    QCryptoBlockCreateOptions o;

    memset(&o, 0, sizeof(o));
    qcrypto_block_create_options_init(&o);
    o.format = QCRYPTO_BLOCK_FORMAT_LUKS;
    o.secret = reenc_test_secret;
    o.luks_version = 2;
    o.has_kdf = true;
    o.kdf = QCRYPTO_BLOCK_KDF_PBKDF2;
    o.has_iter_time = true;
    o.iter_time = 1;
    o.align_payload = SHIFT / 512;
    if (sector_size) {
        o.sector_size = sector_size;
    }
    g_assert_cmpint(qcrypto_reencrypt_encrypt_init(&o, &io, &error_abort),
                    ==, 0);
    g_assert_cmpint(qcrypto_reencrypt_resume(&reenc_test_secret, 0, &io, &error_abort),
                    ==, 0);
    g_assert_cmpuint(f->data->len, ==, SHIFT + size);
    return f;
}


static void check_decrypt(size_t size, unsigned sector_size,
                          uint64_t hotzone)
{
    g_autofree uint8_t *data = g_malloc(size);
    Files *f;

    qcrypto_random_bytes(data, size, &error_abort);
    f = luks2_image(data, size, sector_size);
    g_assert_cmpint(files_decrypt_go_on(f, hotzone, &error_abort), ==, 0);
    g_assert_cmpuint(f->data->len, ==, size);
    g_assert_true(memcmp(f->data->data, data, size) == 0);
    files_free(f);
}

static void test_decrypt(void)
{
    check_decrypt(3 * MiB + 64 * 1024, 0, 0);
    /* smaller than the shift: the moved segment is all the data */
    check_decrypt(96 * 1024, 0, 0);
    /* 512-byte sectors, a size no 4 KiB block divides, small zones */
    check_decrypt(2 * MiB + 1536, 512, 64 * 1024);
}

/*
 * Told to stop in the moved zone: the header file says running, the start
 * of the data file is still ciphertext, and going on finishes it.
 */
static void test_stop_in_moved_zone(void)
{
    size_t size = 3 * MiB + 64 * 1024;
    g_autofree uint8_t *data = g_malloc(size);
    g_autofree uint8_t *moved = NULL;
    QCryptoReencryptDecryptState st = QCRYPTO_REENCRYPT_DECRYPT_NONE;
    uint64_t vsize = 0;
    QCryptoReencryptIO io;
    Files *f;

    qcrypto_random_bytes(data, size, &error_abort);
    f = luks2_image(data, size, 0);
    io = files_io(f, true);
    io.stop_at = QCRYPTO_REENCRYPT_STOP_IN_MOVED_ZONE;
    g_assert_cmpint(qcrypto_reencrypt_decrypt_export_header(&reenc_test_secret, &io,
                                                            &error_abort),
                    ==, 0);
    g_assert_cmpint(qcrypto_reencrypt_decrypt_init(&reenc_test_secret, &io,
                                                   &error_abort), ==, 0);
    moved = g_memdup2(f->data->data, SHIFT);
    g_assert_cmpint(qcrypto_reencrypt_resume(&reenc_test_secret, 0, &io, &error_abort),
                    ==, 1);
    g_assert_cmpint(qcrypto_reencrypt_decrypt_state(&io, &st, &vsize,
                                                    &error_abort), ==, 0);
    g_assert_cmpint(st, ==, QCRYPTO_REENCRYPT_DECRYPT_RUNNING);
    g_assert_true(memcmp(f->data->data, moved, SHIFT) == 0);
    g_assert_cmpint(files_decrypt_go_on(f, 0, &error_abort), ==, 0);
    g_assert_cmpuint(f->data->len, ==, size);
    g_assert_true(memcmp(f->data->data, data, size) == 0);
    files_free(f);
}

/* The header is refused where decryption needs a file of its own. */
static void test_needs_header_file(void)
{
    g_autofree uint8_t *data = g_malloc0(64 * 1024);
    Files *f = luks2_image(data, 64 * 1024, 0);
    QCryptoReencryptIO io = files_io(f, false);
    Error *err = NULL;

    g_assert_cmpint(qcrypto_reencrypt_decrypt_export_header(&reenc_test_secret, &io,
                                                            &err), <, 0);
    g_assert_nonnull(strstr(error_get_pretty(err), "file for the header"));
    error_free(err);
    files_free(f);
}

/* A wrong passphrase changes nothing, in either file. */
static void test_wrong_passphrase(void)
{
    static const QCryptoBlockSecret wrong = {
        .data = (const uint8_t *)"nope", .len = 4,
    };
    g_autofree uint8_t *data = g_malloc0(64 * 1024);
    Files *f = luks2_image(data, 64 * 1024, 0);
    QCryptoReencryptIO io = files_io(f, true);
    g_autofree uint8_t *before = g_memdup2(f->data->data, f->data->len);
    Error *err = NULL;

    g_assert_cmpint(qcrypto_reencrypt_decrypt_export_header(&wrong, &io,
                                                            &err), <, 0);
    error_free(err);
    g_assert_cmpuint(f->hdr->len, ==, 0);
    g_assert_true(memcmp(f->data->data, before, f->data->len) == 0);
    files_free(f);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/crypto/luks2-reencrypt-decrypt/decrypt", test_decrypt);
    g_test_add_func("/crypto/luks2-reencrypt-decrypt/stop-in-moved-zone",
                    test_stop_in_moved_zone);
    g_test_add_func("/crypto/luks2-reencrypt-decrypt/needs-header-file",
                    test_needs_header_file);
    g_test_add_func("/crypto/luks2-reencrypt-decrypt/wrong-passphrase",
                    test_wrong_passphrase);
    return g_test_run();
}
