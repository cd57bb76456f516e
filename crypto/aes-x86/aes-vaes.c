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

/*
 * The XTS loop for AMD Zen 4 and later, in assembly: eight zmm vectors
 * (32 blocks) per iteration, as the template's loop, but with a tweak
 * step built from what these cores run beside the AES rounds for free,
 * and with every register placed by hand.
 *
 * - The step: each lane times x^32 per iteration. x^32 moves every dword
 *   up by one, so a dword rotation (VPSHUFD) does the shift and brings
 *   the top dword c down to the bottom, where x^128 = 0x87 wants it:
 *   rot ^ c * 0x86 (0x87 less the 1 the rotation already put there),
 *   and c * 0x86 = c<<1 ^ c<<2 ^ c<<7 fits the low qword (c has 32 bits).
 *   Seven instructions: two VPSHUFD (one zero-masked to keep c alone),
 *   two VPADDQ (c<<1, c<<2), one VPSLLQ, two XORs. On Zen 4 none of them
 *   takes an AES pipe (tests/benchmark-aes-issue: up to eight of them
 *   per eight VAESENC zmm cost nothing), while the template's step has a
 *   VPCLMULQDQ, which costs one AES round on Zen 4 (0.84 on Zen 5). On
 *   Intel the qword shift runs on the AES port: the template's loop
 *   stays there.
 * - What the registers hold: s = t ^ k_last, the tweak XOR-ed with the
 *   last round key, not t. AESENCLAST(x, k_last) ^ t = AESENCLAST(x, s),
 *   so the last round takes s as its key and the XOR after it is gone;
 *   the first XOR is x ^ s ^ (k0 ^ k_last), one VPTERNLOGQ with a memory
 *   operand, as before. The step is linear: s * x^32 ^ cst with cst =
 *   k_last * x^32 ^ k_last (a memory operand of the step's last
 *   VPTERNLOGQ, so the step has no more instructions than before). That
 *   is one XOR per vector and iteration fewer than keeping t (AES-128 on
 *   Zen 4: 4 KiB 89.8% -> 90.8%, 64 KiB 94.4% -> 96.4% of the limit;
 *   what is left of AES-128's gap is in docs/aes.md).
 * - Registers: data zmm0-7, s zmm8-15, round keys 1-13 zmm16-28, scratch
 *   zmm29-31; k1 selects dword 0 of each lane. As each vector's s is
 *   stepped in the middle of an iteration, its old value goes to u (one
 *   store per vector), which the last round reads from memory. So the
 *   tweaks are advanced in place, nothing spills, and the 32 registers
 *   hold the whole loop. Written in C, the same loop spilled data
 *   vectors and tweaks every iteration and ran no faster than the
 *   template's (docs/aes.md).
 * - Placement: one vector's step after each of rounds 2 to 9, so the
 *   steps trickle in beside the rounds (all eight at the top, or from
 *   round 1 on, measured slower: 86% and 94% of the limit at 64 KiB, this
 *   placement 96.5%, docs/aes.md). AES-128 has rounds 1 to 9, enough.
 * - The last iteration has no step (its rounds take s from the
 *   registers) and leaves s there for the tail. u, k0 ^ k_last and cst
 *   are key material and are wiped before the loop returns.
 */
#define XZ_LOAD(v, tw)                                                  \
    "vmovdqu64 " #v "*64(%[in]), %%zmm" #v "\n\t"                       \
    "vpternlogq $0x96, %[rk0x], %%zmm" #tw ", %%zmm" #v "\n\t"
#define XZ_ROUND(op, k)                                                 \
    op " %%zmm" #k ", %%zmm0, %%zmm0\n\t"                               \
    op " %%zmm" #k ", %%zmm1, %%zmm1\n\t"                               \
    op " %%zmm" #k ", %%zmm2, %%zmm2\n\t"                               \
    op " %%zmm" #k ", %%zmm3, %%zmm3\n\t"                               \
    op " %%zmm" #k ", %%zmm4, %%zmm4\n\t"                               \
    op " %%zmm" #k ", %%zmm5, %%zmm5\n\t"                               \
    op " %%zmm" #k ", %%zmm6, %%zmm6\n\t"                               \
    op " %%zmm" #k ", %%zmm7, %%zmm7\n\t"
