/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * LUKS1 images made by other tools open and decrypt right: cryptsetup's
 * compatibility images (tests/ of cryptsetup 2.6.1, in
 * $QIL_TESTDATA/cryptsetup, see its README.md), including a LUKS 1.0-era
 * layout that qemu-img itself refuses.
 */
#include "luks-test-image.h"
#include "test-error.h"

static char *testdata;     /* $QIL_TESTDATA/cryptsetup, or NULL */
static char *luks1_dir;    /* luks1-images.tar.xz extracted, or NULL */

static char *testdata_file(const char *name)
{
    return g_build_filename(testdata, name, NULL);
}

static char *payload_sha256(QCryptoBlock *block, TestImage *img, size_t len)
{
    uint64_t off = qcrypto_block_get_payload_offset(block);
    g_autofree uint8_t *buf = g_memdup2(img->buf->data + off, len);

    g_assert_cmpuint(off + len, <=, img->buf->len);
    g_assert_cmpint(qcrypto_block_decrypt(block, 0, buf, len,
                                          &error_abort), ==, 0);
    return g_compute_checksum_for_data(G_CHECKSUM_SHA256, buf, len);
}

/* compatimage: aes-cbc-essiv:sha256, 128-bit key, cryptsetup 1.x era. */
static void test_compatimage(void)
{
    g_autofree char *path = NULL;
    g_autoptr(TestImage) img = NULL;
    g_autoptr(QCryptoBlock) block = NULL;
    g_autoptr(QCryptoBlockInfo) info = NULL;
    g_autoptr(Error) err = NULL;
    g_autofree char *sum = NULL;

    if (!testdata) {
        return;
    }
    path = testdata_file("compatimage.img.xz");
    img = test_image_load_xz(path);
    block = test_image_open(img, "compatkey", 0, &error_abort);

    info = qcrypto_block_get_info(block, &err);
    g_assert_cmpint(info->cipher_alg, ==, QCRYPTO_CIPHER_ALGO_AES_128);
    g_assert_cmpint(info->cipher_mode, ==, QCRYPTO_CIPHER_MODE_CBC);
    g_assert_cmpint(info->ivgen_alg, ==, QCRYPTO_IVGEN_ALGO_ESSIV);
    g_assert_cmpint(info->ivgen_hash_alg, ==, QCRYPTO_HASH_ALGO_SHA256);
    g_assert_cmpint(info->hash_alg, ==, QCRYPTO_HASH_ALGO_SHA256);
    g_assert_cmpuint(info->payload_offset, ==, 1032 * 512);
    g_assert_cmpstr(info->uuid, ==, "28632274-8c8a-493f-835b-da802e1c576b");

    /*
     * SHA-256 of the first 64 KiB of the payload as qemu-img 7.2 decrypts
     * it (qemu-img convert -O raw): an independent implementation.
     */
    sum = payload_sha256(block, img, 65536);
    g_assert_cmpstr(sum, ==, "835a93f88a857b651e40eb9cb623eb512f93573e875c"
                    "1765faa8e2bda0fcb3e0");
}

/*
 * The two other passphrases of cryptsetup's compat tests are not in the
 * image: its test script adds them with luksAddKey. We do the same with
 * amend, then each of the three opens.
 */
