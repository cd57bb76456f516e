/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * LRW (crypto/lrw.c) through the cipher interface, as dm-crypt's
 * lrw(aes) runs it: the LRW-32-AES test vectors of the IEEE P1619 LRW
 * draft (Cyril Guyot, IEEE P1619 email archive pdf00017), vectors 1-7,
 * the counter-wrap vector and the 512-byte data unit vector (Ken
 * Buchanan, stds-p1619 msg00173), all as carried by the Linux kernel's
 * crypto/testmgr.h (aes_lrw_tv_template). Each runs whole and in two
 * calls, in place and out of place, aligned and at an odd address. Then
 * the incremental tweak update is checked against a direct K2 * I
 * multiplication, across the carries of the block index.
 *
 * The key is the AES key followed by the 16-byte tweak key K2; the IV is
 * the 128-bit big-endian index of the first block.
 */
#include <string.h>

#include "crypto/cipher.h"
#include "crypto-test-hex.h"

/* The 512-byte data unit (stds-p1619 msg00173). */
static const char lrw_pt512[] =
    "0511b718abc62dac705df62294cde56c176bf61cf0f36ef850381f7149b657d6"
    "8fcb8d6be3a62990fe2a6282ae6d8bf6ad1e9e205f38be04da108eeda2a487ab"
    "da6bb40c75bad37cc9ac4231957cc904ebd56e32698adba615d73f4f2f666903"
    "9c1f540fde1ff3654c9612ed7c9203016fbc3593acf127f1b496825a5fb0a050"
    "89a48e664485ccfd331470e396b2c3d3bb545a1af974a2c52d6475ddb454e674"
    "8cd39d9e86ab5153b7933e6fd04e2c40f6a82e3e9df466a5761273441a56d772"
    "88cd218c4c0ffeda95e03aa6a58446cdd53e9d3ae267e6601ae2708558c21b09"
    "e1d72ccaada88ff9acb30edbca2ee2b85171d93c6cf156f8ea9cf1fb0ce6b710"
    "1cf8a97ce85335c1903e764a74a4212cf62c4e0f943a882e41096a337df6dd3f"
    "8d23317484eb886eccb9bc2283190722a52ddfa5f380857884396a6d6a994fa5"
    "15fe46b0e46ca5413cce8f426071a7750840658a82bff5437196a94d448a20be"
    "fa4dbbc07d319665e775e53efd923bc955bb167ef7c28ca4401de5ef0edfe49a"
    "627365fd4663253d2bafe564fea55ccf24f3b4ac64badf4bc6967d812d8d97f7"
    "c5687784322bcc857496f0127761b9eb71aa82cb1cdb89c8c6b5e35c7d390724"
    "da398745c02bbb01acbc2a5c7ffce8ce6d9c6fedd3c1a1d6c555a9662fe1c832"
    "a65da43a9873e845a4c7a8b4f61303f6e92ec4290f84dbc421c4c2756789370a";

/* ... and its ciphertext. */
static const char lrw_ct512[] =
    "1a1da930adf92f9bb61daeeff02ff85a393cbf2ab245b2231b633ccfaabecf4e"
    "fae829c220682b3c2e8bf76e25bde33d6627d6afd6643ee3e8584697395107de"
    "cb37bca9c05f75c30e84231d16d41c599c1a0255ab3a971ddfddc70651d770ae"
    "23c68cf51ea0e582b8b2bf04a0328e68ebaf6e2d94222fce4cb559e2a22fa098"
    "1a97c6d4b50059f2841472b19a6ea37fea20e7cb65773adfc8976715c22a27cc"
    "1855a1240b2424af5bec68b8c8f5ba63ffed89ced53d88f325ef057c3aefebd8"
    "7a320dd11e5859999025b526b0e32b6c4ca98b844f5e0150413058c56274521d"
    "45246a42644f971ca866b56d79d40d48c55ff39032dddde1e4a99ffcc3525a46"
    "e481849536597a6baab360adce9f9f28e0017522c44ea9625c620d00cb13e843"
    "72d42d5346b5d1162218df3433f5d61cb879789794ff72134c27fccbbf0153a6"
    "b4506ededfb543a459df52f97ce0116f2d148e24612ce117ccce510c198a8230"
    "94d53d6a53065ebdb7ebfafd2751de851e865311539400ee2b8c082abfddae11"
    "cb1ea2079a80cf629b09dc953c968eb109bde4ebdbca707a9efa3118453c2133"
    "b0b32beaf3712de103ad1b48d46727f062e43dfb9b0876e7dd2b0139045a587a"
    "f71190ecbd515c326bd73539026bf2a6d00d07e106c45b7de46ad7ee151f83b4"
    "a3a75ec390b7efd3b74ff8924cb73c29cd7e2b5d43ea42e7743f7d588875de3e";

