/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * LRW mode as dm-crypt's lrw(aes) runs it (see lrwpriv.h).
 *
 * The multiplication K2 * I is only done in full at lrw_tweak_init(), as an
 * XOR of the precomputed K2 * x^k for the bits k set in I. From one block
 * to the next the tweak changes by K2 times the bits that the increment
 * flips, a precomputed value too, so each block costs two XORs. As in
 * crypto/xts.c, the tweaks of a chunk of blocks are written to a buffer,
 * XORed in, run through one multi-block ECB call, and XORed again.
 */
#include <string.h>

#include "lrwpriv.h"
#include "xtspriv.h"

#define LRW_CHUNK_BLOCKS 256

static inline xts_uint128 lrw_to_bytes(uint64_t hi, uint64_t lo)
{
    xts_uint128 r;

    r.u[0] = GUINT64_TO_BE(hi);
    r.u[1] = GUINT64_TO_BE(lo);
    return r;
}

static inline void lrw_xor(xts_uint128 *dst, const xts_uint128 *a)
{
    dst->u[0] ^= a->u[0];
    dst->u[1] ^= a->u[1];
}

void lrw_key_init(LRWKey *key, const uint8_t k2[LRW_BLOCK_SIZE])
{
    uint64_t hi, lo;
    xts_uint128 sum = { .u = { 0, 0 } };

    memcpy(&hi, k2, 8);
    memcpy(&lo, k2 + 8, 8);
    hi = GUINT64_FROM_BE(hi);
    lo = GUINT64_FROM_BE(lo);
    for (int i = 0; i < 128; i++) {
        /* x^128 = x^7 + x^2 + x + 1: 0x87 (IEEE P1619 draft, LRW-AES). */
        uint64_t carry = (uint64_t)((int64_t)hi >> 63) & 0x87;

        key->pow[i] = lrw_to_bytes(hi, lo);
        lrw_xor(&sum, &key->pow[i]);
        key->inc[i] = sum;
        hi = (hi << 1) | (lo >> 63);
        lo = (lo << 1) ^ carry;
    }
}

void lrw_tweak_init(const LRWKey *key, const uint8_t iv[LRW_BLOCK_SIZE],
                    LRWTweak *tweak)
{
    uint64_t hi, lo;

    memcpy(&hi, iv, 8);
    memcpy(&lo, iv + 8, 8);
    tweak->index_hi = hi = GUINT64_FROM_BE(hi);
    tweak->index_lo = lo = GUINT64_FROM_BE(lo);
    tweak->T.u[0] = tweak->T.u[1] = 0;
    /* Visit the set bits only: sector-sized indices have few. */
    for (; lo; lo &= lo - 1) {
        lrw_xor(&tweak->T, &key->pow[__builtin_ctzll(lo)]);
    }
    for (; hi; hi &= hi - 1) {
        lrw_xor(&tweak->T, &key->pow[64 + __builtin_ctzll(hi)]);
    }
}

/*
 * Write the tweaks of the next n blocks to tw and step the index past
 * them. Going from I to I + 1 flips bits 0..k of I, where k counts its
 * trailing ones, so the tweak changes by key->inc[k].
 */
static void lrw_tweaks(const LRWKey *key, LRWTweak *tweak,
                       xts_uint128 *tw, size_t n)
{
    uint64_t lo = tweak->index_lo, hi = tweak->index_hi;
    uint64_t t0 = tweak->T.u[0], t1 = tweak->T.u[1];

    for (size_t i = 0; i < n; i++) {
        unsigned k;

        tw[i].u[0] = t0;
        tw[i].u[1] = t1;
        if (G_LIKELY(~lo)) {
            k = __builtin_ctzll(~lo);
        } else if (~hi) {
            k = 64 + __builtin_ctzll(~hi);
        } else {
            k = 127;            /* all ones wraps round to zero */
        }
        t0 ^= key->inc[k].u[0];
        t1 ^= key->inc[k].u[1];
        lo++;
        hi += lo == 0;
    }
    tweak->index_lo = lo;
    tweak->index_hi = hi;
    tweak->T.u[0] = t0;
    tweak->T.u[1] = t1;
}

void lrw_crypt(const void *ctx, xts_cipher_func *func, const LRWKey *key,
               LRWTweak *tweak, size_t length,
               uint8_t *dst, const uint8_t *src)
{
    xts_uint128 tw[LRW_CHUNK_BLOCKS];
    size_t used = MIN(length / LRW_BLOCK_SIZE, LRW_CHUNK_BLOCKS);

    g_assert(length % LRW_BLOCK_SIZE == 0);
    while (length) {
        size_t n = MIN(length / LRW_BLOCK_SIZE, LRW_CHUNK_BLOCKS);
        size_t bytes = n * LRW_BLOCK_SIZE;

        lrw_tweaks(key, tweak, tw, n);
        xts_xex_blocks(ctx, func, tw, n, dst, src);
        length -= bytes;
        src += bytes;
        dst += bytes;
    }
    explicit_bzero(tw, used * sizeof(tw[0]));
}
