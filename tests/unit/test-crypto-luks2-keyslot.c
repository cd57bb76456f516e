/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * LUKS2 key slots against cryptsetup: images it made (its test images,
 * and new ones from `cryptsetup luksFormat --type luks2` with argon2id,
 * argon2i and pbkdf2, 512 and 4096-byte sectors, several metadata sizes)
 * unlock to the volume key `cryptsetup luksDump --dump-volume-key`
 * prints; key slots we add open in cryptsetup, and slots cryptsetup adds
 * to images we rewrote open here; tokens survive our rewrites.
 *
 * The KDF costs are forced low (cryptsetup's --pbkdf-force-iterations,
 * --pbkdf-memory) so that the tests stay fast.
 */
#include "crypto/luks2priv.h"
#include "crypto/secure-mem.h"
#include "luks2-testutil.h"

typedef struct Image {
    QCryptoLUKS2Header *hdr;
    QCryptoLUKS2Metadata *md;
    int fd;
} Image;

static void image_open(Image *img, const char *path)
{
    g_autofree char *warning = NULL;

    img->fd = test_open(path, O_RDWR);
    img->hdr = qcrypto_luks2_header_read(NULL, test_file_read,
                                         GINT_TO_POINTER(img->fd), &warning,
                                         &error_abort);
    g_assert_null(warning);
    img->md = qcrypto_luks2_metadata_parse(img->hdr->json,
                                           img->hdr->bin.hdr_size,
                                           &error_abort);
}

static void image_close(Image *img)
{
    qcrypto_luks2_metadata_free(img->md);
    qcrypto_luks2_header_free(img->hdr);
    close(img->fd);
}

static GBytes *image_unlock(Image *img, const char *pass, int *slot,
                            Error **errp)
{
    QCryptoBlockSecret secret = { (const uint8_t *)pass, strlen(pass) };
    g_autoptr(QCryptoSecureBuf) key = NULL;

    if (qcrypto_luks2_unlock(img->md, &secret, NULL, test_file_read,
                             GINT_TO_POINTER(img->fd), &key, slot,
                             errp) < 0) {
        return NULL;
    }
    return g_bytes_new(key->data, key->len);
}

/* Unlock path with pass, and compare with what cryptsetup says. */
static void check_unlock(const char *dir, const char *path, const char *pass,
                         int want_slot)
{
    g_autofree char *keyfile = g_build_filename(dir, "check.key", NULL);
    g_autoptr(GBytes) ours = NULL, theirs = NULL;
    Image img;
    int slot = -1;

    image_open(&img, path);
    ours = image_unlock(&img, pass, &slot, &error_abort);
    image_close(&img);
    g_assert_cmpint(slot, ==, want_slot);

    test_write_file(keyfile, pass, strlen(pass));
    theirs = test_cryptsetup_volume_key(path, keyfile);
    g_assert_true(g_bytes_equal(ours, theirs));
}

static void check_wrong_password(const char *path)
{
    g_autoptr(Error) err = NULL;
    g_autoptr(GBytes) key = NULL;
    Image img;
    int slot;

    image_open(&img, path);
    key = image_unlock(&img, "not the passphrase", &slot, &err);
    image_close(&img);
    g_assert_null(key);
    g_assert_cmpstr(error_get_pretty(err), ==,
                    "Invalid password, cannot unlock any keyslot");
}

static void test_compatimage2(void)
{
    g_autofree char *dir = test_scratch_new();
    g_autofree char *path = test_unxz("compatimage2.img.xz", dir, "c2.img");
    Image img;

    if (path && test_have_cryptsetup()) {
        image_open(&img, path);
        /* cryptsetup's LUKS2 test image: argon2i, aes-cbc-essiv:sha256 */
        g_assert_cmpint(img.md->keyslots[0]->kdf.type, ==,
                        QCRYPTO_BLOCK_KDF_ARGON2I);
        g_assert_cmpstr(img.md->segments[0]->encryption, ==,
                        "aes-cbc-essiv:sha256");
        image_close(&img);
        check_unlock(dir, path, "compatkey", 0);
        check_wrong_password(path);
    }
    test_scratch_free(g_steal_pointer(&dir));
}