/* u[v] = s; then s = s * x^32 ^ cst (see above). */
#define XZ_STEP(v, tw)                                                  \
    "vmovdqa64 %%zmm" #tw ", " #v "*64+%[u]\n\t"                        \
    "vpshufd $0x93, %%zmm" #tw ", %%zmm29%{%%k1%}%{z%}\n\t"             \
    "vpshufd $0x93, %%zmm" #tw ", %%zmm" #tw "\n\t"                     \
    "vpaddq %%zmm29, %%zmm29, %%zmm30\n\t"                              \
    "vpaddq %%zmm30, %%zmm30, %%zmm31\n\t"                              \
    "vpternlogq $0x96, %%zmm31, %%zmm30, %%zmm" #tw "\n\t"              \
    "vpsllq $7, %%zmm29, %%zmm29\n\t"                                   \
    "vpternlogq $0x96, %[cst], %%zmm29, %%zmm" #tw "\n\t"
#define XZ_LAST(oplast, v)                                              \
    oplast " " #v "*64+%[u], %%zmm" #v ", %%zmm" #v "\n\t"              \
    "vmovdqu64 %%zmm" #v ", " #v "*64(%[out])\n\t"
/* The last iteration: no step, the last round's key is s itself. */
#define XZ_FINAL(oplast, v, tw)                                         \
    oplast " %%zmm" #tw ", %%zmm" #v ", %%zmm" #v "\n\t"                \
    "vmovdqu64 %%zmm" #v ", " #v "*64(%[out])\n\t"
#define XZ_WIPE(v) "vmovdqa64 %%zmm29, " #v "*64+%[u]\n\t"
#define XZ_KEY(r, reg) "vbroadcasti32x4 " #r "*16(%[keys]), %%zmm" #reg "\n\t"
#define XZ_LOAD_ALL                                                     \
    XZ_LOAD(0, 8) XZ_LOAD(1, 9) XZ_LOAD(2, 10) XZ_LOAD(3, 11)           \
    XZ_LOAD(4, 12) XZ_LOAD(5, 13) XZ_LOAD(6, 14) XZ_LOAD(7, 15)
/* The rounds AES-192 and AES-256 have beyond AES-128's. */
#define XZ_ROUNDS_HIGH(op)                                              \
    ".if %c[nr] >= 12\n\t"                                              \
    XZ_ROUND(op, 25) XZ_ROUND(op, 26)                                   \
    ".endif\n\t"                                                        \
    ".if %c[nr] >= 14\n\t"                                              \
    XZ_ROUND(op, 27) XZ_ROUND(op, 28)                                   \
    ".endif\n\t"
