/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The "null-co" and "null-aio" protocol drivers, as QEMU's: an image of
 * nothing, for tests and benchmarks. Writes are dropped, reads return
 * zeroes; with read-zeroes=on block status says so (QEMU's default,
 * read-zeroes=off, leaves read buffers undefined: here they are zeroed
 * either way, which is one of the things undefined allows, but block
 * status then says data, as QEMU's).
 *
 *   json:{"driver":"null-co","size":1048576,"read-zeroes":true}
 *   --image-opts driver=raw,file.driver=null-co,file.size=1G
 *
 * Options: size (default 1 GiB), read-zeroes (default off), latency-ns
 * (taken; no delay is made).
 */
#include <string.h>

#include "block/block_int.h"

typedef struct BDRVNullState {
    uint64_t size;
    bool read_zeroes;
} BDRVNullState;

static int null_open(BlockDriverState *bs, GHashTable *opts, int flags,
                     Error **errp)
{
    BDRVNullState *s = bs->opaque;
    g_autofree char *filename = qemu_opt_take(opts, "filename");
    uint64_t latency;

    if (qemu_opt_take_size(opts, "size", 1ULL << 30, &s->size, errp) < 0 ||
        qemu_opt_take_bool(opts, "read-zeroes", false, &s->read_zeroes,
                           errp) < 0 ||
        qemu_opt_take_uint(opts, "latency-ns", 0, &latency, errp) < 0) {
        return -1;
    }
    /* As QEMU names the node: what json: gave, for messages. */
    bs->filename = g_strdup_printf("null-co://%s", filename ? filename : "");
    return 0;
}

static int null_pread(BlockDriverState *bs, uint64_t offset, void *buf,
                      size_t bytes, Error **errp)
{
    memset(buf, 0, bytes);
    return 0;
}

static int null_pwrite(BlockDriverState *bs, uint64_t offset,
                       const void *buf, size_t bytes, int flags,
                       Error **errp)
{
    return 0;
}

static int null_pwrite_zeroes(BlockDriverState *bs, uint64_t offset,
                              size_t bytes, int flags, Error **errp)
{
    return 0;
}

static int null_flush(BlockDriverState *bs, Error **errp)
{
    return 0;
}

static int64_t null_getlength(BlockDriverState *bs, Error **errp)
{
    return ((BDRVNullState *)bs->opaque)->size;
}

static int null_truncate(BlockDriverState *bs, uint64_t size,
                         PreallocMode prealloc, Error **errp)
{
    error_setg(errp, "Cannot resize null-co nodes");
    return -1;
}

/* QEMU's null_co_block_status(): zero with read-zeroes, else data. */
static int null_block_status(BlockDriverState *bs, uint64_t offset,
                             uint64_t bytes, uint64_t *pnum, uint64_t *map,
                             BlockDriverState **file, Error **errp)
{
    BDRVNullState *s = bs->opaque;

    *pnum = bytes;
    *map = offset;
    *file = bs;
    return BDRV_BLOCK_OFFSET_VALID |
           (s->read_zeroes ? BDRV_BLOCK_ZERO : BDRV_BLOCK_DATA);
}

static bool null_block_status_is_data(BlockDriverState *bs, uint64_t offset,
                                      uint64_t bytes, uint64_t *pnum)
{
    *pnum = bytes;
    return !((BDRVNullState *)bs->opaque)->read_zeroes;
}

#define NULL_DRIVER(var, name)                                              \
    const BlockDriver var = {                                               \
        .format_name = name,                                                \
        .instance_size = sizeof(BDRVNullState),                             \
        .is_protocol = true,                                                \
        .protocol_name = name,                                              \
        .bdrv_open = null_open,                                             \
        .bdrv_pread = null_pread,                                           \
        .bdrv_pwrite = null_pwrite,                                         \
        .bdrv_pwrite_zeroes = null_pwrite_zeroes,                           \
        .bdrv_flush = null_flush,                                           \
        .bdrv_getlength = null_getlength,                                   \
        .bdrv_truncate = null_truncate,                                     \
        .bdrv_block_status = null_block_status,                             \
        .bdrv_block_status_is_data = null_block_status_is_data,             \
    }

NULL_DRIVER(bdrv_null_co, "null-co");
NULL_DRIVER(bdrv_null_aio, "null-aio");
