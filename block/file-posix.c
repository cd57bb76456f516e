/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The "file" protocol driver: an image's bytes in a POSIX file (or a block
 * device), with pread/pwrite, and fallocate for preallocation.
 */
#include <errno.h>
#include <string.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "block/block_int.h"
#include "file-create.h"
#include "file-direct.h"
#include "file-lock.h"

/*
 * The last extent that SEEK_DATA / SEEK_HOLE found: [start, end) is all
 * data or all hole. On tmpfs each of these calls walks the page cache
 * from the offset to the end of the extent, so asking once per request
 * across a fully written file costs time quadratic in its size; with the
 * extent remembered, each byte is walked once (QEMU's file-posix keeps a
 * block-status cache for the same reason).
 */
typedef struct FileExtentCache {
    bool valid;
    bool data;
    uint64_t start, end;
} FileExtentCache;

typedef struct BDRVFileState {
    int fd;
    /* Opened with O_DIRECT (BDRV_O_NOCACHE): I/O through file-direct.c. */
    bool direct;
    /*
     * O_DIRECT writes (buffered ones take no lock of ours). Aligned ones
     * share it: callers never write the same bytes at once, and the
     * device takes them side by side. A partial block's read-modify-write
     * holds it alone: it rewrites the bytes around its own and may cut
     * the file back, which must not meet another write. Copy offloading
     * holds it alone too.
     */
    GRWLock write_lock;
    /*
     * Guards extent and the lseek() calls that fill it: a thread that
     * misses waits for the one already walking the file, then hits.
     */
    GMutex extent_lock;
    FileExtentCache extent;
    /* This process's record of the open file (see file-lock.h). */
    FileLockClaim *claim;
    /*
     * A new file that has no name yet (see file-create.h), shared with
     * the creation that made it; bdrv_create_finish() names it.
     */
    FileCreate *create;
} BDRVFileState;

/* Zero-filled chunk used by full preallocation. */
#define FILE_PREALLOC_CHUNK (1024 * 1024)

/*
 * The "locking" option, as QEMU's file driver: "off" takes no locks (nor
 * does -U, BDRV_O_FORCE_SHARE); "on" and "auto" (the default) do.
 */
static int file_take_locking_opt(GHashTable *opts, bool *use_lock,
                                 Error **errp)
{
    g_autofree char *locking = qemu_opt_take(opts, "locking");
    g_autofree char *aio = qemu_opt_take(opts, "aio");
    uint64_t batch;

    /*
     * QEMU's I/O engine choice (libvirt's file.aio): here every request
     * is a system call in the calling thread, whatever is asked.
     */
    if (aio && !g_str_equal(aio, "threads") && !g_str_equal(aio, "native") &&
        !g_str_equal(aio, "io_uring")) {
        error_setg(errp, "Parameter 'aio' does not accept value '%s'", aio);
        return -1;
    }
    if (qemu_opt_take_uint(opts, "aio-max-batch", 0, &batch, errp) < 0) {
        return -1;
    }
    if (!locking || g_str_equal(locking, "auto") ||
        g_str_equal(locking, "on")) {
        *use_lock = true;
    } else if (g_str_equal(locking, "off")) {
        *use_lock = false;
    } else {
        error_setg(errp, "Parameter 'locking' does not accept value '%s'",
                   locking);
        return -1;
    }
    return 0;
}

/*
 * Lock the open file as qemu-img does for the same command. A reader
 * (info, compare, a convert source, a backing file) needs consistent
 * reads (info, with BDRV_O_NO_IO, not even those) and lets nobody else
 * write or resize the image under it; a writer (amend, resize, a convert
 * or create target) needs write and resize too, and lets others only
 * read. A writer therefore excludes every other writer and reader, and
 * -U readers are the only ones that see an image while it is written.
 */
