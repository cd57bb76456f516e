/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * LUKS2 (private to crypto/): the binary headers, the JSON metadata and the
 * key slots of cryptsetup's LUKS2 format, as described in "LUKS2 On-Disk
 * Format Specification" version 1.1.x (cryptsetup's docs/on-disk-format-
 * luks2.pdf; "LUKS2 spec" below).
 *
 * The layout of an image:
 *
 *   0            primary binary header (4096 bytes) + JSON area
 *   hdr_size     secondary binary header + JSON area (same size)
 *   2*hdr_size   key-slot area (config.keyslots_size bytes): AF-split,
 *                encrypted volume keys, one area per key slot
 *   segment 0    the encrypted payload ("crypt" segment)
 *
 * The modules:
 *   block-luks2-header.c   binary headers: checksums, copy choice, writing
 *   block-luks2-json*.c    JSON metadata: parse, validate, edit, serialise
 *                          (one file each: see block-luks2-json.h)
 *   block-luks2-cipher.c   "aes-xts-plain64" <-> algorithm, mode, IV
 *   block-luks2-keyslot.c  KDFs, key-slot unlock and store, digests,
 *                          calibration
 * None of them does I/O of its own: the caller's read/write callbacks
 * (crypto/block.h) move the bytes.
 */
#ifndef QCRYPTO_LUKS2PRIV_H
#define QCRYPTO_LUKS2PRIV_H

#include <inttypes.h>

#include <json-glib/json-glib.h>

#include "crypto/block.h"
#include "crypto/secure-mem.h"
#include "crypto/sector.h"

/* LUKS2 spec, "binary header": the fixed part of each header copy. */
#define QCRYPTO_LUKS2_BIN_HDR_LEN 4096
#define QCRYPTO_LUKS2_MAGIC_LEN 6
#define QCRYPTO_LUKS2_VERSION 2
#define QCRYPTO_LUKS2_LABEL_LEN 48
#define QCRYPTO_LUKS2_CHECKSUM_ALG_LEN 32
#define QCRYPTO_LUKS2_SALT_LEN 64
#define QCRYPTO_LUKS2_UUID_LEN 40
#define QCRYPTO_LUKS2_SUBSYSTEM_LEN 48
#define QCRYPTO_LUKS2_CHECKSUM_LEN 64

/*
 * LUKS2 spec, binary header: the header sizes (binary + JSON) allowed, 16
 * KiB..4 MiB.
 */
#define QCRYPTO_LUKS2_HDR_SIZE_MIN (16 * 1024)
#define QCRYPTO_LUKS2_HDR_SIZE_MAX (4 * 1024 * 1024)
#define QCRYPTO_LUKS2_HDR_SIZE_DEFAULT QCRYPTO_LUKS2_HDR_SIZE_MIN

/*
 * cryptsetup's limits (lib/luks2/luks2.h LUKS2_KEYSLOTS_MAX,
 * LUKS2_TOKENS_MAX, LUKS2_SEGMENT_MAX; digests share the key-slot bound).
 * Object ids are the decimal strings "0".."31".
 */
#define QCRYPTO_LUKS2_KEYSLOTS_MAX 32
#define QCRYPTO_LUKS2_TOKENS_MAX 32
#define QCRYPTO_LUKS2_SEGMENTS_MAX 32
#define QCRYPTO_LUKS2_DIGESTS_MAX 32

/*
 * Key-slot areas and the payload are aligned to 4 KiB (LUKS2 spec, "keyslots"
 * object).
 */
#define QCRYPTO_LUKS2_AREA_ALIGN 4096

/* Salts in JSON: cryptsetup writes 32 bytes; we read up to this many. */
#define QCRYPTO_LUKS2_JSON_SALT_MAX 256

/*
 * Bounds on KDF costs read from a header, so that a hostile image cannot
 * hang us or exhaust memory. cryptsetup itself refuses argon2 memory above
 * 4 GiB and more than 4 threads when it creates a key slot
 * (lib/utils_pbkdf.c); images it calibrates on the fastest machines at its
 * longest iter-time stay far below the iteration bounds.
 */
