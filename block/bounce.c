/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Reading a byte range through a driver that can only read whole sectors
 * (an encrypted format decrypts whole cipher sectors): the range is read
 * in aligned pieces into a bounce buffer of bounded size and the wanted
 * bytes are copied out.
 */
#include <string.h>

#include "block/block_int.h"

int bdrv_pread_aligned_pieces(BlockDriverState *bs, uint64_t offset,
                              void *buf, size_t bytes, size_t align,
                              BdrvAlignedRead read, Error **errp)
{
    g_autofree uint8_t *bounce = g_malloc(BDRV_BOUNCE_SIZE);
    uint8_t *out = buf;

    while (bytes) {
        BdrvPiece p = bdrv_piece(offset, bytes, align);

        if (read(bs, p.start, bounce, p.span, errp) < 0) {
            return -1;
        }
        memcpy(out, bounce + p.skip, p.n);
        out += p.n;
        offset += p.n;
        bytes -= p.n;
    }
    return 0;
}