static int file_open_lock(BlockDriverState *bs, const struct stat *st,
                          int flags, bool use_lock, Error **errp)
{
    BDRVFileState *s = bs->opaque;
    bool write = flags & BDRV_O_RDWR;
    uint64_t perm = 0, shared;

    s->claim = file_lock_claim(st, bs->filename, write, errp);
    if (!s->claim) {
        return -1;
    }
    if (!use_lock || (flags & BDRV_O_FORCE_SHARE)) {
        return 0;
    }
    if (write || !(flags & BDRV_O_NO_IO)) {
        perm |= FILE_PERM_CONSISTENT_READ;
    }
    if (write) {
        perm |= FILE_PERM_WRITE | FILE_PERM_RESIZE;
    }
    shared = FILE_PERM_CONSISTENT_READ | FILE_PERM_WRITE_UNCHANGED;
    if (file_lock_acquire(s->fd, bs->filename, perm, shared, errp) < 0) {
        error_prepend(errp, "Could not open '%s': ", bs->filename);
        g_clear_pointer(&s->claim, file_lock_unclaim);
        return -1;
    }
    return 0;
}

/*
 * A descriptor of a new file being created (see file-create.h), with
 * O_DIRECT if direct: a flag of the open file, shared with the creation's
 * own descriptor, which only syncs it. -1 with errno on failure.
 */
static int file_dup_new(FileCreate *create, bool direct)
{
    int fd = fcntl(file_create_fd(create), F_DUPFD_CLOEXEC, 0);
    int fl, err;

    if (fd >= 0 && direct) {
        fl = fcntl(fd, F_GETFL);
        if (fl < 0 || fcntl(fd, F_SETFL, fl | O_DIRECT) < 0) {
            err = errno;
            close(fd);
            errno = err;
            return -1;
        }
    }
    return fd;
}

/*
 * Open filename as bs, or, with create, make it: a new file that has no
 * name until bdrv_create_finish() (file-create.h).
 */
static int file_open_common(BlockDriverState *bs, GHashTable *opts,
                            int flags, bool create_new, Error **errp)
{
    BDRVFileState *s = bs->opaque;
    g_autofree char *filename = qemu_opt_take(opts, "filename");
    g_autoptr(FileCreate) create = NULL;
    struct stat st;
    bool use_lock;

    s->fd = -1;
    if (!filename) {
        error_setg(errp, "Parameter 'filename' is required");
        return -1;
    }
    if (file_take_locking_opt(opts, &use_lock, errp) < 0) {
        return -1;
    }
    s->direct = flags & BDRV_O_NOCACHE;
    if (create_new) {
        /* Replaces what is there only when complete (bdrv_create()). */
        create = file_create_new(filename, errp);
        if (!create) {
            return -1;
        }
        s->fd = file_dup_new(create, s->direct);
        file_create_set_sync(create, !(flags & BDRV_O_CREATE_NO_SYNC));
    } else {
        /* Read-only opens are O_RDONLY: a source image is never writable. */
        s->fd = open(filename, ((flags & BDRV_O_RDWR) ? O_RDWR : O_RDONLY) |
                     (s->direct ? O_DIRECT : 0) | O_CLOEXEC);
    }
    if (s->fd < 0 && s->direct && errno == EINVAL) {
        /* open(2): the file system does not take O_DIRECT. */
        error_setg(errp, "Could not open '%s': filesystem does not support "
                   "O_DIRECT", filename);
        return -1;
    }
    if (s->fd < 0) {
        error_setg_errno(errp, errno, "Could not open '%s'", filename);
        return -1;
    }
    st.st_mode = 0;
    if (fstat(s->fd, &st) < 0 || S_ISDIR(st.st_mode)) {
        int err = S_ISDIR(st.st_mode) ? EISDIR : errno;

        error_setg_errno(errp, err, "Could not open '%s'", filename);
        close(s->fd);
        s->fd = -1;
        return -1;
    }
    bs->filename = g_steal_pointer(&filename);
    if (file_open_lock(bs, &st, flags, use_lock, errp) < 0) {
        close(s->fd);
        s->fd = -1;
        return -1;
    }
    s->create = g_steal_pointer(&create);
    /*
     * Last: a GRWLock holds memory until g_rw_lock_clear(), which only
     * file_close() calls, and a failed open is never closed.
     */
    g_rw_lock_init(&s->write_lock);
    g_mutex_init(&s->extent_lock);
    return 0;
}