#define QCRYPTO_LUKS2_ARGON2_MEMORY_MAX_KIB (4u * 1024 * 1024)
#define QCRYPTO_LUKS2_ARGON2_MEMORY_MIN_KIB 32       /* cryptsetup's min */
#define QCRYPTO_LUKS2_ARGON2_PARALLEL_MAX 16
/* time x memory: 64 GiB of memory passes, about a minute of hashing. */
#define QCRYPTO_LUKS2_ARGON2_WORK_MAX_KIB (64ull * 1024 * 1024)
/*
 * The most PBKDF2 iterations we calibrate to on create; reading accepts
 * any count, and unlocking skips slots above max-pbkdf2-iterations.
 */
#define QCRYPTO_LUKS2_PBKDF2_ITERS_MAX QCRYPTO_BLOCK_PBKDF2_ITERS_MAX_DEFAULT
/* cryptsetup writes 4000 stripes */
#define QCRYPTO_LUKS2_AF_STRIPES_MAX 65536

/* v rounded up to a multiple of align (a power of two). */
static inline uint64_t qcrypto_luks2_round_up(uint64_t v, uint64_t align)
{
    return (v + align - 1) & ~(align - 1);
}

/* ---- binary header (block-luks2-header.c) ---- */

/* One header copy, decoded (the on-disk fields are big-endian). */
typedef struct QCryptoLUKS2BinHeader {
    uint16_t version;
    uint64_t hdr_size;
    uint64_t seqid;
    char label[QCRYPTO_LUKS2_LABEL_LEN];
    char checksum_alg[QCRYPTO_LUKS2_CHECKSUM_ALG_LEN];
    uint8_t salt[QCRYPTO_LUKS2_SALT_LEN];
    char uuid[QCRYPTO_LUKS2_UUID_LEN];
    char subsystem[QCRYPTO_LUKS2_SUBSYSTEM_LEN];
    uint64_t hdr_offset;
    uint8_t csum[QCRYPTO_LUKS2_CHECKSUM_LEN];
} QCryptoLUKS2BinHeader;

/* What was read: the chosen copy's fields and its JSON text. */
typedef struct QCryptoLUKS2Header {
    QCryptoLUKS2BinHeader bin;          /* of the copy in use */
    /* Per-copy salts, kept across rewrites (cryptsetup keeps both). */
    uint8_t salt_primary[QCRYPTO_LUKS2_SALT_LEN];
    uint8_t salt_secondary[QCRYPTO_LUKS2_SALT_LEN];
    char *json;                         /* NUL-terminated */
} QCryptoLUKS2Header;

bool qcrypto_luks2_has_format(const uint8_t *buf, size_t len);

/*
 * Whether the file holds LUKS2 rather than LUKS1 (the same magic): a LUKS2
 * primary header, or, when the primary is not LUKS1, a LUKS2 secondary
 * header at one of the allowed sizes (a damaged primary, to recover).
 */
bool qcrypto_luks2_probe(QCryptoBlock *block, QCryptoBlockReadFunc readfunc,
                         void *opaque);

/*
 * Read both header copies, verify them and return the newer valid one.
 * If a copy is damaged or stale, *warning (when not NULL) receives a
 * message for the user (the library does not print); it is NULL otherwise.
 */
QCryptoLUKS2Header *qcrypto_luks2_header_read(QCryptoBlock *block,
                                              QCryptoBlockReadFunc readfunc,
                                              void *opaque, char **warning,
                                              Error **errp);

/*
 * Write both copies with json as their JSON area and hdr->bin.seqid + 1
 * (updated in hdr on success): the primary first, then the secondary.
 * json must fit the JSON area (hdr_size - 4096, NUL included).
 *
 * With flushfunc, in cryptsetup's order: what was written before (a new
 * key slot's material) is flushed first, then each copy is written and
 * flushed before the next, so that a torn write or a crash damages one
 * copy at most and the other still opens (the old header or the new).
 * NULL: a header nobody reads yet, or in memory.
 */
int qcrypto_luks2_header_write(QCryptoLUKS2Header *hdr, const char *json,
                               QCryptoBlock *block,
                               QCryptoBlockWriteFunc writefunc,
                               QCryptoBlockFlushFunc flushfunc,
                               void *opaque, Error **errp);

