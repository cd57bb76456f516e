/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The secret registry (see include/crypto/secret.h).
 *
 * Every copy of a secret's bytes lives in a secure buffer
 * (crypto/secure-mem.c): locked in RAM where allowed and wiped when freed.
 * Values carry a NUL after their len bytes, so a secure value of len bytes
 * is always an allocation of len + 1.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "crypto/cipher.h"
#include "crypto/secret.h"
#include "crypto/secure-mem.h"

/*
 * The largest secret file read: cryptsetup's default limit on a key file
 * (--keyfile-size-max, 8 MiB). It also bounds what file=/dev/stdin swallows.
 */
#define SECRET_FILE_MAX (8u << 20)

/* Encrypted secrets are AES-256-CBC: a 32-byte key, 16-byte blocks. */
#define SECRET_AES_KEY_LEN 32
#define SECRET_AES_BLOCK 16

typedef struct QCryptoSecret {
    uint8_t *data;
    size_t len;
} QCryptoSecret;

/* Secrets by id. The tool is single-threaded while it registers them. */
static GHashTable *secrets;

static void secret_free(gpointer p)
{
    QCryptoSecret *s = p;

    qcrypto_secret_value_free(s->data, s->len);
    g_free(s);
}

/* A secure copy of len bytes, NUL-terminated. */
static uint8_t *secret_value_new(const void *bytes, size_t len)
{
    uint8_t *v = qcrypto_secure_alloc(len + 1);

    if (len) {
        memcpy(v, bytes, len);
    }
    return v;
}

void qcrypto_secret_value_free(uint8_t *data, size_t len)
{
    qcrypto_secure_free(data, len + 1);
}

/*
 * Read the whole of file into a secure buffer. read(2) rather than
 * g_file_get_contents(), whose growing buffers would leave copies of the
 * secret behind in freed memory; and a loop to EOF rather than the size
 * from fstat(), so pipes and terminals (file=/dev/stdin) work too.
 */
static int secret_read_file(const char *file, uint8_t **data, size_t *len,
                            Error **errp)
{
    struct stat st;
    size_t cap = 4096, n = 0;
    uint8_t *buf;
    int fd = open(file, O_RDONLY | O_CLOEXEC);

    if (fd < 0) {
        error_setg_errno(errp, errno, "Unable to read secret file '%s'", file);
        return -1;
    }
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0 &&
        (uint64_t)st.st_size <= SECRET_FILE_MAX) {
        cap = st.st_size + 1;       /* + 1: EOF is seen without a regrowth */
    }
    buf = qcrypto_secure_alloc(cap + 1);
    for (;;) {
        ssize_t got;

        if (n == cap) {
            uint8_t *bigger;
            size_t bigger_cap = MIN(2 * cap, SECRET_FILE_MAX + 1);

            /* A full buffer of more than the limit: the file is too big. */
            if (cap > SECRET_FILE_MAX) {
                error_setg(errp, "Secret file '%s' is larger than %u MiB",
                           file, SECRET_FILE_MAX >> 20);
                goto fail;
            }
            bigger = qcrypto_secure_alloc(bigger_cap + 1);
            memcpy(bigger, buf, n);
            qcrypto_secure_free(buf, cap + 1);
            buf = bigger;
            cap = bigger_cap;
        }
        got = read(fd, buf + n, cap - n);
        if (got < 0 && errno == EINTR) {
            continue;
        }
        if (got < 0) {
            error_setg_errno(errp, errno, "Unable to read secret file '%s'",
                             file);
            goto fail;
        }
        if (got == 0) {
            break;
        }
        n += got;
    }
    close(fd);
    /* Right-size it, so the value's length gives its allocation. */
    *data = secret_value_new(buf, n);
    *len = n;
    qcrypto_secure_free(buf, cap + 1);
    return 0;

fail:
    close(fd);
    qcrypto_secure_free(buf, cap + 1);
    return -1;
}

/* The 6-bit value of a base64 character (RFC 4648, table 1), or -1. */
static int base64_char_value(uint8_t c)
{
    if (c >= 'A' && c <= 'Z') {
        return c - 'A';
    }
    if (c >= 'a' && c <= 'z') {
        return c - 'a' + 26;
    }
    if (c >= '0' && c <= '9') {
        return c - '0' + 52;
    }
    if (c == '+') {
        return 62;
    }
    if (c == '/') {
        return 63;
    }
    return -1;
}

/*
 * Decode base64 (RFC 4648, section 4) in place, into *outlen bytes;
 * false if buf is not valid base64. Strict where g_base64_decode() is not
 * (it skips what it does not know, and a short input is a GLib-CRITICAL):
 * whole groups of 4 characters, '=' only as the padding of the last one.
 * '\n' is skipped anywhere, as QEMU's qbase64_decode() allows it: a key
 * file written by base64(1) ends with one. The output never overtakes the
 * input (3 bytes for every 4 characters), so the decoded secret is never
 * outside the secure buffer that held it.
 */
