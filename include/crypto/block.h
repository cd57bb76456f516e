/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Encrypted image formats (QEMU's crypto/block.h shape): the header and key
 * slots of a LUKS image, and the encryption of its payload sectors. The
 * format code does no I/O of its own: it reads and writes the header
 * through callbacks, so the block layer decides where the bytes live (one
 * file, or a detached header file).
 *
 * Formats sit behind a driver table (crypto/blockpriv.h), one driver per
 * header version (LUKS1, LUKS2): the header picks it on open, luks_version
 * on create, and callers never know which one runs.
 */
#ifndef QCRYPTO_BLOCK_H
#define QCRYPTO_BLOCK_H

#include "crypto/cipher.h"
#include "crypto/hash.h"
#include "crypto/ivgen.h"

typedef struct QCryptoBlock QCryptoBlock;

typedef enum {
    QCRYPTO_BLOCK_FORMAT_LUKS,
    QCRYPTO_BLOCK_FORMAT__MAX,
} QCryptoBlockFormat;

/* Read / write buflen bytes at offset of the header's file. */
typedef int (*QCryptoBlockReadFunc)(QCryptoBlock *block, uint64_t offset,
                                    uint8_t *buf, size_t buflen,
                                    void *opaque, Error **errp);
typedef int (*QCryptoBlockWriteFunc)(QCryptoBlock *block, uint64_t offset,
                                     const uint8_t *buf, size_t buflen,
                                     void *opaque, Error **errp);
/*
 * Make every write so far durable (fdatasync), or fail; once it failed,
 * it must keep failing (the block layer's flush does). A metadata update
 * calls it where the order of its writes matters, as cryptsetup does:
 * key material before the header that enables it, one LUKS2 header copy
 * before the other, a disabled slot's header before its material is
 * wiped. NULL where nothing needs it (a header in memory).
 */
typedef int (*QCryptoBlockFlushFunc)(QCryptoBlock *block, void *opaque,
                                     Error **errp);
/* On create: make room for a header of headerlen bytes (e.g. truncate). */
typedef int (*QCryptoBlockInitFunc)(QCryptoBlock *block, uint64_t headerlen,
                                    void *opaque, Error **errp);

/* The passphrase: any bytes (key files are binary), not NUL-terminated. */
typedef struct QCryptoBlockSecret {
    const uint8_t *data;
    size_t len;
} QCryptoBlockSecret;

typedef struct QCryptoBlockOpenOptions {
    QCryptoBlockFormat format;
    /* Unused with QCRYPTO_BLOCK_OPEN_NO_IO. */
    QCryptoBlockSecret secret;
    /*
     * Size in bytes of the file readfunc reads (the header file when it is
     * detached), or 0 if unknown. When known, key slots and the payload
     * offset are checked against it: a header that points past the end of
     * its file is refused at open instead of failing on a later read.
     */
    uint64_t size;
    /*
     * Key slots (and digests) whose PBKDF2 iteration count is above this
     * are never computed: a hostile header cannot keep us hashing for
     * hours. Such slots stay visible (info) and the others still unlock.
     * 0: QCRYPTO_BLOCK_PBKDF2_ITERS_MAX_DEFAULT. The "luks" driver's open
     * option max-pbkdf2-iterations sets it.
     */
    uint64_t max_pbkdf2_iterations;
} QCryptoBlockOpenOptions;

/* 2^27 PBKDF2-SHA256 iterations: about a minute on a 2020s core. */
#define QCRYPTO_BLOCK_PBKDF2_ITERS_MAX_DEFAULT (1u << 27)

/*
 * Key derivation of a LUKS2 key slot (LUKS2 spec, "keyslots" object, kdf).
 * LUKS1 slots are always PBKDF2.
 */
typedef enum {
    QCRYPTO_BLOCK_KDF_PBKDF2,
    QCRYPTO_BLOCK_KDF_ARGON2I,
    QCRYPTO_BLOCK_KDF_ARGON2ID,
    QCRYPTO_BLOCK_KDF__MAX,
} QCryptoBlockKDF;

/* "pbkdf2", "argon2i", "argon2id"; parse returns -1 if unknown. */
const char *qcrypto_block_kdf_name(QCryptoBlockKDF kdf);
int qcrypto_block_kdf_parse(const char *name);

typedef struct QCryptoBlockCreateOptions {
    QCryptoBlockFormat format;
    QCryptoBlockSecret secret;
    QCryptoCipherAlgo cipher_alg;       /* default aes-256 */
    QCryptoCipherMode cipher_mode;      /* default xts */
    QCryptoIVGenAlgo ivgen_alg;         /* default plain64 */
    bool has_ivgen_hash_alg;
    QCryptoHashAlgo ivgen_hash_alg;     /* for essiv, default sha256 */
    QCryptoHashAlgo hash_alg;           /* default sha256 */
    bool has_iter_time;
    uint64_t iter_time;                 /* ms, default 2000 */
    /*
     * 0: QEMU's layout (key material right after the header, payload right
     * after the last slot). Otherwise the payload offset is aligned to this
     * many 512-byte sectors, as cryptsetup's --align-payload (its default is
     * 2048 = 1 MiB).
     */
    uint64_t align_payload;
    /* The header lives in its own file; the payload starts at offset 0. */
    bool detached_header;

    /*
     * LUKS version to write: 1 (the default: QEMU opens it too) or 2
     * (cryptsetup's default format). 0 means 1.
     */
    int luks_version;
    /* LUKS2 only, each 0 for its default: */
    uint32_t sector_size;   /* 512..4096; 0: see the size rule below */
    bool has_kdf;
    QCryptoBlockKDF kdf;    /* default argon2id */
    uint32_t kdf_memory;    /* argon2 KiB; default 1 GiB, at most half RAM */
    uint32_t kdf_parallel;  /* argon2 lanes; default min(4, CPUs) */
    const char *label;      /* NULL: none; at most 47 bytes */
    /*
     * Bytes of data the new image is to hold: the LUKS2 default sector
     * size depends on it (see qcrypto_block_create_sector_size()).
     */
    uint64_t size;
} QCryptoBlockCreateOptions;

/* Fill opts with the defaults above (everything not set by the caller). */
void qcrypto_block_create_options_init(QCryptoBlockCreateOptions *opts);

typedef struct QCryptoBlockInfoLUKSSlot {
    bool active;
    uint64_t iters;         /* valid when active; LUKS2 argon2: passes */
    uint64_t stripes;
    uint64_t key_offset;    /* bytes */
    /* LUKS2 (valid when active): */
    QCryptoBlockKDF kdf;
    uint32_t kdf_memory;    /* argon2 KiB */
    uint32_t kdf_parallel;  /* argon2 lanes */
    int priority;           /* 0 ignore, 1 normal, 2 high */
    bool bound;             /* its digest covers the data segment */
} QCryptoBlockInfoLUKSSlot;

/* LUKS2: a data segment (LUKS2 spec, "segments" object). */
typedef struct QCryptoBlockInfoLUKS2Segment {
    uint64_t offset;        /* bytes */
    bool size_dynamic;      /* to the end of the file */
    uint64_t size;          /* bytes, unless size_dynamic */
    uint64_t iv_tweak;
    char *encryption;       /* "aes-xts-plain64" */
    uint64_t sector_size;
} QCryptoBlockInfoLUKS2Segment;

/* LUKS2: a token (LUKS2 spec, "tokens" object), kept but not interpreted. */
typedef struct QCryptoBlockInfoLUKS2Token {
    int id;
    char *type;
    uint32_t keyslots;      /* bit i: key slot i */
} QCryptoBlockInfoLUKS2Token;

typedef struct QCryptoBlockInfo {
    QCryptoBlockFormat format;
    int version;                        /* LUKS version: 1 or 2 */
    QCryptoCipherAlgo cipher_alg;
    QCryptoCipherMode cipher_mode;
    QCryptoIVGenAlgo ivgen_alg;
    bool has_ivgen_hash_alg;
    QCryptoHashAlgo ivgen_hash_alg;
    QCryptoHashAlgo hash_alg;
    bool detached_header;
    uint64_t payload_offset;            /* bytes */
    uint64_t master_key_iters;
    char *uuid;
    size_t nslots;
    QCryptoBlockInfoLUKSSlot *slots;    /* index = key slot number */

    /* LUKS2 only: */
    uint64_t sector_size;
    char *label;
    char *subsystem;
    uint64_t metadata_size;             /* each header copy, bytes */
    uint64_t keyslots_size;             /* the key-slot area, bytes */
    size_t nsegments;
    QCryptoBlockInfoLUKS2Segment *segments;
    size_t ntokens;
    QCryptoBlockInfoLUKS2Token *tokens;
} QCryptoBlockInfo;

void qcrypto_block_info_free(QCryptoBlockInfo *info);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(QCryptoBlockInfo, qcrypto_block_info_free)

typedef enum {
    QCRYPTO_BLOCK_AMEND_STATE_ACTIVE,
    QCRYPTO_BLOCK_AMEND_STATE_INACTIVE,
} QCryptoBlockAmendState;

/* qemu-img amend -o state=...,keyslot=...,old-secret=...,new-secret=... */
typedef struct QCryptoBlockAmendOptions {
    QCryptoBlockAmendState state;
    bool has_keyslot;
    int keyslot;
    /* active: unlocks the master key; inactive: selects the slots to erase */
    bool has_old_secret;
    QCryptoBlockSecret old_secret;
    bool has_new_secret;                /* active only */
    QCryptoBlockSecret new_secret;
    bool has_iter_time;
    uint64_t iter_time;
    /* LUKS2 new key slots, each 0 for the create defaults: */
    bool has_kdf;
    QCryptoBlockKDF kdf;
    uint32_t kdf_memory;
    uint32_t kdf_parallel;
} QCryptoBlockAmendOptions;

/* Open flags */
#define QCRYPTO_BLOCK_OPEN_NO_IO (1 << 0)   /* header only: no secret needed */
/*
 * The header is in its own file (QEMU 9's "header" child) and the payload
 * in another, so the header's payload offset counts in the data file: it
 * is not checked against the key slots. It is 0 in detached headers QEMU
 * and we create (cryptsetup's --offset may set another). Without this
 * flag, a header whose payload offset is 0 is refused.
 */
#define QCRYPTO_BLOCK_OPEN_DETACHED (1 << 1)

/* Whether buf (the start of a file) holds a header of this format. */
bool qcrypto_block_has_format(QCryptoBlockFormat format,
                              const uint8_t *buf, size_t len);

QCryptoBlock *qcrypto_block_open(const QCryptoBlockOpenOptions *options,
                                 QCryptoBlockReadFunc readfunc,
                                 void *opaque, unsigned int flags,
                                 Error **errp);

QCryptoBlock *qcrypto_block_create(const QCryptoBlockCreateOptions *options,
                                   QCryptoBlockInitFunc initfunc,
                                   QCryptoBlockWriteFunc writefunc,
                                   void *opaque, Error **errp);

/* Header bytes (payload offset) an image created with options would have. */
int qcrypto_block_calculate_payload_offset(
    const QCryptoBlockCreateOptions *options, uint64_t *payload_offset,
    Error **errp);

/*
 * Size rounding (docs/luks.md, "Size rounding"): the one rule that create,
 * convert, measure and resize follow.
 *
 * The encryption sector size of a new image: options->sector_size if the
 * user asked for one; else for LUKS2 4096 when options->size is a whole
 * number of 4096-byte sectors and 512 when it is not (as cryptsetup 2.6
 * falls back to 512 when the device size is not aligned); LUKS1 is 512.
 */
uint32_t qcrypto_block_create_sector_size(
    const QCryptoBlockCreateOptions *options);
/* size rounded up to whole sectors of sector_size (a power of two). */
uint64_t qcrypto_block_round_to_sectors(uint64_t size, uint64_t sector_size);
/*
 * The payload bytes a new image holds: options->size rounded up to whole
 * sectors of qcrypto_block_create_sector_size(). More than options->size
 * only when a requested sector size forces padding (or size is not a
 * multiple of 512).
 */
uint64_t qcrypto_block_create_payload_size(
    const QCryptoBlockCreateOptions *options);

/*
 * Add or erase key slots. Every write is ordered with flushfunc (see
 * QCryptoBlockFlushFunc), so that a crash or a torn write at any point
 * leaves a header that opens with the old passphrases or the new ones;
 * when it returns 0, all of it is durable.
 */
int qcrypto_block_amend_options(QCryptoBlock *block,
                                QCryptoBlockReadFunc readfunc,
                                QCryptoBlockWriteFunc writefunc,
                                QCryptoBlockFlushFunc flushfunc,
                                void *opaque,
                                const QCryptoBlockAmendOptions *options,
                                bool force, Error **errp);

/*
 * Decrypt / encrypt len bytes in place. offset is relative to the start of
 * the payload; offset and len are multiples of the sector size. Whole runs
 * of sectors go to a sector cipher (crypto/sector.h) in one call.
 */
int qcrypto_block_decrypt(QCryptoBlock *block, uint64_t offset,
                          uint8_t *buf, size_t len, Error **errp);
int qcrypto_block_encrypt(QCryptoBlock *block, uint64_t offset,
                          uint8_t *buf, size_t len, Error **errp);

QCryptoBlockInfo *qcrypto_block_get_info(QCryptoBlock *block, Error **errp);

uint64_t qcrypto_block_get_payload_offset(QCryptoBlock *block);
uint64_t qcrypto_block_get_sector_size(QCryptoBlock *block);

/*
 * The payload's size when the header fixes it, else 0 (the payload runs
 * to the end of the file): a LUKS2 data segment of fixed size, or the
 * size an in-place encryption of ours recorded before cryptsetup finished
 * it (docs/reencrypt.md, "The size").
 */
uint64_t qcrypto_block_get_data_size(QCryptoBlock *block);

/*
 * A warning from opening, for the user, or NULL: e.g. a damaged LUKS2
 * primary header that was recovered from the secondary copy.
 */
const char *qcrypto_block_get_warning(QCryptoBlock *block);

/* Frees the block, wiping the master key and ciphers. NULL is allowed. */
void qcrypto_block_free(QCryptoBlock *block);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(QCryptoBlock, qcrypto_block_free)

#endif
