/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Strings in the tool's JSON output, quoted byte for byte as qemu-img's
 * (info, map and check print what scripts compare with qemu-img's).
 */
#include <glib.h>

#include "img.h"

/*
 * A string as QEMU's JSON writer quotes it (qobject/qjson.c): the usual
 * escapes, and every other character outside printable ASCII as \uXXXX
 * (a surrogate pair above U+FFFF); a byte that is not UTF-8 as U+FFFD.
 */
void img_json_append_quoted(GString *out, const char *s)
{
    g_string_append_c(out, '"');
    while (*s) {
        gunichar c = g_utf8_get_char_validated(s, -1);

        if (c == (gunichar)-1 || c == (gunichar)-2) {
            c = 0xfffd;
            s++;
        } else {
            s = g_utf8_next_char(s);
        }
        switch (c) {
        case '"':
            g_string_append(out, "\\\"");
            break;
        case '\\':
            g_string_append(out, "\\\\");
            break;
        case '\b':
            g_string_append(out, "\\b");
            break;
        case '\f':
            g_string_append(out, "\\f");
            break;
        case '\n':
            g_string_append(out, "\\n");
            break;
        case '\r':
            g_string_append(out, "\\r");
            break;
        case '\t':
            g_string_append(out, "\\t");
            break;
        default:
            if (c > 0xffff) {
                c -= 0x10000;
                g_string_append_printf(out, "\\u%04X\\u%04X",
                                       0xd800 | (c >> 10),
                                       0xdc00 | (c & 0x3ff));
            } else if (c < 0x20 || c >= 0x7f) {
                g_string_append_printf(out, "\\u%04X", c);
            } else {
                g_string_append_c(out, c);
            }
        }
    }
    g_string_append_c(out, '"');
}
