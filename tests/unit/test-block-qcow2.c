/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The qcow2 driver (block/qcow2*.c), read-only, on images built here byte
 * by byte from the spec (QEMU's docs/interop/qcow2.txt), so every field
 * can be made hostile:
 *
 * - the header and its extensions: a valid one parses; each bad field is
 *   refused with a message naming it, before anything is allocated;
 * - the L2 entry decoder (standard, zero, compressed, subclusters) and
 *   the compressed-cluster descriptor;
 * - refcount entries of every width, 1 to 64 bits;
 * - the L2 cache: bounded, least recently used evicted;
 * - decompression: zlib and zstd, output never past one cluster;
 * - whole images through the block layer: guest data at host offsets in
 *   another order, zero and unallocated clusters, subclusters, block
 *   status, a 16 TiB sparse image, more L2 tables than the cache holds,
 *   and corrupt tables refused on read.
 * The interop matrix against qemu-img is tests/cli/interop_qcow2.py.
 */
#include <string.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include <glib/gstdio.h>

#include "block/qcow2.h"
#include "test-error.h"
#include "test-tmpdir.h"

/* ---- An image under construction, in memory */

typedef struct Img {
    unsigned cluster_bits;
    uint64_t cs;                /* cluster size */
    uint64_t size;              /* virtual size */
    bool extl2;
    uint64_t l1_offset;
    uint64_t l1_entries;
    GByteArray *buf;
} Img;

static uint64_t img_alloc(Img *img)
{
    uint64_t off = img->buf->len;

    g_byte_array_set_size(img->buf, off + img->cs);
    memset(img->buf->data + off, 0, img->cs);
    return off;
}

/*
 * Header in cluster 0, refcount table in 1, refcount block in 2, the L1
 * table from cluster 3: the layout qemu-img uses.
 */
static Img *img_new(unsigned cluster_bits, uint64_t size, bool extl2)
{
    Img *img = g_new0(Img, 1);
    uint64_t l2_span;
    uint8_t *h;

    img->cluster_bits = cluster_bits;
    img->cs = 1ull << cluster_bits;
    img->size = size;
    img->extl2 = extl2;
    img->buf = g_byte_array_new();
    l2_span = img->cs * (img->cs / (extl2 ? 16 : 8));
    img->l1_entries = (size + l2_span - 1) / l2_span;
    for (int i = 0; i < 3; i++) {
        img_alloc(img);
    }
    img->l1_offset = img->buf->len;
    for (uint64_t i = 0; i < MAX(1, (img->l1_entries * 8 + img->cs - 1) /
                                    img->cs); i++) {
        img_alloc(img);
    }
    h = img->buf->data;
    stl_be_p(h, QCOW2_MAGIC);
    stl_be_p(h + 4, 3);
    stl_be_p(h + 20, cluster_bits);
    stq_be_p(h + 24, size);
    stl_be_p(h + 36, img->l1_entries);
    stq_be_p(h + 40, img->l1_offset);
    stq_be_p(h + 48, img->cs);
    stl_be_p(h + 56, 1);
    stq_be_p(h + 72, extl2 ? QCOW2_INCOMPAT_EXTL2 : 0);
    stl_be_p(h + 96, 4);
    stl_be_p(h + 100, 112);
    /* refcount table entry 0 -> the block in cluster 2 */
    stq_be_p(img->buf->data + img->cs, 2 * img->cs);
    return img;
}

static void img_free(Img *img)
{
    g_byte_array_unref(img->buf);
    g_free(img);
}
G_DEFINE_AUTOPTR_CLEANUP_FUNC(Img, img_free)

/* The L2 entry (and bitmap) of the guest cluster holding guest. */
static uint8_t *img_l2_entry(Img *img, uint64_t guest)
{
    unsigned l2_bits = img->cluster_bits - (img->extl2 ? 4 : 3);
    uint64_t cluster = guest >> img->cluster_bits;
    uint64_t l1_index = cluster >> l2_bits;
    uint8_t *l1e = img->buf->data + img->l1_offset + l1_index * 8;
    uint64_t l2 = ldq_be_p(l1e) & QCOW2_OFFSET_MASK;

    if (!l2) {
        l2 = img_alloc(img);
        stq_be_p(img->buf->data + img->l1_offset + l1_index * 8,
                 l2 | QCOW2_OFLAG_COPIED);
    }
    return img->buf->data + l2 +
           (cluster & ((1ull << l2_bits) - 1)) * (img->extl2 ? 16 : 8);
}

static void img_set_l2(Img *img, uint64_t guest, uint64_t entry,
                       uint64_t bitmap)
{
    uint8_t *e = img_l2_entry(img, guest);

    stq_be_p(e, entry);
    if (img->extl2) {
        stq_be_p(e + 8, bitmap);
    }
}

/* A new data cluster filled with fill for the guest cluster at guest. */
static uint64_t img_write(Img *img, uint64_t guest, uint8_t fill)
{
    uint8_t *e;
    uint64_t host;

    img_l2_entry(img, guest);       /* the L2 table first: allocations */
    host = img_alloc(img);          /* move buf->data */
    e = img_l2_entry(img, guest);
    memset(img->buf->data + host, fill, img->cs);
    stq_be_p(e, host | QCOW2_OFLAG_COPIED);
    if (img->extl2) {
        stq_be_p(e + 8, 0xffffffffull);     /* every subcluster allocated */
    }
    return host;
}

/* Refcount 1 (16-bit entries) for every cluster, then write to path. */
static void img_save(Img *img, const char *path)
{
    uint64_t nclusters = img->buf->len / img->cs;
    g_autoptr(GError) gerr = NULL;

    /* One refcount block: as many clusters as it covers get counted. */
    for (uint64_t i = 0; i < MIN(nclusters, img->cs / 2); i++) {
        uint8_t *p = img->buf->data + 2 * img->cs + i * 2;

        p[0] = 0;
        p[1] = 1;
    }
    g_assert_true(g_file_set_contents(path, (char *)img->buf->data,
                                      img->buf->len, &gerr));
}

typedef TestTmpFile Fixture;

static void fixture_setup(Fixture *f, gconstpointer data)
{
    test_tmpfile_init(f, "test-block-qcow2", "img.qcow2");
}

static void fixture_teardown(Fixture *f, gconstpointer data)
{
    test_tmpfile_clear(f);
}

static BlockDriverState *img_open(Img *img, const char *path, Error **errp)
{
    img_save(img, path);
    return bdrv_open(path, NULL, NULL, 0, errp);
}

/* ---- Header */

static void test_header_valid(void)
{
    g_autoptr(Img) img = img_new(16, 1ull << 30, false);
    Qcow2Header h;

    g_assert_cmpint(qcow2_header_parse(img->buf->data, img->cs,
                                       img->buf->len, &h, &error_abort), ==, 0);
    g_assert_cmpuint(h.version, ==, 3);
    g_assert_cmpuint(h.cluster_bits, ==, 16);
    g_assert_cmpuint(h.size, ==, 1ull << 30);
    g_assert_cmpuint(h.l1_size, ==, 2);
    g_assert_cmpuint(h.l1_table_offset, ==, 3 * 65536);
    g_assert_cmpuint(h.refcount_order, ==, 4);
    g_assert_cmpuint(h.header_length, ==, 112);
    g_assert_cmpint(qcow2_probe(img->buf->data, 512, "x"), ==, 100);
}

typedef struct HostileField {
    unsigned offset;
    unsigned width;         /* 4 or 8 bytes */
    uint64_t value;
    const char *error;
} HostileField;

/* One field at a time set to what the spec or QEMU's limits refuse. */
static const HostileField hostile_fields[] = {
    { 0, 4, 0x514649fc, "not in qcow2 format" },
    { 4, 4, 1, "Unsupported qcow2 version 1" },
    { 4, 4, 4, "Unsupported qcow2 version 4" },
    { 20, 4, 8, "Unsupported cluster size" },
    { 20, 4, 22, "Unsupported cluster size" },
    { 20, 4, 0xffffffff, "Unsupported cluster size" },
    { 24, 8, UINT64_MAX, "too large" },
    { 24, 8, 1ull << 40, "L1 table is too small" },
    { 32, 4, 3, "Unsupported encryption method" },
    { 36, 4, 0x10000000, "Active L1 table too large" },
    { 36, 4, 0x100000, "beyond the end of the file" },
    { 40, 8, 3 * 65536 + 512, "not cluster-aligned" },
    { 40, 8, 1ull << 50, "beyond the end of the file" },
    { 40, 8, UINT64_MAX - 65535, "beyond the end of the file" },
    { 48, 8, 1ull << 40, "beyond the end of the file" },
    { 48, 8, 100, "not cluster-aligned" },
    { 56, 4, 0, "does not contain a reference count table" },
    { 56, 4, 0xffffffff, "Reference count table too large" },
    /* (checked before the table is read, not by qcow2_header_parse) */
    { 60, 4, 65537, "Snapshot table too large" },
    { 64, 8, 65536 + 8, "Snapshot table offset" },
    { 96, 4, 7, "may not exceed 64 bits" },
    { 100, 4, 96, "header too short" },
    { 100, 4, 65544, "exceeds cluster size" },
    { 8, 8, 65000, "Backing file name too long" },
    { 8, 8, 16, "overlaps the qcow2 header" },
};

static void test_header_hostile(void)
{
    for (size_t i = 0; i < G_N_ELEMENTS(hostile_fields); i++) {
        const HostileField *f = &hostile_fields[i];
        g_autoptr(Img) img = img_new(16, 1ull << 30, false);
        uint8_t *h = img->buf->data;
        Qcow2Header hdr;
        Error *err = NULL;
        int ret;

        if (f->width == 8) {
            stq_be_p(h + f->offset, f->value);
        } else {
            stl_be_p(h + f->offset, f->value);
        }
        if (f->offset == 8) {
            stl_be_p(h + 16, 1000);     /* backing_file_size */
        }
        if (f->offset == 64) {
            stl_be_p(h + 60, 1);        /* nb_snapshots */
        }
        g_test_message("field at %u = 0x%" PRIx64, f->offset, f->value);
        ret = qcow2_header_parse(h, img->cs, img->buf->len, &hdr, &err);
        if (ret == 0) {
            ret = qcow2_header_check_snapshots(&hdr, &err);
        }
        g_assert_cmpint(ret, ==, -1);
        test_error_expect(&err, f->error);
    }
}

/* The header of @img is refused with an error containing @msg. */
static void header_refused(Img *img, const char *msg)
{
    Qcow2Header hdr;
    Error *err = NULL;

    g_assert_cmpint(qcow2_header_parse(img->buf->data, img->cs,
                                       img->buf->len, &hdr, &err), ==, -1);
    test_error_expect(&err, msg);
}

static void test_header_short(void)
{
    g_autoptr(Img) img = img_new(16, 1ull << 20, false);
    Qcow2Header h;
    Error *err = NULL;

    /* A file too short for the header, and a v3 header cut at 72 bytes. */
    g_assert_cmpint(qcow2_header_parse(img->buf->data, 71, 71, &h, &err),
                    ==, -1);
    test_error_expect(&err, "not in qcow2 format");
    g_assert_cmpint(qcow2_header_parse(img->buf->data, 72, img->buf->len, &h,
                                       &err), ==, -1);
    test_error_expect(&err, "header too short");
}

static void test_header_features(void)
{
    g_autoptr(Img) img = img_new(12, 1ull << 20, false);
    uint8_t *h = img->buf->data;

    /* Compression type bit and field must agree. */
    stq_be_p(h + 72, QCOW2_INCOMPAT_COMPRESSION);
    header_refused(img, "compression type bit is set");
    stq_be_p(h + 72, 0);
    h[104] = 1;
    header_refused(img, "bit is not set");
    stq_be_p(h + 72, QCOW2_INCOMPAT_COMPRESSION);
    h[104] = 2;
    header_refused(img, "unknown compression type 2");
    h[104] = 0;
    /* Extended L2 needs 16 KiB clusters (this image has 4 KiB). */
    stq_be_p(h + 72, QCOW2_INCOMPAT_EXTL2);
    header_refused(img, "Extended L2 entries need clusters");
}

/* Version 2: no v3 fields, refcount order 4, the 72-byte header. */
static void test_header_v2(void)
{
    g_autoptr(Img) img = img_new(16, 1ull << 30, false);
    uint8_t *h = img->buf->data;
    Qcow2Header hdr;

    stl_be_p(h + 4, 2);
    stq_be_p(h + 72, ~0ull);    /* v3 fields: ignored in version 2 */
    stl_be_p(h + 96, 99);
    g_assert_cmpint(qcow2_header_parse(h, img->cs, img->buf->len, &hdr,
                                       &error_abort), ==, 0);
    g_assert_cmpuint(hdr.incompatible_features, ==, 0);
    g_assert_cmpuint(hdr.refcount_order, ==, 4);
    g_assert_cmpuint(hdr.header_length, ==, 72);
}

/* ---- Header extensions */

static size_t put_ext(uint8_t *p, uint32_t type, const void *data,
                      uint32_t len)
{
    stl_be_p(p, type);
    stl_be_p(p + 4, len);
    memcpy(p + 8, data, len);
    return 8 + ROUND_UP(len, 8);
}

static int parse_exts(Img *img, Qcow2Extensions *ext, Error **errp)
{
    Qcow2Header h;

    g_assert_cmpint(qcow2_header_parse(img->buf->data, img->cs,
                                       img->buf->len, &h, NULL), ==, 0);
    return qcow2_extensions_parse(&h, img->buf->data, img->cs,
                                  img->buf->len, ext, errp);
}

static void test_extensions(void)
{
    g_autoptr(Img) img = img_new(16, 1ull << 30, false);
    uint8_t *p = img->buf->data + 112;
    uint8_t feature[48] = { 0, 9 };
    Qcow2Extensions ext;

    memcpy(feature + 2, "frobnication", 12);
    p += put_ext(p, QCOW2_EXT_BACKING_FORMAT, "qcow2", 5);
    p += put_ext(p, QCOW2_EXT_FEATURE_TABLE, feature, sizeof(feature));
    p += put_ext(p, 0x12345678, "ignored", 7);
    put_ext(p, QCOW2_EXT_DATA_FILE, "data.raw", 8);
    g_assert_cmpint(parse_exts(img, &ext, &error_abort), ==, 0);
    g_assert_cmpstr(ext.backing_format, ==, "qcow2");
    g_assert_cmpstr(ext.data_file, ==, "data.raw");
    g_assert_cmpstr(ext.incompat_names[9], ==, "frobnication");
    g_assert_false(ext.has_crypto_header);
    qcow2_extensions_clear(&ext);
}

/*
 * What create writes for data_file=: the extension after the backing
 * format and before the feature table (QEMU's order), read back as the
 * name, the incompatible bit and the raw autoclear bit as given.
 */
static void test_extensions_build_data_file(void)
{
    g_autoptr(Img) img = img_new(16, 1ull << 30, false);
    Qcow2Header h;
    Qcow2Extensions ext;
    uint8_t *b = img->buf->data;
    size_t n;

    g_assert_cmpint(qcow2_header_parse(b, img->cs, img->buf->len, &h, NULL),
                    ==, 0);
    h.incompatible_features |= QCOW2_INCOMPAT_DATA_FILE;
    h.autoclear_features |= QCOW2_AUTOCLEAR_DATA_FILE_RAW;
    n = qcow2_header_build(&h, NULL, "raw", "disk.data", 0, 0, true, NULL,
                           b, img->cs);
    g_assert_cmpuint(n, <, img->cs);
    /* 112: backing format (8 + 8), then the data file name (8 + 16). */
    g_assert_cmphex(ldl_be_p(b + 112), ==, QCOW2_EXT_BACKING_FORMAT);
    g_assert_cmphex(ldl_be_p(b + 128), ==, QCOW2_EXT_DATA_FILE);
    g_assert_cmpuint(ldl_be_p(b + 132), ==, 9);
    g_assert_cmphex(ldl_be_p(b + 152), ==, QCOW2_EXT_FEATURE_TABLE);
    g_assert_cmpint(qcow2_header_parse(b, img->cs, img->buf->len, &h, NULL),
                    ==, 0);
    g_assert_cmphex(h.incompatible_features, ==, QCOW2_INCOMPAT_DATA_FILE);
    g_assert_cmphex(h.autoclear_features, ==, QCOW2_AUTOCLEAR_DATA_FILE_RAW);
    g_assert_cmpint(qcow2_extensions_parse(&h, b, img->cs, img->buf->len,
                                           &ext, &error_abort), ==, 0);
    g_assert_cmpstr(ext.data_file, ==, "disk.data");
    g_assert_cmpstr(ext.backing_format, ==, "raw");
    qcow2_extensions_clear(&ext);
}

static void test_extensions_hostile(void)
{
    static const char long_fmt[] = "a-format-name-of-16";
    uint8_t crypto[16];

    struct {
        uint32_t type;
        const void *data;
        uint32_t len;
        uint32_t fake_len;      /* 0: len */
        const char *error;
    } cases[] = {
        { QCOW2_EXT_BACKING_FORMAT, long_fmt, 16, 0,
          "invalid backing format extension" },
        { QCOW2_EXT_BACKING_FORMAT, "qc\0w2", 5, 0,
          "invalid backing format extension" },
        { QCOW2_EXT_BACKING_FORMAT, "raw", 3, 0x7fffffff, "too large" },
        { QCOW2_EXT_CRYPTO_HEADER, crypto, 16, 0,
          "only expected with LUKS" },
    };

    stq_be_p(crypto, 65536);
    stq_be_p(crypto + 8, 4096);
    for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_autoptr(Img) img = img_new(16, 1ull << 30, false);
        uint8_t *p = img->buf->data + 112;
        Qcow2Extensions ext;
        Error *err = NULL;

        put_ext(p, cases[i].type, cases[i].data, cases[i].len);
        if (cases[i].fake_len) {
            stl_be_p(p + 4, cases[i].fake_len);
        }
        g_assert_cmpint(parse_exts(img, &ext, &err), ==, -1);
        test_error_expect(&err, cases[i].error);
    }
}

