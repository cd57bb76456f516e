/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * New files that appear under their name only when complete: see
 * file-create.h.
 *
 * Two ways to hold a file without its name:
 *   - O_TMPFILE (Linux 3.11; ext4, xfs, btrfs, tmpfs...): the file has no
 *     name at all; commit links it with linkat() through /proc/self/fd/N
 *     (any user), or AT_EMPTY_PATH (needs CAP_DAC_READ_SEARCH) where
 *     /proc is missing. Nothing survives a kill.
 *   - elsewhere (NFS, FUSE, old kernels, or forced for tests): a hidden
 *     name ".NAME.XXXXXX" in the same directory, renamed on commit with
 *     RENAME_NOREPLACE (or link + unlink where the file system lacks
 *     it), removed on abort. Only SIGKILL or a crash can leave it.
 * Either way the target's name never shows a partial file.
 *
 * A regular file already under the name is replaced, as qemu-img
 * replaces it, but only when the new one is complete: commit renames the
 * new file over it (after giving an O_TMPFILE file a hidden name first),
 * so a failed or killed creation leaves the old file as it was. Until
 * then the old file is held open with QEMU's creation locks, which
 * refuses an image another process (QEMU, qemu-img, us) is using.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "block/block.h"
#include "file-create.h"
#include "file-lock.h"

/*
 * Start write-back every this many bytes written: the final sync then
 * waits for at most this much dirty data plus what the disk's queue
 * holds, and the call (which walks the file's dirty pages) stays rare.
 */
#ifndef FILE_CREATE_WRITEBACK_STEP   /* benchmarks may change it */
#define FILE_CREATE_WRITEBACK_STEP (8 * 1024 * 1024)
#endif

struct FileCreate {
    gint refcount;
    int fd;
    char *path;
    char *temp_path;        /* NULL: unnamed (O_TMPFILE) */
    bool committed;
    bool no_sync;           /* file_create_set_sync(fc, false) */
    gsize written;          /* bytes reported by file_create_wrote() */
    /* The file the new one replaces, held open and locked; -1: none. */
    int old_fd;
    FileLockClaim *old_claim;
};

static bool file_create_tmpfile = true;

void file_create_use_tmpfile(bool use)
{
    file_create_tmpfile = use;
}

void bdrv_file_create_use_tmpfile(bool use)
{
    file_create_use_tmpfile(use);
}

static bool file_create_tmpfile_wanted(void)
{
    /*
     * Without /proc, only a privileged process could link the file (see
     * file_create_link()): find that out now, not after a long copy.
     */
    return file_create_tmpfile && access("/proc/self/fd", X_OK) == 0;
}

/* An unnamed file in dir, or -1 with errno (EOPNOTSUPP: not here). */
static int file_create_open_unnamed(const char *dir)
{
    int fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0644);

    /* Kernels before O_TMPFILE see O_DIRECTORY | O_RDWR: EISDIR. */
    if (fd < 0 && (errno == EISDIR || errno == EINVAL)) {
        errno = EOPNOTSUPP;
    }
    return fd;
}

/* ".NAME.XXXXXX" beside path, XXXXXX random. */
static char *file_create_temp_name(const char *path)
{
    static const char chars[] =
        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    g_autofree char *dir = g_path_get_dirname(path);
    g_autofree char *base = g_path_get_basename(path);
    char suffix[7];

    for (size_t i = 0; i < sizeof(suffix) - 1; i++) {
        suffix[i] = chars[g_random_int_range(0, sizeof(chars) - 1)];
    }
    suffix[sizeof(suffix) - 1] = '\0';
    return g_strdup_printf("%s/.%s.%s", dir, base, suffix);
}

/* A new file under a free temporary name next to path. */
static int file_create_open_temp(const char *path, char **temp_path)
{
    for (int tries = 0; tries < 100; tries++) {
        g_autofree char *name = file_create_temp_name(path);
        /* open(O_CREAT) applies the umask, as for any new image. */
        int fd = open(name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);

        if (fd >= 0 || errno != EEXIST) {
            if (fd >= 0) {
                *temp_path = g_steal_pointer(&name);
            }
            return fd;
        }
    }
    errno = EEXIST;
    return -1;
}

/*
 * The file under path that a new one is to replace: path resolved (a
 * symlink keeps pointing where it did; the file it names is replaced),
 * the file opened and locked as qemu-img locks a file it creates over
 * (QEMU's raw_co_create(): it needs "write" and "resize" and shares all
 * but "resize"), and claimed in this process (a convert never replaces
 * its own source). Returns the open file, *resolved its name; -1 and
 * errp on failure, "File exists" where it is not a regular file.
 */
