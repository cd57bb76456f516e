/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Hostile LUKS1 headers are refused with a clear error, before any
 * allocation or PBKDF2 run they could size, without a crash and without a
 * write: cryptsetup's evil_hdr-* images, every header field corrupted in
 * turn, every byte flipped, truncated files.
 */
#include "luks-test-image.h"
#include "test-error.h"

/* A valid aes-256-xts-plain64 / sha256 image of our own, made once. */
static TestImage *base_image(void)
{
    static TestImage *base;

    if (!base) {
        QCryptoBlockCreateOptions opts = { .secret = test_secret("pw") };
        g_autoptr(QCryptoBlock) block = NULL;

        qcrypto_block_create_options_init(&opts);
        opts.has_iter_time = true;
        opts.iter_time = 10;
        base = test_image_new();
        block = qcrypto_block_create(&opts, test_image_init,
                                     test_image_write, base, &error_abort);
        /* 1 MiB of payload. */
        test_image_grow(base, base->buf->len + 1024 * 1024);
    }
    return base;
}

static TestImage *copy_image(TestImage *src)
{
    return test_image_new_take(g_memdup2(src->buf->data, src->buf->len),
                               src->buf->len);
}

/* Opening fails with error, header-only and with a passphrase alike. */
static void assert_refused(TestImage *img, const char *pw, const char *error)
{
    g_autofree char *before = g_compute_checksum_for_data(
        G_CHECKSUM_SHA256, img->buf->data, img->buf->len);
    g_autofree char *after = NULL;

    for (int with_key = 0; with_key < 2; with_key++) {
        g_autoptr(Error) err = NULL;
        QCryptoBlock *block = test_image_open(img, with_key ? pw : NULL, 0,
                                              &err);

        if (block) {
            qcrypto_block_free(block);
            g_error("a hostile header was accepted (expected \"%s\")",
                    error);
        }
        test_error_expect(&err, error);
    }
    after = g_compute_checksum_for_data(G_CHECKSUM_SHA256, img->buf->data,
                                        img->buf->len);
    g_assert_cmpstr(before, ==, after);
    g_assert_cmpuint(img->nwrites, ==, 0);
}

/* ---- cryptsetup's evil_hdr-* images */

typedef struct EvilCase {
    const char *file;
    const char *error;
} EvilCase;

static const EvilCase evil_cases[] = {
    /* Key slots 1 to 6 all at sector 520. */
    { "evil_hdr-keyslot_overlap.xz", "overlapping key material" },
    /* Key slot 2 at sector 1, inside the header. */
    { "evil_hdr-luks_hdr_damage.xz", "key slot 2 key material at sector 1 "
      "overlaps the header" },
    /* Key slot 3 ends one sector into the payload. */
    { "evil_hdr-payload_overwrite.xz", "key slot 3 key material (sectors "
      "3847-4096) overlaps the payload at sector 4096" },
    /* Payload at 2 MiB in a 1 MiB file. */
    { "evil_hdr-small_luks_device.xz", "beyond the end of the file" },
    /* 44944 stripes reach into the payload. */
    { "evil_hdr-stripes_payload_dmg.xz", "key slot 5 has 44944 AF stripes" },
};

static void test_evil_header(gconstpointer data)
{
    const EvilCase *c = data;
    g_autofree char *dir = test_cryptsetup_dir();
    g_autofree char *path = NULL;
    g_autoptr(TestImage) img = NULL;

    if (!dir) {
        return;
    }
    path = g_build_filename(dir, c->file, NULL);
    img = test_image_load_xz(path);
    assert_refused(img, "compatkey", c->error);
}

/* The header the evil ones were made from is fine (all slots disabled). */
static void test_valid_header_file(void)
{
    g_autofree char *dir = test_cryptsetup_dir();
    g_autofree char *path = NULL;
    g_autoptr(TestImage) img = NULL;
    g_autoptr(QCryptoBlock) block = NULL;
    g_autoptr(Error) err = NULL;

    if (!dir) {
        return;
    }
    path = g_build_filename(dir, "valid_header_file.xz", NULL);
    img = test_image_load_xz(path);
    block = test_image_open(img, NULL, 0, &error_abort);
    qcrypto_block_free(g_steal_pointer(&block));
    block = test_image_open(img, "anything", 0, &err);
    test_error_expect(&err, "Invalid password, cannot unlock any keyslot");
}

