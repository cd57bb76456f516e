/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * A small block layer (QEMU's block/ shape): a graph of nodes, each a
 * BlockDriverState run by a BlockDriver. A format node ("raw", "luks")
 * sits on a protocol node ("file") that holds the bytes: its "file"
 * child. The image tool talks to the top node only.
 *
 * Nodes are opened from options in QEMU's dotted form
 * (include/block/options.h): "driver=luks,key-secret=s0,file.filename=x".
 *
 * Requests are byte-addressed and synchronous. Different nodes may be used
 * from different threads, and one node may serve concurrent requests on
 * distinct, sector-aligned ranges (the convert loop does this).
 */
#ifndef BLOCK_BLOCK_H
#define BLOCK_BLOCK_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "qemu/error.h"
#include "crypto/block.h"

typedef struct BlockDriverState BlockDriverState;

#ifndef ROUND_UP
/* Round n down / up to a multiple of d (d need not be a power of two). */
#define ROUND_DOWN(n, d) ((n) / (d) * (d))
#define ROUND_UP(n, d) ROUND_DOWN((n) + (d) - 1, (d))
#endif

/* QEMU's sector: the unit of image sizes (virtual sizes round up to it). */
#define BDRV_SECTOR_SIZE 512

/* Open flags */
#define BDRV_O_RDWR    (1 << 0)
/* Metadata only (e.g. info): a LUKS image opens without its passphrase. */
#define BDRV_O_NO_IO   (1 << 1)
/*
 * Never sync to disk (QEMU's cache=unsafe, qemu-img convert's default for
 * its target): the page cache writes the data back when it likes.
 */
#define BDRV_O_NO_FLUSH (1 << 2)
/* Leave backing files closed (info without --backing-chain, as qemu-img). */
#define BDRV_O_NO_BACKING (1 << 3)
/*
 * qemu-img -U (force share), for read-only opens: take no image locks and
 * ignore other processes' (block/file-lock.c).
 */
#define BDRV_O_FORCE_SHARE (1 << 4)
/*
 * Opened for "check" (QEMU's BDRV_O_CHECK): no repair or dirty-bit
 * handling at open, and a qcow2 image may be opened read-write for
 * "check -r" alone.
 */
#define BDRV_O_CHECK (1 << 5)
/*
 * qemu-img convert -t unsafe, given on purpose: a new file is named when
 * complete but not synced first (no write-back during the copy either), so
 * after a power loss its name may show a partial image. Without it a new
 * file is always synced before it is named, whatever the cache mode.
 */
#define BDRV_O_CREATE_NO_SYNC (1 << 6)
/*
 * QEMU's cache.direct=on (cache modes none and directsync): the file is
 * opened with O_DIRECT, its data goes to the device around the page cache.
 */
#define BDRV_O_NOCACHE (1 << 8)
/*
 * Open the image even though a decryption in place is under way (its
 * default header file FILE.luks2-header says so, see docs/reencrypt.md):
 * the luks and raw formats refuse it otherwise, as the file then holds
 * part plain text, part ciphertext and no header. For tools that finish
 * the decryption; the "file" protocol knows nothing of it.
 */
#define BDRV_O_REENCRYPT (1 << 9)
/*
 * The alignment BDRV_O_NOCACHE I/O wants of offsets, lengths and buffers
 * to go straight to the file (anything else takes a bounce buffer): 4096
 * covers every logical block size Linux devices use (512 or 4096).
 */
#define BDRV_DIRECT_ALIGN 4096

/* Write flags */
/*
 * The caller does not need the buffer's contents after the write, so a
 * driver may transform it in place (luks encrypts it there) instead of
 * copying it to a bounce buffer first.
 */
#define BDRV_REQ_MAY_CLOBBER (1 << 0)
/*
 * Zero writes (QEMU's flag of the same name): the range may be
 * deallocated, as long as it reads as zeroes afterwards (a file punches
 * a hole instead of zeroing its blocks in place).
 */
#define BDRV_REQ_MAY_UNMAP (1 << 1)
/*
 * Writes and zero writes: zeroes written must stay zeroes even if a
 * backing file is attached later (rebase): a format that would leave an
 * unallocated range as it is (it reads zeroes without a backing file)
 * marks it zero instead, as QEMU's qcow2 always does.
 */
#define BDRV_REQ_EXPLICIT_ZERO (1 << 2)
/*
 * Writes (and compressed writes): the range is allocated as data even
 * where the buffer holds zeroes; a format that would turn a cluster of
 * zeroes into a zero or unallocated cluster writes it like any other
 * (convert -S 0: "fully allocates output", as qemu-img).
 */
#define BDRV_REQ_ALLOCATE (1 << 3)

typedef enum {
    PREALLOC_MODE_OFF,
    PREALLOC_MODE_FALLOC,
    PREALLOC_MODE_FULL,
    /* Image formats' own (qcow2 resize): not a file's, not parsed here. */
    PREALLOC_MODE_METADATA,
    PREALLOC_MODE__MAX,
} PreallocMode;

/* "off", "falloc", "full"; -1 if unknown */
int prealloc_mode_parse(const char *name);
const char *prealloc_mode_str(PreallocMode mode);

/*
 * The protocol node of a file name (the file itself, an RBD image), no
 * format above it: what "-f file" opens for a file, for any protocol
 * ("json:{...}" stays a file's options, as with "-f file").
 */
BlockDriverState *bdrv_open_protocol(const char *filename, int flags,
                                     Error **errp);

/*
 * Whether QEMU 7.2 knows a block driver of this name (qemu-img takes it
 * where a format is only stored, as rebase -u -F does), ours or not.
 */
bool bdrv_qemu_format_known(const char *name);

/*
 * Open an image. filename may be NULL when options say where the bytes
 * are (--image-opts). format NULL means: options["driver"], or else probe
 * (every format driver scores the start of the file and the best wins;
 * "raw" when no other claims it). options may be NULL; it is not
 * modified.
 */
BlockDriverState *bdrv_open(const char *filename, const char *format,
                            GHashTable *options, int flags, Error **errp);
/*
 * An option a driver takes at creation or amendment, for "-o help": its
 * name, its type as qemu-img shows it ("str", "num", "size",
 * "bool (on/off)") and a line of help. Tables end with a NULL name.
 */
typedef struct BlockOptionDesc {
    const char *name;
    const char *type;
    const char *help;
} BlockOptionDesc;

/*
 * The creation options of format, sorted by name, as a GPtrArray of
 * const BlockOptionDesc *; with a filename, its protocol's too (qemu-img
 * lists those when it is given the target's file name). NULL
 * and errp set if format is unknown or cannot create images.
 */
GPtrArray *bdrv_create_option_list(const char *format, const char *filename,
                                   Error **errp);
/* The same for amend; NULL if format does not support amendment. */
GPtrArray *bdrv_amend_option_list(const char *format, Error **errp);
/* Whether a command-line name is a local file's (no prefix, or file:). */
bool bdrv_names_local_file(const char *filename);
/*
 * Whether a json:{...} name taken from an image names local nodes only
 * (no nbd or rbd node, no filename with such a protocol); errp says why
 * not.
 */
bool bdrv_json_name_is_local(const char *name, Error **errp);
/*
 * Whether a backing file name (given for an image, or stored in it) is
 * taken as it is, not relative to the image's directory: an absolute
 * path, or "json:{...}" options (QEMU's
 * bdrv_get_full_backing_filename_from_filename() keeps both).
 */
bool bdrv_backing_name_is_absolute(const char *name);

/*
 * filename may also be "json:{...}" (the node's options as JSON, nested
 * objects for children: block/options-json.c) or carry QEMU's "file:"
 * protocol prefix.
 */
/*
 * A file name given as such, as QEMU reads it: "PROTO:rest" with the
 * colon before any '/' names a protocol. "file:x" is the file x ("./x"
 * when x itself would read as "PROTO:rest", so that the result, opened
 * again, is still that file); a protocol that creates images of its own
 * ("rbd:pool/image") keeps its whole name; any other protocol, "json:"
 * among them (options, which bdrv_open() alone takes), is unknown: NULL,
 * errp set. A name without a protocol is returned as it is. Free the
 * result with g_free().
 */
char *bdrv_parse_filename(const char *filename, Error **errp);
/* Close a node and its children, flushing them first. NULL is allowed. */
void bdrv_close(BlockDriverState *bs);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(BlockDriverState, bdrv_close)

const char *bdrv_get_format_name(BlockDriverState *bs);

/*
 * The format the contents of file (a protocol node) probe as: "raw" when
 * no format driver claims them; NULL with errp set if file cannot be read.
 */
const char *bdrv_probe_format_name(BlockDriverState *file, Error **errp);
/* The file name the image was opened from (the protocol node's). */
const char *bdrv_get_filename(BlockDriverState *bs);
bool bdrv_is_read_only(BlockDriverState *bs);
/*
 * The smallest piece in which bs's bytes can be read, and so the smallest
 * one a read error can be narrowed to (convert --salvage): the device's
 * logical block size (BLKSSZGET) for a block device, 512 for a file, and
 * for a format the larger of its own block (a LUKS sector) and its file's.
 */
uint32_t bdrv_get_logical_block_size(BlockDriverState *bs);
bool bdrv_is_encrypted(BlockDriverState *bs);
/*
 * How many requests in flight the protocols below bs serve best (a
 * network's round trips overlap: 16 for RBD), 0 where any number does
 * (a file). Callers with threads (convert) run at least that many.
 */
unsigned bdrv_parallel_requests(BlockDriverState *bs);
/*
 * The request size, in bytes, that the protocols below bs serve best
 * (fewer, larger round trips: 2 MiB for RBD), 0 where any size does.
 */
size_t bdrv_request_size(BlockDriverState *bs);
/*
 * What the user should be told about the image since it was opened (e.g.
 * "LUKS2 primary header is damaged ...; using the secondary header"), or
 * NULL. Libraries do not print: the tool does.
 */
const char *bdrv_get_warning(BlockDriverState *bs);

/* The node unallocated parts of bs read from (qcow2), or NULL. */
BlockDriverState *bdrv_get_backing(BlockDriverState *bs);
/* The first node below bs (or bs) that is not a filter (blkdebug). */
BlockDriverState *bdrv_skip_filters(BlockDriverState *bs);

/*
 * Virtual size in bytes, rounded up to BDRV_SECTOR_SIZE as QEMU reports
 * it; -1 on error.
 */
int64_t bdrv_getlength(BlockDriverState *bs, Error **errp);
/* Bytes the image occupies on disk (all its files), -1 if unknown. */
int64_t bdrv_get_allocated_file_size(BlockDriverState *bs);

/*
 * Read / write bytes inside [0, bdrv_getlength()) of an image (a format
 * node). A protocol node (a file opened with format "file") also reads
 * past its end, as zeroes, and grows when written past it.
 */
int bdrv_pread(BlockDriverState *bs, uint64_t offset, void *buf,
               size_t bytes, Error **errp);
int bdrv_pwrite(BlockDriverState *bs, uint64_t offset, const void *buf,
                size_t bytes, int flags, Error **errp);
/*
 * Make bytes read as zeroes: without writing them where the node can (a
 * file punches or zeroes the range), else by writing zeroes.
 */
int bdrv_pwrite_zeroes(BlockDriverState *bs, uint64_t offset, size_t bytes,
                       int flags, Error **errp);
/*
 * Tell the node that bytes are no longer needed (a hint, QEMU's discard:
 * a node that cannot drop them keeps them, and succeeds). What they read
 * afterwards is undefined.
 */
int bdrv_pdiscard(BlockDriverState *bs, uint64_t offset, size_t bytes,
                  Error **errp);
/*
 * Make what was written durable: the node, then its children. A node
 * whose flush failed once fails every later flush too, with the first
 * error (which names the file): the data may be lost, and a flush that
 * "succeeds" later would hide it.
 */
int bdrv_flush(BlockDriverState *bs, Error **errp);
/*
 * Write compressed (qcow2 clusters, "convert -c"): whole clusters are
 * compressed in the calling thread, then stored in the writer's turn
 * (bdrv_write_turn()). An error for formats without compression, in
 * qemu-img's words.
 */
int bdrv_pwrite_compressed(BlockDriverState *bs, uint64_t offset,
                           const void *buf, size_t bytes, int flags,
                           Error **errp);
bool bdrv_supports_compressed_writes(BlockDriverState *bs);
/*
 * The same in two halves, for a writer that stores in an order of its
 * own (convert: in the order of the guest offsets) and compresses in any
 * thread meanwhile: bdrv_compress() compresses what
 * bdrv_pwrite_compressed() would write (it takes no space and changes
 * nothing in the image: any number at once), bdrv_store_compressed()
 * stores it then, as bdrv_pwrite_compressed() would have (not in a turn of
 * its own: the caller orders the stores). buf must stay unchanged until
 * the store. reuse: NULL, or what an earlier bdrv_compress() returned,
 * stored and no longer needed, made over (its memory kept: a writer that
 * compresses in one thread and stores in another costs no fresh memory,
 * and no page faults, per write). NULL / -1 with errp set on failure
 * (reuse is then still the caller's, to free).
 */
typedef struct BdrvCompressed BdrvCompressed;
BdrvCompressed *bdrv_compress(BlockDriverState *bs, uint64_t offset,
                              const void *buf, size_t bytes, int flags,
                              BdrvCompressed *reuse, Error **errp);
int bdrv_store_compressed(BlockDriverState *bs, const BdrvCompressed *c,
                          Error **errp);
void bdrv_compressed_free(BdrvCompressed *c);
/* Resize to size bytes of virtual size. */
int bdrv_truncate(BlockDriverState *bs, uint64_t size, PreallocMode prealloc,
                  Error **errp);

/*
 * Whether [offset, offset + bytes) may hold data: false only where the
 * node knows it reads as zeroes (a hole in a raw file; a hole in a LUKS
 * file is zero ciphertext, not zero plaintext, so luks says data). *pnum
 * receives the length of the run that shares the answer (at least 1
 * byte): the whole extent, as far as bytes reaches. Ask with bytes up to
 * the end of the range of interest and go on from offset + *pnum: a walk
 * over the image then costs one call per extent, however large it is
 * (QEMU's bdrv_block_status()). The answer is a hint that is always safe
 * to act on: "data" where unsure.
 */
bool bdrv_block_status_is_data(BlockDriverState *bs, uint64_t offset,
                               uint64_t bytes, uint64_t *pnum);
/*
 * A format tells the node under it what it is about to do (QEMU's
 * BLKDBG_EVENT: "read_aio" before guest data is read, "write_aio" before
 * it is written...): the first node down the file chain that listens (a
 * blkdebug filter) hears it; nobody else does anything.
 */
void bdrv_debug_event(BlockDriverState *bs, const char *event);
/*
 * Copy offloading (qemu-img convert -C): copy bytes from src to dst below
 * this process (copy_file_range(2)), where both reach files through nodes
 * that pass bytes through unchanged (raw). Fails, setting errp, where that
 * is not possible (an encrypted node, or a file system that cannot): the
 * caller then copies the usual way.
 */
int bdrv_copy_range(BlockDriverState *src, uint64_t src_offset,
                    BlockDriverState *dst, uint64_t dst_offset,
                    uint64_t bytes, Error **errp);

/*
 * What bdrv_block_status() says of a run of bytes (QEMU's BDRV_BLOCK_*
 * flags, with its values): DATA, it may hold data (read it); ZERO, it
 * reads as zeroes (both: allocated, known zero); OFFSET_VALID, *map is
 * where the bytes lie in *file (a protocol node); ALLOCATED, this node
 * holds the run itself (not its backing file); EOF, the run ends the
 * image. A run neither DATA nor ZERO reads from the backing file.
 */
#define BDRV_BLOCK_DATA         0x01
#define BDRV_BLOCK_ZERO         0x02
#define BDRV_BLOCK_OFFSET_VALID 0x04
#define BDRV_BLOCK_ALLOCATED    0x10
#define BDRV_BLOCK_EOF          0x20

/*
 * The status of the run at offset, as QEMU's bdrv_block_status() (one
 * node, not its backing chain: "qemu-img map" walks the chain itself).
 * *pnum receives the run's length (1..bytes, clamped to the image; 0 at
 * or past its end, with BDRV_BLOCK_EOF). map and file may be NULL; with
 * BDRV_BLOCK_OFFSET_VALID they receive the protocol node and the offset
 * in it. Returns the flags, or -1 with errp set (e.g. a corrupt L2 entry).
 */
int bdrv_block_status(BlockDriverState *bs, uint64_t offset, uint64_t bytes,
                      uint64_t *pnum, uint64_t *map, BlockDriverState **file,
                      Error **errp);
/*
 * The same over the backing chain from bs down to base (not included;
 * NULL: the whole chain), as QEMU's bdrv_block_status_above(): the status
 * of the first node that holds the run (DATA or ZERO), filters (blkdebug)
 * passed through; a run no node holds reads as zeroes. *pnum as above.
 * Returns the flags, or -1 with errp set.
 */
int bdrv_block_status_above(BlockDriverState *bs, BlockDriverState *base,
                            uint64_t offset, uint64_t bytes, uint64_t *pnum,
                            Error **errp);
/*
 * Writes in turn (convert into a qcow2 image: clusters laid out in the
 * order of the guest offsets, as qemu-img lays them out, while the
 * threads read, decrypt and compress in parallel). A thread sets its turn
 * before it writes: fn(opaque) returns once it is the thread's turn. A
 * format that takes space in its file for the data of a write (qcow2)
 * calls bdrv_write_turn() before it first does so, outside its locks, and
 * after any work it can do in parallel (compression): the turn's function
 * is called once, then forgotten. bdrv_write_turn() returns whether the
 * thread writes in its turn: then every writer of the image takes turns,
 * and no other writes it meanwhile (until bdrv_set_write_turn(NULL,
 * NULL)). bdrv_write_turn_pending() tells whether the function was not
 * called.
 */
typedef void BdrvTurnFunc(void *opaque);
void bdrv_set_write_turn(BdrvTurnFunc *fn, void *opaque);
bool bdrv_write_turn(void);
bool bdrv_write_turn_pending(void);
/*
 * Whether bdrv_pwrite_zeroes() has a way of its own (a file's zero range
 * or punched hole, zero clusters) rather than writing a buffer of zeroes.
 */
bool bdrv_can_write_zeroes(BlockDriverState *bs);
/* Whether a node, just created, reads as all zeroes (a new raw file). */
bool bdrv_has_zero_init(BlockDriverState *bs);

/* A persistent dirty bitmap of a qcow2 image (info's "bitmaps"). */
typedef struct BlockImageInfoBitmap {
    char *name;
    uint32_t granularity;
    bool in_use;                    /* flag "in-use" */
    bool autoload;                  /* flag "auto" */
} BlockImageInfoBitmap;

/* qcow2's "format-specific" data, as qemu-img 7.2 names it. */
typedef struct BlockImageInfoQcow2 {
    uint32_t version;               /* 2: compat "0.10", 3: "1.1" */
    const char *compression_type;   /* "zlib", "zstd" */
    bool lazy_refcounts;
    unsigned refcount_bits;
    bool corrupt;
    bool extended_l2;
    /* An external data file: its name in the header (NULL: none), raw. */
    bool has_data_file;
    char *data_file;
    bool data_file_raw;
    const char *encrypt_format;     /* NULL, "aes" or "luks" */
    QCryptoBlockInfo *encrypt_luks; /* the LUKS header, for "luks" */
    BlockImageInfoBitmap *bitmaps;  /* nb_bitmaps of them, or NULL */
    size_t nb_bitmaps;
} BlockImageInfoQcow2;

/*
 * An internal snapshot, as QEMU's QEMUSnapshotInfo ("snapshot -l", info's
 * "snapshots"). icount is UINT64_MAX when the image does not record one.
 */
typedef struct BlockSnapshotInfo {
    char *id;
    char *name;
    uint64_t vm_state_size;
    uint32_t date_sec;
    uint32_t date_nsec;
    uint64_t vm_clock_nsec;
    uint64_t icount;
} BlockSnapshotInfo;

void bdrv_snapshot_info_list_free(BlockSnapshotInfo *list, size_t n);

/*
 * Internal snapshots (qcow2; other formats: "not supported"). The list is
 * the image's table in order; *n may be 0. Create, goto and delete need
 * the image read-write: create names it name (ids are numbered), goto
 * takes an id or a name (the id first, as qemu-img), delete a name.
 */
int bdrv_snapshot_list(BlockDriverState *bs, BlockSnapshotInfo **list,
                       size_t *n, Error **errp);
int bdrv_snapshot_create(BlockDriverState *bs, const char *name,
                         Error **errp);
int bdrv_snapshot_goto(BlockDriverState *bs, const char *id_or_name,
                       Error **errp);
int bdrv_snapshot_delete(BlockDriverState *bs, const char *name,
                         Error **errp);
/*
 * Read the image as it was in a snapshot from now on (convert -l,
 * measure -l): read-only images only. id, name or both (both must match).
 */
int bdrv_snapshot_load_tmp(BlockDriverState *bs, const char *id,
                           const char *name, Error **errp);

/* rbd's "format-specific" data, as qemu-img 7.2 names it. */
typedef struct BlockImageInfoRbd {
    /* the LUKS header librbd would load: "luks", "luks2", or NULL */
    const char *encryption_format;
} BlockImageInfoRbd;

/* What "qemu-img info" shows. */
typedef struct BlockImageInfo {
    char *filename;
    char *format;
    uint64_t virtual_size;
    int64_t actual_size;            /* -1: unknown */
    bool encrypted;
    QCryptoBlockInfo *luks;         /* format-specific data, or NULL */
    BlockImageInfoQcow2 *qcow2;     /* format-specific data, or NULL */
    BlockImageInfoRbd *rbd;         /* format-specific data, or NULL */
    int64_t cluster_size;           /* 0: none */
    bool dirty_flag;
    char *backing_filename;         /* as the image names it, or NULL */
    char *full_backing_filename;    /* as opened */
    char *backing_filename_format;  /* NULL: not recorded */
    BlockSnapshotInfo *snapshots;   /* nb_snapshots of them, or NULL */
    size_t nb_snapshots;
} BlockImageInfo;

BlockImageInfo *bdrv_get_image_info(BlockDriverState *bs, Error **errp);
void bdrv_image_info_free(BlockImageInfo *info);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(BlockImageInfo, bdrv_image_info_free)

/*
 * Create an image of the given format at filename. opts holds "size" and
 * the format's creation options (-o); the ones understood are removed,
 * and any left over is an error. A regular file already at filename is
 * replaced, as qemu-img replaces it, but only by the complete image
 * (block/file-create.h): until then it is untouched, and refused if
 * another process has it open (its image locks).
 *
 * The new file is made by the protocol filename names (a plain name is
 * a file) and has no name until the image is complete
 * (block/file-create.h): bdrv_create() syncs it and names it before it
 * returns 0. On failure, once *interrupt is non-zero (see
 * bdrv_set_interrupt(); interrupt may be NULL), or if the process is
 * killed, nothing is left behind.
 */
int bdrv_create(const char *format, const char *filename, GHashTable *opts,
                const volatile sig_atomic_t *interrupt, Error **errp);
/*
 * An existing block device is the one exception (qemu-img's host_device):
 * an image is created on it in place, without truncating it, if it is
 * large enough. bdrv_block_device_size() is the size of the block device
 * filename names, or -1 if it names none.
 */
int64_t bdrv_block_device_size(const char *filename);
/*
 * The same, but return the new image open read-write (with flags) and
 * still without its name: write it, then call bdrv_create_finish().
 * Closing it before that (or a kill) leaves nothing behind.
 */
BlockDriverState *bdrv_create_open(const char *format, const char *filename,
                                   GHashTable *opts, int flags,
                                   const volatile sig_atomic_t *interrupt,
                                   Error **errp);
/*
 * Flush bs, sync the new files under it and give them their names (never
 * replacing a file that took the name meanwhile: "File exists"). Refused
 * with "Interrupted" once the interrupt flag the image was given is set
 * (bdrv_set_interrupt()). Harmless on other images.
 */
int bdrv_create_finish(BlockDriverState *bs, Error **errp);

/*
 * Test-only: false makes new files take a hidden temporary name beside
 * the target instead of O_TMPFILE (block/file-create.h), so that a test
 * can see what a kill leaves behind. Call before creating any image.
 */
void bdrv_file_create_use_tmpfile(bool use);

/*
 * Remove the file a protocol node holds, durably (QEMU's
 * bdrv_co_delete_file): its name goes, and the directory is synced. The
 * node must be open read-write; it stays open (its bytes readable) until
 * closed. Refused for a file that has no name yet, one that is not a
 * regular file, and where the name now refers to another file.
 */
int bdrv_delete_file(BlockDriverState *bs, Error **errp);

/*
 * Long operations on bs and the nodes below it (full preallocation, the
 * naming of a new image) stop with "Interrupted" once *flag is non-zero:
 * the tool passes the flag its signal handlers set. NULL: never (the
 * default). The caller's, per node: the library keeps no such state.
 */
void bdrv_set_interrupt(BlockDriverState *bs,
                        const volatile sig_atomic_t *flag);

/* What "qemu-img measure" prints (QEMU's BlockMeasureInfo). */
typedef struct BlockMeasureInfo {
    uint64_t required;
    uint64_t fully_allocated;
    bool has_bitmaps;           /* print "bitmaps size" (qcow2 to qcow2 v3) */
    uint64_t bitmaps;
} BlockMeasureInfo;

/*
 * Bytes a new image of this format needs ("qemu-img measure"): for size
 * bytes of data (--size; in_bs NULL), or for the contents of in_bs (size
 * is then its length; a format may count only what in_bs holds, by block
 * status). opts as for bdrv_create() (minus "size").
 */
int bdrv_measure(const char *format, GHashTable *opts, BlockDriverState *in_bs,
                 uint64_t size, BlockMeasureInfo *info, Error **errp);

/* What "check -r" may repair (QEMU's BdrvCheckMode). */
typedef enum {
    BDRV_FIX_LEAKS = 1,     /* free clusters nothing references */
    BDRV_FIX_ERRORS = 2,    /* refcounts too low, flags, where safe */
} BdrvCheckMode;

/*
 * What "check" found (QEMU's BdrvCheckResult). report, if set, receives
 * each finding as qemu-img prints it ("Leaked cluster 5 refcount=2
 * reference=1"), in order; the tool prints them, the library never does.
 * is_error marks the few that qemu-img prints as its own errors, after
 * its program name ("qemu-img: ERROR failed to read the snapshot table:
 * ...").
 */
typedef struct BdrvCheckResult {
    int64_t corruptions;
    int64_t leaks;
    int64_t check_errors;
    int64_t corruptions_fixed;
    int64_t leaks_fixed;
    int64_t image_end_offset;
    int64_t total_clusters;
    int64_t allocated_clusters;
    int64_t fragmented_clusters;
    int64_t compressed_clusters;
    void (*report)(void *opaque, bool is_error, const char *msg);
    void *report_opaque;
} BdrvCheckResult;

/*
 * Check an image's metadata for consistency, and repair what fix allows
 * (the image must then be open read-write). res is zeroed first, except
 * report. Returns 0 when the check ran (its findings are in res),
 * -ENOTSUP if the format has no check, or another negative errno if it
 * could not complete (qemu-img's "Check failed: <strerror>").
 */
int bdrv_check(BlockDriverState *bs, BdrvCheckResult *res, BdrvCheckMode fix);

/*
 * Record a new backing file name (and format) in the image's header, or
 * none (backing_file NULL): "qemu-img rebase". Only the header changes:
 * the caller has made the contents independent of the old backing file
 * first (or, rebase -u, knows the new one holds the same). A name needs
 * a format ("backing format must be specified", as QEMU 7.2).
 */
int bdrv_change_backing_file(BlockDriverState *bs, const char *backing_file,
                             const char *backing_fmt, Error **errp);

/*
 * Make every range of the image unallocated again, so that it reads its
 * backing file ("qemu-img commit" after copying the data down).
 */
int bdrv_make_empty(BlockDriverState *bs, Error **errp);

/*
 * How far a long amend is (qemu-img amend -p): done of total units of
 * work; total may change between calls (QEMU's BlockDriverAmendStatusCB).
 */
typedef void BdrvAmendStatusCB(BlockDriverState *bs, uint64_t done,
                               uint64_t total, void *opaque);

/*
 * Change format options in place ("qemu-img amend -o ..."); status_cb
 * (may be NULL) hears how far it is.
 */
int bdrv_amend(BlockDriverState *bs, GHashTable *opts, bool force,
               BdrvAmendStatusCB *status_cb, void *cb_opaque, Error **errp);

/*
 * Persistent dirty bitmaps (qcow2: docs/qcow2.md, "Persistent dirty
 * bitmaps"). Changes are made in memory and written when the image is
 * closed, or by bdrv_bitmaps_store(); the image is open read-write.
 * Errors are QEMU's ("Dirty bitmap 'x' not found", ...).
 */
typedef enum BdrvBitmapOp {
    BDRV_BITMAP_ADD,        /* enabled, granularity given or the default */
    BDRV_BITMAP_REMOVE,
    BDRV_BITMAP_CLEAR,
    BDRV_BITMAP_ENABLE,
    BDRV_BITMAP_DISABLE,
} BdrvBitmapOp;

/* A copy of a bitmap's bits: bit i of byte j is granule 8j + i. */
typedef struct BdrvBitmapBits {
    uint64_t disk_size;     /* bytes of disk it covers */
    uint32_t granularity;
    bool enabled;
    uint8_t *bits;          /* len bytes */
    uint64_t len;
} BdrvBitmapBits;

/* Whether bs can hold persistent bitmaps (qcow2 v3). */
bool bdrv_supports_persistent_bitmaps(BlockDriverState *bs);
/* The image's bitmaps (as info lists them); none: *out NULL, *nb 0. */
int bdrv_bitmap_list(BlockDriverState *bs, BlockImageInfoBitmap **out,
                     size_t *nb, Error **errp);
void bdrv_bitmap_list_free(BlockImageInfoBitmap *list, size_t nb);
/* granularity: for BDRV_BITMAP_ADD, 0 for the default. */
int bdrv_bitmap_op(BlockDriverState *bs, BdrvBitmapOp op, const char *name,
                   uint32_t granularity, Error **errp);
/* Set in bitmap name of bs the bits of bitmap src_name of src (or bs). */
int bdrv_bitmap_merge(BlockDriverState *bs, const char *name,
                      BlockDriverState *src, const char *src_name,
                      Error **errp);
/* A copy of a bitmap's bits (free out->bits). */
int bdrv_bitmap_get(BlockDriverState *bs, const char *name,
                    BdrvBitmapBits *out, Error **errp);
/*
 * Write the bitmaps now, with their errors (close would only drop them,
 * leaving the bitmaps marked in-use); no data writes may follow.
 */
int bdrv_bitmaps_store(BlockDriverState *bs, Error **errp);
/*
 * A command's last flush before it reports success: what a format keeps
 * in memory until close (qcow2's bitmaps) is written first, then the
 * node is flushed, so that a failure of either is the command's (close
 * cannot report one). No write may follow.
 */
int bdrv_flush_final(BlockDriverState *bs, Error **errp);

#endif
