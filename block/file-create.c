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
 * Either way the target's name never shows a partial file, and nothing
 * already under that name is ever replaced.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "block/block.h"
#include "file-create.h"

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

/* A new file under a free temporary name next to path. */
static int file_create_open_temp(const char *path, char **temp_path)
{
    static const char chars[] =
        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    g_autofree char *dir = g_path_get_dirname(path);
    g_autofree char *base = g_path_get_basename(path);

    for (int tries = 0; tries < 100; tries++) {
        char suffix[7];
        g_autofree char *name = NULL;
        int fd;

        for (size_t i = 0; i < sizeof(suffix) - 1; i++) {
            suffix[i] = chars[g_random_int_range(0, sizeof(chars) - 1)];
        }
        suffix[sizeof(suffix) - 1] = '\0';
        name = g_strdup_printf("%s/.%s.%s", dir, base, suffix);
        /* open(O_CREAT) applies the umask, as for any new image. */
        fd = open(name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
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

FileCreate *file_create_new(const char *path, Error **errp)
{
    g_autofree char *dir = g_path_get_dirname(path);
    g_autofree char *temp_path = NULL;
    FileCreate *fc;
    struct stat st;
    int fd = -1;

    /*
     * What open(O_CREAT | O_EXCL) refused before: a name in use (a
     * dangling symlink included). The link in commit checks it again.
     */
    if (lstat(path, &st) == 0) {
        error_setg_errno(errp, EEXIST, "Could not create '%s'", path);
        return NULL;
    }
    if (errno != ENOENT) {
        error_setg_errno(errp, errno, "Could not create '%s'", path);
        return NULL;
    }
    if (file_create_tmpfile_wanted()) {
        fd = file_create_open_unnamed(dir);
        if (fd < 0 && errno != EOPNOTSUPP) {
            error_setg_errno(errp, errno, "Could not create '%s'", path);
            return NULL;
        }
    }
    if (fd < 0) {
        fd = file_create_open_temp(path, &temp_path);
        if (fd < 0) {
            error_setg_errno(errp, errno, "Could not create '%s'", path);
            return NULL;
        }
    }
    fc = g_new0(FileCreate, 1);
    fc->refcount = 1;
    fc->fd = fd;
    fc->path = g_strdup(path);
    fc->temp_path = g_steal_pointer(&temp_path);
    return fc;
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

/* Give the unnamed or temporarily named file its name, never replacing. */
static int file_create_link(FileCreate *fc)
{
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

/* Make the new directory entry durable (ignored where not supported). */
static void file_create_sync_dir(const char *path)
{
    g_autofree char *dir = g_path_get_dirname(path);
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
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
    if (!fc->no_sync) {
        file_create_sync_dir(fc->path);
    }
    return 0;
}
