/*
 * The mode bodies of the built-in AES, written once for any vector width.
 *
 * This file is included once per width: by aes-ni.c with 16-byte vectors
 * (xmm, the "aesni" path) and by aes-vaes.c with 32- and 64-byte vectors
 * (ymm "vaes-256" and zmm "vaes-512"). The including file defines the
 * vector type VEC, its width VW in bytes, VNAME() to name the functions of
 * this width, the target attributes, and a handful of V_*() primitives
 * (load, AES round, XOR, shifts, carry-less multiply), each a single
 * instruction of that width. Everything below is width-agnostic: a vector
 * holds VL = VW / 16 AES blocks, one per 128-bit lane, and VAESENC runs
 * one AES round on every lane at once.
 *
 * Why the code has this shape (the same tricks on every width):
 *
 * - Round keys in registers. A body is instantiated per round count
 *   (10, 12, 14) so the round loop unrolls completely and each round key,
 *   broadcast to all lanes once per call, lives in its own register.
 *
 * - Eight vectors in flight. An AES round has a latency of several cycles
 *   but the CPU accepts one or two rounds per cycle (two AES units on Zen
 *   4/5 and recent Intel cores). A lone block would leave the units idle
 *   most of the time, so every parallel mode works on eight independent
 *   vectors per loop iteration, round by round, which hides the latency:
 *   8 x VL blocks (128, 256 or 512 bytes) per iteration.
 *
 * - XTS tweaks: block j of a data unit is encrypted as
 *   E(P_j ^ T_j) ^ T_j with T_j = T_0 * x^j in GF(2^128) (IEEE 1619-2007
 *   section 5.3.1). Lane i of vector v carries T_0 * x^(v*VL + i). The
 *   first XOR is folded with round key 0 into one three-way XOR
 *   (vpternlogq on zmm), the second into the last round key
 *   (AESENCLAST(x, K_last ^ T) = AESENCLAST(x, K_last) ^ T), so the
 *   tweak costs no extra step on the critical path.
 *
 * - Advancing tweaks: multiplying a lane by x^n (n < 58) is a 128-bit
 *   shift left by n plus a reduction of the n bits shifted out of the
 *   top: those bits times the polynomial's low part 0x87 (x^7+x^2+x+1).
 *   With 64-bit lanes: shift both qwords left by n, carry the top n bits
 *   of the low qword into the high one (a byte shift of the right-shifted
 *   value), and one carry-less multiply (VPCLMULQDQ) of the high qword's
 *   top bits by 0x87 gives the reduction, XORed into the low qword. Five
 *   independent instructions per vector, all off the AES units' chain;
 *   each vector steps by x^(8*VL) per iteration, so the eight tweak
 *   vectors never wait on each other.
 *
 * - CBC decryption chains through the ciphertext, which is all known up
 *   front: the "previous block" vector for the blocks at offset o is
 *   simply an unaligned load at o - 16. Working from the end of the buffer
 *   to its start keeps that true in place (those blocks are not yet
 *   overwritten). The XOR with it is folded into the last round key.
 *
 * - CTR keeps the counter as two little-endian 64-bit numbers per lane
 *   and byte-swaps (VPSHUFB) when forming the blocks; a run is split where
 *   the low 64 bits would wrap, so vectors only add to the low qword. The
 *   XOR with the data is folded into the last round key.
 *
 * - Tails: fewer than VL blocks, and XTS ciphertext stealing, run one
 *   block at a time on xmm registers, in this same file.
 *
 * - Sectors: the XTS multi-sector entry computes the first tweak of
 *   32 sectors at once (E_K2 of their IVs, one eight-vector ECB pass
 *   with all lanes busy) and then runs the sectors, each an independent
 *   chain. Nothing ties one sector to the next, so the out-of-order core
 *   starts the next sector's tweak arithmetic and first rounds while the
 *   current sector's last rounds are still in the AES units: 512-byte
 *   sectors (one 8 x 64-byte iteration on zmm) run almost as fast as long
 *   ones. A call for a single sector encrypts its one tweak inline on xmm,
 *   fully unrolled, rather than through the ECB entry.
 */

#define VL (VW / 16)            /* AES blocks per vector */
#define VN 8                    /* vectors in flight per iteration */

/* ---- one block on xmm, for tails ---- */

