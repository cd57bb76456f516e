/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * PBKDF2 against the RFCs' test vectors:
 *   RFC 6070 section 2 (PBKDF2-HMAC-SHA1; the 16777216-iteration case runs
 *   only with -m slow),
 *   RFC 7914 section 11 (PBKDF2-HMAC-SHA256).
 * Then, for every hash, multi-block output against RFC 8018 section 5.2
 * spelled out with the HMAC API; error cases; and that the calibration
 * returns a plausible rate (timings themselves are for benchmarks).
 */
#include <string.h>

#include "crypto/hmac.h"
#include "crypto/pbkdf.h"

typedef struct {
    QCryptoHashAlgo alg;
    const char *pass;
    size_t npass;
    const char *salt;
    size_t nsalt;
    uint64_t iterations;
    const char *dk;     /* hex; its length is dkLen */
    bool slow;
} PbkdfVector;

#define S(s) s, sizeof(s) - 1   /* a literal and its length (may hold NUL) */

static const PbkdfVector pbkdf_vectors[] = {
    /* RFC 6070 section 2 */
    { QCRYPTO_HASH_ALGO_SHA1, S("password"), S("salt"), 1,
      "0c60c80f961f0e71f3a9b524af6012062fe037a6" },
    { QCRYPTO_HASH_ALGO_SHA1, S("password"), S("salt"), 2,
      "ea6c014dc72d6f8ccd1ed92ace1d41f0d8de8957" },
    { QCRYPTO_HASH_ALGO_SHA1, S("password"), S("salt"), 4096,
      "4b007901b765489abead49d926f721d065a429c1" },
    { QCRYPTO_HASH_ALGO_SHA1, S("password"), S("salt"), 16777216,
      "eefe3d61cd4da4e4e9945b3d6ba2158c2634e984", true },
    { QCRYPTO_HASH_ALGO_SHA1, S("passwordPASSWORDpassword"),
      S("saltSALTsaltSALTsaltSALTsaltSALTsalt"), 4096,
      "3d2eec4fe41c849b80c8d83662c0e44a8b291a964cf2f07038" },
    { QCRYPTO_HASH_ALGO_SHA1, S("pass\0word"), S("sa\0lt"), 4096,
      "56fa6aa75548099dcc37d7f03425e0c3" },

    /* RFC 7914 section 11 */
    { QCRYPTO_HASH_ALGO_SHA256, S("passwd"), S("salt"), 1,
      "55ac046e56e3089fec1691c22544b605f94185216dde0465e68b9d57c20dacbc"
      "49ca9cccf179b645991664b39d77ef317c71b845b1e30bd509112041d3a19783" },
    { QCRYPTO_HASH_ALGO_SHA256, S("Password"), S("NaCl"), 80000,
      "4ddcd8f60b98be21830cee5ef22701f9641a4418d04c0414aeff08876b34ab56"
      "a1d425a1225833549adb841b51c9b3176a272bdebba1d078478f62b397f33c8d" },
};

static char *pbkdf_hex(const uint8_t *buf, size_t len)
{
    GString *s = g_string_new(NULL);

    for (size_t i = 0; i < len; i++) {
        g_string_append_printf(s, "%02x", buf[i]);
    }
    return g_string_free(s, FALSE);
}

static void test_pbkdf2_vector(gconstpointer opaque)
{
    const PbkdfVector *v = opaque;
    size_t ndk = strlen(v->dk) / 2;
    g_autofree uint8_t *dk = g_malloc(ndk);
    g_autofree char *hex = NULL;
    Error *err = NULL;

    if (v->slow && !g_test_slow()) {
        g_test_skip("16777216 iterations: run with -m slow");
        return;
    }
    g_assert_cmpint(qcrypto_pbkdf2(v->alg, (const uint8_t *)v->pass,
                                   v->npass, (const uint8_t *)v->salt,
                                   v->nsalt, v->iterations, dk, ndk, &err),
                    ==, 0);
    g_assert_null(err);
    hex = pbkdf_hex(dk, ndk);
    g_assert_cmpstr(hex, ==, v->dk);
}

