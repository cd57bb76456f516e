/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The encrypted-image format driver table (private to crypto/), in the
 * shape of QEMU's crypto/blockpriv.h.
 *
 * A header version (LUKS1, LUKS2) is a QCryptoBlockDriver: it parses or
 * writes its header through the caller's callbacks and, once it holds the
 * master key, hands the payload cipher to the generic code with
 * qcrypto_block_init_cipher(). crypto/block.c then does the payload
 * encryption for every format the same way: one
 * qcrypto_sector_cipher_*() call per request.
 */
#ifndef QCRYPTO_BLOCKPRIV_H
#define QCRYPTO_BLOCKPRIV_H

#include "crypto/block.h"
#include "crypto/sector.h"

typedef struct QCryptoBlockDriver QCryptoBlockDriver;

struct QCryptoBlock {
    QCryptoBlockFormat format;
    const QCryptoBlockDriver *driver;
    void *opaque;                       /* the format driver's own state */

    uint64_t payload_offset;            /* bytes; 0 with a detached header */
    /*
     * The payload's size when the header fixes it (a LUKS2 data segment
     * of fixed size, or our data-size token); 0: to the end of the file.
     */
    uint64_t data_size;
    uint64_t sector_size;
    bool detached_header;
    /*
     * The IV of payload sector n is that of sector
     * (n + iv_sector_offset) << ivgen_sector_shift: LUKS2 counts IVs in
     * 512-byte units whatever its sector size, from its iv_tweak. Both 0
     * for LUKS1.
     */
    unsigned ivgen_sector_shift;
    uint64_t iv_sector_offset;
    /* What opening found and the user should know (g_malloc'ed) or NULL */
    char *warning;
    /*
     * The most PBKDF2 iterations a key slot or digest may ask of us
     * (QCryptoBlockOpenOptions.max_pbkdf2_iterations, or the default).
     */
    uint64_t max_pbkdf2_iters;

    /* Payload encryption: set by qcrypto_block_init_cipher(). */
    bool has_master_key;
    QCryptoSectorCipherSpec cipher_spec;
    uint8_t *master_key;
    size_t master_key_len;

    /*
     * A pool of sector ciphers, one per thread encrypting at the same
     * time (as QEMU's n_free_ciphers): a cipher carries its IV as state,
     * so two threads must never share one. The pool grows on demand up to
     * QCRYPTO_BLOCK_MAX_CIPHERS; beyond that a thread waits.
     */
    GMutex lock;
    GCond cond;
    QCryptoSectorCipher **free_ciphers; /* n_free of them, LIFO */
    size_t n_free;
    size_t n_ciphers;                   /* created, free or in use */
};

/*
 * The drivers sit in one table (crypto/block.c), which knows none of
 * them by name. Several drivers may share a format, one per version of its
 * header: LUKS1 and LUKS2 are one format to the user (QEMU's "luks", the
 * same magic), and the header's version picks the driver.
 *   open:   the driver whose has_format() claims the file's first
 *           QCRYPTO_BLOCK_PROBE_LEN bytes; else the one whose probe() can
 *           still recover the header; else the format's first driver, whose
 *           open() then says why the file is not of the format.
 *   create: the driver whose version the options ask for (luks_version),
 *           the format's first driver when they ask for none (0).
 */
/*
 * The PBKDF2 iteration limit (docs/luks.md): a slot or digest above it is
 * never computed. The header stays readable (info shows it); unlocking
 * tries the slots within the limit, and when none opens,
 * qcrypto_block_unlock_error() names the ones skipped (bit i: slot i) and
 * the open option that raises the limit.
 */
bool qcrypto_block_pbkdf2_within_limit(const QCryptoBlock *block,
                                       uint64_t iterations);
void qcrypto_block_unlock_error(const QCryptoBlock *block, uint32_t skipped,
                                Error **errp);
/* The error for a digest above the limit ("master key digest"). */
void qcrypto_block_digest_limit_error(const QCryptoBlock *block,
                                      const char *what, uint64_t iterations,
                                      Error **errp);

struct QCryptoBlockDriver {
    QCryptoBlockFormat format;
    int version;                /* of the header this driver reads/writes */
    const char *name;           /* the format's, for messages: "LUKS" */

