/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Finding an image's format from its bytes, at both tables:
 *
 * - the block layer's (block/block.c, bdrv_probe_all): every format
 *   driver scores the start of the file (and the end, for a format marked
 *   there) and the best wins; raw, which takes anything, only when no
 *   other claims it. The formats qemu-img knows and we do not read
 *   (block/foreign.c) are claimed, from headers built here after each
 *   format's spec, so that they are refused by name and never read as
 *   raw;
 * - the crypto layer's (crypto/block.c): LUKS1 and LUKS2 share the magic,
 *   and the header's version picks the driver on open (luks_version on
 *   create); a damaged LUKS2 primary header is still found through its
 *   secondary copy.
 *
 * The LUKS images are made in memory with cheap key derivation.
 */
#include <string.h>
#include <unistd.h>

#include "block/block_int.h"
#include "luks-test-image.h"
#include "test-error.h"

static const char pass[] = "probe";

/* A new LUKS image of version (1 or 2) in memory. */
static TestImage *make_luks(int version)
{
    QCryptoBlockCreateOptions opts;
    g_autoptr(TestImage) img = test_image_new();
    g_autoptr(QCryptoBlock) block = NULL;

    qcrypto_block_create_options_init(&opts);
    opts.secret = test_secret(pass);
    opts.luks_version = version;
    opts.has_iter_time = true;
    opts.iter_time = 10;
    if (version == 2) {
        opts.has_kdf = true;
        opts.kdf = QCRYPTO_BLOCK_KDF_PBKDF2;    /* not 1 GiB of argon2 */
    }
    block = qcrypto_block_create(&opts, test_image_init, test_image_write,
                                 img, &error_abort);
    g_assert_nonnull(block);
    return g_steal_pointer(&img);
}

/* What the block layer's probe picks from the first len bytes of img. */
static const char *probe(const TestImage *img, size_t len)
{
    const BlockDriver *drv;

    g_assert_cmpuint(len, <=, img->buf->len);
    drv = bdrv_probe_all(img->buf->data, MIN(len, BDRV_PROBE_BUF_SIZE), NULL, 0,
                         "image.img");
    return drv ? drv->format_name : NULL;
}

/* The LUKS version of img as the crypto layer opens it (header only). */
static int open_version(TestImage *img, Error **errp)
{
    g_autoptr(QCryptoBlock) block = test_image_open(img, NULL, 0, errp);
    g_autoptr(QCryptoBlockInfo) info = NULL;

    if (!block) {
        return -1;
    }
    info = qcrypto_block_get_info(block, errp);
    return info ? info->version : -1;
}

static void test_luks1(void)
{
    g_autoptr(TestImage) img = make_luks(1);

    g_assert_cmpstr(probe(img, img->buf->len), ==, "luks");
    /* A magic is certain; raw is the guess of last resort. */
    g_assert_cmpint(bdrv_luks.bdrv_probe(img->buf->data, img->buf->len,
                                         "x"), ==, 100);
    g_assert_cmpint(bdrv_raw.bdrv_probe(img->buf->data, img->buf->len,
                                        "x"), ==, 1);
    g_assert_cmpint(open_version(img, &error_abort), ==, 1);
}

static void test_luks2(void)
{
    g_autoptr(TestImage) img = make_luks(2);

    g_assert_cmpstr(probe(img, img->buf->len), ==, "luks");
    g_assert_cmpint(open_version(img, &error_abort), ==, 2);
}

/* luks_version 0 is the format's default: LUKS1, what QEMU opens too. */
static void test_create_default_version(void)
{
    g_autoptr(TestImage) img = make_luks(0);

    g_assert_cmpint(open_version(img, &error_abort), ==, 1);
}