static void test_extensions_crypto(void)
{
    g_autoptr(Img) img = img_new(16, 1ull << 30, false);
    uint8_t *p = img->buf->data + 112;
    uint8_t crypto[16];
    Qcow2Extensions ext;
    Error *err = NULL;

    stl_be_p(img->buf->data + 32, QCOW2_CRYPT_LUKS);
    /* LUKS without the extension */
    g_assert_cmpint(parse_exts(img, &ext, &err), ==, -1);
    test_error_expect(&err, "without a crypto header extension");
    /* A header past the end of the file */
    stq_be_p(crypto, 1ull << 40);
    stq_be_p(crypto + 8, 4096);
    put_ext(p, QCOW2_EXT_CRYPTO_HEADER, crypto, 16);
    g_assert_cmpint(parse_exts(img, &ext, &err), ==, -1);
    test_error_expect(&err, "beyond the end of the file");
    /* Unaligned, too long, wrong length, then a good one */
    stq_be_p(crypto, 65536 + 512);
    put_ext(p, QCOW2_EXT_CRYPTO_HEADER, crypto, 16);
    g_assert_cmpint(parse_exts(img, &ext, &err), ==, -1);
    test_error_expect(&err, "not cluster-aligned");
    stq_be_p(crypto, 65536);
    stq_be_p(crypto + 8, 1ull << 40);
    put_ext(p, QCOW2_EXT_CRYPTO_HEADER, crypto, 16);
    g_assert_cmpint(parse_exts(img, &ext, &err), ==, -1);
    test_error_expect(&err, "Crypto header too large");
    put_ext(p, QCOW2_EXT_CRYPTO_HEADER, crypto, 8);
    g_assert_cmpint(parse_exts(img, &ext, &err), ==, -1);
    test_error_expect(&err, "invalid crypto header extension");
    stq_be_p(crypto + 8, 4096);
    put_ext(p, QCOW2_EXT_CRYPTO_HEADER, crypto, 16);
    g_assert_cmpint(parse_exts(img, &ext, &error_abort), ==, 0);
    g_assert_true(ext.has_crypto_header);
    g_assert_cmpuint(ext.crypto_header_offset, ==, 65536);
    g_assert_cmpuint(ext.crypto_header_length, ==, 4096);
    qcow2_extensions_clear(&ext);
}