static void test_compatimage_other_slots(void)
{
    static const char *const extra[] = { "93R4P4pIqAH8", "mymJeD8ivEhE" };
    g_autofree char *path = NULL;
    g_autoptr(TestImage) img = NULL;
    g_autoptr(QCryptoBlock) block = NULL;
    g_autoptr(Error) err = NULL;

    if (!testdata) {
        return;
    }
    path = testdata_file("compatimage.img.xz");
    img = test_image_load_xz(path);
    block = test_image_open(img, NULL, 0, &error_abort);

    for (size_t i = 0; i < G_N_ELEMENTS(extra); i++) {
        QCryptoBlockAmendOptions o = {
            .state = QCRYPTO_BLOCK_AMEND_STATE_ACTIVE,
            .has_old_secret = true, .old_secret = test_secret("compatkey"),
            .has_new_secret = true, .new_secret = test_secret(extra[i]),
            .has_iter_time = true, .iter_time = 10,
        };
        g_autoptr(QCryptoBlock) before = NULL;

        before = test_image_open(img, extra[i], 0, &err);
        g_assert_null(before);
        test_error_expect(&err, "Invalid password, cannot unlock any keyslot");

        g_assert_cmpint(qcrypto_block_amend_options(block, test_image_read,
                                                    test_image_write, NULL,
                                                    img,
                                                    &o, false,
                                                    &error_abort), ==, 0);
    }
    for (size_t i = 0; i < G_N_ELEMENTS(extra); i++) {
        g_autoptr(QCryptoBlock) after = test_image_open(img, extra[i], 0,
                                                        &error_abort);

        g_assert_nonnull(after);
    }
    {
        g_autoptr(QCryptoBlock) after = test_image_open(img, "compatkey", 0,
                                                        &error_abort);

        g_assert_nonnull(after);
    }
}

/*
 * LUKS 1.0-era header: key material from sector 2 (inside what later
 * tools reserve for the header area), 10 master key digest iterations.
 * qemu-img refuses it ("Keyslot 0 is overlapping with the LUKS header");
 * the spec allows it, and so do we.
 */
static void test_compatv10image(void)
{
    g_autofree char *path = NULL;
    g_autoptr(TestImage) img = NULL;
    g_autoptr(QCryptoBlock) block = NULL;
    g_autoptr(QCryptoBlockInfo) info = NULL;
    g_autoptr(Error) err = NULL;
    g_autofree char *sum = NULL;

    if (!testdata) {
        return;
    }
    path = testdata_file("compatv10image.img.xz");
    img = test_image_load_xz(path);

    block = test_image_open(img, "wrongkey", 0, &err);
    test_error_expect(&err, "Invalid password, cannot unlock any keyslot");

    block = test_image_open(img, "compatkey", 0, &error_abort);
    info = qcrypto_block_get_info(block, &err);
    g_assert_cmpint(info->cipher_alg, ==, QCRYPTO_CIPHER_ALGO_AES_128);
    g_assert_cmpint(info->cipher_mode, ==, QCRYPTO_CIPHER_MODE_CBC);
    g_assert_cmpint(info->ivgen_alg, ==, QCRYPTO_IVGEN_ALGO_PLAIN);
    g_assert_false(info->has_ivgen_hash_alg);
    g_assert_cmpint(info->hash_alg, ==, QCRYPTO_HASH_ALGO_SHA1);
    g_assert_cmpuint(info->master_key_iters, ==, 10);
    g_assert_cmpuint(info->payload_offset, ==, 1010 * 512);
    g_assert_true(info->slots[0].active);
    g_assert_cmpuint(info->slots[0].key_offset, ==, 2 * 512);
    g_assert_cmpuint(info->slots[1].key_offset, ==, 128 * 512);
    /* The whole payload decrypts (the master key digest matched). */
    sum = payload_sha256(block, img, img->buf->len - info->payload_offset);
    g_assert_nonnull(sum);
}

/*
 * luks1-images: 12 images of cryptsetup's test suite, one per cipher spec
 * and hash, unlocked by a 25000-byte binary key file. Each payload holds a
 * FAT file system whose volume serial number is DEAD-BABE.
 */
