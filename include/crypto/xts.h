/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * XTS mode (IEEE 1619-2007) over any 128-bit block cipher.
 *
 * The tweak is an xts_uint128: the same 16 bytes seen as bytes or as two
 * 64-bit little-endian words, so multiplication by x in GF(2^128) is a
 * shift and a conditional XOR on two words rather than a loop over bytes.
 *
 * The running tweak lives with the caller, so one data unit may be handed
 * over in several calls: xts_tweak_init() computes T = E_K2(iv), then each
 * xts_encrypt()/xts_decrypt() call consumes its blocks' tweaks and leaves T
 * at the tweak of the next block. A call whose length is not a multiple of
 * 16 uses ciphertext stealing and ends the data unit.
 *
 * Speed comes from working in bulk: the tweaks of many blocks are computed
 * into a buffer, XORed in, run through one multi-block ECB call of the
 * underlying cipher, and XORed again.
 */
#ifndef QCRYPTO_XTS_H
#define QCRYPTO_XTS_H

#include <stddef.h>
#include <stdint.h>

#include <glib.h>

#define XTS_BLOCK_SIZE 16

typedef union {
    uint8_t b[XTS_BLOCK_SIZE];
    uint64_t u[2];              /* u[0] = bytes 0..7, little-endian */
} xts_uint128;

/*
 * ECB over length bytes (a multiple of 16), nettle_cipher_func's shape:
 * the block layer hands whole runs of blocks to one call.
 */
typedef void xts_cipher_func(const void *ctx, size_t length,
                             uint8_t *dst, const uint8_t *src);

/* T = T * x in GF(2^128), IEEE 1619 polynomial x^128 + x^7 + x^2 + x + 1. */
static inline void xts_uint128_mul_x(xts_uint128 *t)
{
    uint64_t lo = GUINT64_FROM_LE(t->u[0]);
    uint64_t hi = GUINT64_FROM_LE(t->u[1]);
    uint64_t carry = (uint64_t)((int64_t)hi >> 63) & 0x87;

    t->u[1] = GUINT64_TO_LE((hi << 1) | (lo >> 63));
    t->u[0] = GUINT64_TO_LE((lo << 1) ^ carry);
}

/* T = E_tweakctx(iv): the tweak of the first block of a data unit. */
void xts_tweak_init(const void *tweakctx, xts_cipher_func *encfunc,
                    const uint8_t iv[XTS_BLOCK_SIZE], xts_uint128 *T);

/* length >= 16; src == dst allowed. Advances T (see above). */
void xts_encrypt(const void *datactx, xts_cipher_func *encfunc,
                 xts_uint128 *T, size_t length,
                 uint8_t *dst, const uint8_t *src);
void xts_decrypt(const void *datactx, xts_cipher_func *decfunc,
                 xts_uint128 *T, size_t length,
                 uint8_t *dst, const uint8_t *src);

#endif
