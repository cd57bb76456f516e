/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * LUKS2 binary headers (LUKS2 spec, binary header): both copies read and
 * checked, the newer valid one chosen, a damaged primary recovered from the
 * secondary with a warning, both written in step; and every metadata size of
 * cryptsetup's luks2_mda_images (16 KiB .. 4 MiB) read and validated.
 */
#include "crypto/luks2priv.h"
#include "luks2-testutil.h"

/* A 16 KiB-header image written by our own header writer. */
static const char small_json[] =
    "{\"keyslots\":{},\"tokens\":{},\"segments\":{},\"digests\":{},"
    "\"config\":{\"json_size\":\"12288\",\"keyslots_size\":\"4161536\"}}";

#define HDR 16384

typedef struct Fixture {
    char *dir;
    char *path;
    int fd;
} Fixture;

static void fixture_setup(Fixture *f, gconstpointer unused)
{
    QCryptoLUKS2Header hdr = {
        .bin = {
            .version = 2, .hdr_size = HDR, .seqid = 7,
            .label = "test label", .checksum_alg = "sha256",
            .uuid = "2a6b8a3e-6b64-4b4c-9a8e-0c5f4c1c7d10",
            .subsystem = "",
        },
    };

    memset(hdr.salt_primary, 0x11, sizeof(hdr.salt_primary));
    memset(hdr.salt_secondary, 0x22, sizeof(hdr.salt_secondary));
    f->dir = test_scratch_new();
    f->path = g_build_filename(f->dir, "hdr.img", NULL);
    f->fd = open(f->path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    g_assert_cmpint(f->fd, >=, 0);
    g_assert_cmpint(ftruncate(f->fd, 4 * 1024 * 1024), ==, 0);
    g_assert_cmpint(qcrypto_luks2_header_write(&hdr, small_json, NULL,
                                               test_file_write, NULL,
                                               GINT_TO_POINTER(f->fd),
                                               &error_abort), ==, 0);
    g_assert_cmpuint(hdr.bin.seqid, ==, 8);
}

static void fixture_teardown(Fixture *f, gconstpointer unused)
{
    close(f->fd);
    g_free(f->path);
    test_scratch_free(f->dir);
}

static QCryptoLUKS2Header *read_hdr(Fixture *f, char **warning,
                                    Error **errp)
{
    return qcrypto_luks2_header_read(NULL, test_file_read,
                                     GINT_TO_POINTER(f->fd), warning, errp);
}

static void poke(Fixture *f, uint64_t offset, const void *data, size_t len)
{
    g_assert_cmpint(pwrite(f->fd, data, len, offset), ==, (ssize_t)len);
}

static void test_roundtrip(Fixture *f, gconstpointer unused)
{
    g_autofree char *warning = NULL;
    g_autoptr(QCryptoLUKS2Header) hdr = read_hdr(f, &warning, &error_abort);
    uint8_t buf[8];

    g_assert_null(warning);
    g_assert_cmpuint(hdr->bin.hdr_size, ==, HDR);
    g_assert_cmpuint(hdr->bin.seqid, ==, 8);
    g_assert_cmpstr(hdr->bin.label, ==, "test label");
    g_assert_cmpstr(hdr->bin.uuid, ==, "2a6b8a3e-6b64-4b4c-9a8e-0c5f4c1c7d10");
    g_assert_cmpstr(hdr->json, ==, small_json);
    g_assert_cmpuint(hdr->salt_primary[0], ==, 0x11);
    g_assert_cmpuint(hdr->salt_secondary[63], ==, 0x22);

    /* The magics of the LUKS2 spec's binary header at 0 and hdr_size */
    g_assert_cmpint(pread(f->fd, buf, 8, 0), ==, 8);
    g_assert_cmpmem(buf, 8, "LUKS\xba\xbe\0\2", 8);
    g_assert_true(qcrypto_luks2_has_format(buf, 8));
    g_assert_cmpint(pread(f->fd, buf, 8, HDR), ==, 8);
    g_assert_cmpmem(buf, 8, "SKUL\xba\xbe\0\2", 8);
    g_assert_false(qcrypto_luks2_has_format(buf, 8));
}

/* A flipped byte anywhere in the primary: the secondary is used. */
static void test_primary_damaged(Fixture *f, gconstpointer data)
{
    uint64_t offset = GPOINTER_TO_UINT(data);
    g_autofree char *warning = NULL;
    g_autoptr(QCryptoLUKS2Header) hdr = NULL;
    uint8_t b;

    g_assert_cmpint(pread(f->fd, &b, 1, offset), ==, 1);
    b ^= 0x40;
    poke(f, offset, &b, 1);

    hdr = read_hdr(f, &warning, &error_abort);
    g_assert_nonnull(hdr);
    g_assert_cmpstr(hdr->json, ==, small_json);
    g_assert_nonnull(warning);
    g_test_message("warning: %s", warning);
    g_assert_nonnull(strstr(warning, "primary header is damaged"));
    g_assert_nonnull(strstr(warning, "using the secondary"));
}

/* The primary wiped entirely: the secondary is found by scanning. */
static void test_primary_wiped(Fixture *f, gconstpointer unused)
{
    g_autofree uint8_t *zero = g_malloc0(HDR);
    g_autofree char *warning = NULL;
    g_autoptr(QCryptoLUKS2Header) hdr = NULL;

    poke(f, 0, zero, HDR);
    hdr = read_hdr(f, &warning, &error_abort);
    g_assert_nonnull(hdr);
    g_assert_nonnull(warning);
    g_assert_nonnull(strstr(warning, "no LUKS2 magic"));
}

static void test_both_damaged(Fixture *f, gconstpointer unused)
{
    g_autoptr(Error) err = NULL;
    g_autofree char *warning = NULL;
    g_autoptr(QCryptoLUKS2Header) hdr = NULL;

    poke(f, 5000, "x", 1);
    poke(f, HDR + 5000, "x", 1);
    hdr = read_hdr(f, &warning, &err);
    g_assert_null(hdr);
    g_assert_nonnull(err);
    g_assert_nonnull(strstr(error_get_pretty(err), "checksum mismatch"));
}

/* An interrupted rewrite: the copy with the higher seqid wins. */
static void test_seqid_newer(Fixture *f, gconstpointer unused)
{
    static const char newer_json[] =
        "{\"keyslots\":{},\"tokens\":{},\"segments\":{},\"digests\":{},"
        "\"config\":{\"json_size\":\"12288\",\"keyslots_size\":\"8192\"}}";
    g_autofree char *warning = NULL;
    g_autofree uint8_t *secondary = g_malloc(HDR);
    g_autoptr(QCryptoLUKS2Header) hdr = read_hdr(f, NULL, &error_abort);
    g_autoptr(QCryptoLUKS2Header) again = NULL;

    /* Rewrite both (seqid 9), then put the old secondary (8) back. */
    g_assert_cmpint(pread(f->fd, secondary, HDR, HDR), ==, HDR);
    g_assert_cmpint(qcrypto_luks2_header_write(hdr, newer_json, NULL,
                                               test_file_write, NULL,
                                               GINT_TO_POINTER(f->fd),
                                               &error_abort), ==, 0);
    poke(f, HDR, secondary, HDR);

    again = read_hdr(f, &warning, &error_abort);
    g_assert_cmpuint(again->bin.seqid, ==, 9);
    g_assert_cmpstr(again->json, ==, newer_json);
    g_assert_nonnull(warning);
    g_assert_nonnull(strstr(warning, "secondary header is older"));
}

/* Cases where both copies are refused, for one reason each. */
static void test_hostile_bin(Fixture *f, gconstpointer unused)
{
    static const struct {
        const char *name;
        uint64_t offset;        /* in each copy */
        const char *bytes;
        size_t len;
        const char *error;
    } cases[] = {
        { "version", 6, "\0\3", 2, "version 3" },
        { "hdr_size", 8, "\0\0\0\0\0\0\x50\0", 8, "not a power of two" },
        { "hdr_size-huge", 8, "\0\0\0\0\1\0\0\0", 8, "not a power of two" },
        { "checksum_alg", 72, "nohash", 7, "unsupported checksum" },
    };

    for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_autofree uint8_t *save = g_malloc(2 * HDR);
        g_autoptr(Error) err = NULL;
        g_autoptr(QCryptoLUKS2Header) hdr = NULL;

        g_assert_cmpint(pread(f->fd, save, 2 * HDR, 0), ==, 2 * HDR);
        poke(f, cases[i].offset, cases[i].bytes, cases[i].len);
        poke(f, HDR + cases[i].offset, cases[i].bytes, cases[i].len);
        hdr = read_hdr(f, NULL, &err);
        g_assert_null(hdr);
        g_test_message("%s: %s", cases[i].name, error_get_pretty(err));
        g_assert_nonnull(strstr(error_get_pretty(err), cases[i].error));
        poke(f, 0, save, 2 * HDR);
    }
}

