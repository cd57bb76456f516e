/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * LUKS1 images made by our own create: they open again and encrypt and
 * decrypt right for every cipher spec, lay their header out as QEMU 7.2
 * and cryptsetup do, and manage their key slots (amend). Images made by
 * qemu-img open too.
 */
#include <unistd.h>

#include "luks-test-image.h"
#include "test-error.h"

#define PAYLOAD_LEN (64 * 1024)

/* Offsets of LUKS1 header fields (LUKS1 spec 1.2.3, figures 1 and 2). */
#define HDR_CIPHER_NAME 8
#define HDR_CIPHER_MODE 40
#define HDR_HASH_SPEC 72
#define HDR_PAYLOAD_OFFSET 104
#define HDR_KEY_BYTES 108
#define HDR_MK_DIGEST_ITER 164
#define HDR_UUID 168
#define HDR_SLOT(i) (208 + 48 * (i))
#define SLOT_ACTIVE 0
#define SLOT_ITERATIONS 4
#define SLOT_KEY_OFFSET 40
#define SLOT_STRIPES 44

#define LUKS_SLOT_ACTIVE 0x00AC71F3
#define LUKS_SLOT_DISABLED 0x0000DEAD

static uint32_t be32_at(TestImage *img, size_t off)
{
    const uint8_t *p = img->buf->data + off;

    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
        (uint32_t)p[2] << 8 | p[3];
}

static QCryptoBlockCreateOptions test_create_options(const char *pw)
{
    QCryptoBlockCreateOptions opts = { .secret = test_secret(pw) };

    qcrypto_block_create_options_init(&opts);
    /* Short, so tests are fast; create still uses >= 1000 iterations. */
    opts.has_iter_time = true;
    opts.iter_time = 10;
    return opts;
}

/* Create an image; keep its block open in *blockp if blockp. */
static TestImage *test_create(const QCryptoBlockCreateOptions *opts,
                              QCryptoBlock **blockp)
{
    TestImage *img = test_image_new();
    g_autoptr(QCryptoBlock) block = NULL;

    block = qcrypto_block_create(opts, test_image_init, test_image_write,
                                 img, &error_abort);
    g_assert_nonnull(block);
    if (blockp) {
        *blockp = g_steal_pointer(&block);
    }
    return img;
}

static uint8_t *test_pattern(size_t len)
{
    uint8_t *buf = g_malloc(len);

    for (size_t i = 0; i < len; i++) {
        buf[i] = (uint8_t)(i * 7 + i / 512);
    }
    return buf;
}

/* Encrypt plain through block and store it in the payload area of img. */
static void test_write_payload(QCryptoBlock *block, TestImage *img,
                               const uint8_t *plain, size_t len)
{
    uint64_t off = qcrypto_block_get_payload_offset(block);
    g_autofree uint8_t *buf = g_memdup2(plain, len);

    g_assert_cmpint(qcrypto_block_encrypt(block, 0, buf, len,
                                          &error_abort), ==, 0);
    g_assert_true(memcmp(buf, plain, len) != 0);
    test_image_grow(img, off + len);
    memcpy(img->buf->data + off, buf, len);
}

/* Decrypt len bytes of img's payload from offset through block. */
static uint8_t *test_read_payload(QCryptoBlock *block, TestImage *img,
                                  uint64_t offset, size_t len)
{
    uint64_t off = qcrypto_block_get_payload_offset(block) + offset;
    uint8_t *buf = g_memdup2(img->buf->data + off, len);

    g_assert_cmpint(qcrypto_block_decrypt(block, offset, buf, len,
                                          &error_abort), ==, 0);
    return buf;
}

typedef struct CipherCase {
    const char *name;
    QCryptoCipherAlgo alg;
    QCryptoCipherMode mode;
    QCryptoIVGenAlgo ivgen;
    bool has_ivhash;
    QCryptoHashAlgo ivhash;
    QCryptoHashAlgo hash;
    /* What the header must say. */
    const char *cipher_name;
    const char *cipher_mode;
    const char *hash_spec;
    uint32_t key_bytes;
    /*
     * QEMU 7.2's payload offset in sectors: 8 sectors of header, then 8
     * slots of key_bytes * 4000 bytes, each rounded up to 4096 bytes
     * (checked against qemu-img create for 64 and 16-byte keys).
     */
    uint32_t payload_sectors;
} CipherCase;

#define A(x) QCRYPTO_CIPHER_ALGO_##x
#define M(x) QCRYPTO_CIPHER_MODE_##x
#define I(x) QCRYPTO_IVGEN_ALGO_##x
#define H(x) QCRYPTO_HASH_ALGO_##x