static void test_create_unknown_version(void)
{
    QCryptoBlockCreateOptions opts;
    g_autoptr(TestImage) img = test_image_new();
    g_autoptr(Error) err = NULL;
    uint64_t offset;

    qcrypto_block_create_options_init(&opts);
    opts.secret = test_secret(pass);
    opts.luks_version = 3;
    g_assert_null(qcrypto_block_create(&opts, test_image_init,
                                       test_image_write, img, &err));
    g_assert_cmpstr(error_get_pretty(err), ==,
                    "Unsupported LUKS version 3 (1 or 2)");
    error_free_or_abort(&err);
    g_assert_cmpint(qcrypto_block_calculate_payload_offset(&opts, &offset,
                                                           &err), ==, -1);
    g_assert_cmpstr(error_get_pretty(err), ==,
                    "Unsupported LUKS version 3 (1 or 2)");
    /* nothing was written */
    g_assert_cmpuint(img->buf->len, ==, 0);
}

/*
 * The version field alone picks the driver: a LUKS1 header that says 2
 * goes to the LUKS2 driver (which finds no LUKS2 header in it), and the
 * reverse to the LUKS1 driver.
 */
static void test_version_picks_driver(void)
{
    g_autoptr(TestImage) v1 = make_luks(1);
    g_autoptr(TestImage) v2 = make_luks(2);
    g_autoptr(Error) err = NULL;

    v1->buf->data[7] = 2;
    g_assert_cmpstr(probe(v1, v1->buf->len), ==, "luks");
    g_assert_cmpint(open_version(v1, &err), ==, -1);
    test_error_expect(&err, "No valid LUKS2 header");

    v2->buf->data[7] = 1;
    g_assert_cmpstr(probe(v2, v2->buf->len), ==, "luks");
    g_assert_cmpint(open_version(v2, &err), ==, -1);
    /* LUKS1 reads LUKS2's header size and label as its cipher's name. */
    test_error_expect(&err, "Unsupported LUKS cipher");
}

/*
 * A version no driver has: not LUKS to the block layer's probe, and on an
 * explicit open the format's first driver (LUKS1) says why.
 */
static void test_unknown_version(void)
{
    g_autoptr(TestImage) img = make_luks(1);
    g_autoptr(Error) err = NULL;

    img->buf->data[7] = 3;
    g_assert_cmpstr(probe(img, img->buf->len), ==, "raw");
    g_assert_cmpint(open_version(img, &err), ==, -1);
    g_assert_cmpstr(error_get_pretty(err), ==,
                    "LUKS version 3 is not supported by the LUKS1 driver");
}

/*
 * A LUKS2 image whose primary header lost its magic: the block layer's
 * probe, which sees only the start of the file, takes it for raw, but
 * opened as LUKS the LUKS2 driver's probe() finds the secondary copy.
 */
static void test_luks2_damaged_primary(void)
{
    g_autoptr(TestImage) img = make_luks(2);
    g_autoptr(QCryptoBlock) block = NULL;

    memset(img->buf->data, 0, 6);
    g_assert_cmpstr(probe(img, img->buf->len), ==, "raw");
    block = test_image_open(img, NULL, 0, &error_abort);
    g_assert_nonnull(block);
    g_assert_nonnull(strstr(qcrypto_block_get_warning(block),
                            "primary header is damaged"));
}

/* Bytes no format claims: raw, whatever their length (even none). */
static void test_raw_fallback(void)
{
    static const uint8_t text[] = "just some data, no header";
    g_autofree uint8_t *zero = g_malloc0(BDRV_PROBE_BUF_SIZE);
    const uint8_t empty[1] = { 0 };

    g_assert_true(bdrv_probe_all(zero, BDRV_PROBE_BUF_SIZE, NULL, 0, "a.img") ==
                  &bdrv_raw);
    g_assert_true(bdrv_probe_all(text, sizeof(text), NULL, 0, "a.luks") ==
                  &bdrv_raw);
    g_assert_true(bdrv_probe_all(empty, 0, NULL, 0, "") == &bdrv_raw);
    /* Only the bytes count, not the name. */
    g_assert_cmpint(bdrv_luks.bdrv_probe(text, sizeof(text), "x.luks"), ==,
                    0);
}

