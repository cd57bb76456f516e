/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The qcow2 format driver's private header (block/qcow2*.c), read-only.
 *
 * The on-disk layout is QEMU's docs/interop/qcow2.txt ("the spec" below);
 * docs/qcow2.md says what we read and what we refuse. The parsing
 * functions take buffers, not nodes, so fuzz targets and unit tests can
 * call them on bytes of their own.
 */
#ifndef BLOCK_QCOW2_H
#define BLOCK_QCOW2_H

#include <inttypes.h>
#include <string.h>

#include "block/block_int.h"
#include "qemu/bswap.h"

/* Spec, "Header": "QFI\xfb" */
#define QCOW2_MAGIC 0x514649fbu

/* Spec, "Header": header fields of version 2 (72 bytes) and 3 (104+). */
#define QCOW2_V2_HEADER_LEN 72
#define QCOW2_V3_HEADER_LEN 104
/* Byte 104, compression_type: present when header_length > 104. */
#define QCOW2_COMPRESSION_TYPE_OFFSET 104

#define QCOW2_MIN_CLUSTER_BITS 9
/* QEMU's implementation limit (spec, cluster_bits): 2 MiB clusters. */
#define QCOW2_MAX_CLUSTER_BITS 21
/* Spec, "Extended L2 Entries": subclusters need 16 KiB clusters. */
#define QCOW2_MIN_EXTL2_CLUSTER_BITS 14
#define QCOW2_SUBCLUSTERS_PER_CLUSTER 32

/* QEMU's limits (spec notes on size and the refcount table), in bytes. */
#define QCOW2_MAX_L1_BYTES (32 * 1024 * 1024)
#define QCOW2_MAX_REFTABLE_BYTES (8 * 1024 * 1024)
/* QEMU's QCOW_MAX_SNAPSHOTS. */
#define QCOW2_MAX_SNAPSHOTS 65536
/* Spec, backing_file_size: "Must not be longer than 1023 bytes". */
#define QCOW2_MAX_BACKING_NAME 1023
/* Spec, header extensions; QEMU caps the data file name the same way. */
#define QCOW2_MAX_EXT_STRING 1023

/* Spec, crypt_method */
enum {
    QCOW2_CRYPT_NONE = 0,
    QCOW2_CRYPT_AES = 1,
    QCOW2_CRYPT_LUKS = 2,
};

/* Spec, incompatible_features */
#define QCOW2_INCOMPAT_DIRTY        (1ull << 0)
#define QCOW2_INCOMPAT_CORRUPT      (1ull << 1)
#define QCOW2_INCOMPAT_DATA_FILE    (1ull << 2)
#define QCOW2_INCOMPAT_COMPRESSION  (1ull << 3)
#define QCOW2_INCOMPAT_EXTL2        (1ull << 4)
#define QCOW2_INCOMPAT_KNOWN        0x1full
/* Spec, compatible_features / autoclear_features */
#define QCOW2_COMPAT_LAZY_REFCOUNTS (1ull << 0)
#define QCOW2_AUTOCLEAR_DATA_FILE_RAW (1ull << 1)
/* Spec, autoclear bit 0: without it the bitmaps extension is stale. */
#define QCOW2_AUTOCLEAR_BITMAPS (1ull << 0)
#define QCOW2_AUTOCLEAR_KNOWN \
    (QCOW2_AUTOCLEAR_BITMAPS | QCOW2_AUTOCLEAR_DATA_FILE_RAW)

/* Spec, "Header extensions": types */
#define QCOW2_EXT_END               0x00000000u
#define QCOW2_EXT_BACKING_FORMAT    0xe2792acau
#define QCOW2_EXT_FEATURE_TABLE     0x6803f857u
#define QCOW2_EXT_BITMAPS           0x23852875u
#define QCOW2_EXT_CRYPTO_HEADER     0x0537be77u
#define QCOW2_EXT_DATA_FILE         0x44415441u

/* Spec, compression_type */
typedef enum {
    QCOW2_COMPRESSION_ZLIB = 0,
    QCOW2_COMPRESSION_ZSTD = 1,
} Qcow2CompressionType;

