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
 * The LUKS creation options (-o of create -O luks) from opts, taken out of
 * it; the secret (key-secret) is required when need_secret. Free with
 * block_crypto_create_opts_clear(); on failure nothing is left to free.
 */
int block_crypto_take_create_opts(GHashTable *opts,
                                  QCryptoBlockCreateOptions *copts,
                                  bool need_secret, Error **errp);
void block_crypto_create_opts_clear(QCryptoBlockCreateOptions *copts);

#endif