/* A header cut short: the magic and the version (8 bytes) are needed. */
static void test_truncated(void)
{
    g_autoptr(TestImage) img = make_luks(1);
    g_autoptr(Error) err = NULL;

    g_assert_cmpstr(probe(img, 6), ==, "raw");
    g_assert_cmpstr(probe(img, 7), ==, "raw");
    g_assert_cmpstr(probe(img, 8), ==, "luks");

    /* Opened as LUKS, the LUKS1 driver says the header is cut short. */
    g_byte_array_set_size(img->buf, 100);
    g_assert_cmpint(open_version(img, &err), ==, -1);
    test_error_expect(&err, "too small for a LUKS header");
}

/* What the block layer's probe picks for a whole file of len bytes. */
static const char *probe_file(const uint8_t *buf, size_t len)
{
    size_t tail_len = MIN(len, BDRV_PROBE_TAIL_SIZE);
    const BlockDriver *drv;

    drv = bdrv_probe_all(buf, MIN(len, BDRV_PROBE_BUF_SIZE),
                         buf + len - tail_len, tail_len, "image.img");
    return drv ? drv->format_name : NULL;
}

static const char *probe_bytes(const GByteArray *img)
{
    return probe_file(img->data, img->len);
}

static void put_le32(uint8_t *p, uint32_t v)
{
    v = GUINT32_TO_LE(v);
    memcpy(p, &v, sizeof(v));
}

static void put_be32(uint8_t *p, uint32_t v)
{
    v = GUINT32_TO_BE(v);
    memcpy(p, &v, sizeof(v));
}

/* size bytes of zeroes, then text at offset. */
static GByteArray *bytes_with(size_t size, size_t offset, const void *text,
                              size_t len)
{
    GByteArray *img = g_byte_array_sized_new(size);

    g_byte_array_set_size(img, size);
    memset(img->data, 0, size);
    g_assert_cmpuint(offset + len, <=, size);
    memcpy(img->data + offset, text, len);
    return img;
}

/* A file of data_size bytes of disk data, then text (a footer). */
static GByteArray *with_footer(size_t data_size, const void *text,
                               size_t len)
{
    GByteArray *img = bytes_with(data_size + len, data_size, text, len);

    memset(img->data, 0xa5, data_size);
    return img;
}

/* VMDK4 sparse extent header (VMware "Virtual Disk Format 1.1"). */
static GByteArray *make_vmdk4(void)
{
    GByteArray *img = bytes_with(65536, 0, "KDMV", 4);

    put_le32(img->data + 4, 1);          /* version */
    return img;
}

/*
 * VirtualBox VDI: 64 bytes of text, then the signature and version 1.1
 * (little-endian), in a 512-byte header.
 */
static GByteArray *make_vdi(size_t size, size_t signature_offset)
{
    static const char text[] = "<<< Oracle VM VirtualBox Disk Image >>>\n";
    GByteArray *img = bytes_with(size, 0, text, strlen(text));

    put_le32(img->data + signature_offset, 0xbeda107f);
    put_le32(img->data + signature_offset + 4, 0x00010001);
    return img;
}

/* The 512-byte VHD footer: cookie "conectix", big-endian fields. */
static void fill_vhd_footer(uint8_t *p, bool fixed)
{
    memcpy(p, "conectix", 8);
    put_be32(p + 8, 2);                  /* features: reserved bit */
    put_be32(p + 12, 0x00010000);        /* file format version 1.0 */
    put_be32(p + 60, fixed ? 2 : 3);     /* disk type */
}

/* A fixed VHD: the disk's bytes, then the footer (and nothing else). */
static GByteArray *make_vhd_fixed(size_t disk_size)
{
    uint8_t footer[512] = { 0 };

    fill_vhd_footer(footer, true);
    return with_footer(disk_size, footer, sizeof(footer));
}

/* qcow (and qcow2): magic "QFI\xfb" and version, big-endian. */
static GByteArray *make_qcow(size_t size, uint32_t version)
{
    GByteArray *img = bytes_with(size, 0, "QFI\xfb", 4);

    put_be32(img->data + 4, version);
    return img;
}

