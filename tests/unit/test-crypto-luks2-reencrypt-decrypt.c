/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * crypto/block-luks2-reencrypt-decrypt.c on files in memory (the image and
 * its detached header): in-place decryption gives back the raw image byte
 * for byte, going on the way qemu-img-lite reencrypt goes on from what the
 * header file holds. A crash after any write:
 * test-crypto-luks2-reencrypt-crash.c, for every mode.
 */
#include <string.h>

#include "crypto/block.h"
#include "crypto/random.h"
#include "crypto/reencrypt.h"

#define MiB (1024 * 1024)
#define SHIFT MiB                   /* align-payload 2048 sectors */
#define PASS "unit test pass"

typedef struct Files {
    GByteArray *data, *hdr;
    int writes_left;                /* < 0: no limit; shared by both */
} Files;

static int rd(GByteArray *b, uint64_t off, void *buf, size_t len,
              Error **errp)
{
    if (off + len > b->len) {
        error_setg(errp, "read past the end");
        return -1;
    }
    memcpy(buf, b->data + off, len);
    return 0;
}

static int wr(Files *f, GByteArray *b, uint64_t off, const void *buf,
              size_t len, Error **errp)
{
    if (f->writes_left == 0) {
        error_setg(errp, "crash");
        return -1;
    }
    if (f->writes_left > 0) {
        f->writes_left--;
    }
    if (off + len > b->len) {
        uint64_t old = b->len;

        g_byte_array_set_size(b, off + len);
        memset(b->data + old, 0, off + len - old);
    }
    memcpy(b->data + off, buf, len);
    return 0;
}

static int data_read(void *opaque, uint64_t off, void *buf, size_t len,
                     Error **errp)
{
    return rd(((Files *)opaque)->data, off, buf, len, errp);
}

static int data_write(void *opaque, uint64_t off, const void *buf,
                      size_t len, Error **errp)
{
    Files *f = opaque;

    return wr(f, f->data, off, buf, len, errp);
}

static int hdr_read(void *opaque, uint64_t off, void *buf, size_t len,
                    Error **errp)
{
    return rd(((Files *)opaque)->hdr, off, buf, len, errp);
}

static int hdr_write(void *opaque, uint64_t off, const void *buf,
                     size_t len, Error **errp)
{
    Files *f = opaque;

    return wr(f, f->hdr, off, buf, len, errp);
}

static int no_sync(void *opaque, Error **errp)
{
    return 0;
}

static int64_t data_length(void *opaque, Error **errp)
{
    return ((Files *)opaque)->data->len;
}

static int data_truncate(void *opaque, uint64_t size, Error **errp)
{
    GByteArray *b = ((Files *)opaque)->data;
    uint64_t old = b->len;

    g_byte_array_set_size(b, size);
    if (size > old) {
        memset(b->data + old, 0, size - old);
    }
    return 0;
}

static QCryptoReencryptIO files_io(Files *f, bool detached)
{
    QCryptoReencryptIO io = {
        .read = data_read, .write = data_write, .sync = no_sync,
        .length = data_length, .truncate = data_truncate, .opaque = f,
    };

    if (detached) {
        io.hdr_read = hdr_read;
        io.hdr_write = hdr_write;
        io.hdr_sync = no_sync;
    }
    return io;
}

static const QCryptoBlockSecret secret = {
    .data = (const uint8_t *)PASS, .len = sizeof(PASS) - 1,
};

/* A LUKS2 image of data (our in-place encryption makes it). */
static Files *luks2_image(const uint8_t *data, size_t size,
                          unsigned sector_size)
{
    Files *f = g_new0(Files, 1);
    QCryptoReencryptIO io;
    QCryptoBlockCreateOptions o;

    f->data = g_byte_array_new();
    f->hdr = g_byte_array_new();
    f->writes_left = -1;
    g_byte_array_append(f->data, data, size);
    io = files_io(f, false);
    memset(&o, 0, sizeof(o));
    qcrypto_block_create_options_init(&o);
    o.format = QCRYPTO_BLOCK_FORMAT_LUKS;
    o.secret = secret;
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
    g_assert_cmpint(qcrypto_reencrypt_resume(&secret, 0, &io, &error_abort),
                    ==, 0);
    g_assert_cmpuint(f->data->len, ==, SHIFT + size);
    return f;
}

