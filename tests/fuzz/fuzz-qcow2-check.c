/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Fuzz target: "check" of a qcow2 image through the block layer
 * (block/qcow2-check.c): the reference counts rebuilt from the L1/L2
 * tables, snapshots, bitmaps and refcount structures, and compared; then,
 * on a read-write open, the repair (-r all) and a second check of what it
 * left.
 *
 * The input is the image file, followed by zeros up to
 * FUZZ_IMAGE_MAX_SIZE, in a memfd opened through the ordinary "file"
 * driver, as in fuzz-qcow2-open.c (whose seeds this target shares, with
 * damaged images of its own: make-seeds-qcow2.sh). Backing files stay
 * closed, an external data file is the memfd itself, and encrypted images
 * open without their key (BDRV_O_NO_IO: a check reads no guest data).
 *
 * Two bounds keep an input's cost what a small image costs; past them the
 * input is skipped, not a bug:
 * - every L1 entry makes the check read an L2 table (twice), and every
 *   snapshot its own L1 table: at most FUZZ_L2_BUDGET bytes of tables
 *   (counted from the non-zero words of the input, each a possible L1
 *   entry, once per L1 table), FUZZ_MAX_SNAPSHOTS snapshots and
 *   FUZZ_MAX_BITMAPS bitmaps (the first bitmaps extension in the input);
 * - a repair grows the file to reach refcount blocks past its end, as
 *   qemu-img does: it runs only when every refcount table entry in the
 *   input points inside the memfd.
 *
 * Images with an external data file are checked, not repaired (the memfd
 * would be opened read-write twice).
 */
#include <unistd.h>

#include "block/qcow2.h"
#include "fuzz-image.h"
#include "fuzz-memfd.h"

#define FUZZ_L2_BUDGET (256ull * 1024 * 1024)
#define FUZZ_MAX_SNAPSHOTS 16
/* Each bitmap's table may be 1 MiB of entries, each read and walked. */
#define FUZZ_MAX_BITMAPS 16

/* qcow2 header fields the harness looks at (spec, "Header"). */
#define QCOW2_CLUSTER_BITS_OFFSET 20
#define QCOW2_REFTABLE_OFFSET 48
#define QCOW2_REFTABLE_CLUSTERS_OFFSET 56
#define QCOW2_NB_SNAPSHOTS_OFFSET 60
#define QCOW2_INCOMPAT_OFFSET 72
#define QCOW2_HEADER_LENGTH_OFFSET 100

/* Big-endian 64-bit field at off; bytes beyond the input read as 0. */
static uint64_t fuzz_get_be64(const uint8_t *data, size_t size, size_t off)
{
    uint64_t v = 0;

    for (size_t i = 0; i < 8; i++) {
        v = v << 8 | (off + i < size ? data[off + i] : 0);
    }
    return v;
}

/* The bitmap count of the bitmaps extension in the input, or 0. */
static uint32_t fuzz_nb_bitmaps(const uint8_t *data, size_t size)
{
    uint64_t off = fuzz_get_be32(data, size, QCOW2_HEADER_LENGTH_OFFSET);

    /* Only version 3 has extensions after header_length. */
    if (fuzz_get_be32(data, size, 4) != 3) {
        return 0;
    }
    while (off + 8 <= size) {
        uint32_t type = fuzz_get_be32(data, size, off);
        uint32_t len = fuzz_get_be32(data, size, off + 4);

        if (type == 0) {
            break;
        }
        if (type == QCOW2_EXT_BITMAPS) {
            return fuzz_get_be32(data, size, off + 8);
        }
        off += 8 + ROUND_UP((uint64_t)len, 8);
    }
    return 0;
}

/* Whether the tables the check would walk are cheap enough (see above). */
static bool fuzz_walk_bounded(const uint8_t *data, size_t size)
{
    uint32_t bits = fuzz_get_be32(data, size, QCOW2_CLUSTER_BITS_OFFSET);
    uint32_t nb_snapshots = fuzz_get_be32(data, size,
                                          QCOW2_NB_SNAPSHOTS_OFFSET);
    uint64_t words = 0;

    if (bits < QCOW2_MIN_CLUSTER_BITS || bits > QCOW2_MAX_CLUSTER_BITS) {
        return true;    /* refused at open */
    }
    if (nb_snapshots > FUZZ_MAX_SNAPSHOTS ||
        fuzz_nb_bitmaps(data, size) > FUZZ_MAX_BITMAPS) {
        return false;
    }
    for (size_t off = 0; off + 8 <= size; off += 8) {
        words += fuzz_get_be64(data, size, off) != 0;
    }
    return words * (nb_snapshots + 1) <= FUZZ_L2_BUDGET >> bits;
}

