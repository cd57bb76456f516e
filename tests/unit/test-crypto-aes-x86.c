/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The built-in AES paths (crypto/aes-x86/): every path this CPU can run
 * ("vaes-512", "vaes-256", "aesni") must agree with nettle on random
 * input of every shape, and the multi-sector XTS entry point (which a
 * sector cipher, crypto/sector.h, uses for counted IVs) with a per-sector
 * loop on nettle, one sector per call included (its own path). (The
 * standards' vectors run on every backend, these
 * paths included, in test-crypto-cipher.c and test-crypto-xts.c.)
 *
 * Each test is registered once per path and forces that path with
 * qcrypto_cipher_set_backend(), then checks that the ciphers it creates
 * report it as their implementation.
 */
#include <string.h>

#include <glib.h>

#include "crypto/cipher.h"
#include "crypto/ivgen.h"
#include "crypto/sector.h"
#include "crypto-test-hex.h"

/* ---- helpers ---- */

static void fill_random(uint8_t *buf, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        buf[i] = (uint8_t)g_test_rand_int();
    }
}

static QCryptoCipher *new_cipher(const char *backend, QCryptoCipherAlgo alg,
                                 QCryptoCipherMode mode, const uint8_t *key,
                                 size_t nkey)
{
    QCryptoCipher *cipher;

    g_assert_cmpint(qcrypto_cipher_set_backend(backend, &error_abort), ==, 0);
    cipher = qcrypto_cipher_new(alg, mode, key, nkey, &error_abort);
    g_assert_nonnull(cipher);
    g_assert_cmpstr(qcrypto_cipher_get_impl_name(cipher), ==, backend);
    return cipher;
}

static void set_iv(QCryptoCipher *cipher, const uint8_t *iv)
{
    if (qcrypto_cipher_get_mode(cipher) != QCRYPTO_CIPHER_MODE_ECB) {
        g_assert_cmpint(qcrypto_cipher_setiv(cipher, iv, 16, &error_abort),
                        ==, 0);
    }
}

static void cipher_run(QCryptoCipher *cipher, bool encrypt,
                       const uint8_t *in, uint8_t *out, size_t len)
{
    int ret = encrypt ?
        qcrypto_cipher_encrypt(cipher, in, out, len, &error_abort) :
        qcrypto_cipher_decrypt(cipher, in, out, len, &error_abort);
    g_assert_cmpint(ret, ==, 0);
}

/*
 * CTR is E(counter) XOR data with a 128-bit big-endian counter (SP 800-38A
 * section 6.5, B.1): check the carries against ECB of counters built here,
 * starting just before the low 64 bits wrap and just before all 128 do.
 */
static void test_ctr_counter(gconstpointer data)
{
    const char *path = data;
    static const char *const starts[] = {
        "0123456789abcdeffffffffffffffff0",
        "ffffffffffffffffffffffffffffffe9",
        "00000000000000000000000000000000",
    };
    uint8_t key[32], pt[16 * 100], ctrs[16 * 100], want[16 * 100];
    uint8_t out[16 * 100];

    fill_random(key, sizeof(key));
    fill_random(pt, sizeof(pt));
    for (size_t i = 0; i < G_N_ELEMENTS(starts); i++) {
        g_autofree uint8_t *iv = test_unhex(starts[i], NULL);
        g_autoptr(QCryptoCipher) ecb =
            new_cipher(path, QCRYPTO_CIPHER_ALGO_AES_256,
                       QCRYPTO_CIPHER_MODE_ECB, key, 32);
        g_autoptr(QCryptoCipher) ctr =
            new_cipher(path, QCRYPTO_CIPHER_ALGO_AES_256,
                       QCRYPTO_CIPHER_MODE_CTR, key, 32);
        uint8_t c[16];

        memcpy(c, iv, 16);
        for (size_t b = 0; b < 100; b++) {
            memcpy(ctrs + 16 * b, c, 16);
            for (int j = 15; j >= 0 && ++c[j] == 0; j--) {
                /* carry into the next byte up */
            }
        }
        cipher_run(ecb, true, ctrs, want, sizeof(want));
        for (size_t j = 0; j < sizeof(want); j++) {
            want[j] ^= pt[j];
        }
        set_iv(ctr, iv);
        cipher_run(ctr, true, pt, out, 16 * 37);
        cipher_run(ctr, true, pt + 16 * 37, out + 16 * 37, 16 * 63);
        g_assert_cmpmem(out, sizeof(out), want, sizeof(want));
    }
}

