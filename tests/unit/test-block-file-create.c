/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * New files that appear under their name only when complete
 * (block/file-create.c), and the block layer's creations on top of them:
 *
 * - until commit, the target name does not exist; with O_TMPFILE the
 *   directory shows nothing at all, without it only ".NAME.XXXXXX";
 * - commit gives the file its name, with what was written, and the mode
 *   open(O_CREAT, 0644) would give;
 * - dropping a file never committed leaves nothing, a killed process
 *   (SIGKILL) nothing either where O_TMPFILE works;
 * - nothing under the name is ever replaced: a taken name fails at the
 *   start, and at commit if it was taken meanwhile;
 * - bdrv_create() names the image before it returns, bdrv_create_open()
 *   only at bdrv_create_finish(); interrupted, neither names anything;
 * - bdrv_delete_file() removes the name of the file a node holds (the node
 *   still reads it until closed), and nothing else: not a file that took
 *   the name since, not one still unnamed, not through a read-only node
 *   nor a format node.
 *
 * Each test runs with O_TMPFILE and with the temporary-name fallback, in a
 * directory of the default temporary directory and on tmpfs (/dev/shm).
 */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "block/block_int.h"
#include "../../block/file-create.h"
#include "test-error.h"

#define TMPFS_MAGIC_NUMBER 0x01021994   /* statfs(2): TMPFS_MAGIC */

typedef struct Variant {
    bool tmpfile;
    bool on_tmpfs;
} Variant;

typedef struct Fixture {
    char *dir;
    char *path;
} Fixture;

static void fixture_setup(Fixture *f, gconstpointer data)
{
    const Variant *v = data;
    struct statfs sfs;

    file_create_use_tmpfile(v->tmpfile);
    if (v->on_tmpfs) {
        if (statfs("/dev/shm", &sfs) < 0 ||
            sfs.f_type != TMPFS_MAGIC_NUMBER) {
            g_test_skip("/dev/shm is not a tmpfs");
            return;
        }
        f->dir = g_strdup("/dev/shm/qil-create-XXXXXX");
        g_assert_nonnull(g_mkdtemp(f->dir));
    } else {
        f->dir = g_dir_make_tmp("qil-create-XXXXXX", NULL);
        g_assert_nonnull(f->dir);
    }
    f->path = g_build_filename(f->dir, "new.img", NULL);
}

static void fixture_teardown(Fixture *f, gconstpointer data)
{
    g_autoptr(GDir) dir = NULL;
    const char *name;

    if (!f->dir) {
        return;
    }
    dir = g_dir_open(f->dir, 0, NULL);
    while (dir && (name = g_dir_read_name(dir))) {
        g_autofree char *p = g_build_filename(f->dir, name, NULL);

        unlink(p);
    }
    rmdir(f->dir);
    g_free(f->dir);
    g_free(f->path);
}

/* The directory's entries, sorted, joined by spaces ("" if empty). */
static char *dir_list(Fixture *f)
{
    g_autoptr(GDir) dir = g_dir_open(f->dir, 0, NULL);
    g_autoptr(GPtrArray) names = g_ptr_array_new_with_free_func(g_free);
    const char *name;

    while ((name = g_dir_read_name(dir))) {
        g_ptr_array_add(names, g_strdup(name));
    }
    g_ptr_array_sort(names, (GCompareFunc)g_strcmp0);
    g_ptr_array_add(names, NULL);
    return g_strjoinv(" ", (char **)names->pdata);
}

/* While uncommitted: no target, and only the temporary name if any. */
static void assert_unnamed(Fixture *f, FileCreate *fc, const Variant *v)
{
    g_autofree char *list = dir_list(f);

    g_assert_false(g_file_test(f->path, G_FILE_TEST_EXISTS));
    if (v->tmpfile) {
        g_assert_null(file_create_temp_path(fc));
        g_assert_cmpstr(list, ==, "");
    } else {
        g_autofree char *base = NULL;

        g_assert_nonnull(file_create_temp_path(fc));
        base = g_path_get_basename(file_create_temp_path(fc));
        g_assert_cmpstr(list, ==, base);
        g_assert_true(g_str_has_prefix(base, ".new.img."));
        g_assert_cmpuint(strlen(base), ==, strlen(".new.img.") + 6);
    }
}