VFUNC __m128i VNAME(block_enc)(const AesX86Key *key, __m128i x)
{
    x = _mm_xor_si128(x, key->enc[0]);
    for (unsigned r = 1; r < key->rounds; r++) {
        x = _mm_aesenc_si128(x, key->enc[r]);
    }
    return _mm_aesenclast_si128(x, key->enc[key->rounds]);
}

VFUNC __m128i VNAME(block_dec)(const AesX86Key *key, __m128i x)
{
    x = _mm_xor_si128(x, key->dec[0]);
    for (unsigned r = 1; r < key->rounds; r++) {
        x = _mm_aesdec_si128(x, key->dec[r]);
    }
    return _mm_aesdeclast_si128(x, key->dec[key->rounds]);
}

/* The same with the round count known at compile time: fully unrolled. */
VFUNC __m128i VNAME(block_enc_nr)(const AesX86Key *key, __m128i x,
                                  const unsigned nr)
{
    x = _mm_xor_si128(x, key->enc[0]);
#pragma GCC unroll 13
    for (unsigned r = 1; r < nr; r++) {
        x = _mm_aesenc_si128(x, key->enc[r]);
    }
    return _mm_aesenclast_si128(x, key->enc[nr]);
}

VFUNC __m128i VNAME(block_crypt)(const AesX86Key *key, __m128i x, bool enc)
{
    return enc ? VNAME(block_enc)(key, x) : VNAME(block_dec)(key, x);
}

VFUNC __m128i VNAME(mul_x)(__m128i t)
{
    xts_uint128 u;

    _mm_storeu_si128((__m128i *)u.b, t);
    xts_uint128_mul_x(&u);
    return _mm_loadu_si128((const __m128i *)u.b);
}

/* ---- rounds on nv vectors ---- */

VFUNC void VNAME(load_keys)(VEC *rk, const __m128i *keys, const unsigned nr)
{
#pragma GCC unroll 15
    for (unsigned r = 0; r <= nr; r++) {
        rk[r] = V_BCAST(keys[r]);
    }
}

/* Rounds 1 .. nr-1; the caller does round 0 and the last round. */
VFUNC void VNAME(middle_rounds)(VEC *x, const VEC *rk, const unsigned nr,
                                const unsigned nv, const bool enc)
{
#pragma GCC unroll 13
    for (unsigned r = 1; r < nr; r++) {
#pragma GCC unroll 8
        for (unsigned v = 0; v < nv; v++) {
            x[v] = enc ? V_AESENC(x[v], rk[r]) : V_AESDEC(x[v], rk[r]);
        }
    }
}

VFUNC VEC VNAME(last_round)(VEC x, VEC k, const bool enc)
{
    return enc ? V_AESENCLAST(x, k) : V_AESDECLAST(x, k);
}

/* ---- ECB ---- */

VFUNC void VNAME(ecb_body)(const AesX86Key *key, const uint8_t *in,
                           uint8_t *out, size_t n, const unsigned nr,
                           const bool enc)
{
    VEC rk[AES_X86_MAX_ROUNDS + 1];

    VNAME(load_keys)(rk, enc ? key->enc : key->dec, nr);
    while (n >= VN * VL) {
        VEC x[VN];
#pragma GCC unroll 8
        for (unsigned v = 0; v < VN; v++) {
            x[v] = V_XOR(V_LOADU(in + v * VW), rk[0]);
        }
        VNAME(middle_rounds)(x, rk, nr, VN, enc);
#pragma GCC unroll 8
        for (unsigned v = 0; v < VN; v++) {
            V_STOREU(out + v * VW, VNAME(last_round)(x[v], rk[nr], enc));
        }
        in += VN * VW;
        out += VN * VW;
        n -= VN * VL;
    }
    while (n >= VL) {
        VEC x = V_XOR(V_LOADU(in), rk[0]);
        VNAME(middle_rounds)(&x, rk, nr, 1, enc);
        V_STOREU(out, VNAME(last_round)(x, rk[nr], enc));
        in += VW;
        out += VW;
        n -= VL;
    }
    for (; n; n--, in += 16, out += 16) {
        __m128i x = _mm_loadu_si128((const __m128i *)in);
        _mm_storeu_si128((__m128i *)out, VNAME(block_crypt)(key, x, enc));
    }
}

#define AES_X86_BY_ROUNDS(key, body, ...)                       \
    do {                                                        \
        switch ((key)->rounds) {                                \
        case 10:                                                \
            body(__VA_ARGS__, 10);                              \
            break;                                              \
        case 12:                                                \
            body(__VA_ARGS__, 12);                              \
            break;                                              \
        default:                                                \
            body(__VA_ARGS__, 14);                              \
            break;                                              \
        }                                                       \
    } while (0)