static void test_validate_table(void)
{
    Error *err = NULL;

    g_assert_cmpint(qcow2_validate_table(65536, 8192, 8, 1 << 20, 65536,
                                         131072, "T", &error_abort), ==, 0);
    /* One byte more than the file holds */
    g_assert_cmpint(qcow2_validate_table(65536, 8193, 8, 1 << 20, 65536,
                                         131072, "T", &err), ==, -1);
    test_error_expect(&err, "T (65544 bytes at offset 65536) is beyond");
    /* entries * entry_len would overflow: refused as too large first */
    g_assert_cmpint(qcow2_validate_table(0, UINT64_MAX / 4, 8, UINT64_MAX,
                                         512, UINT64_MAX, "T", &err), ==, -1);
    test_error_expect(&err, "T too large");
    /* offset + size would wrap */
    g_assert_cmpint(qcow2_validate_table(UINT64_MAX - 511, 64, 8, 1 << 20,
                                         512, UINT64_MAX - 100, "T", &err),
                    ==, -1);
    test_error_expect(&err, "beyond the end");
}

/* ---- L2 entries */

static Qcow2Geometry geometry(unsigned cluster_bits, bool extl2,
                              bool data_file)
{
    Qcow2Header h = {
        .cluster_bits = cluster_bits,
        .incompatible_features = (extl2 ? QCOW2_INCOMPAT_EXTL2 : 0) |
                                 (data_file ? QCOW2_INCOMPAT_DATA_FILE : 0),
    };
    Qcow2Geometry g;

    qcow2_geometry_init(&g, &h);
    return g;
}

