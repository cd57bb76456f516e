/*
 * Finding an image's format from its bytes, at both tables:
 *
 * - the block layer's (block/block.c, bdrv_probe_all): every format
 *   driver scores the start of the file and the best wins; raw, which
 *   takes anything, only when no other claims it;
 * - the crypto layer's (crypto/block.c): LUKS1 and LUKS2 share the magic,
 *   and the header's version picks the driver on open (luks_version on
 *   create); a damaged LUKS2 primary header is still found through its
 *   secondary copy.
 *
 * The LUKS images are made in memory with cheap key derivation.
 */
#include <string.h>
#include <unistd.h>

#include "block/block_int.h"
#include "luks-test-image.h"
#include "test-error.h"

static const char pass[] = "probe";

/* A new LUKS image of version (1 or 2) in memory. */
static TestImage *make_luks(int version)
{
    QCryptoBlockCreateOptions opts;
    g_autoptr(TestImage) img = test_image_new();
    g_autoptr(QCryptoBlock) block = NULL;

    qcrypto_block_create_options_init(&opts);
    opts.secret = test_secret(pass);
    opts.luks_version = version;
    opts.has_iter_time = true;
    opts.iter_time = 10;
    if (version == 2) {
        opts.has_kdf = true;
        opts.kdf = QCRYPTO_BLOCK_KDF_PBKDF2;    /* not 1 GiB of argon2 */
    }
    block = qcrypto_block_create(&opts, test_image_init, test_image_write,
                                 img, &error_abort);
    g_assert_nonnull(block);
    return g_steal_pointer(&img);
}

/* What the block layer's probe picks from the first len bytes of img. */
static const char *probe(const TestImage *img, size_t len)
{
    const BlockDriver *drv;

    g_assert_cmpuint(len, <=, img->buf->len);
    drv = bdrv_probe_all(img->buf->data, MIN(len, BDRV_PROBE_BUF_SIZE),
                         "image.img");
    return drv ? drv->format_name : NULL;
}

/* The LUKS version of img as the crypto layer opens it (header only). */
static int open_version(TestImage *img, Error **errp)
{
    g_autoptr(QCryptoBlock) block = test_image_open(img, NULL, 0, errp);
    g_autoptr(QCryptoBlockInfo) info = NULL;

    if (!block) {
        return -1;
    }
    info = qcrypto_block_get_info(block, errp);
    return info ? info->version : -1;
}

static void test_luks1(void)
{
    g_autoptr(TestImage) img = make_luks(1);

    g_assert_cmpstr(probe(img, img->buf->len), ==, "luks");
    /* A magic is certain; raw is the guess of last resort. */
    g_assert_cmpint(bdrv_luks.bdrv_probe(img->buf->data, img->buf->len,
                                         "x"), ==, 100);
    g_assert_cmpint(bdrv_raw.bdrv_probe(img->buf->data, img->buf->len,
                                        "x"), ==, 1);
    g_assert_cmpint(open_version(img, &error_abort), ==, 1);
}

static void test_luks2(void)
{
    g_autoptr(TestImage) img = make_luks(2);

    g_assert_cmpstr(probe(img, img->buf->len), ==, "luks");
    g_assert_cmpint(open_version(img, &error_abort), ==, 2);
}

/* luks_version 0 is the format's default: LUKS1, what QEMU opens too. */
static void test_create_default_version(void)
{
    g_autoptr(TestImage) img = make_luks(0);

    g_assert_cmpint(open_version(img, &error_abort), ==, 1);
}

static void test_create_unknown_version(void)
{
    QCryptoBlockCreateOptions opts;
    g_autoptr(TestImage) img = test_image_new();
    g_autoptr(Error) err = NULL;
    uint64_t offset;

    qcrypto_block_create_options_init(&opts);
    opts.secret = test_secret(pass);
    opts.luks_version = 3;
    g_assert_null(qcrypto_block_create(&opts, test_image_init,
                                       test_image_write, img, &err));
    g_assert_cmpstr(error_get_pretty(err), ==,
                    "Unsupported LUKS version 3 (1 or 2)");
    error_free_or_abort(&err);
    g_assert_cmpint(qcrypto_block_calculate_payload_offset(&opts, &offset,
                                                           &err), ==, -1);
    g_assert_cmpstr(error_get_pretty(err), ==,
                    "Unsupported LUKS version 3 (1 or 2)");
    /* nothing was written */
    g_assert_cmpuint(img->buf->len, ==, 0);
}

/*
 * The version field alone picks the driver: a LUKS1 header that says 2
 * goes to the LUKS2 driver (which finds no LUKS2 header in it), and the
 * reverse to the LUKS1 driver.
 */
static void test_version_picks_driver(void)
{
    g_autoptr(TestImage) v1 = make_luks(1);
    g_autoptr(TestImage) v2 = make_luks(2);
    g_autoptr(Error) err = NULL;

    v1->buf->data[7] = 2;
    g_assert_cmpstr(probe(v1, v1->buf->len), ==, "luks");
    g_assert_cmpint(open_version(v1, &err), ==, -1);
    test_error_expect(&err, "No valid LUKS2 header");

    v2->buf->data[7] = 1;
    g_assert_cmpstr(probe(v2, v2->buf->len), ==, "luks");
    g_assert_cmpint(open_version(v2, &err), ==, -1);
    /* LUKS1 reads LUKS2's header size and label as its cipher's name. */
    test_error_expect(&err, "Unsupported LUKS cipher");
}

