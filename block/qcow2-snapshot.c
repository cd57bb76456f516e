/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * qcow2 internal snapshots (spec, "Snapshots"): the snapshot table, and
 * create / goto / delete, which move reference counts between the active
 * L1 table's tree and the snapshots' copies of it.
 *
 * Every cluster a tree references is counted once per L1 table that
 * reaches it (an L2 table shared by two L1 tables counts its data
 * clusters twice). The COPIED flag of an active L1 or L2 entry says
 * "refcount 1: write in place"; without it the write path copies the
 * cluster first (qcow2-write.c). The orders below are QEMU's, so that a
 * crash leaves at most leaked clusters, never a count too low:
 *
 *   create: L1 copy written, refcounts of the active tree +1 and its
 *           COPIED flags cleared, all flushed; then the new table, and
 *           the header pointing at it.
 *   goto:   refcounts of the snapshot's tree +1, flushed; the active L1
 *           overwritten; the old tree's refcounts -1; flags fixed.
 *   delete: the table without the entry, then the header; the tree's
 *           refcounts -1, its L1 freed; flags fixed.
 *
 * These run alone on an image (qemu-img-lite snapshot), not beside
 * guest writes.
 */
#include <errno.h>
#include <stdlib.h>

#include "block/qcow2.h"

#define DIV_ROUND_UP_U64(n, d) ((n) / (d) + !!((n) % (d)))

/* ---- The table */

void qcow2_snapshots_free(Qcow2Snapshot *sn, uint32_t nb)
{
    for (uint32_t i = 0; sn && i < nb; i++) {
        g_free(sn[i].id);
        g_free(sn[i].name);
        g_free(sn[i].unknown_extra);
    }
    g_free(sn);
}

/* One entry at buf[*pos]; 1: it runs past len. */
static int qcow2_snapshot_parse_one(const uint8_t *buf, size_t len,
                                    uint64_t *pos, uint32_t index,
                                    uint64_t default_disk_size,
                                    Qcow2Snapshot *sn, Error **errp)
{
    const uint8_t *e;
    uint64_t p = ROUND_UP(*pos, 8);
    uint32_t extra;
    uint16_t id_len, name_len;

    if (p + QCOW2_SNAPSHOT_HEADER_LEN > len) {
        return 1;
    }
    e = buf + p;
    id_len = lduw_be_p(e + 12);
    name_len = lduw_be_p(e + 14);
    extra = ldl_be_p(e + 36);
    if (extra > QCOW2_SNAPSHOT_MAX_EXTRA) {
        error_setg(errp, "Too much extra metadata in snapshot table entry "
                   "%" PRIu32, index);
        error_append_hint(errp, "You can force-remove this extra metadata "
                          "with qemu-img check -r all\n");
        return -1;
    }
    if (p + QCOW2_SNAPSHOT_HEADER_LEN + extra + id_len + name_len > len) {
        return 1;
    }
    sn->l1_table_offset = ldq_be_p(e);
    sn->l1_size = ldl_be_p(e + 8);
    sn->date_sec = ldl_be_p(e + 16);
    sn->date_nsec = ldl_be_p(e + 20);
    sn->vm_clock_nsec = ldq_be_p(e + 24);
    sn->vm_state_size = ldl_be_p(e + 32);
    e += QCOW2_SNAPSHOT_HEADER_LEN;
    /* Spec, "Extra data": each field present if the size reaches it. */
    if (extra >= 8) {
        sn->vm_state_size = ldq_be_p(e);
    }
    sn->disk_size = extra >= 16 ? ldq_be_p(e + 8) : default_disk_size;
    sn->icount = extra >= 24 ? ldq_be_p(e + 16) : UINT64_MAX;
    if (extra > QCOW2_SNAPSHOT_EXTRA_LEN) {
        sn->unknown_extra_size = extra - QCOW2_SNAPSHOT_EXTRA_LEN;
        sn->unknown_extra = g_memdup2(e + QCOW2_SNAPSHOT_EXTRA_LEN,
                                      sn->unknown_extra_size);
    }
    e += extra;
    sn->id = g_strndup((const char *)e, id_len);
    sn->name = g_strndup((const char *)e + id_len, name_len);
    *pos = p + QCOW2_SNAPSHOT_HEADER_LEN + extra + id_len + name_len;
    return 0;
}

int qcow2_snapshots_parse(const uint8_t *buf, size_t len, uint32_t nb,
                          uint64_t default_disk_size, Qcow2Snapshot **out,
                          uint64_t *table_size, Error **errp)
{
    Qcow2Snapshot *sn = g_new0(Qcow2Snapshot, MAX(nb, 1));
    uint64_t pos = 0;

    *out = NULL;
    *table_size = 0;
    for (uint32_t i = 0; i < nb; i++) {
        int ret = qcow2_snapshot_parse_one(buf, len, &pos, i,
                                           default_disk_size, &sn[i], errp);

        if (ret == 1 && len >= QCOW2_SNAPSHOT_TABLE_MAX_BYTES) {
            error_setg(errp, "Snapshot table is too big");
            error_append_hint(errp, "You can force-remove all %" PRIu32
                              " overhanging snapshots with qemu-img check "
                              "-r all\n", nb - i);
            ret = -1;
        }
        if (ret) {
            qcow2_snapshots_free(sn, nb);
            return ret;
        }
    }
    if (pos > QCOW2_SNAPSHOT_TABLE_MAX_BYTES) {
        error_setg(errp, "Snapshot table is too big");
        qcow2_snapshots_free(sn, nb);
        return -1;
    }
    *out = sn;
    *table_size = pos;
    return 0;
}

