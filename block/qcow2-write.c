/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The qcow2 write path: guest writes become data clusters, L2 entries and
 * refcounts, in the order that keeps the image consistent if the process
 * dies between any two writes (docs/qcow2.md, "Writing"):
 *
 *   1. new clusters are counted (refcount blocks written) before use;
 *   2. the data goes to its clusters (encrypted for LUKS: IVs from the
 *      host offset, as QEMU);
 *   3. only then does an L2 entry point at them, and a new L2 table is
 *      written whole before the L1 entry that points at it.
 *
 * A crash leaves at most leaked clusters (counted, unused), never an
 * entry pointing at unwritten or uncounted clusters. Clusters are taken
 * from the end of the file and never reused.
 *
 * With an external data file (spec, "External data file"), a guest
 * cluster's data has one place: the same offset in the data file, which
 * the refcounts do not cover. Step 1 is then for L2 tables only. With
 * data_file_raw, the data file must read as the guest's disk at all
 * times: zeroes are written there too, never only marked in an L2 entry.
 *
 * Concurrency (the convert loop writes distinct ranges from several
 * threads): allocation and metadata updates hold s->alloc_lock; the data
 * of whole new clusters and of in-place writes is encrypted and written
 * outside it. A write that covers part of a cluster being allocated (COW
 * from the backing file, subclusters) holds the lock throughout, and
 * checks the entry again under it.
 */
#include <string.h>

#include "block/qcow2.h"
#include "qemu/buffer.h"

/* Extended L2: all 32 subclusters allocated / reading as zeroes. */
#define QCOW2_BITMAP_ALL_ALLOC 0x00000000ffffffffull
#define QCOW2_BITMAP_ALL_ZERO  0xffffffff00000000ull

int qcow2_read_mapped(BlockDriverState *bs, uint64_t offset, uint8_t *buf,
                      uint64_t bytes, Error **errp);

int qcow2_mark_dirty(BlockDriverState *bs, bool dirty, Error **errp)
{
    BDRVQcow2State *s = bs->opaque;
    uint64_t f = s->header.incompatible_features;
    uint8_t be[8];

    f = dirty ? f | QCOW2_INCOMPAT_DIRTY : f & ~QCOW2_INCOMPAT_DIRTY;
    stq_be_p(be, f);
    /* Before the first metadata change, and after the last. */
    if (!dirty && bdrv_flush(bs->file, errp) < 0) {
        return -1;
    }
    if (bdrv_pwrite(bs->file, 72, be, 8, 0, errp) < 0 ||
        bdrv_flush(bs->file, errp) < 0) {
        return -1;
    }
    s->header.incompatible_features = f;
    s->dirty = dirty;
    return 0;
}

/* ---- L2 entries (alloc_lock held) */

static uint64_t qcow2_l1_index(BDRVQcow2State *s, uint64_t offset)
{
    return offset >> (s->g.cluster_bits + s->g.l2_bits);
}

static uint64_t qcow2_l2_index(BDRVQcow2State *s, uint64_t offset)
{
    return (offset >> s->g.cluster_bits) & (s->g.l2_entries - 1);
}

static int qcow2_l2_table_offset(BDRVQcow2State *s, uint64_t offset,
                                 uint64_t *l2_offset, Error **errp)
{
    uint64_t i = qcow2_l1_index(s, offset);

    g_assert(i < s->l1_size);
    *l2_offset = s->l1_table[i] & QCOW2_OFFSET_MASK;
    if (*l2_offset & (s->g.cluster_size - 1)) {
        error_setg(errp, "qcow2 image is corrupt: L2 table offset 0x%" PRIx64
                   " unaligned", *l2_offset);
        return -1;
    }
    return 0;
}

/* The entry (and bitmap) of the cluster holding guest offset. */
static int qcow2_get_l2_entry(BlockDriverState *bs, uint64_t offset,
                              uint64_t *entry, uint64_t *bitmap, Error **errp)
{
    BDRVQcow2State *s = bs->opaque;
    const uint8_t *table, *e;
    uint64_t l2_offset;

    *entry = *bitmap = 0;
    if (qcow2_l2_table_offset(s, offset, &l2_offset, errp) < 0) {
        return -1;
    }
    if (!l2_offset) {
        return 0;
    }
    g_mutex_lock(&s->lock);
    table = qcow2_get_l2_table(bs, l2_offset, errp);
    if (table) {
        e = table + qcow2_l2_index(s, offset) * s->g.l2_entry_size;
        *entry = ldq_be_p(e);
        *bitmap = s->g.extended_l2 ? ldq_be_p(e + 8) : 0;
    }
    g_mutex_unlock(&s->lock);
    return table ? 0 : -1;
}

int qcow2_flush_l2_pending(BlockDriverState *bs, Error **errp)
{
    BDRVQcow2State *s = bs->opaque;

    if (s->l2p.lo == s->l2p.hi) {
        return 0;
    }
    /*
     * Outside lock: the bytes change only under alloc_lock (held), and a
     * reader that misses the cache meanwhile still lays them over what it
     * reads, until they are marked written below.
     */
    if (qcow2_refcount_flush(bs, errp) < 0 ||
        bdrv_pwrite(bs->file, s->l2p.offset + s->l2p.lo,
                    s->l2p.table + s->l2p.lo, s->l2p.hi - s->l2p.lo, 0,
                    errp) < 0) {
        return -1;
    }
    /* Forgotten: the next change copies its table afresh from the cache. */
    g_mutex_lock(&s->lock);
    s->l2p.lo = s->l2p.hi = 0;
    s->l2p.offset = 0;
    g_mutex_unlock(&s->lock);
    return 0;
}

int qcow2_flush_metadata_locked(BlockDriverState *bs, Error **errp)
{
    return qcow2_flush_l2_pending(bs, errp) < 0 ||
           qcow2_refcount_flush(bs, errp) < 0 ? -1 : 0;
}

int qcow2_flush_metadata(BlockDriverState *bs, Error **errp)
{
    BDRVQcow2State *s = bs->opaque;
    int ret;

    g_mutex_lock(&s->alloc_lock);
    ret = qcow2_flush_metadata_locked(bs, errp);
    g_mutex_unlock(&s->alloc_lock);
    return ret;
}

/*
 * Entries of the existing L2 table at l2_offset changed: in the cache
 * and in s->l2p, written when another table's entries change or at
 * flush (qcow2_flush_l2_pending).
 */
