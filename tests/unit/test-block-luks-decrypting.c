/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * An image being decrypted in place (qemu-img-lite reencrypt --decrypt,
 * docs/reencrypt.md): its header lives in FILE.luks2-header with the
 * re-encryption requirement, and the file holds part plain text, part
 * ciphertext, no header. The format side of the block layer knows it:
 *
 * - the luks and raw formats refuse to open it, probed or named, saying
 *   how to finish the decryption; so does a LUKS2 header file too damaged
 *   to tell;
 * - BDRV_O_REENCRYPT opens it (for the tool that finishes the job);
 * - the "file" protocol opens it: bytes are all it knows;
 * - a header only exported (no requirement yet), or none, changes nothing
 *   while the image still starts with its own header; once an init that
 *   failed has overwritten that header, the image is refused too.
 *
 * The decryption is started as the tool starts it, through "file" nodes.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "block/block.h"
#include "block/crypto.h"
#include "block/options.h"
#include "crypto/reencrypt.h"
#include "crypto/secret.h"
#include "test-error.h"

#define PASS "a passphrase"
#define REFUSED "is being decrypted in place"

typedef struct Fixture {
    char *dir;
    char *img;
    char *hdr;                  /* img's default header file */
    BlockDriverState *data_bs, *hdr_bs;
} Fixture;

static void fixture_setup(Fixture *f, gconstpointer data)
{
    g_autoptr(GHashTable) opts = qemu_opts_parse(
        "key-secret=s0,iter-time=10,luks-version=2,align-payload=2048,"
        "size=2M", NULL, NULL);

    f->dir = g_dir_make_tmp("test-block-luks-decrypting-XXXXXX", NULL);
    g_assert_nonnull(f->dir);
    f->img = g_build_filename(f->dir, "img", NULL);
    f->hdr = g_strconcat(f->img, ".luks2-header", NULL);
    g_assert_cmpint(qcrypto_secret_add("s0", PASS, NULL,
                                       QCRYPTO_SECRET_FORMAT_RAW,
                                       &error_abort), ==, 0);
    g_assert_cmpint(bdrv_create("luks", f->img, opts, NULL, &error_abort), ==, 0);
}

static void fixture_teardown(Fixture *f, gconstpointer data)
{
    unlink(f->hdr);
    unlink(f->img);
    rmdir(f->dir);
    g_free(f->dir);
    g_free(f->img);
    g_free(f->hdr);
    qcrypto_secret_clear_all();
}

/* ---- the tool's part: the I/O of a decryption through "file" nodes ---- */

static int data_read(void *opaque, uint64_t off, void *buf, size_t len,
                     Error **errp)
{
    return bdrv_pread(((Fixture *)opaque)->data_bs, off, buf, len, errp);
}

static int data_write(void *opaque, uint64_t off, const void *buf,
                      size_t len, Error **errp)
{
    return bdrv_pwrite(((Fixture *)opaque)->data_bs, off, buf, len, 0, errp);
}

static int data_sync(void *opaque, Error **errp)
{
    return bdrv_flush(((Fixture *)opaque)->data_bs, errp);
}

static int64_t data_length(void *opaque, Error **errp)
{
    return bdrv_getlength(((Fixture *)opaque)->data_bs, errp);
}

static int data_truncate(void *opaque, uint64_t size, Error **errp)
{
    return bdrv_truncate(((Fixture *)opaque)->data_bs, size,
                         PREALLOC_MODE_OFF, errp);
}

static int hdr_read(void *opaque, uint64_t off, void *buf, size_t len,
                    Error **errp)
{
    return bdrv_pread(((Fixture *)opaque)->hdr_bs, off, buf, len, errp);
}

static int hdr_write(void *opaque, uint64_t off, const void *buf,
                     size_t len, Error **errp)
{
    BlockDriverState *bs = ((Fixture *)opaque)->hdr_bs;
    int64_t cur = bdrv_getlength(bs, errp);

    if (cur < 0 || (off + len > (uint64_t)cur &&
                    bdrv_truncate(bs, off + len, PREALLOC_MODE_OFF,
                                  errp) < 0)) {
        return -1;
    }
    return bdrv_pwrite(bs, off, buf, len, 0, errp);
}

