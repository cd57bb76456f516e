/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Sector ciphers (crypto/sector.c): known answers, the backends' bulk path
 * against the per-sector path, and the errors a caller can cause.
 *
 * Known answers: IEEE 1619-2007 Annex B, whose data unit sequence number
 * is dm-crypt's plain64 IV of that sector (ieee1619-xts-vectors.h), and
 * ESSIV, whose IVs for the key 00 01 .. 1f come from OpenSSL (see
 * test-crypto-ivgen.c; the ciphertext is then the mode's, which the
 * cipher tests pin down).
 *
 * Differential: for every backend this CPU runs, a sector cipher must
 * write what a per-sector loop written here writes (IV generator, setiv,
 * encrypt, sector by sector, on nettle), on random data, for the IV
 * generators the bulk path takes (plain, plain64, plain64be) and for
 * those it does not (essiv, benbi, null). Each run also checks which
 * path ran: a backend with a multi-sector XTS path must take it for the
 * counted IVs, so a regression to the slow path is a failure too.
 */
#include <string.h>

#include "crypto/cipher.h"
#include "crypto/ivgen.h"
#include "crypto/sector.h"
#include "crypto-test-hex.h"
#include "ieee1619-xts-vectors.h"
#include "test-error.h"

static void fill_random(uint8_t *buf, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        buf[i] = (uint8_t)g_test_rand_int();
    }
}

static QCryptoSectorCipher *sector_new(const char *backend,
                                       const QCryptoSectorCipherSpec *spec,
                                       const uint8_t *key, size_t nkey,
                                       size_t sector_size, unsigned shift,
                                       uint64_t offset)
{
    QCryptoSectorCipher *sc;

    g_assert_cmpint(qcrypto_cipher_set_backend(backend, &error_abort), ==, 0);
    sc = qcrypto_sector_cipher_new(spec, key, nkey, sector_size,
              shift, offset, &error_abort);
    g_assert_nonnull(sc);
    g_assert_cmpuint(qcrypto_sector_cipher_get_sector_size(sc), ==,
                     sector_size);
    g_assert_cmpint(qcrypto_cipher_set_backend("auto", &error_abort), ==, 0);
    return sc;
}

/* ---- known answers: IEEE 1619-2007 Annex B as plain64 sectors ---- */

/* The vector's data unit sequence number (its IV, little-endian). */
static uint64_t xts_vector_sector(const XTSVector *v)
{
    g_autofree uint8_t *iv = test_unhex(v->iv, NULL);
    uint64_t le;

    for (size_t i = 8; i < 16; i++) {
        g_assert_cmpuint(iv[i], ==, 0);
    }
    memcpy(&le, iv, 8);
    return GUINT64_FROM_LE(le);
}

/*
 * Every whole-block vector (1-14) as one sector of its length, on every
 * backend, encrypting and decrypting; sector numbers up to 2^40 - 1.
 */
static void test_ieee1619_vectors(void)
{
    for (const char *const *b = qcrypto_cipher_backend_list(); *b; b++) {
        for (size_t i = 0; i < G_N_ELEMENTS(xts_vectors); i++) {
            const XTSVector *v = &xts_vectors[i];
            QCryptoSectorCipherSpec spec = {
                .alg = v->alg,
                .mode = QCRYPTO_CIPHER_MODE_XTS,
                .ivgen = QCRYPTO_IVGEN_ALGO_PLAIN64,
            };
            g_autofree uint8_t *key = NULL;
            g_autofree uint8_t *pt = NULL;
            g_autofree uint8_t *ct = NULL;
            g_autoptr(QCryptoSectorCipher) sc = NULL;
            size_t nkey, len, nct;

            pt = xts_vector_plaintext(v, &len);
            if (len % 16) {
                continue;   /* ciphertext stealing: not a sector size */
            }
            key = test_unhex(v->key, &nkey);
            ct = test_unhex(v->ciphertext, &nct);
            g_assert_cmpuint(nct, ==, len);
            sc = sector_new(*b, &spec, key, nkey, len, 0, 0);
            g_assert_cmpint(qcrypto_sector_cipher_encrypt(sc,
                                 xts_vector_sector(v), pt, len, &error_abort), ==, 0);
            g_assert_cmpmem(pt, len, ct, len);
            g_assert_cmpint(qcrypto_sector_cipher_decrypt(sc,
                                 xts_vector_sector(v), ct, len, &error_abort), ==, 0);
            g_free(pt);
            pt = xts_vector_plaintext(v, &len);
            g_assert_cmpmem(ct, len, pt, len);
        }
    }
}