/*
 * A JSON area with no NUL (checksum made right, so that only the NUL
 * check can catch it): refused, not read past its end.
 */
static void test_json_not_terminated(Fixture *f, gconstpointer unused)
{
    g_autoptr(Error) err = NULL;
    g_autoptr(QCryptoLUKS2Header) hdr = NULL;
    g_autofree uint8_t *area = g_malloc(HDR);
    g_autoptr(QCryptoHash) h = qcrypto_hash_new(QCRYPTO_HASH_ALGO_SHA256,
                                                &error_abort);

    for (int copy = 0; copy < 2; copy++) {
        g_assert_cmpint(pread(f->fd, area, HDR, copy * HDR), ==, HDR);
        memset(area + 4096, ' ', HDR - 4096);
        memset(area + 448, 0, 64);
        qcrypto_hash_update(h, area, HDR);
        qcrypto_hash_finalize(h, area + 448);
        poke(f, copy * HDR, area, HDR);
    }
    hdr = read_hdr(f, NULL, &err);
    g_assert_null(hdr);
    g_assert_nonnull(strstr(error_get_pretty(err), "not NUL-terminated"));
}

/* A file shorter than the header: refused through the read callback. */
static void test_truncated(Fixture *f, gconstpointer unused)
{
    g_autoptr(Error) err = NULL;
    g_autoptr(QCryptoLUKS2Header) hdr = NULL;

    g_assert_cmpint(ftruncate(f->fd, 8192), ==, 0);
    hdr = read_hdr(f, NULL, &err);
    g_assert_null(hdr);
    g_assert_nonnull(err);
}