static int entry_type(const Qcow2Geometry *g, uint64_t entry,
                      uint64_t bitmap, unsigned sc, const char *error)
{
    Qcow2SubclusterType type = -1;
    Error *err = NULL;
    int ret = qcow2_l2_entry_type(g, entry, bitmap, sc, &type,
                                  error ? &err : &error_abort);

    if (error) {
        g_assert_cmpint(ret, ==, -1);
        test_error_expect(&err, error);
        return -1;
    }
    return type;
}

static void test_l2_entry_standard(void)
{
    Qcow2Geometry g = geometry(16, false, false);
    Qcow2Geometry gd = geometry(16, false, true);

    g_assert_cmpint(entry_type(&g, 0, 0, 0, NULL), ==, QCOW2_SC_UNALLOCATED);
    g_assert_cmpint(entry_type(&g, 0x50000 | QCOW2_OFLAG_COPIED, 0, 0, NULL),
                    ==, QCOW2_SC_NORMAL);
    g_assert_cmpint(entry_type(&g, 0x50000, 0, 0, NULL), ==, QCOW2_SC_NORMAL);
    g_assert_cmpint(entry_type(&g, QCOW2_OFLAG_ZERO, 0, 0, NULL), ==,
                    QCOW2_SC_ZERO);
    /* preallocated zero cluster: the host offset is not read */
    g_assert_cmpint(entry_type(&g, 0x50000 | QCOW2_OFLAG_ZERO, 0, 0, NULL),
                    ==, QCOW2_SC_ZERO);
    g_assert_cmpint(entry_type(&g, QCOW2_OFLAG_COMPRESSED | 0x1234, 0, 0,
                               NULL), ==, QCOW2_SC_COMPRESSED);
    entry_type(&g, 0x50200, 0, 0, "unaligned");
    entry_type(&g, 0x50000 | (1ull << 57), 0, 0, "reserved bits");
    entry_type(&g, 0x50000 | 2, 0, 0, "reserved bits");
    /* An external data file: offset 0 is real when COPIED says so. */
    g_assert_cmpint(entry_type(&gd, QCOW2_OFLAG_COPIED, 0, 0, NULL), ==,
                    QCOW2_SC_NORMAL);
    g_assert_cmpint(entry_type(&gd, 0, 0, 0, NULL), ==,
                    QCOW2_SC_UNALLOCATED);
    entry_type(&gd, QCOW2_OFLAG_COMPRESSED | 0x1234, 0, 0,
               "external data file");
}

static void test_l2_entry_subclusters(void)
{
    Qcow2Geometry g = geometry(16, true, false);
    uint64_t host = 0x50000;
    /* subcluster 0 allocated, 1 zero, 2 unallocated, 31 allocated */
    uint64_t bitmap = 1ull | (1ull << 33) | (1ull << 31);

    g_assert_cmpuint(g.subcluster_size, ==, 2048);
    g_assert_cmpuint(g.l2_entries, ==, 4096);
    g_assert_cmpint(entry_type(&g, host, bitmap, 0, NULL), ==,
                    QCOW2_SC_NORMAL);
    g_assert_cmpint(entry_type(&g, host, bitmap, 1, NULL), ==, QCOW2_SC_ZERO);
    g_assert_cmpint(entry_type(&g, host, bitmap, 2, NULL), ==,
                    QCOW2_SC_UNALLOCATED);
    g_assert_cmpint(entry_type(&g, host, bitmap, 31, NULL), ==,
                    QCOW2_SC_NORMAL);
    /* Bit 0 of the entry means nothing with subclusters. */
    g_assert_cmpint(entry_type(&g, host | 1, bitmap, 2, NULL), ==,
                    QCOW2_SC_UNALLOCATED);
    entry_type(&g, host, 1ull | (1ull << 32), 0, "both allocated and zero");
    entry_type(&g, 0, 1ull, 0, "in an unallocated cluster");
    entry_type(&g, QCOW2_OFLAG_COMPRESSED | 0x1234, 1, 0,
               "subcluster bitmap");
}