/* Spec, "Cluster mapping": L1 and L2 entry bits */
#define QCOW2_OFLAG_COPIED      (1ull << 63)
#define QCOW2_OFLAG_COMPRESSED  (1ull << 62)
#define QCOW2_OFLAG_ZERO        (1ull << 0)
/* Bits 9-55: the host offset of an L2 table or a standard cluster. */
#define QCOW2_OFFSET_MASK       0x00fffffffffffe00ull
/* Bits 0-8 and 56-62 of an L1 entry must be 0. */
#define QCOW2_L1E_RESERVED_MASK 0x7f000000000001ffull
/* A refcount table entry: bits 9-63 are the block's offset. */
#define QCOW2_REFT_OFFSET_MASK  0xfffffffffffffe00ull
/* Compressed data is counted in 512-byte sectors (spec). */
#define QCOW2_COMPRESSED_SECTOR 512

/* The fixed header, in host byte order (spec, "Header"). */
typedef struct Qcow2Header {
    uint32_t version;
    uint64_t backing_file_offset;
    uint32_t backing_file_size;
    uint32_t cluster_bits;
    uint64_t size;
    uint32_t crypt_method;
    uint32_t l1_size;
    uint64_t l1_table_offset;
    uint64_t refcount_table_offset;
    uint32_t refcount_table_clusters;
    uint32_t nb_snapshots;
    uint64_t snapshots_offset;
    /* Version 3 fields; for version 2 as the spec says to assume them. */
    uint64_t incompatible_features;
    uint64_t compatible_features;
    uint64_t autoclear_features;
    uint32_t refcount_order;
    uint32_t header_length;
    uint8_t compression_type;
} Qcow2Header;

/* What the header extensions say (spec, "Header extensions"). */
typedef struct Qcow2Extensions {
    char *backing_format;           /* NULL: none given */
    char *data_file;                /* NULL: none given */
    bool has_crypto_header;
    uint64_t crypto_header_offset;  /* bytes into the image file */
    uint64_t crypto_header_length;
    /* Spec, "Bitmaps extension" (0 bitmaps: none, or a stale extension) */
    uint32_t nb_bitmaps;
    uint64_t bitmap_directory_size;
    uint64_t bitmap_directory_offset;
    /* Names of incompatible features (feature name table), bit -> name */
    char *incompat_names[64];
    /* The bits named, in the table's order */
    uint8_t incompat_order[64];
    int nb_incompat_order;
    /*
     * Extensions of types this code does not know, as they stand (type,
     * length, data padded to 8): a header rewrite keeps them, as QEMU
     * does (qemu-iotests 031). NULL: none.
     */
    GByteArray *unknown;
} Qcow2Extensions;

void qcow2_extensions_clear(Qcow2Extensions *ext);

/*
 * Decode and check the header at the start of buf (len bytes: at least
 * the header, ideally the first cluster). file_size is the image file's
 * length: every table must lie inside it. Nothing is allocated.
 */
int qcow2_header_parse(const uint8_t *buf, size_t len, uint64_t file_size,
                       Qcow2Header *h, Error **errp);
/*
 * The snapshot table's count and offset (at most 65536 entries, aligned,
 * addressable), checked before the table is read: not by
 * qcow2_header_parse, as "check" opens images with a broken table and
 * repairs them (QEMU's check mode).
 */
int qcow2_header_check_snapshots(const Qcow2Header *h, Error **errp);

/*
 * Read the header extensions that follow h->header_length in buf (the
 * first cluster, len bytes), and check the crypto header pointer against
 * file_size. On failure ext is left cleared.
 */
int qcow2_extensions_parse(const Qcow2Header *h, const uint8_t *buf,
                           size_t len, uint64_t file_size,
                           Qcow2Extensions *ext, Error **errp);

/*
 * A table of entries * entry_len bytes at offset: cluster-aligned, at
 * most max_bytes, inside a file of file_size bytes (QEMU's
 * qcow2_validate_table, plus the file bound: nothing is allocated for a
 * table the file cannot hold).
 */
int qcow2_validate_table(uint64_t offset, uint64_t entries, size_t entry_len,
                         uint64_t max_bytes, uint64_t cluster_size,
                         uint64_t file_size, const char *name, Error **errp);

