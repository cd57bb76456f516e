/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The qcow2 write path (block/qcow2-write.c, qcow2-refcount.c,
 * qcow2-create.c, qcow2-amend.c) through the block layer, against a
 * model: random writes of every alignment (partial sectors, partial
 * clusters, whole runs, zeroes) into new images of each layout, checked
 * by reading back after every write and after reopening; then the
 * refcounts of every cluster the image uses are 1 and nothing past
 * the end is counted (no leak, no cluster used without its count).
 *
 * Layouts: 64 KiB clusters, 512-byte clusters with 1-bit refcounts,
 * extended L2 (subclusters), version 2, lazy refcounts, LUKS (sector
 * read-modify-write with host-offset IVs), a raw backing file (copy on
 * write of partial clusters), and a grow by resize in the middle. The
 * interop matrix against qemu-img is tests/cli/interop_qcow2_write.py.
 */
#include <string.h>
#include <unistd.h>

#include <glib/gstdio.h>

#include "block/qcow2.h"
#include "crypto/secret.h"
#include "test-error.h"
#include "test-tmpdir.h"

#define IMG_SIZE (3 * 1024 * 1024 + 4096)

typedef struct Layout {
    const char *name;
    const char *opts;
    bool backing;
} Layout;

static const Layout layouts[] = {
    { "default", "" },
    { "512-rc1", "cluster_size=512,refcount_bits=1" },
    { "extl2", "extended_l2=on,cluster_size=32k" },
    { "v2", "compat=0.10,cluster_size=4k" },
    { "lazy", "lazy_refcounts=on,refcount_bits=64" },
    { "luks", "encrypt.format=luks,encrypt.key-secret=s0,"
      "encrypt.iter-time=10,cluster_size=16k" },
    { "luks-extl2", "encrypt.format=luks,encrypt.key-secret=s0,"
      "encrypt.iter-time=10,extended_l2=on" },
    { "backing", "backing_fmt=raw", true },
    { "backing-extl2", "backing_fmt=raw,extended_l2=on", true },
};

static BlockDriverState *open_image(const char *path, const char *opts)
{
    g_autofree char *s = g_strdup_printf(
        "driver=qcow2,file.filename=%s%s", path,
        strstr(opts, "encrypt") ? ",encrypt.key-secret=s0" : "");
    g_autoptr(GHashTable) o = qemu_opts_parse(s, NULL, NULL);
    BlockDriverState *bs = bdrv_open(NULL, NULL, o, BDRV_O_RDWR,
                                     &error_abort);
    g_assert_nonnull(bs);
    return bs;
}

static void check_model(BlockDriverState *bs, const uint8_t *model,
                        uint64_t size)
{
    g_autofree uint8_t *buf = g_malloc(size);

    g_assert_cmpint(bdrv_pread(bs, 0, buf, size, &error_abort), ==, 0);
    for (uint64_t i = 0; i < size; i++) {
        if (buf[i] != model[i]) {
            g_test_message("first difference at byte %" G_GUINT64_FORMAT, i);
            g_assert_cmphex(buf[i], ==, model[i]);
        }
    }
}

static void file_read(BlockDriverState *bs, uint64_t off, void *buf,
                      size_t len)
{
    g_assert_cmpint(bs->file->drv->bdrv_pread(bs->file, off, buf, len,
                                              &error_abort), ==, 0);
}

/* The refcount of the cluster at off as the file says, cache or not. */
static uint64_t disk_refcount(BlockDriverState *bs, uint64_t off)
{
    BDRVQcow2State *s = bs->opaque;
    unsigned order = s->header.refcount_order;
    uint64_t cs = s->g.cluster_size;
    uint64_t per_block = (cs * 8) >> order, cluster = off / cs;
    g_autofree uint8_t *block = g_malloc(cs);
    uint8_t hdr[12], e[8];
    uint64_t table, block_off;

    file_read(bs, 48, hdr, sizeof(hdr));
    table = ldq_be_p(hdr);
    if (cluster / per_block >= (uint64_t)ldl_be_p(hdr + 8) * (cs / 8)) {
        return 0;
    }
    file_read(bs, table + cluster / per_block * 8, e, 8);
    block_off = ldq_be_p(e) & QCOW2_REFT_OFFSET_MASK;
    if (!block_off) {
        return 0;
    }
    file_read(bs, block_off, block, cs);
    return qcow2_refcount_block_entry(block, cluster % per_block, order);
}

/*
 * What the file holds, as a killed writer would leave it, is consistent:
 * every cluster its L1 and L2 tables point at (and the tables) is counted
 * in its refcounts, cached updates not yet written or not.
 */
