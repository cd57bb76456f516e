/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * qcow2 reference counts, read side (spec, "Host cluster management"):
 * refcount table -> refcount block -> an entry of 1 to 64 bits. Reads
 * only what one lookup needs (8 bytes of table, at most 8 of block), so
 * nothing is allocated from the header's table size; "check" can build
 * on it.
 */
#include "block/qcow2.h"

#ifndef DIV_ROUND_UP
#define DIV_ROUND_UP(n, d) (((n) + (d) - 1) / (d))
#endif

uint64_t qcow2_refcount_block_entry(const uint8_t *block, uint64_t index,
                                    unsigned order)
{
    unsigned bits = 1u << order;
    uint64_t v = 0;

    if (bits < 8) {
        /* Sub-byte widths: entry 0 in the least significant bits. */
        uint64_t bit = index * bits;

        return (block[bit / 8] >> (bit % 8)) & ((1u << bits) - 1);
    }
    for (unsigned i = 0; i < bits / 8; i++) {
        v = (v << 8) | block[index * (bits / 8) + i];
    }
    return v;
}

static int qcow2_get_refcount_as(BlockDriverState *bs, uint64_t offset,
                                  uint64_t *refcount, bool locked,
                                  Error **errp)
{
    BDRVQcow2State *s = bs->opaque;
    const Qcow2Header *h = &s->header;
    unsigned order = h->refcount_order;
    uint64_t cluster = offset >> s->g.cluster_bits;
    /* Entries per refcount block: cluster_size * 8 / refcount_bits. */
    uint64_t per_block = (s->g.cluster_size * 8) >> order;
    uint64_t table_index = cluster / per_block;
    uint64_t block_index = cluster % per_block;
    uint64_t table_entries = (uint64_t)h->refcount_table_clusters *
                             (s->g.cluster_size / sizeof(uint64_t));
    uint8_t raw[8];
    uint64_t block, byte, skip;
    size_t n;

    *refcount = 0;
    if (table_index >= table_entries) {
        return 0;
    }
    if (bdrv_pread(bs->file, h->refcount_table_offset +
                   table_index * 8, raw, 8, errp) < 0) {
        return -1;
    }
    block = ldq_be_p(raw) & QCOW2_REFT_OFFSET_MASK;
    if (!block) {
        return 0;
    }
    if ((block & (s->g.cluster_size - 1)) || block > s->file_size ||
        s->g.cluster_size > s->file_size - block) {
        error_setg(errp, "qcow2 image is corrupt: refcount block offset 0x%"
                   PRIx64 " is invalid", block);
        return -1;
    }
    /* The byte holding the entry, and the entry's index from there. */
    byte = (block_index << order) / 8;
    skip = order < 3 ? block_index % (8u >> order) : 0;
    n = order < 3 ? 1 : (1u << order) / 8;
    /* A block a writer holds changed in memory is read from there. */
    if (!locked) {
        g_mutex_lock(&s->alloc_lock);
    }
    if (s->rb.valid && s->rb.idx == table_index) {
        *refcount = qcow2_refcount_block_entry(s->rb.block, block_index,
                                               order);
        if (!locked) {
            g_mutex_unlock(&s->alloc_lock);
        }
        return 0;
    }
    if (!locked) {
        g_mutex_unlock(&s->alloc_lock);
    }
    if (bdrv_pread(bs->file, block + byte, raw, n, errp) < 0) {
        return -1;
    }
    *refcount = qcow2_refcount_block_entry(raw, skip, order);
    return 0;
}

int qcow2_get_refcount(BlockDriverState *bs, uint64_t offset,
                       uint64_t *refcount, Error **errp)
{
    return qcow2_get_refcount_as(bs, offset, refcount, false, errp);
}

int qcow2_get_refcount_locked(BlockDriverState *bs, uint64_t offset,
                              uint64_t *refcount, Error **errp)
{
    return qcow2_get_refcount_as(bs, offset, refcount, true, errp);
}

/* ---- Writing: the refcounts of new clusters */

void qcow2_refcount_block_set(uint8_t *block, uint64_t index, unsigned order,
                              uint64_t value)
{
    unsigned bits = 1u << order;

    if (bits < 8) {
        uint64_t bit = index * bits;
        uint8_t mask = ((1u << bits) - 1) << (bit % 8);

        block[bit / 8] = (block[bit / 8] & ~mask) |
                         ((value << (bit % 8)) & mask);
        return;
    }
    for (unsigned i = bits / 8; i-- > 0;) {
        block[index * (bits / 8) + i] = value & 0xff;
        value >>= 8;
    }
}

