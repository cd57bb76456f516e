/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The "blkdebug" filter driver: error injection in the spirit of QEMU's
 * blkdebug. It passes every request to its "file" child, except the
 * ones its rules pick by kind and number, which it fails (with an errno
 * of the rule's choice) or stops the process at (SIGKILL, as a crash or
 * a power cut would: the write before it reached the disk, or half of it
 * did). Tests sweep N over a command's requests to see that a writer
 * survives a fault at any point:
 *
 *   --image-opts driver=raw,file.driver=blkdebug,file.fail-write=3,
 *                file.errno=ENOSPC,file.file.filename=disk.img
 *
 * Options (each rule counts the requests of its kind from 1, across all
 * threads; 0, the default, never fires):
 *   fail-read=N, fail-write=N, fail-flush=N, fail-truncate=N
 *                      that request fails with errno (default EIO), and
 *                      the fail-count - 1 after it (fail-count=0: every
 *                      one from N on, a device that stays broken);
 *   kill-write=N       the process is killed before the N-th write;
 *   torn-write=N       the first half of the N-th write (rounded down to
 *                      512 bytes) reaches the child, then the kill;
 *   kill-flush=N       killed before the N-th flush;
 *   bad-offset=O, bad-bytes=L
 *                      a bad area: every read that touches [O, O + L)
 *                      fails with errno, every time (a medium error; the
 *                      rest of the device reads as usual).
 * Zero writes count as writes (they are written as data here); a node
 * opened not to sync (BDRV_O_NO_FLUSH, -t unsafe) has no flushes.
 */
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "block/block_int.h"
#include "block/blkdebug-rules.h"

typedef enum {
    BLKDEBUG_READ,
    BLKDEBUG_WRITE,
    BLKDEBUG_FLUSH,
    BLKDEBUG_TRUNCATE,
    BLKDEBUG__MAX,
} BlkdebugKind;

static const char *const blkdebug_kind_names[BLKDEBUG__MAX] = {
    [BLKDEBUG_READ] = "read",
    [BLKDEBUG_WRITE] = "write",
    [BLKDEBUG_FLUSH] = "flush",
    [BLKDEBUG_TRUNCATE] = "truncate",
};

typedef struct BDRVBlkdebugState {
    uint64_t fail_at[BLKDEBUG__MAX];
    uint64_t fail_count;
    int error;
    uint64_t kill_write, torn_write, kill_flush;
    uint64_t bad_offset, bad_bytes;     /* bad_bytes 0: no bad area */
    gint counter[BLKDEBUG__MAX];        /* requests so far, atomic */
    BlkdebugRules *rules;               /* QEMU's syntax */
} BDRVBlkdebugState;

static const struct {
    const char *name;
    int value;
} blkdebug_errnos[] = {
    { "EIO", EIO }, { "ENOSPC", ENOSPC }, { "EROFS", EROFS },
    { "EDQUOT", EDQUOT }, { "ENOMEM", ENOMEM },
};

static int blkdebug_take_errno(GHashTable *opts, int *error, Error **errp)
{
    g_autofree char *name = qemu_opt_take(opts, "errno");

    *error = EIO;
    if (!name) {
        return 0;
    }
    for (size_t i = 0; i < G_N_ELEMENTS(blkdebug_errnos); i++) {
        if (g_str_equal(name, blkdebug_errnos[i].name)) {
            *error = blkdebug_errnos[i].value;
            return 0;
        }
    }
    error_setg(errp, "Parameter 'errno' does not accept value '%s' (use "
               "EIO, ENOSPC, EROFS, EDQUOT or ENOMEM)", name);
    return -1;
}