/* cryptsetup's images with every metadata size. */
static void test_mda_images(void)
{
    g_autofree char *tarball = test_data_path("luks2_mda_images.tar.xz");
    g_autofree char *dir = NULL;
    const char *argv[] = { "tar", "-xJf", tarball, "-C", NULL, NULL };
    g_autofree char *out = NULL;

    if (!tarball) {
        return;
    }
    dir = test_scratch_new();
    argv[4] = dir;
    out = test_run(argv);
    g_assert_nonnull(out);

    for (unsigned kib = 16; kib <= 4096; kib *= 2) {
        g_autofree char *name = g_strdup_printf("test_image_%u", kib);
        g_autofree char *path = g_build_filename(dir, name, NULL);
        g_autofree char *warning = NULL;
        g_autoptr(QCryptoLUKS2Header) hdr = NULL;
        g_autoptr(QCryptoLUKS2Metadata) md = NULL;
        int fd = test_open(path, O_RDONLY);

        hdr = qcrypto_luks2_header_read(NULL, test_file_read,
                                        GINT_TO_POINTER(fd), &warning,
                                        &error_abort);
        close(fd);
        g_assert_null(warning);
        g_assert_cmpuint(hdr->bin.hdr_size, ==, kib * 1024);
        md = qcrypto_luks2_metadata_parse(hdr->json, hdr->bin.hdr_size,
                                          &error_abort);
        g_assert_cmpuint(md->json_size, ==, kib * 1024 - 4096);
        g_assert_nonnull(md->keyslots[0]);
        g_assert_nonnull(md->segments[0]);
    }
    test_scratch_free(g_steal_pointer(&dir));
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
#define ADD(path, fn, data) \
    g_test_add("/crypto/luks2/header/" path, Fixture, data, fixture_setup, \
               fn, fixture_teardown)
    ADD("roundtrip", test_roundtrip, NULL);
    ADD("primary-damaged/magic", test_primary_damaged, GUINT_TO_POINTER(1));
    ADD("primary-damaged/seqid", test_primary_damaged, GUINT_TO_POINTER(23));
    ADD("primary-damaged/csum", test_primary_damaged, GUINT_TO_POINTER(448));
    ADD("primary-damaged/json", test_primary_damaged,
        GUINT_TO_POINTER(4100));
    ADD("primary-damaged/json-tail", test_primary_damaged,
        GUINT_TO_POINTER(HDR - 1));
    ADD("primary-wiped", test_primary_wiped, NULL);
    ADD("both-damaged", test_both_damaged, NULL);
    ADD("seqid-newer", test_seqid_newer, NULL);
    ADD("hostile-bin", test_hostile_bin, NULL);
    ADD("json-not-terminated", test_json_not_terminated, NULL);
    ADD("truncated", test_truncated, NULL);
#undef ADD
    g_test_add_func("/crypto/luks2/header/mda-images", test_mda_images);
    return g_test_run();
}
