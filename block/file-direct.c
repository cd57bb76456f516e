/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * O_DIRECT reads and writes of any offset, length and buffer (see
 * file-direct.h). Aligned requests, the bulk of a convert whose buffers are
 * aligned, go to the file as they are; only the unaligned edges of the
 * others take the bounce buffer.
 */
#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <glib.h>

#include "file-direct.h"

/* The bounce buffer: the most one unaligned piece moves at once. */
#define FILE_DIRECT_BOUNCE (1024 * 1024)

#define DIRECT_MASK ((uint64_t)FILE_DIRECT_ALIGN - 1)

bool file_direct_aligned(const void *buf, uint64_t offset, size_t bytes)
{
    return !(((uintptr_t)buf | offset | bytes) & DIRECT_MASK);
}

static uint8_t *file_direct_bounce_new(void)
{
    return g_aligned_alloc(1, FILE_DIRECT_BOUNCE, FILE_DIRECT_ALIGN);
}

/*
 * Read [offset, offset + bytes), all aligned; the count read, short only
 * at the end of the file (a read there returns what is left, which may
 * end mid-block). -1 with errp set on error.
 */
static ssize_t file_direct_read_span(int fd, const char *filename,
                                     uint64_t offset, uint8_t *p,
                                     size_t bytes, Error **errp)
{
    size_t done = 0;

    while (done < bytes) {
        ssize_t n = pread(fd, p + done, bytes - done, offset + done);

        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            error_setg_errno(errp, errno, "Could not read '%s' at offset %"
                             G_GUINT64_FORMAT, filename, offset + done);
            return -1;
        }
        done += n;
        if (n == 0 || (n & DIRECT_MASK)) {
            break;      /* the end of the file */
        }
    }
    return done;
}

static int file_direct_write_span(int fd, const char *filename,
                                  uint64_t offset, const uint8_t *p,
                                  size_t bytes, Error **errp)
{
    while (bytes) {
        ssize_t n = pwrite(fd, p, bytes, offset);

        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            error_setg_errno(errp, errno, "Could not write '%s' at offset %"
                             G_GUINT64_FORMAT, filename, offset);
            return -1;
        }
        if (n & DIRECT_MASK) {
            /* A short write must end on a block to go on with O_DIRECT. */
            error_setg(errp, "Could not write '%s' at offset %"
                       G_GUINT64_FORMAT ": short write of %zd bytes",
                       filename, offset, n);
            return -1;
        }
        p += n;
        offset += n;
        bytes -= n;
    }
    return 0;
}

/* The aligned span around [offset, offset + bytes), at most the bounce. */
static void file_direct_piece(uint64_t offset, size_t bytes, uint64_t *start,
                              size_t *skip, size_t *span, size_t *n)
{
    *start = offset & ~DIRECT_MASK;
    *skip = offset - *start;
    *span = MIN((*skip + bytes + DIRECT_MASK) & ~DIRECT_MASK,
                FILE_DIRECT_BOUNCE);
    *n = MIN(bytes, *span - *skip);
}

int file_direct_pread(int fd, const char *filename, uint64_t offset,
                      void *buf, size_t bytes, Error **errp)
{
    uint8_t *out = buf, *bounce = NULL;
    int ret = -1;

    while (bytes) {
        uint64_t start;
        size_t skip, span, n;
        ssize_t got;

        if (file_direct_aligned(out, offset, bytes)) {
            got = file_direct_read_span(fd, filename, offset, out, bytes,
                                        errp);
            if (got < 0) {
                goto out;
            }
            memset(out + got, 0, bytes - got);  /* past the end: zeroes */
            break;
        }
        if (!bounce) {
            bounce = file_direct_bounce_new();
        }
        file_direct_piece(offset, bytes, &start, &skip, &span, &n);
        got = file_direct_read_span(fd, filename, start, bounce, span, errp);
        if (got < 0) {
            goto out;
        }
        memset(bounce + got, 0, span - got);
        memcpy(out, bounce + skip, n);
        out += n;
        offset += n;
        bytes -= n;
    }
    ret = 0;
out:
    g_aligned_free(bounce);
    return ret;
}

int file_direct_pwrite(int fd, const char *filename, uint64_t offset,
                       const void *buf, size_t bytes, Error **errp)
{
    const uint8_t *in = buf;
    uint8_t *bounce = NULL;
    int ret = -1;

    while (bytes) {
        uint64_t start, size_before = UINT64_MAX;
        size_t skip, span, n;
        bool tail_partial;

        if (file_direct_aligned(in, offset, bytes)) {
            ret = file_direct_write_span(fd, filename, offset, in, bytes,
                                         errp);
            goto out;
        }
        if (!bounce) {
            bounce = file_direct_bounce_new();
        }
        file_direct_piece(offset, bytes, &start, &skip, &span, &n);
        tail_partial = skip + n < span;
        if (skip || tail_partial) {
            /* Read-modify-write: keep the rest of the edge blocks. */
            struct stat st;
            ssize_t got;

            if (tail_partial && fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
                size_before = st.st_size;
            }
            got = file_direct_read_span(fd, filename, start, bounce, span,
                                        errp);
            if (got < 0) {
                goto out;
            }
            memset(bounce + got, 0, span - got);
        }
        memcpy(bounce + skip, in, n);
        if (file_direct_write_span(fd, filename, start, bounce, span,
                                   errp) < 0) {
            goto out;
        }
        /* The whole last block went out: cut what it added past the end. */
        if (size_before < start + span &&
            ftruncate(fd, MAX(size_before, offset + n)) < 0) {
            error_setg_errno(errp, errno, "Could not resize '%s'", filename);
            goto out;
        }
        in += n;
        offset += n;
        bytes -= n;
    }
    ret = 0;
out:
    g_aligned_free(bounce);
    return ret;
}