static int qcow2_set_l2_pending(BlockDriverState *bs, uint64_t l2_offset,
                                uint64_t pos, const uint8_t *bytes,
                                uint64_t len, Error **errp)
{
    BDRVQcow2State *s = bs->opaque;
    const uint8_t *table;

    if (s->l2p.offset != l2_offset) {
        /* One table's changes pending at a time. */
        if (qcow2_flush_l2_pending(bs, errp) < 0) {
            return -1;
        }
        if (!s->l2p.table) {
            s->l2p.table = g_malloc(s->g.cluster_size);
        }
        g_mutex_lock(&s->lock);
        table = qcow2_get_l2_table(bs, l2_offset, errp);
        if (!table) {
            g_mutex_unlock(&s->lock);
            return -1;
        }
        memcpy(s->l2p.table, table, s->g.cluster_size);
        s->l2p.offset = l2_offset;
        g_mutex_unlock(&s->lock);
    }
    g_mutex_lock(&s->lock);
    memcpy(s->l2p.table + pos, bytes, len);
    qcow2_range_add(&s->l2p.lo, &s->l2p.hi, pos, pos + len);
    qcow2_cache_update(s->l2_cache, l2_offset, pos, bytes, len);
    g_mutex_unlock(&s->lock);
    return 0;
}

/*
 * The L2 table of L1 entry l1i is shared with a snapshot (no COPIED
 * flag): copy it to a new cluster, written before the L1 entry points at
 * it, and only then drop the old table's reference. Its entries keep
 * their flags: the data clusters stay shared, counted once per table.
 */
static int qcow2_copy_l2_table(BlockDriverState *bs, uint64_t l1i,
                               uint64_t *l2_offset, Error **errp)
{
    BDRVQcow2State *s = bs->opaque;
    g_autofree uint8_t *copy = g_malloc(s->g.cluster_size);
    uint64_t old = *l2_offset, new_off;
    const uint8_t *table;
    uint8_t be[8];

    if (qcow2_flush_l2_pending(bs, errp) < 0) {
        return -1;
    }
    g_mutex_lock(&s->lock);
    table = qcow2_get_l2_table(bs, old, errp);
    if (table) {
        memcpy(copy, table, s->g.cluster_size);
    }
    g_mutex_unlock(&s->lock);
    if (!table ||
        qcow2_alloc_clusters(bs, 1, &new_off, errp) < 0 ||
        bdrv_pwrite(bs->file, new_off, copy, s->g.cluster_size, 0,
                    errp) < 0 ||
        qcow2_refcount_flush(bs, errp) < 0) {
        return -1;
    }
    stq_be_p(be, new_off | QCOW2_OFLAG_COPIED);
    if (bdrv_pwrite(bs->file, s->header.l1_table_offset + l1i * 8, be,
                    8, 0, errp) < 0) {
        return -1;
    }
    s->l1_table[l1i] = new_off | QCOW2_OFLAG_COPIED;
    *l2_offset = new_off;
    return qcow2_update_refcounts(bs, old, s->g.cluster_size, -1, errp);
}

/* The index in s->l2_reserved of L1 entry l1i's table, or -1. */
static int qcow2_find_reserved_l2(BDRVQcow2State *s, uint64_t l1i)
{
    for (guint i = 0; s->l2_reserved && i < s->l2_reserved->len; i++) {
        if (g_array_index(s->l2_reserved, uint64_t, 2 * i) == l1i) {
            return i;
        }
    }
    return -1;
}

/* The cluster taken for L1 entry l1i's new table, if one was. */
static bool qcow2_take_reserved_l2(BDRVQcow2State *s, uint64_t l1i,
                                   uint64_t *l2_offset)
{
    int i = qcow2_find_reserved_l2(s, l1i);

    if (i < 0) {
        return false;
    }
    *l2_offset = g_array_index(s->l2_reserved, uint64_t, 2 * i + 1);
    g_array_remove_index_fast(s->l2_reserved, i);
    return true;
}

/*
 * Point the n clusters from guest offset (inside one L2 table) at their
 * new entries. A missing L2 table is made with the entries in it, written
 * whole, before the L1 entry that points at it (and after the refcounts
 * of it and of the clusters it points at).
 */
static int qcow2_set_l2_entries(BlockDriverState *bs, uint64_t offset,
                                uint64_t n, const uint64_t *entries,
                                const uint64_t *bitmaps, Error **errp)
{
    BDRVQcow2State *s = bs->opaque;
    size_t esize = s->g.l2_entry_size;
    uint64_t idx = qcow2_l2_index(s, offset);
    uint64_t l1i = qcow2_l1_index(s, offset);
    g_autofree uint8_t *buf = NULL;
    uint64_t l2_offset;
    uint8_t be[8];

    g_assert(idx + n <= s->g.l2_entries);
    if (qcow2_l2_table_offset(s, offset, &l2_offset, errp) < 0) {
        return -1;
    }
    if (l2_offset && !(s->l1_table[l1i] & QCOW2_OFLAG_COPIED) &&
        qcow2_copy_l2_table(bs, l1i, &l2_offset, errp) < 0) {
        return -1;
    }
    /* The entries at their place in a table-sized buffer (a new table). */
    buf = l2_offset ? g_malloc(n * esize) : g_malloc0(s->g.cluster_size);
    for (uint64_t i = 0; i < n; i++) {
        uint8_t *e = buf + (l2_offset ? i : idx + i) * esize;

        stq_be_p(e, entries[i]);
        if (s->g.extended_l2) {
            stq_be_p(e + 8, bitmaps[i]);
        }
    }
    if (l2_offset) {
        return qcow2_set_l2_pending(bs, l2_offset, idx * esize, buf,
                                    n * esize, errp);
    }
    /* Its cluster taken already (qcow2_reserve_l2_table()), or now. */
    if (!qcow2_take_reserved_l2(s, l1i, &l2_offset) &&
        qcow2_alloc_clusters(bs, 1, &l2_offset, errp) < 0) {
        return -1;
    }
    if (bdrv_pwrite(bs->file, l2_offset, buf, s->g.cluster_size, 0,
                    errp) < 0 ||
        qcow2_refcount_flush(bs, errp) < 0) {
        return -1;
    }
    stq_be_p(be, l2_offset | QCOW2_OFLAG_COPIED);
    if (bdrv_pwrite(bs->file, s->header.l1_table_offset + l1i * 8, be,
                    8, 0, errp) < 0) {
        return -1;
    }
    s->l1_table[l1i] = l2_offset | QCOW2_OFLAG_COPIED;
    return 0;
}