/* Parallels: 16-byte magic, version (LE) 2, in a 64-byte header. */
static GByteArray *make_parallels(const char *magic, uint32_t version)
{
    GByteArray *img = bytes_with(1 << 20, 0, magic, 16);

    put_le32(img->data + 16, version);
    return img;
}

/*
 * Apple UDIF (dmg): a data fork from byte 0, then the 512-byte "koly"
 * trailer: version 4 and header size 512, big-endian.
 */
static GByteArray *make_dmg(uint32_t header_size)
{
    uint8_t koly[512] = { 'k', 'o', 'l', 'y' };

    put_be32(koly + 4, 4);
    put_be32(koly + 8, header_size);
    return with_footer(8192, koly, sizeof(koly));
}

/* cloop 2.0: the shell script, then block size and count (BE) at 128. */
static const char cloop_script[] = "#!/bin/sh\n#V2.0 Format\n"
    "modprobe cloop file=$0 && mount -r -t iso9660 /dev/cloop $1\n";

static GByteArray *make_cloop(size_t script_len)
{
    GByteArray *img = bytes_with(1024, 0, cloop_script, script_len);

    put_be32(img->data + 128, 65536);
    put_be32(img->data + 132, 1);
    return img;
}

/*
 * Bochs redolog: NUL-terminated magic (32 bytes), type (16), subtype
 * (16), then version (LE) and header size, in a 512-byte header.
 */
static GByteArray *make_bochs(const char *magic, const char *subtype,
                              uint32_t version)
{
    GByteArray *img = bytes_with(1024, 0, magic, strlen(magic));

    memcpy(img->data + 32, "Redolog", strlen("Redolog"));
    memcpy(img->data + 48, subtype, strlen(subtype));
    put_le32(img->data + 64, version);
    put_le32(img->data + 68, 512);
    return img;
}

static void assert_probe(GByteArray *img, const char *format)
{
    g_assert_cmpstr(probe_bytes(img), ==, format);
    g_byte_array_unref(img);
}

/* The magic numbers at the start of the file, each QEMU's score 100. */
static void test_foreign_headers(void)
{
    static const char qed[64] = "QED";

    assert_probe(make_vmdk4(), "vmdk");
    assert_probe(bytes_with(2048, 0, "COWD", 4), "vmdk");
    assert_probe(bytes_with(8 << 20, 0, "vhdxfile", 8), "vhdx");
    assert_probe(make_vdi(1024, 0x40), "vdi");
    assert_probe(bytes_with(2560, 0, "conectix", 8), "vpc");
    assert_probe(bytes_with(327680, 0, qed, sizeof(qed)), "qed");
    assert_probe(make_qcow(560, 1), "qcow");
    assert_probe(make_parallels("WithoutFreeSpace", 2), "parallels");
    assert_probe(make_parallels("WithouFreSpacExt", 2), "parallels");
    assert_probe(make_bochs("Bochs Virtual HD Image", "Growing", 0x20000),
                 "bochs");
    assert_probe(make_bochs("Bochs Virtual HD Image", "Undoable", 0x10000),
                 "bochs");
    assert_probe(make_cloop(strlen(cloop_script)), "cloop");

    g_assert_cmpint(bdrv_vhdx.bdrv_probe((const uint8_t *)"vhdxfile", 8,
                                         "x"), ==, 100);
    g_assert_cmpint(bdrv_cloop.bdrv_probe((const uint8_t *)cloop_script,
                                          strlen(cloop_script), "x"), ==, 2);
}