typedef struct LRWVector {
    const char *name;
    QCryptoCipherAlgo alg;
    const char *key;            /* AES key || K2 */
    const char *iv;             /* index of the first block, big-endian */
    const char *plaintext;
    const char *ciphertext;
} LRWVector;

/* "0123456789ABCDEF", the plaintext of the draft's single-block vectors. */
#define LRW_PT "30313233343536373839414243444546"
#define IV_ONE "00000000000000000000000000000001"
#define IV_TWO "00000000000000000000000000000002"
#define IV_2_32 "00000000000000000000000200000000"

static const LRWVector lrw_vectors[] = {
    {
        "lrw-32-aes-1", QCRYPTO_CIPHER_ALGO_AES_128,
        "4562ac25f828176d4c268414b5680185" "258e2a05e73e9d03ee5a830ccc094c87",
        IV_ONE, LRW_PT, "f1b273cd65a3df5fe95d489254634eb8",
    },
    {
        "lrw-32-aes-2", QCRYPTO_CIPHER_ALGO_AES_128,
        "59704714f557478cd779e80f54887944" "0d48f0b7b15a53ea1caa6b29c2cafbaf",
        IV_TWO, LRW_PT, "00c82bae95bbcde5274f0769b260e136",
    },
    {
        "lrw-32-aes-3", QCRYPTO_CIPHER_ALGO_AES_128,
        "d82a9134b26a565030fe69e2377f9847" "cdf90b160c648fb6b00d0d1bae85871f",
        IV_2_32, LRW_PT, "76322183ed8ff182f9596203690e5e01",
    },
    {
        "lrw-32-aes-4", QCRYPTO_CIPHER_ALGO_AES_192,
        "0f6aeff8d3d2bb152583f73c1f012874cac6bc354d4a6554"
        "90ae61cf7baebdccade494c54a29ae70",
        IV_ONE, LRW_PT, "9c0f152f55a2d8f0d67b8f9e2822bc41",
    },
    {
        "lrw-32-aes-5", QCRYPTO_CIPHER_ALGO_AES_192,
        "8ad4ee102fbd81fff886ceac93c5adc6a01907c09df7bbdd"
        "5213b2b7f0ff11d8d608d0cd2eb1176f",
        IV_2_32, LRW_PT, "d4276a7f14913d65c860480287e33406",
    },
    {
        "lrw-32-aes-6", QCRYPTO_CIPHER_ALGO_AES_256,
        "f8d476ffd646ee6c2384cb1c77d6195dfef1a9f37bbc8d21a79c21f8cb900289"
        "a845348ec8c5b5f126f50e76fefd1b1e",
        IV_ONE, LRW_PT, "bd06b8e1db98899ec498e491cf1c702b",
    },
    {
        "lrw-32-aes-7", QCRYPTO_CIPHER_ALGO_AES_256,
        "fb7615b23d80891dd470980bc79584c8b2fb64ce6097878d17fce45a49e830b7"
        "6e7817e72d5e12d46064047af12f9e0c",
        IV_2_32, LRW_PT, "5b908ec1abdd675f3d698a9553c89ce5",
    },
    {
        /*
         * Vector 1's key from index 2^128 - 1: the index wraps to 0, so
         * the third block (index 1) is vector 1's ciphertext again.
         */
        "index-wrap", QCRYPTO_CIPHER_ALGO_AES_128,
        "4562ac25f828176d4c268414b5680185" "258e2a05e73e9d03ee5a830ccc094c87",
        "ffffffffffffffffffffffffffffffff", LRW_PT LRW_PT LRW_PT,
        "479050f6f48d5c7f84c783952da202c0" "da7fa3c0882a0a50fbc1780339fe1de5"
        "f1b273cd65a3df5fe95d489254634eb8",
    },
    {
        "p1619-msg00173-512-bytes", QCRYPTO_CIPHER_ALGO_AES_256,
        "f8d476ffd646ee6c2384cb1c77d6195dfef1a9f37bbc8d21a79c21f8cb900289"
        "a845348ec8c5b5f126f50e76fefd1b1e",
        IV_ONE, lrw_pt512, lrw_ct512,
    },
};

