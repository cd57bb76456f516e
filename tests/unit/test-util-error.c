/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * util/error.c: what each kind of errp does with an error, in particular
 * &error_abort (abort with the message and where it was set) and
 * &error_fatal (print the message, exit 1). Those two run in a
 * subprocess whose exit and stderr are checked.
 */
#include <errno.h>

#include <glib.h>

#include "qemu/error.h"
#include "test-error.h"

static int fail_with(const char *what, Error **errp)
{
    error_setg(errp, "cannot %s", what);
    return -1;
}

static void test_error_to_caller(void)
{
    Error *err = NULL;

    g_assert_cmpint(fail_with("frobnicate", &err), ==, -1);
    g_assert_cmpstr(error_get_pretty(err), ==, "cannot frobnicate");
    error_prepend(&err, "disk %d: ", 3);
    g_assert_cmpstr(error_get_pretty(err), ==, "disk 3: cannot frobnicate");
    test_error_expect(&err, "cannot frob");
    g_assert_null(err);

    /* NULL: the caller does not want the message. */
    g_assert_cmpint(fail_with("frobnicate", NULL), ==, -1);
}

static void test_error_errno(void)
{
    Error *err = NULL;
    g_autofree char *want = g_strdup_printf("open x: %s", g_strerror(ENOENT));

    error_setg_errno(&err, ENOENT, "open %s", "x");
    g_assert_cmpstr(error_get_pretty(err), ==, want);
    g_assert_cmpint(error_get_errno(err), ==, ENOENT);
    /* A prefix keeps it; an error set without one has none. */
    error_prepend(&err, "in y: ");
    g_assert_cmpint(error_get_errno(err), ==, ENOENT);
    /* The reason QEMU prints after its own prefix: the errno's text. */
    g_assert_cmpstr(error_get_reason(err), ==, g_strerror(ENOENT));
    error_free(err);
    err = NULL;
    error_setg(&err, "no errno");
    g_assert_cmpint(error_get_errno(err), ==, 0);
    g_assert_cmpstr(error_get_reason(err), ==, "no errno");
    error_free(err);
}

static void test_error_propagate(void)
{
    Error *local = NULL, *err = NULL;

    error_propagate(&err, NULL);
    g_assert_null(err);
    fail_with("first", &local);
    error_propagate(&err, local);
    test_error_expect(&err, "cannot first");
    /* Into NULL: freed (ASan sees a leak otherwise). */
    local = NULL;
    fail_with("second", &local);
    error_propagate(NULL, local);
}

/* error_abort and error_fatal stay NULL whatever happens to others. */
/* Hints and causes travel with the error, through prepend and propagate. */
static void test_error_hint_and_causes(void)
{
    Error *local = NULL, *err = NULL;

    error_append_hint(&local, "ignored: no error yet\n");
    error_add_report_before(&local, "ignored too");
    g_assert_null(local);
    error_setg(&local, "Too much");
    g_assert_null(error_get_hint(local));
    g_assert_null(error_get_reports_before(local));
    error_append_hint(&local, "You can %s\n", "repair it");
    error_append_hint(&local, "or not\n");
    error_add_report_before(&local, "first cause");
    error_add_report_before(&local, "second %d", 2);
    error_propagate(&err, local);
    error_prepend(&err, "Could not open: ");
    g_assert_cmpstr(error_get_pretty(err), ==, "Could not open: Too much");
    g_assert_cmpstr(error_get_hint(err), ==, "You can repair it\nor not\n");
    g_assert_cmpstr(error_get_reports_before(err), ==,
                    "first cause\nsecond 2");
    error_free(err);
}

static void test_error_abort_untouched(void)
{
    Error *err = NULL;

    g_assert_cmpint(fail_with("x", &err), ==, -1);
    error_free(err);
    g_assert_null(error_abort);
    g_assert_null(error_fatal);
}

static void test_error_abort(void)
{
    if (g_test_subprocess()) {
        fail_with("frobnicate", &error_abort);
        return;     /* not reached */
    }
    g_test_trap_subprocess(NULL, 0, 0);
    g_test_trap_assert_failed();
    g_test_trap_assert_stderr("*Unexpected error in fail_with() at "
                              "*test-util-error.c:*: cannot frobnicate*");
}

static void test_error_abort_propagate(void)
{
    if (g_test_subprocess()) {
        Error *local = NULL;

        fail_with("propagate", &local);
        error_propagate(&error_abort, local);
        return;     /* not reached */
    }
    g_test_trap_subprocess(NULL, 0, 0);
    g_test_trap_assert_failed();
    g_test_trap_assert_stderr("*Unexpected error in fail_with()*"
                              "cannot propagate*");
}

static void test_error_fatal(void)
{
    if (g_test_subprocess()) {
        fail_with("go on", &error_fatal);
        return;     /* not reached */
    }
    g_test_trap_subprocess(NULL, 0, 0);
    g_test_trap_assert_failed();
    /* The message says what, without the location abort gives. */
    g_test_trap_assert_stderr("*: cannot go on\n");
    g_test_trap_assert_stderr_unmatched("*Unexpected*");
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/util/error/to-caller", test_error_to_caller);
    g_test_add_func("/util/error/errno", test_error_errno);
    g_test_add_func("/util/error/propagate", test_error_propagate);
    g_test_add_func("/util/error/hint-and-causes",
                    test_error_hint_and_causes);
    g_test_add_func("/util/error/abort-untouched",
                    test_error_abort_untouched);
    g_test_add_func("/util/error/abort", test_error_abort);
    g_test_add_func("/util/error/abort-propagate",
                    test_error_abort_propagate);
    g_test_add_func("/util/error/fatal", test_error_fatal);
    return g_test_run();
}