uint8_t *qcow2_snapshots_serialize(const Qcow2Snapshot *sn, uint32_t nb,
                                   size_t *len)
{
    g_autoptr(GByteArray) out = g_byte_array_new();

    for (uint32_t i = 0; i < nb; i++) {
        uint8_t e[QCOW2_SNAPSHOT_HEADER_LEN + QCOW2_SNAPSHOT_EXTRA_LEN];
        size_t id_len = strlen(sn[i].id), name_len = strlen(sn[i].name);
        static const uint8_t pad[8];

        g_assert(id_len <= UINT16_MAX && name_len <= UINT16_MAX);
        g_byte_array_append(out, pad, ROUND_UP(out->len, 8) - out->len);
        stq_be_p(e, sn[i].l1_table_offset);
        stl_be_p(e + 8, sn[i].l1_size);
        stw_be_p(e + 12, id_len);
        stw_be_p(e + 14, name_len);
        stl_be_p(e + 16, sn[i].date_sec);
        stl_be_p(e + 20, sn[i].date_nsec);
        stq_be_p(e + 24, sn[i].vm_clock_nsec);
        /* A size the 32-bit field cannot hold: 0 there (spec). */
        stl_be_p(e + 32, sn[i].vm_state_size <= UINT32_MAX ?
                 sn[i].vm_state_size : 0);
        stl_be_p(e + 36, QCOW2_SNAPSHOT_EXTRA_LEN + sn[i].unknown_extra_size);
        stq_be_p(e + 40, sn[i].vm_state_size);
        stq_be_p(e + 48, sn[i].disk_size);
        stq_be_p(e + 56, sn[i].icount);
        g_byte_array_append(out, e, sizeof(e));
        if (sn[i].unknown_extra_size) {
            g_byte_array_append(out, sn[i].unknown_extra,
                                sn[i].unknown_extra_size);
        }
        g_byte_array_append(out, (const uint8_t *)sn[i].id, id_len);
        g_byte_array_append(out, (const uint8_t *)sn[i].name, name_len);
    }
    *len = out->len;
    return g_byte_array_free(g_steal_pointer(&out), FALSE);
}

int qcow2_read_snapshots(BlockDriverState *bs, Error **errp)
{
    BDRVQcow2State *s = bs->opaque;
    const Qcow2Header *h = &s->header;
    size_t window = 64 * 1024;
    int ret;

    if (!h->nb_snapshots) {
        return 0;
    }
    if (qcow2_header_check_snapshots(h, errp) < 0) {
        return -1;
    }
    /* Read more until the entries fit: a table is usually small. */
    for (;;) {
        g_autofree uint8_t *buf = g_malloc0(window);
        uint64_t avail = h->snapshots_offset < s->file_size ?
                         s->file_size - h->snapshots_offset : 0;

        if (bdrv_pread(bs->file, h->snapshots_offset, buf,
                       MIN(avail, window), errp) < 0) {
            error_prepend(errp, "Failed to read snapshot table: ");
            return -1;
        }
        ret = qcow2_snapshots_parse(buf, window, h->nb_snapshots, h->size,
                                    &s->snapshots, &s->snapshots_size, errp);
        if (ret <= 0) {
            return ret;
        }
        window = MIN(window * 4, (size_t)QCOW2_SNAPSHOT_TABLE_MAX_BYTES);
    }
}

/*
 * Write sn (nb entries) as the new table: new clusters, flushed, then the
 * header's nb_snapshots and snapshots_offset in one write, flushed, then
 * the old table's clusters freed. sn becomes s->snapshots.
 */
static int qcow2_write_snapshot_table(BlockDriverState *bs, Qcow2Snapshot *sn,
                                      uint32_t nb, Error **errp)
{
    BDRVQcow2State *s = bs->opaque;
    uint64_t cs = s->g.cluster_size;
    uint64_t old_off = s->header.snapshots_offset;
    uint64_t old_size = s->snapshots_size, off = 0;
    g_autofree uint8_t *table = NULL;
    g_autofree uint8_t *buf = NULL;
    uint8_t hdr[12];
    size_t len;

    table = qcow2_snapshots_serialize(sn, nb, &len);
    if (len) {
        uint64_t clusters = DIV_ROUND_UP_U64(len, cs);

        buf = g_malloc0(clusters * cs);
        memcpy(buf, table, len);
        if (qcow2_alloc_clusters(bs, clusters, &off, errp) < 0 ||
            bdrv_pwrite(bs->file, off, buf, clusters * cs, 0, errp) < 0) {
            return -1;
        }
    }
    /* The table and its refcounts on the disk before the header says so. */
    if (qcow2_flush_metadata(bs, errp) < 0 ||
        bdrv_flush(bs->file, errp) < 0) {
        return -1;
    }
    /* Spec, "Header": nb_snapshots (bytes 60-63), snapshots_offset. */
    stl_be_p(hdr, nb);
    stq_be_p(hdr + 4, off);
    if (bdrv_pwrite(bs->file, 60, hdr, sizeof(hdr), 0, errp) < 0 ||
        bdrv_flush(bs->file, errp) < 0) {
        return -1;
    }
    s->header.nb_snapshots = nb;
    s->header.snapshots_offset = off;
    s->snapshots_size = len;
    if (s->snapshots != sn) {
        g_free(s->snapshots);
        s->snapshots = sn;
    }
    /*
     * The new table is in use: an old one that cannot be freed is a leak,
     * noted, not a failure (as QEMU).
     */
    if (old_size) {
        Error *err = NULL;

        if (qcow2_update_refcounts(bs, old_off, old_size, -1, &err) < 0) {
            g_free(s->warning);
            s->warning = g_strdup_printf("qcow2_free_clusters failed: %s",
                                         g_strerror(error_get_errno(err) ?
                                                    error_get_errno(err) :
                                                    EIO));
            error_free(err);
        }
    }
    return 0;
}