/* The geometry that follows from the header. */
typedef struct Qcow2Geometry {
    unsigned cluster_bits;
    uint64_t cluster_size;
    bool extended_l2;
    unsigned l2_bits;               /* log2 of entries per L2 table */
    uint64_t l2_entries;
    size_t l2_entry_size;           /* 8, or 16 with extended L2 */
    uint64_t subcluster_size;       /* == cluster_size without subclusters */
    unsigned subcluster_bits;
    /* Spec, "Compressed Clusters Descriptor" */
    unsigned csize_shift;           /* x = 62 - (cluster_bits - 8) */
    uint64_t csize_mask;
    uint64_t coffset_mask;
    bool has_data_file;
} Qcow2Geometry;

void qcow2_geometry_init(Qcow2Geometry *g, const Qcow2Header *h);

/*
 * Whether a standard (not compressed) L2 entry names a host cluster: in
 * an external data file offset 0 is one, told from "unallocated" by the
 * COPIED flag (spec, "External data file"; QEMU sets it on every entry).
 */
static inline bool qcow2_entry_has_host(const Qcow2Geometry *g,
                                        uint64_t l2_entry)
{
    return (l2_entry & QCOW2_OFFSET_MASK) ||
           (g->has_data_file && (l2_entry & QCOW2_OFLAG_COPIED));
}

/* L1 entries needed to map size bytes. */
uint64_t qcow2_l1_entries_needed(const Qcow2Geometry *g, uint64_t size);

/* ---- qcow2-cluster.c: guest offset -> host offset */

/* What one subcluster (or cluster, without extended L2) holds. */
typedef enum {
    QCOW2_SC_UNALLOCATED,   /* read from the backing file, or zeroes */
    QCOW2_SC_ZERO,          /* reads as zeroes (zero flag / zero bit) */
    QCOW2_SC_NORMAL,        /* data at a host offset */
    QCOW2_SC_COMPRESSED,    /* a compressed cluster */
} Qcow2SubclusterType;

/*
 * The type of subcluster sc (0..31; 0 without extended L2) of an L2
 * entry and its bitmap (0 without extended L2). Returns -1 with errp set
 * for entries the spec does not allow (reserved bits, unaligned offsets,
 * a subcluster both allocated and zero, ...).
 */
int qcow2_l2_entry_type(const Qcow2Geometry *g, uint64_t l2_entry,
                        uint64_t l2_bitmap, unsigned sc,
                        Qcow2SubclusterType *type, Error **errp);

/* A compressed cluster's data: offset and length in the image file. */
void qcow2_compressed_extent(const Qcow2Geometry *g, uint64_t l2_entry,
                             uint64_t *offset, uint64_t *len);

/*
 * A run of guest bytes that maps the same way: *type for all of it; for
 * NORMAL, host_offset of the first byte and contiguous on the host; for
 * COMPRESSED, one cluster's descriptor in l2_entry. A zero or unallocated
 * run either has host clusters (an L2 entry with an offset: QEMU's
 * ZERO_ALLOC, UNALLOCATED_ALLOC), contiguous like NORMAL ones, or none:
 * "qemu-img map" shows the difference.
 */
typedef struct Qcow2Extent {
    Qcow2SubclusterType type;
    uint64_t bytes;
    uint64_t host_offset;
    uint64_t l2_entry;
} Qcow2Extent;

/* Whether a run of type whose L2 entry is l2_entry has host clusters. */
bool qcow2_extent_has_host(Qcow2SubclusterType type, uint64_t l2_entry);

typedef struct Qcow2Cache Qcow2Cache;
typedef struct BDRVQcow2State BDRVQcow2State;
/* Persistent bitmaps of a read-write open (qcow2-bitmap.c). */
typedef struct Qcow2BitmapSet Qcow2BitmapSet;

/*
 * Map [offset, offset + bytes) of the guest disk: fills ext with the first
 * run (never longer than bytes, nor past one L2 table).
 */
int qcow2_get_extent(BlockDriverState *bs, uint64_t offset, uint64_t bytes,
                     Qcow2Extent *ext, Error **errp);

