/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The "nbd" protocol driver: an image's bytes in an NBD server's export,
 * through libnbd (the wire protocol is libnbd's, not ours). Names as
 * qemu-img takes them (docs/nbd.md):
 *
 *   nbd://HOST[:PORT]/EXPORT      nbd+tcp://HOST[:PORT]/EXPORT
 *   nbd+unix:///EXPORT?socket=PATH
 *   nbd:HOST:PORT[:exportname=EXPORT]    nbd:unix:PATH[:exportname=EXPORT]
 *
 * and the options they stand for, QEMU's: server.type=inet|unix,
 * server.host, server.port (10809), server.path, export.
 *
 * An export has a fixed size: reads past its end read zeroes here (as a
 * file's do), writes past it fail, and it cannot be resized or created.
 * One libnbd handle per node: libnbd serialises the calls made on it from
 * the convert loop's threads.
 */
#include <errno.h>
#include <string.h>

#include <libnbd.h>

#include "block/block_int.h"

#define NBD_DEFAULT_PORT "10809"
/* The largest request the NBD spec lets a client send unasked. */
#define NBD_MAX_REQUEST (32 * 1024 * 1024)

typedef struct BDRVNBDState {
    struct nbd_handle *nbd;
    uint64_t size;
    size_t max_request;
    bool can_flush, can_zero, can_trim, allocation;
} BDRVNBDState;

/* "Could not WHAT 'nbd://...': libnbd's message" */
static void nbd_error(BlockDriverState *bs, const char *what, Error **errp)
{
    int err = nbd_get_errno();

    error_setg(errp, "Could not %s '%s': %s", what, bs->filename,
               nbd_get_error() ? nbd_get_error() :
               g_strerror(err ? err : EIO));
}

/* ---- Names */

static void nbd_put(GHashTable *opts, const char *key, const char *value)
{
    g_hash_table_insert(opts, g_strdup(key), g_strdup(value));
}

/* nbd:HOST:PORT[:exportname=X] and nbd:unix:PATH[:exportname=X] */
static int nbd_parse_legacy(const char *rest, GHashTable *opts,
                            Error **errp)
{
    g_autofree char *copy = g_strdup(rest);
    char *export = strstr(copy, ":exportname=");
    char *colon;

    if (export) {
        *export = '\0';
        nbd_put(opts, "export", export + strlen(":exportname="));
    }
    if (g_str_has_prefix(copy, "unix:")) {
        nbd_put(opts, "server.type", "unix");
        nbd_put(opts, "server.path", copy + strlen("unix:"));
        return 0;
    }
    colon = strrchr(copy, ':');
    if (!colon || colon == copy || !colon[1]) {
        error_setg(errp, "NBD name 'nbd:%s': expected nbd:HOST:PORT or "
                   "nbd:unix:PATH", rest);
        return -1;
    }
    *colon = '\0';
    nbd_put(opts, "server.type", "inet");
    nbd_put(opts, "server.host", copy);
    nbd_put(opts, "server.port", colon + 1);
    return 0;
}

static int nbd_parse_filename(const char *filename, GHashTable *opts,
                              Error **errp)
{
    g_autoptr(GUri) uri = NULL;
    g_autoptr(GHashTable) query = NULL;
    GError *gerr = NULL;
    const char *scheme, *path, *socket;

    if (g_str_has_prefix(filename, "nbd:") &&
        !g_str_has_prefix(filename, "nbd://")) {
        return nbd_parse_legacy(filename + strlen("nbd:"), opts, errp);
    }
    uri = g_uri_parse(filename, G_URI_FLAGS_NONE, &gerr);
    if (!uri) {
        error_setg(errp, "Invalid NBD URI '%s': %s", filename, gerr->message);
        g_error_free(gerr);
        return -1;
    }
    scheme = g_uri_get_scheme(uri);
    path = g_uri_get_path(uri);
    /* The export is the path less its leading '/' (QEMU's rule). */
    nbd_put(opts, "export", path[0] == '/' ? path + 1 : path);
    if (g_str_equal(scheme, "nbd+unix")) {
        query = g_uri_get_query(uri) ?
            g_uri_parse_params(g_uri_get_query(uri), -1, "&",
                               G_URI_PARAMS_NONE, NULL) : NULL;
        socket = query ? g_hash_table_lookup(query, "socket") : NULL;
        if (!socket || (g_uri_get_host(uri) && *g_uri_get_host(uri))) {
            error_setg(errp, "NBD URI '%s': nbd+unix:///EXPORT?socket=PATH "
                       "names a socket and no host", filename);
            return -1;
        }
        nbd_put(opts, "server.type", "unix");
        nbd_put(opts, "server.path", socket);
        return 0;
    }
    if (!g_uri_get_host(uri) || !*g_uri_get_host(uri)) {
        error_setg(errp, "NBD URI '%s' names no host", filename);
        return -1;
    }
    nbd_put(opts, "server.type", "inet");
    nbd_put(opts, "server.host", g_uri_get_host(uri));
    if (g_uri_get_port(uri) > 0) {
        g_hash_table_insert(opts, g_strdup("server.port"),
                            g_strdup_printf("%d", g_uri_get_port(uri)));
    }
    return 0;
}

/* ---- Open and close */

/* The description of the export that errors and `info` show. */
static char *nbd_describe(const char *type, const char *host,
                          const char *port, const char *path,
                          const char *export)
{
    if (g_str_equal(type, "unix")) {
        return g_strdup_printf("nbd+unix:///%s?socket=%s", export, path);
    }
    return g_strdup_printf("nbd://%s:%s/%s", host, port, export);
}

/* The block status context answers: what NBD calls base:allocation. */
static int nbd_open(BlockDriverState *bs, GHashTable *opts, int flags,
                    Error **errp)
{
    BDRVNBDState *s = bs->opaque;
    g_autofree char *type = qemu_opt_take(opts, "server.type");
    g_autofree char *host = qemu_opt_take(opts, "server.host");
    g_autofree char *port = qemu_opt_take(opts, "server.port");
    g_autofree char *path = qemu_opt_take(opts, "server.path");
    g_autofree char *export = qemu_opt_take(opts, "export");
    int64_t size, max;
    int ret;

    if (!type) {
        type = g_strdup(path ? "unix" : "inet");
    }
    if (!export) {
        export = g_strdup("");
    }
    if (!port) {
        port = g_strdup(NBD_DEFAULT_PORT);
    }
    if (g_str_equal(type, "unix") ? !path :
        !g_str_equal(type, "inet") || !host) {
        error_setg(errp, "NBD needs server.type=inet with server.host, or "
                   "server.type=unix with server.path");
        return -1;
    }
    bs->filename = nbd_describe(type, host, port, path, export);
    s->nbd = nbd_create();
    if (!s->nbd) {
        nbd_error(bs, "connect to", errp);
        return -1;
    }
    if (nbd_set_export_name(s->nbd, export) < 0 ||
        nbd_add_meta_context(s->nbd, LIBNBD_CONTEXT_BASE_ALLOCATION) < 0) {
        nbd_error(bs, "connect to", errp);
        goto fail;
    }
    ret = g_str_equal(type, "unix") ? nbd_connect_unix(s->nbd, path)
                                     : nbd_connect_tcp(s->nbd, host, port);
    if (ret < 0) {
        nbd_error(bs, "connect to", errp);
        goto fail;
    }
    if ((flags & BDRV_O_RDWR) && nbd_is_read_only(s->nbd) == 1) {
        error_setg(errp, "Could not open '%s' for writing: the NBD export "
                   "is read-only", bs->filename);
        goto fail;
    }
    size = nbd_get_size(s->nbd);
    if (size < 0) {
        nbd_error(bs, "get the size of", errp);
        goto fail;
    }
    s->size = size;
    max = nbd_get_block_size(s->nbd, LIBNBD_SIZE_MAXIMUM);
    s->max_request = max > 0 ? MIN(max, NBD_MAX_REQUEST) : NBD_MAX_REQUEST;
    s->can_flush = nbd_can_flush(s->nbd) == 1;
    s->can_zero = nbd_can_zero(s->nbd) == 1;
    s->can_trim = nbd_can_trim(s->nbd) == 1;
    s->allocation = nbd_can_meta_context(
        s->nbd, LIBNBD_CONTEXT_BASE_ALLOCATION) == 1;
    return 0;

fail:
    g_clear_pointer(&s->nbd, nbd_close);
    return -1;
}

static void nbd_close_node(BlockDriverState *bs)
{
    BDRVNBDState *s = bs->opaque;

    if (s->nbd) {
        nbd_shutdown(s->nbd, 0);
        nbd_close(s->nbd);
    }
}

/* ---- Requests */

static int nbd_pread_node(BlockDriverState *bs, uint64_t offset, void *buf,
                          size_t bytes, Error **errp)
{
    BDRVNBDState *s = bs->opaque;
    uint8_t *p = buf;
    /* Past the export's end reads as zeroes, as past a file's. */
    size_t in = offset < s->size ? MIN(bytes, s->size - offset) : 0;

    memset(p + in, 0, bytes - in);
    while (in) {
        size_t n = MIN(in, s->max_request);

        if (nbd_pread(s->nbd, p, n, offset, 0) < 0) {
            nbd_error(bs, "read", errp);
            return -1;
        }
        p += n;
        offset += n;
        in -= n;
    }
    return 0;
}

static int nbd_check_inside(BlockDriverState *bs, uint64_t offset,
                            size_t bytes, Error **errp)
{
    BDRVNBDState *s = bs->opaque;

    if (offset > s->size || bytes > s->size - offset) {
        error_setg_errno(errp, ENOSPC, "Could not write '%s' at offset %"
                         G_GUINT64_FORMAT ": the export ends at %"
                         G_GUINT64_FORMAT " bytes", bs->filename, offset,
                         s->size);
        return -1;
    }
    return 0;
}

typedef enum {
    NBD_OP_WRITE,
    NBD_OP_ZERO,
    NBD_OP_TRIM,
} NBDOp;

/* A write, zero write or trim, in requests the server takes. */
static int nbd_chunked(BlockDriverState *bs, NBDOp op, uint64_t offset,
                       const uint8_t *buf, size_t bytes, Error **errp)
{
    static const char *const what[] = {
        [NBD_OP_WRITE] = "write", [NBD_OP_ZERO] = "write zeroes to",
        [NBD_OP_TRIM] = "discard",
    };
    BDRVNBDState *s = bs->opaque;

    while (bytes) {
        size_t n = MIN(bytes, s->max_request);
        int ret = op == NBD_OP_WRITE ? nbd_pwrite(s->nbd, buf, n, offset, 0)
                : op == NBD_OP_ZERO ? nbd_zero(s->nbd, n, offset, 0)
                : nbd_trim(s->nbd, n, offset, 0);

        if (ret < 0) {
            nbd_error(bs, what[op], errp);
            return -1;
        }
        buf = buf ? buf + n : NULL;
        offset += n;
        bytes -= n;
    }
    return 0;
}

static int nbd_pwrite_node(BlockDriverState *bs, uint64_t offset,
                           const void *buf, size_t bytes, int flags,
                           Error **errp)
{
    if (nbd_check_inside(bs, offset, bytes, errp) < 0) {
        return -1;
    }
    return nbd_chunked(bs, NBD_OP_WRITE, offset, buf, bytes, errp);
}

static int nbd_pwrite_zeroes_node(BlockDriverState *bs, uint64_t offset,
                                  size_t bytes, int flags, Error **errp)
{
    BDRVNBDState *s = bs->opaque;

    if (!s->can_zero) {
        return -ENOTSUP;        /* the request path writes zeroes */
    }
    if (nbd_check_inside(bs, offset, bytes, errp) < 0) {
        return -1;
    }
    return nbd_chunked(bs, NBD_OP_ZERO, offset, NULL, bytes, errp);
}

static int nbd_pdiscard_node(BlockDriverState *bs, uint64_t offset,
                             size_t bytes, Error **errp)
{
    BDRVNBDState *s = bs->opaque;

    /* A hint: a server that cannot trim keeps the bytes. */
    if (!s->can_trim || offset >= s->size) {
        return 0;
    }
    return nbd_chunked(bs, NBD_OP_TRIM, offset, NULL,
                       MIN(bytes, s->size - offset), errp);
}

static int nbd_flush_node(BlockDriverState *bs, Error **errp)
{
    BDRVNBDState *s = bs->opaque;

    if (!s->can_flush || (bs->open_flags & BDRV_O_NO_FLUSH)) {
        return 0;
    }
    if (nbd_flush(s->nbd, 0) < 0) {
        nbd_error(bs, "flush", errp);
        return -1;
    }
    return 0;
}

static int64_t nbd_getlength(BlockDriverState *bs, Error **errp)
{
    BDRVNBDState *s = bs->opaque;

    return s->size;
}

/* An export's size is the server's: only "resizing" to it succeeds. */
static int nbd_truncate(BlockDriverState *bs, uint64_t size,
                        PreallocMode prealloc, Error **errp)
{
    BDRVNBDState *s = bs->opaque;

    if (size != s->size) {
        error_setg(errp, "Cannot resize NBD nodes ('%s' has %"
                   G_GUINT64_FORMAT " bytes)", bs->filename, s->size);
        return -1;
    }
    return 0;
}

/* ---- Block status: the server's base:allocation context */

typedef struct NBDExtent {
    uint64_t length;
    uint32_t flags;
    bool seen;
} NBDExtent;

static int nbd_extent_cb(void *opaque, const char *context, uint64_t offset,
                         uint32_t *entries, size_t nr_entries, int *error)
{
    NBDExtent *e = opaque;

    /* The first extent of base:allocation: (length, flags) pairs. */
    if (!e->seen && nr_entries >= 2 &&
        g_str_equal(context, LIBNBD_CONTEXT_BASE_ALLOCATION)) {
        e->length = entries[0];
        e->flags = entries[1];
        e->seen = true;
    }
    return 0;
}

static int nbd_block_status_node(BlockDriverState *bs, uint64_t offset,
                                 uint64_t bytes, uint64_t *pnum,
                                 uint64_t *map, BlockDriverState **file,
                                 Error **errp)
{
    BDRVNBDState *s = bs->opaque;
    NBDExtent e = { 0 };
    int ret = BDRV_BLOCK_DATA;

    *pnum = bytes;
    *map = offset;
    *file = bs;
    if (s->allocation && offset < s->size) {
        bytes = MIN(bytes, MIN(s->size - offset, (uint64_t)UINT32_MAX));
        if (nbd_block_status(s->nbd, bytes, offset,
                             (nbd_extent_callback) {
                                 .callback = nbd_extent_cb, .user_data = &e,
                             }, LIBNBD_CMD_FLAG_REQ_ONE) < 0) {
            nbd_error(bs, "get the block status of", errp);
            return -1;
        }
        /*
         * As QEMU reads the flags: a hole holds no data (and reads as
         * zeroes only if it says so), zero is known zero.
         */
        if (e.seen && e.length) {
            *pnum = MIN(bytes, e.length);
            ret = (e.flags & LIBNBD_STATE_HOLE ? 0 : BDRV_BLOCK_DATA) |
                  (e.flags & LIBNBD_STATE_ZERO ? BDRV_BLOCK_ZERO : 0);
        }
    }
    return ret | BDRV_BLOCK_OFFSET_VALID;
}

static bool nbd_block_status_is_data(BlockDriverState *bs, uint64_t offset,
                                     uint64_t bytes, uint64_t *pnum)
{
    uint64_t map;
    BlockDriverState *file;
    int ret = nbd_block_status_node(bs, offset, bytes, pnum, &map, &file,
                                    NULL);

    /* "Data" where unsure: always safe to act on. */
    if (ret < 0) {
        *pnum = bytes;
        return true;
    }
    return !(ret & BDRV_BLOCK_ZERO);
}

/* The same server and export are the same bytes. */
static char *nbd_get_identity(BlockDriverState *bs)
{
    return g_strdup(bs->filename);
}

#define NBD_DRIVER(var, proto)                                              \
    const BlockDriver var = {                                               \
        .format_name = "nbd",                                               \
        .instance_size = sizeof(BDRVNBDState),                              \
        .is_protocol = true,                                                \
        .protocol_name = proto,                                             \
        .bdrv_parse_filename = nbd_parse_filename,                          \
        .bdrv_get_identity = nbd_get_identity,                              \
        .bdrv_open = nbd_open,                                              \
        .bdrv_close = nbd_close_node,                                       \
        .bdrv_pread = nbd_pread_node,                                       \
        .bdrv_pwrite = nbd_pwrite_node,                                     \
        .bdrv_pwrite_zeroes = nbd_pwrite_zeroes_node,                       \
        .bdrv_pdiscard = nbd_pdiscard_node,                                 \
        .bdrv_flush = nbd_flush_node,                                       \
        .bdrv_getlength = nbd_getlength,                                    \
        .bdrv_truncate = nbd_truncate,                                      \
        .bdrv_block_status = nbd_block_status_node,                         \
        .bdrv_block_status_is_data = nbd_block_status_is_data,              \
    }

NBD_DRIVER(bdrv_nbd, "nbd");
NBD_DRIVER(bdrv_nbd_tcp, "nbd+tcp");
NBD_DRIVER(bdrv_nbd_unix, "nbd+unix");