/* ---- differential, random input ---- */

typedef struct {
    const char *path;
    QCryptoCipherMode mode;
} DiffCase;

static const QCryptoCipherAlgo aes_algs[] = {
    QCRYPTO_CIPHER_ALGO_AES_128,
    QCRYPTO_CIPHER_ALGO_AES_192,
    QCRYPTO_CIPHER_ALGO_AES_256,
};

/*
 * Lengths around every width's boundaries: one block, one vector of each
 * width (16, 32, 64 bytes), eight vectors (the main loops: 128, 256, 512
 * bytes), one off either side, sector sizes, and 64 KiB.
 */
static const size_t diff_lengths[] = {
    16, 32, 48, 64, 80, 96, 112, 128, 144, 192, 240, 256, 272, 384, 496,
    512, 528, 576, 1008, 1024, 1040, 2048 + 48, 4096, 4096 + 16 * 7,
    8192 - 16, 65536,
};

/* Ragged XTS lengths: ciphertext stealing after every kind of body. */
static const size_t xts_ragged_lengths[] = {
    17, 18, 31, 33, 47, 63, 65, 79, 100, 127, 129, 255, 257, 511, 513,
    527, 1000, 4095, 4097, 65535,
};

static void diff_one(const DiffCase *dc, QCryptoCipherAlgo alg, size_t len,
                     const char *ref)
{
    QCryptoCipherMode mode = dc->mode;
    size_t nkey = qcrypto_cipher_get_mode_key_len(alg, mode);
    g_autofree uint8_t *key = g_malloc(nkey);
    g_autofree uint8_t *pt = g_malloc(len);
    g_autofree uint8_t *want = g_malloc(len);
    /* Room to misalign input and output by up to 15 bytes. */
    g_autofree uint8_t *inbuf = g_malloc(len + 16);
    g_autofree uint8_t *outbuf = g_malloc(len + 16);
    g_autoptr(QCryptoCipher) rc = NULL;
    g_autoptr(QCryptoCipher) tc = NULL;
    uint8_t iv[16];

    fill_random(key, nkey);
    fill_random(pt, len);
    fill_random(iv, sizeof(iv));
    if (mode == QCRYPTO_CIPHER_MODE_XTS && nkey == 32 &&
        memcmp(key, key + 16, 16) == 0) {
        key[0] ^= 1;
    }
    if (mode == QCRYPTO_CIPHER_MODE_CTR && g_test_rand_bit()) {
        /* Start a few blocks before the low 64 bits (or all 128) wrap. */
        memset(iv + (g_test_rand_bit() ? 0 : 8), 0xff, 8);
        memset(iv + 8, 0xff, 8);
        iv[15] = (uint8_t)(0xff - g_test_rand_int_range(0, 40));
    }
    rc = new_cipher(ref, alg, mode, key, nkey);
    tc = new_cipher(dc->path, alg, mode, key, nkey);
    set_iv(rc, iv);
    cipher_run(rc, true, pt, want, len);

    for (unsigned trial = 0; trial < 4; trial++) {
        unsigned in_off = trial ? g_test_rand_int_range(0, 16) : 0;
        unsigned out_off = trial ? g_test_rand_int_range(0, 16) : 0;
        bool in_place = trial & 1;
        uint8_t *in = inbuf + in_off;
        uint8_t *out = in_place ? in : outbuf + out_off;
        size_t done = 0;

        /* Encrypt in up to four calls cut at block boundaries. */
        memcpy(in, pt, len);
        set_iv(tc, iv);
        for (unsigned call = 0; done < len; call++) {
            size_t part = len - done;
            if (call < 3 && trial >= 2 && part > 32) {
                part = 16 * g_test_rand_int_range(1, (part - 16) / 16 + 1);
            }
            cipher_run(tc, true, in + done, out + done, part);
            done += part;
        }
        g_assert_cmpmem(out, len, want, len);

        memcpy(in, want, len);
        set_iv(tc, iv);
        cipher_run(tc, false, in, out, len);
        g_assert_cmpmem(out, len, pt, len);
    }
}

