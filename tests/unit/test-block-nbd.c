/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The nbd protocol driver (block/nbd.c) against a real server, nbdkit's
 * memory plugin on a unix socket started here: the requests the command
 * line does not reach yet (zero writes, discards, block status after
 * each), requests larger than the server's maximum (split), reads past
 * the export's end (zeroes), writes past it (refused), and the names.
 * Skipped, saying why, where nbdkit is not installed.
 */
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <glib/gstdio.h>

#include "block/block.h"
#include "test-error.h"

#define EXPORT_SIZE (64 * 1024 * 1024)

typedef struct Server {
    char *dir;
    char *sock;
    char *uri;
    GPid pid;
} Server;

/* nbdkit memory size=64M on DIR/nbd.sock; false (test skipped) if absent. */
static bool server_start(Server *s)
{
    g_autofree char *nbdkit = g_find_program_in_path("nbdkit");
    GError *gerr = NULL;

    memset(s, 0, sizeof(*s));
    if (!nbdkit) {
        g_test_skip("nbdkit is not installed (scripts/install-deps.sh)");
        return false;
    }
    s->dir = g_dir_make_tmp("test-block-nbd-XXXXXX", NULL);
    g_assert_nonnull(s->dir);
    s->sock = g_build_filename(s->dir, "nbd.sock", NULL);
    s->uri = g_strdup_printf("nbd+unix:///?socket=%s", s->sock);
    {
        char *argv[] = {
            nbdkit, (char *)"-f", (char *)"-U", s->sock,
            (char *)"memory", (char *)"size=64M", NULL,
        };

        g_assert_true(g_spawn_async(NULL, argv, NULL,
                                    G_SPAWN_DO_NOT_REAP_CHILD |
                                    G_SPAWN_STDOUT_TO_DEV_NULL,
                                    NULL, NULL, &s->pid, &gerr));
    }
    for (int i = 0; i < 200 && !g_file_test(s->sock, G_FILE_TEST_EXISTS);
         i++) {
        g_usleep(50 * 1000);
    }
    g_assert_true(g_file_test(s->sock, G_FILE_TEST_EXISTS));
    return true;
}

static void server_stop(Server *s)
{
    if (s->pid) {
        kill(s->pid, SIGTERM);
        waitpid(s->pid, NULL, 0);
        g_spawn_close_pid(s->pid);
    }
    if (s->sock) {
        g_unlink(s->sock);
    }
    if (s->dir) {
        g_rmdir(s->dir);
    }
    g_free(s->dir);
    g_free(s->sock);
    g_free(s->uri);
}

static bool all_equal(const uint8_t *p, size_t n, uint8_t v)
{
    for (size_t i = 0; i < n; i++) {
        if (p[i] != v) {
            return false;
        }
    }
    return true;
}

static void test_requests(void)
{
    Server srv;
    g_autoptr(BlockDriverState) bs = NULL;
    /* More than the 32 MiB a request may carry: split by the driver. */
    size_t big = 40 * 1024 * 1024;
    g_autofree uint8_t *buf = g_malloc(big);
    uint64_t pnum;
    Error *err = NULL;
    int ret;

    if (!server_start(&srv)) {
        return;
    }
    bs = bdrv_open(srv.uri, "file", NULL, BDRV_O_RDWR, &err);
    g_assert_null(bs);      /* a file driver cannot take an NBD name */
    test_error_expect(&err, "Cannot use protocol driver 'file'");
    bs = bdrv_open(srv.uri, "raw", NULL, BDRV_O_RDWR, &error_abort);
    g_assert_cmpint(bdrv_getlength(bs, &error_abort), ==, EXPORT_SIZE);

    /* A new memory export is a hole that reads as zeroes. */
    ret = bdrv_block_status(bs, 0, EXPORT_SIZE, &pnum, NULL, NULL,
                            &error_abort);
    g_assert_cmpint(ret & (BDRV_BLOCK_DATA | BDRV_BLOCK_ZERO), ==,
                    BDRV_BLOCK_ZERO);

    memset(buf, 'a', big);
    g_assert_cmpint(bdrv_pwrite(bs, 4096, buf, big, 0, &error_abort), ==, 0);
    memset(buf, 0, big);
    g_assert_cmpint(bdrv_pread(bs, 4096, buf, big, &error_abort), ==, 0);
    g_assert_true(all_equal(buf, big, 'a'));
    ret = bdrv_block_status(bs, 4096, 65536, &pnum, NULL, NULL,
                            &error_abort);
    g_assert_true(ret & BDRV_BLOCK_DATA);
    g_assert_false(ret & BDRV_BLOCK_ZERO);

    /* Zero writes (NBD_CMD_WRITE_ZEROES) and trims reach the server. */
    g_assert_cmpint(bdrv_pwrite_zeroes(bs, 1 << 20, 1 << 20, 0,
                                       &error_abort), ==, 0);
    g_assert_cmpint(bdrv_pread(bs, 1 << 20, buf, 1 << 20, &error_abort),
                    ==, 0);
    g_assert_true(all_equal(buf, 1 << 20, 0));
    ret = bdrv_block_status(bs, 1 << 20, 1 << 20, &pnum, NULL, NULL,
                            &error_abort);
    g_assert_true(ret & BDRV_BLOCK_ZERO);
    g_assert_cmpint(bdrv_pdiscard(bs, 4 << 20, 1 << 20, &error_abort), ==,
                    0);
    ret = bdrv_block_status(bs, 4 << 20, 1 << 20, &pnum, NULL, NULL,
                            &error_abort);
    g_assert_false(ret & BDRV_BLOCK_DATA);      /* the memory plugin trims */
    g_assert_cmpint(bdrv_flush(bs, &error_abort), ==, 0);

    /* The export has its size: past it, a write fails, nothing resizes. */
    g_assert_cmpint(bdrv_pwrite(bs, EXPORT_SIZE - 512, buf, 1024, 0, &err),
                    ==, -1);
    test_error_expect(&err, "beyond the end");
    g_assert_cmpint(bdrv_truncate(bs, EXPORT_SIZE * 2, PREALLOC_MODE_OFF,
                                  &err), ==, -1);
    test_error_expect(&err, "Cannot resize");
    g_clear_pointer(&bs, bdrv_close);

    /* The protocol node itself reads past the end as zeroes. */
    bs = bdrv_open(srv.uri, "nbd", NULL, 0, &error_abort);
    memset(buf, 1, 8192);
    g_assert_cmpint(bdrv_pread(bs, EXPORT_SIZE - 4096, buf, 8192,
                               &error_abort), ==, 0);
    g_assert_true(all_equal(buf + 4096, 4096, 0));
    g_clear_pointer(&bs, bdrv_close);
    server_stop(&srv);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/block/nbd/requests", test_requests);
    return g_test_run();
}
