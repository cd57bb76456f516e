/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Whirlpool, written from the specification: P. Barreto and V. Rijmen,
 * "The WHIRLPOOL Hashing Function" (revised 2003, the version adopted in
 * ISO/IEC 10118-3:2004 and NESSIE's final portfolio).
 *
 * (Sections are cited by their titles in that paper.)
 *
 * Structure. Whirlpool is the Miyaguchi-Preneel construction over W, a
 * 512-bit block cipher whose state is an 8x8 matrix of bytes over GF(2^8)
 * ("The hashing function"):
 *
 *     H_0 = 0,   H_i = W[H_{i-1}](m_i) ^ H_{i-1} ^ m_i
 *
 * W runs 10 rounds rho[k] = sigma[k] o theta o pi o gamma ("The internal
 * block cipher W"):
 *   gamma  substitutes every byte through the S-box S;
 *   pi     rotates column j down by j rows: b[i][j] = a[(i - j) mod 8][j];
 *   theta  multiplies every row by the circulant matrix
 *          C = cir(1, 1, 4, 1, 8, 5, 2, 9), i.e. C[k][j] = c[(j - k) mod 8],
 *          in GF(2^8) modulo x^8 + x^4 + x^3 + x^2 + 1 (0x11d);
 *   sigma  XORs the round key.
 * The key schedule runs the same rounds over the key, with round constant
 * c^r as key: row 0 of c^r is S[8(r-1)] .. S[8(r-1)+7], the rest zero.
 *
 * Table form. gamma, pi and theta fold into one table lookup per byte.
 * Output row i is
 *
 *     b[i][j] = XOR_k S[a[(i - k) mod 8][k]] * c[(j - k) mod 8],
 *
 * so with each row held as a 64-bit big-endian word (byte 0 = column 0, the
 * message's byte order: the spec's map mu), row i is the XOR over k of
 * T_k[byte k of row (i - k) mod 8], where T_0[x] is the row
 * (S[x]*c[0], ..., S[x]*c[7]) and T_k is T_0 rotated right by k bytes.
 * That is eight lookups and seven XORs per row, 64 per round.
 *
 * The S-box itself is built from the spec's 4-bit mini-boxes E and R
 * ("The S-box" design appendix), and the tables T_k from it, once, at first
 * use: 16 KiB, which fits in L1 cache. Table lookups are not constant-time
 * (nor are Linux's or libgcrypt's Whirlpool); it is here to open old LUKS
 * images, not to be chosen for new ones.
 */
#include <string.h>

#include <glib.h>

#include "whirlpool.h"
#include "hashpriv.h"
#include "qemu/bswap.h"

/* Spec: "The internal block cipher W". */
#define WHIRLPOOL_ROUNDS 10

static struct {
    uint8_t sbox[256];
    uint64_t t[8][256];
    uint64_t rc[WHIRLPOOL_ROUNDS];
} wp;

/* The S-box's mini-boxes E and R (E^-1 is computed). */
static const uint8_t wp_mini_e[16] = {
    0x1, 0xb, 0x9, 0xc, 0xd, 0x6, 0xf, 0x3,
    0xe, 0x8, 0x7, 0x4, 0xa, 0x2, 0x5, 0x0,
};
static const uint8_t wp_mini_r[16] = {
    0x7, 0xc, 0xb, 0xd, 0xe, 0x4, 0x9, 0xf,
    0x6, 0x3, 0x8, 0xa, 0x2, 0x5, 0x1, 0x0,
};

/* First row of the circulant matrix C ("The linear diffusion layer"). */
static const uint8_t wp_theta_c[8] = { 1, 1, 4, 1, 8, 5, 2, 9 };

/* Multiply in GF(2^8) modulo x^8 + x^4 + x^3 + x^2 + 1 ("Finite fields"). */
static uint8_t wp_gf_mul(uint8_t a, uint8_t b)
{
    uint8_t r = 0;

    while (b) {
        if (b & 1) {
            r ^= a;
        }
        a = (a << 1) ^ ((a & 0x80) ? 0x1d : 0);
        b >>= 1;
    }
    return r;
}

static inline uint64_t ror64(uint64_t x, unsigned n)
{
    return n ? (x >> n) | (x << (64 - n)) : x;
}

static gpointer wp_tables_init_once(gpointer unused)
{
    uint8_t e_inv[16];

    for (int i = 0; i < 16; i++) {
        e_inv[wp_mini_e[i]] = i;
    }
    /*
     * u = E(high nibble), l = E^-1(low nibble), r = R(u ^ l);
     * S(x) = E(u ^ r) || E^-1(l ^ r).
     */
    for (int x = 0; x < 256; x++) {
        uint8_t u = wp_mini_e[x >> 4], l = e_inv[x & 15];
        uint8_t r = wp_mini_r[u ^ l];
        wp.sbox[x] = (wp_mini_e[u ^ r] << 4) | e_inv[l ^ r];
    }
    for (int x = 0; x < 256; x++) {
        uint64_t row = 0;
        for (int j = 0; j < 8; j++) {
            row = (row << 8) | wp_gf_mul(wp.sbox[x], wp_theta_c[j]);
        }
        for (int k = 0; k < 8; k++) {
            wp.t[k][x] = ror64(row, 8 * k);
        }
    }
    for (int r = 0; r < WHIRLPOOL_ROUNDS; r++) {
        uint64_t c = 0;
        for (int j = 0; j < 8; j++) {
            c = (c << 8) | wp.sbox[8 * r + j];
        }
        wp.rc[r] = c;
    }
    return NULL;
}

static void wp_tables_init(void)
{
    static GOnce once = G_ONCE_INIT;
    g_once(&once, wp_tables_init_once, NULL);
}

/*
 * theta o pi o gamma, one output row: row i from rows i, i-1, ..., i-7
 * (passed as r0 .. r7), byte k of row i-k through T_k. The state lives in
 * eight named scalars rather than an array: that keeps it in registers
 * (about 1.5x faster with GCC than the same code over arrays).
 */
#define WP_BYTE(x, k) (((x) >> (56 - 8 * (k))) & 0xff)
#define WP_ROW(r0, r1, r2, r3, r4, r5, r6, r7) \
    (wp.t[0][WP_BYTE(r0, 0)] ^ wp.t[1][WP_BYTE(r1, 1)] ^ \
     wp.t[2][WP_BYTE(r2, 2)] ^ wp.t[3][WP_BYTE(r3, 3)] ^ \
     wp.t[4][WP_BYTE(r4, 4)] ^ wp.t[5][WP_BYTE(r5, 5)] ^ \
     wp.t[6][WP_BYTE(r6, 6)] ^ wp.t[7][WP_BYTE(r7, 7)])
#define WP_ROUND(o, a) do { \
    o##0 = WP_ROW(a##0, a##7, a##6, a##5, a##4, a##3, a##2, a##1); \
    o##1 = WP_ROW(a##1, a##0, a##7, a##6, a##5, a##4, a##3, a##2); \
    o##2 = WP_ROW(a##2, a##1, a##0, a##7, a##6, a##5, a##4, a##3); \
    o##3 = WP_ROW(a##3, a##2, a##1, a##0, a##7, a##6, a##5, a##4); \
    o##4 = WP_ROW(a##4, a##3, a##2, a##1, a##0, a##7, a##6, a##5); \
    o##5 = WP_ROW(a##5, a##4, a##3, a##2, a##1, a##0, a##7, a##6); \
    o##6 = WP_ROW(a##6, a##5, a##4, a##3, a##2, a##1, a##0, a##7); \
    o##7 = WP_ROW(a##7, a##6, a##5, a##4, a##3, a##2, a##1, a##0); \
} while (0)

/*
 * One Miyaguchi-Preneel step: h ^= W[h](m) ^ m. Each round computes the
 * next round key from the last (the key schedule is the same round with
 * the round constant as key), then the next state with that key.
 */
static void wp_compress(uint64_t h[8], const uint8_t block[64])
{
    uint64_t m[8];
    uint64_t k0, k1, k2, k3, k4, k5, k6, k7;        /* round key */
    uint64_t s0, s1, s2, s3, s4, s5, s6, s7;        /* cipher state */
    uint64_t l0, l1, l2, l3, l4, l5, l6, l7;        /* round output */

    for (int i = 0; i < 8; i++) {
        m[i] = ldq_be_p(block + 8 * i);
    }
    k0 = h[0]; k1 = h[1]; k2 = h[2]; k3 = h[3];
    k4 = h[4]; k5 = h[5]; k6 = h[6]; k7 = h[7];
    s0 = m[0] ^ k0; s1 = m[1] ^ k1; s2 = m[2] ^ k2; s3 = m[3] ^ k3;
    s4 = m[4] ^ k4; s5 = m[5] ^ k5; s6 = m[6] ^ k6; s7 = m[7] ^ k7;

    for (int r = 0; r < WHIRLPOOL_ROUNDS; r++) {
        WP_ROUND(l, k);
        k0 = l0 ^ wp.rc[r]; k1 = l1; k2 = l2; k3 = l3;
        k4 = l4; k5 = l5; k6 = l6; k7 = l7;
        WP_ROUND(l, s);
        s0 = l0 ^ k0; s1 = l1 ^ k1; s2 = l2 ^ k2; s3 = l3 ^ k3;
        s4 = l4 ^ k4; s5 = l5 ^ k5; s6 = l6 ^ k6; s7 = l7 ^ k7;
    }

    h[0] ^= s0 ^ m[0]; h[1] ^= s1 ^ m[1]; h[2] ^= s2 ^ m[2];
    h[3] ^= s3 ^ m[3]; h[4] ^= s4 ^ m[4]; h[5] ^= s5 ^ m[5];
    h[6] ^= s6 ^ m[6]; h[7] ^= s7 ^ m[7];
}

void qcrypto_whirlpool_init(struct qcrypto_whirlpool_ctx *ctx)
{
    wp_tables_init();
    memset(ctx->state, 0, sizeof(ctx->state));
    ctx->count = 0;
    ctx->index = 0;
}

void qcrypto_whirlpool_update(struct qcrypto_whirlpool_ctx *ctx,
                              size_t length, const uint8_t *data)
{
    if (ctx->index) {
        size_t n = MIN(length, WHIRLPOOL_BLOCK_SIZE - ctx->index);
        memcpy(ctx->block + ctx->index, data, n);
        ctx->index += n;
        data += n;
        length -= n;
        if (ctx->index < WHIRLPOOL_BLOCK_SIZE) {
            return;
        }
        wp_compress(ctx->state, ctx->block);
        ctx->count++;
        ctx->index = 0;
    }
    for (; length >= WHIRLPOOL_BLOCK_SIZE; length -= WHIRLPOOL_BLOCK_SIZE) {
        wp_compress(ctx->state, data);
        ctx->count++;
        data += WHIRLPOOL_BLOCK_SIZE;
    }
    memcpy(ctx->block, data, length);
    ctx->index = length;
}

void qcrypto_whirlpool_digest(struct qcrypto_whirlpool_ctx *ctx,
                              size_t length, uint8_t *digest)
{
    /* Message length in bits: count * 512 + index * 8, as 128 bits. */
    uint64_t bits_hi = ctx->count >> 55;
    uint64_t bits_lo = (ctx->count << 9) + ctx->index * 8;
    unsigned i = ctx->index;
    uint8_t out[WHIRLPOOL_DIGEST_SIZE];

    g_assert(length <= WHIRLPOOL_DIGEST_SIZE);

    /*
     * "Padding and MD-strengthening": append a 1 bit, zeros up to an odd
     * multiple of 256 bits, then the length as a 256-bit big-endian
     * number.
     */
    ctx->block[i++] = 0x80;
    if (i > WHIRLPOOL_BLOCK_SIZE - 32) {
        memset(ctx->block + i, 0, WHIRLPOOL_BLOCK_SIZE - i);
        wp_compress(ctx->state, ctx->block);
        i = 0;
    }
    memset(ctx->block + i, 0, WHIRLPOOL_BLOCK_SIZE - 16 - i);
    stq_be_p(ctx->block + 48, bits_hi);
    stq_be_p(ctx->block + 56, bits_lo);
    wp_compress(ctx->state, ctx->block);

    for (int r = 0; r < 8; r++) {
        stq_be_p(out + 8 * r, ctx->state[r]);
    }
    memcpy(digest, out, length);
    explicit_bzero(out, sizeof(out));
    qcrypto_whirlpool_init(ctx);
}

const struct nettle_hash qcrypto_whirlpool_hash = {
    "whirlpool",
    sizeof(struct qcrypto_whirlpool_ctx),
    WHIRLPOOL_DIGEST_SIZE,
    WHIRLPOOL_BLOCK_SIZE,
    (nettle_hash_init_func *)qcrypto_whirlpool_init,
    (nettle_hash_update_func *)qcrypto_whirlpool_update,
    (nettle_hash_digest_func *)qcrypto_whirlpool_digest,
};
