/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The blkdebug filter (block/blkdebug.c): the N-th request of a kind
 * fails with the errno asked for, and only it (or fail-count of them, or
 * every one from N on); the rest pass through to the file unchanged (but
 * a node whose flush failed fails every later flush: block/io.c); a
 * kill or a torn write ends the process there (run in a child process,
 * whose exit and what it left on disk are checked).
 */
#include <errno.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <glib/gstdio.h>

#include "block/block.h"
#include "block/options.h"
#include "test-error.h"
#include "test-tmpdir.h"

#define IMG_SIZE (256 * 1024)

static BlockDriverState *open_blkdebug(TestTmpFile *t, const char *rules,
                                       int flags)
{
    g_autofree char *str = g_strdup_printf(
        "driver=raw,file.driver=blkdebug,%s,file.file.filename=%s", rules,
        t->path);
    g_autoptr(GHashTable) opts = qemu_opts_parse(str, NULL, NULL);

    g_assert_nonnull(opts);
    return bdrv_open(NULL, NULL, opts, flags, &error_abort);
}

static void make_file(TestTmpFile *t, uint8_t fill)
{
    g_autofree uint8_t *buf = g_malloc(IMG_SIZE);

    memset(buf, fill, IMG_SIZE);
    g_assert_true(g_file_set_contents(t->path, (char *)buf, IMG_SIZE, NULL));
}

/* The third write fails with ENOSPC, the others reach the file. */
static void test_fail_write(void)
{
    TestTmpFile t;
    g_autoptr(BlockDriverState) bs = NULL;
    g_autofree char *data = NULL;
    uint8_t buf[512];
    Error *err = NULL;

    test_tmpfile_init(&t, "test-blkdebug", "disk.raw");
    make_file(&t, 0);
    bs = open_blkdebug(&t, "file.fail-write=3,file.errno=ENOSPC",
                       BDRV_O_RDWR);
    memset(buf, 'a', sizeof(buf));
    for (int i = 0; i < 5; i++) {
        int ret = bdrv_pwrite(bs, i * 512, buf, 512, 0, &err);

        if (i == 2) {
            g_assert_cmpint(ret, ==, -1);
            g_assert_nonnull(strstr(error_get_pretty(err),
                                    strerror(ENOSPC)));
            test_error_expect(&err, "blkdebug: write 3 injected");
        } else {
            g_assert_cmpint(ret, ==, 0);
        }
    }
    g_assert_cmpint(bdrv_flush(bs, &error_abort), ==, 0);
    g_assert_true(g_file_get_contents(t.path, &data, NULL, NULL));
    for (int i = 0; i < 5; i++) {
        g_assert_cmpint(data[i * 512], ==, i == 2 ? 0 : 'a');
    }
    g_clear_pointer(&bs, bdrv_close);
    test_tmpfile_clear(&t);
}

/* fail-count=0: a device that stays broken from the N-th read on. */
static void test_fail_read_sticky(void)
{
    TestTmpFile t;
    g_autoptr(BlockDriverState) bs = NULL;
    uint8_t buf[512];
    Error *err = NULL;

    test_tmpfile_init(&t, "test-blkdebug", "disk.raw");
    make_file(&t, 'x');
    bs = open_blkdebug(&t, "file.fail-read=2,file.fail-count=0", 0);
    g_assert_cmpint(bdrv_pread(bs, 0, buf, 512, &error_abort), ==, 0);
    g_assert_cmpint(buf[0], ==, 'x');
    for (int i = 0; i < 3; i++) {
        g_assert_cmpint(bdrv_pread(bs, 0, buf, 512, &err), ==, -1);
        test_error_expect(&err, strerror(EIO));
    }
    g_clear_pointer(&bs, bdrv_close);
    test_tmpfile_clear(&t);
}

/*
 * A failed flush is never success, and it is sticky: the device's second
 * flush would go through (fail-count=1), but the node's does not, since
 * what the first one was to write may be lost. The error names the file.
 */
static void test_fail_flush(void)
{
    TestTmpFile t;
    g_autoptr(BlockDriverState) bs = NULL;
    Error *err = NULL;

    test_tmpfile_init(&t, "test-blkdebug", "disk.raw");
    make_file(&t, 0);
    bs = open_blkdebug(&t, "file.fail-flush=1", BDRV_O_RDWR);
    g_assert_cmpint(bdrv_pwrite(bs, 0, "data", 4, 0, &error_abort), ==, 0);
    g_assert_cmpint(bdrv_flush(bs, &err), ==, -1);
    test_error_expect(&err, "blkdebug: flush 1 injected");
    for (int i = 0; i < 2; i++) {
        g_assert_cmpint(bdrv_pwrite(bs, 0, "more", 4, 0, &error_abort), ==,
                        0);
        g_assert_cmpint(bdrv_flush(bs, &err), ==, -1);
        g_assert_nonnull(strstr(error_get_pretty(err), t.path));
        test_error_expect(&err, "an earlier flush failed");
    }
    g_clear_pointer(&bs, bdrv_close);
    test_tmpfile_clear(&t);
}