/* ---- qcow2-cache.c: a bounded cache of L2 tables */

/*
 * At most max_bytes of tables of table_size bytes each (at least
 * QCOW2_CACHE_MIN_TABLES whatever max_bytes says), least recently used
 * evicted first. Not thread-safe: the driver holds its lock around it.
 */
#define QCOW2_CACHE_MIN_TABLES 4
Qcow2Cache *qcow2_cache_new(size_t table_size, size_t max_bytes);
void qcow2_cache_free(Qcow2Cache *c);
/* The cached table at offset, or NULL. */
const uint8_t *qcow2_cache_lookup(Qcow2Cache *c, uint64_t offset);
/* A slot for the table at offset (evicting one if full); fill it. */
uint8_t *qcow2_cache_insert(Qcow2Cache *c, uint64_t offset);
/* Drop the table at offset (e.g. a failed read). */
void qcow2_cache_drop(Qcow2Cache *c, uint64_t offset);
/* Drop every table (the image's tables are gone: qcow2_make_empty()). */
void qcow2_cache_clear(Qcow2Cache *c);
size_t qcow2_cache_capacity(const Qcow2Cache *c);
/* Bytes allocated for tables so far (never above capacity * size). */
size_t qcow2_cache_memory(const Qcow2Cache *c);

/* ---- qcow2-refcount.c */

/*
 * Entry index of a refcount block whose entries are 1 << order bits wide
 * (sub-byte entries from the least significant bit, wider ones big-endian).
 */
uint64_t qcow2_refcount_block_entry(const uint8_t *block, uint64_t index,
                                    unsigned order);
/* The refcount of the host cluster holding offset (0: free). */
int qcow2_get_refcount(BlockDriverState *bs, uint64_t offset,
                       uint64_t *refcount, Error **errp);
/* The same, alloc_lock held. */
int qcow2_get_refcount_locked(BlockDriverState *bs, uint64_t offset,
                              uint64_t *refcount, Error **errp);
/* Set entry index of a refcount block (the inverse of the above). */
void qcow2_refcount_block_set(uint8_t *block, uint64_t index, unsigned order,
                              uint64_t value);
/*
 * Allocate n contiguous clusters at the end of the image file, their
 * refcounts set to 1 (refcount blocks are added as needed) in the cached
 * refcount block: on disk before anything that points at the clusters
 * (qcow2_flush_l2_pending() writes them first). alloc_lock held.
 */
int qcow2_alloc_clusters(BlockDriverState *bs, uint64_t n, uint64_t *offset,
                         Error **errp);
/*
 * From here to qcow2_alloc_reuse_end(), qcow2_alloc_clusters() takes the
 * first run of free clusters from a cursor that moves forward, as QEMU's
 * allocator, instead of the end of the file: holes are filled, file sizes
 * and offsets are qemu-img's. Everything is flushed first, and only
 * clusters whose refcount is 0 now are taken, never ones freed later (what
 * freed them may not be on the disk yet), nor the metadata the header
 * and tables name. Nested calls count. alloc_lock held (or no writer
 * beside).
 */
int qcow2_alloc_reuse_begin(BlockDriverState *bs, Error **errp);
void qcow2_alloc_reuse_end(BlockDriverState *bs);
/*
 * Add delta to the refcounts of the clusters holding [offset, offset +
 * bytes) (-1 frees a compressed cluster's clusters). alloc_lock held.
 * Increments stay in the cached refcount block; a decrement is written
 * at once, after the pending L2 entries (which no longer point at the
 * clusters).
 */
int qcow2_update_refcounts(BlockDriverState *bs, uint64_t offset,
                           uint64_t bytes, int delta, Error **errp);
/* Write the cached refcount block's changed bytes. alloc_lock held. */
int qcow2_refcount_flush(BlockDriverState *bs, Error **errp);
/* Load the refcount table for writing (open read-write). */
int qcow2_refcount_init(BlockDriverState *bs, Error **errp);

/* ---- qcow2-cluster.c, for writers: L2 tables (s->lock held) */

/* The L2 table at l2_offset, from the cache or the file. */
const uint8_t *qcow2_get_l2_table(BlockDriverState *bs, uint64_t l2_offset,
                                  Error **errp);