static void test_differential(gconstpointer data)
{
    const DiffCase *dc = data;
    const char *ref = "nettle";     /* always built: the portable backend */

    for (size_t a = 0; a < G_N_ELEMENTS(aes_algs); a++) {
        for (size_t i = 0; i < G_N_ELEMENTS(diff_lengths); i++) {
            diff_one(dc, aes_algs[a], diff_lengths[i], ref);
        }
        for (unsigned i = 0; i < 8; i++) {
            diff_one(dc, aes_algs[a], 16 * g_test_rand_int_range(1, 600),
                     ref);
        }
        if (dc->mode == QCRYPTO_CIPHER_MODE_XTS) {
            for (size_t i = 0; i < G_N_ELEMENTS(xts_ragged_lengths); i++) {
                diff_one(dc, aes_algs[a], xts_ragged_lengths[i], ref);
            }
        }
    }
}

/* ---- the multi-sector entry point ---- */

static void sectors_one(const char *path, QCryptoCipherAlgo alg,
                        QCryptoIVGenAlgo ivalg, size_t sector_size,
                        unsigned shift, uint64_t iv_offset, uint64_t first,
                        size_t count)
{
    QCryptoSectorCipherSpec spec = {
        .alg = alg,
        .mode = QCRYPTO_CIPHER_MODE_XTS,
        .ivgen = ivalg,
    };
    size_t nkey = qcrypto_cipher_get_mode_key_len(alg,
                                                  QCRYPTO_CIPHER_MODE_XTS);
    size_t len = sector_size * count;
    g_autofree uint8_t *key = g_malloc(nkey);
    g_autofree uint8_t *pt = g_malloc(len);
    g_autofree uint8_t *want = g_malloc(len);
    /* Room to misalign the buffer by up to 63 bytes. */
    g_autofree uint8_t *bufmem = g_malloc(len + 64);
    uint8_t *buf = bufmem + g_test_rand_int_range(0, 64);
    g_autoptr(QCryptoIVGen) ivgen = NULL;
    g_autoptr(QCryptoCipher) tc = NULL;
    g_autoptr(QCryptoSectorCipher) sc = NULL;
    uint8_t iv[16];

    fill_random(key, nkey);
    fill_random(pt, len);
    ivgen = qcrypto_ivgen_new(ivalg, alg, 0, NULL, 0, &error_abort);
    /* The reference is nettle, always built: no code shared with path. */
    tc = new_cipher("nettle", alg, QCRYPTO_CIPHER_MODE_XTS, key, nkey);

    /* What a per-sector loop writes: IV, setiv, encrypt, sector by sector. */
    for (size_t s = 0; s < count; s++) {
        uint64_t ivnum = (first + iv_offset + s) << shift;

        g_assert_cmpint(qcrypto_ivgen_calculate(ivgen, ivnum, iv, 16, &error_abort),
                        ==, 0);
        set_iv(tc, iv);
        cipher_run(tc, true, pt + s * sector_size, want + s * sector_size,
                   sector_size);
    }

    /* The sector cipher on this path must take the multi-sector entry. */
    g_assert_cmpint(qcrypto_cipher_set_backend(path, &error_abort), ==, 0);
    sc = qcrypto_sector_cipher_new(&spec, key, nkey, sector_size,
              shift, iv_offset, &error_abort);
    g_assert_cmpstr(qcrypto_sector_cipher_get_impl_name(sc), ==, path);
    g_assert_true(qcrypto_sector_cipher_is_bulk(sc));
    memcpy(buf, pt, len);
    g_assert_cmpint(qcrypto_sector_cipher_encrypt(sc, first, buf, len, &error_abort),
                    ==, 0);
    g_assert_cmpmem(buf, len, want, len);
    g_assert_cmpint(qcrypto_sector_cipher_decrypt(sc, first, buf, len, &error_abort),
                    ==, 0);
    g_assert_cmpmem(buf, len, pt, len);
}

