/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The cipher interface: known answers from the standards for every
 * algorithm, chaining across calls, the error cases a user can hit, and
 * the backend override.
 */
#include <string.h>

#include "crypto/cipher.h"
#include "crypto-test-hex.h"
#include "test-error.h"

typedef struct CipherVector {
    const char *name;
    QCryptoCipherAlgo alg;
    QCryptoCipherMode mode;
    const char *key;
    const char *iv;             /* NULL for ECB */
    const char *plaintext;
    const char *ciphertext;
} CipherVector;

/* NIST SP 800-38A, Appendix F: the same four plaintext blocks throughout. */
#define SP800_38A_PLAINTEXT                  \
    "6bc1bee22e409f96e93d7e117393172a"       \
    "ae2d8a571e03ac9c9eb76fac45af8e51"       \
    "30c81c46a35ce411e5fbc1191a0a52ef"       \
    "f69f2445df4f9b17ad2b417be66c3710"
#define SP800_38A_KEY128 "2b7e151628aed2a6abf7158809cf4f3c"
#define SP800_38A_KEY192 "8e73b0f7da0e6452c810f32b809079e562f8ead2522c6b7b"
#define SP800_38A_KEY256 \
    "603deb1015ca71be2b73aef0857d77811f352c073b6108d72d9810a30914dff4"
#define SP800_38A_CBC_IV "000102030405060708090a0b0c0d0e0f"
#define SP800_38A_CTR_IV "f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff"

