/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * LUKS1 on-disk format, private to crypto/: the header as the LUKS
 * On-Disk Format Specification version 1.2.3 defines it ("the spec"
 * below), its decoding and encoding, its validation, and the mapping of
 * its cipher strings to our algorithms.
 *
 * block-luks-header.c holds everything that only looks at the 592 header
 * bytes; block-luks.c does the key-slot cryptography and the driver table.
 */
#ifndef QCRYPTO_LUKSPRIV_H
#define QCRYPTO_LUKSPRIV_H

#include "crypto/block.h"
#include "crypto/sector.h"

/* The spec, section 2 "LUKS partition header", figure 1 (phdr): sizes. */
#define QCRYPTO_LUKS_MAGIC              "LUKS\xba\xbe"
#define QCRYPTO_LUKS_MAGIC_LEN          6
#define QCRYPTO_LUKS_VERSION            1
#define QCRYPTO_LUKS_CIPHER_NAME_LEN    32
#define QCRYPTO_LUKS_CIPHER_MODE_LEN    32
#define QCRYPTO_LUKS_HASH_SPEC_LEN      32
#define QCRYPTO_LUKS_DIGEST_LEN         20  /* LUKS_DIGESTSIZE */
#define QCRYPTO_LUKS_SALT_LEN           32  /* LUKS_SALTSIZE */
#define QCRYPTO_LUKS_UUID_LEN           40
#define QCRYPTO_LUKS_NUM_KEY_SLOTS      8   /* LUKS_NUMKEYS */
/* 208 bytes of fixed fields, then 8 key slots of 48 bytes (figure 2). */
#define QCRYPTO_LUKS_KEY_SLOTS_OFFSET   208
#define QCRYPTO_LUKS_KEY_SLOT_LEN       48
#define QCRYPTO_LUKS_HEADER_LEN         592

/* The spec's constants LUKS_KEY_ENABLED / LUKS_KEY_DISABLED (slot state). */
#define QCRYPTO_LUKS_KEY_SLOT_ACTIVE    0x00AC71F3
#define QCRYPTO_LUKS_KEY_SLOT_DISABLED  0x0000DEAD

/* The spec's constants LUKS_STRIPES and LUKS_SECTOR_SIZE. */
#define QCRYPTO_LUKS_STRIPES            4000
#define QCRYPTO_LUKS_SECTOR_SIZE        512

/*
 * Where key material starts and how each slot is aligned when we create an
 * image: cryptsetup's LUKS_ALIGN_KEYSLOTS (4096 bytes), which QEMU follows
 * too (spec 1.2.3's 2016 "keyslots alignment" clarification). LUKS
 * 1.0-era tools packed slots at 512-byte sector granularity from sector 2
 * on; we read both.
 */
#define QCRYPTO_LUKS_KEY_SLOT_ALIGN     4096

/*
 * PBKDF2 iteration counts: at least 1000 when we create (the spec's
 * LUKS_MKD_ITERATIONS_MIN, and cryptsetup's and QEMU's minimum); at
 * most this many when we open, so a hostile header cannot keep us busy
 * for hours (2^27 is about a minute of SHA-256 on a 2020s core, far above
 * what a 2000 ms iter-time gives, and what we accept ourselves on create).
 */
#define QCRYPTO_LUKS_MIN_ITERS          1000
#define QCRYPTO_LUKS_MAX_ITERS          (1u << 27)

typedef struct QCryptoLUKSKeySlot {
    uint32_t active;                    /* ACTIVE or DISABLED */
    uint32_t iterations;
    uint8_t salt[QCRYPTO_LUKS_SALT_LEN];
    uint32_t key_offset;                /* in 512-byte sectors */
    uint32_t stripes;
} QCryptoLUKSKeySlot;

/* The header in host byte order; strings are as on disk (NUL-padded). */
typedef struct QCryptoLUKSHeader {
    uint8_t magic[QCRYPTO_LUKS_MAGIC_LEN];
    uint16_t version;
    char cipher_name[QCRYPTO_LUKS_CIPHER_NAME_LEN];
    char cipher_mode[QCRYPTO_LUKS_CIPHER_MODE_LEN];
    char hash_spec[QCRYPTO_LUKS_HASH_SPEC_LEN];
    uint32_t payload_offset;            /* in 512-byte sectors */
    uint32_t key_bytes;
    uint8_t mk_digest[QCRYPTO_LUKS_DIGEST_LEN];
    uint8_t mk_digest_salt[QCRYPTO_LUKS_SALT_LEN];
    uint32_t mk_digest_iter;
    char uuid[QCRYPTO_LUKS_UUID_LEN];
    QCryptoLUKSKeySlot slots[QCRYPTO_LUKS_NUM_KEY_SLOTS];
} QCryptoLUKSHeader;