/* Keep a cached table in step with bytes just written to it on disk. */
void qcow2_cache_update(Qcow2Cache *c, uint64_t offset, size_t pos,
                        const void *data, size_t len);

/* ---- qcow2-write.c: the write path */

int qcow2_pwrite(BlockDriverState *bs, uint64_t offset, const void *buf,
                 size_t bytes, int flags, Error **errp);
/*
 * data_file_raw: map the guest clusters [start, end) (cluster-aligned,
 * unallocated) to the same offsets of the data file.
 */
int qcow2_map_raw_data_file(BlockDriverState *bs, uint64_t start,
                            uint64_t end, Error **errp);
/*
 * Write one compressed cluster (guest offset cluster-aligned; data is
 * already compressed, len bytes). The cluster must be unallocated.
 */
int qcow2_write_compressed(BlockDriverState *bs, uint64_t offset,
                           const uint8_t *data, size_t len, Error **errp);
/*
 * Write whole clusters compressed where it pays (convert -c), in two
 * halves (bdrv_compress(), bdrv_store_compressed()).
 */
int qcow2_compress_clusters(BlockDriverState *bs, BdrvCompressed *c,
                            Error **errp);
int qcow2_store_compressed(BlockDriverState *bs, const BdrvCompressed *c,
                           Error **errp);
/* Zero writes that may unmap whole clusters (see there). */
/*
 * Guest clusters [start, end) (cluster-aligned) unallocated, their host
 * clusters freed, entry by entry (a crash leaks, never frees one in use).
 * alloc_lock held; no snapshots, no external data file.
 */
int qcow2_hide_backing_range(BlockDriverState *bs, uint64_t start,
                             uint64_t end, Error **errp);
int qcow2_prealloc_range(BlockDriverState *bs, uint64_t start, uint64_t end,
                         PreallocMode mode, uint64_t alloc_from,
                         Error **errp);
int qcow2_unmap_range_locked(BlockDriverState *bs, uint64_t start,
                             uint64_t end, Error **errp);
int qcow2_pwrite_zeroes(BlockDriverState *bs, uint64_t offset, size_t bytes,
                        int flags, Error **errp);
/* Set or clear the dirty bit in the header on disk (lazy refcounts). */
int qcow2_mark_dirty(BlockDriverState *bs, bool dirty, Error **errp);
/*
 * Write the pending L2 entries (refcounts first: nothing on disk points
 * at a cluster before its refcount is there). alloc_lock held.
 */
int qcow2_flush_l2_pending(BlockDriverState *bs, Error **errp);
/* Both write-backs (L2 entries, refcounts). alloc_lock held. */
int qcow2_flush_metadata_locked(BlockDriverState *bs, Error **errp);
/* The same, taking alloc_lock: what flush and close do first. */
int qcow2_flush_metadata(BlockDriverState *bs, Error **errp);

/* Widen the changed byte range [*lo, *hi) (empty when equal) to [a, b). */
static inline void qcow2_range_add(uint64_t *lo, uint64_t *hi, uint64_t a,
                                   uint64_t b)
{
    if (*lo == *hi) {
        *lo = a;
        *hi = b;
    } else {
        *lo = MIN(*lo, a);
        *hi = MAX(*hi, b);
    }
}

/* ---- qcow2-empty.c */

/*
 * Unallocate every cluster (commit's bdrv_make_empty()), as QEMU: see
 * there. A failure may leave the node broken (s->broken).
 */
int qcow2_make_empty(BlockDriverState *bs, Error **errp);
/* 0, or -1 and errp if the node is broken (a failed qcow2_make_empty()). */
int qcow2_check_usable(BlockDriverState *bs, Error **errp);

/* ---- qcow2-compress.c */

/*
 * Compress one cluster of in_len bytes into out (out_len bytes). Returns
 * the compressed length, or 0 if it does not fit (store it plain).
 */
size_t qcow2_compress(Qcow2CompressionType type, const uint8_t *in,
                      size_t in_len, uint8_t *out, size_t out_len);

/*
 * Decompress in_len bytes into exactly out_len bytes (one cluster). More
 * output than out_len is never produced; less is an error.
 */