static const CipherVector cipher_vectors[] = {
    /* NIST SP 800-38A F.1.1 - F.1.6: ECB */
    {
        "sp800-38a-f1.1-ecb-aes128", QCRYPTO_CIPHER_ALGO_AES_128,
        QCRYPTO_CIPHER_MODE_ECB, SP800_38A_KEY128, NULL, SP800_38A_PLAINTEXT,
        "3ad77bb40d7a3660a89ecaf32466ef97" "f5d3d58503b9699de785895a96fdbaaf"
        "43b1cd7f598ece23881b00e3ed030688" "7b0c785e27e8ad3f8223207104725dd4",
    },
    {
        "sp800-38a-f1.3-ecb-aes192", QCRYPTO_CIPHER_ALGO_AES_192,
        QCRYPTO_CIPHER_MODE_ECB, SP800_38A_KEY192, NULL, SP800_38A_PLAINTEXT,
        "bd334f1d6e45f25ff712a214571fa5cc" "974104846d0ad3ad7734ecb3ecee4eef"
        "ef7afd2270e2e60adce0ba2face6444e" "9a4b41ba738d6c72fb16691603c18e0e",
    },
    {
        "sp800-38a-f1.5-ecb-aes256", QCRYPTO_CIPHER_ALGO_AES_256,
        QCRYPTO_CIPHER_MODE_ECB, SP800_38A_KEY256, NULL, SP800_38A_PLAINTEXT,
        "f3eed1bdb5d2a03c064b5a7e3db181f8" "591ccb10d410ed26dc5ba74a31362870"
        "b6ed21b99ca6f4f9f153e7b1beafed1d" "23304b7a39f9f3ff067d8d8f9e24ecc7",
    },
    /* NIST SP 800-38A F.2.1 - F.2.6: CBC */
    {
        "sp800-38a-f2.1-cbc-aes128", QCRYPTO_CIPHER_ALGO_AES_128,
        QCRYPTO_CIPHER_MODE_CBC, SP800_38A_KEY128, SP800_38A_CBC_IV,
        SP800_38A_PLAINTEXT,
        "7649abac8119b246cee98e9b12e9197d" "5086cb9b507219ee95db113a917678b2"
        "73bed6b8e3c1743b7116e69e22229516" "3ff1caa1681fac09120eca307586e1a7",
    },
    {
        "sp800-38a-f2.3-cbc-aes192", QCRYPTO_CIPHER_ALGO_AES_192,
        QCRYPTO_CIPHER_MODE_CBC, SP800_38A_KEY192, SP800_38A_CBC_IV,
        SP800_38A_PLAINTEXT,
        "4f021db243bc633d7178183a9fa071e8" "b4d9ada9ad7dedf4e5e738763f69145a"
        "571b242012fb7ae07fa9baac3df102e0" "08b0e27988598881d920a9e64f5615cd",
    },
    {
        "sp800-38a-f2.5-cbc-aes256", QCRYPTO_CIPHER_ALGO_AES_256,
        QCRYPTO_CIPHER_MODE_CBC, SP800_38A_KEY256, SP800_38A_CBC_IV,
        SP800_38A_PLAINTEXT,
        "f58c4c04d6e5f1ba779eabfb5f7bfbd6" "9cfc4e967edb808d679f777bc6702c7d"
        "39f23369a9d9bacfa530e26304231461" "b2eb05e2c39be9fcda6c19078c6a9d1b",
    },
    /* NIST SP 800-38A F.5.1 - F.5.6: CTR */
    {
        "sp800-38a-f5.1-ctr-aes128", QCRYPTO_CIPHER_ALGO_AES_128,
        QCRYPTO_CIPHER_MODE_CTR, SP800_38A_KEY128, SP800_38A_CTR_IV,
        SP800_38A_PLAINTEXT,
        "874d6191b620e3261bef6864990db6ce" "9806f66b7970fdff8617187bb9fffdff"
        "5ae4df3edbd5d35e5b4f09020db03eab" "1e031dda2fbe03d1792170a0f3009cee",
    },
    {
        "sp800-38a-f5.3-ctr-aes192", QCRYPTO_CIPHER_ALGO_AES_192,
        QCRYPTO_CIPHER_MODE_CTR, SP800_38A_KEY192, SP800_38A_CTR_IV,
        SP800_38A_PLAINTEXT,
        "1abc932417521ca24f2b0459fe7e6e0b" "090339ec0aa6faefd5ccc2c6f4ce8e94"
        "1e36b26bd1ebc670d1bd1d665620abf7" "4f78a7f6d29809585a97daec58c6b050",
    },
    {
        "sp800-38a-f5.5-ctr-aes256", QCRYPTO_CIPHER_ALGO_AES_256,
        QCRYPTO_CIPHER_MODE_CTR, SP800_38A_KEY256, SP800_38A_CTR_IV,
        SP800_38A_PLAINTEXT,
        "601ec313775789a5b7a7f504bbf3d228" "f443e3ca4d62b59aca84e990cacaf5c5"
        "2b0930daa23de94ce87017ba2d84988d" "dfc9c58db67aada613c2dd08457941a6",
    },
    /*
     * Serpent: NESSIE test vectors, Set 4 vectors 0 and 1 (Biham's
     * Serpent page, Serpent-{128,192,256}-128.verified.test-vectors), in
     * the byte order that Linux, dm-crypt and nettle use.
     */
    {
        "nessie-set4-0-serpent128", QCRYPTO_CIPHER_ALGO_SERPENT_128,
        QCRYPTO_CIPHER_MODE_ECB, "000102030405060708090a0b0c0d0e0f", NULL,
        "00112233445566778899aabbccddeeff",
        "563e2cf8740a27c164804560391e9b27",
    },
    {
        "nessie-set4-1-serpent128", QCRYPTO_CIPHER_ALGO_SERPENT_128,
        QCRYPTO_CIPHER_MODE_ECB, "2bd6459f82c5b300952c49104881ff48", NULL,
        "ea024714ad5c4d84ea024714ad5c4d84",
        "92d7f8ef2c36c53409f275902f06539f",
    },
    {
        "nessie-set4-0-serpent192", QCRYPTO_CIPHER_ALGO_SERPENT_192,
        QCRYPTO_CIPHER_MODE_ECB,
        "000102030405060708090a0b0c0d0e0f1011121314151617", NULL,
        "00112233445566778899aabbccddeeff",
        "6ab816c82de53b93005008afa2246a02",
    },
    {
        "nessie-set4-1-serpent192", QCRYPTO_CIPHER_ALGO_SERPENT_192,
        QCRYPTO_CIPHER_MODE_ECB,
        "2bd6459f82c5b300952c49104881ff482bd6459f82c5b300", NULL,
        "ea024714ad5c4d84ea024714ad5c4d84",
        "827b18c2678a239dfc5512842000e204",
    },
    {
        "nessie-set4-0-serpent256", QCRYPTO_CIPHER_ALGO_SERPENT_256,
        QCRYPTO_CIPHER_MODE_ECB,
        "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f",
        NULL, "00112233445566778899aabbccddeeff",
        "2868b7a2d28ecd5e4fdefac3c4330074",
    },
    {
        "nessie-set4-1-serpent256", QCRYPTO_CIPHER_ALGO_SERPENT_256,
        QCRYPTO_CIPHER_MODE_ECB,
        "2bd6459f82c5b300952c49104881ff482bd6459f82c5b300952c49104881ff48",
        NULL, "ea024714ad5c4d84ea024714ad5c4d84",
        "3e507730776b93fdea661235e1dd99f0",
    },
    /*
     * Twofish: the known answers of the Twofish paper (Schneier et al.,
     * "Twofish: A 128-Bit Block Cipher", Appendix A.1; ecb_ival.txt).
     */
    {
        "twofish-paper-128", QCRYPTO_CIPHER_ALGO_TWOFISH_128,
        QCRYPTO_CIPHER_MODE_ECB, "00000000000000000000000000000000", NULL,
        "00000000000000000000000000000000",
        "9f589f5cf6122c32b6bfec2f2ae8c35a",
    },
    {
        "twofish-paper-192", QCRYPTO_CIPHER_ALGO_TWOFISH_192,
        QCRYPTO_CIPHER_MODE_ECB,
        "0123456789abcdeffedcba98765432100011223344556677", NULL,
        "00000000000000000000000000000000",
        "cfd1d2e5a9be9cdf501f13b892bd2248",
    },
    {
        "twofish-paper-256", QCRYPTO_CIPHER_ALGO_TWOFISH_256,
        QCRYPTO_CIPHER_MODE_ECB,
        "0123456789abcdeffedcba987654321000112233445566778899aabbccddeeff",
        NULL, "00000000000000000000000000000000",
        "37527be0052334b89f0cfccae87cfa20",
    },
    /* CAST5: RFC 2144, Appendix B.1, 128-bit key. */
    {
        "rfc2144-b1-cast5-128", QCRYPTO_CIPHER_ALGO_CAST5_128,
        QCRYPTO_CIPHER_MODE_ECB, "0123456712345678234567893456789a", NULL,
        "0123456789abcdef", "238b4fe5847e44b2",
    },
    /*
     * 3DES: NIST SP 800-67 Rev. 1, Appendix B (TDEA ECB example), with its
     * famous "The qufck brown fox jump" plaintext.
     */
    {
        "sp800-67-b-3des-ecb", QCRYPTO_CIPHER_ALGO_DES_EDE3,
        QCRYPTO_CIPHER_MODE_ECB,
        "0123456789abcdef" "23456789abcdef01" "456789abcdef0123", NULL,
        "5468652071756663" "6b2062726f776e20" "666f78206a756d70",
        "a826fd8ce53b855f" "cce21c8112256fe6" "68d5c05dd9b6b900",
    },
};

