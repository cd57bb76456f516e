/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * crypto/block-luks2-reencrypt.c on a file in memory: in-place encryption
 * gives the data back through the LUKS2 driver. A crash after any write:
 * test-crypto-luks2-reencrypt-crash.c, for every mode.
 */
#include <string.h>

#include "crypto/block.h"
#include "crypto/random.h"
#include "crypto/reencrypt.h"

#define MiB (1024 * 1024)
#define SHIFT MiB                   /* align-payload 2048 sectors */
#define DATA (3 * MiB + 64 * 1024)
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

static int mf_write(void *opaque, uint64_t off, const void *buf, size_t len,
                    Error **errp)
{
    MemFile *f = opaque;

    if (f->writes_left == 0) {
        error_setg(errp, "crash");
        return -1;
    }
    if (f->writes_left > 0) {
        f->writes_left--;
    }
    if (off + len > f->bytes->len) {
        g_byte_array_set_size(f->bytes, off + len);
    }
    memcpy(f->bytes->data + off, buf, len);
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

static int mf_truncate(void *opaque, uint64_t size, Error **errp)
{
    MemFile *f = opaque;
    uint64_t old = f->bytes->len;

    g_byte_array_set_size(f->bytes, size);
    if (size > old) {
        memset(f->bytes->data + old, 0, size - old);
    }
    return 0;
}

static QCryptoReencryptIO mf_io(MemFile *f)
{
    QCryptoReencryptIO io = {
        .read = mf_read, .write = mf_write, .sync = mf_sync,
        .length = mf_length, .truncate = mf_truncate, .opaque = f,
    };
    return io;
}

static const QCryptoBlockSecret secret = {
    .data = (const uint8_t *)PASS, .len = sizeof(PASS) - 1,
};

static void create_options(QCryptoBlockCreateOptions *o)
{
    memset(o, 0, sizeof(*o));
    qcrypto_block_create_options_init(o);
    o->format = QCRYPTO_BLOCK_FORMAT_LUKS;
    o->secret = secret;
    o->luks_version = 2;
    o->has_kdf = true;
    o->kdf = QCRYPTO_BLOCK_KDF_PBKDF2;
    o->has_iter_time = true;
    o->iter_time = 1;
    o->align_payload = SHIFT / 512;
}

static int open_read(QCryptoBlock *block, uint64_t off, uint8_t *buf,
                     size_t len, void *opaque, Error **errp)
{
    return mf_read(opaque, off, buf, len, errp);
}

/* The image in f, opened by the LUKS2 driver, holds want. */
static void assert_data(MemFile *f, const uint8_t *want)
{
    QCryptoBlockOpenOptions oo = {
        .format = QCRYPTO_BLOCK_FORMAT_LUKS, .secret = secret,
        .size = f->bytes->len,
    };
    g_autoptr(QCryptoBlock) block = qcrypto_block_open(&oo, open_read, f, 0,
                                                       &error_abort);
    uint64_t off = qcrypto_block_get_payload_offset(block);
    g_autofree uint8_t *buf = NULL;

    g_assert_cmpuint(off, ==, SHIFT);
    g_assert_cmpuint(f->bytes->len, ==, SHIFT + DATA);
    buf = g_memdup2(f->bytes->data + off, DATA);
    g_assert_cmpint(qcrypto_block_decrypt(block, 0, buf, DATA, &error_abort),
                    ==, 0);
    g_assert_true(memcmp(buf, want, DATA) == 0);
}

static MemFile *raw_file(const uint8_t *data)
{
    MemFile *f = g_new0(MemFile, 1);

    f->bytes = g_byte_array_sized_new(DATA + 2 * SHIFT);
    g_byte_array_append(f->bytes, data, DATA);
    f->writes_left = -1;
    return f;
}

static void mf_free(MemFile *f)
{
    g_byte_array_unref(f->bytes);
    g_free(f);
}

/*
 * A raw file of random data (*data, DATA bytes) with an encryption set
 * up on it (the metadata written, no data moved yet), resume to stop at
 * stop_at.
 */
static MemFile *encrypt_init(uint8_t *data, QCryptoReencryptStop stop_at,
                             QCryptoReencryptIO *io)
{
    QCryptoBlockCreateOptions o;
    MemFile *f;

    qcrypto_random_bytes(data, DATA, &error_abort);
    f = raw_file(data);
    *io = mf_io(f);
    io->stop_at = stop_at;
    create_options(&o);
    g_assert_cmpint(qcrypto_reencrypt_encrypt_init(&o, io, &error_abort),
                    ==, 0);
    return f;
}

static void test_encrypt(void)
{
    g_autofree uint8_t *data = g_malloc(DATA);
    QCryptoReencryptIO io;
    MemFile *f = encrypt_init(data, QCRYPTO_REENCRYPT_STOP_NONE, &io);

    g_assert_cmpuint(f->bytes->len, ==, DATA + 2 * SHIFT);
    g_assert_cmpint(qcrypto_reencrypt_resume(&secret, 128 * 1024, &io,
                                             &error_abort), ==, 0);
    assert_data(f, data);
    mf_free(f);
}

/*
 * Told to stop before the final header: every zone is done, the state is
 * still a re-encryption (the file not cut yet), and a resume finishes it.
 */
static void test_stop_before_finish(void)
{
    g_autofree uint8_t *data = g_malloc(DATA);
    QCryptoReencryptIO io;
    MemFile *f = encrypt_init(data, QCRYPTO_REENCRYPT_STOP_BEFORE_FINISH,
                              &io);

    g_assert_cmpint(qcrypto_reencrypt_resume(&secret, 128 * 1024, &io,
                                             &error_abort), ==, 1);
    g_assert_cmpuint(f->bytes->len, ==, DATA + 2 * SHIFT);
    /* a stop point for decryption only changes nothing here */
    io.stop_at = QCRYPTO_REENCRYPT_STOP_IN_MOVED_ZONE;
    g_assert_cmpint(qcrypto_reencrypt_resume(&secret, 128 * 1024, &io,
                                             &error_abort), ==, 0);
    assert_data(f, data);
    mf_free(f);
}

/*
 * The init keeps the new volume key: the resume in the same process then
 * unlocks nothing (so a wrong passphrase there does not matter), while
 * keys kept for another image are not taken (their digest does not
 * match: the key slot is unlocked, and the wrong passphrase refused).
 */
static void test_kept_key(void)
{
    g_autofree uint8_t *data = g_malloc(DATA);
    g_autoptr(QCryptoReencryptKeys) keys = qcrypto_reencrypt_keys_new();
    g_autoptr(QCryptoReencryptKeys) other = qcrypto_reencrypt_keys_new();
    const QCryptoBlockSecret wrong = { (const uint8_t *)"nope", 4 };
    QCryptoBlockCreateOptions o;
    QCryptoReencryptIO io, io2;
    Error *err = NULL;
    MemFile *f, *f2;

    qcrypto_random_bytes(data, DATA, &error_abort);
    f = raw_file(data);
    f2 = raw_file(data);
    io = mf_io(f);
    io2 = mf_io(f2);
    create_options(&o);
    g_assert_cmpint(qcrypto_reencrypt_encrypt_init_keys(&o, keys, &io,
                                                        &error_abort), ==, 0);
    g_assert_cmpint(qcrypto_reencrypt_encrypt_init_keys(&o, other, &io2,
                                                        &error_abort), ==, 0);
    g_assert_cmpint(qcrypto_reencrypt_resume_keys(&wrong, other, 128 * 1024,
                                                  &io, &err), ==, -1);
    g_assert_nonnull(strstr(error_get_pretty(err), "Invalid password"));
    error_free(err);
    g_assert_cmpint(qcrypto_reencrypt_resume_keys(&wrong, keys, 128 * 1024,
                                                  &io, &error_abort), ==, 0);
    assert_data(f, data);
    mf_free(f);
    mf_free(f2);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/crypto/luks2-reencrypt/encrypt", test_encrypt);
    g_test_add_func("/crypto/luks2-reencrypt/stop-before-finish",
                    test_stop_before_finish);
    g_test_add_func("/crypto/luks2-reencrypt/kept-key", test_kept_key);
    return g_test_run();
}