/*
 * Data clusters are about to be taken for guest offset: if its L2 table
 * does not exist yet, take the table's cluster first, so that the table
 * comes before its data in the file, as QEMU lays images out (the table
 * is written, with its entries, only once the data is: see
 * qcow2_set_l2_entries()). A crash in between leaks the cluster.
 */
static int qcow2_reserve_l2_table(BlockDriverState *bs, uint64_t offset,
                                  Error **errp)
{
    BDRVQcow2State *s = bs->opaque;
    uint64_t pair[2] = { qcow2_l1_index(s, offset) };

    if (qcow2_l2_table_offset(s, offset, &pair[1], errp) < 0) {
        return -1;
    }
    if (pair[1] || qcow2_find_reserved_l2(s, pair[0]) >= 0) {
        return 0;
    }
    if (qcow2_alloc_clusters(bs, 1, &pair[1], errp) < 0) {
        return -1;
    }
    if (!s->l2_reserved) {
        s->l2_reserved = g_array_new(FALSE, FALSE, sizeof(pair));
    }
    g_array_append_val(s->l2_reserved, pair);
    return 0;
}

/* ---- Data */

/* Encrypt (LUKS) and write len bytes at host offset host. */
static int qcow2_write_data(BlockDriverState *bs, uint64_t host,
                            uint8_t *buf, size_t len, Error **errp)
{
    BDRVQcow2State *s = bs->opaque;

    if (s->crypto && qcow2_crypto_encrypt(s->crypto, host, buf, len,
                                          errp) < 0) {
        return -1;
    }
    bdrv_debug_event(s->data_file, "write_aio");
    return bdrv_pwrite(s->data_file, host, buf, len, 0, errp);
}

/* The same from a const buffer: a copy unless the caller lets us clobber. */
static int qcow2_write_data_from(BlockDriverState *bs, uint64_t host,
                                 const uint8_t *buf, size_t len, int flags,
                                 Error **errp)
{
    BDRVQcow2State *s = bs->opaque;
    g_autofree uint8_t *copy = NULL;

    if (!s->crypto) {
        bdrv_debug_event(s->data_file, "write_aio");
        return bdrv_pwrite(s->data_file, host, buf, len, 0, errp);
    }
    if (!(flags & BDRV_REQ_MAY_CLOBBER)) {
        copy = g_memdup2(buf, len);
        buf = copy;
    }
    return qcow2_write_data(bs, host, (uint8_t *)buf, len, errp);
}

/*
 * Host clusters for the n guest clusters from offset (cluster-aligned),
 * alloc_lock held: new ones at the end of the image file, counted; with
 * an external data file the guest's own offset there (nothing counted).
 */
static int qcow2_alloc_data_clusters(BlockDriverState *bs, uint64_t offset,
                                     uint64_t n, uint64_t *host,
                                     Error **errp)
{
    BDRVQcow2State *s = bs->opaque;

    if (s->g.has_data_file) {
        *host = offset;
        return 0;
    }
    return qcow2_alloc_clusters(bs, n, host, errp);
}

/* Whether the entry names a host cluster of data (not compressed). */
static bool qcow2_entry_has_data(BDRVQcow2State *s, uint64_t entry)
{
    return !(entry & QCOW2_OFLAG_COMPRESSED) &&
           qcow2_entry_has_host(&s->g, entry);
}

/* Subclusters [a, b) of a cluster as bitmap bits (allocation half). */
static uint64_t qcow2_sc_bits(BDRVQcow2State *s, uint64_t a, uint64_t b)
{
    unsigned first = a >> s->g.subcluster_bits;
    unsigned last = (b - 1) >> s->g.subcluster_bits;

    return ((2ull << last) - 1) & ~((1ull << first) - 1);
}

/*
 * Write [offset, offset + len) inside one cluster, whatever the cluster
 * is: unallocated (COW from the backing file), zero, compressed, partly
 * allocated subclusters, or allocated. alloc_lock held throughout.
 */
static int qcow2_write_cluster(BlockDriverState *bs, uint64_t offset,
                               const uint8_t *buf, size_t len, Error **errp)
{
    BDRVQcow2State *s = bs->opaque;
    uint64_t cs = s->g.cluster_size;
    uint64_t cstart = offset & ~(cs - 1);
    uint64_t a = offset - cstart, b = a + len, ra, rb;
    uint64_t entry, bitmap, host, new_entry, new_bitmap;
    uint64_t old_coff = 0, old_clen = 0, shared = 0;
    bool compressed, alloc, whole, has_host;
    g_autofree uint8_t *tmp = NULL;

    if (qcow2_get_l2_entry(bs, cstart, &entry, &bitmap, errp) < 0) {
        return -1;
    }
    compressed = entry & QCOW2_OFLAG_COMPRESSED;
    has_host = qcow2_entry_has_data(s, entry);
    host = has_host ? entry & QCOW2_OFFSET_MASK : 0;
    /*
     * A host cluster without COPIED is shared with a snapshot (refcount
     * above 1): copied whole to a new one, then released (COW). (No
     * snapshots with an external data file: its clusters are never shared.)
     */
    if (has_host && !(entry & QCOW2_OFLAG_COPIED) && !s->g.has_data_file) {
        shared = host;
        has_host = false;
        host = 0;
    }
    alloc = !has_host;
    /* A new cluster that takes the place of one with data: all of it. */
    whole = compressed || shared;
    if (shared) {
        ra = 0;
        rb = cs;
    } else if (s->g.extended_l2 && !compressed) {
        /*
         * Subclusters are the unit: others keep what they hold. An end
         * in an allocated subcluster is not padded (another thread may
         * be writing the rest of it in place), one in an unallocated
         * subcluster is (its untouched bytes come from below).
         */
        uint64_t sa = ROUND_DOWN(a, s->g.subcluster_size);
        uint64_t sb = ROUND_UP(b, s->g.subcluster_size);
        unsigned sec = s->crypto ? BDRV_SECTOR_SIZE : 1;

        ra = has_host && (bitmap & qcow2_sc_bits(s, sa, sa + 1)) ?
             ROUND_DOWN(a, sec) : sa;
        rb = has_host && (bitmap & qcow2_sc_bits(s, sb - 1, sb)) ?
             ROUND_UP(b, sec) : sb;
    } else if (has_host && !(entry & QCOW2_OFLAG_ZERO)) {
        /* In place: whole encryption sectors. */
        ra = s->crypto ? ROUND_DOWN(a, BDRV_SECTOR_SIZE) : a;
        rb = s->crypto ? ROUND_UP(b, BDRV_SECTOR_SIZE) : b;
    } else {
        /* A new cluster, or a zero one with a host cluster: all of it. */
        ra = 0;
        rb = cs;
    }
    tmp = g_malloc(rb - ra);
    if ((ra < a || rb > b) &&
        qcow2_read_mapped(bs, cstart + ra, tmp, rb - ra, errp) < 0) {
        return -1;
    }
    memcpy(tmp + (a - ra), buf, len);
    if (compressed) {
        qcow2_compressed_extent(&s->g, entry, &old_coff, &old_clen);
    }
    if (alloc && (qcow2_reserve_l2_table(bs, cstart, errp) < 0 ||
                  qcow2_alloc_data_clusters(bs, cstart, 1, &host, errp) < 0)) {
        return -1;
    }
    if (qcow2_write_data(bs, host + ra, tmp, rb - ra, errp) < 0) {
        return -1;
    }
    new_entry = host | QCOW2_OFLAG_COPIED;
    new_bitmap = 0;
    if (s->g.extended_l2) {
        uint64_t bits = whole ? QCOW2_BITMAP_ALL_ALLOC :
                        qcow2_sc_bits(s, ra, rb);

        /* (ra, rb may lie inside allocated subclusters: same bits.) */

        new_bitmap = (whole ? 0 : bitmap) | bits;
        new_bitmap &= ~(bits << QCOW2_SUBCLUSTERS_PER_CLUSTER);
    }
    if ((new_entry != entry || new_bitmap != bitmap) &&
        qcow2_set_l2_entries(bs, cstart, 1, &new_entry, &new_bitmap,
                             errp) < 0) {
        return -1;
    }
    /* The compressed data is no longer used by this cluster. */
    if (compressed &&
        qcow2_update_refcounts(bs, old_coff, old_clen, -1, errp) < 0) {
        return -1;
    }
    /* Nor the shared cluster: the snapshot keeps its reference. */
    if (shared && qcow2_update_refcounts(bs, shared, cs, -1, errp) < 0) {
        return -1;
    }
    return 0;
}