int qcow2_snapshots_rewrite(BlockDriverState *bs, Error **errp)
{
    BDRVQcow2State *s = bs->opaque;
    int ret;

    if (!s->header.nb_snapshots) {
        return 0;
    }
    if (qcow2_alloc_reuse_begin(bs, errp) < 0) {
        return -1;
    }
    ret = qcow2_write_snapshot_table(bs, s->snapshots,
                                     s->header.nb_snapshots, errp);
    qcow2_alloc_reuse_end(bs);
    return ret;
}

int qcow2_snapshots_write_repaired(BlockDriverState *bs, Qcow2Snapshot *sn,
                                   uint32_t nb, uint64_t old_size,
                                   uint64_t file_size, Error **errp)
{
    BDRVQcow2State *s = bs->opaque;
    int ret;

    /* The writer's refcount state, for this one table (a check's open). */
    s->file_size = file_size;
    s->next_free = ROUND_UP(file_size, s->g.cluster_size);
    s->snapshots_size = old_size;
    ret = qcow2_refcount_init(bs, errp);
    if (ret == 0) {
        ret = qcow2_alloc_reuse_begin(bs, errp);
    }
    if (ret == 0) {
        ret = qcow2_write_snapshot_table(bs, sn, nb, errp);
        qcow2_alloc_reuse_end(bs);
    }
    if (s->snapshots != sn) {
        qcow2_snapshots_free(sn, nb);
    }
    /* Refcounts not on the disk now belong to clusters nothing uses. */
    g_free(s->reftable);
    s->reftable = NULL;
    s->reftable_entries = 0;
    s->rb.valid = false;
    s->rb.lo = s->rb.hi = 0;
    return ret;
}

/* ---- Walking a tree */

/*
 * The two faults QEMU's qcow2_validate_table finds in a snapshot's L1
 * table, in its words (qemu-iotests 080), with the errno its callers then
 * fail with: -EFBIG, -EINVAL; 0 if neither.
 */
static int qcow2_snapshot_l1_fault(BDRVQcow2State *s, uint64_t offset,
                                   uint32_t n, Error **errp)
{
    if ((uint64_t)n * 8 > QCOW2_MAX_L1_BYTES) {
        error_setg(errp, "Snapshot L1 table too large");
        return -EFBIG;
    }
    if (offset % s->g.cluster_size) {
        error_setg(errp, "Snapshot L1 table offset invalid");
        return -EINVAL;
    }
    return 0;
}

/* An L1 table of n entries at offset, host byte order. */
static uint64_t *qcow2_read_l1_table(BlockDriverState *bs, uint64_t offset,
                                     uint32_t n, Error **errp)
{
    BDRVQcow2State *s = bs->opaque;
    g_autofree uint64_t *l1 = NULL;

    if (qcow2_snapshot_l1_fault(s, offset, n, errp) < 0) {
        return NULL;
    }
    l1 = g_new0(uint64_t, MAX(n, 1));
    if (n && qcow2_validate_table(offset, n, 8, QCOW2_MAX_L1_BYTES,
                                  s->g.cluster_size, s->file_size,
                                  "Snapshot L1 table", errp) < 0) {
        return NULL;
    }
    if (n && bdrv_pread(bs->file, offset, l1, (uint64_t)n * 8, errp) < 0) {
        return NULL;
    }
    for (uint32_t i = 0; i < n; i++) {
        l1[i] = GUINT64_FROM_BE(l1[i]);
    }
    return g_steal_pointer(&l1);
}

/*
 * A failure of what; where QEMU reports the L1 table's fault and then
 * fails with its errno, so does this (the fault a line of its own):
 * "what: Invalid argument".
 */
static void qcow2_snapshot_l1_error(int fault, Error *reason,
                                    const char *what, Error **errp)
{
    if (fault) {
        error_setg(errp, "%s: %s", what, g_strerror(-fault));
        error_add_report_before(errp, "%s", error_get_pretty(reason));
        error_free(reason);
    } else {
        error_propagate(errp, reason);
        error_prepend(errp, "%s: ", what);
    }
}

