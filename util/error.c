/*
 * Error objects (see include/qemu/error.h).
 */
#include <errno.h>
#include <string.h>

#include "qemu/error.h"

struct Error {
    char *msg;
};

static void error_setv(Error **errp, const char *suffix,
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
    *errp = err;
}

void error_setg(Error **errp, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    error_setv(errp, NULL, fmt, ap);
    va_end(ap);
}

void error_setg_errno(Error **errp, int os_errno, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    error_setv(errp, g_strerror(os_errno), fmt, ap);
    va_end(ap);
}

void error_propagate(Error **dst_errp, Error *local_err)
{
    if (!local_err) {
        return;
    }
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

const char *error_get_pretty(const Error *err)
{
    return err->msg;
}

void error_free(Error *err)
{
    if (err) {
        g_free(err->msg);
        g_free(err);
    }
}

void error_free_or_abort(Error **errp)
{
    g_assert(errp && *errp);
    error_free(*errp);
    *errp = NULL;
}
