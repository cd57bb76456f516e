/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Error objects (see include/qemu/error.h).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qemu/error.h"

struct Error {
    char *msg;
    /* Where error_setg was called, for &error_abort's message. */
    const char *src;
    const char *func;
    int line;
    int os_errno;               /* error_setg_errno's, or 0 */
    GString *hint;              /* error_append_hint's lines, or NULL */
    GString *before;            /* error_add_report_before's, or NULL */
};

Error *error_abort;
Error *error_fatal;

/*
 * Act on err when the caller asked for it through &error_abort or
 * &error_fatal; otherwise return and let the caller store it.
 */
static void error_handle(Error **errp, Error *err)
{
    if (errp == &error_abort) {
        fprintf(stderr, "Unexpected error in %s() at %s:%d: %s\n",
                err->func, err->src, err->line, err->msg);
        abort();
    }
    if (errp == &error_fatal) {
        const char *prog = g_get_prgname();

        fprintf(stderr, "%s: %s\n", prog ? prog : "error", err->msg);
        exit(1);
    }
}

static void error_setv(Error **errp, const char *src, int line,
                       const char *func, const char *suffix,
                       const char *fmt, va_list ap)
{
    Error *err;

    if (!errp) {
        return;
    }
    /* Setting an error twice loses the first: always a programming error. */
    g_assert(*errp == NULL);

    err = g_new0(Error, 1);
    err->msg = g_strdup_vprintf(fmt, ap);
    if (suffix) {
        char *full = g_strconcat(err->msg, ": ", suffix, NULL);
        g_free(err->msg);
        err->msg = full;
    }
    err->src = src;
    err->line = line;
    err->func = func;
    error_handle(errp, err);
    *errp = err;
}

void error_setg_internal(Error **errp, const char *src, int line,
                         const char *func, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    error_setv(errp, src, line, func, NULL, fmt, ap);
    va_end(ap);
}

void error_setg_errno_internal(Error **errp, const char *src, int line,
                               const char *func, int os_errno,
                               const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    error_setv(errp, src, line, func, g_strerror(os_errno), fmt, ap);
    va_end(ap);
    if (errp && *errp) {
        (*errp)->os_errno = os_errno;
    }
}

int error_get_errno(const Error *err)
{
    return err->os_errno;
}

const char *error_get_reason(const Error *err)
{
    return err->os_errno ? g_strerror(err->os_errno) : err->msg;
}

void error_propagate(Error **dst_errp, Error *local_err)
{
    if (!local_err) {
        return;
    }
    error_handle(dst_errp, local_err);
    if (dst_errp && !*dst_errp) {
        *dst_errp = local_err;
    } else {
        error_free(local_err);
    }
}

void error_prepend(Error **errp, const char *fmt, ...)
{
    va_list ap;
    char *prefix, *full;

    if (!errp || !*errp) {
        return;
    }
    va_start(ap, fmt);
    prefix = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    full = g_strconcat(prefix, (*errp)->msg, NULL);
    g_free(prefix);
    g_free((*errp)->msg);
    (*errp)->msg = full;
}

void error_append_hint(Error **errp, const char *fmt, ...)
{
    va_list ap;

    if (!errp || !*errp) {
        return;
    }
    if (!(*errp)->hint) {
        (*errp)->hint = g_string_new(NULL);
    }
    va_start(ap, fmt);
    g_string_append_vprintf((*errp)->hint, fmt, ap);
    va_end(ap);
}

void error_add_report_before(Error **errp, const char *fmt, ...)
{
    va_list ap;

    if (!errp || !*errp) {
        return;
    }
    if (!(*errp)->before) {
        (*errp)->before = g_string_new(NULL);
    } else {
        g_string_append_c((*errp)->before, '\n');
    }
    va_start(ap, fmt);
    g_string_append_vprintf((*errp)->before, fmt, ap);
    va_end(ap);
}

const char *error_get_reports_before(const Error *err)
{
    return err->before ? err->before->str : NULL;
}

const char *error_get_pretty(const Error *err)
{
    return err->msg;
}

const char *error_get_hint(const Error *err)
{
    return err->hint ? err->hint->str : NULL;
}

void error_free(Error *err)
{
    if (err) {
        g_free(err->msg);
        if (err->hint) {
            g_string_free(err->hint, TRUE);
        }
        if (err->before) {
            g_string_free(err->before, TRUE);
        }
        g_free(err);
    }
}

void error_free_or_abort(Error **errp)
{
    g_assert(errp && *errp);
    error_free(*errp);
    *errp = NULL;
}