static bool base64_decode_inplace(uint8_t *buf, size_t len, size_t *outlen)
{
    uint32_t group = 0;
    size_t nchars = 0, npad = 0, out = 0;

    for (size_t i = 0; i < len; i++) {
        int v = base64_char_value(buf[i]);

        if (buf[i] == '\n') {
            continue;
        }
        if (buf[i] == '=') {
            /* Padding ends a group that holds at least one byte. */
            if (nchars < 2) {
                goto invalid;
            }
            npad++;
            v = 0;
        } else if (v < 0 || npad) {
            /* Not the alphabet, or something after the padding. */
            goto invalid;
        }
        group = group << 6 | (uint32_t)v;
        if (++nchars == 4) {
            buf[out++] = group >> 16;
            if (npad < 2) {
                buf[out++] = group >> 8;
            }
            if (npad < 1) {
                buf[out++] = group;
            }
            group = 0;
            nchars = 0;
        }
    }
    if (nchars) {
        goto invalid;
    }
    *outlen = out;
    return true;

invalid:
    explicit_bzero(&group, sizeof(group));
    return false;
}

/* Replace *data (a secure value) by its base64 decoding. */
static int secret_decode_base64(const char *id, const char *what,
                                uint8_t **data, size_t *len, Error **errp)
{
    size_t n;
    uint8_t *decoded;

    /* The message never shows the offending byte: it is part of a secret. */
    if (!base64_decode_inplace(*data, *len, &n)) {
        error_setg(errp, "Secret '%s': %s is not valid base64", id, what);
        return -1;
    }
    decoded = secret_value_new(*data, n);
    qcrypto_secret_value_free(*data, *len);
    *data = decoded;
    *len = n;
    return 0;
}

/*
 * The length of the plaintext in buf (len bytes, a whole number of AES
 * blocks, len > 0) once its PKCS#7 padding (RFC 5652, section 6.3) is
 * removed, or -1 if the padding is not valid: 1 to 16 bytes, each holding
 * their count. The check looks at the whole last block whatever the
 * padding says, so its time does not tell where the padding went wrong.
 */
static ssize_t pkcs7_unpadded_len(const uint8_t *buf, size_t len)
{
    uint8_t pad = buf[len - 1];
    unsigned bad = (pad == 0) | (pad > SECRET_AES_BLOCK);

    for (size_t i = 1; i <= SECRET_AES_BLOCK; i++) {
        /* Bytes within the padding must equal pad; the others are data. */
        bad |= (i <= pad) & (buf[len - i] != pad);
    }
    return bad ? -1 : (ssize_t)(len - pad);
}

/* A registered secret's value, without a copy (NULL if there is none). */
static const QCryptoSecret *secret_find(const char *id)
{
    return secrets ? g_hash_table_lookup(secrets, id) : NULL;
}

/*
 * An encrypted secret, as QEMU's secret object and libvirt make them:
 * *data (base64-decoded first with format=base64) is AES-256-CBC
 * ciphertext under the 32-byte secret keyid, with the base64 iv, and
 * PKCS#7 padding. Replace *data by the plaintext.
 */
static int secret_decrypt(const char *id, const QCryptoSecretOptions *opts,
                          uint8_t **data, size_t *len, Error **errp)
{
    const QCryptoSecret *key = secret_find(opts->keyid);
    g_autoptr(QCryptoCipher) aes = NULL;
    g_autofree uint8_t *iv = (uint8_t *)g_strdup(opts->iv);   /* no secret */
    size_t ivlen;
    ssize_t plainlen;
    uint8_t *plain;

    /* (secret_check_keyid() made sure of key and iv.) */
    g_assert(key && opts->iv);
    if (!base64_decode_inplace(iv, strlen(opts->iv), &ivlen)) {
        error_setg(errp, "Secret '%s': 'iv' is not valid base64", id);
        return -1;
    }
    if (ivlen != SECRET_AES_BLOCK) {
        error_setg(errp, "Secret '%s': 'iv' must be %d bytes long, not %zu",
                   id, SECRET_AES_BLOCK, ivlen);
        return -1;
    }
    if (opts->format == QCRYPTO_SECRET_FORMAT_BASE64 &&
        secret_decode_base64(id, "encrypted data", data, len, errp) < 0) {
        return -1;
    }
    if (*len == 0 || *len % SECRET_AES_BLOCK) {
        error_setg(errp, "Secret '%s': encrypted data must be a whole number "
                   "of %d-byte AES blocks, and it has %zu bytes", id,
                   SECRET_AES_BLOCK, *len);
        return -1;
    }
    aes = qcrypto_cipher_new(QCRYPTO_CIPHER_ALGO_AES_256,
                             QCRYPTO_CIPHER_MODE_CBC, key->data, key->len,
                             errp);
    if (!aes || qcrypto_cipher_setiv(aes, iv, ivlen, errp) < 0 ||
        qcrypto_cipher_decrypt(aes, *data, *data, *len, errp) < 0) {
        return -1;
    }
    plainlen = pkcs7_unpadded_len(*data, *len);
    if (plainlen < 0) {
        /* What the padding held is plaintext: not shown. */
        error_setg(errp, "Secret '%s': cannot decrypt it: its padding is "
                   "wrong after decryption (a wrong key '%s' or iv, or "
                   "damaged data)", id, opts->keyid);
        return -1;
    }
    plain = secret_value_new(*data, plainlen);
    qcrypto_secret_value_free(*data, *len);
    *data = plain;
    *len = plainlen;
    return 0;
}