/*
 * A host cluster an entry points at must be one the file holds: its
 * refcount is never changed (the refcount structures would grow to
 * reach it). raise: its refcount was to go up. Where QEMU's
 * update_refcount then fails for want of a refcount block (it makes one,
 * and fails with -EAGAIN, which its caller does not retry; or, past the
 * largest refcount table, with -EFBIG), the failure is said in qemu-img's
 * words: "-11 (Resource temporarily unavailable)", "-27 (File too
 * large)" (qemu-iotests 080). Nothing is written in either case.
 */
static int qcow2_check_host_range(BDRVQcow2State *s, uint64_t offset,
                                  uint64_t len, const char *what, bool raise,
                                  Error **errp)
{
    uint64_t end = ROUND_UP(s->file_size, s->g.cluster_size);
    uint64_t per_block = (s->g.cluster_size * 8) >> s->header.refcount_order;
    uint64_t index = (offset >> s->g.cluster_bits) / per_block;

    if (offset < end && len <= end - offset) {
        return 0;
    }
    if (raise && (index >= s->reftable_entries || !s->reftable[index])) {
        int e = index >= QCOW2_MAX_REFTABLE_BYTES / sizeof(uint64_t) ?
                EFBIG : EAGAIN;

        error_setg(errp, "-%d (%s)", e, g_strerror(e));
        return -1;
    }
    error_setg(errp, "qcow2 image is corrupt: %s at offset 0x%" PRIx64
               " is beyond the end of the file", what, offset);
    return -1;
}

/* Consecutive clusters whose refcounts change together. */
typedef struct RefRun {
    uint64_t first;
    uint64_t count;
    int delta;
} RefRun;

/*
 * Whether a refcount of the run is at the most its width holds: raising
 * it fails (nothing changed), as QEMU's update_refcount fails with
 * -EINVAL, which qemu-img prints as "-22 (Invalid argument)"
 * (qemu-iotests 112).
 */
static bool ref_run_overflows(BlockDriverState *bs, const RefRun *r)
{
    BDRVQcow2State *s = bs->opaque;
    unsigned order = s->header.refcount_order;
    uint64_t max = order == 6 ? UINT64_MAX : (1ull << (1u << order)) - 1;

    for (uint64_t i = 0; r->delta > 0 && i < r->count; i++) {
        uint64_t refcount;

        if (qcow2_get_refcount(bs, (r->first + i) << s->g.cluster_bits,
                               &refcount, NULL) == 0 &&
            refcount > max - r->delta) {
            return true;
        }
    }
    return false;
}

static int ref_run_flush(BlockDriverState *bs, RefRun *r, Error **errp)
{
    BDRVQcow2State *s = bs->opaque;
    Error *err = NULL;
    int ret = 0;

    if (r->count) {
        ret = qcow2_update_refcounts(bs, r->first << s->g.cluster_bits,
                                     r->count << s->g.cluster_bits,
                                     r->delta, &err);
    }
    if (ret < 0 && ref_run_overflows(bs, r)) {
        error_free(err);
        error_setg(errp, "-%d (%s)", EINVAL, g_strerror(EINVAL));
    } else if (ret < 0) {
        error_propagate(errp, err);
    }
    r->count = 0;
    return ret;
}

static int ref_run_add(BlockDriverState *bs, RefRun *r, uint64_t first,
                       uint64_t count, Error **errp)
{
    if (r->count && first == r->first + r->count) {
        r->count += count;
        return 0;
    }
    if (ref_run_flush(bs, r, errp) < 0) {
        return -1;
    }
    r->first = first;
    r->count = count;
    return 0;
}

/* The host clusters of an L2 entry: [*first, *first + *count). */
static int qcow2_entry_clusters(BDRVQcow2State *s, uint64_t entry,
                                uint64_t *first, uint64_t *count, bool raise,
                                Error **errp)
{
    unsigned cb = s->g.cluster_bits;
    uint64_t off, len;

    *count = 0;
    if (entry & QCOW2_OFLAG_COMPRESSED) {
        qcow2_compressed_extent(&s->g, entry, &off, &len);
    } else {
        off = entry & QCOW2_OFFSET_MASK;
        len = s->g.cluster_size;
        if (!off) {
            return 0;
        }
        if (off & (s->g.cluster_size - 1)) {
            error_setg(errp, "qcow2 image is corrupt: cluster offset 0x%"
                       PRIx64 " unaligned", off);
            return -1;
        }
    }
    if (qcow2_check_host_range(s, off, len, "data cluster", raise,
                               errp) < 0) {
        return -1;
    }
    *first = off >> cb;
    *count = ((off + len - 1) >> cb) - *first + 1;
    return 0;
}

/* The L2 table an L1 entry points at (0: none), checked. */
static int qcow2_l1_entry_table(BDRVQcow2State *s, uint64_t l1e,
                                uint64_t *l2_offset, bool raise,
                                Error **errp)
{
    *l2_offset = l1e & QCOW2_OFFSET_MASK;
    if (!*l2_offset) {
        return 0;
    }
    if (*l2_offset & (s->g.cluster_size - 1)) {
        error_setg(errp, "qcow2 image is corrupt: L2 table offset 0x%" PRIx64
                   " unaligned", *l2_offset);
        return -1;
    }
    return qcow2_check_host_range(s, *l2_offset, s->g.cluster_size,
                                  "L2 table", raise, errp);
}

