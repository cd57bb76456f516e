/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The block layer over a protocol other than "file": "mem", a test-only
 * protocol whose files are byte arrays in this process, registered at
 * run time (bdrv_register()) and asynchronous (bdrv_aio_pread/pwrite,
 * answered on worker threads). The formats run on it as on files:
 *
 * - raw: probed, read, written at odd offsets, zeroes and discards;
 * - luks (LUKS1 and LUKS2): unaligned writes through the request path's
 *   read-modify-write, read back after reopening, the bytes below really
 *   ciphertext;
 * - luks2 with a detached header, both files on mem ("header" child);
 * - qcow2 with a backing file named relative to the image: resolved with
 *   the protocol's directory ("mem:"), its data read through the top
 *   image, writes checked by bdrv_check(); a backing loop refused by the
 *   protocol's identity;
 * - creation through the protocol: qcow2, luks and raw images made on
 *   mem by the formats' create code, named only when finished, nothing
 *   left when dropped or interrupted, never over an existing file.
 * Other images are made by the create code on disk, then loaded into mem.
 * This is the proof that a protocol plugs in: nothing here is a file.
 */
#include <string.h>

#include <glib/gstdio.h>

#include "block/block_int.h"
#include "block/options.h"
#include "crypto/secret.h"
#include "qemu/buffer.h"
#include "test-error.h"

/* No error: else its message, in the failure. */
#define assert_no_error(err) \
    g_assert_cmpstr((err) ? error_get_pretty(err) : NULL, ==, NULL)

/* ---- The "mem" protocol */

typedef struct MemFile {
    GMutex lock;
    GByteArray *data;
} MemFile;

static GHashTable *mem_files;          /* name -> MemFile */
static GThreadPool *mem_pool;          /* where requests are answered */
static gint mem_aio_requests;          /* requests that went through it */

typedef struct BDRVMemState {
    MemFile *f;
    char *name;
    bool pending;           /* created, not in mem_files until finished */
} BDRVMemState;

typedef struct MemRequest {
    MemFile *f;
    bool write;
    uint64_t offset;
    uint8_t *buf;
    size_t bytes;
    BdrvRequestDone *done;
    void *opaque;
} MemRequest;

static void mem_file_free(gpointer p)
{
    MemFile *f = p;

    g_byte_array_unref(f->data);
    g_mutex_clear(&f->lock);
    g_free(f);
}

static void mem_put(const char *name, const uint8_t *data, size_t len)
{
    MemFile *f = g_new0(MemFile, 1);

    g_mutex_init(&f->lock);
    f->data = g_byte_array_sized_new(len);
    g_byte_array_append(f->data, data, len);
    g_hash_table_replace(mem_files, g_strdup(name), f);
}

static void mem_load(const char *name, const char *path)
{
    g_autofree char *data = NULL;
    gsize len;

    g_assert_true(g_file_get_contents(path, &data, &len, NULL));
    mem_put(name, (uint8_t *)data, len);
}

static GByteArray *mem_data(const char *name)
{
    MemFile *f = g_hash_table_lookup(mem_files, name);

    g_assert_nonnull(f);
    return f->data;
}

/* A worker: past the end reads as zeroes, a write grows the file. */
static void mem_serve(gpointer data, gpointer user_data)
{
    MemRequest *r = data;
    GByteArray *a = r->f->data;

    g_mutex_lock(&r->f->lock);
    if (r->write) {
        if (r->offset + r->bytes > a->len) {
            size_t old = a->len;

            g_byte_array_set_size(a, r->offset + r->bytes);
            memset(a->data + old, 0, a->len - old);
        }
        memcpy(a->data + r->offset, r->buf, r->bytes);
    } else {
        size_t n = r->offset < a->len ? MIN(r->bytes, a->len - r->offset) : 0;

        memcpy(r->buf, a->data + r->offset, n);
        memset(r->buf + n, 0, r->bytes - n);
    }
    g_mutex_unlock(&r->f->lock);
    g_atomic_int_inc(&mem_aio_requests);
    r->done(r->opaque, 0, NULL);
    g_free(r);
}

static int mem_submit(BlockDriverState *bs, bool write, uint64_t offset,
                      void *buf, size_t bytes, BdrvRequestDone *done,
                      void *opaque)
{
    BDRVMemState *s = bs->opaque;
    MemRequest *r = g_new(MemRequest, 1);

    *r = (MemRequest) {
        .f = s->f, .write = write, .offset = offset, .buf = buf,
        .bytes = bytes, .done = done, .opaque = opaque,
    };
    g_thread_pool_push(mem_pool, r, NULL);
    return 0;
}

