/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Block status of the file protocol (block/file-posix.c): each answer
 * covers a whole extent of the file, and a walk over the file makes one
 * pair of SEEK_DATA/SEEK_HOLE calls per extent however it is asked (on
 * tmpfs each call walks the page cache to the end of the extent, so one
 * call per request would cost time quadratic in the file's size).
 *
 * The lseek() calls are counted by wrapping the symbol at link time
 * (-Wl,--wrap, see tests/unit/meson.build): the driver is not changed
 * for the test.
 */
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "block/block.h"
#include "test-tmpdir.h"

#define MiB (1024 * 1024)
#define FILE_SIZE (64 * MiB)
/* convert's job size: the pattern that used to cost one scan per job */
#define STEP (256 * 1024)

/* SEEK_DATA / SEEK_HOLE calls so far (all threads). */
static gint seek_calls;

off_t __real_lseek64(int fd, off_t offset, int whence);
off_t __wrap_lseek64(int fd, off_t offset, int whence);
off_t __real_lseek(int fd, off_t offset, int whence);
off_t __wrap_lseek(int fd, off_t offset, int whence);

off_t __wrap_lseek64(int fd, off_t offset, int whence)
{
    if (whence == SEEK_DATA || whence == SEEK_HOLE) {
        g_atomic_int_inc(&seek_calls);
    }
    return __real_lseek64(fd, offset, whence);
}

/* Where off_t calls are not redirected to lseek64, lseek is the one. */
off_t __wrap_lseek(int fd, off_t offset, int whence)
{
    if (whence == SEEK_DATA || whence == SEEK_HOLE) {
        g_atomic_int_inc(&seek_calls);
    }
    return __real_lseek(fd, offset, whence);
}

/* The data extents of the sparse test file; holes between and after. */
typedef struct Extent {
    uint64_t start, len;
} Extent;

static const Extent sparse_layout[] = {
    { 0, 1 * MiB },
    { 5 * MiB, 3 * MiB },
    { 20 * MiB, 64 * 1024 },
    { 33 * MiB, 7 * MiB },
    { 60 * MiB, 1 * MiB },
};

typedef TestTmpFile Fixture;

static void fixture_setup(Fixture *f, gconstpointer data)
{
    test_tmpfile_init(f, "test-block-file-status", "img.raw");
}

static void fixture_teardown(Fixture *f, gconstpointer data)
{
    test_tmpfile_clear(f);
}

static void write_range(int fd, uint64_t start, uint64_t len)
{
    g_autofree uint8_t *buf = g_malloc(MiB);

    memset(buf, 0x5a, MiB);
    while (len) {
        size_t n = MIN(len, MiB);

        g_assert_cmpint(pwrite(fd, buf, n, start), ==, (ssize_t)n);
        start += n;
        len -= n;
    }
}

/* A FILE_SIZE file: with sparse, the layout above; else all data. */
static void make_file(const char *path, bool sparse)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);

    g_assert_cmpint(fd, >=, 0);
    g_assert_cmpint(ftruncate(fd, FILE_SIZE), ==, 0);
    if (sparse) {
        for (size_t i = 0; i < G_N_ELEMENTS(sparse_layout); i++) {
            write_range(fd, sparse_layout[i].start, sparse_layout[i].len);
        }
    } else {
        write_range(fd, 0, FILE_SIZE);
    }
    /* Extents of dirty pages are reported too, but settle them anyway. */
    g_assert_cmpint(fsync(fd), ==, 0);
    g_assert_cmpint(close(fd), ==, 0);
}

/*
 * Whether the file system of path reports the holes of the test file
 * (some report every file as one data extent: lseek's documented default).
 */
static bool fs_reports_holes(const char *path)
{
    int fd = open(path, O_RDONLY);
    off_t data = lseek(fd, 0, SEEK_HOLE);

    close(fd);
    return data == (off_t)sparse_layout[0].len;
}

static BlockDriverState *open_file(const char *path, const char *format,
                                   int flags)
{
    Error *err = NULL;
    BlockDriverState *bs = bdrv_open(path, format, NULL, flags, &err);

    if (err) {
        g_test_message("open: %s", error_get_pretty(err));
    }
    g_assert_nonnull(bs);
    return bs;
}

