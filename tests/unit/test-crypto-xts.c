/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * XTS (crypto/xts.c) through the cipher interface: every test vector of
 * IEEE Std 1619-2007, Annex B (vectors 1-18: XTS-AES-128, XTS-AES-256,
 * and ciphertext stealing with data units of 17 to 20 bytes), whole, in
 * two calls, in place, out of place and at unaligned addresses; the
 * tweak doubling on its own; and the bulk path against a block-at-a-time
 * reference over many chunk sizes. The vectors are in
 * ieee1619-xts-vectors.h.
 */
#include <string.h>

#include "crypto/cipher.h"
#include "crypto/xts.h"
#include "crypto-test-hex.h"

#include "ieee1619-xts-vectors.h"

typedef enum {
    RUN_WHOLE,          /* one call */
    RUN_SPLIT,          /* two calls, split at a block boundary */
} RunShape;

/*
 * Encrypt or decrypt len bytes of in to out with a fresh IV. The split
 * leaves at least one full block for the second call (XTS takes no call
 * shorter than a block), so the 17..20-byte vectors run whole only.
 */
static void xts_run(QCryptoCipher *cipher, const guint8 *iv, bool encrypt,
                    const guint8 *in, guint8 *out, size_t len, RunShape shape)
{
    size_t split = len / XTS_BLOCK_SIZE / 2 * XTS_BLOCK_SIZE;

    g_assert_cmpint(qcrypto_cipher_setiv(cipher, iv, 16, &error_abort), ==, 0);
    if (shape == RUN_SPLIT && split > 0) {
        g_assert_cmpuint(len - split, >=, XTS_BLOCK_SIZE);
        if (encrypt) {
            g_assert_cmpint(qcrypto_cipher_encrypt(cipher, in, out, split,
                                                   &error_abort), ==, 0);
        } else {
            g_assert_cmpint(qcrypto_cipher_decrypt(cipher, in, out, split,
                                                   &error_abort), ==, 0);
        }
        in += split;
        out += split;
        len -= split;
    }
    if (encrypt) {
        g_assert_cmpint(qcrypto_cipher_encrypt(cipher, in, out, len,
                                               &error_abort), ==, 0);
    } else {
        g_assert_cmpint(qcrypto_cipher_decrypt(cipher, in, out, len,
                                               &error_abort), ==, 0);
    }
}

/*
 * One vector, both ways, in every shape: whole and split; out of place
 * and in place; at an aligned and at an odd address.
 */
typedef struct XTSCase {
    const XTSVector *vector;
    const char *backend;
} XTSCase;

static void test_xts_vector(gconstpointer opaque)
{
    const XTSCase *c = opaque;
    const XTSVector *v = c->vector;
    size_t nkey, niv, len, nct;
    g_autofree guint8 *key = test_unhex(v->key, &nkey);
    g_autofree guint8 *iv = test_unhex(v->iv, &niv);
    g_autofree guint8 *pt = xts_vector_plaintext(v, &len);
    g_autofree guint8 *ct = test_unhex(v->ciphertext, &nct);
    g_autofree guint8 *inbuf = g_malloc(len + 1);
    g_autofree guint8 *outbuf = g_malloc(len + 1);
    g_autoptr(QCryptoCipher) cipher = NULL;

    g_assert_cmpuint(niv, ==, 16);
    g_assert_cmpuint(nct, ==, len);
    g_assert_cmpint(qcrypto_cipher_set_backend(c->backend,
                                               &error_abort), ==, 0);
    cipher = qcrypto_cipher_new(v->alg, QCRYPTO_CIPHER_MODE_XTS, key, nkey,
                                &error_abort);
    g_assert_nonnull(cipher);

    for (int shape = RUN_WHOLE; shape <= RUN_SPLIT; shape++) {
        for (size_t offset = 0; offset <= 1; offset++) {
            guint8 *in = inbuf + offset, *out = outbuf + offset;

            /* Out of place. */
            memcpy(in, pt, len);
            xts_run(cipher, iv, true, in, out, len, shape);
            g_assert_cmpmem(out, len, ct, len);
            memcpy(in, ct, len);
            xts_run(cipher, iv, false, in, out, len, shape);
            g_assert_cmpmem(out, len, pt, len);

            /* In place. */
            memcpy(in, pt, len);
            xts_run(cipher, iv, true, in, in, len, shape);
            g_assert_cmpmem(in, len, ct, len);
            xts_run(cipher, iv, false, in, in, len, shape);
            g_assert_cmpmem(in, len, pt, len);
        }
    }
}

