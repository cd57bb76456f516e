/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * crypto/block-luks2-reencrypt-rekey.c on a file in memory: a new volume
 * key in place gives the same data back through the LUKS2 driver, for
 * every resilience and with a new cipher and sector size. A crash in the
 * middle of any write: test-crypto-luks2-reencrypt-crash.c, for every
 * mode.
 */
#include <string.h>

#include "crypto/block.h"
#include "crypto/random.h"
#include "crypto/reencrypt.h"

#define MiB (1024 * 1024)
#define SHIFT MiB                   /* align-payload 2048 sectors */
#define DATA (2 * MiB + 64 * 1024)
#define HOTZONE (128 * 1024)
#define PASS "unit test pass"

typedef struct MemFile {
    GByteArray *bytes;
    int writes_left;                /* < 0: no limit */
} MemFile;

static int mf_read(void *opaque, uint64_t off, void *buf, size_t len,
                   Error **errp)
{
    MemFile *f = opaque;

    if (off + len > f->bytes->len) {
        error_setg(errp, "read past the end");
        return -1;
    }
    memcpy(buf, f->bytes->data + off, len);
    return 0;
}

/* The write that crashes stores its first half (whole 4 KiB pages). */
static int mf_write(void *opaque, uint64_t off, const void *buf, size_t len,
                    Error **errp)
{
    MemFile *f = opaque;
    size_t n = len;

    if (f->writes_left == 0) {
        n = len / 2 & ~(size_t)4095;
    } else if (f->writes_left > 0) {
        f->writes_left--;
    }
    g_assert_cmpuint(off + len, <=, f->bytes->len);
    memcpy(f->bytes->data + off, buf, n);
    if (n != len) {
        error_setg(errp, "crash");
        return -1;
    }
    return 0;
}

static int mf_sync(void *opaque, Error **errp)
{
    return 0;
}

static int64_t mf_length(void *opaque, Error **errp)
{
    MemFile *f = opaque;

    return f->bytes->len;
}

static QCryptoReencryptIO mf_io(MemFile *f)
{
    QCryptoReencryptIO io = {
        .read = mf_read, .write = mf_write, .sync = mf_sync,
        .length = mf_length, .opaque = f,
    };
    return io;
}

static const QCryptoBlockSecret secret = {
    .data = (const uint8_t *)PASS, .len = sizeof(PASS) - 1,
};

static int blk_init(QCryptoBlock *block, uint64_t headerlen, void *opaque,
                    Error **errp)
{
    MemFile *f = opaque;

    g_byte_array_set_size(f->bytes, headerlen + DATA);
    memset(f->bytes->data, 0, f->bytes->len);
    return 0;
}

static int blk_write(QCryptoBlock *block, uint64_t off, const uint8_t *buf,
                     size_t len, void *opaque, Error **errp)
{
    return mf_write(opaque, off, buf, len, errp);
}

static int blk_read(QCryptoBlock *block, uint64_t off, uint8_t *buf,
                    size_t len, void *opaque, Error **errp)
{
    return mf_read(opaque, off, buf, len, errp);
}

/* A LUKS2 image (512-byte sectors, PBKDF2) holding data. */
static MemFile *luks2_file(const uint8_t *data)
{
    MemFile *f = g_new0(MemFile, 1);
    QCryptoBlockCreateOptions o;
    g_autoptr(QCryptoBlock) block = NULL;
    g_autofree uint8_t *buf = g_memdup2(data, DATA);

    f->bytes = g_byte_array_new();
    f->writes_left = -1;
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
    o.sector_size = 512;
    block = qcrypto_block_create(&o, blk_init, blk_write, f, &error_abort);
    g_assert_cmpuint(qcrypto_block_get_payload_offset(block), ==, SHIFT);
    g_assert_cmpint(qcrypto_block_encrypt(block, 0, buf, DATA, &error_abort),
                    ==, 0);
    memcpy(f->bytes->data + SHIFT, buf, DATA);
    return f;
}

static void mf_free(MemFile *f)
{
    g_byte_array_unref(f->bytes);
    g_free(f);
}