static void test_sectors(gconstpointer data)
{
    const char *path = data;
    static const size_t counts[] = { 1, 2, 3, 7, 31, 32, 33, 65, 128, 130 };

    for (size_t a = 0; a < G_N_ELEMENTS(aes_algs); a++) {
        for (size_t c = 0; c < G_N_ELEMENTS(counts); c++) {
            uint64_t first = g_test_rand_int();
            sectors_one(path, aes_algs[a], QCRYPTO_IVGEN_ALGO_PLAIN64, 512,
                        0, 0, first << 20, counts[c]);
            sectors_one(path, aes_algs[a], QCRYPTO_IVGEN_ALGO_PLAIN64, 4096,
                        0, 0, first, counts[c] % 40);
            sectors_one(path, aes_algs[a], QCRYPTO_IVGEN_ALGO_PLAIN64BE, 512,
                        0, 0, first << 30, counts[c]);
        }
        /* LUKS2 4 KiB sectors counted in 512-byte units, from iv_tweak. */
        sectors_one(path, aes_algs[a], QCRYPTO_IVGEN_ALGO_PLAIN64, 4096, 3,
                    0, 1000, 9);
        sectors_one(path, aes_algs[a], QCRYPTO_IVGEN_ALGO_PLAIN64BE, 4096, 3,
                    123456, 1000, 40);
        /* plain: the 32-bit IV wraps mid-run, with and without a shift. */
        sectors_one(path, aes_algs[a], QCRYPTO_IVGEN_ALGO_PLAIN, 512, 0, 0,
                    UINT32_MAX - 20, 64);
        sectors_one(path, aes_algs[a], QCRYPTO_IVGEN_ALGO_PLAIN, 4096, 3, 7,
                    (UINT32_MAX >> 3) - 20, 40);
        /* The 64-bit sector number wraps mid-run. */
        sectors_one(path, aes_algs[a], QCRYPTO_IVGEN_ALGO_PLAIN64, 512, 0, 0,
                    UINT64_MAX - 10, 33);
        /* Odd sector sizes that leave tails on every width. */
        sectors_one(path, aes_algs[a], QCRYPTO_IVGEN_ALGO_PLAIN64, 16, 0, 0,
                    5, 40);
        sectors_one(path, aes_algs[a], QCRYPTO_IVGEN_ALGO_PLAIN64, 16 * 37,
                    0, 0, 77, 11);
    }
}

/*
 * One sector per call, the common request (a file system's block), which
 * has its own path (the tweak kept in registers, E_K2 on a full vector:
 * crypto/aes-x86/aes-x86-template.c.inc): every IV layout, sector sizes
 * that leave every kind of tail on every width (a lone block, one vector
 * of each width, around the eight-vector loop), IV numbers at the points
 * where a layout wraps, decryption checked by the round trip.
 */