/*
 * The L2 table an L1 entry of a snapshot's tree names, read from the file
 * into table (a cluster): 1, 0 if the entry names none, -1 on error
 * (the entry checked by qcow2_l1_entry_table(), raise passed on).
 */
static int qcow2_tree_read_l2(BlockDriverState *bs, uint64_t l1_entry,
                              bool raise, uint8_t *table,
                              uint64_t *l2_offset, Error **errp)
{
    BDRVQcow2State *s = bs->opaque;

    if (qcow2_l1_entry_table(s, l1_entry, l2_offset, raise, errp) < 0) {
        return -1;
    }
    if (!*l2_offset) {
        return 0;
    }
    return bdrv_pread(bs->file, *l2_offset, table, s->g.cluster_size,
                      errp) < 0 ? -1 : 1;
}

/*
 * Add delta to the refcount of every cluster the tree of l1 (n entries)
 * references: its L2 tables and their data clusters (compressed data:
 * every host cluster its bytes touch, once per entry).
 */
static int qcow2_tree_update_refcounts(BlockDriverState *bs,
                                       const uint64_t *l1, uint32_t n,
                                       int delta, Error **errp)
{
    BDRVQcow2State *s = bs->opaque;
    g_autofree uint8_t *table = g_malloc(s->g.cluster_size);
    RefRun run = { .delta = delta };

    /* The tables below are read from the file: all of it there. */
    if (qcow2_flush_metadata(bs, errp) < 0) {
        return -1;
    }
    for (uint32_t i = 0; i < n; i++) {
        uint64_t l2_offset, first, count;

        int got = qcow2_tree_read_l2(bs, l1[i], delta > 0, table,
                                     &l2_offset, errp);

        if (got <= 0) {
            if (got < 0) {
                return -1;
            }
            continue;
        }
        for (uint64_t j = 0; j < s->g.l2_entries; j++) {
            uint64_t entry = ldq_be_p(table + j * s->g.l2_entry_size);

            if (qcow2_entry_clusters(s, entry, &first, &count, delta > 0,
                                     errp) < 0 ||
                (count && ref_run_add(bs, &run, first, count, errp) < 0)) {
                return -1;
            }
        }
        if (ref_run_add(bs, &run, l2_offset >> s->g.cluster_bits, 1,
                        errp) < 0) {
            return -1;
        }
        if (delta < 0) {
            g_mutex_lock(&s->lock);
            qcow2_cache_drop(s->l2_cache, l2_offset);
            g_mutex_unlock(&s->lock);
        }
    }
    return ref_run_flush(bs, &run, errp) < 0 ||
           qcow2_flush_metadata(bs, errp) < 0 ? -1 : 0;
}

/* The COPIED flag an entry pointing at offset should have. */
static int qcow2_want_copied(BlockDriverState *bs, uint64_t offset,
                             bool *copied, Error **errp)
{
    uint64_t refcount;

    if (qcow2_get_refcount(bs, offset, &refcount, errp) < 0) {
        return -1;
    }
    *copied = refcount == 1;
    return 0;
}

/*
 * Set the COPIED flags of the active tree from the refcounts: on an
 * entry whose cluster has refcount 1, off elsewhere (QEMU's
 * qcow2_update_snapshot_refcount with addend 0). Changed L2 tables are
 * written whole, then the L1 table.
 */
static int qcow2_fix_copied_flags(BlockDriverState *bs, Error **errp)
{
    BDRVQcow2State *s = bs->opaque;
    const Qcow2Header *h = &s->header;
    g_autofree uint8_t *table = g_malloc(s->g.cluster_size);
    g_autofree uint64_t *l1 = NULL;
    bool l1_changed = false;

    if (qcow2_flush_metadata(bs, errp) < 0) {
        return -1;
    }
    l1 = qcow2_read_l1_table(bs, h->l1_table_offset, h->l1_size, errp);
    if (!l1) {
        return -1;
    }
    for (uint32_t i = 0; i < h->l1_size; i++) {
        uint64_t l2_offset, l1e;
        bool changed = false, copied;
        int got = qcow2_tree_read_l2(bs, l1[i], false, table, &l2_offset,
                                     errp);

        if (got <= 0) {
            if (got < 0) {
                return -1;
            }
            continue;
        }
        for (uint64_t j = 0; j < s->g.l2_entries; j++) {
            uint8_t *e = table + j * s->g.l2_entry_size;
            uint64_t entry = ldq_be_p(e), fixed;

            if ((entry & QCOW2_OFLAG_COMPRESSED) ||
                !(entry & QCOW2_OFFSET_MASK)) {
                continue;
            }
            if (qcow2_want_copied(bs, entry & QCOW2_OFFSET_MASK, &copied,
                                  errp) < 0) {
                return -1;
            }
            fixed = copied ? entry | QCOW2_OFLAG_COPIED
                           : entry & ~QCOW2_OFLAG_COPIED;
            if (fixed != entry) {
                stq_be_p(e, fixed);
                changed = true;
            }
        }
        if (changed) {
            if (bdrv_pwrite(bs->file, l2_offset, table, s->g.cluster_size,
                            0, errp) < 0) {
                return -1;
            }
            g_mutex_lock(&s->lock);
            qcow2_cache_drop(s->l2_cache, l2_offset);
            g_mutex_unlock(&s->lock);
        }
        if (qcow2_want_copied(bs, l2_offset, &copied, errp) < 0) {
            return -1;
        }
        l1e = copied ? l2_offset | QCOW2_OFLAG_COPIED : l2_offset;
        if (l1e != l1[i]) {
            l1[i] = l1e;
            l1_changed = true;
        }
    }
    if (l1_changed) {
        g_autofree uint64_t *be = g_new(uint64_t, h->l1_size);

        for (uint32_t i = 0; i < h->l1_size; i++) {
            be[i] = GUINT64_TO_BE(l1[i]);
        }
        if (bdrv_pwrite(bs->file, h->l1_table_offset, be,
                        (uint64_t)h->l1_size * 8, 0, errp) < 0) {
            return -1;
        }
        for (uint64_t i = 0; i < MIN(s->l1_size, h->l1_size); i++) {
            s->l1_table[i] = l1[i];
        }
    }
    return bdrv_flush(bs->file, errp);
}