typedef struct Bytes {
    guint8 *key, *iv, *pt, *ct;
    size_t nkey, niv, len;
} Bytes;

static void bytes_load(Bytes *b, const CipherVector *v)
{
    size_t nct;

    b->key = test_unhex(v->key, &b->nkey);
    b->iv = v->iv ? test_unhex(v->iv, &b->niv) : NULL;
    b->pt = test_unhex(v->plaintext, &b->len);
    b->ct = test_unhex(v->ciphertext, &nct);
    g_assert_cmpuint(nct, ==, b->len);
}

static void bytes_free(Bytes *b)
{
    g_free(b->key);
    g_free(b->iv);
    g_free(b->pt);
    g_free(b->ct);
}

static void cipher_restart(QCryptoCipher *cipher, const Bytes *b)
{
    if (b->iv) {
        g_assert_cmpint(qcrypto_cipher_setiv(cipher, b->iv, b->niv,
                                             &error_abort), ==, 0);
    }
}

/*
 * Run a vector whole, then in two calls split at a block boundary (the
 * chaining state must carry over), both ways, out of place and in place.
 */
typedef struct CipherCase {
    const CipherVector *vector;
    const char *backend;
} CipherCase;

static void test_cipher_vector(gconstpointer opaque)
{
    const CipherCase *c = opaque;
    const CipherVector *v = c->vector;
    g_autoptr(QCryptoCipher) cipher = NULL;
    g_autofree guint8 *out = NULL;
    size_t blocklen = qcrypto_cipher_get_block_len(v->alg);
    size_t split;
    Bytes b;

    bytes_load(&b, v);
    out = g_malloc(b.len);
    /* The first half, rounded down to whole blocks (at least one block). */
    split = MAX(b.len / blocklen / 2, 1) * blocklen;

    g_assert_cmpint(qcrypto_cipher_set_backend(c->backend,
                                               &error_abort), ==, 0);
    cipher = qcrypto_cipher_new(v->alg, v->mode, b.key, b.nkey, &error_abort);
    g_assert_nonnull(cipher);
    g_assert_cmpstr(qcrypto_cipher_get_impl_name(cipher), !=, NULL);
    g_assert_cmpint(qcrypto_cipher_get_algo(cipher), ==, v->alg);
    g_assert_cmpint(qcrypto_cipher_get_mode(cipher), ==, v->mode);

    /* Whole, out of place. */
    cipher_restart(cipher, &b);
    g_assert_cmpint(qcrypto_cipher_encrypt(cipher, b.pt, out, b.len,
                                           &error_abort), ==, 0);
    g_assert_cmpmem(out, b.len, b.ct, b.len);
    cipher_restart(cipher, &b);
    g_assert_cmpint(qcrypto_cipher_decrypt(cipher, b.ct, out, b.len,
                                           &error_abort), ==, 0);
    g_assert_cmpmem(out, b.len, b.pt, b.len);

    /* Two calls, in place. */
    memcpy(out, b.pt, b.len);
    cipher_restart(cipher, &b);
    g_assert_cmpint(qcrypto_cipher_encrypt(cipher, out, out, split,
                                           &error_abort), ==, 0);
    g_assert_cmpint(qcrypto_cipher_encrypt(cipher, out + split, out + split,
                                           b.len - split, &error_abort), ==, 0);
    g_assert_cmpmem(out, b.len, b.ct, b.len);
    cipher_restart(cipher, &b);
    g_assert_cmpint(qcrypto_cipher_decrypt(cipher, out, out, split,
                                           &error_abort), ==, 0);
    g_assert_cmpint(qcrypto_cipher_decrypt(cipher, out + split, out + split,
                                           b.len - split, &error_abort), ==, 0);
    g_assert_cmpmem(out, b.len, b.pt, b.len);
    bytes_free(&b);
}

