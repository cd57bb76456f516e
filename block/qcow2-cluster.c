/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * qcow2 cluster mapping: guest offset -> L1 entry -> L2 table -> host
 * offset (spec, "Cluster mapping" and "Extended L2 Entries").
 *
 * A lookup returns the longest run of guest bytes that maps the same way
 * (all unallocated, all zero, or data contiguous on the host), so a read
 * of a fully allocated image is one file read per L2 table, and block
 * status sees whole holes at once.
 */
#include "block/qcow2.h"

/* Bits 1-8 and 56-61 of a standard L2 entry are reserved (spec). */
#define QCOW2_L2E_STD_RESERVED_MASK 0x3f000000000001feull

int qcow2_l2_entry_type(const Qcow2Geometry *g, uint64_t l2_entry,
                        uint64_t l2_bitmap, unsigned sc,
                        Qcow2SubclusterType *type, Error **errp)
{
    uint64_t host = l2_entry & QCOW2_OFFSET_MASK;
    bool alloc, zero, has_host;

    if (l2_entry & QCOW2_OFLAG_COMPRESSED) {
        if (g->has_data_file) {
            error_setg(errp, "qcow2 image is corrupt: compressed cluster in "
                       "an image with an external data file");
            return -1;
        }
        if (l2_bitmap) {
            error_setg(errp, "qcow2 image is corrupt: compressed cluster "
                       "with a subcluster bitmap");
            return -1;
        }
        *type = QCOW2_SC_COMPRESSED;
        return 0;
    }
    if (l2_entry & QCOW2_L2E_STD_RESERVED_MASK) {
        error_setg(errp, "qcow2 image is corrupt: reserved bits set in L2 "
                   "entry 0x%016" PRIx64, l2_entry);
        return -1;
    }
    if (host & (g->cluster_size - 1)) {
        error_setg(errp, "qcow2 image is corrupt: cluster allocation offset "
                   "0x%" PRIx64 " unaligned", host);
        return -1;
    }
    /*
     * Offset 0 means unallocated, except with an external data file, where
     * 0 is a real offset and the COPIED bit (refcount 1, always true
     * there) tells the two apart (as QEMU does).
     */
    has_host = qcow2_entry_has_host(g, l2_entry);

    if (!g->extended_l2) {
        if (l2_entry & QCOW2_OFLAG_ZERO) {
            *type = QCOW2_SC_ZERO;
        } else {
            *type = has_host ? QCOW2_SC_NORMAL : QCOW2_SC_UNALLOCATED;
        }
        return 0;
    }
    alloc = l2_bitmap & (1ull << sc);
    zero = l2_bitmap & (1ull << (sc + QCOW2_SUBCLUSTERS_PER_CLUSTER));
    if (alloc && zero) {
        error_setg(errp, "qcow2 image is corrupt: subcluster %u is both "
                   "allocated and zero", sc);
        return -1;
    }
    if (alloc && !has_host) {
        error_setg(errp, "qcow2 image is corrupt: allocated subcluster %u "
                   "in an unallocated cluster", sc);
        return -1;
    }
    *type = zero ? QCOW2_SC_ZERO
                 : alloc ? QCOW2_SC_NORMAL : QCOW2_SC_UNALLOCATED;
    return 0;
}

void qcow2_compressed_extent(const Qcow2Geometry *g, uint64_t l2_entry,
                             uint64_t *offset, uint64_t *len)
{
    uint64_t sectors = ((l2_entry >> g->csize_shift) & g->csize_mask) + 1;

    *offset = l2_entry & g->coffset_mask;
    /* The data starts inside its first sector and ends with the last. */
    *len = sectors * QCOW2_COMPRESSED_SECTOR -
           (*offset & (QCOW2_COMPRESSED_SECTOR - 1));
}

/* The L2 table at l2_offset, from the cache or the file. Lock held. */
const uint8_t *qcow2_get_l2_table(BlockDriverState *bs, uint64_t l2_offset,
                                  Error **errp)
{
    BDRVQcow2State *s = bs->opaque;
    const uint8_t *table = qcow2_cache_lookup(s->l2_cache, l2_offset);
    uint8_t *slot;

    if (table) {
        return table;
    }
    slot = qcow2_cache_insert(s->l2_cache, l2_offset);
    if (bdrv_pread(bs->file, l2_offset, slot,
                   s->g.cluster_size, errp) < 0) {
        qcow2_cache_drop(s->l2_cache, l2_offset);
        return NULL;
    }
    /* Entries a writer changed and has not written yet (qcow2-write.c). */
    if (s->l2p.offset == l2_offset && s->l2p.lo < s->l2p.hi) {
        memcpy(slot + s->l2p.lo, s->l2p.table + s->l2p.lo,
               s->l2p.hi - s->l2p.lo);
    }
    return slot;
}