static const CipherCase cipher_cases[] = {
    { "aes-256-xts-plain64-sha256", A(AES_256), M(XTS), I(PLAIN64), false, 0,
      H(SHA256), "aes", "xts-plain64", "sha256", 64, 4040 },
    { "aes-128-xts-plain64-sha1", A(AES_128), M(XTS), I(PLAIN64), false, 0,
      H(SHA1), "aes", "xts-plain64", "sha1", 32, 2056 },
    { "aes-192-xts-plain-sha256", A(AES_192), M(XTS), I(PLAIN), false, 0,
      H(SHA256), "aes", "xts-plain", "sha256", 48, 3016 },
    { "aes-128-cbc-essiv-sha256", A(AES_128), M(CBC), I(ESSIV), true,
      H(SHA256), H(SHA256), "aes", "cbc-essiv:sha256", "sha256", 16, 1032 },
    { "aes-256-cbc-plain64-sha512", A(AES_256), M(CBC), I(PLAIN64), false, 0,
      H(SHA512), "aes", "cbc-plain64", "sha512", 32, 2056 },
    { "aes-192-cbc-plain-ripemd160", A(AES_192), M(CBC), I(PLAIN), false, 0,
      H(RIPEMD160), "aes", "cbc-plain", "ripemd160", 24, 1544 },
    { "aes-256-ctr-plain64-sha256", A(AES_256), M(CTR), I(PLAIN64), false, 0,
      H(SHA256), "aes", "ctr-plain64", "sha256", 32, 2056 },
    { "aes-128-ecb-sha256", A(AES_128), M(ECB), I(NULL), false, 0,
      H(SHA256), "aes", "ecb-plain64", "sha256", 16, 1032 },
    { "aes-256-lrw-benbi-sha256", A(AES_256), M(LRW), I(BENBI), false, 0,
      H(SHA256), "aes", "lrw-benbi", "sha256", 48, 3016 },
    { "aes-128-lrw-plain64-sha1", A(AES_128), M(LRW), I(PLAIN64), false, 0,
      H(SHA1), "aes", "lrw-plain64", "sha1", 32, 2056 },
    { "aes-256-xts-essiv-sha256", A(AES_256), M(XTS), I(ESSIV), true,
      H(SHA256), H(SHA256), "aes", "xts-essiv:sha256", "sha256", 64, 4040 },
    { "serpent-256-xts-plain64-sha256", A(SERPENT_256), M(XTS), I(PLAIN64),
      false, 0, H(SHA256), "serpent", "xts-plain64", "sha256", 64, 4040 },
    { "serpent-128-cbc-essiv-sha256", A(SERPENT_128), M(CBC), I(ESSIV), true,
      H(SHA256), H(SHA256), "serpent", "cbc-essiv:sha256", "sha256", 16,
      1032 },
    { "twofish-256-xts-plain64-whirlpool", A(TWOFISH_256), M(XTS),
      I(PLAIN64), false, 0, H(WHIRLPOOL), "twofish", "xts-plain64",
      "whirlpool", 64, 4040 },
    { "twofish-128-cbc-plain64-sha1", A(TWOFISH_128), M(CBC), I(PLAIN64),
      false, 0, H(SHA1), "twofish", "cbc-plain64", "sha1", 16, 1032 },
    { "cast5-128-cbc-plain64-sha256", A(CAST5_128), M(CBC), I(PLAIN64),
      false, 0, H(SHA256), "cast5", "cbc-plain64", "sha256", 16, 1032 },
    { "3des-cbc-plain64-sha256", A(DES_EDE3), M(CBC), I(PLAIN64), false, 0,
      H(SHA256), "des3_ede", "cbc-plain64", "sha256", 24, 1544 },
};

static void test_roundtrip(gconstpointer data)
{
    const CipherCase *c = data;
    QCryptoBlockCreateOptions opts = test_create_options("roundtrip pw");
    g_autoptr(QCryptoBlock) created = NULL, opened = NULL, noio = NULL;
    g_autoptr(QCryptoBlockInfo) info = NULL;
    g_autoptr(TestImage) img = NULL;
    g_autofree uint8_t *plain = test_pattern(PAYLOAD_LEN);
    g_autofree uint8_t *back = NULL, *middle = NULL;
    uint32_t stride;

    opts.cipher_alg = c->alg;
    opts.cipher_mode = c->mode;
    opts.ivgen_alg = c->ivgen;
    opts.has_ivgen_hash_alg = c->has_ivhash;
    opts.ivgen_hash_alg = c->ivhash;
    opts.hash_alg = c->hash;
    img = test_create(&opts, &created);

    /* The header says what was asked, in QEMU's layout. */
    g_assert_cmpstr((char *)img->buf->data + HDR_CIPHER_NAME, ==,
                    c->cipher_name);
    g_assert_cmpstr((char *)img->buf->data + HDR_CIPHER_MODE, ==,
                    c->cipher_mode);
    g_assert_cmpstr((char *)img->buf->data + HDR_HASH_SPEC, ==,
                    c->hash_spec);
    g_assert_cmpuint(be32_at(img, HDR_KEY_BYTES), ==, c->key_bytes);
    g_assert_cmpuint(be32_at(img, HDR_PAYLOAD_OFFSET), ==,
                     c->payload_sectors);
    g_assert_cmpuint(img->buf->len, ==, c->payload_sectors * 512ull);
    stride = (c->payload_sectors - 8) / 8;
    for (int i = 0; i < 8; i++) {
        g_assert_cmpuint(be32_at(img, HDR_SLOT(i) + SLOT_KEY_OFFSET), ==,
                         8 + stride * i);
        g_assert_cmpuint(be32_at(img, HDR_SLOT(i) + SLOT_STRIPES), ==, 4000);
        g_assert_cmphex(be32_at(img, HDR_SLOT(i) + SLOT_ACTIVE), ==,
                        i == 0 ? LUKS_SLOT_ACTIVE : LUKS_SLOT_DISABLED);
    }
    g_assert_cmpuint(be32_at(img, HDR_SLOT(0) + SLOT_ITERATIONS), >=, 1000);
    g_assert_cmpuint(be32_at(img, HDR_MK_DIGEST_ITER), >=, 1000);
    g_assert_cmpuint(qcrypto_block_get_payload_offset(created), ==,
                     c->payload_sectors * 512ull);
    g_assert_cmpuint(qcrypto_block_get_sector_size(created), ==, 512);

    test_write_payload(created, img, plain, PAYLOAD_LEN);
    if (c->mode != QCRYPTO_CIPHER_MODE_ECB) {
        /* Sectors 0 and 1 hold different plaintext; make them equal. */
        g_autofree uint8_t *two = g_malloc0(1024);

        g_assert_cmpint(qcrypto_block_encrypt(created, 0, two, 1024,
                                              &error_abort), ==, 0);
        g_assert_true(memcmp(two, two + 512, 512) != 0);
    }

    /* Header only: the info, and no key. */
    noio = test_image_open(img, NULL, 0, &error_abort);
    info = qcrypto_block_get_info(noio, &error_abort);
    g_assert_cmpint(info->version, ==, 1);
    g_assert_cmpint(info->cipher_alg, ==, c->alg);
    g_assert_cmpint(info->cipher_mode, ==, c->mode);
    /* ECB is written "ecb-plain64" for QEMU: the header names plain64. */
    g_assert_cmpint(info->ivgen_alg, ==, c->mode == QCRYPTO_CIPHER_MODE_ECB ?
                    QCRYPTO_IVGEN_ALGO_PLAIN64 : c->ivgen);
    g_assert_cmpint(info->has_ivgen_hash_alg, ==, c->has_ivhash);
    if (c->has_ivhash) {
        g_assert_cmpint(info->ivgen_hash_alg, ==, c->ivhash);
    }
    g_assert_cmpint(info->hash_alg, ==, c->hash);
    g_assert_cmpuint(info->payload_offset, ==, c->payload_sectors * 512ull);
    g_assert_false(info->detached_header);

    /* With the passphrase: the payload comes back, whole or in part. */
    opened = test_image_open(img, "roundtrip pw", 0, &error_abort);
    back = test_read_payload(opened, img, 0, PAYLOAD_LEN);
    g_assert_cmpmem(back, PAYLOAD_LEN, plain, PAYLOAD_LEN);
    middle = test_read_payload(opened, img, 8 * 512, 3 * 512);
    g_assert_cmpmem(middle, 3 * 512, plain + 8 * 512, 3 * 512);
}

