/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * LUKS2 through the public interface (crypto/block.h), checked against
 * cryptsetup: images we create pass `cryptsetup luksDump` and
 * `open --test-passphrase`; the volume key cryptsetup prints decrypts our
 * payload sector by sector with the bare cipher (an independent check of
 * the IV rule: 512-byte units whatever the sector size); slots cryptsetup
 * adds open here; `cryptsetup convert` to LUKS1 and back keeps the data;
 * amend adds and removes slots and refuses to remove the last.
 */
#include "crypto/luks2priv.h"
#include "luks2-testutil.h"
#include "test-error.h"

static const char pass[] = "a LUKS2 passphrase";

static int file_init(QCryptoBlock *block, uint64_t headerlen, void *opaque,
                     Error **errp)
{
    if (ftruncate(GPOINTER_TO_INT(opaque), headerlen) < 0) {
        error_setg_errno(errp, errno, "cannot size the image");
        return -1;
    }
    return 0;
}

/* A pattern that differs in every sector. */
static void fill_pattern(uint8_t *buf, size_t len, uint32_t seed)
{
    for (size_t i = 0; i < len; i++) {
        buf[i] = (uint8_t)(i * 31 + (i >> 9) * 7 + seed);
    }
}

typedef struct NewImage {
    char *dir;
    char *path;
    uint64_t payload_offset;
    size_t data_len;
    uint8_t *data;          /* the plaintext we wrote */
} NewImage;