/* The image in f, opened by the LUKS2 driver, holds want. */
static void assert_data(MemFile *f, const uint8_t *want)
{
    QCryptoBlockOpenOptions oo = {
        .format = QCRYPTO_BLOCK_FORMAT_LUKS, .secret = secret,
        .size = f->bytes->len,
    };
    g_autoptr(QCryptoBlock) block = qcrypto_block_open(&oo, blk_read, f, 0,
                                                       &error_abort);
    g_autofree uint8_t *buf = NULL;

    g_assert_cmpuint(qcrypto_block_get_payload_offset(block), ==, SHIFT);
    g_assert_cmpuint(f->bytes->len, ==, SHIFT + DATA);
    buf = g_memdup2(f->bytes->data + SHIFT, DATA);
    g_assert_cmpint(qcrypto_block_decrypt(block, 0, buf, DATA, &error_abort),
                    ==, 0);
    g_assert_true(memcmp(buf, want, DATA) == 0);
}

static void rekey_options(QCryptoReencryptRekeyOptions *o,
                          QCryptoReencryptResilience res)
{
    memset(o, 0, sizeof(*o));
    qcrypto_block_create_options_init(&o->create);
    o->create.secret = secret;
    o->create.has_iter_time = true;
    o->create.iter_time = 1;
    o->keyslot = -1;
    o->resilience = res;
}

/* Init and resume; the data is the same, the ciphertext all new. */
static void rekey_and_check(QCryptoReencryptRekeyOptions *o)
{
    g_autofree uint8_t *data = g_malloc(DATA);
    g_autofree uint8_t *before = NULL;
    MemFile *f;
    QCryptoReencryptIO io;

    qcrypto_random_bytes(data, DATA, &error_abort);
    f = luks2_file(data);
    io = mf_io(f);
    before = g_memdup2(f->bytes->data + SHIFT, DATA);
    g_assert_cmpint(qcrypto_reencrypt_rekey_init(o, &io, &error_abort), ==,
                    0);
    /* In progress: the LUKS2 driver refuses the image. */
    {
        QCryptoBlockOpenOptions oo = {
            .format = QCRYPTO_BLOCK_FORMAT_LUKS, .secret = secret,
        };
        Error *err = NULL;

        g_assert_null(qcrypto_block_open(&oo, blk_read, f, 0, &err));
        g_assert_nonnull(strstr(error_get_pretty(err), "re-encryption"));
        error_free(err);
    }
    g_assert_cmpint(qcrypto_reencrypt_resume(&secret, HOTZONE, &io,
                                             &error_abort), ==, 0);
    assert_data(f, data);
    for (size_t i = 0; i < DATA; i += 512) {
        g_assert_true(memcmp(before + i, f->bytes->data + SHIFT + i, 16));
    }
    mf_free(f);
}

/*
 * Told to stop before the final header: the image is still refused as
 * being re-encrypted, and a resume finishes it.
 */
static void test_stop_before_finish(void)
{
    g_autofree uint8_t *data = g_malloc(DATA);
    QCryptoReencryptRekeyOptions o;
    QCryptoBlockOpenOptions oo = {
        .format = QCRYPTO_BLOCK_FORMAT_LUKS, .secret = secret,
    };
    Error *err = NULL;
    MemFile *f;
    QCryptoReencryptIO io;

    qcrypto_random_bytes(data, DATA, &error_abort);
    f = luks2_file(data);
    io = mf_io(f);
    io.stop_at = QCRYPTO_REENCRYPT_STOP_BEFORE_FINISH;
    rekey_options(&o, QCRYPTO_REENCRYPT_RESILIENCE_CHECKSUM);
    g_assert_cmpint(qcrypto_reencrypt_rekey_init(&o, &io, &error_abort), ==,
                    0);
    g_assert_cmpint(qcrypto_reencrypt_resume(&secret, HOTZONE, &io,
                                             &error_abort), ==, 1);
    g_assert_null(qcrypto_block_open(&oo, blk_read, f, 0, &err));
    g_assert_nonnull(strstr(error_get_pretty(err), "re-encryption"));
    error_free(err);
    io.stop_at = QCRYPTO_REENCRYPT_STOP_NONE;
    g_assert_cmpint(qcrypto_reencrypt_resume(&secret, HOTZONE, &io,
                                             &error_abort), ==, 0);
    assert_data(f, data);
    mf_free(f);
}

/*
 * The keys the init kept: the resume unlocks no key slot (a wrong secret
 * does not matter, the keys match the digests); keys of another image
 * do not match and are ignored (the wrong secret then fails).
 */