int qcow2_decompress(Qcow2CompressionType type, const uint8_t *in,
                     size_t in_len, uint8_t *out, size_t out_len,
                     Error **errp);

/* ---- qcow2-crypto.c */

typedef struct Qcow2Crypto Qcow2Crypto;

/*
 * Set up the image's encryption from its header: LUKS (the header in the
 * clusters the FDE extension points at, unlocked with secret unless
 * no_io) or legacy AES (the key is the passphrase itself).
 */
Qcow2Crypto *qcow2_crypto_open(BlockDriverState *bs, const Qcow2Header *h,
                               const Qcow2Extensions *ext,
                               const QCryptoBlockSecret *secret, bool no_io,
                               Error **errp);
void qcow2_crypto_free(Qcow2Crypto *c);
/*
 * Decrypt len bytes (whole 512-byte sectors) in place, read from host
 * offset host_offset, for guest offset guest_offset: LUKS takes its IVs
 * from the host offset, AES from the guest offset (spec, "Data
 * encryption").
 */
int qcow2_crypto_decrypt(Qcow2Crypto *c, uint64_t host_offset,
                         uint64_t guest_offset, uint8_t *buf, size_t len,
                         Error **errp);
/*
 * Encrypt len bytes (whole sectors) in place for host offset host_offset:
 * LUKS only (AES images are never written).
 */
int qcow2_crypto_encrypt(Qcow2Crypto *c, uint64_t host_offset, uint8_t *buf,
                         size_t len, Error **errp);
/* Wrap the LUKS block that create just made (its header at hdr_offset). */
Qcow2Crypto *qcow2_crypto_new_luks(BlockDriverState *file,
                                   QCryptoBlock *block, uint64_t hdr_offset,
                                   uint64_t hdr_length);
/* The LUKS block (amend), or NULL. */
QCryptoBlock *qcow2_crypto_get_block(Qcow2Crypto *c);
/* LUKS header reads and writes, confined to the header clusters. */
int qcow2_crypto_hdr_read(QCryptoBlock *block, uint64_t offset,
                          uint8_t *buf, size_t buflen, void *opaque,
                          Error **errp);
int qcow2_crypto_hdr_write(QCryptoBlock *block, uint64_t offset,
                           const uint8_t *buf, size_t buflen, void *opaque,
                           Error **errp);
int qcow2_crypto_hdr_flush(QCryptoBlock *block, void *opaque, Error **errp);
/* LUKS header info for "info", or NULL (AES, or no header). */
QCryptoBlockInfo *qcow2_crypto_get_info(Qcow2Crypto *c, Error **errp);

/* ---- qcow2-check.c */

/*
 * "check": rebuild every cluster's reference count from the header, the
 * L1/L2 tables, snapshots, bitmaps and the refcount structures, compare
 * with the refcount blocks, and repair what fix allows (QEMU's
 * qcow2_co_check). See bdrv_check().
 */
int qcow2_check(BlockDriverState *bs, BdrvCheckResult *res,
                BdrvCheckMode fix);

/* ---- qcow2-snapshot.c: internal snapshots (spec, "Snapshots") */

/* Spec: the fixed part of a snapshot table entry. */
#define QCOW2_SNAPSHOT_HEADER_LEN 40
/* The extra data we write: VM state size (64 bits), disk size, icount. */
#define QCOW2_SNAPSHOT_EXTRA_LEN 24
/* Spec: version 3 entries have at least the first two extra fields. */
#define QCOW2_SNAPSHOT_V3_MIN_EXTRA 16
/* QEMU's bounds: extra data of one entry, and the whole table. */
#define QCOW2_SNAPSHOT_MAX_EXTRA 1024
#define QCOW2_SNAPSHOT_TABLE_MAX_BYTES (64 * 1024 * 1024)
/* QEMU's bound on a snapshot name (256-byte buffer with its NUL). */
#define QCOW2_SNAPSHOT_MAX_NAME 255