/* ---- every field corrupted in turn */

typedef struct FieldCase {
    const char *name;
    size_t offset;
    size_t len;             /* bytes of value written at offset */
    const char *value;      /* raw bytes (may hold NULs: len says) */
    const char *error;
} FieldCase;

#define SLOT(i, field) (208 + 48 * (i) + (field))
/* len and value of a big-endian 32-bit field */
#define BE32(v) 4, (const char[]){ (char)((v) >> 24), (char)((v) >> 16), \
                                   (char)((v) >> 8), (char)(v) }

static const FieldCase field_cases[] = {
    { "magic", 0, 1, "X", "Not a LUKS image" },
    { "magic-last", 5, 1, "\xbf", "Not a LUKS image" },
    { "version-0", 6, 2, "\0\0", "LUKS version 0 is not supported" },
    /* version 2 goes to the LUKS2 driver, which finds no LUKS2 header */
    { "version-2", 6, 2, "\0\2", "No valid LUKS2 header" },
    { "version-ffff", 6, 2, "\xff\xff", "LUKS version 65535" },
    { "cipher-name-unterminated", 8, 32, "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
      "'cipher-name' is not NUL-terminated" },
    { "cipher-name-unknown", 8, 6, "rot13\0", "Unsupported LUKS cipher "
      "'rot13'" },
    { "cipher-name-empty", 8, 1, "\0", "Unsupported LUKS cipher ''" },
    { "cipher-mode-unterminated", 40, 32,
      "xts-plain64xxxxxxxxxxxxxxxxxxxxx", "'cipher-mode' is not "
      "NUL-terminated" },
    { "cipher-mode-unknown", 40, 12, "gcm-plain64\0",
      "Unsupported LUKS cipher mode 'gcm-plain64'" },
    { "cipher-mode-no-ivgen", 40, 4, "xts\0", "lacks an IV generator" },
    { "cipher-mode-bad-ivgen", 40, 8, "xts-foo\0",
      "Unsupported IV generator 'foo'" },
    { "cipher-mode-essiv-no-hash", 40, 10, "xts-essiv\0",
      "lacks the ESSIV hash" },
    { "cipher-mode-essiv-bad-hash", 40, 15, "xts-essiv:md4x\0",
      "Unsupported ESSIV hash 'md4x'" },
    { "cipher-mode-essiv-sha512", 40, 17, "xts-essiv:sha512\0",
      "ESSIV" },
    { "cipher-mode-option", 40, 17, "xts-plain64:md4x\0", "takes no option" },
    { "cipher-mode-ecb-ivgen", 40, 10, "ecb-bogus\0", "Unsupported IV "
      "generator 'bogus'" },
    { "hash-spec-unterminated", 72, 32, "sha256sha256sha256sha256sha256ss",
      "'hash-spec' is not NUL-terminated" },
    { "hash-spec-unknown", 72, 4, "md4\0", "Unsupported LUKS hash 'md4'" },
    { "uuid-unterminated", 168, 40,
      "0123456789012345678901234567890123456789", "'uuid' is not "
      "NUL-terminated" },
    { "key-bytes-0", 108, BE32(0), "key size of 0 bytes" },
    { "key-bytes-33", 108, BE32(33), "key size of 33 bytes" },
    { "key-bytes-128", 108, BE32(128), "key size of 128 bytes" },
    { "key-bytes-huge", 108, BE32(0xffffffffu), "key size of 4294967295" },
    { "payload-0", 104, BE32(0), "payload offset is 0: this is a detached "
      "header" },
    { "payload-1", 104, BE32(1), "payload offset (sector 1) overlaps the "
      "header" },
    { "payload-in-slots", 104, BE32(100), "key slot 0 key material "
      "(sectors 8-507) overlaps the payload at sector 100" },
    { "payload-huge", 104, BE32(0xffffffffu), "is beyond the end of the "
      "file" },
    { "mk-iter-0", 164, BE32(0), "master key digest has 0 PBKDF2 "
      "iterations" },
    { "slot-state", SLOT(0, 0), BE32(0x12345678),
      "key slot 0 has an invalid state 0x12345678" },
    { "slot-state-1", SLOT(3, 0), BE32(1), "key slot 3 has an invalid "
      "state" },
    { "slot-iter-0", SLOT(0, 4), BE32(0), "key slot 0 has 0 PBKDF2 "
      "iterations" },
    { "slot-offset-0", SLOT(0, 40), BE32(0), "key slot 0 key material at "
      "sector 0 overlaps the header" },
    { "slot-offset-1", SLOT(4, 40), BE32(1), "key slot 4 key material at "
      "sector 1 overlaps the header" },
    { "slot-offset-same", SLOT(1, 40), BE32(8), "key slots 0 and 1 have "
      "overlapping key material" },
    { "slot-offset-partial", SLOT(2, 40), BE32(1000), "key slots 1 and 2 "
      "have overlapping key material" },
    { "slot-offset-huge", SLOT(7, 40), BE32(0xffffffffu), "key slot 7 key "
      "material (sectors 4294967295-4294967794) overlaps the payload" },
    { "slot-offset-into-payload", SLOT(7, 40), BE32(3600), "key slot 7 "
      "key material (sectors 3600-4099) overlaps the payload" },
    { "slot-stripes-0", SLOT(3, 44), BE32(0), "key slot 3 has 0 AF "
      "stripes, LUKS1 requires 4000" },
    { "slot-stripes-huge", SLOT(6, 44), BE32(0xffffffffu), "key slot 6 has "
      "4294967295 AF stripes" },
    { "cipher-des3-xts", 8, 9, "des3_ede\0", "key size of 64 bytes does "
      "not fit cipher des3_ede" },
};

