/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The registry of TLS credential sets (include/crypto/tlscreds.h). Like
 * the secrets' registry, process-wide: the tool registers the sets its
 * --object arguments define, once, before opening anything.
 */
#include <glib.h>

#include "crypto/tlscreds.h"

static GHashTable *tls_creds;

static void tls_creds_free(gpointer p)
{
    QCryptoTLSCreds *c = p;

    g_free(c->dir);
    g_free(c->username);
    g_free(c->priority);
    g_free(c);
}

static int tls_creds_need_file(const char *id, const char *dir,
                               const char *name, Error **errp)
{
    g_autofree char *path = g_build_filename(dir, name, NULL);

    if (!g_file_test(path, G_FILE_TEST_IS_REGULAR)) {
        error_setg(errp, "TLS credentials '%s': no file '%s'", id, path);
        return -1;
    }
    return 0;
}

int qcrypto_tls_creds_add(const char *id, const QCryptoTLSCreds *creds,
                          Error **errp)
{
    QCryptoTLSCreds *c;
    bool server = creds->endpoint == QCRYPTO_TLS_CREDS_ENDPOINT_SERVER;

    if (!id || !*id) {
        error_setg(errp, "Parameter 'id' is missing");
        return -1;
    }
    if (tls_creds && g_hash_table_contains(tls_creds, id)) {
        error_setg(errp, "attempt to add duplicate property '%s' to object "
                   "(type 'container')", id);
        return -1;
    }
    if (!creds->dir || !*creds->dir) {
        error_setg(errp, "TLS credentials '%s': 'dir' is missing", id);
        return -1;
    }
    if (!g_file_test(creds->dir, G_FILE_TEST_IS_DIR)) {
        error_setg(errp, "TLS credentials '%s': '%s' is not a directory", id,
                   creds->dir);
        return -1;
    }
    if (creds->type == QCRYPTO_TLS_CREDS_PSK) {
        if (tls_creds_need_file(id, creds->dir, "keys.psk", errp) < 0) {
            return -1;
        }
    } else {
        /* A client's own certificate is optional, a server's is not. */
        if (tls_creds_need_file(id, creds->dir, "ca-cert.pem", errp) < 0 ||
            (server &&
             (tls_creds_need_file(id, creds->dir, "server-cert.pem",
                                  errp) < 0 ||
              tls_creds_need_file(id, creds->dir, "server-key.pem",
                                  errp) < 0))) {
            return -1;
        }
    }
    c = g_new0(QCryptoTLSCreds, 1);
    *c = *creds;
    c->dir = g_strdup(creds->dir);
    c->username = g_strdup(creds->username);
    c->priority = g_strdup(creds->priority);
    if (!tls_creds) {
        tls_creds = g_hash_table_new_full(g_str_hash, g_str_equal, g_free,
                                          tls_creds_free);
    }
    g_hash_table_insert(tls_creds, g_strdup(id), c);
    return 0;
}

const QCryptoTLSCreds *qcrypto_tls_creds_lookup(const char *id,
                                                Error **errp)
{
    QCryptoTLSCreds *c = tls_creds ? g_hash_table_lookup(tls_creds, id)
                                   : NULL;

    if (!c) {
        error_setg(errp, "No TLS credentials with id '%s'", id);
    }
    return c;
}

char *qcrypto_tls_creds_psk_file(const QCryptoTLSCreds *creds)
{
    return g_build_filename(creds->dir, "keys.psk", NULL);
}

void qcrypto_tls_creds_clear_all(void)
{
    g_clear_pointer(&tls_creds, g_hash_table_destroy);
}