/*
 * A bad area fails every read that touches it, every time, and only
 * those; a file reads in 512-byte logical blocks (what --salvage narrows
 * a failed read to).
 */
static void test_bad_area(void)
{
    TestTmpFile t;
    g_autoptr(BlockDriverState) bs = NULL;
    uint8_t buf[1024];
    Error *err = NULL;

    test_tmpfile_init(&t, "test-blkdebug", "disk.raw");
    make_file(&t, 'x');
    bs = open_blkdebug(&t, "file.bad-offset=4096,file.bad-bytes=512", 0);
    g_assert_cmpuint(bdrv_get_logical_block_size(bs), ==, 512);
    for (int i = 0; i < 2; i++) {
        g_assert_cmpint(bdrv_pread(bs, 4000, buf, 97, &err), ==, -1);
        test_error_expect(&err, "bad area at 4096");
        g_assert_cmpint(bdrv_pread(bs, 4096 + 511, buf, 1, &err), ==, -1);
        test_error_expect(&err, strerror(EIO));
    }
    g_assert_cmpint(bdrv_pread(bs, 4096 - 1024, buf, 1024, &error_abort), ==,
                    0);
    g_assert_cmpint(bdrv_pread(bs, 4608, buf, 1024, &error_abort), ==, 0);
    g_assert_cmpint(buf[0], ==, 'x');
    g_clear_pointer(&bs, bdrv_close);
    test_tmpfile_clear(&t);
}

static void test_bad_options(void)
{
    TestTmpFile t;
    g_autofree char *str = NULL;
    g_autoptr(GHashTable) opts = NULL;
    Error *err = NULL;

    test_tmpfile_init(&t, "test-blkdebug", "disk.raw");
    make_file(&t, 0);
    str = g_strdup_printf("driver=blkdebug,errno=EWHAT,file.filename=%s",
                          t.path);
    opts = qemu_opts_parse(str, NULL, NULL);
    g_assert_null(bdrv_open(NULL, NULL, opts, 0, &err));
    test_error_expect(&err, "'errno' does not accept value 'EWHAT'");
    test_tmpfile_clear(&t);
}

/*
 * Run writes of 8 KiB of 'b' at 0, 8 KiB, ... in a child process through
 * rules; return its wait status.
 */
static int run_writes_in_child(TestTmpFile *t, const char *rules)
{
    pid_t pid = fork();
    int status;

    g_assert_cmpint(pid, >=, 0);
    if (pid == 0) {
        BlockDriverState *bs = open_blkdebug(t, rules, BDRV_O_RDWR);
        uint8_t buf[8192];

        memset(buf, 'b', sizeof(buf));
        for (int i = 0; i < 8; i++) {
            if (bdrv_pwrite(bs, i * 8192, buf, sizeof(buf), 0, NULL) < 0) {
                _exit(2);
            }
        }
        bdrv_close(bs);
        _exit(0);
    }
    g_assert_cmpint(waitpid(pid, &status, 0), ==, pid);
    return status;
}

/* kill-write: the process dies before the N-th write; torn-write: in it. */
static void test_kill_and_torn(void)
{
    TestTmpFile t;
    g_autofree char *data = NULL;
    int status;

    test_tmpfile_init(&t, "test-blkdebug", "disk.raw");
    make_file(&t, 0);
    status = run_writes_in_child(&t, "file.kill-write=3");
    g_assert_true(WIFSIGNALED(status));
    g_assert_cmpint(WTERMSIG(status), ==, SIGKILL);
    g_assert_true(g_file_get_contents(t.path, &data, NULL, NULL));
    g_assert_cmpint(data[8191], ==, 'b');       /* write 2 landed */
    g_assert_cmpint(data[16384], ==, 0);        /* write 3 did not */
    g_clear_pointer(&data, g_free);

    make_file(&t, 0);
    status = run_writes_in_child(&t, "file.torn-write=2");
    g_assert_true(WIFSIGNALED(status));
    g_assert_true(g_file_get_contents(t.path, &data, NULL, NULL));
    g_assert_cmpint(data[8192], ==, 'b');       /* write 2's first half */
    g_assert_cmpint(data[8192 + 4095], ==, 'b');
    g_assert_cmpint(data[8192 + 4096], ==, 0);  /* ...and no more */

    /* Without a rule the child finishes. */
    status = run_writes_in_child(&t, "file.kill-write=0");
    g_assert_true(WIFEXITED(status));
    g_assert_cmpint(WEXITSTATUS(status), ==, 0);
    test_tmpfile_clear(&t);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/block/blkdebug/fail-write", test_fail_write);
    g_test_add_func("/block/blkdebug/fail-read-sticky",
                    test_fail_read_sticky);
    g_test_add_func("/block/blkdebug/fail-flush", test_fail_flush);
    g_test_add_func("/block/blkdebug/bad-area", test_bad_area);
    g_test_add_func("/block/blkdebug/bad-options", test_bad_options);
    g_test_add_func("/block/blkdebug/kill-and-torn", test_kill_and_torn);
    return g_test_run();
}