/* A magic in the wrong place, a wrong version, a header cut short: raw. */
static void test_foreign_near_misses(void)
{
    static const char qed[64] = "QED";

    assert_probe(make_vdi(1024, 0x44), "raw");
    assert_probe(make_vdi(511, 0x40), "raw");
    assert_probe(bytes_with(63, 0, qed, sizeof(qed) - 1), "raw");
    assert_probe(bytes_with(64, 0, "QEDX", 4), "raw");
    assert_probe(make_qcow(47, 1), "raw");
    assert_probe(make_parallels("WithoutFreeSpace", 1), "raw");
    assert_probe(make_parallels("WithoutFreeSpacX", 2), "raw");
    assert_probe(make_bochs("Bochs Virtual HD Image", "Growing", 0x30000),
                 "raw");
    /* The magic must end with its NUL, as QEMU's strcmp() reads it. */
    assert_probe(make_bochs("Bochs Virtual HD ImageX", "Growing", 0x20000),
                 "raw");
    /* Only the whole script: any text may start with "#!/bin/sh". */
    assert_probe(make_cloop(strlen(cloop_script) - 1), "raw");
    assert_probe(bytes_with(7, 0, "vhdxfil", 7), "raw");
    assert_probe(bytes_with(3, 0, "KDM", 3), "raw");
}

/*
 * qcow2 shares qcow's magic with versions 2 and 3: those are not qcow
 * (qcow2's own driver claims them), nor is a version neither knows.
 */
static void test_foreign_qcow_versions(void)
{
    for (uint32_t version = 0; version <= 4; version++) {
        g_autoptr(GByteArray) img = make_qcow(1024, version);

        g_assert_cmpint(bdrv_qcow.bdrv_probe(img->data, img->len, "x"), ==,
                        version == 1 ? 100 : 0);
        g_assert_true((bdrv_probe_all(img->data, img->len, NULL, 0, "x") ==
                       &bdrv_qcow) == (version == 1));
    }
}

/*
 * A VMDK text descriptor: comments and blank lines, then "version=1",
 * "2" or "3" on its own line, LF or CRLF (as QEMU's vmdk_probe()).
 */
static void test_foreign_vmdk_descriptor(void)
{
    static const struct {
        const char *text;
        const char *format;
    } cases[] = {
        { "# Disk DescriptorFile\nversion=1\nCID=fffffffe\n"
          "createType=\"monolithicFlat\"\n", "vmdk" },
        { "# Disk DescriptorFile\r\nversion=3\r\nCID=1\r\n", "vmdk" },
        /* an empty line too, where QEMU's probe gives up */
        { "   \n# comment\n\nversion=2\n", "vmdk" },
        { "version=1\n", "vmdk" },
        /* no such version, a line that is not "version=", no newline */
        { "# Disk DescriptorFile\nversion=4\n", "raw" },
        { "CID=fffffffe\nversion=1\n", "raw" },
        { " x\nversion=1\n", "raw" },
        { "version=1", "raw" },
        { "version=12\n", "raw" },
        { "# Disk DescriptorFile\n", "raw" },
    };

    for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
        const char *text = cases[i].text;

        g_assert_cmpstr(probe_file((const uint8_t *)text, strlen(text)), ==,
                        cases[i].format);
    }
}

/*
 * Formats marked at the end of the file, which QEMU's probes never see
 * (it takes a fixed VHD for raw): the last 512 bytes are a VHD footer or
 * a UDIF trailer, and nothing follows them.
 */
static void test_foreign_tails(void)
{
    g_autoptr(GByteArray) vhd = make_vhd_fixed(8 << 20);
    g_autoptr(GByteArray) dmg = make_dmg(512);
    const uint8_t *vhd_tail = vhd->data + vhd->len - 512;

    g_assert_cmpstr(probe_bytes(vhd), ==, "vpc");
    g_assert_cmpstr(probe_bytes(dmg), ==, "dmg");
    g_assert_cmpint(bdrv_vpc.bdrv_probe_tail(vhd_tail, 512), ==, 50);
    g_assert_cmpint(bdrv_vpc.bdrv_probe(vhd->data, 4096, "x"), ==, 0);
    /* The footer alone, as a file: still a (zero-sized) fixed VHD. */
    g_assert_cmpstr(probe_file(vhd_tail, 512), ==, "vpc");
    g_assert_cmpstr(probe_file(vhd_tail + 1, 511), ==, "raw");

    /* A byte after the footer: it is no longer at the end. */
    g_byte_array_append(vhd, (const guint8 *)"", 1);
    g_assert_cmpstr(probe_bytes(vhd), ==, "raw");
    /* "koly" with another header size is no UDIF trailer. */
    assert_probe(make_dmg(0), "raw");
    /* A trailer at the start means nothing. */
    g_assert_cmpstr(probe_file(dmg->data + dmg->len - 512, 512), ==, "dmg");
    assert_probe(bytes_with(4096, 0, dmg->data + dmg->len - 512, 512),
                 "raw");
    /* The name says nothing (QEMU takes "x.dmg" for a dmg by name). */
    g_assert_true(bdrv_probe_all(dmg->data, 4096, NULL, 0, "x.dmg") ==
                  &bdrv_raw);
}

