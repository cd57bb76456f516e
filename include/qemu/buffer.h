/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Zero detection, one copy for the block layer and the tool (QEMU's
 * util/bufferiszero.c has a SIMD version; memcmp is already vectorised
 * by the C library, and this runs at memory speed).
 */
#ifndef QEMU_BUFFER_H
#define QEMU_BUFFER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

static inline bool buffer_is_zero(const void *buf, size_t len)
{
    const uint8_t *p = buf;

    /* memcmp against itself shifted by one byte: all bytes equal p[0]. */
    return len == 0 || (p[0] == 0 && memcmp(p, p + 1, len - 1) == 0);
}

#endif