/* Slot 1 is bound to a digest of no segment: only slot 0 may open. */
static void test_keyslot_unassigned(void)
{
    g_autofree char *dir = test_scratch_new();
    g_autofree char *path = test_unxz("luks2_keyslot_unassigned.img.xz", dir,
                                      "u.img");
    Image img;

    if (path && test_have_cryptsetup()) {
        image_open(&img, path);
        g_assert_cmpint(img.md->keyslots[1]->digest, ==, 1);
        g_assert_cmpuint(img.md->digests[1]->segments, ==, 0);
        image_close(&img);
        check_unlock(dir, path, "compatkey", 0);
    }
    test_scratch_free(g_steal_pointer(&dir));
}

/* luks2_valid_hdr: valid (with its early "argon2" KDF name). */
static void test_valid_hdr(void)
{
    g_autofree char *dir = test_scratch_new();
    g_autofree char *path = test_unxz("luks2_valid_hdr.img.xz", dir, "v.img");
    Image img;

    if (path) {
        image_open(&img, path);
        for (int i = 0; i < 8; i++) {
            g_assert_nonnull(img.md->keyslots[i]);
            g_assert_cmpint(img.md->keyslots[i]->kdf.type, ==,
                            QCRYPTO_BLOCK_KDF_ARGON2I);
        }
        g_assert_cmpuint(img.md->digests[0]->keyslots, ==, 0xff);
        image_close(&img);
    }
    test_scratch_free(g_steal_pointer(&dir));
}

static void test_mda_images(void)
{
    g_autofree char *tarball = test_data_path("luks2_mda_images.tar.xz");
    g_autofree char *dir = NULL;
    const char *argv[] = { "tar", "-xJf", tarball, "-C", NULL, NULL };
    g_autofree char *out = NULL;

    if (!tarball || !test_have_cryptsetup()) {
        return;
    }
    dir = test_scratch_new();
    argv[4] = dir;
    out = test_run(argv);
    g_assert_nonnull(out);
    for (unsigned kib = 16; kib <= 4096; kib *= 2) {
        g_autofree char *name = g_strdup_printf("test_image_%u", kib);
        g_autofree char *path = g_build_filename(dir, name, NULL);

        /* cryptsetup's tests open these with this passphrase */
        check_unlock(dir, path, "Qx3qn46vq0v", 0);
    }
    test_scratch_free(g_steal_pointer(&dir));
}

/* ---- images made by cryptsetup luksFormat on the fly ---- */

typedef struct FormatCase {
    const char *name;
    const char *kdf;
    const char *sector_size;
    const char *metadata_size;
    const char *cipher;
    const char *key_size;       /* bits */
} FormatCase;

static const FormatCase format_cases[] = {
    { "argon2id-4096", "argon2id", "4096", "16k", "aes-xts-plain64", "512" },
    { "argon2id-512", "argon2id", "512", "16k", "aes-xts-plain64", "512" },
    { "argon2i-512-64k", "argon2i", "512", "64k", "aes-xts-plain64", "256" },
    { "pbkdf2-4096-1m", "pbkdf2", "4096", "1m", "aes-xts-plain64", "512" },
    { "pbkdf2-4m", "pbkdf2", "512", "4m", "aes-cbc-essiv:sha256", "256" },
    /* AES only: cryptsetup asks the kernel (dm-crypt) for other ciphers */
    { "argon2id-xts128-32k", "argon2id", "4096", "32k", "aes-xts-plain64",
      "256" },
};

static const char format_pass[] = "correct horse battery staple";

/* A 20 MiB file formatted by cryptsetup; returns its path. */
static char *cryptsetup_format(const char *dir, const FormatCase *c)
{
    g_autofree char *keyfile = g_build_filename(dir, "format.key", NULL);
    char *path = g_build_filename(dir, "cs.img", NULL);
    bool argon = g_str_has_prefix(c->kdf, "argon2");
    const char *argv[] = {
        "cryptsetup", "luksFormat", "--type", "luks2", "--batch-mode",
        "--pbkdf", c->kdf, "--pbkdf-force-iterations", argon ? "4" : "1000",
        "--sector-size", c->sector_size, "--luks2-metadata-size",
        c->metadata_size, "--cipher", c->cipher, "--key-size", c->key_size,
        "--key-file", keyfile, path,
        /* argon2 only: for pbkdf2 the NULL here ends the list */
        argon ? "--pbkdf-memory" : NULL, "32", "--pbkdf-parallel", "1", NULL,
    };
    g_autofree char *out = NULL;
    int fd;

    test_write_file(keyfile, format_pass, strlen(format_pass));
    fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    g_assert_cmpint(fd, >=, 0);
    g_assert_cmpint(ftruncate(fd, 20 * 1024 * 1024), ==, 0);
    close(fd);
    out = test_run(argv);
    g_assert_nonnull(out);
    return path;
}

