/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Error reporting in QEMU's style: every failure a user can cause travels up
 * as an Error object through an "Error **errp" argument. Functions return
 * 0 / -1 or a pointer / NULL, and set *errp on failure.
 *
 * What the caller passes as errp says what it wants done with a failure:
 *   NULL           it does not care about the message;
 *   &err           it handles the error (err starts NULL, ends set or not);
 *   &error_abort   a failure can only be a bug: print the message and
 *                  where it was set, then abort();
 *   &error_fatal   a failure ends the program: print "prog: message" on
 *                  stderr and exit(1). Only main() and what it calls for
 *                  that purpose may pass it, never library code.
 */
#ifndef QEMU_ERROR_H
#define QEMU_ERROR_H

#include <glib.h>

typedef struct Error Error;

/*
 * Only their addresses matter (error.c compares errp with them); they
 * always stay NULL.
 */
extern Error *error_abort;
extern Error *error_fatal;

/*
 * Set *errp to a new error with a printf-style message (if errp != NULL).
 * A macro so that &error_abort can say where the error was set.
 */
#define error_setg(errp, fmt, ...)                                      \
    error_setg_internal((errp), __FILE__, __LINE__, __func__,           \
                        (fmt), ## __VA_ARGS__)

/* As error_setg, with ": <strerror(os_errno)>" appended. */
#define error_setg_errno(errp, os_errno, fmt, ...)                      \
    error_setg_errno_internal((errp), __FILE__, __LINE__, __func__,     \
                              (os_errno), (fmt), ## __VA_ARGS__)

void error_setg_internal(Error **errp, const char *src, int line,
                         const char *func, const char *fmt, ...)
    G_GNUC_PRINTF(5, 6);
void error_setg_errno_internal(Error **errp, const char *src, int line,
                               const char *func, int os_errno,
                               const char *fmt, ...)
    G_GNUC_PRINTF(6, 7);

/*
 * Move local_err into *dst_errp (or free it when dst_errp is NULL).
 * With &error_abort or &error_fatal it aborts or exits as described above.
 */
void error_propagate(Error **dst_errp, Error *local_err);

/* Prefix the message of *errp (if any) with a printf-style string. */
void error_prepend(Error **errp, const char *fmt, ...) G_GNUC_PRINTF(2, 3);

/*
 * Add advice to *errp (if any), printed on the lines after its message
 * by the programs (QEMU's error_append_hint: fmt ends with its newline).
 * Messages built from error_get_pretty() leave it out.
 */
void error_append_hint(Error **errp, const char *fmt, ...)
    G_GNUC_PRINTF(2, 3);

/*
 * A cause the programs report as an error line of its own before *errp's
 * message (if *errp is set; QEMU reports it with error_report() and then
 * fails with an errno: "Snapshot L1 table offset invalid", then "Could
 * not apply snapshot 'x': Failed to load snapshot: Invalid argument").
 * Lines added later come later.
 */
void error_add_report_before(Error **errp, const char *fmt, ...)
    G_GNUC_PRINTF(2, 3);
/* Those lines, '\n' between them; NULL without any. */
const char *error_get_reports_before(const Error *err);

const char *error_get_pretty(const Error *err);
/* The hint, NULL without one. */
const char *error_get_hint(const Error *err);
/* The errno error_setg_errno() was given (0: an error without one). */
int error_get_errno(const Error *err);
/*
 * What QEMU prints after a prefix of its own ("Failed to empty x: ..."):
 * the errno's text where there is one, else the whole message.
 */
const char *error_get_reason(const Error *err);

void error_free(Error *err);

/* Free *errp and set it back to NULL; abort if no error was set. */
void error_free_or_abort(Error **errp);

G_DEFINE_AUTOPTR_CLEANUP_FUNC(Error, error_free)

#endif