/*
 * Vectors 4, 5 and 6 are sectors 0, 1 and 2 under one key, each
 * plaintext the ciphertext before it: one three-sector call must give
 * all three ciphertexts. And with an IV offset of 1, the same buffer
 * minus its first sector, from sector 0.
 */
static void test_ieee1619_run(void)
{
    const XTSVector *v4 = &xts_vectors[3];
    QCryptoSectorCipherSpec spec = {
        .alg = QCRYPTO_CIPHER_ALGO_AES_128,
        .mode = QCRYPTO_CIPHER_MODE_XTS,
        .ivgen = QCRYPTO_IVGEN_ALGO_PLAIN64,
    };
    g_autofree uint8_t *key = NULL;
    uint8_t buf[3 * 512], want[3 * 512];
    size_t nkey, len;

    g_assert_cmpint(v4->number, ==, 4);
    key = test_unhex(v4->key, &nkey);
    for (size_t s = 0; s < 3; s++) {
        g_autofree uint8_t *pt = xts_vector_plaintext(v4 + s, &len);
        g_autofree uint8_t *ct = test_unhex(v4[s].ciphertext, &len);

        g_assert_cmpuint(xts_vector_sector(v4 + s), ==, s);
        memcpy(buf + 512 * s, pt, 512);
        memcpy(want + 512 * s, ct, 512);
    }
    for (const char *const *b = qcrypto_cipher_backend_list(); *b; b++) {
        g_autoptr(QCryptoSectorCipher) sc =
            sector_new(*b, &spec, key, nkey, 512, 0, 0);
        g_autoptr(QCryptoSectorCipher) off =
            sector_new(*b, &spec, key, nkey, 512, 0, 1);
        uint8_t work[3 * 512];

        memcpy(work, buf, sizeof(work));
        g_assert_cmpint(qcrypto_sector_cipher_encrypt(sc, 0, work,
                             sizeof(work), &error_abort), ==, 0);
        g_assert_cmpmem(work, sizeof(work), want, sizeof(want));

        memcpy(work, buf + 512, 1024);
        g_assert_cmpint(qcrypto_sector_cipher_encrypt(off, 0, work,
                             1024, &error_abort), ==, 0);
        g_assert_cmpmem(work, 1024, want + 512, 1024);
        g_assert_cmpint(qcrypto_sector_cipher_decrypt(off, 0, work,
                             1024, &error_abort), ==, 0);
        g_assert_cmpmem(work, 1024, buf + 512, 1024);
    }
}

/* ---- known answers: ESSIV ---- */

/* OpenSSL's ESSIV IVs for sha256 of the key 00 01 .. 1f (see top). */
static const struct {
    unsigned shift;
    uint64_t sector;
    const char *iv;
} essiv_sha256_key32[] = {
    { 0, 0, "a73d5fb0e4041090ca6dc1b820cdaf51" },
    { 0, 1, "59a0803f448bdf6d3d3de63feaccd58a" },
    { 0, 0x12345, "625f900e6ae97a00f581baee7d3c2382" },
    { 0, 0x100000001ULL, "d4c6a780bfe2b87d88b87658fe0be242" },
    { 3, 1, "34d7e09b76f1336e9ff7d7c4e0332ba5" },
    { 3, 0x100000001ULL, "0183f0f7a83bfe807e980eea64aa6117" },
};