/* Create a LUKS2 image with sector_size and kdf, and write data into it. */
static void new_image(NewImage *img, uint32_t sector_size,
                      QCryptoBlockKDF kdf)
{
    QCryptoBlockCreateOptions opts;
    g_autoptr(QCryptoBlock) block = NULL;
    g_autofree uint8_t *buf = NULL;
    int fd;

    qcrypto_block_create_options_init(&opts);
    opts.format = QCRYPTO_BLOCK_FORMAT_LUKS;
    opts.luks_version = 2;
    opts.secret = (QCryptoBlockSecret) { (const uint8_t *)pass,
                                         strlen(pass) };
    opts.sector_size = sector_size;
    opts.has_kdf = true;
    opts.kdf = kdf;
    /* argon2 costs only: with pbkdf2 they are an error, as cryptsetup */
    if (kdf != QCRYPTO_BLOCK_KDF_PBKDF2) {
        opts.kdf_memory = 64;
        opts.kdf_parallel = 1;
    }
    opts.has_iter_time = true;
    opts.iter_time = 20;
    opts.label = "qil-test";

    img->dir = test_scratch_new();
    img->path = g_build_filename(img->dir, "new.img", NULL);
    fd = open(img->path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    g_assert_cmpint(fd, >=, 0);
    block = qcrypto_block_create(&opts, file_init, test_file_write,
                                 GINT_TO_POINTER(fd), &error_abort);
    g_assert_nonnull(block);
    g_assert_cmpuint(qcrypto_block_get_sector_size(block), ==,
                     sector_size ? sector_size : 4096);
    img->payload_offset = qcrypto_block_get_payload_offset(block);
    /* cryptsetup 2.6's default layout */
    g_assert_cmpuint(img->payload_offset, ==, 16 * 1024 * 1024);

    img->data_len = 256 * 1024;
    img->data = g_malloc(img->data_len);
    fill_pattern(img->data, img->data_len, sector_size);
    buf = g_memdup2(img->data, img->data_len);
    g_assert_cmpint(qcrypto_block_encrypt(block, 0, buf, img->data_len,
                                          &error_abort), ==, 0);
    g_assert_true(memcmp(buf, img->data, 64) != 0);
    g_assert_cmpint(pwrite(fd, buf, img->data_len, img->payload_offset), ==,
                    (ssize_t)img->data_len);
    close(fd);
}

static void new_image_free(NewImage *img)
{
    test_scratch_free(img->dir);
    g_free(img->path);
    g_free(img->data);
}

static QCryptoBlock *open_image(const char *path, const char *secret,
                                unsigned flags, int *fdp, Error **errp)
{
    QCryptoBlockOpenOptions opts = {
        .format = QCRYPTO_BLOCK_FORMAT_LUKS,
        .secret = { (const uint8_t *)secret, strlen(secret) },
    };
    int fd = test_open(path, O_RDWR);
    QCryptoBlock *block = qcrypto_block_open(&opts, test_file_read,
                                             GINT_TO_POINTER(fd), flags,
                                             errp);

    if (fdp) {
        *fdp = fd;
    } else {
        close(fd);
    }
    return block;
}

/* Read back through the block layer's decrypt: the data we wrote. */
static void check_data(const char *path, const char *secret,
                       const NewImage *img)
{
    g_autoptr(Error) err = NULL;
    int fd;
    g_autoptr(QCryptoBlock) block = open_image(path, secret, 0, &fd,
                                               &error_abort);
    g_autofree uint8_t *buf = g_malloc(img->data_len);
    uint64_t off;

    off = qcrypto_block_get_payload_offset(block);
    g_assert_cmpint(pread(fd, buf, img->data_len, off), ==,
                    (ssize_t)img->data_len);
    close(fd);
    g_assert_cmpint(qcrypto_block_decrypt(block, 0, buf, img->data_len,
                                          &err), ==, 0);
    g_assert_cmpmem(buf, img->data_len, img->data, img->data_len);
}

/*
 * The independent check: AES-XTS with the key cryptsetup prints, IV the
 * little-endian count of 512-byte units (plain64), one cipher call per
 * sector; no block layer, no IV generator.
 */
static void check_with_volume_key(const NewImage *img, uint32_t sector_size)
{
    g_autofree char *keyfile = g_build_filename(img->dir, "vk.key", NULL);
    g_autoptr(GBytes) vk = NULL;
    g_autoptr(QCryptoCipher) cipher = NULL;
    g_autoptr(Error) err = NULL;
    g_autofree uint8_t *buf = g_malloc(img->data_len);
    size_t nkey;
    const uint8_t *key;
    int fd = test_open(img->path, O_RDONLY);

    test_write_file(keyfile, pass, strlen(pass));
    vk = test_cryptsetup_volume_key(img->path, keyfile);
    key = g_bytes_get_data(vk, &nkey);
    g_assert_cmpuint(nkey, ==, 64);
    cipher = qcrypto_cipher_new(QCRYPTO_CIPHER_ALGO_AES_256,
                                QCRYPTO_CIPHER_MODE_XTS, key, nkey,
                                &error_abort);

    g_assert_cmpint(pread(fd, buf, img->data_len, img->payload_offset), ==,
                    (ssize_t)img->data_len);
    close(fd);
    for (size_t off = 0; off < img->data_len; off += sector_size) {
        uint8_t iv[16] = { 0 };
        uint64_t unit = GUINT64_TO_LE(off / 512);

        memcpy(iv, &unit, sizeof(unit));
        g_assert_cmpint(qcrypto_cipher_setiv(cipher, iv, 16, &err), ==, 0);
        g_assert_cmpint(qcrypto_cipher_decrypt(cipher, buf + off, buf + off,
                                               sector_size, &err), ==, 0);
    }
    g_assert_cmpmem(buf, img->data_len, img->data, img->data_len);
}

static bool cryptsetup_opens(const char *dir, const char *path,
                             const char *secret)
{
    g_autofree char *keyfile = g_build_filename(dir, "try.key", NULL);
    const char *argv[] = {
        "cryptsetup", "open", "--test-passphrase", "--key-file", keyfile,
        path, NULL,
    };
    g_autofree char *out = NULL;

    test_write_file(keyfile, secret, strlen(secret));
    out = test_run(argv);
    return out != NULL;
}

static void test_create_interop(gconstpointer data)
{
    uint32_t sector_size = GPOINTER_TO_UINT(data);
    NewImage img;
    g_autofree char *dump = NULL;
    g_autofree char *oldkey = NULL, *newkey = NULL, *out = NULL;

    if (!test_have_cryptsetup()) {
        return;
    }
    new_image(&img, sector_size, QCRYPTO_BLOCK_KDF_ARGON2ID);
    {
        const char *argv[] = { "cryptsetup", "luksDump", img.path, NULL };

        dump = test_run(argv);
        g_assert_nonnull(dump);
        g_assert_nonnull(strstr(dump, "Version:       \t2"));
        g_assert_nonnull(strstr(dump, "Label:         \tqil-test"));
        g_assert_nonnull(strstr(dump, "argon2id"));
    }
    g_assert_true(cryptsetup_opens(img.dir, img.path, pass));
    g_assert_false(cryptsetup_opens(img.dir, img.path, "wrong"));
    check_data(img.path, pass, &img);
    check_with_volume_key(&img, sector_size);

    /* A slot cryptsetup adds opens here and reads the same data. */
    oldkey = g_build_filename(img.dir, "old.key", NULL);
    newkey = g_build_filename(img.dir, "new.key", NULL);
    test_write_file(oldkey, pass, strlen(pass));
    test_write_file(newkey, "added by cryptsetup", 19);
    {
        const char *argv[] = {
            "cryptsetup", "luksAddKey", "--batch-mode", "--pbkdf", "argon2i",
            "--pbkdf-force-iterations", "4", "--pbkdf-memory", "32",
            "--key-file", oldkey, img.path, newkey, NULL,
        };
        out = test_run(argv);
        g_assert_nonnull(out);
    }
    check_data(img.path, "added by cryptsetup", &img);
    new_image_free(&img);
}

/* cryptsetup convert to LUKS1 (pbkdf2, 512-byte sectors) and back. */
static void test_convert_luks1(void)
{
    NewImage img;
    const char *argv1[] = { "cryptsetup", "convert", "--batch-mode",
                            "--type", "luks1", NULL, NULL };
    const char *argv2[] = { "cryptsetup", "convert", "--batch-mode",
                            "--type", "luks2", NULL, NULL };
    g_autofree char *out1 = NULL, *out2 = NULL;

    if (!test_have_cryptsetup()) {
        return;
    }
    new_image(&img, 512, QCRYPTO_BLOCK_KDF_PBKDF2);
    argv1[5] = img.path;
    argv2[5] = img.path;
    out1 = test_run(argv1);
    g_assert_nonnull(out1);
    check_data(img.path, pass, &img);   /* now LUKS1, by the LUKS1 driver */
    out2 = test_run(argv2);
    g_assert_nonnull(out2);
    check_data(img.path, pass, &img);
    new_image_free(&img);
}

static void test_info(void)
{
    NewImage img;
    g_autoptr(QCryptoBlock) block = NULL;
    g_autoptr(QCryptoBlockInfo) info = NULL;

    new_image(&img, 0, QCRYPTO_BLOCK_KDF_ARGON2ID);
    /* No secret needed for the header. */
    block = open_image(img.path, "", QCRYPTO_BLOCK_OPEN_NO_IO, NULL,
                       &error_abort);
    info = qcrypto_block_get_info(block, &error_abort);
    g_assert_cmpint(info->version, ==, 2);
    g_assert_cmpint(info->cipher_alg, ==, QCRYPTO_CIPHER_ALGO_AES_256);
    g_assert_cmpint(info->cipher_mode, ==, QCRYPTO_CIPHER_MODE_XTS);
    g_assert_cmpint(info->ivgen_alg, ==, QCRYPTO_IVGEN_ALGO_PLAIN64);
    g_assert_cmpuint(info->sector_size, ==, 4096);
    g_assert_cmpuint(info->payload_offset, ==, 16 * 1024 * 1024);
    g_assert_cmpuint(info->metadata_size, ==, 16384);
    g_assert_cmpuint(info->keyslots_size, ==, 16 * 1024 * 1024 - 32768);
    g_assert_cmpstr(info->label, ==, "qil-test");
    g_assert_cmpuint(strlen(info->uuid), ==, 36);
    g_assert_cmpuint(info->nslots, ==, 1);
    g_assert_true(info->slots[0].active);
    g_assert_true(info->slots[0].bound);
    g_assert_cmpint(info->slots[0].kdf, ==, QCRYPTO_BLOCK_KDF_ARGON2ID);
    g_assert_cmpuint(info->slots[0].kdf_memory, <=, 64);
    g_assert_cmpuint(info->slots[0].key_offset, ==, 32768);
    g_assert_cmpuint(info->slots[0].stripes, ==, 4000);
    g_assert_cmpuint(info->nsegments, ==, 1);
    g_assert_cmpstr(info->segments[0].encryption, ==, "aes-xts-plain64");
    g_assert_true(info->segments[0].size_dynamic);
    g_assert_cmpuint(info->ntokens, ==, 0);
    new_image_free(&img);
}

static void test_amend(void)
{
    NewImage img;
    g_autoptr(Error) err = NULL;
    g_autoptr(QCryptoBlock) block = NULL;
    QCryptoBlockAmendOptions add = {
        .state = QCRYPTO_BLOCK_AMEND_STATE_ACTIVE,
        .has_new_secret = true,
        .new_secret = { (const uint8_t *)"second", 6 },
        .has_iter_time = true, .iter_time = 10,
        .has_kdf = true, .kdf = QCRYPTO_BLOCK_KDF_PBKDF2,
    };
    QCryptoBlockAmendOptions erase_first = {
        .state = QCRYPTO_BLOCK_AMEND_STATE_INACTIVE,
        .has_old_secret = true,
        .old_secret = { (const uint8_t *)pass, strlen(pass) },
    };
    QCryptoBlockAmendOptions erase_last = {
        .state = QCRYPTO_BLOCK_AMEND_STATE_INACTIVE,
        .has_keyslot = true, .keyslot = 1,
    };
    int fd;

    new_image(&img, 0, QCRYPTO_BLOCK_KDF_ARGON2ID);
    block = open_image(img.path, pass, 0, &fd, &error_abort);

    g_assert_cmpint(qcrypto_block_amend_options(block, test_file_read,
                                                test_file_write, NULL,
                                                GINT_TO_POINTER(fd), &add,
                                                false, &error_abort), ==, 0);
    g_assert_cmpint(qcrypto_block_amend_options(block, test_file_read,
                                                test_file_write, NULL,
                                                GINT_TO_POINTER(fd),
                                                &erase_first, false,
                                                &error_abort), ==, 0);
    g_assert_cmpint(qcrypto_block_amend_options(block, test_file_read,
                                                test_file_write, NULL,
                                                GINT_TO_POINTER(fd),
                                                &erase_last, false, &err),
                    ==, -1);
    g_assert_cmpstr(error_get_pretty(err), ==,
                    "Attempt to erase the only active keyslot 1 which will "
                    "erase all the data in the image irreversibly - "
                    "refusing operation");
    close(fd);

    check_data(img.path, "second", &img);
    if (test_have_cryptsetup()) {
        g_assert_true(cryptsetup_opens(img.dir, img.path, "second"));
        g_assert_false(cryptsetup_opens(img.dir, img.path, pass));
    }
    new_image_free(&img);
}

/* A damaged primary: opened from the secondary, and the user told. */
static void test_recover_primary(gconstpointer data)
{
    bool wipe = GPOINTER_TO_INT(data);
    NewImage img;
    g_autoptr(QCryptoBlock) block = NULL;
    int fd;

    new_image(&img, 0, QCRYPTO_BLOCK_KDF_PBKDF2);
    fd = test_open(img.path, O_RDWR);
    if (wipe) {
        /* Magic and all: only the secondary says this is LUKS2. */
        g_autofree uint8_t *zero = g_malloc0(16384);

        g_assert_cmpint(pwrite(fd, zero, 16384, 0), ==, 16384);
    } else {
        g_assert_cmpint(pwrite(fd, "}", 1, 4100), ==, 1);
    }
    close(fd);

    block = open_image(img.path, pass, 0, &fd, &error_abort);
    g_assert_nonnull(qcrypto_block_get_warning(block));
    g_test_message("%s", qcrypto_block_get_warning(block));
    g_assert_nonnull(strstr(qcrypto_block_get_warning(block),
                            "primary header is damaged"));

    /* A header rewrite (here: adding a slot) repairs the primary. */
    {
        QCryptoBlockAmendOptions add = {
            .state = QCRYPTO_BLOCK_AMEND_STATE_ACTIVE,
            .has_new_secret = true, .new_secret = { (const uint8_t *)"r", 1 },
            .has_kdf = true, .kdf = QCRYPTO_BLOCK_KDF_PBKDF2,
            .has_iter_time = true, .iter_time = 1,
        };
        g_autoptr(QCryptoBlock) again = NULL;

        g_assert_cmpint(qcrypto_block_amend_options(block, test_file_read,
                                                    test_file_write, NULL,
                                                    GINT_TO_POINTER(fd),
                                                    &add, false,
                                                    &error_abort), ==, 0);
        again = open_image(img.path, "r", 0, NULL, &error_abort);
        g_assert_null(qcrypto_block_get_warning(again));
    }
    close(fd);
    check_data(img.path, pass, &img);
    new_image_free(&img);
}

/*
 * iv_tweak (LUKS2 spec, "segments" object) moves every IV: set it to 8 units
 * (one 4096-byte sector) in the JSON, and the payload we wrote with tweak 0
 * must now read as if shifted, as the bare cipher computes it.
 */
static void test_iv_tweak(void)
{
    NewImage img;
    g_autoptr(Error) err = NULL;
    g_autoptr(QCryptoLUKS2Header) hdr = NULL;
    g_autoptr(QCryptoLUKS2Metadata) md = NULL;
    g_autoptr(QCryptoBlock) block = NULL;
    g_autofree char *json = NULL;
    g_autofree uint8_t *buf = NULL, *want = NULL;
    int fd;

    new_image(&img, 4096, QCRYPTO_BLOCK_KDF_PBKDF2);
    fd = test_open(img.path, O_RDWR);
    hdr = qcrypto_luks2_header_read(NULL, test_file_read,
                                    GINT_TO_POINTER(fd), NULL, &error_abort);
    md = qcrypto_luks2_metadata_parse(hdr->json, hdr->bin.hdr_size,
                                      &error_abort);
    json_object_set_string_member(
        json_object_get_object_member(
            json_object_get_object_member(json_node_get_object(md->root),
                                          "segments"), "0"),
        "iv_tweak", "8");
    g_assert_cmpint(qcrypto_luks2_metadata_reload(md, &error_abort), ==, 0);
    json = qcrypto_luks2_metadata_to_json(md);
    g_assert_cmpint(qcrypto_luks2_header_write(hdr, json, NULL,
                                               test_file_write, NULL,
                                               GINT_TO_POINTER(fd),
                                               &error_abort), ==, 0);
    close(fd);

    /* Encrypt at payload offset 0 now == encrypt at 4096 before. */
    block = open_image(img.path, pass, 0, NULL, &error_abort);
    buf = g_memdup2(img.data + 4096, 4096);
    g_assert_cmpint(qcrypto_block_encrypt(block, 0, buf, 4096, &err), ==, 0);
    want = g_malloc(4096);
    fd = test_open(img.path, O_RDONLY);
    g_assert_cmpint(pread(fd, want, 4096, img.payload_offset + 4096), ==,
                    4096);
    close(fd);
    g_assert_cmpmem(buf, 4096, want, 4096);
    new_image_free(&img);
}

/* Hostile: the file ends before what the header points at. */
static void test_truncated_image(void)
{
    NewImage img;
    g_autoptr(Error) err = NULL;
    g_autoptr(QCryptoBlock) block = NULL;
    QCryptoBlockOpenOptions opts = {
        .format = QCRYPTO_BLOCK_FORMAT_LUKS,
        .secret = { (const uint8_t *)pass, strlen(pass) },
    };
    int fd;

    new_image(&img, 0, QCRYPTO_BLOCK_KDF_PBKDF2);
    g_assert_cmpint(truncate(img.path, 40960), ==, 0);
    fd = test_open(img.path, O_RDONLY);
    opts.size = 40960;
    block = qcrypto_block_open(&opts, test_file_read, GINT_TO_POINTER(fd),
                               0, &err);
    g_assert_null(block);
    g_assert_nonnull(strstr(error_get_pretty(err), "beyond the end"));
    error_free_or_abort(&err);
    /* Without the size: the key-slot read fails, with a clear error. */
    opts.size = 0;
    block = qcrypto_block_open(&opts, test_file_read, GINT_TO_POINTER(fd),
                               0, &err);
    g_assert_null(block);
    g_assert_nonnull(strstr(error_get_pretty(err), "cannot read LUKS2 key "
                            "slot 0"));
    close(fd);
    new_image_free(&img);
}

/* A detached header: payload offset 0; the header file opens alone. */
static void test_detached(void)
{
    QCryptoBlockCreateOptions opts;
    g_autoptr(Error) err = NULL;
    g_autoptr(QCryptoBlock) block = NULL;
    g_autoptr(QCryptoBlock) opened = NULL;
    g_autofree char *dir = test_scratch_new();
    g_autofree char *path = g_build_filename(dir, "hdr.img", NULL);
    QCryptoBlockOpenOptions oo = {
        .format = QCRYPTO_BLOCK_FORMAT_LUKS,
        .secret = { (const uint8_t *)pass, strlen(pass) },
    };
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);

    qcrypto_block_create_options_init(&opts);
    opts.luks_version = 2;
    opts.secret = oo.secret;
    opts.detached_header = true;
    opts.has_kdf = true;
    opts.kdf = QCRYPTO_BLOCK_KDF_PBKDF2;
    opts.has_iter_time = true;
    opts.iter_time = 1;
    block = qcrypto_block_create(&opts, file_init, test_file_write,
                                 GINT_TO_POINTER(fd), &error_abort);
    g_assert_cmpuint(qcrypto_block_get_payload_offset(block), ==, 0);

    /* Without the detached flag it is refused, with the reason. */
    opened = qcrypto_block_open(&oo, test_file_read, GINT_TO_POINTER(fd), 0,
                                &err);
    g_assert_null(opened);
    g_assert_nonnull(strstr(error_get_pretty(err), "detached header"));
    error_free_or_abort(&err);
    opened = qcrypto_block_open(&oo, test_file_read, GINT_TO_POINTER(fd),
                                QCRYPTO_BLOCK_OPEN_DETACHED, &error_abort);
    g_assert_cmpuint(qcrypto_block_get_payload_offset(opened), ==, 0);
    close(fd);
    if (test_have_cryptsetup()) {
        const char *argv[] = { "cryptsetup", "luksDump", path, NULL };
        g_autofree char *out = test_run(argv);

        g_assert_nonnull(out);
        g_assert_nonnull(strstr(out, "offset: 0 [bytes]"));
    }
    test_scratch_free(g_steal_pointer(&dir));
}

