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

#include "crypto/secret.h"
#include "crypto/secure-mem.h"

/*
 * The largest secret file read: cryptsetup's default limit on a key file
 * (--keyfile-size-max, 8 MiB). It also bounds what file=/dev/stdin swallows.
 */
#define SECRET_FILE_MAX (8u << 20)

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

/* Replace *data (a secure value) by its base64 decoding. */
static int secret_decode_base64(uint8_t **data, size_t *len, Error **errp)
{
    gsize n;

    /*
     * g_base64_decode() accepts anything: check the alphabet first. The
     * message never shows the offending byte: it is part of the secret.
     */
    for (size_t i = 0; i < *len; i++) {
        if (!g_ascii_isalnum((*data)[i]) && !strchr("+/=", (*data)[i])) {
            error_setg(errp, "Secret data is not valid base64");
            return -1;
        }
    }
    /* In place, so the decoded secret is never outside a secure buffer. */
    g_base64_decode_inplace((gchar *)*data, &n);
    {
        uint8_t *decoded = secret_value_new(*data, n);

        qcrypto_secret_value_free(*data, *len);
        *data = decoded;
        *len = n;
    }
    return 0;
}

int qcrypto_secret_add(const char *id, const char *data, const char *file,
                       QCryptoSecretFormat format, Error **errp)
{
    QCryptoSecret *s;
    uint8_t *value;
    size_t len;

    if (!id || !*id) {
        error_setg(errp, "Parameter 'id' is missing");
        return -1;
    }
    if (!data == !file) {
        error_setg(errp, "Secret '%s': exactly one of 'data' and 'file' "
                   "is needed", id);
        return -1;
    }
    if (!secrets) {
        secrets = g_hash_table_new_full(g_str_hash, g_str_equal,
                                        g_free, secret_free);
    }
    if (g_hash_table_contains(secrets, id)) {
        error_setg(errp, "Duplicate ID '%s' for object", id);
        return -1;
    }
    if (data) {
        len = strlen(data);
        value = secret_value_new(data, len);
    } else if (secret_read_file(file, &value, &len, errp) < 0) {
        return -1;
    }
    if (format == QCRYPTO_SECRET_FORMAT_BASE64 &&
        secret_decode_base64(&value, &len, errp) < 0) {
        qcrypto_secret_value_free(value, len);
        return -1;
    }
    s = g_new0(QCryptoSecret, 1);
    s->data = value;
    s->len = len;
    g_hash_table_insert(secrets, g_strdup(id), s);
    return 0;
}

int qcrypto_secret_lookup(const char *id, uint8_t **data, size_t *len,
                          Error **errp)
{
    QCryptoSecret *s = secrets ? g_hash_table_lookup(secrets, id) : NULL;

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
