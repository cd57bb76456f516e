/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Image locking, as QEMU's file-posix does it, so that QEMU's tools and
 * ours see each other's locks.
 *
 * Every permission of QEMU's block layer has two lock bytes in the image
 * file: byte 100 + i is read-locked by each open that holds permission i,
 * byte 200 + i by each open that does not let others have it. All locks
 * are shared (read) locks, so any number of opens can take them; a
 * conflict is found by asking whether an exclusive (write) lock could be
 * placed on a byte, which is refused exactly when another open holds a
 * lock there. An open that needs permission i tests byte 200 + i (does
 * anyone refuse it?); one that does not share i tests byte 100 + i (does
 * anyone hold it?).
 *
 * The locks are taken first and tested after, as QEMU does: of two opens
 * that race, at least the later one to test sees the other's locks, so
 * two conflicting opens never both succeed (both may fail).
 *
 * The locks are open file description locks (F_OFD_SETLK): they belong to
 * the open file, so two opens in one process conflict like two processes,
 * and closing another descriptor of the file does not drop them. A kernel
 * without them (before Linux 3.15) gets process-wide POSIX locks
 * (F_SETLK): they still exclude other processes; the table of open files
 * below covers conflicts inside this process either way.
 */
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include "file-lock.h"

/* The lock bytes (QEMU's RAW_LOCK_PERM_BASE and RAW_LOCK_SHARED_BASE). */
#define FILE_LOCK_PERM_BASE   100
#define FILE_LOCK_SHARED_BASE 200
/*
 * Bit 4 (BLK_PERM_GRAPH_MOD, bytes 104 and 204) was dropped in QEMU 6.1:
 * 7.2 neither takes nor tests it, and neither do we.
 */
#define FILE_PERM_COUNT 4

/* QEMU's names, which its messages use (bdrv_perm_names). */
static const char *const file_perm_names[FILE_PERM_COUNT] = {
    "consistent read", "write", "write unchanged", "resize",
};

/* Whether the kernel has OFD locks: 0 not known yet, 1 yes, -1 no. */
static int file_lock_ofd_state;

/*
 * fcntl() with the OFD command, or the POSIX one where OFD locks are
 * missing (the kernel then refuses the command with EINVAL).
 */
static int file_lock_fcntl(int fd, int ofd_cmd, int posix_cmd,
                           struct flock *fl)
{
    if (g_atomic_int_get(&file_lock_ofd_state) >= 0) {
        int ret = fcntl(fd, ofd_cmd, fl);

        if (ret == 0 || errno != EINVAL) {
            g_atomic_int_set(&file_lock_ofd_state, 1);
            return ret;
        }
        if (g_atomic_int_get(&file_lock_ofd_state) == 1) {
            return ret;     /* a real EINVAL, not a missing command */
        }
        g_atomic_int_set(&file_lock_ofd_state, -1);
    }
    fl->l_pid = 0;
    return fcntl(fd, posix_cmd, fl);
}

void file_lock_use_posix_locks(void)
{
    g_atomic_int_set(&file_lock_ofd_state, -1);
}

static int file_lock_byte(int fd, int offset, Error **errp)
{
    struct flock fl = {
        .l_type = F_RDLCK, .l_whence = SEEK_SET, .l_start = offset,
        .l_len = 1,
    };

    if (file_lock_fcntl(fd, F_OFD_SETLK, F_SETLK, &fl) < 0) {
        error_setg_errno(errp, errno, "Failed to lock byte %d", offset);
        return -1;
    }
    return 0;
}

/* 1 if another open holds a lock on the byte, 0 if not, -1 on error. */
static int file_lock_byte_is_held(int fd, int offset, Error **errp)
{
    struct flock fl = {
        .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = offset,
        .l_len = 1,
    };

    if (file_lock_fcntl(fd, F_OFD_GETLK, F_GETLK, &fl) < 0) {
        error_setg_errno(errp, errno, "Failed to check byte %d lock",
                         offset);
        return -1;
    }
    return fl.l_type != F_UNLCK;
}

static int file_lock_apply(int fd, uint64_t perm, uint64_t shared,
                           Error **errp)
{
    for (int i = 0; i < FILE_PERM_COUNT; i++) {
        if ((perm & (1u << i)) &&
            file_lock_byte(fd, FILE_LOCK_PERM_BASE + i, errp) < 0) {
            return -1;
        }
        if (!(shared & (1u << i)) &&
            file_lock_byte(fd, FILE_LOCK_SHARED_BASE + i, errp) < 0) {
            return -1;
        }
    }
    return 0;
}