int qcow2_refcount_init(BlockDriverState *bs, Error **errp)
{
    BDRVQcow2State *s = bs->opaque;
    const Qcow2Header *h = &s->header;
    uint64_t n = (uint64_t)h->refcount_table_clusters *
                 (s->g.cluster_size / sizeof(uint64_t));

    /* Bounded by QCOW2_MAX_REFTABLE_BYTES at open. */
    s->reftable_entries = n;
    s->reftable = g_new(uint64_t, n);
    if (bdrv_pread(bs->file, h->refcount_table_offset,
                   s->reftable, n * 8, errp) < 0) {
        return -1;
    }
    for (uint64_t i = 0; i < n; i++) {
        s->reftable[i] = GUINT64_FROM_BE(s->reftable[i]) &
                         QCOW2_REFT_OFFSET_MASK;
        if (s->reftable[i] &&
            ((s->reftable[i] & (s->g.cluster_size - 1)) ||
             s->reftable[i] >= s->file_size)) {
            error_setg(errp, "qcow2 image is corrupt: refcount block offset "
                       "0x%" PRIx64 " is invalid", s->reftable[i]);
            return -1;
        }
    }
    return 0;
}

static uint64_t qcow2_refs_per_block(BDRVQcow2State *s)
{
    return (s->g.cluster_size * 8) >> s->header.refcount_order;
}

/* The file grew to end: readers check offsets against file_size. */
static void qcow2_grow_file_size(BDRVQcow2State *s, uint64_t end)
{
    if (end > s->file_size) {
        s->file_size = end;
    }
}

static int qcow2_add_refs(BlockDriverState *bs, uint64_t first,
                          uint64_t count, int64_t delta, Error **errp);

/*
 * A refcount table of at least min_entries (twice the old one, or more)
 * at the end of the file (qemu-img's small images made with 512-byte
 * clusters cover 64 MiB per table cluster):
 *
 *   1. the new table is written, with the old entries;
 *   2. from then on refcount blocks are entered in it (s->reftable and
 *      the offset in s->header are the new table's, in memory only), and
 *      the new table's clusters are counted, which may add blocks;
 *   3. the header points at it (one 12-byte write);
 *   4. the old table's clusters are freed.
 *
 * Before 3 the file's header still names the old table, which counts
 * every cluster it did: a crash leaves at most uncounted clusters past
 * the old table's reach, which nothing points at.
 */
static int qcow2_grow_reftable(BlockDriverState *bs, uint64_t min_entries,
                               Error **errp)
{
    BDRVQcow2State *s = bs->opaque;
    uint64_t cs = s->g.cluster_size;
    uint64_t per_cluster = cs / sizeof(uint64_t);
    uint64_t old_off = s->header.refcount_table_offset;
    uint64_t old_clusters = s->header.refcount_table_clusters;
    uint64_t clusters = MAX(old_clusters * 2,
                            DIV_ROUND_UP(min_entries, per_cluster) + 1);
    uint64_t off = s->next_free, entries = clusters * per_cluster;
    g_autofree uint8_t *table = NULL;
    uint8_t hdr[12];

    if (clusters * cs > QCOW2_MAX_REFTABLE_BYTES) {
        error_setg(errp, "The qcow2 refcount table would grow past %d "
                   "bytes", QCOW2_MAX_REFTABLE_BYTES);
        return -1;
    }
    s->next_free += clusters * cs;
    table = g_malloc0(clusters * cs);
    for (uint64_t i = 0; i < s->reftable_entries; i++) {
        stq_be_p(table + i * 8, s->reftable[i]);
    }
    if (bdrv_pwrite(bs->file, off, table, clusters * cs, 0, errp) < 0) {
        return -1;
    }
    qcow2_grow_file_size(s, off + clusters * cs);
    s->reftable = g_renew(uint64_t, s->reftable, entries);
    memset(s->reftable + s->reftable_entries, 0,
           (entries - s->reftable_entries) * sizeof(uint64_t));
    s->reftable_entries = entries;
    s->header.refcount_table_offset = off;
    s->header.refcount_table_clusters = clusters;
    if (qcow2_add_refs(bs, off / cs, clusters, 1, errp) < 0 ||
        qcow2_refcount_flush(bs, errp) < 0 ||
        bdrv_flush(bs->file, errp) < 0) {
        return -1;
    }
    stq_be_p(hdr, off);
    stl_be_p(hdr + 8, clusters);
    if (bdrv_pwrite(bs->file, 48, hdr, sizeof(hdr), 0, errp) < 0 ||
        bdrv_flush(bs->file, errp) < 0) {
        return -1;
    }
    return qcow2_add_refs(bs, old_off / cs, old_clusters, -1, errp);
}

