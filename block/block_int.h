/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The block driver table: what a driver provides. Private to block/ (and
 * to tests of drivers): include/ holds what a user of the library calls.
 *
 * A driver is a BlockDriver; each open node (BlockDriverState) points at
 * one, with the driver's own state in bs->opaque (instance_size bytes).
 * block/block.c finds drivers (formats by probing, protocols by the file
 * name's prefix) and opens a format node's "file" child before the
 * driver's bdrv_open runs; block/io.c checks every request before it
 * reaches a driver. Drivers need do neither, and reach their children
 * through bdrv_pread() and the rest, never through child->drv.
 */
#ifndef BLOCK_BLOCK_INT_H
#define BLOCK_BLOCK_INT_H

#include "block/block.h"
#include "block/options.h"

typedef struct BlockDriver BlockDriver;

/*
 * What a child is to its parent (QEMU's BdrvChildRole, reduced): a node
 * may have several, each under a name ("file", "backing", "data-file",
 * "header") with its own options ("header.filename=...").
 */
enum {
    BDRV_CHILD_DATA = 1 << 0,       /* holds guest data */
    BDRV_CHILD_METADATA = 1 << 1,   /* holds the format's metadata */
    BDRV_CHILD_COW = 1 << 2,        /* unallocated parts read from it */
};

typedef struct BdrvChild BdrvChild;
struct BdrvChild {
    BlockDriverState *bs;
    char *name;
    unsigned role;                  /* BDRV_CHILD_* */
    BdrvChild *next;
};

struct BlockDriverState {
    const BlockDriver *drv;
    void *opaque;
    int open_flags;
    char *filename;             /* protocol nodes: the name opened */
    /*
     * The node's name when no plain file name says what its options do
     * (QEMU's bdrv_refresh_filename): "json:{...}" of the options it was
     * opened with, or NULL. Set by the core after bdrv_open when the
     * driver set needs_json_name, or a child that is not a backing file
     * has a json: name itself.
     */
    char *json_filename;
    bool needs_json_name;
    /*
     * Every child, in the order attached (bdrv_attach_child()): flushed
     * after the node in that order, closed with it in the reverse one.
     */
    BdrvChild *children;
    /* Shortcuts to the children called "file" and "backing", or NULL. */
    BlockDriverState *file;
    BlockDriverState *backing;
    /* A backing file: the image it backs (loop and depth checks). */
    BlockDriverState *inherits_from;
    /* The caller's stop flag (bdrv_set_interrupt()), or NULL. */
    const volatile sig_atomic_t *interrupt;
    /*
     * Requests reach the driver in whole blocks of this many bytes (1: any
     * byte range); block/io.c splits and patches the rest. Set at open.
     */
    uint32_t request_alignment;
    /*
     * The first failed flush of this node, or NULL (block/io.c): the
     * kernel may have dropped the pages it was to write and cleared the
     * error, so a later flush "succeeding" proves nothing. Every later
     * flush fails with it.
     */
    char *flush_error;
    /*
     * Writes that ended (counted after each, failed ones too) and the
     * count a flush last made durable: a protocol node's flush with
     * nothing written since the last one is skipped (as QEMU does), so
     * closing after a final flush asks nothing more of the disk
     * (block/io.c). Atomic.
     */
    gint write_gen;
    gint flushed_gen;
    gboolean flushed_once;
};

/* A request's end, for asynchronous drivers: ret < 0 with err on failure. */
typedef void BdrvRequestDone(void *opaque, int ret, Error *err);

/*
 * A compressed write between its halves (bdrv_compress(), then
 * bdrv_store_compressed()): the request, and what the format made of it.
 */
struct BdrvCompressed {
    uint64_t offset;
    size_t bytes;
    int flags;
    const uint8_t *buf;     /* the caller's data, unchanged until stored */
    uint64_t unit;          /* the format's unit of compression (cluster) */
    size_t nb;              /* units from offset rounded down to one */
    uint8_t *out;           /* unit i compressed at out + i * unit */
    size_t *clen;           /* its length; 0: not compressed (written as
                             * it is, or as zeroes) */
    size_t room;            /* units out and clen have room for */
};

struct BlockDriver {
    const char *format_name;
    size_t instance_size;
    /* A protocol driver holds bytes itself ("file"); a format needs a child. */
    bool is_protocol;
    /*
     * A filter passes its "file" child's bytes on, at the same offsets
     * (blkdebug): neither a protocol nor an image format of its own.
     */
    bool is_filter;

    /*
     * Protocols: the prefix that names the driver in a file name ("nbd"
     * in "nbd://host/export", "file" in "file:x"; a name without a prefix
     * is a file). See bdrv_find_protocol().
     */
    const char *protocol_name;
    /*
     * Optional: another name the "file" child goes by in options, as in
     * QEMU ("image" for blkdebug): alias.* are taken as file.*.
     */
    const char *child_alias;
    /*
     * The driver opens its children itself from the options (quorum's
     * "children.N"): the core opens no "file" child for it.
     */
    bool opens_own_children;
    /*
     * Optional, the blkdebug filter: a format driver says what it is
     * about to do to this node (QEMU's event names: "read_aio",
     * "write_aio", ...; bdrv_debug_event()).
     */
    void (*bdrv_debug_event)(BlockDriverState *bs, const char *event);
    /*
     * Optional, protocols: the options that a file name given on the
     * command line stands for, added to opts ("filename" for a file).
     * Without it, what follows "PROTO:" is "filename".
     */
    int (*bdrv_parse_filename)(const char *filename, GHashTable *opts,
                               Error **errp);
    /*
     * Optional, protocols: what the formats need instead of POSIX.
     * bdrv_get_identity: a string that two nodes share exactly when they
     * hold the same bytes (a file: its device and inode), for backing
     * loop detection; NULL if the node cannot tell. bdrv_dirname: where
     * names relative to the image resolve (a qcow2 backing file name), a
     * prefix ending in '/'; NULL with errp set if they cannot.
     */
    char *(*bdrv_get_identity)(BlockDriverState *bs);
    char *(*bdrv_dirname)(BlockDriverState *bs, Error **errp);

    /*
     * How sure the driver is that an image is in its format (QEMU's
     * scores): 0 not at all, 100 for a magic number, 1 for raw, which
     * takes anything. buf holds the first buf_size bytes of the file (all
     * of it, up to BDRV_PROBE_BUF_SIZE); filename is the file's name, ""
     * if it has none. Optional: a driver without it is never probed.
     *
     * A format that is recognised only to be refused (vmdk, vhdx...) is a
     * driver with a bdrv_probe and a bdrv_open that fails saying what
     * the image is: probing then names it instead of calling it raw.
     */
    int (*bdrv_probe)(const uint8_t *buf, int buf_size,
                      const char *filename);
    /*
     * Optional, for a format marked at the end of its file (a fixed VHD's
     * footer, a dmg's trailer): the score from tail, the last tail_size
     * bytes of the file (BDRV_PROBE_TAIL_SIZE, fewer in a shorter file).
     * The driver's score is the higher of the two.
     */
    int (*bdrv_probe_tail)(const uint8_t *tail, int tail_size);

    /* Take the options understood from opts; leftovers are an error. */
    int (*bdrv_open)(BlockDriverState *bs, GHashTable *opts, int flags,
                     Error **errp);
    void (*bdrv_close)(BlockDriverState *bs);

    /*
     * Reads and writes, called by block/io.c only, with requests aligned
     * to bs->request_alignment. A protocol reads past its end as zeroes
     * and grows when written past it.
     */
    int (*bdrv_pread)(BlockDriverState *bs, uint64_t offset, void *buf,
                      size_t bytes, Error **errp);
    /* With BDRV_REQ_MAY_CLOBBER the driver may write into buf. */
    int (*bdrv_pwrite)(BlockDriverState *bs, uint64_t offset, const void *buf,
                       size_t bytes, int flags, Error **errp);
    /*
     * Instead of bdrv_pread/bdrv_pwrite, an asynchronous driver (a network
     * protocol with many requests in flight) may start a request and
     * return 0: done is then called once, from any thread, when it ends.
     * A request that cannot start returns -1 with errp set, and done is
     * not called. block/io.c waits for it, so callers stay synchronous.
     */
    int (*bdrv_aio_pread)(BlockDriverState *bs, uint64_t offset, void *buf,
                          size_t bytes, BdrvRequestDone *done, void *opaque,
                          Error **errp);
    int (*bdrv_aio_pwrite)(BlockDriverState *bs, uint64_t offset,
                           const void *buf, size_t bytes, int flags,
                           BdrvRequestDone *done, void *opaque,
                           Error **errp);
    /*
     * Optional: make bytes read as zeroes without writing them (-ENOTSUP:
     * the request path writes zeroes instead), and drop bytes the image
     * no longer needs (a hint). Aligned requests only.
     */
    int (*bdrv_pwrite_zeroes)(BlockDriverState *bs, uint64_t offset,
                              size_t bytes, int flags, Error **errp);
    int (*bdrv_pdiscard)(BlockDriverState *bs, uint64_t offset, size_t bytes,
                         Error **errp);
    /* Exact length in bytes (not rounded). */
    int64_t (*bdrv_getlength)(BlockDriverState *bs, Error **errp);
    int (*bdrv_truncate)(BlockDriverState *bs, uint64_t size,
                         PreallocMode prealloc, Error **errp);
    int (*bdrv_flush)(BlockDriverState *bs, Error **errp);
    /*
     * Optional, protocols: the device's logical block size (see
     * bdrv_get_logical_block_size()); the default is 512.
     */
    uint32_t (*bdrv_logical_block_size)(BlockDriverState *bs);

    /*
     * Optional, protocols: requests in flight that pay off (see
     * bdrv_parallel_requests()); 0: no preference.
     */
    unsigned parallel_requests;
    /* Optional, protocols: see bdrv_request_size(); 0: no preference. */
    size_t request_size;
    /*
     * Protocols: a new image's header area (a LUKS header up to its
     * payload) is written whole, zeroes where unused, as the protocol's
     * own tools do (librbd's "encryption format" writes all 16 MiB), not
     * left unwritten: readers that take unwritten objects for holes of
     * the data (QEMU 7.2 through librbd's encryption) then read it right.
     */
    bool write_whole_header;

    /* Optional; the default: data everywhere. */
    bool (*bdrv_block_status_is_data)(BlockDriverState *bs, uint64_t offset,
                                      uint64_t bytes, uint64_t *pnum);
    bool (*bdrv_has_zero_init)(BlockDriverState *bs);
    /*
     * Optional (QEMU's bdrv_co_block_status): the run at offset, at most
     * bytes (inside the image), as BDRV_BLOCK_DATA, _ZERO and
     * _OFFSET_VALID (with *map and *file); the core adds _ALLOCATED and
     * _EOF. With BDRV_BLOCK_RECURSE on data at an offset, the core asks
     * *file too, and a hole there makes the run zero. The default: data,
     * and for a protocol node its own bytes.
     */
    int (*bdrv_block_status)(BlockDriverState *bs, uint64_t offset,
                             uint64_t bytes, uint64_t *pnum, uint64_t *map,
                             BlockDriverState **file, Error **errp);
    /*
     * Unallocated runs read from bs->backing, or as zeroes without one
     * (qcow2): the core reports them so (QEMU's supports_backing).
     */
    bool supports_backing;
    /* Optional; the default: the sum over the children but "backing". */
    int64_t (*bdrv_get_allocated_file_size)(BlockDriverState *bs);
    bool (*bdrv_is_encrypted)(BlockDriverState *bs);
    /* Optional: what the user should be told about the image, or NULL. */
    const char *(*bdrv_get_warning)(BlockDriverState *bs);
    /* "-o help": the options bdrv_create and bdrv_amend take. */
    const BlockOptionDesc *create_opts;
    const BlockOptionDesc *amend_opts;
    /*
     * Optional, for copy offloading (bdrv_copy_range()): a format node
     * whose bytes are its child's, unchanged, from *offset on, returns
     * that child and adds its start to *offset (raw).
     */
    BlockDriverState *(*bdrv_passthrough)(BlockDriverState *bs,
                                          uint64_t *offset);
    /*
     * Optional, protocol nodes: copy bytes from src to dst (a node of the
     * same driver) without passing them through this process.
     */
    int (*bdrv_copy_range)(BlockDriverState *src, uint64_t src_offset,
                           BlockDriverState *dst, uint64_t dst_offset,
                           uint64_t bytes, Error **errp);

    /*
     * Write a new image onto file: a node that the protocol just made
     * (bdrv_create_file), empty, open read-write. opts holds "size" and
     * the creation options. Take what is understood, then call
     * bdrv_create_check_leftovers() before writing or computing anything
     * costly (a PBKDF2 calibration). If pbs is set, the driver may return
     * the new image already open on file with flags (a LUKS image keeps
     * the master key it just made: no second PBKDF2 run to unlock it),
     * which then owns file; if it leaves *pbs NULL, the image is opened
     * the usual way. file stays the caller's otherwise, also on failure:
     * dropping it drops the new file. A protocol driver creates its own
     * kind of image ("create -f file"): the file itself.
     */
    int (*bdrv_create)(BlockDriverState *file, GHashTable *opts, int flags,
                       BlockDriverState **pbs, Error **errp);
    /*
     * Protocols: make the new file that opts (the options of a file name,
     * as bdrv_parse_filename gives them) names, and fill in bs as
     * bdrv_open does: empty, and under its name only once
     * bdrv_create_finish names it; closed before that, it leaves nothing
     * (a file: unnamed until complete, see block/file-create.h; a file
     * that was there is replaced only then). Where the protocol's
     * storage exists already (a block device), it is opened as it is.
     */
    int (*bdrv_create_file)(BlockDriverState *bs, GHashTable *opts,
                            int flags, Error **errp);
    /*
     * Optional, protocols: creation options (-o) that the protocol itself
     * takes when it makes the new file (rbd's cluster_size, its object
     * size). bdrv_create() and bdrv_create_open() move each from the
     * creation options into those bdrv_create_file gets, unless the
     * format takes an option of that name itself (qcow2's cluster_size):
     * QEMU hands a format's leftover options down the same way.
     */
    const BlockOptionDesc *create_file_opts;
    /*
     * Optional, protocols: see bdrv_create_fit(); the default truncates.
     */
    int (*bdrv_create_fit)(BlockDriverState *bs, uint64_t size,
                           PreallocMode prealloc, Error **errp);
    /*
     * Optional, protocols: give the new file this node writes its name
     * (see bdrv_create_finish()); nothing to do for other nodes. A format
     * whose children must be named in some order names them here (it is
     * called before the children are): qcow2, its data file first.
     */
    int (*bdrv_create_finish)(BlockDriverState *bs, Error **errp);
    /* Optional, for protocols: see bdrv_delete_file(). */
    int (*bdrv_delete_file)(BlockDriverState *bs, Error **errp);
    /* See bdrv_measure(); info comes zeroed. */
    int (*bdrv_measure)(GHashTable *opts, BlockDriverState *in_bs,
                        uint64_t size, BlockMeasureInfo *info, Error **errp);
    /* Fill in the format-specific part of info (optional). */
    int (*bdrv_get_info)(BlockDriverState *bs, BlockImageInfo *info,
                         Error **errp);
    int (*bdrv_amend)(BlockDriverState *bs, GHashTable *opts, bool force,
                      BdrvAmendStatusCB *status_cb, void *cb_opaque,
                      Error **errp);
    /* Optional: see bdrv_snapshot_list() and the others. */
    int (*bdrv_snapshot_list)(BlockDriverState *bs, BlockSnapshotInfo **list,
                              size_t *n, Error **errp);
    int (*bdrv_snapshot_create)(BlockDriverState *bs, const char *name,
                                Error **errp);
    int (*bdrv_snapshot_goto)(BlockDriverState *bs, const char *id_or_name,
                              Error **errp);
    int (*bdrv_snapshot_delete)(BlockDriverState *bs, const char *name,
                                Error **errp);
    int (*bdrv_snapshot_load_tmp)(BlockDriverState *bs, const char *id,
                                  const char *name, Error **errp);
    /* Optional: see bdrv_make_empty(). */
    int (*bdrv_make_empty)(BlockDriverState *bs, Error **errp);
    /* Optional: see bdrv_change_backing_file(). */
    int (*bdrv_change_backing_file)(BlockDriverState *bs,
                                    const char *backing_file,
                                    const char *backing_fmt, Error **errp);
    /* Optional: "check" (see bdrv_check()); res is zeroed by the caller. */
    int (*bdrv_check)(BlockDriverState *bs, BdrvCheckResult *res,
                      BdrvCheckMode fix);
    /*
     * Optional: write compressed where the format can (convert -c), in
     * two halves (see bdrv_compress()): c's units compressed (c->out,
     * c->clen filled, nothing changed in the image), then stored.
     */
    int (*bdrv_compress)(BlockDriverState *bs, BdrvCompressed *c,
                         Error **errp);
    int (*bdrv_store_compressed)(BlockDriverState *bs,
                                 const BdrvCompressed *c, Error **errp);
    /* Optional: persistent dirty bitmaps (see bdrv_bitmap_op()). */
    bool (*bdrv_supports_persistent_bitmaps)(BlockDriverState *bs);
    int (*bdrv_bitmap_list)(BlockDriverState *bs, BlockImageInfoBitmap **out,
                            size_t *nb, Error **errp);
    int (*bdrv_bitmap_op)(BlockDriverState *bs, BdrvBitmapOp op,
                          const char *name, uint32_t granularity,
                          Error **errp);
    int (*bdrv_bitmap_get)(BlockDriverState *bs, const char *name,
                           BdrvBitmapBits *out, Error **errp);
    int (*bdrv_bitmap_merge)(BlockDriverState *bs, const char *name,
                             const BdrvBitmapBits *src, Error **errp);
    int (*bdrv_bitmaps_store)(BlockDriverState *bs, Error **errp);
};

/* Block status, drivers only: ask the file below as well (QEMU's value). */
#define BDRV_BLOCK_RECURSE 0x80

/*
 * The driver for a file name given on the command line: the protocol its
 * prefix names ("PROTO:" before any '/', QEMU's rule), the "file"
 * protocol for a name without one. NULL with errp set if the prefix names
 * no protocol ("json:" is not one: bdrv_open() takes it).
 */
const BlockDriver *bdrv_find_protocol(const char *filename, Error **errp);
/* The driver called name (format_name), NULL if there is none. */
const BlockDriver *bdrv_find_driver(const char *name);
/*
 * Add a driver to those of this build (tests add protocols of their own).
 * At start-up, before any node is opened.
 */
void bdrv_register(const BlockDriver *drv);

extern const BlockDriver bdrv_file;
extern const BlockDriver bdrv_raw;
extern const BlockDriver bdrv_luks;
extern const BlockDriver bdrv_qcow2;
extern const BlockDriver bdrv_blkdebug;
extern const BlockDriver bdrv_quorum;
extern const BlockDriver bdrv_null_co, bdrv_null_aio;
/*
 * block/nbd.c, where libnbd is: one driver, five prefixes (QEMU's three,
 * and libnbd's TLS ones).
 */
extern const BlockDriver bdrv_nbd, bdrv_nbd_tcp, bdrv_nbd_unix, bdrv_nbds,
    bdrv_nbds_unix;
/* block/rbd.c, where librbd is. */
extern const BlockDriver bdrv_rbd;
/* Recognised only to be refused (block/foreign.c). */
extern const BlockDriver bdrv_vmdk, bdrv_vhdx, bdrv_vdi, bdrv_vpc, bdrv_qed,
    bdrv_qcow, bdrv_parallels, bdrv_dmg, bdrv_cloop, bdrv_bochs;

/*
 * Every driver of this build, NULL-terminated (block/drivers.c): the
 * core finds drivers by name and probes formats here, and names none.
 */
extern const BlockDriver *const bdrv_drivers[];

/*
 * Bytes at the start of an image that probing hands to bdrv_probe: more
 * than QEMU's 2048, so that a whole 4 KiB header (LUKS2's binary header,
 * a qcow2 header with its extensions) can be checked.
 */
#define BDRV_PROBE_BUF_SIZE 4096

/* Bytes at the end that bdrv_probe_tail sees: a VHD footer, a UDIF trailer. */
#define BDRV_PROBE_TAIL_SIZE 512

/*
 * The format driver that scores buf and tail (the start and the end of a
 * file, see bdrv_probe and bdrv_probe_tail) highest, the earlier in
 * bdrv_drivers on a tie, as QEMU's bdrv_probe_all(); NULL if none claims
 * it.
 */
const BlockDriver *bdrv_probe_all(const uint8_t *buf, int buf_size,
                                  const uint8_t *tail, int tail_size,
                                  const char *filename);

/*
 * What probing reads of file: its start into buf (*buf_size bytes, at most
 * BDRV_PROBE_BUF_SIZE) and its end into tail (*tail_size bytes, at most
 * BDRV_PROBE_TAIL_SIZE); both are the whole file if it is shorter.
 */
int bdrv_probe_read(BlockDriverState *file, uint8_t *buf, int *buf_size,
                    uint8_t *tail, int *tail_size, Error **errp);

/* Whether opts says anything about the child called name. */
bool bdrv_opts_has_child(GHashTable *opts, const char *name);

/*
 * Open the child node called name ("file", "header") from the options
 * under "name." in opts (taken from opts), or from "name=PATH" as a
 * shorthand for "name.filename=PATH". With no such options: NULL, and an
 * error only if !allow_none. A child without "driver" is a "file" node.
 */
BlockDriverState *bdrv_open_child(GHashTable *opts, const char *name,
                                  int flags, bool allow_none, Error **errp);

/*
 * The creation object of a new image's file (QEMU's bdrv_co_create_file):
 * the protocol that filename names makes it (BlockDriver.
 * bdrv_create_file) and returns it as a node open read-write with flags,
 * empty and without a name; bdrv_create_finish() commits it (syncs it and
 * gives it its name), bdrv_close() before that aborts it, leaving
 * nothing. interrupt: see bdrv_set_interrupt(), inherited by the nodes
 * opened on it.
 */
BlockDriverState *bdrv_create_file(const char *filename, int flags,
                                   const volatile sig_atomic_t *interrupt,
                                   Error **errp);

/*
 * Whether the caller that opened bs asked its long operations to stop
 * (bdrv_set_interrupt()): full preallocation, the naming of a new image.
 */
bool bdrv_interrupted(BlockDriverState *bs);

/*
 * Make a new file node, just created, hold size bytes (a format's
 * bdrv_create): a file is truncated to it; a block device must be that
 * large already and is left as it is (QEMU's truncate that need not be
 * exact). The protocol's bdrv_create_fit, or a truncate.
 */
int bdrv_create_fit(BlockDriverState *file, uint64_t size,
                    PreallocMode prealloc, Error **errp);
/*
 * The same for an image that is the file itself (raw, "-f file"): then,
 * as qemu-img, the first 4 KiB of a new file are written (zeroes), which
 * QEMU's O_DIRECT alignment probing needs: "map" shows them as data.
 */
int bdrv_create_fit_raw(BlockDriverState *file, uint64_t size,
                        PreallocMode prealloc, Error **errp);

/*
 * A node of drv on file, opened by its creator (bdrv_create) rather than by
 * drv->bdrv_open: the caller fills in bs->opaque.
 */
BlockDriverState *bdrv_new_node(const BlockDriver *drv,
                                BlockDriverState *file, int flags);
/*
 * Undo bdrv_new_node() after its creator's open failed (and undid its
 * own state): bs and the children it attached go, file stays the
 * caller's.
 */
void bdrv_new_node_abandon(BlockDriverState *bs);

/* Take the "preallocation" option (default off), refusing unknown modes. */
int bdrv_create_take_prealloc(GHashTable *opts, PreallocMode *prealloc,
                              Error **errp);

/* Creation options nobody understood: "Invalid parameter 'x'", as QEMU. */
int bdrv_create_check_leftovers(GHashTable *opts, Error **errp);

/*
 * The whole option set of a plain file: "size" (default 0) and
 * "preallocation", and nothing else.
 */
int bdrv_create_take_size_prealloc(GHashTable *opts, uint64_t *size,
                                   PreallocMode *prealloc, Error **errp);

/* Raw size of a node, unrounded (the driver's bdrv_getlength). */
int64_t bdrv_getlength_exact(BlockDriverState *bs, Error **errp);

/*
 * Byte ranges through a driver that reads and writes whole sectors of
 * @align bytes: each piece of at most BDRV_BOUNCE_SIZE bytes is @span
 * aligned bytes from @start, of which @n bytes from @skip are wanted.
 */
#define BDRV_BOUNCE_SIZE (1024 * 1024)

typedef struct BdrvPiece {
    uint64_t start;
    size_t skip, n, span;
} BdrvPiece;

static inline BdrvPiece bdrv_piece(uint64_t offset, size_t bytes,
                                   size_t align)
{
    BdrvPiece p;

    p.start = ROUND_DOWN(offset, align);
    p.skip = offset - p.start;
    p.n = MIN(bytes, BDRV_BOUNCE_SIZE - p.skip);
    p.span = ROUND_UP(p.skip + p.n, align);
    return p;
}

/* Images in one backing chain at most, the top one included. */
#define BDRV_MAX_BACKING_DEPTH 64

/*
 * Open filename (format, or probed; options under "backing.") read-only
 * as bs's "backing" child. A chain that meets an image twice (by the
 * protocol's identity) or grows past BDRV_MAX_BACKING_DEPTH images is
 * refused before it recurses.
 */
int bdrv_open_backing(BlockDriverState *bs, const char *filename,
                      const char *format, GHashTable *options, int flags,
                      Error **errp);

/*
 * The identity of the bytes below bs and the directory names in bs
 * resolve against, from its protocol node (see BlockDriver).
 */
char *bdrv_get_identity(BlockDriverState *bs);
char *bdrv_dirname(BlockDriverState *bs, Error **errp);

/*
 * Make child a child of parent called name (see BdrvChild), which takes
 * it over: it is closed with parent. "file" and "backing" also set the
 * shortcuts. Returns child.
 */
BlockDriverState *bdrv_attach_child(BlockDriverState *parent,
                                    BlockDriverState *child,
                                    const char *name, unsigned role);

#endif