/*
 * With that 32-byte key, both aes-256-cbc and aes-128-xts (two 16-byte
 * keys) get a sha256 salt and so an AES-256 ESSIV cipher: the same IVs.
 * The sector cipher must encrypt each sector as the mode does under the
 * known IV.
 */
static void test_essiv_known(gconstpointer data)
{
    QCryptoCipherMode mode = GPOINTER_TO_INT(data);
    QCryptoSectorCipherSpec spec = {
        .alg = mode == QCRYPTO_CIPHER_MODE_XTS ?
            QCRYPTO_CIPHER_ALGO_AES_128 : QCRYPTO_CIPHER_ALGO_AES_256,
        .mode = mode,
        .ivgen = QCRYPTO_IVGEN_ALGO_ESSIV,
        .ivgen_hash = QCRYPTO_HASH_ALGO_SHA256,
    };
    uint8_t key[32], pt[512], want[512], buf[512];

    for (size_t i = 0; i < sizeof(key); i++) {
        key[i] = i;
    }
    fill_random(pt, sizeof(pt));
    for (size_t i = 0; i < G_N_ELEMENTS(essiv_sha256_key32); i++) {
        g_autofree uint8_t *iv = test_unhex(essiv_sha256_key32[i].iv, NULL);
        g_autoptr(QCryptoCipher) ref = NULL;
        g_autoptr(QCryptoSectorCipher) sc = NULL;

        ref = qcrypto_cipher_new(spec.alg, mode, key, sizeof(key), &error_abort);
        g_assert_cmpint(qcrypto_cipher_setiv(ref, iv, 16, &error_abort), ==, 0);
        g_assert_cmpint(qcrypto_cipher_encrypt(ref, pt, want,
                             sizeof(pt), &error_abort), ==, 0);

        sc = sector_new("auto", &spec, key, sizeof(key), sizeof(buf),
                        essiv_sha256_key32[i].shift, 0);
        g_assert_false(qcrypto_sector_cipher_is_bulk(sc));
        memcpy(buf, pt, sizeof(buf));
        g_assert_cmpint(qcrypto_sector_cipher_encrypt(sc,
                             essiv_sha256_key32[i].sector, buf,
                             sizeof(buf), &error_abort), ==, 0);
        g_assert_cmpmem(buf, sizeof(buf), want, sizeof(want));
        g_assert_cmpint(qcrypto_sector_cipher_decrypt(sc,
                             essiv_sha256_key32[i].sector, buf,
                             sizeof(buf), &error_abort), ==, 0);
        g_assert_cmpmem(buf, sizeof(buf), pt, sizeof(pt));
    }
}

/* ---- differential: every backend against a per-sector loop ---- */

typedef struct {
    const char *name;
    QCryptoCipherAlgo alg;
    QCryptoCipherMode mode;
    QCryptoIVGenAlgo ivgen;
    size_t sector_size;
    unsigned shift;
    uint64_t offset;
    uint64_t first;             /* first sector of the run */
    size_t count;               /* sectors in the run */
} DiffCase;

#define AES128 QCRYPTO_CIPHER_ALGO_AES_128
#define AES256 QCRYPTO_CIPHER_ALGO_AES_256
#define XTS QCRYPTO_CIPHER_MODE_XTS
#define CBC QCRYPTO_CIPHER_MODE_CBC
#define PLAIN QCRYPTO_IVGEN_ALGO_PLAIN
#define PLAIN64 QCRYPTO_IVGEN_ALGO_PLAIN64
#define PLAIN64BE QCRYPTO_IVGEN_ALGO_PLAIN64BE
#define ESSIV QCRYPTO_IVGEN_ALGO_ESSIV

