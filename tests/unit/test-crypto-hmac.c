/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * HMAC against the RFCs' test cases:
 *   RFC 4231 section 4 (HMAC-SHA-224/256/384/512, cases 1-7; case 5's MAC
 *   is truncated to 128 bits, so only that prefix is compared),
 *   RFC 2202 sections 2 and 3 (HMAC-MD5 and HMAC-SHA-1, cases 1-7),
 *   RFC 2286 section 2 (HMAC-RIPEMD-160, cases 1-7).
 * Then, for every hash (Whirlpool has no published HMAC vectors), the
 * precomputed-state HMAC against RFC 2104's formula written out with the
 * plain hash API.
 */
#include <stdio.h>
#include <string.h>

#include "crypto/hmac.h"

/*
 * Keys and data as the RFCs describe them: "str:" text, "hex:" bytes,
 * "rep:XX*N" the byte XX repeated N times.
 */
static uint8_t *spec_bytes(const char *spec, size_t *len)
{
    if (g_str_has_prefix(spec, "str:")) {
        *len = strlen(spec + 4);
        return (uint8_t *)g_strdup(spec + 4);
    }
    if (g_str_has_prefix(spec, "hex:")) {
        const char *hex = spec + 4;
        uint8_t *buf;

        *len = strlen(hex) / 2;
        buf = g_malloc(*len + 1);
        for (size_t i = 0; i < *len; i++) {
            buf[i] = g_ascii_xdigit_value(hex[2 * i]) << 4 |
                     g_ascii_xdigit_value(hex[2 * i + 1]);
        }
        return buf;
    }
    if (g_str_has_prefix(spec, "rep:")) {
        unsigned byte, count;
        uint8_t *buf;

        g_assert_cmpint(sscanf(spec + 4, "%x*%u", &byte, &count), ==, 2);
        buf = g_malloc(count + 1);
        memset(buf, byte, count);
        *len = count;
        return buf;
    }
    g_assert_not_reached();
}

static char *hmac_hex(const uint8_t *buf, size_t len)
{
    GString *s = g_string_new(NULL);

    for (size_t i = 0; i < len; i++) {
        g_string_append_printf(s, "%02x", buf[i]);
    }
    return g_string_free(s, FALSE);
}

typedef struct {
    QCryptoHashAlgo alg;
    const char *key;
    const char *data;
    const char *mac;    /* shorter than the digest: compare this prefix */
} HmacVector;

#define KEY_0102_19 "hex:0102030405060708090a0b0c0d0e0f10111213141516171819"
#define DATA_LARGE_KEY \
    "str:Test Using Larger Than Block-Size Key - Hash Key First"
#define DATA_2202_7 \
    "str:Test Using Larger Than Block-Size Key and Larger Than One " \
    "Block-Size Data"
#define DATA_4231_7 \
    "str:This is a test using a larger than block-size key and a larger " \
    "than block-size data. The key needs to be hashed before being used " \
    "by the HMAC algorithm."
#define JEFE "str:Jefe", "str:what do ya want for nothing?"

