/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The "nbd" protocol driver: an image's bytes in an NBD server's export,
 * through libnbd (the wire protocol is libnbd's, not ours). Names as
 * qemu-img takes them, and libnbd's TLS ones (docs/nbd.md):
 *
 *   nbd://HOST[:PORT]/EXPORT      nbd+tcp://HOST[:PORT]/EXPORT
 *   nbd+unix:///EXPORT?socket=PATH
 *   nbd:HOST:PORT[:exportname=EXPORT]    nbd:unix:PATH[:exportname=EXPORT]
 *   nbds://[USER@]HOST[:PORT]/EXPORT[?TLS]
 *   nbds+unix:///EXPORT?socket=PATH[&TLS]
 *     TLS: tls-creds=ID, tls-certificates=DIR, tls-psk-file=FILE,
 *          tls-hostname=NAME
 *
 * and the options they stand for, QEMU's: server.type=inet|unix,
 * server.host, server.port (10809), server.path, export, tls-creds,
 * tls-hostname; and ours: open-timeout (seconds), multi-conn (how many
 * connections where the server allows it), tls (nbds://),
 * tls-certificates, tls-psk-file, tls-username (libnbd's).
 *
 * An export has a fixed size: reads past its end read zeroes here (as a
 * file's do), writes past it fail, and it cannot be resized or created.
 *
 * Requests go out with libnbd's asynchronous calls on the connections of
 * block/nbd-conn.c, and the calling thread waits for its own (reading
 * everyone's replies while it does, unless another thread is): the
 * convert loop's threads have their requests on the wire together.
 * Where the server allows multi-conn (its promise that what one
 * connection's flush covers, and what one connection reads, includes
 * every connection's completed writes), there are several connections,
 * and each request takes the least busy one; otherwise everything shares
 * the one connection, and its flush covers what it wrote.
 */
#include <errno.h>
#include <string.h>

#include "block/nbd-conn.h"
#include "crypto/tlscreds.h"

#define NBD_DEFAULT_PORT "10809"
/* The largest request the NBD spec lets a client send unasked. */
#define NBD_MAX_REQUEST (32 * 1024 * 1024)
/*
 * Connections where the server allows several: nbdcopy's default. Each
 * is one more TCP (and TLS) handshake, made in the background.
 */
#define NBD_MULTI_CONN_DEFAULT 4
#define NBD_MULTI_CONN_MAX 16
/*
 * Seconds a connection and its handshake (TLS included) may take. Long
 * enough for a loaded server and a slow TLS handshake, short enough that
 * a server that never answers is reported while the user still waits.
 */
#define NBD_OPEN_TIMEOUT_DEFAULT 30

/*
 * The last extent the server's block status described: [start, end) is
 * all of kind ret. Each question costs a round trip, and the server's
 * answer may cost it a walk to the extent's end (nbdkit's file plugin on
 * tmpfs: SEEK_DATA through the page cache), so the convert loop, asking
 * once per chunk, would pay for the extent once per chunk (1 GiB from
 * tmpfs: 15 s instead of 1). As in file-posix.c, only what stays true
 * while we write is kept on a writable node: "data" (a write keeps it
 * data, and reading a zeroed or trimmed run is still right); and our own
 * zero writes and trims forget it, so that they show at once.
 */
typedef struct NBDExtentCache {
    GMutex lock;
    uint64_t start, end;
    int ret;
} NBDExtentCache;

typedef struct BDRVNBDState BDRVNBDState;
static void nbd_extent_cache_forget(BDRVNBDState *s);

struct BDRVNBDState {
    NBDConnConfig cfg;
    NBDExtentCache extent;
    NBDConn *conns[NBD_MULTI_CONN_MAX];
    unsigned nconns;
    uint64_t size;
    size_t max_request;
    bool can_flush, can_zero, can_trim, allocation;
};

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

/*
 * The query of a URI: "socket" for the unix schemes, and the TLS settings
 * for the nbds ones (the names of libnbd's URIs, and tls-creds and
 * tls-hostname as the options). Anything else is refused, as in QEMU.
 */
static int nbd_parse_query(const char *filename, GUri *uri, bool unix_socket,
                           bool tls, GHashTable *opts, Error **errp)
{
    static const char *const tls_keys[] = {
        "tls-creds", "tls-certificates", "tls-psk-file", "tls-hostname",
        NULL,
    };
    g_autoptr(GHashTable) query = NULL;
    GHashTableIter it;
    gpointer key, value;

    if (g_uri_get_query(uri)) {
        query = g_uri_parse_params(g_uri_get_query(uri), -1, "&",
                                   G_URI_PARAMS_NONE, NULL);
        if (!query) {
            error_setg(errp, "NBD URI '%s': invalid query", filename);
            return -1;
        }
        g_hash_table_iter_init(&it, query);
        while (g_hash_table_iter_next(&it, &key, &value)) {
            if (unix_socket && g_str_equal(key, "socket")) {
                continue;
            }
            if (!tls || !g_strv_contains(tls_keys, key)) {
                error_setg(errp, "NBD URI '%s': unexpected parameter '%s'%s",
                           filename, (char *)key,
                           !tls && g_str_has_prefix(key, "tls") ?
                           " (TLS settings go with nbds:// names)" : "");
                return -1;
            }
            nbd_put(opts, key, value);
        }
    }
    if (unix_socket) {
        const char *sock = query ? g_hash_table_lookup(query, "socket")
                                 : NULL;

        if (!sock || (g_uri_get_host(uri) && *g_uri_get_host(uri))) {
            error_setg(errp, "NBD URI '%s': %s:///EXPORT?socket=PATH names "
                       "a socket and no host", filename,
                       g_uri_get_scheme(uri));
            return -1;
        }
        nbd_put(opts, "server.type", "unix");
        nbd_put(opts, "server.path", sock);
    }
    return 0;
}

static int nbd_parse_filename(const char *filename, GHashTable *opts,
                              Error **errp)
{
    g_autoptr(GUri) uri = NULL;
    GError *gerr = NULL;
    const char *scheme, *path;
    bool tls, unix_socket;

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
    tls = g_str_has_prefix(scheme, "nbds");
    unix_socket = g_str_has_suffix(scheme, "+unix");
    /* The export is the path less its leading '/' (QEMU's rule). */
    nbd_put(opts, "export", path[0] == '/' ? path + 1 : path);
    if (tls) {
        nbd_put(opts, "tls", "on");
        /* libnbd's URIs: the user is the TLS (PSK) username. */
        if (g_uri_get_user(uri)) {
            nbd_put(opts, "tls-username", g_uri_get_user(uri));
        }
    }
    if (nbd_parse_query(filename, uri, unix_socket, tls, opts, errp) < 0) {
        return -1;
    }
    if (unix_socket) {
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
static char *nbd_describe(const NBDConnConfig *cfg)
{
    const char *s = cfg->tls ? "s" : "";

    if (cfg->unix_socket) {
        return g_strdup_printf("nbd%s+unix:///%s?socket=%s", s, cfg->export,
                               cfg->path);
    }
    return g_strdup_printf("nbd%s://%s:%s/%s", s, cfg->host, cfg->port,
                           cfg->export);
}

/*
 * tls-creds=ID: a --object tls-creds-x509 or tls-creds-psk set, as QEMU's
 * nbd client takes them, onto libnbd's settings.
 */
static int nbd_open_tls_creds(NBDConnConfig *cfg, const char *id,
                              Error **errp)
{
    const QCryptoTLSCreds *creds = qcrypto_tls_creds_lookup(id, errp);

    if (!creds) {
        return -1;
    }
    if (creds->endpoint != QCRYPTO_TLS_CREDS_ENDPOINT_CLIENT) {
        error_setg(errp, "TLS credentials '%s': expecting a client endpoint "
                   "(endpoint=client)", id);
        return -1;
    }
    /* libnbd sets its own GnuTLS priorities and has no setting for ours. */
    if (creds->priority) {
        error_setg(errp, "TLS credentials '%s': priority= is not supported "
                   "by the NBD client", id);
        return -1;
    }
    cfg->tls = true;
    if (creds->type == QCRYPTO_TLS_CREDS_PSK) {
        cfg->tls_psk_file = qcrypto_tls_creds_psk_file(creds);
        /* QEMU's default identity; libnbd's would be the login name. */
        g_free(cfg->tls_username);
        cfg->tls_username = g_strdup(creds->username ? creds->username
                                                     : "qemu");
    } else {
        cfg->tls_certificates = g_strdup(creds->dir);
        cfg->tls_verify_peer = creds->verify_peer;
    }
    return 0;
}

/*
 * Whether libnbd will check the server's certificate as asked; if not,
 * the connection is refused rather than made unverified. libnbd (1.14
 * at least) checks an x509 certificate only when it has a CA
 * certificate (DIR/ca-cert.pem; without one it falls back to the system's
 * CAs and checks nothing) and only against the host name of a TCP
 * connection (over a unix socket, or for another name, tls-hostname, it
 * checks nothing), unless it has nbd_set_tls_hostname().
 */
static int nbd_open_tls_check(const NBDConnConfig *cfg, Error **errp)
{
    g_autofree char *ca = NULL;

    if (!cfg->tls || cfg->tls_psk_file || !cfg->tls_verify_peer) {
        return 0;
    }
    if (!cfg->tls_certificates) {
        error_setg(errp, "Could not connect to '%s': TLS needs credentials: "
                   "tls-creds=ID (--object tls-creds-x509 or tls-creds-psk),"
                   " or tls-certificates=DIR or tls-psk-file=FILE in the "
                   "nbds:// name", cfg->name);
        return -1;
    }
    ca = g_build_filename(cfg->tls_certificates, "ca-cert.pem", NULL);
    if (!g_file_test(ca, G_FILE_TEST_IS_REGULAR)) {
        error_setg(errp, "Could not connect to '%s': no CA certificate '%s' "
                   "to check the server's against", cfg->name, ca);
        return -1;
    }
#ifndef LIBNBD_HAVE_NBD_SET_TLS_HOSTNAME
    if (cfg->unix_socket) {
        error_setg(errp, "Could not connect to '%s': this libnbd (%s) "
                   "cannot verify a server certificate over a unix socket; "
                   "use TCP, a PSK (tls-creds-psk), or verify-peer=off on "
                   "the tls-creds-x509 object to accept any certificate",
                   cfg->name, CONFIG_LIBNBD_VERSION);
        return -1;
    }
    if (g_ascii_strcasecmp(cfg->tls_hostname, cfg->host) != 0) {
        error_setg(errp, "Could not connect to '%s': this libnbd (%s) "
                   "checks the server certificate against the host "
                   "connected to ('%s') only, not tls-hostname '%s'",
                   cfg->name, CONFIG_LIBNBD_VERSION, cfg->host,
                   cfg->tls_hostname);
        return -1;
    }
#endif
    return 0;
}

/* The options, into cfg (what every connection is made from). */
static int nbd_open_config(BlockDriverState *bs, NBDConnConfig *cfg,
                           GHashTable *opts, Error **errp)
{
    g_autofree char *type = qemu_opt_take(opts, "server.type");
    g_autofree char *creds = qemu_opt_take(opts, "tls-creds");
    uint64_t timeout;
    bool tls;

    cfg->host = qemu_opt_take(opts, "server.host");
    cfg->port = qemu_opt_take(opts, "server.port");
    cfg->path = qemu_opt_take(opts, "server.path");
    cfg->export = qemu_opt_take(opts, "export");
    cfg->tls_certificates = qemu_opt_take(opts, "tls-certificates");
    cfg->tls_psk_file = qemu_opt_take(opts, "tls-psk-file");
    cfg->tls_username = qemu_opt_take(opts, "tls-username");
    cfg->tls_hostname = qemu_opt_take(opts, "tls-hostname");
    cfg->meta_context = qemu_opt_take(opts, "x-dirty-bitmap");
    cfg->tls_verify_peer = true;
    if (qemu_opt_take_bool(opts, "tls", false, &tls, errp) < 0 ||
        qemu_opt_take_uint(opts, "open-timeout", NBD_OPEN_TIMEOUT_DEFAULT,
                           &timeout, errp) < 0) {
        return -1;
    }
    if (timeout > G_MAXINT64 / G_USEC_PER_SEC) {
        error_setg(errp, "Parameter 'open-timeout' is too large");
        return -1;
    }
    cfg->timeout_us = (gint64)timeout * G_USEC_PER_SEC;
    if (!type) {
        type = g_strdup(cfg->path ? "unix" : "inet");
    }
    cfg->export = cfg->export ? cfg->export : g_strdup("");
    cfg->port = cfg->port ? cfg->port : g_strdup(NBD_DEFAULT_PORT);
    cfg->unix_socket = g_str_equal(type, "unix");
    if (cfg->unix_socket ? !cfg->path :
        !g_str_equal(type, "inet") || !cfg->host) {
        error_setg(errp, "NBD needs server.type=inet with server.host, or "
                   "server.type=unix with server.path");
        return -1;
    }
    cfg->tls = tls || cfg->tls_certificates || cfg->tls_psk_file;
    if (creds && (cfg->tls_certificates || cfg->tls_psk_file)) {
        error_setg(errp, "tls-creds cannot be combined with "
                   "tls-certificates or tls-psk-file");
        return -1;
    }
    if (creds && nbd_open_tls_creds(cfg, creds, errp) < 0) {
        return -1;
    }
    if (!cfg->tls && (cfg->tls_hostname || cfg->tls_username)) {
        error_setg(errp, "tls-hostname and tls-username need TLS "
                   "(tls-creds=ID, or an nbds:// name)");
        return -1;
    }
    /* QEMU's rule: the certificate names the host connected to. */
    if (cfg->tls && !cfg->unix_socket && !cfg->tls_hostname) {
        cfg->tls_hostname = g_strdup(cfg->host);
    }
    bs->filename = nbd_describe(cfg);
    cfg->name = bs->filename;
    return nbd_open_tls_check(cfg, errp);
}

static void nbd_close_node(BlockDriverState *bs)
{
    BDRVNBDState *s = bs->opaque;

    for (unsigned i = 0; i < s->nconns; i++) {
        nbd_conn_close(s->conns[i]);
    }
    s->nconns = 0;
    nbd_conn_config_clear(&s->cfg);
    g_mutex_clear(&s->extent.lock);
}

/* base:allocation, or the dirty bitmap x-dirty-bitmap names. */
static const char *nbd_status_context(BDRVNBDState *s)
{
    return s->cfg.meta_context ? s->cfg.meta_context
                               : LIBNBD_CONTEXT_BASE_ALLOCATION;
}

static int nbd_open(BlockDriverState *bs, GHashTable *opts, int flags,
                    Error **errp)
{
    BDRVNBDState *s = bs->opaque;
    struct nbd_handle *h;
    uint64_t multi_conn;
    int64_t size, max;

    g_mutex_init(&s->extent.lock);
    if (qemu_opt_take_uint(opts, "multi-conn", NBD_MULTI_CONN_DEFAULT,
                           &multi_conn, errp) < 0) {
        goto fail;
    }
    if (multi_conn < 1 || multi_conn > NBD_MULTI_CONN_MAX) {
        error_setg(errp, "Parameter 'multi-conn' expects 1 to %d",
                   NBD_MULTI_CONN_MAX);
        goto fail;
    }
    if (nbd_open_config(bs, &s->cfg, opts, errp) < 0) {
        goto fail;
    }
    s->conns[0] = nbd_conn_open(&s->cfg, errp);
    if (!s->conns[0]) {
        goto fail;
    }
    s->nconns = 1;
    h = nbd_conn_handle(s->conns[0]);
    if ((flags & BDRV_O_RDWR) && nbd_is_read_only(h) == 1) {
        error_setg(errp, "Could not open '%s' for writing: the NBD export "
                   "is read-only", bs->filename);
        goto fail;
    }
    size = nbd_get_size(h);
    if (size < 0) {
        error_setg(errp, "Could not get the size of '%s': %s", bs->filename,
                   nbd_get_error());
        goto fail;
    }
    s->size = size;
    max = nbd_get_block_size(h, LIBNBD_SIZE_MAXIMUM);
    s->max_request = max > 0 ? MIN(max, NBD_MAX_REQUEST) : NBD_MAX_REQUEST;
    s->can_flush = nbd_can_flush(h) == 1;
    s->can_zero = nbd_can_zero(h) == 1;
    s->can_trim = nbd_can_trim(h) == 1;
    s->allocation = nbd_can_meta_context(h, nbd_status_context(s)) == 1;
    if (s->cfg.meta_context && !s->allocation) {
        error_setg(errp, "requested x-dirty-bitmap %s not found",
                   s->cfg.meta_context);
        goto fail;
    }
    /*
     * The others connect in the background: the node is usable now, and a
     * server that takes one client only (qemu-nbd's default --shared=1)
     * costs nothing but the attempt.
     */
    if (nbd_can_multi_conn(h) == 1) {
        while (s->nconns < multi_conn) {
            NBDConn *c = nbd_conn_open_background(&s->cfg);

            if (!c) {
                break;
            }
            s->conns[s->nconns++] = c;
        }
    }
    return 0;

fail:
    nbd_close_node(bs);
    return -1;
}

/* ---- Requests: started on a connection, ended in libnbd's callback */

typedef enum {
    NBD_OP_READ,
    NBD_OP_WRITE,
    NBD_OP_ZERO,
    NBD_OP_TRIM,
    NBD_OP_FLUSH,
    NBD_OP_BLOCK_STATUS,
} NBDOp;

static const char *const nbd_op_what[] = {
    [NBD_OP_READ] = "read", [NBD_OP_WRITE] = "write",
    [NBD_OP_ZERO] = "write zeroes to", [NBD_OP_TRIM] = "discard",
    [NBD_OP_FLUSH] = "flush", [NBD_OP_BLOCK_STATUS] = "get the block status of",
};

/* The first extent of a base:allocation answer. */
typedef struct NBDExtent {
    const char *context;            /* the one asked for */
    uint64_t length;
    uint32_t flags;
    bool seen;
} NBDExtent;

/* What a thread waiting for a request learns (nbd_request_run()). */
typedef struct NBDWait {
    gint finished;
    Error *err;
} NBDWait;

/*
 * One request of the block layer: one NBD command, or several for one
 * larger than the server takes, all in flight together on one
 * connection.
 */
typedef struct NBDRequest {
    BlockDriverState *bs;
    NBDConn *conn;
    NBDOp op;
    uint64_t offset;
    /* The commands in flight, plus one while they are being started. */
    gint pending;
    /* The first command's errno (the server's, or ENOTCONN: lost). */
    gint error;
    /* Set by the starting thread when a command could not start. */
    Error *start_err;
    NBDWait *wait;
} NBDRequest;

static void nbd_request_error(NBDRequest *r, int err, Error **errp)
{
    BlockDriverState *bs = r->bs;

    if (err == ENOTCONN) {
        error_setg(errp, "Could not %s '%s': the connection to the server "
                   "was lost", nbd_op_what[r->op], bs->filename);
    } else if (r->op == NBD_OP_FLUSH) {
        error_setg_errno(errp, err, "Could not flush '%s'", bs->filename);
    } else {
        error_setg_errno(errp, err, "Could not %s '%s' at offset %"
                         G_GUINT64_FORMAT, nbd_op_what[r->op], bs->filename,
                         r->offset);
    }
}

/* Drop a reference; the last one tells the waiting thread. */
static void nbd_request_unref(NBDRequest *r)
{
    NBDConn *c = r->conn;
    NBDWait *w = r->wait;
    int e;

    if (!g_atomic_int_dec_and_test(&r->pending)) {
        return;
    }
    w->err = r->start_err;
    e = g_atomic_int_get(&r->error);
    if (!w->err && e) {
        nbd_request_error(r, e, &w->err);
    }
    nbd_conn_add_in_flight(c, -1);
    g_free(r);
    /* The waiter may return at once: w is not touched after this. */
    nbd_conn_complete(c, &w->finished);
}

/*
 * libnbd's completion callback, on the thread reading the replies (or on
 * the thread of a later command that found the connection gone).
 * Returning 1 retires the command: nobody asks libnbd about it again.
 */
static int nbd_request_cb(void *opaque, int *error)
{
    NBDRequest *r = opaque;

    if (*error) {
        g_atomic_int_compare_and_exchange(&r->error, 0, *error);
    }
    return 1;
}

/*
 * The command's reference goes with its callback's free function, which
 * libnbd calls exactly once, also when the call that starts the command
 * fails. A failed start cannot tell whether the completion callback ran
 * (libnbd may queue the command, find the connection dead and end it
 * before it returns): counting it there too lost a reference twice and
 * left the waiter waiting for ever.
 */
static void nbd_request_free(void *opaque)
{
    nbd_request_unref(opaque);
}

static int nbd_extent_cb(void *opaque, const char *context, uint64_t offset,
                         uint32_t *entries, size_t nr_entries, int *error)
{
    NBDExtent *e = opaque;

    /* The first extent of the context: (length, flags) pairs. */
    if (!e->seen && nr_entries >= 2 && g_str_equal(context, e->context)) {
        e->length = entries[0];
        e->flags = entries[1];
        e->seen = true;
    }
    return 0;
}

/* One command of r: libnbd's cookie, or -1 with libnbd's error set. */
static int64_t nbd_request_start_one(NBDRequest *r, uint64_t offset,
                                     uint8_t *buf, size_t bytes,
                                     NBDExtent *extent)
{
    struct nbd_handle *h = nbd_conn_handle(r->conn);
    nbd_completion_callback cb = {
        .callback = nbd_request_cb, .user_data = r, .free = nbd_request_free,
    };

    switch (r->op) {
    case NBD_OP_READ:
        return nbd_aio_pread(h, buf, bytes, offset, cb, 0);
    case NBD_OP_WRITE:
        return nbd_aio_pwrite(h, buf, bytes, offset, cb, 0);
    case NBD_OP_ZERO:
        return nbd_aio_zero(h, bytes, offset, cb, 0);
    case NBD_OP_TRIM:
        return nbd_aio_trim(h, bytes, offset, cb, 0);
    case NBD_OP_FLUSH:
        return nbd_aio_flush(h, cb, 0);
    case NBD_OP_BLOCK_STATUS:
        return nbd_aio_block_status(h, bytes, offset, (nbd_extent_callback) {
                                        .callback = nbd_extent_cb,
                                        .user_data = extent,
                                    }, cb, LIBNBD_CMD_FLAG_REQ_ONE);
    }
    g_assert_not_reached();
}

/* The usable connection with the fewest requests in flight, or NULL. */
static NBDConn *nbd_pick_conn(BDRVNBDState *s)
{
    NBDConn *best = NULL;

    for (unsigned i = 0; i < s->nconns; i++) {
        NBDConn *c = s->conns[i];

        if (nbd_conn_usable(c) &&
            (!best || nbd_conn_in_flight(c) < nbd_conn_in_flight(best))) {
            best = c;
        }
    }
    return best;
}

/*
 * Do op on [offset, offset + bytes) in commands the server takes, all
 * started before the first is waited for, and wait. Threads calling this
 * together have their commands on the wire together.
 */
static int nbd_request_run(BlockDriverState *bs, NBDOp op, uint64_t offset,
                           uint8_t *buf, size_t bytes, NBDExtent *extent,
                           Error **errp)
{
    BDRVNBDState *s = bs->opaque;
    NBDConn *c = nbd_pick_conn(s);
    NBDWait w = { 0 };
    NBDRequest *r;
    bool started = false;

    if (!c) {
        g_autofree char *why = nbd_conn_lost_reason(s->conns[0]);

        error_setg(errp, "Could not %s '%s': the connection to the server "
                   "was lost%s%s", nbd_op_what[op], bs->filename,
                   why ? ": " : "", why ? why : "");
        return -1;
    }
    r = g_new(NBDRequest, 1);
    *r = (NBDRequest) {
        .bs = bs, .conn = c, .op = op, .offset = offset, .pending = 1,
        .wait = &w,
    };
    nbd_conn_add_in_flight(c, 1);
    do {
        /* Block status is one command: its first extent is the answer. */
        size_t n = op == NBD_OP_BLOCK_STATUS ? bytes
                 : MIN(bytes, s->max_request);

        g_atomic_int_inc(&r->pending);      /* dropped by nbd_request_free */
        if (nbd_request_start_one(r, offset, buf, n, extent) < 0) {
            struct nbd_handle *h = nbd_conn_handle(c);

            if (nbd_aio_is_dead(h) || nbd_aio_is_closed(h)) {
                g_atomic_int_compare_and_exchange(&r->error, 0, ENOTCONN);
            } else {
                error_setg(&r->start_err, "Could not %s '%s': %s",
                           nbd_op_what[op], bs->filename,
                           nbd_get_error() ? nbd_get_error() : "failed");
            }
            break;
        }
        started = true;
        buf = buf ? buf + n : NULL;
        offset += n;
        bytes -= n;
    } while (bytes);
    if (started) {
        nbd_conn_started(c);
    }
    nbd_request_unref(r);
    nbd_conn_wait(c, &w.finished);
    if (w.err) {
        error_propagate(errp, w.err);
        return -1;
    }
    return 0;
}

/* ---- The driver's entries */

static int nbd_pread_node(BlockDriverState *bs, uint64_t offset, void *buf,
                          size_t bytes, Error **errp)
{
    BDRVNBDState *s = bs->opaque;
    /* Past the export's end reads as zeroes, as past a file's. */
    size_t in = offset < s->size ? MIN(bytes, s->size - offset) : 0;

    memset((uint8_t *)buf + in, 0, bytes - in);
    return in ? nbd_request_run(bs, NBD_OP_READ, offset, buf, in, NULL, errp)
              : 0;
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

static int nbd_pwrite_node(BlockDriverState *bs, uint64_t offset,
                           const void *buf, size_t bytes, int flags,
                           Error **errp)
{
    if (nbd_check_inside(bs, offset, bytes, errp) < 0) {
        return -1;
    }
    /* libnbd only reads from buf: the cast drops nothing it keeps. */
    return bytes ? nbd_request_run(bs, NBD_OP_WRITE, offset, (uint8_t *)buf,
                                   bytes, NULL, errp) : 0;
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
    if (bytes && nbd_request_run(bs, NBD_OP_ZERO, offset, NULL, bytes, NULL,
                                 errp) < 0) {
        return -1;
    }
    nbd_extent_cache_forget(s);
    return 0;
}

static int nbd_pdiscard_node(BlockDriverState *bs, uint64_t offset,
                             size_t bytes, Error **errp)
{
    BDRVNBDState *s = bs->opaque;

    /* A hint: a server that cannot trim keeps the bytes. */
    if (!s->can_trim || offset >= s->size || !bytes) {
        return 0;
    }
    if (nbd_request_run(bs, NBD_OP_TRIM, offset, NULL,
                        MIN(bytes, s->size - offset), NULL, errp) < 0) {
        return -1;
    }
    nbd_extent_cache_forget(s);
    return 0;
}

/*
 * Every write has completed when the block layer flushes (its callers
 * wait for each): the server's multi-conn promise makes a flush on any
 * connection cover them all, and without it there is one connection.
 */
static int nbd_flush_node(BlockDriverState *bs, Error **errp)
{
    BDRVNBDState *s = bs->opaque;

    if (!s->can_flush || (bs->open_flags & BDRV_O_NO_FLUSH)) {
        return 0;
    }
    return nbd_request_run(bs, NBD_OP_FLUSH, 0, NULL, 0, NULL, errp);
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

/* What the cache knows of offset: its kind, and *pnum; -1 if nothing. */
static int nbd_extent_cache_lookup(BDRVNBDState *s, uint64_t offset,
                                   uint64_t bytes, uint64_t *pnum)
{
    NBDExtentCache *c = &s->extent;
    int ret = -1;

    g_mutex_lock(&c->lock);
    if (offset >= c->start && offset < c->end) {
        *pnum = MIN(bytes, c->end - offset);
        ret = c->ret;
    }
    g_mutex_unlock(&c->lock);
    return ret;
}

static void nbd_extent_cache_store(BlockDriverState *bs, uint64_t start,
                                   uint64_t len, int ret)
{
    BDRVNBDState *s = bs->opaque;
    NBDExtentCache *c = &s->extent;

    if (bdrv_is_read_only(bs) || ret == BDRV_BLOCK_DATA) {
        g_mutex_lock(&c->lock);
        c->start = start;
        c->end = start + len;
        c->ret = ret;
        g_mutex_unlock(&c->lock);
    }
}

static void nbd_extent_cache_forget(BDRVNBDState *s)
{
    g_mutex_lock(&s->extent.lock);
    s->extent.start = s->extent.end = 0;
    g_mutex_unlock(&s->extent.lock);
}

static int nbd_block_status_node(BlockDriverState *bs, uint64_t offset,
                                 uint64_t bytes, uint64_t *pnum,
                                 uint64_t *map, BlockDriverState **file,
                                 Error **errp)
{
    BDRVNBDState *s = bs->opaque;
    NBDExtent e = { .context = nbd_status_context(s) };
    int ret = BDRV_BLOCK_DATA;

    *pnum = bytes;
    *map = offset;
    *file = bs;
    if (s->allocation && offset < s->size) {
        int cached = nbd_extent_cache_lookup(s, offset, bytes, pnum);
        /* The whole extent is asked for, to be remembered. */
        uint64_t ask = MIN(s->size - offset, (uint64_t)UINT32_MAX);

        if (cached >= 0) {
            return cached | BDRV_BLOCK_OFFSET_VALID;
        }
        if (nbd_request_run(bs, NBD_OP_BLOCK_STATUS, offset, NULL, ask, &e,
                            errp) < 0) {
            return -1;
        }
        /*
         * As QEMU reads the flags: a hole holds no data (and reads as
         * zeroes only if it says so), zero is known zero.
         */
        if (e.seen && e.length) {
            ret = (e.flags & LIBNBD_STATE_HOLE ? 0 : BDRV_BLOCK_DATA) |
                  (e.flags & LIBNBD_STATE_ZERO ? BDRV_BLOCK_ZERO : 0);
            nbd_extent_cache_store(bs, offset, MIN(ask, e.length), ret);
            *pnum = MIN(bytes, e.length);
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
NBD_DRIVER(bdrv_nbds, "nbds");
NBD_DRIVER(bdrv_nbds_unix, "nbds+unix");
