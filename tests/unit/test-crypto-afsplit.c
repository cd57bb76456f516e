/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The LUKS anti-forensic splitter (LUKS1 On-Disk Format Specification
 * 1.2.3, "AF-Splitter"):
 *  - split then merge gives the key back, for several hashes, key lengths
 *    (shorter than, equal to and longer than the digest) and stripe counts;
 *  - merge against the spec's formula written out in this file;
 *  - damage to any stripe destroys the key;
 *  - known answers from real LUKS1 images made by cryptsetup: unlock a key
 *    slot by hand (PBKDF2, key-material decryption with nettle directly,
 *    merge) and check the master key against the header's mk-digest.
 */
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <glib/gstdio.h>
#include <nettle/aes.h>
#include <nettle/cbc.h>
#include <nettle/xts.h>

#include "crypto/afsplit.h"
#include "crypto/pbkdf.h"

/* ---- round trips ---- */

static const QCryptoHashAlgo afsplit_hashes[] = {
    QCRYPTO_HASH_ALGO_SHA1, QCRYPTO_HASH_ALGO_SHA256,
    QCRYPTO_HASH_ALGO_SHA512, QCRYPTO_HASH_ALGO_RIPEMD160,
    QCRYPTO_HASH_ALGO_WHIRLPOOL, QCRYPTO_HASH_ALGO_WP256,
};
static const size_t afsplit_keylens[] = { 16, 20, 32, 33, 64, 100 };
static const uint32_t afsplit_stripes[] = { 1, 2, 3, 17, 4000 };

static void test_afsplit_round_trip(void)
{
    for (size_t h = 0; h < G_N_ELEMENTS(afsplit_hashes); h++) {
        for (size_t k = 0; k < G_N_ELEMENTS(afsplit_keylens); k++) {
            for (size_t s = 0; s < G_N_ELEMENTS(afsplit_stripes); s++) {
                size_t len = afsplit_keylens[k];
                uint32_t stripes = afsplit_stripes[s];
                g_autofree uint8_t *split1 = g_malloc(len * stripes);
                g_autofree uint8_t *split2 = g_malloc(len * stripes);
                uint8_t key[100], merged[100];
                Error *err = NULL;

                for (size_t i = 0; i < len; i++) {
                    key[i] = i * 29 + h + s;
                }
                g_assert_cmpint(qcrypto_afsplit_encode(afsplit_hashes[h],
                                    len, stripes, key, split1, &err), ==, 0);
                g_assert_null(err);
                g_assert_cmpint(qcrypto_afsplit_decode(afsplit_hashes[h],
                                    len, stripes, split1, merged, &err),
                                ==, 0);
                g_assert_null(err);
                g_assert_cmpmem(merged, len, key, len);

                /* Fresh random stripes every time (beyond one stripe). */
                g_assert_cmpint(qcrypto_afsplit_encode(afsplit_hashes[h],
                                    len, stripes, key, split2, NULL), ==, 0);
                if (stripes > 1) {
                    g_assert_true(memcmp(split1, split2,
                                         len * stripes) != 0);
                }
            }
        }
    }
}

/* ---- the spec's merge, written out ---- */

/*
 * diffuse(): the buffer in digest-sized pieces, piece i replaced by
 * H(be32(i) || piece), cut to the piece's length.
 */
static void ref_diffuse(QCryptoHashAlgo alg, uint8_t *buf, size_t len)
{
    size_t dlen = qcrypto_hash_digest_len(alg);

    for (size_t i = 0, off = 0; off < len; i++, off += dlen) {
        size_t n = MIN(dlen, len - off);
        g_autofree uint8_t *in = g_malloc(4 + n);
        uint8_t digest[QCRYPTO_HASH_MAX_DIGEST_LEN];

        in[0] = i >> 24;
        in[1] = i >> 16;
        in[2] = i >> 8;
        in[3] = i;
        memcpy(in + 4, buf + off, n);
        g_assert_cmpint(qcrypto_hash_bytes(alg, in, 4 + n, digest, NULL),
                        ==, 0);
        memcpy(buf + off, digest, n);
    }
}