/* Whether size is one of the LUKS2 header sizes (16 KiB .. 4 MiB). */
bool qcrypto_luks2_hdr_size_valid(uint64_t size);

void qcrypto_luks2_header_free(QCryptoLUKS2Header *hdr);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(QCryptoLUKS2Header, qcrypto_luks2_header_free)

/* ---- JSON metadata (block-luks2-json*.c) ---- */

typedef struct QCryptoLUKS2KDF {
    QCryptoBlockKDF type;
    QCryptoHashAlgo hash;               /* pbkdf2 */
    uint32_t iterations;                /* pbkdf2 */
    uint32_t time;                      /* argon2: passes */
    uint32_t memory;                    /* argon2: KiB */
    uint32_t parallel;                  /* argon2: lanes ("cpus") */
    uint8_t salt[QCRYPTO_LUKS2_JSON_SALT_MAX];
    size_t nsalt;
} QCryptoLUKS2KDF;

/*
 * Key-slot priority (LUKS2 spec, "keyslots" object): 0 ignore, 1 normal, 2
 * high.
 */
#define QCRYPTO_LUKS2_PRIORITY_IGNORE 0
#define QCRYPTO_LUKS2_PRIORITY_NORMAL 1
#define QCRYPTO_LUKS2_PRIORITY_HIGH 2

typedef struct QCryptoLUKS2Keyslot {
    int id;
    uint32_t key_size;                  /* volume key bytes */
    int priority;
    QCryptoHashAlgo af_hash;
    uint32_t af_stripes;
    uint64_t area_offset;               /* bytes from the image start */
    uint64_t area_size;
    char *area_encryption;              /* "aes-xts-plain64" */
    uint32_t area_key_size;             /* bytes the KDF derives */
    QCryptoLUKS2KDF kdf;
    int digest;                         /* -1: bound to no digest */
} QCryptoLUKS2Keyslot;

typedef struct QCryptoLUKS2Segment {
    int id;
    uint64_t offset;                    /* bytes from the image start */
    bool size_dynamic;                  /* "dynamic": to the end */
    uint64_t size;
    uint64_t iv_tweak;                  /* in 512-byte units */
    char *encryption;
    uint32_t sector_size;
    int digest;                         /* -1: none */
} QCryptoLUKS2Segment;

typedef struct QCryptoLUKS2Digest {
    int id;
    QCryptoHashAlgo hash;
    uint32_t iterations;
    uint8_t salt[QCRYPTO_LUKS2_JSON_SALT_MAX];
    size_t nsalt;
    uint8_t digest[QCRYPTO_HASH_MAX_DIGEST_LEN];
    size_t ndigest;
    uint32_t keyslots;                  /* bit i: key slot i */
    uint32_t segments;                  /* bit i: segment i */
} QCryptoLUKS2Digest;

/*
 * A token of ours: the data size of an image that an in-place encryption
 * of ours started ("size", bytes). cryptsetup keeps tokens it does not
 * know, and when it finishes such a run its data segment is "dynamic",
 * reaching to the end of the file, which the run made longer than the
 * data: this says where the data ends (docs/reencrypt.md, "The size").
 */
#define QCRYPTO_LUKS2_TOKEN_DATA_SIZE "qemu-img-lite-data-size"

typedef struct QCryptoLUKS2Token {
    int id;
    char *type;                         /* not interpreted, kept as is */
    uint32_t keyslots;
    uint64_t data_size;                 /* QCRYPTO_LUKS2_TOKEN_DATA_SIZE's */
} QCryptoLUKS2Token;

/*
 * Parsed and validated metadata. root is the JSON document as read:
 * edits go into it (so unknown fields and tokens survive a rewrite), and
 * the structs are re-derived by parsing the result again.
 */
typedef struct QCryptoLUKS2Metadata {
    JsonNode *root;
    uint64_t hdr_size;
    uint64_t json_size;
    uint64_t keyslots_size;
    char **config_flags;                /* NULL-terminated */
    char **requirements;                /* mandatory; NULL-terminated */
    QCryptoLUKS2Keyslot *keyslots[QCRYPTO_LUKS2_KEYSLOTS_MAX];
    QCryptoLUKS2Segment *segments[QCRYPTO_LUKS2_SEGMENTS_MAX];
    QCryptoLUKS2Digest *digests[QCRYPTO_LUKS2_DIGESTS_MAX];
    QCryptoLUKS2Token *tokens[QCRYPTO_LUKS2_TOKENS_MAX];
} QCryptoLUKS2Metadata;

