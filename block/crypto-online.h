/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Online re-encryption inside the luks driver (block/crypto-online.c):
 * what block/crypto.c calls. The progress callback type is public
 * (include/block/crypto.h).
 */
#ifndef BLOCK_CRYPTO_ONLINE_H
#define BLOCK_CRYPTO_ONLINE_H

#include "block/crypto.h"

typedef struct BlockCryptoOnline BlockCryptoOnline;

/*
 * Start a new volume key on the image in file (or find the one it is
 * in), unlocked with secret; takes the reencrypt-* options from opts.
 * Nothing runs until block_crypto_online_start().
 */
BlockCryptoOnline *block_crypto_online_open(BlockDriverState *file,
                                            GHashTable *opts,
                                            const QCryptoBlockSecret *secret,
                                            Error **errp);
void block_crypto_online_start(BlockCryptoOnline *o,
                               BlockCryptoOnlineProgress *progress,
                               void *opaque);
/* Stops the run between zones (resumable), frees o. */
void block_crypto_online_close(BlockCryptoOnline *o);

uint64_t block_crypto_online_size(BlockCryptoOnline *o);
uint32_t block_crypto_online_sector_size(BlockCryptoOnline *o);
/* Whole sectors of block_crypto_online_sector_size() */
int block_crypto_online_pread(BlockCryptoOnline *o, uint64_t off,
                              uint8_t *buf, size_t len, Error **errp);
int block_crypto_online_pwrite(BlockCryptoOnline *o, uint64_t off,
                               uint8_t *buf, size_t len, Error **errp);

#endif
