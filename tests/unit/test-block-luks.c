/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The luks block driver (block/crypto.c) over the file protocol: requests
 * of any alignment read back what was written (read-modify-write of
 * partial sectors, pieces larger than the bounce buffer), the data is
 * encrypted on disk, a caller's buffer is left alone unless it gave it
 * away (BDRV_REQ_MAY_CLOBBER), detached headers, several threads at once,
 * and the raw driver and file protocol underneath (zeroes past the end of
 * the file, holes).
 */
#include <string.h>
#include <unistd.h>

#include "block/block.h"
#include "block/options.h"
#include "crypto/secret.h"

/* More than the driver's 1 MiB bounce buffer, and not a whole sector. */
#define IMG_SIZE (3 * 1024 * 1024 + 7 * 512)

typedef struct Fixture {
    char *dir;
    char *path;
    uint8_t *shadow;        /* what the image should hold */
} Fixture;

static void fixture_setup(Fixture *f, gconstpointer data)
{
    Error *err = NULL;

    f->dir = g_dir_make_tmp("test-block-luks-XXXXXX", NULL);
    g_assert_nonnull(f->dir);
    f->path = g_build_filename(f->dir, "img.luks", NULL);
    f->shadow = g_malloc(IMG_SIZE);
    g_assert_cmpint(qcrypto_secret_add("s0", "a passphrase", NULL,
                                       QCRYPTO_SECRET_FORMAT_RAW, &err), ==, 0);
}

static void fixture_teardown(Fixture *f, gconstpointer data)
{
    g_autoptr(GDir) dir = g_dir_open(f->dir, 0, NULL);
    const char *name;

    while ((name = g_dir_read_name(dir))) {
        g_autofree char *p = g_build_filename(f->dir, name, NULL);
        unlink(p);
    }
    rmdir(f->dir);
    g_free(f->dir);
    g_free(f->path);
    g_free(f->shadow);
    qcrypto_secret_clear_all();
}

static BlockDriverState *luks_create(const char *path, const char *extra,
                                     uint64_t size)
{
    g_autofree char *s = g_strdup_printf(
        "key-secret=s0,iter-time=10,size=%" G_GUINT64_FORMAT "%s%s", size,
        extra ? "," : "", extra ? extra : "");
    g_autoptr(GHashTable) opts = qemu_opts_parse(s, NULL, NULL);
    Error *err = NULL;
    BlockDriverState *bs = bdrv_create_open("luks", path, opts, 0, NULL, &err);

    if (err) {
        g_test_message("create: %s", error_get_pretty(err));
    }
    g_assert_nonnull(bs);
    /* Named now, so that the tests can open it again by name. */
    g_assert_cmpint(bdrv_create_finish(bs, &err), ==, 0);
    return bs;
}

static BlockDriverState *open_opts(const char *str, int flags, Error **errp)
{
    g_autoptr(GHashTable) opts = qemu_opts_parse(str, NULL, NULL);

    return bdrv_open(NULL, NULL, opts, flags, errp);
}

/* Fill the image and the shadow with the same pseudo-random bytes. */
static void fill(BlockDriverState *bs, uint8_t *shadow, uint32_t seed)
{
    g_autoptr(GRand) rand = g_rand_new_with_seed(seed);
    g_autofree uint8_t *copy = NULL;
    Error *err = NULL;

    for (size_t i = 0; i < IMG_SIZE; i++) {
        shadow[i] = g_rand_int(rand);
    }
    copy = g_memdup2(shadow, IMG_SIZE);
    g_assert_cmpint(bdrv_pwrite(bs, 0, copy, IMG_SIZE, BDRV_REQ_MAY_CLOBBER,
                                &err), ==, 0);
}

static void check_all(BlockDriverState *bs, const uint8_t *shadow)
{
    g_autofree uint8_t *buf = g_malloc(IMG_SIZE);
    Error *err = NULL;

    g_assert_cmpint(bdrv_pread(bs, 0, buf, IMG_SIZE, &err), ==, 0);
    g_assert_true(memcmp(buf, shadow, IMG_SIZE) == 0);
}