static int file_create_open_old(const char *path, char **resolved,
                                 struct stat *st, FileLockClaim **claim,
                                 Error **errp)
{
    g_autofree char *real = realpath(path, NULL);
    int fd;

    if (!real) {
        /* A dangling symlink: where it points is not ours to create. */
        error_setg_errno(errp, errno == ENOENT ? EEXIST : errno,
                         "Could not create '%s'", path);
        return -1;
    }
    fd = open(real, O_RDWR | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        error_setg_errno(errp, errno, "Could not create '%s'", path);
        return -1;
    }
    if (fstat(fd, st) < 0 || !S_ISREG(st->st_mode)) {
        error_setg_errno(errp, S_ISREG(st->st_mode) ? errno : EEXIST,
                         "Could not create '%s'", path);
        close(fd);
        return -1;
    }
    *claim = file_lock_claim(st, path, true, errp);
    if (!*claim) {
        close(fd);
        return -1;
    }
    if (file_lock_acquire(fd, path, FILE_PERM_WRITE | FILE_PERM_RESIZE,
                          FILE_PERM_ALL & ~FILE_PERM_RESIZE, errp) < 0) {
        file_lock_unclaim(g_steal_pointer(claim));
        close(fd);
        return -1;
    }
    *resolved = g_steal_pointer(&real);
    return fd;
}

FileCreate *file_create_new(const char *path, Error **errp)
{
    g_autofree char *dir = NULL;
    g_autofree char *temp_path = NULL;
    g_autofree char *target = g_strdup(path);
    FileLockClaim *old_claim = NULL;
    FileCreate *fc;
    struct stat st;
    int fd = -1, old_fd = -1;

    /*
     * A name in use: the file there is replaced at commit, if it may be
     * (file_create_open_old()). The new file goes beside the one it
     * replaces, so that the rename stays in one file system.
     */
    if (lstat(path, &st) == 0) {
        g_free(target);
        target = NULL;
        old_fd = file_create_open_old(path, &target, &st, &old_claim, errp);
        if (old_fd < 0) {
            return NULL;
        }
    } else if (errno != ENOENT) {
        error_setg_errno(errp, errno, "Could not create '%s'", path);
        return NULL;
    }
    dir = g_path_get_dirname(target);
    if (file_create_tmpfile_wanted()) {
        fd = file_create_open_unnamed(dir);
        if (fd < 0 && errno != EOPNOTSUPP) {
            error_setg_errno(errp, errno, "Could not create '%s'", path);
            goto fail;
        }
    }
    if (fd < 0) {
        fd = file_create_open_temp(target, &temp_path);
        if (fd < 0) {
            error_setg_errno(errp, errno, "Could not create '%s'", path);
            goto fail;
        }
    }
    if (old_fd >= 0) {
        /*
         * qemu-img writes the old inode, which keeps its mode and owner:
         * so does the new one, where this process may set them.
         */
        if (fchmod(fd, st.st_mode & 07777) < 0 && errno != EPERM) {
            error_setg_errno(errp, errno, "Could not create '%s'", path);
            close(fd);
            if (temp_path) {
                unlink(temp_path);
            }
            goto fail;
        }
        if (geteuid() == 0 && fchown(fd, st.st_uid, st.st_gid) < 0) {
            /* Not every file system has owners (vfat): keep ours. */
        }
    }
    fc = g_new0(FileCreate, 1);
    fc->refcount = 1;
    fc->fd = fd;
    fc->path = g_steal_pointer(&target);
    fc->temp_path = g_steal_pointer(&temp_path);
    fc->old_fd = old_fd;
    fc->old_claim = old_claim;
    return fc;

fail:
    if (old_fd >= 0) {
        file_lock_unclaim(old_claim);
        close(old_fd);
    }
    return NULL;
}

/* Let go of the file the new one replaced (or would have). */
static void file_create_release_old(FileCreate *fc)
{
    if (fc->old_fd >= 0) {
        file_lock_unclaim(g_steal_pointer(&fc->old_claim));
        close(fc->old_fd);
        fc->old_fd = -1;
    }
}

FileCreate *file_create_ref(FileCreate *fc)
{
    g_atomic_int_inc(&fc->refcount);
    return fc;
}

void file_create_unref(FileCreate *fc)
{
    if (!fc || !g_atomic_int_dec_and_test(&fc->refcount)) {
        return;
    }
    /* An O_TMPFILE file vanishes with its last descriptor. */
    if (!fc->committed && fc->temp_path) {
        unlink(fc->temp_path);
    }
    file_create_release_old(fc);
    close(fc->fd);
    g_free(fc->path);
    g_free(fc->temp_path);
    g_free(fc);
}

int file_create_fd(FileCreate *fc)
{
    return fc->fd;
}