static void test_sectors_one(gconstpointer data)
{
    const char *path = data;
    static const size_t sizes[] = {
        16, 32, 48, 64, 80, 112, 128, 144, 240, 256, 272, 496, 512, 528,
        16 * 37, 1008, 1024, 2048 + 48, 4096 - 16, 4096, 4096 + 16, 65536,
    };
    static const QCryptoIVGenAlgo ivalgs[] = {
        QCRYPTO_IVGEN_ALGO_PLAIN,
        QCRYPTO_IVGEN_ALGO_PLAIN64,
        QCRYPTO_IVGEN_ALGO_PLAIN64BE,
    };
    static const uint64_t firsts[] = {
        0, 1, UINT32_MAX, (uint64_t)UINT32_MAX + 1, UINT64_MAX,
        0x0123456789abcdefULL,
    };

    for (size_t a = 0; a < G_N_ELEMENTS(aes_algs); a++) {
        for (size_t z = 0; z < G_N_ELEMENTS(sizes); z++) {
            for (size_t v = 0; v < G_N_ELEMENTS(ivalgs); v++) {
                uint64_t first = firsts[(z + v) % G_N_ELEMENTS(firsts)];

                sectors_one(path, aes_algs[a], ivalgs[v], sizes[z], 0, 0,
                            first, 1);
                sectors_one(path, aes_algs[a], ivalgs[v], sizes[z], 0, 0,
                            ((uint64_t)g_test_rand_int() << 32) |
                            g_test_rand_int(), 1);
            }
        }
        /* LUKS2 4 KiB sectors counted in 512-byte units, from iv_tweak. */
        sectors_one(path, aes_algs[a], QCRYPTO_IVGEN_ALGO_PLAIN64, 4096, 3,
                    99, 12345, 1);
        sectors_one(path, aes_algs[a], QCRYPTO_IVGEN_ALGO_PLAIN, 4096, 3,
                    0, (UINT32_MAX >> 3), 1);
    }
}

/*
 * Runs of one-sector calls on one cipher, as a sequential reader makes
 * them: the one-sector path takes each first tweak from the tweaks it
 * computed ahead (crypto/aes-x86/aes-x86.h, AesX86TweakCache) when the
 * sector follows the previous one. A stale or misplaced tweak would show
 * here: runs of every length across the cache's refills, jumps back and
 * forth, the same sector twice, encryption and decryption mixed, the IV
 * layout or shift changed between calls with the same number (it must
 * miss), and runs across the points where a layout wraps. Every call is
 * checked against nettle, one setiv and one encrypt per sector.
 */
static void test_sectors_sequence(gconstpointer data)
{
    const char *path = data;
    static const QCryptoCipherIVFormat formats[] = {
        QCRYPTO_CIPHER_IV_LE32, QCRYPTO_CIPHER_IV_LE64,
        QCRYPTO_CIPHER_IV_BE64,
    };
    static const size_t sizes[] = { 16, 512, 4096 };
    static const uint64_t starts[] = {
        0, UINT32_MAX - 5, UINT64_MAX - 6, 0x0123456789abcdefULL,
    };

    for (size_t a = 0; a < G_N_ELEMENTS(aes_algs); a++) {
        QCryptoCipherAlgo alg = aes_algs[a];
        size_t nkey = qcrypto_cipher_get_mode_key_len(alg,
                                                      QCRYPTO_CIPHER_MODE_XTS);
        g_autofree uint8_t *key = g_malloc(nkey);
        g_autoptr(QCryptoCipher) c = NULL;
        g_autoptr(QCryptoCipher) ref = NULL;
        uint64_t num = starts[a % G_N_ELEMENTS(starts)];
        size_t f = 1, z = 2;
        unsigned shift = 0;

        fill_random(key, nkey);
        c = new_cipher(path, alg, QCRYPTO_CIPHER_MODE_XTS, key, nkey);
        ref = new_cipher("nettle", alg, QCRYPTO_CIPHER_MODE_XTS, key, nkey);
        for (unsigned call = 0; call < 600; call++) {
            uint8_t pt[4096], got[4096], want[4096], iv[16] = { 0 };
            bool enc = g_test_rand_bit();
            size_t len = sizes[z];
            uint64_t ivnum;
            QCryptoCipherSectors s;

            /* Mostly the next sector; now and then something else. */
            switch (g_test_rand_int_range(0, 16)) {
            case 0:
                num = ((uint64_t)g_test_rand_int() << 32) | g_test_rand_int();
                break;
            case 1:
                num -= g_test_rand_int_range(0, 9);     /* back, or again */
                break;
            case 2:
                f = g_test_rand_int_range(0, G_N_ELEMENTS(formats));
                break;
            case 3:
                shift = shift ? 0 : 3;
                break;
            case 4:
                z = g_test_rand_int_range(0, G_N_ELEMENTS(sizes));
                len = sizes[z];
                break;
            case 5:
                num = starts[g_test_rand_int_range(0, G_N_ELEMENTS(starts))];
                break;
            default:
                break;
            }
            s = (QCryptoCipherSectors) {
                .first_iv = num << shift,
                .iv_shift = shift,
                .iv_format = formats[f],
                .sector_size = len,
            };
            ivnum = num << shift;
            switch (formats[f]) {
            case QCRYPTO_CIPHER_IV_LE32:
                for (int i = 0; i < 4; i++) {
                    iv[i] = ivnum >> (8 * i);
                }
                break;
            case QCRYPTO_CIPHER_IV_LE64:
                for (int i = 0; i < 8; i++) {
                    iv[i] = ivnum >> (8 * i);
                }
                break;
            case QCRYPTO_CIPHER_IV_BE64:
                for (int i = 0; i < 8; i++) {
                    iv[15 - i] = ivnum >> (8 * i);
                }
                break;
            }
            fill_random(pt, len);
            set_iv(ref, iv);
            cipher_run(ref, enc, pt, want, len);
            memcpy(got, pt, len);
            g_assert_cmpint(enc ?
                            qcrypto_cipher_encrypt_sectors(c, &s, got, len,
                                                           &error_abort) :
                            qcrypto_cipher_decrypt_sectors(c, &s, got, len,
                                                           &error_abort),
                            ==, 0);
            g_assert_cmpmem(got, len, want, len);
            num++;
        }
    }
}

