/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Changing a qcow2 image in place: "amend" (the LUKS key slots of the
 * header inside the image, compat up and down, lazy_refcounts, size) and
 * "resize" (grow; shrink with --shrink where the tail holds no data).
 *
 * Each change is ordered as the write path's (qcow2-write.c): new
 * clusters are counted and written before the header points at them,
 * old ones are freed after it stops pointing at them, so a crash in
 * between leaks clusters and never corrupts the image.
 */
#include <string.h>

#include "block/crypto.h"
#include "block/qcow2.h"
#include "block/qcow2-bitmap.h"

#define DIV_ROUND_UP_U64(n, d) ((n) / (d) + !!((n) % (d)))

/* QEMU's v3 header (see qcow2-create.c). */
#define QCOW2_V3_CREATE_HEADER_LEN 112

/* ---- The header */

/* Rewrite the first cluster from s->header and what the image names. */
static int qcow2_rewrite_header(BlockDriverState *bs, Error **errp)
{
    BDRVQcow2State *s = bs->opaque;
    uint64_t cs = s->g.cluster_size;
    size_t hlen = 2 * cs + QCOW2_MAX_BACKING_NAME + QCOW2_MAX_EXT_STRING + 8;
    g_autofree uint8_t *buf = g_malloc(hlen);
    uint64_t coff = s->ext.has_crypto_header ? s->ext.crypto_header_offset : 0;
    uint64_t clen = s->ext.has_crypto_header ? s->ext.crypto_header_length : 0;
    size_t n;

    n = qcow2_header_build(&s->header, s->backing_file,
                           s->ext.backing_format, s->ext.data_file, coff,
                           clen, true, s->ext.unknown, buf, hlen);
    if (n >= cs) {
        n = qcow2_header_build(&s->header, s->backing_file,
                               s->ext.backing_format, s->ext.data_file, coff,
                               clen, false, s->ext.unknown, buf, hlen);
    }
    if (n > cs) {
        error_setg(errp, "The new header does not fit in the first cluster");
        return -1;
    }
    /* The bitmaps extension, as the image has it (qcow2-bitmap.c). */
    if (s->ext.nb_bitmaps &&
        qcow2_header_set_bitmaps_ext(buf, cs, s->ext.nb_bitmaps,
                                     s->ext.bitmap_directory_size,
                                     s->ext.bitmap_directory_offset,
                                     errp) < 0) {
        return -1;
    }
    /* One write of one cluster: the old header or the new one. */
    return bdrv_pwrite(bs->file, 0, buf, cs, 0, errp);
}

/* Whether any L2 entry of the image is a zero cluster (v3 only). */
static int qcow2_has_zero_clusters(BlockDriverState *bs, bool *found,
                                   Error **errp)
{
    BDRVQcow2State *s = bs->opaque;

    *found = false;
    for (uint64_t i = 0; i < s->l1_size && !*found; i++) {
        uint64_t l2 = s->l1_table[i] & QCOW2_OFFSET_MASK;
        const uint8_t *t;

        if (!l2) {
            continue;
        }
        g_mutex_lock(&s->lock);
        t = qcow2_get_l2_table(bs, l2, errp);
        for (uint64_t j = 0; t && j < s->g.l2_entries; j++) {
            uint64_t e = ldq_be_p(t + j * s->g.l2_entry_size);

            if (!(e & QCOW2_OFLAG_COMPRESSED) && (e & QCOW2_OFLAG_ZERO)) {
                *found = true;
                break;
            }
        }
        g_mutex_unlock(&s->lock);
        if (!t) {
            return -1;
        }
    }
    return 0;
}

