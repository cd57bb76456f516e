/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * block/file-direct.c: reads and writes of any offset, length and buffer
 * on a file opened with O_DIRECT, checked against the same operations on
 * a copy of the file kept in memory; and the file protocol's cache mode
 * (BDRV_O_NOCACHE) end to end.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "block/block_int.h"
#include "../../block/file-direct.h"
#include "test-error.h"
#include "test-tmpdir.h"

#define MODEL_MAX (3 * 1024 * 1024)

/* The file and its model: what every byte must read as. */
typedef struct DirectFile {
    TestTmpFile tmp;
    int fd;
    uint8_t *model;
    size_t size;            /* the file's size, as the model says */
} DirectFile;

/* O_DIRECT on the test directory, or NULL (skipped) where it is refused. */
static DirectFile *direct_file_new(size_t size)
{
    DirectFile *f = g_new0(DirectFile, 1);

    test_tmpfile_init(&f->tmp, "qil-direct", "f.img");
    f->model = g_malloc0(MODEL_MAX);
    f->size = size;
    for (size_t i = 0; i < size; i++) {
        f->model[i] = g_test_rand_int();
    }
    g_assert_true(g_file_set_contents(f->tmp.path, (char *)f->model, size,
                                      NULL));
    f->fd = open(f->tmp.path, O_RDWR | O_DIRECT | O_CLOEXEC);
    if (f->fd < 0 && errno == EINVAL) {
        test_tmpfile_clear(&f->tmp);
        g_free(f->model);
        g_free(f);
        return NULL;
    }
    g_assert_cmpint(f->fd, >=, 0);
    return f;
}

static void direct_file_free(DirectFile *f)
{
    close(f->fd);
    test_tmpfile_clear(&f->tmp);
    g_free(f->model);
    g_free(f);
}

static void direct_file_check(DirectFile *f)
{
    g_autofree char *back = NULL;
    gsize len;
    struct stat st;

    g_assert_cmpint(fstat(f->fd, &st), ==, 0);
    g_assert_cmpuint(st.st_size, ==, f->size);
    g_assert_true(g_file_get_contents(f->tmp.path, &back, &len, NULL));
    g_assert_cmpmem(back, len, f->model, f->size);
}

/* An offset, length and buffer misalignment, biased to block edges. */
static void random_request(size_t limit, uint64_t *offset, size_t *bytes,
                           size_t *misalign)
{
    static const uint32_t edges[] = { 0, 1, 511, 512, 4095, 4096, 4097 };

    *offset = g_test_rand_int_range(0, 600) * 4096 +
              edges[g_test_rand_int_range(0, G_N_ELEMENTS(edges))];
    *bytes = g_test_rand_bit() ?
             g_test_rand_int_range(1, 3 * 4096) :
             g_test_rand_int_range(1, 600 * 1024);
    *bytes = MIN(*bytes, limit - *offset);
    *misalign = g_test_rand_bit() ? 0 : g_test_rand_int_range(1, 4096);
}

/* Random reads, past the end too: the model's bytes, zeroes beyond it. */
static void test_direct_pread(void)
{
    g_autofree uint8_t *mem = g_aligned_alloc(1, MODEL_MAX + 4096, 4096);
    DirectFile *f = direct_file_new(1500 * 1024 + 333);

    if (!f) {
        g_test_skip("the test directory's file system refuses O_DIRECT");
        return;
    }
    for (int i = 0; i < 300; i++) {
        uint64_t offset;
        size_t bytes, misalign;
        g_autofree uint8_t *expect = NULL;

        random_request(MODEL_MAX, &offset, &bytes, &misalign);
        expect = g_malloc0(bytes);
        if (offset < f->size) {
            memcpy(expect, f->model + offset, MIN(bytes, f->size - offset));
        }
        memset(mem, 0xee, MODEL_MAX + 4096);
        g_assert_cmpint(file_direct_pread(f->fd, "f.img", offset,
                                          mem + misalign, bytes,
                                          &error_abort), ==, 0);
        g_assert_cmpmem(mem + misalign, bytes, expect, bytes);
        /* Nothing around the buffer is touched. */
        if (misalign) {
            g_assert_cmpuint(mem[misalign - 1], ==, 0xee);
        }
        g_assert_cmpuint(mem[misalign + bytes], ==, 0xee);
    }
    g_aligned_free(g_steal_pointer(&mem));
    direct_file_free(f);
}

/*
 * Random writes: partial blocks keep their other bytes, and a write past
 * the end makes the file exactly as long as a buffered write would.
 */
