/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The nbd protocol driver (block/nbd.c) against a real server, nbdkit's
 * memory plugin on a unix socket started here: the requests the command
 * line does not reach yet (zero writes, discards, block status after
 * each), requests larger than the server's maximum (split), reads past
 * the export's end (zeroes), writes past it (refused), and the names;
 * requests from several threads on the wire together, on one connection
 * or on several where the server allows multi-conn; and the connect
 * deadline against a socket that never answers. Skipped, saying why,
 * where nbdkit is not installed.
 */
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <glib/gstdio.h>

#include "block/block.h"
#include "block/options.h"
#include "test-error.h"

#define EXPORT_SIZE (64 * 1024 * 1024)

typedef struct Server {
    char *dir;
    char *sock;
    char *uri;
    GPid pid;
} Server;

/*
 * nbdkit on DIR/nbd.sock serving args (filters, the plugin and its
 * parameters; NULL: memory size=64M); false (test skipped) if absent.
 */
static bool server_start_with(Server *s, const char *const *args)
{
    static const char *const memory[] = { "memory", "size=64M", NULL };
    g_autofree char *nbdkit = g_find_program_in_path("nbdkit");
    g_autoptr(GPtrArray) argv = g_ptr_array_new();
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
    g_ptr_array_add(argv, nbdkit);
    g_ptr_array_add(argv, (char *)"-f");
    g_ptr_array_add(argv, (char *)"-U");
    g_ptr_array_add(argv, s->sock);
    for (const char *const *a = args ? args : memory; *a; a++) {
        g_ptr_array_add(argv, (char *)*a);
    }
    g_ptr_array_add(argv, NULL);
    g_assert_true(g_spawn_async(NULL, (char **)argv->pdata, NULL,
                                G_SPAWN_DO_NOT_REAP_CHILD |
                                G_SPAWN_STDOUT_TO_DEV_NULL,
                                NULL, NULL, &s->pid, &gerr));
    for (int i = 0; i < 200 && !g_file_test(s->sock, G_FILE_TEST_EXISTS);
         i++) {
        g_usleep(50 * 1000);
    }
    g_assert_true(g_file_test(s->sock, G_FILE_TEST_EXISTS));
    return true;
}