/*
 * A whole cluster of zeroes, alloc_lock held: nothing to write where the
 * cluster already reads as zeroes; a zero entry (v3) where it would read
 * the backing file. Returns 1 if handled, 0 if it must be written as data.
 */
static int qcow2_write_zero_cluster(BlockDriverState *bs, uint64_t offset,
                                    int flags, Error **errp)
{
    /* Unallocated reads zeroes only while no backing file is attached. */
    bool no_backing = !bs->backing && !(flags & BDRV_REQ_EXPLICIT_ZERO);
    BDRVQcow2State *s = bs->opaque;
    uint64_t entry, bitmap, zentry, zbitmap;

    /* Raw: the data file itself must read as zeroes there. */
    if (s->header.autoclear_features & QCOW2_AUTOCLEAR_DATA_FILE_RAW) {
        return 0;
    }
    if (qcow2_get_l2_entry(bs, offset, &entry, &bitmap, errp) < 0) {
        return -1;
    }
    if ((entry & QCOW2_OFLAG_COMPRESSED) || qcow2_entry_has_data(s, entry)) {
        return 0;
    }
    if (s->g.extended_l2) {
        if ((bitmap & QCOW2_BITMAP_ALL_ZERO) == QCOW2_BITMAP_ALL_ZERO ||
            (no_backing && !(bitmap & QCOW2_BITMAP_ALL_ZERO))) {
            return 1;
        }
        zentry = 0;
        zbitmap = QCOW2_BITMAP_ALL_ZERO;
    } else {
        if ((entry & QCOW2_OFLAG_ZERO) || no_backing) {
            return 1;
        }
        if (s->header.version < 3) {
            return 0;
        }
        zentry = QCOW2_OFLAG_ZERO;
        zbitmap = 0;
    }
    if (qcow2_set_l2_entries(bs, offset, 1, &zentry, &zbitmap, errp) < 0) {
        return -1;
    }
    return 1;
}

/*
 * Whole clusters from offset (inside one L2 table) that are not allocated
 * (unallocated or zero, no host cluster): allocate them together, write
 * their data outside the lock, then point the entries at them. Returns
 * the bytes done (0: the first cluster needs the general path).
 */
static int64_t qcow2_write_new_clusters(BlockDriverState *bs,
                                        uint64_t offset, const uint8_t *buf,
                                        uint64_t bytes, int flags,
                                        Error **errp)
{
    BDRVQcow2State *s = bs->opaque;
    uint64_t cs = s->g.cluster_size;
    uint64_t table_left = (s->g.l2_entries - qcow2_l2_index(s, offset)) * cs;
    uint64_t n = MIN(bytes, table_left) / cs, k, host = 0;
    g_autofree uint64_t *entries = NULL;
    g_autofree uint64_t *bitmaps = NULL;
    int64_t ret = -1;

    g_mutex_lock(&s->alloc_lock);
    for (k = 0; k < n; k++) {
        uint64_t entry, bitmap;

        if (qcow2_get_l2_entry(bs, offset + k * cs, &entry, &bitmap,
                               errp) < 0) {
            goto out;
        }
        if ((entry & QCOW2_OFLAG_COMPRESSED) ||
            qcow2_entry_has_data(s, entry)) {
            break;
        }
        if (!(flags & BDRV_REQ_ALLOCATE) && buffer_is_zero(buf + k * cs, cs)) {
            if (k) {
                break;
            }
            ret = qcow2_write_zero_cluster(bs, offset, flags, errp);
            if (ret == 1) {
                ret = cs;
            }
            goto out;
        }
    }
    if (!k || qcow2_reserve_l2_table(bs, offset, errp) < 0 ||
        qcow2_alloc_data_clusters(bs, offset, k, &host, errp) < 0) {
        ret = k ? -1 : 0;
        goto out;
    }
    g_mutex_unlock(&s->alloc_lock);

    if (qcow2_write_data_from(bs, host, buf, k * cs, flags, errp) < 0) {
        return -1;
    }
    entries = g_new(uint64_t, k);
    bitmaps = g_new(uint64_t, k);
    for (uint64_t i = 0; i < k; i++) {
        entries[i] = (host + i * cs) | QCOW2_OFLAG_COPIED;
        bitmaps[i] = QCOW2_BITMAP_ALL_ALLOC;
    }
    g_mutex_lock(&s->alloc_lock);
    ret = qcow2_set_l2_entries(bs, offset, k, entries, bitmaps, errp) < 0 ?
          -1 : (int64_t)(k * cs);
out:
    g_mutex_unlock(&s->alloc_lock);
    return ret;
}