static int mem_aio_pread(BlockDriverState *bs, uint64_t offset, void *buf,
                         size_t bytes, BdrvRequestDone *done, void *opaque,
                         Error **errp)
{
    return mem_submit(bs, false, offset, buf, bytes, done, opaque);
}

static int mem_aio_pwrite(BlockDriverState *bs, uint64_t offset,
                          const void *buf, size_t bytes, int flags,
                          BdrvRequestDone *done, void *opaque, Error **errp)
{
    return mem_submit(bs, true, offset, (void *)buf, bytes, done, opaque);
}

static int mem_open(BlockDriverState *bs, GHashTable *opts, int flags,
                    Error **errp)
{
    BDRVMemState *s = bs->opaque;
    g_autofree char *name = qemu_opt_take(opts, "filename");

    if (!name) {
        error_setg(errp, "Parameter 'filename' is required");
        return -1;
    }
    s->f = g_hash_table_lookup(mem_files, name);
    if (!s->f) {
        error_setg(errp, "Could not open 'mem:%s': No such file", name);
        return -1;
    }
    bs->filename = g_strconcat("mem:", name, NULL);
    s->name = g_steal_pointer(&name);
    return 0;
}

static void mem_close(BlockDriverState *bs)
{
    BDRVMemState *s = bs->opaque;

    /* A creation never finished leaves nothing. */
    if (s->pending) {
        mem_file_free(s->f);
    }
    g_free(s->name);
}

/* A new mem file: nobody sees it under its name before it is finished. */
static int mem_create_file(BlockDriverState *bs, GHashTable *opts,
                           int flags, Error **errp)
{
    BDRVMemState *s = bs->opaque;
    g_autofree char *name = qemu_opt_take(opts, "filename");

    if (g_hash_table_contains(mem_files, name)) {
        error_setg(errp, "Could not create 'mem:%s': File exists", name);
        return -1;
    }
    s->f = g_new0(MemFile, 1);
    g_mutex_init(&s->f->lock);
    s->f->data = g_byte_array_new();
    s->pending = true;
    bs->filename = g_strconcat("mem:", name, NULL);
    s->name = g_steal_pointer(&name);
    return 0;
}

static int mem_create_finish(BlockDriverState *bs, Error **errp)
{
    BDRVMemState *s = bs->opaque;

    if (!s->pending) {
        return 0;
    }
    if (bdrv_interrupted(bs)) {
        error_setg(errp, "Interrupted");
        return -1;
    }
    if (g_hash_table_contains(mem_files, s->name)) {
        error_setg(errp, "Could not create '%s': File exists", bs->filename);
        return -1;
    }
    g_hash_table_insert(mem_files, g_strdup(s->name), s->f);
    s->pending = false;
    return 0;
}

static int64_t mem_getlength(BlockDriverState *bs, Error **errp)
{
    BDRVMemState *s = bs->opaque;
    g_autoptr(GMutexLocker) locker = g_mutex_locker_new(&s->f->lock);

    return s->f->data->len;
}

static int mem_truncate(BlockDriverState *bs, uint64_t size,
                        PreallocMode prealloc, Error **errp)
{
    BDRVMemState *s = bs->opaque;
    g_autoptr(GMutexLocker) locker = g_mutex_locker_new(&s->f->lock);
    size_t old = s->f->data->len;

    g_byte_array_set_size(s->f->data, size);
    if (size > old) {
        memset(s->f->data->data + old, 0, size - old);
    }
    return 0;
}

static char *mem_get_identity(BlockDriverState *bs)
{
    BDRVMemState *s = bs->opaque;

    return g_strdup_printf("mem:%p", (void *)s->f);
}

/* Names relative to a mem file are mem files too. */
static char *mem_dirname(BlockDriverState *bs, Error **errp)
{
    return g_strdup("mem:");
}

static const BlockDriver bdrv_mem = {
    .format_name = "mem",
    .instance_size = sizeof(BDRVMemState),
    .is_protocol = true,
    .protocol_name = "mem",
    .bdrv_open = mem_open,
    .bdrv_close = mem_close,
    .bdrv_create_file = mem_create_file,
    .bdrv_create_finish = mem_create_finish,
    .bdrv_aio_pread = mem_aio_pread,
    .bdrv_aio_pwrite = mem_aio_pwrite,
    .bdrv_getlength = mem_getlength,
    .bdrv_truncate = mem_truncate,
    .bdrv_get_identity = mem_get_identity,
    .bdrv_dirname = mem_dirname,
};