#define ECB_ENC(k, i, o, n, nr) VNAME(ecb_body)(k, i, o, n, nr, true)
#define ECB_DEC(k, i, o, n, nr) VNAME(ecb_body)(k, i, o, n, nr, false)

VENTRY void VNAME(ecb_encrypt)(const AesX86Key *key, const uint8_t *in,
                               uint8_t *out, size_t nblocks)
{
    AES_X86_BY_ROUNDS(key, ECB_ENC, key, in, out, nblocks);
}

VENTRY void VNAME(ecb_decrypt)(const AesX86Key *key, const uint8_t *in,
                               uint8_t *out, size_t nblocks)
{
    AES_X86_BY_ROUNDS(key, ECB_DEC, key, in, out, nblocks);
}

#undef ECB_ENC
#undef ECB_DEC

/* ---- CBC decryption: from the end, the previous block an unaligned load */

VFUNC void VNAME(cbc_dec_body)(const AesX86Key *key, uint8_t *iv,
                               const uint8_t *in, uint8_t *out, size_t n,
                               const unsigned nr)
{
    VEC rk[AES_X86_MAX_ROUNDS + 1];
    __m128i next_iv, prev;
    size_t o = n * 16;      /* blocks [o/16, n) are done */

    VNAME(load_keys)(rk, key->dec, nr);
    next_iv = _mm_loadu_si128((const __m128i *)(in + o - 16));
    /* Vectors that do not touch block 0, whose predecessor is the IV. */
    while (o >= VN * VW + 16) {
        VEC x[VN], p[VN];
        o -= VN * VW;
#pragma GCC unroll 8
        for (unsigned v = 0; v < VN; v++) {
            x[v] = V_XOR(V_LOADU(in + o + v * VW), rk[0]);
            p[v] = V_LOADU(in + o + v * VW - 16);
        }
        VNAME(middle_rounds)(x, rk, nr, VN, false);
#pragma GCC unroll 8
        for (unsigned v = 0; v < VN; v++) {
            V_STOREU(out + o + v * VW,
                     V_AESDECLAST(x[v], V_XOR(rk[nr], p[v])));
        }
    }
    while (o >= VW + 16) {
        VEC x, p;
        o -= VW;
        x = V_XOR(V_LOADU(in + o), rk[0]);
        p = V_LOADU(in + o - 16);
        VNAME(middle_rounds)(&x, rk, nr, 1, false);
        V_STOREU(out + o, V_AESDECLAST(x, V_XOR(rk[nr], p)));
    }
    for (o -= 16; o; o -= 16) {
        __m128i c = _mm_loadu_si128((const __m128i *)(in + o));
        prev = _mm_loadu_si128((const __m128i *)(in + o - 16));
        _mm_storeu_si128((__m128i *)(out + o),
                         _mm_xor_si128(VNAME(block_dec)(key, c), prev));
    }
    prev = _mm_loadu_si128((const __m128i *)iv);
    _mm_storeu_si128((__m128i *)out,
                     _mm_xor_si128(VNAME(block_dec)(
                         key, _mm_loadu_si128((const __m128i *)in)), prev));
    _mm_storeu_si128((__m128i *)iv, next_iv);
}

#define CBC_DEC(k, iv, i, o, n, nr) VNAME(cbc_dec_body)(k, iv, i, o, n, nr)

VENTRY void VNAME(cbc_decrypt)(const AesX86Key *key, uint8_t *iv,
                               const uint8_t *in, uint8_t *out,
                               size_t nblocks)
{
    if (nblocks) {
        AES_X86_BY_ROUNDS(key, CBC_DEC, key, iv, in, out, nblocks);
    }
}

#undef CBC_DEC

/* ---- CTR ---- */

