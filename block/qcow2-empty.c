/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Emptying a qcow2 image (commit's bdrv_make_empty()): every cluster
 * unallocated again, so that the image reads its backing file. Two ways,
 * as QEMU's qcow2_make_empty() chooses:
 *
 * - An image that holds nothing but guest data (version 3, no internal
 *   snapshots, persistent bitmaps, LUKS header or external data file,
 *   and an L1 table that one refcount block can count with three more
 *   clusters) is reset to the layout of a new image: the header (cluster
 *   0, untouched), the refcount table (1), one refcount block (2), the L1
 *   table (3..) and nothing after them. The refcounts are wrong from the
 *   first write to the last, so the dirty bit is set throughout:
 *
 *     1. the dirty bit is set (written and synced);
 *     2. the L1 table is zeroed                   [l1_update]
 *     3. clusters 1 .. 2 + L1 clusters are zeroed [empty_image_prepare]
 *     4. the header names the new L1 and refcount table (synced)
 *                                                 [l1_update, reftable_update]
 *     5. the refcount block is entered in the table (synced)
 *                                                 [refblock_alloc]
 *     6. the first clusters are counted, the dirty bit cleared and the
 *        file cut after the L1 table.
 *
 *   In brackets, the blkdebug events raised before each step, QEMU's at
 *   the same points: a fault injected there leaves the file as QEMU's
 *   would (qemu-iotests 098), dirty, for "check -r all" to repair. After
 *   a failure from 2 until the clusters are counted, the node is broken:
 *   the file no longer matches what is in memory, so nothing more goes
 *   through it (QEMU ejects the node).
 *
 * - Any other image: the L2 entry of every cluster is cleared and its
 *   host cluster freed and discarded in the file (QEMU's discard of the
 *   whole disk); the L2 tables stay.
 */
#include <errno.h>

#include "block/qcow2.h"

/*
 * Spec, "Header": l1_table_offset (bytes 40-47), then
 * refcount_table_offset (48-55) and refcount_table_clusters (56-59).
 */
#define QCOW2_HEADER_L1_TABLE_OFFSET 40
#define QCOW2_HEADER_L1_REFTABLE_LEN 20

int qcow2_check_usable(BlockDriverState *bs, Error **errp)
{
    BDRVQcow2State *s = bs->opaque;

    if (!s->broken) {
        return 0;
    }
    error_setg_errno(errp, ENOMEDIUM, "qcow2 image '%s' is unusable after "
                     "a failed emptying (run 'qemu-img check -r all')",
                     bdrv_get_filename(bs->file));
    return -1;
}

/* A write to the file, then a sync (QEMU's bdrv_pwrite_sync()). */
static int qcow2_empty_write_sync(BlockDriverState *bs, uint64_t offset,
                                  const void *buf, size_t len, Error **errp)
{
    return bdrv_pwrite(bs->file, offset, buf, len, 0, errp) < 0 ||
           bdrv_flush(bs->file, errp) < 0 ? -1 : 0;
}

/* The new layout's L1 table, refcount table and refcount block in memory. */
static void qcow2_empty_reset_state(BDRVQcow2State *s, uint64_t cs)
{
    if (s->l1_table) {
        memset(s->l1_table, 0, s->l1_size * sizeof(uint64_t));
    }
    g_mutex_lock(&s->lock);
    qcow2_cache_clear(s->l2_cache);
    g_mutex_unlock(&s->lock);
    s->header.l1_table_offset = 3 * cs;
    s->header.refcount_table_offset = cs;
    s->header.refcount_table_clusters = 1;
    g_free(s->reftable);
    s->reftable_entries = cs / sizeof(uint64_t);
    s->reftable = g_new0(uint64_t, s->reftable_entries);
    s->rb.valid = false;
    s->rb.lo = s->rb.hi = 0;
    s->next_free = 0;
    s->compressed_next = 0;
    s->prealloc_checked = false;
}

/* Steps 1-6 above. alloc_lock held. */
static int qcow2_empty_completely(BlockDriverState *bs, uint64_t l1_clusters,
                                  Error **errp)
{
    BDRVQcow2State *s = bs->opaque;
    uint64_t cs = s->g.cluster_size;
    uint64_t end = (3 + l1_clusters) * cs, first;
    uint8_t hdr[QCOW2_HEADER_L1_REFTABLE_LEN], entry[8];

    /* Nothing pending is left to land on the new layout. */
    if (qcow2_flush_metadata_locked(bs, errp) < 0 ||
        (!s->dirty && qcow2_mark_dirty(bs, true, errp) < 0)) {
        return -1;
    }
    bdrv_debug_event(bs->file, "l1_update");
    if (bdrv_pwrite_zeroes(bs->file, s->header.l1_table_offset,
                           l1_clusters * cs, 0, errp) < 0) {
        goto broken;
    }
    bdrv_debug_event(bs->file, "empty_image_prepare");
    if (bdrv_pwrite_zeroes(bs->file, cs, (2 + l1_clusters) * cs, 0,
                           errp) < 0) {
        goto broken;
    }
    bdrv_debug_event(bs->file, "l1_update");
    bdrv_debug_event(bs->file, "reftable_update");
    stq_be_p(hdr, 3 * cs);
    stq_be_p(hdr + 8, cs);
    stl_be_p(hdr + 16, 1);
    if (qcow2_empty_write_sync(bs, QCOW2_HEADER_L1_TABLE_OFFSET, hdr,
                               sizeof(hdr), errp) < 0) {
        goto broken;
    }
    qcow2_empty_reset_state(s, cs);
    bdrv_debug_event(bs->file, "refblock_alloc");
    stq_be_p(entry, 2 * cs);
    if (qcow2_empty_write_sync(bs, cs, entry, sizeof(entry), errp) < 0) {
        goto broken;
    }
    s->reftable[0] = 2 * cs;
    if (qcow2_alloc_clusters(bs, 3 + l1_clusters, &first, errp) < 0 ||
        qcow2_refcount_flush(bs, errp) < 0) {
        goto broken;
    }
    g_assert(first == 0);
    /* The refcounts on disk are right again. */
    if (qcow2_mark_dirty(bs, false, errp) < 0 ||
        bdrv_truncate(bs->file, end, PREALLOC_MODE_OFF, errp) < 0) {
        return -1;
    }
    s->file_size = end;
    return 0;

broken:
    s->broken = true;
    return -1;
}

/* The second way: every cluster discarded. alloc_lock held. */
static int qcow2_empty_by_discard(BlockDriverState *bs, Error **errp)
{
    BDRVQcow2State *s = bs->opaque;

    if (s->header.nb_snapshots) {
        error_setg(errp, "Cannot empty an image that has internal "
                   "snapshots");
        return -1;
    }
    if (s->g.has_data_file) {
        error_setg(errp, "Cannot empty an image with an external data file");
        return -1;
    }
    return qcow2_unmap_range_locked(bs, 0, s->header.size, errp) < 0 ||
           qcow2_flush_metadata_locked(bs, errp) < 0 ? -1 : 0;
}

int qcow2_make_empty(BlockDriverState *bs, Error **errp)
{
    BDRVQcow2State *s = bs->opaque;
    const Qcow2Header *h = &s->header;
    uint64_t cs = s->g.cluster_size;
    uint64_t l1_clusters = ROUND_UP((uint64_t)h->l1_size * sizeof(uint64_t),
                                    cs) / cs;
    uint64_t refs_per_block = (cs * 8) >> h->refcount_order;
    int ret;

    if (qcow2_check_usable(bs, errp) < 0) {
        return -1;
    }
    g_mutex_lock(&s->alloc_lock);
    if (h->version >= 3 && !h->nb_snapshots && !s->ext.nb_bitmaps &&
        3 + l1_clusters <= refs_per_block &&
        h->crypt_method != QCOW2_CRYPT_LUKS && !s->g.has_data_file) {
        ret = qcow2_empty_completely(bs, l1_clusters, errp);
    } else {
        ret = qcow2_empty_by_discard(bs, errp);
    }
    g_mutex_unlock(&s->alloc_lock);
    return ret;
}