/* Whether every refcount block the header points at is in the memfd. */
static bool fuzz_refblocks_inside(const uint8_t *data, size_t size)
{
    uint32_t bits = fuzz_get_be32(data, size, QCOW2_CLUSTER_BITS_OFFSET);
    uint64_t table = fuzz_get_be64(data, size, QCOW2_REFTABLE_OFFSET);
    uint64_t clusters = fuzz_get_be32(data, size,
                                      QCOW2_REFTABLE_CLUSTERS_OFFSET);
    uint64_t bytes;

    if (bits < QCOW2_MIN_CLUSTER_BITS || bits > QCOW2_MAX_CLUSTER_BITS ||
        table >= size) {
        return true;    /* refused at open, or an all-zero table */
    }
    /* Entries past the input are 0; one may straddle its end. */
    bytes = MIN(clusters << bits, size - table);
    for (uint64_t i = 0; i < bytes; i += 8) {
        if (fuzz_get_be64(data, size, table + i) >= FUZZ_IMAGE_MAX_SIZE) {
            return false;
        }
    }
    return true;
}

/* A check that fails must have run into something; counts stay sane. */
static void fuzz_check(BlockDriverState *bs, BdrvCheckMode fix)
{
    BdrvCheckResult res = { 0 };
    int ret = bdrv_check(bs, &res, fix);

    if (ret > 0 || (ret < 0 && ret != -EIO && ret != -EINVAL &&
                    ret != -EFBIG && ret != -ENOMEM)) {
        fuzz_fail("check returned %d", ret);
    }
    if (res.corruptions < 0 || res.leaks < 0 || res.check_errors < 0 ||
        res.allocated_clusters < res.compressed_clusters ||
        res.allocated_clusters < 0 || res.image_end_offset < 0) {
        fuzz_fail("check counts: %" PRId64 " corruptions, %" PRId64
                  " leaks, %" PRId64 " errors", res.corruptions, res.leaks,
                  res.check_errors);
    }
}

/* Version 3 with the external data file bit. */
static bool fuzz_has_data_file(const uint8_t *data, size_t size)
{
    return fuzz_get_be32(data, size, 4) == 3 &&
        (fuzz_get_be32(data, size, QCOW2_INCOMPAT_OFFSET + 4) &
         QCOW2_INCOMPAT_DATA_FILE);
}

static BlockDriverState *fuzz_open(const uint8_t *data, size_t size,
                                   int flags)
{
    g_autoptr(GHashTable) opts = qemu_opts_new();
    g_autoptr(Error) err = NULL;
    BlockDriverState *bs;

    /* An external data file is the memfd itself. */
    if (fuzz_has_data_file(data, size)) {
        g_hash_table_insert(opts, g_strdup("data-file.filename"),
                            g_strdup(fuzz_path));
    }
    bs = bdrv_open(fuzz_path, "qcow2", opts,
                   flags | BDRV_O_CHECK | BDRV_O_NO_BACKING | BDRV_O_NO_IO,
                   &err);
    g_assert(!bs == !!err);
    fuzz_debug("open", err);
    return bs;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    BlockDriverState *bs;

    fuzz_init();
    fuzz_memfd_setup("fuzz-qcow2-check");
    if (!fuzz_walk_bounded(data, size)) {
        fuzz_debug("skipped: too many tables to walk", NULL);
        return -1;      /* not added to the corpus */
    }
    fuzz_set_file(data, size);

    bs = fuzz_open(data, size, 0);
    if (!bs) {
        return 0;
    }
    fuzz_check(bs, 0);
    bdrv_close(bs);

    /*
     * No repair with a data file: the memfd would be open read-write
     * twice, which the image locks rightly refuse.
     */
    if (!fuzz_refblocks_inside(data, size) || fuzz_has_data_file(data, size)) {
        return 0;
    }
    bs = fuzz_open(data, size, BDRV_O_RDWR);
    if (!bs) {
        fuzz_fail("a read-write open fails where the read-only one worked");
    }
    fuzz_check(bs, BDRV_FIX_LEAKS | BDRV_FIX_ERRORS);
    fuzz_check(bs, 0);
    bdrv_close(bs);
    return 0;
}