static int file_open(BlockDriverState *bs, GHashTable *opts, int flags,
                     Error **errp)
{
    return file_open_common(bs, opts, flags, false, errp);
}

/*
 * A new file for an image: unnamed until complete. On a block device
 * there is nothing to make (QEMU's host_device): the device is opened as
 * it is, nothing cleared, and the image must fit (bdrv_create_fit()).
 */
static int file_create_file(BlockDriverState *bs, GHashTable *opts,
                            int flags, Error **errp)
{
    const char *filename = g_hash_table_lookup(opts, "filename");

    return file_open_common(bs, opts, flags,
                            !filename ||
                            bdrv_block_device_size(filename) < 0, errp);
}

static void file_close(BlockDriverState *bs)
{
    BDRVFileState *s = bs->opaque;

    if (s->fd >= 0) {
        close(s->fd);   /* drops the locks too */
    }
    file_lock_unclaim(s->claim);
    file_create_unref(s->create);
    g_rw_lock_clear(&s->write_lock);
    g_mutex_clear(&s->extent_lock);
}

static int file_pread(BlockDriverState *bs, uint64_t offset, void *buf,
                      size_t bytes, Error **errp)
{
    BDRVFileState *s = bs->opaque;
    uint8_t *p = buf;

    if (s->direct) {
        return file_direct_pread(s->fd, bs->filename, offset, buf, bytes,
                                 errp);
    }
    while (bytes) {
        ssize_t n = pread(s->fd, p, bytes, offset);

        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            error_setg_errno(errp, errno, "Could not read '%s' at offset %"
                             G_GUINT64_FORMAT, bs->filename, offset);
            return -1;
        }
        if (n == 0) {
            /* Past the end of the file: reads as zeroes, as in QEMU. */
            memset(p, 0, bytes);
            break;
        }
        p += n;
        offset += n;
        bytes -= n;
    }
    return 0;
}

static int file_pwrite(BlockDriverState *bs, uint64_t offset, const void *buf,
                       size_t bytes, int flags, Error **errp)
{
    BDRVFileState *s = bs->opaque;
    const uint8_t *p = buf;

    if (s->direct) {
        /* See write_lock. O_DIRECT leaves nothing for write-back to do. */
        int ret;

        if (file_direct_aligned(buf, offset, bytes)) {
            g_rw_lock_reader_lock(&s->write_lock);
            ret = file_direct_pwrite(s->fd, bs->filename, offset, buf, bytes,
                                     errp);
            g_rw_lock_reader_unlock(&s->write_lock);
        } else {
            g_rw_lock_writer_lock(&s->write_lock);
            ret = file_direct_pwrite(s->fd, bs->filename, offset, buf, bytes,
                                     errp);
            g_rw_lock_writer_unlock(&s->write_lock);
        }
        return ret;
    }
    /*
     * Buffered writes need no lock of ours: callers never write the same
     * bytes at once, the kernel orders writes to one file, and the
     * write-back accounting below is atomic.
     */
    while (bytes) {
        ssize_t n = pwrite(s->fd, p, bytes, offset);

        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            error_setg_errno(errp, errno, "Could not write '%s' at offset %"
                             G_GUINT64_FORMAT, bs->filename, offset);
            return -1;
        }
        p += n;
        offset += n;
        bytes -= n;
    }
    if (s->create) {
        file_create_wrote(s->create, p - (const uint8_t *)buf);
    }
    return 0;
}

/*
 * fallocate(2) on the range, EINTR retried: 0, or -errno. The extent
 * cache stays right: a "data" answer is always safe, and "hole" is only
 * kept on nodes that cannot write.
 */
static int file_fallocate(BDRVFileState *s, int mode, uint64_t offset,
                          size_t bytes)
{
    int ret;

    do {
        ret = fallocate(s->fd, mode, offset, bytes);
    } while (ret < 0 && errno == EINTR);
    return ret < 0 ? -errno : 0;
}