/*
 * The writer is alone (it writes in its turn: convert), and has the data
 * allocated as it is (BDRV_REQ_ALLOCATE): from offset (maybe inside a
 * cluster), the clusters without a host cluster (unallocated, zero) up to
 * the end of the write or of the L2 table, the partial ones at either end
 * included (their other bytes copied from below), are taken in one go, as
 * QEMU takes the clusters of a write (so its refcount blocks, which come
 * after the clusters of the allocation that needs them, fall where
 * QEMU's do). Returns the bytes done (0: the first cluster has a host
 * cluster, or the image is one this is not for).
 */
static int64_t qcow2_write_new_run(BlockDriverState *bs, uint64_t offset,
                                   const uint8_t *buf, uint64_t bytes,
                                   int flags, Error **errp)
{
    BDRVQcow2State *s = bs->opaque;
    uint64_t cs = s->g.cluster_size;
    uint64_t start = offset & ~(cs - 1);
    uint64_t table_end = start + (s->g.l2_entries -
                                  qcow2_l2_index(s, offset)) * cs;
    uint64_t end = MIN(offset + bytes, table_end), cend, n, k, host;
    uint64_t head = offset - start, mid, tail;
    g_autofree uint8_t *hbuf = NULL, *tbuf = NULL;
    g_autofree uint64_t *entries = NULL, *bitmaps = NULL;
    int64_t ret = -1;

    if (s->g.extended_l2 || s->crypto || s->g.has_data_file) {
        return 0;
    }
    n = (ROUND_UP(end, cs) - start) / cs;
    g_mutex_lock(&s->alloc_lock);
    for (k = 0; k < n; k++) {
        uint64_t entry, bitmap;

        if (qcow2_get_l2_entry(bs, start + k * cs, &entry, &bitmap,
                               errp) < 0) {
            goto out;
        }
        if (entry & (QCOW2_OFLAG_COMPRESSED | QCOW2_OFFSET_MASK)) {
            break;
        }
    }
    if (!k) {
        ret = 0;
        goto out;
    }
    end = MIN(end, start + k * cs);
    cend = start + k * cs;
    /* The partial clusters at the ends, their other bytes from below. */
    if (head || (k == 1 && end < cend)) {
        hbuf = g_malloc(cs);
        if (qcow2_read_mapped(bs, start, hbuf, cs, errp) < 0) {
            goto out;
        }
        memcpy(hbuf + head, buf, MIN(end, start + cs) - offset);
    }
    tail = k > 1 && end < cend ? cend - cs : 0;
    if (tail) {
        tbuf = g_malloc(cs);
        if (qcow2_read_mapped(bs, tail, tbuf, cs, errp) < 0) {
            goto out;
        }
        memcpy(tbuf, buf + (tail - offset), end - tail);
    }
    if (qcow2_reserve_l2_table(bs, start, errp) < 0 ||
        qcow2_alloc_clusters(bs, k, &host, errp) < 0) {
        goto out;
    }
    g_mutex_unlock(&s->alloc_lock);

    /* The whole clusters between them straight from buf. */
    mid = (tail ? tail : cend) - (hbuf ? start + cs : start);
    if ((hbuf && qcow2_write_data(bs, host, hbuf, cs, errp) < 0) ||
        (mid && qcow2_write_data_from(bs, host + (hbuf ? cs : 0),
                                      buf + (hbuf ? start + cs - offset : 0),
                                      mid, flags, errp) < 0) ||
        (tbuf && qcow2_write_data(bs, host + (tail - start), tbuf, cs,
                                  errp) < 0)) {
        return -1;
    }
    entries = g_new(uint64_t, k);
    bitmaps = g_new0(uint64_t, k);
    for (uint64_t i = 0; i < k; i++) {
        entries[i] = (host + i * cs) | QCOW2_OFLAG_COPIED;
    }
    g_mutex_lock(&s->alloc_lock);
    ret = qcow2_set_l2_entries(bs, start, k, entries, bitmaps, errp) < 0 ?
          -1 : (int64_t)(end - offset);
out:
    g_mutex_unlock(&s->alloc_lock);
    return ret;
}

int qcow2_pwrite(BlockDriverState *bs, uint64_t offset, const void *vbuf,
                 size_t bytes, int flags, Error **errp)
{
    BDRVQcow2State *s = bs->opaque;
    const uint8_t *buf = vbuf;
    uint64_t cs = s->g.cluster_size;
    int ret = 0;
    /* The writer's turn (convert: in the order of the guest offsets). */
    bool alone = bdrv_write_turn();

    if ((s->header.compatible_features & QCOW2_COMPAT_LAZY_REFCOUNTS) &&
        !s->dirty) {
        g_mutex_lock(&s->alloc_lock);
        if (!s->dirty) {
            ret = qcow2_mark_dirty(bs, true, errp);
        }
        g_mutex_unlock(&s->alloc_lock);
        if (ret < 0) {
            return -1;
        }
    }
    while (bytes) {
        Qcow2Extent ext;
        uint64_t in_cluster = offset & (cs - 1);
        int64_t n;

        if (qcow2_get_extent(bs, offset, bytes, &ext, errp) < 0) {
            return -1;
        }
        if (ext.type == QCOW2_SC_NORMAL &&
            (ext.l2_entry & QCOW2_OFLAG_COPIED) &&
            (!s->crypto || (offset % BDRV_SECTOR_SIZE == 0 &&
                            ext.bytes % BDRV_SECTOR_SIZE == 0))) {
            /*
             * Allocated, refcount 1 (COPIED; the run's clusters all
             * alike, qcow2_get_extent): in place.
             */
            n = ext.bytes;
            if (qcow2_write_data_from(bs, ext.host_offset, buf, n, flags,
                                      errp) < 0) {
                return -1;
            }
        } else {
            n = 0;
            if (alone && (flags & BDRV_REQ_ALLOCATE) &&
                ext.type != QCOW2_SC_NORMAL) {
                n = qcow2_write_new_run(bs, offset, buf, bytes, flags, errp);
                if (n < 0) {
                    return -1;
                }
            }
            if (!n && ext.type != QCOW2_SC_NORMAL && !in_cluster &&
                bytes >= cs) {
                n = qcow2_write_new_clusters(bs, offset, buf, bytes, flags,
                                             errp);
                if (n < 0) {
                    return -1;
                }
            }
            if (!n) {
                n = MIN(bytes, cs - in_cluster);
                g_mutex_lock(&s->alloc_lock);
                ret = qcow2_write_cluster(bs, offset, buf, n, errp);
                g_mutex_unlock(&s->alloc_lock);
                if (ret < 0) {
                    return -1;
                }
            }
        }
        offset += n;
        buf += n;
        bytes -= n;
    }
    return 0;
}

