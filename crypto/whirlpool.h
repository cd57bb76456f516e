/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Whirlpool (ISO/IEC 10118-3:2004, the final version with the Whirlpool
 * S-box of NESSIE's final round), in nettle's calling shape (private to
 * crypto/; callers use it through crypto/hash.h).
 */
#ifndef QCRYPTO_WHIRLPOOL_H
#define QCRYPTO_WHIRLPOOL_H

#include <stddef.h>
#include <stdint.h>

#define WHIRLPOOL_DIGEST_SIZE 64
#define WHIRLPOOL_BLOCK_SIZE 64

struct qcrypto_whirlpool_ctx {
    uint64_t state[8];          /* chaining value, rows as big-endian words */
    uint64_t count;             /* full blocks compressed so far */
    unsigned index;             /* bytes waiting in block[] */
    uint8_t block[WHIRLPOOL_BLOCK_SIZE];
};

void qcrypto_whirlpool_init(struct qcrypto_whirlpool_ctx *ctx);
void qcrypto_whirlpool_update(struct qcrypto_whirlpool_ctx *ctx,
                              size_t length, const uint8_t *data);
/*
 * Write the first length (<= 64) bytes of the digest, as nettle's digest
 * functions do, and start a new message.
 */
void qcrypto_whirlpool_digest(struct qcrypto_whirlpool_ctx *ctx,
                              size_t length, uint8_t *digest);

#endif