static void test_afsplit_reference_merge(void)
{
    for (size_t h = 0; h < G_N_ELEMENTS(afsplit_hashes); h++) {
        for (size_t k = 0; k < G_N_ELEMENTS(afsplit_keylens); k++) {
            QCryptoHashAlgo alg = afsplit_hashes[h];
            size_t len = afsplit_keylens[k];
            uint32_t stripes = 5;
            uint8_t split[100 * 5], d[100] = { 0 }, want[100], got[100];

            for (size_t i = 0; i < len * stripes; i++) {
                split[i] = i * 7 + k;
            }
            for (uint32_t s = 0; s + 1 < stripes; s++) {
                for (size_t i = 0; i < len; i++) {
                    d[i] ^= split[s * len + i];
                }
                ref_diffuse(alg, d, len);
            }
            for (size_t i = 0; i < len; i++) {
                want[i] = d[i] ^ split[(stripes - 1) * len + i];
            }
            g_assert_cmpint(qcrypto_afsplit_decode(alg, len, stripes, split,
                                                   got, NULL), ==, 0);
            g_assert_cmpmem(got, len, want, len);
        }
    }
}

/* One flipped bit in any stripe gives a different key. */
static void test_afsplit_damage(void)
{
    enum { LEN = 32, STRIPES = 50 };
    uint8_t key[LEN], split[LEN * STRIPES], merged[LEN];

    memset(key, 0x5a, sizeof(key));
    g_assert_cmpint(qcrypto_afsplit_encode(QCRYPTO_HASH_ALGO_SHA256, LEN,
                                           STRIPES, key, split, NULL), ==, 0);
    for (size_t s = 0; s < STRIPES; s++) {
        split[s * LEN + s % LEN] ^= 1;
        g_assert_cmpint(qcrypto_afsplit_decode(QCRYPTO_HASH_ALGO_SHA256, LEN,
                                               STRIPES, split, merged, NULL),
                        ==, 0);
        g_assert_true(memcmp(merged, key, LEN) != 0);
        split[s * LEN + s % LEN] ^= 1;
    }
    g_assert_cmpint(qcrypto_afsplit_decode(QCRYPTO_HASH_ALGO_SHA256, LEN,
                                           STRIPES, split, merged, NULL),
                    ==, 0);
    g_assert_cmpmem(merged, LEN, key, LEN);
}

static void test_afsplit_errors(void)
{
    uint8_t key[16] = { 0 }, out[16];
    Error *err = NULL;

    g_assert_cmpint(qcrypto_afsplit_encode(QCRYPTO_HASH_ALGO_SHA1, 16, 0,
                                           key, out, &err), ==, -1);
    error_free_or_abort(&err);
    g_assert_cmpint(qcrypto_afsplit_decode(QCRYPTO_HASH_ALGO_SHA1, 0, 4,
                                           key, out, &err), ==, -1);
    error_free_or_abort(&err);
    g_assert_cmpint(qcrypto_afsplit_decode(QCRYPTO_HASH_ALGO__MAX, 16, 1,
                                           key, out, &err), ==, -1);
    error_free_or_abort(&err);
}

/* ---- known answers from cryptsetup's LUKS1 images ---- */

/* LUKS1 spec 1.2.3, the partition header (phdr) and key slot layouts. */
#define LUKS1_MAGIC "LUKS\xba\xbe"
#define LUKS1_SECTOR 512
#define LUKS1_DIGEST_LEN 20
#define LUKS1_SALT_LEN 32
#define LUKS1_NUM_SLOTS 8
#define LUKS1_SLOT_ACTIVE 0x00ac71f3
#define LUKS1_PHDR_LEN 592

typedef struct {
    char cipher_name[33];
    char cipher_mode[33];
    char hash_spec[33];
    uint32_t key_bytes;
    uint8_t mk_digest[LUKS1_DIGEST_LEN];
    uint8_t mk_digest_salt[LUKS1_SALT_LEN];
    uint32_t mk_digest_iter;
    struct {
        uint32_t active;
        uint32_t iterations;
        uint8_t salt[LUKS1_SALT_LEN];
        uint32_t km_offset;         /* sectors */
        uint32_t stripes;
    } slot[LUKS1_NUM_SLOTS];
} Luks1Header;

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | p[1] << 16 | p[2] << 8 | p[3];
}