/*
 * keyid: the key and the iv, in QEMU's order and words (qemu-img 7.2), but
 * before anything is read (QEMU reads the data first).
 */
static int secret_check_keyid(const QCryptoSecretOptions *opts, Error **errp)
{
    const QCryptoSecret *key = secret_find(opts->keyid);

    if (!key) {
        error_setg(errp, "No secret with id '%s'", opts->keyid);
        return -1;
    }
    if (key->len != SECRET_AES_KEY_LEN) {
        error_setg(errp, "Key should be %d bytes in length",
                   SECRET_AES_KEY_LEN);
        return -1;
    }
    if (!opts->iv) {
        error_setg(errp, "IV is required to decrypt secret");
        return -1;
    }
    return 0;
}

/* What can be checked before anything is read (file=/dev/stdin is read once). */
static int secret_check_options(const char *id,
                                const QCryptoSecretOptions *opts,
                                Error **errp)
{
    if (!id || !*id) {
        error_setg(errp, "Parameter 'id' is missing");
        return -1;
    }
    if (!opts->data == !opts->file) {
        error_setg(errp, "Secret '%s': exactly one of 'data' and 'file' "
                   "is needed", id);
        return -1;
    }
    if (opts->keyid && secret_check_keyid(opts, errp) < 0) {
        return -1;
    }
    /* QEMU ignores a lone iv; it can only be a mistake. */
    if (opts->iv && !opts->keyid) {
        error_setg(errp, "Secret '%s': 'iv' is given without 'keyid' (the "
                   "id of the secret that encrypted this one)", id);
        return -1;
    }
    if (secrets && g_hash_table_contains(secrets, id)) {
        error_setg(errp, "Duplicate ID '%s' for object", id);
        return -1;
    }
    return 0;
}

int qcrypto_secret_add_opts(const char *id, const QCryptoSecretOptions *opts,
                            Error **errp)
{
    QCryptoSecret *s;
    uint8_t *value;
    size_t len;
    int ret;

    if (secret_check_options(id, opts, errp) < 0) {
        return -1;
    }
    if (opts->data) {
        len = strlen(opts->data);
        value = secret_value_new(opts->data, len);
    } else if (secret_read_file(opts->file, &value, &len, errp) < 0) {
        return -1;
    }
    if (opts->keyid) {
        ret = secret_decrypt(id, opts, &value, &len, errp);
    } else if (opts->format == QCRYPTO_SECRET_FORMAT_BASE64) {
        ret = secret_decode_base64(id, "data", &value, &len, errp);
    } else {
        ret = 0;
    }
    if (ret < 0) {
        qcrypto_secret_value_free(value, len);
        return -1;
    }
    if (!secrets) {
        secrets = g_hash_table_new_full(g_str_hash, g_str_equal,
                                        g_free, secret_free);
    }
    s = g_new0(QCryptoSecret, 1);
    s->data = value;
    s->len = len;
    g_hash_table_insert(secrets, g_strdup(id), s);
    return 0;
}

int qcrypto_secret_add(const char *id, const char *data, const char *file,
                       QCryptoSecretFormat format, Error **errp)
{
    QCryptoSecretOptions opts = {
        .data = data,
        .file = file,
        .format = format,
    };

    return qcrypto_secret_add_opts(id, &opts, errp);
}

int qcrypto_secret_lookup(const char *id, uint8_t **data, size_t *len,
                          Error **errp)
{
    const QCryptoSecret *s = secret_find(id);

    if (!s) {
        error_setg(errp, "No secret with id '%s'", id);
        return -1;
    }
    *data = secret_value_new(s->data, s->len);
    *len = s->len;
    return 0;
}

void qcrypto_secret_clear_all(void)
{
    g_clear_pointer(&secrets, g_hash_table_unref);
}
