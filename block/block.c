/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The block layer core: driver lookup, opening nodes from options, and the
 * checks every request passes before it reaches a driver.
 */
#include <assert.h>
#include <errno.h>
#include <string.h>

#include "block/block_int.h"

static const char *const prealloc_mode_names[PREALLOC_MODE__MAX] = {
    [PREALLOC_MODE_OFF] = "off",
    [PREALLOC_MODE_FALLOC] = "falloc",
    [PREALLOC_MODE_FULL] = "full",
};

int prealloc_mode_parse(const char *name)
{
    for (int i = 0; i < PREALLOC_MODE__MAX; i++) {
        if (g_str_equal(name, prealloc_mode_names[i])) {
            return i;
        }
    }
    return -1;
}

const char *prealloc_mode_str(PreallocMode mode)
{
    return prealloc_mode_names[mode];
}

static const BlockDriver *bdrv_find_driver(const char *name)
{
    for (size_t i = 0; bdrv_drivers[i]; i++) {
        if (g_str_equal(bdrv_drivers[i]->format_name, name)) {
            return bdrv_drivers[i];
        }
    }
    return NULL;
}

const BlockDriver *bdrv_probe_all(const uint8_t *buf, int buf_size,
                                  const uint8_t *tail, int tail_size,
                                  const char *filename)
{
    const BlockDriver *best = NULL;
    int best_score = 0;

    for (size_t i = 0; bdrv_drivers[i]; i++) {
        const BlockDriver *drv = bdrv_drivers[i];
        int score = 0;

        if (drv->bdrv_probe) {
            score = drv->bdrv_probe(buf, buf_size, filename);
        }
        if (drv->bdrv_probe_tail) {
            score = MAX(score, drv->bdrv_probe_tail(tail, tail_size));
        }
        if (score > best_score) {
            best = drv;
            best_score = score;
        }
    }
    return best;
}

int bdrv_probe_read(BlockDriverState *file, uint8_t *buf, int *buf_size,
                    uint8_t *tail, int *tail_size, Error **errp)
{
    int64_t len = bdrv_getlength_exact(file, errp);

    if (len < 0) {
        return -1;
    }
    *buf_size = MIN((uint64_t)len, BDRV_PROBE_BUF_SIZE);
    *tail_size = MIN((uint64_t)len, BDRV_PROBE_TAIL_SIZE);
    if (file->drv->bdrv_pread(file, 0, buf, *buf_size, errp) < 0 ||
        file->drv->bdrv_pread(file, len - *tail_size, tail, *tail_size,
                              errp) < 0) {
        return -1;
    }
    return 0;
}

/* The format of the image in file, asking every format driver. */
static const BlockDriver *bdrv_probe_format(BlockDriverState *file,
                                            Error **errp)
{
    uint8_t buf[BDRV_PROBE_BUF_SIZE];
    uint8_t tail[BDRV_PROBE_TAIL_SIZE];
    const BlockDriver *drv;
    int n, tail_n;

    if (bdrv_probe_read(file, buf, &n, tail, &tail_n, errp) < 0) {
        return NULL;
    }
    drv = bdrv_probe_all(buf, n, tail, tail_n, bdrv_get_filename(file));
    if (!drv) {
        error_setg(errp, "Could not determine image format: No compatible "
                   "driver found");
    }
    return drv;
}

static void bdrv_free(BlockDriverState *bs)
{
    g_free(bs->filename);
    g_free(bs->opaque);
    g_free(bs);
}

BlockDriverState *bdrv_new_node(const BlockDriver *drv,
                                BlockDriverState *file, int flags)
{
    BlockDriverState *bs = g_new0(BlockDriverState, 1);

    bs->drv = drv;
    bs->opaque = g_malloc0(drv->instance_size);
    bs->open_flags = flags;
    bs->file = file;
    return bs;
}

