/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The secret registry (crypto/secret.c): values as given, from files (any
 * bytes), base64 decoded strictly (RFC 4648), and encrypted secrets as
 * libvirt hands them to QEMU: AES-256-CBC under a 32-byte master secret,
 * PKCS#7 padding. Every refusal is an error that shows none of the
 * secret's bytes.
 */
#include <string.h>
#include <unistd.h>

#include "crypto/cipher.h"
#include "crypto/secret.h"
#include "crypto-test-hex.h"

#define KEY_HEX "000102030405060708090a0b0c0d0e0f" \
                "101112131415161718191a1b1c1d1e1f"
#define IV_B64 "oKGio6SlpqeoqaqrrK2urw=="          /* bytes a0 .. af */

/* What the secret id holds, compared with the len bytes of want. */
static void assert_secret(const char *id, const void *want, size_t len)
{
    g_autoptr(Error) err = NULL;
    uint8_t *data;
    size_t n;

    g_assert_cmpint(qcrypto_secret_lookup(id, &data, &n, &err), ==, 0);
    g_assert_null(err);
    g_assert_cmpmem(data, n, want, len);
    g_assert_cmpint(data[n], ==, 0);                /* NUL after the value */
    qcrypto_secret_value_free(data, n);
}

/*
 * Adding fails with a message holding want; it quotes none of the bytes
 * of hidden (the secret or its plaintext), and nothing is registered.
 */
static void assert_add_fails(const char *id, const QCryptoSecretOptions *o,
                             const char *want, const char *hidden)
{
    g_autoptr(Error) err = NULL;
    uint8_t *data;
    size_t n;

    g_assert_cmpint(qcrypto_secret_add_opts(id, o, &err), ==, -1);
    g_assert_nonnull(err);
    if (!strstr(error_get_pretty(err), want)) {
        g_error("message '%s' lacks '%s'", error_get_pretty(err), want);
    }
    if (hidden) {
        g_assert_null(strstr(error_get_pretty(err), hidden));
    }
    g_assert_cmpint(qcrypto_secret_lookup(id, &data, &n, NULL), ==, -1);
}

static void add_ok(const char *id, const QCryptoSecretOptions *o)
{
    g_autoptr(Error) err = NULL;

    g_assert_cmpint(qcrypto_secret_add_opts(id, o, &err), ==, 0);
    g_assert_null(err);
}

/* A file holding len bytes of data, removed by the caller. */
static char *write_temp_file(const void *data, size_t len)
{
    g_autoptr(GError) gerr = NULL;
    char *path = NULL;
    int fd = g_file_open_tmp("test-crypto-secret-XXXXXX", &path, &gerr);

    g_assert_no_error(gerr);
    g_assert_cmpint(write(fd, data, len), ==, (ssize_t)len);
    close(fd);
    return path;
}

static void register_master_key(const char *id)
{
    g_autofree uint8_t *key = test_unhex(KEY_HEX, NULL);
    g_autofree char *b64 = g_base64_encode(key, 32);
    QCryptoSecretOptions o = {
        .data = b64, .format = QCRYPTO_SECRET_FORMAT_BASE64,
    };

    add_ok(id, &o);
}

/* AES-256-CBC of buf (a whole number of blocks) under KEY_HEX, IV_B64. */
static void encrypt_blocks(uint8_t *buf, size_t len)
{
    g_autofree uint8_t *key = test_unhex(KEY_HEX, NULL);
    g_autofree uint8_t *iv = test_unhex("a0a1a2a3a4a5a6a7a8a9aaabacadaeaf",
                                        NULL);
    g_autoptr(QCryptoCipher) aes = NULL;

    aes = qcrypto_cipher_new(QCRYPTO_CIPHER_ALGO_AES_256,
                             QCRYPTO_CIPHER_MODE_CBC, key, 32, NULL);
    g_assert_nonnull(aes);
    g_assert_cmpint(qcrypto_cipher_setiv(aes, iv, 16, NULL), ==, 0);
    g_assert_cmpint(qcrypto_cipher_encrypt(aes, buf, buf, len, NULL), ==, 0);
}

