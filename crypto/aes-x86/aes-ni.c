/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * AES-NI on xmm registers: key expansion, CBC encryption (the one serial
 * mode, shared by every path) and the "aesni" path, which is the mode
 * template of aes-x86-template.c.inc instantiated with 16-byte vectors.
 */
#include <string.h>

#include <glib.h>

#include "aes-x86.h"

#define AESNI_TARGET "aes,pclmul,ssse3"

/* ---- key expansion, FIPS-197 section 5.2 ---- */

/*
 * SubWord() of one 32-bit word: AESKEYGENASSIST applies the S-box to
 * dwords 1 and 3 of its source and returns SubWord(dword 1) in dword 0.
 */
static __attribute__((target(AESNI_TARGET))) uint32_t aes_sub_word(uint32_t w)
{
    __m128i v = _mm_set_epi32(0, 0, (int)w, 0);

    return (uint32_t)_mm_cvtsi128_si32(_mm_aeskeygenassist_si128(v, 0));
}

/*
 * Words are kept little-endian, as AES-NI sees the bytes of a block:
 * byte 0 of the word is its low byte, so RotWord is a rotate right by 8
 * and Rcon goes into the low byte.
 */
static void aes_expand_words(uint32_t *w, const uint8_t *bytes, size_t nk,
                             unsigned rounds)
{
    uint8_t rcon = 0x01;        /* FIPS-197 section 5.2: x^(i/Nk - 1) */

    for (size_t i = 0; i < nk; i++) {
        uint32_t le;
        memcpy(&le, bytes + 4 * i, 4);
        w[i] = GUINT32_FROM_LE(le);
    }
    for (size_t i = nk; i < 4 * (rounds + 1); i++) {
        uint32_t temp = w[i - 1];
        if (i % nk == 0) {
            temp = aes_sub_word((temp >> 8) | (temp << 24)) ^ rcon;
            rcon = (uint8_t)((rcon << 1) ^ ((rcon & 0x80) ? 0x1b : 0));
        } else if (nk > 6 && i % nk == 4) {
            temp = aes_sub_word(temp);
        }
        w[i] = w[i - nk] ^ temp;
    }
}

/*
 * The equivalent inverse cipher (FIPS-197 section 5.3.5) that AESDEC
 * implements takes the round keys in reverse order, the inner ones passed
 * through InvMixColumns.
 */
void __attribute__((target(AESNI_TARGET)))
aes_x86_expand_key(AesX86Key *key, const uint8_t *bytes, size_t nkey)
{
    uint32_t w[4 * (AES_X86_MAX_ROUNDS + 1)];
    unsigned nr = nkey / 4 + 6;

    key->rounds = nr;
    aes_expand_words(w, bytes, nkey / 4, nr);
    for (unsigned r = 0; r <= nr; r++) {
        uint32_t le[4];
        for (unsigned j = 0; j < 4; j++) {
            le[j] = GUINT32_TO_LE(w[4 * r + j]);
        }
        key->enc[r] = _mm_loadu_si128((const __m128i *)le);
        explicit_bzero(le, sizeof(le));
    }
    key->dec[0] = key->enc[nr];
    for (unsigned r = 1; r < nr; r++) {
        key->dec[r] = _mm_aesimc_si128(key->enc[nr - r]);
    }
    key->dec[nr] = key->enc[0];
    explicit_bzero(w, sizeof(w));
}

/* ---- CBC encryption ---- */

/*
 * Each block needs the previous ciphertext, so CBC encryption runs at the
 * latency of one chain of rounds per block, whatever the vector width.
 * Nothing else may sit on that chain: the next plaintext block is XORed
 * with round key 0 off the chain and that sum is folded into the last
 * round key, so AESENCLAST directly yields C_i ^ P_(i+1) ^ K_0, the input
 * of the next block's first round. C_i itself is recovered off the chain.
 */