static void test_wrong_passphrase(void)
{
    QCryptoBlockCreateOptions opts = test_create_options("right");
    g_autoptr(TestImage) img = test_create(&opts, NULL);
    g_autoptr(Error) err = NULL;
    QCryptoBlock *block;

    block = test_image_open(img, "wrong", 0, &err);
    g_assert_null(block);
    g_assert_cmpstr(error_get_pretty(err), ==,
                    "Invalid password, cannot unlock any keyslot");
}

static void test_empty_passphrase(void)
{
    QCryptoBlockCreateOptions opts = test_create_options("");
    g_autoptr(TestImage) img = test_create(&opts, NULL);
    g_autoptr(QCryptoBlock) block = NULL;

    block = test_image_open(img, "", 0, &error_abort);
}

/* Binary key files (cryptsetup's) are passphrases too: NULs and all. */
static void test_binary_passphrase(void)
{
    static const uint8_t key[] = { 0, 0xff, 0, 'a', 0x80, 0 };
    QCryptoBlockCreateOptions opts = test_create_options("");
    QCryptoBlockOpenOptions oopts = { .format = QCRYPTO_BLOCK_FORMAT_LUKS };
    g_autoptr(TestImage) img = NULL;
    g_autoptr(QCryptoBlock) block = NULL;
    g_autoptr(Error) err = NULL;

    opts.secret = (QCryptoBlockSecret) { key, sizeof(key) };
    img = test_create(&opts, NULL);
    oopts.size = img->buf->len;
    /*
     * Read as a C string, the key would be empty. (Dropping the trailing
     * NUL would not do as a wrong key: HMAC pads short keys with zeroes.)
     */
    oopts.secret = (QCryptoBlockSecret) { key, strlen((const char *)key) };
    block = qcrypto_block_open(&oopts, test_image_read, img, 0, &err);
    test_error_expect(&err, "Invalid password");
    oopts.secret.len = sizeof(key);
    block = qcrypto_block_open(&oopts, test_image_read, img, 0, &error_abort);
}

static void test_no_io_cannot_crypt(void)
{
    QCryptoBlockCreateOptions opts = test_create_options("pw");
    g_autoptr(TestImage) img = test_create(&opts, NULL);
    g_autoptr(QCryptoBlock) block = test_image_open(img, NULL, 0, NULL);
    g_autoptr(Error) err = NULL;
    uint8_t buf[512] = { 0 };

    g_assert_nonnull(block);
    g_assert_cmpint(qcrypto_block_decrypt(block, 0, buf, sizeof(buf), &err),
                    ==, -1);
    test_error_expect(&err, "opened without its key");
}

static void test_unaligned_request(void)
{
    QCryptoBlockCreateOptions opts = test_create_options("pw");
    g_autoptr(QCryptoBlock) block = NULL;
    g_autoptr(TestImage) img = test_create(&opts, &block);
    g_autoptr(Error) err = NULL;
    uint8_t buf[1024] = { 0 };

    g_assert_cmpint(qcrypto_block_encrypt(block, 100, buf, 512, &err), ==,
                    -1);
    test_error_expect(&err, "not aligned");
    g_assert_cmpint(qcrypto_block_encrypt(block, 0, buf, 700, &err), ==, -1);
    test_error_expect(&err, "not aligned");
}

static void test_has_format(void)
{
    QCryptoBlockCreateOptions opts = test_create_options("pw");
    g_autoptr(TestImage) img = test_create(&opts, NULL);
    uint8_t zero[592] = { 0 };

    g_assert_true(qcrypto_block_has_format(QCRYPTO_BLOCK_FORMAT_LUKS,
                                           img->buf->data, 592));
    g_assert_false(qcrypto_block_has_format(QCRYPTO_BLOCK_FORMAT_LUKS,
                                            img->buf->data, 7));
    g_assert_false(qcrypto_block_has_format(QCRYPTO_BLOCK_FORMAT_LUKS,
                                            zero, sizeof(zero)));
    /* LUKS2 has the same magic, version 2: the same format, its driver. */
    img->buf->data[7] = 2;
    g_assert_true(qcrypto_block_has_format(QCRYPTO_BLOCK_FORMAT_LUKS,
                                           img->buf->data, 592));
    img->buf->data[7] = 3;
    g_assert_false(qcrypto_block_has_format(QCRYPTO_BLOCK_FORMAT_LUKS,
                                            img->buf->data, 592));
}