/* Zeroes without writing them: the file system's zero range, if it has one. */
static int file_pwrite_zeroes(BlockDriverState *bs, uint64_t offset,
                              size_t bytes, int flags, Error **errp)
{
    BDRVFileState *s = bs->opaque;
    int ret;

    /*
     * A punched hole reads as zeroes, in a file and on a block device
     * (which zeroes the range where it cannot unmap it). It never grows
     * the file: past the end, the zero range below does.
     */
    if ((flags & BDRV_REQ_MAY_UNMAP) &&
        file_fallocate(s, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                       offset, bytes) == 0) {
        struct stat st;

        if (fstat(s->fd, &st) == 0 && S_ISREG(st.st_mode) &&
            (uint64_t)st.st_size >= offset + bytes) {
            return 0;
        }
    }
    /* Grows the file past its end, as a write would. */
    ret = file_fallocate(s, FALLOC_FL_ZERO_RANGE, offset, bytes);

    if (ret == -EOPNOTSUPP || ret == -EINVAL || ret == -ENODEV) {
        return -ENOTSUP;        /* the request path writes zeroes */
    }
    if (ret < 0) {
        error_setg_errno(errp, -ret, "Could not write zeroes to '%s' at "
                         "offset %" G_GUINT64_FORMAT, bs->filename, offset);
        return -1;
    }
    return 0;
}

static int file_pdiscard(BlockDriverState *bs, uint64_t offset, size_t bytes,
                         Error **errp)
{
    BDRVFileState *s = bs->opaque;
    int ret = file_fallocate(s, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                             offset, bytes);

    /* A hint: where the file system cannot punch, the bytes stay. */
    if (ret < 0 && ret != -EOPNOTSUPP && ret != -EINVAL && ret != -ENODEV) {
        error_setg_errno(errp, -ret, "Could not discard '%s' at offset %"
                         G_GUINT64_FORMAT, bs->filename, offset);
        return -1;
    }
    return 0;
}

static int64_t file_getlength(BlockDriverState *bs, Error **errp)
{
    BDRVFileState *s = bs->opaque;
    /* SEEK_END works for block devices too, where st_size is 0. */
    off_t len = lseek(s->fd, 0, SEEK_END);

    if (len < 0) {
        error_setg_errno(errp, errno, "Could not get the size of '%s'",
                         bs->filename);
        return -1;
    }
    return len;
}

/*
 * Full preallocation: zeroes written from offset to end. It can take
 * minutes, so it stops when the node's caller asks (bdrv_interrupted()).
 * create is the new file being written, if it is one (write-back hints).
 */
static int file_write_zeroes(BlockDriverState *bs, int fd, bool direct,
                             uint64_t offset, uint64_t end,
                             FileCreate *create, Error **errp)
{
    g_autofree uint8_t *zeroes = g_malloc0(FILE_PREALLOC_CHUNK);

    while (offset < end) {
        size_t n = MIN(end - offset, FILE_PREALLOC_CHUNK);
        ssize_t r;

        if (bdrv_interrupted(bs)) {
            error_setg(errp, "Interrupted");
            return -1;
        }
        if (direct) {
            if (file_direct_pwrite(fd, "the image", offset, zeroes, n,
                                   errp) < 0) {
                error_prepend(errp, "Could not preallocate data: ");
                return -1;
            }
            offset += n;
            continue;
        }
        r = pwrite(fd, zeroes, n, offset);
        if (r < 0) {
            if (errno == EINTR) {
                continue;
            }
            error_setg_errno(errp, errno, "Could not preallocate data");
            return -1;
        }
        offset += r;
        if (create) {
            file_create_wrote(create, r);
        }
    }
    return 0;
}

/*
 * A resize that failed half way (full preallocation out of space after
 * some of its writes, or fallocate(2) after some blocks) is undone: the
 * file goes back to its old size and the blocks past it are freed, as
 * qemu-img does. What keeps the size as it was matters most: a LUKS
 * image's virtual size is its file's. The rollback's own failure is not
 * told: the resize's error is.
 */