/* The data / hole extent holding offset, from sparse_layout. */
static bool layout_extent(uint64_t offset, uint64_t *end)
{
    uint64_t next = FILE_SIZE;

    for (size_t i = 0; i < G_N_ELEMENTS(sparse_layout); i++) {
        const Extent *e = &sparse_layout[i];

        if (offset >= e->start && offset < e->start + e->len) {
            *end = e->start + e->len;
            return true;
        }
        if (e->start > offset) {
            next = MIN(next, e->start);
        }
    }
    *end = next;
    return false;
}

/* Asked about the rest of the file, each answer is one whole extent. */
static void test_whole_extents(Fixture *f, gconstpointer data)
{
    const char *format = data;
    g_autoptr(BlockDriverState) bs = NULL;
    uint64_t offset = 0, pnum, end;
    unsigned calls = 0;

    make_file(f->path, true);
    if (!fs_reports_holes(f->path)) {
        g_test_skip("the file system of the temporary directory does not "
                    "report holes");
        return;
    }
    bs = open_file(f->path, format, 0);
    while (offset < FILE_SIZE) {
        bool expect = layout_extent(offset, &end);

        g_assert_cmpint(bdrv_block_status_is_data(bs, offset,
                                                  FILE_SIZE - offset, &pnum),
                        ==, expect);
        g_assert_cmpuint(pnum, ==, end - offset);
        offset += pnum;
        calls++;
    }
    /* 5 data extents, 5 holes (the file starts with data) */
    g_assert_cmpuint(calls, ==, 2 * G_N_ELEMENTS(sparse_layout));

    /* A question that ends inside an extent gets what it asked about. */
    g_assert_true(bdrv_block_status_is_data(bs, 5 * MiB, 4096, &pnum));
    g_assert_cmpuint(pnum, ==, 4096);
    g_assert_false(bdrv_block_status_is_data(bs, 2 * MiB, 4096, &pnum));
    g_assert_cmpuint(pnum, ==, 4096);
    /* From inside an extent: to its end. */
    g_assert_true(bdrv_block_status_is_data(bs, 6 * MiB + 512, FILE_SIZE,
                                            &pnum));
    g_assert_cmpuint(pnum, ==, 2 * MiB - 512);
}

/*
 * Walking in convert-job steps (each question ends at the step, as convert
 * asked before it learned to ask per extent) still makes one pair of
 * lseek calls per extent: the answer is remembered.
 */
static void test_linear_seeks(Fixture *f, gconstpointer data)
{
    bool sparse = GPOINTER_TO_INT(data);
    g_autoptr(BlockDriverState) bs = NULL;
    unsigned max_calls;
    uint64_t pnum;

    make_file(f->path, sparse);
    if (sparse && !fs_reports_holes(f->path)) {
        g_test_skip("the file system of the temporary directory does not "
                    "report holes");
        return;
    }
    bs = open_file(f->path, "raw", 0);
    g_atomic_int_set(&seek_calls, 0);
    for (uint64_t off = 0; off < FILE_SIZE; off += STEP) {
        for (uint64_t pos = off; pos < off + STEP; pos += pnum) {
            uint64_t end = FILE_SIZE;
            bool expect = sparse ? layout_extent(pos, &end) : true;

            g_assert_cmpint(bdrv_block_status_is_data(bs, pos,
                                                      off + STEP - pos,
                                                      &pnum), ==, expect);
            g_assert_cmpuint(pnum, ==, MIN(end, off + STEP) - pos);
        }
    }
    /* A data extent: SEEK_DATA, then SEEK_HOLE; a hole: SEEK_DATA. */
    max_calls = sparse ? 3 * G_N_ELEMENTS(sparse_layout) : 2;
    g_test_message("%d lseek calls for %d steps", g_atomic_int_get(&seek_calls),
                   FILE_SIZE / STEP);
    g_assert_cmpint(g_atomic_int_get(&seek_calls), >=, 1);
    g_assert_cmpint(g_atomic_int_get(&seek_calls), <=, max_calls);

    /*
     * Asking again inside the last extent costs no call: it is remembered
     * (the hole at the end of the sparse file too: the node is read-only).
     */
    g_atomic_int_set(&seek_calls, 0);
    g_assert_cmpint(bdrv_block_status_is_data(bs, 62 * MiB, STEP, &pnum),
                    ==, !sparse);
    g_assert_cmpint(bdrv_block_status_is_data(bs, 63 * MiB, STEP, &pnum),
                    ==, !sparse);
    g_assert_cmpint(g_atomic_int_get(&seek_calls), ==, 0);
}