#define XZ_LOOP(op, oplast)                                             \
    "movl $0x1111, %%eax\n\t"                                           \
    "kmovw %%eax, %%k1\n\t"                                             \
    XZ_KEY(1, 16) XZ_KEY(2, 17) XZ_KEY(3, 18) XZ_KEY(4, 19)             \
    XZ_KEY(5, 20) XZ_KEY(6, 21) XZ_KEY(7, 22) XZ_KEY(8, 23)             \
    XZ_KEY(9, 24)                                                       \
    ".if %c[nr] >= 12\n\t"                                              \
    XZ_KEY(10, 25) XZ_KEY(11, 26)                                       \
    ".endif\n\t"                                                        \
    ".if %c[nr] >= 14\n\t"                                              \
    XZ_KEY(12, 27) XZ_KEY(13, 28)                                       \
    ".endif\n\t"                                                        \
    "dec %[iters]\n\t"                                                  \
    "jz 2f\n\t"                                                         \
    "1:\n\t"                                                            \
    XZ_LOAD_ALL                                                         \
    XZ_ROUND(op, 16)                                                    \
    XZ_ROUND(op, 17) XZ_STEP(0, 8)                                      \
    XZ_ROUND(op, 18) XZ_STEP(1, 9)                                      \
    XZ_ROUND(op, 19) XZ_STEP(2, 10)                                     \
    XZ_ROUND(op, 20) XZ_STEP(3, 11)                                     \
    XZ_ROUND(op, 21) XZ_STEP(4, 12)                                     \
    XZ_ROUND(op, 22) XZ_STEP(5, 13)                                     \
    XZ_ROUND(op, 23) XZ_STEP(6, 14)                                     \
    XZ_ROUND(op, 24) XZ_STEP(7, 15)                                     \
    XZ_ROUNDS_HIGH(op)                                                  \
    XZ_LAST(oplast, 0) XZ_LAST(oplast, 1) XZ_LAST(oplast, 2)            \
    XZ_LAST(oplast, 3) XZ_LAST(oplast, 4) XZ_LAST(oplast, 5)            \
    XZ_LAST(oplast, 6) XZ_LAST(oplast, 7)                               \
    "add $512, %[in]\n\t"                                               \
    "add $512, %[out]\n\t"                                              \
    "dec %[iters]\n\t"                                                  \
    "jnz 1b\n\t"                                                        \
    /* u holds tweak ^ round key: wiped. */                             \
    "vpxord %%zmm29, %%zmm29, %%zmm29\n\t"                              \
    XZ_WIPE(0) XZ_WIPE(1) XZ_WIPE(2) XZ_WIPE(3)                         \
    XZ_WIPE(4) XZ_WIPE(5) XZ_WIPE(6) XZ_WIPE(7)                         \
    "2:\n\t"                                                            \
    XZ_LOAD_ALL                                                         \
    XZ_ROUND(op, 16) XZ_ROUND(op, 17) XZ_ROUND(op, 18)                  \
    XZ_ROUND(op, 19) XZ_ROUND(op, 20) XZ_ROUND(op, 21)                  \
    XZ_ROUND(op, 22) XZ_ROUND(op, 23) XZ_ROUND(op, 24)                  \
    XZ_ROUNDS_HIGH(op)                                                  \
    XZ_FINAL(oplast, 0, 8) XZ_FINAL(oplast, 1, 9)                       \
    XZ_FINAL(oplast, 2, 10) XZ_FINAL(oplast, 3, 11)                     \
    XZ_FINAL(oplast, 4, 12) XZ_FINAL(oplast, 5, 13)                     \
    XZ_FINAL(oplast, 6, 14) XZ_FINAL(oplast, 7, 15)                     \
    /* Both are round key material too. */                              \
    "vpxord %%zmm30, %%zmm30, %%zmm30\n\t"                              \
    "vmovdqa64 %%zmm30, %[rk0x]\n\t"                                     \
    "vmovdqa64 %%zmm30, %[cst]\n\t"
#define XZ_OPERANDS                                                     \
    : [in] "+r"(in), [out] "+r"(out), [iters] "+r"(iters), [u] "=m"(u), \
      [rk0x] "+m"(rk0x), [cst] "+m"(cst),                               \
      "+v"(t0), "+v"(t1), "+v"(t2), "+v"(t3), "+v"(t4), "+v"(t5),       \
      "+v"(t6), "+v"(t7)                                                \
    : [nr] "i"(nr),                                                     \
      [keys] "r"(enc ? key->enc : key->dec)                             \
    : "memory", "cc", "rax", "k1",                                      \
      "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7",   \
      "xmm16", "xmm17", "xmm18", "xmm19", "xmm20", "xmm21", "xmm22",    \
      "xmm23", "xmm24", "xmm25", "xmm26", "xmm27", "xmm28", "xmm29",    \
      "xmm30", "xmm31"

/* Each lane times x^32, the loop's step (the template's, defined below). */
VFUNC __m512i vaes512_mul_xpow_bytes(__m512i t);