static void test_compressed_extent(void)
{
    /* 64 KiB clusters: x = 62 - 8 = 54; sector count in bits 54..61 */
    Qcow2Geometry g = geometry(16, false, false);
    uint64_t off, len;

    g_assert_cmpuint(g.csize_shift, ==, 54);
    qcow2_compressed_extent(&g, QCOW2_OFLAG_COMPRESSED | (3ull << 54) |
                            0x30123, &off, &len);
    g_assert_cmpuint(off, ==, 0x30123);
    /* 4 sectors from the one holding the offset: 2048 - 0x123 bytes */
    g_assert_cmpuint(len, ==, 4 * 512 - 0x123);
    /* 2 MiB clusters: at most 2 clusters of compressed data (spec) */
    g = geometry(21, false, false);
    qcow2_compressed_extent(&g, ~0ull, &off, &len);
    g_assert_cmpuint(off, ==, (1ull << 49) - 1);
    g_assert_cmpuint(len, <=, 2ull << 21);
}

/* ---- Refcounts */

static void test_refcount_widths(void)
{
    const uint8_t block[16] = {
        0xb4, 0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd,
        0xef, 0xfe, 0xdc, 0xba, 0x98, 0x76, 0x54, 0x32,
    };
    static const struct {
        uint64_t index;
        int order;          /* refcount_order: width is 1 << order bits */
        uint64_t expect;
    } cases[] = {
        /* 1 bit: 0xb4 = 10110100, entry 0 in the least significant bit */
        { 0, 0, 0 }, { 2, 0, 1 }, { 7, 0, 1 }, { 8, 0, 1 },
        /* 2 bits: 0xb4 = 10 11 01 00 */
        { 0, 1, 0 }, { 1, 1, 1 }, { 2, 1, 3 }, { 3, 1, 2 },
        /* 4 bits */
        { 0, 2, 0x4 }, { 1, 2, 0xb },
        /* 8 to 64 bits: big-endian */
        { 1, 3, 0x01 }, { 1, 4, 0x2345 }, { 1, 5, 0x6789abcd },
        { 1, 6, 0xeffedcba98765432ull },
    };

    for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_assert_cmpuint(qcow2_refcount_block_entry(block, cases[i].index,
                                                    cases[i].order),
                         ==, cases[i].expect);
    }
}

static void test_refcount_read(Fixture *f, gconstpointer data)
{
    g_autoptr(Img) img = img_new(16, 1ull << 30, false);
    g_autoptr(BlockDriverState) bs = NULL;
    uint64_t host = img_write(img, 0, 0x11);
    uint64_t rc = 99;

    bs = img_open(img, f->path, &error_abort);
    g_assert_cmpint(qcow2_get_refcount(bs, 0, &rc, &error_abort), ==, 0);
    g_assert_cmpuint(rc, ==, 1);
    g_assert_cmpint(qcow2_get_refcount(bs, host + 100, &rc, &error_abort),
                    ==, 0);
    g_assert_cmpuint(rc, ==, 1);
    /* Past the last cluster, and past what the refcount table covers */
    g_assert_cmpint(qcow2_get_refcount(bs, host + 65536, &rc, &error_abort),
                    ==, 0);
    g_assert_cmpuint(rc, ==, 0);
    g_assert_cmpint(qcow2_get_refcount(bs, 1ull << 55, &rc, &error_abort),
                    ==, 0);
    g_assert_cmpuint(rc, ==, 0);
}

/* ---- The L2 cache */

static void test_cache_bound(void)
{
    Qcow2Cache *c = qcow2_cache_new(65536, 4 * 65536);
    uint8_t *t;

    g_assert_cmpuint(qcow2_cache_capacity(c), ==, 4);
    for (uint64_t i = 1; i <= 1000; i++) {
        t = qcow2_cache_insert(c, i * 65536);
        t[0] = i;
        g_assert_cmpuint(qcow2_cache_memory(c), <=, 4 * 65536);
    }
    /* The last four are there, with their contents; older ones are gone. */
    for (uint64_t i = 997; i <= 1000; i++) {
        g_assert_nonnull(qcow2_cache_lookup(c, i * 65536));
        g_assert_cmpuint(qcow2_cache_lookup(c, i * 65536)[0], ==, i & 0xff);
    }
    g_assert_null(qcow2_cache_lookup(c, 996 * 65536));
    /* Least recently used goes first: touch 997, insert, 998 is evicted. */
    qcow2_cache_lookup(c, 997 * 65536);
    qcow2_cache_insert(c, 2000 * 65536);
    g_assert_nonnull(qcow2_cache_lookup(c, 997 * 65536));
    g_assert_null(qcow2_cache_lookup(c, 998 * 65536));
    qcow2_cache_drop(c, 997 * 65536);
    g_assert_null(qcow2_cache_lookup(c, 997 * 65536));
    qcow2_cache_free(c);

    /* A tiny budget still keeps a few tables; a big one is capped. */
    c = qcow2_cache_new(2 * 1024 * 1024, 1);
    g_assert_cmpuint(qcow2_cache_capacity(c), ==, QCOW2_CACHE_MIN_TABLES);
    g_assert_cmpuint(qcow2_cache_memory(c), ==, 0);
    qcow2_cache_free(c);
}

/* ---- Decompression */

static GByteArray *deflate_raw(const uint8_t *in, size_t len)
{
    GByteArray *out = g_byte_array_sized_new(compressBound(len) + 64);
    z_stream s = { 0 };

    /* As QEMU writes them: raw deflate, 4 KiB window. */
    g_assert_cmpint(deflateInit2(&s, Z_DEFAULT_COMPRESSION, Z_DEFLATED, -12,
                                 9, Z_DEFAULT_STRATEGY), ==, Z_OK);
    g_byte_array_set_size(out, compressBound(len) + 64);
    s.next_in = (Bytef *)in;
    s.avail_in = len;
    s.next_out = out->data;
    s.avail_out = out->len;
    g_assert_cmpint(deflate(&s, Z_FINISH), ==, Z_STREAM_END);
    g_byte_array_set_size(out, s.total_out);
    deflateEnd(&s);
    return out;
}