static void test_direct_pwrite(void)
{
    g_autofree uint8_t *mem = g_aligned_alloc(1, MODEL_MAX + 4096, 4096);
    DirectFile *f = direct_file_new(700 * 1024 + 5);

    if (!f) {
        g_test_skip("the test directory's file system refuses O_DIRECT");
        return;
    }
    for (int i = 0; i < 200; i++) {
        uint64_t offset;
        size_t bytes, misalign;

        random_request(MODEL_MAX, &offset, &bytes, &misalign);
        for (size_t j = 0; j < bytes; j++) {
            mem[misalign + j] = g_test_rand_int();
        }
        g_assert_cmpint(file_direct_pwrite(f->fd, "f.img", offset,
                                           mem + misalign, bytes,
                                           &error_abort), ==, 0);
        memcpy(f->model + offset, mem + misalign, bytes);
        f->size = MAX(f->size, offset + bytes);
        if (i % 20 == 0) {
            direct_file_check(f);
        }
    }
    direct_file_check(f);
    g_aligned_free(g_steal_pointer(&mem));
    direct_file_free(f);
}

/* A read-only descriptor: errors come back with the file's name. */
static void test_direct_error(void)
{
    DirectFile *f = direct_file_new(8192);
    g_autofree uint8_t *buf = g_malloc0(100);
    Error *err = NULL;
    int fd;

    if (!f) {
        g_test_skip("the test directory's file system refuses O_DIRECT");
        return;
    }
    fd = open(f->tmp.path, O_RDONLY | O_DIRECT | O_CLOEXEC);
    g_assert_cmpint(fd, >=, 0);
    g_assert_cmpint(file_direct_pwrite(fd, "f.img", 10, buf, 100, &err),
                    ==, -1);
    g_assert_nonnull(strstr(error_get_pretty(err), "f.img"));
    error_free(err);
    close(fd);
    direct_file_check(f);
    direct_file_free(f);
}

/*
 * A file of size zero bytes in t, opened by the file protocol with
 * BDRV_O_NOCACHE; NULL (the test skipped, t cleared) where the test
 * directory's file system refuses O_DIRECT.
 */
static BlockDriverState *nocache_open(TestTmpFile *t, const char *name,
                                      size_t size)
{
    g_autofree char *zeros = g_malloc0(size);
    BlockDriverState *bs;
    Error *err = NULL;

    test_tmpfile_init(t, "qil-direct", name);
    g_assert_true(g_file_set_contents(t->path, zeros, size, NULL));
    bs = bdrv_open(t->path, "raw", NULL, BDRV_O_RDWR | BDRV_O_NOCACHE, &err);
    if (!bs && strstr(error_get_pretty(err), "O_DIRECT")) {
        error_free(err);
        test_tmpfile_clear(t);
        g_test_skip("the test directory's file system refuses O_DIRECT");
        return NULL;
    }
    g_assert_null(err);
    return bs;
}

/* The file protocol with BDRV_O_NOCACHE: the same bytes as without. */
static void test_file_nocache(void)
{
    TestTmpFile t;
    g_autoptr(BlockDriverState) bs = NULL;
    uint8_t data[10000], back[10000];
    g_autofree char *content = NULL;
    gsize len;

    /* 10777 bytes: the last block is partial, so the write patches it. */
    bs = nocache_open(&t, "n.img", 777 + sizeof(data));
    if (!bs) {
        return;
    }
    for (size_t i = 0; i < sizeof(data); i++) {
        data[i] = i * 7 + 3;
    }
    g_assert_cmpint(bdrv_pwrite(bs, 777, data, sizeof(data), 0,
                                &error_abort), ==, 0);
    g_assert_cmpint(bdrv_pread(bs, 777, back, sizeof(back), &error_abort),
                    ==, 0);
    g_assert_cmpmem(back, sizeof(back), data, sizeof(data));
    g_clear_pointer(&bs, bdrv_close);
    g_assert_true(g_file_get_contents(t.path, &content, &len, NULL));
    g_assert_cmpuint(len, ==, 777 + sizeof(data));
    g_assert_cmpmem(content + 777, sizeof(data), data, sizeof(data));
    test_tmpfile_clear(&t);
}

/*
 * Writers on threads of their own, through the file protocol with
 * BDRV_O_NOCACHE: each owns every NOCACHE_THREADS-th segment of the file,
 * segments of any length side by side, some of whole aligned blocks (they
 * go to the file at once, side by side) and most not (a read-modify-write
 * of the blocks they share with their neighbours; the file ends inside a
 * block, which is cut back after each write). Every write must survive: a
 * read-modify-write that ran beside another write to its blocks would
 * put back the old bytes of a neighbour.
 */