/* ---- Helpers */

typedef struct Fixture {
    char *dir;
} Fixture;

static void fixture_setup(Fixture *f, gconstpointer data)
{
    Error *err = NULL;

    f->dir = g_dir_make_tmp("test-block-protocol-XXXXXX", NULL);
    g_assert_nonnull(f->dir);
    mem_files = g_hash_table_new_full(g_str_hash, g_str_equal, g_free,
                                      mem_file_free);
    g_assert_cmpint(qcrypto_secret_add("s0", "a passphrase", NULL,
                                       QCRYPTO_SECRET_FORMAT_RAW, &err), ==, 0);
    g_atomic_int_set(&mem_aio_requests, 0);
}

static void fixture_teardown(Fixture *f, gconstpointer data)
{
    g_autoptr(GDir) dir = g_dir_open(f->dir, 0, NULL);
    const char *name;

    while ((name = g_dir_read_name(dir))) {
        g_autofree char *p = g_build_filename(f->dir, name, NULL);

        g_unlink(p);
    }
    g_rmdir(f->dir);
    g_free(f->dir);
    g_clear_pointer(&mem_files, g_hash_table_unref);
    qcrypto_secret_clear_all();
}

/* Create an image on disk with the real code, and load it into mem. */
static void make_image(Fixture *f, const char *format, const char *name,
                       const char *opts_str)
{
    g_autofree char *path = g_build_filename(f->dir, name, NULL);
    g_autoptr(GHashTable) opts = qemu_opts_parse(opts_str, NULL, NULL);
    Error *err = NULL;

    g_assert_nonnull(opts);
    g_assert_cmpint(bdrv_create(format, path, opts, NULL, &err), ==, 0);
    g_assert_null(err);
    mem_load(name, path);
}

static BlockDriverState *open_opts(const char *str, int flags, Error **errp)
{
    g_autoptr(GHashTable) opts = qemu_opts_parse(str, NULL, NULL);

    g_assert_nonnull(opts);
    return bdrv_open(NULL, NULL, opts, flags, errp);
}

static void fill_pattern(uint8_t *buf, size_t len, unsigned seed)
{
    for (size_t i = 0; i < len; i++) {
        buf[i] = (uint8_t)(i * 7 + seed + (i >> 9));
    }
}

/*
 * Writes at odd offsets and lengths (the request path's read-modify-
 * write on block formats), then every byte read back against a model:
 * what the image held before (a new LUKS image's payload is zero
 * ciphertext, which is not zero plain text), patched.
 */
static void write_and_verify(BlockDriverState *bs, uint8_t *model,
                             uint64_t size)
{
    static const struct { uint64_t off; size_t len; } w[] = {
        { 0, 4096 }, { 1, 1 }, { 511, 2 }, { 1000, 70000 },
        { 65536 + 17, 513 }, { 200000, 4096 },
    };
    g_autofree uint8_t *buf = g_malloc(size);
    Error *err = NULL;

    g_assert_cmpint(bdrv_pread(bs, 0, model, size, &err), ==, 0);
    for (size_t i = 0; i < G_N_ELEMENTS(w); i++) {
        g_autofree uint8_t *data = g_malloc(w[i].len);

        fill_pattern(data, w[i].len, i + 1);
        g_assert_cmpint(bdrv_pwrite(bs, w[i].off, data, w[i].len, 0, &err),
                        ==, 0);
        memcpy(model + w[i].off, data, w[i].len);
    }
    g_assert_cmpint(bdrv_flush(bs, &err), ==, 0);
    g_assert_cmpint(bdrv_pread(bs, 0, buf, size, &err), ==, 0);
    g_assert_null(err);
    g_assert_cmpmem(buf, size, model, size);
}

static void verify(BlockDriverState *bs, const uint8_t *model, uint64_t size)
{
    g_autofree uint8_t *buf = g_malloc(size);
    Error *err = NULL;

    g_assert_cmpint(bdrv_getlength(bs, &err), ==, size);
    g_assert_cmpint(bdrv_pread(bs, 0, buf, size, &err), ==, 0);
    g_assert_cmpmem(buf, size, model, size);
}