static int blkdebug_open(BlockDriverState *bs, GHashTable *opts, int flags,
                         Error **errp)
{
    static const char *const shape[] = {
        "max-transfer", "opt-write-zero", "max-write-zero", "opt-discard",
        "max-discard",
    };
    BDRVBlkdebugState *s = bs->opaque;
    uint64_t align = 0, ignored;
    GHashTableIter iter;
    gpointer key;

    /*
     * blkdebug:CONFIG:IMAGE says a config file and the image, nothing
     * more: with any other option (rules, set-state, our fail-*), the
     * node is named by its options, as in QEMU (qemu-iotests 110).
     */
    g_hash_table_iter_init(&iter, opts);
    while (g_hash_table_iter_next(&iter, &key, NULL)) {
        if (!g_str_equal(key, "config") && !g_str_has_prefix(key, "file.")) {
            bs->needs_json_name = true;
        }
    }

    for (int k = 0; k < BLKDEBUG__MAX; k++) {
        g_autofree char *key = g_strconcat("fail-", blkdebug_kind_names[k],
                                           NULL);

        if (qemu_opt_take_uint(opts, key, 0, &s->fail_at[k], errp) < 0) {
            return -1;
        }
    }
    if (qemu_opt_take_uint(opts, "fail-count", 1, &s->fail_count,
                           errp) < 0 ||
        qemu_opt_take_uint(opts, "kill-write", 0, &s->kill_write,
                           errp) < 0 ||
        qemu_opt_take_uint(opts, "torn-write", 0, &s->torn_write,
                           errp) < 0 ||
        qemu_opt_take_uint(opts, "kill-flush", 0, &s->kill_flush,
                           errp) < 0 ||
        qemu_opt_take_uint(opts, "bad-offset", 0, &s->bad_offset,
                           errp) < 0 ||
        qemu_opt_take_uint(opts, "bad-bytes", 0, &s->bad_bytes, errp) < 0 ||
        blkdebug_take_errno(opts, &s->error, errp) < 0) {
        return -1;
    }
    s->rules = blkdebug_rules_take(opts, errp);
    if (!s->rules) {
        return -1;
    }
    /*
     * QEMU's request-shape options (sizes there: "4k" too): align is
     * honoured, the rest taken.
     */
    if (qemu_opt_take_size(opts, "align", 0, &align, errp) < 0) {
        return -1;
    }
    for (size_t i = 0; i < G_N_ELEMENTS(shape); i++) {
        if (qemu_opt_take_size(opts, shape[i], 0, &ignored, errp) < 0) {
            return -1;
        }
    }
    if (align && (align & (align - 1))) {
        error_setg(errp, "Cannot meet constraints with align %"
                   G_GUINT64_FORMAT, align);
        return -1;
    }
    /* What the child takes in one piece, the filter takes too. */
    bs->request_alignment = MAX(bs->file->request_alignment, align);
    return 0;
}

static void blkdebug_close(BlockDriverState *bs)
{
    BDRVBlkdebugState *s = bs->opaque;

    blkdebug_rules_free(s->rules);
}

/* A format above said what it is about to do (bdrv_debug_event()). */
static void blkdebug_debug_event(BlockDriverState *bs, const char *event)
{
    BDRVBlkdebugState *s = bs->opaque;

    blkdebug_rules_event(s->rules, event);
}

/*
 * QEMU's rules: the request's own event (the generic layer's, in QEMU:
 * pwritev, flush_to_os and flush_to_disk; NULL for none), then its check.
 * errp on failure.
 */
static bool blkdebug_rules_fail(BlockDriverState *bs, const char *ev1,
                                const char *ev2, BlkdebugIOType type,
                                uint64_t offset, uint64_t bytes,
                                Error **errp)
{
    BDRVBlkdebugState *s = bs->opaque;
    int error;

    if (blkdebug_rules_empty(s->rules)) {
        return false;
    }
    if (ev1) {
        blkdebug_rules_event(s->rules, ev1);
    }
    if (ev2) {
        blkdebug_rules_event(s->rules, ev2);
    }
    error = blkdebug_rules_check(s->rules, type, offset, bytes);
    if (!error) {
        return false;
    }
    if (type == BLKDEBUG_IO_FLUSH) {
        error_setg_errno(errp, error, "Could not flush '%s' (blkdebug: "
                         "injected)", bdrv_get_filename(bs));
    } else if (type == BLKDEBUG_IO_BLOCK_STATUS) {
        error_setg_errno(errp, error, "Could not get the block status of "
                         "'%s' at offset %" G_GUINT64_FORMAT " (blkdebug: "
                         "injected)", bdrv_get_filename(bs), offset);
    } else {
        error_setg_errno(errp, error, "Could not %s '%s' at offset %"
                         G_GUINT64_FORMAT " (blkdebug: injected)",
                         type == BLKDEBUG_IO_READ ? "read" : "write",
                         bdrv_get_filename(bs), offset);
    }
    return true;
}