static void test_field(gconstpointer data)
{
    const FieldCase *c = data;
    g_autoptr(TestImage) img = copy_image(base_image());

    memcpy(img->buf->data + c->offset, c->value, c->len);
    assert_refused(img, "pw", c->error);
}

/*
 * PBKDF2 costs above the limit (max-pbkdf2-iterations): the header is
 * legal and opens header-only (info shows it), but unlocking never runs
 * them; the error names the option that raises the limit. Without the
 * limit each case would hash for minutes: the test timeout catches that.
 */
static const FieldCase limit_cases[] = {
    { "mk-iter-huge", 164, BE32(0xffffffffu), "LUKS master key digest needs "
      "4294967295 PBKDF2 iterations, more than max-pbkdf2-iterations="
      "134217728" },
    { "slot-iter-huge", SLOT(0, 4), BE32(0x7fffffff), "key slot 0 (more "
      "than max-pbkdf2-iterations=134217728) was not tried" },
    { "slot-iter-limit-plus-1", SLOT(0, 4), BE32((1u << 27) + 1),
      "key slot 0 (more than max-pbkdf2-iterations=134217728)" },
};

static void test_limit_field(gconstpointer data)
{
    const FieldCase *c = data;
    g_autoptr(TestImage) img = copy_image(base_image());
    g_autoptr(QCryptoBlock) noio = NULL, keyed = NULL;
    g_autoptr(QCryptoBlockInfo) info = NULL;
    g_autoptr(Error) err = NULL;

    memcpy(img->buf->data + c->offset, c->value, c->len);
    noio = test_image_open(img, NULL, 0, &error_abort);
    info = qcrypto_block_get_info(noio, &error_abort);
    g_assert_true(info->slots[0].active);
    keyed = test_image_open(img, "pw", 0, &err);
    g_assert_null(keyed);
    test_error_expect(&err, c->error);
    g_assert_cmpuint(img->nwrites, ==, 0);
}

/*
 * Fields that validation cannot judge, only the master key digest can: a
 * clean "wrong passphrase", not garbage data.
 */
static const FieldCase digest_cases[] = {
    { "mk-digest", 112, 1, "\x01", NULL },
    { "mk-digest-salt", 140, 1, "\x01", NULL },
    { "mk-iter", 164, BE32(1), NULL },
    { "slot-salt", SLOT(0, 8), 1, "\x01", NULL },
    { "slot-iter", SLOT(0, 4), BE32(999), NULL },     /* base: >= 1000 */
    /* aes-128-xts instead of aes-256: half the key, wrong digest */
    { "key-bytes-32", 108, BE32(32), NULL },
    { "hash-sha1", 72, 5, "sha1\0", NULL },
    { "cipher-serpent", 8, 8, "serpent\0", NULL },
    /* (not xts-plain: below sector 2^32 it is the same IV as plain64) */
    { "cipher-mode-plain64be", 40, 14, "xts-plain64be\0", NULL },
    { "slot-key-material", 8 * 512 + 1000, 1, "\x01", NULL },
};