/* Open a node from opts (taken: whatever is left is reported unknown). */
static BlockDriverState *bdrv_open_opts(GHashTable *opts, int flags,
                                        Error **errp)
{
    g_autofree char *driver = qemu_opt_take(opts, "driver");
    g_autofree char *unknown = NULL;
    g_autoptr(BlockDriverState) file = NULL;
    const BlockDriver *drv = NULL;
    BlockDriverState *bs;
    bool force_share;

    /* QEMU's generic option, inherited by the children (qemu-img -U). */
    if (qemu_opt_take_bool(opts, "force-share", false, &force_share,
                           errp) < 0) {
        return NULL;
    }
    if (force_share && (flags & BDRV_O_RDWR)) {
        error_setg(errp, "force-share=on can only be used with read-only "
                   "images");
        return NULL;
    }
    if (force_share) {
        flags |= BDRV_O_FORCE_SHARE;
    }
    if (driver) {
        drv = bdrv_find_driver(driver);
        if (!drv) {
            error_setg(errp, "Unknown driver '%s'", driver);
            return NULL;
        }
    } else if (g_hash_table_contains(opts, "filename")) {
        drv = &bdrv_file;
    }

    if (!drv || !drv->is_protocol) {
        file = bdrv_open_child(opts, "file", flags, false, errp);
        if (!file) {
            return NULL;
        }
        if (!drv) {
            drv = bdrv_probe_format(file, errp);
            if (!drv) {
                return NULL;
            }
        }
    }

    bs = bdrv_new_node(drv, g_steal_pointer(&file), flags);
    if (drv->bdrv_open(bs, opts, flags, errp) < 0) {
        bdrv_close(bs->file);
        bdrv_free(bs);
        return NULL;
    }
    unknown = qemu_opts_first_key(opts);
    if (unknown) {
        error_setg(errp, "Block %s '%s' does not support the option '%s'",
                   drv->is_protocol ? "protocol" : "format",
                   drv->format_name, unknown);
        bdrv_close(bs);
        return NULL;
    }
    return bs;
}

bool bdrv_opts_has_child(GHashTable *opts, const char *name)
{
    g_autofree char *dotted = g_strconcat(name, ".", NULL);
    GHashTableIter iter;
    gpointer key;

    if (g_hash_table_contains(opts, name)) {
        return true;
    }
    g_hash_table_iter_init(&iter, opts);
    while (g_hash_table_iter_next(&iter, &key, NULL)) {
        if (g_str_has_prefix(key, dotted)) {
            return true;
        }
    }
    return false;
}

BlockDriverState *bdrv_open_child(GHashTable *opts, const char *name,
                                  int flags, bool allow_none, Error **errp)
{
    g_autoptr(GHashTable) sub = qemu_opts_extract_prefix(opts, name);
    g_autofree char *path = qemu_opt_take(opts, name);

    if (path) {
        if (g_hash_table_size(sub)) {
            error_setg(errp, "Both '%s' and '%s.*' options given", name,
                       name);
            return NULL;
        }
        g_hash_table_insert(sub, g_strdup("filename"), g_steal_pointer(&path));
    }
    if (g_hash_table_size(sub) == 0) {
        if (!allow_none) {
            error_setg(errp, "A block device must be specified for \"%s\"",
                       name);
        }
        return NULL;
    }
    if (!g_hash_table_contains(sub, "driver")) {
        g_hash_table_insert(sub, g_strdup("driver"), g_strdup("file"));
    }
    return bdrv_open_opts(sub, flags, errp);
}

const char *bdrv_parse_filename(const char *filename, Error **errp)
{
    /* QEMU's path_has_protocol(): a colon before any slash. */
    size_t n = strcspn(filename, ":/");
    g_autofree char *proto = NULL;

    if (filename[n] != ':') {
        return filename;
    }
    proto = g_strndup(filename, n);
    if (g_str_equal(proto, "file")) {
        return filename + n + 1;
    }
    error_setg(errp, "Unknown protocol '%s'", proto);
    return NULL;
}

/*
 * Add the options of a "json:{...}" file name to opts; the user's -f wins
 * over its "driver", as in qemu-img.
 */
static int bdrv_merge_json_filename(GHashTable *opts, const char *filename,
                                    Error **errp)
{
    g_autoptr(GHashTable) json = qemu_opts_from_json(filename + 5, errp);
    GHashTableIter iter;
    gpointer key, value;

    if (!json) {
        return -1;
    }
    g_hash_table_iter_init(&iter, json);
    while (g_hash_table_iter_next(&iter, &key, &value)) {
        g_hash_table_iter_steal(&iter);
        g_hash_table_insert(opts, key, value);
    }
    return 0;
}