static void file_resize_rollback(int fd, off_t old_size)
{
    int ret;

    do {
        ret = ftruncate(fd, old_size);
    } while (ret < 0 && errno == EINTR);
}

/* Resize fd to size; grown space is allocated as prealloc says. */
static int file_resize_fd(BlockDriverState *bs, int fd, bool direct,
                          uint64_t size, PreallocMode prealloc,
                          FileCreate *create, Error **errp)
{
    struct stat st;

    if (fstat(fd, &st) < 0) {
        error_setg_errno(errp, errno, "Could not stat the image");
        return -1;
    }
    if (prealloc != PREALLOC_MODE_OFF && size > (uint64_t)st.st_size) {
        int ret = 0;

        if (prealloc == PREALLOC_MODE_FALLOC) {
            /* posix_fallocate() returns the error rather than setting errno */
            ret = posix_fallocate(fd, st.st_size, size - st.st_size);
            if (ret) {
                error_setg_errno(errp, ret, "Could not preallocate data");
                file_resize_rollback(fd, st.st_size);
                return -1;
            }
        } else if (file_write_zeroes(bs, fd, direct, st.st_size, size,
                                     create, errp) < 0) {
            file_resize_rollback(fd, st.st_size);
            return -1;
        }
    }
    /*
     * Not even a no-op truncate: ext4 takes one to size 0 for a file
     * being rewritten (auto_da_alloc), and its close then writes back all
     * the data written since, in close(): a new encrypted image (created
     * empty, then grown) took 0.13 s longer per 512 MiB for that.
     */
    if (size != (uint64_t)st.st_size && ftruncate(fd, size) < 0) {
        error_setg_errno(errp, errno, "Could not resize the image");
        return -1;
    }
    return 0;
}

static int file_truncate(BlockDriverState *bs, uint64_t size,
                         PreallocMode prealloc, Error **errp)
{
    BDRVFileState *s = bs->opaque;
    struct stat st;

    /* A device's size is its own: only "resizing" to it succeeds (QEMU). */
    if (fstat(s->fd, &st) == 0 &&
        (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode))) {
        int64_t len = bdrv_getlength_exact(bs, errp);

        if (len < 0) {
            return -1;
        }
        if ((uint64_t)len != size) {
            error_setg(errp, "Cannot resize device files");
            return -1;
        }
        return 0;
    }
    return file_resize_fd(bs, s->fd, s->direct, size, prealloc, s->create,
                          errp);
}

static int file_flush(BlockDriverState *bs, Error **errp)
{
    BDRVFileState *s = bs->opaque;

    if (bs->open_flags & BDRV_O_NO_FLUSH) {
        return 0;
    }
    if (fdatasync(s->fd) < 0) {
        error_setg_errno(errp, errno, "Could not flush '%s'", bs->filename);
        return -1;
    }
    return 0;
}

/*
 * Ask the file system about the extent holding offset: returns whether it
 * is data, and *end where it ends (UINT64_MAX for the hole that runs to the
 * end of the file and past it). lseek() is a hint: when it fails, or
 * contradicts itself (the file changed between the two calls), the answer
 * is "data" for the bytes asked about, which is always safe to act on.
 */
static bool file_seek_extent(int fd, uint64_t offset, uint64_t bytes,
                             uint64_t *end)
{
    off_t data, hole;

    data = lseek(fd, offset, SEEK_DATA);
    if (data < 0 && errno == ENXIO) {
        *end = UINT64_MAX;      /* in the hole at the end, or past EOF */
        return false;
    }
    if (data > (off_t)offset) {
        *end = data;
        return false;
    }
    if (data == (off_t)offset) {
        hole = lseek(fd, offset, SEEK_HOLE);
        if (hole > (off_t)offset) {
            *end = hole;
            return true;
        }
    }
    *end = bytes > UINT64_MAX - offset ? UINT64_MAX : offset + bytes;
    return true;
}