static int hdr_sync(void *opaque, Error **errp)
{
    return bdrv_flush(((Fixture *)opaque)->hdr_bs, errp);
}

/* Export the header to f->hdr and, with init, start the decryption. */
static void start_decryption(Fixture *f, bool init)
{
    static const QCryptoBlockSecret secret = {
        (const uint8_t *)PASS, sizeof(PASS) - 1,
    };
    g_autoptr(GHashTable) none = qemu_opts_new();
    QCryptoReencryptIO io = {
        .read = data_read, .write = data_write, .sync = data_sync,
        .length = data_length, .truncate = data_truncate,
        .hdr_read = hdr_read, .hdr_write = hdr_write, .hdr_sync = hdr_sync,
        .opaque = f,
    };

    f->data_bs = bdrv_open(f->img, "file", NULL, BDRV_O_RDWR, &error_abort);
    f->hdr_bs = bdrv_create_open("file", f->hdr, none, 0, NULL, &error_abort);
    g_assert_cmpint(qcrypto_reencrypt_decrypt_export_header(&secret, &io,
                                                            &error_abort),
                    ==, 0);
    g_assert_cmpint(bdrv_create_finish(f->hdr_bs, &error_abort), ==, 0);
    if (init) {
        g_assert_cmpint(qcrypto_reencrypt_decrypt_init(&secret, &io,
                                                       &error_abort), ==, 0);
    }
    g_clear_pointer(&f->hdr_bs, bdrv_close);
    g_clear_pointer(&f->data_bs, bdrv_close);
}

static BlockDriverState *open_luks(Fixture *f, int flags, Error **errp)
{
    g_autofree char *s = g_strdup_printf("driver=luks,key-secret=s0,"
                                         "file.filename=%s", f->img);
    g_autoptr(GHashTable) opts = qemu_opts_parse(s, NULL, &error_abort);

    return bdrv_open(NULL, NULL, opts, flags, errp);
}

/* ---- the tests ---- */

static void test_refused(Fixture *f, gconstpointer data)
{
    g_autofree char *how = NULL;
    Error *err = NULL;

    start_decryption(f, true);
    g_assert_true(block_crypto_decrypt_in_progress(f->img));
    /* probed, for info and for reading */
    g_assert_null(bdrv_open(f->img, NULL, NULL, BDRV_O_NO_IO, &err));
    test_error_expect(&err, REFUSED);
    g_assert_null(bdrv_open(f->img, NULL, NULL, 0, &err));
    test_error_expect(&err, REFUSED);
    /* named, with or without its secret */
    g_assert_null(bdrv_open(f->img, "raw", NULL, BDRV_O_RDWR, &err));
    test_error_expect(&err, REFUSED);
    g_assert_null(bdrv_open(f->img, "luks", NULL, BDRV_O_NO_IO, &err));
    test_error_expect(&err, REFUSED);
    g_assert_null(open_luks(f, 0, &err));
    /* the message says how to finish, with our tool or cryptsetup */
    how = g_strdup_printf("cryptsetup reencrypt --resume-only --header "
                          "%s", f->hdr);
    test_error_expect(&err, how);
}

static void test_reencrypt_flag_opens(Fixture *f, gconstpointer data)
{
    BlockDriverState *bs;

    start_decryption(f, true);
    bs = bdrv_open(f->img, "raw", NULL, BDRV_O_REENCRYPT, &error_abort);
    bdrv_close(bs);
    bs = bdrv_open(f->img, "raw", NULL, BDRV_O_REENCRYPT | BDRV_O_RDWR,
                   &error_abort);
    bdrv_close(bs);
}

static void test_file_protocol_opens(Fixture *f, gconstpointer data)
{
    BlockDriverState *bs;

    start_decryption(f, true);
    bs = bdrv_open(f->img, "file", NULL, BDRV_O_RDWR, &error_abort);
    bdrv_close(bs);
}