static void test_unaligned_requests(Fixture *f, gconstpointer data)
{
    g_autoptr(BlockDriverState) bs = luks_create(f->path, NULL, IMG_SIZE);
    g_autoptr(GRand) rand = g_rand_new_with_seed(1234);
    g_autofree uint8_t *buf = g_malloc(IMG_SIZE);
    g_autofree uint8_t *keep = g_malloc(IMG_SIZE);
    Error *err = NULL;

    g_assert_cmpint(bdrv_getlength(bs, &err), ==, IMG_SIZE);
    fill(bs, f->shadow, 1);
    check_all(bs, f->shadow);

    for (int i = 0; i < 300; i++) {
        /* mostly short requests, some across many sectors, a few huge */
        uint64_t max = i % 50 == 0 ? IMG_SIZE : (i % 3 ? 1500 : 70000);
        uint64_t len = g_rand_int_range(rand, 1, max + 1);
        uint64_t off = g_rand_int_range(rand, 0, IMG_SIZE - len + 1);

        if (i % 2) {
            for (uint64_t j = 0; j < len; j++) {
                buf[j] = g_rand_int(rand);
            }
            memcpy(keep, buf, len);
            g_assert_cmpint(bdrv_pwrite(bs, off, buf, len, 0, &err), ==, 0);
            /* without MAY_CLOBBER the caller's data is untouched */
            g_assert_true(memcmp(buf, keep, len) == 0);
            memcpy(f->shadow + off, buf, len);
        } else {
            g_assert_cmpint(bdrv_pread(bs, off, buf, len, &err), ==, 0);
            g_assert_true(memcmp(buf, f->shadow + off, len) == 0);
        }
    }
    check_all(bs, f->shadow);
    bdrv_close(g_steal_pointer(&bs));

    /* and after reopening, with the passphrase */
    {
        g_autofree char *o = g_strdup_printf(
            "driver=luks,key-secret=s0,file.filename=%s", f->path);
        g_autoptr(BlockDriverState) again = open_opts(o, 0, &err);

        g_assert_nonnull(again);
        check_all(again, f->shadow);
    }
}

static void test_encrypted_on_disk(Fixture *f, gconstpointer data)
{
    g_autoptr(BlockDriverState) bs = luks_create(f->path, NULL, IMG_SIZE);
    g_autofree char *contents = NULL;
    gsize len;

    fill(bs, f->shadow, 2);
    bdrv_close(g_steal_pointer(&bs));
    g_assert_true(g_file_get_contents(f->path, &contents, &len, NULL));
    g_assert_cmpuint(len, >, IMG_SIZE);
    /* no 4 KiB of plaintext anywhere in the file (QEMU's layout) */
    for (size_t off = 0; off + 4096 <= IMG_SIZE; off += 4096) {
        g_assert_null(memmem(contents, len, f->shadow + off, 4096));
    }
}

static void test_wrong_key_and_no_io(Fixture *f, gconstpointer data)
{
    g_autoptr(BlockDriverState) bs = luks_create(f->path, NULL, IMG_SIZE);
    g_autofree char *o = g_strdup_printf(
        "driver=luks,key-secret=bad,file.filename=%s", f->path);
    g_autofree char *noio = g_strdup_printf(
        "driver=luks,file.filename=%s", f->path);
    g_autoptr(BlockDriverState) hdr = NULL;
    uint8_t buf[512];
    Error *err = NULL;

    bdrv_close(g_steal_pointer(&bs));
    g_assert_cmpint(qcrypto_secret_add("bad", "not it", NULL,
                                       QCRYPTO_SECRET_FORMAT_RAW, &err), ==, 0);
    g_assert_null(open_opts(o, 0, &err));
    g_assert_cmpstr(error_get_pretty(err), ==,
                    "Invalid password, cannot unlock any keyslot");
    error_free_or_abort(&err);

    /* no key: refused, unless only the header is wanted */
    g_assert_null(open_opts(noio, 0, &err));
    g_assert_nonnull(strstr(error_get_pretty(err), "key-secret"));
    error_free_or_abort(&err);
    hdr = open_opts(noio, BDRV_O_NO_IO, &err);
    g_assert_nonnull(hdr);
    g_assert_true(bdrv_is_encrypted(hdr));
    g_assert_cmpint(bdrv_getlength(hdr, &err), ==, IMG_SIZE);
    g_assert_cmpint(bdrv_pread(hdr, 0, buf, sizeof(buf), &err), ==, -1);
    error_free_or_abort(&err);
}