static int qcow2_amend_compat(BlockDriverState *bs, uint32_t version,
                              Error **errp)
{
    BDRVQcow2State *s = bs->opaque;
    Qcow2Header *h = &s->header;
    bool zero;

    if (version == h->version) {
        return 0;
    }
    if (version == 3) {
        /* Entries of v2 may lack the extra data v3 requires (spec). */
        if (qcow2_snapshots_rewrite(bs, errp) < 0) {
            return -1;
        }
        h->version = 3;
        h->header_length = QCOW2_V3_CREATE_HEADER_LEN;
        h->refcount_order = 4;
        return 0;
    }
    /* Down to 0.10: only what version 2 can say, in QEMU's order. */
    if (h->refcount_order != 4) {
        error_setg(errp, "compat=0.10 requires refcount_bits=16");
        return -1;
    }
    if (s->g.has_data_file) {
        /* Version 2 has no incompatible feature bits to say so. */
        error_setg(errp, "Cannot downgrade an image with a data file");
        return -1;
    }
    /*
     * As QEMU: a snapshot of another size, or with more VM state than
     * the 32-bit field holds, needs the extra data version 2 programs may
     * ignore. Their entries keep it (the table is not rewritten).
     */
    for (uint32_t i = 0; i < h->nb_snapshots; i++) {
        if (s->snapshots[i].vm_state_size > UINT32_MAX ||
            s->snapshots[i].disk_size !=
            ROUND_DOWN(h->size, BDRV_SECTOR_SIZE)) {
            error_setg(errp, "Internal snapshots prevent downgrade of image");
            return -1;
        }
    }
    if (s->g.extended_l2) {
        error_setg(errp, "Cannot downgrade an image with extended L2 entries");
        return -1;
    }
    if (qcow2_has_bitmaps(bs)) {
        /* Version 2 has no autoclear bits, hence no bitmaps. */
        error_setg(errp, "Cannot downgrade an image with persistent bitmaps: "
                   "remove them first ('qemu-img bitmap --remove')");
        return -1;
    }
    if (h->compression_type != QCOW2_COMPRESSION_ZLIB) {
        error_setg(errp, "Cannot downgrade an image with a non-zlib "
                   "compression type");
        return -1;
    }
    if (qcow2_has_zero_clusters(bs, &zero, errp) < 0 ||
        (!zero && qcow2_snapshots_have_zero_clusters(bs, &zero, errp) < 0)) {
        return -1;
    }
    if (zero) {
        error_setg(errp, "The image has zero clusters, which compat=0.10 "
                   "cannot hold: qemu-img-lite does not expand them (qemu-img "
                   "amend does)");
        return -1;
    }
    h->version = 2;
    h->header_length = QCOW2_V2_HEADER_LEN;
    h->incompatible_features = 0;
    h->compatible_features = 0;
    h->autoclear_features = 0;
    return 0;
}

/* ---- Refcount width (amend -o refcount_bits=N) */

/*
 * The new refcount structures are built from the old ones in walks over
 * the old refcount table (QEMU's walk_over_reftable): each walk reads
 * every old refcount, in order, and groups them into the blocks of the
 * new width. The walks that allocate give every new block that holds a
 * non-zero refcount a cluster; those clusters are counted in the old
 * structures, which changes the refcounts the next walk reads; so they
 * repeat (a new table too, each time one was added) until a walk
 * allocates nothing. A last walk writes the new blocks. Progress counts
 * the walks as QEMU's does, so that "amend -p" moves as qemu-img's does
 * (back, when one more walk is needed: qemu-iotests 112).
 */
typedef struct RefOrderWalk {
    BlockDriverState *bs;
    unsigned order;                 /* the new width's */
    uint64_t per_block;             /* entries of a new block */
    uint64_t *table;                /* the new refcount table */
    uint64_t size;                  /* its entries */
    uint8_t *block;                 /* the new block being written */
    bool write;                     /* the last walk: write, no allocation */
    bool allocated;                 /* this walk allocated a block */
    BdrvAmendStatusCB *status_cb;
    void *cb_opaque;
} RefOrderWalk;

/* The new block index idx is complete: give it a cluster, or write it. */
static int ref_order_block_done(RefOrderWalk *w, uint64_t idx, bool empty,
                                Error **errp)
{
    BDRVQcow2State *s = w->bs->opaque;
    uint64_t cs = s->g.cluster_size;

    if (w->write) {
        if (idx < w->size && w->table[idx]) {
            return bdrv_pwrite(w->bs->file, w->table[idx], w->block, cs, 0,
                               errp);
        }
        if (!empty) {
            error_setg(errp, "Refcount block %" PRIu64 " has no cluster",
                       idx);
            return -1;
        }
        return 0;
    }
    if (empty) {
        return 0;
    }
    if (idx >= w->size) {
        uint64_t n = ROUND_UP(idx + 1, cs / sizeof(uint64_t));

        if (n > QCOW2_MAX_REFTABLE_BYTES / sizeof(uint64_t)) {
            error_setg(errp, "This operation would make the refcount table "
                       "grow beyond the maximum size supported by QEMU, "
                       "aborting");
            return -1;
        }
        w->table = g_renew(uint64_t, w->table, n);
        memset(w->table + w->size, 0, (n - w->size) * sizeof(uint64_t));
        w->size = n;
    }
    if (!w->table[idx]) {
        uint64_t off;

        if (qcow2_alloc_clusters(w->bs, 1, &off, errp) < 0) {
            error_prepend(errp, "Failed to allocate refblock: ");
            return -1;
        }
        w->table[idx] = off;
        w->allocated = true;
    }
    return 0;
}