static const HmacVector hmac_vectors[] = {
    /* RFC 4231 section 4.2 - 4.8 */
#define RFC4231(alg, m1, m2, m3, m4, m5, m6, m7) \
    { alg, "rep:0b*20", "str:Hi There", m1 }, \
    { alg, JEFE, m2 }, \
    { alg, "rep:aa*20", "rep:dd*50", m3 }, \
    { alg, KEY_0102_19, "rep:cd*50", m4 }, \
    { alg, "rep:0c*20", "str:Test With Truncation", m5 }, \
    { alg, "rep:aa*131", DATA_LARGE_KEY, m6 }, \
    { alg, "rep:aa*131", DATA_4231_7, m7 }
    RFC4231(QCRYPTO_HASH_ALGO_SHA224,
            "896fb1128abbdf196832107cd49df33f47b4b1169912ba4f53684b22",
            "a30e01098bc6dbbf45690f3a7e9e6d0f8bbea2a39e6148008fd05e44",
            "7fb3cb3588c6c1f6ffa9694d7d6ad2649365b0c1f65d69d1ec8333ea",
            "6c11506874013cac6a2abc1bb382627cec6a90d86efc012de7afec5a",
            "0e2aea68a90c8d37c988bcdb9fca6fa8",
            "95e9a0db962095adaebe9b2d6f0dbce2d499f112f2d2b7273fa6870e",
            "3a854166ac5d9f023f54d517d0b39dbd946770db9c2b95c9f6f565d1"),
    RFC4231(QCRYPTO_HASH_ALGO_SHA256,
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7",
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843",
            "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe",
            "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b",
            "a3b6167473100ee06e0c796c2955552b",
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54",
            "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2"),
    RFC4231(QCRYPTO_HASH_ALGO_SHA384,
            "afd03944d84895626b0825f4ab46907f15f9dadbe4101ec682aa034c7cebc59c"
            "faea9ea9076ede7f4af152e8b2fa9cb6",
            "af45d2e376484031617f78d2b58a6b1b9c7ef464f5a01b47e42ec3736322445e"
            "8e2240ca5e69e2c78b3239ecfab21649",
            "88062608d3e6ad8a0aa2ace014c8a86f0aa635d947ac9febe83ef4e55966144b"
            "2a5ab39dc13814b94e3ab6e101a34f27",
            "3e8a69b7783c25851933ab6290af6ca77a9981480850009cc5577c6e1f573b4e"
            "6801dd23c4a7d679ccf8a386c674cffb",
            "3abf34c3503b2a23a46efc619baef897",
            "4ece084485813e9088d2c63a041bc5b44f9ef1012a2b588f3cd11f05033ac4c6"
            "0c2ef6ab4030fe8296248df163f44952",
            "6617178e941f020d351e2f254e8fd32c602420feb0b8fb9adccebb82461e99c5"
            "a678cc31e799176d3860e6110c46523e"),
    RFC4231(QCRYPTO_HASH_ALGO_SHA512,
            "87aa7cdea5ef619d4ff0b4241a1d6cb02379f4e2ce4ec2787ad0b30545e17cde"
            "daa833b7d6b8a702038b274eaea3f4e4be9d914eeb61f1702e696c203a126854",
            "164b7a7bfcf819e2e395fbe73b56e0a387bd64222e831fd610270cd7ea250554"
            "9758bf75c05a994a6d034f65f8f0e6fdcaeab1a34d4a6b4b636e070a38bce737",
            "fa73b0089d56a284efb0f0756c890be9b1b5dbdd8ee81a3655f83e33b2279d39"
            "bf3e848279a722c806b485a47e67c807b946a337bee8942674278859e13292fb",
            "b0ba465637458c6990e5a8c5f61d4af7e576d97ff94b872de76f8050361ee3db"
            "a91ca5c11aa25eb4d679275cc5788063a5f19741120c4f2de2adebeb10a298dd",
            "415fad6271580a531d4179bc891d87a6",
            "80b24263c7c1a3ebb71493c1dd7be8b49b46d1f41b4aeec1121b013783f8f352"
            "6b56d037e05f2598bd0fd2215d6a1e5295e64f73f63f0aec8b915a985d786598",
            "e37b6a775dc87dbaa4dfa9f96e5e3ffddebd71f8867289865df5a32d20cdc944"
            "b6022cac3c4982b10d5eeb55c3e4de15134676fb6de0446065c97440fa8c6a58"),

    /* RFC 2202 section 2 (MD5: keys of 16 bytes) and 3 (SHA-1: 20) */
#define RFC2202(alg, klen, m1, m2, m3, m4, m5, m6, m7) \
    { alg, "rep:0b*" klen, "str:Hi There", m1 }, \
    { alg, JEFE, m2 }, \
    { alg, "rep:aa*" klen, "rep:dd*50", m3 }, \
    { alg, KEY_0102_19, "rep:cd*50", m4 }, \
    { alg, "rep:0c*" klen, "str:Test With Truncation", m5 }, \
    { alg, "rep:aa*80", DATA_LARGE_KEY, m6 }, \
    { alg, "rep:aa*80", DATA_2202_7, m7 }
    RFC2202(QCRYPTO_HASH_ALGO_MD5, "16",
            "9294727a3638bb1c13f48ef8158bfc9d",
            "750c783e6ab0b503eaa86e310a5db738",
            "56be34521d144c88dbb8c733f0e8b3f6",
            "697eaf0aca3a3aea3a75164746ffaa79",
            "56461ef2342edc00f9bab995690efd4c",
            "6b1ab7fe4bd7bf8f0b62e6ce61b9d0cd",
            "6f630fad67cda0ee1fb1f562db3aa53e"),
    RFC2202(QCRYPTO_HASH_ALGO_SHA1, "20",
            "b617318655057264e28bc0b6fb378c8ef146be00",
            "effcdf6ae5eb2fa2d27416d5f184df9c259a7c79",
            "125d7342b9ac11cd91a39af48aa17b4f63f175d3",
            "4c9007f4026250c6bc8414f9bf50c86c2d7235da",
            "4c1a03424b55e07fe7f27be1d58bb9324a9a5a04",
            "aa4ae5e15272d00e95705637ce8a3b55ed402112",
            "e8e99d0f45237d786d6bbaa7965c7808bbff1a91"),
    /* RFC 2286 section 2: the same cases as RFC 2202's SHA-1 ones */
    RFC2202(QCRYPTO_HASH_ALGO_RIPEMD160, "20",
            "24cb4bd67d20fc1a5d2ed7732dcc39377f0a5668",
            "dda6c0213a485a9e24f4742064a7f033b43c4069",
            "b0b105360de759960ab4f35298e116e295d8e7c1",
            "d5ca862f4d21d5e610e18b4cf1beb97a4365ecf4",
            "7619693978f91d90539ae786500ff3d8e0518e39",
            "6466ca07ac5eac29e1bd523e5ada7605b791fd8b",
            "69ea60798d71616cce5fd0871e23754cd75d5a0a"),
};