/* n blocks from counter hi:lo, where lo + n does not wrap. */
VFUNC void VNAME(ctr_run)(const AesX86Key *key, const VEC *rk,
                          uint64_t hi, uint64_t lo, const uint8_t *in,
                          uint8_t *out, size_t n, const unsigned nr)
{
    const VEC bswap = V_BCAST(_mm_set_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9,
                                           10, 11, 12, 13, 14, 15));
    const VEC step = V_BCAST(_mm_set_epi64x(0, VN * VL));
    VEC base = V_ADD64(V_BCAST(_mm_set_epi64x(hi, lo)), V_CTR_LANES(0));

    while (n >= VN * VL) {
        VEC x[VN];
#pragma GCC unroll 8
        for (unsigned v = 0; v < VN; v++) {
            VEC c = V_ADD64(base, V_BCAST(_mm_set_epi64x(0, v * VL)));
            x[v] = V_XOR(V_SHUFB(c, bswap), rk[0]);
        }
        VNAME(middle_rounds)(x, rk, nr, VN, true);
#pragma GCC unroll 8
        for (unsigned v = 0; v < VN; v++) {
            V_STOREU(out + v * VW, V_AESENCLAST(x[v], V_XOR(
                         rk[nr], V_LOADU(in + v * VW))));
        }
        base = V_ADD64(base, step);
        in += VN * VW;
        out += VN * VW;
        n -= VN * VL;
        lo += VN * VL;
    }
    while (n >= VL) {
        VEC x = V_XOR(V_SHUFB(base, bswap), rk[0]);
        VNAME(middle_rounds)(&x, rk, nr, 1, true);
        V_STOREU(out, V_AESENCLAST(x, V_XOR(rk[nr], V_LOADU(in))));
        base = V_ADD64(base, V_BCAST(_mm_set_epi64x(0, VL)));
        in += VW;
        out += VW;
        n -= VL;
        lo += VL;
    }
    for (; n; n--, lo++, in += 16, out += 16) {
        __m128i c = _mm_shuffle_epi8(_mm_set_epi64x(hi, lo),
                                     _mm_set_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8,
                                                  9, 10, 11, 12, 13, 14, 15));
        _mm_storeu_si128((__m128i *)out, _mm_xor_si128(
                             VNAME(block_enc)(key, c),
                             _mm_loadu_si128((const __m128i *)in)));
    }
}

VFUNC void VNAME(ctr_body)(const AesX86Key *key, uint8_t *ctr,
                           const uint8_t *in, uint8_t *out, size_t n,
                           const unsigned nr)
{
    VEC rk[AES_X86_MAX_ROUNDS + 1];
    uint64_t hi, lo;

    VNAME(load_keys)(rk, key->enc, nr);
    memcpy(&hi, ctr, 8);
    memcpy(&lo, ctr + 8, 8);
    hi = GUINT64_FROM_BE(hi);
    lo = GUINT64_FROM_BE(lo);
    while (n) {
        size_t run = n;
        /* Split where the low half wraps: vectors only add to it. */
        if (lo && run > -lo) {
            run = -lo;
        }
        VNAME(ctr_run)(key, rk, hi, lo, in, out, run, nr);
        lo += run;
        hi += lo == 0;
        in += run * 16;
        out += run * 16;
        n -= run;
    }
    hi = GUINT64_TO_BE(hi);
    lo = GUINT64_TO_BE(lo);
    memcpy(ctr, &hi, 8);
    memcpy(ctr + 8, &lo, 8);
}

#define CTR(k, c, i, o, n, nr) VNAME(ctr_body)(k, c, i, o, n, nr)

VENTRY void VNAME(ctr_crypt)(const AesX86Key *key, uint8_t *ctr,
                             const uint8_t *in, uint8_t *out, size_t nblocks)
{
    AES_X86_BY_ROUNDS(key, CTR, key, ctr, in, out, nblocks);
}

#undef CTR

/* ---- XTS ---- */

/*
 * Lane i of t times x^(base + i). sl holds the left shift counts, sr
 * their complements to 64 (see the header comment).
 */
VFUNC VEC VNAME(mul_xpow)(VEC t, VEC sl, VEC sr)
{
    const VEC poly = V_BCAST(_mm_set_epi64x(0, 0x87));
    VEC carry = V_SRLV64(t, sr);

    return V_XOR3(V_SLLV64(t, sl), V_BSLLI8(carry),
                  V_CLMUL_HI_LO(carry, poly));
}