/* One walk over the old refcounts (walk index of total, for progress). */
static int ref_order_walk(RefOrderWalk *w, uint64_t index, uint64_t total,
                          Error **errp)
{
    BlockDriverState *bs = w->bs;
    BDRVQcow2State *s = bs->opaque;
    unsigned old_order = s->header.refcount_order;
    uint64_t cs = s->g.cluster_size;
    uint64_t per_old = (cs * 8) >> old_order;
    uint64_t n = s->reftable_entries;
    g_autofree uint8_t *old = g_malloc(cs);
    uint64_t idx = 0, in = 0;
    bool empty = true;

    if (w->write) {
        memset(w->block, 0, cs);
    }
    for (uint64_t t = 0; t < n; t++) {
        if (w->status_cb) {
            w->status_cb(bs, index * n + t, total * n, w->cb_opaque);
        }
        /* The old block as it is now: the allocations so far included. */
        if (qcow2_refcount_flush(bs, errp) < 0) {
            return -1;
        }
        if (!s->reftable[t]) {
            memset(old, 0, cs);
        } else if (bdrv_pread(bs->file, s->reftable[t], old, cs, errp) < 0) {
            return -1;
        }
        for (uint64_t i = 0; i < per_old; i++) {
            uint64_t v = qcow2_refcount_block_entry(old, i, old_order);

            if (in == w->per_block) {
                if (ref_order_block_done(w, idx, empty, errp) < 0) {
                    return -1;
                }
                idx++;
                in = 0;
                empty = true;
                if (w->write) {
                    memset(w->block, 0, cs);
                }
            }
            if (w->order < 6 && (v >> (1u << w->order))) {
                error_setg(errp, "Cannot decrease refcount entry width to "
                           "%u bits: Cluster at offset %#" PRIx64 " has a "
                           "refcount of %" PRIu64, 1u << w->order,
                           (t * per_old + i) << s->g.cluster_bits, v);
                return -1;
            }
            if (w->write) {
                qcow2_refcount_block_set(w->block, in, w->order, v);
            }
            in++;
            empty = empty && !v;
        }
    }
    if (in && ref_order_block_done(w, idx, empty, errp) < 0) {
        return -1;
    }
    if (w->status_cb) {
        w->status_cb(bs, (index + 1) * n, total * n, w->cb_opaque);
    }
    return 0;
}

/*
 * Rewrite the refcount structures with entries of 1 << order bits
 * (QEMU's qcow2_change_refcount_order), crash-safe: the new blocks and
 * table are allocated in (and counted by) the old structures, written
 * and synced while the header still names the old ones; then the header
 * switches to them in one write of its cluster, synced; then the old
 * blocks and table are freed in the new structures. A crash before the
 * switch leaks the new clusters, after it the old ones: never a count
 * too low. A refcount the new width cannot hold fails it first.
 */
static int qcow2_change_refcount_order(BlockDriverState *bs, unsigned order,
                                       BdrvAmendStatusCB *status_cb,
                                       void *cb_opaque, Error **errp)
{
    BDRVQcow2State *s = bs->opaque;
    Qcow2Header *h = &s->header;
    uint64_t cs = s->g.cluster_size;
    g_autofree uint8_t *block = g_malloc(cs);
    g_autofree uint64_t *be = NULL;
    RefOrderWalk w = {
        .bs = bs,
        .order = order,
        .per_block = (cs * 8) >> order,
        .block = block,
        .status_cb = status_cb,
        .cb_opaque = cb_opaque,
    };
    Qcow2Header saved;
    uint64_t table_off = 0, table_size = 0, walk = 0;
    uint64_t *old_table;
    uint64_t old_entries;
    int ret = -1;

    if (qcow2_alloc_reuse_begin(bs, errp) < 0) {
        return -1;
    }
    do {
        w.allocated = false;
        if (ref_order_walk(&w, walk, MAX(walk + 2, 3), errp) < 0) {
            goto fail;
        }
        walk++;
        if (w.allocated) {
            /* A table for what the blocks are now (the old one freed). */
            if (table_off &&
                qcow2_update_refcounts(bs, table_off,
                                       table_size * sizeof(uint64_t), -1,
                                       errp) < 0) {
                table_off = 0;
                goto fail;
            }
            table_off = 0;
            if (qcow2_alloc_clusters(bs, w.size * sizeof(uint64_t) / cs,
                                     &table_off, errp) < 0) {
                error_prepend(errp, "Failed to allocate the new reftable: ");
                table_off = 0;
                goto fail;
            }
            table_size = w.size;
        }
    } while (w.allocated);
    if (!table_off || table_size != w.size) {
        error_setg(errp, "The new refcount structures are incomplete");
        goto fail;
    }
    w.write = true;
    if (ref_order_walk(&w, walk, walk + 1, errp) < 0) {
        goto fail;
    }
    be = g_new(uint64_t, w.size);
    for (uint64_t i = 0; i < w.size; i++) {
        be[i] = GUINT64_TO_BE(w.table[i]);
    }
    /* All of it, and its counts in the old structures, before the switch. */
    if (bdrv_pwrite(bs->file, table_off, be, w.size * sizeof(uint64_t), 0,
                    errp) < 0 ||
        qcow2_refcount_flush(bs, errp) < 0 ||
        bdrv_flush(bs->file, errp) < 0) {
        goto fail;
    }
    /* (The old table may have moved meanwhile, grown for the new blocks.) */
    saved = *h;
    h->refcount_order = order;
    h->refcount_table_offset = table_off;
    h->refcount_table_clusters = w.size * sizeof(uint64_t) / cs;
    if (qcow2_rewrite_header(bs, errp) < 0 ||
        bdrv_flush(bs->file, errp) < 0) {
        /* Which header the disk holds is unknown: the new one may be. */
        *h = saved;
        error_prepend(errp, "Failed to update the qcow2 header: ");
        qcow2_alloc_reuse_end(bs);
        g_free(w.table);
        return -1;
    }
    /* The new structures from here on, in memory too. */
    old_table = s->reftable;
    old_entries = s->reftable_entries;
    s->reftable = w.table;
    s->reftable_entries = w.size;
    s->rb.valid = false;
    s->rb.lo = s->rb.hi = 0;
    /* The old ones are leaks now: freed (a failure leaves them leaked). */
    ret = 0;
    for (uint64_t i = 0; i < old_entries && ret == 0; i++) {
        if (old_table[i]) {
            ret = qcow2_update_refcounts(bs, old_table[i], cs, -1, errp);
        }
    }
    if (ret == 0) {
        ret = qcow2_update_refcounts(bs, saved.refcount_table_offset,
                                     (uint64_t)saved.refcount_table_clusters *
                                     cs, -1, errp);
    }
    g_free(old_table);
    qcow2_alloc_reuse_end(bs);
    return ret;

fail:
    /* Nothing names the new clusters: free them in the old structures. */
    for (uint64_t i = 0; i < w.size; i++) {
        if (w.table[i]) {
            qcow2_update_refcounts(bs, w.table[i], cs, -1, NULL);
        }
    }
    if (table_off) {
        qcow2_update_refcounts(bs, table_off, table_size * sizeof(uint64_t),
                               -1, NULL);
    }
    g_free(w.table);
    qcow2_alloc_reuse_end(bs);
    return -1;
}