/* Only what this test needs; block/ has the real, validating parser. */
static void luks1_parse(GBytes *image, Luks1Header *h)
{
    size_t size;
    const uint8_t *p = g_bytes_get_data(image, &size);

    g_assert_cmpuint(size, >=, LUKS1_PHDR_LEN);
    g_assert_cmpmem(p, 6, LUKS1_MAGIC, 6);
    g_assert_cmpuint(p[6] << 8 | p[7], ==, 1);
    memcpy(h->cipher_name, p + 8, 32);
    h->cipher_name[32] = 0;
    memcpy(h->cipher_mode, p + 40, 32);
    h->cipher_mode[32] = 0;
    memcpy(h->hash_spec, p + 72, 32);
    h->hash_spec[32] = 0;
    h->key_bytes = be32(p + 108);
    memcpy(h->mk_digest, p + 112, LUKS1_DIGEST_LEN);
    memcpy(h->mk_digest_salt, p + 132, LUKS1_SALT_LEN);
    h->mk_digest_iter = be32(p + 164);
    for (int i = 0; i < LUKS1_NUM_SLOTS; i++) {
        const uint8_t *s = p + 208 + 48 * i;

        h->slot[i].active = be32(s);
        h->slot[i].iterations = be32(s + 4);
        memcpy(h->slot[i].salt, s + 8, LUKS1_SALT_LEN);
        h->slot[i].km_offset = be32(s + 40);
        h->slot[i].stripes = be32(s + 44);
    }
    g_assert_cmpuint(h->key_bytes, <=, 64);
}

/* sector as the 16-byte little-endian block plain64 and ESSIV start from */
static void sector_block(uint64_t sector, uint8_t block[16])
{
    memset(block, 0, 16);
    for (int i = 0; i < 8; i++) {
        block[i] = sector >> (8 * i);
    }
}

/*
 * dm-crypt's ESSIV: IV(n) = E_salt(n), salt = hash(key), the ESSIV cipher
 * (AES here) keyed with the whole digest: AES-256 for a 32-byte hash.
 */
static void essiv_iv(const char *hash_name, const uint8_t *key, size_t nkey,
                     uint64_t sector, uint8_t iv[16])
{
    int alg = qcrypto_hash_algo_parse(hash_name);
    uint8_t salt[QCRYPTO_HASH_MAX_DIGEST_LEN];
    struct aes256_ctx essiv;

    g_assert_cmpint(alg, >=, 0);
    g_assert_cmpuint(qcrypto_hash_digest_len(alg), ==, AES256_KEY_SIZE);
    g_assert_cmpint(qcrypto_hash_bytes(alg, key, nkey, salt, NULL), ==, 0);
    aes256_set_encrypt_key(&essiv, salt);
    sector_block(sector, iv);
    aes256_encrypt(&essiv, 16, iv, iv);
}

/*
 * Decrypt key material in place, sector by sector from 0, for the AES
 * modes our images use: cbc-essiv:<hash> and xts-plain64 / xts-essiv.
 */
static void luks1_decrypt_km(const Luks1Header *h, const uint8_t *key,
                             uint8_t *buf, size_t len)
{
    g_assert_cmpstr(h->cipher_name, ==, "aes");
    for (size_t off = 0; off < len; off += LUKS1_SECTOR) {
        uint64_t sector = off / LUKS1_SECTOR;
        uint8_t iv[16];

        if (g_str_has_prefix(h->cipher_mode, "cbc-essiv:")) {
            struct CBC_CTX(struct aes128_ctx, AES_BLOCK_SIZE) c128;
            struct CBC_CTX(struct aes256_ctx, AES_BLOCK_SIZE) c256;

            essiv_iv(h->cipher_mode + 10, key, h->key_bytes, sector, iv);
            if (h->key_bytes == AES128_KEY_SIZE) {
                aes128_set_decrypt_key(&c128.ctx, key);
                CBC_SET_IV(&c128, iv);
                CBC_DECRYPT(&c128, aes128_decrypt, LUKS1_SECTOR,
                            buf + off, buf + off);
            } else {
                g_assert_cmpuint(h->key_bytes, ==, AES256_KEY_SIZE);
                aes256_set_decrypt_key(&c256.ctx, key);
                CBC_SET_IV(&c256, iv);
                CBC_DECRYPT(&c256, aes256_decrypt, LUKS1_SECTOR,
                            buf + off, buf + off);
            }
        } else if (g_str_has_prefix(h->cipher_mode, "xts-")) {
            if (g_str_equal(h->cipher_mode, "xts-plain64")) {
                sector_block(sector, iv);
            } else {
                g_assert_true(g_str_has_prefix(h->cipher_mode,
                                               "xts-essiv:"));
                essiv_iv(h->cipher_mode + 10, key, h->key_bytes, sector, iv);
            }
            if (h->key_bytes == 2 * AES128_KEY_SIZE) {
                struct xts_aes128_key xts;
                xts_aes128_set_decrypt_key(&xts, key);
                xts_aes128_decrypt_message(&xts, iv, LUKS1_SECTOR,
                                           buf + off, buf + off);
            } else {
                struct xts_aes256_key xts;
                g_assert_cmpuint(h->key_bytes, ==, 2 * AES256_KEY_SIZE);
                xts_aes256_set_decrypt_key(&xts, key);
                xts_aes256_decrypt_message(&xts, iv, LUKS1_SECTOR,
                                           buf + off, buf + off);
            }
        } else {
            g_assert_not_reached();
        }
    }
}

