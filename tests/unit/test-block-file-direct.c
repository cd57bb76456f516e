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

/* The file protocol with BDRV_O_NOCACHE: the same bytes as without. */
static void test_file_nocache(void)
{
    TestTmpFile t;
    g_autoptr(BlockDriverState) bs = NULL;
    uint8_t data[10000], back[10000];
    g_autofree char *content = NULL;
    gsize len;
    Error *err = NULL;

    test_tmpfile_init(&t, "qil-direct", "n.img");
    /* 10777 bytes: the last block is partial, so the write patches it. */
    content = g_malloc0(777 + sizeof(data));
    g_assert_true(g_file_set_contents(t.path, content, 777 + sizeof(data),
                                      NULL));
    g_clear_pointer(&content, g_free);
    bs = bdrv_open(t.path, "raw", NULL, BDRV_O_RDWR | BDRV_O_NOCACHE, &err);
    if (!bs && strstr(error_get_pretty(err), "O_DIRECT")) {
        error_free(err);
        test_tmpfile_clear(&t);
        g_test_skip("the test directory's file system refuses O_DIRECT");
        return;
    }
    g_assert_null(err);
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

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/block/file-direct/pread", test_direct_pread);
    g_test_add_func("/block/file-direct/pwrite", test_direct_pwrite);
    g_test_add_func("/block/file-direct/error", test_direct_error);
    g_test_add_func("/block/file-direct/nocache-open", test_file_nocache);
    return g_test_run();
}