static void test_hmac_vectors(void)
{
    for (size_t i = 0; i < G_N_ELEMENTS(hmac_vectors); i++) {
        const HmacVector *v = &hmac_vectors[i];
        uint8_t mac[QCRYPTO_HASH_MAX_DIGEST_LEN];
        g_autofree uint8_t *key = NULL, *data = NULL;
        g_autofree char *hex = NULL;
        size_t nkey, ndata, nmac = strlen(v->mac) / 2;
        Error *err = NULL;

        key = spec_bytes(v->key, &nkey);
        data = spec_bytes(v->data, &ndata);
        g_assert_cmpuint(nmac, <=, qcrypto_hash_digest_len(v->alg));
        g_assert_cmpint(qcrypto_hmac_bytes(v->alg, key, nkey, data, ndata,
                                           mac, &err), ==, 0);
        g_assert_null(err);
        hex = hmac_hex(mac, nmac);
        g_assert_cmpstr(hex, ==, v->mac);
    }
}

/*
 * One keyed object, many messages, each fed in two pieces: every MAC must
 * equal the one-shot MAC (finalize resets to the keyed state).
 */
static void test_hmac_reuse(void)
{
    const HmacVector *v = &hmac_vectors[7 + 6];     /* SHA-256, case 7 */
    g_autofree uint8_t *key = NULL, *data = NULL;
    uint8_t want[32], got[32];
    g_autoptr(QCryptoHmac) hmac = NULL;
    size_t nkey, ndata;

    g_assert_cmpint(v->alg, ==, QCRYPTO_HASH_ALGO_SHA256);
    key = spec_bytes(v->key, &nkey);
    data = spec_bytes(v->data, &ndata);
    hmac = qcrypto_hmac_new(v->alg, key, nkey, NULL);
    g_assert_nonnull(hmac);
    for (size_t cut = 0; cut <= ndata; cut += 7) {
        g_autofree char *hex = NULL;

        qcrypto_hmac_update(hmac, data, cut);
        qcrypto_hmac_update(hmac, data + cut, ndata - cut);
        qcrypto_hmac_finalize(hmac, got);
        hex = hmac_hex(got, sizeof(got));
        g_assert_cmpstr(hex, ==, v->mac);
    }
    /* A different message with the same object, then the first again. */
    qcrypto_hmac_update(hmac, "other", 5);
    qcrypto_hmac_finalize(hmac, got);
    g_assert_cmpint(qcrypto_hmac_bytes(v->alg, key, nkey, "other", 5, want,
                                       NULL), ==, 0);
    g_assert_cmpmem(got, sizeof(got), want, sizeof(want));
}

