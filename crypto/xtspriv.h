/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Helpers shared by the tweaked-block modes (xts.c, lrw.c), private to
 * crypto/. Both compute the tweaks of a whole chunk into a buffer and XOR
 * it over the data before and after one bulk ECB call.
 */
#ifndef QCRYPTO_XTSPRIV_H
#define QCRYPTO_XTSPRIV_H

#include <string.h>

#include "crypto/xts.h"

/*
 * dst[i] = a[i] ^ b[i] over nblocks 16-byte blocks; a and dst may be
 * unaligned (memcpy of 8 bytes compiles to one load or store), so the
 * loop works on 64-bit words and vectorises.
 */
static inline void xts_xor_blocks(uint8_t *dst, const uint8_t *a,
                                  const xts_uint128 *b, size_t nblocks)
{
    for (size_t i = 0; i < nblocks; i++) {
        uint64_t w0, w1;

        memcpy(&w0, a + 16 * i, 8);
        memcpy(&w1, a + 16 * i + 8, 8);
        w0 ^= b[i].u[0];
        w1 ^= b[i].u[1];
        memcpy(dst + 16 * i, &w0, 8);
        memcpy(dst + 16 * i + 8, &w1, 8);
    }
}

/*
 * dst = E(src ^ tw) ^ tw over nblocks blocks, with one bulk call of func:
 * the XEX step both modes apply once their tweaks are in tw.
 */
static inline void xts_xex_blocks(const void *ctx, xts_cipher_func *func,
                                  const xts_uint128 *tw, size_t nblocks,
                                  uint8_t *dst, const uint8_t *src)
{
    xts_xor_blocks(dst, src, tw, nblocks);
    func(ctx, nblocks * XTS_BLOCK_SIZE, dst, dst);
    xts_xor_blocks(dst, dst, tw, nblocks);
}

#endif