/* The data segment: segment 0, the only one we handle (else an error). */
const QCryptoLUKS2Segment *qcrypto_luks2_data_segment(
    const QCryptoLUKS2Metadata *md, Error **errp);

/* The payload's size if the header fixes it, else 0 (block->data_size). */
uint64_t qcrypto_luks2_data_size(const QCryptoLUKS2Metadata *md,
                                 const QCryptoLUKS2Segment *seg);

/* Parse json (from a header of hdr_size bytes) and validate it all. */
QCryptoLUKS2Metadata *qcrypto_luks2_metadata_parse(const char *json,
                                                   uint64_t hdr_size,
                                                   Error **errp);

/*
 * The JSON text of md->root (compact, as cryptsetup writes it); NULL if
 * json-glib cannot write it so that it reads back the same (a number such
 * as 1e20 in a token comes out as 1e+20.0, 1e999 as inf.0): never write
 * such a header, refuse the edit.
 */
char *qcrypto_luks2_metadata_to_json(const QCryptoLUKS2Metadata *md);

/*
 * Re-validate md->root after an edit and refresh the structs. On failure
 * md is unchanged apart from root (the caller should drop it).
 */
int qcrypto_luks2_metadata_reload(QCryptoLUKS2Metadata *md, Error **errp);

/* Add (or replace) key slot ks->id, bound to digest ks->digest. */
void qcrypto_luks2_metadata_set_keyslot(QCryptoLUKS2Metadata *md,
                                        const QCryptoLUKS2Keyslot *ks);
/* Remove key slot id and every reference to it (digests, tokens). */
void qcrypto_luks2_metadata_remove_keyslot(QCryptoLUKS2Metadata *md, int id);

/*
 * Key slot area end: 2 * hdr_size + keyslots_size (LUKS2 spec, "config"
 * object).
 */
uint64_t qcrypto_luks2_keyslots_end(const QCryptoLUKS2Metadata *md);

/* The digest bound to segment seg (-1: none). */
int qcrypto_luks2_segment_digest(const QCryptoLUKS2Metadata *md, int seg);

void qcrypto_luks2_metadata_free(QCryptoLUKS2Metadata *md);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(QCryptoLUKS2Metadata,
                              qcrypto_luks2_metadata_free)

/* ---- cipher specs (block-luks2-cipher.c) ---- */

/* A parsed "encryption" string is what sector ciphers are built from. */
typedef QCryptoSectorCipherSpec QCryptoLUKS2Cipher;

/*
 * dm-crypt's "cipher-mode-iv[:hash]" spelling ("aes-xts-plain64",
 * "serpent-cbc-essiv:sha256", "aes-ecb") with the key of key_bytes (which
 * picks e.g. aes-128 vs aes-256: XTS keys are two cipher keys).
 */
int qcrypto_luks2_cipher_parse(const char *spec, size_t key_bytes,
                               QCryptoLUKS2Cipher *out, Error **errp);
/* The inverse; a new string. */
char *qcrypto_luks2_cipher_format(const QCryptoLUKS2Cipher *c);
/* The key qcrypto_cipher_new() needs for c. */
size_t qcrypto_luks2_cipher_key_len(const QCryptoLUKS2Cipher *c);

/* ---- key slots (block-luks2-keyslot.c) ---- */

/* Derive nout bytes from the secret with the slot's KDF. */
int qcrypto_luks2_kdf_derive(const QCryptoLUKS2KDF *kdf,
                             const QCryptoBlockSecret *secret,
                             uint8_t *out, size_t nout, Error **errp);

/* 1 if key matches digest d, 0 if not, -1 on error. Constant time. */
int qcrypto_luks2_digest_verify(const QCryptoLUKS2Digest *d,
                                const uint8_t *key, size_t nkey,
                                Error **errp);

