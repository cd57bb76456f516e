/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * What the formats with LUKS inside share with the luks driver: taking
 * the secret named by an option (key-secret, encrypt.key-secret, ...);
 * and what the formats a LUKS image may pass for share with it: the
 * refusal of an image being decrypted in place.
 */
#ifndef BLOCK_CRYPTO_H
#define BLOCK_CRYPTO_H

#include <stdbool.h>
#include <glib.h>

#include "block/block.h"
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

/*
 * Whether the image in the file named filename is being decrypted in
 * place (qemu-img-lite reencrypt --decrypt, cryptsetup reencrypt
 * --decrypt --header): its default detached header, FILENAME.luks2-header,
 * is a LUKS2 header with a re-encryption requirement (or one too damaged
 * to tell, or one exported whose init has not finished). The file then holds part plain text, part ciphertext, and no
 * header of its own. The header file is read through a "file" node.
 */
bool block_crypto_decrypt_in_progress(const char *filename);

/*
 * For the open of a format node on file (luks; raw, which such a file
 * may probe as): refuse an image being decrypted in place, saying how to
 * finish the decryption, unless flags has BDRV_O_REENCRYPT.
 */
int block_crypto_check_not_decrypting(BlockDriverState *file, int flags,
                                      Error **errp);

/*
 * The same, and an image whose own LUKS2 header (either copy) is being
 * re-encrypted (an encryption in place, a new volume key): every format
 * refuses it, saying how to finish, unless flags has BDRV_O_REENCRYPT.
 */
int block_crypto_check_not_reencrypting(BlockDriverState *file, int flags,
                                        Error **errp);

/*
 * Online re-encryption: a luks node opened with reencrypt=on serves the
 * image while it gets a new volume key (docs/reencrypt.md, "Online").
 * progress is called between zones with the bytes done and the data's
 * size (ended false): true pauses the run, and it is asked again about
 * five times a second until false. Once more when the run ends (ended
 * true; err set if it failed, NULL if it finished or was stopped by the
 * node's close), its return then ignored. It runs on the run's thread.
 */
typedef bool BlockCryptoOnlineProgress(void *opaque, uint64_t done,
                                       uint64_t size, bool ended,
                                       const Error *err);
/* Whether bs is a luks node opened with reencrypt=on. */
bool block_crypto_online_node(const BlockDriverState *bs);
/*
 * Start bs's run (after any fork: it is a thread); false if bs is not a
 * luks node opened with reencrypt=on.
 */
bool block_crypto_online_start_node(BlockDriverState *bs,
                                    BlockCryptoOnlineProgress *progress,
                                    void *opaque);

#endif