/*
 * iters >= 1 iterations of 8 vectors from in to out, tweaks t (8
 * vectors; on return, the last iteration's), round keys 0 and nr
 * (broadcast) at rk0 and rkl, key the schedule. The tweaks come and go
 * in the registers the loop wants them in (local register variables),
 * and the loop broadcasts round keys 1 to nr - 1 into its registers from
 * the key schedule itself: nothing takes a trip through memory but
 * k0 ^ k_last and cst (memory operands); stores are what a 512-byte call
 * is short of (with the tweaks and all keys through the stack, 512-byte
 * calls ran at 60% of the template's speed). nr is a constant here:
 * every caller is instantiated per round count, and the assembler's .if
 * picks the rounds.
 */
static inline __attribute__((always_inline, target(VAES512_TARGET)))
void vaes512_xts_loop_zen(const AesX86Key *key, __m512i *t,
                          const __m512i *rk0, const __m512i *rkl,
                          const uint8_t *in, uint8_t *out, size_t iters,
                          const unsigned nr, const bool enc)
{
    const __m512i kl = *rkl;
    __m512i rk0x = _mm512_xor_si512(*rk0, kl);
    /* Only a loop of two or more iterations steps (a 512-byte call: none). */
    __m512i cst = iters > 1 ? _mm512_xor_si512(vaes512_mul_xpow_bytes(kl), kl)
                            : kl;
    __m512i u[8];
    register __m512i t0 __asm__("zmm8") = _mm512_xor_si512(t[0], kl);
    register __m512i t1 __asm__("zmm9") = _mm512_xor_si512(t[1], kl);
    register __m512i t2 __asm__("zmm10") = _mm512_xor_si512(t[2], kl);
    register __m512i t3 __asm__("zmm11") = _mm512_xor_si512(t[3], kl);
    register __m512i t4 __asm__("zmm12") = _mm512_xor_si512(t[4], kl);
    register __m512i t5 __asm__("zmm13") = _mm512_xor_si512(t[5], kl);
    register __m512i t6 __asm__("zmm14") = _mm512_xor_si512(t[6], kl);
    register __m512i t7 __asm__("zmm15") = _mm512_xor_si512(t[7], kl);

    if (enc) {
        __asm__ volatile(XZ_LOOP("vaesenc", "vaesenclast") XZ_OPERANDS);
    } else {
        __asm__ volatile(XZ_LOOP("vaesdec", "vaesdeclast") XZ_OPERANDS);
    }
    /*
     * Read t0..t7 before anything else: a local register variable is
     * pinned to its register only as an asm operand, and vector code
     * placed here may take zmm8-15 for itself (a wipe loop once did, and
     * the loop returned wrong tweaks).
     */
    t[0] = _mm512_xor_si512(t0, kl);
    t[1] = _mm512_xor_si512(t1, kl);
    t[2] = _mm512_xor_si512(t2, kl);
    t[3] = _mm512_xor_si512(t3, kl);
    t[4] = _mm512_xor_si512(t4, kl);
    t[5] = _mm512_xor_si512(t5, kl);
    t[6] = _mm512_xor_si512(t6, kl);
    t[7] = _mm512_xor_si512(t7, kl);
}
#define V_XTS_LOOP_ZEN vaes512_xts_loop_zen

#include "aes-x86-template.c.inc"

/* The two zmm tables differ in their XTS loop only (suffix _zen or none). */
#define VAES512_OPS(xts)                                                \
    {                                                                   \
        .name = "vaes-512",                                             \
        .ecb_encrypt = vaes512_ecb_encrypt,                             \
        .ecb_decrypt = vaes512_ecb_decrypt,                             \
        .cbc_encrypt = aes_x86_cbc_encrypt,                             \
        .cbc_decrypt = vaes512_cbc_decrypt,                             \
        .ctr_crypt = vaes512_ctr_crypt,                                 \
        .xts_encrypt = vaes512_xts_encrypt##xts,                        \
        .xts_decrypt = vaes512_xts_decrypt##xts,                        \
        .xts_encrypt_sectors = vaes512_xts_encrypt_sectors##xts,        \
        .xts_decrypt_sectors = vaes512_xts_decrypt_sectors##xts,        \
    }

const AesX86Ops aes_x86_ops_vaes512 = VAES512_OPS();
const AesX86Ops aes_x86_ops_vaes512_zen = VAES512_OPS(_zen);