static void test_info(void)
{
    QCryptoBlockCreateOptions opts = test_create_options("pw");
    g_autoptr(QCryptoBlock) block = NULL;
    g_autoptr(TestImage) img = test_create(&opts, &block);
    g_autoptr(QCryptoBlockInfo) info = NULL;

    info = qcrypto_block_get_info(block, &error_abort);
    g_assert_cmpint(info->format, ==, QCRYPTO_BLOCK_FORMAT_LUKS);
    g_assert_true(g_uuid_string_is_valid(info->uuid));
    g_assert_cmpstr(info->uuid, ==, (char *)img->buf->data + HDR_UUID);
    g_assert_cmpuint(info->master_key_iters, ==,
                     be32_at(img, HDR_MK_DIGEST_ITER));
    g_assert_cmpuint(info->nslots, ==, 8);
    for (size_t i = 0; i < info->nslots; i++) {
        g_assert_cmpint(info->slots[i].active, ==, i == 0);
        g_assert_cmpuint(info->slots[i].key_offset, ==,
                         4096 + 258048 * i);
        g_assert_cmpuint(info->slots[i].stripes, ==, 4000);
    }
    g_assert_cmpuint(info->slots[0].iters, ==,
                     be32_at(img, HDR_SLOT(0) + SLOT_ITERATIONS));
    g_assert_cmpuint(info->payload_offset, ==, 2068480);
}

/* cryptsetup's --align-payload: the payload offset rounded up. */
static void test_align_payload(void)
{
    static const struct {
        uint64_t align;
        uint32_t payload;
    } cases[] = {
        { 2048, 4096 },     /* cryptsetup's default: 1 MiB */
        { 8, 4040 },        /* already aligned: as QEMU */
        { 1, 4040 },
        { 3000, 6000 },     /* not a power of two */
    };

    for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
        QCryptoBlockCreateOptions opts = test_create_options("pw");
        g_autoptr(TestImage) img = NULL;
        g_autoptr(QCryptoBlock) block = NULL;
        uint64_t calc;

        opts.align_payload = cases[i].align;
        g_assert_cmpint(qcrypto_block_calculate_payload_offset(
                            &opts, &calc, &error_abort), ==, 0);
        g_assert_cmpuint(calc, ==, cases[i].payload * 512ull);
        img = test_create(&opts, NULL);
        g_assert_cmpuint(be32_at(img, HDR_PAYLOAD_OFFSET), ==,
                         cases[i].payload);
        block = test_image_open(img, "pw", 0, &error_abort);
        g_assert_cmpuint(qcrypto_block_get_payload_offset(block), ==, calc);
    }
}

static void test_detached_header(void)
{
    QCryptoBlockCreateOptions opts = test_create_options("pw");
    g_autoptr(QCryptoBlock) created = NULL, block = NULL;
    g_autoptr(QCryptoBlockInfo) info = NULL;
    g_autoptr(TestImage) img = NULL;
    g_autoptr(Error) err = NULL;
    g_autofree uint8_t *plain = test_pattern(4096);
    g_autofree uint8_t *data = g_memdup2(plain, 4096);
    uint64_t calc = 1;

    opts.detached_header = true;
    g_assert_cmpint(qcrypto_block_calculate_payload_offset(&opts, &calc,
                                                           &err), ==, 0);
    g_assert_cmpuint(calc, ==, 0);
    img = test_create(&opts, &created);
    /* The header file holds the header and key slots, nothing else. */
    g_assert_cmpuint(img->buf->len, ==, 4040 * 512);
    g_assert_cmpuint(be32_at(img, HDR_PAYLOAD_OFFSET), ==, 0);
    g_assert_cmpuint(qcrypto_block_get_payload_offset(created), ==, 0);
    g_assert_cmpint(qcrypto_block_encrypt(created, 0, data, 4096, &err), ==,
                    0);

    block = test_image_open(img, "pw", 0, &err);
    g_assert_null(block);
    test_error_expect(&err, "detached header");

    block = test_image_open(img, "pw", QCRYPTO_BLOCK_OPEN_DETACHED,
                            &error_abort);
    info = qcrypto_block_get_info(block, &error_abort);
    g_assert_true(info->detached_header);
    g_assert_cmpuint(info->payload_offset, ==, 0);
    g_assert_cmpint(qcrypto_block_decrypt(block, 0, data, 4096,
                                          &error_abort), ==, 0);
    g_assert_cmpmem(data, 4096, plain, 4096);

    /* cryptsetup --header --offset 2048: the data starts 1 MiB in. */
    qcrypto_block_free(g_steal_pointer(&block));
    img->buf->data[HDR_PAYLOAD_OFFSET + 2] = 2048 >> 8;
    block = test_image_open(img, "pw", QCRYPTO_BLOCK_OPEN_DETACHED,
                            &error_abort);
    g_assert_cmpuint(qcrypto_block_get_payload_offset(block), ==,
                     2048 * 512);

    opts.align_payload = 2048;
    g_assert_cmpint(qcrypto_block_calculate_payload_offset(&opts, &calc,
                                                           &err), ==, -1);
    test_error_expect(&err, "align-payload cannot be used with a detached");
}

static void test_create_bad_options(void)
{
    static const struct {
        QCryptoCipherAlgo alg;
        QCryptoCipherMode mode;
        const char *error;
    } cases[] = {
        { QCRYPTO_CIPHER_ALGO_DES_EDE3, QCRYPTO_CIPHER_MODE_XTS,
          "needs a 128-bit block cipher" },
        { QCRYPTO_CIPHER_ALGO_CAST5_128, QCRYPTO_CIPHER_MODE_LRW,
          "needs a 128-bit block cipher" },
        { QCRYPTO_CIPHER_ALGO__MAX, QCRYPTO_CIPHER_MODE_XTS,
          "unknown algorithm" },
        /* ESSIV with SHA-256 would need a 32-byte 3DES key. */
        { QCRYPTO_CIPHER_ALGO_DES_EDE3, QCRYPTO_CIPHER_MODE_CBC,
          "ESSIV" },
    };

    for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
        QCryptoBlockCreateOptions opts = test_create_options("pw");
        g_autoptr(TestImage) img = test_image_new();
        g_autoptr(Error) err = NULL;

        opts.cipher_alg = cases[i].alg;
        opts.cipher_mode = cases[i].mode;
        opts.ivgen_alg = QCRYPTO_IVGEN_ALGO_ESSIV;
        g_assert_null(qcrypto_block_create(&opts, test_image_init,
                                           test_image_write, img, &err));
        test_error_expect(&err, cases[i].error);
        /* Refused before anything was written. */
        g_assert_cmpuint(img->nwrites, ==, 0);
    }
}