static bool server_start(Server *s)
{
    return server_start_with(s, NULL);
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

/* ---- Several requests in flight */

#define OVERLAP_THREADS 8
/* Each read waits this long in the server (nbdkit's delay filter). */
#define OVERLAP_DELAY_MS 300

typedef struct OverlapJob {
    BlockDriverState *bs;
    uint64_t offset;
} OverlapJob;

static gpointer overlap_read(gpointer opaque)
{
    OverlapJob *job = opaque;
    uint8_t buf[4096];

    g_assert_cmpint(bdrv_pread(job->bs, job->offset, buf, sizeof(buf),
                               &error_abort), ==, 0);
    return NULL;
}

/* How many connections nbdkit's log filter saw. */
static unsigned log_connections(const char *log)
{
    g_autofree char *text = NULL;
    unsigned n = 0;

    g_assert_true(g_file_get_contents(log, &text, NULL, NULL));
    for (const char *p = text; (p = strstr(p, " Connect ")); p++) {
        n++;
    }
    return n;
}

/*
 * OVERLAP_THREADS threads read at once from a server that answers each
 * read after OVERLAP_DELAY_MS: on the wire together, they take about one
 * delay, not one each (as when libnbd's handle lock made them take
 * turns). multi_conn: whether the server allows several connections.
 */
static void overlap_run(bool multi_conn)
{
    g_autofree char *logdir = g_dir_make_tmp("test-block-nbd-log-XXXXXX",
                                             NULL);
    g_autofree char *log = g_build_filename(logdir, "log", NULL);
    g_autofree char *logfile = g_strdup_printf("logfile=%s", log);
    g_autofree char *delay = g_strdup_printf("delay-read=%dms",
                                             OVERLAP_DELAY_MS);
    const char *args[12];
    unsigned n = 0;
    Server srv;
    BlockDriverState *bs;
    GThread *threads[OVERLAP_THREADS];
    OverlapJob jobs[OVERLAP_THREADS];
    gint64 start, elapsed_ms;
    unsigned conns;

    /*
     * multi-conn outermost: below the log filter, nbdkit 1.32.5's
     * multi-conn filter fails an assertion when a connection ends.
     */
    if (!multi_conn) {
        args[n++] = "--filter=multi-conn";
    }
    args[n++] = "--filter=log";
    args[n++] = "--filter=delay";
    args[n++] = "memory";
    args[n++] = "size=64M";
    args[n++] = delay;
    args[n++] = logfile;
    if (!multi_conn) {
        args[n++] = "multi-conn-mode=disable";
    }
    args[n] = NULL;
    if (!server_start_with(&srv, args)) {
        g_rmdir(logdir);
        return;
    }
    bs = bdrv_open(srv.uri, "raw", NULL, 0, &error_abort);
    /* The extra connections are made in the background: let them. */
    g_usleep(500 * 1000);
    start = g_get_monotonic_time();
    for (unsigned i = 0; i < OVERLAP_THREADS; i++) {
        jobs[i] = (OverlapJob) { .bs = bs, .offset = i * (1 << 20) };
        threads[i] = g_thread_new("reader", overlap_read, &jobs[i]);
    }
    for (unsigned i = 0; i < OVERLAP_THREADS; i++) {
        g_thread_join(threads[i]);
    }
    elapsed_ms = (g_get_monotonic_time() - start) / 1000;
    bdrv_close(bs);
    /* Taking turns would be 8 delays; a loaded machine may add some. */
    g_test_message("%d reads of %d ms each: %" G_GINT64_FORMAT " ms",
                   OVERLAP_THREADS, OVERLAP_DELAY_MS, elapsed_ms);
    g_assert_cmpint(elapsed_ms, <, OVERLAP_DELAY_MS * OVERLAP_THREADS / 2);
    server_stop(&srv);
    conns = log_connections(log);
    if (multi_conn) {
        g_assert_cmpuint(conns, >, 1);
        g_assert_cmpuint(conns, <=, 4);
    } else {
        g_assert_cmpuint(conns, ==, 1);
    }
    g_unlink(log);
    g_rmdir(logdir);
}

static void test_overlap_one_connection(void)
{
    overlap_run(false);
}

static void test_overlap_multi_conn(void)
{
    overlap_run(true);
}

/* ---- The connect deadline */

/*
 * A unix socket that listens and never accepts: the kernel completes the
 * connection, and the NBD greeting never comes.
 */
static void test_open_timeout(void)
{
    g_autofree char *dir = g_dir_make_tmp("test-block-nbd-XXXXXX", NULL);
    g_autofree char *path = g_build_filename(dir, "silent.sock", NULL);
    g_autofree char *def = g_strdup_printf("driver=nbd,server.type=unix,"
                                           "server.path=%s,open-timeout=1",
                                           path);
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    g_autoptr(GHashTable) opts = NULL;
    BlockDriverState *bs;
    Error *err = NULL;
    gint64 start, elapsed_ms;
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);

    g_assert_cmpint(fd, >=, 0);
    g_strlcpy(sa.sun_path, path, sizeof(sa.sun_path));
    g_assert_cmpint(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), ==, 0);
    g_assert_cmpint(listen(fd, 8), ==, 0);
    opts = qemu_opts_parse(def, NULL, &error_abort);
    start = g_get_monotonic_time();
    bs = bdrv_open(NULL, NULL, opts, 0, &err);
    elapsed_ms = (g_get_monotonic_time() - start) / 1000;
    g_assert_null(bs);
    test_error_expect(&err, "no answer within 1 seconds");
    g_assert_cmpint(elapsed_ms, >=, 900);
    g_assert_cmpint(elapsed_ms, <, 10000);
    close(fd);
    g_unlink(path);
    g_rmdir(dir);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/block/nbd/requests", test_requests);
    g_test_add_func("/block/nbd/overlap/one-connection",
                    test_overlap_one_connection);
    g_test_add_func("/block/nbd/overlap/multi-conn", test_overlap_multi_conn);
    g_test_add_func("/block/nbd/open-timeout", test_open_timeout);
    return g_test_run();
}