/* RFC 8018 section 5.2, written out with one-shot HMACs. */
static void pbkdf2_reference(QCryptoHashAlgo alg, const uint8_t *pass,
                             size_t npass, const uint8_t *salt, size_t nsalt,
                             uint64_t c, uint8_t *out, size_t nout)
{
    size_t hlen = qcrypto_hash_digest_len(alg);
    g_autofree uint8_t *s_i = g_malloc(nsalt + 4);

    memcpy(s_i, salt, nsalt);
    for (uint32_t i = 1; nout > 0; i++) {
        uint8_t u[QCRYPTO_HASH_MAX_DIGEST_LEN], t[QCRYPTO_HASH_MAX_DIGEST_LEN];
        size_t n = MIN(nout, hlen);

        s_i[nsalt] = i >> 24;
        s_i[nsalt + 1] = i >> 16;
        s_i[nsalt + 2] = i >> 8;
        s_i[nsalt + 3] = i;
        qcrypto_hmac_bytes(alg, pass, npass, s_i, nsalt + 4, u, NULL);
        memcpy(t, u, hlen);
        for (uint64_t j = 1; j < c; j++) {
            qcrypto_hmac_bytes(alg, pass, npass, u, hlen, u, NULL);
            for (size_t k = 0; k < hlen; k++) {
                t[k] ^= u[k];
            }
        }
        memcpy(out, t, n);
        out += n;
        nout -= n;
    }
}

/* qcrypto_pbkdf2 against the reference, for nout bytes of output. */
static void check_pbkdf2(QCryptoHashAlgo alg, const uint8_t *pass,
                         size_t npass, const uint8_t *salt, size_t nsalt,
                         uint64_t c, size_t nout)
{
    g_autofree uint8_t *want = g_malloc(nout);
    g_autofree uint8_t *got = g_malloc(nout);

    pbkdf2_reference(alg, pass, npass, salt, nsalt, c, want, nout);
    g_assert_cmpint(qcrypto_pbkdf2(alg, pass, npass, salt, nsalt, c, got,
                                   nout, NULL), ==, 0);
    g_assert_cmpmem(got, nout, want, nout);
}

/* Every hash; outputs of one, several and partial blocks. */
static void test_pbkdf2_every_hash(void)
{
    static const uint8_t pass[] = "correct horse battery staple";
    static const uint8_t salt[] = { 0xde, 0xad, 0xbe, 0xef, 0, 1, 2, 3 };
    static const size_t nouts[] = { 1, 16, 20, 32, 64, 65, 100 };

    for (int alg = 0; alg < QCRYPTO_HASH_ALGO__MAX; alg++) {
        g_assert_true(qcrypto_pbkdf2_supports(alg));
        for (size_t i = 0; i < G_N_ELEMENTS(nouts); i++) {
            check_pbkdf2(alg, pass, sizeof(pass), salt, sizeof(salt), 7,
                         nouts[i]);
        }
    }
}

/*
 * Long enough for the blocks to run on threads of their own (crypto/pbkdf.c
 * starts them from 1024 iterations), with more blocks than threads (8): a
 * worker that took a wrong block, wrote at a wrong offset or shared another's
 * HMAC state shows up as a difference from the sequential reference.
 */
static void test_pbkdf2_threaded(void)
{
    static const uint8_t pass[] = "threads";
    static const uint8_t salt[] = "every block its own chain";

    for (int alg = 0; alg < QCRYPTO_HASH_ALGO__MAX; alg++) {
        size_t hlen = qcrypto_hash_digest_len(alg);
        size_t nouts[] = { 2 * hlen, 3 * hlen - 1, 9 * hlen + 3 };

        for (size_t i = 0; i < G_N_ELEMENTS(nouts); i++) {
            check_pbkdf2(alg, pass, sizeof(pass), salt, sizeof(salt), 1024,
                         nouts[i]);
        }
    }
}