/* Exported but not started (a crash before init), or gone: no refusal. */
static void test_not_running(Fixture *f, gconstpointer data)
{
    BlockDriverState *bs;

    start_decryption(f, false);
    g_assert_false(block_crypto_decrypt_in_progress(f->img));
    bs = open_luks(f, 0, &error_abort);
    g_assert_cmpstr(bdrv_get_format_name(bs), ==, "luks");
    bdrv_close(bs);

    g_assert_cmpint(unlink(f->hdr), ==, 0);
    bs = bdrv_open(f->img, NULL, NULL, BDRV_O_NO_IO, &error_abort);
    g_assert_cmpstr(bdrv_get_format_name(bs), ==, "luks");
    bdrv_close(bs);
}

/*
 * Exported, and the init failed after overwriting the image's own header
 * (a full disk, an I/O error): neither LUKS nor raw, refused.
 */
static void test_init_failed(Fixture *f, gconstpointer data)
{
    Error *err = NULL;
    FILE *fp;

    start_decryption(f, false);
    fp = fopen(f->img, "r+b");
    g_assert_nonnull(fp);
    g_assert_cmpint(fwrite("garbage!", 1, 8, fp), ==, 8);
    g_assert_cmpint(fclose(fp), ==, 0);
    g_assert_true(block_crypto_decrypt_in_progress(f->img));
    g_assert_null(bdrv_open(f->img, "raw", NULL, BDRV_O_NO_IO, &err));
    g_assert_nonnull(strstr(error_get_pretty(err), REFUSED));
    error_free(err);
}

/* A LUKS2 magic with nothing readable behind it: refused; other bytes not. */
static void test_damaged_header(Fixture *f, gconstpointer data)
{
    static const uint8_t magic[8] = { 'L', 'U', 'K', 'S', 0xba, 0xbe, 0, 2 };
    uint8_t buf[16384] = { 0 };
    BlockDriverState *bs;
    Error *err = NULL;

    memcpy(buf, magic, sizeof(magic));
    g_assert_true(g_file_set_contents(f->hdr, (const char *)buf, sizeof(buf),
                                      NULL));
    g_assert_null(bdrv_open(f->img, NULL, NULL, BDRV_O_NO_IO, &err));
    test_error_expect(&err, REFUSED);

    g_assert_true(g_file_set_contents(f->hdr, "not a header", -1, NULL));
    bs = bdrv_open(f->img, NULL, NULL, BDRV_O_NO_IO, &error_abort);
    bdrv_close(bs);
}

/*
 * The first 4 KiB of the image's own header and nothing more (cryptsetup's
 * export, written in place, cut short): the image is itself and opens;
 * with another UUID it is refused as before.
 */
static void test_export_cut_short(Fixture *f, gconstpointer data)
{
    g_autofree char *img = NULL;
    BlockDriverState *bs;
    Error *err = NULL;
    gsize len;

    g_assert_true(g_file_get_contents(f->img, &img, &len, NULL));
    g_assert_cmpuint(len, >=, 4096);
    g_assert_true(g_file_set_contents(f->hdr, img, 4096, NULL));
    g_assert_false(block_crypto_decrypt_in_progress(f->img));
    bs = bdrv_open(f->img, NULL, NULL, BDRV_O_NO_IO, &error_abort);
    bdrv_close(bs);

    img[0xa8] ^= 1;             /* the UUID's first byte */
    g_assert_true(g_file_set_contents(f->hdr, img, 4096, NULL));
    g_assert_true(block_crypto_decrypt_in_progress(f->img));
    g_assert_null(bdrv_open(f->img, NULL, NULL, BDRV_O_NO_IO, &err));
    test_error_expect(&err, REFUSED);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
#define ADD(path, fn) \
    g_test_add(path, Fixture, NULL, fixture_setup, fn, fixture_teardown)
    ADD("/block/luks/decrypting/refused", test_refused);
    ADD("/block/luks/decrypting/reencrypt-flag-opens",
        test_reencrypt_flag_opens);
    ADD("/block/luks/decrypting/file-protocol-opens",
        test_file_protocol_opens);
    ADD("/block/luks/decrypting/not-running", test_not_running);
    ADD("/block/luks/decrypting/init-failed", test_init_failed);
    ADD("/block/luks/decrypting/damaged-header", test_damaged_header);
    ADD("/block/luks/decrypting/export-cut-short", test_export_cut_short);
    return g_test_run();
}