/*
 * Holes in the file read as zeroes. *pnum covers the whole extent that
 * holds offset, up to bytes: a caller that asks about the rest of the
 * file walks it one extent per call.
 */
static bool file_block_status_is_data(BlockDriverState *bs, uint64_t offset,
                                      uint64_t bytes, uint64_t *pnum)
{
    BDRVFileState *s = bs->opaque;
    g_autoptr(GMutexLocker) locker = g_mutex_locker_new(&s->extent_lock);
    FileExtentCache *e = &s->extent;
    uint64_t end;
    bool data;

    if (e->valid && e->start <= offset && offset < e->end) {
        *pnum = MIN(bytes, e->end - offset);
        return e->data;
    }
    data = file_seek_extent(s->fd, offset, bytes, &end);
    /*
     * "Data" stays true whatever is written later (reading it is always
     * right); "hole" only while nobody writes: it is remembered only where
     * this node cannot write.
     */
    if (data || bdrv_is_read_only(bs)) {
        *e = (FileExtentCache) {
            .valid = true, .data = data, .start = offset, .end = end,
        };
    }
    *pnum = MIN(bytes, end - offset);
    return data;
}

/*
 * The extent at offset as QEMU's file driver reports it: data, or a hole
 * (zeroes; a hole at or past the end of the file too), its bytes at their
 * own offset in this node.
 */
static int file_block_status(BlockDriverState *bs, uint64_t offset,
                             uint64_t bytes, uint64_t *pnum, uint64_t *map,
                             BlockDriverState **file, Error **errp)
{
    BDRVFileState *s = bs->opaque;
    uint64_t end;
    bool data = file_seek_extent(s->fd, offset, bytes, &end);
    struct stat st;

    /*
     * O_DIRECT, data up to an end of file inside a sector: the rest of
     * that sector (which the image's virtual size, rounded up, includes)
     * goes with it, as QEMU reports it when it works in aligned blocks,
     * rather than as a run of its own (qemu-iotests 253).
     */
    if (s->direct && data && end % BDRV_SECTOR_SIZE &&
        fstat(s->fd, &st) == 0 &&
        (uint64_t)st.st_size == end) {
        end = ROUND_UP(end, BDRV_SECTOR_SIZE);
    }
    *pnum = MIN(bytes, end - offset);
    *map = offset;
    *file = bs;
    return (data ? BDRV_BLOCK_DATA : BDRV_BLOCK_ZERO) |
           BDRV_BLOCK_OFFSET_VALID;
}

/* A block device's logical block size; a file reads in 512-byte sectors. */
static uint32_t file_logical_block_size(BlockDriverState *bs)
{
    BDRVFileState *s = bs->opaque;
    struct stat st;
    int size;

    if (fstat(s->fd, &st) == 0 && S_ISBLK(st.st_mode) &&
        ioctl(s->fd, BLKSSZGET, &size) == 0 && size > 0) {
        return size;
    }
    return BDRV_SECTOR_SIZE;
}

static bool file_has_zero_init(BlockDriverState *bs)
{
    BDRVFileState *s = bs->opaque;
    struct stat st;

    /* A block device keeps whatever it held; a new file is all zeroes. */
    return fstat(s->fd, &st) == 0 && S_ISREG(st.st_mode);
}

static int64_t file_get_allocated_file_size(BlockDriverState *bs)
{
    BDRVFileState *s = bs->opaque;
    struct stat st;

    if (fstat(s->fd, &st) < 0) {
        return -1;
    }
    return (int64_t)st.st_blocks * 512;     /* st_blocks: 512-byte units */
}

int64_t bdrv_block_device_size(const char *filename)
{
    struct stat st;
    off_t len;
    int fd;

    if (stat(filename, &st) < 0 || !S_ISBLK(st.st_mode)) {
        return -1;
    }
    fd = open(filename, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return -1;
    }
    len = lseek(fd, 0, SEEK_END);
    close(fd);
    return len;
}

/*
 * A new image's file to size bytes (bdrv_create_fit()): a device's size
 * is its own, so it must hold the image already and is left as it is
 * (QEMU's truncate that need not be exact, and its messages).
 */