/* ---- amend: adding and erasing key slots */

static void test_amend(QCryptoBlock *block, TestImage *img,
                       const QCryptoBlockAmendOptions *opts, bool force,
                       const char *error)
{
    g_autoptr(Error) err = NULL;
    /* Only an expected error is kept; any other aborts with its message. */
    int ret = qcrypto_block_amend_options(block, test_image_read,
                                          test_image_write, NULL, img, opts,
                                          force,
                                          error ? &err : &error_abort);

    if (error) {
        g_assert_cmpint(ret, ==, -1);
        test_error_expect(&err, error);
    } else {
        g_assert_cmpint(ret, ==, 0);
    }
}

static QCryptoBlockAmendOptions test_amend_add(int keyslot, const char *old,
                                               const char *new)
{
    QCryptoBlockAmendOptions o = {
        .state = QCRYPTO_BLOCK_AMEND_STATE_ACTIVE,
        .has_keyslot = keyslot >= 0, .keyslot = keyslot,
        .has_old_secret = old != NULL,
        .has_new_secret = new != NULL,
        .has_iter_time = true, .iter_time = 10,
    };

    if (old) {
        o.old_secret = test_secret(old);
    }
    if (new) {
        o.new_secret = test_secret(new);
    }
    return o;
}

static QCryptoBlockAmendOptions test_amend_erase(int keyslot,
                                                 const char *old)
{
    QCryptoBlockAmendOptions o = {
        .state = QCRYPTO_BLOCK_AMEND_STATE_INACTIVE,
        .has_keyslot = keyslot >= 0, .keyslot = keyslot,
        .has_old_secret = old != NULL,
    };

    if (old) {
        o.old_secret = test_secret(old);
    }
    return o;
}

static void test_opens(TestImage *img, const char *pw, bool ok)
{
    g_autoptr(QCryptoBlock) block = NULL;
    g_autoptr(Error) err = NULL;

    block = test_image_open(img, pw, 0, ok ? &error_abort : &err);
    if (!ok) {
        g_assert_null(block);
        test_error_expect(&err, "Invalid password, cannot unlock any keyslot");
    }
}

static bool slot_active(TestImage *img, int i)
{
    return be32_at(img, HDR_SLOT(i) + SLOT_ACTIVE) == LUKS_SLOT_ACTIVE;
}

static void test_amend_add_remove(void)
{
    QCryptoBlockCreateOptions copts = test_create_options("pw0");
    g_autoptr(QCryptoBlock) block = NULL;
    g_autoptr(TestImage) img = test_create(&copts, &block);
    g_autofree uint8_t *plain = test_pattern(PAYLOAD_LEN);
    g_autofree uint8_t *back = NULL, *slot1 = NULL;
    uint64_t slot1_off = 4096 + 258048;
    QCryptoBlockAmendOptions o;

    test_write_payload(block, img, plain, PAYLOAD_LEN);

    /* First free slot, unlocked by the key the block was opened with. */
    o = test_amend_add(-1, NULL, "pw1");
    test_amend(block, img, &o, false, NULL);
    g_assert_true(slot_active(img, 1));
    g_assert_cmpuint(be32_at(img, HDR_SLOT(1) + SLOT_ITERATIONS), >=, 1000);
    test_opens(img, "pw1", true);
    test_opens(img, "pw0", true);

    /* A chosen slot, unlocked by old-secret. */
    o = test_amend_add(5, "pw1", "pw5");
    test_amend(block, img, &o, false, NULL);
    g_assert_true(slot_active(img, 5));
    g_assert_false(slot_active(img, 2));
    {
        g_autoptr(QCryptoBlock) b5 = test_image_open(img, "pw5", 0, NULL);

        g_assert_nonnull(b5);
        back = test_read_payload(b5, img, 0, PAYLOAD_LEN);
        g_assert_cmpmem(back, PAYLOAD_LEN, plain, PAYLOAD_LEN);
    }

    o = test_amend_add(5, NULL, "again");
    test_amend(block, img, &o, false, "Refusing to overwrite active "
               "keyslot 5 - please erase it first");
    o = test_amend_add(8, NULL, "x");
    test_amend(block, img, &o, false,
               "Invalid keyslot 8 specified, must be between 0 and 7");
    o = test_amend_add(-1, "nope", "x");
    test_amend(block, img, &o, false,
               "Invalid password, cannot unlock any keyslot");
    o = test_amend_add(-1, NULL, NULL);
    test_amend(block, img, &o, false,
               "'new-secret' is required to activate a keyslot");
    g_assert_false(slot_active(img, 2));

    /* Erase by index: disabled, key material overwritten. */
    slot1 = g_memdup2(img->buf->data + slot1_off, 256000);
    o = test_amend_erase(1, NULL);
    test_amend(block, img, &o, false, NULL);
    g_assert_false(slot_active(img, 1));
    g_assert_cmpuint(be32_at(img, HDR_SLOT(1) + SLOT_ITERATIONS), ==, 0);
    g_assert_true(memcmp(slot1, img->buf->data + slot1_off, 256000) != 0);
    test_opens(img, "pw1", false);
    o = test_amend_erase(1, NULL);
    test_amend(block, img, &o, false,
               "Given keyslot 1 is already erased (inactive)");

    /* Erase by passphrase. */
    o = test_amend_erase(-1, "nope");
    test_amend(block, img, &o, false,
               "No keyslots match given (old) password for erase operation");
    o = test_amend_erase(-1, "pw5");
    test_amend(block, img, &o, false, NULL);
    g_assert_false(slot_active(img, 5));
    test_opens(img, "pw5", false);

    o = test_amend_erase(-1, NULL);
    test_amend(block, img, &o, false,
               "either explicit keyslot index or the password");
    o = test_amend_erase(0, NULL);
    o.has_new_secret = true;
    o.new_secret = test_secret("x");
    test_amend(block, img, &o, false,
               "'new-secret' must not be given when erasing keyslots");
    /* keyslot and old-secret: the slot must hold that passphrase. */
    o = test_amend_erase(0, "nope");
    test_amend(block, img, &o, false, "Given keyslot 0 doesn't contain the "
               "given old password for erase operation");

    /* The last slot only with force, named by index or by passphrase. */
    o = test_amend_erase(0, "pw0");
    test_amend(block, img, &o, false,
               "Attempt to erase the only active keyslot 0 which will erase "
               "all the data in the image irreversibly - refusing operation");
    o = test_amend_erase(-1, "pw0");
    test_amend(block, img, &o, false,
               "All the active keyslots match the (old) password that was "
               "given and erasing them will erase all the data in the image "
               "irreversibly - refusing operation");
    o = test_amend_erase(0, NULL);
    test_amend(block, img, &o, false, "Attempt to erase the only active");
    test_opens(img, "pw0", true);
    test_amend(block, img, &o, true, NULL);
    test_opens(img, "pw0", false);
    for (int i = 0; i < 8; i++) {
        g_assert_false(slot_active(img, i));
    }
}