static void write_all(int fd, const char *s)
{
    g_assert_cmpint(pwrite(fd, s, strlen(s), 0), ==, strlen(s));
}

static void test_commit(Fixture *f, gconstpointer data)
{
    g_autoptr(FileCreate) fc = NULL;
    g_autofree char *contents = NULL;
    g_autofree char *list = NULL;
    mode_t mask = umask(022);
    struct stat st;

    if (!f->dir) {
        return;
    }
    fc = file_create_new(f->path, &error_abort);
    assert_unnamed(f, fc, data);
    write_all(file_create_fd(fc), "image bytes");
    file_create_wrote(fc, 11);
    g_assert_false(file_create_is_committed(fc));

    g_assert_cmpint(file_create_commit(fc, &error_abort), ==, 0);
    g_assert_true(file_create_is_committed(fc));
    g_assert_cmpint(file_create_commit(fc, &error_abort), ==, 0);
    g_assert_true(g_file_get_contents(f->path, &contents, NULL, NULL));
    g_assert_cmpstr(contents, ==, "image bytes");
    g_assert_cmpint(stat(f->path, &st), ==, 0);
    g_assert_cmpint(st.st_mode & 07777, ==, 0644);
    umask(mask);

    /* Dropping a committed file keeps it; nothing else is left. */
    g_clear_pointer(&fc, file_create_unref);
    list = dir_list(f);
    g_assert_cmpstr(list, ==, "new.img");
}

static void test_abort(Fixture *f, gconstpointer data)
{
    g_autoptr(FileCreate) fc = NULL;
    g_autofree char *list = NULL;

    if (!f->dir) {
        return;
    }
    fc = file_create_new(f->path, &error_abort);
    write_all(file_create_fd(fc), "half an image");
    /* Another reference (a node that has it open) keeps it alive. */
    file_create_ref(fc);
    file_create_unref(fc);
    assert_unnamed(f, fc, data);
    g_clear_pointer(&fc, file_create_unref);
    list = dir_list(f);
    g_assert_cmpstr(list, ==, "");
}

static void test_name_taken(Fixture *f, gconstpointer data)
{
    g_autoptr(FileCreate) fc = NULL;
    g_autofree char *contents = NULL;
    g_autofree char *list = NULL;
    Error *err = NULL;

    if (!f->dir) {
        return;
    }
    /*
     * Taken before by a regular file: replaced, but only at commit; an
     * abandoned creation leaves it as it was.
     */
    g_assert_true(g_file_set_contents(f->path, "theirs", -1, NULL));
    fc = file_create_new(f->path, &error_abort);
    write_all(file_create_fd(fc), "ours");
    g_assert_true(g_file_get_contents(f->path, &contents, NULL, NULL));
    g_assert_cmpstr(contents, ==, "theirs");
    g_clear_pointer(&contents, g_free);
    g_clear_pointer(&fc, file_create_unref);
    g_assert_true(g_file_get_contents(f->path, &contents, NULL, NULL));
    g_assert_cmpstr(contents, ==, "theirs");
    g_clear_pointer(&contents, g_free);
    fc = file_create_new(f->path, &error_abort);
    write_all(file_create_fd(fc), "ours");
    g_assert_cmpint(file_create_commit(fc, &error_abort), ==, 0);
    g_clear_pointer(&fc, file_create_unref);
    g_assert_true(g_file_get_contents(f->path, &contents, NULL, NULL));
    g_assert_cmpstr(contents, ==, "ours");
    g_clear_pointer(&contents, g_free);
    list = dir_list(f);
    g_assert_cmpstr(list, ==, "new.img");
    g_clear_pointer(&list, g_free);
    g_assert_cmpint(unlink(f->path), ==, 0);
    /* A directory, a dangling symlink: refused. */
    g_assert_cmpint(mkdir(f->path, 0755), ==, 0);
    g_assert_null(file_create_new(f->path, &err));
    test_error_expect(&err, "Could not create");
    g_assert_cmpint(rmdir(f->path), ==, 0);
    g_assert_cmpint(symlink("nowhere", f->path), ==, 0);
    g_assert_null(file_create_new(f->path, &err));
    test_error_expect(&err, "File exists");
    g_assert_cmpint(unlink(f->path), ==, 0);

    /* Taken while the new file was written: commit refuses, keeps theirs. */
    fc = file_create_new(f->path, &error_abort);
    write_all(file_create_fd(fc), "ours");
    g_assert_true(g_file_set_contents(f->path, "theirs", -1, NULL));
    g_assert_cmpint(file_create_commit(fc, &err), ==, -1);
    test_error_expect(&err, "File exists");
    g_assert_false(file_create_is_committed(fc));
    g_clear_pointer(&fc, file_create_unref);
    g_assert_true(g_file_get_contents(f->path, &contents, NULL, NULL));
    g_assert_cmpstr(contents, ==, "theirs");
    list = dir_list(f);
    g_assert_cmpstr(list, ==, "new.img");
}

