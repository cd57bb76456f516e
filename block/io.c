/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The one request path (QEMU's block/io.c): every read, write, zero
 * write, discard, flush, truncate and block-status request reaches a
 * driver through here, whether the tool makes it or a format asks its
 * child. This is the only file that calls a driver's I/O entries.
 *
 * What each request gets here, and nowhere else:
 * - checks: a read-only node refuses writes; a format node refuses
 *   requests past its end (a protocol node does not: a format grows its
 *   file by writing past the end, and reads past it as zeroes, as in
 *   QEMU; a filter leaves it to its child);
 * - alignment: a node that reads and writes whole blocks of
 *   bs->request_alignment bytes (an encrypted format's sectors) gets only
 *   aligned requests; the rest are split into a bounded bounce buffer,
 *   and a partial block is read, patched and written back;
 * - zero writes and discards fall back to what every driver can do;
 * - a failed flush stays failed (bdrv_flush_node());
 * - a driver that is asynchronous (it offers bdrv_aio_pread/pwrite: a
 *   network protocol with many requests in flight) is waited for, so
 *   that callers, the threaded convert loop among them, stay synchronous.
 */
#include <assert.h>
#include <string.h>

#include "block/block_int.h"

/* Requests stay below 2^63 bytes, QEMU's BDRV_MAX_LENGTH. */
#define BDRV_MAX_LENGTH ((uint64_t)INT64_MAX)

/* Zero writes without a driver's help: this many zero bytes at a time. */
#define BDRV_ZERO_CHUNK (1024 * 1024)

int64_t bdrv_getlength_exact(BlockDriverState *bs, Error **errp)
{
    return bs->drv->bdrv_getlength(bs, errp);
}

int64_t bdrv_getlength(BlockDriverState *bs, Error **errp)
{
    int64_t len = bdrv_getlength_exact(bs, errp);

    /* QEMU counts images in whole sectors, and so do we. */
    return len < 0 ? len : (int64_t)ROUND_UP((uint64_t)len, BDRV_SECTOR_SIZE);
}

/*
 * Whether a request may reach bs. Every node: no overflow. Format nodes:
 * inside the image (which costs a length query, as in QEMU's BlockBackend).
 */
static int bdrv_check_request(BlockDriverState *bs, uint64_t offset,
                              size_t bytes, Error **errp)
{
    int64_t len;

    if (offset > BDRV_MAX_LENGTH || bytes > BDRV_MAX_LENGTH - offset) {
        error_setg(errp, "Request at offset %" G_GUINT64_FORMAT " of %zu "
                   "bytes is out of range", offset, bytes);
        return -1;
    }
    /* A filter's child checks for itself (a protocol there may grow). */
    if (bs->drv->is_protocol || bs->drv->is_filter) {
        return 0;
    }
    len = bdrv_getlength(bs, errp);
    if (len < 0) {
        return -1;
    }
    if (offset > (uint64_t)len || bytes > (uint64_t)len - offset) {
        error_setg(errp, "Request at offset %" G_GUINT64_FORMAT " of %zu "
                   "bytes is beyond the end of the image (%" G_GINT64_FORMAT
                   " bytes)", offset, bytes, len);
        return -1;
    }
    return 0;
}

static int bdrv_check_write(BlockDriverState *bs, uint64_t offset,
                            size_t bytes, Error **errp)
{
    if (bdrv_is_read_only(bs)) {
        error_setg(errp, "Image is read-only");
        return -1;
    }
    return bdrv_check_request(bs, offset, bytes, errp);
}

/*
 * A write request of bs has ended (whatever its result): the next flush
 * has something to make durable. Counted after the request, never before:
 * a flush that starts while it runs must not count it as flushed.
 */
static int bdrv_write_ended(BlockDriverState *bs, int ret)
{
    g_atomic_int_inc(&bs->write_gen);
    return ret;
}

/* ---- Asynchronous drivers, waited for */

typedef struct BdrvSyncWait {
    GMutex lock;
    GCond cond;
    bool done;
    int ret;
    Error *err;
} BdrvSyncWait;

static void bdrv_sync_wait_done(void *opaque, int ret, Error *err)
{
    BdrvSyncWait *w = opaque;

    g_mutex_lock(&w->lock);
    w->ret = ret;
    w->err = err;
    w->done = true;
    g_cond_signal(&w->cond);
    g_mutex_unlock(&w->lock);
}

static void bdrv_sync_wait_init(BdrvSyncWait *w)
{
    *w = (BdrvSyncWait) { .ret = 0 };
    g_mutex_init(&w->lock);
    g_cond_init(&w->cond);
}

/* The submitted request's result (submitted < 0: it never started). */
static int bdrv_sync_wait_finish(BdrvSyncWait *w, int submitted,
                                 Error **errp)
{
    int ret = submitted;

    if (submitted == 0) {
        g_mutex_lock(&w->lock);
        while (!w->done) {
            g_cond_wait(&w->cond, &w->lock);
        }
        g_mutex_unlock(&w->lock);
        ret = w->ret;
        if (ret < 0) {
            error_propagate(errp, w->err);
        } else {
            error_free(w->err);
        }
    }
    g_mutex_clear(&w->lock);
    g_cond_clear(&w->cond);
    return ret < 0 ? -1 : 0;
}

/* ---- The driver's entries, aligned requests only */

static int bdrv_driver_pread(BlockDriverState *bs, uint64_t offset,
                             void *buf, size_t bytes, Error **errp)
{
    BdrvSyncWait w;

    if (bs->drv->bdrv_pread) {
        return bs->drv->bdrv_pread(bs, offset, buf, bytes, errp);
    }
    bdrv_sync_wait_init(&w);
    return bdrv_sync_wait_finish(&w, bs->drv->bdrv_aio_pread(
                                     bs, offset, buf, bytes,
                                     bdrv_sync_wait_done, &w, errp), errp);
}

static int bdrv_driver_pwrite(BlockDriverState *bs, uint64_t offset,
                              const void *buf, size_t bytes, int flags,
                              Error **errp)
{
    BdrvSyncWait w;

    if (bs->drv->bdrv_pwrite) {
        return bs->drv->bdrv_pwrite(bs, offset, buf, bytes, flags, errp);
    }
    bdrv_sync_wait_init(&w);
    return bdrv_sync_wait_finish(&w, bs->drv->bdrv_aio_pwrite(
                                     bs, offset, buf, bytes, flags,
                                     bdrv_sync_wait_done, &w, errp), errp);
}

/* ---- Reads and writes */

static bool bdrv_is_aligned(BlockDriverState *bs, uint64_t offset,
                            size_t bytes)
{
    uint32_t align = bs->request_alignment;

    return align <= 1 || (offset % align == 0 && bytes % align == 0);
}

int bdrv_pread(BlockDriverState *bs, uint64_t offset, void *buf,
               size_t bytes, Error **errp)
{
    g_autofree uint8_t *bounce = NULL;
    uint8_t *out = buf;

    if (bdrv_check_request(bs, offset, bytes, errp) < 0) {
        return -1;
    }
    /* The common case: straight into the caller's buffer, in one piece. */
    if (bdrv_is_aligned(bs, offset, bytes)) {
        return bdrv_driver_pread(bs, offset, buf, bytes, errp);
    }
    bounce = g_malloc(BDRV_BOUNCE_SIZE);
    while (bytes) {
        BdrvPiece p = bdrv_piece(offset, bytes, bs->request_alignment);

        if (bdrv_driver_pread(bs, p.start, bounce, p.span, errp) < 0) {
            return -1;
        }
        memcpy(out, bounce + p.skip, p.n);
        out += p.n;
        offset += p.n;
        bytes -= p.n;
    }
    return 0;
}

/*
 * Write bytes that do not cover whole blocks: each piece's partial first
 * and last blocks keep the rest of their old contents (read, patched,
 * written back). The bounce buffer is ours, so the driver may clobber it.
 */
static int bdrv_pwrite_unaligned(BlockDriverState *bs, uint64_t offset,
                                 const uint8_t *in, size_t bytes,
                                 Error **errp)
{
    g_autofree uint8_t *bounce = g_malloc(BDRV_BOUNCE_SIZE);
    size_t align = bs->request_alignment;

    while (bytes) {
        BdrvPiece p = bdrv_piece(offset, bytes, align);

        if (p.skip &&
            bdrv_driver_pread(bs, p.start, bounce, align, errp) < 0) {
            return -1;
        }
        if ((p.skip + p.n) % align && (p.span > align || !p.skip) &&
            bdrv_driver_pread(bs, p.start + p.span - align,
                              bounce + p.span - align, align, errp) < 0) {
            return -1;
        }
        memcpy(bounce + p.skip, in, p.n);
        if (bdrv_driver_pwrite(bs, p.start, bounce, p.span,
                               BDRV_REQ_MAY_CLOBBER, errp) < 0) {
            return -1;
        }
        in += p.n;
        offset += p.n;
        bytes -= p.n;
    }
    return 0;
}

int bdrv_pwrite(BlockDriverState *bs, uint64_t offset, const void *buf,
                size_t bytes, int flags, Error **errp)
{
    if (bdrv_check_write(bs, offset, bytes, errp) < 0) {
        return -1;
    }
    if (bdrv_is_aligned(bs, offset, bytes)) {
        return bdrv_write_ended(bs, bdrv_driver_pwrite(bs, offset, buf, bytes,
                                                       flags, errp));
    }
    return bdrv_write_ended(bs, bdrv_pwrite_unaligned(bs, offset, buf, bytes,
                                                      errp));
}

bool bdrv_supports_compressed_writes(BlockDriverState *bs)
{
    return bs->drv->bdrv_store_compressed != NULL;
}

BdrvCompressed *bdrv_compress(BlockDriverState *bs, uint64_t offset,
                              const void *buf, size_t bytes, int flags,
                              BdrvCompressed *reuse, Error **errp)
{
    BdrvCompressed *c;

    if (!bdrv_supports_compressed_writes(bs)) {
        error_setg(errp, "Compression not supported for this file format");
        return NULL;
    }
    if (bdrv_check_write(bs, offset, bytes, errp) < 0) {
        return NULL;
    }
    c = reuse ? reuse : g_new0(BdrvCompressed, 1);
    c->offset = offset;
    c->bytes = bytes;
    c->flags = flags;
    c->buf = buf;
    if (bs->drv->bdrv_compress(bs, c, errp) < 0) {
        if (!reuse) {
            bdrv_compressed_free(c);
        }
        return NULL;
    }
    return c;
}

int bdrv_store_compressed(BlockDriverState *bs, const BdrvCompressed *c,
                          Error **errp)
{
    return bdrv_write_ended(bs, bs->drv->bdrv_store_compressed(bs, c, errp));
}

void bdrv_compressed_free(BdrvCompressed *c)
{
    if (c) {
        g_free(c->out);
        g_free(c->clen);
        g_free(c);
    }
}

int bdrv_pwrite_compressed(BlockDriverState *bs, uint64_t offset,
                           const void *buf, size_t bytes, int flags,
                           Error **errp)
{
    BdrvCompressed *c = bdrv_compress(bs, offset, buf, bytes, flags, NULL,
                                      errp);
    int ret;

    if (!c) {
        return -1;
    }
    /* Compressed in parallel with other writers, stored in turn. */
    bdrv_write_turn();
    ret = bdrv_store_compressed(bs, c, errp);
    bdrv_compressed_free(c);
    return ret;
}

int bdrv_pwrite_zeroes(BlockDriverState *bs, uint64_t offset, size_t bytes,
                       int flags, Error **errp)
{
    g_autofree uint8_t *zeroes = NULL;

    if (bdrv_check_write(bs, offset, bytes, errp) < 0) {
        return -1;
    }
    if (bs->drv->bdrv_pwrite_zeroes && bdrv_is_aligned(bs, offset, bytes)) {
        int ret = bdrv_write_ended(bs, bs->drv->bdrv_pwrite_zeroes(
                                           bs, offset, bytes, flags, errp));

        if (ret != -ENOTSUP) {
            return ret < 0 ? -1 : 0;
        }
    }
    /* Every node can write zeroes as data (QEMU's fallback too). */
    zeroes = g_malloc0(MIN(bytes, BDRV_ZERO_CHUNK));
    while (bytes) {
        size_t n = MIN(bytes, BDRV_ZERO_CHUNK);

        if (bdrv_pwrite(bs, offset, zeroes, n,
                        flags & BDRV_REQ_EXPLICIT_ZERO, errp) < 0) {
            return -1;
        }
        offset += n;
        bytes -= n;
    }
    return 0;
}

int bdrv_pdiscard(BlockDriverState *bs, uint64_t offset, size_t bytes,
                  Error **errp)
{
    if (bdrv_check_write(bs, offset, bytes, errp) < 0) {
        return -1;
    }
    /* A hint (QEMU's too): a node that cannot discard keeps the bytes. */
    if (!bs->drv->bdrv_pdiscard || !bdrv_is_aligned(bs, offset, bytes)) {
        return 0;
    }
    return bdrv_write_ended(bs, bs->drv->bdrv_pdiscard(bs, offset, bytes,
                                                       errp));
}

/*
 * A failed flush is sticky (QEMU and PostgreSQL learnt it the hard way):
 * when fsync(2) fails, Linux may drop the dirty pages it could not write
 * and clear the error, so a later fsync succeeds over lost data. The node
 * remembers its first failure and every later flush fails with it; the
 * command then fails instead of reporting success.
 */
static GMutex bdrv_flush_error_lock;

static int bdrv_flush_node(BlockDriverState *bs, Error **errp)
{
    g_autofree char *first = NULL;
    Error *err = NULL;
    gint gen;

    g_mutex_lock(&bdrv_flush_error_lock);
    first = g_strdup(bs->flush_error);
    g_mutex_unlock(&bdrv_flush_error_lock);
    if (first) {
        error_setg(errp, "%s (an earlier flush failed: what it was to "
                   "write may be lost)", first);
        return -1;
    }
    /*
     * A protocol node with nothing written since its last flush has
     * nothing to sync. A format node always runs its flush: it writes
     * back cached metadata, which may change without a write request.
     */
    gen = g_atomic_int_get(&bs->write_gen);
    if (bs->drv->is_protocol && g_atomic_int_get(&bs->flushed_once) &&
        g_atomic_int_get(&bs->flushed_gen) == gen) {
        return 0;
    }
    if (!bs->drv->bdrv_flush || bs->drv->bdrv_flush(bs, &err) == 0) {
        g_atomic_int_set(&bs->flushed_gen, gen);
        g_atomic_int_set(&bs->flushed_once, TRUE);
        return 0;
    }
    g_mutex_lock(&bdrv_flush_error_lock);
    if (!bs->flush_error) {
        bs->flush_error = g_strdup(error_get_pretty(err));
    }
    g_mutex_unlock(&bdrv_flush_error_lock);
    error_propagate(errp, err);
    return -1;
}

int bdrv_flush(BlockDriverState *bs, Error **errp)
{
    if (bdrv_is_read_only(bs)) {
        return 0;
    }
    if (bdrv_flush_node(bs, errp) < 0) {
        return -1;
    }
    /* Then what the node wrote through: its children, in order. */
    for (BdrvChild *c = bs->children; c; c = c->next) {
        if (bdrv_flush(c->bs, errp) < 0) {
            return -1;
        }
    }
    return 0;
}

int bdrv_truncate(BlockDriverState *bs, uint64_t size, PreallocMode prealloc,
                  Error **errp)
{
    if (bdrv_is_read_only(bs)) {
        error_setg(errp, "Image is read-only");
        return -1;
    }
    if (!bs->drv->bdrv_truncate) {
        error_setg(errp, "Image format '%s' does not support resizing",
                   bs->drv->format_name);
        return -1;
    }
    if (prealloc == PREALLOC_MODE_METADATA &&
        !g_str_equal(bs->drv->format_name, "qcow2")) {
        error_setg(errp, "Unsupported preallocation mode 'metadata'");
        return -1;
    }
    return bdrv_write_ended(bs, bs->drv->bdrv_truncate(bs, size, prealloc,
                                                       errp));
}

uint32_t bdrv_get_logical_block_size(BlockDriverState *bs)
{
    uint32_t size = MAX(bs->request_alignment, BDRV_SECTOR_SIZE);

    if (bs->drv->bdrv_logical_block_size) {
        size = MAX(size, bs->drv->bdrv_logical_block_size(bs));
    }
    /* A format's (or a filter's) bytes are read from its file. */
    if (bs->file) {
        size = MAX(size, bdrv_get_logical_block_size(bs->file));
    }
    return size;
}

/* ---- Block status */

void bdrv_debug_event(BlockDriverState *bs, const char *event)
{
    while (bs && bs->drv && !bs->drv->bdrv_debug_event) {
        bs = bs->file;
    }
    if (bs && bs->drv) {
        bs->drv->bdrv_debug_event(bs, event);
    }
}

bool bdrv_block_status_is_data(BlockDriverState *bs, uint64_t offset,
                               uint64_t bytes, uint64_t *pnum)
{
    if (bs->drv->bdrv_block_status_is_data) {
        return bs->drv->bdrv_block_status_is_data(bs, offset, bytes, pnum);
    }
    *pnum = bytes;
    return true;
}

/*
 * Data of a format node at offset map of file: a hole there reads as
 * zeroes, and so does all of the run when the file ends in a hole, or
 * before map (QEMU's rule; errors are ignored: this only adds to what the
 * format said).
 */
static void bdrv_block_status_recurse(BlockDriverState *file, uint64_t map,
                                      uint64_t *pnum, int *ret)
{
    uint64_t file_pnum;
    int ret2 = bdrv_block_status(file, map, *pnum, &file_pnum, NULL, NULL,
                                 NULL);

    if (ret2 < 0) {
        return;
    }
    if ((ret2 & BDRV_BLOCK_EOF) &&
        (!file_pnum || (ret2 & BDRV_BLOCK_ZERO))) {
        *ret |= BDRV_BLOCK_ZERO;
    } else {
        *pnum = file_pnum;
        *ret |= ret2 & BDRV_BLOCK_ZERO;
    }
}

int bdrv_block_status(BlockDriverState *bs, uint64_t offset, uint64_t bytes,
                      uint64_t *pnum, uint64_t *map, BlockDriverState **file,
                      Error **errp)
{
    int64_t len = bdrv_getlength(bs, errp), backing_len;
    uint64_t local_map = 0;
    BlockDriverState *local_file = NULL;
    int ret;

    if (len < 0) {
        return -1;
    }
    if (offset >= (uint64_t)len || !bytes) {
        *pnum = 0;
        return offset >= (uint64_t)len ? BDRV_BLOCK_EOF : 0;
    }
    bytes = MIN(bytes, (uint64_t)len - offset);
    if (bs->drv->bdrv_block_status) {
        ret = bs->drv->bdrv_block_status(bs, offset, bytes, pnum, &local_map,
                                         &local_file, errp);
        if (ret < 0) {
            return -1;
        }
        assert(*pnum > 0);
        *pnum = MIN(*pnum, bytes);
    } else {
        *pnum = bytes;
        ret = BDRV_BLOCK_DATA;
        if (bs->drv->is_protocol) {
            ret |= BDRV_BLOCK_OFFSET_VALID;
            local_map = offset;
            local_file = bs;
        }
    }
    if ((ret & BDRV_BLOCK_RECURSE) && local_file && local_file != bs &&
        (ret & (BDRV_BLOCK_DATA | BDRV_BLOCK_ZERO | BDRV_BLOCK_OFFSET_VALID))
        == (BDRV_BLOCK_DATA | BDRV_BLOCK_OFFSET_VALID)) {
        bdrv_block_status_recurse(local_file, local_map, pnum, &ret);
    }
    ret &= ~BDRV_BLOCK_RECURSE;
    if (ret & (BDRV_BLOCK_DATA | BDRV_BLOCK_ZERO)) {
        ret |= BDRV_BLOCK_ALLOCATED;
    } else if (bs->drv->supports_backing) {
        /* No backing file, or one that ends before: zeroes (QEMU's rule). */
        backing_len = bs->backing ? bdrv_getlength(bs->backing, NULL) : 0;
        if (!bs->backing ||
            (backing_len >= 0 && offset >= (uint64_t)backing_len)) {
            ret |= BDRV_BLOCK_ZERO;
        }
    }
    if (offset + *pnum == (uint64_t)len) {
        ret |= BDRV_BLOCK_EOF;
    }
    if (map) {
        *map = local_map;
    }
    if (file) {
        *file = local_file;
    }
    return ret;
}

int bdrv_block_status_above(BlockDriverState *bs, BlockDriverState *base,
                            uint64_t offset, uint64_t bytes, uint64_t *pnum,
                            Error **errp)
{
    uint64_t eof = UINT64_MAX;
    int ret;

    if (bs == base) {
        *pnum = bytes;
        return 0;
    }
    ret = bdrv_block_status(bs, offset, bytes, pnum, NULL, NULL, errp);
    if (ret < 0 || !*pnum || (ret & BDRV_BLOCK_ALLOCATED)) {
        return ret;
    }
    if (ret & BDRV_BLOCK_EOF) {
        eof = offset + *pnum;
    }
    bytes = *pnum;
    /* QEMU's walk: a filter's child, else the backing file. */
    for (BlockDriverState *p = bs->drv->is_filter ? bs->file : bs->backing;
         p && p != base; p = p->drv->is_filter ? p->file : p->backing) {
        ret = bdrv_block_status(p, offset, bytes, pnum, NULL, NULL, errp);
        if (ret < 0) {
            return -1;
        }
        if (!*pnum) {
            /* Past the end of a shorter node below: zeroes, held there. */
            *pnum = bytes;
            ret = BDRV_BLOCK_ZERO | BDRV_BLOCK_ALLOCATED;
            break;
        }
        if (ret & BDRV_BLOCK_ALLOCATED) {
            ret &= ~BDRV_BLOCK_EOF;
            break;
        }
        bytes = *pnum;
    }
    if (offset + *pnum == eof) {
        ret |= BDRV_BLOCK_EOF;
    }
    return ret;
}

/* The calling thread's turn (bdrv_set_write_turn()). */
static _Thread_local BdrvTurnFunc *write_turn_fn;
static _Thread_local void *write_turn_opaque;
static _Thread_local bool write_turn_held;

void bdrv_set_write_turn(BdrvTurnFunc *fn, void *opaque)
{
    write_turn_fn = fn;
    write_turn_opaque = opaque;
    write_turn_held = false;
}

bool bdrv_write_turn(void)
{
    BdrvTurnFunc *fn = write_turn_fn;

    if (fn) {
        write_turn_fn = NULL;
        fn(write_turn_opaque);
        write_turn_held = true;
    }
    return write_turn_held;
}

bool bdrv_write_turn_pending(void)
{
    return write_turn_fn != NULL;
}

bool bdrv_can_write_zeroes(BlockDriverState *bs)
{
    return bs->drv->bdrv_pwrite_zeroes != NULL;
}

bool bdrv_has_zero_init(BlockDriverState *bs)
{
    return bs->drv->bdrv_has_zero_init && bs->drv->bdrv_has_zero_init(bs);
}

/* ---- Copy offloading */

/* The node holding bs's bytes, down through pass-through nodes. */
static BlockDriverState *bdrv_skip_passthrough(BlockDriverState *bs,
                                               uint64_t *offset)
{
    while (bs && bs->drv->bdrv_passthrough) {
        bs = bs->drv->bdrv_passthrough(bs, offset);
    }
    return bs;
}

int bdrv_copy_range(BlockDriverState *src, uint64_t src_offset,
                    BlockDriverState *dst, uint64_t dst_offset,
                    uint64_t bytes, Error **errp)
{
    BlockDriverState *s = bdrv_skip_passthrough(src, &src_offset);
    BlockDriverState *d = bdrv_skip_passthrough(dst, &dst_offset);

    if (!s || !d || !s->drv->bdrv_copy_range || s->drv != d->drv) {
        error_setg(errp, "Copy offloading is not supported between '%s' "
                   "and '%s' nodes", src->drv->format_name,
                   dst->drv->format_name);
        return -1;
    }
    return bdrv_write_ended(d, s->drv->bdrv_copy_range(s, src_offset, d,
                                                       dst_offset, bytes,
                                                       errp));
}
