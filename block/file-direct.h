/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * I/O on a file opened with O_DIRECT (QEMU's cache=none and directsync):
 * the kernel takes only requests whose offset, length and buffer are
 * multiples of the device's block size. These helpers take any request:
 * aligned ones go straight to the file, the rest through an aligned bounce
 * buffer (a write of a partial block reads the block first).
 */
#ifndef BLOCK_FILE_DIRECT_H
#define BLOCK_FILE_DIRECT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "qemu/error.h"

#include "block/block.h"

/* What the kernel is asked to take directly (see BDRV_DIRECT_ALIGN). */
#define FILE_DIRECT_ALIGN BDRV_DIRECT_ALIGN

/* Whether the kernel takes the request as it is (no bounce, no RMW). */
bool file_direct_aligned(const void *buf, uint64_t offset, size_t bytes);

/* Read bytes at offset into buf; what lies past the end reads as zeroes. */
int file_direct_pread(int fd, const char *filename, uint64_t offset,
                      void *buf, size_t bytes, Error **errp);

/*
 * Write bytes at offset from buf. A partial block is read, patched and
 * written whole; where that would extend the file past offset + bytes, the
 * file is cut back to it (never below its previous size).
 */
int file_direct_pwrite(int fd, const char *filename, uint64_t offset,
                       const void *buf, size_t bytes, Error **errp);

#endif