static const DiffCase diff_cases[] = {
    { "xts-plain64-512", AES256, XTS, PLAIN64, 512, 0, 0, 12345, 100 },
    { "xts-plain64-4096", AES256, XTS, PLAIN64, 4096, 0, 0, 777, 20 },
    { "xts-plain64-4096-shift", AES128, XTS, PLAIN64, 4096, 3, 0, 99, 20 },
    /* LUKS2: 4096-byte sectors in 512-byte units from an iv_tweak. */
    { "xts-plain64-4096-shift-offset", AES256, XTS, PLAIN64, 4096, 3,
      (1ULL << 40) + 5, 3, 17 },
    { "xts-plain64-512-offset", AES128, XTS, PLAIN64, 512, 0, 1000, 0, 40 },
    /* qcow2-style host-offset sectors, past 2^32 and up to the 2^64 wrap. */
    { "xts-plain64-512-high", AES256, XTS, PLAIN64, 512, 0, 0,
      (1ULL << 35) + 3, 64 },
    { "xts-plain64-512-wrap64", AES256, XTS, PLAIN64, 512, 0, 0,
      UINT64_MAX - 20, 41 },
    { "xts-plain-512", AES256, XTS, PLAIN, 512, 0, 0, 5, 50 },
    { "xts-plain-512-wrap32", AES256, XTS, PLAIN, 512, 0, 0,
      UINT32_MAX - 30, 64 },
    { "xts-plain-4096-shift-wrap32", AES128, XTS, PLAIN, 4096, 3, 0,
      (UINT32_MAX >> 3) - 9, 20 },
    { "xts-plain-512-offset-wrap32", AES128, XTS, PLAIN, 512, 0,
      UINT32_MAX, 0, 40 },
    { "xts-plain64be-512", AES256, XTS, PLAIN64BE, 512, 0, 0,
      0x123456789ULL, 70 },
    { "xts-plain64be-4096-shift", AES128, XTS, PLAIN64BE, 4096, 3, 7, 0, 20 },
    { "xts-essiv-512", AES256, XTS, ESSIV, 512, 0, 0, 4000, 40 },
    { "xts-essiv-4096-shift-offset", AES128, XTS, ESSIV, 4096, 3, 9, 1, 12 },
    { "cbc-essiv-512", AES256, CBC, ESSIV, 512, 0, 0, 1, 40 },
    { "cbc-essiv-4096", AES128, CBC, ESSIV, 4096, 0, 0, 1ULL << 33, 12 },
    { "cbc-plain64-512", AES256, CBC, PLAIN64, 512, 0, 0, 3, 40 },
    { "cbc-plain-4096-wrap32", AES256, CBC, PLAIN, 4096, 0, 0,
      UINT32_MAX - 4, 10 },
    { "lrw-benbi-512", AES128, QCRYPTO_CIPHER_MODE_LRW,
      QCRYPTO_IVGEN_ALGO_BENBI, 512, 0, 0, 10, 20 },
    { "cbc-null-512", AES128, CBC, QCRYPTO_IVGEN_ALGO_NULL, 512, 0, 0, 10,
      10 },
    { "ecb-512", AES256, QCRYPTO_CIPHER_MODE_ECB, PLAIN64, 512, 0, 0, 7, 10 },
};

/* What a block layer without sector ciphers would write, on nettle. */
static void diff_reference(const DiffCase *dc,
                           const QCryptoSectorCipherSpec *spec,
                           const uint8_t *key, size_t nkey,
                           const uint8_t *pt, uint8_t *out)
{
    g_autoptr(QCryptoCipher) cipher = NULL;
    g_autoptr(QCryptoIVGen) ivgen = NULL;
    uint8_t iv[16];

    g_assert_cmpint(qcrypto_cipher_set_backend("nettle", &error_abort), ==, 0);
    cipher = qcrypto_cipher_new(spec->alg, spec->mode, key, nkey, &error_abort);
    g_assert_cmpint(qcrypto_cipher_set_backend("auto", &error_abort), ==, 0);
    if (spec->mode != QCRYPTO_CIPHER_MODE_ECB) {
        ivgen = qcrypto_ivgen_new(spec->ivgen, spec->alg,
                     spec->ivgen_hash, key, nkey, &error_abort);
    }
    for (size_t s = 0; s < dc->count; s++) {
        /* All the sums modulo 2^64, as dm-crypt does them. */
        uint64_t ivnum = (dc->first + dc->offset + s) << dc->shift;
        size_t at = s * dc->sector_size;

        if (ivgen) {
            g_assert_cmpint(qcrypto_ivgen_calculate(ivgen, ivnum, iv,
                                 16, &error_abort), ==, 0);
            g_assert_cmpint(qcrypto_cipher_setiv(cipher, iv, 16, &error_abort),
                            ==, 0);
        }
        g_assert_cmpint(qcrypto_cipher_encrypt(cipher, pt + at,
                             out + at, dc->sector_size, &error_abort), ==, 0);
    }
}