static void test_amend_full(void)
{
    QCryptoBlockCreateOptions copts = test_create_options("pw0");
    g_autoptr(QCryptoBlock) block = NULL;
    g_autoptr(TestImage) img = test_create(&copts, &block);
    QCryptoBlockAmendOptions o;

    for (int i = 1; i < 8; i++) {
        g_autofree char *pw = g_strdup_printf("pw%d", i);

        o = test_amend_add(-1, NULL, pw);
        test_amend(block, img, &o, false, NULL);
        g_assert_true(slot_active(img, i));
    }
    o = test_amend_add(-1, NULL, "pw8");
    test_amend(block, img, &o, false,
               "Can't add a keyslot - all keyslots are in use");
    test_opens(img, "pw7", true);
}

/* A header-only block has no key: old-secret must unlock one. */
static void test_amend_no_io(void)
{
    QCryptoBlockCreateOptions copts = test_create_options("pw0");
    g_autoptr(TestImage) img = test_create(&copts, NULL);
    g_autoptr(QCryptoBlock) block = test_image_open(img, NULL, 0, NULL);
    QCryptoBlockAmendOptions o;

    g_assert_nonnull(block);
    o = test_amend_add(-1, NULL, "pw1");
    test_amend(block, img, &o, false, "needs old-secret");
    g_assert_false(slot_active(img, 1));
    o = test_amend_add(-1, "pw0", "pw1");
    test_amend(block, img, &o, false, NULL);
    test_opens(img, "pw1", true);
}

/* ---- two threads decrypting at once, each must get its own cipher */

typedef struct ThreadJob {
    QCryptoBlock *block;
    uint8_t *cipher;        /* ciphertext of the whole payload */
    const uint8_t *plain;
    uint64_t start;
    gboolean ok;
} ThreadJob;

static gpointer test_thread_decrypt(gpointer opaque)
{
    ThreadJob *job = opaque;
    g_autofree uint8_t *buf = g_malloc(8192);

    job->ok = TRUE;
    for (int round = 0; round < 200; round++) {
        uint64_t off = job->start + (round % 4) * 8192;

        memcpy(buf, job->cipher + off, 8192);
        if (qcrypto_block_decrypt(job->block, off, buf, 8192, NULL) < 0 ||
            memcmp(buf, job->plain + off, 8192) != 0) {
            job->ok = FALSE;
        }
    }
    return NULL;
}

static void test_threads(void)
{
    QCryptoBlockCreateOptions opts = test_create_options("pw");
    g_autoptr(QCryptoBlock) block = NULL;
    g_autoptr(TestImage) img = NULL;
    g_autofree uint8_t *plain = test_pattern(PAYLOAD_LEN);
    ThreadJob jobs[2];
    GThread *threads[2];

    /* CBC carries its IV in the cipher: sharing one would garble data. */
    opts.cipher_mode = QCRYPTO_CIPHER_MODE_CBC;
    opts.ivgen_alg = QCRYPTO_IVGEN_ALGO_ESSIV;
    img = test_create(&opts, &block);
    test_write_payload(block, img, plain, PAYLOAD_LEN);
    for (int i = 0; i < 2; i++) {
        jobs[i] = (ThreadJob) {
            .block = block, .plain = plain, .start = i * 32768,
            .cipher = img->buf->data + qcrypto_block_get_payload_offset(block),
        };
        threads[i] = g_thread_new("decrypt", test_thread_decrypt, &jobs[i]);
    }
    for (int i = 0; i < 2; i++) {
        g_thread_join(threads[i]);
        g_assert_true(jobs[i].ok);
    }
}

/* ---- an image made by qemu-img */

