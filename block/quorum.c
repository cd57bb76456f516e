/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The "quorum" driver, after QEMU's: one node over several children that
 * hold the same bytes (copies of an image on different disks). A read
 * asks every child and votes: the content that at least vote-threshold
 * children returned wins; with no such content the read fails. A write
 * goes to every child and succeeds if at least vote-threshold of them
 * took it. Flushes reach every child (the core flushes a node's children).
 *
 *   json:{"driver": "quorum", "vote-threshold": 2, "children": [
 *         {"driver": "file", "filename": "a.img"},
 *         {"driver": "file", "filename": "b.img"},
 *         {"driver": "file", "filename": "c.img"}]}
 *
 * Options:
 *   children.N.*       the children, from children.0 up, at least one;
 *   vote-threshold=T   how many children must agree, 1 to their number
 *                      (required);
 *   read-pattern=      "quorum" (the default: vote) or "fifo" (read the
 *                      first child that answers, the next on an error);
 *   rewrite-corrupted= on: a read that has a winner writes it back to the
 *                      children that returned something else (quorum
 *                      reads, read-write nodes only);
 *   blkverify=         taken for QEMU's sake; only "off" is supported.
 *
 * Its children need not share a directory, so names relative to the
 * node (a qcow2 backing file's) cannot be resolved: the driver has no
 * bdrv_dirname, and its name is always json:{...} (block.c).
 */
#include <errno.h>
#include <string.h>

#include "block/block_int.h"

typedef struct BDRVQuorumState {
    BlockDriverState **children;    /* attached to the node, which owns them */
    unsigned num_children;
    unsigned threshold;
    bool fifo;                      /* read-pattern=fifo */
    bool rewrite_corrupted;
} BDRVQuorumState;

static int quorum_take_read_pattern(GHashTable *opts, bool *fifo,
                                    Error **errp)
{
    g_autofree char *pattern = qemu_opt_take(opts, "read-pattern");

    *fifo = false;
    if (!pattern || g_str_equal(pattern, "quorum")) {
        return 0;
    }
    if (g_str_equal(pattern, "fifo")) {
        *fifo = true;
        return 0;
    }
    error_setg(errp, "Parameter 'read-pattern' does not accept value '%s' "
               "(use quorum or fifo)", pattern);
    return -1;
}

static int quorum_open_children(BlockDriverState *bs, GHashTable *opts,
                                int flags, Error **errp)
{
    BDRVQuorumState *s = bs->opaque;
    g_autoptr(GPtrArray) children = g_ptr_array_new();
    int ret = 0;

    for (unsigned i = 0;; i++) {
        g_autofree char *name = g_strdup_printf("children.%u", i);
        Error *local_err = NULL;
        BlockDriverState *child;

        if (!bdrv_opts_has_child(opts, name)) {
            break;
        }
        child = bdrv_open_child(opts, name, flags, false, &local_err);
        if (!child) {
            error_propagate(errp, local_err);
            ret = -1;
            break;
        }
        /* Attached at once: closed with the node, also on failure. */
        bdrv_attach_child(bs, child, name,
                          BDRV_CHILD_DATA | BDRV_CHILD_METADATA);
        g_ptr_array_add(children, child);
    }
    s->num_children = children->len;
    s->children = (BlockDriverState **)g_ptr_array_free(
        g_steal_pointer(&children), FALSE);
    return ret;
}

static int quorum_open(BlockDriverState *bs, GHashTable *opts, int flags,
                       Error **errp)
{
    BDRVQuorumState *s = bs->opaque;
    uint64_t threshold;
    bool blkverify;

    if (qemu_opt_take_uint(opts, "vote-threshold", 0, &threshold,
                           errp) < 0 ||
        quorum_take_read_pattern(opts, &s->fifo, errp) < 0 ||
        qemu_opt_take_bool(opts, "rewrite-corrupted", false,
                           &s->rewrite_corrupted, errp) < 0 ||
        qemu_opt_take_bool(opts, "blkverify", false, &blkverify, errp) < 0) {
        return -1;
    }
    if (blkverify) {
        error_setg(errp, "quorum: blkverify mode is not supported by "
                   "qemu-img-lite");
        return -1;
    }
    if (s->rewrite_corrupted && s->fifo) {
        error_setg(errp, "rewrite-corrupted=on cannot be used with "
                   "read-pattern=fifo");
        return -1;
    }
    if (quorum_open_children(bs, opts, flags, errp) < 0) {
        goto fail;
    }
    if (s->num_children < 1) {
        error_setg(errp, "Number of provided children must be 1 or more");
        goto fail;
    }
    if (threshold < 1) {
        error_setg(errp, "Parameter 'vote-threshold' expects a value >= 1");
        goto fail;
    }
    if (threshold > s->num_children) {
        error_setg(errp, "threshold may not exceed children count");
        goto fail;
    }
    s->threshold = threshold;
    /* A request every child takes in one piece. */
    for (unsigned i = 0; i < s->num_children; i++) {
        bs->request_alignment = MAX(bs->request_alignment,
                                    s->children[i]->request_alignment);
    }
    bs->needs_json_name = true;
    return 0;

fail:
    /* The core closes the children it finds attached; the array is ours. */
    g_clear_pointer(&s->children, g_free);
    return -1;
}

static void quorum_close(BlockDriverState *bs)
{
    BDRVQuorumState *s = bs->opaque;

    /* The children themselves are the node's (BdrvChild): closed there. */
    g_free(s->children);
}

/* read-pattern=fifo: the first child that reads, in order. */
static int quorum_read_fifo(BlockDriverState *bs, uint64_t offset, void *buf,
                            size_t bytes, Error **errp)
{
    BDRVQuorumState *s = bs->opaque;
    Error *last_err = NULL;

    for (unsigned i = 0; i < s->num_children; i++) {
        error_free(last_err);
        last_err = NULL;
        if (bdrv_pread(s->children[i], offset, buf, bytes, &last_err) == 0) {
            return 0;
        }
    }
    error_propagate(errp, last_err);
    return -1;
}

/*
 * The vote: every child reads into a buffer of its own; the content most
 * children returned wins if at least threshold of them did. Children that
 * failed vote for nothing. With rewrite-corrupted, the children that
 * returned something else (not those that failed) get the winner.
 */
static int quorum_pread(BlockDriverState *bs, uint64_t offset, void *buf,
                        size_t bytes, Error **errp)
{
    BDRVQuorumState *s = bs->opaque;
    unsigned n = s->num_children, winner = 0, best = 0, ok = 0;
    g_autofree uint8_t *bufs = NULL;
    g_autofree bool *failed = g_new0(bool, n);
    Error *first_err = NULL;

    if (s->fifo) {
        return quorum_read_fifo(bs, offset, buf, bytes, errp);
    }
    bufs = g_malloc((size_t)n * bytes);
    for (unsigned i = 0; i < n; i++) {
        Error *local_err = NULL;

        if (bdrv_pread(s->children[i], offset, bufs + (size_t)i * bytes,
                       bytes, &local_err) < 0) {
            failed[i] = true;
            if (!first_err) {
                first_err = local_err;
            } else {
                error_free(local_err);
            }
            continue;
        }
        ok++;
    }
    if (ok < s->threshold) {
        if (first_err) {
            error_prepend(&first_err, "quorum: only %u of %u children "
                          "could be read (vote-threshold %u): ", ok, n,
                          s->threshold);
            error_propagate(errp, first_err);
        } else {
            error_setg_errno(errp, EIO, "quorum: no children could be read");
        }
        return -1;
    }
    error_free(first_err);

    /* n is a handful: comparing every pair is cheap next to the reads. */
    for (unsigned i = 0; i < n; i++) {
        unsigned votes = 0;

        if (failed[i]) {
            continue;
        }
        for (unsigned j = 0; j < n; j++) {
            if (!failed[j] && memcmp(bufs + (size_t)i * bytes,
                                     bufs + (size_t)j * bytes, bytes) == 0) {
                votes++;
            }
        }
        if (votes > best) {
            best = votes;
            winner = i;
        }
    }
    if (best < s->threshold) {
        error_setg_errno(errp, EIO, "quorum: children disagree at offset %"
                         G_GUINT64_FORMAT " (%zu bytes): at most %u of %u "
                         "agree, vote-threshold is %u", offset, bytes, best,
                         n, s->threshold);
        return -1;
    }
    memcpy(buf, bufs + (size_t)winner * bytes, bytes);

    if (s->rewrite_corrupted && (bs->open_flags & BDRV_O_RDWR)) {
        for (unsigned i = 0; i < n; i++) {
            if (!failed[i] && memcmp(bufs + (size_t)i * bytes, buf,
                                     bytes) != 0) {
                /* A repair that fails leaves the child as it was. */
                bdrv_pwrite(s->children[i], offset, buf, bytes, 0, NULL);
            }
        }
    }
    return 0;
}

/* Every child; done if at least threshold of them took it. */
static int quorum_pwrite(BlockDriverState *bs, uint64_t offset,
                         const void *buf, size_t bytes, int flags,
                         Error **errp)
{
    BDRVQuorumState *s = bs->opaque;
    Error *first_err = NULL;
    unsigned ok = 0;

    /* buf is shared by all children: none may write into it. */
    flags &= ~BDRV_REQ_MAY_CLOBBER;
    for (unsigned i = 0; i < s->num_children; i++) {
        Error *local_err = NULL;

        if (bdrv_pwrite(s->children[i], offset, buf, bytes, flags,
                        &local_err) == 0) {
            ok++;
        } else if (!first_err) {
            first_err = local_err;
        } else {
            error_free(local_err);
        }
    }
    if (ok < s->threshold) {
        error_prepend(&first_err, "quorum: only %u of %u children took the "
                      "write (vote-threshold %u): ", ok, s->num_children,
                      s->threshold);
        error_propagate(errp, first_err);
        return -1;
    }
    error_free(first_err);
    return 0;
}

/* The children must agree on their size too. */
static int64_t quorum_getlength(BlockDriverState *bs, Error **errp)
{
    BDRVQuorumState *s = bs->opaque;
    int64_t len = bdrv_getlength_exact(s->children[0], errp);

    if (len < 0) {
        return -1;
    }
    for (unsigned i = 1; i < s->num_children; i++) {
        int64_t other = bdrv_getlength_exact(s->children[i], errp);

        if (other < 0) {
            return -1;
        }
        if (other != len) {
            error_setg_errno(errp, EIO, "quorum: children differ in size "
                             "('%s': %" G_GINT64_FORMAT " bytes, '%s': %"
                             G_GINT64_FORMAT " bytes)",
                             bdrv_get_filename(s->children[0]), len,
                             bdrv_get_filename(s->children[i]), other);
            return -1;
        }
    }
    return len;
}

const BlockDriver bdrv_quorum = {
    .format_name = "quorum",
    .instance_size = sizeof(BDRVQuorumState),
    .opens_own_children = true,
    .bdrv_open = quorum_open,
    .bdrv_close = quorum_close,
    .bdrv_pread = quorum_pread,
    .bdrv_pwrite = quorum_pwrite,
    .bdrv_getlength = quorum_getlength,
};
