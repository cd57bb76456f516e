/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * qemu-img-lite and qemu-nbd-lite: error messages, "PROGRAM: [FILE: ]MSG"
 * on stderr. PROGRAM is the name the program was called by (QEMU's
 * error_get_progname()): a qemu-img-lite installed as "qemu-img" speaks
 * as qemu-img, which scripts that match messages expect.
 */
#include <stdio.h>
#include <string.h>

#include "img.h"

static char *img_progname;

void img_set_progname(const char *argv0)
{
    g_free(img_progname);
    img_progname = argv0 ? g_path_get_basename(argv0) : NULL;
}

const char *img_get_progname(void)
{
    return img_progname ? img_progname : "qemu-img-lite";
}

void img_error(const char *file, const char *fmt, ...)
{
    va_list ap;

    /*
     * stdout is not flushed first, as in qemu-img: into one pipe or file
     * (2>&1), its buffered lines come after the error, where scripts
     * written against qemu-img's output expect them (qemu-iotests 074).
     */
    fprintf(stderr, "%s: ", img_get_progname());
    if (file) {
        fprintf(stderr, "%s: ", file);
    }
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

void img_error_hint(const Error *err)
{
    if (err && error_get_hint(err)) {
        fputs(error_get_hint(err), stderr);
    }
}

void img_error_before(const Error *err)
{
    const char *lines = err ? error_get_reports_before(err) : NULL;

    while (lines) {
        const char *nl = strchr(lines, '\n');

        img_error(NULL, "%.*s", nl ? (int)(nl - lines) : (int)strlen(lines),
                  lines);
        lines = nl ? nl + 1 : NULL;
    }
}

void img_error_free(const char *file, Error *err)
{
    img_error_before(err);
    img_error(file, "%s", error_get_pretty(err));
    img_error_hint(err);
    error_free(err);
}