static void check_disk_order(BlockDriverState *bs)
{
    BDRVQcow2State *s = bs->opaque;
    uint64_t cs = s->g.cluster_size;
    g_autofree uint8_t *t = g_malloc(cs);
    g_autofree uint8_t *l1 = NULL;
    uint8_t hdr[12];
    uint32_t l1_size;
    uint64_t l1_off;

    file_read(bs, 36, hdr, sizeof(hdr));
    l1_size = ldl_be_p(hdr);
    l1_off = ldq_be_p(hdr + 4);
    if (!l1_size) {
        return;
    }
    l1 = g_malloc(l1_size * 8);
    file_read(bs, l1_off, l1, l1_size * 8);
    for (uint64_t c = 0; c < ROUND_UP((uint64_t)l1_size * 8, cs) / cs; c++) {
        g_assert_cmpuint(disk_refcount(bs, l1_off + c * cs), >=, 1);
    }
    for (uint32_t i = 0; i < l1_size; i++) {
        uint64_t l2 = ldq_be_p(l1 + i * 8) & QCOW2_OFFSET_MASK;

        if (!l2) {
            continue;
        }
        g_assert_cmpuint(disk_refcount(bs, l2), >=, 1);
        file_read(bs, l2, t, cs);
        for (uint64_t j = 0; j < s->g.l2_entries; j++) {
            uint64_t host = ldq_be_p(t + j * s->g.l2_entry_size) &
                            QCOW2_OFFSET_MASK;

            if (host && disk_refcount(bs, host) == 0) {
                g_test_message("L2 entry %" G_GUINT64_FORMAT " of table "
                               "0x%" PRIx64 " points at cluster 0x%" PRIx64
                               " with no refcount on disk", j, l2, host);
                g_assert_not_reached();
            }
        }
    }
}

static void drop_l2_cache(BlockDriverState *bs)
{
    BDRVQcow2State *s = bs->opaque;

    g_mutex_lock(&s->lock);
    for (uint64_t i = 0; i < s->l1_size; i++) {
        uint64_t l2 = s->l1_table[i] & QCOW2_OFFSET_MASK;

        if (l2) {
            qcow2_cache_drop(s->l2_cache, l2);
        }
    }
    g_mutex_unlock(&s->lock);
}

/*
 * Every cluster the metadata or data uses has refcount 1 (no snapshots
 * here), and every counted cluster is used: the same totals as the
 * clusters the image points at. (qemu-img check does it fully; this
 * catches a count made twice or forgotten.)
 */
static void check_refcounts(BlockDriverState *bs)
{
    BDRVQcow2State *s = bs->opaque;
    uint64_t cs = s->g.cluster_size;
    uint64_t clusters = ROUND_UP(s->file_size, cs) / cs;
    g_autofree uint8_t *used = g_malloc0(clusters + 1);
    uint64_t rt_clusters = s->header.refcount_table_clusters;

#define USE(off, n) do { \
        for (uint64_t _c = 0; _c < (n); _c++) { \
            g_assert_cmpuint((off) / cs + _c, <, clusters); \
            used[(off) / cs + _c]++; \
        } \
    } while (0)

    /* The tables are read from the file below: what is cached first. */
    g_assert_cmpint(qcow2_flush_metadata(bs, &error_abort), ==, 0);
    USE(0, 1);
    USE(s->header.refcount_table_offset, rt_clusters);
    for (uint64_t i = 0; i < s->reftable_entries; i++) {
        if (s->reftable[i]) {
            USE(s->reftable[i], 1);
        }
    }
    if (s->l1_size) {
        USE(s->header.l1_table_offset, ROUND_UP(s->l1_size * 8, cs) / cs);
    }
    if (s->ext.has_crypto_header) {
        USE(s->ext.crypto_header_offset,
            ROUND_UP(s->ext.crypto_header_length, cs) / cs);
    }
    for (uint64_t i = 0; i < s->l1_size; i++) {
        uint64_t l2 = s->l1_table[i] & QCOW2_OFFSET_MASK;
        g_autofree uint8_t *t = NULL;

        if (!l2) {
            continue;
        }
        USE(l2, 1);
        t = g_malloc(cs);
        g_assert_cmpint(bs->file->drv->bdrv_pread(bs->file, l2, t, cs,
                                                  &error_abort), ==, 0);
        for (uint64_t j = 0; j < s->g.l2_entries; j++) {
            uint64_t e = ldq_be_p(t + j * s->g.l2_entry_size);

            g_assert_false(e & QCOW2_OFLAG_COMPRESSED);
            if (e & QCOW2_OFFSET_MASK) {
                g_assert_true(e & QCOW2_OFLAG_COPIED);
                USE(e & QCOW2_OFFSET_MASK, 1);
            }
        }
    }
    for (uint64_t c = 0; c < clusters; c++) {
        uint64_t rc;

        g_assert_cmpint(qcow2_get_refcount(bs, c * cs, &rc, &error_abort),
                        ==, 0);
        if (rc != used[c]) {
            g_test_message("cluster %" G_GUINT64_FORMAT ": refcount %"
                           G_GUINT64_FORMAT ", used %u", c, rc, used[c]);
            g_assert_cmpuint(rc, ==, used[c]);
        }
    }