/*
 * DES ignores the low bit of each key byte (its parity bit); like QEMU and
 * dm-crypt we accept a key whatever its parity. Flipping every parity bit
 * of the SP 800-67 key must not change the ciphertext.
 */
static void test_cipher_3des_parity(void)
{
    const CipherVector *v = NULL;
    g_autoptr(QCryptoCipher) cipher = NULL;
    g_autofree guint8 *out = NULL;
    Bytes b;

    for (size_t i = 0; i < G_N_ELEMENTS(cipher_vectors); i++) {
        if (cipher_vectors[i].alg == QCRYPTO_CIPHER_ALGO_DES_EDE3) {
            v = &cipher_vectors[i];
        }
    }
    g_assert_nonnull(v);
    bytes_load(&b, v);
    for (size_t i = 0; i < b.nkey; i++) {
        b.key[i] ^= 1;
    }
    out = g_malloc(b.len);
    cipher = qcrypto_cipher_new(v->alg, v->mode, b.key, b.nkey, &error_abort);
    g_assert_nonnull(cipher);
    g_assert_cmpint(qcrypto_cipher_encrypt(cipher, b.pt, out, b.len,
                                           &error_abort), ==, 0);
    g_assert_cmpmem(out, b.len, b.ct, b.len);
    bytes_free(&b);
}

/*
 * CBC and CTR over every algorithm (the published vectors above are ECB
 * for most of them): the result must match the mode's definition
 * (SP 800-38A 6.2, 6.5) built by hand from single-block ECB calls of the
 * same key, including a 64-bit block counter that carries across bytes.
 */