/* What the header's strings and key_bytes mean, once validated. */
typedef struct QCryptoLUKSCipherSpec {
    QCryptoCipherAlgo cipher_alg;
    QCryptoCipherMode cipher_mode;
    QCryptoIVGenAlgo ivgen_alg;         /* NULL for ECB */
    bool has_ivgen_hash_alg;            /* essiv only */
    QCryptoHashAlgo ivgen_hash_alg;
    QCryptoHashAlgo hash_alg;           /* PBKDF2 and AF hash */
} QCryptoLUKSCipherSpec;

/* What crypto/sector.h builds the payload and key-material ciphers from. */
static inline QCryptoSectorCipherSpec
qcrypto_luks_sector_spec(const QCryptoLUKSCipherSpec *spec)
{
    return (QCryptoSectorCipherSpec) {
        .alg = spec->cipher_alg,
        .mode = spec->cipher_mode,
        .ivgen = spec->ivgen_alg,
        .ivgen_hash = spec->ivgen_hash_alg,
    };
}

static inline uint64_t qcrypto_luks_round_up(uint64_t x, uint64_t align)
{
    return (x + align - 1) / align * align;
}

void qcrypto_luks_header_decode(const uint8_t *buf, QCryptoLUKSHeader *hdr);
void qcrypto_luks_header_encode(const QCryptoLUKSHeader *hdr, uint8_t *buf);

/*
 * Validate every field of hdr and derive its cipher spec. file_size is the
 * size of the header's file (0 if unknown); detached: the payload is in
 * another file. Each failure has its own message.
 */
int qcrypto_luks_header_validate(const QCryptoLUKSHeader *hdr,
                                 uint64_t file_size, bool detached,
                                 QCryptoLUKSCipherSpec *spec, Error **errp);

/* Bytes of key material of a slot on disk: key_bytes * stripes, rounded
 * up to whole sectors (they are encrypted sector by sector). */
uint64_t qcrypto_luks_key_material_len(uint32_t key_bytes, uint32_t stripes);

/*
 * For create: the header strings of a cipher spec ("aes", "xts-plain64",
 * "cbc-essiv:sha256", ...) and key_bytes; fails on a combination LUKS1
 * cannot express or we cannot run.
 */
int qcrypto_luks_cipher_spec_format(const QCryptoLUKSCipherSpec *spec,
                                    QCryptoLUKSHeader *hdr, Error **errp);

/*
 * For create: the key slot offsets (QEMU's and cryptsetup's layout: slots
 * from 4096 bytes on, each aligned to 4096 bytes) and the payload offset
 * in sectors: right after the last slot when align_payload is 0, rounded
 * up to align_payload sectors otherwise, 0 when detached. Sets
 * header_len to the bytes the header's file needs.
 */
int qcrypto_luks_layout(QCryptoLUKSHeader *hdr, uint64_t align_payload,
                        bool detached, uint64_t *header_len, Error **errp);

/* The cipher spec create options ask for, with QEMU's defaults. */
void qcrypto_luks_create_spec(const QCryptoBlockCreateOptions *options,
                              QCryptoLUKSCipherSpec *spec);

/*
 * Key slots of a header the caller holds (block-luks.c), for the LUKS1
 * re-encryption, which keeps two (the old header and the final one).
 * block is any QCryptoBlock: its PBKDF2 limit applies, and readfunc and
 * writefunc get it.
 *
 * open: slot >= 0: 1 if secret opens that slot (mk: the master key), 0
 * if not (or the slot is not active), -1 on another error; slot < 0: the
 * index of the first active slot secret opens, or -1 and errp (the
 * wrong-passphrase error of open).
 */
int qcrypto_luks_keyslot_open(QCryptoBlock *block,
                              const QCryptoLUKSHeader *hdr,
                              const QCryptoLUKSCipherSpec *spec, int slot,
                              const QCryptoBlockSecret *secret,
                              QCryptoBlockReadFunc readfunc, void *opaque,
                              uint8_t *mk, Error **errp);
/*
 * Store mk in slot under secret (PBKDF2 for iter_time ms, 0: the default
 * 2000): the key material is written at the slot's key_offset through
 * writefunc; hdr's slot entry is set active with its salt and iterations
 * (the caller writes the header, after a sync).
 */
int qcrypto_luks_keyslot_store(QCryptoBlock *block, QCryptoLUKSHeader *hdr,
                               const QCryptoLUKSCipherSpec *spec, int slot,
                               const QCryptoBlockSecret *secret,
                               const uint8_t *mk, uint64_t iter_time,
                               QCryptoBlockWriteFunc writefunc, void *opaque,
                               Error **errp);

#endif
