/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * TLS credentials (QEMU's "--object tls-creds-x509,id=ID,dir=DIR,..." and
 * "tls-creds-psk,id=ID,dir=DIR,..."): named sets of certificate or
 * pre-shared-key files that an NBD client node ("tls-creds=ID") or the
 * NBD server ("--tls-creds ID") refers to. This registry only records
 * where the files are and how they are to be used: the TLS itself is
 * libnbd's (client) or nbdkit's (server), each reading the files.
 *
 * The files are QEMU's: for x509, DIR holds ca-cert.pem, and
 * server-cert.pem + server-key.pem (endpoint=server) or client-cert.pem +
 * client-key.pem (endpoint=client, optional); for psk, DIR holds keys.psk,
 * "USERNAME:HEXKEY" lines as psktool writes them.
 */
#ifndef QCRYPTO_TLSCREDS_H
#define QCRYPTO_TLSCREDS_H

#include <stdbool.h>

#include "qemu/error.h"

typedef enum {
    QCRYPTO_TLS_CREDS_X509,
    QCRYPTO_TLS_CREDS_PSK,
} QCryptoTLSCredsType;

typedef enum {
    QCRYPTO_TLS_CREDS_ENDPOINT_CLIENT,
    QCRYPTO_TLS_CREDS_ENDPOINT_SERVER,
} QCryptoTLSCredsEndpoint;

typedef struct QCryptoTLSCreds {
    QCryptoTLSCredsType type;
    QCryptoTLSCredsEndpoint endpoint;
    char *dir;
    /* psk, client side: the identity to send (QEMU's default "qemu") */
    char *username;
    /* x509: check the peer's certificate (QEMU's default: on) */
    bool verify_peer;
    /* a GnuTLS priority string, or NULL for the library's default */
    char *priority;
} QCryptoTLSCreds;

/*
 * Register creds under id (copied). The directory must exist and hold
 * the files its type and endpoint need (checked here, so that a mistake
 * is reported when the object is given, not at the first connection).
 */
int qcrypto_tls_creds_add(const char *id, const QCryptoTLSCreds *creds,
                          Error **errp);

/* The credentials registered under id; NULL and errp set if none. */
const QCryptoTLSCreds *qcrypto_tls_creds_lookup(const char *id,
                                                Error **errp);

/* The file a psk set's keys are in (DIR/keys.psk); free it. */
char *qcrypto_tls_creds_psk_file(const QCryptoTLSCreds *creds);

/* Forget every set. */
void qcrypto_tls_creds_clear_all(void);

#endif