static void test_cipher_modes_from_ecb(gconstpointer opaque)
{
    QCryptoCipherAlgo alg = GPOINTER_TO_INT(opaque);
    size_t nkey = qcrypto_cipher_get_key_len(alg);
    size_t bs = qcrypto_cipher_get_block_len(alg);
    size_t len = 8 * bs;
    g_autofree guint8 *key = g_malloc(nkey);
    g_autofree guint8 *pt = g_malloc(len);
    g_autofree guint8 *out = g_malloc(len);
    g_autofree guint8 *ref = g_malloc(len);
    guint8 iv[16], ctr[16], blk[16];
    g_autoptr(QCryptoCipher) ecb = NULL;
    g_autoptr(QCryptoCipher) cbc = NULL;
    g_autoptr(QCryptoCipher) ctrc = NULL;

    for (size_t i = 0; i < nkey; i++) {
        key[i] = 0x11 * i + 3;
    }
    for (size_t i = 0; i < len; i++) {
        pt[i] = i * 7;
    }
    /* A counter whose low bytes wrap within the message. */
    for (size_t i = 0; i < bs; i++) {
        iv[i] = i + 1 == bs ? 0xfd : 0xff - i;
    }

    ecb = qcrypto_cipher_new(alg, QCRYPTO_CIPHER_MODE_ECB, key, nkey,
                             &error_abort);
    g_assert_nonnull(ecb);
    cbc = qcrypto_cipher_new(alg, QCRYPTO_CIPHER_MODE_CBC, key, nkey,
                             &error_abort);
    g_assert_nonnull(cbc);
    ctrc = qcrypto_cipher_new(alg, QCRYPTO_CIPHER_MODE_CTR, key, nkey,
                              &error_abort);
    g_assert_nonnull(ctrc);

    /* CBC: C_i = E(P_i ^ C_{i-1}), C_0 = IV */
    memcpy(blk, iv, bs);
    for (size_t off = 0; off < len; off += bs) {
        for (size_t i = 0; i < bs; i++) {
            blk[i] ^= pt[off + i];
        }
        g_assert_cmpint(qcrypto_cipher_encrypt(ecb, blk, blk, bs,
                                               &error_abort), ==, 0);
        memcpy(ref + off, blk, bs);
    }
    g_assert_cmpint(qcrypto_cipher_setiv(cbc, iv, bs, &error_abort), ==, 0);
    g_assert_cmpint(qcrypto_cipher_encrypt(cbc, pt, out, len,
                                           &error_abort), ==, 0);
    g_assert_cmpmem(out, len, ref, len);
    g_assert_cmpint(qcrypto_cipher_setiv(cbc, iv, bs, &error_abort), ==, 0);
    g_assert_cmpint(qcrypto_cipher_decrypt(cbc, out, out, len,
                                           &error_abort), ==, 0);
    g_assert_cmpmem(out, len, pt, len);

    /* CTR: C_i = P_i ^ E(ctr + i), the whole block a big-endian counter */
    memcpy(ctr, iv, bs);
    for (size_t off = 0; off < len; off += bs) {
        g_assert_cmpint(qcrypto_cipher_encrypt(ecb, ctr, blk, bs,
                                               &error_abort), ==, 0);
        for (size_t i = 0; i < bs; i++) {
            ref[off + i] = pt[off + i] ^ blk[i];
        }
        for (size_t i = bs; i-- > 0 && ++ctr[i] == 0; ) {
            /* carry into the next byte up */
        }
    }
    g_assert_cmpint(qcrypto_cipher_setiv(ctrc, iv, bs, &error_abort), ==, 0);
    g_assert_cmpint(qcrypto_cipher_encrypt(ctrc, pt, out, 3 * bs,
                                           &error_abort), ==, 0);
    g_assert_cmpint(qcrypto_cipher_encrypt(ctrc, pt + 3 * bs, out + 3 * bs,
                                           len - 3 * bs, &error_abort), ==, 0);
    g_assert_cmpmem(out, len, ref, len);
    g_assert_cmpint(qcrypto_cipher_setiv(ctrc, iv, bs, &error_abort), ==, 0);
    g_assert_cmpint(qcrypto_cipher_decrypt(ctrc, out, out, len,
                                           &error_abort), ==, 0);
    g_assert_cmpmem(out, len, pt, len);
}

