/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * An LD_PRELOAD shim for the storage-fault sweeps (test_fault_sweep.py):
 * it fails the N-th write or the N-th sync the program makes to a file
 * under one directory, as a full or failing disk would, where blkdebug
 * cannot reach (a file being created, the kernel's write-back seen as a
 * failed fdatasync).
 *
 *   QIL_FAULT_DIR    only files whose path starts with it count
 *   QIL_FAULT_OP     "write" (pwrite, pwritev, write, fallocate, ftruncate,
 *                    copy_file_range into such a file) or "sync" (fsync,
 *                    fdatasync, sync_file_range, syncfs)
 *   QIL_FAULT_N      the call to fail, counting from 1 (0: none, count only)
 *   QIL_FAULT_ERRNO  the error, a number (default EIO)
 *   QIL_FAULT_ONCE   "1": only that call fails; otherwise every later call
 *                    of the kind fails too (a disk that stays full or dead)
 *   QIL_FAULT_REPORT a file that gets "writes W syncs S fired F" at exit
 *   QIL_FAULT_BACKTRACE "1": the failed call's stack on stderr (debugging)
 *
 * The N-th call returns -1 with the errno and does nothing; stderr gets
 * "fault-shim: write N failed" so a test can tell the fault happened.
 * Test-only code: it is never linked into the tool.
 */
/* Both pwrite and pwrite64 are defined below: without the redirection of
 * the 64-bit file API, each name is its own symbol. */
#undef _FILE_OFFSET_BITS
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <execinfo.h>
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

enum { OP_WRITE, OP_SYNC };

static const char *fault_dir;
static int fault_op = -1;
static long fault_n;
static int fault_errno = EIO;
static int fault_once;
static atomic_long counts[2];
static atomic_long fired;

__attribute__((constructor)) static void shim_init(void)
{
    const char *op = getenv("QIL_FAULT_OP");
    const char *s;

    fault_dir = getenv("QIL_FAULT_DIR");
    if (op && !strcmp(op, "write")) {
        fault_op = OP_WRITE;
    } else if (op && !strcmp(op, "sync")) {
        fault_op = OP_SYNC;
    }
    s = getenv("QIL_FAULT_N");
    fault_n = s ? atol(s) : 0;
    s = getenv("QIL_FAULT_ERRNO");
    if (s && atoi(s) > 0) {
        fault_errno = atoi(s);
    }
    s = getenv("QIL_FAULT_ONCE");
    fault_once = s && !strcmp(s, "1");
}

__attribute__((destructor)) static void shim_report(void)
{
    const char *path = getenv("QIL_FAULT_REPORT");
    FILE *f;

    if (!path || !(f = fopen(path, "w"))) {
        return;
    }
    fprintf(f, "writes %ld syncs %ld fired %ld\n", atomic_load(&counts[0]),
            atomic_load(&counts[1]), atomic_load(&fired));
    fclose(f);
}

/* Whether fd is a file under QIL_FAULT_DIR (an O_TMPFILE file there reads
 * as "DIR/#123 (deleted)": it counts too). */
static int watched(int fd)
{
    char link[64], path[4096];
    ssize_t n;

    if (!fault_dir || !*fault_dir) {
        return 0;
    }
    snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
    n = readlink(link, path, sizeof(path) - 1);
    if (n < 0) {
        return 0;
    }
    path[n] = '\0';
    return !strncmp(path, fault_dir, strlen(fault_dir));
}

