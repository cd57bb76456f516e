/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Image locking (block/file-lock.c), QEMU's way:
 *
 * - an open holds a read lock on byte 100 + n for each permission n it
 *   needs, and on byte 200 + n for each it does not share;
 * - a second open of the file (its own open file description, so this
 *   works inside one process) fails when the first holds a permission it
 *   does not share ('Failed to get shared "write" lock') or refuses one it
 *   needs ('Failed to get "write" lock');
 * - closing the file drops its locks;
 * - without OFD locks (Linux before 3.15), POSIX locks exclude other
 *   processes the same way;
 * - inside a process, a file (by device and inode) is never written while
 *   it is also open, whatever name reaches it.
 */
#include <fcntl.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "block/block_int.h"
#include "../../block/file-lock.h"
#include "test-error.h"

#define READER_PERM   FILE_PERM_CONSISTENT_READ
#define WRITER_PERM   (FILE_PERM_CONSISTENT_READ | FILE_PERM_WRITE | \
                       FILE_PERM_RESIZE)
#define SHARED        (FILE_PERM_CONSISTENT_READ | FILE_PERM_WRITE_UNCHANGED)

typedef struct Fixture {
    char *dir;
    char *path;
} Fixture;

static void fixture_setup(Fixture *f, gconstpointer data)
{
    f->dir = g_dir_make_tmp("qil-lock-XXXXXX", NULL);
    g_assert_nonnull(f->dir);
    f->path = g_build_filename(f->dir, "img", NULL);
    g_assert_true(g_file_set_contents(f->path, "0123456789", 10, NULL));
}

static void fixture_teardown(Fixture *f, gconstpointer data)
{
    g_autofree char *link_path = g_build_filename(f->dir, "link", NULL);

    unlink(link_path);
    unlink(f->path);
    rmdir(f->dir);
    g_free(f->path);
    g_free(f->dir);
}

static int open_file(const char *path)
{
    int fd = open(path, O_RDWR | O_CLOEXEC);

    g_assert_cmpint(fd, >=, 0);
    return fd;
}

/* Whether another open file description holds a lock on byte offset. */
static bool byte_locked(const char *path, int offset)
{
    struct flock fl = {
        .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = offset,
        .l_len = 1,
    };
    int fd = open(path, O_RDONLY | O_CLOEXEC);

    g_assert_cmpint(fcntl(fd, F_OFD_GETLK, &fl), ==, 0);
    close(fd);
    return fl.l_type != F_UNLCK;
}

static void test_bytes(Fixture *f, gconstpointer data)
{
    /* held: 100 (consistent read), 101 (write), 103 (resize);
     * not shared: 201 (write), 203 (resize) */
    static const int locked[] = { 100, 101, 103, 201, 203 };
    static const int free_bytes[] = { 99, 102, 104, 200, 202, 204 };
    int fd = open_file(f->path);

    g_assert_cmpint(file_lock_acquire(fd, f->path, WRITER_PERM, SHARED,
                                      &error_abort), ==, 0);
    for (size_t i = 0; i < G_N_ELEMENTS(locked); i++) {
        g_assert_true(byte_locked(f->path, locked[i]));
    }
    for (size_t i = 0; i < G_N_ELEMENTS(free_bytes); i++) {
        g_assert_false(byte_locked(f->path, free_bytes[i]));
    }
    close(fd);
    for (size_t i = 0; i < G_N_ELEMENTS(locked); i++) {
        g_assert_false(byte_locked(f->path, locked[i]));
    }
}