/* ---- Size */

/* Free the clusters of [offset, offset + n clusters). */
static int qcow2_free_clusters(BlockDriverState *bs, uint64_t offset,
                               uint64_t n, Error **errp)
{
    BDRVQcow2State *s = bs->opaque;

    return n ? qcow2_update_refcounts(bs, offset, n * s->g.cluster_size, -1,
                                      errp) : 0;
}

/* Size, L1 size and L1 offset: header bytes 24 to 47, in one write. */
static int qcow2_write_size_fields(BlockDriverState *bs, Error **errp)
{
    BDRVQcow2State *s = bs->opaque;
    const Qcow2Header *h = &s->header;
    uint8_t buf[24];

    stq_be_p(buf, h->size);
    stl_be_p(buf + 8, h->crypt_method);
    stl_be_p(buf + 12, h->l1_size);
    stq_be_p(buf + 16, h->l1_table_offset);
    return bdrv_pwrite(bs->file, 24, buf, sizeof(buf), 0, errp);
}

static int qcow2_grow(BlockDriverState *bs, uint64_t size, Error **errp)
{
    BDRVQcow2State *s = bs->opaque;
    Qcow2Header *h = &s->header;
    uint64_t cs = s->g.cluster_size;
    uint64_t need = qcow2_l1_entries_needed(&s->g, size);
    uint64_t old_off = h->l1_table_offset;
    uint64_t old_clusters = DIV_ROUND_UP_U64(h->l1_size * 8, cs);
    uint64_t clusters, off;
    g_autofree uint8_t *table = NULL;

    if (need * 8 > QCOW2_MAX_L1_BYTES) {
        error_setg(errp, "The new size needs an L1 table larger than %d "
                   "bytes", QCOW2_MAX_L1_BYTES);
        return -1;
    }
    if (need > h->l1_size) {
        /* A new, larger L1 table at the end of the file, then the header. */
        clusters = DIV_ROUND_UP_U64(need * 8, cs);
        table = g_malloc0(clusters * cs);
        for (uint64_t i = 0; i < s->l1_size; i++) {
            stq_be_p(table + i * 8, s->l1_table[i]);
        }
        /* Its refcounts on disk too before the header points at it. */
        if (qcow2_alloc_clusters(bs, clusters, &off, errp) < 0 ||
            bdrv_pwrite(bs->file, off, table, clusters * cs, 0,
                        errp) < 0 ||
            qcow2_refcount_flush(bs, errp) < 0 ||
            bdrv_flush(bs->file, errp) < 0) {
            return -1;
        }
        s->l1_table = g_renew(uint64_t, s->l1_table, need);
        memset(s->l1_table + s->l1_size, 0,
               (need - s->l1_size) * sizeof(uint64_t));
        h->l1_size = need;
        h->l1_table_offset = off;
    }
    h->size = size;
    if (qcow2_write_size_fields(bs, errp) < 0) {
        return -1;
    }
    s->l1_size = MAX(s->l1_size, need);
    if (table && old_off) {
        if (bdrv_flush(bs->file, errp) < 0 ||
            qcow2_free_clusters(bs, old_off, old_clusters, errp) < 0) {
            return -1;
        }
    }
    return 0;
}

