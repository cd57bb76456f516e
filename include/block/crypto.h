/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * What the formats with LUKS inside share with the luks driver: taking
 * the secret named by an option (key-secret, encrypt.key-secret, ...).
 */
#ifndef BLOCK_CRYPTO_H
#define BLOCK_CRYPTO_H

#include <stdbool.h>
#include <glib.h>

#include "crypto/block.h"
#include "qemu/error.h"

/*
 * Take option @key from @opts and look up the secret it names into
 * @secret (free it with qcrypto_secret_value_free). No option: an error
 * if @required, else 0 with @secret untouched. *@has (if given) says
 * whether a secret was found.
 */
int block_crypto_take_secret(GHashTable *opts, const char *key,
                             bool required, bool *has,
                             QCryptoBlockSecret *secret, Error **errp);

/*
 * The LUKS creation options (cipher-alg, ..., key-secret, as the luks
 * driver takes them) from opts, for a format that keeps a LUKS header
 * inside (qcow2's "encrypt." options, prefix removed). On failure nothing
 * is left to clear; on success clear copts with the function below.
 */
int block_crypto_take_luks_create_opts(GHashTable *opts,
                                       QCryptoBlockCreateOptions *copts,
                                       bool need_secret, Error **errp);
void block_crypto_clear_luks_create_opts(QCryptoBlockCreateOptions *copts);
/* The same for amend (state, keyslot, old-secret, new-secret, ...). */
int block_crypto_take_luks_amend_opts(GHashTable *opts,
                                      QCryptoBlockAmendOptions *aopts,
                                      Error **errp);
void block_crypto_clear_luks_amend_opts(QCryptoBlockAmendOptions *aopts);

#endif