/* RFC 2104 section 2, spelled out with the hash API. */
static void hmac_reference(QCryptoHashAlgo alg, const uint8_t *key,
                           size_t nkey, const uint8_t *msg, size_t nmsg,
                           uint8_t *out)
{
    size_t block = qcrypto_hash_block_len(alg);
    size_t dlen = qcrypto_hash_digest_len(alg);
    uint8_t k[QCRYPTO_HASH_MAX_BLOCK_LEN] = { 0 };
    uint8_t pad[QCRYPTO_HASH_MAX_BLOCK_LEN];
    uint8_t inner[QCRYPTO_HASH_MAX_DIGEST_LEN];
    g_autoptr(QCryptoHash) h = qcrypto_hash_new(alg, NULL);

    if (nkey > block) {
        qcrypto_hash_bytes(alg, key, nkey, k, NULL);
    } else {
        memcpy(k, key, nkey);
    }
    for (size_t i = 0; i < block; i++) {
        pad[i] = k[i] ^ 0x36;
    }
    qcrypto_hash_update(h, pad, block);
    qcrypto_hash_update(h, msg, nmsg);
    qcrypto_hash_finalize(h, inner);
    for (size_t i = 0; i < block; i++) {
        pad[i] = k[i] ^ 0x5c;
    }
    qcrypto_hash_update(h, pad, block);
    qcrypto_hash_update(h, inner, dlen);
    qcrypto_hash_finalize(h, out);
}

static void test_hmac_every_hash(void)
{
    static const size_t key_lens[] = { 0, 1, 20, 63, 64, 65, 127, 128, 129,
                                       200 };
    uint8_t key[200], msg[300];

    for (size_t i = 0; i < sizeof(key); i++) {
        key[i] = i * 7 + 3;
    }
    for (size_t i = 0; i < sizeof(msg); i++) {
        msg[i] = i * 13 + 5;
    }
    for (int alg = 0; alg < QCRYPTO_HASH_ALGO__MAX; alg++) {
        size_t dlen = qcrypto_hash_digest_len(alg);

        for (size_t k = 0; k < G_N_ELEMENTS(key_lens); k++) {
            for (size_t nmsg = 0; nmsg <= sizeof(msg); nmsg += 61) {
                uint8_t want[QCRYPTO_HASH_MAX_DIGEST_LEN];
                uint8_t got[QCRYPTO_HASH_MAX_DIGEST_LEN];

                hmac_reference(alg, key, key_lens[k], msg, nmsg, want);
                g_assert_cmpint(qcrypto_hmac_bytes(alg, key, key_lens[k],
                                                   msg, nmsg, got, NULL),
                                ==, 0);
                g_assert_cmpmem(got, dlen, want, dlen);
            }
        }
    }
}

static void test_hmac_unknown_hash(void)
{
    Error *err = NULL;

    g_assert_null(qcrypto_hmac_new(QCRYPTO_HASH_ALGO__MAX,
                                   (const uint8_t *)"k", 1, &err));
    g_assert_nonnull(err);
    error_free(err);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/crypto/hmac/vectors", test_hmac_vectors);
    g_test_add_func("/crypto/hmac/reuse", test_hmac_reuse);
    g_test_add_func("/crypto/hmac/every-hash", test_hmac_every_hash);
    g_test_add_func("/crypto/hmac/unknown-hash", test_hmac_unknown_hash);
    return g_test_run();
}