/* A file cut short inside the header or before the payload: refused. */
static void test_truncated(Fixture *f, gconstpointer data)
{
    g_autoptr(BlockDriverState) bs = luks_create(f->path, NULL, IMG_SIZE);
    g_autofree char *o = g_strdup_printf(
        "driver=luks,key-secret=s0,file.filename=%s", f->path);
    static const int64_t cuts[] = { 100, 4096, 600 * 1024, 2068480 - 1 };
    Error *err = NULL;

    bdrv_close(g_steal_pointer(&bs));
    for (size_t i = 0; i < G_N_ELEMENTS(cuts); i++) {
        g_assert_cmpint(truncate(f->path, cuts[i]), ==, 0);
        g_assert_null(open_opts(o, 0, &err));
        g_assert_nonnull(err);
        g_test_message("cut at %" G_GINT64_FORMAT ": %s", cuts[i],
                       error_get_pretty(err));
        error_free_or_abort(&err);
        g_assert_null(open_opts(o, BDRV_O_NO_IO, &err));
        error_free_or_abort(&err);
    }
}

static void test_read_only(Fixture *f, gconstpointer data)
{
    g_autoptr(BlockDriverState) bs = luks_create(f->path, NULL, IMG_SIZE);
    g_autofree char *o = g_strdup_printf(
        "driver=luks,key-secret=s0,file.filename=%s", f->path);
    g_autoptr(BlockDriverState) ro = NULL;
    uint8_t buf[512] = { 0 };
    Error *err = NULL;

    bdrv_close(g_steal_pointer(&bs));
    ro = open_opts(o, 0, &err);
    g_assert_true(bdrv_is_read_only(ro));
    g_assert_cmpint(bdrv_pwrite(ro, 0, buf, sizeof(buf), 0, &err), ==, -1);
    error_free_or_abort(&err);
    /* beyond the end */
    g_assert_cmpint(bdrv_pread(ro, IMG_SIZE, buf, 1, &err), ==, -1);
    error_free_or_abort(&err);
}

static void test_detached_header(Fixture *f, gconstpointer data)
{
    g_autofree char *hdr = g_build_filename(f->dir, "hdr", NULL);
    g_autofree char *dat = g_build_filename(f->dir, "data", NULL);
    g_autofree char *o = g_strdup_printf(
        "driver=luks,key-secret=s0,file.filename=%s,header.filename=%s",
        dat, hdr);
    g_autoptr(GHashTable) hopts = qemu_opts_parse(
        "key-secret=s0,iter-time=10,detached-header=on", NULL, NULL);
    g_autofree char *dsize = g_strdup_printf("size=%d", IMG_SIZE);
    g_autoptr(GHashTable) dopts = qemu_opts_parse(dsize, NULL, NULL);
    g_autoptr(BlockDriverState) bs = NULL;
    g_autoptr(BlockImageInfo) info = NULL;
    g_autofree char *contents = NULL;
    gsize len;
    Error *err = NULL;

    g_assert_cmpint(bdrv_create("luks", hdr, hopts, NULL, &err), ==, 0);
    g_assert_cmpint(bdrv_create("raw", dat, dopts, NULL, &err), ==, 0);
    bs = open_opts(o, BDRV_O_RDWR, &err);
    g_assert_nonnull(bs);
    g_assert_cmpint(bdrv_getlength(bs, &err), ==, IMG_SIZE);
    fill(bs, f->shadow, 3);
    info = bdrv_get_image_info(bs, &err);
    g_assert_true(info->luks->detached_header);
    g_assert_cmpuint(info->luks->payload_offset, ==, 0);
    bdrv_close(g_steal_pointer(&bs));

    /* the data file is all ciphertext from its first byte */
    g_assert_true(g_file_get_contents(dat, &contents, &len, NULL));
    g_assert_cmpuint(len, ==, IMG_SIZE);
    g_assert_false(memcmp(contents, f->shadow, 512) == 0);
    bs = open_opts(o, 0, &err);
    g_assert_nonnull(bs);
    check_all(bs, f->shadow);
}

typedef struct WriterJob {
    BlockDriverState *bs;
    uint64_t start, end;
    const uint8_t *shadow;
} WriterJob;

