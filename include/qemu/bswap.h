/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Loads and stores of big-endian integers at any address, for on-disk
 * formats (LUKS1's and LUKS2's headers, qcow2's). Little-endian ones
 * (ld*_le_p, st*_le_p) belong here too once something needs them.
 * Named as QEMU names them: ld/st, then the width (uw = 16 bits, l = 32,
 * q = 64), then the byte order, then _p for "pointer".
 *
 * memcpy() makes an unaligned access legal C; compilers turn it, with the
 * swap, into a single load or store and a bswap (or movbe).
 */
#ifndef QEMU_BSWAP_H
#define QEMU_BSWAP_H

#include <stdint.h>
#include <string.h>

#include <glib.h>

static inline uint16_t lduw_be_p(const void *p)
{
    uint16_t v;

    memcpy(&v, p, sizeof(v));
    return GUINT16_FROM_BE(v);
}

static inline uint32_t ldl_be_p(const void *p)
{
    uint32_t v;

    memcpy(&v, p, sizeof(v));
    return GUINT32_FROM_BE(v);
}

static inline uint64_t ldq_be_p(const void *p)
{
    uint64_t v;

    memcpy(&v, p, sizeof(v));
    return GUINT64_FROM_BE(v);
}

static inline void stw_be_p(void *p, uint16_t v)
{
    v = GUINT16_TO_BE(v);
    memcpy(p, &v, sizeof(v));
}

static inline void stl_be_p(void *p, uint32_t v)
{
    v = GUINT32_TO_BE(v);
    memcpy(p, &v, sizeof(v));
}

static inline void stq_be_p(void *p, uint64_t v)
{
    v = GUINT64_TO_BE(v);
    memcpy(p, &v, sizeof(v));
}

#endif
