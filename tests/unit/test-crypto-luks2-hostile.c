/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Hostile LUKS2 images, made from cryptsetup's luks2_valid_hdr (the base
 * its own validation tests use): one change to the JSON, written into both
 * header copies with correct checksums, so that only the metadata rules
 * can catch it. Opening must fail with a clear error whether a secret is
 * given or not: the rules run before any KDF, so costs of terabytes or
 * billions of passes are refused, not attempted (the test's timeout would
 * catch a hang).
 */
#include "crypto/luks2priv.h"
#include "luks2-testutil.h"

#include <sys/stat.h>

typedef struct HostileImage {
    const char *name;
    const char *path;           /* dotted JSON member */
    const char *value;          /* JSON text; NULL removes the member */
    const char *error;
} HostileImage;

static const HostileImage hostile_images[] = {
    { "no-keyslots", "keyslots", NULL, "missing 'keyslots'" },
    { "no-segments", "segments", NULL, "missing 'segments'" },
    { "no-digests", "digests", NULL, "missing 'digests'" },
    { "no-config", "config", NULL, "missing 'config'" },
    { "no-tokens", "tokens", NULL, "missing 'tokens'" },
    { "overlap", "keyslots.1.area.offset", "\"32768\"", "areas overlap" },
    { "negative", "keyslots.2.area.offset", "\"-294912\"",
      "not an unsigned decimal number" },
    { "huge", "segments.0.offset", "\"99999999999999999999\"",
      "overflows 64 bits" },
    { "non-digit", "config.keyslots_size", "\"4161536 \"",
      "not an unsigned decimal number" },
    { "beyond-area", "keyslots.7.area.offset", "\"4190208\"",
      "outside the key-slot area" },
    { "unknown-kdf", "keyslots.0.kdf.type", "\"bcrypt\"",
      "unknown KDF 'bcrypt'" },
    /* 2^32 - 1 KiB: 4 TiB of argon2 memory */
    { "argon2-terabytes", "keyslots.3.kdf.memory", "4294967295",
      "above the 4 GiB limit" },
    { "argon2-forever", "keyslots.4.kdf.time", "4000000000",
      "unreasonably high" },
    { "requirement", "config.requirements",
      "{\"mandatory\":[\"online-reencrypt-v2\"]}",
      "unfinished re-encryption" },
    { "unknown-requirement", "config.requirements",
      "{\"mandatory\":[\"hardware-magic\"]}",
      "unknown mandatory requirement 'hardware-magic'" },
    { "segment-in-keyslots", "segments.0.offset", "\"1048576\"",
      "inside the header and key-slot area" },
    { "segment-unaligned", "segments.0.offset", "\"4194305\"",
      "not a multiple" },
    { "digest-ghost-slot", "digests.0.keyslots", "[\"0\",\"9\"]",
      "names 9, which does not exist" },
    { "json-size", "config.json_size", "\"4190208\"", "json_size" },
};

typedef struct Base {
    char *dir;
    char *path;
    char *json;                 /* the valid JSON text */
} Base;

static bool base_load(Base *b)
{
    g_autoptr(QCryptoLUKS2Header) hdr = NULL;
    int fd;

    b->dir = test_scratch_new();
    b->path = test_unxz("luks2_valid_hdr.img.xz", b->dir, "base.img");
    if (!b->path) {
        return false;
    }
    fd = test_open(b->path, O_RDONLY);
    hdr = qcrypto_luks2_header_read(NULL, test_file_read,
                                    GINT_TO_POINTER(fd), NULL, &error_abort);
    close(fd);
    b->json = g_strdup(hdr->json);
    return true;
}

static void base_free(Base *b)
{
    test_scratch_free(b->dir);
    g_free(b->path);
    g_free(b->json);
}