static void test_no_directory(Fixture *f, gconstpointer data)
{
    g_autofree char *path = NULL;
    Error *err = NULL;

    if (!f->dir) {
        return;
    }
    path = g_build_filename(f->dir, "missing", "new.img", NULL);
    g_assert_null(file_create_new(path, &err));
    test_error_expect(&err, "No such file or directory");
}

/* SIGKILL while writing: with O_TMPFILE nothing is left at all. */
static void test_killed(Fixture *f, gconstpointer data)
{
    const Variant *v = data;
    g_autofree char *list = NULL;
    int ready[2];
    pid_t pid;
    char c;

    if (!f->dir) {
        return;
    }
    g_assert_cmpint(pipe(ready), ==, 0);
    pid = fork();
    g_assert_cmpint(pid, >=, 0);
    if (pid == 0) {
        FileCreate *fc = file_create_new(f->path, &error_abort);

        write_all(file_create_fd(fc), "never complete");
        if (write(ready[1], "r", 1) != 1) {
            _exit(1);
        }
        pause();
        _exit(0);
    }
    close(ready[1]);
    g_assert_cmpint(read(ready[0], &c, 1), ==, 1);
    close(ready[0]);
    g_assert_cmpint(kill(pid, SIGKILL), ==, 0);
    g_assert_cmpint(waitpid(pid, NULL, 0), ==, pid);

    g_assert_false(g_file_test(f->path, G_FILE_TEST_EXISTS));
    list = dir_list(f);
    if (v->tmpfile) {
        g_assert_cmpstr(list, ==, "");
    } else {
        /* The fallback's known limit: the temporary name stays. */
        g_assert_true(g_str_has_prefix(list, ".new.img."));
    }
}

static GHashTable *size_opts(const char *extra)
{
    g_autofree char *s = g_strdup_printf("size=1M%s%s", extra ? "," : "",
                                         extra ? extra : "");

    return qemu_opts_parse(s, NULL, &error_abort);
}

/* bdrv_create_open(): unnamed while written; named by bdrv_create_finish. */
static void test_bdrv_create_open(Fixture *f, gconstpointer data)
{
    g_autoptr(GHashTable) opts = NULL;
    g_autoptr(GHashTable) opts2 = NULL;
    g_autofree char *contents = NULL;
    g_autofree char *list = NULL;
    BlockDriverState *bs;
    gsize len;

    if (!f->dir) {
        return;
    }
    /* Closed before finish: gone. */
    opts = size_opts(NULL);
    bs = bdrv_create_open("raw", f->path, opts, 0, NULL, &error_abort);
    g_assert_cmpint(bdrv_pwrite(bs, 4096, "data", 4, 0, &error_abort), ==, 0);
    g_assert_false(g_file_test(f->path, G_FILE_TEST_EXISTS));
    bdrv_close(bs);
    list = dir_list(f);
    g_assert_cmpstr(list, ==, "");

    /* Finished: there, whole, and still open for writing. */
    opts2 = size_opts(NULL);
    bs = bdrv_create_open("raw", f->path, opts2, 0, NULL, &error_abort);
    g_assert_cmpint(bdrv_pwrite(bs, 4096, "data", 4, 0, &error_abort), ==, 0);
    g_assert_false(g_file_test(f->path, G_FILE_TEST_EXISTS));
    g_assert_cmpint(bdrv_create_finish(bs, &error_abort), ==, 0);
    g_assert_cmpint(bdrv_create_finish(bs, &error_abort), ==, 0);
    g_assert_cmpint(bdrv_pwrite(bs, 0, "head", 4, 0, &error_abort), ==, 0);
    bdrv_close(bs);
    g_assert_true(g_file_get_contents(f->path, &contents, &len, NULL));
    g_assert_cmpuint(len, ==, 1024 * 1024);
    g_assert_cmpmem(contents, 4, "head", 4);
    g_assert_cmpmem(contents + 4096, 4, "data", 4);
    g_clear_pointer(&list, g_free);
    list = dir_list(f);
    g_assert_cmpstr(list, ==, "new.img");
}