BlockDriverState *bdrv_open(const char *filename, const char *format,
                            GHashTable *options, int flags, Error **errp)
{
    g_autoptr(GHashTable) opts = options ? qemu_opts_copy(options)
                                         : qemu_opts_new();
    const char *driver;

    if (filename && g_str_has_prefix(filename, "json:")) {
        if (bdrv_merge_json_filename(opts, filename, errp) < 0) {
            return NULL;
        }
        if (format) {
            g_hash_table_insert(opts, g_strdup("driver"), g_strdup(format));
        }
        filename = NULL;
    } else if (filename) {
        filename = bdrv_parse_filename(filename, errp);
        if (!filename) {
            return NULL;
        }
    }
    if (format) {
        driver = g_hash_table_lookup(opts, "driver");
        if (driver && !g_str_equal(driver, format)) {
            error_setg(errp, "Cannot use image format '%s' with driver '%s'",
                       format, driver);
            return NULL;
        }
        g_hash_table_insert(opts, g_strdup("driver"), g_strdup(format));
    }
    if (filename) {
        const BlockDriver *drv = format ? bdrv_find_driver(format) : NULL;

        g_hash_table_insert(opts, g_strdup(drv && drv->is_protocol ?
                                           "filename" : "file.filename"),
                            g_strdup(filename));
    }
    return bdrv_open_opts(opts, flags, errp);
}

void bdrv_close(BlockDriverState *bs)
{
    if (!bs) {
        return;
    }
    if (bs->open_flags & BDRV_O_RDWR) {
        /* Nobody is left to hear a failure: close() reports what it can. */
        bdrv_flush(bs, NULL);
    }
    if (bs->drv->bdrv_close) {
        bs->drv->bdrv_close(bs);
    }
    bdrv_close(bs->backing);
    bdrv_close(bs->file);
    bdrv_free(bs);
}

BlockDriverState *bdrv_get_backing(BlockDriverState *bs)
{
    return bs->backing;
}

const char *bdrv_get_format_name(BlockDriverState *bs)
{
    return bs->drv->format_name;
}

const char *bdrv_get_filename(BlockDriverState *bs)
{
    while (!bs->filename && bs->file) {
        bs = bs->file;
    }
    return bs->filename ? bs->filename : "";
}

bool bdrv_is_read_only(BlockDriverState *bs)
{
    return !(bs->open_flags & BDRV_O_RDWR);
}

bool bdrv_is_encrypted(BlockDriverState *bs)
{
    return bs->drv->bdrv_is_encrypted && bs->drv->bdrv_is_encrypted(bs);
}

const char *bdrv_get_warning(BlockDriverState *bs)
{
    return bs->drv->bdrv_get_warning ? bs->drv->bdrv_get_warning(bs) : NULL;
}

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

int64_t bdrv_get_allocated_file_size(BlockDriverState *bs)
{
    if (bs->drv->bdrv_get_allocated_file_size) {
        return bs->drv->bdrv_get_allocated_file_size(bs);
    }
    return bs->file ? bdrv_get_allocated_file_size(bs->file) : -1;
}