/* Put json into both header copies of path, checksums made right. */
static void write_json(const char *path, const char *json)
{
    g_autoptr(QCryptoLUKS2Header) hdr = NULL;
    int fd = test_open(path, O_RDWR);

    hdr = qcrypto_luks2_header_read(NULL, test_file_read,
                                    GINT_TO_POINTER(fd), NULL, &error_abort);
    g_assert_cmpint(qcrypto_luks2_header_write(hdr, json, NULL,
                                               test_file_write, NULL,
                                               GINT_TO_POINTER(fd),
                                               &error_abort), ==, 0);
    close(fd);
}

static QCryptoBlock *open_path(const char *path, unsigned flags,
                               Error **errp)
{
    QCryptoBlockOpenOptions opts = {
        .format = QCRYPTO_BLOCK_FORMAT_LUKS,
        .secret = { (const uint8_t *)"anything", 8 },
    };
    int fd = test_open(path, O_RDONLY);
    struct stat st;
    QCryptoBlock *block;

    g_assert_cmpint(fstat(fd, &st), ==, 0);
    opts.size = st.st_size;
    block = qcrypto_block_open(&opts, test_file_read, GINT_TO_POINTER(fd),
                               flags, errp);
    close(fd);
    return block;
}

static void test_base_opens(void)
{
    Base b = { 0 };
    g_autoptr(QCryptoBlock) block = NULL;
    g_autoptr(QCryptoBlockInfo) info = NULL;

    if (!base_load(&b)) {
        base_free(&b);
        return;
    }
    block = open_path(b.path, QCRYPTO_BLOCK_OPEN_NO_IO, &error_abort);
    info = qcrypto_block_get_info(block, &error_abort);
    g_assert_cmpint(info->version, ==, 2);
    g_assert_cmpuint(info->nslots, ==, 8);
    base_free(&b);
}

static void test_hostile_image(gconstpointer data)
{
    const HostileImage *h = data;
    Base b = { 0 };
    g_autofree char *json = NULL;

    if (!base_load(&b)) {
        base_free(&b);
        return;
    }
    json = test_json_mutate(b.json, h->path, h->value);
    write_json(b.path, json);
    for (int with_secret = 0; with_secret < 2; with_secret++) {
        g_autoptr(Error) err = NULL;
        g_autoptr(QCryptoBlock) block = NULL;

        block = open_path(b.path, with_secret ? 0 : QCRYPTO_BLOCK_OPEN_NO_IO,
                          &err);
        g_assert_null(block);
        g_assert_nonnull(err);
        g_test_message("%s: %s", h->name, error_get_pretty(err));
        g_assert_nonnull(strstr(error_get_pretty(err), h->error));
    }
    base_free(&b);
}

/*
 * A digest whose PBKDF2 cost is above the limit: the header is legal and
 * opens header-only, but unlocking refuses to run it (in no time), and
 * says which open option raises the limit.
 */
static void test_digest_above_limit(void)
{
    Base b = { 0 };
    g_autofree char *json = NULL;
    g_autoptr(QCryptoBlock) noio = NULL;
    g_autoptr(QCryptoBlock) keyed = NULL;
    g_autoptr(Error) err = NULL;

    if (!base_load(&b)) {
        base_free(&b);
        return;
    }
    json = test_json_mutate(b.json, "digests.0.iterations", "4000000000");
    write_json(b.path, json);
    noio = open_path(b.path, QCRYPTO_BLOCK_OPEN_NO_IO, &error_abort);
    keyed = open_path(b.path, 0, &err);
    g_assert_null(keyed);
    g_assert_nonnull(strstr(error_get_pretty(err), "LUKS2 digest 0 needs "
                            "4000000000 PBKDF2 iterations, more than "
                            "max-pbkdf2-iterations=134217728"));
    base_free(&b);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/crypto/luks2/hostile/base-opens", test_base_opens);
    g_test_add_func("/crypto/luks2/hostile/digest-above-limit",
                    test_digest_above_limit);
    for (size_t i = 0; i < G_N_ELEMENTS(hostile_images); i++) {
        g_autofree char *path = g_strdup_printf("/crypto/luks2/hostile/%s",
                                                hostile_images[i].name);

        g_test_add_data_func(path, &hostile_images[i], test_hostile_image);
    }
    return g_test_run();
}
