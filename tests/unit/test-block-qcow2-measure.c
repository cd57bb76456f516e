/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * qcow2 size arithmetic (block/qcow2-measure.c) and the bitmap directory
 * (block/qcow2-bitmap.c):
 * - fully allocated sizes are the ones qemu-img 7.2 measures;
 * - the refcount metadata covers every cluster, itself included, and is
 *   the smallest that does;
 * - QEMU's L1 limit, at its boundary;
 * - a bitmap directory parses; truncated or absurd entries are refused;
 * - the bitmaps' size is qemu-img's "bitmaps size".
 * The whole command against qemu-img is tests/cli/test_measure_qcow2.py.
 */
#include <string.h>

#include "block/qcow2.h"
#include "block/qcow2-bitmap.h"
#include "block/qcow2-measure.h"
#include "test-error.h"

#define KiB 1024ull
#define MiB (1024 * KiB)
#define GiB (1024 * MiB)
#define TiB (1024 * GiB)

/* Figures printed by "qemu-img measure -O qcow2" (fully allocated). */
static void test_prealloc_size_as_qemu_img(void)
{
    static const struct {
        uint64_t size, cluster_size;
        unsigned refcount_order;
        bool extended_l2;
        uint64_t expected;
    } cases[] = {
        { GiB, 64 * KiB, 4, false, 1074135040 },
        { 0, 64 * KiB, 4, false, 196608 },
        { 1, 64 * KiB, 4, false, 393216 },
        { 1, 512, 4, false, 3072 },
        { 513, 512, 4, false, 3584 },
        { GiB, 2 * MiB, 6, false, 1084227584 },
        { GiB, 64 * KiB, 4, true, 1074266112 },
        { GiB, 16 * KiB, 4, true, 1074987008 },
        { 256 * TiB, 64 * KiB, 4, false, 281517933133824 },
    };

    for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_assert_cmpuint(qcow2_calc_prealloc_size(cases[i].size,
                                                  cases[i].cluster_size,
                                                  cases[i].refcount_order,
                                                  cases[i].extended_l2), ==,
                         cases[i].expected);
    }
}

/* Enough refcount blocks and table for everything, and no more. */
static void test_refcount_fixed_point(void)
{
    static const uint64_t clusters[] = { 0, 1, 4095, 4096, 32768, 1u << 20,
                                         123456789 };

    for (unsigned order = 0; order <= 6; order++) {
        for (uint64_t cs = 512; cs <= 2 * MiB; cs *= 4) {
            uint64_t per_block = cs * 8 >> order;

            for (size_t i = 0; i < G_N_ELEMENTS(clusters); i++) {
                uint64_t blocks, generous_blocks;
                uint64_t bytes = qcow2_refcount_metadata_size(
                    clusters[i], cs, order, false, &blocks);
                uint64_t table = bytes / cs - blocks;
                uint64_t total = clusters[i] + blocks + table;

                g_assert_cmpuint(bytes % cs, ==, 0);
                g_assert_cmpuint(blocks * per_block, >=, total);
                g_assert_cmpuint(table * (cs / 8), >=, blocks);
                /* One block fewer would not do. */
                if (blocks) {
                    g_assert_cmpuint((blocks - 1) * per_block, <, total);
                }
                g_assert_cmpuint(qcow2_refcount_metadata_size(
                                     clusters[i], cs, order, true,
                                     &generous_blocks), >=, bytes);
                g_assert_cmpuint(generous_blocks, >=, blocks);
            }
        }
    }
}

/* QEMU's 32 MiB L1 table: 4 Mi entries, each an L2 table's worth. */
static void test_l1_limit(void)
{
    uint64_t max64k = (4 * MiB) * (64 * KiB / 8) * (64 * KiB);

    g_assert_true(qcow2_size_fits_l1(max64k, 64 * KiB, false));
    g_assert_false(qcow2_size_fits_l1(max64k + 64 * KiB, 64 * KiB, false));
    g_assert_true(qcow2_size_fits_l1(max64k / 2, 64 * KiB, true));
    g_assert_false(qcow2_size_fits_l1(max64k / 2 + 64 * KiB, 64 * KiB,
                                      true));
    g_assert_false(qcow2_size_fits_l1(TiB, 512, false));
    g_assert_true(qcow2_size_fits_l1(0, 512, false));
}