/* The cipher-level entry point: for XTS only, and it checks lengths. */
static void test_sectors_entry(gconstpointer data)
{
    const char *path = data;
    uint8_t key[32] = { 1, 2, 3 }, buf[1024] = { 0 };
    QCryptoCipherSectors s = {
        .iv_format = QCRYPTO_CIPHER_IV_LE64,
        .sector_size = 512,
    };
    g_autoptr(QCryptoCipher) xts =
        new_cipher(path, QCRYPTO_CIPHER_ALGO_AES_128,
                   QCRYPTO_CIPHER_MODE_XTS, key, 32);
    g_autoptr(QCryptoCipher) cbc =
        new_cipher(path, QCRYPTO_CIPHER_ALGO_AES_128,
                   QCRYPTO_CIPHER_MODE_CBC, key, 16);
    Error *err = NULL;

    g_assert_true(qcrypto_cipher_has_sectors(xts, QCRYPTO_CIPHER_IV_LE32));
    g_assert_true(qcrypto_cipher_has_sectors(xts, QCRYPTO_CIPHER_IV_LE64));
    g_assert_true(qcrypto_cipher_has_sectors(xts, QCRYPTO_CIPHER_IV_BE64));
    g_assert_false(qcrypto_cipher_has_sectors(cbc, QCRYPTO_CIPHER_IV_LE64));

    g_assert_cmpint(qcrypto_cipher_encrypt_sectors(cbc, &s, buf, 1024, &err),
                    ==, -1);
    error_free_or_abort(&err);
    g_assert_cmpint(qcrypto_cipher_encrypt_sectors(xts, &s, buf, 1000, &err),
                    ==, -1);
    error_free_or_abort(&err);
    s.sector_size = 500;
    g_assert_cmpint(qcrypto_cipher_encrypt_sectors(xts, &s, buf, 1000, &err),
                    ==, -1);
    error_free_or_abort(&err);
    s.sector_size = 512;
    s.iv_shift = 64;
    g_assert_cmpint(qcrypto_cipher_decrypt_sectors(xts, &s, buf, 1024, &err),
                    ==, -1);
    error_free_or_abort(&err);
    s.iv_shift = 0;
    g_assert_cmpint(qcrypto_cipher_encrypt_sectors(xts, &s, buf, 1024, &error_abort),
                    ==, 0);
}

/* ---- backend choice ---- */

