/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * LRW mode (Liskov, Rivest, Wagner; IEEE P1619 draft, "LRW-AES") as
 * dm-crypt's lrw(aes) runs it, private to crypto/.
 *
 * The key is the block cipher's key K1 followed by a 16-byte tweak key K2.
 * The IV is a 128-bit big-endian block index I, incremented per block;
 * block I is C = E_K1(P ^ T) ^ T with T = K2 * I in GF(2^128), where the
 * 16 bytes of K2 and I are read as a big-endian number whose bit k is the
 * coefficient of x^k (Linux's "bbe" convention), reduced by
 * x^128 + x^7 + x^2 + x + 1.
 */
#ifndef QCRYPTO_LRWPRIV_H
#define QCRYPTO_LRWPRIV_H

#include "crypto/xts.h"

#define LRW_BLOCK_SIZE 16

/* Multiples of K2, kept in byte (big-endian) form, ready to XOR. */
typedef struct LRWKey {
    xts_uint128 pow[128];       /* K2 * x^i */
    /*
     * K2 * (x^i + ... + x + 1): going from I to I + 1 flips the trailing
     * ones of I and the zero above them, bits 0..i, so T(I + 1) =
     * T(I) ^ inc[i] (the LRW draft's incremental update).
     */
    xts_uint128 inc[128];
} LRWKey;

/* Where a message stands: the index of the next block and its tweak. */
typedef struct LRWTweak {
    uint64_t index_hi, index_lo;    /* I as a number */
    xts_uint128 T;                  /* K2 * I, byte form */
} LRWTweak;

void lrw_key_init(LRWKey *key, const uint8_t k2[LRW_BLOCK_SIZE]);

/* Start a message at block index iv (16 bytes, big-endian). */
void lrw_tweak_init(const LRWKey *key, const uint8_t iv[LRW_BLOCK_SIZE],
                    LRWTweak *tweak);

/*
 * Encrypt (with the cipher's encryption function) or decrypt (with its
 * decryption function): LRW is the same both ways around the block cipher.
 * length is a multiple of 16; src == dst allowed; advances tweak.
 */
void lrw_crypt(const void *ctx, xts_cipher_func *func, const LRWKey *key,
               LRWTweak *tweak, size_t length,
               uint8_t *dst, const uint8_t *src);

#endif