/* Whether guest [start, end) maps nothing but holes and zero clusters. */
static int qcow2_range_is_free(BlockDriverState *bs, uint64_t start,
                               uint64_t end, bool *free_, Error **errp)
{
    *free_ = true;
    while (start < end) {
        Qcow2Extent ext;

        if (qcow2_get_extent(bs, start, end - start, &ext, errp) < 0) {
            return -1;
        }
        if (ext.type == QCOW2_SC_NORMAL || ext.type == QCOW2_SC_COMPRESSED) {
            *free_ = false;
            return 0;
        }
        start += ext.bytes;
    }
    return 0;
}

static int qcow2_shrink(BlockDriverState *bs, uint64_t size, Error **errp)
{
    BDRVQcow2State *s = bs->opaque;
    Qcow2Header *h = &s->header;
    uint64_t cs = s->g.cluster_size;
    uint64_t need = qcow2_l1_entries_needed(&s->g, size);
    uint64_t old_l1 = s->l1_size;
    bool free_;
    uint8_t zero[8] = { 0 };

    /*
     * --shrink over data drops it, as QEMU does: the clusters wholly past
     * the new end are unallocated and freed (the one the end falls in
     * keeps its data; a grow zeroes its tail: qcow2_zero_grown_tail()).
     * Entries of an external data file are not ours to free.
     */
    if (qcow2_range_is_free(bs, ROUND_UP(size, cs), h->size, &free_,
                            errp) < 0) {
        return -1;
    }
    if (!free_ && s->g.has_data_file) {
        error_setg(errp, "Cannot shrink an image with an external data file "
                   "over data: guest bytes past %" G_GUINT64_FORMAT " are "
                   "allocated", size);
        return -1;
    }
    /*
     * Every entry past the new end is cleared, zero ones too (QEMU's full
     * discard): a later grow starts from unallocated clusters.
     */
    if (qcow2_unmap_range_locked(bs, ROUND_UP(size, cs), h->size,
                                 errp) < 0) {
        return -1;
    }
    h->size = size;
    h->l1_size = need;
    if (qcow2_write_size_fields(bs, errp) < 0 ||
        bdrv_flush(bs->file, errp) < 0) {
        return -1;
    }
    /* L2 tables past the new L1 size: unpointed, then freed. */
    for (uint64_t i = need; i < old_l1; i++) {
        uint64_t l2 = s->l1_table[i] & QCOW2_OFFSET_MASK;

        if (!l2) {
            continue;
        }
        if (bdrv_pwrite(bs->file, h->l1_table_offset + i * 8, zero, 8, 0,
                        errp) < 0) {
            return -1;
        }
        s->l1_table[i] = 0;
        g_mutex_lock(&s->lock);
        qcow2_cache_drop(s->l2_cache, l2);
        g_mutex_unlock(&s->lock);
        if (qcow2_free_clusters(bs, l2, 1, errp) < 0) {
            return -1;
        }
    }
    s->l1_size = need;
    /* The L1 table's clusters past what need entries take: freed too. */
    return qcow2_free_clusters(bs, h->l1_table_offset +
                               DIV_ROUND_UP_U64(need * 8, cs) * cs,
                               DIV_ROUND_UP_U64(old_l1 * 8, cs) -
                               DIV_ROUND_UP_U64(need * 8, cs), errp);
}

/*
 * Grown from old_size, which ends inside an allocated cluster: the bytes
 * of that cluster past it may hold data a shrink left (or anything a
 * writer put there), which would now show: written as zeroes, as QEMU
 * does (qemu-iotests 292).
 */
static int qcow2_zero_grown_tail(BlockDriverState *bs, uint64_t old_size,
                                 uint64_t size, Error **errp)
{
    BDRVQcow2State *s = bs->opaque;
    uint64_t cs = s->g.cluster_size;
    /* Extended L2: the subclusters past it read zeroes or are hidden. */
    uint64_t unit = s->g.extended_l2 ? s->g.subcluster_size : cs;
    uint64_t end = MIN(ROUND_UP(old_size, unit), size);
    g_autofree uint8_t *zeroes = NULL;
    Qcow2Extent ext;

    if (old_size % unit == 0) {
        return 0;
    }
    if (qcow2_get_extent(bs, old_size, end - old_size, &ext, errp) < 0) {
        return -1;
    }
    if (ext.type != QCOW2_SC_NORMAL && ext.type != QCOW2_SC_COMPRESSED) {
        return 0;
    }
    zeroes = g_malloc0(end - old_size);
    return qcow2_pwrite(bs, old_size, zeroes, end - old_size, 0, errp);
}