static void test_digest_field(gconstpointer data)
{
    const FieldCase *c = data;
    g_autoptr(TestImage) img = copy_image(base_image());
    g_autoptr(QCryptoBlock) block = NULL;
    g_autoptr(Error) err = NULL;
    uint8_t *field = img->buf->data + c->offset;

    /*
     * The digest, salts and key material are random: one byte of them
     * holds the case's value by chance once in 256 images. Then flip a bit
     * instead, so that the field really changes.
     */
    if (memcmp(field, c->value, c->len) == 0) {
        field[0] ^= 0x01;
    } else {
        memcpy(field, c->value, c->len);
    }
    block = test_image_open(img, NULL, 0, &error_abort);
    qcrypto_block_free(g_steal_pointer(&block));
    block = test_image_open(img, "pw", 0, &err);
    g_assert_null(block);
    test_error_expect(&err, "Invalid password, cannot unlock any keyslot");
}

/*
 * Bytes where any change must be refused: the magic and version, key_bytes
 * (64 is the only size aes-xts takes here), every slot's state (two legal
 * values) and stripes (one legal value).
 */
static bool byte_is_strict(size_t i)
{
    if (i < 8 || (i >= 108 && i < 112)) {
        return true;
    }
    if (i >= 208) {
        size_t field = (i - 208) % 48;

        return field < 4 || field >= 44;
    }
    return false;
}

/*
 * Every byte of the header flipped in turn and zeroed in turn: a
 * header-only open either succeeds or fails cleanly (the ASan and UBSan
 * builds check "cleanly"), and the strict fields always fail.
 */
static void test_byte_flips(void)
{
    TestImage *base = base_image();
    g_autoptr(TestImage) img = copy_image(base);
    unsigned strict = 0;

    for (size_t i = 0; i < 592; i++) {
        for (int v = 0; v < 2; v++) {
            g_autoptr(QCryptoBlock) block = NULL;
            g_autoptr(Error) err = NULL;
            uint8_t orig = base->buf->data[i];

            img->buf->data[i] = v ? orig ^ 0xff : 0;
            block = test_image_open(img, NULL, 0, &err);
            g_assert_true((block == NULL) == (err != NULL));
            if (byte_is_strict(i) && img->buf->data[i] != orig) {
                if (block) {
                    g_error("byte %zu set to 0x%02x was accepted", i,
                            img->buf->data[i]);
                }
                strict++;
            }
            img->buf->data[i] = orig;
        }
    }
    /* 8 + 4 + 8 * 8 bytes, flipped (always a change) at least. */
    g_assert_cmpuint(strict, >=, 76);
    g_assert_cmpuint(img->nwrites, ==, 0);
}

/* ---- truncated files */

