/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * VAES paths: the mode template of aes-x86-template.c.inc instantiated
 * twice, with 32-byte vectors (ymm, "vaes-256": VAES + VPCLMULQDQ + AVX2, e.g.
 * Zen 3, Alder Lake) and 64-byte vectors (zmm, "vaes-512": the same plus
 * AVX-512 F/BW/VL, e.g. Zen 4/5, Ice Lake and later). Only the V_*()
 * primitives below differ between the two; the bodies are one text.
 */
#include <string.h>

#include <glib.h>

#include "aes-x86.h"

/* ---- ymm ---- */

#define VAES256_TARGET "aes,pclmul,ssse3,avx2,vaes,vpclmulqdq"

#define VW 32
#define VEC __m256i
#define VNAME(f) vaes256_##f
#define VFUNC static inline \
    __attribute__((always_inline, target(VAES256_TARGET)))
#define VENTRY static __attribute__((target(VAES256_TARGET)))

#define V_LOADU(p) _mm256_loadu_si256((const __m256i *)(p))
#define V_STOREU(p, v) _mm256_storeu_si256((__m256i *)(p), v)
#define V_BCAST(x) _mm256_broadcastsi128_si256(x)
#define V_XOR(a, b) _mm256_xor_si256(a, b)
/* No VPTERNLOGQ without AVX-512VL. */
#define V_XOR3(a, b, c) _mm256_xor_si256(_mm256_xor_si256(a, b), c)
#define V_AESENC(x, k) _mm256_aesenc_epi128(x, k)
#define V_AESENCLAST(x, k) _mm256_aesenclast_epi128(x, k)
#define V_AESDEC(x, k) _mm256_aesdec_epi128(x, k)
#define V_AESDECLAST(x, k) _mm256_aesdeclast_epi128(x, k)
#define V_ADD64(a, b) _mm256_add_epi64(a, b)
#define V_SHUFB(a, m) _mm256_shuffle_epi8(a, m)
#define V_LANE0(a) _mm256_castsi256_si128(a)
#define V_BSLLI8(a) _mm256_bslli_epi128(a, 8)
#define V_CLMUL_HI_LO(a, b) _mm256_clmulepi64_epi128(a, b, 0x01)
#define V_CLMUL_LO_LO(a, b) _mm256_clmulepi64_epi128(a, b, 0x00)
#define V_BSLLI(a, n) _mm256_bslli_epi128(a, n)
#define V_BSRLI(a, n) _mm256_bsrli_epi128(a, n)
#define V_SLLV64(a, n) _mm256_sllv_epi64(a, n)
#define V_SRLV64(a, n) _mm256_srlv_epi64(a, n)
/* Shift counts (b + lane) in both qwords of each lane, and 64 - those. */
#define V_XPOW_LEFT(b) _mm256_set_epi64x((b) + 1, (b) + 1, b, b)
#define V_XPOW_RIGHT(b) \
    _mm256_set_epi64x(63 - (b), 63 - (b), 64 - (b), 64 - (b))
#define V_XPOW_LEFT_ALL(b) _mm256_set1_epi64x(b)
#define V_XPOW_RIGHT_ALL(b) _mm256_set1_epi64x(64 - (b))
#define V_CTR_LANES(b) _mm256_set_epi64x(0, (b) + 1, 0, b)
/* A vector of VL 128-bit lanes from an array, lane 0 first. */
#define V_FROM_LANES(l) _mm256_set_m128i((l)[1], (l)[0])

#include "aes-x86-template.c.inc"

const AesX86Ops aes_x86_ops_vaes256 = {
    .name = "vaes-256",
    .ecb_encrypt = vaes256_ecb_encrypt,
    .ecb_decrypt = vaes256_ecb_decrypt,
    .cbc_encrypt = aes_x86_cbc_encrypt,
    .cbc_decrypt = vaes256_cbc_decrypt,
    .ctr_crypt = vaes256_ctr_crypt,
    .xts_encrypt = vaes256_xts_encrypt,
    .xts_decrypt = vaes256_xts_decrypt,
    .xts_encrypt_sectors = vaes256_xts_encrypt_sectors,
    .xts_decrypt_sectors = vaes256_xts_decrypt_sectors,
};