#define NOCACHE_THREADS 4
#define NOCACHE_ROUNDS 100
/* Not a whole number of blocks. */
#define NOCACHE_SIZE (512 * 1024 - 777)

typedef struct NocacheSeg {
    uint64_t offset;
    size_t len;
} NocacheSeg;

typedef struct NocacheWriter {
    BlockDriverState *bs;
    GArray *segs;           /* NocacheSeg, shared, read only */
    uint8_t *model;         /* what each segment last got, shared */
    unsigned index;
} NocacheWriter;

static gpointer nocache_writer_run(gpointer opaque)
{
    NocacheWriter *w = opaque;
    uint8_t *buf = g_aligned_alloc(1, 4 * FILE_DIRECT_ALIGN,
                                   FILE_DIRECT_ALIGN);
    GRand *rand = g_rand_new_with_seed(w->index);

    for (int round = 0; round < NOCACHE_ROUNDS; round++) {
        for (guint i = w->index; i < w->segs->len; i += NOCACHE_THREADS) {
            NocacheSeg *seg = &g_array_index(w->segs, NocacheSeg, i);

            for (size_t k = 0; k < seg->len; k++) {
                buf[k] = g_rand_int(rand);
            }
            g_assert_cmpint(bdrv_pwrite(w->bs, seg->offset, buf, seg->len, 0,
                                        &error_abort), ==, 0);
            memcpy(w->model + seg->offset, buf, seg->len);
        }
    }
    g_rand_free(rand);
    g_aligned_free(buf);
    return NULL;
}

static void test_file_nocache_threads(void)
{
    TestTmpFile t;
    g_autoptr(BlockDriverState) bs = NULL;
    g_autoptr(GArray) segs = g_array_new(FALSE, FALSE, sizeof(NocacheSeg));
    g_autofree uint8_t *model = g_malloc0(NOCACHE_SIZE);
    g_autofree char *content = NULL;
    NocacheWriter w[NOCACHE_THREADS];
    GThread *thread[NOCACHE_THREADS];
    unsigned aligned = 0;
    gsize len;

    /*
     * Segments: where one starts on a block, whole blocks half the time;
     * otherwise up to the next block (so that the next one starts there)
     * or 1 to 3 blocks' worth of bytes.
     */
    for (uint64_t off = 0; off < NOCACHE_SIZE;) {
        NocacheSeg seg = { .offset = off };

        if (!(off % FILE_DIRECT_ALIGN) && g_test_rand_bit()) {
            seg.len = FILE_DIRECT_ALIGN * g_test_rand_int_range(1, 4);
            aligned++;
        } else if (g_test_rand_bit()) {
            seg.len = FILE_DIRECT_ALIGN - off % FILE_DIRECT_ALIGN;
        } else {
            seg.len = g_test_rand_int_range(1, 3 * FILE_DIRECT_ALIGN);
        }
        seg.len = MIN(seg.len, NOCACHE_SIZE - off);
        g_array_append_val(segs, seg);
        off += seg.len;
    }
    g_assert_cmpuint(aligned, >, 0);

    bs = nocache_open(&t, "t.img", NOCACHE_SIZE);
    if (!bs) {
        return;
    }
    for (unsigned k = 0; k < NOCACHE_THREADS; k++) {
        w[k] = (NocacheWriter) {
            .bs = bs, .segs = segs, .model = model, .index = k,
        };
        thread[k] = g_thread_new("writer", nocache_writer_run, &w[k]);
    }
    for (unsigned k = 0; k < NOCACHE_THREADS; k++) {
        g_thread_join(thread[k]);
    }
    g_clear_pointer(&bs, bdrv_close);
    g_assert_true(g_file_get_contents(t.path, &content, &len, NULL));
    g_assert_cmpuint(len, ==, NOCACHE_SIZE);
    g_assert_cmpmem(content, len, model, NOCACHE_SIZE);
    test_tmpfile_clear(&t);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/block/file-direct/pread", test_direct_pread);
    g_test_add_func("/block/file-direct/pwrite", test_direct_pwrite);
    g_test_add_func("/block/file-direct/error", test_direct_error);
    g_test_add_func("/block/file-direct/nocache-open", test_file_nocache);
    g_test_add_func("/block/file-direct/nocache-threads",
                    test_file_nocache_threads);
    return g_test_run();
}