static void test_cipher_errors(void)
{
    guint8 key[64] = { 0 };
    guint8 buf[64] = { 0 };
    g_autoptr(QCryptoCipher) cbc = NULL;
    g_autoptr(QCryptoCipher) ecb = NULL;
    QCryptoCipher *bad;
    Error *err = NULL;

    /* A 15-byte key for AES-128. */
    bad = qcrypto_cipher_new(QCRYPTO_CIPHER_ALGO_AES_128,
                             QCRYPTO_CIPHER_MODE_CBC, key, 15, &err);
    g_assert_null(bad);
    test_error_expect(&err, "key length");
    /* XTS wants two keys: one alone is not enough. */
    bad = qcrypto_cipher_new(QCRYPTO_CIPHER_ALGO_AES_256,
                             QCRYPTO_CIPHER_MODE_XTS, key, 32, &err);
    g_assert_null(bad);
    test_error_expect(&err, "key length");
    /* XTS is defined for 128-bit blocks; 3DES has 64. */
    bad = qcrypto_cipher_new(QCRYPTO_CIPHER_ALGO_DES_EDE3,
                             QCRYPTO_CIPHER_MODE_XTS, key, 48, &err);
    g_assert_null(bad);
    test_error_expect(&err, "3des");
    g_assert_false(qcrypto_cipher_supports(QCRYPTO_CIPHER_ALGO_DES_EDE3,
                                           QCRYPTO_CIPHER_MODE_XTS));
    g_assert_false(qcrypto_cipher_supports(QCRYPTO_CIPHER_ALGO__MAX,
                                           QCRYPTO_CIPHER_MODE_ECB));

    cbc = qcrypto_cipher_new(QCRYPTO_CIPHER_ALGO_AES_128,
                             QCRYPTO_CIPHER_MODE_CBC, key, 16, &error_abort);
    g_assert_nonnull(cbc);
    /* Not a whole number of blocks. */
    g_assert_cmpint(qcrypto_cipher_encrypt(cbc, buf, buf, 17, &err), <, 0);
    test_error_expect(&err, "multiple of the block size");
    g_assert_cmpint(qcrypto_cipher_decrypt(cbc, buf, buf, 8, &err), <, 0);
    test_error_expect(&err, "multiple of the block size");
    /* An 8-byte IV for a 16-byte block. */
    g_assert_cmpint(qcrypto_cipher_setiv(cbc, buf, 8, &err), <, 0);
    test_error_expect(&err, "IV length");

    ecb = qcrypto_cipher_new(QCRYPTO_CIPHER_ALGO_AES_128,
                             QCRYPTO_CIPHER_MODE_ECB, key, 16, &error_abort);
    g_assert_nonnull(ecb);
    g_assert_cmpint(qcrypto_cipher_setiv(ecb, buf, 16, &err), <, 0);
    test_error_expect(&err, "no IV");
}

static void test_cipher_names(void)
{
    for (int i = 0; i < QCRYPTO_CIPHER_ALGO__MAX; i++) {
        const char *name = qcrypto_cipher_algo_name(i);

        g_assert_nonnull(name);
        g_assert_cmpint(qcrypto_cipher_algo_parse(name), ==, i);
    }
    for (int i = 0; i < QCRYPTO_CIPHER_MODE__MAX; i++) {
        const char *name = qcrypto_cipher_mode_name(i);

        g_assert_nonnull(name);
        g_assert_cmpint(qcrypto_cipher_mode_parse(name), ==, i);
    }
    g_assert_cmpstr(qcrypto_cipher_algo_name(QCRYPTO_CIPHER_ALGO_AES_256),
                    ==, "aes-256");
    g_assert_cmpstr(qcrypto_cipher_mode_name(QCRYPTO_CIPHER_MODE_XTS),
                    ==, "xts");
    g_assert_cmpint(qcrypto_cipher_algo_parse("3des"), ==,
                    QCRYPTO_CIPHER_ALGO_DES_EDE3);
    g_assert_cmpint(qcrypto_cipher_algo_parse("aes-512"), ==, -1);
    g_assert_cmpint(qcrypto_cipher_mode_parse("ofb"), ==, -1);
}