const char *file_create_path(FileCreate *fc)
{
    return fc->path;
}

const char *file_create_temp_path(FileCreate *fc)
{
    return fc->temp_path;
}

bool file_create_is_committed(FileCreate *fc)
{
    return fc->committed;
}

void file_create_set_sync(FileCreate *fc, bool sync)
{
    fc->no_sync = !sync;
}

void file_create_wrote(FileCreate *fc, uint64_t bytes)
{
    gsize before = g_atomic_pointer_add(&fc->written, (gssize)bytes);

    if (!fc->no_sync &&
        before / FILE_CREATE_WRITEBACK_STEP !=
        (before + bytes) / FILE_CREATE_WRITEBACK_STEP) {
        /*
         * Start (not wait for) the write-back of the whole file's dirty
         * pages: writes come out of order from several threads, and pages
         * already on their way are skipped. A no-op on tmpfs.
         */
        sync_file_range(fc->fd, 0, 0, SYNC_FILE_RANGE_WRITE);
    }
}

/*
 * Give the new file the name of the one it replaces: rename(2) swaps the
 * two atomically. An unnamed file gets a hidden name for the rename (a
 * kill in between leaves that name behind, never a partial target).
 */
static int file_create_replace(FileCreate *fc)
{
    g_autofree char *proc = NULL;
    int err;

    if (fc->temp_path) {
        return rename(fc->temp_path, fc->path);
    }
    proc = g_strdup_printf("/proc/self/fd/%d", fc->fd);
    for (int tries = 0; tries < 100; tries++) {
        g_autofree char *name = file_create_temp_name(fc->path);

        if (linkat(AT_FDCWD, proc, AT_FDCWD, name, AT_SYMLINK_FOLLOW) < 0) {
            if (errno == EEXIST) {
                continue;
            }
            return -1;
        }
        if (rename(name, fc->path) == 0) {
            return 0;
        }
        err = errno;
        unlink(name);
        errno = err;
        return -1;
    }
    errno = EEXIST;
    return -1;
}

/* Give the unnamed or temporarily named file its name, never replacing. */
static int file_create_link(FileCreate *fc)
{
    if (fc->old_fd >= 0) {
        return file_create_replace(fc);
    }
    g_autofree char *proc = NULL;
    int err;

    if (fc->temp_path) {
        if (renameat2(AT_FDCWD, fc->temp_path, AT_FDCWD, fc->path,
                      RENAME_NOREPLACE) == 0) {
            return 0;
        }
        if (errno != EINVAL && errno != ENOSYS) {
            return -1;
        }
        /* No RENAME_NOREPLACE here: link() does not replace either. */
        if (link(fc->temp_path, fc->path) < 0) {
            return -1;
        }
        unlink(fc->temp_path);
        return 0;
    }
    proc = g_strdup_printf("/proc/self/fd/%d", fc->fd);
    if (linkat(AT_FDCWD, proc, AT_FDCWD, fc->path, AT_SYMLINK_FOLLOW) == 0) {
        return 0;
    }
    err = errno;
    if (err != EEXIST &&
        linkat(fc->fd, "", AT_FDCWD, fc->path, AT_EMPTY_PATH) == 0) {
        return 0;
    }
    errno = err;
    return -1;
}

/*
 * Make the new directory entry durable. A directory that cannot be opened
 * or synced at all (EINVAL: no fsync on this file system) is skipped; a
 * failed sync is an error: the name may not survive a crash.
 */
static int file_create_sync_dir(const char *path, Error **errp)
{
    g_autofree char *dir = g_path_get_dirname(path);
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int ret = 0;

    if (fd < 0) {
        return 0;
    }
    if (fsync(fd) < 0 && errno != EINVAL && errno != EROFS) {
        error_setg_errno(errp, errno, "Could not flush the directory of '%s'",
                         path);
        ret = -1;
    }
    close(fd);
    return ret;
}

int file_create_commit(FileCreate *fc, Error **errp)
{
    if (fc->committed) {
        return 0;
    }
    /*
     * Data first, then the name: after a crash the name shows the whole
     * image or nothing (linkat does not order the two by itself).
     */
    if (!fc->no_sync && fdatasync(fc->fd) < 0) {
        error_setg_errno(errp, errno, "Could not flush '%s'", fc->path);
        return -1;
    }
    if (file_create_link(fc) < 0) {
        error_setg_errno(errp, errno, "Could not create '%s'", fc->path);
        return -1;
    }
    fc->committed = true;
    file_create_release_old(fc);
    /* Named: a failure from here on leaves the new image, complete. */
    if (!fc->no_sync && file_create_sync_dir(fc->path, errp) < 0) {
        return -1;
    }
    return 0;
}
