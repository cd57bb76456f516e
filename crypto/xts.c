/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * XTS mode (IEEE 1619-2007) over any 128-bit block cipher, in bulk.
 *
 * Block j of a data unit is C_j = E_K1(P_j ^ T_j) ^ T_j, with
 * T_0 = E_K2(iv) and T_{j+1} = T_j * x in GF(2^128) (IEEE 1619 5.3.1).
 * Done block by block, as nettle's xts_encrypt_message does, every block
 * costs a call of the block cipher through a function pointer and the
 * cipher never sees more than 16 bytes: an AES implementation that keeps
 * several blocks in flight (AES-NI pipelines eight) runs at a fraction of
 * its speed. So we work a chunk at a time:
 *
 *   1. write the tweaks T_j .. T_{j+n-1} of up to XTS_CHUNK_BLOCKS blocks
 *      into a buffer on the stack (the doubling runs on two 64-bit words
 *      kept in registers);
 *   2. dst = src ^ tweaks, over the whole chunk;
 *   3. one ECB call of the block cipher over the chunk, in place in dst;
 *   4. dst ^= tweaks.
 *
 * The buffer is 4 KiB, a whole 4096-byte sector: big enough that the
 * per-call overhead vanishes, small enough to stay in L1 with the data.
 * The XOR passes work on 64-bit words and vectorise.
 *
 * A ragged tail (length not a multiple of 16) is IEEE 1619 5.3.2
 * ciphertext stealing, done with two single-block calls after the bulk
 * part; it ends the data unit.
 */
#include <string.h>

#include "xtspriv.h"

#define XTS_CHUNK_BLOCKS 256

/* Write the next n tweaks to buf and advance T past them. */
static void xts_tweaks(xts_uint128 *T, xts_uint128 *buf, size_t n)
{
    xts_uint128 t = *T;

    for (size_t i = 0; i < n; i++) {
        buf[i] = t;
        xts_uint128_mul_x(&t);
    }
    *T = t;
}

/* Whole blocks only: length is a multiple of 16. */
static void xts_crypt_blocks(const void *ctx, xts_cipher_func *func,
                             xts_uint128 *T, size_t length,
                             uint8_t *dst, const uint8_t *src)
{
    xts_uint128 tw[XTS_CHUNK_BLOCKS];
    size_t used = MIN(length / XTS_BLOCK_SIZE, XTS_CHUNK_BLOCKS);

    while (length) {
        size_t n = MIN(length / XTS_BLOCK_SIZE, XTS_CHUNK_BLOCKS);
        size_t bytes = n * XTS_BLOCK_SIZE;

        xts_tweaks(T, tw, n);
        xts_xex_blocks(ctx, func, tw, n, dst, src);
        length -= bytes;
        src += bytes;
        dst += bytes;
    }
    /* The tweaks are key-dependent: leave none on the stack. */
    explicit_bzero(tw, used * sizeof(tw[0]));
}

/* One block through the cipher with tweak t, in place. */
static void xts_crypt_one(const void *ctx, xts_cipher_func *func,
                          const xts_uint128 *t, uint8_t *block)
{
    xts_xex_blocks(ctx, func, t, 1, block, block);
}

void xts_tweak_init(const void *tweakctx, xts_cipher_func *encfunc,
                    const uint8_t iv[XTS_BLOCK_SIZE], xts_uint128 *T)
{
    encfunc(tweakctx, XTS_BLOCK_SIZE, T->b, iv);
}

/*
 * Ciphertext stealing, IEEE 1619 5.3.2, for the last full block (m-1)
 * and the partial block m of tail bytes; src holds 16 + tail bytes.
 *   CC = E(P_{m-1}, T_{m-1});  C_m = CC[0..tail);
 *   C_{m-1} = E(P_m || CC[tail..16), T_m)
 */
void xts_encrypt(const void *datactx, xts_cipher_func *encfunc,
                 xts_uint128 *T, size_t length,
                 uint8_t *dst, const uint8_t *src)
{
    size_t tail = length % XTS_BLOCK_SIZE;
    uint8_t cc[XTS_BLOCK_SIZE];

    g_assert(length >= XTS_BLOCK_SIZE);
    if (!tail) {
        xts_crypt_blocks(datactx, encfunc, T, length, dst, src);
        return;
    }
    length -= XTS_BLOCK_SIZE + tail;
    xts_crypt_blocks(datactx, encfunc, T, length, dst, src);
    src += length;
    dst += length;

    memcpy(cc, src, XTS_BLOCK_SIZE);
    xts_crypt_one(datactx, encfunc, T, cc);
    xts_uint128_mul_x(T);
    /* Read P_m before writing C_m over it (src may equal dst). */
    memcpy(dst, src + XTS_BLOCK_SIZE, tail);
    memcpy(dst + tail, cc + tail, XTS_BLOCK_SIZE - tail);
    memcpy(dst + XTS_BLOCK_SIZE, cc, tail);
    xts_crypt_one(datactx, encfunc, T, dst);
    xts_uint128_mul_x(T);
    explicit_bzero(cc, sizeof(cc));
}

/*
 * The reverse: the last full ciphertext block was made with T_m, so it is
 * decrypted first, with the tweak after T_{m-1}.
 *   PP = D(C_{m-1}, T_m);  P_m = PP[0..tail);
 *   P_{m-1} = D(C_m || PP[tail..16), T_{m-1})
 */
void xts_decrypt(const void *datactx, xts_cipher_func *decfunc,
                 xts_uint128 *T, size_t length,
                 uint8_t *dst, const uint8_t *src)
{
    size_t tail = length % XTS_BLOCK_SIZE;
    xts_uint128 t_last;
    uint8_t pp[XTS_BLOCK_SIZE];

    g_assert(length >= XTS_BLOCK_SIZE);
    if (!tail) {
        xts_crypt_blocks(datactx, decfunc, T, length, dst, src);
        return;
    }
    length -= XTS_BLOCK_SIZE + tail;
    xts_crypt_blocks(datactx, decfunc, T, length, dst, src);
    src += length;
    dst += length;

    t_last = *T;                    /* T_{m-1} */
    xts_uint128_mul_x(T);           /* T_m */
    memcpy(pp, src, XTS_BLOCK_SIZE);
    xts_crypt_one(datactx, decfunc, T, pp);
    xts_uint128_mul_x(T);
    memcpy(dst, src + XTS_BLOCK_SIZE, tail);
    memcpy(dst + tail, pp + tail, XTS_BLOCK_SIZE - tail);
    memcpy(dst + XTS_BLOCK_SIZE, pp, tail);
    xts_crypt_one(datactx, decfunc, &t_last, dst);
    explicit_bzero(pp, sizeof(pp));
    explicit_bzero(&t_last, sizeof(t_last));
}