/* Whether backend has a multi-sector path for this case. */
static bool diff_expect_bulk(const char *backend, const DiffCase *dc)
{
    bool counted = dc->ivgen == PLAIN || dc->ivgen == PLAIN64 ||
        dc->ivgen == PLAIN64BE;

    /* Today only the built-in AES has one, and for XTS only. */
    return counted && dc->mode == XTS && !g_str_equal(backend, "nettle");
}

static void test_differential(gconstpointer data)
{
    const DiffCase *dc = data;
    QCryptoSectorCipherSpec spec = {
        .alg = dc->alg,
        .mode = dc->mode,
        .ivgen = dc->ivgen,
        .ivgen_hash = QCRYPTO_HASH_ALGO_SHA256,
    };
    size_t nkey = qcrypto_cipher_get_mode_key_len(dc->alg, dc->mode);
    size_t len = dc->sector_size * dc->count;
    g_autofree uint8_t *key = g_malloc(nkey);
    g_autofree uint8_t *pt = g_malloc(len);
    g_autofree uint8_t *want = g_malloc(len);
    g_autofree uint8_t *buf = g_malloc(len);
    bool any_bulk = false;

    fill_random(key, nkey);
    fill_random(pt, len);
    diff_reference(dc, &spec, key, nkey, pt, want);

    for (const char *const *b = qcrypto_cipher_backend_list(); *b; b++) {
        g_autoptr(QCryptoSectorCipher) sc = NULL;
        bool bulk = diff_expect_bulk(*b, dc);
        size_t split;

        qcrypto_cipher_set_backend(*b, NULL);
        if (!qcrypto_cipher_supports(dc->alg, dc->mode)) {
            qcrypto_cipher_set_backend("auto", NULL);
            continue;   /* e.g. LRW on the built-in AES */
        }
        sc = sector_new(*b, &spec, key, nkey, dc->sector_size, dc->shift,
                        dc->offset);
        g_assert_cmpstr(qcrypto_sector_cipher_get_impl_name(sc), ==, *b);
        g_assert_cmpint(qcrypto_sector_cipher_is_bulk(sc), ==, bulk);
        any_bulk |= bulk;

        /* Whole run, then the same run in two calls cut at a sector. */
        memcpy(buf, pt, len);
        g_assert_cmpint(qcrypto_sector_cipher_encrypt(sc, dc->first,
                             buf, len, &error_abort), ==, 0);
        g_assert_cmpmem(buf, len, want, len);

        split = g_test_rand_int_range(0, dc->count + 1) * dc->sector_size;
        memcpy(buf, pt, len);
        g_assert_cmpint(qcrypto_sector_cipher_encrypt(sc, dc->first,
                             buf, split, &error_abort), ==, 0);
        g_assert_cmpint(qcrypto_sector_cipher_encrypt(sc,
                             dc->first + split / dc->sector_size,
                             buf + split, len - split, &error_abort), ==, 0);
        g_assert_cmpmem(buf, len, want, len);

        g_assert_cmpint(qcrypto_sector_cipher_decrypt(sc, dc->first,
                             buf, len, &error_abort), ==, 0);
        g_assert_cmpmem(buf, len, pt, len);
    }
    if (diff_expect_bulk("auto", dc) && !any_bulk) {
        g_test_message("no backend with a multi-sector path on this CPU");
    }
}

/* ---- errors ---- */