    /* Read and validate the header; unlock the master key unless NO_IO. */
    int (*open)(QCryptoBlock *block, const QCryptoBlockOpenOptions *options,
                QCryptoBlockReadFunc readfunc, void *opaque,
                unsigned int flags, Error **errp);
    int (*create)(QCryptoBlock *block,
                  const QCryptoBlockCreateOptions *options,
                  QCryptoBlockInitFunc initfunc,
                  QCryptoBlockWriteFunc writefunc,
                  void *opaque, Error **errp);
    int (*amend)(QCryptoBlock *block, QCryptoBlockReadFunc readfunc,
                 QCryptoBlockWriteFunc writefunc,
                 QCryptoBlockFlushFunc flushfunc, void *opaque,
                 const QCryptoBlockAmendOptions *options, bool force,
                 Error **errp);
    /* Fill the format's fields of info (generic ones are already set). */
    int (*get_info)(QCryptoBlock *block, QCryptoBlockInfo *info,
                    Error **errp);
    /* Free block->opaque, wiping whatever secret it holds. */
    void (*cleanup)(QCryptoBlock *block);
    /* Whether buf, the start of a file, holds this driver's header. */
    bool (*has_format)(const uint8_t *buf, size_t buflen);
    /*
     * Optional: whether the file behind readfunc holds a header of this
     * driver that has_format() cannot see from the file's start (LUKS2: a
     * damaged primary header whose secondary copy is intact). Asked on
     * open only when no driver's has_format() claims the file.
     */
    bool (*probe)(QCryptoBlock *block, QCryptoBlockReadFunc readfunc,
                  void *opaque);
    int (*calculate_payload_offset)(const QCryptoBlockCreateOptions *options,
                                    uint64_t *payload_offset, Error **errp);
};

/*
 * Bytes at the start of a file that open hands to has_format(): every
 * driver's magic and version fit (LUKS1 and LUKS2: 6 + 2). No more, so that
 * a file too short for its header gets its driver's error, not a probe's.
 */
#define QCRYPTO_BLOCK_PROBE_LEN 8

extern const QCryptoBlockDriver qcrypto_block_driver_luks;
extern const QCryptoBlockDriver qcrypto_block_driver_luks2;

/* A new block of format, driven by driver (NULL: none yet). */
QCryptoBlock *qcrypto_block_new(QCryptoBlockFormat format,
                                const QCryptoBlockDriver *driver);

/*
 * Called by a driver once it holds the master key, with sector_size,
 * ivgen_sector_shift and iv_sector_offset set: remembers the payload
 * cipher and creates the first sector cipher of the pool (so a bad key or
 * an unsupported algorithm fails here, not on the first read).
 */
int qcrypto_block_init_cipher(QCryptoBlock *block,
                              const QCryptoSectorCipherSpec *spec,
                              const uint8_t *key, size_t nkey,
                              Error **errp);

/* flushfunc, unless it is NULL (see QCryptoBlockFlushFunc). */
int qcrypto_block_flush(QCryptoBlock *block, QCryptoBlockFlushFunc flushfunc,
                        void *opaque, Error **errp);

/*
 * Overwrite len bytes at offset with random data through writefunc: how
 * a format destroys the key material of an erased key slot, so that the
 * master key cannot be recovered from it even with the old passphrase.
 */
int qcrypto_block_wipe_area(QCryptoBlock *block,
                            QCryptoBlockWriteFunc writefunc, void *opaque,
                            uint64_t offset, uint64_t len, Error **errp);

/*
 * Key slots as the shared amend policy (crypto/block-keyslot.c) sees them:
 * slots 0 .. nslots - 1 (at most 32), as bit masks.
 */
typedef struct QCryptoBlockKeyslots {
    int nslots;
    uint32_t active;            /* the slots that hold a key */
    /*
     * The active slots that can open the data: all of them in LUKS1; in
     * LUKS2 those bound to the data segment's digest.
     */
    uint32_t openers;
    /* 1 if secret opens slot i, 0 if not, -1 on any other failure. */
    int (*try_secret)(QCryptoBlock *block, int i,
                      const QCryptoBlockSecret *secret,
                      QCryptoBlockReadFunc readfunc, void *opaque,
                      Error **errp);
} QCryptoBlockKeyslots;

/*
 * amend state=active: the slot a new key goes to (keyslot=N if it is free,
 * or with force even if it is active, as qemu-img amend --force; else the
 * first free slot), or -1 with errp set.
 */
int qcrypto_block_keyslot_select_free(const QCryptoBlockKeyslots *slots,
                                      const QCryptoBlockAmendOptions *options,
                                      bool force, Error **errp);

/*
 * amend state=inactive: sets *erase to the slots to erase: keyslot=N (which
 * old-secret, if given too, must open), or every opener old-secret opens.
 * Refuses to leave no slot that opens the data unless force.
 */
int qcrypto_block_keyslot_select_erase(QCryptoBlock *block,
                                       const QCryptoBlockKeyslots *slots,
                                       QCryptoBlockReadFunc readfunc,
                                       void *opaque,
                                       const QCryptoBlockAmendOptions *options,
                                       bool force, uint32_t *erase,
                                       Error **errp);

#endif
