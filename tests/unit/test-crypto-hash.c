/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Message digests against the standards' own examples:
 *   MD5:        RFC 1321 appendix A.5 (the test suite)
 *   SHA-1/2:    FIPS 180-4 examples (NIST CSRC "Examples with intermediate
 *               values": one-block "abc", the two-block messages)
 *   RIPEMD-160: Dobbertin, Bosselaers, Preneel, "RIPEMD-160: A Strengthened
 *               Version of RIPEMD", test vectors table
 *   Whirlpool:  the NESSIE / ISO/IEC 10118-3:2004 test vectors in the
 *               Whirlpool specification's reference package
 */
#include <string.h>

#include "crypto/hash.h"

/* FIPS 180-4 two-block examples. */
#define MSG448 "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"
#define MSG896 "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmn" \
               "hijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu"
#define ALPHA "abcdefghijklmnopqrstuvwxyz"
#define ALNUM "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
#define DIGITS80 "1234567890123456789012345678901234567890" \
                 "1234567890123456789012345678901234567890"

typedef struct {
    QCryptoHashAlgo alg;
    const char *msg;
    size_t repeat;      /* msg repeated this many times (1: once) */
    const char *digest;
} HashVector;

static const HashVector hash_vectors[] = {
    /* RFC 1321 A.5 */
    { QCRYPTO_HASH_ALGO_MD5, "", 1, "d41d8cd98f00b204e9800998ecf8427e" },
    { QCRYPTO_HASH_ALGO_MD5, "a", 1, "0cc175b9c0f1b6a831c399e269772661" },
    { QCRYPTO_HASH_ALGO_MD5, "abc", 1, "900150983cd24fb0d6963f7d28e17f72" },
    { QCRYPTO_HASH_ALGO_MD5, "message digest", 1,
      "f96b697d7cb7938d525a2f31aaf161d0" },
    { QCRYPTO_HASH_ALGO_MD5, ALPHA, 1, "c3fcd3d76192e4007dfb496cca67e13b" },
    { QCRYPTO_HASH_ALGO_MD5, ALNUM, 1, "d174ab98d277d9f5a5611c2c9f419d9f" },
    { QCRYPTO_HASH_ALGO_MD5, DIGITS80, 1,
      "57edf4a22be3c955ac49da2e2107b67a" },

    /* FIPS 180-4 examples */
    { QCRYPTO_HASH_ALGO_SHA1, "abc", 1,
      "a9993e364706816aba3e25717850c26c9cd0d89d" },
    { QCRYPTO_HASH_ALGO_SHA1, MSG448, 1,
      "84983e441c3bd26ebaae4aa1f95129e5e54670f1" },
    { QCRYPTO_HASH_ALGO_SHA1, "a", 1000000,
      "34aa973cd4c4daa4f61eeb2bdbad27316534016f" },
    { QCRYPTO_HASH_ALGO_SHA224, "abc", 1,
      "23097d223405d8228642a477bda255b32aadbce4bda0b3f7e36c9da7" },
    { QCRYPTO_HASH_ALGO_SHA224, MSG448, 1,
      "75388b16512776cc5dba5da1fd890150b0c6455cb4f58b1952522525" },
    { QCRYPTO_HASH_ALGO_SHA256, "abc", 1,
      "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad" },
    { QCRYPTO_HASH_ALGO_SHA256, MSG448, 1,
      "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1" },
    { QCRYPTO_HASH_ALGO_SHA256, "a", 1000000,
      "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0" },
    { QCRYPTO_HASH_ALGO_SHA384, "abc", 1,
      "cb00753f45a35e8bb5a03d699ac65007272c32ab0eded1631a8b605a43ff5bed"
      "8086072ba1e7cc2358baeca134c825a7" },
    { QCRYPTO_HASH_ALGO_SHA384, MSG896, 1,
      "09330c33f71147e83d192fc782cd1b4753111b173b3b05d22fa08086e3b0f712"
      "fcc7c71a557e2db966c3e9fa91746039" },
    { QCRYPTO_HASH_ALGO_SHA512, "abc", 1,
      "ddaf35a193617abacc417349ae20413112e6fa4e89a97ea20a9eeee64b55d39a"
      "2192992a274fc1a836ba3c23a3feebbd454d4423643ce80e2a9ac94fa54ca49f" },
    { QCRYPTO_HASH_ALGO_SHA512, MSG896, 1,
      "8e959b75dae313da8cf4f72814fc143f8f7779c6eb9f7fa17299aeadb6889018"
      "501d289e4900f7e4331b99dec4b5433ac7d329eeb6dd26545e96e55b874be909" },

    /* The RIPEMD-160 paper */
    { QCRYPTO_HASH_ALGO_RIPEMD160, "", 1,
      "9c1185a5c5e9fc54612808977ee8f548b2258d31" },
    { QCRYPTO_HASH_ALGO_RIPEMD160, "a", 1,
      "0bdc9d2d256b3ee9daae347be6f4dc835a467ffe" },
    { QCRYPTO_HASH_ALGO_RIPEMD160, "abc", 1,
      "8eb208f7e05d987a9b044a8e98c6b087f15a0bfc" },
    { QCRYPTO_HASH_ALGO_RIPEMD160, "message digest", 1,
      "5d0689ef49d2fae572b881b123a85ffa21595f36" },
    { QCRYPTO_HASH_ALGO_RIPEMD160, ALPHA, 1,
      "f71c27109c692c1b56bbdceb5b9d2865b3708dbc" },
    { QCRYPTO_HASH_ALGO_RIPEMD160, MSG448, 1,
      "12a053384a9c0c88e405a06c27dcf49ada62eb2b" },
    { QCRYPTO_HASH_ALGO_RIPEMD160, ALNUM, 1,
      "b0e20b6e3116640286ed3a87a5713079b21f5189" },
    { QCRYPTO_HASH_ALGO_RIPEMD160, DIGITS80, 1,
      "9b752e45573d4b39f4dbd3323cab82bf63326bfb" },
    { QCRYPTO_HASH_ALGO_RIPEMD160, "a", 1000000,
      "52783243c1697bdbe16d37f97f68f08325dc1528" },

    /* NESSIE / ISO/IEC 10118-3 Whirlpool */
    { QCRYPTO_HASH_ALGO_WHIRLPOOL, "", 1,
      "19fa61d75522a4669b44e39c1d2e1726c530232130d407f89afee0964997f7a7"
      "3e83be698b288febcf88e3e03c4f0757ea8964e59b63d93708b138cc42a66eb3" },
    { QCRYPTO_HASH_ALGO_WHIRLPOOL, "a", 1,
      "8aca2602792aec6f11a67206531fb7d7f0dff59413145e6973c45001d0087b42"
      "d11bc645413aeff63a42391a39145a591a92200d560195e53b478584fdae231a" },
    { QCRYPTO_HASH_ALGO_WHIRLPOOL, "abc", 1,
      "4e2448a4c6f486bb16b6562c73b4020bf3043e3a731bce721ae1b303d97e6d4c"
      "7181eebdb6c57e277d0e34957114cbd6c797fc9d95d8b582d225292076d4eef5" },
    { QCRYPTO_HASH_ALGO_WHIRLPOOL, "message digest", 1,
      "378c84a4126e2dc6e56dcc7458377aac838d00032230f53ce1f5700c0ffb4d3b"
      "8421557659ef55c106b4b52ac5a4aaa692ed920052838f3362e86dbd37a8903e" },
    { QCRYPTO_HASH_ALGO_WHIRLPOOL, ALPHA, 1,
      "f1d754662636ffe92c82ebb9212a484a8d38631ead4238f5442ee13b8054e41b"
      "08bf2a9251c30b6a0b8aae86177ab4a6f68f673e7207865d5d9819a3dba4eb3b" },
    { QCRYPTO_HASH_ALGO_WHIRLPOOL, ALNUM, 1,
      "dc37e008cf9ee69bf11f00ed9aba26901dd7c28cdec066cc6af42e40f82f3a1e"
      "08eba26629129d8fb7cb57211b9281a65517cc879d7b962142c65f5a7af01467" },
    { QCRYPTO_HASH_ALGO_WHIRLPOOL, DIGITS80, 1,
      "466ef18babb0154d25b9d38a6414f5c08784372bccb204d6549c4afadb601429"
      "4d5bd8df2a6c44e538cd047b2681a51a2c60481e88c5a20b2c2a80cf3a9a083b" },
    /* 32 bytes: the padding then needs a second block. */
    { QCRYPTO_HASH_ALGO_WHIRLPOOL, "abcdbcdecdefdefgefghfghighijhijk", 1,
      "2a987ea40f917061f5d6f0a0e4644f488a7a5a52deee656207c562f988e95c69"
      "16bdc8031bc5be1b7b947639fe050b56939baaa0adff9ae6745b7b181c3be3fd" },
    { QCRYPTO_HASH_ALGO_WHIRLPOOL, "a", 1000000,
      "0c99005beb57eff50a7cf005560ddf5d29057fd86b20bfd62deca0f1ccea4af5"
      "1fc15490eddc47af32bb2b66c34ff9ad8c6008ad677f77126953b226e4ed8b01" },
};

static char *hash_hex(const uint8_t *buf, size_t len)
{
    GString *s = g_string_new(NULL);

    for (size_t i = 0; i < len; i++) {
        g_string_append_printf(s, "%02x", buf[i]);
    }
    return g_string_free(s, FALSE);
}

static uint8_t *hash_vector_message(const HashVector *v, size_t *len)
{
    size_t n = strlen(v->msg);
    uint8_t *buf = g_malloc(n * v->repeat + 1);

    for (size_t i = 0; i < v->repeat; i++) {
        memcpy(buf + i * n, v->msg, n);
    }
    *len = n * v->repeat;
    return buf;
}

/* Every vector, one-shot. */
static void test_hash_vectors(void)
{
    for (size_t i = 0; i < G_N_ELEMENTS(hash_vectors); i++) {
        const HashVector *v = &hash_vectors[i];
        uint8_t digest[QCRYPTO_HASH_MAX_DIGEST_LEN];
        g_autofree char *hex = NULL;
        g_autofree uint8_t *msg = NULL;
        Error *err = NULL;
        size_t len;

        msg = hash_vector_message(v, &len);
        g_assert_cmpint(qcrypto_hash_bytes(v->alg, msg, len, digest, &err),
                        ==, 0);
        g_assert_null(err);
        g_assert_cmpuint(strlen(v->digest), ==,
                         2 * qcrypto_hash_digest_len(v->alg));
        hex = hash_hex(digest, qcrypto_hash_digest_len(v->alg));
        g_assert_cmpstr(hex, ==, v->digest);
    }
}

/*
 * Every vector again, fed in pieces of various sizes around the block
 * size, through one context reused after each finalize.
 */
static void test_hash_incremental(void)
{
    static const size_t chunks[] = { 1, 3, 31, 63, 64, 65, 127, 128, 1000 };

    for (size_t i = 0; i < G_N_ELEMENTS(hash_vectors); i++) {
        const HashVector *v = &hash_vectors[i];
        g_autoptr(QCryptoHash) hash = qcrypto_hash_new(v->alg, NULL);
        g_autofree uint8_t *msg = NULL;
        size_t len;

        g_assert_nonnull(hash);
        msg = hash_vector_message(v, &len);
        for (size_t c = 0; c < G_N_ELEMENTS(chunks); c++) {
            uint8_t digest[QCRYPTO_HASH_MAX_DIGEST_LEN];
            g_autofree char *hex = NULL;

            for (size_t off = 0; off < len; off += chunks[c]) {
                qcrypto_hash_update(hash, msg + off,
                                    MIN(chunks[c], len - off));
            }
            qcrypto_hash_finalize(hash, digest);
            hex = hash_hex(digest, qcrypto_hash_digest_len(v->alg));
            g_assert_cmpstr(hex, ==, v->digest);
        }
    }
}

/* Split a message at every point: both halves give the one-shot digest. */
static void test_hash_split_anywhere(void)
{
    uint8_t msg[300];

    for (size_t i = 0; i < sizeof(msg); i++) {
        msg[i] = i * 37 + 11;
    }
    for (int alg = 0; alg < QCRYPTO_HASH_ALGO__MAX; alg++) {
        uint8_t want[QCRYPTO_HASH_MAX_DIGEST_LEN];
        g_autoptr(QCryptoHash) hash = qcrypto_hash_new(alg, NULL);
        size_t dlen = qcrypto_hash_digest_len(alg);

        g_assert_cmpint(qcrypto_hash_bytes(alg, msg, sizeof(msg), want,
                                           NULL), ==, 0);
        for (size_t cut = 0; cut <= sizeof(msg); cut++) {
            uint8_t got[QCRYPTO_HASH_MAX_DIGEST_LEN];

            qcrypto_hash_update(hash, msg, cut);
            qcrypto_hash_update(hash, msg + cut, sizeof(msg) - cut);
            qcrypto_hash_finalize(hash, got);
            g_assert_cmpmem(got, dlen, want, dlen);
        }
    }
}

/* Linux's wp256 / wp384: the first 32 / 48 bytes of the Whirlpool digest. */
static void test_hash_whirlpool_truncated(void)
{
    static const char abc_whirlpool[] =
        "4e2448a4c6f486bb16b6562c73b4020bf3043e3a731bce721ae1b303d97e6d4c"
        "7181eebdb6c57e277d0e34957114cbd6c797fc9d95d8b582d225292076d4eef5";
    static const struct {
        QCryptoHashAlgo alg;
        size_t len;
    } variants[] = {
        { QCRYPTO_HASH_ALGO_WP256, 32 },
        { QCRYPTO_HASH_ALGO_WP384, 48 },
        { QCRYPTO_HASH_ALGO_WHIRLPOOL, 64 },
    };

    for (size_t i = 0; i < G_N_ELEMENTS(variants); i++) {
        uint8_t digest[QCRYPTO_HASH_MAX_DIGEST_LEN];
        g_autofree char *hex = NULL;
        g_autofree char *want = g_strndup(abc_whirlpool, 2 * variants[i].len);

        g_assert_cmpuint(qcrypto_hash_digest_len(variants[i].alg), ==,
                         variants[i].len);
        g_assert_cmpuint(qcrypto_hash_block_len(variants[i].alg), ==, 64);
        g_assert_cmpint(qcrypto_hash_bytes(variants[i].alg, "abc", 3,
                                           digest, NULL), ==, 0);
        hex = hash_hex(digest, variants[i].len);
        g_assert_cmpstr(hex, ==, want);
    }
}

/* Digest and block lengths from the algorithms' standards. */
static void test_hash_lengths(void)
{
    static const struct {
        QCryptoHashAlgo alg;
        size_t digest, block;
    } lens[] = {
        { QCRYPTO_HASH_ALGO_MD5, 16, 64 },
        { QCRYPTO_HASH_ALGO_SHA1, 20, 64 },
        { QCRYPTO_HASH_ALGO_SHA224, 28, 64 },
        { QCRYPTO_HASH_ALGO_SHA256, 32, 64 },
        { QCRYPTO_HASH_ALGO_SHA384, 48, 128 },
        { QCRYPTO_HASH_ALGO_SHA512, 64, 128 },
        { QCRYPTO_HASH_ALGO_RIPEMD160, 20, 64 },
        { QCRYPTO_HASH_ALGO_WHIRLPOOL, 64, 64 },
    };

    for (size_t i = 0; i < G_N_ELEMENTS(lens); i++) {
        g_assert_true(qcrypto_hash_supports(lens[i].alg));
        g_assert_cmpuint(qcrypto_hash_digest_len(lens[i].alg), ==,
                         lens[i].digest);
        g_assert_cmpuint(qcrypto_hash_block_len(lens[i].alg), ==,
                         lens[i].block);
    }
    g_assert_false(qcrypto_hash_supports(QCRYPTO_HASH_ALGO__MAX));
}

static void test_hash_names(void)
{
    static const char *const names[QCRYPTO_HASH_ALGO__MAX] = {
        [QCRYPTO_HASH_ALGO_MD5] = "md5",
        [QCRYPTO_HASH_ALGO_SHA1] = "sha1",
        [QCRYPTO_HASH_ALGO_SHA224] = "sha224",
        [QCRYPTO_HASH_ALGO_SHA256] = "sha256",
        [QCRYPTO_HASH_ALGO_SHA384] = "sha384",
        [QCRYPTO_HASH_ALGO_SHA512] = "sha512",
        [QCRYPTO_HASH_ALGO_RIPEMD160] = "ripemd160",
        [QCRYPTO_HASH_ALGO_WHIRLPOOL] = "whirlpool",
        [QCRYPTO_HASH_ALGO_WP256] = "wp256",
        [QCRYPTO_HASH_ALGO_WP384] = "wp384",
    };

    for (int alg = 0; alg < QCRYPTO_HASH_ALGO__MAX; alg++) {
        g_assert_cmpstr(qcrypto_hash_algo_name(alg), ==, names[alg]);
        g_assert_cmpint(qcrypto_hash_algo_parse(names[alg]), ==, alg);
    }
    g_assert_cmpint(qcrypto_hash_algo_parse("wp512"), ==,
                    QCRYPTO_HASH_ALGO_WHIRLPOOL);
    g_assert_cmpint(qcrypto_hash_algo_parse("sha3-256"), ==, -1);
    g_assert_cmpint(qcrypto_hash_algo_parse("sha"), ==, -1);
    g_assert_cmpint(qcrypto_hash_algo_parse(""), ==, -1);
}

static void test_hash_new_unknown(void)
{
    Error *err = NULL;

    g_assert_null(qcrypto_hash_new(QCRYPTO_HASH_ALGO__MAX, &err));
    g_assert_nonnull(err);
    error_free(err);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/crypto/hash/vectors", test_hash_vectors);
    g_test_add_func("/crypto/hash/incremental", test_hash_incremental);
    g_test_add_func("/crypto/hash/split-anywhere", test_hash_split_anywhere);
    g_test_add_func("/crypto/hash/whirlpool-truncated",
                    test_hash_whirlpool_truncated);
    g_test_add_func("/crypto/hash/lengths", test_hash_lengths);
    g_test_add_func("/crypto/hash/names", test_hash_names);
    g_test_add_func("/crypto/hash/new-unknown", test_hash_new_unknown);
    return g_test_run();
}