static void expect_new_fails(const QCryptoSectorCipherSpec *spec,
                             size_t nkey, size_t sector_size,
                             unsigned shift, const char *fragment)
{
    g_autofree uint8_t *key = g_malloc0(MAX(nkey, 1));
    g_autoptr(Error) err = NULL;
    QCryptoSectorCipher *sc = qcrypto_sector_cipher_new(spec, key, nkey,
                                                        sector_size, shift,
                                                        0, &err);

    g_assert_null(sc);
    test_error_expect(&err, fragment);
}

static void test_new_errors(void)
{
    QCryptoSectorCipherSpec xts = { AES256, XTS, PLAIN64, 0 };
    QCryptoSectorCipherSpec des3_xts = {
        QCRYPTO_CIPHER_ALGO_DES_EDE3, XTS, PLAIN64, 0
    };
    QCryptoSectorCipherSpec des3_cbc = {
        QCRYPTO_CIPHER_ALGO_DES_EDE3, CBC, PLAIN64, 0
    };
    QCryptoSectorCipherSpec cast5_essiv = {
        QCRYPTO_CIPHER_ALGO_CAST5_128, CBC, ESSIV, QCRYPTO_HASH_ALGO_SHA256
    };
    QCryptoSectorCipherSpec bad_ivgen = {
        AES256, CBC, QCRYPTO_IVGEN_ALGO__MAX, 0
    };
    QCryptoSectorCipherSpec bad_alg = { QCRYPTO_CIPHER_ALGO__MAX, CBC,
                                        PLAIN64, 0 };

    expect_new_fails(&xts, 32, 512, 0, "key length");
    expect_new_fails(&xts, 64, 0, 0, "Sector size 0");
    expect_new_fails(&xts, 64, 500, 0, "Sector size 500");
    expect_new_fails(&des3_cbc, 24, 12, 0, "8-byte block");
    expect_new_fails(&xts, 64, 4096, 64, "IV shift 64");
    expect_new_fails(&des3_xts, 48, 512, 0, "xts");
    expect_new_fails(&cast5_essiv, 16, 512, 0, "32-byte cast5-128");
    expect_new_fails(&bad_ivgen, 32, 512, 0, "IV generator");
    expect_new_fails(&bad_alg, 32, 512, 0, "Unknown cipher");
}

static void test_crypt_errors(void)
{
    QCryptoSectorCipherSpec spec = { AES256, XTS, PLAIN64, 0 };
    uint8_t key[64] = { 1 }, buf[1024], orig[1024];
    g_autoptr(QCryptoSectorCipher) sc =
        qcrypto_sector_cipher_new(&spec, key, 64, 512, 0, 0, &error_abort);
    Error *err = NULL;

    fill_random(buf, sizeof(buf));
    memcpy(orig, buf, sizeof(buf));
    /* A partial sector is refused and nothing is touched. */
    g_assert_cmpint(qcrypto_sector_cipher_encrypt(sc, 0, buf, 1000, &err),
                    ==, -1);
    g_assert_nonnull(strstr(error_get_pretty(err), "512-byte sectors"));
    error_free_or_abort(&err);
    g_assert_cmpint(qcrypto_sector_cipher_decrypt(sc, 0, buf, 16, &err),
                    ==, -1);
    error_free_or_abort(&err);
    g_assert_cmpmem(buf, sizeof(buf), orig, sizeof(orig));
    /* Nothing to do is not an error. */
    g_assert_cmpint(qcrypto_sector_cipher_encrypt(sc, 0, buf, 0, &error_abort),
                    ==, 0);
    g_assert_cmpmem(buf, sizeof(buf), orig, sizeof(orig));
}

/*
 * ECB has no IV: the IV generator a spec names is not built, even one
 * that could not be ("ecb-essiv:sha256" with cast5), and sectors are
 * plain ECB blocks.
 */