static void check_decompress(Qcow2CompressionType type, GByteArray *z,
                             const uint8_t *plain, size_t cluster)
{
    g_autofree uint8_t *out = g_malloc(cluster + 16);
    Error *err = NULL;

    /* Exactly one cluster, nothing written past it */
    memset(out, 0xee, cluster + 16);
    g_assert_cmpint(qcow2_decompress(type, z->data, z->len, out, cluster,
                                     &error_abort), ==, 0);
    g_assert_cmpmem(out, cluster, plain, cluster);
    for (int i = 0; i < 16; i++) {
        g_assert_cmpuint(out[cluster + i], ==, 0xee);
    }
    /* Padding after the data (the rest of the last sector) is fine. */
    g_byte_array_set_size(z, z->len + 300);
    g_assert_cmpint(qcow2_decompress(type, z->data, z->len, out, cluster,
                                     &error_abort), ==, 0);
    g_byte_array_set_size(z, z->len - 300);
    /* Cut short: an error, not a partial cluster */
    g_assert_cmpint(qcow2_decompress(type, z->data, z->len / 2, out, cluster,
                                     &err), ==, -1);
    test_error_expect(&err, "decompression failed");
    /* Garbage */
    memset(z->data, 0xff, z->len);
    g_assert_cmpint(qcow2_decompress(type, z->data, z->len, out, cluster,
                                     &err), ==, -1);
    test_error_expect(&err, "decompression failed");
}

static void test_decompress(void)
{
    const size_t cluster = 65536;
    g_autofree uint8_t *plain = g_malloc(2 * cluster);
    g_autofree uint8_t *out = g_malloc(cluster);
    g_autoptr(GByteArray) z = NULL;
    g_autoptr(GByteArray) zs = g_byte_array_new();

    for (size_t i = 0; i < 2 * cluster; i++) {
        plain[i] = (i * 7) ^ (i >> 9);
    }
    z = deflate_raw(plain, cluster);
    check_decompress(QCOW2_COMPRESSION_ZLIB, z, plain, cluster);

    g_byte_array_set_size(zs, ZSTD_compressBound(cluster));
    g_byte_array_set_size(zs, ZSTD_compress(zs->data, zs->len, plain,
                                            cluster, 3));
    check_decompress(QCOW2_COMPRESSION_ZSTD, zs, plain, cluster);

    /* Data for two clusters: one cluster comes out, no more. */
    g_clear_pointer(&z, g_byte_array_unref);
    z = deflate_raw(plain, 2 * cluster);
    g_assert_cmpint(qcow2_decompress(QCOW2_COMPRESSION_ZLIB, z->data, z->len,
                                     out, cluster, &error_abort), ==, 0);
    g_assert_cmpmem(out, cluster, plain, cluster);
}

/* ---- Whole images */

static void read_all(BlockDriverState *bs, uint8_t *buf, uint64_t len)
{

    g_assert_cmpint(bdrv_pread(bs, 0, buf, len, &error_abort), ==, 0);
}

static void test_read_mapping(Fixture *f, gconstpointer data)
{
    const uint64_t cs = 4096, size = 64 * cs + 1024;
    g_autoptr(Img) img = img_new(12, size, false);
    g_autoptr(BlockDriverState) bs = NULL;
    g_autofree uint8_t *expect = g_malloc0(size);
    g_autofree uint8_t *got = g_malloc(size);
    Qcow2Extent ext;
    uint64_t pnum;
    Error *err = NULL;

    /* Written backwards, so host order is the reverse of guest order. */
    for (int c = 63; c >= 40; c--) {
        img_write(img, c * cs, c);
        memset(expect + c * cs, c, cs);
    }
    img_write(img, 5 * cs, 5);
    memset(expect + 5 * cs, 5, cs);
    /* 6: zero flag over data; 7: unallocated */
    img_write(img, 6 * cs, 6);
    img_set_l2(img, 6 * cs, ldq_be_p(img_l2_entry(img, 6 * cs)) |
               QCOW2_OFLAG_ZERO, 0);
    /* The last, partial cluster (the image ends 1 KiB into it) */
    img_write(img, 64 * cs, 0x64);
    memset(expect + 64 * cs, 0x64, 1024);

    bs = img_open(img, f->path, &error_abort);
    g_assert_cmpstr(bdrv_get_format_name(bs), ==, "qcow2");
    g_assert_cmpint(bdrv_getlength(bs, &err), ==, size);
    read_all(bs, got, size);
    g_assert_cmpmem(got, size, expect, size);
    /* A read across clusters that are not contiguous on the host */
    g_assert_cmpint(bdrv_pread(bs, 41 * cs - 10, got, 20, &err), ==, 0);
    g_assert_cmpmem(got, 20, expect + 41 * cs - 10, 20);

    /* Block status: holes and zero clusters say so, in whole runs. */
    g_assert_false(bdrv_block_status_is_data(bs, 0, size, &pnum));
    g_assert_cmpuint(pnum, ==, 5 * cs);
    g_assert_true(bdrv_block_status_is_data(bs, 5 * cs, size - 5 * cs,
                                            &pnum));
    g_assert_cmpuint(pnum, ==, cs);
    /* A zero cluster and the unallocated ones after it: one run */
    g_assert_false(bdrv_block_status_is_data(bs, 6 * cs, size - 6 * cs,
                                             &pnum));
    g_assert_cmpuint(pnum, ==, 34 * cs);
    g_assert_false(bdrv_block_status_is_data(bs, 7 * cs, size - 7 * cs,
                                             &pnum));
    g_assert_cmpuint(pnum, ==, 33 * cs);
    g_assert_true(bdrv_block_status_is_data(bs, 40 * cs, size - 40 * cs,
                                            &pnum));
    g_assert_cmpuint(pnum, ==, size - 40 * cs);

    /* The mapping: one cluster per extent, host order being reversed. */
    g_assert_cmpint(qcow2_get_extent(bs, 40 * cs, size - 40 * cs, &ext,
                                     &error_abort), ==, 0);
    g_assert_cmpint(ext.type, ==, QCOW2_SC_NORMAL);
    g_assert_cmpuint(ext.bytes, ==, cs);
    g_assert_cmpuint(ext.host_offset, >, 0);
    g_assert_cmpint(qcow2_get_extent(bs, 41 * cs + 5, cs, &ext,
                                     &error_abort), ==, 0);
    g_assert_cmpuint(ext.bytes, ==, cs - 5);
    g_assert_cmpuint(ext.host_offset % cs, ==, 5);
    g_assert_cmpint(qcow2_get_extent(bs, 0, size, &ext, &error_abort),
                    ==, 0);
    g_assert_cmpint(ext.type, ==, QCOW2_SC_UNALLOCATED);
    g_assert_cmpuint(ext.bytes, ==, 5 * cs);
}