static void test_cryptsetup_format(gconstpointer data)
{
    const FormatCase *c = data;
    g_autofree char *dir = NULL;
    g_autofree char *path = NULL;
    Image img;

    if (!test_have_cryptsetup()) {
        return;
    }
    dir = test_scratch_new();
    path = cryptsetup_format(dir, c);
    image_open(&img, path);
    g_assert_cmpstr(qcrypto_block_kdf_name(img.md->keyslots[0]->kdf.type),
                    ==, c->kdf);
    g_assert_cmpuint(img.md->segments[0]->sector_size, ==,
                     atoi(c->sector_size));
    g_assert_cmpstr(img.md->segments[0]->encryption, ==, c->cipher);
    image_close(&img);
    check_unlock(dir, path, format_pass, 0);
    check_wrong_password(path);
    test_scratch_free(g_steal_pointer(&dir));
}

/* ---- key slots added and removed, checked by cryptsetup ---- */

/* Add key slot id with secret pass to img, as an amend would. */
static void add_keyslot(Image *img, int id, QCryptoBlockKDF kdf,
                        const GBytes *vk, const char *pass)
{
    QCryptoLUKS2KDFParams params = {
        .type = kdf, .hash = QCRYPTO_HASH_ALGO_SHA256, .iter_time_ms = 10,
        .max_memory_kib = 64, .parallel = 1,
        .forced_iterations = kdf == QCRYPTO_BLOCK_KDF_PBKDF2 ? 1000 : 4,
    };
    QCryptoBlockSecret secret = { (const uint8_t *)pass, strlen(pass) };
    size_t nkey;
    const uint8_t *key = g_bytes_get_data((GBytes *)vk, &nkey);
    QCryptoLUKS2Keyslot ks = {
        .id = id, .key_size = nkey, .priority = QCRYPTO_LUKS2_PRIORITY_NORMAL,
        .af_hash = QCRYPTO_HASH_ALGO_SHA256, .af_stripes = 4000,
        .area_encryption = (char *)"aes-xts-plain64", .area_key_size = 64,
        .digest = qcrypto_luks2_segment_digest(img->md, 0),
    };
    g_autofree char *json = NULL;

    ks.area_size = qcrypto_luks2_keyslot_area_size(nkey, ks.af_stripes);
    g_assert_cmpint(qcrypto_luks2_keyslot_find_area(img->md, ks.area_size,
                                                    &ks.area_offset,
                                                    &error_abort), ==, 0);
    g_assert_cmpint(qcrypto_luks2_kdf_calibrate(&params, ks.area_key_size,
                                                &ks.kdf, &error_abort), ==, 0);
    g_assert_cmpint(qcrypto_luks2_keyslot_store(&ks, &secret, key, nkey,
                                                NULL, test_file_write,
                                                GINT_TO_POINTER(img->fd),
                                                &error_abort), ==, 0);
    qcrypto_luks2_metadata_set_keyslot(img->md, &ks);
    g_assert_cmpint(qcrypto_luks2_metadata_reload(img->md,
                                                  &error_abort), ==, 0);
    json = qcrypto_luks2_metadata_to_json(img->md);
    g_assert_cmpint(qcrypto_luks2_header_write(img->hdr, json, NULL,
                                               test_file_write, NULL,
                                               GINT_TO_POINTER(img->fd),
                                               &error_abort), ==, 0);
}