/*
 * A footer is weaker than a header: a LUKS image whose last bytes look
 * like a VHD footer stays LUKS. A dynamic VHD, whose footer is both at
 * the start and the end, is vpc.
 */
static void test_foreign_header_beats_tail(void)
{
    g_autoptr(TestImage) img = make_luks(1);
    uint8_t footer[512] = { 0 };

    fill_vhd_footer(footer, true);
    g_byte_array_append(img->buf, footer, sizeof(footer));
    g_assert_cmpstr(probe_bytes(img->buf), ==, "luks");

    fill_vhd_footer(footer, false);
    {
        g_autoptr(GByteArray) dyn = with_footer(0, footer, sizeof(footer));

        g_byte_array_append(dyn, footer, sizeof(footer));
        g_assert_cmpstr(probe_bytes(dyn), ==, "vpc");
    }
}

/* Write img into dir/name; the path. */
static char *write_file(const char *dir, const char *name,
                        const GByteArray *img)
{
    char *path = g_build_filename(dir, name, NULL);

    g_assert_true(g_file_set_contents(path, (const char *)img->data,
                                      img->len, NULL));
    return path;
}

/*
 * Opened, a foreign image is refused by name, however it is opened; the
 * user may still ask for its bytes as raw. Named by the user for a file
 * of another format, the format is said to be unsupported; created or
 * measured, likewise, and no file is made.
 */
static void test_foreign_open(void)
{
    g_autofree char *dir = g_dir_make_tmp("test-block-probe-XXXXXX", NULL);
    g_autoptr(GByteArray) vmdk = make_vmdk4();
    g_autoptr(GByteArray) vhd = make_vhd_fixed(1 << 20);
    g_autoptr(GByteArray) data = with_footer(4096, "", 0);
    g_autofree char *vmdk_path = write_file(dir, "a.vmdk", vmdk);
    g_autofree char *vhd_path = write_file(dir, "a.vhd", vhd);
    g_autofree char *raw_path = write_file(dir, "a.raw", data);
    g_autofree char *new_path = g_build_filename(dir, "new.vmdk", NULL);
    g_autoptr(GHashTable) opts = qemu_opts_new();
    g_autoptr(BlockDriverState) bs = NULL;
    g_autoptr(Error) err = NULL;
    BlockMeasureInfo measured;

    g_assert_null(bdrv_open(vmdk_path, NULL, NULL, 0, &err));
    test_error_expect(&err, "This is a vmdk image; qemu-img-lite reads raw");
    g_assert_null(bdrv_open(vhd_path, NULL, NULL, BDRV_O_RDWR, &err));
    test_error_expect(&err, "This is a vpc image; qemu-img-lite reads raw");
    g_assert_null(bdrv_open(vhd_path, "vpc", NULL, 0, &err));
    test_error_expect(&err, "This is a vpc image; qemu-img-lite reads raw");

    g_assert_null(bdrv_open(raw_path, "vmdk", NULL, 0, &err));
    test_error_expect(&err, "Image format 'vmdk' is not supported; "
                      "qemu-img-lite reads raw");

    bs = bdrv_open(vmdk_path, "raw", NULL, 0, &error_abort);
    g_assert_cmpstr(bdrv_get_format_name(bs), ==, "raw");

    g_hash_table_insert(opts, g_strdup("size"), g_strdup("1048576"));
    g_assert_cmpint(bdrv_create("vmdk", new_path, opts, NULL, &err), ==, -1);
    test_error_expect(&err, "Image format 'vmdk' is not supported; "
                      "qemu-img-lite creates raw");
    g_assert_false(g_file_test(new_path, G_FILE_TEST_EXISTS));
    g_assert_cmpint(bdrv_measure("dmg", opts, NULL, 1 << 20, &measured,
                                 &err), ==, -1);
    test_error_expect(&err, "Image format 'dmg' is not supported");

    g_assert_cmpint(unlink(vmdk_path), ==, 0);
    g_assert_cmpint(unlink(vhd_path), ==, 0);
    g_assert_cmpint(unlink(raw_path), ==, 0);
    g_assert_cmpint(rmdir(dir), ==, 0);
}