#define IMG_SIZE (1024 * 1024)

/*
 * The image open_str describes, written read-write, then read back after
 * reopening it read-only; model receives what it holds.
 */
static void write_reopen_verify(const char *open_str, uint8_t *model)
{
    BlockDriverState *bs;
    Error *err = NULL;

    bs = open_opts(open_str, BDRV_O_RDWR, &err);
    assert_no_error(err);
    write_and_verify(bs, model, IMG_SIZE);
    bdrv_close(bs);
    bs = open_opts(open_str, 0, &err);
    assert_no_error(err);
    verify(bs, model, IMG_SIZE);
    bdrv_close(bs);
}

/* ---- Tests */

static void test_raw(Fixture *f, gconstpointer data)
{
    g_autofree uint8_t *model = g_malloc0(IMG_SIZE);
    g_autoptr(BlockDriverState) bs = NULL;
    Error *err = NULL;

    mem_put("disk.img", model, IMG_SIZE);
    /* A file name on the command line: prefix, then probing. */
    bs = bdrv_open("mem:disk.img", NULL, NULL, BDRV_O_RDWR, &err);
    assert_no_error(err);
    g_assert_cmpstr(bdrv_get_format_name(bs), ==, "raw");
    g_assert_cmpstr(bdrv_get_filename(bs), ==, "mem:disk.img");
    write_and_verify(bs, model, IMG_SIZE);
    /* The bytes are in mem, as written: raw adds nothing. */
    g_assert_cmpmem(mem_data("disk.img")->data, IMG_SIZE, model, IMG_SIZE);

    /* Zeroes without a driver entry: written as data. */
    g_assert_cmpint(bdrv_pwrite_zeroes(bs, 3, 100000, 0, &err), ==, 0);
    memset(model + 3, 0, 100000);
    /* A discard the protocol cannot do keeps the bytes and succeeds. */
    g_assert_cmpint(bdrv_pdiscard(bs, 4096, 4096, &err), ==, 0);
    verify(bs, model, IMG_SIZE);
    g_assert_cmpint(g_atomic_int_get(&mem_aio_requests), >, 0);

    /* An image's end is checked above the protocol, which would grow. */
    g_assert_cmpint(bdrv_pwrite(bs, IMG_SIZE - 1, "ab", 2, 0, &err), ==, -1);
    test_error_expect(&err, "beyond the end");
}

/* The file protocol's zero writes and discards, through raw. */
static void test_file_zeroes(Fixture *f, gconstpointer data)
{
    g_autofree char *path = g_build_filename(f->dir, "disk.raw", NULL);
    g_autofree uint8_t *model = g_malloc(IMG_SIZE);
    g_autoptr(BlockDriverState) bs = NULL;
    Error *err = NULL;

    fill_pattern(model, IMG_SIZE, 5);
    g_assert_true(g_file_set_contents(path, (char *)model, IMG_SIZE, NULL));
    bs = bdrv_open(path, "raw", NULL, BDRV_O_RDWR, &err);
    assert_no_error(err);
    g_assert_cmpint(bdrv_pwrite_zeroes(bs, 4097, 200000, 0, &err), ==, 0);
    memset(model + 4097, 0, 200000);
    verify(bs, model, IMG_SIZE);
    /*
     * A file punches a hole: the bytes then read as zeroes (or, where the
     * file system cannot, stay as they were); the rest is untouched.
     */
    g_assert_cmpint(bdrv_pdiscard(bs, 512 * 1024, 65536, &err), ==, 0);
    {
        g_autofree uint8_t *buf = g_malloc(65536);

        g_assert_cmpint(bdrv_pread(bs, 512 * 1024, buf, 65536, &err), ==, 0);
        if (!buffer_is_zero(buf, 65536)) {
            g_assert_cmpmem(buf, 65536, model + 512 * 1024, 65536);
        }
        memcpy(model + 512 * 1024, buf, 65536);
    }
    verify(bs, model, IMG_SIZE);
    /* Read-only nodes refuse both. */
    g_clear_pointer(&bs, bdrv_close);
    bs = bdrv_open(path, "raw", NULL, 0, &err);
    g_assert_cmpint(bdrv_pwrite_zeroes(bs, 0, 512, 0, &err), ==, -1);
    test_error_expect(&err, "read-only");
    g_assert_cmpint(bdrv_pdiscard(bs, 0, 512, &err), ==, -1);
    test_error_expect(&err, "read-only");
}