static void test_qemu_img_image(void)
{
    g_autofree char *qemu_img = g_find_program_in_path("qemu-img");
    g_autofree char *qemu_io = g_find_program_in_path("qemu-io");
    g_autofree char *dir = NULL, *path = NULL, *imgopts = NULL;
    g_autoptr(TestImage) img = NULL;
    g_autoptr(QCryptoBlock) block = NULL;
    g_autofree uint8_t *back = NULL;
    uint8_t expect[65536];

    if (!qemu_img || !qemu_io) {
        g_test_skip("qemu-img or qemu-io is not installed");
        return;
    }
    dir = g_dir_make_tmp("qil-luks-XXXXXX", NULL);
    path = g_build_filename(dir, "q.luks", NULL);
    imgopts = g_strdup_printf("driver=luks,key-secret=s0,file.filename=%s",
                              path);
    {
        const char *create[] = {
            qemu_img, "create", "-q", "-f", "luks", "--object",
            "secret,id=s0,data=pw", "-o", "key-secret=s0,iter-time=10",
            path, "1M", NULL
        };
        const char *write[] = {
            qemu_io, "--object", "secret,id=s0,data=pw", "--image-opts",
            imgopts, "-c", "write -P 0x5a 0 64k", NULL
        };

        bool created = false;

        /*
         * qemu-img's own PBKDF2 calibration fails ("Unable to get
         * accurate CPU usage") whenever its first round takes less than
         * one tick of thread CPU time: on this kind of VM most runs with
         * sha256. Each failure is quick; 60 tries make a miss ~1e-8.
         */
        for (int attempt = 0; attempt < 60 && !created; attempt++) {
            created = test_run_capture(create, NULL);
        }
        g_assert_true(created);
        test_run(write);
    }
    img = test_image_load(path);
    test_rm_rf(dir);

    block = test_image_open(img, "pw", 0, &error_abort);
    g_assert_cmpuint(qcrypto_block_get_payload_offset(block), ==, 2068480);
    back = test_read_payload(block, img, 0, sizeof(expect));
    memset(expect, 0x5a, sizeof(expect));
    g_assert_cmpmem(back, sizeof(expect), expect, sizeof(expect));
}

/* The reverse: qemu-io reads what we wrote, in several cipher specs. */
static void test_qemu_reads_ours(gconstpointer data)
{
    const CipherCase *c = data;
    g_autofree char *qemu_io = g_find_program_in_path("qemu-io");
    QCryptoBlockCreateOptions opts = test_create_options("pw");
    g_autoptr(QCryptoBlock) block = NULL;
    g_autoptr(TestImage) img = NULL;
    g_autofree char *dir = NULL, *path = NULL, *imgopts = NULL;
    g_autofree char *out = NULL;
    g_autofree uint8_t *plain = g_malloc(PAYLOAD_LEN);

    if (!qemu_io) {
        g_test_skip("qemu-io is not installed");
        return;
    }
    opts.cipher_alg = c->alg;
    opts.cipher_mode = c->mode;
    opts.ivgen_alg = c->ivgen;
    opts.has_ivgen_hash_alg = c->has_ivhash;
    opts.ivgen_hash_alg = c->ivhash;
    opts.hash_alg = c->hash;
    img = test_create(&opts, &block);
    memset(plain, 0xa5, PAYLOAD_LEN);
    test_write_payload(block, img, plain, PAYLOAD_LEN);

    dir = g_dir_make_tmp("qil-luks-XXXXXX", NULL);
    path = g_build_filename(dir, "ours.luks", NULL);
    g_assert_true(g_file_set_contents(path, (char *)img->buf->data,
                                      img->buf->len, NULL));
    imgopts = g_strdup_printf("driver=luks,key-secret=s0,file.filename=%s",
                              path);
    {
        const char *read[] = {
            qemu_io, "--object", "secret,id=s0,data=pw", "--image-opts",
            imgopts, "-c", "read -P 0xa5 0 64k", NULL
        };

        g_assert_true(test_run_capture(read, &out));
    }
    test_rm_rf(dir);
    g_assert_null(strstr(out, "Pattern verification failed"));
    g_assert_nonnull(strstr(out, "read 65536/65536 bytes"));
}

/* ---- cryptsetup (AES only here: other ciphers need dm-crypt) */

static void write_file(const char *path, const void *data, size_t len)
{
    g_assert_true(g_file_set_contents(path, data, len, NULL));
}

/* cryptsetup open --test-passphrase with a key file; true if accepted. */
static bool cryptsetup_accepts(const char *cryptsetup, const char *image,
                               const char *keyfile)
{
    const char *argv[] = { cryptsetup, "open", "--test-passphrase",
                           "--key-file", keyfile, image, NULL };

    return test_run_capture(argv, NULL);
}

typedef struct CryptsetupCase {
    const char *name;
    const char *cipher;
    const char *key_size;
    const char *hash;
} CryptsetupCase;

static const CryptsetupCase cryptsetup_cases[] = {
    { "aes-xts-plain64", "aes-xts-plain64", "512", "sha256" },
    { "aes-cbc-essiv", "aes-cbc-essiv:sha256", "256", "sha1" },
};

/*
 * cryptsetup luksFormat makes an image (binary key file, NULs included):
 * we open it and add a key slot, which cryptsetup then accepts, while the
 * first key still works.
 */
static void test_cryptsetup_format(gconstpointer data)
{
    const CryptsetupCase *c = data;
    static const uint8_t key1[] = { 'k', 0, 0xff, 1, 2, 3, 0, 'z' };
    g_autofree char *cryptsetup = g_find_program_in_path("cryptsetup");
    g_autofree char *dir = NULL, *path = NULL, *key1path = NULL;
    g_autofree char *key2path = NULL, *zero = NULL;
    QCryptoBlockOpenOptions oopts = { .format = QCRYPTO_BLOCK_FORMAT_LUKS };
    QCryptoBlockAmendOptions add = test_amend_add(-1, NULL, "second key");
    g_autoptr(TestImage) img = NULL;
    g_autoptr(QCryptoBlock) block = NULL;

    if (!cryptsetup) {
        g_test_skip("cryptsetup is not installed");
        return;
    }
    dir = g_dir_make_tmp("qil-luks-XXXXXX", NULL);
    path = g_build_filename(dir, "cs.img", NULL);
    key1path = g_build_filename(dir, "key1", NULL);
    key2path = g_build_filename(dir, "key2", NULL);
    zero = g_malloc0(3 * 1024 * 1024);
    write_file(path, zero, 3 * 1024 * 1024);
    write_file(key1path, key1, sizeof(key1));
    write_file(key2path, "second key", strlen("second key"));
    {
        const char *format[] = {
            cryptsetup, "luksFormat", "--type", "luks1", "-q",
            "--pbkdf-force-iterations", "1000", "--cipher", c->cipher,
            "--key-size", c->key_size, "--hash", c->hash,
            "--key-file", key1path, path, NULL
        };

        test_run(format);
    }

    img = test_image_load(path);
    oopts.size = img->buf->len;
    oopts.secret = (QCryptoBlockSecret) { key1, sizeof(key1) };
    block = qcrypto_block_open(&oopts, test_image_read, img, 0, &error_abort);
    /*
     * cryptsetup's default alignment, 2048 sectors: the end of slot 7
     * (sector 4040 or 2056 for these key sizes) rounds up to 4096.
     */
    g_assert_cmpuint(qcrypto_block_get_payload_offset(block), ==, 4096 * 512);
    test_amend(block, img, &add, false, NULL);
    write_file(path, img->buf->data, img->buf->len);

    g_assert_true(cryptsetup_accepts(cryptsetup, path, key2path));
    g_assert_true(cryptsetup_accepts(cryptsetup, path, key1path));
    test_rm_rf(dir);
}