/* base64 of the encryption of plain with PKCS#7 padding. */
static char *encrypt_padded(const void *plain, size_t len)
{
    size_t padded = (len / 16 + 1) * 16;
    g_autofree uint8_t *buf = g_malloc(padded);

    memcpy(buf, plain, len);
    memset(buf + len, padded - len, padded - len);
    encrypt_blocks(buf, padded);
    return g_base64_encode(buf, padded);
}

/* base64 of the encryption of blocks as they are (no padding added). */
static char *encrypt_raw(const char *hex)
{
    size_t len;
    g_autofree uint8_t *buf = test_unhex(hex, &len);

    encrypt_blocks(buf, len);
    return g_base64_encode(buf, len);
}

static void test_data_raw(void)
{
    static const char pass[] = "pass, word \xc3\xa9\xff";
    g_autoptr(Error) err = NULL;
    QCryptoSecretOptions o = { .data = pass };

    add_ok("s0", &o);
    assert_secret("s0", pass, strlen(pass));
    /* An empty value is a secret too: existing slots may have one. */
    o.data = "";
    add_ok("empty", &o);
    assert_secret("empty", "", 0);
    /* A second s0 is refused, and the first one kept. */
    g_assert_cmpint(qcrypto_secret_add_opts("s0", &o, &err), ==, -1);
    g_assert_cmpstr(error_get_pretty(err), ==, "Duplicate ID 's0' for object");
    assert_secret("s0", pass, strlen(pass));
    qcrypto_secret_clear_all();
}

static void test_file_binary(void)
{
    static const uint8_t key[] = { 0, 0xff, 'a', 0, 0x80, '\n' };
    g_autofree char *path = write_temp_file(key, sizeof(key));
    QCryptoSecretOptions o = { .file = path };

    add_ok("k", &o);
    assert_secret("k", key, sizeof(key));
    unlink(path);
    qcrypto_secret_clear_all();
}

static void test_missing_parts(void)
{
    QCryptoSecretOptions none = { 0 };
    QCryptoSecretOptions both = { .data = "x", .file = "/dev/null" };

    assert_add_fails("s", &none, "exactly one of 'data' and 'file'", NULL);
    assert_add_fails("s", &both, "exactly one of 'data' and 'file'", NULL);
    assert_add_fails(NULL, &both, "Parameter 'id' is missing", NULL);
    assert_add_fails("", &both, "Parameter 'id' is missing", NULL);
}

/* RFC 4648, section 10, and the forms around them. */
static void test_base64_valid(void)
{
    static const struct {
        const char *b64, *plain;
    } vectors[] = {
        { "", "" },
        { "Zg==", "f" },
        { "Zm8=", "fo" },
        { "Zm9v", "foo" },
        { "Zm9vYg==", "foob" },
        { "Zm9vYmE=", "fooba" },
        { "Zm9vYmFy", "foobar" },
        /* '\n' is skipped, as QEMU does: base64(1) output ends with one. */
        { "Zm9v\nYmFy\n", "foobar" },
        { "\n", "" },
        { "w6k=", "\xc3\xa9" },
        { "//79", "\xff\xfe\xfd" },
    };

    for (size_t i = 0; i < G_N_ELEMENTS(vectors); i++) {
        g_autofree char *id = g_strdup_printf("v%zu", i);
        QCryptoSecretOptions o = {
            .data = vectors[i].b64, .format = QCRYPTO_SECRET_FORMAT_BASE64,
        };

        add_ok(id, &o);
        assert_secret(id, vectors[i].plain, strlen(vectors[i].plain));
    }
    qcrypto_secret_clear_all();
}