int qcow2_snapshots_have_zero_clusters(BlockDriverState *bs, bool *found,
                                       Error **errp)
{
    BDRVQcow2State *s = bs->opaque;
    g_autofree uint8_t *table = g_malloc(s->g.cluster_size);

    *found = false;
    for (uint32_t i = 0; i < s->header.nb_snapshots && !*found; i++) {
        const Qcow2Snapshot *sn = &s->snapshots[i];
        g_autofree uint64_t *l1 = NULL;
        Error *err = NULL;
        int fault = qcow2_snapshot_l1_fault(s, sn->l1_table_offset,
                                            sn->l1_size, &err);

        if (!fault) {
            l1 = qcow2_read_l1_table(bs, sn->l1_table_offset, sn->l1_size,
                                     &err);
        }
        if (!l1) {
            /* QEMU's qcow2_expand_zero_clusters fails so (qemu-iotests 080) */
            qcow2_snapshot_l1_error(fault, err, "Failed to turn zero into "
                                    "data clusters", errp);
            return -1;
        }
        for (uint32_t j = 0; j < sn->l1_size && !*found; j++) {
            uint64_t l2_offset;
            int got = qcow2_tree_read_l2(bs, l1[j], false, table, &l2_offset,
                                         errp);

            if (got <= 0) {
                if (got < 0) {
                    return -1;
                }
                continue;
            }
            for (uint64_t k = 0; k < s->g.l2_entries; k++) {
                uint64_t e = ldq_be_p(table + k * s->g.l2_entry_size);

                if (!(e & QCOW2_OFLAG_COMPRESSED) && (e & QCOW2_OFLAG_ZERO)) {
                    *found = true;
                    break;
                }
            }
        }
    }
    return 0;
}

/* ---- Lookup */

static int qcow2_find_snapshot(BDRVQcow2State *s, const char *id,
                               const char *name)
{
    for (uint32_t i = 0; i < s->header.nb_snapshots; i++) {
        if ((!id || g_str_equal(s->snapshots[i].id, id)) &&
            (!name || g_str_equal(s->snapshots[i].name, name))) {
            return i;
        }
    }
    return -1;
}

/* As qemu-img: an id first, then a name. */
static int qcow2_find_snapshot_id_or_name(BDRVQcow2State *s, const char *str)
{
    int i = qcow2_find_snapshot(s, str, NULL);

    return i >= 0 ? i : qcow2_find_snapshot(s, NULL, str);
}

int qcow2_snapshot_list(BlockDriverState *bs, BlockSnapshotInfo **list,
                        size_t *n, Error **errp)
{
    BDRVQcow2State *s = bs->opaque;
    uint32_t nb = s->snapshots ? s->header.nb_snapshots : 0;

    *n = nb;
    *list = nb ? g_new0(BlockSnapshotInfo, nb) : NULL;
    for (uint32_t i = 0; i < nb; i++) {
        const Qcow2Snapshot *sn = &s->snapshots[i];

        (*list)[i] = (BlockSnapshotInfo) {
            .id = g_strdup(sn->id),
            .name = g_strdup(sn->name),
            .vm_state_size = sn->vm_state_size,
            .date_sec = sn->date_sec,
            .date_nsec = sn->date_nsec,
            .vm_clock_nsec = sn->vm_clock_nsec,
            .icount = sn->icount,
        };
    }
    return 0;
}

/* What every change needs: a writable image the write path can take. */
static int qcow2_snapshot_writable(BlockDriverState *bs, Error **errp)
{
    BDRVQcow2State *s = bs->opaque;

    if (!s->reftable) {
        error_setg(errp, "Image is read-only");
        return -1;
    }
    if (s->g.has_data_file) {
        /* QEMU's -ENOTSUP for internal snapshots with a data file. */
        error_setg(errp, "-95 (Operation not supported)");
        return -1;
    }
    return 0;
}

/* ---- create */