/*
 * A version no driver has: not LUKS to the block layer's probe, and on an
 * explicit open the format's first driver (LUKS1) says why.
 */
static void test_unknown_version(void)
{
    g_autoptr(TestImage) img = make_luks(1);
    g_autoptr(Error) err = NULL;

    img->buf->data[7] = 3;
    g_assert_cmpstr(probe(img, img->buf->len), ==, "raw");
    g_assert_cmpint(open_version(img, &err), ==, -1);
    g_assert_cmpstr(error_get_pretty(err), ==,
                    "LUKS version 3 is not supported by the LUKS1 driver");
}

/*
 * A LUKS2 image whose primary header lost its magic: the block layer's
 * probe, which sees only the start of the file, takes it for raw, but
 * opened as LUKS the LUKS2 driver's probe() finds the secondary copy.
 */
static void test_luks2_damaged_primary(void)
{
    g_autoptr(TestImage) img = make_luks(2);
    g_autoptr(QCryptoBlock) block = NULL;

    memset(img->buf->data, 0, 6);
    g_assert_cmpstr(probe(img, img->buf->len), ==, "raw");
    block = test_image_open(img, NULL, 0, &error_abort);
    g_assert_nonnull(block);
    g_assert_nonnull(strstr(qcrypto_block_get_warning(block),
                            "primary header is damaged"));
}

/* Bytes no format claims: raw, whatever their length (even none). */
static void test_raw_fallback(void)
{
    static const uint8_t text[] = "just some data, no header";
    g_autofree uint8_t *zero = g_malloc0(BDRV_PROBE_BUF_SIZE);
    const uint8_t empty[1] = { 0 };

    g_assert_true(bdrv_probe_all(zero, BDRV_PROBE_BUF_SIZE, "a.img") ==
                  &bdrv_raw);
    g_assert_true(bdrv_probe_all(text, sizeof(text), "a.luks") ==
                  &bdrv_raw);
    g_assert_true(bdrv_probe_all(empty, 0, "") == &bdrv_raw);
    /* Only the bytes count, not the name. */
    g_assert_cmpint(bdrv_luks.bdrv_probe(text, sizeof(text), "x.luks"), ==,
                    0);
}

/* A header cut short: the magic and the version (8 bytes) are needed. */
static void test_truncated(void)
{
    g_autoptr(TestImage) img = make_luks(1);
    g_autoptr(Error) err = NULL;

    g_assert_cmpstr(probe(img, 6), ==, "raw");
    g_assert_cmpstr(probe(img, 7), ==, "raw");
    g_assert_cmpstr(probe(img, 8), ==, "luks");

    /* Opened as LUKS, the LUKS1 driver says the header is cut short. */
    g_byte_array_set_size(img->buf, 100);
    g_assert_cmpint(open_version(img, &err), ==, -1);
    test_error_expect(&err, "too small for a LUKS header");
}

/* The same through bdrv_open() on files, with no format given. */
static void test_open_file(void)
{
    g_autofree char *dir = g_dir_make_tmp("test-block-probe-XXXXXX", NULL);
    g_autofree char *path = g_build_filename(dir, "img", NULL);
    static const int versions[] = { 1, 2 };

    for (size_t i = 0; i < G_N_ELEMENTS(versions); i++) {
        g_autoptr(TestImage) img = make_luks(versions[i]);
        g_autoptr(BlockDriverState) bs = NULL;
        g_autoptr(BlockImageInfo) info = NULL;

        g_assert_true(g_file_set_contents(path, (char *)img->buf->data,
                                          img->buf->len, NULL));
        bs = bdrv_open(path, NULL, NULL, BDRV_O_NO_IO, &error_abort);
        g_assert_cmpstr(bdrv_get_format_name(bs), ==, "luks");
        info = bdrv_get_image_info(bs, &error_abort);
        g_assert_cmpint(info->luks->version, ==, versions[i]);

        /* Seven bytes of it are no LUKS header: raw. */
        bdrv_close(g_steal_pointer(&bs));
        g_assert_true(g_file_set_contents(path, (char *)img->buf->data, 7,
                                          NULL));
        bs = bdrv_open(path, NULL, NULL, 0, &error_abort);
        g_assert_cmpstr(bdrv_get_format_name(bs), ==, "raw");
    }
    g_assert_cmpint(unlink(path), ==, 0);
    g_assert_cmpint(rmdir(dir), ==, 0);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/block/probe/luks1", test_luks1);
    g_test_add_func("/block/probe/luks2", test_luks2);
    g_test_add_func("/block/probe/raw-fallback", test_raw_fallback);
    g_test_add_func("/block/probe/truncated", test_truncated);
    g_test_add_func("/block/probe/open-file", test_open_file);
    g_test_add_func("/crypto/block/driver/version-picks-driver",
                    test_version_picks_driver);
    g_test_add_func("/crypto/block/driver/unknown-version",
                    test_unknown_version);
    g_test_add_func("/crypto/block/driver/luks2-damaged-primary",
                    test_luks2_damaged_primary);
    g_test_add_func("/crypto/block/driver/create-default-version",
                    test_create_default_version);
    g_test_add_func("/crypto/block/driver/create-unknown-version",
                    test_create_unknown_version);
    return g_test_run();
}