static void test_truncated(void)
{
    TestImage *base = base_image();
    static const size_t short_lens[] = { 0, 1, 6, 100, 591 };
    size_t slot7_end = (3536 + 504) * 512;

    for (size_t i = 0; i < G_N_ELEMENTS(short_lens); i++) {
        g_autoptr(TestImage) img = copy_image(base);
        g_autoptr(QCryptoBlock) block = NULL;
        g_autoptr(Error) err = NULL;
        QCryptoBlockOpenOptions opts = { .format = QCRYPTO_BLOCK_FORMAT_LUKS };

        g_byte_array_set_size(img->buf, short_lens[i]);
        if (short_lens[i] == 0) {
            /* A size of 0 reads as "unknown": the read itself fails. */
            block = test_image_open(img, NULL, 0, &err);
            test_error_expect(&err, "Cannot read the LUKS header");
            continue;
        }
        block = test_image_open(img, NULL, 0, &err);
        test_error_expect(&err, "too small for a LUKS header");
        /* Size unknown: the short read is the error. */
        block = qcrypto_block_open(&opts, test_image_read, img,
                                   QCRYPTO_BLOCK_OPEN_NO_IO, &err);
        test_error_expect(&err, "Cannot read the LUKS header");
    }

    /* Header whole, key material cut off. */
    {
        g_autoptr(TestImage) img = copy_image(base);

        g_byte_array_set_size(img->buf, 4096 + 1000);
        assert_refused(img, "pw", "is beyond the end of the file");
    }
    /* Size unknown: the slot read fails, cleanly. */
    {
        g_autoptr(TestImage) img = copy_image(base);
        QCryptoBlockOpenOptions opts = {
            .format = QCRYPTO_BLOCK_FORMAT_LUKS,
            .secret = test_secret("pw"),
        };
        g_autoptr(Error) err = NULL;

        g_byte_array_set_size(img->buf, 4096 + 1000);
        g_assert_null(qcrypto_block_open(&opts, test_image_read, img, 0,
                                         &err));
        test_error_expect(&err, "Cannot read key slot 0");
    }
    /* Key material whole, payload empty: a valid 0-byte disk. */
    {
        g_autoptr(TestImage) img = copy_image(base);
        g_autoptr(QCryptoBlock) block = NULL;

        g_byte_array_set_size(img->buf, slot7_end);
        block = test_image_open(img, "pw", 0, &error_abort);
        g_byte_array_set_size(img->buf, slot7_end - 1);
        assert_refused(img, "pw", "beyond the end of the file");
    }
}

/* A detached header is checked against its own file's size. */
static void test_detached_truncated(void)
{
    QCryptoBlockCreateOptions opts = { .secret = test_secret("pw") };
    g_autoptr(TestImage) img = test_image_new();
    g_autoptr(QCryptoBlock) block = NULL;
    g_autoptr(Error) err = NULL;

    qcrypto_block_create_options_init(&opts);
    opts.has_iter_time = true;
    opts.iter_time = 10;
    opts.detached_header = true;
    block = qcrypto_block_create(&opts, test_image_init, test_image_write,
                                 img, &error_abort);
    qcrypto_block_free(g_steal_pointer(&block));

    /* Slot 7's 500 sectors of key material end at sector 4036. */
    g_byte_array_set_size(img->buf, 4036 * 512);
    block = test_image_open(img, "pw", QCRYPTO_BLOCK_OPEN_DETACHED,
                            &error_abort);
    qcrypto_block_free(g_steal_pointer(&block));
    g_byte_array_set_size(img->buf, 4036 * 512 - 1);
    block = test_image_open(img, "pw", QCRYPTO_BLOCK_OPEN_DETACHED, &err);
    g_assert_null(block);
    test_error_expect(&err, "key slot 7 key material ends at byte");
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);

    for (size_t i = 0; i < G_N_ELEMENTS(evil_cases); i++) {
        g_autofree char *path =
            g_strdup_printf("/crypto/block/luks/hostile/cryptsetup/%s",
                            evil_cases[i].file);

        g_test_add_data_func(path, &evil_cases[i], test_evil_header);
    }
    g_test_add_func("/crypto/block/luks/hostile/cryptsetup/valid-header",
                    test_valid_header_file);
    for (size_t i = 0; i < G_N_ELEMENTS(field_cases); i++) {
        g_autofree char *path =
            g_strdup_printf("/crypto/block/luks/hostile/field/%s",
                            field_cases[i].name);

        g_test_add_data_func(path, &field_cases[i], test_field);
    }
    for (size_t i = 0; i < G_N_ELEMENTS(limit_cases); i++) {
        g_autofree char *path =
            g_strdup_printf("/crypto/block/luks/hostile/limit/%s",
                            limit_cases[i].name);

        g_test_add_data_func(path, &limit_cases[i], test_limit_field);
    }
    for (size_t i = 0; i < G_N_ELEMENTS(digest_cases); i++) {
        g_autofree char *path =
            g_strdup_printf("/crypto/block/luks/hostile/digest/%s",
                            digest_cases[i].name);

        g_test_add_data_func(path, &digest_cases[i], test_digest_field);
    }
    g_test_add_func("/crypto/block/luks/hostile/byte-flips",
                    test_byte_flips);
    g_test_add_func("/crypto/block/luks/hostile/truncated", test_truncated);
    g_test_add_func("/crypto/block/luks/hostile/detached-truncated",
                    test_detached_truncated);
    return g_test_run();
}