/*
 * data_file_raw: the guest clusters [start, end) (cluster-aligned, mapping
 * nothing: grown by a resize) are mapped to their place in the data file,
 * as QEMU's preallocation=metadata maps them, so that the data file stays
 * the whole disk. One L2 table at a time.
 */
int qcow2_map_raw_data_file(BlockDriverState *bs, uint64_t start,
                            uint64_t end, Error **errp)
{
    BDRVQcow2State *s = bs->opaque;
    uint64_t cs = s->g.cluster_size;
    int ret = 0;

    g_mutex_lock(&s->alloc_lock);
    while (start < end && ret == 0) {
        uint64_t n = MIN((end - start) / cs,
                         s->g.l2_entries - qcow2_l2_index(s, start));
        g_autofree uint64_t *entries = g_new(uint64_t, n);
        g_autofree uint64_t *bitmaps = g_new(uint64_t, n);

        for (uint64_t i = 0; i < n; i++) {
            entries[i] = (start + i * cs) | QCOW2_OFLAG_COPIED;
            bitmaps[i] = QCOW2_BITMAP_ALL_ALLOC;
        }
        ret = qcow2_set_l2_entries(bs, start, n, entries, bitmaps, errp);
        start += n * cs;
    }
    if (ret == 0) {
        ret = qcow2_flush_metadata_locked(bs, errp);
    }
    g_mutex_unlock(&s->alloc_lock);
    return ret;
}

/* ---- Compressed clusters */

int qcow2_write_compressed(BlockDriverState *bs, uint64_t offset,
                           const uint8_t *data, size_t len, Error **errp)
{
    BDRVQcow2State *s = bs->opaque;
    uint64_t cs = s->g.cluster_size;
    uint64_t entry, bitmap, coff, sectors;
    int ret = -1;

    g_assert(offset % cs == 0 && len > 0 && len <= cs);
    g_mutex_lock(&s->alloc_lock);
    if (qcow2_get_l2_entry(bs, offset, &entry, &bitmap, errp) < 0) {
        goto out;
    }
    if (entry & (QCOW2_OFLAG_COMPRESSED | QCOW2_OFFSET_MASK)) {
        error_setg(errp, "Compressed write to an allocated cluster (guest "
                   "offset 0x%" PRIx64 ")", offset);
        goto out;
    }
    /*
     * Packed one after another, as QEMU packs them: each compressed
     * cluster holds one reference to every host cluster its bytes touch.
     * Data that does not fit in what is left of the current host cluster
     * runs on into the next one when that is the cluster allocated next
     * (without this, clusters that compress to more than half a cluster
     * each took a whole one: 1.8x qemu-img's file for text-like data);
     * otherwise it starts at the new cluster.
     */
    if (qcow2_reserve_l2_table(bs, offset, errp) < 0) {
        goto out;
    }
    coff = s->compressed_next;
    if (coff && (coff & (cs - 1)) + len <= cs) {
        if (qcow2_update_refcounts(bs, coff, 1, 1, errp) < 0) {
            goto out;
        }
    } else {
        uint64_t next;

        if (qcow2_alloc_clusters(bs, 1, &next, errp) < 0) {
            goto out;
        }
        if (coff && next == ROUND_UP(coff, cs)) {
            /* Spans two: the new cluster's reference came with it. */
            if (qcow2_update_refcounts(bs, coff, 1, 1, errp) < 0) {
                goto out;
            }
        } else {
            coff = next;
        }
    }
    s->compressed_next = coff + len;
    if ((s->compressed_next & (cs - 1)) == 0) {
        s->compressed_next = 0;
    }
    if (bdrv_pwrite(bs->file, coff, data, len, 0, errp) < 0) {
        goto out;
    }
    sectors = ((coff + len - 1) >> 9) - (coff >> 9);
    entry = QCOW2_OFLAG_COMPRESSED | (sectors << s->g.csize_shift) | coff;
    bitmap = 0;
    ret = qcow2_set_l2_entries(bs, offset, 1, &entry, &bitmap, errp);
out:
    g_mutex_unlock(&s->alloc_lock);
    return ret;
}

/*
 * convert -c: each whole cluster compressed (here, in the caller's
 * thread: the convert loop's threads compress in parallel), written
 * compressed where that is smaller and the cluster is still unallocated,
 * as data otherwise. All-zero clusters go the zero way, unless
 * BDRV_REQ_ALLOCATE (convert -c -S 0) has them compressed like the rest,
 * as QEMU. The image's last cluster may be partial: it is compressed
 * padded with zeroes, as QEMU. In two halves (bdrv_compress()): this one
 * compresses, and changes nothing in the image.
 */
int qcow2_compress_clusters(BlockDriverState *bs, BdrvCompressed *c,
                            Error **errp)
{
    BDRVQcow2State *s = bs->opaque;
    uint64_t cs = s->g.cluster_size;
    uint64_t first = c->offset & ~(cs - 1);
    g_autofree uint8_t *pad = NULL;

    if (s->crypto) {
        error_setg(errp, "Compression and encryption not supported at the "
                   "same time");
        return -1;
    }
    if (s->g.has_data_file) {
        /* Spec: no compressed clusters with an external data file. */
        error_setg_errno(errp, ENOTSUP, "Compressed writes into an image "
                         "with an external data file");
        return -1;
    }
    c->nb = c->bytes ? (c->offset + c->bytes - first + cs - 1) / cs : 0;
    if (c->room < c->nb || c->unit != cs || !c->out) {
        /* (Reused: grown, never shrunk, for writes of the same size.) */
        c->room = MAX(c->nb, 1);
        g_free(c->out);
        g_free(c->clen);
        c->out = g_malloc(c->room * cs);
        c->clen = g_new(size_t, c->room);
    }
    c->unit = cs;
    memset(c->clen, 0, c->nb * sizeof(*c->clen));
    for (size_t i = 0, pos = 0; i < c->nb; i++) {
        uint64_t at = c->offset + pos;
        uint64_t n = MIN(c->bytes - pos, cs - (at & (cs - 1)));
        bool tail = !(at & (cs - 1)) && n < cs && at + n == s->header.size;
        const uint8_t *in = c->buf + pos;

        if ((n == cs || tail) &&
            ((c->flags & BDRV_REQ_ALLOCATE) || !buffer_is_zero(in, n))) {
            if (tail) {
                pad = pad ? pad : g_malloc0(cs);
                memset(pad, 0, cs);
                memcpy(pad, in, n);
                in = pad;
            }
            c->clen[i] = qcow2_compress(s->header.compression_type, in, cs,
                                        c->out + i * cs, cs - 1);
        }
        pos += n;
    }
    return 0;
}