static void test_writer_excludes(Fixture *f, gconstpointer data)
{
    g_autofree char *hint = g_strdup_printf(
        "Is another process using the image [%s]?", f->path);
    int writer = open_file(f->path);
    int other = open_file(f->path);
    Error *err = NULL;

    g_assert_cmpint(file_lock_acquire(writer, f->path, WRITER_PERM, SHARED,
                                      &error_abort), ==, 0);
    /* A reader does not share write, which the writer holds. */
    g_assert_cmpint(file_lock_acquire(other, f->path, READER_PERM, SHARED,
                                      &err), <, 0);
    g_assert_nonnull(strstr(error_get_pretty(err),
                            "Failed to get shared \"write\" lock"));
    g_assert_nonnull(strstr(error_get_pretty(err), hint));
    g_clear_pointer(&err, error_free);
    close(other);

    /* A second writer needs write, which the first does not share. */
    other = open_file(f->path);
    g_assert_cmpint(file_lock_acquire(other, f->path, WRITER_PERM, SHARED,
                                      &err), <, 0);
    g_assert_nonnull(strstr(error_get_pretty(err),
                            "Failed to get \"write\" lock"));
    g_clear_pointer(&err, error_free);
    close(other);

    /* Once the writer is gone, anyone may come. */
    close(writer);
    other = open_file(f->path);
    g_assert_cmpint(file_lock_acquire(other, f->path, WRITER_PERM, SHARED,
                                      &error_abort), ==, 0);
    close(other);
}

static void test_reader_blocks_writer(Fixture *f, gconstpointer data)
{
    g_autofree char *expected = g_strdup_printf(
        "Failed to get \"write\" lock\nIs another process using the image "
        "[%s]?", f->path);
    int r1 = open_file(f->path);
    int r2 = open_file(f->path);
    int w = open_file(f->path);
    Error *err = NULL;

    g_assert_cmpint(file_lock_acquire(r1, f->path, READER_PERM, SHARED,
                                      &error_abort), ==, 0);
    /* Readers share with readers. */
    g_assert_cmpint(file_lock_acquire(r2, f->path, READER_PERM, SHARED,
                                      &error_abort), ==, 0);
    g_assert_cmpint(file_lock_acquire(w, f->path, WRITER_PERM, SHARED,
                                      &err), <, 0);
    g_assert_cmpstr(error_get_pretty(err), ==, expected);
    error_free(err);
    close(r1);
    close(r2);
    close(w);
}

static void test_claims(Fixture *f, gconstpointer data)
{
    g_autofree char *link_path = g_build_filename(f->dir, "link", NULL);
    struct stat st, st_link;
    FileLockClaim *a, *b;
    Error *err = NULL;

    g_assert_cmpint(link(f->path, link_path), ==, 0);
    g_assert_cmpint(stat(f->path, &st), ==, 0);
    g_assert_cmpint(stat(link_path, &st_link), ==, 0);

    /* Two readers of one file: fine. */
    a = file_lock_claim(&st, f->path, false, &error_abort);
    b = file_lock_claim(&st_link, link_path, false, &error_abort);
    file_lock_unclaim(b);

    /* Writing a file this process reads, under another name: refused. */
    g_assert_null(file_lock_claim(&st_link, link_path, true, &err));
    g_assert_nonnull(strstr(error_get_pretty(err), "same file as"));
    g_assert_nonnull(strstr(error_get_pretty(err), f->path));
    g_clear_pointer(&err, error_free);
    file_lock_unclaim(a);

    /* Reading a file this process writes: refused too. */
    a = file_lock_claim(&st, f->path, true, &error_abort);
    g_assert_null(file_lock_claim(&st_link, link_path, false, &err));
    g_clear_pointer(&err, error_free);
    file_lock_unclaim(a);

    /* Nothing is left claimed. */
    a = file_lock_claim(&st_link, link_path, true, &error_abort);
    file_lock_unclaim(a);
}