typedef struct Qcow2Snapshot {
    uint64_t l1_table_offset;
    uint32_t l1_size;
    char *id;
    char *name;
    uint64_t disk_size;
    uint64_t vm_state_size;
    uint32_t date_sec;
    uint32_t date_nsec;
    uint64_t vm_clock_nsec;
    uint64_t icount;                /* UINT64_MAX: not recorded */
    /* Extra data past the fields we know, kept when the table is rewritten */
    uint8_t *unknown_extra;
    uint32_t unknown_extra_size;
} Qcow2Snapshot;

void qcow2_snapshots_free(Qcow2Snapshot *sn, uint32_t nb);

/*
 * Parse nb snapshot table entries from buf (len bytes: the table's start,
 * zero-padded past the end of the file). default_disk_size stands for an
 * entry without that field. Returns 0 (*out, *table_size: the bytes the
 * entries take), 1 if the entries run past len (read more and call again;
 * not when len reached QCOW2_SNAPSHOT_TABLE_MAX_BYTES: an error), or -1.
 */
int qcow2_snapshots_parse(const uint8_t *buf, size_t len, uint32_t nb,
                          uint64_t default_disk_size, Qcow2Snapshot **out,
                          uint64_t *table_size, Error **errp);
/* The table's bytes (each entry with our 24 bytes of extra data). */
uint8_t *qcow2_snapshots_serialize(const Qcow2Snapshot *sn, uint32_t nb,
                                   size_t *len);
/*
 * Write the table again, each entry with our 24 bytes of extra data
 * (amend compat=1.1: version 3 entries need at least 16).
 */
int qcow2_snapshots_rewrite(BlockDriverState *bs, Error **errp);
/* Read the table the header points at into s->snapshots (open). */
int qcow2_read_snapshots(BlockDriverState *bs, Error **errp);

/*
 * check -r all: write sn (nb entries; taken, whatever happens) as the
 * image's new snapshot table, and free the old one (old_size bytes at
 * the header's snapshots_offset), on an image opened for the check whose
 * refcounts were just found right (file_size: the file's length now).
 * The writer's refcount state is set up for it and dropped after.
 */
int qcow2_snapshots_write_repaired(BlockDriverState *bs, Qcow2Snapshot *sn,
                                   uint32_t nb, uint64_t old_size,
                                   uint64_t file_size, Error **errp);
/*
 * Whether the snapshots' L2 tables hold a zero cluster (which version 2
 * cannot say). A snapshot L1 table QEMU refuses fails it as QEMU's
 * amend fails: "Failed to turn zero into data clusters: <errno>", the
 * fault reported before (error_add_report_before).
 */
int qcow2_snapshots_have_zero_clusters(BlockDriverState *bs, bool *found,
                                       Error **errp);
int qcow2_snapshot_list(BlockDriverState *bs, BlockSnapshotInfo **list,
                        size_t *n, Error **errp);
int qcow2_snapshot_create(BlockDriverState *bs, const char *name,
                          Error **errp);
int qcow2_snapshot_goto(BlockDriverState *bs, const char *id_or_name,
                        Error **errp);
int qcow2_snapshot_delete(BlockDriverState *bs, const char *name,
                          Error **errp);
int qcow2_snapshot_load_tmp(BlockDriverState *bs, const char *id,
                            const char *name, Error **errp);

/* ---- The driver state (qcow2.c) */

struct BDRVQcow2State {
    Qcow2Header header;
    Qcow2Extensions ext;
    Qcow2Geometry g;
    uint64_t file_size;
    uint64_t *l1_table;             /* host byte order */
    uint64_t l1_size;
    GMutex lock;                    /* guards l2_cache */
    Qcow2Cache *l2_cache;
    /* Where guest data lives: the "data-file" child, or bs->file. */
    BlockDriverState *data_file;
    char *backing_file;             /* as stored in the image */
    char *full_backing_filename;    /* relative to the image's directory */
    Qcow2Crypto *crypto;
    char *warning;