static void test_unknown(Fixture *f, gconstpointer data)
{
    Error *err = NULL;

    g_assert_null(bdrv_open("mem:nothing", NULL, NULL, 0, &err));
    test_error_expect(&err, "Could not open 'mem:nothing'");
    g_assert_null(bdrv_open("nosuch:x", NULL, NULL, 0, &err));
    test_error_expect(&err, "Unknown protocol 'nosuch'");
}

static void test_luks(Fixture *f, gconstpointer data)
{
    int version = GPOINTER_TO_INT(data);
    g_autofree char *copts = g_strdup_printf(
        "key-secret=s0,iter-time=10,luks-version=%d,size=%d", version,
        IMG_SIZE);
    g_autofree uint8_t *model = g_malloc0(IMG_SIZE);
    GByteArray *raw;

    make_image(f, "luks", "disk.luks", copts);
    write_reopen_verify("driver=luks,key-secret=s0,file.driver=mem,"
                        "file.filename=disk.luks", model);
    /* Ciphertext below: the last written pattern is not in mem as is. */
    raw = mem_data("disk.luks");
    g_assert_null(memmem(raw->data, raw->len, model + 200000, 4096));
}

static void test_luks_detached_header(Fixture *f, gconstpointer data)
{
    g_autofree uint8_t *model = g_malloc0(IMG_SIZE);
    g_autofree uint8_t *zero = g_malloc0(IMG_SIZE);

    make_image(f, "luks", "hdr", "key-secret=s0,iter-time=10,luks-version=2,"
               "detached-header=on,size=0");
    mem_put("data", zero, IMG_SIZE);
    /* The whole data file is payload (verify() checks the length). */
    write_reopen_verify("driver=luks,key-secret=s0,file.driver=mem,"
                        "file.filename=data,header.driver=mem,"
                        "header.filename=hdr", model);
    /* The header is in its own file, not at the start of the data. */
    g_assert_cmpmem(mem_data("hdr")->data, 6, "LUKS\xba\xbe", 6);
    g_assert_true(memcmp(mem_data("data")->data, "LUKS\xba\xbe", 6) != 0);
}

static void test_qcow2_backing(Fixture *f, gconstpointer data)
{
    g_autofree uint8_t *model = g_malloc0(IMG_SIZE);
    g_autofree char *base_path = g_build_filename(f->dir, "base.qcow2", NULL);
    BdrvCheckResult res = { 0 };
    BlockDriverState *bs;
    Error *err = NULL;

    /* The base holds a pattern, written on disk by the real code. */
    make_image(f, "qcow2", "base.qcow2", "size=1M");
    bs = bdrv_open(base_path, "qcow2", NULL, BDRV_O_RDWR, &err);
    assert_no_error(err);
    fill_pattern(model, IMG_SIZE, 99);
    g_assert_cmpint(bdrv_pwrite(bs, 0, model, IMG_SIZE, 0, &err), ==, 0);
    bdrv_close(bs);
    mem_load("base.qcow2", base_path);
    /* The top names it relatively: "mem:" + "base.qcow2". */
    make_image(f, "qcow2", "top.qcow2",
               "size=1M,backing_file=base.qcow2,backing_fmt=qcow2");

    bs = bdrv_open("mem:top.qcow2", NULL, NULL, BDRV_O_RDWR, &err);
    assert_no_error(err);
    g_assert_cmpstr(bdrv_get_format_name(bs), ==, "qcow2");
    g_assert_nonnull(bdrv_get_backing(bs));
    g_assert_cmpstr(bdrv_get_filename(bdrv_get_backing(bs)), ==,
                    "mem:base.qcow2");
    verify(bs, model, IMG_SIZE);
    write_and_verify(bs, model, IMG_SIZE);
    g_assert_cmpint(bdrv_check(bs, &res, 0), ==, 0);
    g_assert_cmpint(res.corruptions, ==, 0);
    g_assert_cmpint(res.leaks, ==, 0);
    g_assert_cmpint(res.check_errors, ==, 0);
    bdrv_close(bs);

    bs = bdrv_open("mem:top.qcow2", NULL, NULL, 0, &err);
    assert_no_error(err);
    verify(bs, model, IMG_SIZE);
    bdrv_close(bs);
}