/*
 * The refcount block for table index idx exists (making it if not): a
 * zeroed cluster at the end of the file, written, then entered in the
 * table, then counted (which may make the next block).
 */
static int qcow2_ensure_refblock(BlockDriverState *bs, uint64_t idx,
                                 Error **errp)
{
    BDRVQcow2State *s = bs->opaque;
    g_autofree uint8_t *zero = NULL;
    uint8_t be[8];
    uint64_t off;

    if (idx >= s->reftable_entries &&
        qcow2_grow_reftable(bs, idx + 1, errp) < 0) {
        return -1;
    }
    if (s->reftable[idx]) {
        return 0;
    }
    off = s->next_free;
    s->next_free += s->g.cluster_size;
    zero = g_malloc0(s->g.cluster_size);
    if (bdrv_pwrite(bs->file, off, zero, s->g.cluster_size, 0, errp) < 0) {
        return -1;
    }
    qcow2_grow_file_size(s, off + s->g.cluster_size);
    stq_be_p(be, off);
    if (bdrv_pwrite(bs->file,
                    s->header.refcount_table_offset + idx * 8, be, 8, 0,
                    errp) < 0) {
        return -1;
    }
    s->reftable[idx] = off;
    /* The table points at the block: its own count on disk at once. */
    if (qcow2_add_refs(bs, off >> s->g.cluster_bits, 1, 1, errp) < 0) {
        return -1;
    }
    return qcow2_refcount_flush(bs, errp);
}

int qcow2_refcount_flush(BlockDriverState *bs, Error **errp)
{
    BDRVQcow2State *s = bs->opaque;

    if (s->rb.lo == s->rb.hi) {
        return 0;
    }
    if (bdrv_pwrite(bs->file, s->reftable[s->rb.idx] + s->rb.lo,
                    s->rb.block + s->rb.lo, s->rb.hi - s->rb.lo, 0,
                    errp) < 0) {
        return -1;
    }
    s->rb.lo = s->rb.hi = 0;
    return 0;
}

/* The refcount block of table index idx (which exists) in s->rb. */
static int qcow2_refblock_load(BlockDriverState *bs, uint64_t idx,
                               Error **errp)
{
    BDRVQcow2State *s = bs->opaque;

    if (s->rb.valid && s->rb.idx == idx) {
        return 0;
    }
    if (qcow2_refcount_flush(bs, errp) < 0) {
        return -1;
    }
    if (!s->rb.block) {
        s->rb.block = g_malloc(s->g.cluster_size);
    }
    s->rb.valid = false;
    if (bdrv_pread(bs->file, s->reftable[idx], s->rb.block,
                   s->g.cluster_size, errp) < 0) {
        return -1;
    }
    s->rb.idx = idx;
    s->rb.valid = true;
    return 0;
}

/*
 * Add delta to the refcounts of clusters [first, first + count), in the
 * cached refcount block (s->rb), which is written when another block is
 * needed or by qcow2_refcount_flush(). A decrement is written at once,
 * and only after the L2 entries that stopped pointing at the clusters.
 */