    /* Writing (opened read-write; qcow2-write.c, qcow2-refcount.c) */
    GMutex alloc_lock;              /* allocation and metadata updates */
    uint64_t next_free;             /* where the next cluster goes */
    uint64_t *reftable;             /* host byte order */
    uint64_t reftable_entries;
    bool dirty;                     /* the dirty bit is set on disk */
    /*
     * An emptying failed half-way (qcow2-empty.c): the refcounts in
     * memory no longer describe the file. Nothing is read or written
     * through the node any more (QEMU ejects it), and the dirty bit stays
     * set for a repair.
     */
    bool broken;
    /*
     * Free clusters taken first (qcow2_alloc_reuse_begin): one bit per
     * cluster below n, set where the cluster was in use then (or is
     * metadata) or was taken since; the search starts at cursor.
     */
    struct {
        uint8_t *used;
        uint64_t n;
        uint64_t cursor;
        unsigned depth;
    } reuse;
    /*
     * Write-back of the per-write metadata updates. Written one by one,
     * the few bytes of refcounts and L2 entries of each write took the
     * file's inode lock twice more per 256 KiB of data, waiting behind
     * the other threads' data writes: a fifth of a convert's time. The
     * one refcount block last changed (alloc_lock), and one L2 table's
     * image with the bytes changed since it was last written (alloc_lock
     * to change, and lock too, as readers that miss the L2 cache lay
     * those bytes over what they read from the file). Byte ranges
     * [lo, hi), empty when equal.
     */
    struct {
        uint8_t *block;
        uint64_t idx;               /* its refcount table index */
        bool valid;
        uint64_t lo, hi;
    } rb;
    struct {
        uint8_t *table;
        uint64_t offset;            /* 0: none */
        uint64_t lo, hi;
    } l2p;
    uint64_t compressed_next;       /* free bytes for compressed data, 0 */
    /*
     * New L2 tables whose cluster was taken before the data clusters they
     * will point at (QEMU's order in the file), not yet written: pairs of
     * L1 index and host offset (alloc_lock; NULL until the first; a few
     * at a time, one per writing thread at most).
     */
    GArray *l2_reserved;
    /* Block status: preallocation=metadata looked for, and found. */
    bool prealloc_checked;
    bool metadata_prealloc;
    /* The snapshot table (header.nb_snapshots entries), and its bytes. */
    Qcow2Snapshot *snapshots;
    uint64_t snapshots_size;
    /* Persistent bitmaps, read-write opens only (qcow2-bitmap.c). */
    Qcow2BitmapSet *bitmaps;
};

/* ---- qcow2-amend.c: amend and resize */

int qcow2_truncate(BlockDriverState *bs, uint64_t size, PreallocMode prealloc,
                   Error **errp);
int qcow2_change_backing_file(BlockDriverState *bs, const char *backing_file,
                              const char *backing_fmt, Error **errp);
int qcow2_amend(BlockDriverState *bs, GHashTable *opts, bool force,
                BdrvAmendStatusCB *status_cb, void *cb_opaque, Error **errp);

/* ---- qcow2-create.c */

/*
 * The refcount_bits option (create, amend), as QEMU parses it: a number
 * ("-1" wraps around, as QEMU's), a power of two of at most 64.
 */
int qcow2_opt_take_refcount_bits(GHashTable *opts, uint64_t def,
                                 uint64_t *bits, Error **errp);

int qcow2_create(BlockDriverState *file, GHashTable *opts, int flags,
                 BlockDriverState **pbs, Error **errp);
/*
 * Open a node that create made, with its LUKS key (crypto, or NULL) and
 * its new external data file (data_file, or NULL: bs takes it as its
 * "data-file" child).
 */
int qcow2_open_created(BlockDriverState *bs, Qcow2Crypto *crypto,
                       BlockDriverState *data_file, int flags, Error **errp);
/*
 * The header bytes of h (and of its extensions, unknown ones last: NULL
 * for none) into buf (a cluster).
 */
size_t qcow2_header_build(const Qcow2Header *h, const char *backing_file,
                          const char *backing_fmt, const char *data_file,
                          uint64_t crypto_off,
                          uint64_t crypto_len, bool feature_table,
                          const GByteArray *unknown, uint8_t *buf,
                          size_t len);

extern const BlockDriver bdrv_qcow2;

/* Probe score for the first bytes of a file (QEMU's bdrv_probe). */
int qcow2_probe(const uint8_t *buf, int len, const char *filename);

#endif