/*
 * Open key slot i with the passphrase, the way LUKS1 does ("Recovering a
 * master key"): PBKDF2 the passphrase to the slot key, decrypt the key
 * material, AF-merge it; the result is the master key if PBKDF2 of it
 * matches mk-digest. Returns whether it did.
 */
static bool luks1_unlock_slot(GBytes *image, const Luks1Header *h, int i,
                              const uint8_t *pass, size_t npass)
{
    int alg = qcrypto_hash_algo_parse(h->hash_spec);
    size_t image_size;
    const uint8_t *img = g_bytes_get_data(image, &image_size);
    size_t km_len = (size_t)h->key_bytes * h->slot[i].stripes;
    size_t km_sectors = (km_len + LUKS1_SECTOR - 1) / LUKS1_SECTOR;
    size_t km_start = (size_t)h->slot[i].km_offset * LUKS1_SECTOR;
    g_autofree uint8_t *km = g_malloc(km_sectors * LUKS1_SECTOR);
    uint8_t slot_key[64], mk[64], digest[LUKS1_DIGEST_LEN];
    Error *err = NULL;

    g_assert_cmpint(alg, >=, 0);
    g_assert_cmpuint(km_start + km_sectors * LUKS1_SECTOR, <=, image_size);

    g_assert_cmpint(qcrypto_pbkdf2(alg, pass, npass, h->slot[i].salt,
                                   LUKS1_SALT_LEN, h->slot[i].iterations,
                                   slot_key, h->key_bytes, &err), ==, 0);
    memcpy(km, img + km_start, km_sectors * LUKS1_SECTOR);
    luks1_decrypt_km(h, slot_key, km, km_sectors * LUKS1_SECTOR);

    g_assert_cmpint(qcrypto_afsplit_decode(alg, h->key_bytes,
                                           h->slot[i].stripes, km, mk, &err),
                    ==, 0);
    g_assert_cmpint(qcrypto_pbkdf2(alg, mk, h->key_bytes, h->mk_digest_salt,
                                   LUKS1_SALT_LEN, h->mk_digest_iter,
                                   digest, sizeof(digest), &err), ==, 0);
    g_assert_null(err);
    return memcmp(digest, h->mk_digest, LUKS1_DIGEST_LEN) == 0;
}

/*
 * Unpack test data with a shell command reading "$1" (a file under
 * QIL_TESTDATA) and writing "$2" (a temporary file), "$3" an extra
 * argument. Returns NULL, the test skipped with the reason, when the data
 * or the tool is missing; a present file that does not unpack fails.
 */
static GBytes *testdata_unpack(const char *file, const char *script,
                               const char *arg)
{
    const char *dir = g_getenv("QIL_TESTDATA");
    g_autofree char *path = NULL, *tmp = NULL, *data = NULL, *msg = NULL;
    g_autofree char *errout = NULL;
    g_autoptr(GError) gerr = NULL;
    gsize len;
    int fd, status;

    if (!dir) {
        g_test_skip("QIL_TESTDATA is not set (run through meson test)");
        return NULL;
    }
    path = g_build_filename(dir, file, NULL);
    if (!g_file_test(path, G_FILE_TEST_IS_REGULAR)) {
        msg = g_strdup_printf("test data %s is absent", path);
        g_test_skip(msg);
        return NULL;
    }
    fd = g_file_open_tmp("qil-afsplit-XXXXXX", &tmp, &gerr);
    g_assert_no_error(gerr);
    close(fd);
    {
        const char *argv[] = { "sh", "-c", script, "sh", path, tmp, arg,
                               NULL };
        if (!g_spawn_sync(NULL, (char **)argv, NULL, G_SPAWN_SEARCH_PATH,
                          NULL, NULL, NULL, &errout, &status, &gerr)) {
            g_unlink(tmp);
            msg = g_strdup_printf("cannot run sh: %s", gerr->message);
            g_test_skip(msg);
            return NULL;
        }
    }
    if (!g_spawn_check_wait_status(status, NULL)) {
        g_unlink(tmp);
        /* 127: the shell found no xz or tar. */
        if (WIFEXITED(status) && WEXITSTATUS(status) == 127) {
            msg = g_strdup_printf("cannot unpack %s: %s", path, errout);
            g_test_skip(msg);
            return NULL;
        }
        g_error("unpacking %s failed: %s", path, errout);
    }
    g_assert_true(g_file_get_contents(tmp, &data, &len, &gerr));
    g_unlink(tmp);
    return g_bytes_new_take(g_steal_pointer(&data), len);
}