/*
 * An image cryptsetup made and whose slots cryptsetup changed (a slot
 * added, the first one killed): we open it with the new key, write data,
 * and cryptsetup's volume key reads it back with the bare cipher.
 */
static void test_cryptsetup_image_data(gconstpointer data)
{
    const char *sector_size = data;
    NewImage img = { 0 };
    g_autofree char *key0 = NULL, *key1 = NULL;
    g_autoptr(Error) err = NULL;
    g_autoptr(QCryptoBlock) block = NULL;
    g_autofree uint8_t *buf = NULL;
    int fd;

    if (!test_have_cryptsetup()) {
        return;
    }
    img.dir = test_scratch_new();
    img.path = g_build_filename(img.dir, "cs.img", NULL);
    key0 = g_build_filename(img.dir, "k0", NULL);
    key1 = g_build_filename(img.dir, "k1", NULL);
    test_write_file(key0, "first", 5);
    test_write_file(key1, pass, strlen(pass));
    fd = open(img.path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    g_assert_cmpint(ftruncate(fd, 20 * 1024 * 1024), ==, 0);
    close(fd);
    {
        const char *format[] = {
            "cryptsetup", "luksFormat", "--type", "luks2", "--batch-mode",
            "--pbkdf", "argon2id", "--pbkdf-force-iterations", "4",
            "--pbkdf-memory", "32", "--sector-size", sector_size,
            "--key-file", key0, img.path, NULL,
        };
        const char *add[] = {
            "cryptsetup", "luksAddKey", "--batch-mode", "--pbkdf", "pbkdf2",
            "--pbkdf-force-iterations", "1000", "--key-file", key0,
            img.path, key1, NULL,
        };
        const char *kill[] = {
            "cryptsetup", "luksKillSlot", "--batch-mode", "--key-file", key1,
            img.path, "0", NULL,
        };
        g_autofree char *o1 = test_run(format);
        g_autofree char *o2 = NULL, *o3 = NULL;

        g_assert_nonnull(o1);
        o2 = test_run(add);
        g_assert_nonnull(o2);
        o3 = test_run(kill);
        g_assert_nonnull(o3);
    }

    block = open_image(img.path, pass, 0, &fd, &error_abort);
    img.payload_offset = qcrypto_block_get_payload_offset(block);
    img.data_len = 128 * 1024;
    img.data = g_malloc(img.data_len);
    fill_pattern(img.data, img.data_len, 99);
    buf = g_memdup2(img.data, img.data_len);
    g_assert_cmpint(qcrypto_block_encrypt(block, 0, buf, img.data_len, &err),
                    ==, 0);
    g_assert_cmpint(pwrite(fd, buf, img.data_len, img.payload_offset), ==,
                    (ssize_t)img.data_len);
    close(fd);

    check_data(img.path, pass, &img);
    check_with_volume_key(&img, atoi(sector_size));
    new_image_free(&img);
}

/*
 * The size rule (docs/luks.md, "Size rounding"): LUKS2 gets 4096-byte
 * sectors only where the size is whole 4096-byte sectors, as cryptsetup
 * 2.6 falls back to 512; a requested size is kept; LUKS1 is 512.
 */
static void test_size_rule(void)
{
    static const struct {
        int version;
        uint32_t requested;
        uint64_t size;
        uint32_t sector;
        uint64_t payload;
    } cases[] = {
        { 2, 0, 0, 4096, 0 },
        { 2, 0, 1 << 20, 4096, 1 << 20 },
        { 2, 0, 1000448, 512, 1000448 },
        { 2, 0, 1000001, 512, 1000448 },
        { 2, 4096, 1000448, 4096, 1003520 },
        { 2, 2048, 1000001, 2048, 1001472 },
        { 2, 1024, 1 << 20, 1024, 1 << 20 },
        { 1, 0, 1 << 20, 512, 1 << 20 },
        { 1, 0, 1000001, 512, 1000448 },
        { 0, 0, 4096, 512, 4096 },          /* 0: LUKS1 */
    };

    for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
        QCryptoBlockCreateOptions opts = { 0 };

        qcrypto_block_create_options_init(&opts);
        opts.luks_version = cases[i].version;
        opts.sector_size = cases[i].requested;
        opts.size = cases[i].size;
        g_assert_cmpuint(qcrypto_block_create_sector_size(&opts), ==,
                         cases[i].sector);
        g_assert_cmpuint(qcrypto_block_create_payload_size(&opts), ==,
                         cases[i].payload);
    }
    g_assert_cmpuint(qcrypto_block_round_to_sectors(0, 4096), ==, 0);
    g_assert_cmpuint(qcrypto_block_round_to_sectors(1, 512), ==, 512);
    g_assert_cmpuint(qcrypto_block_round_to_sectors(4096, 4096), ==, 4096);
    g_assert_cmpuint(qcrypto_block_round_to_sectors(4097, 4096), ==, 8192);
}