/* One directory entry (spec, "Bitmap directory"), padded to 8 bytes. */
static size_t put_entry(uint8_t *p, uint32_t flags, uint8_t gran_bits,
                        const char *name, uint32_t extra)
{
    size_t name_len = strlen(name);
    size_t len = (24 + extra + name_len + 7) & ~(size_t)7;

    memset(p, 0, len);
    p[12] = flags >> 24;
    p[13] = flags >> 16;
    p[14] = flags >> 8;
    p[15] = flags;
    p[16] = 1;                              /* dirty tracking bitmap */
    p[17] = gran_bits;
    p[18] = name_len >> 8;
    p[19] = name_len;
    p[20] = extra >> 24;
    p[21] = extra >> 16;
    p[22] = extra >> 8;
    p[23] = extra;
    memcpy(p + 24 + extra, name, name_len);
    return len;
}

static void free_bitmaps(BlockImageInfoBitmap *b, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        g_free(b[i].name);
    }
    g_free(b);
}

static void test_bitmap_directory(void)
{
    uint8_t dir[256];
    size_t len = 0;
    BlockImageInfoBitmap *b = NULL;
    Error *err = NULL;

    len += put_entry(dir + len, 2, 16, "first", 0);
    len += put_entry(dir + len, 1, 9, "second-bitmap", 5);
    g_assert_cmpint(qcow2_bitmap_dir_parse(dir, len, 2, &b, &error_abort),
                    ==, 0);
    g_assert_cmpstr(b[0].name, ==, "first");
    g_assert_cmpuint(b[0].granularity, ==, 64 * KiB);
    g_assert_true(b[0].autoload && !b[0].in_use);
    g_assert_cmpstr(b[1].name, ==, "second-bitmap");
    g_assert_cmpuint(b[1].granularity, ==, 512);
    g_assert_true(!b[1].autoload && b[1].in_use);
    /* qemu-img measure's "bitmaps size" for these on a 100 MiB image. */
    g_assert_cmpuint(qcow2_bitmaps_size(b, 2, 100 * MiB, 64 * KiB), ==,
                     327680);
    free_bitmaps(b, 2);

    /* More entries than the directory holds. */
    g_assert_cmpint(qcow2_bitmap_dir_parse(dir, len, 3, &b, &err), ==, -1);
    test_error_expect(&err, "entries run past its end");
    /* An entry cut short. */
    g_assert_cmpint(qcow2_bitmap_dir_parse(dir, len - 8, 2, &b, &err), ==,
                    -1);
    test_error_expect(&err, "entries run past its end");
    /* A granularity QEMU does not allow, an empty name. */
    put_entry(dir, 0, 8, "x", 0);
    g_assert_cmpint(qcow2_bitmap_dir_parse(dir, 32, 1, &b, &err), ==, -1);
    test_error_expect(&err, "invalid entry");
    put_entry(dir, 0, 16, "", 0);
    g_assert_cmpint(qcow2_bitmap_dir_parse(dir, 24, 1, &b, &err), ==, -1);
    test_error_expect(&err, "invalid entry");
    /* Extra data that claims 4 GiB. */
    put_entry(dir, 0, 16, "x", 0);
    memset(dir + 20, 0xff, 4);
    g_assert_cmpint(qcow2_bitmap_dir_parse(dir, 32, 1, &b, &err), ==, -1);
    test_error_expect(&err, "entries run past its end");
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/qcow2-measure/prealloc-size-as-qemu-img",
                    test_prealloc_size_as_qemu_img);
    g_test_add_func("/qcow2-measure/refcount-fixed-point",
                    test_refcount_fixed_point);
    g_test_add_func("/qcow2-measure/l1-limit", test_l1_limit);
    g_test_add_func("/qcow2-measure/bitmap-directory", test_bitmap_directory);
    return g_test_run();
}
