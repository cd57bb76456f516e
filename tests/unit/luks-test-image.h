/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Helpers shared by the LUKS tests: an image held in memory behind the
 * QCryptoBlock read / write / init callbacks, and access to cryptsetup's
 * test images in $QIL_TESTDATA.
 */
#ifndef LUKS_TEST_IMAGE_H
#define LUKS_TEST_IMAGE_H

#include <glib.h>
#include <glib/gstdio.h>
#include <string.h>
#include <sys/wait.h>

#include "crypto/block.h"

typedef struct TestImage {
    GByteArray *buf;
    unsigned nwrites;
} TestImage;

static inline TestImage *test_image_new(void)
{
    TestImage *img = g_new0(TestImage, 1);

    img->buf = g_byte_array_new();
    return img;
}

static inline TestImage *test_image_new_take(guint8 *data, gsize len)
{
    TestImage *img = g_new0(TestImage, 1);

    img->buf = g_byte_array_new_take(data, len);
    return img;
}

static inline void test_image_free(TestImage *img)
{
    if (img) {
        g_byte_array_unref(img->buf);
        g_free(img);
    }
}
G_DEFINE_AUTOPTR_CLEANUP_FUNC(TestImage, test_image_free)

/* Grow to len bytes, the new bytes zero (as a sparse file reads). */
static inline void test_image_grow(TestImage *img, size_t len)
{
    size_t old = img->buf->len;

    if (len > old) {
        g_byte_array_set_size(img->buf, len);
        memset(img->buf->data + old, 0, len - old);
    }
}

static inline int test_image_read(QCryptoBlock *block, uint64_t offset,
                                  uint8_t *buf, size_t len, void *opaque,
                                  Error **errp)
{
    TestImage *img = opaque;

    if (offset > img->buf->len || len > img->buf->len - offset) {
        error_setg(errp, "Read of %zu bytes at %" G_GUINT64_FORMAT
                   " is beyond the end of the %u-byte image", len, offset,
                   img->buf->len);
        return -1;
    }
    memcpy(buf, img->buf->data + offset, len);
    return 0;
}

static inline int test_image_write(QCryptoBlock *block, uint64_t offset,
                                   const uint8_t *buf, size_t len,
                                   void *opaque, Error **errp)
{
    TestImage *img = opaque;

    test_image_grow(img, offset + len);
    memcpy(img->buf->data + offset, buf, len);
    img->nwrites++;
    return 0;
}

static inline int test_image_init(QCryptoBlock *block, uint64_t headerlen,
                                  void *opaque, Error **errp)
{
    TestImage *img = opaque;

    g_byte_array_set_size(img->buf, 0);
    test_image_grow(img, headerlen);
    return 0;
}

static inline QCryptoBlockSecret test_secret(const char *pw)
{
    return (QCryptoBlockSecret) { (const uint8_t *)pw, strlen(pw) };
}

/* Open img with passphrase pw (NULL: header only), file size known. */
static inline QCryptoBlock *test_image_open(TestImage *img, const char *pw,
                                            unsigned flags, Error **errp)
{
    QCryptoBlockOpenOptions opts = {
        .format = QCRYPTO_BLOCK_FORMAT_LUKS,
        .size = img->buf->len,
    };

    if (pw) {
        opts.secret = test_secret(pw);
    } else {
        flags |= QCRYPTO_BLOCK_OPEN_NO_IO;
    }
    return qcrypto_block_open(&opts, test_image_read, img, flags, errp);
}

/* $QIL_TESTDATA/cryptsetup, or NULL after g_test_skip() saying why. */
static inline char *test_cryptsetup_dir(void)
{
    const char *root = g_getenv("QIL_TESTDATA");
    char *dir;

    if (!root) {
        g_test_skip("QIL_TESTDATA is not set: no cryptsetup test images");
        return NULL;
    }
    dir = g_build_filename(root, "cryptsetup", NULL);
    if (!g_file_test(dir, G_FILE_TEST_IS_DIR)) {
        g_test_skip("no cryptsetup test images in $QIL_TESTDATA");
        g_free(dir);
        return NULL;
    }
    return dir;
}

/* Run argv; its stdout (and stderr) in *out if out; true if it exits 0. */
static inline bool test_run_capture(const char *const *argv, char **out)
{
    g_autoptr(GError) err = NULL;
    g_autofree char *stdout_buf = NULL, *stderr_buf = NULL;
    int status;

    g_spawn_sync(NULL, (char **)argv, NULL, G_SPAWN_SEARCH_PATH, NULL, NULL,
                 &stdout_buf, &stderr_buf, &status, &err);
    g_assert_no_error(err);
    if (out) {
        *out = g_strconcat(stdout_buf, stderr_buf, NULL);
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        g_test_message("%s failed: %s", argv[0], stderr_buf);
        return false;
    }
    return true;
}

static inline void test_run(const char *const *argv)
{
    g_assert_true(test_run_capture(argv, NULL));
}

/* The whole content of an .xz file of the test data. */
static inline TestImage *test_image_load_xz(const char *path)
{
    g_autofree char *tmpdir = g_dir_make_tmp("qil-luks-XXXXXX", NULL);
    g_autofree char *out = g_build_filename(tmpdir, "img", NULL);
    const char *argv[] = { "sh", "-c", "xz -dc \"$1\" > \"$2\"", "sh",
                           path, out, NULL };
    gchar *data;
    gsize len;

    g_assert_nonnull(tmpdir);
    test_run(argv);
    g_assert_true(g_file_get_contents(out, &data, &len, NULL));
    g_unlink(out);
    g_rmdir(tmpdir);
    return test_image_new_take((guint8 *)data, len);
}

static inline TestImage *test_image_load(const char *path)
{
    gchar *data;
    gsize len;

    g_assert_true(g_file_get_contents(path, &data, &len, NULL));
    return test_image_new_take((guint8 *)data, len);
}

static inline void test_rm_rf(const char *dir)
{
    const char *argv[] = { "rm", "-rf", dir, NULL };

    test_run(argv);
}

#endif