/*
 * What a grow from old_size puts in the new area, in QEMU's order: the
 * old end's (sub)cluster tail zeroed; with a backing file longer than
 * old_size, the new area hidden from it (zeroes where it is not
 * preallocated, v3; QEMU fails on v2 images there, we leave them as
 * before); preallocation maps (metadata) or also writes (falloc, full)
 * host clusters for [old cluster, new end).
 */
static int qcow2_fill_grown(BlockDriverState *bs, uint64_t old_size,
                            uint64_t size, PreallocMode prealloc,
                            Error **errp)
{
    BDRVQcow2State *s = bs->opaque;
    uint64_t cs = s->g.cluster_size;
    uint64_t unit = s->g.extended_l2 ? s->g.subcluster_size : cs;
    bool hide = false;

    if (bs->backing && s->header.version >= 3) {
        int64_t blen = bdrv_getlength(bs->backing, errp);

        if (blen < 0) {
            return -1;
        }
        hide = (uint64_t)blen > old_size;
    }
    /*
     * A partial (sub)cluster at the old end, over a backing file: its head
     * must keep reading the backing file and its tail must read zeroes,
     * so the tail is written (COW), allocated or not (with or without
     * preallocation: a plain grow of a 500 KiB image over a 1 MiB
     * backing file showed the backing bytes from 500 to 512 KiB).
     */
    if (hide && old_size % unit) {
        uint64_t end = MIN(ROUND_UP(old_size, unit), size);
        g_autofree uint8_t *zeroes = g_malloc0(end - old_size);

        if (qcow2_pwrite(bs, old_size, zeroes, end - old_size, 0,
                         errp) < 0) {
            return -1;
        }
    }
    if (qcow2_zero_grown_tail(bs, old_size, size, errp) < 0) {
        return -1;
    }
    if (prealloc != PREALLOC_MODE_OFF &&
        qcow2_prealloc_range(bs, ROUND_DOWN(old_size, cs), ROUND_UP(size, cs),
                             prealloc == PREALLOC_MODE_METADATA ?
                             PREALLOC_MODE_OFF : prealloc,
                             hide && s->g.extended_l2 &&
                             prealloc != PREALLOC_MODE_METADATA ?
                             ROUND_UP(old_size, unit) : UINT64_MAX,
                             errp) < 0) {
        return -1;
    }
    if (hide && qcow2_hide_backing_range(bs, ROUND_UP(old_size, unit), size,
                                         errp) < 0) {
        return -1;
    }
    return 0;
}

/*
 * Grown from old_size with an external data file: with data_file_raw the
 * new clusters are mapped to their place in it (QEMU preallocates their
 * metadata: the data file must stay the whole disk); the data file grows
 * to the new size (never shrinks: QEMU's truncate is not exact there).
 */
static int qcow2_grow_data_file(BlockDriverState *bs, uint64_t old_size,
                                uint64_t size, Error **errp)
{
    BDRVQcow2State *s = bs->opaque;
    uint64_t cs = s->g.cluster_size;
    bool raw = s->header.autoclear_features & QCOW2_AUTOCLEAR_DATA_FILE_RAW;
    uint64_t want = raw ? ROUND_UP(size, cs) : size;
    int64_t len;

    if (raw && qcow2_map_raw_data_file(bs, ROUND_UP(old_size, cs),
                                       ROUND_UP(size, cs), errp) < 0) {
        return -1;
    }
    len = bdrv_getlength_exact(s->data_file, errp);
    if (len < 0) {
        return -1;
    }
    if ((uint64_t)len >= want) {
        return 0;
    }
    return bdrv_truncate(s->data_file, want, PREALLOC_MODE_OFF, errp);
}

int qcow2_truncate(BlockDriverState *bs, uint64_t size, PreallocMode prealloc,
                   Error **errp)
{
    BDRVQcow2State *s = bs->opaque;
    uint64_t old_size = s->header.size;
    int ret;

    if (size % BDRV_SECTOR_SIZE) {
        error_setg(errp, "The new size must be a multiple of %d",
                   BDRV_SECTOR_SIZE);
        return -1;
    }
    if (prealloc != PREALLOC_MODE_OFF &&
        (s->g.has_data_file || s->crypto)) {
        error_setg(errp, "Preallocation is not supported when resizing a "
                   "qcow2 image with %s in qemu-img-lite",
                   s->crypto ? "encryption" : "an external data file");
        return -1;
    }
    if (size == s->header.size) {
        return 0;
    }
    /* The bitmaps follow the size, as QEMU's (their bits in memory). */
    if (qcow2_bitmaps_check_resize(bs, errp) < 0) {
        return -1;
    }
    g_mutex_lock(&s->alloc_lock);
    /* Tables are read from and written to the file below: all of it there. */
    if (qcow2_flush_metadata_locked(bs, errp) < 0) {
        ret = -1;
    } else if (size > s->header.size) {
        ret = qcow2_grow(bs, size, errp);
    } else {
        ret = qcow2_shrink(bs, size, errp);
    }
    g_mutex_unlock(&s->alloc_lock);
    if (ret == 0 && old_size < size && s->g.has_data_file) {
        ret = qcow2_grow_data_file(bs, old_size, size, errp);
    }
    if (ret == 0 && old_size < size) {
        ret = qcow2_fill_grown(bs, old_size, size, prealloc, errp);
    }
    if (ret == 0) {
        qcow2_bitmaps_resize(bs, size);
    }
    return ret;
}