/* Count a request of kind k: its number, from 1. */
static uint64_t blkdebug_count(BDRVBlkdebugState *s, BlkdebugKind k)
{
    return (uint64_t)(guint)g_atomic_int_add(&s->counter[k], 1) + 1;
}

/* Whether request n of kind k fails; errp then says so. */
static bool blkdebug_fails(BlockDriverState *bs, BlkdebugKind k, uint64_t n,
                           Error **errp)
{
    BDRVBlkdebugState *s = bs->opaque;
    uint64_t at = s->fail_at[k];

    if (!at || n < at || (s->fail_count && n - at >= s->fail_count)) {
        return false;
    }
    error_setg_errno(errp, s->error, "Could not %s '%s' (blkdebug: %s "
                     "%" G_GUINT64_FORMAT " injected)",
                     blkdebug_kind_names[k], bdrv_get_filename(bs),
                     blkdebug_kind_names[k], n);
    return true;
}

/* A crash at this point: nothing after it runs, nothing is flushed. */
static void G_GNUC_NORETURN blkdebug_kill(void)
{
    raise(SIGKILL);
    _exit(137);     /* not reached: SIGKILL cannot be caught */
}

/* Whether [offset, offset + bytes) touches the bad area; errp says so. */
static bool blkdebug_in_bad_area(BlockDriverState *bs, uint64_t offset,
                                 size_t bytes, Error **errp)
{
    BDRVBlkdebugState *s = bs->opaque;

    if (!s->bad_bytes || offset >= s->bad_offset + s->bad_bytes ||
        offset + bytes <= s->bad_offset) {
        return false;
    }
    error_setg_errno(errp, s->error, "Could not read '%s' at offset %"
                     G_GUINT64_FORMAT " (blkdebug: bad area at %"
                     G_GUINT64_FORMAT ")", bdrv_get_filename(bs),
                     MAX(offset, s->bad_offset), s->bad_offset);
    return true;
}

static int blkdebug_pread(BlockDriverState *bs, uint64_t offset, void *buf,
                          size_t bytes, Error **errp)
{
    BDRVBlkdebugState *s = bs->opaque;

    if (blkdebug_fails(bs, BLKDEBUG_READ,
                       blkdebug_count(s, BLKDEBUG_READ), errp) ||
        blkdebug_in_bad_area(bs, offset, bytes, errp) ||
        blkdebug_rules_fail(bs, NULL, NULL, BLKDEBUG_IO_READ, offset,
                            bytes, errp)) {
        return -1;
    }
    return bdrv_pread(bs->file, offset, buf, bytes, errp);
}

static int blkdebug_pwrite(BlockDriverState *bs, uint64_t offset,
                           const void *buf, size_t bytes, int flags,
                           Error **errp)
{
    BDRVBlkdebugState *s = bs->opaque;
    uint64_t n = blkdebug_count(s, BLKDEBUG_WRITE);

    if (n == s->kill_write) {
        blkdebug_kill();
    }
    if (n == s->torn_write) {
        size_t half = ROUND_DOWN(bytes / 2, BDRV_SECTOR_SIZE);

        if (half) {
            bdrv_pwrite(bs->file, offset, buf, half, flags, NULL);
        }
        blkdebug_kill();
    }
    if (blkdebug_fails(bs, BLKDEBUG_WRITE, n, errp) ||
        blkdebug_rules_fail(bs, "pwritev", NULL, BLKDEBUG_IO_WRITE,
                            offset, bytes, errp)) {
        return -1;
    }
    return bdrv_pwrite(bs->file, offset, buf, bytes, flags, errp);
}