static void test_pbkdf2_errors(void)
{
    uint8_t out[32];
    Error *err = NULL;

    g_assert_cmpint(qcrypto_pbkdf2(QCRYPTO_HASH_ALGO_SHA256,
                                   (const uint8_t *)"p", 1,
                                   (const uint8_t *)"s", 1, 0,
                                   out, sizeof(out), &err), ==, -1);
    g_assert_nonnull(err);
    error_free_or_abort(&err);

    g_assert_false(qcrypto_pbkdf2_supports(QCRYPTO_HASH_ALGO__MAX));
    g_assert_cmpint(qcrypto_pbkdf2(QCRYPTO_HASH_ALGO__MAX,
                                   (const uint8_t *)"p", 1,
                                   (const uint8_t *)"s", 1, 1,
                                   out, sizeof(out), &err), ==, -1);
    g_assert_nonnull(err);
    error_free_or_abort(&err);

    g_assert_cmpuint(qcrypto_pbkdf2_count_iters(QCRYPTO_HASH_ALGO_SHA256,
                                                (const uint8_t *)"p", 1,
                                                (const uint8_t *)"s", 1,
                                                0, &err), ==, 0);
    g_assert_nonnull(err);
    error_free_or_abort(&err);

    g_assert_cmpuint(qcrypto_pbkdf2_count_iters(QCRYPTO_HASH_ALGO__MAX,
                                                (const uint8_t *)"p", 1,
                                                (const uint8_t *)"s", 1,
                                                32, &err), ==, 0);
    g_assert_nonnull(err);
    error_free_or_abort(&err);
}

/*
 * The calibration gives a rate, not a timing we could assert: check only
 * that it succeeded and lies between 1000/s (a CPU from the last century)
 * and 10^9/s (more than ten times any real HMAC pair).
 */
static void test_pbkdf2_count_iters(void)
{
    static const uint8_t salt[32] = { 1, 2, 3 };
    static const QCryptoHashAlgo algs[] = {
        QCRYPTO_HASH_ALGO_SHA256, QCRYPTO_HASH_ALGO_SHA1,
    };

    for (size_t i = 0; i < G_N_ELEMENTS(algs); i++) {
        Error *err = NULL;
        uint64_t rate;

        rate = qcrypto_pbkdf2_count_iters(algs[i],
                                          (const uint8_t *)"passphrase", 10,
                                          salt, sizeof(salt), 32, &err);
        g_assert_null(err);
        g_test_message("%s: %" G_GUINT64_FORMAT " iterations/s",
                       qcrypto_hash_algo_name(algs[i]), rate);
        g_assert_cmpuint(rate, >=, 1000);
        g_assert_cmpuint(rate, <=, 1000000000);
    }
}

#define RATE_THREADS 4

static gpointer rate_thread(gpointer opaque)
{
    QCryptoHashAlgo hash = GPOINTER_TO_INT(opaque);

    return GSIZE_TO_POINTER(qcrypto_pbkdf2_rate(hash, 64, &error_abort));
}

/*
 * The cached rate: threads asking at once for a hash nothing measured yet
 * all get the same figure (two measurements practically never agree to
 * the iteration, so a second measurement would show), later calls get it
 * again, and longer outputs cost proportionally more.
 */