/* Set the IV, then run len bytes in one call, or two split at a block. */
static void lrw_run(QCryptoCipher *cipher, const guint8 *iv, bool encrypt,
                    const guint8 *in, guint8 *out, size_t len, bool split)
{
    size_t first = split ? len / 16 / 2 * 16 : 0;

    g_assert_cmpint(qcrypto_cipher_setiv(cipher, iv, 16, &error_abort), ==, 0);
    if (first) {
        g_assert_cmpint(encrypt ?
                        qcrypto_cipher_encrypt(cipher, in, out, first,
                                               &error_abort) :
                        qcrypto_cipher_decrypt(cipher, in, out, first,
                                               &error_abort), ==, 0);
    }
    g_assert_cmpint(encrypt ?
                    qcrypto_cipher_encrypt(cipher, in + first, out + first,
                                           len - first, &error_abort) :
                    qcrypto_cipher_decrypt(cipher, in + first, out + first,
                                           len - first, &error_abort), ==, 0);
}

typedef struct LRWCase {
    const LRWVector *vector;
    const char *backend;
} LRWCase;

static void test_lrw_vector(gconstpointer opaque)
{
    const LRWCase *c = opaque;
    const LRWVector *v = c->vector;
    size_t nkey, niv, len, nct;
    g_autofree guint8 *key = test_unhex(v->key, &nkey);
    g_autofree guint8 *iv = test_unhex(v->iv, &niv);
    g_autofree guint8 *pt = test_unhex(v->plaintext, &len);
    g_autofree guint8 *ct = test_unhex(v->ciphertext, &nct);
    g_autofree guint8 *inbuf = g_malloc(len + 1);
    g_autofree guint8 *outbuf = g_malloc(len + 1);
    g_autoptr(QCryptoCipher) cipher = NULL;

    g_assert_cmpuint(niv, ==, 16);
    g_assert_cmpuint(nct, ==, len);
    g_assert_cmpint(qcrypto_cipher_set_backend(c->backend,
                                               &error_abort), ==, 0);
    cipher = qcrypto_cipher_new(v->alg, QCRYPTO_CIPHER_MODE_LRW, key, nkey,
                                &error_abort);
    g_assert_nonnull(cipher);

    for (int split = 0; split <= 1; split++) {
        for (size_t offset = 0; offset <= 1; offset++) {
            guint8 *in = inbuf + offset, *out = outbuf + offset;

            memcpy(in, pt, len);
            lrw_run(cipher, iv, true, in, out, len, split);
            g_assert_cmpmem(out, len, ct, len);
            memcpy(in, ct, len);
            lrw_run(cipher, iv, false, in, out, len, split);
            g_assert_cmpmem(out, len, pt, len);

            memcpy(in, pt, len);
            lrw_run(cipher, iv, true, in, in, len, split);
            g_assert_cmpmem(in, len, ct, len);
            lrw_run(cipher, iv, false, in, in, len, split);
            g_assert_cmpmem(in, len, pt, len);
        }
    }
}

/*
 * a * b in GF(2^128) the slow, obvious way: 16-byte big-endian numbers,
 * bit k the coefficient of x^k, reduced by x^128 + x^7 + x^2 + x + 1.
 */
static void gf128_mul_slow(const guint8 a[16], const guint8 b[16],
                           guint8 out[16])
{
    guint8 v[16], r[16] = { 0 };

    memcpy(v, a, 16);
    for (int k = 0; k < 128; k++) {
        guint8 top = v[0] >> 7;

        if (b[15 - k / 8] >> (k % 8) & 1) {
            for (int i = 0; i < 16; i++) {
                r[i] ^= v[i];
            }
        }
        for (int i = 0; i < 15; i++) {
            v[i] = (v[i] << 1) | (v[i + 1] >> 7);
        }
        v[15] = (v[15] << 1) ^ (top ? 0x87 : 0);
    }
    memcpy(out, r, 16);
}

static void index_increment(guint8 idx[16])
{
    for (int i = 15; i >= 0 && ++idx[i] == 0; i--) {
        /* carry */
    }
}

typedef struct LRWRefCase {
    QCryptoCipherAlgo alg;
    const char *first_index;
} LRWRefCase;

static const LRWRefCase lrw_ref_cases[] = {
    /* from 0, over more than one 256-block chunk */
    { QCRYPTO_CIPHER_ALGO_AES_128, "00000000000000000000000000000000" },
    /* across the carry from the low 64-bit word into the high one */
    { QCRYPTO_CIPHER_ALGO_AES_256, "00000000000000007fffffffffffff80" },
    { QCRYPTO_CIPHER_ALGO_AES_256, "0000000000000000ffffffffffffff80" },
    /* across the wrap of the whole 128-bit index */
    { QCRYPTO_CIPHER_ALGO_SERPENT_256, "ffffffffffffffffffffffffffffff37" },
    { QCRYPTO_CIPHER_ALGO_TWOFISH_128, "0123456789abcdeffedcba9876543210" },
};