/* ---- amend */

static int qcow2_amend_luks(BlockDriverState *bs, GHashTable *eopts,
                            bool force, Error **errp)
{
    BDRVQcow2State *s = bs->opaque;
    QCryptoBlockAmendOptions aopts;
    g_autofree char *unknown = NULL;
    int ret = -1;

    if (s->header.crypt_method != QCOW2_CRYPT_LUKS) {
        error_setg(errp, "The encrypt.* options amend the key slots of a "
                   "LUKS encrypted image; this image is %s",
                   s->header.crypt_method ? "AES encrypted" : "not encrypted");
        return -1;
    }
    if (block_crypto_take_luks_amend_opts(eopts, &aopts, errp) < 0) {
        goto out;
    }
    unknown = qemu_opts_first_key(eopts);
    if (unknown) {
        error_setg(errp, "Invalid parameter 'encrypt.%s'", unknown);
        goto out;
    }
    ret = qcrypto_block_amend_options(qcow2_crypto_get_block(s->crypto),
                                      qcow2_crypto_hdr_read,
                                      qcow2_crypto_hdr_write,
                                      qcow2_crypto_hdr_flush, s->crypto,
                                      &aopts, force, errp);
out:
    block_crypto_clear_luks_amend_opts(&aopts);
    return ret;
}

/*
 * rebase: a new backing file name and format in the header (one write
 * of the first cluster: the old header or the new), the bitmaps and
 * external data file extensions kept. With data_file_raw the data file
 * alone is the disk: no backing file (QEMU's -EINVAL).
 */
int qcow2_change_backing_file(BlockDriverState *bs, const char *backing_file,
                              const char *backing_fmt, Error **errp)
{
    BDRVQcow2State *s = bs->opaque;
    char *old_file = s->backing_file, *old_fmt = s->ext.backing_format;

    if (backing_file &&
        (s->header.autoclear_features & QCOW2_AUTOCLEAR_DATA_FILE_RAW)) {
        error_setg(errp, "Invalid argument");
        return -1;
    }
    if (backing_file && strlen(backing_file) > QCOW2_MAX_BACKING_NAME) {
        error_setg(errp, "No space left in the file header");
        return -1;
    }
    if (qcow2_flush_metadata(bs, errp) < 0) {
        return -1;
    }
    s->backing_file = g_strdup(backing_file);
    s->ext.backing_format = g_strdup(backing_file ? backing_fmt : NULL);
    if (qcow2_rewrite_header(bs, errp) < 0) {
        g_free(s->backing_file);
        g_free(s->ext.backing_format);
        s->backing_file = old_file;
        s->ext.backing_format = old_fmt;
        return -1;
    }
    g_free(old_file);
    g_free(old_fmt);
    return 0;
}

/*
 * amend's data_file (the name in the header, for an image that has a
 * data file) and data_file_raw (may be turned off only: on, the data file
 * would have to hold the whole disk already), as QEMU takes them.
 */
static int qcow2_amend_check_data_file(BlockDriverState *bs,
                                       const char *data_file, bool raw,
                                       Error **errp)
{
    BDRVQcow2State *s = bs->opaque;

    if (data_file && !s->g.has_data_file) {
        error_setg(errp, "data-file can only be set for images that use an "
                   "external data file");
        return -1;
    }
    if (data_file && strlen(data_file) > QCOW2_MAX_EXT_STRING) {
        error_setg(errp, "Data file name too long");
        return -1;
    }
    if (raw && !(s->header.autoclear_features &
                 QCOW2_AUTOCLEAR_DATA_FILE_RAW)) {
        error_setg(errp, "data-file-raw cannot be set on existing images");
        return -1;
    }
    return 0;
}