static int file_create_fit(BlockDriverState *bs, uint64_t size,
                           PreallocMode prealloc, Error **errp)
{
    BDRVFileState *s = bs->opaque;
    struct stat st;
    int64_t len;

    if (fstat(s->fd, &st) < 0 || !S_ISBLK(st.st_mode)) {
        return bdrv_truncate(bs, size, prealloc, errp);
    }
    if (prealloc != PREALLOC_MODE_OFF) {
        error_setg(errp, "Preallocation mode '%s' unsupported for this "
                   "non-regular file", prealloc_mode_str(prealloc));
        return -1;
    }
    len = bdrv_getlength_exact(bs, errp);
    if (len < 0) {
        return -1;
    }
    if (size > (uint64_t)len) {
        error_setg(errp, "Cannot grow device files");
        return -1;
    }
    return 0;
}

/* Name the new file this node writes: see bdrv_create_finish(). */
static int file_create_finish(BlockDriverState *bs, Error **errp)
{
    BDRVFileState *s = bs->opaque;

    if (!s->create) {
        return 0;
    }
    if (bdrv_interrupted(bs)) {
        error_setg(errp, "Interrupted");
        return -1;
    }
    if (file_create_commit(s->create, errp) < 0) {
        return -1;
    }
    g_clear_pointer(&s->create, file_create_unref);
    return 0;
}

/*
 * Unlink the file, then sync its directory: once this returns, a crash
 * cannot bring the name back. Only the file this node holds goes, not one
 * found under its name instead (checked just before the unlink).
 */
static int file_delete_file(BlockDriverState *bs, Error **errp)
{
    BDRVFileState *s = bs->opaque;
    g_autofree char *dir = NULL;
    struct stat st, named;
    int fd;

    if (s->create) {
        error_setg(errp, "Could not remove '%s': it has no name yet",
                   bs->filename);
        return -1;
    }
    if (fstat(s->fd, &st) < 0 || stat(bs->filename, &named) < 0) {
        error_setg_errno(errp, errno, "Could not remove '%s'", bs->filename);
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        error_setg(errp, "Could not remove '%s': not a regular file",
                   bs->filename);
        return -1;
    }
    if (st.st_dev != named.st_dev || st.st_ino != named.st_ino) {
        error_setg(errp, "Could not remove '%s': the name now refers to "
                   "another file", bs->filename);
        return -1;
    }
    if (unlink(bs->filename) < 0) {
        error_setg_errno(errp, errno, "Could not remove '%s'", bs->filename);
        return -1;
    }
    dir = g_path_get_dirname(bs->filename);
    fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0 || fsync(fd) < 0) {
        error_setg_errno(errp, errno, "Could not sync the directory '%s'",
                         dir);
        if (fd >= 0) {
            close(fd);
        }
        return -1;
    }
    close(fd);
    return 0;
}

/* "create -f file": the image is the new file itself. */
static int file_create(BlockDriverState *file, GHashTable *opts, int flags,
                       BlockDriverState **pbs, Error **errp)
{
    PreallocMode prealloc;
    uint64_t size;

    if (bdrv_create_take_size_prealloc(opts, &size, &prealloc, errp) < 0) {
        return -1;
    }
    return bdrv_create_fit_raw(file, size, prealloc, errp);
}

/*
 * Copy offloading (qemu-img convert -C): copy_file_range(2) lets the file
 * system share or copy the extents itself (a reflink on XFS or Btrfs, a
 * server-side copy on NFS). It fails with EXDEV across file systems that
 * cannot, EINVAL or EOPNOTSUPP where it is not supported: the caller then
 * copies through its buffers.
 */