/* bdrv_create(): named when it returns; never on failure. */
static void test_bdrv_create(Fixture *f, gconstpointer data)
{
    g_autoptr(GHashTable) opts = size_opts("preallocation=full");
    g_autoptr(GHashTable) bad = size_opts("preallocation=full,nope=1");
    g_autofree char *list = NULL;
    Error *err = NULL;
    struct stat st;

    if (!f->dir) {
        return;
    }
    g_assert_cmpint(bdrv_create("raw", f->path, bad, NULL, &err), ==, -1);
    test_error_expect(&err, "Invalid parameter 'nope'");
    list = dir_list(f);
    g_assert_cmpstr(list, ==, "");

    g_assert_cmpint(bdrv_create("raw", f->path, opts, NULL, &error_abort), ==, 0);
    g_assert_cmpint(stat(f->path, &st), ==, 0);
    g_assert_cmpint(st.st_size, ==, 1024 * 1024);
    g_assert_cmpint(st.st_blocks * 512, >=, 1024 * 1024);  /* written */
}

/* Interrupted (the tool's signal flag): nothing gets its name. */
static void test_interrupted(Fixture *f, gconstpointer data)
{
    static volatile sig_atomic_t interrupted;
    g_autoptr(GHashTable) full = size_opts("preallocation=full");
    g_autoptr(GHashTable) off = size_opts(NULL);
    g_autofree char *list = NULL;
    BlockDriverState *bs;
    Error *err = NULL;

    if (!f->dir) {
        return;
    }
    interrupted = 1;
    /* The full preallocation loop stops... */
    g_assert_cmpint(bdrv_create("raw", f->path, full, &interrupted, &err),
                    ==, -1);
    test_error_expect(&err, "Interrupted");
    /* ...and an image made before the signal is not named. */
    bs = bdrv_create_open("raw", f->path, off, 0, &interrupted,
                          &error_abort);
    g_assert_cmpint(bdrv_create_finish(bs, &err), ==, -1);
    test_error_expect(&err, "Interrupted");
    bdrv_close(bs);
    list = dir_list(f);
    g_assert_cmpstr(list, ==, "");

    /* The flag is the caller's: another creation, without it, goes on. */
    bs = bdrv_create_open("raw", f->path, off, 0, NULL, &error_abort);
    g_assert_cmpint(bdrv_create_finish(bs, &error_abort), ==, 0);
    bdrv_close(bs);
    /* A resize with full preallocation, on an image given the flag. */
    bs = bdrv_open(f->path, "raw", NULL, BDRV_O_RDWR, &error_abort);
    bdrv_set_interrupt(bs, &interrupted);
    g_assert_cmpint(bdrv_truncate(bs, 8 << 20, PREALLOC_MODE_FULL, &err),
                    ==, -1);
    test_error_expect(&err, "Interrupted");
    bdrv_set_interrupt(bs, NULL);
    g_assert_cmpint(bdrv_truncate(bs, 8 << 20, PREALLOC_MODE_FULL,
                                  &error_abort), ==, 0);
    bdrv_close(bs);
}