static void remove_keyslot(Image *img, int id)
{
    g_autofree char *json = NULL;

    g_assert_cmpint(qcrypto_luks2_keyslot_wipe(img->md->keyslots[id], NULL,
                                               test_file_write,
                                               GINT_TO_POINTER(img->fd),
                                               &error_abort), ==, 0);
    qcrypto_luks2_metadata_remove_keyslot(img->md, id);
    g_assert_cmpint(qcrypto_luks2_metadata_reload(img->md,
                                                  &error_abort), ==, 0);
    json = qcrypto_luks2_metadata_to_json(img->md);
    g_assert_cmpint(qcrypto_luks2_header_write(img->hdr, json, NULL,
                                               test_file_write, NULL,
                                               GINT_TO_POINTER(img->fd),
                                               &error_abort), ==, 0);
}

static bool cryptsetup_test_passphrase(const char *dir, const char *path,
                                       const char *pass)
{
    g_autofree char *keyfile = g_build_filename(dir, "test.key", NULL);
    const char *argv[] = {
        "cryptsetup", "open", "--test-passphrase", "--key-file", keyfile,
        path, NULL,
    };
    g_autofree char *out = NULL;

    test_write_file(keyfile, pass, strlen(pass));
    out = test_run(argv);
    return out != NULL;
}

static void test_amend_interop(gconstpointer data)
{
    QCryptoBlockKDF kdf = GPOINTER_TO_INT(data);
    g_autofree char *dir = NULL;
    g_autofree char *path = NULL;
    g_autofree char *tokfile = NULL, *newkey = NULL, *oldkey = NULL;
    g_autofree char *out = NULL, *token = NULL;
    g_autoptr(GBytes) vk = NULL;
    static const char token_json[] =
        "{\"type\":\"example-vendor\",\"keyslots\":[\"0\"],"
        "\"vendor-data\":{\"serial\":\"42\"}}";
    Image img;
    int slot;

    if (!test_have_cryptsetup()) {
        return;
    }
    dir = test_scratch_new();
    path = cryptsetup_format(dir, &format_cases[0]);

    /* A token we know nothing of, which our rewrites must keep. */
    tokfile = g_build_filename(dir, "token.json", NULL);
    test_write_file(tokfile, token_json, strlen(token_json));
    {
        const char *argv[] = {
            "cryptsetup", "token", "import", "--json-file", tokfile,
            "--token-id", "0", path, NULL,
        };
        out = test_run(argv);
        g_assert_nonnull(out);
        g_clear_pointer(&out, g_free);
    }

    /* Add slot 1 with our code; cryptsetup opens it. */
    image_open(&img, path);
    vk = image_unlock(&img, format_pass, &slot, &error_abort);
    add_keyslot(&img, 1, kdf, vk, "new secret");
    image_close(&img);
    g_assert_true(cryptsetup_test_passphrase(dir, path, "new secret"));
    g_assert_true(cryptsetup_test_passphrase(dir, path, format_pass));

    /* Remove slot 0 with our code; cryptsetup no longer opens with it. */
    image_open(&img, path);
    g_assert_nonnull(img.md->keyslots[1]);
    remove_keyslot(&img, 0);
    image_close(&img);
    g_assert_false(cryptsetup_test_passphrase(dir, path, format_pass));
    g_assert_true(cryptsetup_test_passphrase(dir, path, "new secret"));

    /* cryptsetup adds a slot to our header; we open it. */
    newkey = g_build_filename(dir, "new.key", NULL);
    oldkey = g_build_filename(dir, "old.key", NULL);
    test_write_file(oldkey, "new secret", strlen("new secret"));
    test_write_file(newkey, "third one", strlen("third one"));
    {
        const char *argv[] = {
            "cryptsetup", "luksAddKey", "--batch-mode",
            "--pbkdf", "pbkdf2", "--pbkdf-force-iterations", "1000",
            "--key-file", oldkey, path, newkey, NULL,
        };
        out = test_run(argv);
        g_assert_nonnull(out);
        g_clear_pointer(&out, g_free);
    }
    image_open(&img, path);
    {
        g_autoptr(GBytes) vk3 = image_unlock(&img, "third one", &slot,
                                             &error_abort);

        g_assert_true(g_bytes_equal(vk, vk3));
        g_assert_cmpint(slot, !=, 1);
    }
    /* The token is still there, all of it, and no longer names slot 0. */
    g_assert_nonnull(img.md->tokens[0]);
    g_assert_cmpstr(img.md->tokens[0]->type, ==, "example-vendor");
    g_assert_cmpuint(img.md->tokens[0]->keyslots, ==, 0);
    image_close(&img);
    {
        const char *argv[] = {
            "cryptsetup", "token", "export", "--token-id", "0", path, NULL,
        };
        token = test_run(argv);
        g_assert_nonnull(token);
        g_assert_nonnull(strstr(token, "\"serial\""));
        g_assert_nonnull(strstr(token, "\"42\""));
    }
    test_scratch_free(g_steal_pointer(&dir));
}

