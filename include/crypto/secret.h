/*
 * Secrets (QEMU's "--object secret,id=ID,data=STR" / "file=PATH"): named
 * passphrases the tool registers once and drivers look up by id
 * ("key-secret=ID"), so no passphrase ever appears in image options.
 *
 * Unlike QEMU, a secret may hold any bytes: cryptsetup's key files are
 * binary. Values are wiped when the registry is cleared.
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

/*
 * Register a secret. Exactly one of data (a string) and file (a path whose
 * whole content, any bytes, is the secret) must be given. With
 * QCRYPTO_SECRET_FORMAT_BASE64 the value is decoded first.
 */
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