/* n whole blocks with running tweak *T; rk broadcast already. */
VFUNC void VNAME(xts_blocks)(const AesX86Key *key, const VEC *rk,
                             xts_uint128 *T, const uint8_t *in,
                             uint8_t *out, size_t n, const unsigned nr,
                             const bool enc)
{
    VEC t0 = V_BCAST(_mm_loadu_si128((const __m128i *)T->b));
    __m128i tn;

    if (n >= VN * VL) {
        VEC t[VN];
#pragma GCC unroll 8
        for (unsigned v = 0; v < VN; v++) {
            t[v] = VNAME(mul_xpow)(t0, V_XPOW_LEFT(v * VL),
                                   V_XPOW_RIGHT(v * VL));
        }
        for (;;) {
            VEC x[VN];
#pragma GCC unroll 8
            for (unsigned v = 0; v < VN; v++) {
                x[v] = V_XOR3(V_LOADU(in + v * VW), t[v], rk[0]);
            }
            VNAME(middle_rounds)(x, rk, nr, VN, enc);
#pragma GCC unroll 8
            for (unsigned v = 0; v < VN; v++) {
                V_STOREU(out + v * VW, VNAME(last_round)(
                             x[v], V_XOR(rk[nr], t[v]), enc));
            }
            in += VN * VW;
            out += VN * VW;
            n -= VN * VL;
            if (n < VN * VL) {
                break;
            }
#pragma GCC unroll 8
            for (unsigned v = 0; v < VN; v++) {
                t[v] = VNAME(mul_xpow)(t[v], V_XPOW_LEFT_ALL(VN * VL),
                                       V_XPOW_RIGHT_ALL(VN * VL));
            }
        }
        /* Lane 0 of t0 is the tweak of the next block, and so on. */
        t0 = VNAME(mul_xpow)(t[0], V_XPOW_LEFT_ALL(VN * VL),
                             V_XPOW_RIGHT_ALL(VN * VL));
    } else {
        t0 = VNAME(mul_xpow)(t0, V_XPOW_LEFT(0), V_XPOW_RIGHT(0));
    }
    while (n >= VL) {
        VEC x = V_XOR3(V_LOADU(in), t0, rk[0]);
        VNAME(middle_rounds)(&x, rk, nr, 1, enc);
        V_STOREU(out, VNAME(last_round)(x, V_XOR(rk[nr], t0), enc));
        t0 = VNAME(mul_xpow)(t0, V_XPOW_LEFT_ALL(VL), V_XPOW_RIGHT_ALL(VL));
        in += VW;
        out += VW;
        n -= VL;
    }
    tn = V_LANE0(t0);
    for (; n; n--, in += 16, out += 16) {
        __m128i x = _mm_xor_si128(_mm_loadu_si128((const __m128i *)in), tn);
        x = _mm_xor_si128(VNAME(block_crypt)(key, x, enc), tn);
        _mm_storeu_si128((__m128i *)out, x);
        tn = VNAME(mul_x)(tn);
    }
    _mm_storeu_si128((__m128i *)T->b, tn);
}

/*
 * Ciphertext stealing (IEEE 1619-2007 section 5.3.2 and 5.4.2): the last
 * full block and a partial one, 16 < len < 32 bytes.
 */
VFUNC void VNAME(xts_steal)(const AesX86Key *key, xts_uint128 *T,
                            const uint8_t *in, uint8_t *out, size_t len,
                            bool enc)
{
    size_t tail = len - 16;
    __m128i t = _mm_loadu_si128((const __m128i *)T->b);
    __m128i t_next = VNAME(mul_x)(t);
    /* Encryption takes T then T*x; decryption the other way round. */
    __m128i t_first = enc ? t : t_next, t_second = enc ? t_next : t;
    uint8_t head[16], last[16];
    __m128i x;

    x = _mm_xor_si128(_mm_loadu_si128((const __m128i *)in), t_first);
    x = _mm_xor_si128(VNAME(block_crypt)(key, x, enc), t_first);
    _mm_storeu_si128((__m128i *)head, x);
    memcpy(last, in + 16, tail);
    memcpy(last + tail, head + tail, 16 - tail);
    memcpy(out + 16, head, tail);
    x = _mm_xor_si128(_mm_loadu_si128((const __m128i *)last), t_second);
    x = _mm_xor_si128(VNAME(block_crypt)(key, x, enc), t_second);
    _mm_storeu_si128((__m128i *)out, x);
    _mm_storeu_si128((__m128i *)T->b, VNAME(mul_x)(t_next));
    explicit_bzero(head, sizeof(head));
    explicit_bzero(last, sizeof(last));
}