/*
 * The second half: the clusters stored, in the order of the offsets,
 * where the caller's turn puts them. An empty request marks the end of a
 * compressed convert.
 */
int qcow2_store_compressed(BlockDriverState *bs, const BdrvCompressed *c,
                           Error **errp)
{
    BDRVQcow2State *s = bs->opaque;
    uint64_t cs = s->g.cluster_size;

    if (!c->bytes) {
        /*
         * The end of a compressed convert (QEMU's empty compressed write):
         * the file ends on a whole sector, which reads with sector-sized
         * I/O can reach.
         */
        int64_t len = bdrv_getlength_exact(bs->file, errp);

        if (len < 0) {
            return -1;
        }
        return len % BDRV_SECTOR_SIZE ?
               bdrv_truncate(bs->file, ROUND_UP(len, BDRV_SECTOR_SIZE),
                             PREALLOC_MODE_OFF, errp) : 0;
    }
    g_assert(c->unit == cs);
    for (size_t i = 0, pos = 0; i < c->nb; i++) {
        uint64_t at = c->offset + pos;
        uint64_t n = MIN(c->bytes - pos, cs - (at & (cs - 1)));
        size_t len = c->clen[i];
        uint64_t entry, bitmap;

        if (len) {
            g_mutex_lock(&s->alloc_lock);
            if (qcow2_get_l2_entry(bs, at, &entry, &bitmap, errp) < 0) {
                g_mutex_unlock(&s->alloc_lock);
                return -1;
            }
            g_mutex_unlock(&s->alloc_lock);
            if (entry & (QCOW2_OFLAG_COMPRESSED | QCOW2_OFFSET_MASK)) {
                len = 0;    /* allocated (convert -n): overwrite in place */
            }
        }
        if (len) {
            if (qcow2_write_compressed(bs, at, c->out + i * cs, len,
                                       errp) < 0) {
                return -1;
            }
        } else if (qcow2_pwrite(bs, at, c->buf + pos, n,
                                c->flags & BDRV_REQ_ALLOCATE, errp) < 0) {
            return -1;
        }
        pos += n;
    }
    return 0;
}

/*
 * The L2 entry of the cluster at off becomes new_entry (no subclusters),
 * then the host cluster(s) of its old entry are freed: in this order, a
 * crash between the two leaks a cluster, never frees one still in use.
 * Under alloc_lock. 0, or -1 with errp.
 */
static int qcow2_replace_entry(BlockDriverState *bs, uint64_t off,
                               uint64_t old_entry, uint64_t new_entry,
                               Error **errp)
{
    BDRVQcow2State *s = bs->opaque;
    uint64_t zbitmap = 0, coff, clen;

    if (qcow2_set_l2_entries(bs, off, 1, &new_entry, &zbitmap, errp) < 0) {
        return -1;
    }
    if (old_entry & QCOW2_OFLAG_COMPRESSED) {
        qcow2_compressed_extent(&s->g, old_entry, &coff, &clen);
        return qcow2_update_refcounts(bs, coff, clen, -1, errp);
    }
    /* (A data file's clusters are not counted.) */
    if ((old_entry & QCOW2_OFFSET_MASK) && !s->g.has_data_file) {
        return qcow2_update_refcounts(bs, old_entry & QCOW2_OFFSET_MASK,
                                      s->g.cluster_size, -1, errp);
    }
    return 0;
}

/*
 * The host clusters of an L2 entry just replaced (one, or those that a
 * compressed cluster's bytes touch) that are free now go back to the
 * file (QEMU's discard "always"). Under alloc_lock.
 */
static int qcow2_discard_freed(BlockDriverState *bs, uint64_t old_entry,
                               Error **errp)
{
    BDRVQcow2State *s = bs->opaque;
    uint64_t cs = s->g.cluster_size;
    uint64_t first, last, refs;

    if (s->g.has_data_file) {
        return 0;           /* a data file's clusters are not counted */
    }
    if (old_entry & QCOW2_OFLAG_COMPRESSED) {
        uint64_t coff, clen;

        qcow2_compressed_extent(&s->g, old_entry, &coff, &clen);
        first = ROUND_DOWN(coff, cs);
        last = ROUND_DOWN(coff + clen - 1, cs);
    } else if (old_entry & QCOW2_OFFSET_MASK) {
        first = last = old_entry & QCOW2_OFFSET_MASK;
    } else {
        return 0;
    }
    for (uint64_t host = first; host <= last; host += cs) {
        if (qcow2_get_refcount_locked(bs, host, &refs, errp) < 0 ||
            (refs == 0 && bdrv_pdiscard(bs->file, host, cs, errp) < 0)) {
            return -1;
        }
    }
    return 0;
}

int qcow2_unmap_range_locked(BlockDriverState *bs, uint64_t start,
                             uint64_t end, Error **errp)
{
    BDRVQcow2State *s = bs->opaque;
    uint64_t cs = s->g.cluster_size;

    for (uint64_t off = start; off < end; off += cs) {
        uint64_t entry, bitmap;

        if (qcow2_get_l2_entry(bs, off, &entry, &bitmap, errp) < 0) {
            return -1;
        }
        if (!entry && !bitmap) {
            continue;
        }
        if (qcow2_replace_entry(bs, off, entry, 0, errp) < 0 ||
            qcow2_discard_freed(bs, entry, errp) < 0) {
            return -1;
        }
    }
    return 0;
}

