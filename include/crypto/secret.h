/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Secrets (QEMU's "--object secret,id=ID,data=STR" / "file=PATH"): named
 * passphrases the tool registers once and drivers look up by id
 * ("key-secret=ID"), so no passphrase ever appears in image options.
 *
 * Unlike QEMU, a secret may hold any bytes: cryptsetup's key files are
 * binary. Values are wiped when the registry is cleared.
 *
 * A secret may come encrypted, as libvirt hands them to QEMU: its value is
 * AES-256-CBC ciphertext (PKCS#7 padding) under another secret, the
 * 32-byte master key named by keyid, with the base64 IV iv.
 */
#ifndef QCRYPTO_SECRET_H
#define QCRYPTO_SECRET_H

#include <stddef.h>
#include <stdint.h>

#include "qemu/error.h"

typedef enum {
    QCRYPTO_SECRET_FORMAT_RAW,
    QCRYPTO_SECRET_FORMAT_BASE64,
} QCryptoSecretFormat;

typedef struct QCryptoSecretOptions {
    /* Exactly one of: */
    const char *data;           /* the value itself */
    const char *file;           /* a file whose whole content (any bytes) is */
    /* BASE64: the value is base64 (RFC 4648, '\n' skipped), decoded first */
    QCryptoSecretFormat format;
    /* Both or neither: the value is encrypted (see above). */
    const char *keyid;          /* id of a secret registered before */
    const char *iv;             /* base64 of 16 bytes */
} QCryptoSecretOptions;

/*
 * Register a secret under id, as QEMU's "--object secret" does: load the
 * value, base64-decode it, decrypt it. No message shows a secret's bytes.
 * An empty value is registered (an existing key slot may have an empty
 * passphrase); refusing it for a new key slot is the caller's business.
 */
int qcrypto_secret_add_opts(const char *id, const QCryptoSecretOptions *opts,
                            Error **errp);

/* The same, for a secret that is not encrypted. */
int qcrypto_secret_add(const char *id, const char *data, const char *file,
                       QCryptoSecretFormat format, Error **errp);

/*
 * A copy of the secret's bytes (*len of them; a NUL follows, not counted).
 * Free with qcrypto_secret_value_free().
 */
int qcrypto_secret_lookup(const char *id, uint8_t **data, size_t *len,
                          Error **errp);
void qcrypto_secret_value_free(uint8_t *data, size_t len);

/* Wipe and forget every secret. */
void qcrypto_secret_clear_all(void);

#endif