static int qcow2_add_refs(BlockDriverState *bs, uint64_t first,
                          uint64_t count, int64_t delta, Error **errp)
{
    BDRVQcow2State *s = bs->opaque;
    unsigned order = s->header.refcount_order;
    uint64_t per_block = qcow2_refs_per_block(s);
    uint64_t max = order == 6 ? UINT64_MAX : (1ull << (1u << order)) - 1;

    if (delta < 0 && qcow2_flush_l2_pending(bs, errp) < 0) {
        return -1;
    }
    if (delta < 0) {
        /* QEMU's BLKDBG_CLUSTER_FREE (qemu-iotests 217 fails it). */
        bdrv_debug_event(bs->file, "cluster_free");
    }
    while (count) {
        uint64_t idx = first / per_block, i0 = first % per_block;
        uint64_t n = MIN(count, per_block - i0);
        /* The bytes holding entries i0 .. i0 + n - 1. */
        uint64_t b0 = (i0 << order) / 8;
        uint64_t b1 = DIV_ROUND_UP((i0 + n) << order, 8);

        /* (Making a block counts it, which may load another one.) */
        if (qcow2_ensure_refblock(bs, idx, errp) < 0 ||
            qcow2_refblock_load(bs, idx, errp) < 0) {
            return -1;
        }
        /* All checked before any is changed: the cache stays whole. */
        for (uint64_t i = i0; i < i0 + n; i++) {
            uint64_t v = qcow2_refcount_block_entry(s->rb.block, i, order);

            if ((delta < 0 && v < (uint64_t)-delta) ||
                (delta > 0 && v > max - delta)) {
                error_setg(errp, "qcow2 refcount of cluster 0x%" PRIx64
                           " would leave its range", (idx * per_block + i) *
                           s->g.cluster_size);
                return -1;
            }
        }
        for (uint64_t i = i0; i < i0 + n; i++) {
            uint64_t v = qcow2_refcount_block_entry(s->rb.block, i, order);

            qcow2_refcount_block_set(s->rb.block, i, order, v + delta);
        }
        qcow2_range_add(&s->rb.lo, &s->rb.hi, b0, b1);
        first += n;
        count -= n;
    }
    return delta < 0 ? qcow2_refcount_flush(bs, errp) : 0;
}

/* ---- Reusing free clusters (QEMU's allocator) */

static void reuse_mark(BDRVQcow2State *s, uint64_t first, uint64_t count)
{
    for (uint64_t i = first; i < first + count && i < s->reuse.n; i++) {
        s->reuse.used[i / 8] |= 1u << (i % 8);
    }
}

static bool reuse_is_used(BDRVQcow2State *s, uint64_t i)
{
    return s->reuse.used[i / 8] & (1u << (i % 8));
}

/* [offset, offset + bytes) in use, whatever its refcount says. */
static void reuse_mark_bytes(BDRVQcow2State *s, uint64_t offset,
                             uint64_t bytes)
{
    unsigned cb = s->g.cluster_bits;

    if (bytes && offset < s->reuse.n << cb) {
        reuse_mark(s, offset >> cb,
                   ((MIN(offset + bytes, s->reuse.n << cb) - 1) >> cb) -
                   (offset >> cb) + 1);
    }
}

/*
 * The metadata the header and the tables in memory name, marked in use
 * even where a (corrupt) refcount says free: a reused cluster is never
 * written over them (QEMU's overlap checks).
 */
static void reuse_mark_metadata(BDRVQcow2State *s)
{
    const Qcow2Header *h = &s->header;
    uint64_t cs = s->g.cluster_size;

    reuse_mark_bytes(s, 0, cs);
    reuse_mark_bytes(s, h->refcount_table_offset,
                     (uint64_t)h->refcount_table_clusters * cs);
    for (uint64_t t = 0; t < s->reftable_entries; t++) {
        reuse_mark_bytes(s, s->reftable[t], s->reftable[t] ? cs : 0);
    }
    reuse_mark_bytes(s, h->l1_table_offset, (uint64_t)h->l1_size * 8);
    for (uint64_t i = 0; s->l1_table && i < s->l1_size; i++) {
        reuse_mark_bytes(s, s->l1_table[i] & QCOW2_OFFSET_MASK,
                         s->l1_table[i] & QCOW2_OFFSET_MASK ? cs : 0);
    }
    reuse_mark_bytes(s, h->snapshots_offset, s->snapshots_size);
    for (uint32_t i = 0; s->snapshots && i < h->nb_snapshots; i++) {
        reuse_mark_bytes(s, s->snapshots[i].l1_table_offset,
                         (uint64_t)s->snapshots[i].l1_size * 8);
    }
    if (s->ext.has_crypto_header) {
        reuse_mark_bytes(s, s->ext.crypto_header_offset,
                         s->ext.crypto_header_length);
    }
    reuse_mark_bytes(s, s->ext.bitmap_directory_offset,
                     s->ext.bitmap_directory_size);
}