/* The L1 entry's L2 table offset (0: none), checked. */
static int qcow2_l2_offset(BDRVQcow2State *s, uint64_t l1_index,
                           uint64_t *l2_offset, Error **errp)
{
    uint64_t l1e = s->l1_table[l1_index];

    *l2_offset = l1e & QCOW2_OFFSET_MASK;
    if (!*l2_offset) {
        return 0;
    }
    if (*l2_offset & (s->g.cluster_size - 1)) {
        error_setg(errp, "qcow2 image is corrupt: L2 table offset 0x%" PRIx64
                   " unaligned (L1 index: 0x%" PRIx64 ")", *l2_offset,
                   l1_index);
        return -1;
    }
    if (*l2_offset > s->file_size ||
        s->g.cluster_size > s->file_size - *l2_offset) {
        error_setg(errp, "qcow2 image is corrupt: L2 table at offset 0x%"
                   PRIx64 " is beyond the end of the file", *l2_offset);
        return -1;
    }
    return 0;
}

bool qcow2_extent_has_host(Qcow2SubclusterType type, uint64_t l2_entry)
{
    /* A standard cluster may sit at offset 0 of an external data file. */
    return type == QCOW2_SC_NORMAL ||
           (type != QCOW2_SC_COMPRESSED && (l2_entry & QCOW2_OFFSET_MASK));
}

/*
 * Walk the L2 table from offset to end: the first subcluster's mapping,
 * then every following one that continues it.
 */
static int qcow2_walk_l2(BDRVQcow2State *s, const uint8_t *table,
                         uint64_t offset, uint64_t end, Qcow2Extent *ext,
                         Error **errp)
{
    const Qcow2Geometry *g = &s->g;
    uint64_t pos = offset, next_host = 0;

    while (pos < end) {
        uint64_t idx = (pos >> g->cluster_bits) & (g->l2_entries - 1);
        const uint8_t *e = table + idx * g->l2_entry_size;
        uint64_t entry = ldq_be_p(e);
        uint64_t bitmap = g->extended_l2 ? ldq_be_p(e + 8) : 0;
        unsigned sc = (pos >> g->subcluster_bits) &
                      (g->extended_l2 ? QCOW2_SUBCLUSTERS_PER_CLUSTER - 1 : 0);
        uint64_t in_cluster = pos & (g->cluster_size - 1);
        uint64_t unit_end = ROUND_DOWN(pos, g->subcluster_size) +
                            g->subcluster_size;
        Qcow2SubclusterType type;

        /* A bad entry after the first ends the run; its read reports it. */
        if (qcow2_l2_entry_type(g, entry, bitmap, sc, &type,
                                pos == offset ? errp : NULL) < 0) {
            if (pos == offset) {
                return -1;
            }
            break;
        }
        if (pos == offset) {
            ext->type = type;
            ext->l2_entry = entry;
            ext->host_offset = (entry & QCOW2_OFFSET_MASK) + in_cluster;
            next_host = ext->host_offset;
        } else if (type != ext->type || type == QCOW2_SC_COMPRESSED ||
                   /* Shared with a snapshot or not: writes differ. */
                   ((entry ^ ext->l2_entry) & QCOW2_OFLAG_COPIED) ||
                   qcow2_extent_has_host(type, entry) !=
                   qcow2_extent_has_host(type, ext->l2_entry) ||
                   (qcow2_extent_has_host(type, entry) &&
                    (entry & QCOW2_OFFSET_MASK) + in_cluster != next_host)) {
            break;
        }
        if (type == QCOW2_SC_COMPRESSED) {
            /* One compressed cluster, subclusters or not. */
            unit_end = ROUND_DOWN(pos, g->cluster_size) + g->cluster_size;
        }
        next_host += MIN(unit_end, end) - pos;
        pos = MIN(unit_end, end);
    }
    ext->bytes = pos - offset;
    return 0;
}

int qcow2_get_extent(BlockDriverState *bs, uint64_t offset, uint64_t bytes,
                     Qcow2Extent *ext, Error **errp)
{
    BDRVQcow2State *s = bs->opaque;
    unsigned l2_span_bits = s->g.cluster_bits + s->g.l2_bits;
    uint64_t l1_index = offset >> l2_span_bits;
    uint64_t span_end = (l1_index + 1) << l2_span_bits;
    uint64_t end = offset + MIN(bytes, span_end - offset);
    const uint8_t *table;
    uint64_t l2_offset;
    int ret;

    memset(ext, 0, sizeof(*ext));
    ext->type = QCOW2_SC_UNALLOCATED;
    ext->bytes = end - offset;
    /* Past the entries the virtual size needs (requests never go there). */
    if (l1_index >= s->l1_size) {
        return 0;
    }
    if (qcow2_l2_offset(s, l1_index, &l2_offset, errp) < 0) {
        return -1;
    }
    if (!l2_offset) {
        return 0;
    }
    g_mutex_lock(&s->lock);
    table = qcow2_get_l2_table(bs, l2_offset, errp);
    ret = table ? qcow2_walk_l2(s, table, offset, end, ext, errp) : -1;
    g_mutex_unlock(&s->lock);
    return ret;
}
