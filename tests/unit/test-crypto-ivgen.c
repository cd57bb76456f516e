/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * IV generators: a known-answer table for each, at 512-byte sectors
 * (shift 0) and at 4096-byte sectors counted in 512-byte units (shift 3,
 * LUKS2 with iv_large_sectors off), and the errors a caller can cause.
 *
 * Each row is checked twice: on the generator itself, handed the number
 * sector << shift, and through a sector cipher (crypto/sector.h) with
 * that shift, which must feed exactly this IV to its cipher. CBC shows
 * the IV it was given: for a zero plaintext block, the ciphertext is
 * E_K(IV), so decrypting it under K gives the IV back.
 *
 * The plain / plain64 / plain64be / benbi / null answers are the byte
 * layouts dm-crypt documents (Linux drivers/md/dm-crypt.c, the comment
 * block above crypt_iv_*): written out by hand here, one row per sector.
 *
 * The ESSIV answers come from an independent implementation, the OpenSSL
 * 3.0 command line: salt = digest of the key, IV = ECB encryption under
 * the salt of the 64-bit little-endian sector number padded with zeroes
 * to one block. For example (aes-128 + sha256, key 00..0f, sector 1):
 *
 *   salt=$(echo 000102030405060708090a0b0c0d0e0f | xxd -r -p |
 *          openssl dgst -sha256 -r | cut -d' ' -f1)
 *   echo 01000000000000000000000000000000 | xxd -r -p |
 *       openssl enc -aes-256-ecb -nopad -K $salt | xxd -p
 *
 * md5 and cast5-ecb likewise; whirlpool and cast5 need
 * "-provider legacy -provider default", and wp256 is the first 32 bytes
 * of the whirlpool digest.
 */
#include <string.h>

#include "crypto/ivgen.h"
#include "crypto/sector.h"
#include "test-error.h"

#define KEY16 "000102030405060708090a0b0c0d0e0f"
#define KEY32 KEY16 "101112131415161718191a1b1c1d1e1f"

typedef struct {
    QCryptoIVGenAlgo ivgen;
    QCryptoCipherAlgo cipher;
    QCryptoHashAlgo hash;       /* ESSIV only */
    const char *key;            /* hex, ESSIV only */
    unsigned shift;             /* the sector cipher's iv_shift */
    uint64_t sector;
    const char *iv;             /* hex, one cipher block */
} IVGenTest;

#define AES QCRYPTO_CIPHER_ALGO_AES_128
#define AES256 QCRYPTO_CIPHER_ALGO_AES_256
#define DES3 QCRYPTO_CIPHER_ALGO_DES_EDE3
#define CAST5 QCRYPTO_CIPHER_ALGO_CAST5_128
#define TWOFISH QCRYPTO_CIPHER_ALGO_TWOFISH_256

#define PLAIN(c, sh, s, iv) \
    { QCRYPTO_IVGEN_ALGO_PLAIN, c, 0, NULL, sh, s, iv }
#define PLAIN64(c, sh, s, iv) \
    { QCRYPTO_IVGEN_ALGO_PLAIN64, c, 0, NULL, sh, s, iv }
#define PLAIN64BE(c, sh, s, iv) \
    { QCRYPTO_IVGEN_ALGO_PLAIN64BE, c, 0, NULL, sh, s, iv }
#define BENBI(c, sh, s, iv) \
    { QCRYPTO_IVGEN_ALGO_BENBI, c, 0, NULL, sh, s, iv }
#define NULLIV(c, sh, s, iv) \
    { QCRYPTO_IVGEN_ALGO_NULL, c, 0, NULL, sh, s, iv }
