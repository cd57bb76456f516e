/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * qcow2 "check" (QEMU's qcow2_co_check and the refcount checks of its
 * qcow2-refcount.c): every cluster's reference count is computed afresh
 * from what points at it -- the header cluster, the active and the
 * snapshots' L1 tables and their L2 tables and data clusters, the
 * snapshot table, the refcount table and blocks, the LUKS header and
 * the persistent bitmaps -- into an in-memory refcount table ("IMRT",
 * entries as wide as the image's), then compared with the refcount
 * blocks. A cluster whose refcount is higher than its references is
 * leaked (wasted space), lower is a corruption (a later write could
 * reuse a cluster in use). Findings are reported in qemu-img 7.2's words,
 * one message each, through res->report.
 *
 * Repairs (fix): leaks get their refcount lowered, too-low refcounts
 * raised, refcount blocks past the end of the file get the file grown,
 * unaligned preallocated zero clusters become zero clusters, and the
 * COPIED flags of L1/L2 entries are set to agree with the refcounts
 * (spec, "Cluster mapping": set iff the refcount is 1). A referenced
 * cluster with refcount 0, or a broken refcount block, needs the refcount
 * structures rebuilt: with BDRV_FIX_ERRORS they are (new blocks and table
 * at free clusters, the old ones then freed as leaks); with leaks alone,
 * qemu-img's "ERROR need to rebuild refcount structures", and the check
 * fails. Writes never land on other metadata (QEMU's overlap check).
 *
 * Everything read is attacker-controlled: table sizes are bounded by the
 * header checks of the open (qcow2_header_parse) or here, tables are read
 * only as far as the file reaches (the rest reads as zeroes, as QEMU
 * reads past the end of a file), and the IMRT grows only with the file.
 */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>

#include "block/qcow2.h"

/* Spec, "Cluster mapping": reserved bits of an L1 / standard L2 entry. */
#define QCOW2_L2E_STD_RESERVED  0x3f000000000001feull
/* Spec, "Extended L2 Entries": the 32 "allocated" bits. */
#define QCOW2_L2_BITMAP_ALL_ALLOC 0xffffffffull

/* Spec, "Snapshots": the fixed part of a snapshot table entry. */
#define QCOW2_SNAPSHOT_FIXED_LEN 40
/* Spec: version 3 entries have at least 16 bytes of extra data. */
#define QCOW2_SNAPSHOT_V3_EXTRA 16
/* QEMU's limits: 1 KiB of extra data, a 64 MiB table. */
#define QCOW2_MAX_SNAPSHOT_EXTRA 1024
#define QCOW2_MAX_SNAPSHOTS_SIZE (64 * 1024 * 1024)

/* Spec, "Bitmaps extension" and "Bitmap directory". */
#define QCOW2_AUTOCLEAR_BITMAPS     (1ull << 0)
#define QCOW2_BITMAPS_EXT_LEN       24
#define QCOW2_BITMAP_DIR_FIXED_LEN  24
/* QEMU's limits: 65535 bitmaps, a 64 MiB directory, 1 MiB tables. */
#define QCOW2_MAX_BITMAPS           65535
#define QCOW2_MAX_BITMAP_DIR        (64 * 1024 * 1024)
#define QCOW2_MAX_BITMAP_TABLE      (1024 * 1024)
#define QCOW2_BME_OFFSET_MASK       0x00fffffffffffe00ull
#define QCOW2_BME_RESERVED_MASK     0xff000000000001feull
#define QCOW2_BME_ALL_ONES          1ull

typedef struct Qcow2CheckSnapshot {
    Qcow2Snapshot sn;               /* as it would be written again */
    uint32_t extra_data_size;       /* as read, at most 1 KiB */
    uint32_t strings_len;           /* id and name, as their sizes say */
} Qcow2CheckSnapshot;

typedef struct Qcow2Check {
    BlockDriverState *bs;
    BDRVQcow2State *s;
    BdrvCheckResult *res;
    BdrvCheckMode fix;
    uint64_t cluster_size;
    unsigned cluster_bits;
    unsigned order;                 /* refcount_order */
    uint64_t refcount_max;
    unsigned refblock_bits;         /* log2 of entries per refcount block */
    uint64_t file_len;
    bool has_data_file;

    /* The IMRT: nb_clusters entries, in a buffer of imrt_bytes. */
    uint8_t *imrt;
    uint64_t nb_clusters;
    size_t imrt_bytes;

    /* The on-disk refcount table (host byte order) and one block of it. */
    uint64_t *reftable;
    uint64_t reftable_size;
    uint8_t *refblock;
    uint64_t refblock_offset;       /* 0: none loaded */
    bool reported_unaligned;

    /* The active L1 table, all header.l1_size entries. */
    uint64_t *l1;
    uint64_t l1_size;

    Qcow2CheckSnapshot *snapshots;
    uint32_t nb_snapshots;
    uint64_t snapshots_size;
    /* The snapshot table's findings (QEMU's snapshot_res), counted apart */
    uint32_t sn_reduced;            /* entries dropped off its end */
    uint32_t sn_extra_dropped;      /* entries with extra data cut */
    int64_t sn_corruptions;
    int64_t sn_corruptions_fixed;

    uint32_t nb_bitmaps;
    uint64_t bitmap_dir_offset;
    uint64_t bitmap_dir_size;

    bool rebuild;
} Qcow2Check;

static void check_vreport(Qcow2Check *c, bool is_error, const char *fmt,
                          va_list ap)
{
    g_autofree char *msg = NULL;

    if (c->res->report) {
        msg = g_strdup_vprintf(fmt, ap);
        c->res->report(c->res->report_opaque, is_error, msg);
    }
}

/* A finding, as qemu-img prints it on stderr. */
static void G_GNUC_PRINTF(2, 3) check_report(Qcow2Check *c,
                                             const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    check_vreport(c, false, fmt, ap);
    va_end(ap);
}

/* One that qemu-img prints as its own error (error_report()). */
static void G_GNUC_PRINTF(2, 3) check_report_error(Qcow2Check *c,
                                                   const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    check_vreport(c, true, fmt, ap);
    va_end(ap);
}

/* ---- I/O on the image file: past its end, reads give zeroes */

/*
 * QEMU's BDRV_MAX_LENGTH: its block layer fails requests that reach past
 * it (-EIO), where nearer offsets past the end of the file read as zeroes.
 */
#define CHECK_MAX_LENGTH 0x7fffffffc0000000ull

static int check_pread(Qcow2Check *c, uint64_t offset, void *buf, size_t len)
{
    BlockDriverState *file = c->bs->file;
    size_t n = 0;

    if (offset > CHECK_MAX_LENGTH || len > CHECK_MAX_LENGTH - offset) {
        return -EIO;
    }

    /* Only what the file holds is read: nothing to allocate for the rest. */
    if (offset < c->file_len) {
        n = MIN(len, c->file_len - offset);
        if (bdrv_pread(file, offset, buf, n, NULL) < 0) {
            return -EIO;
        }
    }
    memset((uint8_t *)buf + n, 0, len - n);
    return 0;
}

static int check_pwrite(Qcow2Check *c, uint64_t offset, const void *buf,
                        size_t len)
{
    BlockDriverState *file = c->bs->file;
    Error *err = NULL;

    if (offset > CHECK_MAX_LENGTH || len > CHECK_MAX_LENGTH - offset) {
        return -EIO;
    }

    /* The cached refcount block may be what is written. */
    if (c->refblock_offset && offset < c->refblock_offset + c->cluster_size &&
        c->refblock_offset < offset + len) {
        c->refblock_offset = 0;
    }
    /*
     * A repair that cannot write is an error of the check (exit 1, "Check
     * failed"), with its cause: counted here once, whoever called.
     */
    if (bdrv_pwrite(file, offset, buf, len, 0, &err) < 0) {
        check_report_error(c, "ERROR repairing the image: %s",
                           error_get_pretty(err));
        error_free(err);
        c->res->check_errors++;
        return -EIO;
    }
    if (offset + len > c->file_len) {
        c->file_len = offset + len;
    }
    return 0;
}

/* ---- Refcount arrays (IMRT and refcount blocks share the layout) */

static uint64_t imrt_get(Qcow2Check *c, uint64_t cluster)
{
    return qcow2_refcount_block_entry(c->imrt, cluster, c->order);
}

/* Room for entries 0..n-1 (zero-filled), in whole clusters. */
static int imrt_grow(Qcow2Check *c, uint64_t n)
{
    uint64_t bytes;

    if (n <= c->nb_clusters) {
        return 0;
    }
    /* A file offset has at most 55 bits of clusters: no overflow here. */
    if (n > (1ull << 55)) {
        return -EFBIG;
    }
    bytes = ROUND_UP(((n << c->order) + 7) / 8, c->cluster_size);
    if (bytes > SIZE_MAX) {
        return -ENOMEM;
    }
    if (bytes > c->imrt_bytes) {
        uint8_t *p = g_try_realloc(c->imrt, bytes);

        if (!p) {
            return -ENOMEM;
        }
        memset(p + c->imrt_bytes, 0, bytes - c->imrt_bytes);
        c->imrt = p;
        c->imrt_bytes = bytes;
    }
    c->nb_clusters = n;
    return 0;
}

/*
 * Count one more reference to each cluster of [offset, offset + size)
 * (QEMU's qcow2_inc_refcounts_imrt). The file's last cluster may be
 * partly past its end; a region a whole cluster past it is a corruption.
 */
static int imrt_inc(Qcow2Check *c, uint64_t offset, uint64_t size)
{
    uint64_t first, last;

    if (size == 0) {
        return 0;
    }
    if (size > UINT64_MAX - offset ||
        offset + size >= c->file_len + c->cluster_size) {
        check_report(c, "ERROR: counting reference for region exceeding the "
                     "end of the file by one cluster or more: offset 0x%"
                     PRIx64 " size 0x%" PRIx64, offset, size);
        c->res->corruptions++;
        return 0;
    }
    first = offset >> c->cluster_bits;
    last = (offset + size - 1) >> c->cluster_bits;
    for (uint64_t k = first; k <= last; k++) {
        uint64_t refcount;
        int ret = imrt_grow(c, k + 1);

        if (ret < 0) {
            c->res->check_errors++;
            return ret;
        }
        refcount = imrt_get(c, k);
        if (refcount == c->refcount_max) {
            check_report(c, "ERROR: overflow cluster offset=0x%" PRIx64,
                         k << c->cluster_bits);
            check_report(c, "Use qemu-img amend to increase the refcount "
                         "entry width or qemu-img convert to create a clean "
                         "copy if the image cannot be opened for writing");
            c->res->corruptions++;
            continue;
        }
        qcow2_refcount_block_set(c->imrt, k, c->order, refcount + 1);
    }
    return 0;
}

/* ---- The refcounts on disk */

/* The refcount block for cluster, loaded into c->refblock; 0: none. */
static int refblock_load(Qcow2Check *c, uint64_t cluster, uint64_t *offset)
{
    uint64_t index = cluster >> c->refblock_bits;
    uint64_t block;

    *offset = 0;
    if (index >= c->reftable_size) {
        return 0;
    }
    block = c->reftable[index] & QCOW2_REFT_OFFSET_MASK;
    if (!block) {
        return 0;
    }
    if (block & (c->cluster_size - 1)) {
        /* As QEMU's qcow2_signal_corruption on a read-only image. */
        if (!c->reported_unaligned) {
            check_report(c, "qcow2: Image is corrupt: Refblock offset %#"
                         PRIx64 " unaligned (reftable index: %#" PRIx64
                         "); further non-fatal corruption events will be "
                         "suppressed", block, index);
            c->reported_unaligned = true;
        }
        return -EIO;
    }
    if (c->refblock_offset != block) {
        c->refblock_offset = 0;
        if (check_pread(c, block, c->refblock, c->cluster_size) < 0) {
            return -EIO;
        }
        c->refblock_offset = block;
    }
    *offset = block;
    return 0;
}

static int disk_refcount(Qcow2Check *c, uint64_t cluster, uint64_t *refcount)
{
    uint64_t block;
    int ret = refblock_load(c, cluster, &block);

    *refcount = 0;
    if (ret < 0 || !block) {
        return ret;
    }
    *refcount = qcow2_refcount_block_entry(
        c->refblock, cluster & ((1ull << c->refblock_bits) - 1), c->order);
    return 0;
}

/* Set a cluster's refcount on disk; its refcount block must exist. */
static int disk_refcount_set(Qcow2Check *c, uint64_t cluster, uint64_t value)
{
    uint64_t index = cluster & ((1ull << c->refblock_bits) - 1);
    uint64_t block, byte;
    size_t n;
    int ret = refblock_load(c, cluster, &block);

    if (ret < 0) {
        return ret;
    }
    if (!block) {
        return -EIO;
    }
    qcow2_refcount_block_set(c->refblock, index, c->order, value);
    /* Write the bytes that hold the entry. */
    byte = (index << c->order) / 8;
    n = c->order < 3 ? 1 : (1u << c->order) / 8;
    return check_pwrite(c, block + byte, c->refblock + byte, n);
}

/* ---- Computing references */

enum {
    CHECK_FRAG_INFO = 1,    /* count allocated/fragmented/compressed */
};

static bool overlaps_metadata(Qcow2Check *c, uint64_t offset, uint64_t len,
                              bool is_l1);

/*
 * A preallocated zero cluster whose offset is unaligned becomes a plain
 * zero cluster (QEMU's fix_l2_entry_by_zero): entry (at entry_offset in
 * the file) is rewritten in place and on disk. -EEXIST: it would have
 * written onto other metadata.
 */
static int fix_l2_entry_by_zero(Qcow2Check *c, uint8_t *entry,
                                uint64_t entry_offset)
{
    const Qcow2Geometry *g = &c->s->g;

    if (g->extended_l2) {
        uint64_t bitmap = ldq_be_p(entry + 8);

        /* Allocated subclusters read as zero; none was allocated here. */
        bitmap |= bitmap << 32;
        bitmap &= ~QCOW2_L2_BITMAP_ALL_ALLOC;
        stq_be_p(entry, 0);
        stq_be_p(entry + 8, bitmap);
    } else {
        stq_be_p(entry, QCOW2_OFLAG_ZERO);
    }
    if (overlaps_metadata(c, entry_offset, g->l2_entry_size, false)) {
        check_report(c, "ERROR: Overlap check failed");
        c->res->check_errors++;
        return -EEXIST;
    }
    if (check_pwrite(c, entry_offset, entry, g->l2_entry_size) < 0) {
        check_report(c, "ERROR: Failed to overwrite L2 table entry: %s",
                     g_strerror(EIO));
        return -EIO;
    }
    c->res->corruptions--;
    c->res->corruptions_fixed++;
    return 0;
}

/* One L2 entry (at entry_offset in the file, entry in memory). */
static int check_l2_entry(Qcow2Check *c, uint8_t *entry,
                          uint64_t entry_offset, unsigned index, int flags,
                          uint64_t *next_contiguous)
{
    const Qcow2Geometry *g = &c->s->g;
    uint64_t l2_entry = ldq_be_p(entry);
    uint64_t bitmap = g->extended_l2 ? ldq_be_p(entry + 8) : 0;
    BdrvCheckResult *res = c->res;
    uint64_t offset = l2_entry & QCOW2_OFFSET_MASK;
    int ret;

    if (l2_entry & QCOW2_OFLAG_COMPRESSED) {
        uint64_t coffset, csize;

        if (l2_entry & QCOW2_OFLAG_COPIED) {
            check_report(c, "ERROR: coffset=0x%" PRIx64 ": copied flag must "
                         "never be set for compressed clusters",
                         l2_entry & g->coffset_mask);
            l2_entry &= ~QCOW2_OFLAG_COPIED;
            res->corruptions++;
        }
        if (c->has_data_file) {
            check_report(c, "ERROR compressed cluster %u with data file, "
                         "entry=0x%" PRIx64, index, l2_entry);
            res->corruptions++;
            return 0;
        }
        if (bitmap) {
            check_report(c, "ERROR compressed cluster %u with non-zero "
                         "subcluster allocation bitmap, entry=0x%" PRIx64,
                         index, l2_entry);
            res->corruptions++;
            return 0;
        }
        qcow2_compressed_extent(g, l2_entry, &coffset, &csize);
        ret = imrt_inc(c, coffset, csize);
        if (ret < 0) {
            return ret;
        }
        if (flags & CHECK_FRAG_INFO) {
            /* Compressed clusters count as fragmented, as in QEMU. */
            res->allocated_clusters++;
            res->compressed_clusters++;
            res->fragmented_clusters++;
        }
        return 0;
    }

    if (l2_entry & QCOW2_L2E_STD_RESERVED) {
        check_report(c, "ERROR found l2 entry with reserved bits set: %"
                     PRIx64, l2_entry);
        res->corruptions++;
    }

    /* QEMU's qcow2_get_cluster_type(). */
    if ((l2_entry & QCOW2_OFLAG_ZERO) && !g->extended_l2 && !offset) {
        return 0;                                   /* zero, no host */
    }
    if (!offset && !(c->has_data_file && (l2_entry & QCOW2_OFLAG_COPIED))) {
        if (bitmap & QCOW2_L2_BITMAP_ALL_ALLOC) {
            check_report(c, "ERROR: Unallocated cluster has non-zero "
                         "subcluster allocation map");
            res->corruptions++;
        }
        return 0;                                   /* unallocated */
    }

    /* A standard cluster, or a preallocated zero cluster. */
    if ((bitmap >> 32) & bitmap) {
        check_report(c, "ERROR offset=%" PRIx64 ": Allocated cluster has "
                     "corrupted subcluster allocation bitmap", offset);
        res->corruptions++;
    }
    if (offset & (c->cluster_size - 1)) {
        bool has_data = g->extended_l2
            ? (bitmap & QCOW2_L2_BITMAP_ALL_ALLOC)
            : !(l2_entry & QCOW2_OFLAG_ZERO);
        bool fix = c->fix & BDRV_FIX_ERRORS;

        res->corruptions++;
        if (has_data) {
            check_report(c, "ERROR offset=%" PRIx64 ": Data cluster is not "
                         "properly aligned; L2 entry corrupted.", offset);
        } else {
            check_report(c, "%s offset=%" PRIx64 ": Preallocated cluster "
                         "is not properly aligned; L2 entry corrupted.",
                         fix ? "Repairing" : "ERROR", offset);
            if (fix) {
                ret = fix_l2_entry_by_zero(c, entry, entry_offset);
                if (ret == 0) {
                    return 0;       /* no cluster in use any more */
                }
                if (ret == -EEXIST) {
                    return -EIO;    /* metadata overlap: stop here */
                }
            }
        }
    }
    if (flags & CHECK_FRAG_INFO) {
        res->allocated_clusters++;
        if (*next_contiguous && offset != *next_contiguous) {
            res->fragmented_clusters++;
        }
        *next_contiguous = offset + c->cluster_size;
    }
    /* Data in an external data file has no refcount. */
    if (!c->has_data_file) {
        return imrt_inc(c, offset, c->cluster_size);
    }
    return 0;
}

static int check_l2_table(Qcow2Check *c, uint64_t l2_offset, int flags)
{
    const Qcow2Geometry *g = &c->s->g;
    g_autofree uint8_t *table = g_malloc(c->cluster_size);
    uint64_t next_contiguous = 0;
    int ret;

    if (check_pread(c, l2_offset, table, c->cluster_size) < 0) {
        check_report(c, "ERROR: I/O error in check_refcounts_l2");
        c->res->check_errors++;
        return -EIO;
    }
    for (uint64_t i = 0; i < g->l2_entries; i++) {
        ret = check_l2_entry(c, table + i * g->l2_entry_size,
                             l2_offset + i * g->l2_entry_size, i, flags,
                             &next_contiguous);
        if (ret < 0) {
            return ret;
        }
    }
    return 0;
}

/* Read an L1 table: the part inside the file, zeroes for the rest. */
static uint64_t *l1_read(Qcow2Check *c, uint64_t offset, uint64_t entries,
                         int *ret)
{
    g_autofree uint64_t *l1 = g_try_new0(uint64_t, entries);

    *ret = 0;
    if (!l1) {
        *ret = -ENOMEM;
        return NULL;
    }
    if (check_pread(c, offset, l1, entries * sizeof(uint64_t)) < 0) {
        *ret = -EIO;
        return NULL;
    }
    for (uint64_t i = 0; i < entries; i++) {
        l1[i] = GUINT64_FROM_BE(l1[i]);
    }
    return g_steal_pointer(&l1);
}

static int check_l1_table(Qcow2Check *c, uint64_t l1_offset, uint64_t entries,
                          int flags)
{
    g_autofree uint64_t *l1 = NULL;
    int ret;

    if (!entries) {
        return 0;
    }
    ret = imrt_inc(c, l1_offset, entries * sizeof(uint64_t));
    if (ret < 0) {
        return ret;
    }
    l1 = l1_read(c, l1_offset, entries, &ret);
    if (!l1) {
        if (ret == -EIO) {
            check_report(c, "ERROR: I/O error in check_refcounts_l1");
        }
        c->res->check_errors++;
        return ret;
    }
    for (uint64_t i = 0; i < entries; i++) {
        uint64_t l2_offset = l1[i] & QCOW2_OFFSET_MASK;

        if (!l1[i]) {
            continue;
        }
        if (l1[i] & QCOW2_L1E_RESERVED_MASK) {
            check_report(c, "ERROR found L1 entry with reserved bits set: %"
                         PRIx64, l1[i]);
            c->res->corruptions++;
        }
        ret = imrt_inc(c, l2_offset, c->cluster_size);
        if (ret < 0) {
            return ret;
        }
        if (l2_offset & (c->cluster_size - 1)) {
            check_report(c, "ERROR l2_offset=%" PRIx64 ": Table is not "
                         "cluster aligned; L1 entry corrupted", l2_offset);
            c->res->corruptions++;
        }
        ret = check_l2_table(c, l2_offset, flags);
        if (ret < 0) {
            return ret;
        }
    }
    return 0;
}

static int check_snapshots(Qcow2Check *c)
{
    if (c->has_data_file && c->nb_snapshots) {
        check_report(c, "ERROR %" PRIu32 " snapshots in image with data "
                     "file", c->nb_snapshots);
        c->res->corruptions++;
    }
    for (uint32_t i = 0; i < c->nb_snapshots; i++) {
        const Qcow2Snapshot *sn = &c->snapshots[i].sn;
        int ret;

        if (sn->l1_table_offset & (c->cluster_size - 1)) {
            check_report(c, "ERROR snapshot %s (%s) l1_offset=%#" PRIx64
                         ": L1 table is not cluster aligned; snapshot table "
                         "entry corrupted", sn->id, sn->name,
                         sn->l1_table_offset);
            c->res->corruptions++;
            continue;
        }
        if (sn->l1_size > QCOW2_MAX_L1_BYTES / sizeof(uint64_t)) {
            check_report(c, "ERROR snapshot %s (%s) l1_size=%#" PRIx32
                         ": L1 table is too large; snapshot table entry "
                         "corrupted", sn->id, sn->name, sn->l1_size);
            c->res->corruptions++;
            continue;
        }
        ret = check_l1_table(c, sn->l1_table_offset, sn->l1_size, 0);
        if (ret < 0) {
            return ret;
        }
    }
    return imrt_inc(c, c->s->header.snapshots_offset, c->snapshots_size);
}

/* A bitmap table entry as QEMU's check_table_entry() accepts it. */
static bool bitmap_entry_valid(uint64_t entry, uint64_t cluster_size)
{
    uint64_t offset = entry & QCOW2_BME_OFFSET_MASK;

    return !(entry & QCOW2_BME_RESERVED_MASK) &&
           !(offset & (cluster_size - 1)) &&
           !((entry & QCOW2_BME_ALL_ONES) && offset);
}

static int check_bitmap_table(Qcow2Check *c, uint64_t offset, uint32_t size)
{
    g_autofree uint64_t *table = NULL;
    int ret = imrt_inc(c, offset, (uint64_t)size * sizeof(uint64_t));

    if (ret < 0) {
        return ret;
    }
    if ((offset & (c->cluster_size - 1)) || size > QCOW2_MAX_BITMAP_TABLE) {
        c->res->corruptions++;
        return -EINVAL;
    }
    if (!size) {
        return 0;
    }
    table = l1_read(c, offset, size, &ret);
    if (!table) {
        c->res->corruptions++;
        return ret;
    }
    for (uint32_t i = 0; i < size; i++) {
        uint64_t entry_offset = table[i] & QCOW2_BME_OFFSET_MASK;

        if (!bitmap_entry_valid(table[i], c->cluster_size)) {
            c->res->corruptions++;
            continue;
        }
        if (entry_offset) {
            ret = imrt_inc(c, entry_offset, c->cluster_size);
            if (ret < 0) {
                return ret;
            }
        }
    }
    return 0;
}

/*
 * Persistent bitmaps (QEMU's qcow2_check_bitmaps_refcounts): the
 * directory, each bitmap's table and the clusters it points at. A
 * directory that does not parse fails the check, as in QEMU.
 */
static int check_bitmaps(Qcow2Check *c)
{
    g_autofree uint8_t *dir = NULL;
    uint64_t pos = 0;
    int ret;

    if (!c->nb_bitmaps) {
        return 0;
    }
    ret = imrt_inc(c, c->bitmap_dir_offset, c->bitmap_dir_size);
    if (ret < 0) {
        return ret;
    }
    dir = g_malloc(c->bitmap_dir_size);
    if (check_pread(c, c->bitmap_dir_offset, dir, c->bitmap_dir_size) < 0) {
        c->res->corruptions++;
        return -EINVAL;
    }
    for (uint32_t i = 0; i < c->nb_bitmaps; i++) {
        uint64_t table_offset, entry_len;
        uint32_t table_size, extra;
        uint16_t name_len;

        if (c->bitmap_dir_size - pos < QCOW2_BITMAP_DIR_FIXED_LEN) {
            c->res->corruptions++;
            return -EINVAL;
        }
        table_offset = ldq_be_p(dir + pos);
        table_size = ldl_be_p(dir + pos + 8);
        name_len = lduw_be_p(dir + pos + 18);
        extra = ldl_be_p(dir + pos + 20);
        entry_len = ROUND_UP(QCOW2_BITMAP_DIR_FIXED_LEN + (uint64_t)extra +
                             name_len, 8);
        if (entry_len > c->bitmap_dir_size - pos) {
            c->res->corruptions++;
            return -EINVAL;
        }
        ret = check_bitmap_table(c, table_offset, table_size);
        if (ret < 0) {
            return ret;
        }
        pos += entry_len;
    }
    return 0;
}

/*
 * Make the file end with the cluster at offset; on failure say why as
 * qemu-img does: the file layer's error, then the check's (both end with
 * the system's reason, e.g. "File too large").
 */
static int check_grow_file(Qcow2Check *c, uint64_t offset, uint64_t cluster)
{
    BlockDriverState *file = c->bs->file;
    g_autoptr(Error) err = NULL;
    const char *why, *colon;

    if (offset > INT64_MAX - c->cluster_size) {
        check_report(c, "ERROR could not resize image: %s",
                     g_strerror(EINVAL));
        return -EINVAL;
    }
    if (cluster >= INT_MAX) {
        /* Said as a file system refusing such a size says it. */
        check_report_error(c, "Could not resize file: %s", g_strerror(EFBIG));
        check_report(c, "ERROR could not resize image: %s",
                     g_strerror(EFBIG));
        return -EFBIG;
    }
    if (bdrv_truncate(file, offset + c->cluster_size, PREALLOC_MODE_OFF,
                      &err) == 0) {
        c->file_len = offset + c->cluster_size;
        return 0;
    }
    /* The file layer's message ends with ": <strerror>". */
    why = error_get_pretty(err);
    colon = strrchr(why, ':');
    why = colon && colon[1] == ' ' ? colon + 2 : why;
    check_report_error(c, "Could not resize file: %s", why);
    check_report(c, "ERROR could not resize image: %s", why);
    return -EIO;
}

/*
 * The refcount blocks themselves (QEMU's check_refblocks): aligned,
 * inside the file (else, with fix, the file grows to hold them), and
 * referenced once.
 */
static int check_refblocks(Qcow2Check *c)
{
    BdrvCheckResult *res = c->res;
    int ret;

    for (uint64_t i = 0; i < c->reftable_size; i++) {
        uint64_t offset = c->reftable[i] & QCOW2_REFT_OFFSET_MASK;
        uint64_t cluster = offset >> c->cluster_bits;

        if (c->reftable[i] & ~QCOW2_REFT_OFFSET_MASK) {
            check_report(c, "ERROR refcount table entry %" PRIu64 " has "
                         "reserved bits set", i);
            res->corruptions++;
            c->rebuild = true;
            continue;
        }
        if (offset & (c->cluster_size - 1)) {
            check_report(c, "ERROR refcount block %" PRIu64 " is not cluster "
                         "aligned; refcount table entry corrupted", i);
            res->corruptions++;
            c->rebuild = true;
            continue;
        }
        if (cluster >= c->nb_clusters) {
            bool fix = c->fix & BDRV_FIX_ERRORS;

            check_report(c, "%s refcount block %" PRIu64 " is outside image",
                         fix ? "Repairing" : "ERROR", i);
            if (!fix) {
                res->corruptions++;
                continue;
            }
            /*
             * Grow the file so that the block exists (it reads as 0),
             * within the INT_MAX clusters a check can count.
             */
            if (check_grow_file(c, offset, cluster) < 0) {
                res->corruptions++;
                c->rebuild = true;
                continue;
            }
            ret = imrt_grow(c, cluster + 1);
            if (ret < 0) {
                res->check_errors++;
                return ret;
            }
            res->corruptions_fixed++;
            ret = imrt_inc(c, offset, c->cluster_size);
            if (ret < 0) {
                return ret;
            }
            continue;
        }
        if (offset) {
            ret = imrt_inc(c, offset, c->cluster_size);
            if (ret < 0) {
                return ret;
            }
            if (imrt_get(c, cluster) != 1) {
                check_report(c, "ERROR refcount block %" PRIu64
                             " refcount=%" PRIu64, i, imrt_get(c, cluster));
                res->corruptions++;
                c->rebuild = true;
            }
        }
    }
    return 0;
}

/* The IMRT from everything that references clusters (calculate_refcounts). */
static int calculate_refcounts(Qcow2Check *c)
{
    const Qcow2Header *h = &c->s->header;
    const Qcow2Extensions *ext = &c->s->ext;
    int ret;

    /* The header cluster */
    ret = imrt_inc(c, 0, c->cluster_size);
    if (ret < 0) {
        return ret;
    }
    ret = check_l1_table(c, h->l1_table_offset, c->l1_size, CHECK_FRAG_INFO);
    if (ret < 0) {
        return ret;
    }
    ret = check_snapshots(c);
    if (ret < 0) {
        return ret;
    }
    ret = imrt_inc(c, h->refcount_table_offset,
                   c->reftable_size * sizeof(uint64_t));
    if (ret < 0) {
        return ret;
    }
    if (ext->has_crypto_header) {
        ret = imrt_inc(c, ext->crypto_header_offset,
                       ext->crypto_header_length);
        if (ret < 0) {
            return ret;
        }
    }
    ret = check_bitmaps(c);
    if (ret < 0) {
        return ret;
    }
    return check_refblocks(c);
}

/*
 * Compare the on-disk refcounts with the IMRT, cluster by cluster
 * (compare_refcounts), repairing what fix allows; *highest is the last
 * cluster in use by either.
 */
static void compare_refcounts(Qcow2Check *c, BdrvCheckMode fix,
                              uint64_t *highest)
{
    BdrvCheckResult *res = c->res;

    *highest = 0;
    for (uint64_t i = 0; i < c->nb_clusters; i++) {
        uint64_t disk, ref;
        int64_t *fixed = NULL;
        int ret = disk_refcount(c, i, &disk);

        if (ret < 0) {
            check_report(c, "Can't get refcount for cluster %" PRIu64 ": %s",
                         i, g_strerror(-ret));
            res->check_errors++;
            continue;
        }
        ref = imrt_get(c, i);
        if (disk > 0 || ref > 0) {
            *highest = i;
        }
        if (disk == ref) {
            continue;
        }
        if (disk == 0) {
            /* No refcount to fix: the structures must be rebuilt. */
            c->rebuild = true;
        } else if (disk > ref && (fix & BDRV_FIX_LEAKS)) {
            fixed = &res->leaks_fixed;
        } else if (disk < ref && (fix & BDRV_FIX_ERRORS)) {
            fixed = &res->corruptions_fixed;
        }
        check_report(c, "%s cluster %" PRIu64 " refcount=%" PRIu64
                     " reference=%" PRIu64,
                     fixed ? "Repairing" : disk < ref ? "ERROR" : "Leaked",
                     i, disk, ref);
        if (fixed && disk_refcount_set(c, i, ref) == 0) {
            (*fixed)++;
            continue;
        }
        if (disk < ref) {
            res->corruptions++;
        } else {
            res->leaks++;
        }
    }
}

static bool ranges_overlap(uint64_t a, uint64_t alen, uint64_t b,
                           uint64_t blen)
{
    return alen && blen && a < b + blen && b < a + alen;
}

/*
 * Whether a write of an L1 entry or an L2 table would land on other
 * metadata (a corrupt image whose tables overlap): QEMU's overlap check
 * refuses such writes, and so does this.
 */
static bool overlaps_metadata(Qcow2Check *c, uint64_t offset, uint64_t len,
                              bool is_l1)
{
    const Qcow2Header *h = &c->s->header;

    if (ranges_overlap(offset, len, 0, c->cluster_size) ||
        ranges_overlap(offset, len, h->refcount_table_offset,
                       c->reftable_size * sizeof(uint64_t)) ||
        (!is_l1 && ranges_overlap(offset, len, h->l1_table_offset,
                                  c->l1_size * sizeof(uint64_t))) ||
        ranges_overlap(offset, len, h->snapshots_offset,
                       c->snapshots_size)) {
        return true;
    }
    for (uint64_t i = 0; i < c->reftable_size; i++) {
        uint64_t block = c->reftable[i] & QCOW2_REFT_OFFSET_MASK;

        if (block && ranges_overlap(offset, len, block, c->cluster_size)) {
            return true;
        }
    }
    for (uint32_t i = 0; i < c->nb_snapshots; i++) {
        if (ranges_overlap(offset, len, c->snapshots[i].sn.l1_table_offset,
                           (uint64_t)c->snapshots[i].sn.l1_size * 8)) {
            return true;
        }
    }
    return false;
}

static int write_l1_entry(Qcow2Check *c, uint64_t index)
{
    uint8_t be[8];

    stq_be_p(be, c->l1[index]);
    if (overlaps_metadata(c, c->s->header.l1_table_offset + index * 8, 8,
                          true)) {
        check_report(c, "ERROR: Could not write L1 entry; metadata overlap "
                     "check failed: %s", g_strerror(EIO));
        return -EIO;
    }
    return check_pwrite(c, c->s->header.l1_table_offset + index * 8, be, 8);
}

/*
 * The COPIED flag of every active L1 and L2 entry must say whether the
 * refcount is 1 (check_oflag_copied). Repaired with BDRV_FIX_ERRORS, or
 * with BDRV_FIX_LEAKS when nothing else is wrong (the refcounts are then
 * right, so the flag can follow them).
 */
static int check_oflag_copied(Qcow2Check *c)
{
    const Qcow2Geometry *g = &c->s->g;
    BdrvCheckResult *res = c->res;
    g_autofree uint8_t *table = g_malloc(c->cluster_size);
    bool repair;

    if (c->fix & BDRV_FIX_ERRORS) {
        repair = true;
    } else if (c->fix & BDRV_FIX_LEAKS) {
        repair = !res->check_errors && !res->corruptions && !res->leaks;
    } else {
        repair = false;
    }

    for (uint64_t i = 0; i < c->l1_size; i++) {
        uint64_t l1_entry = c->l1[i];
        uint64_t l2_offset = l1_entry & QCOW2_OFFSET_MASK;
        uint64_t refcount;
        int dirty = 0;

        if (!l2_offset) {
            continue;
        }
        if (disk_refcount(c, l2_offset >> c->cluster_bits, &refcount) < 0) {
            continue;   /* already reported by compare_refcounts */
        }
        if ((refcount == 1) != !!(l1_entry & QCOW2_OFLAG_COPIED)) {
            res->corruptions++;
            check_report(c, "%s OFLAG_COPIED L2 cluster: l1_index=%" PRIu64
                         " l1_entry=%" PRIx64 " refcount=%" PRIu64,
                         repair ? "Repairing" : "ERROR", i, l1_entry,
                         refcount);
            if (repair) {
                c->l1[i] = refcount == 1 ? l1_entry | QCOW2_OFLAG_COPIED
                                         : l1_entry & ~QCOW2_OFLAG_COPIED;
                if (write_l1_entry(c, i) < 0) {
                    res->check_errors++;
                    return -EIO;
                }
                res->corruptions--;
                res->corruptions_fixed++;
            }
        }
        if (check_pread(c, l2_offset, table, c->cluster_size) < 0) {
            check_report(c, "ERROR: Could not read L2 table: %s",
                         g_strerror(EIO));
            res->check_errors++;
            return -EIO;
        }
        for (uint64_t j = 0; j < g->l2_entries; j++) {
            uint8_t *e = table + j * g->l2_entry_size;
            uint64_t l2_entry = ldq_be_p(e);
            uint64_t data = l2_entry & QCOW2_OFFSET_MASK;
            bool allocated;

            /* Standard and preallocated zero clusters (cluster types). */
            if (l2_entry & QCOW2_OFLAG_COMPRESSED) {
                continue;
            }
            allocated = data ||
                (c->has_data_file && (l2_entry & QCOW2_OFLAG_COPIED) &&
                 !((l2_entry & QCOW2_OFLAG_ZERO) && !g->extended_l2));
            if (!allocated) {
                continue;
            }
            if (c->has_data_file) {
                refcount = 1;
            } else if (disk_refcount(c, data >> c->cluster_bits,
                                     &refcount) < 0) {
                continue;
            }
            if ((refcount == 1) != !!(l2_entry & QCOW2_OFLAG_COPIED)) {
                res->corruptions++;
                check_report(c, "%s OFLAG_COPIED data cluster: l2_entry=%"
                             PRIx64 " refcount=%" PRIu64,
                             repair ? "Repairing" : "ERROR", l2_entry,
                             refcount);
                if (repair) {
                    stq_be_p(e, refcount == 1
                             ? l2_entry | QCOW2_OFLAG_COPIED
                             : l2_entry & ~QCOW2_OFLAG_COPIED);
                    dirty++;
                }
            }
        }
        if (dirty) {
            if (overlaps_metadata(c, l2_offset, c->cluster_size, false)) {
                check_report(c, "ERROR: Could not write L2 table; metadata "
                             "overlap check failed: %s", g_strerror(EIO));
                res->check_errors++;
                return -EIO;
            }
            if (check_pwrite(c, l2_offset, table, c->cluster_size) < 0) {
                check_report(c, "ERROR: Could not write L2 table: %s",
                             g_strerror(EIO));
                return -EIO;
            }
            res->corruptions -= dirty;
            res->corruptions_fixed += dirty;
        }
    }
    return 0;
}

/* ---- Loading what the check walks */

/*
 * The snapshot table's count and offset, as QEMU's check validates them
 * (the open leaves them to it): more than 65536 entries are discarded
 * with -r all (the header is rewritten after the entries are read).
 */
static int check_snapshot_pointer(Qcow2Check *c, uint32_t *nb)
{
    const Qcow2Header *h = &c->s->header;
    bool repair = c->fix & BDRV_FIX_ERRORS;
    g_autoptr(Error) err = NULL;

    *nb = h->nb_snapshots;
    if (*nb > QCOW2_MAX_SNAPSHOTS && repair) {
        check_report(c, "Discarding %" PRIu32 " overhanging snapshots",
                     *nb - QCOW2_MAX_SNAPSHOTS);
        c->sn_reduced += *nb - QCOW2_MAX_SNAPSHOTS;
        *nb = QCOW2_MAX_SNAPSHOTS;
    }
    if (*nb > QCOW2_MAX_SNAPSHOTS) {
        check_report_error(c, "ERROR snapshot table too large");
        check_report(c, "You can force-remove all %" PRIu32 " overhanging "
                     "snapshots with qemu-img check -r all",
                     *nb - QCOW2_MAX_SNAPSHOTS);
        return -EFBIG;
    }
    if (*nb && qcow2_validate_table(h->snapshots_offset, *nb,
                                    QCOW2_SNAPSHOT_FIXED_LEN,
                                    (uint64_t)QCOW2_MAX_SNAPSHOTS *
                                    QCOW2_SNAPSHOT_FIXED_LEN,
                                    c->cluster_size, INT64_MAX,
                                    "snapshot table", &err) < 0) {
        check_report_error(c, "ERROR snapshot table offset invalid");
        return -EINVAL;
    }
    return 0;
}

/* Bytes at offset for an entry's field; past the file, zeroes. */
static int snapshot_pread(Qcow2Check *c, uint64_t offset, void *buf,
                          size_t len)
{
    if (check_pread(c, offset, buf, len) < 0) {
        check_report_error(c, "ERROR failed to read the snapshot table: "
                           "Failed to read snapshot table: %s",
                           g_strerror(EIO));
        return -EIO;
    }
    return 0;
}

/*
 * One entry at *pos (8-aligned first), into c->snapshots[i]. Extra data
 * over 1 KiB fails the check, or with -r all is cut to 1 KiB (the entry
 * keeps its place: *pos moves past all of it).
 */
static int load_snapshot_entry(Qcow2Check *c, uint32_t i, uint64_t *pos)
{
    Qcow2CheckSnapshot *cs = &c->snapshots[i];
    Qcow2Snapshot *sn = &cs->sn;
    uint8_t fixed[QCOW2_SNAPSHOT_FIXED_LEN];
    uint8_t known[QCOW2_SNAPSHOT_EXTRA_LEN] = { 0 };
    uint64_t extra_start;
    uint16_t id_len, name_len;
    uint32_t extra;

    *pos = ROUND_UP(*pos, 8);
    if (snapshot_pread(c, *pos, fixed, sizeof(fixed)) < 0) {
        return -EIO;
    }
    sn->l1_table_offset = ldq_be_p(fixed);
    sn->l1_size = ldl_be_p(fixed + 8);
    id_len = lduw_be_p(fixed + 12);
    name_len = lduw_be_p(fixed + 14);
    sn->date_sec = ldl_be_p(fixed + 16);
    sn->date_nsec = ldl_be_p(fixed + 20);
    sn->vm_clock_nsec = ldq_be_p(fixed + 24);
    sn->vm_state_size = ldl_be_p(fixed + 32);
    extra = ldl_be_p(fixed + 36);
    extra_start = *pos + QCOW2_SNAPSHOT_FIXED_LEN;
    if (extra > QCOW2_MAX_SNAPSHOT_EXTRA) {
        if (!(c->fix & BDRV_FIX_ERRORS)) {
            check_report_error(c, "ERROR failed to read the snapshot "
                               "table: Too much extra metadata in snapshot "
                               "table entry %" PRIu32, i);
            check_report(c, "You can force-remove this extra metadata with "
                         "qemu-img check -r all");
            return -EFBIG;
        }
        check_report(c, "Discarding too much extra metadata in snapshot "
                     "table entry %" PRIu32 " (%" PRIu32 " > %d)", i, extra,
                     QCOW2_MAX_SNAPSHOT_EXTRA);
        c->sn_extra_dropped++;
    }
    cs->extra_data_size = MIN(extra, QCOW2_MAX_SNAPSHOT_EXTRA);
    /* Spec, "Extra data": each field present if the size reaches it. */
    if (snapshot_pread(c, extra_start, known,
                       MIN(extra, QCOW2_SNAPSHOT_EXTRA_LEN)) < 0) {
        return -EIO;
    }
    if (extra >= 8) {
        sn->vm_state_size = ldq_be_p(known);
    }
    /* QEMU's bs->total_sectors, in bytes. */
    sn->disk_size = extra >= 16 ? ldq_be_p(known + 8)
                                : ROUND_DOWN(c->s->header.size,
                                             BDRV_SECTOR_SIZE);
    sn->icount = extra >= 24 ? ldq_be_p(known + 16) : UINT64_MAX;
    if (cs->extra_data_size > QCOW2_SNAPSHOT_EXTRA_LEN) {
        sn->unknown_extra_size = cs->extra_data_size -
                                 QCOW2_SNAPSHOT_EXTRA_LEN;
        sn->unknown_extra = g_malloc(sn->unknown_extra_size);
        if (snapshot_pread(c, extra_start + QCOW2_SNAPSHOT_EXTRA_LEN,
                           sn->unknown_extra, sn->unknown_extra_size) < 0) {
            return -EIO;
        }
    }
    *pos = extra_start + extra;
    sn->id = g_malloc0(id_len + 1);
    sn->name = g_malloc0(name_len + 1);
    if (snapshot_pread(c, *pos, sn->id, id_len) < 0 ||
        snapshot_pread(c, *pos + id_len, sn->name, name_len) < 0) {
        return -EIO;
    }
    *pos += id_len + name_len;
    cs->strings_len = id_len + name_len;
    return 0;
}

static void snapshot_clear(Qcow2Snapshot *sn)
{
    g_free(sn->id);
    g_free(sn->name);
    g_free(sn->unknown_extra);
    memset(sn, 0, sizeof(*sn));
}

/*
 * The snapshot table, as QEMU's check reads it (qcow2_do_read_snapshots
 * and qcow2_check_read_snapshot_table): entries 8-aligned, past the end
 * of the file as zeroes. Without -r all, too much extra data in an entry
 * or a table over QEMU's 64 MiB fails the check. With it, the extra data
 * is cut to 1 KiB (the table is then rewritten after the refcounts are
 * repaired: fix_snapshot_table) and the entries from the one that passes
 * 64 MiB on are dropped at once, by lowering the header's count: their
 * clusters leak, for the refcount repair to free. Version 3 entries need
 * the 16 bytes of extra data the spec requires (rewritten with 24).
 * Findings count in c->sn_corruptions, apart from the refcounts' (QEMU's
 * snapshot_res).
 */
static int load_snapshots(Qcow2Check *c)
{
    Qcow2Header *h = &c->s->header;
    bool repair = c->fix & BDRV_FIX_ERRORS;
    uint64_t pos = h->snapshots_offset, table_length = 0;
    uint32_t nb;
    int ret;

    ret = check_snapshot_pointer(c, &nb);
    if (ret < 0 || !nb) {
        goto out;
    }
    c->snapshots = g_new0(Qcow2CheckSnapshot, nb);
    for (uint32_t i = 0; i < nb; i++) {
        uint64_t entry_start = pos;

        c->nb_snapshots = i + 1;
        ret = load_snapshot_entry(c, i, &pos);
        if (ret < 0) {
            return ret;
        }
        /* What the entry will take once written (extra data cut). */
        table_length = ROUND_UP(table_length, 8) + QCOW2_SNAPSHOT_FIXED_LEN +
                       c->snapshots[i].extra_data_size +
                       c->snapshots[i].strings_len;
        if (table_length <= QCOW2_MAX_SNAPSHOTS_SIZE &&
            pos - h->snapshots_offset <= INT_MAX) {
            continue;
        }
        if (!repair) {
            check_report_error(c, "ERROR failed to read the snapshot table: "
                               "Snapshot table is too big");
            check_report(c, "You can force-remove all %" PRIu32
                         " overhanging snapshots with qemu-img check -r all",
                         nb - i);
            return -EFBIG;
        }
        check_report(c, "Discarding %" PRIu32 " overhanging snapshots "
                     "(snapshot table is too big)", nb - i);
        c->sn_reduced += nb - i;
        snapshot_clear(&c->snapshots[i].sn);
        c->nb_snapshots = nb = i;
        pos = entry_start;
        break;
    }
    c->snapshots_size = pos - h->snapshots_offset;

out:
    if (ret < 0) {
        return ret;
    }
    c->sn_corruptions += c->sn_reduced + c->sn_extra_dropped;
    if (c->sn_reduced) {
        /*
         * The header's count now, as QEMU: what the refcount check counts
         * must be what the header says. The dropped entries' clusters
         * leak, and are freed below.
         */
        g_autoptr(Error) err = NULL;
        uint8_t be[4];

        stl_be_p(be, nb);
        if (check_pwrite(c, 60, be, sizeof(be)) < 0 ||
            bdrv_flush(c->bs->file, &err) < 0) {
            check_report(c, "ERROR failed to update the snapshot count in "
                         "the image header: %s", g_strerror(EIO));
            return -EIO;
        }
        h->nb_snapshots = nb;
        c->sn_corruptions_fixed += c->sn_reduced;
        c->sn_corruptions -= c->sn_reduced;
    }
    for (uint32_t i = 0; h->version >= 3 && i < c->nb_snapshots; i++) {
        if (c->snapshots[i].extra_data_size < QCOW2_SNAPSHOT_V3_EXTRA) {
            check_report(c, "%s snapshot table entry %" PRIu32 " is "
                         "incomplete", repair ? "Repairing" : "ERROR", i);
            c->sn_corruptions++;
        }
    }
    return 0;
}

/* The bitmaps extension, if the autoclear bit says it is valid. */
static int load_bitmaps_ext(Qcow2Check *c)
{
    const Qcow2Header *h = &c->s->header;
    g_autofree uint8_t *first = NULL;
    uint64_t end = c->cluster_size, off = h->header_length;

    if (h->version < 3 || !(h->autoclear_features & QCOW2_AUTOCLEAR_BITMAPS)) {
        return 0;
    }
    first = g_malloc(c->cluster_size);
    if (check_pread(c, 0, first, c->cluster_size) < 0) {
        return -EIO;
    }
    if (h->backing_file_offset) {
        end = MIN(end, h->backing_file_offset);
    }
    /* The open parsed these extensions: the walk stays inside end. */
    while (off + 8 <= end) {
        uint32_t type = ldl_be_p(first + off);
        uint32_t len = ldl_be_p(first + off + 4);

        if (type == QCOW2_EXT_END || len > end - off - 8) {
            break;
        }
        if (type == QCOW2_EXT_BITMAPS && len >= QCOW2_BITMAPS_EXT_LEN) {
            c->nb_bitmaps = ldl_be_p(first + off + 8);
            c->bitmap_dir_size = ldq_be_p(first + off + 16);
            c->bitmap_dir_offset = ldq_be_p(first + off + 24);
            if (c->nb_bitmaps > QCOW2_MAX_BITMAPS ||
                c->bitmap_dir_size > QCOW2_MAX_BITMAP_DIR ||
                (c->bitmap_dir_offset & (c->cluster_size - 1))) {
                c->nb_bitmaps = 0;
                c->res->corruptions++;
                return -EINVAL;
            }
            if (!c->bitmap_dir_size) {
                c->nb_bitmaps = 0;
            }
            return 0;
        }
        off += 8 + ROUND_UP((uint64_t)len, 8);
    }
    return 0;
}

static int load_tables(Qcow2Check *c)
{
    const Qcow2Header *h = &c->s->header;
    int ret;

    /* Both sizes were bounded by the open (8 MiB, 32 MiB). */
    c->reftable_size = (uint64_t)h->refcount_table_clusters *
                       (c->cluster_size / sizeof(uint64_t));
    c->reftable = l1_read(c, h->refcount_table_offset, c->reftable_size,
                          &ret);
    if (!c->reftable) {
        return ret;
    }
    c->l1_size = h->l1_size;
    if (c->l1_size) {
        c->l1 = l1_read(c, h->l1_table_offset, c->l1_size, &ret);
        if (!c->l1) {
            return ret;
        }
    }
    ret = load_snapshots(c);
    if (ret < 0) {
        return ret;
    }
    return load_bitmaps_ext(c);
}

/* ---- The check */

/* ---- Rebuilding the refcount structures */

/*
 * count free clusters in a row in the IMRT, from *first_free on (which is
 * moved to the first free cluster seen), marked used; past the end of the
 * IMRT, at the end of the image (QEMU's alloc_clusters_imrt).
 */
static int64_t imrt_alloc(Qcow2Check *c, uint64_t count, uint64_t *first_free)
{
    uint64_t cluster = *first_free, run = 0;
    bool first_gap = true;
    int ret;

    for (; cluster < c->nb_clusters && run < count; cluster++) {
        if (imrt_get(c, cluster)) {
            run = 0;
            continue;
        }
        run++;
        if (first_gap) {
            *first_free = cluster;
            first_gap = false;
        }
    }
    if (run < count) {
        ret = imrt_grow(c, cluster + count - run);
        if (ret < 0) {
            return ret;
        }
    }
    cluster -= run;
    for (uint64_t i = 0; i < count; i++) {
        qcow2_refcount_block_set(c->imrt, cluster + i, c->order, 1);
    }
    return cluster << c->cluster_bits;
}

/*
 * Write a refcount block for every block's worth of clusters in
 * [first, end) that has a cluster in use: the block is the IMRT's slice,
 * at a cluster allocated for it in the IMRT (so a block may have to
 * describe itself; end grows to cover it). *table and *entries are the
 * new refcount table; returns 1 if it had to grow, 0 if not, or -errno.
 */
static int rebuild_write_refblocks(Qcow2Check *c, uint64_t first,
                                   uint64_t end, uint64_t **table,
                                   uint64_t *entries)
{
    uint64_t per_block = 1ull << c->refblock_bits;
    uint64_t first_free = 0;
    bool grown = false;

    for (uint64_t cluster = first; cluster < end; cluster++) {
        uint64_t index = cluster >> c->refblock_bits;
        uint64_t start = index << c->refblock_bits;
        uint64_t block;

        if (!imrt_get(c, cluster)) {
            continue;
        }
        if (index < *entries && (*table)[index]) {
            block = (*table)[index];
        } else {
            int64_t off;

            /* Not in a block already written: it would not count it. */
            first_free = MAX(first_free, start);
            off = imrt_alloc(c, 1, &first_free);
            if (off < 0) {
                check_report_error(c, "ERROR allocating refblock: %s",
                                   g_strerror(-off));
                return off;
            }
            block = off;
            end = MAX(end, (block >> c->cluster_bits) + 1);
            if (index >= *entries) {
                uint64_t n = ROUND_UP((index + 1) * sizeof(uint64_t),
                                      c->cluster_size) / sizeof(uint64_t);
                uint64_t *t;

                if (n * sizeof(uint64_t) > QCOW2_MAX_REFTABLE_BYTES ||
                    !(t = g_try_renew(uint64_t, *table, n))) {
                    check_report_error(c, "ERROR allocating reftable "
                                       "memory");
                    return -ENOMEM;
                }
                memset(t + *entries, 0, (n - *entries) * sizeof(uint64_t));
                *table = t;
                *entries = n;
                grown = true;
            }
            (*table)[index] = block;
        }
        /* The IMRT's bytes are whole clusters: the slice is in it. */
        if (check_pwrite(c, block, c->imrt + index * c->cluster_size,
                         c->cluster_size) < 0) {
            check_report_error(c, "ERROR writing refblock: %s",
                               g_strerror(EIO));
            return -EIO;
        }
        cluster = start + per_block - 1;
    }
    return grown;
}

/*
 * New refcount blocks and table from the IMRT, at free clusters (QEMU's
 * rebuild_refcount_structure): the blocks first, then a table, whose
 * clusters may need blocks of their own, which may grow the table...
 * until it fits. Then the table is written and the header points at it;
 * the old structures are left to the leak repair.
 */
static int rebuild_refcount_structure(Qcow2Check *c)
{
    Qcow2Header *h = &c->s->header;
    g_autofree uint64_t *table = NULL;
    uint64_t entries = 0, clusters = 0;
    int64_t offset = -1;
    uint8_t hdr[12];
    int grown;

    grown = rebuild_write_refblocks(c, 0, c->nb_clusters, &table, &entries);
    while (grown > 0) {
        uint64_t first_free = 0, start, end;

        clusters = ROUND_UP(entries * sizeof(uint64_t), c->cluster_size) >>
                   c->cluster_bits;
        offset = imrt_alloc(c, clusters, &first_free);
        if (offset < 0) {
            check_report_error(c, "ERROR allocating reftable: %s",
                               g_strerror(-offset));
            grown = offset;
            break;
        }
        start = offset >> c->cluster_bits;
        end = start + clusters;
        grown = rebuild_write_refblocks(c, start, end, &table, &entries);
        if (grown > 0) {
            /* A bigger table goes elsewhere: free this place. */
            for (uint64_t i = start; i < end; i++) {
                qcow2_refcount_block_set(c->imrt, i, c->order, 0);
            }
        }
    }
    if (grown < 0) {
        c->res->check_errors++;
        return grown;
    }
    for (uint64_t i = 0; i < entries; i++) {
        table[i] = GUINT64_TO_BE(table[i]);
    }
    stq_be_p(hdr, offset);
    stl_be_p(hdr + 8, clusters);
    if (check_pwrite(c, offset, table, entries * sizeof(uint64_t)) < 0 ||
        check_pwrite(c, 48, hdr, sizeof(hdr)) < 0) {
        check_report_error(c, "ERROR writing reftable: %s",
                           g_strerror(EIO));
        return -EIO;
    }
    for (uint64_t i = 0; i < entries; i++) {
        table[i] = GUINT64_FROM_BE(table[i]);
    }
    g_free(c->reftable);
    c->reftable = g_steal_pointer(&table);
    c->reftable_size = entries;
    c->refblock_offset = 0;
    h->refcount_table_offset = offset;
    h->refcount_table_clusters = clusters;
    return 0;
}

/*
 * -r all when the structures cannot be patched: rebuild them, count the
 * references again (the old structures are now leaks, freed with
 * BDRV_FIX_LEAKS), and account what was fixed (the rebuild branch of
 * QEMU's qcow2_check_refcounts).
 */
static int check_rebuild(Qcow2Check *c, uint64_t *highest)
{
    BdrvCheckResult *res = c->res;
    BdrvCheckResult old = *res, saved;
    int64_t fresh_leaks = 0;
    BdrvCheckMode fix;
    int ret;

    check_report(c, "Rebuilding refcount structure");
    ret = rebuild_refcount_structure(c);
    if (ret < 0) {
        return ret;
    }
    res->corruptions = 0;
    res->leaks = 0;
    c->rebuild = false;
    memset(c->imrt, 0, c->imrt_bytes);
    /* Counted again without repairs, as QEMU. */
    fix = c->fix;
    c->fix = 0;
    ret = calculate_refcounts(c);
    c->fix = fix;
    if (ret < 0) {
        return ret;
    }
    if (c->fix & BDRV_FIX_LEAKS) {
        saved = *res;
        memset(res, 0, sizeof(*res));
        res->report = saved.report;
        res->report_opaque = saved.report_opaque;
        compare_refcounts(c, BDRV_FIX_LEAKS, highest);
        if (c->rebuild) {
            check_report(c, "ERROR rebuilt refcount structure is still "
                         "broken");
        }
        /* Leaks left now were made by the rebuild itself. */
        fresh_leaks = res->leaks;
        *res = saved;
    }
    if (res->corruptions < old.corruptions) {
        res->corruptions_fixed += old.corruptions - res->corruptions;
    }
    if (res->leaks < old.leaks) {
        res->leaks_fixed += old.leaks - res->leaks;
    }
    res->leaks += fresh_leaks;
    return 0;
}

/* The refcounts compared, and repaired (qcow2_check_refcounts). */
static int check_refcounts(Qcow2Check *c)
{
    BdrvCheckResult *res = c->res;
    BdrvCheckResult before;
    uint64_t highest;
    int ret;

    /* As QEMU: a file of more than INT_MAX clusters is not checked. */
    if ((ROUND_UP(c->file_len, c->cluster_size) >> c->cluster_bits) >
        INT_MAX) {
        res->check_errors++;
        return -EFBIG;
    }
    ret = imrt_grow(c, ROUND_UP(c->file_len, c->cluster_size) >>
                    c->cluster_bits);
    if (ret < 0) {
        res->check_errors++;
        return ret;
    }
    ret = calculate_refcounts(c);
    if (ret < 0) {
        return ret;
    }
    /* Report first; repair in a second pass if the structures allow. */
    before = *res;
    compare_refcounts(c, 0, &highest);
    if (c->rebuild && (c->fix & BDRV_FIX_ERRORS)) {
        ret = check_rebuild(c, &highest);
        if (ret < 0) {
            return ret;
        }
    } else if (c->fix) {
        if (c->rebuild) {
            check_report(c, "ERROR need to rebuild refcount structures");
            res->check_errors++;
            return -EIO;
        }
        if (res->leaks || res->corruptions) {
            *res = before;
            compare_refcounts(c, c->fix, &highest);
        }
    }
    ret = check_oflag_copied(c);
    if (ret < 0) {
        return ret;
    }
    res->image_end_offset = (highest + 1) * c->cluster_size;
    return 0;
}

/*
 * -r all, after the refcounts: a snapshot table with entries to complete
 * (v3) or extra data to cut is written anew, as QEMU's
 * qcow2_check_fix_snapshot_table (new clusters, then the header, then
 * the old table freed). Only onto refcounts found right: the new table's
 * clusters are counted in them.
 */
static int fix_snapshot_table(Qcow2Check *c)
{
    g_autoptr(Error) err = NULL;
    Qcow2Snapshot *table;
    int ret;

    if (!c->sn_corruptions || !(c->fix & BDRV_FIX_ERRORS) ||
        c->res->corruptions || c->res->check_errors) {
        return 0;
    }
    table = g_new0(Qcow2Snapshot, MAX(c->nb_snapshots, 1));
    for (uint32_t i = 0; i < c->nb_snapshots; i++) {
        table[i] = c->snapshots[i].sn;
        memset(&c->snapshots[i].sn, 0, sizeof(c->snapshots[i].sn));
    }
    ret = qcow2_snapshots_write_repaired(c->bs, table, c->nb_snapshots,
                                         c->snapshots_size, c->file_len,
                                         &err);
    c->file_len = MAX(c->file_len, c->s->file_size);
    if (ret < 0) {
        int e = error_get_errno(err);

        c->res->check_errors++;
        check_report(c, "ERROR failed to update snapshot table: %s",
                     g_strerror(e ? e : EIO));
        return -EIO;
    }
    c->sn_corruptions_fixed += c->sn_corruptions;
    c->sn_corruptions = 0;
    return 0;
}

/* After a repair that left nothing wrong: clear the dirty and corrupt bits. */
static int mark_clean(Qcow2Check *c)
{
    Qcow2Header *h = &c->s->header;
    uint64_t bits = QCOW2_INCOMPAT_DIRTY | QCOW2_INCOMPAT_CORRUPT;
    uint8_t be[8];

    if (h->version < 3 || !(h->incompatible_features & bits)) {
        return 0;
    }
    stq_be_p(be, h->incompatible_features & ~bits);
    if (check_pwrite(c, 72, be, sizeof(be)) < 0) {
        return -EIO;
    }
    h->incompatible_features &= ~bits;
    return 0;
}

static void check_free(Qcow2Check *c)
{
    for (uint32_t i = 0; c->snapshots && i < c->nb_snapshots; i++) {
        snapshot_clear(&c->snapshots[i].sn);
    }
    g_free(c->snapshots);
    g_free(c->imrt);
    g_free(c->reftable);
    g_free(c->refblock);
    g_free(c->l1);
}

int qcow2_check(BlockDriverState *bs, BdrvCheckResult *res,
                BdrvCheckMode fix)
{
    BDRVQcow2State *s = bs->opaque;
    int64_t len = bdrv_getlength_exact(bs->file, NULL);
    Qcow2Check c = {
        .bs = bs,
        .s = s,
        .res = res,
        .fix = fix,
        .cluster_size = s->g.cluster_size,
        .cluster_bits = s->g.cluster_bits,
        .order = s->header.refcount_order,
        .refblock_bits = s->g.cluster_bits + 3 - s->header.refcount_order,
        .has_data_file = s->g.has_data_file,
    };
    int ret;

    if (len < 0) {
        res->check_errors++;
        return -EIO;
    }
    c.file_len = len;
    c.refcount_max = c.order == 6 ? UINT64_MAX : (1ull << (1u << c.order)) - 1;
    c.refblock = g_malloc(c.cluster_size);
    /* QEMU counts whole sectors of the virtual size (bs->total_sectors). */
    res->total_clusters = ROUND_UP(ROUND_DOWN(s->header.size,
                                              BDRV_SECTOR_SIZE),
                                   c.cluster_size) >> c.cluster_bits;

    ret = load_tables(&c);
    if (ret < 0) {
        res->check_errors++;
    } else {
        ret = check_refcounts(&c);
        if (ret == 0) {
            ret = fix_snapshot_table(&c);
        }
    }
    /* The snapshot table's findings, counted apart until now (QEMU). */
    res->corruptions += c.sn_corruptions;
    res->corruptions_fixed += c.sn_corruptions_fixed;
    if (ret == 0 && fix && !res->check_errors && !res->corruptions) {
        ret = mark_clean(&c);
    }
    check_free(&c);
    return ret;
}