static void test_qcow2_backing_loop(Fixture *f, gconstpointer data)
{
    Error *err = NULL;

    /* Its own backing file, by name: met twice, by identity. */
    make_image(f, "qcow2", "a.qcow2", "size=1M");
    make_image(f, "qcow2", "loop.qcow2",
               "size=1M,backing_file=a.qcow2,backing_fmt=qcow2");
    mem_put("a.qcow2", mem_data("loop.qcow2")->data,
            mem_data("loop.qcow2")->len);
    g_assert_null(bdrv_open("mem:loop.qcow2", NULL, NULL, 0, &err));
    test_error_expect(&err, "backing file loop");
}

/*
 * Creation through the protocol: the formats' create code writes onto
 * the node the protocol made, which is named only when finished.
 */
static void test_create(Fixture *f, gconstpointer data)
{
    g_autoptr(GHashTable) qopts = qemu_opts_parse("size=1M", NULL, NULL);
    g_autoptr(GHashTable) lopts = qemu_opts_parse(
        "key-secret=s0,iter-time=10,luks-version=2,size=1M", NULL, NULL);
    g_autoptr(GHashTable) ropts = qemu_opts_parse("size=64k", NULL, NULL);
    g_autoptr(GHashTable) again = qemu_opts_parse("size=64k", NULL, NULL);
    g_autoptr(GHashTable) exists = qemu_opts_parse("size=64k", NULL, NULL);
    g_autofree uint8_t *model = g_malloc0(IMG_SIZE);
    static volatile sig_atomic_t stop = 1;
    BlockDriverState *bs;
    Error *err = NULL;

    g_assert_cmpint(bdrv_create("qcow2", "mem:c.qcow2", qopts, NULL, &err),
                    ==, 0);
    assert_no_error(err);
    bs = bdrv_open("mem:c.qcow2", NULL, NULL, BDRV_O_RDWR, &err);
    assert_no_error(err);
    g_assert_cmpstr(bdrv_get_format_name(bs), ==, "qcow2");
    verify(bs, model, IMG_SIZE);            /* a new qcow2 reads zeroes */
    write_and_verify(bs, model, IMG_SIZE);
    bdrv_close(bs);

    /* Open for writing, unnamed until finished. */
    bs = bdrv_create_open("luks", "mem:l.luks", lopts, 0, NULL, &err);
    assert_no_error(err);
    g_assert_false(g_hash_table_contains(mem_files, "l.luks"));
    write_and_verify(bs, model, IMG_SIZE);
    g_assert_cmpint(bdrv_create_finish(bs, &err), ==, 0);
    g_assert_true(g_hash_table_contains(mem_files, "l.luks"));
    bdrv_close(bs);
    bs = open_opts("driver=luks,key-secret=s0,file.driver=mem,"
                   "file.filename=l.luks", 0, &err);
    assert_no_error(err);
    verify(bs, model, IMG_SIZE);
    bdrv_close(bs);

    /* Dropped before it is finished, or interrupted: nothing is named. */
    bs = bdrv_create_open("raw", "mem:gone", ropts, 0, NULL, &err);
    assert_no_error(err);
    bdrv_close(bs);
    g_assert_false(g_hash_table_contains(mem_files, "gone"));
    g_assert_cmpint(bdrv_create("raw", "mem:gone", again, &stop, &err), ==,
                    -1);
    test_error_expect(&err, "Interrupted");
    g_assert_false(g_hash_table_contains(mem_files, "gone"));

    /* Never over what is there. */
    g_assert_cmpint(bdrv_create("raw", "mem:c.qcow2", exists, NULL, &err), ==,
                    -1);
    test_error_expect(&err, "File exists");
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    mem_pool = g_thread_pool_new(mem_serve, NULL, 2, FALSE, NULL);
    bdrv_register(&bdrv_mem);
#define ADD(path, fn, data) \
    g_test_add("/block/protocol/" path, Fixture, data, fixture_setup, fn, \
               fixture_teardown)
    ADD("raw", test_raw, NULL);
    ADD("unknown", test_unknown, NULL);
    ADD("file-zeroes", test_file_zeroes, NULL);
    ADD("luks1", test_luks, GINT_TO_POINTER(1));
    ADD("luks2", test_luks, GINT_TO_POINTER(2));
    ADD("luks2-detached-header", test_luks_detached_header, NULL);
    ADD("qcow2-backing", test_qcow2_backing, NULL);
    ADD("qcow2-backing-loop", test_qcow2_backing_loop, NULL);
    ADD("create", test_create, NULL);
#undef ADD
    return g_test_run();
}