static int file_copy_range(BlockDriverState *src, uint64_t src_offset,
                           BlockDriverState *dst, uint64_t dst_offset,
                           uint64_t bytes, Error **errp)
{
    BDRVFileState *s = src->opaque, *d = dst->opaque;
    g_autoptr(GRWLockWriterLocker) locker =
        g_rw_lock_writer_locker_new(&d->write_lock);
    off_t in = src_offset, out = dst_offset;

    while (bytes) {
        ssize_t n = copy_file_range(s->fd, &in, d->fd, &out, bytes, 0);

        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            /* 0: the source ended early (it shrank): not a copy we can do. */
            error_setg_errno(errp, n < 0 ? errno : EIO, "Could not copy "
                             "from '%s' to '%s' at offset %" G_GUINT64_FORMAT,
                             src->filename, dst->filename,
                             (uint64_t)in);
            return -1;
        }
        bytes -= n;
    }
    return 0;
}

/*
 * "file:x" is the file x; a name without a prefix is the file itself.
 * "file:a:b" is "./a:b", as QEMU names it: the name, given again, must not
 * read as protocol a (backing files are resolved against it too).
 */
static int file_parse_filename(const char *filename, GHashTable *opts,
                               Error **errp)
{
    if (g_str_has_prefix(filename, "file:")) {
        filename += strlen("file:");
        if (filename[strcspn(filename, ":/")] == ':') {
            g_hash_table_insert(opts, g_strdup("filename"),
                                g_strconcat("./", filename, NULL));
            return 0;
        }
    }
    g_hash_table_insert(opts, g_strdup("filename"), g_strdup(filename));
    return 0;
}

/* The open file's device and inode: the same file by any name. */
static char *file_get_identity(BlockDriverState *bs)
{
    BDRVFileState *s = bs->opaque;
    struct stat st;

    if (fstat(s->fd, &st) < 0) {
        return NULL;
    }
    return g_strdup_printf("file:%ju:%ju", (uintmax_t)st.st_dev,
                           (uintmax_t)st.st_ino);
}

/*
 * The file's directory, as named ("" for one in the current directory:
 * a relative name stays relative, as in QEMU's bdrv_get_full_backing_
 * filename).
 */
static char *file_dirname(BlockDriverState *bs, Error **errp)
{
    /* Up to the last '/', as QEMU's path_combine(): "./a" gives "./". */
    const char *slash = strrchr(bs->filename, '/');

    return slash ? g_strndup(bs->filename, slash - bs->filename + 1)
                 : g_strdup("");
}

/* "-o help" with a file name: what the protocol adds (qemu-img's words). */
static const BlockOptionDesc file_create_opts[] = {
    { "extent_size_hint", "size",
      "Extent size hint for the image file, 0 to disable" },
    { "nocow", "bool (on/off)",
      "Turn off copy-on-write (valid only on btrfs)" },
    { "preallocation", "str",
      "Preallocation mode (allowed values: off, falloc, full)" },
    { NULL }
};

const BlockDriver bdrv_file = {
    .format_name = "file",
    .instance_size = sizeof(BDRVFileState),
    .is_protocol = true,
    .protocol_name = "file",
    .bdrv_parse_filename = file_parse_filename,
    .bdrv_get_identity = file_get_identity,
    .bdrv_dirname = file_dirname,
    .bdrv_open = file_open,
    .bdrv_close = file_close,
    .bdrv_pread = file_pread,
    .bdrv_pwrite = file_pwrite,
    .bdrv_pwrite_zeroes = file_pwrite_zeroes,
    .bdrv_pdiscard = file_pdiscard,
    .bdrv_getlength = file_getlength,
    .bdrv_truncate = file_truncate,
    .bdrv_flush = file_flush,
    .bdrv_logical_block_size = file_logical_block_size,
    .bdrv_block_status_is_data = file_block_status_is_data,
    .bdrv_block_status = file_block_status,
    .bdrv_has_zero_init = file_has_zero_init,
    .bdrv_get_allocated_file_size = file_get_allocated_file_size,
    .bdrv_create = file_create,
    .bdrv_create_file = file_create_file,
    .bdrv_create_fit = file_create_fit,
    .bdrv_create_finish = file_create_finish,
    .bdrv_delete_file = file_delete_file,
    .bdrv_copy_range = file_copy_range,
    .create_opts = file_create_opts,
};