/* The same through bdrv_open() on files, with no format given. */
static void test_open_file(void)
{
    g_autofree char *dir = g_dir_make_tmp("test-block-probe-XXXXXX", NULL);
    g_autofree char *path = g_build_filename(dir, "img", NULL);
    static const int versions[] = { 1, 2 };

    for (size_t i = 0; i < G_N_ELEMENTS(versions); i++) {
        g_autoptr(TestImage) img = make_luks(versions[i]);
        g_autoptr(BlockDriverState) bs = NULL;
        g_autoptr(BlockImageInfo) info = NULL;

        g_assert_true(g_file_set_contents(path, (char *)img->buf->data,
                                          img->buf->len, NULL));
        bs = bdrv_open(path, NULL, NULL, BDRV_O_NO_IO, &error_abort);
        g_assert_cmpstr(bdrv_get_format_name(bs), ==, "luks");
        info = bdrv_get_image_info(bs, &error_abort);
        g_assert_cmpint(info->luks->version, ==, versions[i]);

        /* Seven bytes of it are no LUKS header: raw. */
        bdrv_close(g_steal_pointer(&bs));
        g_assert_true(g_file_set_contents(path, (char *)img->buf->data, 7,
                                          NULL));
        bs = bdrv_open(path, NULL, NULL, 0, &error_abort);
        g_assert_cmpstr(bdrv_get_format_name(bs), ==, "raw");
    }
    g_assert_cmpint(unlink(path), ==, 0);
    g_assert_cmpint(rmdir(dir), ==, 0);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/block/probe/luks1", test_luks1);
    g_test_add_func("/block/probe/luks2", test_luks2);
    g_test_add_func("/block/probe/raw-fallback", test_raw_fallback);
    g_test_add_func("/block/probe/truncated", test_truncated);
    g_test_add_func("/block/probe/open-file", test_open_file);
    g_test_add_func("/block/probe/foreign/headers", test_foreign_headers);
    g_test_add_func("/block/probe/foreign/near-misses",
                    test_foreign_near_misses);
    g_test_add_func("/block/probe/foreign/qcow-versions",
                    test_foreign_qcow_versions);
    g_test_add_func("/block/probe/foreign/vmdk-descriptor",
                    test_foreign_vmdk_descriptor);
    g_test_add_func("/block/probe/foreign/tails", test_foreign_tails);
    g_test_add_func("/block/probe/foreign/header-beats-tail",
                    test_foreign_header_beats_tail);
    g_test_add_func("/block/probe/foreign/open", test_foreign_open);
    g_test_add_func("/crypto/block/driver/version-picks-driver",
                    test_version_picks_driver);
    g_test_add_func("/crypto/block/driver/unknown-version",
                    test_unknown_version);
    g_test_add_func("/crypto/block/driver/luks2-damaged-primary",
                    test_luks2_damaged_primary);
    g_test_add_func("/crypto/block/driver/create-default-version",
                    test_create_default_version);
    g_test_add_func("/crypto/block/driver/create-unknown-version",
                    test_create_unknown_version);
    return g_test_run();
}