static int file_lock_check(int fd, const char *filename, uint64_t perm,
                           uint64_t shared, Error **errp)
{
    int held;

    /* As QEMU: first what we need, then what we do not share. */
    for (int i = 0; i < FILE_PERM_COUNT; i++) {
        if (!(perm & (1u << i))) {
            continue;
        }
        held = file_lock_byte_is_held(fd, FILE_LOCK_SHARED_BASE + i, errp);
        if (held) {
            if (held > 0) {
                error_setg(errp, "Failed to get \"%s\" lock\nIs another "
                           "process using the image [%s]?",
                           file_perm_names[i], filename);
            }
            return -1;
        }
    }
    for (int i = 0; i < FILE_PERM_COUNT; i++) {
        if (shared & (1u << i)) {
            continue;
        }
        held = file_lock_byte_is_held(fd, FILE_LOCK_PERM_BASE + i, errp);
        if (held) {
            if (held > 0) {
                error_setg(errp, "Failed to get shared \"%s\" lock\nIs "
                           "another process using the image [%s]?",
                           file_perm_names[i], filename);
            }
            return -1;
        }
    }
    return 0;
}

int file_lock_acquire(int fd, const char *filename, uint64_t perm,
                      uint64_t shared, Error **errp)
{
    /* Nothing to undo on failure: the caller closes fd, which unlocks. */
    if (file_lock_apply(fd, perm, shared, errp) < 0) {
        return -1;
    }
    return file_lock_check(fd, filename, perm, shared, errp);
}

/* ---- The files this process holds open */

struct FileLockClaim {
    /* st_rdev for a device node: two nodes of one disk are one file. */
    dev_t dev;
    ino_t ino;
    bool is_device;
    bool write;
    char *filename;
};

static GMutex file_lock_claims_mutex;
static GPtrArray *file_lock_claims;

static void file_lock_claim_identify(FileLockClaim *c, const struct stat *st)
{
    c->is_device = S_ISBLK(st->st_mode) || S_ISCHR(st->st_mode);
    c->dev = c->is_device ? st->st_rdev : st->st_dev;
    c->ino = c->is_device ? 0 : st->st_ino;
}

static FileLockClaim *file_lock_find_claim(const FileLockClaim *c)
{
    for (guint i = 0; file_lock_claims && i < file_lock_claims->len; i++) {
        FileLockClaim *o = g_ptr_array_index(file_lock_claims, i);

        if (o->is_device == c->is_device && o->dev == c->dev &&
            o->ino == c->ino && (o->write || c->write)) {
            return o;
        }
    }
    return NULL;
}

FileLockClaim *file_lock_claim(const struct stat *st, const char *filename,
                               bool write, Error **errp)
{
    g_autoptr(GMutexLocker) locker =
        g_mutex_locker_new(&file_lock_claims_mutex);
    FileLockClaim *c = g_new0(FileLockClaim, 1);
    FileLockClaim *other;

    file_lock_claim_identify(c, st);
    c->write = write;
    /* Character devices (/dev/null, a tty) are streams, not images. */
    other = S_ISCHR(st->st_mode) ? NULL : file_lock_find_claim(c);
    if (other) {
        if (write) {
            error_setg(errp, "Cannot write '%s': it is the same file as "
                       "'%s', which this command also uses (an image "
                       "cannot be converted onto itself)",
                       filename, other->filename);
        } else {
            error_setg(errp, "Cannot read '%s': it is the same file as "
                       "'%s', which this command writes",
                       filename, other->filename);
        }
        g_free(c);
        return NULL;
    }
    c->filename = g_strdup(filename);
    if (!file_lock_claims) {
        file_lock_claims = g_ptr_array_new();
    }
    g_ptr_array_add(file_lock_claims, c);
    return c;
}

void file_lock_unclaim(FileLockClaim *claim)
{
    g_autoptr(GMutexLocker) locker =
        g_mutex_locker_new(&file_lock_claims_mutex);

    if (!claim) {
        return;
    }
    g_ptr_array_remove(file_lock_claims, claim);
    if (!file_lock_claims->len) {
        g_clear_pointer(&file_lock_claims, g_ptr_array_unref);
    }
    g_free(claim->filename);
    g_free(claim);
}