/* Through the block layer: -U (BDRV_O_FORCE_SHARE) and locking=off. */
static void test_bdrv_open(Fixture *f, gconstpointer data)
{
    g_autoptr(GHashTable) off = qemu_opts_new();
    int writer = open_file(f->path);
    BlockDriverState *bs;
    Error *err = NULL;

    g_assert_cmpint(file_lock_acquire(writer, f->path, WRITER_PERM, SHARED,
                                      &error_abort), ==, 0);
    bs = bdrv_open(f->path, "raw", NULL, 0, &err);
    g_assert_null(bs);
    g_assert_nonnull(strstr(error_get_pretty(err), "Could not open '"));
    g_assert_nonnull(strstr(error_get_pretty(err),
                            "Failed to get shared \"write\" lock"));
    g_clear_pointer(&err, error_free);

    bs = bdrv_open(f->path, "raw", NULL, BDRV_O_FORCE_SHARE, &error_abort);
    bdrv_close(bs);
    g_hash_table_insert(off, g_strdup("file.locking"), g_strdup("off"));
    bs = bdrv_open(f->path, "raw", off, 0, &error_abort);
    bdrv_close(bs);
    close(writer);

    /* A failed open leaves no claim behind: the file opens for writing. */
    bs = bdrv_open(f->path, "raw", NULL, BDRV_O_RDWR, &error_abort);
    bdrv_close(bs);
}

/*
 * The POSIX fallback, in a child process (it stays on for the process):
 * a writer in a grandchild excludes a reader in the child, and is gone
 * with it.
 */
static void test_posix_fallback(Fixture *f, gconstpointer data)
{
    if (g_test_subprocess()) {
        int ready[2], done[2];
        int fd = open_file(f->path), wfd2;
        Error *err = NULL;
        pid_t pid;
        char c;

        file_lock_use_posix_locks();
        g_assert_cmpint(pipe(ready), ==, 0);
        g_assert_cmpint(pipe(done), ==, 0);
        pid = fork();
        if (pid == 0) {
            int wfd = open_file(f->path);

            if (file_lock_acquire(wfd, f->path, WRITER_PERM, SHARED,
                                  NULL) < 0) {
                _exit(1);
            }
            (void)!write(ready[1], "x", 1);
            (void)!read(done[0], &c, 1);
            _exit(0);
        }
        g_assert_cmpint(read(ready[0], &c, 1), ==, 1);
        g_assert_cmpint(file_lock_acquire(fd, f->path, READER_PERM, SHARED,
                                          &err), <, 0);
        g_assert_nonnull(strstr(error_get_pretty(err),
                                "Failed to get shared \"write\" lock"));
        error_free(err);
        g_assert_cmpint(write(done[1], "x", 1), ==, 1);
        g_assert_cmpint(waitpid(pid, NULL, 0), ==, pid);
        g_assert_cmpint(file_lock_acquire(fd, f->path, READER_PERM, SHARED,
                                          &error_abort), ==, 0);
        /* OFD and POSIX locks conflict: QEMU's OFD queries see these. */
        g_assert_true(byte_locked(f->path, 100));
        /*
         * POSIX locks belong to the process: a second open in it does not
         * see them (file_lock_claim covers that case), where OFD locks
         * would refuse it.
         */
        wfd2 = open_file(f->path);
        g_assert_cmpint(file_lock_acquire(wfd2, f->path, WRITER_PERM, SHARED,
                                          &error_abort), ==, 0);
        close(wfd2);
        close(fd);
        return;
    }
    g_test_trap_subprocess(NULL, 0, G_TEST_SUBPROCESS_DEFAULT);
    g_test_trap_assert_passed();
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add("/block/file-lock/bytes", Fixture, NULL, fixture_setup,
               test_bytes, fixture_teardown);
    g_test_add("/block/file-lock/writer-excludes", Fixture, NULL,
               fixture_setup, test_writer_excludes, fixture_teardown);
    g_test_add("/block/file-lock/reader-blocks-writer", Fixture, NULL,
               fixture_setup, test_reader_blocks_writer, fixture_teardown);
    g_test_add("/block/file-lock/claims", Fixture, NULL, fixture_setup,
               test_claims, fixture_teardown);
    g_test_add("/block/file-lock/bdrv-open", Fixture, NULL, fixture_setup,
               test_bdrv_open, fixture_teardown);
    g_test_add("/block/file-lock/posix-fallback", Fixture, NULL,
               fixture_setup, test_posix_fallback, fixture_teardown);
    return g_test_run();
}
