/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Image locking for the file protocol (block/file-lock.c), compatible with
 * QEMU's: qemu-img, qemu-io, QEMU itself and qemu-img-lite exclude each
 * other on the same image.
 *
 * Two mechanisms, both taken when a file node opens:
 *   - between processes, byte-range locks on the bytes QEMU uses for its
 *     block-layer permissions (what this open needs, what it lets others
 *     have);
 *   - inside this process, a table of the files its nodes hold open, by
 *     device and inode: a command that would write a file it also reads
 *     (converting an image onto itself, under another name or not) is
 *     refused before anything is written, even where locks do not work.
 */
#ifndef BLOCK_FILE_LOCK_H
#define BLOCK_FILE_LOCK_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#include "qemu/error.h"

/*
 * QEMU's block permissions (BLK_PERM_* in include/block/block-common.h of
 * QEMU 7.2): one bit each, and one lock byte each (see file-lock.c).
 */
enum {
    FILE_PERM_CONSISTENT_READ = 0x01,
    FILE_PERM_WRITE           = 0x02,
    FILE_PERM_WRITE_UNCHANGED = 0x04,
    FILE_PERM_RESIZE          = 0x08,
    FILE_PERM_ALL             = 0x0f,
};

/*
 * Take the locks of an open that needs perm and lets other processes have
 * shared, on fd (open for reading), then check that no other process holds
 * a permission this open does not share, nor refuses one it needs. On a
 * conflict, fails with QEMU's message ('Failed to get "write" lock',
 * 'Failed to get shared "write" lock', then "Is another process using the
 * image [filename]?"). The locks last until fd is closed.
 */
int file_lock_acquire(int fd, const char *filename, uint64_t perm,
                      uint64_t shared, Error **errp);

/*
 * For tests: use process-wide POSIX locks (F_SETLK) from now on, as on a
 * kernel without OFD locks.
 */
void file_lock_use_posix_locks(void);

/* One file held open by this process (see file_lock_claim). */
typedef struct FileLockClaim FileLockClaim;

/*
 * Record that this process opens the file st describes (for writing or
 * not), refusing a writer on a file it already has open, and a reader on
 * one it already writes. Returns the claim to drop when the file is
 * closed, or NULL with errp set.
 */
FileLockClaim *file_lock_claim(const struct stat *st, const char *filename,
                               bool write, Error **errp);
void file_lock_unclaim(FileLockClaim *claim);

#endif
