/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * qcow2 reference counts, read side (spec, "Host cluster management"):
 * refcount table -> refcount block -> an entry of 1 to 64 bits. Reads
 * only what one lookup needs (8 bytes of table, at most 8 of block), so
 * nothing is allocated from the header's table size; "check" can build
 * on it.
 */
#include "block/qcow2.h"

uint64_t qcow2_refcount_block_entry(const uint8_t *block, uint64_t index,
                                    unsigned order)
{
    unsigned bits = 1u << order;
    uint64_t v = 0;

    if (bits < 8) {
        /* Sub-byte widths: entry 0 in the least significant bits. */
        uint64_t bit = index * bits;

        return (block[bit / 8] >> (bit % 8)) & ((1u << bits) - 1);
    }
    for (unsigned i = 0; i < bits / 8; i++) {
        v = (v << 8) | block[index * (bits / 8) + i];
    }
    return v;
}

int qcow2_get_refcount(BlockDriverState *bs, uint64_t offset,
                       uint64_t *refcount, Error **errp)
{
    BDRVQcow2State *s = bs->opaque;
    const Qcow2Header *h = &s->header;
    unsigned order = h->refcount_order;
    uint64_t cluster = offset >> s->g.cluster_bits;
    /* Entries per refcount block: cluster_size * 8 / refcount_bits. */
    uint64_t per_block = (s->g.cluster_size * 8) >> order;
    uint64_t table_index = cluster / per_block;
    uint64_t block_index = cluster % per_block;
    uint64_t table_entries = (uint64_t)h->refcount_table_clusters *
                             (s->g.cluster_size / sizeof(uint64_t));
    uint8_t raw[8];
    uint64_t block, byte, skip;
    size_t n;

    *refcount = 0;
    if (table_index >= table_entries) {
        return 0;
    }
    if (bs->file->drv->bdrv_pread(bs->file, h->refcount_table_offset +
                                  table_index * 8, raw, 8, errp) < 0) {
        return -1;
    }
    block = ldq_be_p(raw) & QCOW2_REFT_OFFSET_MASK;
    if (!block) {
        return 0;
    }
    if ((block & (s->g.cluster_size - 1)) || block > s->file_size ||
        s->g.cluster_size > s->file_size - block) {
        error_setg(errp, "qcow2 image is corrupt: refcount block offset 0x%"
                   PRIx64 " is invalid", block);
        return -1;
    }
    /* The byte holding the entry, and the entry's index from there. */
    byte = (block_index << order) / 8;
    skip = order < 3 ? block_index % (8u >> order) : 0;
    n = order < 3 ? 1 : (1u << order) / 8;
    if (bs->file->drv->bdrv_pread(bs->file, block + byte, raw, n, errp) < 0) {
        return -1;
    }
    *refcount = qcow2_refcount_block_entry(raw, skip, order);
    return 0;
}