static void test_ecb_ignores_ivgen(void)
{
    QCryptoSectorCipherSpec spec = {
        QCRYPTO_CIPHER_ALGO_CAST5_128, QCRYPTO_CIPHER_MODE_ECB, ESSIV,
        QCRYPTO_HASH_ALGO_SHA256
    };
    uint8_t key[16] = { 7 }, buf[64], want[64];
    g_autoptr(QCryptoSectorCipher) sc =
        qcrypto_sector_cipher_new(&spec, key, 16, 32, 0, 0, &error_abort);
    g_autoptr(QCryptoCipher) ecb =
        qcrypto_cipher_new(spec.alg, spec.mode, key, 16, &error_abort);

    fill_random(buf, sizeof(buf));
    g_assert_cmpint(qcrypto_cipher_encrypt(ecb, buf, want,
                         sizeof(buf), &error_abort), ==, 0);
    g_assert_cmpint(qcrypto_sector_cipher_encrypt(sc, 12345, buf,
                         sizeof(buf), &error_abort), ==, 0);
    g_assert_cmpmem(buf, sizeof(buf), want, sizeof(want));
    g_assert_false(qcrypto_sector_cipher_is_bulk(sc));
}

/*
 * A QCRYPTO_CIPHER_BACKEND naming no backend is an error on the first
 * sector cipher, not the end of the process. Run in a child: the
 * variable is read once per process, before the first cipher.
 */
static void test_bad_backend_env(void)
{
    if (g_test_subprocess()) {
        QCryptoSectorCipherSpec spec = { AES256, XTS, PLAIN64, 0 };
        uint8_t key[64] = { 0 };
        g_autoptr(Error) err = NULL;
        g_autoptr(QCryptoSectorCipher) sc = NULL;

        g_setenv("QCRYPTO_CIPHER_BACKEND", "no-such-backend", TRUE);
        sc = qcrypto_sector_cipher_new(&spec, key, 64, 512, 0, 0, &err);
        g_assert_null(sc);
        g_assert_cmpstr(error_get_pretty(err), ==, "QCRYPTO_CIPHER_BACKEND: "
                        "Unknown cipher backend 'no-such-backend'");
        error_free_or_abort(&err);
        /* Still refused: the user's choice is not silently dropped. */
        sc = qcrypto_sector_cipher_new(&spec, key, 64, 512, 0, 0, &err);
        g_assert_null(sc);
        error_free_or_abort(&err);
        /* A choice made in the program replaces it. */
        g_assert_cmpint(qcrypto_cipher_set_backend("auto", &error_abort), ==, 0);
        sc = qcrypto_sector_cipher_new(&spec, key, 64, 512, 0, 0, &error_abort);
        g_assert_nonnull(sc);
        return;
    }
    g_test_trap_subprocess(NULL, 0, G_TEST_SUBPROCESS_DEFAULT);
    g_test_trap_assert_passed();
}

int main(int argc, char **argv)
{
    static const QCryptoCipherMode essiv_modes[] = { CBC, XTS };

    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/crypto/sector/ieee1619/vectors", test_ieee1619_vectors);
    g_test_add_func("/crypto/sector/ieee1619/run", test_ieee1619_run);
    for (size_t i = 0; i < G_N_ELEMENTS(essiv_modes); i++) {
        g_autofree char *path = g_strdup_printf(
            "/crypto/sector/essiv-known/%s",
            qcrypto_cipher_mode_name(essiv_modes[i]));
        g_test_add_data_func(path, GINT_TO_POINTER(essiv_modes[i]),
                             test_essiv_known);
    }
    for (size_t i = 0; i < G_N_ELEMENTS(diff_cases); i++) {
        g_autofree char *path = g_strdup_printf(
            "/crypto/sector/differential/%s", diff_cases[i].name);
        g_test_add_data_func(path, &diff_cases[i], test_differential);
    }
    g_test_add_func("/crypto/sector/errors/new", test_new_errors);
    g_test_add_func("/crypto/sector/errors/crypt", test_crypt_errors);
    g_test_add_func("/crypto/sector/ecb-ignores-ivgen",
                    test_ecb_ignores_ivgen);
    g_test_add_func("/crypto/sector/bad-backend-env", test_bad_backend_env);
    return g_test_run();
}