static void files_free(Files *f)
{
    g_byte_array_unref(f->data);
    g_byte_array_unref(f->hdr);
    g_free(f);
}

/*
 * Go on from whatever a stop left, as the command does: no header file
 * yet (or an empty one): start; a plain header: init again; a running
 * state: resume; a finished one: cut the file to the data size.
 */
static int go_on(Files *f, uint64_t hotzone, Error **errp)
{
    QCryptoReencryptIO io = files_io(f, true);
    QCryptoReencryptDecryptState st = QCRYPTO_REENCRYPT_DECRYPT_NONE;
    uint64_t size = 0;
    int r = 0;

    if (f->hdr->len) {
        g_assert_cmpint(qcrypto_reencrypt_decrypt_state(&io, &st, &size,
                                                        &error_abort), ==, 0);
    }
    switch (st) {
    case QCRYPTO_REENCRYPT_DECRYPT_NONE:
        /*
         * The command writes the header file under another name and
         * renames it when whole: a copy cut short is never seen.
         */
        g_byte_array_set_size(f->hdr, 0);
        r = qcrypto_reencrypt_decrypt_export_header(&secret, &io, errp);
        if (r == 0) {
            r = qcrypto_reencrypt_decrypt_init(&secret, &io, errp);
        }
        break;
    case QCRYPTO_REENCRYPT_DECRYPT_PLAIN:
        r = qcrypto_reencrypt_decrypt_init(&secret, &io, errp);
        break;
    case QCRYPTO_REENCRYPT_DECRYPT_RUNNING:
        break;
    case QCRYPTO_REENCRYPT_DECRYPT_DONE:
        g_assert_cmpuint(f->data->len, >=, size);
        g_byte_array_set_size(f->data, size);
        return 0;
    default:
        g_assert_not_reached();
    }
    if (r == 0) {
        r = qcrypto_reencrypt_resume(&secret, hotzone, &io, errp);
    }
    if (r == 0) {
        g_assert_cmpint(qcrypto_reencrypt_decrypt_state(&io, &st, &size,
                                                        &error_abort), ==, 0);
        g_assert_cmpint(st, ==, QCRYPTO_REENCRYPT_DECRYPT_DONE);
        g_assert_cmpuint(f->data->len, ==, size);
    }
    return r;
}

static void check_decrypt(size_t size, unsigned sector_size,
                          uint64_t hotzone)
{
    g_autofree uint8_t *data = g_malloc(size);
    Files *f;

    qcrypto_random_bytes(data, size, &error_abort);
    f = luks2_image(data, size, sector_size);
    g_assert_cmpint(go_on(f, hotzone, &error_abort), ==, 0);
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
    g_assert_cmpint(qcrypto_reencrypt_decrypt_export_header(&secret, &io,
                                                            &error_abort),
                    ==, 0);
    g_assert_cmpint(qcrypto_reencrypt_decrypt_init(&secret, &io,
                                                   &error_abort), ==, 0);
    moved = g_memdup2(f->data->data, SHIFT);
    g_assert_cmpint(qcrypto_reencrypt_resume(&secret, 0, &io, &error_abort),
                    ==, 1);
    g_assert_cmpint(qcrypto_reencrypt_decrypt_state(&io, &st, &vsize,
                                                    &error_abort), ==, 0);
    g_assert_cmpint(st, ==, QCRYPTO_REENCRYPT_DECRYPT_RUNNING);
    g_assert_true(memcmp(f->data->data, moved, SHIFT) == 0);
    g_assert_cmpint(go_on(f, 0, &error_abort), ==, 0);
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

    g_assert_cmpint(qcrypto_reencrypt_decrypt_export_header(&secret, &io,
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