static void test_luks1_image(gconstpointer data)
{
    const char *name = data;
    g_autofree char *path = g_build_filename(luks1_dir, name, NULL);
    g_autofree char *keypath = g_build_filename(luks1_dir, "keyfile1", NULL);
    g_autofree gchar *key = NULL;
    gsize keylen;
    g_autoptr(TestImage) img = test_image_load(path);
    QCryptoBlockOpenOptions opts = {
        .format = QCRYPTO_BLOCK_FORMAT_LUKS,
        .size = img->buf->len,
    };
    g_autoptr(QCryptoBlock) block = NULL;
    g_autoptr(Error) err = NULL;
    uint8_t boot[512];
    uint64_t off;
    uint16_t fat16_size;
    size_t serial_at;
    uint32_t serial;

    g_assert_true(g_file_get_contents(keypath, &key, &keylen, NULL));
    g_assert_cmpuint(keylen, ==, 25000);
    opts.secret = (QCryptoBlockSecret) { (uint8_t *)key, keylen };
    block = qcrypto_block_open(&opts, test_image_read, img, 0, &error_abort);

    off = qcrypto_block_get_payload_offset(block);
    g_assert_cmpuint(off, ==, 4096 * 512);
    memcpy(boot, img->buf->data + off, sizeof(boot));
    g_assert_cmpint(qcrypto_block_decrypt(block, 0, boot, sizeof(boot), &err),
                    ==, 0);

    /* FAT boot sector (Microsoft's FAT specification, "BPB"). */
    g_assert_cmphex(boot[510], ==, 0x55);
    g_assert_cmphex(boot[511], ==, 0xaa);
    fat16_size = boot[22] | boot[23] << 8;      /* BPB_FATSz16 */
    /* BS_VolID: offset 39 on FAT12/16, 67 on FAT32 (BPB_FATSz16 == 0). */
    serial_at = fat16_size ? 39 : 67;
    g_assert_cmphex(boot[serial_at - 1], ==, 0x29);     /* BS_BootSig */
    serial = boot[serial_at] | boot[serial_at + 1] << 8 |
        boot[serial_at + 2] << 16 | (uint32_t)boot[serial_at + 3] << 24;
    g_assert_cmphex(serial, ==, 0xDEADBABE);
}

static char *extract_luks1_images(void)
{
    g_autofree char *tarball = testdata_file("luks1-images.tar.xz");
    char *dir = g_dir_make_tmp("qil-luks1-XXXXXX", NULL);
    const char *argv[] = { "tar", "-xJf", tarball, "-C", dir, NULL };

    g_assert_nonnull(dir);
    test_run(argv);
    return dir;
}

static gint compare_names(gconstpointer a, gconstpointer b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void test_no_testdata(void)
{
    g_test_skip("no cryptsetup test images: QIL_TESTDATA unset or empty");
}

int main(int argc, char **argv)
{
    g_autofree char *tmpdir = NULL;
    const char *root = g_getenv("QIL_TESTDATA");
    int ret;

    g_test_init(&argc, &argv, NULL);

    if (root) {
        testdata = g_build_filename(root, "cryptsetup", NULL);
        if (!g_file_test(testdata, G_FILE_TEST_IS_DIR)) {
            g_clear_pointer(&testdata, g_free);
        }
    }
    if (!testdata) {
        g_test_add_func("/crypto/block/luks/compat/skipped",
                        test_no_testdata);
        return g_test_run();
    }

    g_test_add_func("/crypto/block/luks/compat/compatimage",
                    test_compatimage);
    g_test_add_func("/crypto/block/luks/compat/compatimage-other-slots",
                    test_compatimage_other_slots);
    g_test_add_func("/crypto/block/luks/compat/compatv10image",
                    test_compatv10image);

    tmpdir = extract_luks1_images();
    luks1_dir = g_build_filename(tmpdir, "luks1-images", NULL);
    {
        g_autoptr(GDir) dir = g_dir_open(luks1_dir, 0, NULL);
        g_autoptr(GPtrArray) names = g_ptr_array_new_with_free_func(g_free);
        const char *name;

        g_assert_nonnull(dir);
        while ((name = g_dir_read_name(dir))) {
            if (g_str_has_suffix(name, ".img")) {
                g_ptr_array_add(names, g_strdup(name));
            }
        }
        /* All 12 of the README, in a stable order. */
        g_assert_cmpuint(names->len, ==, 12);
        g_ptr_array_sort(names, compare_names);
        for (guint i = 0; i < names->len; i++) {
            g_autofree char *testpath =
                g_strdup_printf("/crypto/block/luks/compat/luks1-images/%s",
                                (char *)names->pdata[i]);

            g_test_add_data_func_full(testpath,
                                      g_strdup(names->pdata[i]),
                                      test_luks1_image, g_free);
        }
    }
    ret = g_test_run();
    test_rm_rf(tmpdir);
    g_free(luks1_dir);
    g_free(testdata);
    return ret;
}