static int bdrv_check_request(BlockDriverState *bs, uint64_t offset,
                              size_t bytes, Error **errp)
{
    int64_t len = bdrv_getlength(bs, errp);

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

int bdrv_pread(BlockDriverState *bs, uint64_t offset, void *buf,
               size_t bytes, Error **errp)
{
    if (bdrv_check_request(bs, offset, bytes, errp) < 0) {
        return -1;
    }
    return bs->drv->bdrv_pread(bs, offset, buf, bytes, errp);
}

int bdrv_pwrite(BlockDriverState *bs, uint64_t offset, const void *buf,
                size_t bytes, int flags, Error **errp)
{
    if (bdrv_is_read_only(bs)) {
        error_setg(errp, "Image is read-only");
        return -1;
    }
    if (bdrv_check_request(bs, offset, bytes, errp) < 0) {
        return -1;
    }
    return bs->drv->bdrv_pwrite(bs, offset, buf, bytes, flags, errp);
}

bool bdrv_supports_compressed_writes(BlockDriverState *bs)
{
    return bs->drv->bdrv_pwrite_compressed != NULL;
}

int bdrv_pwrite_compressed(BlockDriverState *bs, uint64_t offset,
                           const void *buf, size_t bytes, Error **errp)
{
    if (!bdrv_supports_compressed_writes(bs)) {
        error_setg(errp, "Compression not supported for this file format");
        return -1;
    }
    if (bdrv_is_read_only(bs)) {
        error_setg(errp, "Image is read-only");
        return -1;
    }
    if (bdrv_check_request(bs, offset, bytes, errp) < 0) {
        return -1;
    }
    return bs->drv->bdrv_pwrite_compressed(bs, offset, buf, bytes, errp);
}

int bdrv_flush(BlockDriverState *bs, Error **errp)
{
    if (bdrv_is_read_only(bs)) {
        return 0;
    }
    if (bs->drv->bdrv_flush && bs->drv->bdrv_flush(bs, errp) < 0) {
        return -1;
    }
    return bs->file ? bdrv_flush(bs->file, errp) : 0;
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
    return bs->drv->bdrv_truncate(bs, size, prealloc, errp);
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

bool bdrv_has_zero_init(BlockDriverState *bs)
{
    return bs->drv->bdrv_has_zero_init && bs->drv->bdrv_has_zero_init(bs);
}

static const BlockDriver *bdrv_find_create_driver(const char *format,
                                                  Error **errp)
{
    const BlockDriver *drv = bdrv_find_driver(format);

    if (!drv) {
        error_setg(errp, "Unknown file format '%s'", format);
        return NULL;
    }
    if (!drv->bdrv_create) {
        error_setg(errp, "Format driver '%s' does not support image "
                   "creation", format);
        return NULL;
    }
    return drv;
}

int bdrv_create_take_prealloc(GHashTable *opts, PreallocMode *prealloc,
                              Error **errp)
{
    g_autofree char *str = qemu_opt_take(opts, "preallocation");
    int mode;

    *prealloc = PREALLOC_MODE_OFF;
    if (str) {
        mode = prealloc_mode_parse(str);
        if (mode < 0) {
            error_setg(errp, "Invalid preallocation mode: '%s'", str);
            return -1;
        }
        *prealloc = mode;
    }
    return 0;
}

int bdrv_create_check_leftovers(GHashTable *opts, Error **errp)
{
    g_autofree char *unknown = qemu_opts_first_key(opts);

    if (unknown) {
        error_setg(errp, "Invalid parameter '%s'", unknown);
        return -1;
    }
    return 0;
}

int bdrv_create_take_size_prealloc(GHashTable *opts, uint64_t *size,
                                   PreallocMode *prealloc, Error **errp)
{
    if (qemu_opt_take_size(opts, "size", 0, size, errp) < 0 ||
        bdrv_create_take_prealloc(opts, prealloc, errp) < 0 ||
        bdrv_create_check_leftovers(opts, errp) < 0) {
        return -1;
    }
    return 0;
}

static volatile sig_atomic_t *bdrv_interrupt_flag;

void bdrv_set_interrupt_flag(volatile sig_atomic_t *flag)
{
    bdrv_interrupt_flag = flag;
}

bool bdrv_interrupted(void)
{
    return bdrv_interrupt_flag && *bdrv_interrupt_flag;
}

int bdrv_create(const char *format, const char *filename, GHashTable *opts,
                Error **errp)
{
    const BlockDriver *drv = bdrv_find_create_driver(format, errp);

    if (!drv) {
        return -1;
    }
    if (drv->bdrv_create(filename, opts, 0, NULL, errp) < 0) {
        bdrv_create_file_release(filename);     /* nothing is left */
        return -1;
    }
    return bdrv_create_file_commit(filename, errp);
}

BlockDriverState *bdrv_create_open(const char *format, const char *filename,
                                   GHashTable *opts, int flags, Error **errp)
{
    const BlockDriver *drv = bdrv_find_create_driver(format, errp);
    BlockDriverState *bs = NULL;

    flags |= BDRV_O_RDWR;
    if (drv && drv->bdrv_create(filename, opts, flags, &bs, errp) == 0 &&
        !bs) {
        bs = bdrv_open(filename, format, NULL, flags, errp);
    }
    /*
     * The new file now lives in bs, unnamed until bdrv_create_finish();
     * if the creation failed, it goes.
     */
    bdrv_create_file_release(filename);
    return bs;
}

int bdrv_create_finish(BlockDriverState *bs, Error **errp)
{
    if (bdrv_flush(bs, errp) < 0) {
        return -1;
    }
    for (; bs; bs = bs->file) {
        if (bs->drv->bdrv_create_finish &&
            bs->drv->bdrv_create_finish(bs, errp) < 0) {
            return -1;
        }
    }
    return 0;
}

int bdrv_delete_file(BlockDriverState *bs, Error **errp)
{
    if (!bs->drv->bdrv_delete_file) {
        error_setg(errp, "Driver '%s' does not support image deletion",
                   bs->drv->format_name);
        return -1;
    }
    if (bdrv_is_read_only(bs)) {
        error_setg(errp, "Image is read-only");
        return -1;
    }
    return bs->drv->bdrv_delete_file(bs, errp);
}

int bdrv_measure(const char *format, GHashTable *opts, BlockDriverState *in_bs,
                 uint64_t size, BlockMeasureInfo *info, Error **errp)
{
    /* Not bdrv_find_create_driver(): qcow2 is measured, not created. */
    const BlockDriver *drv = bdrv_find_driver(format);

    if (!drv) {
        error_setg(errp, "Unknown file format '%s'", format);
        return -1;
    }
    if (!drv->bdrv_measure) {
        error_setg(errp, "Format driver '%s' does not support size "
                   "measurement", format);
        return -1;
    }
    memset(info, 0, sizeof(*info));
    return drv->bdrv_measure(opts, in_bs, size, info, errp);
}

int bdrv_amend(BlockDriverState *bs, GHashTable *opts, bool force,
               Error **errp)
{
    if (!bs->drv->bdrv_amend) {
        error_setg(errp, "Format driver '%s' does not support option "
                   "amendment", bs->drv->format_name);
        return -1;
    }
    if (bdrv_is_read_only(bs)) {
        error_setg(errp, "Image is read-only");
        return -1;
    }
    return bs->drv->bdrv_amend(bs, opts, force, errp);
}

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
    return s->drv->bdrv_copy_range(s, src_offset, d, dst_offset, bytes,
                                   errp);
}

static int option_desc_compare(gconstpointer a, gconstpointer b)
{
    const BlockOptionDesc *x = *(const BlockOptionDesc *const *)a;
    const BlockOptionDesc *y = *(const BlockOptionDesc *const *)b;

    return strcmp(x->name, y->name);
}

static void option_list_add(GPtrArray *list, const BlockOptionDesc *descs)
{
    for (; descs && descs->name; descs++) {
        g_ptr_array_add(list, (gpointer)descs);
    }
}

GPtrArray *bdrv_create_option_list(const char *format, bool with_protocol,
                                   Error **errp)
{
    const BlockDriver *drv = bdrv_find_create_driver(format, errp);
    GPtrArray *list;

    if (!drv) {
        return NULL;
    }
    if (!drv->create_opts) {
        /*
         * A format without a table may be one that only refuses (those of
         * block/foreign.c): its refusal, as create -f would give it.
         */
        g_autoptr(GHashTable) none = qemu_opts_new();
        BlockMeasureInfo info;

        if (bdrv_measure(format, none, NULL, 0, &info, errp) < 0) {
            return NULL;
        }
    }
    list = g_ptr_array_new();
    option_list_add(list, drv->create_opts);
    if (with_protocol && !drv->is_protocol) {
        option_list_add(list, bdrv_file.create_opts);
    }
    g_ptr_array_sort(list, option_desc_compare);
    return list;
}

GPtrArray *bdrv_amend_option_list(const char *format, Error **errp)
{
    const BlockDriver *drv = bdrv_find_driver(format);
    GPtrArray *list;

    if (!drv) {
        error_setg(errp, "Unknown file format '%s'", format);
        return NULL;
    }
    if (!drv->bdrv_amend) {
        error_setg(errp, "Format driver '%s' does not support option "
                   "amendment", format);
        return NULL;
    }
    list = g_ptr_array_new();
    option_list_add(list, drv->amend_opts);
    g_ptr_array_sort(list, option_desc_compare);
    return list;
}

int bdrv_check(BlockDriverState *bs, BdrvCheckResult *res, BdrvCheckMode fix)
{
    void (*report)(void *, bool, const char *) = res->report;
    void *opaque = res->report_opaque;

    if (!bs->drv->bdrv_check) {
        return -ENOTSUP;
    }
    /* Repairs write: the caller opened the image read-write for them. */
    if (fix && bdrv_is_read_only(bs)) {
        return -EACCES;
    }
    memset(res, 0, sizeof(*res));
    res->report = report;
    res->report_opaque = opaque;
    return bs->drv->bdrv_check(bs, res, fix);
}