/* bdrv_delete_file(): the name goes; the open node still reads the bytes. */
static void test_delete(Fixture *f, gconstpointer data)
{
    g_autoptr(GHashTable) opts = size_opts(NULL);
    g_autofree char *list = NULL;
    BlockDriverState *bs;
    char buf[4];

    if (!f->dir) {
        return;
    }
    bs = bdrv_create_open("file", f->path, opts, 0, NULL, &error_abort);
    g_assert_cmpint(bdrv_pwrite(bs, 0, "data", 4, 0, &error_abort), ==, 0);
    g_assert_cmpint(bdrv_create_finish(bs, &error_abort), ==, 0);
    g_assert_true(g_file_test(f->path, G_FILE_TEST_EXISTS));
    g_assert_cmpint(bdrv_delete_file(bs, &error_abort), ==, 0);
    g_assert_false(g_file_test(f->path, G_FILE_TEST_EXISTS));
    g_assert_cmpint(bdrv_pread(bs, 0, buf, 4, &error_abort), ==, 0);
    g_assert_cmpmem(buf, 4, "data", 4);
    bdrv_close(bs);
    list = dir_list(f);
    g_assert_cmpstr(list, ==, "");
}

/* What bdrv_delete_file() refuses, leaving every file where it was. */
static void test_delete_refused(Fixture *f, gconstpointer data)
{
    g_autoptr(GHashTable) opts = size_opts(NULL);
    g_autoptr(GHashTable) opts2 = size_opts(NULL);
    g_autofree char *moved = NULL;
    g_autofree char *list = NULL;
    BlockDriverState *bs;
    Error *err = NULL;

    if (!f->dir) {
        return;
    }
    /* still unnamed */
    bs = bdrv_create_open("file", f->path, opts, 0, NULL, &error_abort);
    g_assert_cmpint(bdrv_delete_file(bs, &err), ==, -1);
    test_error_expect(&err, "has no name yet");
    bdrv_close(bs);

    g_assert_cmpint(bdrv_create("raw", f->path, opts2, NULL, &error_abort), ==, 0);
    /* read-only, and a format node */
    bs = bdrv_open(f->path, "file", NULL, 0, &error_abort);
    g_assert_cmpint(bdrv_delete_file(bs, &err), ==, -1);
    test_error_expect(&err, "Image is read-only");
    bdrv_close(bs);
    bs = bdrv_open(f->path, "raw", NULL, BDRV_O_RDWR, &error_abort);
    g_assert_cmpint(bdrv_delete_file(bs, &err), ==, -1);
    test_error_expect(&err, "Driver 'raw' does not support image deletion");
    bdrv_close(bs);

    /* another file under the name now: it stays */
    bs = bdrv_open(f->path, "file", NULL, BDRV_O_RDWR, &error_abort);
    moved = g_strconcat(f->path, ".moved", NULL);
    g_assert_cmpint(rename(f->path, moved), ==, 0);
    g_assert_true(g_file_set_contents(f->path, "other", -1, NULL));
    g_assert_cmpint(bdrv_delete_file(bs, &err), ==, -1);
    test_error_expect(&err, "the name now refers to another file");
    g_assert_true(g_file_test(f->path, G_FILE_TEST_EXISTS));
    bdrv_close(bs);
    unlink(moved);
    list = dir_list(f);
    g_assert_cmpstr(list, ==, "new.img");
}

static void add(const char *name, void (*fn)(Fixture *, gconstpointer))
{
    static const Variant variants[] = {
        { .tmpfile = true, .on_tmpfs = false },
        { .tmpfile = false, .on_tmpfs = false },
        { .tmpfile = true, .on_tmpfs = true },
        { .tmpfile = false, .on_tmpfs = true },
    };
    static const char *const variant_names[] = {
        "tmpfile", "temp-name", "tmpfs-tmpfile", "tmpfs-temp-name",
    };

    for (size_t i = 0; i < G_N_ELEMENTS(variants); i++) {
        g_autofree char *path = g_strdup_printf("/block/file-create/%s/%s",
                                                variant_names[i], name);

        g_test_add(path, Fixture, &variants[i], fixture_setup, fn,
                   fixture_teardown);
    }
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    add("commit", test_commit);
    add("abort", test_abort);
    add("name-taken", test_name_taken);
    add("no-directory", test_no_directory);
    add("killed", test_killed);
    add("bdrv-create-open", test_bdrv_create_open);
    add("bdrv-create", test_bdrv_create);
    add("interrupted", test_interrupted);
    add("delete", test_delete);
    add("delete-refused", test_delete_refused);
    return g_test_run();
}