#undef USE
}

static void test_random_writes(gconstpointer data)
{
    const Layout *l = data;
    TestTmpFile t, tb;
    g_autofree uint8_t *model = g_malloc0(IMG_SIZE + (1 << 20));
    g_autofree uint8_t *buf = g_malloc(256 * 1024);
    g_autofree char *opts_str = NULL;
    g_autoptr(GHashTable) opts = NULL;
    GRand *rnd = g_rand_new_with_seed(42);
    BlockDriverState *bs;
    uint64_t size = IMG_SIZE;

    test_tmpfile_init(&t, "test-qcow2-write", "img.qcow2");
    test_tmpfile_init(&tb, "test-qcow2-write-base", "base.raw");
    g_assert_cmpint(qcrypto_secret_add("s0", "a passphrase", NULL,
                                       QCRYPTO_SECRET_FORMAT_RAW,
                                       &error_abort), ==, 0);
    if (l->backing) {
        FILE *f = fopen(tb.path, "wb");

        for (uint64_t i = 0; i < IMG_SIZE; i++) {
            model[i] = (uint8_t)(i * 7 + 3);
        }
        g_assert_cmpuint(fwrite(model, 1, IMG_SIZE, f), ==, IMG_SIZE);
        fclose(f);
        opts_str = g_strdup_printf("%s,backing_file=%s", l->opts, tb.path);
    } else {
        opts_str = g_strdup_printf("%s%ssize=%d", l->opts,
                                   *l->opts ? "," : "", IMG_SIZE);
    }
    opts = qemu_opts_parse(opts_str, NULL, &error_abort);
    bs = bdrv_create_open("qcow2", t.path, opts, 0, NULL, &error_abort);
    g_assert_nonnull(bs);

    for (int i = 0; i < 300; i++) {
        /* Sector-aligned writes for LUKS through the block layer's
         * bounce; any alignment otherwise. */
        uint32_t kind = g_rand_int_range(rnd, 0, 5);
        uint64_t len =
            kind == 0 ? (uint64_t)g_rand_int_range(rnd, 1, 600) :
            kind == 1 ? 65536 * (uint64_t)g_rand_int_range(rnd, 1, 4) :
            (uint64_t)g_rand_int_range(rnd, 1, 256 * 1024);
        uint64_t off = kind == 1 ?
                       65536 * (uint64_t)g_rand_int_range(rnd, 0, 40) :
                       (uint64_t)g_rand_int_range(rnd, 0, size);
        bool zero = g_rand_int_range(rnd, 0, 4) == 0;

        if (strstr(l->opts, "encrypt")) {
            off = ROUND_DOWN(off, 512);
            len = ROUND_UP(len, 512);
        }
        len = MIN(len, size - off);
        if (!len) {
            continue;
        }
        for (uint64_t j = 0; j < len; j++) {
            buf[j] = zero ? 0 : g_rand_int(rnd);
        }
        memcpy(model + off, buf, len);
        g_assert_cmpint(bdrv_pwrite(bs, off, buf, len, 0, &error_abort), ==,
                        0);
        if (i % 50 == 0) {
            check_model(bs, model, size);
        }
        if (i % 10 == 5) {
            check_disk_order(bs);
        }
        if (i % 50 == 25) {
            /*
             * Every L2 table out of the cache: read back from the file,
             * the entries not yet written there must still be seen.
             */
            drop_l2_cache(bs);
            check_model(bs, model, size);
        }
        if (i == 150) {
            /* Grow in the middle: a new L1 table, the tail reads zeroes
             * (no backing data past the base's end). */
            g_assert_cmpint(bdrv_truncate(bs, size + (1 << 20),
                                          PREALLOC_MODE_OFF, &error_abort),
                            ==, 0);
            size += 1 << 20;
            /* A new L1 table: counted on disk before the header names it. */
            check_disk_order(bs);
        }
    }
    check_model(bs, model, size);
    check_refcounts(bs);
    /* bdrv_create_open(): the image gets its name only now. */
    g_assert_cmpint(bdrv_create_finish(bs, &error_abort), ==, 0);
    bdrv_close(bs);

    /* Reopened: the same, and the dirty bit of lazy refcounts is clear. */
    bs = open_image(t.path, l->opts);
    check_model(bs, model, size);
    check_refcounts(bs);
    g_assert_false(((BDRVQcow2State *)bs->opaque)->header.
                   incompatible_features & QCOW2_INCOMPAT_DIRTY);
    bdrv_close(bs);

    g_rand_free(rnd);
    qcrypto_secret_clear_all();
    unlink(tb.path);
    test_tmpfile_clear(&tb);
    test_tmpfile_clear(&t);
}