/*
 * Multiplication by x, IEEE 1619-2007 5.2, written the standard's way:
 * byte by byte, the carry of each byte's top bit into the next byte, and
 * the top bit of byte 15 folded back into byte 0 as 135 (0x87).
 */
static void mul_x_bytewise(guint8 a[16])
{
    guint8 carry = 0;

    for (int j = 0; j < 16; j++) {
        guint8 next = a[j] >> 7;

        a[j] = (a[j] << 1) | carry;
        carry = next;
    }
    if (carry) {
        a[0] ^= 0x87;
    }
}

static void test_xts_mul_x(void)
{
    xts_uint128 t;
    guint8 ref[16];
    guint32 seed = 1;

    /* 1 * x = x: byte 0 goes 01 -> 02. */
    memset(&t, 0, sizeof(t));
    t.b[0] = 0x01;
    xts_uint128_mul_x(&t);
    g_assert_cmpuint(t.b[0], ==, 0x02);
    /* x^63 * x = x^64: the carry crosses from word 0 into word 1. */
    memset(&t, 0, sizeof(t));
    t.b[7] = 0x80;
    xts_uint128_mul_x(&t);
    g_assert_cmpuint(t.b[7], ==, 0);
    g_assert_cmpuint(t.b[8], ==, 0x01);
    /* x^127 * x = x^7 + x^2 + x + 1: the reduction. */
    memset(&t, 0, sizeof(t));
    t.b[15] = 0x80;
    xts_uint128_mul_x(&t);
    g_assert_cmpuint(t.b[0], ==, 0x87);
    for (int i = 1; i < 16; i++) {
        g_assert_cmpuint(t.b[i], ==, 0);
    }

    /* A long walk from an arbitrary start agrees with the bytewise rule. */
    for (int i = 0; i < 16; i++) {
        seed = seed * 1103515245 + 12345;
        t.b[i] = ref[i] = seed >> 16;
    }
    for (int n = 0; n < 1000; n++) {
        xts_uint128_mul_x(&t);
        mul_x_bytewise(ref);
        g_assert_cmpmem(t.b, 16, ref, 16);
    }
}

/*
 * The bulk path against the definition: every block computed alone as
 * E_K1(P ^ T) ^ T with ECB calls and the bytewise doubling, and a ragged
 * tail stolen as IEEE 1619 5.3.2 says, for data units longer than one
 * chunk, handed over in uneven pieces (the last one holding the tail).
 */