/* Options that do not apply are errors naming the option (no I/O here). */
static void test_option_errors(void)
{
    static const struct {
        int version;
        const char *name;
        bool has_kdf;
        QCryptoBlockKDF kdf;
        uint32_t memory, parallel, sector;
        const char *label;
        const char *error;
    } cases[] = {
        { 1, "argon2id", true, QCRYPTO_BLOCK_KDF_ARGON2ID, 0, 0, 0, NULL,
          "Option 'kdf=argon2id' needs luks-version=2" },
        { 1, "memory", false, 0, 65536, 0, 0, NULL,
          "Option 'kdf-memory' needs luks-version=2" },
        { 1, "parallel", false, 0, 0, 2, 0, NULL,
          "Option 'kdf-parallel' needs luks-version=2" },
        { 1, "sector", false, 0, 0, 0, 4096, NULL,
          "Option 'sector-size' needs luks-version=2" },
        { 1, "label", false, 0, 0, 0, 0, "x",
          "Option 'label' needs luks-version=2" },
        { 2, "memory-max", false, 0, 4u * 1024 * 1024 + 1, 0, 0, NULL,
          "Option 'kdf-memory' 4194305 is too high (maximum is 4194304 KiB)" },
        { 2, "memory-min", false, 0, 31, 0, 0, NULL,
          "(minimum is 32 KiB)" },
        { 2, "parallel-max", false, 0, 0, 17, 0, NULL,
          "Option 'kdf-parallel' 17 is too high (maximum is 16)" },
        { 2, "pbkdf2-memory", true, QCRYPTO_BLOCK_KDF_PBKDF2, 1024, 0, 0,
          NULL, "Option 'kdf-memory' is an argon2 cost" },
        { 2, "sector-8192", false, 0, 0, 0, 8192, NULL,
          "Option 'sector-size' 8192 is not 512" },
        { 2, "label-48", false, 0, 0, 0, 0,
          "0123456789012345678901234567890123456789012345678",
          "Option 'label'" },
    };

    for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
        QCryptoBlockCreateOptions opts = { 0 };
        g_autoptr(Error) err = NULL;
        uint64_t offset;

        g_test_message("case %s", cases[i].name);
        qcrypto_block_create_options_init(&opts);
        opts.luks_version = cases[i].version;
        opts.has_kdf = cases[i].has_kdf;
        opts.kdf = cases[i].kdf;
        opts.kdf_memory = cases[i].memory;
        opts.kdf_parallel = cases[i].parallel;
        opts.sector_size = cases[i].sector;
        opts.label = cases[i].label;
        g_assert_cmpint(qcrypto_block_calculate_payload_offset(&opts, &offset,
                                                               &err), ==, -1);
        test_error_expect(&err, cases[i].error);
    }
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_data_func("/crypto/block-luks2/create-interop/512",
                         GUINT_TO_POINTER(512), test_create_interop);
    g_test_add_data_func("/crypto/block-luks2/create-interop/4096",
                         GUINT_TO_POINTER(4096), test_create_interop);
    g_test_add_func("/crypto/block-luks2/convert-luks1", test_convert_luks1);
    g_test_add_data_func("/crypto/block-luks2/cryptsetup-image-data/512",
                         "512", test_cryptsetup_image_data);
    g_test_add_data_func("/crypto/block-luks2/cryptsetup-image-data/4096",
                         "4096", test_cryptsetup_image_data);
    g_test_add_func("/crypto/block-luks2/info", test_info);
    g_test_add_func("/crypto/block-luks2/size-rule", test_size_rule);
    g_test_add_func("/crypto/block-luks2/option-errors", test_option_errors);
    g_test_add_func("/crypto/block-luks2/amend", test_amend);
    g_test_add_data_func("/crypto/block-luks2/recover-primary/damaged",
                         GINT_TO_POINTER(false), test_recover_primary);
    g_test_add_data_func("/crypto/block-luks2/recover-primary/wiped",
                         GINT_TO_POINTER(true), test_recover_primary);
    g_test_add_func("/crypto/block-luks2/iv-tweak", test_iv_tweak);
    g_test_add_func("/crypto/block-luks2/truncated", test_truncated_image);
    g_test_add_func("/crypto/block-luks2/detached", test_detached);
    return g_test_run();
}