/*
 * Recover the volume key of segment 0 with the secret, trying every key
 * slot bound to its digest (high priority first; "ignore" ones are
 * skipped, as cryptsetup does). *key gets the key in a new secure buffer
 * (the caller frees it), *slot the slot that opened. Wrong secret:
 * "Invalid password, cannot unlock any keyslot".
 */
int qcrypto_luks2_unlock(const QCryptoLUKS2Metadata *md,
                         const QCryptoBlockSecret *secret,
                         QCryptoBlock *block, QCryptoBlockReadFunc readfunc,
                         void *opaque, QCryptoSecureBuf **key, int *slot,
                         Error **errp);

/*
 * Unlock one key slot: 1 and key (ks->key_size bytes) filled when the
 * secret opens it and the result matches its digest, 0 when it does not.
 */
int qcrypto_luks2_keyslot_open(const QCryptoLUKS2Metadata *md,
                               const QCryptoLUKS2Keyslot *ks,
                               const QCryptoBlockSecret *secret,
                               QCryptoBlock *block,
                               QCryptoBlockReadFunc readfunc, void *opaque,
                               uint8_t *key, Error **errp);

/* How a new key slot's KDF is chosen (create, amend). */
typedef struct QCryptoLUKS2KDFParams {
    QCryptoBlockKDF type;
    QCryptoHashAlgo hash;               /* pbkdf2, and the AF hash */
    uint64_t iter_time_ms;              /* calibration target */
    uint32_t max_memory_kib;            /* argon2: upper bound */
    uint32_t parallel;                  /* argon2: 0 = min(4, CPUs) */
    /* Skip calibration (tests): pbkdf2 iterations or argon2 time. */
    uint32_t forced_iterations;
} QCryptoLUKS2KDFParams;

/*
 * Fill kdf (costs and a new random salt) from params: argon2 as
 * cryptsetup calibrates it (memory first, up to the cap and never more
 * than half the machine's memory, then passes), PBKDF2 by its measured
 * rate.
 */
int qcrypto_luks2_kdf_calibrate(const QCryptoLUKS2KDFParams *params,
                                size_t nkey, QCryptoLUKS2KDF *kdf,
                                Error **errp);

/* Half the physical memory in KiB: the most any argon2 run may use. */
uint64_t qcrypto_luks2_memory_cap_kib(void);

/* Bytes of a key-slot area for a key of nkey bytes (AF, 4 KiB aligned). */
uint64_t qcrypto_luks2_keyslot_area_size(size_t nkey, uint32_t stripes);

/*
 * Find room for a new key-slot area of size bytes in the key-slot area
 * (first fit, 4 KiB aligned). -1 and errp when it is full.
 */
int qcrypto_luks2_keyslot_find_area(const QCryptoLUKS2Metadata *md,
                                    uint64_t size, uint64_t *offset,
                                    Error **errp);

/*
 * Write key (nkey bytes) into key slot ks, whose area, kdf and AF fields
 * are set: AF-split, encrypt with the key the KDF derives from secret,
 * write the area. The metadata is not touched.
 */
int qcrypto_luks2_keyslot_store(const QCryptoLUKS2Keyslot *ks,
                                const QCryptoBlockSecret *secret,
                                const uint8_t *key, size_t nkey,
                                QCryptoBlock *block,
                                QCryptoBlockWriteFunc writefunc,
                                void *opaque, Error **errp);

/* Overwrite a key slot's area with random bytes (key-slot removal). */
int qcrypto_luks2_keyslot_wipe(const QCryptoLUKS2Keyslot *ks,
                               QCryptoBlock *block,
                               QCryptoBlockWriteFunc writefunc,
                               void *opaque, Error **errp);


/* ---- LUKS1 as LUKS2 (block-luks2-from-luks1.c) ---- */

/*
 * The LUKS1 header phdr (592 bytes; its file is file_size bytes, read
 * through readfunc) as a detached LUKS2 header, as cryptsetup convert
 * --type luks2 would make it: *out (g_free, *out_len bytes) holds both
 * header copies and every active key slot's material; segment 0 is the
 * LUKS1 payload, unchanged.
 */
int qcrypto_luks2_from_luks1(const uint8_t *phdr, uint64_t file_size,
                             QCryptoBlockReadFunc readfunc, void *opaque,
                             uint8_t **out, uint64_t *out_len, Error **errp);

#endif