/* Key lengths by mode: XTS doubles the key, LRW adds a tweak block. */
static void test_cipher_key_lengths(void)
{
    g_assert_cmpuint(qcrypto_cipher_get_mode_key_len(
                         QCRYPTO_CIPHER_ALGO_AES_256,
                         QCRYPTO_CIPHER_MODE_XTS), ==, 64);
    g_assert_cmpuint(qcrypto_cipher_get_mode_key_len(
                         QCRYPTO_CIPHER_ALGO_AES_128,
                         QCRYPTO_CIPHER_MODE_LRW), ==, 32);
    g_assert_cmpuint(qcrypto_cipher_get_iv_len(
                         QCRYPTO_CIPHER_ALGO_DES_EDE3,
                         QCRYPTO_CIPHER_MODE_CBC), ==, 8);
    g_assert_cmpuint(qcrypto_cipher_get_iv_len(
                         QCRYPTO_CIPHER_ALGO_AES_128,
                         QCRYPTO_CIPHER_MODE_ECB), ==, 0);
}

static void test_cipher_backend_override(void)
{
    const char *const *list = qcrypto_cipher_backend_list();
    guint8 key[16] = { 0 };
    QCryptoCipher *cipher;
    Error *err = NULL;
    bool found = false;

    for (size_t i = 0; list[i]; i++) {
        found |= g_str_equal(list[i], "nettle");
    }
    g_assert_true(found);

    g_assert_cmpint(qcrypto_cipher_set_backend("nettle", &error_abort), ==, 0);
    g_assert_cmpstr(qcrypto_cipher_get_backend(), ==, "nettle");
    cipher = qcrypto_cipher_new(QCRYPTO_CIPHER_ALGO_AES_128,
                                QCRYPTO_CIPHER_MODE_CBC, key, 16, &error_abort);
    g_assert_nonnull(cipher);
    g_assert_cmpstr(qcrypto_cipher_get_impl_name(cipher), ==, "nettle");
    qcrypto_cipher_free(cipher);

    g_assert_cmpint(qcrypto_cipher_set_backend("bogus", &err), <, 0);
    test_error_expect(&err, "bogus");
    /* A failed override leaves the previous choice. */
    g_assert_cmpstr(qcrypto_cipher_get_backend(), ==, "nettle");

    g_assert_cmpint(qcrypto_cipher_set_backend("auto", &error_abort), ==, 0);
    g_assert_cmpstr(qcrypto_cipher_get_backend(), ==, "auto");
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);

    /* Every vector on every backend that can run it. */
    for (const char *const *b = qcrypto_cipher_backend_list(); *b; b++) {
        for (size_t i = 0; i < G_N_ELEMENTS(cipher_vectors); i++) {
            CipherCase *c = g_new0(CipherCase, 1);
            g_autofree char *path =
                g_strdup_printf("/crypto/cipher/%s/%s", *b,
                                cipher_vectors[i].name);

            c->vector = &cipher_vectors[i];
            c->backend = *b;
            if (qcrypto_cipher_set_backend(*b, NULL) == 0 &&
                qcrypto_cipher_supports(c->vector->alg, c->vector->mode)) {
                g_test_add_data_func_full(path, c, test_cipher_vector, g_free);
            } else {
                g_free(c);
            }
        }
    }
    /* The other tests take the automatic choice. */
    qcrypto_cipher_set_backend("auto", NULL);
    for (int alg = 0; alg < QCRYPTO_CIPHER_ALGO__MAX; alg++) {
        g_autofree char *path =
            g_strdup_printf("/crypto/cipher/modes-from-ecb/%s",
                            qcrypto_cipher_algo_name(alg));
        g_test_add_data_func(path, GINT_TO_POINTER(alg),
                             test_cipher_modes_from_ecb);
    }
    g_test_add_func("/crypto/cipher/3des-parity", test_cipher_3des_parity);
    g_test_add_func("/crypto/cipher/errors", test_cipher_errors);
    g_test_add_func("/crypto/cipher/names", test_cipher_names);
    g_test_add_func("/crypto/cipher/key-lengths", test_cipher_key_lengths);
    g_test_add_func("/crypto/cipher/backend-override",
                    test_cipher_backend_override);
    return g_test_run();
}