static void test_xts_bulk_vs_reference(gconstpointer opaque)
{
    const size_t tail = GPOINTER_TO_SIZE(opaque);
    const size_t len = 300 * 16 + 16 + tail;  /* over a 256-block chunk */
    const size_t nfull = len / 16;
    const size_t pieces[] = { 16, 48, 4096, 160, 16, 528 };
    guint8 key[64], iv[16], T[16], blk[16];
    g_autofree guint8 *pt = g_malloc(len);
    g_autofree guint8 *ref = g_malloc(len);
    g_autofree guint8 *out = g_malloc(len);
    g_autoptr(QCryptoCipher) xts = NULL;
    g_autoptr(QCryptoCipher) k1 = NULL;
    g_autoptr(QCryptoCipher) k2 = NULL;
    size_t done = 0;

    for (size_t i = 0; i < sizeof(key); i++) {
        key[i] = i * 29 + 5;
    }
    for (size_t i = 0; i < sizeof(iv); i++) {
        iv[i] = 0xa0 + i;
    }
    for (size_t i = 0; i < len; i++) {
        pt[i] = i * 13 + (i >> 8);
    }
    xts = qcrypto_cipher_new(QCRYPTO_CIPHER_ALGO_AES_256,
                             QCRYPTO_CIPHER_MODE_XTS, key, 64, &error_abort);
    g_assert_nonnull(xts);
    k1 = qcrypto_cipher_new(QCRYPTO_CIPHER_ALGO_AES_256,
                            QCRYPTO_CIPHER_MODE_ECB, key, 32, &error_abort);
    g_assert_nonnull(k1);
    k2 = qcrypto_cipher_new(QCRYPTO_CIPHER_ALGO_AES_256,
                            QCRYPTO_CIPHER_MODE_ECB, key + 32, 32,
                            &error_abort);
    g_assert_nonnull(k2);

    /* Whole blocks: C_j = E(P_j ^ T_j) ^ T_j, T_{j+1} = T_j * x. */
    g_assert_cmpint(qcrypto_cipher_encrypt(k2, iv, T, 16, &error_abort), ==, 0);
    for (size_t j = 0; j < nfull; j++) {
        for (int i = 0; i < 16; i++) {
            blk[i] = pt[16 * j + i] ^ T[i];
        }
        g_assert_cmpint(qcrypto_cipher_encrypt(k1, blk, blk, 16,
                                               &error_abort), ==, 0);
        for (int i = 0; i < 16; i++) {
            ref[16 * j + i] = blk[i] ^ T[i];
        }
        mul_x_bytewise(T);
    }
    /*
     * Stealing: the last full block's output CC gives up its head as the
     * short last block; P_m || CC[tail..] goes through with T_m instead.
     */
    if (tail) {
        guint8 *last_full = ref + 16 * (nfull - 1);

        memcpy(ref + 16 * nfull, last_full, tail);
        memcpy(blk, pt + 16 * nfull, tail);
        memcpy(blk + tail, last_full + tail, 16 - tail);
        for (int i = 0; i < 16; i++) {
            blk[i] ^= T[i];
        }
        g_assert_cmpint(qcrypto_cipher_encrypt(k1, blk, blk, 16,
                                               &error_abort), ==, 0);
        for (int i = 0; i < 16; i++) {
            last_full[i] = blk[i] ^ T[i];
        }
    }

    g_assert_cmpint(qcrypto_cipher_setiv(xts, iv, 16, &error_abort), ==, 0);
    for (size_t i = 0; done < len; i = (i + 1) % G_N_ELEMENTS(pieces)) {
        size_t n = MIN(pieces[i], len - done);

        if (len - done - n < 16) {
            n = len - done;     /* the tail goes with the last full block */
        }
        g_assert_cmpint(qcrypto_cipher_encrypt(xts, pt + done, out + done, n,
                                               &error_abort), ==, 0);
        done += n;
    }
    g_assert_cmpmem(out, len, ref, len);

    g_assert_cmpint(qcrypto_cipher_setiv(xts, iv, 16, &error_abort), ==, 0);
    g_assert_cmpint(qcrypto_cipher_decrypt(xts, out, out, len,
                                           &error_abort), ==, 0);
    g_assert_cmpmem(out, len, pt, len);
}

/* XTS needs a whole block: shorter calls fail with a clear error. */
static void test_xts_too_short(void)
{
    guint8 key[32] = { 0 }, buf[16] = { 0 };
    g_autoptr(QCryptoCipher) cipher = NULL;
    Error *err = NULL;

    cipher = qcrypto_cipher_new(QCRYPTO_CIPHER_ALGO_AES_128,
                                QCRYPTO_CIPHER_MODE_XTS, key, 32, &error_abort);
    g_assert_nonnull(cipher);
    g_assert_cmpint(qcrypto_cipher_encrypt(cipher, buf, buf, 15, &err), <, 0);
    g_assert_nonnull(err);
    g_test_message("error: %s", error_get_pretty(err));
    error_free(err);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);

    /* Every vector on every backend that can run it. */
    for (const char *const *b = qcrypto_cipher_backend_list(); *b; b++) {
        for (size_t i = 0; i < G_N_ELEMENTS(xts_vectors); i++) {
            XTSCase *c = g_new0(XTSCase, 1);
            g_autofree char *path =
                g_strdup_printf("/crypto/xts/%s/ieee1619-vector-%d", *b,
                                xts_vectors[i].number);

            c->vector = &xts_vectors[i];
            c->backend = *b;
            if (qcrypto_cipher_set_backend(*b, NULL) == 0 &&
                qcrypto_cipher_supports(c->vector->alg,
                                        QCRYPTO_CIPHER_MODE_XTS)) {
                g_test_add_data_func_full(path, c, test_xts_vector, g_free);
            } else {
                g_free(c);
            }
        }
    }
    qcrypto_cipher_set_backend("auto", NULL);
    g_test_add_func("/crypto/xts/mul-x", test_xts_mul_x);
    g_test_add_data_func("/crypto/xts/bulk-vs-reference/whole-blocks",
                         GSIZE_TO_POINTER(0), test_xts_bulk_vs_reference);
    g_test_add_data_func("/crypto/xts/bulk-vs-reference/tail-1",
                         GSIZE_TO_POINTER(1), test_xts_bulk_vs_reference);
    g_test_add_data_func("/crypto/xts/bulk-vs-reference/tail-15",
                         GSIZE_TO_POINTER(15), test_xts_bulk_vs_reference);
    g_test_add_func("/crypto/xts/too-short", test_xts_too_short);
    return g_test_run();
}