int qcow2_amend(BlockDriverState *bs, GHashTable *opts, bool force,
                BdrvAmendStatusCB *status_cb, void *cb_opaque, Error **errp)
{
    static const char *const create_only[] = {
        "cluster_size", "preallocation", "extended_l2", "compression_type",
        "encrypt.format", "encryption", "backing_file", "backing_fmt",
    };
    BDRVQcow2State *s = bs->opaque;
    g_autofree char *compat = qemu_opt_take(opts, "compat");
    g_autoptr(GHashTable) eopts = NULL;
    g_autofree char *unknown = NULL;
    Qcow2Header saved = s->header;
    uint64_t size = 0, refcount_bits;
    bool has_size = g_hash_table_contains(opts, "size");
    bool has_lazy = g_hash_table_contains(opts, "lazy_refcounts");
    bool lazy = false, downgrade = false;
    uint32_t version = s->header.version;
    g_autofree char *data_file = qemu_opt_take(opts, "data_file");
    bool was_raw = s->header.autoclear_features &
                   QCOW2_AUTOCLEAR_DATA_FILE_RAW;
    bool has_raw = g_hash_table_contains(opts, "data_file_raw");
    bool raw = was_raw;

    for (size_t i = 0; i < G_N_ELEMENTS(create_only); i++) {
        if (g_hash_table_contains(opts, create_only[i])) {
            error_setg(errp, "Invalid parameter '%s'\nThis option is only "
                       "supported for image creation", create_only[i]);
            return -1;
        }
    }
    eopts = qemu_opts_extract_prefix(opts, "encrypt");
    if (qemu_opt_take_size(opts, "size", 0, &size, errp) < 0 ||
        qemu_opt_take_bool(opts, "lazy_refcounts", false, &lazy, errp) < 0 ||
        qcow2_opt_take_refcount_bits(opts, 1u << s->header.refcount_order,
                                     &refcount_bits, errp) < 0 ||
        qemu_opt_take_bool(opts, "data_file_raw", was_raw, &raw,
                           errp) < 0) {
        return -1;
    }
    unknown = qemu_opts_first_key(opts);
    if (unknown) {
        error_setg(errp, "Invalid parameter '%s'", unknown);
        return -1;
    }
    if (compat) {
        if (g_str_equal(compat, "0.10") || g_str_equal(compat, "v2")) {
            version = 2;
        } else if (g_str_equal(compat, "1.1") || g_str_equal(compat, "v3")) {
            version = 3;
        } else {
            error_setg(errp, "Parameter 'version' does not accept value "
                       "'%s'", compat);
            return -1;
        }
    }
    if (qcow2_amend_check_data_file(bs, data_file, raw, errp) < 0) {
        return -1;
    }
    if (has_lazy && lazy && version < 3) {
        error_setg(errp, "Lazy refcounts only supported with compatibility "
                   "level 1.1 and above (use version=v3 or greater)");
        return -1;
    }
    if (refcount_bits != 1u << s->header.refcount_order && version < 3 &&
        refcount_bits != 16) {
        error_setg(errp, "Refcount widths other than 16 bits require "
                   "compatibility level 1.1 or above (use compat=1.1 or "
                   "greater)");
        return -1;
    }
    if (g_hash_table_size(eopts) &&
        qcow2_amend_luks(bs, eopts, force, errp) < 0) {
        return -1;
    }
    /* What this process wrote is in the file before the header changes. */
    if (qcow2_flush_metadata(bs, errp) < 0) {
        return -1;
    }
    /*
     * QEMU's order: an upgrade first, then the refcount width, the size,
     * and a downgrade last (it needs the width of version 2).
     */
    if (version < s->header.version) {
        downgrade = true;
        version = s->header.version;
    }
    if ((compat && !downgrade) || has_lazy || data_file || has_raw) {
        if (qcow2_amend_compat(bs, version, errp) < 0) {
            s->header = saved;
            return -1;
        }
        if (!raw) {
            s->header.autoclear_features &= ~QCOW2_AUTOCLEAR_DATA_FILE_RAW;
        }
        if (data_file) {
            /* Empty: no name (each open then names the file itself). */
            g_free(s->ext.data_file);
            s->ext.data_file = *data_file ? g_steal_pointer(&data_file)
                                          : NULL;
        }
        if (has_lazy && version >= 3) {
            if (lazy) {
                s->header.compatible_features |= QCOW2_COMPAT_LAZY_REFCOUNTS;
            } else {
                s->header.compatible_features &=
                    ~QCOW2_COMPAT_LAZY_REFCOUNTS;
            }
        }
        if (qcow2_rewrite_header(bs, errp) < 0) {
            s->header = saved;
            return -1;
        }
    }
    if (refcount_bits != 1u << s->header.refcount_order &&
        qcow2_change_refcount_order(bs, __builtin_ctzll(refcount_bits),
                                    status_cb, cb_opaque, errp) < 0) {
        return -1;
    }
    if (has_size && qcow2_truncate(bs, size, PREALLOC_MODE_OFF, errp) < 0) {
        return -1;
    }
    if (downgrade) {
        saved = s->header;
        if (qcow2_amend_compat(bs, 2, errp) < 0 ||
            qcow2_rewrite_header(bs, errp) < 0) {
            s->header = saved;
            return -1;
        }
    }
    return 0;
}
