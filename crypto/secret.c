/*
 * The secret registry (see include/crypto/secret.h).
 */
#include <string.h>

#include "crypto/secret.h"

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

void qcrypto_secret_value_free(uint8_t *data, size_t len)
{
    if (data) {
        explicit_bzero(data, len);
        g_free(data);
    }
}

static int secret_read_file(const char *file, uint8_t **data, size_t *len,
                            Error **errp)
{
    g_autoptr(GError) gerr = NULL;
    gchar *contents;
    gsize n;

    if (!g_file_get_contents(file, &contents, &n, &gerr)) {
        error_setg(errp, "Unable to read secret file '%s': %s", file,
                   gerr->message);
        return -1;
    }
    *data = (uint8_t *)contents;
    *len = n;
    return 0;
}

static int secret_decode_base64(uint8_t **data, size_t *len, Error **errp)
{
    g_autofree char *text = g_strndup((char *)*data, *len);
    guchar *decoded;
    gsize n;

    /* g_base64_decode() accepts anything: check the alphabet first. */
    for (const char *p = text; *p; p++) {
        if (!g_ascii_isalnum(*p) && !strchr("+/=", *p)) {
            explicit_bzero(text, *len);
            error_setg(errp, "Secret data is not valid base64");
            return -1;
        }
    }
    decoded = g_base64_decode(text, &n);
    explicit_bzero(text, *len);
    qcrypto_secret_value_free(*data, *len);
    *data = decoded;
    *len = n;
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
        value = (uint8_t *)g_strdup(data);
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
    *data = g_malloc(s->len + 1);
    memcpy(*data, s->data, s->len);
    (*data)[s->len] = 0;
    *len = s->len;
    return 0;
}

void qcrypto_secret_clear_all(void)
{
    g_clear_pointer(&secrets, g_hash_table_unref);
}