static int blkdebug_flush(BlockDriverState *bs, Error **errp)
{
    BDRVBlkdebugState *s = bs->opaque;
    uint64_t n;

    /* A node that never syncs (-t unsafe): no flush reaches the device. */
    if (bs->open_flags & BDRV_O_NO_FLUSH) {
        return 0;
    }
    n = blkdebug_count(s, BLKDEBUG_FLUSH);
    if (n == s->kill_flush) {
        blkdebug_kill();
    }
    /* (The request path then flushes the child.) */
    return blkdebug_fails(bs, BLKDEBUG_FLUSH, n, errp) ||
           blkdebug_rules_fail(bs, "flush_to_os", "flush_to_disk",
                               BLKDEBUG_IO_FLUSH, 0, 0, errp) ? -1 : 0;
}

static int blkdebug_truncate(BlockDriverState *bs, uint64_t size,
                             PreallocMode prealloc, Error **errp)
{
    BDRVBlkdebugState *s = bs->opaque;

    if (blkdebug_fails(bs, BLKDEBUG_TRUNCATE,
                       blkdebug_count(s, BLKDEBUG_TRUNCATE), errp)) {
        return -1;
    }
    return bdrv_truncate(bs->file, size, prealloc, errp);
}

static int64_t blkdebug_getlength(BlockDriverState *bs, Error **errp)
{
    return bdrv_getlength_exact(bs->file, errp);
}

/*
 * The child's status at the same offsets (QEMU's BDRV_BLOCK_RAW: the
 * filter says what its image says), once the rules of iotype
 * block-status have had their say (qemu-iotests 251).
 */
static int blkdebug_block_status(BlockDriverState *bs, uint64_t offset,
                                 uint64_t bytes, uint64_t *pnum,
                                 uint64_t *map, BlockDriverState **file,
                                 Error **errp)
{
    if (blkdebug_rules_fail(bs, NULL, NULL, BLKDEBUG_IO_BLOCK_STATUS, offset,
                            bytes, errp)) {
        return -1;
    }
    return bdrv_block_status(bs->file, offset, bytes, pnum, map, file, errp);
}

static bool blkdebug_block_status_is_data(BlockDriverState *bs,
                                          uint64_t offset, uint64_t bytes,
                                          uint64_t *pnum)
{
    return bdrv_block_status_is_data(bs->file, offset, bytes, pnum);
}

/*
 * QEMU's name: blkdebug:CONFIG:IMAGE (CONFIG may be empty: blkdebug::x),
 * the image a file name of its own.
 */
static int blkdebug_parse_filename(const char *filename, GHashTable *opts,
                                   Error **errp)
{
    const char *rest = filename + strlen("blkdebug:");
    const char *colon = strchr(rest, ':');

    if (!g_str_has_prefix(filename, "blkdebug:") || !colon) {
        error_setg(errp, "blkdebug name '%s': expected "
                   "blkdebug:[CONFIG_FILE]:IMAGE", filename);
        return -1;
    }
    if (colon > rest) {
        g_hash_table_insert(opts, g_strdup("config"),
                            g_strndup(rest, colon - rest));
    }
    g_hash_table_insert(opts, g_strdup("file.filename"),
                        g_strdup(colon + 1));
    return 0;
}

static bool blkdebug_has_zero_init(BlockDriverState *bs)
{
    return bdrv_has_zero_init(bs->file);
}

const BlockDriver bdrv_blkdebug = {
    .format_name = "blkdebug",
    .instance_size = sizeof(BDRVBlkdebugState),
    .is_filter = true,
    .protocol_name = "blkdebug",
    .child_alias = "image",
    .bdrv_parse_filename = blkdebug_parse_filename,
    .bdrv_open = blkdebug_open,
    .bdrv_close = blkdebug_close,
    .bdrv_debug_event = blkdebug_debug_event,
    .bdrv_pread = blkdebug_pread,
    .bdrv_pwrite = blkdebug_pwrite,
    .bdrv_flush = blkdebug_flush,
    .bdrv_truncate = blkdebug_truncate,
    .bdrv_getlength = blkdebug_getlength,
    .bdrv_block_status = blkdebug_block_status,
    .bdrv_block_status_is_data = blkdebug_block_status_is_data,
    .bdrv_has_zero_init = blkdebug_has_zero_init,
};