/* Our images, and key slots we add to them, pass cryptsetup's checks. */
static void test_cryptsetup_reads_ours(gconstpointer data)
{
    const CipherCase *c = data;
    g_autofree char *cryptsetup = g_find_program_in_path("cryptsetup");
    QCryptoBlockCreateOptions opts = test_create_options("first");
    QCryptoBlockAmendOptions add = test_amend_add(3, NULL, "second");
    g_autofree char *dir = NULL, *path = NULL, *k1 = NULL, *k2 = NULL;
    g_autofree char *k3 = NULL;
    g_autoptr(QCryptoBlock) block = NULL;
    g_autoptr(TestImage) img = NULL;

    if (!cryptsetup) {
        g_test_skip("cryptsetup is not installed");
        return;
    }
    opts.cipher_alg = c->alg;
    opts.cipher_mode = c->mode;
    opts.ivgen_alg = c->ivgen;
    opts.has_ivgen_hash_alg = c->has_ivhash;
    opts.ivgen_hash_alg = c->ivhash;
    opts.hash_alg = c->hash;
    img = test_create(&opts, &block);
    test_amend(block, img, &add, false, NULL);
    test_image_grow(img, img->buf->len + 1024 * 1024);

    dir = g_dir_make_tmp("qil-luks-XXXXXX", NULL);
    path = g_build_filename(dir, "ours.img", NULL);
    k1 = g_build_filename(dir, "k1", NULL);
    k2 = g_build_filename(dir, "k2", NULL);
    k3 = g_build_filename(dir, "k3", NULL);
    write_file(path, img->buf->data, img->buf->len);
    write_file(k1, "first", 5);
    write_file(k2, "second", 6);
    write_file(k3, "third", 5);
    g_assert_true(cryptsetup_accepts(cryptsetup, path, k1));
    g_assert_true(cryptsetup_accepts(cryptsetup, path, k2));
    g_assert_false(cryptsetup_accepts(cryptsetup, path, k3));
    test_rm_rf(dir);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);

    for (size_t i = 0; i < G_N_ELEMENTS(cipher_cases); i++) {
        g_autofree char *path =
            g_strdup_printf("/crypto/block/luks/roundtrip/%s",
                            cipher_cases[i].name);

        g_test_add_data_func(path, &cipher_cases[i], test_roundtrip);
    }
    g_test_add_func("/crypto/block/luks/wrong-passphrase",
                    test_wrong_passphrase);
    g_test_add_func("/crypto/block/luks/empty-passphrase",
                    test_empty_passphrase);
    g_test_add_func("/crypto/block/luks/binary-passphrase",
                    test_binary_passphrase);
    g_test_add_func("/crypto/block/luks/no-io", test_no_io_cannot_crypt);
    g_test_add_func("/crypto/block/luks/unaligned", test_unaligned_request);
    g_test_add_func("/crypto/block/luks/has-format", test_has_format);
    g_test_add_func("/crypto/block/luks/info", test_info);
    g_test_add_func("/crypto/block/luks/align-payload", test_align_payload);
    g_test_add_func("/crypto/block/luks/detached-header",
                    test_detached_header);
    g_test_add_func("/crypto/block/luks/create-bad-options",
                    test_create_bad_options);
    g_test_add_func("/crypto/block/luks/amend/add-remove",
                    test_amend_add_remove);
    g_test_add_func("/crypto/block/luks/amend/full", test_amend_full);
    g_test_add_func("/crypto/block/luks/amend/no-io", test_amend_no_io);
    g_test_add_func("/crypto/block/luks/threads", test_threads);
    g_test_add_func("/crypto/block/luks/qemu-img/open",
                    test_qemu_img_image);
    /* AES (qemu-img's default), CBC-ESSIV, and a non-AES cipher. */
    g_test_add_data_func("/crypto/block/luks/qemu-img/reads-ours/aes-xts",
                         &cipher_cases[0], test_qemu_reads_ours);
    g_test_add_data_func("/crypto/block/luks/qemu-img/reads-ours/aes-cbc",
                         &cipher_cases[3], test_qemu_reads_ours);
    g_test_add_data_func("/crypto/block/luks/qemu-img/reads-ours/serpent-xts",
                         &cipher_cases[11], test_qemu_reads_ours);
    for (size_t i = 0; i < G_N_ELEMENTS(cryptsetup_cases); i++) {
        g_autofree char *path =
            g_strdup_printf("/crypto/block/luks/cryptsetup/format/%s",
                            cryptsetup_cases[i].name);

        g_test_add_data_func(path, &cryptsetup_cases[i],
                             test_cryptsetup_format);
    }
    g_test_add_data_func("/crypto/block/luks/cryptsetup/reads-ours/aes-xts",
                         &cipher_cases[0], test_cryptsetup_reads_ours);
    g_test_add_data_func("/crypto/block/luks/cryptsetup/reads-ours/aes-cbc",
                         &cipher_cases[3], test_cryptsetup_reads_ours);
    return g_test_run();
}