/*
 * Priorities, as cryptsetup sets them (`cryptsetup config --priority`):
 * "prefer" slots are tried first; "ignore" slots never (cryptsetup opens
 * them only when asked for by number).
 */
static void test_priorities(void)
{
    g_autofree char *dir = NULL, *path = NULL, *keyfile = NULL;
    g_autoptr(Error) err = NULL;
    g_autoptr(GBytes) key = NULL;
    Image img;
    int slot = -1;

    if (!test_have_cryptsetup()) {
        return;
    }
    dir = test_scratch_new();
    path = cryptsetup_format(dir, &format_cases[3]);    /* pbkdf2 */
    keyfile = g_build_filename(dir, "format.key", NULL);
    {
        /* slot 1: the same passphrase again */
        const char *add[] = {
            "cryptsetup", "luksAddKey", "--batch-mode", "--pbkdf", "pbkdf2",
            "--pbkdf-force-iterations", "1000", "--key-file", keyfile, path,
            keyfile, NULL,
        };
        const char *prefer[] = {
            "cryptsetup", "config", "--priority", "prefer", "--key-slot",
            "1", path, NULL,
        };
        const char *ignore[] = {
            "cryptsetup", "config", "--priority", "ignore", "--key-slot",
            "0", path, NULL,
        };
        g_autofree char *o1 = test_run(add);
        g_autofree char *o2 = NULL, *o3 = NULL;

        g_assert_nonnull(o1);
        image_open(&img, path);
        key = image_unlock(&img, format_pass, &slot, &error_abort);
        image_close(&img);
        g_assert_cmpint(slot, ==, 0);       /* both normal: in order */
        g_clear_pointer(&key, g_bytes_unref);

        o2 = test_run(prefer);
        g_assert_nonnull(o2);
        image_open(&img, path);
        g_assert_cmpint(img.md->keyslots[1]->priority, ==,
                        QCRYPTO_LUKS2_PRIORITY_HIGH);
        key = image_unlock(&img, format_pass, &slot, &error_abort);
        image_close(&img);
        g_assert_cmpint(slot, ==, 1);       /* preferred first */
        g_clear_pointer(&key, g_bytes_unref);

        /* slot 1 back to normal, slot 0 ignored: only slot 1 opens */
        prefer[3] = "normal";
        g_free(o2);
        o2 = test_run(prefer);
        o3 = test_run(ignore);
        g_assert_nonnull(o2);
        g_assert_nonnull(o3);
        image_open(&img, path);
        g_assert_cmpint(img.md->keyslots[0]->priority, ==,
                        QCRYPTO_LUKS2_PRIORITY_IGNORE);
        key = image_unlock(&img, format_pass, &slot, &error_abort);
        image_close(&img);
        g_assert_cmpint(slot, ==, 1);
        g_clear_pointer(&key, g_bytes_unref);

        /* both ignored: the right passphrase opens nothing */
        ignore[5] = "1";
        g_free(o3);
        o3 = test_run(ignore);
        g_assert_nonnull(o3);
        image_open(&img, path);
        key = image_unlock(&img, format_pass, &slot, &err);
        image_close(&img);
        g_assert_null(key);
        g_assert_cmpstr(error_get_pretty(err), ==,
                        "Invalid password, cannot unlock any keyslot");
    }
    test_scratch_free(g_steal_pointer(&dir));
}