static int qcow2_snapshot_create_do(BlockDriverState *bs, const char *name,
                                    Error **errp)
{
    BDRVQcow2State *s = bs->opaque;
    const Qcow2Header *h = &s->header;
    uint32_t nb = h->nb_snapshots;
    uint64_t cs = s->g.cluster_size, l1_off = 0, id_max = 0;
    g_autofree uint64_t *l1 = NULL;
    g_autofree uint8_t *buf = NULL;
    Qcow2Snapshot *table, *sn;
    gint64 now = g_get_real_time();
    uint64_t l1_clusters = DIV_ROUND_UP_U64((uint64_t)h->l1_size * 8, cs);

    if (qcow2_snapshot_writable(bs, errp) < 0) {
        return -1;
    }
    if (nb >= QCOW2_MAX_SNAPSHOTS) {
        error_setg(errp, "-27 (File too large)");
        return -1;
    }
    for (uint32_t i = 0; i < nb; i++) {
        id_max = MAX(id_max, strtoull(s->snapshots[i].id, NULL, 10));
    }
    /* The active L1 table, as it is on the disk, copied for the snapshot. */
    if (qcow2_flush_metadata(bs, errp) < 0) {
        return -1;
    }
    l1 = qcow2_read_l1_table(bs, h->l1_table_offset, h->l1_size, errp);
    if (!l1) {
        return -1;
    }
    if (l1_clusters) {
        buf = g_malloc0(l1_clusters * cs);
        for (uint32_t i = 0; i < h->l1_size; i++) {
            stq_be_p(buf + i * 8, l1[i]);
        }
        if (qcow2_alloc_clusters(bs, l1_clusters, &l1_off, errp) < 0 ||
            bdrv_pwrite(bs->file, l1_off, buf, l1_clusters * cs, 0,
                        errp) < 0) {
            return -1;
        }
    }
    if (qcow2_tree_update_refcounts(bs, l1, h->l1_size, 1, errp) < 0 ||
        qcow2_fix_copied_flags(bs, errp) < 0) {
        return -1;
    }

    table = g_new0(Qcow2Snapshot, nb + 1);
    if (nb) {
        memcpy(table, s->snapshots, nb * sizeof(*table));
    }
    sn = &table[nb];
    *sn = (Qcow2Snapshot) {
        .l1_table_offset = l1_off,
        .l1_size = h->l1_size,
        .id = g_strdup_printf("%" PRIu64, id_max + 1),
        .name = g_strndup(name, QCOW2_SNAPSHOT_MAX_NAME),
        .disk_size = h->size,
        .date_sec = now / G_USEC_PER_SEC,
        .date_nsec = (now % G_USEC_PER_SEC) * 1000,
        /* qemu-img records icount 0 for a disk-only snapshot. */
        .icount = 0,
    };
    if (qcow2_write_snapshot_table(bs, table, nb + 1, errp) < 0) {
        g_free(sn->id);
        g_free(sn->name);
        g_free(table);
        return -1;
    }
    return 0;
}

/*
 * A snapshot operation on a writable image, with free clusters taken
 * first, as QEMU does (the holes of earlier changes).
 */
static int qcow2_snapshot_op(BlockDriverState *bs,
                             int (*op)(BlockDriverState *bs, const char *name,
                                       Error **errp),
                             const char *name, Error **errp)
{
    int ret;

    if (qcow2_snapshot_writable(bs, errp) < 0 ||
        qcow2_alloc_reuse_begin(bs, errp) < 0) {
        return -1;
    }
    ret = op(bs, name, errp);
    qcow2_alloc_reuse_end(bs);
    return ret;
}

int qcow2_snapshot_create(BlockDriverState *bs, const char *name,
                          Error **errp)
{
    return qcow2_snapshot_op(bs, qcow2_snapshot_create_do, name, errp);
}

/* ---- goto */