static void test_base64_invalid(void)
{
    static const char *const invalid[] = {
        "Z",            /* the fuzz-options finding: was a GLib-CRITICAL */
        "Zg", "Zg=", "Zm9", "Zm9vY",        /* not whole groups */
        "=", "==", "Z===", "====",          /* padding with no byte */
        "Zg==Zg==", "Zg=a", "Zm8=Zm9v",     /* data after the padding */
        "Zm9v!", "Zm 9v", "Zm9v\r\n", "Zm-_", "Zm9v\xc3\xa9",
    };

    for (size_t i = 0; i < G_N_ELEMENTS(invalid); i++) {
        QCryptoSecretOptions o = {
            .data = invalid[i], .format = QCRYPTO_SECRET_FORMAT_BASE64,
        };

        assert_add_fails("s", &o, "Secret 's': data is not valid base64",
                         strlen(invalid[i]) > 2 ? invalid[i] : NULL);
    }
}

/* The same ciphertext as openssl makes it, and as base64 from a file. */
static void test_encrypted_known_answer(void)
{
    /*
     * printf 'libvirt secret \xc3\xa9' |
     *     openssl enc -aes-256-cbc -K 000102...1f -iv a0a1...af
     */
    static const char ct_hex[] =
        "069dbdef5e5d650d8cb86697d51d0d02"
        "4c4d156b25598159c23ae15482c9f5bb";
    size_t ctlen;
    g_autofree uint8_t *ct = test_unhex(ct_hex, &ctlen);
    g_autofree char *ct_b64 = g_base64_encode(ct, ctlen);
    g_autofree char *b64_file = NULL, *raw_file = NULL;
    g_autofree char *b64_nl = g_strconcat(ct_b64, "\n", NULL);
    const char *plain = "libvirt secret \xc3\xa9";
    QCryptoSecretOptions o = {
        .data = ct_b64, .format = QCRYPTO_SECRET_FORMAT_BASE64,
        .keyid = "master", .iv = IV_B64,
    };

    register_master_key("master");
    add_ok("s0", &o);
    assert_secret("s0", plain, strlen(plain));

    /* format=raw: the file holds the ciphertext's bytes. */
    raw_file = write_temp_file(ct, ctlen);
    o = (QCryptoSecretOptions) {
        .file = raw_file, .keyid = "master", .iv = IV_B64,
    };
    add_ok("s1", &o);
    assert_secret("s1", plain, strlen(plain));

    /* format=base64 from a file written by base64(1): newline at the end. */
    b64_file = write_temp_file(b64_nl, strlen(b64_nl));
    o.file = b64_file;
    o.format = QCRYPTO_SECRET_FORMAT_BASE64;
    add_ok("s2", &o);
    assert_secret("s2", plain, strlen(plain));

    /* An empty plaintext is one block of padding (openssl's, too). */
    o = (QCryptoSecretOptions) {
        .data = "YA0Ho7myxOQIIVPW0XB6pg==",
        .format = QCRYPTO_SECRET_FORMAT_BASE64,
        .keyid = "master", .iv = IV_B64,
    };
    add_ok("s3", &o);
    assert_secret("s3", "", 0);

    unlink(raw_file);
    unlink(b64_file);
    qcrypto_secret_clear_all();
}

/* Every plaintext length around the block size survives the round trip. */
static void test_encrypted_lengths(void)
{
    uint8_t plain[50];

    for (size_t i = 0; i < sizeof(plain); i++) {
        plain[i] = 0xa5 ^ (i * 37);     /* NULs and high bytes too */
    }
    register_master_key("master");
    for (size_t len = 0; len <= sizeof(plain); len++) {
        g_autofree char *id = g_strdup_printf("s%zu", len);
        g_autofree char *ct = encrypt_padded(plain, len);
        QCryptoSecretOptions o = {
            .data = ct, .format = QCRYPTO_SECRET_FORMAT_BASE64,
            .keyid = "master", .iv = IV_B64,
        };

        add_ok(id, &o);
        assert_secret(id, plain, len);
    }
    qcrypto_secret_clear_all();
}

