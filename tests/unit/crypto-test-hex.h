/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Hex strings for known-answer tests: spaces are ignored, so vectors can
 * be laid out as in the standards that publish them.
 */
#ifndef CRYPTO_TEST_HEX_H
#define CRYPTO_TEST_HEX_H

#include <glib.h>

static inline guint8 *test_unhex(const char *hex, size_t *len)
{
    GByteArray *out = g_byte_array_new();

    for (const char *p = hex; *p; ) {
        guint8 byte;

        if (g_ascii_isspace(*p)) {
            p++;
            continue;
        }
        g_assert(g_ascii_isxdigit(p[0]) && g_ascii_isxdigit(p[1]));
        byte = g_ascii_xdigit_value(p[0]) << 4 | g_ascii_xdigit_value(p[1]);
        g_byte_array_append(out, &byte, 1);
        p += 2;
    }
    if (len) {
        *len = out->len;
    }
    return g_byte_array_free(out, FALSE);
}

#endif