/*
 * The incremental tweak update and the bulk path against the definition:
 * every block computed alone, T = K2 * I by the slow multiplication,
 * C = E_K1(P ^ T) ^ T, for 300 blocks handed over in uneven pieces.
 */
static void test_lrw_vs_reference(gconstpointer opaque)
{
    const LRWRefCase *c = opaque;
    const size_t nblocks = 300, len = nblocks * 16;
    const size_t pieces[] = { 16, 4096, 32, 160 };
    size_t nk = qcrypto_cipher_get_key_len(c->alg);
    g_autofree guint8 *key = g_malloc(nk + 16);
    g_autofree guint8 *iv = test_unhex(c->first_index, NULL);
    g_autofree guint8 *pt = g_malloc(len);
    g_autofree guint8 *ref = g_malloc(len);
    g_autofree guint8 *out = g_malloc(len);
    g_autoptr(QCryptoCipher) lrw = NULL;
    g_autoptr(QCryptoCipher) ecb = NULL;
    guint8 idx[16], T[16], blk[16];
    size_t done = 0;

    for (size_t i = 0; i < nk + 16; i++) {
        key[i] = 0x5a ^ (i * 37);
    }
    for (size_t i = 0; i < len; i++) {
        pt[i] = i * 11 + (i >> 9);
    }
    lrw = qcrypto_cipher_new(c->alg, QCRYPTO_CIPHER_MODE_LRW, key, nk + 16,
                             &error_abort);
    g_assert_nonnull(lrw);
    ecb = qcrypto_cipher_new(c->alg, QCRYPTO_CIPHER_MODE_ECB, key, nk,
                             &error_abort);
    g_assert_nonnull(ecb);

    memcpy(idx, iv, 16);
    for (size_t off = 0; off < len; off += 16) {
        gf128_mul_slow(key + nk, idx, T);
        for (int i = 0; i < 16; i++) {
            blk[i] = pt[off + i] ^ T[i];
        }
        g_assert_cmpint(qcrypto_cipher_encrypt(ecb, blk, blk, 16,
                                               &error_abort), ==, 0);
        for (int i = 0; i < 16; i++) {
            ref[off + i] = blk[i] ^ T[i];
        }
        index_increment(idx);
    }

    g_assert_cmpint(qcrypto_cipher_setiv(lrw, iv, 16, &error_abort), ==, 0);
    for (size_t i = 0; done < len; i = (i + 1) % G_N_ELEMENTS(pieces)) {
        size_t n = MIN(pieces[i], len - done);

        g_assert_cmpint(qcrypto_cipher_encrypt(lrw, pt + done, out + done, n,
                                               &error_abort), ==, 0);
        done += n;
    }
    g_assert_cmpmem(out, len, ref, len);

    g_assert_cmpint(qcrypto_cipher_setiv(lrw, iv, 16, &error_abort), ==, 0);
    g_assert_cmpint(qcrypto_cipher_decrypt(lrw, out, out, len,
                                           &error_abort), ==, 0);
    g_assert_cmpmem(out, len, pt, len);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);

    /* Every vector on every backend that can run it. */
    for (const char *const *b = qcrypto_cipher_backend_list(); *b; b++) {
        for (size_t i = 0; i < G_N_ELEMENTS(lrw_vectors); i++) {
            LRWCase *c = g_new0(LRWCase, 1);
            g_autofree char *path =
                g_strdup_printf("/crypto/lrw/%s/%s", *b, lrw_vectors[i].name);

            c->vector = &lrw_vectors[i];
            c->backend = *b;
            if (qcrypto_cipher_set_backend(*b, NULL) == 0 &&
                qcrypto_cipher_supports(c->vector->alg,
                                        QCRYPTO_CIPHER_MODE_LRW)) {
                g_test_add_data_func_full(path, c, test_lrw_vector, g_free);
            } else {
                g_free(c);
            }
        }
    }
    /* The reference tests take the automatic choice. */
    qcrypto_cipher_set_backend("auto", NULL);
    for (size_t i = 0; i < G_N_ELEMENTS(lrw_ref_cases); i++) {
        g_autofree char *path =
            g_strdup_printf("/crypto/lrw/reference/%s-from-%s",
                            qcrypto_cipher_algo_name(lrw_ref_cases[i].alg),
                            lrw_ref_cases[i].first_index);
        g_test_add_data_func(path, &lrw_ref_cases[i], test_lrw_vs_reference);
    }
    return g_test_run();
}