/* The key-slot area fills up; the error says so. */
static void test_area_full(void)
{
    static const char json[] =
        "{\"keyslots\":{\"0\":{\"type\":\"luks2\",\"key_size\":64,"
        "\"af\":{\"type\":\"luks1\",\"stripes\":4000,\"hash\":\"sha256\"},"
        "\"area\":{\"type\":\"raw\",\"offset\":\"32768\",\"size\":\"258048\","
        "\"encryption\":\"aes-xts-plain64\",\"key_size\":64},"
        "\"kdf\":{\"type\":\"pbkdf2\",\"hash\":\"sha256\",\"iterations\":1000,"
        "\"salt\":\"4Km2Ut65PzhrdmQqq2i6jDGpwFDvxYq1bLCT+yORTfE=\"}}},"
        "\"tokens\":{},\"segments\":{},\"digests\":{},"
        "\"config\":{\"json_size\":\"12288\",\"keyslots_size\":\"520192\"}}";
    g_autoptr(Error) err = NULL;
    g_autoptr(QCryptoLUKS2Metadata) md =
        qcrypto_luks2_metadata_parse(json, 16384, &error_abort);
    uint64_t size = qcrypto_luks2_keyslot_area_size(64, 4000);
    uint64_t off = 0;

    /* 32768 + 520192 = 552960 = 32768 + 2 * 258048 + 4096 */
    g_assert_cmpint(qcrypto_luks2_keyslot_find_area(md, size, &off, &err),
                    ==, 0);
    g_assert_cmpuint(off, ==, 32768 + 258048);
    md->keyslots[1] = g_memdup2(md->keyslots[0], sizeof(QCryptoLUKS2Keyslot));
    md->keyslots[1]->area_encryption = g_strdup("aes-xts-plain64");
    md->keyslots[1]->area_offset = off;
    g_assert_cmpint(qcrypto_luks2_keyslot_find_area(md, size, &off, &err),
                    ==, -1);
    g_assert_nonnull(strstr(error_get_pretty(err), "is full"));
}

/* Calibration reaches its target roughly, and respects the memory cap. */
static void test_calibrate_argon2(void)
{
    QCryptoLUKS2KDFParams params = {
        .type = QCRYPTO_BLOCK_KDF_ARGON2ID, .iter_time_ms = 200,
        .max_memory_kib = 64 * 1024, .parallel = 1,
    };
    QCryptoLUKS2KDF kdf;

    g_assert_cmpint(qcrypto_luks2_kdf_calibrate(&params, 64, &kdf,
                                                &error_abort), ==, 0);
    g_test_message("argon2id for 200 ms: time %u, memory %u KiB",
                   kdf.time, kdf.memory);
    g_assert_cmpuint(kdf.memory, <=, 64 * 1024);
    g_assert_cmpuint(kdf.memory, <=, qcrypto_luks2_memory_cap_kib());
    g_assert_cmpuint(kdf.time, >=, 4);
    g_assert_cmpuint(kdf.nsalt, ==, 32);
    g_assert_cmpuint(kdf.parallel, ==, 1);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/crypto/luks2/keyslot/compatimage2", test_compatimage2);
    g_test_add_func("/crypto/luks2/keyslot/unassigned",
                    test_keyslot_unassigned);
    g_test_add_func("/crypto/luks2/keyslot/valid-hdr", test_valid_hdr);
    g_test_add_func("/crypto/luks2/keyslot/mda-images", test_mda_images);
    for (size_t i = 0; i < G_N_ELEMENTS(format_cases); i++) {
        g_autofree char *path = g_strdup_printf(
            "/crypto/luks2/keyslot/cryptsetup-format/%s",
            format_cases[i].name);

        g_test_add_data_func(path, &format_cases[i], test_cryptsetup_format);
    }
    g_test_add_data_func("/crypto/luks2/keyslot/amend-interop/argon2id",
                         GINT_TO_POINTER(QCRYPTO_BLOCK_KDF_ARGON2ID),
                         test_amend_interop);
    g_test_add_data_func("/crypto/luks2/keyslot/amend-interop/pbkdf2",
                         GINT_TO_POINTER(QCRYPTO_BLOCK_KDF_PBKDF2),
                         test_amend_interop);
    g_test_add_func("/crypto/luks2/keyslot/priorities", test_priorities);
    g_test_add_func("/crypto/luks2/keyslot/area-full", test_area_full);
    g_test_add_func("/crypto/luks2/keyslot/calibrate-argon2",
                    test_calibrate_argon2);
    return g_test_run();
}
