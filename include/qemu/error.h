/*
 * Error reporting in QEMU's style: every failure a user can cause travels up
 * as an Error object through an "Error **errp" argument. Functions return
 * 0 / -1 or a pointer / NULL, and set *errp on failure. Passing errp == NULL
 * means the caller does not care about the message.
 */
#ifndef QEMU_ERROR_H
#define QEMU_ERROR_H

#include <glib.h>

typedef struct Error Error;

/* Set *errp to a new error with a printf-style message (if errp != NULL). */
void error_setg(Error **errp, const char *fmt, ...) G_GNUC_PRINTF(2, 3);

/* As error_setg, with ": <strerror(os_errno)>" appended. */
void error_setg_errno(Error **errp, int os_errno, const char *fmt, ...)
    G_GNUC_PRINTF(3, 4);

/* Move local_err into *dst_errp (or free it when dst_errp is NULL). */
void error_propagate(Error **dst_errp, Error *local_err);

/* Prefix the message of *errp (if any) with a printf-style string. */
void error_prepend(Error **errp, const char *fmt, ...) G_GNUC_PRINTF(2, 3);

const char *error_get_pretty(const Error *err);

void error_free(Error *err);

/* Free *errp and set it back to NULL. */
void error_free_or_abort(Error **errp);

G_DEFINE_AUTOPTR_CLEANUP_FUNC(Error, error_free)

#endif