/* ---- zmm ---- */

#define VAES512_TARGET \
    "aes,pclmul,ssse3,avx2,vaes,vpclmulqdq,avx512f,avx512bw,avx512vl"

#define VW 64
#define VEC __m512i
#define VNAME(f) vaes512_##f
#define VFUNC static inline \
    __attribute__((always_inline, target(VAES512_TARGET)))
#define VENTRY static __attribute__((target(VAES512_TARGET)))

#define V_LOADU(p) _mm512_loadu_si512((const void *)(p))
#define V_STOREU(p, v) _mm512_storeu_si512((void *)(p), v)
#define V_BCAST(x) _mm512_broadcast_i32x4(x)
#define V_XOR(a, b) _mm512_xor_si512(a, b)
/* VPTERNLOGQ truth table 0x96: a ^ b ^ c in one instruction. */
#define V_XOR3(a, b, c) _mm512_ternarylogic_epi64(a, b, c, 0x96)
#define V_AESENC(x, k) _mm512_aesenc_epi128(x, k)
#define V_AESENCLAST(x, k) _mm512_aesenclast_epi128(x, k)
#define V_AESDEC(x, k) _mm512_aesdec_epi128(x, k)
#define V_AESDECLAST(x, k) _mm512_aesdeclast_epi128(x, k)
#define V_ADD64(a, b) _mm512_add_epi64(a, b)
#define V_SHUFB(a, m) _mm512_shuffle_epi8(a, m)
#define V_LANE0(a) _mm512_castsi512_si128(a)
#define V_BSLLI8(a) _mm512_bslli_epi128(a, 8)
#define V_CLMUL_HI_LO(a, b) _mm512_clmulepi64_epi128(a, b, 0x01)
#define V_CLMUL_LO_LO(a, b) _mm512_clmulepi64_epi128(a, b, 0x00)
#define V_BSLLI(a, n) _mm512_bslli_epi128(a, n)
#define V_BSRLI(a, n) _mm512_bsrli_epi128(a, n)
#define V_SLLV64(a, n) _mm512_sllv_epi64(a, n)
#define V_SRLV64(a, n) _mm512_srlv_epi64(a, n)
#define V_XPOW_LEFT(b) \
    _mm512_set_epi64((b) + 3, (b) + 3, (b) + 2, (b) + 2, \
                     (b) + 1, (b) + 1, b, b)
#define V_XPOW_RIGHT(b) \
    _mm512_set_epi64(61 - (b), 61 - (b), 62 - (b), 62 - (b), \
                     63 - (b), 63 - (b), 64 - (b), 64 - (b))
#define V_XPOW_LEFT_ALL(b) _mm512_set1_epi64(b)
#define V_XPOW_RIGHT_ALL(b) _mm512_set1_epi64(64 - (b))
#define V_CTR_LANES(b) \
    _mm512_set_epi64(0, (b) + 3, 0, (b) + 2, 0, (b) + 1, 0, b)
#define V_FROM_LANES(l) \
    _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set_m128i((l)[1], (l)[0])), \
                       _mm256_set_m128i((l)[3], (l)[2]), 1)

#include "aes-x86-template.c.inc"

const AesX86Ops aes_x86_ops_vaes512 = {
    .name = "vaes-512",
    .ecb_encrypt = vaes512_ecb_encrypt,
    .ecb_decrypt = vaes512_ecb_decrypt,
    .cbc_encrypt = aes_x86_cbc_encrypt,
    .cbc_decrypt = vaes512_cbc_decrypt,
    .ctr_crypt = vaes512_ctr_crypt,
    .xts_encrypt = vaes512_xts_encrypt,
    .xts_decrypt = vaes512_xts_decrypt,
    .xts_encrypt_sectors = vaes512_xts_encrypt_sectors,
    .xts_decrypt_sectors = vaes512_xts_decrypt_sectors,
};
