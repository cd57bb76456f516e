/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Fuzz target: the qcow2 header, its extensions and the tables it points
 * at, parsed from a buffer (the parsing functions of block/qcow2.h take
 * bytes, not nodes: no file, no block layer).
 *
 * The input is the start of an image. The header is parsed twice: with
 * the input's length as the file size (every table must lie inside it)
 * and with a large file size (the input a truncated image). A header that
 * passes must keep its promises (the L1 table maps the virtual size and
 * lies inside the file, so does the refcount table); then its extensions
 * are read, and the L1 table, the L2 tables and refcount blocks that lie
 * inside the input are decoded entry by entry, as the driver would, with
 * a bounded number of entries so that one input stays fast. A compressed
 * cluster whose data lies inside the input is decompressed (at most a
 * cluster of output).
 */
#include "block/qcow2.h"
#include "fuzz-image.h"

/* Entries decoded per input, over all tables: keeps an input quick. */
#define FUZZ_MAX_ENTRIES 65536
/* Compressed clusters decompressed per input (up to 2 MiB each). */
#define FUZZ_MAX_DECOMPRESS 2

typedef struct FuzzTables {
    const uint8_t *data;
    size_t size;
    const Qcow2Header *h;
    Qcow2Geometry g;
    unsigned budget;
    unsigned decompress;
} FuzzTables;

/* Whether a whole table of len bytes at offset lies inside the input. */
static bool fuzz_in_input(const FuzzTables *t, uint64_t offset, uint64_t len)
{
    return offset <= t->size && len <= t->size - offset;
}

static void fuzz_compressed(FuzzTables *t, uint64_t entry)
{
    uint64_t offset, len;
    g_autofree uint8_t *out = NULL;
    g_autoptr(Error) err = NULL;
    int ret;

    qcow2_compressed_extent(&t->g, entry, &offset, &len);
    /* Spec, "Compressed Clusters Descriptor": at most two clusters. */
    if (len == 0 || len > 2 * t->g.cluster_size) {
        fuzz_fail("compressed cluster of %" PRIu64 " bytes (clusters of %"
                  PRIu64 ")", len, t->g.cluster_size);
    }
    if (t->decompress >= FUZZ_MAX_DECOMPRESS ||
        !fuzz_in_input(t, offset, len)) {
        return;
    }
    t->decompress++;
    out = g_malloc(t->g.cluster_size);
    ret = qcow2_decompress(t->h->compression_type, t->data + offset, len,
                           out, t->g.cluster_size, &err);
    g_assert((ret < 0) == !!err);
}

/* Every entry (and subcluster) of the L2 table at l2_offset. */
static void fuzz_l2_table(FuzzTables *t, uint64_t l2_offset)
{
    const Qcow2Geometry *g = &t->g;
    unsigned subclusters = g->extended_l2 ? QCOW2_SUBCLUSTERS_PER_CLUSTER : 1;

    if (!fuzz_in_input(t, l2_offset, g->cluster_size)) {
        return;
    }
    for (uint64_t i = 0; i < g->l2_entries && t->budget; i++, t->budget--) {
        const uint8_t *e = t->data + l2_offset + i * g->l2_entry_size;
        uint64_t entry = ldq_be_p(e);
        uint64_t bitmap = g->extended_l2 ? ldq_be_p(e + 8) : 0;

        for (unsigned sc = 0; sc < subclusters; sc++) {
            Qcow2SubclusterType type;
            g_autoptr(Error) err = NULL;
            int ret = qcow2_l2_entry_type(g, entry, bitmap, sc, &type, &err);

            g_assert((ret < 0) == !!err);
            if (ret < 0) {
                break;
            }
            if (type == QCOW2_SC_COMPRESSED) {
                fuzz_compressed(t, entry);
                break;
            }
            if (type == QCOW2_SC_NORMAL &&
                (entry & QCOW2_OFFSET_MASK & (g->cluster_size - 1))) {
                fuzz_fail("an unaligned cluster passed as data: 0x%016"
                          PRIx64, entry);
            }
        }
    }
}

static void fuzz_l1_table(FuzzTables *t)
{
    uint64_t entries = qcow2_l1_entries_needed(&t->g, t->h->size);

    if (!fuzz_in_input(t, t->h->l1_table_offset, entries * 8)) {
        return;
    }
    for (uint64_t i = 0; i < entries && t->budget; i++, t->budget--) {
        uint64_t l1e = ldq_be_p(t->data + t->h->l1_table_offset + i * 8);
        uint64_t l2 = l1e & QCOW2_OFFSET_MASK;

        /* What qcow2-cluster.c refuses before reading a table. */
        if (l2 && !(l2 & (t->g.cluster_size - 1))) {
            fuzz_l2_table(t, l2);
        }
    }
}