static gpointer writer_thread(gpointer opaque)
{
    WriterJob *job = opaque;
    g_autofree uint8_t *buf = g_malloc(64 * 1024);
    Error *err = NULL;

    for (uint64_t off = job->start; off < job->end; off += 64 * 1024) {
        size_t n = MIN(64 * 1024, job->end - off);

        memcpy(buf, job->shadow + off, n);
        g_assert_cmpint(bdrv_pwrite(job->bs, off, buf, n,
                                    BDRV_REQ_MAY_CLOBBER, &err), ==, 0);
    }
    return NULL;
}

static void test_threads(Fixture *f, gconstpointer data)
{
    g_autoptr(BlockDriverState) bs = luks_create(f->path, NULL, IMG_SIZE);
    g_autoptr(GRand) rand = g_rand_new_with_seed(4);
    WriterJob jobs[4];
    GThread *threads[4];
    uint64_t quarter = ROUND_UP(IMG_SIZE / 4, 512);

    for (size_t i = 0; i < IMG_SIZE; i++) {
        f->shadow[i] = g_rand_int(rand);
    }
    for (int i = 0; i < 4; i++) {
        jobs[i] = (WriterJob){ bs, i * quarter,
                               MIN((i + 1) * quarter, IMG_SIZE), f->shadow };
        threads[i] = g_thread_new("writer", writer_thread, &jobs[i]);
    }
    for (int i = 0; i < 4; i++) {
        g_thread_join(threads[i]);
    }
    check_all(bs, f->shadow);
}

static void test_raw_and_file(Fixture *f, gconstpointer data)
{
    g_autofree char *path = g_build_filename(f->dir, "r.raw", NULL);
    g_autoptr(GHashTable) opts = qemu_opts_parse("size=1000", NULL, NULL);
    g_autoptr(BlockDriverState) bs = NULL;
    uint8_t buf[1024];
    uint64_t pnum;
    Error *err = NULL;

    g_assert_cmpint(bdrv_create("raw", path, opts, NULL, &err), ==, 0);
    /* A second create replaces the file (qemu-img's behaviour). */
    g_assert_true(g_file_set_contents(path, "old", -1, NULL));
    g_clear_pointer(&opts, g_hash_table_unref);
    opts = qemu_opts_parse("size=1000", NULL, NULL);
    g_assert_cmpint(bdrv_create("raw", path, opts, NULL, &err), ==, 0);
    g_assert_null(err);

    bs = bdrv_open(path, NULL, NULL, BDRV_O_RDWR, &err);
    g_assert_nonnull(bs);
    g_assert_cmpstr(bdrv_get_format_name(bs), ==, "raw");
    g_assert_cmpint(bdrv_getlength(bs, &err), ==, 1024);
    g_assert_true(bdrv_has_zero_init(bs));
    /* a new file's first 4 KiB are written, as qemu-img writes them */
    g_assert_true(bdrv_block_status_is_data(bs, 0, 1024, &pnum));
    g_assert_cmpint(bdrv_pwrite(bs, 0, "hello", 5, 0, &err), ==, 0);
    g_assert_true(bdrv_block_status_is_data(bs, 0, 1024, &pnum));
    memset(buf, 0xaa, sizeof(buf));
    g_assert_cmpint(bdrv_pread(bs, 0, buf, sizeof(buf), &err), ==, 0);
    g_assert_true(memcmp(buf, "hello", 5) == 0);
    for (size_t i = 5; i < sizeof(buf); i++) {
        g_assert_cmpint(buf[i], ==, 0);
    }
    g_assert_cmpint(bdrv_truncate(bs, 1 << 20, PREALLOC_MODE_FALLOC, &err),
                    ==, 0);
    g_assert_cmpint(bdrv_getlength(bs, &err), ==, 1 << 20);
    g_assert_cmpint(bdrv_get_allocated_file_size(bs), >=, 1 << 20);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
#define ADD(path, fn) \
    g_test_add(path, Fixture, NULL, fixture_setup, fn, fixture_teardown)
    ADD("/block/luks/unaligned-requests", test_unaligned_requests);
    ADD("/block/luks/encrypted-on-disk", test_encrypted_on_disk);
    ADD("/block/luks/wrong-key-and-no-io", test_wrong_key_and_no_io);
    ADD("/block/luks/truncated", test_truncated);
    ADD("/block/luks/read-only", test_read_only);
    ADD("/block/luks/detached-header", test_detached_header);
    ADD("/block/luks/threads", test_threads);
    ADD("/block/raw/file", test_raw_and_file);
    return g_test_run();
}