VFUNC void VNAME(xts_body)(const AesX86Key *key, xts_uint128 *T,
                           const uint8_t *in, uint8_t *out, size_t len,
                           const unsigned nr, const bool enc)
{
    VEC rk[AES_X86_MAX_ROUNDS + 1];
    size_t n = len / 16;

    if (len % 16) {
        n--;            /* the last full block goes with the partial one */
    }
    VNAME(load_keys)(rk, enc ? key->enc : key->dec, nr);
    VNAME(xts_blocks)(key, rk, T, in, out, n, nr, enc);
    if (len % 16) {
        VNAME(xts_steal)(key, T, in + n * 16, out + n * 16, len - n * 16,
                         enc);
    }
}

#define XTS_ENC(k, T, i, o, l, nr) VNAME(xts_body)(k, T, i, o, l, nr, true)
#define XTS_DEC(k, T, i, o, l, nr) VNAME(xts_body)(k, T, i, o, l, nr, false)

VENTRY void VNAME(xts_encrypt)(const AesX86Key *key, xts_uint128 *T,
                               const uint8_t *in, uint8_t *out, size_t len)
{
    AES_X86_BY_ROUNDS(key, XTS_ENC, key, T, in, out, len);
}

VENTRY void VNAME(xts_decrypt)(const AesX86Key *key, xts_uint128 *T,
                               const uint8_t *in, uint8_t *out, size_t len)
{
    AES_X86_BY_ROUNDS(key, XTS_DEC, key, T, in, out, len);
}

#undef XTS_ENC
#undef XTS_DEC

/* ---- XTS, many sectors ---- */

#define XTS_SECTOR_BATCH 32

VFUNC void VNAME(xts_sectors_body)(const AesX86Key *key,
                                   const AesX86Key *tkey,
                                   const AesX86Sectors *s, uint8_t *buf,
                                   const unsigned nr, const bool enc)
{
    VEC rk[AES_X86_MAX_ROUNDS + 1];
    xts_uint128 tw[XTS_SECTOR_BATCH];
    size_t nblocks = s->sector_size / 16;

    VNAME(load_keys)(rk, enc ? key->enc : key->dec, nr);
    for (size_t done = 0; done < s->count; done += XTS_SECTOR_BATCH) {
        size_t batch = MIN(XTS_SECTOR_BATCH, s->count - done);

        /* IV of a sector: dm-crypt's plain64 (or plain), little-endian. */
        for (size_t i = 0; i < batch; i++) {
            uint64_t iv = (s->first + done + i) << s->iv_shift;
            if (s->iv_32bit) {
                iv &= UINT32_MAX;
            }
            tw[i].u[0] = GUINT64_TO_LE(iv);
            tw[i].u[1] = 0;
        }
        if (batch < VL) {
            /* One sector per call is common: no call, no broadcasts. */
            for (size_t i = 0; i < batch; i++) {
                __m128i x = _mm_loadu_si128((const __m128i *)tw[i].b);
                _mm_storeu_si128((__m128i *)tw[i].b,
                                 VNAME(block_enc_nr)(tkey, x, nr));
            }
        } else {
            VNAME(ecb_encrypt)(tkey, tw[0].b, tw[0].b, batch);
        }
        for (size_t i = 0; i < batch; i++) {
            VNAME(xts_blocks)(key, rk, &tw[i], buf, buf, nblocks, nr, enc);
            buf += s->sector_size;
        }
    }
    explicit_bzero(tw, MIN(s->count, XTS_SECTOR_BATCH) * sizeof(tw[0]));
}

#define XTS_SEC_ENC(k, tk, s, b, nr) \
    VNAME(xts_sectors_body)(k, tk, s, b, nr, true)
#define XTS_SEC_DEC(k, tk, s, b, nr) \
    VNAME(xts_sectors_body)(k, tk, s, b, nr, false)

VENTRY void VNAME(xts_encrypt_sectors)(const AesX86Key *key,
                                       const AesX86Key *tkey,
                                       const AesX86Sectors *s, uint8_t *buf)
{
    AES_X86_BY_ROUNDS(key, XTS_SEC_ENC, key, tkey, s, buf);
}

VENTRY void VNAME(xts_decrypt_sectors)(const AesX86Key *key,
                                       const AesX86Key *tkey,
                                       const AesX86Sectors *s, uint8_t *buf)
{
    AES_X86_BY_ROUNDS(key, XTS_SEC_DEC, key, tkey, s, buf);
}

#undef XTS_SEC_ENC
#undef XTS_SEC_DEC
#undef XTS_SECTOR_BATCH
#undef AES_X86_BY_ROUNDS
#undef VL
#undef VN