static void fuzz_refcount_table(FuzzTables *t)
{
    uint64_t cs = t->g.cluster_size;
    uint64_t entries = (uint64_t)t->h->refcount_table_clusters * (cs / 8);
    uint64_t per_block = cs * 8 >> t->h->refcount_order;

    if (!fuzz_in_input(t, t->h->refcount_table_offset, entries * 8)) {
        return;
    }
    for (uint64_t i = 0; i < entries && t->budget; i++, t->budget--) {
        uint64_t block = ldq_be_p(t->data + t->h->refcount_table_offset +
                                       i * 8) & QCOW2_REFT_OFFSET_MASK;

        if (!block || (block & (cs - 1)) || !fuzz_in_input(t, block, cs)) {
            continue;
        }
        for (uint64_t j = 0; j < per_block && t->budget; j++, t->budget--) {
            uint64_t r = qcow2_refcount_block_entry(t->data + block, j,
                                                    t->h->refcount_order);

            if (t->h->refcount_order < 6 &&
                r >> (1u << t->h->refcount_order)) {
                fuzz_fail("refcount %" PRIu64 " wider than %u bits", r,
                          1u << t->h->refcount_order);
            }
        }
    }
}

/* What a header that parsed promises the rest of the driver. */
static void fuzz_check_header(const Qcow2Header *h, uint64_t file_size)
{
    Qcow2Geometry g;
    uint64_t l1_bytes, reft_bytes;

    qcow2_geometry_init(&g, h);
    if (h->cluster_bits < QCOW2_MIN_CLUSTER_BITS ||
        h->cluster_bits > QCOW2_MAX_CLUSTER_BITS ||
        h->refcount_order > 6 || h->crypt_method > QCOW2_CRYPT_LUKS ||
        h->compression_type > QCOW2_COMPRESSION_ZSTD) {
        fuzz_fail("header field out of range passed");
    }
    if (qcow2_l1_entries_needed(&g, h->size) > h->l1_size) {
        fuzz_fail("L1 table of %" PRIu32 " entries for %" PRIu64 " bytes",
                  h->l1_size, h->size);
    }
    l1_bytes = (uint64_t)h->l1_size * 8;
    reft_bytes = (uint64_t)h->refcount_table_clusters * g.cluster_size;
    if (l1_bytes > QCOW2_MAX_L1_BYTES ||
        (h->l1_size && (h->l1_table_offset > file_size ||
                        l1_bytes > file_size - h->l1_table_offset))) {
        fuzz_fail("L1 table outside the file passed");
    }
    if (!reft_bytes || reft_bytes > QCOW2_MAX_REFTABLE_BYTES ||
        h->refcount_table_offset > file_size ||
        reft_bytes > file_size - h->refcount_table_offset) {
        fuzz_fail("refcount table outside the file passed");
    }
}

static void fuzz_header(const uint8_t *data, size_t size, uint64_t file_size,
                        bool tables, const char *what)
{
    Qcow2Header h;
    Qcow2Extensions ext;
    g_autoptr(Error) err = NULL;
    FuzzTables t = { .data = data, .size = size, .h = &h,
                     .budget = FUZZ_MAX_ENTRIES };
    int ret;

    ret = qcow2_header_parse(data, size, file_size, &h, &err);
    g_assert((ret < 0) == !!err);
    fuzz_debug(what, err);
    if (ret < 0) {
        g_assert(error_get_pretty(err)[0]);
        return;
    }
    fuzz_check_header(&h, file_size);
    ret = qcow2_extensions_parse(&h, data, size, file_size, &ext, &err);
    g_assert((ret < 0) == !!err);
    fuzz_debug("extensions", err);
    if (ret < 0) {
        return;
    }
    if (ext.has_crypto_header &&
        (ext.crypto_header_offset > file_size ||
         ext.crypto_header_length > file_size - ext.crypto_header_offset)) {
        fuzz_fail("crypto header outside the file passed");
    }
    if (tables) {
        qcow2_geometry_init(&t.g, &h);
        fuzz_l1_table(&t);
        fuzz_refcount_table(&t);
    }
    qcow2_extensions_clear(&ext);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_init();
    qcow2_probe(data, MIN(size, BDRV_PROBE_BUF_SIZE), "fuzz");
    fuzz_header(data, size, size, false, "header, file size known");
    /* Tables here: a header passing above passes here too. */
    fuzz_header(data, size, FUZZ_IMAGE_MAX_SIZE, true,
                "header, truncated image");
    return 0;
}