static void test_paths_listed(void)
{
    const char *const *list = qcrypto_cipher_backend_list();
    static const char *const order[] = { "vaes-512", "vaes-256", "aesni" };
    size_t pos = 0;

    /* Paths appear best first; a CPU with a wide path has the narrower. */
    for (size_t i = 0; list[i]; i++) {
        for (size_t j = 0; j < G_N_ELEMENTS(order); j++) {
            if (g_str_equal(list[i], order[j])) {
                g_assert_cmpuint(j, >=, pos);
                pos = j;
            }
        }
    }
    g_assert_cmpint(qcrypto_cipher_set_backend("auto", &error_abort), ==, 0);
    /* LRW is not built in: auto must pick another backend or none. */
    if (qcrypto_cipher_supports(QCRYPTO_CIPHER_ALGO_AES_128,
                                QCRYPTO_CIPHER_MODE_LRW)) {
        uint8_t key[32] = { 1 };
        g_autoptr(QCryptoCipher) c =
            qcrypto_cipher_new(QCRYPTO_CIPHER_ALGO_AES_128,
                               QCRYPTO_CIPHER_MODE_LRW, key, 32,
                               &error_abort);
        g_assert_cmpstr(qcrypto_cipher_get_impl_name(c), ==, "nettle");
    }
}

static void test_path_refuses_lrw(gconstpointer data)
{
    Error *err = NULL;
    uint8_t key[32] = { 0 };

    g_assert_cmpint(qcrypto_cipher_set_backend(data, &error_abort), ==, 0);
    g_assert_null(qcrypto_cipher_new(QCRYPTO_CIPHER_ALGO_AES_128,
                                     QCRYPTO_CIPHER_MODE_LRW, key, 32,
                                     &err));
    g_assert_nonnull(err);
    error_free(err);
}

static void test_no_path(void)
{
#ifdef CONFIG_AES_X86
    g_test_skip("this CPU has no AES-NI: no built-in AES path to test");
#else
    g_test_skip("built without the x86 AES code (-Daes_x86=disabled, "
                "or not x86-64)");
#endif
}

int main(int argc, char **argv)
{
    static const struct {
        QCryptoCipherMode mode;
        const char *name;
    } modes[] = {
        { QCRYPTO_CIPHER_MODE_ECB, "ecb" },
        { QCRYPTO_CIPHER_MODE_CBC, "cbc" },
        { QCRYPTO_CIPHER_MODE_CTR, "ctr" },
        { QCRYPTO_CIPHER_MODE_XTS, "xts" },
    };
    bool any = false;

    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/crypto/aes-x86/paths-listed", test_paths_listed);
    for (const char *const *b = qcrypto_cipher_backend_list(); *b; b++) {
        const char *path = *b;
        if (!g_str_equal(path, "vaes-512") && !g_str_equal(path, "vaes-256")
            && !g_str_equal(path, "aesni")) {
            continue;
        }
        any = true;
#define ADD(what, fn, d)                                                \
        do {                                                            \
            g_autofree char *name =                                     \
                g_strdup_printf("/crypto/aes-x86/%s/%s", path, what);   \
            g_test_add_data_func(name, d, fn);                          \
        } while (0)
        ADD("refuses-lrw", test_path_refuses_lrw, path);
        ADD("ctr-counter", test_ctr_counter, path);
        for (size_t m = 0; m < G_N_ELEMENTS(modes); m++) {
            DiffCase *dc = g_new0(DiffCase, 1);   /* lives until exit */
            g_autofree char *what =
                g_strdup_printf("differential-%s", modes[m].name);
            dc->path = path;
            dc->mode = modes[m].mode;
            ADD(what, test_differential, dc);
        }
        ADD("sectors", test_sectors, path);
        ADD("sectors-one", test_sectors_one, path);
        ADD("sectors-sequence", test_sectors_sequence, path);
        ADD("sectors-entry", test_sectors_entry, path);
#undef ADD
    }
    if (!any) {
        /* Say so in the results: these paths were not tested here. */
        g_test_add_func("/crypto/aes-x86/no-path", test_no_path);
    }
    return g_test_run();
}