/* Counts a call of kind op on fd; non-zero if it is to fail. */
static int shim_fails(int fd, int op)
{
    long n;

    if (!watched(fd)) {
        return 0;
    }
    n = atomic_fetch_add(&counts[op], 1) + 1;
    if (op != fault_op || fault_n <= 0 || n < fault_n ||
        (fault_once && n != fault_n)) {
        return 0;
    }
    atomic_fetch_add(&fired, 1);
    if (n == fault_n) {
        char msg[80];
        int len = snprintf(msg, sizeof(msg), "fault-shim: %s %ld failed\n",
                           op == OP_WRITE ? "write" : "sync", n);
        ssize_t ignored = write(2, msg, len);
        (void)ignored;
        if (getenv("QIL_FAULT_BACKTRACE")) {
            void *frames[32];
            backtrace_symbols_fd(frames, backtrace(frames, 32), 2);
        }
    }
    errno = fault_errno;
    return 1;
}

#define NEXT(name) \
    static __typeof__(name) *next_##name; \
    if (!next_##name) { \
        next_##name = (__typeof__(name) *)dlsym(RTLD_NEXT, #name); \
    }

ssize_t pwrite(int fd, const void *buf, size_t count, off_t offset)
{
    NEXT(pwrite);
    return shim_fails(fd, OP_WRITE) ? -1 :
        next_pwrite(fd, buf, count, offset);
}

ssize_t pwrite64(int fd, const void *buf, size_t count, off_t offset)
{
    NEXT(pwrite64);
    return shim_fails(fd, OP_WRITE) ? -1 :
        next_pwrite64(fd, buf, count, offset);
}

ssize_t pwritev(int fd, const struct iovec *iov, int iovcnt, off_t offset)
{
    NEXT(pwritev);
    return shim_fails(fd, OP_WRITE) ? -1 :
        next_pwritev(fd, iov, iovcnt, offset);
}

ssize_t pwritev64(int fd, const struct iovec *iov, int iovcnt, off_t offset)
{
    NEXT(pwritev64);
    return shim_fails(fd, OP_WRITE) ? -1 :
        next_pwritev64(fd, iov, iovcnt, offset);
}

ssize_t write(int fd, const void *buf, size_t count)
{
    NEXT(write);
    /* stderr and pipes are never under the directory: not counted. */
    return fd > 2 && shim_fails(fd, OP_WRITE) ? -1 :
        next_write(fd, buf, count);
}

int fallocate(int fd, int mode, off_t offset, off_t len)
{
    NEXT(fallocate);
    return shim_fails(fd, OP_WRITE) ? -1 :
        next_fallocate(fd, mode, offset, len);
}

int fallocate64(int fd, int mode, off_t offset, off_t len)
{
    NEXT(fallocate64);
    return shim_fails(fd, OP_WRITE) ? -1 :
        next_fallocate64(fd, mode, offset, len);
}

int ftruncate(int fd, off_t length)
{
    NEXT(ftruncate);
    return shim_fails(fd, OP_WRITE) ? -1 : next_ftruncate(fd, length);
}

int ftruncate64(int fd, off_t length)
{
    NEXT(ftruncate64);
    return shim_fails(fd, OP_WRITE) ? -1 : next_ftruncate64(fd, length);
}

ssize_t copy_file_range(int fd_in, off_t *off_in, int fd_out,
                        off_t *off_out, size_t len, unsigned int flags)
{
    NEXT(copy_file_range);
    return shim_fails(fd_out, OP_WRITE) ? -1 :
        next_copy_file_range(fd_in, off_in, fd_out, off_out, len, flags);
}

int fsync(int fd)
{
    NEXT(fsync);
    return shim_fails(fd, OP_SYNC) ? -1 : next_fsync(fd);
}

int fdatasync(int fd)
{
    NEXT(fdatasync);
    return shim_fails(fd, OP_SYNC) ? -1 : next_fdatasync(fd);
}

int sync_file_range(int fd, off_t offset, off_t nbytes, unsigned int flags)
{
    NEXT(sync_file_range);
    return shim_fails(fd, OP_SYNC) ? -1 :
        next_sync_file_range(fd, offset, nbytes, flags);
}

int syncfs(int fd)
{
    NEXT(syncfs);
    return shim_fails(fd, OP_SYNC) ? -1 : next_syncfs(fd);
}