/* Refcount entries of every width are written where they are read. */
static void test_refcount_block_set(void)
{
    for (unsigned order = 0; order <= 6; order++) {
        uint8_t block[512] = { 0 };
        uint64_t max = order == 6 ? UINT64_MAX :
                       (1ull << (1u << order)) - 1;

        for (uint64_t i = 0; i < 20; i++) {
            qcow2_refcount_block_set(block, i, order, (i * 3) & max);
        }
        qcow2_refcount_block_set(block, 21, order, max);
        for (uint64_t i = 0; i < 20; i++) {
            g_assert_cmpuint(qcow2_refcount_block_entry(block, i, order), ==,
                             (i * 3) & max);
        }
        g_assert_cmpuint(qcow2_refcount_block_entry(block, 21, order), ==,
                         max);
        g_assert_cmpuint(qcow2_refcount_block_entry(block, 22, order), ==, 0);
    }
}

/* Compression round trip: what qcow2_compress makes, the reader reads. */
static void test_compress_roundtrip(void)
{
    uint8_t in[65536], out[65536], back[65536];

    for (size_t i = 0; i < sizeof(in); i++) {
        in[i] = "compressible text "[i % 18];
    }
    for (int t = QCOW2_COMPRESSION_ZLIB; t <= QCOW2_COMPRESSION_ZSTD; t++) {
            size_t n = qcow2_compress(t, in, sizeof(in), out, sizeof(out) - 1);

        g_assert_cmpuint(n, >, 0);
        g_assert_cmpuint(n, <, 4096);
        g_assert_cmpint(qcow2_decompress(t, out, n, back, sizeof(back),
                                         &error_abort), ==, 0);
        g_assert_cmpmem(in, sizeof(in), back, sizeof(back));
        /* Random data does not fit in less than a cluster: 0. */
        for (size_t i = 0; i < sizeof(in); i++) {
            in[i] = g_random_int();
        }
        g_assert_cmpuint(qcow2_compress(t, in, sizeof(in), out, 4096), ==, 0);
        for (size_t i = 0; i < sizeof(in); i++) {
            in[i] = "compressible text "[i % 18];
        }
    }
}

/*
 * Compressed writes in two halves (bdrv_compress(), then
 * bdrv_store_compressed()), as convert makes them: compressing changes
 * nothing in the image, a BdrvCompressed reused for another write is
 * made over, and the stores leave the file bytewise what
 * bdrv_pwrite_compressed() leaves for the same writes in the same order.
 */
