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
    [PREALLOC_MODE_METADATA] = "metadata",
};

int prealloc_mode_parse(const char *name)
{
    /* A file's modes: metadata is a format's (resize parses it). */
    for (int i = 0; i <= PREALLOC_MODE_FULL; i++) {
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

/* Drivers added at run time (bdrv_register()), after those of the build. */
static GPtrArray *bdrv_registered;

void bdrv_register(const BlockDriver *drv)
{
    if (!bdrv_registered) {
        bdrv_registered = g_ptr_array_new();
    }
    g_ptr_array_add(bdrv_registered, (gpointer)drv);
}

/* The i-th driver: the build's, then the registered ones; NULL at the end. */
static const BlockDriver *bdrv_driver_at(size_t i)
{
    size_t n = 0;

    while (bdrv_drivers[n]) {
        n++;
    }
    if (i < n) {
        return bdrv_drivers[i];
    }
    i -= n;
    return bdrv_registered && i < bdrv_registered->len ?
           g_ptr_array_index(bdrv_registered, i) : NULL;
}

const BlockDriver *bdrv_find_driver(const char *name)
{
    const BlockDriver *drv;

    for (size_t i = 0; (drv = bdrv_driver_at(i)); i++) {
        if (g_str_equal(drv->format_name, name)) {
            return drv;
        }
    }
    return NULL;
}

/* QEMU's path_has_protocol(): "PROTO:" before any '/'; its length or 0. */
static size_t bdrv_protocol_prefix_len(const char *filename)
{
    size_t n = strcspn(filename, ":/");

    return filename[n] == ':' ? n : 0;
}

const BlockDriver *bdrv_find_protocol(const char *filename, Error **errp)
{
    size_t n = bdrv_protocol_prefix_len(filename);
    g_autofree char *proto = g_strndup(filename, n ? n : strlen("file"));
    const BlockDriver *drv;

    if (!n) {
        memcpy(proto, "file", strlen("file"));
    }
    for (size_t i = 0; (drv = bdrv_driver_at(i)); i++) {
        if (drv->protocol_name && g_str_equal(drv->protocol_name, proto)) {
            return drv;
        }
    }
    error_setg(errp, "Unknown protocol '%s'", proto);
    return NULL;
}

/*
 * The options that filename, given on the command line, stands for on
 * drv (its protocol): put into opts, under prefix ("" or "file.").
 */
static int bdrv_protocol_fill_opts(const BlockDriver *drv,
                                   const char *filename, GHashTable *opts,
                                   const char *prefix, Error **errp)
{
    g_autoptr(GHashTable) sub = qemu_opts_new();
    GHashTableIter iter;
    gpointer key, value;

    if (drv->bdrv_parse_filename) {
        if (drv->bdrv_parse_filename(filename, sub, errp) < 0) {
            return -1;
        }
    } else {
        size_t n = bdrv_protocol_prefix_len(filename);

        g_hash_table_insert(sub, g_strdup("filename"),
                            g_strdup(filename + (n ? n + 1 : 0)));
    }
    g_hash_table_insert(sub, g_strdup("driver"), g_strdup(drv->format_name));
    g_hash_table_iter_init(&iter, sub);
    while (g_hash_table_iter_next(&iter, &key, &value)) {
        g_hash_table_insert(opts, g_strconcat(prefix, key, NULL),
                            g_strdup(value));
    }
    return 0;
}

const BlockDriver *bdrv_probe_all(const uint8_t *buf, int buf_size,
                                  const uint8_t *tail, int tail_size,
                                  const char *filename)
{
    const BlockDriver *best = NULL;
    int best_score = 0;

    const BlockDriver *drv;

    for (size_t i = 0; (drv = bdrv_driver_at(i)); i++) {
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
    if (bdrv_pread(file, 0, buf, *buf_size, errp) < 0 ||
        bdrv_pread(file, len - *tail_size, tail, *tail_size, errp) < 0) {
        return -1;
    }
    return 0;
}

/* The format driver that claims file's contents, *drv NULL if none. */
static int bdrv_probe_file(BlockDriverState *file, const BlockDriver **drv,
                           Error **errp)
{
    uint8_t buf[BDRV_PROBE_BUF_SIZE];
    uint8_t tail[BDRV_PROBE_TAIL_SIZE];
    int n, tail_n;

    if (bdrv_probe_read(file, buf, &n, tail, &tail_n, errp) < 0) {
        return -1;
    }
    *drv = bdrv_probe_all(buf, n, tail, tail_n, bdrv_get_filename(file));
    return 0;
}

/* The format of the image in file, asking every format driver. */
static const BlockDriver *bdrv_probe_format(BlockDriverState *file,
                                            Error **errp)
{
    const BlockDriver *drv;

    if (bdrv_probe_file(file, &drv, errp) < 0) {
        return NULL;
    }
    if (!drv) {
        error_setg(errp, "Could not determine image format: No compatible "
                   "driver found");
    }
    return drv;
}

const char *bdrv_probe_format_name(BlockDriverState *file, Error **errp)
{
    const BlockDriver *drv;

    if (bdrv_probe_file(file, &drv, errp) < 0) {
        return NULL;
    }
    return drv ? drv->format_name : "raw";
}

BlockDriverState *bdrv_attach_child(BlockDriverState *parent,
                                    BlockDriverState *child,
                                    const char *name, unsigned role)
{
    BdrvChild *c = g_new0(BdrvChild, 1), **tail = &parent->children;

    c->bs = child;
    c->name = g_strdup(name);
    c->role = role;
    while (*tail) {
        tail = &(*tail)->next;
    }
    *tail = c;
    if (g_str_equal(name, "file")) {
        parent->file = child;
    } else if (g_str_equal(name, "backing")) {
        parent->backing = child;
    }
    return child;
}

/* Close the children, the last attached first (it may use the others). */
static void bdrv_close_children(BdrvChild *c)
{
    if (!c) {
        return;
    }
    bdrv_close_children(c->next);
    bdrv_close(c->bs);
    g_free(c->name);
    g_free(c);
}

/* Free a node whose driver has let go of it, and its children. */
static void bdrv_free(BlockDriverState *bs)
{
    bdrv_close_children(bs->children);
    g_free(bs->filename);
    g_free(bs->json_filename);
    g_free(bs->flush_error);
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
    bs->request_alignment = 1;
    if (file) {
        bdrv_attach_child(bs, file, "file",
                          BDRV_CHILD_DATA | BDRV_CHILD_METADATA);
        bs->interrupt = file->interrupt;
    }
    return bs;
}

void bdrv_new_node_abandon(BlockDriverState *bs)
{
    BdrvChild **p = &bs->children;

    /* Its "file" child is unlinked first: the caller keeps it. */
    while (*p) {
        if ((*p)->bs == bs->file) {
            BdrvChild *c = *p;

            *p = c->next;
            g_free(c->name);
            g_free(c);
            break;
        }
        p = &(*p)->next;
    }
    bdrv_free(bs);
}

/*
 * A backing chain that meets an image twice would open forever; one too
 * long, nearly so. Checked against the images that bs, a new backing
 * file's file node, is opened below (inherits_from and up).
 */
static int bdrv_check_backing_chain(BlockDriverState *inherits_from,
                                    BlockDriverState *file, Error **errp)
{
    g_autofree char *id = bdrv_get_identity(file);
    int depth = 0;

    for (BlockDriverState *a = inherits_from; a; a = a->inherits_from) {
        g_autofree char *above = id ? bdrv_get_identity(a) : NULL;

        if (above && g_str_equal(above, id)) {
            error_setg(errp, "Backing file '%s' is already in the chain "
                       "above it (a backing file loop)",
                       bdrv_get_filename(file));
            return -1;
        }
        if (++depth >= BDRV_MAX_BACKING_DEPTH) {
            error_setg(errp, "Backing file chain is too deep (more than %d "
                       "images)", BDRV_MAX_BACKING_DEPTH);
            return -1;
        }
    }
    return 0;
}

/* opts[key], if given, is one of the NULL-terminated values. */
static int bdrv_take_enum_opt(GHashTable *opts, const char *key,
                              const char *const *values, Error **errp)
{
    g_autofree char *v = qemu_opt_take(opts, key);

    if (!v) {
        return 0;
    }
    for (const char *const *a = values; *a; a++) {
        if (g_str_equal(v, *a)) {
            return 0;
        }
    }
    error_setg(errp, "Parameter '%s' does not accept value '%s'", key, v);
    return -1;
}

/*
 * QEMU's generic node options (its bdrv_runtime_opts), which libvirt's
 * -blockdev JSON carries on every node. What has a meaning here changes
 * *flags: read-only=on opens the node (and its children) read-only,
 * cache.direct=on is O_DIRECT, cache.no-flush=on never syncs. node-name,
 * auto-read-only, discard and detect-zeroes are checked and taken: a
 * tool with one image and no guest has nothing to do with them.
 */
static int bdrv_take_runtime_opts(GHashTable *opts, int *flags, Error **errp)
{
    static const char *const discard[] = {
        "ignore", "off", "unmap", "on", NULL
    };
    static const char *const detect_zeroes[] = { "off", "on", "unmap", NULL };
    g_autofree char *node_name = qemu_opt_take(opts, "node-name");
    bool read_only, auto_ro, direct, no_flush;

    if (node_name && !*node_name) {
        error_setg(errp, "Invalid node-name: ''");
        return -1;
    }
    if (qemu_opt_take_bool(opts, "read-only", false, &read_only, errp) < 0 ||
        qemu_opt_take_bool(opts, "auto-read-only", false, &auto_ro,
                           errp) < 0 ||
        qemu_opt_take_bool(opts, "cache.direct", !!(*flags & BDRV_O_NOCACHE),
                           &direct, errp) < 0 ||
        qemu_opt_take_bool(opts, "cache.no-flush",
                           !!(*flags & BDRV_O_NO_FLUSH), &no_flush,
                           errp) < 0 ||
        bdrv_take_enum_opt(opts, "discard", discard, errp) < 0 ||
        bdrv_take_enum_opt(opts, "detect-zeroes", detect_zeroes, errp) < 0) {
        return -1;
    }
    if (read_only) {
        *flags &= ~BDRV_O_RDWR;
    }
    *flags = direct ? *flags | BDRV_O_NOCACHE : *flags & ~BDRV_O_NOCACHE;
    *flags = no_flush ? *flags | BDRV_O_NO_FLUSH : *flags & ~BDRV_O_NO_FLUSH;
    return 0;
}

/*
 * QEMU's bdrv_refresh_filename, in short: a node whose options a plain
 * file name cannot say (blkdebug with rules, quorum), and any node above
 * one but a backing file's, is named json:{the options it was opened
 * with}; the others keep their file's name. A probed format is written
 * in with the rest, as QEMU names what it opened.
 */
static void bdrv_set_json_filename(BlockDriverState *bs, GHashTable *given)
{
    g_autofree char *json = NULL;
    bool needed = bs->needs_json_name;

    for (BdrvChild *c = bs->children; c && !needed; c = c->next) {
        needed = !(c->role & BDRV_CHILD_COW) && c->bs->json_filename;
    }
    if (!needed) {
        return;
    }
    if (!g_hash_table_contains(given, "driver")) {
        g_hash_table_insert(given, g_strdup("driver"),
                            g_strdup(bs->drv->format_name));
    }
    json = qemu_opts_to_json(given);
    bs->json_filename = g_strconcat("json:", json, NULL);
}

/*
 * Open a node from opts (taken: whatever is left is reported unknown);
 * inherits_from: the image it is the backing file of, or NULL.
 */
static BlockDriverState *bdrv_open_opts(GHashTable *opts, int flags,
                                        BlockDriverState *inherits_from,
                                        Error **errp)
{
    /* Before anything is taken: a json: name may be made of them. */
    g_autoptr(GHashTable) given = qemu_opts_copy(opts);
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
    if (bdrv_take_runtime_opts(opts, &flags, errp) < 0) {
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
        /* A name in options is a file's, whatever its colons (QEMU's). */
        drv = bdrv_find_driver("file");
    }

    if (drv && drv->child_alias) {
        g_autoptr(GHashTable) alias = qemu_opts_extract_prefix(
            opts, drv->child_alias);
        GHashTableIter iter;
        gpointer key, value;

        g_hash_table_iter_init(&iter, alias);
        while (g_hash_table_iter_next(&iter, &key, &value)) {
            g_hash_table_insert(opts, g_strconcat("file.", key, NULL),
                                g_strdup(value));
        }
    }
    if (!drv || (!drv->is_protocol && !drv->opens_own_children)) {
        file = bdrv_open_child(opts, "file", flags, false, errp);
        if (!file) {
            return NULL;
        }
        if (inherits_from &&
            bdrv_check_backing_chain(inherits_from, file, errp) < 0) {
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
    bs->inherits_from = inherits_from;
    if (drv->bdrv_open(bs, opts, flags, errp) < 0) {
        bdrv_free(bs);      /* and whatever children the driver attached */
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
    bdrv_set_json_filename(bs, given);
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
    return bdrv_open_opts(sub, flags, NULL, errp);
}

bool bdrv_names_local_file(const char *filename)
{
    const BlockDriver *drv = bdrv_find_protocol(filename, NULL);

    return drv && g_str_equal(drv->protocol_name, "file");
}

/*
 * A json:{...} name read from an image (a backing file name in a header)
 * names what a hostile image chose: it may describe nodes of local
 * drivers only (file, blkdebug, null, the formats), never one that
 * connects somewhere (nbd, rbd), whether by "driver" or by a "filename"
 * with a protocol prefix. Command-line names are the user's and are not
 * checked here.
 */
bool bdrv_json_name_is_local(const char *name, Error **errp)
{
    g_autoptr(GHashTable) opts = qemu_opts_from_json(name + 5, errp);
    GHashTableIter iter;
    gpointer key, value;

    if (!opts) {
        return false;
    }
    g_hash_table_iter_init(&iter, opts);
    while (g_hash_table_iter_next(&iter, &key, &value)) {
        const char *k = key, *v = value, *leaf = strrchr(k, '.');
        const BlockDriver *drv;

        leaf = leaf ? leaf + 1 : k;
        if (g_str_equal(leaf, "driver")) {
            drv = bdrv_find_driver(v);
            if (drv && drv->is_protocol &&
                (g_str_equal(drv->format_name, "nbd") ||
                 g_str_equal(drv->format_name, "rbd"))) {
                error_setg(errp, "Backing file name in the image names a "
                           "'%s' node: only local files are followed from "
                           "an image's header", v);
                return false;
            }
        } else if (g_str_equal(leaf, "filename") &&
                   !bdrv_names_local_file(v) &&
                   !g_str_has_prefix(v, "blkdebug:")) {
            error_setg(errp, "Backing file name in the image names '%s': "
                       "only local files are followed from an image's "
                       "header", v);
            return false;
        }
    }
    return true;
}

bool bdrv_backing_name_is_absolute(const char *name)
{
    return g_path_is_absolute(name) || g_str_has_prefix(name, "json:");
}

char *bdrv_parse_filename(const char *filename, Error **errp)
{
    const char *rest;

    const BlockDriver *drv = bdrv_find_protocol(filename, errp);
    size_t n = bdrv_protocol_prefix_len(filename);

    if (!drv) {
        return NULL;
    }
    /*
     * A protocol that makes images of its own (rbd) keeps its whole name:
     * bdrv_create_file() finds the protocol in it again.
     */
    if (!g_str_equal(drv->protocol_name, "file") && drv->bdrv_create_file) {
        return g_strdup(filename);
    }
    if (!g_str_equal(drv->protocol_name, "file")) {
        error_setg(errp, "Protocol '%s' does not support image creation",
                   drv->protocol_name);
        return NULL;
    }
    rest = filename + (n ? n + 1 : 0);
    /* "file:a:b" is the file "a:b", which alone would read as protocol a. */
    if (bdrv_protocol_prefix_len(rest)) {
        return g_strconcat("./", rest, NULL);
    }
    return g_strdup(rest);
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

static BlockDriverState *bdrv_open_inherit(const char *filename,
                                           const char *format,
                                           GHashTable *options, int flags,
                                           BlockDriverState *inherits_from,
                                           Error **errp)
{
    g_autoptr(GHashTable) opts = options ? qemu_opts_copy(options)
                                         : qemu_opts_new();
    const BlockDriver *fmt_drv = NULL;
    const char *driver;

    if (filename && g_str_has_prefix(filename, "json:")) {
        if (bdrv_merge_json_filename(opts, filename, errp) < 0) {
            return NULL;
        }
        if (format) {
            g_hash_table_insert(opts, g_strdup("driver"), g_strdup(format));
        }
        filename = NULL;
    }
    if (format) {
        driver = g_hash_table_lookup(opts, "driver");
        if (driver && !g_str_equal(driver, format)) {
            error_setg(errp, "Cannot use image format '%s' with driver '%s'",
                       format, driver);
            return NULL;
        }
        g_hash_table_insert(opts, g_strdup("driver"), g_strdup(format));
        fmt_drv = bdrv_find_driver(format);
    }
    if (filename) {
        const BlockDriver *proto = bdrv_find_protocol(filename, errp);

        if (!proto) {
            return NULL;
        }
        /* "-f file x": the protocol node itself, at the top. */
        if (fmt_drv && fmt_drv->is_protocol) {
            /* By name: one driver may answer several prefixes (nbd). */
            if (!g_str_equal(fmt_drv->format_name, proto->format_name)) {
                error_setg(errp, "Cannot use protocol driver '%s' for '%s'",
                           format, filename);
                return NULL;
            }
            g_hash_table_remove(opts, "driver");
        }
        if (bdrv_protocol_fill_opts(proto, filename, opts,
                                    fmt_drv && fmt_drv->is_protocol ?
                                    "" : "file.", errp) < 0) {
            return NULL;
        }
    }
    return bdrv_open_opts(opts, flags, inherits_from, errp);
}

BlockDriverState *bdrv_open_protocol(const char *filename, int flags,
                                     Error **errp)
{
    const BlockDriver *proto;

    /* Options, not a protocol: a file's, as "-f file json:{...}" reads. */
    if (g_str_has_prefix(filename, "json:")) {
        return bdrv_open(filename, "file", NULL, flags, errp);
    }
    proto = bdrv_find_protocol(filename, errp);
    return proto ? bdrv_open(filename, proto->format_name, NULL, flags, errp)
                 : NULL;
}

BlockDriverState *bdrv_open(const char *filename, const char *format,
                            GHashTable *options, int flags, Error **errp)
{
    return bdrv_open_inherit(filename, format, options, flags, NULL, errp);
}

int bdrv_open_backing(BlockDriverState *bs, const char *filename,
                      const char *format, GHashTable *options, int flags,
                      Error **errp)
{
    BlockDriverState *backing = bdrv_open_inherit(filename, format, options,
                                                  flags & ~BDRV_O_RDWR, bs,
                                                  errp);

    if (!backing) {
        return -1;
    }
    bdrv_attach_child(bs, backing, "backing", BDRV_CHILD_COW);
    return 0;
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
    bdrv_free(bs);
}

BlockDriverState *bdrv_get_backing(BlockDriverState *bs)
{
    return bs->backing;
}

BlockDriverState *bdrv_skip_filters(BlockDriverState *bs)
{
    while (bs && bs->drv->is_filter && bs->file) {
        bs = bs->file;
    }
    return bs;
}

const char *bdrv_get_format_name(BlockDriverState *bs)
{
    return bs->drv->format_name;
}

/* The protocol node below bs (bs itself if it is one), or NULL. */
static BlockDriverState *bdrv_protocol_node(BlockDriverState *bs)
{
    while (bs && !bs->drv->is_protocol) {
        bs = bs->file;
    }
    return bs;
}

/*
 * The largest parallel_requests and request_size of the nodes below bs,
 * each node once: a node may be reached by several paths (a backing
 * chain 60 images deep took for ever when walked as a tree).
 */
static void bdrv_protocol_hints(BlockDriverState *bs, GHashTable *seen,
                                unsigned *requests, size_t *size)
{
    if (!g_hash_table_add(seen, bs)) {
        return;
    }
    *requests = MAX(*requests, bs->drv->parallel_requests);
    *size = MAX(*size, bs->drv->request_size);
    for (BdrvChild *c = bs->children; c; c = c->next) {
        bdrv_protocol_hints(c->bs, seen, requests, size);
    }
}

unsigned bdrv_parallel_requests(BlockDriverState *bs)
{
    g_autoptr(GHashTable) seen = g_hash_table_new(NULL, NULL);
    unsigned requests = 0;
    size_t size = 0;

    bdrv_protocol_hints(bs, seen, &requests, &size);
    return requests;
}

size_t bdrv_request_size(BlockDriverState *bs)
{
    g_autoptr(GHashTable) seen = g_hash_table_new(NULL, NULL);
    unsigned requests = 0;
    size_t size = 0;

    bdrv_protocol_hints(bs, seen, &requests, &size);
    return size;
}

char *bdrv_get_identity(BlockDriverState *bs)
{
    bs = bdrv_protocol_node(bs);
    return bs && bs->drv->bdrv_get_identity ? bs->drv->bdrv_get_identity(bs)
                                            : NULL;
}

char *bdrv_dirname(BlockDriverState *bs, Error **errp)
{
    BlockDriverState *p = bdrv_protocol_node(bs);

    if (p && p->drv->bdrv_dirname) {
        return p->drv->bdrv_dirname(p, errp);
    }
    if (p) {
        error_setg(errp, "Cannot resolve names relative to '%s' (protocol "
                   "'%s')", bdrv_get_filename(bs), p->drv->format_name);
        return NULL;
    }
    /*
     * No protocol node down the "file" children: a node with children of
     * its own (quorum), whose files need not share a directory.
     */
    while (bs->file) {
        bs = bs->file;
    }
    error_setg(errp, "Cannot generate a base directory for %s nodes",
               bs->drv->format_name);
    return NULL;
}

const char *bdrv_get_filename(BlockDriverState *bs)
{
    while (!bs->filename && bs->file) {
        bs = bs->file;
    }
    if (bs->filename) {
        return bs->filename;
    }
    /* A node with no file below it (quorum) goes by its options. */
    return bs->json_filename ? bs->json_filename : "";
}

int64_t bdrv_get_allocated_file_size(BlockDriverState *bs)
{
    int64_t sum = 0;

    if (bs->drv->bdrv_get_allocated_file_size) {
        return bs->drv->bdrv_get_allocated_file_size(bs);
    }
    if (!bs->children) {
        return -1;
    }
    /* What the image's own files hold: a backing file is another image. */
    for (BdrvChild *c = bs->children; c; c = c->next) {
        int64_t size;

        if (c->role & BDRV_CHILD_COW) {
            continue;
        }
        size = bdrv_get_allocated_file_size(c->bs);
        if (size < 0) {
            return -1;
        }
        sum += size;
    }
    return sum;
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
    g_autofree char *unknown = NULL;
    uint64_t hint;
    bool nocow;

    /*
     * QEMU's file protocol takes these with any format: XFS's extent size
     * hint and btrfs's no-copy-on-write flag. They are checked as qemu-img
     * checks them and have no effect here (ext4, tmpfs: no such thing).
     */
    if (qemu_opt_take_size(opts, "extent_size_hint", 0, &hint, errp) < 0 ||
        qemu_opt_take_bool(opts, "nocow", false, &nocow, errp) < 0) {
        return -1;
    }
    if (hint > UINT32_MAX) {
        error_setg(errp, "Extent size hint is too large");
        return -1;
    }
    unknown = qemu_opts_first_key(opts);
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

void bdrv_set_interrupt(BlockDriverState *bs,
                        const volatile sig_atomic_t *flag)
{
    bs->interrupt = flag;
    for (BdrvChild *c = bs->children; c; c = c->next) {
        bdrv_set_interrupt(c->bs, flag);
    }
}

bool bdrv_interrupted(BlockDriverState *bs)
{
    return bs->interrupt && *bs->interrupt;
}

/* Whether descs (a creation option table) has an option called name. */
static bool option_descs_have(const BlockOptionDesc *descs, const char *name)
{
    for (; descs && descs->name; descs++) {
        if (g_str_equal(descs->name, name)) {
            return true;
        }
    }
    return false;
}

/*
 * The creation options of drv's new image that its file's protocol takes
 * (BlockDriver.create_file_opts): moved from create_opts into opts.
 */
static void bdrv_create_move_file_opts(const BlockDriver *proto,
                                       const BlockDriver *drv,
                                       GHashTable *create_opts,
                                       GHashTable *opts)
{
    const BlockOptionDesc *d;

    for (d = proto->create_file_opts; create_opts && d && d->name; d++) {
        char *value = qemu_opt_take(create_opts, d->name);

        if (value && drv && drv != proto &&
            option_descs_have(drv->create_opts, d->name)) {
            g_hash_table_insert(create_opts, g_strdup(d->name), value);
        } else if (value) {
            g_hash_table_insert(opts, g_strdup(d->name), value);
        }
    }
}

/* bdrv_create_file(), with drv's creation options for the protocol. */
static BlockDriverState *bdrv_create_file_for(const BlockDriver *drv,
                                              GHashTable *create_opts,
                                              const char *filename,
                                              int flags,
                                              const volatile sig_atomic_t
                                              *interrupt, Error **errp)
{
    const BlockDriver *proto = bdrv_find_protocol(filename, errp);
    g_autoptr(GHashTable) opts = qemu_opts_new();
    g_autofree char *unknown = NULL;
    BlockDriverState *bs;

    if (!proto) {
        return NULL;
    }
    if (!proto->bdrv_create_file) {
        error_setg(errp, "Protocol '%s' does not support image creation",
                   proto->protocol_name);
        return NULL;
    }
    /* -f rbd makes an RBD image: the name must say which one. */
    if (drv && drv->is_protocol && drv != proto) {
        error_setg(errp, "File name '%s' is not a name of the '%s' protocol",
                   filename, drv->protocol_name);
        return NULL;
    }
    if (bdrv_protocol_fill_opts(proto, filename, opts, "", errp) < 0) {
        return NULL;
    }
    g_hash_table_remove(opts, "driver");
    bdrv_create_move_file_opts(proto, drv, create_opts, opts);
    bs = bdrv_new_node(proto, NULL, flags | BDRV_O_RDWR);
    bs->interrupt = interrupt;
    if (proto->bdrv_create_file(bs, opts, flags | BDRV_O_RDWR, errp) < 0) {
        bdrv_free(bs);
        return NULL;
    }
    unknown = qemu_opts_first_key(opts);
    if (unknown) {
        error_setg(errp, "Protocol '%s' does not support the option '%s'",
                   proto->protocol_name, unknown);
        bdrv_close(bs);
        return NULL;
    }
    return bs;
}

BlockDriverState *bdrv_create_file(const char *filename, int flags,
                                   const volatile sig_atomic_t *interrupt,
                                   Error **errp)
{
    return bdrv_create_file_for(NULL, NULL, filename, flags, interrupt, errp);
}

int bdrv_create_fit(BlockDriverState *file, uint64_t size,
                    PreallocMode prealloc, Error **errp)
{
    if (file->drv->bdrv_create_fit) {
        return file->drv->bdrv_create_fit(file, size, prealloc, errp);
    }
    return bdrv_truncate(file, size, prealloc, errp);
}

int bdrv_create_fit_raw(BlockDriverState *file, uint64_t size,
                        PreallocMode prealloc, Error **errp)
{
    /* As QEMU's allocate_first_block(): its O_DIRECT alignment probe. */
    static const uint8_t zeroes[BDRV_DIRECT_ALIGN];
    size_t first = MIN(size, sizeof(zeroes));

    if (bdrv_create_fit(file, size, prealloc, errp) < 0) {
        return -1;
    }
    if (prealloc == PREALLOC_MODE_FULL || !first ||
        !bdrv_has_zero_init(file)) {
        return 0;
    }
    return bdrv_pwrite(file, 0, zeroes, first, 0, errp);
}

/*
 * The new image of drv on file (bdrv_create_file()), open with flags: as
 * the driver made it, or opened on file as usual. NULL (file dropped, and
 * with it the new file) on failure. want_node false: only the image is
 * wanted, returned as its file node, still to be finished.
 */
static BlockDriverState *bdrv_create_on(const BlockDriver *drv,
                                        BlockDriverState *file,
                                        GHashTable *opts, int flags,
                                        bool want_node, Error **errp)
{
    g_autoptr(GHashTable) none = NULL;
    BlockDriverState *bs = NULL;

    if (drv->bdrv_create(file, opts, flags, want_node ? &bs : NULL,
                         errp) < 0) {
        bdrv_close(file);
        return NULL;
    }
    if (bs || !want_node || drv->is_protocol) {
        return bs ? bs : file;
    }
    bs = bdrv_new_node(drv, file, flags);
    bs->interrupt = file->interrupt;
    none = qemu_opts_new();
    if (drv->bdrv_open(bs, none, flags, errp) < 0) {
        bdrv_free(bs);
        return NULL;
    }
    return bs;
}

int bdrv_create(const char *format, const char *filename, GHashTable *opts,
                const volatile sig_atomic_t *interrupt, Error **errp)
{
    const BlockDriver *drv = bdrv_find_create_driver(format, errp);
    BlockDriverState *file, *bs;
    int ret;

    file = drv ? bdrv_create_file_for(drv, opts, filename, 0, interrupt,
                                      errp) : NULL;
    bs = file ? bdrv_create_on(drv, file, opts, BDRV_O_RDWR, false, errp)
              : NULL;
    if (!bs) {
        return -1;              /* nothing is left */
    }
    ret = bdrv_create_finish(bs, errp);
    bdrv_close(bs);
    return ret;
}

BlockDriverState *bdrv_create_open(const char *format, const char *filename,
                                   GHashTable *opts, int flags,
                                   const volatile sig_atomic_t *interrupt,
                                   Error **errp)
{
    const BlockDriver *drv = bdrv_find_create_driver(format, errp);
    BlockDriverState *file;

    flags |= BDRV_O_RDWR;
    file = drv ? bdrv_create_file_for(drv, opts, filename, flags, interrupt,
                                      errp) : NULL;
    /* The new file lives in the node, unnamed until bdrv_create_finish(). */
    return file ? bdrv_create_on(drv, file, opts, flags, true, errp) : NULL;
}

/* Commit the new files below bs (not in a backing file: not new). */
static int bdrv_create_finish_children(BlockDriverState *bs, Error **errp)
{
    if (bs->drv->bdrv_create_finish &&
        bs->drv->bdrv_create_finish(bs, errp) < 0) {
        return -1;
    }
    for (BdrvChild *c = bs->children; c; c = c->next) {
        if (!(c->role & BDRV_CHILD_COW) &&
            bdrv_create_finish_children(c->bs, errp) < 0) {
            return -1;
        }
    }
    return 0;
}

int bdrv_create_finish(BlockDriverState *bs, Error **errp)
{
    if (bdrv_flush(bs, errp) < 0) {
        return -1;
    }
    return bdrv_create_finish_children(bs, errp);
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
               BdrvAmendStatusCB *status_cb, void *cb_opaque, Error **errp)
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
    return bs->drv->bdrv_amend(bs, opts, force, status_cb, cb_opaque, errp);
}

int bdrv_make_empty(BlockDriverState *bs, Error **errp)
{
    if (!bs->drv->bdrv_make_empty) {
        error_setg(errp, "Format driver '%s' cannot empty an image",
                   bs->drv->format_name);
        return -1;
    }
    if (bdrv_is_read_only(bs)) {
        error_setg(errp, "Image is read-only");
        return -1;
    }
    return bs->drv->bdrv_make_empty(bs, errp);
}

void bdrv_snapshot_info_list_free(BlockSnapshotInfo *list, size_t n)
{
    for (size_t i = 0; list && i < n; i++) {
        g_free(list[i].id);
        g_free(list[i].name);
    }
    g_free(list);
}

int bdrv_snapshot_list(BlockDriverState *bs, BlockSnapshotInfo **list,
                       size_t *n, Error **errp)
{
    *list = NULL;
    *n = 0;
    if (!bs->drv->bdrv_snapshot_list) {
        return 0;
    }
    return bs->drv->bdrv_snapshot_list(bs, list, n, errp);
}

/* Whether bs takes snapshot operations at all; errp set if not. */
static bool bdrv_snapshot_supported(BlockDriverState *bs, bool write,
                                    const char *unsupported, Error **errp)
{
    if (!bs->drv->bdrv_snapshot_create) {
        error_setg(errp, "%s", unsupported);
        return false;
    }
    if (write && bdrv_is_read_only(bs)) {
        error_setg(errp, "Image is read-only");
        return false;
    }
    return true;
}

int bdrv_snapshot_create(BlockDriverState *bs, const char *name,
                         Error **errp)
{
    if (!bdrv_snapshot_supported(bs, true, "-95 (Operation not supported)",
                                 errp)) {
        return -1;
    }
    return bs->drv->bdrv_snapshot_create(bs, name, errp);
}

int bdrv_snapshot_goto(BlockDriverState *bs, const char *id_or_name,
                       Error **errp)
{
    if (!bdrv_snapshot_supported(bs, true,
                                 "Block driver does not support snapshots",
                                 errp)) {
        return -1;
    }
    return bs->drv->bdrv_snapshot_goto(bs, id_or_name, errp);
}

int bdrv_snapshot_delete(BlockDriverState *bs, const char *name,
                         Error **errp)
{
    /* qemu-img looks the name up first: none to find. */
    if (!bdrv_snapshot_supported(bs, true, "snapshot not found", errp)) {
        return -1;
    }
    return bs->drv->bdrv_snapshot_delete(bs, name, errp);
}

int bdrv_snapshot_load_tmp(BlockDriverState *bs, const char *id,
                           const char *name, Error **errp)
{
    if (!bs->drv->bdrv_snapshot_load_tmp) {
        error_setg(errp, "Block format '%s' used by device '' does not "
                   "support internal snapshots", bs->drv->format_name);
        return -1;
    }
    if (!bdrv_is_read_only(bs)) {
        error_setg(errp, "Device '' is writable");
        return -1;
    }
    return bs->drv->bdrv_snapshot_load_tmp(bs, id, name, errp);
}

int bdrv_change_backing_file(BlockDriverState *bs, const char *backing_file,
                             const char *backing_fmt, Error **errp)
{
    if (!bs->drv->bdrv_change_backing_file) {
        error_setg(errp, "Operation not supported");
        return -1;
    }
    if (bdrv_is_read_only(bs)) {
        error_setg(errp, "Image is read-only");
        return -1;
    }
    if (backing_file && !backing_fmt) {
        error_setg(errp, "backing format must be specified");
        return -1;
    }
    return bs->drv->bdrv_change_backing_file(bs, backing_file, backing_fmt,
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

GPtrArray *bdrv_create_option_list(const char *format, const char *filename,
                                   Error **errp)
{
    const BlockDriver *drv = bdrv_find_create_driver(format, errp);
    const BlockDriver *proto = NULL;
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
    if (drv->is_protocol) {
        /* A protocol as the format (-f file, -f rbd) takes the size too. */
        static const BlockOptionDesc size_opt[] = {
            { "size", "size", "Virtual disk size" },
            { NULL }
        };

        option_list_add(list, size_opt);
    } else if (filename) {
        proto = bdrv_find_protocol(filename, NULL);
        option_list_add(list, !proto ? NULL
                              : proto->create_file_opts
                              ? proto->create_file_opts : proto->create_opts);
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

/* ---- Persistent dirty bitmaps */

bool bdrv_supports_persistent_bitmaps(BlockDriverState *bs)
{
    return bs->drv->bdrv_supports_persistent_bitmaps &&
           bs->drv->bdrv_supports_persistent_bitmaps(bs);
}

int bdrv_bitmap_list(BlockDriverState *bs, BlockImageInfoBitmap **out,
                     size_t *nb, Error **errp)
{
    *out = NULL;
    *nb = 0;
    return bs->drv->bdrv_bitmap_list ?
           bs->drv->bdrv_bitmap_list(bs, out, nb, errp) : 0;
}

void bdrv_bitmap_list_free(BlockImageInfoBitmap *list, size_t nb)
{
    for (size_t i = 0; i < nb; i++) {
        g_free(list[i].name);
    }
    g_free(list);
}

int bdrv_bitmap_op(BlockDriverState *bs, BdrvBitmapOp op, const char *name,
                   uint32_t granularity, Error **errp)
{
    if (!bs->drv->bdrv_bitmap_op) {
        if (op == BDRV_BITMAP_ADD) {
            /* qemu-img's words, less its node name ("#block123"). */
            error_setg(errp, "Can't store persistent bitmaps to '%s': "
                       "Operation not supported", bdrv_get_filename(bs));
        } else {
            error_setg(errp, "Dirty bitmap '%s' not found", name);
        }
        return -1;
    }
    return bs->drv->bdrv_bitmap_op(bs, op, name, granularity, errp);
}

int bdrv_bitmap_get(BlockDriverState *bs, const char *name,
                    BdrvBitmapBits *out, Error **errp)
{
    memset(out, 0, sizeof(*out));
    if (!bs->drv->bdrv_bitmap_get) {
        error_setg(errp, "Dirty bitmap '%s' not found", name);
        return -1;
    }
    return bs->drv->bdrv_bitmap_get(bs, name, out, errp);
}

int bdrv_bitmap_merge(BlockDriverState *bs, const char *name,
                      BlockDriverState *src, const char *src_name,
                      Error **errp)
{
    BdrvBitmapBits bits;
    int ret;

    if (!bs->drv->bdrv_bitmap_merge) {
        error_setg(errp, "Dirty bitmap '%s' not found", name);
        return -1;
    }
    if (bdrv_bitmap_get(src ? src : bs, src_name, &bits, errp) < 0) {
        return -1;
    }
    ret = bs->drv->bdrv_bitmap_merge(bs, name, &bits, errp);
    g_free(bits.bits);
    return ret;
}

int bdrv_bitmaps_store(BlockDriverState *bs, Error **errp)
{
    return bs->drv->bdrv_bitmaps_store ?
           bs->drv->bdrv_bitmaps_store(bs, errp) : 0;
}

int bdrv_flush_final(BlockDriverState *bs, Error **errp)
{
    if (!bdrv_is_read_only(bs) && bdrv_bitmaps_store(bs, errp) < 0) {
        return -1;
    }
    return bdrv_flush(bs, errp);
}