#define ESSIV(c, h, k, sh, s, iv) \
    { QCRYPTO_IVGEN_ALGO_ESSIV, c, QCRYPTO_HASH_ALGO_##h, k, sh, s, iv }

static const IVGenTest ivgen_tests[] = {
    /* plain: 32-bit little-endian; 2^32 + 1 wraps to 1. */
    PLAIN(AES, 0, 0, "00000000000000000000000000000000"),
    PLAIN(AES, 0, 1, "01000000000000000000000000000000"),
    PLAIN(AES, 0, 0x12345, "45230100000000000000000000000000"),
    PLAIN(AES, 0, 0x100000001ULL, "01000000000000000000000000000000"),
    PLAIN(AES, 0, 0x123456789abcdef0ULL, "f0debc9a000000000000000000000000"),
    PLAIN(AES, 3, 1, "08000000000000000000000000000000"),
    PLAIN(AES, 3, 0x100000001ULL, "08000000000000000000000000000000"),
    PLAIN(DES3, 0, 0x100000001ULL, "0100000000000000"),

    /* plain64: 64-bit little-endian, no wrap. */
    PLAIN64(AES, 0, 0, "00000000000000000000000000000000"),
    PLAIN64(AES, 0, 1, "01000000000000000000000000000000"),
    PLAIN64(AES, 0, 0x12345, "45230100000000000000000000000000"),
    PLAIN64(AES, 0, 0x100000001ULL, "01000000010000000000000000000000"),
    PLAIN64(AES, 0, 0x123456789abcdef0ULL,
            "f0debc9a785634120000000000000000"),
    PLAIN64(AES, 3, 1, "08000000000000000000000000000000"),
    PLAIN64(AES, 3, 0x100000001ULL, "08000000080000000000000000000000"),
    PLAIN64(CAST5, 0, 0x100000001ULL, "0100000001000000"),

    /* plain64be: 64-bit big-endian in the last 8 bytes. */
    PLAIN64BE(AES, 0, 0, "00000000000000000000000000000000"),
    PLAIN64BE(AES, 0, 1, "00000000000000000000000000000001"),
    PLAIN64BE(AES, 0, 0x12345, "00000000000000000000000000012345"),
    PLAIN64BE(AES, 0, 0x100000001ULL, "00000000000000000000000100000001"),
    PLAIN64BE(AES, 3, 1, "00000000000000000000000000000008"),
    PLAIN64BE(AES, 3, 0x100000001ULL, "00000000000000000000000800000008"),
    PLAIN64BE(DES3, 0, 0x100000001ULL, "0000000100000001"),

    /*
     * benbi: big-endian count of cipher blocks from 1 in the last 8
     * bytes: (sector << 5) + 1 for 16-byte blocks (32 per 512 bytes),
     * (sector << 6) + 1 for 8-byte blocks.
     */
    BENBI(AES, 0, 0, "00000000000000000000000000000001"),
    BENBI(AES, 0, 1, "00000000000000000000000000000021"),
    BENBI(AES, 0, 0x12345, "000000000000000000000000002468a1"),
    BENBI(AES, 0, 0x100000001ULL, "00000000000000000000002000000021"),
    BENBI(AES, 3, 1, "00000000000000000000000000000101"),
    BENBI(AES, 3, 0x100000001ULL, "00000000000000000000010000000101"),
    BENBI(TWOFISH, 0, 1, "00000000000000000000000000000021"),
    BENBI(DES3, 0, 1, "0000000000000041"),
    BENBI(CAST5, 0, 0x100000001ULL, "0000004000000041"),

    /* null: always zero. */
    NULLIV(AES, 0, 0, "00000000000000000000000000000000"),
    NULLIV(AES, 0, 0x100000001ULL, "00000000000000000000000000000000"),
    NULLIV(AES, 3, 0x12345, "00000000000000000000000000000000"),
    NULLIV(DES3, 0, 1, "0000000000000000"),

    /* essiv:sha256 with aes-128: salt 32 bytes, so ESSIV runs aes-256. */
    ESSIV(AES, SHA256, KEY16, 0, 0, "ae0e4eeac063684505721b0643b24ae3"),
    ESSIV(AES, SHA256, KEY16, 0, 1, "c10509c8cf7d6eee55d7205db7845a6f"),
    ESSIV(AES, SHA256, KEY16, 0, 0x12345,
          "3182426485bdbf954544161cff568afc"),
    ESSIV(AES, SHA256, KEY16, 0, 0x100000001ULL,
          "2ef0f20bc38f9e5cba6129e2e3e78ef2"),
    ESSIV(AES, SHA256, KEY16, 3, 1, "dd580cd128b6f763ce600d064cc42287"),
    ESSIV(AES, SHA256, KEY16, 3, 0x100000001ULL,
          "c268f1f4a9cc0898221c27d562d0b850"),

    /* essiv:sha256 with aes-256 (LUKS1's aes-cbc-essiv:sha256). */
    ESSIV(AES256, SHA256, KEY32, 0, 0, "a73d5fb0e4041090ca6dc1b820cdaf51"),
    ESSIV(AES256, SHA256, KEY32, 0, 1, "59a0803f448bdf6d3d3de63feaccd58a"),
    ESSIV(AES256, SHA256, KEY32, 0, 0x12345,
          "625f900e6ae97a00f581baee7d3c2382"),
    ESSIV(AES256, SHA256, KEY32, 0, 0x100000001ULL,
          "d4c6a780bfe2b87d88b87658fe0be242"),
    ESSIV(AES256, SHA256, KEY32, 3, 1, "34d7e09b76f1336e9ff7d7c4e0332ba5"),
    ESSIV(AES256, SHA256, KEY32, 3, 0x100000001ULL,
          "0183f0f7a83bfe807e980eea64aa6117"),

    /* essiv:md5 with aes-128: a 16-byte salt keeps aes-128. */
    ESSIV(AES, MD5, KEY16, 0, 0, "8e72f1aa55c23664498c6db87c9a4e45"),
    ESSIV(AES, MD5, KEY16, 0, 1, "b9affb6e83d5f8f427d572a58b7872e5"),
    ESSIV(AES, MD5, KEY16, 0, 0x100000001ULL,
          "3ccae36586604d0ccf5008b80a0bed94"),
    ESSIV(AES, MD5, KEY16, 3, 0x100000001ULL,
          "0d91e33091eb12aaf96be429da7fe615"),

    /* essiv:md5 with cast5-128: an 8-byte block. */
    ESSIV(CAST5, MD5, KEY16, 0, 0, "65f19cc83c8ceb58"),
    ESSIV(CAST5, MD5, KEY16, 0, 1, "044658ab1b320697"),
    ESSIV(CAST5, MD5, KEY16, 0, 0x100000001ULL, "a0fe1c1db1d316ec"),
    ESSIV(CAST5, MD5, KEY16, 3, 0x100000001ULL, "13ec783f240db5c4"),

    /* essiv:wp256 with aes-256 (cryptsetup's xts-essiv:wp256 images). */
    ESSIV(AES256, WP256, KEY32, 0, 0, "99fa450d5bee53f7b77ece5ecec54af5"),
    ESSIV(AES256, WP256, KEY32, 0, 1, "44caeaa08239a42a54c8193d40a91c6f"),
    ESSIV(AES256, WP256, KEY32, 0, 0x100000001ULL,
          "7516e901d26b0de0ec8777eb839736ea"),
    ESSIV(AES256, WP256, KEY32, 3, 0x100000001ULL,
          "ceff387dde14567dfd2e473638a2933c"),
};

static uint8_t *unhex(const char *hex, size_t *len)
{
    size_t n = strlen(hex) / 2;
    uint8_t *out = g_malloc(n ? n : 1);

    g_assert_cmpuint(strlen(hex) % 2, ==, 0);
    for (size_t i = 0; i < n; i++) {
        int hi = g_ascii_xdigit_value(hex[2 * i]);
        int lo = g_ascii_xdigit_value(hex[2 * i + 1]);

        g_assert(hi >= 0 && lo >= 0);
        out[i] = hi << 4 | lo;
    }
    *len = n;
    return out;
}

static char *tohex(const uint8_t *buf, size_t len)
{
    GString *s = g_string_new(NULL);

    for (size_t i = 0; i < len; i++) {
        g_string_append_printf(s, "%02x", buf[i]);
    }
    return g_string_free(s, FALSE);
}

/* The IV a CBC sector cipher for t uses for t->sector, in hex. */
static char *ivgen_answer_through_sector(const IVGenTest *t,
                                         const uint8_t *key, size_t nkey)
{
    QCryptoSectorCipherSpec spec = {
        .alg = t->cipher,
        .mode = QCRYPTO_CIPHER_MODE_CBC,
        .ivgen = t->ivgen,
        .ivgen_hash = t->hash,
    };
    size_t niv = qcrypto_cipher_get_block_len(t->cipher);
    g_autoptr(Error) err = NULL;
    g_autoptr(QCryptoSectorCipher) sc = NULL;
    g_autoptr(QCryptoCipher) ecb = NULL;
    uint8_t block[16] = { 0 };

    /* One-block sectors: the sector's ciphertext is E_K(IV ^ 0). */
    sc = qcrypto_sector_cipher_new(&spec, key, nkey, niv, t->shift, 0, &err);
    if (!sc) {
        g_error("%s", error_get_pretty(err));
    }
    g_assert_cmpint(qcrypto_sector_cipher_encrypt(sc, t->sector, block, niv,
                                                  &err), ==, 0);
    ecb = qcrypto_cipher_new(t->cipher, QCRYPTO_CIPHER_MODE_ECB, key, nkey,
                             &err);
    g_assert_nonnull(ecb);
    g_assert_cmpint(qcrypto_cipher_decrypt(ecb, block, block, niv, &err),
                    ==, 0);
    return tohex(block, niv);
}

static void test_ivgen_answer(gconstpointer opaque)
{
    const IVGenTest *t = opaque;
    g_autoptr(Error) err = NULL;
    g_autoptr(QCryptoIVGen) ivgen = NULL;
    g_autofree uint8_t *key = NULL;
    g_autofree char *got = NULL;
    g_autofree char *through_sector = NULL;
    size_t nkey = 0;
    size_t niv = qcrypto_cipher_get_block_len(t->cipher);
    uint8_t iv[16];

    if (t->key) {
        key = unhex(t->key, &nkey);
    } else {
        /* Only ESSIV reads the key; the sector cipher's CBC needs one. */
        nkey = qcrypto_cipher_get_key_len(t->cipher);
        key = g_malloc(nkey);
        for (size_t i = 0; i < nkey; i++) {
            key[i] = 0x40 + i;
        }
    }
    g_assert_cmpuint(nkey, ==, qcrypto_cipher_get_key_len(t->cipher));
    ivgen = qcrypto_ivgen_new(t->ivgen, t->cipher, t->hash, key, nkey, &err);
    if (!ivgen) {
        g_error("%s", error_get_pretty(err));
    }
    g_assert_cmpint(qcrypto_ivgen_get_algorithm(ivgen), ==, t->ivgen);
    g_assert_cmpint(qcrypto_ivgen_get_cipher(ivgen), ==, t->cipher);

    /* Poison the buffer: every byte of the IV must be written. */
    memset(iv, 0xa5, sizeof(iv));
    g_assert_cmpint(qcrypto_ivgen_calculate(ivgen, t->sector << t->shift,
                                            iv, niv, &err), ==, 0);
    got = tohex(iv, niv);
    g_assert_cmpstr(got, ==, t->iv);
    /* And nothing past it. */
    for (size_t i = niv; i < sizeof(iv); i++) {
        g_assert_cmpuint(iv[i], ==, 0xa5);
    }

    through_sector = ivgen_answer_through_sector(t, key, nkey);
    g_assert_cmpstr(through_sector, ==, t->iv);
}

static void test_ivgen_names(void)
{
    for (int i = 0; i < QCRYPTO_IVGEN_ALGO__MAX; i++) {
        g_assert_cmpint(qcrypto_ivgen_algo_parse(qcrypto_ivgen_algo_name(i)),
                        ==, i);
    }
    g_assert_cmpstr(qcrypto_ivgen_algo_name(QCRYPTO_IVGEN_ALGO_PLAIN64BE),
                    ==, "plain64be");
    g_assert_cmpint(qcrypto_ivgen_algo_parse("essiv"), ==,
                    QCRYPTO_IVGEN_ALGO_ESSIV);
    /* The hash is the caller's business: LUKS splits "essiv:sha256". */
    g_assert_cmpint(qcrypto_ivgen_algo_parse("essiv:sha256"), ==, -1);
    g_assert_cmpint(qcrypto_ivgen_algo_parse("plain65"), ==, -1);
    g_assert_cmpint(qcrypto_ivgen_algo_parse(""), ==, -1);
}

static void test_ivgen_essiv_getters(void)
{
    g_autoptr(Error) err = NULL;
    g_autoptr(QCryptoIVGen) ivgen = NULL;
    uint8_t key[16] = { 0 };

    ivgen = qcrypto_ivgen_new(QCRYPTO_IVGEN_ALGO_ESSIV, AES,
                              QCRYPTO_HASH_ALGO_SHA256, key, sizeof(key),
                              &err);
    g_assert_nonnull(ivgen);
    g_assert_null(err);
    g_assert_cmpint(qcrypto_ivgen_get_hash(ivgen), ==,
                    QCRYPTO_HASH_ALGO_SHA256);
    /* The data cipher is reported, not the ESSIV one (aes-256). */
    g_assert_cmpint(qcrypto_ivgen_get_cipher(ivgen), ==, AES);
}

/* Each of these must fail with a message, not a crash or a NULL alone. */
static void expect_new_fails(QCryptoIVGenAlgo alg, QCryptoCipherAlgo cipher,
                             QCryptoHashAlgo hash, const uint8_t *key,
                             size_t nkey, const char *fragment)
{
    g_autoptr(Error) err = NULL;
    QCryptoIVGen *ivgen = qcrypto_ivgen_new(alg, cipher, hash, key, nkey,
                                            &err);

    g_assert_null(ivgen);
    test_error_expect(&err, fragment);
}

static void test_ivgen_errors(void)
{
    uint8_t key[32] = { 0 };

    /* cast5 has only a 16-byte key: no ESSIV cipher for a sha256 salt. */
    expect_new_fails(QCRYPTO_IVGEN_ALGO_ESSIV, CAST5,
                     QCRYPTO_HASH_ALGO_SHA256, key, 16, "32-byte cast5-128");
    /* AES has no 20-byte key (sha1) and no 64-byte key (sha512). */
    expect_new_fails(QCRYPTO_IVGEN_ALGO_ESSIV, AES256,
                     QCRYPTO_HASH_ALGO_SHA1, key, 32, "20-byte");
    expect_new_fails(QCRYPTO_IVGEN_ALGO_ESSIV, AES,
                     QCRYPTO_HASH_ALGO_SHA512, key, 16, "64-byte");
    /* 3des only takes 24 bytes, which no hash gives. */
    expect_new_fails(QCRYPTO_IVGEN_ALGO_ESSIV, DES3,
                     QCRYPTO_HASH_ALGO_SHA256, key, 24, "3des");
    /* Not a hash at all. */
    expect_new_fails(QCRYPTO_IVGEN_ALGO_ESSIV, AES,
                     QCRYPTO_HASH_ALGO__MAX, key, 16, "hash");
    expect_new_fails(QCRYPTO_IVGEN_ALGO_ESSIV, AES,
                     (QCryptoHashAlgo)-1, key, 16, "hash");
    /* ESSIV without the master key. */
    expect_new_fails(QCRYPTO_IVGEN_ALGO_ESSIV, AES,
                     QCRYPTO_HASH_ALGO_SHA256, NULL, 0, "key");
    /* Out-of-range generator and cipher. */
    expect_new_fails(QCRYPTO_IVGEN_ALGO__MAX, AES, 0, NULL, 0, "IV generator");
    expect_new_fails(QCRYPTO_IVGEN_ALGO_PLAIN64, QCRYPTO_CIPHER_ALGO__MAX,
                     0, NULL, 0, "cipher");
}

static void test_ivgen_bad_iv_len(void)
{
    g_autoptr(Error) err = NULL;
    g_autoptr(QCryptoIVGen) ivgen = NULL;
    uint8_t iv[32];

    ivgen = qcrypto_ivgen_new(QCRYPTO_IVGEN_ALGO_PLAIN64, AES, 0, NULL, 0,
                              &err);
    g_assert_nonnull(ivgen);
    g_assert_cmpint(qcrypto_ivgen_calculate(ivgen, 1, iv, 8, &err), ==, -1);
    g_assert_nonnull(err);
    error_free_or_abort(&err);
    g_assert_cmpint(qcrypto_ivgen_calculate(ivgen, 1, iv, 32, &err), ==, -1);
    g_assert_nonnull(err);
    error_free_or_abort(&err);
    g_assert_cmpint(qcrypto_ivgen_calculate(ivgen, 1, iv, 16, &err), ==, 0);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);

    for (size_t i = 0; i < G_N_ELEMENTS(ivgen_tests); i++) {
        const IVGenTest *t = &ivgen_tests[i];
        g_autofree char *path = g_strdup_printf(
            "/crypto/ivgen/%s%s%s/%s/shift%u/%" G_GINT64_MODIFIER "x",
            qcrypto_ivgen_algo_name(t->ivgen),
            t->key ? "-" : "",
            t->key ? qcrypto_hash_algo_name(t->hash) : "",
            qcrypto_cipher_algo_name(t->cipher), t->shift, t->sector);

        g_test_add_data_func(path, t, test_ivgen_answer);
    }
    g_test_add_func("/crypto/ivgen/names", test_ivgen_names);
    g_test_add_func("/crypto/ivgen/essiv-getters", test_ivgen_essiv_getters);
    g_test_add_func("/crypto/ivgen/errors", test_ivgen_errors);
    g_test_add_func("/crypto/ivgen/bad-iv-len", test_ivgen_bad_iv_len);
    return g_test_run();
}
