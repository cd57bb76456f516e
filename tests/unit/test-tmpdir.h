/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * A scratch directory holding one file, for tests that need an image on
 * disk: made fresh per test, removed (with the file) after it.
 */
#ifndef TEST_TMPDIR_H
#define TEST_TMPDIR_H

#include <glib.h>
#include <glib/gstdio.h>
#include <unistd.h>

typedef struct TestTmpFile {
    char *dir;
    char *path;
} TestTmpFile;

/* Make a new directory named after @prefix; @path names @name inside it. */
static inline void test_tmpfile_init(TestTmpFile *t, const char *prefix,
                                     const char *name)
{
    g_autofree char *tmpl = g_strdup_printf("%s-XXXXXX", prefix);

    t->dir = g_dir_make_tmp(tmpl, NULL);
    g_assert_nonnull(t->dir);
    t->path = g_build_filename(t->dir, name, NULL);
}

static inline void test_tmpfile_clear(TestTmpFile *t)
{
    unlink(t->path);
    g_rmdir(t->dir);
    g_clear_pointer(&t->path, g_free);
    g_clear_pointer(&t->dir, g_free);
}

#endif