static inline __attribute__((always_inline, target(AESNI_TARGET))) void
cbc_enc_body(const AesX86Key *key, uint8_t *iv, const uint8_t *in,
             uint8_t *out, size_t n, const unsigned nr)
{
    __m128i rk[AES_X86_MAX_ROUNDS + 1];
    __m128i x, next = _mm_setzero_si128();

#pragma GCC unroll 15
    for (unsigned r = 0; r <= nr; r++) {
        rk[r] = key->enc[r];
    }
    x = _mm_xor_si128(_mm_loadu_si128((const __m128i *)iv),
                      _mm_xor_si128(_mm_loadu_si128((const __m128i *)in),
                                    rk[0]));
    for (size_t i = 0; i < n; i++) {
#pragma GCC unroll 13
        for (unsigned r = 1; r < nr; r++) {
            x = _mm_aesenc_si128(x, rk[r]);
        }
        next = i + 1 < n ?
            _mm_xor_si128(_mm_loadu_si128((const __m128i *)(in + 16)), rk[0]) :
            _mm_setzero_si128();
        x = _mm_aesenclast_si128(x, _mm_xor_si128(rk[nr], next));
        _mm_storeu_si128((__m128i *)out, _mm_xor_si128(x, next));
        in += 16;
        out += 16;
    }
    _mm_storeu_si128((__m128i *)iv, _mm_xor_si128(x, next));
}

void __attribute__((target(AESNI_TARGET)))
aes_x86_cbc_encrypt(const AesX86Key *key, uint8_t *iv, const uint8_t *in,
                    uint8_t *out, size_t nblocks)
{
    if (!nblocks) {
        return;
    }
    switch (key->rounds) {
    case 10:
        cbc_enc_body(key, iv, in, out, nblocks, 10);
        break;
    case 12:
        cbc_enc_body(key, iv, in, out, nblocks, 12);
        break;
    default:
        cbc_enc_body(key, iv, in, out, nblocks, 14);
        break;
    }
}

/* ---- the xmm instance of the mode template ---- */

#define VW 16
#define VEC __m128i
#define VNAME(f) aesni_##f
#define VFUNC static inline \
    __attribute__((always_inline, target(AESNI_TARGET)))
#define VENTRY static __attribute__((target(AESNI_TARGET)))

#define V_LOADU(p) _mm_loadu_si128((const __m128i *)(p))
#define V_STOREU(p, v) _mm_storeu_si128((__m128i *)(p), v)
#define V_BCAST(x) (x)
#define V_XOR(a, b) _mm_xor_si128(a, b)
#define V_XOR3(a, b, c) _mm_xor_si128(_mm_xor_si128(a, b), c)
#define V_AESENC(x, k) _mm_aesenc_si128(x, k)
#define V_AESENCLAST(x, k) _mm_aesenclast_si128(x, k)
#define V_AESDEC(x, k) _mm_aesdec_si128(x, k)
#define V_AESDECLAST(x, k) _mm_aesdeclast_si128(x, k)
#define V_ADD64(a, b) _mm_add_epi64(a, b)
#define V_SHUFB(a, m) _mm_shuffle_epi8(a, m)
#define V_LANE0(a) (a)
#define V_BSLLI8(a) _mm_slli_si128(a, 8)
#define V_CLMUL_HI_LO(a, b) _mm_clmulepi64_si128(a, b, 0x01)
#define V_CLMUL_LO_LO(a, b) _mm_clmulepi64_si128(a, b, 0x00)
#define V_BSLLI(a, n) _mm_bslli_si128(a, n)
#define V_BSRLI(a, n) _mm_bsrli_si128(a, n)
/* One lane: the shift counts are uniform, in the low qword. */
#define V_SLLV64(a, n) _mm_sll_epi64(a, n)
#define V_SRLV64(a, n) _mm_srl_epi64(a, n)
#define V_XPOW_LEFT(b) _mm_cvtsi32_si128(b)
#define V_XPOW_RIGHT(b) _mm_cvtsi32_si128(64 - (b))
#define V_XPOW_LEFT_ALL(b) V_XPOW_LEFT(b)
#define V_XPOW_RIGHT_ALL(b) V_XPOW_RIGHT(b)
#define V_CTR_LANES(b) _mm_set_epi64x(0, b)
#define V_FROM_LANES(l) ((l)[0])

#include "aes-x86-template.c.inc"

const AesX86Ops aes_x86_ops_aesni = {
    .name = "aesni",
    .ecb_encrypt = aesni_ecb_encrypt,
    .ecb_decrypt = aesni_ecb_decrypt,
    .cbc_encrypt = aes_x86_cbc_encrypt,
    .cbc_decrypt = aesni_cbc_decrypt,
    .ctr_crypt = aesni_ctr_crypt,
    .xts_encrypt = aesni_xts_encrypt,
    .xts_decrypt = aesni_xts_decrypt,
    .xts_encrypt_sectors = aesni_xts_encrypt_sectors,
    .xts_decrypt_sectors = aesni_xts_decrypt_sectors,
};