static void test_compress_halves(void)
{
    const uint64_t cs = 65536, size = 16 * cs;
    g_autofree uint8_t *data = g_malloc(size);
    g_autofree uint8_t *back = g_malloc(size);
    g_autofree uint8_t *fa = NULL, *fb = NULL;
    g_autoptr(GHashTable) opts_a = NULL, opts_b = NULL;
    BlockDriverState *a, *b;
    BdrvCompressed *c1, *c2;
    TestTmpFile ta, tb;
    Qcow2Extent ext;
    int64_t len, lena;

    /* Text, one cluster of random bytes (stored plain), one of zeroes. */
    for (uint64_t i = 0; i < size; i++) {
        data[i] = "compressible text, more or less "[(i / 7 + i / cs) % 32];
    }
    for (uint64_t i = 3 * cs; i < 4 * cs; i++) {
        data[i] = g_random_int();
    }
    memset(data + 4 * cs, 0, cs);

    test_tmpfile_init(&ta, "test-qcow2-compress-a", "a.qcow2");
    test_tmpfile_init(&tb, "test-qcow2-compress-b", "b.qcow2");
    /* (Creation takes its options out of the table: one each.) */
    opts_a = qemu_opts_parse("size=1M", NULL, &error_abort);
    opts_b = qemu_opts_parse("size=1M", NULL, &error_abort);
    a = bdrv_create_open("qcow2", ta.path, opts_a, 0, NULL, &error_abort);
    b = bdrv_create_open("qcow2", tb.path, opts_b, 0, NULL, &error_abort);
    g_assert_nonnull(a);
    g_assert_nonnull(b);

    g_assert_cmpint(bdrv_pwrite_compressed(a, 0, data, 6 * cs, 0,
                                           &error_abort), ==, 0);
    g_assert_cmpint(bdrv_pwrite_compressed(a, 6 * cs, data + 6 * cs, 2 * cs,
                                           0, &error_abort), ==, 0);
    g_assert_cmpint(bdrv_pwrite_compressed(a, 8 * cs, data + 8 * cs, 8 * cs,
                                           0, &error_abort), ==, 0);

    len = bdrv_getlength_exact(b->file, &error_abort);
    c1 = bdrv_compress(b, 0, data, 6 * cs, 0, NULL, &error_abort);
    c2 = bdrv_compress(b, 6 * cs, data + 6 * cs, 2 * cs, 0, NULL,
                       &error_abort);
    g_assert_nonnull(c1);
    g_assert_nonnull(c2);
    /* Nothing taken, nothing written yet. */
    g_assert_cmpint(bdrv_getlength_exact(b->file, &error_abort), ==, len);
    g_assert_cmpint(qcow2_get_extent(b, 0, size, &ext, &error_abort), ==, 0);
    g_assert_cmpint(ext.type, ==, QCOW2_SC_UNALLOCATED);
    g_assert_cmpuint(ext.bytes, ==, size);
    g_assert_cmpint(bdrv_store_compressed(b, c1, &error_abort), ==, 0);
    g_assert_cmpint(bdrv_store_compressed(b, c2, &error_abort), ==, 0);
    /* c1 made over for a longer write. */
    g_assert_true(bdrv_compress(b, 8 * cs, data + 8 * cs, 8 * cs, 0, c1,
                                &error_abort) == c1);
    g_assert_cmpint(bdrv_store_compressed(b, c1, &error_abort), ==, 0);
    bdrv_compressed_free(c1);
    bdrv_compressed_free(c2);

    g_assert_cmpint(bdrv_pread(b, 0, back, size, &error_abort), ==, 0);
    g_assert_cmpmem(back, size, data, size);
    /* Compressed, plain (random), nothing (zeroes), compressed. */
    g_assert_cmpint(qcow2_get_extent(b, 0, cs, &ext, &error_abort), ==, 0);
    g_assert_cmpint(ext.type, ==, QCOW2_SC_COMPRESSED);
    g_assert_cmpint(qcow2_get_extent(b, 3 * cs, cs, &ext, &error_abort), ==,
                    0);
    g_assert_cmpint(ext.type, ==, QCOW2_SC_NORMAL);
    g_assert_cmpint(qcow2_get_extent(b, 4 * cs, cs, &ext, &error_abort), ==,
                    0);
    g_assert_cmpint(ext.type, !=, QCOW2_SC_NORMAL);
    g_assert_cmpint(ext.type, !=, QCOW2_SC_COMPRESSED);
    g_assert_cmpint(qcow2_get_extent(b, 15 * cs, cs, &ext, &error_abort), ==,
                    0);
    g_assert_cmpint(ext.type, ==, QCOW2_SC_COMPRESSED);

    g_assert_cmpint(bdrv_flush(a, &error_abort), ==, 0);
    g_assert_cmpint(bdrv_flush(b, &error_abort), ==, 0);
    lena = bdrv_getlength_exact(a->file, &error_abort);
    len = bdrv_getlength_exact(b->file, &error_abort);
    g_assert_cmpint(len, ==, lena);
    fa = g_malloc(len);
    fb = g_malloc(len);
    file_read(a, 0, fa, len);
    file_read(b, 0, fb, len);
    g_assert_cmpmem(fa, len, fb, len);

    bdrv_close(a);
    bdrv_close(b);
    test_tmpfile_clear(&ta);
    test_tmpfile_clear(&tb);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    for (size_t i = 0; i < G_N_ELEMENTS(layouts); i++) {
        g_autofree char *name = g_strdup_printf("/qcow2-write/random/%s",
                                                layouts[i].name);

        g_test_add_data_func(name, &layouts[i], test_random_writes);
    }
    g_test_add_func("/qcow2-write/refcount-block-set",
                    test_refcount_block_set);
    g_test_add_func("/qcow2-write/compress-roundtrip",
                    test_compress_roundtrip);
    g_test_add_func("/qcow2-write/compress-halves", test_compress_halves);
    return g_test_run();
}