typedef struct {
    const char *archive;
    const char *member;         /* inside a tar archive, or NULL */
    const char *keyfile;        /* member holding the passphrase, or NULL */
    const char *passphrase;
    const char *cipher_mode;
    const char *hash_spec;
    uint32_t key_bytes;
} Luks1Image;

static const Luks1Image luks1_images[] = {
    /* The spec's known answer: aes-cbc-essiv:sha256, 128-bit key. */
    { "cryptsetup/compatimage.img.xz", NULL, NULL, "compatkey",
      "cbc-essiv:sha256", "sha256", 16 },
    /* A SHA-1 diffuser over a 32-byte key: two pieces, the second cut. */
    { "cryptsetup/luks1-images.tar.xz",
      "luks1-images/luks1_aes-cbc-essiv-sha256-sha1.img",
      "luks1-images/keyfile1", NULL, "cbc-essiv:sha256", "sha1", 32 },
    /* Whirlpool everywhere: PBKDF2, the diffuser, and wp256 for ESSIV. */
    { "cryptsetup/luks1-images.tar.xz",
      "luks1-images/luks1_aes-xts-plain64-whirlpool.img",
      "luks1-images/keyfile1", NULL, "xts-plain64", "whirlpool", 32 },
    { "cryptsetup/luks1-images.tar.xz",
      "luks1-images/luks1_aes-xts-essiv-wp256-whirlpool.img",
      "luks1-images/keyfile1", NULL, "xts-essiv:wp256", "whirlpool", 32 },
};

static void test_afsplit_luks1_image(gconstpointer opaque)
{
    const Luks1Image *t = opaque;
    g_autoptr(GBytes) image = NULL;
    g_autoptr(GBytes) keyfile = NULL;
    const uint8_t *pass;
    size_t npass;
    Luks1Header h;
    int unlocked = 0;

    if (t->member) {
        image = testdata_unpack(t->archive, "tar -xJOf \"$1\" \"$3\" > \"$2\"",
                                t->member);
    } else {
        image = testdata_unpack(t->archive, "xz -dc -- \"$1\" > \"$2\"", "");
    }
    if (!image) {
        return;
    }
    if (t->keyfile) {
        keyfile = testdata_unpack(t->archive,
                                  "tar -xJOf \"$1\" \"$3\" > \"$2\"",
                                  t->keyfile);
        g_assert_nonnull(keyfile);
        pass = g_bytes_get_data(keyfile, &npass);
    } else {
        pass = (const uint8_t *)t->passphrase;
        npass = strlen(t->passphrase);
    }

    luks1_parse(image, &h);
    g_assert_cmpstr(h.cipher_mode, ==, t->cipher_mode);
    g_assert_cmpstr(h.hash_spec, ==, t->hash_spec);
    g_assert_cmpuint(h.key_bytes, ==, t->key_bytes);

    for (int i = 0; i < LUKS1_NUM_SLOTS; i++) {
        if (h.slot[i].active != LUKS1_SLOT_ACTIVE) {
            continue;
        }
        if (luks1_unlock_slot(image, &h, i, pass, npass)) {
            unlocked++;
        }
        /* A wrong passphrase must not pass the mk-digest check. */
        g_assert_false(luks1_unlock_slot(image, &h, i,
                                         (const uint8_t *)"wrong", 5));
    }
    g_assert_cmpint(unlocked, >=, 1);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/crypto/afsplit/round-trip", test_afsplit_round_trip);
    g_test_add_func("/crypto/afsplit/reference-merge",
                    test_afsplit_reference_merge);
    g_test_add_func("/crypto/afsplit/damage", test_afsplit_damage);
    g_test_add_func("/crypto/afsplit/errors", test_afsplit_errors);
    for (size_t i = 0; i < G_N_ELEMENTS(luks1_images); i++) {
        const Luks1Image *t = &luks1_images[i];
        g_autofree char *base = g_path_get_basename(t->member ? t->member
                                                              : t->archive);
        g_autofree char *path = g_strdup_printf("/crypto/afsplit/luks1/%s",
                                                base);
        g_test_add_data_func(path, t, test_afsplit_luks1_image);
    }
    return g_test_run();
}