static void test_read_subclusters(Fixture *f, gconstpointer data)
{
    const uint64_t cs = 16384, sc = cs / 32, size = 4 * cs;
    g_autoptr(Img) img = img_new(14, size, true);
    g_autoptr(BlockDriverState) bs = NULL;
    g_autofree uint8_t *expect = g_malloc0(size);
    g_autofree uint8_t *got = g_malloc(size);
    uint64_t host, pnum;

    /* Cluster 1: subclusters 0-3 allocated, 4 zero, 5+ unallocated */
    host = img_write(img, cs, 0x5c);
    img_set_l2(img, cs, host | QCOW2_OFLAG_COPIED, 0xfull | (1ull << 36));
    memset(expect + cs, 0x5c, 4 * sc);

    bs = img_open(img, f->path, &error_abort);
    read_all(bs, got, size);
    g_assert_cmpmem(got, size, expect, size);
    g_assert_true(bdrv_block_status_is_data(bs, cs, size - cs, &pnum));
    g_assert_cmpuint(pnum, ==, 4 * sc);
    g_assert_false(bdrv_block_status_is_data(bs, cs + 4 * sc, sc, &pnum));
    g_assert_cmpuint(pnum, ==, sc);
}

/* 16 TiB, sparse: opens in little memory, reads as zeroes. */
/*
 * bdrv_block_status(), QEMU's flags as "qemu-img map" shows them: with no
 * backing file unallocated clusters are zeroes, not allocated; data and a
 * zero cluster that keeps its host cluster give their host offset in the
 * image file; a run of data stops where the host offsets jump.
 */
static void test_block_status(Fixture *f, gconstpointer data)
{
    const uint64_t cs = 4096, size = 16 * cs;
    g_autoptr(Img) img = img_new(12, size, false);
    g_autoptr(BlockDriverState) bs = NULL;
    BlockDriverState *file = NULL;
    uint64_t pnum, map, host5, host6, host9;
    const int data_at = BDRV_BLOCK_DATA | BDRV_BLOCK_OFFSET_VALID |
                        BDRV_BLOCK_ALLOCATED;

    host5 = img_write(img, 5 * cs, 5);
    host6 = img_write(img, 6 * cs, 6);
    img_set_l2(img, 6 * cs, host6 | QCOW2_OFLAG_ZERO, 0);
    img_write(img, 8 * cs, 8);
    host9 = img_write(img, 9 * cs, 9);
    /* 9 before 8 on the host: two runs */
    img_set_l2(img, 8 * cs, host9 | QCOW2_OFLAG_COPIED, 0);
    img_set_l2(img, 9 * cs, (host9 - cs) | QCOW2_OFLAG_COPIED, 0);
    bs = img_open(img, f->path, &error_abort);

    g_assert_cmpint(bdrv_block_status(bs, 0, size, &pnum, &map, &file,
                                      &error_abort), ==, BDRV_BLOCK_ZERO);
    g_assert_cmpuint(pnum, ==, 5 * cs);
    g_assert_cmpint(bdrv_block_status(bs, 5 * cs + 100, size, &pnum, &map,
                                      &file, &error_abort), ==, data_at);
    g_assert_cmpuint(pnum, ==, cs - 100);
    g_assert_cmpuint(map, ==, host5 + 100);
    g_assert_cmpstr(bdrv_get_filename(file), ==, f->path);
    g_assert_cmpint(bdrv_block_status(bs, 6 * cs, size, &pnum, &map, &file,
                                      &error_abort), ==,
                    BDRV_BLOCK_ZERO | BDRV_BLOCK_OFFSET_VALID |
                    BDRV_BLOCK_ALLOCATED);
    g_assert_cmpuint(pnum, ==, cs);
    g_assert_cmpuint(map, ==, host6);
    g_assert_cmpint(bdrv_block_status(bs, 8 * cs, size, &pnum, &map, NULL,
                                      &error_abort), ==, data_at);
    g_assert_cmpuint(pnum, ==, cs);
    g_assert_cmpuint(map, ==, host9);
    g_assert_cmpint(bdrv_block_status(bs, 9 * cs, size, &pnum, &map, NULL,
                                      &error_abort), ==, data_at);
    g_assert_cmpuint(map, ==, host9 - cs);
    /* The last run ends the image; past the end there is nothing. */
    g_assert_cmpint(bdrv_block_status(bs, 10 * cs, size, &pnum, NULL, NULL,
                                      &error_abort), ==,
                    BDRV_BLOCK_ZERO | BDRV_BLOCK_EOF);
    g_assert_cmpuint(pnum, ==, 6 * cs);
    g_assert_cmpint(bdrv_block_status(bs, size, cs, &pnum, NULL, NULL,
                                      &error_abort), ==, BDRV_BLOCK_EOF);
    g_assert_cmpuint(pnum, ==, 0);
}

static void test_read_sparse_16t(Fixture *f, gconstpointer data)
{
    g_autoptr(Img) img = img_new(16, 16ull << 40, false);
    g_autoptr(BlockDriverState) bs = NULL;
    uint8_t buf[4096], zero[4096] = { 0 };
    BDRVQcow2State *s;
    uint64_t pnum;

    img_write(img, 8ull << 40, 0x88);
    bs = img_open(img, f->path, &error_abort);
    s = bs->opaque;
    /* The L1 table (256 KiB) and at most one L2 table so far */
    g_assert_cmpuint(s->l1_size, ==, 32768);
    g_assert_cmpint(bdrv_pread(bs, (16ull << 40) - 4096, buf, 4096,
                               &error_abort), ==, 0);
    g_assert_cmpmem(buf, 4096, zero, 4096);
    g_assert_cmpint(bdrv_pread(bs, 8ull << 40, buf, 4096, &error_abort), ==, 0);
    g_assert_cmpuint(buf[0], ==, 0x88);
    g_assert_cmpuint(qcow2_cache_memory(s->l2_cache), <=, 65536);
    /* Holes of many L2 tables' spans (512 MiB each) join in one answer. */
    g_assert_false(bdrv_block_status_is_data(bs, 0, 16ull << 40, &pnum));
    g_assert_cmpuint(pnum, >=, 512ull << 30);
    g_assert_cmpuint(pnum % (512ull << 20), ==, 0);
    g_assert_cmpuint(pnum, <=, 8ull << 40);
    /* ... and stop at the data. */
    g_assert_false(bdrv_block_status_is_data(bs, (8ull << 40) - (1 << 20),
                                             16ull << 40, &pnum));
    g_assert_cmpuint(pnum, ==, 1 << 20);
}