int qcow2_alloc_reuse_begin(BlockDriverState *bs, Error **errp)
{
    BDRVQcow2State *s = bs->opaque;
    uint64_t cs = s->g.cluster_size;
    unsigned order = s->header.refcount_order;
    uint64_t per_block = qcow2_refs_per_block(s);
    g_autofree uint8_t *block = NULL;

    if (s->reuse.depth++) {
        return 0;
    }
    /*
     * What freed a cluster (an L2 entry, a table pointer) is on the disk
     * before the cluster is taken again: only clusters free now are.
     */
    if (qcow2_flush_metadata_locked(bs, errp) < 0 ||
        bdrv_flush(bs->file, errp) < 0) {
        s->reuse.depth = 0;
        return -1;
    }
    s->reuse.n = s->next_free / cs;
    s->reuse.cursor = 0;
    s->reuse.used = g_malloc0(DIV_ROUND_UP(s->reuse.n, 8) + 1);
    block = g_malloc(cs);
    for (uint64_t t = 0; t * per_block < s->reuse.n; t++) {
        uint64_t first = t * per_block;

        if (t >= s->reftable_entries || !s->reftable[t]) {
            continue;           /* no block: all free */
        }
        if (bdrv_pread(bs->file, s->reftable[t], block, cs, errp) < 0) {
            qcow2_alloc_reuse_end(bs);
            return -1;
        }
        for (uint64_t i = 0; i < per_block && first + i < s->reuse.n; i++) {
            if (qcow2_refcount_block_entry(block, i, order)) {
                reuse_mark(s, first + i, 1);
            }
        }
    }
    reuse_mark_metadata(s);
    return 0;
}

void qcow2_alloc_reuse_end(BlockDriverState *bs)
{
    BDRVQcow2State *s = bs->opaque;

    if (s->reuse.depth && --s->reuse.depth) {
        return;
    }
    g_clear_pointer(&s->reuse.used, g_free);
    s->reuse.n = 0;
}

/*
 * The first run of n free clusters from the cursor (QEMU's
 * alloc_clusters_noref): free in the map made at the start, or at or
 * past next_free; a run may start in a hole at the end of the map and
 * go on past it.
 */
static uint64_t reuse_find(BDRVQcow2State *s, uint64_t n)
{
    uint64_t end = s->next_free >> s->g.cluster_bits;
    uint64_t i = s->reuse.cursor;

    while (i < s->reuse.n) {
        uint64_t j = 0;

        while (j < n) {
            uint64_t k = i + j;

            if (k < s->reuse.n ? reuse_is_used(s, k) : k < end) {
                break;
            }
            j++;
        }
        if (j == n) {
            return i;
        }
        i += j + 1;
    }
    return MAX(i, end);
}

int qcow2_alloc_clusters(BlockDriverState *bs, uint64_t n, uint64_t *offset,
                         Error **errp)
{
    BDRVQcow2State *s = bs->opaque;
    uint64_t end;

    if (s->reuse.used) {
        uint64_t first = reuse_find(s, n);

        reuse_mark(s, first, n);
        s->reuse.cursor = first + n;
        *offset = first << s->g.cluster_bits;
    } else {
        *offset = s->next_free;
    }
    end = *offset + n * s->g.cluster_size;
    if (end > QCOW2_OFFSET_MASK || end < *offset) {
        error_setg(errp, "The qcow2 image file would be too large");
        return -1;
    }
    /* Before the refcounts: a new refcount block goes after the run. */
    s->next_free = MAX(s->next_free, end);
    /* Counted before anything points at them: a crash leaks, no more. */
    if (qcow2_add_refs(bs, *offset >> s->g.cluster_bits, n, 1, errp) < 0) {
        return -1;
    }
    qcow2_grow_file_size(s, *offset + n * s->g.cluster_size);
    return 0;
}

int qcow2_update_refcounts(BlockDriverState *bs, uint64_t offset,
                           uint64_t bytes, int delta, Error **errp)
{
    BDRVQcow2State *s = bs->opaque;
    uint64_t first = offset >> s->g.cluster_bits;
    uint64_t last = (offset + bytes - 1) >> s->g.cluster_bits;

    /* No bytes, no clusters (as QEMU's update_refcount) */
    if (!bytes) {
        return 0;
    }
    return qcow2_add_refs(bs, first, last - first + 1, delta, errp);
}