/*
 * Zero writes that may free space (BDRV_REQ_MAY_UNMAP: commit's, an NBD
 * client's trim-allowed zeroing): whole clusters, v3 without subclusters
 * or snapshots, become unallocated (no backing file: they read zeroes)
 * or zero clusters, and their host clusters are freed, as QEMU's qcow2
 * does. A v2 image has no zero clusters: without a backing file its
 * clusters are freed (QEMU discards them), with one the request path
 * writes zeroes. Anything else: -ENOTSUP, and the request path writes
 * zeroes (which the write path turns into zero clusters where it can).
 */
int qcow2_pwrite_zeroes(BlockDriverState *bs, uint64_t offset, size_t bytes,
                        int flags, Error **errp)
{
    BDRVQcow2State *s = bs->opaque;
    uint64_t cs = s->g.cluster_size;
    bool v2 = s->header.version < 3;
    bool hole = !bs->backing && (v2 || !(flags & BDRV_REQ_EXPLICIT_ZERO));
    int ret = 0;

    /* The writer's turn: new L2 tables come in order too. */
    bdrv_write_turn();
    if (!(flags & BDRV_REQ_MAY_UNMAP) || (v2 && !hole) ||
        s->g.extended_l2 || s->header.nb_snapshots || s->g.has_data_file ||
        offset % cs || (bytes % cs && offset + bytes != s->header.size)) {
        return -ENOTSUP;
    }
    g_mutex_lock(&s->alloc_lock);
    for (uint64_t off = offset; off < offset + bytes && ret == 0; off += cs) {
        uint64_t entry, bitmap;
        uint64_t zentry = hole ? 0 : QCOW2_OFLAG_ZERO;

        if (qcow2_get_l2_entry(bs, off, &entry, &bitmap, errp) < 0) {
            ret = -1;
            break;
        }
        if (entry == zentry) {
            continue;
        }
        ret = qcow2_replace_entry(bs, off, entry, zentry, errp);
    }
    g_mutex_unlock(&s->alloc_lock);
    return ret;
}

/* ---- Grown areas (resize) */

/*
 * A grow over a backing file longer than the old size: [start, end)
 * (start (sub)cluster-aligned, past the old size) must read zeroes, not
 * what the backing file holds there, as QEMU's truncate makes it: zero
 * bits on the subclusters not allocated (extended L2), zero clusters
 * (v3; a preallocated host cluster stays, flagged zero).
 */
int qcow2_hide_backing_range(BlockDriverState *bs, uint64_t start,
                             uint64_t end, Error **errp)
{
    BDRVQcow2State *s = bs->opaque;
    uint64_t cs = s->g.cluster_size;
    int ret = 0;

    g_mutex_lock(&s->alloc_lock);
    for (uint64_t off = ROUND_DOWN(start, cs); off < end && ret == 0;
         off += cs) {
        uint64_t entry, bitmap, new_entry, new_bitmap = 0;

        if (qcow2_get_l2_entry(bs, off, &entry, &bitmap, errp) < 0) {
            ret = -1;
            break;
        }
        if (entry & QCOW2_OFLAG_COMPRESSED) {
            continue;
        }
        new_entry = entry;
        if (s->g.extended_l2) {
            uint64_t a = MAX(start, off) - off;
            uint64_t b = MIN(end, off + cs) - off;
            uint64_t bits = qcow2_sc_bits(s, a, b) & ~bitmap;

            new_bitmap = bitmap | (bits << QCOW2_SUBCLUSTERS_PER_CLUSTER);
        } else {
            new_entry = entry | QCOW2_OFLAG_ZERO;
        }
        if (new_entry != entry || new_bitmap != bitmap) {
            ret = qcow2_set_l2_entries(bs, off, 1, &new_entry, &new_bitmap,
                                       errp);
        }
    }
    g_mutex_unlock(&s->alloc_lock);
    return ret;
}

/*
 * resize --preallocation: each cluster of [start, end) (cluster-aligned)
 * without a host cluster gets one, as QEMU preallocates: metadata maps it
 * (the file covers it, sparse); falloc and full also write its host
 * space with zeroes. The subcluster bitmap stays as it was (QEMU's
 * preallocated subclusters are not allocated: they read zeroes or the
 * backing file), except with alloc_bits (falloc/full over a backing file
 * to hide): the written zeroes are the data, the subclusters from guest
 * offset alloc_from allocated.
 * One L2 table at a time; the entries only once the data is down.
 */
int qcow2_prealloc_range(BlockDriverState *bs, uint64_t start, uint64_t end,
                         PreallocMode mode, uint64_t alloc_from,
                         Error **errp)
{
    BDRVQcow2State *s = bs->opaque;
    uint64_t cs = s->g.cluster_size;
    g_autofree uint8_t *zeroes = NULL;
    uint64_t file_end = 0;
    int ret = 0;

    g_mutex_lock(&s->alloc_lock);
    for (uint64_t off = start; off < end && ret == 0; off += cs) {
        uint64_t entry, bitmap, host, new_entry, new_bitmap;

        if (qcow2_get_l2_entry(bs, off, &entry, &bitmap, errp) < 0) {
            ret = -1;
            break;
        }
        if ((entry & QCOW2_OFLAG_COMPRESSED) ||
            (entry & QCOW2_OFFSET_MASK)) {
            continue;       /* has its host space already */
        }
        if (qcow2_alloc_data_clusters(bs, off, 1, &host, errp) < 0) {
            ret = -1;
            break;
        }
        if (mode != PREALLOC_MODE_OFF) {
            zeroes = zeroes ? zeroes : g_malloc0(cs);
            if (bdrv_pwrite(s->data_file, host, zeroes, cs, 0, errp) < 0) {
                ret = -1;
                break;
            }
        }
        file_end = MAX(file_end, host + cs);
        new_entry = host | QCOW2_OFLAG_COPIED;
        new_bitmap = bitmap;
        if (alloc_from < off + cs) {
            new_bitmap |= qcow2_sc_bits(s, MAX(alloc_from, off) - off, cs);
        }
        ret = qcow2_set_l2_entries(bs, off, 1, &new_entry, &new_bitmap, errp);
    }
    g_mutex_unlock(&s->alloc_lock);
    if (ret == 0 && file_end) {
        /* Mapped clusters lie inside the file (metadata: sparse). */
        int64_t len = bdrv_getlength_exact(s->data_file, errp);

        if (len < 0) {
            return -1;
        }
        if ((uint64_t)len < file_end &&
            bdrv_truncate(s->data_file, file_end, PREALLOC_MODE_OFF,
                          errp) < 0) {
            return -1;
        }
    }
    return ret;
}
