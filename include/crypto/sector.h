/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Sector ciphers: a cipher, an IV generator and the layout of the sectors
 * in one object that encrypts runs of whole sectors, as dm-crypt's crypt
 * target and cryptsetup's crypt_storage do.
 *
 * This is the only code that knows both ciphers and IV generators
 * (layers: cipher <- ivgen <- sector <- formats). A format (LUKS1, LUKS2,
 * qcow2's LUKS encryption) builds one from the cipher spec it parsed and
 * hands it buffers; below it, a cipher backend sees IVs only as numbers
 * (QCryptoCipherSectors in crypto/cipher.h), and only when it has a fast
 * path for them.
 *
 * Nothing here assumes LUKS: the sector numbers are whatever the caller
 * counts (payload sectors for LUKS, host offsets / 512 for qcow2), over
 * the full 64 bits.
 */
#ifndef QCRYPTO_SECTOR_H
#define QCRYPTO_SECTOR_H

#include "crypto/cipher.h"
#include "crypto/hash.h"
#include "crypto/ivgen.h"

typedef struct QCryptoSectorCipher QCryptoSectorCipher;

/*
 * A dm-crypt cipher spec, parsed: "aes-xts-plain64" with a 64-byte key
 * is { AES_256, XTS, PLAIN64 }, "aes-cbc-essiv:sha256" with a 32-byte key
 * { AES_256, CBC, ESSIV, SHA256 }. crypto/dmcrypt-cipher.c reads and
 * writes the strings.
 */
typedef struct QCryptoSectorCipherSpec {
    QCryptoCipherAlgo alg;
    QCryptoCipherMode mode;
    QCryptoIVGenAlgo ivgen;         /* not used by ECB, which has no IV */
    QCryptoHashAlgo ivgen_hash;     /* ESSIV's hash; not used otherwise */
} QCryptoSectorCipherSpec;

/*
 * Build a sector cipher. One rule for every caller:
 * - key is the whole cipher key (both halves for XTS), nkey bytes as
 *   qcrypto_cipher_get_mode_key_len() says;
 * - ECB takes no IV, whatever IV generator spec names (QEMU writes its
 *   ECB images as "ecb-plain64", and dm-crypt ignores it too);
 * - every other mode takes spec->ivgen's IVs; ESSIV's salt is the
 *   ivgen_hash digest of the whole key, as in dm-crypt.
 *
 * sector_size is a non-zero multiple of the cipher's block length. The
 * IV of sector n is the one the IV generator makes of the number
 * (n + iv_offset) << iv_shift, modulo 2^64: LUKS2 counts IVs in 512-byte
 * units whatever its sector size (iv_shift 3 for 4096-byte sectors) and
 * from its iv_tweak; both are 0 for LUKS1. iv_shift is below 64.
 */
QCryptoSectorCipher *qcrypto_sector_cipher_new(
    const QCryptoSectorCipherSpec *spec, const uint8_t *key, size_t nkey,
    size_t sector_size, unsigned iv_shift, uint64_t iv_offset, Error **errp);

/* Free a sector cipher, wiping its key material. NULL is allowed. */
void qcrypto_sector_cipher_free(QCryptoSectorCipher *sc);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(QCryptoSectorCipher, qcrypto_sector_cipher_free)

/*
 * Encrypt / decrypt, in place, len bytes (a whole number of sectors)
 * starting at sector first_sector. A sector cipher keeps state between
 * sectors (its cipher's IV): one thread at a time uses it.
 */
int qcrypto_sector_cipher_encrypt(QCryptoSectorCipher *sc,
                                  uint64_t first_sector,
                                  uint8_t *buf, size_t len, Error **errp);
int qcrypto_sector_cipher_decrypt(QCryptoSectorCipher *sc,
                                  uint64_t first_sector,
                                  uint8_t *buf, size_t len, Error **errp);

size_t qcrypto_sector_cipher_get_sector_size(const QCryptoSectorCipher *sc);

/* The cipher implementation that runs it: "nettle", "aesni", ... */
const char *qcrypto_sector_cipher_get_impl_name(const QCryptoSectorCipher *sc);

/*
 * Whether the cipher backend runs a whole call's sectors itself (the IVs
 * count up and it has a fast path for them), rather than this layer
 * looping over IV generator, setiv and encrypt sector by sector.
 */
bool qcrypto_sector_cipher_is_bulk(const QCryptoSectorCipher *sc);

#endif