/* The master key may itself come encrypted: it is plaintext once added. */
static void test_encrypted_master_key(void)
{
    g_autofree uint8_t *key = test_unhex(KEY_HEX, NULL);
    g_autofree char *key_ct = encrypt_padded(key, 32);
    g_autofree char *ct = encrypt_padded("pw", 2);
    QCryptoSecretOptions o = {
        .data = key_ct, .format = QCRYPTO_SECRET_FORMAT_BASE64,
        .keyid = "master", .iv = IV_B64,
    };

    register_master_key("master");
    add_ok("master2", &o);
    o.data = ct;
    o.keyid = "master2";
    add_ok("s0", &o);
    assert_secret("s0", "pw", 2);
    qcrypto_secret_clear_all();
}

/* Plaintexts (before encryption) whose padding is not PKCS#7. */
static void test_encrypted_bad_padding(void)
{
    static const char *const blocks[] = {
        "70617373776f726400000000000000 00",    /* pad 0 */
        "70617373776f72640000000000000011",     /* pad 17 */
        "70617373776f726400000000000000ff",     /* pad 255 */
        "70617373776f72640808080808080708",     /* one byte of 8 differs */
        "70617373776f72640303030303030203",     /* ... of 3 */
        "70617373776f72640000000000000000"      /* pad 16, but ... */
        "0f101010101010101010101010101010",     /* ... 15 of them */
        "0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f"
        "0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f10",     /* 16 in the last byte only */
    };

    register_master_key("master");
    for (size_t i = 0; i < G_N_ELEMENTS(blocks); i++) {
        g_autofree char *ct = encrypt_raw(blocks[i]);
        QCryptoSecretOptions o = {
            .data = ct, .format = QCRYPTO_SECRET_FORMAT_BASE64,
            .keyid = "master", .iv = IV_B64,
        };

        assert_add_fails("s", &o, "Secret 's': cannot decrypt it: its "
                         "padding is wrong", "password");
    }
    qcrypto_secret_clear_all();
}

/* A wrong master key, or a wrong iv, is caught by the padding. */
static void test_encrypted_wrong_key_or_iv(void)
{
    /*
     * Deterministic: under this wrong key and this wrong iv the padding
     * comes out invalid (as it does for all but about 1 in 200 keys).
     */
    g_autofree char *ct = encrypt_padded("the passphrase", 14);
    g_autofree char *other = g_base64_encode((const guchar *)
                                             "0123456789abcdef0123456789abcdef",
                                             32);
    QCryptoSecretOptions key = {
        .data = other, .format = QCRYPTO_SECRET_FORMAT_BASE64,
    };
    QCryptoSecretOptions o = {
        .data = ct, .format = QCRYPTO_SECRET_FORMAT_BASE64,
        .keyid = "other", .iv = IV_B64,
    };

    register_master_key("master");
    add_ok("other", &key);
    assert_add_fails("s", &o, "its padding is wrong", "passphrase");
    /* CBC: a wrong iv only changes the first block; the padding is in it. */
    o.keyid = "master";
    o.iv = "AAAAAAAAAAAAAAAAAAAAAA==";
    assert_add_fails("s", &o, "its padding is wrong", "passphrase");
    qcrypto_secret_clear_all();
}