static void test_pbkdf2_rate_cached(void)
{
    QCryptoHashAlgo hash = QCRYPTO_HASH_ALGO_SHA512;
    GThread *threads[RATE_THREADS];
    uint64_t rates[RATE_THREADS];
    uint64_t per_block;

    for (int i = 0; i < RATE_THREADS; i++) {
        threads[i] = g_thread_new("rate", rate_thread, GINT_TO_POINTER(hash));
    }
    for (int i = 0; i < RATE_THREADS; i++) {
        rates[i] = GPOINTER_TO_SIZE(g_thread_join(threads[i]));
    }
    for (int i = 0; i < RATE_THREADS; i++) {
        g_assert_cmpuint(rates[i], ==, rates[0]);
    }
    g_assert_cmpuint(rates[0], >=, 1000);
    g_assert_cmpuint(qcrypto_pbkdf2_rate(hash, 64, &error_abort), ==,
                     rates[0]);
    /* SHA-512 gives 64 bytes a block: 65 to 128 bytes take two blocks. */
    per_block = qcrypto_pbkdf2_rate(hash, 1, &error_abort);
    g_assert_cmpuint(per_block, ==, rates[0]);
    g_assert_cmpuint(qcrypto_pbkdf2_rate(hash, 65, &error_abort), ==,
                     per_block / 2);
    g_assert_cmpuint(qcrypto_pbkdf2_rate(hash, 256, &error_abort), ==,
                     per_block / 4);
}

/* The rate scaled to a time: per second as the rate, per 0 ms none. */
static void test_pbkdf2_iters_for_time(void)
{
    QCryptoHashAlgo hash = QCRYPTO_HASH_ALGO_SHA1;
    uint64_t rate = qcrypto_pbkdf2_rate(hash, 32, &error_abort);
    uint64_t iters = 1;
    Error *err = NULL;

    g_assert_cmpint(qcrypto_pbkdf2_iters_for_time(hash, 32, 2000, &iters,
                                                  &error_abort), ==, 0);
    g_assert_cmpuint(iters, ==, rate * 2);
    g_assert_cmpint(qcrypto_pbkdf2_iters_for_time(hash, 32, 1, &iters,
                                                  &error_abort), ==, 0);
    g_assert_cmpuint(iters, ==, rate / 1000);
    g_assert_cmpint(qcrypto_pbkdf2_iters_for_time(hash, 32, 0, &iters,
                                                  &error_abort), ==, 0);
    g_assert_cmpuint(iters, ==, 0);
    g_assert_cmpint(qcrypto_pbkdf2_iters_for_time(hash, 32, UINT64_MAX,
                                                  &iters, &err), ==, -1);
    error_free_or_abort(&err);
}

/* A failure is reported every time, never cached as a rate. */
static void test_pbkdf2_rate_error(void)
{
    Error *err = NULL;

    for (int i = 0; i < 2; i++) {
        g_assert_cmpuint(qcrypto_pbkdf2_rate(QCRYPTO_HASH_ALGO__MAX, 32,
                                             &err), ==, 0);
        error_free_or_abort(&err);
    }
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    for (size_t i = 0; i < G_N_ELEMENTS(pbkdf_vectors); i++) {
        const PbkdfVector *v = &pbkdf_vectors[i];
        g_autofree char *path = g_strdup_printf(
            "/crypto/pbkdf2/%s/%s-%" G_GUINT64_FORMAT "-%zu",
            v->alg == QCRYPTO_HASH_ALGO_SHA1 ? "rfc6070" : "rfc7914",
            qcrypto_hash_algo_name(v->alg), v->iterations, i);
        g_test_add_data_func(path, v, test_pbkdf2_vector);
    }
    g_test_add_func("/crypto/pbkdf2/every-hash", test_pbkdf2_every_hash);
    g_test_add_func("/crypto/pbkdf2/threaded", test_pbkdf2_threaded);
    g_test_add_func("/crypto/pbkdf2/errors", test_pbkdf2_errors);
    g_test_add_func("/crypto/pbkdf2/count-iters", test_pbkdf2_count_iters);
    g_test_add_func("/crypto/pbkdf2/rate-cached", test_pbkdf2_rate_cached);
    g_test_add_func("/crypto/pbkdf2/rate-error", test_pbkdf2_rate_error);
    g_test_add_func("/crypto/pbkdf2/iters-for-time",
                    test_pbkdf2_iters_for_time);
    return g_test_run();
}