/* More L2 tables than the cache holds: memory stays at the cap. */
static void test_read_cache_bound(Fixture *f, gconstpointer data)
{
    /* 512-byte clusters: an L2 table maps 32 KiB; 2000 tables. */
    const uint64_t span = 64 * 512, ntables = 2000;
    g_autoptr(Img) img = img_new(9, ntables * span, false);
    g_autoptr(BlockDriverState) bs = NULL;
    BDRVQcow2State *s;

    for (uint64_t t = 0; t < ntables; t++) {
        img_write(img, t * span + 512, t & 0xff);
    }
    img_save(img, f->path);
    bs = bdrv_open(f->path, "qcow2", NULL, 0, &error_abort);
    s = bs->opaque;
    for (int pass = 0; pass < 2; pass++) {
        for (uint64_t t = 0; t < ntables; t++) {
            uint8_t b = 0xaa;

            g_assert_cmpint(bdrv_pread(bs, t * span + 513, &b, 1, &error_abort),
                            ==, 0);
            g_assert_cmpuint(b, ==, t & 0xff);
        }
    }
    g_assert_cmpuint(qcow2_cache_capacity(s->l2_cache), <, ntables);
    g_assert_cmpuint(qcow2_cache_memory(s->l2_cache), <=,
                     qcow2_cache_capacity(s->l2_cache) * 512);
}

/* Broken tables are found on the read that meets them, with a message. */
static void test_read_hostile(Fixture *f, gconstpointer data)
{
    struct {
        uint64_t l1e;       /* 0: leave the L1 entry */
        uint64_t l2e;
        const char *error;
    } cases[] = {
        { 0x10200 | QCOW2_OFLAG_COPIED, 0, "L2 table offset 0x10200 "
          "unaligned" },
        { (1ull << 40) | QCOW2_OFLAG_COPIED, 0, "beyond the end of the file" },
        { 0, 0x30200 | QCOW2_OFLAG_COPIED, "offset 0x30200 unaligned" },
        { 0, QCOW2_OFLAG_COMPRESSED | (2ull << 54) | 0x200,
          "Compressed cluster at guest offset 0" },
    };

    for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_autoptr(Img) img = img_new(16, 1ull << 30, false);
        g_autoptr(BlockDriverState) bs = NULL;
        uint8_t buf[512];
        Error *err = NULL;

        img_write(img, 0, 1);
        if (cases[i].l1e) {
            stq_be_p(img->buf->data + img->l1_offset, cases[i].l1e);
        } else {
            img_set_l2(img, 0, cases[i].l2e, 0);
        }
        bs = img_open(img, f->path, &error_abort);
        g_assert_cmpint(bdrv_pread(bs, 0, buf, sizeof(buf), &err), ==, -1);
        test_error_expect(&err, cases[i].error);
    }
}

/* Refused at open: unknown features by their name, writes, bad options. */
static void test_open_refused(Fixture *f, gconstpointer data)
{
    g_autoptr(Img) img = img_new(16, 1ull << 30, false);
    uint8_t feature[48] = { 0, 9 };
    BlockDriverState *bs;
    Error *err = NULL;

    memcpy(feature + 2, "frobnication", 12);
    put_ext(img->buf->data + 112, QCOW2_EXT_FEATURE_TABLE, feature, 48);
    stq_be_p(img->buf->data + 72, 1ull << 9);
    bs = img_open(img, f->path, &err);
    g_assert_null(bs);
    test_error_expect(&err, "Unsupported qcow2 feature(s): frobnication");

    stq_be_p(img->buf->data + 72, 1ull << 10);
    bs = img_open(img, f->path, &err);
    g_assert_null(bs);
    test_error_expect(&err, "Unknown incompatible feature: 400");

    /* Read-write (the write path, qcow2-write.c): not a dirty image. */
    stq_be_p(img->buf->data + 72, QCOW2_INCOMPAT_DIRTY);
    img_save(img, f->path);
    bs = bdrv_open(f->path, "qcow2", NULL, BDRV_O_RDWR, &err);
    g_assert_null(bs);
    test_error_expect(&err, "cannot be written by qemu-img-lite: its dirty "
                      "bit is set");

    /* An external data file is named by the image or the options. */
    stq_be_p(img->buf->data + 72, QCOW2_INCOMPAT_DATA_FILE);
    bs = img_open(img, f->path, &err);
    g_assert_null(bs);
    test_error_expect(&err, "'data-file' is required");
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/qcow2/header/valid", test_header_valid);
    g_test_add_func("/qcow2/header/hostile", test_header_hostile);
    g_test_add_func("/qcow2/header/short", test_header_short);
    g_test_add_func("/qcow2/header/features", test_header_features);
    g_test_add_func("/qcow2/header/v2", test_header_v2);
    g_test_add_func("/qcow2/extensions/valid", test_extensions);
    g_test_add_func("/qcow2/extensions/build-data-file",
                    test_extensions_build_data_file);
    g_test_add_func("/qcow2/extensions/hostile", test_extensions_hostile);
    g_test_add_func("/qcow2/extensions/crypto", test_extensions_crypto);
    g_test_add_func("/qcow2/validate-table", test_validate_table);
    g_test_add_func("/qcow2/l2-entry/standard", test_l2_entry_standard);
    g_test_add_func("/qcow2/l2-entry/subclusters", test_l2_entry_subclusters);
    g_test_add_func("/qcow2/l2-entry/compressed", test_compressed_extent);
    g_test_add_func("/qcow2/refcount/widths", test_refcount_widths);
    g_test_add("/qcow2/refcount/read", Fixture, NULL, fixture_setup,
               test_refcount_read, fixture_teardown);
    g_test_add_func("/qcow2/cache/bound", test_cache_bound);
    g_test_add_func("/qcow2/decompress", test_decompress);
    g_test_add("/qcow2/read/mapping", Fixture, NULL, fixture_setup,
               test_read_mapping, fixture_teardown);
    g_test_add("/qcow2/read/subclusters", Fixture, NULL, fixture_setup,
               test_read_subclusters, fixture_teardown);
    g_test_add("/qcow2/block-status", Fixture, NULL, fixture_setup,
               test_block_status, fixture_teardown);
    g_test_add("/qcow2/read/sparse-16t", Fixture, NULL, fixture_setup,
               test_read_sparse_16t, fixture_teardown);
    g_test_add("/qcow2/read/cache-bound", Fixture, NULL, fixture_setup,
               test_read_cache_bound, fixture_teardown);
    g_test_add("/qcow2/read/hostile", Fixture, NULL, fixture_setup,
               test_read_hostile, fixture_teardown);
    g_test_add("/qcow2/open/refused", Fixture, NULL, fixture_setup,
               test_open_refused, fixture_teardown);
    return g_test_run();
}