static void test_encrypted_refusals(void)
{
    g_autofree char *ct = encrypt_padded("pw", 2);
    static const struct {
        const char *keyid, *iv, *data, *want;
        QCryptoSecretFormat format;
    } cases[] = {
        { "master", NULL, "x", "IV is required to decrypt secret" },
        { NULL, IV_B64, "x", "'iv' is given without 'keyid'" },
        /* qemu-img's words and order: the key is checked before the iv. */
        { "nope", NULL, "x", "No secret with id 'nope'" },
        { "nope", IV_B64, "x", "No secret with id 'nope'" },
        { "short", NULL, "x", "Key should be 32 bytes in length" },
        { "short", IV_B64, "x", "Key should be 32 bytes in length" },
        { "long", IV_B64, "x", "Key should be 32 bytes in length" },
        { "master", "oKGio6SlpqeoqaqrrK2u", "x",
          "'iv' must be 16 bytes long, not 15" },
        { "master", "oKGio6SlpqeoqaqrrK2ur7A=", "x",
          "'iv' must be 16 bytes long, not 17" },
        { "master", "oKGio6Slpqeo!aqrrK2urw==", "x",
          "'iv' is not valid base64" },
        { "master", IV_B64, "Zm9v!", "encrypted data is not valid base64",
          QCRYPTO_SECRET_FORMAT_BASE64 },
        { "master", IV_B64, "", "whole number of 16-byte AES blocks, and it "
          "has 0 bytes", QCRYPTO_SECRET_FORMAT_BASE64 },
        { "master", IV_B64, "Zm9vYmFy", "whole number of 16-byte AES blocks, "
          "and it has 6 bytes", QCRYPTO_SECRET_FORMAT_BASE64 },
        /* Raw: the base64 text itself is the (wrong-sized) ciphertext. */
        { "master", IV_B64, "Zm9vYmFy", "and it has 8 bytes" },
    };
    QCryptoSecretOptions k31 = { .data = "0123456789012345678901234567890" };
    QCryptoSecretOptions k33 = {
        .data = "012345678901234567890123456789012",
    };

    register_master_key("master");
    add_ok("short", &k31);
    add_ok("long", &k33);
    for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
        QCryptoSecretOptions o = {
            .data = cases[i].data, .format = cases[i].format,
            .keyid = cases[i].keyid, .iv = cases[i].iv,
        };

        assert_add_fails("s", &o, cases[i].want, NULL);
    }
    /* The well-formed secret is accepted: the refusals above are real. */
    {
        QCryptoSecretOptions o = {
            .data = ct, .format = QCRYPTO_SECRET_FORMAT_BASE64,
            .keyid = "master", .iv = IV_B64,
        };

        add_ok("s", &o);
        assert_secret("s", "pw", 2);
    }
    qcrypto_secret_clear_all();
}

/* keyid without iv is refused before file= is read (stdin is read once). */
static void test_refused_before_reading(void)
{
    QCryptoSecretOptions o = {
        .file = "/nonexistent/secret", .keyid = "master",
    };

    register_master_key("master");
    assert_add_fails("s", &o, "IV is required to decrypt secret", NULL);
    o.keyid = "nope";
    assert_add_fails("s", &o, "No secret with id 'nope'", NULL);
    qcrypto_secret_clear_all();
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/crypto/secret/data-raw", test_data_raw);
    g_test_add_func("/crypto/secret/file-binary", test_file_binary);
    g_test_add_func("/crypto/secret/missing-parts", test_missing_parts);
    g_test_add_func("/crypto/secret/base64/valid", test_base64_valid);
    g_test_add_func("/crypto/secret/base64/invalid", test_base64_invalid);
    g_test_add_func("/crypto/secret/encrypted/known-answer",
                    test_encrypted_known_answer);
    g_test_add_func("/crypto/secret/encrypted/lengths",
                    test_encrypted_lengths);
    g_test_add_func("/crypto/secret/encrypted/master-key-encrypted",
                    test_encrypted_master_key);
    g_test_add_func("/crypto/secret/encrypted/bad-padding",
                    test_encrypted_bad_padding);
    g_test_add_func("/crypto/secret/encrypted/wrong-key-or-iv",
                    test_encrypted_wrong_key_or_iv);
    g_test_add_func("/crypto/secret/encrypted/refusals",
                    test_encrypted_refusals);
    g_test_add_func("/crypto/secret/encrypted/refused-before-reading",
                    test_refused_before_reading);
    return g_test_run();
}
