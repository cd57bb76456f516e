/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The fuzz input as a real file for the block layer's "file" driver: a
 * memfd (an in-memory file), named /proc/self/fd/N. Its size is at least
 * FUZZ_IMAGE_MAX_SIZE, so reads past the input return zeros as a sparse
 * file's tail does.
 */
#ifndef FUZZ_MEMFD_H
#define FUZZ_MEMFD_H

#include <errno.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fuzz-image.h"

static int fuzz_fd = -1;
static char fuzz_path[64];

/* Create the memfd once (name: what /proc shows); later calls do nothing. */
static void fuzz_memfd_setup(const char *name)
{
    if (fuzz_fd >= 0) {
        return;
    }
    fuzz_fd = memfd_create(name, MFD_CLOEXEC);
    if (fuzz_fd < 0) {
        fuzz_fail("memfd_create: %s", g_strerror(errno));
    }
    g_snprintf(fuzz_path, sizeof(fuzz_path), "/proc/self/fd/%d", fuzz_fd);
}

/* The memfd holds data (size bytes), then zeros. */
static void fuzz_set_file(const uint8_t *data, size_t size)
{
    if (ftruncate(fuzz_fd, 0) < 0 ||
        (size && pwrite(fuzz_fd, data, size, 0) != (ssize_t)size) ||
        ftruncate(fuzz_fd, MAX(size, FUZZ_IMAGE_MAX_SIZE)) < 0) {
        fuzz_fail("memfd: %s", g_strerror(errno));
    }
}

#endif