static int qcow2_snapshot_goto_do(BlockDriverState *bs, const char *id_or_name,
                                  Error **errp)
{
    BDRVQcow2State *s = bs->opaque;
    Qcow2Header *h = &s->header;
    g_autofree uint64_t *sn_l1 = NULL, *old_l1 = NULL;
    g_autofree uint64_t *be = NULL;
    const Qcow2Snapshot *sn;
    Error *err = NULL;
    int i, fault;

    if (qcow2_snapshot_writable(bs, errp) < 0) {
        return -1;
    }
    i = qcow2_find_snapshot_id_or_name(s, id_or_name);
    if (i < 0) {
        error_setg(errp, "Failed to load snapshot: No such file or "
                   "directory");
        return -1;
    }
    sn = &s->snapshots[i];
    /* As QEMU, the L1 table's fault before anything is changed. */
    fault = qcow2_snapshot_l1_fault(s, sn->l1_table_offset, sn->l1_size,
                                    &err);
    if (fault) {
        qcow2_snapshot_l1_error(fault, err, "Failed to load snapshot", errp);
        return -1;
    }
    if (sn->vm_state_size) {
        error_setg(errp, "Failed to load snapshot: the snapshot holds VM "
                   "state, which qemu-img-lite does not restore");
        return -1;
    }
    if (sn->disk_size != h->size &&
        qcow2_truncate(bs, sn->disk_size, PREALLOC_MODE_OFF, errp) < 0) {
        error_prepend(errp, "Failed to load snapshot: ");
        return -1;
    }
    sn_l1 = qcow2_read_l1_table(bs, sn->l1_table_offset, sn->l1_size, errp);
    if (!sn_l1) {
        error_prepend(errp, "Failed to load snapshot: ");
        return -1;
    }
    if (sn->l1_size > h->l1_size) {
        error_setg(errp, "Failed to load snapshot: its L1 table (%" PRIu32
                   " entries) is larger than the image's (%" PRIu32 ")",
                   sn->l1_size, h->l1_size);
        return -1;
    }
    if (qcow2_flush_metadata(bs, errp) < 0) {
        return -1;
    }
    old_l1 = qcow2_read_l1_table(bs, h->l1_table_offset, h->l1_size, errp);
    if (!old_l1) {
        return -1;
    }
    /* The snapshot's tree counted for the active L1 before it points there. */
    if (qcow2_tree_update_refcounts(bs, sn_l1, sn->l1_size, 1, errp) < 0 ||
        bdrv_flush(bs->file, errp) < 0) {
        return -1;
    }
    be = g_new0(uint64_t, MAX(h->l1_size, 1));
    for (uint32_t j = 0; j < sn->l1_size; j++) {
        be[j] = GUINT64_TO_BE(sn_l1[j]);
    }
    if (bdrv_pwrite(bs->file, h->l1_table_offset, be,
                    (uint64_t)h->l1_size * 8, 0, errp) < 0 ||
        bdrv_flush(bs->file, errp) < 0) {
        return -1;
    }
    for (uint64_t j = 0; j < s->l1_size; j++) {
        s->l1_table[j] = j < sn->l1_size ? sn_l1[j] : 0;
    }
    /* Then the old active tree loses the active L1's references. */
    if (qcow2_tree_update_refcounts(bs, old_l1, h->l1_size, -1, errp) < 0) {
        return -1;
    }
    return qcow2_fix_copied_flags(bs, errp);
}

int qcow2_snapshot_goto(BlockDriverState *bs, const char *id_or_name,
                        Error **errp)
{
    return qcow2_snapshot_op(bs, qcow2_snapshot_goto_do, id_or_name, errp);
}

/* ---- delete */

static int qcow2_snapshot_delete_do(BlockDriverState *bs, const char *name,
                                    Error **errp)
{
    BDRVQcow2State *s = bs->opaque;
    uint32_t nb = s->header.nb_snapshots;
    uint64_t cs = s->g.cluster_size;
    g_autofree uint64_t *l1 = NULL;
    Qcow2Snapshot *table, gone;
    Error *err = NULL;
    int i;

    if (qcow2_snapshot_writable(bs, errp) < 0) {
        return -1;
    }
    i = qcow2_find_snapshot(s, NULL, name);
    if (i < 0) {
        error_setg(errp, "snapshot not found");
        return -1;
    }
    gone = s->snapshots[i];
    l1 = qcow2_read_l1_table(bs, gone.l1_table_offset, gone.l1_size, errp);
    if (!l1) {
        return -1;
    }
    /* The table without it first: a crash then leaks its clusters. */
    table = g_new0(Qcow2Snapshot, MAX(nb - 1, 1));
    memcpy(table, s->snapshots, i * sizeof(*table));
    memcpy(table + i, s->snapshots + i + 1, (nb - i - 1) * sizeof(*table));
    if (qcow2_write_snapshot_table(bs, table, nb - 1, errp) < 0) {
        g_free(table);
        return -1;
    }
    g_free(gone.id);
    g_free(gone.name);
    g_free(gone.unknown_extra);
    if (qcow2_tree_update_refcounts(bs, l1, gone.l1_size, -1, &err) < 0 ||
        (gone.l1_size &&
         qcow2_update_refcounts(bs, gone.l1_table_offset,
                                ROUND_UP((uint64_t)gone.l1_size * 8, cs), -1,
                                &err) < 0)) {
        /* Gone from the table; its clusters leaked (qemu-iotests 217). */
        int e = error_get_errno(err);

        error_setg(errp, "Failed to free the cluster and L1 table: %s",
                   e ? g_strerror(e) : error_get_pretty(err));
        error_free(err);
        return -1;
    }
    return qcow2_fix_copied_flags(bs, errp);
}

int qcow2_snapshot_delete(BlockDriverState *bs, const char *name,
                          Error **errp)
{
    return qcow2_snapshot_op(bs, qcow2_snapshot_delete_do, name, errp);
}

/* ---- Reading a snapshot (convert -l, measure -l) */

int qcow2_snapshot_load_tmp(BlockDriverState *bs, const char *id,
                            const char *name, Error **errp)
{
    BDRVQcow2State *s = bs->opaque;
    const Qcow2Snapshot *sn;
    uint64_t *l1;
    int i = qcow2_find_snapshot(s, id, name);

    if (i < 0) {
        error_setg(errp, "Can't find snapshot");
        return -1;
    }
    sn = &s->snapshots[i];
    l1 = qcow2_read_l1_table(bs, sn->l1_table_offset, sn->l1_size, errp);
    if (!l1) {
        return -1;
    }
    /* Fewer entries than the size needs: the rest map nothing. */
    g_free(s->l1_table);
    s->l1_table = l1;
    s->l1_size = MIN(sn->l1_size,
                     qcow2_l1_entries_needed(&s->g, sn->disk_size));
    s->header.size = sn->disk_size;
    return 0;
}