static void test_kept_keys(void)
{
    g_autofree uint8_t *data = g_malloc(DATA);
    g_autoptr(QCryptoReencryptKeys) keys = qcrypto_reencrypt_keys_new();
    g_autoptr(QCryptoReencryptKeys) other = qcrypto_reencrypt_keys_new();
    const QCryptoBlockSecret wrong = { (const uint8_t *)"nope", 4 };
    QCryptoReencryptRekeyOptions o;
    QCryptoReencryptIO io, io2;
    Error *err = NULL;
    MemFile *f, *f2;

    qcrypto_random_bytes(data, DATA, &error_abort);
    f = luks2_file(data);
    f2 = luks2_file(data);
    io = mf_io(f);
    io2 = mf_io(f2);
    rekey_options(&o, QCRYPTO_REENCRYPT_RESILIENCE_CHECKSUM);
    o.keys = keys;
    g_assert_cmpint(qcrypto_reencrypt_rekey_init(&o, &io, &error_abort), ==,
                    0);
    o.keys = other;
    g_assert_cmpint(qcrypto_reencrypt_rekey_init(&o, &io2, &error_abort), ==,
                    0);
    g_assert_cmpint(qcrypto_reencrypt_resume_keys(&wrong, other, HOTZONE, &io,
                                                  &err), ==, -1);
    g_assert_nonnull(strstr(error_get_pretty(err), "Invalid password"));
    error_free(err);
    g_assert_cmpint(qcrypto_reencrypt_resume_keys(&wrong, keys, HOTZONE, &io,
                                                  &error_abort), ==, 0);
    assert_data(f, data);
    mf_free(f);
    mf_free(f2);
}

static void test_checksum(void)
{
    QCryptoReencryptRekeyOptions o;

    rekey_options(&o, QCRYPTO_REENCRYPT_RESILIENCE_CHECKSUM);
    rekey_and_check(&o);
}

static void test_journal(void)
{
    QCryptoReencryptRekeyOptions o;

    rekey_options(&o, QCRYPTO_REENCRYPT_RESILIENCE_JOURNAL);
    rekey_and_check(&o);
}

static void test_none(void)
{
    QCryptoReencryptRekeyOptions o;

    rekey_options(&o, QCRYPTO_REENCRYPT_RESILIENCE_NONE);
    rekey_and_check(&o);
}

/* aes-128-xts and 4096-byte sectors replace aes-256-xts and 512. */
static void test_new_cipher_and_sector_size(void)
{
    QCryptoReencryptRekeyOptions o;

    rekey_options(&o, QCRYPTO_REENCRYPT_RESILIENCE_CHECKSUM);
    o.has_cipher = true;
    o.create.cipher_alg = QCRYPTO_CIPHER_ALGO_AES_128;
    o.create.sector_size = 4096;
    rekey_and_check(&o);
}

static void test_wrong_secret_leaves_image_untouched(void)
{
    static const QCryptoBlockSecret wrong = {
        .data = (const uint8_t *)"wrong", .len = 5,
    };
    g_autofree uint8_t *data = g_malloc(DATA);
    g_autofree uint8_t *before = NULL;
    QCryptoReencryptRekeyOptions o;
    MemFile *f;
    QCryptoReencryptIO io;
    Error *err = NULL;

    qcrypto_random_bytes(data, DATA, &error_abort);
    f = luks2_file(data);
    io = mf_io(f);
    before = g_memdup2(f->bytes->data, f->bytes->len);
    rekey_options(&o, QCRYPTO_REENCRYPT_RESILIENCE_CHECKSUM);
    o.create.secret = wrong;
    g_assert_cmpint(qcrypto_reencrypt_rekey_init(&o, &io, &err), ==, -1);
    g_assert_nonnull(strstr(error_get_pretty(err), "does not open"));
    error_free(err);
    g_assert_true(memcmp(before, f->bytes->data, f->bytes->len) == 0);
    mf_free(f);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/crypto/luks2-reencrypt-rekey/checksum", test_checksum);
    g_test_add_func("/crypto/luks2-reencrypt-rekey/kept-keys", test_kept_keys);
    g_test_add_func("/crypto/luks2-reencrypt-rekey/journal", test_journal);
    g_test_add_func("/crypto/luks2-reencrypt-rekey/none", test_none);
    g_test_add_func("/crypto/luks2-reencrypt-rekey/stop-before-finish",
                    test_stop_before_finish);
    g_test_add_func("/crypto/luks2-reencrypt-rekey/new-cipher-sector-size",
                    test_new_cipher_and_sector_size);
    g_test_add_func("/crypto/luks2-reencrypt-rekey/wrong-secret",
                    test_wrong_secret_leaves_image_untouched);
    return g_test_run();
}