/*
 * On a node that can write, a hole is not remembered: a write through the
 * node turns it into data, and the next answer says so.
 */
static void test_write_fills_hole(Fixture *f, gconstpointer data)
{
    g_autoptr(BlockDriverState) bs = NULL;
    Error *err = NULL;
    uint64_t pnum;

    make_file(f->path, true);
    if (!fs_reports_holes(f->path)) {
        g_test_skip("the file system of the temporary directory does not "
                    "report holes");
        return;
    }
    bs = open_file(f->path, "raw", BDRV_O_RDWR);
    g_assert_false(bdrv_block_status_is_data(bs, 2 * MiB, MiB, &pnum));
    g_assert_false(bdrv_block_status_is_data(bs, 2 * MiB, MiB, &pnum));
    g_assert_cmpint(bdrv_pwrite(bs, 2 * MiB, "data", 4, 0, &err), ==, 0);
    g_assert_true(bdrv_block_status_is_data(bs, 2 * MiB, MiB, &pnum));
    g_assert_cmpuint(pnum, >=, 4);
}

typedef struct WalkerArgs {
    BlockDriverState *bs;
    unsigned seed;
} WalkerArgs;

/* Random questions, each checked against the layout. */
static gpointer status_walker(gpointer opaque)
{
    WalkerArgs *a = opaque;
    g_autoptr(GRand) rand = g_rand_new_with_seed(a->seed);

    for (int i = 0; i < 2000; i++) {
        uint64_t off = g_rand_int_range(rand, 0, FILE_SIZE / 512) * 512ULL;
        uint64_t bytes = g_rand_int_range(rand, 1, 4 * MiB);
        uint64_t end, pnum;
        bool expect = layout_extent(off, &end);

        bytes = MIN(bytes, FILE_SIZE - off);
        g_assert_cmpint(bdrv_block_status_is_data(a->bs, off, bytes, &pnum),
                        ==, expect);
        g_assert_cmpuint(pnum, ==, MIN(bytes, end - off));
    }
    return NULL;
}

/* Several threads asking at once (convert's workers) get right answers. */
static void test_threads(Fixture *f, gconstpointer data)
{
    g_autoptr(BlockDriverState) bs = NULL;
    WalkerArgs args[4];
    GThread *threads[4];

    make_file(f->path, true);
    if (!fs_reports_holes(f->path)) {
        g_test_skip("the file system of the temporary directory does not "
                    "report holes");
        return;
    }
    bs = open_file(f->path, "raw", 0);
    for (int i = 0; i < 4; i++) {
        args[i] = (WalkerArgs) { .bs = bs, .seed = 1000 + i };
        threads[i] = g_thread_new("walker", status_walker, &args[i]);
    }
    for (int i = 0; i < 4; i++) {
        g_thread_join(threads[i]);
    }
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
#define ADD(path, data, fn) \
    g_test_add(path, Fixture, data, fixture_setup, fn, fixture_teardown)
    ADD("/block/file/status/whole-extents/file", "file", test_whole_extents);
    ADD("/block/file/status/whole-extents/raw", "raw", test_whole_extents);
    ADD("/block/file/status/linear-seeks/dense", GINT_TO_POINTER(false),
        test_linear_seeks);
    ADD("/block/file/status/linear-seeks/sparse", GINT_TO_POINTER(true),
        test_linear_seeks);
    ADD("/block/file/status/write-fills-hole", NULL, test_write_fills_hole);
    ADD("/block/file/status/threads", NULL, test_threads);
    return g_test_run();
}
