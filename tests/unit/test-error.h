/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Checking errors in the tests. An error that must not happen needs no
 * helper: pass &error_abort, and the test aborts with the message and
 * where it was set. An error that must happen is checked here.
 */
#ifndef TEST_ERROR_H
#define TEST_ERROR_H

#include <string.h>

#include <glib.h>

#include "qemu/error.h"

/*
 * *errp holds an error whose message contains expect; free it and set
 * *errp back to NULL for the next call. A macro, so that a failure names
 * the caller's line and shows both texts.
 */
#define test_error_expect(errp, expect)                                  \
    do {                                                                \
        Error **test_errp_ = (errp);                                    \
        const char *test_expect_ = (expect);                            \
                                                                        \
        g_assert_nonnull(*test_errp_);                                  \
        if (!strstr(error_get_pretty(*test_errp_), test_expect_)) {     \
            g_assertion_message_cmpstr(G_LOG_DOMAIN, __FILE__, __LINE__, \
                                       G_STRFUNC, "error message",      \
                                       error_get_pretty(*test_errp_),   \
                                       "lacks", test_expect_);          \
        }                                                               \
        error_free_or_abort(test_errp_);                                \
    } while (0)

#endif
